//! Where the tensors of a split live, planned: ggml-alloc's graph
//! allocation (`ggml_tallocr_alloc_graph_impl` + `ggml_tallocr_alloc`/
//! `_free_tensor` of whisper.cpp 1.5) over ids (table slots, and extra
//! tensors past the table) instead of ggml-alloc's hash set. Sealed from C
//! like the passes: what it reads of every tensor is loaded before
//! (`Loaded`, by galloc.rs), and what else it needs it asks a
//! [`PlaceProbe`], whose C implementation logs the answers.
//!
//! The same walk, the same counts of children and views, the same in-place
//! reuse of a source's memory and the same best-fit allocator
//! (talloc_model.rs), so every tensor gets the address ggml-alloc would give
//! it, and the compute buffers are measured to the byte as the original
//! measures them. The plan is a list of [`Step`]s, applied by galloc.rs; a
//! plan that does not fit a buffer is never applied ([`TooSmall`]).

use crate::prelude::*;

use super::snapshot::Refusal;
use super::talloc_model::Model;
use crate::ptrmap::PtrMap;
use crate::sched::ids::{BackendIdx, Slot, SlotId};

/// An allocation id (a table slot, or an extra tensor past the table), when
/// there may be none.
pub(in crate::sched) type Id = Option<Slot>;

/// What the placement reads of one tensor before it plans (the loader,
/// galloc.rs, reads it from C).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::sched) struct Loaded {
    /// `data` as an address (0: none yet, as ggml-alloc tests it).
    pub data: usize,
    /// Its buffer's address (0: none).
    pub buffer: usize,
    /// View source id (None: not a view).
    pub vsrc: Id,
    /// The backend whose compute buffer allocates it.
    pub backend: Option<BackendIdx>,
    /// Its op (ggml's enum value).
    pub op: i32,
}

impl Loaded {
    /// No tensor (a free table slot). (A function: cbindgen would export an
    /// associated constant's type.)
    pub const fn none() -> Loaded {
        Loaded { data: 0, buffer: 0, vsrc: None, backend: None, op: 0 }
    }
}

/// One compute buffer as the placement sees it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(in crate::sched) struct ArenaSpec {
    /// The buffer's address, its size, base address and alignment (as its
    /// allocator has them).
    pub buffer: usize,
    pub size: usize,
    pub base: usize,
    pub align: usize,
    /// A measure allocator's buffer.
    pub measure: bool,
    /// The allocator's free blocks (offset from `base`, size), by address:
    /// what the caller left (`sched_get_tallocr` allocations).
    pub free: Vec<(usize, usize)>,
}

impl Clone for ArenaSpec {
    fn clone(&self) -> ArenaSpec {
        ArenaSpec { free: self.free.clone(), ..*self }
    }

    /// (reusing the free blocks' vector)
    fn clone_from(&mut self, source: &ArenaSpec) {
        let mut free = core::mem::take(&mut self.free);
        free.clone_from(&source.free);
        *self = ArenaSpec { free, ..*source };
    }
}

/// The placement's questions whose answers decide its plan: logged while
/// planning when the plan may be kept (galloc.rs), asked again to know
/// whether a kept plan still holds (record.rs, `Record::placement_holds`).
pub(in crate::sched) trait PlaceQuestions {
    /// Backend `b`'s buffer's `get_alloc_size` for tensor `id`.
    fn alloc_size(&mut self, b: BackendIdx, id: Slot) -> usize;
    /// Whether tensors `a` and `b` have the same type, shape and strides.
    fn same_layout(&mut self, a: Slot, b: Slot) -> bool;
    /// Tensor `id`'s `view_offs`.
    fn view_offs(&mut self, id: Slot) -> usize;
}

/// What the placement asks C about the tensors (by id) besides what was
/// loaded: the [`PlaceQuestions`], and what no kept plan asks.
pub(in crate::sched) trait PlaceProbe: PlaceQuestions {
    /// The ids of tensor `id`'s sources that are registered (a tensor
    /// allocated on its own, outside the walk; not logged: a plan that asks
    /// is not kept). Others are never reused in place: the walk never
    /// counted them as read.
    fn sources(&mut self, id: Slot) -> Vec<Slot>;
    /// Tensor `id`'s name, for messages.
    fn name(&self, id: Slot) -> String;
    /// Backend `b`'s name, for messages.
    fn backend_name(&self, b: BackendIdx) -> String;
}

