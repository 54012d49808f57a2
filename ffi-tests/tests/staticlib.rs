//! The static library users link (`scripts/staticlib`'s output) defines the
//! API and nothing else, so it never interposes a symbol of the program it is
//! linked into, and two Rust static libraries can share a program.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use ffi_tests::harness;

/// Every function the generated headers declare.
fn declared_api() -> BTreeSet<String> {
    let mut api = BTreeSet::new();
    for h in ["ggml-backend.h", "ggml-backend-impl.h", "ggml-backend-ext.h"] {
        let text = std::fs::read_to_string(harness::include_dir().join(h)).unwrap();
        for decl in text.split("WSP_GGML_API").skip(1) {
            let head = decl.split('(').next().unwrap();
            let name = head.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap();
            api.insert(name.to_string());
        }
    }
    assert!(api.len() > 40, "found only {} declarations", api.len());
    api
}

#[test]
fn shipped_archive_defines_exactly_the_api() {
    let shipped: BTreeSet<String> = harness::global_symbols(&harness::staticlib()).into_iter().collect();
    assert_eq!(shipped, declared_api(), "global symbols of the shipped .a vs the headers' functions");
    // What the localisation removes (so this test can fail): cargo's archive
    // defines std's and compiler-builtins' symbols globally.
    let raw = harness::global_symbols(&harness::raw_staticlib());
    assert!(raw.len() > shipped.len() + 100, "cargo's .a defines only {} global symbols", raw.len());
}

/// The library users link has no std (issue 14): none of std's panic,
/// backtrace and symbolization machinery, local symbols included.
#[test]
fn shipped_archive_carries_no_std_machinery() {
    let o = Command::new(harness::binutil("readelf")).arg("-sW").arg(harness::staticlib()).output().expect("run readelf");
    assert!(o.status.success());
    let all = String::from_utf8_lossy(&o.stdout);
    for what in ["gimli", "addr2line", "miniz_oxide", "backtrace", "std9panicking", "rustc_demangle"] {
        let hits: Vec<&str> = all.lines().filter(|l| l.contains(what)).take(3).collect();
        assert!(hits.is_empty(), "the shipped archive has {what} symbols: {hits:?}");
    }
    // the check can fail: a std build of the same code has them
    let std_lib = harness::out_dir().join("std-build");
    let o = Command::new(env!("CARGO"))
        .args([
            "rustc",
            "--quiet",
            "-p",
            "wsp_ggml_backend",
            "--crate-type",
            "staticlib",
            "--features",
            "std",
            "--target",
            env!("FFI_TARGET"),
        ])
        .arg("--target-dir")
        .arg(&std_lib)
        .current_dir(ffi_tests::headers::workspace_root())
        .output()
        .expect("run cargo");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let a = std_lib.join(env!("FFI_TARGET")).join("debug").join("libwsp_ggml_backend.a");
    let o = Command::new(harness::binutil("readelf")).arg("-sW").arg(&a).output().expect("run readelf");
    assert!(String::from_utf8_lossy(&o.stdout).contains("gimli"), "a std build has no gimli symbols: the check above proves nothing");
}

