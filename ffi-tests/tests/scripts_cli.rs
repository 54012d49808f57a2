//! Every script in `scripts/` behaves like a command-line tool: `-h` and
//! `--help` print a `usage:` line and a description on stdout, exit 0 and do
//! nothing else (quickly: no build, no install, no test run, nothing written
//! to the checkout); an unknown option exits 2 with the usage line on
//! stderr. And no script's text (help, messages, comments) speaks in the
//! project's internal words.

use ffi_tests::headers::workspace_root;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// What a help or refusal may take at most (each does no real work).
const TIMEOUT: Duration = Duration::from_secs(20);

/// Files of `scripts/` that are data, not programs.
const DATA: &[&str] = &["tsv", "md", "txt", "json", "cpp", "c", "h"];

/// A script and how to start it: directly when executable, else with
/// python3 (a `.py` module that also has a command line).
struct Script {
    name: String,
    path: PathBuf,
    python: bool,
}

impl Script {
    fn command(&self) -> Command {
        if self.python {
            let mut c = Command::new("python3");
            c.arg(&self.path);
            c
        } else {
            Command::new(&self.path)
        }
    }
}

fn scripts_dir() -> PathBuf {
    workspace_root().join("scripts")
}

/// Every program in `scripts/` (sorted by name).
fn scripts() -> Vec<Script> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(scripts_dir()).expect("read scripts/") {
        let entry = entry.unwrap();
        let path = entry.path();
        let meta = entry.metadata().unwrap();
        if !meta.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let ext = path.extension().map(|e| e.to_string_lossy().into_owned()).unwrap_or_default();
        if DATA.contains(&ext.as_str()) {
            continue;
        }
        let executable = meta.permissions().mode() & 0o111 != 0;
        if executable {
            out.push(Script { name, path, python: false });
        } else if ext == "py" {
            out.push(Script { name, path, python: true });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

struct Ran {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` (in a process group of its own, stdin closed) for at most
/// TIMEOUT; panics, after killing the whole group, when it takes longer.
fn run(mut cmd: Command, what: &str) -> Ran {
    cmd.current_dir(workspace_root()).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > TIMEOUT {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {TIMEOUT:?} (it must only print its help or refuse the command line); killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        status: status.code(),
        stdout: String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned(),
    }
}

fn starts_with_usage(line: &str) -> bool {
    line.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("usage:"))
}

/// Every file and folder under `dir`, with its size and modification time.
fn tree(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                todo.push(e.path());
            }
            out.push((e.path(), meta.len(), meta.modified().ok()));
        }
    }
    out.sort();
    out
}

/// The names at the top of the checkout.
fn top_level() -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(workspace_root()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// Problems of one script's `-h`/`--help` and unknown-option behaviour.
fn check_script(s: &Script) -> Vec<String> {
    let mut problems = Vec::new();
    for flag in ["--help", "-h"] {
        let what = format!("scripts/{} {flag}", s.name);
        let mut cmd = s.command();
        cmd.arg(flag);
        let r = run(cmd, &what);
        if r.status != Some(0) {
            problems.push(format!("{what}: exit status {:?}, expected 0\n  stderr: {}", r.status, r.stderr.trim()));
        }
        match r.stdout.lines().next() {
            Some(first) if starts_with_usage(first) => {}
            first => problems.push(format!("{what}: the first line of stdout is {first:?}, expected one starting with 'usage:'")),
        }
        if r.stdout.lines().filter(|l| !l.trim().is_empty()).count() < 2 {
            problems.push(format!("{what}: no description after the usage line:\n{}", r.stdout));
        }
        if !r.stderr.trim().is_empty() {
            problems.push(format!("{what}: wrote to stderr (a help does nothing else):\n{}", r.stderr.trim()));
        }
    }
    let what = format!("scripts/{} --no-such-option", s.name);
    let mut cmd = s.command();
    cmd.arg("--no-such-option");
    let r = run(cmd, &what);
    if r.status != Some(2) {
        problems.push(format!("{what}: exit status {:?}, expected 2\n  stderr: {}", r.status, r.stderr.trim()));
    }
    if !r.stderr.lines().any(starts_with_usage) {
        problems.push(format!("{what}: no line starting with 'usage:' on stderr:\n{}", r.stderr.trim()));
    }
    if !r.stdout.trim().is_empty() {
        problems.push(format!("{what}: wrote to stdout:\n{}", r.stdout.trim()));
    }
    problems
}

#[test]
fn every_script_answers_help_and_refuses_unknown_options() {
    let all = scripts();
    // the directory is really enumerated: a few well-known programs are in it
    for known in ["test", "demo", "install", "size", "macho.py", "plot_sched.py"] {
        assert!(
            all.iter().any(|s| s.name == known),
            "scripts/{known} not found among {:?}",
            all.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
    }
    assert!(all.iter().all(|s| s.name != "targets.tsv"));
    let scripts_before = tree(&scripts_dir());
    let top_before = top_level();
    let mut problems = Vec::new();
    for s in &all {
        problems.extend(check_script(s));
    }
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
    assert!(tree(&scripts_dir()) == scripts_before, "scripts/ changed while the scripts only printed help or refused options");
    assert_eq!(top_level(), top_before, "new files at the top of the checkout");
}

/// Is `c` a word character (for `\b`)?
fn word(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Where `text` (lowercase) has one of the internal words:
/// `\bissues? \d`, `\bsession\b`, `device tool`, `independent reviewer`.
fn internal_words(text: &str) -> Vec<(usize, String)> {
    let mut hits = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let l = line.to_lowercase();
        let before = |at: usize| l[..at].chars().next_back();
        let mut found = |what: &str| hits.push((n + 1, format!("{what}: {}", line.trim())));
        for (at, _) in l.match_indices("issue") {
            if word(before(at)) {
                continue;
            }
            let rest = &l[at + "issue".len()..];
            let rest = rest.strip_prefix('s').unwrap_or(rest);
            if rest.strip_prefix(' ').is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())) {
                found("an issue number");
            }
        }
        for (at, _) in l.match_indices("session") {
            if !word(before(at)) && !word(l[at + "session".len()..].chars().next()) {
                found("'session'");
            }
        }
        for phrase in ["device tool", "independent reviewer"] {
            if l.contains(phrase) {
                found(phrase);
            }
        }
    }
    hits
}

#[test]
fn the_internal_words_matcher_finds_what_it_should() {
    for bad in [
        "issue 14's target",
        "(Issue 20)",
        "issues 20 and 23",
        "this session",
        "Session.",
        "the device tool's folder",
        "an independent reviewer's graph",
    ] {
        assert_eq!(internal_words(bad).len(), 1, "{bad:?}");
    }
    for fine in ["tissue 3", "an issue with it", "sessions", "obsession", "a device", "the reviewer", "issue14"] {
        assert!(internal_words(fine).is_empty(), "{fine:?}: {:?}", internal_words(fine));
    }
}

#[test]
fn no_script_speaks_in_internal_words() {
    let mut problems = Vec::new();
    let mut todo = vec![scripts_dir()];
    let mut files = 0;
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                todo.push(path);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            files += 1;
            let rel = path.strip_prefix(workspace_root()).unwrap().display().to_string();
            problems.extend(internal_words(&text).into_iter().map(|(n, what)| format!("{rel}:{n}: {what}")));
        }
    }
    assert!(files > 10, "only {files} files read under scripts/");
    assert!(problems.is_empty(), "words for the project's own bookkeeping, not for a user:\n{}", problems.join("\n"));
}
