//! The recipes of docs/, run as written: every page marked
//! `<!-- recipe: run ... -->` has its ```sh blocks run, in order, in one
//! bash (`set -euo pipefail`) from the repository root, as a reader who
//! pastes them one after the other into a terminal. No placeholder is
//! swapped: the pages write everything under `target/`. Pages that build on
//! another's output run after it.

use ffi_tests::harness;
use ffi_tests::headers::workspace_root;
use std::process::Command;

/// The pages that run here, in the order they build on each other.
const RUNNABLE: &[&str] = &["ggml-sources.md", "build-cc.md", "install.md"];

/// The ```sh blocks of `page`, joined.
fn sh_blocks(page: &str) -> String {
    let text = std::fs::read_to_string(workspace_root().join("docs").join(page)).unwrap_or_else(|e| panic!("docs/{page}: {e}"));
    assert!(text.contains("<!-- recipe: run"), "docs/{page} is not marked as a recipe that runs");
    let mut script = String::new();
    let mut inside = false;
    for line in text.lines() {
        let fence = line.trim_start();
        if !inside && fence == "```sh" {
            inside = true;
        } else if inside && fence == "```" {
            inside = false;
            script.push('\n');
        } else if inside {
            script.push_str(line);
            script.push('\n');
        }
    }
    assert!(!inside, "docs/{page}: a ```sh block is not closed");
    assert!(!script.trim().is_empty(), "docs/{page} has no ```sh block");
    script
}

fn run_page(page: &str) {
    let script = format!("set -euo pipefail\n{}", sh_blocks(page));
    let o = Command::new("bash").arg("-c").arg(&script).current_dir(workspace_root()).output().expect("run bash");
    assert!(
        o.status.success(),
        "docs/{page}, run as written, failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn docs_recipes_run_as_written() {
    for page in RUNNABLE {
        run_page(page);
    }
}

/// Every page that says it runs is in `RUNNABLE`, and every page that does
/// not run says what is checked instead.
#[test]
fn docs_pages_say_how_they_are_checked() {
    for entry in std::fs::read_dir(workspace_root().join("docs")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".md") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        if text.contains("<!-- recipe: run") {
            assert!(RUNNABLE.contains(&name.as_str()), "docs/{name} is marked to run but the test does not run it");
        } else if text.contains("```sh") {
            assert!(text.contains("<!-- recipe: checked"), "docs/{name} has commands but says neither that they run nor what checks them");
        }
    }
}

/// The list of ggml symbols docs/build-cc.md says the library imports is
/// exactly what the shared library imports.
#[test]
fn docs_list_exactly_the_imported_ggml_symbols() {
    let text = std::fs::read_to_string(workspace_root().join("docs/build-cc.md")).expect("read docs/build-cc.md");
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
    assert_eq!(listed, imported, "docs/build-cc.md's list of imported ggml symbols is out of date");
}

/// CHANGELOG.md has an entry for the version in Cargo.toml, the one place
/// the version is written.
#[test]
fn changelog_has_the_cargo_version() {
    let cargo = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let package = &cargo[cargo.find("[package]").expect("[package]")..];
    let version = package.lines().find_map(|l| l.strip_prefix("version = \"")).expect("a version line").trim_end_matches('"');
    let log = std::fs::read_to_string(workspace_root().join("CHANGELOG.md")).expect("CHANGELOG.md");
    assert!(log.contains(&format!("## [{version}] - ")), "CHANGELOG.md has no entry for {version}");
}
