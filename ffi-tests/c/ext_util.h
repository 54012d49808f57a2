// Helpers for the ours-only tests of the extension API (ext_*.c,
// ggml-backend-ext.h): test backends without copy hooks (so that every
// scheduler copy is one counted set_tensor_async / get_tensor_async), a
// "spy" backend of our own (xb) that records what it computes and can corrupt
// the results of one op, graph allocation without memory reuse, and host
// references computed with ggml.c alone.
//
// Every program prints "ok <name>" for each passed check and "FAIL <name>: ..."
// otherwise (and then exits non-zero at the end).
#pragma once

#include "ggml-backend-ext.h"
#include "ggml-backend-impl.h"
#include "sched_util.h"

#include <stdarg.h>

#if defined(__GNUC__)
#define EU_UNUSED __attribute__((unused))
#else
#define EU_UNUSED
#endif

// ---------------------------------------------------------------------------
// check reporting

static int eu_failures = 0;

static EU_UNUSED void eu_ok(const char * name) {
    printf("ok %s\n", name);
    fflush(stdout);
}

static EU_UNUSED void eu_fail(const char * name, const char * fmt, ...) {
    // on stdout (in order with the rest) and on stderr (the harness shows its tail on failure)
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    eu_failures++;
}

// "ok name" if cond, else "FAIL name: what"
#define EU_EXPECT(name, cond, ...)                 \
    do {                                           \
        if (cond) {                                \
            eu_ok(name);                           \
        } else {                                   \
            eu_fail(name, __VA_ARGS__);            \
        }                                          \
    } while (0)

static EU_UNUSED int eu_finish(void) {
    printf("failures %d\n", eu_failures);
    return eu_failures == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------
// one case per run: without an argument, list the cases (one per line) and
// return -1 with *exit_code 0; otherwise the index of the case named by
// argv[1], or -1 with *exit_code 2 for an unknown name.

static EU_UNUSED int eu_pick_case(int argc, char ** argv, const char * const * cases, int n_cases, int * exit_code) {
    *exit_code = 0;
    if (argc < 2) {
        for (int i = 0; i < n_cases; i++) {
            printf("%s\n", cases[i]);
        }
        return -1;
    }
    for (int i = 0; i < n_cases; i++) {
        if (strcmp(argv[1], cases[i]) == 0) {
            return i;
        }
    }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    *exit_code = 2;
    return -1;
}

// ---------------------------------------------------------------------------
// test backends

// A test backend without cpy_tensor_from / cpy_tensor_to: a scheduler copy
// into it is exactly one set_tensor_async, a copy out of it (to another
// backend without copy hooks) exactly one get_tensor_async. (In Metal's slot
// pattern, TEST_BACKEND_SHAPE=metal, a copy into it is one cpy_tensor_from.)
// `rejected` is a -1 terminated list of enum wsp_ggml_op values (or NULL).
static EU_UNUSED wsp_ggml_backend_t eu_tb(const char * name, const int * rejected) {
    struct test_backend_options o;
    memset(&o, 0, sizeof(o));
    o.name = name;
    o.alignment = 32;
    o.has_cpy_tensor_from = false;
    o.has_cpy_tensor_to = false;
    o.has_buffer_hooks = true;
    o.rejected_ops = rejected;
    o.n_rejected_ops = 0;
    wsp_ggml_backend_t b = test_backend_new(&o);
    CHECK(b != NULL);
    return b;
}

// ---------------------------------------------------------------------------
// graph allocation without memory reuse: every leaf and node of `g` gets its
// own memory from `alloc` (views point into their source), so every node's
// result stays readable after the compute.

static EU_UNUSED void eu_alloc_tensor(wsp_ggml_allocr_t alloc, struct wsp_ggml_tensor * t) {
    if (t->buffer != NULL) {
        return;
    }
    if (t->view_src != NULL) {
        eu_alloc_tensor(alloc, t->view_src);
        t->buffer = t->view_src->buffer;
        t->backend = t->view_src->backend;
        t->data = (char *)t->view_src->data + t->view_offs;
        wsp_ggml_backend_buffer_init_tensor(t->buffer, t);
        return;
    }
    if (t->data != NULL) {
        return; // host tensor (not ours to allocate)
    }
    wsp_ggml_allocr_alloc(alloc, t);
    CHECK(t->data != NULL && t->buffer != NULL);
}

static EU_UNUSED void eu_alloc_graph(wsp_ggml_allocr_t alloc, struct wsp_ggml_cgraph * g) {
    for (int i = 0; i < g->n_leafs; i++) {
        eu_alloc_tensor(alloc, g->leafs[i]);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct wsp_ggml_tensor * n = g->nodes[i];
        for (int j = 0; j < WSP_GGML_MAX_SRC && n->src[j] != NULL; j++) {
            eu_alloc_tensor(alloc, n->src[j]);
        }
        eu_alloc_tensor(alloc, n);
    }
}

// Fill a (contiguous, allocated) f32 tensor with one value.
static EU_UNUSED void eu_fill_value(struct wsp_ggml_tensor * t, float v) {
    CHECK(t->type == WSP_GGML_TYPE_F32 && wsp_ggml_is_contiguous(t));
    int64_t n = wsp_ggml_nelements(t);
    float * f = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    CHECK(f != NULL);
    for (int64_t i = 0; i < n; i++) {
        f[i] = v;
    }
    wsp_ggml_backend_tensor_set(t, f, 0, wsp_ggml_nbytes(t));
    free(f);
}

// Bit-exact comparison of two tensors of the same layout (any backends).
static EU_UNUSED bool eu_same_data(const struct wsp_ggml_tensor * a, const struct wsp_ggml_tensor * b) {
    if (wsp_ggml_nbytes(a) != wsp_ggml_nbytes(b)) {
        return false;
    }
    void * da = su_read(a);
    void * db = su_read(b);
    bool same = memcmp(da, db, wsp_ggml_nbytes(a)) == 0;
    free(da);
    free(db);
    return same;
}

static EU_UNUSED bool eu_is_view_op(enum wsp_ggml_op op) {
    return op == WSP_GGML_OP_VIEW || op == WSP_GGML_OP_RESHAPE || op == WSP_GGML_OP_PERMUTE || op == WSP_GGML_OP_TRANSPOSE;
}

static EU_UNUSED int eu_node_index(const struct wsp_ggml_cgraph * g, const struct wsp_ggml_tensor * t) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i] == t) {
            return i;
        }
    }
    return -1;
}

