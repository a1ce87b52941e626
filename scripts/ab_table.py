#!/usr/bin/env python3
"""The table of an A/B of several source trees (scripts/ab-run.sh): `b12x bench --csv` files named
<tree>.run<r>.csv, trees ordered by name (ab-prepare.sh numbers them, the baseline first).

    python3 scripts/ab_table.py [--out-csv all.csv] DIR/0-main.run1.csv DIR/1-x.run1.csv ...

Per case (suite/case/shape): each tree's median of its runs' medians (us) and its change against
the first tree; rows whose correctness check failed in any run are marked FAIL and not compared.
The copy ceiling of each tree's runs is shown first (the runs should agree on it). --out-csv writes
every run's rows with two more columns, tree and run. Exit status 0; 2 on bad input.
"""
import argparse
import csv
import os
import re
import statistics
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out-csv")
    a = ap.parse_args()
    runs = {}  # tree -> [rows of each run]
    fields = None
    for path in a.files:
        m = re.match(r"(.+)\.run(\d+)\.csv$", os.path.basename(path))
        if not m:
            print(f"ab_table: {path}: not named <tree>.run<r>.csv", file=sys.stderr)
            return 2
        try:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                rows = list(reader)
                fields = fields or reader.fieldnames
        except OSError as e:
            print(f"ab_table: {e}", file=sys.stderr)
            return 2
        runs.setdefault(m.group(1), []).append((int(m.group(2)), rows))
    trees = sorted(runs)
    if len(trees) < 2 or not fields:
        print("ab_table: need the runs of at least two trees", file=sys.stderr)
        return 2

    times, failed, order = {}, set(), []
    for t in trees:
        for _, rows in runs[t]:
            for r in rows:
                key = (r["suite"], r["case"], r["shape"])
                if key not in order:
                    order.append(key)
                if r.get("check", "PASS") not in ("PASS", "", "-"):
                    failed.add(key)
                try:
                    times.setdefault((t, key), []).append(float(r["median_us"]))
                except (KeyError, ValueError):
                    failed.add(key)

    width = max(12, max(len(t) for t in trees))
    head = f"{'case':44s}" + "".join(f"{t[:width]:>{width + 10}s}" for t in trees)
    print(head)
    print("-" * len(head))
    for key in order:
        cells = []
        base = times.get((trees[0], key))
        base_med = statistics.median(base) if base else None
        for i, t in enumerate(trees):
            v = times.get((t, key))
            if not v:
                cells.append(f"{'-':>{width + 10}s}")
                continue
            med = statistics.median(v)
            change = "" if i == 0 or not base_med or key in failed else f" ({100 * (med / base_med - 1):+5.1f}%)"
            cells.append(f"{med:>{width + 10 - len(change)}.1f}{change}")
        name = "/".join(key[:2]) + " " + key[2]
        print(f"{name[:44]:44s}" + "".join(cells) + ("  FAIL" if key in failed else ""))
    print(f"(median us over {max(len(runs[t]) for t in trees)} runs per tree; change against {trees[0]})")

    if a.out_csv:
        with open(a.out_csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["tree", "run"] + list(fields), extrasaction="ignore")
            w.writeheader()
            for t in trees:
                for run, rows in sorted(runs[t]):
                    for r in rows:
                        w.writerow({"tree": t, "run": run, **r})
    return 0


if __name__ == "__main__":
    sys.exit(main())
