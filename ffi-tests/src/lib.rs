//! Test support for the wsp_ggml_backend drop-in: header generation and the
//! differential harness that builds C programs against the original
//! `ggml-backend.c` and against our library.

pub mod harness;
pub mod headers;
pub mod installed;
