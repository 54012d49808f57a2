//! One split of one graph ([`State`]), with its methods in the order of
//! its stages (snapshot, plan, apply, reuse, placement), and the `Sched`
//! that holds a split with its backends (its methods, the driver, are
//! mod.rs's). A split's fields are its own: what the other files need of
//! it they get from its methods, which keep the invariants below.

use crate::prelude::*;

use super::call::{Redirections, Rooms};
use super::fit::Backends;
use super::galloc::{Arenas, ComputeBuffers, Ends, Galloc, TooSmall};
use super::ids::{self, BackendIdx, Rule, Slot};
use super::live::Live;
use super::plan::place::Order;
use super::plan::{self, CopyOf, GraphSlots, Planned, Refusal, Settings, SlotInfo, SplitPlan};
use super::probe::{CProbe, Registrar};
use super::record::{Record, Standing};
use super::reuse;
use super::table::{Attempt, Full, Retry, Sizing, Table};
use crate::ggml::{self, EvalCallback, GraphRef, HeapTensors, TensorRef};
use crate::handle::BackendRef;
use crate::ptrmap::PtrMap;

/// One split of one graph, in three stages (`make_split`, mod.rs, calls
/// [`State::snapshot`], [`State::plan_split`], then the apply methods):
/// - **snapshot** (probe.rs, `Registrar`): every tensor the passes or the
///   allocation touch gets a table slot, with what the passes read of it
///   (`Table::info`: location, flags, view source); `graph` gives the
///   graph's structure in slots;
/// - **plan** (the passes, sched/plan, sealed from C: they ask the rest
///   through a `Probe`, whose C implementation logs the answers in
///   `reuse`): a backend and rule per slot of the graph (`Table::info`) and
///   `plan`: the splits, their inputs, the copies they need and the graph
///   sources to redirect;
/// - **apply** (here): the copies made and registered (`copy_slots`),
///   the allocation's walk (`order`) built, the
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
    table: Table,
    /// The graph in slots (the snapshot).
    graph: GraphSlots,
    /// What the passes decided besides each slot's backend.
    plan: SplitPlan,
    /// `set_node_backend` assignments of the split's tensors, by slot
    /// (resolved at registration, for the planner).
    user_slots: PtrMap,
    /// The table slot of each input copy (`plan.copy_of`'s order).
    copy_slots: CopySlots,
    /// Per split: what its last compute did.
    runs: Vec<SplitStats>,
    /// The walk of the split's allocation (galloc.rs).
    order: Order,
    /// How the next table is sized (table.rs).
    sizing: Sizing,
    /// The record of every tensor the split read, and the supports_op
    /// answers it used, to know whether it still holds (see reuse.rs);
    /// the placement's chapter too (galloc.rs).
    reuse: Record,
}

impl State {
    /// Forget the split (not the memory): the one way to clear it, before
    /// a new one ([`State::snapshot`]) and on `reset` ([`State::release`]).
    /// The sources must be given back first.
    fn clear_split(&mut self) {
        self.reuse.clear();
        self.copy_slots.clear();
        self.graph.clear();
        self.plan.clear();
        self.user_slots.clear(0);
        self.runs.clear();
        self.order.clear();
    }

    /// Forget the split and give its memory back, the placement's kept
    /// plan (in `galloc`) too (`reset`).
    pub(super) fn release(&mut self, galloc: &mut Galloc) {
        self.clear_split();
        self.table.release();
        galloc.release(&mut self.reuse);
        self.reuse.release();
    }

    // A new split: snapshot, plan, apply (driven by mod.rs's `make_split`).

    /// The first table to try for a graph of `listed` leafs and nodes.
    pub(super) fn first_attempt(&self, listed: usize) -> Attempt {
        self.sizing.first_attempt(listed)
    }

    /// `attempt` failed (`why`): the next one.
    pub(super) fn retry(&self, attempt: &mut Attempt, why: Retry) {
        attempt.retry(why, &self.table);
    }

