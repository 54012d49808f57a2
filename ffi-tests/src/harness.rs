//! Builds the C test programs twice, once with the original `ggml-backend.c`
//! and its headers, once with our library and generated headers, and compares
//! what they print.
//!
//! Output convention of the C programs: every stdout line must be identical,
//! except lines starting with `~le ` (`~le <key...> <integer>`: ours must be
//! less than or equal to the original's, e.g. number of copies) and lines
//! starting with `~ ` (informational, not compared).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Our Rust library and generated headers.
    Ours,
    /// The renamed original `ggml-backend.c` and its headers.
    Original,
}

impl Flavour {
    fn tag(self) -> &'static str {
        match self {
            Flavour::Ours => "ours",
            Flavour::Original => "orig",
        }
    }
}

pub fn out_dir() -> PathBuf {
    PathBuf::from(env!("FFI_OUT_DIR"))
}

pub fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("c")
}

pub fn include_dir() -> PathBuf {
    crate::headers::workspace_root().join("include")
}

/// The library as users build it, in a target folder of its own (so that
/// it never waits on the test build's lock): `cargo build -p
/// wsp_ggml_backend --profile dev-abort`, which aborts on panic like the
/// release profile, so the library is the `no_std` one users link (the test
/// build's copy has std and unwinds: see src/platform.rs), with debug
/// assertions on (they caught misaligned tensors on armv7). For the target
/// under test. Built once per test process; returns its folder.
pub fn library_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| build_library("ffi-lib", &[])).clone()
}

/// `cargo build -p wsp_ggml_backend --profile dev-abort` with `features`,
/// for the target under test, in `target/<folder>`; returns the folder of
/// the libraries.
fn build_library(folder: &str, features: &[&str]) -> PathBuf {
    let root = crate::headers::workspace_root();
    let target_dir = root.join("target").join(folder);
    let target = env!("FFI_TARGET");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet", "-p", "wsp_ggml_backend", "--profile", "dev-abort", "--target", target]);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    let o = cmd.arg("--target-dir").arg(&target_dir).current_dir(&root).env_remove("CARGO_TARGET_DIR").output().expect("run cargo");
    assert!(o.status.success(), "building the library {features:?} failed:\n{}", String::from_utf8_lossy(&o.stderr));
    target_dir.join(target).join("dev-abort")
}

/// The static library cargo built (see [`library_dir`]): Rust's core,
/// alloc and compiler-builtins still global in it.
pub fn raw_staticlib() -> PathBuf {
    library_dir().join("libwsp_ggml_backend.a")
}

/// The static library users link: the one of [`library_dir`], passed
/// through `scripts/staticlib` (prelinked, every symbol but the API local).
/// Made once per test process, next to the C builds.
pub fn staticlib() -> PathBuf {
    static SHIPPED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SHIPPED.get_or_init(|| ship(&raw_staticlib(), "dist")).clone()
}

