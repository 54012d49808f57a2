// Differential test: programs the original computes and an earlier version of
// ours stopped (found by the randomized differential fuzzer).
//
//   1. init_measure twice, with the graph's input allocated through
//      sched_get_tallocr: the second measure must count what the caller
//      already holds in the compute buffer;
//   2. re-measure with a smaller graph, then compute the larger one again;
//   3. a graph whose only node is a view: the view is initialised and readable;
//   4. measure again after a compute that placed the graph after an input the
//      caller allocated (and the graph does not use): the original's real
//      allocator counted both, so the input and the graph fit again after any
//      number of measures (found by the fuzzer: seed 377424458471).
//
// Graphs are rebuilt in one fixed context (the same addresses every time), as
// programs do. Everything printed is compared with the original's output.
#include "sched_util.h"

#define N 8
// columns of the input: large enough (256 bytes) that the CPU buffer's 64 bytes
// of alignment slack cannot hide a missing input
#define B 8

struct env {
    wsp_ggml_backend_t tb, cpu;
    wsp_ggml_backend_t backends[2];
    struct su_store st;
    struct wsp_ggml_context * wctx;
    struct wsp_ggml_tensor * w; // [N, N] on the test backend
    float xdata[N * B];
};

static void env_init(struct env * e) {
    e->tb = su_test_backend("RM_TB", 32, true, true, true);
    e->cpu = su_cpu_backend();
    e->backends[0] = e->tb;
    e->backends[1] = e->cpu;
    su_store_init(&e->st, e->tb, 1 << 12);
    e->wctx = make_ctx(2, false, true, 0);
    struct lcg r = lcg_new(3);
    e->w = wsp_ggml_new_tensor_2d(e->wctx, WSP_GGML_TYPE_F32, N, N);
    wsp_ggml_set_name(e->w, "w");
    su_store_put(&e->st, e->w, &r, 0.5f);
    lcg_fill_f32(&r, e->xdata, N * B, 1.0f);
}

static void env_free(struct env * e) {
    wsp_ggml_free(e->wctx);
    su_store_free(&e->st);
    wsp_ggml_backend_free(e->tb);
    wsp_ggml_backend_free(e->cpu);
}

// h = gelu(x) * x on the CPU (where x is), then `layers` x (gelu(w @ h) + h)
// on the test backend (where w is); the input x allocated through the
// scheduler's CPU allocator and set when `set` (after the first measure).
static struct wsp_ggml_cgraph * build(struct wsp_ggml_context * ctx, const struct env * e, wsp_ggml_backend_sched_t sched,
                                      int layers, bool set, struct wsp_ggml_tensor ** out) {
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, N, B);
    wsp_ggml_set_name(x, "x");
    struct wsp_ggml_tensor * h = wsp_ggml_mul(ctx, wsp_ggml_gelu(ctx, x), x);
    for (int l = 0; l < layers; l++) {
        h = wsp_ggml_add(ctx, wsp_ggml_gelu(ctx, wsp_ggml_mul_mat(ctx, e->w, h)), h);
    }
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, h);
    wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, e->cpu), x);
    if (set) {
        wsp_ggml_backend_tensor_set(x, e->xdata, 0, sizeof(e->xdata));
    }
    *out = h;
    return g;
}

static void step(const char * label, const struct env * e, wsp_ggml_backend_sched_t sched, int layers, bool measure) {
    struct wsp_ggml_context * ctx = su_fixed_ctx();
    struct wsp_ggml_tensor * out;
    struct wsp_ggml_cgraph * g = build(ctx, e, sched, layers, !measure, &out);
    if (measure) {
        wsp_ggml_backend_sched_init_measure(sched, g);
        printf("%s measured %d layers\n", label, layers);
    } else {
        wsp_ggml_backend_sched_graph_compute(sched, g);
        print_tensor(label, out, 4);
    }
    wsp_ggml_free(ctx);
}

