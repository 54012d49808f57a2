// Ours-only test: the scheduler's eval callback (upstream protocol).
//
// Two test backends (TB0 rejects SOFT_MAX and NORM, so the graph has several
// splits). The callback logs every call. Expected, for each node i of the
// graph in order: one call (i, ask=true); if it answered true, then one call
// (i, ask=false) after the node was computed (its data is read in the
// callback and compared bit for bit with plain ggml.c). Nodes are computed in
// batches that end at each observed node (or the split's end). Returning
// false from an ask=false call stops the whole compute: no later node is
// computed, no later input copied, no later callback made.
#include "ext_util.h"

#define N_EMBD  16
#define N_FF    24
#define N_VOCAB 12
#define N_LAYER 2
#define N_TOK   4
#define W_SEED  21
#define X_SEED  8

static const int REJECT_SM_NORM[] = { WSP_GGML_OP_SOFT_MAX, WSP_GGML_OP_NORM, -1 };

#define MAX_LOG 512

struct cb_state {
    const struct wsp_ggml_cgraph * g;   // the graph being computed
    const struct wsp_ggml_cgraph * ref; // ground truth, same node order
    int mode;                           // 0: never observe, 1: observe (i % 3 == 0 or last), 2: observe only stop_at and stop
    int stop_at;
    int n_log;
    int log_i[MAX_LOG];
    bool log_ask[MAX_LOG];
    int n_bad_data;      // observed node whose data differs from the reference
    int n_unknown;       // callback with a tensor not in the graph
    int n_bad_user_data;
    struct cb_state * self;
};

static bool wants(const struct cb_state * s, int i) {
    switch (s->mode) {
    case 1:
        return i % 3 == 0 || i == s->g->n_nodes - 1;
    case 2:
        return i == s->stop_at;
    default:
        return false;
    }
}

static bool eval_cb(struct wsp_ggml_tensor * t, bool ask, void * user_data) {
    struct cb_state * s = (struct cb_state *)user_data;
    if (s == NULL || s->self != s) {
        // cannot log anything sensible
        fprintf(stderr, "eval callback: wrong user_data\n");
        abort();
    }
    int i = eu_node_index(s->g, t);
    if (i < 0) {
        s->n_unknown++;
        return true;
    }
    CHECK(s->n_log < MAX_LOG);
    s->log_i[s->n_log] = i;
    s->log_ask[s->n_log] = ask;
    s->n_log++;
    if (ask) {
        return wants(s, i);
    }
    // observed: the node must be computed already
    struct wsp_ggml_tensor * r = s->ref->nodes[i];
    size_t n = wsp_ggml_nbytes(t);
    if (n != wsp_ggml_nbytes(r)) {
        s->n_bad_data++;
    } else {
        void * d = malloc(n);
        CHECK(d != NULL);
        wsp_ggml_backend_tensor_get(t, d, 0, n);
        if (memcmp(d, r->data, n) != 0) {
            printf("~ observed node %d (%s) differs from the reference\n", i, t->name);
            s->n_bad_data++;
        }
        free(d);
    }
    return !(s->mode == 2 && i == s->stop_at);
}

// The expected log when the compute runs up to node `last` (inclusive).
static bool log_matches(const struct cb_state * s, int last) {
    int k = 0;
    for (int i = 0; i <= last; i++) {
        if (k >= s->n_log || s->log_i[k] != i || !s->log_ask[k]) {
            printf("~ log entry %d: expected (%d, ask)\n", k, i);
            return false;
        }
        k++;
        if (wants(s, i)) {
            if (k >= s->n_log || s->log_i[k] != i || s->log_ask[k]) {
                printf("~ log entry %d: expected (%d, observe)\n", k, i);
                return false;
            }
            k++;
        }
    }
    if (k != s->n_log) {
        printf("~ log has %d entries, expected %d (next: node %d ask=%d)\n", s->n_log, k, s->log_i[k], s->log_ask[k] ? 1 : 0);
        return false;
    }
    return true;
}

struct counts {
    long gc, nodes, set;
};

