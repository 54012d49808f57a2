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
    "chain_rejected_everywhere", // an in-place chain no one backend supports all of
    "get_backend_out_of_range",
    "get_backend_negative",
    "get_buffer_size_unknown_backend",
    "cpu_abort_callback_non_cpu",
    // from inside the evaluation callback: reads work, changes abort
    "callback_graph_compute",
    "callback_set_node_backend",
    "callback_reset",
    "callback_free",
    "callback_init_measure",
    "callback_get_tallocr",
    // from inside a backend's tensor copy during a compute: reads work,
    // changes abort
    "callback_copy_reset",
    "callback_copy_set_eval_callback",
    // from inside a backend's supports_op while the compute plans: the
    // scheduler is being changed, so even reads abort
    "planning_supports_read",
    // from inside the CPU backend's abort callback
    "cpu_abort_callback_set_n_threads",
    // a graph larger than the measure's, and the backend cannot allocate more
    "growth_fails",
};
#define N_CASES ((int)(sizeof(CASES) / sizeof(CASES[0])))

#define N 8

static const int REJECT_CPY[] = { WSP_GGML_OP_CPY, -1 };
static const int REJECT_SM[] = { WSP_GGML_OP_SOFT_MAX, -1 };

// The evaluation callback of the callback_* cases: every read the API allows,
// then the change named by the case.
static struct {
    const char * name;
    wsp_ggml_backend_sched_t sched;
    struct wsp_ggml_cgraph * graph;
    wsp_ggml_backend_t other;
} g_case;

static bool reenter(struct wsp_ggml_tensor * t, bool ask, void * user_data) {
    (void)user_data;
    if (ask) {
        return true;
    }
    wsp_ggml_backend_sched_t s = g_case.sched;
    struct wsp_ggml_backend_sched_split_stats ss;
    struct wsp_ggml_backend_sched_backend_stats bs;
    float first = 0.0f;
    bool reads = wsp_ggml_backend_sched_get_n_splits(s) > 0 && wsp_ggml_backend_sched_get_split_stats(s, 0, &ss)
                 && wsp_ggml_backend_sched_get_backend_stats(s, g_case.other, &bs)
                 && wsp_ggml_backend_sched_get_tensor_backend(s, t) != NULL
                 && wsp_ggml_backend_sched_get_buffer_size(s, wsp_ggml_backend_sched_get_tensor_backend(s, t)) > 0
                 && wsp_ggml_backend_sched_get_buffer(s, g_case.other) != NULL && wsp_ggml_backend_sched_get_n_backends(s) == 2;
    wsp_ggml_backend_tensor_get(t, &first, 0, sizeof(first));
    fprintf(stderr, "reads %s\n", reads ? "ok" : "FAILED");
    const char * c = g_case.name;
    if (strcmp(c, "callback_graph_compute") == 0) {
        wsp_ggml_backend_sched_graph_compute(s, g_case.graph);
    } else if (strcmp(c, "callback_set_node_backend") == 0) {
        wsp_ggml_backend_sched_set_node_backend(s, t, g_case.other);
    } else if (strcmp(c, "callback_reset") == 0) {
        wsp_ggml_backend_sched_reset(s);
    } else if (strcmp(c, "callback_free") == 0) {
        wsp_ggml_backend_sched_free(s);
    } else if (strcmp(c, "callback_init_measure") == 0) {
        wsp_ggml_backend_sched_init_measure(s, g_case.graph);
    } else if (strcmp(c, "callback_get_tallocr") == 0) {
        (void)wsp_ggml_backend_sched_get_tallocr(s, g_case.other);
    }
    return true;
}

// The hook of the callback_copy_* and planning_* cases (test_backend.h).
static void copy_hook(enum test_backend_call call, void * data) {
    (void)data;
    wsp_ggml_backend_sched_t s = g_case.sched;
    const char * c = g_case.name;
    if (strncmp(c, "planning_", 9) == 0) {
        if (call == TB_SUPPORTS_OP) {
            (void)wsp_ggml_backend_sched_get_n_splits(s);
        }
        return;
    }
    if (call != TB_SET_TENSOR_ASYNC && call != TB_GET_TENSOR_ASYNC && call != TB_CPY_TENSOR_FROM && call != TB_CPY_TENSOR_TO) {
        return;
    }
    struct wsp_ggml_backend_sched_split_stats ss;
    struct wsp_ggml_backend_sched_backend_stats bs;
    bool reads = wsp_ggml_backend_sched_get_n_splits(s) > 1 && wsp_ggml_backend_sched_get_split_stats(s, 0, &ss)
                 && wsp_ggml_backend_sched_get_backend_stats(s, g_case.other, &bs)
                 && wsp_ggml_backend_sched_get_buffer(s, g_case.other) != NULL && wsp_ggml_backend_sched_get_n_backends(s) == 2
                 && wsp_ggml_backend_sched_get_backend(s, 1) == g_case.other;
    fprintf(stderr, "reads %s\n", reads ? "ok" : "FAILED");
    if (strcmp(c, "callback_copy_reset") == 0) {
        wsp_ggml_backend_sched_reset(s);
    } else if (strcmp(c, "callback_copy_set_eval_callback") == 0) {
        wsp_ggml_backend_sched_set_eval_callback(s, NULL, NULL);
    }
}

