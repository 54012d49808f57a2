// Differential test: graphs rebuilt at the same addresses between computes.
//
// Our scheduler reuses the last split when the next graph is the same; the
// original splits every time. Every graph here is built in one fixed memory
// block, so the same build sequence gives tensors at the same addresses, and
// each step changes one thing the split depends on while keeping addresses:
// the input data only (the split must be reused), a source, the order of
// two sources, the op of a node
// (view op or not), the backend a weight lives on, and a weight's size that
// decides between two backends. (set_node_backend is not here: the original
// ignores it, see docs/differences.md; the extension tests cover it.) The test
// backend logs each graph it computes, so any stale split shows up as a
// difference with the original; outputs are also compared with plain ggml.c.
#include "sched_util.h"

#define N 16

struct weights {
    struct wsp_ggml_tensor * w_tb;  // [N, N] on TEST0
    struct wsp_ggml_tensor * w_cpu; // [N, N] on CPU
    struct wsp_ggml_tensor * b_tb;  // [N] on TEST0
    struct wsp_ggml_tensor * b_cpu; // [N] on CPU
    struct wsp_ggml_tensor * small_tb; // [N, 1] on TEST0
    struct wsp_ggml_tensor * big_cpu;  // [N, 2] on CPU, viewed as [N, 1] or [N, 2]
    struct wsp_ggml_tensor * x;     // [N, 2] input on CPU
};

// What a step changes (all graphs have the same number of tensors).
struct variant {
    int second_weight_on_cpu; // mul_mat with w_cpu instead of w_tb
    int other_bias;           // add(h, b_cpu) instead of add(h, b_tb)
    int reshape_not_cont;     // a reshape (view op) instead of cont (not a view op)
    int swap_sum;             // add(q, p) instead of add(p, q)
    int big_rows;             // rows of the CPU operand of the size-decided mul_mat (1 or 2)
};

static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g,
                                      const struct weights * w, const struct variant * v, struct wsp_ggml_tensor * x) {
    struct wsp_ggml_tensor * h = wsp_ggml_mul_mat(ctx, w->w_tb, x);
    h = wsp_ggml_add(ctx, h, v->other_bias ? w->b_cpu : w->b_tb);
    h = wsp_ggml_gelu(ctx, h);
    h = wsp_ggml_mul_mat(ctx, v->second_weight_on_cpu ? w->w_cpu : w->w_tb, h);
    // [N, 2] -> [2N] through a view op or a real op
    struct wsp_ggml_tensor * flat = v->reshape_not_cont ? wsp_ggml_reshape_1d(ctx, h, 2 * N)
                                                        : wsp_ggml_cont(ctx, wsp_ggml_reshape_1d(ctx, h, 2 * N));
    // mul_mat(bb, a): bb on CPU comes first, a on TEST0 (better priority)
    // second, so pass 2 moves the node to TEST0 only if a is at least as
    // large as bb: the number of rows of bb decides.
    struct wsp_ggml_tensor * a = wsp_ggml_gelu(ctx, wsp_ggml_view_2d(ctx, w->small_tb, N, 1, w->small_tb->nb[1], 0));
    struct wsp_ggml_tensor * bb = wsp_ggml_gelu(ctx, wsp_ggml_view_2d(ctx, w->big_cpu, N, v->big_rows, w->big_cpu->nb[1], 0));
    struct wsp_ggml_tensor * s = wsp_ggml_mul_mat(ctx, bb, a);
    // p on TEST0 and q on CPU are in the graph before their sum, whose
    // operands swap between steps without changing any node or leaf.
    struct wsp_ggml_tensor * p = wsp_ggml_gelu(ctx, wsp_ggml_view_2d(ctx, w->small_tb, N, 1, w->small_tb->nb[1], 0));
    struct wsp_ggml_tensor * q = wsp_ggml_gelu(ctx, wsp_ggml_view_2d(ctx, w->big_cpu, N, 1, w->big_cpu->nb[1], 0));
    wsp_ggml_build_forward_expand(g, p);
    wsp_ggml_build_forward_expand(g, q);
    struct wsp_ggml_tensor * pq = v->swap_sum ? wsp_ggml_add(ctx, q, p) : wsp_ggml_add(ctx, p, q);
    s = wsp_ggml_add(ctx, wsp_ggml_repeat(ctx, s, pq), pq);
    struct wsp_ggml_tensor * out = wsp_ggml_add(ctx, flat, wsp_ggml_repeat(ctx, s, flat));
    out = wsp_ggml_soft_max(ctx, wsp_ggml_reshape_2d(ctx, out, N, 2));
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

static int step(wsp_ggml_backend_sched_t sched, const struct weights * w, const struct variant * v,
                const char * what, uint64_t seed) {
    struct lcg r = lcg_new(seed);
    su_fill(w->x, &r, 1.0f);

    struct wsp_ggml_context * ctx = su_fixed_ctx();
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    struct wsp_ggml_tensor * out = build(ctx, g, w, v, w->x);
    printf("step %s: n_nodes=%d n_leafs=%d\n", what, g->n_nodes, g->n_leafs);
    wsp_ggml_backend_sched_graph_compute(sched, g);
    print_tensor(what, out, 8);

    // ground truth from plain ggml.c (weights in test buffers are host memory)
    struct wsp_ggml_context * hctx = su_host_ctx(4 << 20);
    struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, N, 2);
    struct lcg rr = lcg_new(seed);
    su_fill_host(xr, &rr, 1.0f);
    struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(hctx);
    struct wsp_ggml_tensor * outr = build(hctx, gr, w, v, xr);
    su_ref_compute(gr, 1);
    int same = su_same(out, outr);
    printf("step %s matches_plain_ggml %d\n", what, same);
    wsp_ggml_free(hctx);
    wsp_ggml_free(ctx);
    return same ? 0 : 1;
}

