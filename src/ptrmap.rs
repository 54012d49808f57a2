//! A small open-addressing map from a 64-bit key (a tensor address, or a
//! packed pair of indices) to a 32-bit value.
//!
//! Used by graph_copy.rs to map a graph's tensors to their copies, and by
//! the scheduler for user assignments, input copies and the placement's
//! extra tensors (the crate has no std, hence no HashMap). Slots
//! carry a generation number, so emptying the map is O(1) (bump the
//! generation) instead of rewriting the whole table; the table grows with
//! the graph and never shrinks.

use crate::prelude::*;

#[derive(Clone, Copy, Default)]
struct Slot {
    key: u64,
    val: u32,
    /// The slot is occupied iff `gen` equals the map's current generation.
    gen: u32,
}

pub struct PtrMap {
    slots: Vec<Slot>,
    gen: u32,
    len: usize,
    shift: u32,
}

impl Default for PtrMap {
    fn default() -> Self {
        Self::new()
    }
}

impl PtrMap {
    /// An empty map; it allocates on its first insertion.
    pub const fn new() -> Self {
        PtrMap { slots: Vec::new(), gen: 1, len: 0, shift: 64 }
    }

    #[inline]
    fn slot(&self, key: u64) -> usize {
        // Fibonacci hashing: the multiplication spreads keys with equal low
        // bits (aligned addresses, packed indices) over the high bits taken.
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Empty the map, making room for `expected` keys without rehashing.
    pub fn clear(&mut self, expected: usize) {
        let want = (expected + expected / 3 + 1).next_power_of_two().max(16);
        if self.slots.is_empty() && expected == 0 {
            // still nothing allocated: stay so
        } else if want > self.slots.len() {
            self.slots = vec![Slot::default(); want];
            self.shift = 64 - want.trailing_zeros();
            self.gen = 1;
        } else if self.gen == u32::MAX {
            self.slots.fill(Slot::default());
            self.gen = 1;
        } else {
            self.gen += 1;
        }
        self.len = 0;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.slot(key);
        loop {
            let s = &self.slots[i];
            if s.gen != self.gen {
                return None;
            }
            if s.key == key {
                return Some(s.val);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot of `key`, or the free slot where it goes (`false`), after
    /// making room for one more key: the load stays at most 3/4, so probes
    /// stay short and the table small.
    #[inline]
    fn entry(&mut self, key: u64) -> (usize, bool) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.slot(key);
        loop {
            let s = &self.slots[i];
            if s.gen != self.gen {
                return (i, false);
            }
            if s.key == key {
                return (i, true);
            }
            i = (i + 1) & mask;
        }
    }

    /// The value for `key`, inserting `make()` if absent. Returns (value, inserted).
    #[inline]
    pub fn get_or_insert_with(&mut self, key: u64, make: impl FnOnce() -> u32) -> (u32, bool) {
        let (i, found) = self.entry(key);
        if found {
            return (self.slots[i].val, false);
        }
        let val = make();
        self.slots[i] = Slot { key, val, gen: self.gen };
        self.len += 1;
        (val, true)
    }

    /// Set the value for `key`, whether it was there or not.
    pub fn insert(&mut self, key: u64, val: u32) {
        let (i, found) = self.entry(key);
        if !found {
            self.len += 1;
        }
        self.slots[i] = Slot { key, val, gen: self.gen };
    }

    fn grow(&mut self) {
        let gen = self.gen;
        let old = core::mem::take(&mut self.slots);
        let cap = (old.len() * 2).max(16);
        self.slots = vec![Slot::default(); cap];
        self.shift = 64 - cap.trailing_zeros();
        self.gen = 1;
        self.len = 0;
        for s in old {
            if s.gen == gen {
                self.get_or_insert_with(s.key, || s.val);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PtrMap;

    #[test]
    fn insert_get_grow_clear() {
        let mut m = PtrMap::new();
        assert_eq!(m.get(5), None, "empty, unallocated");
        m.clear(0);
        // (Miri interprets every probe: fewer keys there, still six growths)
        let n: u64 = if cfg!(miri) { 200 } else { 1000 };
        for round in 0..3u64 {
            for i in 1..=n {
                let (v, ins) = m.get_or_insert_with(i * 368, || (i + round) as u32);
                assert!(ins);
                assert_eq!(v, (i + round) as u32);
            }
            assert_eq!(m.len(), n as usize);
            for i in 1..=n {
                assert_eq!(m.get(i * 368), Some((i + round) as u32));
                assert_eq!(m.get_or_insert_with(i * 368, || 0), ((i + round) as u32, false));
            }
            assert_eq!(m.get(7), None);
            m.clear(10);
            assert!(m.is_empty());
            assert_eq!(m.get(368), None);
        }
    }

    #[test]
    fn insert_overwrites() {
        let mut m = PtrMap::new();
        for k in 0..100u64 {
            m.insert(k << 16 | 3, k as u32);
        }
        for k in 0..100u64 {
            m.insert(k << 16 | 3, 1000 + k as u32);
        }
        assert_eq!(m.len(), 100);
        assert!((0..100u64).all(|k| m.get(k << 16 | 3) == Some(1000 + k as u32)));
        assert_eq!(m.get(3 << 16 | 2), None);
    }

    #[test]
    fn generation_wraps() {
        let mut m = PtrMap::new();
        m.gen = u32::MAX - 1;
        m.get_or_insert_with(64, || 1);
        m.clear(1);
        m.get_or_insert_with(128, || 2);
        m.clear(1); // wraps: full reset
        assert_eq!(m.get(64), None);
        assert_eq!(m.get(128), None);
        assert_eq!(m.get_or_insert_with(64, || 3), (3, true));
    }
}
