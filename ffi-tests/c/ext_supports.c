// Ours-only test: the scheduler consults supports_op.
//
// A test backend whose supports_op rejects SOFT_MAX and NORM holds every
// weight and the input, so without the check every node would run on it (as
// the original does). With ours, the rejected nodes move to the next backend
// in priority order (wrapping around), inputs are copied as needed, and the
// results equal the CPU backend alone bit for bit. A spy backend of our own
// (xb, ext_util.h) counts rejected nodes it is asked to compute: must be 0.
#include "ext_util.h"

#define N_EMBD  16
#define N_FF    24
#define N_VOCAB 12
#define N_LAYER 2
#define N_TOK   4
#define W_SEED  7
#define X_SEED  99

static const int REJECT_SM_NORM[] = { WSP_GGML_OP_SOFT_MAX, WSP_GGML_OP_NORM, -1 };
static const int REJECT_NORM[] = { WSP_GGML_OP_NORM, -1 };
static const int REJECT_SM[] = { WSP_GGML_OP_SOFT_MAX, -1 };

// A model whose weights (and input) live in `home`, except wout, which lives
// in `wout_store` when not NULL.
struct setup {
    struct wsp_ggml_context * wctx;
    struct eu_mlp m;
    struct wsp_ggml_tensor * x;
};

static void setup_init(struct setup * s, struct su_store * home, struct su_store * wout_store) {
    s->wctx = make_ctx(64, false, true, 0);
    eu_mlp_new(&s->m, s->wctx, N_EMBD, N_FF, N_VOCAB, N_LAYER);
    struct su_store * stores[6 * EU_MAX_LAYER + 1];
    memset(stores, 0, sizeof(stores));
    stores[5 * N_LAYER] = wout_store; // wout is last in fill order
    eu_mlp_put(&s->m, home, stores, W_SEED);
    s->x = wsp_ggml_new_tensor_2d(s->wctx, WSP_GGML_TYPE_F32, N_EMBD, N_TOK);
    wsp_ggml_set_name(s->x, "x");
    struct lcg r = lcg_new(X_SEED);
    su_store_put(home, s->x, &r, 2.0f);
}

// Measure and compute the MLP with `sched`; returns the graph (in *gctx) and its output.
static struct wsp_ggml_cgraph * run(wsp_ggml_backend_sched_t sched, const struct setup * s, struct wsp_ggml_context ** gctx,
                                    struct wsp_ggml_tensor ** out) {
    struct wsp_ggml_context * mctx;
    struct wsp_ggml_cgraph * mg = eu_mlp_graph(&s->m, s->x, &mctx, NULL);
    wsp_ggml_backend_sched_init_measure(sched, mg);
    wsp_ggml_free(mctx);
    struct wsp_ggml_cgraph * g = eu_mlp_graph(&s->m, s->x, gctx, out);
    wsp_ggml_backend_sched_graph_compute(sched, g);
    return g;
}

// Number of backend changes + 1 over the non-view nodes, by get_tensor_backend.
static int runs_of(wsp_ggml_backend_sched_t sched, const struct wsp_ggml_cgraph * g) {
    int n = 0;
    wsp_ggml_backend_t cur = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        if (eu_is_view_op(g->nodes[i]->op)) {
            continue;
        }
        wsp_ggml_backend_t b = wsp_ggml_backend_sched_get_tensor_backend(sched, g->nodes[i]);
        if (n == 0 || b != cur) {
            n++;
            cur = b;
        }
    }
    return n;
}

// Every node of op `op` is on `on`; every other non-view node on `other`
// (other may be NULL: not checked).
static bool placed(wsp_ggml_backend_sched_t sched, const struct wsp_ggml_cgraph * g, const int * ops, wsp_ggml_backend_t on,
                   wsp_ggml_backend_t other) {
    bool ok = true;
    for (int i = 0; i < g->n_nodes; i++) {
        struct wsp_ggml_tensor * n = g->nodes[i];
        if (eu_is_view_op(n->op)) {
            continue;
        }
        bool listed = false;
        for (int k = 0; ops[k] != -1; k++) {
            listed = listed || (int)n->op == ops[k];
        }
        wsp_ggml_backend_t b = wsp_ggml_backend_sched_get_tensor_backend(sched, n);
        wsp_ggml_backend_t want = listed ? on : other;
        if (want != NULL && b != want) {
            printf("~ node %d %s (%s) on %s, expected %s\n", i, n->name, wsp_ggml_op_name(n->op), eu_bname(b), eu_bname(want));
            ok = false;
        }
    }
    return ok;
}

