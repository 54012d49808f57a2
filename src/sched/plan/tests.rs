//! The planner's tests: hand-built snapshots and a fake [`Probe`]. No C,
//! no tensor, no scheduler: slots are indices into the snapshot's arrays.

use crate::prelude::*;

use super::{plan_split, plan_split_as_written, Decisions, GraphSlots, NodeInfo, Probe, Questions, Refusal, Settings, SlotInfo, SplitPlan};
use crate::ptrmap::PtrMap;
use crate::sched::ids::{BackendIdx, CopyIdx, Loc, Rule, Slot, SlotId};

/// A snapshot being built, and what the fake probe answers about it.
struct Snap {
    slots: Vec<SlotInfo>,
    graph: GraphSlots,
    /// Per slot: its size and op name (what the probe answers).
    sizes: Vec<usize>,
    ops: Vec<&'static str>,
    /// (backend, op) pairs whose `supports_op` says no.
    rejects: Vec<(usize, &'static str)>,
    accepts_all: Vec<bool>,
    user: PtrMap,
    measuring: bool,
}

/// The fake probe: answers from the snapshot's tables, and counts what it
/// was asked (a backend that accepts every op must never be asked).
struct Fake<'a> {
    sizes: &'a [usize],
    ops: &'a [&'static str],
    rejects: &'a [(usize, &'static str)],
    accepts_all: &'a [bool],
    asked_sizes: Vec<Slot>,
    asked_supports: Vec<(usize, Slot)>,
}

impl Questions for Fake<'_> {
    fn nbytes(&mut self, slot: Slot) -> usize {
        self.asked_sizes.push(slot);
        self.sizes[slot]
    }

    fn supports(&mut self, b: BackendIdx, slot: Slot) -> bool {
        assert!(!self.accepts_all[b.get()], "a backend that accepts every op is asked about t{}", slot.get());
        self.asked_supports.push((b.get(), slot));
        !self.rejects.contains(&(b.get(), self.ops[slot]))
    }
}

impl Probe for Fake<'_> {
    fn name(&self, slot: Slot) -> String {
        format!("t{}", slot.get())
    }

    fn op_name(&self, slot: Slot) -> String {
        self.ops[slot].into()
    }

    fn backend_name(&self, b: BackendIdx) -> String {
        format!("B{}", b.get())
    }

    fn memory_backend_name(&self, _slot: Slot) -> String {
        "elsewhere".into()
    }
}

/// A plan made from a [`Snap`].
struct Planned {
    slots: Vec<SlotInfo>,
    plan: SplitPlan,
    lenient: bool,
    asked_sizes: Vec<Slot>,
    asked_supports: Vec<(usize, Slot)>,
}

impl Planned {
    /// (backend, rule) of `slot`.
    fn on(&self, slot: Slot) -> (Option<usize>, Rule) {
        let i = self.slots[slot];
        (i.assign.map(BackendIdx::get), i.rule)
    }

    fn b(&self, slot: Slot) -> Option<usize> {
        self.on(slot).0
    }

    /// (backend, i_start, i_end, number of inputs) of every split.
    fn splits(&self) -> Vec<(usize, usize, usize, usize)> {
        self.plan.splits.iter().map(|s| (s.backend.get(), s.i_start, s.i_end, s.inputs.len())).collect()
    }
}

const BYTES: usize = 32;

impl Snap {
    fn new(n_backends: usize) -> Snap {
        Snap {
            slots: Vec::new(),
            graph: GraphSlots::default(),
            sizes: Vec::new(),
            ops: Vec::new(),
            rejects: Vec::new(),
            accepts_all: vec![false; n_backends],
            user: PtrMap::new(),
            measuring: false,
        }
    }

    /// A tensor registered, in no graph list. `on`: in that backend's
    /// buffer (with data).
    fn tensor(&mut self, op: &'static str, bytes: usize, on: Option<usize>) -> Slot {
        let (loc, mut flags) = match on {
            Some(b) => (Loc::At(BackendIdx::new(b)), SlotInfo::HAS_DATA),
            None => (Loc::Nowhere, 0),
        };
        flags |= match op {
            "NONE" => 0,
            "VIEW" => SlotInfo::VIEW_OP,
            _ => SlotInfo::COMPUTED,
        };
        self.slots.push(SlotInfo::registered(loc, flags));
        self.sizes.push(bytes);
        self.ops.push(op);
        Slot::at(self.slots.len() - 1)
    }

    fn leaf(&mut self, bytes: usize, on: Option<usize>) -> Slot {
        let s = self.tensor("NONE", bytes, on);
        self.graph.leafs.push((s, None));
        s
    }

    /// A leaf in plain host memory (data, no buffer).
    fn host_leaf(&mut self) -> Slot {
        let s = self.leaf(BYTES, None);
        self.slots[s].flags |= SlotInfo::HAS_DATA;
        s
    }

    fn node(&mut self, op: &'static str, srcs: &[Slot]) -> Slot {
        self.node_of(op, BYTES, srcs, None)
    }

