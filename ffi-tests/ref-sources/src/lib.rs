//! Where the C reference sources come from, for the build scripts of
//! `ffi-tests` and `benches` (nothing of ggml is ever committed).
//!
//! whisper.cpp v1.5.0 is bundled in the crate `whisper-rs-sys =0.8.0`. The
//! workspace locks it as a dependency that is never built (`cfg(any())`), so
//! cargo downloads it and `cargo metadata` unpacks it into cargo's registry
//! source folder, where these functions find it. Its build script (cmake,
//! libclang) never runs.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate folder name in cargo's registry.
pub const CRATE: &str = "whisper-rs-sys-0.8.0";

/// whisper.rn's rename of every ggml file (see FACTS.md):
/// `s/GGML_/WSP_GGML_/g; s/ggml_/wsp_ggml_/g; s/GGUF_/WSP_GGUF_/g; s/gguf_/wsp_gguf_/g`.
pub fn wsp_rename(s: &str) -> String {
    s.replace("GGML_", "WSP_GGML_").replace("ggml_", "wsp_ggml_").replace("GGUF_", "WSP_GGUF_").replace("gguf_", "wsp_gguf_")
}

/// Write `content` unless the file already holds it (keeps mtimes, and so
/// the C builds that depend on them, stable).
pub fn write_if_changed(path: &Path, content: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(content) {
        std::fs::write(path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cargo"))
}

fn search_registry() -> Option<PathBuf> {
    let registry = cargo_home().join("registry").join("src");
    for entry in std::fs::read_dir(&registry).ok()?.flatten() {
        let dir = entry.path().join(CRATE).join("whisper.cpp");
        if dir.join("ggml-backend.c").exists() {
            return Some(dir);
        }
    }
    None
}

/// The `whisper.cpp/` folder of the crate, running `cargo metadata` on the
/// workspace at `root` first if cargo has not unpacked it yet.
pub fn find_reference_sources(root: &Path) -> PathBuf {
    if let Some(d) = search_registry() {
        return d;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run cargo metadata");
    assert!(status.success(), "cargo metadata failed: cannot fetch {CRATE}");
    search_registry().unwrap_or_else(|| panic!("{CRATE} not found under {}", cargo_home().join("registry/src").display()))
}
