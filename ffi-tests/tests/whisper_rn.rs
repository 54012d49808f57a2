//! docs/whisper-rn-android.md's recipe, applied as written: `scripts/whisper-rn`
//! patches a project of rc.4's shape (ffi-tests/whisper-rn), which CMake then
//! builds on Linux for the x86_64 ABI, with stand-ins for Android's `log`,
//! `android` and `unwind` libraries, linking with `-Wl,--no-undefined`.
//! The script's other promises are tested on the stand-in without a build:
//! exit status 2 for every refusal, the podspec's Android and iOS changes
//! composing in either order, no absolute path in the patch.

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

/// The stand-in project with an empty `cpp/`: enough for the script, not for a build.
fn light_checkout(root: &Path, name: &str) -> PathBuf {
    let wrn = root.join(name);
    let _ = std::fs::remove_dir_all(&wrn);
    copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("whisper-rn"), &wrn);
    std::fs::create_dir_all(wrn.join("cpp")).unwrap();
    wrn
}

fn whisper_rn(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(workspace_root().join("scripts/whisper-rn")).args(args).output().expect("run scripts/whisper-rn")
}

/// Every file under `dir` with its bytes, to show that a refusal wrote nothing.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            } else {
                files.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    files.sort();
    files
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
    // The library's folder is written in relative to the CMakeLists.txt's
    // (the build below uses that default; `moved` shows it holds no absolute path).
    let real_root = std::fs::canonicalize(&root).unwrap();
    assert!(
        !cmake_text.contains(&*root.to_string_lossy()) && !cmake_text.contains(&*real_root.to_string_lossy()),
        "the patch holds an absolute path:\n{cmake_text}"
    );
    assert!(cmake_text.contains(r#"set(WSP_GGML_BACKEND_DIR "${WSP_GGML_BACKEND_HERE}/../../../../lib")"#), "{cmake_text}");
    let pod = std::fs::read_to_string(wrn.join("whisper-rn.podspec")).unwrap();
    assert!(pod.contains(r#"s.exclude_files = "cpp/ggml-backend.c""#), "{pod}");

    let configure = |wrn: &Path, build: &Path| {
        let _ = std::fs::remove_dir_all(build);
        let mut cmd = Command::new("cmake");
        cmd.arg("-S")
            .arg(wrn.join("android/src/main"))
            .arg("-B")
            .arg(build)
            .arg("-DANDROID_ABI=x86_64")
            .arg("-DCMAKE_BUILD_TYPE=Release")
            .arg(format!("-DCMAKE_C_COMPILER={}", env!("FFI_CC")))
            .arg(format!("-DCMAKE_CXX_COMPILER={}", env!("FFI_CXX")))
            // glibc declares CPU_ALLOC & co. (used by ggml.c) only with
            // _GNU_SOURCE; Android's bionic always does
            .arg("-DCMAKE_C_FLAGS=-D_GNU_SOURCE")
            .arg(format!("-DCMAKE_LIBRARY_PATH={}", stubs.display()))
            .arg(format!("-DCMAKE_SHARED_LINKER_FLAGS=-L{} -Wl,--no-undefined", stubs.display()))
            .env_remove("WSP_GGML_BACKEND_DIR");
        cmd
    };
    let build = root.join("build");
    ok(configure(&wrn, &build).output().expect("run cmake (scripts/test installs it)"), "cmake configure");
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

    // The patched project and the library moved together (another machine,
    // another user's checkout of an app with a patch-package patch) still
    // configure: no absolute path was baked in.
    let moved = root.join("moved");
    let _ = std::fs::remove_dir_all(&moved);
    copy_tree(&wrn, &moved.join("whisper.rn"));
    copy_tree(&lib_dir, &moved.join("lib"));
    std::fs::remove_dir_all(&lib_dir).unwrap();
    ok(configure(&moved.join("whisper.rn"), &moved.join("build")).output().unwrap(), "cmake configure of the moved project");
    // and the default stays overridable, by a CMake variable and by the environment
    for (how, dir) in [("-D", moved.join("elsewhere-var")), ("env", moved.join("elsewhere-env"))] {
        let mut cmd = configure(&moved.join("whisper.rn"), &moved.join("build-override"));
        if how == "-D" {
            cmd.arg(format!("-DWSP_GGML_BACKEND_DIR={}", dir.display()));
        } else {
            cmd.env("WSP_GGML_BACKEND_DIR", &dir);
        }
        let o = cmd.output().unwrap();
        let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(!o.status.success(), "WSP_GGML_BACKEND_DIR ({how}) pointing nowhere was not used:\n{all}");
        // (CMake wraps the message's words, not the path)
        let wanted = format!("{}/target/x86_64-linux-android/release/dist/libwsp_ggml_backend.a", dir.display());
        assert!(all.contains(&wanted) && all.contains("not found"), "WSP_GGML_BACKEND_DIR ({how}) not used:\n{all}");
    }
}

#[test]
fn whisper_rn_refusals_exit_2_and_write_nothing() {
    let root = harness::out_dir().join("whisper-rn-refusals");
    let wrn = light_checkout(&root, "whisper.rn");
    let before = snapshot(&wrn);
    let cases: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        ("no project argument", vec![]),
        ("an unknown option", vec![wrn.clone().into(), "--no-such-option".into()]),
        ("a folder that is not whisper.rn", vec![root.join("nowhere").into()]),
        ("a missing --xcframework folder", vec![wrn.clone().into(), "--xcframework".into(), root.join("none.xcframework").into()]),
    ];
    for (what, args) in &cases {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let o = whisper_rn(&args);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(!o.stderr.is_empty(), "{what}: no message");
        assert!(snapshot(&wrn) == before, "{what}: files were written");
    }
    // a CMakeLists.txt of another shape: refused, nothing written (headers included)
    let cmake = wrn.join("android/src/main/CMakeLists.txt");
    let text = std::fs::read_to_string(&cmake).unwrap();
    std::fs::write(&cmake, text.replace("${RNWHISPER_LIB_DIR}/ggml-backend.c", "")).unwrap();
    let before = snapshot(&wrn);
    let o = whisper_rn(&[wrn.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("ggml-backend.c"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(snapshot(&wrn) == before, "a refused checkout was written to");
}

#[test]
fn whisper_rn_android_and_xcframework_compose_in_either_order() {
    let root = harness::out_dir().join("whisper-rn-compose");
    let xcf = root.join("wsp_ggml_backend.xcframework");
    let _ = std::fs::remove_dir_all(&xcf);
    std::fs::create_dir_all(xcf.join("ios-arm64")).unwrap();
    std::fs::write(xcf.join("Info.plist"), "<plist/>\n").unwrap();
    std::fs::write(xcf.join("ios-arm64/libwsp_ggml_backend.a"), "!<arch>\n").unwrap();
    let lib = root.join("lib");
    let run = |wrn: &Path, with_xcf: bool| {
        let mut args = vec![wrn.as_os_str(), "--lib-dir".as_ref(), lib.as_os_str()];
        if with_xcf {
            args.extend(["--xcframework".as_ref(), xcf.as_os_str()]);
        }
        ok(whisper_rn(&args), "scripts/whisper-rn")
    };
    let android_first = light_checkout(&root, "android-first");
    run(&android_first, false);
    assert!(run(&android_first, true).contains("whisper-rn.podspec"), "--xcframework after the Android patch left the podspec alone");
    let ios_first = light_checkout(&root, "ios-first");
    run(&ios_first, true);
    run(&ios_first, false);
    for wrn in [&android_first, &ios_first] {
        // again, in both modes: nothing to do, the framework stays vendored
        assert_eq!(run(wrn, true).trim(), "already patched: nothing to do");
        assert_eq!(run(wrn, false).trim(), "already patched: nothing to do");
        let pod = std::fs::read_to_string(wrn.join("whisper-rn.podspec")).unwrap();
        assert_eq!(pod.matches(r#"s.vendored_frameworks = "ios/wsp_ggml_backend.xcframework""#).count(), 1, "{pod}");
        assert_eq!(pod.matches(r#""cpp/ggml-backend.c""#).count(), 1, "{pod}");
        assert_eq!(pod.matches("s.exclude_files").count(), 1, "{pod}");
        assert!(wrn.join("ios/wsp_ggml_backend.xcframework/ios-arm64/libwsp_ggml_backend.a").is_file());
    }
    let strip = |wrn: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        snapshot(wrn).into_iter().map(|(p, b)| (p.strip_prefix(wrn).unwrap().to_path_buf(), b)).collect()
    };
    assert!(strip(&android_first) == strip(&ios_first), "the two orders give different projects");
}