    /// A node computed in the memory of `of` (an in-place op, a copy into a tensor).
    fn in_place(&mut self, op: &'static str, srcs: &[Slot], of: Slot) -> Slot {
        self.node_of(op, BYTES, srcs, Some(of))
    }

    fn view(&mut self, of: Slot) -> Slot {
        self.node_of("VIEW", BYTES, &[of], Some(of))
    }

    fn node_of(&mut self, op: &'static str, bytes: usize, srcs: &[Slot], vsrc: Option<Slot>) -> Slot {
        let s = self.tensor(op, bytes, None);
        let vsrc = vsrc.map(SlotId::from);
        self.slots[s].vsrc = vsrc;
        self.graph.srcs.extend_from_slice(srcs);
        self.graph.nodes.push(NodeInfo { slot: s, vsrc, srcs_end: self.graph.srcs.len() as u32 });
        s
    }

    fn reject(&mut self, backend: usize, op: &'static str) {
        self.rejects.push((backend, op));
    }

    fn assign(&mut self, slot: Slot, backend: usize) {
        self.user.insert(slot.key(), backend as u32);
    }

    fn try_plan(&self) -> Result<Planned, Refusal> {
        self.try_plan_with(false)
    }

    /// The plan of `plan_split`, or of `plan_split_as_written`.
    fn try_plan_with(&self, as_written: bool) -> Result<Planned, Refusal> {
        let planner = if as_written { plan_split_as_written } else { plan_split };
        let mut slots = self.slots.clone();
        let mut plan = SplitPlan::default();
        let mut probe = Fake {
            sizes: &self.sizes,
            ops: &self.ops,
            rejects: &self.rejects,
            accepts_all: &self.accepts_all,
            asked_sizes: Vec::new(),
            asked_supports: Vec::new(),
        };
        let settings = Settings { accepts_all: &self.accepts_all, debug: true, measuring: self.measuring };
        let done = planner(&mut probe, Decisions::new(&mut slots), &self.graph, &self.user, &mut plan, settings).map_err(|(r, _)| r)?;
        Ok(Planned { slots, plan, lenient: done.lenient, asked_sizes: probe.asked_sizes, asked_supports: probe.asked_supports })
    }

    fn plan(&self) -> Planned {
        self.try_plan().unwrap_or_else(|Refusal(why)| panic!("refused: {why}"))
    }

    fn refusal(&self) -> String {
        match self.try_plan() {
            Ok(_) => panic!("planned, not refused"),
            Err(Refusal(why)) => why.into(),
        }
    }
}

#[test]
fn pass1_leafs_and_nodes_go_where_their_memory_is() {
    let mut s = Snap::new(2);
    let wa = s.leaf(BYTES, Some(0));
    let xb = s.leaf(BYTES, Some(1));
    let n0 = s.node("ADD", &[wa, xb]);
    // a node already in B's buffer (a KV cache update)
    let dst = s.tensor("MUL", BYTES, Some(1));
    s.graph.srcs.push(n0);
    s.graph.nodes.push(NodeInfo { slot: dst, vsrc: None, srcs_end: s.graph.srcs.len() as u32 });
    let p = s.plan();
    assert_eq!(p.on(wa), (Some(0), Rule::Leaf));
    assert_eq!(p.on(xb), (Some(1), Rule::Leaf));
    // equal sizes: the source with the better priority (A) wins
    assert_eq!(p.on(n0), (Some(0), Rule::Src(0)));
    assert_eq!(p.on(dst), (Some(1), Rule::Dst));
}

#[test]
fn the_source_rule_prefers_priority_only_at_least_as_large_and_asks_sizes_only_then() {
    let mut s = Snap::new(2);
    let small_a = s.leaf(4, Some(0));
    let big_b = s.leaf(64, Some(1));
    let n = s.node("MUL_MAT", &[big_b, small_a]);
    let p = s.plan();
    // A has the better priority but its source is smaller: B's stays
    assert_eq!(p.on(n), (Some(1), Rule::Src(0)));
    assert_eq!(p.asked_sizes, vec![big_b, small_a], "sizes asked when two candidates meet");

    let mut s = Snap::new(2);
    let a = s.leaf(4, Some(0));
    let b = s.leaf(64, Some(1));
    let n = s.node("MUL_MAT", &[a, b]);
    let p = s.plan();
    assert_eq!(p.on(n), (Some(0), Rule::Src(0)));
    assert!(p.asked_sizes.is_empty(), "the first source has the better priority: no size compared");
}

#[test]
fn pass2_and_pass3_follow_sources_then_consumers() {
    let mut s = Snap::new(2);
    let free = s.leaf(BYTES, None); // no memory, no rule: its consumer's
    let wb = s.leaf(BYTES, Some(1));
    let n0 = s.node("ADD", &[wb, wb]);
    let n1 = s.node("MUL", &[n0, free]);
    let p = s.plan();
    assert_eq!(p.on(n1), (Some(1), Rule::Pass2Src(0)));
    assert_eq!(p.on(free), (Some(1), Rule::FromConsumer));
    assert_eq!(p.splits(), vec![(1, 0, 2, 0)]);
}

