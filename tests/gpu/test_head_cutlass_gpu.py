"""GPU test of the CUTLASS 3xTF32 candidates of the two aux head forwards, ``aux_trade_outcome_forward`` and
``aux_next_bar_forward`` (``kernels/aux_head_forward_cutlass.cu``; not shipped, issue 18),
through ``benchmarks/gpu_head_fwd_cutlass.py`` (marked ``gpu``: skipped with the conftest's reason where no GPU
is; skipped where CuPy, torch or the CUTLASS headers are missing):

* at B = 37, 4103 and 65536, for each head's shipped (SH2, H, K) (aligned and one float off 16-byte
  alignment), every other combination of its contract's verify dims (SH2 = 253, H = 129 / 100, K = 1 / 8)
  and, for the trade-outcome head, K = 0 and K = AUX_K_MAX + 1, the candidate (the default tile) is within
  the contract's tolerance of the float64 reference in every output (h1_out, logits, probs / pred), writes
  every element of rows < B and nothing past B, writes NaN to logits and probs where K is out of range, and
  is bit-deterministic over three runs;
* the shipped kernels pass the same checks in the same run (so a failure is the candidate's).

Whether its error is no larger than torch float32's (the issue's bar) is printed, not asserted: it is a
measurement for docs/benchmarks.md. Needs CuPy, torch and ``pip install --no-deps nvidia-cutlass==4.2.0.0``
(or ``CUTLASS_INCLUDE``); run with ``python -m pytest -q tests/gpu/test_head_cutlass_gpu.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]


def test_cutlass_head_forwards_are_accurate_and_deterministic(tmp_path, monkeypatch):
    pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e '.[gpu]')")
    pytest.importorskip("torch", reason="torch is not installed; the benchmark compares with torch")
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_head_fwd_cutlass as bench

    try:
        bench.cutlass_include()
    except bench.HeadersMissing as exc:
        pytest.skip(str(exc))
    out = tmp_path / "head_fwd.json"
    code = bench.main(["--sizes", "37,4103,65536", "--time-sizes", "", "--tiles", bench.DEFAULT_TILE.name, "--json", str(out)])
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert [r for r in rows if "error" in r] == []
    assert {(r["head"], r["SH2"], r["H"], r["K"], r["misaligned"]) for r in rows} == {
        *(("trade_outcome", s, h, k, False) for s in (256, 253) for h in (128, 129) for k in (3, 1, 8)),
        ("trade_outcome", 256, 128, 3, True), ("trade_outcome", 256, 128, 0, False), ("trade_outcome", 256, 128, 9, False),
        *(("next_bar", s, h, 1, False) for s in (256, 253) for h in (128, 129, 100)), ("next_bar", 256, 128, 1, True),
    }  # fmt: skip
    assert {r["B"] for r in rows} == {37, 4103, 65536}
    cand = data["candidate"]
    for r in rows:
        where = f"{r['head']} SH2={r['SH2']} H={r['H']} K={r['K']} B={r['B']} ({r['origin']})"
        for tag in ("shipped", cand):
            res = r[tag]
            for name, acc in res["outputs"].items():
                assert acc["ok"], f"{where} {tag} {name}: {acc['status']} {acc['detail']}"
            assert res["deterministic"], f"{where} {tag}: two runs differ"
            assert res["guard_rows_untouched"], f"{where} {tag}: wrote past row B"
            assert res["nan_rule"] is not False, f"{where} {tag}: logits/probs not NaN with K out of range"
    assert code == 0 and data["candidate_ok"] is True
    print(json.dumps([{k: r[k] for k in ("head", "SH2", "H", "K", "B", "misaligned")} |
                      {f"{tag}_{n}": r[tag]["outputs"][n]["rel_norm"] for tag in (cand, "shipped", "torch_fp32") for n in r[cand]["outputs"]} |
                      {"not_worse_than_torch": r[cand]["not_worse_than_torch"]} for r in rows]), file=sys.stderr)
