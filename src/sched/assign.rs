//! Backend assignment and graph splitting: the original's four passes, run
//! over a slot-indexed copy of the graph (each tensor is hashed once per
//! split, when the graph is indexed; the passes only index arrays). The
//! passes hold no tensor: they read the snapshot (`SlotInfo`, `GraphSlots`)
//! and ask everything else through the [`Probe`] (probe.rs), which records
//! what a reuse must ask again.

use crate::prelude::*;

use super::ids::{BackendIdx, Loc, Rule, SlotId};
use super::probe::{Probe, Registrar};
use super::state::{CopyOf, GraphSlots, NodeInfo, Patch, Sched, Split, SplitPlan, State};
use super::table::{Attempt, Retry, SlotInfo};
use crate::ptrmap::PtrMap;

use crate::fatal::fatal;
use crate::ggml::GraphRef;
use crate::handle::BackendRef;

/// The best candidate of the original's source rule: a source wins if its
/// backend has a better priority *and* it is at least as large as the current
/// winner. Sizes are only computed when two candidates meet.
#[derive(Clone, Copy)]
struct Best {
    prio: BackendIdx,
    slot: u32,
    j: u8,
    size: Option<usize>,
}

/// The computed nodes of every in-place chain, by the memory they work in:
/// (root slot, node slot) for each non-view node with a view source, sorted
/// by root. Built on the first move of a chained node (memory roots depend
/// only on what registration read, so one build serves the whole pass).
#[derive(Default)]
struct Chains {
    built: bool,
    members: Vec<(u32, u32)>,
}

impl Chains {
    fn build(&mut self, p: &Planner<'_>) {
        self.built = true;
        for n in &p.graph.nodes {
            if let Some(vs) = n.vsrc.filter(|_| !p.view_op(n.slot)) {
                self.members.push((p.memory_root(vs), n.slot));
            }
        }
        // (stable: the members of one chain stay in graph order, so the
        // questions are asked, and recorded, in the same order every time)
        self.members.sort_by_key(|&(root, _)| root);
    }

    /// The nodes that work in the memory of `root`, in graph order.
    fn of(&self, root: u32) -> Vec<u32> {
        let start = self.members.partition_point(|&(r, _)| r < root);
        self.members[start..].iter().take_while(|&&(r, _)| r == root).map(|&(_, m)| m).collect()
    }
}

/// The passes, over one split's snapshot: per slot what registration read
/// and the backend and rule they give it (`slots`), the graph in slots, and
/// what they decide besides (`plan`); C only through the probe.
pub(super) struct Planner<'a> {
    pub probe: Probe<'a>,
    pub slots: &'a mut [SlotInfo],
    pub graph: &'a GraphSlots,
    pub plan: &'a mut SplitPlan,
    pub user: &'a PtrMap,
    pub debug: bool,
    /// Planning for `init_measure`/`reserve`: only sizes come of it, so
    /// what the original let through there is let through (see `lenient`).
    pub measuring: bool,
    /// Set when a measure plan let something through that a compute would
    /// refuse: such a split is not reused.
    pub lenient: bool,
}

/// What a split is planned with besides the graph: the scheduler's
/// backends (and which accept every op), user assignments and switches.
pub(super) struct PlanInputs<'a> {
    pub backends: &'a [BackendRef<'a>],
    pub accepts_all: &'a [bool],
    pub user: &'a PtrMap,
    pub debug: bool,
    pub measuring: bool,
}

/// Make a split of `graph` in `st`: snapshot (registration), the passes,
/// then apply (copies, patches, the placement's walk, split views).
/// Returns whether the plan was lenient (see `Planner::lenient`).
pub(super) fn make_split(st: &mut State, inputs: &PlanInputs<'_>, graph: GraphRef, attempt: &Attempt, func: &str) -> Result<bool, Retry> {
    Registrar { st, backends: inputs.backends }.index_graph(graph, attempt, func)?;
    st.table.accept(attempt)?;
    let lenient = {
        let (keys, slots) = st.table.parts_mut();
        let mut p = Planner {
            // SAFETY: the keys were just registered from `graph` (tensors of
            // the graph being split, live for the call: C contract), and the
            // probe lives only for this planning.
            probe: unsafe { Probe::new(keys, inputs.backends, inputs.accepts_all, &mut st.reuse) },
            slots,
            graph: &st.graph,
            plan: &mut st.plan,
            user: inputs.user,
            debug: inputs.debug,
            measuring: inputs.measuring,
            lenient: false,
        };
        p.run(func);
        p.lenient
    };
    st.make_copies(inputs.backends)?;
    st.patch();
    st.build_order();
    st.view_splits(graph);
    Ok(lenient)
}

