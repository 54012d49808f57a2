//! What the library needs from the platform, through libc only: where its
//! messages go (one place: [`Line::emit`] and [`Line::emit_fatal`]),
//! aborting, reading an environment switch and a monotonic clock,
//! knowing which exported function a thread is running (for the
//! out-of-memory message); and, where the crate is built without std, the
//! allocator and the panic handler.
//!
//! The library is `no_std` in every build that aborts on panic (the release
//! profile users link, and `dev-abort`, which the C tests link). It keeps
//! std where unwinding is required (the dev profile, Rust test binaries)
//! and with the `std` feature (the benchmark and test crates, which link it
//! into std programs). The two flavours differ only in this file and in
//! `fatal::guard`.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::Cell;
use core::ffi::{c_char, c_int, c_void, CStr};
use core::fmt::{self, Write};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Write all of `bytes` to stderr (fd 2), as one `write` when it fits.
fn write_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length describe the live slice `bytes`.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            return; // nowhere to report a failing stderr
        }
        bytes = &bytes[n as usize..];
    }
}

/// How much a message matters: the values of ggml.h's `enum
/// wsp_ggml_log_level`, which the log callback receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Misuse, out of memory, an internal error: the process aborts after it.
    Error = 2,
    /// An allocation that failed where the function returns NULL for it.
    Warn = 3,
    /// What `WSP_GGML_SCHED_DEBUG` asks for.
    Info = 4,
}

/// The log callback's type: ggml.h's `wsp_ggml_log_callback` (the header
/// names ggml's typedef, cbindgen.toml keeps this one out of it).
#[allow(non_camel_case_types)]
pub type wsp_ggml_log_callback = Option<unsafe extern "C" fn(level: c_int, text: *const c_char, user_data: *mut c_void)>;

/// The log callback (a function pointer, NULL when none) and its user data.
static LOG_CALLBACK: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static LOG_USER_DATA: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// Send every later message to `callback` (with `user_data`), or to the
/// default destination again when `callback` is None.
pub fn set_log_callback(callback: wsp_ggml_log_callback, user_data: *mut c_void) {
    LOG_USER_DATA.store(user_data, Ordering::Release);
    LOG_CALLBACK.store(callback.map_or(core::ptr::null_mut(), |f| f as *mut c_void), Ordering::Release);
}

/// Give `line` (the text, then "\n\0") to the log callback if one is set,
/// else to the platform's destination: logcat on Android when liblog is
/// loaded, stderr otherwise. Never allocates.
fn deliver(level: Level, line: &mut [u8]) {
    debug_assert!(line.ends_with(b"\n\0"));
    let callback = LOG_CALLBACK.load(Ordering::Acquire);
    if !callback.is_null() {
        // SAFETY: a non-NULL value was stored by `set_log_callback` from a
        // function pointer of this very type.
        let f = unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn(c_int, *const c_char, *mut c_void)>(callback) };
        // SAFETY: `line` is NUL-terminated; the callback is safe to call with
        // its user data (wsp_ggml_backend_log_set's contract).
        unsafe { f(level as c_int, line.as_ptr().cast(), LOG_USER_DATA.load(Ordering::Acquire)) };
        return;
    }
    #[cfg(any(target_os = "android", feature = "logcat-on-host"))]
    if logcat::write(level, line) {
        return;
    }
    write_stderr(&line[..line.len() - 1]);
}

/// What the platform needs before the process aborts: on Android, the
/// message as the abort message that crash reports show; everywhere, C's
/// buffered output flushed (`abort` discards it).
fn before_abort(line: &mut [u8]) {
    #[cfg(any(target_os = "android", feature = "logcat-on-host"))]
    logcat::set_abort_message(line);
    let _ = line;
    // SAFETY: fflush(NULL) flushes every output stream; it has no precondition.
    unsafe { libc::fflush(core::ptr::null_mut()) };
}

/// Android's two destinations, looked up at run time with `dlsym` (so
/// that no library is added to what the app links): `__android_log_write`
/// of liblog, which every app process has loaded, and bionic's
/// `android_set_abort_message`. With the `logcat-on-host` feature the same
/// code runs on another system, where a test program defines the two.
#[cfg(any(target_os = "android", feature = "logcat-on-host"))]
mod logcat {
    use super::Level;
    use core::ffi::{c_char, c_int, c_void, CStr};
    use core::sync::atomic::{AtomicPtr, Ordering};

