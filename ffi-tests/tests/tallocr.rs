//! The scheduler with a ggml-alloc whose allocator struct is not laid out as
//! whisper.cpp 1.5's: the library reads that private struct to place a split
//! after what the caller allocated through `sched_get_tallocr`, validating
//! it field by field first (src/handle/talloc.rs, `read_tallocr`). Here the C
//! programs are linked with a ggml-alloc.c whose struct differs (its code
//! unchanged otherwise), so nothing validates and every compute takes the
//! fallback (the caller's allocations are seen through the graph's inputs).
//! The outputs must still be the original's, byte for byte, and with
//! `WSP_GGML_SCHED_DEBUG` the library must say which field did not match.

use ffi_tests::harness::{self, Flavour};
use std::path::PathBuf;

/// A copy of the renamed ggml-alloc.c with `edit` applied to its allocator
/// struct, written next to the C builds.
fn variant(name: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let src = std::fs::read_to_string(harness::out_dir().join("common").join("ggml-alloc.c")).expect("the renamed ggml-alloc.c");
    // ggml-alloc initialises the struct positionally (`/*.buffer = */ buffer,`):
    // designated initialisers keep that code right whatever the field order
    let designated = designated_initialisers(&src);
    let edited = edit(&designated);
    assert_ne!(edited, src, "variant {name} changed nothing");
    let dir = harness::out_dir().join("alloc-variants");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("ggml-alloc-{name}.c"));
    std::fs::write(&path, edited).unwrap();
    path
}

/// `/*.name = */ value` -> `.name = value`.
fn designated_initialisers(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find("/*.") {
        let Some(end) = rest[at..].find("*/").map(|e| e + at) else { break };
        let inner = &rest[at + 2..end];
        out += &rest[..at];
        if inner.starts_with('.') && inner.trim_end().ends_with('=') {
            out += inner.trim_end();
        } else {
            out += &rest[at..end + 2];
        }
        rest = &rest[end + 2..];
    }
    out + rest
}

const STRUCT: &str = "struct wsp_ggml_tallocr {\n";
const COUNT: &str = "    int n_free_blocks;\n";
const BLOCKS: &str = "    struct free_block free_blocks[MAX_FREE_BLOCKS];\n";

/// A field in front of the buffer pointer: the first check fails.
fn field_in_front() -> PathBuf {
    variant("front", |s| {
        assert!(s.contains(STRUCT));
        s.replacen(STRUCT, &format!("{STRUCT}    int generation; // not in whisper.cpp 1.5\n"), 1)
    })
}

/// The block count after the blocks: buffer, base and alignment match,
/// the count read where 1.5 has it is half a block address.
fn count_after_blocks() -> PathBuf {
    variant("count-last", |s| {
        assert!(s.contains(COUNT) && s.contains(BLOCKS));
        s.replacen(COUNT, "", 1).replacen(BLOCKS, &format!("{BLOCKS}{COUNT}"), 1)
    })
}

/// `program` built with our library and the ggml-alloc variant must print
/// what it prints with the original ggml-backend.c and ggml-alloc.c; with
/// the scheduler's debug output on, the library must report `mismatch`.
/// Lines that `placement_too == false` leaves out of the comparison: where a
/// tensor was placed. The fallback sees the caller's allocations only
/// through the graph's inputs, so it may place a split over a tensor the
/// caller allocated but the graph does not use (docs/build-cc.md, "another
/// ggml-alloc"); what is computed stays the same.
fn same_as_original(program: &str, extra: &[&str], alloc: PathBuf, mismatch: &str, placement_too: bool) {
    // (the tests share the original's builds: one at a time)
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let name = program.trim_end_matches(".c");
    let tag = alloc.file_stem().unwrap().to_string_lossy().into_owned();
    let mut sources = vec![program];
    sources.extend_from_slice(extra);
    let orig = harness::run(&harness::build(name, &sources, Flavour::Original), &[]);
    let alloc = alloc.to_string_lossy().into_owned();
    sources.push(&alloc);
    let exe = harness::build(&format!("{name}-{tag}"), &sources, Flavour::Ours);
    let ours = harness::run(&exe, &[]);
    assert!(orig.status.success() && ours.status.success(), "{name} with {tag}: {ours:?}");
    let keep = |o: &[u8]| -> String {
        let s = String::from_utf8_lossy(o);
        s.lines().filter(|l| placement_too || !l.contains(" off=")).map(|l| format!("{l}\n")).collect()
    };
    let (so, sr) = (keep(&ours.stdout), keep(&orig.stdout));
    match harness::compare(&so, &sr) {
        Ok(n) => assert!(n > 0, "{name} printed nothing to compare"),
        Err(e) => panic!("{name} with {tag}: outputs differ from the original's: {e}"),
    }
    let debug = harness::command(&exe).env("WSP_GGML_SCHED_DEBUG", "1").env("TEST_BACKEND_LOG", "1").output().unwrap();
    assert!(debug.status.success());
    let log = String::from_utf8_lossy(&debug.stderr);
    let said =
        log.lines().any(|l| l.contains("is not ggml-alloc's of whisper.cpp 1.5") && l.contains(&format!("({mismatch} does not match)")));
    assert!(said, "{name} with {tag}: no report of a mismatch in {mismatch}:\n{}", log.lines().take(40).collect::<Vec<_>>().join("\n"));
    // (the debug output asks backends their names: only `~ ` lines change)
    if let Err(e) = harness::compare(&keep(&debug.stdout), &so) {
        panic!("{name} with {tag}: the debug output changed the results: {e}");
    }
}

const TB: &[&str] = &["test_backend.c"];

/// The scheduler programs that allocate inputs through `sched_get_tallocr`.
fn check_all(alloc: fn() -> PathBuf, mismatch: &str) {
    for program in ["sched_three.c", "sched_four.c", "sched_reuse_more.c"] {
        same_as_original(program, TB, alloc(), mismatch, true);
    }
    same_as_original("sched_placement.c", &[], alloc(), mismatch, false);
}

#[test]
fn a_field_in_front_is_not_read_further() {
    check_all(field_in_front, "Buffer");
}

#[test]
fn a_count_elsewhere_is_noticed() {
    check_all(count_after_blocks, "NFreeBlocks");
}
