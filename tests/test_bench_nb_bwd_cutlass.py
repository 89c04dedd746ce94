"""benchmarks/gpu_nb_bwd_cutlass.py off the GPU: argument parsing and the tiles (``gpu_fwd_cutlass.Tile`` with the
candidate source's defaults and macros), the source's defaults and entry signature against the shipped entry's,
the launch geometry and the chain spec, the cases, calls, buffer shapes and launch arguments (NULL partials,
the ISV slot, saxpy_alpha) from the contract, the nvcc command lines, and the host logic end to end against
numpy stand-ins for CuPy and torch: a wrong candidate (a write past B, a wrong output, a nondeterministic
result, a broken bad-slot rule, an overwritten accumulator, a wrong per-sample partial) is reported and fails
the run, a wrong extra tile is reported without failing it."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from audit.load import load_contracts

REPO = Path(__file__).resolve().parents[1]
KERNEL, ENTRY = "aux_next_bar_backward", "aux_next_bar_backward_cutlass"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_nb_bwd_cutlass

    return gpu_nb_bwd_cutlass


@pytest.fixture(scope="module")
def cs():
    return load_contracts(REPO / "contracts", REPO)


def test_arguments_and_tiles(bench):
    a = bench.parse_args([])
    assert a.sizes == [1, 37, 256, 4096, 4103, 65536] and a.time_sizes == [256, 4096, 65536] and a.per_sample_max == 256
    # the candidate keeps CUTLASS's truncating split (its source's default; not shipped), its round-to-nearest build second
    assert [t.name for t in a.tiles] == ["32x128x16_32x32_4_rz", "32x128x16_32x32_4_rn", "64x64x16_32x32_4_rz", "64x128x16_32x32_3_rz",
                                         "128x64x16_32x32_3_rz"]
    assert [t.threads for t in a.tiles] == [128, 128, 128, 256, 256] and not a.cpu_check
    assert a.cases == ("shipped", "misaligned", "verify", "alpha", "slot")
    assert bench.parse_args(["--cases", "slot,shipped"]).cases == ("shipped", "slot")
    for bad in ("", "shipped,trunk"):
        with pytest.raises(SystemExit):
            bench.parse_args(["--cases", bad])
    a = bench.parse_args(["--tiles", "32x128x16_32x32_3,32x128x16_32x32_3", "--time-sizes", "", "--per-sample-max", "37"])
    assert a.tiles == [bench.NbBwdTile(32, 128, 16, 32, 32, 3)] and a.time_sizes == [] and a.per_sample_max == 37
    # a bare name: the source's default split, truncating here
    assert bench.NbBwdTile.parse("32x128x16_32x32_4") == bench.DEFAULT_TILE == bench.NbBwdTile.parse("32x128x16_32x32_4_rz")
    assert bench.DEFAULT_TILE.split == "rz" and bench.DEFAULT_TILE.name == "32x128x16_32x32_4_rz"
    assert bench.DEFAULT_TILE.defines() == ["-DAUX_NB_BWD_CUTLASS_TBM=32", "-DAUX_NB_BWD_CUTLASS_TBN=128", "-DAUX_NB_BWD_CUTLASS_TBK=16",
                                            "-DAUX_NB_BWD_CUTLASS_WM=32", "-DAUX_NB_BWD_CUTLASS_WN=32", "-DAUX_NB_BWD_CUTLASS_STAGES=4",
                                            "-DAUX_NB_BWD_CUTLASS_SPLIT_RN=0"]
    assert bench.NbBwdTile.parse("32x128x16_32x32_4_rn").defines()[-1] == "-DAUX_NB_BWD_CUTLASS_SPLIT_RN=1"
    assert bench.Tile().defines()[0] == "-DAUX_TRUNK_CUTLASS_TBM=128"  # the trunk tile's macros unchanged
    for bad in ("64x64x16_32x32_2", "64x64x16_48x32_4", "64x64x12_32x32_4"):
        with pytest.raises(argparse.ArgumentTypeError, match="tile"):
            bench.NbBwdTile.parse(bad)
    with pytest.raises(SystemExit):
        bench.parse_args(["--tiles", ","])


def _signature(text: str, entry: str) -> list[str]:
    """The parameter list of ``extern "C" __global__ ... entry(...)``, one normalised declaration each."""
    m = re.search(rf"\b{entry}\s*\(([^)]*)\)", text)
    assert m, entry
    return [" ".join(p.split()) for p in m[1].split(",")]


def test_candidate_source_defaults_and_entry_match_the_shipped_one(bench):
    src = (REPO / bench.CANDIDATE_SOURCE).read_text()
    defaults = {m[0]: int(m[1]) for m in re.findall(r"#define AUX_NB_BWD_CUTLASS_(\w+) (\d+)", src)}
    t = bench.DEFAULT_TILE
    assert defaults == {"TBM": t.tbm, "TBN": t.tbn, "TBK": t.tbk, "WM": t.wm, "WN": t.wn, "STAGES": t.stages, "SPLIT_RN": 0} and t.split == "rz"
    shipped = _signature((REPO / bench.SHIPPED_SOURCE).read_text(), KERNEL)
    assert f'extern "C" __global__ void __launch_bounds__(aux_nb_bwd_cutlass::kThreads)\n{ENTRY}(' in src
    assert _signature(src, ENTRY) == shipped and len(shipped) == 18
    # the header states the default geometry the benchmark and the chain spec launch
    assert "grid = (ceil_div(B, 32), 1, 1), block = (128, 1, 1)" in src


def test_geometry_and_chain_spec(bench):
    g = bench.cutlass_geometry
    assert g(65536) == ((2048, 1, 1), (128, 1, 1)) and g(1) == ((1, 1, 1), (128, 1, 1)) and g(4103) == ((129, 1, 1), (128, 1, 1))
    assert g(65536, bench.NbBwdTile(64, 64, 16, 32, 32, 4)) == ((1024, 1, 1), (128, 1, 1))
    assert g(65536, bench.NbBwdTile(128, 64, 16, 32, 32, 3)) == ((512, 1, 1), (256, 1, 1))
    assert bench.chain_spec() == (f"{KERNEL}=benchmarks/kernels_baseline/aux_next_bar_backward_cutlass.cu:{ENTRY};"
                                  "grid=ceil_div(B, 32),1,1;block=128,1,1")
    with pytest.raises(ValueError, match="with its defaults"):
        bench.chain_spec(bench.NbBwdTile(64, 64, 16, 32, 32, 4))


def test_cases_calls_shapes_and_arguments_come_from_the_contract(bench, cs):
    shapes = bench.shapes_of(cs)
    assert [(s.SH2, s.H, s.origin, s.misaligned) for s in shapes] == [
        (256, 128, "shipped", False), (256, 128, "shipped, misaligned", True), (256, 129, "[kernel.verify] dims", False),
        (256, 100, "[kernel.verify] dims", False), (253, 128, "[kernel.verify] dims", False), (253, 129, "[kernel.verify] dims", False),
        (253, 100, "[kernel.verify] dims", False), (256, 128, "saxpy_alpha", False), (256, 128, "bad ISV slot", False)]  # fmt: skip
    assert [s.slot_ok for s in shapes] == [True] * 8 + [False]
    assert [s.origin for s in bench.selected(cs, bench.parse_args(["--cases", "misaligned,slot"]))] == ["shipped, misaligned", "bad ISV slot"]
    assert bench.selected(cs, bench.parse_args([])) == shapes
    assert np.isnan(bench.poison_of(shapes[0])) and np.isfinite(bench.poison_of(shapes[-1]))
    assert bench.calls_at(256, 256) == ("fused", "per-sample") and bench.calls_at(257, 256) == ("fused",)
    assert bench.shipped_geometry(cs, shapes[0], 65536) == ((2, 512, 1), (256, 1, 1))
    # buffer shapes (outputs and the accumulator with guard rows; the partials only in the per-sample call)
    fused = bench.buffer_shapes(cs, shapes[0], 37, "fused")
    assert fused == {"h_s2": (37, 256), "h1": (37, 128), "pred": (37,), "label": (37,), "isv": (118,), "W1": (128, 256), "W2": (1, 128),
                     "db1_partial": (40, 128), "db2_partial": (40, 1), "dh_s2_aux_out": (40, 256), "dh_s2_aux_accum": (40, 256)}
    per = bench.buffer_shapes(cs, shapes[6], 5, "per-sample")
    assert per["dW1_partial"] == (8, 100, 253) and per["dW2_partial"] == (8, 1, 100) and per["dh_s2_aux_accum"] == (8, 253)
    # the argument order of the contract: NULL (a 0 pointer) where a partial is not bound, the scalars typed
    args = bench.launch_args(cs, shapes[0], 37, {n: n for n in fused})
    assert args[:5] == ("h_s2", "h1", "pred", "label", "isv") and args[6:8] == ("W1", "W2")
    assert args[8] == 0 and isinstance(args[8], np.uint64) and args[10] == 0 and isinstance(args[10], np.uint64)
    assert args[9] == "db1_partial" and args[11:14] == ("db2_partial", "dh_s2_aux_out", "dh_s2_aux_accum")
    assert isinstance(args[5], np.int32) and int(args[5]) == 117
    assert isinstance(args[14], np.float32) and float(args[14]) == 1.0
    assert [int(a) for a in args[15:]] == [37, 256, 128] and all(isinstance(a, np.int32) for a in args[15:])
    args = bench.launch_args(cs, shapes[6], 5, {n: n for n in per})
    assert args[8] == "dW1_partial" and args[10] == "dW2_partial" and [int(a) for a in args[15:]] == [5, 253, 100]
    assert float(bench.launch_args(cs, shapes[7], 5, {n: n for n in fused})[14]) == 0.5
    assert int(bench.launch_args(cs, shapes[8], 5, {n: n for n in fused})[5]) == 118
    tol = bench.tolerance(cs)
    assert (tol.rtol, tol.atol, tol.rtol_elem) == (1e-5, 1e-5, 1e-4)


def test_build_command_lines(bench, monkeypatch, tmp_path):
    seen = {}
    entries = {}
    monkeypatch.setattr(bench, "compile_jobs", lambda jobs, only=None: seen.update(jobs) or entries.update(only or {}) or ({}, {}))
    bench.build(tmp_path, (bench.DEFAULT_TILE, bench.NbBwdTile.parse("32x128x16_32x32_3_rn")), Path("/inc"))
    assert list(seen) == ["shipped", "32x128x16_32x32_4_rz", "32x128x16_32x32_3_rn"]
    # the shipped source's two entries (aux_next_bar_backward_store first in ptxas's output): the summary is the launched one's
    assert entries == {"shipped": KERNEL, "32x128x16_32x32_4_rz": ENTRY, "32x128x16_32x32_3_rn": ENTRY}
    assert seen["shipped"][-3:] == ["-o", str(tmp_path / "shipped.cubin"), "kernels/aux_next_bar_backward_kernel.cu"]
    assert "-isystem" not in seen["shipped"]
    cmd = seen["32x128x16_32x32_3_rn"]
    assert cmd[:8] == ["nvcc", "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "-lineinfo", "-I", "kernels"]
    assert cmd[cmd.index("-isystem") + 1] == "/inc" and cmd[cmd.index("-Xptxas") + 1] == "-v"
    assert [c for c in cmd if c.startswith("-D")] == ["-DAUX_NB_BWD_CUTLASS_TBM=32", "-DAUX_NB_BWD_CUTLASS_TBN=128", "-DAUX_NB_BWD_CUTLASS_TBK=16",
                                                      "-DAUX_NB_BWD_CUTLASS_WM=32", "-DAUX_NB_BWD_CUTLASS_WN=32", "-DAUX_NB_BWD_CUTLASS_STAGES=3",
                                                      "-DAUX_NB_BWD_CUTLASS_SPLIT_RN=1"]
    assert cmd[-3:] == ["-o", str(tmp_path / "nb_bwd_cutlass_32x128x16_32x32_3_rn.cubin"), "benchmarks/kernels_baseline/aux_next_bar_backward_cutlass.cu"]


def test_missing_headers_exit_2_with_one_line(bench, monkeypatch, capsys):
    monkeypatch.setenv("CUTLASS_INCLUDE", "/nonexistent/cutlass-include")
    assert bench.main(["--cpu-check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpu_nb_bwd_cutlass: CUTLASS_INCLUDE=/nonexistent/cutlass-include holds no")


@pytest.mark.nvcc
@pytest.mark.cutlass
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_cpu_check_builds_the_shipped_kernel_and_the_candidate(bench, capsys):
    try:
        bench.cutlass_include()
    except bench.HeadersMissing as exc:
        pytest.skip(str(exc))
    assert bench.main(["--cpu-check", "--tiles", "32x128x16_32x32_4,32x128x16_32x32_4_rn"]) == 0
    out = capsys.readouterr().out
    # the shipped source has two entries, ptxas lists aux_next_bar_backward_store first: the line is the launched entry's alone
    shipped = next(ln for ln in out.splitlines() if "built shipped:" in ln)
    assert re.search(rf"built shipped: {KERNEL}: \d+ registers, 0 bytes spill stores, 0 bytes spill loads, \d+ bytes smem$", shipped), shipped
    for tile in ("32x128x16_32x32_4_rz", "32x128x16_32x32_4_rn"):
        line = next(ln for ln in out.splitlines() if f"built {tile}:" in ln)
        m = re.search(rf"{ENTRY}: (\d+) registers, 0 bytes spill stores, 0 bytes spill loads, (\d+) bytes smem", line)
        assert m and int(m[1]) <= 255 and int(m[2]) <= 48 * 1024, line
    assert "9 shapes x 9 (B, call) pairs" in out and f"--candidate '{KERNEL}=" in out


# -- the host logic end to end, with numpy stand-ins for CuPy and torch ---------------------------------


def _nb_kernel(fault: str | None = None):
    """The next-bar backward on the host (float64, rounded to float32 per output), with the bad-slot rule;
    ``fault``: "past" writes row B of db1_partial (a guard row), "error" adds 1e-2 max|dh| to dh_s2_aux_out[0, 0] at
    B = 300, "noise" makes every run differ in the last bit of dh_s2_aux_out[0, 0] at B = 300, "nonan" ignores a
    bad slot (scale 1), "overwrite" stores alpha dh into the accumulator instead of adding it, "dw1" writes
    dW1_partial twice too large."""
    calls = {"n": 0}

    def launch(grid, block, args, stream=None):
        h_s2, h1, pred, label, isv, slot, W1, W2, dW1, db1, dW2, db2, out, accum, alpha, B, SH2, H = args
        B, slot, alpha = int(B), int(slot), float(alpha)
        calls["n"] += 1
        if 0 <= slot < 118:
            s = max(float(isv[slot]), float(np.float32(1e-6)))
        else:
            s = 1.0 if fault == "nonan" else float("nan")
        h = h1[:B].astype(np.float64)
        dp = 2.0 * (pred[:B].astype(np.float64) - label[:B].astype(np.float64) / s) / B
        dz1 = dp[:, None] * W2[0].astype(np.float64)[None, :] * np.where(h > 0, 1.0, 1.0 + h)
        dh = dz1 @ W1.astype(np.float64)
        db1[:B], db2[:B, 0], out[:B] = dz1, dp, dh
        accum[:B] = alpha * dh if fault == "overwrite" else accum[:B].astype(np.float64) + alpha * dh
        if isinstance(dW1, np.ndarray):
            dW1[:B] = dz1[:, :, None] * h_s2[:B].astype(np.float64)[:, None, :] * (2.0 if fault == "dw1" else 1.0)
        if isinstance(dW2, np.ndarray):
            dW2[:B, 0] = dp[:, None] * h
        if fault == "past":
            db1[B] = 0.0
        elif fault == "error" and B == 300:
            out[0, 0] += 1e-2 * float(np.abs(dh).max())
        elif fault == "noise" and B == 300:
            out[0, 0] = np.nextafter(out[0, 0], np.float32(np.inf) if calls["n"] % 2 else np.float32(-np.inf))

    return launch


class _T(np.ndarray):
    """A torch tensor stand-in: a numpy array with the few tensor methods the benchmark's torch code calls."""

    def cpu(self):
        return self

    def numpy(self):
        return np.asarray(self)

    def clamp(self, max=None):  # noqa: A002 - torch's keyword
        return np.minimum(self, np.float32(max))


