//! The log of a split: every question the planner asked besides
//! registration's reads (each size compared and each `supports_op` answer)
//! with its answer, and which tensors registration saw only as sources.
//! The [`Probe`](super::plan::Probe) implementation (probe.rs) asks C and
//! writes here; this module never calls C. A reuse (reuse.rs) asks every
//! logged question again and needs the same answers. Each entry is checked
//! on its own, so the order in which the planner asked does not matter.

use crate::prelude::*;

use super::ids::BackendIdx;

/// A `supports_op` question a plan asked and its answer, in eight bytes
/// (a plan asks one or more per node): the tensor's slot, the backend and
/// the answer, packed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Supports(u64);

impl Supports {
    fn new(backend: BackendIdx, slot: u32, yes: bool) -> Supports {
        Supports(u64::from(slot) | (backend.get() as u64) << 32 | u64::from(yes) << 48)
    }

    fn parts(self) -> (BackendIdx, u32, bool) {
        (BackendIdx::new((self.0 >> 32 & 0xffff) as usize), self.0 as u32, self.0 >> 48 != 0)
    }
}

/// What the last split read besides the table's entries.
#[derive(Default)]
pub struct Record {
    /// The tables describe a complete split made without user assignments.
    pub valid: bool,
    /// Tensors first registered as a source or view source (not as a leaf
    /// or node): checked on their own.
    pub unlisted: Vec<u32>,
    /// Every `supports_op` question, as asked.
    supports: Vec<Supports>,
    /// (slot, bytes) of every size compared, as asked.
    sizes: Vec<(u32, usize)>,
}

/// Who answers the logged questions again (probe.rs: C, now).
pub trait Answers {
    fn nbytes(&mut self, slot: u32) -> usize;
    fn supports(&mut self, b: BackendIdx, slot: u32) -> bool;
}

impl Record {
    /// Before a new split.
    pub fn clear(&mut self) {
        self.valid = false;
        self.unlisted.clear();
        self.supports.clear();
        self.sizes.clear();
    }

    /// Forget the split and give the memory back.
    pub fn forget(&mut self) {
        *self = Record::default();
    }

    /// Tensor `slot` was `bytes` large.
    #[inline]
    pub fn nbytes(&mut self, slot: u32, bytes: usize) {
        self.sizes.push((slot, bytes));
    }

    /// Backend `b` answered `yes` for tensor `slot`.
    #[inline]
    pub fn supports(&mut self, b: BackendIdx, slot: u32, yes: bool) {
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
