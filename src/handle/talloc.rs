//! ggml-alloc's allocator (`wsp_ggml_tallocr`), owned: [`Tallocr`] makes,
//! frees and asks it, and is the only place that calls ggml-alloc's
//! allocator functions. And its struct, read: the free blocks of a compute
//! allocator, which ggml-alloc has no call for. Read field by field from its
//! private struct ([`TallocrHead`], laid out in `sys` and checked with each
//! target's C compiler), each field validated before the next is read.

use crate::prelude::*;

use core::ffi::{c_int, c_void};
use core::marker::PhantomData;
use core::ptr::NonNull;

use super::refs::{assert_owning, wsp_ggml_backend_buffer, BackendRef, BufferRef, OwnedBuffer};
use crate::fatal::fatal;
use crate::ggml::{
    self, wsp_ggml_tallocr, wsp_ggml_tallocr_get_buffer, wsp_ggml_tallocr_is_measure, wsp_ggml_tallocr_max_size, wsp_ggml_tallocr_t,
    FreeBlock, TallocrHead, TensorRef, TALLOCR_MAX_FREE_BLOCKS,
};

/// A ggml-alloc allocator this library made, and owns: freed on drop,
/// then the buffer it was made in if it holds that one too ([`Tallocr::owning`]).
/// `'b`: the buffer it allocates in, when borrowed ([`Tallocr::over`]).
pub(crate) struct Tallocr<'b> {
    raw: NonNull<wsp_ggml_tallocr>,
    /// Its buffer, read once: an allocator's buffer never changes.
    buffer: NonNull<wsp_ggml_backend_buffer>,
    /// A buffer the allocator does not own (ggml-alloc frees only the ones
    /// it allocated), held for it: freed after it (fields drop after `drop`).
    _held: Option<OwnedBuffer>,
    _borrows: PhantomData<BufferRef<'b>>,
}

assert_owning!(Tallocr<'static>);

impl Tallocr<'static> {
    /// What ggml-alloc made (`what`: the call, for the message).
    fn made(raw: wsp_ggml_tallocr_t, buffer: Option<OwnedBuffer>, what: &str) -> Self {
        let raw = NonNull::new(raw).unwrap_or_else(|| fatal(what, "ggml-alloc made no allocator"));
        Tallocr { raw, buffer: buffer_of(raw, what), _held: buffer, _borrows: PhantomData }
    }

    /// A measure allocator for `backend` (ggml-alloc allocates a 1-byte
    /// buffer from it, and owns it).
    pub fn measure(backend: BackendRef) -> Self {
        // SAFETY: a live backend (BackendRef invariant).
        let raw = unsafe { ggml::wsp_ggml_tallocr_new_measure_from_backend(backend.as_ptr()) };
        Self::made(raw, None, "wsp_ggml_tallocr_new_measure_from_backend")
    }

    /// An allocator over a new buffer of `size` bytes from `backend`, as
    /// ggml-alloc's `wsp_ggml_tallocr_new_from_backend` makes, but checked:
    /// where the backend has no memory for it, `func` stops with the
    /// out-of-memory message (ggml-alloc would use the NULL buffer).
    pub fn with_buffer_of(backend: BackendRef, size: usize, func: &str) -> Self {
        match backend.alloc_owned_buffer(size) {
            Some(buffer) => Self::owning(buffer),
            None => crate::platform::out_of_memory(func, crate::platform::pending_out_of_memory().unwrap_or(size)),
        }
    }

    /// An allocator in `buffer`, which it keeps and frees after itself.
    pub fn owning(buffer: OwnedBuffer) -> Self {
        // SAFETY: a live buffer, kept alive with the allocator.
        let raw = unsafe { ggml::wsp_ggml_tallocr_new_from_buffer(buffer.as_ptr()) };
        Self::made(raw, Some(buffer), "wsp_ggml_tallocr_new_from_buffer")
    }
}

/// The buffer of a new allocator (`what` made it).
fn buffer_of(raw: NonNull<wsp_ggml_tallocr>, what: &str) -> NonNull<wsp_ggml_backend_buffer> {
    // SAFETY: a live allocator, just made.
    NonNull::new(unsafe { wsp_ggml_tallocr_get_buffer(raw.as_ptr()) })
        .unwrap_or_else(|| fatal(what, "ggml-alloc made an allocator without a buffer"))
}

