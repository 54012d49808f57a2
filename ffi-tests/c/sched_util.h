// Helpers shared by the scheduler test programs (sched_*.c).
//
// Conventions: see common.h. Everything printed here is deterministic and
// independent of addresses and timings.
#pragma once

#include "common.h"
#include "test_backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define SU_UNUSED __attribute__((unused))
#else
#define SU_UNUSED
#endif

// Create a test backend.
static SU_UNUSED wsp_ggml_backend_t su_test_backend(const char * name, size_t alignment,
                                                    bool cpy_from, bool cpy_to, bool hooks) {
    struct test_backend_options o;
    memset(&o, 0, sizeof(o));
    o.name = name;
    o.alignment = alignment;
    o.has_cpy_tensor_from = cpy_from;
    o.has_cpy_tensor_to = cpy_to;
    o.has_buffer_hooks = hooks;
    o.rejected_ops = NULL;
    o.n_rejected_ops = 0;
    wsp_ggml_backend_t b = test_backend_new(&o);
    CHECK(b != NULL);
    return b;
}

// A CPU backend with one thread: the scheduler programs compute tiny tensors,
// and ggml's spinning workers would make them crawl on a loaded 2-core
// machine or under valgrind.
static SU_UNUSED wsp_ggml_backend_t su_cpu_backend(void) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    CHECK(cpu != NULL);
    wsp_ggml_backend_cpu_set_n_threads(cpu, 1);
    return cpu;
}

// A place for pre-allocated tensors (weights, inputs, caches): one backend
// buffer plus a tensor allocator on it.
struct su_store {
    wsp_ggml_backend_t backend;
    wsp_ggml_backend_buffer_t buffer;
    wsp_ggml_allocr_t alloc;
};

static SU_UNUSED void su_store_init(struct su_store * s, wsp_ggml_backend_t backend, size_t size) {
    s->backend = backend;
    s->buffer = wsp_ggml_backend_alloc_buffer(backend, size);
    CHECK(s->buffer != NULL);
    s->alloc = wsp_ggml_allocr_new_from_buffer(s->buffer);
    CHECK(s->alloc != NULL);
}

static SU_UNUSED void su_store_free(struct su_store * s) {
    if (s->alloc != NULL) {
        wsp_ggml_allocr_free(s->alloc);
    }
    if (s->buffer != NULL) {
        wsp_ggml_backend_buffer_free(s->buffer);
    }
    s->alloc = NULL;
    s->buffer = NULL;
}

// Fill a tensor that already has memory (any backend) with deterministic data.
static SU_UNUSED void su_fill(struct wsp_ggml_tensor * t, struct lcg * r, float scale) {
    int64_t n = wsp_ggml_nelements(t);
    float * f = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    CHECK(f != NULL);
    lcg_fill_f32(r, f, (size_t)n, scale);
    if (t->type == WSP_GGML_TYPE_F32) {
        wsp_ggml_backend_tensor_set(t, f, 0, wsp_ggml_nbytes(t));
    } else if (t->type == WSP_GGML_TYPE_F16) {
        wsp_ggml_fp16_t * h = (wsp_ggml_fp16_t *)malloc(sizeof(wsp_ggml_fp16_t) * (size_t)(n > 0 ? n : 1));
        CHECK(h != NULL);
        wsp_ggml_fp32_to_fp16_row(f, h, (int)n);
        wsp_ggml_backend_tensor_set(t, h, 0, wsp_ggml_nbytes(t));
        free(h);
    } else {
        CHECK(!"su_fill: unsupported type");
    }
    free(f);
}

// Allocate a tensor in a store and fill it.
static SU_UNUSED void su_store_put(struct su_store * s, struct wsp_ggml_tensor * t, struct lcg * r, float scale) {
    wsp_ggml_allocr_alloc(s->alloc, t);
    CHECK(t->data != NULL && t->buffer != NULL);
    su_fill(t, r, scale);
}

// Fill a host (ggml-context allocated) tensor; same values as su_fill for the same lcg state.
static SU_UNUSED void su_fill_host(struct wsp_ggml_tensor * t, struct lcg * r, float scale) {
    int64_t n = wsp_ggml_nelements(t);
    CHECK(t->data != NULL);
    if (t->type == WSP_GGML_TYPE_F32) {
        lcg_fill_f32(r, (float *)t->data, (size_t)n, scale);
    } else {
        CHECK(!"su_fill_host: unsupported type");
    }
}

