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
use core::marker::PhantomData;
use core::num::NonZeroUsize;
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

/// Reads field `$f` of the C struct at raw pointer `$p` by value, without
/// making a reference into C memory (unaligned: the mirrors are packed(4)
/// on 32-bit ARM).
macro_rules! read_field {
    ($p:expr, $($f:tt)+) => {
        // SAFETY: the caller's handle invariant: `$p` points to a live struct
        // for the current call; a by-value read makes no reference.
        unsafe { core::ptr::addr_of!((*$p).$($f)+).read_unaligned() }
    };
}

pub(crate) use read_field;

/// Writes field `$f` of the C struct at raw pointer `$p`, without making a
/// reference into C memory.
macro_rules! write_field {
    ($p:expr, $($f:tt).+ = $v:expr) => {
        // SAFETY: the caller's handle invariant: `$p` points to a live struct
        // the library may write during the current call; no reference is made.
        unsafe { core::ptr::addr_of_mut!((*$p).$($f).+).write_unaligned($v) }
    };
}

/// A tensor's identity: its address, kept between calls (table keys,
/// `set_node_backend` assignments). It compares and hashes; it cannot be
/// dereferenced (it has no accessor: ffi-tests/tests/handles.rs checks that
/// the compiler refuses one): to read the tensor again, find it in the
/// current call's graph, which gives a [`TensorRef`]. Never zero, so an
/// `Option<TensorId>` is one word.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct TensorId(NonZeroUsize);

impl TensorId {
    /// The identity of the tensor at `p` (comparing addresses only);
    /// `None` for NULL.
    #[inline(always)]
    pub fn of_ptr(p: *const wsp_ggml_tensor) -> Option<TensorId> {
        NonZeroUsize::new(p as usize).map(TensorId)
    }
    /// The address, as a number.
    #[inline(always)]
    pub fn addr(self) -> usize {
        self.0.get()
    }
    /// The identity at address `addr` (tests of tables that only compare).
    #[cfg(test)]
    pub(crate) fn at_addr(addr: usize) -> TensorId {
        TensorId(NonZeroUsize::new(addr).expect("not 0"))
    }
}

/// A tensor handed to us by C, for the call that received it: `'a` is that
/// call (or the life of the scheduler's own tensor it names). Copyable;
/// identity is the address ([`TensorRef::id`], which is what may be kept).
///
/// Every accessor reads or writes one field by value through the raw
/// pointer: no reference into the C struct is ever made, so a read through
/// one copy of the handle and a write through another never alias a Rust
/// reference.
///
/// Invariant (the C API contract, as in the original): the pointer stays valid
/// and is not mutated concurrently for `'a`.
///
/// `'a` is invariant: a handle never converts to a shorter life, so a
/// pointer written into a tensor (`set_src`, `set_view_src`) names a
/// tensor that lives exactly as long as every handle that can read it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TensorRef<'a>(NonNull<wsp_ggml_tensor>, Call<'a>);

/// The call a handle belongs to: invariant in `'a`.
type Call<'a> = PhantomData<fn(&'a ()) -> &'a ()>;

