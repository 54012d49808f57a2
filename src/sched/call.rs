//! One call on a graph: what it is for ([`Purpose`]), what it redirects,
//! and the memory a call's vectors keep between calls: the graph's
//! sources pointed at the split's input copies for the call, given back
//! when it ends ([`Redirections`]), and the rooms of the call's handles
//! and redirections ([`Rooms`]).

use crate::prelude::*;

use super::ids::Slot;
use super::live::{Live, Room};
use super::plan::Patch;
use crate::ggml::TensorRef;

/// The graph sources a split redirects to its input copies, for one call:
/// (node, source index, original source) of each. Dropped while they are
/// redirected, it gives the graph its sources back: the caller's graph
/// never keeps pointers into the scheduler's copies past the call.
pub(super) struct Redirections<'c> {
    applied: Vec<(TensorRef<'c>, usize, TensorRef<'c>)>,
}

impl<'c> Redirections<'c> {
    /// None yet; the memory comes from `room`.
    fn new(room: &mut Room<[usize; 3]>) -> Self {
        Redirections { applied: room.take() }
    }

    /// Give the graph its sources back and the memory to `room`.
    fn end(mut self, room: &mut Room<[usize; 3]>) {
        self.unpatch();
        room.put(core::mem::take(&mut self.applied));
    }

    /// Point the graph's sources at their input copies as `patches` says
    /// (sources' slots in `srcs`, the tensors in `live`).
    pub(super) fn apply(&mut self, patches: &[Patch], srcs: &[Slot], copy_slots: &[Slot], live: &Live<'c>) {
        debug_assert!(self.applied.is_empty(), "applied once");
        self.applied.reserve_exact(patches.len());
        for p in patches {
            let (node, original) = (live.get(p.node), live.get(srcs[p.k as usize]));
            let copy = live.get(copy_slots[p.copy.index()]);
            node.set_src(p.j, Some(copy));
            self.applied.push((node, p.j, original));
        }
    }

    /// Give the graph its sources back (nothing if they are not redirected).
    pub(super) fn unpatch(&mut self) {
        for (node, j, original) in self.applied.drain(..).rev() {
            node.set_src(j, Some(original));
        }
    }
}

impl Drop for Redirections<'_> {
    fn drop(&mut self) {
        self.unpatch();
    }
}

/// The memory of a call's handles and redirections, kept between calls.
#[derive(Default)]
pub(super) struct Rooms {
    live: Room<Option<core::num::NonZeroUsize>>,
    redirected: Room<[usize; 3]>,
}

impl Rooms {
    /// A call's handles and redirections, none yet, in the memory kept
    /// for them.
    pub(super) fn take<'c>(&mut self) -> (Live<'c>, Redirections<'c>) {
        (Live::new(&mut self.live), Redirections::new(&mut self.redirected))
    }

    /// The end of a call: the graph's sources given back, the memory kept
    /// for the next call.
    pub(super) fn put(&mut self, live: Live<'_>, redirected: Redirections<'_>) {
        redirected.end(&mut self.redirected);
        live.end(&mut self.live);
    }

    /// Room for a call on `tensors` tensors that redirects `patches`
    /// sources.
    pub(super) fn reserve(&mut self, tensors: usize, patches: usize) {
        self.live.reserve(tensors);
        self.redirected.reserve(patches);
    }

    /// Give the memory back.
    pub(super) fn release(&mut self) {
        self.live.release();
        self.redirected.release();
    }
}

/// What a call on a graph is for. The driver (`SchedCell::run`, cell.rs)
/// runs the same phases for each.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Purpose {
    /// `graph_compute`: place the split in the compute buffers, compute it.
    Compute,
    /// `init_measure`: size the compute buffers for the split.
    Measure,
    /// `reserve`: the same, the buffers only growing.
    Reserve,
}

impl Purpose {
    /// The exported function making the call (for messages).
    pub(super) fn func(self) -> &'static str {
        match self {
            Purpose::Compute => "wsp_ggml_backend_sched_graph_compute",
            Purpose::Measure => "wsp_ggml_backend_sched_init_measure",
            Purpose::Reserve => "wsp_ggml_backend_sched_reserve",
        }
    }
}
