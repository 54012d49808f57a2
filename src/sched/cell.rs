//! The scheduler as C holds it: the scheduler, and apart from it what it is
//! doing right now ([`Mode`]).
//!
//! User code runs in the middle of the scheduler's work: backends'
//! `supports_op` and buffer callbacks while it plans and places, backends'
//! tensor copies and graph computes and the evaluation callback while it
//! computes. Such code may call back into the scheduler. The scheduler is
//! in a `RefCell`, so that no such call can ever alias a live borrow (the
//! cell checks every borrow: sound by construction, no `unsafe`). The mode
//! lives beside it, so that a call from inside a callback is told apart
//! before it borrows, and gets a message instead of a failed borrow:
//! - while the scheduler is being changed (planning, placing, measuring,
//!   resetting), any call aborts with a message: the caller's exclusive
//!   borrow is live;
//! - while it computes splits, reads are allowed: the compute holds only a
//!   shared borrow while user code runs, and writes its statistics through
//!   a short exclusive one between callbacks (see `SchedCell::exec`);
//!   changes abort.
//!
//! Every borrow of the scheduler is made here, and so is the driver of
//! every call on a graph (`SchedCell::run`), with a compute's exec loop
//! (copy each split's inputs, compute it, record both).

use crate::prelude::*;

use core::cell::{Cell, RefCell};

use super::call::Purpose;
use super::live::Live;
use super::state::Sched;
use crate::fatal::fatal;
use crate::ggml::{GraphRef, HeapTensors};

/// What a scheduler is doing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Nothing: any call may borrow it.
    Idle,
    /// A call reads it (shared borrows only).
    Reading,
    /// A call changes it: the named function holds an exclusive borrow.
    Changing(&'static str),
    /// `graph_compute` is computing splits: reads only.
    Computing,
}

/// A scheduler and its mode; C's `wsp_ggml_backend_sched_t` points at one.
pub struct SchedCell {
    mode: Cell<Mode>,
    sched: RefCell<Sched>,
    /// The input copies: tensors of ours that the caller's graph points at
    /// during a call. Beside the scheduler, not in it: a call's handles on
    /// them borrow this set for the call, while the scheduler is borrowed
    /// and released around user code.
    copies: HeapTensors,
}

/// Puts the mode back when a borrow ends.
struct Restore<'a>(&'a Cell<Mode>, Mode);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        self.0.set(self.1);
    }
}

impl SchedCell {
    pub fn new(sched: Box<Sched>) -> Box<SchedCell> {
        Box::new(SchedCell { mode: Cell::new(Mode::Idle), sched: RefCell::new(*sched), copies: HeapTensors::default() })
    }

    /// Abort naming `func` unless the scheduler is idle.
    fn check_idle(&self, func: &str) {
        match self.mode.get() {
            Mode::Idle => {}
            Mode::Computing => {
                fatal(func, "called from inside the evaluation callback (or another callback of a compute on this scheduler)")
            }
            Mode::Reading => fatal(func, "called from inside a call that reads this scheduler"),
            Mode::Changing(other) => {
                fatal(func, &format!("called from inside {other} on this scheduler (from a backend's callback): the scheduler is in use"))
            }
        }
    }

    /// Run `f` with the scheduler to change (`func` names the call).
    /// Aborts when called from inside one of the scheduler's own callbacks.
    pub fn with_mut<R>(&self, func: &'static str, f: impl FnOnce(&mut Sched) -> R) -> R {
        self.check_idle(func);
        self.mode.set(Mode::Changing(func));
        let _restore = Restore(&self.mode, Mode::Idle);
        // (the mode was Idle: no borrow is live, and until it is Idle again
        // every other call aborts before it borrows)
        f(&mut self.sched.borrow_mut())
    }

    /// Run `f` with the scheduler to read; allowed from inside its
    /// compute's callbacks, not while a call changes it.
    pub fn with_ref<R>(&self, func: &str, f: impl FnOnce(&Sched) -> R) -> R {
        let mode = self.mode.get();
        match mode {
            Mode::Idle => self.mode.set(Mode::Reading),
            Mode::Reading | Mode::Computing => {}
            Mode::Changing(_) => self.check_idle(func),
        }
        let _restore = Restore(&self.mode, mode);
        // (no exclusive borrow is live: the mode is not Changing, and a
        // compute holds only shared borrows while user code runs)
        f(&self.sched.borrow())
    }

    /// Abort naming `func` unless the scheduler is idle: it may be freed
    /// (`sched_free` from one of its own callbacks may not).
    pub fn check_freeable(&self, func: &str) {
        self.check_idle(func)
    }

    /// `wsp_ggml_backend_sched_init_measure`.
    pub fn init_measure<'c>(&'c self, graph: GraphRef<'c>) {
        self.run(graph, Purpose::Measure);
    }

    /// `wsp_ggml_backend_sched_reserve`.
    pub fn reserve<'c>(&'c self, graph: GraphRef<'c>) {
        self.run(graph, Purpose::Reserve);
    }

    /// `wsp_ggml_backend_sched_graph_compute`.
    pub fn graph_compute<'c>(&'c self, graph: GraphRef<'c>) {
        self.run(graph, Purpose::Compute);
    }

    /// The driver of every call on a graph (compute, measure, reserve), its
    /// phases in order: begin the call; split the graph and place it, or
    /// size the compute buffers for it (`Sched::plan_call`: snapshot, reuse
    /// or plan, apply; place, growing a buffer that is too small, or
    /// measure), changing the scheduler; exec, a compute's: per split, copy
    /// its inputs and compute it; finish (the graph's sources back, the
    /// allocators reset).
    fn run<'c>(&'c self, graph: GraphRef<'c>, purpose: Purpose) {
        let func = purpose.func();
        let call = self.with_mut(func, |s| {
            let mut call = s.begin_call(purpose);
            s.plan_call(graph, &self.copies, &mut call);
            call
        });
        if purpose == Purpose::Compute {
            self.exec(graph, &call.live, func);
        }
        // (the call's handles end here: `finish` consumes them)
        self.with_mut(func, move |s| s.finish(call, graph));
    }

    /// A compute's exec phase: per split, copy its inputs and compute it.
    /// While the backends and callbacks run, the compute holds only shared
    /// borrows, so that calls made from there can read the scheduler; each
    /// split's statistics are written through an exclusive borrow made when
    /// no user code runs.
    fn exec<'c>(&'c self, graph: GraphRef<'c>, live: &Live<'c>, func: &'static str) {
        let n_splits = self.sched.borrow().n_splits();
        self.mode.set(Mode::Computing);
        let _restore = Restore(&self.mode, Mode::Idle);
        // One clock read per phase boundary: a phase ends where the next begins.
        let mut now = crate::platform::now_ns();
        for k in 0..n_splits {
            // (Computing: user code runs under these shared borrows, and
            // calls from it only read)
            let copied = self.sched.borrow().copy_inputs(k, live, func);
            let at = crate::platform::now_ns();
            // (no user code runs under the exclusive borrows)
            self.sched.borrow_mut().record_copies(k, copied, now, at);
            let go_on = self.sched.borrow().compute_split(k, graph);
            now = crate::platform::now_ns();
            self.sched.borrow_mut().record_compute(k, at, now);
            if !go_on {
                break;
            }
        }
    }
}
