//! Safe handles on the ggml objects this library is given: tensors and
//! graphs ([`TensorRef`], [`GraphRef`]), and the few ggml facts the scheduler
//! computes itself (sizes, ggml-alloc's allocator state). The `#[repr(C)]`
//! mirrors and the imported functions are in `sys` (re-exported here).
//!
//! Everything that dereferences a tensor or graph pointer lives in this module,
//! behind [`TensorRef`] and [`GraphRef`], so the rest of the crate reads ggml
//! objects through small, named accessors.

#![allow(non_camel_case_types)]

use crate::prelude::*;

use core::ffi::{c_char, c_int, c_void, CStr};
use core::ptr::NonNull;

pub use crate::sys::*;

impl wsp_ggml_cgraph {
    /// A graph of `n` nodes at `nodes` (and their gradients at `grads`, or
    /// NULL), without leafs or hash table: the views the scheduler and the
    /// graph tools hand to backends and to ggml-alloc.
    pub fn of_nodes(nodes: *mut *mut wsp_ggml_tensor, grads: *mut *mut wsp_ggml_tensor, n: usize, size: usize, order: c_int) -> Self {
        wsp_ggml_cgraph {
            size: size as c_int,
            n_nodes: n as c_int,
            n_leafs: 0,
            nodes,
            grads,
            leafs: core::ptr::null_mut(),
            visited_hash_table: wsp_ggml_hash_set { size: 0, keys: core::ptr::null_mut() },
            order,
            perf_runs: 0,
            perf_cycles: 0,
            perf_time_us: 0,
        }
    }
}

/// The free blocks of an allocator (offset from its buffer's base, size),
/// sorted by offset: what ggml-alloc would hand out next. ggml-alloc has no
/// call for this; it is read from the head of its private struct
/// ([`TallocrHead`]) and checked against what the public calls say. `None`
/// when the allocator does not look like that (another ggml-alloc).
pub fn tallocr_free_blocks(talloc: wsp_ggml_tallocr_t) -> Option<Vec<(usize, usize)>> {
    if talloc.is_null() {
        return None;
    }
    // SAFETY: a live allocator; the public calls only read it.
    let (buffer, measure) = unsafe { (wsp_ggml_tallocr_get_buffer(talloc), wsp_ggml_tallocr_is_measure(talloc)) };
    let buffer = crate::buffer::BufferRef::new(buffer)?;
    let head = talloc.cast::<TallocrHead>();
    // SAFETY: `talloc` points to ggml-alloc's struct, of which TallocrHead
    // is the prefix; fields are read by value through the raw pointer (no
    // reference to memory ggml-alloc owns).
    let (b, base, alignment, n) = unsafe {
        (
            core::ptr::addr_of!((*head).buffer).read(),
            core::ptr::addr_of!((*head).base).read(),
            core::ptr::addr_of!((*head).alignment).read(),
            core::ptr::addr_of!((*head).n_free_blocks).read(),
        )
    };
    let start = buffer.base() as usize;
    // a measure allocator's one block is SIZE_MAX/2 long, past its 1-byte buffer
    let end = if measure { start.checked_add(usize::MAX / 2 + alignment)? } else { start.checked_add(buffer.size())? };
    let n = usize::try_from(n).ok()?;
    if b != buffer.as_ptr() || base as usize != start || alignment != buffer.alignment() || n > TALLOCR_MAX_FREE_BLOCKS {
        return None;
    }
    let mut blocks = Vec::with_capacity(n);
    let mut at = start;
    for k in 0..n {
        // SAFETY: k < n <= TALLOCR_MAX_FREE_BLOCKS, inside the struct.
        let block = unsafe { core::ptr::addr_of!((*head).free_blocks[k]).read() };
        let addr = block.addr as usize;
        if addr < at || addr > end || end - addr < block.size {
            return None;
        }
        blocks.push((addr - start, block.size));
        at = addr + block.size;
    }
    Some(blocks)
}

/// A tensor handed to us by C. Copyable handle; identity is the address.
///
/// Invariant (the C API contract, as in the original): the pointer stays valid
/// and is not mutated concurrently for as long as the call that received it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TensorRef(NonNull<wsp_ggml_tensor>);

