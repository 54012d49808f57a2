// Ours-only test: misuse of the extension API must abort (SIGABRT) with a
// message on stderr. One case per run:
//
//   ext_misuse <case>   performs the misuse
//   ext_misuse          lists the case names, one per line
//
// If the misuse returns, the program prints "NOT ABORTED" to stderr and exits 3.
#include "ext_util.h"

static const char * const CASES[] = {
    "rejected_preallocated",  // a cpy into a cache on a backend that rejects CPY
    "rejected_everywhere",    // no backend supports the op
    "get_backend_out_of_range",
    "get_backend_negative",
    "get_buffer_size_unknown_backend",
    "cpu_abort_callback_non_cpu",
};
#define N_CASES ((int)(sizeof(CASES) / sizeof(CASES[0])))

#define N 8

static const int REJECT_CPY[] = { WSP_GGML_OP_CPY, -1 };
static const int REJECT_SM[] = { WSP_GGML_OP_SOFT_MAX, -1 };

static void measure_and_compute(wsp_ggml_backend_sched_t sched, struct wsp_ggml_cgraph * g) {
    wsp_ggml_backend_sched_init_measure(sched, g);
    wsp_ggml_backend_sched_graph_compute(sched, g);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        for (int i = 0; i < N_CASES; i++) {
            printf("%s\n", CASES[i]);
        }
        return 0;
    }
    const char * c = argv[1];
    fprintf(stderr, "case %s\n", c);

    const bool cpy_case = strcmp(c, "rejected_preallocated") == 0;
    const bool everywhere = strcmp(c, "rejected_everywhere") == 0;
    wsp_ggml_backend_t b0 = eu_tb("M0", cpy_case ? REJECT_CPY : REJECT_SM);
    wsp_ggml_backend_t b1 = eu_tb("M1", everywhere ? REJECT_SM : NULL);
    wsp_ggml_backend_t backends[2] = { b0, b1 };
    struct su_store st;
    su_store_init(&st, b0, 1 << 16);
    struct wsp_ggml_context * wctx = make_ctx(8, false, true, 0);
    struct lcg r = lcg_new(1);
    struct wsp_ggml_tensor * w = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
    su_store_put(&st, w, &r, 1.0f);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 2);
    su_store_put(&st, x, &r, 1.0f);
    struct wsp_ggml_tensor * cache = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 4 * N * 2);
    su_store_put(&st, cache, &r, 1.0f);
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    struct wsp_ggml_context * gctx = su_graph_ctx(32, WSP_GGML_DEFAULT_GRAPH_SIZE);
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(gctx);

    if (cpy_case) {
        struct wsp_ggml_tensor * k = wsp_ggml_mul_mat(gctx, w, x);
        struct wsp_ggml_tensor * dst = wsp_ggml_view_1d(gctx, cache, N * 2, 0);
        struct wsp_ggml_tensor * store = wsp_ggml_cpy(gctx, wsp_ggml_reshape_1d(gctx, k, N * 2), dst);
        wsp_ggml_set_name(store, "cache_store");
        wsp_ggml_build_forward_expand(g, store);
        measure_and_compute(sched, g);
    } else if (everywhere) {
        struct wsp_ggml_tensor * y = wsp_ggml_soft_max(gctx, wsp_ggml_mul_mat(gctx, w, x));
        wsp_ggml_set_name(y, "probs");
        wsp_ggml_build_forward_expand(g, y);
        measure_and_compute(sched, g);
    } else if (strcmp(c, "get_backend_out_of_range") == 0) {
        wsp_ggml_backend_t b = wsp_ggml_backend_sched_get_backend(sched, 2);
        fprintf(stderr, "got %p\n", (void *)b);
    } else if (strcmp(c, "get_backend_negative") == 0) {
        wsp_ggml_backend_t b = wsp_ggml_backend_sched_get_backend(sched, -1);
        fprintf(stderr, "got %p\n", (void *)b);
    } else if (strcmp(c, "get_buffer_size_unknown_backend") == 0) {
        wsp_ggml_backend_t other = eu_tb("MOTHER", NULL);
        size_t n = wsp_ggml_backend_sched_get_buffer_size(sched, other);
        fprintf(stderr, "got %zu\n", n);
    } else if (strcmp(c, "cpu_abort_callback_non_cpu") == 0) {
        wsp_ggml_backend_cpu_set_abort_callback(b0, NULL, NULL);
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    fprintf(stderr, "NOT ABORTED\n");
    return 3;
}
