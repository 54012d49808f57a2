// Differential test: more graphs that look alike between computes.
//
// Companion of sched_reuse.c. Our scheduler reuses the last split when the
// next graph is the same (src/sched/reuse.rs says what it checks); the
// original splits every time, so any stale split shows up here as a
// difference in the test backends' graph logs or in the outputs. Graphs are
// built in one fixed memory block, so the same build sequence gives tensors
// at the same addresses. Three backends: TEST0, TEST1 (test backends, whose
// logs show every split they compute) and CPU. Steps:
//  - two: graphs A and B alternating in the block: same node count with
//    other wiring, other leafs, one node more, one leaf less (add(h, h)),
//    and a unary op swapped for another (same structure: reuse);
//  - view: graph views (no leaf list) of the first nodes of a graph;
//  - dst: a node the user places in a buffer of TEST1, then CPU, then none
//    (a location change on a node), computing the same tensor twice as
//    operands of one node on another backend;
//  - roam: a leaf made with view_tensor of a tensor that is in no list of
//    the graph, whose buffer moves to other backends (also freed and
//    replaced by a buffer of another backend);
//  - kv: a cpy into a cache first in the graph (its view source decides the
//    first split), cache on CPU or TEST0 alternately;
//  - shape: an input copy whose source changes shape while the split is
//    reused (the copy must follow);
//  - leafnode: a tensor that is a leaf in one build and a node in the next,
//    at the same address;
//  - dup: the same node twice in the node list;
//  - host: a view of plain host memory that no rule assigns (until its
//    consumer does); the host tensor then moves into a TEST1 buffer (a
//    location for a leaf that had none) and back;
//  - same: one graph object computed three times without rebuilding (the
//    tensors keep ggml-alloc's placements, in-place nodes their view_src),
//    then another one whose placements the user clears after each compute
//    (the view_src that ggml-alloc set for in-place nodes stays);
//  - inp: an input the user places in the scheduler's own compute buffer;
//  - remeasure: init_measure again, with another graph than the next one,
//    then with the graph just computed.
// Every output is also compared with plain ggml.c.
#include "sched_util.h"

#define N 16

struct model {
    struct wsp_ggml_tensor * w0_t0;  // [N, N] TEST0
    struct wsp_ggml_tensor * w1_t1;  // [N, N] TEST1
    struct wsp_ggml_tensor * w_cpu;  // [N, N] CPU
    struct wsp_ggml_tensor * b_t0;   // [N] TEST0
    struct wsp_ggml_tensor * b_cpu;  // [N] CPU
    struct wsp_ggml_tensor * kv_t0;  // [N, 4] TEST0
    struct wsp_ggml_tensor * kv_cpu; // [N, 4] CPU
    struct wsp_ggml_tensor * roam;   // [N, N] moves between backends; in graphs only through a view
    struct wsp_ggml_tensor * x;      // [N, 2] CPU input
    struct wsp_ggml_tensor * x_t0;   // [N, 2] TEST0 input
    struct wsp_ggml_tensor * x_t1;   // [N, 2] TEST1 input
    struct wsp_ggml_tensor * host;   // [N, 2] input in plain host memory (no backend buffer)
};

static struct model M;
static struct su_store st_t0, st_t1, st_cpu, st_dst_t1, st_dst_cpu, st_roam;
static wsp_ggml_backend_t g_t0, g_t1, g_cpu;
static wsp_ggml_backend_sched_t g_sched;
// Before the first init_measure the scheduler's allocators only measure.
static bool g_sched_measured;

// Where the "dst" family's node goes (set by the step, read by the builder).
static struct su_store * g_dst_store;
// A second output to print and compare (set by builders that have one).
static struct wsp_ggml_tensor * g_aux;

// ref: building the plain ggml.c ground truth (in a host context): no
// placement in backend buffers.
typedef struct wsp_ggml_tensor * (*builder)(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref);

