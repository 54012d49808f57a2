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
//! - at the read, the rest: each size a pass compared (`Planner::nbytes`
//!   records it) and each `supports_op` answer a decision used (asked again,
//!   in the same order);
//! - and no `set_node_backend` assignment, now or for the split being reused.
//!
//! Where a tensor's memory goes is not part of the split: the allocation
//! (galloc.rs) is planned again at every compute from the tensors as they
//! are then. A reuse also redoes the input copies (reset and renamed) and
//! patches the graph's sources again.

use crate::prelude::*;

use super::assign::{cpu_backends, locate, next_supporting, refresh_copy, Planner};
use super::table::{SlotInfo, NO_BACKEND};
use super::{Rule, Sched};
use crate::backend::BackendRef;
use crate::ggml::{GraphRef, TensorRef};

/// What the last split read besides the table's entries.
#[derive(Default)]
pub(super) struct Facts {
    /// The tables describe a complete split made without user assignments.
    pub valid: bool,
    /// The backend that rejected each node moved because of supports_op,
    /// in node order.
    pub moved: Vec<u16>,
    /// Tensors first registered as a source or view source (not as a leaf
    /// or node): checked on their own.
    pub unlisted: Vec<u32>,
    /// (slot, size) of every size a pass compared.
    pub sizes: Vec<(u32, usize)>,
}

impl Facts {
    /// Before a new split.
    pub fn clear(&mut self) {
        self.valid = false;
        self.moved.clear();
        self.unlisted.clear();
        self.sizes.clear();
    }

    /// Forget the split and give the memory back.
    pub fn forget(&mut self) {
        *self = Facts::default();
    }
}

/// [`locate`] for many tensors in a row: a buffer or two hold most of a
/// graph's tensors, so the last buffer's answer is remembered.
struct Locator<'a> {
    backends: &'a [BackendRef],
    buffer: *mut crate::buffer::wsp_ggml_backend_buffer,
    loc: u16,
}

impl Locator<'_> {
    #[inline]
    fn locate(&mut self, t: TensorRef) -> u16 {
        let buffer = t.buffer();
        if buffer.is_null() {
            return NO_BACKEND;
        }
        if buffer != self.buffer {
            self.buffer = buffer;
            self.loc = locate(self.backends, t);
        }
        self.loc
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
        let key = |slot: u32| keys.get(slot as usize).copied().unwrap_or(core::ptr::null_mut());
        let mut locator = Locator { backends: self.backends, buffer: core::ptr::null_mut(), loc: NO_BACKEND };
        // what registration read of tensor `slot`, now `t`
        let mut same = |t: TensorRef, slot: u32, vsrc: u32| {
            let i = info[slot as usize];
            t.get().view_src == key(vsrc) && SlotInfo::flags_of(t) == i.flags && locator.locate(t) == i.loc
        };
        for (&leaf, &[slot, vsrc]) in leafs.iter().zip(&st.leafs) {
            match TensorRef::new(leaf) {
                Some(t) if leaf == key(slot) && same(t, slot, vsrc) => {}
                _ => return false,
            }
        }
        // supports_op, asked again (our CPU backend is never asked)
        let cpu = cpu_backends(self.backends);
        let ask = !cpu.iter().all(|&c| c);
        let mut moved = st.reuse.moved.iter();
        let mut start = 0;
        for (&node, n) in nodes.iter().zip(&st.nodes) {
            let Some(t) = TensorRef::new(node).filter(|_| node == key(n.slot)) else {
                return false;
            };
            let end = n.srcs_end as usize;
            let srcs = &st.srcs[start..end];
            let src = &t.get().src;
            if srcs.iter().zip(src).any(|(&s, &p)| p != key(s))
                || src.get(srcs.len()).is_some_and(|p| !p.is_null())
                || !same(t, n.slot, n.vsrc)
            {
                return false;
            }
            let i = info[n.slot as usize];
            if ask && !i.has(SlotInfo::VIEW_OP) && !self.same_support(t, i, &mut moved, &cpu) {
                return false;
            }
            start = end;
        }
        if !st.reuse.unlisted.iter().all(|&slot| same(st.table.tensor(slot), slot, info[slot as usize].vsrc)) {
            return false;
        }
        st.reuse.sizes.iter().all(|&(slot, n)| st.table.tensor(slot).nbytes() == n)
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