static EU_UNUSED const char * eu_bname(wsp_ggml_backend_t b) {
    return b == NULL ? "NULL" : wsp_ggml_backend_name(b);
}

// ---------------------------------------------------------------------------
// A test backend (test_backend.c) as the ext programs use it: 64-byte
// alignment, no copy hooks and no buffer hooks; `rejected`: a -1 terminated
// list of ops its supports_op rejects (or NULL); `corrupt_unary`: a unary op
// whose outputs it corrupts (a deliberately wrong backend), or -1;
// `delegate`: a CPU backend to compute with (not owned), or NULL.
static EU_UNUSED wsp_ggml_backend_t xb_new(const char * name, const int * rejected, int corrupt_unary, wsp_ggml_backend_t delegate) {
    struct test_backend_options o;
    memset(&o, 0, sizeof(o));
    o.name = name;
    o.alignment = 64;
    o.rejected_ops = rejected;
    o.corrupt = corrupt_unary >= 0;
    o.corrupt_unary = corrupt_unary;
    o.delegate = delegate;
    wsp_ggml_backend_t b = test_backend_new(&o);
    CHECK(b != NULL);
    return b;
}

// ---------------------------------------------------------------------------
// scheduler introspection helpers

// Checks that the splits reported by get_split_stats tile [0, n_nodes) in
// order, with a backend of the scheduler each, and that no non-view node of a
// split is an op that the split's backend rejects. Returns true if all holds;
// prints what is wrong otherwise.
static EU_UNUSED bool eu_splits_consistent(wsp_ggml_backend_sched_t sched, const struct wsp_ggml_cgraph * g) {
    int n = wsp_ggml_backend_sched_get_n_splits(sched);
    if (n <= 0) {
        printf("~ splits: n_splits=%d\n", n);
        return false;
    }
    int expect_start = 0;
    for (int k = 0; k < n; k++) {
        struct wsp_ggml_backend_sched_split_stats s;
        memset(&s, 0, sizeof(s));
        if (!wsp_ggml_backend_sched_get_split_stats(sched, k, &s)) {
            printf("~ splits: split %d not available\n", k);
            return false;
        }
        if (s.i_start != expect_start || s.i_end <= s.i_start || s.i_end > g->n_nodes) {
            printf("~ splits: split %d [%d, %d) does not follow %d\n", k, s.i_start, s.i_end, expect_start);
            return false;
        }
        bool in_sched = false;
        for (int b = 0; b < wsp_ggml_backend_sched_get_n_backends(sched); b++) {
            in_sched = in_sched || wsp_ggml_backend_sched_get_backend(sched, b) == s.backend;
        }
        if (!in_sched) {
            printf("~ splits: split %d backend not in the scheduler\n", k);
            return false;
        }
        for (int i = s.i_start; i < s.i_end; i++) {
            struct wsp_ggml_tensor * node = g->nodes[i];
            if (eu_is_view_op(node->op)) {
                continue;
            }
            if (!wsp_ggml_backend_supports_op(s.backend, node)) {
                printf("~ splits: node %d (%s, %s) in split %d on %s, which rejects it\n", i, node->name,
                       wsp_ggml_op_name(node->op), k, wsp_ggml_backend_name(s.backend));
                return false;
            }
            wsp_ggml_backend_t tb = wsp_ggml_backend_sched_get_tensor_backend(sched, node);
            if (tb != s.backend) {
                printf("~ splits: node %d (%s) in split %d on %s but get_tensor_backend says %s\n", i, node->name, k,
                       wsp_ggml_backend_name(s.backend), eu_bname(tb));
                return false;
            }
        }
        expect_start = s.i_end;
    }
    if (expect_start != g->n_nodes) {
        printf("~ splits: last split ends at %d, graph has %d nodes\n", expect_start, g->n_nodes);
        return false;
    }
    struct wsp_ggml_backend_sched_split_stats s;
    if (wsp_ggml_backend_sched_get_split_stats(sched, n, &s) || wsp_ggml_backend_sched_get_split_stats(sched, -1, &s)) {
        printf("~ splits: get_split_stats accepts an out-of-range index\n");
        return false;
    }
    return true;
}

