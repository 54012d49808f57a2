//! Additions beyond the original API, declared in `include/ggml-backend-ext.h`
//! (the two drop-in headers stay exactly the original API). Names and
//! semantics follow later upstream ggml where it has the same capability.

#![allow(non_camel_case_types)]

use crate::prelude::*;

use core::ffi::{c_char, c_int, c_void};

use super::sched_handle::{sched_ref, wsp_ggml_backend_sched_t};
use crate::fatal::fatal;
use crate::ggml::{wsp_ggml_cgraph, wsp_ggml_tensor, EvalCallback, GraphRef, TensorRef};
use crate::graph_copy;
use crate::handle::{wsp_ggml_backend_graph_copy, wsp_ggml_backend_t, AbortCallback, BackendRef, CompareCallback, FromC, GraphCopy};
use crate::platform::wsp_ggml_log_callback;
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

/// Returns the version of the library the program runs with, as the string
/// "MAJOR.MINOR.PATCH" (for example "0.1.0").
///
/// The version the program was compiled against is in the macros of this
/// header: WSP_GGML_BACKEND_VERSION_STRING, and WSP_GGML_BACKEND_VERSION, which
/// is MAJOR * 10000 + MINOR * 100 + PATCH. Compare them with this function's
/// result to detect a library that differs from the header.
///
/// Returns: a static NUL-terminated string owned by the library. The caller
/// must not modify or free it.
///
/// Errors: none. This function has no parameters, allocates no memory and may
/// be called from any thread at any time.
#[no_mangle]
pub extern "C" fn wsp_ggml_backend_version() -> *const c_char {
    entry!(wsp_ggml_backend_version, || concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast())
}

/// Sets the function that receives every message of this library, in the
/// style of upstream ggml's ggml_log_set, or gives the messages back to their
/// default destination (log_callback NULL).
///
/// A message is one line, "wsp_ggml_backend: <function>: <what is wrong>" for
/// misuse and failures, or what WSP_GGML_SCHED_DEBUG asks the scheduler to
/// print (one line per node; a blank line and the split's line per split). log_callback(level, text, user_data) receives it with text ending in
/// a newline, NUL-terminated and valid only during the call, and level one of
/// ggml.h's enum wsp_ggml_log_level: WSP_GGML_LOG_LEVEL_ERROR for misuse, out of
/// memory and internal errors (the process then aborts),
/// WSP_GGML_LOG_LEVEL_WARN for an allocation that failed in a function that
/// then returns NULL, WSP_GGML_LOG_LEVEL_INFO for the scheduler's debug
/// output. Messages are built without allocating memory. When the
/// message reports an error that aborts the process, the callback is called
/// first; after it returns, the library flushes C's output streams
/// (fflush(NULL)), on Android sets the message as the abort message of the
/// crash report, and aborts.
///
/// Default destination (no callback): on Android, logcat (tag
/// "wsp_ggml_backend", through liblog's __android_log_write, looked up at run
/// time: nothing is added to what the app links), or stderr where liblog is
/// not loaded; elsewhere, stderr.
///
/// Parameters:
///   log_callback  the callback, or NULL for the default destination.
///   user_data     passed to every call of log_callback; the library never
///                 reads it.
///
/// Ownership: the library keeps log_callback and user_data until they are
/// replaced; it never frees user_data.
///
/// Errors: none. It allocates no memory.
///
/// The setting is global to the process. Set it before other threads use the
/// library (a message sent while it changes may reach the old callback with
/// the new user_data). log_callback, if not NULL, must be safe to call from
/// any thread that uses the library, with user_data, until it is replaced,
/// and must not call this library.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_log_set(log_callback: wsp_ggml_log_callback, user_data: *mut c_void) {
    entry!(wsp_ggml_backend_log_set, || crate::platform::set_log_callback(log_callback, user_data))
}

/// Evaluation callback of a scheduler (wsp_ggml_backend_sched_set_eval_callback).
/// During wsp_ggml_backend_sched_graph_compute it is first called with
/// ask = true for a node t: return true to see that node once it is computed.
/// It is then called with ask = false and the computed node t: return true to
/// go on, false to stop the compute there.
pub type wsp_ggml_backend_sched_eval_callback =
    Option<unsafe extern "C" fn(t: *mut wsp_ggml_tensor, ask: bool, user_data: *mut c_void) -> bool>;

/// Callback of wsp_ggml_backend_compare_graph_backend: called with the index of
/// a node, the node computed on the first backend (t1) and its copy computed on
/// the second backend (t2). Return true to go on, false to stop the comparison.
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

