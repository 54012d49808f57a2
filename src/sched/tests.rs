//! Unit tests of a split made from C structs (registration, the passes,
//! apply, reuse) and of the placement (galloc.rs), without a scheduler and without
//! ggml: tensors, graphs, buffers and backends are plain structs made here,
//! and the few ggml functions reached are stubbed below. The passes alone
//! are tested without C (plan/tests.rs).

use crate::ptrmap::PtrMap;
use core::ffi::{c_char, c_int, c_void};

use super::galloc::{Arenas, Ends, Galloc, TooSmall};
use super::ids::Rule;
use super::make_split;
use super::plan::Settings;
use super::record::{Record, Standing};
use super::state::State;
use crate::ggml::{wsp_ggml_cgraph, wsp_ggml_tensor, zeroed_tensor, GraphRef, WSP_GGML_OP_VIEW};
use crate::handle::BackendRef;
use crate::handle::BufferRef;
use crate::sys::{wsp_ggml_backend, wsp_ggml_backend_buffer, wsp_ggml_backend_buffer_i, wsp_ggml_backend_i};

// ggml ops used here (values of ggml.h's enum in whisper.cpp 1.5).
const OP_ADD: c_int = 2;
const OP_MUL: c_int = 6;
const OP_MUL_MAT: c_int = 23;
const OP_UNARY: c_int = 57;

// --- stubs of the ggml functions the passes reach (f32 tensors only) -----

#[no_mangle]
extern "C" fn wsp_ggml_blck_size(_type: c_int) -> c_int {
    1
}

#[no_mangle]
extern "C" fn wsp_ggml_type_size(_type: c_int) -> usize {
    4
}

#[no_mangle]
extern "C" fn wsp_ggml_nbytes(t: *const wsp_ggml_tensor) -> usize {
    // SAFETY: the tests' own tensors.
    let t = unsafe { &*t };
    4 + (0..4).map(|i| (t.ne[i] as usize - 1) * t.nb[i]).sum::<usize>()
}

#[no_mangle]
extern "C" fn wsp_ggml_op_name(op: c_int) -> *const c_char {
    // the names the scheduler looks up (ggml::in_place_ops), at v1.5.0's values
    match op {
        OP_ADD => c"ADD".as_ptr(),
        OP_MUL => c"MUL".as_ptr(),
        OP_UNARY => c"UNARY".as_ptr(),
        _ => c"op".as_ptr(),
    }
}

// The CPU backend's interface (which `is_cpu` compares with) links these;
// the passes never compute.
#[no_mangle]
extern "C" fn wsp_ggml_graph_plan(_g: *mut wsp_ggml_cgraph, _n_threads: c_int) -> crate::ggml::wsp_ggml_cplan {
    unreachable!("the passes never compute")
}

#[no_mangle]
extern "C" fn wsp_ggml_graph_compute(_g: *mut wsp_ggml_cgraph, _plan: *mut crate::ggml::wsp_ggml_cplan) -> c_int {
    unreachable!("the passes never compute")
}

// --- a little world of backends, buffers and tensors ----------------------

/// A backend's context: its name and the ops its supports_op rejects.
struct FakeBackend {
    name: &'static core::ffi::CStr,
    rejects: Vec<c_int>,
}

extern "C" fn fake_name(b: *mut wsp_ggml_backend) -> *const c_char {
    // SAFETY: the tests' own backends, whose context is a FakeBackend.
    unsafe { (*(*b).context.cast::<FakeBackend>()).name.as_ptr() }
}

extern "C" fn fake_supports(b: *mut wsp_ggml_backend, op: *const wsp_ggml_tensor) -> bool {
    // SAFETY: as above, and a live tensor.
    unsafe { !(*(*b).context.cast::<FakeBackend>()).rejects.contains(&(*op).op) }
}

/// Allocated once and held as the raw pointers `Box::into_raw` gave, freed
/// in `Drop` (backends, buffers and tensors point at each other): a `Box`
/// moved into a `Vec` or dereferenced again asserts unique access, which
/// under Stacked Borrows invalidates the pointers the others hold.
#[derive(Default)]
struct World {
    contexts: Vec<*mut FakeBackend>,
    backends: Vec<*mut wsp_ggml_backend>,
    /// One buffer per backend.
    buffers: Vec<*mut wsp_ggml_backend_buffer>,
    tensors: Vec<*mut wsp_ggml_tensor>,
    nodes: Vec<*mut wsp_ggml_tensor>,
    leafs: Vec<*mut wsp_ggml_tensor>,
}

