//! ggml's types (`ggml.h`, `ggml-alloc.h` of whisper.rn 0.4.0-rc.4, the same
//! layout as whisper.cpp v1.5.0), the head of ggml-alloc's private allocator
//! struct, and the functions of `ggml.c` and `ggml-alloc.c` we import. Not
//! part of our headers (the module is cbindgen:ignore'd).

#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};

use super::{wsp_ggml_backend, wsp_ggml_backend_buffer};

pub const WSP_GGML_MAX_DIMS: usize = 4;
pub const WSP_GGML_MAX_SRC: usize = 6;
pub const WSP_GGML_MAX_NAME: usize = 64;
pub const WSP_GGML_MAX_OP_PARAMS: usize = 64;
/// `WSP_GGML_DEFAULT_N_THREADS` in ggml.h: the CPU backend's initial thread count.
pub const WSP_GGML_DEFAULT_N_THREADS: c_int = 4;

/// `enum wsp_ggml_op` values the scheduler needs (same in rc.4 and v1.5.0).
pub const WSP_GGML_OP_NONE: c_int = 0;
pub const WSP_GGML_OP_RESHAPE: c_int = 29;
pub const WSP_GGML_OP_VIEW: c_int = 30;
pub const WSP_GGML_OP_PERMUTE: c_int = 31;
pub const WSP_GGML_OP_TRANSPOSE: c_int = 32;

/// The ops ggml-alloc may compute in place (`ggml_op_can_inplace`).
pub const WSP_GGML_OPS_IN_PLACE: [c_int; 15] = [
    2,  // ADD
    3,  // ADD1
    5,  // SUB
    6,  // MUL
    7,  // DIV
    8,  // SQR
    9,  // SQRT
    10, // LOG
    20, // RMS_NORM
    25, // SCALE
    36, // DIAG_MASK_INF
    37, // DIAG_MASK_ZERO
    38, // SOFT_MAX
    40, // ROPE
    57, // UNARY
];

// On 32-bit ARM, int64_t fields make ggml's tensor and graph structs
// 8-aligned in C, but ggml places them in its context at WSP_GGML_MEM_ALIGN,
// which is 4 on 32-bit targets: real tensors and graphs sit at 4-aligned
// addresses there. The mirrors ask for no more than 4 on that architecture
// (packed(4): the same offsets, checked by ffi-tests), so that reading them
// from Rust is defined behaviour; elsewhere they are plain repr(C).
/// `struct wsp_ggml_tensor` (ggml.h).
#[cfg_attr(target_arch = "arm", repr(C, packed(4)))]
#[cfg_attr(not(target_arch = "arm"), repr(C))]
pub struct wsp_ggml_tensor {
    pub type_: c_int,
    pub backend: c_int,
    pub buffer: *mut wsp_ggml_backend_buffer,
    pub n_dims: c_int,
    pub ne: [i64; WSP_GGML_MAX_DIMS],
    pub nb: [usize; WSP_GGML_MAX_DIMS],
    pub op: c_int,
    pub op_params: [i32; WSP_GGML_MAX_OP_PARAMS / 4],
    pub is_param: bool,
    pub grad: *mut wsp_ggml_tensor,
    pub src: [*mut wsp_ggml_tensor; WSP_GGML_MAX_SRC],
    pub perf_runs: c_int,
    pub perf_cycles: i64,
    pub perf_time_us: i64,
    pub view_src: *mut wsp_ggml_tensor,
    pub view_offs: usize,
    pub data: *mut c_void,
    pub name: [c_char; WSP_GGML_MAX_NAME],
    pub extra: *mut c_void,
    pub padding: [c_char; 12],
    /// C's tail padding to a multiple of 8 (packed(4) leaves it out).
    #[cfg(target_arch = "arm")]
    pub _tail: [u8; 4],
}

/// `struct wsp_ggml_hash_set` (ggml.h), inside `struct wsp_ggml_cgraph`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct wsp_ggml_hash_set {
    pub size: usize,
    pub keys: *mut *mut wsp_ggml_tensor,
}

