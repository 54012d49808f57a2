//! Copying a tensor between backends.

use crate::prelude::*;

use crate::fatal::check;
use crate::ggml::TensorRef;
use crate::handle::{backend_of, tensor_get, tensor_set};

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

    if let Some(from) = dst_backend.iface().cpy_tensor_from {
        // SAFETY: the destination backend's own callback with live tensors.
        unsafe { from(dst_backend.as_ptr(), src.as_ptr(), dst.as_ptr()) };
    } else if let Some(to) = src_backend.iface().cpy_tensor_to {
        // SAFETY: the source backend's own callback with live tensors.
        unsafe { to(src_backend.as_ptr(), src.as_ptr(), dst.as_ptr()) };
    } else {
        let nbytes = src.nbytes();
        staging.clear();
        staging.resize(nbytes, 0);
        // SAFETY: `staging` holds `nbytes` bytes, read and written only here
        // (each call synchronizes its backend before returning).
        unsafe {
            tensor_get(src, staging.as_mut_ptr().cast(), 0, nbytes);
            tensor_set(dst, staging.as_ptr().cast(), 0, nbytes);
        }
    }
}
