// Benchmark driver, compiled twice into the same process (see build.rs):
//   - BENCH_PREFIX=ours_bench_: against our headers (include/); every
//     wsp_ggml_backend_* call goes to the Rust library;
//   - BENCH_PREFIX=ref_bench_: renamed wsp_ggml_ -> ref_ggml_ and linked with
//     the original ggml-backend.c (and its own copy of ggml).
// Both copies build bit-identical inputs (same shapes, same data, same graph),
// so every benchmark runs the same work through the two implementations.
// Nothing here is timed: the Rust side (criterion, helper binaries) times the
// entry points B(...) below.
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "test_backend.h"

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_CAT2(a, b) a##b
#define BENCH_CAT(a, b) BENCH_CAT2(a, b)
#define B(name) BENCH_CAT(BENCH_PREFIX, name)

#define BCHECK(cond)                                                                       \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: bench check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

// ---------------------------------------------------------------------------
// deterministic data

static uint32_t lcg_next(uint64_t * s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 32);
}

// uniform in [-1, 1)
static float lcg_f32(uint64_t * s) {
    int32_t v = (int32_t)(lcg_next(s) >> 8) - (1 << 23);
    return (float)v / (float)(1 << 23);
}

static uint64_t fnv1a64(const void * data, size_t n) {
    const uint8_t * p = (const uint8_t *)data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

// Fill an allocated tensor (any backend) through wsp_ggml_backend_tensor_set.
static void fill_tensor(struct wsp_ggml_tensor * t, uint64_t * rng, float scale) {
    size_t n = (size_t)wsp_ggml_nelements(t);
    float * f = (float *)malloc(sizeof(float) * (n > 0 ? n : 1));
    BCHECK(f != NULL);
    for (size_t i = 0; i < n; i++) {
        f[i] = lcg_f32(rng) * scale;
    }
    if (t->type == WSP_GGML_TYPE_F32) {
        wsp_ggml_backend_tensor_set(t, f, 0, wsp_ggml_nbytes(t));
    } else if (t->type == WSP_GGML_TYPE_F16) {
        wsp_ggml_fp16_t * h = (wsp_ggml_fp16_t *)malloc(sizeof(wsp_ggml_fp16_t) * (n > 0 ? n : 1));
        BCHECK(h != NULL);
        wsp_ggml_fp32_to_fp16_row(f, h, (int)n);
        wsp_ggml_backend_tensor_set(t, h, 0, wsp_ggml_nbytes(t));
        free(h);
    } else {
        BCHECK(!"fill_tensor: unsupported type");
    }
    free(f);
}

static uint64_t tensor_fnv(const struct wsp_ggml_tensor * t) {
    size_t n = wsp_ggml_nbytes(t);
    void * d = malloc(n > 0 ? n : 1);
    BCHECK(d != NULL);
    wsp_ggml_backend_tensor_get(t, d, 0, n);
    uint64_t h = fnv1a64(d, n);
    free(d);
    return h;
}

static struct wsp_ggml_context * no_alloc_ctx(size_t n_tensors, size_t graph_size) {
    struct wsp_ggml_init_params p = {
        /*.mem_size   =*/ n_tensors * wsp_ggml_tensor_overhead()
                          + (graph_size > 0 ? wsp_ggml_graph_overhead_custom(graph_size, false) : 0) + 4096,
        /*.mem_buffer =*/ NULL,
        /*.no_alloc   =*/ true,
    };
    struct wsp_ggml_context * ctx = wsp_ggml_init(p);
    BCHECK(ctx != NULL);
    return ctx;
}

// The original prints its size on stderr in every wsp_ggml_backend_sched_new.
static int quiet_begin(void) {
    fflush(stderr);
    int saved = dup(2);
    int fd = open("/dev/null", O_WRONLY);
    if (saved >= 0 && fd >= 0) {
        dup2(fd, 2);
    }
    if (fd >= 0) {
        close(fd);
    }
    return saved;
}

static void quiet_end(int saved) {
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
}

// ===========================================================================
// 1 + 2. scheduler: a graph of tiny tensors (16 floats) over 2 or 3 backends
//
// Layer (8 nodes, weights w1, b1, w2 on the layer's backend):
//   h1 = x * w1; h = gelu(h1 + b1); r = soft_max(reshape(h, 8x2));
//   h = reshape(r, 16) * w2; x = h + h1
// Blocks of 8 layers (64 nodes) have their weights on backends[k % n], so the
// scheduler cuts one split per block and copies one input (the previous
// block's output) into each split; the graph input x0 lives on the CPU
// backend (last, lowest priority). n_nodes / 64 splits in all.
// Backends: TEST0, [TEST1,] CPU (1 thread), C test backends from ffi-tests.
//
// The "few-splits" family is the same graph with longer blocks
// (sched_setup_blocks): e.g. 6144 nodes in blocks of 768, 8 splits over 2
// backends, so that per-split costs weigh little and per-node ones dominate.

#define SB_E 16
#define SB_LAYER_NODES 8
#define SB_BLOCK_NODES 64
#define SB_MAX_BACKENDS 3

struct sched_bench {
    int n_backends;
    int n_nodes;
    int n_layers;
    int block_nodes; // nodes per block (one split each): 64, or longer for "few-splits"
    wsp_ggml_backend_t backends[SB_MAX_BACKENDS];
    wsp_ggml_backend_buffer_t buffers[SB_MAX_BACKENDS];
    wsp_ggml_allocr_t allocs[SB_MAX_BACKENDS];
    struct wsp_ggml_context * wctx;
    struct wsp_ggml_context * gctx;
    struct wsp_ggml_tensor * x0;
    struct wsp_ggml_cgraph * graph;
    struct wsp_ggml_cgraph graph_snap;
    struct wsp_ggml_tensor * snap; // [n_nodes]: every node as built
    struct wsp_ggml_tensor * out;
    wsp_ggml_backend_sched_t sched;
    int vary_flip; // benchmark 1 "vary": which of the two graphs comes next
    struct wsp_ggml_tensor ** w; // [3 * n_layers] weights, in their layers' order
    // the "rebuilt" families: the graph built anew in a context of its own
    // for every compute, in one memory block (as ggml's programs do)
    void * rmem;
    size_t rmem_size;
    struct wsp_ggml_context * rctx;
};

// The layers over x0 in ctx: the output, and the graph in sb->graph.
static void sb_build(struct sched_bench * sb, struct wsp_ggml_context * ctx) {
    struct wsp_ggml_tensor * x = sb->x0;
    struct wsp_ggml_tensor ** w = sb->w;
    for (int l = 0; l < sb->n_layers; l++) {
        struct wsp_ggml_tensor * h1 = wsp_ggml_mul(ctx, x, w[3 * l + 0]);
        struct wsp_ggml_tensor * h = wsp_ggml_add(ctx, h1, w[3 * l + 1]);
        h = wsp_ggml_gelu(ctx, h);
        struct wsp_ggml_tensor * r = wsp_ggml_reshape_2d(ctx, h, SB_E / 2, 2);
        r = wsp_ggml_soft_max(ctx, r);
        h = wsp_ggml_reshape_1d(ctx, r, SB_E);
        h = wsp_ggml_mul(ctx, h, w[3 * l + 2]);
        x = wsp_ggml_add(ctx, h, h1);
    }
    sb->out = x;
    sb->graph = wsp_ggml_new_graph_custom(ctx, (size_t)sb->n_nodes, false);
    wsp_ggml_build_forward_expand(sb->graph, x);
    BCHECK(sb->graph->n_nodes == sb->n_nodes);
}

static wsp_ggml_backend_t sb_test_backend(const char * name) {
    struct test_backend_options o;
    memset(&o, 0, sizeof(o));
    o.name = name;
    o.alignment = 32;
    o.has_cpy_tensor_from = true;
    o.has_cpy_tensor_to = true;
    o.has_buffer_hooks = true;
    wsp_ggml_backend_t b = test_backend_new(&o);
    BCHECK(b != NULL);
    return b;
}

// Back to the graph exactly as built: every node's struct (src pointers,
// data, buffer, ...). Both implementations leave allocations in the nodes, and
// the original also leaves src pointers on its input copies.
__attribute__((noinline)) void B(sched_restore)(struct sched_bench * sb) {
    for (int i = 0; i < sb->n_nodes; i++) {
        *sb->graph->nodes[i] = sb->snap[i];
    }
    *sb->graph = sb->graph_snap;
}

void B(sched_create)(struct sched_bench * sb) {
    BCHECK(sb->sched == NULL);
    sb->sched = wsp_ggml_backend_sched_new(sb->backends, sb->n_backends);
    BCHECK(sb->sched != NULL);
}

void B(sched_measure)(struct sched_bench * sb) {
    wsp_ggml_backend_sched_init_measure(sb->sched, sb->graph);
}

void B(sched_destroy)(struct sched_bench * sb) {
    wsp_ggml_backend_sched_free(sb->sched);
    sb->sched = NULL;
}

// Benchmark 2: one full scheduler lifetime. The caller restores the graph
// between calls.
__attribute__((noinline)) void B(sched_cycle)(struct sched_bench * sb) {
    B(sched_create)(sb);
    B(sched_measure)(sb);
    B(sched_destroy)(sb);
}

// Benchmark 1: one compute of the (restored) graph.
__attribute__((noinline)) void B(sched_compute)(struct sched_bench * sb) {
    wsp_ggml_backend_sched_graph_compute(sb->sched, sb->graph);
}

// Benchmark 1b: one compute whose split is made anew: the first node is
// assigned to the last backend first. The original wipes the assignment (and
// splits every graph anew anyway); ours honours it, so it splits again and
// checks that the split fits the compute buffers.
__attribute__((noinline)) void B(sched_compute_fresh)(struct sched_bench * sb) {
    wsp_ggml_backend_sched_set_node_backend(sb->sched, sb->graph->nodes[0], sb->backends[sb->n_backends - 1]);
    wsp_ggml_backend_sched_graph_compute(sb->sched, sb->graph);
}

// Benchmark 1 "vary": one compute of a graph that differs from the previous
// compute's: the graph without its last node, then the whole graph, in turn.
// Every compute needs a fresh split (as a decoder whose KV-cache views grow).
__attribute__((noinline)) void B(sched_compute_vary)(struct sched_bench * sb) {
    sb->vary_flip ^= 1;
    sb->graph->n_nodes = sb->n_nodes - sb->vary_flip;
    wsp_ggml_backend_sched_graph_compute(sb->sched, sb->graph);
}

// The loop measured under callgrind (scripts/callgrind zeroes the counters on
// entry and dumps them on exit, and toggles collection off in restore).
__attribute__((noinline)) void B(sched_loop)(struct sched_bench * sb, int iters) {
    for (int i = 0; i < iters; i++) {
        B(sched_restore)(sb);
        B(sched_compute)(sb);
    }
}

// The same for the "vary" family.
__attribute__((noinline)) void B(vary_loop)(struct sched_bench * sb, int iters) {
    for (int i = 0; i < iters; i++) {
        B(sched_restore)(sb);
        B(sched_compute_vary)(sb);
    }
}

// The same for benchmark 2's scheduler lifetimes (scripts/callgrind --lifecycle).
__attribute__((noinline)) void B(cycle_loop)(struct sched_bench * sb, int iters) {
    for (int i = 0; i < iters; i++) {
        B(sched_restore)(sb);
        B(sched_cycle)(sb);
    }
}

// The "rebuilt" families: as ggml's programs (gpt-2, whisper)
// build their graphs, a new context in the same memory block and a new
// graph for every compute. `drop_last`: the graph without its last node (a
// different graph, as in "vary"). Not measured: only the compute is.
__attribute__((noinline)) void B(sched_rebuild)(struct sched_bench * sb, int drop_last) {
    if (sb->rctx != NULL) {
        wsp_ggml_free(sb->rctx);
    }
    struct wsp_ggml_init_params p = { sb->rmem_size, sb->rmem, true };
    sb->rctx = wsp_ggml_init(p);
    BCHECK(sb->rctx != NULL);
    sb_build(sb, sb->rctx);
    sb->graph->n_nodes -= drop_last;
}

// The loops measured under callgrind: rebuild (not collected), compute.
__attribute__((noinline)) void B(rebuilt_loop)(struct sched_bench * sb, int iters) {
    for (int i = 0; i < iters; i++) {
        B(sched_rebuild)(sb, 0);
        B(sched_compute)(sb);
    }
}

__attribute__((noinline)) void B(rebuilt_vary_loop)(struct sched_bench * sb, int iters) {
    for (int i = 0; i < iters; i++) {
        sb->vary_flip ^= 1;
        B(sched_rebuild)(sb, sb->vary_flip);
        B(sched_compute)(sb);
    }
}

// After a compute (before restoring): hash of the output.
uint64_t B(sched_checksum)(struct sched_bench * sb) {
    return tensor_fnv(sb->out);
}

// Bytes of the scheduler's compute buffers (all backends).
size_t B(sched_buffer_bytes)(struct sched_bench * sb) {
    size_t n = 0;
    for (int i = 0; i < sb->n_backends; i++) {
        n += wsp_ggml_backend_buffer_get_size(wsp_ggml_backend_sched_get_buffer(sb->sched, sb->backends[i]));
    }
    return n;
}

// Size of the graph's visited hash table (the original sizes its tables from it).
size_t B(sched_graph_hash_size)(struct sched_bench * sb) {
    return sb->graph->visited_hash_table.size;
}

int B(sched_n_leafs)(struct sched_bench * sb) {
    return sb->graph->n_leafs;
}

// Sum over the test backends of graph_compute calls (= their splits) and of
// cpy_tensor_from + cpy_tensor_to + set_tensor_async calls (input copies).
void B(sched_test_stats)(struct sched_bench * sb, long * graph_computes, long * copies) {
    *graph_computes = 0;
    *copies = 0;
    for (int i = 0; i < sb->n_backends - 1; i++) {
        struct test_backend_stats * s = test_backend_stats(sb->backends[i]);
        *graph_computes += s->calls[TB_GRAPH_COMPUTE];
        *copies += s->calls[TB_CPY_TENSOR_FROM] + s->calls[TB_CPY_TENSOR_TO] + s->calls[TB_SET_TENSOR_ASYNC];
    }
}

// block_nodes: nodes per block of layers whose weights share a backend (one
// split each): n_nodes / block_nodes splits. A multiple of the layer (8).
struct sched_bench * B(sched_setup_blocks)(int n_backends, int n_nodes, int block_nodes, int with_sched) {
    BCHECK(n_backends >= 2 && n_backends <= SB_MAX_BACKENDS);
    BCHECK(block_nodes >= SB_LAYER_NODES && block_nodes % SB_LAYER_NODES == 0);
    BCHECK(n_nodes >= block_nodes && n_nodes % block_nodes == 0);
    struct sched_bench * sb = (struct sched_bench *)calloc(1, sizeof(*sb));
    BCHECK(sb != NULL);
    sb->n_backends = n_backends;
    sb->n_nodes = n_nodes;
    sb->n_layers = n_nodes / SB_LAYER_NODES;
    sb->block_nodes = block_nodes;

    static const char * names[] = { "TEST0", "TEST1" };
    for (int i = 0; i < n_backends - 1; i++) {
        sb->backends[i] = sb_test_backend(names[i]);
    }
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    BCHECK(cpu != NULL);
    wsp_ggml_backend_cpu_set_n_threads(cpu, 1);
    sb->backends[n_backends - 1] = cpu;

    const size_t tsize = SB_E * sizeof(float);
    for (int i = 0; i < n_backends; i++) {
        size_t size = (size_t)(3 * sb->n_layers + 2) * (tsize + 64) + 8192;
        sb->buffers[i] = wsp_ggml_backend_alloc_buffer(sb->backends[i], size);
        BCHECK(sb->buffers[i] != NULL);
        sb->allocs[i] = wsp_ggml_allocr_new_from_buffer(sb->buffers[i]);
        BCHECK(sb->allocs[i] != NULL);
    }

    // weights and input
    uint64_t rng = 42;
    sb->wctx = no_alloc_ctx((size_t)3 * sb->n_layers + 4, 0);
    sb->x0 = wsp_ggml_new_tensor_1d(sb->wctx, WSP_GGML_TYPE_F32, SB_E);
    wsp_ggml_set_name(sb->x0, "x0");
    wsp_ggml_allocr_alloc(sb->allocs[n_backends - 1], sb->x0);
    fill_tensor(sb->x0, &rng, 1.0f);
    struct wsp_ggml_tensor ** w = (struct wsp_ggml_tensor **)malloc(sizeof(*w) * 3 * (size_t)sb->n_layers);
    BCHECK(w != NULL);
    sb->w = w;
    const int layers_per_block = block_nodes / SB_LAYER_NODES;
    for (int l = 0; l < sb->n_layers; l++) {
        int b = (l / layers_per_block) % n_backends;
        for (int k = 0; k < 3; k++) {
            struct wsp_ggml_tensor * t = wsp_ggml_new_tensor_1d(sb->wctx, WSP_GGML_TYPE_F32, SB_E);
            wsp_ggml_format_name(t, "w%d.%d", l, k);
            wsp_ggml_allocr_alloc(sb->allocs[b], t);
            BCHECK(t->data != NULL);
            fill_tensor(t, &rng, k == 1 ? 0.1f : 0.5f);
            w[3 * l + k] = t;
        }
    }

    // graph
    sb->gctx = no_alloc_ctx((size_t)n_nodes + 16, (size_t)n_nodes);
    sb_build(sb, sb->gctx);
    sb->rmem_size = ((size_t)n_nodes + 16) * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead_custom((size_t)n_nodes, false) + 1024;
    sb->rmem = malloc(sb->rmem_size);
    BCHECK(sb->rmem != NULL);
    sb->snap = (struct wsp_ggml_tensor *)malloc(sizeof(struct wsp_ggml_tensor) * (size_t)n_nodes);
    BCHECK(sb->snap != NULL);
    for (int i = 0; i < n_nodes; i++) {
        sb->snap[i] = *sb->graph->nodes[i];
    }
    sb->graph_snap = *sb->graph;

    if (with_sched) {
        int q = quiet_begin();
        B(sched_create)(sb);
        quiet_end(q);
        B(sched_measure)(sb);
        B(sched_restore)(sb);
    }
    return sb;
}

// Benchmark 1's graph: one split per 64 nodes.
struct sched_bench * B(sched_setup)(int n_backends, int n_nodes, int with_sched) {
    return B(sched_setup_blocks)(n_backends, n_nodes, SB_BLOCK_NODES, with_sched);
}

void B(sched_teardown)(struct sched_bench * sb) {
    if (sb->sched != NULL) {
        B(sched_destroy)(sb);
    }
    for (int i = 0; i < sb->n_backends; i++) {
        wsp_ggml_allocr_free(sb->allocs[i]);
        wsp_ggml_backend_buffer_free(sb->buffers[i]);
    }
    wsp_ggml_free(sb->gctx);
    if (sb->rctx != NULL) {
        wsp_ggml_free(sb->rctx);
    }
    free(sb->rmem);
    free(sb->w);
    wsp_ggml_free(sb->wctx);
    for (int i = 0; i < sb->n_backends; i++) {
        wsp_ggml_backend_free(sb->backends[i]);
    }
    free(sb->snap);
    free(sb);
}

// Send stderr to /dev/null for the rest of the process (forked children of
// benchmark 2, helper binaries): the original prints on every sched_new.
void B(quiet_stderr)(void) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
}

