//! Unit tests of a split made from C structs (registration, the passes,
//! apply, reuse) and of the placement (galloc.rs), without a scheduler and
//! without ggml: tensors, graphs, buffers and backends are the plain C
//! structs of `crate::fake_c`, which holds every raw access (this module,
//! like the whole scheduler, has no `unsafe`). The passes alone are tested
//! without C (plan/tests.rs).

use crate::ptrmap::PtrMap;

use super::call::{Purpose, Rooms};
use super::galloc::{Arenas, Ends, Galloc, TooSmall};
use super::ids::Rule;
use super::live::{Live, Room};
use super::plan::place::ArenaSpec;
use super::plan::Settings;
use super::record::{Record, Standing};
use super::state::State;
use super::{make_split, CallState};
use crate::fake_c::{addr, data, edit, get, view_src, World, OP_ADD, OP_MUL, OP_MUL_MAT};
use crate::ggml::{wsp_ggml_tensor, GraphRef, HeapTensors, TensorId, WSP_GGML_OP_VIEW};
use crate::handle::BufferRef;

/// The passes' result for the world's graph (its sources given back).
fn plan(w: &mut World, user: &PtrMap) -> State {
    split_then(w, user, |_, _| ()).0
}

/// A split of the world's graph, and `f` run during the call that made it
/// (the graph's sources redirected, the call's handles live); the
/// sources are given back when the call ends.
fn split_then<R>(w: &mut World, user: &PtrMap, f: impl for<'c> FnOnce(&mut State, &mut CallState<'c>) -> R) -> (State, R) {
    let backends = w.refs();
    w.with_graph(|graph, copies| {
        let mut rooms = Rooms::default();
        let mut call = CallState::new(&mut rooms, Purpose::Compute);
        let mut st = plan_graph(&backends, graph, copies, &mut call, user);
        let r = f(&mut st, &mut call);
        drop(call);
        (st, r)
    })
}

fn plan_graph<'c>(
    backends: &[crate::handle::BackendRef],
    graph: GraphRef<'c>,
    copies: &'c HeapTensors,
    call: &mut CallState<'c>,
    user: &PtrMap,
) -> State {
    let mut st = State::default();
    let listed = graph.n_nodes() + graph.n_leafs();
    let mut attempt = st.first_attempt(listed);
    let accepts_all = vec![false; backends.len()];
    let settings = Settings { accepts_all: &accepts_all, debug: false, measuring: false };
    loop {
        match make_split(&mut st, call, copies, backends, settings, user, graph, &attempt, "test") {
            Ok(_) => return st,
            Err(why) => {
                st.retry(&mut attempt, why);
                call.redirected.unpatch();
            }
        }
    }
}

/// "No backend" in the tests' (backend index, rule) pairs.
const NO_BACKEND: u16 = u16::MAX;

fn assigned(st: &State, t: *mut wsp_ggml_tensor) -> (u16, Rule) {
    let slot = st.table().find(TensorId::of_ptr(t).expect("not NULL")).expect("registered");
    let (assign, rule) = st.decision(slot);
    (assign.map_or(NO_BACKEND, |b| b.get() as u16), rule)
}

fn splits(st: &State) -> Vec<(u16, usize, usize, usize)> {
    st.plan().splits.iter().map(|s| (s.backend.get() as u16, s.i_start, s.i_end, s.inputs.len())).collect()
}

#[test]
fn splits_cut_where_the_backend_changes_and_inputs_are_copied_once_per_split() {
    let mut w = World::with_backends(&[c"A", c"B"]);
    let wa = w.leaf(8, Some(0));
    let wb = w.leaf(8, Some(1));
    let n0 = w.node(OP_ADD, 8, &[wa, wa]); // A
    let n1 = w.node(OP_MUL, 8, &[wb, n0]); // B (wb first), needs n0
    let n2 = w.node(OP_ADD, 8, &[wb, n0]); // B, needs n0 again: same copy
    let (st, c1) = split_then(&mut w, &PtrMap::new(), |st, _| {
        assert_eq!(assigned(st, n1).0, 1);
        assert_eq!(splits(st), vec![(0, 0, 1, 0), (1, 1, 3, 1)]);
        // both consumers read the one copy of n0 on B
        let (c1, c2) = (get(n1).src[1], get(n2).src[1]);
        assert_eq!(c1, c2);
        assert_ne!(c1, n0);
        c1
    });
    assert_eq!(assigned(&st, c1), (1, Rule::InputCopy));
    assert_eq!(get(n1).src[1], n0, "the graph's sources are given back when the call ends");
}

