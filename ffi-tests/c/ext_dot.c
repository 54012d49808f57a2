// Ours-only test: wsp_ggml_backend_sched_write_dot, the picture of a schedule.
//
// Builds graphs over two and three backends (split inputs copied between
// them, and a gpt-2-shaped graph whose last layer and head live on a second
// backend), computes each, and prints, per graph, the scheduler's own
// answers followed by the DOT text it writes; tests/dot.rs parses the DOT and
// checks it against the answers:
//
//   dot-graph <name>
//   backend <b> <name>                       (the scheduler's backends)
//   split <k> <b> <i_start> <i_end> <n_inputs> <bytes_copied>
//   node <i> <b>                             (get_tensor_backend; -1: none)
//   leaf <i> <b>
//   src <i> <j> <node|leaf|other> <index>    (graph node i's source j)
//   stats <b> <n_splits> <n_copies> <bytes_copied>
//   dot-begin / the DOT lines / dot-end
//
// With argument "measure-dot" it prints, for the gpt-2-shaped graph, the DOT
// written right after init_measure (WSP_GGML_SCHED_DOT must write the same);
// with "wrong-graph" it asks for the picture of another graph (aborts);
// with "before-split" it asks before anything was split (aborts).
#include "ext_util.h"

#define N_EMBD  16
#define N_HEAD  2
#define N_TOK   4
#define N_VOCAB 12
#define N_LAYER 2

static void to_stdout(const char * text, size_t len, void * user_data) {
    CHECK(strlen(text) == len); // NUL-terminated as well
    fwrite(text, 1, len, (FILE *)user_data);
}

static int index_of(wsp_ggml_backend_sched_t sched, wsp_ggml_backend_t b) {
    for (int i = 0; i < wsp_ggml_backend_sched_get_n_backends(sched); i++) {
        if (wsp_ggml_backend_sched_get_backend(sched, i) == b) {
            return i;
        }
    }
    return -1;
}

static int leaf_index(const struct wsp_ggml_cgraph * g, const struct wsp_ggml_tensor * t) {
    for (int i = 0; i < g->n_leafs; i++) {
        if (g->leafs[i] == t) {
            return i;
        }
    }
    return -1;
}

