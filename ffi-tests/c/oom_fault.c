// Out of memory, injected: the allocations the library makes (those called
// from its own code, told apart by the caller's address, which lies in the
// library's shared object) fail on request, in one client sequence: the
// CPU backend, a buffer, tensors through ggml-alloc, tensor_set/get/copy,
// a buffer over caller memory, a graph plan, a compute, a test backend,
// and the scheduler over both (init_measure, two computes of one graph,
// one of another), then every free.
//
//   OOM_FAIL_AT=N    the N-th allocation of the library fails (1-based);
//   OOM_FAIL_FROM=N  the N-th and every later one fails;
//   neither          nothing fails; prints how many there were.
//
// Where a function returns NULL for it (cpu_init, alloc_buffer,
// cpu_buffer_from_ptr, graph_plan_create, and buffer_init under the test
// backend's alloc_buffer), the program prints "null <function>" and, with
// OOM_FAIL_AT, calls it again (the library is still usable: this time it
// works) and goes on; with OOM_FAIL_FROM it frees what it has and ends.
// Elsewhere the library stops with its message; a SIGABRT handler then
// prints "in <function>", the call the program was making, for the test
// (ffi-tests/tests/oom.rs) to compare with the function the message names.
// Output: "allocations <n>", the library allocations made.
#include "sched_util.h"

#include <link.h>
#include <signal.h>
#include <unistd.h>

extern void * __libc_malloc(size_t);
extern void * __libc_calloc(size_t, size_t);
extern void * __libc_realloc(void *, size_t);
extern void * __libc_memalign(size_t, size_t);
extern void __libc_free(void *);

// The library's executable segments, and the injection state.
#define MAX_SEGMENTS 8
static uintptr_t g_seg_lo[MAX_SEGMENTS], g_seg_hi[MAX_SEGMENTS];
static int g_n_segs;
static volatile int g_armed;
static long g_count, g_fail_at, g_fail_from;
static const char * volatile g_call = "(none)";

static int find_segments(struct dl_phdr_info * info, size_t size, void * data) {
    (void)size;
    (void)data;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libwsp_ggml_backend") == NULL) {
        return 0;
    }
    for (int i = 0; i < info->dlpi_phnum && g_n_segs < MAX_SEGMENTS; i++) {
        const ElfW(Phdr) * ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            g_seg_lo[g_n_segs] = info->dlpi_addr + ph->p_vaddr;
            g_seg_hi[g_n_segs] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
            g_n_segs++;
        }
    }
    return 1;
}

static int from_library(const void * caller) {
    uintptr_t a = (uintptr_t)caller;
    for (int i = 0; i < g_n_segs; i++) {
        if (a >= g_seg_lo[i] && a < g_seg_hi[i]) {
            return 1;
        }
    }
    return 0;
}

// Whether this allocation (made by `caller`) fails.
static int inject(const void * caller) {
    if (!g_armed || !from_library(caller)) {
        return 0;
    }
    long n = ++g_count;
    return n == g_fail_at || (g_fail_from > 0 && n >= g_fail_from);
}

void * malloc(size_t n) {
    return inject(__builtin_return_address(0)) ? NULL : __libc_malloc(n);
}

void * calloc(size_t n, size_t m) {
    return inject(__builtin_return_address(0)) ? NULL : __libc_calloc(n, m);
}

void * realloc(void * p, size_t n) {
    return inject(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n);
}

void free(void * p) {
    __libc_free(p);
}

int posix_memalign(void ** out, size_t align, size_t n) {
    if (inject(__builtin_return_address(0))) {
        return 12; // ENOMEM
    }
    void * p = __libc_memalign(align, n);
    if (p == NULL) {
        return 12;
    }
    *out = p;
    return 0;
}

void * aligned_alloc(size_t align, size_t n) {
    return inject(__builtin_return_address(0)) ? NULL : __libc_memalign(align, n);
}

void * memalign(size_t align, size_t n) {
    return inject(__builtin_return_address(0)) ? NULL : __libc_memalign(align, n);
}

static void on_abort(int sig) {
    (void)sig;
    const char * a = "in ";
    ssize_t w = write(2, a, strlen(a));
    w = write(2, (const char *)g_call, strlen((const char *)g_call));
    w = write(2, "\n", 1);
    (void)w;
    signal(SIGABRT, SIG_DFL);
    raise(SIGABRT);
}