/// An input copy's backend and rule are its copy's, also where the copy
/// is already in the table as a view source (a node the last placement
/// computed in place in the copy's memory).
#[test]
fn an_input_copys_decision_is_its_copys_wherever_its_slot_is() {
    let mut w = World::with_backends(&[c"A", c"B"]);
    let wa = w.leaf(8, Some(0));
    let wb = w.leaf(8, Some(1));
    let n0 = w.node(OP_ADD, 8, &[wa, wa]); // A
    let n1 = w.node(OP_MUL, 8, &[wb, n0]); // B, needs n0: copied
    w.node(OP_ADD, 8, &[n1, wb]); // B: registered after n1's view source
    let (_, c1) = split_then(&mut w, &PtrMap::new(), |_, _| get(n1).src[1]);
    // n1 as the placement leaves it when it computes n1 in place in the copy
    edit(n1, |x| x.view_src = c1);
    let st = plan(&mut w, &PtrMap::new());
    let slot = st.table().find(TensorId::of_ptr(c1).expect("not NULL")).expect("registered");
    assert!(slot.index() < st.table().size() - 1, "registered before the copies, as n1's view source");
    assert_eq!(st.copy_slots(), [slot], "the copy's slot is its view source's");
    assert_eq!(assigned(&st, c1), (1, Rule::InputCopy));
    assert_eq!(st.copy_backends().map(|(s, b)| (s, b.get())).collect::<Vec<_>>(), [(slot, 1)], "what the placement loads");
}

/// The world's graph was planned into `st` (and given back): whether the
/// reuse check accepts it as it is now.
fn still_valid(w: &mut World, st: &mut State) -> bool {
    let backends = w.refs();
    w.with_graph(|graph, _| {
        let mut room = Room::default();
        let mut live = Live::new(&mut room);
        st.still_valid(&backends, graph, &mut live)
    })
}

/// As [`still_valid`], for the graph built again elsewhere.
fn still_valid_moved(w: &mut World, st: &mut State) -> bool {
    let backends = w.refs();
    w.with_graph(|graph, copies| {
        let mut room = Room::default();
        let mut live = Live::new(&mut room);
        st.still_valid_moved(&backends, graph, copies, &mut live)
    })
}

