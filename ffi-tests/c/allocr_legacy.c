// The legacy ggml-alloc API over host memory: wsp_ggml_allocr_new(data, size, alignment)
// and wsp_ggml_allocr_new_measure(alignment). Inside ggml-alloc these create
// buffers with wsp_ggml_backend_cpu_buffer_from_ptr(NULL, ...), i.e. buffers
// without a backend. The graph is computed with the CPU backend.
#include "common.h"

#define N_IN  24
#define N_HID 64
#define N_OUT 12
#define N_BATCH 5
#define ALIGN 32

struct weights {
    struct wsp_ggml_context * ctx;
    struct wsp_ggml_tensor * w1, * b1, * w2, * b2, * w3;
};

static void fill_tensor_host(struct wsp_ggml_tensor * t, struct lcg * r, float scale) {
    // host memory tensors: written directly (their buffer, if any, has no backend)
    CHECK(t->data != NULL);
    if (t->type == WSP_GGML_TYPE_F32) {
        lcg_fill_f32(r, (float *)t->data, (size_t)wsp_ggml_nelements(t), scale);
    } else if (t->type == WSP_GGML_TYPE_F16) {
        wsp_ggml_fp16_t * h = (wsp_ggml_fp16_t *)t->data;
        for (int64_t i = 0; i < wsp_ggml_nelements(t); i++) {
            h[i] = wsp_ggml_fp32_to_fp16(lcg_f32(r) * scale);
        }
    } else {
        CHECK(0);
    }
}

static void make_weights(struct weights * w, bool in_ctx, wsp_ggml_allocr_t alloc) {
    // in_ctx: data allocated by the ggml context itself (no buffer at all);
    // otherwise no_alloc and placed with the legacy allocator in host memory
    w->ctx = make_ctx(8, false, !in_ctx, in_ctx ? 64 * 1024 : 0);
    w->w1 = wsp_ggml_new_tensor_2d(w->ctx, WSP_GGML_TYPE_F32, N_IN, N_HID);
    w->b1 = wsp_ggml_new_tensor_1d(w->ctx, WSP_GGML_TYPE_F32, N_HID);
    w->w2 = wsp_ggml_new_tensor_2d(w->ctx, WSP_GGML_TYPE_F16, N_HID, N_OUT);
    w->b2 = wsp_ggml_new_tensor_1d(w->ctx, WSP_GGML_TYPE_F32, N_OUT);
    w->w3 = wsp_ggml_new_tensor_2d(w->ctx, WSP_GGML_TYPE_Q8_0, N_HID, N_OUT); // filled by quantizing
    if (!in_ctx) {
        wsp_ggml_allocr_alloc(alloc, w->w1);
        wsp_ggml_allocr_alloc(alloc, w->b1);
        wsp_ggml_allocr_alloc(alloc, w->w2);
        wsp_ggml_allocr_alloc(alloc, w->b2);
        wsp_ggml_allocr_alloc(alloc, w->w3);
    }
    struct lcg r = lcg_new(7);
    fill_tensor_host(w->w1, &r, 0.3f);
    fill_tensor_host(w->b1, &r, 0.1f);
    fill_tensor_host(w->w2, &r, 0.3f);
    fill_tensor_host(w->b2, &r, 0.1f);
    float tmp[N_HID * N_OUT];
    lcg_fill_f32(&r, tmp, N_HID * N_OUT, 0.3f);
    int64_t hist[16] = { 0 };
    wsp_ggml_quantize_chunk(WSP_GGML_TYPE_Q8_0, tmp, w->w3->data, 0, N_HID * N_OUT, hist);
    printf("weights in_ctx=%d backend=%s w3 fnv=%016" PRIx64 "\n", (int)in_ctx,
           wsp_ggml_backend_name(wsp_ggml_get_backend(w->w1)), fnv1a64(w->w3->data, wsp_ggml_nbytes(w->w3)));
}

