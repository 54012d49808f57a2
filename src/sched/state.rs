//! The scheduler's state: what one split of one graph is made of, and the
//! `Sched` that holds it with its backends (the types the passes, the
//! placement and the driver share; the driver is mod.rs).

use crate::prelude::*;

use super::galloc;
use super::ids::{self, BackendIdx, Rule, Slot};
use super::live::{Live, Room};
use super::plan::place::Order;
use super::plan::{CopyOf, GraphSlots, Patch, SlotInfo, SplitPlan};
use super::record;
use super::table;
use crate::ggml::{self, EvalCallback, HeapTensors, TensorRef};
use crate::handle::BackendRef;
use crate::ptrmap::PtrMap;
use crate::talloc::Tallocr;

/// The graph sources a split redirects to its input copies, for one call:
/// (node, source index, original source) of each. Dropped while they are
/// redirected, it gives the graph its sources back: the caller's graph
/// never keeps pointers into the scheduler's copies past the call.
pub(super) struct Redirections<'c> {
    applied: Vec<(TensorRef<'c>, usize, TensorRef<'c>)>,
}

impl<'c> Redirections<'c> {
    /// None yet; the memory comes from `room`.
    pub(super) fn new(room: &mut Room<[usize; 3]>) -> Self {
        Redirections { applied: room.take() }
    }

    /// Give the graph its sources back and the memory to `room`.
    pub(super) fn end(mut self, room: &mut Room<[usize; 3]>) {
        self.unpatch();
        room.put(core::mem::take(&mut self.applied));
    }

    /// Point the graph's sources at their input copies as `patches` says
    /// (sources' slots in `srcs`, the tensors in `live`).
    pub(super) fn apply(&mut self, patches: &[Patch], srcs: &[Slot], copy_slots: &[Slot], live: &Live<'c>) {
        debug_assert!(self.applied.is_empty(), "applied once");
        self.applied.reserve_exact(patches.len());
        for p in patches {
            let (node, original) = (live.get(p.node), live.get(srcs[p.k as usize]));
            let copy = live.get(copy_slots[p.copy.index()]);
            node.set_src(p.j, Some(copy));
            self.applied.push((node, p.j, original));
        }
    }

    /// Give the graph its sources back (nothing if they are not redirected).
    pub(super) fn unpatch(&mut self) {
        for (node, j, original) in self.applied.drain(..).rev() {
            node.set_src(j, Some(original));
        }
    }
}

impl Drop for Redirections<'_> {
    fn drop(&mut self) {
        self.unpatch();
    }
}

/// One split of one graph, in three stages (`make_split`, mod.rs):
/// - **snapshot** (probe.rs, `Registrar`): every tensor the passes or the
///   allocation touch gets a table slot, with what the passes read of it
///   (`table.info`: location, flags, view source); `graph` gives the
///   graph's structure in slots;
/// - **plan** (the passes, sched/plan, sealed from C: they ask the rest
///   through a `Probe`, whose C implementation logs the answers in
///   `reuse`): a backend and rule per slot of the graph (`table.info`) and
///   `plan`: the splits, their inputs, the copies they need and the graph
///   sources to redirect;
/// - **apply** (here): the copies made and registered after the graph's
///   tensors (`copy_slots`), the allocation's walk (`order`) built, the
///   splits' statistics (`runs`) sized; the sources are patched for the
///   call (`Redirections`), the placement (galloc.rs) follows, and after
///   the compute the patches are undone.
///
/// Each stage writes only its own part: what registration read is written
/// by registration only, nothing writes the plan afterwards, and applying
/// it produces its own values (an input copy's backend and rule are its
/// copy's in the plan: [`State::decision`] is the one answer for a slot).
///
/// Invariants, between a split (`Sched::split`) and the end of the compute:
/// - every slot named anywhere here is registered in `table`; a tensor of
///   the graph without a backend has `assign: None` (table.rs);
/// - `copy_slots[c]` is the slot of copy `c`, and no other copy's;
/// - `nodes[i]` is graph node i; its sources' slots are
///   `srcs[nodes[i-1].srcs_end .. nodes[i].srcs_end]` (up to the first NULL);
/// - `splits` tile the node range in order; `inputs[split.inputs]` are the
///   split's (input slot, copy index), each copy once per split;
/// - `copy_of[c]` describes `copies[c]` for every copy in use, and
///   `copy_index` maps (slot, backend) to it;
/// - `redirected` is applied exactly while the graph's sources point at
///   copies.
///
/// Kept between computes: when the next graph is the same (every record
/// equal, see reuse.rs) the split is reused instead of made again.
#[derive(Default)]
pub(super) struct State {
    pub(super) table: table::Table,
    /// The graph in slots (the snapshot).
    pub(super) graph: GraphSlots,
    /// What the passes decided besides each slot's backend.
    pub(super) plan: SplitPlan,
    /// `set_node_backend` assignments of the split's tensors, by slot
    /// (resolved at registration, for the planner).
    pub(super) user_slots: PtrMap,
    /// The table slot of each input copy (`plan.copy_of`'s order).
    pub(super) copy_slots: CopySlots,
    /// Per split: what its last compute did.
    pub(super) runs: Vec<SplitStats>,
    /// The walk of the split's allocation (galloc.rs).
    pub(super) order: Order,
    /// How the next table is sized (table.rs).
    pub(super) sizing: table::Sizing,
    /// The record of every tensor the split read, and the supports_op
    /// answers it used, to know whether it still holds (see reuse.rs).
    pub(super) reuse: record::Record,
}