/// Sets the evaluation callback of a scheduler, or removes it (callback NULL).
///
/// While wsp_ggml_backend_sched_graph_compute runs, the scheduler calls
/// callback(t, true, user_data) for the nodes t of each split, in order, to ask
/// whether the caller wants to see t. It computes the nodes up to the first
/// node answered with true, waits for the backend to finish, and calls
/// callback(t, false, user_data) with that node. If this second call returns
/// false, the compute stops: the remaining nodes are not computed and
/// wsp_ggml_backend_sched_graph_compute returns. From inside the callback the
/// scheduler may be read (the wsp_ggml_backend_sched_get_* functions of this
/// header) but not changed.
///
/// Parameters:
///   sched      the scheduler.
///   callback   the callback, or NULL to remove it.
///   user_data  passed to every call of callback; the library never reads it.
///
/// Ownership: the scheduler keeps callback and user_data until they are
/// replaced or the scheduler is freed; the library never frees user_data.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_set_eval_callback: <message>
/// to stderr and aborts if sched is NULL, or if it is called from inside a
/// callback of this scheduler's current work (the evaluation callback
/// included). It allocates no memory.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time; callback, if not NULL, must be safe
/// to call with user_data until it is replaced.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_set_eval_callback(
    sched: wsp_ggml_backend_sched_t,
    callback: wsp_ggml_backend_sched_eval_callback,
    user_data: *mut c_void,
) {
    // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
    entry!(wsp_ggml_backend_sched_set_eval_callback, |func| unsafe { sched_ref(sched, func) }
        // SAFETY: `callback` is safe to call with `user_data` until replaced
        // (the caller's contract, above).
        .with_mut(func, |s| s.set_eval_callback(callback.map(|f| unsafe { EvalCallback::new(f, user_data) }))))
}

/// Returns the number of splits (runs of nodes computed on one backend) of the
/// graph the scheduler split last: by wsp_ggml_backend_sched_init_measure,
/// wsp_ggml_backend_sched_reserve or wsp_ggml_backend_sched_graph_compute.
///
/// Parameters:
///   sched  the scheduler.
///
/// Returns: the number of splits; 0 before the first of those calls and after
/// wsp_ggml_backend_sched_reset.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_get_n_splits: <message>
/// to stderr and aborts if sched is NULL, or if it is called from inside a
/// backend's callback while the scheduler plans or measures (it may be called
/// from the evaluation callback). It allocates no memory.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_n_splits(sched: wsp_ggml_backend_sched_t) -> c_int {
    // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
    entry!(wsp_ggml_backend_sched_get_n_splits, |func| unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.n_splits() as c_int))
}

/// Returns the number of backends of a scheduler: the n_backends given to
/// wsp_ggml_backend_sched_new.
///
/// Parameters:
///   sched  the scheduler.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_get_n_backends: <message>
/// to stderr and aborts if sched is NULL, or if it is called from inside a
/// backend's callback while the scheduler plans or measures (it may be called
/// from the evaluation callback). It allocates no memory.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_n_backends(sched: wsp_ggml_backend_sched_t) -> c_int {
    // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
    entry!(wsp_ggml_backend_sched_get_n_backends, |func| unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.n_backends() as c_int))
}

/// Returns the backend of a scheduler at priority index i: the i-th entry of
/// the array given to wsp_ggml_backend_sched_new.
///
/// Parameters:
///   sched  the scheduler.
///   i      the index: at least 0, less than the number of backends.
///
/// Returns: the backend. It stays owned by the caller, who frees it with
/// wsp_ggml_backend_free after freeing the scheduler.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_get_backend: <message>
/// to stderr and aborts if sched is NULL, if i is out of range, or if it is
/// called from inside a backend's callback while the scheduler plans or
/// measures (it may be called from the evaluation callback). It allocates no
/// memory.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_backend(sched: wsp_ggml_backend_sched_t, i: c_int) -> wsp_ggml_backend_t {
    entry!(wsp_ggml_backend_sched_get_backend, |func| {
        // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
        let (b, n) =
            unsafe { sched_ref(sched, func) }.with_ref(func, |s| (usize::try_from(i).ok().and_then(|i| s.backend(i)), s.n_backends()));
        b.unwrap_or_else(|| fatal(func, &format!("argument 'i' ({i}) is out of range (0..{n})"))).as_ptr()
    })
}

