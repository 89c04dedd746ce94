"""benchmarks/gpu_wgrad_split.py off the GPU: it measures the shipped split reduction at the chunk count
the contract gives (WGP) besides any swept P, on the (M, N) the fused schedule launches and the verify
bindings, and both sources it times build with nvcc; the tensor-core candidates (``--tc-source``,
``--cutlass-source``) are checked and timed beside it, the CUTLASS one built with the CUTLASS headers
found through ``$CUTLASS_INCLUDE`` or the nvidia-cutlass wheel."""

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
        monkeypatch.setattr(bench, "build", lambda out, tc_source=None, cutlass_source=None: {"split": Path("s"), "old": Path("o")})
        out = tmp_path / f"r{int(wrong)}.json"
        code = bench.main(["--sizes", "37,256", "--time-sizes", "256", "--splits", "4", "--replays", "3", "--warmup", "1", "--json", str(out)])
        data = json.loads(out.read_text())
        assert code == code_want
        checked = [r for r in data["rows"] if "P" in r]
        # 9 shapes x (B = 37: P = WGP(37) = 3 and 4; B = 256: 4 and WGP(256) = 16)
        assert len(checked) == 36 and {r["P"] for r in checked if r["B"] == 256} == {4, 16}
        assert [r["contract_P"] for r in checked if r["B"] == 37 and r["M"] == 256] == [True, False]
        assert all(r["deterministic"] for r in checked)
        assert data["failures"] == (36 if wrong else 0) and all(r["ok"] is (not wrong) for r in checked)
        timed = [r for r in data["rows"] if "old_us" in r]
        assert len(timed) == 9 and all(r["old_us"] > 0 and r["torch_us"] > 0 for r in timed)
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
        monkeypatch.setattr(bench, "build", lambda out, tc_source=None, cutlass_source=None: {"split": Path("s"), "old": Path("o"), **({"tc": Path("t")} if tc_source else {})})
        out = tmp_path / f"tc{int(wrong)}.json"
        code = bench.main(["--sizes", "37,256", "--time-sizes", "256", "--replays", "3", "--warmup", "1", "--json", str(out), "--tc-source", "t.cu"])
        data = json.loads(out.read_text())
        tc_rows = [r for r in data["rows"] if r.get("variant") == "tc"]
        assert sorted({(r["M"], r["N"]) for r in tc_rows}) == [(9, 100), (128, 256), (130, 129), (132, 260), (256, 256)]
        assert all(r["contract_P"] for r in tc_rows) and len(tc_rows) == 10
        assert all(("time" in r) == (r["B"] == 256) for r in tc_rows)
        assert data["failures"] == (10 if wrong else 0) and code == (1 if wrong else 0)


# -- the CUTLASS candidate (--cutlass-source) ------------------------------------------------------------


def _bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_split as bench

    return bench


def _headers(root: Path) -> Path:
    (root / "cutlass").mkdir(parents=True)
    (root / "cutlass" / "cutlass.h").write_text("#pragma once\n")
    return root


def test_cutlass_headers_come_from_the_environment_first(monkeypatch, tmp_path):
    bench = _bench(monkeypatch)
    inc = _headers(tmp_path / "inc")
    monkeypatch.setenv("CUTLASS_INCLUDE", str(inc))
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: pytest.fail(f"looked up {name} although CUTLASS_INCLUDE is set"))
    assert bench.cutlass_include() == inc
    monkeypatch.setenv("CUTLASS_INCLUDE", str(tmp_path / "empty"))
    with pytest.raises(bench.SetupError) as e:
        bench.cutlass_include()
    assert str(e.value) == (f"CUTLASS_INCLUDE={tmp_path / 'empty'}: expected cutlass/cutlass.h under {tmp_path / 'empty'}, found none "
                            "(`pip install --no-deps nvidia-cutlass==4.2.0.0` installs them)")


def test_cutlass_headers_come_from_the_wheel_without_the_environment(monkeypatch, tmp_path):
    import importlib.util
    import types

    bench = _bench(monkeypatch)
    monkeypatch.delenv("CUTLASS_INCLUDE", raising=False)
    real = importlib.util.find_spec
    pkg = tmp_path / "site" / "cutlass_library"
    inc = _headers(pkg / "source" / "include")
    asked = []

    def find_spec(name, *a):
        asked.append(name)
        return types.SimpleNamespace(submodule_search_locations=[str(pkg)]) if name == "cutlass_library" else real(name, *a)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert bench.cutlass_include() == inc and asked == ["cutlass_library"]
    # the package without its headers
    (inc / "cutlass" / "cutlass.h").unlink()
    with pytest.raises(bench.SetupError, match=r"^the cutlass_library package \(.*\): expected cutlass/cutlass.h under "):
        bench.cutlass_include()
    # no package at all: one line naming the pip command
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cutlass_library" else real(name, *a))
    with pytest.raises(bench.SetupError) as e:
        bench.cutlass_include()
    assert str(e.value) == ("the CUTLASS headers are not installed: run `pip install --no-deps nvidia-cutlass==4.2.0.0` "
                            "or set CUTLASS_INCLUDE to the folder holding cutlass/cutlass.h")


