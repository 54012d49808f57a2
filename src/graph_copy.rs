//! Copying an allocated graph to another backend and comparing two backends
//! node by node (upstream ggml's `graph_copy` / `compare_graph_backend`), for
//! testing a new backend against the CPU backend.

use crate::prelude::*;

use core::ffi::c_void;

use crate::copy::tensor_copy;
use crate::fatal::{check, fatal};
use crate::ggml::{self, wsp_ggml_cgraph, wsp_ggml_context, wsp_ggml_init_params, wsp_ggml_tensor, GraphRef, TensorRef};
use crate::handle::BackendRef;
use crate::handle::{wsp_ggml_backend_buffer_t, BufferRef, OwnedBuffer};
use crate::ptrmap::PtrMap;
use crate::talloc::Tallocr;

/// `struct wsp_ggml_backend_graph_copy`: the copy and what owns its memory.
#[repr(C)]
pub struct wsp_ggml_backend_graph_copy {
    pub buffer: wsp_ggml_backend_buffer_t,
    pub ctx_allocated: *mut wsp_ggml_context,
    pub ctx_unallocated: *mut wsp_ggml_context,
    pub graph: *mut wsp_ggml_cgraph,
}

/// `bool callback(int node_index, struct wsp_ggml_tensor * t1, struct wsp_ggml_tensor * t2, void * user_data)`
pub type CompareCallback =
    unsafe extern "C" fn(node_index: i32, t1: *mut wsp_ggml_tensor, t2: *mut wsp_ggml_tensor, user_data: *mut c_void) -> bool;

/// A graph copy we own: its buffer and its two contexts, freed exactly once,
/// when consumed by [`GraphCopy::free`] or dropped, unless handed to C by
/// `into_c` (which frees it with `wsp_ggml_backend_graph_copy_free`).
pub struct GraphCopy {
    // (dropped in this order: the buffer, then the contexts, as upstream frees them)
    buffer: Option<OwnedBuffer>,
    ctx_allocated: OwnedContext,
    ctx_unallocated: OwnedContext,
    graph: *mut wsp_ggml_cgraph,
}

crate::handle::assert_owning!(GraphCopy);

/// A ggml context we made (`wsp_ggml_init`), freed on drop.
struct OwnedContext(*mut wsp_ggml_context);

impl Drop for OwnedContext {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a context made by wsp_ggml_init, ours alone, freed once.
            unsafe { ggml::wsp_ggml_free(self.0) };
        }
    }
}

impl GraphCopy {
    /// Take ownership of what C holds.
    ///
    /// # Safety
    /// `c` was returned by [`GraphCopy::into_c`] (`wsp_ggml_backend_graph_copy`)
    /// and is handed over: not freed elsewhere, none of its tensors used
    /// after this owner frees it.
    pub unsafe fn from_c(c: wsp_ggml_backend_graph_copy) -> GraphCopy {
        GraphCopy {
            // SAFETY: the buffer graph_copy made for this copy (the caller's contract).
            buffer: unsafe { OwnedBuffer::from_raw(c.buffer) },
            ctx_allocated: OwnedContext(c.ctx_allocated),
            ctx_unallocated: OwnedContext(c.ctx_unallocated),
            graph: c.graph,
        }
    }
    /// Hand the copy to C.
    pub fn into_c(self) -> wsp_ggml_backend_graph_copy {
        let mut this = core::mem::ManuallyDrop::new(self);
        let buffer = this.buffer.take().map_or(core::ptr::null_mut(), OwnedBuffer::into_raw);
        let ctx_allocated = core::mem::replace(&mut this.ctx_allocated.0, core::ptr::null_mut());
        let ctx_unallocated = core::mem::replace(&mut this.ctx_unallocated.0, core::ptr::null_mut());
        wsp_ggml_backend_graph_copy { buffer, ctx_allocated, ctx_unallocated, graph: this.graph }
    }
    /// The copied graph; its tensors live as long as this copy.
    pub fn graph(&self) -> GraphRef<'_> {
        // SAFETY: a graph of our context, live while we are.
        unsafe { GraphRef::new(self.graph) }.expect("graph_copy makes a graph")
    }
    /// Free the buffer, then the contexts.
    pub fn free(self) {
        drop(self)
    }
}

struct Copier<'a> {
    ids: PtrMap,
    copies: Vec<TensorRef<'a>>,
    initialised: Vec<bool>,
    ctx_allocated: *mut wsp_ggml_context,
    ctx_unallocated: *mut wsp_ggml_context,
    /// Tensors to allocate in the new buffer, in creation order.
    to_alloc: Vec<TensorRef<'a>>,
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

