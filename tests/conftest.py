"""Shared helpers for the Python oracle tests (tests/<family>/test_*.py).

They drive the `b12x` CLI that CMake builds; ctest passes its path in B12X_CLI. To run one file by
hand: B12X_CLI=build/b12x python3 -m pytest -q tests/formats/test_ggml_oracle.py
"""
import os
import shlex
import subprocess

import pytest


def cli_path() -> str:
    path = os.environ.get("B12X_CLI", "")
    if not path:
        pytest.fail("B12X_CLI is not set: point it at the built `b12x` binary (ctest sets it)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"B12X_CLI={path!r} is not an executable file")
    return path


def run_cli(*args, check=True, timeout=120) -> subprocess.CompletedProcess:
    """Runs `$B12X_CLI args...` (arguments may be str, int or paths) and returns the completed
    process with text stdout/stderr. With check=True a nonzero exit fails the test, showing the
    command line and stderr."""
    cmd = [cli_path(), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        pytest.fail(f"`{shlex.join(cmd)}` exited with {proc.returncode}\nstderr:\n{proc.stderr}"
                    f"stdout:\n{proc.stdout}")
    return proc


@pytest.fixture
def cli():
    """The run_cli helper as a fixture, for tests that prefer injection over import."""
    return run_cli
