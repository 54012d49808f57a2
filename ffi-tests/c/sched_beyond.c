// Ours-only test: scheduler behaviour beyond the limits of the original
// ggml-backend.c. Every case computes a graph through the scheduler and
// checks the result bit for bit against a plain ggml.c computation of the
// same graph, printing "ok <case>"; any mismatch aborts (non-zero exit).
//
// The original cannot pass these (it ignores set_node_backend, asserts at 4
// backends / 256 splits / 16 inputs per split, requires every graph to fit
// the measure graph's hash table, and leaks one ggml context per scheduler,
// so it runs out of contexts after about 60 schedulers).
//
// Usage: sched_beyond [case [n]]  — no argument runs every case; n overrides
// the size of a case (used to run the same code within the original's limits).
#include "sched_util.h"

#include <stdlib.h>

#define E 16
#define T 4

// ---------------------------------------------------------------------------
// a chain of mul_mat + norm layers whose weights live on given backends

struct chain {
    int n;
    struct wsp_ggml_tensor ** w; // [E, E] each
    struct wsp_ggml_tensor * x;  // [E, T] input
    struct wsp_ggml_context * wctx;
};

static void chain_init(struct chain * c, int n, struct su_store * const * layer_store, struct su_store * x_store, uint64_t seed) {
    c->n = n;
    c->w = (struct wsp_ggml_tensor **)calloc((size_t)n, sizeof(*c->w));
    CHECK(c->w != NULL);
    c->wctx = make_ctx((size_t)n + 4, false, true, 0);
    struct lcg r = lcg_new(seed);
    for (int i = 0; i < n; i++) {
        c->w[i] = wsp_ggml_new_tensor_2d(c->wctx, WSP_GGML_TYPE_F32, E, E);
        su_store_put(layer_store[i], c->w[i], &r, 0.5f);
    }
    c->x = wsp_ggml_new_tensor_2d(c->wctx, WSP_GGML_TYPE_F32, E, T);
    su_store_put(x_store, c->x, &r, 1.0f);
}

static void chain_free(struct chain * c) {
    free(c->w);
    wsp_ggml_free(c->wctx);
}

static struct wsp_ggml_tensor * chain_build(struct wsp_ggml_context * ctx, const struct chain * c,
                                            struct wsp_ggml_tensor * x, int n_layer) {
    struct wsp_ggml_tensor * h = x;
    for (int i = 0; i < n_layer; i++) {
        h = wsp_ggml_mul_mat(ctx, c->w[i], h);
        h = wsp_ggml_norm(ctx, h, 1e-5f);
    }
    return wsp_ggml_soft_max(ctx, h);
}

// plain ggml.c ground truth for the first n_layer layers; returns a malloc'd copy of the output
static float * chain_reference(const struct chain * c, int n_layer) {
    size_t gsize = (size_t)(2 * n_layer + 16);
    struct wsp_ggml_context * hctx = su_host_ctx(((size_t)2 * n_layer + 16) * (wsp_ggml_tensor_overhead() + E * T * sizeof(float))
                                                 + wsp_ggml_graph_overhead_custom(gsize, false) + (1 << 20));
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph_custom(hctx, gsize, false);
    struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, E, T);
    wsp_ggml_backend_tensor_get(c->x, xr->data, 0, wsp_ggml_nbytes(xr));
    struct wsp_ggml_tensor * out = chain_build(hctx, c, xr, n_layer);
    wsp_ggml_build_forward_expand(g, out);
    su_ref_compute(g, 1);
    float * res = (float *)malloc(wsp_ggml_nbytes(out));
    CHECK(res != NULL);
    memcpy(res, out->data, wsp_ggml_nbytes(out));
    wsp_ggml_free(hctx);
    return res;
}

static size_t graph_size_for(int n_layer) {
    size_t s = (size_t)(2 * n_layer + 16);
    return s < WSP_GGML_DEFAULT_GRAPH_SIZE ? WSP_GGML_DEFAULT_GRAPH_SIZE : s;
}

