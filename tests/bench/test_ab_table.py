"""scripts/ab_table.py: the table of an A/B of several source trees (scripts/ab-run.sh)."""
import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ab_table.py"
HEADER = "suite,case,shape,path,median_us,min_us,p10_us,p90_us,bytes,flops,tbps,tflops,pct_copy,pct_bf16,baseline,baseline_us,ratio,check,check_detail\n"


def write(path, rows):
    path.write_text(HEADER + "".join(f"{s},{c},{sh},p,{us},0,0,0,0,0,0,0,0,0,b,0,1,{check},\n"
                                     for s, c, sh, us, check in rows))
    return str(path)


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_medians_over_runs_changes_against_the_first_tree_and_failed_rows(tmp_path):
    files = []
    # tree 0-main: 100 / 110 / 90 us -> median 100; 1-x: 80 / 82 / 120 -> 82; 2-y: 100 / 130 / 120 -> 120.
    for tree, times in (("1-x", (80, 82, 120)), ("0-main", (100, 110, 90)), ("2-y", (100, 130, 120))):
        for run_no, us in enumerate(times, 1):
            fp8_check = "FAIL" if tree == "2-y" and run_no == 2 else "PASS"
            files.append(write(tmp_path / f"{tree}.run{run_no}.csv",
                               [("baseline", "copy", "2GiB", 1000 + run_no, "PASS"),
                                ("linear", "nvfp4", "1x28672x8192", us, "PASS"),
                                ("linear", "fp8", "1x28672x8192", us / 2, fp8_check)]))
    out = tmp_path / "all.csv"
    proc = run("--out-csv", str(out), *files)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["case", "0-main", "1-x", "2-y"]  # the trees in name order, baseline first
    nv = next(l for l in lines if l.startswith("linear/nvfp4 1x28672x8192"))
    assert nv.split()[2:] == ["100.0", "82.0", "(-18.0%)", "120.0", "(+20.0%)"], nv
    fp8 = next(l for l in lines if l.startswith("linear/fp8 1x28672x8192"))
    assert fp8.endswith("FAIL") and "%" not in fp8, fp8  # a failed check anywhere: no change shown
    assert any(l.startswith("baseline/copy 2GiB") for l in lines)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 27 and {r["tree"] for r in rows} == {"0-main", "1-x", "2-y"}
    assert {r["run"] for r in rows} == {"1", "2", "3"}


def test_bad_input_exits_2(tmp_path):
    proc = run(write(tmp_path / "no-run-number.csv", []), write(tmp_path / "0-a.run1.csv", []))
    assert proc.returncode == 2 and "not named <tree>.run<r>.csv" in proc.stderr
    one_tree = run(write(tmp_path / "0-a.run1.csv", [("linear", "fp8", "1x1x1", 1.0, "PASS")]))
    assert one_tree.returncode == 2 and "at least two trees" in one_tree.stderr
