// Differential test of each rule of the scheduler's backend assignment, with
// three backends in priority order HI (test), LO (test), CPU. Run with
// TEST_BACKEND_LOG=1 (the harness does), the test backends print every graph
// they compute, so each node's backend and every split boundary is compared.
//
// Rules exercised (see the original sched_split_graph):
//  - a leaf whose view_src lives on a backend goes there;
//  - a node whose destination is pre-allocated stays there (cpy into a cache);
//  - a node that is a view of a pre-allocated tensor goes to its backend;
//  - pass 1: among sources in backend buffers, a better-priority source only
//    wins if it is at least as large as the current winner;
//  - pass 2: the same rule over the sources' assignments;
//  - view ops never start a split; the first split follows the first
//    non-view node.
#include "sched_util.h"

struct inputs {
    struct wsp_ggml_tensor * big_lo;    // [16, 64] on LO
    struct wsp_ggml_tensor * small_hi;  // [16, 1]  on HI
    struct wsp_ggml_tensor * vec_hi;    // [64]     on HI
    struct wsp_ggml_tensor * one_lo;    // [1]      on LO
    struct wsp_ggml_tensor * one_hi;    // [1]      on HI
    struct wsp_ggml_tensor * x_cpu;     // [64]     on CPU
    struct wsp_ggml_tensor * cache_lo;  // [64]     on LO (destination of a cpy)
};

static struct wsp_ggml_tensor * named(struct wsp_ggml_tensor * t, const char * name) {
    wsp_ggml_set_name(t, name);
    return t;
}

static struct wsp_ggml_cgraph * build(struct wsp_ggml_context * ctx, const struct inputs * in, struct wsp_ggml_tensor ** outs) {
    // pass 1 size rule: src0 (LO, 4096 B) beats src1 (HI, 64 B) despite its worse priority
    struct wsp_ggml_tensor * mm = named(wsp_ggml_mul_mat(ctx, in->big_lo, in->small_hi), "mm");        // LO
    struct wsp_ggml_tensor * mm_s = named(wsp_ggml_scale(ctx, mm, in->one_lo), "mm_s");                // LO (pass 1, one_lo)
    // a view of a HI leaf feeding a node whose only located source is on LO
    struct wsp_ggml_tensor * v = named(wsp_ggml_view_1d(ctx, in->vec_hi, 16, 0), "v_hi");
    struct wsp_ggml_tensor * v_s = named(wsp_ggml_scale(ctx, v, in->one_lo), "v_s");                  // LO
    struct wsp_ggml_tensor * a = named(wsp_ggml_scale(ctx, in->vec_hi, in->one_lo), "a_scale");       // HI
    // view of a computed node, then cont: follows its source in pass 2
    struct wsp_ggml_tensor * e_lo = named(wsp_ggml_cont(ctx, wsp_ggml_view_1d(ctx, mm_s, 64, 0)), "e_cont"); // LO
    struct wsp_ggml_tensor * s_hi = named(wsp_ggml_sqr(ctx, in->one_hi), "s_sqr");                    // HI
    // pass 2 size rule: e_lo (LO, 256 B) first, s_hi (HI, 4 B) second: LO keeps it
    struct wsp_ggml_tensor * p2 = named(wsp_ggml_scale(ctx, e_lo, s_hi), "p2_scale");                  // LO
    struct wsp_ggml_tensor * b_lo = named(wsp_ggml_sqr(ctx, in->one_lo), "b_sqr");                    // LO
    struct wsp_ggml_tensor * p3 = named(wsp_ggml_scale(ctx, a, b_lo), "p3_scale");                    // HI
    struct wsp_ggml_tensor * f = named(wsp_ggml_add(ctx, in->x_cpu, p3), "f_add");                    // CPU
    // destination rule: cpy into a pre-allocated LO cache
    struct wsp_ggml_tensor * g = named(wsp_ggml_cpy(ctx, f, in->cache_lo), "g_cpy");                  // LO
    struct wsp_ggml_tensor * h = named(wsp_ggml_add(ctx, p2, f), "h_add");                            // LO
    struct wsp_ggml_tensor * r = named(wsp_ggml_soft_max(ctx, h), "r_softmax");                       // LO

    struct wsp_ggml_cgraph * gf = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(gf, v_s);
    wsp_ggml_build_forward_expand(gf, p3);
    wsp_ggml_build_forward_expand(gf, g);
    wsp_ggml_build_forward_expand(gf, r);
    outs[0] = v_s;
    outs[1] = p3;
    outs[2] = r;
    outs[3] = in->cache_lo;
    return gf;
}

int main(void) {
    wsp_ggml_backend_t hi = su_test_backend("HI", 32, true, false, false);
    wsp_ggml_backend_t lo = su_test_backend("LO", 64, false, true, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();

    struct su_store s_hi, s_lo, s_cpu;
    su_store_init(&s_hi, hi, 1 << 16);
    su_store_init(&s_lo, lo, 1 << 16);
    su_store_init(&s_cpu, cpu, 1 << 16);

    struct wsp_ggml_context * wctx = make_ctx(16, false, true, 0);
    struct inputs in;
    struct lcg rng = lcg_new(7);
    in.big_lo = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, 16, 64);
    in.small_hi = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, 16, 1);
    in.vec_hi = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 64);
    in.one_lo = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 1);
    in.one_hi = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 1);
    in.x_cpu = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 64);
    in.cache_lo = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 64);
    su_store_put(&s_lo, in.big_lo, &rng, 0.5f);
    su_store_put(&s_hi, in.small_hi, &rng, 0.5f);
    su_store_put(&s_hi, in.vec_hi, &rng, 1.0f);
    su_store_put(&s_lo, in.one_lo, &rng, 1.0f);
    su_store_put(&s_hi, in.one_hi, &rng, 1.0f);
    su_store_put(&s_cpu, in.x_cpu, &rng, 1.0f);
    su_store_put(&s_lo, in.cache_lo, &rng, 0.0f);

    wsp_ggml_backend_t backends[3] = { hi, lo, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 3);

    struct wsp_ggml_tensor * outs[4];
    struct wsp_ggml_context * mctx = su_graph_ctx(64, WSP_GGML_DEFAULT_GRAPH_SIZE);
    wsp_ggml_backend_sched_init_measure(sched, build(mctx, &in, outs));
    wsp_ggml_free(mctx);
    printf("measured\n");

    for (int iter = 0; iter < 2; iter++) {
        struct wsp_ggml_context * gctx = su_graph_ctx(64, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * gf = build(gctx, &in, outs);
        wsp_ggml_backend_sched_graph_compute(sched, gf);
        printf("iter %d\n", iter);
        for (int i = 0; i < 4; i++) {
            printf("  %s on %s: ", outs[i]->name, su_backend_of(outs[i]));
            print_tensor(outs[i]->name, outs[i], 4);
        }
        wsp_ggml_free(gctx);
    }
    test_backend_print_stats(hi);
    test_backend_print_stats(lo);

    wsp_ggml_backend_sched_free(sched);
    su_store_free(&s_hi);
    su_store_free(&s_lo);
    su_store_free(&s_cpu);
    wsp_ggml_free(wctx);
    wsp_ggml_backend_free(hi);
    wsp_ggml_backend_free(lo);
    wsp_ggml_backend_free(cpu);
    return 0;
}
