//! Randomized differential testing of the scheduler.
//!
//! `ffi-tests/c/fuzz_sched.c` turns a seed into a program: backends, leafs
//! in every kind of buffer, random graphs and a sequence of at least 8
//! computes with mutations between them. It is built with the original
//! `ggml-backend.c` ("orig") and with our library ("ours"); `--mode ref`
//! runs the same program on the CPU backend alone, without the scheduler.
//!
//! The contract checked for every seed:
//! - orig and ours succeed with identical output: pass;
//! - otherwise the reference decides: ours must succeed with the reference's
//!   output whenever orig succeeds with it (user assignments and supports_op
//!   rejections, which the original ignores, may change where nodes run, never
//!   the bytes); where orig fails (a crash, an assert at one of its limits) or
//!   prints other bytes than the reference, ours may also abort, but only with
//!   a message of ours (`wsp_ggml_backend: ...`), never with a signal; ggml's asserts
//!   are accepted only inside the program's own `tallocr_alloc` calls (a
//!   compute buffer too small for what the program allocates in it).
//!
//! - orig and ours both succeed with identical output and no documented
//!   difference applies (case a): every backend gets the same
//!   `graph_compute` calls, with the same nodes, in the same order (the
//!   split list as the backends see it: the "~ trace" lines);
//! - and always: ours never gives a test backend a node its `supports_op`
//!   rejects (the program prints the test backends' count after every
//!   compute; rejections also change between computes, `M_REJECT`).
//!
//! Tests: a fixed list of seeds (`fuzz_fixed_seeds*`), a few seeds under
//! valgrind memcheck (`fuzz_memcheck`), and `fuzz_campaign` (ignored; what
//! `scripts/fuzz` runs) driven by environment variables:
//! `FUZZ_MINUTES` (fresh seeds for that long), `FUZZ_SEED` (one seed, with
//! details), `FUZZ_SEEDS` (comma-separated list), `FUZZ_NODES_MAX` (fixed
//! node budget; by default a mix), `FUZZ_JOBS` (parallel runs).

use ffi_tests::harness::{self, Flavour};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

struct Bins {
    ours: PathBuf,
    orig: PathBuf,
}

fn bins() -> &'static Bins {
    static B: OnceLock<Bins> = OnceLock::new();
    B.get_or_init(|| {
        let src = &["fuzz_sched.c", "test_backend.c"];
        Bins { ours: harness::build("fuzz_sched", src, Flavour::Ours), orig: harness::build("fuzz_sched", src, Flavour::Original) }
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Status {
    Ok,
    /// SIGABRT; the first stderr line that explains it
    Abort(String),
    /// another signal (SIGSEGV, SIGFPE, ...)
    Signal(i32, String),
    Exit(i32, String),
    Timeout,
}

struct Run {
    status: Status,
    stdout: String,
    stderr: String,
}

/// The line of stderr that says why a program stopped: ours' message, a ggml
/// assert, a CHECK of the test program, or the last line.
fn reason(stderr: &str) -> String {
    // (the original prints its size on every sched_new)
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("wsp_ggml_backend_sched size:")).collect();
    for key in
        ["wsp_ggml_backend: ", "GGML_ASSERT", "CHECK failed", "test backend check failed", "Assertion", "not enough space", "panicked"]
    {
        if let Some(l) = lines.iter().find(|l| l.contains(key)) {
            return l.trim().to_string();
        }
    }
    lines.last().map_or(String::new(), |l| l.trim().to_string())
}

/// A PATH whose first entry holds a `gdb` that does nothing: ggml's failed
/// asserts run `gdb --batch -ex bt -p <pid>` before aborting, which takes
/// seconds (or hangs) and adds nothing here.
fn path_without_gdb() -> &'static str {
    static P: OnceLock<String> = OnceLock::new();
    P.get_or_init(|| {
        let dir = harness::out_dir().join("fuzz-no-gdb");
        std::fs::create_dir_all(&dir).unwrap();
        let gdb = dir.join("gdb");
        std::fs::write(&gdb, "#!/bin/sh\nexit 0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&gdb, std::fs::Permissions::from_mode(0o755)).unwrap();
        format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())
    })
}