    const TAG: &CStr = c"wsp_ggml_backend";
    /// A looked-up address that is not there.
    const ABSENT: *mut c_void = 1 as *mut c_void;
    static LOG_WRITE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
    static SET_ABORT_MESSAGE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

    /// The address of `name` in the process, looked up once.
    fn lookup(cache: &AtomicPtr<c_void>, name: &CStr) -> Option<*mut c_void> {
        let mut p = cache.load(Ordering::Acquire);
        if p.is_null() {
            // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the
            // libraries the process has loaded.
            p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            if p.is_null() {
                p = ABSENT;
            }
            cache.store(p, Ordering::Release);
        }
        (p != ABSENT).then_some(p)
    }

    /// android/log.h's priorities.
    fn priority(level: Level) -> c_int {
        match level {
            Level::Error => 6, // ANDROID_LOG_ERROR
            Level::Warn => 5,  // ANDROID_LOG_WARN
            Level::Info => 4,  // ANDROID_LOG_INFO
        }
    }

    /// `line` (text "\n\0") to logcat, without its newline; false when
    /// liblog is not loaded.
    pub fn write(level: Level, line: &mut [u8]) -> bool {
        let Some(f) = lookup(&LOG_WRITE, c"__android_log_write") else { return false };
        // SAFETY: dlsym found `__android_log_write`, whose type this is
        // (android/log.h).
        let f = unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn(c_int, *const c_char, *const c_char) -> c_int>(f) };
        let nl = line.len() - 2;
        line[nl] = 0;
        // SAFETY: both strings are NUL-terminated and outlive the call.
        unsafe { f(priority(level), TAG.as_ptr(), line.as_ptr().cast()) };
        line[nl] = b'\n';
        true
    }

    /// `line` (text "\n\0") as the abort message of the crash report.
    pub fn set_abort_message(line: &mut [u8]) {
        let Some(f) = lookup(&SET_ABORT_MESSAGE, c"android_set_abort_message") else { return };
        // SAFETY: dlsym found bionic's `android_set_abort_message`, whose
        // type this is (android/set_abort_message.h).
        let f = unsafe { core::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const c_char)>(f) };
        let nl = line.len() - 2;
        line[nl] = 0;
        // SAFETY: NUL-terminated; bionic copies the text.
        unsafe { f(line.as_ptr().cast()) };
        line[nl] = b'\n';
    }
}

/// A line built on the stack, cut at its capacity (N - 2 bytes of text:
/// the newline and the NUL the destinations need take the last two):
/// messages that must not allocate (the allocator may be what failed).
pub struct Line<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Line<N> {
    const ROOM: usize = N - 2;

    pub const fn new() -> Self {
        Line { buf: [0; N], len: 0 }
    }

    /// Whether everything written fit.
    pub fn fits(&self) -> bool {
        self.len < Self::ROOM
    }

    /// The text, then "\n\0".
    fn terminated(&mut self) -> &mut [u8] {
        self.buf[self.len] = b'\n';
        self.buf[self.len + 1] = 0;
        &mut self.buf[..self.len + 2]
    }

    /// Send the line where messages go (see [`deliver`]), as one write.
    pub fn emit(mut self, level: Level) {
        deliver(level, self.terminated());
    }

    /// Send the line where messages go, set it as the abort message where
    /// the platform has one, flush C's output streams, and abort.
    pub fn emit_fatal(mut self) -> ! {
        let line = self.terminated();
        deliver(Level::Error, line);
        before_abort(line);
        abort_now()
    }

