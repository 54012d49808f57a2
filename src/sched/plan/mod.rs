//! The planner: the original's four passes, run over one split's snapshot
//! (each tensor was hashed once, when the graph was registered; the passes
//! only index arrays). Sealed from C: it sees slots and backend indices,
//! never a tensor or a pointer (the placement's model, place.rs, computes
//! addresses as numbers, `usize`, to give each tensor the offset
//! ggml-alloc would; only `handle::Placer` turns them into pointers, checked
//! against the buffer). What registration read is in the snapshot
//! ([`SlotInfo`], [`GraphSlots`]); anything else it asks the [`Probe`],
//! whose implementation (sched/probe.rs) reads C and logs the answers that
//! decide the plan (its [`Questions`]) for a reuse to ask again. A plan
//! the original would stop on is a [`Refusal`], which the driver turns
//! into the abort. `scripts/layers` keeps the seal:
//! this module imports only the typed ids, `ptrmap` and `prelude`.

use crate::prelude::*;

use crate::ptrmap::PtrMap;
use crate::sched::ids::{BackendIdx, CopyIdx, Loc, Rule, Slot, SlotId, SplitIdx};

pub(in crate::sched) mod place;
pub(in crate::sched) mod snapshot;
pub(in crate::sched) mod talloc_model;
#[cfg(test)]
mod tests;

pub(in crate::sched) use snapshot::{CopyOf, Decisions, GraphSlots, NodeInfo, Patch, Refusal, SlotInfo, Split, SplitPlan};

/// The questions whose answers decide a plan: logged while planning
/// (probe.rs), asked again to know whether the plan still holds
/// (record.rs, `Record::answers_hold`).
pub(in crate::sched) trait Questions {
    /// The size of tensor `slot` in bytes (`wsp_ggml_nbytes`).
    fn nbytes(&mut self, slot: Slot) -> usize;
    /// Whether backend `b`'s `supports_op` accepts tensor `slot`.
    fn supports(&mut self, b: BackendIdx, slot: Slot) -> bool;
}

/// What the planner may ask about the split's tensors (by slot) and the
/// scheduler's backends (by index) besides what registration read: the
/// [`Questions`], and names, which are for messages and decide nothing.
pub(in crate::sched) trait Probe: Questions {
    /// Tensor `slot`'s name.
    fn name(&self, slot: Slot) -> String;
    /// Tensor `slot`'s op name.
    fn op_name(&self, slot: Slot) -> String;
    /// Backend `b`'s name.
    fn backend_name(&self, b: BackendIdx) -> String;
    /// The name of the backend whose buffer holds tensor `slot` ("?" if none).
    fn memory_backend_name(&self, slot: Slot) -> String;
}

/// What a split is planned with besides the snapshot.
#[derive(Clone, Copy)]
pub(in crate::sched) struct Settings<'a> {
    /// Whether each backend accepts every op (its `supports_op` is never asked).
    pub accepts_all: &'a [bool],
    /// Explain what is not applied (`WSP_GGML_SCHED_DEBUG`), in `Planner::notes`.
    pub debug: bool,
    /// Planning for `init_measure`/`reserve` (see `Planner::lenient`).
    pub measuring: bool,
}

/// The best candidate of the original's source rule: a source wins if its
/// backend has a better priority *and* it is at least as large as the current
/// winner. Sizes are only computed when two candidates meet.
#[derive(Clone, Copy)]
struct Best {
    prio: BackendIdx,
    slot: Slot,
    j: u8,
    size: Option<usize>,
}

/// The computed nodes of every in-place chain, by the memory they work in:
/// (root slot, node slot) for each non-view node with a view source, sorted
/// by root. Built on the first move of a chained node (memory roots depend
/// only on what registration read, so one build serves the whole pass).
struct Chains {
    members: Vec<(Slot, Slot)>,
}

impl Chains {
    fn build<P: Probe>(p: &Planner<'_, P>) -> Chains {
        let mut members = Vec::new();
        for n in &p.graph.nodes {
            if let Some(vs) = n.view_src().filter(|_| !p.view_op(n.slot)) {
                members.push((p.memory_root(vs), n.slot));
            }
        }
        // (stable: the members of one chain stay in graph order, so the
        // questions are asked in the same order every time)
        members.sort_by_key(|&(root, _)| root);
        Chains { members }
    }

