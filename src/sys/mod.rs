//! Every `#[repr(C)]` mirror of a C struct, the declarations of what we
//! import from ggml, and the layout assertions, in one place.
//!
//! - ggml's types (`ggml.h`, `ggml-alloc.h` of whisper.rn 0.4.0-rc.4, the
//!   same layout as whisper.cpp v1.5.0) and the functions of `ggml.c` and
//!   `ggml-alloc.c` we import: those files stay C, in the user's build;
//! - ggml-alloc's private allocator struct, read by
//!   `talloc::read_tallocr` only;
//! - the backend and buffer structs of `ggml-backend-impl.h`, which cbindgen
//!   writes into the generated headers (the interfaces that C backends fill).
//!
//! Sizes, offsets and ggml.h's constants (op values, limits): each fact the
//! crate relies on is listed once with the C expression that gives it
//! (`layout!`); ffi-tests compares every one
//! with the target's C compiler on each tested architecture, and 64-bit and
//! 32-bit x86 builds also assert gcc's values at compile time.

#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_void};
use core::mem::{offset_of, size_of};

/// cbindgen:ignore
mod ggml;
pub use ggml::*;

// ---------------------------------------------------------------------------
// ggml-backend-impl.h: the buffer and backend interfaces.

pub type wsp_ggml_backend_buffer_t = *mut wsp_ggml_backend_buffer;
pub type wsp_ggml_backend_buffer_context_t = *mut c_void;

/// `struct wsp_ggml_backend_buffer_i`: the buffer's function table.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct wsp_ggml_backend_buffer_i {
    pub free_buffer: Option<unsafe extern "C" fn(buffer: wsp_ggml_backend_buffer_t)>,
    /// get base pointer
    pub get_base: Option<unsafe extern "C" fn(buffer: wsp_ggml_backend_buffer_t) -> *mut c_void>,
    /// pre-allocation callback
    pub get_alloc_size: Option<unsafe extern "C" fn(buffer: wsp_ggml_backend_buffer_t, tensor: *mut wsp_ggml_tensor) -> usize>,
    /// post-allocation callback
    pub init_tensor: Option<unsafe extern "C" fn(buffer: wsp_ggml_backend_buffer_t, tensor: *mut wsp_ggml_tensor)>,
    /// pre-free callback
    pub free_tensor: Option<unsafe extern "C" fn(buffer: wsp_ggml_backend_buffer_t, tensor: *mut wsp_ggml_tensor)>,
}

/// `struct wsp_ggml_backend_buffer`. `ggml-alloc.c` reads `backend` directly.
#[repr(C)]
pub struct wsp_ggml_backend_buffer {
    pub iface: wsp_ggml_backend_buffer_i,
    pub backend: wsp_ggml_backend_t,
    pub context: wsp_ggml_backend_buffer_context_t,
    pub size: usize,
}

ggml::layout! {
    BUFFER_LAYOUT:
    "sizeof(struct wsp_ggml_backend_buffer_i)" size_of::<wsp_ggml_backend_buffer_i>() => 40, 20;
    "sizeof(struct wsp_ggml_backend_buffer)" size_of::<wsp_ggml_backend_buffer>() => 64, 32;
    "offsetof(struct wsp_ggml_backend_buffer, backend)" offset_of!(wsp_ggml_backend_buffer, backend) => 40, 20;
    "offsetof(struct wsp_ggml_backend_buffer, context)" offset_of!(wsp_ggml_backend_buffer, context) => 48, 24;
    "offsetof(struct wsp_ggml_backend_buffer, size)" offset_of!(wsp_ggml_backend_buffer, size) => 56, 28;
    "offsetof(struct wsp_ggml_backend_buffer, iface)" offset_of!(wsp_ggml_backend_buffer, iface);
    "offsetof(struct wsp_ggml_backend_buffer_i, free_buffer)" offset_of!(wsp_ggml_backend_buffer_i, free_buffer);
    "offsetof(struct wsp_ggml_backend_buffer_i, get_base)" offset_of!(wsp_ggml_backend_buffer_i, get_base);
    "offsetof(struct wsp_ggml_backend_buffer_i, get_alloc_size)" offset_of!(wsp_ggml_backend_buffer_i, get_alloc_size);
    "offsetof(struct wsp_ggml_backend_buffer_i, init_tensor)" offset_of!(wsp_ggml_backend_buffer_i, init_tensor);
    "offsetof(struct wsp_ggml_backend_buffer_i, free_tensor)" offset_of!(wsp_ggml_backend_buffer_i, free_tensor);
}

pub type wsp_ggml_backend_t = *mut wsp_ggml_backend;
pub type wsp_ggml_backend_graph_plan_t = *mut c_void;
pub type wsp_ggml_backend_context_t = *mut c_void;