static void part_measure_twice(void) {
    struct env e;
    env_init(&e);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(e.backends, 2);
    step("twice m1", &e, sched, 2, true);
    step("twice c1", &e, sched, 2, false);
    step("twice m2", &e, sched, 2, true);
    step("twice c2", &e, sched, 2, false);
    step("twice c3", &e, sched, 2, false);
    wsp_ggml_backend_sched_free(sched);
    // (no stats: the original measures again with the real allocators,
    // calling init_tensor on the compute buffers for the measure graph)
    env_free(&e);
}

static void part_smaller_remeasure(void) {
    struct env e;
    env_init(&e);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(e.backends, 2);
    step("smaller m1", &e, sched, 4, true);
    step("smaller c1", &e, sched, 4, false);
    step("smaller m2", &e, sched, 1, true);
    step("smaller c2", &e, sched, 1, false);
    step("smaller c3", &e, sched, 4, false);
    wsp_ggml_backend_sched_free(sched);
    // (no stats: the original measures again with the real allocators,
    // calling init_tensor on the compute buffers for the measure graph)
    env_free(&e);
}

// add(w, w) on the test backend, then a graph whose only node is transpose(w):
// the view gets the memory of w and can be read.
static void part_view_only(void) {
    struct env e;
    env_init(&e);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(e.backends, 2);
    for (int k = -1; k < 3; k++) {
        struct wsp_ggml_context * ctx = su_fixed_ctx();
        struct wsp_ggml_tensor * out = k == 1 ? wsp_ggml_transpose(ctx, e.w) : wsp_ggml_add(ctx, e.w, e.w);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, out);
        if (k < 0) {
            wsp_ggml_backend_sched_init_measure(sched, g);
            wsp_ggml_free(ctx);
            continue;
        }
        wsp_ggml_backend_sched_graph_compute(sched, g);
        printf("view_only %d n_nodes=%d backend=%s\n", k, g->n_nodes, su_backend_of(out));
        // raw bytes: a transposed view reads as its source's memory
        void * d = malloc(wsp_ggml_nbytes(out));
        CHECK(d != NULL);
        wsp_ggml_backend_tensor_get(out, d, 0, wsp_ggml_nbytes(out));
        print_host_data("view_only data", d, wsp_ggml_nbytes(out), out->type, 4);
        free(d);
        wsp_ggml_free(ctx);
    }
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// The graph add(w, w) on the test backend; `x`, 4 KiB on the test backend
// and not in the graph, allocated through the scheduler before a compute;
// the first measure over a slack the caller allocated (as a program that
// reserves room for its inputs does).
static void part_unused_input(void) {
    struct env e;
    env_init(&e);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(e.backends, 2);
    for (int k = 0; k < 8; k++) {
        bool measure = k % 2 == 0;
        struct wsp_ggml_context * ctx = su_fixed_ctx();
        struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 1024);
        struct wsp_ggml_tensor * out = wsp_ggml_add(ctx, e.w, e.w);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, out);
        if (measure) {
            if (k == 0) {
                wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, e.tb), x);
            }
            wsp_ggml_backend_sched_init_measure(sched, g);
        } else {
            wsp_ggml_tallocr_alloc(wsp_ggml_backend_sched_get_tallocr(sched, e.tb), x);
            wsp_ggml_backend_sched_graph_compute(sched, g);
            printf("unused_input %d backend=%s\n", k, su_backend_of(out));
            print_tensor("unused_input out", out, 4);
        }
        wsp_ggml_free(ctx);
    }
    wsp_ggml_backend_sched_free(sched);
    env_free(&e);
}

// sched_remeasure [part]: all parts, or the one named (to check each
// reduction on its own against another library).
int main(int argc, char ** argv) {
    const char * only = argc > 1 ? argv[1] : NULL;
#define PART(name) if (only == NULL || strcmp(only, #name) == 0) part_##name()
    PART(measure_twice);
    PART(smaller_remeasure);
    PART(view_only);
    PART(unused_input);
#undef PART
    return 0;
}
