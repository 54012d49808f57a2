//! Reusing the last split when the next graph is the same.
//!
//! Programs compute the same graph again and again, or rebuild an identical
//! one in a reused context buffer (so at the same addresses), or in a fresh
//! context (elsewhere: [`still_valid_moved`], which walks the
//! registration again over the kept slots). The
//! original assigns and splits every time; we check instead that everything
//! the passes read is unchanged, and keep their result if so. The check is
//! exact, not a fingerprint. It compares what the passes read, where
//! they read it:
//! - at registration (table.rs: `Table` keys and `SlotInfo`), for every
//!   tensor the split registered (leafs, nodes, and the sources and view
//!   sources outside the graph's lists): its address, view source, location
//!   (the backend of its buffer) and flags (data set; view op; computed op);
//!   for the graph, the same leafs and nodes in the same order, each node
//!   with the same sources;
//! - at the read, the rest: every question the planner asked C besides
//!   registration's reads is in one log (record.rs, `Record`, written by
//!   the probe, probe.rs): each size a pass compared and each `supports_op`
//!   answer. Reuse asks every logged question again and needs the same
//!   answers.
//!   The passes are deterministic in what registration read and in these
//!   answers, so equal answers mean an equal plan: there is no model of
//!   which questions the passes would ask;
//! - and no `set_node_backend` assignment, now or for the split being reused.
//!
//! Where a tensor's memory goes is not part of the split: the placement
//! (galloc.rs) is kept and applied again while its own chapter of the log
//! still holds, and planned again otherwise. A reuse also redoes the input copies (reset and renamed) and
//! patches the graph's sources again.
//!
//! Both checks find the call's tensors again, slot by slot, and put each
//! one's handle in the call's `Live` (live.rs): what the split kept names
//! tensors only by identity.

use super::ids::{PackedLoc, Slot, SlotId};
use super::live::Live;
use super::plan::GraphSlots;
use super::probe::{locate, Again};
use super::record::{Record, Standing, Via};
use super::table::{flags_of, Table};
use crate::ggml::{GraphRef, HeapTensors, TensorRef};
use crate::handle::BackendRef;
use crate::ptrmap::PtrMap;

/// [`locate`] for many tensors in a row: a buffer or two hold most of a
/// graph's tensors, so the last buffer's answer is remembered.
struct Locator<'a> {
    backends: &'a [BackendRef<'a>],
    buffer: *mut crate::handle::wsp_ggml_backend_buffer,
    loc: PackedLoc,
}

impl Locator<'_> {
    #[inline(always)]
    fn locate(&mut self, t: TensorRef) -> PackedLoc {
        let buffer = t.buffer();
        if buffer.is_null() {
            return PackedLoc::nowhere();
        }
        if buffer != self.buffer {
            self.buffer = buffer;
            self.loc = locate(self.backends, t).into();
        }
        self.loc
    }
}

/// What registration read of the tensors in a table (see table.rs), read
/// again.
struct Reread<'a> {
    table: &'a Table,
    locator: Locator<'a>,
}

impl Reread<'_> {
    /// Whether tensor `t` (registered in `slot`) is as registration read
    /// it: compared field by field as the table stores them.
    #[inline(always)]
    fn same(&mut self, t: TensorRef, slot: Slot) -> bool {
        if self.table.key(slot) != Some(t.id()) {
            return false;
        }
        let info = self.table.info(slot);
        let same_vsrc = match info.vsrc {
            None => t.view_src_id().is_none(),
            Some(v) => t.view_src_id() == self.table.key(v.slot()),
        };
        same_vsrc && flags_of(t) == info.flags && self.locator.locate(t) == info.packed_loc
    }
}

