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
use core::ffi::c_void;

use super::ids::{BackendIdx, Slot, SlotId};
use super::plan::place::{ArenaSpec, Loaded, Order, PlaceProbe, Placement, Step, Tracked, Unplaced};
use super::plan::Refusal;
use super::record::{PlaceAnswers, Record, TensorNow};
use super::table::Table;
use crate::fatal::fatal;
use crate::ggml::TensorRef;
use crate::handle::BufferRef;

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
    /// The extra tensors (ids from the table's size on): view sources the
    /// table does not hold (none, unless a tensor changed since the table
    /// was made).
    extras: Vec<TensorRef>,
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
    /// endless (`ends`); a plan to their real ends may be kept: what it asks
    /// is then logged in `log`'s placement chapter, so that it can be
    /// applied again while that holds (a split computed again and again). Err: the first backend whose
    /// buffer is too small (the plan stops there). Aborts naming `func`
    /// where ggml-alloc would crash.
    pub fn plan<B: ComputeBuffers + ?Sized>(
        &mut self,
        table: &Table,
        order: &Order,
        arenas: &Arenas<B>,
        ends: Ends,
        log: &mut Record,
        func: &str,
    ) -> Result<(), TooSmall> {
        let (bounded, keep) = match ends {
            Ends::Real { keep } => (true, keep),
            Ends::Endless => (false, false),
        };
        log.clear_placement();
        self.load(table);
        // (what it loaded, logged before the plan changes it)
        let keep = keep && bounded && self.extras.is_empty() && log.place_loaded(self.loaded(table));
        let mut probe = CPlaceProbe { table, extras: &self.extras, buffers: arenas.buffers, log: keep.then_some(&mut *log), asked: [0; 3] };
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
    /// in the table's order: (data, buffer, view source, op).
    fn loaded<'a>(&'a mut self, table: &'a Table) -> impl ExactSizeIterator<Item = (usize, usize, Option<SlotId>, i32)> + Clone + 'a {
        // (every slot of the table holds a tensor: its first ids)
        self.placement.tensors()[..table.len()].iter().map(Tracked::loaded).map(|l| (l.data, l.buffer, l.vsrc.map(SlotId::from), l.op))
    }

    /// Whether the last plan, made for the same split in the same table,
    /// holds again for `arenas`: `log`'s placement chapter decides
    /// ([`Record::placement_holds`]), given the tensors as they are now and
    /// C's answers now. Then [`Galloc::apply`] places the split as a new
    /// plan would (the plan is a function of exactly what the chapter holds).
    pub fn still_holds<B: ComputeBuffers + ?Sized>(&self, table: &Table, arenas: &Arenas<B>, log: &Record) -> bool {
        log.placement_holds(table.generation(), arenas.specs, table.len(), &mut Recheck { table, buffers: arenas.buffers })
    }

    /// Set the tensors' fields as planned and call the buffers' tensor
    /// callbacks in ggml-alloc's order. `arenas` as for the plan.
    // (never inlined: scripts/callgrind measures the placement apart)
    #[inline(never)]
    pub fn apply<B: ComputeBuffers + ?Sized>(&self, table: &Table, arenas: &Arenas<B>) {
        // (the last buffer and its base, read once per run of steps in it:
        // the tensors' addresses derive from the buffer's, no
        // integer-to-pointer cast)
        let mut last: Option<(BackendIdx, BufferRef, *mut c_void)> = None;
        for &step in &self.placement.steps {
            match step {
                Step::Alloc { id, b, offset } => {
                    let t = self.tensor(table, id);
                    let (buffer, at) = match last {
                        Some((lb, buffer, base)) if lb == b => (buffer, base),
                        _ => {
                            let buffer = arenas.buffer(b.get());
                            let base = buffer.base();
                            last = Some((b, buffer, base));
                            (buffer, base)
                        }
                    };
                    t.place(buffer.as_ptr(), at.cast::<u8>().wrapping_add(offset).cast());
                    if !arenas.specs[b.get()].measure {
                        buffer.init_tensor(t);
                    }
                }
                Step::View { id, b, owner } => {
                    let t = self.tensor(table, id);
                    if let Some(owner) = owner {
                        t.set_view_src(self.tensor(table, owner));
                    }
                    let v = t.view_src().expect("planned as a view");
                    t.init_view_from_src(v);
                    if let Some(b) = b.map(BackendIdx::get).filter(|&b| !arenas.specs[b].measure) {
                        arenas.buffer(b).init_tensor(t);
                    }
                }
                Step::Free { id, b } => {
                    if !arenas.specs[b.get()].measure {
                        arenas.buffer(b.get()).free_tensor(self.tensor(table, id));
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
        let placed = self.placement.tensors();
        placed.reserve_exact(slots.saturating_sub(placed.len()));
        log.reserve_placement([0; 3], tensors);
    }

    /// Forget everything, the kept plan too (the split it placed is
    /// gone), and give the memory back (`reset`, a measure).
    pub fn release(&mut self, log: &mut Record) {
        log.clear_placement();
        self.placement.release();
        self.placement.steps = Vec::new();
        self.extras = Vec::new();
        self.extra = PtrMap::new();
    }

    /// Tensor `id`: a table slot, or an extra tensor past the table.
    #[inline(always)]
    fn tensor(&self, table: &Table, id: Slot) -> TensorRef {
        tensor_of(table, &self.extras, id)
    }

    /// Read what the plan needs of every tensor in the table.
    // (inlined into `plan`, its one caller: measured a little cheaper)
    #[inline(always)]
    fn load(&mut self, table: &Table) {
        let keys = table.keys();
        self.extra.clear(0);
        self.extras.clear();
        let slots = self.placement.tensors();
        slots.clear();
        slots.reserve(keys.len());
        let mut unheld = Vec::new();
        for (t, info) in table.tensors().zip(&table.info) {
            let Some(t) = t else {
                slots.push(Tracked::from(Loaded::none()));
                continue;
            };
            let g = t.get();
            let vsrc = if g.view_src.is_null() {
                None
            } else if let Some(v) = info.view_src().filter(|&v| table.key_ptr(v) == g.view_src) {
                Some(v) // as registered (ggml-alloc may have changed it since)
            } else {
                let v = table.find(g.view_src);
                if v.is_none() {
                    unheld.push(slots.len());
                }
                v
            };
            slots.push(Tracked::from(Loaded { data: g.data as usize, buffer: g.buffer as usize, vsrc, backend: info.assign, op: g.op }));
        }
        // view sources the table does not hold (none, unless a tensor was
        // changed since the table was made) get extra ids
        for i in unheld {
            let v = self.tensor(table, Slot::at(i)).view_src().expect("a view (its view_src is not NULL)");
            let v = self.id_of(table, v);
            self.placement.tensors()[i].set_vsrc(v);
        }
    }

    /// The id of a tensor: its table slot, or an extra id (no backend) if
    /// the table does not hold it.
    fn id_of(&mut self, table: &Table, t: TensorRef) -> Slot {
        let p = t.as_ptr();
        if let Some(slot) = table.find(p) {
            return slot;
        }
        if let Some(id) = self.extra.get(p as usize as u64) {
            return Slot::new(id);
        }
        let id = Slot::at(table.size() + self.extras.len());
        self.extra.insert(p as usize as u64, id.get());
        self.extras.push(t);
        let g = t.get();
        self.placement.tensors().push(Tracked::from(Loaded {
            data: g.data as usize,
            buffer: g.buffer as usize,
            op: g.op,
            ..Loaded::none()
        }));
        if let Some(view_src) = t.view_src() {
            let v = self.id_of(table, view_src);
            self.placement.tensors()[id].set_vsrc(v);
        }
        id
    }
}

/// Tensor `id`: a table slot, or an extra tensor past the table.
#[inline(always)]
fn tensor_of(table: &Table, extras: &[TensorRef], id: Slot) -> TensorRef {
    let id = id.index();
    match table.keys().get(id) {
        Some(&k) => k.expect("a planned tensor"),
        None => extras[id - table.size()],
    }
}

/// A kept plan's questions asked again, of the table's tensors now (a kept
/// plan has no extra tensors).
struct Recheck<'a, B: ComputeBuffers + ?Sized> {
    table: &'a Table,
    buffers: &'a B,
}

impl<B: ComputeBuffers + ?Sized> PlaceAnswers for Recheck<'_, B> {
    #[inline(always)]
    fn alloc_size(&mut self, b: BackendIdx, id: Slot) -> usize {
        self.buffers.buffer(b.get()).alloc_size(self.table.tensor(id))
    }

    #[inline(always)]
    fn same_layout(&mut self, a: Slot, b: Slot) -> bool {
        self.table.tensor(a).same_layout(self.table.tensor(b))
    }

    #[inline(always)]
    fn view_offs(&mut self, id: Slot) -> usize {
        self.table.tensor(id).get().view_offs
    }

    #[inline(always)]
    fn each_tensor(&self, mut f: impl FnMut(TensorNow, &Self) -> bool) -> bool {
        self.table.tensors().flatten().all(|t| {
            let g = t.get();
            f(TensorNow { data: g.data as usize, buffer: g.buffer as usize, view_src: g.view_src as usize, op: g.op }, self)
        })
    }

    #[inline(always)]
    fn tensor_at(&self, slot: Slot) -> usize {
        self.table.key_ptr(slot) as usize
    }
}

/// The placement's questions, answered by C now; logged in `log`'s
/// placement chapter when there is one (the plan may be kept).
struct CPlaceProbe<'a, B: ComputeBuffers + ?Sized> {
    table: &'a Table,
    extras: &'a [TensorRef],
    buffers: &'a B,
    log: Option<&'a mut Record>,
    /// The questions asked, logged or not: (sizes, layouts, view offsets).
    asked: [usize; 3],
}

impl<B: ComputeBuffers + ?Sized> CPlaceProbe<'_, B> {
    fn tensor(&self, id: Slot) -> TensorRef {
        tensor_of(self.table, self.extras, id)
    }
}