static void part_main(const struct eu_ref * ref) {
    // --- [TB0 rejecting soft_max + norm, CPU]; everything lives on TB0
    wsp_ggml_backend_t tb = eu_tb("TB0", REJECT_SM_NORM);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 2);
    struct su_store st;
    su_store_init(&st, tb, 1 << 20);
    struct setup s;
    setup_init(&s, &st, NULL);

    wsp_ggml_backend_t backends[2] = { tb, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    struct test_backend_stats before = *test_backend_stats(tb);
    struct wsp_ggml_context * gctx;
    struct wsp_ggml_tensor * out;
    struct wsp_ggml_cgraph * g = run(sched, &s, &gctx, &out);
    struct test_backend_stats after = *test_backend_stats(tb);

    EU_EXPECT("supports_matches_plain_ggml", su_same(out, ref->out), "output differs from plain ggml.c");
    EU_EXPECT("supports_rejected_nodes_on_cpu", placed(sched, g, REJECT_SM_NORM, cpu, tb),
              "soft_max / norm not on CPU or other nodes not on TB0");
    EU_EXPECT("supports_splits_consistent", eu_splits_consistent(sched, g), "split stats inconsistent");
    int n_splits = wsp_ggml_backend_sched_get_n_splits(sched);
    int runs = runs_of(sched, g);
    eu_print_splits("supports", sched);
    // per layer: norm on CPU, the rest on TB0; the final soft_max on CPU
    EU_EXPECT("supports_extra_splits", n_splits == runs && n_splits == 2 * N_LAYER + 1, "n_splits=%d runs=%d expected %d",
              n_splits, runs, 2 * N_LAYER + 1);

    // TB0 computed exactly the nodes of its splits, once each
    long tb_nodes = 0, tb_splits = 0;
    for (int k = 0; k < n_splits; k++) {
        struct wsp_ggml_backend_sched_split_stats ss;
        CHECK(wsp_ggml_backend_sched_get_split_stats(sched, k, &ss));
        if (ss.backend == tb) {
            tb_nodes += ss.i_end - ss.i_start;
            tb_splits++;
        }
    }
    long d_nodes = after.nodes_computed - before.nodes_computed;
    long d_gc = after.calls[TB_GRAPH_COMPUTE] - before.calls[TB_GRAPH_COMPUTE];
    EU_EXPECT("supports_tb_computed_its_splits", d_nodes == tb_nodes && d_gc == tb_splits,
              "TB0 computed %ld nodes in %ld graphs, its splits have %ld nodes in %ld splits", d_nodes, d_gc, tb_nodes, tb_splits);

    // the same graph with a TB0 that supports everything: one split (the original's assignment)
    {
        wsp_ggml_backend_t tb_all = eu_tb("TBALL", NULL);
        struct su_store st2;
        su_store_init(&st2, tb_all, 1 << 20);
        struct setup s2;
        setup_init(&s2, &st2, NULL);
        wsp_ggml_backend_t b2[2] = { tb_all, cpu };
        wsp_ggml_backend_sched_t sched2 = wsp_ggml_backend_sched_new(b2, 2);
        struct wsp_ggml_context * gctx2;
        struct wsp_ggml_tensor * out2;
        struct wsp_ggml_cgraph * g2 = run(sched2, &s2, &gctx2, &out2);
        int n2 = wsp_ggml_backend_sched_get_n_splits(sched2);
        EU_EXPECT("supports_all_one_split", n2 == 1 && su_same(out2, ref->out) && wsp_ggml_backend_sched_get_tensor_backend(sched2, out2) == tb_all,
                  "n_splits=%d (expected 1), same=%d", n2, su_same(out2, ref->out) ? 1 : 0);
        (void)g2;
        wsp_ggml_free(gctx2);
        wsp_ggml_backend_sched_free(sched2);
        su_store_free(&st2);
        wsp_ggml_free(s2.wctx);
        wsp_ggml_backend_free(tb_all);
    }

    // the CPU backend alone (scheduler with only the CPU, weights in a CPU buffer)
    {
        struct su_store st3;
        su_store_init(&st3, cpu, 1 << 20);
        struct setup s3;
        setup_init(&s3, &st3, NULL);
        wsp_ggml_backend_t b3[1] = { cpu };
        wsp_ggml_backend_sched_t sched3 = wsp_ggml_backend_sched_new(b3, 1);
        struct wsp_ggml_context * gctx3;
        struct wsp_ggml_tensor * out3;
        struct wsp_ggml_cgraph * g3 = run(sched3, &s3, &gctx3, &out3);
        (void)g3;
        EU_EXPECT("supports_matches_cpu_backend_alone", eu_same_data(out, out3), "output differs from the CPU backend alone");
        wsp_ggml_free(gctx3);
        wsp_ggml_backend_sched_free(sched3);
        su_store_free(&st3);
        wsp_ggml_free(s3.wctx);
    }

    // several computes with the same scheduler stay right
    {
        bool all = true;
        for (int it = 0; it < 3; it++) {
            struct wsp_ggml_context * c;
            struct wsp_ggml_tensor * o;
            struct wsp_ggml_cgraph * gi = eu_mlp_graph(&s.m, s.x, &c, &o);
            wsp_ggml_backend_sched_graph_compute(sched, gi);
            all = all && su_same(o, ref->out) && wsp_ggml_backend_sched_get_n_splits(sched) == 2 * N_LAYER + 1;
            wsp_ggml_free(c);
        }
        EU_EXPECT("supports_repeated_computes", all, "a later compute differs");
    }

    wsp_ggml_free(gctx);
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&st);
    wsp_ggml_free(s.wctx);
    wsp_ggml_backend_free(tb);
    wsp_ggml_backend_free(cpu);
}

