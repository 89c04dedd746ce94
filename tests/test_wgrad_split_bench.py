"""benchmarks/gpu_wgrad_split.py off the GPU: it measures the shipped split reduction at the chunk count
the contract gives (WGP) besides any swept P, on the (M, N) the fused schedule launches and the verify
bindings, and both sources it times build with nvcc."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_cases_and_chunk_counts_come_from_the_contracts(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_split as bench
    import gpu_wgrad_tc

    from audit.load import load_contracts

    cs = load_contracts(REPO / "contracts", REPO)
    shapes = gpu_wgrad_tc.shapes_of(cs)
    assert [(s.M, s.N) for s in shapes][:4] == [(256, 256), (128, 256), (3, 128), (1, 128)]
    assert [s.launches for s in shapes][:4] == [1, 2, 1, 1]  # the fused schedule's five reductions
    wgp = cs.dim_map["WGP"].expr
    assert [int(wgp.evaluate({"B": b}, cs.slot_indices)) for b in (1, 256, 1024, 4096, 32768, 65536)] == [1, 16, 64, 64, 64, 128]
    assert bench.SOURCE == "kernels/aux_weight_grad_split_kernel.cu" and (REPO / bench.SOURCE).is_file()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_cpu_check_builds_both_sources(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_split as bench

    assert bench.main(["--cpu-check"]) == 0
    out = capsys.readouterr().out
    assert "built kernels/aux_weight_grad_split_kernel.cu" in out
    assert "built benchmarks/kernels_baseline/aux_weight_grad_reduce_cluster.cu" in out
