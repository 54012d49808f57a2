//! Host memory: the aligned allocations of the CPU backend and its buffers
//! ([`AlignedBuf`]), the memory a caller lends for one call ([`HostSrc`],
//! [`HostDst`]), tensors in host memory ([`HostTensor`]: bounds-checked
//! copies in and out) and graphs of them computed by ggml.c ([`HostGraph`],
//! [`GraphPlan`]).
//!
//! A `HostTensor` or a `HostGraph` is made only by the trampolines of the
//! backend interface (`iface.rs`), from the arguments C passes to a host
//! backend's callbacks: it is C's contract for those callbacks (the tensors
//! are allocated on that backend) that puts their memory in the host.

use crate::prelude::*;

use core::ffi::{c_int, c_void};
use core::marker::PhantomData;
use core::ptr;

use super::refs::{tensor_get, tensor_set};
use crate::fatal::{check, fatal};
use crate::ggml::{self, wsp_ggml_cgraph, wsp_ggml_cplan, GraphRef, TensorRef};
use crate::platform::{self, OutOfMemory};

/// Alignment of CPU buffers and of tensors in them (enough for AVX-512).
pub const TENSOR_ALIGNMENT: usize = 64;

// --- allocations ----------------------------------------------------------

/// A [`TENSOR_ALIGNMENT`]-aligned host allocation from `posix_memalign`,
/// freed on drop (`libc::free`, so that C may free it too).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

impl Default for AlignedBuf {
    fn default() -> Self {
        AlignedBuf::empty()
    }
}

impl AlignedBuf {
    pub const fn empty() -> Self {
        AlignedBuf { ptr: ptr::null_mut(), len: 0 }
    }
    /// Allocate `len` bytes (at least 1).
    pub fn try_new(len: usize) -> Result<Self, OutOfMemory> {
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: posix_memalign writes p only on success; alignment is a power
        // of two multiple of sizeof(void*).
        let rc = unsafe { libc::posix_memalign(&mut p, TENSOR_ALIGNMENT, len.max(1)) };
        if rc != 0 || p.is_null() {
            return Err(OutOfMemory(len));
        }
        Ok(AlignedBuf { ptr: p.cast(), len })
    }
    /// Allocate `len` bytes (at least 1), stopping with the out-of-memory
    /// message (naming `func`'s caller) on failure.
    pub fn new(len: usize, func: &str) -> Self {
        Self::try_new(len).unwrap_or_else(|OutOfMemory(n)| platform::out_of_memory(func, n))
    }
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Make room for `len` bytes; contents are not preserved (scratch use only).
    pub fn reserve_scratch(&mut self, len: usize, func: &str) {
        if len > self.len {
            *self = AlignedBuf::new(len, func);
        }
    }
    /// Give up ownership: the pointer is given back by [`AlignedBuf::from_raw`]
    /// or passed to `libc::free`.
    pub fn into_raw(self) -> *mut u8 {
        let p = self.ptr;
        core::mem::forget(self);
        p
    }
    /// Take back what [`AlignedBuf::into_raw`] gave (its length is not
    /// kept: the result is for freeing).
    ///
    /// # Safety
    /// `p` came from `into_raw` and is taken back once.
    pub(super) unsafe fn from_raw(p: *mut u8) -> Self {
        AlignedBuf { ptr: p, len: 0 }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr came from posix_memalign (or is NULL) and is freed once.
        unsafe { libc::free(self.ptr.cast()) }
    }
}

// --- memory a caller lends ----------------------------------------------

/// `len` bytes at `ptr` that a caller lends to be read during one call (a
/// `const void * data, size_t size` pair), or NULL: checked where read.
#[derive(Clone, Copy)]
pub struct HostSrc<'a> {
    ptr: *const u8,
    len: usize,
    _call: PhantomData<&'a [u8]>,
}

impl HostSrc<'_> {
    /// # Safety
    /// `ptr` is NULL or readable for `len` bytes for the lifetime.
    pub(super) unsafe fn new(ptr: *const c_void, len: usize) -> Self {
        HostSrc { ptr: ptr.cast(), len, _call: PhantomData }
    }
}

/// `len` bytes at `ptr` that a caller lends to be written during one call
/// (a `void * data, size_t size` pair), or NULL: checked where written.
pub struct HostDst<'a> {
    ptr: *mut u8,
    len: usize,
    _call: PhantomData<&'a mut [u8]>,
}

