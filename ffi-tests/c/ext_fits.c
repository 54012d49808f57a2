// Ours-only test: a compute never fails inside ggml-alloc, and memory decides
// where views and in-place ops run. Every output is compared bit
// for bit with the same graph computed by ggml.c alone.
//
// The original cannot run these programs: it has no supports_op, ignores
// set_node_backend, and a graph that needs more memory than its measure
// graph makes ggml-alloc exit ("not enough space in the buffer").
#include "ext_util.h"

#define N 16
#define M 4

static const int REJECT_CPY[] = { WSP_GGML_OP_CPY, -1 };
static const int REJECT_MUL_MAT[] = { WSP_GGML_OP_MUL_MAT, -1 };

struct env {
    wsp_ggml_backend_t b[2];
    struct su_store st[2];
    struct wsp_ggml_context * wctx;
    struct wsp_ggml_tensor * w[2]; // [N, N], w[k] on b[k]
    float xdata[N * M];
};

static void env_init(struct env * e, wsp_ggml_backend_t b0, wsp_ggml_backend_t b1) {
    e->b[0] = b0;
    e->b[1] = b1;
    struct lcg r = lcg_new(7);
    e->wctx = make_ctx(4, false, true, 0);
    for (int k = 0; k < 2; k++) {
        su_store_init(&e->st[k], e->b[k], 1 << 14);
        e->w[k] = wsp_ggml_new_tensor_2d(e->wctx, WSP_GGML_TYPE_F32, N, N);
        su_store_put(&e->st[k], e->w[k], &r, 0.25f);
    }
    lcg_fill_f32(&r, e->xdata, N * M, 1.0f);
}

static void env_free(struct env * e) {
    wsp_ggml_free(e->wctx);
    for (int k = 0; k < 2; k++) {
        su_store_free(&e->st[k]);
        wsp_ggml_backend_free(e->b[k]);
    }
}

// layers x: h = gelu_inplace(w0 @ h); v = view of h's first half; c = cont(v);
// cp = cpy(transpose(c), fresh); h = w1 @ (h + scale(...)) ... every layer has
// views, an in-place op and a copy into a fresh tensor.
static struct wsp_ggml_tensor * build(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * const w[2],
                                      struct wsp_ggml_tensor * x, int layers) {
    struct wsp_ggml_tensor * h = x;
    for (int l = 0; l < layers; l++) {
        struct wsp_ggml_tensor * t = wsp_ggml_mul_mat(ctx, w[l % 2], h);            // [N, M]
        t = wsp_ggml_gelu_inplace(ctx, t);
        struct wsp_ggml_tensor * v = wsp_ggml_view_2d(ctx, t, N / 2, M, t->nb[1], 0);  // [N/2, M]
        struct wsp_ggml_tensor * c = wsp_ggml_cont(ctx, v);
        struct wsp_ggml_tensor * fresh = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, M, N / 2);
        struct wsp_ggml_tensor * cp = wsp_ggml_cpy(ctx, wsp_ggml_transpose(ctx, c), fresh); // [M, N/2]
        struct wsp_ggml_tensor * back = wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, cp));   // [N/2, M]
        struct wsp_ggml_tensor * s = wsp_ggml_scale_inplace(ctx, wsp_ggml_add(ctx, back, c), wsp_ggml_new_f32(ctx, 0.5f));
        h = wsp_ggml_add(ctx, t, wsp_ggml_repeat(ctx, s, t));                           // [N, M]
    }
    return h;
}

// ggml.c alone on host copies of the weights and input.
struct ref {
    struct wsp_ggml_context * ctx;
    struct wsp_ggml_tensor * out;
};

static struct ref ref_compute(const struct env * e, int layers) {
    struct ref r;
    r.ctx = su_host_ctx(16 << 20);
    struct wsp_ggml_tensor * w[2];
    for (int k = 0; k < 2; k++) {
        w[k] = wsp_ggml_new_tensor_2d(r.ctx, WSP_GGML_TYPE_F32, N, N);
        wsp_ggml_backend_tensor_get(e->w[k], w[k]->data, 0, wsp_ggml_nbytes(w[k]));
    }
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(r.ctx, WSP_GGML_TYPE_F32, N, M);
    memcpy(x->data, e->xdata, sizeof(e->xdata));
    r.out = build(r.ctx, w, x, layers);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(r.ctx);
    wsp_ggml_build_forward_expand(g, r.out);
    su_ref_compute(g, 1);
    return r;
}