// MLP: softmax(w2 * gelu(w1 x + b1) + b2) and a second head through q8_0 weights
static struct wsp_ggml_cgraph * build(struct wsp_ggml_context * ctx, struct weights * w, wsp_ggml_allocr_t alloc,
                                  uint64_t seed, struct wsp_ggml_tensor ** out1, struct wsp_ggml_tensor ** out2) {
    struct wsp_ggml_cgraph * gf = wsp_ggml_new_graph(ctx);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, N_IN, N_BATCH);
    wsp_ggml_set_name(x, "x");
    wsp_ggml_allocr_alloc(alloc, x);
    if (!wsp_ggml_allocr_is_measure(alloc)) {
        struct lcg r = lcg_new(seed);
        fill_tensor_host(x, &r, 1.0f);
    }
    struct wsp_ggml_tensor * h = wsp_ggml_gelu(ctx, wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, w->w1, x), w->b1));
    struct wsp_ggml_tensor * y = wsp_ggml_soft_max(ctx, wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, w->w2, h), w->b2));
    struct wsp_ggml_tensor * z = wsp_ggml_mul_mat(ctx, w->w3, wsp_ggml_cont(ctx, wsp_ggml_view_2d(ctx, h, N_HID, 2, h->nb[1], h->nb[1])));
    wsp_ggml_set_name(y, "y");
    wsp_ggml_set_name(z, "z");
    wsp_ggml_build_forward_expand(gf, y);
    wsp_ggml_build_forward_expand(gf, z);
    *out1 = y;
    *out2 = z;
    return gf;
}

static void print_host_tensor(const char * label, const struct wsp_ggml_tensor * t) {
    // tensors of the legacy allocator have no backend: read their memory directly
    CHECK(wsp_ggml_get_backend(t) == NULL);
    printf("%s ", label);
    print_shape(t);
    print_host_data("", t->data, wsp_ggml_nbytes(t), t->type, 6);
}

static void print_offsets(const char * label, struct wsp_ggml_cgraph * gf, const void * base) {
    printf("%s offsets:", label);
    for (int i = 0; i < gf->n_nodes; i++) {
        struct wsp_ggml_tensor * n = gf->nodes[i];
        printf(" %td", (const char *)n->data - (const char *)base);
    }
    printf("\n");
}

