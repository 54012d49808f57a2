//! Handles on C's backends and buffers: every call on one goes through its
//! `iface`, so backends and buffers written in C (Metal, test backends) keep
//! working unchanged. Here too: the one place where C's pointers become
//! handles ([`FromC`]), and tensor reads and writes through a tensor's
//! backend.

use crate::prelude::*;

use core::ffi::{c_char, c_void, CStr};
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;

use crate::fatal::{check, fatal};
use crate::ggml::{wsp_ggml_cgraph, wsp_ggml_tensor, GraphRef, TensorRef};
pub use crate::sys::{wsp_ggml_backend, wsp_ggml_backend_graph_plan_t, wsp_ggml_backend_i, wsp_ggml_backend_t};
pub use crate::sys::{wsp_ggml_backend_buffer, wsp_ggml_backend_buffer_context_t, wsp_ggml_backend_buffer_i, wsp_ggml_backend_buffer_t};

// --- backends -----------------------------------------------------------

/// A borrowed backend: handed to us by C, or borrowed from an
/// [`OwnedBackend`] (then it cannot outlive its owner). Invariant: points to
/// a live `wsp_ggml_backend` for `'a`. It cannot free the backend.
///
/// `BackendRef<'static>` is a backend C lends us on the terms of its API
/// (for the call, or from `sched_new` until `sched_free`), like the
/// tensors ([`TensorRef`]): the borrow is C's to keep, not the compiler's.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BackendRef<'a>(NonNull<wsp_ggml_backend>, PhantomData<&'a wsp_ggml_backend>);

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
impl<'a> BackendRef<'a> {
    /// The handle on `p`; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or points to a live `wsp_ggml_backend` (its interface as
    /// ggml-backend-impl.h describes) that stays live, and is not freed, for
    /// as long as the handle or any copy of it is used (any method but
    /// `as_ptr`, comparison and hashing). It cannot free the backend: an
    /// [`OwnedBackend`] does.
    pub unsafe fn new(p: wsp_ggml_backend_t) -> Option<Self> {
        NonNull::new(p).map(|p| BackendRef(p, PhantomData))
    }
    pub fn as_ptr(self) -> wsp_ggml_backend_t {
        self.0.as_ptr()
    }
    pub fn iface(self) -> wsp_ggml_backend_i {
        crate::ggml::read_field!(self.0.as_ptr(), iface)
    }
    pub fn context(self) -> *mut c_void {
        crate::ggml::read_field!(self.0.as_ptr(), context)
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
    pub fn alloc_buffer(self, size: usize) -> wsp_ggml_backend_buffer_t {
        let f = slot!(self, alloc_buffer, "wsp_ggml_backend_alloc_buffer");
        // SAFETY: the backend's own callback.
        unsafe { f(self.as_ptr(), size) }
    }
    /// [`Self::alloc_buffer`], owned (None: the backend could not).
    pub fn alloc_owned_buffer(self, size: usize) -> Option<OwnedBuffer> {
        // SAFETY: NULL or a buffer the backend just made for us, ours alone.
        unsafe { OwnedBuffer::from_raw(self.alloc_buffer(size)) }
    }
    /// The backend's graph_compute on a view of a live graph.
    pub fn compute_view(self, view: &crate::ggml::GraphView) {
        let mut g = view.to_c();
        // SAFETY: a view inside a live graph (GraphView's contract).
        unsafe { self.graph_compute(&mut g) }
    }
    /// The backend's graph_compute on node `i` of a live graph alone, as a
    /// one-node graph without gradients (what `compare_graph_backend`
    /// hands each backend).
    pub fn compute_node(self, graph: GraphRef, i: usize) {
        let mut g = graph.view(i, i + 1).to_c();
        (g.grads, g.size) = (core::ptr::null_mut(), 1);
        // SAFETY: one node of a live graph (GraphRef's contract), gradients
        // left out.
        unsafe { self.graph_compute(&mut g) }
    }
    /// Its name's bytes (`(null)` where get_name gives NULL, as printf).
    pub fn name_bytes(self) -> &'a [u8] {
        let p = self.name();
        if p.is_null() {
            return b"(null)";
        }
        // SAFETY: get_name returns a NUL-terminated string that lives as
        // long as the backend.
        unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes()
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
    /// The backend's `cpy_tensor_from` (`src` into `dst`, which is on this
    /// backend); false, and nothing done, where the slot is NULL.
    pub fn try_cpy_tensor_from(self, src: TensorRef, dst: TensorRef) -> bool {
        let Some(f) = self.iface().cpy_tensor_from else { return false };
        // SAFETY: the backend's own callback with live tensors.
        unsafe { f(self.as_ptr(), src.as_ptr(), dst.as_ptr()) };
        true
    }
    /// The backend's `cpy_tensor_to` (`src`, which is on this backend, into
    /// `dst`); false, and nothing done, where the slot is NULL.
    pub fn try_cpy_tensor_to(self, src: TensorRef, dst: TensorRef) -> bool {
        let Some(f) = self.iface().cpy_tensor_to else { return false };
        // SAFETY: the backend's own callback with live tensors.
        unsafe { f(self.as_ptr(), src.as_ptr(), dst.as_ptr()) };
        true
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

/// A backend we own: the CPU backend we made (until handed to C by
/// `into_raw`), or one C hands over to `wsp_ggml_backend_free`. Not `Copy`:
/// its `free` slot is called exactly once, when it is consumed by
/// [`OwnedBackend::free`] or dropped.
#[derive(Debug, PartialEq, Eq)]
pub struct OwnedBackend(NonNull<wsp_ggml_backend>);

impl OwnedBackend {
    /// Take ownership of `p`; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or a live backend (as [`BackendRef::new`] requires) whose
    /// ownership the caller hands over: nothing else frees it, and nothing
    /// uses it or its buffers after this owner frees it.
    pub unsafe fn from_raw(p: wsp_ggml_backend_t) -> Option<Self> {
        NonNull::new(p).map(OwnedBackend)
    }
    /// Hand the backend to C, which frees it (`wsp_ggml_backend_free`).
    pub fn into_raw(self) -> wsp_ggml_backend_t {
        ManuallyDrop::new(self).0.as_ptr()
    }
    /// The backend, borrowed for no longer than its owner lives.
    pub fn get(&self) -> BackendRef<'_> {
        BackendRef(self.0, PhantomData)
    }
    /// Calls the backend's own `free`, which releases the struct.
    pub fn free(self) {
        drop(self)
    }
}

impl Drop for OwnedBackend {
    fn drop(&mut self) {
        let backend = self.get();
        let f = slot!(backend, free, "wsp_ggml_backend_free");
        // SAFETY: the backend's own callback, called once (the owner is unique).
        unsafe { f(backend.as_ptr()) }
    }
}

/// The backend of the buffer a tensor lives in (`wsp_ggml_get_backend`).
pub fn tensor_backend(t: TensorRef) -> Option<BackendRef<'static>> {
    BufferRef::of_tensor(t).and_then(BufferRef::backend)
}

/// [`tensor_backend`], or abort naming `func` and the argument `arg`.
pub fn backend_of(t: TensorRef, func: &str, arg: &str) -> BackendRef<'static> {
    tensor_backend(t).unwrap_or_else(|| {
        fatal(func, &format!("argument '{arg}' ('{}') has no backend (buffer or buffer->backend is NULL)", t.name_lossy()))
    })
}

