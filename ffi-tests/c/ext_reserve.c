// Ours-only test: wsp_ggml_backend_sched_reserve and wsp_ggml_backend_sched_reset.
//
// reserve measures a graph and grows (never shrinks) the compute buffers so
// it fits; before init_measure it acts as init_measure. reset drops the
// set_node_backend assignments (and per-compute state) but keeps the buffers.
// Two test backends (exact buffer sizes), weights spread over both.
#include "ext_util.h"

#define N_EMBD  16
#define N_FF    32
#define N_VOCAB 12
#define N_LAYER 2
#define TOK_SMALL 2
#define TOK_LARGE 16
#define W_SEED  31
#define X_SEED  3

struct env {
    wsp_ggml_backend_t b[2];
    struct su_store st0, st1;
    struct wsp_ggml_context * wctx;
    struct eu_mlp m;
    struct wsp_ggml_tensor * x; // [N_EMBD, TOK_LARGE] on TB0
};

static void env_init(struct env * e) {
    e->b[0] = eu_tb("RA", NULL);
    e->b[1] = eu_tb("RB", NULL);
    su_store_init(&e->st0, e->b[0], 1 << 20);
    su_store_init(&e->st1, e->b[1], 1 << 20);
    e->wctx = make_ctx(64, false, true, 0);
    eu_mlp_new(&e->m, e->wctx, N_EMBD, N_FF, N_VOCAB, N_LAYER);
    struct su_store * stores[6 * EU_MAX_LAYER + 1];
    memset(stores, 0, sizeof(stores));
    stores[1] = &e->st1; // w1 of layer 0 on RB: the up-projection of layer 0 runs there
    stores[2] = &e->st1;
    eu_mlp_put(&e->m, &e->st0, stores, W_SEED);
    e->x = wsp_ggml_new_tensor_2d(e->wctx, WSP_GGML_TYPE_F32, N_EMBD, TOK_LARGE);
    wsp_ggml_set_name(e->x, "x");
    struct lcg r = lcg_new(X_SEED);
    su_store_put(&e->st0, e->x, &r, 2.0f);
}

static void env_free(struct env * e) {
    su_store_free(&e->st0);
    su_store_free(&e->st1);
    wsp_ggml_free(e->wctx);
    wsp_ggml_backend_free(e->b[0]);
    wsp_ggml_backend_free(e->b[1]);
}