impl<'a> TensorRef<'a> {
    /// The handle on `ptr`; `None` for NULL.
    ///
    /// # Safety
    /// `ptr` is NULL or points to a live `wsp_ggml_tensor` that stays live,
    /// and is not mutated concurrently by others, for `'a`.
    #[inline(always)]
    pub unsafe fn new(ptr: *mut wsp_ggml_tensor) -> Option<Self> {
        NonNull::new(ptr).map(|p| TensorRef(p, PhantomData))
    }
    #[inline(always)]
    pub fn as_ptr(self) -> *mut wsp_ggml_tensor {
        self.0.as_ptr()
    }
    /// What may be kept past the call.
    #[inline(always)]
    pub fn id(self) -> TensorId {
        // (a NonNull's address is never 0)
        TensorId::of_ptr(self.as_ptr()).expect("a non-NULL handle")
    }
    #[inline(always)]
    fn p(self) -> *mut wsp_ggml_tensor {
        self.0.as_ptr()
    }
    #[inline(always)]
    pub fn op(self) -> c_int {
        read_field!(self.p(), op)
    }
    #[inline(always)]
    pub fn is_view_op(self) -> bool {
        is_view_op(self.op())
    }
    #[inline(always)]
    pub fn buffer(self) -> *mut wsp_ggml_backend_buffer {
        read_field!(self.p(), buffer)
    }
    #[inline(always)]
    pub fn data(self) -> *mut c_void {
        read_field!(self.p(), data)
    }
    #[inline(always)]
    pub fn type_(self) -> c_int {
        read_field!(self.p(), type_)
    }
    #[inline(always)]
    pub fn n_dims(self) -> c_int {
        read_field!(self.p(), n_dims)
    }
    #[inline(always)]
    pub fn ne(self) -> [i64; WSP_GGML_MAX_DIMS] {
        read_field!(self.p(), ne)
    }
    #[inline(always)]
    pub fn nb(self) -> [usize; WSP_GGML_MAX_DIMS] {
        read_field!(self.p(), nb)
    }
    #[inline(always)]
    pub fn op_params(self) -> [i32; WSP_GGML_MAX_OP_PARAMS / 4] {
        read_field!(self.p(), op_params)
    }
    #[inline(always)]
    pub fn view_src(self) -> Option<TensorRef<'a>> {
        // SAFETY: the view source of a live tensor is NULL or a live tensor,
        // live as long as its view (ggml's contract).
        let p = read_field!(self.p(), view_src);
        // SAFETY: as above.
        unsafe { TensorRef::new(p) }
    }
    /// The view source's identity (`None`: not a view), without a handle.
    #[inline(always)]
    pub fn view_src_id(self) -> Option<TensorId> {
        let p = read_field!(self.p(), view_src);
        TensorId::of_ptr(p)
    }
    #[inline(always)]
    pub fn view_offs(self) -> usize {
        read_field!(self.p(), view_offs)
    }
    /// Source `j` (`j < WSP_GGML_MAX_SRC`; `None`: NULL).
    #[inline(always)]
    pub fn src(self, j: usize) -> Option<TensorRef<'a>> {
        assert!(j < WSP_GGML_MAX_SRC, "a source index");
        // SAFETY: in bounds of the src array (checked above); by-value read.
        let p = unsafe { core::ptr::addr_of!((*self.p()).src).cast::<*mut wsp_ggml_tensor>().add(j).read_unaligned() };
        // SAFETY: the sources of a live tensor are NULL or live tensors,
        // live as long as the tensor (ggml's contract).
        unsafe { TensorRef::new(p) }
    }
    /// Sources in order, stopping at the first NULL as ggml does.
    #[inline(always)]
    pub fn srcs(self) -> impl Iterator<Item = (usize, TensorRef<'a>)> {
        // (one source read per step, not the whole array copied first: the
        // scheduler reads every node's sources once or twice per compute)
        (0..WSP_GGML_MAX_SRC).map_while(move |j| self.src(j)).enumerate()
    }
    /// Point source `j` at `t`. `t` lives as long as the handle on this
    /// tensor: the graph never holds a pointer that outlives its reader.
    #[inline(always)]
    pub fn set_src(self, j: usize, t: Option<TensorRef<'a>>) {
        assert!(j < WSP_GGML_MAX_SRC, "a source index");
        let v = t.map_or(core::ptr::null_mut(), TensorRef::as_ptr);
        // SAFETY: TensorRef invariant; in bounds (checked above); the
        // scheduler owns the graph during compute; no reference is made.
        unsafe { core::ptr::addr_of_mut!((*self.p()).src).cast::<*mut wsp_ggml_tensor>().add(j).write_unaligned(v) }
    }
    /// `wsp_ggml_nbytes`, asked of ggml every time. A process-wide cache of
    /// ggml's type sizes would be global mutable state shared between
    /// schedulers' threads, for about 3 instructions per node.
    #[inline(always)]
    pub fn nbytes(self) -> usize {
        // SAFETY: TensorRef invariant; wsp_ggml_nbytes only reads the
        // tensor's type, ne and nb.
        unsafe { wsp_ggml_nbytes(self.as_ptr()) }
    }
    /// The name, copied (ggml's 64 bytes, NUL-terminated).
    #[inline(always)]
    pub fn name(self) -> Name {
        let raw: [c_char; WSP_GGML_MAX_NAME] = read_field!(self.p(), name);
        #[allow(clippy::unnecessary_cast)] // (c_char is u8 on Arm)
        Name(raw.map(|c| c as u8))
    }
    pub fn name_lossy(self) -> String {
        String::from_utf8_lossy(self.name().bytes()).into_owned()
    }
    /// Point a view without a buffer at its `view_src`'s memory, as ggml-alloc
    /// does for views (backend type, buffer, data).
    pub fn init_view_from_src(self, view_src: TensorRef<'_>) {
        let (backend, buffer, data) =
            (read_field!(view_src.p(), backend), read_field!(view_src.p(), buffer), read_field!(view_src.p(), data));
        // `data + view_offs` is computed as C computes it (wrapping_add):
        // `data` may be a device address, in no allocation Rust knows of.
        let data = if data.is_null() { data } else { data.cast::<u8>().wrapping_add(self.view_offs()).cast() };
        write_field!(self.p(), backend = backend);
        write_field!(self.p(), buffer = buffer);
        write_field!(self.p(), data = data);
    }
    /// Make `self` (a fresh tensor from `wsp_ggml_dup_tensor`) a copy of
    /// `src`'s metadata: strides, op, op params and name (not data or sources).
    pub fn copy_meta_from(self, src: TensorRef<'_>) {
        write_field!(self.p(), nb = src.nb());
        write_field!(self.p(), op = src.op());
        write_field!(self.p(), op_params = src.op_params());
        let name = read_field!(src.p(), name);
        write_field!(self.p(), name = name);
    }
    /// Make `self` a view of `view_src` at `view_offs` (its view source
    /// lives as long as the view's handle).
    pub fn set_view(self, view_src: TensorRef<'a>, view_offs: usize) {
        write_field!(self.p(), view_src = view_src.as_ptr());
        write_field!(self.p(), view_offs = view_offs);
    }
    /// Forget an allocation (after a measure pass set fake addresses).
    pub fn clear_allocation(self) {
        write_field!(self.p(), data = core::ptr::null_mut());
        write_field!(self.p(), buffer = core::ptr::null_mut());
    }
    /// Make the tensor a view of `src` (ggml-alloc does this to a node it
    /// computes in place in its source's memory).
    pub fn set_view_src(self, src: TensorRef<'a>) {
        write_field!(self.p(), view_src = src.as_ptr());
    }
    /// Same type, ne and nb (the original's `wsp_ggml_are_same_layout`).
    #[inline]
    pub fn same_layout(self, other: TensorRef<'_>) -> bool {
        // (every field compared without a branch: the placement asks this
        // of nearly every node, and a reuse asks it again)
        let (ane, bne, anb, bnb) = (self.ne(), other.ne(), self.nb(), other.nb());
        let mut diff = (self.type_() ^ other.type_()) as u64;
        for i in 0..4 {
            diff |= (ane[i] ^ bne[i]) as u64 | (anb[i] ^ bnb[i]) as u64;
        }
        diff == 0
    }
    /// Set `buffer` and `data`, as `wsp_ggml_tallocr_alloc` does. Only the
    /// buffer handle places tensors (`BufferRef::place`, which checks that
    /// the tensor lies inside the buffer).
    pub(crate) fn set_placement(self, buffer: *mut wsp_ggml_backend_buffer, data: *mut c_void) {
        write_field!(self.p(), buffer = buffer);
        write_field!(self.p(), data = data);
    }
    /// Rewrite this tensor (one of the scheduler's own) as a fresh,
    /// unallocated tensor with `src`'s type and memory layout, no sources,
    /// and the given name (cut to 63 bytes as ggml does): what the original
    /// made with `wsp_ggml_dup_tensor` + copying `nb`.
    pub fn reset_as_layout_of(self, src: TensorRef<'_>, name: &[u8]) {
        let mut t = zeroed_tensor();
        t.type_ = src.type_();
        t.n_dims = src.n_dims();
        // (built apart and stored whole: the struct is packed on 32-bit Arm)
        let (src_ne, mut ne) = (src.ne(), [1i64; WSP_GGML_MAX_DIMS]);
        for (i, n) in ne.iter_mut().enumerate() {
            if (i as c_int) < t.n_dims {
                *n = src_ne[i];
            }
        }
        t.ne = ne;
        t.nb = src.nb();
        let n = name.len().min(WSP_GGML_MAX_NAME - 1);
        for (d, &b) in t.name.iter_mut().zip(&name[..n]) {
            *d = b as c_char;
        }
        // SAFETY: TensorRef invariant; a whole-struct write through the raw
        // pointer, no reference made.
        unsafe { self.p().write_unaligned(t) }
    }
}

