//! The one door between the passes (assign.rs) and C.
//!
//! A split is made in three steps: a **snapshot** (`Registrar`: every
//! tensor the split touches gets a table slot, with what registration reads
//! of it, `Seen`, and the graph's structure in slots), the **passes** over
//! that snapshot, and the **apply** step (state.rs: copies, patches, the
//! placement's walk). The passes get no tensor: whatever else they need of
//! C they ask the [`Probe`], which records every answer that can change the
//! plan (record.rs) so that a reuse (reuse.rs) can ask them all again. Names
//! for messages are not recorded: they decide nothing.

use crate::prelude::*;

use super::ids::{BackendIdx, Loc, Rule, SlotId};
use super::record::Record;
use super::state::{NodeInfo, State};
use super::table::{Attempt, Full, Seen, SlotInfo};
use crate::fatal::fatal;
use crate::ggml::{self, wsp_ggml_tensor, GraphRef, TensorRef};
use crate::handle::{BackendRef, BufferRef};

/// What the passes may ask of C about the split's tensors (by slot) and
/// backends (by index).
pub(super) struct Probe<'a> {
    keys: &'a [*mut wsp_ggml_tensor],
    backends: &'a [BackendRef<'a>],
    accepts_all: &'a [bool],
    record: &'a mut Record,
}

impl<'a> Probe<'a> {
    /// A probe over a split's table keys (the tensors of its slots), the
    /// scheduler's backends and whether each accepts every op, recording
    /// into `record`.
    ///
    /// # Safety
    /// Every key is NULL (an unregistered slot, never asked about) or a
    /// tensor that stays live for as long as the probe is used.
    pub unsafe fn new(
        keys: &'a [*mut wsp_ggml_tensor],
        backends: &'a [BackendRef<'a>],
        accepts_all: &'a [bool],
        record: &'a mut Record,
    ) -> Self {
        Probe { keys, backends, accepts_all, record }
    }

    fn tensor(&self, slot: u32) -> TensorRef {
        // SAFETY: a registered slot's key is a live tensor (`new`'s contract).
        unsafe { TensorRef::new(self.keys[slot as usize]) }.expect("a registered slot")
    }

    pub fn n_backends(&self) -> usize {
        self.backends.len()
    }

    /// Whether every backend accepts every op (no `supports_op` is asked).
    pub fn all_accept_all(&self) -> bool {
        self.accepts_all.iter().all(|&a| a)
    }

    /// The size of tensor `slot` (recorded).
    pub fn nbytes(&mut self, slot: u32) -> usize {
        let t = self.tensor(slot);
        self.record.nbytes(t, slot)
    }

    /// Whether backend `b` supports tensor `slot`'s op (recorded; a backend
    /// that accepts every op is not asked).
    #[inline]
    pub fn supports(&mut self, b: BackendIdx, slot: u32) -> bool {
        let t = self.tensor(slot);
        self.record.supports(self.backends[b], self.accepts_all[b], b, t, slot)
    }

    /// Tensor `slot`'s address: what `set_node_backend` assignments are
    /// keyed by (the table's key, compared by a reuse).
    pub fn address(&self, slot: u32) -> u64 {
        self.keys[slot as usize] as usize as u64
    }

    /// Tensor `slot`'s name, for messages.
    pub fn name(&self, slot: u32) -> String {
        self.tensor(slot).name_lossy()
    }

    /// Tensor `slot`'s op name, for messages.
    pub fn op_name(&self, slot: u32) -> String {
        ggml::op_name(self.tensor(slot).op())
    }

    /// Backend `b`'s name, for messages.
    pub fn backend_name(&self, b: BackendIdx) -> String {
        self.backends[b].name_lossy()
    }

    /// The name of the backend whose buffer tensor `slot` is in, for messages.
    pub fn memory_backend_name(&self, slot: u32) -> String {
        crate::handle::tensor_backend(self.tensor(slot)).map_or_else(|| "?".into(), BackendRef::name_lossy)
    }
}

/// The snapshot: registers the graph's tensors in the split's table.
pub(super) struct Registrar<'a> {
    pub st: &'a mut State,
    pub backends: &'a [BackendRef<'a>],
}