// The MLP over the first n_tok tokens of x; *out_ctx to free.
static struct wsp_ggml_cgraph * graph_for(const struct env * e, int n_tok, struct wsp_ggml_context ** out_ctx, struct wsp_ggml_tensor ** out) {
    struct wsp_ggml_context * c = su_graph_ctx(128, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_tensor * xv = wsp_ggml_view_2d(c, e->x, N_EMBD, n_tok, e->x->nb[1], 0);
    wsp_ggml_set_name(xv, "xv");
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(c);
    struct wsp_ggml_tensor * o = eu_mlp_build(c, &e->m, xv);
    wsp_ggml_build_forward_expand(g, o);
    *out_ctx = c;
    if (out != NULL) {
        *out = o;
    }
    return g;
}

// Ground truth for n_tok tokens.
static bool compute_matches(wsp_ggml_backend_sched_t sched, const struct env * e, int n_tok) {
    struct wsp_ggml_context * c;
    struct wsp_ggml_tensor * o;
    struct wsp_ggml_cgraph * g = graph_for(e, n_tok, &c, &o);
    wsp_ggml_backend_sched_graph_compute(sched, g);

    struct wsp_ggml_context * hc = su_host_ctx(8 << 20);
    struct eu_mlp hm;
    eu_mlp_new(&hm, hc, N_EMBD, N_FF, N_VOCAB, N_LAYER);
    eu_mlp_put_host(&hm, W_SEED);
    struct wsp_ggml_tensor * hx = wsp_ggml_new_tensor_2d(hc, WSP_GGML_TYPE_F32, N_EMBD, TOK_LARGE);
    struct lcg rr = lcg_new(X_SEED);
    su_fill_host(hx, &rr, 2.0f);
    struct wsp_ggml_tensor * hxv = wsp_ggml_view_2d(hc, hx, N_EMBD, n_tok, hx->nb[1], 0);
    struct wsp_ggml_cgraph * hg = wsp_ggml_new_graph(hc);
    struct wsp_ggml_tensor * ho = eu_mlp_build(hc, &hm, hxv);
    wsp_ggml_build_forward_expand(hg, ho);
    su_ref_compute(hg, 1);
    bool same = su_same(o, ho);
    wsp_ggml_free(hc);
    wsp_ggml_free(c);
    return same;
}

static void reserve_graph(wsp_ggml_backend_sched_t sched, const struct env * e, int n_tok) {
    struct wsp_ggml_context * c;
    struct wsp_ggml_cgraph * g = graph_for(e, n_tok, &c, NULL);
    wsp_ggml_backend_sched_reserve(sched, g);
    wsp_ggml_free(c);
}

static void sizes(wsp_ggml_backend_sched_t sched, const struct env * e, size_t * s) {
    for (int i = 0; i < 2; i++) {
        s[i] = wsp_ggml_backend_sched_get_buffer_size(sched, e->b[i]);
    }
}

static bool sizes_match_buffers(wsp_ggml_backend_sched_t sched, const struct env * e) {
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        size_t s = wsp_ggml_backend_sched_get_buffer_size(sched, e->b[i]);
        wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_sched_get_buffer(sched, e->b[i]);
        size_t bs = buf == NULL ? 0 : wsp_ggml_backend_buffer_get_size(buf);
        if (s != bs) {
            printf("~ %s: get_buffer_size %zu, buffer_get_size %zu\n", wsp_ggml_backend_name(e->b[i]), s, bs);
            ok = false;
        }
    }
    return ok;
}