// A no_alloc context for building scheduler graphs.
static SU_UNUSED struct wsp_ggml_context * su_graph_ctx(size_t n_tensors, size_t graph_size) {
    struct wsp_ggml_init_params p = {
        /*.mem_size   =*/ n_tensors * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead_custom(graph_size, false) + 1024,
        /*.mem_buffer =*/ NULL,
        /*.no_alloc   =*/ true,
    };
    struct wsp_ggml_context * ctx = wsp_ggml_init(p);
    CHECK(ctx != NULL);
    return ctx;
}

// A no-alloc context over one fixed memory block: the same build sequence
// gives tensors at the same addresses every time (graphs "rebuilt" between
// computes, as programs do with a reused context buffer).
// aligned as ggml asserts (WSP_GGML_MEM_ALIGN is 16 on 64-bit targets; a
// plain char array is 1-aligned, which crashed both builds on aarch64)
static _Alignas(16) unsigned char su_fixed_mem[1 << 20];

static SU_UNUSED struct wsp_ggml_context * su_fixed_ctx(void) {
    struct wsp_ggml_init_params p = { sizeof(su_fixed_mem), su_fixed_mem, true };
    struct wsp_ggml_context * ctx = wsp_ggml_init(p);
    CHECK(ctx != NULL);
    return ctx;
}

// A context that allocates tensor data itself (for the plain-ggml ground truth).
static SU_UNUSED struct wsp_ggml_context * su_host_ctx(size_t mem_size) {
    struct wsp_ggml_init_params p = {
        /*.mem_size   =*/ mem_size,
        /*.mem_buffer =*/ NULL,
        /*.no_alloc   =*/ false,
    };
    struct wsp_ggml_context * ctx = wsp_ggml_init(p);
    CHECK(ctx != NULL);
    return ctx;
}

// Ground truth: compute a graph built in a su_host_ctx with ggml.c directly
// (no ggml-backend involved). Weights living in test-backend buffers are host
// memory, so they can be read directly.
static SU_UNUSED void su_ref_compute(struct wsp_ggml_cgraph * g, int n_threads) {
    struct wsp_ggml_cplan cp = wsp_ggml_graph_plan(g, n_threads);
    void * work = NULL;
    if (cp.work_size > 0) {
        work = malloc(cp.work_size);
        CHECK(work != NULL);
    }
    cp.work_data = (uint8_t *)work;
    CHECK(wsp_ggml_graph_compute(g, &cp) == 0);
    free(work);
}

// Read a contiguous tensor (any backend) into a new malloc'd block.
static SU_UNUSED void * su_read(const struct wsp_ggml_tensor * t) {
    size_t n = wsp_ggml_nbytes(t);
    void * d = malloc(n > 0 ? n : 1);
    CHECK(d != NULL);
    wsp_ggml_backend_tensor_get(t, d, 0, n);
    return d;
}

// Bit-exact comparison of a scheduler output with a host ground-truth tensor.
static SU_UNUSED bool su_same(const struct wsp_ggml_tensor * t, const struct wsp_ggml_tensor * ref) {
    if (t->type != ref->type) {
        return false;
    }
    for (int i = 0; i < WSP_GGML_MAX_DIMS; i++) {
        if (t->ne[i] != ref->ne[i]) {
            return false;
        }
    }
    CHECK(wsp_ggml_is_contiguous(t) && wsp_ggml_is_contiguous(ref));
    void * d = su_read(t);
    bool same = memcmp(d, ref->data, wsp_ggml_nbytes(t)) == 0;
    free(d);
    return same;
}

static SU_UNUSED const char * su_backend_of(const struct wsp_ggml_tensor * t) {
    wsp_ggml_backend_t b = wsp_ggml_get_backend(t);
    return b == NULL ? "NULL" : wsp_ggml_backend_name(b);
}