fn new_context(n_tensors: usize, graph_size: usize, func: &str) -> *mut wsp_ggml_context {
    // SAFETY: size queries and a no_alloc context owned by the graph copy.
    let ctx = unsafe {
        let mem_size = ggml::wsp_ggml_tensor_overhead() * n_tensors + ggml::wsp_ggml_graph_overhead_custom(graph_size, false);
        ggml::wsp_ggml_init(wsp_ggml_init_params { mem_size, mem_buffer: core::ptr::null_mut(), no_alloc: true })
    };
    check(!ctx.is_null(), func, || "wsp_ggml_init failed (out of ggml contexts or memory)".into());
    ctx
}

impl<'a> Copier<'a> {
    fn dup(&mut self, src: TensorRef<'a>) -> TensorRef<'a> {
        if let Some(i) = self.ids.get(src.as_ptr() as usize as u64) {
            return self.copies[i as usize];
        }
        let allocated = !src.data().is_null() && src.view_src().is_none();
        let ctx = if allocated { self.ctx_allocated } else { self.ctx_unallocated };
        // SAFETY: a live tensor duplicated into our own no_alloc context.
        let dst = unsafe { ggml::wsp_ggml_dup_tensor(ctx, src.as_ptr()) };
        // SAFETY: NULL or a tensor of our own context, freed only with the
        // copy (graph_copy_free).
        let dst = unsafe { TensorRef::new(dst) }.unwrap_or_else(|| fatal("wsp_ggml_backend_graph_copy", "out of context memory"));
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
    let mut c = Copier {
        ids: PtrMap::new(),
        copies: Vec::with_capacity(n),
        initialised: Vec::with_capacity(n),
        ctx_allocated: new_context(n, graph_size, func),
        ctx_unallocated: new_context(n, 0, func),
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
    // SAFETY: NULL or the buffer the backend just made for this copy, ours alone.
    let Some(buffer) = (unsafe { OwnedBuffer::from_raw(backend.alloc_buffer(size)) }) else {
        crate::platform::out_of_memory(func, crate::platform::pending_out_of_memory().unwrap_or(size));
    };
    let talloc = Tallocr::over(buffer.get());
    c.to_alloc.iter().for_each(|&t| talloc.alloc(t));
    drop(talloc); // (it does not own the buffer)

    for node in graph.nodes() {
        c.init(node);
    }

    // SAFETY: a graph in our allocated context, sized for n_nodes.
    let copy = unsafe { ggml::wsp_ggml_new_graph_custom(c.ctx_allocated, graph_size, false) };
    check(!copy.is_null(), func, || "wsp_ggml_new_graph_custom failed".into());
    for (i, node) in graph.nodes().enumerate() {
        let id = c.ids.get(node.as_ptr() as usize as u64).expect("every node was duplicated") as usize;
        // SAFETY: the new graph has room for graph_size >= n_nodes nodes.
        unsafe { *(*copy).nodes.add(i) = c.copies[id].as_ptr() };
    }
    // SAFETY: as above.
    unsafe { (*copy).n_nodes = graph.n_nodes() as i32 };
    GraphCopy {
        buffer: Some(buffer),
        ctx_allocated: OwnedContext(c.ctx_allocated),
        ctx_unallocated: OwnedContext(c.ctx_unallocated),
        graph: copy,
    }
}

/// A one-node view of `graph` at `i`.
fn single_node_view(graph: GraphRef, i: usize) -> wsp_ggml_cgraph {
    let mut g = graph.view(i, i + 1).to_c();
    (g.grads, g.size) = (core::ptr::null_mut(), 1);
    g
}

/// `wsp_ggml_backend_compare_graph_backend`: `graph` is allocated on
/// `backend1`; it is copied to `backend2`, computed node by node on both, and
/// `callback(i, t1, t2)` sees each non-view node's two results.
///
/// # Safety
/// `graph`'s tensors are live and allocated on `backend1`; `callback` is
/// safe to call with `user_data` (and the two result tensors) during the call.
pub unsafe fn compare_graph_backend(
    backend1: BackendRef,
    backend2: BackendRef,
    graph: GraphRef,
    callback: CompareCallback,
    user_data: *mut c_void,
) {
    let func = "wsp_ggml_backend_compare_graph_backend";
    let copy = graph_copy(backend2, graph);
    // (the copy's tensors live until it is freed below)
    let g2 = copy.graph();
    for i in 0..graph.n_nodes() {
        let (t1, t2) = (graph.node(i), g2.node(i));
        check(t1.op() == t2.op() && t1.same_layout(t2), func, || format!("node {i} differs in the copy"));
        let (mut v1, mut v2) = (single_node_view(graph, i), single_node_view(g2, i));
        // SAFETY: one-node views of `graph` (its tensors live on `backend1`,
        // the caller's contract) and of its copy on `backend2`.
        unsafe {
            backend1.graph_compute(&mut v1);
            backend2.graph_compute(&mut v2);
        }
        if t1.is_view_op() {
            continue;
        }
        // SAFETY: the caller's callback with its `user_data` (its contract)
        // and the two live result tensors.
        if !unsafe { callback(i as i32, t1.as_ptr(), t2.as_ptr(), user_data) } {
            break;
        }
    }
    copy.free();
}