fn run(exe: &Path, seed: u64, nodes_max: u32, mode: &str, timeout: Duration) -> Run {
    let mut child = Command::new(exe)
        .env("PATH", path_without_gdb())
        .arg(seed.to_string())
        .args(["--nodes-max", &nodes_max.to_string(), "--mode", mode])
        .env_remove("TEST_BACKEND_LOG")
        .env_remove("WSP_GGML_SCHED_DEBUG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let te = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let mut timed_out = false;
    let st = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            timed_out = true;
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = String::from_utf8_lossy(&to.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&te.join().unwrap()).into_owned();
    let status = if timed_out {
        Status::Timeout
    } else {
        match (st.code(), st.signal()) {
            (Some(0), _) => Status::Ok,
            (Some(c), _) => Status::Exit(c, reason(&stderr)),
            (_, Some(6)) => Status::Abort(reason(&stderr)),
            (_, Some(s)) => Status::Signal(s, reason(&stderr)),
            _ => Status::Exit(-1, reason(&stderr)),
        }
    };
    Run { status, stdout, stderr }
}

fn describe(s: &Status) -> String {
    match s {
        Status::Ok => "ok".into(),
        Status::Abort(m) => format!("SIGABRT: {m}"),
        Status::Signal(n, m) => format!("signal {n}{}: {m}", signame(*n)),
        Status::Exit(c, m) => format!("exit {c}: {m}"),
        Status::Timeout => "timeout".into(),
    }
}

fn signame(n: i32) -> &'static str {
    match n {
        4 => " (SIGILL)",
        7 => " (SIGBUS)",
        8 => " (SIGFPE)",
        11 => " (SIGSEGV)",
        _ => "",
    }
}

/// A message with numbers and quoted names blanked, to group failures.
fn normalize(m: &str) -> String {
    let mut s = String::new();
    let mut in_quote = false;
    let mut last_digit = false;
    for c in m.chars() {
        if c == '\'' {
            in_quote = !in_quote;
            if in_quote {
                s.push_str("'_");
            } else {
                s.push('\'');
            }
            continue;
        }
        if in_quote {
            continue;
        }
        if c.is_ascii_digit() {
            if !last_digit {
                s.push('N');
            }
            last_digit = true;
            continue;
        }
        last_digit = false;
        s.push(c);
    }
    // drop the "file.c:line: " prefix of asserts
    s.chars().take(160).collect()
}

#[derive(Debug)]
struct Outcome {
    seed: u64,
    nodes_max: u32,
    /// "a" or "b" (see fuzz_sched.c)
    case: String,
    computes: usize,
    graphs: usize,
    /// None: pass (with a note); Some((kind, detail)): failure
    fail: Option<(String, String)>,
    note: String,
    detail: String,
}

impl Outcome {
    fn repro(&self) -> String {
        format!("scripts/fuzz --seed {} --nodes-max {}", self.seed, self.nodes_max)
    }
}

fn counts(stdout: &str) -> (usize, usize) {
    for l in stdout.lines() {
        if let Some(rest) = l.strip_prefix("done ") {
            let get = |k: &str| rest.split(' ').find_map(|kv| kv.strip_prefix(k)).and_then(|v| v.parse().ok()).unwrap_or(0);
            return (get("computes="), get("graphs="));
        }
    }
    let computes = stdout.lines().filter(|l| l.starts_with("~ c") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)).count();
    (computes, 0)
}

const TIMEOUT: Duration = Duration::from_secs(60);

