//! The extension API (include/ggml-backend-ext.h), checked on our library
//! alone: the scheduler consults supports_op, the eval callback, split and
//! backend statistics, reset / reserve, the CPU abort callback, graph copy
//! and backend comparison. Each C program prints `ok <check>` per passed
//! check and `FAIL <check>: ...` otherwise, and exits 0 only if all passed.

use ffi_tests::harness::{self, Flavour};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

const TB: &[&str] = &["test_backend.c"];

/// The test backends' slot patterns each program runs in (harness::SHAPES).
/// Programs about `supports_op` rejections, or that split their graphs
/// through them, cannot run with CUDA's pattern (no `supports_op`: it
/// rejects nothing); they run with every slot set and with Metal's.
const ALL: &[&str] = &harness::SHAPES;
const REJECTING: &[&str] = &["full", "metal"];

/// Our library's output of `program`, once per slot pattern in `shapes`.
fn outputs(program: &str, shapes: &[&str]) -> Vec<String> {
    shapes.iter().map(|shape| harness::ours_only_shaped(program, TB, &[], shape)).collect()
}

fn expect_oks(out: &str, names: &[&str]) {
    let fails: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(fails.is_empty(), "failed checks:\n{}\n--- full output:\n{out}", fails.join("\n"));
    for n in names {
        let line = format!("ok {n}");
        assert!(out.lines().any(|l| l == line), "missing `{line}` in:\n{out}");
    }
    assert!(out.lines().any(|l| l == "failures 0"), "{out}");
}

#[test]
fn sched_consults_supports_op() {
    for out in outputs("ext_supports.c", REJECTING) {
        expect_oks(
            &out,
            &[
                "supports_matches_plain_ggml",
                "supports_rejected_nodes_on_cpu",
                "supports_splits_consistent",
                "supports_extra_splits",
                "supports_tb_computed_its_splits",
                "supports_all_one_split",
                "supports_matches_cpu_backend_alone",
                "supports_repeated_computes",
                "supports_spy_never_computes_rejected",
                "supports_spy_results",
                "supports_wraps_to_earlier_backend",
                "supports_wrap_results",
                "supports_order_next_backend",
                "supports_order_skips_rejecting_next",
                "supports_view_ops_not_moved",
                "supports_reused_split_same",
                "supports_answers_change_resplit",
                "supports_answers_change_back",
            ],
        );
    }
}

/// A compute never fails inside ggml-alloc; memory decides for
/// views and in-place ops; assignments that cannot be honoured are not applied.
#[test]
fn sched_computes_fit_and_follow_memory() {
    for out in outputs("ext_fits.c", REJECTING) {
        expect_oks(
            &out,
            &[
                "fits_larger_graph",
                "fits_larger_graph_grew",
                "fits_user_assignments",
                "fits_views_and_inplace_follow_memory",
                "fits_supports_moves",
                "fits_supports_moves_grew",
                "fits_cpy_into_fresh_past_rejecting",
                "fits_rejected_assignment_not_applied",
                "fits_input_in_host_memory",
                "fits_growth_fails_falls_back",
                "fits_caller_scratch_in_compute_buffer",
            ],
        );
    }
}

#[test]
fn sched_statistics_match_test_backend_counters() {
    for out in outputs("ext_stats.c", REJECTING) {
        expect_oks(
            &out,
            &[
                "stats_n_backends_and_order",
                "stats_measure_splits_consistent",
                "stats_results",
                "stats_measure_same_split_count",
                "stats1_splits_consistent",
                "stats1_split_inputs",
                "stats1_backend_stats_match_counters",
                "stats1_copies_read_once",
                "stats_tensor_backend",
                "stats_backend_not_in_sched",
                "stats2_splits_consistent",
                "stats2_split_inputs",
                "stats2_backend_stats_match_counters",
                "stats2_copies_read_once",
                "stats2_results",
                "stats_measure_has_no_split_bytes",
            ],
        );
    }
}

#[test]
fn sched_eval_callback_protocol() {
    for out in outputs("ext_callback.c", REJECTING) {
        expect_oks(
            &out,
            &[
                "callback_asks_every_node_once_in_order",
                "callback_none_observed_all_computed",
                "callback_none_observed_results",
                "callback_observe_sequence",
                "callback_observed_data_is_computed",
                "callback_observe_each_node_computed_once",
                "callback_observe_batches",
                "callback_observe_results",
                "callback_not_called_when_measuring",
                "callback_stop_no_later_calls",
                "callback_stop_observed_data",
                "callback_stop_later_nodes_not_computed",
                "callback_stop_no_later_copies",
                "callback_stop_stats",
                "callback_stop_split_end_no_later_calls",
                "callback_stop_split_end_observed_data",
                "callback_stop_split_end_later_nodes_not_computed",
                "callback_stop_split_end_no_later_copies",
                "callback_stop_split_end_stats",
                "callback_cleared",
            ],
        );
    }
}

