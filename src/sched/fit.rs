//! Each backend's compute buffer ([`BackendRecord`]: its allocator, the
//! retired ones, its statistics), sized by a measure and grown to fit the
//! split about to be allocated.
//!
//! `init_measure` sizes each backend's compute buffer for the measure graph.
//! A later split can need more: a larger graph, nodes that `set_node_backend`
//! or a `supports_op` rejection moved to another backend. ggml-alloc would
//! then stop the process inside `wsp_ggml_tallocr_alloc` ("not enough space
//! in the buffer"). Here every allocation is planned first (galloc.rs), and
//! a compute buffer too small for the plan is replaced by a larger one
//! before anything is placed.
//!
//! The replaced allocator is *retired*, not freed: a caller may still hold it
//! (`sched_get_tallocr`) or have tensors in its buffer, and both stay valid
//! until the next `init_measure`/`reserve` or `sched_free`. Buffers grow by at
//! least half their size, so retired memory stays below twice the current.

use crate::prelude::*;

use super::galloc::{self, Arenas, ComputeBuffers};
use super::ids::{BackendIdx, Slot};
use super::live::Live;
use super::plan::place::ArenaSpec;
use crate::handle::{BackendRef, BufferRef};
use crate::platform::OutOfMemory;
use crate::talloc::Tallocr;

/// What the last compute did on one backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct BackendStats {
    pub n_splits: u32,
    pub n_copies: u32,
    pub bytes_copied: usize,
    /// Summed in nanoseconds (per-split microseconds would truncate).
    pub copy_ns: u64,
    pub compute_ns: u64,
}

/// What the scheduler keeps for one of its backends. Its compute buffer
/// changes only here: a measure sizes it ([`BackendRecord::start_measure`],
/// [`BackendRecord::end_measure`]), a compute grows it
/// ([`BackendRecord::grow`]); `buffer_size` is always what was asked of
/// the backend for the allocator's buffer (0 before the first measure).
pub(super) struct BackendRecord {
    backend: BackendRef<'static>,
    /// Its compute allocator (a measure allocator before the first measure).
    talloc: Tallocr<'static>,
    /// Compute allocators that growth replaced during computes,
    /// alive until the next measure or `sched_free`: the caller may hold
    /// one, or tensors in its buffer.
    retired: Vec<Tallocr<'static>>,
    /// Compute buffer size requested at the last measure/reserve or growth.
    buffer_size: usize,
    /// How far the splits placed since the last measure went into the
    /// compute buffers (ggml-alloc's `max_size` of the original's real
    /// allocator, less what the caller allocated: `Tallocr::max_size`
    /// counts that).
    reached: usize,
    /// What the last compute did on it.
    stats: BackendStats,
}

/// The scheduler's backends in priority order, one record each, with
/// what registration, the probe and the passes read of them, made once
/// (their handles, whether each accepts every op: one per record, in its
/// order), the compute buffers as the placement sees them (described again
/// for every plan in the same memory) and which grew in this placement.
/// Read as a slice of records.
pub(super) struct Backends {
    records: Vec<BackendRecord>,
    refs: Vec<BackendRef<'static>>,
    accepts_all: Vec<bool>,
    specs: Vec<ArenaSpec>,
    grown: Vec<bool>,
}

impl Backends {
    pub(super) fn new(backends: &[BackendRef<'static>]) -> Backends {
        let records: Vec<BackendRecord> = backends.iter().map(|&b| BackendRecord::new(b)).collect();
        Backends {
            refs: backends.to_vec(),
            // (our CPU backend, or one whose `supports_op` slot is NULL, as
            // CUDA's: its `supports_op` is never asked)
            accepts_all: backends.iter().map(|&b| crate::cpu::is_cpu(b) || !b.has_supports_op()).collect(),
            specs: Vec::new(),
            grown: vec![false; backends.len()],
            records,
        }
    }

    /// The backends' handles, in order.
    #[inline]
    pub(super) fn refs(&self) -> &[BackendRef<'static>] {
        &self.refs
    }

    /// Whether each backend accepts every op, in order (known at
    /// `sched_new`).
    pub(super) fn accepts_all(&self) -> &[bool] {
        &self.accepts_all
    }

    pub(super) fn iter_mut(&mut self) -> core::slice::IterMut<'_, BackendRecord> {
        self.records.iter_mut()
    }

    pub(super) fn get_mut(&mut self, b: BackendIdx) -> &mut BackendRecord {
        &mut self.records[b]
    }

