//! Where the tensors of a split graph live: ggml-alloc's graph allocation
//! (`ggml_tallocr_alloc_graph_impl` + `ggml_tallocr_alloc`/`_free_tensor` of
//! whisper.cpp 1.5), done here over the scheduler's table instead of by
//! ggml-alloc over a hash set.
//!
//! The same walk, the same counts of children and views, the same in-place
//! reuse of a source's memory and the same best-fit allocator
//! (talloc_model.rs), so every tensor gets the address ggml-alloc would give
//! it, and the compute buffers are measured to the byte as the original
//! measures them. Two things ggml-alloc cannot do:
//! - **plan, then apply.** [`Galloc::plan`] touches no tensor: it works on
//!   its own copy of what it reads (data, buffer, view source) and records
//!   the steps. A plan that does not fit a compute buffer is never applied
//!   (the scheduler grows the buffer and plans again), where ggml-alloc
//!   stopped the process half-way through. [`Galloc::apply`] then sets the
//!   tensors' fields and calls the buffers' `init_tensor`/`free_tensor` in
//!   the order ggml-alloc calls them. A measure is a plan alone.
//! - **no hashing.** Tensors are table slots; counts are plain arrays.
//!
//! Where ggml-alloc would dereference NULL or assert (a tensor to allocate
//! with no backend, a view of memory that does not exist) the compute stops
//! with a message naming the tensor.

use crate::prelude::*;

use crate::ptrmap::PtrMap;
use core::ffi::c_void;

use super::ids::{BackendIdx, SlotId};
use super::table::Table;
use super::talloc_model::Model;
use crate::fatal::fatal;
use crate::ggml::{wsp_ggml_tensor, TensorRef};
use crate::handle::{wsp_ggml_backend_buffer, BufferRef};

/// An allocation id (a table slot, or an extra tensor past the table), when
/// there may be none: `Option<SlotId>` takes four bytes like the id.
type Id = Option<SlotId>;

/// One compute buffer as an allocation sees it, borrowed for one placement.
#[derive(Clone, Debug)]
pub(super) struct Arena<'a> {
    pub buffer: BufferRef<'a>,
    /// The buffer's base address and alignment (as its allocator has them).
    pub base: usize,
    /// The base as a pointer: tensors are placed at an offset from it, so
    /// their addresses derive from the buffer's (no integer-to-pointer cast).
    pub base_ptr: *mut c_void,
    pub align: usize,
    /// A measure allocator's buffer: no `init_tensor`/`free_tensor` calls.
    pub measure: bool,
    /// The allocator's free blocks (offset from `base`, size), by address:
    /// what the caller left (`sched_get_tallocr` allocations).
    pub free: Vec<(usize, usize)>,
}

/// What a kept plan remembers of an arena: all of it but the borrow (the
/// buffer by address only, so nothing can be read through it later).
#[derive(Debug, PartialEq, Eq)]
struct ArenaKey {
    buffer: usize,
    base: usize,
    align: usize,
    measure: bool,
    free: Vec<(usize, usize)>,
}

impl Arena<'_> {
    fn key(&self) -> ArenaKey {
        let Arena { buffer, base, base_ptr: _, align, measure, ref free } = *self;
        ArenaKey { buffer: buffer.as_ptr() as usize, base, align, measure, free: free.clone() }
    }

    /// The same arena without an end: its last free block reaches as far as
    /// needed (to learn how much a split needs).
    fn endless(&self) -> Vec<(usize, usize)> {
        const HUGE: usize = usize::MAX / 4;
        let mut free = self.free.clone();
        match free.last_mut() {
            Some(last) if last.0 + last.1 >= self.buffer.size() => last.1 = HUGE,
            _ => free.push((self.buffer.size(), HUGE)),
        }
        free
    }
}

/// What the allocation does, in ggml-alloc's order.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `ggml_tallocr_alloc` at `offset` in backend `b`'s buffer.
    Alloc { id: u32, b: BackendIdx, offset: usize },
    /// `init_view`; `owner`: the node is computed in place in the memory of
    /// `owner`, which becomes its view source. `b`: the backend whose
    /// buffer initialises it, if any.
    View { id: u32, b: Option<BackendIdx>, owner: Id },
    /// `ggml_tallocr_free_tensor` of a tensor of backend `b`'s buffer.
    Free { id: u32, b: BackendIdx },
}

