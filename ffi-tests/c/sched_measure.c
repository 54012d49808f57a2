// Differential test: scheduler measurement. A scheduler is measured with a
// large graph (many layers, large batch) and then used for smaller graphs
// (fewer layers and/or a smaller batch); a second scheduler is measured with
// a small graph; a third one with a graph that puts nothing on one backend.
// The compute buffer size of every backend is printed ("~le": ours may be
// smaller) and every output is checked against a plain ggml.c computation.
#include "sched_util.h"

#define E 48
#define F 64
#define L_MAX 6
#define T_MAX 32

struct model {
    struct wsp_ggml_tensor * w1[L_MAX];  // [E, F]
    struct wsp_ggml_tensor * w2[L_MAX];  // [F, E]
    struct wsp_ggml_tensor * g[L_MAX];   // [E]
    struct wsp_ggml_tensor * x_in;       // [E, T_MAX] CPU
};

// layers [l0, l0 + n_layer), batch n_tok
static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, const struct model * m,
                                      struct wsp_ggml_tensor * x_in, int l0, int n_layer, int n_tok) {
    struct wsp_ggml_tensor * x = x_in;
    if (n_tok < T_MAX) {
        x = wsp_ggml_view_2d(ctx, x_in, E, n_tok, x_in->nb[1], 0);
    }
    for (int l = l0; l < l0 + n_layer; l++) {
        struct wsp_ggml_tensor * h = wsp_ggml_rms_norm(ctx, x, 1e-6f);
        h = wsp_ggml_mul(ctx, h, m->g[l]);
        h = wsp_ggml_mul_mat(ctx, m->w1[l], h);
        h = wsp_ggml_gelu(ctx, h);
        h = wsp_ggml_mul_mat(ctx, m->w2[l], h);
        x = wsp_ggml_add(ctx, x, h);
    }
    return wsp_ggml_soft_max(ctx, x);
}

static int run(const char * name, wsp_ggml_backend_sched_t sched, const struct model * m,
               int l0, int n_layer, int n_tok, int seed) {
    struct lcg ri = lcg_new((uint64_t)seed);
    su_fill(m->x_in, &ri, 2.0f);

    struct wsp_ggml_context * gctx = su_graph_ctx(256, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
    struct wsp_ggml_tensor * out = build(gctx, m, m->x_in, l0, n_layer, n_tok);
    wsp_ggml_build_forward_expand(g, out);
    wsp_ggml_backend_sched_graph_compute(sched, g);
    printf("%s compute l0=%d n_layer=%d n_tok=%d n_nodes=%d out_backend=%s\n",
           name, l0, n_layer, n_tok, g->n_nodes, su_backend_of(out));
    char label[64];
    snprintf(label, sizeof(label), "%s out", name);
    print_tensor(label, out, 3);

    struct wsp_ggml_context * hctx = su_host_ctx(16 << 20);
    struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(hctx);
    struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, E, T_MAX);
    struct lcg rr = lcg_new((uint64_t)seed);
    su_fill_host(xr, &rr, 2.0f);
    struct wsp_ggml_tensor * outr = build(hctx, m, xr, l0, n_layer, n_tok);
    wsp_ggml_build_forward_expand(gr, outr);
    su_ref_compute(gr, 2);
    bool same = su_same(out, outr);
    printf("%s matches_plain_ggml %d\n", name, same ? 1 : 0);
    wsp_ggml_free(hctx);
    wsp_ggml_free(gctx);
    return same ? 0 : 1;
}

