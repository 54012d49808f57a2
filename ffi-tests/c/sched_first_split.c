// Differential test: the first split takes the backend of the first node
// that is not in another tensor's memory, even when it is empty.
//
// n0 = cpy(xa, cache) writes into a KV cache on backend A (it works in the
// cache's memory), n1 = add(wb, wb) runs on B, n2 = mul(n0, n1) on A (its
// first source's). The original's first split is B's (n1 is the first node
// without a view source) and holds no node, so B's graph_compute is called
// with 0 nodes, then A's with n0, B's with n1, A's with n2. Every backend's
// graph_compute is traced (the CPU backend's too), per compute.
#include "sched_util.h"

#define N 8

static int run(wsp_ggml_backend_sched_t sched, wsp_ggml_backend_t * bk, int n_bk, struct wsp_ggml_tensor * cache,
               struct wsp_ggml_tensor * xa, struct wsp_ggml_tensor * wb, int step) {
    struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    struct wsp_ggml_tensor * n0 = wsp_ggml_cpy(ctx, xa, cache);
    wsp_ggml_set_name(n0, "n0");
    struct wsp_ggml_tensor * n1 = wsp_ggml_add(ctx, wb, wb);
    wsp_ggml_set_name(n1, "n1");
    struct wsp_ggml_tensor * n2 = wsp_ggml_mul(ctx, n0, n1);
    wsp_ggml_set_name(n2, "n2");
    wsp_ggml_build_forward_expand(g, n2);
    printf("step %d n_nodes %d first %s\n", step, g->n_nodes, g->nodes[0]->name);
    su_trace_begin();
    wsp_ggml_backend_sched_graph_compute(sched, g);
    su_trace_print("graph_compute calls:");
    for (int b = 0; b < n_bk; b++) {
        printf("  b%d = %s\n", b, wsp_ggml_backend_name(bk[b]));
    }
    print_tensor("n2", n2, N);

    // the same on plain ggml.c
    struct wsp_ggml_context * rc = su_host_ctx(1 << 20);
    struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_1d(rc, WSP_GGML_TYPE_F32, N);
    struct wsp_ggml_tensor * wr = wsp_ggml_new_tensor_1d(rc, WSP_GGML_TYPE_F32, N);
    struct wsp_ggml_tensor * cr = wsp_ggml_new_tensor_1d(rc, WSP_GGML_TYPE_F32, N);
    wsp_ggml_backend_tensor_get(xa, xr->data, 0, wsp_ggml_nbytes(xa));
    wsp_ggml_backend_tensor_get(wb, wr->data, 0, wsp_ggml_nbytes(wb));
    struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(rc);
    struct wsp_ggml_tensor * r2 = wsp_ggml_mul(rc, wsp_ggml_cpy(rc, xr, cr), wsp_ggml_add(rc, wr, wr));
    wsp_ggml_build_forward_expand(gr, r2);
    su_ref_compute(gr, 1);
    int same = su_same(n2, r2);
    printf("matches_plain_ggml %d\n", same);
    wsp_ggml_free(rc);
    wsp_ggml_free(ctx);
    return same ? 0 : 1;
}

// Backend A holds the cache and xa, backend B holds wb; `b_cpu`: B is the
// CPU backend, else a test backend.
static int scenario(bool b_cpu) {
    printf("== B is %s\n", b_cpu ? "the CPU backend" : "a test backend");
    wsp_ggml_backend_t a = su_test_backend("TEST_A", 32, true, true, true);
    wsp_ggml_backend_t b = b_cpu ? su_cpu_backend() : su_test_backend("TEST_B", 64, false, false, false);
    wsp_ggml_backend_t backends[2] = { a, b };
    su_trace_backend(a, 0);
    su_trace_backend(b, 1);
    struct su_store sa, sb;
    su_store_init(&sa, a, 1 << 12);
    su_store_init(&sb, b, 1 << 12);
    struct wsp_ggml_context * wctx = make_ctx(4, false, true, 0);
    struct wsp_ggml_tensor * cache = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    struct wsp_ggml_tensor * xa = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    struct wsp_ggml_tensor * wb = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    wsp_ggml_set_name(cache, "cache");
    wsp_ggml_set_name(xa, "xa");
    wsp_ggml_set_name(wb, "wb");
    struct lcg r = lcg_new(11);
    su_store_put(&sa, cache, &r, 1.0f);
    su_store_put(&sa, xa, &r, 1.0f);
    su_store_put(&sb, wb, &r, 1.0f);

    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    {
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, wsp_ggml_mul(ctx, wsp_ggml_cpy(ctx, xa, cache), wsp_ggml_add(ctx, wb, wb)));
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(ctx);
    }
    int n_fail = 0;
    for (int step = 0; step < 3; step++) {
        n_fail += run(sched, backends, 2, cache, xa, wb, step);
    }
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&sa);
    su_store_free(&sb);
    wsp_ggml_free(wctx);
    test_backend_print_stats(a);
    if (!b_cpu) {
        test_backend_print_stats(b);
    }
    su_trace_free();
    wsp_ggml_backend_free(a);
    wsp_ggml_backend_free(b);
    return n_fail;
}

int main(void) {
    int n_fail = scenario(false) + scenario(true);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    printf("failures %d\n", n_fail);
    return 0;
}