/// The node order ggml-alloc walks: each split's input copies, then its
/// nodes; each entry a tensor id and the range of its sources' ids (up to
/// the first NULL) in `srcs`.
#[derive(Default)]
pub(super) struct Order {
    pub entries: Vec<(u32, u32, u32)>,
    pub srcs: Vec<u32>,
}

impl Order {
    pub fn clear(&mut self) {
        self.entries.clear();
        self.srcs.clear();
    }
}

/// A question the plan asked C about a tensor (besides what it loaded of
/// every tensor), with its answer: a kept plan holds again only if each
/// gets the same answer (see [`Galloc::still_holds`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Read {
    /// Backend `b`'s buffer's `get_alloc_size` for tensor `id`.
    Size { id: u32, b: BackendIdx, bytes: usize },
    /// Whether tensor `id`'s op can be computed in place.
    InPlace { id: u32, yes: bool },
    /// Whether tensors `id` and `other` have the same type, shape and strides.
    Layout { id: u32, other: u32, yes: bool },
    /// Tensor `id`'s `view_offs`.
    Offs { id: u32, offs: usize },
}

/// A plan that does not fit: the backend whose buffer is too small.
pub(super) struct TooSmall(pub BackendIdx);

/// What the plan tracks of one tensor: what ggml-alloc reads and changes.
#[derive(Clone, Copy)]
struct Slot {
    /// `data` (0: none yet, as ggml-alloc tests it).
    data: usize,
    buffer: *mut wsp_ggml_backend_buffer,
    /// View source id (None: not a view).
    vsrc: Id,
    /// ggml-alloc's counts: nodes of the walk that read it, views of it.
    children: i32,
    views: i32,
    /// The backend whose compute buffer allocates it.
    backend: Option<BackendIdx>,
    /// The size this plan allocated it with (0: not allocated by the plan):
    /// freed with the same, without asking the buffer again.
    bytes: usize,
}

impl Slot {
    const EMPTY: Slot = Slot { data: 0, buffer: core::ptr::null_mut(), vsrc: None, children: 0, views: 0, backend: None, bytes: 0 };
}

/// The allocation's working state, kept between computes for its memory.
#[derive(Default)]
pub(super) struct Galloc {
    /// Per tensor id: a table slot, or an extra tensor past the table.
    slots: Vec<Slot>,
    /// The extra tensors (ids from the table's size on).
    extras: Vec<*mut wsp_ggml_tensor>,
    /// Tensors met that the table does not hold (ids from the table's size on).
    extra: PtrMap,
    steps: Vec<Step>,
    models: Vec<Model>,
    /// How far into each buffer the plan went (ggml-alloc's `max_size`).
    pub max: Vec<usize>,
    /// The ops computed in place (`ggml::in_place_ops`, low word first).
    in_place: [u64; 2],
    /// The plan being made records what it reads (it may be kept).
    recording: bool,
    /// What the last plan read: the data and buffer of every tensor of the
    /// table as loaded, in slot order (the buffer as an index into
    /// `buffers`: a graph's tensors live in a few), and its questions in
    /// order.
    loaded: Vec<usize>,
    loaded_buffer: Vec<u8>,
    /// The view source of every tensor of the table as loaded (an id of
    /// the table: a kept plan met no extra tensor).
    loaded_vsrc: Vec<Id>,
    buffers: Vec<*mut wsp_ggml_backend_buffer>,
    reads: Vec<Read>,
    /// The last plan can be applied again: it was made in this generation
    /// of the table, fit these arenas (their state then) and read nothing
    /// besides `loaded` and `reads`.
    kept: Option<(u64, Vec<ArenaKey>)>,
}

const fn padded(size: usize, align: usize) -> usize {
    size.div_ceil(align).saturating_mul(align)
}

impl Galloc {
    /// An allocation that computes the ops of `in_place` in place
    /// (`ggml::in_place_ops`).
    pub fn new(in_place: u128) -> Galloc {
        Galloc { in_place: [in_place as u64, (in_place >> 64) as u64], ..Galloc::default() }
    }

