//! The backend interface: every call on a backend goes through its `iface`,
//! so backends written in C keep working unchanged.

#![allow(non_camel_case_types)]

use crate::prelude::*;

use core::ffi::{c_char, c_void, CStr};
use core::ptr::NonNull;

use crate::buffer::{wsp_ggml_backend_buffer_t, BufferRef};
use crate::fatal::{check, fatal};
use crate::ggml::{wsp_ggml_cgraph, TensorRef};
pub use crate::sys::{wsp_ggml_backend, wsp_ggml_backend_graph_plan_t, wsp_ggml_backend_i, wsp_ggml_backend_t};

/// A backend handed to us by C. Invariant (C API contract): points to a live
/// `wsp_ggml_backend` for the duration of the call.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BackendRef(NonNull<wsp_ggml_backend>);

/// Fetch an optional iface slot or abort naming the entry point and the slot.
macro_rules! slot {
    ($self:ident, $field:ident, $func:expr) => {
        match $self.iface().$field {
            Some(f) => f,
            None => fatal($func, &format!("backend '{}' has no {} in its interface", $self.name_lossy(), stringify!($field))),
        }
    };
}

// The data, graph and plan pointers taken by these methods are forwarded
// unchanged to the backend's own callbacks, never dereferenced here; their
// validity is the C API's contract, stated once at the FFI layer.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
impl BackendRef {
    /// The handle on `p`; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or points to a live `wsp_ggml_backend` (its interface as
    /// ggml-backend-impl.h describes) that stays live, and is not freed, for
    /// as long as the handle or any copy of it is used (any method but
    /// `as_ptr`, comparison and hashing; `free` ends its life).
    pub unsafe fn new(p: wsp_ggml_backend_t) -> Option<Self> {
        NonNull::new(p).map(BackendRef)
    }
    pub fn as_ptr(self) -> wsp_ggml_backend_t {
        self.0.as_ptr()
    }
    pub fn iface(self) -> wsp_ggml_backend_i {
        // SAFETY: BackendRef invariant.
        unsafe { self.0.as_ref().iface }
    }
    pub fn context(self) -> *mut c_void {
        // SAFETY: BackendRef invariant.
        unsafe { self.0.as_ref().context }
    }