int main(void) {
    wsp_ggml_backend_t tb = su_test_backend("TEST0", 32, true, true, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    struct su_store st_tb, st_cpu, st_cpu2;
    su_store_init(&st_tb, tb, 1 << 16);
    su_store_init(&st_cpu, cpu, 1 << 16);
    su_store_init(&st_cpu2, cpu, 1 << 16);

    struct wsp_ggml_context * wctx = make_ctx(16, false, true, 0);
    struct weights w;
    struct lcg r = lcg_new(7);
    w.w_tb = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
    w.w_cpu = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
    w.b_tb = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    w.b_cpu = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    w.small_tb = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 1);
    w.big_cpu = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 2);
    w.x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 2);
    su_store_put(&st_tb, w.w_tb, &r, 0.3f);
    su_store_put(&st_cpu, w.w_cpu, &r, 0.3f);
    su_store_put(&st_tb, w.b_tb, &r, 0.1f);
    su_store_put(&st_cpu, w.b_cpu, &r, 0.1f);
    su_store_put(&st_tb, w.small_tb, &r, 0.5f);
    su_store_put(&st_cpu, w.big_cpu, &r, 0.5f);
    wsp_ggml_allocr_alloc(st_cpu.alloc, w.x);

    wsp_ggml_backend_t backends[2] = { tb, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    CHECK(sched != NULL);

    struct variant base = { 0, 0, 0, 0, 1 };
    {
        // Measure a graph holding every variant at once, so that the compute
        // buffers are large enough whichever backend a step puts nodes on.
        struct wsp_ggml_context * ctx = su_fixed_ctx();
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        for (int k = 0; k < 16; k++) {
            struct variant m = { k & 1, (k >> 1) & 1, (k >> 2) & 1, k & 1, (k & 8) ? 2 : 1 };
            build(ctx, g, &w, &m, w.x);
        }
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(ctx);
    }

    int n_fail = 0;
    struct variant v = base;
    n_fail += step(sched, &w, &v, "base", 1);
    n_fail += step(sched, &w, &v, "same graph, new input", 2);
    n_fail += step(sched, &w, &v, "same graph again", 3);
    v.second_weight_on_cpu = 1;
    n_fail += step(sched, &w, &v, "a source on another backend", 4);
    v.other_bias = 1;
    n_fail += step(sched, &w, &v, "another source", 5);
    v.reshape_not_cont = 1;
    n_fail += step(sched, &w, &v, "view op instead of cont", 6);
    n_fail += step(sched, &w, &v, "unchanged after view op", 7);
    v.swap_sum = 1;
    n_fail += step(sched, &w, &v, "operands swapped", 14);
    v.big_rows = 2;
    n_fail += step(sched, &w, &v, "larger CPU source", 8);
    n_fail += step(sched, &w, &v, "unchanged after size", 9);

    // The same tensor struct, moved to another buffer of another backend.
    {
        float * keep = (float *)su_read(w.w_tb);
        w.w_tb->data = NULL;
        w.w_tb->buffer = NULL;
        wsp_ggml_allocr_alloc(st_cpu2.alloc, w.w_tb);
        wsp_ggml_backend_tensor_set(w.w_tb, keep, 0, wsp_ggml_nbytes(w.w_tb));
        free(keep);
    }
    n_fail += step(sched, &w, &v, "weight moved to CPU", 11);
    n_fail += step(sched, &w, &v, "unchanged after move", 12);
    n_fail += step(sched, &w, &base, "back to base shape", 13);

    wsp_ggml_backend_sched_free(sched);
    su_store_free(&st_tb);
    su_store_free(&st_cpu);
    su_store_free(&st_cpu2);
    wsp_ggml_free(wctx);
    test_backend_print_stats(tb);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_free(tb);
    wsp_ggml_backend_free(cpu);
    printf("failures %d\n", n_fail);
    return 0;
}
