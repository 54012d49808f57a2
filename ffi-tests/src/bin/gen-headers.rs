//! Regenerate the committed headers: `cargo run -p ffi-tests --bin gen-headers`.
fn main() {
    let root = ffi_tests::headers::workspace_root();
    let (public, imp, ext) = ffi_tests::headers::generate_headers();
    std::fs::write(root.join("include/ggml-backend.h"), public).expect("write include/ggml-backend.h");
    std::fs::write(root.join("include/ggml-backend-impl.h"), imp).expect("write include/ggml-backend-impl.h");
    std::fs::write(root.join("include/ggml-backend-ext.h"), ext).expect("write include/ggml-backend-ext.h");
    eprintln!("wrote include/ggml-backend.h, include/ggml-backend-impl.h and include/ggml-backend-ext.h");
}
