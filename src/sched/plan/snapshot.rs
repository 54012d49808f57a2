//! What the planner reads and what it decides, as plain data: per slot
//! what registration read ([`SlotInfo`]), the graph in slots
//! ([`GraphSlots`]), and the plan ([`SplitPlan`]: splits, their inputs,
//! the copies they need, the graph sources to redirect). No tensor, no
//! address: slots and backend indices only.

use crate::prelude::*;

use crate::ptrmap::PtrMap;
use crate::sched::ids::{BackendIdx, CopyIdx, Loc, PackedLoc, Rule, Slot, SlotId, SplitIdx};

/// What a compute knows about one tensor, next to its table key: what the
/// passes read of it (`loc`, `vsrc`, `flags`, read once when it is
/// registered) and what they decide (`assign`, `rule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::sched) struct SlotInfo {
    /// The backend the tensor is assigned to.
    pub assign: Option<BackendIdx>,
    /// Where its memory is (see [`SlotInfo::loc`]).
    pub packed_loc: PackedLoc,
    pub rule: Rule,
    /// [`SlotInfo::HAS_DATA`], [`SlotInfo::VIEW_OP`], [`SlotInfo::COMPUTED`].
    pub flags: u8,
    /// Slot of its view source (registered with it).
    pub vsrc: Option<SlotId>,
}

// The table holds one per tensor: 12 bytes.
const _: () = assert!(core::mem::size_of::<SlotInfo>() == 12);

/// The slots as the passes get them: what registration read of each, to
/// read, and its backend and rule, the one thing they write
/// ([`Decisions::decide`]). No `&mut SlotInfo` is handed out, so the passes
/// cannot change what registration read.
pub(in crate::sched) struct Decisions<'a>(&'a mut [SlotInfo]);

impl<'a> Decisions<'a> {
    /// The passes' view of `slots`.
    pub fn new(slots: &'a mut [SlotInfo]) -> Self {
        Decisions(slots)
    }

    /// Tensor `slot` goes to `backend`, by `rule`.
    #[inline]
    pub fn decide(&mut self, slot: Slot, backend: BackendIdx, rule: Rule) {
        let info = &mut self.0[slot];
        info.assign = Some(backend);
        info.rule = rule;
    }

    /// Every slot, in order.
    pub fn iter(&self) -> core::slice::Iter<'_, SlotInfo> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl core::ops::Index<Slot> for Decisions<'_> {
    type Output = SlotInfo;

    #[inline(always)]
    fn index(&self, slot: Slot) -> &SlotInfo {
        &self.0[slot]
    }
}

impl SlotInfo {
    /// A free slot.
    pub const EMPTY: SlotInfo = SlotInfo { assign: None, packed_loc: PackedLoc::nowhere(), rule: Rule::Unset, flags: 0, vsrc: None };
    /// `data` is set.
    pub const HAS_DATA: u8 = 1;
    /// Its op is a view op (RESHAPE, VIEW, PERMUTE, TRANSPOSE).
    pub const VIEW_OP: u8 = 2;
    /// Its op computes something (not NONE, not a view op).
    pub const COMPUTED: u8 = 4;

    /// A tensor registration read: in `loc`, with `flags`; no view source
    /// (set when that is registered) and no backend yet.
    #[inline]
    pub fn registered(loc: Loc, flags: u8) -> SlotInfo {
        SlotInfo { packed_loc: loc.into(), flags, ..SlotInfo::EMPTY }
    }

    /// Where the tensor's memory is: the backend of its buffer.
    #[inline]
    pub fn loc(&self) -> Loc {
        self.packed_loc.get()
    }

