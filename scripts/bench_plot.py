#!/usr/bin/env python3
"""Roofline-style chart of a `b12x bench --json` file.

    python3 scripts/bench_plot.py bench.json bench.png

x: arithmetic intensity (FLOP per byte moved), y: achieved TB/s (bytes moved / median time).
In these units the measured copy bandwidth is a flat ceiling and the measured BF16 (and FP8) GEMM
rates are lines falling as peak / intensity; a point's distance below the lower of the two is its
gap. Cases without FLOPs (dequantize, copies) sit at the left edge. Only rows that passed their
correctness check are drawn. `b12x bench --plot FILE.png` calls this script.
"""
import json
import math
import sys

NO_FLOPS_X = 0.02  # where rows with no arithmetic are drawn on the log axis


def load_rows(report):
    rows = []
    for r in report.get("results", []):
        if not r.get("valid") or not r.get("tbps") or not r.get("bytes"):
            continue
        ai = r["flops"] / r["bytes"] if r.get("flops") else None
        rows.append({"suite": r["suite"], "label": f'{r["case"]} {r["shape"]}', "ai": ai, "tbps": r["tbps"]})
    return rows


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0] + "\nusage: bench_plot.py BENCH.json OUT.png", file=sys.stderr)
        return 2
    json_path, png_path = argv[1], argv[2]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_plot.py: matplotlib is not installed (python3 -m pip install matplotlib, "
              "or apt-get install python3-matplotlib)", file=sys.stderr)
        return 2
    try:
        with open(json_path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"bench_plot.py: cannot read {json_path}: {e}", file=sys.stderr)
        return 2

    meta, ceilings = report.get("meta", {}), report.get("ceilings", {})
    rows = load_rows(report)
    copy_bw = ceilings.get("copy_tbps")
    bf16 = ceilings.get("bf16_tflops")
    fp8 = ceilings.get("fp8_tflops")

    ais = [r["ai"] for r in rows if r["ai"]]
    x_lo = NO_FLOPS_X / 2
    x_hi = max([4096.0] + [a * 4 for a in ais])
    xs = [x_lo * (x_hi / x_lo) ** (i / 400) for i in range(401)]
    flat = [r for r in rows if not r["ai"]]  # no FLOPs: also drawn as bars, where labels fit

    fig, (ax, bars) = plt.subplots(1, 2, figsize=(15, 7), gridspec_kw={"width_ratios": [3, 2]})
    if copy_bw:
        ax.axhline(copy_bw, color="black", lw=1.5, label=f"copy bandwidth {copy_bw:.2f} TB/s (measured)")
    if bf16:
        ax.plot(xs, [bf16 / x for x in xs], color="tab:red", lw=1.5,
                label=f"cuBLAS BF16 GEMM {bf16:.0f} TFLOP/s (measured) / intensity")
    if fp8:
        ax.plot(xs, [fp8 / x for x in xs], color="tab:purple", lw=1, ls="--",
                label=f"cuBLASLt FP8 GEMM {fp8:.0f} TFLOP/s (measured) / intensity")
    if copy_bw and bf16:
        ridge = bf16 / copy_bw
        ax.axvline(ridge, color="grey", lw=0.8, ls=":")
        ax.annotate(f"BF16 ridge {ridge:.0f} FLOP/B", (ridge, copy_bw), textcoords="offset points",
                    xytext=(4, 6), fontsize=8, color="grey")

    suites = sorted({r["suite"] for r in rows})
    markers = "os^Dvp*hX"
    colors = {suite: f"C{i % 10}" for i, suite in enumerate(suites)}
    for i, suite in enumerate(suites):
        pts = [r for r in rows if r["suite"] == suite]
        ax.scatter([r["ai"] or NO_FLOPS_X for r in pts], [r["tbps"] for r in pts], marker=markers[i % len(markers)],
                   s=36, zorder=3, color=colors[suite], label=suite)
        for r in pts:
            if r["ai"]:
                ax.annotate(r["label"], (r["ai"], r["tbps"]), textcoords="offset points", xytext=(5, -3), fontsize=6.5)

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    top = max([copy_bw or 0] + [r["tbps"] for r in rows] + [1.0]) * 2
    bottom = max(min([r["tbps"] for r in rows] + [top / 1000]) / 2, 1e-4)
    ax.set_ylim(bottom, top)
    ax.axvspan(x_lo, NO_FLOPS_X * 1.5, color="0.93", zorder=0)
    ax.text(x_lo * 1.1, top / 1.4, "no FLOPs", fontsize=8, color="grey", va="top")
    ax.set_xlabel("arithmetic intensity (FLOP / byte moved)")
    ax.set_ylabel("achieved bandwidth (TB/s, bytes moved / median time)")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=8, loc="lower left")
    if not rows:
        ax.text(0.5, 0.5, "no valid rows to plot", transform=ax.transAxes, ha="center")

    # Cases without FLOPs, as bars of achieved TB/s against the copy bandwidth.
    labels = [f'{r["suite"]}/{r["label"]}' for r in flat]
    bars.barh(range(len(flat)), [r["tbps"] for r in flat], color=[colors[r["suite"]] for r in flat])
    bars.set_yticks(range(len(flat)))
    bars.set_yticklabels(labels, fontsize=7)
    bars.invert_yaxis()
    if copy_bw:
        bars.axvline(copy_bw, color="black", lw=1.5)
        for i, r in enumerate(flat):
            bars.text(r["tbps"], i, f' {100 * r["tbps"] / copy_bw:.0f}%', va="center", fontsize=7)
    bars.set_xlim(0, max([r["tbps"] for r in flat] + [copy_bw or 0, 1e-3]) * 1.15)
    bars.set_xlabel("TB/s (percent: of the measured copy bandwidth)")
    bars.set_title("cases without FLOPs", fontsize=9)
    if not flat:
        bars.set_axis_off()

    timing = meta.get("timing", {})
    mode = "CUDA-graph replay" if timing.get("mode") == "graph" else "direct launches"
    flushed = "L2 flushed" if timing.get("l2_flushed") else "L2 not flushed"
    fig.suptitle(f'b12x bench {meta.get("b12x_version", "")} on {meta.get("device", "?")} '
                 f'({meta.get("date", "")}): median of {timing.get("iters", "?")}, {mode}, {flushed}', fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(png_path, dpi=130)
    except OSError as e:
        print(f"bench_plot.py: cannot write {png_path}: {e}", file=sys.stderr)
        return 2
    print(f"bench_plot.py: wrote {png_path} ({len(rows)} points)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
