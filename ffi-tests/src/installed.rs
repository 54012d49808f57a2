//! The library installed with `scripts/install` and C programs built
//! against it the way docs/install.md says (a pkg-config line), with ggml's
//! objects compiled by ffi-tests: shared by `tests/install.rs` and
//! `tests/examples.rs`.

use crate::harness;
use crate::headers::workspace_root;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why these tests cannot run here (another target), or None.
pub fn not_on_host() -> Option<String> {
    let runner = std::env::var("FFI_RUNNER").unwrap_or_default();
    let (target, host) = (env!("FFI_TARGET"), env!("FFI_HOST"));
    if target != host || !runner.is_empty() {
        return Some(format!("skipping: scripts/install installs the host's build ({host}), not {target} (FFI_RUNNER '{runner}')"));
    }
    None
}

/// `cmd`'s stdout; panics naming `what` with its output when it fails.
pub fn run_ok(cmd: &mut Command, what: &str) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(o.status.success(), "{what} failed:\n{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// ggml's objects, compiled by ffi-tests' build.rs: ggml.o and ggml-quants.o
/// out of libggml_core.a, ggml-alloc.o out of libggml_alloc_ours.a (compiled
/// against our headers, as docs/ggml-sources.md says to).
pub fn ggml_objects(dir: &Path) -> [(String, PathBuf); 3] {
    std::fs::create_dir_all(dir).unwrap();
    for archive in ["libggml_core.a", "libggml_alloc_ours.a"] {
        run_ok(Command::new("ar").arg("x").arg(harness::out_dir().join(archive)).current_dir(dir), "ar x");
    }
    let find = |name: &str| {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().unwrap().to_string_lossy().ends_with(&format!("-{name}")))
            .unwrap_or_else(|| panic!("no *-{name} in {}", dir.display()))
    };
    ["ggml.o", "ggml-alloc.o", "ggml-quants.o"].map(|n| (n.to_string(), find(n)))
}

/// Runs `line` (`scripts/install --prefix <anything> [more]`, its prefix
/// replaced by `prefix`), with DESTDIR set or not, building in the
/// release-check target folder (shared with abi.rs' release test: never the
/// test build's, whose lock cargo holds while the tests run). Returns what
/// the script prints (the files it installed).
pub fn install(line: &str, prefix: &Path, destdir: Option<&Path>) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[..2], ["scripts/install", "--prefix"], "{line}");
    let root = workspace_root();
    let mut cmd = Command::new(root.join(words[0]));
    cmd.arg("--prefix").arg(prefix).args(&words[3..]).env("CARGO_TARGET_DIR", root.join("target").join("release-check"));
    match destdir {
        Some(d) => cmd.env("DESTDIR", d),
        None => cmd.env_remove("DESTDIR"),
    };
    run_ok(&mut cmd, &format!("{line} (prefix {})", prefix.display()))
}

/// An empty folder `name` for one test, under the build's output folder.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = harness::out_dir().join("install").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A `cc` line with `$(pkg-config ...)` (docs/install.md's form), run in
/// `dir` with its placeholders mapped: a `*.c` word is that file in `dir`,
/// the word after `-o` the program in `dir`, `ggml*.o` ggml's objects,
/// `-Ipath/to/ggml` the folder of ggml.h, `$(pkg-config ...)` what
/// pkg-config prints for `pkgconfig_dir`. Returns the program.
pub fn build_with_pkg_config(line: &str, dir: &Path, pkgconfig_dir: &Path) -> PathBuf {
    let objects = ggml_objects(&dir.join("objects"));
    let mut words = line.split_whitespace().peekable();
    assert_eq!(words.next(), Some("cc"), "{line}");
    let mut cmd = Command::new(env!("FFI_CC"));
    let mut pkg_config_args: Option<Vec<String>> = None;
    let mut exe = None;
    while let Some(w) = words.next() {
        if let Some(args) = pkg_config_args.as_mut() {
            args.push(w.trim_end_matches(')').to_string());
            if w.ends_with(')') {
                let out = run_ok(Command::new("pkg-config").args(args.iter()).env("PKG_CONFIG_PATH", pkgconfig_dir), "pkg-config");
                cmd.args(out.split_whitespace());
                pkg_config_args = None;
            }
            continue;
        }
        match w {
            "$(pkg-config" => pkg_config_args = Some(Vec::new()),
            "-o" => {
                let name = words.next().unwrap_or_else(|| panic!("-o without a name in {line}"));
                exe = Some(dir.join(name));
                cmd.arg("-o").arg(dir.join(name));
            }
            "-Ipath/to/ggml" => {
                cmd.arg(format!("-I{}", harness::out_dir().join("common").display()));
            }
            c if c.ends_with(".c") => {
                cmd.arg(dir.join(c));
            }
            other => {
                match objects.iter().find(|(n, _)| n == other) {
                    Some((_, path)) => cmd.arg(path),
                    None => cmd.arg(other),
                };
            }
        }
    }
    assert!(pkg_config_args.is_none(), "unterminated $(pkg-config ...) in {line}");
    run_ok(&mut cmd, &format!("the pkg-config line:\n{line}\n"));
    exe.unwrap_or_else(|| panic!("no -o in {line}"))
}