// `expr`, made as the call `name` (the name an abort reports).
#define CALL(name, expr) (g_call = #name, name expr)

// Everything the program holds, freed in reverse order by finish().
static wsp_ggml_backend_t g_cpu, g_t0;
static wsp_ggml_backend_buffer_t g_buf;
static wsp_ggml_allocr_t g_allocr;
static struct wsp_ggml_context * g_ctx, * g_gctx;
static struct su_store g_st, g_sc;
static wsp_ggml_backend_sched_t g_sched;

static void finish(void) {
    if (g_sched != NULL) {
        CALL(wsp_ggml_backend_sched_free, (g_sched));
    }
    if (g_gctx != NULL) {
        wsp_ggml_free(g_gctx);
    }
    su_store_free(&g_st);
    su_store_free(&g_sc);
    if (g_allocr != NULL) {
        wsp_ggml_allocr_free(g_allocr);
    }
    if (g_buf != NULL) {
        CALL(wsp_ggml_backend_buffer_free, (g_buf));
    }
    if (g_ctx != NULL) {
        wsp_ggml_free(g_ctx);
    }
    if (g_t0 != NULL) {
        CALL(wsp_ggml_backend_free, (g_t0));
    }
    if (g_cpu != NULL) {
        CALL(wsp_ggml_backend_free, (g_cpu));
    }
    g_armed = 0;
    printf("allocations %ld\n", g_count);
    fflush(stdout);
}

// A NULL from `name`: with OOM_FAIL_FROM nothing more can be made (end
// here); with OOM_FAIL_AT the caller calls again.
static void null_from(const char * name) {
    printf("null %s\n", name);
    if (g_fail_from > 0) {
        finish();
        exit(0);
    }
}

// A store's buffer and allocator, with a NULL buffer handled as above.
static void store_init(struct su_store * s, wsp_ggml_backend_t backend, size_t size) {
    s->backend = backend;
    s->buffer = CALL(wsp_ggml_backend_alloc_buffer, (backend, size));
    if (s->buffer == NULL) {
        null_from("wsp_ggml_backend_alloc_buffer");
        s->buffer = CALL(wsp_ggml_backend_alloc_buffer, (backend, size));
        CHECK(s->buffer != NULL);
    }
    s->alloc = wsp_ggml_allocr_new_from_buffer(s->buffer);
    CHECK(s->alloc != NULL);
}

static struct wsp_ggml_cgraph * sched_graph(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * w0,
                                            struct wsp_ggml_tensor * w1, struct wsp_ggml_tensor * x, int layers) {
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    struct wsp_ggml_tensor * h = x;
    for (int l = 0; l < layers; l++) {
        struct wsp_ggml_tensor * y = wsp_ggml_mul_mat(ctx, w0, h);                            // TEST0
        h = wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, w1, y), x)); // CPU
    }
    wsp_ggml_build_forward_expand(g, h);
    return g;
}

