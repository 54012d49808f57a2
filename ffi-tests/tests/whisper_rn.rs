//! README's whisper.rn Android recipe, applied as written: `scripts/whisper-rn`
//! patches a project of rc.4's shape (ffi-tests/whisper-rn), which CMake then
//! builds on Linux for the x86_64 ABI, with stand-ins for Android's `log`,
//! `android` and `unwind` libraries, linking with `-Wl,--no-undefined`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ffi_tests::harness;
use ffi_tests::headers::workspace_root;

fn ok(o: Output, what: &str) -> String {
    assert!(o.status.success(), "{what} failed:\n{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// A whisper.rn checkout: the stand-in project, and `cpp/` as whisper.rn
/// ships it (renamed ggml and whisper.cpp, the original ggml-backend.c and
/// headers).
fn checkout(root: &Path) -> PathBuf {
    let wrn = root.join("whisper.rn");
    let _ = std::fs::remove_dir_all(&wrn);
    copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("whisper-rn"), &wrn);
    let cpp = wrn.join("cpp");
    std::fs::create_dir_all(&cpp).unwrap();
    let out = harness::out_dir();
    for f in
        ["ggml.c", "ggml.h", "ggml-alloc.c", "ggml-alloc.h", "ggml-impl.h", "ggml-quants.c", "ggml-quants.h", "whisper.cpp", "whisper.h"]
    {
        std::fs::copy(out.join("common").join(f), cpp.join(f)).unwrap();
    }
    for f in ["ggml-backend.c", "ggml-backend.h", "ggml-backend-impl.h"] {
        std::fs::copy(out.join("ref").join(f), cpp.join(f)).unwrap();
    }
    wrn
}

/// Stand-ins for the NDK's liblog, libandroid and libunwind (the last one
/// forwards to libgcc_s, which provides the unwinder on Linux).
fn stubs(root: &Path) -> PathBuf {
    let dir = root.join("stubs");
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("stub.c");
    std::fs::write(&c, "int wsp_stub_unused(void) { return 0; }\n").unwrap();
    for lib in ["log", "android"] {
        let o = Command::new(env!("FFI_CC")).arg("-shared").arg("-fPIC").arg(&c).arg("-o").arg(dir.join(format!("lib{lib}.so"))).output();
        ok(o.unwrap(), "building a stand-in library");
    }
    std::fs::write(dir.join("libunwind.so"), "INPUT(-lgcc_s)\n").unwrap();
    dir
}

/// A symbol of Rust code: v0 mangling, legacy mangling (with its hash), or
/// one of std's runtime symbols (C++'s own `_ZN…` symbols, which rc.4's
/// build exports as it always did, are not).
fn is_rust_symbol(s: &str) -> bool {
    let legacy_hash = s.len() > 20 && s.ends_with('E') && {
        let h = &s[s.len() - 20..s.len() - 1];
        h.starts_with("17h") && h[3..].bytes().all(|b| b.is_ascii_hexdigit())
    };
    s.starts_with("_R") || (s.starts_with("_ZN") && legacy_hash) || s.contains("rust_") || s.starts_with("__rdl_") || s.starts_with("__rg_")
}

#[test]
fn readme_android_recipe_builds_links_and_runs() {
    let root = harness::out_dir().join("whisper-rn-test");
    let wrn = checkout(&root);
    let stubs = stubs(&root);

    // The static library of the x86_64 ABI, where the recipe looks for it
    // (the host's shipped archive stands in for x86_64-linux-android's).
    let lib_dir = root.join("lib");
    let dist = lib_dir.join("target/x86_64-linux-android/release/dist");
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::copy(harness::staticlib(), dist.join("libwsp_ggml_backend.a")).unwrap();

    let script = workspace_root().join("scripts/whisper-rn");
    let run_script = || ok(Command::new(&script).arg(&wrn).arg("--lib-dir").arg(&lib_dir).output().unwrap(), "scripts/whisper-rn");
    let first = run_script();
    assert!(first.contains("CMakeLists.txt") && first.contains("ggml-backend-impl.h"), "{first}");
    assert_eq!(run_script().trim(), "already patched: nothing to do");
    for h in ["ggml-backend.h", "ggml-backend-impl.h", "ggml-backend-ext.h"] {
        let ours = std::fs::read(harness::include_dir().join(h)).unwrap();
        assert_eq!(std::fs::read(wrn.join("cpp").join(h)).unwrap(), ours, "cpp/{h} is not ours");
    }
    let cmake_text = std::fs::read_to_string(wrn.join("android/src/main/CMakeLists.txt")).unwrap();
    assert!(!cmake_text.contains("/ggml-backend.c"), "ggml-backend.c is still a source:\n{cmake_text}");
    let pod = std::fs::read_to_string(wrn.join("whisper-rn.podspec")).unwrap();
    assert!(pod.contains(r#"s.exclude_files = "cpp/ggml-backend.c""#), "{pod}");

    let build = root.join("build");
    let _ = std::fs::remove_dir_all(&build);
    ok(
        Command::new("cmake")
            .arg("-S")
            .arg(wrn.join("android/src/main"))
            .arg("-B")
            .arg(&build)
            .arg("-DANDROID_ABI=x86_64")
            .arg("-DCMAKE_BUILD_TYPE=Release")
            .arg(format!("-DCMAKE_C_COMPILER={}", env!("FFI_CC")))
            .arg(format!("-DCMAKE_CXX_COMPILER={}", env!("FFI_CXX")))
            // glibc declares CPU_ALLOC & co. (used by ggml.c) only with
            // _GNU_SOURCE; Android's bionic always does
            .arg("-DCMAKE_C_FLAGS=-D_GNU_SOURCE")
            .arg(format!("-DCMAKE_LIBRARY_PATH={}", stubs.display()))
            .arg(format!("-DCMAKE_SHARED_LINKER_FLAGS=-L{} -Wl,--no-undefined", stubs.display()))
            .output()
            .expect("run cmake (scripts/test installs it)"),
        "cmake configure",
    );
    ok(Command::new("cmake").arg("--build").arg(&build).arg("-j2").output().unwrap(), "cmake --build");
    let so = build.join("libwhisper.so");
    assert!(so.exists(), "no {}", so.display());

    // Nothing of ours or of Rust's leaks from the app's library.
    let o = Command::new("nm").args(["-D", "--defined-only"]).arg(&so).output().unwrap();
    let exported = ok(o, "nm -D");
    let leaked: Vec<&str> = exported
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| s.starts_with("wsp_ggml_backend") || *s == "wsp_ggml_get_backend" || is_rust_symbol(s))
        .collect();
    assert!(leaked.is_empty(), "libwhisper.so exports {leaked:?}");
    assert!(exported.contains("rnwhisper_selftest"), "{exported}");

    // And it works: the stand-in JNI entry point computes through our backend.
    let main = root.join("main.c");
    std::fs::write(
        &main,
        "#include <stdio.h>\nint rnwhisper_selftest(void);\nint main(void) { printf(\"%d\\n\", rnwhisper_selftest()); return 0; }\n",
    )
    .unwrap();
    let exe = root.join("selftest");
    let o = Command::new(env!("FFI_CC"))
        .arg(&main)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", build.display()))
        .arg(format!("-Wl,-rpath,{}:{}", build.display(), stubs.display()))
        .arg("-lwhisper")
        .output()
        .unwrap();
    ok(o, "linking the self-test");
    let r = ok(Command::new(&exe).output().unwrap(), "the self-test");
    assert_eq!(r.trim(), "80");
}
