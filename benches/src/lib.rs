//! Benchmark support: the two implementations side by side in one process.
//!
//! build.rs compiles the C driver `c/bench_drv.c` twice: `ours_bench_*`
//! calls our Rust library (`wsp_ggml_backend`, linked as an rlib), and
//! `ref_bench_*` calls the original `ggml-backend.c` (renamed `ref_ggml_`,
//! with its own private copy of ggml). [`Impl`] is a table of one driver's
//! entry points; [`OURS`] and [`REF`] are the two tables. The wrappers below
//! own the C objects and free them on drop.

use core::ffi::{c_int, c_long, c_void};
use std::time::{Duration, Instant};

// Make sure the Rust library is linked in (its symbols are only referenced
// from C).
pub use wsp_ggml_backend as _ours;

macro_rules! driver {
    ($modname:ident, $name:literal, $p:literal) => {
        pub mod $modname {
            use core::ffi::{c_int, c_long, c_void};
            extern "C" {
                #[link_name = concat!($p, "sched_setup")]
                pub fn sched_setup(n_backends: c_int, n_nodes: c_int, with_sched: c_int) -> *mut c_void;
                #[link_name = concat!($p, "sched_setup_blocks")]
                pub fn sched_setup_blocks(n_backends: c_int, n_nodes: c_int, block_nodes: c_int, with_sched: c_int) -> *mut c_void;
                #[link_name = concat!($p, "sched_restore")]
                pub fn sched_restore(sb: *mut c_void);
                #[link_name = concat!($p, "sched_create")]
                pub fn sched_create(sb: *mut c_void);
                #[link_name = concat!($p, "sched_measure")]
                pub fn sched_measure(sb: *mut c_void);
                #[link_name = concat!($p, "sched_destroy")]
                pub fn sched_destroy(sb: *mut c_void);
                #[link_name = concat!($p, "sched_cycle")]
                pub fn sched_cycle(sb: *mut c_void);
                #[link_name = concat!($p, "sched_compute")]
                pub fn sched_compute(sb: *mut c_void);
                #[link_name = concat!($p, "sched_compute_fresh")]
                pub fn sched_compute_fresh(sb: *mut c_void);
                #[link_name = concat!($p, "sched_compute_vary")]
                pub fn sched_compute_vary(sb: *mut c_void);
                #[link_name = concat!($p, "vary_loop")]
                pub fn vary_loop(sb: *mut c_void, iters: c_int);
                #[link_name = concat!($p, "sched_rebuild")]
                pub fn sched_rebuild(sb: *mut c_void, drop_last: c_int);
                #[link_name = concat!($p, "rebuilt_loop")]
                pub fn rebuilt_loop(sb: *mut c_void, iters: c_int);
                #[link_name = concat!($p, "rebuilt_vary_loop")]
                pub fn rebuilt_vary_loop(sb: *mut c_void, iters: c_int);
                #[link_name = concat!($p, "sched_loop")]
                pub fn sched_loop(sb: *mut c_void, iters: c_int);
                #[link_name = concat!($p, "cycle_loop")]
                pub fn cycle_loop(sb: *mut c_void, iters: c_int);
                #[link_name = concat!($p, "sched_checksum")]
                pub fn sched_checksum(sb: *mut c_void) -> u64;
                #[link_name = concat!($p, "sched_buffer_bytes")]
                pub fn sched_buffer_bytes(sb: *mut c_void) -> usize;
                #[link_name = concat!($p, "sched_graph_hash_size")]
                pub fn sched_graph_hash_size(sb: *mut c_void) -> usize;
                #[link_name = concat!($p, "sched_n_leafs")]
                pub fn sched_n_leafs(sb: *mut c_void) -> c_int;
                #[link_name = concat!($p, "sched_test_stats")]
                pub fn sched_test_stats(sb: *mut c_void, graph_computes: *mut c_long, copies: *mut c_long);
                #[link_name = concat!($p, "sched_teardown")]
                pub fn sched_teardown(sb: *mut c_void);
                #[link_name = concat!($p, "quiet_stderr")]
                pub fn quiet_stderr();
                #[link_name = concat!($p, "causes_pad_offset")]
                pub fn causes_pad_offset() -> c_long;
                #[link_name = concat!($p, "io_setup")]
                pub fn io_setup(size: usize) -> *mut c_void;
                #[link_name = concat!($p, "io_set")]
                pub fn io_set(io: *mut c_void, src: *const c_void);
                #[link_name = concat!($p, "io_get")]
                pub fn io_get(io: *mut c_void, dst: *mut c_void);
                #[link_name = concat!($p, "io_copy")]
                pub fn io_copy(io: *mut c_void);
                #[link_name = concat!($p, "io_data")]
                pub fn io_data(io: *mut c_void, which: c_int) -> *mut c_void;
                #[link_name = concat!($p, "io_teardown")]
                pub fn io_teardown(io: *mut c_void);
                #[link_name = concat!($p, "enc_setup")]
                pub fn enc_setup(n_threads: c_int, n_ctx: c_int) -> *mut c_void;
                #[link_name = concat!($p, "enc_compute")]
                pub fn enc_compute(e: *mut c_void);
                #[link_name = concat!($p, "enc_compute_direct")]
                pub fn enc_compute_direct(e: *mut c_void);
                #[link_name = concat!($p, "enc_checksum")]
                pub fn enc_checksum(e: *mut c_void) -> u64;
                #[link_name = concat!($p, "enc_n_nodes")]
                pub fn enc_n_nodes(e: *mut c_void) -> c_int;
                #[link_name = concat!($p, "enc_teardown")]
                pub fn enc_teardown(e: *mut c_void);
                #[link_name = concat!($p, "step_setup_chain")]
                pub fn step_setup_chain(n_ops: c_int, block_ops: c_int, grow: c_int, iters: c_int) -> *mut c_void;
                #[link_name = concat!($p, "step_setup_decoder")]
                pub fn step_setup_decoder(n_layer: c_int, iters: c_int) -> *mut c_void;
                #[link_name = concat!($p, "step_loop")]
                pub fn step_loop(s: *mut c_void, iters: c_int);
                #[link_name = concat!($p, "step_result")]
                pub fn step_result(s: *mut c_void, k: c_int, n_nodes: *mut c_int, test_splits: *mut c_long, checksum: *mut u64) -> bool;
                #[link_name = concat!($p, "step_graph_hash_size")]
                pub fn step_graph_hash_size(s: *mut c_void) -> usize;
                #[link_name = concat!($p, "step_teardown")]
                pub fn step_teardown(s: *mut c_void);
            }
            pub const TABLE: super::Impl = super::Impl {
                name: $name,
                sched_setup,
                sched_setup_blocks,
                sched_restore,
                sched_create,
                sched_measure,
                sched_destroy,
                sched_cycle,
                sched_compute,
                sched_compute_fresh,
                sched_compute_vary,
                vary_loop,
                sched_rebuild,
                rebuilt_loop,
                rebuilt_vary_loop,
                sched_loop,
                cycle_loop,
                sched_checksum,
                sched_buffer_bytes,
                sched_graph_hash_size,
                sched_n_leafs,
                sched_test_stats,
                sched_teardown,
                quiet_stderr,
                causes_pad_offset,
                io_setup,
                io_set,
                io_get,
                io_copy,
                io_data,
                io_teardown,
                enc_setup,
                enc_compute,
                enc_compute_direct,
                enc_checksum,
                enc_n_nodes,
                enc_teardown,
                step_setup_chain,
                step_setup_decoder,
                step_loop,
                step_result,
                step_graph_hash_size,
                step_teardown,
            };
        }
    };
}

