// Ours-only test: wsp_ggml_backend_graph_copy and
// wsp_ggml_backend_compare_graph_backend.
//
// An MLP graph (3 layers: 3 GELU nodes; a view of the input leaf, reshape and
// transpose views of nodes) allocated
// on the CPU backend, every tensor in its own memory.
//  - graph_copy to a test backend: same structure, tensors on the test
//    backend, leaf data copied, views re-created; computing the copy there
//    gives the CPU's results bit for bit; graph_copy_free frees its buffer.
//  - compare against a deliberately wrong backend (xb, ext_util.h, corrupts
//    every GELU output after computing it): the callback is called once per
//    non-view node, in order, with the CPU node and its copy; a node is
//    flagged when its two results differ; the callback then writes the CPU
//    result into the copy so that the next nodes start equal again. Exactly
//    the GELU nodes are flagged. Returning false stops at the first GELU.
//  - compare against honest backends (xb without corruption, a test backend):
//    nothing flagged.
#include "ext_util.h"

#define N_EMBD  16
#define N_FF    24
#define N_VOCAB 12
#define N_LAYER 3
#define N_TOK   4
#define W_SEED  41
#define X_SEED  17

struct env {
    wsp_ggml_backend_t cpu;
    wsp_ggml_backend_buffer_t buf;
    wsp_ggml_allocr_t alloc;
    struct wsp_ggml_context * ctx;
    struct eu_mlp m;
    struct wsp_ggml_tensor * x;
    struct wsp_ggml_cgraph * g;
    struct wsp_ggml_tensor * out;
};

static void env_init(struct env * e) {
    e->cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(e->cpu, 1);
    e->buf = wsp_ggml_backend_alloc_buffer(e->cpu, 4 << 20);
    e->alloc = wsp_ggml_allocr_new_from_buffer(e->buf);
    e->ctx = su_graph_ctx(256, WSP_GGML_DEFAULT_GRAPH_SIZE);
    eu_mlp_new(&e->m, e->ctx, N_EMBD, N_FF, N_VOCAB, N_LAYER);
    struct su_store st = { e->cpu, e->buf, e->alloc };
    eu_mlp_put(&e->m, &st, NULL, W_SEED);
    // x holds two more tokens than the graph uses: the graph starts with a
    // view of a leaf (same values as the reference's input)
    e->x = wsp_ggml_new_tensor_2d(e->ctx, WSP_GGML_TYPE_F32, N_EMBD, N_TOK + 2);
    wsp_ggml_set_name(e->x, "x");
    struct lcg r = lcg_new(X_SEED);
    su_store_put(&st, e->x, &r, 2.0f);
    struct wsp_ggml_tensor * xv = wsp_ggml_view_2d(e->ctx, e->x, N_EMBD, N_TOK, e->x->nb[1], 0);
    wsp_ggml_set_name(xv, "xv");
    e->g = wsp_ggml_new_graph(e->ctx);
    e->out = eu_mlp_build(e->ctx, &e->m, xv);
    wsp_ggml_build_forward_expand(e->g, e->out);
    eu_alloc_graph(e->alloc, e->g);
    for (int i = 0; i < e->g->n_nodes; i++) {
        CHECK(e->g->nodes[i]->buffer == e->buf);
    }
}

static void env_free(struct env * e) {
    wsp_ggml_free(e->ctx);
    wsp_ggml_allocr_free(e->alloc);
    wsp_ggml_backend_buffer_free(e->buf);
    wsp_ggml_backend_free(e->cpu);
}

static bool is_gelu(const struct wsp_ggml_tensor * t) {
    return t->op == WSP_GGML_OP_UNARY && wsp_ggml_get_unary_op(t) == WSP_GGML_UNARY_OP_GELU;
}

static bool same_layout(const struct wsp_ggml_tensor * a, const struct wsp_ggml_tensor * b) {
    if (a->type != b->type || a->op != b->op) {
        return false;
    }
    for (int k = 0; k < WSP_GGML_MAX_DIMS; k++) {
        if (a->ne[k] != b->ne[k] || a->nb[k] != b->nb[k]) {
            return false;
        }
    }
    return true;
}

// --- graph_copy -----------------------------------------------------------