/// `struct wsp_ggml_backend_i`: the backend's function table.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct wsp_ggml_backend_i {
    pub get_name: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t) -> *const c_char>,
    pub free: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t)>,
    /// buffer allocation
    pub alloc_buffer: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t, size: usize) -> wsp_ggml_backend_buffer_t>,
    /// get buffer alignment
    pub get_alignment: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t) -> usize>,
    /// tensor data access; may be asynchronous, `synchronize` waits for completion
    pub set_tensor_async: Option<
        unsafe extern "C" fn(backend: wsp_ggml_backend_t, tensor: *mut wsp_ggml_tensor, data: *const c_void, offset: usize, size: usize),
    >,
    pub get_tensor_async: Option<
        unsafe extern "C" fn(backend: wsp_ggml_backend_t, tensor: *const wsp_ggml_tensor, data: *mut c_void, offset: usize, size: usize),
    >,
    pub synchronize: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t)>,
    /// (optional) copy tensor between different backends, allow for single-copy transfers
    pub cpy_tensor_from: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t, src: *mut wsp_ggml_tensor, dst: *mut wsp_ggml_tensor)>,
    pub cpy_tensor_to: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t, src: *mut wsp_ggml_tensor, dst: *mut wsp_ggml_tensor)>,
    /// compute graph with a plan
    pub graph_plan_create:
        Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t, cgraph: *mut wsp_ggml_cgraph) -> wsp_ggml_backend_graph_plan_t>,
    pub graph_plan_free: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t, plan: wsp_ggml_backend_graph_plan_t)>,
    pub graph_plan_compute: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t, plan: wsp_ggml_backend_graph_plan_t)>,
    /// compute graph without a plan
    pub graph_compute: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t, cgraph: *mut wsp_ggml_cgraph)>,
    /// check if the backend supports an operation
    pub supports_op: Option<unsafe extern "C" fn(backend: wsp_ggml_backend_t, op: *const wsp_ggml_tensor) -> bool>,
}

/// `struct wsp_ggml_backend`. Other backends allocate and fill it themselves.
#[repr(C)]
pub struct wsp_ggml_backend {
    pub iface: wsp_ggml_backend_i,
    pub context: wsp_ggml_backend_context_t,
}

ggml::layout! {
    BACKEND_LAYOUT:
    "sizeof(struct wsp_ggml_backend_i)" size_of::<wsp_ggml_backend_i>() => 112, 56;
    "sizeof(struct wsp_ggml_backend)" size_of::<wsp_ggml_backend>() => 120, 60;
    "offsetof(struct wsp_ggml_backend, context)" offset_of!(wsp_ggml_backend, context) => 112, 56;
    "offsetof(struct wsp_ggml_backend, iface)" offset_of!(wsp_ggml_backend, iface);
    "offsetof(struct wsp_ggml_backend_i, get_name)" offset_of!(wsp_ggml_backend_i, get_name);
    "offsetof(struct wsp_ggml_backend_i, free)" offset_of!(wsp_ggml_backend_i, free);
    "offsetof(struct wsp_ggml_backend_i, alloc_buffer)" offset_of!(wsp_ggml_backend_i, alloc_buffer);
    "offsetof(struct wsp_ggml_backend_i, get_alignment)" offset_of!(wsp_ggml_backend_i, get_alignment);
    "offsetof(struct wsp_ggml_backend_i, set_tensor_async)" offset_of!(wsp_ggml_backend_i, set_tensor_async);
    "offsetof(struct wsp_ggml_backend_i, get_tensor_async)" offset_of!(wsp_ggml_backend_i, get_tensor_async);
    "offsetof(struct wsp_ggml_backend_i, synchronize)" offset_of!(wsp_ggml_backend_i, synchronize);
    "offsetof(struct wsp_ggml_backend_i, cpy_tensor_from)" offset_of!(wsp_ggml_backend_i, cpy_tensor_from);
    "offsetof(struct wsp_ggml_backend_i, cpy_tensor_to)" offset_of!(wsp_ggml_backend_i, cpy_tensor_to);
    "offsetof(struct wsp_ggml_backend_i, graph_plan_create)" offset_of!(wsp_ggml_backend_i, graph_plan_create);
    "offsetof(struct wsp_ggml_backend_i, graph_plan_free)" offset_of!(wsp_ggml_backend_i, graph_plan_free);
    "offsetof(struct wsp_ggml_backend_i, graph_plan_compute)" offset_of!(wsp_ggml_backend_i, graph_plan_compute);
    "offsetof(struct wsp_ggml_backend_i, graph_compute)" offset_of!(wsp_ggml_backend_i, graph_compute);
    "offsetof(struct wsp_ggml_backend_i, supports_op)" offset_of!(wsp_ggml_backend_i, supports_op);
}

/// Every layout fact the crate relies on: (C expression, Rust value).
pub fn layouts() -> impl Iterator<Item = (&'static str, usize)> {
    GGML_LAYOUT.iter().chain(BUFFER_LAYOUT).chain(BACKEND_LAYOUT).chain(TALLOCR_LAYOUT).chain(GGML_CONSTANTS).copied()
}