driver!(ours, "ours", "ours_bench_");
driver!(r#ref, "ref", "ref_bench_");

extern "C" {
    fn bench_memcpy(dst: *mut c_void, src: *const c_void, n: usize);
}

type P = *mut c_void;

/// The entry points of one build of the C driver.
#[derive(Clone, Copy)]
pub struct Impl {
    /// "ours" or "ref" (the original ggml-backend.c).
    pub name: &'static str,
    pub sched_setup: unsafe extern "C" fn(c_int, c_int, c_int) -> P,
    pub sched_setup_blocks: unsafe extern "C" fn(c_int, c_int, c_int, c_int) -> P,
    pub sched_restore: unsafe extern "C" fn(P),
    pub sched_create: unsafe extern "C" fn(P),
    pub sched_measure: unsafe extern "C" fn(P),
    pub sched_destroy: unsafe extern "C" fn(P),
    pub sched_cycle: unsafe extern "C" fn(P),
    pub sched_compute: unsafe extern "C" fn(P),
    pub sched_compute_fresh: unsafe extern "C" fn(P),
    pub sched_compute_vary: unsafe extern "C" fn(P),
    pub vary_loop: unsafe extern "C" fn(P, c_int),
    pub sched_rebuild: unsafe extern "C" fn(P, c_int),
    pub rebuilt_loop: unsafe extern "C" fn(P, c_int),
    pub rebuilt_vary_loop: unsafe extern "C" fn(P, c_int),
    pub sched_loop: unsafe extern "C" fn(P, c_int),
    pub cycle_loop: unsafe extern "C" fn(P, c_int),
    pub sched_checksum: unsafe extern "C" fn(P) -> u64,
    pub sched_buffer_bytes: unsafe extern "C" fn(P) -> usize,
    pub sched_graph_hash_size: unsafe extern "C" fn(P) -> usize,
    pub sched_n_leafs: unsafe extern "C" fn(P) -> c_int,
    pub sched_test_stats: unsafe extern "C" fn(P, *mut c_long, *mut c_long),
    pub sched_teardown: unsafe extern "C" fn(P),
    pub quiet_stderr: unsafe extern "C" fn(),
    pub causes_pad_offset: unsafe extern "C" fn() -> c_long,
    pub io_setup: unsafe extern "C" fn(usize) -> P,
    pub io_set: unsafe extern "C" fn(P, *const c_void),
    pub io_get: unsafe extern "C" fn(P, *mut c_void),
    pub io_copy: unsafe extern "C" fn(P),
    pub io_data: unsafe extern "C" fn(P, c_int) -> P,
    pub io_teardown: unsafe extern "C" fn(P),
    pub enc_setup: unsafe extern "C" fn(c_int, c_int) -> P,
    pub enc_compute: unsafe extern "C" fn(P),
    pub enc_compute_direct: unsafe extern "C" fn(P),
    pub enc_checksum: unsafe extern "C" fn(P) -> u64,
    pub enc_n_nodes: unsafe extern "C" fn(P) -> c_int,
    pub enc_teardown: unsafe extern "C" fn(P),
    pub step_setup_chain: unsafe extern "C" fn(c_int, c_int, c_int, c_int) -> P,
    pub step_setup_decoder: unsafe extern "C" fn(c_int, c_int) -> P,
    pub step_loop: unsafe extern "C" fn(P, c_int),
    pub step_result: unsafe extern "C" fn(P, c_int, *mut c_int, *mut c_long, *mut u64) -> bool,
    pub step_graph_hash_size: unsafe extern "C" fn(P) -> usize,
    pub step_teardown: unsafe extern "C" fn(P),
}

pub const OURS: Impl = ours::TABLE;
pub const REF: Impl = r#ref::TABLE;
/// Both implementations, ours first.
pub const IMPLS: [Impl; 2] = [OURS, REF];

impl Impl {
    pub fn by_name(name: &str) -> Option<Impl> {
        IMPLS.into_iter().find(|i| i.name == name)
    }

    /// Send this process's stderr to /dev/null (the original prints on every
    /// `sched_new`).
    pub fn quiet_stderr(&self) {
        // SAFETY: no arguments; only redirects fd 2.
        unsafe { (self.quiet_stderr)() }
    }
}

// --- scheduler ------------------------------------------------------------------

/// Rows of the original's global `causes` array (2048*4 + 256*16).
pub const CAUSES_ROWS: usize = 2048 * 4 + 256 * 16;
/// Size of the pad build.rs links behind it.
pub const CAUSES_PAD_BYTES: usize = 4 << 20;
/// The original sizes its hash table as the measure graph's + 256*16.
pub const REF_HASH_EXTRA: usize = 256 * 16;

/// Nodes per split of benchmark 1's graph.
pub const BLOCK_NODES: usize = 64;
/// Splits of the "few-splits" family: the same graph in longer
/// blocks, [`FEW_SPLITS_NODES`] nodes in 8 splits over 2 backends.
pub const FEW_SPLITS: usize = 8;
/// Default size of the "few-splits" family (8 blocks of 96 layers).
pub const FEW_SPLITS_NODES: usize = 6144;

/// The original writes `causes[hash slot]` for slots up to its hash table
/// size (the measured graph's `graph_hash_size` + [`REF_HASH_EXTRA`]); make
/// sure those writes land in the pad build.rs put behind it. `what` names the
/// graph in the message.
fn check_causes_pad(imp: Impl, graph_hash_size: usize, what: &str) {
    // SAFETY: no arguments.
    let off = unsafe { (imp.causes_pad_offset)() };
    if off < 0 {
        return; // ours: no such array
    }
    let off = off as usize;
    let end = CAUSES_ROWS * 128;
    assert!((end..end + 4096).contains(&off), "the pad is not right behind `causes` (offset {off})");
    let slots = graph_hash_size + REF_HASH_EXTRA;
    let reach = slots.saturating_sub(CAUSES_ROWS) * 128;
    assert!(reach <= CAUSES_PAD_BYTES - (off - end), "{what}: the original would write {reach} bytes past `causes`, more than the pad");
}

/// The scheduler benchmark graph (see c/bench_drv.c): `n_nodes` tiny nodes
/// over `n_backends` backends, one split per 64 nodes ([`SchedBench::new`]) or
/// per `block_nodes` ([`SchedBench::with_blocks`]).
pub struct SchedBench {
    pub imp: Impl,
    pub n_backends: usize,
    pub n_nodes: usize,
    ptr: P,
}

impl SchedBench {
    /// Builds backends, weights and graph; with `with_sched`, also creates the
    /// scheduler and runs `init_measure` on the graph.
    pub fn new(imp: Impl, n_backends: usize, n_nodes: usize, with_sched: bool) -> SchedBench {
        SchedBench::with_blocks(imp, n_backends, n_nodes, BLOCK_NODES, with_sched)
    }

    /// The same graph with blocks of `block_nodes` nodes (a multiple of 8
    /// dividing `n_nodes`): `n_nodes / block_nodes` splits.
    pub fn with_blocks(imp: Impl, n_backends: usize, n_nodes: usize, block_nodes: usize, with_sched: bool) -> SchedBench {
        // (checked_rem: `is_multiple_of` is newer than the workspace's minimum Rust)
        let whole = |a: usize, b: usize| a.checked_rem(b) == Some(0);
        assert!(block_nodes >= 8 && whole(block_nodes, 8) && whole(n_nodes, block_nodes), "{n_nodes} nodes in blocks of {block_nodes}");
        // SAFETY: plain values; the driver checks them.
        let ptr = unsafe { (imp.sched_setup_blocks)(n_backends as c_int, n_nodes as c_int, block_nodes as c_int, with_sched as c_int) };
        assert!(!ptr.is_null());
        let sb = SchedBench { imp, n_backends, n_nodes, ptr };
        sb.check_causes_pad();
        sb
    }

    /// See [`check_causes_pad`].
    fn check_causes_pad(&self) {
        check_causes_pad(self.imp, self.graph_hash_size(), &format!("{} nodes", self.n_nodes));
    }

    /// Bytes the original writes past the end of `causes` at most, for this graph.
    pub fn ref_causes_overflow_bytes(&self) -> usize {
        (self.graph_hash_size() + REF_HASH_EXTRA).saturating_sub(CAUSES_ROWS) * 128
    }

    pub fn graph_hash_size(&self) -> usize {
        // SAFETY: self.ptr is a live driver object.
        unsafe { (self.imp.sched_graph_hash_size)(self.ptr) }
    }

    pub fn n_leafs(&self) -> usize {
        // SAFETY: as above.
        unsafe { (self.imp.sched_n_leafs)(self.ptr) as usize }
    }

    pub fn restore(&mut self) {
        // SAFETY: as above.
        unsafe { (self.imp.sched_restore)(self.ptr) }
    }

    /// One `sched_graph_compute` of the graph; restore first.
    pub fn compute(&mut self) {
        // SAFETY: as above; the driver holds a measured scheduler.
        unsafe { (self.imp.sched_compute)(self.ptr) }
    }

    /// One compute whose split is made anew (see `sched_compute_fresh` in
    /// c/bench_drv.c); restore first.
    pub fn compute_fresh(&mut self) {
        // SAFETY: as above.
        unsafe { (self.imp.sched_compute_fresh)(self.ptr) }
    }

    /// One compute of a graph that differs from the previous compute's (the
    /// "vary" family: every split is fresh); restore first.
    pub fn compute_vary(&mut self) {
        // SAFETY: as above.
        unsafe { (self.imp.sched_compute_vary)(self.ptr) }
    }

    /// `iters` times (restore, compute_vary), in C (what callgrind measures).
    pub fn vary_loop(&mut self, iters: usize) {
        // SAFETY: as above.
        unsafe { (self.imp.vary_loop)(self.ptr, iters as c_int) }
    }

    /// The graph built anew in a new context (same memory block), as ggml's
    /// programs do; `drop_last`: without its last node (a different graph).
    pub fn rebuild(&mut self, drop_last: bool) {
        // SAFETY: as above.
        unsafe { (self.imp.sched_rebuild)(self.ptr, c_int::from(drop_last)) }
    }

    /// `iters` times (rebuild, compute), in C (what callgrind measures);
    /// `vary`: every other graph without its last node.
    pub fn rebuilt_loop(&mut self, iters: usize, vary: bool) {
        let f = if vary { self.imp.rebuilt_vary_loop } else { self.imp.rebuilt_loop };
        // SAFETY: as above.
        unsafe { f(self.ptr, iters as c_int) }
    }

    /// `iters` times (restore, compute), in C (what callgrind measures).
    pub fn compute_loop(&mut self, iters: usize) {
        // SAFETY: as above.
        unsafe { (self.imp.sched_loop)(self.ptr, iters as c_int) }
    }

    /// `iters` times (restore, `sched_new` + `init_measure` + `sched_free`), in C.
    /// The original can do about 60 per process (one ggml context leaked each).
    pub fn cycle_loop(&mut self, iters: usize) {
        // SAFETY: as above; the driver holds no scheduler.
        unsafe { (self.imp.cycle_loop)(self.ptr, iters as c_int) }
    }

    /// Hash of the output; valid right after `compute`.
    pub fn checksum(&mut self) -> u64 {
        // SAFETY: as above.
        unsafe { (self.imp.sched_checksum)(self.ptr) }
    }

    /// (graph_compute calls, input copies) seen by the test backends so far.
    pub fn test_stats(&self) -> (i64, i64) {
        let (mut g, mut c): (c_long, c_long) = (0, 0);
        // SAFETY: as above; two out pointers.
        unsafe { (self.imp.sched_test_stats)(self.ptr, &mut g, &mut c) };
        // c_long is 32 bits on 32-bit targets
        #[allow(clippy::unnecessary_cast)]
        (g as i64, c as i64)
    }

    pub fn create(&mut self) {
        // SAFETY: as above.
        unsafe { (self.imp.sched_create)(self.ptr) }
    }

    pub fn measure(&mut self) {
        // SAFETY: as above.
        unsafe { (self.imp.sched_measure)(self.ptr) }
    }

    pub fn destroy(&mut self) {
        // SAFETY: as above.
        unsafe { (self.imp.sched_destroy)(self.ptr) }
    }

    /// `sched_new` + `init_measure` + `sched_free`; restore first.
    pub fn cycle(&mut self) {
        // SAFETY: as above; the driver holds no scheduler.
        unsafe { (self.imp.sched_cycle)(self.ptr) }
    }

    pub fn buffer_bytes(&self) -> usize {
        // SAFETY: as above.
        unsafe { (self.imp.sched_buffer_bytes)(self.ptr) }
    }

    /// Raw pointer, for tools that call the driver directly.
    pub fn as_ptr(&self) -> P {
        self.ptr
    }
}

impl Drop for SchedBench {
    fn drop(&mut self) {
        // SAFETY: self.ptr came from sched_setup and is freed once.
        unsafe { (self.imp.sched_teardown)(self.ptr) }
    }
}

// --- per-compute families ---------------------------------------------------------

/// The per-compute families of c/bench_drv.c (section 5): the graph built
/// anew before every compute, the scheduler measured once with the largest
/// graph, no warm-up; each compute is measured on its own
/// (`scripts/callgrind --family chain|chain-grow|decoder`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// The reviewer's elementwise chain, the same graph every compute.
    Chain,
    /// The same chain with one gelu more at every compute.
    ChainGrow,
    /// A gpt-2-shaped decoder, one token per compute, `n_past` one more each.
    Decoder,
    /// The chain as a simple C client builds it: the measure graph and
    /// every compute's graph each in a context `ggml_init` allocates
    /// itself, freed right after; the same shape as measured.
    Client,
    /// The same, measured with a larger graph: the first compute is a new
    /// shape, the next ones the same graph again.
    ClientNew,
    /// The same, one node more every compute (measured with the largest).
    ClientGrow,
}