    /// Plan the allocation of `order` in `arenas` (their real ends if
    /// `bounded`, else endless); `keep`: record what it reads, so that it can
    /// be applied again while that holds (a split computed again and again).
    /// Err: the first backend whose buffer is too small (the plan stops there).
    // (never inlined: scripts/callgrind measures the placement apart)
    #[inline(never)]
    pub fn plan(&mut self, table: &Table, order: &Order, arenas: &[Arena], bounded: bool, keep: bool, func: &str) -> Result<(), TooSmall> {
        self.kept = None;
        self.reads.clear();
        self.load(table);
        // (extra ids: the graph changed under the split; such a plan is not kept)
        let mut keep = keep && bounded && self.extras.is_empty();
        self.recording = keep;
        if keep {
            keep = self.record_loaded(table);
        }
        self.models.clear();
        self.models.extend(arenas.iter().map(|a| Model::from_blocks(if bounded { a.free.clone() } else { a.endless() })));
        self.max.clear();
        self.max.resize(arenas.len(), 0);
        self.steps.clear();
        // count children and views (initialising views of memory set by hand)
        for &(id, s, e) in &order.entries {
            let n = self.slots[id as usize];
            if let Some(v) = n.vsrc {
                self.slots[v.get() as usize].views += 1;
                if n.buffer.is_null() && n.data != 0 {
                    self.init_view(table, id, None, func);
                }
            }
            for &p in &order.srcs[s as usize..e as usize] {
                let ps = &mut self.slots[p as usize];
                ps.children += 1;
                if ps.vsrc.is_some() && ps.buffer.is_null() && ps.data != 0 {
                    self.init_view(table, p, None, func);
                }
            }
        }
        for &(id, s, e) in &order.entries {
            let srcs = &order.srcs[s as usize..e as usize];
            for &p in srcs {
                if self.slots[p as usize].data == 0 {
                    keep &= self.allocate(table, p, None, arenas, func).map_err(TooSmall)?;
                }
            }
            if self.slots[id as usize].data == 0 {
                keep &= self.allocate(table, id, Some(srcs), arenas, func).map_err(TooSmall)?;
            }
            for &p in srcs {
                let ps = &mut self.slots[p as usize];
                ps.children -= 1;
                if ps.children == 0 && ps.views == 0 {
                    let Some(v) = ps.vsrc.map(SlotId::get) else {
                        self.free(table, p, arenas, func);
                        continue;
                    };
                    let vs = &mut self.slots[v as usize];
                    vs.views -= 1;
                    if vs.views == 0 && vs.children == 0 {
                        self.free(table, v, arenas, func);
                    }
                }
            }
        }
        if keep && self.extras.is_empty() {
            self.kept = Some((table.generation(), arenas.iter().map(Arena::key).collect()));
            // (held between computes: no spare capacity)
            for v in [&mut self.loaded as &mut dyn Trim, &mut self.loaded_buffer, &mut self.loaded_vsrc, &mut self.reads, &mut self.steps] {
                v.trim();
            }
        } else {
            self.reads.clear();
        }
        Ok(())
    }

    /// Whether the last plan, made for the same split in the same table,
    /// holds again for `arenas`: they are as they were, every tensor has the
    /// data, buffer and view source the plan loaded (all that `load` reads),
    /// and every question it asked gets the same answer. Then [`Galloc::apply`] places the split as a new plan
    /// would (the plan is a function of exactly these).
    pub fn still_holds(&self, table: &Table, arenas: &[Arena]) -> bool {
        let same_arenas = |(generation, kept): &(u64, Vec<ArenaKey>)| {
            *generation == table.generation() && kept.len() == arenas.len() && kept.iter().zip(arenas).all(|(k, a)| *k == a.key())
        };
        if !self.kept.as_ref().is_some_and(same_arenas) || self.loaded.len() != table.len() {
            return false;
        }
        let tensors = table.tensors().flatten();
        let keys = table.keys();
        let vsrc_ptr = |v: Id| v.map_or(core::ptr::null_mut(), |v| keys[v.get() as usize]);
        let seen = self.loaded.iter().zip(&self.loaded_buffer).zip(&self.loaded_vsrc);
        let same = tensors.zip(seen).all(|(t, ((&data, &b), &v))| {
            let g = t.get();
            g.data as usize == data && g.buffer == self.buffers[usize::from(b)] && g.view_src == vsrc_ptr(v)
        });
        same && self.reads.iter().all(|&r| self.ask_again(table, r, arenas) == r)
    }