static bool abort_cb(void * data) {
    wsp_ggml_backend_cpu_set_n_threads((wsp_ggml_backend_t)data, 2);
    return false;
}

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
    } else if (strcmp(c, "chain_rejected_everywhere") == 0) {
        // y = w @ x on M0; z = soft_max_inplace(y), which M0 rejects; M1
        // rejects the MUL_MAT whose memory z works in: no backend takes both
        static const int REJECT_MM[] = { WSP_GGML_OP_MUL_MAT };
        test_backend_set_rejected(b1, REJECT_MM, 1);
        struct wsp_ggml_tensor * y = wsp_ggml_mul_mat(gctx, w, x);
        wsp_ggml_set_name(y, "y");
        struct wsp_ggml_tensor * z = wsp_ggml_soft_max_inplace(gctx, y);
        wsp_ggml_set_name(z, "z");
        wsp_ggml_build_forward_expand(g, z);
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
    } else if (strncmp(c, "callback_copy_", 14) == 0 || strncmp(c, "planning_", 9) == 0) {
        // y on M0, then z = y + xb with xb in M1's memory: a copy of xb
        struct su_store st1;
        su_store_init(&st1, b1, 1 << 16);
        struct wsp_ggml_tensor * xb = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 2);
        su_store_put(&st1, xb, &r, 1.0f);
        struct wsp_ggml_tensor * y = wsp_ggml_gelu(gctx, wsp_ggml_mul_mat(gctx, w, x));
        wsp_ggml_build_forward_expand(g, wsp_ggml_add(gctx, wsp_ggml_mul(gctx, xb, xb), y));
        wsp_ggml_backend_sched_init_measure(sched, g);
        g_case.name = c;
        g_case.sched = sched;
        g_case.other = b1;
        test_backend_set_hook(copy_hook, NULL);
        wsp_ggml_backend_sched_graph_compute(sched, g);
    } else if (strncmp(c, "callback_", 9) == 0) {
        struct wsp_ggml_tensor * y = wsp_ggml_gelu(gctx, wsp_ggml_mul_mat(gctx, w, x));
        wsp_ggml_build_forward_expand(g, y);
        wsp_ggml_backend_sched_init_measure(sched, g);
        g_case.name = c;
        g_case.sched = sched;
        g_case.graph = g;
        g_case.other = b1;
        wsp_ggml_backend_sched_set_eval_callback(sched, reenter, NULL);
        wsp_ggml_backend_sched_graph_compute(sched, g);
    } else if (strcmp(c, "cpu_abort_callback_set_n_threads") == 0) {
        wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
        wsp_ggml_backend_cpu_set_n_threads(cpu, 1);
        wsp_ggml_backend_cpu_set_abort_callback(cpu, abort_cb, cpu);
        struct wsp_ggml_context * hctx = su_host_ctx(1 << 21);
        struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(hctx, WSP_GGML_TYPE_F32, 8);
        wsp_ggml_set_f32(a, 1.0f);
        struct wsp_ggml_cgraph * hg = wsp_ggml_new_graph(hctx);
        wsp_ggml_build_forward_expand(hg, wsp_ggml_gelu(hctx, a));
        wsp_ggml_backend_graph_compute(cpu, hg);
    } else if (strcmp(c, "growth_fails") == 0) {
        wsp_ggml_backend_t xb = xb_new("MGROW", NULL, -1, NULL);
        wsp_ggml_backend_t xbs[1] = { xb };
        wsp_ggml_backend_sched_t s1 = wsp_ggml_backend_sched_new(xbs, 1);
        struct su_store xst;
        su_store_init(&xst, xb, 1 << 16);
        struct wsp_ggml_tensor * xw = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
        su_store_put(&xst, xw, &r, 1.0f);
        struct wsp_ggml_tensor * y = wsp_ggml_mul_mat(gctx, xw, xw);
        wsp_ggml_build_forward_expand(g, y);
        wsp_ggml_backend_sched_init_measure(s1, g);
        test_backend_set_max_alloc(xb, 1);
        for (int i = 0; i < 8; i++) {
            y = wsp_ggml_mul_mat(gctx, xw, wsp_ggml_gelu(gctx, y));
        }
        wsp_ggml_set_name(y, "larger");
        wsp_ggml_build_forward_expand(g, y);
        wsp_ggml_backend_sched_graph_compute(s1, g);
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    fprintf(stderr, "NOT ABORTED\n");
    return 3;
}
