// The C backend of the tests, written against ggml-backend-impl.h. It owns its
// memory (malloc), has its own name, counts every iface call, and can be
// built without cpy_tensor_from / cpy_tensor_to, with a supports_op that
// rejects some ops (and counts the rejected nodes it is given all the same),
// with a limit on the buffers it can allocate, or as a deliberately wrong
// backend that corrupts the output of one unary op. It computes with ggml.c's
// CPU kernels on its own host memory (or through a CPU backend it is given),
// so results are comparable bit for bit.
#pragma once

#include "ggml-backend-impl.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum test_backend_call {
    TB_GET_NAME, TB_FREE, TB_ALLOC_BUFFER, TB_GET_ALIGNMENT,
    TB_SET_TENSOR_ASYNC, TB_GET_TENSOR_ASYNC, TB_SYNCHRONIZE,
    TB_CPY_TENSOR_FROM, TB_CPY_TENSOR_TO,
    TB_GRAPH_PLAN_CREATE, TB_GRAPH_PLAN_FREE, TB_GRAPH_PLAN_COMPUTE,
    TB_GRAPH_COMPUTE, TB_SUPPORTS_OP,
    // buffer iface calls
    TB_BUF_FREE_BUFFER, TB_BUF_GET_BASE, TB_BUF_GET_ALLOC_SIZE, TB_BUF_INIT_TENSOR, TB_BUF_FREE_TENSOR,
    TB_N_CALLS
};

// Which interface slots the backend fills, after the real C backends of this
// generation (whisper.cpp v1.5.0; see shared FACTS.md). The default takes
// TEST_BACKEND_SHAPE from the environment ("full", "cuda", "metal"; unset:
// full), so that every program runs unchanged with each pattern.
enum test_backend_shape {
    TB_SHAPE_DEFAULT = 0,
    // every slot set; the options decide the copy slots and buffer hooks
    TB_SHAPE_FULL,
    // ggml-cuda.cu: supports_op, cpy_tensor_from and cpy_tensor_to NULL (so
    // it accepts every op: the rejected ops are ignored); its buffers have
    // get_alloc_size (CUDA's: a quantized tensor padded by one row's worth
    // of elements up to a multiple of 512) and an init_tensor that gives
    // every tensor an `extra` from a ring of 4096 per buffer (CUDA's: 8192; a view at
    // offset 0 shares its source's) holding tensor->data, and zeroes a
    // non-view's padding, as CUDA does; no free_tensor. Computing a tensor of its buffer whose `extra` does not
    // hold its data is counted (uninit_computed): CUDA would compute on
    // other memory.
    TB_SHAPE_CUDA,
    // ggml-metal.m: graph_plan_create/free/compute NULL, both copy slots
    // set, supports_op set (true for every op unless the options reject
    // some); its buffers have no get_alloc_size, init_tensor or free_tensor.
    TB_SHAPE_METAL,
};

// The shape a test backend made with `shape` gets (TB_SHAPE_DEFAULT resolved).
enum test_backend_shape test_backend_resolve_shape(enum test_backend_shape shape);

struct test_backend_options {
    const char * name;        // e.g. "TEST0"; copied
    size_t alignment;         // buffer alignment reported by get_alignment (power of two, >= 8)
    bool has_cpy_tensor_from; // fill the cpy_tensor_from slot
    bool has_cpy_tensor_to;   // fill the cpy_tensor_to slot
    bool has_buffer_hooks;    // fill get_alloc_size / init_tensor / free_tensor in its buffers
    // ops (enum wsp_ggml_op values) that supports_op rejects; terminated by -1 or n_rejected_ops
    const int * rejected_ops;
    int n_rejected_ops;
    // a deliberately wrong backend: after computing, flip a mantissa bit of
    // every element of the nodes of this unary op (enum wsp_ggml_unary_op)
    bool corrupt;
    int corrupt_unary;
    // compute through this backend (a CPU backend, not owned) instead of
    // with ggml.c directly
    wsp_ggml_backend_t delegate;
    // alloc_buffer returns NULL above this size (0: no limit); also
    // test_backend_set_max_alloc
    size_t max_alloc;
    // the slot pattern (see enum test_backend_shape); overrides the copy
    // slots and buffer hooks above when not full
    enum test_backend_shape shape;
};

struct test_backend_stats {
    long calls[TB_N_CALLS];
    long bytes_set;           // bytes written by set_tensor_async and cpy_tensor_from
    long bytes_get;           // bytes read by get_tensor_async
    long nodes_computed;      // sum of n_nodes over graph_compute / plan_compute
    long rejected_computed;   // non-view nodes computed although supports_op rejects them
    long corrupted;           // nodes corrupted (see test_backend_options::corrupt)
    long uninit_computed;     // CUDA shape: tensors of its buffers computed without their init_tensor
};

// A function called (process-wide, all test backends) on set_tensor_async,
// get_tensor_async, cpy_tensor_from, cpy_tensor_to, supports_op and a
// buffer's init_tensor, after counting the call: to call back into the
// library from a backend's callback. NULL: none.
typedef void (*test_backend_hook)(enum test_backend_call call, void * data);
void test_backend_set_hook(test_backend_hook hook, void * data);

// Create a test backend. Free it with wsp_ggml_backend_free.
wsp_ggml_backend_t test_backend_new(const struct test_backend_options * opts);

bool test_backend_is(wsp_ggml_backend_t backend);

// Change the ops supports_op rejects (n of them; -1 terminated if n < 0).
void test_backend_set_rejected(wsp_ggml_backend_t backend, const int * ops, int n);

// alloc_buffer returns NULL above `size` bytes from now on (0: no limit).
void test_backend_set_max_alloc(wsp_ggml_backend_t backend, size_t size);

// The shape this backend was made with (never TB_SHAPE_DEFAULT).
enum test_backend_shape test_backend_shape_of(wsp_ggml_backend_t backend);

// Counters of this backend (live pointer, valid until the backend is freed).
struct test_backend_stats * test_backend_stats(wsp_ggml_backend_t backend);

// Print all counters, one per line:
//   "stat <name> <counter> <n>"  exact: graph_compute, graph_plan_create, graph_plan_compute,
//                                graph_plan_free, alloc_buffer, free_buffer, nodes_computed,
//                                buf_init_tensor, buf_free_tensor
//   "~le <name> <counter> <n>"   ours may be lower: set_tensor_async, get_tensor_async,
//                                synchronize, cpy_tensor_from, cpy_tensor_to, bytes_set, bytes_get,
//                                uninit_computed
//   "~ <name> <counter> <n>"     informational: get_name, get_alignment, supports_op, get_base,
//                                buf_get_alloc_size (ours measures every new split first)
// Programs where cpy_tensor_from / cpy_tensor_to are exact print them separately as "stat" lines.
void test_backend_print_stats(wsp_ggml_backend_t backend);

// Number of test-backend buffers currently alive (allocated and not freed), all backends.
long test_backend_live_buffers(void);

#ifdef __cplusplus
}
#endif
