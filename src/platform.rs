//! What the library needs from the platform, through libc only: writing to
//! stderr, aborting, reading an environment switch and a monotonic clock;
//! and, where the crate is built without std, the allocator and the panic
//! handler.
//!
//! The library is `no_std` in every build that aborts on panic (the release
//! profile users link, and `dev-abort`, which the C tests link). It keeps
//! std where unwinding is required (the dev profile, Rust test binaries)
//! and with the `std` feature (the benchmark and test crates, which link it
//! into std programs). The two flavours differ only in this file and in
//! `fatal::guard`.

use alloc::string::String;
use core::ffi::CStr;
use core::fmt::{self, Write};

/// Write all of `bytes` to stderr (fd 2), as one `write` when it fits.
pub fn write_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: the pointer and length describe the live slice `bytes`.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            return; // nowhere to report a failing stderr
        }
        bytes = &bytes[n as usize..];
    }
}

/// Write one formatted line to stderr in a single write (lines of
/// concurrent threads do not interleave).
pub fn eprint_line(args: fmt::Arguments<'_>) {
    let mut s = String::new();
    let _ = s.write_fmt(args);
    s.push('\n');
    write_stderr(s.as_bytes());
}

/// `eprintln!` for this crate: formats, then writes the line through libc.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::platform::eprint_line(format_args!($($arg)*))
    };
}
pub(crate) use errln;

/// Abort the process (SIGABRT), as the original's asserts do.
pub fn abort() -> ! {
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

    /// A fixed buffer for the panic message: the handler must not allocate
    /// (the allocator may be what failed). Longer messages are cut.
    struct Fixed {
        buf: [u8; 512],
        len: usize,
    }

    impl Write for Fixed {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let n = s.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
            Ok(())
        }
    }

    /// `rust_eh_personality`: the unwinding personality that core's and
    /// alloc's precompiled code (built with unwinding) refers to, and that
    /// std would define. Nothing of ours unwinds (panics abort); should a
    /// foreign exception (C++) unwind into a frame of ours, the process
    /// stops, as unwinding out of an `extern "C"` function must. Defined in
    /// assembly, as a jump to this function, because only there can it be
    /// hidden: a `#[no_mangle]` Rust function would be exported by the
    /// shared library (and could interpose an app's own Rust runtime).
    extern "C" fn personality_abort() -> ! {
        super::write_stderr(b"wsp_ggml_backend: an exception unwound into the library, aborting\n");
        super::abort()
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
    /// static link needs `-lgcc_s` (issue 28). Resolved here, to the same
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
    /// where and why, and abort (no unwinding ever reaches C).
    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        let mut m = Fixed { buf: [0; 512], len: 0 };
        let _ = write!(m, "wsp_ggml_backend: internal error (Rust panic), aborting: {info}");
        if m.len == m.buf.len() {
            m.len -= 1;
        }
        m.buf[m.len] = b'\n';
        super::write_stderr(&m.buf[..=m.len]);
        super::abort()
    }
}
