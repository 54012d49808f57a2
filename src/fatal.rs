//! The C API has no error channel: misuse is reported on stderr, naming the
//! function and the argument, and the process aborts (SIGABRT), like the
//! original's asserts. Unlike the original we never `exit(1)` from inside the
//! library and never continue into an out-of-bounds access.

use std::io::Write;

/// Print `wsp_ggml_backend: <func>: <msg>` to stderr and abort.
#[cold]
pub fn fatal(func: &str, msg: &str) -> ! {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "wsp_ggml_backend: {func}: {msg}");
    let _ = err.flush();
    std::process::abort()
}

/// Abort with a message unless `cond` holds.
#[inline]
#[track_caller]
pub fn check(cond: bool, func: &str, msg: impl FnOnce() -> String) {
    if !cond {
        fatal(func, &msg())
    }
}

/// Run `f`, turning a Rust panic into a message naming `func` and an abort,
/// so that no unwinding ever reaches C whatever the build profile.
#[inline]
pub fn guard<R>(func: &str, f: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => fatal(func, "internal error (Rust panic); aborting"),
    }
}
