//! The placement's side in C (the plan itself is sealed in plan/place.rs):
//! what it loads of every tensor before planning, the probe that answers
//! and logs its questions, applying a plan to the tensors, and keeping a
//! plan to apply again.
//!
//! Two things ggml-alloc cannot do:
//! - **plan, then apply.** The plan touches no tensor: it works on what was
//!   loaded and records the steps. A plan that does not fit a compute buffer
//!   is never applied (the scheduler grows the buffer and plans again),
//!   where ggml-alloc stopped the process half-way through.
//!   [`Galloc::apply`] then sets the tensors' fields and calls the buffers'
//!   `init_tensor`/`free_tensor` in the order ggml-alloc calls them. A
//!   measure is a plan alone.
//! - **apply again.** A plan is kept while everything it read is as it was:
//!   what it loaded and asked is the placement's chapter of the one log
//!   (record.rs), asked again by [`Galloc::still_holds`] and decided there.
//!
//! Where ggml-alloc would dereference NULL or assert (a tensor to allocate
//! with no backend, a view of memory that does not exist) the compute stops
//! with a message naming the tensor.

use crate::prelude::*;

use crate::ptrmap::PtrMap;

use super::ids::{BackendIdx, Slot, SlotId};
use super::live::Live;
use super::plan::place::{ArenaSpec, Loaded, Order, PlaceProbe, PlaceQuestions, Placement, Step, Unplaced};
use super::plan::Refusal;
use super::record::{PlaceNow, Record, TensorNow};
use super::table::Table;
use crate::fatal::fatal;
use crate::ggml::{TensorId, TensorRef};
use crate::handle::{BufferRef, Placer};

// The planner's copy of ggml-alloc's limit is the one sys checks with C.
const _: () = assert!(super::plan::talloc_model::MAX_FREE_BLOCKS == crate::ggml::TALLOCR_MAX_FREE_BLOCKS);

/// Where the compute buffers of a placement come from (the scheduler's
/// backend records, fit.rs), by backend index.
pub(super) trait ComputeBuffers {
    fn buffer(&self, b: usize) -> BufferRef<'_>;
}

impl ComputeBuffers for [BufferRef<'_>] {
    #[inline]
    fn buffer(&self, b: usize) -> BufferRef<'_> {
        self[b]
    }
}

/// The compute buffers as one placement sees them: borrowed (none can be
/// freed meanwhile), and as plain data for the planner (`specs`, one per
/// buffer, kept by the scheduler from one compute to the next so that
/// nothing is allocated).
pub(super) struct Arenas<'a, B: ComputeBuffers + ?Sized> {
    pub buffers: &'a B,
    pub specs: &'a [ArenaSpec],
}

impl<B: ComputeBuffers + ?Sized> Clone for Arenas<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: ComputeBuffers + ?Sized> Copy for Arenas<'_, B> {}

impl<'a, B: ComputeBuffers + ?Sized> Arenas<'a, B> {
    /// Backend `b`'s compute buffer.
    #[inline(always)]
    pub fn buffer(&self, b: usize) -> BufferRef<'a> {
        self.buffers.buffer(b)
    }
}

/// Set `spec` to describe `buffer` with its allocator's alignment (its free
/// blocks, `spec.free`, are the caller's to fill).
pub(super) fn describe(spec: &mut ArenaSpec, buffer: BufferRef, align: usize, measure: bool) {
    spec.buffer = buffer.as_ptr() as usize;
    spec.size = buffer.size();
    spec.base = buffer.base() as usize;
    spec.align = align;
    spec.measure = measure;
}

/// How far the compute buffers reach for a plan.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Ends {
    /// Their real ends; `keep`: the plan may be kept, to apply again.
    Real { keep: bool },
    /// Endless: to learn how much a split needs (nothing is kept).
    Endless,
}

/// A plan that does not fit: the backend whose buffer is too small.
pub(super) struct TooSmall(pub BackendIdx);

/// The allocation's working state, kept between computes for its memory.
#[derive(Default)]
pub(super) struct Galloc {
    /// The plan, and what it was loaded with: per tensor id, a table
    /// slot or an extra tensor past the table.
    placement: Placement,
    /// The extra tensors' ids (from the table's size on, their handles in
    /// the call's `Live` past the table's slots), by address: view sources
    /// the table does not hold (none, unless a tensor changed since the
    /// table was made).
    extra: PtrMap,
}

impl Galloc {
    /// An allocation that computes the ops of `in_place` in place
    /// (`ggml::in_place_ops`).
    pub fn new(in_place: u128) -> Galloc {
        Galloc { placement: Placement::new(in_place), ..Galloc::default() }
    }

