// Two copies of our static library in one program, the second with its API
// renamed (wsp2_ggml_backend_*), as two Rust static libraries would sit in
// one app: they must link (no std or compiler-builtins symbol may clash) and
// both must work.
#include "ggml-backend.h"

#include <stdio.h>

// the renamed copy's API (only what this program calls)
wsp_ggml_backend_t wsp2_ggml_backend_cpu_init(void);
wsp_ggml_backend_buffer_t wsp2_ggml_backend_alloc_buffer(wsp_ggml_backend_t backend, size_t size);
void wsp2_ggml_backend_tensor_set(struct wsp_ggml_tensor * tensor, const void * data, size_t offset, size_t size);
void wsp2_ggml_backend_tensor_get(const struct wsp_ggml_tensor * tensor, void * data, size_t offset, size_t size);
void wsp2_ggml_backend_graph_compute(wsp_ggml_backend_t backend, struct wsp_ggml_cgraph * cgraph);
void wsp2_ggml_backend_buffer_free(wsp_ggml_backend_buffer_t buffer);
void wsp2_ggml_backend_free(wsp_ggml_backend_t backend);
void wsp2_ggml_backend_buffer_init_tensor(wsp_ggml_backend_buffer_t buffer, struct wsp_ggml_tensor * tensor);
size_t wsp2_ggml_backend_get_alignment(wsp_ggml_backend_t backend);
void * wsp2_ggml_backend_buffer_get_base(wsp_ggml_backend_buffer_t buffer);

typedef struct {
    wsp_ggml_backend_t (*cpu_init)(void);
    wsp_ggml_backend_buffer_t (*alloc_buffer)(wsp_ggml_backend_t, size_t);
    void (*tensor_set)(struct wsp_ggml_tensor *, const void *, size_t, size_t);
    void (*tensor_get)(const struct wsp_ggml_tensor *, void *, size_t, size_t);
    void (*graph_compute)(wsp_ggml_backend_t, struct wsp_ggml_cgraph *);
    void (*buffer_free)(wsp_ggml_backend_buffer_t);
    void (*backend_free)(wsp_ggml_backend_t);
    size_t (*get_alignment)(wsp_ggml_backend_t);
    void * (*get_base)(wsp_ggml_backend_buffer_t);
} api;

// a*b + a on the copy's CPU backend, tensors placed by hand in its buffer
static float run(const api * f, float a, float b) {
    struct wsp_ggml_init_params params = {wsp_ggml_tensor_overhead() * 8 + wsp_ggml_graph_overhead(), NULL, true};
    struct wsp_ggml_context * ctx = wsp_ggml_init(params);
    struct wsp_ggml_tensor * ta = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    struct wsp_ggml_tensor * tb = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    struct wsp_ggml_tensor * tm = wsp_ggml_mul(ctx, ta, tb);
    struct wsp_ggml_tensor * tr = wsp_ggml_add(ctx, tm, ta);
    struct wsp_ggml_cgraph * gf = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(gf, tr);

    wsp_ggml_backend_t backend = f->cpu_init();
    size_t align = f->get_alignment(backend);
    wsp_ggml_backend_buffer_t buf = f->alloc_buffer(backend, 4 * 256 + 4 * align);
    struct wsp_ggml_tensor * all[4] = {ta, tb, tm, tr};
    char * base = (char *) f->get_base(buf);
    for (int i = 0; i < 4; i++) {
        all[i]->buffer = buf;
        all[i]->data = base + i * 256;
    }
    float va[4] = {a, a, a, a}, vb[4] = {b, b, b, b}, out[4];
    f->tensor_set(ta, va, 0, sizeof va);
    f->tensor_set(tb, vb, 0, sizeof vb);
    f->graph_compute(backend, gf);
    f->tensor_get(tr, out, 0, sizeof out);
    f->buffer_free(buf);
    f->backend_free(backend);
    wsp_ggml_free(ctx);
    return out[3];
}

int main(void) {
    const api one = {wsp_ggml_backend_cpu_init, wsp_ggml_backend_alloc_buffer, wsp_ggml_backend_tensor_set,
                     wsp_ggml_backend_tensor_get, wsp_ggml_backend_graph_compute, wsp_ggml_backend_buffer_free,
                     wsp_ggml_backend_free, wsp_ggml_backend_get_alignment, wsp_ggml_backend_buffer_get_base};
    const api two = {wsp2_ggml_backend_cpu_init, wsp2_ggml_backend_alloc_buffer, wsp2_ggml_backend_tensor_set,
                     wsp2_ggml_backend_tensor_get, wsp2_ggml_backend_graph_compute, wsp2_ggml_backend_buffer_free,
                     wsp2_ggml_backend_free, wsp2_ggml_backend_get_alignment, wsp2_ggml_backend_buffer_get_base};
    printf("copy one: %g\n", (double) run(&one, 3.0f, 4.0f));
    printf("copy two: %g\n", (double) run(&two, 5.0f, 6.0f));
    return 0;
}