/// What the allocation does, in ggml-alloc's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::sched) enum Step {
    /// `ggml_tallocr_alloc` at `offset` in backend `b`'s buffer (its size:
    /// [`Placement::allocated`]).
    Alloc { id: Slot, b: BackendIdx, offset: usize },
    /// `init_view`; `owner`: the node is computed in place in the memory of
    /// `owner`, which becomes its view source. `b`: the backend whose
    /// buffer initialises it, if any.
    View { id: Slot, b: Option<BackendIdx>, owner: Id },
    /// `ggml_tallocr_free_tensor` of a tensor of backend `b`'s buffer.
    Free { id: Slot, b: BackendIdx },
}

/// The node order ggml-alloc walks: each split's input copies, then its
/// nodes; each entry a tensor id and the range of its sources' ids (up to
/// the first NULL) in `srcs`.
#[derive(Default)]
pub(in crate::sched) struct Order {
    pub entries: Vec<(Slot, u32, u32)>,
    pub srcs: Vec<Slot>,
}

impl Order {
    pub fn clear(&mut self) {
        self.entries.clear();
        self.srcs.clear();
    }
}

/// Why a plan was not made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::sched) enum Unplaced {
    /// Backend's buffer is too small (the plan stops there).
    TooSmall(BackendIdx),
    /// What ggml-alloc would assert on or dereference NULL for: the reason
    /// is in [`Placement::refusal`]. (Not carried here: the walk's results
    /// stay a few bytes, returned in registers.)
    Refused,
}

/// What the plan tracks of one tensor: what ggml-alloc reads and changes,
/// in 32 bytes (the scheduler keeps one per tensor of its largest graph).
#[derive(Clone, Copy)]
pub(in crate::sched) struct Tracked {
    data: usize,
    /// The size this plan allocated it with (0: not allocated by the
    /// plan; [`BIG`]: in [`Placement::big`]): freed with the same, without
    /// asking the buffer again.
    bytes: u32,
    /// Its view source ([`Tracked::vsrc`]), in four bytes.
    vsrc_id: Option<SlotId>,
    /// ggml-alloc's counts: nodes of the walk that read it, views of it.
    children: i32,
    views: i32,
    /// Its buffer, by number ([`BufferIds`]; 0: none).
    buffer: u32,
    backend: Option<BackendIdx>,
    /// Its op, [`OTHER_OP`] for a value past ggml's ops (none is 255 or
    /// more).
    op: u8,
}

/// [`Tracked::bytes`] of a size that does not fit in four bytes.
const BIG: u32 = u32::MAX;

/// The buffers the loaded tensors live in, numbered from 1 in the order
/// first seen (0: no buffer), so that a tracked tensor keeps a number, not
/// an address: two tensors are in the same buffer exactly when their
/// numbers are equal.
#[derive(Default)]
struct BufferIds {
    /// Each number's address (`addrs[0]` is 0).
    addrs: Vec<usize>,
    /// The address looked up last and its number: a tensor with a buffer
    /// is most often in the buffer of the one before it.
    last: (usize, u32),
    /// Address to number, once there are more than [`FEW_BUFFERS`].
    many: PtrMap,
}

/// Up to this many buffers are looked up by a scan of `addrs`.
const FEW_BUFFERS: usize = 8;

impl BufferIds {
    /// Only "no buffer" (0) numbered.
    fn clear(&mut self) {
        self.addrs.clear();
        self.addrs.push(0);
        self.last = (0, 0);
        self.many.clear(0);
    }

    /// The number of the buffer at `addr` (numbered if new).
    #[inline(always)]
    fn number(&mut self, addr: usize) -> u32 {
        // (a graph's nodes have no buffer before they are placed, and
        // alternate with the weights they read)
        if addr == 0 {
            return 0;
        }
        if addr == self.last.0 {
            return self.last.1;
        }
        let n = self.number_again(addr);
        self.last = (addr, n);
        n
    }

    #[inline(never)]
    fn number_again(&mut self, addr: usize) -> u32 {
        let found = if self.addrs.len() <= FEW_BUFFERS {
            self.addrs.iter().position(|&a| a == addr).map(|i| i as u32)
        } else {
            self.many.get(addr as u64)
        };
        if let Some(n) = found {
            return n;
        }
        let n = self.addrs.len() as u32;
        self.addrs.push(addr);
        if self.addrs.len() == FEW_BUFFERS + 1 {
            for (i, &a) in self.addrs.iter().enumerate() {
                self.many.insert(a as u64, i as u32);
            }
        } else if self.addrs.len() > FEW_BUFFERS + 1 {
            self.many.insert(addr as u64, n);
        }
        n
    }
}