/// A tensor's name, copied out of the tensor (64 bytes, NUL-terminated).
#[derive(Clone, Copy)]
pub struct Name([u8; WSP_GGML_MAX_NAME]);

impl Name {
    /// The bytes before the first NUL.
    /// All 64 bytes, NUL and what follows it included.
    pub fn raw(&self) -> &[u8; WSP_GGML_MAX_NAME] {
        &self.0
    }

    pub fn bytes(&self) -> &[u8] {
        // (core's NUL search: an iterator's was unrolled into a kilobyte of
        // code every app would carry)
        CStr::from_bytes_until_nul(&self.0).map_or(&self.0[..], CStr::to_bytes)
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

/// A graph handed to us by C, for the call that received it (same
/// contract as [`TensorRef`]): its node and leaf arrays hold `n_nodes` and
/// `n_leafs` entries, each NULL or a live tensor, for `'a`. Read by value,
/// entry by entry: no reference into the graph's arrays is made.
#[derive(Clone, Copy)]
pub struct GraphRef<'a>(NonNull<wsp_ggml_cgraph>, Call<'a>);

impl<'a> GraphRef<'a> {
    /// The handle on `ptr`; `None` for NULL.
    ///
    /// # Safety
    /// `ptr` is NULL or points to a live `wsp_ggml_cgraph` whose `nodes` and
    /// `leafs` arrays (when not NULL) hold `n_nodes` and `n_leafs` entries,
    /// each NULL or a live tensor; all of it stays live, and is not mutated
    /// concurrently by others, for `'a`.
    pub unsafe fn new(ptr: *mut wsp_ggml_cgraph) -> Option<Self> {
        NonNull::new(ptr).map(|p| GraphRef(p, PhantomData))
    }
    #[inline(always)]
    fn p(self) -> *mut wsp_ggml_cgraph {
        self.0.as_ptr()
    }
    /// Entry `i` of the array at `list` holding `n` entries (`None`: out of
    /// bounds or NULL).
    #[inline(always)]
    fn entry(self, list: *mut *mut wsp_ggml_tensor, n: c_int, i: usize) -> Option<TensorRef<'a>> {
        if list.is_null() || i >= n.max(0) as usize {
            return None;
        }
        // SAFETY: GraphRef invariant: `n` entries at `list` (i < n checked);
        // by-value read. Each entry is NULL or a live tensor, live for 'a.
        unsafe { TensorRef::new(list.add(i).read()) }
    }
    #[inline(always)]
    pub fn n_nodes(self) -> usize {
        read_field!(self.p(), n_nodes).max(0) as usize
    }
    #[inline(always)]
    pub fn n_leafs(self) -> usize {
        read_field!(self.p(), n_leafs).max(0) as usize
    }
    /// Node `i` as stored (`None`: a NULL entry, or `i >= n_nodes`).
    #[inline(always)]
    pub fn node_entry(self, i: usize) -> Option<TensorRef<'a>> {
        self.entry(read_field!(self.p(), nodes), read_field!(self.p(), n_nodes), i)
    }
    pub fn nodes(self) -> impl Iterator<Item = TensorRef<'a>> {
        self.node_entries().flatten()
    }
    /// The nodes as stored, as handles (`None`: a NULL entry).
    #[inline]
    pub fn node_entries(self) -> impl Iterator<Item = Option<TensorRef<'a>>> {
        let (list, n) = (read_field!(self.p(), nodes), read_field!(self.p(), n_nodes));
        (0..n.max(0) as usize).map(move |i| self.entry(list, n, i))
    }
    /// The leafs as stored, as handles (`None`: a NULL entry).
    #[inline]
    pub fn leaf_entries(self) -> impl Iterator<Item = Option<TensorRef<'a>>> {
        let (list, n) = (read_field!(self.p(), leafs), read_field!(self.p(), n_leafs));
        (0..n.max(0) as usize).map(move |i| self.entry(list, n, i))
    }
    /// Node `i`, which must exist and not be NULL.
    pub fn node(self, i: usize) -> TensorRef<'a> {
        self.node_entry(i).unwrap_or_else(|| crate::fatal::fatal("graph", &format!("node {i} is NULL or missing")))
    }
    pub fn order(self) -> c_int {
        read_field!(self.p(), order)
    }
    pub fn as_ptr(self) -> *mut wsp_ggml_cgraph {
        self.0.as_ptr()
    }
}