impl TensorRef {
    pub fn new(ptr: *mut wsp_ggml_tensor) -> Option<Self> {
        NonNull::new(ptr).map(TensorRef)
    }
    pub fn as_ptr(self) -> *mut wsp_ggml_tensor {
        self.0.as_ptr()
    }
    pub(crate) fn get(&self) -> &wsp_ggml_tensor {
        // SAFETY: TensorRef invariant: valid, live tensor for the current call.
        unsafe { self.0.as_ref() }
    }
    pub fn op(self) -> c_int {
        self.get().op
    }
    pub fn is_view_op(self) -> bool {
        is_view_op(self.op())
    }
    pub fn buffer(self) -> *mut crate::buffer::wsp_ggml_backend_buffer {
        self.get().buffer
    }
    pub fn data(self) -> *mut c_void {
        self.get().data
    }
    pub fn view_src(self) -> Option<TensorRef> {
        TensorRef::new(self.get().view_src)
    }
    pub fn view_offs(self) -> usize {
        self.get().view_offs
    }
    /// Sources in order, stopping at the first NULL as ggml does.
    pub fn srcs(self) -> impl Iterator<Item = (usize, TensorRef)> {
        let src = self.get().src;
        src.into_iter().map_while(TensorRef::new).enumerate()
    }
    pub fn set_src(self, j: usize, t: TensorRef) {
        // SAFETY: TensorRef invariant; the scheduler owns the graph during compute.
        unsafe { (*self.as_ptr()).src[j] = t.as_ptr() }
    }
    /// `wsp_ggml_nbytes`, asked of ggml every time. A process-wide cache of
    /// ggml's type sizes was global mutable state (helgrind saw races on it
    /// between two schedulers' threads) and saved little: asking ggml costs
    /// about 3 instructions per node more in a steady compute (scripts/callgrind,
    /// 4096 nodes, 2 backends: 4,213,889 -> 4,228,739 Ir per compute, +0.35 %).
    pub fn nbytes(self) -> usize {
        // SAFETY: TensorRef invariant; wsp_ggml_nbytes only reads the
        // tensor's type, ne and nb.
        unsafe { wsp_ggml_nbytes(self.as_ptr()) }
    }
    pub fn name(&self) -> &CStr {
        let name = &self.get().name;
        // SAFETY: reinterpreting the [c_char; 64] as bytes of the same length.
        let bytes: &[u8] = unsafe { core::slice::from_raw_parts(name.as_ptr().cast(), name.len()) };
        CStr::from_bytes_until_nul(bytes).unwrap_or(c"?")
    }
    pub fn name_lossy(&self) -> String {
        self.name().to_string_lossy().into_owned()
    }
    /// Point a view without a buffer at its `view_src`'s memory, as ggml-alloc
    /// does for views (backend type, buffer, data).
    pub fn init_view_from_src(self, view_src: TensorRef) {
        let (backend, buffer, data) = {
            let s = view_src.get();
            (s.backend, s.buffer, s.data)
        };
        // SAFETY: TensorRef invariant; the scheduler has exclusive use of the
        // graph's tensors during compute. `data + view_offs` stays inside
        // view_src's allocation (ggml checked it when it made the view).
        unsafe {
            let t = &mut *self.as_ptr();
            t.backend = backend;
            t.buffer = buffer;
            t.data = if data.is_null() { data } else { data.cast::<u8>().add(t.view_offs).cast() };
        }
    }
    /// Make `self` (a fresh tensor from `wsp_ggml_dup_tensor`) a copy of
    /// `src`'s metadata: strides, op, op params and name (not data or sources).
    pub fn copy_meta_from(self, src: TensorRef) {
        let s = src.get();
        let (nb, op, op_params, name) = (s.nb, s.op, s.op_params, s.name);
        // SAFETY: TensorRef invariant; `self` is a tensor we just created.
        unsafe {
            let t = &mut *self.as_ptr();
            t.nb = nb;
            t.op = op;
            t.op_params = op_params;
            t.name = name;
        }
    }
    pub fn set_view(self, view_src: TensorRef, view_offs: usize) {
        // SAFETY: TensorRef invariant; `self` is a tensor we just created.
        unsafe {
            (*self.as_ptr()).view_src = view_src.as_ptr();
            (*self.as_ptr()).view_offs = view_offs;
        }
    }
    /// Forget an allocation (after a measure pass set fake addresses).
    pub fn clear_allocation(self) {
        // SAFETY: TensorRef invariant; `self` is a tensor we created.
        unsafe {
            (*self.as_ptr()).data = core::ptr::null_mut();
            (*self.as_ptr()).buffer = core::ptr::null_mut();
        }
    }
    /// What ggml-alloc writes when it places a tensor.
    /// Place the tensor at `data` in `buffer` (as `wsp_ggml_tallocr_alloc`).
    pub fn place(self, buffer: *mut crate::buffer::wsp_ggml_backend_buffer, data: *mut c_void) {
        // SAFETY: TensorRef invariant; the scheduler has exclusive use of the
        // graph's tensors during its calls.
        unsafe {
            let t = &mut *self.as_ptr();
            t.buffer = buffer;
            t.data = data;
        }
    }
    /// Make the tensor a view of `src` (ggml-alloc does this to a node it
    /// computes in place in its source's memory).
    pub fn set_view_src(self, src: TensorRef) {
        // SAFETY: as in place.
        unsafe { (*self.as_ptr()).view_src = src.as_ptr() }
    }
    /// Same type, ne and nb (the original's `wsp_ggml_are_same_layout`).
    pub fn same_layout(self, other: TensorRef) -> bool {
        let (a, b) = (self.get(), other.get());
        // (copies: no reference into a struct that is packed on 32-bit ARM)
        let (ane, bne) = (a.ne, b.ne);
        a.type_ == b.type_ && ane == bne && a.nb == b.nb
    }
}