/// `raw` passed through `scripts/staticlib` into `<out_dir>/<folder>`.
fn ship(raw: &Path, folder: &str) -> PathBuf {
    let out = out_dir().join(folder).join("libwsp_ggml_backend.a");
    let o = Command::new(crate::headers::workspace_root().join("scripts/staticlib"))
        // (debug sections kept: sanitizer and valgrind reports name lines)
        .args(["--keep-debug", "--target", env!("FFI_TARGET"), "--from"])
        .arg(raw)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run scripts/staticlib");
    assert!(o.status.success(), "scripts/staticlib failed:\n{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The static library users link (as [`staticlib`]), built with the
/// crate's `feature` on (e.g. `logcat-on-host`), in a target folder of its
/// own. Made once per feature and test process.
pub fn feature_staticlib(feature: &str) -> PathBuf {
    static MADE: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = made.iter().find(|(f, _)| f == feature) {
        return p.clone();
    }
    let raw = build_library(&format!("ffi-lib-{feature}"), &[feature]).join("libwsp_ggml_backend.a");
    let out = ship(&raw, &format!("dist-{feature}"));
    made.push((feature.to_string(), out.clone()));
    out
}

/// The target's binutils program `name` (FFI_TOOL_PREFIX: e.g.
/// `aarch64-linux-gnu-` when testing a cross build; empty on the host).
pub fn binutil(name: &str) -> String {
    format!("{}{name}", env!("FFI_TOOL_PREFIX"))
}

/// Symbols an object or archive defines as global or weak (readelf, which,
/// unlike nm with binutils' LLVM plugin, never chokes on embedded bitcode).
pub fn global_symbols(path: &Path) -> Vec<String> {
    let o = Command::new(binutil("readelf")).arg("-sW").arg(path).output().expect("run readelf (binutils)");
    assert!(o.status.success(), "readelf failed: {}", String::from_utf8_lossy(&o.stderr));
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && (f[4] == "GLOBAL" || f[4] == "WEAK") && f[6] != "UND").then(|| f[7].to_string())
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The shared library, built with [`library_dir`].
pub fn cdylib() -> PathBuf {
    library_dir().join("libwsp_ggml_backend.so")
}

/// The system libraries of the static link line of docs/build-cc.md: ggml's (libm,
/// libpthread). Our static library needs only libc, which the compiler adds
/// (no unwinder, so no `-lgcc_s`; tests in staticlib.rs).
pub const NATIVE_STATIC_LIBS: &[&str] = &["-lm", "-lpthread"];

/// Link flags for every test program, from FFI_LDFLAGS at test time (e.g.
/// the i686 loader and rpath of the cross toolchain, so that 32-bit
/// programs run natively on an x86_64 host without i386 system libraries).
pub fn extra_ldflags() -> Vec<String> {
    std::env::var("FFI_LDFLAGS").unwrap_or_default().split_whitespace().map(String::from).collect()
}

fn bin_dir(flavour: Flavour) -> PathBuf {
    let d = out_dir().join("bin").join(flavour.tag());
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compile and link `sources` (relative to ffi-tests/c, or absolute) into
/// an executable named `name` for `flavour`. Panics with the compiler output on failure.
pub fn build(name: &str, sources: &[&str], flavour: Flavour) -> PathBuf {
    build_with(name, sources, flavour, &[])
}

pub fn build_with(name: &str, sources: &[&str], flavour: Flavour, extra_flags: &[&str]) -> PathBuf {
    build_full(name, sources, flavour, extra_flags, None)
}

/// Like [`build`] with our flavour, but linking the given static library
/// (e.g. a release build) instead of the one cargo built for the tests.
pub fn build_against(name: &str, sources: &[&str], staticlib: &Path) -> PathBuf {
    build_full(name, sources, Flavour::Ours, &[], Some(&[staticlib]))
}

/// Like [`build_against`], with several libraries in place of ours.
pub fn build_against_libs(name: &str, sources: &[&str], libs: &[&Path]) -> PathBuf {
    build_full(name, sources, Flavour::Ours, &[], Some(libs))
}

/// [`build_with`] and [`build_against_libs`] together: `extra_flags` for
/// the compile and link, `libs` (when given) in place of our library. The
/// sanitizer builds (tests/sanitizers.rs) use it, with objects of ggml
/// compiled with the same flags among `sources` (objects come before the
/// archives, so they replace the archives' copies).
pub fn build_custom(name: &str, sources: &[&str], flavour: Flavour, extra_flags: &[&str], libs: Option<&[&Path]>) -> PathBuf {
    build_full(name, sources, flavour, extra_flags, libs)
}

fn build_full(name: &str, sources: &[&str], flavour: Flavour, extra_flags: &[&str], libs: Option<&[&Path]>) -> PathBuf {
    let out = out_dir();
    let exe = bin_dir(flavour).join(if libs.is_some() { format!("{name}-custom-lib") } else { name.to_string() });
    let headers = match flavour {
        Flavour::Ours => include_dir(),
        Flavour::Original => out.join("ref"),
    };
    let mut cmd = Command::new(env!("FFI_CC"));
    cmd.args(["-std=c11", "-O1", "-g", "-D_GNU_SOURCE", "-pthread", "-Wall", "-Wextra", "-Werror"])
        .args(extra_flags)
        .arg("-I")
        .arg(&headers)
        .arg("-I")
        .arg(out.join("common"))
        .arg("-I")
        .arg(c_dir());
    for s in sources {
        let p = Path::new(s);
        cmd.arg(if p.is_absolute() { p.to_path_buf() } else { c_dir().join(p) });
    }
    cmd.arg("-o").arg(&exe).arg("-Wl,--start-group");
    match flavour {
        Flavour::Ours => {
            cmd.arg(out.join("libggml_alloc_ours.a"));
            match libs {
                Some(libs) => cmd.args(libs),
                None => cmd.arg(staticlib()),
            };
        }
        Flavour::Original => {
            cmd.arg(out.join("libggml_alloc_ref.a")).arg(out.join("libggml_backend_ref.a"));
        }
    }
    cmd.arg(out.join("libggml_core.a")).arg("-Wl,--end-group").args(NATIVE_STATIC_LIBS).args(extra_ldflags());
    let o = cmd.output().expect("run the C compiler");
    assert!(
        o.status.success(),
        "building {name} ({}) failed:\n{}{}",
        flavour.tag(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

/// A command that runs the test program `exe`: directly, or through the
/// emulator named by FFI_RUNNER when testing another architecture (e.g.
/// `qemu-aarch64-static -L /usr/aarch64-linux-gnu`, set by scripts/test-cross).
pub fn command(exe: &Path) -> Command {
    let runner = std::env::var("FFI_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(prog) => {
            let mut c = Command::new(prog);
            c.args(words).arg(exe);
            c
        }
        None => Command::new(exe),
    }
}

/// The slot patterns a test backend takes (`TEST_BACKEND_SHAPE`, see
/// test_backend.h): every slot set, ggml-cuda.cu's (no supports_op, no copy
/// slots, buffers that pad and initialise tensors) and ggml-metal.m's (no
/// graph_plan_*, copy slots set, plain buffers).
pub const SHAPES: [&str; 3] = ["full", "cuda", "metal"];

/// The configurations `sched_gpt2.c` runs in (NGL, weight type, layers,
/// own lm_head): every NGL of a 4-layer model in f32, the example's split
/// points in f16 and q4_0, a model with its own head, 12 layers.
pub const GPT2_CASES: &[&[&str]] = &[
    &["0", "f32"],
    &["1", "f32"],
    &["2", "f32"],
    &["3", "f32"],
    &["4", "f32"],
    &["5", "f32"],
    &["1", "f16"],
    &["2", "f16"],
    &["4", "f16"],
    &["5", "f16"],
    &["2", "q4_0"],
    &["5", "q4_0"],
    &["3", "f32", "4", "1"],
    &["6", "f16", "12"],
    &["13", "f32", "12", "1"],
];

pub fn run(exe: &Path, args: &[&str]) -> Output {
    run_shaped(exe, args, "full")
}

/// [`run`] with the test backends in slot pattern `shape` (one of [`SHAPES`]).
pub fn run_shaped(exe: &Path, args: &[&str], shape: &str) -> Output {
    // Test backends print every graph they compute (see test_backend.c), so
    // node assignments and split boundaries are compared too.
    let mut cmd = command(exe);
    cmd.args(args).env("TEST_BACKEND_LOG", "1").env("TEST_BACKEND_SHAPE", shape);
    output_within(cmd, RUN_LIMIT_S, &format!("{} {args:?} ({shape} test backend)", exe.display()))
}

/// [`run_shaped`] with extra environment variables (e.g. a sanitizer's options).
pub fn run_shaped_env(exe: &Path, args: &[&str], shape: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = command(exe);
    cmd.args(args).env("TEST_BACKEND_LOG", "1").env("TEST_BACKEND_SHAPE", shape).envs(env.iter().copied());
    output_within(cmd, RUN_LIMIT_S, &format!("{} {args:?} ({shape} test backend)", exe.display()))
}

/// How long one run of a test program may take (emulated and under load
/// included) before it is killed: a hang fails its test instead of CI.
const RUN_LIMIT_S: u64 = 600;

/// `cmd`'s output; the process is killed, and the test fails naming `what`,
/// when it runs longer than `limit_s` seconds.
fn output_within(mut cmd: Command, limit_s: u64, what: &str) -> Output {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let child =
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap_or_else(|e| panic!("run {what}: {e}"));
    let pid = child.id().to_string();
    let done = Arc::new(AtomicBool::new(false));
    let watch = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let start = Instant::now();
            while !done.load(Ordering::SeqCst) {
                if start.elapsed() > Duration::from_secs(limit_s) {
                    let _ = Command::new("kill").args(["-KILL", &pid]).status();
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            false
        })
    };
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("run {what}: {e}"));
    done.store(true, Ordering::SeqCst);
    let killed = watch.join().unwrap_or(false);
    assert!(!killed, "{what} did not finish in {limit_s} s and was killed");
    out
}

fn describe(o: &Output) -> String {
    use std::os::unix::process::ExitStatusExt;
    let how = match (o.status.code(), o.status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (_, Some(s)) => format!("signal {s}"),
        _ => "unknown status".into(),
    };
    let stderr = String::from_utf8_lossy(&o.stderr);
    let tail: String = stderr.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    format!("{how}; stderr tail:\n{tail}")
}

/// Compare two outputs under the convention above; Err describes the first difference.
pub fn compare(ours: &str, orig: &str) -> Result<usize, String> {
    let keep = |s: &str| -> Vec<String> { s.lines().filter(|l| !l.starts_with("~ ")).map(String::from).collect() };
    let (a, b) = (keep(ours), keep(orig));
    if a.len() != b.len() {
        return Err(format!("line count differs: ours {} vs original {}", a.len(), b.len()));
    }
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        if x == y {
            continue;
        }
        if let (Some(xs), Some(ys)) = (x.strip_prefix("~le "), y.strip_prefix("~le ")) {
            let split = |s: &str| s.rsplit_once(' ').map(|(k, v)| (k.to_string(), v.parse::<i64>()));
            if let (Some((kx, Ok(vx))), Some((ky, Ok(vy)))) = (split(xs), split(ys)) {
                if kx == ky && vx <= vy {
                    continue;
                }
            }
        }
        return Err(format!("line {}: ours {:?} vs original {:?}", i + 1, x, y));
    }
    Ok(a.len())
}

/// Build `program` (plus `extra` sources) both ways, run both, and require
/// success and identical output; a program with the test backend
/// (`test_backend.c` among `extra`) is run in each of its slot patterns
/// ([`SHAPES`]). Returns our stdout (of the last pattern).
pub fn differential(program: &str, extra: &[&str], args: &[&str]) -> String {
    let shapes: &[&str] = if extra.contains(&"test_backend.c") { &SHAPES } else { &SHAPES[..1] };
    differential_shaped(program, extra, args, shapes)
}

/// [`differential`] in the given slot patterns of the test backend.
pub fn differential_shaped(program: &str, extra: &[&str], args: &[&str], shapes: &[&str]) -> String {
    differential_cases(program, extra, &[args], shapes)
}

/// [`differential`] of one build per flavour, run with each argument list in
/// `cases` and each slot pattern in `shapes`.
pub fn differential_cases(program: &str, extra: &[&str], cases: &[&[&str]], shapes: &[&str]) -> String {
    let mut sources = vec![program];
    sources.extend_from_slice(extra);
    let name = program.trim_end_matches(".c");
    let (ours_exe, orig_exe) = (build(name, &sources, Flavour::Ours), build(name, &sources, Flavour::Original));
    let mut last = String::new();
    for (args, shape) in cases.iter().flat_map(|&a| shapes.iter().map(move |s| (a, s))) {
        let ours = run_shaped(&ours_exe, args, shape);
        let orig = run_shaped(&orig_exe, args, shape);
        assert!(orig.status.success(), "{name} {args:?} ({shape} test backend) with the original failed: {}", describe(&orig));
        assert!(ours.status.success(), "{name} {args:?} ({shape} test backend) with our library failed: {}", describe(&ours));
        let (so, sr) = (String::from_utf8_lossy(&ours.stdout).into_owned(), String::from_utf8_lossy(&orig.stdout).into_owned());
        match compare(&so, &sr) {
            Ok(n) => assert!(n > 0, "{name} printed nothing to compare"),
            Err(e) => panic!("{name} {args:?} ({shape} test backend): outputs differ: {e}"),
        }
        last = so;
    }
    last
}

/// Build with our library only, run, require success; returns stdout.
pub fn ours_only(program: &str, extra: &[&str], args: &[&str]) -> String {
    ours_only_shaped(program, extra, args, "full")
}

/// [`ours_only`] with the test backends in slot pattern `shape`.
pub fn ours_only_shaped(program: &str, extra: &[&str], args: &[&str], shape: &str) -> String {
    let mut sources = vec![program];
    sources.extend_from_slice(extra);
    let name = program.trim_end_matches(".c");
    let o = run_shaped(&build(name, &sources, Flavour::Ours), args, shape);
    assert!(o.status.success(), "{name} {args:?} ({shape} test backend) with our library failed: {}", describe(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[cfg(test)]
mod tests {
    use super::compare;

    #[test]
    fn compare_rules() {
        assert!(compare("a\nb\n", "a\nb\n").is_ok());
        assert!(compare("a\nb\n", "a\nc\n").is_err());
        assert!(compare("a\n~le copies X 3\n", "a\n~le copies X 5\n").is_ok());
        assert!(compare("a\n~le copies X 6\n", "a\n~le copies X 5\n").is_err());
        assert!(compare("a\n~le copies Y 1\n", "a\n~le copies X 5\n").is_err());
        assert!(compare("a\n~ info 1\n", "a\n~ info 2\n~ more\n").is_ok());
        assert!(compare("a\n", "a\nb\n").is_err());
    }
}