    #[inline]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// The slot of its view source.
    #[inline]
    pub fn view_src(&self) -> Option<Slot> {
        self.vsrc.map(SlotId::slot)
    }
}

impl NodeInfo {
    /// The slot of its view source.
    #[inline]
    pub fn view_src(&self) -> Option<Slot> {
        self.vsrc.map(SlotId::slot)
    }
}

/// One graph node: its slot, its view source's slot, and where its
/// sources' slots end in [`GraphSlots::srcs`] (they start where the
/// previous node's end; ggml stops at the first NULL source). Whether it is
/// a view op is in its slot's flags.
#[derive(Clone, Copy, Debug)]
pub(in crate::sched) struct NodeInfo {
    pub slot: Slot,
    pub vsrc: Option<SlotId>,
    pub srcs_end: u32,
}

/// The graph's structure in table slots, read once by registration: the
/// passes read the graph only through it.
#[derive(Default)]
pub(in crate::sched) struct GraphSlots {
    /// (slot, view source slot) of every graph leaf.
    pub leafs: Vec<(Slot, Option<SlotId>)>,
    pub nodes: Vec<NodeInfo>,
    /// Source slots of all nodes, back to back (see NodeInfo).
    pub srcs: Vec<Slot>,
}

impl GraphSlots {
    /// Sources of node `i` (their positions in `srcs`).
    #[inline]
    pub fn node_srcs(&self, i: usize) -> core::ops::Range<usize> {
        let start = if i == 0 { 0 } else { self.nodes[i - 1].srcs_end as usize };
        start..self.nodes[i].srcs_end as usize
    }

    /// Forget the graph (not the memory).
    pub fn clear(&mut self) {
        self.leafs.clear();
        self.nodes.clear();
        self.srcs.clear();
    }
}

/// A graph the plan cannot be made for, with the reason (the driver aborts
/// with it, naming the function called). Boxed: two words, so that the
/// passes' `Result`s come back in registers.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::sched) struct Refusal(pub Box<str>);

impl Refusal {
    #[cold]
    pub fn because(why: String) -> Refusal {
        Refusal(why.into_boxed_str())
    }
}

/// A run of consecutive graph nodes computed on one backend.
#[derive(Clone, Debug)]
pub(in crate::sched) struct Split {
    pub backend: BackendIdx,
    pub i_start: usize,
    pub i_end: usize,
    /// Range in [`SplitPlan::inputs`].
    pub inputs: core::ops::Range<usize>,
}

/// An input copy in use: the tensor it copies, on which backend, and the
/// last split that listed it as an input.
#[derive(Clone, Copy, Debug)]
pub(in crate::sched) struct CopyOf {
    pub src: Slot,
    pub backend: BackendIdx,
    /// The last split that listed it as an input (dedupes a split's inputs:
    /// all of them are copies to the split's backend, so one per copy suffices).
    pub last_split: Option<SplitIdx>,
}

/// A graph `src` slot to redirect to an input copy during the compute.
#[derive(Clone, Copy, Debug)]
pub(in crate::sched) struct Patch {
    /// The node's slot, and which of its sources.
    pub node: Slot,
    pub j: usize,
    /// Index of that source in [`GraphSlots::srcs`] (the source's slot is there).
    pub k: u32,
    pub copy: CopyIdx,
}

/// What the passes decide besides each slot's backend (`SlotInfo::assign`):
/// the splits, their inputs, the copies they need and the sources to
/// redirect to them.
#[derive(Default)]
pub(in crate::sched) struct SplitPlan {
    pub splits: Vec<Split>,
    /// (input tensor slot, copy index) for every split, in split order.
    pub inputs: Vec<(Slot, CopyIdx)>,
    /// What each copy in use copies (indexed like the scheduler's copies).
    pub copy_of: Vec<CopyOf>,
    /// Index in `copy_of` of the copy of (tensor slot, backend).
    pub copy_index: PtrMap,
    /// The graph sources to redirect to copies, in graph order.
    pub patches: Vec<Patch>,
    /// The backend of the last first split that a node without a view
    /// source decided. The original keeps its first split's backend from
    /// one plan to the next and sets it only from such a node, so a graph
    /// whose every node has a view source gets the last one's: kept across
    /// `clear` for that.
    pub first_backend: Option<BackendIdx>,
}

impl SplitPlan {
    /// Forget the plan (not the memory, nor `first_backend`).
    pub fn clear(&mut self) {
        self.splits.clear();
        self.inputs.clear();
        self.copy_of.clear();
        self.copy_index.clear(0);
        self.patches.clear();
    }
}
