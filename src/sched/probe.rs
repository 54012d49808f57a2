//! The planner's door to C (the planner, sched/plan, cannot see C).
//!
//! A split is made in three steps: a **snapshot** (`Registrar`: every
//! tensor the split touches gets a table slot, with what registration reads
//! of it (table.rs), and the graph's structure in slots), the **plan** over
//! that snapshot, and the **apply** step (state.rs: copies, patches, the
//! placement's walk). Whatever else the planner needs of C it asks the
//! [`CProbe`] here, which reads C and logs every answer that can change the
//! plan (record.rs) so that a reuse (reuse.rs) can ask them all again
//! ([`Again`]). Names for messages are not logged: they decide nothing.

use crate::prelude::*;

use super::ids::{BackendIdx, Loc, Slot, SlotId};
use super::live::Live;
use super::plan::{GraphSlots, NodeInfo, Probe, Questions, SlotInfo};
use super::record::{Record, Via};
use super::table::{flags_of, Full, Table};
use crate::fatal::fatal;
use crate::ggml::{self, GraphRef, TensorRef};
use crate::handle::{BackendRef, BufferRef};
use crate::ptrmap::PtrMap;

/// The planner's [`Probe`] over a split's table keys (the tensors of its
/// slots) and the scheduler's backends, logging into `record`.
pub(super) struct CProbe<'a, 'c> {
    live: &'a Live<'c>,
    backends: &'a [BackendRef<'a>],
    record: &'a mut Record,
}

impl<'a, 'c> CProbe<'a, 'c> {
    pub fn new(live: &'a Live<'c>, backends: &'a [BackendRef<'a>], record: &'a mut Record) -> Self {
        CProbe { live, backends, record }
    }

    fn tensor(&self, slot: Slot) -> TensorRef<'c> {
        self.live.get(slot)
    }
}

impl Questions for CProbe<'_, '_> {
    fn nbytes(&mut self, slot: Slot) -> usize {
        let bytes = self.tensor(slot).nbytes();
        self.record.nbytes(slot, bytes);
        bytes
    }

    #[inline]
    fn supports(&mut self, b: BackendIdx, slot: Slot) -> bool {
        let yes = self.backends[b].supports_op(self.tensor(slot));
        self.record.supports(b, slot, yes);
        yes
    }
}

impl Probe for CProbe<'_, '_> {
    fn name(&self, slot: Slot) -> String {
        self.tensor(slot).name_lossy()
    }

    fn op_name(&self, slot: Slot) -> String {
        ggml::op_name(self.tensor(slot).op())
    }

    fn backend_name(&self, b: BackendIdx) -> String {
        self.backends[b].name_lossy()
    }

    fn memory_backend_name(&self, slot: Slot) -> String {
        crate::handle::tensor_backend(self.tensor(slot)).map_or_else(|| "?".into(), BackendRef::name_lossy)
    }
}

/// The logged questions asked again, of the tensors in `table` now.
pub(super) struct Again<'a, 'c> {
    live: &'a Live<'c>,
    backends: &'a [BackendRef<'a>],
}

impl<'a, 'c> Again<'a, 'c> {
    /// Asking the tensors of `live`, the scheduler's `backends`.
    pub fn new(live: &'a Live<'c>, backends: &'a [BackendRef<'a>]) -> Self {
        Again { live, backends }
    }
}

impl Questions for Again<'_, '_> {
    fn nbytes(&mut self, slot: Slot) -> usize {
        self.live.get(slot).nbytes()
    }

    fn supports(&mut self, b: BackendIdx, slot: Slot) -> bool {
        self.backends[b].supports_op(self.live.get(slot))
    }
}

/// The snapshot: registers the graph's tensors in the split's table
/// (empty), its structure in slots (`graph`), the `set_node_backend`
/// assignments by slot and how the unlisted tensors were reached (in the
/// split's log); the parts of a split (state.rs) that registration writes.
pub(super) struct Registrar<'a, 'c> {
    table: &'a mut Table,
    graph: &'a mut GraphSlots,
    /// `set_node_backend` assignments by slot (`State::user_slots`).
    user_slots: &'a mut PtrMap,
    log: &'a mut Record,
    /// The handles of the slots registered.
    live: &'a mut Live<'c>,
    backends: &'a [BackendRef<'a>],
    /// `set_node_backend` assignments by tensor address: resolved to the
    /// slots of the tensors registered.
    user: &'a PtrMap,
}

