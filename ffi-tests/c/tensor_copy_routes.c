// wsp_ggml_backend_tensor_copy between backends, by every route:
//   - the destination backend has cpy_tensor_from,
//   - only the source backend has cpy_tensor_to,
//   - neither (falls back to tensor_get + tensor_set),
// plus CPU <-> test backends both ways, CPU -> CPU, same backend, and the
// same-tensor no-op. The route taken is visible in the exact "route" lines
// (cpy_tensor_from / cpy_tensor_to call counts are exact in this program).
#include "common.h"
#include "test_backend.h"

enum { N_BACKENDS = 5 };

struct slot {
    wsp_ggml_backend_t backend;
    wsp_ggml_backend_buffer_t buffer;
    wsp_ggml_allocr_t allocr;
    struct wsp_ggml_tensor * t[3];  // two f32 [33,7] tensors and one q8_0 [64,3]
    struct wsp_ggml_tensor * h[1];  // f16 [19,4]
};

static struct wsp_ggml_context * g_ctx;

static void make_slot(struct slot * s, wsp_ggml_backend_t backend) {
    s->backend = backend;
    s->buffer = wsp_ggml_backend_alloc_buffer(backend, 16384);
    s->allocr = wsp_ggml_allocr_new_from_buffer(s->buffer);
    s->t[0] = wsp_ggml_new_tensor_2d(g_ctx, WSP_GGML_TYPE_F32, 33, 7);
    s->t[1] = wsp_ggml_new_tensor_2d(g_ctx, WSP_GGML_TYPE_F32, 33, 7);
    s->t[2] = wsp_ggml_new_tensor_2d(g_ctx, WSP_GGML_TYPE_Q8_0, 64, 3);
    s->h[0] = wsp_ggml_new_tensor_2d(g_ctx, WSP_GGML_TYPE_F16, 19, 4);
    for (int i = 0; i < 3; i++) {
        wsp_ggml_allocr_alloc(s->allocr, s->t[i]);
    }
    wsp_ggml_allocr_alloc(s->allocr, s->h[0]);
}

static void free_slot(struct slot * s) {
    wsp_ggml_allocr_free(s->allocr);
    wsp_ggml_backend_buffer_free(s->buffer);
}

static void fill(struct wsp_ggml_tensor * t, uint64_t seed) {
    struct lcg r = lcg_new(seed);
    size_t n = wsp_ggml_nbytes(t);
    uint8_t * buf = (uint8_t *)malloc(n);
    if (t->type == WSP_GGML_TYPE_F32) {
        lcg_fill_f32(&r, (float *)buf, n / sizeof(float), 3.0f);
    } else {
        lcg_fill_bytes(&r, buf, n);
    }
    wsp_ggml_backend_tensor_set(t, buf, 0, n);
    free(buf);
}

static uint64_t tensor_hash(const struct wsp_ggml_tensor * t) {
    size_t n = wsp_ggml_nbytes(t);
    uint8_t * buf = (uint8_t *)malloc(n);
    wsp_ggml_backend_tensor_get(t, buf, 0, n);
    uint64_t h = fnv1a64(buf, n);
    free(buf);
    return h;
}

static long cpy_from(wsp_ggml_backend_t b) {
    return test_backend_is(b) ? test_backend_stats(b)->calls[TB_CPY_TENSOR_FROM] : -1;
}

static long cpy_to(wsp_ggml_backend_t b) {
    return test_backend_is(b) ? test_backend_stats(b)->calls[TB_CPY_TENSOR_TO] : -1;
}

static wsp_ggml_backend_t g_all[N_BACKENDS];

// copy src -> dst and print: the data check and which cpy hooks of the test backends were used
static void do_copy(const char * what, struct wsp_ggml_tensor * src, struct wsp_ggml_tensor * dst, uint64_t seed) {
    fill(src, seed);
    if (src != dst) {
        fill(dst, seed + 1000); // different content before the copy
    }
    uint64_t hs = tensor_hash(src);

    long from0[N_BACKENDS], to0[N_BACKENDS];
    for (int i = 0; i < N_BACKENDS; i++) {
        from0[i] = cpy_from(g_all[i]);
        to0[i] = cpy_to(g_all[i]);
    }
    wsp_ggml_backend_t bs = wsp_ggml_get_backend(src);
    wsp_ggml_backend_t bd = wsp_ggml_get_backend(dst);
    long get0 = test_backend_is(bs) ? test_backend_stats(bs)->calls[TB_GET_TENSOR_ASYNC] : 0;
    long set0 = test_backend_is(bd) ? test_backend_stats(bd)->calls[TB_SET_TENSOR_ASYNC] : 0;
    wsp_ggml_backend_tensor_copy(src, dst);
    // whether the source was read through get_tensor_async / the destination written through
    // set_tensor_async (test backends only; -1 for the CPU): a property of the route
    int src_read = test_backend_is(bs) ? (test_backend_stats(bs)->calls[TB_GET_TENSOR_ASYNC] > get0) : -1;
    int dst_written = test_backend_is(bd) ? (test_backend_stats(bd)->calls[TB_SET_TENSOR_ASYNC] > set0) : -1;
    uint64_t hd = tensor_hash(dst);

    printf("copy %s %s->%s ", what, wsp_ggml_backend_name(wsp_ggml_get_backend(src)),
           wsp_ggml_backend_name(wsp_ggml_get_backend(dst)));
    print_shape(src);
    printf(" data=%s fnv=%016" PRIx64 "\n", hs == hd ? "equal" : "DIFFERENT", hd);
    printf("route %s:", what);
    for (int i = 0; i < N_BACKENDS; i++) {
        if (!test_backend_is(g_all[i])) {
            continue;
        }
        long df = cpy_from(g_all[i]) - from0[i];
        long dt = cpy_to(g_all[i]) - to0[i];
        if (df || dt) {
            printf(" %s.from=%ld %s.to=%ld", wsp_ggml_backend_name(g_all[i]), df, wsp_ggml_backend_name(g_all[i]), dt);
        }
    }
    printf(" src_read=%d dst_written=%d\n", src_read, dst_written);
}

