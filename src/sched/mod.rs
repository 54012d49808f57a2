//! The multi-backend split scheduler.
//!
//! Same assignment passes and split rule as the original, so every node lands
//! on the same backend and the graph splits at the same places. What differs,
//! on purpose (see docs/differences.md):
//! - no fixed limits: backends, splits, split inputs and graph size are all
//!   bounded only by memory, and tables grow with the graph;
//! - `set_node_backend` is honoured until the end of the next compute;
//! - an input used by several nodes of a split is copied once for that split;
//! - no global state, nothing leaked, no ggml context used at all: the input
//!   copies and graph views are plain structs owned by the scheduler;
//! - misuse aborts with a message naming the function and argument.
//! - the graph's `src` pointers, redirected to the input copies during the
//!   compute (as the placement walks them), are restored afterwards;
//! - an unchanged graph reuses the last split (checked exactly, reuse.rs);
//! - the tensors are placed by the scheduler itself, as ggml-alloc would
//!   place them, planned before anything is touched (plan/place.rs).
//!
//! Modules: `ids` (typed indices: `Slot`, `BackendIdx`, `Rule`), `live`
//! (the running call's tensor handles, by slot), `plan`
//! (the passes and the placement's plan, sealed from C: they see slots and
//! what was read, never a tensor, and ask the rest through probes), `table`
//! (the slot table and what registration read), `record` (the one log of
//! the questions asked of C), `galloc` (the placement's C side: loading,
//! its probe, applying, keeping a plan), `call` (a call's redirected
//! sources, and the memory kept for a call), `probe` (the snapshot, and the
//! passes' door to C), `reuse` (is the last split still valid), `fit`
//! (each backend's record: its compute buffer, sized and grown), `state`
//! (one split, whose fields are its own and whose methods run each of its
//! stages, and `Sched`), `cell` (borrows around user code, the input
//! copies, and the driver of a compute), `dot` (the schedule as Graphviz
//! DOT); their order, bottom to top, is scripts/layers' (the one
//! place it is written). ggml-alloc's allocator itself is owned through
//! `crate::talloc`. No `unsafe` anywhere here (forbidden): C is reached
//! only through the safe wrappers of the boundary layer (`crate::ggml`,
//! `crate::handle`, ...).
//!
//! What is kept between calls names tensors by identity (`TensorId`: the
//! table's keys, the log), which cannot be dereferenced. Each call on a
//! graph has a [`CallState`]: its handles by slot (`Live`, filled by
//! registration or the reuse check from the call's own graph, `TensorRef<'c>`
//! for that call only) and the graph sources it redirected, given back when
//! the call ends.
//!
//! Nothing is allocated on the heap in a compute of a graph no larger than
//! one placed since the last measure or reset: every vector (table, log,
//! placement, compute-buffer descriptions) keeps its capacity until then.
//!
//! Every call on a graph (compute, `init_measure`, `reserve`: its
//! `Purpose`) runs as the same phases, in one driver (`SchedCell::run`,
//! cell.rs):
//! - **begin**: the call's state ([`Sched::begin_call`]);
//! - **snapshot**: register the graph's tensors (probe.rs, `Registrar`);
//! - **reuse?**: the last split still holds (reuse.rs, `still_valid`), or
//!   else **plan** (the passes, `plan::plan_split`) and apply the split
//!   (copies, patches, the placement's walk): [`Sched::split`];
//! - **place**: a compute plans where the tensors go, or keeps the last
//!   placement while it holds (galloc.rs), growing a buffer too small
//!   (fit.rs), then **applies** it to the tensors ([`Sched::place`]); a
//!   measure plans into endless buffers and sizes the real ones
//!   ([`Sched::measure`]);
//! - **exec**, a compute's: copy each split's inputs and compute it
//!   (cell.rs);
//! - **finish**: give the graph its sources back, reset the allocators,
//!   drop the user's assignments: [`Sched::finish`].
//!
//! `reset` finishes and releases the split.
//!
//! Teardown verbs mean one thing each: `clear` forgets the contents and
//! keeps the memory (for the next split; `clear_to`/`clear_for` start
//! again from given contents); `release` forgets them and gives the memory
//! back (what Drop does at the end); `finish` ends a call (the phase
//! above); `reset` is the C API's (`sched_reset`, and ggml-alloc's
//! allocator reset). `Redirections::unpatch` undoes `Redirections::apply`
//! (the graph's sources).

