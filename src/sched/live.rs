//! The tensors of the running call, by slot.
//!
//! What the scheduler keeps between calls names tensors by identity
//! ([`TensorId`](crate::ggml::TensorId): the table's keys, the log), which
//! cannot be dereferenced. A call finds its tensors again in its own graph:
//! registration (probe.rs) and the reuse check (reuse.rs) put the handle of
//! every slot they reach here, and everything that reads or writes a
//! tensor during the call gets it from here. A handle is a
//! [`TensorRef<'a>`], `'a` the call: none outlives it, by the compiler's
//! check. A slot not reached in this call has no handle.

use crate::prelude::*;

use super::ids::Slot;
use crate::ggml::TensorRef;
use core::num::NonZeroUsize;

/// The handles of one call, by slot (table slots, then the placement's
/// extra tensors past the table).
pub(super) struct Live<'a> {
    tensors: Vec<Option<TensorRef<'a>>>,
}

impl<'a> Live<'a> {
    /// No handle, room for `size` slots; the memory comes from `room`.
    pub fn new(room: &mut Room<Option<NonZeroUsize>>) -> Live<'a> {
        Live { tensors: room.take() }
    }

    /// Give the memory back to `room` for the next call.
    pub fn end(self, room: &mut Room<Option<NonZeroUsize>>) {
        room.put(self.tensors);
    }

    /// Forget every handle; `size` slots, none reached.
    pub fn reset(&mut self, size: usize) {
        self.tensors.clear();
        // (filled in runs of 1 KiB: glibc's memset stores those with vector
        // instructions; one large memset is a `rep stosb`, which costs the
        // same time but reads as one instruction per byte under callgrind,
        // as much as the rest of a reused compute's work per node)
        for _ in (0..size).step_by(128) {
            let n = (size - self.tensors.len()).min(128);
            self.tensors.extend(core::iter::repeat(None).take(n));
        }
    }

    /// Slot `slot` is `t` (the slots grow to hold it: registration numbers
    /// them as it goes).
    #[inline(always)]
    pub fn set(&mut self, slot: Slot, t: TensorRef<'a>) {
        match self.tensors.get_mut(slot.index()) {
            Some(e) => *e = Some(t),
            None => self.grow_to(slot.index(), t),
        }
    }

    /// [`Live::set`] for a slot just registered: registration numbers them
    /// in order, so it is nearly always the next one.
    #[inline(always)]
    pub fn set_new(&mut self, slot: Slot, t: TensorRef<'a>) {
        if slot.index() == self.tensors.len() {
            self.tensors.push(Some(t));
        } else {
            self.set(slot, t);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow_to(&mut self, i: usize, t: TensorRef<'a>) {
        self.tensors.resize(i, None);
        self.tensors.push(Some(t));
    }

    /// The handle of `slot`, if reached in this call.
    #[inline(always)]
    pub fn find(&self, slot: Slot) -> Option<TensorRef<'a>> {
        self.tensors.get(slot.index()).copied().flatten()
    }

    /// The handle of `slot`, which this call reached.
    #[inline(always)]
    pub fn get(&self, slot: Slot) -> TensorRef<'a> {
        self.find(slot).expect("a slot reached in this call")
    }

    /// Room for `slots` slots in all (exactly: the scheduler keeps it).
    pub fn reserve(&mut self, slots: usize) {
        self.tensors.reserve_exact(slots.saturating_sub(self.tensors.len()));
    }

    /// Keep only the first `size` slots (drops the extra tensors).
    pub fn truncate(&mut self, size: usize) {
        self.tensors.truncate(size);
    }

    /// One more slot past the others, for `t`; returns it.
    pub fn push(&mut self, t: TensorRef<'a>) -> Slot {
        self.tensors.push(Some(t));
        Slot::at(self.tensors.len() - 1)
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Every slot's handle, in slot order.
    #[inline(always)]
    pub fn slots(&self) -> &[Option<TensorRef<'a>>] {
        &self.tensors
    }
}

/// The memory of a per-call vector between calls ([`Live`]'s, the
/// redirected sources'), as a vector of a placeholder type `T` of the same
/// size and alignment, always empty: never a handle. A call allocates
/// nothing once a graph as large was split.
pub(super) struct Room<T>(Vec<T>);

impl<T> Default for Room<T> {
    fn default() -> Self {
        Room(Vec::new())
    }
}

impl<T> Room<T> {
    /// The memory, for a vector of `U` (given back with [`Room::put`]).
    pub fn take<U>(&mut self) -> Vec<U> {
        recycle(core::mem::take(&mut self.0))
    }

    /// Keep the memory of `v` (emptied) for the next call.
    pub fn put<U>(&mut self, v: Vec<U>) {
        self.0 = recycle(v);
    }

    /// Room for `slots` handles.
    pub fn reserve(&mut self, slots: usize) {
        self.0.reserve_exact(slots.saturating_sub(self.0.len()));
    }

    /// Give the memory back.
    pub fn release(&mut self) {
        self.0 = Vec::new();
    }
}

/// The memory of `v`, emptied, for elements of another type of the same
/// size and alignment (`collect` reuses a vector's allocation in place).
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    assert!(core::mem::size_of::<T>() == core::mem::size_of::<U>() && core::mem::align_of::<T>() == core::mem::align_of::<U>());
    v.clear();
    v.into_iter().map(|_| unreachable!("emptied")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_goes_from_call_to_call() {
        let mut room = Room::<Option<NonZeroUsize>>::default();
        room.reserve(100);
        let cap = room.0.capacity();
        let p = room.0.as_ptr() as usize;
        let mut t = crate::ggml::zeroed_tensor();
        {
            let mut live = Live::new(&mut room);
            live.reset(50);
            assert_eq!(live.tensors.as_ptr() as usize, p, "the same memory");
            live.set(Slot::at(3), TensorRef::of_test(&mut t));
            assert!(live.find(Slot::at(3)).is_some() && live.find(Slot::at(4)).is_none());
            live.end(&mut room);
        }
        assert_eq!((room.0.capacity(), room.0.as_ptr() as usize), (cap, p));
        assert!(room.0.is_empty(), "no handle kept");
    }
}