// Print the splits as "~" info lines.
static EU_UNUSED void eu_print_splits(const char * label, wsp_ggml_backend_sched_t sched) {
    int n = wsp_ggml_backend_sched_get_n_splits(sched);
    printf("~ %s n_splits=%d\n", label, n);
    for (int k = 0; k < n; k++) {
        struct wsp_ggml_backend_sched_split_stats s;
        if (wsp_ggml_backend_sched_get_split_stats(sched, k, &s)) {
            printf("~ %s split %d %s [%d,%d) n_inputs=%d bytes=%zu\n", label, k, eu_bname(s.backend), s.i_start, s.i_end,
                   s.n_inputs, s.bytes_copied);
        }
    }
}

// The inputs of split k as the assignments say: distinct sources of the
// split's non-view nodes assigned to another backend. Returns their number
// and (in *bytes) their total size.
static EU_UNUSED int eu_expected_inputs(wsp_ggml_backend_sched_t sched, const struct wsp_ggml_cgraph * g,
                                        const struct wsp_ggml_backend_sched_split_stats * s, size_t * bytes) {
    const struct wsp_ggml_tensor * seen[1024];
    int n_seen = 0;
    *bytes = 0;
    for (int i = s->i_start; i < s->i_end; i++) {
        struct wsp_ggml_tensor * node = g->nodes[i];
        if (eu_is_view_op(node->op)) {
            continue;
        }
        for (int j = 0; j < WSP_GGML_MAX_SRC && node->src[j] != NULL; j++) {
            struct wsp_ggml_tensor * src = node->src[j];
            wsp_ggml_backend_t sb = wsp_ggml_backend_sched_get_tensor_backend(sched, src);
            if (sb == s->backend) {
                continue;
            }
            bool dup = false;
            for (int q = 0; q < n_seen; q++) {
                dup = dup || seen[q] == src;
            }
            if (!dup) {
                CHECK(n_seen < 1024);
                seen[n_seen++] = src;
                *bytes += wsp_ggml_nbytes(src);
            }
        }
    }
    return n_seen;
}

// ---------------------------------------------------------------------------
// a small MLP used by several programs:
//   per layer: norm, mul, mul_mat, add, gelu, reshape (view), mul_mat, add, add (residual)
//   then: mul_mat (logits), transpose (view), cont, soft_max
// Built identically in a no_alloc context (tensors placed in backend buffers)
// and in a host context (ground truth computed with ggml.c alone); the node
// order of both graphs is the same.

#define EU_MAX_LAYER 4

