//! The static library users link (`scripts/staticlib`'s output) defines the
//! API and nothing else, so it never interposes a symbol of the program it is
//! linked into, and two Rust static libraries can share a program. It and the
//! shared library need nothing but libc and ggml: no unwinder, so
//! no libgcc_s, and a `-static` link works.

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

/// The library users link has no std: none of std's panic,
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
/// system libraries (docs/build-cc.md's link line, where ggml.c is compiled with
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

/// What the library may import besides ggml: libc functions (glibc; on
/// aarch64 `getauxval`, which compiler-builtins' atomics probe), and in the
/// shared library the weak references of the toolchain's start-up files
/// (crtbegin: `__cxa_finalize` is glibc's, the rest are optional hooks);
/// `_GLOBAL_OFFSET_TABLE_` is the linker's (i686 objects). The libm names
/// appear in archives made with Rust 1.77 (the MSRV): compiler-builtins'
/// `__divxc3` uses them, and `ld -r` keeps them in the symbol table after
/// dropping that code (no relocation refers to them).
const LIBC_IMPORTS: &[&str] = &[
    "abort",
    "bcmp",
    "calloc",
    "clock_gettime",
    // the schedule picture written to WSP_GGML_SCHED_DOT's file (src/platform.rs)
    "fclose",
    // C's output streams flushed before an abort, so a program's buffered
    // output is not lost (src/platform.rs)
    "fflush",
    "fopen",
    "free",
    "fwrite",
    "getauxval",
    "getenv",
    "malloc",
    "memcmp",
    "memcpy",
    "memmove",
    "memset",
    "posix_memalign",
    // the thread's running export, named by the out-of-memory message (in
    // libc itself on glibc 2.34 and later, bionic and Apple's libSystem)
    "pthread_getspecific",
    "pthread_key_create",
    "pthread_key_delete",
    "pthread_setspecific",
    "realloc",
    "strlen",
    "write",
    "_ITM_deregisterTMCloneTable",
    "_ITM_registerTMCloneTable",
    "__cxa_finalize",
    "__gmon_start__",
    "_GLOBAL_OFFSET_TABLE_",
    "fmaxl",
    "logbl",
    "scalbnl",
];

/// The ggml functions the library may import: the ones it does (docs/build-cc.md,
/// "imports", kept exact by docs_recipes.rs) and the rest of what the original
/// `ggml-backend.c` imported (FACTS.md).
const GGML_IMPORTS: &[&str] = &[
    "wsp_ggml_dup_tensor",
    "wsp_ggml_free",
    "wsp_ggml_graph_compute",
    "wsp_ggml_graph_overhead_custom",
    "wsp_ggml_graph_plan",
    "wsp_ggml_init",
    "wsp_ggml_nbytes",
    "wsp_ggml_new_graph_custom",
    "wsp_ggml_op_name",
    "wsp_ggml_tallocr_alloc",
    "wsp_ggml_tallocr_free",
    "wsp_ggml_tallocr_get_buffer",
    "wsp_ggml_tallocr_is_measure",
    "wsp_ggml_tallocr_max_size",
    "wsp_ggml_tallocr_new_from_buffer",
    "wsp_ggml_tallocr_new_measure_from_backend",
    "wsp_ggml_tallocr_reset",
    "wsp_ggml_tensor_overhead",
    // imported by the original only
    "wsp_ggml_format_name",
    "wsp_ggml_gallocr_alloc_graph_n",
    "wsp_ggml_gallocr_free",
    "wsp_ggml_gallocr_new",
    "wsp_ggml_graph_view",
    "wsp_ggml_hash_find_or_insert",
    "wsp_ggml_print_backtrace",
    "wsp_ggml_tallocr_new_from_backend",
    "wsp_ggml_time_us",
];

/// The undefined global and weak symbols of an ELF file (every member of an
/// archive), without symbol versions; `dynamic`: of the dynamic symbol table.
fn undefined_symbols(path: &Path, dynamic: bool) -> BTreeSet<String> {
    let o = Command::new(harness::binutil("readelf"))
        .arg(if dynamic { "--dyn-syms" } else { "--syms" })
        .arg("-W")
        .arg(path)
        .output()
        .expect("run readelf (binutils)");
    assert!(o.status.success(), "readelf failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && (f[4] == "GLOBAL" || f[4] == "WEAK") && f[6] == "UND").then(|| f[7].split('@').next().unwrap().to_string())
        })
        .collect()
}