/// Returns the backend a tensor was assigned to in the graph the scheduler
/// split last (see wsp_ggml_backend_sched_get_n_splits).
///
/// Parameters:
///   sched  the scheduler.
///   node   a tensor of that graph (a node or a leaf).
///
/// Returns: the backend, or NULL if node was not in that graph or was not
/// assigned a backend. The backend stays owned by the caller.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_get_tensor_backend: <message>
/// to stderr and aborts if sched or node is NULL, or if it is called from
/// inside a backend's callback while the scheduler plans or measures (it may be
/// called from the evaluation callback). It allocates no memory.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time, and a valid ggml tensor.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_tensor_backend(
    sched: wsp_ggml_backend_sched_t,
    node: *mut wsp_ggml_tensor,
) -> wsp_ggml_backend_t {
    entry!(wsp_ggml_backend_sched_get_tensor_backend, |func| {
        // SAFETY: `node` is live for the call (the caller's contract, above).
        let node = unsafe { TensorRef::from_c(node, func, "node") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
        unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.tensor_backend(node)).map_or(core::ptr::null_mut(), BackendRef::as_ptr)
    })
}

/// Returns the size in bytes of the scheduler's compute buffer on one of its
/// backends: as sized by wsp_ggml_backend_sched_init_measure or
/// wsp_ggml_backend_sched_reserve, or grown since by a compute that needed
/// more.
///
/// Parameters:
///   sched    the scheduler.
///   backend  one of the scheduler's backends.
///
/// Returns: the size of the buffer; 0 before the scheduler is first measured.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_get_buffer_size: <message>
/// to stderr and aborts if sched or backend is NULL, if backend is not one of
/// the scheduler's backends, or if it is called from inside a backend's
/// callback while the scheduler plans or measures (it may be called from the
/// evaluation callback). It allocates no memory.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time, and a valid backend.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_buffer_size(sched: wsp_ggml_backend_sched_t, backend: wsp_ggml_backend_t) -> usize {
    entry!(wsp_ggml_backend_sched_get_buffer_size, |func| {
        // SAFETY: `backend` is live for the call (the caller's contract, above).
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
        unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.buffer_size(backend, func))
    })
}

/// Resets a scheduler: forgets the assignments made with
/// wsp_ggml_backend_sched_set_node_backend and the graph it split last,
/// releasing the memory that graph's bookkeeping held, and clears the
/// statistics. The compute buffers are kept; the next
/// wsp_ggml_backend_sched_graph_compute splits its graph anew.
///
/// Parameters:
///   sched  the scheduler.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_reset: <message>
/// to stderr and aborts if sched is NULL, or if it is called from inside a
/// callback of this scheduler's current work (the evaluation callback
/// included). It allocates no memory.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_reset(sched: wsp_ggml_backend_sched_t) {
    // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
    entry!(wsp_ggml_backend_sched_reset, |func| unsafe { sched_ref(sched, func) }.with_mut(func, Sched::reset))
}

/// Measures a graph and grows the scheduler's compute buffers so that the graph
/// fits; the buffers never shrink. On a scheduler not measured yet it does what
/// wsp_ggml_backend_sched_init_measure does. The graph is split (see
/// wsp_ggml_backend_sched_get_n_splits) but not computed.
///
/// Parameters:
///   sched  the scheduler.
///   graph  the graph to make room for; it stays owned by the caller.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_reserve: <message>
/// to stderr and aborts if sched or graph is NULL, if the graph holds a NULL
/// node or leaf or cannot be placed on the scheduler's backends, or if it is
/// called from inside a callback of this scheduler's current work.
///
/// Out of memory: if a compute buffer or the library's own memory cannot be
/// allocated, prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_reserve: out of memory (<N> bytes)
/// to stderr and aborts.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time, and a valid graph whose node and
/// leaf arrays hold valid tensors.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_reserve(sched: wsp_ggml_backend_sched_t, graph: *mut wsp_ggml_cgraph) {
    entry!(wsp_ggml_backend_sched_reserve, |func| {
        // SAFETY: `graph` is live for the call (the caller's contract, above).
        let graph = unsafe { GraphRef::from_c(graph, func, "graph") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
        unsafe { sched_ref(sched, func) }.reserve(graph)
    })
}