/// `struct wsp_ggml_cgraph` (ggml.h; 4-aligned on 32-bit ARM, see above).
#[cfg_attr(target_arch = "arm", repr(C, packed(4)))]
#[cfg_attr(not(target_arch = "arm"), repr(C))]
#[derive(Clone, Copy)]
pub struct wsp_ggml_cgraph {
    pub size: c_int,
    pub n_nodes: c_int,
    pub n_leafs: c_int,
    pub nodes: *mut *mut wsp_ggml_tensor,
    pub grads: *mut *mut wsp_ggml_tensor,
    pub leafs: *mut *mut wsp_ggml_tensor,
    pub visited_hash_table: wsp_ggml_hash_set,
    pub order: c_int,
    pub perf_runs: c_int,
    pub perf_cycles: i64,
    pub perf_time_us: i64,
}

/// `struct wsp_ggml_cplan` (ggml.h).
#[repr(C)]
pub struct wsp_ggml_cplan {
    pub work_size: usize,
    pub work_data: *mut u8,
    pub n_threads: c_int,
    pub abort_callback: Option<unsafe extern "C" fn(data: *mut c_void) -> bool>,
    pub abort_callback_data: *mut c_void,
}

/// Opaque `struct wsp_ggml_tallocr` (ggml-alloc.h).
#[repr(C)]
pub struct wsp_ggml_tallocr {
    _private: [u8; 0],
}
pub type wsp_ggml_tallocr_t = *mut wsp_ggml_tallocr;