impl<B: ComputeBuffers + ?Sized> PlaceAnswers for CPlaceProbe<'_, B> {
    #[inline(always)]
    fn alloc_size(&mut self, b: BackendIdx, id: Slot) -> usize {
        self.buffers.buffer(b.get()).alloc_size(self.tensor(id))
    }

    #[inline(always)]
    fn same_layout(&mut self, a: Slot, b: Slot) -> bool {
        self.tensor(a).same_layout(self.tensor(b))
    }

    #[inline(always)]
    fn view_offs(&mut self, id: Slot) -> usize {
        self.tensor(id).get().view_offs
    }

    fn each_tensor(&self, mut f: impl FnMut(TensorNow, &Self) -> bool) -> bool {
        self.table.tensors().flatten().all(|t| {
            let g = t.get();
            f(TensorNow { data: g.data as usize, buffer: g.buffer as usize, view_src: g.view_src as usize, op: g.op }, self)
        })
    }

    fn tensor_at(&self, slot: Slot) -> usize {
        self.tensor(slot).as_ptr() as usize
    }
}

impl<B: ComputeBuffers + ?Sized> PlaceProbe for CPlaceProbe<'_, B> {
    #[inline(always)]
    fn alloc_size(&mut self, b: BackendIdx, id: Slot) -> usize {
        let bytes = PlaceAnswers::alloc_size(self, b, id);
        self.asked[0] += 1;
        if let Some(log) = &mut self.log {
            log.place_size(id, b, bytes);
        }
        bytes
    }

    #[inline(always)]
    fn same_layout(&mut self, a: Slot, b: Slot) -> bool {
        let yes = PlaceAnswers::same_layout(self, a, b);
        self.asked[1] += 1;
        if let Some(log) = &mut self.log {
            log.place_layout(a, b, yes);
        }
        yes
    }

    #[inline(always)]
    fn view_offs(&mut self, id: Slot) -> usize {
        let offs = PlaceAnswers::view_offs(self, id);
        self.asked[2] += 1;
        if let Some(log) = &mut self.log {
            log.place_offs(id, offs);
        }
        offs
    }

    fn sources(&mut self, id: Slot) -> Vec<Slot> {
        self.tensor(id).srcs().filter_map(|(_, s)| self.table.find(s.as_ptr())).collect()
    }

    fn name(&self, id: Slot) -> String {
        self.tensor(id).name_lossy()
    }

    fn backend_name(&self, b: BackendIdx) -> String {
        self.buffers.buffer(b.get()).backend().map_or_else(String::new, |b| b.name_lossy())
    }
}