#[test]
fn the_first_split_takes_the_backend_of_the_first_node_without_a_view_source_and_may_be_empty() {
    // a cpy into a view of a KV cache on A runs first, then a node on B:
    // the first split is B's (the first node that is not in another
    // tensor's memory) and empty; A's split follows, then B's again
    let mut s = Snap::new(2);
    let cache = s.leaf(4 * BYTES, Some(0));
    let xa = s.leaf(BYTES, Some(0));
    let wb = s.leaf(BYTES, Some(1));
    // (the view of the cache made in another context: not a node)
    let slot = s.tensor("VIEW", BYTES, Some(0));
    s.slots[slot].vsrc = Some(SlotId::from(cache));
    let _cpy = s.in_place("CPY", &[xa, slot], slot);
    let _n = s.node("ADD", &[wb, wb]);
    let p = s.plan();
    assert_eq!(p.splits(), vec![(1, 0, 0, 0), (0, 0, 1, 0), (1, 1, 2, 0)]);

    // the view a node of the graph: it opens B's split, as in the original
    let mut s = Snap::new(2);
    let cache = s.leaf(4 * BYTES, Some(0));
    let xa = s.leaf(BYTES, Some(0));
    let wb = s.leaf(BYTES, Some(1));
    let slot = s.view(cache);
    let _cpy = s.in_place("CPY", &[xa, slot], slot);
    let _n = s.node("ADD", &[wb, wb]);
    assert_eq!(s.plan().splits(), vec![(1, 0, 1, 0), (0, 1, 2, 0), (1, 2, 3, 0)]);
}

#[test]
fn splits_cut_where_the_backend_changes_and_inputs_are_copied_once_per_split() {
    let mut s = Snap::new(2);
    let wa = s.leaf(BYTES, Some(0));
    let wb = s.leaf(BYTES, Some(1));
    let n0 = s.node("ADD", &[wa, wa]); // A
    let n1 = s.node("MUL", &[wb, n0]); // B (wb first), needs n0
    let n2 = s.node("ADD", &[wb, n0]); // B, needs n0 again: same copy
    let p = s.plan();
    assert_eq!(p.b(n1), Some(1));
    assert_eq!(p.splits(), vec![(0, 0, 1, 0), (1, 1, 3, 1)]);
    assert_eq!(p.plan.inputs.len(), 1);
    let (input, copy) = p.plan.inputs[0];
    assert_eq!(input, n0);
    assert_eq!((p.plan.copy_of[copy].src, p.plan.copy_of[copy].backend.get()), (n0, 1));
    // both consumers' second source goes to the one copy
    let patched: Vec<(Slot, usize, CopyIdx)> = p.plan.patches.iter().map(|q| (q.node, q.j, q.copy)).collect();
    assert_eq!(patched, vec![(n1, 1, copy), (n2, 1, copy)]);
}

#[test]
fn a_rejected_node_moves_to_the_next_backend_that_supports_it() {
    let mut s = Snap::new(2);
    s.reject(0, "MUL_MAT");
    let wa = s.leaf(BYTES, Some(0));
    let n0 = s.node("ADD", &[wa, wa]);
    let n1 = s.node("MUL_MAT", &[n0, n0]);
    let n2 = s.node("ADD", &[n1, n1]);
    let p = s.plan();
    assert_eq!(p.b(n0), Some(0));
    assert_eq!(p.on(n1), (Some(1), Rule::Unsupported));
    // moves come after pass 2: the node after it keeps the backend its
    // source had then, and gets a copy of the moved result
    assert_eq!(p.on(n2), (Some(0), Rule::Pass2Src(0)));
    assert_eq!(p.splits(), vec![(0, 0, 1, 0), (1, 1, 2, 1), (0, 2, 3, 1)]);
}

/// An in-place chain across backends [A, X, B, C]; X supports every op. A node
/// computed on C (CONT, which only C and X accept) gets an in-place node
/// that C rejects. The chain (the CONT and everything in its memory) moves
/// to the first backend after C that accepts all of it: X, not A, which
/// accepts the in-place op but not the CONT.
#[test]
fn an_in_place_chain_moves_whole_to_a_backend_that_supports_every_op() {
    for op in ["UNARY", "SCALE", "ADD", "CPY"] {
        let mut s = Snap::new(4);
        s.reject(0, "CONT");
        s.reject(0, "MUL_MAT");
        s.reject(2, "CONT");
        s.reject(3, op);
        let wc = s.leaf(BYTES, Some(3));
        let cont = s.node("CONT", &[wc]);
        let inplace = if op == "CPY" {
            // a cpy of the CONT into a fresh tensor: it works in the fresh
            // tensor's memory
            let fresh = s.leaf(BYTES, None);
            s.in_place("CPY", &[cont, fresh], fresh)
        } else {
            s.in_place(op, &[cont, wc], cont)
        };
        // a second node in the same memory, which A rejects
        let second = s.in_place("MUL_MAT", &[inplace, wc], inplace);
        let after = s.node("MUL", &[second, wc]);
        let p = s.plan();
        if op == "CPY" {
            assert_eq!(p.b(cont), Some(3), "{op}: the CONT stays on C (its memory is not the chain's)");
        } else {
            assert_eq!(p.b(cont), Some(1), "{op}: the CONT moves with its chain to X");
        }
        assert_eq!((p.b(inplace), p.b(second)), (Some(1), Some(1)), "{op}: the chain is on X, which supports all of it");
        assert_eq!(p.b(after), Some(3), "{op}: the node after the chain keeps its backend");
        for t in [cont, inplace, second, after] {
            let b = p.b(t).unwrap();
            assert!(!s.rejects.contains(&(b, s.ops[t])), "{op}: t{t} is on a backend that rejects it");
        }
    }
}

