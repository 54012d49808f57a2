//! Builds the two C stacks that the benchmarks run side by side in one process.
//!
//! 1. Finds whisper.cpp v1.5.0 inside the `whisper-rs-sys =0.8.0` crate in
//!    cargo's registry (as ffi-tests/build.rs does) and applies whisper.rn's
//!    rename (`ggml_` -> `wsp_ggml_`).
//! 2. "ours": ggml.c, ggml-quants.c, ggml-alloc.c (against OUR headers in
//!    include/), the C test backend of ffi-tests and the benchmark driver
//!    `c/bench_drv.c` (entry points `ours_bench_*`) -> `libbench_ours.a`. Our
//!    Rust library (an rlib dependency) imports its `wsp_ggml_*` symbols from
//!    it and provides every `wsp_ggml_backend_*` symbol.
//! 3. "ref": the same files plus the ORIGINAL ggml-backend.c, all renamed a
//!    second time (`wsp_ggml_` -> `ref_ggml_`), the driver with entry points
//!    `ref_bench_*`, linked into one relocatable object (`ld -r`) in which
//!    every symbol except `ref_bench_*` is then made local (`objcopy
//!    --keep-global-symbols`). Functions that ggml defines without the ggml_
//!    prefix (quantize_row_*, dequantize_row_*, ...), the test backend's
//!    functions and the original's global `causes` can thus exist twice.
//!    A 4 MiB `.bss` pad is linked right behind the original's `causes` array
//!    (see BENCHMARKS.md: the original writes past it for graphs of more than
//!    ~2048 nodes); the driver checks the layout at run time.
//! 4. `libbench_alloc.a`: `__wrap_malloc` & co., used only by the `sched_mem`
//!    binary (linked with `-Wl,--wrap=...`), to count heap bytes.
//!
//! Both stacks use the same compiler and flags: `BENCH_CFLAGS` if set, else
//! `-O2` plus `-mavx2 -mfma -mf16c` when the build machine has them (not
//! `-march=native`: valgrind, used by scripts/callgrind, cannot run AVX-512).
//! Nothing generated here is ever written outside OUT_DIR.

use std::path::{Path, PathBuf};
use std::process::Command;

use ref_sources::{find_reference_sources, write_if_changed, wsp_rename};

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    let include = root.join("include");
    let tb_dir = root.join("ffi-tests").join("c");
    let c_dir = manifest_dir.join("c");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", c_dir.display());
    println!("cargo:rerun-if-env-changed=BENCH_CFLAGS");
    for f in ["ggml-backend.h", "ggml-backend-impl.h"] {
        println!("cargo:rerun-if-changed={}", include.join(f).display());
    }
    for f in ["test_backend.c", "test_backend.h"] {
        println!("cargo:rerun-if-changed={}", tb_dir.join(f).display());
    }

    // --- sources -----------------------------------------------------------
    let src = find_reference_sources(&root);
    let common = out.join("common");
    let refdir = out.join("ref");
    std::fs::create_dir_all(&common).unwrap();
    std::fs::create_dir_all(&refdir).unwrap();
    for f in ["ggml.c", "ggml.h", "ggml-alloc.c", "ggml-alloc.h", "ggml-impl.h", "ggml-quants.c", "ggml-quants.h"] {
        let wsp = wsp_rename(&read(&src.join(f)));
        write_if_changed(&common.join(f), &wsp);
        write_if_changed(&refdir.join(f), &ref_rename(&wsp));
    }
    for f in ["ggml-backend.c", "ggml-backend.h", "ggml-backend-impl.h"] {
        write_if_changed(&refdir.join(f), &ref_rename(&wsp_rename(&read(&src.join(f)))));
    }
    // Our C files are written with wsp_ names; the ref copies are renamed.
    write_if_changed(&refdir.join("test_backend.c"), &ref_rename(&read(&tb_dir.join("test_backend.c"))));
    write_if_changed(&refdir.join("test_backend.h"), &ref_rename(&read(&tb_dir.join("test_backend.h"))));
    write_if_changed(&refdir.join("bench_drv.c"), &ref_rename(&read(&c_dir.join("bench_drv.c"))));

    let flags = c_flags();
    println!("cargo:rustc-env=WSP_BENCH_CFLAGS={}", flags.join(" "));

    // --- ours ----------------------------------------------------------------
    let ours = std::thread::scope(|s| {
        let ours = s.spawn(|| {
            let mut objs = build(&flags, &[&common]).file(common.join("ggml.c")).file(common.join("ggml-quants.c")).compile_intermediates();
            objs.extend(build(&flags, &[&include, &common]).file(common.join("ggml-alloc.c")).compile_intermediates());
            objs.extend(
                build(&flags, &[&include, &common, &tb_dir, &c_dir])
                    .file(tb_dir.join("test_backend.c"))
                    .file(c_dir.join("bench_drv.c"))
                    .file(c_dir.join("baseline.c"))
                    .define("BENCH_PREFIX", "ours_bench_")
                    .compile_intermediates(),
            );
            objs
        });
        // --- ref -------------------------------------------------------------
        let refs = s.spawn(|| {
            let pad = out.join("causes_pad.c");
            write_if_changed(
                &pad,
                "// Linked right behind the original's `causes` array: see build.rs.\n\
                 char ref_bench_causes_overflow_pad[4 << 20];\n",
            );
            // Order matters for the pad: ggml-backend.c, then causes_pad.c, last.
            let mut objs = build(&flags, &[&refdir])
                .file(refdir.join("ggml.c"))
                .file(refdir.join("ggml-quants.c"))
                .file(refdir.join("ggml-alloc.c"))
                .file(refdir.join("test_backend.c"))
                .file(refdir.join("bench_drv.c"))
                .define("BENCH_PREFIX", "ref_bench_")
                .define("BENCH_REF", "1")
                .compile_intermediates();
            objs.extend(build(&flags, &[&refdir]).file(refdir.join("ggml-backend.c")).compile_intermediates());
            objs.extend(build(&flags, &[]).file(&pad).compile_intermediates());
            objs
        });
        let ours = ours.join().unwrap();
        let refs = refs.join().unwrap();
        link_ref_stack(&out, &refs);
        ours
    });
    archive(&out.join("libbench_ours.a"), &ours);
    let alloc = build(&flags, &[]).file(c_dir.join("alloc_count.c")).compile_intermediates();
    archive(&out.join("libbench_alloc.a"), &alloc);

    println!("cargo:rustc-link-search=native={}", out.display());
    // whole-archive: our Rust library (linked after this crate) imports ggml
    // symbols from it, whatever the driver happens to reference.
    println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=bench_ours");
    println!("cargo:rustc-link-lib=static:-bundle=bench_ref");
    println!("cargo:rustc-link-lib=static:-bundle=bench_alloc");
    println!("cargo:rustc-link-lib=dylib=m");
    println!("cargo:rustc-link-lib=dylib=pthread");
    let wraps = ["malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc", "memalign"];
    let wrap_arg: Vec<String> = wraps.iter().map(|w| format!("--wrap={w}")).collect();
    println!("cargo:rustc-link-arg-bin=sched_mem=-Wl,{}", wrap_arg.join(","));
}