// The original's global `causes[12288][128]` is indexed by hash slot and is
// written past its end when the scheduler's hash table has more slots (graphs
// of more than ~2048 nodes). build.rs links a 4 MiB pad right behind it; this
// returns the distance from `causes` to the pad (-1 in our build).
#ifdef BENCH_REF
extern char causes[][128];
extern char ref_bench_causes_overflow_pad[];
long B(causes_pad_offset)(void) {
    return (long)(ref_bench_causes_overflow_pad - &causes[0][0]);
}
#else
long B(causes_pad_offset)(void) {
    return -1;
}
#endif

// ===========================================================================
// 3. tensor_set / tensor_get / tensor_copy on the CPU backend

struct io_bench {
    size_t size;
    wsp_ggml_backend_t cpu;
    wsp_ggml_backend_buffer_t buffer;
    wsp_ggml_allocr_t alloc;
    struct wsp_ggml_context * ctx;
    struct wsp_ggml_tensor * a;
    struct wsp_ggml_tensor * b;
};

struct io_bench * B(io_setup)(size_t size) {
    struct io_bench * io = (struct io_bench *)calloc(1, sizeof(*io));
    BCHECK(io != NULL);
    io->size = size;
    io->cpu = wsp_ggml_backend_cpu_init();
    io->buffer = wsp_ggml_backend_alloc_buffer(io->cpu, 2 * size + 1024);
    BCHECK(io->buffer != NULL);
    io->alloc = wsp_ggml_allocr_new_from_buffer(io->buffer);
    io->ctx = no_alloc_ctx(4, 0);
    io->a = wsp_ggml_new_tensor_1d(io->ctx, WSP_GGML_TYPE_I8, (int64_t)size);
    io->b = wsp_ggml_new_tensor_1d(io->ctx, WSP_GGML_TYPE_I8, (int64_t)size);
    wsp_ggml_allocr_alloc(io->alloc, io->a);
    wsp_ggml_allocr_alloc(io->alloc, io->b);
    BCHECK(io->a->data != NULL && io->b->data != NULL);
    // touch every page once
    memset(io->a->data, 1, size);
    memset(io->b->data, 2, size);
    return io;
}

