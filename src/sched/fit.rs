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

use super::galloc::{Arena, TooSmall};
use super::state::{PerBackend, Sched, State};
use super::tallocr;
use crate::fatal::fatal;
use crate::ggml::{self, wsp_ggml_tallocr_t};
use crate::handle::{BufferRef, OwnedBuffer};

/// The split does not fit with the user's assignments: a backend could not
/// allocate a larger compute buffer ([`Sched::allocate`]).
pub(super) struct NeedsFallback;

impl Sched {
    /// The compute buffers as an allocation sees them: each allocator's
    /// buffer and free blocks (what the caller allocated there stays),
    /// borrowed from `per`, so that no allocator can be freed meanwhile.
    fn arenas<'p>(per: &'p [PerBackend], st: &State) -> Vec<Arena<'p>> {
        per.iter().map(|p| Self::arena(p, st)).collect()
    }

    fn arena<'p>(p: &'p PerBackend, st: &State) -> Arena<'p> {
        let talloc = p.talloc;
        // SAFETY: our live allocator.
        let (buffer, measure) = unsafe { (ggml::wsp_ggml_tallocr_get_buffer(talloc), ggml::wsp_ggml_tallocr_is_measure(talloc)) };
        // SAFETY: the buffer of our live allocator: live as long as it is,
        // which is as long as `p` is borrowed (only `&mut` frees it).
        let buffer = unsafe { BufferRef::new(buffer) }.expect("an allocator has a buffer");
        let base_ptr = buffer.base();
        let base = base_ptr as usize;
        let align = buffer.alignment().max(1);
        // SAFETY: our live allocator, not written during the read.
        let free = unsafe { tallocr::tallocr_free_blocks(talloc) }.unwrap_or_else(|| {
            // Another ggml-alloc: after what the graph shows is in use.
            let start = occupied_by_inputs(st, buffer);
            let end = if measure { start.saturating_add(usize::MAX / 2) } else { buffer.size() };
            vec![(start, end.saturating_sub(start))]
        });
        Arena { buffer, base, base_ptr, align, measure, free }
    }

    /// Plan the split's allocation and apply it; `reused`: the split is the
    /// last compute's, whose placement is applied again if it still holds
    /// (galloc.rs, `Galloc::still_holds`). A buffer too small for the
    /// plan grows first; where a backend cannot allocate a larger buffer,
    /// the split does not fit with `set_node_backend`'s assignments
    /// (`Err(NeedsFallback)`: the driver drops them and splits again, which
    /// is what the original computes); without assignments to drop, it
    /// stops with a message.
    pub(super) fn allocate(&mut self, reused: bool, func: &str) -> Result<(), NeedsFallback> {
        if reused {
            let arenas = Self::arenas(&self.per, &self.st);
            if self.galloc.still_holds(&self.st.table, &arenas) {
                self.galloc.apply(&self.st.table, &arenas);
                return Ok(());
            }
        }
        let mut grown = vec![false; self.per.len()];
        // A grown buffer starts empty (the caller's inputs stay in the old
        // one) and has room for the whole need, so each backend grows at
        // most once.
        for _ in 0..self.per.len() + 2 {
            let arenas = Self::arenas(&self.per, &self.st);
            let Err(TooSmall(b)) = self.galloc.plan(&self.st.table, &self.st.order, &arenas, true, reused, func) else {
                self.galloc.apply(&self.st.table, &arenas);
                self.galloc.release();
                return Ok(());
            };
            let b = b.get();
            let endless = self.galloc.plan(&self.st.table, &self.st.order, &arenas, false, false, func);
            assert!(endless.is_ok(), "an endless buffer fits any split");
            let need = self.galloc.max[b];
            let have = arenas[b].buffer.size();
            drop(arenas);
            if self.debug {
                crate::platform::errln!(
                    "wsp_ggml_backend_sched: the split needs {need} bytes of the compute buffer of '{}' ({} bytes)",
                    self.backends[b].name_lossy(),
                    have
                );
            }
            if self.grow(b, need, grown[b]) {
                grown[b] = true;
            } else if !self.user.is_empty() {
                if self.debug {
                    crate::platform::errln!(
                        "wsp_ggml_backend_sched: '{}' cannot allocate a larger compute buffer: set_node_backend is not applied in this compute",
                        self.backends[b].name_lossy()
                    );
                }
                return Err(NeedsFallback);
            } else {
                fatal(
                    func,
                    &format!(
                        "this graph needs a compute buffer of {need} bytes on backend '{}' (it has {}), and the backend could not allocate one",
                        self.backends[b].name_lossy(),
                        have
                    ),
                );
            }
        }
        unreachable!("the compute buffers fit the split once each has grown");
    }

    /// The measure of the split just made: how far into each measure
    /// allocator's buffer it goes (as `wsp_ggml_tallocr_max_size` would say
    /// after ggml-alloc allocated it). Nothing is placed.
    pub(super) fn measure_split(&mut self, func: &str) -> Vec<usize> {
        let arenas = Self::arenas(&self.per, &self.st);
        if self.galloc.plan(&self.st.table, &self.st.order, &arenas, false, false, func).is_err() {
            unreachable!("an endless buffer fits any split");
        }
        self.galloc.release();
        // SAFETY: our live allocators.
        self.per.iter().zip(&self.galloc.max).map(|(p, &m)| m.max(unsafe { ggml::wsp_ggml_tallocr_max_size(p.talloc) })).collect()
    }

    /// Replace compute buffer `i` by one that fits `need`, at least half
    /// again as large; false if the backend cannot allocate it. The old
    /// allocator is retired (the caller may hold it, or tensors in it),
    /// unless this compute made it (`made_here`).
    fn grow(&mut self, i: usize, need: usize, made_here: bool) -> bool {
        // One alignment unit more than the need: the last free block then
        // never runs out (the plan is checked again all the same).
        let size = need
            .saturating_add(self.backends[i].alignment().max(1))
            .max(self.per[i].buffer_size.saturating_add(self.per[i].buffer_size / 2));
        if self.debug {
            crate::platform::errln!(
                "wsp_ggml_backend_sched: compute buffer of '{}' grows from {} to {size} bytes for this split",
                self.backends[i].name_lossy(),
                self.per[i].buffer_size
            );
        }
        // Allocated here, not by ggml-alloc, which would dereference a NULL
        // buffer; so the allocator does not own it (see free_talloc).
        let buffer = self.backends[i].alloc_buffer(size);
        // SAFETY: NULL or a buffer the backend just made for us, ours alone
        // (grown_buffers), freed only after its allocator (free_talloc).
        let Some(buffer) = (unsafe { OwnedBuffer::from_raw(buffer) }) else {
            return false;
        };
        // SAFETY: a live buffer of ours, freed after its allocator.
        let new = unsafe { ggml::wsp_ggml_tallocr_new_from_buffer(buffer.as_ptr()) };
        self.grown_buffers.push(buffer);
        let old = core::mem::replace(&mut self.per[i].talloc, new);
        if made_here {
            // made by this compute's previous growth, never handed out,
            // nothing placed in it (plans are applied only when they fit)
            // SAFETY: our live allocator, just replaced, so not used again.
            unsafe { self.free_talloc(old) };
        } else {
            self.retired.push(old);
        }
        self.per[i].buffer_size = size;
        true
    }

    /// Free one of our allocators, and its buffer if growth allocated it.
    ///
    /// # Safety
    /// `t` is a live allocator this scheduler made, not freed elsewhere and
    /// not used again (nor is any tensor placed in its buffer).
    pub(super) unsafe fn free_talloc(&mut self, t: wsp_ggml_tallocr_t) {
        // SAFETY: our live allocator (the caller's contract).
        let buffer = unsafe { ggml::wsp_ggml_tallocr_get_buffer(t) };
        // SAFETY: as above; freed once, here.
        unsafe { ggml::wsp_ggml_tallocr_free(t) };
        if let Some(k) = self.grown_buffers.iter().position(|b| b.as_ptr() == buffer) {
            // a buffer growth allocated for `t` alone; its allocator is gone
            self.grown_buffers.swap_remove(k).free();
        }
    }

    /// Bytes at the start of backend `i`'s compute buffer that the caller
    /// already holds (inputs allocated through `sched_get_tallocr` since the
    /// last reset): the split is placed after them.
    pub(super) fn occupied(&self, i: usize) -> usize {
        let talloc = self.per[i].talloc;
        // SAFETY: our live allocator.
        let buffer = unsafe { ggml::wsp_ggml_tallocr_get_buffer(talloc) };
        // SAFETY: NULL or the buffer of our live allocator: live as long as it is.
        let Some(buffer) = (unsafe { BufferRef::new(buffer) }) else {
            return 0;
        };
        // Exact: where the allocator's last free block starts, if it
        // reaches the end of the buffer (else all of it is in use).
        // SAFETY: our live allocator, not written during the read.
        if let Some(blocks) = unsafe { tallocr::tallocr_free_blocks(talloc) } {
            return match blocks.last() {
                Some(&(offset, size)) if offset + size == buffer.size() => offset,
                _ => buffer.size(),
            };
        }
        occupied_by_inputs(&self.st, buffer)
    }

    /// Free the allocators that growth replaced.
    pub(super) fn free_retired(&mut self) {
        for t in core::mem::take(&mut self.retired) {
            // SAFETY: a live allocator of ours that growth replaced, taken
            // out of `retired`, so freed once.
            unsafe { self.free_talloc(t) };
        }
    }
}

/// Where the graph's inputs in `buffer` end (from its base): what can be
/// seen of the caller's allocations there without reading the allocator.
fn occupied_by_inputs(st: &State, buffer: BufferRef) -> usize {
    let base_ptr = buffer.base();
    let base = base_ptr as usize;
    let align = buffer.alignment().max(1);
    // ggml-alloc starts at the first aligned address of the buffer
    let start = (align - base % align) % align;
    // Inputs, not nodes: a node with memory there is left from an earlier
    // compute, in memory the allocator considers free again.
    let inputs = st.graph.leafs.iter().map(|l| l.0).chain(st.reuse.unlisted.iter().copied());
    inputs
        .map(|s| st.table.tensor(s))
        .filter(|t| t.buffer() == buffer.as_ptr() && t.view_src().is_none())
        .map(|t| {
            // ggml-alloc pads sizes, not addresses
            let size = buffer.alloc_size(t).div_ceil(align).saturating_mul(align);
            (t.data() as usize).saturating_sub(base).saturating_add(size)
        })
        .fold(start, usize::max)
}
