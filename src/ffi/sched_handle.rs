//! The scheduler handle C holds: the opaque struct of the headers and the
//! `SchedRef` the exports (mod.rs, ext.rs) make from it.

#![allow(non_camel_case_types)]

use crate::handle::{from_c, FromC};
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

/// The scheduler behind `s`, aborting if it is NULL.
///
/// # Safety
/// As [`SchedRef::new`], for the rest of the call.
pub(super) unsafe fn sched_ref(s: wsp_ggml_backend_sched_t, func: &str) -> SchedRef {
    // SAFETY: the caller's contract.
    unsafe { SchedRef::from_c(s, func, "sched") }
}