/// Whether the last split, registered in `table` and `slots` and logged in
/// `log`, holds for `graph` as it is now (`backends`: the scheduler's, in
/// order). Every tensor found the same gets its handle in `live` (reset
/// here).
// (inlined into its one caller, `State::still_valid`, which stays out of
// line: the loops then read the split's parts through one pointer, as
// they measured cheapest)
#[inline(always)]
pub(super) fn still_valid<'c>(
    table: &Table,
    slots: &GraphSlots,
    log: &Record,
    backends: &[BackendRef],
    graph: GraphRef<'c>,
    live: &mut Live<'c>,
) -> bool {
    if log.standing() != Standing::Reusable || graph.n_nodes() != slots.nodes.len() || graph.n_leafs() != slots.leafs.len() {
        return false;
    }
    // (a graph built again elsewhere differs at its first node: seen
    // before its leafs are walked, which may be the same weights)
    if graph.node_entry(0).map(TensorRef::id) != slots.nodes.first().and_then(|n| table.key(n.slot)) {
        return false;
    }
    live.reset(table.size());
    let mut reread = Reread { table, locator: Locator { backends, buffer: core::ptr::null_mut(), loc: PackedLoc::nowhere() } };
    for (leaf, &(slot, _)) in graph.leaf_entries().zip(&slots.leafs) {
        match leaf {
            Some(t) if reread.same(t, slot) => live.set(slot, t),
            _ => return false,
        }
    }
    let mut start = 0;
    for (node, n) in graph.node_entries().zip(&slots.nodes) {
        let Some(t) = node else {
            return false;
        };
        let end = n.srcs_end as usize;
        let srcs = &slots.srcs[start..end];
        // (the same sources: the registered ones, then NULL)
        let mut k = 0;
        for (j, p) in t.srcs() {
            match srcs.get(j) {
                Some(&s) if table.key(s) == Some(p.id()) => {}
                _ => return false,
            }
            k += 1;
        }
        if k != srcs.len() || !reread.same(t, n.slot) {
            return false;
        }
        live.set(n.slot, t);
        start = end;
    }
    // Each unlisted tensor, found again the way registration reached
    // it: through a leaf or node found above, or an unlisted tensor
    // before it (registration's order).
    for &(slot, via) in log.unlisted() {
        match via.follow(live) {
            Some(t) if reread.same(t, slot) => live.set(slot, t),
            _ => return false,
        }
    }
    log.answers_hold(&mut Again::new(live, backends))
}

impl Via {
    /// The tensor reached this way in the running call, if any.
    #[inline(always)]
    fn follow<'c>(self, live: &Live<'c>) -> Option<TensorRef<'c>> {
        match self {
            Via::Src { of, j } => live.find(of).and_then(|t| t.src(usize::from(j))),
            Via::ViewSrc { of } => live.find(of).and_then(TensorRef::view_src),
        }
    }
}

/// The registration of a graph walked again over a table being re-keyed
/// ([`Table::start_rekey`]), checking that every tensor gets the slot the
/// last split's registration gave the tensor in its place, with the same
/// facts: probe.rs's `Registrar`, step by step, comparing where it writes.
struct Rekey<'a, 'c> {
    table: &'a mut Table,
    /// The handles of the tensors re-keyed.
    live: &'a mut Live<'c>,
    locator: Locator<'a>,
    /// The unlisted tensors of the last split, in the order registration
    /// met them, and how many were met again.
    unlisted: &'a [(Slot, Via)],
    met: usize,
}

impl<'c> Rekey<'_, 'c> {
    /// `t` gets `slot` (and its view sources theirs); `listed`: a leaf or
    /// node.
    #[inline(always)]
    fn register(&mut self, t: TensorRef<'c>, slot: Slot, listed: bool) -> bool {
        match self.table.rekey(t.id()) {
            Some((s, new)) if s == slot => {
                if !new {
                    return true;
                }
                self.live.set_new(s, t);
                // (most tensors view nothing: that case inline)
                self.same_facts(s, t, listed) && (self.no_views(s, t) || self.view_chain(s, t))
            }
            _ => false,
        }
    }

    /// Whether `t`, in `slot`, views nothing now as then.
    #[inline(always)]
    fn no_views(&self, slot: Slot, t: TensorRef) -> bool {
        t.view_src_id().is_none() && self.table.info(slot).vsrc.is_none()
    }

    /// As the registrar's `describe`: what it wrote of a new tensor.
    #[inline(always)]
    fn same_facts(&mut self, slot: Slot, t: TensorRef, listed: bool) -> bool {
        let info = self.table.info(slot);
        if info.flags != flags_of(t) || info.packed_loc != self.locator.locate(t) {
            return false;
        }
        if !listed {
            if self.unlisted.get(self.met).map(|&(s, _)| s) != Some(slot) {
                return false;
            }
            self.met += 1;
        }
        true
    }

    /// As the registrar's `register_view_chain`: the view sources of `t`.
    #[inline(never)]
    fn view_chain(&mut self, slot: Slot, t: TensorRef<'c>) -> bool {
        let (mut at, mut next) = (slot, t.view_src());
        while let Some(v) = next {
            let Some(s) = self.table.info(at).view_src() else {
                return false;
            };
            match self.table.rekey(v.id()) {
                Some((got, new)) if got == s => {
                    if !new {
                        return true;
                    }
                    self.live.set_new(s, v);
                    if !self.same_facts(s, v, false) {
                        return false;
                    }
                }
                _ => return false,
            }
            (at, next) = (s, v.view_src());
        }
        // (a view source registered then, none now)
        self.table.info(at).view_src().is_none()
    }

    /// The view source of a leaf or node: registered as `vsrc` (None: none).
    #[inline(always)]
    fn vsrc(&mut self, t: TensorRef<'c>, vsrc: Option<SlotId>) -> bool {
        match (t.view_src(), vsrc) {
            (None, None) => true,
            (Some(v), Some(s)) => self.register(v, s.slot(), false),
            _ => false,
        }
    }
}

