// Differential test: a source outside the graph's lists whose view source
// changes from compute to compute.
//
// A graph view (wsp_ggml_graph_view: nodes only, no leaf list) computes
// y = gelu(add(u, c)), where u = view(a_k) is a node of the full graph but
// not of the view, so the scheduler sees it only as a source. Every compute
// rebuilds the graph in one memory block (same addresses) with the next a_k.
// Nothing the assignment passes read changes, but ggml-alloc looks u's view
// source up (and inserts it into the scheduler's hash set if it is not
// there): a scheduler that kept its split without checking u's view source
// would collect one stale key per compute until the set is full.
#include "sched_util.h"

#define N 16
#define COMPUTES 200

int main(void) {
    wsp_ggml_backend_t t0 = su_test_backend("TEST0", 32, true, true, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    struct su_store st;
    su_store_init(&st, t0, (size_t)(COMPUTES + 2) * N * sizeof(float) * 2);
    struct wsp_ggml_context * wctx = make_ctx(COMPUTES + 1, false, true, 0);
    struct lcg r = lcg_new(11);
    struct wsp_ggml_tensor * a[COMPUTES];
    for (int k = 0; k < COMPUTES; k++) {
        a[k] = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
        su_store_put(&st, a[k], &r, 1.0f);
    }
    struct wsp_ggml_tensor * c = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    wsp_ggml_set_name(c, "c");
    su_store_put(&st, c, &r, 1.0f);

    wsp_ggml_backend_t backends[2] = { t0, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    {
        // measure on a graph of the same shape, built apart (the original
        // leaves measure addresses in the graph it measures)
        struct wsp_ggml_context * ctx = su_fixed_ctx();
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_view_1d(ctx, a[0], N, 0), c)));
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(ctx);
    }
    int n_fail = 0;
    for (int k = 0; k < COMPUTES; k++) {
        struct wsp_ggml_context * ctx = su_fixed_ctx();
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        struct wsp_ggml_tensor * u = wsp_ggml_view_1d(ctx, a[k], N, 0);
        struct wsp_ggml_tensor * y = wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, u, c));
        wsp_ggml_build_forward_expand(g, y);
        CHECK(g->n_nodes == 3 && g->nodes[0] == u);
        struct wsp_ggml_cgraph * gv = wsp_ggml_graph_view(ctx, g, 1, 3);
        wsp_ggml_backend_sched_graph_compute(sched, gv);

        // the same on plain ggml.c
        struct wsp_ggml_context * rc = su_host_ctx(1 << 20);
        struct wsp_ggml_tensor * ar = wsp_ggml_new_tensor_1d(rc, WSP_GGML_TYPE_F32, N);
        struct wsp_ggml_tensor * cr = wsp_ggml_new_tensor_1d(rc, WSP_GGML_TYPE_F32, N);
        wsp_ggml_backend_tensor_get(a[k], ar->data, 0, wsp_ggml_nbytes(ar));
        wsp_ggml_backend_tensor_get(c, cr->data, 0, wsp_ggml_nbytes(cr));
        struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(rc);
        struct wsp_ggml_tensor * yr = wsp_ggml_gelu(rc, wsp_ggml_add(rc, ar, cr));
        wsp_ggml_build_forward_expand(gr, yr);
        su_ref_compute(gr, 1);
        int same = su_same(y, yr);
        n_fail += !same;
        if (k % 50 == 0 || !same) {
            printf("compute %d:", k);
            print_tensor(" y", y, 4);
            printf("matches_plain_ggml %d\n", same);
        }
        wsp_ggml_free(rc);
        wsp_ggml_free(ctx);
    }

    wsp_ggml_backend_sched_free(sched);
    su_store_free(&st);
    wsp_ggml_free(wctx);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_free(t0);
    wsp_ggml_backend_free(cpu);
    printf("failures %d\n", n_fail);
    return 0;
}
