// Differential test: pass 3 (sources take their consumer's backend) runs over
// the whole graph before the graph is split.
//
// n0 = gelu(host) reads plain host memory (no buffer), so passes 1 and 2
// leave it without a backend; n1 = add(host, x0) goes to TEST0 with x0, and
// n2 = add(n0, n1) too. Only pass 3, at n2, gives n0 a backend. A split
// walk that checks each node before the later nodes' pass 3 has run would
// reject n0; the original computes the graph on TEST0.
// (A chain of two such nodes is not covered: the original leaves the first
// one without a backend and crashes, where we stop with a message.)
#include "sched_util.h"

#define N 16

static int run(wsp_ggml_backend_sched_t sched, struct wsp_ggml_tensor * host, struct wsp_ggml_tensor * x0, int swap) {
    struct wsp_ggml_context * ctx = su_graph_ctx(64, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    struct wsp_ggml_tensor * n0 = wsp_ggml_gelu(ctx, host);   // no backend after pass 2
    struct wsp_ggml_tensor * n1 = wsp_ggml_add(ctx, host, x0); // TEST0 (x0)
    // TEST0 (pass 2); `swap` puts n1 first among its sources
    struct wsp_ggml_tensor * n2 = swap ? wsp_ggml_add(ctx, n1, n0) : wsp_ggml_add(ctx, n0, n1);
    wsp_ggml_build_forward_expand(g, n2);
    printf("swap %d n_nodes %d first %s\n", swap, g->n_nodes, g->nodes[0]->name);
    wsp_ggml_backend_sched_graph_compute(sched, g);
    print_tensor("n2", n2, 4);

    // the same on plain ggml.c
    struct wsp_ggml_context * rc = su_host_ctx(1 << 20);
    struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_2d(rc, WSP_GGML_TYPE_F32, N, 2);
    wsp_ggml_backend_tensor_get(x0, xr->data, 0, wsp_ggml_nbytes(x0));
    struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(rc);
    struct wsp_ggml_tensor * r0 = wsp_ggml_gelu(rc, host);
    struct wsp_ggml_tensor * r1 = wsp_ggml_add(rc, host, xr);
    struct wsp_ggml_tensor * r2 = swap ? wsp_ggml_add(rc, r1, r0) : wsp_ggml_add(rc, r0, r1);
    wsp_ggml_build_forward_expand(gr, r2);
    su_ref_compute(gr, 1);
    int same = su_same(n2, r2);
    printf("matches_plain_ggml %d\n", same);
    wsp_ggml_free(rc);
    wsp_ggml_free(ctx);
    return same ? 0 : 1;
}

int main(void) {
    wsp_ggml_backend_t t0 = su_test_backend("TEST0", 32, true, true, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    struct su_store st;
    su_store_init(&st, t0, 1 << 14);
    struct wsp_ggml_context * wctx = make_ctx(4, false, true, 0);
    struct wsp_ggml_tensor * x0 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 2);
    wsp_ggml_set_name(x0, "x0");
    struct lcg r = lcg_new(3);
    su_store_put(&st, x0, &r, 1.0f);
    struct wsp_ggml_context * hctx = su_host_ctx(1 << 16);
    struct wsp_ggml_tensor * host = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, N, 2);
    wsp_ggml_set_name(host, "host");
    su_fill_host(host, &r, 1.0f);

    wsp_ggml_backend_t backends[2] = { t0, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    {
        // measure with the first graph's shape
        struct wsp_ggml_context * ctx = su_graph_ctx(64, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        struct wsp_ggml_tensor * n0 = wsp_ggml_gelu(ctx, host);
        wsp_ggml_build_forward_expand(g, wsp_ggml_add(ctx, n0, wsp_ggml_add(ctx, host, x0)));
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(ctx);
    }
    int n_fail = 0;
    n_fail += run(sched, host, x0, 0);
    n_fail += run(sched, host, x0, 1);
    n_fail += run(sched, host, x0, 0);

    wsp_ggml_backend_sched_free(sched);
    su_store_free(&st);
    wsp_ggml_free(hctx);
    wsp_ggml_free(wctx);
    test_backend_print_stats(t0);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_free(t0);
    wsp_ggml_backend_free(cpu);
    printf("failures %d\n", n_fail);
    return 0;
}
