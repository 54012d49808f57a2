// Heap allocations made inside wsp_ggml_backend_sched_graph_compute.
//
// The program replaces malloc and its family (glibc's __libc_* functions do
// the work) and counts every call made while a compute runs: by the
// scheduler, the backends and ggml. Graphs are built as clients build them,
// in a fresh context (ggml_init allocating its own memory) before every
// compute: a small decoder (per layer, attention over a KV cache on a test
// backend and one on the CPU, written at position n_past with a cpy into a
// view), with the number of layers and n_past changing between computes.
//
// After init_measure with the largest graph, no compute allocates: the
// same graph again, and graphs no larger (fewer layers, a shorter n_past), also when the graphs are rebuilt in one fixed
// block (the same addresses: the split is reused). Output: "allocs c<k>
// <what> <n>" per compute and the output's bytes; the original prints the
// same (it allocates nothing in a compute either). The first compute's
// count is compared with the original's only: the test backend's CUDA
// pattern allocates its ring of extras at a buffer's first init_tensor, as
// ggml-cuda.cu does.
#include "sched_util.h"

#include <malloc.h>

extern void * __libc_malloc(size_t);
extern void * __libc_calloc(size_t, size_t);
extern void * __libc_realloc(void *, size_t);
extern void * __libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile int g_counting;
static long g_allocs;
static volatile int g_step; // (for a debugger: the compute being counted)

void * malloc(size_t n) {
    g_allocs += g_counting;
    return __libc_malloc(n);
}

void * calloc(size_t n, size_t m) {
    g_allocs += g_counting;
    return __libc_calloc(n, m);
}

void * realloc(void * p, size_t n) {
    g_allocs += g_counting;
    return __libc_realloc(p, n);
}

void free(void * p) {
    __libc_free(p);
}

int posix_memalign(void ** out, size_t align, size_t n) {
    g_allocs += g_counting;
    void * p = __libc_memalign(align, n);
    if (p == NULL) {
        return 12; // ENOMEM
    }
    *out = p;
    return 0;
}

void * aligned_alloc(size_t align, size_t n) {
    g_allocs += g_counting;
    return __libc_memalign(align, n);
}

void * memalign(size_t align, size_t n) {
    g_allocs += g_counting;
    return __libc_memalign(align, n);
}

#define N 16
#define MAXP 12
#define MAXL 4

struct model {
    struct wsp_ggml_tensor * wq[MAXL]; // TEST0
    struct wsp_ggml_tensor * wk[MAXL]; // CPU
    struct wsp_ggml_tensor * kc[MAXL]; // TEST0 [N * MAXP]: key cache
    struct wsp_ggml_tensor * vc[MAXL]; // CPU [MAXP, N]: value cache, transposed
    struct wsp_ggml_tensor * x;        // CPU [N]
};

static struct wsp_ggml_cgraph * build(struct wsp_ggml_context * ctx, const struct model * m, int n_layers, int n_past,
                                      struct wsp_ggml_tensor ** out) {
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    struct wsp_ggml_tensor * x = m->x;
    for (int l = 0; l < n_layers; l++) {
        struct wsp_ggml_tensor * q = wsp_ggml_mul_mat(ctx, m->wq[l], x); // [N, 1] TEST0
        struct wsp_ggml_tensor * k = wsp_ggml_mul_mat(ctx, m->wk[l], x); // [N, 1] CPU
        struct wsp_ggml_tensor * kslot = wsp_ggml_view_1d(ctx, m->kc[l], N, (size_t)n_past * N * sizeof(float));
        wsp_ggml_build_forward_expand(g, wsp_ggml_cpy(ctx, k, kslot));
        struct wsp_ggml_tensor * vslot = wsp_ggml_view_2d(ctx, m->vc[l], 1, N, m->vc[l]->nb[1], (size_t)n_past * sizeof(float));
        wsp_ggml_build_forward_expand(g, wsp_ggml_cpy(ctx, wsp_ggml_reshape_2d(ctx, q, 1, N), vslot));
        struct wsp_ggml_tensor * K = wsp_ggml_view_2d(ctx, m->kc[l], N, n_past + 1, N * sizeof(float), 0);
        struct wsp_ggml_tensor * s = wsp_ggml_soft_max(ctx, wsp_ggml_mul_mat(ctx, K, q));
        struct wsp_ggml_tensor * V = wsp_ggml_view_2d(ctx, m->vc[l], n_past + 1, N, m->vc[l]->nb[1], 0);
        x = wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, V, s), x)); // [N, 1] CPU
    }
    wsp_ggml_build_forward_expand(g, x);
    *out = x;
    return g;
}

