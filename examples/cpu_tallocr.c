// The CPU backend with a tensor allocator (tallocr) and one graph.
//
// Build against the installed library (docs/install.md), with ggml's objects
// compiled without ggml-backend.c (docs/ggml-sources.md):
//
//   cc -o cpu_tallocr cpu_tallocr.c ggml.o ggml-alloc.o ggml-quants.o $(pkg-config --cflags --libs wsp_ggml_backend) -Ipath/to/ggml -lm -lpthread
//
// It computes y = W x + b for a 3x4 matrix W on the CPU backend and prints y.
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <stdio.h>

int main(void) {
    // 1. The backend.
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    if (cpu == NULL) {
        fprintf(stderr, "no memory for the CPU backend\n");
        return 1;
    }

    // 2. A context that holds tensor headers only (no_alloc = true): the
    //    data will live in a backend buffer, not in the context.
    struct wsp_ggml_init_params params = {
        /*.mem_size   =*/ 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(),
        /*.mem_buffer =*/ NULL,
        /*.no_alloc   =*/ true,
    };
    struct wsp_ggml_context * ctx = wsp_ggml_init(params);
    struct wsp_ggml_tensor * W = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 4, 3); // 4 columns, 3 rows
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    struct wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 3);
    struct wsp_ggml_tensor * y = wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, W, x), b);
    wsp_ggml_set_name(y, "y");

    struct wsp_ggml_cgraph * graph = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(graph, y);

    // 3. One buffer for everything, and a tensor allocator over it. The
    //    allocator places each tensor at the buffer's alignment; 1 KiB is
    //    ample here (a real program sums wsp_ggml_backend_buffer_get_alloc_size
    //    or measures with a measure allocator).
    wsp_ggml_backend_buffer_t buffer = wsp_ggml_backend_alloc_buffer(cpu, 1024);
    wsp_ggml_tallocr_t alloc = wsp_ggml_tallocr_new_from_buffer(buffer);
    wsp_ggml_tallocr_alloc(alloc, W);
    wsp_ggml_tallocr_alloc(alloc, x);
    wsp_ggml_tallocr_alloc(alloc, b);
    for (int i = 0; i < graph->n_nodes; i++) { // the results too
        wsp_ggml_tallocr_alloc(alloc, graph->nodes[i]);
    }

    // 4. Data goes in and out through the backend (its memory need not be
    //    the host's: a GPU backend's is not).
    const float w[12] = { 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1 };
    const float xs[4] = { 1, 2, 3, 4 };
    const float bs[3] = { 10, 20, 30 };
    wsp_ggml_backend_tensor_set(W, w, 0, sizeof w);
    wsp_ggml_backend_tensor_set(x, xs, 0, sizeof xs);
    wsp_ggml_backend_tensor_set(b, bs, 0, sizeof bs);

    // 5. Compute, read the result.
    wsp_ggml_backend_cpu_set_n_threads(cpu, 2);
    wsp_ggml_backend_graph_compute(cpu, graph);
    float out[3];
    wsp_ggml_backend_tensor_get(y, out, 0, sizeof out);
    printf("%s = [%g, %g, %g] on %s\n", wsp_ggml_get_name(y), out[0], out[1], out[2], wsp_ggml_backend_name(cpu));

    // 6. Free in reverse order: the allocator, the buffer (its tensors'
    //    memory), the context (the headers), the backend.
    wsp_ggml_tallocr_free(alloc);
    wsp_ggml_backend_buffer_free(buffer);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(cpu);
    return 0;
}
