// A ggml-only program (no backend call at all): ggml.c's maths must bind to
// libm even when our static library comes first on the link line. The test
// links it with -Wl,-y,<symbol> and reads where each symbol was defined; the
// program itself prints ggml results that depend on those functions.
#include "ggml.h"

#include <stdio.h>

int main(void) {
    struct wsp_ggml_init_params params = {16 * 1024 * 1024, NULL, false};
    struct wsp_ggml_context * ctx = wsp_ggml_init(params);
    struct wsp_ggml_tensor * x = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 8);
    float * xd = (float *) x->data;
    for (int i = 0; i < 8; i++) {
        xd[i] = 0.37f * (float) (i + 1) * (float) (i + 1);
    }
    struct wsp_ggml_tensor * s = wsp_ggml_sqrt(ctx, x);
    struct wsp_ggml_tensor * g = wsp_ggml_gelu(ctx, s);
    struct wsp_ggml_tensor * m = wsp_ggml_soft_max(ctx, g);
    struct wsp_ggml_cgraph * gf = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(gf, m);
    wsp_ggml_graph_compute_with_ctx(ctx, gf, 1);
    for (int i = 0; i < 8; i++) {
        printf("%d %a %a\n", i, (double) ((float *) s->data)[i], (double) ((float *) m->data)[i]);
    }
    wsp_ggml_free(ctx);
    return 0;
}
