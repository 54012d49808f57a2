//! The CPU backend: host memory, computed by ggml.c's `wsp_ggml_graph_compute`.

use crate::prelude::*;

use core::cell::Cell;
use core::ffi::{c_char, c_int, c_void};
use core::ptr::{self, NonNull};

use crate::fatal::{check, fatal, guard_callback};
use crate::ggml::{self, wsp_ggml_cgraph, wsp_ggml_cplan, wsp_ggml_tensor, GraphRef, TensorRef};
use crate::handle::{
    buffer_init, cpu_buffer_iface, fn_addr, tensor_get, tensor_set, wsp_ggml_backend, wsp_ggml_backend_buffer_t,
    wsp_ggml_backend_graph_plan_t, wsp_ggml_backend_i, wsp_ggml_backend_t, BackendRef, FromC, OwnedBackend, OwnedBuffer, TENSOR_ALIGNMENT,
};
use crate::platform::{self, OutOfMemory};

/// A 64-byte aligned host allocation from `posix_memalign`, freed on drop.
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
    /// Give up ownership; the pointer must later be passed to `libc::free`.
    pub fn into_raw(self) -> *mut u8 {
        let p = self.ptr;
        core::mem::forget(self);
        p
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr came from posix_memalign (or is NULL) and is freed once.
        unsafe { libc::free(self.ptr.cast()) }
    }
}

/// What `backend->context` points to for a CPU backend. Reached only
/// through shared references (`cpu_context`): ggml.c's abort callback may
/// call back in while a compute holds one, so every field is a `Cell`
/// (a backend is used by one thread at a time: the C contract).
pub struct CpuContext {
    n_threads: Cell<c_int>,
    /// Work buffer reused across `graph_compute` calls (taken out while
    /// ggml.c computes with it).
    work: Cell<AlignedBuf>,
    abort_callback: Cell<AbortCallback>,
    abort_callback_data: Cell<*mut c_void>,
    /// ggml.c is computing a graph for this backend: its abort callback may
    /// call in, and only calls that leave the context alone are allowed.
    computing: Cell<bool>,
}

type AbortCallback = Option<unsafe extern "C" fn(data: *mut c_void) -> bool>;

/// A graph plan: ggml's cplan, its own work buffer, and a copy of the graph.
struct CpuPlan {
    cplan: wsp_ggml_cplan,
    cgraph: wsp_ggml_cgraph,
    _work: AlignedBuf,
}

/// One static table, so `is_cpu` can compare the `get_name` pointer.
static CPU_BACKEND_I: wsp_ggml_backend_i = wsp_ggml_backend_i {
    get_name: Some(cpu_get_name),
    free: Some(cpu_free),
    alloc_buffer: Some(cpu_alloc_buffer),
    get_alignment: Some(cpu_get_alignment),
    set_tensor_async: Some(cpu_set_tensor_async),
    get_tensor_async: Some(cpu_get_tensor_async),
    synchronize: Some(cpu_synchronize),
    cpy_tensor_from: Some(cpu_cpy_tensor_from),
    cpy_tensor_to: Some(cpu_cpy_tensor_to),
    graph_plan_create: Some(cpu_graph_plan_create),
    graph_plan_free: Some(cpu_graph_plan_free),
    graph_plan_compute: Some(cpu_graph_plan_compute),
    graph_compute: Some(cpu_graph_compute),
    supports_op: Some(cpu_supports_op),
};

// Function-pointer identity: `is_cpu` recognises a CPU backend by its
// `get_name` slot. With optimisation rustc may emit a function in several
// codegen units and fold a load from an immutable static into the address of
// a local copy, so the table written into a backend and the table compared
// against could disagree. Reading the statics with `read_volatile` makes both
// sides use the one address stored in the static itself.
fn cpu_backend_iface() -> wsp_ggml_backend_i {
    // SAFETY: reading a plain-data static through a valid reference.
    unsafe { ptr::read_volatile(&CPU_BACKEND_I) }
}

