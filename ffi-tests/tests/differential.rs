//! Differential tests: each C program is built with the original
//! ggml-backend.c and with our library, and must print the same bytes
//! (see ffi_tests::harness for the `~le` / `~ ` line conventions).

use ffi_tests::harness::{differential, differential_cases, GPT2_CASES, SHAPES};

const TB: &[&str] = &["test_backend.c"];

#[test]
fn buffers() {
    differential("buffers.c", TB, &[]);
}

#[test]
fn tensor_io() {
    differential("tensor_io.c", TB, &[]);
}

#[test]
fn graph_ops() {
    differential("graph_ops.c", TB, &[]);
}

#[test]
fn allocr_legacy() {
    differential("allocr_legacy.c", TB, &[]);
}

#[test]
fn tensor_copy_routes() {
    differential("tensor_copy_routes.c", TB, &[]);
}

/// Documented differences from the original, checked on our library alone.
#[test]
fn ours_documented_differences() {
    let out = ffi_tests::harness::ours_only("ours_extras.c", &[], &[]);
    for line in [
        "ok aligned cpu buffer base",
        "ok is_cpu(NULL) == false",
        "ok alignment of a backend-less from_ptr buffer",
        "ok copy slots receive the backend",
        "ok supports_op of a backend without the slot is true",
        "ok NULL frees are no-ops",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in:\n{out}");
    }
}

// Scheduler (issue: the original's assignment without its limits).

#[test]
fn sched_two_backends() {
    differential("sched_two.c", TB, &[]);
}

#[test]
fn sched_three_backends() {
    differential("sched_three.c", TB, &[]);
}

#[test]
fn sched_four_backends() {
    differential("sched_four.c", TB, &[]);
}

#[test]
fn sched_measure_then_smaller_graphs() {
    differential("sched_measure.c", TB, &[]);
}

#[test]
fn sched_assignment_rules() {
    differential("sched_rules.c", TB, &[]);
}

#[test]
fn sched_graphs_rebuilt_at_the_same_addresses() {
    differential("sched_reuse.c", TB, &[]);
}

#[test]
fn sched_graphs_that_look_alike_between_computes() {
    differential("sched_reuse_more.c", TB, &[]);
}

#[test]
fn sched_pass3_runs_before_the_split() {
    differential("sched_pass3.c", TB, &[]);
}

/// No heap allocation in a compute of the same graph or of a new graph no
/// larger than one computed since init_measure (graphs rebuilt in a fresh
/// context every compute, or in one fixed block); the original allocates
/// none either, and the first compute allocates what the original's does.
/// Also between two backends that copy only through get + set, where the
/// original allocates a host buffer per copy.
#[test]
fn sched_computes_allocate_nothing() {
    differential("sched_allocs.c", TB, &[]);
    // ours' counts in every slot pattern of the test backend (the get + set
    // copies happen in CUDA's)
    for shape in SHAPES {
        let out = ffi_tests::harness::ours_only_shaped("sched_allocs.c", TB, &[], shape);
        let counts: Vec<&str> =
            out.lines().filter(|l| (l.starts_with("allocs ") || l.starts_with("~le allocs ")) && !l.contains(" first ")).collect();
        assert!(counts.len() >= 20, "{out}");
        for l in counts {
            assert!(l.ends_with(" 0"), "a compute allocated ({shape} test backend): {l}");
        }
    }
}

#[test]
fn sched_first_split_empty_when_a_cache_update_comes_first() {
    let out = differential("sched_first_split.c", TB, &[]);
    assert!(out.contains("graph_compute calls: b1:0:"), "B is called with no node first:\n{out}");
}

#[test]
fn sched_source_outside_the_lists_changes_its_view_source() {
    differential("sched_unlisted_view.c", TB, &[]);
}

/// Reductions found by the fuzzer: init_measure twice with an input allocated through
/// sched_get_tallocr, a larger graph after a smaller re-measure, a graph of
/// one view.
#[test]
fn sched_remeasure_and_view_only_graphs() {
    differential("sched_remeasure.c", TB, &[]);
}

#[test]
fn sched_places_every_tensor_where_ggml_alloc_does() {
    differential("sched_placement.c", &[], &[]);
}

/// ggml's gpt-2 example as a client of the scheduler over a second
/// backend and the CPU (layers split by NGL, the graph built anew in a fresh
/// context every compute, shapes changing with n_past), with the second
/// backend in every slot pattern of the real backends: CUDA's (no
/// supports_op: ours aborted every run before) and Metal's. Greedy tokens,
/// logits bytes and compute buffer sizes equal the original's.
#[test]
fn sched_gpt2_shaped_client_over_real_slot_patterns() {
    let out = differential_cases("sched_gpt2.c", TB, GPT2_CASES, &SHAPES);
    assert!(out.lines().any(|l| l.starts_with("step 35 n_past 42 token ")), "{out}");
}