    #[cfg_attr(any(feature = "std", panic = "unwind"), allow(dead_code))] // (the no_std panic handler's)
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl<const N: usize> Write for Line<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(Self::ROOM - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Send one formatted line (level Info: what `WSP_GGML_SCHED_DEBUG` prints)
/// where messages go, in a single write (lines of concurrent threads do not
/// interleave). Built on the stack; only a line longer than 1 KiB is built
/// on the heap.
pub fn eprint_line(args: fmt::Arguments<'_>) {
    let mut line = Line::<1026>::new();
    let _ = line.write_fmt(args);
    if line.fits() {
        return line.emit(Level::Info);
    }
    let mut s = String::new();
    let _ = s.write_fmt(args);
    s.push('\n');
    info_text(&mut s);
}

/// Send `text` (whole lines, each ending with a newline) where messages go,
/// as one message of level Info; `text` is left empty.
pub fn info_text(text: &mut String) {
    if text.is_empty() {
        return;
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push('\0');
    // (a String's bytes, given as bytes: the NUL and newline writes of the
    // destinations keep it ASCII where they touch it)
    let mut bytes = core::mem::take(text).into_bytes();
    deliver(Level::Info, &mut bytes);
    bytes.clear();
    // (empty, so valid; the capacity is kept for the next lines)
    *text = String::from_utf8(bytes).unwrap_or_default();
}

/// The exported function a thread is running, outermost first: set by
/// [`enter`] (every export runs its body under `fatal::guard`), read by
/// the out-of-memory message, which names the function the caller called
/// (not one the library called inside it).
pub struct EntryFrame {
    name: &'static str,
    /// An allocation that failed in a call nested in this one, which
    /// returned NULL for it: this call reports it, or recovers.
    pending: Cell<Option<usize>>,
}

impl EntryFrame {
    pub const fn new(name: &'static str) -> Self {
        EntryFrame { name, pending: Cell::new(None) }
    }
}

/// The thread-specific key that points at the running call's
/// [`EntryFrame`]: 0 while none is made, `usize::MAX` where none could be
/// (no names then), else the key plus one.
static ENTRY_KEY: AtomicUsize = AtomicUsize::new(0);

fn entry_key() -> Option<libc::pthread_key_t> {
    match ENTRY_KEY.load(Ordering::Acquire) {
        0 => make_entry_key(),
        usize::MAX => None,
        k => Some((k - 1) as libc::pthread_key_t),
    }
}

#[cold]
fn make_entry_key() -> Option<libc::pthread_key_t> {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid place for the new key; no destructor (the
    // value points into a stack frame, cleared before the frame ends).
    let made = unsafe { libc::pthread_key_create(&mut key, None) } == 0;
    let mine = if made { key as usize + 1 } else { usize::MAX };
    match ENTRY_KEY.compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => made.then_some(key),
        Err(theirs) => {
            if made {
                // SAFETY: the key just made, used by nobody.
                unsafe { libc::pthread_key_delete(key) };
            }
            (theirs != usize::MAX).then(|| (theirs - 1) as libc::pthread_key_t)
        }
    }
}

/// The running call's frame, if any.
fn current_frame<'a>() -> Option<&'a EntryFrame> {
    let key = entry_key()?;
    // SAFETY: a key of ours; reading this thread's value has no precondition.
    let p = unsafe { libc::pthread_getspecific(key) }.cast::<EntryFrame>();
    // SAFETY: non-NULL values are set by `enter` from a live frame and
    // cleared (EntryScope's Drop) before that frame ends; only shared
    // references to it are made.
    unsafe { p.as_ref() }
}

/// While alive, `frame` is this thread's running call (unless an
/// outer call is running: the outermost one is kept).
pub struct EntryScope<'a> {
    key: Option<libc::pthread_key_t>,
    _frame: PhantomData<&'a EntryFrame>,
}

/// Make `frame` this thread's running call, unless one is already.
/// (Out of line: every export calls it, and each inlined copy would cost
/// the app's binary some 200 bytes.)
#[inline(never)]
pub fn enter(frame: &EntryFrame) -> EntryScope<'_> {
    let key = entry_key().filter(|_| current_frame().is_none()).filter(|&key| {
        // SAFETY: a key of ours; the value outlives its use (cleared by
        // EntryScope's Drop, whose lifetime is the frame's). A failure
        // (ENOMEM) leaves the call unnamed.
        unsafe { libc::pthread_setspecific(key, (frame as *const EntryFrame).cast::<c_void>()) == 0 }
    });
    EntryScope { key, _frame: PhantomData }
}

impl Drop for EntryScope<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(key) = self.key {
            leave(key);
        }
    }
}