static void report(const char * name, wsp_ggml_backend_sched_t sched, struct wsp_ggml_cgraph * g) {
    printf("dot-graph %s\n", name);
    int nb = wsp_ggml_backend_sched_get_n_backends(sched);
    for (int b = 0; b < nb; b++) {
        printf("backend %d %s\n", b, wsp_ggml_backend_name(wsp_ggml_backend_sched_get_backend(sched, b)));
    }
    for (int k = 0; k < wsp_ggml_backend_sched_get_n_splits(sched); k++) {
        struct wsp_ggml_backend_sched_split_stats s;
        CHECK(wsp_ggml_backend_sched_get_split_stats(sched, k, &s));
        printf("split %d %d %d %d %d %zu\n", k, index_of(sched, s.backend), s.i_start, s.i_end, s.n_inputs, s.bytes_copied);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        printf("node %d %d\n", i, index_of(sched, wsp_ggml_backend_sched_get_tensor_backend(sched, g->nodes[i])));
        for (int j = 0; j < WSP_GGML_MAX_SRC; j++) {
            struct wsp_ggml_tensor * s = g->nodes[i]->src[j];
            if (s == NULL) {
                continue;
            }
            int n = eu_node_index(g, s), l = leaf_index(g, s);
            printf("src %d %d %s %d\n", i, j, n >= 0 ? "node" : l >= 0 ? "leaf" : "other", n >= 0 ? n : l);
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        printf("leaf %d %d\n", i, index_of(sched, wsp_ggml_backend_sched_get_tensor_backend(sched, g->leafs[i])));
    }
    for (int b = 0; b < nb; b++) {
        struct wsp_ggml_backend_sched_backend_stats s;
        CHECK(wsp_ggml_backend_sched_get_backend_stats(sched, wsp_ggml_backend_sched_get_backend(sched, b), &s));
        printf("stats %d %d %d %zu\n", b, s.n_splits, s.n_copies, s.bytes_copied);
    }
    printf("dot-begin\n");
    fflush(stdout);
    wsp_ggml_backend_sched_write_dot(sched, g, to_stdout, stdout);
    printf("dot-end\n");
    fflush(stdout);
}

// ---------------------------------------------------------------------------
// two backends: a on GPU, b on CPU; h = a * a on GPU is read by two CPU
// nodes (copied once), and a GPU node reads a CPU result back.

static void two_backends(void) {
    wsp_ggml_backend_t gpu = eu_tb("GPU", NULL);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    struct su_store sg, sc;
    su_store_init(&sg, gpu, 1 << 16);
    su_store_init(&sc, cpu, 1 << 16);
    struct wsp_ggml_context * wctx = make_ctx(8, false, true, 0);
    struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 16);
    struct wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 16);
    struct wsp_ggml_tensor * c = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 16);
    wsp_ggml_set_name(a, "a");
    wsp_ggml_set_name(b, "b");
    wsp_ggml_set_name(c, "c");
    struct lcg r = lcg_new(3);
    su_store_put(&sg, a, &r, 1.0f);
    su_store_put(&sc, b, &r, 1.0f);
    su_store_put(&sg, c, &r, 1.0f);

    struct wsp_ggml_context * ctx = make_ctx(32, true, true, 0);
    struct wsp_ggml_tensor * h = wsp_ggml_mul(ctx, a, a);
    wsp_ggml_set_name(h, "h");
    struct wsp_ggml_tensor * y = wsp_ggml_add(ctx, h, b);
    wsp_ggml_set_name(y, "y");
    struct wsp_ggml_tensor * z = wsp_ggml_mul(ctx, y, h);
    wsp_ggml_set_name(z, "z");
    struct wsp_ggml_tensor * w = wsp_ggml_add(ctx, z, c);
    wsp_ggml_set_name(w, "w");
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, w);

    wsp_ggml_backend_t backends[2] = { gpu, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    wsp_ggml_backend_sched_init_measure(sched, g);
    wsp_ggml_backend_sched_graph_compute(sched, g);
    report("two", sched, g);

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    wsp_ggml_free(wctx);
    su_store_free(&sg);
    su_store_free(&sc);
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
}

// ---------------------------------------------------------------------------
// three backends: the MLP of ext_stats.c, TB0 and TB1 rejecting SOFT_MAX and
// NORM (which go to the CPU, last), layer 1's second weights on TB1.

static const int REJECT_SM_NORM[] = { WSP_GGML_OP_SOFT_MAX, WSP_GGML_OP_NORM, -1 };

static void three_backends(void) {
    wsp_ggml_backend_t tb0 = eu_tb("TB0", REJECT_SM_NORM);
    wsp_ggml_backend_t tb1 = eu_tb("TB1", REJECT_SM_NORM);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    struct su_store s0, s1;
    su_store_init(&s0, tb0, 1 << 20);
    su_store_init(&s1, tb1, 1 << 20);
    struct wsp_ggml_context * wctx = make_ctx(64, false, true, 0);
    struct eu_mlp m;
    eu_mlp_new(&m, wctx, N_EMBD, 24, N_VOCAB, 2);
    struct su_store * stores[6 * EU_MAX_LAYER + 1];
    memset(stores, 0, sizeof(stores));
    stores[5 * 1 + 3] = &s1;
    stores[5 * 1 + 4] = &s1;
    eu_mlp_put(&m, &s0, stores, 11);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N_EMBD, N_TOK);
    wsp_ggml_set_name(x, "x");
    struct lcg r = lcg_new(5);
    su_store_put(&s0, x, &r, 2.0f);

    wsp_ggml_backend_t backends[3] = { tb0, tb1, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 3);
    struct wsp_ggml_context * gctx;
    struct wsp_ggml_cgraph * g = eu_mlp_graph(&m, x, &gctx, NULL);
    wsp_ggml_backend_sched_init_measure(sched, g);
    wsp_ggml_backend_sched_graph_compute(sched, g);
    report("three", sched, g);

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(gctx);
    wsp_ggml_free(wctx);
    su_store_free(&s0);
    su_store_free(&s1);
    wsp_ggml_backend_free(tb0);
    wsp_ggml_backend_free(tb1);
    wsp_ggml_backend_free(cpu);
}

