//! Reusing the last split when the next graph is the same.
//!
//! Programs compute the same graph again and again, or rebuild an identical
//! one in a reused context buffer (so at the same addresses). The
//! original assigns and splits every time; we check instead that everything
//! the passes read is unchanged, and keep their result if so. The check is
//! exact, not a fingerprint:
//! - each node, as a whole record (`NodeFacts`): its address, its six source
//!   slots, view source, buffer, and what the allocation reads (shape,
//!   strides, type, op, view offset, data pointer: `AllocFacts`, which
//!   includes the size the source rule compares);
//! - each leaf, and each other tensor registered (a source or view source
//!   outside the graph's lists): address, view source, location (backend of
//!   its buffer) and `AllocFacts`;
//! - every `supports_op` answer a decision used (asked again, in the same order);
//! - the data of unassigned views and sources (the only other field a pass reads);
//! - no `set_node_backend` assignment, now or for the split being reused.
//!
//! A reuse still redoes everything downstream: input copies are reset and
//! renamed, graph sources patched again, and the tensors are placed again
//! (galloc.rs), in buffers that may have changed since.

use super::assign::{cpu_backends, next_supporting, refresh_copy, Locator, Planner};
use super::table::{AllocFacts, NodeFacts, SlotInfo, NO_BACKEND};
use super::{Rule, Sched};
use crate::ggml::{wsp_ggml_tensor, GraphRef, TensorRef};

/// What a split read besides the graph's structure and the tensors' locations.
#[derive(Default)]
pub(super) struct Facts {
    /// The tables describe a complete split made without user assignments.
    pub valid: bool,
    /// The backend that rejected each node moved because of supports_op,
    /// in node order.
    pub moved: Vec<u16>,
    /// Unassigned view nodes and sources, accepted because their data was set.
    pub unassigned_views: Vec<u32>,
    /// Tensors first registered as a source or view source (not as a leaf
    /// or node), with their view source and allocation facts: checked on
    /// their own.
    pub unlisted: Vec<(u32, *mut wsp_ggml_tensor, AllocFacts)>,
    /// Allocation facts of the leafs, in graph order.
    pub alloc: Vec<AllocFacts>,
    /// What the split read of each node, in graph order.
    pub nodes: Vec<NodeFacts>,
}

impl Facts {
    /// Before a new split.
    pub fn clear(&mut self) {
        self.valid = false;
        self.moved.clear();
        self.unassigned_views.clear();
        self.unlisted.clear();
        self.alloc.clear();
        self.nodes.clear();
    }

    /// Forget the split and give the memory back.
    pub fn forget(&mut self) {
        *self = Facts::default();
    }
}

impl Planner<'_> {
    /// Whether the last split holds for `graph` as it is now.
    pub(super) fn still_valid(&self, graph: GraphRef) -> bool {
        let st = &self.st;
        let (nodes, leafs) = (graph.node_ptrs(), graph.leaf_ptrs());
        if !st.reuse.valid || nodes.len() != st.nodes.len() || leafs.len() != st.leafs.len() {
            return false;
        }
        let (keys, info) = (st.table.keys(), &st.table.info);
        // NONE (u32::MAX) is out of range: it reads as NULL.
        let key = |slot: u32| keys.get(slot as usize).copied().unwrap_or(std::ptr::null_mut());
        let mut locator = Locator::default();
        let mut same_loc = |t: TensorRef, slot: u32| locator.locate(self.backends, t) == info[slot as usize].loc;
        for ((&leaf, &[slot, vsrc]), facts) in leafs.iter().zip(&st.leafs).zip(&st.reuse.alloc) {
            let Some(leaf) = TensorRef::new(leaf).filter(|l| l.as_ptr() == key(slot)) else {
                return false;
            };
            if leaf.get().view_src != key(vsrc) || !same_loc(leaf, slot) || !facts.hold_for(leaf) {
                return false;
            }
        }
        // supports_op, asked again (our CPU backend is never asked)
        let cpu = cpu_backends(self.backends);
        let ask = !cpu.iter().all(|&c| c);
        let mut moved = st.reuse.moved.iter();
        for ((&node, n), facts) in nodes.iter().zip(&st.nodes).zip(&st.reuse.nodes) {
            // (its address, sources, view source, buffer, op...: its facts)
            let Some(node) = TensorRef::new(node).filter(|&t| facts.hold_for(t)) else {
                return false;
            };
            if ask && !info[n.slot as usize].has(SlotInfo::VIEW_OP) && !self.same_support(node, info[n.slot as usize], &mut moved, &cpu) {
                return false;
            }
        }
        // Sources and view sources that are neither leafs nor nodes (input
        // copies are not among them: they are ours, allocated by every compute).
        // Their view sources too: ggml-alloc looks those up, and a new one
        // would be inserted into our table behind our back.
        if !st.reuse.unlisted.iter().all(|&(slot, vsrc, facts)| {
            let t = st.table.tensor(slot);
            t.get().view_src == vsrc && same_loc(t, slot) && facts.hold_for(t)
        }) {
            return false;
        }
        let table = &st.table;
        !st.reuse.unassigned_views.iter().any(|&slot| table.tensor(slot).data().is_null())
    }

    /// Whether `supports_op` answers for `node` (not a view op) as it did:
    /// the questions move_unsupported_nodes asked, derived from its results.
    fn same_support<'a>(&self, node: TensorRef, info: SlotInfo, moved: &mut impl Iterator<Item = &'a u16>, cpu: &[bool]) -> bool {
        let SlotInfo { assign, rule, .. } = info;
        if rule == Rule::Unsupported {
            // Rejected by `from`, then the search ended at `assign`.
            let Some(&from) = moved.next() else { return false };
            !self.backends[from as usize].supports_op(node) && next_supporting(self.backends, from, node, cpu) == Some(assign)
        } else if assign == NO_BACKEND || cpu[assign as usize] {
            true // nothing was asked
        } else {
            // asked about the backend it stayed on
            self.backends[assign as usize].supports_op(node)
        }
    }

}

impl Sched {
    /// Make the last split current again for `graph` (checked by `still_valid`).
    pub(super) fn reuse_split(&mut self, graph: GraphRef) {
        for c in 0..self.st.copy_of.len() {
            refresh_copy(&self.backends, &mut self.st, c);
        }
        self.st.patch();
        self.view_splits(graph);
    }
}
