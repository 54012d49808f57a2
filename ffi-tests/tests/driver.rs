//! Rust tests of the scheduler's driver (`SchedCell`, `Sched`), over real
//! C: ggml.c, ggml-alloc.c, the CPU backend and the C test backend
//! (c/test_backend.c, which counts every call it receives), with graphs
//! built by c/driver_world.c. They call the driver as the exports do and
//! check what it did: the splits it made or reused, what the test backend
//! received, the compute buffers, the output.

use std::ffi::c_void;

use wsp_ggml_backend::internals::{zeroed_tensor, BackendRef, GraphRef, Sched, SchedCell, TensorRef};

#[repr(C)]
struct Dw {
    _private: [u8; 0],
}

// (after the world, in link order: what it needs of ggml)
#[link(name = "driver_world", kind = "static")]
extern "C" {
    fn dw_new(tb_max_alloc: usize) -> *mut Dw;
    fn dw_backend(w: *mut Dw, i: i32) -> *mut c_void;
    fn dw_graph(w: *mut Dw, n_layers: i32, out: *mut *mut c_void) -> *mut c_void;
    fn dw_free_graph(w: *mut Dw);
    fn dw_expected(w: *mut Dw, n_layers: i32, out: *mut f32);
    fn dw_tb_graph_computes(w: *mut Dw) -> i64;
    fn dw_tb_nodes(w: *mut Dw) -> i64;
    fn dw_free(w: *mut Dw);
    fn test_backend_set_max_alloc(backend: *mut c_void, size: usize);
    fn wsp_ggml_backend_tensor_get(t: *const c_void, data: *mut c_void, offset: usize, size: usize);
}
#[link(name = "ggml_alloc_ours", kind = "static")]
extern "C" {}
#[link(name = "ggml_core", kind = "static")]
extern "C" {}
#[link(name = "m")]
extern "C" {}

/// The world of c/driver_world.c and a scheduler over its two backends,
/// the test backend first (the GPU-like backend has priority, as programs
/// order them).
struct World {
    w: *mut Dw,
    cell: Option<Box<SchedCell>>,
}

impl World {
    fn new(tb_max_alloc: usize) -> World {
        // SAFETY: the C world's constructor.
        let w = unsafe { dw_new(tb_max_alloc) };
        let mut world = World { w, cell: None };
        let backends = [world.backend(1), world.backend(0)];
        world.cell = Some(SchedCell::new(Sched::new(&backends)));
        world
    }

    fn cell(&self) -> &SchedCell {
        self.cell.as_deref().expect("made in new")
    }

