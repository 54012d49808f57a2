// Differential test: the backend scheduler with two backends (a test backend
// first, CPU last). An MLP-like stack (norm, mul, mul_mat, add, gelu, scale,
// soft_max) whose weights are spread over both backends; the input lives in a
// CPU buffer. One scheduler is measured once and reused for several computes,
// each with a freshly built graph, a different batch size and different input
// data. Every output is also checked bit for bit against a plain ggml.c
// computation of the same graph.
#include "sched_util.h"

#define N_EMBD  32
#define N_FF    48
#define N_VOCAB 24
#define N_LAYER 3
#define N_TOK_MAX 8

struct model {
    struct wsp_ggml_tensor * ln_g[N_LAYER];
    struct wsp_ggml_tensor * w1[N_LAYER];
    struct wsp_ggml_tensor * b1[N_LAYER];
    struct wsp_ggml_tensor * w2[N_LAYER];
    struct wsp_ggml_tensor * b2[N_LAYER];
    struct wsp_ggml_tensor * scale;
    struct wsp_ggml_tensor * wout;
    struct wsp_ggml_tensor * x_in; // [N_EMBD, N_TOK_MAX], CPU buffer
};

static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, const struct model * m,
                                      struct wsp_ggml_tensor * x_in, int n_tok) {
    struct wsp_ggml_tensor * x = x_in;
    if (n_tok < N_TOK_MAX) {
        x = wsp_ggml_view_2d(ctx, x_in, N_EMBD, n_tok, x_in->nb[1], 0);
    }
    for (int l = 0; l < N_LAYER; l++) {
        struct wsp_ggml_tensor * h = wsp_ggml_norm(ctx, x, 1e-5f);
        h = wsp_ggml_mul(ctx, h, m->ln_g[l]);
        h = wsp_ggml_mul_mat(ctx, m->w1[l], h);
        h = wsp_ggml_add(ctx, h, m->b1[l]);
        h = wsp_ggml_gelu(ctx, h);
        h = wsp_ggml_mul_mat(ctx, m->w2[l], h);
        h = wsp_ggml_add(ctx, h, m->b2[l]);
        h = wsp_ggml_scale(ctx, h, m->scale);
        x = wsp_ggml_add(ctx, x, h);
    }
    struct wsp_ggml_tensor * logits = wsp_ggml_mul_mat(ctx, m->wout, x);
    return wsp_ggml_soft_max(ctx, logits);
}

int main(void) {
    wsp_ggml_backend_t tb = su_test_backend("TEST0", 32, true, true, true);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 2);

    struct su_store st_tb, st_cpu;
    su_store_init(&st_tb, tb, 1 << 20);
    su_store_init(&st_cpu, cpu, 1 << 20);

    // weights
    struct wsp_ggml_context * wctx = make_ctx(64, false, true, 0);
    struct model m;
    struct lcg r = lcg_new(42);
    for (int l = 0; l < N_LAYER; l++) {
        struct su_store * s_ln = l == 1 ? &st_cpu : &st_tb;
        struct su_store * s_w1 = l == 1 ? &st_cpu : &st_tb;
        struct su_store * s_b1 = l == 2 ? &st_cpu : s_w1;
        struct su_store * s_w2 = l == 0 ? &st_tb : &st_cpu;
        struct su_store * s_b2 = l == 2 ? &st_tb : s_w2;
        m.ln_g[l] = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N_EMBD);
        m.w1[l] = wsp_ggml_new_tensor_2d(wctx, l == 2 ? WSP_GGML_TYPE_F16 : WSP_GGML_TYPE_F32, N_EMBD, N_FF);
        m.b1[l] = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N_FF);
        m.w2[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N_FF, N_EMBD);
        m.b2[l] = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N_EMBD);
        su_store_put(s_ln, m.ln_g[l], &r, 1.0f);
        su_store_put(s_w1, m.w1[l], &r, 0.25f);
        su_store_put(s_b1, m.b1[l], &r, 0.1f);
        su_store_put(s_w2, m.w2[l], &r, 0.25f);
        su_store_put(s_b2, m.b2[l], &r, 0.1f);
    }
    m.scale = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 1);
    wsp_ggml_allocr_alloc(st_cpu.alloc, m.scale);
    {
        float s = 0.75f;
        wsp_ggml_backend_tensor_set(m.scale, &s, 0, sizeof(s));
    }
    m.wout = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N_EMBD, N_VOCAB);
    su_store_put(&st_tb, m.wout, &r, 0.5f);
    m.x_in = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N_EMBD, N_TOK_MAX);
    wsp_ggml_allocr_alloc(st_cpu.alloc, m.x_in);

    wsp_ggml_backend_t backends[2] = { tb, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    CHECK(sched != NULL);

    // measure with the largest batch
    {
        struct wsp_ggml_context * gctx = su_graph_ctx(256, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        wsp_ggml_build_forward_expand(g, build(gctx, &m, m.x_in, N_TOK_MAX));
        printf("measure n_nodes=%d n_leafs=%d\n", g->n_nodes, g->n_leafs);
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(gctx);
    }
    su_print_sched_buffer("two", sched, tb);
    su_print_sched_buffer("two", sched, cpu);

    const int toks[] = { 8, 5, 8, 3, 1, 7, 8 };
    const int n_iter = (int)(sizeof(toks) / sizeof(toks[0]));
    int n_fail = 0;
    for (int it = 0; it < n_iter; it++) {
        int n_tok = toks[it];
        struct lcg ri = lcg_new(1000 + (uint64_t)it);
        su_fill(m.x_in, &ri, 2.0f);

        struct wsp_ggml_context * gctx = su_graph_ctx(256, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        struct wsp_ggml_tensor * out = build(gctx, &m, m.x_in, n_tok);
        wsp_ggml_build_forward_expand(g, out);
        wsp_ggml_backend_sched_graph_compute(sched, g);

        printf("iter %d n_tok=%d n_nodes=%d out_backend=%s\n", it, n_tok, g->n_nodes, su_backend_of(out));
        char label[32];
        snprintf(label, sizeof(label), "iter %d out", it);
        print_tensor(label, out, 6);

        // ground truth
        struct wsp_ggml_context * hctx = su_host_ctx(8 << 20);
        struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, N_EMBD, N_TOK_MAX);
        struct lcg rr = lcg_new(1000 + (uint64_t)it);
        su_fill_host(xr, &rr, 2.0f);
        struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(hctx);
        struct wsp_ggml_tensor * outr = build(hctx, &m, xr, n_tok);
        wsp_ggml_build_forward_expand(gr, outr);
        su_ref_compute(gr, 2);
        bool same = su_same(out, outr);
        printf("iter %d matches_plain_ggml %d\n", it, same ? 1 : 0);
        if (!same) {
            n_fail++;
        }
        wsp_ggml_free(hctx);
        wsp_ggml_free(gctx);
    }

    su_print_sched_buffer("two end", sched, tb);
    su_print_sched_buffer("two end", sched, cpu);
    wsp_ggml_backend_sched_free(sched);

    su_store_free(&st_tb);
    su_store_free(&st_cpu);
    wsp_ggml_free(wctx);

    test_backend_print_stats(tb);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_free(tb);
    wsp_ggml_backend_free(cpu);
    printf("failures %d\n", n_fail);
    return 0;
}
