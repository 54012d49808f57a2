// The split scheduler over two backends: weights in one buffer per backend,
// a graph that splits where its weights change backend, one measure, several
// computes, then a rebuilt graph, and set_node_backend.
//
// Two CPU backends stand in for "a GPU and the CPU": the scheduler treats
// them as two devices (each has its own buffers and compute buffer), so the
// program runs anywhere; with a real second backend (CUDA, Metal), only the
// line that makes `gpu` changes.
//
// Build against the installed library (docs/install.md):
//
//   cc -o sched_two_backends sched_two_backends.c ggml.o ggml-alloc.o ggml-quants.o $(pkg-config --cflags --libs wsp_ggml_backend) -Ipath/to/ggml -lm -lpthread
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <stdio.h>

#define N_EMBD 8
#define N_TOK 4

// The model: two layers, y = W2 relu(W1 x). Layer 1 lives on `gpu`,
// layer 2 on `cpu` (as when a model is partly offloaded).
struct model {
    struct wsp_ggml_tensor * w1; // in gpu's weight buffer
    struct wsp_ggml_tensor * w2; // in cpu's weight buffer
    struct wsp_ggml_tensor * x;  // the input, in cpu's weight buffer too
};

// The graph, rebuilt for every compute in a context of its own (headers
// only: the scheduler places the results in its compute buffers).
static struct wsp_ggml_cgraph * build_graph(struct wsp_ggml_context * ctx, const struct model * m, int n_tok) {
    struct wsp_ggml_tensor * x = wsp_ggml_view_2d(ctx, m->x, N_EMBD, n_tok, m->x->nb[1], 0);
    struct wsp_ggml_tensor * h = wsp_ggml_relu(ctx, wsp_ggml_mul_mat(ctx, m->w1, x));
    wsp_ggml_set_name(h, "h");
    struct wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, m->w2, h);
    wsp_ggml_set_name(y, "y");
    struct wsp_ggml_cgraph * graph = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(graph, y);
    return graph;
}

static struct wsp_ggml_context * graph_ctx(void) {
    struct wsp_ggml_init_params p = { 64 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), NULL, true };
    return wsp_ggml_init(p);
}

// One buffer on `backend` for `n` tensors, each allocated with a tallocr.
static wsp_ggml_backend_buffer_t load(wsp_ggml_backend_t backend, struct wsp_ggml_tensor ** t, int n) {
    size_t size = 0;
    for (int i = 0; i < n; i++) {
        size += wsp_ggml_nbytes(t[i]) + wsp_ggml_backend_get_alignment(backend);
    }
    wsp_ggml_backend_buffer_t buffer = wsp_ggml_backend_alloc_buffer(backend, size);
    wsp_ggml_tallocr_t alloc = wsp_ggml_tallocr_new_from_buffer(buffer);
    for (int i = 0; i < n; i++) {
        wsp_ggml_tallocr_alloc(alloc, t[i]);
    }
    wsp_ggml_tallocr_free(alloc); // the tensors stay; the buffer holds them
    return buffer;
}

static void set_identity_scaled(struct wsp_ggml_tensor * w, float s) {
    float v[N_EMBD * N_EMBD] = { 0 };
    for (int i = 0; i < N_EMBD; i++) {
        v[i * N_EMBD + i] = s;
    }
    wsp_ggml_backend_tensor_set(w, v, 0, sizeof v);
}

static void print_result(const char * label, struct wsp_ggml_cgraph * graph, int n_tok) {
    struct wsp_ggml_tensor * y = graph->nodes[graph->n_nodes - 1];
    float out[N_EMBD * N_TOK];
    wsp_ggml_backend_tensor_get(y, out, 0, wsp_ggml_nbytes(y));
    printf("%s: y[0][0..3] = %g %g %g %g (%d tokens)\n", label, out[0], out[1], out[2], out[3], n_tok);
}

int main(void) {
    wsp_ggml_backend_t gpu = wsp_ggml_backend_cpu_init(); // a real program: its GPU backend's init
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();

    // The weights: headers in one context, data in one buffer per backend.
    struct wsp_ggml_init_params wp = { 8 * wsp_ggml_tensor_overhead(), NULL, true };
    struct wsp_ggml_context * wctx = wsp_ggml_init(wp);
    struct model m;
    m.w1 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N_EMBD, N_EMBD);
    m.w2 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N_EMBD, N_EMBD);
    m.x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N_EMBD, N_TOK);
    wsp_ggml_set_name(m.w1, "w1");
    wsp_ggml_set_name(m.w2, "w2");
    wsp_ggml_set_name(m.x, "x");
    wsp_ggml_backend_buffer_t on_gpu = load(gpu, (struct wsp_ggml_tensor *[]){ m.w1 }, 1);
    wsp_ggml_backend_buffer_t on_cpu = load(cpu, (struct wsp_ggml_tensor *[]){ m.w2, m.x }, 2);
    set_identity_scaled(m.w1, 2.0f);
    set_identity_scaled(m.w2, 3.0f);

    // The scheduler: backends in priority order (the first is preferred).
    wsp_ggml_backend_t backends[2] = { gpu, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);

    // Measure once, with the largest graph: this sizes the compute buffers.
    // Every input of the graph (weights, x) is already in a backend buffer.
    struct wsp_ggml_context * ctx = graph_ctx();
    struct wsp_ggml_cgraph * graph = build_graph(ctx, &m, N_TOK);
    wsp_ggml_backend_sched_init_measure(sched, graph);
    wsp_ggml_free(ctx);

    // Compute several times: set the input, build, compute, read.
    for (int step = 0; step < 3; step++) {
        float x[N_EMBD * N_TOK];
        for (int i = 0; i < N_EMBD * N_TOK; i++) {
            x[i] = (float)(step + 1);
        }
        wsp_ggml_backend_tensor_set(m.x, x, 0, sizeof x);

        ctx = graph_ctx();
        graph = build_graph(ctx, &m, N_TOK);
        wsp_ggml_backend_sched_graph_compute(sched, graph);
        char label[32];
        snprintf(label, sizeof label, "step %d", step);
        print_result(label, graph, N_TOK);
        wsp_ggml_free(ctx);
    }

    // A different graph (2 tokens): the scheduler splits it anew.
    ctx = graph_ctx();
    graph = build_graph(ctx, &m, 2);
    wsp_ggml_backend_sched_graph_compute(sched, graph);
    print_result("rebuilt", graph, 2);
    wsp_ggml_free(ctx);

    // set_node_backend: run h (layer 1's relu) on cpu for this compute only.
    ctx = graph_ctx();
    graph = build_graph(ctx, &m, N_TOK);
    struct wsp_ggml_tensor * h = wsp_ggml_get_tensor(ctx, "h");
    wsp_ggml_backend_sched_set_node_backend(sched, h, cpu);
    wsp_ggml_backend_sched_graph_compute(sched, graph);
    print_result("h on cpu", graph, N_TOK);
    wsp_ggml_free(ctx);

    // Free: the scheduler first, then the weights, then the backends.
    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_backend_buffer_free(on_gpu);
    wsp_ggml_backend_buffer_free(on_cpu);
    wsp_ggml_free(wctx);
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
    return 0;
}