    /// Backend 0 (the CPU) or 1 (the test backend).
    fn backend(&self, i: i32) -> BackendRef<'static> {
        // SAFETY: the world's backends, live until `dw_free` (Drop, after
        // the scheduler).
        unsafe { BackendRef::new(dw_backend(self.w, i).cast()) }.expect("a backend")
    }

    /// A new chain graph of `n` layers in a context of its own (the last
    /// one's freed), and `f` with the scheduler and the graph as a call
    /// gets it.
    fn with_graph<R>(&self, n: i32, f: impl for<'c> FnOnce(&'c SchedCell, GraphRef<'c>) -> R) -> R {
        let mut out = std::ptr::null_mut();
        // SAFETY: the C world's graph builder.
        let g = unsafe { dw_graph(self.w, n, &mut out) };
        // SAFETY: the graph and its tensors live until the next `dw_graph`
        // or `dw_free_graph`, after this call.
        let graph = unsafe { GraphRef::new(g.cast()) }.expect("a graph");
        f(self.cell(), graph)
    }

    /// The graph's context freed (the scheduler keeps only identities).
    fn free_graph(&self) {
        // SAFETY: frees the last graph's context; no handle on it is alive.
        unsafe { dw_free_graph(self.w) }
    }

    /// The values of a computed node (4 f32).
    fn output(t: TensorRef) -> [f32; 4] {
        let mut v = [0f32; 4];
        // SAFETY: a computed node of 4 f32, read through the library.
        unsafe { wsp_ggml_backend_tensor_get(t.as_ptr().cast(), v.as_mut_ptr().cast(), 0, 16) };
        v
    }

    /// What the last node of an `n`-layer graph holds.
    fn expected(&self, n: i32) -> [f32; 4] {
        let mut v = [0f32; 4];
        // SAFETY: 4 floats.
        unsafe { dw_expected(self.w, n, v.as_mut_ptr()) };
        v
    }

    /// (graph_compute calls, nodes computed) of the test backend so far.
    fn tb(&self) -> (i64, i64) {
        // SAFETY: the world's counters.
        unsafe { (dw_tb_graph_computes(self.w), dw_tb_nodes(self.w)) }
    }

    /// Compute a new `n`-layer graph, check its output and free it; the
    /// test backend's (graph_compute calls, nodes computed) meanwhile.
    fn compute_fresh(&self, n: i32) -> (i64, i64) {
        let expected = self.expected(n);
        let before = self.tb();
        self.with_graph(n, |cell, graph| {
            cell.graph_compute(graph);
            assert_eq!(World::output(graph.node(n as usize - 1)), expected, "{n} layers");
        });
        self.free_graph();
        let after = self.tb();
        (after.0 - before.0, after.1 - before.1)
    }

    fn splits_made(&self) -> u64 {
        self.cell().with_ref("test", Sched::splits_made)
    }

    fn buffer_size(&self, i: i32) -> usize {
        let b = self.backend(i);
        self.cell().with_ref("test", |s| s.buffer_size(b, "test"))
    }

    /// The backend node `i` of `graph` ran on in the last compute (0: CPU, 1: test backend).
    fn ran_on(&self, graph: GraphRef, i: usize) -> i32 {
        let b = self.cell().with_ref("test", |s| s.tensor_backend(graph.node(i))).expect("assigned");
        (0..2).find(|&k| self.backend(k) == b).expect("one of the world's")
    }
}

impl Drop for World {
    fn drop(&mut self) {
        drop(self.cell.take()); // (first: it holds buffers of the backends)
                                // SAFETY: frees the world once; nothing uses it after.
        unsafe { dw_free(self.w) };
    }
}

/// Measure, then compute the same graph again and again: every compute
/// after the first reuses the split, every one computes the right values,
/// and the test backend gets one graph_compute per split of its own per
/// compute, with the nodes of those splits (one each).
#[test]
fn computes_of_the_same_graph_reuse_the_split() {
    let w = World::new(0);
    let n = 8;
    let expected = w.expected(n);
    w.with_graph(n, |cell, graph| {
        cell.init_measure(graph);
        assert_eq!(w.splits_made(), 1, "the measure splits once");
        assert_eq!(cell.with_ref("test", Sched::n_splits), 8, "the layers alternate between the backends");
        // (the first compute places the nodes: what registration reads of
        // them changes, so the second splits again; the rest reuse it)
        cell.graph_compute(graph);
        cell.graph_compute(graph);
        let made = w.splits_made();
        for k in 0..3 {
            let before = w.tb();
            cell.graph_compute(graph);
            assert_eq!(w.splits_made(), made, "compute {k}: the split is reused");
            let after = w.tb();
            assert_eq!((after.0 - before.0, after.1 - before.1), (4, 4), "compute {k}: four splits of one node on the test backend");
            assert_eq!(World::output(graph.node(n as usize - 1)), expected);
        }
    });
}

/// A graph larger than the measured one, in a new context each compute
/// (freed after it): the test backend's compute buffer, measured for a
/// graph that put nothing on it, grows, and every compute is right.
#[test]
fn a_compute_buffer_too_small_grows() {
    let w = World::new(0);
    w.with_graph(1, |cell, graph| cell.init_measure(graph));
    let measured = w.buffer_size(1);
    for n in [8, 9, 16] {
        let (calls, _) = w.compute_fresh(n);
        assert_eq!(calls, i64::from(n / 2), "{n} layers: one graph_compute per odd layer");
    }
    assert!(w.buffer_size(1) > measured, "the test backend's compute buffer grew from {measured}");
}

