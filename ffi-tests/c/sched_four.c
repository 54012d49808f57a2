// Differential test: the backend scheduler with four backends (the maximum
// of the original):
//   GPU_A (alignment 64,  cpy_tensor_from only, buffer hooks),
//   GPU_B (alignment 256, cpy_tensor_to only,   no buffer hooks),
//   GPU_C (alignment 32,  neither,              buffer hooks),
//   CPU   (last).
// Copies from GPU_A or GPU_C into GPU_B have to fall back to get/set.
// Layer weights rotate over the four backends; a cross-attention reads an
// "encoder memory" on GPU_B through a transpose; a permuted weight, views of
// a result computed elsewhere, and an input allocated with the scheduler's
// tensor allocator for GPU_C. Outputs are printed and checked bit for bit
// against a plain ggml.c computation.
#include "sched_util.h"

#define E 32
#define T 6
#define S 5
#define V 16
#define N_LAYER 4

struct model {
    struct wsp_ggml_tensor * pe;            // [E, T]  CPU
    struct wsp_ggml_tensor * w[N_LAYER];    // [E, E]  rotating
    struct wsp_ggml_tensor * b[N_LAYER];    // [E]     rotating (shifted by one)
    struct wsp_ggml_tensor * wp;            // [4, E/4, E] GPU_A, permuted in the graph
    struct wsp_ggml_tensor * mem;           // [E, S]  GPU_B
    struct wsp_ggml_tensor * wq;            // [E, E]  GPU_C
    struct wsp_ggml_tensor * wfin;          // [E/2, V] CPU
    struct wsp_ggml_tensor * ln_g;          // [E]     GPU_B
};

static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g,
                                      const struct model * m, struct wsp_ggml_tensor * inp) {
    struct wsp_ggml_tensor * x = wsp_ggml_add(ctx, inp, m->pe);
    for (int l = 0; l < N_LAYER; l++) {
        struct wsp_ggml_tensor * h = wsp_ggml_norm(ctx, x, 1e-5f);
        h = wsp_ggml_mul_mat(ctx, m->w[l], h);
        h = wsp_ggml_add(ctx, h, m->b[l]);
        h = l % 2 == 0 ? wsp_ggml_gelu(ctx, h) : wsp_ggml_silu(ctx, h);
        x = wsp_ggml_add(ctx, x, h);
    }
    // permuted weight
    struct wsp_ggml_tensor * wpp = wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, m->wp, 1, 0, 2, 3)); // [E/4, 4, E]
    wpp = wsp_ggml_reshape_2d(ctx, wpp, E, E);
    x = wsp_ggml_mul_mat(ctx, wpp, x);
    x = wsp_ggml_mul(ctx, wsp_ggml_norm(ctx, x, 1e-5f), m->ln_g);

    // cross attention against the memory
    struct wsp_ggml_tensor * q = wsp_ggml_mul_mat(ctx, m->wq, x);           // [E, T]
    struct wsp_ggml_tensor * kq = wsp_ggml_mul_mat(ctx, m->mem, q);         // [S, T]
    kq = wsp_ggml_soft_max(ctx, kq);
    struct wsp_ggml_tensor * memT = wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, m->mem)); // [S, E]
    struct wsp_ggml_tensor * att = wsp_ggml_mul_mat(ctx, memT, kq);         // [E, T]

    // views of a result computed elsewhere
    struct wsp_ggml_tensor * top = wsp_ggml_view_2d(ctx, att, E / 2, T, att->nb[1], 0);
    struct wsp_ggml_tensor * bot = wsp_ggml_view_2d(ctx, att, E / 2, T, att->nb[1], (E / 2) * sizeof(float));
    struct wsp_ggml_tensor * mix = wsp_ggml_add(ctx, wsp_ggml_cont(ctx, top), wsp_ggml_cont(ctx, bot)); // [E/2, T]
    struct wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, m->wfin, mix);       // [V, T]
    struct wsp_ggml_tensor * out = wsp_ggml_soft_max(ctx, y);
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