/// The running call returns: no call of this thread is running.
#[inline(never)]
fn leave(key: libc::pthread_key_t) {
    // SAFETY: a key of ours, set by `enter`; clearing cannot fail.
    unsafe { libc::pthread_setspecific(key, core::ptr::null()) };
}

/// Allocation failed: `bytes` could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory(pub usize);

/// `bytes` could not be allocated for `func`, which returns NULL for it.
/// Called by the caller's own function (`func` is the running call, or
/// none is known), it prints `wsp_ggml_backend: <func>: out of memory
/// (<bytes> bytes)`; nested in another export, it leaves the failure to
/// that one ([`pending_out_of_memory`]), which stops with the message or
/// recovers. Never allocates.
#[cold]
pub fn report_out_of_memory(func: &str, bytes: usize) {
    match current_frame() {
        Some(f) if f.name != func => f.pending.set(Some(bytes)),
        _ => print_out_of_memory(func, bytes),
    }
}

/// The size of an allocation that failed in a nested call of this
/// thread's running export (and returned NULL there), taken: the caller
/// reports it, or recovers.
pub fn pending_out_of_memory() -> Option<usize> {
    current_frame().and_then(|f| f.pending.take())
}

/// Print the out-of-memory message naming the running export (`func`
/// when none is known), then abort. Never allocates.
#[cold]
pub fn out_of_memory(func: &str, bytes: usize) -> ! {
    out_of_memory_line(func, bytes).emit_fatal()
}

/// Report an allocation that failed where the function returns NULL for it.
fn print_out_of_memory(func: &str, bytes: usize) {
    out_of_memory_line(func, bytes).emit(Level::Warn);
}

fn out_of_memory_line(func: &str, bytes: usize) -> Line<256> {
    let name = current_frame().map_or(func, |f| f.name);
    let mut line = Line::<256>::new();
    let _ = write!(line, "wsp_ggml_backend: {name}: out of memory ({bytes} bytes)");
    line
}

/// Box `value`, or report that there was no memory for it.
pub fn try_box<T>(value: T) -> Result<Box<T>, OutOfMemory> {
    let mut v = Vec::new();
    v.try_reserve_exact(1).map_err(|_| OutOfMemory(core::mem::size_of::<T>()))?;
    v.push(value);
    // (exactly one element in exactly its room: no reallocation)
    let one: Box<[T; 1]> = v.into_boxed_slice().try_into().unwrap_or_else(|_| unreachable!());
    // SAFETY: `[T; 1]` has the size and alignment of `T`, so the allocation
    // is one a `Box<T>` owns and frees.
    Ok(unsafe { Box::from_raw(Box::into_raw(one).cast::<T>()) })
}

/// The size in `"... memory allocation of <N> bytes failed"`, the message
/// of Rust's allocation-failure handler (alloc::alloc::handle_alloc_error).
#[cfg_attr(any(feature = "std", panic = "unwind"), allow(dead_code))] // (the no_std panic handler's)
pub fn failed_allocation(message: &[u8]) -> Option<usize> {
    const HEAD: &[u8] = b"memory allocation of ";
    const TAIL: &[u8] = b" bytes failed";
    let at = message.windows(HEAD.len()).position(|w| w == HEAD)? + HEAD.len();
    let rest = &message[at..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || !rest[digits..].starts_with(TAIL) {
        return None;
    }
    // (by hand: str::parse would bring UTF-8 validation into every app)
    rest[..digits].iter().try_fold(0usize, |n, &d| n.checked_mul(10)?.checked_add(usize::from(d - b'0')))
}

/// `eprintln!` for this crate: formats, then writes the line through libc.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::platform::eprint_line(format_args!($($arg)*))
    };
}
pub(crate) use errln;

/// Abort the process (SIGABRT), as the original's asserts do, once the
/// message is out ([`Line::emit_fatal`], which calls this).
fn abort_now() -> ! {
    // SAFETY: abort takes no arguments and never returns.
    unsafe { libc::abort() }
}

