//! Copying an allocated graph to another backend and comparing two backends
//! node by node (upstream ggml's `graph_copy` / `compare_graph_backend`), for
//! testing a new backend against the CPU backend.

#![forbid(unsafe_code)]

use crate::prelude::*;

use crate::copy::tensor_copy;
use crate::fatal::check;
use crate::ggml::{GraphRef, TensorRef};
use crate::handle::{BackendRef, BufferRef, CompareCallback, GraphCopy, OwnedContext};
use crate::ptrmap::PtrMap;
use crate::talloc::Tallocr;

/// The duplication under way: the copies (`'c`: tensors of the copy's two
/// contexts) of the graph's tensors, found by address.
struct Copier<'c> {
    ids: PtrMap,
    copies: Vec<TensorRef<'c>>,
    initialised: Vec<bool>,
    ctx_allocated: &'c OwnedContext,
    ctx_unallocated: &'c OwnedContext,
    /// Tensors to allocate in the new buffer, in creation order.
    to_alloc: Vec<TensorRef<'c>>,
}

/// Every tensor reachable from the graph's nodes (sources and view sources).
fn count_reachable(graph: GraphRef) -> usize {
    let mut seen = PtrMap::new();
    seen.clear(graph.n_nodes() * 2 + 16);
    let mut stack: Vec<TensorRef> = graph.nodes().collect();
    while let Some(t) = stack.pop() {
        let (_, new) = seen.get_or_insert_with(t.as_ptr() as usize as u64, || 0);
        if new {
            stack.extend(t.srcs().map(|(_, s)| s));
            stack.extend(t.view_src());
        }
    }
    seen.len()
}

impl<'c> Copier<'c> {
    fn dup(&mut self, src: TensorRef) -> TensorRef<'c> {
        if let Some(i) = self.ids.get(src.as_ptr() as usize as u64) {
            return self.copies[i as usize];
        }
        let allocated = !src.data().is_null() && src.view_src().is_none();
        let ctx = if allocated { self.ctx_allocated } else { self.ctx_unallocated };
        // (a tensor of our own context, freed only with the copy)
        let dst = ctx.dup_tensor(src, "wsp_ggml_backend_graph_copy");
        dst.copy_meta_from(src);
        if let Some(vs) = src.view_src() {
            let vs_copy = self.dup(vs);
            dst.set_view(vs_copy, src.view_offs());
        }
        for (j, s) in src.srcs() {
            let s_copy = self.dup(s);
            dst.set_src(j, Some(s_copy));
        }
        let next = self.copies.len() as u32;
        self.ids.get_or_insert_with(src.as_ptr() as usize as u64, || next);
        self.copies.push(dst);
        self.initialised.push(false);
        if allocated {
            self.to_alloc.push(dst);
        }
        dst
    }

    /// Copy data of allocated tensors and point views at their copied sources.
    fn init(&mut self, src: TensorRef) {
        let i = self.ids.get(src.as_ptr() as usize as u64).expect("duplicated before init") as usize;
        if self.initialised[i] {
            return;
        }
        self.initialised[i] = true;
        let dst = self.copies[i];
        if let Some(vs) = src.view_src() {
            self.init(vs);
            let vs_copy = dst.view_src().expect("copied views keep their source");
            dst.init_view_from_src(vs_copy);
            if let Some(b) = BufferRef::of_tensor(dst) {
                b.init_tensor(dst);
            }
        } else if !src.data().is_null() {
            tensor_copy(src, dst);
        }
        for (_, s) in src.srcs() {
            self.init(s);
        }
    }
}

/// `wsp_ggml_backend_graph_copy`: duplicate `graph` (whose tensors are
/// allocated) onto `backend`: allocated tensors get memory in one new buffer
/// and their data copied; views are re-created over the copies.
pub fn graph_copy(backend: BackendRef, graph: GraphRef) -> GraphCopy {
    let func = "wsp_ggml_backend_graph_copy";
    let n = count_reachable(graph);
    let graph_size = graph.n_nodes().max(1);
    let ctx_allocated = OwnedContext::no_alloc(n, graph_size, func);
    let ctx_unallocated = OwnedContext::no_alloc(n, 0, func);
    let mut c = Copier {
        ids: PtrMap::new(),
        copies: Vec::with_capacity(n),
        initialised: Vec::with_capacity(n),
        ctx_allocated: &ctx_allocated,
        ctx_unallocated: &ctx_unallocated,
        to_alloc: Vec::new(),
    };
    c.ids.clear(n);
    for node in graph.nodes() {
        c.dup(node);
    }

    // Size the buffer with a measure allocator (its addresses are fake and
    // cleared), then allocate for real.
    let size = {
        let measure = Tallocr::measure(backend);
        c.to_alloc.iter().for_each(|&t| measure.alloc(t));
        measure.max_size()
    };
    c.to_alloc.iter().for_each(|t| t.clear_allocation());
    let Some(buffer) = backend.alloc_owned_buffer(size) else {
        crate::platform::out_of_memory(func, crate::platform::pending_out_of_memory().unwrap_or(size));
    };
    let talloc = Tallocr::over(buffer.get());
    c.to_alloc.iter().for_each(|&t| talloc.alloc(t));
    drop(talloc); // (it does not own the buffer)

    for node in graph.nodes() {
        c.init(node);
    }

    let node_copy = |node: TensorRef| c.copies[c.ids.get(node.as_ptr() as usize as u64).expect("every node was duplicated") as usize];
    let copy_graph = ctx_allocated.new_graph(graph_size, graph.nodes().map(node_copy), func);
    GraphCopy::new(buffer, ctx_allocated, ctx_unallocated, copy_graph)
}

/// `wsp_ggml_backend_compare_graph_backend`: `graph` is allocated on
/// `backend1`; it is copied to `backend2`, computed node by node on both, and
/// `callback(i, t1, t2)` sees each non-view node's two results.
pub fn compare_graph_backend(backend1: BackendRef, backend2: BackendRef, graph: GraphRef, callback: CompareCallback) {
    let func = "wsp_ggml_backend_compare_graph_backend";
    let copy = graph_copy(backend2, graph);
    // (the copy's tensors live until it is freed below)
    let g2 = copy.graph();
    for i in 0..graph.n_nodes() {
        let (t1, t2) = (graph.node(i), g2.node(i));
        check(t1.op() == t2.op() && t1.same_layout(t2), func, || format!("node {i} differs in the copy"));
        // (of `graph`, whose tensors live on `backend1`, and of its copy on `backend2`)
        backend1.compute_node(graph, i);
        backend2.compute_node(g2, i);
        if t1.is_view_op() {
            continue;
        }
        if !callback.call(i as i32, t1, t2) {
            break;
        }
    }
    copy.free();
}