def _fakes(monkeypatch, kernels):
    from test_wgrad_tc_bench import _fake_cupy, _fake_torch

    cp = _fake_cupy(kernels)
    cp.asarray = np.asarray
    torch = _fake_torch()
    torch.as_tensor = lambda a, device=None: np.asarray(a).view(_T)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "torch", torch)


def _run(bench, monkeypatch, tmp_path, kernels, tiles, extra=()):
    _fakes(monkeypatch, kernels)
    monkeypatch.setattr(bench, "build", lambda out, tiles, include: ({"shipped": Path("s"), **{t.name: Path(t.name) for t in tiles}}, {}))
    monkeypatch.setattr(bench, "cutlass_include", lambda: Path("/fake/include"))
    out = tmp_path / "r.json"
    code = bench.main(["--sizes", "1,37,300", "--time-sizes", "300", "--tiles", ",".join(tiles), "--replays", "3", "--warmup", "1",
                       "--json", str(out), *extra])
    return code, json.loads(out.read_text())


def _kernels(tiles: dict[str, str | None]):
    """A right shipped kernel, and per tile name the candidate's fault (None: right)."""
    k = {("s", KERNEL): _nb_kernel()}
    for name, fault in tiles.items():
        k[(name, ENTRY)] = _nb_kernel(fault)
    return k


