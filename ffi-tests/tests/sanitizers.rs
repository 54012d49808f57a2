//! Sanitizers over our library.
//!
//! **AddressSanitizer + UndefinedBehaviorSanitizer**: every C program of the
//! differential, extension and misuse suites (and the other scheduler
//! programs of sched.rs) built with gcc's `-fsanitize=address,undefined
//! -fno-omit-frame-pointer -fno-sanitize-recover=undefined` against the
//! archive the other tests link (`harness::staticlib`: the `dev-abort`
//! library through scripts/staticlib), with ggml's C (ggml.c, ggml-quants.c,
//! ggml-alloc.c) recompiled with the same flags, so that ggml's reads and
//! writes of tensors in our buffers are checked too. Every run must be
//! clean: no ASan report (invalid access, use after free, double free,
//! leak) and no UBSan report in stderr. The library's Rust code itself is
//! not instrumented (stable Rust has no sanitizers), but its memory comes
//! from libc's malloc family, which ASan intercepts: every access the C side
//! makes to it is checked, and every block it leaks is reported. The misuse
//! cases must still die by SIGABRT with the library's message, and print no
//! report before it. Programs with the test backend run in each of its slot
//! patterns (`harness::SHAPES`); those whose checks need a `supports_op`
//! that rejects (not CUDA's pattern) must pass in theirs and, in CUDA's,
//! only run clean. Cross targets (FFI_RUNNER, or a target other than the
//! host) skip: ASan under qemu is not required.
//!
//! **ThreadSanitizer** (`tsan_threaded_programs`, ignored by a plain `cargo
//! test`): run by `scripts/tsan`, which builds the library with nightly's
//! `-Zsanitizer=thread` and passes its archive in `FFI_TSAN_LIB`.

use ffi_tests::harness::{self, Flavour, SHAPES};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::SystemTime;

const ASAN_FLAGS: &[&str] = &["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"];
const TSAN_FLAGS: &[&str] = &["-fsanitize=thread", "-fno-omit-frame-pointer"];

/// Distinct exit codes, so that a report is seen even without its text.
const ASAN_EXIT: i32 = 86;
const TSAN_EXIT: i32 = 66;

/// (`fast_unwind_on_malloc=0`: the library has no frame pointers, so the
/// allocation stacks of leaks and of the blocks an access hits are unwound
/// with DWARF, through the library's frames.)
const ASAN_OPTIONS: &str = "detect_leaks=1:abort_on_error=0:halt_on_error=1:exitcode=86:fast_unwind_on_malloc=0:\
                            detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1";
const UBSAN_OPTIONS: &str = "print_stacktrace=1:halt_on_error=1:exitcode=86";

fn asan_env() -> [(&'static str, &'static str); 2] {
    [("ASAN_OPTIONS", ASAN_OPTIONS), ("UBSAN_OPTIONS", UBSAN_OPTIONS)]
}

/// What a sanitizer writes at the start of a report.
const REPORTS: &[&str] = &[
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "WARNING: AddressSanitizer",
    "runtime error:",
    "SUMMARY: AddressSanitizer",
    "SUMMARY: UndefinedBehaviorSanitizer",
    "WARNING: ThreadSanitizer",
    "SUMMARY: ThreadSanitizer",
];

/// Why this target cannot run the sanitizers, if it cannot.
fn skip_reason() -> Option<String> {
    let runner = std::env::var("FFI_RUNNER").unwrap_or_default();
    if !runner.trim().is_empty() {
        return Some(format!("FFI_RUNNER is set ({runner}): sanitizers are run on the host only, not under emulation"));
    }
    let (target, host) = (env!("FFI_TARGET"), env!("FFI_HOST"));
    if target != host {
        return Some(format!("target {target} is not the host {host}: sanitizers are run on the host only"));
    }
    None
}