// Sound by construction: the scheduler reaches C only through the safe
// wrappers of the boundary layer (scripts/layers names it).
#![forbid(unsafe_code)]

use crate::prelude::*;

mod call;
mod cell;
mod dot;
mod fit;
mod galloc;
mod ids;
mod live;
mod plan;
mod probe;
mod record;
mod reuse;
mod state;
mod table;
#[cfg(test)]
mod tests;

use crate::copy::tensor_copy_staged;
use crate::fatal::{check, fatal};
use crate::ggml::{self, wsp_ggml_tallocr_t, EvalCallback, GraphRef, GraphView, HeapTensors, TensorRef};
use crate::handle::wsp_ggml_backend_buffer_t;
use crate::handle::{tensor_backend, BackendRef};
use crate::platform::OutOfMemory;
use crate::ptrmap::PtrMap;
use crate::talloc::Tallocr;
use ids::BackendIdx;
use plan::{Refusal, Settings};

use record::Standing;
use table::{Attempt, Retry};

pub use cell::SchedCell;
use fit::NeedsFallback;

/// Whether a compute's split is the last one, reused, or new.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Split {
    Reused,
    New,
}
use call::{Purpose, Redirections, Rooms};
use fit::BackendRecord;
pub use fit::BackendStats;
use galloc::{Ends, TooSmall};
use live::Live;
use state::{nanos, Phase, State};
pub use state::{Sched, SplitStats, MAX_BACKENDS};

impl Sched {
    /// `wsp_ggml_backend_sched_new`.
    pub fn new(backends: &[BackendRef<'static>]) -> Box<Sched> {
        assert!(backends.len() <= MAX_BACKENDS, "checked by the caller");
        Box::new(Sched {
            backends: fit::Backends::new(backends),
            phase: Phase::New,
            galloc: galloc::Galloc::new(ggml::in_place_ops()),
            debug: crate::platform::env_flag(c"WSP_GGML_SCHED_DEBUG"),
            user: PtrMap::new(),
            eval_callback: None,
            staging: core::cell::Cell::new(Vec::new()),
            rooms: Rooms::default(),
            splits_made: 0,
            repeats: false,
            st: State::default(),
        })
    }

    pub fn n_backends(&self) -> usize {
        self.backends.len()
    }

    /// Whether `init_measure` (or `reserve`) made the compute buffers.
    pub fn is_measured(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// Index of `backend` in this scheduler, or abort naming `func`.
    fn index_of(&self, backend: BackendRef, func: &str) -> BackendIdx {
        match self.backends.iter().position(|r| r.backend() == backend) {
            Some(i) => BackendIdx::new(i),
            None => fatal(
                func,
                &format!("argument 'backend' ('{}') is not one of the scheduler's {} backends", backend.name_lossy(), self.backends.len()),
            ),
        }
    }

    /// The compute allocator of `backend`, for C: valid until the next
    /// measure, reset of buffers or `sched_free` (it may be retired by a
    /// compute, and stays valid until then).
    pub fn get_tallocr(&self, backend: BackendRef, func: &str) -> wsp_ggml_tallocr_t {
        self.backends[self.index_of(backend, func)].talloc().as_ptr()
    }

    pub fn get_buffer(&self, backend: BackendRef, func: &str) -> wsp_ggml_backend_buffer_t {
        self.backends[self.index_of(backend, func)].talloc().buffer().as_ptr()
    }

    pub fn set_node_backend(&mut self, node: TensorRef, backend: BackendRef) {
        let i = self.index_of(backend, "wsp_ggml_backend_sched_set_node_backend");
        self.user.insert(node.id().addr() as u64, i.get() as u32);
    }

    /// `init_measure` (`grow_only` false) and `reserve` (true): split the
    /// graph and size each backend's compute buffer for it. `init_measure`
    /// sizes them as the original does (calling it again re-measures: the
    /// original leaked and measured with the real allocators, and we size
    /// as it did); `reserve`'s buffers grow, never shrink.
    fn measure<'c>(&mut self, graph: GraphRef<'c>, copies: &'c HeapTensors, call: &mut CallState<'c>, grow_only: bool, func: &str) {
        // What the placement kept for its memory is sized anew from here
        // (the computes after a measure allocate nothing once they have
        // placed a graph as large).
        self.st.forget_placement(&mut self.galloc);
        // Measure with fresh measure allocators; keep the real ones aside.
        let real = self.phase == Phase::Ready;
        let kept: Vec<Option<Tallocr<'static>>> = self.backends.iter_mut().map(|r| r.start_measure(real)).collect();
        self.phase = Phase::Measuring;
        self.split(graph, copies, call, func);
        self.clear_stats();
        // Nothing is placed (the measure buffers are freed below), so the
        // measured graph does not point into freed memory.
        let sizes = self.measure_split(call, func);
        // Room for the computes that follow: the table of a graph as large
        // (with the input copies and other tensors this one had) and the
        // placement's state over it, so that they allocate nothing.
        let tensors = self.st.reserve_for(&mut self.galloc, graph.n_nodes() + graph.n_leafs());
        // (each backend's buffer sized for the split: fit.rs)
        for ((r, measured), old) in self.backends.iter_mut().zip(sizes).zip(kept) {
            r.end_measure(old, measured, self.st.inputs(), &call.live, grow_only, func);
        }
        self.backends.iter_mut().for_each(BackendRecord::forget_retired);
        self.phase = Phase::Ready;
        self.repeats = true;
        // (and the call's handles, once its memory is back: `finish`)
        let patches = self.st.plan().patches.len();
        call.rooms_after = Some((tensors, patches + patches / 4));
    }

    /// `wsp_ggml_backend_sched_reset`: forget user assignments and the last
    /// split graph (releasing its memory); reset the allocators.
    pub fn reset(&mut self) {
        self.backends.iter().for_each(BackendRecord::reset_allocators);
        self.user.clear(0);
        self.st.release(&mut self.galloc);
        self.rooms.release();
        self.clear_stats();
    }

    /// Statistics start over: a zero record per split of the current split,
    /// and per backend. The one place they are reset (each compute, measure
    /// and reset).
    fn clear_stats(&mut self) {
        self.st.clear_runs();
        self.backends.iter_mut().for_each(|r| *r.stats_mut() = BackendStats::default());
    }

    pub fn set_eval_callback(&mut self, cb: Option<EvalCallback>) {
        self.eval_callback = cb;
    }

    /// Splits made, not reused, since `sched_new` (for the driver's tests).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn splits_made(&self) -> u64 {
        self.splits_made
    }

