//! Copying a tensor between backends.

#![forbid(unsafe_code)]

use crate::prelude::*;

use crate::fatal::check;
use crate::ggml::TensorRef;
use crate::handle::{backend_of, tensor_get_bytes, tensor_set_bytes};

const FUNC: &str = "wsp_ggml_backend_tensor_copy";

/// `wsp_ggml_backend_tensor_copy`. Routes, in order: the destination backend's
/// `cpy_tensor_from`, the source backend's `cpy_tensor_to`, then get + set
/// through a host buffer. Unlike the original, the slots receive the backend
/// itself (as their signature says), not `backend->context`.
pub fn tensor_copy(src: TensorRef, dst: TensorRef) {
    tensor_copy_staged(src, dst, &mut Vec::new());
}

/// [`tensor_copy`] with the host buffer of the get + set route given:
/// grown to the tensor's size when smaller, so a caller that keeps it (the
/// scheduler, for its split inputs) allocates it once, not per copy.
pub fn tensor_copy_staged(src: TensorRef, dst: TensorRef, staging: &mut Vec<u8>) {
    check(src.same_layout(dst), FUNC, || {
        format!("cannot copy tensors with different layouts ('{}' -> '{}')", src.name_lossy(), dst.name_lossy())
    });
    if src.id() == dst.id() {
        return;
    }
    let dst_backend = backend_of(dst, FUNC, "dst");
    let src_backend = backend_of(src, FUNC, "src");

    if dst_backend.try_cpy_tensor_from(src, dst) || src_backend.try_cpy_tensor_to(src, dst) {
        return;
    }
    let nbytes = src.nbytes();
    staging.clear();
    staging.resize(nbytes, 0);
    tensor_get_bytes(src, 0, staging);
    tensor_set_bytes(dst, 0, staging);
}
