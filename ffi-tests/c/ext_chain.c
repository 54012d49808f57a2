// Ours-only test: supports_op honoured through in-place chains.
//
// Backends [A, CPU, B, C], test backends but the CPU: A rejects ADD and
// CONT, B rejects MUL_MAT, CONT and GET_ROWS, C rejects CPY and the case's
// in-place op. x lives in C's buffer, so `r (cont)`, a CONT of a permuted
// view of x, goes to C (the only test backend that accepts CONT). Then an
// in-place op works in r's memory, and C rejects it. The whole chain (r and
// every node in its memory) must move to one backend that accepts every op
// of it: the CPU (A accepts the in-place op but not the CONT; B neither).
//
// Each case computes twice: first with no rejections (everything on C),
// then after the rejections are set (the last split must not be reused).
// Checks per compute: every non-view node is computed by a backend whose
// supports_op accepts it, into memory of that backend; no test backend
// counted a rejected node among those it computed; the output equals
// ggml.c alone, bit for bit.
//
//   ext_chain          lists the cases
//   ext_chain <case>   runs one
#include "ext_util.h"

enum fam { F_SILU, F_GELU, F_SOFT_MAX, F_SCALE, F_ADD, F_MUL, F_CPY, F_N };
static const char * const CASES[F_N] = { "silu", "gelu", "soft_max", "scale", "add", "mul", "cpy_into_fresh" };

#define N 8
#define T 4

// the op C rejects besides CPY in each case
static int family_op(int f) {
    switch (f) {
        case F_SILU:
        case F_GELU:
            return WSP_GGML_OP_UNARY;
        case F_SOFT_MAX:
            return WSP_GGML_OP_SOFT_MAX;
        case F_SCALE:
            return WSP_GGML_OP_SCALE;
        case F_ADD:
            return WSP_GGML_OP_ADD;
        case F_MUL:
            return WSP_GGML_OP_MUL;
        default:
            return WSP_GGML_OP_CPY;
    }
}

// x [N, T], g [T], s [1]: o = the chain's result times itself
static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, int f, struct wsp_ggml_tensor * x, struct wsp_ggml_tensor * g,
                                      struct wsp_ggml_tensor * s) {
    struct wsp_ggml_tensor * r = wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, x, 1, 0, 2, 3)); // [T, N]
    wsp_ggml_set_name(r, "r (cont)");
    struct wsp_ggml_tensor * z = NULL;
    switch (f) {
        case F_SILU: z = wsp_ggml_silu_inplace(ctx, r); break;
        case F_GELU: z = wsp_ggml_gelu_inplace(ctx, r); break;
        case F_SOFT_MAX: z = wsp_ggml_soft_max_inplace(ctx, r); break;
        case F_SCALE: z = wsp_ggml_scale_inplace(ctx, r, s); break;
        case F_ADD: z = wsp_ggml_add_inplace(ctx, r, g); break;
        case F_MUL: z = wsp_ggml_mul_inplace(ctx, r, g); break;
        default: {
            // a copy into a fresh tensor, then an in-place add in that
            // tensor's memory (A accepts the copy, not the add)
            struct wsp_ggml_tensor * fresh = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, T, N);
            wsp_ggml_set_name(fresh, "fresh");
            z = wsp_ggml_add_inplace(ctx, wsp_ggml_cpy(ctx, r, fresh), g);
            break;
        }
    }
    wsp_ggml_set_name(z, "z");
    struct wsp_ggml_tensor * o = wsp_ggml_mul(ctx, z, z);
    wsp_ggml_set_name(o, "o");
    return o;
}

static bool check_compute(wsp_ggml_backend_sched_t sched, struct wsp_ggml_cgraph * gr, wsp_ggml_backend_t * tbs, int n_tbs) {
    bool ok = eu_placed_where_supported(sched, gr);
    for (int k = 0; k < n_tbs; k++) {
        if (test_backend_stats(tbs[k])->rejected_computed != 0) {
            printf("~ %s computed %ld nodes it rejects\n", wsp_ggml_backend_name(tbs[k]), test_backend_stats(tbs[k])->rejected_computed);
            ok = false;
        }
    }
    return ok;
}

