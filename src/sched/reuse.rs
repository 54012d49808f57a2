//! Reusing the last split when the next graph is the same.
//!
//! Programs compute the same graph again and again, or rebuild an identical
//! one in a reused context buffer (so at the same addresses). The
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

use super::ids::{PackedLoc, Slot};
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
    #[inline]
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
