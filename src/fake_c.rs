//! A little C world for the library's unit tests: fake backends, buffers,
//! tensors and graphs as plain C structs, and the few ggml functions the
//! code under test reaches, defined here (the unit tests link no C). The
//! modules tested with it (the scheduler's C side, src/sched/tests.rs)
//! have no `unsafe`: every raw access is here, behind small functions.

#![allow(clippy::missing_safety_doc)]

use crate::prelude::*;

use core::ffi::{c_char, c_int, c_void};

use crate::ggml::{wsp_ggml_cgraph, wsp_ggml_tensor, zeroed_tensor, GraphRef, WSP_GGML_OP_VIEW};
use crate::handle::{BackendRef, BufferRef};
use crate::sys::{wsp_ggml_backend, wsp_ggml_backend_buffer, wsp_ggml_backend_buffer_i, wsp_ggml_backend_i};

// ggml ops used here (values of ggml.h's enum in whisper.cpp 1.5).
pub(crate) const OP_ADD: c_int = 2;
pub(crate) const OP_MUL: c_int = 6;
pub(crate) const OP_MUL_MAT: c_int = 23;
pub(crate) const OP_UNARY: c_int = 57;

// --- stubs of the ggml functions the passes reach (f32 tensors only) -----

#[no_mangle]
extern "C" fn wsp_ggml_blck_size(_type: c_int) -> c_int {
    1
}

#[no_mangle]
extern "C" fn wsp_ggml_type_size(_type: c_int) -> usize {
    4
}

#[no_mangle]
extern "C" fn wsp_ggml_nbytes(t: *const wsp_ggml_tensor) -> usize {
    // SAFETY: the tests' own tensors.
    let t = unsafe { &*t };
    4 + (0..4).map(|i| (t.ne[i] as usize - 1) * t.nb[i]).sum::<usize>()
}

#[no_mangle]
extern "C" fn wsp_ggml_op_name(op: c_int) -> *const c_char {
    // the names the scheduler looks up (ggml::in_place_ops), at v1.5.0's values
    match op {
        OP_ADD => c"ADD".as_ptr(),
        OP_MUL => c"MUL".as_ptr(),
        OP_UNARY => c"UNARY".as_ptr(),
        _ => c"op".as_ptr(),
    }
}

// ggml.c's compute, as far as the CPU backend's trampolines need it
// (handle/iface.rs tests them): a plan of 16 bytes of work per node and
// the thread count asked; a compute that writes the whole work buffer (as
// ggml.c may), asks the abort callback before each node and, unless it
// says stop, counts the node computed in its `op_params[0]`.
#[no_mangle]
extern "C" fn wsp_ggml_graph_plan(g: *mut wsp_ggml_cgraph, n_threads: c_int) -> crate::ggml::wsp_ggml_cplan {
    // SAFETY: the tests' own graphs.
    let n = unsafe { (*g).n_nodes } as usize;
    crate::ggml::wsp_ggml_cplan {
        work_size: 16 * n,
        work_data: core::ptr::null_mut(),
        n_threads,
        abort_callback: None,
        abort_callback_data: core::ptr::null_mut(),
    }
}

#[no_mangle]
extern "C" fn wsp_ggml_graph_compute(g: *mut wsp_ggml_cgraph, plan: *mut crate::ggml::wsp_ggml_cplan) -> c_int {
    // SAFETY: the tests' own graphs, and a plan whose work buffer holds
    // work_size bytes (what the code under test promises ggml.c).
    unsafe {
        let plan = &*plan;
        if plan.work_size > 0 {
            core::ptr::write_bytes(plan.work_data, 0xab, plan.work_size);
        }
        for i in 0..(*g).n_nodes as usize {
            if let Some(stop) = plan.abort_callback {
                if stop(plan.abort_callback_data) {
                    return 1;
                }
            }
            (**(*g).nodes.add(i)).op_params[0] += 1;
        }
    }
    0
}

// --- a little world of backends, buffers and tensors ----------------------

/// A backend's context: its name and the ops its supports_op rejects.
struct FakeBackend {
    name: &'static core::ffi::CStr,
    rejects: Vec<c_int>,
}