/// Whether the last split holds for `graph` built again at other
/// addresses (a client's graph in a fresh context): the same graph,
/// tensor for tensor, as its registration reads it, with the same
/// answers to every logged question. Then the table holds `graph`'s
/// tensors in the same slots, with the same facts (and the split's
/// plan and copies, made from exactly these, hold: the input copies
/// are registered again after the graph, in their slots), and the
/// split is reused as in [`still_valid`]. Otherwise the table
/// is left for a new split, which clears it. (The passes are a
/// function of the registration's snapshot, in slots, and of the
/// logged answers: registration numbers the slots in the order it
/// meets the tensors, so a graph of the same structure gets the same
/// slots wherever it lies.)
///
/// Every tensor re-keyed gets its handle in `live` (reset here); the
/// input copies are found by identity in `copies`.
// (inlined into its one caller, `State::still_valid_moved`, out of line)
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn still_valid_moved<'c>(
    table: &mut Table,
    slots: &GraphSlots,
    log: &Record,
    user_slots: &PtrMap,
    copy_slots: &[Slot],
    backends: &[BackendRef],
    graph: GraphRef<'c>,
    copies: &HeapTensors,
    live: &mut Live<'c>,
) -> bool {
    if log.standing() != Standing::Reusable
        || graph.n_nodes() != slots.nodes.len()
        || graph.n_leafs() != slots.leafs.len()
        || !user_slots.is_empty()
    {
        return false;
    }
    // (a graph whose first node is where the last one's was is not
    // elsewhere: still_valid judged it)
    let first = slots.nodes.first().and_then(|n| table.key(n.slot));
    if graph.node_entry(0).map(TensorRef::id) == first {
        return false;
    }
    let n = table.start_rekey();
    live.reset(n);
    let locator = Locator { backends, buffer: core::ptr::null_mut(), loc: PackedLoc::nowhere() };
    let mut w = Rekey { table, live, locator, unlisted: log.unlisted(), met: 0 };
    for (leaf, &(slot, vsrc)) in graph.leaf_entries().zip(&slots.leafs) {
        match leaf {
            Some(t) if w.register(t, slot, true) && w.vsrc(t, vsrc) => {}
            _ => return false,
        }
    }
    let mut last: Option<(TensorRef<'c>, Slot)> = None;
    let mut k = 0;
    for (node, n) in graph.node_entries().zip(&slots.nodes) {
        let Some(t) = node.filter(|&t| w.register(t, n.slot, true)) else {
            return false;
        };
        let end = n.srcs_end as usize;
        for (_, src) in t.srcs() {
            let Some(&want) = slots.srcs.get(k).filter(|_| k < end) else {
                return false;
            };
            let same = match last {
                Some((l, s)) if l == src => s == want,
                _ => w.register(src, want, false),
            };
            if !same {
                return false;
            }
            k += 1;
        }
        if k != end || !w.vsrc(t, n.vsrc) {
            return false;
        }
        last = Some((t, n.slot));
    }
    if w.met != w.unlisted.len() {
        return false;
    }
    // the input copies, in their slots after the graph's tensors (their
    // handles come with the copies made again for this call)
    for (c, &want) in copy_slots.iter().enumerate() {
        match copies.id(c).and_then(|id| w.table.rekey(id)) {
            Some((s, true)) if s == want => {}
            _ => return false,
        }
    }
    if w.table.len() != n {
        return false;
    }
    log.answers_hold(&mut Again::new(live, backends))
}
