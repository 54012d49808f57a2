// Ours-only test: the functions docs/api.md lists as accepting NULL, each
// called with NULL; prints one line per call (the program must not abort).
#include "ggml-backend.h"

#include <stdio.h>
#include <stdlib.h>

int main(void) {
    wsp_ggml_backend_buffer_free(NULL);
    printf("wsp_ggml_backend_buffer_free(NULL): returns\n");
    wsp_ggml_backend_free(NULL);
    printf("wsp_ggml_backend_free(NULL): returns\n");
    wsp_ggml_backend_sched_free(NULL);
    printf("wsp_ggml_backend_sched_free(NULL): returns\n");
    printf("wsp_ggml_backend_name(NULL): \"%s\"\n", wsp_ggml_backend_name(NULL));
    printf("wsp_ggml_backend_is_cpu(NULL): %s\n", wsp_ggml_backend_is_cpu(NULL) ? "true" : "false");
    static float host[64];
    wsp_ggml_backend_buffer_t b = wsp_ggml_backend_cpu_buffer_from_ptr(NULL, host, sizeof host);
    printf("wsp_ggml_backend_cpu_buffer_from_ptr(NULL, ptr, size): a buffer of %zu bytes at ptr: %s\n",
           wsp_ggml_backend_buffer_get_size(b), wsp_ggml_backend_buffer_get_base(b) == (void *)host ? "yes" : "no");
    wsp_ggml_backend_buffer_free(b);
    return 0;
}