impl Registrar<'_> {
    /// Clear the tables and register every leaf, node, source and view source.
    pub(super) fn index_graph(&mut self, graph: GraphRef, attempt: &Attempt, func: &str) -> Result<(), Full> {
        let st = &mut self.st;
        st.table.reset_for(attempt);
        st.clear_split();
        st.graph.leafs.reserve_exact(graph.n_leafs());
        st.graph.nodes.reserve_exact(graph.n_nodes());

        // (A NULL entry would put the splits' views of the node array out of
        // step with our node list.)
        for (i, leaf) in graph.leaf_entries().enumerate() {
            let leaf = leaf.unwrap_or_else(|| fatal(func, &format!("graph leaf {i} is NULL")));
            let slot = self.register_listed(leaf)?;
            let vsrc = match leaf.view_src() {
                Some(v) => Some(SlotId::new(self.register(v, false)?)),
                None => None,
            };
            self.st.graph.leafs.push((slot, vsrc));
        }
        for (i, node) in graph.node_entries().enumerate() {
            let node = node.unwrap_or_else(|| fatal(func, &format!("graph node {i} is NULL")));
            let slot = self.register_listed(node)?;
            for (_, src) in node.srcs() {
                let s = self.register(src, false)?;
                self.st.graph.srcs.push(s);
            }
            let vsrc = match node.view_src() {
                Some(v) => Some(SlotId::new(self.register(v, false)?)),
                None => None,
            };
            self.st.graph.nodes.push(NodeInfo { slot, vsrc, srcs_end: self.st.graph.srcs.len() as u32 });
        }
        // (memory held: only a capacity far above the need is given back,
        // not one that the next graph refills)
        if self.st.graph.srcs.capacity() > 2 * self.st.graph.srcs.len() + 64 {
            self.st.graph.srcs.shrink_to_fit();
        }
        Ok(())
    }

    /// Slot of `t` in this split's table, registering it (and the tensors
    /// whose memory it views, which the allocation looks up too) on first
    /// sight. `listed`: `t` is a leaf or node of the graph (the others are
    /// remembered, for reuse.rs to check their locations).
    #[inline(always)]
    fn register(&mut self, t: TensorRef, listed: bool) -> Result<u32, Full> {
        let (slot, new) = self.st.table.insert(t)?;
        if new {
            self.register_new(slot, t, listed)?;
        }
        Ok(slot)
    }

    /// [`Planner::register`] for a graph leaf or node: nearly always its
    /// first sight, so all of it inline.
    #[inline(always)]
    fn register_listed(&mut self, t: TensorRef) -> Result<u32, Full> {
        let (slot, new) = self.st.table.insert(t)?;
        if new {
            self.describe(slot, t, true);
            if t.get().view_src.is_null() {
                return Ok(slot);
            }
            self.register_view_chain(slot, t)?;
        }
        Ok(slot)
    }

    /// The first sight of `t` (most look-ups find a source already seen as
    /// a node, so this stays out of line).
    #[inline(never)]
    fn register_new(&mut self, slot: u32, t: TensorRef, listed: bool) -> Result<(), Full> {
        self.describe(slot, t, listed);
        self.register_view_chain(slot, t)
    }

    /// Register the tensors whose memory `t` (in `slot`) views.
    fn register_view_chain(&mut self, slot: u32, t: TensorRef) -> Result<(), Full> {
        let (mut at, mut next) = (slot, t.view_src());
        while let Some(v) = next {
            let (s, new) = self.st.table.insert(v)?;
            self.st.table.info[at as usize].vsrc = Some(SlotId::new(s));
            if !new {
                break;
            }
            self.describe(s, v, false);
            (at, next) = (s, v.view_src());
        }
        Ok(())
    }

    #[inline(always)]
    fn describe(&mut self, slot: u32, t: TensorRef, listed: bool) {
        // (the view source's slot is set when it is registered)
        let seen = Seen::read(t, |t| locate(self.backends, t));
        self.st.table.info[slot as usize] =
            SlotInfo { assign: None, packed_loc: seen.loc.into(), rule: Rule::Unset, flags: seen.flags, vsrc: None };
        if !listed {
            self.st.reuse.unlisted.push(slot);
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