impl StepKind {
    /// The `grow` argument of the driver's `step_setup_chain`; None: the decoder.
    fn chain_variant(self) -> Option<c_int> {
        match self {
            StepKind::Chain => Some(0),
            StepKind::ChainGrow => Some(1),
            StepKind::Client => Some(2),
            StepKind::ClientNew => Some(3),
            StepKind::ClientGrow => Some(4),
            StepKind::Decoder => None,
        }
    }
}

/// Splits of the "chain" families by default: 6000 nodes in blocks of 750
/// (scripts/callgrind's defaults: 6000 nodes, 8 decoder layers, 9 computes).
pub const CHAIN_SPLITS: usize = 8;

/// What `step_loop` recorded of one compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepRecord {
    /// Nodes of the graph computed.
    pub n_nodes: usize,
    /// graph_compute calls of the test backend (its splits).
    pub test_splits: i64,
    /// Hash of the output (the chain's last node, the decoder's logits).
    pub checksum: u64,
}

/// One per-compute benchmark: backends, weights and a scheduler measured for
/// `iters` computes, none computed yet.
pub struct StepBench {
    pub imp: Impl,
    pub kind: StepKind,
    pub iters: usize,
    ptr: P,
}

impl StepBench {
    /// `size`: the chain's nodes (a multiple of 6 x `splits`), the decoder's
    /// layers; `splits`: the chain's blocks (ignored by the decoder).
    pub fn new(imp: Impl, kind: StepKind, size: usize, splits: usize, iters: usize) -> StepBench {
        assert!((1..=64).contains(&iters), "{iters} computes (1 to 64)");
        let ptr = match kind.chain_variant() {
            Some(variant) => {
                let whole = |a: usize, b: usize| a.checked_rem(b) == Some(0);
                assert!(
                    splits > 0 && whole(size, splits) && whole(size / splits, 6),
                    "{size} nodes in {splits} blocks of whole groups of 6"
                );
                // SAFETY: plain values; the driver checks them.
                unsafe { (imp.step_setup_chain)(size as c_int, (size / splits) as c_int, variant, iters as c_int) }
            }
            // SAFETY: as above.
            None => unsafe { (imp.step_setup_decoder)(size as c_int, iters as c_int) },
        };
        assert!(!ptr.is_null());
        let sb = StepBench { imp, kind, iters, ptr };
        // SAFETY: live driver object; its graph is the measured one.
        let hash_size = unsafe { (imp.step_graph_hash_size)(ptr) };
        check_causes_pad(imp, hash_size, &format!("{kind:?} of size {size}"));
        sb
    }