T1, T2 = "32x128x16_32x32_4_rz", "64x64x16_32x32_4_rz"
ROWS = 9 * 5  # 9 shapes x (B = 1 and 37: fused and per-sample; B = 300: fused)


def test_host_logic_passes_a_right_candidate(bench, monkeypatch, tmp_path, capsys):
    code, data = _run(bench, monkeypatch, tmp_path, _kernels({T1: None, T2: None}), [T1, T2])
    assert code == 0 and data["candidate_ok"] is True and data["candidate"] == T1 and data["tiles"] == [T1, T2]
    rows = data["rows"]
    assert len(rows) == ROWS and all("error" not in r for r in rows)
    assert sorted({(r["B"], r["call"]) for r in rows}) == [(1, "fused"), (1, "per-sample"), (37, "fused"), (37, "per-sample"), (300, "fused")]
    for r in rows:
        for tag in ("shipped", T1, T2):
            assert bench.verdict(r[tag]) == "ok", (tag, r)
        want = ["dW1_partial", "dW2_partial"] if r["call"] == "per-sample" else []
        if r["origin"] == "bad ISV slot":
            assert r["torch_fp32"] is None and r[T1]["nan_rule"] is True and r[T1]["outputs"] == {} and r["label_scale_slot"] == 118
        else:
            assert r["torch_fp32"]["ok"] and r[T1]["nan_rule"] is None
            assert sorted(r[T1]["outputs"]) == sorted(["db1_partial", "db2_partial", "dh_s2_aux_out", "dh_s2_aux_accum", *want])
    assert {r["saxpy_alpha"] for r in rows if r["origin"] == "saxpy_alpha"} == {0.5}
    timed = [r for r in rows if "time" in r[T1]]
    assert [(r["B"], r["call"], r["origin"]) for r in timed] == [(300, "fused", "shipped")]
    assert timed[0]["grid"] == {"shipped": [2, 3, 1], T1: [10, 1, 1], T2: [5, 1, 1]}
    assert all(timed[0][tag]["time"]["median_us"] == pytest.approx(10.0 / timed[0][tag]["rep"]) for tag in ("shipped", T1, T2, "torch_fp32"))
    assert all(timed[0][tag]["gbps"] > 0 for tag in ("shipped", T1, "torch_fp32"))
    # tests/gpu/issue18_candidates.sh copies the time line and the verdict into its summary with this pattern
    script = (REPO / "tests" / "gpu" / "issue18_candidates.sh").read_text()
    pattern = re.search(r'grep -E "([^"]+)" "\$OUT/E_nb_bwd.log"', script)[1]
    kept = [ln for ln in capsys.readouterr().out.splitlines() if re.search(pattern, ln)]
    assert [ln.split(":")[0].split()[0] for ln in kept] == ["B=", "candidate"], kept