/// Whether environment variable `name` is set to something other than
/// "" or "0".
pub fn env_flag(name: &CStr) -> bool {
    // SAFETY: `name` is NUL-terminated; getenv returns NULL or a C string
    // that stays valid until the environment changes (read at once here).
    let v = unsafe { libc::getenv(name.as_ptr()) };
    if v.is_null() {
        return false;
    }
    // SAFETY: non-NULL result of getenv: a NUL-terminated string.
    let v = unsafe { CStr::from_ptr(v) }.to_bytes();
    !v.is_empty() && v != b"0"
}

/// The value of environment variable `name`, NUL-terminated, if it is set
/// and not empty (copied: getenv's string may change afterwards).
pub fn env_value(name: &CStr) -> Option<Vec<u8>> {
    // SAFETY: `name` is NUL-terminated; getenv returns NULL or a C string
    // that stays valid until the environment changes (copied at once here).
    let v = unsafe { libc::getenv(name.as_ptr()) };
    if v.is_null() {
        return None;
    }
    // SAFETY: non-NULL result of getenv: a NUL-terminated string.
    let v = unsafe { CStr::from_ptr(v) }.to_bytes_with_nul();
    (v.len() > 1).then(|| v.to_vec())
}

/// Write the file at `path` (NUL-terminated; replaced if it exists) with
/// what `write` hands its sink, through C's stdio. Returns false if the
/// file could not be opened or written.
pub fn write_file(path: &[u8], write: impl FnOnce(&mut dyn FnMut(&str))) -> bool {
    let Ok(path) = CStr::from_bytes_with_nul(path) else { return false };
    // SAFETY: two NUL-terminated strings; fopen returns NULL or a stream
    // that this function alone uses and closes.
    let f = unsafe { libc::fopen(path.as_ptr(), c"w".as_ptr()) };
    if f.is_null() {
        return false;
    }
    let mut ok = true;
    write(&mut |text: &str| {
        // SAFETY: `f` is open (closed only below); `text` is `len` readable bytes.
        ok &= text.is_empty() || unsafe { libc::fwrite(text.as_ptr().cast(), 1, text.len(), f) } == text.len();
    });
    // SAFETY: `f` came from fopen above and is closed once.
    let closed = unsafe { libc::fclose(f) } == 0;
    ok && closed
}

/// Nanoseconds of a monotonic clock (for the per-split statistics).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// The allocator of builds without std: libc's malloc family, with
/// posix_memalign for alignments malloc does not promise.
#[cfg(not(any(feature = "std", panic = "unwind")))]
mod no_std_runtime {
    use core::alloc::{GlobalAlloc, Layout};
    use core::ffi::c_void;
    use core::fmt::Write;

    /// What malloc's result is aligned to on every supported platform
    /// (glibc, bionic, Apple): 8 on 32-bit targets, 16 on 64-bit ones.
    const MALLOC_ALIGN: usize = if cfg!(target_pointer_width = "64") { 16 } else { 8 };

    struct LibcAlloc;

