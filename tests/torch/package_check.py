"""The installed package (scripts/test-package.sh: `pip install --no-build-isolation .` into
$B12X_INSTALLED_AT): it is what gets imported, it registers its ops, and they run."""
import os
import pathlib

import torch

import b12x


def test_the_installed_package_is_imported():
    root = pathlib.Path(os.environ["B12X_INSTALLED_AT"]).resolve()
    assert pathlib.Path(b12x.__file__).resolve().is_relative_to(root), b12x.__file__
    assert pathlib.Path(b12x._C.__file__).resolve().is_relative_to(root), b12x._C.__file__
    assert b12x.__version__ == "0.1.0"


def test_ops_run_from_the_install():
    w = b12x.linear.quantize_weight(torch.eye(32) * 127, "q8_0", layout=None)  # d = 1, codes 0 / 127: exact
    assert w.layout == "tile16"
    x = torch.randn(3, 32)
    assert torch.equal(b12x.linear.mm(x, w, out_dtype=torch.float32), x * 127)
    assert torch.ops.b12x.linear.default._schema.name == "b12x::linear"