    pub fn name(self) -> *const c_char {
        let f = slot!(self, get_name, "wsp_ggml_backend_name");
        // SAFETY: the backend's own callback.
        unsafe { f(self.as_ptr()) }
    }
    pub fn name_lossy(self) -> String {
        let Some(f) = self.iface().get_name else { return "?".into() };
        // SAFETY: the backend's own callback.
        let p = unsafe { f(self.as_ptr()) };
        if p.is_null() {
            return "?".into();
        }
        // SAFETY: get_name returns a NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
    /// Calls the backend's own `free`, which releases the struct.
    pub fn free(self) {
        let f = slot!(self, free, "wsp_ggml_backend_free");
        // SAFETY: the backend's own callback; the handle is not used again.
        unsafe { f(self.as_ptr()) }
    }
    pub fn alloc_buffer(self, size: usize) -> wsp_ggml_backend_buffer_t {
        let f = slot!(self, alloc_buffer, "wsp_ggml_backend_alloc_buffer");
        // SAFETY: the backend's own callback.
        unsafe { f(self.as_ptr(), size) }
    }
    pub fn alignment(self) -> usize {
        let f = slot!(self, get_alignment, "wsp_ggml_backend_get_alignment");
        // SAFETY: the backend's own callback.
        unsafe { f(self.as_ptr()) }
    }
    pub fn set_tensor_async(self, t: TensorRef, data: *const c_void, offset: usize, size: usize) {
        let f = slot!(self, set_tensor_async, "wsp_ggml_backend_tensor_set_async");
        // SAFETY: the backend's own callback; data/offset/size are the caller's.
        unsafe { f(self.as_ptr(), t.as_ptr(), data, offset, size) }
    }
    pub fn get_tensor_async(self, t: TensorRef, data: *mut c_void, offset: usize, size: usize) {
        let f = slot!(self, get_tensor_async, "wsp_ggml_backend_tensor_get_async");
        // SAFETY: the backend's own callback; data/offset/size are the caller's.
        unsafe { f(self.as_ptr(), t.as_ptr(), data, offset, size) }
    }
    pub fn synchronize(self) {
        let f = slot!(self, synchronize, "wsp_ggml_backend_synchronize");
        // SAFETY: the backend's own callback.
        unsafe { f(self.as_ptr()) }
    }
    pub fn graph_plan_create(self, graph: *mut wsp_ggml_cgraph) -> wsp_ggml_backend_graph_plan_t {
        let f = slot!(self, graph_plan_create, "wsp_ggml_backend_graph_plan_create");
        // SAFETY: the backend's own callback on the caller's graph.
        unsafe { f(self.as_ptr(), graph) }
    }
    pub fn graph_plan_free(self, plan: wsp_ggml_backend_graph_plan_t) {
        let f = slot!(self, graph_plan_free, "wsp_ggml_backend_graph_plan_free");
        // SAFETY: the backend's own callback on a plan it created.
        unsafe { f(self.as_ptr(), plan) }
    }
    pub fn graph_plan_compute(self, plan: wsp_ggml_backend_graph_plan_t) {
        let f = slot!(self, graph_plan_compute, "wsp_ggml_backend_graph_plan_compute");
        // SAFETY: the backend's own callback on a plan it created.
        unsafe { f(self.as_ptr(), plan) }
    }
    pub fn graph_compute(self, graph: *mut wsp_ggml_cgraph) {
        let f = slot!(self, graph_compute, "wsp_ggml_backend_graph_compute");
        // SAFETY: the backend's own callback on the caller's graph.
        unsafe { f(self.as_ptr(), graph) }
    }
    pub fn supports_op(self, op: TensorRef) -> bool {
        let f = slot!(self, supports_op, "wsp_ggml_backend_supports_op");
        // SAFETY: the backend's own callback on a live tensor.
        unsafe { f(self.as_ptr(), op.as_ptr()) }
    }
}

/// The backend of the buffer a tensor lives in (`wsp_ggml_get_backend`).
pub fn tensor_backend(t: TensorRef) -> Option<BackendRef> {
    BufferRef::of_tensor(t).and_then(BufferRef::backend)
}

/// [`tensor_backend`], or abort naming `func` and the argument `arg`.
pub fn backend_of(t: TensorRef, func: &str, arg: &str) -> BackendRef {
    tensor_backend(t).unwrap_or_else(|| {
        fatal(func, &format!("argument '{arg}' ('{}') has no backend (buffer or buffer->backend is NULL)", t.name_lossy()))
    })
}

fn checked_io_backend(t: TensorRef, func: &str) -> BackendRef {
    check(!t.data().is_null(), func, || format!("tensor '{}' is not allocated (data is NULL)", t.name_lossy()));
    backend_of(t, func, "tensor")
}

/// `wsp_ggml_backend_tensor_set`: write then synchronize.
pub fn tensor_set(t: TensorRef, data: *const c_void, offset: usize, size: usize) {
    let backend = checked_io_backend(t, "wsp_ggml_backend_tensor_set");
    backend.set_tensor_async(t, data, offset, size);
    backend.synchronize();
}

/// `wsp_ggml_backend_tensor_get`: read then synchronize.
pub fn tensor_get(t: TensorRef, data: *mut c_void, offset: usize, size: usize) {
    let backend = checked_io_backend(t, "wsp_ggml_backend_tensor_get");
    backend.get_tensor_async(t, data, offset, size);
    backend.synchronize();
}

pub fn tensor_set_async(t: TensorRef, data: *const c_void, offset: usize, size: usize) {
    let backend = backend_of(t, "wsp_ggml_backend_tensor_set_async", "tensor");
    backend.set_tensor_async(t, data, offset, size);
}

pub fn tensor_get_async(t: TensorRef, data: *mut c_void, offset: usize, size: usize) {
    let backend = backend_of(t, "wsp_ggml_backend_tensor_get_async", "tensor");
    backend.get_tensor_async(t, data, offset, size);
}