    // SAFETY: every method returns memory from libc's allocator with at least
    // the requested size and alignment, or NULL; dealloc/realloc only receive
    // pointers this allocator returned (GlobalAlloc's contract).
    unsafe impl GlobalAlloc for LibcAlloc {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if layout.align() <= MALLOC_ALIGN && layout.align() <= layout.size() {
                // SAFETY: plain malloc of a non-zero size (Layout sizes of
                // allocations are non-zero).
                unsafe { libc::malloc(layout.size()).cast() }
            } else {
                aligned(layout)
            }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            if layout.align() <= MALLOC_ALIGN && layout.align() <= layout.size() {
                // SAFETY: calloc of one element of the layout's size.
                unsafe { libc::calloc(1, layout.size()).cast() }
            } else {
                let p = aligned(layout);
                if !p.is_null() {
                    // SAFETY: `p` holds `layout.size()` writable bytes.
                    unsafe { core::ptr::write_bytes(p, 0, layout.size()) };
                }
                p
            }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
            // SAFETY: `ptr` came from malloc, calloc, realloc or posix_memalign.
            unsafe { libc::free(ptr.cast()) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if layout.align() <= MALLOC_ALIGN && layout.align() <= new_size {
                // SAFETY: `ptr` came from this allocator; realloc keeps the
                // malloc alignment, which covers `layout.align()`.
                unsafe { libc::realloc(ptr.cast(), new_size).cast() }
            } else {
                // SAFETY: the new layout is valid (GlobalAlloc::realloc's contract).
                let new = aligned(unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) });
                if !new.is_null() {
                    // SAFETY: both blocks hold at least the smaller size; they are distinct.
                    unsafe { core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
                    // SAFETY: `ptr` came from this allocator.
                    unsafe { libc::free(ptr.cast()) };
                }
                new
            }
        }
    }

    fn aligned(layout: Layout) -> *mut u8 {
        let mut p: *mut c_void = core::ptr::null_mut();
        let align = layout.align().max(core::mem::size_of::<usize>());
        // SAFETY: `align` is a power of two and a multiple of the pointer size.
        if unsafe { libc::posix_memalign(&mut p, align, layout.size()) } != 0 {
            return core::ptr::null_mut();
        }
        p.cast()
    }

    #[global_allocator]
    static ALLOCATOR: LibcAlloc = LibcAlloc;

    /// `rust_eh_personality`: the unwinding personality that core's and
    /// alloc's precompiled code (built with unwinding) refers to, and that
    /// std would define. Nothing of ours unwinds (panics abort); should a
    /// foreign exception (C++) unwind into a frame of ours, the process
    /// stops, as unwinding out of an `extern "C"` function must. Defined in
    /// assembly, as a jump to this function, because only there can it be
    /// hidden: a `#[no_mangle]` Rust function would be exported by the
    /// shared library (and could interpose an app's own Rust runtime).
    extern "C" fn personality_abort() -> ! {
        let mut m = super::Line::<80>::new();
        let _ = m.write_str("wsp_ggml_backend: an exception unwound into the library, aborting");
        m.emit_fatal()
    }

    /// The unwinder's entry points that core's and alloc's precompiled code
    /// refers to (ELF targets): `_Unwind_Resume`, which their landing pads
    /// (`alloc::fmt::format_inner`, `String::from_utf8_lossy`, ...) end
    /// with, and on 32-bit Arm the EHABI personality routines
    /// `__aeabi_unwind_cpp_pr0/1/2`, which every function's unwind table
    /// entry names (R_ARM_NONE, only to pull them into a static link).
    /// Left undefined, they make the library import the unwinder: libgcc_s.so.1
    /// on Linux, which neither artefact lists as needed, so a host without
    /// it fails to load ours (`undefined symbol: _Unwind_Resume`) and a
    /// static link needs `-lgcc_s`. Resolved here, to the same
    /// abort as the personality, and sound because never executed:
    /// - a landing pad, and so its `_Unwind_Resume`, runs only when the
    ///   unwinder enters it, after the personality routine of its frame
    ///   (ours, above, which aborts on its first call) chose it; our own
    ///   panics never unwind (panic = "abort");
    /// - an EHABI unwinder calls its own `__aeabi_unwind_cpp_pr*` for the
    ///   compact entries (libgcc's and LLVM libunwind's take the address
    ///   inside the unwinder), never the copy an object brings; glibc's
    ///   libc.so does the same, with hidden aborting stubs
    ///   (sysdeps/arm/aeabi_unwind_cpp_pr1.c: "never actually be called").
    ///
    /// Hidden, like the personality: the shared library does not export
    /// them (every call binds inside it), and scripts/staticlib makes them
    /// local in the shipped archive, so they never stand in for the app's
    /// own unwinder. (cargo's raw archive keeps them global and hidden, which
    /// would capture a C++ program's calls: one more reason not to ship
    /// that one.) Apple's archives are built from source without unwinding:
    /// no landing pads, nothing to resolve.
    #[cfg(not(target_vendor = "apple"))]
    macro_rules! hidden_abort {
        ($jump:literal, $($name:literal),+) => {
            $(core::arch::global_asm!(
                concat!(".pushsection .text.", $name, ",\"ax\",%progbits"),
                concat!(".globl ", $name),
                concat!(".hidden ", $name),
                concat!(".type ", $name, ",%function"),
                concat!($name, ":"),
                concat!($jump, " {f}"),
                concat!(".size ", $name, ", .-", $name),
                ".popsection",
                f = sym personality_abort,
            );)+
        };
    }
    #[cfg(all(not(target_vendor = "apple"), any(target_arch = "x86_64", target_arch = "x86")))]
    hidden_abort!("jmp", "rust_eh_personality", "_Unwind_Resume");
    #[cfg(all(not(target_vendor = "apple"), target_arch = "aarch64"))]
    hidden_abort!("b", "rust_eh_personality", "_Unwind_Resume");
    #[cfg(all(not(target_vendor = "apple"), target_arch = "arm"))]
    hidden_abort!(
        "b",
        "rust_eh_personality",
        "_Unwind_Resume",
        "__aeabi_unwind_cpp_pr0",
        "__aeabi_unwind_cpp_pr1",
        "__aeabi_unwind_cpp_pr2"
    );

    #[cfg(target_vendor = "apple")]
    macro_rules! personality {
        ($jump:literal) => {
            core::arch::global_asm!(
                ".globl _rust_eh_personality",
                ".private_extern _rust_eh_personality",
                "_rust_eh_personality:",
                concat!($jump, " {f}"),
                f = sym personality_abort,
            );
        };
    }
    #[cfg(all(target_vendor = "apple", any(target_arch = "x86_64", target_arch = "x86")))]
    personality!("jmp");
    #[cfg(all(target_vendor = "apple", any(target_arch = "aarch64", target_arch = "arm")))]
    personality!("b");

    /// A Rust panic inside the library is a bug of ours: say so, with
    /// where and why, and abort (no unwinding ever reaches C). An
    /// allocation that failed (a collection that could not grow) comes
    /// here too, from alloc's handler: that is no bug, and gets the
    /// out-of-memory message. Nothing here allocates.
    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        let mut m = super::Line::<512>::new();
        let _ = write!(m, "{info}");
        if let Some(bytes) = super::failed_allocation(m.as_bytes()) {
            super::out_of_memory("wsp_ggml_backend", bytes);
        }
        let mut m = super::Line::<512>::new();
        let _ = write!(m, "wsp_ggml_backend: internal error (Rust panic), aborting: {info}");
        m.emit_fatal()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_allocation_reads_alloc_handlers_message() {
        assert_eq!(failed_allocation(b"memory allocation of 424 bytes failed"), Some(424));
        assert_eq!(failed_allocation(b"panicked at alloc.rs:1:2:\nmemory allocation of 80 bytes failed"), Some(80));
        assert_eq!(failed_allocation(b"memory allocation of  bytes failed"), None);
        assert_eq!(failed_allocation(b"memory allocation of 12 bytes"), None);
        assert_eq!(failed_allocation(b"index out of bounds"), None);
    }

    #[test]
    fn a_nested_failure_is_left_to_the_running_export() {
        let outer = EntryFrame::new("wsp_ggml_backend_sched_graph_compute");
        let _running = enter(&outer);
        {
            // a nested export (the CPU backend's alloc_buffer) does not
            // replace the running call, and leaves its failure to it
            let inner = EntryFrame::new("wsp_ggml_backend_alloc_buffer");
            let _nested = enter(&inner);
            report_out_of_memory("wsp_ggml_backend_alloc_buffer", 4096);
        }
        assert_eq!(current_frame().map(|f| f.name), Some("wsp_ggml_backend_sched_graph_compute"));
        assert_eq!(pending_out_of_memory(), Some(4096));
        assert_eq!(pending_out_of_memory(), None, "taken once");
    }

    #[test]
    fn the_running_call_ends_with_its_scope() {
        {
            let frame = EntryFrame::new("wsp_ggml_backend_cpu_init");
            let _running = enter(&frame);
            assert_eq!(current_frame().map(|f| f.name), Some("wsp_ggml_backend_cpu_init"));
        }
        assert!(current_frame().is_none());
        assert_eq!(pending_out_of_memory(), None);
    }

    #[test]
    fn try_box_boxes_the_value() {
        let b = try_box([7u64, 8, 9]).expect("memory");
        assert_eq!(*b, [7, 8, 9]);
    }

    #[test]
    fn a_line_is_cut_at_its_capacity() {
        let mut line = Line::<8>::new();
        let _ = write!(line, "0123456789");
        assert!(!line.fits());
        assert_eq!(line.as_bytes(), b"012345", "two bytes are kept for the newline and the NUL");
        assert_eq!(line.terminated(), b"012345\n\0");
    }
}
