//! The scheduler's per-tensor table.
//!
//! Every tensor of a graph (leafs, nodes, their sources and view sources,
//! input copies) is registered once, by address, in an open-addressing table
//! (probed linearly from `address % size`, as ggml's own hash set). The slot
//! of a tensor is its id in all the passes and in the allocation
//! (galloc.rs), so per-tensor facts and decisions are plain arrays indexed
//! by slot, with no hashing after registration.

use crate::prelude::*;

use super::ids::Slot;
use super::plan::SlotInfo;
use crate::ggml::{TensorId, TensorRef};

// What registration reads of a tensor, and a reuse (reuse.rs) reads again
// and compares: its view source, its flags ([`flags_of`]) and where its
// memory is (probe.rs, `locate`). The table keeps them in the tensor's
// [`SlotInfo`] (the view source as a slot).

/// The flags of `t` ([`SlotInfo::HAS_DATA`], [`SlotInfo::VIEW_OP`],
/// [`SlotInfo::COMPUTED`]).
#[inline]
pub(super) fn flags_of(t: TensorRef) -> u8 {
    let op = t.op();
    let view = crate::ggml::is_view_op(op);
    let mut f = 0;
    if !t.data().is_null() {
        f |= SlotInfo::HAS_DATA;
    }
    if view {
        f |= SlotInfo::VIEW_OP;
    } else if op != crate::ggml::WSP_GGML_OP_NONE {
        f |= SlotInfo::COMPUTED;
    }
    f
}

/// The table ran out of room for this graph; the caller starts over with a
/// larger one (slots are ids, so the table cannot grow in place).
#[derive(Debug)]
pub(super) struct Full;

/// Why a split starts over with another table.
pub(super) enum Retry {
    /// The table has no room left for this graph.
    Full,
    /// The graph's addresses pile up in this table size (see Table::crowded).
    Crowded,
}

impl From<Full> for Retry {
    fn from(_: Full) -> Self {
        Retry::Full
    }
}

/// The sizing policy of one scheduler's tables, across its splits: how
/// large the next table is. A graph computed again keeps its table: the
/// size is chosen when the split is made.
#[derive(Default)]
pub(super) struct Sizing {
    /// Tensors of the last split besides its leafs and nodes (sources
    /// outside the graph's lists, input copies).
    others: usize,
}

/// One split's attempt at a table size; a failed one is retried larger, or
/// at another size.
pub(super) struct Attempt {
    expected: usize,
    /// A table size to avoid (the graph's addresses were crowded there).
    avoid: usize,
    n: u32,
}

impl Sizing {
    /// The first attempt for a graph of `listed` leafs and nodes: room for
    /// them and as many other tensors as the last split had.
    pub fn first_attempt(&self, listed: usize) -> Attempt {
        Attempt { expected: listed + self.others.max(listed / 32) + 16, avoid: 0, n: 0 }
    }

    /// A split was made in `table` for a graph of `listed` leafs and nodes.
    pub fn split_made(&mut self, table: &Table, listed: usize) {
        self.others = table.len().saturating_sub(listed);
    }
}

impl Attempt {
    /// The attempt failed: more room, or another size.
    pub fn retry(&mut self, why: Retry, table: &Table) {
        match why {
            Retry::Full => self.expected += self.expected / 4,
            Retry::Crowded => self.avoid = table.size(),
        }
        self.n += 1;
    }
}

#[derive(Default)]
pub(super) struct Table {
    /// Tensor identities; `None` marks a free slot.
    keys: Vec<Option<TensorId>>,
    pub info: Vec<SlotInfo>,
    len: usize,
    /// Total distance of the keys from their home slots: every step is one
    /// more probe for each look-up.
    steps: usize,
    /// `address % size` without a division.
    modulo: FastMod,
    /// Most keys before `insert` reports `Full`: three quarters of the
    /// slots (a quarter stays free, so probes stay short and always end).
    limit: usize,
    /// Counts the resets: slots keep their meaning while it stays the same.
    generation: u64,
}

impl Table {
    /// Empty the table for `attempt`.
    pub fn clear_for(&mut self, attempt: &Attempt) {
        self.clear_to(attempt.expected, attempt.avoid);
    }

    /// Room for the table the next split of `attempt` would make, kept
    /// (nothing else changes): a measure sizes it for the computes that
    /// follow, so that the first one allocates nothing either, also when
    /// it retries another size (see [`Table::accept`]). Returns the slots
    /// and the tensors to make room for.
    pub fn reserve_for(&mut self, attempt: &Attempt) -> (usize, usize) {
        let want = (attempt.expected + attempt.expected / 3 + 17).max(attempt.avoid + 1);
        let size = next_prime(want);
        let room = size + size / 4;
        self.keys.reserve_exact(room.saturating_sub(self.keys.len()));
        self.info.reserve_exact(room.saturating_sub(self.info.len()));
        (room, attempt.expected + attempt.expected / 4)
    }

