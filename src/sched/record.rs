//! The one log of a split: every question the planner asked C besides
//! what it was given to read, with its answer, in two chapters: the
//! passes' (each size compared and each `supports_op` answer, written by
//! the [`Probe`](super::plan::Probe) of probe.rs), valid while the split
//! is, and the placement's, valid while its plan is kept: what it loaded
//! of every tensor of the table and of the compute buffers, and each
//! buffer size, layout and view offset it asked (written by galloc.rs and
//! its [`PlaceProbe`](super::plan::place::PlaceProbe)). Also which tensors
//! registration saw only as sources. This module never calls C: a reuse
//! asks every logged question again through the planner's `Questions`
//! (reuse.rs) and [`PlaceNow`] (galloc.rs), and the two checks here,
//! [`Record::answers_hold`] and [`Record::placement_holds`], decide. Each
//! entry is checked on its own, so the order in which the planner asked
//! does not matter.

use crate::prelude::*;

use super::ids::{BackendIdx, Slot, SlotId};
use super::plan::place::{ArenaSpec, PlaceQuestions, OTHER_OP};
use super::plan::Questions;

/// A `supports_op` question a plan asked and its answer, in eight bytes
/// (a plan asks one or more per node): the tensor's slot, the backend and
/// the answer, packed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Supports(u64);

impl Supports {
    fn new(backend: BackendIdx, slot: Slot, yes: bool) -> Supports {
        Supports(slot.key() | (backend.get() as u64) << 32 | u64::from(yes) << 48)
    }

    fn parts(self) -> (BackendIdx, Slot, bool) {
        (BackendIdx::new((self.0 >> 32 & 0xffff) as usize), Slot::new(self.0 as u32), self.0 >> 48 != 0)
    }
}

/// Whether the split in the tables may be reused, and if not, why.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Standing {
    /// No complete split: none made yet, or cleared (a new split starts
    /// with this, so one given up half-way is never reused).
    #[default]
    Cleared,
    /// Made with `set_node_backend` assignments, which hold for one compute.
    UserAssigned,
    /// Made leniently (a measure that let an unsupported op through): the
    /// original would have stopped, so it is never reused.
    Lenient,
    /// Made from the graph alone: reused while everything it read holds.
    Reusable,
}

impl Standing {
    /// The standing of a split just made.
    pub fn of_split(user_assigned: bool, lenient: bool) -> Standing {
        match (user_assigned, lenient) {
            (true, _) => Standing::UserAssigned,
            (false, true) => Standing::Lenient,
            (false, false) => Standing::Reusable,
        }
    }
}

/// How registration first reached a tensor that is no leaf or node of the
/// graph: through a tensor registered before it.
#[derive(Clone, Copy, Debug)]
pub enum Via {
    /// Source `j` of the node in `of`.
    Src { of: Slot, j: u8 },
    /// The view source of the tensor in `of`.
    ViewSrc { of: Slot },
}

/// What the last split read besides the table's entries.
#[derive(Default)]
pub struct Record {
    /// Whether the split may be reused.
    standing: Standing,
    /// Tensors first registered as a source or view source (not as a leaf
    /// or node), in registration order, with how registration reached
    /// them: checked on their own.
    unlisted: Vec<(Slot, Via)>,
    /// Every `supports_op` question, as asked.
    supports: Vec<Supports>,
    /// (slot, bytes) of every size compared, as asked.
    sizes: Vec<(Slot, usize)>,
    /// The placement's questions (its chapter: empty unless its plan is kept).
    placement: PlaceLog,
}

/// The placement's chapter: what its plan loaded and asked of C, with the
/// answers; one list per kind of question, so that checking them again is
/// a plain loop per kind (the order of asking does not matter).
#[derive(Default)]
struct PlaceLog {
    /// The table's generation the kept plan was made in; None while no
    /// plan is kept (the vectors stay, for the next one).
    kept: Option<u64>,
    /// The compute buffers as the plan saw them.
    arenas: Vec<ArenaSpec>,
    /// What it loaded of every tensor of the table, in the table's order.
    loaded: LoadedLog,
    /// Backend `b`'s buffer's `get_alloc_size` for tensor `id`: (id, b, bytes).
    sizes: Vec<(Slot, BackendIdx, usize)>,
    /// Whether two tensors have the same type, shape and strides (one per
    /// node computed in place, or considered for it).
    layouts: Vec<(Slot, Slot, bool)>,
    /// A tensor's `view_offs` (in four bytes: a plan that read a larger
    /// one is not kept, `offs_lost`).
    offs: Vec<(Slot, u32)>,
    offs_lost: bool,
}