// v: 0 base; 1 relu instead of gelu; 2 other weights and bias (same node
// count); 3 one node more; 4 add(h, h) instead of add(h, bias) (one leaf less).
static struct wsp_ggml_tensor * build_two(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    (void)ref;
    struct wsp_ggml_tensor * h = wsp_ggml_mul_mat(ctx, v == 2 ? M.w1_t1 : M.w0_t0, M.x);
    h = v == 4 ? wsp_ggml_add(ctx, h, h) : wsp_ggml_add(ctx, h, v == 2 ? M.b_cpu : M.b_t0);
    h = v == 1 ? wsp_ggml_relu(ctx, h) : wsp_ggml_gelu(ctx, h);
    if (v == 3) {
        h = wsp_ggml_gelu(ctx, h);
    }
    struct wsp_ggml_tensor * g2 = wsp_ggml_mul_mat(ctx, v == 2 ? M.w0_t0 : M.w1_t1, M.x_t1);
    struct wsp_ggml_tensor * out = wsp_ggml_soft_max(ctx, wsp_ggml_add(ctx, h, g2));
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

// s = h + h with h on CPU; s placed by the user in g_dst_store (or not).
static struct wsp_ggml_tensor * build_dst(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    (void)v;
    struct wsp_ggml_tensor * h = wsp_ggml_mul_mat(ctx, M.w_cpu, M.x);
    struct wsp_ggml_tensor * s = wsp_ggml_add(ctx, h, h);
    wsp_ggml_set_name(s, "s");
    if (!ref && g_dst_store != NULL) {
        wsp_ggml_allocr_reset(g_dst_store->alloc);
        wsp_ggml_allocr_alloc(g_dst_store->alloc, s);
        CHECK(s->buffer != NULL);
    }
    struct wsp_ggml_tensor * out = wsp_ggml_mul_mat(ctx, M.w0_t0, s);
    wsp_ggml_build_forward_expand(g, out);
    g_aux = s;
    return out;
}

// A leaf viewing a tensor that is in no list of the graph (M.roam, or for
// the measure graph a stand-in of the same shape on another backend).
static struct wsp_ggml_tensor * roam_src;
static struct wsp_ggml_tensor * build_roam(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    (void)v;
    (void)ref;
    struct wsp_ggml_tensor * w = roam_src != NULL ? roam_src : M.roam;
    struct wsp_ggml_tensor * V = wsp_ggml_view_tensor(ctx, w);
    struct wsp_ggml_tensor * y = wsp_ggml_gelu(ctx, M.x);
    struct wsp_ggml_tensor * out = wsp_ggml_soft_max(ctx, wsp_ggml_mul_mat(ctx, V, y));
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

// v: 0 cache on CPU, 1 cache on TEST0. The cpy is the graph's second node
// (after the view of the cache) and has a view source.
static struct wsp_ggml_tensor * build_kv(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    (void)ref;
    struct wsp_ggml_tensor * kv = v ? M.kv_t0 : M.kv_cpu;
    struct wsp_ggml_tensor * kvv = wsp_ggml_view_1d(ctx, kv, 2 * N, 0);
    struct wsp_ggml_tensor * c = wsp_ggml_cpy(ctx, M.x, kvv);
    wsp_ggml_build_forward_expand(g, c);
    struct wsp_ggml_tensor * m = wsp_ggml_mul_mat(ctx, M.w0_t0, M.x);
    struct wsp_ggml_tensor * out = wsp_ggml_add(ctx, m, wsp_ggml_reshape_2d(ctx, c, N, 2));
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

// v: rows (1..3) of a TEST1 tensor copied to CPU. No size decides anything,
// so the split is reused while the copy's shape changes.
static struct wsp_ggml_tensor * build_shape(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    (void)ref;
    struct wsp_ggml_tensor * p = wsp_ggml_gelu(ctx, wsp_ggml_view_2d(ctx, M.w1_t1, N, v, M.w1_t1->nb[1], 0));
    struct wsp_ggml_tensor * out = wsp_ggml_soft_max(ctx, wsp_ggml_mul_mat(ctx, M.w_cpu, p));
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

// v: 0 the first tensor is a leaf (view_tensor: op NONE), 1 a node (view op).
static struct wsp_ggml_tensor * build_leafnode(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    (void)ref;
    struct wsp_ggml_tensor * V = v ? wsp_ggml_view_2d(ctx, M.w0_t0, N, N, M.w0_t0->nb[1], 0) : wsp_ggml_view_tensor(ctx, M.w0_t0);
    struct wsp_ggml_tensor * out = wsp_ggml_soft_max(ctx, wsp_ggml_mul_mat(ctx, V, M.x));
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

// v: 1 the last node appears twice in the node list.
static struct wsp_ggml_tensor * build_dup(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    (void)ref;
    struct wsp_ggml_tensor * h = wsp_ggml_gelu(ctx, wsp_ggml_mul_mat(ctx, M.w0_t0, M.x_t0));
    struct wsp_ggml_tensor * out = wsp_ggml_mul_mat(ctx, M.w_cpu, h);
    wsp_ggml_build_forward_expand(g, out);
    if (v) {
        CHECK(g->n_nodes < g->size);
        g->nodes[g->n_nodes++] = out;
    }
    return out;
}

// A view of host memory: no location, no assigned source; its consumer
// assigns it (pass 3). The host tensor is also used directly, so it gets an
// allocator too.
static struct wsp_ggml_tensor * build_host(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    (void)v;
    (void)ref;
    struct wsp_ggml_tensor * V = wsp_ggml_view_2d(ctx, M.host, N, 2, M.host->nb[1], 0);
    struct wsp_ggml_tensor * n0 = wsp_ggml_add(ctx, V, M.x_t0);
    struct wsp_ggml_tensor * n1 = wsp_ggml_add(ctx, M.host, n0);
    struct wsp_ggml_tensor * out = wsp_ggml_gelu(ctx, n1);
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

// Two chains without any input copy: one on TEST0, one on CPU.
static struct wsp_ggml_tensor * build_pair(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    (void)v;
    (void)ref;
    struct wsp_ggml_tensor * a = wsp_ggml_add(ctx, wsp_ggml_gelu(ctx, wsp_ggml_mul_mat(ctx, M.w0_t0, M.x_t0)), M.b_t0);
    struct wsp_ggml_tensor * b = wsp_ggml_add(ctx, wsp_ggml_gelu(ctx, wsp_ggml_mul_mat(ctx, M.w_cpu, M.x)), M.b_cpu);
    wsp_ggml_build_forward_expand(g, a);
    wsp_ggml_build_forward_expand(g, b);
    g_aux = b;
    return a;
}

static uint64_t g_seed;

static void fill_inputs(uint64_t seed) {
    g_seed = seed;
    struct lcg r = lcg_new(seed);
    su_fill(M.x, &r, 1.0f);
    su_fill(M.x_t0, &r, 1.0f);
    su_fill(M.x_t1, &r, 1.0f);
    su_fill_host(M.host, &r, 1.0f);
}

// An input placed by the user in the scheduler's compute buffer (through
// sched_get_tallocr, as programs of that time did) of TEST1 (v 0) or CPU
// (v 1), every build.
static struct wsp_ggml_tensor * build_inp(struct wsp_ggml_context * ctx, struct wsp_ggml_cgraph * g, int v, bool ref) {
    struct wsp_ggml_tensor * inp = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, N, 2);
    wsp_ggml_set_name(inp, "inp");
    struct lcg r = lcg_new(g_seed + 1000);
    if (ref) {
        su_fill_host(inp, &r, 1.0f);
    } else {
        wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(g_sched, v ? g_cpu : g_t1), inp);
        CHECK(inp->data != NULL && inp->buffer != NULL);
        if (g_sched_measured) {
            su_fill(inp, &r, 1.0f);
        }
    }
    struct wsp_ggml_tensor * out = wsp_ggml_soft_max(ctx, wsp_ggml_mul_mat(ctx, M.w0_t0, wsp_ggml_gelu(ctx, inp)));
    wsp_ggml_build_forward_expand(g, out);
    return out;
}

// Ground truth: the same build in a host context, computed by ggml.c.
// Returns 1 if `out` (and g_aux, as `aux`) differ from it.
static int check_plain(const char * what, builder f, int v, const struct wsp_ggml_tensor * out,
                       const struct wsp_ggml_tensor * aux, int node_i) {
    struct wsp_ggml_context * hctx = su_host_ctx(4 << 20);
    struct wsp_ggml_cgraph * gr = wsp_ggml_new_graph(hctx);
    g_aux = NULL;
    struct wsp_ggml_tensor * outr = f(hctx, gr, v, true);
    struct wsp_ggml_tensor * auxr = g_aux;
    su_ref_compute(gr, 1);
    int same;
    if (node_i >= 0) {
        same = su_same(out, gr->nodes[node_i]);
    } else {
        same = su_same(out, outr) && (aux == NULL || su_same(aux, auxr));
    }
    printf("step %s matches_plain_ggml %d\n", what, same);
    wsp_ggml_free(hctx);
    g_aux = NULL;
    return same ? 0 : 1;
}

static void show(const char * what, const struct wsp_ggml_tensor * out, const struct wsp_ggml_tensor * aux) {
    printf("step %s: out on %s\n", what, su_backend_of(out));
    print_tensor(what, out, 6);
    if (aux != NULL) {
        printf("step %s: aux on %s\n", what, su_backend_of(aux));
        print_tensor(what, aux, 6);
    }
}

// Build in the fixed block, compute, print, compare.
static int step(const char * what, builder f, int v, uint64_t seed) {
    fill_inputs(seed);
    struct wsp_ggml_context * ctx = su_fixed_ctx();
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    g_aux = NULL;
    struct wsp_ggml_tensor * out = f(ctx, g, v, false);
    struct wsp_ggml_tensor * aux = g_aux;
    printf("step %s: n_nodes=%d n_leafs=%d\n", what, g->n_nodes, g->n_leafs);
    wsp_ggml_backend_sched_graph_compute(g_sched, g);
    show(what, out, aux);
    int fail = check_plain(what, f, v, out, aux, -1);
    wsp_ggml_free(ctx);
    return fail;
}

// Compute a view of nodes [0, n) of the graph (no leaf list).
static int step_view(const char * what, builder f, int v, int n, uint64_t seed) {
    fill_inputs(seed);
    struct wsp_ggml_context * ctx = su_fixed_ctx();
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    f(ctx, g, v, false);
    struct wsp_ggml_cgraph * gv = wsp_ggml_graph_view(ctx, g, 0, n);
    printf("step %s: view of %d of %d nodes\n", what, gv->n_nodes, g->n_nodes);
    wsp_ggml_backend_sched_graph_compute(g_sched, gv);
    show(what, gv->nodes[n - 1], NULL);
    int fail = check_plain(what, f, v, gv->nodes[n - 1], NULL, n - 1);
    wsp_ggml_free(ctx);
    return fail;
}

// One graph object computed several times, with new input data each time.
// `clear`: the user clears the nodes' placements after each compute (the
// nodes ggml-alloc made in-place keep their view_src).
static int step_same_object(const char * what, builder f, int times, uint64_t seed, bool clear) {
    struct wsp_ggml_context * ctx = su_fixed_ctx();
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    g_aux = NULL;
    struct wsp_ggml_tensor * out = f(ctx, g, 0, false);
    struct wsp_ggml_tensor * aux = g_aux;
    int fail = 0;
    for (int k = 0; k < times; k++) {
        char label[96];
        snprintf(label, sizeof(label), "%s #%d", what, k);
        fill_inputs(seed + (uint64_t)k);
        int n_view_src = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            n_view_src += g->nodes[i]->view_src != NULL;
        }
        printf("step %s: n_nodes=%d n_leafs=%d nodes_with_view_src=%d\n", label, g->n_nodes, g->n_leafs, n_view_src);
        wsp_ggml_backend_sched_graph_compute(g_sched, g);
        show(label, out, aux);
        fail += check_plain(label, f, 0, out, aux, -1);
        for (int i = 0; clear && i < g->n_nodes; i++) {
            g->nodes[i]->data = NULL;
            g->nodes[i]->buffer = NULL;
        }
    }
    wsp_ggml_free(ctx);
    return fail;
}

// The same tensor struct, moved to a buffer of another store.
static void move_to(struct wsp_ggml_tensor * t, struct su_store * s) {
    float * keep = (float *)su_read(t);
    t->data = NULL;
    t->buffer = NULL;
    wsp_ggml_allocr_alloc(s->alloc, t);
    CHECK(t->buffer != NULL);
    wsp_ggml_backend_tensor_set(t, keep, 0, wsp_ggml_nbytes(t));
    free(keep);
}

// init_measure with build_two(v) built in the fixed block.
static void remeasure(const char * what, int v) {
    struct wsp_ggml_context * ctx = su_fixed_ctx();
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    build_two(ctx, g, v, false);
    printf("%s: n_nodes=%d n_leafs=%d\n", what, g->n_nodes, g->n_leafs);
    wsp_ggml_backend_sched_init_measure(g_sched, g);
    wsp_ggml_free(ctx);
    su_print_sched_buffer(what, g_sched, g_t0);
    su_print_sched_buffer(what, g_sched, g_t1);
    su_print_sched_buffer(what, g_sched, g_cpu);
}

static void print_some_stats(wsp_ggml_backend_t b) {
    struct test_backend_stats * s = test_backend_stats(b);
    printf("stat %s graph_compute %ld\n", wsp_ggml_backend_name(b), s->calls[TB_GRAPH_COMPUTE]);
    printf("stat %s nodes_computed %ld\n", wsp_ggml_backend_name(b), s->nodes_computed);
}

int main(void) {
    g_t0 = su_test_backend("TEST0", 32, true, true, true);
    g_t1 = su_test_backend("TEST1", 64, true, false, true);
    g_cpu = su_cpu_backend();
    su_store_init(&st_t0, g_t0, 1 << 16);
    su_store_init(&st_t1, g_t1, 1 << 16);
    su_store_init(&st_cpu, g_cpu, 1 << 16);
    su_store_init(&st_dst_t1, g_t1, 1 << 12);
    su_store_init(&st_dst_cpu, g_cpu, 1 << 12);
    su_store_init(&st_roam, g_t0, 1 << 12);

    struct wsp_ggml_context * wctx = make_ctx(16, false, true, 0);
    struct lcg r = lcg_new(11);
    M.w0_t0 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
    M.w1_t1 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
    M.w_cpu = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
    M.b_t0 = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    M.b_cpu = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    M.kv_t0 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 4);
    M.kv_cpu = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 4);
    M.roam = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
    M.x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 2);
    M.x_t0 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 2);
    M.x_t1 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 2);
    wsp_ggml_set_name(M.w0_t0, "w0");
    wsp_ggml_set_name(M.w1_t1, "w1");
    wsp_ggml_set_name(M.w_cpu, "wc");
    wsp_ggml_set_name(M.b_t0, "b0");
    wsp_ggml_set_name(M.b_cpu, "bc");
    wsp_ggml_set_name(M.kv_t0, "kv0");
    wsp_ggml_set_name(M.kv_cpu, "kvc");
    wsp_ggml_set_name(M.roam, "roam");
    wsp_ggml_set_name(M.x, "x");
    wsp_ggml_set_name(M.x_t0, "x0");
    wsp_ggml_set_name(M.x_t1, "x1");
    su_store_put(&st_t0, M.w0_t0, &r, 0.3f);
    su_store_put(&st_t1, M.w1_t1, &r, 0.3f);
    su_store_put(&st_cpu, M.w_cpu, &r, 0.3f);
    su_store_put(&st_t0, M.b_t0, &r, 0.1f);
    su_store_put(&st_cpu, M.b_cpu, &r, 0.1f);
    su_store_put(&st_t0, M.kv_t0, &r, 0.5f);
    su_store_put(&st_cpu, M.kv_cpu, &r, 0.5f);
    su_store_put(&st_roam, M.roam, &r, 0.3f);
    wsp_ggml_allocr_alloc(st_cpu.alloc, M.x);
    wsp_ggml_allocr_alloc(st_t0.alloc, M.x_t0);
    wsp_ggml_allocr_alloc(st_t1.alloc, M.x_t1);
    struct wsp_ggml_context * host_ctx = su_host_ctx(1 << 16);
    M.host = wsp_ggml_new_tensor_2d(host_ctx, WSP_GGML_TYPE_F32, N, 2);
    wsp_ggml_set_name(M.host, "host");

    wsp_ggml_backend_t backends[3] = { g_t0, g_t1, g_cpu };
    g_sched = wsp_ggml_backend_sched_new(backends, 3);
    CHECK(g_sched != NULL);

    {
        // Measure a graph holding every variant (twice), so that the compute
        // buffers are large enough whichever backend a step puts nodes on.
        struct wsp_ggml_context * ctx = su_graph_ctx(2048, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        for (int rep = 0; rep < 2; rep++) {
            for (int v = 0; v <= 4; v++) {
                build_two(ctx, g, v, false);
            }
            g_dst_store = NULL;
            build_dst(ctx, g, 0, false);
            struct wsp_ggml_tensor * stand_ins[3] = { NULL, M.w1_t1, M.w_cpu };
            for (int k = 0; k < 3; k++) {
                roam_src = stand_ins[k];
                build_roam(ctx, g, 0, false);
            }
            roam_src = NULL;
            build_kv(ctx, g, 0, false);
            build_kv(ctx, g, 1, false);
            for (int v = 1; v <= 3; v++) {
                build_shape(ctx, g, v, false);
            }
            build_leafnode(ctx, g, 0, false);
            build_leafnode(ctx, g, 1, false);
            build_dup(ctx, g, 0, false);
            build_host(ctx, g, 0, false);
            build_pair(ctx, g, 0, false);
            build_inp(ctx, g, 0, false);
            build_inp(ctx, g, 1, false);
        }
        printf("measure: n_nodes=%d n_leafs=%d\n", g->n_nodes, g->n_leafs);
        wsp_ggml_backend_sched_init_measure(g_sched, g);
        wsp_ggml_free(ctx);
        g_sched_measured = true;
    }
    g_aux = NULL;

    int n_fail = 0;
    // A and B alternating in the same block
    n_fail += step("two base", build_two, 0, 1);
    n_fail += step("two base again", build_two, 0, 2);
    n_fail += step("two rewired, same node count", build_two, 2, 3);
    n_fail += step("two base after rewired", build_two, 0, 4);
    n_fail += step("two rewired again", build_two, 2, 5);
    n_fail += step("two rewired unchanged", build_two, 2, 6);
    n_fail += step("two one node more", build_two, 3, 7);
    n_fail += step("two base after longer", build_two, 0, 8);
    n_fail += step("two relu instead of gelu", build_two, 1, 9);
    n_fail += step("two gelu again", build_two, 0, 10);
    n_fail += step("two add(h, h), one leaf less", build_two, 4, 11);
    n_fail += step("two add(h, h) unchanged", build_two, 4, 12);
    n_fail += step("two base after add(h, h)", build_two, 0, 13);

    // graph views of the first nodes (no leafs listed)
    n_fail += step_view("view 4", build_two, 0, 4, 14);
    n_fail += step_view("view 4 again", build_two, 0, 4, 15);
    n_fail += step_view("view 3", build_two, 0, 3, 16);
    n_fail += step_view("view 4 after 3", build_two, 0, 4, 17);
    // a weight that the view only knows as a source moves, and back
    move_to(M.w1_t1, &st_cpu);
    n_fail += step_view("view 4, w1 on CPU", build_two, 0, 4, 61);
    n_fail += step_view("view 4, w1 on CPU again", build_two, 0, 4, 62);
    move_to(M.w1_t1, &st_t1);
    n_fail += step_view("view 4, w1 back on TEST1", build_two, 0, 4, 63);
    n_fail += step("two full after views", build_two, 0, 18);

    // a node placed by the user, then moved, then not placed
    g_dst_store = NULL;
    n_fail += step("dst none", build_dst, 0, 19);
    g_dst_store = &st_dst_t1;
    n_fail += step("dst on TEST1", build_dst, 0, 20);
    n_fail += step("dst on TEST1 again", build_dst, 0, 21);
    g_dst_store = &st_dst_cpu;
    n_fail += step("dst on CPU", build_dst, 0, 22);
    g_dst_store = NULL;
    n_fail += step("dst none again", build_dst, 0, 23);
    n_fail += step("dst none unchanged", build_dst, 0, 24);
    g_dst_store = &st_dst_t1;
    n_fail += step("dst on TEST1 last", build_dst, 0, 25);
    g_dst_store = NULL;

    // a tensor outside the graph's lists, seen through a leaf view, moves
    n_fail += step("roam on TEST0", build_roam, 0, 26);
    n_fail += step("roam on TEST0 again", build_roam, 0, 27);
    move_to(M.roam, &st_t1);
    n_fail += step("roam on TEST1", build_roam, 0, 28);
    n_fail += step("roam on TEST1 again", build_roam, 0, 29);
    wsp_ggml_allocr_reset(st_roam.alloc);
    move_to(M.roam, &st_roam);
    n_fail += step("roam back on TEST0", build_roam, 0, 30);
    {
        // free its buffer; a CPU buffer of the same size replaces it (the
        // allocator may well hand out the same addresses)
        float * keep = (float *)su_read(M.roam);
        su_store_free(&st_roam);
        M.roam->data = NULL;
        M.roam->buffer = NULL;
        su_store_init(&st_roam, g_cpu, 1 << 12);
        wsp_ggml_allocr_alloc(st_roam.alloc, M.roam);
        wsp_ggml_backend_tensor_set(M.roam, keep, 0, wsp_ggml_nbytes(M.roam));
        free(keep);
    }
    n_fail += step("roam in a new CPU buffer", build_roam, 0, 31);
    n_fail += step("roam in a new CPU buffer again", build_roam, 0, 32);

    // cpy into a cache as the first nodes
    n_fail += step("kv on CPU", build_kv, 0, 33);
    n_fail += step("kv on CPU again", build_kv, 0, 34);
    n_fail += step("kv on TEST0", build_kv, 1, 35);
    n_fail += step("kv on CPU after TEST0", build_kv, 0, 36);
    n_fail += step("kv on TEST0 again", build_kv, 1, 37);

    // an input copy whose source changes shape under a reused split
    n_fail += step("shape 1 row", build_shape, 1, 38);
    n_fail += step("shape 1 row again", build_shape, 1, 39);
    n_fail += step("shape 3 rows", build_shape, 3, 40);
    n_fail += step("shape 2 rows", build_shape, 2, 41);
    n_fail += step("shape 3 rows again", build_shape, 3, 42);

    // leaf in one build, node in the next, same address
    n_fail += step("leafnode leaf", build_leafnode, 0, 43);
    n_fail += step("leafnode node", build_leafnode, 1, 44);
    n_fail += step("leafnode leaf again", build_leafnode, 0, 45);
    n_fail += step("leafnode leaf unchanged", build_leafnode, 0, 46);

    // a node listed twice
    n_fail += step("dup none", build_dup, 0, 47);
    n_fail += step("dup twice", build_dup, 1, 48);
    n_fail += step("dup twice again", build_dup, 1, 49);
    n_fail += step("dup none again", build_dup, 0, 50);

    // host memory seen through a view that only its consumer assigns
    n_fail += step("host", build_host, 0, 51);
    n_fail += step("host again", build_host, 0, 52);
    {
        // the host tensor moves into a TEST1 buffer (a leaf that had no
        // location gets one), then back to its host memory
        void * host_mem = M.host->data;
        M.host->data = NULL;
        wsp_ggml_allocr_alloc(st_t1.alloc, M.host);
        CHECK(M.host->buffer != NULL);
        wsp_ggml_backend_tensor_set(M.host, host_mem, 0, wsp_ggml_nbytes(M.host));
        n_fail += step("host in a TEST1 buffer", build_host, 0, 74);
        n_fail += step("host in a TEST1 buffer again", build_host, 0, 75);
        memcpy(host_mem, M.host->data, wsp_ggml_nbytes(M.host));
        M.host->data = host_mem;
        M.host->buffer = NULL;
        n_fail += step("host back in host memory", build_host, 0, 76);
        n_fail += step("host back in host memory again", build_host, 0, 77);
    }

    // one graph object, computed three times
    n_fail += step_same_object("same object", build_pair, 3, 53, false);
    n_fail += step_same_object("same object cleared", build_pair, 3, 71, true);
    n_fail += step("pair rebuilt", build_pair, 0, 56);
    n_fail += step("pair rebuilt again", build_pair, 0, 57);

    // an input in the scheduler's own compute buffer, placed by the user
    n_fail += step("inp on TEST1", build_inp, 0, 64);
    n_fail += step("inp on TEST1 again", build_inp, 0, 65);
    n_fail += step("inp on CPU", build_inp, 1, 66);
    n_fail += step("inp on CPU again", build_inp, 1, 67);
    n_fail += step("inp on TEST1 after CPU", build_inp, 0, 68);

    n_fail += step("two base before remeasure", build_two, 0, 58);
    test_backend_print_stats(g_t0);
    test_backend_print_stats(g_t1);

    // init_measure again (the original then measures with the real
    // allocators: only some counters stay comparable). First with another
    // graph than the one computed next (one node more), then with the graph
    // that was just computed, rebuilt (ours reuses the split for the measure).
    remeasure("remeasure one node more", 3);
    n_fail += step("two after remeasure", build_two, 0, 59);
    n_fail += step("two after remeasure again", build_two, 0, 60);
    remeasure("remeasure the same graph", 0);
    n_fail += step("two after second remeasure", build_two, 0, 69);
    n_fail += step("two after second remeasure again", build_two, 0, 70);
    print_some_stats(g_t0);
    print_some_stats(g_t1);

    wsp_ggml_backend_sched_free(g_sched);
    su_store_free(&st_t0);
    su_store_free(&st_t1);
    su_store_free(&st_cpu);
    su_store_free(&st_dst_t1);
    su_store_free(&st_dst_cpu);
    su_store_free(&st_roam);
    wsp_ggml_free(wctx);
    wsp_ggml_free(host_ctx);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_free(g_t0);
    wsp_ggml_backend_free(g_t1);
    wsp_ggml_backend_free(g_cpu);
    printf("failures %d\n", n_fail);
    return 0;
}