/// Describes one split of the graph the scheduler split last: its backend, its
/// nodes [i_start, i_end) in the graph, the number of distinct tensors copied
/// into it, and the bytes copied into it by the last
/// wsp_ggml_backend_sched_graph_compute (0 after a measure or a reset).
///
/// Parameters:
///   sched    the scheduler.
///   i_split  the index of the split: at least 0, less than the number of
///            splits.
///   stats    where to write the description (storage owned by the caller).
///
/// Returns: true, having written *stats; false if i_split is out of range,
/// leaving *stats unchanged.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_get_split_stats: <message>
/// to stderr and aborts if sched or stats is NULL, or if it is called from
/// inside a backend's callback while the scheduler plans or measures (it may be
/// called from the evaluation callback). It allocates no memory.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time, and stats must point to writable
/// storage for one struct wsp_ggml_backend_sched_split_stats.
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
        // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
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

/// Describes what the last wsp_ggml_backend_sched_graph_compute did on one of
/// the scheduler's backends: splits computed, input copies made, bytes copied,
/// and the time spent copying and computing (all 0 after a measure or a reset).
///
/// Parameters:
///   sched    the scheduler.
///   backend  the backend.
///   stats    where to write the description (storage owned by the caller).
///
/// Returns: true, having written *stats; false if backend is not one of the
/// scheduler's backends, leaving *stats unchanged.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_get_backend_stats: <message>
/// to stderr and aborts if sched, backend or stats is NULL, or if it is called
/// from inside a backend's callback while the scheduler plans or measures (it
/// may be called from the evaluation callback). It allocates no memory.
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time, a valid backend, and stats must
/// point to writable storage for one struct
/// wsp_ggml_backend_sched_backend_stats.
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
        // SAFETY: `backend` is live for the call (the caller's contract, above).
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
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

/// Sets the abort callback of a CPU backend, or removes it (abort_callback
/// NULL). While the backend computes a graph, ggml calls
/// abort_callback(abort_callback_data) between nodes; when it returns true the
/// compute stops, leaving the remaining nodes uncomputed, and the compute
/// function returns normally. The callback applies to the computes that start
/// after this call (wsp_ggml_backend_graph_compute, and the scheduler's
/// computes on this backend) and to plans created after it with
/// wsp_ggml_backend_graph_plan_create; existing plans keep the callback they
/// were created with.
///
/// Parameters:
///   backend_cpu          a backend made by wsp_ggml_backend_cpu_init.
///   abort_callback       the callback, or NULL to remove it.
///   abort_callback_data  passed to every call of abort_callback; the library
///                        never reads it.
///
/// Ownership: the backend keeps abort_callback and abort_callback_data until
/// they are replaced or the backend is freed; the library never frees
/// abort_callback_data.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_cpu_set_abort_callback: <message>
/// to stderr and aborts if backend_cpu is NULL or is not a CPU backend, or if
/// it is called from inside the backend's abort callback while the backend
/// computes. It allocates no memory.
///
/// The caller must pass a valid backend, used by one thread at a time;
/// abort_callback, if not NULL, must be safe to call with abort_callback_data
/// until it is replaced.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_cpu_set_abort_callback(
    backend_cpu: wsp_ggml_backend_t,
    abort_callback: Option<unsafe extern "C" fn(data: *mut c_void) -> bool>,
    abort_callback_data: *mut c_void,
) {
    entry!(wsp_ggml_backend_cpu_set_abort_callback, |func| {
        // SAFETY: `backend_cpu` is live for the call (the caller's contract, above).
        let backend_cpu = unsafe { BackendRef::from_c(backend_cpu, func, "backend_cpu") };
        // SAFETY: `abort_callback`, when set, is safe to call with its data
        // until replaced (the caller's contract, above).
        let callback = unsafe { AbortCallback::new(abort_callback, abort_callback_data) };
        crate::cpu::set_abort_callback(backend_cpu, callback)
    })
}

