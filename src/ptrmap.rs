//! A small open-addressing map from tensor address to a dense index.
//!
//! The scheduler looks every tensor up several times per compute; this map
//! is sized to the graph, cleared in O(capacity), and never shrinks, so a
//! scheduler reused for many computes allocates nothing in steady state.

pub struct PtrMap {
    keys: Vec<usize>,
    vals: Vec<u32>,
    len: usize,
    shift: u32,
}

impl Default for PtrMap {
    fn default() -> Self {
        Self::new()
    }
}

impl PtrMap {
    pub fn new() -> Self {
        PtrMap { keys: vec![0; 16], vals: vec![0; 16], len: 0, shift: 64 - 4 }
    }

    #[inline]
    fn slot(&self, key: usize) -> usize {
        // Fibonacci hashing on the address (tensors are at least 8-aligned).
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Empty the map, making room for `expected` keys without rehashing.
    pub fn clear(&mut self, expected: usize) {
        let want = (expected * 2).next_power_of_two().max(16);
        if want > self.keys.len() {
            self.keys = vec![0; want];
            self.vals = vec![0; want];
            self.shift = 64 - want.trailing_zeros();
        } else {
            self.keys.fill(0);
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
    pub fn get(&self, key: usize) -> Option<u32> {
        debug_assert!(key != 0);
        let mask = self.keys.len() - 1;
        let mut i = self.slot(key);
        loop {
            match self.keys[i] {
                0 => return None,
                k if k == key => return Some(self.vals[i]),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The value for `key`, inserting `make()` if absent. Returns (value, inserted).
    #[inline]
    pub fn get_or_insert_with(&mut self, key: usize, make: impl FnOnce() -> u32) -> (u32, bool) {
        debug_assert!(key != 0);
        if (self.len + 1) * 2 > self.keys.len() {
            self.grow();
        }
        let mask = self.keys.len() - 1;
        let mut i = self.slot(key);
        loop {
            match self.keys[i] {
                0 => {
                    let v = make();
                    self.keys[i] = key;
                    self.vals[i] = v;
                    self.len += 1;
                    return (v, true);
                }
                k if k == key => return (self.vals[i], false),
                _ => i = (i + 1) & mask,
            }
        }
    }

    fn grow(&mut self) {
        let old_keys = std::mem::take(&mut self.keys);
        let old_vals = std::mem::take(&mut self.vals);
        let cap = old_keys.len() * 2;
        self.keys = vec![0; cap];
        self.vals = vec![0; cap];
        self.shift = 64 - cap.trailing_zeros();
        self.len = 0;
        for (k, v) in old_keys.into_iter().zip(old_vals) {
            if k != 0 {
                self.get_or_insert_with(k, || v);
            }
        }
    }

    /// Bytes held by the table.
    pub fn heap_bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<usize>() + self.vals.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::PtrMap;

    #[test]
    fn insert_get_grow_clear() {
        let mut m = PtrMap::new();
        for i in 1..=1000usize {
            let (v, ins) = m.get_or_insert_with(i * 368, || i as u32);
            assert!(ins);
            assert_eq!(v, i as u32);
        }
        assert_eq!(m.len(), 1000);
        for i in 1..=1000usize {
            assert_eq!(m.get(i * 368), Some(i as u32));
            assert_eq!(m.get_or_insert_with(i * 368, || 0), (i as u32, false));
        }
        assert_eq!(m.get(7), None);
        m.clear(10);
        assert!(m.is_empty());
        assert_eq!(m.get(368), None);
    }
}