static void run(const char * label, bool weights_in_ctx, wsp_ggml_backend_t cpu) {
    // weights: either in the context or in an aligned host block through the legacy allocator
    void * wmem = NULL;
    wsp_ggml_allocr_t walloc = NULL;
    if (!weights_in_ctx) {
        wmem = aligned_alloc(64, 64 * 1024);
        walloc = wsp_ggml_allocr_new(wmem, 64 * 1024, ALIGN);
        printf("%s weights allocr is_measure=%d\n", label, (int)wsp_ggml_allocr_is_measure(walloc));
    }
    struct weights w;
    make_weights(&w, weights_in_ctx, walloc);
    if (walloc) {
        printf("%s weights max=%zu\n", label, wsp_ggml_allocr_max_size(walloc));
    }

    struct wsp_ggml_tensor * y, * z;

    // measure (base address 0x1000 inside ggml-alloc: the result is deterministic)
    size_t mem;
    {
        wsp_ggml_allocr_t measure = wsp_ggml_allocr_new_measure(ALIGN);
        printf("%s measure is_measure=%d\n", label, (int)wsp_ggml_allocr_is_measure(measure));
        struct wsp_ggml_context * ctx = make_ctx(64, true, true, 0);
        struct wsp_ggml_cgraph * gf = build(ctx, &w, measure, 1, &y, &z);
        mem = wsp_ggml_allocr_alloc_graph(measure, gf);
        printf("%s measured=%zu max=%zu\n", label, mem, wsp_ggml_allocr_max_size(measure));
        // measuring twice after a reset gives the same size
        wsp_ggml_allocr_reset(measure);
        wsp_ggml_free(ctx);
        ctx = make_ctx(64, true, true, 0);
        gf = build(ctx, &w, measure, 1, &y, &z);
        printf("%s re-measured=%zu\n", label, wsp_ggml_allocr_alloc_graph(measure, gf));
        wsp_ggml_free(ctx);
        wsp_ggml_allocr_free(measure);
    }

    // real allocation in aligned host memory, reused for several inputs
    size_t size = mem + ALIGN;
    void * cmem = aligned_alloc(64, (size + 63) / 64 * 64);
    wsp_ggml_allocr_t alloc = wsp_ggml_allocr_new(cmem, size, ALIGN);
    printf("%s buffer size=%zu base %s\n", label, wsp_ggml_backend_buffer_get_size(wsp_ggml_allocr_get_buffer(alloc)),
           wsp_ggml_backend_buffer_get_base(wsp_ggml_allocr_get_buffer(alloc)) == cmem ? "ok" : "BAD");
    for (int iter = 0; iter < 3; iter++) {
        char l2[96];
        snprintf(l2, sizeof(l2), "%s iter=%d", label, iter);
        wsp_ggml_allocr_reset(alloc);
        struct wsp_ggml_context * ctx = make_ctx(64, true, true, 0);
        struct wsp_ggml_cgraph * gf = build(ctx, &w, alloc, 100 + (uint64_t)iter, &y, &z);
        size_t used = wsp_ggml_allocr_alloc_graph(alloc, gf);
        printf("%s used=%zu n_nodes=%d\n", l2, used, gf->n_nodes);
        print_offsets(l2, gf, cmem);
        printf("%s backend of y=%s\n", l2, wsp_ggml_backend_name(wsp_ggml_get_backend(y)));

        if (iter == 1) {
            wsp_ggml_backend_graph_plan_t plan = wsp_ggml_backend_graph_plan_create(cpu, gf);
            wsp_ggml_backend_graph_plan_compute(cpu, plan);
            wsp_ggml_backend_graph_plan_free(cpu, plan);
        } else {
            wsp_ggml_backend_cpu_set_n_threads(cpu, iter == 0 ? 1 : 3);
            wsp_ggml_backend_graph_compute(cpu, gf);
        }
        print_host_tensor(l2, y);
        print_host_tensor(l2, z);
        wsp_ggml_free(ctx);
    }
    wsp_ggml_allocr_free(alloc);
    free(cmem);

    wsp_ggml_free(w.ctx);
    if (walloc) {
        wsp_ggml_allocr_free(walloc);
        free(wmem);
    }
}

int main(void) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    struct wsp_ggml_context * dummy = make_ctx(1, false, true, 0);
    run("ctxw", true, cpu);
    run("allocw", false, cpu);

    // a legacy allocator used tensor by tensor
    {
        void * mem = aligned_alloc(64, 1024);
        wsp_ggml_allocr_t a = wsp_ggml_allocr_new(mem, 1000, 16);
        struct wsp_ggml_context * ctx = make_ctx(8, false, true, 0);
        struct wsp_ggml_tensor * t[5];
        const int64_t n[5] = { 3, 17, 4, 100, 1 };
        for (int i = 0; i < 5; i++) {
            t[i] = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, n[i]);
            wsp_ggml_allocr_alloc(a, t[i]);
            printf("single %d offset=%td backend=%s\n", i, (char *)t[i]->data - (char *)mem,
                   wsp_ggml_backend_name(wsp_ggml_get_backend(t[i])));
        }
        printf("single max=%zu\n", wsp_ggml_allocr_max_size(a));
        wsp_ggml_allocr_reset(a);
        struct wsp_ggml_tensor * u = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 200);
        wsp_ggml_allocr_alloc(a, u);
        printf("single after reset offset=%td max=%zu\n", (char *)u->data - (char *)mem, wsp_ggml_allocr_max_size(a));
        wsp_ggml_free(ctx);
        wsp_ggml_allocr_free(a);
        free(mem);
    }

    wsp_ggml_free(dummy);
    wsp_ggml_backend_free(cpu);
    return 0;
}
