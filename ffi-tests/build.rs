//! Prepares the C side of the differential tests:
//! 1. finds whisper.cpp v1.5.0 inside the `whisper-rs-sys =0.8.0` crate in
//!    cargo's registry (downloaded by cargo itself; see Cargo.toml);
//! 2. applies whisper.rn's prefix rename to the ggml files and writes them to
//!    OUT_DIR: `common/` (ggml.c, ggml-alloc.c, ggml-quants.c, headers,
//!    whisper.cpp) and `ref/` (the original ggml-backend.c and its headers);
//! 3. compiles, once and cached in OUT_DIR: `libggml_core.a` (ggml.c +
//!    ggml-quants.c, shared by both builds), ggml-alloc.c twice (against our
//!    headers and against the original ones), and the original ggml-backend.c.
//!
//! Test programs themselves are compiled by the harness at test time.

use std::path::{Path, PathBuf};

use ref_sources::{find_reference_sources, write_if_changed, wsp_rename as rename, CRATE};

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    println!("cargo:rerun-if-changed=build.rs");

    let src = find_reference_sources(&root);
    let common = out.join("common");
    let refdir = out.join("ref");
    std::fs::create_dir_all(&common).unwrap();
    std::fs::create_dir_all(&refdir).unwrap();
    for f in
        ["ggml.c", "ggml.h", "ggml-alloc.c", "ggml-alloc.h", "ggml-impl.h", "ggml-quants.c", "ggml-quants.h", "whisper.cpp", "whisper.h"]
    {
        write_if_changed(&common.join(f), &rename(&std::fs::read_to_string(src.join(f)).unwrap()));
    }
    for f in ["ggml-backend.c", "ggml-backend.h", "ggml-backend-impl.h"] {
        write_if_changed(&refdir.join(f), &rename(&std::fs::read_to_string(src.join(f)).unwrap()));
    }
    check_against_shared_reference(&root, &refdir);

    let include = root.join("include");
    println!("cargo:rerun-if-changed={}", include.join("ggml-backend.h").display());
    println!("cargo:rerun-if-changed={}", include.join("ggml-backend-impl.h").display());

    // ggml.c and ggml-quants.c include no backend header: one build serves both.
    if !out.join("libggml_core.a").exists() {
        c_build(&[&common]).file(common.join("ggml.c")).file(common.join("ggml-quants.c")).compile("ggml_core");
    }
    // ggml-alloc.c includes ggml-backend-impl.h: once per header set.
    c_build(&[&include, &common]).file(common.join("ggml-alloc.c")).compile("ggml_alloc_ours");
    // The C side of the Rust tests of the scheduler's driver (tests/driver.rs,
    // which links it with the two libraries above and our rlib).
    let c_dir = manifest_dir.join("c");
    for f in ["driver_world.c", "test_backend.c", "test_backend.h"] {
        println!("cargo:rerun-if-changed={}", c_dir.join(f).display());
    }
    c_build(&[&include, &common, &c_dir]).file(c_dir.join("driver_world.c")).file(c_dir.join("test_backend.c")).compile("driver_world");
    println!("cargo:rustc-link-search=native={}", out.display());
    if !out.join("libggml_alloc_ref.a").exists() {
        c_build(&[&refdir, &common]).file(common.join("ggml-alloc.c")).compile("ggml_alloc_ref");
        c_build(&[&refdir, &common]).file(refdir.join("ggml-backend.c")).compile("ggml_backend_ref");
    }

    let cc = c_build(&[]).get_compiler();
    let cxx = cc::Build::new().cpp(true).get_compiler();
    println!("cargo:rustc-env=FFI_OUT_DIR={}", out.display());
    println!("cargo:rustc-env=FFI_CC={}", cc.path().display());
    println!("cargo:rustc-env=FFI_CXX={}", cxx.path().display());
    let target = std::env::var("TARGET").unwrap();
    let host = std::env::var("HOST").unwrap();
    println!("cargo:rustc-env=FFI_TARGET={target}");
    println!("cargo:rustc-env=FFI_HOST={host}");
    // binutils of the target's architecture (Debian's cross packages)
    let prefix = match target.split('-').next().unwrap() {
        _ if target == host => "",
        "aarch64" => "aarch64-linux-gnu-",
        a if a.starts_with("arm") => "arm-linux-gnueabihf-",
        "i686" | "i586" => "i686-linux-gnu-",
        _ => "",
    };
    println!("cargo:rustc-env=FFI_TOOL_PREFIX={prefix}");
}

/// The flags every C file of ggml is built with, in both builds.
fn c_build(includes: &[&Path]) -> cc::Build {
    let mut b = cc::Build::new();
    b.opt_level(2).debug(false).warnings(false).cargo_metadata(false).flag("-std=c11").define("_GNU_SOURCE", None).flag("-pthread");
    for i in includes {
        b.include(i);
    }
    b
}

/// If the project's shared/reference copy is beside the checkout, make sure
/// the renamed crate file is byte-identical to it (FACTS.md's claim).
fn check_against_shared_reference(root: &Path, refdir: &Path) {
    for shared in [root.join("../shared/reference/ggml-backend.c"), root.join("shared/reference/ggml-backend.c")] {
        if let Ok(expected) = std::fs::read(&shared) {
            let ours = std::fs::read(refdir.join("ggml-backend.c")).unwrap();
            assert!(ours == expected, "renamed {CRATE} ggml-backend.c differs from {}", shared.display());
            return;
        }
    }
}