    pub fn n_splits(&self) -> usize {
        self.st.plan().splits.len()
    }

    pub fn backend(&self, i: usize) -> Option<BackendRef<'static>> {
        self.backends.get(i).map(BackendRecord::backend)
    }

    /// The backend `node` was assigned to in the last split graph.
    pub fn tensor_backend(&self, node: TensorRef) -> Option<BackendRef<'static>> {
        let slot = self.st.table().find(node.id())?;
        self.st.assignment(slot).map(|a| self.backends[a].backend())
    }

    /// Size of the compute buffer for `backend`; 0 before the first measure
    /// (ggml-alloc's 1-byte placeholder is not a compute buffer).
    pub fn buffer_size(&self, backend: BackendRef, func: &str) -> usize {
        let talloc = self.backends[self.index_of(backend, func)].talloc();
        if self.phase != Phase::Ready {
            return 0;
        }
        talloc.buffer().size()
    }

    /// (backend, i_start, i_end, n_inputs, stats) of split `i` of the last split graph.
    pub fn split_info(&self, i: usize) -> Option<(BackendRef<'static>, usize, usize, usize, SplitStats)> {
        let s = self.st.plan().splits.get(i)?;
        Some((self.backends[s.backend].backend(), s.i_start, s.i_end, s.inputs.len(), self.st.run(i)))
    }

    pub fn backend_stats(&self, backend: BackendRef) -> Option<BackendStats> {
        self.backends.iter().find(|r| r.backend() == backend).map(BackendRecord::stats)
    }

    /// The start of a call on a graph for `purpose`: its handles and
    /// redirections, empty, in the memory kept for them. A compute needs
    /// the compute buffers a measure made.
    fn begin_call<'c>(&mut self, purpose: Purpose) -> CallState<'c> {
        let func = purpose.func();
        if purpose == Purpose::Compute {
            check(self.is_measured(), func, || "called before wsp_ggml_backend_sched_init_measure".into());
        }
        CallState::new(&mut self.rooms, purpose)
    }

    /// A call's phases before anything runs: split the graph, then place
    /// it in the compute buffers (a compute, [`Sched::prepare`]) or size
    /// the buffers for it (a measure, [`Sched::measure`]).
    fn plan_call<'c>(&mut self, graph: GraphRef<'c>, copies: &'c HeapTensors, call: &mut CallState<'c>) {
        let func = call.purpose.func();
        match call.purpose {
            Purpose::Compute => self.prepare(graph, copies, call, func),
            Purpose::Measure => self.measure(graph, copies, call, false, func),
            Purpose::Reserve => self.measure(graph, copies, call, true, func),
        }
    }

    /// The end of a call: give the graph its sources back, keep the call's
    /// memory (with the room a measure asked for), reset the allocators,
    /// drop the user's assignments; `init_measure` then writes the
    /// schedule where `WSP_GGML_SCHED_DOT` says (dot.rs).
    fn finish(&mut self, call: CallState, graph: GraphRef) {
        let (purpose, room) = (call.purpose, call.rooms_after);
        self.rooms.put(call.live, call.redirected);
        self.backends.iter().for_each(BackendRecord::reset_allocators);
        self.user.clear(0);
        if let Some((tensors, patches)) = room {
            self.rooms.reserve(tensors, patches);
        }
        if purpose == Purpose::Measure {
            self.write_dot_to_env(graph, purpose.func());
        }
    }

    // The compute's steps (driven by `SchedCell::exec`): the ones
    // that run user code take the scheduler shared, the ones that record
    // what happened take it exclusively and run none.

    /// Copy the inputs of split `k` to its backend; returns the bytes copied.
    fn copy_inputs(&self, k: usize, live: &Live, func: &str) -> usize {
        let split = &self.st.plan().splits[k];
        let backend = self.backends[split.backend].backend();
        split.inputs.clone().map(|i| self.copy_input(i, backend, live, func)).sum()
    }

    /// Split `k`'s inputs were copied (`bytes`) from `from` to `to` (clock readings).
    fn record_copies(&mut self, k: usize, bytes: usize, from: u64, to: u64) {
        let split = &self.st.plan().splits[k];
        let stats = self.backends.get_mut(split.backend).stats_mut();
        stats.n_splits += 1;
        stats.n_copies += split.inputs.len() as u32;
        stats.bytes_copied += bytes;
        if !split.inputs.is_empty() {
            stats.copy_ns += nanos(from, to);
        }
        self.st.record_copied(k, bytes);
    }

    /// Compute split `k` on its backend (observed by the evaluation
    /// callback, if set). Returns false when the callback asked to stop.
    fn compute_split(&self, k: usize, graph: GraphRef) -> bool {
        let split = &self.st.plan().splits[k];
        let backend = self.backends[split.backend].backend();
        let view = graph.view(split.i_start, split.i_end);
        match self.eval_callback {
            None => {
                backend.compute_view(&view);
                true
            }
            Some(cb) => compute_observed(&view, backend, cb),
        }
    }

    /// Split `k` was computed from `from` to `to` (clock readings).
    fn record_compute(&mut self, k: usize, from: u64, to: u64) {
        self.backends.get_mut(self.st.plan().splits[k].backend).stats_mut().compute_ns += nanos(from, to);
    }

    /// Copy split input `i` to its copy on `backend`; returns the bytes copied.
    fn copy_input(&self, i: usize, backend: BackendRef, live: &Live, func: &str) -> usize {
        let (input_slot, copy) = self.st.plan().inputs[i];
        let input = live.get(input_slot);
        let copy = live.get(self.st.copy_slots()[copy.index()]);
        if input.buffer().is_null() {
            if let Some(view_src) = input.view_src() {
                // A view not initialised yet (as the original does it).
                input.init_view_from_src(view_src);
                if let Some(owner) = tensor_backend(input) {
                    self.backends[self.index_of(owner, func)].talloc().buffer().init_tensor(input);
                }
            }
        }
        let copy_backend =
            tensor_backend(copy).unwrap_or_else(|| fatal(func, &format!("the copy of split input '{}' has no buffer", input.name_lossy())));
        check(copy_backend == backend, func, || format!("the copy of split input '{}' is not on its split's backend", input.name_lossy()));
        if input.buffer().is_null() {
            // Plain host memory (a tensor or a view of one whose data the
            // caller set): the original stopped ("has no buffer"), though the
            // bytes are right there. Copied as tensor_copy copies from a host
            // buffer.
            check(!input.data().is_null(), func, || {
                format!("split input '{}' has no memory (no buffer, no data, not a view)", input.name_lossy())
            });
            crate::handle::tensor_set_from_host(copy, input);
            return input.nbytes();
        }
        check(tensor_backend(input) != Some(copy_backend), func, || {
            format!("split input '{}' is not on another backend than its split", input.name_lossy())
        });
        let mut staging = self.staging.take();
        tensor_copy_staged(input, copy, &mut staging);
        self.staging.set(staging);
        input.nbytes()
    }

    /// A compute's phases before anything runs: snapshot, reuse? or plan,
    /// and apply the split ([`Sched::split`]), then place and apply the
    /// placement ([`Sched::place`]). Where the placement cannot fit with
    /// `set_node_backend`'s assignments (a backend could not grow its
    /// buffer), they are dropped and the graph is split again: the driver
    /// decides, the placement never calls the passes.
    fn prepare<'c>(&mut self, graph: GraphRef<'c>, copies: &'c HeapTensors, call: &mut CallState<'c>, func: &str) {
        let split = self.split(graph, copies, call, func);
        if self.place(split, call, func).is_err() {
            self.user.clear(0);
            call.redirected.unpatch();
            let split = self.split(graph, copies, call, func);
            if self.place(split, call, func).is_err() {
                unreachable!("without user assignments a placement that cannot grow stops with a message");
            }
        }
        self.clear_stats();
    }

    /// Plan the split's placement and apply it; a reused split's last
    /// placement is applied again if it still holds (galloc.rs,
    /// `Galloc::still_holds`). The plan is kept to apply again for a reused
    /// split, and for a new one while graphs repeat (`Sched::repeats`),
    /// but not right after a kept plan did not hold: a graph whose shapes
    /// change every compute (a decoder's) logs every other plan, not each
    /// (the log costs it 0.02 of the original's share), and a graph that
    /// settles is placed again once more than it would be. A buffer too
    /// small for the plan grows first (fit.rs); where a backend cannot
    /// allocate a larger buffer, the split does not fit with `set_node_backend`'s assignments
    /// (`Err(NeedsFallback)`: the driver drops them and splits again, which
    /// is what the original computes); without assignments to drop, it
    /// stops with a message.
    fn place(&mut self, split: Split, call: &mut CallState, func: &str) -> Result<(), NeedsFallback> {
        let reused = split == Split::Reused;
        let mut keep = reused || self.repeats;
        self.repeats = reused;
        if reused {
            let arenas = self.backends.arenas(self.st.inputs(), &call.live);
            if self.st.placement_holds(&self.galloc, &call.live, &arenas) {
                self.galloc.apply(&call.live, &arenas, func);
                self.note_reached();
                return Ok(());
            }
            keep &= !self.st.placement_kept();
        }
        self.backends.start_placement();
        // A grown buffer starts empty: the caller's inputs stay in the old
        // one, where the plan no longer computes in place in their memory,
        // so the need can rise once after the first growth (found by the
        // fuzz: seed 599558631070). The second growth has room for that
        // need, so each backend grows at most twice; the bound keeps a
        // margin, and past it the compute stops with a message.
        let rounds = 4 * self.backends.len() + 4;
        for _ in 0..rounds {
            let arenas = self.backends.arenas(self.st.inputs(), &call.live);
            let Err(TooSmall(b)) = self.st.plan_placement(&mut self.galloc, &mut call.live, &arenas, Ends::Real { keep }, func) else {
                self.galloc.apply(&call.live, &arenas, func);
                self.galloc.clear();
                self.note_reached();
                return Ok(());
            };
            let endless = self.st.plan_placement(&mut self.galloc, &mut call.live, &arenas, Ends::Endless, func);
            assert!(endless.is_ok(), "an endless buffer fits any split");
            let need = self.galloc.max()[b.get()];
            let have = arenas.specs[b.get()].size;
            let backend = self.backends[b].backend();
            if self.debug {
                crate::platform::errln!(
                    "wsp_ggml_backend_sched: the split needs {need} bytes of the compute buffer of '{}' ({have} bytes)",
                    backend.name_lossy()
                );
            }
            match self.backends.grow(b, need, self.debug) {
                Ok(()) => {} // (planned again in the larger buffer)
                Err(_) if !self.user.is_empty() => {
                    if self.debug {
                        crate::platform::errln!(
                        "wsp_ggml_backend_sched: '{}' cannot allocate a larger compute buffer: set_node_backend is not applied in this compute",
                        backend.name_lossy()
                    );
                    }
                    return Err(NeedsFallback);
                }
                Err(OutOfMemory(size)) => {
                    if self.debug {
                        crate::platform::errln!(
                        "wsp_ggml_backend_sched: this graph needs a compute buffer of {need} bytes on backend '{}' (it has {have}), and the backend could not allocate one",
                        backend.name_lossy()
                    );
                    }
                    crate::platform::out_of_memory(func, size);
                }
            }
        }
        fatal(func, &format!("the compute buffers still do not fit this graph after growing {rounds} times"));
    }

    /// Remember how far the split just placed went into each compute
    /// buffer: ggml-alloc's `max_size` counts the scheduler's allocations
    /// as well as the caller's, and a measure again sizes by it.
    fn note_reached(&mut self) {
        self.backends.iter_mut().zip(self.galloc.max()).for_each(|(r, &m)| r.note_reached(m));
    }

    /// The measure of the split just made: how far into each measure
    /// allocator's buffer it goes (as `wsp_ggml_tallocr_max_size` would say
    /// after ggml-alloc allocated it). Nothing is placed.
    fn measure_split(&mut self, call: &mut CallState, func: &str) -> Vec<usize> {
        let arenas = self.backends.arenas(self.st.inputs(), &call.live);
        if self.st.plan_placement(&mut self.galloc, &mut call.live, &arenas, Ends::Endless, func).is_err() {
            unreachable!("an endless buffer fits any split");
        }
        self.galloc.clear();
        self.backends.iter().zip(self.galloc.max()).map(|(r, &m)| m.max(r.talloc().max_size())).collect()
    }

    /// Print the assignments and splits of the last split (where messages go: platform.rs).
    fn print_assignments(&self, graph: GraphRef, live: &Live) {
        use core::fmt::Write;
        let st = &self.st;
        let name = |a: Option<BackendIdx>| a.map_or_else(|| "NULL".to_string(), |a| self.backends[a].backend().name_lossy());
        // (one line, one write; a long listing never sits whole in memory)
        let mut out = String::new();
        let flush = |out: &mut String| crate::platform::info_text(out);
        let mut k = 0;
        for i in 0..graph.n_nodes() {
            if k < st.plan().splits.len() && i == st.plan().splits[k].i_start {
                let s = &st.plan().splits[k];
                let _ = write!(out, "\n## SPLIT #{k}: {} # {} inputs:", name(Some(s.backend)), s.inputs.len());
                for &(slot, _) in &st.plan().inputs[s.inputs.clone()] {
                    let t = live.get(slot);
                    let _ = write!(out, " [{} ({} bytes)]", t.name_lossy(), t.nbytes());
                }
                let _ = writeln!(out);
                flush(&mut out);
                k += 1;
            }
            let node = graph.node(i);
            if node.is_view_op() {
                continue;
            }
            let show = |t: TensorRef| match st.table().find(t.id()) {
                Some(s) => {
                    let (assign, rule) = st.decision(s);
                    format!("{} [{} {:?}]", t.name_lossy(), name(assign), rule)
                }
                None => format!("{} [NULL]", t.name_lossy()),
            };
            let _ = write!(out, "node #{i:3} ({}): {}", ggml::op_name(node.op()), show(node));
            for (_, src) in node.srcs() {
                let _ = write!(out, " <- {}", show(src));
            }
            let _ = writeln!(out);
            flush(&mut out);
        }
    }
}

