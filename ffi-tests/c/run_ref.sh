#!/bin/sh
# Build every test program against the reference C objects and run it twice,
# checking that the output is deterministic. Usage:
#   ffi-tests/c/run_ref.sh [REFSRC_DIR] [REFBUILD_DIR]
# (defaults: /tmp/refsrc and /tmp/refbuild, i.e. the renamed original sources
#  and gcc -O2 -D_GNU_SOURCE -pthread objects of ggml.c, ggml-quants.c,
#  ggml-alloc.c and ggml-backend.c)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-/tmp/refsrc}
objs=${2:-/tmp/refbuild}
out=$(mktemp -d)
for p in buffers tensor_io graph_ops allocr_legacy tensor_copy_routes; do
    gcc -std=c11 -O2 -D_GNU_SOURCE -pthread -Wall -Wextra -Werror -I"$src" -I"$here" \
        "$here/$p.c" "$here/test_backend.c" "$objs"/*.o -lm -o "$out/$p"
    "$out/$p" > "$out/$p.1" 2>/dev/null
    "$out/$p" > "$out/$p.2" 2>/dev/null
    cmp "$out/$p.1" "$out/$p.2"
    echo "$p ok ($(wc -c < "$out/$p.1") bytes)"
done
rm -rf "$out"
