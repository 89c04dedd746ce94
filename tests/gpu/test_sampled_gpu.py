"""GPU tests of sampled references for kernels that are not rowwise (issue 15, item 4), marked ``gpu``.

The fixture tests/data/wide_columns is a column sum of a [B, V] input over its rows, V = 50,257: past the
reference budget (B > 667) its float64 reference computes a sample of the columns (``sample_axes``,
``select=``). On the device:

* the default sweep (small values of B first, the contract's extra case B = 1027 past the budget) verifies
  the kernel: every case compared with its reference, B = 1027 on sampled columns, and it says so;
* the buggy copy (buggy/column_sum_no_tail.cu: the last B % 4 rows dropped) fails VERIFY_REFERENCE at
  B = 1027, a case compared on sampled columns only.

The CPU versions (emulated backend) are in tests/test_sampled_reference.py. Run on the device machine:

    python3 -m pytest -q -m gpu tests/gpu/test_sampled_gpu.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.runtime import verify

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "wide_columns"
SAMPLED = 'matches the float64 reference (sampled 256 of 50,257 elements of "colsum")'


@pytest.fixture
def wide(tmp_path: Path) -> Path:
    dst = tmp_path / "wide_columns"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def test_the_default_sweep_verifies_the_wide_kernel_on_sampled_columns(wide: Path) -> None:
    out = verify(wide, evidence=False, kernels=["column_sum"])
    assert out.result.exit_code == 0, [f.message for f in out.result.findings]
    [r] = out.run.results
    assert r.verdict == "pass"
    ref = {c.case: c for c in r.checks if c.check == "reference" and c.case.startswith("B=") and " " not in c.case}
    assert ref["B=1027"].verdict == "pass" and ref["B=1027"].message == SAMPLED
    assert ref["B=1"].message == "matches the float64 reference"
    assert all(c.verdict == "pass" for c in ref.values()), {k: c.message for k, c in ref.items() if c.verdict != "pass"}


def test_the_sampled_comparison_fails_the_buggy_copy_on_the_gpu(wide: Path) -> None:
    shutil.copyfile(wide / "buggy" / "column_sum_no_tail.cu", wide / "kernels" / "column_sum.cu")
    out = verify(wide, evidence=False, kernels=["column_sum"], sizes=["B=1027"])
    [f] = [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert f.message.startswith('Kernel "column_sum" fails VERIFY_REFERENCE at B=1027: output "colsum"')
    assert f.message.endswith('(sampled 256 of 50,257 elements of "colsum").')
    assert out.result.exit_code == 1