extern "C" fn fake_name(b: *mut wsp_ggml_backend) -> *const c_char {
    // SAFETY: the tests' own backends, whose context is a FakeBackend.
    unsafe { (*(*b).context.cast::<FakeBackend>()).name.as_ptr() }
}

extern "C" fn fake_supports(b: *mut wsp_ggml_backend, op: *const wsp_ggml_tensor) -> bool {
    // SAFETY: as above, and a live tensor.
    unsafe { !(*(*b).context.cast::<FakeBackend>()).rejects.contains(&(*op).op) }
}

/// Allocated once and held as the raw pointers `Box::into_raw` gave, freed
/// in `Drop` (backends, buffers and tensors point at each other): a `Box`
/// moved into a `Vec` or dereferenced again asserts unique access, which
/// under Stacked Borrows invalidates the pointers the others hold.
#[derive(Default)]
pub(crate) struct World {
    contexts: Vec<*mut FakeBackend>,
    pub(crate) backends: Vec<*mut wsp_ggml_backend>,
    /// One buffer per backend.
    pub(crate) buffers: Vec<*mut wsp_ggml_backend_buffer>,
    pub(crate) tensors: Vec<*mut wsp_ggml_tensor>,
    pub(crate) nodes: Vec<*mut wsp_ggml_tensor>,
    pub(crate) leafs: Vec<*mut wsp_ggml_tensor>,
    /// Compute buffers (`compute_buffers`).
    compute: Vec<*mut wsp_ggml_backend_buffer>,
    /// The input copies a scheduler's calls make (as `SchedCell` keeps them).
    copies: crate::ggml::HeapTensors,
}

/// A tensor address the code under test never reads: without provenance,
/// not an integer cast (Miri warns of those).
pub(crate) fn addr(a: usize) -> *mut c_void {
    core::ptr::null_mut::<u8>().wrapping_add(a).cast()
}

fn leak<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

impl Drop for World {
    fn drop(&mut self) {
        // SAFETY: each pointer came from `leak` and is freed once, here.
        unsafe {
            self.tensors.iter().for_each(|&p| drop(Box::from_raw(p)));
            self.buffers.iter().for_each(|&p| drop(Box::from_raw(p)));
            self.compute.iter().for_each(|&p| drop(Box::from_raw(p)));
            self.backends.iter().for_each(|&p| drop(Box::from_raw(p)));
            self.contexts.iter().for_each(|&p| drop(Box::from_raw(p)));
        }
    }
}

impl World {
    pub(crate) fn with_backends(names: &[&'static core::ffi::CStr]) -> World {
        let mut w = World::default();
        for &name in names {
            let ctx = leak(FakeBackend { name, rejects: Vec::new() });
            // SAFETY: an all-zero interface is all-None function pointers.
            let mut iface: wsp_ggml_backend_i = unsafe { core::mem::zeroed() };
            iface.get_name = Some(fake_name);
            iface.supports_op = Some(fake_supports);
            let b = leak(wsp_ggml_backend { iface, context: ctx.cast() });
            // SAFETY: as above.
            let biface: wsp_ggml_backend_buffer_i = unsafe { core::mem::zeroed() };
            w.buffers.push(leak(wsp_ggml_backend_buffer { iface: biface, backend: b, context: core::ptr::null_mut(), size: 0 }));
            w.contexts.push(ctx);
            w.backends.push(b);
        }
        w
    }

    pub(crate) fn reject(&mut self, backend: usize, op: c_int) {
        // SAFETY: our own context; no reference to it is live.
        unsafe { (*self.contexts[backend]).rejects.push(op) };
    }

    pub(crate) fn refs(&self) -> Vec<BackendRef<'static>> {
        // SAFETY: the world's backends, freed only when it is dropped (as C
        // lends backends: 'static, the tests keep the world alive).
        self.backends.iter().map(|&b| unsafe { BackendRef::new(b) }.unwrap()).collect()
    }

    /// A [n] f32 tensor; `on`: in that backend's buffer (with data).
    pub(crate) fn tensor(&mut self, n: i64, on: Option<usize>) -> *mut wsp_ggml_tensor {
        let mut t = zeroed_tensor();
        t.n_dims = 1;
        t.ne = [n, 1, 1, 1];
        t.nb = [4, 4 * n as usize, 4 * n as usize, 4 * n as usize];
        if let Some(b) = on {
            t.buffer = self.buffers[b];
            t.data = addr(0x1000); // never read by the passes
        }
        let p = leak(t);
        self.tensors.push(p);
        p
    }

