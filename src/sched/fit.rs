//! Compute buffers that always fit the split about to be allocated.
//!
//! `init_measure` sizes each backend's compute buffer for the measure graph.
//! A later split can need more: a larger graph, nodes that `set_node_backend`
//! or a `supports_op` rejection moved to another backend. ggml-alloc would
//! then stop the process inside `wsp_ggml_tallocr_alloc` ("not enough space
//! in the buffer"). So every split made anew is measured first, by ggml-alloc
//! itself, over stand-in buffers that hold no memory, and a compute buffer
//! that is too small is replaced by a larger one before the real allocation.
//!
//! The replaced allocator is *retired*, not freed: a caller may still hold it
//! (`sched_get_tallocr`) or have tensors in its buffer, and both stay valid
//! until the next `init_measure`/`reserve` or `sched_free`. Buffers grow by at
//! least half their size, so retired memory stays below twice the current.

use core::cell::RefCell;
use core::ffi::c_void;

use super::talloc_model::{self, Op};
use super::Sched;
use crate::buffer::{buffer_init, wsp_ggml_backend_buffer_i, wsp_ggml_backend_buffer_t, BufferRef};
use super::table;
use crate::fatal::fatal;
use crate::ggml::{self, wsp_ggml_tallocr_t, wsp_ggml_tensor, GraphRef, Placement, TensorRef};

/// Where stand-in memory starts (plus the real base's misalignment): never
/// dereferenced, only offset from.
const STAND_IN_BASE: usize = 1 << 24;

/// A stand-in's `context`: the compute buffer it stands in for, and the
/// block that reproduces what the caller already allocated in it.
struct StandIn {
    real: BufferRef,
    held: wsp_ggml_tensor,
    held_size: usize,
    /// The allocator's calls, in order (see talloc_model.rs).
    ops: RefCell<Vec<Op>>,
}

impl StandIn {
    /// The size ggml-alloc uses for `t` here: the real buffer's, padded to
    /// its alignment (what `wsp_ggml_tallocr_alloc` and `_free_tensor` do).
    fn padded_size(&self, t: *mut wsp_ggml_tensor) -> usize {
        let size = if core::ptr::eq(t, &self.held) { self.held_size } else { TensorRef::new(t).map_or(0, |t| self.real.alloc_size(t)) };
        let align = self.real.alignment().max(1);
        size.div_ceil(align).saturating_mul(align)
    }
}

/// A stand-in for a backend's compute buffer: no memory, the real buffer's
/// allocation sizes; its tensor callbacks record the allocator's calls.
static STAND_IN_I: wsp_ggml_backend_buffer_i = wsp_ggml_backend_buffer_i {
    free_buffer: None,
    get_base: Some(stand_in_get_base),
    get_alloc_size: Some(stand_in_get_alloc_size),
    init_tensor: Some(stand_in_init_tensor),
    free_tensor: Some(stand_in_free_tensor),
};

/// ggml-alloc initialises a tensor it allocated (or a view it placed).
unsafe extern "C" fn stand_in_init_tensor(buffer: wsp_ggml_backend_buffer_t, tensor: *mut wsp_ggml_tensor) {
    crate::fatal::guard("wsp_ggml_backend_sched_graph_compute", || {
        // SAFETY: as in stand_in_get_base; `tensor` is live (ggml-alloc's call).
        let stand_in = unsafe { &*(*buffer).context.cast::<StandIn>() };
        if TensorRef::new(tensor).is_some_and(|t| t.view_src().is_none()) {
            let size = stand_in.padded_size(tensor);
            stand_in.ops.borrow_mut().push(Op::Alloc { tensor: tensor as usize, size });
        }
    })
}

/// ggml-alloc frees a tensor of this buffer.
unsafe extern "C" fn stand_in_free_tensor(buffer: wsp_ggml_backend_buffer_t, tensor: *mut wsp_ggml_tensor) {
    crate::fatal::guard("wsp_ggml_backend_sched_graph_compute", || {
        // SAFETY: as in stand_in_init_tensor.
        let stand_in = unsafe { &*(*buffer).context.cast::<StandIn>() };
        let Some(t) = TensorRef::new(tensor) else { return };
        let base = stand_in_base(stand_in);
        let offset = (t.data() as usize).wrapping_sub(base);
        let size = stand_in.padded_size(tensor);
        stand_in.ops.borrow_mut().push(Op::Free { tensor: tensor as usize, offset, size });
    })
}