def test_only_the_cutlass_build_gets_the_cutlass_include_folder(monkeypatch, tmp_path):
    bench = _bench(monkeypatch)
    inc = _headers(tmp_path / "inc")
    monkeypatch.setenv("CUTLASS_INCLUDE", str(inc))
    cubin = tmp_path / "c.cubin"
    src = "kernels/aux_weight_grad_partial_cutlass.cu"
    assert bench.nvcc_command(src, cubin, "cutlass") == [
        "nvcc", "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "-lineinfo", "-I", "kernels",
        "-I", "benchmarks/kernels_baseline", "-isystem", str(inc), "-Xptxas", "-v", "-o", str(cubin), src]
    for tag in ("split", "old", "tc"):
        cmd = bench.nvcc_command("k.cu", cubin, tag)
        assert "-isystem" not in cmd and str(inc) not in cmd and cmd[-3:] == ["-o", str(cubin), "k.cu"]
    # build() hands every source its own command, in order, and names the cubins by tag
    ran = []

    def fake_run(cmd, cwd=None, **kw):
        import types

        ran.append(cmd)
        return types.SimpleNamespace(returncode=0, stdout="ptxas info    : Used 1 registers\n", stderr="")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    cubins = bench.build(tmp_path / "b", tc_source="t.cu", cutlass_source="c.cu")
    assert list(cubins) == ["split", "old", "tc", "cutlass"] and cubins["cutlass"] == tmp_path / "b" / "cutlass.cubin"
    assert [c[-1] for c in ran] == [bench.SOURCE, bench.OLD_SOURCE, "t.cu", "c.cu"]
    assert ["-isystem" in c for c in ran] == [False, False, False, True]


def test_missing_cutlass_headers_stop_the_run_in_one_line_before_any_build(monkeypatch, capsys, tmp_path):
    bench = _bench(monkeypatch)
    monkeypatch.setenv("CUTLASS_INCLUDE", str(tmp_path / "nothing"))
    monkeypatch.setattr(bench, "build", lambda *a, **k: pytest.fail("built although the CUTLASS headers are missing"))
    assert bench.main(["--cpu-check", "--cutlass-source", "kernels/aux_weight_grad_partial_cutlass.cu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"gpu_wgrad_split.py: CUTLASS_INCLUDE={tmp_path / 'nothing'}: expected cutlass/cutlass.h")


def test_the_cutlass_candidate_is_checked_and_timed_beside_the_shipped_and_the_tc_kernel(monkeypatch, tmp_path, capsys):
    """``--cutlass-source`` next to ``--tc-source``: both candidates run with the shipped finish for every M > 8
    shape at the contract's P, each with its rows (tag "cutlass") and the CUTLASS one with its own log line;
    a wrong CUTLASS partial fails alone."""
    import json
    import sys

    from test_wgrad_tc_bench import _fake_cupy, _fake_torch, _kernel

    bench = _bench(monkeypatch)
    monkeypatch.setenv("CUTLASS_INCLUDE", str(_headers(tmp_path / "inc")))
    for wrong in (False, True):
        partial, finish = _split_kernels(False)
        bad_partial, _ = _split_kernels(wrong)
        kernels = {("s", "aux_weight_grad_partial"): partial, ("s", "aux_weight_grad_finish"): finish, ("o", bench.KERNEL): _kernel(False),
                   ("t", "aux_weight_grad_partial_tc"): partial, ("c", "aux_weight_grad_partial_cutlass"): bad_partial}
        monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(kernels))
        monkeypatch.setitem(sys.modules, "torch", _fake_torch())
        built = {}

        def build(out, tc_source=None, cutlass_source=None):
            built.update(tc=tc_source, cutlass=cutlass_source)
            return {"split": Path("s"), "old": Path("o"), "tc": Path("t"), "cutlass": Path("c")}

        monkeypatch.setattr(bench, "build", build)
        out = tmp_path / f"cl{int(wrong)}.json"
        code = bench.main(["--sizes", "37,256", "--time-sizes", "256", "--replays", "3", "--warmup", "1", "--json", str(out),
                           "--tc-source", "t.cu", "--cutlass-source", "c.cu"])
        assert built == {"tc": "t.cu", "cutlass": "c.cu"}
        data = json.loads(out.read_text())
        for tag in ("tc", "cutlass"):
            tagged = [r for r in data["rows"] if r.get("variant") == tag]
            assert sorted({(r["M"], r["N"]) for r in tagged}) == [(9, 100), (128, 256), (130, 129), (132, 260), (256, 256)]
            assert len(tagged) == 10 and all(r["contract_P"] for r in tagged)
            assert all(("time" in r) == (r["B"] == 256) for r in tagged)
            assert all(r["ok"] is (tag == "tc" or not wrong) for r in tagged)
        assert data["failures"] == (10 if wrong else 0) and code == (1 if wrong else 0)
        lines = [ln for ln in capsys.readouterr().out.splitlines() if "cutlass (3xTF32)" in ln]
        assert len(lines) == 5 and all(" B=256: cutlass (3xTF32) P16=" in ln and "split P16=" in ln and "; tc P16=" in ln for ln in lines)
        assert all(ln.split("us rel ")[1].split(";")[0].endswith(" FAIL") is wrong for ln in lines)


@pytest.mark.cutlass
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_cpu_check_builds_the_cutlass_candidate(monkeypatch, capsys):
    bench = _bench(monkeypatch)
    try:
        inc = bench.cutlass_include()
    except bench.SetupError as e:
        pytest.skip(f"no CUTLASS headers: {e}")
    src = "kernels/aux_weight_grad_partial_cutlass.cu"
    assert bench.main(["--cpu-check", "--cutlass-source", src]) == 0
    out = capsys.readouterr().out
    assert f"CUTLASS headers: {inc}" in out
    built = next(ln for ln in out.splitlines() if f"built {src}:" in ln)
    assert "0 bytes spill stores, 0 bytes spill loads" in built and "49152 bytes smem" in built
