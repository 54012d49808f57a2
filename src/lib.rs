//! A Rust reimplementation of ggml's `ggml-backend.c` (whisper.rn 0.4.0-rc.4,
//! `wsp_ggml_` prefix) that is a C-ABI drop-in: same symbols, same signatures,
//! same struct layouts, same results.
//!
//! Layout of the crate: modules in layers that import only downward, in
//! the order `scripts/layers` lists (the one place it is written, and
//! checked): plain data and libc at the bottom (`prelude`, `platform`,
//! `fatal`, `ptrmap`, `sys`), the safe handles on C's objects (`ggml`,
//! `handle`: also ggml-alloc's allocator, `talloc`, and the trampolines
//! that fill C's interface tables from safe Rust), tensor copies, the CPU
//! backend and graph copies (`copy`, `cpu`, `graph_copy`), the scheduler
//! (`sched`), and the exports (`ffi`, thin and boring). `unsafe` lives only
//! in the boundary layer the script names (the modules whose job is C, each
//! unsafe block with its `// SAFETY:` line); `copy`, `cpu`, `graph_copy`
//! and the scheduler forbid it. `fake_c` (unit tests only) is a C world of
//! plain structs for the tests of modules without `unsafe`.
//!
//! Only `ffi` is public: everything the library offers is its C API; the
//! other modules are private, so that the dead-code lint sees all of them.

// Without std wherever panics abort (every build users link): no std
// machinery (backtraces, symbolization) in the library. See platform.rs.
#![cfg_attr(not(any(feature = "std", panic = "unwind")), no_std)]

extern crate alloc;

mod copy;
mod cpu;
#[cfg(test)]
mod fake_c;
mod fatal;
pub mod ffi;
/// cbindgen:ignore
mod ggml;
mod graph_copy;
mod handle;
mod platform;
mod prelude;
mod ptrmap;
mod sched;
mod sys;
// (ggml-alloc's allocator is the wrapper layer's, named here as the
// modules above it name it)
use handle::talloc;

/// The handle types, for the tests of what the compiler refuses of them
/// (ffi-tests/tests/handles.rs). Not part of the API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::ggml::{wsp_ggml_tensor, zeroed_tensor, GraphRef, TensorId, TensorRef};
    pub use crate::handle::{BackendRef, BufferRef, OwnedBuffer, Placer};
    pub use crate::sched::{Sched, SchedCell};
}

/// Every struct layout fact the crate relies on, as (C expression, value
/// in this build): ffi-tests compiles the expressions with the target's C
/// compiler against the original headers and compares. Not part of the C API.
#[doc(hidden)]
pub fn layouts() -> alloc::vec::Vec<(&'static str, usize)> {
    sys::layouts().collect()
}
