//! The exported C API: one thin function per symbol of the original.
//!
//! Each function checks its handles, converts them to the core's types and
//! calls the core inside [`guard`], so no panic ever unwinds into C. The
//! headers in `include/` are generated from this file by cbindgen.
//!
//! Conventions (as in the original unless noted): handles are owned by the
//! caller and must be valid for the call; functions that free accept NULL as a
//! no-op; any other NULL handle aborts with a message naming the function and
//! the argument (the original crashed).

#![allow(non_camel_case_types)]

use crate::prelude::*;

use core::ffi::{c_char, c_int, c_void};

use crate::fatal::{fatal, guard};
use crate::ggml::{wsp_ggml_cgraph, wsp_ggml_tallocr_t, wsp_ggml_tensor, GraphRef, TensorRef};
use crate::handle::{self, wsp_ggml_backend, wsp_ggml_backend_graph_plan_t, wsp_ggml_backend_t, BackendRef, FromC};
use crate::handle::{wsp_ggml_backend_buffer_context_t, wsp_ggml_backend_buffer_i, wsp_ggml_backend_buffer_t, BufferRef};
use crate::sched::{Sched, SchedCell};
use crate::{copy, cpu};

pub mod ext;
mod sched_handle;

use sched_handle::sched_ref;
pub use sched_handle::{wsp_ggml_backend_sched, wsp_ggml_backend_sched_t};

//
// Backend buffer
//

/// # Safety
/// `buffer` is NULL or a live buffer: made by this library, not freed.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_buffer_free(buffer: wsp_ggml_backend_buffer_t) {
    guard("wsp_ggml_backend_buffer_free", || {
        // SAFETY: `buffer` is NULL or live for the call (# Safety above).
        if let Some(b) = unsafe { BufferRef::from_c_opt(buffer) } {
            b.free()
        }
    })
}

/// # Safety
/// `buffer` is a live buffer: made by this library, not freed.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_buffer_get_alignment(buffer: wsp_ggml_backend_buffer_t) -> usize {
    let func = "wsp_ggml_backend_buffer_get_alignment";
    // SAFETY: `buffer` is live for the call (# Safety above).
    guard(func, || unsafe { BufferRef::from_c(buffer, func, "buffer") }.alignment())
}

/// # Safety
/// `buffer` is a live buffer: made by this library, not freed.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_buffer_get_base(buffer: wsp_ggml_backend_buffer_t) -> *mut c_void {
    let func = "wsp_ggml_backend_buffer_get_base";
    // SAFETY: `buffer` is live for the call (# Safety above).
    guard(func, || unsafe { BufferRef::from_c(buffer, func, "buffer") }.base())
}

/// # Safety
/// `buffer` is a live buffer: made by this library, not freed.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_buffer_get_size(buffer: wsp_ggml_backend_buffer_t) -> usize {
    let func = "wsp_ggml_backend_buffer_get_size";
    // SAFETY: `buffer` is live for the call (# Safety above).
    guard(func, || unsafe { BufferRef::from_c(buffer, func, "buffer") }.size())
}

/// # Safety
/// `buffer` is a live buffer: made by this library, not freed; `tensor` is a live ggml tensor.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_buffer_get_alloc_size(buffer: wsp_ggml_backend_buffer_t, tensor: *mut wsp_ggml_tensor) -> usize {
    let func = "wsp_ggml_backend_buffer_get_alloc_size";
    guard(func, || {
        // SAFETY: `buffer` and `tensor` are live for the call (# Safety above).
        let (buffer, tensor) = unsafe { (BufferRef::from_c(buffer, func, "buffer"), TensorRef::from_c(tensor, func, "tensor")) };
        buffer.alloc_size(tensor)
    })
}

/// # Safety
/// `buffer` is a live buffer: made by this library, not freed; `tensor` is a live ggml tensor.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_buffer_init_tensor(buffer: wsp_ggml_backend_buffer_t, tensor: *mut wsp_ggml_tensor) {
    let func = "wsp_ggml_backend_buffer_init_tensor";
    guard(func, || {
        // SAFETY: `buffer` and `tensor` are live for the call (# Safety above).
        let (buffer, tensor) = unsafe { (BufferRef::from_c(buffer, func, "buffer"), TensorRef::from_c(tensor, func, "tensor")) };
        buffer.init_tensor(tensor)
    })
}