#[test]
fn user_assignments_apply_to_fresh_nodes_not_to_views() {
    let mut s = Snap::new(2);
    let wa = s.leaf(BYTES, Some(0));
    let n0 = s.node("ADD", &[wa, wa]);
    let v = s.view(n0);
    let n1 = s.node("MUL", &[v, v]);
    s.assign(n0, 1);
    s.assign(v, 0);
    s.assign(wa, 1); // already has memory: not applied
    let p = s.plan();
    assert_eq!(p.on(n0), (Some(1), Rule::User));
    assert_eq!(p.on(wa), (Some(0), Rule::Leaf));
    // the view works in n0's memory: it stays with it
    assert_eq!(p.b(v), Some(1));
    assert_ne!(p.on(v).1, Rule::User);
    assert_eq!(p.b(n1), Some(1));
    // with debug on, both refusals are explained
    let mut probe =
        Fake { sizes: &s.sizes, ops: &s.ops, rejects: &[], accepts_all: &s.accepts_all, asked_sizes: vec![], asked_supports: vec![] };
    let (mut slots, mut plan) = (s.slots.clone(), SplitPlan::default());
    let settings = Settings { accepts_all: &s.accepts_all, debug: true, measuring: false };
    let notes = plan_split(&mut probe, Decisions::new(&mut slots), &s.graph, &s.user, &mut plan, settings).ok().unwrap().notes;
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].contains("'t0', 'B1'") && notes[0].contains("already has memory"), "{notes:?}");
    assert!(notes[1].contains("works in the memory of another tensor"), "{notes:?}");
}

#[test]
fn an_in_place_node_follows_memory_that_pass3_places() {
    // a has no memory: its first consumer (n1, on B) places it in pass 3.
    // n2 computes in place on a: it must run on B too, whatever its other
    // source (w0 on A) said in pass 1.
    let mut s = Snap::new(2);
    let a = s.leaf(BYTES, None);
    let w0 = s.leaf(BYTES, Some(0));
    let w1 = s.leaf(BYTES, Some(1));
    let n1 = s.node("MUL_MAT", &[w1, a]);
    let n2 = s.in_place("ADD", &[a, w0], a);
    let p = s.plan();
    assert_eq!(p.b(n1), Some(1));
    assert_eq!(p.on(a), (Some(1), Rule::FromConsumer));
    assert_eq!(p.on(n2), (Some(1), Rule::FollowsMemory));
}

#[test]
fn a_node_no_rule_reaches_keeps_no_backend_only_if_it_is_a_view_with_data() {
    let mut s = Snap::new(1);
    let wa = s.leaf(BYTES, Some(0));
    s.node("ADD", &[wa, wa]);
    let host = s.host_leaf();
    let v = s.view(host);
    s.slots[v].flags |= SlotInfo::HAS_DATA;
    assert_eq!(s.plan().b(v), None);
    // the same view without data: refused, naming it
    s.slots[v].flags &= !SlotInfo::HAS_DATA;
    let why = s.refusal();
    assert!(why.contains(&format!("node 't{v}' (VIEW) cannot be assigned to a backend")), "{why}");
}

#[test]
fn refusals_name_the_tensor_and_the_backend() {
    // a node whose memory is on a backend that rejects it
    let mut s = Snap::new(2);
    s.reject(1, "MUL");
    let wb = s.leaf(BYTES, Some(1));
    let dst = s.tensor("MUL", BYTES, Some(1));
    s.graph.srcs.extend([wb, wb]);
    s.graph.nodes.push(NodeInfo { slot: dst, vsrc: None, srcs_end: 2 });
    let why = s.refusal();
    assert!(why.contains(&format!("node 't{dst}' (MUL) must run on backend 'B1' (its memory is on that backend)")), "{why}");

    // no backend supports a node
    let mut s = Snap::new(2);
    s.reject(0, "ROPE");
    s.reject(1, "ROPE");
    let wa = s.leaf(BYTES, Some(0));
    let n = s.node("ROPE", &[wa]);
    assert_eq!(s.refusal(), format!("no backend of the scheduler supports node 't{n}' (ROPE)"));

    // a tensor in a buffer of a backend the scheduler does not have
    let mut s = Snap::new(1);
    let w = s.leaf(BYTES, None);
    s.slots[w] = SlotInfo::registered(Loc::Foreign, SlotInfo::HAS_DATA);
    s.node("ADD", &[w, w]);
    let why = s.refusal();
    assert!(why.contains(&format!("tensor 't{w}' lives in a buffer of backend 'elsewhere'")), "{why}");
}