    /// Whether the keys just registered sit well enough in this size: a
    /// crowded table is retried at another size, four times at most.
    pub fn accept(&self, attempt: &Attempt) -> Result<(), Retry> {
        if attempt.n < 4 && self.crowded() {
            return Err(Retry::Crowded);
        }
        Ok(())
    }

    /// Empty the table, with room for `expected` tensors and more than
    /// `size` slots (0, or a size that was crowded).
    fn clear_to(&mut self, expected: usize, size: usize) {
        let want = (expected + expected / 3 + 17).max(size + 1);
        if self.keys.len() < want || self.keys.len() > 2 * want {
            // A prime: tensors of one ggml context lie at a constant stride,
            // which then never maps two of them to the same slot.
            let size = next_prime(want);
            // (in the vectors' memory where it is large enough: a smaller
            // graph after a larger one allocates nothing)
            // A quarter more room than needed: the next graphs' sizes vary
            // a little (their input copies, the tensors outside the lists).
            let room = size + size / 4;
            self.keys.clear();
            self.keys.reserve_exact(room);
            self.keys.resize(size, None);
            self.info.clear();
            self.info.reserve_exact(room);
            self.info.resize(size, SlotInfo::EMPTY);
        } else {
            // Only the slots in use are cleared: a filled table is three
            // quarters full at most, and a fill of both arrays cost more
            // than this walk of the keys (92 Ir per node of a new graph).
            for (key, info) in self.keys.iter_mut().zip(self.info.iter_mut()) {
                if key.is_some() {
                    *key = None;
                    *info = SlotInfo::EMPTY;
                }
            }
        }
        self.len = 0;
        self.steps = 0;
        self.generation += 1;
        self.limit = limit(self.keys.len());
        self.modulo = FastMod::new(self.keys.len() as u64);
    }

    /// Forget everything and give the memory back.
    pub fn release(&mut self) {
        *self = Table { generation: self.generation + 1, ..Table::default() };
    }

    /// The slot of `key` or the free slot where it would go, and how many
    /// slots past its home slot that is.
    #[inline]
    fn probe(&self, key: TensorId) -> (usize, usize) {
        let size = self.keys.len();
        let mut i = self.modulo.rem(key.addr() as u64) as usize;
        let mut steps = 0;
        // Never endless: the table always has free slots (load <= 3/4).
        while self.keys[i].is_some_and(|k| k != key) {
            i += 1;
            steps += 1;
            if i == size {
                i = 0;
            }
        }
        (i, steps)
    }

    /// The slot of `t`, if registered.
    #[inline]
    pub fn find(&self, t: TensorId) -> Option<Slot> {
        if self.keys.is_empty() {
            return None;
        }
        let (i, _) = self.probe(t);
        self.keys[i].is_some().then_some(Slot::at(i))
    }

    /// The slot of `t`, registering it if new (`true`).
    #[inline]
    pub fn insert(&mut self, t: TensorId) -> Result<(Slot, bool), Full> {
        let (i, steps) = self.probe(t);
        if self.keys[i].is_some() {
            return Ok((Slot::at(i), false));
        }
        if self.len >= self.limit {
            return Err(Full);
        }
        self.keys[i] = Some(t);
        self.len += 1;
        self.steps += steps;
        Ok((Slot::at(i), true))
    }

    /// The identity of the tensor in `slot` (`None`: a free slot).
    #[inline(always)]
    pub fn key(&self, slot: Slot) -> Option<TensorId> {
        self.keys[slot]
    }

    /// Whether keys sit far from their home slots (more than one step in
    /// two on average): addresses at a constant stride can pile up for some
    /// table sizes, and another size spreads them.
    pub fn crowded(&self) -> bool {
        self.steps > self.len / 2
    }

    /// Which filling of the table this is: the slots of one generation are
    /// the same tensors (clearing and releasing start a new one).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of slots.
    pub fn size(&self) -> usize {
        self.keys.len()
    }

    /// Number of registered tensors.
    pub fn len(&self) -> usize {
        self.len
    }

    /// All keys (`None`: a free slot): a tensor of the graph split last
    /// (a leaf, node, source or view source) or one of the input copies.
    #[inline]
    pub fn keys(&self) -> &[Option<TensorId>] {
        &self.keys
    }
}

/// `a % d` by multiplication (Lemire, Kaser, Kurz: "Faster remainder by
/// direct computation", 2019): with 128 fraction bits the result is exact
/// for every 64-bit `a` and divisor `d`.
#[derive(Clone, Copy, Default)]
struct FastMod {
    m: u128,
    d: u64,
}