static struct counts total_counts(wsp_ggml_backend_t a, wsp_ggml_backend_t b) {
    struct counts c = {
        test_backend_stats(a)->calls[TB_GRAPH_COMPUTE] + test_backend_stats(b)->calls[TB_GRAPH_COMPUTE],
        test_backend_stats(a)->nodes_computed + test_backend_stats(b)->nodes_computed,
        // copies into the test backends: set_tensor_async, or cpy_tensor_from (Metal's pattern)
        test_backend_stats(a)->calls[TB_SET_TENSOR_ASYNC] + test_backend_stats(b)->calls[TB_SET_TENSOR_ASYNC]
            + test_backend_stats(a)->calls[TB_CPY_TENSOR_FROM] + test_backend_stats(b)->calls[TB_CPY_TENSOR_FROM],
    };
    return c;
}

// Batches the upstream protocol computes: per split, one per observed node,
// plus one for the nodes after the split's last observed node.
static int expected_batches(wsp_ggml_backend_sched_t sched, const struct cb_state * s) {
    int n = 0;
    for (int k = 0; k < wsp_ggml_backend_sched_get_n_splits(sched); k++) {
        struct wsp_ggml_backend_sched_split_stats ss;
        CHECK(wsp_ggml_backend_sched_get_split_stats(sched, k, &ss));
        int last_obs = -1;
        for (int i = ss.i_start; i < ss.i_end; i++) {
            if (wants(s, i)) {
                n++;
                last_obs = i;
            }
        }
        if (last_obs != ss.i_end - 1) {
            n++;
        }
    }
    return n;
}