/// Links `sources` and ggml's objects, then the given archive, then the
/// system libraries (the README's link line, where ggml.c is compiled with
/// the program), tracing where `traced` symbols get their definitions.
fn link_traced(name: &str, sources: &[&str], lib: &Path, traced: &[&str]) -> (PathBuf, String) {
    let out = harness::out_dir();
    let exe = out.join("bin").join(name);
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let mut cmd = Command::new(env!("FFI_CC"));
    cmd.args(["-std=c11", "-O1", "-D_GNU_SOURCE", "-pthread"])
        .arg("-I")
        .arg(harness::include_dir())
        .arg("-I")
        .arg(out.join("common"))
        .args(sources.iter().map(|s| harness::c_dir().join(s)))
        .arg("-o")
        .arg(&exe)
        .arg("-Wl,--whole-archive")
        .arg(out.join("libggml_core.a"))
        .arg("-Wl,--no-whole-archive")
        // (a group: ggml-alloc calls back into the archive, and which of
        // cargo's members a program pulls depends on how the library's code
        // falls into them, which differs by target)
        .arg("-Wl,--start-group")
        .arg(lib)
        // (for whatever the archive's pulled members need: cargo's archive
        // may bring in the library's code with a libm copy)
        .arg(out.join("libggml_alloc_ours.a"))
        .arg(out.join("libggml_core.a"))
        .arg("-Wl,--end-group")
        .args(harness::NATIVE_STATIC_LIBS)
        .args(harness::extra_ldflags());
    for t in traced {
        cmd.arg(format!("-Wl,-y,{t}"));
    }
    let o = cmd.output().expect("run the C compiler");
    assert!(o.status.success(), "linking {name} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    (exe, String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
}

/// ggml.c's libm calls bind to libm, not to copies inside our archive
/// (compiler-builtins carries weak ones, which once made i686 outputs differ
/// from the original's by an ulp).
#[test]
fn ggml_maths_binds_to_libm() {
    const MATHS: &[&str] = &["sqrtf", "floorf", "roundf", "expf", "tanhf", "fmaxf"];
    let from_archive = |trace: &str| -> Vec<String> {
        MATHS
            .iter()
            .filter(|s| trace.lines().any(|l| l.ends_with(&format!("definition of {s}")) && l.contains(".a(")))
            .map(|s| s.to_string())
            .collect()
    };
    let (exe, trace) = link_traced("libm_binding-shipped", &["libm_binding.c"], &harness::staticlib(), MATHS);
    assert!(trace.contains("definition of sqrtf"), "no trace of sqrtf:\n{trace}");
    assert_eq!(from_archive(&trace), Vec::<String>::new(), "defined in our archive instead of libm:\n{trace}");
    // cargo's archive does interpose (so this test can fail)
    let (_, raw_trace) = link_traced("libm_binding-raw", &["libm_binding.c"], &harness::raw_staticlib(), MATHS);
    assert!(!from_archive(&raw_trace).is_empty(), "cargo's archive no longer interposes libm:\n{raw_trace}");
    // Same output as the program linked without our library at all.
    let plain = harness::out_dir().join("bin").join("libm_binding-plain");
    let o = Command::new(env!("FFI_CC"))
        .args(["-std=c11", "-O1", "-D_GNU_SOURCE", "-pthread", "-I"])
        .arg(harness::out_dir().join("common"))
        .arg(harness::c_dir().join("libm_binding.c"))
        .arg("-o")
        .arg(&plain)
        .arg(harness::out_dir().join("libggml_core.a"))
        .args(["-lm", "-lpthread"])
        .args(harness::extra_ldflags())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (a, b) = (harness::run(&exe, &[]), harness::run(&plain, &[]));
    assert!(a.status.success() && b.status.success());
    assert!(!a.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&a.stdout), String::from_utf8_lossy(&b.stdout));
}

/// A copy of `lib` whose API is renamed wsp_ggml_* -> wsp2_ggml_*.
fn renamed_copy(lib: &Path, tag: &str) -> PathBuf {
    let dir = harness::out_dir().join("two-copies").join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let map = dir.join("rename.txt");
    let names: String = harness::global_symbols(lib)
        .iter()
        .filter(|s| s.starts_with("wsp_ggml_"))
        .map(|s| format!("{s} wsp2_{}\n", &s["wsp_".len()..]))
        .collect();
    std::fs::write(&map, names).unwrap();
    let copy = dir.join("libwsp2_ggml_backend.a");
    let o = Command::new(harness::binutil("objcopy"))
        .arg(format!("--redefine-syms={}", map.display()))
        .args(["--remove-section=.llvmbc", "--remove-section=.llvmcmd"])
        .arg(lib)
        .arg(&copy)
        .output()
        .expect("run objcopy (binutils)");
    assert!(o.status.success(), "objcopy: {}", String::from_utf8_lossy(&o.stderr));
    copy
}

/// `libs` with every member loaded (`--whole-archive`): whether two copies
/// clash must not depend on which members a program happens to need (the
/// partition of code into members changes with the code).
fn whole(libs: &[&Path]) -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from("-Wl,--whole-archive")];
    v.extend(libs.iter().map(|l| l.to_path_buf()));
    v.push(PathBuf::from("-Wl,--no-whole-archive"));
    v
}

#[test]
fn two_renamed_copies_link_into_one_program() {
    let lib = harness::staticlib();
    let copy = renamed_copy(&lib, "shipped");
    let libs = whole(&[&lib, &copy]);
    let exe = harness::build_against_libs("two_copies", &["two_copies.c"], &libs.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let o = harness::run(&exe, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "copy one: 15\ncopy two: 35\n");

    // cargo's own archive cannot do this: std is defined in both copies.
    let raw = harness::raw_staticlib();
    let raw_copy = renamed_copy(&raw, "raw");
    let raw_libs = whole(&[&raw, &raw_copy]);
    let raw_libs: Vec<&Path> = raw_libs.iter().map(PathBuf::as_path).collect();
    let err = std::panic::catch_unwind(|| harness::build_against_libs("two_copies-raw", &["two_copies.c"], &raw_libs));
    let why = err.err().map(|e| e.downcast_ref::<String>().cloned().unwrap_or_default());
    let why = why.expect("two copies of cargo's archive linked, so this test cannot tell the difference");
    assert!(why.contains("multiple definition"), "two copies of cargo's archive failed to link for another reason:\n{why}");
}