// A scheduler graph: the input allocated through sched_get_tallocr (on
// backend `in`), or measured without memory when `sched` has not measured yet.
struct built {
    struct wsp_ggml_context * ctx;
    struct wsp_ggml_cgraph * g;
    struct wsp_ggml_tensor * x;
    struct wsp_ggml_tensor * out;
};

static struct built sched_graph(const struct env * e, wsp_ggml_backend_sched_t sched, wsp_ggml_backend_t in,
                                int layers, bool alloc_input) {
    struct built b;
    b.ctx = su_graph_ctx(32 * (size_t)layers + 16, WSP_GGML_DEFAULT_GRAPH_SIZE);
    b.x = wsp_ggml_new_tensor_2d(b.ctx, WSP_GGML_TYPE_F32, N, M);
    wsp_ggml_set_name(b.x, "x");
    b.out = build(b.ctx, e->w, b.x, layers);
    b.g = wsp_ggml_new_graph(b.ctx);
    wsp_ggml_build_forward_expand(b.g, b.out);
    wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, in), b.x);
    if (alloc_input) {
        wsp_ggml_backend_tensor_set(b.x, e->xdata, 0, sizeof(e->xdata));
    }
    return b;
}

// A scheduler over e's two backends, measured with a `layers` graph whose
// input is allocated on backend `in` (without data).
static wsp_ggml_backend_sched_t measured_sched(const struct env * e, wsp_ggml_backend_t in, int layers) {
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new((wsp_ggml_backend_t *)e->b, 2);
    struct built m = sched_graph(e, sched, in, layers, false);
    wsp_ggml_backend_sched_init_measure(sched, m.g);
    wsp_ggml_free(m.ctx);
    return sched;
}

static bool on_own_memory(wsp_ggml_backend_sched_t sched, const struct wsp_ggml_cgraph * g) {
    // every node that works in another's memory runs where that memory is
    for (int i = 0; i < g->n_nodes; i++) {
        struct wsp_ggml_tensor * t = g->nodes[i];
        if (t->view_src == NULL) {
            continue;
        }
        wsp_ggml_backend_t mine = wsp_ggml_backend_sched_get_tensor_backend(sched, t);
        wsp_ggml_backend_t owner = wsp_ggml_backend_sched_get_tensor_backend(sched, t->view_src);
        if (owner == NULL) {
            owner = wsp_ggml_get_backend(t->view_src);
        }
        if (mine != owner) {
            printf("~ %s on %s, its memory (%s) on %s\n", t->name, eu_bname(mine), t->view_src->name, eu_bname(owner));
            return false;
        }
    }
    return true;
}

