//! C interface tables filled from safe Rust: a backend written against
//! [`BackendImpl`] (the CPU backend, `cpu.rs`) or a buffer against
//! [`BufferImpl`] (the host buffer, [`HostBuffer`]) gets its
//! `wsp_ggml_backend_i` / `wsp_ggml_backend_buffer_i` from
//! [`backend_iface`] / [`buffer_iface`], whose slots are the generic
//! trampolines below, monomorphised once per implementation. Each
//! trampoline is where the C call is checked and converted, once for every
//! implementation: the panic policy (`fatal::guard_callback`), C's pointers
//! into handles ([`FromC`], [`HostTensor`], [`HostGraph`]), the context
//! (`Box<B>`, [`context_of`]) and the frees (`Box::from_raw`,
//! [`RawContext::from_raw`]).
//!
//! A table is a `static` of the implementation's own, read with
//! [`stable_copy`], so that every copy of it holds the addresses stored in
//! the static: a backend or buffer is recognised by comparing its
//! `get_name` / `get_base` slot with the static's ([`is_impl`],
//! [`is_cpu_buffer`]).

use crate::prelude::*;

use core::ffi::{c_char, c_void, CStr};
use core::ptr::{self, NonNull};

use super::host::{AlignedBuf, HostDst, HostGraph, HostSrc, HostTensor, PlanCall, TENSOR_ALIGNMENT};
use super::refs::{
    buffer_init, wsp_ggml_backend, wsp_ggml_backend_buffer_i, wsp_ggml_backend_buffer_t, wsp_ggml_backend_graph_plan_t, wsp_ggml_backend_i,
    wsp_ggml_backend_t, BackendRef, BufferRef, FromC, OwnedBackend, OwnedBuffer,
};
use crate::fatal::{check, fatal, guard_callback};
use crate::ggml::{wsp_ggml_cgraph, wsp_ggml_tensor, GraphRef, TensorRef};
use crate::platform::{self, OutOfMemory};

/// A copy of `*t`, read so that it holds what the memory holds: a table's
/// function addresses as stored in its static. (With optimisation rustc may
/// emit a function in several codegen units and fold a load from an
/// immutable static into the address of a local copy, so the table written
/// into a backend and the table compared against could disagree.)
pub fn stable_copy<T: Copy>(t: &T) -> T {
    // SAFETY: reading a Copy value through a valid reference.
    unsafe { ptr::read_volatile(t) }
}

/// The address of a function pointer, for comparing slots.
pub fn fn_addr<F: Copy>(f: Option<F>) -> Option<usize> {
    // SAFETY: F is always a function-pointer type here (same size as usize);
    // only its address is taken.
    f.map(|f| unsafe { core::mem::transmute_copy::<F, usize>(&f) })
}

// --- backends -------------------------------------------------------------

/// A backend whose tensors live in host memory, written in safe Rust:
/// what each slot of its `wsp_ggml_backend_i` does. `Self` is its context
/// (`backend->context`, a `Box<Self>`), reached only through shared
/// references: callbacks C makes while one is computing may call in again.
///
/// The slots that do not take `&self` never read the context: C may call
/// them on a backend of its own that copies these slots (a wrapper that
/// replaces some, as `ffi-tests/c/ours_extras.c` makes).
pub trait BackendImpl: Sized + 'static {
    /// `get_name`.
    const NAME: &'static CStr;
    /// `get_alignment`.
    const ALIGNMENT: usize;
    /// A graph plan (`graph_plan_create`), boxed for C.
    type Plan: 'static;

    /// Its table: the static that `backend_iface::<Self>()` fills, and no
    /// other (its `get_name` marks the backends whose context is a `Self`:
    /// [`is_impl`], [`context_of`]).
    fn iface() -> &'static wsp_ggml_backend_i;
    /// Called every time the context is borrowed, with the calling
    /// function's name: a place to refuse a call that must not reach it.
    fn on_borrow(&self, func: &str);

    /// `alloc_buffer`: Err is reported as out of memory and NULL returned.
    fn alloc_buffer(backend: BackendRef, size: usize) -> Result<OwnedBuffer, OutOfMemory>;
    /// `set_tensor_async` (on a tensor of this backend).
    fn set_tensor_async(t: HostTensor, offset: usize, data: HostSrc);
    /// `get_tensor_async` (on a tensor of this backend).
    fn get_tensor_async(t: HostTensor, offset: usize, data: HostDst);
    /// `synchronize`.
    fn synchronize();
    /// `cpy_tensor_from`: `src` into `dst`, a tensor of this backend.
    fn cpy_tensor_from(src: TensorRef, dst: HostTensor);
    /// `cpy_tensor_to`: `src`, a tensor of this backend, into `dst`.
    fn cpy_tensor_to(src: HostTensor, dst: TensorRef);
    /// `graph_plan_create`: Err is reported as out of memory and NULL returned.
    fn graph_plan_create(&self, graph: HostGraph) -> Result<Self::Plan, OutOfMemory>;
    /// `graph_plan_compute`.
    fn graph_plan_compute(plan: &mut Self::Plan, call: PlanCall);
    /// `graph_compute`.
    fn graph_compute(&self, graph: HostGraph);
    /// `supports_op` (`op` may be NULL: C passes what it has).
    fn supports_op(op: Option<TensorRef>) -> bool;
}