static void part_graph_copy(struct env * e, const struct eu_ref * ref) {
    wsp_ggml_backend_t tb = eu_tb("COPY", NULL);
    long live0 = test_backend_live_buffers();
    // compute on the CPU first so that node data are the results
    wsp_ggml_backend_graph_compute(e->cpu, e->g);
    EU_EXPECT("copy_source_results", su_same(e->out, ref->out), "CPU result differs from plain ggml.c");

    struct wsp_ggml_backend_graph_copy cp = wsp_ggml_backend_graph_copy(tb, e->g);
    bool structure = cp.graph != NULL && cp.graph->n_nodes == e->g->n_nodes && cp.buffer != NULL && cp.buffer->backend == tb;
    bool data_on_tb = structure;
    bool leafs = structure;
    bool views = structure;
    for (int i = 0; structure && i < e->g->n_nodes; i++) {
        struct wsp_ggml_tensor * a = e->g->nodes[i];
        struct wsp_ggml_tensor * b = cp.graph->nodes[i];
        if (b == NULL || b == a || !same_layout(a, b) || strcmp(a->name, b->name) != 0) {
            printf("~ copy node %d (%s) differs in layout or name\n", i, a->name);
            structure = false;
            break;
        }
        if (wsp_ggml_get_backend(b) != tb || b->data == NULL) {
            printf("~ copy node %d (%s) not on the test backend\n", i, a->name);
            data_on_tb = false;
        }
        if ((a->view_src == NULL) != (b->view_src == NULL) || (a->view_src != NULL && b->view_offs != a->view_offs)) {
            printf("~ copy node %d (%s): view not re-created\n", i, a->name);
            views = false;
        }
        if (b->view_src != NULL && b->data != (char *)b->view_src->data + b->view_offs) {
            printf("~ copy node %d (%s): view data does not point into its source\n", i, a->name);
            views = false;
        }
        for (int j = 0; j < WSP_GGML_MAX_SRC && a->src[j] != NULL; j++) {
            struct wsp_ggml_tensor * as = a->src[j];
            struct wsp_ggml_tensor * bs = b->src[j];
            if (bs == NULL || bs == as || !same_layout(as, bs)) {
                printf("~ copy node %d src %d missing or different\n", i, j);
                structure = false;
                continue;
            }
            if (eu_node_index(e->g, as) < 0) { // a leaf: weights and input
                if (wsp_ggml_get_backend(bs) != tb || !eu_same_data(as, bs)) {
                    printf("~ copy leaf %s: not on the test backend or data differs\n", as->name);
                    leafs = false;
                }
            } else if (bs != cp.graph->nodes[eu_node_index(e->g, as)]) {
                printf("~ copy node %d src %d is not the copy of node %d\n", i, j, eu_node_index(e->g, as));
                structure = false;
            }
        }
    }
    EU_EXPECT("copy_structure", structure, "the copied graph differs in structure");
    EU_EXPECT("copy_on_backend", data_on_tb, "copied tensors not on the target backend");
    EU_EXPECT("copy_leaf_data", leafs, "leaf data not copied");
    EU_EXPECT("copy_views_recreated", views, "views not re-created");

    // clobber the copied node results, compute the copy on the test backend
    if (structure) {
        for (int i = 0; i < cp.graph->n_nodes; i++) {
            struct wsp_ggml_tensor * b = cp.graph->nodes[i];
            if (b->view_src == NULL) {
                eu_fill_value(b, -1.0f);
            }
        }
        wsp_ggml_backend_graph_compute(tb, cp.graph);
        bool all_same = true;
        for (int i = 0; i < cp.graph->n_nodes; i++) {
            if (!eu_same_data(e->g->nodes[i], cp.graph->nodes[i])) {
                printf("~ node %d (%s) differs after computing the copy\n", i, e->g->nodes[i]->name);
                all_same = false;
            }
        }
        EU_EXPECT("copy_computes_same", all_same, "the copy computed on the test backend differs from the CPU");
    } else {
        eu_fail("copy_computes_same", "structure wrong, not computed");
    }
    wsp_ggml_backend_graph_copy_free(cp);
    EU_EXPECT("copy_free_releases_buffer", test_backend_live_buffers() == live0, "%ld test buffers alive, expected %ld",
              test_backend_live_buffers(), live0);
    wsp_ggml_backend_free(tb);
}