#[test]
fn sched_reserve_and_reset() {
    for out in outputs("ext_reserve.c", ALL) {
        expect_oks(
            &out,
            &[
                "reserve_before_measure_sizes",
                "reserve_buffer_size_is_buffer_size",
                "reserve_sets_splits",
                "reserve_before_measure_computes",
                "reserve_grows",
                "reserve_large_computes",
                "reserve_never_shrinks",
                "reserve_small_then_both_compute",
                "compute_keeps_reserved_sizes",
                "reset_keeps_buffers",
                "reserve_after_init_measure_grows",
                "reserve_matches_measure_of_same_graph",
                "reset_default_assignment",
                "set_node_backend_honoured",
                "reset_forgets_split_graph",
                "reset_drops_node_backend",
                "fresh_sched_has_nothing",
                "fresh_sched_buffer_size_zero",
                "reset_then_compute",
            ],
        );
    }
}

#[test]
fn cpu_abort_callback() {
    for out in outputs("ext_abort.c", ALL) {
        let mut names = Vec::new();
        for path in ["compute", "plan"] {
            for what in ["no_callback_runs_all", "stops_after_limit", "immediately", "cleared"] {
                names.push(format!("abort_{path}_{what}"));
            }
        }
        names.extend(["abort_per_backend", "abort_threads_stops", "abort_threads_cleared"].map(String::from));
        expect_oks(&out, &names.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

#[test]
fn graph_copy_and_compare_pinpoint_a_wrong_op() {
    for out in outputs("ext_compare.c", ALL) {
        expect_oks(
            &out,
            &[
                "copy_source_results",
                "copy_structure",
                "copy_on_backend",
                "copy_leaf_data",
                "copy_views_recreated",
                "copy_computes_same",
                "copy_free_releases_buffer",
                "compare_calls_every_non_view_node_in_order",
                "compare_flags_exactly_gelu",
                "compare_backend1_results",
                "compare_stops_at_first_gelu",
                "compare_stop_later_nodes_not_computed",
                "compare_honest_xb_nothing_flagged",
                "compare_honest_test_backend_nothing_flagged",
                "compare_frees_its_copy",
            ],
        );
    }
}

/// Each misuse case runs in its own process: SIGABRT with a message from the
/// library (never a crash, an exit or silence).
#[test]
fn ext_misuse_aborts_with_a_message() {
    let exe = harness::build("ext_misuse", &["ext_misuse.c", "test_backend.c"], Flavour::Ours);
    let list = harness::run(&exe, &[]);
    assert!(list.status.success());
    let cases: Vec<String> =
        String::from_utf8_lossy(&list.stdout).lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
    // case -> what the message must name besides the function
    let expected: &[(&str, &str)] = &[
        ("rejected_preallocated", "'cache_store'"),
        ("rejected_everywhere", "'probs'"),
        ("chain_rejected_everywhere", "node 'z' (SOFT_MAX) works in the memory of 'y', and no backend of the scheduler supports every op"),
        ("get_backend_out_of_range", "wsp_ggml_backend_sched_get_backend"),
        ("get_backend_negative", "wsp_ggml_backend_sched_get_backend"),
        ("get_buffer_size_unknown_backend", "wsp_ggml_backend_sched_get_buffer_size"),
        ("cpu_abort_callback_non_cpu", "wsp_ggml_backend_cpu_set_abort_callback"),
        ("callback_graph_compute", "wsp_ggml_backend_sched_graph_compute: called from inside the evaluation callback"),
        ("callback_set_node_backend", "wsp_ggml_backend_sched_set_node_backend: called from inside the evaluation callback"),
        ("callback_reset", "wsp_ggml_backend_sched_reset: called from inside the evaluation callback"),
        ("callback_free", "wsp_ggml_backend_sched_free: called from inside the evaluation callback"),
        ("callback_init_measure", "wsp_ggml_backend_sched_init_measure: called from inside the evaluation callback"),
        ("callback_get_tallocr", "wsp_ggml_backend_sched_get_tallocr: called from inside the evaluation callback"),
        ("callback_copy_reset", "wsp_ggml_backend_sched_reset: called from inside the evaluation callback (or another callback"),
        (
            "callback_copy_set_eval_callback",
            "wsp_ggml_backend_sched_set_eval_callback: called from inside the evaluation callback (or another",
        ),
        (
            "planning_supports_read",
            "wsp_ggml_backend_sched_get_n_splits: called from inside wsp_ggml_backend_sched_graph_compute on this scheduler",
        ),
        ("cpu_abort_callback_set_n_threads", "wsp_ggml_backend_cpu_set_n_threads: called from inside the CPU backend's abort callback"),
        // a backend whose buffer allocation fails: the out-of-memory message
        ("growth_fails", "wsp_ggml_backend: wsp_ggml_backend_sched_graph_compute: out of memory ("),
    ];
    assert_eq!(cases, expected.iter().map(|(c, _)| c.to_string()).collect::<Vec<_>>());
    for (case, needle) in expected {
        let o = harness::run(&exe, &[case]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.signal(), Some(6), "case {case}: expected SIGABRT, got {:?}; stderr:\n{stderr}", o.status);
        assert!(stderr.contains("wsp_ggml_backend: wsp_ggml_backend_"), "case {case}: no message naming the function:\n{stderr}");
        assert!(stderr.contains(needle), "case {case}: the message does not name {needle}:\n{stderr}");
        assert!(!stderr.contains("NOT ABORTED"), "case {case}:\n{stderr}");
        if case.starts_with("callback_") {
            // the reads before the change worked
            assert!(stderr.contains("reads ok"), "case {case}: a read failed inside the callback:\n{stderr}");
        }
    }
}

/// Run every case a program lists (run without arguments, it prints one
/// case per line), one process each and once per slot pattern in
/// `shapes`; `ok` judges each run. Panics with every case that fails.
fn run_cases(program: &str, n_cases: usize, shapes: &[&str], ok: impl Fn(&str, &std::process::Output) -> bool) {
    let exe = harness::build(program.trim_end_matches(".c"), &[program, "test_backend.c"], Flavour::Ours);
    let list = harness::run(&exe, &[]);
    assert!(list.status.success());
    let cases: Vec<String> =
        String::from_utf8_lossy(&list.stdout).lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
    assert_eq!(cases.len(), n_cases, "{cases:?}");
    let mut problems = Vec::new();
    for case in &cases {
        for shape in shapes {
            let o = harness::run_shaped(&exe, &[case], shape);
            if !ok(case, &o) {
                let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
                problems.push(format!("case {case} ({shape} test backend): status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", o.status));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A node moved off a rejecting backend must not be an in-place view into
/// that backend's memory: each case either computes correctly with every
/// node's memory on its assigned backend, or is refused with the library's
/// own message (never ggml-alloc's assertion, a crash or a wrong result).
#[test]
fn inplace_ops_and_supports_op() {
    run_cases("ext_inplace.c", 2, ALL, |case, o| {
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        if o.status.success() {
            stdout.lines().any(|l| l == format!("ok {case}")) && stdout.lines().any(|l| l == "failures 0")
        } else {
            o.status.signal() == Some(6) && stderr.contains("wsp_ggml_backend: wsp_ggml_backend_sched_") && !stderr.contains("Assertion")
        }
    });
}

/// supports_op through in-place chains: a node computed on C
/// gets an in-place node C rejects; the chain moves whole to the backend
/// that accepts all of it, for each in-place family, after the rejections
/// change between two computes. Every case must pass (no abort accepted:
/// the CPU accepts the whole chain).
#[test]
fn inplace_chains_go_to_a_backend_that_supports_all_of_them() {
    run_cases("ext_chain.c", 7, REJECTING, |case, o| {
        o.status.success() && String::from_utf8_lossy(&o.stdout).lines().any(|l| l == format!("ok {case}"))
    });
}

/// memcheck over the ext programs: no invalid access, no leak (the graph
/// copies, compare's copies, the scheduler's statistics tables).
fn memcheck(program: &str) {
    memcheck_with(program, &[]);
}

/// [`memcheck`] of one run of `program` with `args`.
fn memcheck_with(program: &str, args: &[&str]) {
    let ok = Command::new("valgrind").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "valgrind is not installed: run ./scripts/test (it installs it) or apt-get install valgrind");
    let name = program.trim_end_matches(".c");
    let exe = harness::build(name, &[program, "test_backend.c"], Flavour::Ours);
    let o = Command::new("valgrind")
        .args(["-q", "--error-exitcode=99", "--leak-check=full", "--show-leak-kinds=definite,indirect"])
        .args(["--errors-for-leak-kinds=definite,indirect"])
        .arg(&exe)
        .args(args)
        .output()
        .expect("run valgrind");
    // the program's own verdict is checked by the tests above; here only memcheck's
    assert_ne!(o.status.code(), Some(99), "memcheck reports errors for {name}:\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.code().is_some(), "{name} died under valgrind: {:?}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
}

/// The in-place chain cases that move a chain (a computed owner; a fresh
/// tensor a copy writes into), under memcheck.
#[test]
fn memcheck_ext_chain() {
    for case in ["silu", "cpy_into_fresh"] {
        memcheck_with("ext_chain.c", &[case]);
    }
}

#[test]
fn memcheck_ext_supports() {
    memcheck("ext_supports.c");
}

#[test]
fn memcheck_ext_stats() {
    memcheck("ext_stats.c");
}

#[test]
fn memcheck_ext_callback() {
    memcheck("ext_callback.c");
}

#[test]
fn memcheck_ext_reserve() {
    memcheck("ext_reserve.c");
}

#[test]
fn memcheck_ext_compare() {
    memcheck("ext_compare.c");
}

#[test]
fn memcheck_ext_abort() {
    memcheck("ext_abort.c");
}