// ---------------------------------------------------------------------------
// gpt-2-shaped: token and position embeddings, N_LAYER blocks (layer norm,
// fused QKV, causal-free attention over N_HEAD heads, projection, residual,
// MLP with GELU, residual), final norm and head. Layer 0 and the embeddings
// on the CPU, the last layer and the head on GPU (a test backend), as a
// model partly offloaded.

struct g2 {
    struct wsp_ggml_tensor *wte, *wpe, *tokens, *pos, *kq_scale, *ln_f_g, *ln_f_b, *head;
    struct wsp_ggml_tensor *ln1_g[N_LAYER], *ln1_b[N_LAYER], *attn_w[N_LAYER], *attn_b[N_LAYER], *proj_w[N_LAYER],
        *proj_b[N_LAYER], *ln2_g[N_LAYER], *ln2_b[N_LAYER], *fc_w[N_LAYER], *fc_b[N_LAYER], *mlp_w[N_LAYER], *mlp_b[N_LAYER];
};

static struct wsp_ggml_tensor * named(struct wsp_ggml_tensor * t, const char * name, int il) {
    if (il >= 0) {
        wsp_ggml_format_name(t, "%s.%d", name, il);
    } else {
        wsp_ggml_set_name(t, name);
    }
    return t;
}

static struct wsp_ggml_tensor * w2d(struct wsp_ggml_context * c, int n0, int n1, const char * name, int il) {
    return named(wsp_ggml_new_tensor_2d(c, WSP_GGML_TYPE_F32, n0, n1), name, il);
}

static struct wsp_ggml_tensor * w1d(struct wsp_ggml_context * c, int n0, const char * name, int il) {
    return named(wsp_ggml_new_tensor_1d(c, WSP_GGML_TYPE_F32, n0), name, il);
}

static struct wsp_ggml_tensor * layer_norm(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * x, struct wsp_ggml_tensor * g,
                                           struct wsp_ggml_tensor * b) {
    return wsp_ggml_add(ctx, wsp_ggml_mul(ctx, wsp_ggml_norm(ctx, x, 1e-5f), g), b);
}