#[test]
fn measuring_lets_through_what_only_a_measure_sees_and_says_so() {
    // a node that only its consumer places, on a backend that rejects it,
    // over an input without memory: it moves to the next backend that
    // supports it; a compute refuses the input (no data to copy), a measure
    // sizes its copy and marks the plan lenient (never reused)
    let mut s = Snap::new(2);
    s.reject(1, "GELU");
    let input = s.leaf(BYTES, None); // allocated by the caller after the measure
    let g = s.node("GELU", &[input]);
    let wb = s.leaf(BYTES, Some(1));
    s.node("MUL_MAT", &[wb, g]);
    let why = s.refusal();
    assert!(why.contains(&format!("source 't{input}' of node 't{g}' is in no backend buffer, has no data")), "{why}");
    s.measuring = true;
    let p = s.plan();
    assert!(p.lenient);
    assert_eq!(p.on(g), (Some(0), Rule::Unsupported));

    // the same node in place on its input: memory pins it, a compute
    // refuses it
    let mut s = Snap::new(2);
    s.reject(1, "GELU");
    let input = s.leaf(BYTES, None);
    let g = s.in_place("GELU", &[input], input);
    let wb = s.leaf(BYTES, Some(1));
    s.node("MUL_MAT", &[wb, g]);
    let why = s.refusal();
    assert!(why.contains(&format!("node 't{g}' (GELU) gets backend 'B1' only from the node that consumes it")), "{why}");
    assert!(why.contains("it cannot move"), "{why}");
}

#[test]
fn a_rejected_node_its_consumer_placed_moves_over_data_outside_the_backends() {
    // UNARY over a scalar in host memory (no backend owns it), consumed on
    // B0, which rejects UNARY: the original ran it on B0; it moves to B1
    // and is copied back, its source copied to B1 (found by the fuzz: seed
    // 379112842508)
    let mut s = Snap::new(2);
    s.reject(0, "UNARY");
    let host = s.host_leaf();
    let u = s.node("UNARY", &[host]);
    let w = s.leaf(BYTES, Some(0));
    let out = s.node("SCALE", &[u, w]);
    let p = s.plan();
    assert!(!p.lenient);
    assert_eq!(p.on(u), (Some(1), Rule::Unsupported));
    assert_eq!(p.b(out), Some(0));
    // u's split takes its source's copy; out's split takes u's copy
    assert_eq!(p.splits(), vec![(1, 0, 1, 1), (0, 1, 2, 1)]);
    let written = s.try_plan_with(true).unwrap_or_else(|Refusal(why)| panic!("refused as written: {why}"));
    assert_eq!((&p.slots, p.splits()), (&written.slots, written.splits()));
}

#[test]
fn a_backend_that_accepts_every_op_is_never_asked() {
    let mut s = Snap::new(2);
    s.accepts_all = vec![false, true];
    s.reject(0, "MUL_MAT");
    let wa = s.leaf(BYTES, Some(0));
    let n0 = s.node("ADD", &[wa, wa]);
    let n1 = s.node("MUL_MAT", &[n0, n0]);
    let p = s.plan();
    assert_eq!(p.on(n1), (Some(1), Rule::Unsupported));
    assert!(p.asked_supports.iter().all(|&(b, _)| b == 0), "{:?}", p.asked_supports);
    // all of them accept every op: nothing asked at all
    s.accepts_all = vec![true, true];
    s.rejects.clear();
    assert!(s.plan().asked_supports.is_empty());
}