// --- compare --------------------------------------------------------------

struct cmp_state {
    const struct wsp_ggml_cgraph * g;
    wsp_ggml_backend_t backend2;
    bool resync;           // write t1 into t2 after comparing
    bool stop_at_mismatch; // return false at the first mismatch
    int n_calls;
    int idx[256];
    bool mismatch[256];
    int n_bad_args; // wrong node index, t1 not the graph's node, t2 not a copy on backend2
    void * self;
};

static bool cmp_cb(int node_index, struct wsp_ggml_tensor * t1, struct wsp_ggml_tensor * t2, void * user_data) {
    struct cmp_state * s = (struct cmp_state *)user_data;
    CHECK(s != NULL && s->self == s);
    CHECK(s->n_calls < 256);
    bool args_ok = node_index >= 0 && node_index < s->g->n_nodes && t1 == s->g->nodes[node_index] && t2 != NULL && t2 != t1
        && same_layout(t1, t2) && wsp_ggml_get_backend(t2) == s->backend2;
    if (!args_ok) {
        s->n_bad_args++;
    }
    bool differs = !eu_same_data(t1, t2);
    s->idx[s->n_calls] = node_index;
    s->mismatch[s->n_calls] = differs;
    s->n_calls++;
    if (differs && s->resync) {
        CHECK(wsp_ggml_is_contiguous(t1) && wsp_ggml_is_contiguous(t2));
        void * d = su_read(t1);
        wsp_ggml_backend_tensor_set(t2, d, 0, wsp_ggml_nbytes(t2));
        free(d);
    }
    return !(differs && s->stop_at_mismatch);
}

// The callback was called for exactly the non-view nodes 0..last, in order.
static bool calls_cover(const struct cmp_state * s, int last) {
    int k = 0;
    for (int i = 0; i <= last; i++) {
        if (eu_is_view_op(s->g->nodes[i]->op)) {
            continue;
        }
        if (k >= s->n_calls || s->idx[k] != i) {
            printf("~ call %d: expected node %d\n", k, i);
            return false;
        }
        k++;
    }
    if (k != s->n_calls) {
        printf("~ %d calls, expected %d\n", s->n_calls, k);
        return false;
    }
    return true;
}

static void clobber_nodes(struct env * e) {
    for (int i = 0; i < e->g->n_nodes; i++) {
        if (e->g->nodes[i]->view_src == NULL) {
            eu_fill_value(e->g->nodes[i], -3.0f);
        }
    }
}

