//! The C API has no error channel: misuse is reported on stderr, naming the
//! function and the argument, and the process aborts (SIGABRT), like the
//! original's asserts. Unlike the original we never `exit(1)` from inside the
//! library and never continue into an out-of-bounds access.

use crate::platform;
use crate::prelude::*;

/// Send `wsp_ggml_backend: <func>: <msg>` where messages go (stderr, logcat
/// on Android, or the log callback: platform.rs) and abort. The line is
/// built on the stack (cut at 1 KiB): it is sent also when no memory is
/// left.
#[cold]
pub fn fatal(func: &str, msg: &str) -> ! {
    use core::fmt::Write;
    // (an allocation that failed in this call, and returned NULL, is the
    // cause: say that, not what the NULL led to)
    if let Some(bytes) = platform::pending_out_of_memory() {
        platform::out_of_memory(func, bytes);
    }
    let mut line = platform::Line::<1026>::new();
    let _ = write!(line, "wsp_ggml_backend: {func}: {msg}");
    line.emit_fatal()
}

/// Abort with a message unless `cond` holds.
#[inline]
#[track_caller]
pub fn check(cond: bool, func: &str, msg: impl FnOnce() -> String) {
    if !cond {
        fatal(func, &msg())
    }
}

// The panic policy: a Rust panic never unwinds out of an export (unwinding
// into C is undefined behaviour before Rust 1.81, and an abort without a
// message of ours after). It depends only on the panic strategy, and each
// strategy has exactly one arm here:
// - `panic = "abort"` (release, what users link, and dev-abort; nightly's
//   `-Cpanic=immediate-abort` sets it too): nothing unwinds; the panic
//   handler (platform.rs, or std's with the `std` feature) prints and
//   aborts; `guard` just calls the body;
// - `panic = "unwind"` (the dev profile, and every build cargo makes for
//   Rust tests and benchmarks whatever the profile's `panic` says, since
//   the test harness needs unwinding: `cargo test --release` included):
//   the crate has std (lib.rs) and `guard`, which every export runs its
//   body in (`entry!`, src/ffi/mod.rs), catches the panic and aborts;
// - any other strategy, one that no toolchain has today, is a build whose
//   exports nobody has checked: refused here, rather than compiled with
//   neither arm.
// So no configuration compiles in which a panic could unwind into C: the
// one that unwinds catches, by the same cfg that makes it unwind; a release
// build with unwinding is the catching flavour, not an escape. Checked: the
// dev, dev-abort and release profiles build, and so does
// `CARGO_PROFILE_RELEASE_PANIC=unwind cargo build --release` (std, with the
// catch); `rustc +nightly -Zunstable-options -Cpanic=immediate-abort
// --print cfg` prints `panic="abort"` and `panic="immediate-abort"`, so
// that nightly-only build takes the abort arm.
#[cfg(not(any(panic = "abort", panic = "unwind")))]
compile_error!(
    "wsp_ggml_backend supports panic = \"abort\" (panics abort) and panic = \"unwind\" (its exports catch panics) only: \
     with another panic strategy nothing guarantees that a panic neither unwinds into C nor aborts without a message"
);

/// Run `f`, the body of exported function `func`. A Rust panic inside is a
/// bug of ours and never unwinds into C: where panics abort (every build
/// users link) the panic handler of platform.rs prints
/// `wsp_ggml_backend: internal error (Rust panic), aborting: <where and why>`
/// and aborts; in builds that unwind (the dev profile, Rust test binaries)
/// std prints the panic and this guard then stops the process with the
/// same first words, naming the function. Every export runs its body here,
/// through `entry!` (src/ffi/mod.rs).
///
/// `func` is also the thread's running call while `f` runs, unless an
/// outer export is (platform::enter): an allocation that fails inside is
/// reported naming the function the caller called.
#[inline]
pub fn guard<R>(func: &'static str, f: impl FnOnce() -> R) -> R {
    let frame = platform::EntryFrame::new(func);
    let _running = platform::enter(&frame);
    guard_callback(func, f)
}

/// [`guard`] for a callback of the CPU backend's interface (a slot of
/// `struct wsp_ggml_backend_i` or of a buffer's), which does not make
/// itself the running call: called from an export, that export stays the
/// one an out-of-memory message names; called by C directly, `func` is
/// named (what `enter` would give, without its cost on every callback the
/// scheduler makes).
#[inline]
pub fn guard_callback<R>(func: &'static str, f: impl FnOnce() -> R) -> R {
    #[cfg(panic = "abort")]
    {
        let _ = func; // (the panic handler names the place)
        f()
    }
    #[cfg(panic = "unwind")]
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => fatal(func, "internal error (Rust panic), aborting (the panic is described above)"),
    }
}
