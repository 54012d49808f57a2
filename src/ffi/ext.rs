//! Additions beyond the original API, declared in `include/ggml-backend-ext.h`
//! (the two drop-in headers stay exactly the original API). Names and
//! semantics follow later upstream ggml where it has the same capability.

#![allow(non_camel_case_types)]

use crate::prelude::*;

use core::ffi::{c_char, c_int, c_void};

use super::sched_handle::{sched_ref, wsp_ggml_backend_sched_t};
use crate::fatal::fatal;
use crate::ggml::{wsp_ggml_cgraph, wsp_ggml_tensor, EvalCallback, GraphRef, TensorRef};
use crate::graph_copy::{self, wsp_ggml_backend_graph_copy};
use crate::handle::{wsp_ggml_backend_t, BackendRef, FromC};
use crate::sched::Sched;

/// The library's version, Cargo.toml's (`major.minor.patch`): what the
/// header's `WSP_GGML_BACKEND_VERSION_*` macros say (ffi-tests writes them
/// from these constants when it generates the header). Not part of the C API.
/// cbindgen:ignore
#[doc(hidden)]
pub const VERSION: (u32, u32, u32) =
    (parse_u32(env!("CARGO_PKG_VERSION_MAJOR")), parse_u32(env!("CARGO_PKG_VERSION_MINOR")), parse_u32(env!("CARGO_PKG_VERSION_PATCH")));

/// A version number cargo gives as text (digits only), at compile time.
const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    assert!(!b.is_empty(), "empty version number");
    let mut v = 0u32;
    let mut i = 0;
    while i < b.len() {
        assert!(b[i].is_ascii_digit(), "version number with a non-digit");
        v = v * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    v
}

/// The version of the library, as text: `"MAJOR.MINOR.PATCH"` (e.g.
/// `"0.1.0"`), a static string (never freed). The version the program was
/// compiled against is `WSP_GGML_BACKEND_VERSION_STRING` (and
/// `WSP_GGML_BACKEND_VERSION`, `MAJOR * 10000 + MINOR * 100 + PATCH`); this
/// function tells which library the program runs with. Any thread, any time.
#[no_mangle]
pub extern "C" fn wsp_ggml_backend_version() -> *const c_char {
    entry!(wsp_ggml_backend_version, || concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast())
}

/// Evaluation callback: asked (`ask` = true) whether the caller wants to see
/// a node; then called (`ask` = false) with each wanted node once computed.
/// Returning false from the second call stops the compute.
pub type wsp_ggml_backend_sched_eval_callback =
    Option<unsafe extern "C" fn(t: *mut wsp_ggml_tensor, ask: bool, user_data: *mut c_void) -> bool>;

/// Called by `compare_graph_backend` with both results of each node; return
/// false to stop.
pub type wsp_ggml_backend_eval_callback =
    Option<unsafe extern "C" fn(node_index: c_int, t1: *mut wsp_ggml_tensor, t2: *mut wsp_ggml_tensor, user_data: *mut c_void) -> bool>;

/// One split of the last split graph, and what its last compute copied.
#[repr(C)]
pub struct wsp_ggml_backend_sched_split_stats {
    pub backend: wsp_ggml_backend_t,
    /// first node index of the split in the graph
    pub i_start: c_int,
    /// one past the last node index
    pub i_end: c_int,
    /// distinct tensors copied into this split
    pub n_inputs: c_int,
    /// bytes copied into this split during the last compute
    pub bytes_copied: usize,
}

/// What the last compute did on one backend.
#[repr(C)]
pub struct wsp_ggml_backend_sched_backend_stats {
    /// splits computed on this backend
    pub n_splits: c_int,
    /// input copies made into this backend
    pub n_copies: c_int,
    /// bytes copied into this backend
    pub bytes_copied: usize,
    /// microseconds spent copying inputs to this backend
    pub copy_us: u64,
    /// microseconds spent in this backend's graph_compute
    pub compute_us: u64,
}

/// Set (or clear, with NULL) the evaluation callback of the scheduler.
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `callback`, if set, is safe to call with `user_data` until it is replaced.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_set_eval_callback(
    sched: wsp_ggml_backend_sched_t,
    callback: wsp_ggml_backend_sched_eval_callback,
    user_data: *mut c_void,
) {
    // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
    entry!(wsp_ggml_backend_sched_set_eval_callback, |func| unsafe { sched_ref(sched, func) }
        // SAFETY: `callback` is safe to call with `user_data` until replaced
        // (# Safety above).
        .with_mut(func, |s| s.set_eval_callback(callback.map(|f| unsafe { EvalCallback::new(f, user_data) }))))
}

