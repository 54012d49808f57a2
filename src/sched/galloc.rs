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

use core::ffi::c_void;
use std::collections::HashMap;

use super::table::{Table, NO_BACKEND};
use super::talloc_model::Model;
use super::NONE;
use crate::buffer::{wsp_ggml_backend_buffer, BufferRef};
use crate::fatal::fatal;
use crate::ggml::{wsp_ggml_tensor, TensorRef};

/// One compute buffer as an allocation sees it.
#[derive(Clone, Debug)]
pub(super) struct Arena {
    pub buffer: BufferRef,
    /// The buffer's base address and alignment (as its allocator has them).
    pub base: usize,
    pub align: usize,
    /// A measure allocator's buffer: no `init_tensor`/`free_tensor` calls.
    pub measure: bool,
    /// The allocator's free blocks (offset from `base`, size), by address:
    /// what the caller left (`sched_get_tallocr` allocations).
    pub free: Vec<(usize, usize)>,
}

impl Arena {
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
    /// `ggml_tallocr_alloc` at `offset` in the tensor's backend's buffer.
    Alloc { id: u32, offset: usize },
    /// `init_view`; `owner != NONE`: the node is computed in place in the
    /// memory of `owner`, which becomes its view source.
    View { id: u32, owner: u32 },
    /// `ggml_tallocr_free_tensor` of a tensor of its backend's buffer.
    Free { id: u32 },
}

/// The node order ggml-alloc walks: each split's input copies, then its
/// nodes; each entry a tensor id and its sources' ids (up to the first NULL).
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

    pub fn push(&mut self, id: u32, srcs: impl IntoIterator<Item = u32>) {
        let start = self.srcs.len() as u32;
        self.srcs.extend(srcs);
        self.entries.push((id, start, self.srcs.len() as u32));
    }
}

/// A plan that does not fit: the backend whose buffer is too small.
pub(super) struct TooSmall(pub u16);

/// The allocation's working state, kept between computes for its memory.
#[derive(Default)]
pub(super) struct Galloc {
    /// Per tensor id (table slot, or an extra tensor past the table):
    ptr: Vec<*mut wsp_ggml_tensor>,
    backend: Vec<u16>,
    data: Vec<usize>,
    buffer: Vec<*mut wsp_ggml_backend_buffer>,
    vsrc: Vec<u32>,
    children: Vec<i32>,
    views: Vec<i32>,
    /// Tensors met that the table does not hold (ids from `ptr.len()` on).
    extra: HashMap<usize, u32>,
    steps: Vec<Step>,
    models: Vec<Model>,
    /// How far into each buffer the plan went (ggml-alloc's `max_size`).
    pub max: Vec<usize>,
}

const fn padded(size: usize, align: usize) -> usize {
    size.div_ceil(align).saturating_mul(align)
}

impl Galloc {
    /// Plan the allocation of `order` in `arenas` (their real ends if
    /// `bounded`, else endless). Err: the first backend whose buffer is too
    /// small (the plan stops there).
    pub fn plan(&mut self, table: &Table, order: &Order, arenas: &[Arena], bounded: bool, func: &str) -> Result<(), TooSmall> {
        self.load(table);
        self.models = arenas.iter().map(|a| Model::from_blocks(if bounded { a.free.clone() } else { a.endless() })).collect();
        self.max = vec![0; arenas.len()];
        self.steps.clear();
        // count children and views (initialising views of memory set by hand)
        for &(id, s, e) in &order.entries {
            if self.vsrc[id as usize] != NONE {
                let v = self.vsrc[id as usize];
                self.views[v as usize] += 1;
                if self.buffer[id as usize].is_null() && self.data[id as usize] != 0 {
                    self.init_view(id, NONE, func);
                }
            }
            for &p in &order.srcs[s as usize..e as usize] {
                self.children[p as usize] += 1;
                if self.vsrc[p as usize] != NONE && self.buffer[p as usize].is_null() && self.data[p as usize] != 0 {
                    self.init_view(p, NONE, func);
                }
            }
        }
        for &(id, s, e) in &order.entries {
            let srcs = &order.srcs[s as usize..e as usize];
            for &p in srcs {
                self.allocate(table, p, None, arenas, func).map_err(|b| TooSmall(b))?;
            }
            self.allocate(table, id, Some(srcs), arenas, func).map_err(|b| TooSmall(b))?;
            for &p in srcs {
                let pu = p as usize;
                self.children[pu] -= 1;
                if self.children[pu] == 0 && self.views[pu] == 0 {
                    let v = self.vsrc[pu];
                    if v != NONE {
                        self.views[v as usize] -= 1;
                        if self.views[v as usize] == 0 && self.children[v as usize] == 0 {
                            self.free(v, arenas, func);
                        }
                    } else {
                        self.free(p, arenas, func);
                    }
                }
            }
        }
        Ok(())
    }