    /// The `iters` computes (graph rebuilt before each), in C: what
    /// scripts/callgrind measures, one dump per compute.
    pub fn run(&mut self) {
        // SAFETY: live driver object, measured for `iters` computes.
        unsafe { (self.imp.step_loop)(self.ptr, self.iters as c_int) }
    }

    /// What [`StepBench::run`] recorded, one entry per compute.
    pub fn records(&self) -> Vec<StepRecord> {
        let mut out = Vec::new();
        loop {
            let (mut n, mut splits, mut sum): (c_int, c_long, u64) = (0, 0, 0);
            // SAFETY: live driver object; three out pointers.
            if !unsafe { (self.imp.step_result)(self.ptr, out.len() as c_int, &mut n, &mut splits, &mut sum) } {
                break;
            }
            // c_long is 32 bits on 32-bit targets
            #[allow(clippy::unnecessary_cast)]
            out.push(StepRecord { n_nodes: n as usize, test_splits: splits as i64, checksum: sum });
        }
        out
    }
}

impl Drop for StepBench {
    fn drop(&mut self) {
        // SAFETY: self.ptr came from a step_setup_* and is freed once.
        unsafe { (self.imp.step_teardown)(self.ptr) }
    }
}

/// Runs `f` in a forked child, which returns a duration through a pipe.
///
/// Benchmark 2 needs it: the original leaks one of ggml's 64 context slots per
/// scheduler, so one process cannot create more than ~60 of them. Each batch
/// of iterations runs in a fresh child (a copy of the parent, set up once);
/// only the time measured inside the child counts.
pub fn in_child(f: impl FnOnce() -> Duration) -> Duration {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds has room for two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe failed");
    // SAFETY: the child only runs `f` (C calls and its own allocations) then _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: closing our copy of the read end.
        unsafe { libc::close(fds[0]) };
        let ns = f().as_nanos() as u64;
        let b = ns.to_ne_bytes();
        // SAFETY: writing 8 bytes from a live buffer, then leaving without
        // running the parent's exit handlers.
        unsafe {
            libc::write(fds[1], b.as_ptr().cast(), b.len());
            libc::_exit(0);
        }
    }
    // SAFETY: closing the write end in the parent, reading 8 bytes, reaping the child.
    unsafe {
        libc::close(fds[1]);
        let mut b = [0u8; 8];
        let n = libc::read(fds[0], b.as_mut_ptr().cast(), 8);
        libc::close(fds[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        assert!(n == 8 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "benchmark child failed (status {status})");
        Duration::from_nanos(u64::from_ne_bytes(b))
    }
}

/// Iterations of benchmark 2 per child process (the original has ~60 ggml
/// contexts left after setup; one is used by a warm-up cycle).
pub const CYCLES_PER_CHILD: u64 = 40;

/// Times `iters` scheduler lifetimes (`sched_new` + `init_measure` +
/// `sched_free`) of `sb`'s graph, in batches of [`CYCLES_PER_CHILD`], each
/// batch in a forked child after one untimed warm-up cycle.
pub fn time_cycles(sb: &mut SchedBench, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CYCLES_PER_CHILD);
        left -= n;
        total += in_child(|| {
            sb.imp.quiet_stderr();
            sb.restore();
            sb.cycle();
            let mut t = Duration::ZERO;
            for _ in 0..n {
                sb.restore();
                let start = Instant::now();
                sb.cycle();
                t += start.elapsed();
            }
            t
        });
    }
    total
}