/// xorshift64*: random snapshots without a crate.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// What every plan the planner accepts promises, on random graphs: each
/// computed node runs on a backend that supports it, splits tile the nodes
/// in order and change backend at each cut, every source of a node is on
/// its split's backend or redirected to a copy there (listed once as that
/// split's input), and planning again gives the same plan and asks the
/// same questions.
#[test]
fn random_graphs_get_plans_that_keep_the_planners_promises() {
    const OPS: [&str; 6] = ["ADD", "MUL", "MUL_MAT", "GELU", "CONT", "SCALE"];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut planned, mut refused) = (0, 0);
    // (Miri runs each case about a thousand times slower)
    let cases = if cfg!(miri) { 150 } else { 3000 };
    for case in 0..cases {
        let nb = 1 + rng.below(4);
        let mut s = Snap::new(nb);
        s.accepts_all = (0..nb).map(|_| rng.below(3) == 0).collect();
        for b in 0..nb {
            for op in OPS {
                if !s.accepts_all[b] && rng.below(4) == 0 {
                    s.reject(b, op);
                }
            }
        }
        let mut pool = Vec::new();
        for _ in 0..1 + rng.below(5) {
            let on = if rng.below(4) == 0 { None } else { Some(rng.below(nb)) };
            pool.push(s.leaf(4 * (1 + rng.below(8)), on));
        }
        for _ in 0..1 + rng.below(24) {
            let op = OPS[rng.below(OPS.len())];
            let srcs: Vec<Slot> = (0..1 + rng.below(2)).map(|_| pool[rng.below(pool.len())]).collect();
            let n = match rng.below(8) {
                0 => s.view(srcs[0]),
                1 if s.ops[srcs[0]] != "NONE" => s.in_place(op, &srcs, srcs[0]),
                _ => s.node_of(op, 4 * (1 + rng.below(8)), &srcs, None),
            };
            pool.push(n);
        }
        if rng.below(4) == 0 {
            let n = pool[rng.below(pool.len())];
            s.assign(n, rng.below(nb));
        }
        s.measuring = rng.below(4) == 0;
        // pass 4 checking that pass 3 places nothing plans as the passes
        // as written do, refusals included
        let written = s.try_plan_with(true);
        let Ok(p) = s.try_plan() else {
            let (Err(Refusal(why)), Err(Refusal(written))) = (s.try_plan(), written) else {
                panic!("case {case}: refused, but planned with the passes as written");
            };
            assert_eq!(why, written, "case {case}");
            refused += 1;
            continue;
        };
        let written = written.unwrap_or_else(|Refusal(why)| panic!("case {case}: planned, but refused as written: {why}"));
        assert_eq!(p.slots, written.slots, "case {case}: the same assignments as with the passes as written");
        assert_eq!(p.splits(), written.splits(), "case {case}");
        assert_eq!(p.lenient, written.lenient, "case {case}");
        let plan_of = |p: &Planned| format!("{:?} {:?} {:?}", p.plan.inputs, p.plan.patches, p.plan.copy_of);
        assert_eq!(plan_of(&p), plan_of(&written), "case {case}: the same inputs, patches and copies");
        assert_eq!((&p.asked_sizes, &p.asked_supports), (&written.asked_sizes, &written.asked_supports), "case {case}");
        planned += 1;
        let again = s.plan();
        assert_eq!(p.slots, again.slots, "case {case}: the same snapshot plans the same");
        assert_eq!((&p.asked_sizes, &p.asked_supports), (&again.asked_sizes, &again.asked_supports), "case {case}");
        check_promises(&s, &p, case);
    }
    assert!(planned > cases / 3 && refused > cases / 60, "the cases reach both outcomes: {planned} planned, {refused} refused");
}

fn check_promises(s: &Snap, p: &Planned, case: usize) {
    let n = s.graph.nodes.len();
    let splits = &p.plan.splits;
    if splits.is_empty() {
        // nothing to compute: every node a view of memory that is set
        assert!(s.graph.nodes.iter().all(|nd| p.b(nd.slot).is_none()), "case {case}");
        return;
    }
    assert_eq!((splits[0].i_start, splits.last().unwrap().i_end), (0, n), "case {case}: splits cover the nodes");
    for (k, w) in splits.windows(2).enumerate() {
        assert_eq!(w[0].i_end, w[1].i_start, "case {case}: splits tile the nodes");
        assert_ne!(w[0].backend, w[1].backend, "case {case}: a cut changes backend");
        // only the first split may be empty, as the original's: its backend
        // is that of the first node without a view source
        assert!(w[0].i_start < w[0].i_end || k == 0, "case {case}: no empty split but the first");
        if w[0].i_start == w[0].i_end {
            let first = s.graph.nodes.iter().find(|nd| nd.vsrc.is_none()).expect("a node without a view source");
            assert_eq!(Some(w[0].backend), p.slots[first.slot].assign, "case {case}: the empty first split's backend");
        }
    }
    for (k, split) in splits.iter().enumerate() {
        let inputs = &p.plan.inputs[split.inputs.clone()];
        let mut copies: Vec<usize> = inputs.iter().map(|&(_, c)| c.index()).collect();
        copies.sort_unstable();
        copies.dedup();
        assert_eq!(copies.len(), inputs.len(), "case {case}: split {k} lists each copy once");
        for i in split.i_start..split.i_end {
            let nd = s.graph.nodes[i];
            let info = p.slots[nd.slot];
            if info.has(SlotInfo::VIEW_OP) {
                continue;
            }
            let b = info.assign.expect("a computed node has a backend");
            assert_eq!(b, split.backend, "case {case}: node {i} is on its split's backend");
            if !s.measuring || !p.lenient {
                assert!(!s.rejects.contains(&(b.get(), s.ops[nd.slot])), "case {case}: node {i} runs where it is rejected");
            }
            for (j, kk) in s.graph.node_srcs(i).enumerate() {
                let src = s.graph.srcs[kk];
                if p.slots[src].assign == Some(b) {
                    continue;
                }
                let patch = p.plan.patches.iter().find(|q| q.node == nd.slot && q.j == j && q.k as usize == kk);
                let patch = patch.unwrap_or_else(|| panic!("case {case}: source {j} of node {i} is elsewhere and not redirected"));
                let of = p.plan.copy_of[patch.copy];
                assert_eq!((of.src, of.backend), (src, b), "case {case}: the copy is of that source, on the split's backend");
                assert!(inputs.iter().any(|&(_, c)| c == patch.copy), "case {case}: the copy is an input of split {k}");
            }
        }
    }
}