impl HostDst<'_> {
    /// # Safety
    /// `ptr` is NULL or writable for `len` bytes, and not otherwise
    /// accessed, for the lifetime.
    pub(super) unsafe fn new(ptr: *mut c_void, len: usize) -> Self {
        HostDst { ptr: ptr.cast(), len, _call: PhantomData }
    }
}

// --- tensors in host memory ----------------------------------------------

/// A tensor whose `data`, when not NULL, is host memory holding its
/// `nbytes`: a tensor C passed to a host backend's callback (see the module
/// doc), for that call.
#[derive(Clone, Copy)]
pub struct HostTensor<'a>(TensorRef<'a>);

impl<'a> HostTensor<'a> {
    /// # Safety
    /// `t`'s data is NULL or host memory readable and writable for
    /// `nbytes(t)` bytes, for as long as the handle is used.
    pub(super) unsafe fn new(t: TensorRef<'a>) -> Self {
        HostTensor(t)
    }

    /// Checks shared by `write` and `read`: bounds (overflow-safe),
    /// allocation, the caller's pointer; `func` is named on failure.
    fn check_io(self, data: *const u8, offset: usize, size: usize, func: &str) {
        let t = self.0;
        let nbytes = t.nbytes();
        check(offset.checked_add(size).is_some_and(|end| end <= nbytes), func, || {
            format!("tensor '{}': offset {offset} + size {size} is out of bounds ({nbytes} bytes)", t.name_lossy())
        });
        check(!t.data().is_null(), func, || format!("tensor '{}' is not allocated (data is NULL)", t.name_lossy()));
        check(!data.is_null(), func, || "argument 'data' is NULL".into());
    }

    /// `src` into the tensor at `offset` (memmove: overlap allowed). Nothing
    /// for an empty `src`; a write outside the tensor, into a tensor without
    /// data or from NULL aborts naming `func`.
    pub fn write(self, offset: usize, src: HostSrc, func: &str) {
        if src.len == 0 {
            return;
        }
        self.check_io(src.ptr, offset, src.len, func);
        // SAFETY: `offset + len <= nbytes` of allocated host memory (new's
        // contract), `src` readable for `len` bytes (HostSrc::new's).
        unsafe { ptr::copy(src.ptr, self.0.data().cast::<u8>().add(offset), src.len) }
    }

    /// The tensor's bytes at `offset` into `dst`, as [`HostTensor::write`].
    pub fn read(self, offset: usize, dst: HostDst, func: &str) {
        if dst.len == 0 {
            return;
        }
        self.check_io(dst.ptr, offset, dst.len, func);
        // SAFETY: as in write, the other way.
        unsafe { ptr::copy(self.0.data().cast::<u8>().add(offset), dst.ptr, dst.len) }
    }

    /// All of `src` (wherever it is) into this tensor's memory: `src`'s
    /// backend reads it out (`tensor_get`). `src` must not be larger.
    pub fn fill_from(self, src: TensorRef) {
        let n = src.nbytes();
        check(n <= self.0.nbytes(), "wsp_ggml_backend_tensor_copy", || "the tensors differ in size".into());
        // SAFETY: this tensor's memory (NULL or host memory of its nbytes,
        // at least `n`: new's contract) is written only by the copy.
        unsafe { tensor_get(src, self.0.data(), 0, n) }
    }

    /// All of this tensor into `dst` (wherever it is): `dst`'s backend
    /// writes it (`tensor_set`).
    pub fn copy_into(self, dst: TensorRef) {
        // SAFETY: this tensor's memory is NULL or readable for its nbytes.
        unsafe { tensor_set(dst, self.0.data(), 0, self.0.nbytes()) }
    }
}

// --- graphs computed by ggml.c -------------------------------------------

/// The callback ggml.c asks between nodes whether to stop a compute, with
/// its data (`wsp_ggml_backend_cpu_set_abort_callback`).
#[derive(Clone, Copy)]
pub struct AbortCallback {
    f: Option<unsafe extern "C" fn(data: *mut c_void) -> bool>,
    data: *mut c_void,
}

impl AbortCallback {
    /// None.
    pub const NONE: AbortCallback = AbortCallback { f: None, data: ptr::null_mut() };

    /// # Safety
    /// `f`, when set, is safe to call with `data` during every compute for
    /// as long as the callback is set.
    pub unsafe fn new(f: Option<unsafe extern "C" fn(data: *mut c_void) -> bool>, data: *mut c_void) -> Self {
        AbortCallback { f, data }
    }
    /// A callback written in safe Rust (which cannot read through `data`).
    #[cfg(test)]
    pub fn for_test(f: extern "C" fn(data: *mut c_void) -> bool, data: *mut c_void) -> Self {
        AbortCallback { f: Some(f), data }
    }
    #[cfg(test)]
    pub fn is_set(self) -> bool {
        self.f.is_some()
    }
    #[cfg(test)]
    pub fn data(self) -> *mut c_void {
        self.data
    }
}

