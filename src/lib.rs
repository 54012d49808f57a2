//! A Rust reimplementation of ggml's `ggml-backend.c` (whisper.rn 0.4.0-rc.4,
//! `wsp_ggml_` prefix) that is a C-ABI drop-in: same symbols, same signatures,
//! same struct layouts, same results.
//!
//! Layout of the crate:
//! - `sys`: every `#[repr(C)]` mirror, the functions imported from ggml
//!   (ggml.c and ggml-alloc.c stay C, in the user's build), layout checks;
//! - `ggml`: safe handles on ggml's tensors and graphs;
//! - `buffer`, `backend`: the two interface structs and their dispatch;
//! - `copy`: tensor copies between backends;
//! - `cpu`: the CPU backend;
//! - `sched`: the multi-backend split scheduler;
//! - `graph_copy`: copying a graph to another backend and comparing backends;
//! - `ptrmap`: a small map from 64-bit keys (graph copies; the scheduler's
//!   user assignments and input copies; it keys its tensors in a
//!   ggml-compatible table of its own, `sched/table.rs`);
//! - `platform`: what the library takes from libc (stderr, abort, getenv,
//!   clock) and, without std, its allocator and panic handler;
//! - `prelude`: `alloc`'s types under the names std's prelude gives them;
//! - `ffi`: the exported `extern "C"` functions, thin and boring; the C
//!   pointers they are given become handles through one trait, `ffi::FromC`
//!   (making a handle from a raw pointer is `unsafe` everywhere).
//!
//! Only `ffi` is public: everything the library offers is its C API; the
//! other modules are private, so that the dead-code lint sees all of them.

// Without std wherever panics abort (every build users link): no std
// machinery (backtraces, symbolization) in the library. See platform.rs.
#![cfg_attr(not(any(feature = "std", panic = "unwind")), no_std)]

extern crate alloc;

mod backend;
mod buffer;
mod copy;
mod cpu;
mod fatal;
pub mod ffi;
/// cbindgen:ignore
mod ggml;
mod graph_copy;
mod platform;
mod prelude;
mod ptrmap;
mod sched;
mod sys;

/// Every struct layout fact the crate relies on, as (C expression, value
/// in this build): ffi-tests compiles the expressions with the target's C
/// compiler against the original headers and compares. Not part of the C API.
#[doc(hidden)]
pub fn layouts() -> alloc::vec::Vec<(&'static str, usize)> {
    sys::layouts().collect()
}