fn check_seed(seed: u64, nodes_max: u32) -> Outcome {
    let b = bins();
    let orig = run(&b.orig, seed, nodes_max, "sched", TIMEOUT);
    let ours = run(&b.ours, seed, nodes_max, "sched", TIMEOUT);
    let case = ours.stdout.lines().chain(orig.stdout.lines()).find_map(|l| l.strip_prefix("~ case ")).unwrap_or("?").to_string();
    let (mut computes, mut graphs) = counts(&ours.stdout);
    let mut o = Outcome { seed, nodes_max, case, computes, graphs, fail: None, note: String::new(), detail: String::new() };
    let head = |r: &Run| -> String { r.stdout.lines().find(|l| l.starts_with("~ plan")).unwrap_or("").to_string() };
    let tail = |r: &Run| -> String {
        let v: Vec<&str> = r.stderr.lines().filter(|l| !l.starts_with("wsp_ggml_backend_sched size:")).collect();
        v[v.len().saturating_sub(6)..].iter().map(|l| format!("\n      | {l}")).collect()
    };
    o.detail = format!(
        "{}\n  orig: {}{}\n  ours: {}{}\n  orig: {} {seed} --nodes-max {nodes_max}    (--mode ref: the CPU-only reference; FUZZ_DUMP=1: graphs on stderr)\n  ours: {} {seed} --nodes-max {nodes_max}",
        head(&ours),
        describe(&orig.status),
        if orig.status == Status::Ok { String::new() } else { tail(&orig) },
        describe(&ours.status),
        if ours.status == Status::Ok { String::new() } else { tail(&ours) },
        b.orig.display(),
        b.ours.display()
    );

    if let Status::Signal(n, m) = &ours.status {
        o.fail = Some((format!("ours-signal{}", signame(*n)), m.clone()));
        return o;
    }
    if ours.status == Status::Timeout {
        o.fail = Some(("ours-timeout".into(), String::new()));
        return o;
    }
    // ours never gives a backend a node its supports_op rejects (it aborts
    // where memory pins such a node; the original ignores supports_op)
    let rejected = ours.stdout.lines().filter_map(|l| l.strip_prefix("~ rejected-computed ")).filter_map(|v| v.parse::<i64>().ok()).max();
    if let Some(n) = rejected.filter(|&n| n > 0) {
        o.fail = Some(("ours-computed-rejected".into(), format!("test backends computed {n} nodes their supports_op rejects")));
        return o;
    }
    if orig.status == Status::Ok && ours.status == Status::Ok && harness::compare(&ours.stdout, &orig.stdout).is_ok() {
        o.note = "same as orig".into();
        // and the same splits: every backend got the same graph_compute
        // calls with the same nodes, in the same order (case b places
        // nodes differently on purpose)
        if o.case == "a" {
            if let Err(e) = same_traces(&ours.stdout, &orig.stdout) {
                o.fail = Some(("ours-splits-differ".into(), e));
            }
        }
        return o;
    }
    // the reference decides
    let reff = run(&b.orig, seed, nodes_max, "ref", TIMEOUT);
    if reff.status != Status::Ok {
        o.fail = Some(("ref-failed (generator)".into(), describe(&reff.status)));
        return o;
    }
    if computes == 0 {
        (computes, graphs) = counts(&reff.stdout);
        o.computes = computes;
        o.graphs = graphs;
    }
    let orig_good = orig.status == Status::Ok && harness::compare(&orig.stdout, &reff.stdout).is_ok();
    let orig_note = match &orig.status {
        Status::Ok if orig_good => "orig ok".to_string(),
        Status::Ok => "orig differs from ref".to_string(),
        s => format!("orig {}", describe(s)),
    };
    if ours.status == Status::Ok {
        match harness::compare(&ours.stdout, &reff.stdout) {
            Ok(_) => {
                o.note = format!("ours = ref; {orig_note}");
                if orig.status == Status::Ok && !orig_good {
                    // the original computed other bytes than the CPU alone: a
                    // generator assumption broken, or a bug of the original
                    o.fail = Some((
                        "orig-differs-from-ref (generator?)".into(),
                        harness::compare(&orig.stdout, &reff.stdout).err().unwrap_or_default(),
                    ));
                }
            }
            Err(e) => {
                let kind = if orig_good { "ours-wrong-output" } else { "ours-wrong-output (orig failed)" };
                o.fail = Some((kind.into(), format!("vs ref: {e}; {orig_note}")));
            }
        }
        return o;
    }
    // ours stopped
    let msg = match &ours.status {
        Status::Abort(m) | Status::Exit(_, m) => m.clone(),
        _ => unreachable!(),
    };
    if orig_good {
        let documented = o.case == "b" && msg.contains("does not support it") || msg.contains("no backend of the scheduler supports");
        let in_user = ours.stderr.lines().any(|l| l.starts_with("fuzz: stopped inside the program's own call: "));
        let kind = if documented {
            "ours-abort-unsupported (documented)"
        } else if in_user {
            "ours-abort (in the program's own tallocr_alloc: a compute buffer smaller than the original's)"
        } else {
            "ours-abort"
        };
        o.fail = Some((kind.into(), format!("{} (orig ok)", describe(&ours.status))));
        return o;
    }
    let ours_clear = matches!(ours.status, Status::Abort(_)) && ours.stderr.lines().any(|l| l.starts_with("wsp_ggml_backend: "));
    // a ggml assert inside one of the program's own tallocr_alloc calls: the
    // program put more in a compute buffer than it holds (the original
    // stopped too, so the program is at fault)
    let user_call = ours.stderr.lines().find_map(|l| l.strip_prefix("fuzz: stopped inside the program's own call: "));
    if ours_clear {
        o.note = format!("both stop; ours: {msg}; {orig_note}");
    } else if let Some(call) = user_call {
        o.note = format!("both stop; ours in the program's {call}: {msg}");
    } else {
        o.fail = Some(("ours-unclear-stop".into(), format!("{}; {orig_note}", describe(&ours.status))));
    }
    o
}