#[test]
fn reuse_fails_for_any_change_the_passes_read_and_holds_for_others() {
    // each case changes one thing; `true`: the split still holds (no pass
    // reads it; where tensors go is planned again at every compute)
    #[allow(clippy::type_complexity)]
    let cases: &[(&str, bool, fn(&mut World, [*mut wsp_ggml_tensor; 4]))] = &[
        ("nothing", true, |_, _| {}),
        ("a leaf's size the source rule compared", false, |_, t| edit(t[0], |x| x.ne[0] = 9)),
        ("a node's shape (no pass compares it)", true, |_, t| edit(t[2], |x| x.ne[0] = 9)),
        ("a node's strides", true, |_, t| edit(t[2], |x| x.nb[1] = 64)),
        ("a node's view offset", true, |_, t| edit(t[2], |x| x.view_offs = 4)),
        ("a node's op, for another computed op", true, |_, t| edit(t[2], |x| x.op = OP_MUL)),
        ("a node's op, for a view op", false, |_, t| edit(t[2], |x| x.op = WSP_GGML_OP_VIEW)),
        ("a node's source", false, |_, t| edit(t[3], |x| x.src[1] = t[0])),
        ("a source more", false, |_, t| edit(t[3], |x| x.src[2] = t[0])),
        ("a leaf's buffer (another backend)", false, |w, t| edit(t[0], |x| x.buffer = w.buffers[1])),
        ("a leaf's data (none now)", false, |_, t| edit(t[0], |x| x.data = core::ptr::null_mut())),
        ("a node gets data", false, |_, t| edit(t[3], |x| x.data = addr(0x3000))),
        ("a node gets a view source", false, |_, t| edit(t[3], |x| x.view_src = t[2])),
        ("one node fewer", false, |w, _| {
            w.nodes.pop();
        }),
    ];
    for &(what, holds, change) in cases {
        // the graph as it was, or built again elsewhere (its nodes, or its
        // leafs too, new tensors with the same contents)
        for moved in [None, Some(false), Some(true)] {
            let mut w = World::with_backends(&[c"A", c"B"]);
            let wa = w.leaf(8, Some(0));
            let xb = w.leaf(8, Some(1));
            // B's source first, then A's (better priority): their sizes decide
            let n0 = w.node(OP_ADD, 8, &[xb, wa]);
            let n1 = w.node(OP_MUL, 8, &[n0, xb]);
            let mut st = plan(&mut w, &PtrMap::new());
            st.set_standing(Standing::Reusable);
            assert!(st.log().compared_sizes(), "the source rule compared sizes");
            let Some(leafs) = moved else {
                change(&mut w, [wa, xb, n0, n1]);
                assert_eq!(still_valid(&mut w, &mut st), holds, "reuse after changing {what}");
                continue;
            };
            let t = rebuild_elsewhere(&mut w, leafs, [wa, xb, n0, n1]);
            change(&mut w, t);
            assert!(!still_valid(&mut w, &mut st), "{what}: not at the same addresses");
            let again = still_valid_moved(&mut w, &mut st);
            assert_eq!(again, holds, "reuse of the graph built elsewhere after changing {what}");
            if again {
                // every slot holds the new tensor in the old one's place
                for (k, &new) in t.iter().enumerate() {
                    assert!(st.table().find(TensorId::of_ptr(new).unwrap()).is_some(), "{what}: tensor {k} registered again");
                }
                assert_eq!(st.table().find(TensorId::of_ptr(n1).unwrap()), None, "{what}: the old nodes are gone");
            }
        }
    }
}

#[test]
fn a_graph_of_views_built_again_elsewhere_reuses_the_split_unless_a_view_changed() {
    // views of a leaf and of a node (registration walks their chains), the
    // graph built again with every tensor new
    for change in [None, Some(0), Some(1), Some(2)] {
        let mut w = World::with_backends(&[c"A", c"B"]);
        let wa = w.leaf(8, Some(0));
        let xb = w.leaf(8, Some(1));
        let v0 = w.view(wa, 8);
        let n0 = w.node(OP_ADD, 8, &[xb, v0]);
        let v1 = w.view(n0, 8);
        let n1 = w.node(OP_MUL, 8, &[v1, xb]);
        let mut st = plan(&mut w, &PtrMap::new());
        st.set_standing(Standing::Reusable);
        let [wa2, xb2, _, n1b] = rebuild_elsewhere(&mut w, true, [wa, xb, n0, n1]);
        let v1b = get(n1b).src[0];
        match change {
            None => {}
            // a view of another tensor, of the same graph
            Some(0) => edit(v1b, |x| x.view_src = xb2),
            // a view source the graph does not list
            Some(1) => edit(v1b, |x| x.view_src = wa),
            // a node that was a view views nothing now
            _ => edit(v1b, |x| x.view_src = core::ptr::null_mut()),
        }
        let _ = wa2;
        let again = still_valid_moved(&mut w, &mut st);
        assert_eq!(again, change.is_none(), "change {change:?}");
    }
}

