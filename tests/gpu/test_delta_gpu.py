"""GPU tests of VERIFY_INOUT_DELTA (issue 16 item 4), marked ``gpu``.

* the delta fixture (tests/data/inout_delta: one SGD step ``p -= lr * (g + wd * p)`` with ``lr = 1e-4``,
  ``wd = 1e-2``) under the default ``wireup verify``: the right kernel ``sgd_step`` passes every check;
  ``sgd_step_no_decay``, which drops ``wd * p``, passes the whole-buffer reference comparison at every
  size and fails VERIFY_INOUT_DELTA, the only finding of the run;
* the shipped kernels with ``accumulate`` parameters (none has an ``inout`` one) pass the delta check.

The CPU versions with float32 emulations of the fixture's kernels are in tests/test_runtime_delta.py. Run
on the device machine:

    python3 -m pytest -q -m gpu tests/gpu/test_delta_gpu.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.runtime import verify

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "inout_delta"
SHIPPED_ACCUMULATE = ["aux_next_bar_backward", "aux_trade_outcome_backward", "aux_param_grad_reduce"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    dst = tmp_path / "inout_delta"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def _checks(out, subject: str, check: str) -> list:
    return [c for r in out.run.results if r.subject == subject for c in r.checks if c.check == check]


def test_the_default_verify_catches_the_dropped_weight_decay_on_the_gpu(project: Path) -> None:
    out = verify(project, evidence=False)
    findings = [(f.rule, f.subject) for f in out.result.findings]
    assert set(findings) == {("VERIFY_INOUT_DELTA", "sgd_step_no_decay")}, [f.message for f in out.result.findings]
    assert out.result.exit_code == 1
    for subject in ("sgd_step", "sgd_step_no_decay"):
        ref = _checks(out, subject, "reference")
        assert ref and all(c.verdict == "pass" for c in ref), [c.message for c in ref]
    good = _checks(out, "sgd_step", "inout_delta")
    assert good and all(c.verdict == "pass" for c in good), [c.message for c in good]
    bad = _checks(out, "sgd_step_no_decay", "inout_delta")
    assert bad and all(c.verdict == "fail" for c in bad)


def test_the_shipped_accumulate_kernels_pass_the_delta_on_the_gpu() -> None:
    out = verify(REPO, kernels=SHIPPED_ACCUMULATE, evidence=False)
    assert out.result.findings == [], [f.message for f in out.result.findings]
    for k in SHIPPED_ACCUMULATE:
        deltas = _checks(out, k, "inout_delta")
        assert deltas and all(c.verdict == "pass" for c in deltas), (k, [c.message for c in deltas])