// The spy backend XB (rejects soft_max + norm) and a 2-thread CPU backend,
// the weights on XB, and a scheduler over both.
struct spy_env {
    wsp_ggml_backend_t xb;
    wsp_ggml_backend_t cpu;
    struct su_store st;
    struct setup s;
    wsp_ggml_backend_sched_t sched;
};

static void spy_env_init(struct spy_env * e) {
    e->xb = xb_new("XB", REJECT_SM_NORM, -1, NULL);
    e->cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(e->cpu, 2);
    su_store_init(&e->st, e->xb, 1 << 20);
    setup_init(&e->s, &e->st, NULL);
    wsp_ggml_backend_t backends[2] = { e->xb, e->cpu };
    e->sched = wsp_ggml_backend_sched_new(backends, 2);
}

static void spy_env_free(struct spy_env * e) {
    wsp_ggml_backend_sched_free(e->sched);
    su_store_free(&e->st);
    wsp_ggml_free(e->s.wctx);
    wsp_ggml_backend_free(e->xb);
    wsp_ggml_backend_free(e->cpu);
}

// The spy backend (xb) rejects soft_max + norm: it must never be asked to compute them.
static void part_spy(const struct eu_ref * ref) {
    struct spy_env e;
    spy_env_init(&e);
    wsp_ggml_backend_t xb = e.xb;
    wsp_ggml_backend_sched_t sched = e.sched;
    struct setup * s = &e.s;
    struct wsp_ggml_context * gctx;
    struct wsp_ggml_tensor * out;
    struct wsp_ggml_cgraph * g = run(sched, s, &gctx, &out);
    struct test_backend_stats * c = test_backend_stats(xb);
    EU_EXPECT("supports_spy_never_computes_rejected", c->rejected_computed == 0 && c->nodes_computed > 0,
              "xb computed %ld rejected nodes (%ld nodes in all)", c->rejected_computed, c->nodes_computed);
    EU_EXPECT("supports_spy_results", su_same(out, ref->out) && eu_splits_consistent(sched, g), "wrong output or splits");
    wsp_ggml_free(gctx);
    spy_env_free(&e);
}