    /// Record the data and buffer of every tensor of the table as loaded;
    /// false if its tensors live in too many buffers to record.
    fn record_loaded(&mut self, table: &Table) -> bool {
        self.loaded.clear();
        self.loaded_buffer.clear();
        self.loaded_vsrc.clear();
        self.buffers.clear();
        // (the last buffer seen and its index: most tensors are in the same as the one before)
        let mut last: Option<(*mut wsp_ggml_backend_buffer, u8)> = None;
        for (s, _) in self.slots.iter().zip(table.keys()).filter(|(_, k)| !k.is_null()) {
            let b = match last {
                Some((buffer, b)) if buffer == s.buffer => b,
                _ => {
                    let i = match self.buffers.iter().position(|&b| b == s.buffer) {
                        Some(i) => i,
                        None => {
                            self.buffers.push(s.buffer);
                            self.buffers.len() - 1
                        }
                    };
                    let Ok(b) = u8::try_from(i) else { return false };
                    last = Some((s.buffer, b));
                    b
                }
            };
            self.loaded.push(s.data);
            self.loaded_buffer.push(b);
            self.loaded_vsrc.push(s.vsrc);
        }
        true
    }

    /// Record a question the plan asked and its answer, if the plan may be
    /// kept (the one place that reads `recording`).
    #[inline(always)]
    fn note(&mut self, r: Read) {
        if self.recording {
            self.reads.push(r);
        }
    }

    /// Read `r`'s question again.
    fn ask_again(&self, table: &Table, r: Read, arenas: &[Arena]) -> Read {
        match r {
            Read::Size { id, b, .. } => Read::Size { id, b, bytes: arenas[b].buffer.alloc_size(self.tensor(table, id)) },
            Read::InPlace { id, .. } => Read::InPlace { id, yes: can_inplace(self.in_place, self.tensor(table, id).get().op) },
            Read::Layout { id, other, .. } => {
                Read::Layout { id, other, yes: self.tensor(table, id).same_layout(self.tensor(table, other)) }
            }
            Read::Offs { id, .. } => Read::Offs { id, offs: self.tensor(table, id).get().view_offs },
        }
    }

    /// Set the tensors' fields as planned and call the buffers' tensor
    /// callbacks in ggml-alloc's order. `arenas` as for the plan.
    // (never inlined: scripts/callgrind measures the placement apart)
    #[inline(never)]
    pub fn apply(&self, table: &Table, arenas: &[Arena]) {
        for &step in &self.steps {
            match step {
                Step::Alloc { id, b, offset } => {
                    let t = self.tensor(table, id);
                    let a = &arenas[b];
                    t.place(a.buffer.as_ptr(), a.base_ptr.cast::<u8>().wrapping_add(offset).cast());
                    if !a.measure {
                        a.buffer.init_tensor(t);
                    }
                }
                Step::View { id, b, owner } => {
                    let t = self.tensor(table, id);
                    if let Some(owner) = owner {
                        t.set_view_src(self.tensor(table, owner.get()));
                    }
                    let v = t.view_src().expect("planned as a view");
                    t.init_view_from_src(v);
                    if let Some(a) = b.map(|b| &arenas[b]).filter(|a| !a.measure) {
                        a.buffer.init_tensor(t);
                    }
                }
                Step::Free { id, b } => {
                    let a = &arenas[b];
                    if !a.measure {
                        a.buffer.free_tensor(self.tensor(table, id));
                    }
                }
            }
        }
    }

    /// Give the working memory back (it is as large as the table; a
    /// scheduler holds it only while it places a split).
    pub fn release(&mut self) {
        if self.kept.is_none() {
            let max = core::mem::take(&mut self.max);
            *self = Galloc { max, in_place: self.in_place, ..Galloc::default() };
            return;
        }
        // A kept plan keeps what applying it again and checking it need.
        self.slots = Vec::new();
        self.models = Vec::new();
        self.extra.clear(0);
    }

    /// Forget the kept plan (the split it placed is gone).
    pub fn forget(&mut self) {
        self.kept = None;
        self.release();
    }

