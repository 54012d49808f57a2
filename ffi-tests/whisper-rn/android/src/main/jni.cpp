// Stand-in for whisper.rn's JNI glue: one exported entry point (as a JNI
// function would be) that uses whisper.cpp and the backend API, so that the
// shared library really needs both.
#include "ggml.h"
#include "ggml-backend.h"
#include "whisper.h"

#include <cstring>

extern "C" __attribute__((visibility("default"))) int rnwhisper_selftest(void) {
    // whisper.cpp is linked in: a missing model is reported, not a crash
    if (whisper_init_from_file("/nonexistent-model.bin") != nullptr) {
        return -1;
    }
    struct wsp_ggml_init_params params = {wsp_ggml_tensor_overhead() * 8 + wsp_ggml_graph_overhead(), nullptr, true};
    struct wsp_ggml_context * ctx = wsp_ggml_init(params);
    struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    struct wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    struct wsp_ggml_tensor * r = wsp_ggml_add(ctx, wsp_ggml_mul(ctx, a, b), a);
    struct wsp_ggml_cgraph * gf = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(gf, r);

    wsp_ggml_backend_t backend = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_buffer(backend, 4096);
    char * base = (char *) wsp_ggml_backend_buffer_get_base(buf);
    struct wsp_ggml_tensor * all[4] = {a, b, gf->nodes[0], r};
    for (int i = 0; i < 4; i++) {
        all[i]->buffer = buf;
        all[i]->data = base + 256 * i;
    }
    float va[4] = {1, 2, 3, 4}, vb[4] = {5, 6, 7, 8}, out[4];
    wsp_ggml_backend_tensor_set(a, va, 0, sizeof va);
    wsp_ggml_backend_tensor_set(b, vb, 0, sizeof vb);
    wsp_ggml_backend_graph_compute(backend, gf);
    wsp_ggml_backend_tensor_get(r, out, 0, sizeof out);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_backend_free(backend);
    wsp_ggml_free(ctx);
    return (int) (out[0] + out[1] + out[2] + out[3]); // 6 + 14 + 24 + 36 = 80
}