fn stand_in_base(stand_in: &StandIn) -> usize {
    STAND_IN_BASE + stand_in.real.base() as usize % STAND_IN_BASE
}

unsafe extern "C" fn stand_in_get_base(buffer: wsp_ggml_backend_buffer_t) -> *mut c_void {
    // SAFETY: ggml-alloc calls this on our stand-in, whose context is a live StandIn.
    let stand_in = unsafe { &*(*buffer).context.cast::<StandIn>() };
    stand_in_base(stand_in) as *mut c_void
}

unsafe extern "C" fn stand_in_get_alloc_size(buffer: wsp_ggml_backend_buffer_t, tensor: *mut wsp_ggml_tensor) -> usize {
    crate::fatal::guard("wsp_ggml_backend_sched_graph_compute", || {
        // SAFETY: as in stand_in_get_base.
        let stand_in = unsafe { &*(*buffer).context.cast::<StandIn>() };
        if core::ptr::eq(tensor, &stand_in.held) {
            return stand_in.held_size;
        }
        TensorRef::new(tensor).map_or(0, |t| stand_in.real.alloc_size(t))
    })
}

/// Marks, while the allocator table is filled, where the inert allocator
/// goes before it is made (never dereferenced).
const INERT_PENDING: wsp_ggml_tallocr_t = core::ptr::NonNull::<ggml::wsp_ggml_tallocr>::dangling().as_ptr();

/// The inert allocator's buffer: no memory, no size, no tensor callbacks.
/// Its context is its base (the backend's alignment, so aligned).
static INERT_I: wsp_ggml_backend_buffer_i = wsp_ggml_backend_buffer_i {
    free_buffer: None,
    get_base: Some(inert_get_base),
    get_alloc_size: None,
    init_tensor: None,
    free_tensor: None,
};

unsafe extern "C" fn inert_get_base(buffer: wsp_ggml_backend_buffer_t) -> *mut c_void {
    // SAFETY: ggml-alloc calls this on our inert buffer.
    unsafe { (*buffer).context }
}

/// What a measure over stand-ins found for one compute buffer.
struct Measured {
    /// What the caller holds of the real buffer (see `occupied`).
    held: usize,
    /// How far into the buffer ggml-alloc went (from its base).
    need: usize,
    /// The allocator's calls, to replay against the real size.
    ops: Vec<Op>,
    /// Where the real allocator's space starts and ends (from its base).
    start: usize,
    end: usize,
}

impl Measured {
    /// Whether the real allocation fits: the calls recorded over the
    /// stand-in, replayed against the real end. ggml-alloc's choices over a
    /// buffer with an end can differ from those over one without: a buffer
    /// of exactly the measured size can fail (the original's compute fails
    /// that way on some graphs), and so can a larger one, when a tensor left
    /// in the buffer by an earlier compute is freed past the start of the
    /// last free block and becomes the last block.
    fn fits(&self) -> bool {
        talloc_model::replay_fits(&self.ops, self.start, self.end)
    }
}

/// A buffer size for a split that needs `need` bytes: one alignment unit
/// more (then the last free block never runs out; the fit is checked again
/// all the same).
fn size_for(need: usize, backend: crate::backend::BackendRef) -> usize {
    need.saturating_add(backend.alignment().max(1))
}

impl Sched {
    /// Measure the split just made and grow the compute buffers too small
    /// for it. Where a backend cannot allocate a larger buffer, the compute
    /// falls back to the assignment without `set_node_backend` (what the
    /// original computes); if even that does not fit, it stops with a message.
    pub(super) fn ensure_fits(&mut self, graph: GraphRef, func: &str) {
        let mut grown = vec![false; self.tallocs.len()];
        // A buffer that grew starts empty (the caller's inputs stay in the
        // old one), so ggml-alloc's choices change: measure again. The second
        // measure fits or names a final size (an empty buffer's need does
        // not depend on its size), so this ends by the third; a fall-back
        // starts over once.
        for _ in 0..8 {
            let measured = self.measure_over_stand_ins(graph);
            let fit: Vec<bool> = measured.iter().map(Measured::fits).collect();
            if self.debug {
                let show = |f: &dyn Fn(&Measured) -> usize| measured.iter().map(f).collect::<Vec<_>>();
                eprintln!(
                    "wsp_ggml_backend_sched: fit check: the caller holds {:?}, the split needs {:?} of {:?} bytes: fits {fit:?}",
                    show(&|m| m.held),
                    show(&|m| m.need),
                    show(&|m| m.end)
                );
            }
            if fit.iter().all(|&f| f) {
                self.fit_for = Some(measured.iter().map(|m| m.held).collect());
                return;
            }
            for (i, m) in measured.iter().enumerate() {
                if fit[i] {
                    continue;
                }
                if self.grow(i, m.need, grown[i]) {
                    grown[i] = true;
                } else if !self.user.is_empty() {
                    if self.debug {
                        eprintln!(
                            "wsp_ggml_backend_sched: '{}' cannot allocate a larger compute buffer: set_node_backend is not applied in this compute",
                            self.backends[i].name_lossy()
                        );
                    }
                    self.user.clear();
                    self.st.unpatch();
                    self.split_graph(graph, func);
                    break;
                } else {
                    fatal(
                        func,
                        &format!(
                            "this graph needs a compute buffer of {} bytes on backend '{}' (it has {}), and the backend could not allocate one",
                            m.need,
                            self.backends[i].name_lossy(),
                            m.end
                        ),
                    );
                }
            }
        }
        unreachable!("the compute buffers fit the split after growing twice");
    }

