// Ours-only test: in-place ops and supports_op.
//
// An in-place op's result is a view of its first source: its memory is
// wherever that source is allocated. When the scheduler moves a node because
// a backend rejects it, the in-place relation must not make a backend compute
// into another backend's memory (ggml-alloc asserts on that; without asserts
// a GPU backend would write into foreign memory). Accepted outcomes, per case:
//   - the compute succeeds, every computed node's memory is on the backend it
//     was assigned to, and the result equals plain ggml.c bit for bit
//     (program prints "ok <case>" and exits 0);
//   - or the library refuses with its own message and SIGABRT
//     ("wsp_ggml_backend: ..." on stderr).
// One case per run:
//   ext_inplace <case>   runs the case
//   ext_inplace          lists the cases
//
// Cases (TB0 is a test backend holding the weights and the input, CPU second):
//   softmax_inplace_rejected  y = w @ x (TB0); z = soft_max_inplace(y), TB0 rejects SOFT_MAX
//   inplace_after_moved_node  h = norm(x), TB0 rejects NORM (h moves to CPU);
//                             z = mul_inplace(h, g) with g on TB0
#include "ext_util.h"

static const char * const CASES[] = {
    "softmax_inplace_rejected",
    "inplace_after_moved_node",
};
#define N_CASES ((int)(sizeof(CASES) / sizeof(CASES[0])))

#define N 8
#define T 3

static const int REJECT_SM[] = { WSP_GGML_OP_SOFT_MAX, -1 };
static const int REJECT_NORM[] = { WSP_GGML_OP_NORM, -1 };

// the graph of a case over w [N,N], g [N], x [N,T]
static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, int c, struct wsp_ggml_tensor * w, struct wsp_ggml_tensor * g,
                                      struct wsp_ggml_tensor * x, struct wsp_ggml_tensor ** inplace_node) {
    struct wsp_ggml_tensor * z;
    if (c == 0) {
        struct wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, w, x);
        wsp_ggml_set_name(y, "y");
        z = wsp_ggml_soft_max_inplace(ctx, y);
    } else {
        struct wsp_ggml_tensor * h = wsp_ggml_norm(ctx, x, 1e-5f);
        wsp_ggml_set_name(h, "h");
        z = wsp_ggml_mul_inplace(ctx, h, g);
    }
    wsp_ggml_set_name(z, "z");
    *inplace_node = z;
    struct wsp_ggml_tensor * o = wsp_ggml_mul_mat(ctx, w, z);
    wsp_ggml_set_name(o, "o");
    return o;
}

int main(int argc, char ** argv) {
    int rc;
    int c = eu_pick_case(argc, argv, CASES, N_CASES, &rc);
    if (c < 0) {
        return rc;
    }

    wsp_ggml_backend_t tb = eu_tb("TB0", c == 0 ? REJECT_SM : REJECT_NORM);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 1);
    struct su_store st;
    su_store_init(&st, tb, 1 << 16);
    struct wsp_ggml_context * wctx = make_ctx(8, false, true, 0);
    struct lcg r = lcg_new(5);
    struct wsp_ggml_tensor * w = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
    struct wsp_ggml_tensor * g = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, T);
    su_store_put(&st, w, &r, 0.5f);
    su_store_put(&st, g, &r, 1.0f);
    su_store_put(&st, x, &r, 1.0f);

    // ground truth
    struct wsp_ggml_context * hc = su_host_ctx(1 << 20);
    struct wsp_ggml_tensor * hw = wsp_ggml_new_tensor_2d(hc, WSP_GGML_TYPE_F32, N, N);
    struct wsp_ggml_tensor * hg = wsp_ggml_new_tensor_1d(hc, WSP_GGML_TYPE_F32, N);
    struct wsp_ggml_tensor * hx = wsp_ggml_new_tensor_2d(hc, WSP_GGML_TYPE_F32, N, T);
    struct lcg rh = lcg_new(5);
    su_fill_host(hw, &rh, 0.5f);
    su_fill_host(hg, &rh, 1.0f);
    su_fill_host(hx, &rh, 1.0f);
    struct wsp_ggml_tensor * hz;
    struct wsp_ggml_tensor * ho = build(hc, c, hw, hg, hx, &hz);
    struct wsp_ggml_cgraph * hgr = wsp_ggml_new_graph(hc);
    wsp_ggml_build_forward_expand(hgr, ho);
    su_ref_compute(hgr, 1);

    wsp_ggml_backend_t backends[2] = { tb, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    {
        struct wsp_ggml_context * mctx = su_graph_ctx(32, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * mg = wsp_ggml_new_graph(mctx);
        struct wsp_ggml_tensor * mz;
        wsp_ggml_build_forward_expand(mg, build(mctx, c, w, g, x, &mz));
        wsp_ggml_backend_sched_init_measure(sched, mg);
        wsp_ggml_free(mctx);
    }
    struct wsp_ggml_context * gctx = su_graph_ctx(32, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(gctx);
    struct wsp_ggml_tensor * z;
    struct wsp_ggml_tensor * o = build(gctx, c, w, g, x, &z);
    wsp_ggml_build_forward_expand(gr, o);
    wsp_ggml_backend_sched_graph_compute(sched, gr);

    bool consistent = eu_placed_where_supported(sched, gr);
    EU_EXPECT(CASES[c], consistent && su_same(o, ho), "memory/assignment inconsistent or wrong result");
    wsp_ggml_free(gctx);
    wsp_ggml_free(hc);
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&st);
    wsp_ggml_free(wctx);
    wsp_ggml_backend_free(tb);
    wsp_ggml_backend_free(cpu);
    return eu_finish();
}
