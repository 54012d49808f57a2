//! The wrapper layer: where C's pointers become handles and where Rust
//! fills C's interfaces. The modules above it (`copy`, `cpu`,
//! `graph_copy`, `sched`) forbid `unsafe` and reach C only through what
//! this module exports. Its children, bottom to top:
//!
//! - `refs`: handles on C's backends and buffers (`BackendRef`,
//!   `BufferRef`, `OwnedBackend`, `OwnedBuffer`), `FromC`, tensor reads and
//!   writes through a tensor's backend;
//! - `host`: host memory (`AlignedBuf`, `HostTensor`'s bounded copies)
//!   and graphs computed by ggml.c (`HostGraph`, `GraphPlan`);
//! - `iface`: the `BackendImpl` and `BufferImpl` traits and the generic
//!   trampolines that fill `wsp_ggml_backend_i` and
//!   `wsp_ggml_backend_buffer_i` from them; the host buffer;
//! - `talloc`: ggml-alloc's allocator, owned, and its struct read
//!   (`crate::talloc`, re-exported at the crate root);
//! - `context`: ggml contexts we make and the graph copies built in them.

#![allow(non_camel_case_types)]

mod context;
mod host;
mod iface;
mod refs;
pub(crate) mod talloc;

pub use context::*;
pub use host::*;
pub use iface::*;
pub use refs::*;
pub(crate) use refs::{assert_owning, from_c};