    /// Tensor `id`: a table slot, or an extra tensor past the table.
    #[inline(always)]
    fn tensor(&self, table: &Table, id: u32) -> TensorRef {
        let id = id as usize;
        let p = match table.keys().get(id) {
            Some(&k) => k,
            None => self.extras[id - table.size()],
        };
        // SAFETY: a registered tensor, or an extra: a view source of one
        // (id_of); all are tensors of the graph, live for the compute.
        unsafe { TensorRef::new(p) }.expect("a planned tensor")
    }

    /// Read what the plan needs of every tensor in the table.
    fn load(&mut self, table: &Table) {
        let keys = table.keys();
        self.extra.clear(0);
        self.extras.clear();
        self.slots.clear();
        self.slots.reserve(keys.len());
        let mut unheld = Vec::new();
        for (t, info) in table.tensors().zip(&table.info) {
            let Some(t) = t else {
                self.slots.push(Slot::EMPTY);
                continue;
            };
            let g = t.get();
            let vsrc = if g.view_src.is_null() {
                None
            } else if let Some(v) = info.vsrc.filter(|&v| keys[v.get() as usize] == g.view_src) {
                Some(v) // as registered (ggml-alloc may have changed it since)
            } else {
                let v = table.find(g.view_src).map(SlotId::new);
                if v.is_none() {
                    unheld.push(self.slots.len());
                }
                v
            };
            self.slots.push(Slot { data: g.data as usize, buffer: g.buffer, vsrc, backend: info.assign, ..Slot::EMPTY });
        }
        // view sources the table does not hold (none, unless a tensor was
        // changed since the table was made) get extra ids
        for i in unheld {
            let v = self.tensor(table, i as u32).view_src().expect("a view (its view_src is not NULL)");
            self.slots[i].vsrc = Some(SlotId::new(self.id_of(table, v)));
        }
    }

    /// The id of a tensor: its table slot, or an extra id (no backend) if
    /// the table does not hold it.
    fn id_of(&mut self, table: &Table, t: TensorRef) -> u32 {
        let p = t.as_ptr();
        if let Some(slot) = table.find(p) {
            return slot;
        }
        if let Some(id) = self.extra.get(p as usize as u64) {
            return id;
        }
        let id = (table.size() + self.extras.len()) as u32;
        self.extra.insert(p as usize as u64, id);
        self.extras.push(p);
        let (data, buffer) = {
            let g = t.get();
            (g.data as usize, g.buffer)
        };
        self.slots.push(Slot { data, buffer, ..Slot::EMPTY });
        if let Some(view_src) = t.view_src() {
            let v = self.id_of(table, view_src);
            self.slots[id as usize].vsrc = Some(SlotId::new(v));
        }
        id
    }

    /// `init_view`: the view takes its source's buffer and memory.
    #[inline(always)]
    fn init_view(&mut self, table: &Table, id: u32, owner: Id, func: &str) {
        let i = id as usize;
        if owner.is_some() {
            self.slots[i].vsrc = owner;
        }
        let vsrc = self.slots[i].vsrc.expect("a view, or in place in an owner's memory").get();
        let v = self.slots[vsrc as usize];
        if v.data == 0 {
            let t = self.tensor(table, id);
            let src = self.tensor(table, vsrc);
            fatal(
                func,
                &format!(
                    "view '{}' of '{}' cannot be placed: '{}' has no memory (no data, no backend to allocate it on)",
                    t.name_lossy(),
                    src.name_lossy(),
                    src.name_lossy()
                ),
            );
        }
        let offs = self.tensor(table, id).get().view_offs;
        self.note(Read::Offs { id, offs });
        let s = &mut self.slots[i];
        s.buffer = v.buffer;
        s.data = v.data + offs;
        let b = self.slots[i].backend;
        self.steps.push(Step::View { id, b, owner });
    }

