// Compile-time check of our generated ggml-backend-impl.h against the layout
// of the original header (values in layout_expected.h, produced by
// layout_print.c compiled against the original). Compiling is the test.
#include "ggml-backend-impl.h"
#include "layout_expected.h"
#include "layout_fields.h"

#include <stddef.h>
#include <stdio.h>

#define SIZE(s) _Static_assert(sizeof(struct s) == EXPECT_SIZEOF_##s, "sizeof " #s);
#define OFF(s, f) _Static_assert(offsetof(struct s, f) == EXPECT_OFFSETOF_##s##_##f, "offsetof " #s "." #f);

LAYOUT_FIELDS(SIZE, OFF)

int main(void) {
    printf("layout ok\n");
    return 0;
}