fn checked_io_backend(t: TensorRef, func: &str) -> BackendRef<'static> {
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

/// Copy a tensor in plain host memory (no buffer, its data set) into `dst`,
/// as `tensor_set` of its bytes.
pub fn tensor_set_from_host(dst: TensorRef, src: TensorRef) {
    assert!(src.buffer().is_null() && !src.data().is_null(), "a tensor in plain host memory");
    // SAFETY: a live tensor whose non-NULL data holds its `nbytes` (C
    // contract on the graph's tensors).
    unsafe { tensor_set(dst, src.data(), 0, src.nbytes()) }
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

/// [`tensor_set`] of the bytes of `src`, at `offset`.
pub fn tensor_set_bytes(t: TensorRef, offset: usize, src: &[u8]) {
    // SAFETY: a slice is readable for its length, and is borrowed until
    // tensor_set has synchronized the backend.
    unsafe { tensor_set(t, src.as_ptr().cast(), offset, src.len()) }
}

/// [`tensor_get`] into `dst`, from `offset`.
pub fn tensor_get_bytes(t: TensorRef, offset: usize, dst: &mut [u8]) {
    // SAFETY: a slice is writable for its length, and is borrowed (and so
    // not otherwise accessed) until tensor_get has synchronized the backend.
    unsafe { tensor_get(t, dst.as_mut_ptr().cast(), offset, dst.len()) }
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
) -> Result<OwnedBuffer, crate::platform::OutOfMemory> {
    check(iface.get_base.is_some(), "wsp_ggml_backend_buffer_init", || "argument 'iface': get_base must not be NULL".into());
    let bytes = core::mem::size_of::<wsp_ggml_backend_buffer>();
    // SAFETY: malloc of the struct's size; checked for NULL before use.
    let p = unsafe { libc::malloc(bytes) }.cast::<wsp_ggml_backend_buffer>();
    let p = NonNull::new(p).ok_or(crate::platform::OutOfMemory(bytes))?;
    let backend = backend.map_or(core::ptr::null_mut(), BackendRef::as_ptr);
    // SAFETY: p is a fresh, suitably aligned allocation of the right size.
    unsafe { p.as_ptr().write(wsp_ggml_backend_buffer { iface, backend, context, size }) };
    Ok(OwnedBuffer(p))
}

/// A buffer we own: made by [`buffer_init`], or handed to us to be freed
/// (`wsp_ggml_backend_buffer_free`, a compute buffer the scheduler grew, a
/// graph copy's buffer). Not `Copy`: freed exactly once, when consumed by
/// [`OwnedBuffer::free`] or dropped, unless handed to C by `into_raw`.
#[derive(Debug, PartialEq, Eq)]
pub struct OwnedBuffer(NonNull<wsp_ggml_backend_buffer>);

impl OwnedBuffer {
    /// Take ownership of `p`; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or a live buffer (as [`BufferRef::new`] requires) whose
    /// ownership the caller hands over: nothing else frees it, and nothing
    /// uses it after this owner frees it (its tensors included).
    pub unsafe fn from_raw(p: wsp_ggml_backend_buffer_t) -> Option<Self> {
        NonNull::new(p).map(OwnedBuffer)
    }
    /// Hand the buffer to C, which frees it (`wsp_ggml_backend_buffer_free`).
    pub fn into_raw(self) -> wsp_ggml_backend_buffer_t {
        ManuallyDrop::new(self).0.as_ptr()
    }
    pub fn as_ptr(&self) -> wsp_ggml_backend_buffer_t {
        self.0.as_ptr()
    }
    /// The buffer, borrowed for no longer than its owner lives.
    pub fn get(&self) -> BufferRef<'_> {
        BufferRef(self.0, PhantomData)
    }
    /// Calls `free_buffer` (optional) and releases the struct.
    pub fn free(self) {
        drop(self)
    }
}