/// A graph whose tensors are allocated in host memory, computable by
/// ggml.c: a graph C passed to a host backend's callback (see the module
/// doc), for that call.
#[derive(Clone, Copy)]
pub struct HostGraph<'a>(GraphRef<'a>);

/// ggml.c's plan for a compute (`wsp_ggml_cplan`), without a work buffer.
pub struct Cplan(wsp_ggml_cplan);

impl Cplan {
    /// The bytes of work buffer the compute needs.
    pub fn work_size(&self) -> usize {
        self.0.work_size
    }
}

impl<'a> HostGraph<'a> {
    /// # Safety
    /// `g`'s tensors are allocated in host memory (each holding its nbytes
    /// where ggml.c computes it), for as long as the handle is used.
    pub(super) unsafe fn new(g: GraphRef<'a>) -> Self {
        HostGraph(g)
    }

    /// ggml.c's plan for `n_threads` threads (`wsp_ggml_graph_plan`), asking
    /// `abort` between nodes.
    pub fn cplan(self, n_threads: c_int, abort: AbortCallback) -> Cplan {
        // SAFETY: ggml computes the plan from a live graph (GraphRef invariant).
        let mut cplan = unsafe { ggml::wsp_ggml_graph_plan(self.0.as_ptr(), n_threads) };
        cplan.abort_callback = abort.f;
        cplan.abort_callback_data = abort.data;
        Cplan(cplan)
    }

    /// Compute it with ggml.c (`wsp_ggml_graph_compute`), `work` as the work
    /// buffer; `work` holds at least the plan's work size (aborts naming
    /// `func` otherwise).
    pub fn compute(self, cplan: &mut Cplan, work: &mut AlignedBuf, func: &str) {
        let size = cplan.0.work_size;
        if size > work.len {
            fatal(func, "the work buffer is smaller than the plan's work size");
        }
        cplan.0.work_data = if size > 0 { work.as_ptr() } else { ptr::null_mut() };
        // SAFETY: a live graph of host tensors (new's contract) and a cplan
        // whose work buffer holds work_size bytes, borrowed for the call.
        unsafe { ggml::wsp_ggml_graph_compute(self.0.as_ptr(), &mut cplan.0) };
    }

    /// A plan to compute it later ([`GraphPlan`]): the cplan, a copy of
    /// the graph struct as the original keeps, and a work buffer of its
    /// own (Err: no memory for it).
    pub fn plan(self, n_threads: c_int, abort: AbortCallback) -> Result<GraphPlan, OutOfMemory> {
        let Cplan(mut cplan) = self.cplan(n_threads, abort);
        // SAFETY: GraphRef invariant: a live graph struct, copied by value.
        let cgraph = unsafe { ptr::read(self.0.as_ptr()) };
        let work = if cplan.work_size > 0 { AlignedBuf::try_new(cplan.work_size)? } else { AlignedBuf::empty() };
        cplan.work_data = work.as_ptr();
        Ok(GraphPlan { cplan, cgraph, _work: work })
    }
}

/// A graph plan: ggml's cplan with its own work buffer, and a copy of the
/// graph struct (whose node array and tensors stay C's).
pub struct GraphPlan {
    cplan: wsp_ggml_cplan,
    cgraph: wsp_ggml_cgraph,
    _work: AlignedBuf,
}

/// A `graph_plan_compute` call: made only by its trampoline, for the plan
/// C passed, whose graph C's contract keeps live and allocated for the call.
pub struct PlanCall(());

impl PlanCall {
    /// # Safety
    /// Made for a `graph_plan_compute` call on a plan whose graph and
    /// tensors are live and allocated, for that call.
    pub(super) unsafe fn new() -> Self {
        PlanCall(())
    }
}

impl GraphPlan {
    /// Compute the plan's graph with ggml.c.
    pub fn compute(&mut self, _call: PlanCall) {
        // SAFETY: the plan's graph copy is live for this call (PlanCall), its
        // cplan's work buffer is its own and holds work_size bytes.
        unsafe { ggml::wsp_ggml_graph_compute(&mut self.cgraph, &mut self.cplan) };
    }
}