struct eu_mlp {
    int n_embd, n_ff, n_vocab, n_layer;
    struct wsp_ggml_tensor * ln_g[EU_MAX_LAYER];
    struct wsp_ggml_tensor * w1[EU_MAX_LAYER];
    struct wsp_ggml_tensor * b1[EU_MAX_LAYER];
    struct wsp_ggml_tensor * w2[EU_MAX_LAYER];
    struct wsp_ggml_tensor * b2[EU_MAX_LAYER];
    struct wsp_ggml_tensor * wout;
};

// Create the weight tensors in ctx (no data yet for a no_alloc ctx).
static EU_UNUSED void eu_mlp_new(struct eu_mlp * m, struct wsp_ggml_context * ctx, int n_embd, int n_ff, int n_vocab, int n_layer) {
    CHECK(n_layer <= EU_MAX_LAYER);
    m->n_embd = n_embd;
    m->n_ff = n_ff;
    m->n_vocab = n_vocab;
    m->n_layer = n_layer;
    for (int l = 0; l < n_layer; l++) {
        m->ln_g[l] = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n_embd);
        m->w1[l] = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, n_embd, n_ff);
        m->b1[l] = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n_ff);
        m->w2[l] = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, n_ff, n_embd);
        m->b2[l] = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n_embd);
        wsp_ggml_format_name(m->ln_g[l], "ln_g%d", l);
        wsp_ggml_format_name(m->w1[l], "w1_%d", l);
        wsp_ggml_format_name(m->b1[l], "b1_%d", l);
        wsp_ggml_format_name(m->w2[l], "w2_%d", l);
        wsp_ggml_format_name(m->b2[l], "b2_%d", l);
    }
    m->wout = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, n_embd, n_vocab);
    wsp_ggml_set_name(m->wout, "wout");
}

// The weights in fill order (same order for every placement).
static EU_UNUSED int eu_mlp_weights(const struct eu_mlp * m, struct wsp_ggml_tensor ** out) {
    int n = 0;
    for (int l = 0; l < m->n_layer; l++) {
        out[n++] = m->ln_g[l];
        out[n++] = m->w1[l];
        out[n++] = m->b1[l];
        out[n++] = m->w2[l];
        out[n++] = m->b2[l];
    }
    out[n++] = m->wout;
    return n;
}

static EU_UNUSED float eu_weight_scale(const struct wsp_ggml_tensor * t) {
    return t->ne[1] > 1 ? 0.25f : 0.5f;
}

// Allocate every weight in a store (stores[i] for the i-th weight in fill
// order, or `dflt` where stores is NULL or stores[i] is NULL) and fill them.
static EU_UNUSED void eu_mlp_put(struct eu_mlp * m, struct su_store * dflt, struct su_store * const * stores, uint64_t seed) {
    struct wsp_ggml_tensor * w[6 * EU_MAX_LAYER + 1];
    int n = eu_mlp_weights(m, w);
    struct lcg r = lcg_new(seed);
    for (int i = 0; i < n; i++) {
        struct su_store * s = (stores != NULL && stores[i] != NULL) ? stores[i] : dflt;
        su_store_put(s, w[i], &r, eu_weight_scale(w[i]));
    }
}

// Fill the weights of a host-context MLP with the same values.
static EU_UNUSED void eu_mlp_put_host(struct eu_mlp * m, uint64_t seed) {
    struct wsp_ggml_tensor * w[6 * EU_MAX_LAYER + 1];
    int n = eu_mlp_weights(m, w);
    struct lcg r = lcg_new(seed);
    for (int i = 0; i < n; i++) {
        su_fill_host(w[i], &r, eu_weight_scale(w[i]));
    }
}