    /// The nodes that work in the memory of `root`, in graph order.
    fn of(&self, root: Slot) -> Vec<Slot> {
        let start = self.members.partition_point(|&(r, _)| r < root);
        self.members[start..].iter().take_while(|&&(r, _)| r == root).map(|&(_, m)| m).collect()
    }
}

/// The passes, over one split's snapshot: per slot what registration read
/// and the backend and rule they give it (`slots`), the graph in slots, and
/// what they decide besides (`plan`); anything else through the probe.
pub(in crate::sched) struct Planner<'a, P: Probe> {
    probe: &'a mut P,
    slots: Decisions<'a>,
    graph: &'a GraphSlots,
    plan: &'a mut SplitPlan,
    /// `set_node_backend` assignments of the split's tensors, by slot.
    user: &'a PtrMap,
    settings: Settings<'a>,
    /// Set when a measure plan let something through that a compute would
    /// refuse: such a split is not reused. (Planning for
    /// `init_measure`/`reserve`, only sizes come of it, so what the
    /// original let through there is let through.)
    lenient: bool,
    /// What was not applied, and why (only with `Settings::debug`).
    notes: Vec<String>,
}

/// Whether pass 3 ran before pass 4's walk, or pass 4 checks that it
/// would place nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass3 {
    Done,
    Checked,
}

/// How pass 4's walk ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Walk {
    Done,
    /// Pass 3 would place a tensor: the walk stopped ([`Pass3::Checked`]).
    Pass3Places,
}

/// What planning a split gave besides the plan itself.
pub(in crate::sched) struct Planned {
    /// See `Planner::lenient`.
    pub lenient: bool,
    /// Debug notes to print (`Settings::debug`), also on a refusal.
    pub notes: Vec<String>,
}

/// Plan the split of the graph in `graph` (registered in `slots`), with
/// the `set_node_backend` assignments `user` (value: backend index, key:
/// slot): give each slot a backend and a rule, and fill `plan` (cleared by
/// the caller). `Err` carries the notes made before the refusal.
pub(in crate::sched) fn plan_split<P: Probe>(
    probe: &mut P,
    slots: Decisions<'_>,
    graph: &GraphSlots,
    user: &PtrMap,
    plan: &mut SplitPlan,
    settings: Settings<'_>,
) -> Result<Planned, (Refusal, Vec<String>)> {
    let p = Planner { probe, slots, graph, plan, user, settings, lenient: false, notes: Vec::new() };
    p.finish(Pass3::Checked)
}

/// [`plan_split`] with every pass run as written (pass 3 walks the graph
/// before pass 4): the same plan, what the tests compare it with.
#[cfg(test)]
pub(in crate::sched) fn plan_split_as_written<P: Probe>(
    probe: &mut P,
    slots: Decisions<'_>,
    graph: &GraphSlots,
    user: &PtrMap,
    plan: &mut SplitPlan,
    settings: Settings<'_>,
) -> Result<Planned, (Refusal, Vec<String>)> {
    let p = Planner { probe, slots, graph, plan, user, settings, lenient: false, notes: Vec::new() };
    p.finish(Pass3::Done)
}

