//! The scheduler handle C holds: the opaque struct of the headers and the
//! `SchedRef` the exports (mod.rs, ext.rs) make from it.

#![allow(non_camel_case_types)]

use crate::handle::{from_c, FromC};
use crate::prelude::*;
use crate::sched::SchedCell;

/// Opaque scheduler handle (`struct wsp_ggml_backend_sched`).
pub struct wsp_ggml_backend_sched {
    _private: [u8; 0],
}
pub type wsp_ggml_backend_sched_t = *mut wsp_ggml_backend_sched;

/// A scheduler handle from C: the `Box<SchedCell>` that `sched_new` made.
/// Every borrow of the scheduler goes through the cell, which aborts on a
/// call from inside one of its callbacks that would conflict with the work
/// in progress.
#[derive(Clone, Copy)]
pub(crate) struct SchedRef(core::ptr::NonNull<SchedCell>);

impl SchedRef {
    /// The handle on `p`; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or a scheduler made by `wsp_ggml_backend_sched_new` and
    /// not freed, for as long as the handle or a copy of it is used.
    unsafe fn new(p: *mut wsp_ggml_backend_sched) -> Option<Self> {
        core::ptr::NonNull::new(p.cast::<SchedCell>()).map(SchedRef)
    }
}

impl core::ops::Deref for SchedRef {
    type Target = SchedCell;
    fn deref(&self) -> &SchedCell {
        // SAFETY: the handle's invariant (`new`); the cell is only ever shared.
        unsafe { self.0.as_ref() }
    }
}

from_c!(SchedRef => wsp_ggml_backend_sched);

/// The scheduler C holds, owned: made by `sched_new` (then handed to C by
/// `into_raw`), or handed back to `sched_free`. Not `Copy`: freed once, when
/// it drops.
pub(crate) struct OwnedSched(core::ptr::NonNull<SchedCell>);

crate::handle::assert_owning!(OwnedSched);

impl OwnedSched {
    pub(crate) fn new(cell: Box<SchedCell>) -> Self {
        OwnedSched(core::ptr::NonNull::from(Box::leak(cell)))
    }
    /// Take ownership of `p`; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or a scheduler made by `wsp_ggml_backend_sched_new`, not
    /// freed, handed over: nothing uses it after this owner frees it.
    pub(crate) unsafe fn from_raw(p: *mut wsp_ggml_backend_sched) -> Option<Self> {
        core::ptr::NonNull::new(p.cast::<SchedCell>()).map(OwnedSched)
    }
    pub(crate) fn into_raw(self) -> *mut wsp_ggml_backend_sched {
        core::mem::ManuallyDrop::new(self).0.as_ptr().cast()
    }
    /// Drop the scheduler, unless it is in use (a call from one of its
    /// callbacks during a compute aborts naming `func`, and frees nothing).
    pub(crate) fn free(self, func: &str) {
        // (not dropped if the check stops the call: the scheduler is in use)
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: live (from_raw/new); only shared borrows of a cell exist.
        unsafe { this.0.as_ref() }.check_freeable(func);
        drop(core::mem::ManuallyDrop::into_inner(this));
    }
}

impl Drop for OwnedSched {
    fn drop(&mut self) {
        // SAFETY: made by Box::leak (new), ours alone; nothing uses it after
        // (from_raw's contract), and `free` checked it is idle.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// The scheduler behind `s`, aborting if it is NULL.
///
/// # Safety
/// As [`SchedRef::new`], for the rest of the call.
pub(super) unsafe fn sched_ref(s: wsp_ggml_backend_sched_t, func: &str) -> SchedRef {
    // SAFETY: the caller's contract.
    unsafe { SchedRef::from_c(s, func, "sched") }
}
