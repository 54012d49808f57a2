// Ours-only test: misuse of the scheduler API must abort (SIGABRT) with a
// message naming the function on stderr. One case per run:
//
//   sched_misuse <case>   prints the case name, then performs the misuse
//   sched_misuse          lists the case names, one per line
//
// If the misuse returns, the program prints "NOT ABORTED" to stderr and exits 3.
// (The original ggml-backend.c does not abort on most of these: it reads out
// of bounds, dereferences NULL, or asserts through exit(1).)
#include "sched_util.h"

static const char * const CASES[] = {
    "get_tallocr_unknown_backend",
    "get_buffer_unknown_backend",
    "set_node_backend_unknown_backend",
    "compute_before_measure",
    "null_sched_compute",
    "null_graph",
    "no_preallocated_tensor",
    "n_backends_zero",
    "n_backends_negative",
    "null_backends_array",
    "source_without_memory_assigned_late",
    "node_rejected_where_its_consumer_runs",
    "null_node_entry",
};
#define N_CASES ((int)(sizeof(CASES) / sizeof(CASES[0])))

#define N 8

struct env {
    wsp_ggml_backend_t tb;
    wsp_ggml_backend_t cpu;
    wsp_ggml_backend_t other; // not given to the scheduler
    wsp_ggml_backend_t backends[2];
    struct su_store st_tb;
    struct su_store st_cpu;
    struct wsp_ggml_context * wctx;
    struct wsp_ggml_tensor * w; // [N, N] on the test backend
    struct wsp_ggml_tensor * x; // [N, 2] on the CPU
    wsp_ggml_backend_sched_t sched;
};

static void env_init(struct env * e) {
    e->tb = su_test_backend("MIS_A", 32, true, true, true);
    e->cpu = wsp_ggml_backend_cpu_init();
    e->other = su_test_backend("MIS_OTHER", 32, true, true, true);
    e->backends[0] = e->tb;
    e->backends[1] = e->cpu;
    su_store_init(&e->st_tb, e->tb, 1 << 14);
    su_store_init(&e->st_cpu, e->cpu, 1 << 14);
    e->wctx = make_ctx(4, false, true, 0);
    struct lcg r = lcg_new(1);
    e->w = wsp_ggml_new_tensor_2d(e->wctx, WSP_GGML_TYPE_F32, N, N);
    su_store_put(&e->st_tb, e->w, &r, 1.0f);
    e->x = wsp_ggml_new_tensor_2d(e->wctx, WSP_GGML_TYPE_F32, N, 2);
    su_store_put(&e->st_cpu, e->x, &r, 1.0f);
    e->sched = NULL;
}

// a valid graph: gelu(w @ x) + x
static struct wsp_ggml_cgraph * valid_graph(struct wsp_ggml_context * ctx, const struct env * e,
                                            struct wsp_ggml_tensor ** node) {
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    struct wsp_ggml_tensor * h = wsp_ggml_gelu(ctx, wsp_ggml_mul_mat(ctx, e->w, e->x));
    struct wsp_ggml_tensor * o = wsp_ggml_add(ctx, h, e->x);
    wsp_ggml_build_forward_expand(g, o);
    if (node != NULL) {
        *node = h;
    }
    return g;
}

static void env_sched_measured(struct env * e) {
    e->sched = wsp_ggml_backend_sched_new(e->backends, 2);
    CHECK(e->sched != NULL);
    struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
    wsp_ggml_backend_sched_init_measure(e->sched, valid_graph(ctx, e, NULL));
    wsp_ggml_free(ctx);
}

static void announce(const char * name) {
    printf("%s\n", name);
    fflush(stdout);
}