/// Times `iters` calls of `compute` (one of `SchedBench::compute`,
/// `compute_vary`, `compute_fresh`) on a measured scheduler, restoring the
/// graph (untimed) before each.
pub fn time_with(sb: &mut SchedBench, iters: u64, compute: fn(&mut SchedBench)) -> Duration {
    let mut t = Duration::ZERO;
    for _ in 0..iters {
        sb.restore();
        let start = Instant::now();
        compute(sb);
        t += start.elapsed();
    }
    t
}

/// Times `iters` computes of the same graph (`time_with(.., SchedBench::compute)`).
pub fn time_computes(sb: &mut SchedBench, iters: u64) -> Duration {
    time_with(sb, iters, SchedBench::compute)
}

/// The same for the "vary" family (`compute_vary`).
pub fn time_vary_computes(sb: &mut SchedBench, iters: u64) -> Duration {
    time_with(sb, iters, SchedBench::compute_vary)
}

// --- tensor I/O -----------------------------------------------------------------

/// Two CPU-backend tensors `a`, `b` of `size` bytes in one buffer.
pub struct IoBench {
    pub imp: Impl,
    pub size: usize,
    ptr: P,
}

impl IoBench {
    pub fn new(imp: Impl, size: usize) -> IoBench {
        // SAFETY: plain value.
        let ptr = unsafe { (imp.io_setup)(size) };
        assert!(!ptr.is_null());
        IoBench { imp, size, ptr }
    }

