//! ggml-alloc's tensor allocator (`ggml_tallocr`) as the placement (place.rs)
//! plans with it: a list of free blocks sorted by address, best fit among all but the
//! last block, the last block as the last resort, merging on free; as in
//! ggml-alloc.c of whisper.cpp 1.5 (whisper.rn 0.4.0-rc.4). Offsets are from
//! the buffer's base. Where ggml-alloc would stop the process ("not enough
//! space", "out of free blocks") the model says None.

use crate::prelude::*;

/// `MAX_FREE_BLOCKS` of ggml-alloc.c (galloc.rs checks it against the one
/// sys checks with the C compiler).
pub(in crate::sched) const MAX_FREE_BLOCKS: usize = 256;

#[derive(Clone, Copy, Debug)]
struct Block {
    addr: usize,
    size: usize,
}

/// The free blocks of an allocator over `[start, end)` (offsets from the
/// buffer's base), sorted by address.
#[derive(Default)]
pub(in crate::sched) struct Model {
    blocks: Vec<Block>,
}

impl Model {
    /// A reset allocator: one block from the first aligned offset to the end.
    #[cfg(test)]
    pub fn new(start: usize, end: usize) -> Model {
        Model { blocks: vec![Block { addr: start, size: end.saturating_sub(start) }] }
    }

    /// An allocator with these free blocks (offset, size), sorted by offset.
    #[cfg(test)]
    pub fn from_blocks(blocks: &[(usize, usize)]) -> Model {
        let mut m = Model { blocks: Vec::new() };
        m.clear_to(blocks);
        m
    }

    /// The allocator again, with these free blocks (offset, size), sorted
    /// by offset. Its vector is kept: it holds what ggml-alloc can hold
    /// (one block more than its limit while a free merges), so a model
    /// cleared for each plan allocates only the first time.
    pub fn clear_to(&mut self, blocks: &[(usize, usize)]) {
        self.blocks.clear();
        self.blocks.reserve(blocks.len().max(MAX_FREE_BLOCKS + 1));
        self.blocks.extend(blocks.iter().map(|&(addr, size)| Block { addr, size }));
    }

    /// The same allocator without an end, in a buffer of `size` bytes: its
    /// last free block reaches as far as needed (to learn how much a split
    /// needs).
    pub fn endless(&mut self, size: usize) {
        const HUGE: usize = usize::MAX / 4;
        match self.blocks.last_mut() {
            Some(last) if last.addr + last.size >= size => last.size = HUGE,
            _ => self.blocks.push(Block { addr: size, size: HUGE }),
        }
    }

    /// `ggml_tallocr_alloc`: the best fitting block besides the last, else
    /// the last; None where ggml-alloc stops ("not enough space").
    pub fn alloc(&mut self, size: usize) -> Option<usize> {
        let n = self.blocks.len();
        let mut best: Option<usize> = None;
        let mut best_size = usize::MAX;
        for (i, b) in self.blocks.iter().enumerate().take(n.saturating_sub(1)) {
            if b.size >= size && b.size <= best_size {
                best = Some(i);
                best_size = b.size;
            }
        }
        // (with no block at all ggml-alloc reads before its array: no fit)
        let i = best.or_else(|| n.checked_sub(1).filter(|&last| self.blocks[last].size >= size))?;
        let b = &mut self.blocks[i];
        let addr = b.addr;
        b.addr += size;
        b.size -= size;
        if b.size == 0 {
            self.blocks.remove(i);
        }
        Some(addr)
    }

    /// `ggml_tallocr_free_tensor` of a tensor of the allocator's buffer:
    /// merge with a neighbouring block, else insert; None where ggml-alloc
    /// stops ("out of free blocks").
    pub fn free(&mut self, ptr: usize, size: usize) -> Option<()> {
        let n = self.blocks.len();
        for i in 0..n {
            let b = self.blocks[i];
            if b.addr.wrapping_add(b.size) == ptr {
                self.blocks[i].size += size;
                if i + 1 < n && self.blocks[i].addr.wrapping_add(self.blocks[i].size) == self.blocks[i + 1].addr {
                    self.blocks[i].size += self.blocks[i + 1].size;
                    self.blocks.remove(i + 1);
                }
                return Some(());
            }
            if ptr.wrapping_add(size) == b.addr {
                self.blocks[i].addr = ptr;
                self.blocks[i].size += size;
                if i > 0 && self.blocks[i - 1].addr.wrapping_add(self.blocks[i - 1].size) == ptr {
                    self.blocks[i - 1].size += self.blocks[i].size;
                    self.blocks.remove(i);
                }
                return Some(());
            }
        }
        if n >= MAX_FREE_BLOCKS {
            return None;
        }
        let at = self.blocks.iter().position(|b| b.addr >= ptr).unwrap_or(n);
        self.blocks.insert(at, Block { addr: ptr, size });
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_skips_the_last_block_until_nothing_else_fits() {
        let mut m = Model::new(0, 1000);
        let a = m.alloc(100).unwrap();
        let b = m.alloc(50).unwrap();
        let c = m.alloc(100).unwrap();
        assert_eq!((a, b, c), (0, 100, 150));
        m.free(a, 100).unwrap(); // hole [0, 100)
                                 // fits the hole: taken from it, not from the tail
        assert_eq!(m.alloc(60), Some(0));
        // does not fit the remaining hole [60, 100): the tail
        assert_eq!(m.alloc(80), Some(250));
    }

    #[test]
    fn frees_merge_with_both_neighbours() {
        let mut m = Model::new(0, 300);
        let a = m.alloc(100).unwrap();
        let b = m.alloc(100).unwrap();
        let c = m.alloc(100).unwrap();
        assert!(m.blocks.is_empty(), "the exhausted last block is removed");
        m.free(a, 100).unwrap();
        m.free(c, 100).unwrap();
        assert_eq!(m.blocks.len(), 2);
        m.free(b, 100).unwrap();
        assert_eq!(m.blocks.len(), 1);
        assert_eq!((m.blocks[0].addr, m.blocks[0].size), (0, 300));
    }

    /// Fill the buffer exactly, free the first tensor: the hole becomes the
    /// last block, the only last resort. With a larger end the tail stays
    /// last and the same sequence succeeds.
    fn exact_fit_sequence(end: usize) -> Option<()> {
        let mut m = Model::new(0, end);
        let a = m.alloc(64)?;
        m.alloc(64)?;
        m.free(a, 64)?;
        m.alloc(32)?;
        m.alloc(64)?;
        Some(())
    }

    #[test]
    fn an_exact_size_buffer_can_fail_where_a_larger_one_does_not() {
        assert!(exact_fit_sequence(1 << 20).is_some());
        assert!(exact_fit_sequence(128).is_none());
        assert!(exact_fit_sequence(160).is_none());
        assert!(exact_fit_sequence(192).is_some());
    }

    #[test]
    fn a_full_allocator_fits_nothing_more() {
        let mut m = Model::new(16, 16);
        assert_eq!(m.alloc(1), None);
        assert_eq!(Model::from_blocks(&[]).alloc(1), None);
    }
}
