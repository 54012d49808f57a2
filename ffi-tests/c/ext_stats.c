// Ours-only test: the scheduler's introspection and statistics.
//
// Two test backends without copy hooks (every input copy into a test
// backend is then exactly one set_tensor_async on it and one
// get_tensor_async on the source backend) and a third one that gets nothing.
// TB0 rejects SOFT_MAX and NORM, so the graph splits several times; some
// weights live on TB1. What the scheduler reports (split count, split ranges
// and inputs, per-backend splits / copies / bytes) must equal what the test
// backends counted and what the assignments imply.
#include "ext_util.h"

#define N_EMBD  16
#define N_FF    24
#define N_VOCAB 12
#define N_LAYER 2
#define N_TOK   4
#define W_SEED  11
#define X_SEED  5

static const int REJECT_SM_NORM[] = { WSP_GGML_OP_SOFT_MAX, WSP_GGML_OP_NORM, -1 };

struct counts {
    long set, get, bytes_set, bytes_get, gc, nodes;
};

static struct counts counts_of(wsp_ggml_backend_t b) {
    struct test_backend_stats * s = test_backend_stats(b);
    // a copy into a test backend: one set_tensor_async, or one
    // cpy_tensor_from where the backend has the slot (Metal's pattern)
    struct counts c = { s->calls[TB_SET_TENSOR_ASYNC] + s->calls[TB_CPY_TENSOR_FROM], s->calls[TB_GET_TENSOR_ASYNC], s->bytes_set, s->bytes_get,
                        s->calls[TB_GRAPH_COMPUTE], s->nodes_computed };
    return c;
}

static struct counts diff(struct counts a, struct counts b) {
    struct counts d = { b.set - a.set, b.get - a.get, b.bytes_set - a.bytes_set, b.bytes_get - a.bytes_get, b.gc - a.gc,
                        b.nodes - a.nodes };
    return d;
}

