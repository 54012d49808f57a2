//! Differential tests: each C program is built with the original
//! ggml-backend.c and with our library, and must print the same bytes
//! (see ffi_tests::harness for the `~le` / `~ ` line conventions).

use ffi_tests::harness::differential;

const TB: &[&str] = &["test_backend.c"];

#[test]
fn buffers() {
    differential("buffers.c", TB, &[]);
}

#[test]
fn tensor_io() {
    differential("tensor_io.c", TB, &[]);
}

#[test]
fn graph_ops() {
    differential("graph_ops.c", TB, &[]);
}

#[test]
fn allocr_legacy() {
    differential("allocr_legacy.c", TB, &[]);
}

#[test]
fn tensor_copy_routes() {
    differential("tensor_copy_routes.c", TB, &[]);
}
