//! Scheduler behaviour beyond the original's reach, checked on our library
//! alone: results are compared (inside the C programs) with the same graph
//! computed on the CPU backend alone or by plain ggml.c.

use ffi_tests::harness::{self, Flavour};
use std::os::unix::process::ExitStatusExt;

const TB: &[&str] = &["test_backend.c"];

#[test]
fn beyond_the_original_limits() {
    let out = harness::ours_only("sched_beyond.c", TB, &[]);
    let oks = out.lines().filter(|l| l.starts_with("ok ")).count();
    for case in ["set_node_backend", "many_splits", "many_inputs", "many_backends", "big_graph", "many_scheds", "remeasure"] {
        assert!(out.lines().any(|l| l == format!("ok {case}")), "missing 'ok {case}' in:\n{out}");
    }
    assert!(oks >= 7, "expected at least 7 'ok' lines, got:\n{out}");
    assert!(!out.lines().any(|l| l.starts_with("FAIL")), "{out}");
}

#[test]
fn independent_schedulers_on_four_threads() {
    let out = harness::ours_only("sched_threads.c", TB, &[]);
    assert!(out.lines().any(|l| l == "ok"), "{out}");
}

/// Two threads with their own backends and scheduler, as an app would
/// (tests/valgrind.rs also runs it under helgrind).
#[test]
fn two_threads_as_an_application_uses_them() {
    let out = harness::ours_only("threads_two.c", TB, &[]);
    assert!(out.lines().any(|l| l == "ok"), "{out}");
}

/// Each misuse case runs in its own process: it must die by SIGABRT with a
/// message naming the function (never a segfault, an exit(1) or silence).
#[test]
fn misuse_aborts_with_a_message_naming_the_function() {
    let exe = harness::build("sched_misuse", &["sched_misuse.c", "test_backend.c"], Flavour::Ours);
    let list = harness::run(&exe, &[]);
    assert!(list.status.success());
    let cases: Vec<String> =
        String::from_utf8_lossy(&list.stdout).lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
    assert!(cases.len() >= 13, "expected at least 13 misuse cases, got {cases:?}");
    for case in &cases {
        let o = harness::run(&exe, &[case]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.signal(), Some(libc_sigabrt()), "case {case}: expected SIGABRT, got {:?}; stderr:\n{stderr}", o.status);
        assert!(
            stderr.contains("wsp_ggml_backend: wsp_ggml_backend_sched_") || stderr.contains("wsp_ggml_backend: wsp_ggml_backend_"),
            "case {case}: stderr does not name the function:\n{stderr}"
        );
    }
}

/// `WSP_GGML_SCHED_DEBUG` prints assignments and splits; without it the
/// library prints nothing (the original printed its size on every sched_new).
#[test]
fn debug_output_only_when_asked() {
    let exe = harness::build("sched_two", &["sched_two.c", "test_backend.c"], Flavour::Ours);
    let quiet = harness::command(&exe).output().unwrap();
    assert!(quiet.status.success());
    assert!(quiet.stderr.is_empty(), "unexpected stderr: {}", String::from_utf8_lossy(&quiet.stderr));
    let loud = harness::command(&exe).env("WSP_GGML_SCHED_DEBUG", "1").output().unwrap();
    assert!(loud.status.success());
    let err = String::from_utf8_lossy(&loud.stderr);
    assert!(err.contains("## SPLIT #0: "), "no split listing in:\n{err}");
    assert!(err.contains("node #"), "no node listing in:\n{err}");
    // the results are the same either way (debug output calls get_name: only
    // the informational "~ " counter lines may differ)
    let (q, l) = (String::from_utf8_lossy(&quiet.stdout), String::from_utf8_lossy(&loud.stdout));
    if let Err(e) = harness::compare(&q, &l) {
        panic!("debug output changed the results: {e}");
    }
}

fn libc_sigabrt() -> i32 {
    6
}
