//! Heap used by the scheduler, ours and the original (benchmark 2's memory
//! column; see BENCHMARKS.md). Linked with `-Wl,--wrap=malloc,...` (build.rs)
//! so that every heap block of C and Rust code is counted (c/alloc_count.c).
//!
//! `sched_mem [--quick] [--sizes N,N,...]` prints one JSON object per
//! (implementation, size) (sizes: 256, 2048 and 16384 nodes by default):
//! - `cycle_allocs`, `cycle_bytes`: heap blocks and bytes allocated by one
//!   `sched_new` + `init_measure` + `sched_free` (cumulative);
//! - `cycle_peak`: the most heap the cycle held at once;
//! - `held_measure`: heap held after `sched_new` + `init_measure`, and
//!   `held_measure_no_buffers`: the same minus the compute buffers
//!   (`buffer_get_size` of `sched_get_buffer` for every backend);
//! - `held_compute_no_buffers`: the same after one `sched_graph_compute`
//!   (includes the CPU backend's work buffer, the same in both);
//! - `held_steady_no_buffers`: the same after 8 computes of the graph (ours
//!   fits its table to a graph computed again and again, at the 5th);
//! - `leak`: heap still held after `sched_free`.
use wsp_bench::{quick, SchedBench, IMPLS};

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Stats {
    n_allocs: u64,
    bytes: u64,
    live: i64,
    peak: i64,
}

extern "C" {
    fn bench_alloc_stats(out: *mut Stats);
    fn bench_alloc_reset_peak();
}

fn stats() -> Stats {
    let mut s = Stats::default();
    // SAFETY: writes one struct.
    unsafe { bench_alloc_stats(&mut s) };
    s
}

fn main() {
    let mut sizes: Vec<usize> = if quick() || std::env::args().any(|a| a == "--quick") { vec![256] } else { vec![256, 2048, 16384] };
    // `--sizes 256,512,...`: other graph sizes (multiples of 64)
    if let Some(list) = std::env::args().skip_while(|a| a != "--sizes").nth(1) {
        sizes = list.split(',').map(|n| n.parse().expect("--sizes: node counts")).collect();
    }
    IMPLS[0].quiet_stderr();
    for &n in &sizes {
        for imp in IMPLS {
            let mut sb = SchedBench::new(imp, 2, n, false);
            // a first full cycle, so that one-time allocations (ggml tables, ...) are out of the way
            sb.cycle();
            sb.restore();

            let s0 = stats();
            sb.create();
            sb.measure();
            let s1 = stats();
            let buffers = sb.buffer_bytes() as i64;
            sb.restore();
            sb.compute();
            sb.restore();
            let s2 = stats();
            for _ in 1..8 {
                sb.compute();
                sb.restore();
            }
            let s2b = stats();
            sb.destroy();
            let s3 = stats();

            // one more cycle, counted alone
            // SAFETY: no arguments.
            unsafe { bench_alloc_reset_peak() };
            let c0 = stats();
            sb.cycle();
            sb.restore();
            let c1 = stats();

            println!(
                "{{\"impl\":\"{}\",\"n_nodes\":{n},\"n_backends\":2,\"cycle_allocs\":{},\"cycle_bytes\":{},\"cycle_peak\":{},\"buffers\":{buffers},\"held_measure\":{},\"held_measure_no_buffers\":{},\"held_compute_no_buffers\":{},\"held_steady_no_buffers\":{},\"leak\":{}}}",
                imp.name,
                c1.n_allocs - c0.n_allocs,
                c1.bytes - c0.bytes,
                c1.peak - c0.live,
                s1.live - s0.live,
                s1.live - s0.live - buffers,
                s2.live - s0.live - buffers,
                s2b.live - s0.live - buffers,
                s3.live - s0.live,
            );
        }
    }
}