int main(void) {
    wsp_ggml_backend_t ba = su_test_backend("GPU_A", 64, true, false, true);
    wsp_ggml_backend_t bb = su_test_backend("GPU_B", 256, false, true, false);
    wsp_ggml_backend_t bc = su_test_backend("GPU_C", 32, false, false, true);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 2);
    wsp_ggml_backend_t all[4] = { ba, bb, bc, cpu };

    struct su_store st[4];
    for (int i = 0; i < 4; i++) {
        su_store_init(&st[i], all[i], 1 << 20);
    }

    struct wsp_ggml_context * wctx = make_ctx(32, false, true, 0);
    struct model m;
    struct lcg r = lcg_new(4);
    m.pe = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, T);              su_store_put(&st[3], m.pe, &r, 0.5f);
    for (int l = 0; l < N_LAYER; l++) {
        m.w[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, E);        su_store_put(&st[l % 4], m.w[l], &r, 0.3f);
        m.b[l] = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, E);           su_store_put(&st[(l + 1) % 4], m.b[l], &r, 0.1f);
    }
    m.wp = wsp_ggml_new_tensor_3d(wctx, WSP_GGML_TYPE_F32, 4, E / 4, E);       su_store_put(&st[0], m.wp, &r, 0.3f);
    m.mem = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, S);             su_store_put(&st[1], m.mem, &r, 1.0f);
    m.wq = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, E);              su_store_put(&st[2], m.wq, &r, 0.3f);
    m.wfin = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E / 2, V);        su_store_put(&st[3], m.wfin, &r, 0.5f);
    m.ln_g = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, E);               su_store_put(&st[1], m.ln_g, &r, 1.0f);

    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(all, 4);
    CHECK(sched != NULL);

    {
        struct wsp_ggml_context * gctx = su_graph_ctx(256, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        struct wsp_ggml_tensor * inp = wsp_ggml_new_tensor_2d(gctx, WSP_GGML_TYPE_F32, E, T);
        wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, bc), inp);
        build(gctx, g, &m, inp);
        printf("measure n_nodes=%d n_leafs=%d\n", g->n_nodes, g->n_leafs);
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(gctx);
    }
    for (int i = 0; i < 4; i++) {
        su_print_sched_buffer("four", sched, all[i]);
    }

    const int n_iter = 6;
    int n_fail = 0;
    for (int it = 0; it < n_iter; it++) {
        float inp_h[E * T];
        struct lcg ri = lcg_new(900 + (uint64_t)it);
        lcg_fill_f32(&ri, inp_h, E * T, 1.5f);

        struct wsp_ggml_context * gctx = su_graph_ctx(256, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        struct wsp_ggml_tensor * inp = wsp_ggml_new_tensor_2d(gctx, WSP_GGML_TYPE_F32, E, T);
        wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, bc), inp);
        wsp_ggml_backend_tensor_set(inp, inp_h, 0, sizeof(inp_h));
        struct wsp_ggml_tensor * out = build(gctx, g, &m, inp);
        wsp_ggml_backend_sched_graph_compute(sched, g);

        printf("iter %d n_nodes=%d inp_backend=%s out_backend=%s\n", it, g->n_nodes, su_backend_of(inp), su_backend_of(out));
        char label[32];
        snprintf(label, sizeof(label), "iter %d out", it);
        print_tensor(label, out, 4);

        struct wsp_ggml_context * hctx = su_host_ctx(8 << 20);
        struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(hctx);
        struct wsp_ggml_tensor * inpr = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, E, T);
        memcpy(inpr->data, inp_h, sizeof(inp_h));
        struct wsp_ggml_tensor * outr = build(hctx, gr, &m, inpr);
        su_ref_compute(gr, 2);
        bool same = su_same(out, outr);
        printf("iter %d matches_plain_ggml %d\n", it, same ? 1 : 0);
        if (!same) {
            n_fail++;
        }
        wsp_ggml_free(hctx);
        wsp_ggml_free(gctx);
    }

    wsp_ggml_backend_sched_free(sched);
    for (int i = 0; i < 4; i++) {
        su_store_free(&st[i]);
    }
    wsp_ggml_free(wctx);

    for (int i = 0; i < 3; i++) {
        test_backend_print_stats(all[i]);
    }
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    for (int i = 0; i < 4; i++) {
        wsp_ggml_backend_free(all[i]);
    }
    printf("failures %d\n", n_fail);
    return 0;
}