    /// The compute buffers as the next plan sees them ([`arenas`]).
    pub(super) fn arenas(&mut self, inputs: impl Iterator<Item = Slot> + Clone, live: &Live) -> Arenas<'_, [BackendRecord]> {
        arenas(&self.records, inputs, live, &mut self.specs)
    }

    /// A placement begins: no buffer grew in it yet.
    pub(super) fn start_placement(&mut self) {
        self.grown.fill(false);
    }

    /// Grow backend `b`'s compute buffer to fit `need` bytes
    /// ([`BackendRecord::grow`]; a buffer this placement grew already is
    /// freed, not retired: nothing was handed out or placed in it).
    pub(super) fn grow(&mut self, b: BackendIdx, need: usize, debug: bool) -> Result<(), OutOfMemory> {
        let grown = self.records[b].grow(need, self.grown[b.get()], debug);
        if grown.is_ok() {
            self.grown[b.get()] = true;
        }
        grown
    }
}

impl core::ops::Deref for Backends {
    type Target = [BackendRecord];
    #[inline]
    fn deref(&self) -> &[BackendRecord] {
        &self.records
    }
}

/// The split does not fit with the user's assignments: a backend could not
/// allocate a larger compute buffer (`Sched::place`).
pub(super) struct NeedsFallback;

/// The compute buffers as an allocation sees them: each allocator's
/// buffer and free blocks (what the caller allocated there stays),
/// borrowed from the records, so that no allocator can be freed meanwhile.
/// Described in `specs`, whose memory is reused from one plan to the next.
/// `inputs`: the slots of the graph's inputs ([`State::inputs`](super::state::State::inputs)).
fn arenas<'p>(
    records: &'p [BackendRecord],
    inputs: impl Iterator<Item = Slot> + Clone,
    live: &Live,
    specs: &'p mut Vec<ArenaSpec>,
) -> Arenas<'p, [BackendRecord]> {
    specs.truncate(records.len());
    specs.resize_with(records.len(), ArenaSpec::default);
    for (spec, talloc) in specs.iter_mut().zip(records.iter().map(|r| &r.talloc)) {
        let (buffer, measure) = (talloc.buffer(), talloc.is_measure());
        galloc::describe(spec, buffer, buffer.alignment().max(1), measure);
        if !talloc.free_blocks(&mut spec.free) {
            // Another ggml-alloc: after what the graph shows is in use.
            let start = occupied_by_inputs(inputs.clone(), live, buffer);
            let end = if measure { start.saturating_add(usize::MAX / 2) } else { buffer.size() };
            spec.free.clear();
            spec.free.push((start, end.saturating_sub(start)));
        }
    }
    Arenas { buffers: records, specs }
}

impl ComputeBuffers for [BackendRecord] {
    #[inline]
    fn buffer(&self, b: usize) -> BufferRef<'_> {
        self[b].talloc.buffer()
    }
}

impl BackendRecord {
    pub(super) fn new(backend: BackendRef<'static>) -> BackendRecord {
        BackendRecord {
            backend,
            talloc: Tallocr::measure(backend),
            retired: Vec::new(),
            buffer_size: 0,
            reached: 0,
            stats: BackendStats::default(),
        }
    }

