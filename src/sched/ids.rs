//! Typed indices of the scheduler's tables: a backend by its priority
//! index, a tensor by its table slot, and where a tensor's memory is. No
//! table stores a bare sentinel: "no backend" is `None`, and the packed
//! forms keep `Option` and [`Loc`] in a few bytes (the table holds one per
//! tensor).

use core::num::NonZeroU16;
use core::ops::{Index, IndexMut};

/// Slices and vectors indexed by the typed index `$t` (`$get`: its position).
macro_rules! index_by {
    ($t:ident, $get:ident) => {
        impl<T> Index<$t> for [T] {
            type Output = T;
            #[inline]
            fn index(&self, i: $t) -> &T {
                &self[i.$get() as usize]
            }
        }

        impl<T> IndexMut<$t> for [T] {
            #[inline]
            fn index_mut(&mut self, i: $t) -> &mut T {
                &mut self[i.$get() as usize]
            }
        }

        impl<T> Index<$t> for alloc::vec::Vec<T> {
            type Output = T;
            #[inline]
            fn index(&self, i: $t) -> &T {
                &self[i.$get() as usize]
            }
        }

        impl<T> IndexMut<$t> for alloc::vec::Vec<T> {
            #[inline]
            fn index_mut(&mut self, i: $t) -> &mut T {
                &mut self[i.$get() as usize]
            }
        }
    };
}

/// A backend of the scheduler, by priority index (0 is tried first).
/// Stored plus one, so that `Option<BackendIdx>` takes two bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(super) struct BackendIdx(NonZeroU16);

/// The most backends one scheduler takes (one value of the packed [`Loc`]
/// is "foreign").
pub(super) const MAX_BACKENDS: usize = u16::MAX as usize - 1;

impl BackendIdx {
    /// Backend `i` (`i < MAX_BACKENDS`, checked when the scheduler is made).
    #[inline]
    pub fn new(i: usize) -> BackendIdx {
        debug_assert!(i < MAX_BACKENDS);
        match NonZeroU16::new((i + 1) as u16) {
            Some(n) => BackendIdx(n),
            None => unreachable!("i < MAX_BACKENDS"),
        }
    }

    #[inline]
    pub fn get(self) -> usize {
        usize::from(self.0.get()) - 1
    }
}

index_by!(BackendIdx, get);

/// A tensor's slot in the scheduler's table: its id in the passes, the
/// placement and the log (past the table's size: the placement's extra
/// tensors). Where it is optional and stored per tensor (a view source, a
/// copy not made yet), it is kept as an `Option<`[`SlotId`]`>`, as small as
/// the slot itself (no sentinel).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(super) struct Slot(u32);

impl Slot {
    #[inline]
    pub const fn new(slot: u32) -> Slot {
        Slot(slot)
    }

    /// Slot `i` of a table (`i` below `u32::MAX`: the table is smaller).
    #[inline]
    pub fn at(i: usize) -> Slot {
        Slot(i as u32)
    }

    #[inline]
    pub fn get(self) -> u32 {
        self.0
    }

    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// As a key of a `PtrMap`.
    #[inline]
    pub fn key(self) -> u64 {
        u64::from(self.0)
    }
}

/// A [`Slot`] stored plus one, so that `Option<SlotId>` takes four bytes
/// like the slot (the tables hold one per tensor).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct SlotId(core::num::NonZeroU32);

impl SlotId {
    #[inline]
    pub fn slot(self) -> Slot {
        Slot(self.0.get() - 1)
    }
}

impl From<Slot> for SlotId {
    #[inline]
    fn from(s: Slot) -> SlotId {
        match core::num::NonZeroU32::new(s.0.wrapping_add(1)) {
            Some(n) => SlotId(n),
            None => unreachable!("a table slot is below u32::MAX"),
        }
    }
}

impl core::fmt::Display for Slot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.get().fmt(f)
    }
}

index_by!(Slot, index);

/// An input copy, by its index in the plan (`SplitPlan::copy_of`, and the
/// scheduler's copy tensors).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct CopyIdx(u32);