/// Number of splits of the last split graph (init_measure, reserve or compute).
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_n_splits(sched: wsp_ggml_backend_sched_t) -> c_int {
    // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
    entry!(wsp_ggml_backend_sched_get_n_splits, |func| unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.n_splits() as c_int))
}

/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_n_backends(sched: wsp_ggml_backend_sched_t) -> c_int {
    // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
    entry!(wsp_ggml_backend_sched_get_n_backends, |func| unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.n_backends() as c_int))
}

/// The backend at priority index `i` (aborts if out of range).
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_backend(sched: wsp_ggml_backend_sched_t, i: c_int) -> wsp_ggml_backend_t {
    entry!(wsp_ggml_backend_sched_get_backend, |func| {
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        let (b, n) =
            unsafe { sched_ref(sched, func) }.with_ref(func, |s| (usize::try_from(i).ok().and_then(|i| s.backend(i)), s.n_backends()));
        b.unwrap_or_else(|| fatal(func, &format!("argument 'i' ({i}) is out of range (0..{n})"))).as_ptr()
    })
}

/// The backend `node` was assigned to in the last split graph, or NULL.
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `node` is a live ggml tensor.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_tensor_backend(
    sched: wsp_ggml_backend_sched_t,
    node: *mut wsp_ggml_tensor,
) -> wsp_ggml_backend_t {
    entry!(wsp_ggml_backend_sched_get_tensor_backend, |func| {
        // SAFETY: `node` is live for the call (# Safety above).
        let node = unsafe { TensorRef::from_c(node, func, "node") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.tensor_backend(node)).map_or(core::ptr::null_mut(), BackendRef::as_ptr)
    })
}

/// Size of the scheduler's compute buffer for `backend`.
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `backend` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_buffer_size(sched: wsp_ggml_backend_sched_t, backend: wsp_ggml_backend_t) -> usize {
    entry!(wsp_ggml_backend_sched_get_buffer_size, |func| {
        // SAFETY: `backend` is live for the call (# Safety above).
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.buffer_size(backend, func))
    })
}

/// Forget set_node_backend assignments and the last split graph.
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_reset(sched: wsp_ggml_backend_sched_t) {
    // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
    entry!(wsp_ggml_backend_sched_reset, |func| unsafe { sched_ref(sched, func) }.with_mut(func, Sched::reset))
}

/// Measure `graph` and grow (never shrink) the compute buffers so it fits.
/// Before init_measure it is init_measure.
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `graph` is a live graph whose node and leaf arrays hold live tensors.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_reserve(sched: wsp_ggml_backend_sched_t, graph: *mut wsp_ggml_cgraph) {
    entry!(wsp_ggml_backend_sched_reserve, |func| {
        // SAFETY: `graph` is live for the call (# Safety above).
        let graph = unsafe { GraphRef::from_c(graph, func, "graph") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        unsafe { sched_ref(sched, func) }.with_mut(func, |s| s.reserve(graph))
    })
}

/// Split `i_split` of the last split graph; false if out of range.
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `stats` points to writable storage for one struct.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_split_stats(
    sched: wsp_ggml_backend_sched_t,
    i_split: c_int,
    stats: *mut wsp_ggml_backend_sched_split_stats,
) -> bool {
    entry!(wsp_ggml_backend_sched_get_split_stats, |func| {
        if stats.is_null() {
            fatal(func, "argument 'stats' is NULL");
        }
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        let info = unsafe { sched_ref(sched, func) }.with_ref(func, |s| usize::try_from(i_split).ok().and_then(|i| s.split_info(i)));
        let Some((backend, i_start, i_end, n_inputs, st)) = info else {
            return false;
        };
        let out = wsp_ggml_backend_sched_split_stats {
            backend: backend.as_ptr(),
            i_start: i_start as c_int,
            i_end: i_end as c_int,
            n_inputs: n_inputs as c_int,
            bytes_copied: st.bytes_copied,
        };
        // SAFETY: non-NULL pointer to caller-owned storage (API contract).
        unsafe { stats.write(out) };
        true
    })
}

/// What the last compute did on `backend`; false if it is not in the scheduler.
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `backend` is a live backend, its interface as ggml-backend-impl.h describes; `stats` points to writable storage for one struct.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_backend_stats(
    sched: wsp_ggml_backend_sched_t,
    backend: wsp_ggml_backend_t,
    stats: *mut wsp_ggml_backend_sched_backend_stats,
) -> bool {
    entry!(wsp_ggml_backend_sched_get_backend_stats, |func| {
        if stats.is_null() {
            fatal(func, "argument 'stats' is NULL");
        }
        // SAFETY: `backend` is live for the call (# Safety above).
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        let Some(st) = unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.backend_stats(backend)) else { return false };
        let out = wsp_ggml_backend_sched_backend_stats {
            n_splits: st.n_splits as c_int,
            n_copies: st.n_copies as c_int,
            bytes_copied: st.bytes_copied,
            copy_us: st.copy_ns / 1000,
            compute_us: st.compute_ns / 1000,
        };
        // SAFETY: non-NULL pointer to caller-owned storage (API contract).
        unsafe { stats.write(out) };
        true
    })
}