// The heap allocations one compute of `g` makes.
static long counted_compute(wsp_ggml_backend_sched_t sched, struct wsp_ggml_cgraph * g, int step) {
    g_allocs = 0;
    g_step = step;
    g_counting = 1;
    wsp_ggml_backend_sched_graph_compute(sched, g);
    g_counting = 0;
    return g_allocs;
}

int main(void) {
    // (stdout's buffer is ours, not one stdio allocates in a compute)
    static char out_buf[1 << 16];
    setvbuf(stdout, out_buf, _IOFBF, sizeof(out_buf));
    wsp_ggml_backend_t t0 = su_test_backend("TEST0", 32, true, true, true);
    wsp_ggml_backend_t cpu = su_cpu_backend();
    struct su_store st, sc;
    su_store_init(&st, t0, 1 << 16);
    su_store_init(&sc, cpu, 1 << 16);
    struct wsp_ggml_context * wctx = make_ctx(4 * MAXL + 1, false, true, 0);
    struct lcg r = lcg_new(5);
    struct model m;
    for (int l = 0; l < MAXL; l++) {
        m.wq[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
        m.wk[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, N, N);
        m.kc[l] = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N * MAXP);
        m.vc[l] = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, MAXP, N);
        su_store_put(&st, m.wq[l], &r, 0.5f);
        su_store_put(&sc, m.wk[l], &r, 0.5f);
        su_store_put(&st, m.kc[l], &r, 0.1f);
        su_store_put(&sc, m.vc[l], &r, 0.1f);
    }
    m.x = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, N);
    su_store_put(&sc, m.x, &r, 1.0f);

    wsp_ggml_backend_t backends[2] = { t0, cpu };
    wsp_ggml_backend_sched_t sched = wsp_ggml_backend_sched_new(backends, 2);
    struct wsp_ggml_tensor * out;
    {
        struct wsp_ggml_context * ctx = su_graph_ctx(64 * MAXL, WSP_GGML_DEFAULT_GRAPH_SIZE);
        wsp_ggml_backend_sched_init_measure(sched, build(ctx, &m, MAXL, MAXP - 1, &out));
        wsp_ggml_free(ctx);
    }
    // (layers, n_past) of each compute: the largest first, then the same
    // again, then a decoder's growing n_past, then fewer layers
    static const int steps[][2] = { { MAXL, MAXP - 1 }, { MAXL, MAXP - 1 }, { MAXL, 0 }, { MAXL, 1 }, { MAXL, 2 },
                                    { MAXL, 3 }, { MAXL, 3 }, { 2, 4 }, { 3, 5 }, { 1, 0 }, { MAXL, 6 }, { MAXL, MAXP - 1 } };
    int n_steps = (int)(sizeof(steps) / sizeof(steps[0]));
    for (int k = 0; k < n_steps; k++) {
        struct wsp_ggml_context * ctx = su_graph_ctx(64 * MAXL, WSP_GGML_DEFAULT_GRAPH_SIZE);
        struct wsp_ggml_cgraph * g = build(ctx, &m, steps[k][0], steps[k][1], &out);
        long n = counted_compute(sched, g, k);
        const char * what = k == 0 ? "first" : k == 1 || k == 6 ? "same" : "new-no-larger";
        printf("allocs c%d %s %ld\n", k, what, n);
        print_tensor("out", out, 4);
        wsp_ggml_free(ctx);
    }
    // graphs rebuilt in one fixed block (the same addresses every time: the
    // scheduler reuses its split and placement), a smaller one between
    static const int fixed[][2] = { { MAXL, 5 }, { MAXL, 5 }, { MAXL, 5 }, { 2, 1 }, { MAXL, 5 } };
    for (int k = 0; k < (int)(sizeof(fixed) / sizeof(fixed[0])); k++) {
        struct wsp_ggml_context * ctx = su_fixed_ctx();
        struct wsp_ggml_cgraph * g = build(ctx, &m, fixed[k][0], fixed[k][1], &out);
        printf("allocs c%d fixed-block %ld\n", n_steps + k, counted_compute(sched, g, n_steps + k));
        print_tensor("out", out, 4);
        wsp_ggml_free(ctx);
    }
    wsp_ggml_backend_sched_free(sched);

    // Two backends that copy only through get + set (no cpy_tensor_from or
    // _to, as CUDA's backend), split inputs copied between them: the
    // original mallocs a host buffer for every such copy, so these counts
    // are "~le" lines (ours no more than the original's); the test requires
    // 0 after the first compute.
    {
        wsp_ggml_backend_t ta = su_test_backend("TESTA", 32, false, false, true);
        wsp_ggml_backend_t tb = su_test_backend("TESTB", 32, false, false, true);
        struct su_store sa, sb;
        su_store_init(&sa, ta, 1 << 16);
        su_store_init(&sb, tb, 1 << 16);
        struct wsp_ggml_context * w2 = make_ctx(3, false, true, 0);
        struct wsp_ggml_tensor * wa = wsp_ggml_new_tensor_2d(w2, WSP_GGML_TYPE_F32, N, N);
        struct wsp_ggml_tensor * wb = wsp_ggml_new_tensor_2d(w2, WSP_GGML_TYPE_F32, N, N);
        struct wsp_ggml_tensor * x2 = wsp_ggml_new_tensor_1d(w2, WSP_GGML_TYPE_F32, N);
        su_store_put(&sa, wa, &r, 0.5f);
        su_store_put(&sb, wb, &r, 0.5f);
        su_store_put(&sa, x2, &r, 1.0f);
        wsp_ggml_backend_t three[3] = { ta, tb, cpu };
        wsp_ggml_backend_sched_t s2 = wsp_ggml_backend_sched_new(three, 3);
        // rounds of: on TESTA, then on TESTB (each round copies twice)
        static const int rounds[] = { 3, 3, 3, 2, 1, 3 };
        for (int k = -1; k < (int)(sizeof(rounds) / sizeof(rounds[0])); k++) {
            struct wsp_ggml_context * ctx = su_graph_ctx(64, WSP_GGML_DEFAULT_GRAPH_SIZE);
            struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
            struct wsp_ggml_tensor * y = x2;
            for (int i = 0; i < (k < 0 ? 3 : rounds[k]); i++) {
                y = wsp_ggml_gelu(ctx, wsp_ggml_mul_mat(ctx, wa, y));
                y = wsp_ggml_gelu(ctx, wsp_ggml_mul_mat(ctx, wb, y));
            }
            wsp_ggml_build_forward_expand(g, y);
            if (k < 0) {
                wsp_ggml_backend_sched_init_measure(s2, g);
            } else {
                long n = counted_compute(s2, g, k);
                const char * what = k == 0 ? "first" : k == 1 || k == 2 ? "same" : "new-no-larger";
                printf("~le allocs get-set c%d %s %ld\n", k, what, n);
                print_tensor("out", y, 4);
            }
            wsp_ggml_free(ctx);
        }
        wsp_ggml_backend_sched_free(s2);
        su_store_free(&sa);
        su_store_free(&sb);
        wsp_ggml_free(w2);
        wsp_ggml_backend_free(ta);
        wsp_ggml_backend_free(tb);
    }
    su_store_free(&st);
    su_store_free(&sc);
    wsp_ggml_free(wctx);
    wsp_ggml_backend_free(t0);
    wsp_ggml_backend_free(cpu);
    printf("live_test_buffers %ld\n", test_backend_live_buffers());
    return 0;
}