/// Copies an allocated graph to another backend. Every tensor the graph's nodes
/// reach (through their sources and view sources) is duplicated: the tensors
/// that have data and are not views get memory in one new buffer of backend,
/// and their data is copied; views are re-created over the copies of their
/// sources; tensors without data are duplicated without memory. The copied
/// graph lists the copies of the nodes, in the same order.
///
/// Parameters:
///   backend  the backend to copy to.
///   graph    the graph to copy; it is not changed and stays owned by the
///            caller.
///
/// Returns: the copy: buffer (the new buffer), ctx_allocated and
/// ctx_unallocated (the ggml contexts that hold the copied tensors) and graph
/// (the copied graph, in ctx_allocated). Everything in it is owned by the
/// caller, who frees it with wsp_ggml_backend_graph_copy_free, once; its
/// members must not be freed one by one.
///
/// Errors: prints
///   wsp_ggml_backend: <function>: <message>
/// to stderr and aborts, <function> being wsp_ggml_backend_graph_copy or the
/// library function that found the problem (wsp_ggml_backend_tensor_copy for a
/// copy of data), if backend or graph is NULL, if backend lacks a function of
/// its interface that the copy needs, if ggml cannot create the two contexts
/// (all ggml contexts in use, or no memory), or if a tensor that has data is
/// not in a backend buffer or its data cannot be copied.
///
/// Out of memory: if the buffer or the library's own memory cannot be
/// allocated, prints
///   wsp_ggml_backend: wsp_ggml_backend_graph_copy: out of memory (<N> bytes)
/// to stderr and aborts; it never returns a partial copy.
///
/// The caller must pass a valid backend and a valid graph whose node and leaf
/// arrays hold valid tensors; the tensors that have data must be allocated in
/// backend buffers.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_graph_copy(
    backend: wsp_ggml_backend_t,
    graph: *mut wsp_ggml_cgraph,
) -> wsp_ggml_backend_graph_copy {
    entry!(wsp_ggml_backend_graph_copy, |func| {
        // SAFETY: `backend` and `graph` are live for the call (the caller's contract, above).
        let (backend, graph) = unsafe { (BackendRef::from_c(backend, func, "backend"), GraphRef::from_c(graph, func, "graph")) };
        graph_copy::graph_copy(backend, graph).into_c()
    })
}

/// Frees a graph copy made by wsp_ggml_backend_graph_copy: its buffer (as
/// wsp_ggml_backend_buffer_free does), then its two ggml contexts, with the
/// copied tensors and graph. A copy whose members are all NULL is ignored.
///
/// Parameters:
///   copy  the copy, as wsp_ggml_backend_graph_copy returned it.
///
/// Errors: none are detected; the buffer's own free function runs as for
/// wsp_ggml_backend_buffer_free. It allocates no memory.
///
/// The caller must pass a copy returned by wsp_ggml_backend_graph_copy and not
/// yet freed, and must not use its buffer, tensors or graph afterwards.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_graph_copy_free(copy: wsp_ggml_backend_graph_copy) {
    entry!(wsp_ggml_backend_graph_copy_free, || {
        // SAFETY: a copy made by graph_copy, handed over to be freed once (the caller's contract, above).
        unsafe { GraphCopy::from_c(copy) }.free()
    })
}

/// Compares two backends on a graph, node by node. The graph must be allocated
/// on backend1. It is copied to backend2 (as wsp_ggml_backend_graph_copy does);
/// then each node, in order, is computed alone on backend1 and its copy alone
/// on backend2, and for each node that is not a view (RESHAPE, VIEW, PERMUTE,
/// TRANSPOSE) callback(i, t1, t2, user_data) is called with the node's index i,
/// the node t1 and its copy t2. When callback returns false the comparison
/// stops. The copy is freed before the function returns.
///
/// Parameters:
///   backend1   the backend the graph is allocated on.
///   backend2   the backend to compare with.
///   graph      the graph; its nodes are computed on backend1, and it stays
///              owned by the caller.
///   callback   called for each compared node.
///   user_data  passed to every call of callback; the library never reads it.
///
/// Ownership: t2 belongs to the copy and is valid only until the function
/// returns; t1 is the caller's node.
///
/// Errors: prints
///   wsp_ggml_backend: <function>: <message>
/// to stderr and aborts, <function> being
/// wsp_ggml_backend_compare_graph_backend or the library function that found
/// the problem, if backend1, backend2, graph or callback is NULL, if a node's
/// copy differs from it in op or layout, or in any case in which
/// wsp_ggml_backend_graph_copy aborts.
///
/// Out of memory: if the copy's buffer or the library's own memory cannot be
/// allocated, prints
///   wsp_ggml_backend: wsp_ggml_backend_compare_graph_backend: out of memory (<N> bytes)
/// to stderr and aborts.
///
/// The caller must pass two valid backends and a valid graph whose node and
/// leaf arrays hold valid tensors, all allocated on backend1; callback must be
/// safe to call with user_data during the call.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_compare_graph_backend(
    backend1: wsp_ggml_backend_t,
    backend2: wsp_ggml_backend_t,
    graph: *mut wsp_ggml_cgraph,
    callback: wsp_ggml_backend_eval_callback,
    user_data: *mut c_void,
) {
    entry!(wsp_ggml_backend_compare_graph_backend, |func| {
        // SAFETY: `backend1` is live for the call (the caller's contract, above).
        let b1 = unsafe { BackendRef::from_c(backend1, func, "backend1") };
        // SAFETY: `backend2` is live for the call (the caller's contract, above).
        let b2 = unsafe { BackendRef::from_c(backend2, func, "backend2") };
        // SAFETY: `graph` is live for the call (the caller's contract, above).
        let g = unsafe { GraphRef::from_c(graph, func, "graph") };
        let cb = callback.unwrap_or_else(|| fatal(func, "argument 'callback' is NULL"));
        // SAFETY: `callback` is safe to call with `user_data` (the caller's
        // contract, above).
        let callback = unsafe { CompareCallback::new(cb, user_data) };
        graph_copy::compare_graph_backend(b1, b2, g, callback)
    })
}

