//! The one log of a split: every question the planner asked C besides
//! what it was given to read, with its answer, in two chapters: the
//! passes' (each size compared and each `supports_op` answer, written by
//! the [`Probe`](super::plan::Probe) of probe.rs), valid while the split
//! is, and the placement's (each buffer size, layout and view offset it
//! asked, written by the [`PlaceProbe`](super::plan::place::PlaceProbe) of
//! galloc.rs), valid while its plan is kept. Also which tensors
//! registration saw only as sources. This module never calls C. A reuse
//! (reuse.rs, galloc.rs) asks every logged question again and needs the
//! same answers. Each entry is checked on its own, so the order in which
//! the planner asked does not matter.

use crate::prelude::*;

use super::ids::{BackendIdx, Slot};

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

/// What the last split read besides the table's entries.
#[derive(Default)]
pub struct Record {
    /// Whether the split may be reused.
    pub standing: Standing,
    /// Tensors first registered as a source or view source (not as a leaf
    /// or node): checked on their own.
    pub unlisted: Vec<Slot>,
    /// Every `supports_op` question, as asked.
    supports: Vec<Supports>,
    /// (slot, bytes) of every size compared, as asked.
    sizes: Vec<(Slot, usize)>,
    /// The placement's questions (its chapter: empty unless its plan is kept).
    placement: PlaceLog,
}

/// The questions the placement asked C about the tensors (besides what it
/// loaded of every tensor), with their answers: one list per kind of
/// question, so that checking them again is a plain loop per kind (the
/// order of asking does not matter).
#[derive(Default)]
struct PlaceLog {
    /// Backend `b`'s buffer's `get_alloc_size` for tensor `id`: (id, b, bytes).
    sizes: Vec<(Slot, BackendIdx, usize)>,
    /// Whether two tensors have the same type, shape and strides (one per
    /// node computed in place, or considered for it).
    layouts: Vec<(Slot, Slot, bool)>,
    /// A tensor's `view_offs`.
    offs: Vec<(Slot, usize)>,
}

impl PlaceLog {
    fn clear(&mut self) {
        self.sizes.clear();
        self.layouts.clear();
        self.offs.clear();
    }
}

/// Who answers the placement's logged questions again (galloc.rs: C, now).
pub trait PlaceAnswers {
    fn alloc_size(&mut self, b: BackendIdx, id: Slot) -> usize;
    fn same_layout(&mut self, a: Slot, b: Slot) -> bool;
    fn view_offs(&mut self, id: Slot) -> usize;
}

/// Who answers the logged questions again (probe.rs: C, now).
pub trait Answers {
    fn nbytes(&mut self, slot: Slot) -> usize;
    fn supports(&mut self, b: BackendIdx, slot: Slot) -> bool;
}

impl Record {
    /// Before a new split.
    pub fn clear(&mut self) {
        self.standing = Standing::Cleared;
        self.unlisted.clear();
        self.supports.clear();
        self.sizes.clear();
        self.placement.clear();
    }

    /// Before a new placement plan.
    pub fn clear_placement(&mut self) {
        self.placement.clear();
    }

    /// Room in the placement's chapter for `asked` questions: (sizes,
    /// layouts, view offsets).
    pub fn reserve_placement(&mut self, asked: [usize; 3]) {
        let log = &mut self.placement;
        log.sizes.reserve(asked[0]);
        log.layouts.reserve(asked[1]);
        log.offs.reserve(asked[2]);
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
        self.placement.offs.push((id, offs));
    }

    /// Whether every question of the placement's chapter gets the same
    /// answer from `now`.
    pub fn placement_holds(&self, now: &mut impl PlaceAnswers) -> bool {
        let log = &self.placement;
        log.layouts.iter().all(|&(a, b, yes)| now.same_layout(a, b) == yes)
            && log.sizes.iter().all(|&(id, b, bytes)| now.alloc_size(b, id) == bytes)
            && log.offs.iter().all(|&(id, offs)| now.view_offs(id) == offs)
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
    pub fn answers_hold(&self, now: &mut impl Answers) -> bool {
        self.sizes.iter().all(|&(slot, bytes)| now.nbytes(slot) == bytes)
            && self.supports.iter().all(|q| {
                let (b, slot, yes) = q.parts();
                now.supports(b, slot) == yes
            })
    }

    /// Whether the plan compared sizes (tests).
    #[cfg(test)]
    pub fn compared_sizes(&self) -> bool {
        !self.sizes.is_empty()
    }
}