// Checks one compute of graph g (counters before/after given) against the
// scheduler's statistics. `tag` prefixes the check names.
static void check_compute(const char * tag, wsp_ggml_backend_sched_t sched, const struct wsp_ggml_cgraph * g,
                          wsp_ggml_backend_t * tbs, int n_tbs, const struct counts * before, const struct counts * after) {
    char name[96];
    int n_splits = wsp_ggml_backend_sched_get_n_splits(sched);

    snprintf(name, sizeof(name), "%s_splits_consistent", tag);
    EU_EXPECT(name, eu_splits_consistent(sched, g), "split stats inconsistent");

    // each split's inputs: as the assignments imply
    bool inputs_ok = true;
    for (int k = 0; k < n_splits; k++) {
        struct wsp_ggml_backend_sched_split_stats s;
        CHECK(wsp_ggml_backend_sched_get_split_stats(sched, k, &s));
        size_t bytes;
        int n = eu_expected_inputs(sched, g, &s, &bytes);
        if (n != s.n_inputs || bytes != s.bytes_copied) {
            printf("~ %s split %d: n_inputs=%d bytes=%zu, expected %d / %zu\n", tag, k, s.n_inputs, s.bytes_copied, n, bytes);
            inputs_ok = false;
        }
    }
    snprintf(name, sizeof(name), "%s_split_inputs", tag);
    EU_EXPECT(name, inputs_ok, "split inputs differ from the assignments");

    // per backend: scheduler stats == sum over its splits == what the test backend counted
    bool be_ok = true;
    long total_copies = 0, total_gets = 0, total_bytes = 0, total_bytes_get = 0;
    for (int b = 0; b < n_tbs; b++) {
        struct wsp_ggml_backend_sched_backend_stats bs;
        memset(&bs, 0xff, sizeof(bs));
        CHECK(wsp_ggml_backend_sched_get_backend_stats(sched, tbs[b], &bs));
        int sp = 0, inp = 0;
        size_t by = 0;
        long nodes = 0;
        for (int k = 0; k < n_splits; k++) {
            struct wsp_ggml_backend_sched_split_stats s;
            CHECK(wsp_ggml_backend_sched_get_split_stats(sched, k, &s));
            if (s.backend == tbs[b]) {
                sp++;
                inp += s.n_inputs;
                by += s.bytes_copied;
                nodes += s.i_end - s.i_start;
            }
        }
        struct counts d = diff(before[b], after[b]);
        printf("~ %s %s: stats n_splits=%d n_copies=%d bytes=%zu copy_us=%" PRIu64 " compute_us=%" PRIu64
               " | counted graph_compute=%ld nodes=%ld set=%ld bytes_set=%ld get=%ld\n",
               tag, wsp_ggml_backend_name(tbs[b]), bs.n_splits, bs.n_copies, bs.bytes_copied, bs.copy_us, bs.compute_us, d.gc,
               d.nodes, d.set, d.bytes_set, d.get);
        if (bs.n_splits != sp || bs.n_splits != d.gc || d.nodes != nodes) {
            printf("~ %s %s: n_splits %d, splits listed %d, graph_compute calls %ld, nodes %ld vs %ld\n", tag,
                   wsp_ggml_backend_name(tbs[b]), bs.n_splits, sp, d.gc, d.nodes, nodes);
            be_ok = false;
        }
        if (bs.n_copies != inp || bs.n_copies != d.set || (long)bs.bytes_copied != d.bytes_set || bs.bytes_copied != by) {
            printf("~ %s %s: n_copies %d, split inputs %d, set_tensor calls %ld; bytes %zu, split bytes %zu, bytes_set %ld\n", tag,
                   wsp_ggml_backend_name(tbs[b]), bs.n_copies, inp, d.set, bs.bytes_copied, by, d.bytes_set);
            be_ok = false;
        }
        if (sp == 0 && (bs.compute_us != 0 || bs.n_copies != 0)) {
            printf("~ %s %s: no split but compute_us=%" PRIu64 " n_copies=%d\n", tag, wsp_ggml_backend_name(tbs[b]), bs.compute_us,
                   bs.n_copies);
            be_ok = false;
        }
        if (bs.n_copies == 0 && bs.copy_us != 0) {
            printf("~ %s %s: no copy but copy_us=%" PRIu64 "\n", tag, wsp_ggml_backend_name(tbs[b]), bs.copy_us);
            be_ok = false;
        }
        total_copies += bs.n_copies;
        total_bytes += (long)bs.bytes_copied;
        total_gets += d.get;
        total_bytes_get += d.bytes_get;
    }
    snprintf(name, sizeof(name), "%s_backend_stats_match_counters", tag);
    EU_EXPECT(name, be_ok, "backend statistics differ from the test backends' counters");
    // every copy read its source once from the other test backend
    snprintf(name, sizeof(name), "%s_copies_read_once", tag);
    EU_EXPECT(name, total_gets == total_copies && total_bytes_get == total_bytes, "copies %ld (%ld bytes) but %ld reads (%ld bytes)",
              total_copies, total_bytes, total_gets, total_bytes_get);
}