impl Drop for OwnedBuffer {
    fn drop(&mut self) {
        let buffer = self.get();
        if let Some(f) = buffer.iface().free_buffer {
            // SAFETY: the buffer's own free callback, called once (the
            // owner is unique), on its live buffer.
            unsafe { f(buffer.as_ptr()) };
        }
        // SAFETY: buffer structs are malloc'ed (buffer_init, or the C
        // backend's own, which ggml's contract makes the same); freed once.
        unsafe { libc::free(self.0.as_ptr().cast()) };
    }
}

/// Places tensors in one buffer (what `wsp_ggml_tallocr_alloc` writes),
/// each checked to lie inside it: the planner's offsets become pointers
/// that C follows only here.
#[derive(Clone, Copy)]
pub struct Placer {
    buffer: wsp_ggml_backend_buffer_t,
    base: *mut c_void,
    size: usize,
    measure: bool,
}

impl Placer {
    /// Place `t` at `offset` in the buffer, `size` bytes of it; a
    /// placement that does not lie inside the buffer stops the call
    /// (`func`) with a message instead of writing.
    pub fn place(self, t: TensorRef<'_>, offset: usize, size: usize, func: &str) {
        let inside = offset.checked_add(size).is_some_and(|end| end <= self.size);
        if !self.measure && !inside {
            fatal(
                func,
                &format!(
                    "tensor '{}' placed at offset {offset}, {size} bytes, outside its compute buffer of {} bytes",
                    t.name_lossy(),
                    self.size
                ),
            );
        }
        // (the address derives from the buffer's base: C computes it so)
        t.set_placement(self.buffer, self.base.cast::<u8>().wrapping_add(offset).cast());
    }
}

