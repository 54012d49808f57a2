//! `scripts/install`: the library installed like a C library, and used the
//! way docs/install.md says (an install line, a pkg-config line and CMake
//! lines, with ggml's objects built by ffi-tests), and the programs must run. Once
//! into a plain prefix, once staged with DESTDIR (files under DESTDIR, paths
//! inside the .pc file without it; the CMake package, relocatable, is used
//! from where the files landed).
//!
//! Host only: the script installs the host's release build.

use ffi_tests::harness;
use ffi_tests::headers::workspace_root;
use ffi_tests::installed::{build_with_pkg_config, fresh_dir, ggml_objects, not_on_host, run_ok};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The commands these tests run, in the placeholder form a reader adapts
/// (docs/install.md runs its own recipe as written: docs_recipes.rs).
const INSTALL_LINE: &str = "scripts/install --prefix /usr/local";
const PKG_CONFIG_LINE: &str =
    "cc -rdynamic -o app app.c ggml.o ggml-alloc.o ggml-quants.o $(pkg-config --cflags --libs wsp_ggml_backend) -Ipath/to/ggml -lm -lpthread";
const CMAKE_LINES: &str = "find_package(wsp_ggml_backend 0.1 REQUIRED)
add_executable(app app.c ggml.c ggml-alloc.c ggml-quants.c)
target_include_directories(app PRIVATE path/to/ggml)
target_link_libraries(app PRIVATE wsp_ggml_backend::wsp_ggml_backend m pthread)
set_target_properties(app PROPERTIES ENABLE_EXPORTS ON)";

/// The version in Cargo.toml's [package].
fn cargo_toml_version() -> String {
    let text = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let package = &text[text.find("[package]").expect("[package]")..];
    let line = package.lines().find(|l| l.starts_with("version = \"")).expect("a version line");
    line.trim_start_matches("version = \"").trim_end_matches('"').to_string()
}

/// The test program: the CPU backend, its name, and a small graph computed
/// through the backend (so the library calls into the program's ggml), and
/// the version as the header and the library say it.
const APP_C: &str = r#"#include "ggml-backend-ext.h"
#include <stdio.h>
#include <string.h>

int main(void) {
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    if (cpu == NULL) return 1;
    struct wsp_ggml_init_params params = { 16 * 1024 * 1024, NULL, false };
    struct wsp_ggml_context * ctx = wsp_ggml_init(params);
    struct wsp_ggml_tensor * a = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4);
    for (int i = 0; i < 4; i++) wsp_ggml_set_f32_1d(a, i, (float) i + 1.0f);
    struct wsp_ggml_tensor * sum = wsp_ggml_add(ctx, a, a);
    struct wsp_ggml_cgraph * graph = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(graph, sum);
    wsp_ggml_backend_graph_compute(cpu, graph);
    printf("backend %s\n", wsp_ggml_backend_name(cpu));
    printf("sum %g %g %g %g\n", wsp_ggml_get_f32_1d(sum, 0), wsp_ggml_get_f32_1d(sum, 1), wsp_ggml_get_f32_1d(sum, 2),
           wsp_ggml_get_f32_1d(sum, 3));
    printf("version %s %s %d %d.%d.%d\n", wsp_ggml_backend_version(), WSP_GGML_BACKEND_VERSION_STRING, WSP_GGML_BACKEND_VERSION,
           WSP_GGML_BACKEND_VERSION_MAJOR, WSP_GGML_BACKEND_VERSION_MINOR, WSP_GGML_BACKEND_VERSION_PATCH);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(cpu);
    return 0;
}
"#;

/// What the test program must print.
fn expected_output() -> String {
    let v = cargo_toml_version();
    let n: Vec<u32> = v.split('.').map(|p| p.parse().unwrap()).collect();
    format!("backend CPU\nsum 2 4 6 8\nversion {v} {v} {} {v}\n", n[0] * 10000 + n[1] * 100 + n[2])
}

