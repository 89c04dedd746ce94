"""GPU test of the candidate trade-outcome head backward, ``aux_trade_outcome_backward_fast``
(``benchmarks/kernels_baseline/aux_trade_outcome_backward_fast.cu``; not shipped, issue 18), through
``benchmarks/gpu_to_bwd.py`` (marked ``gpu``: skipped with the conftest's reason where no GPU is; skipped where
CuPy is missing).

Every case of ``gpu_to_bwd.cases()`` (B = 1, 37, 300, 4103, 65536; labels 0 / 3 / 50 / 100 %, a few outside
[0, K); K = 3, 1, 8 and 0 / 9 (the NaN rule); NULL weight partials, and non-NULL ones at B <= 300;
valid_count = 0; every float pointer one float off 16-byte alignment (the scalar paths); H = 257, SH2 = 260 / 261;
saxpy_alpha = 0.5) runs the shipped kernel and every candidate build (``fast``, ``fast_u8``, ``fast_r16`` and
``ship``, the contract-ready copy) on the same inputs into NaN-poisoned outputs with guard rows past B: the candidate's outputs must be bit-equal to the shipped kernel's (the accumulator
included), no guard row written, every element of the rows < B written, the accumulator's skipped rows unchanged
bit for bit. Run with ``python -m pytest -q tests/gpu/test_to_bwd_fast_gpu.py``. (Its first run, 5 December, failed
70 cases, the shipped kernel's runs too: the harness's copies to the device raced the launches, fixed since;
docs/benchmarks.md 4h.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]


def test_the_fast_trade_outcome_backward_is_bit_equal_to_the_shipped_kernel(tmp_path, monkeypatch):
    pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e '.[gpu]')")
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_to_bwd as bench

    out = tmp_path / "to_bwd.json"
    code = bench.main(["--time-sizes", "", "--json", str(out)])
    data = json.loads(out.read_text())
    rows = data["correctness"]["rows"]
    failed = {r["case"]: r["problems"] for r in rows if r["problems"]}
    assert failed == {}
    assert code == 0
    assert len(rows) == len(bench.cases()) == data["correctness"]["cases"]
    # the matrix really ran what it names: labelled rows at every size, and none where the mask says so
    by = {r["case"]: r for r in rows}
    assert by["B=65536 K=3 labels=3%"]["n_valid"] == round(0.03 * 65536)
    assert by["B=65536 K=0 labels=50%"]["n_valid"] == 0 and by["B=37 K=3 labels=50% valid_count=0"]["n_valid"] == 0
    assert by["B=300 K=8 labels=100% per-sample"]["n_valid"] == 300
