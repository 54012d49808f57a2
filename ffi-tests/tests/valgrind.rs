//! Memory and thread checks of our library under valgrind: memcheck over the
//! differential programs (no invalid access, no leak) and helgrind over the
//! multi-threaded scheduler program (no race in our code).
//! `scripts/test` installs valgrind when it is missing.

use ffi_tests::harness::{self, Flavour};
use std::process::Command;

fn valgrind_available() {
    let ok = Command::new("valgrind").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "valgrind is not installed: run ./scripts/test (it installs it) or apt-get install valgrind");
}

fn memcheck(program: &str) {
    valgrind_available();
    let name = program.trim_end_matches(".c");
    let exe = harness::build(name, &[program, "test_backend.c"], Flavour::Ours);
    let o = Command::new("valgrind")
        .args(["-q", "--error-exitcode=99", "--leak-check=full", "--show-leak-kinds=definite,indirect"])
        .args(["--errors-for-leak-kinds=definite,indirect"])
        .arg(&exe)
        .env("TEST_BACKEND_LOG", "1")
        .output()
        .expect("run valgrind");
    assert!(o.status.success(), "memcheck reports errors for {name} (exit {:?}):\n{}", o.status.code(), String::from_utf8_lossy(&o.stderr));
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
}

/// Functions that belong to our library (Rust paths, our exports, and the
/// Rust standard library inlined into it).
fn is_our_frame(func: &str) -> bool {
    func.starts_with("wsp_ggml_backend::")
        || (func.starts_with("wsp_ggml_backend_") && !func.starts_with("wsp_ggml_backend_sched_")
            || func.starts_with("wsp_ggml_backend_sched_"))
            && !func.contains('.')
            && func.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || func == "wsp_ggml_get_backend"
        || func.starts_with("core::")
        || func.starts_with("alloc::")
        || func.starts_with("std::")
}

/// The function that performed an access: the first frame that is not a
/// libc/valgrind memory routine.
fn accessor(frames: &[&str]) -> Option<String> {
    frames.iter().filter_map(|l| l.split_once(": ").map(|(_, f)| f.split(" (").next().unwrap_or(f).trim().to_string())).find(|f| {
        !matches!(f.as_str(), "memmove" | "memcpy" | "memset" | "???") && !f.starts_with("__memcpy") && !f.starts_with("__memmove")
    })
}

#[test]
fn helgrind_finds_no_race_in_our_library() {
    valgrind_available();
    let exe = harness::build("sched_threads", &["sched_threads.c", "test_backend.c"], Flavour::Ours);
    let o = Command::new("valgrind").args(["--tool=helgrind", "--history-level=approx"]).arg(&exe).output().expect("run valgrind");
    assert!(o.status.success(), "sched_threads failed under helgrind");
    let log = String::from_utf8_lossy(&o.stderr);
    // Each report: "Possible data race ..." then the accessing stack, then
    // "This conflicts with a previous ..." and the other stack. ggml.c's own
    // thread pool synchronises with atomics helgrind does not model; those
    // reports are ggml's, not ours.
    let lines: Vec<&str> = log.lines().map(|l| l.split_once("== ").map_or(l, |(_, r)| r)).collect();
    let mut ours = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("Possible data race") || l.starts_with("This conflicts with a previous") {
            let frames: Vec<&str> = lines[i + 1..]
                .iter()
                .skip_while(|f| f.starts_with("Locks held"))
                .take_while(|f| f.starts_with("at ") || f.starts_with("by "))
                .copied()
                .collect();
            if let Some(f) = accessor(&frames) {
                if is_our_frame(&f) {
                    ours.push(format!("{l}\n    {}", frames.join("\n    ")));
                }
            }
        }
    }
    assert!(ours.is_empty(), "helgrind reports races in our library:\n{}", ours.join("\n\n"));
}
