#!/usr/bin/env python3
"""Tables of BENCHMARKS.md from the results of scripts/bench.

Reads criterion's estimates (target/criterion/<group>/<impl>/<param>/new/
estimates.json: medians) and the helper outputs in target/bench/
(sched_mem.json, callgrind.json, paired.json, demo/, machine.txt), prints the
markdown tables and writes them to target/bench/results.md. With --update,
also replaces the part of BENCHMARKS.md between the markers
`<!-- bench:results:begin -->` and `<!-- bench:results:end -->`.
scripts/bench runs it at its end.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRIT = os.path.join(ROOT, "target", "criterion")
OUT = os.path.join(ROOT, "target", "bench")
BEGIN, END = "<!-- bench:results:begin -->", "<!-- bench:results:end -->"


def median_ns(group, impl, param):
    p = os.path.join(CRIT, group, impl, str(param), "new", "estimates.json")
    try:
        with open(p) as f:
            return json.load(f)["median"]["point_estimate"]
    except FileNotFoundError:
        return None


def params(group, impl):
    out = []
    for d in glob.glob(os.path.join(CRIT, group, impl, "*", "new", "estimates.json")):
        out.append(os.path.basename(os.path.dirname(os.path.dirname(d))))
    return out


def fmt_t(ns):
    if ns is None:
        return "—"
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def fmt_b(n):
    if n is None:
        return "—"
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= div:
            return f"{n / div:.{1 if abs(n) < 100 * div else 0}f} {unit}"
    return f"{n} B"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def fmt_r(r, digits=3):
    return "—" if r is None else f"{r:.{digits}f}"


def ok(cond):
    return "—" if cond is None else ("**met**" if cond else "**not met**")


def load_lines(path):
    try:
        with open(path) as f:
            rows = [json.loads(l) for l in f if l.strip().startswith("{")]
    except FileNotFoundError:
        return []
    for r in rows:  # older paired output
        r.setdefault("a_ns", r.get("ours_ns"))
        r.setdefault("b_ns", r.get("ref_ns"))
        r.setdefault("built", "ours_first")
        r.setdefault("ratio_q1", r.get("ratio"))
        r.setdefault("ratio_q3", r.get("ratio"))
    return rows


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def sched_table(lines, targets, cg):
    cg_rows = {(r["n_backends"], r["n_nodes"]): r for r in (cg or {}).get("rows", [])}
    lines.append("| backends | nodes | splits | ours | original | ratio | ours ns/node | original ns/node | instructions ratio | own-share instructions ratio |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for nb in (2, 3):
        group = f"sched_compute_{nb}b"
        for n in sorted({int(p) for p in params(group, "ours")}):
            o, r = median_ns(group, "ours", n), median_ns(group, "ref", n)
            c = cg_rows.get((nb, n))
            lines.append(f"| {nb} | {n} | {n // 64} | {fmt_t(o)} | {fmt_t(r)} | {fmt_r(ratio(o, r))} | {o / n:.0f} | "
                         f"{r / n:.0f} | {fmt_r(c and c['ratio_total'])} | {fmt_r(c and c['ratio_own'])} |")
            if n == 4096 and nb == 2:
                targets["time"] = ratio(o, r)
                if c:
                    targets["ir"] = c["ratio_total"]
                    targets["own"] = c["ratio_own"]
    if cg_rows:
        lines.append("")
        lines.append("Instructions per `sched_graph_compute` (callgrind, `scripts/callgrind`); *own* = without the graph "
                     "allocation (ggml-alloc's in the original, galloc.rs's in ours) and the backends' graph_compute (ggml.c):")
        lines.append("")
        lines.append("| backends | nodes | ours | original | ratio | ours own | original own | own ratio | ours Ir/node | original Ir/node | ours own Ir/node | original own Ir/node |")
        lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (nb, n), c in sorted(cg_rows.items()):
            lines.append(f"| {nb} | {n} | {c['ours_total']:,} | {c['ref_total']:,} | {c['ratio_total']:.3f} | {c['ours_own']:,} | "
                         f"{c['ref_own']:,} | {c['ratio_own']:.3f} | {c['ours_total'] / n:.0f} | {c['ref_total'] / n:.0f} | "
                         f"{c['ours_own'] / n:.0f} | {c['ref_own'] / n:.0f} |")
        # linearity: Ir per node from the smallest to the largest size
        for nb in (2, 3):
            per = [(n, c["ours_total"] / n) for (b, n), c in sorted(cg_rows.items()) if b == nb]
            if len(per) >= 2:
                targets.setdefault("linear", []).append((nb, per[0], per[-1]))


def vary_table(lines, targets, cgv):
    """The vary family: every compute's graph differs from the previous one (a fresh split each time)."""
    group = "sched_compute_vary_2b"
    ns = sorted({int(p) for p in params(group, "ours")})
    if ns:
        lines.append("| backends | nodes | ours | original | ratio | ours ns/node | original ns/node |")
        lines.append("|---:|---:|---:|---:|---:|---:|---:|")
        for n in ns:
            o, r = median_ns(group, "ours", n), median_ns(group, "ref", n)
            lines.append(f"| 2 | {n} | {fmt_t(o)} | {fmt_t(r)} | {fmt_r(ratio(o, r))} | {o / n:.0f} | {r / n:.0f} |")
            if n == 4096:
                targets["vary_time"] = ratio(o, r)
        lines.append("")
    rows = sorted((cgv or {}).get("rows", []), key=lambda c: (c["n_backends"], c["n_nodes"]))
    if rows:
        lines.append("Instructions per compute (`scripts/callgrind --family vary`; *own* as above):")
        lines.append("")
        lines.append("| backends | nodes | ours | original | ratio | ours own | original own | own ratio | ours Ir/node | original Ir/node |")
        lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in rows:
            n = c["n_nodes"]
            lines.append(f"| {c['n_backends']} | {n} | {c['ours_total']:,} | {c['ref_total']:,} | {c['ratio_total']:.3f} | {c['ours_own']:,} | "
                         f"{c['ref_own']:,} | {c['ratio_own']:.3f} | {c['ours_total'] / n:.0f} | {c['ref_total'] / n:.0f} |")
            if n == 4096 and c["n_backends"] == 2:
                targets["vary_ir"] = c["ratio_total"]
                targets["vary_own"] = c["ratio_own"]
        per = [(c["n_nodes"], c["ours_total"] / c["n_nodes"]) for c in rows if c["n_backends"] == 2]
        if len(per) >= 2:
            targets["vary_linear"] = (per[0], per[-1])


