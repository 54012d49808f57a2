//! What the compiler refuses of the library's handles on C's tensors: a
//! kept identity (`TensorId`) cannot be dereferenced, a handle
//! (`TensorRef<'a>`) cannot be kept past the call it belongs to, and a
//! pointer written into a tensor cannot name a tensor that lives shorter
//! than the handles that read it. Each snippet is compiled with rustc
//! against the library's rlib (built with its `internals` feature, which
//! makes the types public); the accepted snippet shows the path and the
//! types are right, so each refusal is the one named.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory of this test's dependencies and the newest library rlib there.
fn rlib() -> (PathBuf, PathBuf) {
    let exe = std::env::current_exe().expect("the test's path");
    let deps = exe.parent().expect("target/<profile>/deps").to_path_buf();
    let newest = std::fs::read_dir(&deps)
        .expect("deps")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libwsp_ggml_backend") && name.ends_with(".rlib")
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("the library's rlib next to the test");
    (deps, newest)
}

/// rustc's verdict on `code` (a library crate using the handle types).
fn compile(name: &str, code: &str) -> (bool, String) {
    let (deps, rlib) = rlib();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("handles");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{name}.rs"));
    std::fs::write(&src, format!("#![allow(dead_code)]\nuse wsp_ggml_backend::internals::{{TensorId, TensorRef}};\n{code}\n")).unwrap();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .args(["--edition", "2021", "--crate-type", "lib", "--emit", "metadata", "-o"])
        .arg(dir.join(format!("lib{name}.rmeta")))
        .arg("-L")
        .arg(format!("dependency={}", deps.display()))
        .arg("--extern")
        .arg(format!("wsp_ggml_backend={}", rlib.display()))
        .arg(&src)
        .output()
        .expect("rustc runs");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn handles_are_checked_by_the_compiler() {
    let (ok, err) = compile(
        "accepted",
        "pub fn keep(t: TensorRef<'_>) -> TensorId { t.id() }\n\
         pub fn read(t: TensorRef<'_>) -> i32 { t.op() }\n\
         pub fn write<'a>(node: TensorRef<'a>, src: TensorRef<'a>) { node.set_src(0, Some(src)) }",
    );
    assert!(ok, "the accepted uses compile:\n{err}");

    let (ok, err) = compile("kept_identity_read", "pub fn read_kept(id: TensorId) -> i32 { id.op() }");
    assert!(!ok && err.contains("E0599") && err.contains("no method named `op`"), "a kept identity cannot be read:\n{err}");

    let (ok, err) = compile(
        "handle_kept_past_its_call",
        "pub struct Kept { t: Option<TensorRef<'static>> }\n\
         pub fn keep<'a>(k: &mut Kept, t: TensorRef<'a>) { k.t = Some(t) }",
    );
    assert!(!ok && err.contains("lifetime may not live long enough"), "a handle cannot outlive its call:\n{err}");

    let (ok, err) = compile(
        "shorter_source_written",
        "pub fn shrink<'long: 'short, 'short>(node: TensorRef<'long>, src: TensorRef<'short>) { node.set_src(0, Some(src)) }",
    );
    assert!(!ok && err.contains("lifetime may not live long enough"), "no pointer to a shorter-lived tensor:\n{err}");
}