    /// `allocate_node` of a tensor without memory: in place in a source's
    /// memory where ggml-alloc would compute it there, else from its
    /// backend's allocator. `srcs`: the tensor's sources, if it is the node
    /// being walked (a source allocated on its own has its sources read
    /// here, as ggml-alloc reads them). Ok: whether the plan can be kept
    /// (sources read here are not recorded). Err: the backend whose buffer
    /// is too small.
    #[inline(always)]
    fn allocate(&mut self, table: &Table, id: u32, srcs: Option<&[u32]>, arenas: &[Arena], func: &str) -> Result<bool, BackendIdx> {
        let i = id as usize;
        let n = self.slots[i];
        if n.vsrc.is_some() {
            self.init_view(table, id, None, func);
            return Ok(true);
        }
        let Some((b, arena)) = n.backend.map(|b| (b, &arenas[b])) else {
            fatal(func, &format!("tensor '{}' has no memory and no backend to allocate it on", self.tensor(table, id).name_lossy()));
        };
        let t = self.tensor(table, id);
        let inplace = can_inplace(self.in_place, t.get().op);
        self.note(Read::InPlace { id, yes: inplace });
        let mut keep = true;
        if inplace {
            let own;
            let srcs = match srcs {
                Some(s) => s,
                None => {
                    own = t.srcs().map(|(_, s)| self.id_of(table, s)).collect::<Vec<u32>>();
                    keep = false;
                    &own
                }
            };
            for &p in srcs {
                let ps = self.slots[p as usize];
                // only memory of this allocator's buffer is reused
                if ps.buffer != arena.buffer.as_ptr() || ps.data == 0 || ps.children != 1 || ps.views != 0 {
                    continue;
                }
                let same = t.same_layout(self.tensor(table, p));
                self.note(Read::Layout { id, other: p, yes: same });
                if !same {
                    continue;
                }
                let Some(v) = ps.vsrc else {
                    self.slots[p as usize].views += 1;
                    self.init_view(table, id, Some(SlotId::new(p)), func);
                    return Ok(keep);
                };
                let vs = self.slots[v.get() as usize];
                if vs.views == 1 && vs.children == 0 && vs.data == ps.data {
                    self.slots[v.get() as usize].views += 1;
                    self.init_view(table, id, Some(v), func);
                    return Ok(keep);
                }
            }
        }
        let bytes = arena.buffer.alloc_size(t);
        self.note(Read::Size { id, b, bytes });
        let size = padded(bytes, arena.align);
        let offset = self.models[b].alloc(size).ok_or(b)?;
        let s = &mut self.slots[i];
        s.data = arena.base + offset;
        s.buffer = arena.buffer.as_ptr();
        s.bytes = bytes;
        self.max[b] = self.max[b].max(offset + size);
        self.steps.push(Step::Alloc { id, b, offset });
        Ok(keep)
    }

    /// `free_node`: give a tensor's memory back to its allocator, if it is
    /// the allocator's own.
    fn free(&mut self, table: &Table, id: u32, arenas: &[Arena], func: &str) {
        let n = self.slots[id as usize];
        let Some((b, arena)) = n.backend.map(|b| (b, &arenas[b])) else { return };
        if n.buffer != arena.buffer.as_ptr() {
            return;
        }
        // (ggml-alloc asks the buffer again; the tensor has not changed
        // since this plan allocated it, so neither has the answer)
        let bytes = if n.bytes != 0 {
            n.bytes
        } else {
            let bytes = arena.buffer.alloc_size(self.tensor(table, id));
            self.note(Read::Size { id, b, bytes });
            bytes
        };
        let size = padded(bytes, arena.align);
        let offset = n.data.wrapping_sub(arena.base);
        if self.models[b].free(offset, size).is_none() {
            fatal(
                func,
                &format!(
                    "the compute buffer of '{}' has too many free blocks (ggml-alloc's limit is 256)",
                    arena.buffer.backend().map_or_else(String::new, |b| b.name_lossy())
                ),
            );
        }
        self.steps.push(Step::Free { id, b });
    }
}

/// A vector the kept plan holds: its spare capacity is given back.
trait Trim {
    fn trim(&mut self);
}

impl<T> Trim for Vec<T> {
    fn trim(&mut self) {
        if self.capacity() > self.len() + self.len() / 8 + 16 {
            self.shrink_to_fit();
        }
    }
}

/// `ggml_op_can_inplace` for the ops in `set` (`ggml::in_place_ops`, as two
/// words: a u128 shift costs several instructions on every allocation).
#[inline]
fn can_inplace(set: [u64; 2], op: core::ffi::c_int) -> bool {
    let op = op as u32;
    op < 128 && set[(op >> 6) as usize] >> (op & 63) & 1 != 0
}