void B(io_set)(struct io_bench * io, const void * src) {
    wsp_ggml_backend_tensor_set(io->a, src, 0, io->size);
}

void B(io_get)(struct io_bench * io, void * dst) {
    wsp_ggml_backend_tensor_get(io->a, dst, 0, io->size);
}

void B(io_copy)(struct io_bench * io) {
    wsp_ggml_backend_tensor_copy(io->a, io->b);
}

// The tensors' memory, for the memcpy baselines on the same bytes (0: a, 1: b).
void * B(io_data)(struct io_bench * io, int which) {
    return which == 0 ? io->a->data : io->b->data;
}

void B(io_teardown)(struct io_bench * io) {
    wsp_ggml_allocr_free(io->alloc);
    wsp_ggml_backend_buffer_free(io->buffer);
    wsp_ggml_free(io->ctx);
    wsp_ggml_backend_free(io->cpu);
    free(io);
}

// ===========================================================================
// 4. one whisper-tiny encoder layer at full size on the CPU backend
//
// The graph of whisper.cpp v1.5.0's whisper_build_graph_encoder for one layer
// (no flash attention): n_ctx 1500, n_state 384, n_head 6, F16 weights, F16
// intermediate K/V, F32 activations. Weights and input live in one CPU
// buffer; the compute buffer is sized and filled by ggml-alloc (measure, then
// allocate), as whisper does.

#define ENC_STATE 384
#define ENC_HEAD 6
#define ENC_MLP (4 * ENC_STATE)