/// The "~ trace" lines (fuzz_sched.c: the graph_compute calls of each
/// compute, backend, node count and nodes' hash) of two runs, compared.
fn same_traces(ours: &str, orig: &str) -> Result<(), String> {
    let traces = |s: &str| -> Vec<String> { s.lines().filter(|l| l.starts_with("~ trace ")).map(String::from).collect() };
    let (a, b) = (traces(ours), traces(orig));
    if a.len() != b.len() {
        return Err(format!("trace count differs: ours {} vs original {}", a.len(), b.len()));
    }
    match a.iter().zip(&b).find(|(x, y)| x != y) {
        Some((x, y)) => Err(format!("graph_compute calls differ: ours {x:?} vs original {y:?}")),
        None => Ok(()),
    }
}

fn jobs() -> usize {
    std::env::var("FUZZ_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// Run check_seed over the seeds `gen(0)`, `gen(1)`, ... (until it returns
/// None or the deadline passes) on `jobs` threads; `report` sees each outcome.
fn run_gen(
    gen: &(dyn Fn(usize) -> Option<(u64, u32)> + Sync),
    deadline: Option<Instant>,
    jobs: usize,
    report: &(dyn Fn(&Outcome) + Sync),
) -> Vec<Outcome> {
    bins();
    let next = AtomicUsize::new(0);
    let out = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some((seed, n)) = gen(i) else { break };
                let o = check_seed(seed, n);
                report(&o);
                out.lock().unwrap().push(o);
            });
        }
    });
    let mut v = out.into_inner().unwrap();
    v.sort_by_key(|o| (o.seed, o.nodes_max));
    v
}

fn run_seeds(seeds: &[(u64, u32)], jobs: usize, report: &(dyn Fn(&Outcome) + Sync)) -> Vec<Outcome> {
    run_gen(&|i| seeds.get(i).copied(), None, jobs, report)
}

fn failure_line(o: &Outcome) -> String {
    let (kind, detail) = o.fail.as_ref().unwrap();
    format!("FAIL [{kind}] {}  # case {}: {}", o.repro(), o.case, detail)
}