/// # Safety
/// `buffer` is a live buffer: made by this library, not freed; `tensor` is a live ggml tensor.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_buffer_free_tensor(buffer: wsp_ggml_backend_buffer_t, tensor: *mut wsp_ggml_tensor) {
    let func = "wsp_ggml_backend_buffer_free_tensor";
    guard(func, || {
        // SAFETY: `buffer` and `tensor` are live for the call (# Safety above).
        let (buffer, tensor) = unsafe { (BufferRef::from_c(buffer, func, "buffer"), TensorRef::from_c(tensor, func, "tensor")) };
        buffer.free_tensor(tensor)
    })
}

//
// Backend
//

/// # Safety
/// `tensor` is a live ggml tensor.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_get_backend(tensor: *const wsp_ggml_tensor) -> wsp_ggml_backend_t {
    let func = "wsp_ggml_get_backend";
    guard(func, || {
        // SAFETY: `tensor` is live for the call (# Safety above).
        let tensor = unsafe { TensorRef::from_c(tensor, func, "tensor") };
        handle::tensor_backend(tensor).map_or(core::ptr::null_mut(), BackendRef::as_ptr)
    })
}

/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_name(backend: wsp_ggml_backend_t) -> *const c_char {
    // SAFETY: `backend` is NULL or live for the call (# Safety above).
    guard("wsp_ggml_backend_name", || match unsafe { BackendRef::from_c_opt(backend) } {
        Some(b) => b.name(),
        None => c"NULL".as_ptr(),
    })
}

/// # Safety
/// `backend` is NULL or a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_free(backend: wsp_ggml_backend_t) {
    guard("wsp_ggml_backend_free", || {
        // SAFETY: `backend` is NULL or live for the call (# Safety above).
        if let Some(b) = unsafe { BackendRef::from_c_opt(backend) } {
            b.free()
        }
    })
}

/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_alloc_buffer(backend: wsp_ggml_backend_t, size: usize) -> wsp_ggml_backend_buffer_t {
    let func = "wsp_ggml_backend_alloc_buffer";
    // SAFETY: `backend` is live for the call (# Safety above).
    guard(func, || unsafe { BackendRef::from_c(backend, func, "backend") }.alloc_buffer(size))
}

/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_get_alignment(backend: wsp_ggml_backend_t) -> usize {
    let func = "wsp_ggml_backend_get_alignment";
    // SAFETY: `backend` is live for the call (# Safety above).
    guard(func, || unsafe { BackendRef::from_c(backend, func, "backend") }.alignment())
}

/// # Safety
/// `tensor` is a live ggml tensor; `data` points to `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_tensor_set_async(tensor: *mut wsp_ggml_tensor, data: *const c_void, offset: usize, size: usize) {
    let func = "wsp_ggml_backend_tensor_set_async";
    // SAFETY: `tensor` is live for the call (# Safety above).
    guard(func, || handle::tensor_set_async(unsafe { TensorRef::from_c(tensor, func, "tensor") }, data, offset, size))
}

/// # Safety
/// `tensor` is a live ggml tensor; `data` points to `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_tensor_get_async(tensor: *const wsp_ggml_tensor, data: *mut c_void, offset: usize, size: usize) {
    let func = "wsp_ggml_backend_tensor_get_async";
    // SAFETY: `tensor` is live for the call (# Safety above).
    guard(func, || handle::tensor_get_async(unsafe { TensorRef::from_c(tensor, func, "tensor") }, data, offset, size))
}

/// # Safety
/// `tensor` is a live ggml tensor; `data` points to `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_tensor_set(tensor: *mut wsp_ggml_tensor, data: *const c_void, offset: usize, size: usize) {
    let func = "wsp_ggml_backend_tensor_set";
    // SAFETY: `tensor` is live for the call (# Safety above).
    guard(func, || handle::tensor_set(unsafe { TensorRef::from_c(tensor, func, "tensor") }, data, offset, size))
}