/// The interface table of `B`: every slot one of the trampolines below.
pub const fn backend_iface<B: BackendImpl>() -> wsp_ggml_backend_i {
    wsp_ggml_backend_i {
        get_name: Some(get_name::<B>),
        free: Some(free::<B>),
        alloc_buffer: Some(alloc_buffer::<B>),
        get_alignment: Some(get_alignment::<B>),
        set_tensor_async: Some(set_tensor_async::<B>),
        get_tensor_async: Some(get_tensor_async::<B>),
        synchronize: Some(synchronize::<B>),
        cpy_tensor_from: Some(cpy_tensor_from::<B>),
        cpy_tensor_to: Some(cpy_tensor_to::<B>),
        graph_plan_create: Some(graph_plan_create::<B>),
        graph_plan_free: Some(graph_plan_free::<B>),
        graph_plan_compute: Some(graph_plan_compute::<B>),
        graph_compute: Some(graph_compute::<B>),
        supports_op: Some(supports_op::<B>),
    }
}

/// A new backend of `B` with `ctx` as its context (or no memory for it):
/// freed by its `free` slot, which drops the context.
pub fn backend_new<B: BackendImpl>(ctx: B) -> Result<OwnedBackend, OutOfMemory> {
    let ctx = platform::try_box(ctx)?;
    let mut backend = platform::try_box(wsp_ggml_backend { iface: stable_copy(B::iface()), context: ptr::null_mut() })?;
    backend.context = Box::into_raw(ctx).cast();
    // SAFETY: our own heap backend, ours alone, released by its `free` slot.
    Ok(unsafe { OwnedBackend::from_raw(Box::into_raw(backend)) }.expect("Box is never NULL"))
}

/// Whether `backend` is one of `B`'s (its `get_name` is `B`'s).
pub fn is_impl<B: BackendImpl>(backend: BackendRef) -> bool {
    // (only the one slot is read: the scheduler asks this for every
    // supports_op question, and a copy of the whole table costs a load and
    // a store per slot)
    fn_addr(backend.iface().get_name) == fn_addr(stable_copy(&B::iface().get_name))
}

/// The context of `backend`, a backend of `B`'s (aborting naming `func`
/// otherwise, or where `B::on_borrow` refuses). The reference lives no
/// longer than the borrowed handle, which is valid for the call that made it.
pub fn context_of<'a, B: BackendImpl>(backend: &'a BackendRef, func: &str) -> &'a B {
    check(is_impl::<B>(*backend), func, || {
        format!("backend '{}' is not a {} backend", backend.name_lossy(), String::from_utf8_lossy(B::NAME.to_bytes()))
    });
    // SAFETY: a backend with B's table is one backend_new::<B> made: its
    // context is a Box<B>, freed only with the backend (the `free`
    // trampoline), which outlives the handle; only shared references to it
    // are made.
    let ctx = unsafe { &*backend.context().cast::<B>() };
    ctx.on_borrow(func);
    ctx
}

