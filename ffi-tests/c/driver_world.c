// The C side of the Rust tests of the scheduler's driver
// (ffi-tests/tests/driver.rs): a CPU backend and a test backend, weights in
// a buffer of each, and chain graphs whose layers alternate between them,
// each built in a ggml context of its own that `dw_graph` allocates and the
// next call (or `dw_free`) frees, as simple clients build theirs.
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "test_backend.h"

#include <stdlib.h>
#include <string.h>

#define DW_N 4 // elements per tensor

struct dw {
    wsp_ggml_backend_t cpu, tb;
    wsp_ggml_backend_buffer_t buf[2];
    struct wsp_ggml_context * wctx;
    struct wsp_ggml_tensor * x;    // the input, in the CPU buffer
    struct wsp_ggml_tensor * w[2]; // w[0] in the CPU buffer, w[1] in the test backend's
    struct wsp_ggml_context * gctx;
};

static void dw_set(struct wsp_ggml_tensor * t, float first, float step) {
    float v[DW_N];
    for (int i = 0; i < DW_N; i++) {
        v[i] = first + step * (float)i;
    }
    wsp_ggml_backend_tensor_set(t, v, 0, sizeof(v));
}

// `tb_max_alloc`: the test backend allocates no buffer larger (0: any).
struct dw * dw_new(size_t tb_max_alloc) {
    struct dw * w = calloc(1, sizeof(*w));
    w->cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(w->cpu, 1);
    struct test_backend_options o;
    memset(&o, 0, sizeof(o));
    o.name = "TB";
    o.alignment = 32;
    o.has_cpy_tensor_from = true;
    o.has_cpy_tensor_to = true;
    o.has_buffer_hooks = true;
    o.shape = TB_SHAPE_FULL;
    w->tb = test_backend_new(&o);
    struct wsp_ggml_init_params p = { 3 * wsp_ggml_tensor_overhead(), NULL, true };
    w->wctx = wsp_ggml_init(p);
    w->x = wsp_ggml_new_tensor_1d(w->wctx, WSP_GGML_TYPE_F32, DW_N);
    w->w[0] = wsp_ggml_new_tensor_1d(w->wctx, WSP_GGML_TYPE_F32, DW_N);
    w->w[1] = wsp_ggml_new_tensor_1d(w->wctx, WSP_GGML_TYPE_F32, DW_N);
    wsp_ggml_set_name(w->x, "x");
    wsp_ggml_set_name(w->w[0], "w0");
    wsp_ggml_set_name(w->w[1], "w1");
    wsp_ggml_backend_t owner[2] = { w->cpu, w->tb };
    for (int b = 0; b < 2; b++) {
        w->buf[b] = wsp_ggml_backend_alloc_buffer(owner[b], 1024);
        wsp_ggml_tallocr_t a = wsp_ggml_tallocr_new_from_buffer(w->buf[b]);
        if (b == 0) {
            wsp_ggml_tallocr_alloc(a, w->x);
        }
        wsp_ggml_tallocr_alloc(a, w->w[b]);
        wsp_ggml_tallocr_free(a);
    }
    dw_set(w->x, 1.0f, 1.0f);
    dw_set(w->w[0], 0.5f, 0.25f);
    dw_set(w->w[1], 1.5f, -0.125f);
    if (tb_max_alloc != 0) {
        test_backend_set_max_alloc(w->tb, tb_max_alloc);
    }
    return w;
}

wsp_ggml_backend_t dw_backend(struct dw * w, int i) { return i == 0 ? w->cpu : w->tb; }

// A chain of `n_layers` (even layers add w0, on the CPU; odd ones multiply
// by w1, on the test backend), in a new context; the last node in *out.
struct wsp_ggml_cgraph * dw_graph(struct dw * w, int n_layers, struct wsp_ggml_tensor ** out) {
    if (w->gctx != NULL) {
        wsp_ggml_free(w->gctx);
    }
    struct wsp_ggml_init_params p = { (size_t)(n_layers + 4) * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), NULL, true };
    w->gctx = wsp_ggml_init(p);
    struct wsp_ggml_tensor * y = w->x;
    for (int i = 0; i < n_layers; i++) {
        y = i % 2 == 0 ? wsp_ggml_add(w->gctx, y, w->w[0]) : wsp_ggml_mul(w->gctx, y, w->w[1]);
        wsp_ggml_format_name(y, "layer%d", i);
    }
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(w->gctx);
    wsp_ggml_build_forward_expand(g, y);
    *out = y;
    return g;
}

// The graph's context freed (its tensors with it).
void dw_free_graph(struct dw * w) {
    if (w->gctx != NULL) {
        wsp_ggml_free(w->gctx);
        w->gctx = NULL;
    }
}

// What `dw_graph(n_layers)`'s last node holds, computed here in floats in
// the same order: element i in out[i].
void dw_expected(struct dw * w, int n_layers, float * out) {
    float x[DW_N], w0[DW_N], w1[DW_N];
    wsp_ggml_backend_tensor_get(w->x, x, 0, sizeof(x));
    wsp_ggml_backend_tensor_get(w->w[0], w0, 0, sizeof(w0));
    wsp_ggml_backend_tensor_get(w->w[1], w1, 0, sizeof(w1));
    for (int e = 0; e < DW_N; e++) {
        float y = x[e];
        for (int i = 0; i < n_layers; i++) {
            y = i % 2 == 0 ? y + w0[e] : y * w1[e];
        }
        out[e] = y;
    }
}

// The test backend's counter of graph_compute calls and of nodes computed.
long dw_tb_graph_computes(struct dw * w) { return test_backend_stats(w->tb)->calls[TB_GRAPH_COMPUTE]; }
long dw_tb_nodes(struct dw * w) { return test_backend_stats(w->tb)->nodes_computed; }

void dw_free(struct dw * w) {
    dw_free_graph(w);
    wsp_ggml_free(w->wctx);
    for (int b = 0; b < 2; b++) {
        wsp_ggml_backend_buffer_free(w->buf[b]);
    }
    wsp_ggml_backend_free(w->tb);
    wsp_ggml_backend_free(w->cpu);
    free(w);
}