    /// How far into each buffer the last plan went (ggml-alloc's `max_size`).
    pub fn max(&self) -> &[usize] {
        &self.placement.max
    }

    /// Plan the allocation of `order` in `arenas`, to their real ends or
    /// endless (`ends`), each tensor with the backend the passes gave it, an
    /// input copy with its copy's (`copies`: slot and backend); a plan to their real ends may be kept: what it asks
    /// is then logged in `log`'s placement chapter, so that it can be
    /// applied again while that holds (a split computed again and again). Err: the first backend whose
    /// buffer is too small (the plan stops there). Aborts naming `func`
    /// where ggml-alloc would crash.
    #[allow(clippy::too_many_arguments)]
    pub fn plan<'c, B: ComputeBuffers + ?Sized>(
        &mut self,
        table: &Table,
        live: &mut Live<'c>,
        order: &Order,
        arenas: &Arenas<B>,
        ends: Ends,
        copies: impl Iterator<Item = (Slot, BackendIdx)>,
        log: &mut Record,
        func: &str,
    ) -> Result<(), TooSmall> {
        let (bounded, keep) = match ends {
            Ends::Real { keep } => (true, keep),
            Ends::Endless => (false, false),
        };
        log.clear_placement();
        self.load(table, live, copies);
        // (what it loaded, logged before the plan changes it)
        let keep = keep && bounded && live.len() == table.size() && {
            let (tensors, buffers) = self.loaded(table);
            log.place_loaded(tensors, buffers)
        };
        let mut probe = CPlaceProbe { table, live, buffers: arenas.buffers, log: keep.then_some(&mut *log), asked: [0; 3] };
        let planned = self.placement.plan(order, arenas.specs, bounded, &mut probe);
        let asked = probe.asked;
        let clean = match planned {
            Ok(clean) => clean,
            Err(Unplaced::TooSmall(b)) => return Err(TooSmall(b)),
            Err(Unplaced::Refused) => {
                let why = self.placement.refusal.take().map_or_else(|| "refused".into(), |Refusal(why)| why);
                fatal(func, &why)
            }
        };
        if keep && clean {
            log.place_done(arenas.specs, Some(table.generation()));
        } else {
            log.clear_placement();
            // Room for keeping such a plan later (the same split computed
            // again): the vectors it fills then are already this large, so
            // a compute of a graph no larger allocates nothing.
            log.reserve_placement(asked, table.len());
            log.place_done(arenas.specs, None);
        }
        Ok(())
    }

    /// What the plan about to be made loaded of every tensor of the table,
    /// in the table's order: (data, buffer number, view source, op), and
    /// each buffer number's address.
    fn loaded<'a>(&'a self, table: &Table) -> (impl ExactSizeIterator<Item = (usize, u32, Option<SlotId>, u8)> + Clone + 'a, &'a [usize]) {
        // (every slot of the table holds a tensor: its first ids)
        (self.placement.loaded(table.len()).map(|(d, b, v, op)| (d, b, v.map(SlotId::from), op)), self.placement.buffer_addrs())
    }

    /// Whether the last plan, made for the same split in the same table,
    /// holds again for `arenas`: `log`'s placement chapter decides
    /// ([`Record::placement_holds`]), given the tensors as they are now and
    /// C's answers now. Then [`Galloc::apply`] places the split as a new
    /// plan would (the plan is a function of exactly what the chapter holds).
    pub fn still_holds<B: ComputeBuffers + ?Sized>(&self, table: &Table, live: &Live, arenas: &Arenas<B>, log: &Record) -> bool {
        log.placement_holds(table.generation(), arenas.specs, table.len(), &mut Recheck { table, live, buffers: arenas.buffers })
    }

    /// Set the tensors' fields as planned and call the buffers' tensor
    /// callbacks in ggml-alloc's order. `arenas` as for the plan.
    // (never inlined: scripts/callgrind measures the placement apart)
    #[inline(never)]
    pub fn apply<B: ComputeBuffers + ?Sized>(&self, live: &Live, arenas: &Arenas<B>, func: &str) {
        // (the last buffer and its place handle, made once per run of
        // steps in it: the tensors' addresses derive from the buffer's
        // base, no integer-to-pointer cast)
        let mut last: Option<(BackendIdx, BufferRef, Placer)> = None;
        for &step in &self.placement.steps {
            match step {
                Step::Alloc { id, b, offset } => {
                    let size = self.placement.allocated(id);
                    let t = live.get(id);
                    let (buffer, placer) = match last {
                        Some((lb, buffer, placer)) if lb == b => (buffer, placer),
                        _ => {
                            let buffer = arenas.buffer(b.get());
                            let placer = buffer.placer(arenas.specs[b.get()].measure);
                            last = Some((b, buffer, placer));
                            (buffer, placer)
                        }
                    };
                    placer.place(t, offset, size, func);
                    if !arenas.specs[b.get()].measure {
                        buffer.init_tensor(t);
                    }
                }
                Step::View { id, b, owner } => {
                    let t = live.get(id);
                    if let Some(owner) = owner {
                        t.set_view_src(live.get(owner));
                    }
                    let v = t.view_src().expect("planned as a view");
                    t.init_view_from_src(v);
                    if let Some(b) = b.map(BackendIdx::get).filter(|&b| !arenas.specs[b].measure) {
                        arenas.buffer(b).init_tensor(t);
                    }
                }
                Step::Free { id, b } => {
                    if !arenas.specs[b.get()].measure {
                        arenas.buffer(b.get()).free_tensor(live.get(id));
                    }
                }
            }
        }
    }

    /// The plan is applied or measured. Its working memory stays for the
    /// next plan (a compute allocates nothing once a graph as large was
    /// placed); [`Galloc::release`] gives it back.
    pub fn clear(&mut self) {
        self.extra.clear(0);
    }

    /// Room to plan, and keep the plan, for a table of `slots` slots and
    /// `tensors` tensors without allocating (exactly: a compute would
    /// allocate as much).
    pub fn reserve(&mut self, slots: usize, tensors: usize, log: &mut Record) {
        // The steps of the plan just measured, and an eighth more: pushing
        // them had doubled the vector, up to twice what a graph as large
        // needs (16 bytes a step, about two a tensor).
        let steps = &mut self.placement.steps;
        steps.shrink_to(steps.len() + steps.len() / 8);
        self.placement.reserve_tensors(slots);
        log.reserve_placement([0; 3], tensors);
    }

    /// Forget everything, the kept plan too (the split it placed is
    /// gone), and give the memory back (`reset`, a measure).
    pub fn release(&mut self, log: &mut Record) {
        log.clear_placement();
        self.placement.release();
        self.placement.steps = Vec::new();
        self.extra = PtrMap::new();
    }

    /// Read what the plan needs of every tensor in the table (the extra
    /// tensors it finds get handles in `live` past the table's slots).
    // (inlined into `plan`, its one caller: measured a little cheaper)
    #[inline(always)]
    fn load<'c>(&mut self, table: &Table, live: &mut Live<'c>, copies: impl Iterator<Item = (Slot, BackendIdx)>) {
        let keys = table.keys();
        self.extra.clear(0);
        live.truncate(table.size());
        let placement = &mut self.placement;
        placement.start_loading(keys.len());
        let mut unheld = Vec::new();
        for (i, (key, info)) in keys.iter().zip(table.infos()).enumerate() {
            if key.is_none() {
                placement.push_loaded(Loaded::none());
                continue;
            }
            let t = live.get(Slot::at(i));
            let vsrc = match t.view_src_id() {
                None => None,
                Some(vid) => match info.view_src().filter(|&v| table.key(v) == Some(vid)) {
                    Some(v) => Some(v), // as registered (ggml-alloc may have changed it since)
                    None => {
                        let v = table.find(vid);
                        if v.is_none() {
                            unheld.push(placement.n_loaded());
                        }
                        v
                    }
                },
            };
            placement.push_loaded(Loaded { data: t.data() as usize, buffer: t.buffer() as usize, vsrc, backend: info.assign, op: t.op() });
        }
        // view sources the table does not hold (none, unless a tensor was
        // changed since the table was made) get extra ids
        for i in unheld {
            let v = live.get(Slot::at(i)).view_src().expect("a view (its view_src is not NULL)");
            let v = self.id_of(table, live, v);
            self.placement.set_vsrc(i, v);
        }
        // the input copies' backends are the plan's, not the table's
        for (slot, b) in copies {
            self.placement.set_backend(slot.index(), b);
        }
    }

    /// The id of a tensor: its table slot, or an extra id (no backend) if
    /// the table does not hold it.
    fn id_of<'c>(&mut self, table: &Table, live: &mut Live<'c>, t: TensorRef<'c>) -> Slot {
        if let Some(slot) = table.find(t.id()) {
            return slot;
        }
        let key = t.id().addr() as u64;
        if let Some(id) = self.extra.get(key) {
            return Slot::new(id);
        }
        let id = live.push(t);
        self.extra.insert(key, id.get());
        debug_assert_eq!(id.index(), self.placement.n_loaded(), "extra ids follow the table's");
        self.placement.push_loaded(Loaded { data: t.data() as usize, buffer: t.buffer() as usize, op: t.op(), ..Loaded::none() });
        if let Some(view_src) = t.view_src() {
            let v = self.id_of(table, live, view_src);
            self.placement.set_vsrc(id.index(), v);
        }
        id
    }
}