impl Planner<'_> {
    /// The facts of tensor `slot` read when it was registered.
    #[inline]
    fn info(&self, slot: u32) -> SlotInfo {
        self.slots[slot as usize]
    }

    /// Whether some registered tensor works in tensor `slot`'s memory (a
    /// view of it: the placement needs that memory to initialise the view).
    fn viewed(&self, slot: u32) -> bool {
        self.slots.iter().any(|i| i.vsrc == Some(SlotId::new(slot)))
    }

    /// Whether tensor `slot`'s op is a view op.
    #[inline]
    fn view_op(&self, slot: u32) -> bool {
        self.info(slot).has(SlotInfo::VIEW_OP)
    }

    #[inline]
    fn set(&mut self, slot: u32, backend: BackendIdx, rule: Rule) {
        let info = &mut self.slots[slot as usize];
        info.assign = Some(backend);
        info.rule = rule;
    }

    #[inline]
    fn assign(&self, slot: u32) -> Option<BackendIdx> {
        self.slots[slot as usize].assign
    }

    #[inline]
    fn loc(&self, slot: u32) -> Loc {
        self.slots[slot as usize].loc()
    }

    /// The `set_node_backend` assignment of tensor `slot`, where it can be
    /// honoured. Memory decides first: a tensor that already has memory, or
    /// works in another's (a view, an in-place op, a copy into a tensor),
    /// runs where that memory is, and a node never goes to a backend whose
    /// `supports_op` rejects it. The original ignored every assignment, so
    /// ignoring one is its behaviour (said under WSP_GGML_SCHED_DEBUG).
    #[inline]
    fn user_assignment(&mut self, slot: u32, vsrc: Option<SlotId>, is_node: bool) -> Option<BackendIdx> {
        if self.user.is_empty() {
            return None;
        }
        self.applicable_user_assignment(slot, vsrc, is_node)
    }

    #[cold]
    fn applicable_user_assignment(&mut self, slot: u32, vsrc: Option<SlotId>, is_node: bool) -> Option<BackendIdx> {
        let b = BackendIdx::new(self.user.get(self.probe.address(slot))? as usize);
        let why = if self.loc(slot).in_buffer() || (is_node && self.info(slot).has(SlotInfo::HAS_DATA)) {
            "it already has memory"
        } else if vsrc.is_some() {
            "it works in the memory of another tensor"
        } else if is_node && !self.supports(b, slot) {
            "that backend does not support it"
        } else {
            return Some(b);
        };
        if self.debug {
            crate::platform::errln!(
                "wsp_ggml_backend_sched: set_node_backend('{}', '{}') not applied: {why}",
                self.probe.name(slot),
                self.probe.backend_name(b)
            );
        }
        None
    }

    /// Size of tensor `slot`, asked through the probe (recorded).
    fn nbytes(&mut self, slot: u32) -> usize {
        self.probe.nbytes(slot)
    }

    /// Whether backend `b` supports tensor `slot`'s op, asked through the
    /// probe (recorded): every `supports_op` question of the passes.
    #[inline]
    fn supports(&mut self, b: BackendIdx, slot: u32) -> bool {
        self.probe.supports(b, slot)
    }

    /// The next backend after `a` in priority order (wrapping around) that
    /// supports tensor `slot`.
    fn next_supporting(&mut self, a: BackendIdx, slot: u32) -> Option<BackendIdx> {
        let n = self.probe.n_backends();
        (1..n).map(|d| BackendIdx::new((a.get() + d) % n)).find(|&b| self.supports(b, slot))
    }

    /// Fold candidate (`prio`, `slot`) into `best` by the original's rule.
    #[inline]
    fn consider(&mut self, best: &mut Option<Best>, prio: BackendIdx, slot: u32, j: usize) {
        match *best {
            None => *best = Some(Best { prio, slot, j: j as u8, size: None }),
            Some(b) if prio < b.prio => {
                let cur = match b.size {
                    Some(s) => s,
                    None => self.nbytes(b.slot),
                };
                let size = self.nbytes(slot);
                *best = Some(if size >= cur { Best { prio, slot, j: j as u8, size: Some(size) } } else { Best { size: Some(cur), ..b } });
            }
            Some(_) => {}
        }
    }

    /// The backend of location `loc` (in a buffer) of tensor `slot`,
    /// aborting if it is a backend the scheduler does not have (the original
    /// indexed out of bounds).
    fn known(&self, loc: Loc, slot: u32, func: &str) -> BackendIdx {
        if let Loc::At(b) = loc {
            return b;
        }
        let backend = self.probe.memory_backend_name(slot);
        fatal(
            func,
            &format!(
                "tensor '{}' lives in a buffer of backend '{backend}', which is not one of the scheduler's backends",
                self.probe.name(slot)
            ),
        );
    }

    /// Sources of node `i` (their positions in `GraphSlots::srcs`).
    #[inline]
    fn node_srcs(&self, i: usize) -> core::ops::Range<usize> {
        self.graph.node_srcs(i)
    }

    /// Name and op name of node `i`, for messages.
    fn node_names(&self, i: usize) -> (String, String) {
        let slot = self.graph.nodes[i].slot;
        (self.probe.name(slot), self.probe.op_name(slot))
    }
}