    /// Replace compute buffer `i` by one that fits `need`, at least half
    /// again as large; false if the backend cannot allocate it. The old
    /// allocator is retired (the caller may hold it, or tensors in it),
    /// unless this compute made it (`made_here`).
    fn grow(&mut self, i: usize, need: usize, made_here: bool) -> bool {
        let size = size_for(need, self.backends[i]).max(self.buffer_sizes[i].saturating_add(self.buffer_sizes[i] / 2));
        if self.debug {
            eprintln!(
                "wsp_ggml_backend_sched: compute buffer of '{}' grows from {} to {size} bytes for this split",
                self.backends[i].name_lossy(),
                self.buffer_sizes[i]
            );
        }
        // Allocated here, not by ggml-alloc, which would dereference a NULL
        // buffer; so the allocator does not own it (see free_talloc).
        let Some(buffer) = BufferRef::new(self.backends[i].alloc_buffer(size)) else {
            return false;
        };
        // SAFETY: a live buffer of ours, freed after its allocator.
        let new = unsafe { ggml::wsp_ggml_tallocr_new_from_buffer(buffer.as_ptr()) };
        self.grown_buffers.push(buffer);
        let old = std::mem::replace(&mut self.tallocs[i], new);
        if made_here {
            // made by this compute's previous growth, never handed out,
            // holds no tensor after alloc_and_undo
            self.free_talloc(old);
        } else {
            self.retired.push(old);
        }
        self.buffer_sizes[i] = size;
        true
    }

    /// Free one of our allocators, and its buffer if growth allocated it.
    pub(super) fn free_talloc(&mut self, t: wsp_ggml_tallocr_t) {
        // SAFETY: our live allocator, freed once.
        let buffer = unsafe { ggml::wsp_ggml_tallocr_get_buffer(t) };
        unsafe { ggml::wsp_ggml_tallocr_free(t) };
        if let Some(k) = self.grown_buffers.iter().position(|b| b.as_ptr() == buffer) {
            self.grown_buffers.swap_remove(k).free();
        }
    }