static struct wsp_ggml_cgraph * g2_graph(struct wsp_ggml_context * ctx, const struct g2 * m) {
    const int hd = N_EMBD / N_HEAD;
    struct wsp_ggml_tensor * inp = wsp_ggml_add(ctx, wsp_ggml_get_rows(ctx, m->wte, m->tokens), wsp_ggml_get_rows(ctx, m->wpe, m->pos));
    wsp_ggml_set_name(inp, "inp_embd");
    for (int il = 0; il < N_LAYER; il++) {
        struct wsp_ggml_tensor * cur = layer_norm(ctx, inp, m->ln1_g[il], m->ln1_b[il]);
        cur = named(wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, m->attn_w[il], cur), m->attn_b[il]), "qkv", il);
        size_t row = cur->nb[1];
        struct wsp_ggml_tensor * q = wsp_ggml_cont(ctx, wsp_ggml_view_2d(ctx, cur, N_EMBD, N_TOK, row, 0));
        struct wsp_ggml_tensor * k = wsp_ggml_cont(ctx, wsp_ggml_view_2d(ctx, cur, N_EMBD, N_TOK, row, N_EMBD * sizeof(float)));
        struct wsp_ggml_tensor * v = wsp_ggml_cont(ctx, wsp_ggml_view_2d(ctx, cur, N_EMBD, N_TOK, row, 2 * N_EMBD * sizeof(float)));
        q = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, q, hd, N_HEAD, N_TOK), 0, 2, 1, 3);
        k = wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, k, hd, N_HEAD, N_TOK), 0, 2, 1, 3);
        struct wsp_ggml_tensor * kq = named(wsp_ggml_soft_max(ctx, wsp_ggml_scale(ctx, wsp_ggml_mul_mat(ctx, k, q), m->kq_scale)), "kq_soft_max", il);
        struct wsp_ggml_tensor * vt = wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, wsp_ggml_reshape_3d(ctx, v, hd, N_HEAD, N_TOK), 1, 2, 0, 3));
        struct wsp_ggml_tensor * kqv = wsp_ggml_permute(ctx, wsp_ggml_mul_mat(ctx, vt, kq), 0, 2, 1, 3);
        cur = wsp_ggml_cont_2d(ctx, kqv, N_EMBD, N_TOK);
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, m->proj_w[il], cur), m->proj_b[il]);
        struct wsp_ggml_tensor * ff_in = named(wsp_ggml_add(ctx, cur, inp), "attn_out", il);
        cur = layer_norm(ctx, ff_in, m->ln2_g[il], m->ln2_b[il]);
        cur = wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, m->fc_w[il], cur), m->fc_b[il]));
        cur = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, m->mlp_w[il], cur), m->mlp_b[il]);
        inp = named(wsp_ggml_add(ctx, cur, ff_in), "l_out", il);
    }
    struct wsp_ggml_tensor * out = named(wsp_ggml_mul_mat(ctx, m->head, layer_norm(ctx, inp, m->ln_f_g, m->ln_f_b)), "logits", -1);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, out);
    return g;
}

static void gpt2(bool measure_dot) {
    wsp_ggml_backend_t gpu = eu_tb("GPU", NULL);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    struct su_store sg, sc;
    su_store_init(&sg, gpu, 1 << 18);
    su_store_init(&sc, cpu, 1 << 18);
    struct wsp_ggml_context * wctx = make_ctx(16 * N_LAYER + 16, false, true, 0);
    struct g2 m;
    m.wte = w2d(wctx, N_EMBD, N_VOCAB, "wte", -1);
    m.wpe = w2d(wctx, N_EMBD, N_TOK, "wpe", -1);
    m.tokens = named(wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_I32, N_TOK), "tokens", -1);
    m.pos = named(wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_I32, N_TOK), "pos", -1);
    m.kq_scale = w1d(wctx, 1, "kq_scale", -1);
    m.ln_f_g = w1d(wctx, N_EMBD, "ln_f.g", -1);
    m.ln_f_b = w1d(wctx, N_EMBD, "ln_f.b", -1);
    m.head = w2d(wctx, N_EMBD, N_VOCAB, "lm_head", -1);
    struct lcg r = lcg_new(7);
    for (int il = 0; il < N_LAYER; il++) {
        struct su_store * s = il == N_LAYER - 1 ? &sg : &sc;
        struct wsp_ggml_tensor * ws[12] = {
            m.ln1_g[il] = w1d(wctx, N_EMBD, "ln_1.g", il),          m.ln1_b[il] = w1d(wctx, N_EMBD, "ln_1.b", il),
            m.attn_w[il] = w2d(wctx, N_EMBD, 3 * N_EMBD, "attn.w", il), m.attn_b[il] = w1d(wctx, 3 * N_EMBD, "attn.b", il),
            m.proj_w[il] = w2d(wctx, N_EMBD, N_EMBD, "proj.w", il),  m.proj_b[il] = w1d(wctx, N_EMBD, "proj.b", il),
            m.ln2_g[il] = w1d(wctx, N_EMBD, "ln_2.g", il),          m.ln2_b[il] = w1d(wctx, N_EMBD, "ln_2.b", il),
            m.fc_w[il] = w2d(wctx, N_EMBD, 4 * N_EMBD, "fc.w", il),   m.fc_b[il] = w1d(wctx, 4 * N_EMBD, "fc.b", il),
            m.mlp_w[il] = w2d(wctx, 4 * N_EMBD, N_EMBD, "mlp.w", il), m.mlp_b[il] = w1d(wctx, N_EMBD, "mlp.b", il),
        };
        for (int i = 0; i < 12; i++) {
            su_store_put(s, ws[i], &r, 0.5f);
        }
    }
    struct wsp_ggml_tensor * cpu_w[5] = { m.wte, m.wpe, m.kq_scale, m.ln_f_g, m.ln_f_b };
    for (int i = 0; i < 5; i++) {
        su_store_put(i < 2 ? &sc : &sg, cpu_w[i], &r, 0.5f);
    }
    su_store_put(&sg, m.head, &r, 0.5f);
    wsp_ggml_allocr_alloc(sc.alloc, m.tokens);
    wsp_ggml_allocr_alloc(sc.alloc, m.pos);
    int32_t ids[N_TOK] = { 3, 1, 4, 1 }, pos[N_TOK] = { 0, 1, 2, 3 };
    wsp_ggml_backend_tensor_set(m.tokens, ids, 0, sizeof ids);
    wsp_ggml_backend_tensor_set(m.pos, pos, 0, sizeof pos);

    wsp_ggml_backend_t backends[2] = { gpu, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    struct wsp_ggml_context * ctx = make_ctx(512, true, true, 0);
    struct wsp_ggml_cgraph * g = g2_graph(ctx, &m);
    wsp_ggml_backend_sched_init_measure(sched, g);
    if (measure_dot) {
        wsp_ggml_backend_sched_write_dot(sched, g, to_stdout, stdout);
    } else {
        wsp_ggml_backend_sched_graph_compute(sched, g);
        report("gpt2", sched, g);
    }

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_free(ctx);
    wsp_ggml_free(wctx);
    su_store_free(&sg);
    su_store_free(&sc);
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
}