/// Per tensor, the data, buffer (an index into `buffers`: a graph's
/// tensors live in a few), view source and op the placement loaded (all
/// it reads of a tensor; its plan is a function of exactly this, the
/// arenas and the questions' answers).
#[derive(Default)]
struct LoadedLog {
    data: Vec<usize>,
    buffer: Vec<u8>,
    vsrc: Vec<Option<SlotId>>,
    op: Vec<u8>,
    /// Buffers' addresses.
    buffers: Vec<usize>,
}

impl LoadedLog {
    fn clear(&mut self) {
        self.data.clear();
        self.buffer.clear();
        self.vsrc.clear();
        self.op.clear();
        self.buffers.clear();
    }
}

/// A tensor as the placement would load it now (galloc.rs reads it of C).
#[derive(Clone, Copy)]
pub struct TensorNow {
    pub data: usize,
    pub buffer: usize,
    pub view_src: usize,
    pub op: i32,
}

/// The placement's questions asked again, with the tensors as they are
/// now (galloc.rs: C, now).
pub trait PlaceNow: PlaceQuestions {
    /// Call `f` with every tensor of the table as it is now, in the
    /// table's order, while it returns true; whether it always did.
    fn each_tensor(&self, f: impl FnMut(TensorNow, &Self) -> bool) -> bool;
    /// The address of the tensor registered in `slot` (a view source).
    fn tensor_at(&self, slot: Slot) -> usize;
}

impl Record {
    /// Whether the split may be reused.
    #[inline]
    pub fn standing(&self) -> Standing {
        self.standing
    }

    /// The split just made may be reused as `standing` says.
    pub fn set_standing(&mut self, standing: Standing) {
        self.standing = standing;
    }

    /// The tensors registration met first as a source or view source, in
    /// its order, with how it reached them.
    #[inline]
    pub fn unlisted(&self) -> &[(Slot, Via)] {
        &self.unlisted
    }

    /// Registration met `slot` first through `via` (not as a leaf or node).
    #[inline]
    pub fn note_unlisted(&mut self, slot: Slot, via: Via) {
        self.unlisted.push((slot, via));
    }

    /// Before a new split.
    pub fn clear(&mut self) {
        self.standing = Standing::Cleared;
        self.unlisted.clear();
        self.supports.clear();
        self.sizes.clear();
        self.clear_placement();
    }

    /// Before a new placement plan, or when its plan is gone: no plan is
    /// kept.
    pub fn clear_placement(&mut self) {
        let log = &mut self.placement;
        log.kept = None;
        log.sizes.clear();
        log.layouts.clear();
        log.offs.clear();
        log.offs_lost = false;
    }

    /// Room in the placement's chapter for `asked` questions (sizes,
    /// layouts, view offsets) and for what a plan loads of a table of
    /// `tensors` tensors (exactly: a compute would allocate as much).
    pub fn reserve_placement(&mut self, asked: [usize; 3], tensors: usize) {
        let log = &mut self.placement;
        log.sizes.reserve(asked[0]);
        log.layouts.reserve(asked[1]);
        log.offs.reserve(asked[2]);
        let l = &mut log.loaded;
        l.clear();
        l.data.reserve_exact(tensors);
        l.buffer.reserve_exact(tensors);
        l.vsrc.reserve_exact(tensors);
        l.op.reserve_exact(tensors);
        // (tensors live in a few buffers: weights, inputs, compute buffers)
        l.buffers.reserve(16);
    }

    /// Log what the plan about to be made loads of every tensor of the
    /// table: (data, buffer number, view source, op) in the table's order,
    /// and the address of each buffer number. False if they live in too
    /// many buffers, or an op is too large, to log.
    pub fn place_loaded(
        &mut self,
        tensors: impl ExactSizeIterator<Item = (usize, u32, Option<SlotId>, u8)> + Clone,
        buffers: &[usize],
    ) -> bool {
        let l = &mut self.placement.loaded;
        l.clear();
        // (one pass per field: each a plain copy into memory reserved
        // before, where pushing the four side by side checked every
        // vector's room for every tensor)
        if !tensors.clone().all(|(_, b, _, op)| op != OTHER_OP && u8::try_from(b).is_ok()) {
            return false;
        }
        l.data.extend(tensors.clone().map(|(data, ..)| data));
        l.vsrc.extend(tensors.clone().map(|(_, _, vsrc, _)| vsrc));
        l.op.extend(tensors.clone().map(|(.., op)| op));
        l.buffer.extend(tensors.map(|(_, b, ..)| b as u8));
        l.buffers.extend_from_slice(buffers);
        true
    }

