//! The recorder every question the passes ask C goes through (besides
//! registration's reads, table.rs): each size compared and each
//! `supports_op` answer, in order, so that a reuse (reuse.rs) can ask them
//! all again and compare.

use crate::prelude::*;

use super::ids::BackendIdx;
use super::table::Table;
use crate::ggml::TensorRef;
use crate::handle::BackendRef;

/// A `supports_op` question a plan asked and its answer, in eight bytes
/// (a plan asks one or more per node): the tensor's slot, the backend and
/// the answer, packed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Supports(u64);

impl Supports {
    fn new(backend: BackendIdx, slot: u32, yes: bool) -> Supports {
        Supports(u64::from(slot) | (backend.get() as u64) << 32 | u64::from(yes) << 48)
    }

    /// The same question, answered now.
    fn again(self, backends: &[BackendRef], table: &Table) -> Supports {
        let (slot, backend) = (self.0 as u32, BackendIdx::new((self.0 >> 32 & 0xffff) as usize));
        Supports::new(backend, slot, backends[backend].supports_op(table.tensor(slot)))
    }
}

/// What the last split read besides the table's entries: the questions it
/// asked (the recorder every such question goes through), and which tensors
/// it registered only as sources.
#[derive(Default)]
pub struct Record {
    /// The tables describe a complete split made without user assignments.
    pub valid: bool,
    /// Tensors first registered as a source or view source (not as a leaf
    /// or node): checked on their own.
    pub unlisted: Vec<u32>,
    /// Every `supports_op` question, in the order asked.
    supports: Vec<Supports>,
    /// (slot, bytes) of every size compared, in the order asked.
    sizes: Vec<(u32, usize)>,
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

    /// `t`'s size (`t` is registered in `slot`), recorded.
    pub fn nbytes(&mut self, t: TensorRef, slot: u32) -> usize {
        let bytes = t.nbytes();
        self.sizes.push((slot, bytes));
        bytes
    }

    /// Whether backend `b` (`backend`) supports `t` (registered in `slot`),
    /// recorded. A backend that accepts every op (`accepts_all`: our CPU
    /// backend) is not asked.
    #[inline]
    pub fn supports(&mut self, backend: BackendRef, accepts_all: bool, b: BackendIdx, t: TensorRef, slot: u32) -> bool {
        if accepts_all {
            return true;
        }
        let yes = backend.supports_op(t);
        self.supports.push(Supports::new(b, slot, yes));
        yes
    }

    /// Whether every recorded question gets the same answer now.
    pub fn answers_hold(&self, backends: &[BackendRef], table: &Table) -> bool {
        self.sizes.iter().all(|&(slot, bytes)| table.tensor(slot).nbytes() == bytes)
            && self.supports.iter().all(|&q| q.again(backends, table) == q)
    }

    /// Whether the plan compared sizes (tests).
    #[cfg(test)]
    pub fn compared_sizes(&self) -> bool {
        !self.sizes.is_empty()
    }
}
