"""GPU test of ``aux_weight_grad_partial_masked`` through ``benchmarks/gpu_wgrad_masked.py`` (marked ``gpu``: skipped
with the conftest's reason where no GPU is, and where CuPy is missing): at every case of the benchmark (the fused
schedule's two shapes and two off the tiles, B = 37, 4103, 65536, P = WGP and 1, 0 / 3 / 100 % labels, misaligned
pointers) the masked kernel matches the float64 reference with NaN in every skipped row's dz and x (so it reads
none), writes every element, is bit-deterministic over three runs, and the dense kernel agrees with the same
reference where the skipped rows' dz is zero. The times are printed and written to the JSON, not asserted.
Run with ``python -m pytest -q tests/gpu/test_wgrad_masked_gpu.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]


def test_masked_weight_grad_partial_is_accurate_skips_rows_and_is_deterministic(tmp_path, monkeypatch):
    pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e '.[gpu]')")
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_masked as bench

    out = tmp_path / "wgrad_masked.json"
    code = bench.main(["--json", str(out)])
    data = json.loads(out.read_text())
    bad = [r for r in data["rows"] if not (r["ok"] and r["deterministic"] and r["dense_ok"])]
    assert bad == [] and code == 0 and data["failures"] == 0
    assert len(data["rows"]) == 84
    for t in data["times"]:
        print(f"{t['M']}x{t['N']} B={t['B']} P={t['P']}: masked {t['masked_us']:.1f} us, dense {t['dense_us']:.1f} us", file=sys.stderr)
