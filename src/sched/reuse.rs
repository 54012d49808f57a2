//! Reusing the last split when the next graph is the same.
//!
//! Programs compute the same graph again and again, or rebuild an identical
//! one in a reused context buffer (so at the same addresses), or in a fresh
//! context (elsewhere: [`State::still_valid_moved`], which walks the
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

use super::ids::{PackedLoc, Slot, SlotId};
use super::probe::{locate, Again};
use super::record::Standing;
use super::state::State;
use super::table::{flags_of, Table};
use crate::ggml::{GraphRef, TensorRef};
use crate::handle::BackendRef;

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
        let info = &self.table.info[slot];
        let view_src = t.get().view_src;
        let same_vsrc = match info.vsrc {
            None => view_src.is_null(),
            Some(v) => view_src == self.table.key_ptr(v.slot()),
        };
        same_vsrc && flags_of(t) == info.flags && self.locator.locate(t) == info.packed_loc
    }
}

impl State {
    /// Whether the last split holds for `graph` as it is now (`backends`:
    /// the scheduler's, in order).
    // (out of line: inlined into Sched::split, the same loops measured
    // some 24,000 instructions more on a 6000-node graph)
    #[inline(never)]
    pub(super) fn still_valid(&self, backends: &[BackendRef], graph: GraphRef) -> bool {
        let st = self;
        let (nodes, leafs) = (graph.node_ptrs(), graph.leaf_ptrs());
        if st.reuse.standing != Standing::Reusable || nodes.len() != st.graph.nodes.len() || leafs.len() != st.graph.leafs.len() {
            return false;
        }
        let table = &st.table;
        let key = |slot: Slot| table.key_ptr(slot);
        // (a graph built again elsewhere differs at its first node: seen
        // before its leafs are walked, which may be the same weights)
        if nodes.first().copied() != st.graph.nodes.first().map(|n| key(n.slot)) {
            return false;
        }
        let mut reread = Reread { table, locator: Locator { backends, buffer: core::ptr::null_mut(), loc: PackedLoc::nowhere() } };
        let mut same = |t: TensorRef, slot: Slot| reread.same(t, slot);
        for (leaf, &(slot, _)) in graph.leaf_entries().zip(&st.graph.leafs) {
            match leaf {
                Some(t) if t.as_ptr() == key(slot) && same(t, slot) => {}
                _ => return false,
            }
        }
        let mut start = 0;
        for (node, n) in graph.node_entries().zip(&st.graph.nodes) {
            let Some(t) = node.filter(|t| t.as_ptr() == key(n.slot)) else {
                return false;
            };
            let end = n.srcs_end as usize;
            let srcs = &st.graph.srcs[start..end];
            let src = &t.get().src;
            if srcs.iter().zip(src).any(|(&s, &p)| p != key(s)) || src.get(srcs.len()).is_some_and(|p| !p.is_null()) || !same(t, n.slot) {
                return false;
            }
            start = end;
        }
        if !st.reuse.unlisted.iter().all(|&slot| same(st.table.tensor(slot), slot)) {
            return false;
        }
        st.reuse.answers_hold(&mut Again { table: &st.table, backends })
    }
}

/// The registration of a graph walked again over a table being re-keyed
/// ([`Table::start_rekey`]), checking that every tensor gets the slot the
/// last split's registration gave the tensor in its place, with the same
/// facts: probe.rs's `Registrar`, step by step, comparing where it writes.
struct Rekey<'a> {
    table: &'a mut Table,
    locator: Locator<'a>,
    /// The unlisted tensors of the last split, in the order registration
    /// met them, and how many were met again.
    unlisted: &'a [Slot],
    met: usize,
}