/// Receives the text of wsp_ggml_backend_sched_write_dot, a line at a time:
/// len bytes at text (also NUL-terminated), valid only during the call.
pub type wsp_ggml_backend_sched_dot_writer = Option<unsafe extern "C" fn(text: *const c_char, len: usize, user_data: *mut c_void)>;

/// Writes how the scheduler split a graph as a Graphviz DOT picture: one
/// cluster per split, labelled with its backend, its nodes [i_start, i_end),
/// its number of inputs and the bytes copied into it per compute; each node
/// filled with its backend's colour and labelled with its op, name, shape and
/// bytes, and the rule that gave it its backend; leafs (cylinders) and the
/// other tensors the nodes read, outside the clusters; each split input as
/// its own node in the split (the copy), with an edge from the copied tensor
/// labelled with the bytes copied; a legend of the backends' colours and of
/// the rules. Render it with Graphviz: dot -Tsvg schedule.dot -o schedule.svg
/// (scripts/render-schedule in the library's repository).
///
/// The graph must be the one the scheduler split last: by
/// wsp_ggml_backend_sched_init_measure, wsp_ggml_backend_sched_reserve or
/// wsp_ggml_backend_sched_graph_compute (see
/// wsp_ggml_backend_sched_get_n_splits), unchanged since. The environment
/// variable WSP_GGML_SCHED_DOT=path writes the same picture to path (replaced)
/// at each wsp_ggml_backend_sched_init_measure, without a code change.
///
/// Parameters:
///   sched      the scheduler.
///   graph      the graph it split last; it stays owned by the caller and is
///              not changed.
///   write      called with the text, one line (ending with a newline) per
///              call, in order; for example a function that fwrite()s to a
///              FILE * passed as user_data.
///   user_data  passed to every call of write; the library never reads it.
///
/// Errors: prints
///   wsp_ggml_backend: wsp_ggml_backend_sched_write_dot: <message>
/// where messages go and aborts if sched, graph or write is NULL, if the
/// scheduler has split no graph yet (or was reset since), if graph is not the
/// graph it split last (other nodes or leafs, or another number of them), or
/// if it is called from inside a backend's callback while the scheduler plans
/// or measures (it may be called from the evaluation callback). It allocates
/// memory (the text of a line, the tensors it finds again).
///
/// The caller must pass a scheduler made by wsp_ggml_backend_sched_new and not
/// yet freed, used by one thread at a time, and a valid graph whose node and
/// leaf arrays hold valid tensors; write must be safe to call with user_data
/// during the call, and must not change the scheduler.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_write_dot(
    sched: wsp_ggml_backend_sched_t,
    graph: *mut wsp_ggml_cgraph,
    write: wsp_ggml_backend_sched_dot_writer,
    user_data: *mut c_void,
) {
    entry!(wsp_ggml_backend_sched_write_dot, |func| {
        // SAFETY: `sched` is NULL (aborts) or live for the call (the caller's contract, above).
        let sched = unsafe { sched_ref(sched, func) };
        // SAFETY: `graph` is live for the call (the caller's contract, above).
        let graph = unsafe { GraphRef::from_c(graph, func, "graph") };
        let write = write.unwrap_or_else(|| fatal(func, "argument 'write' is NULL"));
        let mut line = Vec::<u8>::new();
        let mut sink = |text: &str| {
            line.clear();
            line.extend_from_slice(text.as_bytes());
            line.push(0);
            // SAFETY: `write` is safe to call with `user_data` (the caller's
            // contract, above); `line` holds `text.len()` bytes and a NUL.
            unsafe { write(line.as_ptr().cast(), text.len(), user_data) }
        };
        sched.with_ref(func, |s| s.write_dot(graph, &mut sink, func))
    })
}
