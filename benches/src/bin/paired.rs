//! Interleaved timing of the two implementations, as a cross-check of the
//! criterion numbers on a noisy machine: each round times ours then the
//! original (alternating which goes first) on the same work, and the result
//! is the median of the per-round ratios, which a slow drift of the machine's
//! load does not bias.
//!
//! `paired enc [rounds]`            encoder layer (benchmark 4); with
//!                                  WSP_BENCH_REVERSE set, the original's objects are built first
//! `paired enc-direct [rounds]`     control: the same, computed by each build's ggml.c directly
//!                                  (no ggml-backend code), to separate code placement from the library
//! `paired sched NB N [rounds]`     sched_graph_compute (benchmark 1), 20 computes per round
//! `paired cycle N [rounds]`        sched_new + init_measure + sched_free, 2 backends
//!                                  (benchmark 2), 20 lifetimes per round
//! `paired io SIZE [rounds]`        benchmark 3: each of set/get/copy against memcpy of the
//!                                  same bytes, ours and the original
//!
//! Prints one JSON object per comparison: medians (ns per call), the median
//! ratio and its quartiles over the rounds.
use std::time::{Duration, Instant};

use wsp_bench::{enc_threads, host_buffer, time_cycles, time_with, EncBench, IoBench, IoOp, SchedBench, ENC_N_CTX, OURS, REF};

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let x = q * (v.len() - 1) as f64;
    let (i, f) = (x.floor() as usize, x - x.floor());
    if i + 1 < v.len() {
        v[i] * (1.0 - f) + v[i + 1] * f
    } else {
        v[i]
    }
}

fn median(v: &mut [f64]) -> f64 {
    quantile(v, 0.5)
}

struct Paired {
    a: f64,
    b: f64,
    ratio: f64,
    q1: f64,
    q3: f64,
}

impl Paired {
    fn json(&self) -> String {
        format!(
            "\"a_ns\":{:.1},\"b_ns\":{:.1},\"ratio\":{:.4},\"ratio_q1\":{:.4},\"ratio_q3\":{:.4}",
            self.a, self.b, self.ratio, self.q1, self.q3
        )
    }
}