// 1. A graph larger than its measure graph computes; the compute buffers grow,
// and the input allocated before the growth stays valid (memcheck: no access
// to freed memory).
static void part_larger_graph(void) {
    struct env e;
    env_init(&e, eu_tb("FIT_A", NULL), su_cpu_backend());
    wsp_ggml_backend_sched_t sched = measured_sched(&e, e.b[1], 1);
    size_t before = wsp_ggml_backend_sched_get_buffer_size(sched, e.b[1]);
    bool ok = true;
    for (int layers = 2; layers <= 8; layers += 3) {
        struct built big = sched_graph(&e, sched, e.b[1], layers, true);
        wsp_ggml_backend_sched_graph_compute(sched, big.g);
        struct ref r = ref_compute(&e, layers);
        float * x = (float *)su_read(big.x);
        // ggml-alloc may reuse an input's memory once consumed; after the
        // first compute, which grows the buffer, it lives in the retired one
        bool same_out = su_same(big.out, r.out), same_in = layers > 2 || memcmp(x, e.xdata, sizeof(e.xdata)) == 0;
        if (!same_out || !same_in) {
            printf("~ layers %d: output %s, input %s\n", layers, same_out ? "same" : "differs", same_in ? "same" : "differs");
        }
        ok = ok && same_out && same_in;
        free(x);
        wsp_ggml_free(r.ctx);
        wsp_ggml_free(big.ctx);
    }
    size_t after = wsp_ggml_backend_sched_get_buffer_size(sched, e.b[1]);
    EU_EXPECT("fits_larger_graph", ok, "output or input differs");
    EU_EXPECT("fits_larger_graph_grew", after > before, "cpu buffer %zu -> %zu", before, after);
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// 2. set_node_backend after init_measure on every node, alternating backends:
// views and in-place nodes stay with their memory, the rest moves (and needs
// memory the measure did not see); the output is unchanged.
static void part_user_assignments(void) {
    struct env e;
    env_init(&e, eu_tb("FIT_A", NULL), su_cpu_backend());
    wsp_ggml_backend_sched_t sched = measured_sched(&e, e.b[1], 3);
    struct ref r = ref_compute(&e, 3);
    bool ok = true, memory = true;
    for (int round = 0; round < 4; round++) {
        struct built b = sched_graph(&e, sched, e.b[1], 3, true);
        for (int i = 0; i < b.g->n_nodes; i++) {
            wsp_ggml_backend_sched_set_node_backend(sched, b.g->nodes[i], e.b[(i + round) % 2]);
        }
        wsp_ggml_backend_sched_graph_compute(sched, b.g);
        ok = ok && su_same(b.out, r.out);
        memory = memory && on_own_memory(sched, b.g);
        wsp_ggml_free(b.ctx);
    }
    EU_EXPECT("fits_user_assignments", ok, "output differs");
    EU_EXPECT("fits_views_and_inplace_follow_memory", memory, "a node runs away from its memory");
    wsp_ggml_free(r.ctx);
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// 3. supports_op answers change after the measure: the rejected nodes move
// to the CPU, whose compute buffer was measured without them.
static void part_supports_moves(void) {
    struct env e;
    env_init(&e, xb_new("FIT_X", NULL, -1, NULL), su_cpu_backend());
    // the input lives on FIT_X: with everything supported, all runs there
    wsp_ggml_backend_sched_t sched = measured_sched(&e, e.b[0], 3);
    size_t before = wsp_ggml_backend_sched_get_buffer_size(sched, e.b[1]);
    struct test_backend_stats * c = test_backend_stats(e.b[0]);
    static const int rejected[] = { WSP_GGML_OP_MUL_MAT, WSP_GGML_OP_CONT };
    test_backend_set_rejected(e.b[0], rejected, 2);
    struct ref r = ref_compute(&e, 3);
    struct built b = sched_graph(&e, sched, e.b[0], 3, true);
    wsp_ggml_backend_sched_graph_compute(sched, b.g);
    size_t after = wsp_ggml_backend_sched_get_buffer_size(sched, e.b[1]);
    EU_EXPECT("fits_supports_moves", su_same(b.out, r.out) && c->rejected_computed == 0 && on_own_memory(sched, b.g),
              "output differs, or %ld rejected nodes computed", c->rejected_computed);
    EU_EXPECT("fits_supports_moves_grew", after > before, "cpu buffer %zu -> %zu", before, after);
    wsp_ggml_free(b.ctx);
    wsp_ggml_free(r.ctx);
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// 4. cpy(transpose(w0), fresh) where w0 lives on a backend that rejects CPY:
// the destination has no memory yet, so the copy (and its destination) move.
static void part_cpy_fresh(void) {
    struct env e;
    env_init(&e, eu_tb("FIT_C", REJECT_CPY), su_cpu_backend());
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(e.b, 2);
    bool ok = true;
    for (int k = 0; k < 3; k++) {
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_tensor * fresh = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, N, N);
        struct wsp_ggml_tensor * cp = wsp_ggml_cpy(ctx, wsp_ggml_transpose(ctx, e.w[0]), fresh);
        struct wsp_ggml_tensor * out = wsp_ggml_scale(ctx, cp, wsp_ggml_new_f32(ctx, 2.0f));
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, out);
        if (k == 0) {
            wsp_ggml_backend_sched_init_measure(sched, g);
        } else {
            wsp_ggml_backend_sched_graph_compute(sched, g);
            float * w = (float *)su_read(e.w[0]);
            float * o = (float *)su_read(out);
            for (int i = 0; i < N; i++) {
                for (int j = 0; j < N; j++) {
                    ok = ok && o[i * N + j] == 2.0f * w[j * N + i];
                }
            }
            ok = ok && wsp_ggml_backend_sched_get_tensor_backend(sched, cp) == e.b[1];
            free(w);
            free(o);
        }
        wsp_ggml_free(ctx);
    }
    EU_EXPECT("fits_cpy_into_fresh_past_rejecting", ok, "wrong output or copy not moved");
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// 5. set_node_backend onto a backend that rejects the node: not applied (the
// original ignored every assignment), the node stays where it can run.
static void part_rejected_assignment(void) {
    struct env e;
    env_init(&e, eu_tb("FIT_R", REJECT_MUL_MAT), su_cpu_backend());
    wsp_ggml_backend_sched_t sched = measured_sched(&e, e.b[1], 2);
    struct ref r = ref_compute(&e, 2);
    struct built b = sched_graph(&e, sched, e.b[1], 2, true);
    bool placed = true;
    for (int i = 0; i < b.g->n_nodes; i++) {
        wsp_ggml_backend_sched_set_node_backend(sched, b.g->nodes[i], e.b[0]);
    }
    wsp_ggml_backend_sched_graph_compute(sched, b.g);
    for (int i = 0; i < b.g->n_nodes; i++) {
        if (b.g->nodes[i]->op == WSP_GGML_OP_MUL_MAT) {
            placed = placed && wsp_ggml_backend_sched_get_tensor_backend(sched, b.g->nodes[i]) == e.b[1];
        }
    }
    EU_EXPECT("fits_rejected_assignment_not_applied", placed && su_same(b.out, r.out), "mul_mat on FIT_R or wrong output");
    wsp_ggml_free(b.ctx);
    wsp_ggml_free(r.ctx);
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// 6. An input in plain host memory (a context with its own data, no buffer)
// used on both backends, directly and through a view: the splits copy it
// from that memory (the original stopped: "input has no buffer").
static struct wsp_ggml_tensor * build_host(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * const w[2],
                                           struct wsp_ggml_tensor * xh) {
    struct wsp_ggml_tensor * v = wsp_ggml_view_2d(ctx, xh, N, M / 2, xh->nb[1], xh->nb[1] * (M / 2));
    struct wsp_ggml_tensor * a = wsp_ggml_mul_mat(ctx, w[0], xh);
    struct wsp_ggml_tensor * b = wsp_ggml_mul_mat(ctx, w[1], xh);
    struct wsp_ggml_tensor * c = wsp_ggml_mul_mat(ctx, w[1], v);
    return wsp_ggml_add(ctx, wsp_ggml_add(ctx, a, b), wsp_ggml_repeat(ctx, c, a));
}

static void part_host_input(void) {
    struct env e;
    env_init(&e, eu_tb("FIT_H", NULL), su_cpu_backend());
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(e.b, 2);
    struct ref r;
    r.ctx = su_host_ctx(1 << 20);
    struct wsp_ggml_tensor * rw[2];
    for (int k = 0; k < 2; k++) {
        rw[k] = wsp_ggml_new_tensor_2d(r.ctx, WSP_GGML_TYPE_F32, N, N);
        wsp_ggml_backend_tensor_get(e.w[k], rw[k]->data, 0, wsp_ggml_nbytes(rw[k]));
    }
    struct wsp_ggml_tensor * rx = wsp_ggml_new_tensor_2d(r.ctx, WSP_GGML_TYPE_F32, N, M);
    memcpy(rx->data, e.xdata, sizeof(e.xdata));
    r.out = build_host(r.ctx, rw, rx);
    struct wsp_ggml_cgraph * rg = wsp_ggml_new_graph(r.ctx);
    wsp_ggml_build_forward_expand(rg, r.out);
    su_ref_compute(rg, 1);
    struct wsp_ggml_context * hctx = su_host_ctx(1 << 16);
    struct wsp_ggml_tensor * xh = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, N, M);
    memcpy(xh->data, e.xdata, sizeof(e.xdata));
    bool ok = true;
    for (int k = 0; k < 3; k++) {
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_tensor * out = build_host(ctx, e.w, xh);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, out);
        if (k == 0) {
            wsp_ggml_backend_sched_init_measure(sched, g);
        } else {
            wsp_ggml_backend_sched_graph_compute(sched, g);
            ok = ok && su_same(out, r.out) && wsp_ggml_backend_sched_get_n_splits(sched) > 1;
        }
        wsp_ggml_free(ctx);
    }
    EU_EXPECT("fits_input_in_host_memory", ok, "output differs from ggml.c alone, or one split only");
    wsp_ggml_free(hctx);
    wsp_ggml_free(r.ctx);
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// 7. The backend cannot allocate a larger compute buffer: the compute falls
// back to the assignment without set_node_backend (as the original computes
// it), and its buffer stays as measured.
static void part_growth_fails(void) {
    struct env e;
    env_init(&e, xb_new("FIT_G", NULL, -1, NULL), su_cpu_backend());
    wsp_ggml_backend_sched_t sched = measured_sched(&e, e.b[1], 3);
    size_t before = wsp_ggml_backend_sched_get_buffer_size(sched, e.b[0]);
    test_backend_set_max_alloc(e.b[0], 1);
    struct ref r = ref_compute(&e, 3);
    struct built b = sched_graph(&e, sched, e.b[1], 3, true);
    for (int i = 0; i < b.g->n_nodes; i++) {
        wsp_ggml_backend_sched_set_node_backend(sched, b.g->nodes[i], e.b[0]);
    }
    wsp_ggml_backend_sched_graph_compute(sched, b.g);
    // the nodes whose memory is not decided by a source stay where they ran
    // at the measure (the input is on the CPU: most of the graph runs there)
    int on_cpu = 0;
    for (int i = 0; i < b.g->n_nodes; i++) {
        on_cpu += wsp_ggml_backend_sched_get_tensor_backend(sched, b.g->nodes[i]) == e.b[1];
    }
    size_t after = wsp_ggml_backend_sched_get_buffer_size(sched, e.b[0]);
    EU_EXPECT("fits_growth_fails_falls_back", su_same(b.out, r.out) && on_cpu > 0 && after == before,
              "output differs, %d nodes on the CPU, FIT_G buffer %zu -> %zu", on_cpu, before, after);
    wsp_ggml_free(b.ctx);
    wsp_ggml_free(r.ctx);
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// 8. The caller allocates, through sched_get_tallocr, a tensor the graph does
// not use (scratch space) before each compute: the compute buffer was not
// measured for it. The graph still fits, and the scratch keeps its bytes.
static void part_caller_scratch(void) {
    struct env e;
    env_init(&e, eu_tb("FIT_S", NULL), su_cpu_backend());
    wsp_ggml_backend_sched_t sched = measured_sched(&e, e.b[1], 2);
    struct ref r = ref_compute(&e, 2);
    bool ok = true;
    for (int k = 0; k < 3; k++) {
        struct built b = sched_graph(&e, sched, e.b[1], 2, true);
        struct wsp_ggml_context * sctx = make_ctx(1, false, true, 0);
        // a quarter of the buffer: room the caller has, the graph then lacks
        size_t cap = wsp_ggml_backend_sched_get_buffer_size(sched, e.b[1]);
        struct wsp_ggml_tensor * scratch = wsp_ggml_new_tensor_1d(sctx, WSP_GGML_TYPE_F32, (int64_t)(cap / 16));
        wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, e.b[1]), scratch);
        float * pattern = (float *)malloc(wsp_ggml_nbytes(scratch));
        CHECK(pattern != NULL);
        for (int64_t i = 0; i < scratch->ne[0]; i++) {
            pattern[i] = (float)(i % 251) - 125.0f;
        }
        wsp_ggml_backend_tensor_set(scratch, pattern, 0, wsp_ggml_nbytes(scratch));
        wsp_ggml_backend_sched_graph_compute(sched, b.g);
        float * after = (float *)su_read(scratch);
        bool same_out = su_same(b.out, r.out), kept = memcmp(after, pattern, wsp_ggml_nbytes(scratch)) == 0;
        if (!same_out || !kept) {
            printf("~ compute %d: output %s, scratch %s\n", k, same_out ? "same" : "differs", kept ? "kept" : "overwritten");
        }
        ok = ok && same_out && kept;
        free(after);
        free(pattern);
        wsp_ggml_free(sctx);
        wsp_ggml_free(b.ctx);
    }
    EU_EXPECT("fits_caller_scratch_in_compute_buffer", ok, "output differs or the scratch was overwritten");
    wsp_ggml_free(r.ctx);
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// ext_fits [part]: all parts, or the one named (to check each on its own
// against another library).
int main(int argc, char ** argv) {
    const char * only = argc > 1 ? argv[1] : NULL;
#define PART(name) if (only == NULL || strcmp(only, #name) == 0) part_##name()
    PART(larger_graph);
    PART(user_assignments);
    PART(supports_moves);
    PART(cpy_fresh);
    PART(rejected_assignment);
    PART(host_input);
    PART(growth_fails);
    PART(caller_scratch);
#undef PART
    return eu_finish();
}