impl<'b> Tallocr<'b> {
    /// An allocator in `buffer`, borrowed: it cannot outlive the buffer.
    pub fn over(buffer: BufferRef<'b>) -> Self {
        // SAFETY: a live buffer, for at least `'b`, which the allocator
        // does not outlive.
        let raw = unsafe { ggml::wsp_ggml_tallocr_new_from_buffer(buffer.as_ptr()) };
        let raw = NonNull::new(raw).unwrap_or_else(|| fatal("wsp_ggml_tallocr_new_from_buffer", "ggml-alloc made no allocator"));
        Tallocr { raw, buffer: buffer_of(raw, "wsp_ggml_tallocr_new_from_buffer"), _held: None, _borrows: PhantomData }
    }

    /// The allocator, for C (`sched_get_tallocr`): valid while `self` is.
    pub fn as_ptr(&self) -> wsp_ggml_tallocr_t {
        self.raw.as_ptr()
    }

    /// The buffer it allocates in.
    #[inline]
    pub fn buffer(&self) -> BufferRef<'_> {
        // SAFETY: our live allocator's buffer, live as long as it is.
        unsafe { BufferRef::new(self.buffer.as_ptr()) }.expect("NonNull")
    }

    pub fn is_measure(&self) -> bool {
        // SAFETY: our live allocator.
        unsafe { wsp_ggml_tallocr_is_measure(self.as_ptr()) }
    }

    /// The most it has held since it was made or reset.
    pub fn max_size(&self) -> usize {
        // SAFETY: our live allocator.
        unsafe { wsp_ggml_tallocr_max_size(self.as_ptr()) }
    }

    /// Everything free again.
    pub fn reset(&self) {
        // SAFETY: our live allocator.
        unsafe { ggml::wsp_ggml_tallocr_reset(self.as_ptr()) }
    }

    /// Allocate `t` (ggml-alloc stops the process when it does not fit).
    pub fn alloc(&self, t: TensorRef) {
        // SAFETY: our live allocator and a live tensor.
        unsafe { ggml::wsp_ggml_tallocr_alloc(self.as_ptr(), t.as_ptr()) }
    }

    /// Its free blocks, read from its struct into `blocks` (see
    /// [`tallocr_free_blocks`]; the vector is reused, a compute allocates
    /// nothing); false when they cannot be read.
    pub fn free_blocks(&self, blocks: &mut Vec<(usize, usize)>) -> bool {
        // SAFETY: our live allocator, not written during the read.
        unsafe { tallocr_free_blocks(self.as_ptr(), blocks) }
    }
}

impl Drop for Tallocr<'_> {
    fn drop(&mut self) {
        // SAFETY: our allocator, freed once, here; the buffer it was made
        // in (if we hold it) is freed after it, when `self._held` drops.
        unsafe { ggml::wsp_ggml_tallocr_free(self.as_ptr()) }
    }
}

/// The free blocks of an allocator (offset from its buffer's base, size),
/// sorted by offset: what ggml-alloc would hand out next. ggml-alloc has no
/// call for this; it is read from its private struct ([`TallocrHead`]).
/// `None` when the allocator does not look like whisper.cpp 1.5's (another
/// ggml-alloc): the caller then falls back to what it can see without it.
/// With `WSP_GGML_SCHED_DEBUG` set, a mismatch is reported on stderr with
/// the first field that did not validate.
///
/// # Safety
/// As [`read_tallocr`].
unsafe fn tallocr_free_blocks(talloc: wsp_ggml_tallocr_t, blocks: &mut Vec<(usize, usize)>) -> bool {
    // SAFETY: the caller's contract.
    match unsafe { read_tallocr(talloc, blocks) } {
        Ok(()) => true,
        Err(field) => {
            if crate::platform::env_flag(c"WSP_GGML_SCHED_DEBUG") {
                crate::platform::errln!(
                    "wsp_ggml_backend_sched: allocator {talloc:p} is not ggml-alloc's of whisper.cpp 1.5 ({field:?} does not match); \
                     its free blocks are not read"
                );
            }
            false
        }
    }
}

/// The first field of an allocator that is not what ggml-alloc of
/// whisper.cpp 1.5 would hold there ([`read_tallocr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TallocrMismatch {
    /// NULL allocator, or one without a buffer
    Allocator,
    Buffer,
    BufferOwned,
    Base,
    Alignment,
    NFreeBlocks,
    /// free block `k`: outside the buffer, unaligned, or before block `k - 1` ends
    FreeBlock(usize),
    MaxSize,
    Measure,
}

