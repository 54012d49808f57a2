//! Runs benchmark 1's compute loop for one implementation, for
//! `scripts/callgrind`:
//! `sched_cg <ours|ref> <n_backends> <n_nodes> <iters> [steady|vary|rebuilt|rebuilt-vary|cycle|chain|chain-grow|decoder|client|client-new|client-grow] [splits]`.
//!
//! - `steady` (default): the same graph computed again
//!   (`<prefix>sched_loop`);
//! - `vary`: the "vary" family's computes (`<prefix>vary_loop`: every graph
//!   differs from the previous one);
//! - `rebuilt`, `rebuilt-vary`: as ggml's programs build graphs, a new
//!   context (in the same memory block) and a new graph for every compute
//!   (`<prefix>rebuilt_loop`, `<prefix>rebuilt_vary_loop`): the same graph
//!   every time, or every other one without its last node;
//! - `cycle`: benchmark 2's scheduler lifetimes instead (`<prefix>cycle_loop`,
//!   at most ~50 for the original).
//!
//! - `chain`, `chain-grow`, `decoder`: the per-compute families (c/bench_drv.c,
//!   section 5; 2 backends): the graph built anew before every compute, the
//!   scheduler measured with the largest graph, then `iters` computes with
//!   no warm-up (`<prefix>step_loop`; scripts/callgrind dumps after every
//!   `<prefix>step_compute`). `chain`: the reviewer's elementwise chain of
//!   `n_nodes` nodes in `splits` blocks (default 8), the same graph every
//!   compute; `chain-grow`: one gelu more at every compute; `decoder`: a
//!   gpt-2-shaped decoder of `n_nodes` LAYERS, one token per compute.
//!   `client`, `client-new`, `client-grow`: the chain as a simple C client
//!   builds it (c/bench_drv.c, `enum client_shape`): every graph, the
//!   measured one too, in a context `ggml_init` allocates itself and frees
//!   right after; the same shape as measured, a new shape first, or one
//!   node more each time. `BENCH_HEAP_SHIFT=N` mallocs N bytes before the
//!   setup, so that every graph lands elsewhere.
//!   Prints the JSON line with, per compute, the graph's nodes, the test
//!   backend's splits and the output's hash (`computes`).
//!
//! `splits`: the graph in that many blocks (`n_nodes / splits` nodes each)
//! instead of one per 64 nodes; the "few-splits" family is
//! `6144 nodes, 8 splits, 2 backends`, with `steady` or `vary`.
//!
//! Sets up the graph and a measured scheduler, computes 8 times (warm-up, not
//! measured: past the first computes, which plan), then calls the driver's loop, which
//! scripts/callgrind measures (`--zero-before` / `--dump-after` on it). Prints
//! one JSON line with the output's hash and the splits of the last warm-up
//! compute on the test backends (`test_splits`), so that the two
//! implementations can be compared.
use wsp_bench::{Impl, SchedBench, StepBench, StepKind, BLOCK_NODES, CHAIN_SPLITS};

const MODES: [&str; 11] =
    ["steady", "vary", "rebuilt", "rebuilt-vary", "cycle", "chain", "chain-grow", "decoder", "client", "client-new", "client-grow"];

fn usage() -> ! {
    eprintln!("usage: sched_cg <ours|ref> <n_backends> <n_nodes> <iters> [{}] [splits]", MODES.join("|"));
    eprintln!("       (decoder: <n_nodes> is its number of layers)");
    std::process::exit(2);
}

