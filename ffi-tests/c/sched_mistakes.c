// Ours-only test: the common mistakes of docs/scheduler.md, one per run, each
// stopping with the message the page quotes.
//
//   sched_mistakes <case>   makes the mistake
//   sched_mistakes          lists the case names, one per line
#include "ext_util.h"

static const char * const CASES[] = {
    "unallocated_inputs",     // init_measure with an input in no buffer
    "compute_before_measure", // graph_compute without init_measure
    "foreign_backend",        // set_node_backend to a backend not in the scheduler
};
#define N_CASES ((int)(sizeof(CASES) / sizeof(CASES[0])))

int main(int argc, char ** argv) {
    int exit_code;
    const int k = eu_pick_case(argc, argv, CASES, N_CASES, &exit_code);
    if (k < 0) {
        return exit_code;
    }
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t other = wsp_ggml_backend_cpu_init();
    struct wsp_ggml_init_params p = { 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), NULL, true };
    struct wsp_ggml_context * ctx = wsp_ggml_init(p);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    wsp_ggml_set_name(x, "x");
    struct wsp_ggml_tensor * y = wsp_ggml_sqr(ctx, x);
    wsp_ggml_set_name(y, "y");
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, y);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(&cpu, 1);
    switch (k) {
    case 0:
        wsp_ggml_backend_sched_init_measure(sched, g);
        break;
    case 1:
        wsp_ggml_backend_sched_graph_compute(sched, g);
        break;
    default:
        wsp_ggml_backend_sched_set_node_backend(sched, y, other);
        break;
    }
    fprintf(stderr, "NOT ABORTED\n");
    return 3;
}