/// The placement's working state, kept between computes for its memory.
#[derive(Default)]
pub(in crate::sched) struct Placement {
    /// The ops ggml-alloc computes in place (`ggml_op_can_inplace`), by
    /// ggml's enum value, low word first.
    in_place: [u64; 2],
    slots: Vec<Tracked>,
    /// The buffers of the loaded tensors, numbered.
    buffers: BufferIds,
    /// Each arena's buffer's number.
    arena_buf: Vec<u32>,
    /// (id, bytes) of the tensors this plan allocated with [`BIG`] bytes or
    /// more.
    big: Vec<(Slot, usize)>,
    models: Vec<Model>,
    /// The plan: what to do to the tensors, in ggml-alloc's order.
    pub steps: Vec<Step>,
    /// How far into each buffer the plan went (ggml-alloc's `max_size`).
    pub max: Vec<usize>,
    /// Why the last plan was refused ([`Unplaced::Refused`]).
    pub refusal: Option<Refusal>,
}

const fn padded(size: usize, align: usize) -> usize {
    size.div_ceil(align).saturating_mul(align)
}

impl Tracked {
    /// Its view source (the loader resolves one after the others).
    pub fn set_vsrc(&mut self, v: Slot) {
        self.vsrc_id = Some(v.into());
    }

    /// Its view source.
    #[inline(always)]
    fn vsrc(&self) -> Id {
        self.vsrc_id.map(SlotId::slot)
    }
}

/// The op the plan tracks for an op value that is not one of ggml's (255
/// or more, or negative): none that can compute in place, which is all the
/// plan asks of an op. (A kept plan logs the op it loaded and compares it
/// with the tensor's then: such a value never matches, so its plan is made
/// again.)
pub(in crate::sched) const OTHER_OP: u8 = u8::MAX;

// (the point of the numbers and the byte)
const _: () = assert!(core::mem::size_of::<Tracked>() <= 32);

impl Placement {
    /// A placement that computes the ops of `in_place` in place (bit `op`
    /// set: `ggml_op_can_inplace`).
    pub fn new(in_place: u128) -> Placement {
        Placement { in_place: [in_place as u64, (in_place >> 64) as u64], ..Placement::default() }
    }

    /// Start loading the tensors to plan for (the loader, galloc.rs,
    /// pushes what it reads of each, by id: [`Placement::push_loaded`]),
    /// with room for `n`.
    pub fn start_loading(&mut self, n: usize) {
        self.slots.clear();
        self.slots.reserve(n);
        self.buffers.clear();
    }

    /// Tensor number [`Placement::n_loaded`] is `l`.
    #[inline(always)]
    pub fn push_loaded(&mut self, l: Loaded) {
        let op = u8::try_from(l.op).unwrap_or(OTHER_OP);
        let vsrc_id = l.vsrc.map(SlotId::from);
        let buffer = self.buffers.number(l.buffer);
        self.slots.push(Tracked { data: l.data, bytes: 0, vsrc_id, children: 0, views: 0, buffer, backend: l.backend, op });
    }

    /// The number of tensors loaded.
    pub fn n_loaded(&self) -> usize {
        self.slots.len()
    }

    /// Loaded tensor `i`'s view source is `v` (the loader resolves some
    /// after the others).
    pub fn set_vsrc(&mut self, i: usize, v: Slot) {
        self.slots[i].set_vsrc(v);
    }

    /// Loaded tensor `i` is allocated from backend `b`'s buffer (the loader
    /// gives the input copies theirs after the others).
    pub fn set_backend(&mut self, i: usize, b: BackendIdx) {
        self.slots[i].backend = Some(b);
    }

    /// Room to load `n` tensors without allocating.
    pub fn reserve_tensors(&mut self, n: usize) {
        self.slots.reserve_exact(n.saturating_sub(self.slots.len()));
    }

