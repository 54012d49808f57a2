//! Backend buffers: a block of memory owned by a backend, reached only through
//! its `iface` so that buffers made by C backends (Metal, test backends) work.

#![allow(non_camel_case_types)]

use core::ffi::c_void;
use core::ptr::NonNull;

use crate::backend::BackendRef;
use crate::fatal::{check, fatal};
use crate::ggml::TensorRef;
pub use crate::sys::{wsp_ggml_backend_buffer, wsp_ggml_backend_buffer_context_t, wsp_ggml_backend_buffer_i, wsp_ggml_backend_buffer_t};

/// Create a buffer struct. It is `malloc`ed, as in the original, so that a
/// buffer struct is released the same way whoever made it. `backend` is
/// stored as a pointer (C reads `buffer->backend`); it is a handle already,
/// so the buffer's backend is NULL or live (`BufferRef::backend`).
pub fn buffer_init(
    backend: Option<BackendRef>,
    iface: wsp_ggml_backend_buffer_i,
    context: wsp_ggml_backend_buffer_context_t,
    size: usize,
) -> BufferRef {
    check(iface.get_base.is_some(), "wsp_ggml_backend_buffer_init", || "argument 'iface': get_base must not be NULL".into());
    // SAFETY: malloc of the struct's size; checked for NULL before use.
    let p = unsafe { libc::malloc(core::mem::size_of::<wsp_ggml_backend_buffer>()) }.cast::<wsp_ggml_backend_buffer>();
    let Some(p) = NonNull::new(p) else { fatal("wsp_ggml_backend_buffer_init", "out of memory allocating the buffer struct") };
    let backend = backend.map_or(core::ptr::null_mut(), BackendRef::as_ptr);
    // SAFETY: p is a fresh, suitably aligned allocation of the right size.
    unsafe { p.as_ptr().write(wsp_ggml_backend_buffer { iface, backend, context, size }) };
    BufferRef(p)
}

/// A buffer handed to us by C. Invariant (C API contract): points to a live
/// `wsp_ggml_backend_buffer` for the duration of the call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BufferRef(NonNull<wsp_ggml_backend_buffer>);

impl BufferRef {
    /// The handle on `p`; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or points to a live `wsp_ggml_backend_buffer` (its
    /// interface as ggml-backend-impl.h describes, its `backend` NULL or a
    /// live backend that outlives it) that stays live, and is
    /// not freed, for as long as the handle or any copy of it is used (any
    /// method but `as_ptr` and comparison; `free` ends its life).
    pub unsafe fn new(p: wsp_ggml_backend_buffer_t) -> Option<Self> {
        NonNull::new(p).map(BufferRef)
    }
    /// The buffer `t` is in, if any.
    pub fn of_tensor(t: TensorRef) -> Option<Self> {
        // SAFETY: a live tensor's buffer is NULL or a live buffer, live as
        // long as the tensor is in it (ggml-backend's contract).
        unsafe { Self::new(t.buffer()) }
    }
    pub fn as_ptr(self) -> wsp_ggml_backend_buffer_t {
        self.0.as_ptr()
    }
    fn get(&self) -> &wsp_ggml_backend_buffer {
        // SAFETY: BufferRef invariant.
        unsafe { self.0.as_ref() }
    }
    pub fn iface(self) -> wsp_ggml_backend_buffer_i {
        self.get().iface
    }
    pub fn backend(self) -> Option<BackendRef> {
        // SAFETY: the handle's invariant (`new`): the buffer's backend is
        // NULL or a live backend, which outlives its buffers.
        unsafe { BackendRef::new(self.get().backend) }
    }
    pub fn size(self) -> usize {
        self.get().size
    }
    pub fn context(self) -> *mut c_void {
        self.get().context
    }

    /// Calls `free_buffer` (optional) and releases the struct.
    pub fn free(self) {
        if let Some(f) = self.iface().free_buffer {
            // SAFETY: the buffer's own free callback, called once, on its buffer.
            unsafe { f(self.as_ptr()) };
        }
        // SAFETY: buffer structs are malloc'ed (see buffer_init); freed once here.
        unsafe { libc::free(self.as_ptr().cast()) };
    }

    pub fn base(self) -> *mut c_void {
        let Some(get_base) = self.iface().get_base else {
            fatal("wsp_ggml_backend_buffer_get_base", "buffer has no get_base in its interface")
        };
        // SAFETY: the buffer's own callback on its buffer.
        let base = unsafe { get_base(self.as_ptr()) };
        check(!base.is_null(), "wsp_ggml_backend_buffer_get_base", || "backend buffer base cannot be NULL".into());
        base
    }

    pub fn alignment(self) -> usize {
        match self.backend() {
            Some(backend) => backend.alignment(),
            // A buffer made by `cpu_buffer_from_ptr(NULL, ..)` (as ggml-alloc.c
            // does) has no backend; it is CPU memory, so it has the CPU alignment.
            // The original dereferenced NULL here.
            None if crate::cpu::is_cpu_buffer(self) => crate::cpu::TENSOR_ALIGNMENT,
            None => fatal("wsp_ggml_backend_buffer_get_alignment", "buffer has no backend"),
        }
    }

    pub fn alloc_size(self, tensor: TensorRef) -> usize {
        match self.iface().get_alloc_size {
            // SAFETY: the buffer's own callback on its buffer and a live tensor.
            Some(f) => unsafe { f(self.as_ptr(), tensor.as_ptr()) },
            None => tensor.nbytes(),
        }
    }

    pub fn init_tensor(self, tensor: TensorRef) {
        if let Some(f) = self.iface().init_tensor {
            // SAFETY: the buffer's own callback on its buffer and a live tensor.
            unsafe { f(self.as_ptr(), tensor.as_ptr()) }
        }
    }

    pub fn free_tensor(self, tensor: TensorRef) {
        if let Some(f) = self.iface().free_tensor {
            // SAFETY: the buffer's own callback on its buffer and a live tensor.
            unsafe { f(self.as_ptr(), tensor.as_ptr()) }
        }
    }
}