/// A run of consecutive nodes of a live graph, as a graph struct of its own
/// (what a split hands a backend's `graph_compute`). Made from a
/// [`GraphRef`] within its bounds, and valid as long as that graph: `'a`.
#[derive(Clone, Copy)]
pub struct GraphView<'a>(wsp_ggml_cgraph, Call<'a>);

impl<'a> GraphRef<'a> {
    /// Nodes `start..end` (`end <= n_nodes`) as a graph view.
    pub fn view(self, start: usize, end: usize) -> GraphView<'a> {
        assert!(start <= end && end <= self.n_nodes(), "a view inside the graph");
        let (nodes, grads) = (read_field!(self.p(), nodes), read_field!(self.p(), grads));
        // (in bounds, so the offsets stay inside the node and gradient
        // arrays: wrapping_add computes the same address without unsafe)
        let nodes = nodes.wrapping_add(start);
        let grads = if grads.is_null() { grads } else { grads.wrapping_add(start) };
        GraphView(wsp_ggml_cgraph::of_nodes(nodes, grads, end - start, 0, self.order()), PhantomData)
    }
}

impl<'a> GraphView<'a> {
    pub fn n_nodes(&self) -> usize {
        self.0.n_nodes.max(0) as usize
    }

    /// Node `j` (`j < n_nodes`).
    pub fn node(&self, j: usize) -> TensorRef<'a> {
        assert!(j < self.n_nodes(), "a node of the view");
        // SAFETY: j < n_nodes of a view inside a live graph (`GraphRef::view`),
        // whose entries are NULL or live tensors, live for 'a.
        let p = unsafe { self.0.nodes.add(j).read() };
        // SAFETY: as above.
        unsafe { TensorRef::new(p) }.unwrap_or_else(|| crate::fatal::fatal("graph", &format!("node {j} is NULL")))
    }

    /// Nodes `j0..j1` of this view (`j1 <= n_nodes`).
    pub fn sub(&self, j0: usize, j1: usize) -> GraphView<'a> {
        assert!(j0 <= j1 && j1 <= self.n_nodes(), "a view inside the view");
        let mut v = self.0;
        v.nodes = v.nodes.wrapping_add(j0);
        v.grads = if v.grads.is_null() { v.grads } else { v.grads.wrapping_add(j0) };
        v.n_nodes = (j1 - j0) as c_int;
        v.size = v.n_nodes;
        GraphView(v, PhantomData)
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

