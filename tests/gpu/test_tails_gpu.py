"""GPU tests of the tail-hunting size sweep and tail coverage (issue 15), marked ``gpu``.

* the tail fixture (tests/data/tail_rows: a kernel whose last warp flushes the block's shared-memory
  partial after the warps without a row returned early; row count ``B * T``) fails ``wireup verify``
  with the default settings on the GPU;
* with ``T`` fixed at 64 (every case has a multiple of eight rows) it passes, and verify reports
  VERIFY_TAIL_UNCOVERED naming T, an error under ``--strict``; ``wireup check`` predicts it;
* the shipped set: every tail of every launch covered by the default sweep, each schedule's one large
  case (B = 6776) run and passed, no finding, within the minute (target 30 s, docs/benchmarks.md).

The CPU versions with an emulated copy of the bug are in tests/test_sizes.py. Run on the device machine:

    python3 -m pytest -q -m gpu tests/gpu/test_tails_gpu.py
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from audit.runtime import verify

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
TAIL = REPO / "tests" / "data" / "tail_rows"
T_RUNTIME = 'T = { min = 1, max = 1024, doc = "positions per sequence; the rows are the B * T positions" }'


@pytest.fixture
def tail(tmp_path: Path) -> Path:
    dst = tmp_path / "tail_rows"
    shutil.copytree(TAIL, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def test_the_default_sweep_fails_the_tail_kernel_on_the_gpu(tail: Path) -> None:
    out = verify(tail, evidence=False)
    rules = {f.rule for f in out.result.findings}
    assert "VERIFY_UNWRITTEN_OUTPUT" in rules, [f.message for f in out.result.findings]
    assert out.result.exit_code == 1
    kernel = next(r for r in out.run.results if r.kind == "kernel")
    assert any((c["B"] * c["T"]) % 8 for c in kernel.cases)
    assert all(t["covered"] for t in kernel.tails)


def test_with_t_fixed_the_tail_is_reported_uncovered(tail: Path) -> None:
    path = tail / "contracts" / "tail.toml"
    path.write_text(path.read_text().replace(T_RUNTIME, "T = 64"))
    out = verify(tail, evidence=False)
    findings = [(f.rule, f.severity.value, f.message) for f in out.result.findings if f.rule != "VERIFY_TAIL_UNCOVERED" or f.subject == "tail_rows_partial"]
    assert findings == [(
        "VERIFY_TAIL_UNCOVERED", "warning",
        'Kernel "tail_rows_partial" grid "ceil_div(B * T, 8)": B * T is a multiple of 8 in every case because '
        "T = 64 is fixed; make T a runtime dim or give it test values.",
    )]
    strict = verify(tail, evidence=False, kernels=["tail_rows_partial"], strict=True)
    assert strict.result.exit_code == 1


def test_the_shipped_set_covers_every_tail_within_the_minute() -> None:
    t0 = time.perf_counter()
    out = verify(REPO, evidence=False)
    seconds = time.perf_counter() - t0
    assert out.result.findings == [], [f.message for f in out.result.findings]
    for r in out.run.results:
        assert all(t["covered"] for t in r.tails), (r.subject, r.tails)
        if r.kind == "schedule":  # each schedule's one large case, past the chain base values, ran and passed
            large = [c for c in r.cases if c["B"] > 4096]
            assert len(large) == 1, (r.subject, r.cases)
            label = f"B={large[0]['B']}"
            assert any(c.case.startswith(label) and c.verdict == "pass" for c in r.checks), (r.subject, label)
    assert seconds < 60, f"the full verification took {seconds:.1f} s"
