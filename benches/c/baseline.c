// The baseline of benchmark 3: plain memcpy, compiled with the same flags as
// both ggml stacks, called through a function like the library entry points.
#include <stddef.h>
#include <string.h>

void bench_memcpy(void * dst, const void * src, size_t n) {
    memcpy(dst, src, n);
}
