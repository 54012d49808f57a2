// Differential test: the backend scheduler with three backends
//   TEST_A (alignment 128, cpy_tensor_from + cpy_tensor_to, buffer hooks),
//   TEST_B (alignment 16, no cpy_tensor_from/to, no buffer hooks),
//   CPU (last, lowest priority).
// An attention-like block: get_rows from an embedding table, projections
// whose weights live on different backends, a K cache and a transposed V
// cache updated through wsp_ggml_cpy into views (the destination decides the
// backend), views / reshapes / permutes / transposes of tensors living on
// another backend, and two inputs allocated with the scheduler's own tensor
// allocators (wsp_ggml_backend_sched_get_tallocr). Outputs are printed and
// checked bit for bit against a plain ggml.c computation.
#include "sched_util.h"

#include <math.h>

#define E      32
#define V      20
#define T_CTX  24
#define T_MAX  4

struct model {
    struct wsp_ggml_tensor * emb;     // [E, V]        B
    struct wsp_ggml_tensor * wq;      // [E*E]         A (reshaped in the graph)
    struct wsp_ggml_tensor * wk;      // [E, E]        B
    struct wsp_ggml_tensor * wv;      // [E, E]        CPU
    struct wsp_ggml_tensor * k_cache; // [E*T_CTX]     B
    struct wsp_ggml_tensor * v_cache; // [T_CTX, E]    A (transposed layout)
    struct wsp_ggml_tensor * kq_scale;// [1]           A
    struct wsp_ggml_tensor * wo_full; // [E, 2E]       A (second half used through a view)
    struct wsp_ggml_tensor * bo;      // [E]           B (reshaped to [E,1])
    struct wsp_ggml_tensor * w_t;     // [E, E]        CPU (used transposed)
    struct wsp_ggml_tensor * ln_g;    // [E]           A
    struct wsp_ggml_tensor * wout;    // [E, V]        B
};

// ids: I32 [n_tok]; mask: F32 [n_kv, n_tok]
static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, const struct model * m,
                                      struct wsp_ggml_tensor * ids, struct wsp_ggml_tensor * mask,
                                      int n_tok, int pos) {
    const int n_kv = T_CTX; // whole cache; the mask hides the slots not written yet
    struct wsp_ggml_tensor * x = wsp_ggml_get_rows(ctx, m->emb, ids);                        // [E, T]
    struct wsp_ggml_tensor * wq = wsp_ggml_reshape_2d(ctx, m->wq, E, E);
    struct wsp_ggml_tensor * q = wsp_ggml_mul_mat(ctx, wq, x);                                // [E, T]
    struct wsp_ggml_tensor * k = wsp_ggml_mul_mat(ctx, m->wk, x);                             // [E, T]
    struct wsp_ggml_tensor * v = wsp_ggml_mul_mat(ctx, m->wv, x);                             // [E, T]

    // cache updates
    struct wsp_ggml_tensor * kdst = wsp_ggml_view_1d(ctx, m->k_cache, E * n_tok, (size_t)pos * E * sizeof(float));
    wsp_ggml_build_forward_expand(g, wsp_ggml_cpy(ctx, k, kdst));
    struct wsp_ggml_tensor * vdst = wsp_ggml_view_2d(ctx, m->v_cache, n_tok, E, m->v_cache->nb[1], (size_t)pos * sizeof(float));
    wsp_ggml_build_forward_expand(g, wsp_ggml_cpy(ctx, wsp_ggml_transpose(ctx, v), vdst));

    struct wsp_ggml_tensor * kall = wsp_ggml_view_2d(ctx, m->k_cache, E, n_kv, E * sizeof(float), 0); // [E, n_kv]
    struct wsp_ggml_tensor * kq = wsp_ggml_mul_mat(ctx, kall, q);                             // [n_kv, T]
    kq = wsp_ggml_scale(ctx, kq, m->kq_scale);
    kq = wsp_ggml_add(ctx, kq, mask);
    kq = wsp_ggml_soft_max(ctx, kq);
    struct wsp_ggml_tensor * vall = wsp_ggml_view_2d(ctx, m->v_cache, n_kv, E, m->v_cache->nb[1], 0); // [n_kv, E]
    struct wsp_ggml_tensor * kqv = wsp_ggml_mul_mat(ctx, vall, kq);                           // [E, T]

    struct wsp_ggml_tensor * wo = wsp_ggml_view_2d(ctx, m->wo_full, E, E, m->wo_full->nb[1], E * m->wo_full->nb[1]);
    struct wsp_ggml_tensor * o = wsp_ggml_mul_mat(ctx, wo, kqv);                              // [E, T]
    o = wsp_ggml_add(ctx, o, wsp_ggml_reshape_2d(ctx, m->bo, E, 1));
    struct wsp_ggml_tensor * wt = wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, m->w_t));
    struct wsp_ggml_tensor * o2 = wsp_ggml_mul_mat(ctx, wt, o);                               // [E, T]
    struct wsp_ggml_tensor * p = wsp_ggml_reshape_3d(ctx, o2, 8, E / 8, n_tok);
    p = wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, p, 1, 0, 2, 3));                             // [E/8, 8, T]
    p = wsp_ggml_reshape_2d(ctx, p, E, n_tok);
    struct wsp_ggml_tensor * y = wsp_ggml_add(ctx, x, p);
    y = wsp_ggml_norm(ctx, y, 1e-5f);
    y = wsp_ggml_mul(ctx, y, m->ln_g);
    y = wsp_ggml_gelu(ctx, y);
    struct wsp_ggml_tensor * logits = wsp_ggml_mul_mat(ctx, m->wout, y);                      // [V, T]
    struct wsp_ggml_tensor * out = wsp_ggml_soft_max(ctx, logits);
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