struct enc_bench {
    int n_ctx;
    int n_threads;
    void * work;      // enc_compute_direct's work buffer
    size_t work_size;
    wsp_ggml_backend_t cpu;
    struct wsp_ggml_context * wctx;
    wsp_ggml_backend_buffer_t wbuf;
    wsp_ggml_allocr_t walloc;
    struct wsp_ggml_context * gctx;
    wsp_ggml_allocr_t calloc_;
    struct wsp_ggml_cgraph * graph;
    struct wsp_ggml_tensor * out;
    struct wsp_ggml_tensor * inp, * kq_scale;
    struct wsp_ggml_tensor * ln0_w, * ln0_b, * q_w, * q_b, * k_w, * v_w, * v_b, * o_w, * o_b;
    struct wsp_ggml_tensor * ln1_w, * ln1_b, * fc1_w, * fc1_b, * fc2_w, * fc2_b;
};

static struct wsp_ggml_tensor * enc_build(struct enc_bench * e, struct wsp_ggml_context * ctx0) {
    const int n_ctx = e->n_ctx, n_state = ENC_STATE, n_head = ENC_HEAD;
    const float eps = 1e-5f;
    struct wsp_ggml_tensor * inpL = e->inp;
    struct wsp_ggml_tensor * cur = wsp_ggml_norm(ctx0, inpL, eps);
    cur = wsp_ggml_add(ctx0, wsp_ggml_mul(ctx0, cur, e->ln0_w), e->ln0_b);

    struct wsp_ggml_tensor * Qcur = wsp_ggml_add(ctx0, wsp_ggml_mul_mat(ctx0, e->q_w, cur), e->q_b);
    struct wsp_ggml_tensor * Kcur = wsp_ggml_mul_mat(ctx0, e->k_w, cur);
    struct wsp_ggml_tensor * Vcur = wsp_ggml_add(ctx0, wsp_ggml_mul_mat(ctx0, e->v_w, cur), e->v_b);

    struct wsp_ggml_tensor * Q = wsp_ggml_permute(ctx0,
        wsp_ggml_cpy(ctx0, Qcur, wsp_ggml_new_tensor_3d(ctx0, WSP_GGML_TYPE_F32, n_state / n_head, n_head, n_ctx)), 0, 2, 1, 3);
    struct wsp_ggml_tensor * K = wsp_ggml_permute(ctx0,
        wsp_ggml_cpy(ctx0, Kcur, wsp_ggml_new_tensor_3d(ctx0, WSP_GGML_TYPE_F16, n_state / n_head, n_head, n_ctx)), 0, 2, 1, 3);
    struct wsp_ggml_tensor * KQ = wsp_ggml_mul_mat(ctx0, K, Q);
    struct wsp_ggml_tensor * KQ_scaled = wsp_ggml_scale(ctx0, KQ, e->kq_scale);
    struct wsp_ggml_tensor * KQ_soft_max = wsp_ggml_soft_max(ctx0, KQ_scaled);
    struct wsp_ggml_tensor * V = wsp_ggml_cpy(ctx0,
        wsp_ggml_permute(ctx0, wsp_ggml_reshape_3d(ctx0, Vcur, n_state / n_head, n_head, n_ctx), 1, 2, 0, 3),
        wsp_ggml_new_tensor_3d(ctx0, WSP_GGML_TYPE_F16, n_ctx, n_state / n_head, n_head));
    struct wsp_ggml_tensor * KQV = wsp_ggml_mul_mat(ctx0, V, KQ_soft_max);
    struct wsp_ggml_tensor * KQV_merged = wsp_ggml_permute(ctx0, KQV, 0, 2, 1, 3);
    cur = wsp_ggml_cpy(ctx0, KQV_merged, wsp_ggml_new_tensor_2d(ctx0, WSP_GGML_TYPE_F32, n_state, n_ctx));

    cur = wsp_ggml_add(ctx0, wsp_ggml_mul_mat(ctx0, e->o_w, cur), e->o_b);
    cur = wsp_ggml_add(ctx0, cur, inpL);
    struct wsp_ggml_tensor * inpFF = cur;

    cur = wsp_ggml_norm(ctx0, inpFF, eps);
    cur = wsp_ggml_add(ctx0, wsp_ggml_mul(ctx0, cur, e->ln1_w), e->ln1_b);
    cur = wsp_ggml_add(ctx0, wsp_ggml_mul_mat(ctx0, e->fc1_w, cur), e->fc1_b);
    cur = wsp_ggml_gelu(ctx0, cur);
    cur = wsp_ggml_add(ctx0, wsp_ggml_mul_mat(ctx0, e->fc2_w, cur), e->fc2_b);
    return wsp_ggml_add(ctx0, cur, inpFF);
}

static struct wsp_ggml_cgraph * enc_graph(struct enc_bench * e, struct wsp_ggml_context ** ctx_out) {
    struct wsp_ggml_context * ctx = no_alloc_ctx(128, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    e->out = enc_build(e, ctx);
    wsp_ggml_build_forward_expand(g, e->out);
    *ctx_out = ctx;
    return g;
}

struct enc_bench * B(enc_setup)(int n_threads, int n_ctx) {
    struct enc_bench * e = (struct enc_bench *)calloc(1, sizeof(*e));
    BCHECK(e != NULL);
    e->n_ctx = n_ctx;
    e->n_threads = n_threads;
    e->cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(e->cpu, n_threads);

    e->wctx = no_alloc_ctx(32, 0);
    struct wsp_ggml_context * w = e->wctx;
    const enum wsp_ggml_type wt = WSP_GGML_TYPE_F16;
    e->inp   = wsp_ggml_new_tensor_2d(w, WSP_GGML_TYPE_F32, ENC_STATE, n_ctx);
    e->kq_scale = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, 1);
    e->ln0_w = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, ENC_STATE);
    e->ln0_b = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, ENC_STATE);
    e->q_w   = wsp_ggml_new_tensor_2d(w, wt, ENC_STATE, ENC_STATE);
    e->q_b   = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, ENC_STATE);
    e->k_w   = wsp_ggml_new_tensor_2d(w, wt, ENC_STATE, ENC_STATE);
    e->v_w   = wsp_ggml_new_tensor_2d(w, wt, ENC_STATE, ENC_STATE);
    e->v_b   = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, ENC_STATE);
    e->o_w   = wsp_ggml_new_tensor_2d(w, wt, ENC_STATE, ENC_STATE);
    e->o_b   = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, ENC_STATE);
    e->ln1_w = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, ENC_STATE);
    e->ln1_b = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, ENC_STATE);
    e->fc1_w = wsp_ggml_new_tensor_2d(w, wt, ENC_STATE, ENC_MLP);
    e->fc1_b = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, ENC_MLP);
    e->fc2_w = wsp_ggml_new_tensor_2d(w, wt, ENC_MLP, ENC_STATE);
    e->fc2_b = wsp_ggml_new_tensor_1d(w, WSP_GGML_TYPE_F32, ENC_STATE);

    size_t total = 0;
    for (struct wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(w); t != NULL; t = wsp_ggml_get_next_tensor(w, t)) {
        total += wsp_ggml_nbytes(t) + 128;
    }
    e->wbuf = wsp_ggml_backend_alloc_buffer(e->cpu, total + 4096);
    e->walloc = wsp_ggml_allocr_new_from_buffer(e->wbuf);
    uint64_t rng = 7;
    for (struct wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(w); t != NULL; t = wsp_ggml_get_next_tensor(w, t)) {
        wsp_ggml_allocr_alloc(e->walloc, t);
        BCHECK(t->data != NULL);
        float scale = t->type == WSP_GGML_TYPE_F16 ? 0.05f : (t == e->inp ? 1.0f : 0.1f);
        fill_tensor(t, &rng, scale);
    }
    float s = 1.0f / sqrtf((float)ENC_STATE / ENC_HEAD);
    wsp_ggml_backend_tensor_set(e->kq_scale, &s, 0, sizeof(s));

    // measure, then allocate a fresh graph (as whisper.cpp does)
    struct wsp_ggml_context * mctx = NULL;
    struct wsp_ggml_cgraph * mg = enc_graph(e, &mctx);
    wsp_ggml_allocr_t measure = wsp_ggml_allocr_new_measure_from_backend(e->cpu);
    size_t need = wsp_ggml_allocr_alloc_graph(measure, mg);
    wsp_ggml_allocr_free(measure);
    wsp_ggml_free(mctx);

    e->calloc_ = wsp_ggml_allocr_new_from_backend(e->cpu, need);
    e->graph = enc_graph(e, &e->gctx);
    wsp_ggml_allocr_alloc_graph(e->calloc_, e->graph);
    return e;
}

