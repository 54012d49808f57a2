//! Benchmark 3: `tensor_set` / `tensor_get` / `tensor_copy` on CPU-backend
//! tensors of 4 KiB to 256 MiB, ours and the original, each against plain
//! memcpy of the same bytes (see BENCHMARKS.md).
//!
//! Groups `tensor_set`, `tensor_get`, `tensor_copy`; ids `{ours,ref}/SIZE`
//! for the library call and `memcpy_{ours,ref}/SIZE` for memcpy (through a C
//! function built with the same flags as ggml) between exactly the same
//! source and destination, so that the ratio isolates the call's overhead
//! from where the memory happens to lie.
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use wsp_bench::{host_buffer, quick, IoBench, IoOp, IMPLS};

fn sizes() -> Vec<usize> {
    if quick() {
        vec![4 << 10, 1 << 20]
    } else {
        (0..9).map(|i| (4usize << 10) << (2 * i)).collect() // 4 KiB, 16 KiB, ..., 256 MiB
    }
}

fn tensor_io(c: &mut Criterion) {
    for size in sizes() {
        let src = host_buffer(size, 7);
        let mut dst = host_buffer(size, 0);
        let mut ios: Vec<IoBench> = IMPLS.iter().map(|&imp| IoBench::new(imp, size)).collect();
        let (samples, warm, time) = if size >= 16 << 20 { (10, 500, 4000) } else { (30, 300, 1500) };
        for op in [IoOp::Set, IoOp::Get, IoOp::Copy] {
            let name = match op {
                IoOp::Set => "tensor_set",
                IoOp::Get => "tensor_get",
                IoOp::Copy => "tensor_copy",
            };
            let mut g = c.benchmark_group(name);
            g.sample_size(samples)
                .warm_up_time(Duration::from_millis(warm))
                .measurement_time(Duration::from_millis(time))
                .throughput(Throughput::Bytes(size as u64));
            for io in &mut ios {
                let imp = io.imp.name;
                g.bench_with_input(BenchmarkId::new(imp, size), &size, |b, _| match op {
                    IoOp::Set => b.iter(|| io.set(&src)),
                    IoOp::Get => b.iter(|| io.get(&mut dst)),
                    IoOp::Copy => b.iter(|| io.copy()),
                });
                g.bench_with_input(BenchmarkId::new(format!("memcpy_{imp}"), size), &size, |b, _| {
                    b.iter(|| io.memcpy_like(op, &src, &mut dst))
                });
            }
            g.finish();
        }
    }
}

criterion_group!(benches, tensor_io);
criterion_main!(benches);