/// The per-compute families: set up, run the measured loop, print what each
/// compute did.
fn steps(imp: Impl, kind: StepKind, nb: usize, size: usize, iters: usize, splits: Option<usize>) {
    assert_eq!(nb, 2, "the per-compute families have 2 backends");
    assert!(kind != StepKind::Decoder || splits.is_none(), "the decoder takes no splits");
    let splits = splits.unwrap_or(CHAIN_SPLITS);
    let mut sb = StepBench::new(imp, kind, size, splits, iters);
    sb.run();
    let recs = sb.records();
    assert_eq!(recs.len(), iters);
    let computes: Vec<String> = recs
        .iter()
        .map(|r| format!("{{\"n_nodes\":{},\"test_splits\":{},\"checksum\":\"{:016x}\"}}", r.n_nodes, r.test_splits, r.checksum))
        .collect();
    let size = match kind {
        StepKind::Decoder => format!("\"n_layer\":{size}"),
        _ => format!("\"n_nodes\":{size},\"splits\":{splits}"),
    };
    let mode = match kind {
        StepKind::Chain => "chain",
        StepKind::ChainGrow => "chain-grow",
        StepKind::Decoder => "decoder",
        StepKind::Client => "client",
        StepKind::ClientNew => "client-new",
        StepKind::ClientGrow => "client-grow",
    };
    println!(
        "{{\"impl\":\"{}\",\"n_backends\":{nb},{size},\"iters\":{iters},\"mode\":\"{mode}\",\"computes\":[{}]}}",
        imp.name,
        computes.join(",")
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !(5..=7).contains(&args.len()) {
        usage();
    }
    let imp = Impl::by_name(&args[1]).unwrap_or_else(|| panic!("unknown implementation {}", args[1]));
    let nb: usize = args[2].parse().expect("n_backends");
    let n: usize = args[3].parse().expect("n_nodes");
    let iters: usize = args[4].parse().expect("iters");
    let mode = args.get(5).map(String::as_str).unwrap_or("steady");
    if !MODES.contains(&mode) {
        usage();
    }
    let step_kind = match mode {
        "chain" => Some(StepKind::Chain),
        "chain-grow" => Some(StepKind::ChainGrow),
        "decoder" => Some(StepKind::Decoder),
        "client" => Some(StepKind::Client),
        "client-new" => Some(StepKind::ClientNew),
        "client-grow" => Some(StepKind::ClientGrow),
        _ => None,
    };
    if let Some(kind) = step_kind {
        imp.quiet_stderr();
        steps(imp, kind, nb, n, iters, args.get(6).map(|s| s.parse().expect("splits")));
        return;
    }
    let block = match args.get(6) {
        Some(s) => {
            let splits: usize = s.parse().expect("splits");
            let whole = |a: usize, b: usize| a.checked_rem(b) == Some(0);
            assert!(whole(n, splits) && whole(n / splits, 8), "{n} nodes do not make {splits} blocks of whole layers (8 nodes)");
            n / splits
        }
        None => BLOCK_NODES,
    };
    imp.quiet_stderr();
    let head = format!(
        "{{\"impl\":\"{}\",\"n_backends\":{nb},\"n_nodes\":{n},\"block_nodes\":{block},\"iters\":{iters},\"mode\":\"{mode}\"",
        imp.name
    );
    if mode == "cycle" {
        let mut sb = SchedBench::with_blocks(imp, nb, n, block, false);
        sb.cycle_loop(1); // warm-up, not measured
        sb.cycle_loop(iters);
        println!("{head}}}");
        return;
    }
    let mut sb = SchedBench::with_blocks(imp, nb, n, block, true);
    if mode.starts_with("rebuilt") {
        let vary = mode == "rebuilt-vary";
        let mut splits = 0;
        for k in 0..8 {
            // (an even number: the last warm-up computes the whole graph)
            sb.rebuild(vary && k % 2 == 0);
            let before = sb.test_stats().0;
            sb.compute();
            splits = sb.test_stats().0 - before;
        }
        let sum = sb.checksum();
        sb.rebuilt_loop(iters, vary);
        println!("{head},\"test_splits\":{splits},\"checksum\":\"{sum:016x}\"}}");
        return;
    }
    let compute = if mode == "vary" { SchedBench::compute_vary } else { SchedBench::compute };
    // past the first computes (which plan what later ones reuse); an even
    // number, so that the vary family's last warm-up computes the whole graph
    let mut splits = 0;
    for _ in 0..8 {
        sb.restore();
        let before = sb.test_stats().0;
        compute(&mut sb);
        splits = sb.test_stats().0 - before;
    }
    let sum = sb.checksum();
    if mode == "vary" {
        sb.vary_loop(iters);
    } else {
        sb.compute_loop(iters);
    }
    println!("{head},\"test_splits\":{splits},\"checksum\":\"{sum:016x}\"}}");
    if std::env::var_os("SCHED_CG_KEEP").is_some() {
        // leave everything allocated, for heap profilers' end-of-run view
        std::mem::forget(sb);
    }
}
