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
use super::live::Live;
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
/// again; every tensor found the same is this call's tensor of its slot.
struct Reread<'a, 'c> {
    table: &'a Table,
    live: &'a mut Live<'c>,
    locator: Locator<'a>,
}

impl<'c> Reread<'_, 'c> {
    /// Whether `t` is the tensor registered in `slot` and as registration
    /// read it: compared field by field as the table stores them. Its view
    /// source, found the same, is its slot's tensor too.
    #[inline(always)]
    fn same(&mut self, t: TensorRef<'c>, slot: Slot) -> bool {
        if self.table.key(slot) != Some(t.id()) {
            return false;
        }
        let info = &self.table.info[slot];
        let same_vsrc = match (info.vsrc, t.view_src()) {
            (None, None) => true,
            (Some(v), Some(vt)) if self.table.key(v.slot()) == Some(vt.id()) => {
                self.live.set(v.slot(), vt);
                true
            }
            _ => false,
        };
        self.live.set(slot, t);
        same_vsrc && flags_of(t) == info.flags && self.locator.locate(t) == info.packed_loc
    }
}

impl State {
    /// Whether the last split holds for `graph` as it is now (`backends`:
    /// the scheduler's, in order).
    // (out of line: inlined into Sched::split, the same loops measured
    // some 24,000 instructions more on a 6000-node graph)
    /// Every tensor found the same gets its handle in `live` (reset here).
    #[inline(never)]
    pub(super) fn still_valid<'c>(&self, backends: &[BackendRef], graph: GraphRef<'c>, live: &mut Live<'c>) -> bool {
        let st = self;
        live.reset(st.table.size());
        if st.reuse.standing != Standing::Reusable || graph.n_nodes() != st.graph.nodes.len() || graph.n_leafs() != st.graph.leafs.len() {
            return false;
        }
        let table = &st.table;
        let mut reread = Reread { table, live, locator: Locator { backends, buffer: core::ptr::null_mut(), loc: PackedLoc::nowhere() } };
        for (leaf, &(slot, _)) in graph.leaf_entries().zip(&st.graph.leafs) {
            match leaf {
                Some(t) if reread.same(t, slot) => {}
                _ => return false,
            }
        }
        let mut start = 0;
        for (node, n) in graph.node_entries().zip(&st.graph.nodes) {
            let Some(t) = node else {
                return false;
            };
            let end = n.srcs_end as usize;
            let srcs = &st.graph.srcs[start..end];
            for (j, &s) in srcs.iter().enumerate() {
                match t.src(j) {
                    Some(p) if table.key(s) == Some(p.id()) => reread.live.set(s, p),
                    _ => return false,
                }
            }
            if srcs.len() < crate::ggml::WSP_GGML_MAX_SRC && t.src(srcs.len()).is_some() || !reread.same(t, n.slot) {
                return false;
            }
            start = end;
        }
        // (each unlisted tensor is a source or view source of one found
        // above, or of an unlisted one before it: registration's order)
        for &slot in &st.reuse.unlisted {
            match reread.live.find(slot) {
                Some(t) if reread.same(t, slot) => {}
                _ => return false,
            }
        }
        st.reuse.answers_hold(&mut Again { live: reread.live, backends })
    }
}