int main(int argc, char ** argv) {
    int rc;
    int f = eu_pick_case(argc, argv, CASES, F_N, &rc);
    if (f < 0) {
        return rc;
    }

    wsp_ggml_backend_t a = eu_tb("A", NULL);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 1);
    wsp_ggml_backend_t b = eu_tb("B", NULL);
    wsp_ggml_backend_t c = eu_tb("C", NULL);
    wsp_ggml_backend_t tbs[3] = { a, b, c };

    struct su_store st;
    su_store_init(&st, c, 1 << 16);
    struct wsp_ggml_context * wctx = make_ctx(8, false, true, 0);
    struct lcg rng = lcg_new(11);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, T);
    struct wsp_ggml_tensor * g = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, T);
    struct wsp_ggml_tensor * s = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 1);
    su_store_put(&st, x, &rng, 1.0f);
    su_store_put(&st, g, &rng, 1.0f);
    su_store_put(&st, s, &rng, 1.0f);

    // ground truth: ggml.c alone
    struct wsp_ggml_context * hc = su_host_ctx(1 << 20);
    struct wsp_ggml_tensor * hx = wsp_ggml_new_tensor_2d(hc, WSP_GGML_TYPE_F32, N, T);
    struct wsp_ggml_tensor * hg = wsp_ggml_new_tensor_1d(hc, WSP_GGML_TYPE_F32, T);
    struct wsp_ggml_tensor * hs = wsp_ggml_new_tensor_1d(hc, WSP_GGML_TYPE_F32, 1);
    struct lcg rh = lcg_new(11);
    su_fill_host(hx, &rh, 1.0f);
    su_fill_host(hg, &rh, 1.0f);
    su_fill_host(hs, &rh, 1.0f);
    struct wsp_ggml_tensor * ho = build(hc, f, hx, hg, hs);
    struct wsp_ggml_cgraph * hgr = wsp_ggml_new_graph(hc);
    wsp_ggml_build_forward_expand(hgr, ho);
    su_ref_compute(hgr, 1);

    wsp_ggml_backend_t backends[4] = { a, cpu, b, c };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 4);
    {
        struct wsp_ggml_context * mctx = su_graph_ctx(32, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * mg = wsp_ggml_new_graph(mctx);
        wsp_ggml_build_forward_expand(mg, build(mctx, f, x, g, s));
        wsp_ggml_backend_sched_init_measure(sched, mg);
        wsp_ggml_free(mctx);
    }
    const int rej_a[] = { WSP_GGML_OP_ADD, WSP_GGML_OP_CONT };
    const int rej_b[] = { WSP_GGML_OP_MUL_MAT, WSP_GGML_OP_CONT, WSP_GGML_OP_GET_ROWS };
    const int rej_c[] = { WSP_GGML_OP_CPY, family_op(f) };
    bool ok = true;
    for (int step = 0; step < 2; step++) {
        if (step == 1) {
            // the rejections change between two computes
            test_backend_set_rejected(a, rej_a, 2);
            test_backend_set_rejected(b, rej_b, 3);
            test_backend_set_rejected(c, rej_c, family_op(f) == WSP_GGML_OP_CPY ? 1 : 2);
        }
        // a new context and graph for every compute, as ggml's programs build them
        struct wsp_ggml_context * gctx = su_graph_ctx(32, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(gctx);
        struct wsp_ggml_tensor * o = build(gctx, f, x, g, s);
        wsp_ggml_build_forward_expand(gr, o);
        wsp_ggml_backend_sched_graph_compute(sched, gr);
        bool consistent = check_compute(sched, gr, tbs, 3);
        bool same = su_same(o, ho);
        if (step == 1) {
            // the chain is on the CPU, the only backend that accepts all of it
            struct wsp_ggml_tensor * z = wsp_ggml_graph_get_tensor(gr, "z");
            CHECK(z != NULL);
            if (wsp_ggml_backend_sched_get_tensor_backend(sched, z) != cpu) {
                printf("~ z is on %s\n", eu_bname(wsp_ggml_backend_sched_get_tensor_backend(sched, z)));
                consistent = false;
            }
        }
        ok = ok && consistent && same;
        if (!consistent || !same) {
            printf("~ step %d: %s\n", step, same ? "placement wrong" : "output differs from ggml.c alone");
        }
        wsp_ggml_free(gctx);
    }
    EU_EXPECT(CASES[f], ok, "a node computed where supports_op rejects it, or a wrong result");
    wsp_ggml_free(hc);
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&st);
    wsp_ggml_free(wctx);
    for (int k = 0; k < 3; k++) {
        wsp_ggml_backend_free(tbs[k]);
    }
    wsp_ggml_backend_free(cpu);
    return eu_finish();
}
