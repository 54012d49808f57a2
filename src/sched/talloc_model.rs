//! A model of ggml-alloc's tensor allocator (`ggml_tallocr`): its list of
//! free blocks, best fit, and merging on free, as in ggml-alloc.c of
//! whisper.cpp 1.5 (whisper.rn 0.4.0-rc.4).
//!
//! The fit check (fit.rs) measures a split over stand-in buffers without an
//! end. The real buffer has one, and ggml-alloc's choices over it are the
//! same only while its last free block does not run out; a buffer exactly as
//! large as the measure can then fail where the measure did not. The
//! allocations and frees recorded during the measure are replayed here
//! against the real size, to know without running ggml-alloc (which would
//! stop the process) whether the real allocation fits.

/// `MAX_FREE_BLOCKS` of ggml-alloc.c.
const MAX_FREE_BLOCKS: usize = 256;

/// One allocator call seen during a measure: `tensor` identifies the
/// tensor (its address), `offset` is where the measure placed it (for a
/// free of a tensor allocated before the measure, also where it is in the
/// real buffer), `size` the aligned size ggml-alloc used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Alloc { tensor: usize, size: usize },
    Free { tensor: usize, offset: usize, size: usize },
}

#[derive(Clone, Copy, Debug)]
struct Block {
    addr: usize,
    size: usize,
}

/// The free blocks of an allocator over `[start, end)` (offsets from the
/// buffer's base), sorted by address.
pub(super) struct Model {
    blocks: Vec<Block>,
}

impl Model {
    /// A reset allocator: one block from the first aligned offset to the end.
    pub fn new(start: usize, end: usize) -> Model {
        Model { blocks: vec![Block { addr: start, size: end.saturating_sub(start) }] }
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

/// Whether the calls recorded during a measure succeed in a real buffer
/// whose allocator starts at `start` and ends at `end`. Tensors allocated
/// during the replay are freed where the replay put them.
pub(super) fn replay_fits(ops: &[Op], start: usize, end: usize) -> bool {
    let mut model = Model::new(start, end);
    let mut placed: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for &op in ops {
        match op {
            Op::Alloc { tensor, size } => match model.alloc(size) {
                Some(addr) => {
                    placed.insert(tensor, addr);
                }
                None => return false,
            },
            Op::Free { tensor, offset, size } => {
                let ptr = placed.get(&tensor).copied().unwrap_or(offset);
                if model.free(ptr, size).is_none() {
                    return false;
                }
            }
        }
    }
    true
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

    #[test]
    fn an_exact_size_buffer_can_fail_where_an_endless_one_does_not() {
        // Fill the buffer exactly, free the first tensor: the hole becomes the
        // last block, the only last resort. Over an endless buffer the tail
        // stays last and the same sequence succeeds.
        let ops = [
            Op::Alloc { tensor: 1, size: 64 },
            Op::Alloc { tensor: 2, size: 64 },
            Op::Free { tensor: 1, offset: 0, size: 64 },
            Op::Alloc { tensor: 3, size: 32 },
            Op::Alloc { tensor: 4, size: 64 },
        ];
        assert!(replay_fits(&ops, 0, 1 << 20));
        assert!(!replay_fits(&ops, 0, 128));
        assert!(!replay_fits(&ops, 0, 160));
        assert!(replay_fits(&ops, 0, 192));
    }

    #[test]
    fn a_full_allocator_fits_nothing_more() {
        let mut m = Model::new(16, 16);
        assert_eq!(m.alloc(1), None);
        assert!(replay_fits(&[], 16, 16));
    }
}