impl Sched {
    /// Assign every node to a backend and cut the graph into splits; reuse
    /// the last split when the graph and everything it depends on are
    /// unchanged.
    /// Returns whether the split is new (not the last one, reused).
    pub(super) fn split_graph(&mut self, graph: GraphRef, func: &str) -> bool {
        let same = self.user.is_empty() && self.st.still_valid(&self.backends, graph);
        let refit = if same { self.st.sizing.on_reuse(&self.st.table) } else { None };
        // (a refit makes the same split in a new table: its slots are new)
        let reused = same && refit.is_none();
        if reused {
            self.reuse_split(graph);
        } else {
            let listed = graph.n_nodes() + graph.n_leafs();
            let mut attempt = self.st.sizing.first_attempt(listed, &self.st.table, refit);
            let lenient = loop {
                match self.try_split(graph, &attempt, func) {
                    Ok(lenient) => break lenient,
                    Err(why) => attempt.retry(why, &self.st.table),
                }
                self.st.unpatch();
            };
            self.st.sizing.split_made(&self.st.table, listed, refit.is_some());
            self.st.reuse.valid = self.user.is_empty() && !lenient;
        }
        if self.debug {
            self.print_assignments(graph);
        }
        !reused
    }

    /// Returns whether the plan was lenient (see `Planner::lenient`).
    fn try_split(&mut self, graph: GraphRef, attempt: &Attempt, func: &str) -> Result<bool, Retry> {
        let inputs = PlanInputs {
            backends: &self.backends,
            accepts_all: &self.accepts_all,
            user: &self.user,
            debug: self.debug,
            measuring: self.measuring,
        };
        make_split(&mut self.st, &inputs, graph, attempt, func)
    }
}