/// The world's graph built again elsewhere, as a client builds it in a new
/// context: every node (and with `leafs`, every leaf) a new tensor with the
/// same contents, whose sources and view sources are the new tensors.
/// Returns `t`'s tensors as they are now.
fn rebuild_elsewhere(w: &mut World, leafs: bool, t: [*mut wsp_ggml_tensor; 4]) -> [*mut wsp_ggml_tensor; 4] {
    let old: Vec<*mut wsp_ggml_tensor> = if leafs { w.leafs.iter().chain(&w.nodes).copied().collect() } else { w.nodes.clone() };
    let mut map = Vec::new();
    for &o in &old {
        let n = w.tensor(1, None);
        edit(n, |x| *x = get(o));
        map.push((o, n));
    }
    let now = |p: *mut wsp_ggml_tensor| map.iter().find(|&&(o, _)| o == p).map_or(p, |&(_, n)| n);
    for &(_, n) in &map {
        edit(n, |x| {
            x.src.iter_mut().for_each(|s| *s = now(*s));
            x.view_src = now(x.view_src);
        });
    }
    w.leafs.iter_mut().chain(w.nodes.iter_mut()).for_each(|p| *p = now(*p));
    t.map(now)
}

// --- the allocation (galloc.rs) over the passes' result ---------------------

/// One compute buffer per backend of `w`, `size` bytes each (the world
/// keeps them), aligned to 16, and their specs, empty.
struct TestArenas {
    buffers: Vec<BufferRef<'static>>,
    specs: Vec<ArenaSpec>,
}

impl TestArenas {
    fn arenas(&self) -> Arenas<'_, [BufferRef<'static>]> {
        Arenas { buffers: &self.buffers[..], specs: &self.specs }
    }
}

fn compute_buffers(w: &mut World, size: usize) -> TestArenas {
    let buffers = w.compute_buffers(size);
    let specs = buffers
        .iter()
        .map(|&buffer| {
            let mut spec = ArenaSpec { free: vec![(0, size)], ..ArenaSpec::default() };
            super::galloc::describe(&mut spec, buffer, 16, false);
            spec
        })
        .collect();
    TestArenas { buffers, specs }
}

/// A chain on one backend: an in-place candidate with one consumer is
/// computed in its source's memory, memory whose last reader is done is
/// freed and handed out again (best fit), and the plan touches nothing
/// until applied.
#[test]
fn allocation_computes_in_place_frees_and_reuses_memory() {
    let mut w = World::with_backends(&[c"A"]);
    let wa = w.leaf(8, Some(0));
    let n0 = w.node(OP_ADD, 8, &[wa, wa]); // 32 bytes at 0
    let n1 = w.node(OP_ADD, 8, &[n0, wa]); // in place in n0
    let n2 = w.node(OP_MUL_MAT, 8, &[n1, wa]); // not in place: 32 bytes at 32
    let n3 = w.node(OP_MUL_MAT, 8, &[n2, wa]); // n0's memory is free again: at 0
    let ta = compute_buffers(&mut w, 1024);
    split_then(&mut w, &PtrMap::new(), |st, call| {
        let arenas = ta.arenas();
        let mut g = Galloc::new(crate::ggml::in_place_ops());
        let mut log = Record::default();
        assert!(g
            .plan(st.table(), &mut call.live, st.order(), &arenas, Ends::Real { keep: true }, st.copy_backends(), &mut log, "test")
            .is_ok());
        assert!([n0, n1, n2, n3].iter().all(|&t| data(t) == 0), "a plan places nothing");
        assert_eq!(g.max(), [64]);
        g.apply(&call.live, &arenas, "test");
        let base = arenas.specs[0].base;
        assert_eq!((data(n0), data(n1), data(n2), data(n3)), (base, base, base + 32, base));
        assert_eq!(view_src(n1), n0, "computed in place: a view of its source");
        assert!(view_src(n2).is_null() && view_src(n3).is_null());
        assert_eq!(get(n0).buffer, arenas.buffer(0).as_ptr());
        assert_eq!(data(wa), 0x1000, "memory that is not the buffer's is never touched");
    });
}