impl<P: Probe> Planner<'_, P> {
    /// The facts of tensor `slot` read when it was registered.
    #[inline]
    fn info(&self, slot: Slot) -> SlotInfo {
        self.slots[slot]
    }

    /// Whether some registered tensor works in tensor `slot`'s memory (a
    /// view of it: the placement needs that memory to initialise the view).
    fn viewed(&self, slot: Slot) -> bool {
        self.slots.iter().any(|i| i.view_src() == Some(slot))
    }

    /// Whether tensor `slot`'s op is a view op.
    #[inline]
    fn view_op(&self, slot: Slot) -> bool {
        self.info(slot).has(SlotInfo::VIEW_OP)
    }

    #[inline]
    fn set(&mut self, slot: Slot, backend: BackendIdx, rule: Rule) {
        self.slots.decide(slot, backend, rule);
    }

    #[inline]
    fn assign(&self, slot: Slot) -> Option<BackendIdx> {
        self.slots[slot].assign
    }

    #[inline]
    fn loc(&self, slot: Slot) -> Loc {
        self.slots[slot].loc()
    }

    /// The `set_node_backend` assignment of tensor `slot`, where it can be
    /// honoured. Memory decides first: a tensor that already has memory, or
    /// works in another's (a view, an in-place op, a copy into a tensor),
    /// runs where that memory is, and a node never goes to a backend whose
    /// `supports_op` rejects it. The original ignored every assignment, so
    /// ignoring one is its behaviour (said under WSP_GGML_SCHED_DEBUG).
    #[inline]
    fn user_assignment(&mut self, slot: Slot, vsrc: Option<Slot>, is_node: bool) -> Option<BackendIdx> {
        if self.user.is_empty() {
            return None;
        }
        self.applicable_user_assignment(slot, vsrc, is_node)
    }

    #[cold]
    fn applicable_user_assignment(&mut self, slot: Slot, vsrc: Option<Slot>, is_node: bool) -> Option<BackendIdx> {
        let b = BackendIdx::new(self.user.get(slot.key())? as usize);
        let why = if self.loc(slot).in_buffer() || (is_node && self.info(slot).has(SlotInfo::HAS_DATA)) {
            "it already has memory"
        } else if vsrc.is_some() {
            "it works in the memory of another tensor"
        } else if is_node && !self.supports(b, slot) {
            "that backend does not support it"
        } else {
            return Some(b);
        };
        if self.settings.debug {
            let note = format!("set_node_backend('{}', '{}') not applied: {why}", self.probe.name(slot), self.probe.backend_name(b));
            self.notes.push(note);
        }
        None
    }

    /// Size of tensor `slot`, asked through the probe (recorded).
    fn nbytes(&mut self, slot: Slot) -> usize {
        self.probe.nbytes(slot)
    }

    /// Whether backend `b` supports tensor `slot`'s op, asked through the
    /// probe (recorded): every `supports_op` question of the passes.
    #[inline]
    fn supports(&mut self, b: BackendIdx, slot: Slot) -> bool {
        self.settings.accepts_all[b] || self.probe.supports(b, slot)
    }

    /// The next backend after `a` in priority order (wrapping around) that
    /// supports tensor `slot`.
    fn next_supporting(&mut self, a: BackendIdx, slot: Slot) -> Option<BackendIdx> {
        let n = self.settings.accepts_all.len();
        (1..n).map(|d| BackendIdx::new((a.get() + d) % n)).find(|&b| self.supports(b, slot))
    }

    /// Fold candidate (`prio`, `slot`) into `best` by the original's rule.
    #[inline]
    fn consider(&mut self, best: &mut Option<Best>, prio: BackendIdx, slot: Slot, j: usize) {
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
    /// refused if it is a backend the scheduler does not have (the original
    /// indexed out of bounds).
    fn known(&self, loc: Loc, slot: Slot) -> Result<BackendIdx, Refusal> {
        if let Loc::At(b) = loc {
            return Ok(b);
        }
        let backend = self.probe.memory_backend_name(slot);
        Err(Refusal::because(format!(
            "tensor '{}' lives in a buffer of backend '{backend}', which is not one of the scheduler's backends",
            self.probe.name(slot)
        )))
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

impl<P: Probe> Planner<'_, P> {
    /// Run the passes (see [`Planner::run`]) and hand over what they gave.
    fn finish(mut self, pass3: Pass3) -> Result<Planned, (Refusal, Vec<String>)> {
        match self.run(pass3) {
            Ok(()) => Ok(Planned { lenient: self.lenient, notes: self.notes }),
            Err(r) => Err((r, self.notes)),
        }
    }

    /// The passes: assignments, splits, input copies. `pass3`: whether
    /// pass 4 first checks that pass 3 would place nothing (see below), or
    /// pass 3 runs first (the passes as written).
    fn run(&mut self, pass3: Pass3) -> Result<(), Refusal> {
        self.pass1_from_locations()?;
        self.pass2_from_sources();
        self.move_unsupported_nodes()?;
        // Pass 3 places nothing when every source of an assigned node has a
        // backend already (the graph's inputs and weights are allocated):
        // then pass 4 alone is the same plan, and its walk checks that as
        // it goes. Otherwise, or where that walk refuses (pass 3 could have
        // given the node it refused a backend), the passes run as written.
        if pass3 == Pass3::Checked {
            if let Ok(Walk::Done) = self.pass4_split(Pass3::Checked) {
                return Ok(());
            }
            self.plan.clear();
        }
        self.pass3_from_consumers()?;
        let walk = self.pass4_split(Pass3::Done)?;
        debug_assert!(walk == Walk::Done);
        Ok(())
    }

    /// Pass 1: leafs and nodes whose memory (or view source, or a source's
    /// memory) already lives on a backend.
    fn pass1_from_locations(&mut self) -> Result<(), Refusal> {
        for k in 0..self.graph.leafs.len() {
            let (slot, vsrc) = self.graph.leafs[k];
            let vsrc = vsrc.map(SlotId::slot);
            if let Some(b) = self.user_assignment(slot, vsrc, false) {
                self.set(slot, b, Rule::User);
                continue;
            }
            if self.assign(slot).is_some() {
                continue;
            }
            let mut loc = self.loc(slot);
            if let (Loc::Nowhere, Some(v)) = (loc, vsrc) {
                loc = self.loc(v);
            }
            if loc.in_buffer() {
                let b = self.known(loc, slot)?;
                self.set(slot, b, Rule::Leaf);
            }
        }
        for i in 0..self.graph.nodes.len() {
            let (slot, vs) = (self.graph.nodes[i].slot, self.graph.nodes[i].view_src());
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
                let b = self.known(loc, slot)?;
                self.set(slot, b, Rule::Dst);
                continue;
            }
            if let Some(vs) = vs.filter(|&vs| self.loc(vs).in_buffer()) {
                let b = self.known(self.loc(vs), vs)?;
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
        Ok(())
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
    fn memory_root(&self, vs: Slot) -> Slot {
        let mut r = vs;
        while let (Loc::Nowhere, Some(v)) = (self.loc(r), self.info(r).view_src()) {
            r = v;
        }
        r
    }

    /// Memory decides: a node that works in another tensor's memory (a view,
    /// an in-place op, a copy into a tensor) runs on the backend that memory
    /// is allocated by, once that is known (the placement initialises it with
    /// that backend's allocator; the original asserted there, or in release
    /// builds initialised it in another backend's buffer).
    fn follow_memory(&mut self, slot: Slot, vs: Option<Slot>) {
        let Some(vs) = vs else {
            return;
        };
        let Some(owner) = self.assign(vs).filter(|&o| Some(o) != self.assign(slot)) else {
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
    fn move_unsupported_nodes(&mut self) -> Result<(), Refusal> {
        // Our CPU backend supports every op: skip the walk when all backends are CPU.
        let ask = !self.settings.accepts_all.iter().all(|&a| a);
        let mut owners_moved = false;
        let mut chains = None;
        for i in 0..self.graph.nodes.len() {
            let info = self.graph.nodes[i];
            let (slot, vs) = (info.slot, info.view_src());
            self.follow_memory(slot, vs);
            if !ask || self.view_op(slot) {
                continue;
            }
            let Some(a) = self.assign(slot).filter(|&a| !self.supports(a, slot)) else {
                continue;
            };
            let (node, op) = self.node_names(i);
            let root = vs.map(|vs| self.memory_root(vs));
            let pinned = match (self.slots[slot].rule, root) {
                (Rule::Dst | Rule::ViewSrc, _) => Some("its memory is on that backend".to_string()),
                (_, Some(r)) if self.loc(r).in_buffer() => {
                    Some(format!("it works in the memory of '{}', which is on that backend", self.probe.name(r)))
                }
                _ => None,
            };
            if let Some(why) = pinned {
                return Err(Refusal::because(format!(
                    "node '{node}' ({op}) must run on backend '{}' ({why}), which does not support it",
                    self.probe.backend_name(a)
                )));
            }
            // Memory outside any backend buffer (a plain ggml context) ties nothing.
            let owner = root.filter(|&r| !(self.loc(r) == Loc::Nowhere && self.info(r).has(SlotInfo::HAS_DATA)));
            let b = match owner {
                None => self.next_supporting(a, slot),
                Some(r) => self.chain_backend(a, r, &mut chains),
            };
            let Some(b) = b else {
                if let Some(owner) = owner.filter(|_| self.next_supporting(a, slot).is_some()) {
                    return Err(Refusal::because(format!(
                        "node '{node}' ({op}) works in the memory of '{}', and no backend of the scheduler supports \
                         every op that works in that memory",
                        self.probe.name(owner)
                    )));
                }
                return Err(Refusal::because(format!("no backend of the scheduler supports node '{node}' ({op})")));
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
                let (slot, vsrc) = (self.graph.nodes[i].slot, self.graph.nodes[i].view_src());
                self.follow_memory(slot, vsrc);
            }
        }
        Ok(())
    }

    /// The backend for the in-place chain of memory owner `r` (not in a
    /// buffer yet), one of whose nodes backend `a` rejects: the next backend
    /// after `a` in priority order (wrapping around) that supports every
    /// computed op of the chain, i.e. `r` itself and each node whose memory
    /// is `r`'s. The chain moves as a whole, since all of it works in one
    /// allocation. None when no backend supports all of it.
    fn chain_backend(&mut self, a: BackendIdx, r: Slot, chains: &mut Option<Chains>) -> Option<BackendIdx> {
        let members = chains.get_or_insert_with(|| Chains::build(self)).of(r);
        let n = self.settings.accepts_all.len();
        (1..n)
            .map(|d| BackendIdx::new((a.get() + d) % n))
            .find(|&b| (!self.info(r).has(SlotInfo::COMPUTED) || self.supports(b, r)) && members.iter().all(|&m| self.supports(b, m)))
    }

    /// Pass 3: unassigned sources (leafs in practice, but also earlier nodes
    /// that nothing assigned) go where their consumer is, in node order: a
    /// source takes the backend of the first consumer that has one.
    fn pass3_from_consumers(&mut self) -> Result<(), Refusal> {
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
            self.follow_memory_placed_by_pass3()?;
        }
        Ok(())
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
    fn follow_memory_placed_by_pass3(&mut self) -> Result<(), Refusal> {
        for i in 0..self.graph.nodes.len() {
            let (slot, vsrc) = (self.graph.nodes[i].slot, self.graph.nodes[i].view_src());
            let before = self.assign(slot);
            self.follow_memory(slot, vsrc);
            let Some(b) = self.assign(slot).filter(|&b| Some(b) != before) else {
                continue;
            };
            if self.view_op(slot) || self.supports(b, slot) {
                continue;
            }
            if self.settings.measuring {
                self.lenient = true;
                continue;
            }
            let (node, op) = self.node_names(i);
            let owner = self.probe.name(self.memory_root(vsrc.expect("it moved to follow its view source")));
            return Err(Refusal::because(format!(
                "node '{}' ({}) must run on backend '{}' (it works in the memory of '{}', which is allocated \
                 there), which does not support it",
                node,
                op,
                self.probe.backend_name(b),
                owner
            )));
        }
        Ok(())
    }

    /// A node that only pass 3 gave a backend (its consumer's) must be
    /// supported there: it was not placed when unsupported nodes moved (it
    /// had no backend then). Asked from pass 4's walk, which reads each
    /// node's slot anyway. A rejected node that works in no other tensor's
    /// memory and in whose memory nothing works moves to the next backend
    /// that supports it, as pass 2.5 moves nodes: its sources (which pass 3
    /// visited before it had a backend) are copied there, its consumers get
    /// a copy of it (the original ran it on the rejecting backend, which a
    /// real backend such as Metal's refuses at compute). Otherwise memory
    /// pins it, and a rejection is an error.
    fn check_assigned_by_pass3(&mut self, i: usize, a: BackendIdx, viewed: &mut Option<Vec<bool>>) -> Result<BackendIdx, Refusal> {
        let slot = self.graph.nodes[i].slot;
        if self.supports(a, slot) {
            return Ok(a);
        }
        let viewed = viewed.get_or_insert_with(|| {
            let mut v = vec![false; self.slots.len()];
            self.slots.iter().filter_map(|s| s.view_src()).for_each(|s| v[s.index()] = true);
            v
        });
        let pinned = self.graph.nodes[i].vsrc.is_some() || viewed[slot.index()];
        let next = self.next_supporting(a, slot);
        // While measuring, a pinned node is sized where a backend supports
        // it too (the original measured it on `a`); a compute decides
        // again, with the inputs allocated.
        if let Some(b) = next.filter(|_| !pinned || self.settings.measuring) {
            self.set(slot, b, Rule::Unsupported);
            self.lenient |= pinned;
            return Ok(b);
        }
        let (node, op) = self.node_names(i);
        if next.is_none() {
            return Err(Refusal::because(format!("no backend of the scheduler supports node '{node}' ({op})")));
        }
        Err(Refusal::because(format!(
            "node '{}' ({}) gets backend '{}' only from the node that consumes it, and that backend does not \
             support it; it cannot move, since it works in another tensor's memory or another works in its \
             memory (pre-allocate its inputs, or assign it with set_node_backend)",
            node,
            op,
            self.probe.backend_name(a)
        )))
    }

    /// Pass 4: cut a split wherever the backend changes (view ops never cut),
    /// and plan copies on the split's backend for sources living elsewhere
    /// (made by `make_copies`, patched into the graph by `Redirections::apply`). A
    /// node still without a backend would crash the original later; we
    /// refuse it instead. With [`Pass3::Checked`], pass 3 has not run: the
    /// walk stops ([`Walk::Pass3Places`]) at the first assigned node with a
    /// source without a backend, which pass 3 would have placed.
    fn pass4_split(&mut self, pass3: Pass3) -> Result<Walk, Refusal> {
        let n = self.graph.nodes.len();
        let Some(mut cur) = self.first_split_backend() else {
            // No node has a backend (so pass 3 places nothing): each must
            // be a view of memory that is set (nothing to compute).
            (0..n).try_for_each(|i| self.accept_unassigned_node(i))?;
            return Ok(Walk::Done);
        };
        self.plan.splits.push(Split { backend: cur, i_start: 0, i_end: n, inputs: 0..0 });
        // (which tensors are viewed: made on the first rejection, if any)
        let mut viewed = None;
        for i in 0..n {
            let info = self.graph.nodes[i];
            let Some(a) = self.assign(info.slot) else {
                self.accept_unassigned_node(i)?; // a view of memory that is set, or a refusal
                continue;
            };
            if pass3 == Pass3::Checked && self.node_srcs(i).any(|k| self.assign(self.graph.srcs[k]).is_none()) {
                return Ok(Walk::Pass3Places);
            }
            if self.view_op(info.slot) {
                continue;
            }
            let was = a;
            let a = if self.slots[info.slot].rule == Rule::FromConsumer { self.check_assigned_by_pass3(i, a, &mut viewed)? } else { a };
            if a != cur && was == cur && self.plan.splits.last().is_some_and(|s| s.i_start == i) {
                // The first split is empty and cut here only because this
                // node moved in this walk: the split moves with it. Any
                // other empty first split is the original's (its backend is
                // that of the first node without a view source, whatever
                // runs before it) and is kept: that backend is called with
                // no nodes.
                self.plan.splits.last_mut().expect("a split exists").backend = a;
                cur = a;
            } else if a != cur {
                let inputs_at = self.plan.inputs.len();
                self.plan.splits.last_mut().expect("a split exists").i_end = i;
                self.plan.splits.push(Split { backend: a, i_start: i, i_end: n, inputs: inputs_at..inputs_at });
                cur = a;
            }
            self.route_inputs(i, cur)?;
        }
        Ok(Walk::Done)
    }

    /// The first split's backend: that of the first node without a view
    /// source, as the original. Where every node has one, the original
    /// keeps the backend its last plan gave the first split
    /// ([`SplitPlan::first_backend`]; after `init_measure` through an
    /// allocator it freed, whose memory its replacement for the same
    /// backend takes), and so do we; with none (the original crashes), the
    /// backend of the first node that is not a view op, else of any node: a
    /// graph of views only still gets a split, so that the placement
    /// initialises the views. None: no node has a backend.
    fn first_split_backend(&mut self) -> Option<BackendIdx> {
        let b = self.first_split_backend_as_original();
        self.plan.first_backend = b.or(self.plan.first_backend);
        let nodes = &self.graph.nodes;
        let first = nodes.iter().find(|n| !self.view_op(n.slot));
        // (an unassigned first node stops pass 4 unless it is a view of set memory)
        b.or_else(|| first.and_then(|n| self.assign(n.slot))).or_else(|| nodes.iter().find_map(|n| self.assign(n.slot)))
    }

    /// The original's first split backend where it is a backend: the first
    /// node without a view source's, or where every node has one, the last
    /// plan's (see [`Self::first_split_backend`]).
    fn first_split_backend_as_original(&self) -> Option<BackendIdx> {
        match self.graph.nodes.iter().find(|n| n.vsrc.is_none()) {
            Some(n) => self.assign(n.slot),
            None => self.plan.first_backend.filter(|b| b.get() < self.settings.accepts_all.len()),
        }
    }

    /// Node `i` has no backend: only a view op whose data is set (its memory
    /// exists, the placement leaves it alone) is accepted; reuse checks the data
    /// stays set.
    fn accept_unassigned_node(&mut self, i: usize) -> Result<(), Refusal> {
        let info = self.graph.nodes[i];
        if !self.view_op(info.slot) || !self.info(info.slot).has(SlotInfo::HAS_DATA) {
            let (node, op) = self.node_names(i);
            return Err(Refusal::because(format!(
                "node '{}' ({}) cannot be assigned to a backend: neither it nor any of its sources is in a \
                 backend buffer (pre-allocate the graph's inputs or weights)",
                node, op
            )));
        }
        Ok(())
    }

    /// Point node `i`'s sources that are not on `cur` (its split's backend)
    /// at their copies on `cur`, listing each copy once as an input of the
    /// split.
    fn route_inputs(&mut self, i: usize, cur: BackendIdx) -> Result<(), Refusal> {
        let split = SplitIdx::at(self.plan.splits.len() - 1);
        for (j, k) in self.node_srcs(i).enumerate() {
            let sid = self.graph.srcs[k];
            if self.assign(sid) == Some(cur) {
                continue;
            }
            if self.assign(sid).is_none() {
                // Its copy would be made from nothing (the original crashes
                // in ggml-alloc); with data, copy_input copies from it.
                if !self.info(sid).has(SlotInfo::HAS_DATA) && self.settings.measuring && !self.viewed(sid) {
                    // The original measured a copy of it (an input the
                    // caller allocates after the measure); so do we.
                    self.lenient = true;
                } else if !self.info(sid).has(SlotInfo::HAS_DATA) {
                    let (src, node) = (self.probe.name(sid), self.node_names(i).0);
                    return Err(Refusal::because(format!(
                        "source '{}' of node '{}' is in no backend buffer, has no data, and no rule assigns it \
                         (pre-allocate the graph's inputs or weights)",
                        src, node
                    )));
                }
            }
            let copy = self.copy_for(sid, cur);
            let of = &mut self.plan.copy_of[copy];
            if of.last_split != Some(split) {
                of.last_split = Some(split);
                self.plan.inputs.push((sid, copy));
                self.plan.splits.last_mut().expect("a split exists").inputs.end += 1;
            }
            self.plan.patches.push(Patch { node: self.graph.nodes[i].slot, j, k: k as u32, copy });
        }
        Ok(())
    }

    /// The copy of tensor `sid` on backend `b`, planned once per graph and
    /// backend (made by `make_copies`).
    fn copy_for(&mut self, sid: Slot, b: BackendIdx) -> CopyIdx {
        let key = sid.key() << 16 | b.get() as u64;
        if let Some(c) = self.plan.copy_index.get(key) {
            return CopyIdx::at(c as usize);
        }
        let c = CopyIdx::at(self.plan.copy_of.len());
        self.plan.copy_of.push(CopyOf { src: sid, backend: b, last_split: None });
        self.plan.copy_index.insert(key, c.index() as u32);
        c
    }
}
