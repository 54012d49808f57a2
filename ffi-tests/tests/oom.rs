//! Out of memory, injected into every allocation the library makes
//! (ffi-tests/c/oom_fault.c) in one client sequence, one at a time and
//! from one on: the library returns NULL where its API returns a pointer
//! (cpu_init, alloc_buffer, cpu_buffer_from_ptr, graph_plan_create,
//! buffer_init), and stays usable; everywhere else it stops with one line,
//! `wsp_ggml_backend: <the function the program called>: out of memory
//! (<N> bytes)`. Never a crash, never "internal error"; under memcheck, no
//! invalid access, and no leak after a NULL.

use ffi_tests::harness::{self, Flavour};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The program, linked with the shared library (the injector tells the
/// library's allocations by their caller's address in it).
fn program() -> PathBuf {
    static EXE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    EXE.get_or_init(build_program).clone()
}

fn build_program() -> PathBuf {
    let so = harness::cdylib();
    let dir = so.parent().unwrap();
    // the library's SONAME, which the program names, next to it (made
    // aside and renamed: another test process may be reading it)
    let tmp = dir.join(format!("libwsp_ggml_backend.so.0.oom{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink("libwsp_ggml_backend.so", &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("libwsp_ggml_backend.so.0")).unwrap();
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    harness::build_custom("oom_fault", &["oom_fault.c", "test_backend.c"], Flavour::Ours, &[&rpath], Some(&[&so]))
}

fn run(exe: &Path, env: Option<(&str, usize)>) -> Output {
    let mut cmd = harness::command(exe);
    if let Some((k, v)) = env {
        cmd.env(k, v.to_string());
    }
    cmd.output().expect("run oom_fault")
}

/// What one run did, checked; returns whether it ended with a NULL
/// (cleanly) rather than the library's stop.
fn check_run(what: &str, o: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    let ctx = || format!("{what}: exit {:?}, signal {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status.code(), o.status.signal());
    assert!(!err.contains("Rust panic") && !err.contains("internal error"), "{}", ctx());
    let messages: Vec<&str> = err.lines().filter(|l| l.starts_with("wsp_ggml_backend")).collect();
    for m in &messages {
        assert!(parse_message(m).is_some(), "not the out-of-memory message: {m:?}\n{}", ctx());
    }
    if o.status.success() {
        // every NULL was reported once, naming the function
        let nulls: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("null ")).collect();
        assert_eq!(messages.len(), nulls.len(), "one message per NULL\n{}", ctx());
        for (m, f) in messages.iter().zip(&nulls) {
            assert_eq!(parse_message(m).unwrap().0, *f, "the message names the function\n{}", ctx());
        }
        assert!(out.contains("allocations "), "{}", ctx());
        return !nulls.is_empty();
    }
    assert_eq!(o.status.signal(), Some(libc_sigabrt()), "only a clean stop (SIGABRT) is allowed\n{}", ctx());
    assert_eq!(messages.len(), 1, "exactly one message\n{}", ctx());
    let called = err.lines().filter_map(|l| l.strip_prefix("in ")).next_back().expect("the program's abort handler ran");
    assert_eq!(parse_message(messages[0]).unwrap().0, called, "the message names the function the program called\n{}", ctx());
    false
}

fn libc_sigabrt() -> i32 {
    6
}

/// `wsp_ggml_backend: <function>: out of memory (<N> bytes)`: the
/// function and N.
fn parse_message(line: &str) -> Option<(&str, usize)> {
    let rest = line.strip_prefix("wsp_ggml_backend: ")?;
    let (func, rest) = rest.split_once(": ")?;
    let n = rest.strip_prefix("out of memory (")?.strip_suffix(" bytes)")?;
    (func.starts_with("wsp_ggml_backend_") && !func.contains(' ')).then_some(())?;
    Some((func, n.parse().ok()?))
}

fn allocations(o: &Output) -> usize {
    let out = String::from_utf8_lossy(&o.stdout);
    out.lines().find_map(|l| l.strip_prefix("allocations ")).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no count: {out}"))
}

#[test]
fn every_allocation_failing_ends_in_null_or_the_message() {
    let exe = program();
    let clean = run(&exe, None);
    assert!(check_run("no failure", &clean) || clean.status.success());
    let total = allocations(&clean);
    assert!(total >= 20, "the sequence makes {total} library allocations");
    let mut nulls = 0;
    for mode in ["OOM_FAIL_AT", "OOM_FAIL_FROM"] {
        for n in 1..=total {
            let o = run(&exe, Some((mode, n)));
            nulls += check_run(&format!("{mode}={n}"), &o) as usize;
        }
    }
    // the four functions that return NULL are in the sequence
    assert!(nulls >= 8, "{nulls} runs ended in a NULL");
}

#[test]
fn the_message_parser_is_strict() {
    assert_eq!(
        parse_message("wsp_ggml_backend: wsp_ggml_backend_cpu_init: out of memory (24 bytes)"),
        Some(("wsp_ggml_backend_cpu_init", 24))
    );
    assert_eq!(parse_message("wsp_ggml_backend: internal error (Rust panic), aborting: x"), None);
    assert_eq!(parse_message("wsp_ggml_backend: wsp_ggml_backend_cpu_init: failed to allocate 24 bytes"), None);
}

/// Under memcheck: every run that ends in a NULL (nothing leaks, nothing
/// invalid), and a sample of the stops (nothing invalid before the abort).
#[test]
fn memcheck_after_a_null_and_at_a_stop() {
    let ok = Command::new("valgrind").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "valgrind is not installed: run ./scripts/test (it installs it) or apt-get install valgrind");
    let exe = program();
    let total = allocations(&run(&exe, None));
    let (mut nulls, mut stops) = (Vec::new(), Vec::new());
    for n in 1..=total {
        let o = run(&exe, Some(("OOM_FAIL_AT", n)));
        if o.status.success() {
            nulls.push(n)
        } else {
            stops.push(n)
        }
    }
    assert!(!nulls.is_empty() && !stops.is_empty());
    // the stops: the first, one in the middle, the last
    let sample = [stops[0], stops[stops.len() / 2], stops[stops.len() - 1]];
    for (n, ends_in_null) in nulls.iter().map(|&n| (n, true)).chain(sample.iter().map(|&n| (n, false))) {
        // (valgrind's allocator replaces libc's only: the program's own
        // malloc, the injector, stays, and calls libc's)
        let o = Command::new("valgrind")
            .arg("--soname-synonyms=somalloc=nouserintercepts")
            .args(["--error-exitcode=99", "--leak-check=full", "--show-leak-kinds=definite,indirect"])
            .args(["--errors-for-leak-kinds=definite,indirect"])
            .arg(&exe)
            .env("OOM_FAIL_AT", n.to_string())
            .output()
            .expect("run valgrind");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!ends_in_null || allocations(&o) > 0, "the injector runs under memcheck");
        if ends_in_null {
            assert!(o.status.success(), "OOM_FAIL_AT={n} under memcheck (exit {:?}):\n{err}", o.status.code());
        } else {
            assert!(err.contains("ERROR SUMMARY: 0 errors"), "OOM_FAIL_AT={n} under memcheck:\n{err}");
        }
    }
}