/// Read ggml-alloc's allocator struct field by field, in memory order, each
/// checked before the next is read: its buffer is the one
/// `wsp_ggml_tallocr_get_buffer` returns; `buffer_owned` a C bool; `base`
/// the buffer's base; `alignment` a power of two, the buffer's; at most
/// `MAX_FREE_BLOCKS` free blocks, each aligned, inside the buffer (a measure
/// allocator's one block is SIZE_MAX/2 long), sorted and apart; then past
/// the blocks, `max_size` and `measure` equal what the public calls say.
/// Writes the free blocks as (offset from the base, size) into `blocks`
/// (cleared first).
///
/// # Safety
/// `talloc` is NULL or a live ggml-alloc allocator (of whichever ggml-alloc:
/// only fields that validate are trusted), not written during the call.
pub(crate) unsafe fn read_tallocr(talloc: wsp_ggml_tallocr_t, blocks: &mut Vec<(usize, usize)>) -> Result<(), TallocrMismatch> {
    if talloc.is_null() {
        return Err(TallocrMismatch::Allocator);
    }
    // SAFETY: a live allocator (the caller's contract); the public calls only read it.
    let (buffer, measure, max_size) =
        unsafe { (wsp_ggml_tallocr_get_buffer(talloc), wsp_ggml_tallocr_is_measure(talloc), wsp_ggml_tallocr_max_size(talloc)) };
    // SAFETY: an allocator's buffer is NULL or live as long as the allocator.
    let buffer = unsafe { BufferRef::new(buffer) }.ok_or(TallocrMismatch::Allocator)?;
    // SAFETY: `talloc` is ggml-alloc's allocator struct, live for this call
    // and not written meanwhile (the caller's contract); whichever
    // ggml-alloc made it, its struct starts with the buffer pointer and a
    // bool at least.
    unsafe { read_tallocr_head(talloc.cast(), buffer, measure, max_size, blocks) }
}

/// One field of the allocator struct at `head`, by value, read through the
/// raw pointer (no reference into memory ggml-alloc owns).
///
/// # Safety
/// `offset .. offset + size_of::<T>()` of `head` is readable and aligned for
/// `T`, and `T` is an integer or a raw pointer (any bytes are a value).
unsafe fn tallocr_field<T: Copy>(head: *const TallocrHead, offset: usize) -> T {
    // SAFETY: the caller's contract.
    unsafe { head.cast::<u8>().add(offset).cast::<T>().read() }
}