impl Rekey<'_> {
    /// `t` gets `slot` (and its view sources theirs); `listed`: a leaf or
    /// node.
    #[inline(always)]
    fn register(&mut self, t: TensorRef, slot: Slot, listed: bool) -> bool {
        match self.table.rekey(t) {
            Some((s, new)) if s == slot => {
                // (most tensors view nothing: that case inline)
                !new || (self.same_facts(s, t, listed) && (self.no_views(s, t) || self.view_chain(s, t)))
            }
            _ => false,
        }
    }

    /// Whether `t`, in `slot`, views nothing now as then.
    #[inline(always)]
    fn no_views(&self, slot: Slot, t: TensorRef) -> bool {
        t.get().view_src.is_null() && self.table.info[slot].vsrc.is_none()
    }

    /// As the registrar's `describe`: what it wrote of a new tensor.
    #[inline(always)]
    fn same_facts(&mut self, slot: Slot, t: TensorRef, listed: bool) -> bool {
        let info = &self.table.info[slot];
        if info.flags != flags_of(t) || info.packed_loc != self.locator.locate(t) {
            return false;
        }
        if !listed {
            if self.unlisted.get(self.met) != Some(&slot) {
                return false;
            }
            self.met += 1;
        }
        true
    }

    /// As the registrar's `register_view_chain`: the view sources of `t`.
    #[inline(never)]
    fn view_chain(&mut self, slot: Slot, t: TensorRef) -> bool {
        let (mut at, mut next) = (slot, t.view_src());
        while let Some(v) = next {
            let Some(s) = self.table.info[at].view_src() else {
                return false;
            };
            match self.table.rekey(v) {
                Some((got, new)) if got == s => {
                    if !new {
                        return true;
                    }
                    if !self.same_facts(s, v, false) {
                        return false;
                    }
                }
                _ => return false,
            }
            (at, next) = (s, v.view_src());
        }
        // (a view source registered then, none now)
        self.table.info[at].view_src().is_none()
    }

    /// The view source of a leaf or node: registered as `vsrc` (None: none).
    #[inline(always)]
    fn vsrc(&mut self, t: TensorRef, vsrc: Option<SlotId>) -> bool {
        match (t.view_src(), vsrc) {
            (None, None) => true,
            (Some(v), Some(s)) => self.register(v, s.slot(), false),
            _ => false,
        }
    }
}

impl State {
    /// Whether the last split holds for `graph` built again at other
    /// addresses (a client's graph in a fresh context): the same graph,
    /// tensor for tensor, as its registration reads it, with the same
    /// answers to every logged question. Then the table holds `graph`'s
    /// tensors in the same slots, with the same facts (and the split's
    /// plan and copies, made from exactly these, hold: the input copies
    /// are registered again after the graph, in their slots), and the
    /// split is reused as in [`State::still_valid`]. Otherwise the table
    /// is left for a new split, which clears it. (The passes are a
    /// function of the registration's snapshot, in slots, and of the
    /// logged answers: registration numbers the slots in the order it
    /// meets the tensors, so a graph of the same structure gets the same
    /// slots wherever it lies.)
    #[inline(never)]
    pub(super) fn still_valid_moved(&mut self, backends: &[BackendRef], graph: GraphRef) -> bool {
        if self.reuse.standing != Standing::Reusable
            || graph.n_nodes() != self.graph.nodes.len()
            || graph.n_leafs() != self.graph.leafs.len()
            || !self.user_slots.is_empty()
        {
            return false;
        }
        // (a graph whose first node is where the last one's was is not
        // elsewhere: still_valid judged it)
        let first = self.graph.nodes.first().map(|n| self.table.key_ptr(n.slot));
        if graph.node_ptrs().first().copied() == first {
            return false;
        }
        let n = self.table.start_rekey();
        let locator = Locator { backends, buffer: core::ptr::null_mut(), loc: PackedLoc::nowhere() };
        let mut w = Rekey { table: &mut self.table, locator, unlisted: &self.reuse.unlisted, met: 0 };
        for (leaf, &(slot, vsrc)) in graph.leaf_entries().zip(&self.graph.leafs) {
            match leaf {
                Some(t) if w.register(t, slot, true) && w.vsrc(t, vsrc) => {}
                _ => return false,
            }
        }
        let mut last: Option<(TensorRef, Slot)> = None;
        let mut k = 0;
        for (node, n) in graph.node_entries().zip(&self.graph.nodes) {
            let Some(t) = node.filter(|&t| w.register(t, n.slot, true)) else {
                return false;
            };
            let end = n.srcs_end as usize;
            for (_, src) in t.srcs() {
                let Some(&want) = self.graph.srcs.get(k).filter(|_| k < end) else {
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
        // the input copies, in their slots after the graph's tensors
        for (c, of) in self.plan.copy_of.iter().enumerate() {
            match (of.slot, w.table.rekey(self.copies.get(c))) {
                (Some(want), Some((s, true))) if s == want.slot() => {}
                _ => return false,
            }
        }
        if w.table.len() != n {
            return false;
        }
        self.reuse.answers_hold(&mut Again { table: &self.table, backends })
    }
}
