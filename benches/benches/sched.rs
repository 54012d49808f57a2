//! Benchmarks 1 and 2: scheduler overhead and scheduler lifetime, ours and the
//! original side by side (see BENCHMARKS.md).
//!
//! - `sched_lifecycle/{ours,ref}/N`: `sched_new` + `init_measure` +
//!   `sched_free` on an N-node graph over 2 backends; every batch of
//!   iterations runs in a forked child (the original leaks a ggml context per
//!   scheduler, 64 per process). Runs first, before benchmark 1 leaks any.
//! - `sched_compute_{2,3}b/{ours,ref}/N`: `sched_graph_compute` of an N-node
//!   graph of tiny tensors over 2 or 3 backends (one split per 64 nodes); the
//!   graph is restored to its built state, untimed, before every compute.
//! - `sched_compute_vary_2b/{ours,ref}/N`: the same, but every compute's
//!   graph differs from the previous one's (without its last node, then
//!   whole, in turn): a fresh split every time ("vary" family).
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use wsp_bench::{quick, time_computes, time_cycles, time_vary_computes, SchedBench, IMPLS};

fn compute_sizes() -> Vec<usize> {
    if quick() {
        vec![256]
    } else {
        vec![256, 512, 1024, 2048, 4096, 8192, 16384]
    }
}

fn lifecycle_sizes() -> Vec<usize> {
    if quick() {
        vec![256]
    } else {
        vec![256, 2048, 16384]
    }
}

fn sched_lifecycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("sched_lifecycle");
    g.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    for n in lifecycle_sizes() {
        for imp in IMPLS {
            let mut sb = SchedBench::new(imp, 2, n, false);
            g.bench_with_input(BenchmarkId::new(imp.name, n), &n, |b, _| b.iter_custom(|iters| time_cycles(&mut sb, iters)));
        }
    }
    g.finish();
}

fn sched_compute(c: &mut Criterion) {
    for nb in [2usize, 3] {
        let mut g = c.benchmark_group(format!("sched_compute_{nb}b"));
        g.sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
        for n in compute_sizes() {
            let mut sbs: Vec<SchedBench> = IMPLS.iter().map(|&imp| SchedBench::new(imp, nb, n, true)).collect();
            // Same work in both: same output, same number of splits on the
            // test backends, also after ours reused its split (from the 2nd
            // compute) and refitted its table to the graph (at the 5th).
            let mut seen = Vec::new();
            for sb in &mut sbs {
                for _ in 0..8 {
                    sb.compute();
                    sb.restore();
                }
                sb.compute();
                seen.push((sb.checksum(), sb.test_stats().0));
                sb.restore();
            }
            assert_eq!(seen[0], seen[1], "ours and the original differ on {nb} backends, {n} nodes");
            g.throughput(Throughput::Elements(n as u64));
            for sb in &mut sbs {
                let name = sb.imp.name;
                g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| b.iter_custom(|iters| time_computes(sb, iters)));
            }
        }
        g.finish();
    }
}

fn sched_compute_vary(c: &mut Criterion) {
    let mut g = c.benchmark_group("sched_compute_vary_2b");
    g.sample_size(30).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for n in compute_sizes() {
        for imp in IMPLS {
            let mut sb = SchedBench::new(imp, 2, n, true);
            g.throughput(Throughput::Elements(n as u64));
            g.bench_with_input(BenchmarkId::new(imp.name, n), &n, |b, _| b.iter_custom(|iters| time_vary_computes(&mut sb, iters)));
        }
    }
    g.finish();
}

criterion_group!(benches, sched_lifecycle, sched_compute, sched_compute_vary);
criterion_main!(benches);