static void make_inputs(int it, int n_tok, int pos, int32_t * ids, float * mask) {
    struct lcg r = lcg_new(7000 + (uint64_t)it);
    for (int i = 0; i < n_tok; i++) {
        ids[i] = (int32_t)(lcg_u32(&r) % V);
    }
    const int n_kv = T_CTX;
    for (int t = 0; t < n_tok; t++) {
        for (int j = 0; j < n_kv; j++) {
            mask[t * n_kv + j] = j <= pos + t ? 0.0f : -INFINITY;
        }
    }
}

int main(void) {
    wsp_ggml_backend_t ba = su_test_backend("TEST_A", 128, true, true, true);
    wsp_ggml_backend_t bb = su_test_backend("TEST_B", 16, false, false, false);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 2);

    struct su_store sa, sb, sc;
    su_store_init(&sa, ba, 1 << 20);
    su_store_init(&sb, bb, 1 << 20);
    su_store_init(&sc, cpu, 1 << 20);

    struct wsp_ggml_context * wctx = make_ctx(32, false, true, 0);
    struct model m;
    struct lcg r = lcg_new(3);
    m.emb = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, V);       su_store_put(&sb, m.emb, &r, 1.0f);
    m.wq = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, E * E);       su_store_put(&sa, m.wq, &r, 0.3f);
    m.wk = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, E);        su_store_put(&sb, m.wk, &r, 0.3f);
    m.wv = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, E);        su_store_put(&sc, m.wv, &r, 0.3f);
    m.k_cache = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, E * T_CTX); su_store_put(&sb, m.k_cache, &r, 0.0f);
    m.v_cache = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, T_CTX, E);  su_store_put(&sa, m.v_cache, &r, 0.0f);
    m.kq_scale = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 1);
    wsp_ggml_allocr_alloc(sa.alloc, m.kq_scale);
    {
        float s = 0.125f;
        wsp_ggml_backend_tensor_set(m.kq_scale, &s, 0, sizeof(s));
    }
    m.wo_full = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, 2 * E); su_store_put(&sa, m.wo_full, &r, 0.3f);
    m.bo = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, E);           su_store_put(&sb, m.bo, &r, 0.1f);
    m.w_t = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, E);       su_store_put(&sc, m.w_t, &r, 0.3f);
    m.ln_g = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, E);         su_store_put(&sa, m.ln_g, &r, 1.0f);
    m.wout = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, E, V);      su_store_put(&sb, m.wout, &r, 0.5f);

    wsp_ggml_backend_t backends[3] = { ba, bb, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 3);
    CHECK(sched != NULL);

    // measure: largest batch at the end of the context, inputs from the measure allocators
    {
        struct wsp_ggml_context * gctx = su_graph_ctx(256, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        struct wsp_ggml_tensor * ids = wsp_ggml_new_tensor_1d(gctx, WSP_GGML_TYPE_I32, T_MAX);
        struct wsp_ggml_tensor * mask = wsp_ggml_new_tensor_2d(gctx, WSP_GGML_TYPE_F32, T_CTX, T_MAX);
        wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, cpu), ids);
        wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, ba), mask);
        build(gctx, g, &m, ids, mask, T_MAX, T_CTX - T_MAX);
        printf("measure n_nodes=%d n_leafs=%d\n", g->n_nodes, g->n_leafs);
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(gctx);
    }
    su_print_sched_buffer("three", sched, ba);
    su_print_sched_buffer("three", sched, bb);
    su_print_sched_buffer("three", sched, cpu);

    const int toks[] = { 4, 3, 1, 4, 2, 4, 1, 3 };
    const int n_iter = (int)(sizeof(toks) / sizeof(toks[0]));
    int pos = 0;
    int n_fail = 0;
    for (int it = 0; it < n_iter; it++) {
        const int n_tok = toks[it];
        const int n_kv = T_CTX;
        CHECK(pos + n_tok <= T_CTX);
        int32_t ids_h[T_MAX];
        float mask_h[T_CTX * T_MAX];
        make_inputs(it, n_tok, pos, ids_h, mask_h);

        struct wsp_ggml_context * gctx = su_graph_ctx(256, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);
        struct wsp_ggml_tensor * ids = wsp_ggml_new_tensor_1d(gctx, WSP_GGML_TYPE_I32, n_tok);
        struct wsp_ggml_tensor * mask = wsp_ggml_new_tensor_2d(gctx, WSP_GGML_TYPE_F32, n_kv, n_tok);
        wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, cpu), ids);
        wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, ba), mask);
        printf("iter %d inputs ids_backend=%s mask_backend=%s\n", it, su_backend_of(ids), su_backend_of(mask));
        wsp_ggml_backend_tensor_set(ids, ids_h, 0, wsp_ggml_nbytes(ids));
        wsp_ggml_backend_tensor_set(mask, mask_h, 0, wsp_ggml_nbytes(mask));
        struct wsp_ggml_tensor * out = build(gctx, g, &m, ids, mask, n_tok, pos);
        wsp_ggml_backend_sched_graph_compute(sched, g);

        printf("iter %d n_tok=%d pos=%d n_nodes=%d out_backend=%s\n", it, n_tok, pos, g->n_nodes, su_backend_of(out));
        char label[48];
        snprintf(label, sizeof(label), "iter %d out", it);
        print_tensor(label, out, 4);
        snprintf(label, sizeof(label), "iter %d k_cache", it);
        print_tensor(label, m.k_cache, 2);
        snprintf(label, sizeof(label), "iter %d v_cache", it);
        print_tensor(label, m.v_cache, 2);

        // ground truth (writes the same values into the caches again)
        struct wsp_ggml_context * hctx = su_host_ctx(8 << 20);
        struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(hctx);
        struct wsp_ggml_tensor * idsr = wsp_ggml_new_tensor_1d(hctx, WSP_GGML_TYPE_I32, n_tok);
        struct wsp_ggml_tensor * maskr = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, n_kv, n_tok);
        memcpy(idsr->data, ids_h, wsp_ggml_nbytes(idsr));
        memcpy(maskr->data, mask_h, wsp_ggml_nbytes(maskr));
        void * kc_before = su_read(m.k_cache);
        void * vc_before = su_read(m.v_cache);
        struct wsp_ggml_tensor * outr = build(hctx, gr, &m, idsr, maskr, n_tok, pos);
        su_ref_compute(gr, 2);
        void * kc_after = su_read(m.k_cache);
        void * vc_after = su_read(m.v_cache);
        bool same = su_same(out, outr) &&
                    memcmp(kc_before, kc_after, wsp_ggml_nbytes(m.k_cache)) == 0 &&
                    memcmp(vc_before, vc_after, wsp_ggml_nbytes(m.v_cache)) == 0;
        printf("iter %d matches_plain_ggml %d\n", it, same ? 1 : 0);
        if (!same) {
            n_fail++;
        }
        free(kc_before); free(vc_before); free(kc_after); free(vc_after);
        wsp_ggml_free(hctx);
        wsp_ggml_free(gctx);
        pos += n_tok;
    }

    wsp_ggml_backend_sched_free(sched);
    su_store_free(&sa);
    su_store_free(&sb);
    su_store_free(&sc);
    wsp_ggml_free(wctx);

    test_backend_print_stats(ba);
    test_backend_print_stats(bb);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_free(ba);
    wsp_ggml_backend_free(bb);
    wsp_ggml_backend_free(cpu);
    printf("failures %d\n", n_fail);
    return 0;
}