    /// Set the tensors' fields as planned and call the buffers' tensor
    /// callbacks in ggml-alloc's order. `arenas` as for the plan.
    pub fn apply(&self, arenas: &[Arena]) {
        for &step in &self.steps {
            match step {
                Step::Alloc { id, offset } => {
                    let t = self.tensor(id);
                    let a = &arenas[self.backend[id as usize] as usize];
                    t.place(a.buffer.as_ptr(), (a.base + offset) as *mut c_void);
                    if !a.measure {
                        a.buffer.init_tensor(t);
                    }
                }
                Step::View { id, owner } => {
                    let t = self.tensor(id);
                    if owner != NONE {
                        t.set_view_src(self.tensor(owner));
                    }
                    let v = t.view_src().expect("planned as a view");
                    t.init_view_from_src(v);
                    if let Some(a) = arenas.get(self.backend[id as usize] as usize).filter(|a| !a.measure) {
                        a.buffer.init_tensor(t);
                    }
                }
                Step::Free { id } => {
                    let a = &arenas[self.backend[id as usize] as usize];
                    if !a.measure {
                        a.buffer.free_tensor(self.tensor(id));
                    }
                }
            }
        }
    }

    fn tensor(&self, id: u32) -> TensorRef {
        TensorRef::new(self.ptr[id as usize]).expect("a planned tensor")
    }

    /// Read what the plan needs of every tensor in the table.
    fn load(&mut self, table: &Table) {
        let keys = table.keys();
        let n = keys.len();
        self.extra.clear();
        self.ptr.clear();
        self.ptr.extend_from_slice(keys);
        self.backend.clear();
        self.backend.extend(table.info.iter().map(|i| i.assign));
        self.children.clear();
        self.children.resize(n, 0);
        self.views.clear();
        self.views.resize(n, 0);
        self.data.clear();
        self.data.resize(n, 0);
        self.buffer.clear();
        self.buffer.resize(n, core::ptr::null_mut());
        self.vsrc.clear();
        self.vsrc.resize(n, NONE);
        for (i, &k) in keys.iter().enumerate() {
            let Some(t) = TensorRef::new(k) else { continue };
            let g = t.get();
            self.data[i] = g.data as usize;
            self.buffer[i] = g.buffer;
            if !g.view_src.is_null() {
                self.vsrc[i] = self.id_of(table, g.view_src);
            }
        }
    }

    /// The id of a tensor met through a view source: its table slot, or an
    /// extra id (no backend) if the table does not hold it.
    fn id_of(&mut self, table: &Table, t: *mut wsp_ggml_tensor) -> u32 {
        if let Some(slot) = table.find(t) {
            return slot;
        }
        if let Some(&id) = self.extra.get(&(t as usize)) {
            return id;
        }
        let id = self.ptr.len() as u32;
        self.extra.insert(t as usize, id);
        self.ptr.push(t);
        self.backend.push(NO_BACKEND);
        self.children.push(0);
        self.views.push(0);
        // a view source of a tensor of the graph: live for the call
        let (data, buffer, view_src) = {
            let g = TensorRef::new(t).expect("not NULL");
            let g = g.get();
            (g.data as usize, g.buffer, g.view_src)
        };
        self.data.push(data);
        self.buffer.push(buffer);
        self.vsrc.push(NONE);
        if !view_src.is_null() {
            let v = self.id_of(table, view_src);
            self.vsrc[id as usize] = v;
        }
        id
    }

