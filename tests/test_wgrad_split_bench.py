"""benchmarks/gpu_wgrad_split.py off the GPU: it measures the shipped split reduction at the chunk count
the contract gives (WGP) besides any swept P, on the (M, N) the fused schedule launches and the verify
bindings, and both sources it times build with nvcc."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
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


def _split_kernels(wrong_bias: bool):
    """The two launches on the host, chunk by chunk as the contract says; ``wrong_bias`` drops the last row
    of every chunk from the bias sums."""
    import numpy as np

    def partial(grid, block, args, stream=None):
        dz, x, ws, wsb, B, M, N, P = args
        B, M, N, P = int(B), int(M), int(N), int(P)
        for p in range(P):
            lo, hi = B * p // P, B * (p + 1) // P
            ws[p] = (dz[lo:hi].astype(np.float64).T @ x[lo:hi].astype(np.float64)).astype(np.float32)
            wsb[p] = dz[lo : hi - (1 if wrong_bias and hi > lo else 0)].astype(np.float64).sum(axis=0).astype(np.float32)

    def finish(grid, block, args, stream=None):
        ws, wsb, dW, db, M, N, P = args
        P = int(P)
        dW[...] = ws[:P].astype(np.float64).sum(axis=0).astype(np.float32)
        db[...] = wsb[:P].astype(np.float64).sum(axis=0).astype(np.float32)

    return partial, finish


def test_host_logic_times_every_chunk_count_and_reports_a_wrong_bias(monkeypatch, tmp_path):
    """The GPU path end to end with numpy stand-ins for CuPy and torch (the fakes of test_wgrad_tc_bench)."""
    import json
    import sys

    from test_wgrad_tc_bench import _fake_cupy, _fake_torch, _kernel

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_split as bench

    for wrong, code_want in ((False, 0), (True, 1)):
        partial, finish = _split_kernels(wrong)
        kernels = {("s", "aux_weight_grad_partial"): partial, ("s", "aux_weight_grad_finish"): finish, ("o", bench.KERNEL): _kernel(False)}
        monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(kernels))
        monkeypatch.setitem(sys.modules, "torch", _fake_torch())
        monkeypatch.setattr(bench, "build", lambda out, tc_source=None: {"split": Path("s"), "old": Path("o")})
        out = tmp_path / f"r{int(wrong)}.json"
        code = bench.main(["--sizes", "37,256", "--time-sizes", "256", "--splits", "4", "--replays", "3", "--warmup", "1", "--json", str(out)])
        data = json.loads(out.read_text())
        assert code == code_want
        checked = [r for r in data["rows"] if "P" in r]
        # 8 shapes x (B = 37: P = WGP(37) = 3 and 4; B = 256: 4 and WGP(256) = 16)
        assert len(checked) == 32 and {r["P"] for r in checked if r["B"] == 256} == {4, 16}
        assert [r["contract_P"] for r in checked if r["B"] == 37 and r["M"] == 256] == [True, False]
        assert all(r["deterministic"] for r in checked)
        assert data["failures"] == (32 if wrong else 0) and all(r["ok"] is (not wrong) for r in checked)
        timed = [r for r in data["rows"] if "old_us" in r]
        assert len(timed) == 8 and all(r["old_us"] > 0 and r["torch_us"] > 0 for r in timed)
        assert all("time" in r for r in checked if r["B"] == 256) and not any("time" in r for r in checked if r["B"] == 37)


def test_the_tensor_core_experiment_is_checked_and_timed_beside_the_shipped_kernel(monkeypatch, tmp_path):
    """``--tc-source``: an experimental partial (same launch) runs with the shipped finish for every M > 8
    shape at the contract's P, checked like the shipped kernel; a wrong one counts as a failure."""
    import json
    import sys

    from test_wgrad_tc_bench import _fake_cupy, _fake_torch, _kernel

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_split as bench

    for wrong in (False, True):
        partial, finish = _split_kernels(False)
        tc_partial, _ = _split_kernels(wrong)
        kernels = {("s", "aux_weight_grad_partial"): partial, ("s", "aux_weight_grad_finish"): finish, ("o", bench.KERNEL): _kernel(False),
                   ("t", "aux_weight_grad_partial_tc"): tc_partial}
        monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(kernels))
        monkeypatch.setitem(sys.modules, "torch", _fake_torch())
        monkeypatch.setattr(bench, "build", lambda out, tc_source=None: {"split": Path("s"), "old": Path("o"), **({"tc": Path("t")} if tc_source else {})})
        out = tmp_path / f"tc{int(wrong)}.json"
        code = bench.main(["--sizes", "37,256", "--time-sizes", "256", "--replays", "3", "--warmup", "1", "--json", str(out), "--tc-source", "t.cu"])
        data = json.loads(out.read_text())
        tc_rows = [r for r in data["rows"] if r.get("variant") == "tc"]
        assert sorted({(r["M"], r["N"]) for r in tc_rows}) == [(9, 100), (128, 256), (130, 129), (256, 256)]
        assert all(r["contract_P"] for r in tc_rows) and len(tc_rows) == 8
        assert all(("time" in r) == (r["B"] == 256) for r in tc_rows)
        assert data["failures"] == (8 if wrong else 0) and code == (1 if wrong else 0)
