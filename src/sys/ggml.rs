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

/// `enum wsp_ggml_op` values the scheduler needs (same in rc.4 and v1.5.0
/// up to TRANSPOSE; each is in the constants table below, checked against
/// the C compiler's ggml.h).
pub const WSP_GGML_OP_NONE: c_int = 0;
pub const WSP_GGML_OP_ADD: c_int = 2;
pub const WSP_GGML_OP_ADD1: c_int = 3;
pub const WSP_GGML_OP_SUB: c_int = 5;
pub const WSP_GGML_OP_MUL: c_int = 6;
pub const WSP_GGML_OP_DIV: c_int = 7;
pub const WSP_GGML_OP_SQR: c_int = 8;
pub const WSP_GGML_OP_SQRT: c_int = 9;
pub const WSP_GGML_OP_LOG: c_int = 10;
pub const WSP_GGML_OP_RMS_NORM: c_int = 20;
pub const WSP_GGML_OP_SCALE: c_int = 25;
pub const WSP_GGML_OP_RESHAPE: c_int = 29;
pub const WSP_GGML_OP_VIEW: c_int = 30;
pub const WSP_GGML_OP_PERMUTE: c_int = 31;
pub const WSP_GGML_OP_TRANSPOSE: c_int = 32;
pub const WSP_GGML_OP_DIAG_MASK_INF: c_int = 36;
pub const WSP_GGML_OP_DIAG_MASK_ZERO: c_int = 37;
pub const WSP_GGML_OP_SOFT_MAX: c_int = 38;
pub const WSP_GGML_OP_ROPE: c_int = 40;
pub const WSP_GGML_OP_UNARY: c_int = 57;

