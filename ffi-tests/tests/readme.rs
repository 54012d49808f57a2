//! Keeps the README's link lines and import list true: the lines are taken
//! from README.md, run as written (with the placeholders pointing at real
//! files), and the resulting programs must run.

use ffi_tests::harness;
use ffi_tests::headers::workspace_root;
use std::path::PathBuf;
use std::process::Command;

fn readme() -> String {
    std::fs::read_to_string(workspace_root().join("README.md")).expect("read README.md")
}

/// The first line of the fenced block following `marker`.
fn block_after(marker: &str) -> String {
    let text = readme();
    let at = text.find(marker).unwrap_or_else(|| panic!("README has no {marker}"));
    let rest = &text[at..];
    let fence = rest.find("```sh\n").expect("a ```sh block follows the marker") + 6;
    rest[fence..].lines().next().expect("a command line").to_string()
}

/// A ggml object file built by ffi-tests' build.rs.
fn object(suffix: &str) -> PathBuf {
    let out = harness::out_dir();
    std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(suffix) && n.len() > suffix.len() && n.as_bytes()[n.len() - suffix.len() - 1] == b'-')
        })
        .unwrap_or_else(|| panic!("no *-{suffix} in {}", out.display()))
}

/// Compile the test program to app.o against our headers.
fn app_object(dir: &std::path::Path) -> PathBuf {
    let obj = dir.join("app.o");
    let o = Command::new(env!("FFI_CC"))
        .args(["-std=c11", "-D_GNU_SOURCE", "-c"])
        .arg("-I")
        .arg(harness::include_dir())
        .arg("-I")
        .arg(harness::out_dir().join("common"))
        .arg("-I")
        .arg(harness::c_dir())
        .arg(harness::c_dir().join("ours_extras.c"))
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    obj
}

/// Run a README link line with its placeholders mapped to real files.
fn run_link_line(line: &str, tag: &str) -> PathBuf {
    let dir = harness::out_dir().join("readme").join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    // ggml-alloc.o must be the one compiled against our headers.
    let alloc_ours = dir.join("ggml-alloc.o");
    let o = Command::new("ar").arg("x").arg(harness::out_dir().join("libggml_alloc_ours.a")).current_dir(&dir).output().unwrap();
    assert!(o.status.success());
    let extracted =
        std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).find(|p| p.to_string_lossy().ends_with("-ggml-alloc.o")).unwrap();
    std::fs::rename(extracted, &alloc_ours).unwrap();
    // The .so may only be in deps/ when built as a dependency: give -L that dir.
    let so_dir = harness::cdylib().parent().unwrap().to_path_buf();
    let mut words = line.split_whitespace();
    let cc = words.next().expect("compiler");
    assert_eq!(cc, "cc");
    let mut cmd = Command::new(env!("FFI_CC"));
    let exe = dir.join("app");
    for w in words {
        match w {
            "app" => cmd.arg(&exe),
            "app.o" => cmd.arg(app_object(&dir)),
            "ggml.o" => cmd.arg(object("ggml.o")),
            "ggml-quants.o" => cmd.arg(object("ggml-quants.o")),
            "ggml-alloc.o" => cmd.arg(&alloc_ours),
            "target/release/dist/libwsp_ggml_backend.a" => cmd.arg(harness::staticlib()),
            "-Ltarget/release" => cmd.arg(format!("-L{}", so_dir.display())),
            // (the line is run from the repository root; the test's .so is elsewhere)
            "-Wl,-rpath,$PWD/target/release" => cmd.arg(format!("-Wl,-rpath,{}", so_dir.display())),
            other => cmd.arg(other),
        };
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "README link line failed:\n{line}\n{}", String::from_utf8_lossy(&o.stderr));
    // as written: the program finds the shared library without LD_LIBRARY_PATH
    let r = Command::new(&exe).env_remove("LD_LIBRARY_PATH").output().unwrap();
    assert!(r.status.success(), "linked program failed: {}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("ok aligned cpu buffer base"));
    exe
}

#[test]
fn readme_static_link_line_works() {
    run_link_line(&block_after("<!-- link-line:"), "static");
}

/// README's `ln -sf` that gives the built shared library its SONAME
/// (Linux), done in the test's library folder.
fn soname_link() {
    let ln = "ln -sf libwsp_ggml_backend.so target/release/libwsp_ggml_backend.so.0";
    assert!(readme().split_whitespace().collect::<Vec<_>>().join(" ").contains(ln), "README no longer says `{ln}`");
    let so = harness::cdylib();
    let dir = so.parent().unwrap();
    // made aside and renamed: another test process may be reading it
    let tmp = dir.join(format!("libwsp_ggml_backend.so.0.tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink("libwsp_ggml_backend.so", &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("libwsp_ggml_backend.so.0")).unwrap();
}

#[test]
fn readme_shared_link_line_works() {
    soname_link();
    let exe = run_link_line(&block_after("<!-- so-link-line:"), "shared");
    // and it really used the shared library, by its SONAME
    let o = Command::new("ldd").arg(&exe).env_remove("LD_LIBRARY_PATH").output().unwrap();
    let ldd = String::from_utf8_lossy(&o.stdout);
    let so_dir = harness::cdylib().parent().unwrap().display().to_string();
    assert!(ldd.lines().any(|l| l.contains("libwsp_ggml_backend.so.0 => ") && l.contains(&so_dir)), "through its rpath:\n{ldd}");
}

#[test]
fn readme_lists_exactly_the_imported_ggml_symbols() {
    let text = readme();
    let start = text.find("<!-- imports:").expect("imports marker");
    let end = text[start..].find("<!-- end imports -->").expect("end marker") + start;
    let mut listed: Vec<String> =
        text[start..end].split('`').skip(1).step_by(2).map(String::from).filter(|s| s.starts_with("wsp_")).collect();
    listed.sort();
    let o = Command::new("nm").args(["-D", "--undefined-only"]).arg(harness::cdylib()).output().expect("nm");
    let mut imported: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last().map(String::from))
        .filter(|s| s.starts_with("wsp_"))
        .collect();
    imported.sort();
    assert_eq!(listed, imported, "README's list of imported ggml symbols is out of date");
}