fn summary(v: &[Outcome], elapsed: Duration) -> String {
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut notes: BTreeMap<String, usize> = BTreeMap::new();
    for o in v {
        match &o.fail {
            Some((k, d)) => *by_kind.entry(format!("{k}: {}", normalize(d))).or_default() += 1,
            None => *notes.entry(normalize(&o.note)).or_default() += 1,
        }
    }
    let mut s = format!(
        "fuzz: seeds={} graphs={} computes={} failures={} ({:.1}s)",
        v.len(),
        v.iter().map(|o| o.graphs).sum::<usize>(),
        v.iter().map(|o| o.computes).sum::<usize>(),
        v.iter().filter(|o| o.fail.is_some()).count(),
        elapsed.as_secs_f64()
    );
    for (k, n) in &by_kind {
        s.push_str(&format!("\n  failures {n:5}  {k}"));
    }
    for (k, n) in &notes {
        s.push_str(&format!("\n  passes   {n:5}  {k}"));
    }
    s
}

fn check_all(seeds: &[(u64, u32)]) {
    let t = Instant::now();
    let v = run_seeds(seeds, jobs(), &|_| {});
    let fails: Vec<String> =
        v.iter().filter(|o| o.fail.is_some()).map(|o| format!("{}\n    {}", failure_line(o), o.detail.replace('\n', "\n    "))).collect();
    eprintln!("{}", summary(&v, t.elapsed()));
    assert!(fails.is_empty(), "{} of {} seeds fail:\n{}", fails.len(), v.len(), fails.join("\n"));
}

// The fixed seeds run in CI (about 30 s in all on 2 cores, debug profile):
// many small programs, fewer medium and large ones.

#[test]
fn fuzz_fixed_seeds_small() {
    let seeds: Vec<(u64, u32)> = (1..=1000).map(|s| (s, 60)).collect();
    check_all(&seeds);
}

#[test]
fn fuzz_fixed_seeds_medium() {
    let seeds: Vec<(u64, u32)> = (1000..=1299).map(|s| (s, 400)).collect();
    check_all(&seeds);
}

#[test]
fn fuzz_fixed_seeds_large() {
    let seeds: Vec<(u64, u32)> = (2000..=2099).map(|s| (s, 3000)).collect();
    check_all(&seeds);
}

/// Seeds that found divergences once (scripts/fuzz runs), each fixed since:
/// kept so that they stay fixed.
#[test]
fn fuzz_regressions() {
    let seeds: &[(u64, u32)] = &[
        (37681722826, 60),    // caller's tallocr input unused by the graph: fit check must count it
        (254257029252, 60),   // buffer of exactly the measured size: ggml-alloc's choices differ
        (491847607937, 60),   // a grown buffer starts without the caller's inputs: measure again
        (491847606869, 60),   // host-memory source freed by ggml-alloc through a NULL allocator
        (491847607085, 60),   // split input in host memory after a supports_op move
        (959583873381, 400),  // reuse after a rebuild with another op or layout: fit re-checked
        (959583870661, 400),  // view placed by its consumer, its memory's owner elsewhere
        (648191378538, 60),   // measure: a node placed by its consumer's rejecting backend, an input without memory yet
        (588818986053, 60),   // measure: an input copy of a view whose memory is allocated later in the split
        (611999249250, 60),   // measure: a cpy into an input that pass 3 placed on a backend rejecting CPY
        (599558631070, 60),   // a grown buffer needs more (no in place in the caller's inputs): grow twice
        (377424458471, 60),   // measure again: the size counts the splits placed since the last measure
        (379112842508, 60),   // a node its consumer placed on a backend rejecting it, over host memory: it moves
        (6027517613, 60),     // splits: the first split empty (a cpy into a cache first, on another backend)
        (6027517564, 400),    // splits: the same, in a larger graph
        (287272692820, 3000), // splits: every node with a view source: the last first split's backend
        (287272694549, 60),   // splits: the same, with a node computed after the views
    ];
    check_all(seeds);
}

