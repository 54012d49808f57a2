// Prints the sizes and field offsets of the implementation structs as seen
// through whichever ggml-backend-impl.h is on the include path, as #defines.
// Built against the ORIGINAL header to produce the expected values.
#include "ggml-backend-impl.h"
#include "layout_fields.h"

#include <stddef.h>
#include <stdio.h>

#define SIZE(s) printf("#define EXPECT_SIZEOF_%s %zu\n", #s, sizeof(struct s));
#define OFF(s, f) printf("#define EXPECT_OFFSETOF_%s_%s %zu\n", #s, #f, offsetof(struct s, f));

int main(void) {
    LAYOUT_FIELDS(SIZE, OFF)
    return 0;
}