// Wrapping: soft_max lands on the last backend (its input's), which rejects
// it: it must move to the first one.
static void part_wrap(const struct eu_ref * ref) {
    wsp_ggml_backend_t a = eu_tb("WA", NULL);
    wsp_ggml_backend_t b = xb_new("WB", REJECT_SM, -1, NULL);
    struct su_store sa, sb;
    su_store_init(&sa, a, 1 << 20);
    su_store_init(&sb, b, 1 << 20);
    struct setup s;
    setup_init(&s, &sa, &sb); // wout on WB: logits (and soft_max, originally) on WB
    wsp_ggml_backend_t backends[2] = { a, b };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    struct wsp_ggml_context * gctx;
    struct wsp_ggml_tensor * out;
    struct wsp_ggml_cgraph * g = run(sched, &s, &gctx, &out);
    struct wsp_ggml_tensor * logits = wsp_ggml_graph_get_tensor(g, "logits");
    CHECK(logits != NULL);
    wsp_ggml_backend_t lb = wsp_ggml_backend_sched_get_tensor_backend(sched, logits);
    wsp_ggml_backend_t ob = wsp_ggml_backend_sched_get_tensor_backend(sched, out);
    EU_EXPECT("supports_wraps_to_earlier_backend", lb == b && ob == a && test_backend_stats(b)->rejected_computed == 0,
              "logits on %s (expected WB), soft_max on %s (expected WA), rejected computed %ld", eu_bname(lb), eu_bname(ob),
              test_backend_stats(b)->rejected_computed);
    EU_EXPECT("supports_wrap_results", su_same(out, ref->out) && eu_splits_consistent(sched, g), "wrong output or splits");
    wsp_ggml_free(gctx);
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&sa);
    su_store_free(&sb);
    wsp_ggml_free(s.wctx);
    wsp_ggml_backend_free(a);
    wsp_ggml_backend_free(b);
}

// Priority order: a rejected node goes to the next backend after its own that supports it.
static void part_order(const struct eu_ref * ref, bool second_rejects) {
    wsp_ggml_backend_t t0 = eu_tb("P0", REJECT_NORM);
    wsp_ggml_backend_t t1 = eu_tb("P1", second_rejects ? REJECT_NORM : NULL);
    wsp_ggml_backend_t t2 = eu_tb("P2", NULL);
    struct su_store st;
    su_store_init(&st, t0, 1 << 20);
    struct setup s;
    setup_init(&s, &st, NULL);
    wsp_ggml_backend_t backends[3] = { t0, t1, t2 };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 3);
    struct wsp_ggml_context * gctx;
    struct wsp_ggml_tensor * out;
    struct wsp_ggml_cgraph * g = run(sched, &s, &gctx, &out);
    wsp_ggml_backend_t want = second_rejects ? t2 : t1;
    const char * name = second_rejects ? "supports_order_skips_rejecting_next" : "supports_order_next_backend";
    bool ok = placed(sched, g, REJECT_NORM, want, t0) && su_same(out, ref->out) && eu_splits_consistent(sched, g);
    EU_EXPECT(name, ok, "norm nodes not on %s, or wrong output", wsp_ggml_backend_name(want));
    wsp_ggml_free(gctx);
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&st);
    wsp_ggml_free(s.wctx);
    wsp_ggml_backend_free(t0);
    wsp_ggml_backend_free(t1);
    wsp_ggml_backend_free(t2);
}

