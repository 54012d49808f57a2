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

/// `struct wsp_ggml_tensor` (ggml.h).
#[repr(C)]
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
}

/// `struct wsp_ggml_hash_set` (ggml.h), inside `struct wsp_ggml_cgraph`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct wsp_ggml_hash_set {
    pub size: usize,
    pub keys: *mut *mut wsp_ggml_tensor,
}

/// `struct wsp_ggml_cgraph` (ggml.h).
#[repr(C)]
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

/// Sizes and offsets as gcc lays out ggml.h's structs on each target
/// (64-bit, and 32-bit x86, where `int64_t` is 4-aligned inside structs);
/// other targets are checked from C by ffi-tests' layout_check.c.
macro_rules! layout {
    ($($x:expr => $b64:expr, $x86:expr;)*) => {
        const _: () = {
            $(
                #[cfg(target_pointer_width = "64")]
                assert!($x == $b64);
                #[cfg(all(target_arch = "x86", target_pointer_width = "32"))]
                assert!($x == $x86);
            )*
        };
    };
}
pub(crate) use layout;

use core::mem::{offset_of, size_of};
layout! {
    size_of::<wsp_ggml_tensor>() => 352, 276;
    offset_of!(wsp_ggml_tensor, buffer) => 8, 8;
    offset_of!(wsp_ggml_tensor, n_dims) => 16, 12;
    offset_of!(wsp_ggml_tensor, ne) => 24, 16;
    offset_of!(wsp_ggml_tensor, nb) => 56, 48;
    offset_of!(wsp_ggml_tensor, op) => 88, 64;
    offset_of!(wsp_ggml_tensor, is_param) => 156, 132;
    offset_of!(wsp_ggml_tensor, src) => 168, 140;
    offset_of!(wsp_ggml_tensor, view_src) => 240, 184;
    offset_of!(wsp_ggml_tensor, data) => 256, 192;
    offset_of!(wsp_ggml_tensor, name) => 264, 196;
    offset_of!(wsp_ggml_tensor, extra) => 328, 260;
    size_of::<wsp_ggml_cgraph>() => 80, 56;
    offset_of!(wsp_ggml_cgraph, visited_hash_table) => 40, 24;
    offset_of!(wsp_ggml_cgraph, order) => 56, 32;
    offset_of!(wsp_ggml_cgraph, perf_time_us) => 72, 48;
    size_of::<wsp_ggml_hash_set>() => 16, 8;
    size_of::<wsp_ggml_cplan>() => 40, 20;
    offset_of!(wsp_ggml_cplan, abort_callback) => 24, 12;
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
    pub fn wsp_ggml_blck_size(type_: c_int) -> c_int;
    pub fn wsp_ggml_type_size(type_: c_int) -> usize;
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
