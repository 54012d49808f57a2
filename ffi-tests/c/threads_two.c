// Ours-only test (also runs on the original): two threads use the library at
// the same time, as an application with two models or two sessions would.
// Each thread has its own CPU backend and test backend (which rejects
// soft_max, so every graph splits), weights in both, and a scheduler over
// them; it computes graphs of varying size, pins a node to the CPU backend
// with set_node_backend on some computes, copies results between the two
// backends, and computes a graph on its CPU backend directly (graph plan and
// graph_compute, nodes placed by ggml-alloc). Every result is checked bit for
// bit against ggml.c on the same thread. Prints "ok" when everything matched;
// any mismatch aborts.
//
// tests/valgrind.rs runs it under helgrind with ggml.c's own reports
// suppressed (helgrind-ggml.supp): no report may remain, i.e. nothing in the
// library is shared between threads without synchronisation.
#include "sched_util.h"

#include <pthread.h>
#include <stdlib.h>

#define N_THREADS 2
#define N_ITER 24
#define E 16
#define F 32
#define L 2
#define T_MAX 8

struct model {
    struct wsp_ggml_tensor * w1[L];
    struct wsp_ggml_tensor * w2[L];
    struct wsp_ggml_tensor * g[L];
    struct wsp_ggml_tensor * x_in; // [E, T_MAX] CPU
};

// `pin`: the first mul_mat of each layer, returned for set_node_backend.
static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, const struct model * m,
                                      struct wsp_ggml_tensor * x_in, int n_tok, struct wsp_ggml_tensor ** pin) {
    struct wsp_ggml_tensor * x = x_in;
    if (n_tok < T_MAX) {
        x = wsp_ggml_view_2d(ctx, x_in, E, n_tok, x_in->nb[1], 0);
    }
    for (int l = 0; l < L; l++) {
        struct wsp_ggml_tensor * h = wsp_ggml_norm(ctx, x, 1e-5f);
        h = wsp_ggml_mul(ctx, h, m->g[l]);
        h = wsp_ggml_mul_mat(ctx, m->w1[l], h);
        if (pin != NULL) {
            pin[l] = h;
        }
        h = wsp_ggml_gelu(ctx, h);
        h = wsp_ggml_mul_mat(ctx, m->w2[l], h);
        x = wsp_ggml_add(ctx, x, h);
    }
    return wsp_ggml_soft_max(ctx, x);
}

// The same graph computed by ggml.c alone, on host memory; compared with `out`.
static void check_against_ggml(const struct model * m, struct wsp_ggml_tensor * out, uint64_t seed, int n_tok) {
    struct wsp_ggml_context * hctx = su_host_ctx(4 << 20);
    struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(hctx);
    struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, E, T_MAX);
    struct lcg rr = lcg_new(seed);
    su_fill_host(xr, &rr, 2.0f);
    struct wsp_ggml_tensor * outr = build(hctx, m, xr, n_tok, NULL);
    wsp_ggml_build_forward_expand(gr, outr);
    su_ref_compute(gr, 1);
    CHECK(su_same(out, outr));
    wsp_ggml_free(hctx);
}

struct thread_arg {
    int id;
    int n_ok;
};

