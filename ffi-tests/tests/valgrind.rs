//! Memory and thread checks of our library under valgrind: memcheck over the
//! differential programs (no invalid access, no leak) and helgrind over the
//! multi-threaded programs (no report once ggml.c's own are suppressed).
//! `scripts/test` installs valgrind when it is missing.

use ffi_tests::harness::{self, Flavour};
use std::process::Command;

fn valgrind_available() {
    let ok = Command::new("valgrind").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "valgrind is not installed: run ./scripts/test (it installs it) or apt-get install valgrind");
}

fn memcheck(program: &str) {
    memcheck_shaped(program, &[], "full");
}

/// [`memcheck`] of one run with `args`, the test backends in slot pattern `shape`.
fn memcheck_shaped(program: &str, args: &[&str], shape: &str) {
    valgrind_available();
    let name = program.trim_end_matches(".c");
    let exe = harness::build(name, &[program, "test_backend.c"], Flavour::Ours);
    let o = Command::new("valgrind")
        .args(["-q", "--error-exitcode=99", "--leak-check=full", "--show-leak-kinds=definite,indirect"])
        .args(["--errors-for-leak-kinds=definite,indirect"])
        .arg(&exe)
        .args(args)
        .env("TEST_BACKEND_LOG", "1")
        .env("TEST_BACKEND_SHAPE", shape)
        .output()
        .expect("run valgrind");
    assert!(
        o.status.success(),
        "memcheck reports errors for {name} {args:?} ({shape} test backend) (exit {:?}):\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The gpt-2-shaped client with the second backend in CUDA's and Metal's
/// slot patterns.
#[test]
fn memcheck_sched_gpt2_real_slot_patterns() {
    memcheck_shaped("sched_gpt2.c", &["2", "f16"], "cuda");
    memcheck_shaped("sched_gpt2.c", &["5", "q4_0"], "metal");
}

macro_rules! memcheck_tests {
    ($($test:ident => $file:expr),* $(,)?) => {
        $( #[test] fn $test() { memcheck($file); } )*
    };
}

memcheck_tests! {
    memcheck_buffers => "buffers.c",
    memcheck_tensor_io => "tensor_io.c",
    memcheck_graph_ops => "graph_ops.c",
    memcheck_allocr_legacy => "allocr_legacy.c",
    memcheck_tensor_copy_routes => "tensor_copy_routes.c",
    memcheck_sched_two => "sched_two.c",
    memcheck_sched_three => "sched_three.c",
    memcheck_sched_four => "sched_four.c",
    memcheck_sched_measure => "sched_measure.c",
    memcheck_sched_rules => "sched_rules.c",
    memcheck_sched_reuse => "sched_reuse.c",
    memcheck_sched_reuse_more => "sched_reuse_more.c",
    memcheck_sched_beyond => "sched_beyond.c",
    memcheck_ext_fits => "ext_fits.c",
    memcheck_sched_placement => "sched_placement.c",
    memcheck_sched_first_split => "sched_first_split.c",
}

/// Run `program` under helgrind with ggml.c's own reports suppressed
/// (`c/helgrind-ggml.supp`) and require no report at all: whatever is left
/// is shared between threads without synchronisation in our library (or in
/// the test program). The program must print "ok".
fn helgrind(program: &str) {
    valgrind_available();
    let name = program.trim_end_matches(".c");
    let exe = harness::build(name, &[program, "test_backend.c"], Flavour::Ours);
    let supp = harness::c_dir().join("helgrind-ggml.supp");
    let o = Command::new("valgrind")
        .args(["--tool=helgrind", "--error-exitcode=99"])
        .arg(format!("--suppressions={}", supp.display()))
        .arg(&exe)
        .output()
        .expect("run valgrind");
    let log = String::from_utf8_lossy(&o.stderr);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.lines().last() == Some("ok"), "{name} failed under helgrind (exit {:?}):\n{out}\n{log}", o.status.code());
    // "ERROR SUMMARY: 0 errors from 0 contexts (suppressed: ...)"
    let errors = log
        .lines()
        .find_map(|l| l.split_once("ERROR SUMMARY: ").and_then(|(_, r)| r.split_whitespace().next()?.parse::<u64>().ok()))
        .expect("helgrind's error summary");
    assert!(
        errors == 0 && o.status.success(),
        "helgrind reports {errors} errors in {name} beyond ggml.c's own (exit {:?}):\n{log}",
        o.status.code()
    );
    // the suppressions must not have hidden everything: ggml.c's reports are there
    assert!(
        log.contains("ERROR SUMMARY") && !log.contains("(suppressed: 0 from 0)"),
        "no ggml.c report was suppressed: is helgrind checking?\n{log}"
    );
}

/// Four threads, each with two schedulers over its own test and CPU backends.
#[test]
fn helgrind_finds_no_race_in_our_library() {
    helgrind("sched_threads.c");
}

/// Two threads used as an application would: each its own backends,
/// scheduler, set_node_backend, copies between backends and the CPU
/// backend's own graph compute.
#[test]
fn helgrind_two_threads_report_nothing() {
    helgrind("threads_two.c");
}