/// What the placement reads of a tensor now.
#[inline(always)]
fn now(t: TensorRef) -> TensorNow {
    TensorNow { data: t.data() as usize, buffer: t.buffer() as usize, view_src: t.view_src_id().map_or(0, TensorId::addr), op: t.op() }
}

/// `f` of every tensor of `table` this call has a handle of, now, in slot
/// order, until one is false (the log counts them: a registered tensor
/// without a handle makes the count fall short).
#[inline(always)]
fn each_now<P>(table: &Table, live: &Live, p: &P, mut f: impl FnMut(TensorNow, &P) -> bool) -> bool {
    let slots = live.slots();
    slots[..table.size().min(slots.len())].iter().flatten().all(|&t| f(now(t), p))
}

/// A kept plan's questions asked again, of the table's tensors now (a kept
/// plan has no extra tensors).
struct Recheck<'a, 'c, B: ComputeBuffers + ?Sized> {
    table: &'a Table,
    live: &'a Live<'c>,
    buffers: &'a B,
}

impl<B: ComputeBuffers + ?Sized> PlaceQuestions for Recheck<'_, '_, B> {
    #[inline(always)]
    fn alloc_size(&mut self, b: BackendIdx, id: Slot) -> usize {
        self.buffers.buffer(b.get()).alloc_size(self.live.get(id))
    }

