// Tensor data transfer: wsp_ggml_backend_tensor_set/get (full, offsets, partial),
// the async variants + synchronize, over CPU and test-backend buffers, for
// f32, f16, i32 and raw q8_0 bytes.
#include "common.h"
#include "test_backend.h"

enum { N_T = 6 };

struct io_case {
    wsp_ggml_backend_t backend;
    wsp_ggml_backend_buffer_t buffer;
    wsp_ggml_allocr_t allocr;      // legacy allocator over the buffer (tensors 0..2)
    wsp_ggml_tallocr_t tallocr;    // tensor allocator over a second buffer (tensors 3..5)
    wsp_ggml_backend_buffer_t buffer2;
    struct wsp_ggml_context * ctx;
    struct wsp_ggml_tensor * t[N_T];
};

static void make_tensors(struct io_case * c) {
    c->ctx = make_ctx(16, false, true, 0);
    c->t[0] = wsp_ggml_new_tensor_2d(c->ctx, WSP_GGML_TYPE_F32, 37, 5);
    c->t[1] = wsp_ggml_new_tensor_2d(c->ctx, WSP_GGML_TYPE_F16, 64, 3);
    c->t[2] = wsp_ggml_new_tensor_1d(c->ctx, WSP_GGML_TYPE_I32, 100);
    c->t[3] = wsp_ggml_new_tensor_2d(c->ctx, WSP_GGML_TYPE_Q8_0, 64, 4);
    c->t[4] = wsp_ggml_new_tensor_4d(c->ctx, WSP_GGML_TYPE_F32, 3, 4, 5, 2);
    c->t[5] = wsp_ggml_new_tensor_1d(c->ctx, WSP_GGML_TYPE_F32, 1);
    for (int i = 0; i < N_T; i++) {
        char name[16];
        snprintf(name, sizeof(name), "t%d", i);
        wsp_ggml_set_name(c->t[i], name);
    }
}

static void fill_host(struct lcg * r, const struct wsp_ggml_tensor * t, void * dst) {
    size_t nbytes = wsp_ggml_nbytes(t);
    if (t->type == WSP_GGML_TYPE_F32) {
        lcg_fill_f32(r, (float *)dst, nbytes / sizeof(float), 4.0f);
    } else if (t->type == WSP_GGML_TYPE_F16) {
        wsp_ggml_fp16_t * h = (wsp_ggml_fp16_t *)dst;
        for (size_t i = 0; i < nbytes / sizeof(wsp_ggml_fp16_t); i++) {
            h[i] = wsp_ggml_fp32_to_fp16(lcg_f32(r) * 2.0f);
        }
    } else if (t->type == WSP_GGML_TYPE_I32) {
        int32_t * v = (int32_t *)dst;
        for (size_t i = 0; i < nbytes / sizeof(int32_t); i++) {
            v[i] = (int32_t)lcg_u32(r);
        }
    } else {
        // raw bytes (q8_0 blocks are transferred verbatim)
        lcg_fill_bytes(r, dst, nbytes);
    }
}