void B(enc_compute)(struct enc_bench * e) {
    wsp_ggml_backend_graph_compute(e->cpu, e->graph);
}

// Control for benchmark 4: the same graph, buffers and threads, computed by
// this copy of ggml.c directly (graph_plan + graph_compute, work buffer kept
// between calls, as the CPU backend does), without any ggml-backend code. A
// difference between the two copies here is code placement, not the library.
void B(enc_compute_direct)(struct enc_bench * e) {
    struct wsp_ggml_cplan cp = wsp_ggml_graph_plan(e->graph, e->n_threads);
    if (cp.work_size > e->work_size) {
        free(e->work);
        e->work = malloc(cp.work_size);
        BCHECK(e->work != NULL);
        e->work_size = cp.work_size;
    }
    cp.work_data = (uint8_t *)e->work;
    BCHECK(wsp_ggml_graph_compute(e->graph, &cp) == 0);
}

uint64_t B(enc_checksum)(struct enc_bench * e) {
    return tensor_fnv(e->out);
}

int B(enc_n_nodes)(struct enc_bench * e) {
    return e->graph->n_nodes;
}

void B(enc_teardown)(struct enc_bench * e) {
    wsp_ggml_allocr_free(e->calloc_);
    wsp_ggml_free(e->gctx);
    wsp_ggml_allocr_free(e->walloc);
    wsp_ggml_backend_buffer_free(e->wbuf);
    wsp_ggml_free(e->wctx);
    wsp_ggml_backend_free(e->cpu);
    free(e->work);
    free(e);
}

// ===========================================================================
// 5. the per-compute families: every compute its own callgrind dump
//
// scripts/callgrind --family chain|chain-grow|decoder. As ggml's programs
// do, the graph is built anew before every compute, in a new context on one
// memory block (step_rebuild, not measured); the scheduler is measured once
// with the largest graph that will be computed, and then computes with no
// warm-up: the first compute measured is the first after init_measure.
// step_loop computes `iters` times; callgrind dumps after every call of
// step_compute, so each compute is measured on its own (a scheduler's cost
// may differ from one compute to the next: the targets are per compute).
// Per compute, step_loop also records (outside step_compute, so not
// measured) the graph's size, the test backend's graph_compute calls and a
// hash of the output, which scripts/callgrind compares between the two
// implementations.
// Backends: TEST0 (the C test backend, as above) and the CPU backend (1
// thread), in that order of priority.

#define STEP_MAX 64

// chain: a long elementwise graph. n_ops elementwise nodes over
// 4-float tensors, the op sequence add, gelu, mul, silu, scale, add
// repeated; each block of block_ops nodes has its weights (the second
// operands of add and mul, and scale's factor: a 1-element tensor in this
// generation of ggml) on TEST0 and the CPU backend in turn, so that the
// scheduler cuts one split per block (6000 nodes in blocks of 750: 8
// splits). The graph input x0 lives on the CPU backend; the graph has room
// for 8192 nodes. "chain" computes the same graph every time; "chain-grow"
// appends one gelu more at every compute (compute i, from 0, has n_ops + i
// nodes), so that every graph differs from the previous compute's.
#define CHAIN_E 4
#define CHAIN_GROUP 6 // add, gelu, mul, silu, scale, add
#define CHAIN_GROUP_WEIGHTS 4
#define CHAIN_GRAPH_SIZE 8192

// decoder: shaped like ggml's gpt-2 example with a GPU (examples/gpt-2,
// main.cpp's gpt2_graph, as ffi-tests' sched_gpt2.c builds it): token and
// position embeddings (get_rows, on the CPU backend with the inputs), then
// per layer norm, the fused q/k/v projection (mul_mat + bias, split into
// views), the new token's k and v written into views of the KV cache with
// wsp_ggml_cpy, attention over views of the cache of n_past + 1 positions
// (mul_mat(K, Q), scale, diag_mask_inf, soft_max, mul_mat(V, KQ)), the
// projection, the residual, the MLP (mul_mat + bias, gelu, mul_mat + bias)
// and the residual again; then the final norm and the head. One token per
// compute, n_past one more every compute (from 0), so every layer's
// attention shapes change every time. The weights of the odd layers, the
// final norm, the head and the KV cache are on TEST0, as the example places
// them with half of the layers offloaded (but every other layer rather than
// the last half, for more splits); the even layers' weights, the embeddings
// and the inputs (token, position, the attention's scale factor) are on the
// CPU backend. The scale factor pulls every layer's scale, diag_mask_inf and
// soft_max to the CPU, the KV cache its cpy, mul_mat(K, Q) and
// mul_mat(V, KQ) to TEST0, as in the example: 46 splits at 8 layers, most
// of a few nodes. The test backend computes every op with ggml.c's CPU
// kernels, so both backends compute all of these.
#define DEC_EMBD 64
#define DEC_HEAD 4
#define DEC_CTX 64
#define DEC_VOCAB 128
#define DEC_GRAPH_SIZE WSP_GGML_DEFAULT_GRAPH_SIZE

struct dec_layer {
    struct wsp_ggml_tensor *ln_1_g, *ln_1_b, *ln_2_g, *ln_2_b;
    struct wsp_ggml_tensor *attn_w, *attn_b, *proj_w, *proj_b;
    struct wsp_ggml_tensor *fc_w, *fc_b, *mlp_proj_w, *mlp_proj_b;
};

enum step_kind { STEP_CHAIN, STEP_CHAIN_GROW, STEP_DECODER };

// client: the chain as a simple C client builds it. The same weights and
// op sequence; but init_measure gets a graph built in a context of its
// own, freed right after, and every compute a graph built in a context
// wsp_ggml_init allocates itself (mem_buffer NULL), freed right after the
// compute: each graph lands wherever malloc puts it. Shapes:
//   CLIENT_SAME  measured and computed with n_ops nodes (the same shape);
//   CLIENT_NEW   measured with n_ops + iters nodes, computed with n_ops
//                every time (the first compute is a new shape, then the
//                same again);
//   CLIENT_GROW  measured with the largest, compute i has n_ops + i nodes.
// BENCH_HEAP_SHIFT=N in the environment mallocs N bytes before anything
// else the setup allocates, so that every context and tensor lies
// elsewhere (held until teardown).
enum client_shape { CLIENT_NONE, CLIENT_SAME, CLIENT_NEW, CLIENT_GROW };

struct step_bench {
    enum step_kind kind;
    enum client_shape client; // CLIENT_NONE: the graph's context on rmem (or BENCH_OWN_CONTEXT)
    void * heap_shift; // BENCH_HEAP_SHIFT's block
    size_t measured_hash_size; // the measured graph's visited hash table
    wsp_ggml_backend_t backends[2]; // TEST0, CPU
    wsp_ggml_backend_buffer_t buffers[2]; // weights (and the decoder's KV cache, inputs)
    struct wsp_ggml_context * wctx;
    wsp_ggml_backend_sched_t sched;
    // the graph of the next compute, in rctx on rmem
    void * rmem;
    size_t rmem_size;
    struct wsp_ggml_context * rctx;
    struct wsp_ggml_cgraph * graph;
    struct wsp_ggml_tensor * out;
    // chain
    int n_ops;
    int block_ops;
    struct wsp_ggml_tensor * x0;
    struct wsp_ggml_tensor ** w; // [CHAIN_GROUP_WEIGHTS * n_ops / CHAIN_GROUP], in the groups' order
    // decoder
    int n_layer;
    struct dec_layer * layers;
    struct wsp_ggml_tensor *wte, *wpe, *ln_f_g, *ln_f_b, *lm_head;
    struct wsp_ggml_tensor *memory_k, *memory_v, *embd, *position, *kq_scale;
    // per compute (step_loop): graph nodes, test backend graph_compute calls, output hash
    int n_steps;
    int step_nodes[STEP_MAX];
    long step_splits[STEP_MAX];
    uint64_t step_sum[STEP_MAX];
};

