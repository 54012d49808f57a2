// The memory intrinsics of LLVM's ThreadSanitizer instrumentation, for gcc's
// runtime (tests/sanitizers.rs, scripts/tsan). Rust's nightly LLVM emits
// calls to __tsan_memcpy, __tsan_memmove and __tsan_memset where it would
// call memcpy, memmove and memset in instrumented code (the library built
// with -Zsanitizer=thread); gcc 12's libtsan predates them. Built with
// -fsanitize=thread -fno-builtin, each calls the libc function, which
// libtsan intercepts: the whole range is checked as a read or a write, as
// LLVM's own runtime does in these functions.
#include <string.h>

void * __tsan_memcpy(void * dst, const void * src, size_t n);
void * __tsan_memmove(void * dst, const void * src, size_t n);
void * __tsan_memset(void * dst, int c, size_t n);

void * __tsan_memcpy(void * dst, const void * src, size_t n) {
    return memcpy(dst, src, n);
}

void * __tsan_memmove(void * dst, const void * src, size_t n) {
    return memmove(dst, src, n);
}

void * __tsan_memset(void * dst, int c, size_t n) {
    return memset(dst, c, n);
}
