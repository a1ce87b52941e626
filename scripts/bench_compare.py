#!/usr/bin/env python3
"""Side-by-side of two `b12x bench --csv` files (an A/B of a change or a switch).

    python3 scripts/bench_compare.py before.csv after.csv [--min-change 0.02]

For every case id (suite/case/shape) present in both: the medians, after / before (< 1 is faster),
and each run's ratio to its own baseline (cuBLAS / cuBLASLt measured in the same run), which stays
comparable when the two runs had different clocks or cards. Rows that failed their check in either
run are listed apart, never compared. The two runs should come from the same kind of GPU (the CSV
does not say which: keep that with the file name, as docs/perf does). Exit status 0; 2 on bad input.
"""
import argparse
import csv
import sys


def load(path):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r.get("suite") == "baseline":
                continue
            rows[(r["suite"], r["case"], r["shape"])] = r
    return rows


def number(r, key):
    try:
        return float(r.get(key, ""))
    except ValueError:
        return None


def compare(before, after, min_change=0.0):
    """Lines of the report (strings)."""
    out = []
    common = [k for k in before if k in after]
    failed = [k for k in common if before[k].get("check") != "PASS" or after[k].get("check") != "PASS"]
    header = f"{'case':<44} {'before us':>10} {'after us':>10} {'after/before':>12} {'vs base before':>15} {'vs base after':>14}"
    out.append(header)
    out.append("-" * len(header))
    for k in common:
        if k in failed:
            continue
        b, a = number(before[k], "median_us"), number(after[k], "median_us")
        if not b or a is None:
            continue
        change = a / b
        if abs(change - 1.0) < min_change:
            continue
        rb, ra = number(before[k], "ratio"), number(after[k], "ratio")
        fmt = lambda x: f"{x:.2f}x" if x is not None else "-"
        out.append(f"{'/'.join(k):<44} {b:>10.1f} {a:>10.1f} {change:>12.3f} {fmt(rb):>15} {fmt(ra):>14}")
    for k in failed:
        out.append(f"{'/'.join(k)}: not compared (check: before {before[k].get('check')}, after {after[k].get('check')})")
    only = sorted(set(before) ^ set(after))
    if only:
        out.append(f"{len(only)} case(s) in one file only: " + ", ".join("/".join(k) for k in only))
    return out


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--min-change", type=float, default=0.0, help="hide cases whose median moved less than this fraction")
    args = p.parse_args(argv[1:])
    try:
        before, after = load(args.before), load(args.after)
    except (OSError, KeyError, csv.Error) as e:
        print(f"bench_compare: cannot read the CSV files: {e}", file=sys.stderr)
        return 2
    print("\n".join(compare(before, after, args.min_change)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
