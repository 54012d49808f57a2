//! Benchmark 4: CPU backend `graph_compute` of one whisper-tiny encoder layer
//! at full size (n_ctx 1500), ours and the original (see BENCHMARKS.md). The
//! time is ggml.c's; the ratio must stay at 1.0.
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use wsp_bench::{enc_threads, quick, EncBench, ENC_N_CTX, IMPLS};

fn encoder_layer(c: &mut Criterion) {
    let threads = enc_threads();
    let n_ctx = if quick() { 64 } else { ENC_N_CTX };
    let mut encs: Vec<EncBench> = IMPLS.iter().map(|&imp| EncBench::new(imp, threads, n_ctx)).collect();
    let mut sums = Vec::new();
    for e in &mut encs {
        e.compute();
        sums.push((e.checksum(), e.n_nodes()));
    }
    assert_eq!(sums[0], sums[1], "ours and the original compute different encoder outputs");

    let mut g = c.benchmark_group("encoder_layer");
    g.sample_size(10).warm_up_time(Duration::from_secs(3)).measurement_time(Duration::from_secs(20));
    for e in &mut encs {
        let name = e.imp.name;
        g.bench_with_input(BenchmarkId::new(name, format!("{n_ctx}x{threads}t")), &n_ctx, |b, _| b.iter(|| e.compute()));
    }
    g.finish();
}

criterion_group!(benches, encoder_layer);
criterion_main!(benches);