static void part_compare(struct env * e, const struct eu_ref * ref) {
    static struct cmp_state s;
    wsp_ggml_backend_t bad_cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_cpu_set_n_threads(bad_cpu, 1);
    wsp_ggml_backend_t bad = xb_new("BADGELU", NULL, WSP_GGML_UNARY_OP_GELU, bad_cpu);

    int n_gelu = 0, first_gelu = -1;
    for (int i = 0; i < e->g->n_nodes; i++) {
        if (is_gelu(e->g->nodes[i])) {
            n_gelu++;
            if (first_gelu < 0) {
                first_gelu = i;
            }
        }
    }
    CHECK(n_gelu == N_LAYER && first_gelu > 0);

    // 1. pinpoint: exactly the GELU nodes flagged
    clobber_nodes(e);
    memset(&s, 0, sizeof(s));
    s.self = &s;
    s.g = e->g;
    s.backend2 = bad;
    s.resync = true;
    wsp_ggml_backend_compare_graph_backend(e->cpu, bad, e->g, cmp_cb, &s);
    bool exact = true;
    int n_flagged = 0;
    for (int k = 0; k < s.n_calls; k++) {
        bool g = is_gelu(e->g->nodes[s.idx[k]]);
        if (s.mismatch[k]) {
            n_flagged++;
        }
        if (s.mismatch[k] != g) {
            printf("~ node %d (%s): flagged=%d gelu=%d\n", s.idx[k], e->g->nodes[s.idx[k]]->name, s.mismatch[k] ? 1 : 0, g ? 1 : 0);
            exact = false;
        }
    }
    printf("~ compare: %d calls, %d flagged, xb corrupted %ld nodes\n", s.n_calls, n_flagged, test_backend_stats(bad)->corrupted);
    EU_EXPECT("compare_calls_every_non_view_node_in_order", calls_cover(&s, e->g->n_nodes - 1) && s.n_bad_args == 0,
              "%d calls, %d with wrong arguments", s.n_calls, s.n_bad_args);
    EU_EXPECT("compare_flags_exactly_gelu", exact && n_flagged == n_gelu, "%d flagged, %d GELU nodes", n_flagged, n_gelu);
    EU_EXPECT("compare_backend1_results", su_same(e->out, ref->out), "backend1's output after compare differs from plain ggml.c");

    // 2. stop at the first mismatch (no resync)
    clobber_nodes(e);
    memset(&s, 0, sizeof(s));
    s.self = &s;
    s.g = e->g;
    s.backend2 = bad;
    s.stop_at_mismatch = true;
    wsp_ggml_backend_compare_graph_backend(e->cpu, bad, e->g, cmp_cb, &s);
    EU_EXPECT("compare_stops_at_first_gelu",
              calls_cover(&s, first_gelu) && s.n_calls > 0 && s.idx[s.n_calls - 1] == first_gelu && s.mismatch[s.n_calls - 1],
              "%d calls, last at node %d, first GELU is node %d", s.n_calls, s.n_calls > 0 ? s.idx[s.n_calls - 1] : -1, first_gelu);
    // nodes after the stop were not computed on backend1 either
    {
        int last = e->g->n_nodes - 1;
        float v;
        wsp_ggml_backend_tensor_get(e->g->nodes[last], &v, 0, sizeof(v));
        EU_EXPECT("compare_stop_later_nodes_not_computed", v == -3.0f, "last node holds %a after stopping", (double)v);
    }

    // 3. honest backends: nothing flagged
    {
        wsp_ggml_backend_t good_cpu = wsp_ggml_backend_cpu_init();
        wsp_ggml_backend_cpu_set_n_threads(good_cpu, 2);
        wsp_ggml_backend_t good = xb_new("GOOD", NULL, -1, good_cpu);
        wsp_ggml_backend_t tb = eu_tb("CMPTB", NULL);
        long live0 = test_backend_live_buffers();
        wsp_ggml_backend_t honest[2] = { good, tb };
        const char * names[2] = { "compare_honest_xb_nothing_flagged", "compare_honest_test_backend_nothing_flagged" };
        for (int h = 0; h < 2; h++) {
            clobber_nodes(e);
            memset(&s, 0, sizeof(s));
            s.self = &s;
            s.g = e->g;
            s.backend2 = honest[h];
            wsp_ggml_backend_compare_graph_backend(e->cpu, honest[h], e->g, cmp_cb, &s);
            int flagged = 0;
            for (int k = 0; k < s.n_calls; k++) {
                flagged += s.mismatch[k] ? 1 : 0;
            }
            EU_EXPECT(names[h], flagged == 0 && calls_cover(&s, e->g->n_nodes - 1) && s.n_bad_args == 0 && su_same(e->out, ref->out),
                      "%d of %d nodes flagged, %d bad calls", flagged, s.n_calls, s.n_bad_args);
        }
        EU_EXPECT("compare_frees_its_copy", test_backend_live_buffers() == live0, "%ld test buffers alive, expected %ld",
                  test_backend_live_buffers(), live0);
        wsp_ggml_backend_free(tb);
        wsp_ggml_backend_free(good);
        wsp_ggml_backend_free(good_cpu);
    }

    wsp_ggml_backend_free(bad);
    wsp_ggml_backend_free(bad_cpu);
}

int main(void) {
    struct env e;
    env_init(&e);
    struct eu_ref ref = eu_ref_new(N_EMBD, N_FF, N_VOCAB, N_LAYER, W_SEED, N_TOK, X_SEED);
    CHECK(e.g->nodes[0]->op == WSP_GGML_OP_VIEW && e.g->n_nodes == ref.graph->n_nodes + 1);
    part_graph_copy(&e, &ref);
    part_compare(&e, &ref);
    eu_ref_free(&ref);
    env_free(&e);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    return eu_finish();
}