    /// What the caller holds of each compute buffer, and how far into each
    /// ggml-alloc would go to allocate the split.
    ///
    /// The measure mirrors the real allocation: each stand-in starts with a
    /// block as large as what the caller allocated in the real buffer, and
    /// the tensors in the real buffer are moved to the same offsets in the
    /// stand-in for the duration (ggml-alloc computes in place on, and frees,
    /// the tensors of its own buffer).
    fn measure_over_stand_ins(&mut self, graph: GraphRef) -> Vec<Measured> {
        let real = self.tallocs.clone();
        let mut stand_ins = Vec::with_capacity(real.len());
        let held: Vec<usize> = (0..real.len()).map(|i| self.occupied(i)).collect();
        for (i, &t) in real.iter().enumerate() {
            // SAFETY: our live allocator.
            let buffer = BufferRef::new(unsafe { ggml::wsp_ggml_tallocr_get_buffer(t) }).expect("an allocator has a buffer");
            let held_size = held[i];
            let ctx = Box::into_raw(Box::new(StandIn { real: buffer, held: ggml::zeroed_tensor(), held_size, ops: RefCell::default() }));
            let b = buffer_init(self.backends[i].as_ptr(), STAND_IN_I, ctx.cast(), usize::MAX / 2);
            // SAFETY: an allocator over our stand-in (it does not own it), freed below.
            let talloc = unsafe { ggml::wsp_ggml_tallocr_new_from_buffer(b.as_ptr()) };
            let align = buffer.alignment().max(1);
            let start = (align - buffer.base() as usize % align) % align;
            if held_size > start {
                // SAFETY: `held` is a zeroed tensor (no data, no view) in our
                // live StandIn; the stand-in reports `held_size` for it.
                unsafe { (*ctx).held_size = held_size - start };
                unsafe { ggml::wsp_ggml_tallocr_alloc(talloc, &mut (*ctx).held) };
            }
            stand_ins.push((b, ctx, buffer, talloc));
        }
        // Tensors in the real buffers, moved to the stand-ins for the measure.
        let table = &self.st.table;
        let mut moved = Vec::new();
        for t in table.slots().map(|s| table.tensor(s)) {
            if let Some(&(b, _, buffer, _)) = stand_ins.iter().find(|s| s.2.as_ptr() == t.buffer()) {
                let offset = (t.data() as usize).wrapping_sub(buffer.base() as usize);
                let at = STAND_IN_BASE + buffer.base() as usize % STAND_IN_BASE + offset;
                moved.push((t, t.placement()));
                t.move_placement(b.as_ptr(), at as *mut c_void);
            }
        }
        self.tallocs = stand_ins.iter().map(|s| s.3).collect();
        let needs = self.alloc_and_undo(graph);
        for (t, p) in moved {
            t.restore_placement(p);
        }
        let mut measured = Vec::with_capacity(stand_ins.len());
        for ((b, ctx, buffer, talloc), (held, need)) in stand_ins.into_iter().zip(held.into_iter().zip(needs)) {
            // SAFETY: our allocator, freed once; then its stand-in (no
            // free_buffer) and the stand-in's context.
            unsafe { ggml::wsp_ggml_tallocr_free(talloc) };
            b.free();
            let stand_in = unsafe { Box::from_raw(ctx) };
            let align = buffer.alignment().max(1);
            let start = (align - buffer.base() as usize % align) % align;
            measured.push(Measured { held, need, ops: stand_in.ops.into_inner(), start, end: buffer.size() });
        }
        self.tallocs = real;
        measured
    }

    /// Whether the split, reused, still fits: it was checked since the last
    /// measure, and the caller holds exactly as much of each compute buffer
    /// as then (where the graph's own tensors are is in the reuse check's
    /// `AllocFacts`; more held, or less, changes ggml-alloc's placements).
    pub(super) fn fits_as_before(&self) -> bool {
        self.fit_for.as_ref().is_some_and(|held| held.iter().enumerate().all(|(i, &h)| self.occupied(i) == h))
    }

    /// Allocate the split graph with the current allocators (measure or
    /// stand-in), read how much each one used, and undo every placement
    /// ggml-alloc made on the tensors it was given.
    pub(super) fn alloc_and_undo(&mut self, graph: GraphRef) -> Vec<usize> {
        let table = &self.st.table;
        let mut unplaced: Vec<(TensorRef, Placement)> = Vec::with_capacity(table.len());
        unplaced.extend(table.slots().map(|s| table.tensor(s)).filter(|t| t.buffer().is_null()).map(|t| (t, t.placement())));
        self.alloc_splits(graph);
        for &(t, p) in &unplaced {
            t.restore_placement(p);
        }
        // SAFETY: our live allocators.
        self.tallocs.iter().map(|&t| unsafe { ggml::wsp_ggml_tallocr_max_size(t) }).collect()
    }

    /// Bytes at the start of backend `i`'s compute buffer that the caller
    /// already holds (inputs allocated through `sched_get_tallocr` since the
    /// last reset): ggml-alloc places the split after them.
    pub(super) fn occupied(&self, i: usize) -> usize {
        let talloc = self.tallocs[i];
        // SAFETY: our live allocator.
        let Some(buffer) = BufferRef::new(unsafe { ggml::wsp_ggml_tallocr_get_buffer(talloc) }) else {
            return 0;
        };
        // Exact: where the allocator's free space starts. It also counts
        // what the caller allocated there for tensors this graph does not use.
        if let Some(used) = ggml::tallocr_free_tail(talloc) {
            return used;
        }
        // Another ggml-alloc: what the graph shows.
        let base = buffer.base() as usize;
        let align = buffer.alignment().max(1);
        // ggml-alloc starts at the first aligned address of the buffer
        let start = (align - base % align) % align;
        // Inputs, not nodes: a node with memory there is left from an earlier
        // compute, in memory the allocator considers free again.
        let st = &self.st;
        let inputs = st.leafs.iter().map(|l| l[0]).chain(st.reuse.unlisted.iter().map(|u| u.0));
        inputs
            .map(|s| st.table.tensor(s))
            .filter(|t| t.buffer() == buffer.as_ptr() && t.view_src().is_none())
            .map(|t| {
                // ggml-alloc pads sizes, not addresses
                let size = buffer.alloc_size(t).div_ceil(align).saturating_mul(align);
                (t.data() as usize).saturating_sub(base).saturating_add(size)
            })
            .fold(start, usize::max)
    }