/// `wsp_ggml_backend_cpu_init`: the backend, or no memory for it.
pub fn cpu_init() -> Result<OwnedBackend, OutOfMemory> {
    let ctx = platform::try_box(CpuContext {
        n_threads: Cell::new(ggml::WSP_GGML_DEFAULT_N_THREADS),
        work: Cell::new(AlignedBuf::empty()),
        abort_callback: Cell::new(None),
        abort_callback_data: Cell::new(ptr::null_mut()),
        computing: Cell::new(false),
    })?;
    let mut backend = platform::try_box(wsp_ggml_backend { iface: cpu_backend_iface(), context: ptr::null_mut() })?;
    backend.context = Box::into_raw(ctx).cast();
    // SAFETY: our own heap backend, ours alone, released by its `free` slot (cpu_free).
    Ok(unsafe { OwnedBackend::from_raw(Box::into_raw(backend)) }.expect("Box is never NULL"))
}

pub fn is_cpu(backend: BackendRef) -> bool {
    // (only the one slot, read as above: the scheduler asks this for every
    // supports_op question, and a volatile copy of the whole table costs a
    // load and a store per slot)
    // SAFETY: reading one field of a plain-data static.
    let cpu = unsafe { ptr::read_volatile(ptr::addr_of!(CPU_BACKEND_I.get_name)) };
    fn_addr(backend.iface().get_name) == fn_addr(cpu)
}

/// The CPU context of `backend` (shared: see `CpuContext`), aborting
/// (naming `func`) if it is not a CPU backend, or when called from inside
/// the backend's own abort callback (ggml.c is computing with the context).
/// The reference lives no longer than the borrowed handle, which is valid
/// for the call that made it (`BackendRef::new`).
pub fn cpu_context<'a>(backend: &'a BackendRef, func: &str) -> &'a CpuContext {
    check(is_cpu(*backend), func, || format!("backend '{}' is not a CPU backend", backend.name_lossy()));
    // SAFETY: a CPU backend's context is the Box<CpuContext> made in
    // cpu_init, freed only with the backend (cpu_free), which outlives the
    // handle; only shared references to it are ever made.
    let ctx = unsafe { &*backend.context().cast::<CpuContext>() };
    if ctx.computing.get() {
        fatal(func, "called from inside the CPU backend's abort callback (while it computes)");
    }
    ctx
}

pub fn set_n_threads(backend: BackendRef, n_threads: c_int) {
    cpu_context(&backend, "wsp_ggml_backend_cpu_set_n_threads").n_threads.set(n_threads);
}

/// `wsp_ggml_backend_cpu_buffer_from_ptr`: `backend` may be NULL (ggml-alloc.c passes NULL).
pub fn buffer_from_ptr(backend: Option<BackendRef>, data: *mut c_void, size: usize) -> Result<OwnedBuffer, OutOfMemory> {
    buffer_init(backend, cpu_buffer_iface(true), data, size)
}

/// Checks shared by set and get: bounds (overflow-safe) and allocation.
fn check_io(t: TensorRef, data: *const c_void, offset: usize, size: usize, func: &str) {
    let nbytes = t.nbytes();
    check(offset.checked_add(size).is_some_and(|end| end <= nbytes), func, || {
        format!("tensor '{}': offset {offset} + size {size} is out of bounds ({nbytes} bytes)", t.name_lossy())
    });
    check(!t.data().is_null(), func, || format!("tensor '{}' is not allocated (data is NULL)", t.name_lossy()));
    check(!data.is_null(), func, || "argument 'data' is NULL".into());
}

/// # Safety
/// Any argument: the backend is not read.
unsafe extern "C" fn cpu_get_name(_backend: wsp_ggml_backend_t) -> *const c_char {
    c"CPU".as_ptr()
}