impl<'a, 'c> Registrar<'a, 'c> {
    /// A registration of a split's tensors into its parts, all empty (the
    /// split's own to clear, state.rs).
    pub fn new(
        table: &'a mut Table,
        graph: &'a mut GraphSlots,
        user_slots: &'a mut PtrMap,
        log: &'a mut Record,
        live: &'a mut Live<'c>,
        backends: &'a [BackendRef<'a>],
        user: &'a PtrMap,
    ) -> Self {
        Registrar { table, graph, user_slots, log, live, backends, user }
    }

    /// Register every leaf, node, source and view source.
    pub(super) fn index_graph(&mut self, graph: GraphRef<'c>, func: &str) -> Result<(), Full> {
        self.graph.leafs.reserve_exact(graph.n_leafs());
        self.graph.nodes.reserve_exact(graph.n_nodes());

        // (A NULL entry would put the splits' views of the node array out of
        // step with our node list.)
        for (i, leaf) in graph.leaf_entries().enumerate() {
            let leaf = leaf.unwrap_or_else(|| fatal(func, &format!("graph leaf {i} is NULL")));
            let slot = self.register_listed(leaf)?;
            let vsrc = match leaf.view_src() {
                Some(v) => Some(self.register(v, Via::ViewSrc { of: slot })?),
                None => None,
            };
            self.graph.leafs.push((slot, vsrc.map(SlotId::from)));
        }
        // The node before: ggml builds a graph op by op, so a node's source
        // is most often the node just before it, found without hashing.
        let mut last: Option<(TensorRef<'c>, Slot)> = None;
        for (i, node) in graph.node_entries().enumerate() {
            let node = node.unwrap_or_else(|| fatal(func, &format!("graph node {i} is NULL")));
            let slot = self.register_listed(node)?;
            for (j, src) in node.srcs() {
                let s = match last {
                    Some((t, s)) if t == src => s,
                    _ => self.register(src, Via::Src { of: slot, j: j as u8 })?,
                };
                self.graph.srcs.push(s);
            }
            last = Some((node, slot));
            let vsrc = match node.view_src() {
                Some(v) => Some(self.register(v, Via::ViewSrc { of: slot })?),
                None => None,
            };
            self.graph.nodes.push(NodeInfo { slot, vsrc: vsrc.map(SlotId::from), srcs_end: self.graph.srcs.len() as u32 });
        }
        // (the vectors keep their capacity: a graph no larger than one
        // registered since the last measure allocates nothing)
        Ok(())
    }

    /// Slot of `t` in this split's table, registering it (and the tensors
    /// whose memory it views, which the allocation looks up too) on first
    /// sight. `t` is no leaf or node of the graph, reached `via` a tensor
    /// registered before (remembered, for reuse.rs to find it again and
    /// check its location).
    #[inline(always)]
    fn register(&mut self, t: TensorRef<'c>, via: Via) -> Result<Slot, Full> {
        let (slot, new) = self.table.insert(t.id())?;
        if new {
            self.register_new(slot, t, via)?;
        }
        Ok(slot)
    }

    /// [`Registrar::register`] for a graph leaf or node: nearly always its
    /// first sight, so all of it inline.
    #[inline(always)]
    fn register_listed(&mut self, t: TensorRef<'c>) -> Result<Slot, Full> {
        let (slot, new) = self.table.insert(t.id())?;
        if new {
            self.describe(slot, t, None);
            if t.view_src_id().is_none() {
                return Ok(slot);
            }
            self.register_view_chain(slot, t)?;
        }
        Ok(slot)
    }

    /// The first sight of `t` (most look-ups find a source already seen as
    /// a node, so this stays out of line).
    #[inline(never)]
    fn register_new(&mut self, slot: Slot, t: TensorRef<'c>, via: Via) -> Result<(), Full> {
        self.describe(slot, t, Some(via));
        self.register_view_chain(slot, t)
    }

    /// Register the tensors whose memory `t` (in `slot`) views.
    fn register_view_chain(&mut self, slot: Slot, t: TensorRef<'c>) -> Result<(), Full> {
        let (mut at, mut next) = (slot, t.view_src());
        while let Some(v) = next {
            let (s, new) = self.table.insert(v.id())?;
            self.table.set_view_src(at, s);
            if !new {
                break;
            }
            self.describe(s, v, Some(Via::ViewSrc { of: at }));
            (at, next) = (s, v.view_src());
        }
        Ok(())
    }

    #[inline(always)]
    /// `via`: how an unlisted tensor was reached (`None`: a leaf or node).
    fn describe(&mut self, slot: Slot, t: TensorRef<'c>, via: Option<Via>) {
        // (the view source's slot is set when it is registered)
        self.live.set_new(slot, t);
        self.table.describe(slot, SlotInfo::registered(locate(self.backends, t), flags_of(t)));
        if !self.user.is_empty() {
            if let Some(b) = self.user.get(t.id().addr() as u64) {
                self.user_slots.insert(slot.key(), b);
            }
        }
        if let Some(via) = via {
            self.log.note_unlisted(slot, via);
        }
    }
}

/// Where `t`'s memory is: the backend of its buffer among `backends`.
pub(super) fn locate(backends: &[BackendRef], t: TensorRef) -> Loc {
    let Some(backend) = BufferRef::of_tensor(t).and_then(BufferRef::backend) else {
        return Loc::Nowhere;
    };
    backends.iter().position(|&b| b == backend).map_or(Loc::Foreign, |i| Loc::At(BackendIdx::new(i)))
}