/// Programs of ours under valgrind memcheck: no invalid access, no leak.
/// Seeds whose program stops (by design: see check_seed) are skipped; at
/// least 10 run.
#[test]
fn fuzz_memcheck() {
    let ok = Command::new("valgrind").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "valgrind is not installed: run ./scripts/test (it installs it) or apt-get install valgrind");
    let exe = &bins().ours;
    let candidates: Vec<(u64, u32)> = (1..=40).map(|s| (s, 30)).chain((1000..=1010).map(|s| (s, 400))).collect();
    let (mut fails, mut small, mut medium) = (Vec::new(), 0, 0);
    for (seed, n) in candidates {
        if (n == 30 && small >= 10) || (n == 400 && medium >= 2) {
            continue;
        }
        if run(exe, seed, n, "sched", TIMEOUT).status != Status::Ok {
            continue;
        }
        let o = Command::new("valgrind")
            .args(["-q", "--error-exitcode=99", "--leak-check=full", "--show-leak-kinds=definite,indirect"])
            .args(["--errors-for-leak-kinds=definite,indirect"])
            .arg(exe)
            .args([&seed.to_string(), "--nodes-max", &n.to_string()])
            .env("PATH", path_without_gdb())
            .env_remove("TEST_BACKEND_LOG")
            .output()
            .expect("run valgrind");
        if !o.status.success() {
            fails.push(format!(
                "seed {seed} (exit {:?}, signal {:?}): reproduce: valgrind {} {seed} --nodes-max {n}\n{}",
                o.status.code(),
                o.status.signal(),
                exe.display(),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        if n == 30 {
            small += 1;
        } else {
            medium += 1;
        }
    }
    assert!(fails.is_empty(), "memcheck reports errors:\n{}", fails.join("\n"));
    assert!(small >= 10 && medium >= 1, "too few seeds ran under memcheck ({small} small, {medium} medium)");
}

fn env_u64(k: &str) -> Option<u64> {
    std::env::var(k).ok().filter(|v| !v.is_empty()).map(|v| v.parse().unwrap_or_else(|_| panic!("{k}={v}: not a number")))
}

/// What `scripts/fuzz` runs (see the module comment for the variables).
#[test]
#[ignore]
fn fuzz_campaign() {
    let fixed_n = env_u64("FUZZ_NODES_MAX").map(|n| n as u32);
    let jobs = jobs();
    if let Some(seed) = env_u64("FUZZ_SEED") {
        let o = check_seed(seed, fixed_n.unwrap_or(60));
        println!("{}", o.detail);
        match &o.fail {
            None => println!("PASS {}  # case {}: {}", o.repro(), o.case, o.note),
            Some(_) => println!("{}", failure_line(&o)),
        }
        println!("{}", summary(std::slice::from_ref(&o), Duration::ZERO));
        return;
    }
    let t = Instant::now();
    let print = |o: &Outcome| {
        if o.fail.is_some() {
            println!("{}", failure_line(o));
        }
    };
    let v = if let Ok(list) = std::env::var("FUZZ_SEEDS") {
        let seeds: Vec<(u64, u32)> = list
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| (s.trim().parse().expect("FUZZ_SEEDS"), fixed_n.unwrap_or(60)))
            .collect();
        run_seeds(&seeds, jobs, &print)
    } else {
        let minutes = std::env::var("FUZZ_MINUTES").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(1.0);
        let deadline = t + Duration::from_secs_f64(minutes * 60.0);
        let base = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000_000_000;
        println!("fuzz: fresh seeds from {base} for {minutes} min on {jobs} jobs");
        // node budgets: mostly small programs, some medium, a few large
        let gen = |i: usize| {
            let seed = base + i as u64;
            Some((
                seed,
                fixed_n.unwrap_or(match seed % 20 {
                    0 => 3000,
                    1..=4 => 400,
                    _ => 60,
                }),
            ))
        };
        run_gen(&gen, Some(deadline), jobs, &print)
    };
    println!("{}", summary(&v, t.elapsed()));
}