/// The names (ggml.c's `GGML_OP_NAME`) of the ops ggml-alloc may compute
/// in place, `UNARY` last: their values differ between ggml versions
/// (whisper.rn rc.4's convolution ops come before `UNARY`, v1.5.0's are
/// fewer), so the scheduler looks them up in the ggml it is linked with
/// (`ggml::in_place_ops`).
pub const WSP_GGML_OPS_IN_PLACE_NAMES: [&str; 15] = [
    "ADD",
    "ADD1",
    "SUB",
    "MUL",
    "DIV",
    "SQR",
    "SQRT",
    "LOG",
    "RMS_NORM",
    "SCALE",
    "DIAG_MASK_INF",
    "DIAG_MASK_ZERO",
    "SOFT_MAX",
    "ROPE",
    "UNARY",
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

/// ggml-alloc's private `struct ggml_tallocr` (ggml-alloc.c of whisper.cpp
/// 1.5, as shipped in whisper.rn 0.4.0-rc.4; `GGML_ALLOCATOR_DEBUG` only
/// appends a field). ggml-alloc has no call that says which parts of a
/// buffer its allocator has handed out since the last reset, and the
/// scheduler needs exactly that to place a split after the caller's inputs
/// in a compute buffer (`sched_get_tallocr`). Read only through
/// `talloc::read_tallocr`, field by field in this order, each checked
/// against what the public calls say before the next is read; the C bools
/// are read as bytes (any value is a valid `u8`, not every one a valid
/// `bool`). Offsets: `TALLOCR_LAYOUT`.
#[repr(C)]
pub(crate) struct TallocrHead {
    pub buffer: *mut wsp_ggml_backend_buffer,
    /// C `bool`
    pub buffer_owned: u8,
    pub base: *mut c_void,
    pub alignment: usize,
    pub n_free_blocks: c_int,
    pub free_blocks: [FreeBlock; TALLOCR_MAX_FREE_BLOCKS],
    pub max_size: usize,
    /// C `bool`
    pub measure: u8,
}

/// `struct free_block` of ggml-alloc.c.
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

// ggml-alloc.c's private structs: ffi-tests compiles these expressions with
// the struct definitions copied from the ggml-alloc.c under test.
layout! {
    TALLOCR_LAYOUT:
    "sizeof(struct wsp_ggml_tallocr)" size_of::<TallocrHead>() => 4152, 2076;
    "offsetof(struct wsp_ggml_tallocr, buffer)" offset_of!(TallocrHead, buffer) => 0, 0;
    "offsetof(struct wsp_ggml_tallocr, buffer_owned)" offset_of!(TallocrHead, buffer_owned) => 8, 4;
    "sizeof(((struct wsp_ggml_tallocr *)0)->buffer_owned)" size_of::<u8>() => 1, 1;
    "offsetof(struct wsp_ggml_tallocr, base)" offset_of!(TallocrHead, base) => 16, 8;
    "offsetof(struct wsp_ggml_tallocr, alignment)" offset_of!(TallocrHead, alignment) => 24, 12;
    "offsetof(struct wsp_ggml_tallocr, n_free_blocks)" offset_of!(TallocrHead, n_free_blocks) => 32, 16;
    "sizeof(((struct wsp_ggml_tallocr *)0)->n_free_blocks)" size_of::<c_int>() => 4, 4;
    "offsetof(struct wsp_ggml_tallocr, free_blocks)" offset_of!(TallocrHead, free_blocks) => 40, 20;
    "offsetof(struct wsp_ggml_tallocr, max_size)" offset_of!(TallocrHead, max_size) => 4136, 2068;
    "offsetof(struct wsp_ggml_tallocr, measure)" offset_of!(TallocrHead, measure) => 4144, 2072;
    "sizeof(((struct wsp_ggml_tallocr *)0)->measure)" size_of::<u8>() => 1, 1;
    "sizeof(struct free_block)" size_of::<FreeBlock>() => 16, 8;
    "offsetof(struct free_block, addr)" offset_of!(FreeBlock, addr) => 0, 0;
    "offsetof(struct free_block, size)" offset_of!(FreeBlock, size) => 8, 4;
    "MAX_FREE_BLOCKS" TALLOCR_MAX_FREE_BLOCKS => 256, 256;
}

// The constants of ggml.h the crate relies on (enum values and limits), as
// the same kind of facts.
layout! {
    GGML_CONSTANTS:
    "WSP_GGML_MAX_DIMS" WSP_GGML_MAX_DIMS => 4, 4;
    "WSP_GGML_MAX_SRC" WSP_GGML_MAX_SRC => 6, 6;
    "WSP_GGML_MAX_NAME" WSP_GGML_MAX_NAME => 64, 64;
    "WSP_GGML_MAX_OP_PARAMS" WSP_GGML_MAX_OP_PARAMS => 64, 64;
    "WSP_GGML_DEFAULT_N_THREADS" WSP_GGML_DEFAULT_N_THREADS as usize => 4, 4;
    "WSP_GGML_OP_NONE" WSP_GGML_OP_NONE as usize => 0, 0;
    "WSP_GGML_OP_ADD" WSP_GGML_OP_ADD as usize => 2, 2;
    "WSP_GGML_OP_ADD1" WSP_GGML_OP_ADD1 as usize => 3, 3;
    "WSP_GGML_OP_SUB" WSP_GGML_OP_SUB as usize => 5, 5;
    "WSP_GGML_OP_MUL" WSP_GGML_OP_MUL as usize => 6, 6;
    "WSP_GGML_OP_DIV" WSP_GGML_OP_DIV as usize => 7, 7;
    "WSP_GGML_OP_SQR" WSP_GGML_OP_SQR as usize => 8, 8;
    "WSP_GGML_OP_SQRT" WSP_GGML_OP_SQRT as usize => 9, 9;
    "WSP_GGML_OP_LOG" WSP_GGML_OP_LOG as usize => 10, 10;
    "WSP_GGML_OP_RMS_NORM" WSP_GGML_OP_RMS_NORM as usize => 20, 20;
    "WSP_GGML_OP_SCALE" WSP_GGML_OP_SCALE as usize => 25, 25;
    "WSP_GGML_OP_RESHAPE" WSP_GGML_OP_RESHAPE as usize => 29, 29;
    "WSP_GGML_OP_VIEW" WSP_GGML_OP_VIEW as usize => 30, 30;
    "WSP_GGML_OP_PERMUTE" WSP_GGML_OP_PERMUTE as usize => 31, 31;
    "WSP_GGML_OP_TRANSPOSE" WSP_GGML_OP_TRANSPOSE as usize => 32, 32;
    "WSP_GGML_OP_DIAG_MASK_INF" WSP_GGML_OP_DIAG_MASK_INF as usize => 36, 36;
    "WSP_GGML_OP_DIAG_MASK_ZERO" WSP_GGML_OP_DIAG_MASK_ZERO as usize => 37, 37;
    "WSP_GGML_OP_SOFT_MAX" WSP_GGML_OP_SOFT_MAX as usize => 38, 38;
    "WSP_GGML_OP_ROPE" WSP_GGML_OP_ROPE as usize => 40, 40;
    "WSP_GGML_OP_UNARY" WSP_GGML_OP_UNARY as usize => 57, 57;
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

    pub fn wsp_ggml_tallocr_new_measure_from_backend(backend: *mut wsp_ggml_backend) -> wsp_ggml_tallocr_t;
    pub fn wsp_ggml_tallocr_free(talloc: wsp_ggml_tallocr_t);
    pub fn wsp_ggml_tallocr_get_buffer(talloc: wsp_ggml_tallocr_t) -> *mut wsp_ggml_backend_buffer;
    pub fn wsp_ggml_tallocr_is_measure(talloc: wsp_ggml_tallocr_t) -> bool;
    pub fn wsp_ggml_tallocr_max_size(talloc: wsp_ggml_tallocr_t) -> usize;
    pub fn wsp_ggml_tallocr_reset(talloc: wsp_ggml_tallocr_t);
}