/// # Safety
/// `backend` is a live CPU backend made by `cpu_init` (reached through
/// `CPU_BACKEND_I` only), not computing, and not used after this call.
unsafe extern "C" fn cpu_free(backend: wsp_ggml_backend_t) {
    let func = "wsp_ggml_backend_free";
    guard_callback(func, || {
        // SAFETY: the backend this callback was called on: live for the call.
        let handle = unsafe { BackendRef::from_c(backend, func, "backend") };
        // not while computing (cpu_context aborts then)
        let _ = cpu_context(&handle, func);
        // SAFETY: only reachable through CPU_BACKEND_I, so `backend` and its context
        // are the Boxes made in cpu_init; each is released once here.
        unsafe {
            drop(Box::from_raw((*backend).context.cast::<CpuContext>()));
            drop(Box::from_raw(backend));
        }
    })
}

/// # Safety
/// `backend` is a live CPU backend that outlives the buffer.
unsafe extern "C" fn cpu_alloc_buffer(backend: wsp_ggml_backend_t, size: usize) -> wsp_ggml_backend_buffer_t {
    guard_callback("wsp_ggml_backend_alloc_buffer", || {
        // Report (and own) `size + TENSOR_ALIGNMENT` bytes as the original does,
        // so sizes seen through the API are unchanged; the base is now aligned.
        let func = "wsp_ggml_backend_alloc_buffer";
        let total = size.checked_add(TENSOR_ALIGNMENT).unwrap_or_else(|| fatal(func, &format!("size {size} is too large")));
        // SAFETY: the backend this callback was called on: live for the call.
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        // (NULL when memory runs out, as upstream's CPU backend does)
        let made = AlignedBuf::try_new(total).and_then(|data| {
            let buffer = buffer_init(Some(backend), cpu_buffer_iface(false), data.as_ptr().cast(), total)?;
            let _ = data.into_raw(); // (the buffer owns it now: cpu_buffer_free_buffer)
            Ok(buffer)
        });
        match made {
            Ok(buffer) => buffer.into_raw(),
            Err(OutOfMemory(n)) => {
                platform::report_out_of_memory(func, n);
                ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// Any argument: the backend is not read.
unsafe extern "C" fn cpu_get_alignment(_backend: wsp_ggml_backend_t) -> usize {
    TENSOR_ALIGNMENT
}

/// # Safety
/// `tensor` is a live tensor whose `data` (when set) holds its
/// `nbytes`; `data` holds `size` readable bytes.
unsafe extern "C" fn cpu_set_tensor_async(
    _backend: wsp_ggml_backend_t,
    tensor: *mut wsp_ggml_tensor,
    data: *const c_void,
    offset: usize,
    size: usize,
) {
    let func = "wsp_ggml_backend_tensor_set";
    guard_callback(func, || {
        // SAFETY: the caller's tensor: live for the call (C contract).
        let t = unsafe { TensorRef::from_c(tensor, func, "tensor") };
        if size == 0 {
            return;
        }
        check_io(t, data, offset, size, func);
        // SAFETY: bounds checked against the tensor's size; the caller's `data`
        // holds `size` bytes (API contract). memmove semantics tolerate overlap.
        unsafe { ptr::copy(data.cast::<u8>(), t.data().cast::<u8>().add(offset), size) }
    })
}

/// # Safety
/// `tensor` is a live tensor whose `data` (when set) holds its
/// `nbytes`; `data` holds `size` writable bytes.
unsafe extern "C" fn cpu_get_tensor_async(
    _backend: wsp_ggml_backend_t,
    tensor: *const wsp_ggml_tensor,
    data: *mut c_void,
    offset: usize,
    size: usize,
) {
    let func = "wsp_ggml_backend_tensor_get";
    guard_callback(func, || {
        // SAFETY: the caller's tensor: live for the call (C contract).
        let t = unsafe { TensorRef::from_c(tensor, func, "tensor") };
        if size == 0 {
            return;
        }
        check_io(t, data, offset, size, func);
        // SAFETY: as in cpu_set_tensor_async.
        unsafe { ptr::copy(t.data().cast::<u8>().add(offset), data.cast::<u8>(), size) }
    })
}

/// # Safety
/// Any argument: nothing is read.
unsafe extern "C" fn cpu_synchronize(_backend: wsp_ggml_backend_t) {}

/// # Safety
/// `src` and `dst` are live tensors of the same size; `dst` is in host
/// memory (a CPU buffer) holding `nbytes(src)` bytes.
unsafe extern "C" fn cpu_cpy_tensor_from(_backend: wsp_ggml_backend_t, src: *mut wsp_ggml_tensor, dst: *mut wsp_ggml_tensor) {
    let func = "wsp_ggml_backend_tensor_copy";
    guard_callback(func, || {
        // SAFETY: the caller's tensors: live for the call (C contract).
        let (src, dst) = unsafe { (TensorRef::from_c(src, func, "tensor"), TensorRef::from_c(dst, func, "tensor")) };
        // SAFETY: `dst` is host memory holding `nbytes(src)` bytes (# Safety above).
        unsafe { tensor_get(src, dst.data(), 0, src.nbytes()) };
    })
}

/// # Safety
/// `src` and `dst` are live tensors of the same size; `src` is in host
/// memory (a CPU buffer) holding `nbytes(src)` bytes.
unsafe extern "C" fn cpu_cpy_tensor_to(_backend: wsp_ggml_backend_t, src: *mut wsp_ggml_tensor, dst: *mut wsp_ggml_tensor) {
    let func = "wsp_ggml_backend_tensor_copy";
    guard_callback(func, || {
        // SAFETY: the caller's tensors: live for the call (C contract).
        let (src, dst) = unsafe { (TensorRef::from_c(src, func, "tensor"), TensorRef::from_c(dst, func, "tensor")) };
        // SAFETY: `src` is host memory holding `nbytes(src)` bytes (# Safety above).
        unsafe { tensor_set(dst, src.data(), 0, src.nbytes()) };
    })
}

fn plan_for(ctx: &CpuContext, graph: GraphRef) -> wsp_ggml_cplan {
    // SAFETY: ggml computes the plan from a live graph (GraphRef invariant).
    let mut cplan = unsafe { ggml::wsp_ggml_graph_plan(graph.as_ptr(), ctx.n_threads.get()) };
    cplan.abort_callback = ctx.abort_callback.get();
    cplan.abort_callback_data = ctx.abort_callback_data.get();
    cplan
}

/// # Safety
/// `backend` is a live CPU backend; `cgraph` is a live graph whose
/// tensors are allocated in host memory.
unsafe extern "C" fn cpu_graph_plan_create(backend: wsp_ggml_backend_t, cgraph: *mut wsp_ggml_cgraph) -> wsp_ggml_backend_graph_plan_t {
    let func = "wsp_ggml_backend_graph_plan_create";
    guard_callback(func, || {
        // SAFETY: the backend this callback was called on: live for the call.
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        let ctx = cpu_context(&backend, func);
        // SAFETY: the caller's graph: live for the call (C contract).
        let graph = unsafe { GraphRef::from_c(cgraph, func, "cgraph") };
        let mut cplan = plan_for(ctx, graph);
        // SAFETY: GraphRef is valid; the plan keeps a by-value copy like the original.
        let cgraph = unsafe { *graph.as_ptr() };
        // (NULL when memory runs out, as upstream's CPU backend does)
        let made = if cplan.work_size > 0 { AlignedBuf::try_new(cplan.work_size) } else { Ok(AlignedBuf::empty()) }.and_then(|work| {
            cplan.work_data = work.as_ptr();
            platform::try_box(CpuPlan { cplan, cgraph, _work: work })
        });
        match made {
            Ok(plan) => Box::into_raw(plan).cast(),
            Err(OutOfMemory(n)) => {
                platform::report_out_of_memory(func, n);
                ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// `plan` is NULL or a plan made by `cpu_graph_plan_create`, freed once.
unsafe extern "C" fn cpu_graph_plan_free(_backend: wsp_ggml_backend_t, plan: wsp_ggml_backend_graph_plan_t) {
    guard_callback("wsp_ggml_backend_graph_plan_free", || {
        if let Some(p) = NonNull::new(plan.cast::<CpuPlan>()) {
            // SAFETY: CPU plans are Boxes made by cpu_graph_plan_create; freed once.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
    })
}

/// # Safety
/// `plan` is a live plan made by `cpu_graph_plan_create`, whose graph's
/// tensors are still allocated in host memory; used by one caller at a time.
unsafe extern "C" fn cpu_graph_plan_compute(_backend: wsp_ggml_backend_t, plan: wsp_ggml_backend_graph_plan_t) {
    let func = "wsp_ggml_backend_graph_plan_compute";
    guard_callback(func, || {
        let plan = NonNull::new(plan.cast::<CpuPlan>()).unwrap_or_else(|| fatal(func, "argument 'plan' is NULL"));
        // SAFETY: a plan made by cpu_graph_plan_create, used by one caller at a time.
        let plan = unsafe { &mut *plan.as_ptr() };
        // SAFETY: the plan's graph copy and cplan (with its work buffer) are valid.
        unsafe { ggml::wsp_ggml_graph_compute(&mut plan.cgraph, &mut plan.cplan) };
    })
}

/// # Safety
/// `backend` is a live CPU backend; `cgraph` is a live graph whose
/// tensors are allocated in host memory.
unsafe extern "C" fn cpu_graph_compute(backend: wsp_ggml_backend_t, cgraph: *mut wsp_ggml_cgraph) {
    let func = "wsp_ggml_backend_graph_compute";
    guard_callback(func, || {
        // SAFETY: the backend this callback was called on and the caller's
        // graph: live for the call (C contract).
        let (backend, graph) = unsafe { (BackendRef::from_c(backend, func, "backend"), GraphRef::from_c(cgraph, func, "cgraph")) };
        let ctx = cpu_context(&backend, func);
        let mut cplan = plan_for(ctx, graph);
        // (the work buffer is taken out while ggml.c computes with it, and
        // put back after: no call from the abort callback can reach it)
        let mut work = ctx.work.take();
        work.reserve_scratch(cplan.work_size, func);
        cplan.work_data = if cplan.work_size > 0 { work.as_ptr() } else { ptr::null_mut() };
        ctx.computing.set(true);
        // The abort callback may call back in while ggml.c computes: only
        // calls that leave the context alone pass (cpu_context).
        // SAFETY: valid graph and a cplan whose work buffer holds work_size bytes.
        unsafe { ggml::wsp_ggml_graph_compute(graph.as_ptr(), &mut cplan) };
        ctx.computing.set(false);
        ctx.work.set(work);
    })
}

/// # Safety
/// Any argument: nothing is read (the CPU backend runs every op).
unsafe extern "C" fn cpu_supports_op(_backend: wsp_ggml_backend_t, _op: *const wsp_ggml_tensor) -> bool {
    true
}

/// `wsp_ggml_backend_cpu_set_abort_callback`: handed to ggml's cplan, which
/// checks it between nodes and stops the compute when it returns true.
pub fn set_abort_callback(backend: BackendRef, callback: Option<unsafe extern "C" fn(data: *mut c_void) -> bool>, data: *mut c_void) {
    let ctx = cpu_context(&backend, "wsp_ggml_backend_cpu_set_abort_callback");
    ctx.abort_callback.set(callback);
    ctx.abort_callback_data.set(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ggml::zeroed_tensor;
    use crate::handle::{is_cpu_buffer, tensor_get, tensor_set};

    /// A [16] f32 tensor at `data` in `buffer` (the tests' stub of
    /// wsp_ggml_nbytes, fake_c.rs, gives 64 bytes).
    fn tensor_in(buffer: crate::handle::BufferRef, data: *mut c_void) -> wsp_ggml_tensor {
        let mut t = zeroed_tensor();
        t.ne = [16, 1, 1, 1];
        t.nb = [4, 64, 64, 64];
        t.buffer = buffer.as_ptr();
        t.data = data;
        t
    }

    /// The CPU backend's buffer and tensor callbacks, reached through the
    /// interface tables as C reaches them (and run under Miri by
    /// scripts/miri): buffers owned and over caller memory, set/get with
    /// offsets, a copy between CPU tensors, the context's settings, frees.
    #[test]
    fn cpu_buffers_and_tensor_io_through_the_interface() {
        let cpu_owner = cpu_init().expect("memory");
        let cpu = cpu_owner.get();
        assert!(is_cpu(cpu));
        set_n_threads(cpu, 3);
        assert_eq!(cpu_context(&cpu, "test").n_threads.get(), 3);
        // SAFETY: made by the CPU backend just now, ours alone.
        let owned_buffer = unsafe { OwnedBuffer::from_raw(cpu.alloc_buffer(128)) }.expect("a buffer");
        let owned = owned_buffer.get();
        assert!(is_cpu_buffer(owned));
        assert_eq!(owned.backend(), Some(cpu));
        assert_eq!(owned.size(), 128 + TENSOR_ALIGNMENT);
        let base = owned.base();
        assert_eq!(base as usize % TENSOR_ALIGNMENT, 0);

        let mut host = vec![0f32; 16];
        let over_buffer = buffer_from_ptr(Some(cpu), host.as_mut_ptr().cast(), 64).expect("memory");
        let over = over_buffer.get();
        assert!(is_cpu_buffer(over));
        assert_eq!(over.base(), host.as_mut_ptr().cast());

        let mut a = tensor_in(owned, base);
        let mut b = tensor_in(over, over.base());
        // SAFETY: local tensors, live until the end of the test.
        let (ta, tb) = unsafe { (TensorRef::new(&mut a).expect("a"), TensorRef::new(&mut b).expect("b")) };
        let src: Vec<f32> = (0..16).map(|i| i as f32).collect();
        let mut back = vec![0f32; 16];
        // SAFETY: each call's data holds (at least) its size in bytes.
        unsafe {
            tensor_set(ta, src.as_ptr().cast(), 0, 64);
            tensor_get(ta, back.as_mut_ptr().cast(), 0, 64);
            assert_eq!(back, src);
            tensor_get(ta, back.as_mut_ptr().cast(), 8, 8);
            assert_eq!(&back[..2], &[2.0, 3.0]);
            tensor_set(ta, src[10..].as_ptr().cast(), 4, 4);
        }
        crate::copy::tensor_copy(ta, tb);
        // SAFETY: tb's memory is `host`; no reference to it is live.
        let copied = unsafe { core::slice::from_raw_parts(b.data.cast::<f32>(), 16) }.to_vec();
        assert_eq!(copied[..3], [0.0, 10.0, 2.0]);
        assert_eq!(copied[3..], src[3..]);

        // (the borrows end here: the owners free each once, buffers first)
        over_buffer.free();
        owned_buffer.free();
        cpu_owner.free();
    }

    /// The CPU backend's graph-plan bookkeeping and work buffer, as far as
    /// Miri reaches without ggml.c: `wsp_ggml_graph_plan` and
    /// `wsp_ggml_graph_compute` are C (stubbed as unreachable for the unit
    /// tests, fake_c.rs), so `graph_plan_create`, `graph_plan_compute`
    /// and `graph_compute` cannot run here. What they leave behind can: a
    /// plan as `cpu_graph_plan_create` makes it (the cplan with the
    /// context's thread count and abort callback, its work data in the
    /// plan's own buffer, written in full as ggml.c does, a copy of the
    /// graph) freed through the interface, a NULL plan freed; the scratch
    /// buffer `cpu_graph_compute` takes out of the context, grows and puts
    /// back; the other slots of the interface.
    #[test]
    fn cpu_graph_plan_bookkeeping_and_work_buffer_without_ggml() {
        unsafe extern "C" fn stop(_data: *mut c_void) -> bool {
            true
        }
        let cpu_owner = cpu_init().expect("memory");
        let cpu = cpu_owner.get();
        assert_eq!(cpu.alignment(), TENSOR_ALIGNMENT);
        // SAFETY: get_name returns a static C string.
        assert_eq!(unsafe { core::ffi::CStr::from_ptr(cpu.name()) }, c"CPU");
        cpu.synchronize();
        let mut op = zeroed_tensor();
        // SAFETY: a local tensor, live for the call.
        assert!(cpu.supports_op(unsafe { TensorRef::new(&mut op) }.expect("op")));

        let mut flag = 0u8;
        let data: *mut c_void = ptr::addr_of_mut!(flag).cast();
        set_n_threads(cpu, 2);
        set_abort_callback(cpu, Some(stop), data);
        let ctx = cpu_context(&cpu, "test");
        assert_eq!(ctx.abort_callback_data.get(), data);

        // a plan as cpu_graph_plan_create leaves it (plan_for's fields)
        let mut nodes = [ptr::null_mut::<wsp_ggml_tensor>(); 2];
        // SAFETY: wsp_ggml_cgraph is plain data (integers and raw pointers).
        let mut cgraph: wsp_ggml_cgraph = unsafe { core::mem::zeroed() };
        cgraph.size = 2;
        cgraph.nodes = nodes.as_mut_ptr();
        let work = AlignedBuf::new(200, "test");
        let cplan = wsp_ggml_cplan {
            work_size: 200,
            work_data: work.as_ptr(),
            n_threads: ctx.n_threads.get(),
            abort_callback: ctx.abort_callback.get(),
            abort_callback_data: ctx.abort_callback_data.get(),
        };
        assert_eq!(cplan.n_threads, 2);
        assert_eq!(cplan.work_data as usize % TENSOR_ALIGNMENT, 0);
        // SAFETY: the work buffer holds work_size bytes.
        unsafe { ptr::write_bytes(cplan.work_data, 0xab, cplan.work_size) };
        let plan = Box::into_raw(Box::new(CpuPlan { cplan, cgraph, _work: work }));
        // SAFETY: the plan just made; nothing else refers to it.
        let copy = unsafe { &(*plan).cgraph };
        assert_eq!((copy.size, copy.nodes), (2, nodes.as_mut_ptr()));
        // SAFETY: a plan as cpu_graph_plan_create makes it, freed once; NULL
        // is accepted.
        unsafe {
            cpu.graph_plan_free(plan.cast());
            cpu.graph_plan_free(ptr::null_mut());
        }

        // the scratch work buffer of graph_compute: taken out, grown only
        // when too small, put back, freed with the backend
        let mut work = ctx.work.take();
        assert!(work.as_ptr().is_null());
        work.reserve_scratch(100, "test");
        let first = work.as_ptr();
        assert_eq!(first as usize % TENSOR_ALIGNMENT, 0);
        // SAFETY: 100 bytes were reserved.
        unsafe { ptr::write_bytes(first, 1, 100) };
        work.reserve_scratch(60, "test");
        assert_eq!(work.as_ptr(), first);
        work.reserve_scratch(1000, "test");
        // SAFETY: 1000 bytes were reserved.
        unsafe { ptr::write_bytes(work.as_ptr(), 2, 1000) };
        ctx.work.set(work);
        assert!(!ctx.computing.get());

        set_abort_callback(cpu, None, ptr::null_mut());
        assert!(cpu_context(&cpu, "test").abort_callback.get().is_none());
        cpu_owner.free();
    }
}