/// What the last compute did on one split.
#[derive(Clone, Copy, Debug, Default)]
pub struct SplitStats {
    pub bytes_copied: usize,
}

/// What the last compute did on one backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct BackendStats {
    pub n_splits: u32,
    pub n_copies: u32,
    pub bytes_copied: usize,
    /// Summed in nanoseconds (per-split microseconds would truncate).
    pub copy_ns: u64,
    pub compute_ns: u64,
}

/// Nanoseconds from `from` to `to` (platform::now_ns readings).
pub(super) fn nanos(from: u64, to: u64) -> u64 {
    to.saturating_sub(from)
}

/// What the scheduler keeps for one of its backends.
pub(super) struct BackendRecord {
    pub(super) backend: BackendRef<'static>,
    /// Whether it accepts every op (our CPU backend, or one whose
    /// `supports_op` slot is NULL, as CUDA's), known at `sched_new`: its
    /// `supports_op` is never asked.
    pub(super) accepts_all: bool,
    /// Its compute allocator (a measure allocator before the first measure).
    pub(super) talloc: Tallocr<'static>,
    /// Compute allocators that growth replaced during computes (fit.rs),
    /// alive until the next measure or `sched_free`: the caller may hold
    /// one, or tensors in its buffer.
    pub(super) retired: Vec<Tallocr<'static>>,
    /// Compute buffer size requested at the last measure/reserve or growth.
    pub(super) buffer_size: usize,
    /// How far the splits placed since the last measure went into the
    /// compute buffers (ggml-alloc's `max_size` of the original's real
    /// allocator, less what the caller allocated: `Tallocr::max_size`
    /// counts that).
    pub(super) reached: usize,
    /// What the last compute did on it.
    pub(super) stats: BackendStats,
}

impl BackendRecord {
    pub(super) fn new(backend: BackendRef<'static>) -> BackendRecord {
        BackendRecord {
            backend,
            accepts_all: crate::cpu::is_cpu(backend) || !backend.has_supports_op(),
            talloc: Tallocr::measure(backend),
            retired: Vec::new(),
            buffer_size: 0,
            reached: 0,
            stats: BackendStats::default(),
        }
    }
}

/// Where a scheduler is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Phase {
    /// Made, never measured: a compute is refused, buffer sizes are 0.
    New,
    /// `init_measure`/`reserve` is planning (see `plan::Settings::measuring`).
    Measuring,
    /// Measured: compute buffers exist.
    Ready,
}

pub struct Sched {
    /// The backends in priority order, one record each.
    pub(super) backends: Vec<BackendRecord>,
    /// The same backends, and whether each accepts every op: what
    /// registration, the probe and the passes read, made once.
    pub(super) refs: Vec<BackendRef<'static>>,
    pub(super) accepts_all: Vec<bool>,
    /// The compute buffers as the placement sees them, described again for
    /// every plan in the same memory (fit.rs).
    pub(super) arena_specs: Vec<super::plan::place::ArenaSpec>,
    /// Which compute buffers grew in this compute (mod.rs, `place`).
    pub(super) grown: Vec<bool>,
    pub(super) phase: Phase,
    /// The split's allocation (galloc.rs), kept for its memory.
    pub(super) galloc: galloc::Galloc,
    pub(super) debug: bool,
    /// set_node_backend assignments, honoured until the end of the next compute.
    pub(super) user: PtrMap,
    pub(super) eval_callback: Option<EvalCallback>,
    /// The host buffer of split input copies between two backends that
    /// copy only through get + set, kept between computes (taken out while
    /// a copy runs: the backends' callbacks may read the scheduler).
    pub(super) staging: core::cell::Cell<Vec<u8>>,
    /// The memory of each call's own state ([`super::CallState`]).
    pub(super) rooms: Rooms,
    /// Splits made (not reused) since `sched_new`: what the driver's tests
    /// observe of reuse and of the fallback re-split.
    pub(super) splits_made: u64,
    pub(super) st: State,
}