// Fill an allocated F32 tensor with center + spread * uniform[-1, 1).
static void fill_tensor_around(struct wsp_ggml_tensor * t, uint64_t * rng, float center, float spread) {
    BCHECK(t->type == WSP_GGML_TYPE_F32);
    size_t n = (size_t)wsp_ggml_nelements(t);
    float * f = (float *)malloc(sizeof(float) * (n > 0 ? n : 1));
    BCHECK(f != NULL);
    for (size_t i = 0; i < n; i++) {
        f[i] = center + spread * lcg_f32(rng);
    }
    wsp_ggml_backend_tensor_set(t, f, 0, wsp_ggml_nbytes(t));
    free(f);
}

static struct step_bench * step_new(enum step_kind kind) {
    struct step_bench * s = (struct step_bench *)calloc(1, sizeof(*s));
    BCHECK(s != NULL);
    s->kind = kind;
    s->backends[0] = sb_test_backend("TEST0");
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    BCHECK(cpu != NULL);
    wsp_ggml_backend_cpu_set_n_threads(cpu, 1);
    s->backends[1] = cpu;
    return s;
}

// One buffer per backend of `size[i]` bytes, and an allocator on each.
static void step_alloc_buffers(struct step_bench * s, const size_t size[2], wsp_ggml_allocr_t alloc[2]) {
    for (int i = 0; i < 2; i++) {
        s->buffers[i] = wsp_ggml_backend_alloc_buffer(s->backends[i], size[i]);
        BCHECK(s->buffers[i] != NULL);
        alloc[i] = wsp_ggml_allocr_new_from_buffer(s->buffers[i]);
        BCHECK(alloc[i] != NULL);
    }
}

static void chain_build(struct step_bench * s, struct wsp_ggml_context * ctx, int n_extra) {
    struct wsp_ggml_tensor * x = s->x0;
    for (int g = 0; g < s->n_ops / CHAIN_GROUP; g++) {
        struct wsp_ggml_tensor ** w = &s->w[CHAIN_GROUP_WEIGHTS * g];
        x = wsp_ggml_add(ctx, x, w[0]);
        x = wsp_ggml_gelu(ctx, x);
        x = wsp_ggml_mul(ctx, x, w[1]);
        x = wsp_ggml_silu(ctx, x);
        x = wsp_ggml_scale(ctx, x, w[2]);
        x = wsp_ggml_add(ctx, x, w[3]);
    }
    for (int i = 0; i < n_extra; i++) {
        x = wsp_ggml_gelu(ctx, x);
    }
    s->out = x;
    s->graph = wsp_ggml_new_graph_custom(ctx, CHAIN_GRAPH_SIZE, false);
    wsp_ggml_build_forward_expand(s->graph, x);
    BCHECK(s->graph->n_nodes == s->n_ops + n_extra);
}

// The example's gpt2_graph for one token at position n_past.
static void dec_build(struct step_bench * s, struct wsp_ggml_context * ctx, int n_past) {
    const int E = DEC_EMBD, H = DEC_HEAD, C = DEC_CTX, N = 1;
    const float eps = 1e-5f;
    BCHECK(n_past + N <= C);
    struct wsp_ggml_cgraph * gf = wsp_ggml_new_graph_custom(ctx, DEC_GRAPH_SIZE, false);

    // the inputs: a token and its position (written here: not measured)
    struct wsp_ggml_tensor * embd = wsp_ggml_view_1d(ctx, s->embd, N, 0);
    struct wsp_ggml_tensor * position = wsp_ggml_view_1d(ctx, s->position, N, 0);
    int32_t token = (int32_t)((n_past * 37 + 11) % DEC_VOCAB);
    int32_t pos = n_past;
    wsp_ggml_backend_tensor_set(s->embd, &token, 0, sizeof(token));
    wsp_ggml_backend_tensor_set(s->position, &pos, 0, sizeof(pos));

    struct wsp_ggml_tensor * inpL = wsp_ggml_add(ctx, wsp_ggml_get_rows(ctx, s->wte, embd), wsp_ggml_get_rows(ctx, s->wpe, position));
    const size_t es = wsp_ggml_element_size(s->memory_k);
    for (int il = 0; il < s->n_layer; il++) {
        const struct dec_layer * l = &s->layers[il];
        struct wsp_ggml_tensor * cur = wsp_ggml_norm(ctx, inpL, eps);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, cur, l->ln_1_g), l->ln_1_b);
        // q, k, v of the new token: one projection, three views
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l->attn_w, cur), l->attn_b);
        struct wsp_ggml_tensor * Qcur = wsp_ggml_view_2d(ctx, cur, E, N, cur->nb[1], 0 * sizeof(float) * E);
        struct wsp_ggml_tensor * Kcur = wsp_ggml_view_2d(ctx, cur, E, N, cur->nb[1], 1 * sizeof(float) * E);
        struct wsp_ggml_tensor * Vcur = wsp_ggml_view_2d(ctx, cur, E, N, cur->nb[1], 2 * sizeof(float) * E);
        // into the KV cache at position n_past
        {
            struct wsp_ggml_tensor * k = wsp_ggml_view_1d(ctx, s->memory_k, N * E, es * E * (size_t)(il * C + n_past));
            struct wsp_ggml_tensor * v = wsp_ggml_view_1d(ctx, s->memory_v, N * E, es * E * (size_t)(il * C + n_past));
            wsp_ggml_build_forward_expand(gf, wsp_ggml_cpy(ctx, Kcur, k));
            wsp_ggml_build_forward_expand(gf, wsp_ggml_cpy(ctx, Vcur, v));
        }
        // attention over the n_past + N cached positions
        struct wsp_ggml_tensor * Q = wsp_ggml_permute(ctx, wsp_ggml_cont_3d(ctx, Qcur, E / H, H, N), 0, 2, 1, 3);
        struct wsp_ggml_tensor * K = wsp_ggml_permute(
            ctx, wsp_ggml_reshape_3d(ctx, wsp_ggml_view_1d(ctx, s->memory_k, (n_past + N) * E, (size_t)il * C * es * E), E / H, H, n_past + N),
            0, 2, 1, 3);
        struct wsp_ggml_tensor * KQ = wsp_ggml_mul_mat(ctx, K, Q);
        struct wsp_ggml_tensor * KQ_scaled = wsp_ggml_scale(ctx, KQ, s->kq_scale);
        struct wsp_ggml_tensor * KQ_masked = wsp_ggml_diag_mask_inf(ctx, KQ_scaled, n_past);
        struct wsp_ggml_tensor * KQ_soft_max = wsp_ggml_soft_max(ctx, KQ_masked);
        struct wsp_ggml_tensor * V_trans = wsp_ggml_cont_3d(
            ctx,
            wsp_ggml_permute(ctx,
                             wsp_ggml_reshape_3d(ctx, wsp_ggml_view_1d(ctx, s->memory_v, (n_past + N) * E, (size_t)il * C * es * E),
                                                 E / H, H, n_past + N),
                             1, 2, 0, 3),
            n_past + N, E / H, H);
        struct wsp_ggml_tensor * KQV = wsp_ggml_mul_mat(ctx, V_trans, KQ_soft_max);
        struct wsp_ggml_tensor * KQV_merged = wsp_ggml_permute(ctx, KQV, 0, 2, 1, 3);
        cur = wsp_ggml_cont_2d(ctx, KQV_merged, E, N);
        // projection, residual
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l->proj_w, cur), l->proj_b);
        cur = wsp_ggml_add(ctx, cur, inpL);
        struct wsp_ggml_tensor * inpFF = cur;
        // MLP, residual
        cur = wsp_ggml_norm(ctx, inpFF, eps);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, cur, l->ln_2_g), l->ln_2_b);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l->fc_w, cur), l->fc_b);
        cur = wsp_ggml_gelu(ctx, cur);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, l->mlp_proj_w, cur), l->mlp_proj_b);
        inpL = wsp_ggml_add(ctx, cur, inpFF);
    }
    inpL = wsp_ggml_norm(ctx, inpL, eps);
    inpL = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, inpL, s->ln_f_g), s->ln_f_b);
    inpL = wsp_ggml_mul_mat(ctx, s->lm_head, inpL);
    wsp_ggml_build_forward_expand(gf, inpL);
    s->out = inpL;
    s->graph = gf;
}