static void * worker(void * p) {
    struct thread_arg * a = (struct thread_arg *)p;
    char name[16];
    snprintf(name, sizeof(name), "TWO%d", a->id);
    const int rejected[1] = { WSP_GGML_OP_SOFT_MAX };
    struct test_backend_options o;
    memset(&o, 0, sizeof(o));
    o.name = name;
    o.alignment = (size_t)32 << a->id;
    o.has_cpy_tensor_from = a->id == 0;
    o.has_cpy_tensor_to = a->id == 1;
    o.has_buffer_hooks = true;
    o.rejected_ops = rejected;
    o.n_rejected_ops = 1;
    wsp_ggml_backend_t tb = test_backend_new(&o);
    CHECK(tb != NULL);
    wsp_ggml_backend_t cpu = su_cpu_backend();

    struct su_store st_tb, st_cpu;
    su_store_init(&st_tb, tb, 1 << 17);
    su_store_init(&st_cpu, cpu, 1 << 17);
    struct wsp_ggml_context * wctx = make_ctx(16, false, true, 0);
    struct model m;
    struct lcg r = lcg_new(700 + (uint64_t)a->id);
    for (int l = 0; l < L; l++) {
        struct su_store * s = (l + a->id) % 2 == 0 ? &st_tb : &st_cpu;
        m.w1[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, F); su_store_put(s, m.w1[l], &r, 0.3f);
        m.w2[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, F, E); su_store_put(s == &st_tb ? &st_cpu : &st_tb, m.w2[l], &r, 0.3f);
        m.g[l] = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, E);     su_store_put(s, m.g[l], &r, 1.0f);
    }
    m.x_in = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, T_MAX);
    wsp_ggml_allocr_alloc(st_cpu.alloc, m.x_in);
    // where scheduler outputs are copied to, on the test backend
    struct wsp_ggml_tensor * copy = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, T_MAX);
    wsp_ggml_allocr_alloc(st_tb.alloc, copy);

    wsp_ggml_backend_t order[2] = { tb, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(order, 2);
    CHECK(sched != NULL);
    {
        struct wsp_ggml_context * gctx = su_graph_ctx(128, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        wsp_ggml_build_forward_expand(g, build(gctx, &m, m.x_in, T_MAX, NULL));
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(gctx);
    }

    // the CPU backend's own compute buffer, for graphs computed without the scheduler
    wsp_ggml_backend_buffer_t own_buf = wsp_ggml_backend_alloc_buffer(cpu, 1 << 16);
    CHECK(own_buf != NULL);
    wsp_ggml_allocr_t own_alloc = wsp_ggml_allocr_new_from_buffer(own_buf);

    static const int toks[4] = { 8, 5, 8, 3 };
    for (int it = 0; it < N_ITER; it++) {
        const int n_tok = toks[it % 4];
        const uint64_t seed = (uint64_t)(a->id * 1000 + it);
        struct lcg ri = lcg_new(seed);
        su_fill(m.x_in, &ri, 2.0f);

        // through the scheduler, a node pinned on every third compute
        struct wsp_ggml_context * gctx = su_graph_ctx(128, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        struct wsp_ggml_tensor * pin[L];
        struct wsp_ggml_tensor * out = build(gctx, &m, m.x_in, n_tok, pin);
        wsp_ggml_build_forward_expand(g, out);
        if (it % 3 == 1) {
            wsp_ggml_backend_sched_set_node_backend(sched, pin[it % L], cpu);
        }
        wsp_ggml_backend_sched_graph_compute(sched, g);
        check_against_ggml(&m, out, seed, n_tok);

        // the output copied to the test backend and read back
        if (n_tok == T_MAX) {
            wsp_ggml_backend_tensor_copy(out, copy);
            void * d0 = su_read(out);
            void * d1 = su_read(copy);
            CHECK(memcmp(d0, d1, wsp_ggml_nbytes(out)) == 0);
            free(d0);
            free(d1);
        }
        wsp_ggml_free(gctx);

        // on the CPU backend alone: its layer-0 weights and the input
        struct wsp_ggml_tensor * w = m.w1[0]->buffer == st_cpu.buffer ? m.w1[0] : m.w2[0];
        struct wsp_ggml_context * dctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * dg = wsp_ggml_new_graph(dctx);
        struct wsp_ggml_tensor * dx = w == m.w1[0] ? m.x_in : wsp_ggml_new_tensor_2d(dctx, WSP_GGML_TYPE_F32, F, 2);
        if (dx != m.x_in) {
            wsp_ggml_allocr_alloc(own_alloc, dx);
            struct lcg rd = lcg_new(seed);
            su_fill(dx, &rd, 1.0f);
        }
        struct wsp_ggml_tensor * dy = wsp_ggml_gelu(dctx, wsp_ggml_mul_mat(dctx, w, dx));
        wsp_ggml_build_forward_expand(dg, dy);
        wsp_ggml_allocr_alloc_graph(own_alloc, dg);
        if (it % 2 == 0) {
            wsp_ggml_backend_graph_compute(cpu, dg);
        } else {
            wsp_ggml_backend_graph_plan_t plan = wsp_ggml_backend_graph_plan_create(cpu, dg);
            wsp_ggml_backend_graph_plan_compute(cpu, plan);
            wsp_ggml_backend_graph_plan_free(cpu, plan);
        }
        void * dyd = su_read(dy);
        // ground truth: the same graph on host copies of w and dx
        struct wsp_ggml_context * hctx = su_host_ctx(1 << 20);
        struct wsp_ggml_cgraph * hg = wsp_ggml_new_graph(hctx);
        struct wsp_ggml_tensor * hw = wsp_ggml_dup_tensor(hctx, w);
        struct wsp_ggml_tensor * hx = wsp_ggml_dup_tensor(hctx, dx);
        wsp_ggml_backend_tensor_get(w, hw->data, 0, wsp_ggml_nbytes(w));
        wsp_ggml_backend_tensor_get(dx, hx->data, 0, wsp_ggml_nbytes(dx));
        struct wsp_ggml_tensor * hy = wsp_ggml_gelu(hctx, wsp_ggml_mul_mat(hctx, hw, hx));
        wsp_ggml_build_forward_expand(hg, hy);
        su_ref_compute(hg, 1);
        CHECK(memcmp(dyd, hy->data, wsp_ggml_nbytes(hy)) == 0);
        free(dyd);
        wsp_ggml_free(hctx);
        wsp_ggml_allocr_reset(own_alloc);
        wsp_ggml_free(dctx);
        a->n_ok++;
    }

    // both backends computed parts of the graphs
    CHECK(test_backend_stats(tb)->calls[TB_GRAPH_COMPUTE] > 0);
    CHECK(test_backend_stats(tb)->rejected_computed == 0);

    wsp_ggml_allocr_free(own_alloc);
    wsp_ggml_backend_buffer_free(own_buf);
    wsp_ggml_backend_sched_free(sched);
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