/// The memory of a call's handles and redirections, kept between calls.
#[derive(Default)]
pub(super) struct Rooms {
    pub(super) live: Room<Option<core::num::NonZeroUsize>>,
    pub(super) redirected: Room<[usize; 3]>,
}

impl Rooms {
    /// Room for a call on `tensors` tensors that redirects `patches`
    /// sources.
    pub(super) fn reserve(&mut self, tensors: usize, patches: usize) {
        self.live.reserve(tensors);
        self.redirected.reserve(patches);
    }

    /// Give the memory back.
    pub(super) fn release(&mut self) {
        self.live.release();
        self.redirected.release();
    }
}

/// The most backends one scheduler takes.
pub const MAX_BACKENDS: usize = ids::MAX_BACKENDS;

impl State {
    /// Forget the split (not the memory): the one way to clear it, before
    /// a new one and on `reset`. The sources must be given back first.
    pub(super) fn clear_split(&mut self) {
        self.reuse.clear();
        self.copy_slots.clear();
        self.graph.clear();
        self.plan.clear();
        self.user_slots.clear(0);
        self.runs.clear();
        self.order.clear();
    }

    /// The walk of the allocation (galloc.rs): each split's input copies,
    /// then its nodes, with their sources as ggml-alloc would see them
    /// (redirected to the copies).
    pub(super) fn build_order(&mut self, live: &Live) {
        let order = &mut self.order;
        debug_assert!(order.entries.is_empty() && order.srcs.is_empty(), "cleared with the split (clear_split)");
        // (exact: the scheduler holds it between computes)
        order.entries.reserve_exact(self.graph.nodes.len() + self.plan.inputs.len());
        order.srcs.reserve_exact(self.graph.srcs.len() + 2 * self.plan.inputs.len());
        // the nodes' sources in place (redirected where patched), then the copies'
        order.srcs.extend_from_slice(&self.graph.srcs);
        for p in &self.plan.patches {
            order.srcs[p.k as usize] = self.copy_slots[p.copy.index()];
        }
        for split in &self.plan.splits {
            for &(slot, copy) in &self.plan.inputs[split.inputs.clone()] {
                let start = order.srcs.len() as u32;
                order.srcs.extend(copy_sources(live.get(slot)).filter_map(|s| self.table.find(s.id())));
                order.entries.push((self.copy_slots[copy.index()], start, order.srcs.len() as u32));
            }
            let mut s = if split.i_start == 0 { 0 } else { self.graph.nodes[split.i_start - 1].srcs_end };
            order.entries.extend(self.graph.nodes[split.i_start..split.i_end].iter().map(|n| {
                let e = (n.slot, s, n.srcs_end);
                s = n.srcs_end;
                e
            }));
        }
    }

    /// Apply the plan's input copies: each one a tensor of ours (in
    /// `copies`) with its source's layout and name, registered (the
    /// placement, galloc.rs, allocates it with its backend's allocator).
    /// A copy is new to the table, or already there as the view source of
    /// a tensor of the graph (a node the last placement computed in place
    /// in the copy's memory). Their backends stay in the plan:
    /// [`State::decision`] answers for them.
    pub(super) fn make_copies<'c>(
        &mut self,
        backends: &[BackendRef],
        copies: &'c HeapTensors,
        live: &mut Live<'c>,
    ) -> Result<(), table::Full> {
        for c in 0..self.plan.copy_of.len() {
            let copy = refresh_copy(backends, self, copies, live, c);
            let (cslot, _) = self.table.insert(copy.id())?;
            live.set_new(cslot, copy);
            self.copy_slots.push(cslot);
        }
        Ok(())
    }

    /// The backend tensor `slot` is assigned to, and the rule that put it
    /// there: for an input copy its copy's (the plan), else the passes'
    /// decision (the table, where they write it). The one answer for every
    /// reader (the placement, the printed assignments, DOT,
    /// `tensor_backend`).
    #[inline]
    pub(super) fn decision(&self, slot: Slot) -> (Option<BackendIdx>, Rule) {
        decision(&self.table.info, &self.copy_slots, &self.plan.copy_of, slot)
    }

    /// The backend of tensor `slot` ([`State::decision`]).
    #[inline]
    pub(super) fn assignment(&self, slot: Slot) -> Option<BackendIdx> {
        self.decision(slot).0
    }

    /// Plan the split's placement in `arenas` (`Galloc::plan`), logged in
    /// the split's log.
    pub(super) fn plan_placement<B: galloc::ComputeBuffers + ?Sized>(
        &mut self,
        galloc: &mut galloc::Galloc,
        live: &mut Live<'_>,
        arenas: &galloc::Arenas<B>,
        ends: galloc::Ends,
        func: &str,
    ) -> Result<(), galloc::TooSmall> {
        let (info, copy_slots, copy_of) = (&self.table.info, &self.copy_slots, &self.plan.copy_of);
        let assignment = |s| decision(info, copy_slots, copy_of, s).0;
        galloc.plan(&self.table, live, &self.order, arenas, ends, assignment, &mut self.reuse, func)
    }

    /// Size the splits' statistics to the plan.
    pub(super) fn size_runs(&mut self) {
        self.runs.clear();
        self.runs.resize(self.plan.splits.len(), SplitStats::default());
    }
}

