// The additions of ggml-backend-ext.h (docs/extensions.md): the log
// callback, how the scheduler split a graph (split and backend statistics,
// the backend of each node), the evaluation callback that watches nodes as
// they are computed, and the CPU backend's abort callback.
//
// Build against the installed library (docs/install.md):
//
//   cc -o extensions extensions.c ggml.o ggml-alloc.o ggml-quants.o $(pkg-config --cflags --libs wsp_ggml_backend) -Ipath/to/ggml -lm -lpthread
#include "ggml-alloc.h"
#include "ggml-backend-ext.h" // includes ggml-backend.h
#include "ggml.h"

#include <stdio.h>
#include <string.h>

#define N 16

// Every message of the library (a misuse, out of memory, the scheduler's
// WSP_GGML_SCHED_DEBUG output) comes here instead of stderr (or logcat on
// Android). text ends with a newline. A message that reports an error comes
// just before the process aborts.
static void on_log(enum wsp_ggml_log_level level, const char * text, void * user_data) {
    FILE * log = user_data;
    fprintf(log, "[wsp_ggml_backend %s] %s", level == WSP_GGML_LOG_LEVEL_ERROR ? "error" : "info", text);
}

// The evaluation callback: asked (ask = true) about every node before it
// is computed; true means "show it to me", and the node is then shown
// (ask = false) computed and synchronised. Returning false there stops the
// compute.
static bool watch(struct wsp_ggml_tensor * t, bool ask, void * user_data) {
    (void)user_data;
    if (ask) {
        return strcmp(t->name, "h") == 0; // only h
    }
    float v[2];
    wsp_ggml_backend_tensor_get(t, v, 0, sizeof v);
    printf("watched %s: %g %g ...\n", t->name, v[0], v[1]);
    return true; // go on
}

// The CPU backend's abort callback: checked between nodes; true stops the
// compute (another thread sets the flag in a real program).
static bool asked;
static bool should_stop(void * data) {
    asked = true;
    return *(const bool *)data;
}

int main(void) {
    wsp_ggml_backend_log_set(on_log, stderr);

    wsp_ggml_backend_t gpu = wsp_ggml_backend_cpu_init(); // stands in for a GPU backend
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    bool stop = false;
    wsp_ggml_backend_cpu_set_abort_callback(cpu, should_stop, &stop);

    // a, in gpu's buffer, and b, in cpu's: h = a * a runs on gpu,
    // y = h + b on cpu, so the graph has two splits and h is copied.
    struct wsp_ggml_init_params p = { 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), NULL, true };
    struct wsp_ggml_context * ctx = wsp_ggml_init(p);
    struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, N);
    struct wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, N);
    wsp_ggml_backend_buffer_t buf_gpu = wsp_ggml_backend_alloc_buffer(gpu, 256);
    wsp_ggml_backend_buffer_t buf_cpu = wsp_ggml_backend_alloc_buffer(cpu, 256);
    wsp_ggml_tallocr_t ta = wsp_ggml_tallocr_new_from_buffer(buf_gpu);
    wsp_ggml_tallocr_t tb = wsp_ggml_tallocr_new_from_buffer(buf_cpu);
    wsp_ggml_tallocr_alloc(ta, a);
    wsp_ggml_tallocr_alloc(tb, b);
    float ones[N];
    for (int i = 0; i < N; i++) {
        ones[i] = 1.0f + (float)i;
    }
    wsp_ggml_backend_tensor_set(a, ones, 0, sizeof ones);
    wsp_ggml_backend_tensor_set(b, ones, 0, sizeof ones);

    struct wsp_ggml_tensor * h = wsp_ggml_mul(ctx, a, a);
    wsp_ggml_set_name(h, "h");
    struct wsp_ggml_tensor * y = wsp_ggml_add(ctx, h, b);
    wsp_ggml_set_name(y, "y");
    struct wsp_ggml_cgraph * graph = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(graph, y);

    wsp_ggml_backend_t backends[2] = { gpu, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    wsp_ggml_backend_sched_init_measure(sched, graph);
    wsp_ggml_backend_sched_set_eval_callback(sched, watch, NULL);
    wsp_ggml_backend_sched_graph_compute(sched, graph);

    // How the graph was split and what it cost.
    int n = wsp_ggml_backend_sched_get_n_splits(sched);
    for (int i = 0; i < n; i++) {
        struct wsp_ggml_backend_sched_split_stats s;
        wsp_ggml_backend_sched_get_split_stats(sched, i, &s);
        printf("split %d on backend %d: nodes [%d, %d), %d inputs, %zu bytes copied\n", i,
               s.backend == gpu ? 0 : 1, s.i_start, s.i_end, s.n_inputs, s.bytes_copied);
    }
    for (int i = 0; i < wsp_ggml_backend_sched_get_n_backends(sched); i++) {
        wsp_ggml_backend_t be = wsp_ggml_backend_sched_get_backend(sched, i);
        struct wsp_ggml_backend_sched_backend_stats s;
        wsp_ggml_backend_sched_get_backend_stats(sched, be, &s); // also copy_us, compute_us
        printf("backend %d (%s): %d splits, %d copies, %zu bytes copied, compute buffer %zu bytes\n", i,
               wsp_ggml_backend_name(be), s.n_splits, s.n_copies, s.bytes_copied,
               wsp_ggml_backend_sched_get_buffer_size(sched, be));
    }
    printf("h runs on backend %d, y on backend %d\n", wsp_ggml_backend_sched_get_tensor_backend(sched, h) == gpu ? 0 : 1,
           wsp_ggml_backend_sched_get_tensor_backend(sched, y) == gpu ? 0 : 1);
    float out[N];
    wsp_ggml_backend_tensor_get(y, out, 0, sizeof out);
    printf("y: %g %g %g ...\n", out[0], out[1], out[2]);

    // The abort callback: with the flag set, the CPU backend stops at its
    // first check and graph_compute returns early (y is not computed).
    stop = true;
    asked = false;
    wsp_ggml_backend_sched_set_eval_callback(sched, NULL, NULL);
    wsp_ggml_backend_sched_graph_compute(sched, graph);
    printf("the abort callback was asked: %s\n", asked ? "yes" : "no");

    wsp_ggml_backend_sched_free(sched);
    wsp_ggml_tallocr_free(ta);
    wsp_ggml_tallocr_free(tb);
    wsp_ggml_backend_buffer_free(buf_gpu);
    wsp_ggml_backend_buffer_free(buf_cpu);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);

    // A misuse is reported through the log callback, then the process
    // aborts: uncomment to see it.
    // wsp_ggml_backend_name(NULL) is allowed ("NULL"); a NULL scheduler is not:
    // wsp_ggml_backend_sched_get_n_splits(NULL);
    return 0;
}