/// A tensor address the code under test never reads: without provenance,
/// not an integer cast (Miri warns of those).
fn addr(a: usize) -> *mut c_void {
    core::ptr::null_mut::<u8>().wrapping_add(a).cast()
}

fn leak<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

impl Drop for World {
    fn drop(&mut self) {
        // SAFETY: each pointer came from `leak` and is freed once, here.
        unsafe {
            self.tensors.iter().for_each(|&p| drop(Box::from_raw(p)));
            self.buffers.iter().for_each(|&p| drop(Box::from_raw(p)));
            self.backends.iter().for_each(|&p| drop(Box::from_raw(p)));
            self.contexts.iter().for_each(|&p| drop(Box::from_raw(p)));
        }
    }
}

impl World {
    fn with_backends(names: &[&'static core::ffi::CStr]) -> World {
        let mut w = World::default();
        for &name in names {
            let ctx = leak(FakeBackend { name, rejects: Vec::new() });
            // SAFETY: an all-zero interface is all-None function pointers.
            let mut iface: wsp_ggml_backend_i = unsafe { core::mem::zeroed() };
            iface.get_name = Some(fake_name);
            iface.supports_op = Some(fake_supports);
            let b = leak(wsp_ggml_backend { iface, context: ctx.cast() });
            // SAFETY: as above.
            let biface: wsp_ggml_backend_buffer_i = unsafe { core::mem::zeroed() };
            w.buffers.push(leak(wsp_ggml_backend_buffer { iface: biface, backend: b, context: core::ptr::null_mut(), size: 0 }));
            w.contexts.push(ctx);
            w.backends.push(b);
        }
        w
    }

    fn reject(&mut self, backend: usize, op: c_int) {
        // SAFETY: our own context; no reference to it is live.
        unsafe { (*self.contexts[backend]).rejects.push(op) };
    }

    fn refs(&self) -> Vec<BackendRef<'static>> {
        // SAFETY: the world's backends, freed only when it is dropped (as C
        // lends backends: 'static, the tests keep the world alive).
        self.backends.iter().map(|&b| unsafe { BackendRef::new(b) }.unwrap()).collect()
    }

    /// A [n] f32 tensor; `on`: in that backend's buffer (with data).
    fn tensor(&mut self, n: i64, on: Option<usize>) -> *mut wsp_ggml_tensor {
        let mut t = zeroed_tensor();
        t.n_dims = 1;
        t.ne = [n, 1, 1, 1];
        t.nb = [4, 4 * n as usize, 4 * n as usize, 4 * n as usize];
        if let Some(b) = on {
            t.buffer = self.buffers[b];
            t.data = addr(0x1000); // never read by the passes
        }
        let p = leak(t);
        self.tensors.push(p);
        p
    }

    fn leaf(&mut self, n: i64, on: Option<usize>) -> *mut wsp_ggml_tensor {
        let t = self.tensor(n, on);
        self.leafs.push(t);
        t
    }

    fn node(&mut self, op: c_int, n: i64, srcs: &[*mut wsp_ggml_tensor]) -> *mut wsp_ggml_tensor {
        let t = self.tensor(n, None);
        // SAFETY: our own tensor.
        unsafe {
            (*t).op = op;
            let t = &mut *t;
            t.src[..srcs.len()].copy_from_slice(srcs);
        }
        self.nodes.push(t);
        t
    }

    fn view(&mut self, of: *mut wsp_ggml_tensor, n: i64) -> *mut wsp_ggml_tensor {
        let t = self.node(WSP_GGML_OP_VIEW, n, &[of]);
        // SAFETY: our own tensor.
        unsafe { (*t).view_src = of };
        t
    }

    fn graph(&mut self) -> wsp_ggml_cgraph {
        let mut g = wsp_ggml_cgraph::of_nodes(self.nodes.as_mut_ptr(), core::ptr::null_mut(), self.nodes.len(), self.nodes.len(), 0);
        g.n_leafs = self.leafs.len() as c_int;
        g.leafs = self.leafs.as_mut_ptr();
        g
    }
}