/// A buffer too small for the plan: the plan says which, and places
/// nothing; an endless one says how much it needs.
#[test]
fn allocation_reports_a_buffer_too_small_before_placing_anything() {
    let mut w = World::with_backends(&[c"A"]);
    let wa = w.leaf(8, Some(0));
    let n0 = w.node(OP_MUL_MAT, 8, &[wa, wa]);
    let n1 = w.node(OP_MUL_MAT, 8, &[n0, wa]);
    let ta = compute_buffers(&mut w, 48);
    split_then(&mut w, &PtrMap::new(), |st, call| {
        let arenas = ta.arenas();
        let mut g = Galloc::new(crate::ggml::in_place_ops());
        let mut log = Record::default();
        assert!(
            matches!(g.plan(st.table(), &mut call.live, st.order(), &arenas, Ends::Real { keep: true }, st.copy_backends(), &mut log, "test"), Err(TooSmall(b)) if b.get() == 0)
        );
        assert_eq!((data(n0), data(n1)), (0, 0));
        assert!(g.plan(st.table(), &mut call.live, st.order(), &arenas, Ends::Endless, st.copy_backends(), &mut log, "test").is_ok());
        assert_eq!(g.max(), [64]);
    });
}

/// A view of a tensor the plan allocates is placed in its memory, at its
/// offset; the caller's allocations at the start of a buffer stay.
#[test]
fn allocation_places_views_in_their_sources_memory_after_the_callers_tensors() {
    let mut w = World::with_backends(&[c"A"]);
    let wa = w.leaf(8, Some(0));
    let n0 = w.node(OP_MUL_MAT, 8, &[wa, wa]);
    let v = w.view(n0, 4);
    edit(v, |t| t.view_offs = 16);
    let n2 = w.node(OP_MUL_MAT, 4, &[v, wa]);
    let mut ta = compute_buffers(&mut w, 1024);
    ta.specs[0].free = vec![(96, 1024 - 96)]; // the caller holds [0, 96)
    split_then(&mut w, &PtrMap::new(), |st, call| {
        let arenas = ta.arenas();
        let mut g = Galloc::new(crate::ggml::in_place_ops());
        let mut log = Record::default();
        assert!(g
            .plan(st.table(), &mut call.live, st.order(), &arenas, Ends::Real { keep: true }, st.copy_backends(), &mut log, "test")
            .is_ok());
        g.apply(&call.live, &arenas, "test");
        let base = arenas.specs[0].base;
        assert_eq!((data(n0), data(v)), (base + 96, base + 96 + 16));
        assert_eq!(data(n2), base + 128);
    });
}

/// Reuse replays every supports_op question the plan asked, not a model of
/// which ones it asked. Backends [A, C, B]: n1 = mul_mat(w1@B, a) and
/// n2 = add(a, w0@A) computed in place on `a`. The plan asks A about n2 in
/// pass 1's place, then moves n2 to B with its memory: a check that only
/// asks the backend n2 ended on misses A's answer. When A starts rejecting
/// n2 (or n2's op changes at the same address to one A rejects), a fresh
/// plan splits [B, C]; the last split, one B split, must not be reused.
#[test]
fn reuse_asks_again_every_question_the_plan_asked() {
    fn world() -> (World, [*mut wsp_ggml_tensor; 2]) {
        let mut w = World::with_backends(&[c"A", c"C", c"B"]);
        let a = w.leaf(8, None);
        let w0 = w.leaf(8, Some(0));
        let w1 = w.leaf(8, Some(2));
        let n1 = w.node(OP_MUL_MAT, 8, &[w1, a]);
        let n2 = w.node(OP_ADD, 8, &[a, w0]);
        // (add_inplace's result is a view of a)
        edit(n2, |t| t.view_src = a);
        (w, [n1, n2])
    }
    #[allow(clippy::type_complexity)]
    let cases: &[(&str, fn(&mut World, *mut wsp_ggml_tensor))] = &[
        ("A rejects n2's op now", |w, _| w.reject(0, OP_ADD)),
        ("n2's op changes to one A rejects", |w, n2| {
            w.reject(0, OP_MUL);
            edit(n2, |t| t.op = OP_MUL);
        }),
    ];
    for &(what, change) in cases {
        let (mut w, [_, n2]) = world();
        let mut st = plan(&mut w, &PtrMap::new());
        assert_eq!(splits(&st), vec![(2, 0, 2, 1)], "one split on B (w0 copied)");
        st.set_standing(Standing::Reusable);
        assert!(still_valid(&mut w, &mut st), "nothing changed yet");
        change(&mut w, n2);
        let fresh = plan(&mut w, &PtrMap::new());
        assert_eq!(splits(&fresh).iter().map(|s| s.0).collect::<Vec<_>>(), vec![2, 1], "{what}: a fresh plan splits [B, C]");
        assert!(!still_valid(&mut w, &mut st), "{what}: the last split does not hold");
    }
}

