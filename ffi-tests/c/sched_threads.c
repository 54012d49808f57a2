// Ours-only test (also runs on the original): schedulers used concurrently.
// Four pthreads, each with its own CPU backend, test backend, weights, two
// schedulers (test backend first / CPU first) and freshly built graphs, run
// many iterations; every result is checked bit for bit against a plain
// ggml.c computation of the same graph. Prints "ok" when everything matched;
// any mismatch aborts.
#include "sched_util.h"

#include <pthread.h>
#include <stdlib.h>

#define N_THREADS 4
#define N_ITER 50
#define E 24
#define F 40
#define L 3
#define T_MAX 8

struct model {
    struct wsp_ggml_tensor * w1[L];
    struct wsp_ggml_tensor * w2[L];
    struct wsp_ggml_tensor * g[L];
    struct wsp_ggml_tensor * x_in; // [E, T_MAX] CPU
};

static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, const struct model * m,
                                      struct wsp_ggml_tensor * x_in, int n_tok) {
    struct wsp_ggml_tensor * x = x_in;
    if (n_tok < T_MAX) {
        x = wsp_ggml_view_2d(ctx, x_in, E, n_tok, x_in->nb[1], 0);
    }
    for (int l = 0; l < L; l++) {
        struct wsp_ggml_tensor * h = wsp_ggml_norm(ctx, x, 1e-5f);
        h = wsp_ggml_mul(ctx, h, m->g[l]);
        h = wsp_ggml_mul_mat(ctx, m->w1[l], h);
        h = wsp_ggml_gelu(ctx, h);
        h = wsp_ggml_mul_mat(ctx, m->w2[l], h);
        x = wsp_ggml_add(ctx, x, h);
    }
    return wsp_ggml_soft_max(ctx, x);
}

struct thread_arg {
    int id;
    int n_ok;
};

static void * worker(void * p) {
    struct thread_arg * a = (struct thread_arg *)p;
    char name[16];
    snprintf(name, sizeof(name), "THR%d", a->id);
    wsp_ggml_backend_t tb = su_test_backend(name, (size_t)32 << (a->id % 3), a->id % 2 == 0, true, a->id != 1);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 1 + a->id % 2);

    struct su_store st_tb, st_cpu;
    su_store_init(&st_tb, tb, 1 << 18);
    su_store_init(&st_cpu, cpu, 1 << 18);
    struct wsp_ggml_context * wctx = make_ctx(16, false, true, 0);
    struct model m;
    struct lcg r = lcg_new(500 + (uint64_t)a->id);
    for (int l = 0; l < L; l++) {
        struct su_store * s = (l + a->id) % 2 == 0 ? &st_tb : &st_cpu;
        m.w1[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, F); su_store_put(s, m.w1[l], &r, 0.3f);
        m.w2[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, F, E); su_store_put(s == &st_tb ? &st_cpu : &st_tb, m.w2[l], &r, 0.3f);
        m.g[l] = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, E);     su_store_put(s, m.g[l], &r, 1.0f);
    }
    m.x_in = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, T_MAX);
    wsp_ggml_allocr_alloc(st_cpu.alloc, m.x_in);

    wsp_ggml_backend_t order0[2] = { tb, cpu };
    wsp_ggml_backend_t order1[2] = { cpu, tb };
    wsp_ggml_backend_sched_t scheds[2];
    scheds[0] = wsp_ggml_backend_sched_new(order0, 2);
    scheds[1] = wsp_ggml_backend_sched_new(order1, 2);
    CHECK(scheds[0] != NULL && scheds[1] != NULL);
    for (int s = 0; s < 2; s++) {
        struct wsp_ggml_context * gctx = su_graph_ctx(128, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        wsp_ggml_build_forward_expand(g, build(gctx, &m, m.x_in, T_MAX));
        wsp_ggml_backend_sched_init_measure(scheds[s], g);
        wsp_ggml_free(gctx);
    }

    static const int toks[4] = { 8, 5, 8, 3 };
    for (int it = 0; it < N_ITER; it++) {
        const int n_tok = toks[it % 4];
        const uint64_t seed = (uint64_t)(a->id * 1000 + it);
        struct lcg ri = lcg_new(seed);
        su_fill(m.x_in, &ri, 2.0f);

        struct wsp_ggml_context * gctx = su_graph_ctx(128, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        struct wsp_ggml_tensor * out = build(gctx, &m, m.x_in, n_tok);
        wsp_ggml_build_forward_expand(g, out);
        wsp_ggml_backend_sched_graph_compute(scheds[it % 2], g);

        struct wsp_ggml_context * hctx = su_host_ctx(4 << 20);
        struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(hctx);
        struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, E, T_MAX);
        struct lcg rr = lcg_new(seed);
        su_fill_host(xr, &rr, 2.0f);
        struct wsp_ggml_tensor * outr = build(hctx, &m, xr, n_tok);
        wsp_ggml_build_forward_expand(gr, outr);
        su_ref_compute(gr, 1);
        CHECK(su_same(out, outr));
        a->n_ok++;
        wsp_ggml_free(hctx);
        wsp_ggml_free(gctx);
    }

    // the test backend must have been used by both schedulers
    CHECK(test_backend_stats(tb)->calls[TB_GRAPH_COMPUTE] > 0);

    wsp_ggml_backend_sched_free(scheds[0]);
    wsp_ggml_backend_sched_free(scheds[1]);
    su_store_free(&st_tb);
    su_store_free(&st_cpu);
    wsp_ggml_free(wctx);
    wsp_ggml_backend_free(tb);
    wsp_ggml_backend_free(cpu);
    return NULL;
}

int main(void) {
    // the graph log of the test backends would interleave between threads
    unsetenv("TEST_BACKEND_LOG");
    // initialise ggml's global tables before the threads start
    {
        struct wsp_ggml_context * ctx = make_ctx(1, false, true, 0);
        wsp_ggml_free(ctx);
    }
    pthread_t th[N_THREADS];
    struct thread_arg args[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        args[i].id = i;
        args[i].n_ok = 0;
        CHECK(pthread_create(&th[i], NULL, worker, &args[i]) == 0);
    }
    int total = 0;
    for (int i = 0; i < N_THREADS; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        total += args[i].n_ok;
    }
    CHECK(total == N_THREADS * N_ITER);
    printf("computes %d\n", total);
    printf("ok\n");
    return 0;
}