    /// `tensor_set(a, src, 0, size)`.
    pub fn set(&mut self, src: &[u8]) {
        assert!(src.len() >= self.size);
        // SAFETY: src has at least size bytes.
        unsafe { (self.imp.io_set)(self.ptr, src.as_ptr().cast()) }
    }

    /// `tensor_get(a, dst, 0, size)`.
    pub fn get(&mut self, dst: &mut [u8]) {
        assert!(dst.len() >= self.size);
        // SAFETY: dst has room for size bytes.
        unsafe { (self.imp.io_get)(self.ptr, dst.as_mut_ptr().cast()) }
    }

    /// `tensor_copy(a, b)`.
    pub fn copy(&mut self) {
        // SAFETY: live driver object.
        unsafe { (self.imp.io_copy)(self.ptr) }
    }
}

/// The memcpy baselines of benchmark 3: the same bytes as set/get/copy move.
#[derive(Clone, Copy, Debug)]
pub enum IoOp {
    /// host `src` -> tensor `a`
    Set,
    /// tensor `a` -> host `dst`
    Get,
    /// tensor `a` -> tensor `b`
    Copy,
}

impl IoBench {
    /// Plain memcpy between exactly the buffers that `op` uses.
    pub fn memcpy_like(&mut self, op: IoOp, src: &[u8], dst: &mut [u8]) {
        assert!(src.len() >= self.size && dst.len() >= self.size);
        // SAFETY: live driver object; a and b hold size bytes each.
        let (a, b) = unsafe { ((self.imp.io_data)(self.ptr, 0), (self.imp.io_data)(self.ptr, 1)) };
        let (d, s): (*mut c_void, *const c_void) = match op {
            IoOp::Set => (a, src.as_ptr().cast()),
            IoOp::Get => (dst.as_mut_ptr().cast(), a),
            IoOp::Copy => (b, a),
        };
        // SAFETY: both regions hold size bytes and do not overlap.
        unsafe { bench_memcpy(d, s, self.size) }
    }
}