/// [`State::decision`] over the parts it reads.
#[inline(always)]
fn decision(info: &[SlotInfo], copy_slots: &CopySlots, copy_of: &[CopyOf], slot: Slot) -> (Option<BackendIdx>, Rule) {
    match copy_slots.copy_at(slot) {
        Some(c) => (Some(copy_of[c].backend), Rule::InputCopy),
        None => (info[slot].assign, info[slot].rule),
    }
}

/// The table slot of each input copy, in `plan.copy_of`'s order, and the
/// way back.
pub(super) struct CopySlots {
    slots: Vec<Slot>,
    /// Copy index by slot.
    by_slot: PtrMap,
    /// The lowest slot of a copy: the slots below are none (most copies
    /// are new to the table, after the graph's tensors, so that nearly
    /// every slot is told apart by one comparison).
    lowest: usize,
}

impl Default for CopySlots {
    fn default() -> Self {
        CopySlots { slots: Vec::new(), by_slot: PtrMap::new(), lowest: usize::MAX }
    }
}

impl CopySlots {
    /// Copy `slots().len()` is in `slot`.
    pub(super) fn push(&mut self, slot: Slot) {
        self.by_slot.insert(slot.key(), self.slots.len() as u32);
        self.slots.push(slot);
        self.lowest = self.lowest.min(slot.index());
    }

    /// None (the memory is kept).
    pub(super) fn clear(&mut self) {
        self.slots.clear();
        self.by_slot.clear(0);
        self.lowest = usize::MAX;
    }

    /// The copy in `slot`, if one is.
    #[inline(always)]
    pub(super) fn copy_at(&self, slot: Slot) -> Option<usize> {
        if slot.index() < self.lowest {
            return None;
        }
        self.by_slot.get(slot.key()).map(|c| c as usize)
    }
}

impl core::ops::Deref for CopySlots {
    type Target = [Slot];
    fn deref(&self) -> &[Slot] {
        &self.slots
    }
}

/// Copy `c` (made if new) as a fresh, unallocated tensor with its source's
/// layout and name, reading from that source; returns it.
pub(super) fn refresh_copy<'c>(backends: &[BackendRef], st: &State, copies: &'c HeapTensors, live: &Live<'c>, c: usize) -> TensorRef<'c> {
    let CopyOf { src, backend, .. } = st.plan.copy_of[c];
    let src = live.get(src);
    let mut name = [0; ggml::WSP_GGML_MAX_NAME];
    let len = copy_name(backends[backend], src, &mut name);
    let copy = copies.fresh(c);
    copy.reset_as_layout_of(src, &name[..len]);
    for (j, s) in copy_sources(src).enumerate() {
        copy.set_src(j, Some(s));
    }
    copy
}

/// The sources of an input copy of `src`, in order: the owner of its memory
/// if it is a view, then `src`. The placement (as ggml-alloc) allocates a
/// copy's sources before the copy, and a view's memory may not be allocated
/// yet (a measure graph's input, whose first user is later in this split):
/// its owner goes first, so the view can be initialised (the original
/// asserted in init_view there). The copy's `src` (`refresh_copy`)
/// and the placement's walk (`State::build_order`) both read this.
pub(super) fn copy_sources(src: TensorRef<'_>) -> impl Iterator<Item = TensorRef<'_>> {
    src.view_src().into_iter().chain(core::iter::once(src))
}

/// Name of an input copy: "<backend>#<source>", as the original names them
/// (cut to ggml's name length), in `buf`; returns its length.
pub(super) fn copy_name(backend: BackendRef, src: TensorRef, buf: &mut [u8; ggml::WSP_GGML_MAX_NAME]) -> usize {
    let backend_name = backend.name_bytes();
    let src_name = src.name();
    // (the name's end found here, not by `Name::bytes`: this runs for every
    // input copy of every compute, and a short loop costs less than a
    // call to the C library's search)
    let raw = src_name.raw();
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let mut n = 0;
    for part in [backend_name, b"#", &raw[..end]] {
        let k = part.len().min(buf.len() - n);
        buf[n..n + k].copy_from_slice(&part[..k]);
        n += k;
    }
    n
}