int main(void) {
    const char * at = getenv("OOM_FAIL_AT");
    const char * from = getenv("OOM_FAIL_FROM");
    g_fail_at = at != NULL ? atol(at) : 0;
    g_fail_from = from != NULL ? atol(from) : 0;
    signal(SIGABRT, on_abort);
    dl_iterate_phdr(find_segments, NULL);
    CHECK(g_n_segs > 0); // linked with the shared library
    struct lcg r = lcg_new(7);
    g_armed = 1;

    // the CPU backend and a buffer of it
    g_cpu = CALL(wsp_ggml_backend_cpu_init, ());
    if (g_cpu == NULL) {
        null_from("wsp_ggml_backend_cpu_init");
        g_cpu = CALL(wsp_ggml_backend_cpu_init, ());
        CHECK(g_cpu != NULL);
    }
    CALL(wsp_ggml_backend_cpu_set_n_threads, (g_cpu, 1));
    g_buf = CALL(wsp_ggml_backend_alloc_buffer, (g_cpu, 1 << 16));
    if (g_buf == NULL) {
        null_from("wsp_ggml_backend_alloc_buffer");
        g_buf = CALL(wsp_ggml_backend_alloc_buffer, (g_cpu, 1 << 16));
        CHECK(g_buf != NULL);
    }

    // tensors through ggml-alloc, and their I/O
    g_ctx = make_ctx(16, true, true, 0);
    g_allocr = wsp_ggml_allocr_new_from_buffer(g_buf);
    CHECK(g_allocr != NULL);
    struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(g_ctx, WSP_GGML_TYPE_F32, 256);
    struct wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(g_ctx, WSP_GGML_TYPE_F32, 256);
    wsp_ggml_allocr_alloc(g_allocr, a);
    wsp_ggml_allocr_alloc(g_allocr, b);
    float host[256];
    lcg_fill_f32(&r, host, 256, 1.0f);
    CALL(wsp_ggml_backend_tensor_set, (a, host, 0, sizeof(host)));
    CALL(wsp_ggml_backend_tensor_copy, (a, b));
    CALL(wsp_ggml_backend_tensor_get, (b, host, 0, sizeof(host)));

    // a buffer over the caller's memory
    static _Alignas(64) unsigned char mem[4096];
    wsp_ggml_backend_buffer_t fb = CALL(wsp_ggml_backend_cpu_buffer_from_ptr, (g_cpu, mem, sizeof(mem)));
    if (fb == NULL) {
        null_from("wsp_ggml_backend_cpu_buffer_from_ptr");
        fb = CALL(wsp_ggml_backend_cpu_buffer_from_ptr, (g_cpu, mem, sizeof(mem)));
        CHECK(fb != NULL);
    }
    CALL(wsp_ggml_backend_buffer_free, (fb));

    // a graph plan, and a compute
    struct wsp_ggml_cgraph * g = wsp_ggml_new_graph(g_ctx);
    struct wsp_ggml_tensor * c = wsp_ggml_mul(g_ctx, wsp_ggml_add(g_ctx, a, b), a);
    wsp_ggml_build_forward_expand(g, c);
    wsp_ggml_allocr_alloc_graph(g_allocr, g);
    wsp_ggml_backend_graph_plan_t plan = CALL(wsp_ggml_backend_graph_plan_create, (g_cpu, g));
    if (plan == NULL) {
        null_from("wsp_ggml_backend_graph_plan_create");
        plan = CALL(wsp_ggml_backend_graph_plan_create, (g_cpu, g));
        CHECK(plan != NULL);
    }
    CALL(wsp_ggml_backend_graph_plan_compute, (g_cpu, plan));
    CALL(wsp_ggml_backend_graph_plan_free, (g_cpu, plan));
    CALL(wsp_ggml_backend_graph_compute, (g_cpu, g));

    // a test backend (its buffers' structs are the library's), and the
    // scheduler over it and the CPU
    g_t0 = su_test_backend("TEST0", 32, true, true, true);
    store_init(&g_st, g_t0, 1 << 14);
    store_init(&g_sc, g_cpu, 1 << 14);
    struct wsp_ggml_context * wctx = g_ctx;
    struct wsp_ggml_tensor * w0 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, 16, 16);
    struct wsp_ggml_tensor * w1 = wsp_ggml_new_tensor_2d(wctx, WSP_GGML_TYPE_F32, 16, 16);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(wctx, WSP_GGML_TYPE_F32, 16);
    su_store_put(&g_st, w0, &r, 0.5f);
    su_store_put(&g_sc, w1, &r, 0.5f);
    su_store_put(&g_sc, x, &r, 1.0f);
    wsp_ggml_backend_t backends[2] = { g_t0, g_cpu };
    g_sched = CALL(wsp_ggml_backend_sched_new, (backends, 2));
    CHECK(g_sched != NULL);
    g_gctx = su_graph_ctx(64, WSP_GGML_DEFAULT_GRAPH_SIZE);
    CALL(wsp_ggml_backend_sched_init_measure, (g_sched, sched_graph(g_gctx, w0, w1, x, 3)));
    wsp_ggml_free(g_gctx);
    g_gctx = NULL;
    static const int layers[] = { 3, 3, 2 };
    for (int k = 0; k < 3; k++) {
        g_gctx = su_graph_ctx(64, WSP_GGML_DEFAULT_GRAPH_SIZE);
        CALL(wsp_ggml_backend_sched_graph_compute, (g_sched, sched_graph(g_gctx, w0, w1, x, layers[k])));
        wsp_ggml_free(g_gctx);
        g_gctx = NULL;
    }
    finish();
    return 0;
}