// The graph of compute `step` (from 0), built anew in a new context on
// rmem; with BENCH_OWN_CONTEXT=1 in the environment, in a context that
// ggml_init allocates itself (mem_buffer NULL), as simple clients build
// them, freed after the compute (at the next rebuild). Not measured.
__attribute__((noinline)) void B(step_rebuild)(struct step_bench * s, int step) {
    if (s->rctx != NULL) {
        wsp_ggml_free(s->rctx);
    }
    const char * own = getenv("BENCH_OWN_CONTEXT");
    const bool own_ctx = s->client != CLIENT_NONE || (own != NULL && strcmp(own, "1") == 0);
    struct wsp_ggml_init_params p = { s->rmem_size, own_ctx ? NULL : s->rmem, true };
    s->rctx = wsp_ggml_init(p);
    BCHECK(s->rctx != NULL);
    switch (s->kind) {
        case STEP_CHAIN: chain_build(s, s->rctx, s->client == CLIENT_GROW ? step : 0); break;
        case STEP_CHAIN_GROW: chain_build(s, s->rctx, step); break;
        case STEP_DECODER: dec_build(s, s->rctx, step); break;
    }
}

// The client frees its graph's context as soon as it is done with it.
static void step_client_free(struct step_bench * s) {
    if (s->client != CLIENT_NONE && s->rctx != NULL) {
        wsp_ggml_free(s->rctx);
        s->rctx = NULL;
        s->graph = NULL;
        s->out = NULL;
    }
}

// The scheduler, measured with the graph of compute `last_step` (the
// largest: the most gelus, the longest attention).
static void step_sched(struct step_bench * s, int last_step) {
    int q = quiet_begin();
    s->sched = wsp_ggml_backend_sched_new(s->backends, 2);
    quiet_end(q);
    BCHECK(s->sched != NULL);
    if (s->client == CLIENT_NONE) {
        B(step_rebuild)(s, last_step);
    } else {
        // the client's measure graph: the largest it will compute
        BCHECK(s->kind == STEP_CHAIN);
        if (s->rctx != NULL) {
            wsp_ggml_free(s->rctx);
        }
        struct wsp_ggml_init_params p = { s->rmem_size, NULL, true };
        s->rctx = wsp_ggml_init(p);
        BCHECK(s->rctx != NULL);
        chain_build(s, s->rctx, s->client == CLIENT_SAME ? 0 : last_step + (s->client == CLIENT_NEW ? 1 : 0));
    }
    wsp_ggml_backend_sched_init_measure(s->sched, s->graph);
    s->measured_hash_size = s->graph->visited_hash_table.size;
    step_client_free(s);
}

// chain (grow = 0) or chain-grow (grow = 1), or the client family (grow =
// 2, 3, 4: CLIENT_SAME, CLIENT_NEW, CLIENT_GROW), of n_ops nodes in blocks
// of block_ops, a scheduler measured for `iters` computes.
struct step_bench * B(step_setup_chain)(int n_ops, int block_ops, int grow, int iters) {
    BCHECK(iters >= 1 && iters <= STEP_MAX);
    BCHECK(block_ops >= CHAIN_GROUP && block_ops % CHAIN_GROUP == 0);
    BCHECK(n_ops >= block_ops && n_ops % block_ops == 0);
    BCHECK(grow >= 0 && grow <= 4);
    BCHECK(n_ops + (grow ? iters : 0) <= CHAIN_GRAPH_SIZE);
    const char * shift = getenv("BENCH_HEAP_SHIFT");
    void * heap_shift = NULL;
    if (shift != NULL && atol(shift) > 0) {
        heap_shift = malloc((size_t)atol(shift));
        BCHECK(heap_shift != NULL);
        memset(heap_shift, 1, (size_t)atol(shift)); // (touched: a real client's data)
    }
    struct step_bench * s = step_new(grow == 1 ? STEP_CHAIN_GROW : STEP_CHAIN);
    s->client = grow >= 2 ? (enum client_shape)(grow - 1) : CLIENT_NONE;
    s->heap_shift = heap_shift;
    s->n_ops = n_ops;
    s->block_ops = block_ops;
    const int n_groups = n_ops / CHAIN_GROUP;
    const int n_w = CHAIN_GROUP_WEIGHTS * n_groups;

    const size_t tsize = CHAIN_E * sizeof(float);
    size_t size[2] = { (size_t)n_w * (tsize + 64) + 8192, (size_t)n_w * (tsize + 64) + 8192 };
    wsp_ggml_allocr_t alloc[2];
    step_alloc_buffers(s, size, alloc);

    // weights and input
    uint64_t rng = 4242;
    s->wctx = no_alloc_ctx((size_t)n_w + 4, 0);
    s->x0 = wsp_ggml_new_tensor_1d(s->wctx, WSP_GGML_TYPE_F32, CHAIN_E);
    wsp_ggml_set_name(s->x0, "x0");
    wsp_ggml_allocr_alloc(alloc[1], s->x0);
    fill_tensor(s->x0, &rng, 1.0f);
    s->w = (struct wsp_ggml_tensor **)malloc(sizeof(*s->w) * (size_t)n_w);
    BCHECK(s->w != NULL);
    const int groups_per_block = block_ops / CHAIN_GROUP;
    for (int g = 0; g < n_groups; g++) {
        int b = (g / groups_per_block) % 2;
        for (int k = 0; k < CHAIN_GROUP_WEIGHTS; k++) {
            // k = 2: scale's factor, a scalar
            struct wsp_ggml_tensor * t = wsp_ggml_new_tensor_1d(s->wctx, WSP_GGML_TYPE_F32, k == 2 ? 1 : CHAIN_E);
            wsp_ggml_format_name(t, "w%d.%d", g, k);
            wsp_ggml_allocr_alloc(alloc[b], t);
            BCHECK(t->data != NULL);
            // add: small; mul and scale: around 1, so that the values neither vanish nor grow
            static const float center[CHAIN_GROUP_WEIGHTS] = { 0.0f, 1.0f, 1.0f, 0.0f };
            static const float spread[CHAIN_GROUP_WEIGHTS] = { 0.5f, 0.25f, 0.1f, 0.5f };
            fill_tensor_around(t, &rng, center[k], spread[k]);
            s->w[CHAIN_GROUP_WEIGHTS * g + k] = t;
        }
    }
    for (int i = 0; i < 2; i++) {
        wsp_ggml_allocr_free(alloc[i]);
    }

    s->rmem_size = ((size_t)n_ops + (size_t)iters + 16) * wsp_ggml_tensor_overhead()
                   + wsp_ggml_graph_overhead_custom(CHAIN_GRAPH_SIZE, false) + 1024;
    s->rmem = malloc(s->rmem_size);
    BCHECK(s->rmem != NULL);
    step_sched(s, iters - 1);
    return s;
}

// decoder of n_layer layers, a scheduler measured for `iters` computes
// (n_past 0 .. iters - 1).
struct step_bench * B(step_setup_decoder)(int n_layer, int iters) {
    BCHECK(iters >= 1 && iters <= STEP_MAX && iters <= DEC_CTX);
    BCHECK(n_layer >= 1);
    struct step_bench * s = step_new(STEP_DECODER);
    s->n_layer = n_layer;
    const int E = DEC_EMBD, L = n_layer, C = DEC_CTX, V = DEC_VOCAB;
    wsp_ggml_backend_t test = s->backends[0], cpu = s->backends[1];