    /// The plan is made over `arenas`: kept, for the table's `generation`,
    /// or not (`None`: its chapter then holds nothing).
    pub fn place_done(&mut self, arenas: &[ArenaSpec], generation: Option<u64>) {
        let log = &mut self.placement;
        // (element by element: the specs' vectors keep their memory)
        log.arenas.truncate(arenas.len());
        let n = log.arenas.len();
        log.arenas.iter_mut().zip(arenas).for_each(|(mine, spec)| mine.clone_from(spec));
        log.arenas.extend_from_slice(&arenas[n..]);
        // (a view offset it could not log: not kept)
        log.kept = generation.filter(|_| !log.offs_lost);
    }

    /// The placement asked backend `b`'s buffer for the size of `id`.
    #[inline]
    pub fn place_size(&mut self, id: Slot, b: BackendIdx, bytes: usize) {
        self.placement.sizes.push((id, b, bytes));
    }

    /// The placement asked whether `a` and `b` have the same layout.
    #[inline]
    pub fn place_layout(&mut self, a: Slot, b: Slot, yes: bool) {
        self.placement.layouts.push((a, b, yes));
    }

    /// The placement read `id`'s view offset.
    #[inline]
    pub fn place_offs(&mut self, id: Slot, offs: usize) {
        match u32::try_from(offs) {
            Ok(o) => self.placement.offs.push((id, o)),
            Err(_) => self.placement.offs_lost = true,
        }
    }

    /// Whether the kept plan holds again: made in the table's
    /// `generation`, for the compute buffers as they are (`arenas`), the
    /// table's `n_tensors` tensors each as it loaded them (`now` walks
    /// them, [`PlaceNow::each_tensor`]), and every question of the
    /// chapter answered the same by `now`.
    #[inline(never)]
    /// Whether a placement's plan is kept (to apply again while it holds).
    pub fn placement_kept(&self) -> bool {
        self.placement.kept.is_some()
    }

    pub fn placement_holds(&self, generation: u64, arenas: &[ArenaSpec], n_tensors: usize, now: &mut impl PlaceNow) -> bool {
        let log = &self.placement;
        let l = &log.loaded;
        if log.kept != Some(generation) || log.arenas != arenas || l.data.len() != n_tensors {
            return false;
        }
        let mut i = 0;
        let same = now.each_tensor(|t: TensorNow, now| {
            // (indexed: the caller walks the table, the hot path of a
            // graph computed again and again)
            let same = i < n_tensors
                && t.data == l.data[i]
                && t.buffer == l.buffers[usize::from(l.buffer[i])]
                && t.view_src == l.vsrc[i].map_or(0, |v| now.tensor_at(v.slot()))
                && t.op == i32::from(l.op[i]);
            i += 1;
            same
        });
        if !same || i != n_tensors {
            return false;
        }
        for &(a, b, yes) in &log.layouts {
            if now.same_layout(a, b) != yes {
                return false;
            }
        }
        for &(id, b, bytes) in &log.sizes {
            if now.alloc_size(b, id) != bytes {
                return false;
            }
        }
        for &(id, offs) in &log.offs {
            if now.view_offs(id) != offs as usize {
                return false;
            }
        }
        true
    }

    /// Forget the split and give the memory back.
    pub fn release(&mut self) {
        *self = Record::default();
    }

    /// Tensor `slot` was `bytes` large.
    #[inline]
    pub fn nbytes(&mut self, slot: Slot, bytes: usize) {
        self.sizes.push((slot, bytes));
    }

    /// Backend `b` answered `yes` for tensor `slot`.
    #[inline]
    pub fn supports(&mut self, b: BackendIdx, slot: Slot, yes: bool) {
        self.supports.push(Supports::new(b, slot, yes));
    }

    /// Whether every logged question gets the same answer from `now`.
    pub fn answers_hold(&self, now: &mut impl Questions) -> bool {
        for &(slot, bytes) in &self.sizes {
            if now.nbytes(slot) != bytes {
                return false;
            }
        }
        for q in &self.supports {
            let (b, slot, yes) = q.parts();
            if now.supports(b, slot) != yes {
                return false;
            }
        }
        true
    }

    /// Whether the plan compared sizes (tests).
    #[cfg(test)]
    pub fn compared_sizes(&self) -> bool {
        !self.sizes.is_empty()
    }
}