/// Compiler flags shared by every C file of both stacks.
fn c_flags() -> Vec<String> {
    if let Ok(f) = std::env::var("BENCH_CFLAGS") {
        return f.split_whitespace().map(String::from).collect();
    }
    let mut f = vec!["-O2".to_string()];
    let host = std::env::var("HOST").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    #[cfg(target_arch = "x86_64")]
    if host == target
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
    {
        f.extend(["-mavx2", "-mfma", "-mf16c"].map(String::from));
    }
    let _ = (host, target);
    f
}

fn build(flags: &[String], includes: &[&Path]) -> cc::Build {
    let mut b = cc::Build::new();
    b.opt_level(2)
        .debug(false)
        .warnings(false)
        .cargo_metadata(false)
        .flag("-std=c11")
        .flag("-w")
        .define("_GNU_SOURCE", None)
        .flag("-pthread")
        // keep .bss one section per object, so the pad follows `causes`
        .flag("-fno-data-sections")
        .flag("-fno-function-sections");
    for f in flags {
        b.flag(f);
    }
    for i in includes {
        b.include(i);
    }
    b
}

/// `ld -r` the ref objects into one, then keep only `ref_bench_*` global.
fn link_ref_stack(out: &Path, objs: &[PathBuf]) {
    let all = out.join("ref_stack_all.o");
    let done = out.join("ref_stack.o");
    run(Command::new(tool("LD", "ld")).arg("-r").arg("-o").arg(&all).args(objs));
    let nm = capture(Command::new(tool("NM", "nm")).args(["-g", "--defined-only", "-P"]).arg(&all));
    let keep: Vec<&str> = nm
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| s.starts_with("ref_bench_") && *s != "ref_bench_causes_overflow_pad")
        .collect();
    assert!(keep.len() > 10, "ref driver entry points not found in {}", all.display());
    let keep_file = out.join("ref_keep.txt");
    std::fs::write(&keep_file, keep.join("\n") + "\n").unwrap();
    run(Command::new(tool("OBJCOPY", "objcopy")).arg(format!("--keep-global-symbols={}", keep_file.display())).arg(&all).arg(&done));

    // Check: only the driver's entry points are global, nothing of ggml is undefined.
    let globals = capture(Command::new(tool("NM", "nm")).args(["-g", "--defined-only", "-P"]).arg(&done));
    for l in globals.lines() {
        let s = l.split_whitespace().next().unwrap_or("");
        assert!(s.starts_with("ref_bench_"), "symbol {s} is still global in {}", done.display());
    }
    let undef = capture(Command::new(tool("NM", "nm")).args(["-u", "-P"]).arg(&done));
    for l in undef.lines() {
        let s = l.split_whitespace().next().unwrap_or("");
        let bad = ["wsp_", "ref_", "ggml", "test_backend", "quantize", "causes"];
        assert!(!bad.iter().any(|b| s.contains(b)), "ref stack has an unresolved symbol {s}");
    }
    archive(&out.join("libbench_ref.a"), &[done]);
}

fn archive(lib: &Path, objs: &[PathBuf]) {
    let _ = std::fs::remove_file(lib);
    run(Command::new(tool("AR", "ar")).arg("crs").arg(lib).args(objs));
}

fn tool(env: &str, default: &str) -> String {
    std::env::var(format!("BENCH_{env}")).unwrap_or_else(|_| default.to_string())
}

fn run(cmd: &mut Command) {
    let st = cmd.status().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(st.success(), "{cmd:?} failed: {st}");
}

fn capture(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// The second prefix, for the reference stack that shares the process.
fn ref_rename(s: &str) -> String {
    s.replace("WSP_GGML_", "REF_GGML_")
        .replace("wsp_ggml_", "ref_ggml_")
        .replace("WSP_GGUF_", "REF_GGUF_")
        .replace("wsp_gguf_", "ref_gguf_")
}
