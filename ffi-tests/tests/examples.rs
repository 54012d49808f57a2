//! The programs of `examples/`, built the way each says in its header
//! comment (a `cc` line with `$(pkg-config ...)`) against the library
//! installed by `scripts/install`, and run: each must print exactly its
//! `examples/<name>.out`.
//!
//! Host only: the script installs the host's release build.

use ffi_tests::headers::workspace_root;
use ffi_tests::installed::{build_with_pkg_config, fresh_dir, install, not_on_host, run_ok};
use std::path::Path;
use std::process::Command;

/// Every example, by name (`examples/<name>.c`, `examples/<name>.out`).
const EXAMPLES: &[&str] = &["cpu_tallocr", "sched_two_backends", "extensions", "schedule_picture"];

/// The `cc` line of an example's header comment.
fn build_line(source: &str, name: &str) -> String {
    let line = source
        .lines()
        .take_while(|l| l.starts_with("//"))
        .map(|l| l.trim_start_matches("//").trim())
        .find(|l| l.starts_with("cc "))
        .unwrap_or_else(|| panic!("examples/{name}.c: no `cc` line in its header comment"));
    assert!(line.contains(&format!("-o {name} {name}.c")), "examples/{name}.c builds another program: {line}");
    assert!(line.contains("$(pkg-config --cflags --libs wsp_ggml_backend)"), "examples/{name}.c: not through pkg-config: {line}");
    line.to_string()
}

#[test]
fn examples_build_against_the_installed_library_and_print_what_they_should() {
    if let Some(why) = not_on_host() {
        eprintln!("{why}");
        return;
    }
    let dir = fresh_dir("examples");
    let prefix = dir.join("prefix");
    install("scripts/install --prefix /usr/local", &prefix, None);
    let pkgconfig = prefix.join("lib/pkgconfig");
    let libdir = prefix.join("lib");
    let examples = workspace_root().join("examples");
    let mut listed: Vec<String> = std::fs::read_dir(&examples)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".c").map(String::from))
        .collect();
    listed.sort();
    let mut expected: Vec<String> = EXAMPLES.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(listed, expected, "every example is run here");

    for name in EXAMPLES {
        let source = std::fs::read_to_string(examples.join(format!("{name}.c"))).unwrap();
        std::fs::write(dir.join(format!("{name}.c")), &source).unwrap();
        let exe = build_with_pkg_config(&build_line(&source, name), &dir, &pkgconfig);
        let out = run_ok(
            Command::new(&exe)
                .current_dir(&dir)
                .env("LD_LIBRARY_PATH", &libdir)
                .env_remove("WSP_GGML_SCHED_DEBUG")
                .env_remove("WSP_GGML_SCHED_DOT"),
            name,
        );
        let want = std::fs::read_to_string(examples.join(format!("{name}.out"))).unwrap();
        assert_eq!(out, want, "examples/{name}.c printed other lines than examples/{name}.out");
        assert_links_installed(&exe, &libdir);
        if *name == "schedule_picture" {
            let dot = std::fs::read_to_string(dir.join("schedule.dot")).expect("schedule_picture wrote no schedule.dot");
            assert!(dot.starts_with("digraph schedule {\n") && dot.ends_with("}\n") && dot.contains("subgraph cluster_s3 {"), "{dot}");
        }
        if *name == "extensions" {
            // its log callback gets the scheduler's debug output (level INFO)
            let o = Command::new(&exe).env("LD_LIBRARY_PATH", &libdir).env("WSP_GGML_SCHED_DEBUG", "1").output().unwrap();
            assert!(o.status.success());
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("[wsp_ggml_backend info] node #  0 (MUL): h [CPU"), "{err}");
            assert!(err.lines().all(|l| !l.starts_with("node #")), "every node line went through the callback:\n{err}");
        }
    }
}

/// The example runs with the installed shared library.
fn assert_links_installed(exe: &Path, libdir: &Path) {
    let deps = run_ok(Command::new("ldd").arg(exe).env("LD_LIBRARY_PATH", libdir), "ldd");
    assert!(deps.contains(&format!("{}/libwsp_ggml_backend.so.0", libdir.display())), "{deps}");
}

/// The code blocks of docs/scheduler.md (```c): each is a run of lines of
/// an example (compared without their indentation), so the page never
/// shows code that does not build.
#[test]
fn scheduler_guide_snippets_come_from_the_examples() {
    let root = workspace_root();
    let page = std::fs::read_to_string(root.join("docs/scheduler.md")).unwrap();
    let examples: Vec<(String, Vec<String>)> = EXAMPLES
        .iter()
        .map(|n| {
            let text = std::fs::read_to_string(root.join(format!("examples/{n}.c"))).unwrap();
            (n.to_string(), text.lines().map(|l| l.trim().to_string()).collect())
        })
        .collect();
    let mut n_blocks = 0;
    let mut lines = page.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "```c" {
            continue;
        }
        let block: Vec<String> = lines.by_ref().take_while(|l| l.trim() != "```").map(|l| l.trim().to_string()).collect();
        assert!(!block.is_empty(), "an empty code block in docs/scheduler.md");
        let found = examples.iter().any(|(_, ex)| ex.windows(block.len()).any(|w| w == block.as_slice()));
        assert!(found, "docs/scheduler.md shows code that is in no example:\n{}", block.join("\n"));
        n_blocks += 1;
    }
    assert!(n_blocks >= 8, "docs/scheduler.md has {n_blocks} code blocks");
}

/// The table of common mistakes in docs/scheduler.md: each row's message is
/// exactly what the mistake prints (ffi-tests/c/sched_mistakes.c, one
/// process per case, in the table's order), then SIGABRT.
#[test]
fn scheduler_guide_mistakes_print_the_quoted_messages() {
    use ffi_tests::harness::{self, Flavour};
    use std::os::unix::process::ExitStatusExt;
    let page = std::fs::read_to_string(workspace_root().join("docs/scheduler.md")).unwrap();
    let table = &page[page.find("## Common mistakes").expect("the section")..];
    let messages: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| ") && l.ends_with("` |"))
        .filter_map(|l| l.rsplit_once(" | `").map(|(_, m)| m.trim_end_matches("` |")))
        .collect();
    let exe = harness::build("sched_mistakes", &["sched_mistakes.c", "test_backend.c"], Flavour::Ours);
    let list = harness::run(&exe, &[]);
    let cases: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().map(String::from).collect();
    assert_eq!(cases.len(), messages.len(), "one case per row: {cases:?} {messages:?}");
    for (case, message) in cases.iter().zip(&messages) {
        let o = harness::run(&exe, &[case]);
        assert_eq!(o.status.signal(), Some(6), "{case}: {:?}", o.status);
        assert_eq!(String::from_utf8_lossy(&o.stderr), format!("{message}\n"), "{case}");
    }
}