/// What one call on a graph holds apart from the scheduler: what it is
/// for, the handles of its tensors by slot, and the graph sources it
/// redirected to input copies. Made at the start of the call
/// ([`Sched::begin_call`]) and ended with it ([`Sched::finish`]), which
/// gives the graph its sources back.
struct CallState<'c> {
    purpose: Purpose,
    live: Live<'c>,
    redirected: Redirections<'c>,
    /// Room to keep for the next calls' handles and redirections
    /// (tensors, patches), once this call's memory is back: a measure's.
    rooms_after: Option<(usize, usize)>,
}

impl<'c> CallState<'c> {
    /// No handle, nothing redirected, in the memory of `rooms`.
    fn new(rooms: &mut Rooms, purpose: Purpose) -> Self {
        let (live, redirected) = rooms.take();
        CallState { purpose, live, redirected, rooms_after: None }
    }
}

/// Make a split of `graph` in `st`: snapshot (registration), plan, then
/// apply (copies, patches, the placement's walk). `user`: the
/// `set_node_backend` assignments, by tensor address. Returns whether the
/// plan was lenient (see `plan::Planner`); a graph the planner refuses
/// aborts naming `func`.
#[allow(clippy::too_many_arguments)]
fn make_split<'c>(
    st: &mut State,
    call: &mut CallState<'c>,
    copies: &'c HeapTensors,
    backends: &[BackendRef<'_>],
    settings: Settings<'_>,
    user: &PtrMap,
    graph: GraphRef<'c>,
    attempt: &Attempt,
    func: &str,
) -> Result<bool, Retry> {
    st.snapshot(graph, &mut call.live, backends, user, attempt, func)?;
    let planned = st.plan_split(&call.live, backends, settings);
    let (notes, planned) = match planned {
        Ok(p) => (p.notes, Ok(p.lenient)),
        Err((refusal, notes)) => (notes, Err(refusal)),
    };
    for note in notes {
        crate::platform::errln!("wsp_ggml_backend_sched: {note}");
    }
    let lenient = planned.unwrap_or_else(|Refusal(why)| fatal(func, &why));
    st.make_copies(backends, copies, &mut call.live)?;
    st.redirect(&mut call.redirected, &call.live);
    st.build_order(&call.live);
    st.size_runs();
    Ok(lenient)
}