// supports_op is consulted for non-view nodes only: a backend that "rejects"
// the view ops still gets them (they compute nothing), with no extra split
// and no copy.
static void part_view_ops(const struct eu_ref * ref) {
    static const int REJECT_VIEWS[] = { WSP_GGML_OP_RESHAPE, WSP_GGML_OP_TRANSPOSE, WSP_GGML_OP_VIEW, WSP_GGML_OP_PERMUTE, -1 };
    wsp_ggml_backend_t tb = eu_tb("TBV", REJECT_VIEWS);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(cpu, 2);
    struct su_store st;
    su_store_init(&st, tb, 1 << 20);
    struct setup s;
    setup_init(&s, &st, NULL);
    wsp_ggml_backend_t backends[2] = { tb, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    struct test_backend_stats before = *test_backend_stats(tb);
    struct wsp_ggml_context * gctx;
    struct wsp_ggml_tensor * out;
    struct wsp_ggml_cgraph * g = run(sched, &s, &gctx, &out);
    struct test_backend_stats after = *test_backend_stats(tb);
    int n_splits = wsp_ggml_backend_sched_get_n_splits(sched);
    long copies = after.calls[TB_SET_TENSOR_ASYNC] - before.calls[TB_SET_TENSOR_ASYNC];
    bool views_on_tb = true;
    for (int i = 0; i < g->n_nodes; i++) {
        if (eu_is_view_op(g->nodes[i]->op) && wsp_ggml_backend_sched_get_tensor_backend(sched, g->nodes[i]) != tb) {
            printf("~ view node %s on %s\n", g->nodes[i]->name, eu_bname(wsp_ggml_backend_sched_get_tensor_backend(sched, g->nodes[i])));
            views_on_tb = false;
        }
    }
    EU_EXPECT("supports_view_ops_not_moved", n_splits == 1 && copies == 0 && views_on_tb && su_same(out, ref->out),
              "n_splits=%d (expected 1), %ld copies into TBV (expected 0), views on TBV %d", n_splits, copies, views_on_tb ? 1 : 0);
    wsp_ggml_free(gctx);
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&st);
    wsp_ggml_free(s.wctx);
    wsp_ggml_backend_free(tb);
    wsp_ggml_backend_free(cpu);
}

// The same graph computed again (restored to its state as built, so at the
// same addresses): ours reuses the last split, asking supports_op again.
// When the backend's answers change between computes, the split must follow.
static void part_answers_change(const struct eu_ref * ref) {
    struct spy_env e;
    spy_env_init(&e);
    wsp_ggml_backend_t xb = e.xb, cpu = e.cpu;
    wsp_ggml_backend_sched_t sched = e.sched;
    struct setup * s = &e.s;
    struct wsp_ggml_context * gctx;
    struct wsp_ggml_tensor * out;
    struct wsp_ggml_cgraph * g = eu_mlp_graph(&s->m, s->x, &gctx, &out);
    // snapshot of the graph as built
    struct wsp_ggml_cgraph gsnap = *g;
    struct wsp_ggml_tensor * snap = (struct wsp_ggml_tensor *)malloc(sizeof(*snap) * (size_t)g->n_nodes);
    CHECK(snap != NULL);
    for (int i = 0; i < g->n_nodes; i++) {
        snap[i] = *g->nodes[i];
    }
    wsp_ggml_backend_sched_init_measure(sched, g);
    struct test_backend_stats * c = test_backend_stats(xb);
    bool ok[4];
    for (int step = 0; step < 4; step++) {
        // steps 0, 1: soft_max + norm rejected; 2: norm accepted; 3: rejected again
        test_backend_set_rejected(xb, REJECT_SM_NORM, step == 2 ? 1 : 2);
        for (int i = 0; i < g->n_nodes; i++) {
            *g->nodes[i] = snap[i];
        }
        *g = gsnap;
        wsp_ggml_backend_sched_graph_compute(sched, g);
        bool norm_on_xb = step == 2;
        ok[step] = su_same(out, ref->out) && c->rejected_computed == 0 && placed(sched, g, REJECT_SM, cpu, NULL)
                   && placed(sched, g, REJECT_NORM, norm_on_xb ? xb : cpu, NULL) && eu_splits_consistent(sched, g);
    }
    EU_EXPECT("supports_reused_split_same", ok[0] && ok[1], "steps 0/1: %d %d", ok[0], ok[1]);
    EU_EXPECT("supports_answers_change_resplit", ok[2], "norm not moved back to XB once accepted");
    EU_EXPECT("supports_answers_change_back", ok[3], "norm not moved off XB once rejected again");
    free(snap);
    wsp_ggml_free(gctx);
    spy_env_free(&e);
}

int main(void) {
    struct eu_ref ref = eu_ref_new(N_EMBD, N_FF, N_VOCAB, N_LAYER, W_SEED, N_TOK, X_SEED);
    part_main(&ref);
    part_spy(&ref);
    part_wrap(&ref);
    part_order(&ref, false);
    part_order(&ref, true);
    part_view_ops(&ref);
    part_answers_change(&ref);
    eu_ref_free(&ref);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    return eu_finish();
}
