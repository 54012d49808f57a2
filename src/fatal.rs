//! The C API has no error channel: misuse is reported on stderr, naming the
//! function and the argument, and the process aborts (SIGABRT), like the
//! original's asserts. Unlike the original we never `exit(1)` from inside the
//! library and never continue into an out-of-bounds access.

use crate::platform;
use crate::prelude::*;

/// Print `wsp_ggml_backend: <func>: <msg>` to stderr and abort.
#[cold]
pub fn fatal(func: &str, msg: &str) -> ! {
    platform::write_stderr(format!("wsp_ggml_backend: {func}: {msg}\n").as_bytes());
    platform::abort()
}

/// Abort with a message unless `cond` holds.
#[inline]
#[track_caller]
pub fn check(cond: bool, func: &str, msg: impl FnOnce() -> String) {
    if !cond {
        fatal(func, &msg())
    }
}

/// Run `f`, the body of exported function `func`. A Rust panic inside is a
/// bug of ours and never unwinds into C: where panics abort (every build
/// users link) the panic handler of platform.rs prints
/// `wsp_ggml_backend: internal error (Rust panic), aborting: <where and why>`
/// and aborts; in builds that unwind (Rust test binaries, the `std`
/// feature) std prints the panic and this guard then stops the process with
/// the same first words, naming the function.
#[inline]
pub fn guard<R>(func: &str, f: impl FnOnce() -> R) -> R {
    #[cfg(not(panic = "unwind"))]
    {
        let _ = func;
        f()
    }
    #[cfg(panic = "unwind")]
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => fatal(func, "internal error (Rust panic), aborting (the panic is described above)"),
    }
}
