"""GPU tests of the numeric stress cases (issue 16 item 2), marked ``gpu``.

* the stress fixture (tests/data/stress_softmax): the real softmax kernel passes every case, stress
  cases included; the copy without the row-max subtraction (buggy/softmax_nomax.cu) fails ``wireup
  verify`` with the default settings, in stress cases only (VERIFY_NAN at ``stress logits exp+100``);
  with its logits opted out of the stress cases, the same bug passes;
* the shipped kernels that get stress cases (the trade-outcome forward's b2, the loss reduce's logits)
  pass them on both backends.

The CPU versions with an emulated copy of the bug are in tests/test_stress.py. Run on the device machine:

    python3 -m pytest -q -m gpu tests/gpu/test_stress_gpu.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.runtime import verify

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "stress_softmax"
LOGITS = '  { name = "logits", dtype = "f32", shape = ["B", "K"], role = "in" },'


@pytest.fixture
def softmax(tmp_path: Path) -> Path:
    dst = tmp_path / "stress_softmax"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def _failed(out) -> set[tuple[str, str]]:
    return {(c.check, c.case) for r in out.run.results for c in r.checks if c.verdict == "fail"}


def test_the_correct_softmax_passes_its_stress_cases_on_the_gpu(softmax: Path) -> None:
    out = verify(softmax, evidence=False)
    assert out.result.exit_code == 0, [f.message for f in out.result.findings]
    kernel = next(r for r in out.run.results if r.kind == "kernel")
    kinds = {c.case.split("(stress logits ")[-1].rstrip(")") for c in kernel.checks if "(stress logits " in c.case}
    assert kinds == {"exp+100", "exp-100", "exp±100", "zeros"}


def test_the_softmax_without_max_fails_only_its_stress_cases_on_the_gpu(softmax: Path) -> None:
    shutil.copyfile(softmax / "buggy" / "softmax_nomax.cu", softmax / "kernels" / "softmax.cu")
    out = verify(softmax, evidence=False, kernels=["stress_softmax"])
    failed = _failed(out)
    assert failed and all("stress logits" in case for _, case in failed), failed
    assert "VERIFY_NAN" in {f.rule for f in out.result.findings}
    assert out.result.exit_code == 1


def test_without_stress_cases_the_bug_passes_on_the_gpu(softmax: Path) -> None:
    path = softmax / "contracts" / "softmax.toml"
    path.write_text(path.read_text().replace(LOGITS, LOGITS[:-3] + ', values = { scale = 1.0, stress = false, stress_reason = "control" } },'))
    shutil.copyfile(softmax / "buggy" / "softmax_nomax.cu", softmax / "kernels" / "softmax.cu")
    out = verify(softmax, evidence=False, kernels=["stress_softmax"])
    assert out.result.exit_code == 0, [f.message for f in out.result.findings]


def test_the_shipped_stress_cases_pass_on_both_backends() -> None:
    names = ["aux_trade_outcome_forward", "aux_trade_outcome_loss_reduce"]
    out = verify(REPO, evidence=False, kernels=names, backends=["pycuda", "cupy"])
    stressed = {(r.subject, c.case) for r in out.run.results for c in r.checks if "stress" in c.case}
    assert {s for s, _ in stressed} == set(names)
    assert not _failed(out), sorted(_failed(out))
    assert out.result.exit_code == 0, [f.message for f in out.result.findings]