/// The libraries a shared object or program names as needed (DT_NEEDED).
fn needed_libraries(path: &Path) -> Vec<String> {
    let o = Command::new(harness::binutil("readelf")).arg("-dW").arg(path).output().expect("run readelf (binutils)");
    assert!(o.status.success(), "readelf failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1).and_then(|r| r.split(']').next()).map(String::from))
        .collect()
}

/// Imports that only an unwinder (libgcc_s, libgcc_eh, libunwind) or a C++
/// runtime provides. (`__cxa_finalize` is glibc's, called by crtbegin.)
fn unwinder_imports(imports: &BTreeSet<String>) -> Vec<&String> {
    imports
        .iter()
        .filter(|s| {
            s.starts_with("_Unwind_")
                || s.starts_with("__gcc_personality")
                || s.starts_with("__aeabi_unwind_cpp_pr")
                || s.starts_with("__gxx_personality")
                || (s.starts_with("__cxa_") && s.as_str() != "__cxa_finalize")
        })
        .collect()
}

/// The shared library and the shipped archive import libc and
/// ggml, nothing else: no unwinder (core's and alloc's landing pads call
/// `_Unwind_Resume`, and on Arm every unwind table entry names an EHABI
/// personality routine: src/platform.rs resolves them to a hidden abort).
#[test]
fn artefacts_import_nothing_but_libc_and_ggml() {
    let allowed: BTreeSet<&str> = LIBC_IMPORTS.iter().chain(GGML_IMPORTS).copied().collect();
    for (what, path, dynamic) in [("the shared library", harness::cdylib(), true), ("the shipped archive", harness::staticlib(), false)] {
        let imports = undefined_symbols(&path, dynamic);
        assert!(imports.contains("malloc") && imports.contains("wsp_ggml_nbytes"), "{what}: too few imports read: {imports:?}");
        assert_eq!(unwinder_imports(&imports), Vec::<&String>::new(), "{what} ({}) imports the unwinder", path.display());
        let other: Vec<&String> = imports.iter().filter(|s| !allowed.contains(s.as_str())).collect();
        assert!(other.is_empty(), "{what} ({}) imports symbols outside libc and ggml: {other:?}", path.display());
    }
    // and the shared library names nothing but libc (and its parts) as needed
    let needed = needed_libraries(&harness::cdylib());
    assert!(needed.iter().any(|l| l.starts_with("libc.so")), "no libc among {needed:?}");
    let other: Vec<&String> =
        needed.iter().filter(|l| !["libc.so", "libm.so", "libdl.so", "libpthread.so"].iter().any(|p| l.starts_with(p))).collect();
    assert!(other.is_empty(), "the shared library needs {other:?}");
}

/// Compile `sources` (from ffi-tests/c) into `out` with the target's C
/// compiler and `flags`; panics with the compiler's output on failure.
fn compile(sources: &[&str], out: &Path, flags: &[&str]) {
    let o = Command::new(env!("FFI_CC"))
        .args(["-std=c11", "-O1", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror"])
        .args(sources.iter().map(|s| if Path::new(s).is_absolute() { PathBuf::from(s) } else { harness::c_dir().join(s) }))
        .arg("-o")
        .arg(out)
        .args(flags)
        .args(harness::extra_ldflags())
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "building {} failed:\n{}{}",
        out.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A program linked without libgcc_s (`-nodefaultlibs -lc -ldl`)
/// dlopens the shared library and uses it. The library used to import
/// `_Unwind_Resume` without naming libgcc_s as needed, so such a host failed
/// with `undefined symbol: _Unwind_Resume`; the test shows that a library of
/// that shape does fail in this host (so the host really has no unwinder).
#[test]
fn dlopen_from_a_host_without_libgcc_s() {
    let dir = harness::out_dir().join("no-libgcc_s");
    std::fs::create_dir_all(&dir).unwrap();
    let so = harness::cdylib();
    // The ggml functions the library imports (it is linked BIND_NOW): stubs
    // in the host, exported with -rdynamic; the calls made never reach them.
    let stubs = dir.join("ggml_stubs.c");
    let mut text = String::from("#include <stdlib.h>\n");
    for s in undefined_symbols(&so, true).iter().filter(|s| s.starts_with("wsp_ggml_")) {
        text += &format!("void {s}(void);\nvoid {s}(void) {{ abort(); }}\n");
    }
    std::fs::write(&stubs, text).unwrap();
    let host = dir.join("dlopen_host");
    let stubs = stubs.to_string_lossy().into_owned();
    // (no unwind tables: on Arm they would name libgcc's personality routines)
    let no_unwind = ["-fno-exceptions", "-fno-unwind-tables", "-fno-asynchronous-unwind-tables"];
    let mut flags = vec!["-rdynamic", "-nodefaultlibs"];
    flags.extend(no_unwind);
    flags.extend(["-lc", "-ldl"]);
    compile(&["dlopen_host.c", &stubs], &host, &flags);
    let needed = needed_libraries(&host);
    assert!(!needed.iter().any(|l| l.contains("gcc") || l.contains("unwind")), "the host needs {needed:?}");

    // a library importing _Unwind_Resume does not load in this host
    let control = dir.join("libunwind_import.so");
    let mut flags = vec!["-shared", "-fPIC", "-nodefaultlibs", "-Wl,-z,now"];
    flags.extend(no_unwind);
    flags.push("-lc");
    compile(&["unwind_import.c"], &control, &flags);
    let o = harness::run(&host, &[control.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !o.status.success() && out.contains("dlopen failed") && out.contains("_Unwind_Resume"),
        "a library importing _Unwind_Resume loaded in the host, which therefore proves nothing:\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // ours does
    let o = harness::run(&host, &[so.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "dlopen of {} in a host without libgcc_s:\n{out}{}", so.display(), String::from_utf8_lossy(&o.stderr));
    assert_eq!(out, "loaded: backend CPU\n");
}

/// A fully static program links the shipped archive with the
/// docs/build-cc.md's libraries (no `-lgcc_s`, which has no static version: `-static`
/// used to fail with `cannot find -lgcc_s`) and runs; the linker's trace
/// shows that nothing in our archive refers to the unwinder. (glibc's own
/// libc.a does, so the compiler driver's `-static` brings libgcc_eh for it:
/// that is the C side's, not ours.)
#[test]
fn static_link_without_the_unwinder() {
    let out = harness::out_dir();
    let exe = out.join("bin").join("ours_extras-static");
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let (alloc, lib, core) = (out.join("libggml_alloc_ours.a"), harness::staticlib(), out.join("libggml_core.a"));
    let include = format!("-I{}", harness::include_dir().display());
    let common = format!("-I{}", out.join("common").display());
    let c = format!("-I{}", harness::c_dir().display());
    let group = ["-Wl,--start-group", alloc.to_str().unwrap(), lib.to_str().unwrap(), core.to_str().unwrap(), "-Wl,--end-group"];
    let mut flags = vec!["-static", "-pthread", &include, &common, &c];
    flags.extend(group);
    flags.extend(["-lm", "-lpthread"]);
    let traced = ["_Unwind_Resume", "__gcc_personality_v0", "__aeabi_unwind_cpp_pr0", "__aeabi_unwind_cpp_pr1"];
    let traces: Vec<String> = traced.iter().map(|t| format!("-Wl,-y,{t}")).collect();
    flags.extend(traces.iter().map(String::as_str));
    let o = Command::new(env!("FFI_CC"))
        .args(["-std=c11", "-O1", "-D_GNU_SOURCE"])
        .arg(harness::c_dir().join("ours_extras.c"))
        .arg("-o")
        .arg(&exe)
        .args(&flags)
        .args(harness::extra_ldflags())
        .output()
        .expect("run the C compiler");
    let trace = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "a -static link with the shipped archive failed:\n{trace}");
    let ours: Vec<&str> = trace.lines().filter(|l| l.contains("libwsp_ggml_backend")).collect();
    assert!(ours.is_empty(), "the shipped archive refers to the unwinder:\n{}", ours.join("\n"));
    assert!(needed_libraries(&exe).is_empty(), "a -static program with shared libraries: {:?}", needed_libraries(&exe));
    let r = harness::run(&exe, &[]);
    assert!(r.status.success(), "the static program failed: {}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("ok aligned cpu buffer base"));
}