macro_rules! host_only {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!("sanitizers: skipped: {why}");
            return;
        }
    };
}

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// ggml's C files compiled with `flags` (and build.rs's own flags) into
/// objects under OUT_DIR/sanitized/`kind`, and `extra` files of ffi-tests/c
/// with `flags` and `-fno-builtin`: once per test process, and only when a
/// source or our headers are newer than the object.
fn ggml_objects(kind: &str, flags: &[&str], extra: &[&str]) -> Vec<PathBuf> {
    let out = harness::out_dir();
    let dir = out.join("sanitized").join(kind);
    std::fs::create_dir_all(&dir).unwrap();
    let (common, include) = (out.join("common"), harness::include_dir());
    let headers = [include.join("ggml-backend.h"), include.join("ggml-backend-impl.h")];
    let mut jobs = Vec::new();
    let mut objects = Vec::new();
    let mut files = vec![
        (common.join("ggml.c"), vec![common.clone()], false),
        (common.join("ggml-quants.c"), vec![common.clone()], false),
        (common.join("ggml-alloc.c"), vec![include.clone(), common.clone()], false),
    ];
    files.extend(extra.iter().map(|f| (harness::c_dir().join(f), vec![], true)));
    for (src, includes, no_builtin) in files {
        let file = src.file_name().unwrap().to_string_lossy().into_owned();
        let obj = dir.join(file.replace(".c", ".o"));
        objects.push(obj.clone());
        let newest = headers.iter().map(|h| mtime(h)).chain([mtime(&src)]).max().unwrap();
        if obj.exists() && mtime(&obj) >= newest {
            continue;
        }
        let tmp = dir.join(format!("{file}.{}.tmp.o", std::process::id()));
        let mut cmd = Command::new(env!("FFI_CC"));
        cmd.args(["-c", "-O2", "-g", "-w", "-std=c11", "-D_GNU_SOURCE", "-pthread"]).args(flags);
        if no_builtin {
            cmd.arg("-fno-builtin");
        }
        for i in &includes {
            cmd.arg("-I").arg(i);
        }
        cmd.arg(&src).arg("-o").arg(&tmp);
        let child = cmd.stderr(std::process::Stdio::piped()).spawn().expect("run the C compiler");
        jobs.push((file, child, tmp, obj));
    }
    for (file, child, tmp, obj) in jobs {
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "compiling {file} with {flags:?} failed (does the C compiler have its sanitizer runtimes? gcc: libasan, libubsan, libtsan):\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::rename(&tmp, &obj).unwrap();
    }
    objects
}

fn asan_objects() -> &'static [PathBuf] {
    static OBJ: OnceLock<Vec<PathBuf>> = OnceLock::new();
    OBJ.get_or_init(|| ggml_objects("asan", ASAN_FLAGS, &[]))
}

/// `program` (with the test backend when `tb`) built with ASan and UBSan,
/// under a name of its own (the plain builds run in parallel).
fn build_asan(program: &str, tb: bool) -> PathBuf {
    let stem = Path::new(program).file_stem().unwrap().to_string_lossy().into_owned();
    let objects: Vec<String> = asan_objects().iter().map(|p| p.display().to_string()).collect();
    let mut sources = vec![program];
    if tb {
        sources.push("test_backend.c");
    }
    sources.extend(objects.iter().map(String::as_str));
    let name = format!("asan-{stem}");
    harness::build_custom(&name, &sources, Flavour::Ours, ASAN_FLAGS, None)
}

/// How a run must end, besides printing no sanitizer report.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expect {
    /// Exit code 0.
    Success,
    /// SIGABRT with the library's message (a misuse case).
    Abort,
    /// Exit 0, or SIGABRT with the library's message (ext.rs's in-place cases).
    SuccessOrAbort,
    /// Any exit or abort of the program's own (its checks do not hold in
    /// this slot pattern): the run only has to be clean (a sanitizer's
    /// report exits with its own code, never by SIGABRT here).
    Clean,
}

fn status_of(o: &Output) -> String {
    match (o.status.code(), o.status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (_, Some(s)) => format!("signal {s}"),
        _ => "unknown status".into(),
    }
}

