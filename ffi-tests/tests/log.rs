//! Where the library's messages go (src/platform.rs): the log callback of
//! ggml-backend-ext.h (`wsp_ggml_backend_log_set`), stderr by default, and
//! on Android logcat and the abort message, exercised here through the
//! `logcat-on-host` feature (the Android code path, built for this machine)
//! and stand-ins for `__android_log_write` and `android_set_abort_message`
//! that `ffi-tests/c/log_route.c` defines with `-DSTANDIN`. C's buffered
//! output must survive the abort after a message (stdout is a pipe here, so
//! fully buffered).

use ffi_tests::harness::{self, Flavour};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Output;

const MESSAGE: &str = "wsp_ggml_backend: wsp_ggml_backend_tensor_set: argument 'tensor' is NULL";

fn run(exe: &Path, args: &[&str]) -> (Output, String, String) {
    let o = harness::run(exe, args);
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    (o, out, err)
}

fn run_env(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, String, String) {
    let o = harness::run_shaped_env(exe, args, "full", env);
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    (o, out, err)
}

fn aborted(o: &Output, what: &str, out: &str, err: &str) {
    assert_eq!(o.status.signal(), Some(6), "{what}: expected SIGABRT, got {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert!(!err.contains("NOT ABORTED"), "{what}: {err}");
}

/// The cases the program lists, checked against the ones this file runs.
fn cases(exe: &Path) {
    let (o, out, _) = run(exe, &[]);
    assert!(o.status.success());
    let listed: Vec<&str> = out.lines().collect();
    assert_eq!(listed, ["misuse", "callback", "callback_stdout", "unset", "stdout_survives", "debug"]);
}

#[test]
fn the_callback_gets_every_message_and_buffered_output_survives_the_abort() {
    let exe = harness::build("log_route", &["log_route.c", "test_backend.c"], Flavour::Ours);
    cases(&exe);

    // default: one line on stderr
    let (o, out, err) = run(&exe, &["misuse"]);
    aborted(&o, "misuse", &out, &err);
    assert_eq!(err, format!("{MESSAGE}\n"), "the message alone, on stderr");

    // a callback: it receives the message (level ERROR, ending in a
    // newline), before the abort, and nothing else writes it
    let (o, out, err) = run(&exe, &["callback"]);
    aborted(&o, "callback", &out, &err);
    assert_eq!(err, format!("callback 2 (newline): [{MESSAGE}]\n"));

    // a callback that prints to stdout (buffered: a pipe): flushed
    let (o, out, err) = run(&exe, &["callback_stdout"]);
    aborted(&o, "callback_stdout", &out, &err);
    assert_eq!(out, format!("callback 2 (newline): [{MESSAGE}]\n"), "stderr:\n{err}");
    assert_eq!(err, "");

    // removed again: back on stderr
    let (o, out, err) = run(&exe, &["unset"]);
    aborted(&o, "unset", &out, &err);
    assert_eq!(err, format!("{MESSAGE}\n"));

    // the program's buffered stdout is flushed before the abort
    let (o, out, err) = run(&exe, &["stdout_survives"]);
    aborted(&o, "stdout_survives", &out, &err);
    assert_eq!(out, "written before the abort\n");
    assert_eq!(err, format!("{MESSAGE}\n"));
}

/// WSP_GGML_SCHED_DEBUG's lines are messages of level INFO: on stderr by
/// default, to the callback when one is set (and then not on stderr).
#[test]
fn debug_output_is_routed_at_level_info() {
    // (a build of its own: tests run in parallel)
    let exe = harness::build("log_route_debug", &["log_route.c", "test_backend.c"], Flavour::Ours);
    let debug = [("WSP_GGML_SCHED_DEBUG", "1")];
    let (o, out, err) = run_env(&exe, &["debug"], &debug);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "c[0] 2\ninfo lines 0\n");
    assert!(err.contains("## SPLIT #0: CPU"), "the debug listing on stderr:\n{err}");
    let (o, out, err) = run_env(&exe, &["debug", "callback"], &debug);
    assert!(o.status.success(), "{err}");
    let n: usize = out.lines().find_map(|l| l.strip_prefix("info lines ")).and_then(|n| n.parse().ok()).expect(&out);
    assert!(n >= 2, "the SPLIT line and the node lines: {out}");
    assert_eq!(err, "", "nothing on stderr with a callback");
}

/// The Android path (logcat, then the abort message, then the flush and
/// the abort), on this machine: the library built with `logcat-on-host`,
/// the program defining the two Android functions and exporting them
/// (-rdynamic) so that the library's dlsym finds them.
#[test]
fn android_path_writes_logcat_and_the_abort_message() {
    let lib = harness::feature_staticlib("logcat-on-host");
    let exe = harness::build_custom(
        "log_route_standin",
        &["log_route.c", "test_backend.c"],
        Flavour::Ours,
        &["-DSTANDIN", "-rdynamic"],
        Some(&[&lib]),
    );
    cases(&exe);

    let (o, out, err) = run(&exe, &["misuse"]);
    aborted(&o, "misuse", &out, &err);
    assert_eq!(out, format!("logcat 6 wsp_ggml_backend: [{MESSAGE}]\nabort message: [{MESSAGE}]\n"), "stderr:\n{err}");
    assert_eq!(err, "", "logcat replaces stderr");

    // the program's own buffered output comes first, and survives
    let (o, out, err) = run(&exe, &["stdout_survives"]);
    aborted(&o, "stdout_survives", &out, &err);
    assert_eq!(out, format!("written before the abort\nlogcat 6 wsp_ggml_backend: [{MESSAGE}]\nabort message: [{MESSAGE}]\n"));

    // a callback replaces logcat; the crash report still gets the message
    let (o, out, err) = run(&exe, &["callback_stdout"]);
    aborted(&o, "callback_stdout", &out, &err);
    assert_eq!(out, format!("callback 2 (newline): [{MESSAGE}]\nabort message: [{MESSAGE}]\n"));
    assert_eq!(err, "");

    // debug lines go to logcat at INFO priority (4)
    let (o, out, err) = run_env(&exe, &["debug"], &[("WSP_GGML_SCHED_DEBUG", "1")]);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("logcat 4 wsp_ggml_backend: [\n## SPLIT #0: CPU"), "{out}");
    assert!(out.ends_with("c[0] 2\ninfo lines 0\n"), "{out}");
    assert_eq!(err, "");
}

/// The Android path where liblog is not loaded (the two functions are not
/// in the process): stderr, as elsewhere, and no abort message.
#[test]
fn android_path_without_liblog_falls_back_to_stderr() {
    let lib = harness::feature_staticlib("logcat-on-host");
    // the stand-ins compiled in but not exported: dlsym does not find them
    let exe =
        harness::build_custom("log_route_standin_hidden", &["log_route.c", "test_backend.c"], Flavour::Ours, &["-DSTANDIN"], Some(&[&lib]));
    let (o, out, err) = run(&exe, &["stdout_survives"]);
    aborted(&o, "stdout_survives", &out, &err);
    assert_eq!(out, "written before the abort\n");
    assert_eq!(err, format!("{MESSAGE}\n"));
}
