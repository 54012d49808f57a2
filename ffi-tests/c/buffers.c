// Backend buffers: sizes, alignment, alloc sizes, tensor hooks, backend lookup,
// buffers from pointers, and freeing (including NULL).
#include "common.h"
#include "test_backend.h"

static void print_buffer(const char * label, wsp_ggml_backend_buffer_t buf, bool has_backend) {
    printf("%s size=%zu", label, wsp_ggml_backend_buffer_get_size(buf));
    if (has_backend) {
        // the original dereferences buffer->backend here, so only with a backend
        printf(" alignment=%zu", wsp_ggml_backend_buffer_get_alignment(buf));
    }
    void * base = wsp_ggml_backend_buffer_get_base(buf);
    printf(" %s\n", base != NULL ? "base ok" : "base NULL");
}

// tensors of several types and shapes in a no_alloc context (no data, no buffer)
struct shapes {
    struct wsp_ggml_context * ctx;
    struct wsp_ggml_tensor * t[8];
    int n;
};

static struct shapes make_shapes(void) {
    struct shapes s;
    s.ctx = make_ctx(16, false, true, 0);
    s.n = 0;
    s.t[s.n++] = wsp_ggml_new_tensor_1d(s.ctx, WSP_GGML_TYPE_F32, 1);
    s.t[s.n++] = wsp_ggml_new_tensor_2d(s.ctx, WSP_GGML_TYPE_F32, 10, 3);
    s.t[s.n++] = wsp_ggml_new_tensor_1d(s.ctx, WSP_GGML_TYPE_F16, 7);
    s.t[s.n++] = wsp_ggml_new_tensor_3d(s.ctx, WSP_GGML_TYPE_I32, 5, 5, 2);
    s.t[s.n++] = wsp_ggml_new_tensor_2d(s.ctx, WSP_GGML_TYPE_Q4_0, 64, 2);
    s.t[s.n++] = wsp_ggml_new_tensor_2d(s.ctx, WSP_GGML_TYPE_Q8_0, 32, 3);
    s.t[s.n++] = wsp_ggml_new_tensor_4d(s.ctx, WSP_GGML_TYPE_F32, 3, 4, 5, 2);
    s.t[s.n++] = wsp_ggml_new_tensor_1d(s.ctx, WSP_GGML_TYPE_I8, 33);
    for (int i = 0; i < s.n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "s%d", i);
        wsp_ggml_set_name(s.t[i], name);
    }
    return s;
}

static void print_alloc_sizes(const char * label, wsp_ggml_backend_buffer_t buf, struct shapes * s) {
    for (int i = 0; i < s->n; i++) {
        printf("%s alloc_size %s ", label, wsp_ggml_get_name(s->t[i]));
        print_shape(s->t[i]);
        printf(" nbytes=%zu alloc=%zu\n", wsp_ggml_nbytes(s->t[i]), wsp_ggml_backend_buffer_get_alloc_size(buf, s->t[i]));
    }
}

static void print_exact_hook_stats(wsp_ggml_backend_t b) {
    struct test_backend_stats * st = test_backend_stats(b);
    printf("hooks %s get_alloc_size=%ld init_tensor=%ld free_tensor=%ld alloc_buffer=%ld free_buffer=%ld\n",
           wsp_ggml_backend_name(b), st->calls[TB_BUF_GET_ALLOC_SIZE], st->calls[TB_BUF_INIT_TENSOR],
           st->calls[TB_BUF_FREE_TENSOR], st->calls[TB_ALLOC_BUFFER], st->calls[TB_BUF_FREE_BUFFER]);
}