/// A placement is applied again only while everything it read is as it
/// was: the tensors' data and buffers, the compute buffers' state, and the
/// answers to its questions (here, a view's offset).
#[test]
fn a_kept_placement_holds_until_what_it_read_changes() {
    let mut w = World::with_backends(&[c"A"]);
    let wa = w.leaf(8, Some(0));
    let n0 = w.node(OP_MUL_MAT, 8, &[wa, wa]);
    let v = w.view(n0, 4);
    let n2 = w.node(OP_MUL_MAT, 4, &[v, wa]);
    let n3 = w.node(OP_MUL_MAT, 4, &[n2, wa]);
    let ta = compute_buffers(&mut w, 1024);
    split_then(&mut w, &PtrMap::new(), |st, call| {
        let arenas = ta.arenas();
        let mut g = Galloc::new(crate::ggml::in_place_ops());
        let mut log = Record::default();
        assert!(g
            .plan(st.table(), &mut call.live, st.order(), &arenas, Ends::Real { keep: true }, st.copy_backends(), &mut log, "test")
            .is_ok());
        g.apply(&call.live, &arenas, "test");
        g.clear();
        assert!(!g.still_holds(st.table(), &call.live, &arenas, &log), "the tensors were placed since: a new plan reads that");
        assert!(g
            .plan(st.table(), &mut call.live, st.order(), &arenas, Ends::Real { keep: true }, st.copy_backends(), &mut log, "test")
            .is_ok());
        g.apply(&call.live, &arenas, "test");
        g.clear();
        let placed = [n0, v, n2, n3].map(data);
        assert!(g.still_holds(st.table(), &call.live, &arenas, &log), "nothing changed");
        g.apply(&call.live, &arenas, "test");
        assert_eq!([n0, v, n2, n3].map(data), placed, "applied again: the same places");

        edit(n3, |t| t.data = core::ptr::null_mut());
        assert!(!g.still_holds(st.table(), &call.live, &arenas, &log), "a tensor's memory");
        edit(n3, |t| t.data = addr(placed[3]));
        assert!(g.still_holds(st.table(), &call.live, &arenas, &log));

        let mut other = ta.specs.clone();
        other[0].free = vec![(64, 1024 - 64)];
        let other = Arenas { buffers: &ta.buffers[..], specs: &other };
        assert!(!g.still_holds(st.table(), &call.live, &other, &log), "the compute buffer's free blocks");

        edit(v, |t| t.view_src = n2);
        assert!(!g.still_holds(st.table(), &call.live, &arenas, &log), "a tensor's view source (the plan loaded it)");
        edit(v, |t| t.view_src = n0);
        assert!(g.still_holds(st.table(), &call.live, &arenas, &log));

        // (the view has its memory: its offset is not read again)
        edit(v, |t| t.view_offs = 8);
        assert!(g.still_holds(st.table(), &call.live, &arenas, &log), "what the plan did not read");
        edit(v, |t| t.view_offs = 0);
        edit(n2, |t| t.ne[0] = 5);
        assert!(!g.still_holds(st.table(), &call.live, &arenas, &log), "a question's answer (the size of a tensor it frees)");
        edit(n2, |t| t.ne[0] = 4);
        assert!(g.still_holds(st.table(), &call.live, &arenas, &log));

        assert!(g.plan(st.table(), &mut call.live, st.order(), &arenas, Ends::Endless, st.copy_backends(), &mut log, "test").is_ok());
        assert!(!g.still_holds(st.table(), &call.live, &arenas, &log), "an endless (measuring) plan is not kept");
    });
}
