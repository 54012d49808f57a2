//! Runs benchmark 1's compute loop for one implementation, for
//! `scripts/callgrind`: `sched_cg <ours|ref> <n_backends> <n_nodes> <iters> [cycle|vary]`.
//! With `cycle`, runs benchmark 2's scheduler lifetimes instead
//! (`<prefix>cycle_loop`, at most ~50 for the original); with `vary`, the
//! "vary" family's computes (`<prefix>vary_loop`: every graph differs from
//! the previous one).
//!
//! Sets up the graph and a measured scheduler, computes 8 times (warm-up, not
//! measured, past ours' table refit), then calls the driver's `<prefix>sched_loop(iters)`, which
//! scripts/callgrind measures (`--zero-before` / `--dump-after` on it).
use wsp_bench::{Impl, SchedBench};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 && !(args.len() == 6 && (args[5] == "cycle" || args[5] == "vary")) {
        eprintln!("usage: sched_cg <ours|ref> <n_backends> <n_nodes> <iters> [cycle|vary]");
        std::process::exit(2);
    }
    let imp = Impl::by_name(&args[1]).unwrap_or_else(|| panic!("unknown implementation {}", args[1]));
    let nb: usize = args[2].parse().expect("n_backends");
    let n: usize = args[3].parse().expect("n_nodes");
    let iters: usize = args[4].parse().expect("iters");
    imp.quiet_stderr();
    if args.len() == 6 && args[5] == "vary" {
        let mut sb = SchedBench::new(imp, nb, n, true);
        for _ in 0..8 {
            sb.restore();
            sb.compute_vary();
        }
        sb.vary_loop(iters);
        println!("{{\"impl\":\"{}\",\"n_backends\":{nb},\"n_nodes\":{n},\"iters\":{iters},\"mode\":\"vary\"}}", imp.name);
        return;
    }
    if args.len() == 6 {
        let mut sb = SchedBench::new(imp, nb, n, false);
        sb.cycle_loop(1); // warm-up, not measured
        sb.cycle_loop(iters);
        println!("{{\"impl\":\"{}\",\"n_backends\":{nb},\"n_nodes\":{n},\"iters\":{iters},\"mode\":\"cycle\"}}", imp.name);
        return;
    }
    let mut sb = SchedBench::new(imp, nb, n, true);
    // past ours' table refit (at the 5th compute of the same graph)
    for _ in 0..8 {
        sb.restore();
        sb.compute();
    }
    let sum = sb.checksum();
    sb.compute_loop(iters);
    println!("{{\"impl\":\"{}\",\"n_backends\":{nb},\"n_nodes\":{n},\"iters\":{iters},\"checksum\":\"{sum:016x}\"}}", imp.name);
    if std::env::var_os("SCHED_CG_KEEP").is_some() {
        // leave everything allocated, for heap profilers' end-of-run view
        std::mem::forget(sb);
    }
}