int main(void) {
    wsp_ggml_backend_t tb0 = eu_tb("TB0", REJECT_SM_NORM);
    wsp_ggml_backend_t tb1 = eu_tb("TB1", NULL);
    wsp_ggml_backend_t tb2 = eu_tb("TB2", NULL); // in the scheduler, gets nothing
    wsp_ggml_backend_t outsider = eu_tb("OUT", NULL);
    struct su_store s0, s1;
    su_store_init(&s0, tb0, 1 << 20);
    su_store_init(&s1, tb1, 1 << 20);

    struct wsp_ggml_context * wctx = make_ctx(64, false, true, 0);
    struct eu_mlp m;
    eu_mlp_new(&m, wctx, N_EMBD, N_FF, N_VOCAB, N_LAYER);
    struct su_store * stores[6 * EU_MAX_LAYER + 1];
    memset(stores, 0, sizeof(stores));
    stores[5 * 1 + 3] = &s1; // w2 of layer 1 on TB1
    stores[5 * 1 + 4] = &s1; // b2 of layer 1 on TB1
    eu_mlp_put(&m, &s0, stores, W_SEED);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N_EMBD, N_TOK);
    wsp_ggml_set_name(x, "x");
    struct lcg r = lcg_new(X_SEED);
    su_store_put(&s0, x, &r, 2.0f);

    wsp_ggml_backend_t backends[3] = { tb0, tb1, tb2 };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 3);

    // n_backends / get_backend
    bool nb_ok = wsp_ggml_backend_sched_get_n_backends(sched) == 3;
    for (int i = 0; i < 3; i++) {
        nb_ok = nb_ok && wsp_ggml_backend_sched_get_backend(sched, i) == backends[i];
    }
    EU_EXPECT("stats_n_backends_and_order", nb_ok, "get_n_backends / get_backend wrong");

    // measure
    struct wsp_ggml_context * mctx;
    struct wsp_ggml_cgraph * mg = eu_mlp_graph(&m, x, &mctx, NULL);
    wsp_ggml_backend_sched_init_measure(sched, mg);
    int n_measure = wsp_ggml_backend_sched_get_n_splits(sched);
    EU_EXPECT("stats_measure_splits_consistent", eu_splits_consistent(sched, mg), "splits after init_measure inconsistent");
    wsp_ggml_free(mctx);

    // compute 1
    struct eu_ref ref = eu_ref_new(N_EMBD, N_FF, N_VOCAB, N_LAYER, W_SEED, N_TOK, X_SEED);
    struct counts before[3], after[3];
    struct wsp_ggml_context * gctx;
    struct wsp_ggml_tensor * out;
    struct wsp_ggml_cgraph * g = eu_mlp_graph(&m, x, &gctx, &out);
    for (int b = 0; b < 3; b++) {
        before[b] = counts_of(backends[b]);
    }
    wsp_ggml_backend_sched_graph_compute(sched, g);
    for (int b = 0; b < 3; b++) {
        after[b] = counts_of(backends[b]);
    }
    eu_print_splits("stats", sched);
    int n_splits = wsp_ggml_backend_sched_get_n_splits(sched);
    EU_EXPECT("stats_results", su_same(out, ref.out), "output differs from plain ggml.c");
    EU_EXPECT("stats_measure_same_split_count", n_measure == n_splits && n_splits > 2, "measure %d splits, compute %d", n_measure,
              n_splits);
    check_compute("stats1", sched, g, backends, 3, before, after);

    // a node not in the graph has no backend; the weights have theirs
    {
        struct wsp_ggml_tensor * lonely = wsp_ggml_new_tensor_1d(gctx, WSP_GGML_TYPE_F32, 4);
        bool ok = wsp_ggml_backend_sched_get_tensor_backend(sched, lonely) == NULL
            && wsp_ggml_backend_sched_get_tensor_backend(sched, m.w1[0]) == tb0
            && wsp_ggml_backend_sched_get_tensor_backend(sched, m.w2[1]) == tb1
            && wsp_ggml_backend_sched_get_tensor_backend(sched, out) == tb1;
        EU_EXPECT("stats_tensor_backend", ok, "get_tensor_backend: lonely=%s w1_0=%s w2_1=%s out=%s",
                  eu_bname(wsp_ggml_backend_sched_get_tensor_backend(sched, lonely)),
                  eu_bname(wsp_ggml_backend_sched_get_tensor_backend(sched, m.w1[0])),
                  eu_bname(wsp_ggml_backend_sched_get_tensor_backend(sched, m.w2[1])),
                  eu_bname(wsp_ggml_backend_sched_get_tensor_backend(sched, out)));
    }
    // a backend outside the scheduler
    {
        struct wsp_ggml_backend_sched_backend_stats bs;
        EU_EXPECT("stats_backend_not_in_sched", !wsp_ggml_backend_sched_get_backend_stats(sched, outsider, &bs),
                  "get_backend_stats accepted a backend outside the scheduler");
    }
    wsp_ggml_free(gctx);

    // compute 2, a smaller batch through a view of x: stats are those of the last compute only
    {
        struct wsp_ggml_context * c2 = su_graph_ctx(128, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_tensor * xv = wsp_ggml_view_2d(c2, x, N_EMBD, 2, x->nb[1], 0);
        wsp_ggml_set_name(xv, "xv");
        struct wsp_ggml_cgraph * g2 = wsp_ggml_new_graph(c2);
        struct wsp_ggml_tensor * o2 = eu_mlp_build(c2, &m, xv);
        wsp_ggml_build_forward_expand(g2, o2);
        for (int b = 0; b < 3; b++) {
            before[b] = counts_of(backends[b]);
        }
        wsp_ggml_backend_sched_graph_compute(sched, g2);
        for (int b = 0; b < 3; b++) {
            after[b] = counts_of(backends[b]);
        }
        check_compute("stats2", sched, g2, backends, 3, before, after);
        // reference for the first 2 tokens: a fresh host graph over a view
        struct wsp_ggml_context * hc = su_host_ctx(8 << 20);
        struct eu_mlp hm;
        eu_mlp_new(&hm, hc, N_EMBD, N_FF, N_VOCAB, N_LAYER);
        eu_mlp_put_host(&hm, W_SEED);
        struct wsp_ggml_tensor * hx = wsp_ggml_new_tensor_2d(hc, WSP_GGML_TYPE_F32, N_EMBD, N_TOK);
        struct lcg rr = lcg_new(X_SEED);
        su_fill_host(hx, &rr, 2.0f);
        struct wsp_ggml_tensor * hxv = wsp_ggml_view_2d(hc, hx, N_EMBD, 2, hx->nb[1], 0);
        struct wsp_ggml_cgraph * hg = wsp_ggml_new_graph(hc);
        struct wsp_ggml_tensor * ho = eu_mlp_build(hc, &hm, hxv);
        wsp_ggml_build_forward_expand(hg, ho);
        su_ref_compute(hg, 1);
        EU_EXPECT("stats2_results", su_same(o2, ho), "output of the second compute differs");
        wsp_ggml_free(hc);
        wsp_ggml_free(c2);
    }

    // a later measure (reserve) replaces the split graph: its splits were not
    // computed, so they report no bytes copied (not those of the previous
    // compute's split of the same index)
    {
        struct wsp_ggml_context * c3;
        struct wsp_ggml_cgraph * g3 = eu_mlp_graph(&m, x, &c3, NULL);
        wsp_ggml_backend_sched_reserve(sched, g3);
        size_t bytes = 0;
        for (int k = 0; k < wsp_ggml_backend_sched_get_n_splits(sched); k++) {
            struct wsp_ggml_backend_sched_split_stats ss;
            CHECK(wsp_ggml_backend_sched_get_split_stats(sched, k, &ss));
            bytes += ss.bytes_copied;
        }
        EU_EXPECT("stats_measure_has_no_split_bytes", bytes == 0 && eu_splits_consistent(sched, g3),
                  "after reserve the splits report %zu bytes copied", bytes);
        wsp_ggml_free(c3);
    }

    eu_ref_free(&ref);
    wsp_ggml_backend_sched_free(sched);
    su_store_free(&s0);
    su_store_free(&s1);
    wsp_ggml_free(wctx);
    wsp_ggml_backend_free(tb0);
    wsp_ggml_backend_free(tb1);
    wsp_ggml_backend_free(tb2);
    wsp_ggml_backend_free(outsider);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    return eu_finish();
}