impl Sched {
    /// Assign every node to a backend and cut the graph into splits; reuse
    /// the last split when the graph and everything it depends on are
    /// unchanged.
    fn split<'c>(&mut self, graph: GraphRef<'c>, copies: &'c HeapTensors, call: &mut CallState<'c>, func: &str) -> Split {
        let backends = self.backends.refs();
        // (the same graph at the same addresses, or built again elsewhere)
        let reused = self.user.is_empty()
            && (self.st.still_valid(backends, graph, &mut call.live) || self.st.still_valid_moved(backends, graph, copies, &mut call.live));
        if reused {
            self.st.refresh_copies(backends, copies, &mut call.live);
            self.st.redirect(&mut call.redirected, &call.live);
            self.st.size_runs();
        } else {
            let listed = graph.n_nodes() + graph.n_leafs();
            let mut attempt = self.st.first_attempt(listed);
            let settings =
                Settings { accepts_all: self.backends.accepts_all(), debug: self.debug, measuring: self.phase == Phase::Measuring };
            let lenient = loop {
                match make_split(&mut self.st, call, copies, backends, settings, &self.user, graph, &attempt, func) {
                    Ok(lenient) => break lenient,
                    Err(why) => self.st.retry(&mut attempt, why),
                }
                call.redirected.unpatch();
            };
            self.st.split_made(listed, Standing::of_split(!self.user.is_empty(), lenient));
            self.splits_made += 1;
        }
        if self.debug {
            self.print_assignments(graph, &call.live);
        }
        if reused {
            Split::Reused
        } else {
            Split::New
        }
    }
}

/// Upstream's evaluation-callback protocol for one split (`view`): ask about each
/// node, compute in batches that end at an asked node, synchronise, then
/// show it. Returns false when the callback asked to stop.
fn compute_observed(view: &GraphView, backend: BackendRef, cb: EvalCallback) -> bool {
    let n = view.n_nodes();
    let mut j0 = 0;
    while j0 < n {
        let mut j1 = j0;
        let mut need = cb.call(view.node(j1), true);
        while !need && j1 + 1 < n {
            j1 += 1;
            need = cb.call(view.node(j1), true);
        }
        backend.compute_view(&view.sub(j0, j1 + 1));
        backend.synchronize_if_any();
        if need && !cb.call(view.node(j1), false) {
            return false;
        }
        j0 = j1 + 1;
    }
    true
}