/// Nodes `set_node_backend` moves to a backend whose compute buffer
/// cannot grow for it: the assignment is dropped and the graph split again
/// (what the original computes), instead of stopping; where the buffer
/// can grow, the assignment holds.
#[test]
fn an_assignment_that_does_not_fit_is_dropped_and_the_graph_split_again() {
    for (limit, moved) in [(0, true), (1024, false)] {
        let w = World::new(0);
        let n = 8;
        let expected = w.expected(n);
        w.with_graph(n, |cell, graph| {
            cell.init_measure(graph);
            let measured = w.buffer_size(1);
            assert!(measured > 0 && measured < 1024);
            if limit != 0 {
                // (the test backend allocates nothing larger than it has now)
                // SAFETY: the world's test backend.
                unsafe { test_backend_set_max_alloc(dw_backend(w.w, 1), measured) };
            }
            let made = w.splits_made();
            // every node to the test backend, before they have memory (an
            // assignment does not move a tensor that has): its inputs and
            // weights copied there
            let tb = w.backend(1);
            for i in 0..n as usize {
                cell.with_mut("test", |s| s.set_node_backend(graph.node(i), tb));
            }
            cell.graph_compute(graph);
            let on_tb = (0..n as usize).filter(|&i| w.ran_on(graph, i) == 1).count();
            assert_eq!(World::output(graph.node(n as usize - 1)), expected, "limit {limit}");
            if moved {
                assert_eq!(on_tb, n as usize, "the assignments hold where the buffer can grow");
                assert_eq!(w.splits_made(), made + 1, "one split");
            } else {
                assert_eq!(on_tb, n as usize / 2, "the assignments were dropped");
                assert_eq!(w.splits_made(), made + 2, "split with the assignments, then again without");
            }
        });
    }
}

/// Every compute builds its graph anew and frees it after, so that its
/// tensors are at new addresses or at the ones malloc hands back: the
/// scheduler keeps no handle across, and each compute is right and gives
/// the test backend exactly its splits.
#[test]
fn graphs_freed_between_computes() {
    let w = World::new(0);
    w.with_graph(12, |cell, graph| cell.init_measure(graph));
    w.free_graph();
    for n in [12, 12, 11, 12, 10, 12] {
        assert_eq!(w.compute_fresh(n), (i64::from(n / 2), i64::from(n / 2)), "{n} layers");
    }
}

/// Every placement the scheduler writes goes through `Placer`, which checks
/// it against its buffer: one inside is written as ggml-alloc writes it;
/// one that a corrupted plan would put past the end stops the call with a
/// message naming the tensor, and writes nothing. (The stop is an abort:
/// this test runs itself again in a child process to see it.)
#[test]
fn a_placement_outside_its_buffer_stops_with_a_message() {
    let w = World::new(0);
    let buffer = w.backend(0).alloc_owned_buffer(64).expect("a CPU buffer");
    let (placer, size) = (buffer.get().placer(false), buffer.get().size());
    let mut t = zeroed_tensor();
    t.name[..4].copy_from_slice(&[b'o' as _, b'u' as _, b't' as _, 0]);
    // SAFETY: a local tensor, live for the handle's use below.
    let handle = unsafe { TensorRef::new(&mut t) }.expect("not NULL");
    if std::env::var_os("DRIVER_PLACE_OUTSIDE").is_some() {
        placer.place(handle, size - 16, 32, "test");
        unreachable!("a placement past the end must stop the process");
    }
    placer.place(handle, size - 32, 32, "test");
    assert_eq!(handle.buffer(), buffer.as_ptr());
    assert_eq!(handle.data() as usize, buffer.get().base() as usize + size - 32, "placed as ggml-alloc places it");
    if env!("FFI_TARGET") != env!("FFI_HOST") {
        // (the stop is seen on the host: a child of a test run under
        // qemu-user is not one this test can start the same way)
        return;
    }
    let child = std::process::Command::new(std::env::current_exe().expect("this test"))
        .args(["--exact", "a_placement_outside_its_buffer_stops_with_a_message", "--nocapture", "--test-threads", "1"])
        .env("DRIVER_PLACE_OUTSIDE", "1")
        .output()
        .expect("run the child");
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(!child.status.success(), "the child stopped");
    assert!(
        stderr.contains(&format!(
            "wsp_ggml_backend: test: tensor 'out' placed at offset {}, 32 bytes, outside its compute buffer of {size} bytes",
            size - 16
        )),
        "the message names the tensor and the sizes: {stderr}"
    );
}