/// [`read_tallocr`] on the struct at `head`, given what the public calls
/// said of it (its buffer, whether it measures, its max size).
///
/// # Safety
/// `head` points to an allocator struct that is readable, as ggml-alloc of
/// whisper.cpp 1.5 lays it out, at least up to the first field that does
/// not match: nothing after a mismatch is read. Its fields are pointers,
/// integers and C bools; the bools are read as bytes.
unsafe fn read_tallocr_head(
    head: *const TallocrHead,
    buffer: BufferRef,
    measure: bool,
    max_size: usize,
    blocks: &mut Vec<(usize, usize)>,
) -> Result<(), TallocrMismatch> {
    use core::mem::{offset_of, size_of};
    use TallocrMismatch as M;
    // Every read: the field lies inside the part of the struct the caller
    // guarantees, since every field before it matched.
    // SAFETY: as just said; the first field.
    if unsafe { tallocr_field::<*mut wsp_ggml_backend_buffer>(head, offset_of!(TallocrHead, buffer)) } != buffer.as_ptr() {
        return Err(M::Buffer);
    }
    // SAFETY: as above.
    if unsafe { tallocr_field::<u8>(head, offset_of!(TallocrHead, buffer_owned)) } > 1 {
        return Err(M::BufferOwned);
    }
    let start = buffer.base() as usize;
    // SAFETY: as above.
    if unsafe { tallocr_field::<*mut c_void>(head, offset_of!(TallocrHead, base)) } as usize != start {
        return Err(M::Base);
    }
    // SAFETY: as above.
    let alignment = unsafe { tallocr_field::<usize>(head, offset_of!(TallocrHead, alignment)) };
    if !alignment.is_power_of_two() || alignment != buffer.alignment() {
        return Err(M::Alignment);
    }
    // SAFETY: as above.
    let n = unsafe { tallocr_field::<c_int>(head, offset_of!(TallocrHead, n_free_blocks)) };
    let n = usize::try_from(n).ok().filter(|&n| n <= TALLOCR_MAX_FREE_BLOCKS).ok_or(M::NFreeBlocks)?;
    // Offsets from the base, so that nothing wraps on 32-bit targets: the
    // blocks start at the first aligned address (less than `alignment` in)
    // and end at the buffer's end, or SIZE_MAX/2 later for a measure one.
    let end = if measure { (usize::MAX / 2).saturating_add(alignment) } else { buffer.size() };
    blocks.clear();
    let mut at = 0;
    for k in 0..n {
        let block = offset_of!(TallocrHead, free_blocks) + k * size_of::<FreeBlock>();
        // SAFETY: as above: k < n <= MAX_FREE_BLOCKS, inside the array,
        // and block k - 1 matched.
        let (addr, size) = unsafe {
            (
                tallocr_field::<*mut c_void>(head, block + offset_of!(FreeBlock, addr)) as usize,
                tallocr_field::<usize>(head, block + offset_of!(FreeBlock, size)),
            )
        };
        let offset = addr.wrapping_sub(start);
        if addr < start || addr % alignment != 0 || offset < at || offset > end || end - offset < size {
            return Err(M::FreeBlock(k));
        }
        blocks.push((offset, size));
        at = offset + size;
    }
    // SAFETY: as above: every field before matched, so the struct is this
    // one, whose max_size and measure follow the array.
    if unsafe { tallocr_field::<usize>(head, offset_of!(TallocrHead, max_size)) } != max_size {
        return Err(M::MaxSize);
    }
    // SAFETY: as above.
    let m = unsafe { tallocr_field::<u8>(head, offset_of!(TallocrHead, measure)) };
    if m > 1 || (m == 1) != measure {
        return Err(M::Measure);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::OwnedBuffer;

    /// A CPU buffer over `mem` and the allocator struct ggml-alloc of
    /// whisper.cpp 1.5 would make for it, reset (one free block).
    struct Fixture {
        buffer: OwnedBuffer,
        _mem: Vec<u8>,
        head: Box<TallocrHead>,
        align_offset: usize,
    }

    impl Fixture {
        fn new(size: usize) -> Fixture {
            let mut mem = vec![0u8; size];
            let owner = crate::cpu::buffer_from_ptr(None, mem.as_mut_ptr().cast(), size).expect("memory");
            let buffer = owner.get();
            let alignment = buffer.alignment();
            let base = buffer.base() as usize;
            let align_offset = (alignment - base % alignment) % alignment;
            // SAFETY: pointers, integers and bytes only: all-zero is a value.
            let mut head: Box<TallocrHead> = Box::new(unsafe { core::mem::zeroed() });
            head.buffer = buffer.as_ptr();
            head.base = buffer.base();
            head.alignment = alignment;
            head.n_free_blocks = 1;
            head.free_blocks[0] =
                FreeBlock { addr: buffer.base().wrapping_byte_add(align_offset), size: size.saturating_sub(align_offset) };
            Fixture { buffer: owner, _mem: mem, head, align_offset }
        }
        fn read(&self, measure: bool, max_size: usize) -> Result<Vec<(usize, usize)>, TallocrMismatch> {
            let mut blocks = Vec::new();
            // SAFETY: a whole TallocrHead, alive for the call.
            unsafe { read_tallocr_head(&*self.head, self.buffer.get(), measure, max_size, &mut blocks) }.map(|()| blocks)
        }
        fn addr(&self, offset: usize) -> *mut c_void {
            self.buffer.get().base().wrapping_byte_add(offset)
        }
    }
    // (the buffer, owned, is freed when the fixture drops, before its memory)

    #[test]
    fn a_reset_allocator_validates() {
        let f = Fixture::new(4096);
        assert_eq!(f.read(false, 0), Ok(vec![(f.align_offset, 4096 - f.align_offset)]));
    }

    #[test]
    fn free_blocks_are_read_as_offsets_in_order() {
        let mut f = Fixture::new(4096);
        let a = f.align_offset;
        f.head.n_free_blocks = 3;
        f.head.free_blocks[0] = FreeBlock { addr: f.addr(a + 64), size: 64 };
        f.head.free_blocks[1] = FreeBlock { addr: f.addr(a + 256), size: 0 };
        f.head.free_blocks[2] = FreeBlock { addr: f.addr(a + 512), size: 4096 - a - 512 };
        f.head.max_size = 512;
        assert_eq!(f.read(false, 512), Ok(vec![(a + 64, 64), (a + 256, 0), (a + 512, 4096 - a - 512)]));
        // no free block at all: a full buffer
        f.head.n_free_blocks = 0;
        assert_eq!(f.read(false, 512), Ok(vec![]));
    }

    #[test]
    fn a_measure_allocator_has_one_block_of_half_the_address_space() {
        let mut f = Fixture::new(1);
        f.head.free_blocks[0].size = usize::MAX / 2;
        f.head.measure = 1;
        assert_eq!(f.read(true, 0), Ok(vec![(f.align_offset, usize::MAX / 2)]));
        // the same block in a plain allocator reaches past its buffer
        assert_eq!(f.read(false, 0), Err(TallocrMismatch::FreeBlock(0)));
    }

    /// Each field that does not hold what ggml-alloc would is named, and the
    /// first one wins: nothing after it is looked at.
    #[test]
    fn every_field_is_checked_in_memory_order() {
        use TallocrMismatch as M;
        type Corrupt = fn(&mut Fixture);
        let cases: [(M, Corrupt); 17] = [
            (M::Buffer, |f| f.head.buffer = f.head.buffer.wrapping_add(1)),
            (M::BufferOwned, |f| f.head.buffer_owned = 2),
            (M::Base, |f| f.head.base = f.addr(1)),
            (M::Alignment, |f| f.head.alignment = 48),
            (M::Alignment, |f| f.head.alignment /= 2),
            (M::Alignment, |f| f.head.alignment = 0),
            (M::NFreeBlocks, |f| f.head.n_free_blocks = -1),
            (M::NFreeBlocks, |f| f.head.n_free_blocks = TALLOCR_MAX_FREE_BLOCKS as c_int + 1),
            (M::FreeBlock(0), |f| f.head.free_blocks[0].addr = f.addr(f.align_offset + 1)),
            (M::FreeBlock(0), |f| f.head.free_blocks[0].addr = f.buffer.get().base().wrapping_byte_sub(64)),
            (M::FreeBlock(0), |f| f.head.free_blocks[0].size += 1),
            (M::FreeBlock(0), |f| f.head.free_blocks[0].addr = f.addr(8192)),
            // two blocks out of order, or overlapping
            (M::FreeBlock(1), |f| {
                f.head.n_free_blocks = 2;
                f.head.free_blocks[0] = FreeBlock { addr: f.addr(f.align_offset + 128), size: 64 };
                f.head.free_blocks[1] = FreeBlock { addr: f.addr(f.align_offset), size: 64 };
            }),
            (M::FreeBlock(1), |f| {
                f.head.n_free_blocks = 2;
                f.head.free_blocks[0] = FreeBlock { addr: f.addr(f.align_offset), size: 128 };
                f.head.free_blocks[1] = FreeBlock { addr: f.addr(f.align_offset + 64), size: 64 };
            }),
            (M::MaxSize, |f| f.head.max_size = 64),
            (M::Measure, |f| f.head.measure = 1),
            (M::Measure, |f| f.head.measure = 3),
        ];
        for (expected, corrupt) in cases {
            let mut f = Fixture::new(4096);
            corrupt(&mut f);
            assert_eq!(f.read(false, 0), Err(expected));
            // a later field wrong as well changes nothing
            f.head.measure = 9;
            assert_eq!(f.read(false, 0), Err(expected));
        }
    }

    /// A struct that stops matching early is not read past that field: here
    /// only its first two fields exist (Miri would report a read beyond).
    #[test]
    fn a_mismatch_stops_the_reading() {
        let f = Fixture::new(64);
        let short: Box<[usize; 2]> = Box::new([f.buffer.as_ptr() as usize, 7]);
        let head = (&*short as *const [usize; 2]).cast::<TallocrHead>();
        // SAFETY: readable up to the bool, which does not match.
        assert_eq!(unsafe { read_tallocr_head(head, f.buffer.get(), false, 0, &mut Vec::new()) }, Err(TallocrMismatch::BufferOwned));
    }
}