    /// **Snapshot**: forget the last split and register `graph`'s tensors
    /// (probe.rs, `Registrar`) in a table for `attempt`, their handles in
    /// `live` (reset here); `user`: the `set_node_backend` assignments by
    /// tensor address.
    pub(super) fn snapshot<'c>(
        &mut self,
        graph: GraphRef<'c>,
        live: &mut Live<'c>,
        backends: &[BackendRef],
        user: &PtrMap,
        attempt: &Attempt,
        func: &str,
    ) -> Result<(), Full> {
        self.table.clear_for(attempt);
        live.reset(0);
        live.reserve(self.table.capacity());
        self.clear_split();
        Registrar::new(&mut self.table, &mut self.graph, &mut self.user_slots, &mut self.reuse, live, backends, user)
            .index_graph(graph, func)
    }

    /// **Plan**: the passes (`plan::plan_split`) over the snapshot,
    /// asking C through a `CProbe` that logs every answer in the split's
    /// log.
    pub(super) fn plan_split(
        &mut self,
        live: &Live,
        backends: &[BackendRef],
        settings: Settings<'_>,
    ) -> Result<Planned, (Refusal, Vec<String>)> {
        let mut probe = CProbe::new(live, backends, &mut self.reuse);
        plan::plan_split(&mut probe, self.table.decisions(), &self.graph, &self.user_slots, &mut self.plan, settings)
    }

    /// **Apply**, first the plan's input copies: each one a tensor of ours
    /// (in `copies`) with its source's layout and name, registered (the
    /// placement, galloc.rs, allocates it with its backend's allocator).
    /// A copy is new to the table, or already there as the view source of
    /// a tensor of the graph (a node the last placement computed in place
    /// in the copy's memory). Their backends stay in the plan:
    /// [`State::decision`] answers for them.
    pub(super) fn make_copies<'c>(&mut self, backends: &[BackendRef], copies: &'c HeapTensors, live: &mut Live<'c>) -> Result<(), Full> {
        for c in 0..self.plan.copy_of.len() {
            let copy = refresh_copy(backends, self, copies, live, c);
            let (cslot, _) = self.table.insert(copy.id())?;
            live.set_new(cslot, copy);
            self.copy_slots.push(cslot);
        }
        Ok(())
    }

    /// The graph's sources pointed at their input copies for the call
    /// (`redirected`; the tensors in `live`).
    pub(super) fn redirect<'c>(&self, redirected: &mut Redirections<'c>, live: &Live<'c>) {
        redirected.apply(&self.plan.patches, &self.graph.srcs, &self.copy_slots, live);
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

    /// Size the splits' statistics to the plan.
    pub(super) fn size_runs(&mut self) {
        self.runs.clear();
        self.runs.resize(self.plan.splits.len(), SplitStats::default());
    }

    /// The split was made for a graph of `listed` leafs and nodes; it may
    /// be reused as `standing` says.
    pub(super) fn split_made(&mut self, listed: usize, standing: Standing) {
        self.sizing.split_made(&self.table, listed);
        self.reuse.set_standing(standing);
    }

    // Reuse (reuse.rs): the last split for the graph of this call.

    /// Whether the last split holds for `graph` as it is now
    /// (`reuse::still_valid`); every tensor found the same gets its
    /// handle in `live`.
    // (out of line: inlined into Sched::split, the same loops measured
    // some 24,000 instructions more on a 6000-node graph)
    #[inline(never)]
    pub(super) fn still_valid<'c>(&self, backends: &[BackendRef], graph: GraphRef<'c>, live: &mut Live<'c>) -> bool {
        reuse::still_valid(&self.table, &self.graph, &self.reuse, backends, graph, live)
    }

    /// Whether the last split holds for `graph` built again at other
    /// addresses (`reuse::still_valid_moved`, which re-keys the table);
    /// every tensor re-keyed gets its handle in `live`.
    #[inline(never)]
    pub(super) fn still_valid_moved<'c>(
        &mut self,
        backends: &[BackendRef],
        graph: GraphRef<'c>,
        copies: &HeapTensors,
        live: &mut Live<'c>,
    ) -> bool {
        reuse::still_valid_moved(
            &mut self.table,
            &self.graph,
            &self.reuse,
            &self.user_slots,
            &self.copy_slots,
            backends,
            graph,
            copies,
            live,
        )
    }

    /// A reused split's input copies made again for this call (reset and
    /// renamed), their handles in `live`.
    pub(super) fn refresh_copies<'c>(&self, backends: &[BackendRef], copies: &'c HeapTensors, live: &mut Live<'c>) {
        for c in 0..self.plan.copy_of.len() {
            let copy = refresh_copy(backends, self, copies, live, c);
            live.set(self.copy_slots[c], copy);
        }
    }

    /// The backend tensor `slot` is assigned to, and the rule that put it
    /// there: for an input copy its copy's (the plan), else the passes'
    /// decision (the table, where they write it). The one answer for every
    /// reader of one slot (the printed assignments, DOT, `tensor_backend`);
    /// the placement loads the same for every slot in bulk
    /// ([`State::plan_placement`]).
    #[inline]
    pub(super) fn decision(&self, slot: Slot) -> (Option<BackendIdx>, Rule) {
        decision(self.table.infos(), &self.copy_slots, &self.plan.copy_of, slot)
    }

    /// Each input copy's slot and backend, what the placement loads
    /// besides the table ([`State::decision`]).
    #[cfg(test)]
    pub(super) fn copy_backends(&self) -> impl Iterator<Item = (Slot, BackendIdx)> + '_ {
        copy_backends(&self.copy_slots, &self.plan.copy_of)
    }

    /// The backend of tensor `slot` ([`State::decision`]).
    #[inline]
    pub(super) fn assignment(&self, slot: Slot) -> Option<BackendIdx> {
        self.decision(slot).0
    }

    // The placement (galloc.rs) of the split.

    /// Plan the split's placement in `arenas` (`Galloc::plan`), each
    /// tensor on its backend as [`State::decision`] says (the table's
    /// backends, then each input copy's from the plan), logged in the
    /// split's log.
    pub(super) fn plan_placement<B: ComputeBuffers + ?Sized>(
        &mut self,
        galloc: &mut Galloc,
        live: &mut Live<'_>,
        arenas: &Arenas<B>,
        ends: Ends,
        func: &str,
    ) -> Result<(), TooSmall> {
        let copies = copy_backends(&self.copy_slots, &self.plan.copy_of);
        galloc.plan(&self.table, live, &self.order, arenas, ends, copies, &mut self.reuse, func)
    }

    /// Whether the placement `galloc` kept for this split holds again
    /// (`Galloc::still_holds`).
    pub(super) fn placement_holds<B: ComputeBuffers + ?Sized>(&self, galloc: &Galloc, live: &Live, arenas: &Arenas<B>) -> bool {
        galloc.still_holds(&self.table, live, arenas, &self.reuse)
    }

    /// Whether a placement's plan is kept for this split.
    pub(super) fn placement_kept(&self) -> bool {
        self.reuse.placement_kept()
    }

    /// Forget the plan `galloc` kept, and the memory both keep for it (a
    /// measure sizes them again).
    pub(super) fn forget_placement(&mut self, galloc: &mut Galloc) {
        galloc.release(&mut self.reuse);
    }

    /// Room for the computes after a measure of a graph of `listed` leafs
    /// and nodes: a table as large (with as many other tensors as this
    /// split had) and the placement's state over it (`galloc`), so that
    /// they allocate nothing. Returns the tensors made room for.
    pub(super) fn reserve_for(&mut self, galloc: &mut Galloc, listed: usize) -> usize {
        let next = self.sizing.first_attempt(listed);
        let (slots, tensors) = self.table.reserve_for(&next);
        galloc.reserve(slots, tensors, &mut self.reuse);
        tensors
    }

    // Statistics of the splits' last compute.

    /// Every split's statistics start over.
    pub(super) fn clear_runs(&mut self) {
        self.runs.iter_mut().for_each(|r| *r = SplitStats::default());
    }

    /// Split `k` copied `bytes` of inputs in this compute.
    pub(super) fn record_copied(&mut self, k: usize, bytes: usize) {
        self.runs[k].bytes_copied = bytes;
    }

    /// What the last compute did on split `k` (zero if none).
    pub(super) fn run(&self, k: usize) -> SplitStats {
        self.runs.get(k).copied().unwrap_or_default()
    }

    // What the rest reads of the split.

    /// The table: each tensor's slot.
    #[inline]
    pub(super) fn table(&self) -> &Table {
        &self.table
    }

    /// The graph in slots.
    pub(super) fn graph(&self) -> &GraphSlots {
        &self.graph
    }

    /// The passes' plan: splits, inputs, copies, patches.
    #[inline]
    pub(super) fn plan(&self) -> &SplitPlan {
        &self.plan
    }

    /// The slot of each input copy, in the plan's order.
    #[inline]
    pub(super) fn copy_slots(&self) -> &[Slot] {
        &self.copy_slots
    }

    /// The split's log (record.rs).
    #[cfg(test)]
    pub(super) fn log(&self) -> &Record {
        &self.reuse
    }

    /// The walk of the split's allocation.
    #[cfg(test)]
    pub(super) fn order(&self) -> &Order {
        &self.order
    }

    /// The slots of the graph's inputs: its leafs, and the tensors outside
    /// its lists (what the caller may have allocated in a compute buffer).
    pub(super) fn inputs(&self) -> impl Iterator<Item = Slot> + Clone + '_ {
        self.graph.leafs.iter().map(|l| l.0).chain(self.reuse.unlisted().iter().map(|&(s, _)| s))
    }

    /// Set how the split may be reused (the tests make one reusable).
    #[cfg(test)]
    pub(super) fn set_standing(&mut self, standing: Standing) {
        self.reuse.set_standing(standing);
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

/// Each input copy's slot and backend (the plan's), over the parts they
/// are in.
fn copy_backends<'a>(copy_slots: &'a CopySlots, copy_of: &'a [CopyOf]) -> impl Iterator<Item = (Slot, BackendIdx)> + 'a {
    copy_slots.slots.iter().zip(copy_of).map(|(&s, c)| (s, c.backend))
}

/// The table slot of each input copy, in `plan.copy_of`'s order, and the
/// way back.
#[derive(Default)]
struct CopySlots {
    slots: Vec<Slot>,
    /// (slot, copy index) of each copy, in slot order.
    by_slot: Vec<(Slot, u32)>,
}

impl CopySlots {
    /// Copy `slots.len()` is in `slot`.
    fn push(&mut self, slot: Slot) {
        let c = self.slots.len() as u32;
        self.slots.push(slot);
        // (nearly always past the others: a copy new to the table)
        let at = self.by_slot.partition_point(|&(s, _)| s < slot);
        self.by_slot.insert(at, (slot, c));
    }

    /// None (the memory is kept).
    fn clear(&mut self) {
        self.slots.clear();
        self.by_slot.clear();
    }

    /// The copy in `slot`, if one is.
    fn copy_at(&self, slot: Slot) -> Option<usize> {
        let i = self.by_slot.binary_search_by_key(&slot, |&(s, _)| s).ok()?;
        Some(self.by_slot[i].1 as usize)
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
fn refresh_copy<'c>(backends: &[BackendRef], st: &State, copies: &'c HeapTensors, live: &Live<'c>, c: usize) -> TensorRef<'c> {
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
fn copy_sources(src: TensorRef<'_>) -> impl Iterator<Item = TensorRef<'_>> {
    src.view_src().into_iter().chain(core::iter::once(src))
}

/// Name of an input copy: "<backend>#<source>", as the original names them
/// (cut to ggml's name length), in `buf`; returns its length.
fn copy_name(backend: BackendRef, src: TensorRef, buf: &mut [u8; ggml::WSP_GGML_MAX_NAME]) -> usize {
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

/// What the last compute did on one split.
#[derive(Clone, Copy, Debug, Default)]
pub struct SplitStats {
    pub bytes_copied: usize,
}

/// Nanoseconds from `from` to `to` (platform::now_ns readings).
pub(super) fn nanos(from: u64, to: u64) -> u64 {
    to.saturating_sub(from)
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
    /// The backends in priority order, one record each (fit.rs).
    pub(super) backends: Backends,
    pub(super) phase: Phase,
    /// The split's allocation (galloc.rs), kept for its memory.
    pub(super) galloc: Galloc,
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
    /// Whether the last compute's graph was one computed before (its split
    /// reused), or a measure was the last call: a new split's placement is
    /// then kept, as the graph is likely to come again. (Keeping costs
    /// every new graph its log, 2 to 3 % of a new graph's share; a
    /// client whose every graph is new never pays it.)
    pub(super) repeats: bool,
    pub(super) st: State,
}

/// The most backends one scheduler takes.
pub const MAX_BACKENDS: usize = ids::MAX_BACKENDS;