/// A borrowed buffer: handed to us by C for a call, or borrowed from an
/// [`OwnedBuffer`] (then it cannot outlive its owner). Invariant: points to
/// a live `wsp_ggml_backend_buffer` for `'a`. It cannot free the buffer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BufferRef<'a>(NonNull<wsp_ggml_backend_buffer>, PhantomData<&'a wsp_ggml_backend_buffer>);

impl<'a> BufferRef<'a> {
    /// The handle on `p`; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or points to a live `wsp_ggml_backend_buffer` (its
    /// interface as ggml-backend-impl.h describes, its `backend` NULL or a
    /// live backend that outlives it) that stays live, and is not freed,
    /// for `'a`.
    pub unsafe fn new(p: wsp_ggml_backend_buffer_t) -> Option<Self> {
        NonNull::new(p).map(|p| BufferRef(p, PhantomData))
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
    pub fn iface(self) -> wsp_ggml_backend_buffer_i {
        crate::ggml::read_field!(self.0.as_ptr(), iface)
    }
    pub fn backend(self) -> Option<BackendRef<'a>> {
        // SAFETY: the handle's invariant (`new`): the buffer's backend is
        // NULL or a live backend, which outlives its buffers.
        let p = crate::ggml::read_field!(self.0.as_ptr(), backend);
        // SAFETY: as above.
        unsafe { BackendRef::new(p) }
    }
    pub fn size(self) -> usize {
        crate::ggml::read_field!(self.0.as_ptr(), size)
    }
    pub fn context(self) -> *mut c_void {
        crate::ggml::read_field!(self.0.as_ptr(), context)
    }

    /// A handle that places tensors in this buffer (`measure`: a measure
    /// allocator's, whose addresses are never used, and are not checked).
    pub fn placer(self, measure: bool) -> Placer {
        Placer { buffer: self.as_ptr(), base: self.base(), size: self.size(), measure }
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

// --- owners ---------------------------------------------------------------

/// Refuse to build if an owning handle is `Copy` or `Clone`: each is freed
/// once, by the one value that owns it (the impl below would be ambiguous
/// for a `Clone` type, and `Copy` implies `Clone`).
macro_rules! assert_owning {
    ($($t:ty),* $(,)?) => {$(
        const _: fn() = || {
            trait AmbiguousIfClone<A> {
                fn check() {}
            }
            impl<T: ?Sized> AmbiguousIfClone<()> for T {}
            struct IfClone;
            impl<T: ?Sized + Clone> AmbiguousIfClone<IfClone> for T {}
            let _ = <$t as AmbiguousIfClone<_>>::check;
        };
    )*};
}
pub(crate) use assert_owning;

assert_owning!(OwnedBackend, OwnedBuffer);

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

from_c!(TensorRef<'_> => wsp_ggml_tensor, GraphRef<'_> => wsp_ggml_cgraph, BackendRef<'_> => wsp_ggml_backend, BufferRef<'_> => wsp_ggml_backend_buffer);
