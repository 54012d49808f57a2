//! The CPU backend: host memory, computed by ggml.c's `wsp_ggml_graph_compute`.
//! Written against the wrapper layer's safe backend interface
//! ([`BackendImpl`]): `handle::backend_iface` fills its C table with
//! trampolines that check and convert each call, then call the methods here.

#![forbid(unsafe_code)]

use crate::prelude::*;

use core::cell::Cell;
use core::ffi::{c_int, c_void, CStr};

use crate::fatal::fatal;
use crate::ggml::{self, TensorRef};
use crate::handle::{
    backend_iface, backend_new, buffer_over, buffer_owning, context_of, is_impl, wsp_ggml_backend_i, AbortCallback, AlignedBuf,
    BackendImpl, BackendRef, GraphPlan, HostBuffer, HostDst, HostGraph, HostSrc, HostTensor, OwnedBackend, OwnedBuffer, PlanCall,
    TENSOR_ALIGNMENT,
};
use crate::platform::OutOfMemory;

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
    /// ggml.c is computing a graph for this backend: its abort callback may
    /// call in, and only calls that leave the context alone are allowed.
    computing: Cell<bool>,
}

/// The one table of CPU backends: `is_cpu` compares the `get_name` slot.
static CPU_BACKEND_I: wsp_ggml_backend_i = backend_iface::<CpuContext>();

impl BackendImpl for CpuContext {
    const NAME: &'static CStr = c"CPU";
    const ALIGNMENT: usize = TENSOR_ALIGNMENT;
    type Plan = GraphPlan;

    fn iface() -> &'static wsp_ggml_backend_i {
        &CPU_BACKEND_I
    }

    /// Not from inside the backend's abort callback: ggml.c is computing
    /// with the context.
    fn on_borrow(&self, func: &str) {
        if self.computing.get() {
            fatal(func, "called from inside the CPU backend's abort callback (while it computes)");
        }
    }

    fn alloc_buffer(backend: BackendRef, size: usize) -> Result<OwnedBuffer, OutOfMemory> {
        // Report (and own) `size + TENSOR_ALIGNMENT` bytes as the original does,
        // so sizes seen through the API are unchanged; the base is aligned.
        let func = "wsp_ggml_backend_alloc_buffer";
        let total = size.checked_add(TENSOR_ALIGNMENT).unwrap_or_else(|| fatal(func, &format!("size {size} is too large")));
        buffer_owning::<HostBuffer>(Some(backend), AlignedBuf::try_new(total)?, total)
    }

    fn set_tensor_async(t: HostTensor, offset: usize, data: HostSrc) {
        t.write(offset, data, "wsp_ggml_backend_tensor_set")
    }

    fn get_tensor_async(t: HostTensor, offset: usize, data: HostDst) {
        t.read(offset, data, "wsp_ggml_backend_tensor_get")
    }

    fn synchronize() {}

    fn cpy_tensor_from(src: TensorRef, dst: HostTensor) {
        dst.fill_from(src)
    }

    fn cpy_tensor_to(src: HostTensor, dst: TensorRef) {
        src.copy_into(dst)
    }

    fn graph_plan_create(&self, graph: HostGraph) -> Result<GraphPlan, OutOfMemory> {
        graph.plan(self.n_threads.get(), self.abort_callback.get())
    }

    fn graph_plan_compute(plan: &mut GraphPlan, call: PlanCall) {
        plan.compute(call)
    }

    fn graph_compute(&self, graph: HostGraph) {
        let func = "wsp_ggml_backend_graph_compute";
        let mut cplan = graph.cplan(self.n_threads.get(), self.abort_callback.get());
        // (the work buffer is taken out while ggml.c computes with it, and
        // put back after: no call from the abort callback can reach it)
        let mut work = self.work.take();
        work.reserve_scratch(cplan.work_size(), func);
        self.computing.set(true);
        // The abort callback may call back in while ggml.c computes: only
        // calls that leave the context alone pass (on_borrow).
        graph.compute(&mut cplan, &mut work, func);
        self.computing.set(false);
        self.work.set(work);
    }

    /// The CPU backend runs every op.
    fn supports_op(_op: Option<TensorRef>) -> bool {
        true
    }
}

/// `wsp_ggml_backend_cpu_init`: the backend, or no memory for it.
pub fn cpu_init() -> Result<OwnedBackend, OutOfMemory> {
    backend_new(CpuContext {
        n_threads: Cell::new(ggml::WSP_GGML_DEFAULT_N_THREADS),
        work: Cell::new(AlignedBuf::empty()),
        abort_callback: Cell::new(AbortCallback::NONE),
        computing: Cell::new(false),
    })
}

pub fn is_cpu(backend: BackendRef) -> bool {
    is_impl::<CpuContext>(backend)
}

