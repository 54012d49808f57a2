//! Handles on C's backends and buffers: every call on one goes through its
//! `iface`, so backends and buffers written in C (Metal, test backends) keep
//! working unchanged. Here too: the one place where C's pointers become
//! handles ([`FromC`]), and the host-buffer interface of CPU buffers (so
//! that a buffer without a backend is known as host memory).

#![allow(non_camel_case_types)]

use crate::prelude::*;

use core::ffi::{c_char, c_void, CStr};
use core::ptr::{self, NonNull};

use crate::fatal::{check, fatal, guard};
use crate::ggml::{wsp_ggml_cgraph, wsp_ggml_tensor, GraphRef, TensorRef};
pub use crate::sys::{wsp_ggml_backend, wsp_ggml_backend_graph_plan_t, wsp_ggml_backend_i, wsp_ggml_backend_t};
pub use crate::sys::{wsp_ggml_backend_buffer, wsp_ggml_backend_buffer_context_t, wsp_ggml_backend_buffer_i, wsp_ggml_backend_buffer_t};

// --- backends -----------------------------------------------------------

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

// The data, graph and plan pointers taken by some of these methods are
// forwarded unchanged to the backend's own callbacks, which read through
// them: those methods are `unsafe`, their caller vouching for the pointers.
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
    ///
    /// # Safety
    /// The backend is live and not freed elsewhere; neither this handle nor
    /// any copy of it is used again (but for `as_ptr` and comparison), nor
    /// are its buffers.
    pub unsafe fn free(self) {
        let f = slot!(self, free, "wsp_ggml_backend_free");
        // SAFETY: the backend's own callback; the handle is not used again
        // (the caller's contract).
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
    /// The backend's `set_tensor_async`: `size` bytes from `data` to `t` at `offset`.
    ///
    /// # Safety
    /// `data` is readable for `size` bytes until the backend is synchronized;
    /// `t` is allocated on this backend with `offset + size <= nbytes(t)`
    /// (or the backend checks it, as the CPU backend does).
    pub unsafe fn set_tensor_async(self, t: TensorRef, data: *const c_void, offset: usize, size: usize) {
        let f = slot!(self, set_tensor_async, "wsp_ggml_backend_tensor_set_async");
        // SAFETY: the backend's own callback; data/offset/size are the
        // caller's (its contract).
        unsafe { f(self.as_ptr(), t.as_ptr(), data, offset, size) }
    }
    /// The backend's `get_tensor_async`: `size` bytes of `t` at `offset` to `data`.
    ///
    /// # Safety
    /// `data` is writable for `size` bytes, and not otherwise accessed, until
    /// the backend is synchronized; `t` as in [`BackendRef::set_tensor_async`].
    pub unsafe fn get_tensor_async(self, t: TensorRef, data: *mut c_void, offset: usize, size: usize) {
        let f = slot!(self, get_tensor_async, "wsp_ggml_backend_tensor_get_async");
        // SAFETY: the backend's own callback; data/offset/size are the
        // caller's (its contract).
        unsafe { f(self.as_ptr(), t.as_ptr(), data, offset, size) }
    }
    pub fn synchronize(self) {
        let f = slot!(self, synchronize, "wsp_ggml_backend_synchronize");
        // SAFETY: the backend's own callback.
        unsafe { f(self.as_ptr()) }
    }
    /// The backend's `graph_plan_create`.
    ///
    /// # Safety
    /// `graph` points to a live graph whose tensors are live and allocated
    /// where this backend can compute them.
    pub unsafe fn graph_plan_create(self, graph: *mut wsp_ggml_cgraph) -> wsp_ggml_backend_graph_plan_t {
        let f = slot!(self, graph_plan_create, "wsp_ggml_backend_graph_plan_create");
        // SAFETY: the backend's own callback on the caller's graph.
        unsafe { f(self.as_ptr(), graph) }
    }
    /// The backend's `graph_plan_free`.
    ///
    /// # Safety
    /// `plan` was made by this backend's `graph_plan_create`, is not freed
    /// elsewhere and is not used again.
    pub unsafe fn graph_plan_free(self, plan: wsp_ggml_backend_graph_plan_t) {
        let f = slot!(self, graph_plan_free, "wsp_ggml_backend_graph_plan_free");
        // SAFETY: the backend's own callback on a plan it created.
        unsafe { f(self.as_ptr(), plan) }
    }
    /// The backend's `graph_plan_compute`.
    ///
    /// # Safety
    /// `plan` is a live plan made by this backend's `graph_plan_create`,
    /// whose graph's tensors are still live and allocated.
    pub unsafe fn graph_plan_compute(self, plan: wsp_ggml_backend_graph_plan_t) {
        let f = slot!(self, graph_plan_compute, "wsp_ggml_backend_graph_plan_compute");
        // SAFETY: the backend's own callback on a plan it created.
        unsafe { f(self.as_ptr(), plan) }
    }
    /// The backend's `graph_compute`.
    ///
    /// # Safety
    /// As [`BackendRef::graph_plan_create`]: `graph` and its tensors are live.
    pub unsafe fn graph_compute(self, graph: *mut wsp_ggml_cgraph) {
        let f = slot!(self, graph_compute, "wsp_ggml_backend_graph_compute");
        // SAFETY: the backend's own callback on the caller's graph.
        unsafe { f(self.as_ptr(), graph) }
    }
    /// The backend's `supports_op`; a backend without one (this
    /// generation's CUDA backend) accepts every op: the original's scheduler
    /// never asked, and ran every node wherever its rules put it.
    pub fn supports_op(self, op: TensorRef) -> bool {
        let Some(f) = self.iface().supports_op else { return true };
        // SAFETY: the backend's own callback on a live tensor.
        unsafe { f(self.as_ptr(), op.as_ptr()) }
    }
    /// Whether no `supports_op` question is worth asking: the slot is NULL.
    pub fn has_supports_op(self) -> bool {
        self.iface().supports_op.is_some()
    }
    /// The backend's `synchronize` where the original never called it (the
    /// evaluation callback's batches): a backend without the slot has
    /// nothing to wait for.
    pub fn synchronize_if_any(self) {
        if let Some(f) = self.iface().synchronize {
            // SAFETY: the backend's own callback.
            unsafe { f(self.as_ptr()) }
        }
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
///
/// # Safety
/// `data` is readable for `size` bytes (see [`BackendRef::set_tensor_async`]).
pub unsafe fn tensor_set(t: TensorRef, data: *const c_void, offset: usize, size: usize) {
    let backend = checked_io_backend(t, "wsp_ggml_backend_tensor_set");
    // SAFETY: `t` is allocated on `backend`; `data` is the caller's (its contract).
    unsafe { backend.set_tensor_async(t, data, offset, size) };
    backend.synchronize();
}

/// `wsp_ggml_backend_tensor_get`: read then synchronize.
///
/// # Safety
/// `data` is writable for `size` bytes (see [`BackendRef::get_tensor_async`]).
pub unsafe fn tensor_get(t: TensorRef, data: *mut c_void, offset: usize, size: usize) {
    let backend = checked_io_backend(t, "wsp_ggml_backend_tensor_get");
    // SAFETY: `t` is allocated on `backend`; `data` is the caller's (its contract).
    unsafe { backend.get_tensor_async(t, data, offset, size) };
    backend.synchronize();
}

/// `wsp_ggml_backend_tensor_set_async`.
///
/// # Safety
/// As [`BackendRef::set_tensor_async`] on `t`'s backend.
pub unsafe fn tensor_set_async(t: TensorRef, data: *const c_void, offset: usize, size: usize) {
    let backend = backend_of(t, "wsp_ggml_backend_tensor_set_async", "tensor");
    // SAFETY: the caller's contract, on `t`'s backend.
    unsafe { backend.set_tensor_async(t, data, offset, size) };
}

/// `wsp_ggml_backend_tensor_get_async`.
///
/// # Safety
/// As [`BackendRef::get_tensor_async`] on `t`'s backend.
pub unsafe fn tensor_get_async(t: TensorRef, data: *mut c_void, offset: usize, size: usize) {
    let backend = backend_of(t, "wsp_ggml_backend_tensor_get_async", "tensor");
    // SAFETY: the caller's contract, on `t`'s backend.
    unsafe { backend.get_tensor_async(t, data, offset, size) };
}

// --- buffers ------------------------------------------------------------

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
    ///
    /// # Safety
    /// The buffer is live and not freed elsewhere; neither this handle nor
    /// any copy of it is used again (but for `as_ptr` and comparison), nor
    /// are the tensors in it.
    pub unsafe fn free(self) {
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
            None if is_cpu_buffer(self) => TENSOR_ALIGNMENT,
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

// --- host buffers -------------------------------------------------------

/// Alignment of CPU buffers and of tensors in them (enough for AVX-512).
pub const TENSOR_ALIGNMENT: usize = 64;

/// CPU (host) buffers, made by the CPU backend (cpu.rs) and over caller
/// memory (`cpu_buffer_from_ptr`): `context` is the base pointer;
/// `free_buffer` frees it. Defined here, below the CPU backend, so that a
/// buffer without a backend is known as host memory (`is_cpu_buffer`).
static CPU_BUFFER_I: wsp_ggml_backend_buffer_i = wsp_ggml_backend_buffer_i {
    free_buffer: Some(cpu_buffer_free_buffer),
    get_base: Some(cpu_buffer_get_base),
    get_alloc_size: None, // defaults to wsp_ggml_nbytes
    init_tensor: None,
    free_tensor: None,
};

/// Buffers over caller memory: nothing to free.
static CPU_BUFFER_FROM_PTR_I: wsp_ggml_backend_buffer_i = wsp_ggml_backend_buffer_i {
    free_buffer: None,
    get_base: Some(cpu_buffer_get_base),
    get_alloc_size: None,
    init_tensor: None,
    free_tensor: None,
};

/// A copy of a host-buffer interface table, read so that every copy holds
/// the one address stored in the static (see cpu::is_cpu).
pub fn cpu_buffer_iface(from_ptr: bool) -> wsp_ggml_backend_buffer_i {
    let table = if from_ptr { &CPU_BUFFER_FROM_PTR_I } else { &CPU_BUFFER_I };
    // SAFETY: reading a plain-data static through a valid reference.
    unsafe { ptr::read_volatile(table) }
}

/// Buffers made by the CPU backend (owned or over caller memory).
pub fn is_cpu_buffer(buffer: BufferRef) -> bool {
    let base = fn_addr(buffer.iface().get_base);
    // SAFETY: reading one field of each plain-data static (see cpu::is_cpu).
    let (own, from_ptr) = unsafe {
        (ptr::read_volatile(ptr::addr_of!(CPU_BUFFER_I.get_base)), ptr::read_volatile(ptr::addr_of!(CPU_BUFFER_FROM_PTR_I.get_base)))
    };
    base == fn_addr(own) || base == fn_addr(from_ptr)
}

pub fn fn_addr<F: Copy>(f: Option<F>) -> Option<usize> {
    // SAFETY: F is always a function-pointer type here (same size as usize);
    // only its address is taken.
    f.map(|f| unsafe { core::mem::transmute_copy::<F, usize>(&f) })
}

/// # Safety
/// `buffer` is a live buffer of `CPU_BUFFER_I` or `CPU_BUFFER_FROM_PTR_I`
/// (its context is its base).
unsafe extern "C" fn cpu_buffer_get_base(buffer: wsp_ggml_backend_buffer_t) -> *mut c_void {
    let func = "wsp_ggml_backend_buffer_get_base";
    // SAFETY: the buffer this callback was called on: live for the call.
    guard(func, || unsafe { BufferRef::from_c(buffer, func, "buffer") }.context())
}

/// # Safety
/// `buffer` is a live `CPU_BUFFER_I` buffer (its context is the
/// `posix_memalign` allocation `cpu_alloc_buffer` made), freed once.
unsafe extern "C" fn cpu_buffer_free_buffer(buffer: wsp_ggml_backend_buffer_t) {
    let func = "wsp_ggml_backend_buffer_free";
    guard(func, || {
        // SAFETY: the buffer this callback was called on: live for the call.
        let data = unsafe { BufferRef::from_c(buffer, func, "buffer") }.context();
        // SAFETY: CPU_BUFFER_I buffers own a posix_memalign allocation (cpu_alloc_buffer).
        unsafe { libc::free(data) }
    })
}

// --- C pointers to handles ----------------------------------------------

/// A handle made from a pointer C passed to one of our entry points (the
/// exports here and the CPU backend's interface callbacks): the one place
/// where C's pointers become the core's handles.
pub(crate) trait FromC: Sized {
    /// The C struct the pointer points to.
    type C;

    /// The handle on `p`; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or points to a live `Self::C` as the handle's `new`
    /// requires, for the rest of the call that received it (the C contract
    /// of every entry point).
    unsafe fn from_c_opt(p: *const Self::C) -> Option<Self>;

    /// The handle on `p`, or abort with "`func`: argument '`arg`' is NULL".
    ///
    /// # Safety
    /// As [`FromC::from_c_opt`].
    unsafe fn from_c(p: *const Self::C, func: &str, arg: &str) -> Self {
        // SAFETY: the caller's contract.
        unsafe { Self::from_c_opt(p) }.unwrap_or_else(|| fatal(func, &format!("argument '{arg}' is NULL")))
    }
}

/// `FromC` for handle types whose `new` has the contract `from_c_opt` states.
macro_rules! from_c {
    ($($handle:ty => $c:ty),* $(,)?) => {$(
        impl FromC for $handle {
            type C = $c;
            unsafe fn from_c_opt(p: *const $c) -> Option<Self> {
                // SAFETY: the caller's contract is the handle's.
                unsafe { <$handle>::new(p.cast_mut()) }
            }
        }
    )*};
}

pub(crate) use from_c;

from_c!(TensorRef => wsp_ggml_tensor, GraphRef => wsp_ggml_cgraph, BackendRef => wsp_ggml_backend, BufferRef => wsp_ggml_backend_buffer);