/// RESHAPE, VIEW, PERMUTE or TRANSPOSE (consecutive in ggml's enum).
#[inline]
pub fn is_view_op(op: c_int) -> bool {
    const _: () = assert!(
        WSP_GGML_OP_VIEW == WSP_GGML_OP_RESHAPE + 1
            && WSP_GGML_OP_PERMUTE == WSP_GGML_OP_RESHAPE + 2
            && WSP_GGML_OP_TRANSPOSE == WSP_GGML_OP_RESHAPE + 3
    );
    (WSP_GGML_OP_RESHAPE..=WSP_GGML_OP_TRANSPOSE).contains(&op)
}

pub fn op_name(op: c_int) -> String {
    // SAFETY: wsp_ggml_op_name returns a static string for any op value in range;
    // we only call it with an op read from a tensor.
    let p = unsafe { wsp_ggml_op_name(op) };
    if p.is_null() {
        return format!("op{op}");
    }
    // SAFETY: non-NULL, NUL-terminated static string from ggml.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A graph handed to us by C (same contract as [`TensorRef`]).
#[derive(Clone, Copy)]
pub struct GraphRef(NonNull<wsp_ggml_cgraph>);

impl GraphRef {
    pub fn new(ptr: *mut wsp_ggml_cgraph) -> Option<Self> {
        NonNull::new(ptr).map(GraphRef)
    }
    fn get(&self) -> &wsp_ggml_cgraph {
        // SAFETY: GraphRef invariant: valid graph for the current call.
        unsafe { self.0.as_ref() }
    }
    fn list(&self, ptr: *mut *mut wsp_ggml_tensor, n: c_int) -> &[*mut wsp_ggml_tensor] {
        if ptr.is_null() || n <= 0 {
            return &[];
        }
        // SAFETY: ggml graphs hold `n` valid entries at `ptr`, alive while the graph is.
        unsafe { core::slice::from_raw_parts(ptr, n as usize) }
    }
    pub fn nodes(&self) -> impl Iterator<Item = TensorRef> + '_ {
        self.list(self.get().nodes, self.get().n_nodes).iter().filter_map(|&p| TensorRef::new(p))
    }
    /// The node pointers as stored (NULL entries included).
    pub fn node_ptrs(&self) -> &[*mut wsp_ggml_tensor] {
        self.list(self.get().nodes, self.get().n_nodes)
    }
    /// The leaf pointers as stored (NULL entries included).
    pub fn leaf_ptrs(&self) -> &[*mut wsp_ggml_tensor] {
        self.list(self.get().leafs, self.get().n_leafs)
    }
    pub fn n_nodes(&self) -> usize {
        self.get().n_nodes.max(0) as usize
    }
    pub fn n_leafs(&self) -> usize {
        self.get().n_leafs.max(0) as usize
    }
    pub fn node(&self, i: usize) -> TensorRef {
        let p = self.list(self.get().nodes, self.get().n_nodes)[i];
        TensorRef::new(p).unwrap_or_else(|| crate::fatal::fatal("graph", &format!("node {i} is NULL")))
    }
    pub fn nodes_ptr(&self) -> *mut *mut wsp_ggml_tensor {
        self.get().nodes
    }
    pub fn grads_ptr(&self) -> *mut *mut wsp_ggml_tensor {
        self.get().grads
    }
    pub fn order(&self) -> c_int {
        self.get().order
    }
    pub fn as_ptr(self) -> *mut wsp_ggml_cgraph {
        self.0.as_ptr()
    }
}

/// A tensor with the same type and memory layout as `src`, no data, no
/// sources, and the given name (truncated to 63 bytes as ggml does): what the
/// original made with `wsp_ggml_dup_tensor` + copying `nb`.
pub fn dup_tensor_layout(dst: &mut wsp_ggml_tensor, src: TensorRef, name: &[u8]) {
    let s = src.get();
    *dst = zeroed_tensor();
    dst.type_ = s.type_;
    dst.n_dims = s.n_dims;
    for i in 0..WSP_GGML_MAX_DIMS {
        dst.ne[i] = if (i as c_int) < s.n_dims { s.ne[i] } else { 1 };
    }
    dst.nb = s.nb;
    let n = name.len().min(WSP_GGML_MAX_NAME - 1);
    for (d, &b) in dst.name.iter_mut().zip(&name[..n]) {
        *d = b as c_char;
    }
}

/// An all-zero tensor struct, as ggml initialises one (`backend` = CPU = 0).
pub fn zeroed_tensor() -> wsp_ggml_tensor {
    // SAFETY: every field of wsp_ggml_tensor is an integer, a raw pointer or
    // an array of those; all-zero bytes are a valid value for each.
    unsafe { core::mem::zeroed() }
}