/// # Safety
/// `tensor` is a live ggml tensor; `data` points to `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_tensor_get(tensor: *const wsp_ggml_tensor, data: *mut c_void, offset: usize, size: usize) {
    let func = "wsp_ggml_backend_tensor_get";
    // SAFETY: `tensor` is live for the call (# Safety above).
    guard(func, || handle::tensor_get(unsafe { TensorRef::from_c(tensor, func, "tensor") }, data, offset, size))
}

/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_synchronize(backend: wsp_ggml_backend_t) {
    let func = "wsp_ggml_backend_synchronize";
    // SAFETY: `backend` is live for the call (# Safety above).
    guard(func, || unsafe { BackendRef::from_c(backend, func, "backend") }.synchronize())
}

/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes; `cgraph` is a live graph whose node and leaf arrays hold live tensors.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_graph_plan_create(
    backend: wsp_ggml_backend_t,
    cgraph: *mut wsp_ggml_cgraph,
) -> wsp_ggml_backend_graph_plan_t {
    let func = "wsp_ggml_backend_graph_plan_create";
    guard(func, || {
        // SAFETY: `cgraph` is live for the call (# Safety above).
        let g = unsafe { GraphRef::from_c(cgraph, func, "cgraph") };
        // SAFETY: `backend` is live for the call (# Safety above).
        unsafe { BackendRef::from_c(backend, func, "backend") }.graph_plan_create(g.as_ptr())
    })
}

/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes; `plan` is a plan made by `wsp_ggml_backend_graph_plan_create` with the same backend, not freed.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_graph_plan_free(backend: wsp_ggml_backend_t, plan: wsp_ggml_backend_graph_plan_t) {
    let func = "wsp_ggml_backend_graph_plan_free";
    // SAFETY: `backend` is live for the call (# Safety above).
    guard(func, || unsafe { BackendRef::from_c(backend, func, "backend") }.graph_plan_free(plan))
}

/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes; `plan` is a plan made by `wsp_ggml_backend_graph_plan_create` with the same backend, not freed.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_graph_plan_compute(backend: wsp_ggml_backend_t, plan: wsp_ggml_backend_graph_plan_t) {
    let func = "wsp_ggml_backend_graph_plan_compute";
    // SAFETY: `backend` is live for the call (# Safety above).
    guard(func, || unsafe { BackendRef::from_c(backend, func, "backend") }.graph_plan_compute(plan))
}

/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes; `cgraph` is a live graph whose node and leaf arrays hold live tensors.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_graph_compute(backend: wsp_ggml_backend_t, cgraph: *mut wsp_ggml_cgraph) {
    let func = "wsp_ggml_backend_graph_compute";
    guard(func, || {
        // SAFETY: `cgraph` is live for the call (# Safety above).
        let g = unsafe { GraphRef::from_c(cgraph, func, "cgraph") };
        // SAFETY: `backend` is live for the call (# Safety above).
        unsafe { BackendRef::from_c(backend, func, "backend") }.graph_compute(g.as_ptr())
    })
}

/// True when the backend's `supports_op` slot is NULL (this generation's CUDA
/// backend): such a backend accepts every op, as the scheduler treats it (the
/// original called the NULL slot).
///
/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes; `op` is a live ggml tensor.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_supports_op(backend: wsp_ggml_backend_t, op: *const wsp_ggml_tensor) -> bool {
    let func = "wsp_ggml_backend_supports_op";
    guard(func, || {
        // SAFETY: `backend` and `op` are live for the call (# Safety above).
        let (backend, op) = unsafe { (BackendRef::from_c(backend, func, "backend"), TensorRef::from_c(op, func, "op")) };
        backend.supports_op(op)
    })
}