impl Drop for IoBench {
    fn drop(&mut self) {
        // SAFETY: freed once.
        unsafe { (self.imp.io_teardown)(self.ptr) }
    }
}

/// A heap block of `n` bytes, every page touched.
pub fn host_buffer(n: usize, fill: u8) -> Vec<u8> {
    vec![fill; n]
}

// --- whisper encoder layer ---------------------------------------------------------

/// One whisper-tiny encoder layer (c/bench_drv.c) on the CPU backend.
pub struct EncBench {
    pub imp: Impl,
    ptr: P,
}

/// Full size of whisper tiny's audio context.
pub const ENC_N_CTX: usize = 1500;

impl EncBench {
    pub fn new(imp: Impl, n_threads: usize, n_ctx: usize) -> EncBench {
        // SAFETY: plain values.
        let ptr = unsafe { (imp.enc_setup)(n_threads as c_int, n_ctx as c_int) };
        assert!(!ptr.is_null());
        EncBench { imp, ptr }
    }

    pub fn compute(&mut self) {
        // SAFETY: live driver object.
        unsafe { (self.imp.enc_compute)(self.ptr) }
    }

    /// Control: the same compute through this build's ggml.c directly, no
    /// ggml-backend code involved.
    pub fn compute_direct(&mut self) {
        // SAFETY: live driver object.
        unsafe { (self.imp.enc_compute_direct)(self.ptr) }
    }

    pub fn checksum(&mut self) -> u64 {
        // SAFETY: live driver object.
        unsafe { (self.imp.enc_checksum)(self.ptr) }
    }

    pub fn n_nodes(&self) -> usize {
        // SAFETY: live driver object.
        unsafe { (self.imp.enc_n_nodes)(self.ptr) as usize }
    }
}

impl Drop for EncBench {
    fn drop(&mut self) {
        // SAFETY: freed once.
        unsafe { (self.imp.enc_teardown)(self.ptr) }
    }
}

/// Threads for the compute-bound benchmark: `WSP_BENCH_THREADS`, else the
/// number of CPUs.
pub fn enc_threads() -> usize {
    std::env::var("WSP_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// `WSP_BENCH_QUICK=1`: the smallest sizes only (CI smoke runs).
pub fn quick() -> bool {
    std::env::var("WSP_BENCH_QUICK").map(|v| !v.is_empty() && v != "0").unwrap_or(false)
}

/// The C flags both ggml stacks were compiled with.
pub const C_FLAGS: &str = env!("WSP_BENCH_CFLAGS");