/// # Safety
/// Any argument: the backend is not read.
unsafe extern "C" fn get_name<B: BackendImpl>(_backend: wsp_ggml_backend_t) -> *const c_char {
    B::NAME.as_ptr()
}

/// # Safety
/// `backend` is a live backend made by `backend_new::<B>`, not used after
/// this call.
unsafe extern "C" fn free<B: BackendImpl>(backend: wsp_ggml_backend_t) {
    let func = "wsp_ggml_backend_free";
    guard_callback(func, || {
        // SAFETY: the backend this callback was called on: live for the call.
        let handle = unsafe { BackendRef::from_c(backend, func, "backend") };
        // (not while on_borrow refuses: the CPU backend's compute)
        let _ = context_of::<B>(&handle, func);
        // SAFETY: `backend` and its context are the Boxes made in
        // backend_new (context_of checked whose it is); each is released
        // once, here, and no reference to either outlives this.
        unsafe {
            drop(Box::from_raw(handle.context().cast::<B>()));
            drop(Box::from_raw(backend));
        }
    })
}

/// # Safety
/// `backend` is a live backend that outlives the buffer.
unsafe extern "C" fn alloc_buffer<B: BackendImpl>(backend: wsp_ggml_backend_t, size: usize) -> wsp_ggml_backend_buffer_t {
    let func = "wsp_ggml_backend_alloc_buffer";
    guard_callback(func, || {
        // SAFETY: the backend this callback was called on: live for the call.
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        // (NULL when memory runs out, as upstream's CPU backend does)
        match B::alloc_buffer(backend, size) {
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
unsafe extern "C" fn get_alignment<B: BackendImpl>(_backend: wsp_ggml_backend_t) -> usize {
    B::ALIGNMENT
}

/// # Safety
/// `tensor` is a live tensor allocated on this (host) backend; `data`
/// holds `size` readable bytes.
unsafe extern "C" fn set_tensor_async<B: BackendImpl>(
    _backend: wsp_ggml_backend_t,
    tensor: *mut wsp_ggml_tensor,
    data: *const c_void,
    offset: usize,
    size: usize,
) {
    let func = "wsp_ggml_backend_tensor_set";
    guard_callback(func, || {
        // SAFETY: the caller's tensor, live for the call and allocated on
        // this backend, whose memory is host memory; the caller's data
        // (C contract).
        let (t, data) = unsafe { (HostTensor::new(TensorRef::from_c(tensor, func, "tensor")), HostSrc::new(data, size)) };
        B::set_tensor_async(t, offset, data)
    })
}

/// # Safety
/// `tensor` is a live tensor allocated on this (host) backend; `data`
/// holds `size` writable bytes.
unsafe extern "C" fn get_tensor_async<B: BackendImpl>(
    _backend: wsp_ggml_backend_t,
    tensor: *const wsp_ggml_tensor,
    data: *mut c_void,
    offset: usize,
    size: usize,
) {
    let func = "wsp_ggml_backend_tensor_get";
    guard_callback(func, || {
        // SAFETY: as in set_tensor_async, the caller's data writable.
        let (t, data) = unsafe { (HostTensor::new(TensorRef::from_c(tensor, func, "tensor")), HostDst::new(data, size)) };
        B::get_tensor_async(t, offset, data)
    })
}

/// # Safety
/// Any argument: the backend is not read.
unsafe extern "C" fn synchronize<B: BackendImpl>(_backend: wsp_ggml_backend_t) {
    B::synchronize()
}

/// # Safety
/// `src` and `dst` are live tensors of the same size; `dst` is allocated on
/// this (host) backend.
unsafe extern "C" fn cpy_tensor_from<B: BackendImpl>(_backend: wsp_ggml_backend_t, src: *mut wsp_ggml_tensor, dst: *mut wsp_ggml_tensor) {
    let func = "wsp_ggml_backend_tensor_copy";
    guard_callback(func, || {
        // SAFETY: the caller's tensors, live for the call; `dst` in host memory (C contract).
        let (src, dst) = unsafe { (TensorRef::from_c(src, func, "tensor"), HostTensor::new(TensorRef::from_c(dst, func, "tensor"))) };
        B::cpy_tensor_from(src, dst)
    })
}

/// # Safety
/// `src` and `dst` are live tensors of the same size; `src` is allocated on
/// this (host) backend.
unsafe extern "C" fn cpy_tensor_to<B: BackendImpl>(_backend: wsp_ggml_backend_t, src: *mut wsp_ggml_tensor, dst: *mut wsp_ggml_tensor) {
    let func = "wsp_ggml_backend_tensor_copy";
    guard_callback(func, || {
        // SAFETY: the caller's tensors, live for the call; `src` in host memory (C contract).
        let (src, dst) = unsafe { (HostTensor::new(TensorRef::from_c(src, func, "tensor")), TensorRef::from_c(dst, func, "tensor")) };
        B::cpy_tensor_to(src, dst)
    })
}

/// # Safety
/// `backend` is a live backend of `B`; `cgraph` is a live graph whose
/// tensors are allocated on it.
unsafe extern "C" fn graph_plan_create<B: BackendImpl>(
    backend: wsp_ggml_backend_t,
    cgraph: *mut wsp_ggml_cgraph,
) -> wsp_ggml_backend_graph_plan_t {
    let func = "wsp_ggml_backend_graph_plan_create";
    guard_callback(func, || {
        // SAFETY: the backend this callback was called on: live for the call.
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        let ctx = context_of::<B>(&backend, func);
        // SAFETY: the caller's graph, live for the call, its tensors in this
        // backend's host memory (C contract).
        let graph = unsafe { HostGraph::new(GraphRef::from_c(cgraph, func, "cgraph")) };
        // (NULL when memory runs out, as upstream's CPU backend does)
        match ctx.graph_plan_create(graph).and_then(platform::try_box) {
            Ok(plan) => Box::into_raw(plan).cast(),
            Err(OutOfMemory(n)) => {
                platform::report_out_of_memory(func, n);
                ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// `plan` is NULL or a plan made by `graph_plan_create::<B>`, freed once.
unsafe extern "C" fn graph_plan_free<B: BackendImpl>(_backend: wsp_ggml_backend_t, plan: wsp_ggml_backend_graph_plan_t) {
    guard_callback("wsp_ggml_backend_graph_plan_free", || {
        if let Some(p) = NonNull::new(plan.cast::<B::Plan>()) {
            // SAFETY: B's plans are Boxes made by graph_plan_create::<B>; freed once.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
    })
}

/// # Safety
/// `plan` is a live plan made by `graph_plan_create::<B>`, whose graph's
/// tensors are still allocated; used by one caller at a time.
unsafe extern "C" fn graph_plan_compute<B: BackendImpl>(_backend: wsp_ggml_backend_t, plan: wsp_ggml_backend_graph_plan_t) {
    let func = "wsp_ggml_backend_graph_plan_compute";
    guard_callback(func, || {
        let plan = NonNull::new(plan.cast::<B::Plan>()).unwrap_or_else(|| fatal(func, "argument 'plan' is NULL"));
        // SAFETY: a plan made by graph_plan_create::<B>, used by one caller
        // at a time; its graph live and allocated for the call (C contract).
        let (plan, call) = unsafe { (&mut *plan.as_ptr(), PlanCall::new()) };
        B::graph_plan_compute(plan, call)
    })
}

/// # Safety
/// `backend` is a live backend of `B`; `cgraph` is a live graph whose
/// tensors are allocated on it.
unsafe extern "C" fn graph_compute<B: BackendImpl>(backend: wsp_ggml_backend_t, cgraph: *mut wsp_ggml_cgraph) {
    let func = "wsp_ggml_backend_graph_compute";
    guard_callback(func, || {
        // SAFETY: the backend this callback was called on and the caller's
        // graph, live for the call, its tensors in this backend's host
        // memory (C contract).
        let (backend, graph) =
            unsafe { (BackendRef::from_c(backend, func, "backend"), HostGraph::new(GraphRef::from_c(cgraph, func, "cgraph"))) };
        context_of::<B>(&backend, func).graph_compute(graph)
    })
}

/// # Safety
/// `op` is NULL or a live tensor.
unsafe extern "C" fn supports_op<B: BackendImpl>(_backend: wsp_ggml_backend_t, op: *const wsp_ggml_tensor) -> bool {
    // SAFETY: the caller's tensor, live for the call.
    B::supports_op(unsafe { TensorRef::from_c_opt(op) })
}

// --- buffers ----------------------------------------------------------------

/// What a buffer's `context` owns, as the pointer C keeps: given up when
/// the buffer is made, taken back by its `free_buffer`.
pub trait RawContext: Sized {
    fn into_raw(self) -> *mut c_void;
    /// # Safety
    /// `p` came from `into_raw` of a value of this type, taken back once.
    unsafe fn from_raw(p: *mut c_void) -> Self;
}

impl RawContext for AlignedBuf {
    fn into_raw(self) -> *mut c_void {
        AlignedBuf::into_raw(self).cast()
    }
    unsafe fn from_raw(p: *mut c_void) -> Self {
        // SAFETY: the caller's contract.
        unsafe { AlignedBuf::from_raw(p.cast()) }
    }
}

/// A buffer written in safe Rust: what the slots of its
/// `wsp_ggml_backend_buffer_i` do. The others stay NULL (the defaults:
/// `get_alloc_size` is `nbytes`, no `init_tensor`, no `free_tensor`).
pub trait BufferImpl: 'static {
    /// What an owning buffer's context holds ([`buffer_owning`]), dropped
    /// by its `free_buffer`.
    type Memory: RawContext;
    /// Its tables: owning (`free_buffer` set) or not (NULL), the statics
    /// that `buffer_iface::<Self>(owns)` fills, and no others.
    fn iface(owns: bool) -> &'static wsp_ggml_backend_buffer_i;
    /// `get_base`.
    fn base(buffer: BufferRef) -> *mut c_void;
}

/// A buffer table of `B`: `free_buffer` where it owns its context.
pub const fn buffer_iface<B: BufferImpl>(owns: bool) -> wsp_ggml_backend_buffer_i {
    wsp_ggml_backend_buffer_i {
        free_buffer: if owns { Some(free_buffer::<B>) } else { None },
        get_base: Some(get_base::<B>),
        get_alloc_size: None,
        init_tensor: None,
        free_tensor: None,
    }
}

/// A buffer of `B` owning `memory` (`size` bytes, its context): the
/// buffer's `free_buffer` drops it.
pub fn buffer_owning<B: BufferImpl>(backend: Option<BackendRef>, memory: B::Memory, size: usize) -> Result<OwnedBuffer, OutOfMemory> {
    let context = memory.into_raw();
    buffer_init(backend, stable_copy(B::iface(true)), context, size).inspect_err(|_| {
        // SAFETY: given up just now, and not kept by a buffer.
        drop(unsafe { B::Memory::from_raw(context) })
    })
}

/// A buffer of `B` over memory it does not own (`context`, `size` bytes),
/// with no `free_buffer`.
pub fn buffer_over<B: BufferImpl>(backend: Option<BackendRef>, context: *mut c_void, size: usize) -> Result<OwnedBuffer, OutOfMemory> {
    buffer_init(backend, stable_copy(B::iface(false)), context, size)
}

/// Whether `buffer` is one of `B`'s (its `get_base` is `B`'s).
pub fn is_buffer_of<B: BufferImpl>(buffer: BufferRef) -> bool {
    let base = fn_addr(buffer.iface().get_base);
    base == fn_addr(stable_copy(&B::iface(true).get_base)) || base == fn_addr(stable_copy(&B::iface(false).get_base))
}

/// # Safety
/// `buffer` is a live buffer of `B`'s.
unsafe extern "C" fn get_base<B: BufferImpl>(buffer: wsp_ggml_backend_buffer_t) -> *mut c_void {
    let func = "wsp_ggml_backend_buffer_get_base";
    // SAFETY: the buffer this callback was called on: live for the call.
    guard_callback(func, || B::base(unsafe { BufferRef::from_c(buffer, func, "buffer") }))
}

/// # Safety
/// `buffer` is a live owning buffer of `B`'s ([`buffer_owning`]), freed once.
unsafe extern "C" fn free_buffer<B: BufferImpl>(buffer: wsp_ggml_backend_buffer_t) {
    let func = "wsp_ggml_backend_buffer_free";
    guard_callback(func, || {
        // SAFETY: the buffer this callback was called on: live for the call.
        let context = unsafe { BufferRef::from_c(buffer, func, "buffer") }.context();
        // SAFETY: an owning buffer's context is its memory, given up by
        // buffer_owning and taken back once, here.
        drop(unsafe { B::Memory::from_raw(context) })
    })
}

// --- host buffers -----------------------------------------------------------

/// CPU (host) buffers: made by the CPU backend (owning an [`AlignedBuf`])
/// and over caller memory (`cpu_buffer_from_ptr`, owning nothing); the
/// context is the base. Defined here, below the CPU backend, so that a
/// buffer without a backend is known as host memory ([`is_cpu_buffer`]).
pub struct HostBuffer;

static HOST_BUFFER_I: wsp_ggml_backend_buffer_i = buffer_iface::<HostBuffer>(true);
static HOST_BUFFER_FROM_PTR_I: wsp_ggml_backend_buffer_i = buffer_iface::<HostBuffer>(false);

impl BufferImpl for HostBuffer {
    type Memory = AlignedBuf;
    fn iface(owns: bool) -> &'static wsp_ggml_backend_buffer_i {
        if owns {
            &HOST_BUFFER_I
        } else {
            &HOST_BUFFER_FROM_PTR_I
        }
    }
    fn base(buffer: BufferRef) -> *mut c_void {
        buffer.context()
    }
}

/// Buffers made by the CPU backend (owned or over caller memory).
pub fn is_cpu_buffer(buffer: BufferRef) -> bool {
    is_buffer_of::<HostBuffer>(buffer)
}

impl BufferRef<'_> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{cpu_init, set_abort_callback, set_n_threads};
    use crate::ggml::zeroed_tensor;
    use crate::handle::AbortCallback;

    /// The CPU backend's compute slots through the trampolines, as C calls
    /// them, over ggml.c's stubs (fake_c.rs; run under Miri by
    /// scripts/miri): graph_compute with the context's scratch work buffer,
    /// a plan made, computed and freed (its own work buffer and graph copy),
    /// a NULL plan freed, the abort callback asked, supports_op of NULL.
    #[test]
    fn the_cpu_backend_computes_through_its_trampolines() {
        extern "C" fn stop_after_one(data: *mut c_void) -> bool {
            // SAFETY: the test's counter, alive during the compute.
            let asked = unsafe { &mut *data.cast::<u32>() };
            *asked += 1;
            *asked > 1
        }
        let owner = cpu_init().expect("memory");
        let cpu = owner.get();
        set_n_threads(cpu, 2);
        let (mut a, mut b) = (zeroed_tensor(), zeroed_tensor());
        let mut nodes = [ptr::addr_of_mut!(a), ptr::addr_of_mut!(b)];
        let mut g = wsp_ggml_cgraph::of_nodes(nodes.as_mut_ptr(), ptr::null_mut(), 2, 2, 0);
        let supports_op = cpu.iface().supports_op.expect("a slot");
        // SAFETY: a live graph of live tensors (host memory: ggml.c's stubs
        // read no data), plans made by the backend and freed once.
        let (asked, counts) = unsafe {
            cpu.graph_compute(&mut g);
            cpu.graph_compute(&mut g);
            let plan = cpu.graph_plan_create(&mut g);
            assert!(!plan.is_null());
            cpu.graph_plan_compute(plan);
            cpu.graph_plan_free(plan);
            cpu.graph_plan_free(ptr::null_mut());
            assert!(supports_op(cpu.as_ptr(), ptr::null()));

            let mut asked = 0u32;
            set_abort_callback(cpu, AbortCallback::for_test(stop_after_one, ptr::addr_of_mut!(asked).cast()));
            cpu.graph_compute(&mut g);
            (asked, [(*nodes[0]).op_params[0], (*nodes[1]).op_params[0]])
        };
        assert_eq!(counts, [4, 3], "three computes of both nodes, then one node before the abort callback stopped it");
        assert_eq!(asked, 2);
        owner.free();
    }
}