static void chain_measure(wsp_ggml_backend_sched_t sched, const struct chain * c, int n_layer, size_t graph_size) {
    struct wsp_ggml_context * gctx = su_graph_ctx((size_t)(2 * n_layer + 16), graph_size);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph_custom(gctx, graph_size, false);
    wsp_ggml_build_forward_expand(g, chain_build(gctx, c, c->x, n_layer));
    wsp_ggml_backend_sched_init_measure(sched, g);
    wsp_ggml_free(gctx);
}

// compute through the scheduler and compare with the reference
static void chain_compute_check(wsp_ggml_backend_sched_t sched, const struct chain * c, int n_layer,
                                size_t graph_size, const float * ref) {
    struct wsp_ggml_context * gctx = su_graph_ctx((size_t)(2 * n_layer + 16), graph_size);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph_custom(gctx, graph_size, false);
    struct wsp_ggml_tensor * out = chain_build(gctx, c, c->x, n_layer);
    wsp_ggml_build_forward_expand(g, out);
    wsp_ggml_backend_sched_graph_compute(sched, g);
    float * got = (float *)su_read(out);
    CHECK(memcmp(got, ref, wsp_ggml_nbytes(out)) == 0);
    free(got);
    wsp_ggml_free(gctx);
}

// ---------------------------------------------------------------------------
// cases

// A node forced onto a backend that holds no weights at all must run there.
static void case_set_node_backend(int n) {
    (void)n;
    wsp_ggml_backend_t ba = su_test_backend("SNB_A", 64, true, true, true);
    wsp_ggml_backend_t bb = su_test_backend("SNB_B", 32, false, false, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    wsp_ggml_backend_t backends[3] = { ba, bb, cpu };
    struct su_store sa, sc;
    su_store_init(&sa, ba, 1 << 16);
    su_store_init(&sc, cpu, 1 << 16);

    struct wsp_ggml_context * wctx = make_ctx(8, false, true, 0);
    struct lcg r = lcg_new(5);
    struct wsp_ggml_tensor * w1 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, E); su_store_put(&sa, w1, &r, 0.5f);
    struct wsp_ggml_tensor * w2 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, E); su_store_put(&sc, w2, &r, 0.5f);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, T);  su_store_put(&sc, x, &r, 1.0f);

    // reference
    float ref[E * T];
    {
        struct wsp_ggml_context * hctx = su_host_ctx(1 << 20);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(hctx);
        struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, E, T);
        memcpy(xr->data, x->data, wsp_ggml_nbytes(x));
        struct wsp_ggml_tensor * o = wsp_ggml_soft_max(hctx, wsp_ggml_mul_mat(hctx, w2, wsp_ggml_gelu(hctx, wsp_ggml_mul_mat(hctx, w1, xr))));
        wsp_ggml_build_forward_expand(g, o);
        su_ref_compute(g, 1);
        memcpy(ref, o->data, sizeof(ref));
        wsp_ggml_free(hctx);
    }

    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 3);
    CHECK(sched != NULL);
    for (int it = 0; it < 4; it++) {
        struct wsp_ggml_context * gctx = su_graph_ctx(32, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        struct wsp_ggml_tensor * m1 = wsp_ggml_mul_mat(gctx, w1, x);     // naturally on SNB_A
        struct wsp_ggml_tensor * ge = wsp_ggml_gelu(gctx, m1);           // forced onto SNB_B
        struct wsp_ggml_tensor * m2 = wsp_ggml_mul_mat(gctx, w2, ge);    // naturally on CPU
        struct wsp_ggml_tensor * o = wsp_ggml_soft_max(gctx, m2);        // forced onto SNB_A
        wsp_ggml_build_forward_expand(g, o);
        wsp_ggml_backend_sched_set_node_backend(sched, ge, bb);
        wsp_ggml_backend_sched_set_node_backend(sched, o, ba);
        if (it == 0) {
            // the assignments of the measure graph size the buffers
            wsp_ggml_backend_sched_init_measure(sched, g);
            CHECK(wsp_ggml_backend_buffer_get_size(wsp_ggml_backend_sched_get_buffer(sched, bb)) >= sizeof(float) * E * T);
        } else {
            long gc_b = test_backend_stats(bb)->calls[TB_GRAPH_COMPUTE];
            long gc_a = test_backend_stats(ba)->calls[TB_GRAPH_COMPUTE];
            wsp_ggml_backend_sched_graph_compute(sched, g);
            CHECK(test_backend_stats(bb)->calls[TB_GRAPH_COMPUTE] == gc_b + 1);
            CHECK(test_backend_stats(ba)->calls[TB_GRAPH_COMPUTE] == gc_a + 2);
            CHECK(wsp_ggml_get_backend(ge) == bb);
            CHECK(wsp_ggml_get_backend(m2) == cpu);
            CHECK(wsp_ggml_get_backend(o) == ba);
            float got[E * T];
            wsp_ggml_backend_tensor_get(o, got, 0, sizeof(got));
            CHECK(memcmp(got, ref, sizeof(ref)) == 0);
        }
        wsp_ggml_free(gctx);
    }
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&sa);
    su_store_free(&sc);
    wsp_ggml_free(wctx);
    wsp_ggml_backend_free(ba);
    wsp_ggml_backend_free(bb);
    wsp_ggml_backend_free(cpu);
    printf("ok set_node_backend\n");
}