static void part_reserve(void) {
    struct env e;
    env_init(&e);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(e.b, 2);
    size_t s_small[2], s_large[2], s_again[2], s_reset[2];

    // reserve before init_measure acts as init_measure
    {
        struct wsp_ggml_context * c;
        struct wsp_ggml_cgraph * g = graph_for(&e, TOK_SMALL, &c, NULL);
        wsp_ggml_backend_sched_reserve(sched, g);
        int n_reserve = wsp_ggml_backend_sched_get_n_splits(sched);
        EU_EXPECT("reserve_sets_splits", n_reserve == 3 && eu_splits_consistent(sched, g), "n_splits after reserve %d, expected 3",
                  n_reserve);
        wsp_ggml_free(c);
    }
    sizes(sched, &e, s_small);
    printf("~ reserve small: %zu %zu\n", s_small[0], s_small[1]);
    EU_EXPECT("reserve_before_measure_sizes", s_small[0] > 0 && s_small[1] > 0, "sizes %zu %zu", s_small[0], s_small[1]);
    EU_EXPECT("reserve_buffer_size_is_buffer_size", sizes_match_buffers(sched, &e), "get_buffer_size differs from the buffer's size");
    EU_EXPECT("reserve_before_measure_computes", compute_matches(sched, &e, TOK_SMALL), "compute after reserve differs");

    // a larger graph: buffers grow, and it computes
    reserve_graph(sched, &e, TOK_LARGE);
    sizes(sched, &e, s_large);
    printf("~ reserve large: %zu %zu\n", s_large[0], s_large[1]);
    EU_EXPECT("reserve_grows", s_large[0] >= s_small[0] && s_large[1] >= s_small[1] && s_large[0] + s_large[1] > s_small[0] + s_small[1],
              "sizes %zu %zu after %zu %zu", s_large[0], s_large[1], s_small[0], s_small[1]);
    EU_EXPECT("reserve_large_computes", compute_matches(sched, &e, TOK_LARGE), "large compute after reserve differs");

    // a smaller graph again: never shrinks; both sizes still compute
    reserve_graph(sched, &e, TOK_SMALL);
    sizes(sched, &e, s_again);
    EU_EXPECT("reserve_never_shrinks", s_again[0] == s_large[0] && s_again[1] == s_large[1], "sizes %zu %zu after %zu %zu", s_again[0],
              s_again[1], s_large[0], s_large[1]);
    EU_EXPECT("reserve_small_then_both_compute",
              compute_matches(sched, &e, TOK_SMALL) && compute_matches(sched, &e, TOK_LARGE) && compute_matches(sched, &e, 7),
              "a compute after reserving a smaller graph differs");
    sizes(sched, &e, s_again);
    EU_EXPECT("compute_keeps_reserved_sizes", s_again[0] == s_large[0] && s_again[1] == s_large[1], "sizes %zu %zu after %zu %zu",
              s_again[0], s_again[1], s_large[0], s_large[1]);

    // reset keeps the buffers
    wsp_ggml_backend_sched_reset(sched);
    sizes(sched, &e, s_reset);
    EU_EXPECT("reset_keeps_buffers", s_reset[0] == s_large[0] && s_reset[1] == s_large[1] && compute_matches(sched, &e, TOK_LARGE),
              "sizes %zu %zu after reset (were %zu %zu)", s_reset[0], s_reset[1], s_large[0], s_large[1]);
    wsp_ggml_backend_sched_free(sched);

    // init_measure with the small graph, then reserve the large one
    sched = wsp_ggml_backend_sched_new(e.b, 2);
    {
        struct wsp_ggml_context * c;
        struct wsp_ggml_cgraph * g = graph_for(&e, TOK_SMALL, &c, NULL);
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(c);
    }
    size_t m_small[2], m_large[2];
    sizes(sched, &e, m_small);
    reserve_graph(sched, &e, TOK_LARGE);
    sizes(sched, &e, m_large);
    EU_EXPECT("reserve_after_init_measure_grows",
              m_large[0] >= m_small[0] && m_large[1] >= m_small[1] && m_large[0] + m_large[1] > m_small[0] + m_small[1]
                  && compute_matches(sched, &e, TOK_LARGE) && sizes_match_buffers(sched, &e),
              "sizes %zu %zu after %zu %zu", m_large[0], m_large[1], m_small[0], m_small[1]);
    EU_EXPECT("reserve_matches_measure_of_same_graph", m_small[0] == s_small[0] && m_small[1] == s_small[1],
              "init_measure sizes %zu %zu, reserve sizes %zu %zu", m_small[0], m_small[1], s_small[0], s_small[1]);
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

static void part_reset(void) {
    struct env e;
    env_init(&e);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(e.b, 2);
    {
        // a fresh scheduler has no split graph and no statistics
        struct wsp_ggml_backend_sched_split_stats ss;
        struct wsp_ggml_backend_sched_backend_stats bs;
        memset(&bs, 0xff, sizeof(bs));
        bool ok = wsp_ggml_backend_sched_get_n_splits(sched) == 0 && !wsp_ggml_backend_sched_get_split_stats(sched, 0, &ss)
            && wsp_ggml_backend_sched_get_tensor_backend(sched, e.x) == NULL && wsp_ggml_backend_sched_get_backend_stats(sched, e.b[0], &bs)
            && bs.n_splits == 0 && bs.n_copies == 0 && bs.bytes_copied == 0 && bs.copy_us == 0 && bs.compute_us == 0;
        EU_EXPECT("fresh_sched_has_nothing", ok, "a new scheduler reports splits or statistics");
        // no compute buffer before the first measure (upstream reports 0)
        size_t z0 = wsp_ggml_backend_sched_get_buffer_size(sched, e.b[0]);
        size_t z1 = wsp_ggml_backend_sched_get_buffer_size(sched, e.b[1]);
        EU_EXPECT("fresh_sched_buffer_size_zero", z0 == 0 && z1 == 0, "compute buffer sizes %zu %zu before any measure", z0, z1);
    }
    wsp_ggml_backend_sched_reset(sched); // before anything: harmless
    {
        struct wsp_ggml_context * c;
        struct wsp_ggml_cgraph * g = graph_for(&e, TOK_LARGE, &c, NULL);
        wsp_ggml_backend_sched_init_measure(sched, g);
        wsp_ggml_free(c);
    }

    // gelu1 normally runs on RA (its weights' backend)
    {
        struct wsp_ggml_context * c;
        struct wsp_ggml_cgraph * g = graph_for(&e, TOK_SMALL, &c, NULL);
        struct wsp_ggml_tensor * gelu1 = wsp_ggml_graph_get_tensor(g, "gelu1");
        CHECK(gelu1 != NULL);
        wsp_ggml_backend_sched_graph_compute(sched, g);
        wsp_ggml_backend_t b = wsp_ggml_backend_sched_get_tensor_backend(sched, gelu1);
        EU_EXPECT("reset_default_assignment", b == e.b[0], "gelu1 on %s, expected RA", eu_bname(b));
        wsp_ggml_free(c);
    }
    // set_node_backend is honoured...
    {
        struct wsp_ggml_context * c;
        struct wsp_ggml_tensor * o;
        struct wsp_ggml_cgraph * g = graph_for(&e, TOK_SMALL, &c, &o);
        struct wsp_ggml_tensor * gelu1 = wsp_ggml_graph_get_tensor(g, "gelu1");
        wsp_ggml_backend_sched_set_node_backend(sched, gelu1, e.b[1]);
        wsp_ggml_backend_sched_graph_compute(sched, g);
        wsp_ggml_backend_t b = wsp_ggml_backend_sched_get_tensor_backend(sched, gelu1);
        EU_EXPECT("set_node_backend_honoured", b == e.b[1], "gelu1 on %s, expected RB", eu_bname(b));
        wsp_ggml_free(c);
    }
    // ...unless reset drops it
    {
        struct wsp_ggml_context * c;
        struct wsp_ggml_cgraph * g = graph_for(&e, TOK_SMALL, &c, NULL);
        struct wsp_ggml_tensor * gelu1 = wsp_ggml_graph_get_tensor(g, "gelu1");
        wsp_ggml_backend_sched_set_node_backend(sched, gelu1, e.b[1]);
        wsp_ggml_backend_sched_reset(sched);
        // reset forgets the last split graph
        struct wsp_ggml_backend_sched_split_stats ss;
        EU_EXPECT("reset_forgets_split_graph",
                  wsp_ggml_backend_sched_get_n_splits(sched) == 0 && !wsp_ggml_backend_sched_get_split_stats(sched, 0, &ss)
                      && wsp_ggml_backend_sched_get_tensor_backend(sched, e.m.w1[1]) == NULL,
                  "after reset: n_splits=%d, w1_1 on %s", wsp_ggml_backend_sched_get_n_splits(sched),
                  eu_bname(wsp_ggml_backend_sched_get_tensor_backend(sched, e.m.w1[1])));
        wsp_ggml_backend_sched_graph_compute(sched, g);
        wsp_ggml_backend_t b = wsp_ggml_backend_sched_get_tensor_backend(sched, gelu1);
        EU_EXPECT("reset_drops_node_backend", b == e.b[0], "gelu1 on %s after reset, expected RA", eu_bname(b));
        wsp_ggml_free(c);
    }
    // reset between computes (several times) never changes results
    {
        bool all = true;
        for (int i = 0; i < 3; i++) {
            wsp_ggml_backend_sched_reset(sched);
            all = all && compute_matches(sched, &e, i == 1 ? TOK_LARGE : TOK_SMALL);
        }
        EU_EXPECT("reset_then_compute", all, "a compute after reset differs");
    }
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

int main(void) {
    part_reserve();
    part_reset();
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    return eu_finish();
}