int main(void) {
    wsp_ggml_backend_t tb0 = eu_tb("TB0", REJECT_SM_NORM);
    wsp_ggml_backend_t tb1 = eu_tb("TB1", NULL);
    struct su_store s0;
    su_store_init(&s0, tb0, 1 << 20);
    struct wsp_ggml_context * wctx = make_ctx(64, false, true, 0);
    struct eu_mlp m;
    eu_mlp_new(&m, wctx, N_EMBD, N_FF, N_VOCAB, N_LAYER);
    eu_mlp_put(&m, &s0, NULL, W_SEED);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N_EMBD, N_TOK);
    struct lcg r = lcg_new(X_SEED);
    su_store_put(&s0, x, &r, 2.0f);
    struct eu_ref ref = eu_ref_new(N_EMBD, N_FF, N_VOCAB, N_LAYER, W_SEED, N_TOK, X_SEED);

    wsp_ggml_backend_t backends[2] = { tb0, tb1 };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    static struct cb_state st;
    {
        // the callback is never called while measuring (init_measure, reserve)
        struct wsp_ggml_context * mctx;
        struct wsp_ggml_cgraph * mg = eu_mlp_graph(&m, x, &mctx, NULL);
        memset(&st, 0, sizeof(st));
        st.self = &st;
        st.g = mg;
        st.ref = ref.graph;
        st.mode = 1;
        wsp_ggml_backend_sched_set_eval_callback(sched, eval_cb, &st);
        struct counts c0 = total_counts(tb0, tb1);
        wsp_ggml_backend_sched_init_measure(sched, mg);
        // (a measured graph keeps pointers into the freed measure buffers: reserve a fresh one)
        struct wsp_ggml_context * rctx;
        struct wsp_ggml_cgraph * rg = eu_mlp_graph(&m, x, &rctx, NULL);
        st.g = rg;
        wsp_ggml_backend_sched_reserve(sched, rg);
        wsp_ggml_free(rctx);
        struct counts c1 = total_counts(tb0, tb1);
        EU_EXPECT("callback_not_called_when_measuring", st.n_log == 0 && st.n_unknown == 0 && c1.gc == c0.gc,
                  "%d callback calls, %ld graph_compute calls during init_measure / reserve", st.n_log + st.n_unknown, c1.gc - c0.gc);
        wsp_ggml_backend_sched_set_eval_callback(sched, NULL, NULL);
        wsp_ggml_free(mctx);
    }

    // --- 1. never observe: every node asked once, in order; all computed once; one batch per split
    int n_nodes = 0, n_splits = 0;
    int split_inputs[64];
    int split_end[64];
    {
        struct wsp_ggml_context * gctx;
        struct wsp_ggml_tensor * out;
        struct wsp_ggml_cgraph * g = eu_mlp_graph(&m, x, &gctx, &out);
        CHECK(g->n_nodes == ref.graph->n_nodes);
        memset(&st, 0, sizeof(st));
        st.self = &st;
        st.g = g;
        st.ref = ref.graph;
        st.mode = 0;
        wsp_ggml_backend_sched_set_eval_callback(sched, eval_cb, &st);
        struct counts c0 = total_counts(tb0, tb1);
        wsp_ggml_backend_sched_graph_compute(sched, g);
        struct counts c1 = total_counts(tb0, tb1);
        n_nodes = g->n_nodes;
        n_splits = wsp_ggml_backend_sched_get_n_splits(sched);
        CHECK(n_splits > 2 && n_splits <= 64);
        for (int k = 0; k < n_splits; k++) {
            struct wsp_ggml_backend_sched_split_stats ss;
            CHECK(wsp_ggml_backend_sched_get_split_stats(sched, k, &ss));
            split_inputs[k] = ss.n_inputs;
            split_end[k] = ss.i_end;
        }
        eu_print_splits("callback", sched);
        EU_EXPECT("callback_asks_every_node_once_in_order", log_matches(&st, n_nodes - 1) && st.n_unknown == 0,
                  "callback calls do not follow the graph (%d calls, %d unknown tensors)", st.n_log, st.n_unknown);
        EU_EXPECT("callback_none_observed_all_computed", c1.nodes - c0.nodes == n_nodes && c1.gc - c0.gc == n_splits,
                  "%ld nodes computed in %ld graph_compute calls; graph has %d nodes, %d splits", c1.nodes - c0.nodes, c1.gc - c0.gc,
                  n_nodes, n_splits);
        EU_EXPECT("callback_none_observed_results", su_same(out, ref.out), "output differs from plain ggml.c");
        wsp_ggml_free(gctx);
    }

    // --- 2. observe every third node and the last one
    {
        struct wsp_ggml_context * gctx;
        struct wsp_ggml_tensor * out;
        struct wsp_ggml_cgraph * g = eu_mlp_graph(&m, x, &gctx, &out);
        memset(&st, 0, sizeof(st));
        st.self = &st;
        st.g = g;
        st.ref = ref.graph;
        st.mode = 1;
        wsp_ggml_backend_sched_set_eval_callback(sched, eval_cb, &st);
        struct counts c0 = total_counts(tb0, tb1);
        wsp_ggml_backend_sched_graph_compute(sched, g);
        struct counts c1 = total_counts(tb0, tb1);
        int batches = expected_batches(sched, &st);
        EU_EXPECT("callback_observe_sequence", log_matches(&st, n_nodes - 1) && st.n_unknown == 0,
                  "callback calls do not follow the protocol (%d calls)", st.n_log);
        EU_EXPECT("callback_observed_data_is_computed", st.n_bad_data == 0, "%d observed nodes had wrong data", st.n_bad_data);
        EU_EXPECT("callback_observe_each_node_computed_once", c1.nodes - c0.nodes == n_nodes,
                  "%ld nodes computed, graph has %d", c1.nodes - c0.nodes, n_nodes);
        EU_EXPECT("callback_observe_batches", c1.gc - c0.gc == batches, "%ld graph_compute calls, expected %d batches",
                  c1.gc - c0.gc, batches);
        EU_EXPECT("callback_observe_results", su_same(out, ref.out), "output differs from plain ggml.c");
        wsp_ggml_free(gctx);
    }

    // --- 3. stop in the middle of a split (gelu1), and at the last node of a split (norm1)
    for (int variant = 0; variant < 2; variant++) {
        const char * stop_name = variant == 0 ? "gelu1" : "norm1";
        const char * tag = variant == 0 ? "callback_stop" : "callback_stop_split_end";
        char name[96];
        struct wsp_ggml_context * gctx;
        struct wsp_ggml_tensor * out;
        struct wsp_ggml_cgraph * g = eu_mlp_graph(&m, x, &gctx, &out);
        struct wsp_ggml_tensor * stop_node = wsp_ggml_graph_get_tensor(g, stop_name);
        CHECK(stop_node != NULL);
        int k_stop = eu_node_index(g, stop_node);
        int split_of_stop = -1;
        int copies_upto = 0;
        for (int k = 0; k < n_splits; k++) {
            copies_upto += split_inputs[k];
            if (k_stop < split_end[k]) {
                split_of_stop = k;
                break;
            }
        }
        CHECK(split_of_stop >= 0 && split_of_stop < n_splits - 1);
        CHECK(variant == 0 ? k_stop < split_end[split_of_stop] - 1 : k_stop == split_end[split_of_stop] - 1);
        memset(&st, 0, sizeof(st));
        st.self = &st;
        st.g = g;
        st.ref = ref.graph;
        st.mode = 2;
        st.stop_at = k_stop;
        wsp_ggml_backend_sched_set_eval_callback(sched, eval_cb, &st);
        struct counts c0 = total_counts(tb0, tb1);
        wsp_ggml_backend_sched_graph_compute(sched, g);
        struct counts c1 = total_counts(tb0, tb1);
        snprintf(name, sizeof(name), "%s_no_later_calls", tag);
        EU_EXPECT(name, log_matches(&st, k_stop) && st.n_unknown == 0, "callback calls after the stop (%d calls, stop at node %d)",
                  st.n_log, k_stop);
        snprintf(name, sizeof(name), "%s_observed_data", tag);
        EU_EXPECT(name, st.n_bad_data == 0, "observed node had wrong data");
        snprintf(name, sizeof(name), "%s_later_nodes_not_computed", tag);
        EU_EXPECT(name, c1.nodes - c0.nodes == k_stop + 1, "%ld nodes computed, expected %d (nodes 0..%d)", c1.nodes - c0.nodes,
                  k_stop + 1, k_stop);
        snprintf(name, sizeof(name), "%s_no_later_copies", tag);
        EU_EXPECT(name, c1.set - c0.set == copies_upto, "%ld input copies, expected %d", c1.set - c0.set, copies_upto);

        // the statistics describe what was done: no split after the stop computed or copied into
        struct wsp_ggml_backend_sched_backend_stats b0s, b1s;
        CHECK(wsp_ggml_backend_sched_get_backend_stats(sched, tb0, &b0s));
        CHECK(wsp_ggml_backend_sched_get_backend_stats(sched, tb1, &b1s));
        int later_bytes = 0, splits_done_tb1 = 0;
        for (int k = 0; k < n_splits; k++) {
            struct wsp_ggml_backend_sched_split_stats ss;
            CHECK(wsp_ggml_backend_sched_get_split_stats(sched, k, &ss));
            if (k > split_of_stop) {
                later_bytes += (int)ss.bytes_copied;
            } else if (ss.backend == tb1) {
                splits_done_tb1++;
            }
        }
        snprintf(name, sizeof(name), "%s_stats", tag);
        EU_EXPECT(name, b0s.n_copies + b1s.n_copies == copies_upto && later_bytes == 0 && b1s.n_splits == splits_done_tb1,
                  "after the stop: n_copies %d + %d (expected %d), bytes in later splits %d, TB1 n_splits %d (expected %d)",
                  b0s.n_copies, b1s.n_copies, copies_upto, later_bytes, b1s.n_splits, splits_done_tb1);
        wsp_ggml_free(gctx);
    }

    // --- 4. callback cleared: plain compute again (and right after a stopped one)
    {
        struct wsp_ggml_context * gctx;
        struct wsp_ggml_tensor * out;
        struct wsp_ggml_cgraph * g = eu_mlp_graph(&m, x, &gctx, &out);
        memset(&st, 0, sizeof(st));
        st.self = &st;
        wsp_ggml_backend_sched_set_eval_callback(sched, NULL, NULL);
        struct counts c0 = total_counts(tb0, tb1);
        wsp_ggml_backend_sched_graph_compute(sched, g);
        struct counts c1 = total_counts(tb0, tb1);
        EU_EXPECT("callback_cleared", st.n_log == 0 && c1.gc - c0.gc == n_splits && c1.nodes - c0.nodes == n_nodes && su_same(out, ref.out),
                  "after clearing: %d callback calls, %ld graph_compute calls (splits %d), %ld nodes", st.n_log, c1.gc - c0.gc, n_splits,
                  c1.nodes - c0.nodes);
        wsp_ggml_free(gctx);
    }

    eu_ref_free(&ref);
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&s0);
    wsp_ggml_free(wctx);
    wsp_ggml_backend_free(tb0);
    wsp_ggml_backend_free(tb1);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    return eu_finish();
}