/// The passes' result for the world's graph (the graph is left patched:
/// `st.unpatch()` gives it back).
fn plan(w: &mut World, user: &PtrMap) -> State {
    let backends = w.refs();
    let mut g = w.graph();
    // SAFETY: a local graph over the world's tensors, both outlive `graph`.
    let graph = unsafe { GraphRef::new(&mut g) }.unwrap();
    let mut st = State::default();
    let listed = w.nodes.len() + w.leafs.len();
    let mut attempt = st.sizing.first_attempt(listed);
    let accepts_all = vec![false; backends.len()];
    let settings = Settings { accepts_all: &accepts_all, debug: false, measuring: false };
    loop {
        match make_split(&mut st, &backends, settings, user, graph, &attempt, "test") {
            Ok(_) => return st,
            Err(why) => {
                attempt.retry(why, &st.table);
                st.unpatch();
            }
        }
    }
}

/// "No backend" in the tests' (backend index, rule) pairs.
const NO_BACKEND: u16 = u16::MAX;

fn assigned(st: &State, t: *mut wsp_ggml_tensor) -> (u16, Rule) {
    let slot = st.table.find(t).expect("registered");
    let info = st.table.info[slot];
    (info.assign.map_or(NO_BACKEND, |b| b.get() as u16), info.rule)
}

fn splits(st: &State) -> Vec<(u16, usize, usize, usize)> {
    st.plan.splits.iter().map(|s| (s.backend.get() as u16, s.i_start, s.i_end, s.inputs.len())).collect()
}

#[test]
fn splits_cut_where_the_backend_changes_and_inputs_are_copied_once_per_split() {
    let mut w = World::with_backends(&[c"A", c"B"]);
    let wa = w.leaf(8, Some(0));
    let wb = w.leaf(8, Some(1));
    let n0 = w.node(OP_ADD, 8, &[wa, wa]); // A
    let n1 = w.node(OP_MUL, 8, &[wb, n0]); // B (wb first), needs n0
    let n2 = w.node(OP_ADD, 8, &[wb, n0]); // B, needs n0 again: same copy
    let st = plan(&mut w, &PtrMap::new());
    assert_eq!(assigned(&st, n1).0, 1);
    assert_eq!(splits(&st), vec![(0, 0, 1, 0), (1, 1, 3, 1)]);
    // both consumers read the one copy of n0 on B
    // SAFETY: our own tensors.
    let (c1, c2) = unsafe { ((*n1).src[1], (*n2).src[1]) };
    assert_eq!(c1, c2);
    assert_ne!(c1, n0);
    assert_eq!(assigned(&st, c1), (1, Rule::InputCopy));
    let mut st = st;
    st.unpatch();
    // SAFETY: as above.
    assert_eq!(unsafe { (*n1).src[1] }, n0, "the graph's sources are given back");
}

/// The world's graph was planned into `st` (and given back): whether the
/// reuse check accepts it as it is now.
fn still_valid(w: &mut World, st: &mut State) -> bool {
    let backends = w.refs();
    let mut g = w.graph();
    // SAFETY: a local graph over the world's tensors, both outlive `graph`.
    let graph = unsafe { GraphRef::new(&mut g) }.unwrap();
    st.still_valid(&backends, graph)
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
        let mut w = World::with_backends(&[c"A", c"B"]);
        let wa = w.leaf(8, Some(0));
        let xb = w.leaf(8, Some(1));
        // B's source first, then A's (better priority): their sizes decide
        let n0 = w.node(OP_ADD, 8, &[xb, wa]);
        let n1 = w.node(OP_MUL, 8, &[n0, xb]);
        let mut st = plan(&mut w, &PtrMap::new());
        st.unpatch();
        st.reuse.standing = Standing::Reusable;
        assert!(st.reuse.compared_sizes(), "the source rule compared sizes");
        change(&mut w, [wa, xb, n0, n1]);
        assert_eq!(still_valid(&mut w, &mut st), holds, "reuse after changing {what}");
    }
}

// --- the allocation (galloc.rs) over the passes' result ---------------------

/// A compute buffer whose base is its context (never dereferenced).
extern "C" fn fake_base(b: *mut wsp_ggml_backend_buffer) -> *mut c_void {
    // SAFETY: the tests' own buffers.
    unsafe { (*b).context }
}