/// The CPU context of `backend` (shared: see `CpuContext`), aborting
/// (naming `func`) if it is not a CPU backend, or when called from inside
/// the backend's own abort callback (ggml.c is computing with the context).
pub fn cpu_context<'a>(backend: &'a BackendRef, func: &str) -> &'a CpuContext {
    context_of::<CpuContext>(backend, func)
}

pub fn set_n_threads(backend: BackendRef, n_threads: c_int) {
    cpu_context(&backend, "wsp_ggml_backend_cpu_set_n_threads").n_threads.set(n_threads);
}

/// `wsp_ggml_backend_cpu_buffer_from_ptr`: `backend` may be NULL (ggml-alloc.c passes NULL).
pub fn buffer_from_ptr(backend: Option<BackendRef>, data: *mut c_void, size: usize) -> Result<OwnedBuffer, OutOfMemory> {
    buffer_over::<HostBuffer>(backend, data, size)
}

/// `wsp_ggml_backend_cpu_set_abort_callback`: handed to ggml's cplan, which
/// checks it between nodes and stops the compute when it returns true.
pub fn set_abort_callback(backend: BackendRef, callback: AbortCallback) {
    cpu_context(&backend, "wsp_ggml_backend_cpu_set_abort_callback").abort_callback.set(callback);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ggml::{wsp_ggml_tensor, zeroed_tensor};
    use crate::handle::{is_cpu_buffer, tensor_get_bytes, tensor_set_bytes, BufferRef};

    /// A [16] f32 tensor at `data` in `buffer` (the tests' stub of
    /// wsp_ggml_nbytes, fake_c.rs, gives 64 bytes).
    fn tensor_in(buffer: BufferRef, data: *mut c_void) -> wsp_ggml_tensor {
        let mut t = zeroed_tensor();
        t.ne = [16, 1, 1, 1];
        t.nb = [4, 64, 64, 64];
        t.buffer = buffer.as_ptr();
        t.data = data;
        t
    }

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    fn floats(b: &[u8]) -> Vec<f32> {
        b.chunks(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect()
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
        let owned_buffer = cpu.alloc_owned_buffer(128).expect("a buffer");
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
        let (ta, tb) = (TensorRef::of_test(&mut a), TensorRef::of_test(&mut b));
        let src: Vec<f32> = (0..16).map(|i| i as f32).collect();
        let mut back = vec![0u8; 64];
        tensor_set_bytes(ta, 0, &bytes(&src));
        tensor_get_bytes(ta, 0, &mut back);
        assert_eq!(floats(&back), src);
        tensor_get_bytes(ta, 8, &mut back[..8]);
        assert_eq!(floats(&back[..8]), [2.0, 3.0]);
        tensor_set_bytes(ta, 4, &bytes(&src[10..11]));
        tensor_set_bytes(ta, 0, &[]);
        crate::copy::tensor_copy(ta, tb);
        tensor_get_bytes(tb, 0, &mut back);
        let copied = floats(&back);
        assert_eq!(copied[..3], [0.0, 10.0, 2.0]);
        assert_eq!(copied[3..], src[3..]);

        // (the borrows end here: the owners free each once, buffers first)
        over_buffer.free();
        owned_buffer.free();
        assert_eq!(host[..3], [0.0, 10.0, 2.0]);
        cpu_owner.free();
    }

    /// The context's settings, the slots that read nothing, and the
    /// scratch work buffer `graph_compute` takes out of the context, grows
    /// and puts back (computing itself is tested with the trampolines, in
    /// handle/iface.rs).
    #[test]
    fn cpu_settings_and_work_buffer() {
        extern "C" fn stop(_data: *mut c_void) -> bool {
            true
        }
        let cpu_owner = cpu_init().expect("memory");
        let cpu = cpu_owner.get();
        assert_eq!(cpu.alignment(), TENSOR_ALIGNMENT);
        assert_eq!(cpu.name_bytes(), b"CPU");
        cpu.synchronize();
        let mut op = zeroed_tensor();
        assert!(cpu.supports_op(TensorRef::of_test(&mut op)));

        let ctx = cpu_context(&cpu, "test");
        assert!(!ctx.abort_callback.get().is_set());
        let mut flag = 0u8;
        let data: *mut c_void = core::ptr::addr_of_mut!(flag).cast();
        set_abort_callback(cpu, AbortCallback::for_test(stop, data));
        assert_eq!(ctx.abort_callback.get().data(), data);

        let mut work = ctx.work.take();
        assert!(work.as_ptr().is_null());
        work.reserve_scratch(100, "test");
        let first = work.as_ptr();
        assert_eq!(first as usize % TENSOR_ALIGNMENT, 0);
        work.reserve_scratch(60, "test");
        assert_eq!(work.as_ptr(), first);
        work.reserve_scratch(1000, "test");
        ctx.work.set(work);
        assert!(!ctx.computing.get());

        set_abort_callback(cpu, AbortCallback::NONE);
        assert!(!cpu_context(&cpu, "test").abort_callback.get().is_set());
        cpu_owner.free();
    }
}