static void run_case(const char * label, struct io_case * c, uint64_t seed, bool exact_offsets) {
    struct lcg r = lcg_new(seed);
    make_tensors(c);

    c->buffer = wsp_ggml_backend_alloc_buffer(c->backend, 8192);
    c->allocr = wsp_ggml_allocr_new_from_buffer(c->buffer);
    c->buffer2 = wsp_ggml_backend_alloc_buffer(c->backend, 4096);
    c->tallocr = wsp_ggml_tallocr_new_from_buffer(c->buffer2);
    for (int i = 0; i < 3; i++) {
        wsp_ggml_allocr_alloc(c->allocr, c->t[i]);
    }
    for (int i = 3; i < N_T; i++) {
        wsp_ggml_tallocr_alloc(c->tallocr, c->t[i]);
    }
    printf("%s backend=%s\n", label, wsp_ggml_backend_name(c->backend));
    for (int i = 0; i < N_T; i++) {
        wsp_ggml_backend_buffer_t b = i < 3 ? c->buffer : c->buffer2;
        long off = (long)((char *)c->t[i]->data - (char *)wsp_ggml_backend_buffer_get_base(b));
        printf("%s %s on=%s ", label, wsp_ggml_get_name(c->t[i]), wsp_ggml_backend_name(wsp_ggml_get_backend(c->t[i])));
        print_shape(c->t[i]);
        if (exact_offsets) {
            printf(" offset=%ld\n", off);
        } else {
            // the CPU buffer's base is not aligned in the original: offsets may be smaller in ours
            printf("\n~le %s %s offset %ld\n", label, wsp_ggml_get_name(c->t[i]), off);
        }
    }
    if (exact_offsets) {
        printf("%s allocr max=%zu tallocr max=%zu\n", label, wsp_ggml_allocr_max_size(c->allocr),
               wsp_ggml_tallocr_max_size(c->tallocr));
    } else {
        printf("~le %s allocr max %zu\n", label, wsp_ggml_allocr_max_size(c->allocr));
        printf("~le %s tallocr max %zu\n", label, wsp_ggml_tallocr_max_size(c->tallocr));
    }

    for (int i = 0; i < N_T; i++) {
        struct wsp_ggml_tensor * t = c->t[i];
        size_t nbytes = wsp_ggml_nbytes(t);
        char tl[64];
        uint8_t * src = (uint8_t *)malloc(nbytes);
        uint8_t * dst = (uint8_t *)malloc(nbytes);
        CHECK(src && dst);

        // 1. full set / get
        fill_host(&r, t, src);
        wsp_ggml_backend_tensor_set(t, src, 0, nbytes);
        memset(dst, 0, nbytes);
        wsp_ggml_backend_tensor_get(t, dst, 0, nbytes);
        snprintf(tl, sizeof(tl), "%s %s full", label, wsp_ggml_get_name(t));
        printf("%s roundtrip=%s ", tl, memcmp(src, dst, nbytes) == 0 ? "ok" : "BAD");
        print_host_data("", dst, nbytes, t->type, 4);

        // 2. partial set at an offset, then full get
        if (nbytes >= 8) {
            size_t off = (nbytes / 3) & ~(size_t)3;
            size_t len = nbytes / 4;
            if (len == 0) {
                len = 1;
            }
            uint8_t * patch = (uint8_t *)malloc(len);
            lcg_fill_bytes(&r, patch, len);
            wsp_ggml_backend_tensor_set(t, patch, off, len);
            memcpy(src + off, patch, len);
            wsp_ggml_backend_tensor_get(t, dst, 0, nbytes);
            snprintf(tl, sizeof(tl), "%s %s patch off=%zu len=%zu", label, wsp_ggml_get_name(t), off, len);
            printf("%s match=%s ", tl, memcmp(src, dst, nbytes) == 0 ? "ok" : "BAD");
            print_host_data("", dst, nbytes, WSP_GGML_TYPE_COUNT, 4);

            // 3. partial get at an offset (odd offset and length)
            size_t goff = 1 + nbytes / 5;
            size_t glen = nbytes - goff - 1;
            uint8_t * part = (uint8_t *)malloc(glen);
            wsp_ggml_backend_tensor_get(t, part, goff, glen);
            printf("%s %s partial get off=%zu len=%zu match=%s fnv=%016" PRIx64 "\n", label, wsp_ggml_get_name(t),
                   goff, glen, memcmp(part, src + goff, glen) == 0 ? "ok" : "BAD", fnv1a64(part, glen));
            free(part);
            free(patch);
        }

        // 4. last byte and first byte, size 1, and a zero-size transfer at the end
        {
            uint8_t one = 0x3c;
            wsp_ggml_backend_tensor_set(t, &one, nbytes - 1, 1);
            src[nbytes - 1] = one;
            uint8_t first = 0;
            wsp_ggml_backend_tensor_get(t, &first, 0, 1);
            wsp_ggml_backend_tensor_set(t, src, nbytes, 0);
            wsp_ggml_backend_tensor_get(t, dst, nbytes, 0);
            wsp_ggml_backend_tensor_get(t, dst, 0, nbytes);
            printf("%s %s edges first=%02x match=%s\n", label, wsp_ggml_get_name(t), first,
                   memcmp(src, dst, nbytes) == 0 ? "ok" : "BAD");
        }

        // 5. async: write in chunks of 7 bytes, synchronize, read back in chunks of 5
        {
            fill_host(&r, t, src);
            for (size_t o = 0; o < nbytes; o += 7) {
                size_t n = nbytes - o < 7 ? nbytes - o : 7;
                wsp_ggml_backend_tensor_set_async(t, src + o, o, n);
            }
            wsp_ggml_backend_synchronize(c->backend);
            memset(dst, 0, nbytes);
            for (size_t o = 0; o < nbytes; o += 5) {
                size_t n = nbytes - o < 5 ? nbytes - o : 5;
                wsp_ggml_backend_tensor_get_async(t, dst + o, o, n);
            }
            wsp_ggml_backend_synchronize(c->backend);
            snprintf(tl, sizeof(tl), "%s %s async", label, wsp_ggml_get_name(t));
            printf("%s match=%s ", tl, memcmp(src, dst, nbytes) == 0 ? "ok" : "BAD");
            print_host_data("", dst, nbytes, t->type, 3);
        }
        free(src);
        free(dst);
    }

    // 6. a view with its buffer set (as ggml-alloc does for views): set through the view
    {
        struct wsp_ggml_tensor * base = c->t[0];
        struct wsp_ggml_tensor * v = wsp_ggml_view_2d(c->ctx, base, 10, 3, base->nb[1], 2 * base->nb[0]);
        CHECK(v->data == (char *)base->data + 2 * base->nb[0]);
        v->buffer = base->buffer;
        printf("%s view backend=%s nbytes=%zu\n", label, wsp_ggml_backend_name(wsp_ggml_get_backend(v)), wsp_ggml_nbytes(v));
        float vals[10];
        for (int i = 0; i < 10; i++) {
            vals[i] = -1.5f * (float)(i + 1);
        }
        wsp_ggml_backend_tensor_set(v, vals, 0, sizeof(vals));
        float back[4];
        wsp_ggml_backend_tensor_get(v, back, 4 * sizeof(float), sizeof(back));
        printf("%s view get %a %a %a %a\n", label, (double)back[0], (double)back[1], (double)back[2], (double)back[3]);
        print_tensor(label, base, 6);
    }

    // 7. reset the allocator and allocate again: same placement
    {
        wsp_ggml_allocr_reset(c->allocr);
        struct wsp_ggml_context * c2 = make_ctx(4, false, true, 0);
        struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(c2, WSP_GGML_TYPE_F32, 37 * 5);
        wsp_ggml_allocr_alloc(c->allocr, a);
        printf("%s after reset same place=%d\n", label, (int)(a->data == c->t[0]->data));
        // old contents of t0 are visible through the new tensor
        float head[3];
        wsp_ggml_backend_tensor_get(a, head, 0, sizeof(head));
        printf("%s after reset head %a %a %a\n", label, (double)head[0], (double)head[1], (double)head[2]);
        wsp_ggml_free(c2);
    }

    wsp_ggml_allocr_free(c->allocr);
    wsp_ggml_tallocr_free(c->tallocr);
    wsp_ggml_backend_buffer_free(c->buffer);
    wsp_ggml_backend_buffer_free(c->buffer2);
    wsp_ggml_free(c->ctx);
}

int main(void) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    struct test_backend_options o1 = { "TIO_H", 64, true, true, true, NULL, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    struct test_backend_options o2 = { "TIO_P", 16, false, false, false, NULL, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    wsp_ggml_backend_t t1 = test_backend_new(&o1);
    wsp_ggml_backend_t t2 = test_backend_new(&o2);

    struct io_case cc = { 0 };
    cc.backend = cpu;
    run_case("cpu", &cc, 1, false);

    struct io_case c1 = { 0 };
    c1.backend = t1;
    run_case("th", &c1, 2, true);
    test_backend_print_stats(t1);

    struct io_case c2 = { 0 };
    c2.backend = t2;
    run_case("tp", &c2, 3, true);
    test_backend_print_stats(t2);

    printf("live test buffers: %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_free(t1);
    wsp_ggml_backend_free(t2);
    wsp_ggml_backend_free(cpu);
    return 0;
}