impl FastMod {
    fn new(d: u64) -> Self {
        assert!(d > 1, "divisor of a table size");
        FastMod { m: u128::MAX / u128::from(d) + 1, d }
    }

    #[inline]
    fn rem(self, a: u64) -> u64 {
        let low = self.m.wrapping_mul(u128::from(a));
        // bits 128..192 of low * d
        let d = u128::from(self.d);
        let lo = (low as u64 as u128) * d;
        let hi = (low >> 64) * d;
        ((hi + (lo >> 64)) >> 64) as u64
    }
}

/// Most keys a table of `size` slots takes (three quarters).
fn limit(size: usize) -> usize {
    size / 4 * 3
}

fn next_prime(n: usize) -> usize {
    (n..).find(|&n| is_prime(n)).expect("primes are unbounded")
}

fn is_prime(n: usize) -> bool {
    n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensors(n: usize) -> Vec<crate::ggml::wsp_ggml_tensor> {
        (0..n).map(|_| crate::ggml::zeroed_tensor()).collect()
    }

    #[test]
    fn insert_find_and_full() {
        let mut ts = tensors(200);
        let mut t = Table::default();
        t.clear_to(10, 0);
        let mut slots = Vec::new();
        let mut full_at = None;
        for (k, b) in ts.iter_mut().enumerate() {
            // (a tensor of `ts`, which outlives the table)
            let r = TensorRef::of_test(b).id();
            match t.insert(r) {
                Ok((s, true)) => slots.push(s),
                Ok((_, false)) => panic!("new key reported as present"),
                Err(Full) => {
                    full_at = Some(k);
                    break;
                }
            }
        }
        let n = full_at.expect("a table for 10 fills up before 200");
        assert_eq!(n, t.limit);
        for (k, b) in ts.iter_mut().take(n).enumerate() {
            let r = TensorRef::of_test(b).id();
            assert_eq!(t.find(r), Some(slots[k]));
            assert_eq!(t.insert(r).unwrap(), (slots[k], false));
            assert_eq!(t.key(slots[k]), Some(r));
        }
        assert_eq!(t.find(TensorId::of_ptr(&ts[n]).expect("not NULL")), None);
        assert_eq!(t.keys().iter().filter(|k| k.is_some()).count(), n);
        for &s in &slots {
            t.info[s] = SlotInfo::registered(super::super::ids::Loc::Foreign, SlotInfo::COMPUTED);
        }
        // (the same size again: the slots in use are cleared, not the arrays refilled)
        let size = t.size();
        t.clear_to(10, 0);
        assert_eq!(t.size(), size);
        assert_eq!(t.keys().iter().filter(|k| k.is_some()).count(), 0);
        assert!(t.info.iter().all(|&i| i == SlotInfo::EMPTY), "a free slot has no facts");
    }

    #[test]
    fn fastmod_matches_the_remainder() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let sizes = [2u64, 3, 17, 509, 3911, 31019, 1 << 20, (1 << 31) - 1, u32::MAX as u64 + 15, u64::MAX / 3, u64::MAX];
        for &d in &sizes {
            let f = FastMod::new(d);
            for a in [0, 1, d - 1, d, d.wrapping_add(1), u64::MAX, u64::MAX - 1, 0x7fff_ffff_fff0] {
                assert_eq!(f.rem(a), a % d, "{a} % {d}");
            }
            // (Miri interprets every step: fewer there, same coverage of the sizes)
            for _ in 0..if cfg!(miri) { 300 } else { 20_000 } {
                let a = next();
                assert_eq!(f.rem(a), a % d, "{a} % {d}");
                let p = a & 0x0000_7fff_ffff_fff0; // addresses
                assert_eq!(f.rem(p), p % d, "{p} % {d}");
            }
        }
    }

    #[test]
    fn crowding_is_measured() {
        // never dereferenced: the table only hashes and compares addresses
        let fake = TensorId::at_addr;
        let mut t = Table::default();
        t.clear_to(100, 0);
        let size = t.keys().len();
        for k in 1..=50 {
            t.insert(fake(k * 16)).unwrap(); // distinct home slots
        }
        assert!(!t.crowded());
        t.clear_to(100, 0);
        for k in 1..=50 {
            t.insert(fake(k * size)).unwrap(); // one home slot for all
        }
        assert!(t.crowded());
        t.clear_to(100, size);
        assert!(t.keys().len() > size, "another size when asked");
    }

    #[test]
    fn primes() {
        let p: Vec<usize> = (0..30).filter(|&n| is_prime(n)).collect();
        assert_eq!(p, [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]);
    }
}
