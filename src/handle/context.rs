//! ggml contexts this library makes ([`OwnedContext`]: tensors duplicated
//! into it, a graph built in it) and what owns them: a graph copy
//! ([`GraphCopy`], C's `struct wsp_ggml_backend_graph_copy`), and the
//! callback that compares two backends' results ([`CompareCallback`]).

#![allow(non_camel_case_types)]

use core::ffi::c_void;
use core::mem::ManuallyDrop;
use core::ptr;

use super::refs::{assert_owning, wsp_ggml_backend_buffer_t, OwnedBuffer};
use crate::fatal::{check, fatal};
use crate::ggml::{self, wsp_ggml_cgraph, wsp_ggml_context, wsp_ggml_init_params, wsp_ggml_tensor, GraphRef, TensorRef};

/// A ggml context we made (`wsp_ggml_init`), freed on drop (NULL: none).
pub struct OwnedContext(*mut wsp_ggml_context);

assert_owning!(OwnedContext);

impl OwnedContext {
    /// A `no_alloc` context (tensor structs, no data) with room for
    /// `n_tensors` tensors and, when `graph_size` > 0, a graph of that many
    /// nodes without gradients; aborts naming `func` when ggml cannot.
    pub fn no_alloc(n_tensors: usize, graph_size: usize, func: &str) -> OwnedContext {
        // SAFETY: size queries, and a context owned by the result.
        let ctx = unsafe {
            let mem_size = ggml::wsp_ggml_tensor_overhead() * n_tensors + ggml::wsp_ggml_graph_overhead_custom(graph_size, false);
            ggml::wsp_ggml_init(wsp_ggml_init_params { mem_size, mem_buffer: ptr::null_mut(), no_alloc: true })
        };
        check(!ctx.is_null(), func, || "wsp_ggml_init failed (out of ggml contexts or memory)".into());
        OwnedContext(ctx)
    }

    /// A tensor of `src`'s type and shape in this context, without data
    /// (`wsp_ggml_dup_tensor`), live as long as the context; aborts naming
    /// `func` when the context is full.
    pub fn dup_tensor(&self, src: TensorRef, func: &str) -> TensorRef<'_> {
        // SAFETY: a live tensor duplicated into our own live context.
        let dst = unsafe { ggml::wsp_ggml_dup_tensor(self.0, src.as_ptr()) };
        // SAFETY: NULL or a tensor of our context, freed only with it.
        unsafe { TensorRef::new(dst) }.unwrap_or_else(|| fatal(func, "out of context memory"))
    }

    /// A graph in this context (`wsp_ggml_new_graph_custom`, no gradients)
    /// of `size` nodes at most, holding `nodes` in order; aborts naming
    /// `func` when ggml cannot make it or `nodes` are more than `size`. It
    /// is read only once the context has an owner ([`GraphCopy::new`]).
    pub fn new_graph<'t>(&self, size: usize, nodes: impl Iterator<Item = TensorRef<'t>>, func: &str) -> NewGraph {
        // SAFETY: our live context, which has room for a graph of `size` (no_alloc).
        let graph = unsafe { ggml::wsp_ggml_new_graph_custom(self.0, size, false) };
        check(!graph.is_null(), func, || "wsp_ggml_new_graph_custom failed".into());
        let mut n = 0;
        for node in nodes {
            check(n < size, func, || "more nodes than the graph holds".into());
            // SAFETY: the new graph's node array holds `size` entries; n < size.
            unsafe { *(*graph).nodes.add(n) = node.as_ptr() };
            n += 1;
        }
        // SAFETY: as above.
        unsafe { (*graph).n_nodes = n as i32 };
        NewGraph { ctx: self.0, graph }
    }
}

impl Drop for OwnedContext {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a context made by wsp_ggml_init, ours alone, freed once.
            unsafe { ggml::wsp_ggml_free(self.0) };
        }
    }
}

/// A graph [`OwnedContext::new_graph`] made, not readable until its
/// context has an owner.
pub struct NewGraph {
    ctx: *mut wsp_ggml_context,
    graph: *mut wsp_ggml_cgraph,
}

/// `struct wsp_ggml_backend_graph_copy`: the copy and what owns its memory.
#[repr(C)]
pub struct wsp_ggml_backend_graph_copy {
    pub buffer: wsp_ggml_backend_buffer_t,
    pub ctx_allocated: *mut wsp_ggml_context,
    pub ctx_unallocated: *mut wsp_ggml_context,
    pub graph: *mut wsp_ggml_cgraph,
}

/// A graph copy we own: its buffer, its two contexts and the graph in the
/// first, freed exactly once, when consumed by [`GraphCopy::free`] or
/// dropped, unless handed to C by `into_c` (which frees it with
/// `wsp_ggml_backend_graph_copy_free`).
pub struct GraphCopy {
    // (dropped in this order: the buffer, then the contexts, as upstream frees them)
    buffer: Option<OwnedBuffer>,
    ctx_allocated: OwnedContext,
    ctx_unallocated: OwnedContext,
    graph: *mut wsp_ggml_cgraph,
}

assert_owning!(GraphCopy);

impl GraphCopy {
    /// The copy: `buffer` (which holds the allocated tensors), the two
    /// contexts, and `graph`, which must be in `ctx_allocated`.
    pub fn new(buffer: OwnedBuffer, ctx_allocated: OwnedContext, ctx_unallocated: OwnedContext, graph: NewGraph) -> GraphCopy {
        assert!(graph.ctx == ctx_allocated.0, "the copy's graph is in its allocated context");
        GraphCopy { buffer: Some(buffer), ctx_allocated, ctx_unallocated, graph: graph.graph }
    }
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
        let mut this = ManuallyDrop::new(self);
        let buffer = this.buffer.take().map_or(ptr::null_mut(), OwnedBuffer::into_raw);
        let ctx_allocated = core::mem::replace(&mut this.ctx_allocated.0, ptr::null_mut());
        let ctx_unallocated = core::mem::replace(&mut this.ctx_unallocated.0, ptr::null_mut());
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

/// The callback of `wsp_ggml_backend_compare_graph_backend`, with its user
/// data: `callback(node_index, t1, t2, user_data)`, false stops.
#[derive(Clone, Copy)]
pub struct CompareCallback {
    f: unsafe extern "C" fn(node_index: i32, t1: *mut wsp_ggml_tensor, t2: *mut wsp_ggml_tensor, user_data: *mut c_void) -> bool,
    user_data: *mut c_void,
}

impl CompareCallback {
    /// # Safety
    /// `f` is safe to call with `user_data` and two live tensors during
    /// the comparison.
    pub unsafe fn new(
        f: unsafe extern "C" fn(i32, *mut wsp_ggml_tensor, *mut wsp_ggml_tensor, *mut c_void) -> bool,
        user_data: *mut c_void,
    ) -> Self {
        CompareCallback { f, user_data }
    }

    pub fn call(self, node_index: i32, t1: TensorRef, t2: TensorRef) -> bool {
        // SAFETY: `new`'s contract, with two live tensors.
        unsafe { (self.f)(node_index, t1.as_ptr(), t2.as_ptr(), self.user_data) }
    }
}