/// Tensor copy between different backends. The `cpy_tensor_from`/`cpy_tensor_to`
/// slots receive the backend (the original passed `backend->context`).
///
/// # Safety
/// `src` is a live ggml tensor; `dst` is a live ggml tensor.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_tensor_copy(src: *mut wsp_ggml_tensor, dst: *mut wsp_ggml_tensor) {
    let func = "wsp_ggml_backend_tensor_copy";
    guard(func, || {
        // SAFETY: `src` and `dst` are live for the call (# Safety above).
        let (src, dst) = unsafe { (TensorRef::from_c(src, func, "src"), TensorRef::from_c(dst, func, "dst")) };
        copy::tensor_copy(src, dst)
    })
}

//
// CPU backend
//

/// # Safety
/// None beyond the C contract: no pointer arguments.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_cpu_init() -> wsp_ggml_backend_t {
    guard("wsp_ggml_backend_cpu_init", || cpu::cpu_init().as_ptr())
}

/// False for NULL (the original crashed).
///
/// # Safety
/// `backend` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_is_cpu(backend: wsp_ggml_backend_t) -> bool {
    // SAFETY: `backend` is NULL or live for the call (# Safety above).
    guard("wsp_ggml_backend_is_cpu", || unsafe { BackendRef::from_c_opt(backend) }.is_some_and(cpu::is_cpu))
}

/// # Safety
/// `backend_cpu` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_cpu_set_n_threads(backend_cpu: wsp_ggml_backend_t, n_threads: c_int) {
    let func = "wsp_ggml_backend_cpu_set_n_threads";
    // SAFETY: `backend_cpu` is live for the call (# Safety above).
    guard(func, || cpu::set_n_threads(unsafe { BackendRef::from_c(backend_cpu, func, "backend_cpu") }, n_threads))
}

/// Create a backend buffer from an existing pointer. `backend_cpu` may be NULL.
///
/// # Safety
/// `backend_cpu` is a live backend, its interface as ggml-backend-impl.h describes; `ptr` points to `size` bytes that stay valid while the buffer is used.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_cpu_buffer_from_ptr(
    backend_cpu: wsp_ggml_backend_t,
    ptr: *mut c_void,
    size: usize,
) -> wsp_ggml_backend_buffer_t {
    let func = "wsp_ggml_backend_cpu_buffer_from_ptr";
    guard(func, || {
        // SAFETY: `backend_cpu` is NULL (ggml-alloc.c passes NULL) or live (# Safety above).
        let backend = unsafe { BackendRef::from_c_opt(backend_cpu) };
        cpu::buffer_from_ptr(backend, ptr, size).as_ptr()
    })
}

//
// Backend scheduler
//

/// Initialize a backend scheduler. Any number (>= 1) of backends, in priority order.
///
/// # Safety
/// `backends` points to `n_backends` live backends.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_new(backends: *mut wsp_ggml_backend_t, n_backends: c_int) -> wsp_ggml_backend_sched_t {
    let func = "wsp_ggml_backend_sched_new";
    guard(func, || {
        if n_backends <= 0 {
            fatal(func, &format!("argument 'n_backends' must be at least 1 (got {n_backends})"));
        }
        if n_backends as usize > crate::sched::MAX_BACKENDS {
            fatal(func, &format!("argument 'n_backends' ({n_backends}) exceeds {}", crate::sched::MAX_BACKENDS));
        }
        if backends.is_null() {
            fatal(func, "argument 'backends' is NULL");
        }
        // SAFETY: the caller passes an array of n_backends handles (C contract).
        let raw = unsafe { core::slice::from_raw_parts(backends, n_backends as usize) };
        let list: Vec<BackendRef> = raw
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                // SAFETY: each entry is NULL or a live backend (# Safety above).
                unsafe { BackendRef::from_c_opt(b) }.unwrap_or_else(|| fatal(func, &format!("argument 'backends[{i}]' is NULL")))
            })
            .collect();
        Box::into_raw(SchedCell::new(Sched::new(&list))).cast()
    })
}

/// # Safety
/// `sched` is NULL or a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_free(sched: wsp_ggml_backend_sched_t) {
    let func = "wsp_ggml_backend_sched_free";
    guard(func, || {
        if !sched.is_null() {
            // SAFETY: made by Box::into_raw in sched_new; freed once (C contract).
            unsafe { SchedCell::free(sched.cast::<SchedCell>(), func) };
        }
    })
}

