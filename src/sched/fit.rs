//! Compute buffers that always fit the split about to be allocated.
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
use super::live::Live;
use super::plan::place::ArenaSpec;
use super::state::{BackendRecord, State};
use crate::handle::BufferRef;
use crate::platform::OutOfMemory;
use crate::talloc::Tallocr;

/// The split does not fit with the user's assignments: a backend could not
/// allocate a larger compute buffer (`Sched::place`).
pub(super) struct NeedsFallback;

/// The compute buffers as an allocation sees them: each allocator's
/// buffer and free blocks (what the caller allocated there stays),
/// borrowed from the records, so that no allocator can be freed meanwhile.
/// Described in `specs`, whose memory is reused from one plan to the next.
pub(super) fn arenas<'p>(
    records: &'p [BackendRecord],
    st: &State,
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
            let start = occupied_by_inputs(st, live, buffer);
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

/// Bytes at the start of `talloc`'s buffer that the caller already holds
/// (inputs allocated through `sched_get_tallocr` since the last reset):
/// the split is placed after them.
pub(super) fn occupied(talloc: &Tallocr<'static>, st: &State, live: &Live) -> usize {
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
    occupied_by_inputs(st, live, buffer)
}

impl BackendRecord {
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

/// Where the graph's inputs in `buffer` end (from its base): what can be
/// seen of the caller's allocations there without reading the allocator.
fn occupied_by_inputs(st: &State, live: &Live, buffer: BufferRef) -> usize {
    let base_ptr = buffer.base();
    let base = base_ptr as usize;
    let align = buffer.alignment().max(1);
    // ggml-alloc starts at the first aligned address of the buffer
    let start = (align - base % align) % align;
    // Inputs, not nodes: a node with memory there is left from an earlier
    // compute, in memory the allocator considers free again.
    let inputs = st.graph.leafs.iter().map(|l| l.0).chain(st.reuse.unlisted.iter().copied());
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