    /// Tensors `..n` as loaded, with their buffers by number
    /// ([`Placement::buffer_addrs`]): (data, buffer, view source, op). A
    /// plan changes what it tracks of them: valid before it runs.
    pub fn loaded(&self, n: usize) -> impl ExactSizeIterator<Item = (usize, u32, Id, u8)> + Clone + '_ {
        self.slots[..n].iter().map(|t| (t.data, t.buffer, t.vsrc(), t.op))
    }

    /// The address of each buffer number of the tensors loaded.
    pub fn buffer_addrs(&self) -> &[usize] {
        &self.buffers.addrs
    }

    /// The bytes the last plan allocated tensor `id` with (0: none).
    #[inline(always)]
    pub fn allocated(&self, id: Slot) -> usize {
        match self.slots.get(id.index()).map_or(0, |s| s.bytes) {
            BIG => self.big.iter().rev().find(|&&(i, _)| i == id).map_or(0, |&(_, b)| b),
            b => b as usize,
        }
    }

    /// Plan the allocation of `order` over the tensors loaded (see
    /// [`Placement::tensors`]) in `arenas` (their real ends if `bounded`,
    /// else endless). Ok: whether the plan read nothing besides what was
    /// loaded and the probe's logged answers (it may be kept).
    pub fn plan<P: PlaceProbe>(&mut self, order: &Order, arenas: &[ArenaSpec], bounded: bool, probe: &mut P) -> Result<bool, Unplaced> {
        // (the models are kept from one plan to the next, for their memory)
        self.models.truncate(arenas.len());
        self.models.resize_with(arenas.len(), Model::default);
        for (m, a) in self.models.iter_mut().zip(arenas) {
            m.clear_to(&a.free);
            if !bounded {
                m.endless(a.size);
            }
        }
        self.max.clear();
        self.max.resize(arenas.len(), 0);
        self.arena_buf.clear();
        for a in arenas {
            let n = self.buffers.number(a.buffer);
            self.arena_buf.push(n);
        }
        self.big.clear();
        self.steps.clear();
        self.refusal = None;
        self.run(order, arenas, probe)
    }

    /// Give the working memory back (it is as large as the table).
    pub fn release(&mut self) {
        self.slots = Vec::new();
        self.buffers = BufferIds::default();
        self.big = Vec::new();
        self.models = Vec::new();
    }
}

// The walk: ggml-alloc's, over `slots`.
impl Placement {
    #[cold]
    fn refuse(&mut self, why: String) -> Unplaced {
        self.refusal = Some(Refusal::because(why));
        Unplaced::Refused
    }

    fn run<P: PlaceProbe>(&mut self, order: &Order, arenas: &[ArenaSpec], probe: &mut P) -> Result<bool, Unplaced> {
        let mut keep = true;
        // count children and views (initialising views of memory set by hand)
        for &(id, s, e) in &order.entries {
            let n = self.slots[id];
            if let Some(v) = n.vsrc() {
                self.slots[v].views += 1;
                if n.buffer == 0 && n.data != 0 {
                    self.init_view(id, None, probe)?;
                }
            }
            for &q in &order.srcs[s as usize..e as usize] {
                let ps = &mut self.slots[q];
                ps.children += 1;
                if ps.vsrc_id.is_some() && ps.buffer == 0 && ps.data != 0 {
                    self.init_view(q, None, probe)?;
                }
            }
        }
        for &(id, s, e) in &order.entries {
            let srcs = &order.srcs[s as usize..e as usize];
            for &q in srcs {
                if self.slots[q].data == 0 {
                    keep &= self.allocate(q, None, arenas, probe)?;
                }
            }
            if self.slots[id].data == 0 {
                keep &= self.allocate(id, Some(srcs), arenas, probe)?;
            }
            for &q in srcs {
                let ps = &mut self.slots[q];
                ps.children -= 1;
                if ps.children == 0 && ps.views == 0 {
                    let Some(v) = ps.vsrc() else {
                        self.free(q, arenas, probe)?;
                        continue;
                    };
                    let vs = &mut self.slots[v];
                    vs.views -= 1;
                    if vs.views == 0 && vs.children == 0 {
                        self.free(v, arenas, probe)?;
                    }
                }
            }
        }
        Ok(keep)
    }

    /// `init_view`: the view takes its source's buffer and memory.
    #[inline(always)]
    fn init_view<P: PlaceProbe>(&mut self, id: Slot, owner: Id, probe: &mut P) -> Result<(), Unplaced> {
        let i = id;
        if owner.is_some() {
            self.slots[i].vsrc_id = owner.map(SlotId::from);
        }
        let vsrc = self.slots[i].vsrc().expect("a view, or in place in an owner's memory");
        let v = self.slots[vsrc];
        if v.data == 0 {
            let (t, src) = (probe.name(id), probe.name(vsrc));
            return Err(self
                .refuse(format!("view '{t}' of '{src}' cannot be placed: '{src}' has no memory (no data, no backend to allocate it on)")));
        }
        let offs = probe.view_offs(id);
        let s = &mut self.slots[i];
        s.buffer = v.buffer;
        s.data = v.data + offs;
        let b = s.backend;
        self.steps.push(Step::View { id, b, owner });
        Ok(())
    }