// "~le" line with the size of the scheduler's compute buffer for a backend.
// The size is rounded down to the backend's alignment: with the original, the
// measured size of a CPU buffer includes the padding needed to align malloc's
// address (0..63 bytes, depends on the heap layout), which is not a property
// of the scheduler.
static SU_UNUSED void su_print_sched_buffer(const char * label, wsp_ggml_backend_sched_t sched, wsp_ggml_backend_t b) {
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_sched_get_buffer(sched, b);
    CHECK(buf != NULL);
    size_t size = wsp_ggml_backend_buffer_get_size(buf);
    size_t align = wsp_ggml_backend_get_alignment(b);
    CHECK(align > 0);
    printf("~le %s sched_buffer_size %s %zu\n", label, wsp_ggml_backend_name(b), size - size % align);
}

// Tracing what each backend is asked to compute: su_trace_backend(b, id)
// wraps the graph_compute slot of backend b (any backend: the CPU backend,
// a test backend) so that every call made while tracing is on appends
// "b<id>:<n_nodes>:<hash>" to the trace, the hash covering each node's
// name and op in order. One call per split, in order: the trace is the
// split list as the backends see it (which backend, which nodes),
// comparable between the original and ours.
#define SU_TRACE_MAX_BACKENDS 16
struct su_traced {
    wsp_ggml_backend_t backend;
    void (*graph_compute)(wsp_ggml_backend_t backend, struct wsp_ggml_cgraph * cgraph);
    int id;
};
static struct su_traced su_traced_backends[SU_TRACE_MAX_BACKENDS];
static int su_n_traced;
static bool su_tracing;
static char * su_trace_buf;
static size_t su_trace_len, su_trace_cap;

static SU_UNUSED void su_trace_append(const char * s) {
    size_t n = strlen(s);
    if (su_trace_len + n + 1 > su_trace_cap) {
        su_trace_cap = (su_trace_len + n + 1) * 2;
        su_trace_buf = (char *)realloc(su_trace_buf, su_trace_cap);
        CHECK(su_trace_buf != NULL);
    }
    memcpy(su_trace_buf + su_trace_len, s, n + 1);
    su_trace_len += n;
}

static SU_UNUSED void su_traced_compute(wsp_ggml_backend_t backend, struct wsp_ggml_cgraph * cgraph) {
    for (int i = 0; i < su_n_traced; i++) {
        if (su_traced_backends[i].backend != backend) {
            continue;
        }
        if (su_tracing) {
            uint64_t h = 1469598103934665603ULL;
            for (int k = 0; k < cgraph->n_nodes; k++) {
                const struct wsp_ggml_tensor * t = cgraph->nodes[k];
                h = (h ^ fnv1a64(t->name, strlen(t->name))) * 1099511628211ULL;
                h = (h ^ (uint64_t)t->op) * 1099511628211ULL;
            }
            char s[64];
            snprintf(s, sizeof(s), " b%d:%d:%08x", su_traced_backends[i].id, cgraph->n_nodes, (unsigned)(h ^ (h >> 32)));
            su_trace_append(s);
        }
        su_traced_backends[i].graph_compute(backend, cgraph);
        return;
    }
    CHECK(!"su_traced_compute: backend not traced");
}

static SU_UNUSED void su_trace_backend(wsp_ggml_backend_t b, int id) {
    for (int i = 0; i < su_n_traced; i++) {
        if (su_traced_backends[i].backend == b) {
            return;
        }
    }
    CHECK(su_n_traced < SU_TRACE_MAX_BACKENDS);
    su_traced_backends[su_n_traced].backend = b;
    su_traced_backends[su_n_traced].graph_compute = b->iface.graph_compute;
    su_traced_backends[su_n_traced].id = id;
    su_n_traced++;
    b->iface.graph_compute = su_traced_compute;
}

static SU_UNUSED void su_trace_begin(void) {
    su_trace_len = 0;
    su_trace_append("");
    su_tracing = true;
}

// Stop tracing and print "<label>" followed by the calls since su_trace_begin.
static SU_UNUSED void su_trace_print(const char * label) {
    su_tracing = false;
    printf("%s%s\n", label, su_trace_buf == NULL ? "" : su_trace_buf);
}

// Forget the traced backends (before they are freed) and the trace.
static SU_UNUSED void su_trace_free(void) {
    su_n_traced = 0;
    free(su_trace_buf);
    su_trace_buf = NULL;
    su_trace_len = su_trace_cap = 0;
}