SHARE_FAMILIES = [("steady", "callgrind.json", "same graph again", 0.15), ("vary", "callgrind_vary.json", "new graph every compute", 0.45),
                  ("few-splits", "callgrind_fewsplits.json", "same graph again", 0.15),
                  ("few-splits-vary", "callgrind_fewsplits_vary.json", "new graph every compute", 0.45)]


def share_table(lines, targets, cgs):
    """The scheduler share: sched_graph_compute's inclusive instructions minus the backends' graph_compute."""
    rows = []
    for family, _, what, target in SHARE_FAMILIES:
        for c in (cgs.get(family) or {}).get("rows", []):
            if "ratio_sched" in c:
                rows.append((family, what, target, c))
    if not rows:
        return
    lines.append("Instructions per compute of everything in `sched_graph_compute` but the backends' graph_compute (inclusive "
                 "costs from callgrind's call graph, `scripts/callgrind --family F`; includes the graph allocation):")
    lines.append("")
    lines.append("| family | backends | nodes | splits | ours | original | ratio | target |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for family, what, target, c in rows:
        lines.append(f"| {family} ({what}) | {c['n_backends']} | {c['n_nodes']} | {c['splits']} | {c['ours_sched']:,} | {c['ref_sched']:,} | "
                     f"{c['ratio_sched']:.3f} | ≤ {target} |")
        if c["n_backends"] == 2 and c["n_nodes"] in (4096, 6144):
            targets.setdefault("share", []).append((family, what, c["n_nodes"], c["splits"], target, c["ratio_sched"]))


def breakdown_tables(lines, cg, top=12):
    """Top functions (self instructions) from scripts/callgrind: own share of benchmark 1, and benchmark 2."""
    if not cg:
        return
    bd = cg.get("breakdown") or {}
    if bd:
        n, nb = cg["breakdown_nodes"], cg["breakdown_backends"]
        own = {r_["n_backends"]: r_ for r_ in cg["rows"] if r_["n_nodes"] == n}.get(nb)
        lines.append("")
        lines.append(f"Where the own share goes ({nb} backends, {n} nodes; instructions per compute, self cost of each function, "
                     "from `scripts/callgrind`):")
        lines.append("")
        lines.append("| ours: function | Ir | % of own | original: function | Ir | % of own |")
        lines.append("|---|---:|---:|---|---:|---:|")
        for i in range(top):
            cells = []
            for imp in ("ours", "ref"):
                e = bd.get(imp, [])[i] if i < len(bd.get(imp, [])) else None
                tot = own[f"{imp}_own"] if own else None
                if e:
                    cells += [f"`{e['function']}`", f"{e['ir']:,}", f"{100 * e['ir'] / tot:.1f}" if tot else "—"]
                else:
                    cells += ["", "", ""]
            lines.append("| " + " | ".join(cells) + " |")
    for row in cg.get("lifecycle", []):
        lines.append("")
        lines.append(f"Instructions of one `sched_new` + `init_measure` + `sched_free` ({row['n_backends']} backends, {row['n_nodes']} nodes): "
                     f"ours {row['ours']:,}, original {row['ref']:,}, ratio {row['ratio']:.3f}. Top functions (self):")
        lines.append("")
        lines.append("| ours: function | Ir | % | original: function | Ir | % |")
        lines.append("|---|---:|---:|---|---:|---:|")
        for i in range(top):
            cells = []
            for imp in ("ours", "ref"):
                lst = row.get(f"{imp}_top", [])
                e = lst[i] if i < len(lst) else None
                cells += [f"`{e['function']}`", f"{e['ir']:,}", f"{100 * e['ir'] / row[imp]:.1f}"] if e else ["", "", ""]
            lines.append("| " + " | ".join(cells) + " |")


def lifecycle_table(lines, targets, mem, paired):
    memd = {(m["impl"], m["n_nodes"]): m for m in mem if "impl" in m}
    lines.append("| nodes | ours | original | ratio | held besides compute buffers: ours | original | ratio | heap allocated per lifetime: ours | original | heap blocks: ours | original |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sorted({int(p) for p in params("sched_lifecycle", "ours")} | {k[1] for k in memd}):
        o, r = median_ns("sched_lifecycle", "ours", n), median_ns("sched_lifecycle", "ref", n)
        mo, mr = memd.get(("ours", n)), memd.get(("ref", n))
        held_o = mo and mo["held_measure_no_buffers"]
        held_r = mr and mr["held_measure_no_buffers"]
        lines.append(f"| {n} | {fmt_t(o)} | {fmt_t(r)} | {fmt_r(ratio(o, r))} | {fmt_b(held_o)} | {fmt_b(held_r)} | "
                     f"{fmt_r(ratio(held_o, held_r))} | {fmt_b(mo and mo['cycle_bytes'])} | {fmt_b(mr and mr['cycle_bytes'])} | "
                     f"{mo and mo['cycle_allocs']} | {mr and mr['cycle_allocs']} |")
        if n == 2048:
            targets["life_time"] = ratio(o, r)
            targets["life_mem"] = ratio(held_o, held_r)
            if mo and mr and "held_steady_no_buffers" in mo:
                targets["steady_mem"] = ratio(mo["held_steady_no_buffers"], mr["held_steady_no_buffers"])
    pc = [p for p in paired if p.get("bench") == "sched_lifecycle"]
    if pc:
        lines.append("")
        lines.append("Interleaved cross-check (`paired cycle`, 20 lifetimes per round, alternating which goes first): " + "; ".join(
            f"{p['n_nodes']} nodes: ours {fmt_t(p['a_ns'])}, original {fmt_t(p['b_ns'])}, median ratio {p['ratio']:.3f} "
            f"[quartiles {p['ratio_q1']:.3f}–{p['ratio_q3']:.3f}]" for p in pc) + ".")
        targets["life_paired"] = next((p["ratio"] for p in pc if p["n_nodes"] == 2048), None)
    if memd:
        lines.append("")
        lines.append("Heap held after one `sched_graph_compute` besides the compute buffers (includes the CPU backend's work buffer, the same in both): "
                     + ", ".join(f"{n} nodes: ours {fmt_b(memd[('ours', n)]['held_compute_no_buffers'])}, original {fmt_b(memd[('ref', n)]['held_compute_no_buffers'])}"
                                 for n in sorted({k[1] for k in memd}) if ("ours", n) in memd and ("ref", n) in memd)
                     + ". After 8 computes of the same graph: "
                     + ", ".join(f"{n} nodes: ours {fmt_b(memd[('ours', n)]['held_steady_no_buffers'])}, original {fmt_b(memd[('ref', n)]['held_steady_no_buffers'])}"
                                 for n in sorted({k[1] for k in memd})
                                 if "held_steady_no_buffers" in memd.get(("ours", n), {}) and ("ref", n) in memd)
                     + ". Heap left after `sched_free`: "
                     + ", ".join(f"{m['impl']} {m['n_nodes']}: {m['leak']} B" for m in mem if "impl" in m) + ".")


def io_table(lines, targets):
    sizes = sorted({int(p) for p in params("tensor_set", "ours")})
    lines.append("| size | set: ours | original | ratio | get: ours | original | ratio | copy: ours | original | ratio |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = {}
    for s in sizes:
        cells = [fmt_b(s)]
        for op in ("set", "get", "copy"):
            o, r = median_ns(f"tensor_{op}", "ours", s), median_ns(f"tensor_{op}", "ref", s)
            cells += [fmt_t(o), fmt_t(r), fmt_r(ratio(o, r))]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Bandwidth relative to memcpy of the same bytes (memcpy between the same source and destination, "
                 "time / the call's time; 1.0 = as fast as memcpy), and memcpy's own bandwidth over our buffers:")
    lines.append("")
    lines.append("| size | set: ours | original | get: ours | original | copy: ours | original | memcpy GB/s (set, get, copy) |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---|")
    for s in sizes:
        cells = [fmt_b(s)]
        gbs = []
        for op in ("set", "get", "copy"):
            for imp in ("ours", "ref"):
                m = median_ns(f"tensor_{op}", f"memcpy_{imp}", s)
                bw = ratio(m, median_ns(f"tensor_{op}", imp, s))
                cells.append(fmt_r(bw, 3))
                if s >= 1 << 20 and bw is not None:
                    worst.setdefault(imp, []).append((bw, op, s))
                if imp == "ours" and m:
                    gbs.append(f"{s / m:.1f}")
        cells.append(", ".join(gbs))
        lines.append("| " + " | ".join(cells) + " |")
    if "ours" in worst:
        targets["io"] = min(worst["ours"])
        targets["io_median"] = statistics.median(w[0] for w in worst["ours"])
    if "ref" in worst:
        targets["io_ref"] = min(worst["ref"])


def enc_table(lines, targets, paired):
    ps = params("encoder_layer", "ours")
    pe = [p for p in paired if p.get("bench") == "encoder_layer"]
    pd = [p for p in paired if p.get("bench") == "encoder_layer_direct"]
    lines.append("| measurement | ours | original | ratio |")
    lines.append("|---|---:|---:|---:|")
    for p in ps:
        o, r = median_ns("encoder_layer", "ours", p), median_ns("encoder_layer", "ref", p)
        n_ctx, thr = p.split("x")
        lines.append(f"| whisper-tiny encoder layer, n_ctx {n_ctx}, {thr.rstrip('t')} threads: criterion (ours, then the original: "
                     f"sensitive to load changes between the two) | {fmt_t(o)} | {fmt_t(r)} | {fmt_r(ratio(o, r))} |")
        targets["enc"] = ratio(o, r)
    for label, rows in (("`paired enc`: CPU backend `graph_compute`", pe),
                        ("`paired enc-direct` (control): each build's ggml.c called directly, no ggml-backend code", pd)):
        for p in rows:
            lines.append(f"| {label}, {p['rounds']} rounds, {p['built'].replace('_', ' ')}: median of per-round ratios "
                         f"[quartiles {p['ratio_q1']:.3f}–{p['ratio_q3']:.3f}] | {fmt_t(p['a_ns'])} | {fmt_t(p['b_ns'])} | {p['ratio']:.3f} |")
    if pe:
        targets["enc_paired"] = statistics.median(p["ratio"] for p in pe)
        targets["enc_paired_n"] = len(pe)
    if pd:
        targets["enc_direct"] = statistics.median(p["ratio"] for p in pd)
        if pe:
            lines.append("")
            lines.append(f"Median of the `paired enc` runs {targets['enc_paired']:.3f}, of the control runs {targets['enc_direct']:.3f}: "
                         f"the part attributable to ggml-backend code is their quotient, {targets['enc_paired'] / targets['enc_direct']:.3f}; "
                         "the rest comes from the two copies of ggml.c themselves (same source and flags, different addresses).")


def io_paired_table(lines, targets, paired):
    pio = [p for p in paired if p.get("bench", "").endswith("_vs_memcpy")]
    if not pio:
        return
    lines.append("")
    lines.append("Interleaved (`paired io`): each call alternated with memcpy of the same bytes; bandwidth relative to memcpy = "
                 "1 / median of the per-round time ratios [quartiles]:")
    lines.append("")
    lines.append("| size | set: ours | original | get: ours | original | copy: ours | original |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|")
    by = {(p["bench"], p["impl"], p["size"]): p for p in pio}
    worst = []
    for size in sorted({p["size"] for p in pio}):
        cells = [fmt_b(size)]
        for op in ("set", "get", "copy"):
            for imp in ("ours", "ref"):
                p = by.get((f"tensor_{op}_vs_memcpy", imp, size))
                if p:
                    cells.append(f"{1 / p['ratio']:.3f} [{1 / p['ratio_q3']:.2f}–{1 / p['ratio_q1']:.2f}]")
                    if imp == "ours":
                        worst.append((1 / p["ratio"], op, size))
                else:
                    cells.append("—")
        lines.append("| " + " | ".join(cells) + " |")
    if worst:
        targets["io_paired"] = min(worst)


def demo_table(lines, targets):
    d = os.path.join(OUT, "demo")
    runs = {}
    for flavour in ("ours", "orig"):
        for p in sorted(glob.glob(os.path.join(d, f"{flavour}.*.txt"))):
            if not re.search(r"\.\d+\.txt$", p):
                continue
            with open(p) as f:
                m = re.search(r"^run_ms:\s*([0-9.]+)", f.read(), re.M)
            if m:
                runs.setdefault(flavour, []).append(float(m.group(1)))
    log = ""
    if os.path.exists(os.path.join(d, "demo.log")):
        with open(os.path.join(d, "demo.log")) as f:
            log = f.read()
    same = re.search(r"token ids identical:\s*(\S+)", log)
    if not runs.get("ours") or not runs.get("orig"):
        reason = "pending: scripts/demo did not run or produced no timings"
        if os.path.exists(os.path.join(d, "reason.txt")):
            with open(os.path.join(d, "reason.txt")) as f:
                reason = "pending: " + f.read().strip()
        lines.append(f"*{reason}*")
        return
    o, r = statistics.median(runs["ours"]), statistics.median(runs["orig"])
    lines.append("| runs each | ours median | original median | ratio | ours min | original min | token ids identical |")
    lines.append("|---:|---:|---:|---:|---:|---:|---|")
    lines.append(f"| {len(runs['ours'])} | {o:.0f} ms | {r:.0f} ms | {o / r:.3f} | {min(runs['ours']):.0f} ms | {min(runs['orig']):.0f} ms | {same.group(1) if same else '?'} |")
    targets["e2e"] = o / r


def targets_table(lines, t):
    lines.append("| target | required | measured | |")
    lines.append("|---|---|---|---|")
    def row(name, req, val, cond, fmt=fmt_r):
        lines.append(f"| {name} | {req} | {fmt(val) if val is not None else '—'} | {ok(None if val is None else cond(val))} |")
    row("sched_graph_compute, 2 backends, 4096 nodes: time ours/original", "≤ 0.5", t.get("time"), lambda v: v <= 0.5)
    row("… instructions ours/original", "≤ 0.5", t.get("ir"), lambda v: v <= 0.5)
    row("… own share (instructions) ours/original", "≤ 0.1 (aim)", t.get("own"), lambda v: v <= 0.1)
    for nb, first, last in t.get("linear", []):
        lines.append(f"| cost linear in nodes ({nb} backends): instructions per node, ours | flat | {first[1]:.0f} at {first[0]} → {last[1]:.0f} at {last[0]} | "
                     f"{ok(abs(last[1] / first[1] - 1) <= 0.25)} |")
    if t.get("sched_paired") is not None:
        row("… time, interleaved (`paired sched`, median of per-round ratios)", "≤ 0.5", t.get("sched_paired"), lambda v: v <= 0.5)
    row("vary family, 2 backends, 4096 nodes: instructions ours/original", "≤ 0.55", t.get("vary_ir"), lambda v: v <= 0.55)
    row("… own share (instructions) ours/original", "≤ 0.2", t.get("vary_own"), lambda v: v <= 0.2)
    if t.get("vary_time") is not None:
        row("… time ours/original (criterion medians)", "informational", t.get("vary_time"), lambda v: True)
    if t.get("vary_linear"):
        first, last = t["vary_linear"]
        lines.append(f"| … cost linear in nodes: instructions per node, ours | flat | {first[1]:.0f} at {first[0]} → {last[1]:.0f} at {last[0]} | "
                     f"{ok(abs(last[1] / first[1] - 1) <= 0.25)} |")
    for family, what, n, splits, target, v in t.get("share", []):
        row(f"scheduler share, {family} ({what}), 2 backends, {n} nodes, {splits} splits: instructions ours/original",
            f"≤ {target}", v, lambda v, target=target: v <= target)
    row("sched_new + init_measure + free, 2048 nodes: time ours/original", "≤ 0.5", t.get("life_time"), lambda v: v <= 0.5)
    if t.get("life_paired") is not None:
        row("… interleaved (`paired cycle`, median of per-round ratios)", "≤ 0.5", t.get("life_paired"), lambda v: v <= 0.5)
    row("memory held besides compute buffers, 2048 nodes: ours/original", "≤ 0.10", t.get("life_mem"), lambda v: v <= 0.10)
    row("… after 8 computes of the same graph", "≤ 0.10", t.get("steady_mem"), lambda v: v <= 0.10)
    io = t.get("io")
    lines.append(f"| set/get/copy ≥ 1 MiB: worst bandwidth of ours relative to memcpy (criterion medians) | ≥ 0.95 | "
                 + (f"{io[0]:.3f} ({io[1]}, {fmt_b(io[2])}); median over ops and sizes {t['io_median']:.3f}" if io else "—")
                 + f" | {ok(None if not io else io[0] >= 0.95)} |")
    io = t.get("io_paired")
    lines.append(f"| … interleaved with memcpy (`paired io`, 1, 16, 256 MiB): worst | ≥ 0.95 | "
                 + (f"{io[0]:.3f} ({io[1]}, {fmt_b(io[2])})" if io else "—") + f" | {ok(None if not io else io[0] >= 0.95)} |")
    row(f"CPU graph_compute, encoder layer: ours/original (interleaved, `paired enc`, median of {t.get('enc_paired_n', 0)} runs)",
        "0.98 – 1.02", t.get("enc_paired"), lambda v: 0.98 <= v <= 1.02)
    if t.get("enc_paired") and t.get("enc_direct"):
        row("… divided by the control (same computes without ggml-backend code)", "0.98 – 1.02",
            t["enc_paired"] / t["enc_direct"], lambda v: 0.98 <= v <= 1.02)
    lines.append(f"| … criterion medians (sequential; informational, see the table of benchmark 4) | | {fmt_r(t.get('enc'))} | |")
    row("whisper end-to-end (scripts/demo): ours/original", "0.98 – 1.02", t.get("e2e"), lambda v: 0.98 <= v <= 1.02)


def main():
    ap = argparse.ArgumentParser(prog="scripts/bench_report.py", usage="%(prog)s [--update]", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update", action="store_true", help="rewrite the results section of BENCHMARKS.md")
    a = ap.parse_args()
    mem = load_lines(os.path.join(OUT, "sched_mem.json"))
    paired = load_lines(os.path.join(OUT, "paired.json"))
    cg = load_json(os.path.join(OUT, "callgrind.json"))
    cgv = load_json(os.path.join(OUT, "callgrind_vary.json"))
    cgs = {family: load_json(os.path.join(OUT, name)) for family, name, _, _ in SHARE_FAMILIES}
    t = {}
    L = []
    if os.path.exists(os.path.join(OUT, "machine.txt")):
        with open(os.path.join(OUT, "machine.txt")) as f:
            L.append("Run: " + " · ".join(l.strip() for l in f if l.strip()))
            L.append("")
    L.append("### 1. Scheduler overhead: `sched_graph_compute` (median per compute)")
    L.append("")
    sched_table(L, t, cg)
    breakdown_tables(L, cg)
    L.append("")
    L.append("### 1b. The same with a new graph every compute (\"vary\" family: a fresh split each time)")
    L.append("")
    vary_table(L, t, cgv)
    L.append("")
    if any(cgs.values()):
        L.append("### 1c. Scheduler share: steady, vary and the few-splits family (6144 nodes, 8 splits, 2 backends)")
        L.append("")
        share_table(L, t, cgs)
        L.append("")
    L.append("### 2. `sched_new` + `init_measure` + `sched_free` (2 backends; median per lifetime) and scheduler memory")
    L.append("")
    lifecycle_table(L, t, mem, paired)
    L.append("")
    L.append("### 3. `tensor_set` / `tensor_get` / `tensor_copy` on the CPU backend (median per call)")
    L.append("")
    io_table(L, t)
    io_paired_table(L, t, paired)
    L.append("")
    L.append("### 4. CPU backend `graph_compute`, compute-bound (median per compute)")
    L.append("")
    enc_table(L, t, paired)
    sp = [p for p in paired if p.get("bench", "").startswith("sched_compute")]
    t["sched_paired"] = next((p["ratio"] for p in sp if p["bench"] == "sched_compute_2b" and p["n_nodes"] == 4096), None)
    if sp:
        L.append("")
        L.append("Interleaved cross-check of benchmark 1 (`paired sched`): " + "; ".join(
            f"{p['bench']} {p['n_nodes']} nodes: ours {fmt_t(p['a_ns'])}, original {fmt_t(p['b_ns'])}, median ratio {p['ratio']:.3f} "
            f"[quartiles {p['ratio_q1']:.3f}–{p['ratio_q3']:.3f}]" for p in sp) + ".")
    L.append("")
    L.append("### 5. whisper end-to-end (`scripts/demo`, whisper tiny.en on the bundled sample)")
    L.append("")
    demo_table(L, t)
    L.append("")
    L.append("### Targets")
    L.append("")
    targets_table(L, t)
    text = "\n".join(L) + "\n"
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "results.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    if a.update:
        p = os.path.join(ROOT, "BENCHMARKS.md")
        with open(p) as f:
            doc = f.read()
        i, j = doc.find(BEGIN), doc.find(END)
        if i < 0 or j < i:
            sys.exit(f"{p}: markers {BEGIN} / {END} not found")
        doc = doc[: i + len(BEGIN)] + "\n" + text + doc[j:]
        with open(p, "w") as f:
            f.write(doc)
        print(f"updated {os.path.relpath(p, ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
