// Behaviour where our library deliberately differs from the original (each
// difference is documented in docs/differences.md). Built with our library only; the
// original crashes or misbehaves on several of these. Prints "ok ..." lines.
#include "common.h"
#include "ggml-backend-impl.h"

#include <stdint.h>

// A minimal backend whose copy slots record the first argument they get.
static wsp_ggml_backend_t g_seen_from;
static wsp_ggml_backend_t g_seen_to;

static void rec_cpy_from(wsp_ggml_backend_t backend, struct wsp_ggml_tensor * src, struct wsp_ggml_tensor * dst) {
    g_seen_from = backend;
    wsp_ggml_backend_tensor_get(src, dst->data, 0, wsp_ggml_nbytes(src));
}

static void rec_cpy_to(wsp_ggml_backend_t backend, struct wsp_ggml_tensor * src, struct wsp_ggml_tensor * dst) {
    g_seen_to = backend;
    wsp_ggml_backend_tensor_set(dst, src->data, 0, wsp_ggml_nbytes(src));
}

static const char * rec_name(wsp_ggml_backend_t backend) {
    (void)backend;
    return "REC";
}

static void rec_free(wsp_ggml_backend_t backend) {
    free(backend);
}

// Wrap a CPU backend's iface, replacing name/free/copy slots.
static wsp_ggml_backend_t rec_backend_new(wsp_ggml_backend_t cpu, bool from, bool to) {
    wsp_ggml_backend_t b = malloc(sizeof(struct wsp_ggml_backend));
    CHECK(b != NULL);
    b->iface = cpu->iface;
    b->iface.get_name = rec_name;
    b->iface.free = rec_free;
    b->iface.cpy_tensor_from = from ? rec_cpy_from : NULL;
    b->iface.cpy_tensor_to = to ? rec_cpy_to : NULL;
    b->context = cpu->context; // shares the CPU context; freed with the CPU backend
    return b;
}

int main(void) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();

    // 1. CPU buffers have a 64-byte aligned base (the original returned malloc's pointer).
    for (size_t size = 1; size < (1u << 22); size = size * 3 + 7) {
        wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_buffer(cpu, size);
        CHECK(((uintptr_t)wsp_ggml_backend_buffer_get_base(buf)) % 64 == 0);
        CHECK(wsp_ggml_backend_buffer_get_size(buf) == size + 64);
        wsp_ggml_backend_buffer_free(buf);
    }
    printf("ok aligned cpu buffer base\n");

    // 2. is_cpu(NULL) is false (the original dereferenced NULL).
    CHECK(!wsp_ggml_backend_is_cpu(NULL));
    CHECK(wsp_ggml_backend_is_cpu(cpu));
    printf("ok is_cpu(NULL) == false\n");

    // 3. A from-ptr buffer without a backend (as ggml-alloc.c makes) has the CPU alignment.
    static char mem[256];
    wsp_ggml_backend_buffer_t nb = wsp_ggml_backend_cpu_buffer_from_ptr(NULL, mem, sizeof(mem));
    CHECK(wsp_ggml_backend_buffer_get_alignment(nb) == 64);
    CHECK(wsp_ggml_backend_buffer_get_base(nb) == (void *)mem);
    wsp_ggml_backend_buffer_free(nb);
    printf("ok alignment of a backend-less from_ptr buffer\n");

    // 4. cpy_tensor_from / cpy_tensor_to receive the backend itself.
    struct wsp_ggml_init_params ip = { 16 * wsp_ggml_tensor_overhead(), NULL, true };
    struct wsp_ggml_context * ctx = wsp_ggml_init(ip);
    struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 16);
    struct wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 16);
    wsp_ggml_backend_t rec_from = rec_backend_new(cpu, true, false);
    wsp_ggml_backend_t rec_to = rec_backend_new(cpu, false, true);
    wsp_ggml_backend_buffer_t ba = wsp_ggml_backend_alloc_buffer(cpu, 64);
    wsp_ggml_backend_buffer_t bb = wsp_ggml_backend_alloc_buffer(rec_from, 64);
    a->buffer = ba;
    a->data = wsp_ggml_backend_buffer_get_base(ba);
    b->buffer = bb;
    b->data = wsp_ggml_backend_buffer_get_base(bb);
    float src[16], dst[16];
    for (int i = 0; i < 16; i++) src[i] = (float)i;
    wsp_ggml_backend_tensor_set(a, src, 0, sizeof(src));
    wsp_ggml_backend_tensor_copy(a, b); // dst backend has cpy_tensor_from
    CHECK(g_seen_from == rec_from);
    wsp_ggml_backend_tensor_get(b, dst, 0, sizeof(dst));
    CHECK(memcmp(src, dst, sizeof(src)) == 0);
    wsp_ggml_backend_buffer_free(bb);
    bb = wsp_ggml_backend_alloc_buffer(rec_to, 64);
    a->buffer = bb; // now the source lives on rec_to
    a->data = wsp_ggml_backend_buffer_get_base(bb);
    b->buffer = ba; // and the destination on the CPU...
    b->data = wsp_ggml_backend_buffer_get_base(ba);
    // ...whose cpy_tensor_from would win, so use a destination without one:
    wsp_ggml_backend_t plain = rec_backend_new(cpu, false, false);
    wsp_ggml_backend_buffer_t bp = wsp_ggml_backend_alloc_buffer(plain, 64);
    b->buffer = bp;
    b->data = wsp_ggml_backend_buffer_get_base(bp);
    wsp_ggml_backend_tensor_set(a, src, 0, sizeof(src));
    wsp_ggml_backend_tensor_copy(a, b);
    CHECK(g_seen_to == rec_to);
    wsp_ggml_backend_tensor_get(b, dst, 0, sizeof(dst));
    CHECK(memcmp(src, dst, sizeof(src)) == 0);
    printf("ok copy slots receive the backend\n");

    // A backend without supports_op (this generation's CUDA backend) accepts
    // every op; the original called the NULL slot.
    plain->iface.supports_op = NULL;
    CHECK(wsp_ggml_backend_supports_op(plain, b));
    printf("ok supports_op of a backend without the slot is true\n");

    wsp_ggml_backend_buffer_free(ba);
    wsp_ggml_backend_buffer_free(bb);
    wsp_ggml_backend_buffer_free(bp);
    wsp_ggml_backend_free(rec_from);
    wsp_ggml_backend_free(rec_to);
    wsp_ggml_backend_free(plain);
    wsp_ggml_free(ctx);

    // 5. Zero-size set/get with NULL data are no-ops.
    wsp_ggml_backend_free(NULL);
    wsp_ggml_backend_buffer_free(NULL);
    printf("ok NULL frees are no-ops\n");

    wsp_ggml_backend_free(cpu);
    return 0;
}
