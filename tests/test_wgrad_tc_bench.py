"""benchmarks/gpu_wgrad_tc.py off the GPU: the cases it measures come from the contracts (every (M, N) a
schedule launches aux_weight_grad_reduce with, then the verify bindings) and the new kernel's launch
geometry from the contract's expressions."""

from __future__ import annotations

from pathlib import Path

from audit.load import load_contracts

REPO = Path(__file__).resolve().parents[1]


def test_cases_and_geometry_come_from_the_contracts(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_tc as bench

    cs = load_contracts(REPO / "contracts", REPO)
    shapes = bench.shapes_of(cs)
    assert [(s.M, s.N) for s in shapes] == [(256, 256), (128, 256), (3, 128), (1, 128), (8, 129), (9, 100), (70, 33)]
    assert [s.origin for s in shapes][:4] == [f"schedule aux_heads_backward_fused step {i}" for i in (10, 12, 14, 18)]
    assert {s.origin for s in shapes[4:]} == {"[kernel.verify] bindings"}
    # the shipped contract keeps the SIMT kernel's geometry: the tensor-core path changed no launch
    for s in shapes:
        for B in (1, 4103, 65536):
            assert bench.new_geometry(cs, B, s.M, s.N) == bench.old_geometry(B, s.M, s.N)
    assert bench.new_geometry(cs, 65536, 70, 33) == ((2, 2, 8), (256, 1, 1))
    tol = bench.tolerance(cs)
    assert (tol.rtol, tol.atol, tol.rtol_elem) == (1e-5, 1e-5, 1e-4)