    #[inline(always)]
    fn same_layout(&mut self, a: Slot, b: Slot) -> bool {
        self.live.get(a).same_layout(self.live.get(b))
    }

    #[inline(always)]
    fn view_offs(&mut self, id: Slot) -> usize {
        self.live.get(id).view_offs()
    }
}

impl<B: ComputeBuffers + ?Sized> PlaceNow for Recheck<'_, '_, B> {
    #[inline(always)]
    fn each_tensor(&self, f: impl FnMut(TensorNow, &Self) -> bool) -> bool {
        each_now(self.table, self.live, self, f)
    }

    #[inline(always)]
    fn tensor_at(&self, slot: Slot) -> usize {
        self.table.key(slot).map_or(0, TensorId::addr)
    }
}

/// The placement's questions, answered by C now; logged in `log`'s
/// placement chapter when there is one (the plan may be kept).
struct CPlaceProbe<'a, 'c, B: ComputeBuffers + ?Sized> {
    table: &'a Table,
    live: &'a Live<'c>,
    buffers: &'a B,
    log: Option<&'a mut Record>,
    /// The questions asked, logged or not: (sizes, layouts, view offsets).
    asked: [usize; 3],
}

impl<'c, B: ComputeBuffers + ?Sized> CPlaceProbe<'_, 'c, B> {
    #[inline(always)]
    fn tensor(&self, id: Slot) -> TensorRef<'c> {
        self.live.get(id)
    }
}

impl<B: ComputeBuffers + ?Sized> PlaceQuestions for CPlaceProbe<'_, '_, B> {
    #[inline(always)]
    fn alloc_size(&mut self, b: BackendIdx, id: Slot) -> usize {
        let bytes = self.buffers.buffer(b.get()).alloc_size(self.tensor(id));
        self.asked[0] += 1;
        if let Some(log) = &mut self.log {
            log.place_size(id, b, bytes);
        }
        bytes
    }

    #[inline(always)]
    fn same_layout(&mut self, a: Slot, b: Slot) -> bool {
        let yes = self.tensor(a).same_layout(self.tensor(b));
        self.asked[1] += 1;
        if let Some(log) = &mut self.log {
            log.place_layout(a, b, yes);
        }
        yes
    }

    #[inline(always)]
    fn view_offs(&mut self, id: Slot) -> usize {
        let offs = self.tensor(id).view_offs();
        self.asked[2] += 1;
        if let Some(log) = &mut self.log {
            log.place_offs(id, offs);
        }
        offs
    }
}

impl<B: ComputeBuffers + ?Sized> PlaceProbe for CPlaceProbe<'_, '_, B> {
    fn sources(&mut self, id: Slot) -> Vec<Slot> {
        self.tensor(id).srcs().filter_map(|(_, s)| self.table.find(s.id())).collect()
    }

    fn name(&self, id: Slot) -> String {
        self.tensor(id).name_lossy()
    }

    fn backend_name(&self, b: BackendIdx) -> String {
        self.buffers.buffer(b.get()).backend().map_or_else(String::new, |b| b.name_lossy())
    }
}
