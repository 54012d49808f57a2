#!/usr/bin/env python3
"""Plot of scheduler overhead against node count, ours vs the original.

Left: median time of one `sched_graph_compute` (criterion, benchmark 1) for 2
and 3 backends, and for the "vary" family (a new graph every compute), log-log.
Right: instructions per node (callgrind, scripts/callgrind), whole call and own
share, same graph and vary family; a flat line is linear cost.
Reads target/criterion/ and target/bench/callgrind*.json (scripts/bench
writes them) and writes benches/sched_overhead.png, or OUT.png when given.
Needs matplotlib: `python3 -m pip install --user matplotlib` (scripts/bench
installs it into target/bench/venv when it is missing).

Exit status: 0 written, 1 no results to plot, 2 a bad command line or no
matplotlib.
"""
import argparse
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRIT = os.path.join(ROOT, "target", "criterion")


def series(group, impl):
    pts = []
    for p in glob.glob(os.path.join(CRIT, group, impl, "*", "new", "estimates.json")):
        n = int(os.path.basename(os.path.dirname(os.path.dirname(p))))
        with open(p) as f:
            pts.append((n, json.load(f)["median"]["point_estimate"]))
    return sorted(pts)


def main():
    ap = argparse.ArgumentParser(prog="scripts/plot_sched.py", usage="%(prog)s [OUT.png]", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", metavar="OUT.png", default=os.path.join(ROOT, "benches", "sched_overhead.png"),
                    help="the plot to write (default: benches/sched_overhead.png)")
    out = ap.parse_args().out
    try:
        import matplotlib
    except ImportError:
        print("scripts/plot_sched.py: matplotlib is not installed; install it with\n"
              "    python3 -m pip install --user matplotlib\n"
              "(or run scripts/bench, which installs it into target/bench/venv)", file=sys.stderr)
        sys.exit(2)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    style = {"ours": dict(color="tab:blue"), "ref": dict(color="tab:red")}
    label = {"ours": "ours (Rust)", "ref": "original ggml-backend.c"}
    any_pts = False
    for nb, ls, mk in ((2, "-", "o"), (3, "--", "s")):
        for impl in ("ours", "ref"):
            pts = series(f"sched_compute_{nb}b", impl)
            if pts:
                any_pts = True
                ax1.plot([p[0] for p in pts], [p[1] / 1e3 for p in pts], ls, marker=mk, label=f"{label[impl]}, {nb} backends", **style[impl])
    for impl in ("ours", "ref"):
        pts = series("sched_compute_vary_2b", impl)
        if pts:
            ax1.plot([p[0] for p in pts], [p[1] / 1e3 for p in pts], ":", marker="^", label=f"{label[impl]}, 2 backends, new graph each time", **style[impl])
    if not any_pts:
        sys.exit("no criterion results for sched_compute_*: run scripts/bench first")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xlabel("graph nodes (one split per 64 nodes)")
    ax1.set_ylabel("µs per sched_graph_compute (median)")
    ax1.set_title("Scheduler overhead: time")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8)

    cg_path = os.path.join(ROOT, "target", "bench", "callgrind.json")
    if os.path.exists(cg_path):
        with open(cg_path) as f:
            rows = [r for r in json.load(f)["rows"] if r["n_backends"] == 2]
        rows.sort(key=lambda r: r["n_nodes"])
        n = [r["n_nodes"] for r in rows]
        for impl in ("ours", "ref"):
            ax2.plot(n, [r[f"{impl}_total"] / r["n_nodes"] for r in rows], "-", marker="o", label=f"{label[impl]}: whole call", **style[impl])
            ax2.plot(n, [r[f"{impl}_own"] / r["n_nodes"] for r in rows], ":", marker="^", label=f"{label[impl]}: own share", **style[impl])
        vary_path = os.path.join(ROOT, "target", "bench", "callgrind_vary.json")
        if os.path.exists(vary_path):
            with open(vary_path) as f:
                vrows = sorted((r for r in json.load(f)["rows"] if r["n_backends"] == 2), key=lambda r: r["n_nodes"])
            vn = [r["n_nodes"] for r in vrows]
            for impl in ("ours", "ref"):
                ax2.plot(vn, [r[f"{impl}_total"] / r["n_nodes"] for r in vrows], "--", marker="s", label=f"{label[impl]}: whole call, new graph each time", **style[impl])
        ax2.set_xscale("log", base=2)
        ax2.set_ylim(bottom=0)
        ax2.set_xlabel("graph nodes (2 backends)")
        ax2.set_ylabel("instructions per node (callgrind)")
        ax2.set_title("Scheduler overhead: instructions per node")
        ax2.grid(True, which="both", alpha=0.3)
        ax2.legend(fontsize=8)
    else:
        ax2.set_axis_off()
        ax2.text(0.5, 0.5, "no target/bench/callgrind.json\n(run scripts/callgrind)", ha="center", va="center")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