    /// `init_view`: the view takes its source's buffer and memory.
    fn init_view(&mut self, id: u32, owner: u32, func: &str) {
        let i = id as usize;
        if owner != NONE {
            self.vsrc[i] = owner;
        }
        let v = self.vsrc[i] as usize;
        if self.data[v] == 0 {
            let t = self.tensor(id);
            let src = self.tensor(v as u32);
            fatal(
                func,
                &format!("view '{}' of '{}' cannot be placed: '{}' has no memory (no data, no backend to allocate it on)", t.name_lossy(), src.name_lossy(), src.name_lossy()),
            );
        }
        self.buffer[i] = self.buffer[v];
        self.data[i] = self.data[v] + self.tensor(id).get().view_offs;
        self.steps.push(Step::View { id, owner });
    }

    /// `allocate_node`: memory for a tensor without any, in place in a
    /// source's memory where ggml-alloc would compute it there. `srcs`: the
    /// tensor's sources, if it is the node being walked (a source allocated
    /// on its own has its sources read here, as ggml-alloc reads them).
    /// Err: the backend whose buffer is too small.
    fn allocate(&mut self, table: &Table, id: u32, srcs: Option<&[u32]>, arenas: &[Arena], func: &str) -> Result<(), u16> {
        let i = id as usize;
        if self.data[i] != 0 {
            return Ok(());
        }
        if self.vsrc[i] != NONE {
            self.init_view(id, NONE, func);
            return Ok(());
        }
        let b = self.backend[i];
        let Some(arena) = arenas.get(b as usize) else {
            fatal(func, &format!("tensor '{}' has no memory and no backend to allocate it on", self.tensor(id).name_lossy()));
        };
        let t = self.tensor(id);
        if can_inplace(t.get().op) {
            let own;
            let srcs = match srcs {
                Some(s) => s,
                None => {
                    own = t.srcs().map(|(_, s)| self.id_of(table, s.as_ptr())).collect::<Vec<u32>>();
                    &own
                }
            };
            for &p in srcs {
                let pu = p as usize;
                // only memory of this allocator's buffer is reused
                if self.buffer[pu] != arena.buffer.as_ptr() {
                    continue;
                }
                if self.data[pu] != 0 && self.children[pu] == 1 && self.views[pu] == 0 && t.same_layout(self.tensor(p)) {
                    let v = self.vsrc[pu];
                    if v == NONE {
                        self.views[pu] += 1;
                        self.init_view(id, p, func);
                        return Ok(());
                    }
                    let vu = v as usize;
                    if self.views[vu] == 1 && self.children[vu] == 0 && self.data[vu] == self.data[pu] {
                        self.views[vu] += 1;
                        self.init_view(id, v, func);
                        return Ok(());
                    }
                }
            }
        }
        let size = padded(arena.buffer.alloc_size(t), arena.align.max(1));
        let offset = self.models[b as usize].alloc(size).ok_or(b)?;
        self.data[i] = arena.base + offset;
        self.buffer[i] = arena.buffer.as_ptr();
        self.max[b as usize] = self.max[b as usize].max(offset + size);
        self.steps.push(Step::Alloc { id, offset });
        Ok(())
    }

    /// `free_node`: give a tensor's memory back to its allocator, if it is
    /// the allocator's own.
    fn free(&mut self, id: u32, arenas: &[Arena], func: &str) {
        let i = id as usize;
        let Some(arena) = arenas.get(self.backend[i] as usize) else { return };
        if self.buffer[i] != arena.buffer.as_ptr() {
            return;
        }
        let t = self.tensor(id);
        let size = padded(arena.buffer.alloc_size(t), arena.align.max(1));
        let offset = self.data[i].wrapping_sub(arena.base);
        if self.models[self.backend[i] as usize].free(offset, size).is_none() {
            fatal(func, &format!("the compute buffer of backend {} has too many free blocks (ggml-alloc's limit is 256)", self.backend[i]));
        }
        self.steps.push(Step::Free { id });
    }
}

/// `ggml_op_can_inplace`.
fn can_inplace(op: core::ffi::c_int) -> bool {
    crate::ggml::WSP_GGML_OPS_IN_PLACE.contains(&op)
}