    /// Fill the table of allocators ggml-alloc uses for each tensor (for a
    /// new split, or new allocators), and check that every tensor ggml-alloc
    /// will allocate has one: it dereferences them unchecked.
    pub(super) fn fill_talloc(&mut self) {
        // A tensor with memory but no backend (plain host memory, or a
        // source no rule assigns) gets the inert allocator: ggml-alloc only
        // asks it whether the tensor is its own (never) before freeing it,
        // and initialises views of it. Without memory or backend: none.
        let mut talloc = Vec::with_capacity(self.st.table.info.len());
        let mut pending = false;
        for (info, &t) in self.st.table.info.iter().zip(self.st.table.keys()) {
            talloc.push(match info.assign {
                table::NO_BACKEND => match TensorRef::new(t).filter(|t| !t.data().is_null()) {
                    Some(_) if self.inert.is_null() => {
                        pending = true;
                        INERT_PENDING
                    }
                    Some(_) => self.inert,
                    None => core::ptr::null_mut(),
                },
                a => self.tallocs[a as usize],
            });
        }
        if pending {
            self.inert = self.new_inert();
            for t in talloc.iter_mut().filter(|t| **t == INERT_PENDING) {
                *t = self.inert;
            }
        }
        self.st.talloc = talloc;
        self.st.talloc_from.clone_from(&self.tallocs);
        self.check_talloc();
    }

    /// Every tensor ggml-alloc will allocate (graph nodes and their sources
    /// without memory) has an allocator: the passes assign all of them, or
    /// stop with a message, so this only guards against a gap in them.
    fn check_talloc(&self) {
        let st = &self.st;
        let unallocatable = |slot: u32| st.talloc[slot as usize].is_null() && st.table.tensor(slot).data().is_null();
        // The owners of views copied as inputs are allocated with the copy.
        let owners = st.inputs.iter().map(|&(slot, _)| st.table.info[slot as usize].vsrc).filter(|&v| v != super::NONE);
        let bad = st.nodes.iter().map(|n| n.slot).chain(st.srcs.iter().copied()).chain(owners).find(|&s| unallocatable(s));
        if let Some(slot) = bad {
            let t = st.table.tensor(slot);
            fatal("wsp_ggml_backend_sched_graph_compute", &format!("tensor '{}' has no memory and no backend to allocate it on", t.name_lossy()));
        }
    }

    /// A ggml-alloc allocator over an inert buffer (no memory, size 0).
    fn new_inert(&self) -> wsp_ggml_tallocr_t {
        // get_alignment is asked of the buffer's backend; its base is the
        // alignment itself, so aligned, and never dereferenced.
        let backend = self.backends[0];
        let base = backend.alignment().max(1) as *mut c_void;
        let b = buffer_init(backend.as_ptr(), INERT_I, base, 0);
        // SAFETY: an allocator over our inert buffer (it does not own it);
        // both are freed by free_inert.
        unsafe { ggml::wsp_ggml_tallocr_new_from_buffer(b.as_ptr()) }
    }

    /// Free the inert allocator and its buffer, if made.
    pub(super) fn free_inert(&mut self) {
        if self.inert.is_null() {
            return;
        }
        // SAFETY: our inert allocator, freed once (it does not own its buffer).
        let buffer = unsafe { ggml::wsp_ggml_tallocr_get_buffer(self.inert) };
        unsafe { ggml::wsp_ggml_tallocr_free(self.inert) };
        self.inert = core::ptr::null_mut();
        if let Some(b) = BufferRef::new(buffer) {
            b.free();
        }
    }

    /// Free the allocators that growth replaced.
    pub(super) fn free_retired(&mut self) {
        for t in std::mem::take(&mut self.retired) {
            self.free_talloc(t);
        }
    }
}