    pub(crate) fn leaf(&mut self, n: i64, on: Option<usize>) -> *mut wsp_ggml_tensor {
        let t = self.tensor(n, on);
        self.leafs.push(t);
        t
    }

    pub(crate) fn node(&mut self, op: c_int, n: i64, srcs: &[*mut wsp_ggml_tensor]) -> *mut wsp_ggml_tensor {
        let t = self.tensor(n, None);
        // SAFETY: our own tensor.
        unsafe {
            (*t).op = op;
            let t = &mut *t;
            t.src[..srcs.len()].copy_from_slice(srcs);
        }
        self.nodes.push(t);
        t
    }

    pub(crate) fn view(&mut self, of: *mut wsp_ggml_tensor, n: i64) -> *mut wsp_ggml_tensor {
        let t = self.node(WSP_GGML_OP_VIEW, n, &[of]);
        // SAFETY: our own tensor.
        unsafe { (*t).view_src = of };
        t
    }

    fn graph(&mut self) -> wsp_ggml_cgraph {
        let mut g = wsp_ggml_cgraph::of_nodes(self.nodes.as_mut_ptr(), core::ptr::null_mut(), self.nodes.len(), self.nodes.len(), 0);
        g.n_leafs = self.leafs.len() as c_int;
        g.leafs = self.leafs.as_mut_ptr();
        g
    }
}

/// A compute buffer whose base is its context (never dereferenced).
extern "C" fn fake_base(b: *mut wsp_ggml_backend_buffer) -> *mut c_void {
    // SAFETY: the tests' own buffers.
    unsafe { (*b).context }
}

/// Change one of the test's own tensors.
pub(crate) fn edit(t: *mut wsp_ggml_tensor, f: impl FnOnce(&mut wsp_ggml_tensor)) {
    // SAFETY: the tests' own live tensors; no reference to them is held.
    f(unsafe { &mut *t })
}

pub(crate) fn data(t: *mut wsp_ggml_tensor) -> usize {
    // SAFETY: the tests' own tensors.
    unsafe { (*t).data as usize }
}

pub(crate) fn view_src(t: *mut wsp_ggml_tensor) -> *mut wsp_ggml_tensor {
    // SAFETY: as above.
    unsafe { (*t).view_src }
}

impl World {
    /// `f` with the world's graph (its nodes and leafs), as C hands one
    /// for a call, and the input copies, for as long as the call.
    pub(crate) fn with_graph<R>(&mut self, f: impl for<'c> FnOnce(GraphRef<'c>, &'c crate::ggml::HeapTensors) -> R) -> R {
        let mut g = self.graph();
        // SAFETY: a local graph over the world's tensors, both outlive the
        // call (the scheduler keeps no pointer to the struct itself).
        f(unsafe { GraphRef::new(&mut g) }.unwrap(), &self.copies)
    }

    /// One compute buffer per backend, `size` bytes each, at fake bases
    /// (0x10000 apart, never dereferenced), kept by the world.
    pub(crate) fn compute_buffers(&mut self, size: usize) -> Vec<BufferRef<'static>> {
        let mut out = Vec::new();
        for (i, &b) in self.backends.iter().enumerate() {
            // SAFETY: an all-zero interface is all-None function pointers.
            let mut iface: wsp_ggml_backend_buffer_i = unsafe { core::mem::zeroed() };
            iface.get_base = Some(fake_base);
            let base = 0x10000 * (i + 1);
            let p = leak(wsp_ggml_backend_buffer { iface, backend: b, context: addr(base), size });
            self.compute.push(p);
            // SAFETY: freed only when the world drops (the tests keep it alive).
            out.push(unsafe { BufferRef::new(p) }.unwrap());
        }
        out
    }
}

/// A copy of one of the test's own tensors, to read.
pub(crate) fn get(t: *mut wsp_ggml_tensor) -> wsp_ggml_tensor {
    // SAFETY: the tests' own live tensors: plain data (integers and
    // pointers), copied bit for bit.
    unsafe { core::ptr::read(t) }
}