static int run_case(const char * name) {
    struct env e;
    env_init(&e);

    if (strcmp(name, "get_tallocr_unknown_backend") == 0) {
        env_sched_measured(&e);
        announce(name);
        wsp_ggml_tallocr_t t = wsp_ggml_backend_sched_get_tallocr(e.sched, e.other);
        fprintf(stderr, "returned %s\n", t == NULL ? "NULL" : "non-NULL");
    } else if (strcmp(name, "get_buffer_unknown_backend") == 0) {
        env_sched_measured(&e);
        announce(name);
        wsp_ggml_backend_buffer_t b = wsp_ggml_backend_sched_get_buffer(e.sched, e.other);
        fprintf(stderr, "returned %s\n", b == NULL ? "NULL" : "non-NULL");
    } else if (strcmp(name, "set_node_backend_unknown_backend") == 0) {
        env_sched_measured(&e);
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_tensor * node = NULL;
        valid_graph(ctx, &e, &node);
        announce(name);
        wsp_ggml_backend_sched_set_node_backend(e.sched, node, e.other);
    } else if (strcmp(name, "compute_before_measure") == 0) {
        e.sched = wsp_ggml_backend_sched_new(e.backends, 2);
        CHECK(e.sched != NULL);
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = valid_graph(ctx, &e, NULL);
        announce(name);
        wsp_ggml_backend_sched_graph_compute(e.sched, g);
    } else if (strcmp(name, "null_sched_compute") == 0) {
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = valid_graph(ctx, &e, NULL);
        announce(name);
        wsp_ggml_backend_sched_graph_compute(NULL, g);
    } else if (strcmp(name, "null_graph") == 0) {
        env_sched_measured(&e);
        announce(name);
        wsp_ggml_backend_sched_graph_compute(e.sched, NULL);
    } else if (strcmp(name, "no_preallocated_tensor") == 0) {
        env_sched_measured(&e);
        // same shapes as the valid graph, but no tensor has memory anywhere
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_tensor * w = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, N, N);
        struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, N, 2);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, wsp_ggml_add(ctx, wsp_ggml_gelu(ctx, wsp_ggml_mul_mat(ctx, w, x)), x));
        announce(name);
        wsp_ggml_backend_sched_graph_compute(e.sched, g);
    } else if (strcmp(name, "n_backends_zero") == 0) {
        announce(name);
        wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(e.backends, 0);
        fprintf(stderr, "returned %s\n", s == NULL ? "NULL" : "non-NULL");
    } else if (strcmp(name, "n_backends_negative") == 0) {
        announce(name);
        wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(e.backends, -1);
        fprintf(stderr, "returned %s\n", s == NULL ? "NULL" : "non-NULL");
    } else if (strcmp(name, "null_backends_array") == 0) {
        announce(name);
        wsp_ggml_backend_sched_t s = wsp_ggml_backend_sched_new(NULL, 2);
        fprintf(stderr, "returned %s\n", s == NULL ? "NULL" : "non-NULL");
    } else if (strcmp(name, "source_without_memory_assigned_late") == 0) {
        // n0 = gelu(l) gets the CPU only in pass 3, from n1 = add(n0, x),
        // after pass 3 has passed it: the leaf l (no buffer, no data) never
        // gets a backend, and a copy of it would be allocated from nothing
        // (the original crashes in ggml-alloc).
        env_sched_measured(&e);
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_tensor * l = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, N, 2);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        wsp_ggml_build_forward_expand(g, wsp_ggml_add(ctx, wsp_ggml_gelu(ctx, l), e.x));
        announce(name);
        wsp_ggml_backend_sched_graph_compute(e.sched, g);
    } else if (strcmp(name, "node_rejected_where_its_consumer_runs") == 0) {
        // n0 = gelu_inplace(host) gets MIS_REJ only in pass 3, from its
        // consumer; MIS_REJ rejects unary ops, and n0 cannot move since it
        // works in its source's memory (a gelu that is not in place moves
        // to the CPU). (The measure lets it through, as the original did:
        // only a compute runs it.)
        struct test_backend_options o;
        memset(&o, 0, sizeof(o));
        int rejected[] = { WSP_GGML_OP_UNARY, -1 };
        o.name = "MIS_REJ";
        o.alignment = 32;
        o.has_buffer_hooks = true;
        o.rejected_ops = rejected;
        wsp_ggml_backend_t rej = test_backend_new(&o);
        CHECK(rej != NULL);
        struct su_store st_rej;
        su_store_init(&st_rej, rej, 1 << 14);
        struct wsp_ggml_context * wctx = make_ctx(1, false, true, 0);
        struct wsp_ggml_tensor * xr = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, 2);
        struct lcg r = lcg_new(2);
        su_store_put(&st_rej, xr, &r, 1.0f);
        struct wsp_ggml_context * hctx = su_host_ctx(1 << 16);
        struct wsp_ggml_tensor * host = wsp_ggml_new_tensor_2d(hctx, WSP_GGML_TYPE_F32, N, 2);
        su_fill_host(host, &r, 1.0f);
        wsp_ggml_backend_t backends[2] = { rej, e.cpu };
        e.sched = wsp_ggml_backend_sched_new(backends, 2);
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
        struct wsp_ggml_tensor * n0 = wsp_ggml_gelu_inplace(ctx, host);
        wsp_ggml_build_forward_expand(g, wsp_ggml_add(ctx, n0, wsp_ggml_add(ctx, host, xr)));
        wsp_ggml_backend_sched_init_measure(e.sched, g);
        announce(name);
        wsp_ggml_backend_sched_graph_compute(e.sched, g);
    } else if (strcmp(name, "null_node_entry") == 0) {
        env_sched_measured(&e);
        struct wsp_ggml_context * ctx = su_graph_ctx(16, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = valid_graph(ctx, &e, NULL);
        CHECK(g->n_nodes >= 2);
        g->nodes[1] = NULL;
        announce(name);
        wsp_ggml_backend_sched_graph_compute(e.sched, g);
    } else {
        fprintf(stderr, "unknown case %s\n", name);
        return 2;
    }
    fprintf(stderr, "NOT ABORTED: %s\n", name);
    return 3;
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        for (int i = 0; i < N_CASES; i++) {
            printf("%s\n", CASES[i]);
        }
        return 0;
    }
    return run_case(argv[1]);
}