// ---------------------------------------------------------------------------
// misuse: another graph than the one split last; nothing split yet.

static void misuse(bool before_split) {
    wsp_ggml_backend_t cpu = su_cpu_backend();
    struct su_store sc;
    su_store_init(&sc, cpu, 1 << 12);
    struct wsp_ggml_context * wctx = make_ctx(4, false, true, 0);
    struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 4);
    struct lcg r = lcg_new(1);
    su_store_put(&sc, a, &r, 1.0f);
    struct wsp_ggml_context * ctx = make_ctx(16, true, true, 0);
    struct wsp_ggml_cgraph * g1 = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g1, wsp_ggml_mul(ctx, a, a));
    struct wsp_ggml_context * ctx2 = make_ctx(16, true, true, 0);
    struct wsp_ggml_cgraph * g2g = wsp_ggml_new_graph(ctx2);
    wsp_ggml_build_forward_expand(g2g, wsp_ggml_add(ctx2, wsp_ggml_mul(ctx2, a, a), a));
    wsp_ggml_backend_t backends[1] = { cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 1);
    if (!before_split) {
        wsp_ggml_backend_sched_init_measure(sched, g1);
    }
    printf("asking\n");
    fflush(stdout);
    wsp_ggml_backend_sched_write_dot(sched, before_split ? g1 : g2g, to_stdout, stdout);
    printf("returned\n");
}

int main(int argc, char ** argv) {
    if (argc > 1 && strcmp(argv[1], "measure-dot") == 0) {
        gpt2(true);
        return 0;
    }
    if (argc > 1 && (strcmp(argv[1], "wrong-graph") == 0 || strcmp(argv[1], "before-split") == 0)) {
        misuse(strcmp(argv[1], "before-split") == 0);
        return 0;
    }
    two_backends();
    three_backends();
    gpt2(false);
    return 0;
}