/// One compute buffer per backend of `w`, `size` bytes each, at fake bases
/// (0x10000 apart), aligned to 16; and the arenas over them, empty.
#[allow(clippy::vec_box)]
fn compute_buffers(w: &mut World, size: usize) -> (Vec<Box<wsp_ggml_backend_buffer>>, Arenas<'static>) {
    let mut bufs = Vec::new();
    for (i, &b) in w.backends.iter().enumerate() {
        // SAFETY: an all-zero interface is all-None function pointers.
        let mut iface: wsp_ggml_backend_buffer_i = unsafe { core::mem::zeroed() };
        iface.get_base = Some(fake_base);
        let base = 0x10000 * (i + 1);
        bufs.push(Box::new(wsp_ggml_backend_buffer { iface, backend: b, context: addr(base), size }));
    }
    let mut arenas = Arenas::new();
    for b in &mut bufs {
        // SAFETY: a boxed buffer returned with the arenas, outliving them
        // (its fake base is never dereferenced).
        let buffer = unsafe { BufferRef::new(&mut **b) }.unwrap();
        arenas.push(buffer, 16, false, vec![(0, size)]);
    }
    (bufs, arenas)
}

/// Change one of the test's own tensors.
fn edit(t: *mut wsp_ggml_tensor, f: impl FnOnce(&mut wsp_ggml_tensor)) {
    // SAFETY: the tests' own live tensors; no reference to them is held.
    f(unsafe { &mut *t })
}

fn data(t: *mut wsp_ggml_tensor) -> usize {
    // SAFETY: the tests' own tensors.
    unsafe { (*t).data as usize }
}

fn view_src(t: *mut wsp_ggml_tensor) -> *mut wsp_ggml_tensor {
    // SAFETY: as above.
    unsafe { (*t).view_src }
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
    let st = plan(&mut w, &PtrMap::new());
    let (_bufs, arenas) = compute_buffers(&mut w, 1024);
    let mut g = Galloc::new(crate::ggml::in_place_ops());
    let mut log = Record::default();
    assert!(g.plan(&st.table, &st.order, &arenas, Ends::Real { keep: true }, &mut log, "test").is_ok());
    assert!([n0, n1, n2, n3].iter().all(|&t| data(t) == 0), "a plan places nothing");
    assert_eq!(g.max(), [64]);
    g.apply(&st.table, &arenas);
    let base = arenas.specs[0].base;
    assert_eq!((data(n0), data(n1), data(n2), data(n3)), (base, base, base + 32, base));
    assert_eq!(view_src(n1), n0, "computed in place: a view of its source");
    assert!(view_src(n2).is_null() && view_src(n3).is_null());
    // SAFETY: our own tensors.
    assert_eq!(unsafe { (*n0).buffer }, arenas.buffers[0].as_ptr());
    // SAFETY: as above.
    assert_eq!(unsafe { (*wa).data } as usize, 0x1000, "memory that is not the buffer's is never touched");
}

/// A buffer too small for the plan: the plan says which, and places
/// nothing; an endless one says how much it needs.
#[test]
fn allocation_reports_a_buffer_too_small_before_placing_anything() {
    let mut w = World::with_backends(&[c"A"]);
    let wa = w.leaf(8, Some(0));
    let n0 = w.node(OP_MUL_MAT, 8, &[wa, wa]);
    let n1 = w.node(OP_MUL_MAT, 8, &[n0, wa]);
    let st = plan(&mut w, &PtrMap::new());
    let (_bufs, arenas) = compute_buffers(&mut w, 48);
    let mut g = Galloc::new(crate::ggml::in_place_ops());
    let mut log = Record::default();
    assert!(matches!(g.plan(&st.table, &st.order, &arenas, Ends::Real { keep: true }, &mut log, "test"), Err(TooSmall(b)) if b.get() == 0));
    assert_eq!((data(n0), data(n1)), (0, 0));
    assert!(g.plan(&st.table, &st.order, &arenas, Ends::Endless, &mut log, "test").is_ok());
    assert_eq!(g.max(), [64]);
}

