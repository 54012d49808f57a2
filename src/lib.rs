//! A Rust reimplementation of ggml's `ggml-backend.c` (whisper.rn 0.4.0-rc.4,
//! `wsp_ggml_` prefix) that is a C-ABI drop-in: same symbols, same signatures,
//! same struct layouts, same results.
//!
//! Layout of the crate, in layers that import only downward (bottom to
//! top; `scripts/layers` checks it):
//! - `prelude`, `platform`, `fatal`, `ptrmap`, `sys`: `alloc`'s types under
//!   std's prelude names; what the library takes from libc (stderr, abort,
//!   getenv, clock) and, without std, its allocator and panic handler; the
//!   error policy; a small map from 64-bit keys; every `#[repr(C)]` mirror,
//!   the functions imported from ggml (ggml.c and ggml-alloc.c stay C, in
//!   the user's build) and the layout facts;
//! - `ggml`: safe handles on ggml's tensors and graphs (sys types only);
//! - `handle`: the borrowed `BackendRef` and `BufferRef` and their owners
//!   (`OwnedBackend`, `OwnedBuffer`), the dispatch through their interfaces, the host-buffer interface, and `FromC`, the one place where
//!   C's pointers become handles (making one is `unsafe` everywhere);
//! - `copy`, `cpu`, `graph_copy`: tensor copies between backends, the CPU
//!   backend, copying a graph to another backend and comparing backends;
//! - `sched`: the multi-backend split scheduler (its own layers: ids, table,
//!   record, allocator, state, passes, reuse, placement, cell; the driver);
//! - `ffi`: the exported `extern "C"` functions, thin and boring.
//!
//! Only `ffi` is public: everything the library offers is its C API; the
//! other modules are private, so that the dead-code lint sees all of them.

// Without std wherever panics abort (every build users link): no std
// machinery (backtraces, symbolization) in the library. See platform.rs.
#![cfg_attr(not(any(feature = "std", panic = "unwind")), no_std)]

extern crate alloc;

mod copy;
mod cpu;
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
mod talloc;

/// Every struct layout fact the crate relies on, as (C expression, value
/// in this build): ffi-tests compiles the expressions with the target's C
/// compiler against the original headers and compares. Not part of the C API.
#[doc(hidden)]
pub fn layouts() -> alloc::vec::Vec<(&'static str, usize)> {
    sys::layouts().collect()
}