// --- the placement (place.rs), on hand-built loads --------------------------

mod placement {
    use super::super::place::{ArenaSpec, Loaded, Order, PlaceProbe, PlaceQuestions, Placement, Step, Unplaced};
    use crate::prelude::*;
    use crate::sched::ids::{BackendIdx, Slot};

    /// Sizes and layouts by id; asked questions counted.
    struct FakePlace {
        bytes: Vec<usize>,
        asked: usize,
    }

    impl PlaceQuestions for FakePlace {
        fn alloc_size(&mut self, _b: BackendIdx, id: Slot) -> usize {
            self.asked += 1;
            self.bytes[id.index()]
        }
        fn same_layout(&mut self, a: Slot, b: Slot) -> bool {
            self.bytes[a.index()] == self.bytes[b.index()]
        }
        fn view_offs(&mut self, _id: Slot) -> usize {
            16
        }
    }

    impl PlaceProbe for FakePlace {
        fn sources(&mut self, _id: Slot) -> Vec<Slot> {
            Vec::new()
        }
        fn name(&self, id: Slot) -> String {
            format!("t{}", id.get())
        }
        fn backend_name(&self, b: BackendIdx) -> String {
            format!("B{}", b.get())
        }
    }

    /// Ops of the tests' tensors: one computed in place, one not.
    const OP_IN_PLACE: i32 = 2;
    const OP_OTHER: i32 = 23;
    const BUF: usize = 0x1000;
    const BASE: usize = 0x10_0000;

    fn arena(size: usize) -> ArenaSpec {
        ArenaSpec { buffer: BUF, size, base: BASE, align: 16, measure: false, free: vec![(0, size)] }
    }

    /// A weight `w` (memory elsewhere) and nodes on backend 0; `in_place`:
    /// which nodes' ops can be computed in place.
    fn load(n: usize, in_place: &[bool]) -> Vec<Loaded> {
        let b = Some(BackendIdx::new(0));
        let mut l = vec![Loaded { data: 0x9000, buffer: 0x2000, backend: b, ..Loaded::none() }];
        l.extend((0..n).map(|i| Loaded { backend: b, op: if in_place[i] { OP_IN_PLACE } else { OP_OTHER }, ..Loaded::none() }));
        l
    }

    /// Plan `o` over `loaded` (what the loader would have filled in).
    fn plan(
        p: &mut Placement,
        loaded: &[Loaded],
        o: &Order,
        arenas: &[ArenaSpec],
        bounded: bool,
        probe: &mut FakePlace,
    ) -> Result<bool, Unplaced> {
        p.start_loading(loaded.len());
        loaded.iter().for_each(|&l| p.push_loaded(l));
        p.plan(o, arenas, bounded, probe)
    }

    /// Node i (id i + 1) reads `srcs[i]`.
    fn order(srcs: &[&[u32]]) -> Order {
        let mut o = Order::default();
        for (i, s) in srcs.iter().enumerate() {
            let start = o.srcs.len() as u32;
            o.srcs.extend(s.iter().map(|&q| Slot::new(q)));
            o.entries.push((Slot::at(i + 1), start, o.srcs.len() as u32));
        }
        o
    }

    #[test]
    fn a_chain_is_computed_in_place_and_freed_memory_is_handed_out_again() {
        // n1 = f(w); n2 = g(n1, w) in place in n1; n3 = h(n2, w) not in
        // place; n4 = h(n3, w): n1's memory is free again
        let loaded = load(4, &[false, true, false, false]);
        let o = order(&[&[0], &[1, 0], &[2, 0], &[3, 0]]);
        let mut p = Placement::new(1 << OP_IN_PLACE);
        let mut probe = FakePlace { bytes: vec![32; 5], asked: 0 };
        assert!(matches!(plan(&mut p, &loaded, &o, &[arena(1024)], true, &mut probe), Ok(true)));
        let b = BackendIdx::new(0);
        assert_eq!(
            p.steps,
            vec![
                Step::Alloc { id: Slot::new(1), b, offset: 0 },
                Step::View { id: Slot::new(2), b: Some(b), owner: Some(Slot::new(1)) },
                Step::Alloc { id: Slot::new(3), b, offset: 32 },
                Step::Free { id: Slot::new(1), b },
                Step::Alloc { id: Slot::new(4), b, offset: 0 },
                Step::Free { id: Slot::new(3), b },
            ]
        );
        assert_eq!(p.max, vec![64]);
        assert_eq!(probe.asked, 3, "each allocation's size is asked once; frees reuse it");
    }

