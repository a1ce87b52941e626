"""scripts/bench_compare.py: the A/B table of two `b12x bench --csv` files."""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_compare.py"
HEADER = "suite,case,shape,path,median_us,min_us,p10_us,p90_us,bytes,flops,tbps,tflops,pct_copy,pct_bf16,baseline,baseline_us,ratio,check,check_detail\n"


def write(path, rows):
    path.write_text(HEADER + "".join(
        f"{s},{c},{sh},p,{us},0,0,0,0,0,0,0,0,0,b,0,{ratio},{check},\n" for s, c, sh, us, ratio, check in rows))
    return str(path)


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_ratios_failed_rows_and_unmatched_cases(tmp_path):
    before = write(tmp_path / "a.csv", [("baseline", "copy", "2GiB", 100, 1, "PASS"),
                                        ("linear_prefill", "nvfp4", "4096x8192x8192", 1000.0, 0.60, "PASS"),
                                        ("linear_prefill", "fp8", "4096x8192x8192", 800.0, 0.80, "PASS"),
                                        ("linear_prefill", "q8_0", "512x4096x14336", 200.0, 0.40, "PASS"),
                                        ("linear_prefill", "bf16", "1x1x1", 10.0, 1.0, "PASS")])
    after = write(tmp_path / "b.csv", [("linear_prefill", "nvfp4", "4096x8192x8192", 800.0, 0.75, "PASS"),
                                       ("linear_prefill", "fp8", "4096x8192x8192", 808.0, 0.79, "PASS"),
                                       ("linear_prefill", "q8_0", "512x4096x14336", 150.0, 0.50, "FAIL")])
    proc = run(before, after)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    nv = next(l for l in lines if l.startswith("linear_prefill/nvfp4/4096x8192x8192"))
    assert nv.split()[1:] == ["1000.0", "800.0", "0.800", "0.60x", "0.75x"]
    assert any(l.startswith("linear_prefill/fp8/4096x8192x8192") and " 1.010 " in l for l in lines), proc.stdout
    # A failed check is never compared; a case in one file only is named; the baselines are left out.
    assert "linear_prefill/q8_0/512x4096x14336: not compared (check: before PASS, after FAIL)" in lines
    assert not any(l.startswith("linear_prefill/q8_0/512x4096x14336 ") for l in lines)
    assert "1 case(s) in one file only: linear_prefill/bf16/1x1x1" in lines
    assert "baseline" not in proc.stdout
    # --min-change hides the cases that moved less.
    small = run(before, after, "--min-change", "0.05").stdout
    assert "linear_prefill/nvfp4" in small and "linear_prefill/fp8/" not in small


def test_unreadable_file_exits_2(tmp_path):
    proc = run(str(tmp_path / "missing.csv"), str(tmp_path / "missing.csv"))
    assert proc.returncode == 2
    assert "cannot read the CSV files" in proc.stderr