static void print_exact_cpy_stats(void) {
    for (int i = 0; i < N_BACKENDS; i++) {
        if (test_backend_is(g_all[i])) {
            printf("stat %s cpy_tensor_from %ld\n", wsp_ggml_backend_name(g_all[i]), cpy_from(g_all[i]));
            printf("stat %s cpy_tensor_to %ld\n", wsp_ggml_backend_name(g_all[i]), cpy_to(g_all[i]));
        }
    }
}

int main(void) {
    g_ctx = make_ctx(64, false, true, 0);

    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    struct test_backend_options oA = { "A_from", 32, true, false, false, NULL, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    struct test_backend_options oB = { "B_to", 64, false, true, true, NULL, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    struct test_backend_options oC = { "C_none", 16, false, false, false, NULL, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    struct test_backend_options oD = { "D_both", 128, true, true, true, NULL, 0, false, 0, NULL, 0, TB_SHAPE_DEFAULT };
    wsp_ggml_backend_t A = test_backend_new(&oA);
    wsp_ggml_backend_t B = test_backend_new(&oB);
    wsp_ggml_backend_t C = test_backend_new(&oC);
    wsp_ggml_backend_t D = test_backend_new(&oD);
    g_all[0] = cpu;
    g_all[1] = A;
    g_all[2] = B;
    g_all[3] = C;
    g_all[4] = D;

    struct slot sc, sa, sb, scn, sd, sc2;
    make_slot(&sc, cpu);
    make_slot(&sa, A);
    make_slot(&sb, B);
    make_slot(&scn, C);
    make_slot(&sd, D);
    make_slot(&sc2, cpu); // a second CPU buffer

    uint64_t seed = 1;
    // destination has cpy_tensor_from
    do_copy("dst_from", sb.t[0], sa.t[0], seed++);   // B_to -> A_from: A.from (dst wins over src.to)
    do_copy("dst_from", scn.t[0], sa.t[1], seed++);  // C_none -> A_from
    do_copy("dst_from", sb.t[2], sd.t[2], seed++);   // B_to -> D_both (q8_0)
    do_copy("dst_from", sc.t[0], sa.t[0], seed++);   // CPU -> A_from
    // only the source has cpy_tensor_to
    do_copy("src_to", sb.t[0], scn.t[0], seed++);    // B_to -> C_none
    do_copy("src_to", sd.t[1], scn.t[1], seed++);    // D_both -> C_none
    do_copy("src_to", sd.h[0], sb.h[0], seed++);     // D_both -> B_to (f16)
    do_copy("src_to", sc.t[2], scn.t[2], seed++);    // CPU -> C_none (CPU's cpy_tensor_to)
    // neither
    do_copy("fallback", sa.t[0], scn.t[0], seed++);  // A_from -> C_none
    do_copy("fallback", scn.t[1], sb.t[1], seed++);  // C_none -> B_to
    do_copy("fallback", sa.h[0], sb.h[0], seed++);   // A_from -> B_to (f16)
    // CPU destination: CPU's cpy_tensor_from
    do_copy("to_cpu", sa.t[0], sc.t[0], seed++);
    do_copy("to_cpu", sb.t[2], sc.t[2], seed++);
    do_copy("to_cpu", scn.h[0], sc.h[0], seed++);
    do_copy("to_cpu", sd.t[1], sc.t[1], seed++);
    // CPU -> CPU (different buffers and same buffer)
    do_copy("cpu_cpu", sc.t[0], sc2.t[0], seed++);
    do_copy("cpu_cpu", sc2.t[1], sc2.t[0], seed++);
    // same backend, different tensors
    do_copy("same_backend", sa.t[0], sa.t[1], seed++);
    do_copy("same_backend", sd.t[0], sd.t[1], seed++);
    do_copy("same_backend", scn.t[0], scn.t[1], seed++);
    // same tensor: no-op
    do_copy("same_tensor", sa.t[0], sa.t[0], seed++);
    do_copy("same_tensor", sc.t[1], sc.t[1], seed++);
    do_copy("same_tensor", scn.t[0], scn.t[0], seed++);

    print_exact_cpy_stats();
    free_slot(&sc);
    free_slot(&sa);
    free_slot(&sb);
    free_slot(&scn);
    free_slot(&sd);
    free_slot(&sc2);
    test_backend_print_stats(A);
    test_backend_print_stats(B);
    test_backend_print_stats(C);
    test_backend_print_stats(D);
    printf("live test buffers: %ld\n", test_backend_live_buffers());
    wsp_ggml_backend_free(A);
    wsp_ggml_backend_free(B);
    wsp_ggml_backend_free(C);
    wsp_ggml_backend_free(D);
    wsp_ggml_backend_free(cpu);
    wsp_ggml_free(g_ctx);
    return 0;
}