/// A view of a tensor the plan allocates is placed in its memory, at its
/// offset; the caller's allocations at the start of a buffer stay.
#[test]
fn allocation_places_views_in_their_sources_memory_after_the_callers_tensors() {
    let mut w = World::with_backends(&[c"A"]);
    let wa = w.leaf(8, Some(0));
    let n0 = w.node(OP_MUL_MAT, 8, &[wa, wa]);
    let v = w.view(n0, 4);
    // SAFETY: our own tensor.
    unsafe { (*v).view_offs = 16 };
    let n2 = w.node(OP_MUL_MAT, 4, &[v, wa]);
    let st = plan(&mut w, &PtrMap::new());
    let (_bufs, mut arenas) = compute_buffers(&mut w, 1024);
    arenas.specs[0].free = vec![(96, 1024 - 96)]; // the caller holds [0, 96)
    let mut g = Galloc::new(crate::ggml::in_place_ops());
    let mut log = Record::default();
    assert!(g.plan(&st.table, &st.order, &arenas, Ends::Real { keep: true }, &mut log, "test").is_ok());
    g.apply(&st.table, &arenas);
    let base = arenas.specs[0].base;
    assert_eq!((data(n0), data(v)), (base + 96, base + 96 + 16));
    assert_eq!(data(n2), base + 128);
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
        // SAFETY: our own tensor: add_inplace's result is a view of a.
        unsafe { (*n2).view_src = a };
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
        st.unpatch();
        assert_eq!(splits(&st), vec![(2, 0, 2, 1)], "one split on B (w0 copied)");
        st.reuse.standing = Standing::Reusable;
        assert!(still_valid(&mut w, &mut st), "nothing changed yet");
        change(&mut w, n2);
        let mut fresh = plan(&mut w, &PtrMap::new());
        fresh.unpatch();
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
    let st = plan(&mut w, &PtrMap::new());
    let (_bufs, arenas) = compute_buffers(&mut w, 1024);
    let mut g = Galloc::new(crate::ggml::in_place_ops());
    let mut log = Record::default();
    assert!(g.plan(&st.table, &st.order, &arenas, Ends::Real { keep: true }, &mut log, "test").is_ok());
    g.apply(&st.table, &arenas);
    g.end_plan();
    assert!(!g.still_holds(&st.table, &arenas, &log), "the tensors were placed since: a new plan reads that");
    assert!(g.plan(&st.table, &st.order, &arenas, Ends::Real { keep: true }, &mut log, "test").is_ok());
    g.apply(&st.table, &arenas);
    g.end_plan();
    let placed = [n0, v, n2, n3].map(data);
    assert!(g.still_holds(&st.table, &arenas, &log), "nothing changed");
    g.apply(&st.table, &arenas);
    assert_eq!([n0, v, n2, n3].map(data), placed, "applied again: the same places");

    edit(n3, |t| t.data = core::ptr::null_mut());
    assert!(!g.still_holds(&st.table, &arenas, &log), "a tensor's memory");
    edit(n3, |t| t.data = addr(placed[3]));
    assert!(g.still_holds(&st.table, &arenas, &log));

    let mut other = arenas.clone();
    other.specs[0].free = vec![(64, 1024 - 64)];
    assert!(!g.still_holds(&st.table, &other, &log), "the compute buffer's free blocks");

    edit(v, |t| t.view_src = n2);
    assert!(!g.still_holds(&st.table, &arenas, &log), "a tensor's view source (the plan loaded it)");
    edit(v, |t| t.view_src = n0);
    assert!(g.still_holds(&st.table, &arenas, &log));

    // (the view has its memory: its offset is not read again)
    edit(v, |t| t.view_offs = 8);
    assert!(g.still_holds(&st.table, &arenas, &log), "what the plan did not read");
    edit(v, |t| t.view_offs = 0);
    edit(n2, |t| t.ne[0] = 5);
    assert!(!g.still_holds(&st.table, &arenas, &log), "a question's answer (the size of a tensor it frees)");
    edit(n2, |t| t.ne[0] = 4);
    assert!(g.still_holds(&st.table, &arenas, &log));

    assert!(g.plan(&st.table, &st.order, &arenas, Ends::Endless, &mut log, "test").is_ok());
    assert!(!g.still_holds(&st.table, &arenas, &log), "an endless (measuring) plan is not kept");
}