    s->wctx = no_alloc_ctx((size_t)(16 + 12 * L), 0);
    struct wsp_ggml_context * ctx = s->wctx;
    s->layers = (struct dec_layer *)calloc((size_t)L, sizeof(struct dec_layer));
    BCHECK(s->layers != NULL);
    s->wte = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, E, V);
    s->wpe = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, E, C);
    s->ln_f_g = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
    s->ln_f_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
    s->lm_head = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, E, V);
    for (int i = 0; i < L; i++) {
        struct dec_layer * l = &s->layers[i];
        l->ln_1_g = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->ln_1_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->ln_2_g = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->ln_2_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->attn_w = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, E, 3 * E);
        l->attn_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 3 * E);
        l->proj_w = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, E, E);
        l->proj_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
        l->fc_w = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, E, 4 * E);
        l->fc_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4 * E);
        l->mlp_proj_w = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 4 * E, E);
        l->mlp_proj_b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, E);
    }
    s->memory_k = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, (int64_t)E * L * C);
    s->memory_v = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, (int64_t)E * L * C);
    s->embd = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, C);
    s->position = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, C);
    s->kq_scale = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 1); // wsp_ggml_scale's factor is a tensor here

    // which backend holds what: TEST0 the odd layers, the output and the
    // KV cache; the CPU the even layers, the embeddings and the inputs (each
    // buffer has room for everything)
    size_t size[2] = { 0, 0 };
    for (struct wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != NULL; t = wsp_ggml_get_next_tensor(ctx, t)) {
        size[0] += wsp_ggml_nbytes(t) + 512;
        size[1] += wsp_ggml_nbytes(t) + 512;
    }
    wsp_ggml_allocr_t alloc[2];
    step_alloc_buffers(s, size, alloc);
#define DEC_ALLOC(t, b) wsp_ggml_allocr_alloc(alloc[(b) == test ? 0 : 1], (t))
    uint64_t rng = 2023;
    DEC_ALLOC(s->wte, cpu);
    DEC_ALLOC(s->wpe, cpu);
    fill_tensor(s->wte, &rng, 0.5f);
    fill_tensor(s->wpe, &rng, 0.1f);
    for (int i = 0; i < L; i++) {
        struct dec_layer * l = &s->layers[i];
        wsp_ggml_backend_t b = i % 2 == 1 ? test : cpu;
        struct wsp_ggml_tensor * t[12] = { l->ln_1_g, l->ln_1_b, l->ln_2_g, l->ln_2_b, l->attn_w, l->attn_b,
                                          l->proj_w, l->proj_b, l->fc_w, l->fc_b, l->mlp_proj_w, l->mlp_proj_b };
        for (int k = 0; k < 12; k++) {
            DEC_ALLOC(t[k], b);
            BCHECK(t[k]->data != NULL);
        }
        fill_tensor_around(l->ln_1_g, &rng, 1.0f, 0.1f);
        fill_tensor(l->ln_1_b, &rng, 0.1f);
        fill_tensor_around(l->ln_2_g, &rng, 1.0f, 0.1f);
        fill_tensor(l->ln_2_b, &rng, 0.1f);
        fill_tensor(l->attn_w, &rng, 0.25f);
        fill_tensor(l->attn_b, &rng, 0.1f);
        fill_tensor(l->proj_w, &rng, 0.25f);
        fill_tensor(l->proj_b, &rng, 0.1f);
        fill_tensor(l->fc_w, &rng, 0.25f);
        fill_tensor(l->fc_b, &rng, 0.1f);
        fill_tensor(l->mlp_proj_w, &rng, 0.125f);
        fill_tensor(l->mlp_proj_b, &rng, 0.1f);
    }
    DEC_ALLOC(s->ln_f_g, test);
    DEC_ALLOC(s->ln_f_b, test);
    DEC_ALLOC(s->lm_head, test);
    fill_tensor_around(s->ln_f_g, &rng, 1.0f, 0.1f);
    fill_tensor(s->ln_f_b, &rng, 0.1f);
    fill_tensor(s->lm_head, &rng, 0.5f);
    // the KV cache, zeroed (only positions already written are read)
    DEC_ALLOC(s->memory_k, test);
    DEC_ALLOC(s->memory_v, test);
    void * zeros = calloc(1, wsp_ggml_nbytes(s->memory_k));
    BCHECK(zeros != NULL);
    wsp_ggml_backend_tensor_set(s->memory_k, zeros, 0, wsp_ggml_nbytes(s->memory_k));
    wsp_ggml_backend_tensor_set(s->memory_v, zeros, 0, wsp_ggml_nbytes(s->memory_v));
    free(zeros);
    // inputs
    DEC_ALLOC(s->embd, cpu);
    DEC_ALLOC(s->position, cpu);
    DEC_ALLOC(s->kq_scale, cpu);
    const float kq_scale = 1.0f / sqrtf((float)E / (float)DEC_HEAD);
    wsp_ggml_backend_tensor_set(s->kq_scale, &kq_scale, 0, sizeof(kq_scale));
#undef DEC_ALLOC
    for (int i = 0; i < 2; i++) {
        wsp_ggml_allocr_free(alloc[i]);
    }

    s->rmem_size = DEC_GRAPH_SIZE * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead_custom(DEC_GRAPH_SIZE, false);
    s->rmem = malloc(s->rmem_size);
    BCHECK(s->rmem != NULL);
    step_sched(s, iters - 1);
    return s;
}

// One compute of the graph step_rebuild built: what callgrind measures
// (--toggle-collect) and dumps after (--dump-after).
__attribute__((noinline)) void B(step_compute)(struct step_bench * s) {
    wsp_ggml_backend_sched_graph_compute(s->sched, s->graph);
}

// `iters` computes, each of a graph built anew: rebuild (not measured),
// compute (measured), then record the compute (not measured).
__attribute__((noinline)) void B(step_loop)(struct step_bench * s, int iters) {
    BCHECK(s->n_steps + iters <= STEP_MAX);
    for (int i = 0; i < iters; i++) {
        B(step_rebuild)(s, i);
        long before = test_backend_stats(s->backends[0])->calls[TB_GRAPH_COMPUTE];
        B(step_compute)(s);
        int k = s->n_steps++;
        s->step_nodes[k] = s->graph->n_nodes;
        s->step_splits[k] = test_backend_stats(s->backends[0])->calls[TB_GRAPH_COMPUTE] - before;
        s->step_sum[k] = tensor_fnv(s->out);
        step_client_free(s);
    }
}

// What step_loop recorded of compute `k` (from 0); false past the last.
bool B(step_result)(struct step_bench * s, int k, int * n_nodes, long * test_splits, uint64_t * checksum) {
    if (k < 0 || k >= s->n_steps) {
        return false;
    }
    *n_nodes = s->step_nodes[k];
    *test_splits = s->step_splits[k];
    *checksum = s->step_sum[k];
    return true;
}

// Size of the measured graph's visited hash table (the original sizes its
// tables from it: see sched_graph_hash_size).
size_t B(step_graph_hash_size)(struct step_bench * s) {
    return s->measured_hash_size;
}

void B(step_teardown)(struct step_bench * s) {
    wsp_ggml_backend_sched_free(s->sched);
    if (s->rctx != NULL) {
        wsp_ggml_free(s->rctx);
    }
    free(s->rmem);
    for (int i = 0; i < 2; i++) {
        wsp_ggml_backend_buffer_free(s->buffers[i]);
    }
    wsp_ggml_free(s->wctx);
    free(s->w);
    free(s->layers);
    free(s->heap_shift);
    for (int i = 0; i < 2; i++) {
        wsp_ggml_backend_free(s->backends[i]);
    }
    free(s);
}