@pytest.mark.parametrize(
    ("fault", "status", "where"),
    [
        ("past", "FAIL wrote past B", lambda r: True),
        ("error", "FAIL dh_s2_aux_out mismatch", lambda r: r["B"] == 300 and r["origin"] != "bad ISV slot"),
        ("noise", "FAIL nondeterministic", lambda r: r["B"] == 300 and r["origin"] != "bad ISV slot"),  # NaN stays NaN
        ("nonan", "FAIL bad-slot rule (outputs not NaN)", lambda r: r["origin"] == "bad ISV slot"),
        ("overwrite", "FAIL dh_s2_aux_accum mismatch", lambda r: r["origin"] != "bad ISV slot"),
        ("dw1", "FAIL dW1_partial mismatch", lambda r: r["call"] == "per-sample" and r["origin"] != "bad ISV slot"),
    ],
)
def test_host_logic_fails_a_wrong_candidate(bench, monkeypatch, tmp_path, fault, status, where):
    code, data = _run(bench, monkeypatch, tmp_path, _kernels({T1: fault}), [T1])
    assert code == 1 and data["candidate_ok"] is False
    bad = [r for r in data["rows"] if bench.verdict(r[T1]) != "ok"]
    expect = [r for r in data["rows"] if where(r)]
    assert bad == expect and expect and {bench.verdict(r[T1]) for r in bad} == {status}
    assert all(bench.verdict(r["shipped"]) == "ok" for r in data["rows"])


