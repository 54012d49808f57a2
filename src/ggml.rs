//! Safe handles on the ggml objects this library is given: tensors and
//! graphs ([`TensorRef`], [`GraphRef`]), and the few ggml facts the scheduler
//! computes itself (sizes, in-place ops). The `#[repr(C)]`
//! mirrors and the imported functions are in `sys` (re-exported here).
//!
//! Everything that dereferences a tensor or graph pointer lives in this module,
//! behind [`TensorRef`] and [`GraphRef`], so the rest of the crate reads ggml
//! objects through small, named accessors (exceptions, in the wrapper
//! layer: `handle::context` fills the node list of a graph it has just
//! created, `handle::host` copies a graph struct into a graph plan).

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

/// A tensor handed to us by C. Copyable handle; identity is the address.
///
/// Invariant (the C API contract, as in the original): the pointer stays valid
/// and is not mutated concurrently for as long as the call that received it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TensorRef(NonNull<wsp_ggml_tensor>);

impl TensorRef {
    /// The handle on `ptr`; `None` for NULL.
    ///
    /// # Safety
    /// `ptr` is NULL or points to a live `wsp_ggml_tensor` that stays live,
    /// and is not mutated concurrently, for as long as the handle or any copy
    /// of it is dereferenced (any accessor but `as_ptr`; comparing and
    /// hashing handles only compares addresses).
    pub unsafe fn new(ptr: *mut wsp_ggml_tensor) -> Option<Self> {
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
    pub fn buffer(self) -> *mut wsp_ggml_backend_buffer {
        self.get().buffer
    }
    pub fn data(self) -> *mut c_void {
        self.get().data
    }
    pub fn view_src(self) -> Option<TensorRef> {
        // SAFETY: the view source of a live tensor is NULL or a live tensor,
        // live as long as its view (ggml's contract).
        unsafe { TensorRef::new(self.get().view_src) }
    }
    pub fn view_offs(self) -> usize {
        self.get().view_offs
    }
    /// Sources in order, stopping at the first NULL as ggml does.
    pub fn srcs(self) -> impl Iterator<Item = (usize, TensorRef)> {
        // (one source read per step, not the whole array copied first: the
        // scheduler reads every node's sources once or twice per compute)
        (0..WSP_GGML_MAX_SRC)
            // SAFETY: the sources of a live tensor are NULL or live tensors,
            // live as long as the tensor (ggml's contract).
            .map_while(move |j| unsafe { TensorRef::new(self.get().src[j]) })
            .enumerate()
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
        // graph's tensors during compute. `data + view_offs` is computed as C
        // computes it (wrapping_add): `data` may be a device address, in no
        // allocation Rust knows of.
        unsafe {
            let t = &mut *self.as_ptr();
            t.backend = backend;
            t.buffer = buffer;
            t.data = if data.is_null() { data } else { data.cast::<u8>().wrapping_add(t.view_offs).cast() };
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
    pub fn place(self, buffer: *mut wsp_ggml_backend_buffer, data: *mut c_void) {
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
        // (copies: no reference into a struct that is packed on 32-bit ARM;
        // every field compared without a branch: the placement asks this of
        // nearly every node, and a reuse asks it again)
        let (ane, bne, anb, bnb) = (a.ne, b.ne, a.nb, b.nb);
        let mut diff = (a.type_ ^ b.type_) as u64;
        for i in 0..4 {
            diff |= (ane[i] ^ bne[i]) as u64 | (anb[i] ^ bnb[i]) as u64;
        }
        diff == 0
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

/// The ops ggml-alloc computes in place, as a bit set by op value, looked
/// up by name in the linked ggml (see `WSP_GGML_OPS_IN_PLACE_NAMES`): the
/// names are read in op order up to `UNARY`, the last of them, which every
/// ggml with this backend API has (so no read passes ggml's name table).
pub fn in_place_ops() -> u128 {
    let name = |op: c_int| {
        // SAFETY: op values up to UNARY's are ggml ops (see above).
        let p = unsafe { wsp_ggml_op_name(op) };
        // SAFETY: non-NULL, NUL-terminated static string from ggml.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
    };
    in_place_ops_named(name)
        .unwrap_or_else(|| crate::fatal::fatal("wsp_ggml_backend_sched_new", "the linked ggml has no UNARY op among its first 128 ops"))
}

/// [`in_place_ops`] over the op names `name` gives; None without `UNARY`.
fn in_place_ops_named<'a>(name: impl Fn(c_int) -> Option<&'a CStr>) -> Option<u128> {
    let mut set = 0u128;
    for op in 0..128 {
        let Some(name) = name(op).map(CStr::to_bytes) else { continue };
        if WSP_GGML_OPS_IN_PLACE_NAMES.iter().any(|n| n.as_bytes() == name) {
            set |= 1 << op;
        }
        if name == b"UNARY" {
            return Some(set);
        }
    }
    None
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

/// A graph handed to us by C (same contract as [`TensorRef`]): its node
/// and leaf arrays hold `n_nodes` and `n_leafs` entries, each NULL or a live
/// tensor, for as long as the graph is.
#[derive(Clone, Copy)]
pub struct GraphRef(NonNull<wsp_ggml_cgraph>);

impl GraphRef {
    /// The handle on `ptr`; `None` for NULL.
    ///
    /// # Safety
    /// `ptr` is NULL or points to a live `wsp_ggml_cgraph` whose `nodes` and
    /// `leafs` arrays (when not NULL) hold `n_nodes` and `n_leafs` entries,
    /// each NULL or a live tensor; all of it stays live, and is not mutated
    /// concurrently, for as long as the handle or any copy of it is used.
    pub unsafe fn new(ptr: *mut wsp_ggml_cgraph) -> Option<Self> {
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
    /// A node or leaf entry as a handle (`None`: a NULL entry).
    fn entry(&self, p: *mut wsp_ggml_tensor) -> Option<TensorRef> {
        // SAFETY: GraphRef invariant: each node and leaf entry is NULL or a
        // live tensor, live as long as the graph.
        unsafe { TensorRef::new(p) }
    }
    pub fn nodes(&self) -> impl Iterator<Item = TensorRef> + '_ {
        self.node_entries().flatten()
    }
    /// The nodes as stored, as handles (`None`: a NULL entry).
    pub fn node_entries(&self) -> impl Iterator<Item = Option<TensorRef>> + '_ {
        self.node_ptrs().iter().map(|&p| self.entry(p))
    }
    /// The leafs as stored, as handles (`None`: a NULL entry).
    pub fn leaf_entries(&self) -> impl Iterator<Item = Option<TensorRef>> + '_ {
        self.leaf_ptrs().iter().map(|&p| self.entry(p))
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
        self.entry(p).unwrap_or_else(|| crate::fatal::fatal("graph", &format!("node {i} is NULL")))
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

/// A run of consecutive nodes of a live graph, as a graph struct of its own
/// (what a split hands a backend's `graph_compute`). Made from a
/// [`GraphRef`] within its bounds, and valid as long as that graph: for the
/// call (the same contract).
#[derive(Clone, Copy)]
pub struct GraphView(wsp_ggml_cgraph);

impl GraphRef {
    /// Nodes `start..end` (`end <= n_nodes`) as a graph view.
    pub fn view(&self, start: usize, end: usize) -> GraphView {
        assert!(start <= end && end <= self.n_nodes(), "a view inside the graph");
        let g = self.get();
        let (nodes, grads) = (g.nodes, g.grads);
        // (in bounds, so the offsets stay inside the node and gradient
        // arrays: wrapping_add computes the same address without unsafe)
        let nodes = nodes.wrapping_add(start);
        let grads = if grads.is_null() { grads } else { grads.wrapping_add(start) };
        GraphView(wsp_ggml_cgraph::of_nodes(nodes, grads, end - start, 0, g.order))
    }
}

impl GraphView {
    pub fn n_nodes(&self) -> usize {
        self.0.n_nodes.max(0) as usize
    }

    /// Node `j` (`j < n_nodes`).
    pub fn node(&self, j: usize) -> TensorRef {
        assert!(j < self.n_nodes(), "a node of the view");
        // SAFETY: j < n_nodes of a view inside a live graph (`GraphRef::view`),
        // whose entries are NULL or live tensors.
        let p = unsafe { *self.0.nodes.add(j) };
        // SAFETY: as above.
        unsafe { TensorRef::new(p) }.unwrap_or_else(|| crate::fatal::fatal("graph", &format!("node {j} is NULL")))
    }

    /// Nodes `j0..j1` of this view (`j1 <= n_nodes`).
    pub fn sub(&self, j0: usize, j1: usize) -> GraphView {
        assert!(j0 <= j1 && j1 <= self.n_nodes(), "a view inside the view");
        let mut v = self.0;
        v.nodes = v.nodes.wrapping_add(j0);
        v.grads = if v.grads.is_null() { v.grads } else { v.grads.wrapping_add(j0) };
        v.n_nodes = (j1 - j0) as c_int;
        v.size = v.n_nodes;
        GraphView(v)
    }

    /// The struct C receives (a copy: the backend may write its fields).
    pub fn to_c(self) -> wsp_ggml_cgraph {
        self.0
    }
}

/// The user's evaluation callback and its user data, as
/// `sched_set_eval_callback` received them: asked (`ask` = true) whether
/// the caller wants to see a node, then called with each wanted node once
/// computed (false stops the compute).
#[derive(Clone, Copy)]
pub struct EvalCallback {
    f: unsafe extern "C" fn(t: *mut wsp_ggml_tensor, ask: bool, user_data: *mut c_void) -> bool,
    user_data: usize,
}

impl EvalCallback {
    /// # Safety
    /// `f` is safe to call with `user_data` and any live tensor of a graph
    /// being computed, for as long as the callback is set.
    pub unsafe fn new(f: unsafe extern "C" fn(*mut wsp_ggml_tensor, bool, *mut c_void) -> bool, user_data: *mut c_void) -> Self {
        EvalCallback { f, user_data: user_data as usize }
    }

    pub fn call(self, t: TensorRef, ask: bool) -> bool {
        // SAFETY: `new`'s contract, with a live tensor.
        unsafe { (self.f)(t.as_ptr(), ask, self.user_data as *mut c_void) }
    }
}

/// A tensor struct of ours on the heap, at a fixed address (ggml, the
/// backends and the caller's graph reach it by that address): held by
/// address, never as a `Box` or a reference that would claim it while
/// others use it; freed when dropped.
pub struct HeapTensor(NonNull<wsp_ggml_tensor>);

impl HeapTensor {
    /// An all-zero tensor.
    pub fn zeroed() -> HeapTensor {
        HeapTensor(NonNull::from(Box::leak(Box::new(zeroed_tensor()))))
    }

    pub fn handle(&self) -> TensorRef {
        TensorRef(self.0)
    }

    /// The tensor, to rewrite. No user code may run while the reference
    /// lives (`&mut self`: nothing of ours reaches it meanwhile).
    pub fn edit(&mut self) -> &mut wsp_ggml_tensor {
        // SAFETY: our live tensor; `&mut self` keeps our other uses out, and
        // nothing else makes a reference to it.
        unsafe { self.0.as_mut() }
    }
}

impl Drop for HeapTensor {
    fn drop(&mut self) {
        // SAFETY: made by Box::leak in `zeroed`; freed once, here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// Test handles, for the unit tests of modules without `unsafe`.
#[cfg(test)]
impl TensorRef {
    /// The handle on a tensor the test keeps alive (and does not move) for
    /// as long as it uses the handle.
    pub(crate) fn of_test(t: &mut wsp_ggml_tensor) -> TensorRef {
        TensorRef(NonNull::from(t))
    }

    /// A handle that is only compared and hashed, never dereferenced: an
    /// address (made without provenance, not by an integer cast, for Miri).
    pub(crate) fn address_only(addr: usize) -> TensorRef {
        TensorRef(NonNull::new(core::ptr::null_mut::<wsp_ggml_tensor>().wrapping_byte_add(addr)).expect("a non-zero address"))
    }
}

/// An all-zero tensor struct, as ggml initialises one (`backend` = CPU = 0).
pub fn zeroed_tensor() -> wsp_ggml_tensor {
    // SAFETY: every field of wsp_ggml_tensor is an integer, a raw pointer or
    // an array of those; all-zero bytes are a valid value for each.
    unsafe { core::mem::zeroed() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-place ops are found by name, wherever the linked ggml's enum
    /// puts them: v1.5.0's order, and rc.4's, whose six convolution ops
    /// (for v1.5.0's one IM2COL) put UNARY at 62, not 57.
    #[test]
    fn in_place_ops_follow_the_linked_ggml_enum() {
        const V1_5: &[&CStr] = &[
            c"NONE",
            c"DUP",
            c"ADD",
            c"ADD1",
            c"ACC",
            c"SUB",
            c"MUL",
            c"DIV",
            c"SQR",
            c"SQRT",
            c"LOG",
            c"SUM",
            c"SUM_ROWS",
            c"MEAN",
            c"ARGMAX",
            c"REPEAT",
            c"REPEAT_BACK",
            c"CONCAT",
            c"SILU_BACK",
            c"NORM",
            c"RMS_NORM",
            c"RMS_NORM_BACK",
            c"GROUP_NORM",
            c"MUL_MAT",
            c"OUT_PROD",
            c"SCALE",
            c"SET",
            c"CPY",
            c"CONT",
            c"RESHAPE",
            c"VIEW",
            c"PERMUTE",
            c"TRANSPOSE",
            c"GET_ROWS",
            c"GET_ROWS_BACK",
            c"DIAG",
            c"DIAG_MASK_INF",
            c"DIAG_MASK_ZERO",
            c"SOFT_MAX",
            c"SOFT_MAX_BACK",
            c"ROPE",
            c"ROPE_BACK",
            c"ALIBI",
            c"CLAMP",
            c"CONV_TRANSPOSE_1D",
            c"IM2COL",
            c"CONV_TRANSPOSE_2D",
            c"POOL_1D",
            c"POOL_2D",
            c"UPSCALE",
            c"FLASH_ATTN",
            c"FLASH_FF",
            c"FLASH_ATTN_BACK",
            c"WIN_PART",
            c"WIN_UNPART",
            c"GET_REL_POS",
            c"ADD_REL_POS",
            c"UNARY",
            c"MAP_UNARY",
        ];
        let v1_5 = in_place_ops_named(|op| V1_5.get(op as usize).copied()).unwrap();
        let values = [
            WSP_GGML_OP_ADD,
            WSP_GGML_OP_ADD1,
            WSP_GGML_OP_SUB,
            WSP_GGML_OP_MUL,
            WSP_GGML_OP_DIV,
            WSP_GGML_OP_SQR,
            WSP_GGML_OP_SQRT,
            WSP_GGML_OP_LOG,
            WSP_GGML_OP_RMS_NORM,
            WSP_GGML_OP_SCALE,
            WSP_GGML_OP_DIAG_MASK_INF,
            WSP_GGML_OP_DIAG_MASK_ZERO,
            WSP_GGML_OP_SOFT_MAX,
            WSP_GGML_OP_ROPE,
            WSP_GGML_OP_UNARY,
        ];
        assert_eq!(v1_5, values.iter().fold(0u128, |s, &op| s | 1 << op), "v1.5.0's values (ggml.h, checked by ffi-tests)");
        let im2col = V1_5.iter().position(|&n| n == c"IM2COL").unwrap();
        let mut rc4: Vec<&CStr> = V1_5[..im2col - 1].to_vec();
        rc4.extend([c"CONV_1D", c"CONV_1D_STAGE_0", c"CONV_1D_STAGE_1", c"CONV_TRANSPOSE_1D", c"CONV_2D", c"CONV_2D_STAGE_0"]);
        rc4.extend([c"CONV_2D_STAGE_1"]);
        rc4.extend_from_slice(&V1_5[im2col + 1..]);
        let rc4_set = in_place_ops_named(|op| rc4.get(op as usize).copied()).unwrap();
        let unary = rc4.iter().position(|&n| n == c"UNARY").unwrap();
        assert_eq!(unary, 62);
        assert!(rc4_set >> 62 & 1 == 1 && rc4_set >> 57 & 1 == 0, "UNARY where rc.4 has it");
        assert_eq!(rc4_set.count_ones(), 15);
        assert_eq!(in_place_ops_named(|op| V1_5[..10].get(op as usize).copied()), None, "no UNARY: not a supported ggml");
    }
}