fn check_program(exe: &Path, env: &[(&str, &Path)]) {
    let mut cmd = Command::new(exe);
    cmd.env_remove("LD_LIBRARY_PATH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_ok(&mut cmd, &exe.display().to_string());
    assert_eq!(out, expected_output(), "{}", exe.display());
}

/// Every file the install must write, under `root` (= DESTDIR + prefix).
fn check_installed_files(root: &Path, listed: &str) {
    let v = cargo_toml_version();
    let major = v.split('.').next().unwrap();
    let lib = root.join("lib");
    let real = format!("libwsp_ggml_backend.so.{v}");
    for f in [
        lib.join(&real),
        lib.join("libwsp_ggml_backend.a"),
        root.join("include/wsp_ggml_backend/ggml-backend.h"),
        root.join("include/wsp_ggml_backend/ggml-backend-impl.h"),
        root.join("include/wsp_ggml_backend/ggml-backend-ext.h"),
        lib.join("pkgconfig/wsp_ggml_backend.pc"),
        lib.join("cmake/wsp_ggml_backend/wsp_ggml_backendConfig.cmake"),
        lib.join("cmake/wsp_ggml_backend/wsp_ggml_backendConfigVersion.cmake"),
    ] {
        assert!(f.is_file(), "{} was not installed", f.display());
        assert!(listed.lines().any(|l| Path::new(l) == f), "the script does not list {}:\n{listed}", f.display());
    }
    // the two links of a versioned shared library
    let link = |name: &str| std::fs::read_link(lib.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(link(&format!("libwsp_ggml_backend.so.{major}")), Path::new(&real));
    assert_eq!(link("libwsp_ggml_backend.so"), Path::new(&format!("libwsp_ggml_backend.so.{major}")));
    let dynamic = run_ok(Command::new("readelf").arg("-d").arg(lib.join(&real)), "readelf -d");
    assert!(dynamic.contains(&format!("Library soname: [libwsp_ggml_backend.so.{major}]")), "SONAME:\n{dynamic}");
    // the shipped archive (scripts/staticlib's), not cargo's: the API only
    let globals = harness::global_symbols(&lib.join("libwsp_ggml_backend.a"));
    let foreign: Vec<&String> = globals.iter().filter(|s| !s.starts_with("wsp_ggml_")).collect();
    assert!(foreign.is_empty(), "the installed archive defines more than the API (cargo's raw archive?): {foreign:?}");
    // and no debug sections (Rust's precompiled core carries DWARF)
    let sections = run_ok(Command::new("readelf").args(["-S", "-W"]).arg(lib.join("libwsp_ggml_backend.a")), "readelf -S");
    assert!(!sections.contains(".debug_"), "the installed archive has debug sections:\n{sections}");
    // the headers as committed
    for h in ["ggml-backend.h", "ggml-backend-impl.h", "ggml-backend-ext.h"] {
        let ours = std::fs::read(workspace_root().join("include").join(h)).unwrap();
        assert_eq!(std::fs::read(root.join("include/wsp_ggml_backend").join(h)).unwrap(), ours, "{h}");
    }
}

/// The install line (its prefix replaced by `prefix`), with DESTDIR set or not.
fn install(prefix: &Path, destdir: Option<&Path>) -> String {
    ffi_tests::installed::install(INSTALL_LINE, prefix, destdir)
}

/// The CMake lines in a project of their own, placeholders mapped as
/// for the pkg-config line (`ggml*.c`: ggml's objects), plus the same
/// program linked with the static target; configured with
/// CMAKE_PREFIX_PATH = `prefix`, built, and both programs run.
fn build_with_cmake(dir: &Path, prefix: &Path) -> (PathBuf, PathBuf) {
    let objects = ggml_objects(&dir.join("objects"));
    std::fs::write(dir.join("app.c"), APP_C).unwrap();
    let mut lines = CMAKE_LINES.to_string();
    assert!(lines.contains("find_package(wsp_ggml_backend"), "{lines}");
    assert!(lines.contains("wsp_ggml_backend::wsp_ggml_backend "), "{lines}");
    for (name, path) in &objects {
        lines = lines.replace(&name.replace(".o", ".c"), &path.display().to_string());
    }
    lines = lines.replace("path/to/ggml", &harness::out_dir().join("common").display().to_string());
    let statically = lines
        .lines()
        .filter(|l| !l.contains("find_package") && !l.contains("ENABLE_EXPORTS"))
        .map(|l| {
            l.replace("(app ", "(app_static ").replace("wsp_ggml_backend::wsp_ggml_backend ", "wsp_ggml_backend::wsp_ggml_backend_static ")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let project = format!(
        "cmake_minimum_required(VERSION 3.13)\nproject(app C)\n\
         # a version this package is not: refused\n\
         find_package(wsp_ggml_backend 0.999 QUIET)\n\
         if(wsp_ggml_backend_FOUND)\n    message(FATAL_ERROR \"version 0.999 accepted\")\nendif()\n\
         # the package's lines\n{lines}\n# the static target\n{statically}\n"
    );
    std::fs::write(dir.join("CMakeLists.txt"), &project).unwrap();
    let build = dir.join("build");
    run_ok(
        Command::new("cmake")
            .arg("-S")
            .arg(dir)
            .arg("-B")
            .arg(&build)
            .arg(format!("-DCMAKE_C_COMPILER={}", env!("FFI_CC")))
            .env("CMAKE_PREFIX_PATH", prefix),
        &format!("cmake configure of\n{project}\n"),
    );
    run_ok(Command::new("cmake").arg("--build").arg(&build), &format!("cmake --build of\n{project}\n"));
    (build.join("app"), build.join("app_static"))
}

fn ldd(exe: &Path) -> String {
    run_ok(Command::new("ldd").arg(exe).env_remove("LD_LIBRARY_PATH"), "ldd")
}

#[test]
fn install_into_a_prefix_then_link_with_pkg_config() {
    if let Some(why) = not_on_host() {
        eprintln!("{why}");
        return;
    }
    let dir = fresh_dir("plain");
    let prefix = dir.join("prefix");
    let listed = install(&prefix, None);
    check_installed_files(&prefix, &listed);
    let pkgconfig = prefix.join("lib/pkgconfig");
    let pc = std::fs::read_to_string(pkgconfig.join("wsp_ggml_backend.pc")).unwrap();
    assert!(pc.contains(&format!("prefix={}\n", prefix.display())), "{pc}");
    assert!(pc.contains("Does not provide ggml"), "the .pc file says that ggml is the user's:\n{pc}");
    let pkg = |args: &[&str]| run_ok(Command::new("pkg-config").args(args).env("PKG_CONFIG_PATH", &pkgconfig), "pkg-config");
    assert_eq!(pkg(&["--modversion", "wsp_ggml_backend"]).trim(), cargo_toml_version());
    assert_eq!(
        pkg(&["--cflags", "--libs", "wsp_ggml_backend"]).split_whitespace().collect::<Vec<_>>(),
        [
            format!("-I{}/include/wsp_ggml_backend", prefix.display()),
            format!("-L{}/lib", prefix.display()),
            "-lwsp_ggml_backend".to_string()
        ]
    );
    // the static archive's system libraries (rustc --print native-static-libs: libc's)
    let private = pkg(&["--static", "--libs", "wsp_ggml_backend"]);
    for l in ["-lm", "-lrt", "-lpthread"] {
        assert!(private.split_whitespace().any(|w| w == l), "--static --libs lacks {l}: {private}");
    }

    std::fs::write(dir.join("app.c"), APP_C).unwrap();
    let exe = build_with_pkg_config(PKG_CONFIG_LINE, &dir, &pkgconfig);
    let libdir = prefix.join("lib");
    check_program(&exe, &[("LD_LIBRARY_PATH", &libdir)]);
    let deps = run_ok(Command::new("ldd").arg(&exe).env("LD_LIBRARY_PATH", &libdir), "ldd");
    assert!(
        deps.lines().any(|l| l.contains(&format!("libwsp_ggml_backend.so.0 => {}/libwsp_ggml_backend.so.0", libdir.display()))),
        "the program loads the installed library by its SONAME:\n{deps}"
    );
}

#[test]
fn staged_install_with_destdir_then_link_with_cmake() {
    if let Some(why) = not_on_host() {
        eprintln!("{why}");
        return;
    }
    let dir = fresh_dir("destdir");
    let destdir = dir.join("stage");
    // a prefix of the final system, never written to here
    let prefix = PathBuf::from("/opt/wsp-ggml-backend-install-test");
    let listed = install(&prefix, Some(&destdir));
    let staged = destdir.join(prefix.strip_prefix("/").unwrap());
    check_installed_files(&staged, &listed);
    assert!(!prefix.exists(), "DESTDIR install wrote to {}", prefix.display());
    let pc = std::fs::read_to_string(staged.join("lib/pkgconfig/wsp_ggml_backend.pc")).unwrap();
    assert!(pc.starts_with(&format!("prefix={}\n", prefix.display())), "the .pc names the final prefix:\n{pc}");
    for f in ["lib/pkgconfig/wsp_ggml_backend.pc", "lib/cmake/wsp_ggml_backend/wsp_ggml_backendConfig.cmake"] {
        let text = std::fs::read_to_string(staged.join(f)).unwrap();
        assert!(!text.contains(&destdir.display().to_string()), "{f} names DESTDIR:\n{text}");
    }

    // the CMake package finds its files from its own place: used where
    // DESTDIR put it, as after moving an installed tree
    let (shared, statically) = build_with_cmake(&dir.join("cmake"), &staged);
    check_program(&shared, &[]);
    check_program(&statically, &[]);
    let libdir = staged.join("lib");
    let deps = ldd(&shared);
    assert!(
        deps.lines().any(|l| l.contains(&format!("libwsp_ggml_backend.so.0 => {}/libwsp_ggml_backend.so.0", libdir.display()))),
        "the CMake build links the installed shared library (build rpath):\n{deps}"
    );
    assert!(!ldd(&statically).contains("libwsp_ggml_backend"), "the static target links no shared library");
}

#[test]
fn bad_usage_is_refused_with_exit_status_2() {
    if let Some(why) = not_on_host() {
        eprintln!("{why}");
        return;
    }
    let script = workspace_root().join("scripts/install");
    for args in [&[][..], &["--prefix"], &["--prefix", "relative/dir"], &["--prefix", "/tmp/x", "--frobnicate"]] {
        let o = Command::new(&script).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("install: error: "), "{args:?}: {err}");
    }
    let help = run_ok(Command::new(&script).arg("--help"), "scripts/install --help");
    assert!(help.contains("--prefix") && help.contains("DESTDIR"), "{help}");
}

/// Every path under `dir` (folders too), with the content of each file.
fn tree(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.push((p.clone(), None));
            out.extend(tree(&p));
        } else {
            out.push((p.clone(), Some(std::fs::read(&p).unwrap_or_default())));
        }
    }
    out.sort();
    out
}

/// `--uninstall` removes exactly what the install wrote: a prefix that
/// held other files (in the same folders) is left as it was, and a prefix
/// that was empty is empty again.
#[test]
fn uninstall_leaves_the_prefix_as_it_was() {
    if let Some(why) = not_on_host() {
        eprintln!("{why}");
        return;
    }
    let dir = fresh_dir("uninstall");
    let shared = dir.join("shared");
    for (f, text) in [("lib/libother.so.1", "other"), ("lib/pkgconfig/other.pc", "Name: other"), ("include/other.h", "int other;")] {
        std::fs::create_dir_all(shared.join(f).parent().unwrap()).unwrap();
        std::fs::write(shared.join(f), text).unwrap();
    }
    std::fs::create_dir_all(shared.join("lib/cmake")).unwrap(); // empty before: stays
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let script = workspace_root().join("scripts/install");
    for prefix in [&shared, &empty] {
        let before = tree(prefix);
        let listed = install(prefix, None);
        assert!(tree(prefix).len() > before.len(), "installed nothing into {}", prefix.display());
        let removed = run_ok(Command::new(&script).arg("--prefix").arg(prefix).arg("--uninstall").env_remove("DESTDIR"), "--uninstall");
        assert_eq!(removed, listed, "--uninstall lists what it removed: what the install listed");
        let after = tree(prefix);
        let paths = |t: &[(PathBuf, Option<Vec<u8>>)]| t.iter().map(|(p, _)| p.display().to_string()).collect::<Vec<_>>().join("\n");
        assert!(after == before, "{} changed:\nbefore:\n{}\nafter:\n{}", prefix.display(), paths(&before), paths(&after));
    }
    // once more: nothing left to remove, nothing printed, still success
    let again = run_ok(Command::new(&script).arg("--prefix").arg(&shared).arg("--uninstall"), "--uninstall again");
    assert_eq!(again, "");
}