def test_host_logic_reports_a_wrong_extra_tile_without_failing(bench, monkeypatch, tmp_path, capsys):
    code, data = _run(bench, monkeypatch, tmp_path, _kernels({T1: None, T2: "error"}), [T1, T2])
    assert code == 0 and data["candidate_ok"] is True
    assert {bench.verdict(r[T2]) for r in data["rows"] if r["B"] == 300 and r["origin"] != "bad ISV slot"} == {"FAIL dh_s2_aux_out mismatch"}
    assert "(FAIL dh_s2_aux_out mismatch); shipped ok" in capsys.readouterr().out


def test_not_worse_than_torch_is_reported(bench, monkeypatch, tmp_path):
    """A candidate within tolerance but less accurate than torch float32 passes and is listed as worse."""
    right = _nb_kernel()

    def coarse(grid, block, args, stream=None):  # dh scaled by 1 + 2^-19: within 1e-5 relative, worse than float32
        right(grid, block, args, stream)
        out, B = args[12], int(args[15])
        out[:B] = (out[:B].astype(np.float64) * (1 + 2.0**-19)).astype(np.float32)

    kernels = _kernels({})
    kernels[(T1, ENTRY)] = coarse
    code, data = _run(bench, monkeypatch, tmp_path, kernels, [T1])
    assert code == 0 and data["candidate_ok"] is True
    compared = [r for r in data["rows"] if r["torch_fp32"] is not None]
    assert len(compared) == ROWS - 5 and len(data["candidate_worse_than_torch"]) == len(compared)
    # float64-then-rounded beats torch's float32 in dh (the shipped stand-in)
    assert all(r["shipped"]["not_worse_than_torch"] for r in compared if r["B"] == 300)


def test_cases_select_shapes_with_the_same_inputs(bench, monkeypatch, tmp_path):
    """``--cases shipped`` (the device script's step E) runs the shipped shape alone, on the inputs a full run gives it."""
    code, data = _run(bench, monkeypatch, tmp_path, _kernels({T1: None}), [T1], ["--cases", "shipped"])
    assert code == 0 and [(r["origin"], r["B"], r["call"]) for r in data["rows"]] == [
        ("shipped", 1, "fused"), ("shipped", 1, "per-sample"), ("shipped", 37, "fused"), ("shipped", 37, "per-sample"), ("shipped", 300, "fused")]
    _, full = _run(bench, monkeypatch, tmp_path, _kernels({T1: None}), [T1])
    assert [r["torch_fp32"]["rel_norm"] for r in data["rows"]] == [r["torch_fp32"]["rel_norm"] for r in full["rows"] if r["origin"] == "shipped"]