    #[test]
    fn a_buffer_too_small_is_named_and_an_endless_one_says_how_much() {
        let loaded = load(2, &[false, false]);
        let o = order(&[&[0], &[1, 0]]);
        let mut p = Placement::new(1 << OP_IN_PLACE);
        let mut probe = FakePlace { bytes: vec![32; 3], asked: 0 };
        assert_eq!(plan(&mut p, &loaded, &o, &[arena(48)], true, &mut probe), Err(Unplaced::TooSmall(BackendIdx::new(0))));
        assert!(plan(&mut p, &loaded, &o, &[arena(48)], false, &mut probe).is_ok());
        assert_eq!(p.max, vec![64]);
    }

    #[test]
    fn views_go_at_their_offset_and_a_view_of_nothing_is_refused() {
        // n2 views n1 (offset 16 from the probe)
        let mut loaded = load(3, &[false, false, false]);
        loaded[2].vsrc = Some(Slot::new(1));
        let o = order(&[&[0], &[1], &[2, 0]]);
        let mut p = Placement::new(1 << OP_IN_PLACE);
        let mut probe = FakePlace { bytes: vec![32; 4], asked: 0 };
        assert!(plan(&mut p, &loaded, &o, &[arena(1024)], true, &mut probe).is_ok());
        assert!(p.steps.contains(&Step::View { id: Slot::new(2), b: Some(BackendIdx::new(0)), owner: None }));
        // a view whose source has no memory and no backend
        loaded[1].backend = None;
        assert_eq!(plan(&mut p, &loaded, &o, &[arena(1024)], true, &mut probe), Err(Unplaced::Refused));
        let why = p.refusal.take().expect("a reason").0;
        assert!(why.contains("'t1' has no memory and no backend"), "{why}");
    }

    #[test]
    fn buffers_are_told_apart_by_address_however_many_there_are() {
        // 12 weights in buffers of their own, then one the caller put in
        // the compute buffer; node i + 14 reads weight i, in place where
        // it can: only in the compute buffer's memory (the thirteenth)
        let b = Some(BackendIdx::new(0));
        let mut loaded: Vec<Loaded> =
            (0..12).map(|k| Loaded { data: 0x9000 + 64 * k, buffer: 0x2000 + 0x100 * k, backend: b, ..Loaded::none() }).collect();
        loaded.push(Loaded { data: BASE, buffer: BUF, backend: b, ..Loaded::none() });
        loaded.extend((0..13).map(|_| Loaded { backend: b, op: OP_IN_PLACE, ..Loaded::none() }));
        let mut o = Order::default();
        for k in 0..13u32 {
            let start = o.srcs.len() as u32;
            o.srcs.push(Slot::new(k));
            o.entries.push((Slot::new(13 + k), start, start + 1));
        }
        let mut p = Placement::new(1 << OP_IN_PLACE);
        let mut probe = FakePlace { bytes: vec![32; 26], asked: 0 };
        // (the caller's tensor holds the first 32 bytes)
        let mut a = arena(1024);
        a.free = vec![(32, 992)];
        assert!(plan(&mut p, &loaded, &o, &[a], true, &mut probe).is_ok());
        let in_place: Vec<Slot> =
            p.steps.iter().filter_map(|s| if let Step::View { owner: Some(o), .. } = s { Some(*o) } else { None }).collect();
        assert_eq!(in_place, vec![Slot::new(12)], "in place in the compute buffer's tensor only");
        let allocs = p.steps.iter().filter(|s| matches!(s, Step::Alloc { .. })).count();
        assert_eq!(allocs, 12, "the others allocated");
        let back: Vec<usize> = p.loaded(13).map(|(_, b, ..)| p.buffer_addrs()[b as usize]).collect();
        assert_eq!(back, loaded[..13].iter().map(|l| l.buffer).collect::<Vec<_>>(), "addresses as loaded");
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    fn sizes_past_four_bytes_are_kept_whole() {
        // n1 = f(w): 5 GiB; n2 = g(n1): n1 is freed with its size
        let loaded = load(2, &[false, false]);
        let o = order(&[&[0], &[1]]);
        let mut p = Placement::new(1 << OP_IN_PLACE);
        let mut probe = FakePlace { bytes: vec![32, 5 << 30, 32], asked: 0 };
        assert!(plan(&mut p, &loaded, &o, &[arena(1024)], false, &mut probe).is_ok());
        assert_eq!(p.allocated(Slot::new(1)), 5 << 30);
        assert_eq!(p.allocated(Slot::new(2)), 32);
        assert!(p.steps.contains(&Step::Free { id: Slot::new(1), b: BackendIdx::new(0) }));
        assert_eq!(probe.asked, 2, "freed without asking again");
        assert_eq!(p.max, vec![(5 << 30) + 32]);
    }
}