static void measure(const char * name, wsp_ggml_backend_sched_t sched, const struct model * m,
                    int l0, int n_layer, int n_tok) {
    struct wsp_ggml_context * gctx = su_graph_ctx(256, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
    wsp_ggml_build_forward_expand(g, build(gctx, m, m->x_in, l0, n_layer, n_tok));
    printf("%s measure l0=%d n_layer=%d n_tok=%d n_nodes=%d\n", name, l0, n_layer, n_tok, g->n_nodes);
    wsp_ggml_backend_sched_init_measure(sched, g);
    wsp_ggml_free(gctx);
}

int main(void) {
    wsp_ggml_backend_t tb = su_test_backend("TEST_M", 64, true, true, true);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 2);
    wsp_ggml_backend_t backends[2] = { tb, cpu };

    struct su_store st_tb, st_cpu;
    su_store_init(&st_tb, tb, 1 << 20);
    su_store_init(&st_cpu, cpu, 1 << 20);

    struct wsp_ggml_context * wctx = make_ctx(32, false, true, 0);
    struct model m;
    struct lcg r = lcg_new(11);
    for (int l = 0; l < L_MAX; l++) {
        // even layers on the test backend, odd ones on the CPU; layer 3 mixed
        struct su_store * s = l % 2 == 0 ? &st_tb : &st_cpu;
        m.w1[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, F); su_store_put(s, m.w1[l], &r, 0.2f);
        m.w2[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, F, E); su_store_put(l == 3 ? &st_tb : s, m.w2[l], &r, 0.2f);
        m.g[l] = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, E);     su_store_put(s, m.g[l], &r, 1.0f);
    }
    m.x_in = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, T_MAX);
    wsp_ggml_allocr_alloc(st_cpu.alloc, m.x_in);

    int n_fail = 0;

    // 1. measured with the largest graph, used with smaller ones
    {
        wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
        CHECK(sched != NULL);
        measure("big", sched, &m, 0, L_MAX, T_MAX);
        su_print_sched_buffer("big", sched, tb);
        su_print_sched_buffer("big", sched, cpu);
        const int cases[][3] = {
            { 0, L_MAX, T_MAX }, { 0, 2, 8 }, { 0, 4, 17 }, { 0, 1, 1 }, { 0, 3, T_MAX },
            { 0, 5, 31 }, { 0, L_MAX, T_MAX }, { 0, 2, T_MAX }, { 0, L_MAX, 16 }, { 0, 1, T_MAX }, { 0, 4, T_MAX },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            n_fail += run("big", sched, &m, cases[i][0], cases[i][1], cases[i][2], 100 + (int)i);
        }
        su_print_sched_buffer("big after", sched, tb);
        su_print_sched_buffer("big after", sched, cpu);
        wsp_ggml_backend_sched_free(sched);
    }

    // 2. measured with a small graph
    {
        wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
        CHECK(sched != NULL);
        measure("small", sched, &m, 0, 2, 8);
        su_print_sched_buffer("small", sched, tb);
        su_print_sched_buffer("small", sched, cpu);
        const int cases[][3] = { { 0, 2, 8 }, { 0, 1, 8 }, { 0, 2, 8 } };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            n_fail += run("small", sched, &m, cases[i][0], cases[i][1], cases[i][2], 200 + (int)i);
        }
        wsp_ggml_backend_sched_free(sched);
    }

    // 3. CPU first: everything that can run on the CPU runs there
    {
        wsp_ggml_backend_t rev[2] = { cpu, tb };
        wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(rev, 2);
        CHECK(sched != NULL);
        measure("cpufirst", sched, &m, 0, 4, 16);
        su_print_sched_buffer("cpufirst", sched, tb);
        su_print_sched_buffer("cpufirst", sched, cpu);
        const int cases[][3] = { { 0, 4, 16 }, { 1, 2, 16 }, { 0, 4, 9 } };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            n_fail += run("cpufirst", sched, &m, cases[i][0], cases[i][1], cases[i][2], 300 + (int)i);
        }
        wsp_ggml_backend_sched_free(sched);
    }

    // 4. only the CPU layers: nothing is assigned to the test backend
    {
        wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
        CHECK(sched != NULL);
        measure("cpuonly", sched, &m, 1, 1, T_MAX);
        su_print_sched_buffer("cpuonly", sched, tb);
        su_print_sched_buffer("cpuonly", sched, cpu);
        n_fail += run("cpuonly", sched, &m, 1, 1, T_MAX, 400);
        n_fail += run("cpuonly", sched, &m, 1, 1, 3, 401);
        wsp_ggml_backend_sched_free(sched);
    }

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