fn run(rounds: usize, mut step: impl FnMut(usize) -> Duration, per_round: f64) -> Paired {
    let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        let (ta, tb) = if i % 2 == 0 {
            let ta = step(0);
            (ta, step(1))
        } else {
            let tb = step(1);
            (step(0), tb)
        };
        let (ta, tb) = (ta.as_nanos() as f64 / per_round, tb.as_nanos() as f64 / per_round);
        a.push(ta);
        b.push(tb);
        r.push(ta / tb);
    }
    Paired { a: median(&mut a), b: median(&mut b), ratio: median(&mut r), q1: quantile(&mut r, 0.25), q3: quantile(&mut r, 0.75) }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(mode @ ("enc" | "enc-direct")) => {
            let direct = mode == "enc-direct";
            let rounds = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(30);
            let threads = enc_threads();
            // WSP_BENCH_REVERSE=1 builds the original's objects first (a
            // different heap layout for both; see BENCHMARKS.md, "Noise").
            let mut e = if std::env::var_os("WSP_BENCH_REVERSE").is_some() {
                let r = EncBench::new(REF, threads, ENC_N_CTX);
                let o = EncBench::new(OURS, threads, ENC_N_CTX);
                [o, r]
            } else {
                [EncBench::new(OURS, threads, ENC_N_CTX), EncBench::new(REF, threads, ENC_N_CTX)]
            };
            for x in &mut e {
                x.compute();
                x.compute_direct();
            }
            let p = run(
                rounds,
                |i| {
                    let t = Instant::now();
                    if direct {
                        e[i].compute_direct();
                    } else {
                        e[i].compute();
                    }
                    t.elapsed()
                },
                1.0,
            );
            let order = if std::env::var_os("WSP_BENCH_REVERSE").is_some() { "ref_first" } else { "ours_first" };
            let bench = if direct { "encoder_layer_direct" } else { "encoder_layer" };
            println!("{{\"bench\":\"{bench}\",\"threads\":{threads},\"rounds\":{rounds},\"built\":\"{order}\",{}}}", p.json());
        }
        Some(mode @ ("sched" | "fresh" | "vary")) => {
            // sched: the same graph every compute (ours reuses its split);
            // fresh: a set_node_backend before every compute (ours splits
            // again and checks the fit each time); vary: every compute's
            // graph differs from the previous one's
            let (compute, warm, name): (fn(&mut SchedBench), u64, &str) = match mode {
                "sched" => (SchedBench::compute, 8, "sched_compute"), // 8 warm-up computes (past what a first compute plans)
                "fresh" => (SchedBench::compute_fresh, 4, "sched_compute_fresh"),
                _ => (SchedBench::compute_vary, 4, "sched_compute_vary"),
            };
            let nb: usize = args.get(2).and_then(|v| v.parse().ok()).expect("n_backends");
            let n: usize = args.get(3).and_then(|v| v.parse().ok()).expect("n_nodes");
            let rounds = args.get(4).and_then(|v| v.parse().ok()).unwrap_or(50);
            OURS.quiet_stderr();
            let mut s = [SchedBench::new(OURS, nb, n, true), SchedBench::new(REF, nb, n, true)];
            for x in &mut s {
                time_with(x, warm, compute);
            }
            let p = run(rounds, |i| time_with(&mut s[i], 20, compute), 20.0);
            println!("{{\"bench\":\"{name}_{nb}b\",\"n_nodes\":{n},\"rounds\":{rounds},{}}}", p.json());
        }
        Some("cycle") => {
            let n: usize = args.get(2).and_then(|v| v.parse().ok()).expect("n_nodes");
            let rounds = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(30);
            OURS.quiet_stderr();
            let mut s = [SchedBench::new(OURS, 2, n, false), SchedBench::new(REF, 2, n, false)];
            let p = run(rounds, |i| time_cycles(&mut s[i], 20), 20.0);
            println!("{{\"bench\":\"sched_lifecycle\",\"n_nodes\":{n},\"rounds\":{rounds},{}}}", p.json());
        }
        Some("io") => {
            let size: usize = args.get(2).and_then(|v| v.parse().ok()).expect("size in bytes");
            let rounds = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(50);
            let reps = ((64usize << 20) / size).clamp(1, 1000);
            let src = host_buffer(size, 7);
            let mut dst = host_buffer(size, 0);
            for imp in [OURS, REF] {
                let mut io = IoBench::new(imp, size);
                for op in [IoOp::Set, IoOp::Get, IoOp::Copy] {
                    // a = the library call, b = memcpy of the same bytes
                    let mut step = |which: usize| {
                        let t = Instant::now();
                        for _ in 0..reps {
                            match (which, op) {
                                (0, IoOp::Set) => io.set(&src),
                                (0, IoOp::Get) => io.get(&mut dst),
                                (0, IoOp::Copy) => io.copy(),
                                _ => io.memcpy_like(op, &src, &mut dst),
                            }
                        }
                        t.elapsed()
                    };
                    step(0);
                    step(1);
                    let p = run(rounds, step, reps as f64);
                    let name = format!("{op:?}").to_lowercase();
                    println!(
                        "{{\"bench\":\"tensor_{name}_vs_memcpy\",\"impl\":\"{}\",\"size\":{size},\"rounds\":{rounds},{}}}",
                        imp.name,
                        p.json()
                    );
                }
            }
        }
        _ => {
            eprintln!("usage: paired enc|enc-direct [rounds] | paired sched NB N [rounds] | paired fresh NB N [rounds] | paired vary NB N [rounds] | paired io SIZE [rounds]");
            std::process::exit(2);
        }
    }
}