/// A split, by its index in the plan (`SplitPlan::splits`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct SplitIdx(u32);

impl CopyIdx {
    /// Entry `i` (`i` below `u32::MAX`: the plan is smaller).
    #[inline]
    pub fn at(i: usize) -> CopyIdx {
        CopyIdx(i as u32)
    }

    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl SplitIdx {
    /// Entry `i` (`i` below `u32::MAX`: the plan is smaller).
    #[inline]
    pub fn at(i: usize) -> SplitIdx {
        SplitIdx(i as u32)
    }
}

index_by!(CopyIdx, index);

/// Where a tensor's memory is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Loc {
    /// In no backend buffer (none yet, or plain host memory).
    Nowhere,
    /// In a buffer of a backend the scheduler does not have.
    Foreign,
    /// In a buffer of this backend.
    At(BackendIdx),
}

/// A [`Loc`] in two bytes (the table holds one per tensor): 0 nowhere,
/// `u16::MAX` foreign, else the backend index plus one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct PackedLoc(u16);

impl PackedLoc {
    /// [`Loc::Nowhere`]. (A function: cbindgen would export an associated constant's type.)
    pub const fn nowhere() -> PackedLoc {
        PackedLoc(0)
    }

    #[inline]
    pub fn get(self) -> Loc {
        match self.0 {
            0 => Loc::Nowhere,
            u16::MAX => Loc::Foreign,
            n => Loc::At(BackendIdx::new(usize::from(n) - 1)),
        }
    }
}

impl From<Loc> for PackedLoc {
    #[inline]
    fn from(loc: Loc) -> PackedLoc {
        PackedLoc(match loc {
            Loc::Nowhere => 0,
            Loc::Foreign => u16::MAX,
            Loc::At(b) => b.0.get(),
        })
    }
}

impl Loc {
    /// In some backend buffer (the scheduler's or not).
    #[inline]
    pub fn in_buffer(self) -> bool {
        self != Loc::Nowhere
    }
}

/// The rule that gave a tensor its backend. Not only a label for
/// `WSP_GGML_SCHED_DEBUG`: later steps read it. A node placed by `Dst` or
/// `ViewSrc` is pinned to its memory's backend (a rejection there is an
/// error); one placed by `FromConsumer` must be supported where its consumer
/// put it (pass 4 checks); `Unsupported` marks a move whose `supports_op`
/// answers a reuse asks again.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Rule {
    /// No rule yet (no backend).
    Unset,
    /// `set_node_backend`.
    User,
    /// A leaf, where its memory (or its view source's) is.
    Leaf,
    /// A node whose own memory is already in a backend's buffer.
    Dst,
    /// A node whose view source's memory is in a backend's buffer.
    ViewSrc,
    /// Pass 1: the source (index) with the best priority and size that is in a buffer.
    Src(u8),
    /// Pass 2: the same among the sources' assignments.
    Pass2Src(u8),
    /// Pass 3: the first node that consumes it.
    FromConsumer,
    /// A split's copy of an input from another backend.
    InputCopy,
    /// Moved because the backend of its sources does not support the op.
    Unsupported,
    /// Moved along with the node whose memory it uses (in-place op, view).
    FollowsMemory,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_forms_round_trip_and_stay_small() {
        assert_eq!(core::mem::size_of::<Option<BackendIdx>>(), 2);
        assert_eq!(core::mem::size_of::<PackedLoc>(), 2);
        for loc in [Loc::Nowhere, Loc::Foreign, Loc::At(BackendIdx::new(0)), Loc::At(BackendIdx::new(MAX_BACKENDS - 1))] {
            assert_eq!(PackedLoc::from(loc).get(), loc);
        }
        assert!(BackendIdx::new(0) < BackendIdx::new(1), "priority order");
        assert_eq!(BackendIdx::new(7).get(), 7);
        assert_eq!(core::mem::size_of::<Option<SlotId>>(), 4);
        for s in [0, 7, u32::MAX - 1] {
            assert_eq!(SlotId::from(Slot::new(s)).slot(), Slot::new(s));
        }
    }
}
