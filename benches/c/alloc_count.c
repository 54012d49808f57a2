// Heap accounting for the `sched_mem` binary only: it is linked with
// -Wl,--wrap=malloc,... so that every allocation made by C code (ggml, the
// original ggml-backend.c, the test backends) and by Rust code (our library,
// through std's System allocator, which calls malloc/posix_memalign) passes
// through here. Counts are by malloc_usable_size, i.e. what the heap really
// hands out. Single-threaded use only (the scheduler benchmarks use 1 thread).
#define _GNU_SOURCE
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

struct bench_alloc_stats {
    uint64_t n_allocs;   // calls that returned a block (malloc, calloc, realloc, *memalign, aligned_alloc)
    uint64_t bytes;      // usable bytes of those blocks, cumulative
    int64_t live;        // usable bytes currently allocated
    int64_t peak;        // maximum of live since the last reset
};

static struct bench_alloc_stats g_stats;

void * __real_malloc(size_t);
void __real_free(void *);
void * __real_calloc(size_t, size_t);
void * __real_realloc(void *, size_t);
int __real_posix_memalign(void **, size_t, size_t);
void * __real_aligned_alloc(size_t, size_t);
void * __real_memalign(size_t, size_t);

static void on_alloc(void * p) {
    if (p != NULL) {
        size_t n = malloc_usable_size(p);
        g_stats.n_allocs++;
        g_stats.bytes += n;
        g_stats.live += (int64_t)n;
        if (g_stats.live > g_stats.peak) {
            g_stats.peak = g_stats.live;
        }
    }
}

static void on_free(void * p) {
    if (p != NULL) {
        g_stats.live -= (int64_t)malloc_usable_size(p);
    }
}

void * __wrap_malloc(size_t n) {
    void * p = __real_malloc(n);
    on_alloc(p);
    return p;
}

void __wrap_free(void * p) {
    on_free(p);
    __real_free(p);
}

void * __wrap_calloc(size_t a, size_t b) {
    void * p = __real_calloc(a, b);
    on_alloc(p);
    return p;
}

void * __wrap_realloc(void * old, size_t n) {
    size_t before = old != NULL ? malloc_usable_size(old) : 0;
    void * p = __real_realloc(old, n);
    if (p != NULL || n == 0) {
        g_stats.live -= (int64_t)before;
        on_alloc(p);
    }
    return p;
}

int __wrap_posix_memalign(void ** out, size_t align, size_t n) {
    int rc = __real_posix_memalign(out, align, n);
    if (rc == 0) {
        on_alloc(*out);
    }
    return rc;
}

void * __wrap_aligned_alloc(size_t align, size_t n) {
    void * p = __real_aligned_alloc(align, n);
    on_alloc(p);
    return p;
}

void * __wrap_memalign(size_t align, size_t n) {
    void * p = __real_memalign(align, n);
    on_alloc(p);
    return p;
}

void bench_alloc_stats(struct bench_alloc_stats * out) {
    *out = g_stats;
}

void bench_alloc_reset_peak(void) {
    g_stats.peak = g_stats.live;
}