    /// `allocate_node` of a tensor without memory: in place in a source's
    /// memory where ggml-alloc would compute it there, else from its
    /// backend's allocator. `srcs`: the tensor's sources, if it is the node
    /// being walked (a source allocated on its own has its sources asked
    /// for, as ggml-alloc reads them). Ok: whether the plan can be kept
    /// (sources asked for are not logged).
    #[inline(always)]
    fn allocate<P: PlaceProbe>(&mut self, id: Slot, srcs: Option<&[Slot]>, arenas: &[ArenaSpec], probe: &mut P) -> Result<bool, Unplaced> {
        let i = id;
        let n = self.slots[i];
        if n.vsrc_id.is_some() {
            self.init_view(id, None, probe)?;
            return Ok(true);
        }
        let Some(b) = n.backend else {
            let t = probe.name(id);
            return Err(self.refuse(format!("tensor '{t}' has no memory and no backend to allocate it on")));
        };
        let arena = &arenas[b];
        let arena_buf = self.arena_buf[b];
        let mut keep = true;
        if can_inplace(self.in_place, i32::from(n.op)) {
            let own;
            let srcs = match srcs {
                Some(s) => s,
                None => {
                    own = probe.sources(id);
                    keep = false;
                    &own
                }
            };
            for &q in srcs {
                let ps = self.slots[q];
                // only memory of this allocator's buffer is reused
                if ps.buffer != arena_buf || ps.data == 0 || ps.children != 1 || ps.views != 0 {
                    continue;
                }
                if !probe.same_layout(id, q) {
                    continue;
                }
                let Some(v) = ps.vsrc() else {
                    self.slots[q].views += 1;
                    self.init_view(id, Some(q), probe)?;
                    return Ok(keep);
                };
                let vs = self.slots[v];
                if vs.views == 1 && vs.children == 0 && vs.data == ps.data {
                    self.slots[v].views += 1;
                    self.init_view(id, Some(v), probe)?;
                    return Ok(keep);
                }
            }
        }
        let bytes = probe.alloc_size(b, id);
        let size = padded(bytes, arena.align);
        let offset = self.models[b].alloc(size).ok_or(Unplaced::TooSmall(b))?;
        let s = &mut self.slots[i];
        s.data = arena.base + offset;
        s.buffer = arena_buf;
        s.bytes = u32::try_from(bytes).unwrap_or(BIG);
        if s.bytes == BIG {
            self.big.push((id, bytes));
        }
        self.max[b] = self.max[b].max(offset + size);
        self.steps.push(Step::Alloc { id, b, offset });
        Ok(keep)
    }

    /// `free_node`: give a tensor's memory back to its allocator, if it is
    /// the allocator's own.
    #[inline(always)]
    fn free<P: PlaceProbe>(&mut self, id: Slot, arenas: &[ArenaSpec], probe: &mut P) -> Result<(), Unplaced> {
        let n = self.slots[id];
        let Some(b) = n.backend else { return Ok(()) };
        let arena = &arenas[b];
        if n.buffer != self.arena_buf[b] {
            return Ok(());
        }
        // (ggml-alloc asks the buffer again; the tensor has not changed
        // since this plan allocated it, so neither has the answer)
        let bytes = if n.bytes != 0 { self.allocated(id) } else { probe.alloc_size(b, id) };
        let size = padded(bytes, arena.align);
        let offset = n.data.wrapping_sub(arena.base);
        if self.models[b].free(offset, size).is_none() {
            return Err(self.refuse(format!(
                "the compute buffer of '{}' has too many free blocks (ggml-alloc's limit is 256)",
                probe.backend_name(b)
            )));
        }
        self.steps.push(Step::Free { id, b });
        Ok(())
    }
}

/// `ggml_op_can_inplace` for the ops in `set` (as two words: a u128 shift
/// costs several instructions on every allocation).
#[inline]
fn can_inplace(set: [u64; 2], op: i32) -> bool {
    let op = op as u32;
    op < 128 && set[(op >> 6) as usize] >> (op & 63) & 1 != 0
}