    #[inline]
    pub(super) fn backend(&self) -> BackendRef<'static> {
        self.backend
    }

    /// Its compute allocator, and through it the compute buffer.
    #[inline]
    pub(super) fn talloc(&self) -> &Tallocr<'static> {
        &self.talloc
    }

    /// What the last compute did on it.
    pub(super) fn stats(&self) -> BackendStats {
        self.stats
    }

    /// The statistics, to count what a compute does.
    #[inline]
    pub(super) fn stats_mut(&mut self) -> &mut BackendStats {
        &mut self.stats
    }

    /// A measure begins: a fresh measure allocator plans into endless
    /// memory; the real allocator, if measured before (`real`), is
    /// returned, kept aside for [`BackendRecord::end_measure`].
    pub(super) fn start_measure(&mut self, real: bool) -> Option<Tallocr<'static>> {
        real.then(|| core::mem::replace(&mut self.talloc, Tallocr::measure(self.backend)))
    }

    /// The measure ends: the split needs `measured` bytes of the compute
    /// buffer. Without a real allocator before (`old`), the buffer is
    /// exactly that large; otherwise as the original, which measured again
    /// with the real allocators: the most the old buffer held since it was
    /// made (the caller's allocations and the splits placed there), and
    /// the graph on top of the inputs the caller allocated in it (`inputs`,
    /// their handles in `live`); never smaller with `grow_only`. The same
    /// size keeps the old buffer. Aborts naming `func` if the backend
    /// cannot allocate it.
    pub(super) fn end_measure(
        &mut self,
        old: Option<Tallocr<'static>>,
        measured: usize,
        inputs: impl Iterator<Item = Slot> + Clone,
        live: &Live,
        grow_only: bool,
        func: &str,
    ) {
        let Some(old) = old else {
            // Exactly the measured size, as the original (programs print
            // it); the first compute checks the fit.
            self.talloc = Tallocr::with_buffer_of(self.backend, measured, func);
            self.buffer_size = measured;
            self.reached = 0;
            return;
        };
        let held = self.retired.iter().map(Tallocr::max_size).fold(old.max_size().max(self.reached), usize::max);
        let mut size = occupied(&old, inputs, live).saturating_add(measured).max(held);
        if grow_only {
            size = size.max(self.buffer_size);
        }
        if size == self.buffer_size {
            self.talloc = old; // the same buffer again (the measure allocator goes)
            return;
        }
        drop(old); // (before the new buffer is allocated)
        self.talloc = Tallocr::with_buffer_of(self.backend, size, func);
        self.buffer_size = size;
        self.reached = 0;
    }

    /// Free the allocators that growth retired (a measure sized the buffer
    /// again: nothing the caller holds is in them any more).
    pub(super) fn forget_retired(&mut self) {
        self.retired.clear();
    }

    /// The split just placed went `max` bytes into the compute buffer: a
    /// measure again sizes by the most.
    pub(super) fn note_reached(&mut self, max: usize) {
        self.reached = self.reached.max(max);
    }

    /// Replace the compute buffer by one that fits `need`, at least half
    /// again as large; Err (the size that failed) if the backend cannot
    /// allocate it. The old
    /// allocator is retired (the caller may hold it, or tensors in it),
    /// unless this compute made it (`made_here`).
    pub(super) fn grow(&mut self, need: usize, made_here: bool, debug: bool) -> Result<(), OutOfMemory> {
        // One alignment unit more than the need: the last free block then
        // never runs out (the plan is checked again all the same).
        let size = need.saturating_add(self.backend.alignment().max(1)).max(self.buffer_size.saturating_add(self.buffer_size / 2));
        if debug {
            crate::platform::errln!(
                "wsp_ggml_backend_sched: compute buffer of '{}' grows from {} to {size} bytes for this split",
                self.backend.name_lossy(),
                self.buffer_size
            );
        }
        // Allocated here, not by ggml-alloc, which would dereference a NULL
        // buffer; the new allocator holds it and frees it after itself.
        let Some(buffer) = self.backend.alloc_owned_buffer(size) else {
            // (taken: the caller stops with it, or recovers)
            return Err(OutOfMemory(crate::platform::pending_out_of_memory().unwrap_or(size)));
        };
        let old = core::mem::replace(&mut self.talloc, Tallocr::owning(buffer));
        if made_here {
            // made by this compute's previous growth, never handed out,
            // nothing placed in it (plans are applied only when they fit)
            drop(old);
        } else {
            self.retired.push(old);
        }
        self.buffer_size = size;
        Ok(())
    }

    /// Every allocator free again, the retired ones too.
    pub(super) fn reset_allocators(&self) {
        self.talloc.reset();
        self.retired.iter().for_each(Tallocr::reset);
    }
}

/// Bytes at the start of `talloc`'s buffer that the caller already holds
/// (inputs allocated through `sched_get_tallocr` since the last reset):
/// the split is placed after them.
fn occupied(talloc: &Tallocr<'static>, inputs: impl Iterator<Item = Slot>, live: &Live) -> usize {
    let buffer = talloc.buffer();
    // Exact: where the allocator's last free block starts, if it reaches
    // the end of the buffer (else all of it is in use).
    let mut blocks = Vec::new();
    if talloc.free_blocks(&mut blocks) {
        return match blocks.last() {
            Some(&(offset, size)) if offset + size == buffer.size() => offset,
            _ => buffer.size(),
        };
    }
    occupied_by_inputs(inputs, live, buffer)
}

/// Where the graph's inputs (`inputs`) in `buffer` end (from its base):
/// what can be seen of the caller's allocations there without reading the
/// allocator.
fn occupied_by_inputs(inputs: impl Iterator<Item = Slot>, live: &Live, buffer: BufferRef) -> usize {
    let base_ptr = buffer.base();
    let base = base_ptr as usize;
    let align = buffer.alignment().max(1);
    // ggml-alloc starts at the first aligned address of the buffer
    let start = (align - base % align) % align;
    // Inputs, not nodes: a node with memory there is left from an earlier
    // compute, in memory the allocator considers free again.
    inputs
        .map(|s| live.get(s))
        .filter(|t| t.buffer() == buffer.as_ptr() && t.view_src().is_none())
        .map(|t| {
            // ggml-alloc pads sizes, not addresses
            let size = buffer.alloc_size(t).div_ceil(align).saturating_mul(align);
            (t.data() as usize).saturating_sub(base).saturating_add(size)
        })
        .fold(start, usize::max)
}
