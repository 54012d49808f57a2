//! Reusing the last split when the next graph is the same.
//!
//! Programs compute the same graph again and again, or rebuild an identical
//! one in a reused context buffer (so at the same addresses). The
//! original assigns and splits every time; we check instead that everything
//! the passes read is unchanged, and keep their result if so. The check is
//! exact, not a fingerprint: the graph lists the same tensors in the same
//! order, every tensor the split registered (leafs, nodes, and the sources
//! and view sources outside the graph's lists) has the same record
//! (`TensorRec`: address, sources, view source, buffer, data, shape,
//! strides, type, op, view offset: all a pass or the allocation reads of
//! it), every `supports_op` answer a decision used is the same (asked
//! again, in the same order), and there is no `set_node_backend`
//! assignment, now or for the split being reused.
//!
//! A reuse still redoes everything downstream: input copies are reset and
//! renamed, graph sources patched again, and the tensors are placed again
//! (galloc.rs), in buffers that may have changed since.

use super::assign::{cpu_backends, next_supporting, refresh_copy, Planner};
use super::table::{SlotInfo, TensorRec, NO_BACKEND};
use super::{Rule, Sched};
use crate::ggml::{GraphRef, TensorRef};

/// What the last split read: the record of every tensor it registered, and
/// the backends `supports_op` moved nodes from.
#[derive(Default)]
pub(super) struct Facts {
    /// The tables describe a complete split made without user assignments.
    pub valid: bool,
    /// The backend that rejected each node moved because of supports_op,
    /// in node order.
    pub moved: Vec<u16>,
    /// The graph's leafs, then its nodes, in graph order.
    pub leafs: Vec<TensorRec>,
    pub nodes: Vec<TensorRec>,
    /// Tensors first registered as a source or view source (not as a leaf
    /// or node), with their slot.
    pub unlisted: Vec<(u32, TensorRec)>,
}

impl Facts {
    /// Before a new split.
    pub fn clear(&mut self) {
        self.valid = false;
        self.moved.clear();
        self.leafs.clear();
        self.nodes.clear();
        self.unlisted.clear();
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
        if !st.reuse.valid || nodes.len() != st.reuse.nodes.len() || leafs.len() != st.reuse.leafs.len() {
            return false;
        }
        // (a record holds the tensor's address: the same tensor, or none)
        let same = |p: *mut crate::ggml::wsp_ggml_tensor, rec: &TensorRec| TensorRef::new(p).is_some_and(|t| rec.hold_for(t));
        if !leafs.iter().zip(&st.reuse.leafs).all(|(&l, rec)| same(l, rec)) {
            return false;
        }
        if !st.reuse.unlisted.iter().all(|(slot, rec)| rec.hold_for(st.table.tensor(*slot))) {
            return false;
        }
        // supports_op, asked again (our CPU backend is never asked)
        let cpu = cpu_backends(self.backends);
        let ask = !cpu.iter().all(|&c| c);
        let mut moved = st.reuse.moved.iter();
        let info = &st.table.info;
        for ((&node, n), rec) in nodes.iter().zip(&st.nodes).zip(&st.reuse.nodes) {
            if !same(node, rec) {
                return false;
            }
            let i = info[n.slot as usize];
            if ask && !i.has(SlotInfo::VIEW_OP) && !self.same_support(st.table.tensor(n.slot), i, &mut moved, &cpu) {
                return false;
            }
        }
        true
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