impl Planner<'_> {
    /// The passes: assignments, splits, input copies.
    fn run(&mut self, func: &str) {
        self.pass1_from_locations(func);
        self.pass2_from_sources();
        self.move_unsupported_nodes(func);
        self.pass3_from_consumers(func);
        self.pass4_split(func);
    }

    /// Pass 1: leafs and nodes whose memory (or view source, or a source's
    /// memory) already lives on a backend.
    fn pass1_from_locations(&mut self, func: &str) {
        for k in 0..self.graph.leafs.len() {
            let (slot, vsrc) = self.graph.leafs[k];
            if let Some(b) = self.user_assignment(slot, vsrc, false) {
                self.set(slot, b, Rule::User);
                continue;
            }
            if self.assign(slot).is_some() {
                continue;
            }
            let mut loc = self.loc(slot);
            if let (Loc::Nowhere, Some(v)) = (loc, vsrc) {
                loc = self.loc(v.get());
            }
            if loc.in_buffer() {
                let b = self.known(loc, slot, func);
                self.set(slot, b, Rule::Leaf);
            }
        }
        for i in 0..self.graph.nodes.len() {
            let NodeInfo { slot, vsrc: vs, .. } = self.graph.nodes[i];
            if let Some(b) = self.user_assignment(slot, vs, true) {
                self.set(slot, b, Rule::User);
                continue;
            }
            if self.assign(slot).is_some() {
                continue;
            }
            // The destination is already allocated: keep it there (e.g. KV cache updates).
            let loc = self.loc(slot);
            if loc.in_buffer() {
                let b = self.known(loc, slot, func);
                self.set(slot, b, Rule::Dst);
                continue;
            }
            if let Some(vs) = vs.map(SlotId::get).filter(|&vs| self.loc(vs).in_buffer()) {
                let b = self.known(self.loc(vs), vs, func);
                self.set(slot, b, Rule::ViewSrc);
                continue;
            }
            let mut best = None;
            for (j, k) in self.node_srcs(i).enumerate() {
                let sid = self.graph.srcs[k];
                if let Loc::At(prio) = self.loc(sid) {
                    self.consider(&mut best, prio, sid, j);
                }
            }
            if let Some(b) = best {
                self.set(slot, b.prio, Rule::Src(b.j));
            }
        }
    }

    /// Pass 2: remaining nodes follow their sources' assignments (same rule).
    fn pass2_from_sources(&mut self) {
        for i in 0..self.graph.nodes.len() {
            let slot = self.graph.nodes[i].slot;
            if self.assign(slot).is_some() {
                continue;
            }
            let mut best = None;
            for (j, k) in self.node_srcs(i).enumerate() {
                let sid = self.graph.srcs[k];
                if let Some(a) = self.assign(sid) {
                    self.consider(&mut best, a, sid, j);
                }
            }
            if let Some(b) = best {
                self.set(slot, b.prio, Rule::Pass2Src(b.j));
            }
        }
    }

    /// Where the memory a node works in comes from: the first tensor along
    /// its view sources that is in a buffer, or the last one (a tensor
    /// the placement will allocate, or memory outside any backend buffer).
    fn memory_root(&self, vs: SlotId) -> u32 {
        let mut r = vs.get();
        while let (Loc::Nowhere, Some(v)) = (self.loc(r), self.info(r).vsrc) {
            r = v.get();
        }
        r
    }

    /// Memory decides: a node that works in another tensor's memory (a view,
    /// an in-place op, a copy into a tensor) runs on the backend that memory
    /// is allocated by, once that is known (the placement initialises it with
    /// that backend's allocator; the original asserted there, or in release
    /// builds initialised it in another backend's buffer).
    fn follow_memory(&mut self, slot: u32, vs: Option<SlotId>) {
        let Some(vs) = vs else {
            return;
        };
        let Some(owner) = self.assign(vs.get()).filter(|&o| Some(o) != self.assign(slot)) else {
            return;
        };
        // Memory outside any backend buffer (a plain ggml context) pins nothing.
        let root = self.memory_root(vs);
        if self.loc(root) == Loc::Nowhere && self.info(root).has(SlotInfo::HAS_DATA) {
            return;
        }
        self.set(slot, owner, Rule::FollowsMemory);
    }

    /// Not in the original: a node never runs on a backend whose `supports_op`
    /// rejects it. It moves to the next backend in priority order (wrapping
    /// around) that supports it; its inputs are then copied like any other.
    /// A node that works in the memory of another (an in-place op, a view, a
    /// copy into a tensor) moves with that memory: when the memory is not
    /// allocated yet, the whole in-place chain (the owner of the memory and
    /// every node that works in it) moves to the next backend that supports
    /// every op of the chain (`chain_backend`); memory that is already in a
    /// buffer of the rejecting backend is an error. With backends that
    /// support every op nothing moves. Memory is followed first (see
    /// `follow_memory`), here and after the moves.
    fn move_unsupported_nodes(&mut self, func: &str) {
        // Our CPU backend supports every op: skip the walk when all backends are CPU.
        let ask = !self.probe.all_accept_all();
        let mut owners_moved = false;
        let mut chains = Chains::default();
        for i in 0..self.graph.nodes.len() {
            let info = self.graph.nodes[i];
            let (slot, vs) = (info.slot, info.vsrc);
            self.follow_memory(slot, vs);
            if !ask || self.view_op(slot) {
                continue;
            }
            let Some(a) = self.assign(slot).filter(|&a| !self.supports(a, slot)) else {
                continue;
            };
            let (node, op) = self.node_names(i);
            let root = vs.map(|vs| self.memory_root(vs));
            let pinned = match (self.slots[slot as usize].rule, root) {
                (Rule::Dst | Rule::ViewSrc, _) => Some("its memory is on that backend".to_string()),
                (_, Some(r)) if self.loc(r).in_buffer() => {
                    Some(format!("it works in the memory of '{}', which is on that backend", self.probe.name(r)))
                }
                _ => None,
            };
            if let Some(why) = pinned {
                fatal(
                    func,
                    &format!(
                        "node '{node}' ({op}) must run on backend '{}' ({why}), which does not support it",
                        self.probe.backend_name(a)
                    ),
                );
            }
            // Memory outside any backend buffer (a plain ggml context) ties nothing.
            let owner = root.filter(|&r| !(self.loc(r) == Loc::Nowhere && self.info(r).has(SlotInfo::HAS_DATA)));
            let b = match owner {
                None => self.next_supporting(a, slot),
                Some(r) => self.chain_backend(a, r, &mut chains),
            };
            let Some(b) = b else {
                if let Some(owner) = owner.filter(|_| self.next_supporting(a, slot).is_some()) {
                    fatal(
                        func,
                        &format!(
                            "node '{node}' ({op}) works in the memory of '{}', and no backend of the scheduler supports \
                             every op that works in that memory",
                            self.probe.name(owner)
                        ),
                    );
                }
                fatal(func, &format!("no backend of the scheduler supports node '{node}' ({op})"))
            };
            if let Some(r) = root.filter(|&r| self.assign(r) != Some(b)) {
                // The memory is not allocated yet: its owner moves too (and
                // the rest of its chain follows it, below).
                self.set(r, b, Rule::FollowsMemory);
                owners_moved = true;
            }
            self.set(slot, b, Rule::Unsupported);
        }
        if owners_moved {
            // Views and in-place nodes of a moved owner that came before the move.
            for i in 0..self.graph.nodes.len() {
                let NodeInfo { slot, vsrc, .. } = self.graph.nodes[i];
                self.follow_memory(slot, vsrc);
            }
        }
    }

    /// The backend for the in-place chain of memory owner `r` (not in a
    /// buffer yet), one of whose nodes backend `a` rejects: the next backend
    /// after `a` in priority order (wrapping around) that supports every
    /// computed op of the chain, i.e. `r` itself and each node whose memory
    /// is `r`'s. The chain moves as a whole, since all of it works in one
    /// allocation. None when no backend supports all of it.
    fn chain_backend(&mut self, a: BackendIdx, r: u32, chains: &mut Chains) -> Option<BackendIdx> {
        if !chains.built {
            chains.build(self);
        }
        let members = chains.of(r);
        let n = self.probe.n_backends();
        (1..n)
            .map(|d| BackendIdx::new((a.get() + d) % n))
            .find(|&b| (!self.info(r).has(SlotInfo::COMPUTED) || self.supports(b, r)) && members.iter().all(|&m| self.supports(b, m)))
    }

    /// Pass 3: unassigned sources (leafs in practice, but also earlier nodes
    /// that nothing assigned) go where their consumer is, in node order: a
    /// source takes the backend of the first consumer that has one.
    fn pass3_from_consumers(&mut self, func: &str) {
        let mut placed = false;
        for i in 0..self.graph.nodes.len() {
            let Some(a) = self.assign(self.graph.nodes[i].slot) else {
                continue; // the original assigns "no backend": nothing changes
            };
            for k in self.node_srcs(i) {
                let sid = self.graph.srcs[k];
                if self.assign(sid).is_none() {
                    self.set(sid, a, Rule::FromConsumer);
                    placed = true;
                }
            }
        }
        if placed {
            self.follow_memory_placed_by_pass3(func);
        }
    }

    /// Memory that pass 3 placed decides too: a view or in-place node whose
    /// memory's owner got a backend only now (or that got one itself from
    /// its consumer, while its owner has another) runs where that memory is;
    /// its consumers then get copies (the original initialised it in the
    /// wrong backend's buffer, or asserted). The moves are over: a backend
    /// that rejects the node it must take is an error, except while
    /// measuring: the memory got its backend only from pass 3, so, as in
    /// `check_assigned_by_pass3`, the node is sized where the original
    /// measured it, and a compute decides again with the memory allocated.
    fn follow_memory_placed_by_pass3(&mut self, func: &str) {
        for i in 0..self.graph.nodes.len() {
            let NodeInfo { slot, vsrc, .. } = self.graph.nodes[i];
            let before = self.assign(slot);
            self.follow_memory(slot, vsrc);
            let Some(b) = self.assign(slot).filter(|&b| Some(b) != before) else {
                continue;
            };
            if self.view_op(slot) || self.supports(b, slot) {
                continue;
            }
            if self.measuring {
                self.lenient = true;
                continue;
            }
            let (node, op) = self.node_names(i);
            let owner = self.probe.name(self.memory_root(vsrc.expect("it moved to follow its view source")));
            fatal(
                func,
                &format!(
                    "node '{}' ({}) must run on backend '{}' (it works in the memory of '{}', which is allocated \
                     there), which does not support it",
                    node,
                    op,
                    self.probe.backend_name(b),
                    owner
                ),
            );
        }
    }

    /// A node that only pass 3 gave a backend (its consumer's) must be
    /// supported there: it was not placed when unsupported nodes moved, and
    /// it has nowhere else to go without its sources, so a rejection is an
    /// error (the original would run it there anyway). Asked from pass 4's
    /// walk, which reads each node's slot anyway.
    fn check_assigned_by_pass3(&mut self, i: usize, a: BackendIdx, func: &str) -> BackendIdx {
        let slot = self.graph.nodes[i].slot;
        if self.supports(a, slot) {
            return a;
        }
        let (node, op) = self.node_names(i);
        if self.measuring {
            // The original measured it there; a backend that supports it
            // sizes it as well (a compute decides again, with its inputs).
            if let Some(b) = self.next_supporting(a, slot) {
                self.set(self.graph.nodes[i].slot, b, Rule::Unsupported);
                self.lenient = true;
                return b;
            }
        }
        fatal(
            func,
            &format!(
                "node '{}' ({}) gets backend '{}' only from the node that consumes it, and that backend does not \
                 support it (pre-allocate its inputs, or assign it with set_node_backend)",
                node,
                op,
                self.probe.backend_name(a)
            ),
        )
    }

    /// Pass 4: cut a split wherever the backend changes (view ops never cut),
    /// and plan copies on the split's backend for sources living elsewhere
    /// (made by `make_copies`, patched into the graph by `State::patch`). A node still without a backend would crash the original
    /// later; we stop with a message instead.
    fn pass4_split(&mut self, func: &str) {
        let n = self.graph.nodes.len();
        let Some(mut cur) = self.first_split_backend() else {
            // No node has a backend: each must be a view of memory that is
            // set (nothing to compute).
            (0..n).for_each(|i| self.accept_unassigned_node(i, func));
            return;
        };
        self.plan.splits.push(Split { backend: cur, i_start: 0, i_end: n, inputs: 0..0 });
        for i in 0..n {
            let info = self.graph.nodes[i];
            let Some(a) = self.assign(info.slot) else {
                self.accept_unassigned_node(i, func); // a view of memory that is set, or abort
                continue;
            };
            if self.view_op(info.slot) {
                continue;
            }
            let a = if self.slots[info.slot as usize].rule == Rule::FromConsumer { self.check_assigned_by_pass3(i, a, func) } else { a };
            if a != cur {
                let inputs_at = self.plan.inputs.len();
                self.plan.splits.last_mut().expect("a split exists").i_end = i;
                self.plan.splits.push(Split { backend: a, i_start: i, i_end: n, inputs: inputs_at..inputs_at });
                cur = a;
            }
            self.route_inputs(i, cur, func);
        }
    }

    /// The first split's backend: that of the first node that is not a view.
    /// A graph of views only still gets a split (on the backend of their
    /// memory), so that the placement initialises the views. None: no node
    /// has a backend.
    fn first_split_backend(&self) -> Option<BackendIdx> {
        let nodes = &self.graph.nodes;
        let first = nodes.iter().find(|n| n.vsrc.is_none()).or_else(|| nodes.iter().find(|n| !self.view_op(n.slot)));
        // (an unassigned first node stops pass 4 unless it is a view of set memory)
        first.and_then(|n| self.assign(n.slot)).or_else(|| nodes.iter().find_map(|n| self.assign(n.slot)))
    }

    /// Node `i` has no backend: only a view op whose data is set (its memory
    /// exists, the placement leaves it alone) is accepted; reuse checks the data
    /// stays set.
    fn accept_unassigned_node(&mut self, i: usize, func: &str) {
        let info = self.graph.nodes[i];
        if !self.view_op(info.slot) || !self.info(info.slot).has(SlotInfo::HAS_DATA) {
            let (node, op) = self.node_names(i);
            fatal(
                func,
                &format!(
                    "node '{}' ({}) cannot be assigned to a backend: neither it nor any of its sources is in a \
                     backend buffer (pre-allocate the graph's inputs or weights)",
                    node, op
                ),
            );
        }
    }

    /// Point node `i`'s sources that are not on `cur` (its split's backend)
    /// at their copies on `cur`, listing each copy once as an input of the
    /// split.
    fn route_inputs(&mut self, i: usize, cur: BackendIdx, func: &str) {
        let split = self.plan.splits.len() as u32 - 1;
        for (j, k) in self.node_srcs(i).enumerate() {
            let sid = self.graph.srcs[k];
            if self.assign(sid) == Some(cur) {
                continue;
            }
            if self.assign(sid).is_none() {
                // Its copy would be made from nothing (the original crashes
                // in ggml-alloc); with data, copy_input copies from it.
                if !self.info(sid).has(SlotInfo::HAS_DATA) && self.measuring && !self.viewed(sid) {
                    // The original measured a copy of it (an input the
                    // caller allocates after the measure); so do we.
                    self.lenient = true;
                } else if !self.info(sid).has(SlotInfo::HAS_DATA) {
                    let (src, node) = (self.probe.name(sid), self.node_names(i).0);
                    fatal(
                        func,
                        &format!(
                            "source '{}' of node '{}' is in no backend buffer, has no data, and no rule assigns it \
                             (pre-allocate the graph's inputs or weights)",
                            src, node
                        ),
                    );
                }
            }
            let copy = self.copy_for(sid, cur);
            let of = &mut self.plan.copy_of[copy as usize];
            if of.last_split != Some(split) {
                of.last_split = Some(split);
                self.plan.inputs.push((sid, copy));
                self.plan.splits.last_mut().expect("a split exists").inputs.end += 1;
            }
            self.plan.patches.push(Patch { node: self.graph.nodes[i].slot, j, k: k as u32, copy });
        }
    }

    /// The copy of tensor `sid` on backend `b`, planned once per graph and
    /// backend (made by `make_copies`).
    fn copy_for(&mut self, sid: u32, b: BackendIdx) -> u32 {
        let key = u64::from(sid) << 16 | b.get() as u64;
        if let Some(c) = self.plan.copy_index.get(key) {
            return c;
        }
        let c = self.plan.copy_of.len() as u32;
        self.plan.copy_of.push(CopyOf { src: sid, backend: b, last_split: None, slot: None });
        self.plan.copy_index.insert(key, c);
        c
    }
}