/// Initialize backend buffers from a measure graph. May be called again to re-measure.
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `measure_graph` is a live graph whose node and leaf arrays hold live tensors.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_init_measure(sched: wsp_ggml_backend_sched_t, measure_graph: *mut wsp_ggml_cgraph) {
    let func = "wsp_ggml_backend_sched_init_measure";
    guard(func, || {
        // SAFETY: `measure_graph` is live for the call (# Safety above).
        let graph = unsafe { GraphRef::from_c(measure_graph, func, "measure_graph") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        unsafe { sched_ref(sched, func) }.with_mut(func, |s| s.init_measure(graph))
    })
}

/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `backend` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_tallocr(
    sched: wsp_ggml_backend_sched_t,
    backend: wsp_ggml_backend_t,
) -> wsp_ggml_tallocr_t {
    let func = "wsp_ggml_backend_sched_get_tallocr";
    guard(func, || {
        // SAFETY: `backend` is live for the call (# Safety above).
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        // (the caller may allocate with it: a change, not a read)
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        unsafe { sched_ref(sched, func) }.with_mut(func, |s| s.get_tallocr(backend, func))
    })
}

/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `backend` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_get_buffer(
    sched: wsp_ggml_backend_sched_t,
    backend: wsp_ggml_backend_t,
) -> wsp_ggml_backend_buffer_t {
    let func = "wsp_ggml_backend_sched_get_buffer";
    guard(func, || {
        // SAFETY: `backend` is live for the call (# Safety above).
        let backend = unsafe { BackendRef::from_c(backend, func, "backend") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        unsafe { sched_ref(sched, func) }.with_ref(func, |s| s.get_buffer(backend, func))
    })
}

/// Assign `node` to `backend` for the next compute (the original ignored this).
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `node` is a live ggml tensor; `backend` is a live backend, its interface as ggml-backend-impl.h describes.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_set_node_backend(
    sched: wsp_ggml_backend_sched_t,
    node: *mut wsp_ggml_tensor,
    backend: wsp_ggml_backend_t,
) {
    let func = "wsp_ggml_backend_sched_set_node_backend";
    guard(func, || {
        // SAFETY: `node` and `backend` are live for the call (# Safety above).
        let (node, backend) = unsafe { (TensorRef::from_c(node, func, "node"), BackendRef::from_c(backend, func, "backend")) };
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        unsafe { sched_ref(sched, func) }.with_mut(func, |s| s.set_node_backend(node, backend))
    })
}

/// Allocate and compute a graph on the backend scheduler.
///
/// # Safety
/// `sched` is a live scheduler: made by `wsp_ggml_backend_sched_new`, not freed, used by one thread at a time; `graph` is a live graph whose node and leaf arrays hold live tensors.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_sched_graph_compute(sched: wsp_ggml_backend_sched_t, graph: *mut wsp_ggml_cgraph) {
    let func = "wsp_ggml_backend_sched_graph_compute";
    guard(func, || {
        // SAFETY: `graph` is live for the call (# Safety above).
        let graph = unsafe { GraphRef::from_c(graph, func, "graph") };
        // SAFETY: `sched` is NULL (aborts) or live for the call (# Safety above).
        unsafe { sched_ref(sched, func) }.graph_compute(graph)
    })
}

//
// Backend buffer (implementation API, ggml-backend-impl.h)
//

/// # Safety
/// `backend` is NULL or a live backend that outlives the buffer; `iface`'s functions follow ggml-backend-impl.h's contract for `context`.
#[no_mangle]
pub unsafe extern "C" fn wsp_ggml_backend_buffer_init(
    backend: *mut wsp_ggml_backend,
    iface: wsp_ggml_backend_buffer_i,
    context: wsp_ggml_backend_buffer_context_t,
    size: usize,
) -> wsp_ggml_backend_buffer_t {
    guard("wsp_ggml_backend_buffer_init", || {
        // SAFETY: `backend` is NULL or live, and outlives the buffer (# Safety above).
        let backend = unsafe { BackendRef::from_c_opt(backend) };
        handle::buffer_init(backend, iface, context, size).as_ptr()
    })
}