/// Judge one run: None when it is clean and ends as expected, else a description.
fn judge(o: &Output, what: &str, expect: Expect, exit_on_report: i32) -> Option<String> {
    let stderr = String::from_utf8_lossy(&o.stderr);
    let report = REPORTS.iter().find(|m| stderr.contains(*m));
    let library_abort = o.status.signal() == Some(6) && stderr.contains("wsp_ggml_backend: wsp_ggml_backend_");
    let ended_well = match expect {
        Expect::Success => o.status.success(),
        Expect::Abort => library_abort,
        Expect::SuccessOrAbort => o.status.success() || library_abort,
        Expect::Clean => o.status.code().is_some() || o.status.signal() == Some(6),
    };
    if report.is_none() && o.status.code() != Some(exit_on_report) && ended_well {
        return None;
    }
    let head = match report {
        Some(m) => format!("sanitizer report ({m})"),
        None if o.status.code() == Some(exit_on_report) => "the sanitizer's exit code".to_string(),
        None => format!("expected {expect:?}"),
    };
    Some(format!(
        "{what}: {head}, {}\n--- stdout (tail):\n{}\n--- stderr:\n{stderr}",
        status_of(o),
        tail(&String::from_utf8_lossy(&o.stdout), 15)
    ))
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Run `exe` with each argument list in `cases` and each slot pattern in
/// `shapes` under ASan and UBSan; every run must be clean and end as
/// `expect` says. Panics listing every run that is not.
fn asan_runs(exe: &Path, cases: &[&[&str]], shapes: &[&str], expect: Expect) -> Vec<String> {
    asan_runs_env(exe, cases, shapes, expect, &asan_env())
}

/// [`asan_runs`] with the sanitizers' options in `env`.
fn asan_runs_env(exe: &Path, cases: &[&[&str]], shapes: &[&str], expect: Expect, env: &[(&str, &str)]) -> Vec<String> {
    let mut problems = Vec::new();
    for args in cases {
        for shape in shapes {
            let o = harness::run_shaped_env(exe, args, shape, env);
            let what = format!("{} {args:?} ({shape} test backend)", exe.file_name().unwrap().to_string_lossy());
            problems.extend(judge(&o, &what, expect, ASAN_EXIT));
        }
    }
    problems
}

fn assert_none(problems: Vec<String>) {
    assert!(problems.is_empty(), "{} run(s) not clean under ASan/UBSan:\n{}", problems.len(), problems.join("\n\n"));
}

/// A program with the test backend, clean and successful in every slot pattern.
fn asan_all_shapes(program: &str) {
    host_only!();
    assert_none(asan_runs(&build_asan(program, true), &[&[]], &SHAPES, Expect::Success));
}

/// A program whose checks need a rejecting `supports_op`: successful with
/// every slot set and in Metal's pattern, clean in CUDA's.
fn asan_rejecting(program: &str, cases: &[&[&str]]) {
    host_only!();
    let exe = build_asan(program, true);
    let mut problems = asan_runs(&exe, cases, &["full", "metal"], Expect::Success);
    problems.extend(asan_runs(&exe, cases, &["cuda"], Expect::Clean));
    assert_none(problems);
}

/// The cases a program lists when run without arguments.
fn list_cases(exe: &Path) -> Vec<String> {
    let o = harness::run_shaped_env(exe, &[], "full", &asan_env());
    assert!(o.status.success(), "listing the cases of {} failed: {}\n{}", exe.display(), status_of(&o), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
}

macro_rules! asan_tests {
    ($($test:ident => $file:expr),* $(,)?) => {
        $( #[test] fn $test() { asan_all_shapes($file); } )*
    };
}

// differential.rs's programs with the test backend
asan_tests! {
    asan_buffers => "buffers.c",
    asan_tensor_io => "tensor_io.c",
    asan_graph_ops => "graph_ops.c",
    asan_allocr_legacy => "allocr_legacy.c",
    asan_tensor_copy_routes => "tensor_copy_routes.c",
    asan_sched_two => "sched_two.c",
    asan_sched_three => "sched_three.c",
    asan_sched_four => "sched_four.c",
    asan_sched_measure => "sched_measure.c",
    asan_sched_rules => "sched_rules.c",
    asan_sched_reuse => "sched_reuse.c",
    asan_sched_reuse_more => "sched_reuse_more.c",
    asan_sched_pass3 => "sched_pass3.c",
    asan_sched_first_split => "sched_first_split.c",
    asan_sched_unlisted_view => "sched_unlisted_view.c",
    asan_sched_remeasure => "sched_remeasure.c",
}

// ext.rs's programs whose checks hold in every slot pattern
asan_tests! {
    asan_ext_reserve => "ext_reserve.c",
    asan_ext_abort => "ext_abort.c",
    asan_ext_compare => "ext_compare.c",
}

/// differential.rs's programs without the test backend.
#[test]
fn asan_programs_without_the_test_backend() {
    host_only!();
    let mut problems = Vec::new();
    for program in ["ours_extras.c", "sched_placement.c"] {
        problems.extend(asan_runs(&build_asan(program, false), &[&[]], &["full"], Expect::Success));
    }
    assert_none(problems);
}

/// The gpt-2-shaped client at every case of differential.rs, in every slot pattern.
#[test]
fn asan_sched_gpt2() {
    host_only!();
    assert_none(asan_runs(&build_asan("sched_gpt2.c", true), harness::GPT2_CASES, &SHAPES, Expect::Success));
}

/// sched.rs's programs: beyond the original's limits, the threaded ones,
/// and the debug listing (`WSP_GGML_SCHED_DEBUG`).
#[test]
fn asan_sched_beyond_threads_and_debug_output() {
    host_only!();
    let mut problems = Vec::new();
    for program in ["sched_beyond.c", "sched_threads.c", "threads_two.c"] {
        problems.extend(asan_runs(&build_asan(program, true), &[&[]], &["full", "cuda"], Expect::Success));
    }
    let exe = build_asan("sched_two.c", true);
    let mut cmd = harness::command(&exe);
    cmd.env("WSP_GGML_SCHED_DEBUG", "1").envs(asan_env());
    let o = cmd.output().expect("run sched_two");
    problems.extend(judge(&o, "sched_two (WSP_GGML_SCHED_DEBUG=1)", Expect::Success, ASAN_EXIT));
    assert!(String::from_utf8_lossy(&o.stderr).contains("## SPLIT #0: "), "no debug listing");
    assert_none(problems);
}

#[test]
fn asan_ext_supports() {
    asan_rejecting("ext_supports.c", &[&[]]);
}

#[test]
fn asan_ext_fits() {
    asan_rejecting("ext_fits.c", &[&[]]);
}

#[test]
fn asan_ext_stats() {
    asan_rejecting("ext_stats.c", &[&[]]);
}

#[test]
fn asan_ext_callback() {
    asan_rejecting("ext_callback.c", &[&[]]);
}

/// ext.rs's in-place cases: computed, or refused with the library's message.
#[test]
fn asan_ext_inplace() {
    host_only!();
    let exe = build_asan("ext_inplace.c", true);
    let cases = list_cases(&exe);
    assert_eq!(cases.len(), 2, "{cases:?}");
    let cases = one_arg_each(&cases);
    let cases: Vec<&[&str]> = cases.iter().map(|a| &a[..]).collect();
    assert_none(asan_runs(&exe, &cases, &SHAPES, Expect::SuccessOrAbort));
}

/// ext.rs's in-place chains, every case.
#[test]
fn asan_ext_chain() {
    host_only!();
    let exe = build_asan("ext_chain.c", true);
    let cases = list_cases(&exe);
    assert_eq!(cases.len(), 7, "{cases:?}");
    let cases = one_arg_each(&cases);
    let cases: Vec<&[&str]> = cases.iter().map(|a| &a[..]).collect();
    let mut problems = asan_runs(&exe, &cases, &["full", "metal"], Expect::Success);
    problems.extend(asan_runs(&exe, &cases, &["cuda"], Expect::Clean));
    assert_none(problems);
}

/// Argument lists of one case each.
fn one_arg_each(cases: &[String]) -> Vec<[&str; 1]> {
    cases.iter().map(|c| [c.as_str()]).collect()
}

/// Every misuse case of sched_misuse.c and ext_misuse.c (sched.rs, ext.rs):
/// SIGABRT with the library's message, and no sanitizer report before it,
/// with every slot set; in CUDA's pattern too, where a case about
/// rejections has nothing to reject: the program then says "NOT ABORTED"
/// and exits from the middle of its case without freeing anything, so
/// there the run must be clean but leaks are not checked.
#[test]
fn asan_misuse_cases_abort_cleanly() {
    host_only!();
    let mut problems = Vec::new();
    for program in ["sched_misuse.c", "ext_misuse.c"] {
        let exe = build_asan(program, true);
        let cases = list_cases(&exe);
        assert!(cases.len() >= 13, "{program}: {cases:?}");
        let cases = one_arg_each(&cases);
        let cases: Vec<&[&str]> = cases.iter().map(|a| &a[..]).collect();
        problems.extend(asan_runs(&exe, &cases, &["full"], Expect::Abort));
        let no_leaks = format!("{ASAN_OPTIONS}:detect_leaks=0");
        let env = [("ASAN_OPTIONS", no_leaks.as_str()), ("UBSAN_OPTIONS", UBSAN_OPTIONS)];
        problems.extend(asan_runs_env(&exe, &cases, &["cuda"], Expect::Clean, &env));
    }
    assert_none(problems);
}

/// The checks themselves: in a program built like the others, a heap
/// overflow, a leak and a signed overflow are reported (and judged not
/// clean), and so are a write past the end of a buffer our library
/// allocated and a CPU backend never freed: a clean run means the
/// sanitizers were there, and saw the library's memory.
#[test]
fn asan_reports_are_seen() {
    host_only!();
    let dir = harness::out_dir().join("sanitized");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("asan_control.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\n#include <limits.h>\n#include \"ggml-backend.h\"\n\
         int main(int argc, char ** argv) {\n\
         \x20   (void) argv;\n\
         \x20   char * volatile p = malloc(8);\n\
         \x20   volatile int n = 8;\n\
         \x20   if (argc == 2) { p[n] = 1; }\n\
         \x20   if (argc == 3) { p = NULL; }\n\
         \x20   if (argc == 4) { volatile int i = INT_MAX; i = i + argc; printf(\"%d\\n\", i); }\n\
         \x20   if (argc >= 5) {\n\
         \x20       wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();\n\
         \x20       wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_buffer(cpu, 64);\n\
         \x20       char * volatile base = wsp_ggml_backend_buffer_get_base(buf);\n\
         \x20       volatile size_t end = wsp_ggml_backend_buffer_get_size(buf);\n\
         \x20       if (argc == 5) { base[end] = 1; }\n\
         \x20       wsp_ggml_backend_buffer_free(buf);\n\
         \x20       if (argc == 5) { wsp_ggml_backend_free(cpu); }\n\
         \x20   }\n\
         \x20   free(p);\n\
         \x20   return 0;\n}\n",
    )
    .unwrap();
    let exe = build_asan(src.to_str().unwrap(), false);
    let clean = asan_runs(&exe, &[&[]], &["full"], Expect::Success);
    assert!(clean.is_empty(), "{clean:?}");
    for (args, expect) in [
        (&["a"][..], "heap-buffer-overflow"),
        (&["a", "b"], "LeakSanitizer"),
        (&["a", "b", "c"], "signed integer overflow"),
        (&["a", "b", "c", "d"], "heap-buffer-overflow"),
        (&["a", "b", "c", "d", "e"], "cpu_init"),
    ] {
        let problems = asan_runs(&exe, &[args], &["full"], Expect::Success);
        assert!(problems.len() == 1 && problems[0].contains(expect), "{args:?}: expected a report of {expect}, got {problems:?}");
    }
}

fn tsan_objects() -> &'static [PathBuf] {
    static OBJ: OnceLock<Vec<PathBuf>> = OnceLock::new();
    OBJ.get_or_init(|| ggml_objects("tsan", TSAN_FLAGS, &["tsan_mem.c"]))
}

/// ThreadSanitizer over the threaded programs (sched_threads.c: four
/// threads with two schedulers each; threads_two.c: two threads as an
/// application uses them): the library built by scripts/tsan with nightly's
/// `-Zsanitizer=thread` (its archive in FFI_TSAN_LIB), ggml's C and the
/// programs with gcc's `-fsanitize=thread`. No report may remain once
/// ggml.c's own are suppressed (`c/tsan-ggml.supp`). A control program
/// that breaks the C contract (two threads set one CPU backend's thread
/// count) must be reported, in the library's Rust code: the library is
/// instrumented and TSan is there.
#[test]
#[ignore = "needs the library built with -Zsanitizer=thread (nightly): run scripts/tsan"]
fn tsan_threaded_programs() {
    host_only!();
    let lib = PathBuf::from(std::env::var("FFI_TSAN_LIB").expect("FFI_TSAN_LIB: the library built by scripts/tsan"));
    let objects: Vec<String> = tsan_objects().iter().map(|p| p.display().to_string()).collect();
    let supp = harness::c_dir().join("tsan-ggml.supp");
    let options = format!("halt_on_error=0:exitcode={TSAN_EXIT}:second_deadlock_stack=1:history_size=4:suppressions={}", supp.display());
    let mut problems = Vec::new();
    for program in ["sched_threads.c", "threads_two.c"] {
        let mut sources = vec![program, "test_backend.c"];
        sources.extend(objects.iter().map(String::as_str));
        let name = format!("tsan-{}", program.trim_end_matches(".c"));
        let exe = harness::build_custom(&name, &sources, Flavour::Ours, TSAN_FLAGS, Some(&[&lib]));
        for shape in ["full", "cuda"] {
            let o = harness::run_shaped_env(&exe, &[], shape, &[("TSAN_OPTIONS", &options)]);
            let what = format!("{name} ({shape} test backend)");
            let stderr = String::from_utf8_lossy(&o.stderr);
            if let Some(line) = stderr.lines().find(|l| l.contains("suppressions")) {
                eprintln!("{what}: {line}");
            }
            match judge(&o, &what, Expect::Success, TSAN_EXIT) {
                Some(p) => problems.push(p),
                None => assert!(String::from_utf8_lossy(&o.stdout).lines().any(|l| l == "ok"), "{what}: no 'ok'"),
            }
        }
    }
    assert!(problems.is_empty(), "{} run(s) not clean under TSan:\n{}", problems.len(), problems.join("\n\n"));

    let dir = harness::out_dir().join("sanitized");
    let src = dir.join("tsan_control.c");
    std::fs::write(&src, TSAN_CONTROL).unwrap();
    let mut sources = vec![src.to_str().unwrap()];
    sources.extend(objects.iter().map(String::as_str));
    let exe = harness::build_custom("tsan-control", &sources, Flavour::Ours, TSAN_FLAGS, Some(&[&lib]));
    let o = harness::run_shaped_env(&exe, &[], "full", &[("TSAN_OPTIONS", &options)]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(TSAN_EXIT) && stderr.contains("WARNING: ThreadSanitizer: data race") && stderr.contains("src/cpu.rs"),
        "the control race in the library was not reported ({}):\n{stderr}",
        status_of(&o)
    );
}

/// Two threads set the thread count of one CPU backend (a backend is used
/// by one thread at a time: the C contract), a race in src/cpu.rs.
const TSAN_CONTROL: &str = r#"#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "ggml-backend.h"
static wsp_ggml_backend_t backend;
static void * worker(void * arg) {
    for (int i = 0; i < 100; i++) {
        wsp_ggml_backend_cpu_set_n_threads(backend, 1 + (int) (intptr_t) arg);
    }
    return NULL;
}
int main(void) {
    backend = wsp_ggml_backend_cpu_init();
    pthread_t th[2];
    for (intptr_t i = 0; i < 2; i++) {
        pthread_create(&th[i], NULL, worker, (void *) i);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
    }
    wsp_ggml_backend_free(backend);
    printf("ok\n");
    return 0;
}
"#;