/// Tensor structs of ours on the heap, at fixed addresses (ggml, the
/// backends and the caller's graph reach them there): the scheduler's
/// input copies. A handle on one lives as long as the shared borrow of the
/// set it came from: tensors are freed only by dropping the set. Handed
/// out all zero ([`HeapTensors::fresh`]); written through their handles.
#[derive(Default)]
pub struct HeapTensors {
    tensors: core::cell::RefCell<Vec<NonNull<wsp_ggml_tensor>>>,
}

impl HeapTensors {
    /// The identity of tensor `c`, if made (compared, never dereferenced).
    pub fn id(&self, c: usize) -> Option<TensorId> {
        self.tensors.borrow().get(c).map(|p| TensorId::of_ptr(p.as_ptr()).expect("not NULL"))
    }

    /// Tensor `c` made anew (all zero; made when `c` is the next one,
    /// `c <= len`): no handle ever reads what an earlier call left in it.
    pub fn fresh(&self, c: usize) -> TensorRef<'_> {
        let mut tensors = self.tensors.borrow_mut();
        if c == tensors.len() {
            tensors.push(NonNull::from(Box::leak(Box::new(zeroed_tensor()))));
        }
        let p = tensors[c].as_ptr();
        // SAFETY: made by Box::leak, here or earlier, and freed only when
        // the set drops, which the handle's borrow of `self` rules out; a
        // whole-struct write through the raw pointer, no reference made.
        unsafe {
            p.write(zeroed_tensor());
            TensorRef::new(p).expect("not NULL")
        }
    }
}

impl Drop for HeapTensors {
    fn drop(&mut self) {
        for t in self.tensors.get_mut().drain(..) {
            // SAFETY: made by Box::leak in `get_or_make`; freed once, here.
            drop(unsafe { Box::from_raw(t.as_ptr()) });
        }
    }
}

/// Test handles, for the unit tests of modules without `unsafe`.
#[cfg(test)]
impl<'a> TensorRef<'a> {
    /// The handle on a tensor the test keeps alive (and does not move) for
    /// as long as it uses the handle.
    pub(crate) fn of_test(t: &'a mut wsp_ggml_tensor) -> TensorRef<'a> {
        TensorRef(NonNull::from(t), PhantomData)
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
