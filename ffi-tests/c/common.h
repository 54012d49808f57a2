// Shared helpers for the differential C test programs.
//
// Output conventions (checked by the Rust harness that runs every program
// against the original ggml-backend.o and against the Rust library):
//   - plain lines must be byte-identical between the two builds;
//   - "~le <key...> <integer>" lines: the Rust build's value must be <= the original's;
//   - "~ ..." lines are informational and ignored.
// Never print addresses, timings or anything else that two correct
// implementations may legitimately disagree on.
#pragma once

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define COMMON_UNUSED_FN __attribute__((unused))
#else
#define COMMON_UNUSED_FN
#endif

// Abort with a message (on stdout too, so that the harness diff shows where it stopped).
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fflush(stdout);                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

// ---------------------------------------------------------------------------
// deterministic data

struct lcg {
    uint64_t state;
};

static COMMON_UNUSED_FN struct lcg lcg_new(uint64_t seed) {
    struct lcg r = { seed * 6364136223846793005ULL + 1442695040888963407ULL };
    return r;
}

static COMMON_UNUSED_FN uint32_t lcg_u32(struct lcg * r) {
    r->state = r->state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(r->state >> 32);
}

// uniform in [-1, 1), exactly representable (multiples of 2^-23)
static COMMON_UNUSED_FN float lcg_f32(struct lcg * r) {
    int32_t v = (int32_t)(lcg_u32(r) >> 8) - (1 << 23);
    return (float)v / (float)(1 << 23);
}

static COMMON_UNUSED_FN void lcg_fill_f32(struct lcg * r, float * dst, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = lcg_f32(r) * scale;
    }
}

static COMMON_UNUSED_FN void lcg_fill_bytes(struct lcg * r, void * dst, size_t n) {
    uint8_t * p = (uint8_t *)dst;
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)(lcg_u32(r) >> 24);
    }
}

// ---------------------------------------------------------------------------
// hashing

static COMMON_UNUSED_FN uint64_t fnv1a64(const void * data, size_t n) {
    const uint8_t * p = (const uint8_t *)data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

// ---------------------------------------------------------------------------
// printing

static COMMON_UNUSED_FN void print_shape(const struct wsp_ggml_tensor * t) {
    printf("%s[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]",
           wsp_ggml_type_name(t->type), t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
}

// Print host bytes: size, hash and, for f32 data, up to n_show values in %a.
static COMMON_UNUSED_FN void print_host_data(const char * label, const void * data, size_t nbytes,
                                             enum wsp_ggml_type type, int n_show) {
    printf("%s nbytes=%zu fnv=%016" PRIx64, label, nbytes, fnv1a64(data, nbytes));
    if (type == WSP_GGML_TYPE_F32) {
        const float * f = (const float *)data;
        size_t n = nbytes / sizeof(float);
        for (size_t i = 0; i < n && (int)i < n_show; i++) {
            printf(" %a", (double)f[i]);
        }
        if (n > 0) {
            printf(" last=%a", (double)f[n - 1]);
        }
    } else if (type == WSP_GGML_TYPE_I32) {
        const int32_t * v = (const int32_t *)data;
        size_t n = nbytes / sizeof(int32_t);
        for (size_t i = 0; i < n && (int)i < n_show; i++) {
            printf(" %" PRId32, v[i]);
        }
    } else {
        const uint8_t * b = (const uint8_t *)data;
        printf(" ");
        for (size_t i = 0; i < nbytes && (int)i < 4 * n_show; i++) {
            printf("%02x", b[i]);
        }
    }
    printf("\n");
}

// Read a (contiguous) tensor through wsp_ggml_backend_tensor_get and print it.
static COMMON_UNUSED_FN void print_tensor(const char * label, const struct wsp_ggml_tensor * t, int n_show) {
    size_t nbytes = wsp_ggml_nbytes(t);
    void * buf = malloc(nbytes > 0 ? nbytes : 1);
    CHECK(buf != NULL);
    wsp_ggml_backend_tensor_get(t, buf, 0, nbytes);
    printf("%s ", label);
    print_shape(t);
    print_host_data("", buf, nbytes, t->type, n_show);
    free(buf);
}

// Every f32 value of a tensor, in hex (for small outputs that must match bit for bit).
static COMMON_UNUSED_FN void print_tensor_all_f32(const char * label, const struct wsp_ggml_tensor * t) {
    CHECK(t->type == WSP_GGML_TYPE_F32);
    size_t nbytes = wsp_ggml_nbytes(t);
    float * buf = (float *)malloc(nbytes > 0 ? nbytes : 1);
    CHECK(buf != NULL);
    wsp_ggml_backend_tensor_get(t, buf, 0, nbytes);
    size_t n = nbytes / sizeof(float);
    printf("%s all fnv=%016" PRIx64 ":", label, fnv1a64(buf, nbytes));
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &buf[i], sizeof(bits));
        printf("%s%08" PRIx32, (i % 16 == 0) ? "\n  " : " ", bits);
    }
    printf("\n");
    free(buf);
}

static COMMON_UNUSED_FN struct wsp_ggml_context * make_ctx(size_t n_tensors, bool with_graph, bool no_alloc, size_t extra) {
    struct wsp_ggml_init_params p = {
        /*.mem_size   =*/ n_tensors * wsp_ggml_tensor_overhead() + (with_graph ? wsp_ggml_graph_overhead() : 0) + extra,
        /*.mem_buffer =*/ NULL,
        /*.no_alloc   =*/ no_alloc,
    };
    struct wsp_ggml_context * ctx = wsp_ggml_init(p);
    CHECK(ctx != NULL);
    return ctx;
}