// n layers alternating between two backends: about n splits.
static void case_many_splits(int n) {
    if (n <= 0) {
        n = 300;
    }
    wsp_ggml_backend_t ba = su_test_backend("SPL_A", 64, true, true, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    wsp_ggml_backend_t backends[2] = { ba, cpu };
    struct su_store sa, sc;
    su_store_init(&sa, ba, (size_t)n * E * E * sizeof(float) + 4096 + (size_t)n * 64);
    su_store_init(&sc, cpu, (size_t)n * E * E * sizeof(float) + 4096 + (size_t)n * 64);
    struct su_store ** ls = (struct su_store **)malloc(sizeof(*ls) * (size_t)n);
    CHECK(ls != NULL);
    for (int i = 0; i < n; i++) {
        ls[i] = i % 2 == 0 ? &sa : &sc;
    }
    struct chain c;
    chain_init(&c, n, ls, &sc, 77);
    float * ref = chain_reference(&c, n);

    size_t gs = graph_size_for(n);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    CHECK(sched != NULL);
    chain_measure(sched, &c, n, gs);
    long gc0 = test_backend_stats(ba)->calls[TB_GRAPH_COMPUTE];
    for (int it = 0; it < 3; it++) {
        chain_compute_check(sched, &c, n, gs, ref);
    }
    long splits_a = (test_backend_stats(ba)->calls[TB_GRAPH_COMPUTE] - gc0) / 3;
    CHECK(splits_a == (n + 1) / 2);
    wsp_ggml_backend_sched_free(sched);
    free(ref);
    chain_free(&c);
    free(ls);
    su_store_free(&sa);
    su_store_free(&sc);
    wsp_ggml_backend_free(ba);
    wsp_ggml_backend_free(cpu);
    printf("ok many_splits\n");
}

// o = soft_max(sum_i wa[i] * xc[i]); every mul has its own CPU-resident input
static struct wsp_ggml_tensor * inputs_build(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor ** wa,
                                             struct wsp_ggml_tensor ** xc, int n) {
    struct wsp_ggml_tensor * acc = NULL;
    for (int i = 0; i < n; i++) {
        struct wsp_ggml_tensor * p = wsp_ggml_mul(ctx, wa[i], xc[i]);
        acc = acc == NULL ? p : wsp_ggml_add(ctx, acc, p);
    }
    return wsp_ggml_soft_max(ctx, acc);
}

// One split on the test backend that consumes n tensors living on the CPU.
static void case_many_inputs(int n) {
    if (n <= 0) {
        n = 40;
    }
    wsp_ggml_backend_t ba = su_test_backend("INP_A", 64, true, true, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    wsp_ggml_backend_t backends[2] = { ba, cpu };
    struct su_store sa, sc;
    su_store_init(&sa, ba, (size_t)n * (E * T * sizeof(float) + 64) + 4096);
    su_store_init(&sc, cpu, (size_t)n * (E * T * sizeof(float) + 64) + 4096);
    struct wsp_ggml_context * wctx = make_ctx((size_t)(2 * n + 2), false, true, 0);
    struct wsp_ggml_tensor ** wa = (struct wsp_ggml_tensor **)malloc(sizeof(*wa) * (size_t)n);
    struct wsp_ggml_tensor ** xc = (struct wsp_ggml_tensor **)malloc(sizeof(*xc) * (size_t)n);
    CHECK(wa != NULL && xc != NULL);
    struct lcg r = lcg_new(8);
    for (int i = 0; i < n; i++) {
        wa[i] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, T); su_store_put(&sa, wa[i], &r, 1.0f);
        xc[i] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, T); su_store_put(&sc, xc[i], &r, 1.0f);
    }

    float ref[E * T];
    {
        struct wsp_ggml_context * hctx = su_host_ctx((size_t)(2 * n + 8) * (wsp_ggml_tensor_overhead() + E * T * sizeof(float))
                                                     + wsp_ggml_graph_overhead() + (1 << 20));
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(hctx);
        struct wsp_ggml_tensor * o = inputs_build(hctx, wa, xc, n);
        wsp_ggml_build_forward_expand(g, o);
        su_ref_compute(g, 1);
        memcpy(ref, o->data, sizeof(ref));
        wsp_ggml_free(hctx);
    }

    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    CHECK(sched != NULL);
    for (int it = 0; it < 3; it++) {
        struct wsp_ggml_context * ctx = su_graph_ctx((size_t)(2 * n + 8), WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        struct wsp_ggml_tensor * o = inputs_build(ctx, wa, xc, n);
        wsp_ggml_build_forward_expand(g, o);
        if (it == 0) {
            wsp_ggml_backend_sched_init_measure(sched, g);
        } else {
            long gc = test_backend_stats(ba)->calls[TB_GRAPH_COMPUTE];
            wsp_ggml_backend_sched_graph_compute(sched, g);
            CHECK(test_backend_stats(ba)->calls[TB_GRAPH_COMPUTE] == gc + 1); // a single split
            CHECK(wsp_ggml_get_backend(o) == ba);
            float got[E * T];
            wsp_ggml_backend_tensor_get(o, got, 0, sizeof(got));
            CHECK(memcmp(got, ref, sizeof(ref)) == 0);
        }
        wsp_ggml_free(ctx);
    }
    wsp_ggml_backend_sched_free(sched);
    free(wa);
    free(xc);
    wsp_ggml_free(wctx);
    su_store_free(&sa);
    su_store_free(&sc);
    wsp_ggml_backend_free(ba);
    wsp_ggml_backend_free(cpu);
    printf("ok many_inputs\n");
}

// n_test test backends + CPU; layer i lives on backend i % (n_test + 1).
static void case_many_backends(int n_test) {
    if (n_test <= 0) {
        n_test = 6;
    }
    const int nb = n_test + 1;
    wsp_ggml_backend_t * bk = (wsp_ggml_backend_t *)malloc(sizeof(*bk) * (size_t)nb);
    struct su_store * st = (struct su_store *)malloc(sizeof(*st) * (size_t)nb);
    CHECK(bk != NULL && st != NULL);
    for (int i = 0; i < n_test; i++) {
        char name[16];
        snprintf(name, sizeof(name), "MB%d", i);
        bk[i] = su_test_backend(name, (size_t)16 << (i % 4), i % 2 == 0, i % 3 == 0, i % 2 == 1);
    }
    bk[n_test] = su_cpu_backend();
    for (int i = 0; i < nb; i++) {
        su_store_init(&st[i], bk[i], 1 << 16);
    }
    const int n_layer = 3 * nb + 1;
    struct su_store ** ls = (struct su_store **)malloc(sizeof(*ls) * (size_t)n_layer);
    CHECK(ls != NULL);
    for (int i = 0; i < n_layer; i++) {
        ls[i] = &st[(i * 5) % nb]; // visit the backends in a scrambled order
    }
    struct chain c;
    chain_init(&c, n_layer, ls, &st[n_test], 99);
    float * ref = chain_reference(&c, n_layer);

    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(bk, nb);
    CHECK(sched != NULL);
    chain_measure(sched, &c, n_layer, WSP_GGML_DEFAULT_GRAPH_SIZE);
    long * gc0 = (long *)malloc(sizeof(long) * (size_t)n_test);
    CHECK(gc0 != NULL);
    for (int i = 0; i < n_test; i++) {
        gc0[i] = test_backend_stats(bk[i])->calls[TB_GRAPH_COMPUTE];
    }
    for (int it = 0; it < 3; it++) {
        chain_compute_check(sched, &c, n_layer, WSP_GGML_DEFAULT_GRAPH_SIZE, ref);
    }
    for (int i = 0; i < n_test; i++) {
        CHECK(test_backend_stats(bk[i])->calls[TB_GRAPH_COMPUTE] - gc0[i] >= 3 * 3);
        CHECK(wsp_ggml_backend_sched_get_buffer(sched, bk[i]) != NULL);
        CHECK(wsp_ggml_backend_sched_get_tallocr(sched, bk[i]) != NULL);
    }
    wsp_ggml_backend_sched_free(sched);
    free(gc0);
    free(ref);
    chain_free(&c);
    free(ls);
    for (int i = 0; i < nb; i++) {
        su_store_free(&st[i]);
    }
    for (int i = 0; i < nb; i++) {
        wsp_ggml_backend_free(bk[i]);
    }
    free(st);
    free(bk);
    printf("ok many_backends\n");
}

// Measured with a short chain in a small graph; computes a much longer chain
// (same tensor sizes) built in a graph with a larger capacity.
// n > 0: number of layers of the long chain; "samecap" keeps the default capacity.
static void case_big_graph(int n, bool same_capacity) {
    if (n <= 0) {
        n = 400;
    }
    wsp_ggml_backend_t ba = su_test_backend("BIG_A", 128, true, true, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    wsp_ggml_backend_t backends[2] = { ba, cpu };
    struct su_store sa, sc;
    su_store_init(&sa, ba, (size_t)n * (E * E * sizeof(float) + 128) + 4096);
    su_store_init(&sc, cpu, (size_t)n * (E * E * sizeof(float) + 128) + 4096);
    struct su_store ** ls = (struct su_store **)malloc(sizeof(*ls) * (size_t)n);
    CHECK(ls != NULL);
    // runs of four layers per backend (fewer splits than layers)
    for (int i = 0; i < n; i++) {
        ls[i] = (i / 4) % 2 == 0 ? &sa : &sc;
    }
    struct chain c;
    chain_init(&c, n, ls, &sc, 123);
    float * ref = chain_reference(&c, n);

    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    CHECK(sched != NULL);
    const size_t small_cap = same_capacity ? WSP_GGML_DEFAULT_GRAPH_SIZE : 64;
    chain_measure(sched, &c, 12, small_cap);
    const size_t big_cap = same_capacity ? WSP_GGML_DEFAULT_GRAPH_SIZE : graph_size_for(n) * 2;
    for (int it = 0; it < 2; it++) {
        chain_compute_check(sched, &c, n, big_cap, ref);
    }
    // a short chain still works afterwards
    float * ref8 = chain_reference(&c, 8);
    chain_compute_check(sched, &c, 8, small_cap, ref8);
    free(ref8);
    wsp_ggml_backend_sched_free(sched);
    free(ref);
    chain_free(&c);
    free(ls);
    su_store_free(&sa);
    su_store_free(&sc);
    wsp_ggml_backend_free(ba);
    wsp_ggml_backend_free(cpu);
    printf("ok big_graph\n");
}

// init_measure called again with a larger graph re-measures (the original
// leaked its tables and measured with the real allocators); memcheck runs
// this program too, so a leak would fail the suite.
static void case_remeasure(int n) {
    if (n <= 0) {
        n = 16;
    }
    wsp_ggml_backend_t ba = su_test_backend("RE_A", 64, true, false, false);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    wsp_ggml_backend_t backends[2] = { ba, cpu };
    struct su_store sa, sc;
    su_store_init(&sa, ba, (size_t)n * (E * E * sizeof(float) + 128) + 4096);
    su_store_init(&sc, cpu, (size_t)n * (E * E * sizeof(float) + 128) + 4096);
    struct su_store ** ls = (struct su_store **)malloc(sizeof(*ls) * (size_t)n);
    CHECK(ls != NULL);
    for (int i = 0; i < n; i++) {
        ls[i] = i % 3 == 0 ? &sc : &sa;
    }
    struct chain c;
    chain_init(&c, n, ls, &sc, 77);
    float * ref = chain_reference(&c, n);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    chain_measure(sched, &c, 2, WSP_GGML_DEFAULT_GRAPH_SIZE);
    chain_measure(sched, &c, n, WSP_GGML_DEFAULT_GRAPH_SIZE);
    chain_compute_check(sched, &c, n, WSP_GGML_DEFAULT_GRAPH_SIZE, ref);
    wsp_ggml_backend_sched_free(sched);
    free(ref);
    chain_free(&c);
    free(ls);
    su_store_free(&sa);
    su_store_free(&sc);
    CHECK(test_backend_live_buffers() == 0);
    wsp_ggml_backend_free(ba);
    wsp_ggml_backend_free(cpu);
    printf("ok remeasure\n");
}

// Many schedulers created, measured, used and freed; no test-backend buffer may leak.
static void case_many_scheds(int n) {
    if (n <= 0) {
        n = 1000;
    }
    wsp_ggml_backend_t ba = su_test_backend("MS_A", 64, true, true, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    struct su_store sa, sc;
    su_store_init(&sa, ba, 1 << 16);
    su_store_init(&sc, cpu, 1 << 16);
    struct su_store * ls[4] = { &sa, &sc, &sa, &sc };
    struct chain c;
    chain_init(&c, 4, ls, &sc, 31);
    float * ref = chain_reference(&c, 4);
    const long live0 = test_backend_live_buffers();
    for (int i = 0; i < n; i++) {
        wsp_ggml_backend_t backends[2];
        backends[0] = i % 2 == 0 ? ba : cpu;
        backends[1] = i % 2 == 0 ? cpu : ba;
        wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
        CHECK(sched != NULL);
        if (i % 3 != 2) { // some schedulers are freed without ever being measured
            chain_measure(sched, &c, 4, WSP_GGML_DEFAULT_GRAPH_SIZE);
            if (i % 3 == 0) {
                chain_compute_check(sched, &c, 4, WSP_GGML_DEFAULT_GRAPH_SIZE, ref);
            }
        }
        wsp_ggml_backend_sched_free(sched);
        CHECK(test_backend_live_buffers() == live0);
    }
    free(ref);
    chain_free(&c);
    su_store_free(&sa);
    su_store_free(&sc);
    CHECK(test_backend_live_buffers() == 0);
    wsp_ggml_backend_free(ba);
    wsp_ggml_backend_free(cpu);
    printf("ok many_scheds\n");
}

int main(int argc, char ** argv) {
    const char * which = argc > 1 ? argv[1] : NULL;
    const int n = argc > 2 ? atoi(argv[2]) : 0;
    const bool samecap = argc > 3 && strcmp(argv[3], "samecap") == 0;
    bool any = false;
#define RUN(name, call)                                   \
    if (which == NULL || strcmp(which, name) == 0) {      \
        call;                                             \
        fflush(stdout);                                   \
        any = true;                                       \
    }
    RUN("set_node_backend", case_set_node_backend(n));
    RUN("many_splits", case_many_splits(n));
    RUN("many_inputs", case_many_inputs(n));
    RUN("many_backends", case_many_backends(n));
    RUN("big_graph", case_big_graph(n, samecap));
    RUN("many_scheds", case_many_scheds(n));
    RUN("remeasure", case_remeasure(n));
#undef RUN
    if (!any) {
        fprintf(stderr, "unknown case %s\n", which);
        return 2;
    }
    return 0;
}