/// Abort callback of the CPU backend: checked by ggml between nodes; returning
/// true stops the compute.
///
/// # Safety
/// `backend_cpu` is a live backend, its interface as ggml-backend-impl.h describes; `abort_callback`, if set, is safe to call with `abort_callback_data` until it is replaced.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_cpu_set_abort_callback(
    backend_cpu: wsp_ggml_backend_t,
    abort_callback: Option<unsafe extern "C" fn(data: *mut c_void) -> bool>,
    abort_callback_data: *mut c_void,
) {
    entry!(wsp_ggml_backend_cpu_set_abort_callback, |func| {
        // SAFETY: `backend_cpu` is live for the call (# Safety above).
        let backend_cpu = unsafe { BackendRef::from_c(backend_cpu, func, "backend_cpu") };
        crate::cpu::set_abort_callback(backend_cpu, abort_callback, abort_callback_data)
    })
}

/// Copy an allocated graph to `backend` (data of allocated tensors copied,
/// views re-created). Free with wsp_ggml_backend_graph_copy_free.
///
/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes; `graph` is a live graph whose node and leaf arrays hold live tensors.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_graph_copy(
    backend: wsp_ggml_backend_t,
    graph: *mut wsp_ggml_cgraph,
) -> wsp_ggml_backend_graph_copy {
    entry!(wsp_ggml_backend_graph_copy, |func| {
        // SAFETY: `backend` and `graph` are live for the call (# Safety above).
        let (backend, graph) = unsafe { (BackendRef::from_c(backend, func, "backend"), GraphRef::from_c(graph, func, "graph")) };
        graph_copy::graph_copy(backend, graph).into_c()
    })
}

/// # Safety
/// `copy` was returned by `wsp_ggml_backend_graph_copy` and is not freed yet.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_graph_copy_free(copy: wsp_ggml_backend_graph_copy) {
    entry!(wsp_ggml_backend_graph_copy_free, || {
        // SAFETY: a copy made by graph_copy, handed over to be freed once (# Safety above).
        unsafe { graph_copy::GraphCopy::from_c(copy) }.free()
    })
}

/// `graph` is allocated on `backend1`: copy it to `backend2`, compute both
/// node by node and call `callback` with both results of each non-view node.
///
/// # Safety
/// `backend1` is a live backend, its interface as ggml-backend-impl.h describes; `backend2` is a live backend, its interface as ggml-backend-impl.h describes; `graph` is a live graph whose node and leaf arrays hold live tensors; `callback`, if set, is safe to call with `user_data` during the call.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_compare_graph_backend(
    backend1: wsp_ggml_backend_t,
    backend2: wsp_ggml_backend_t,
    graph: *mut wsp_ggml_cgraph,
    callback: wsp_ggml_backend_eval_callback,
    user_data: *mut c_void,
) {
    entry!(wsp_ggml_backend_compare_graph_backend, |func| {
        // SAFETY: `backend1` is live for the call (# Safety above).
        let b1 = unsafe { BackendRef::from_c(backend1, func, "backend1") };
        // SAFETY: `backend2` is live for the call (# Safety above).
        let b2 = unsafe { BackendRef::from_c(backend2, func, "backend2") };
        // SAFETY: `graph` is live for the call (# Safety above).
        let g = unsafe { GraphRef::from_c(graph, func, "graph") };
        let cb = callback.unwrap_or_else(|| fatal(func, "argument 'callback' is NULL"));
        // SAFETY: the graph is allocated on `backend1`; `callback` is safe to
        // call with `user_data` (# Safety above).
        unsafe { graph_copy::compare_graph_backend(b1, b2, g, cb, user_data) }
    })
}