static EU_UNUSED struct wsp_ggml_tensor * eu_mlp_build(struct wsp_ggml_context * ctx, const struct eu_mlp * m, struct wsp_ggml_tensor * x) {
    int64_t n_tok = x->ne[1];
    for (int l = 0; l < m->n_layer; l++) {
        struct wsp_ggml_tensor * h = wsp_ggml_norm(ctx, x, 1e-5f);
        wsp_ggml_format_name(h, "norm%d", l);
        h = wsp_ggml_mul(ctx, h, m->ln_g[l]);
        wsp_ggml_format_name(h, "mul%d", l);
        h = wsp_ggml_mul_mat(ctx, m->w1[l], h);
        wsp_ggml_format_name(h, "up%d", l);
        h = wsp_ggml_add(ctx, h, m->b1[l]);
        wsp_ggml_format_name(h, "upb%d", l);
        h = wsp_ggml_gelu(ctx, h);
        wsp_ggml_format_name(h, "gelu%d", l);
        h = wsp_ggml_reshape_2d(ctx, h, m->n_ff, n_tok);
        wsp_ggml_format_name(h, "resh%d", l);
        h = wsp_ggml_mul_mat(ctx, m->w2[l], h);
        wsp_ggml_format_name(h, "down%d", l);
        h = wsp_ggml_add(ctx, h, m->b2[l]);
        wsp_ggml_format_name(h, "downb%d", l);
        x = wsp_ggml_add(ctx, x, h);
        wsp_ggml_format_name(x, "res%d", l);
    }
    struct wsp_ggml_tensor * logits = wsp_ggml_mul_mat(ctx, m->wout, x);
    wsp_ggml_set_name(logits, "logits");
    struct wsp_ggml_tensor * t = wsp_ggml_transpose(ctx, logits);
    wsp_ggml_set_name(t, "logits_t");
    t = wsp_ggml_cont(ctx, t);
    wsp_ggml_set_name(t, "logits_tc");
    t = wsp_ggml_soft_max(ctx, t);
    wsp_ggml_set_name(t, "probs");
    return t;
}

// Ground truth: the same MLP on host memory, computed by ggml.c. Holds its
// own context; free with eu_ref_free.
struct eu_ref {
    struct wsp_ggml_context * ctx;
    struct wsp_ggml_cgraph * graph;
    struct wsp_ggml_tensor * x;
    struct wsp_ggml_tensor * out;
};

static EU_UNUSED struct eu_ref eu_ref_new(int n_embd, int n_ff, int n_vocab, int n_layer, uint64_t weight_seed,
                                          int n_tok, uint64_t input_seed) {
    struct eu_ref r;
    r.ctx = su_host_ctx(16 << 20);
    struct eu_mlp m;
    eu_mlp_new(&m, r.ctx, n_embd, n_ff, n_vocab, n_layer);
    eu_mlp_put_host(&m, weight_seed);
    r.x = wsp_ggml_new_tensor_2d(r.ctx, WSP_GGML_TYPE_F32, n_embd, n_tok);
    wsp_ggml_set_name(r.x, "x");
    struct lcg li = lcg_new(input_seed);
    su_fill_host(r.x, &li, 2.0f);
    r.graph = wsp_ggml_new_graph(r.ctx);
    r.out = eu_mlp_build(r.ctx, &m, r.x);
    wsp_ggml_build_forward_expand(r.graph, r.out);
    su_ref_compute(r.graph, 1);
    return r;
}

static EU_UNUSED void eu_ref_free(struct eu_ref * r) {
    wsp_ggml_free(r->ctx);
    r->ctx = NULL;
}

// Build the MLP graph in a fresh no_alloc context over the input x (already
// in a backend buffer). *ctx_out receives the context to free.
static EU_UNUSED struct wsp_ggml_cgraph * eu_mlp_graph(const struct eu_mlp * m, struct wsp_ggml_tensor * x,
                                                       struct wsp_ggml_context ** ctx_out, struct wsp_ggml_tensor ** out) {
    struct wsp_ggml_context * ctx = su_graph_ctx(64 + 16 * (size_t)m->n_layer, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    struct wsp_ggml_tensor * o = eu_mlp_build(ctx, m, x);
    wsp_ggml_build_forward_expand(g, o);
    *ctx_out = ctx;
    if (out != NULL) {
        *out = o;
    }
    return g;
}

// ---------------------------------------------------------------------------
// after a compute: every non-view node of `g` was computed by a backend whose
// supports_op accepts it, into memory of that backend (each exception
// printed as a "~ " line); false if any was not.

static EU_UNUSED bool eu_placed_where_supported(wsp_ggml_backend_sched_t sched, struct wsp_ggml_cgraph * g) {
    bool ok = true;
    for (int i = 0; i < g->n_nodes; i++) {
        struct wsp_ggml_tensor * n = g->nodes[i];
        if (eu_is_view_op(n->op)) {
            continue;
        }
        wsp_ggml_backend_t assigned = wsp_ggml_backend_sched_get_tensor_backend(sched, n);
        wsp_ggml_backend_t memory = wsp_ggml_get_backend(n);
        if (assigned != memory || !wsp_ggml_backend_supports_op(assigned, n)) {
            printf("~ node %s (%s) computed by %s into memory of %s\n", n->name, wsp_ggml_op_name(n->op), eu_bname(assigned),
                   eu_bname(memory));
            ok = false;
        }
    }
    return ok;
}