int main(void) {
    // ggml context first: initializes ggml's tables
    struct shapes s = make_shapes();

    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    CHECK(cpu != NULL);

    struct test_backend_options o_hooks = { "TESTH", 32, true, true, true, NULL, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    struct test_backend_options o_plain = { "TESTP", 256, false, false, false, NULL, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    wsp_ggml_backend_t th = test_backend_new(&o_hooks);
    wsp_ggml_backend_t tp = test_backend_new(&o_plain);

    printf("name cpu=%s th=%s tp=%s null=%s\n", wsp_ggml_backend_name(cpu), wsp_ggml_backend_name(th),
           wsp_ggml_backend_name(tp), wsp_ggml_backend_name(NULL));
    printf("is_cpu cpu=%d th=%d tp=%d\n", (int)wsp_ggml_backend_is_cpu(cpu), (int)wsp_ggml_backend_is_cpu(th),
           (int)wsp_ggml_backend_is_cpu(tp));
    printf("alignment cpu=%zu th=%zu tp=%zu\n", wsp_ggml_backend_get_alignment(cpu),
           wsp_ggml_backend_get_alignment(th), wsp_ggml_backend_get_alignment(tp));

    // --- buffers of several sizes on every backend
    const size_t sizes[] = { 0, 1, 100, 4096, (size_t)1 << 20 };
    wsp_ggml_backend_t backends[] = { cpu, th, tp };
    for (int bi = 0; bi < 3; bi++) {
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
            wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_buffer(backends[bi], sizes[si]);
            CHECK(buf != NULL);
            char label[64];
            snprintf(label, sizeof(label), "buffer %s req=%zu", wsp_ggml_backend_name(backends[bi]), sizes[si]);
            print_buffer(label, buf, true);
            if (sizes[si] == 100) {
                print_alloc_sizes(label, buf, &s);
            }
            // the whole reported range is usable on the CPU backend
            if (bi == 0 && sizes[si] > 0) {
                char * base = (char *)wsp_ggml_backend_buffer_get_base(buf);
                memset(base, 0x5a, sizes[si]);
                printf("%s write ok\n", label);
            }
            wsp_ggml_backend_buffer_free(buf);
        }
    }
    printf("live test buffers after loop: %ld\n", test_backend_live_buffers());

    // --- tensor hooks through a test backend with has_buffer_hooks
    {
        wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_buffer(th, 4096);
        print_exact_hook_stats(th);
        size_t a0 = wsp_ggml_backend_buffer_get_alloc_size(buf, s.t[0]);
        size_t a1 = wsp_ggml_backend_buffer_get_alloc_size(buf, s.t[4]);
        printf("hook alloc sizes %zu %zu\n", a0, a1);
        wsp_ggml_backend_buffer_init_tensor(buf, s.t[1]);
        wsp_ggml_backend_buffer_init_tensor(buf, s.t[2]);
        wsp_ggml_backend_buffer_free_tensor(buf, s.t[1]);
        print_exact_hook_stats(th);

        // the same calls on a buffer without hooks are no-ops / nbytes
        wsp_ggml_backend_buffer_t bp = wsp_ggml_backend_alloc_buffer(tp, 64);
        printf("no-hook alloc sizes %zu %zu\n", wsp_ggml_backend_buffer_get_alloc_size(bp, s.t[0]),
               wsp_ggml_backend_buffer_get_alloc_size(bp, s.t[4]));
        wsp_ggml_backend_buffer_init_tensor(bp, s.t[1]);
        wsp_ggml_backend_buffer_free_tensor(bp, s.t[1]);
        print_exact_hook_stats(tp);

        // and on a CPU buffer
        wsp_ggml_backend_buffer_t bc = wsp_ggml_backend_alloc_buffer(cpu, 64);
        wsp_ggml_backend_buffer_init_tensor(bc, s.t[1]);
        wsp_ggml_backend_buffer_free_tensor(bc, s.t[1]);
        printf("cpu alloc size %zu\n", wsp_ggml_backend_buffer_get_alloc_size(bc, s.t[3]));
        wsp_ggml_backend_buffer_free(bc);

        // allocator over the hooked buffer: init_tensor per allocation
        wsp_ggml_allocr_t al = wsp_ggml_allocr_new_from_buffer(buf);
        struct wsp_ggml_context * c2 = make_ctx(8, false, true, 0);
        struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(c2, WSP_GGML_TYPE_F32, 5, 3);
        struct wsp_ggml_tensor * y = wsp_ggml_new_tensor_1d(c2, WSP_GGML_TYPE_F16, 9);
        printf("before alloc backend x=%s\n", wsp_ggml_backend_name(wsp_ggml_get_backend(x)));
        wsp_ggml_allocr_alloc(al, x);
        wsp_ggml_allocr_alloc(al, y);
        printf("after alloc backend x=%s y=%s\n", wsp_ggml_backend_name(wsp_ggml_get_backend(x)),
               wsp_ggml_backend_name(wsp_ggml_get_backend(y)));
        printf("offsets x=%td y=%td max=%zu\n", (char *)x->data - (char *)wsp_ggml_backend_buffer_get_base(buf),
               (char *)y->data - (char *)wsp_ggml_backend_buffer_get_base(buf), wsp_ggml_allocr_max_size(al));
        print_exact_hook_stats(th);
        wsp_ggml_allocr_free(al);
        wsp_ggml_free(c2);

        wsp_ggml_backend_buffer_free(bp);
        wsp_ggml_backend_buffer_free(buf);
        print_exact_hook_stats(th);
        print_exact_hook_stats(tp);
    }

    // --- wsp_ggml_get_backend on tensors with and without a buffer
    {
        struct wsp_ggml_context * c = make_ctx(8, false, true, 0);
        struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(c, WSP_GGML_TYPE_F32, 16);
        struct wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(c, WSP_GGML_TYPE_F32, 16);
        struct wsp_ggml_tensor * d = wsp_ggml_new_tensor_1d(c, WSP_GGML_TYPE_F32, 16);
        printf("get_backend none=%s\n", wsp_ggml_backend_name(wsp_ggml_get_backend(a)));
        wsp_ggml_allocr_t ac = wsp_ggml_allocr_new_from_backend(cpu, 1024);
        wsp_ggml_allocr_t at = wsp_ggml_allocr_new_from_backend(tp, 1024);
        wsp_ggml_allocr_alloc(ac, a);
        wsp_ggml_allocr_alloc(at, b);
        printf("get_backend cpu=%s test=%s\n", wsp_ggml_backend_name(wsp_ggml_get_backend(a)),
               wsp_ggml_backend_name(wsp_ggml_get_backend(b)));
        printf("allocr buffer sizes cpu=%zu test=%zu\n",
               wsp_ggml_backend_buffer_get_size(wsp_ggml_allocr_get_buffer(ac)),
               wsp_ggml_backend_buffer_get_size(wsp_ggml_allocr_get_buffer(at)));

        // buffer from a pointer, backend NULL (as ggml-alloc's legacy API does)
        void * mem = malloc(500);
        wsp_ggml_backend_buffer_t bn = wsp_ggml_backend_cpu_buffer_from_ptr(NULL, mem, 500);
        printf("from_ptr(NULL) %s size=%zu\n", wsp_ggml_backend_buffer_get_base(bn) == mem ? "from_ptr base ok" : "from_ptr base BAD",
               wsp_ggml_backend_buffer_get_size(bn));
        // (wsp_ggml_allocr_new_from_buffer(bn) and wsp_ggml_backend_buffer_get_alignment(bn) would read
        // the alignment through the NULL backend: the original crashes there, so not exercised)
        wsp_ggml_backend_buffer_free(bn);
        // the memory is still ours
        memset(mem, 0, 500);
        free(mem);

        // buffer from a pointer with the CPU backend
        void * mem2 = malloc(1000);
        wsp_ggml_backend_buffer_t bc = wsp_ggml_backend_cpu_buffer_from_ptr(cpu, mem2, 1000);
        printf("from_ptr(cpu) %s size=%zu alignment=%zu\n",
               wsp_ggml_backend_buffer_get_base(bc) == mem2 ? "from_ptr base ok" : "from_ptr base BAD",
               wsp_ggml_backend_buffer_get_size(bc), wsp_ggml_backend_buffer_get_alignment(bc));
        printf("from_ptr(cpu) alloc size %zu\n", wsp_ggml_backend_buffer_get_alloc_size(bc, s.t[5]));
        wsp_ggml_allocr_t ap = wsp_ggml_allocr_new_from_buffer(bc);
        wsp_ggml_allocr_alloc(ap, d);
        printf("get_backend from_ptr(cpu)=%s inside=%d\n", wsp_ggml_backend_name(wsp_ggml_get_backend(d)),
               (int)((char *)d->data >= (char *)mem2 && (char *)d->data + wsp_ggml_nbytes(d) <= (char *)mem2 + 1000));
        float v[16];
        for (int i = 0; i < 16; i++) {
            v[i] = (float)i * 0.25f;
        }
        wsp_ggml_backend_tensor_set(d, v, 0, sizeof(v));
        float w[16];
        wsp_ggml_backend_tensor_get(d, w, 0, sizeof(w));
        printf("from_ptr(cpu) roundtrip %s\n", memcmp(v, w, sizeof(v)) == 0 ? "ok" : "BAD");
        wsp_ggml_allocr_free(ap);
        wsp_ggml_backend_buffer_free(bc);
        memset(mem2, 0, 1000);
        free(mem2);

        // legacy allocator: tensors land in a buffer without backend
        void * mem3 = malloc(256);
        wsp_ggml_allocr_t al = wsp_ggml_allocr_new(mem3, 256, 32);
        struct wsp_ggml_tensor * e = wsp_ggml_new_tensor_1d(c, WSP_GGML_TYPE_F32, 8);
        wsp_ggml_allocr_alloc(al, e);
        printf("get_backend legacy=%s has_buffer=%d\n", wsp_ggml_backend_name(wsp_ggml_get_backend(e)), e->buffer != NULL);
        printf("legacy buffer size=%zu base %s\n", wsp_ggml_backend_buffer_get_size(wsp_ggml_allocr_get_buffer(al)),
               wsp_ggml_backend_buffer_get_base(wsp_ggml_allocr_get_buffer(al)) == mem3 ? "ok" : "BAD");
        wsp_ggml_allocr_free(al);
        free(mem3);

        wsp_ggml_allocr_free(ac);
        wsp_ggml_allocr_free(at);
        wsp_ggml_free(c);
    }

    // --- freeing NULL is a no-op
    wsp_ggml_backend_buffer_free(NULL);
    wsp_ggml_backend_free(NULL);
    printf("free(NULL) ok\n");

    // --- a buffer may outlive nothing: free everything
    wsp_ggml_backend_buffer_t last = wsp_ggml_backend_alloc_buffer(th, 10);
    printf("live test buffers before final free: %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_buffer_free(last);

    test_backend_print_stats(th);
    test_backend_print_stats(tp);
    wsp_ggml_backend_free(th);
    wsp_ggml_backend_free(tp);
    wsp_ggml_backend_free(cpu);
    wsp_ggml_free(s.ctx);
    printf("live test buffers at end: %ld\n", test_backend_live_buffers());
    return 0;
}