/// The head of ggml-alloc's private `struct ggml_tallocr` (ggml-alloc.c of
/// whisper.cpp 1.5, as shipped in whisper.rn 0.4.0-rc.4; the same with
/// `GGML_ALLOCATOR_DEBUG`, which only appends fields). ggml-alloc has no call
/// that says which parts of a buffer its allocator has handed out since the
/// last reset, and the scheduler needs exactly that to place a split after
/// the caller's inputs in a compute buffer (`sched_get_tallocr`). Read only
/// through `ggml::tallocr_free_blocks`, which checks it against what the
/// public calls say.
#[repr(C)]
pub(crate) struct TallocrHead {
    pub buffer: *mut wsp_ggml_backend_buffer,
    pub buffer_owned: bool,
    pub base: *mut c_void,
    pub alignment: usize,
    pub n_free_blocks: c_int,
    pub free_blocks: [FreeBlock; TALLOCR_MAX_FREE_BLOCKS],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct FreeBlock {
    pub addr: *mut c_void,
    pub size: usize,
}

/// `MAX_FREE_BLOCKS` of ggml-alloc.c.
pub(crate) const TALLOCR_MAX_FREE_BLOCKS: usize = 256;

/// The layout facts the crate relies on, each as the C expression that
/// gives it and the Rust value. Every entry becomes a row of a table (`$table`)
/// that ffi-tests compares with the target's C compiler on every tested
/// architecture (`layouts()`, tests/abi.rs), and, on 64-bit and 32-bit x86
/// targets, also a compile-time assertion against the value gcc gives there
/// (so that a build for those targets fails early, before any test).
/// Entries without gcc's values (`"c" expr;`) are checked by ffi-tests only.
macro_rules! layout {
    ($table:ident: $($c:literal $x:expr $(=> $b64:expr, $x86:expr)?;)*) => {
        const _: () = {
            $($(
                #[cfg(target_pointer_width = "64")]
                assert!($x == $b64);
                #[cfg(all(target_arch = "x86", target_pointer_width = "32"))]
                assert!($x == $x86);
            )?)*
        };
        pub(crate) const $table: &[(&str, usize)] = &[$(($c, $x)),*];
    };
}
pub(crate) use layout;

use core::mem::{offset_of, size_of};
layout! {
    GGML_LAYOUT:
    "sizeof(struct wsp_ggml_tensor)" size_of::<wsp_ggml_tensor>() => 352, 276;
    "offsetof(struct wsp_ggml_tensor, buffer)" offset_of!(wsp_ggml_tensor, buffer) => 8, 8;
    "offsetof(struct wsp_ggml_tensor, n_dims)" offset_of!(wsp_ggml_tensor, n_dims) => 16, 12;
    "offsetof(struct wsp_ggml_tensor, ne)" offset_of!(wsp_ggml_tensor, ne) => 24, 16;
    "offsetof(struct wsp_ggml_tensor, nb)" offset_of!(wsp_ggml_tensor, nb) => 56, 48;
    "offsetof(struct wsp_ggml_tensor, op)" offset_of!(wsp_ggml_tensor, op) => 88, 64;
    "offsetof(struct wsp_ggml_tensor, is_param)" offset_of!(wsp_ggml_tensor, is_param) => 156, 132;
    "offsetof(struct wsp_ggml_tensor, src)" offset_of!(wsp_ggml_tensor, src) => 168, 140;
    "offsetof(struct wsp_ggml_tensor, view_src)" offset_of!(wsp_ggml_tensor, view_src) => 240, 184;
    "offsetof(struct wsp_ggml_tensor, data)" offset_of!(wsp_ggml_tensor, data) => 256, 192;
    "offsetof(struct wsp_ggml_tensor, name)" offset_of!(wsp_ggml_tensor, name) => 264, 196;
    "offsetof(struct wsp_ggml_tensor, extra)" offset_of!(wsp_ggml_tensor, extra) => 328, 260;
    "sizeof(struct wsp_ggml_cgraph)" size_of::<wsp_ggml_cgraph>() => 80, 56;
    "offsetof(struct wsp_ggml_cgraph, visited_hash_table)" offset_of!(wsp_ggml_cgraph, visited_hash_table) => 40, 24;
    "offsetof(struct wsp_ggml_cgraph, order)" offset_of!(wsp_ggml_cgraph, order) => 56, 32;
    "offsetof(struct wsp_ggml_cgraph, perf_time_us)" offset_of!(wsp_ggml_cgraph, perf_time_us) => 72, 48;
    "sizeof(struct wsp_ggml_hash_set)" size_of::<wsp_ggml_hash_set>() => 16, 8;
    "sizeof(struct wsp_ggml_cplan)" size_of::<wsp_ggml_cplan>() => 40, 20;
    "offsetof(struct wsp_ggml_cplan, abort_callback)" offset_of!(wsp_ggml_cplan, abort_callback) => 24, 12;
    "offsetof(struct wsp_ggml_tensor, type)" offset_of!(wsp_ggml_tensor, type_);
    "offsetof(struct wsp_ggml_tensor, backend)" offset_of!(wsp_ggml_tensor, backend);
    "offsetof(struct wsp_ggml_tensor, op_params)" offset_of!(wsp_ggml_tensor, op_params);
    "offsetof(struct wsp_ggml_tensor, grad)" offset_of!(wsp_ggml_tensor, grad);
    "offsetof(struct wsp_ggml_tensor, perf_runs)" offset_of!(wsp_ggml_tensor, perf_runs);
    "offsetof(struct wsp_ggml_tensor, perf_cycles)" offset_of!(wsp_ggml_tensor, perf_cycles);
    "offsetof(struct wsp_ggml_tensor, perf_time_us)" offset_of!(wsp_ggml_tensor, perf_time_us);
    "offsetof(struct wsp_ggml_tensor, view_offs)" offset_of!(wsp_ggml_tensor, view_offs);
    "offsetof(struct wsp_ggml_tensor, padding)" offset_of!(wsp_ggml_tensor, padding);
    "offsetof(struct wsp_ggml_cgraph, size)" offset_of!(wsp_ggml_cgraph, size);
    "offsetof(struct wsp_ggml_cgraph, n_nodes)" offset_of!(wsp_ggml_cgraph, n_nodes);
    "offsetof(struct wsp_ggml_cgraph, n_leafs)" offset_of!(wsp_ggml_cgraph, n_leafs);
    "offsetof(struct wsp_ggml_cgraph, nodes)" offset_of!(wsp_ggml_cgraph, nodes);
    "offsetof(struct wsp_ggml_cgraph, grads)" offset_of!(wsp_ggml_cgraph, grads);
    "offsetof(struct wsp_ggml_cgraph, leafs)" offset_of!(wsp_ggml_cgraph, leafs);
    "offsetof(struct wsp_ggml_cgraph, perf_runs)" offset_of!(wsp_ggml_cgraph, perf_runs);
    "offsetof(struct wsp_ggml_cgraph, perf_cycles)" offset_of!(wsp_ggml_cgraph, perf_cycles);
    "offsetof(struct wsp_ggml_hash_set, size)" offset_of!(wsp_ggml_hash_set, size);
    "offsetof(struct wsp_ggml_hash_set, keys)" offset_of!(wsp_ggml_hash_set, keys);
    "offsetof(struct wsp_ggml_cplan, work_size)" offset_of!(wsp_ggml_cplan, work_size);
    "offsetof(struct wsp_ggml_cplan, work_data)" offset_of!(wsp_ggml_cplan, work_data);
    "offsetof(struct wsp_ggml_cplan, n_threads)" offset_of!(wsp_ggml_cplan, n_threads);
    "offsetof(struct wsp_ggml_cplan, abort_callback_data)" offset_of!(wsp_ggml_cplan, abort_callback_data);
    "sizeof(struct wsp_ggml_init_params)" size_of::<wsp_ggml_init_params>();
    "offsetof(struct wsp_ggml_init_params, mem_size)" offset_of!(wsp_ggml_init_params, mem_size);
    "offsetof(struct wsp_ggml_init_params, mem_buffer)" offset_of!(wsp_ggml_init_params, mem_buffer);
    "offsetof(struct wsp_ggml_init_params, no_alloc)" offset_of!(wsp_ggml_init_params, no_alloc);
}

/// Opaque `struct wsp_ggml_context` (ggml.h).
#[repr(C)]
pub struct wsp_ggml_context {
    _private: [u8; 0],
}

/// `struct wsp_ggml_init_params` (ggml.h).
#[repr(C)]
pub struct wsp_ggml_init_params {
    pub mem_size: usize,
    pub mem_buffer: *mut c_void,
    pub no_alloc: bool,
}

extern "C" {
    pub fn wsp_ggml_init(params: wsp_ggml_init_params) -> *mut wsp_ggml_context;
    pub fn wsp_ggml_free(ctx: *mut wsp_ggml_context);
    pub fn wsp_ggml_tensor_overhead() -> usize;
    pub fn wsp_ggml_graph_overhead_custom(size: usize, grads: bool) -> usize;
    pub fn wsp_ggml_new_graph_custom(ctx: *mut wsp_ggml_context, size: usize, grads: bool) -> *mut wsp_ggml_cgraph;
    pub fn wsp_ggml_dup_tensor(ctx: *mut wsp_ggml_context, src: *const wsp_ggml_tensor) -> *mut wsp_ggml_tensor;
    pub fn wsp_ggml_tallocr_new_from_buffer(buffer: *mut wsp_ggml_backend_buffer) -> wsp_ggml_tallocr_t;
    pub fn wsp_ggml_tallocr_alloc(talloc: wsp_ggml_tallocr_t, tensor: *mut wsp_ggml_tensor);
    pub fn wsp_ggml_nbytes(tensor: *const wsp_ggml_tensor) -> usize;
    pub fn wsp_ggml_op_name(op: c_int) -> *const c_char;
    pub fn wsp_ggml_graph_plan(cgraph: *mut wsp_ggml_cgraph, n_threads: c_int) -> wsp_ggml_cplan;
    pub fn wsp_ggml_graph_compute(cgraph: *mut wsp_ggml_cgraph, cplan: *mut wsp_ggml_cplan) -> c_int;

    pub fn wsp_ggml_tallocr_new_from_backend(backend: *mut wsp_ggml_backend, size: usize) -> wsp_ggml_tallocr_t;
    pub fn wsp_ggml_tallocr_new_measure_from_backend(backend: *mut wsp_ggml_backend) -> wsp_ggml_tallocr_t;
    pub fn wsp_ggml_tallocr_free(talloc: wsp_ggml_tallocr_t);
    pub fn wsp_ggml_tallocr_get_buffer(talloc: wsp_ggml_tallocr_t) -> *mut wsp_ggml_backend_buffer;
    pub fn wsp_ggml_tallocr_is_measure(talloc: wsp_ggml_tallocr_t) -> bool;
    pub fn wsp_ggml_tallocr_max_size(talloc: wsp_ggml_tallocr_t) -> usize;
    pub fn wsp_ggml_tallocr_reset(talloc: wsp_ggml_tallocr_t);
}
