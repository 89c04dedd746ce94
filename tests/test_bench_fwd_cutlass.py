"""benchmarks/gpu_fwd_cutlass.py off the GPU: argument parsing, where the CUTLASS headers come from (the
``nvidia-cutlass`` wheel, ``$CUTLASS_INCLUDE``, or a one-line error naming the pip command), the nvcc
command lines, the candidate's launch geometry (CUTLASS's identity swizzle) against the kernel's own
defaults, the cases from the contracts, and the host logic end to end against numpy stand-ins for CuPy and
torch: a wrong candidate (a write past B, an error, a nondeterministic result) is reported and fails the
run, a wrong extra tile is reported without failing it."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from audit.load import load_contracts

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_fwd_cutlass

    return gpu_fwd_cutlass


def test_arguments_and_tiles(bench):
    a = bench.parse_args([])
    assert a.sizes == [1, 37, 256, 4096, 4103, 65536] and a.time_sizes == [256, 4096, 65536]
    # the shipped build (round-to-nearest split) first, CUTLASS's truncating split of it second; names state the split
    assert [t.name for t in a.tiles] == ["128x64x16_64x32_3_rn", "128x64x16_64x32_3_rz", "64x64x16_32x32_4_rn", "32x64x16_32x32_4_rn",
                                         "128x64x16_32x32_3_rn"]
    assert not a.cpu_check and a.tiles[0].split == "rn" and a.tiles[1].split == "rz"
    a = bench.parse_args(["--sizes", "37,4103", "--time-sizes", "", "--tiles", "64x64x16_32x32_4,64x64x16_32x32_4", "--replays", "5"])
    assert a.sizes == [37, 4103] and a.time_sizes == [] and a.replays == 5
    assert a.tiles == [bench.Tile(64, 64, 16, 32, 32, 4)]  # named twice, built once
    assert bench.Tile.parse("128x64x16_64x32_3") == bench.DEFAULT_TILE == bench.Tile.parse("128x64x16_64x32_3_rn")  # bare: the source's default
    rz = bench.Tile.parse("128x64x16_64x32_3_rz")
    assert rz != bench.DEFAULT_TILE and rz.split == "rz" and rz.name == "128x64x16_64x32_3_rz" and bench.Tile.parse(rz.name) == rz
    assert bench.DEFAULT_TILE.threads == 128 and bench.DEFAULT_TILE.name == "128x64x16_64x32_3_rn"
    assert bench.Tile(128, 64, 16, 32, 32, 3).threads == 256 and bench.Tile(32, 64, 16, 32, 32, 4).threads == 64
    for bad in ("128x64_64x32_3", "128x64x16_64x32", "128x64x16_48x32_3", "128x64x16_64x32_2", "axbxc_1x2_3", "128x64x16_64x32_3_rx"):
        with pytest.raises(argparse.ArgumentTypeError, match="tile"):
            bench.Tile.parse(bad)
    with pytest.raises(SystemExit):
        bench.parse_args(["--tiles", "128x64x16_64x32_2"])  # 2 stages: MmaPipelined, no staged accumulation


def test_tile_defaults_match_the_kernel_source(bench):
    src = (REPO / bench.CANDIDATE_SOURCE).read_text()
    defaults = {m[0]: int(m[1]) for m in re.findall(r"#define AUX_TRUNK_CUTLASS_(\w+) (\d+)", src)}
    t = bench.DEFAULT_TILE
    assert defaults == {"TBM": t.tbm, "TBN": t.tbn, "TBK": t.tbk, "WM": t.wm, "WN": t.wn, "STAGES": t.stages, "SPLIT_RN": 1} and t.split == "rn"
    assert 'extern "C" __global__' in src and f"{bench.CANDIDATE}(const float* __restrict__ x, const float* __restrict__ W, const float* __restrict__ b," in src


def test_geometry_is_one_block_per_tile_row_major(bench):
    g = bench.cutlass_geometry
    # SH2 = 256: 4 column tiles of 64; the 4 column tiles of a row tile are consecutive blocks
    assert g(65536, 256) == ((2048, 1, 1), (128, 1, 1))
    assert g(1, 256) == ((4, 1, 1), (128, 1, 1))
    assert g(4103, 253) == ((33 * 4, 1, 1), (128, 1, 1))
    assert g(37, 64) == ((1, 1, 1), (128, 1, 1))
    assert g(37, 65) == ((2, 1, 1), (128, 1, 1))
    assert g(300, 64 * 7) == ((3 * 7, 1, 1), (128, 1, 1))  # no idle block whatever tiles_n is
    assert g(65536, 256, bench.Tile(64, 64, 16, 32, 32, 4)) == ((4096, 1, 1), (128, 1, 1))
    assert g(256, 256, bench.Tile(32, 64, 16, 32, 32, 4)) == ((32, 1, 1), (64, 1, 1))
    # every (row tile, column tile) is covered exactly once by (blockIdx.x // tiles_n, blockIdx.x % tiles_n)
    for B, SH2 in ((37, 64), (300, 64 * 7), (4103, 253), (129, 64 * 9)):
        (gx, gy, _), _ = g(B, SH2)
        tiles_n = -(-SH2 // 64)
        tiles = sorted((bx // tiles_n, bx % tiles_n) for bx in range(gx) for _ in range(gy))
        assert tiles == [(m, n) for m in range(-(-B // 128)) for n in range(tiles_n)]


def test_kernel_swizzle_is_the_geometry_the_bench_launches(bench):
    """The kernel's swizzle is RowTileColumnsSwizzle (x // tiles_n, x % tiles_n), not CUTLASS's identity swizzle."""
    src = (REPO / bench.CANDIDATE_SOURCE).read_text()
    assert "using Swizzle = RowTileColumnsSwizzle;" in src
    assert "return {int(blockIdx.x) / tiles_n, int(blockIdx.x) % tiles_n, 0};" in src
    assert "get_log_tile(cutlass::gemm::GemmCoord tiled) { return tiled.n(); }" in src


def test_cases_tolerance_and_shipped_geometry_come_from_the_contracts(bench):
    cs = load_contracts(REPO / "contracts", REPO)
    shapes = bench.shapes_of(cs)
    assert [(s.E, s.SH2, s.origin, s.misaligned) for s in shapes] == [
        (256, 256, "shipped", False), (256, 256, "shipped, misaligned", True),
        *((E, S, "[kernel.verify] dims", False) for E, S in ((256, 253), (256, 260), (253, 256), (253, 253), (253, 260), (260, 256), (260, 253), (260, 260)))]
    assert bench.shipped_geometry(cs, 65536, 256, 256) == ((4, 512, 1), (256, 1, 1))
    assert bench.shipped_geometry(cs, 37, 253, 253) == ((4, 1, 1), (256, 1, 1))
    tol = bench.tolerance(cs)
    assert (tol.rtol, tol.atol, tol.rtol_elem) == (1e-5, 1e-5, 1e-4)


def test_include_from_the_environment_the_wheel_or_a_one_line_error(bench, tmp_path, monkeypatch):
    inc = tmp_path / "inc"
    (inc / "cutlass").mkdir(parents=True)
    (inc / "cutlass" / "cutlass.h").write_text("// stand-in\n")
    assert bench.cutlass_include({"CUTLASS_INCLUDE": str(inc)}) == inc
    with pytest.raises(bench.HeadersMissing, match=r"CUTLASS_INCLUDE=.*nowhere holds no cutlass/cutlass.h"):
        bench.cutlass_include({"CUTLASS_INCLUDE": str(tmp_path / "nowhere")})
    # the wheel: <site-packages>/cutlass_library/source/include
    pkg = tmp_path / "site" / "cutlass_library"
    (pkg / "source" / "include" / "cutlass").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    spec = types.SimpleNamespace(origin=str(pkg / "__init__.py"))
    monkeypatch.setattr(bench.importlib.util, "find_spec", lambda name: spec if name == "cutlass_library" else None)
    with pytest.raises(bench.HeadersMissing, match="pip install --no-deps nvidia-cutlass==4.2.0.0"):
        bench.cutlass_include({})  # the package without its headers
    (pkg / "source" / "include" / "cutlass" / "cutlass.h").write_text("")
    assert bench.cutlass_include({}) == pkg / "source" / "include"
    assert bench.cutlass_include({"CUTLASS_INCLUDE": str(inc)}) == inc  # the variable wins over the package
    monkeypatch.setattr(bench.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(bench.HeadersMissing) as e:
        bench.cutlass_include({})
    assert "\n" not in str(e.value) and "`pip install --no-deps nvidia-cutlass==4.2.0.0`" in str(e.value)


def test_missing_headers_exit_2_with_one_line(bench, monkeypatch, capsys):
    monkeypatch.setenv("CUTLASS_INCLUDE", "/nonexistent/cutlass-include")
    assert bench.main(["--cpu-check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpu_fwd_cutlass: CUTLASS_INCLUDE=/nonexistent/cutlass-include holds no")


def test_build_command_lines(bench):
    cmd = bench.candidate_command(Path("/o/c.cubin"), Path("/inc"), bench.Tile(64, 64, 16, 32, 32, 4))
    assert cmd[:7] == ["nvcc", "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "-lineinfo", "-I"] and cmd[7] == "kernels"
    assert cmd[cmd.index("-isystem") + 1] == "/inc" and cmd[cmd.index("-Xptxas") + 1] == "-v"
    assert [c for c in cmd if c.startswith("-D")] == ["-DAUX_TRUNK_CUTLASS_TBM=64", "-DAUX_TRUNK_CUTLASS_TBN=64", "-DAUX_TRUNK_CUTLASS_TBK=16",
                                                      "-DAUX_TRUNK_CUTLASS_WM=32", "-DAUX_TRUNK_CUTLASS_WN=32", "-DAUX_TRUNK_CUTLASS_STAGES=4",
                                                      "-DAUX_TRUNK_CUTLASS_SPLIT_RN=1"]  # the split stated both ways
    assert cmd[-3:] == ["-o", "/o/c.cubin", "kernels/aux_trunk_forward_cutlass.cu"]
    rz = bench.candidate_command(Path("/o/c.cubin"), Path("/inc"), bench.Tile.parse("128x64x16_64x32_3_rz"))
    assert [c for c in rz if c.startswith("-D")][-1] == "-DAUX_TRUNK_CUTLASS_SPLIT_RN=0" and len([c for c in rz if c.startswith("-D")]) == 7
    ship = bench.shipped_command(Path("/o/s.cubin"))
    assert ship[-3:] == ["-o", "/o/s.cubin", "kernels/aux_trunk_kernel.cu"] and "-isystem" not in ship


def test_ptxas_summary_per_entry(bench):
    text = ("ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'k1' for 'sm_90'\n"
            "ptxas info    : Function properties for k1\n    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
            "ptxas info    : Used 239 registers, used 1 barriers, 36864 bytes smem\nptxas info    : Compile time = 1 ms\n"
            "ptxas info    : Compiling entry function 'k2' for 'sm_90'\nptxas info    : Used 24 registers, used 1 barriers\n")
    assert bench.ptxas_summary(text) == ("k1: 239 registers, 8 bytes spill stores, 4 bytes spill loads, 36864 bytes smem; "
                                         "k2: 24 registers, 0 bytes smem")
    # one entry of several (the one a benchmark launches), wherever ptxas lists it; "" when there is none
    assert bench.ptxas_summary(text, "k2") == "k2: 24 registers, 0 bytes smem"
    assert bench.ptxas_summary(text, "k1").startswith("k1: 239 registers, 8 bytes spill stores") and bench.ptxas_summary(text, "k") == ""


def test_compile_jobs_reports_the_launched_entry_and_fails_without_it(bench, tmp_path):
    """compile_jobs with ``entries``: the tag's summary is that entry's alone; a source without it is an error
    naming the tag, the entry and what ptxas did report (stand-in "nvcc": python writing ptxas's lines)."""
    import sys

    text = ("ptxas info    : Compiling entry function 'k_store' for 'sm_90'\nptxas info    : Used 97 registers, used 1 barriers, 26112 bytes smem\n"
            "ptxas info    : Compiling entry function 'k' for 'sm_90'\nptxas info    : Used 93 registers, used 1 barriers, 26112 bytes smem\n")
    job = [sys.executable, "-c", f"import sys; sys.stderr.write({text!r})", "-o", str(tmp_path / "s.cubin"), "kernels/x.cu"]
    cubins, ptxas = bench.compile_jobs({"shipped": job, "other": job}, {"shipped": "k"})
    assert ptxas == {"shipped": "k: 93 registers, 26112 bytes smem",
                     "other": "k_store: 97 registers, 26112 bytes smem; k: 93 registers, 26112 bytes smem"}
    assert cubins["shipped"] == tmp_path / "s.cubin"
    with pytest.raises(RuntimeError, match=r"nvcc built shipped \(kernels/x.cu\) but ptxas reported no entry 'k2': k_store: 97 registers"):
        bench.compile_jobs({"shipped": job}, {"shipped": "k2"})


@pytest.mark.cutlass
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_cpu_check_builds_the_shipped_kernel_and_the_candidate(bench, capsys):
    try:
        bench.cutlass_include()
    except bench.HeadersMissing as exc:
        pytest.skip(str(exc))
    assert bench.main(["--cpu-check", "--tiles", "128x64x16_64x32_3,128x64x16_64x32_3_rz"]) == 0
    out = capsys.readouterr().out
    # the SIMT source's launched entry alone (its aux_trunk_backward, which ptxas lists first, is not this benchmark's)
    shipped = next(ln for ln in out.splitlines() if "built shipped:" in ln)
    assert re.search(r"built shipped: aux_trunk_forward: \d+ registers", shipped) and "aux_trunk_backward" not in shipped
    m = re.search(r"built 128x64x16_64x32_3_rn: aux_trunk_forward_cutlass: (\d+) registers, 0 bytes spill stores, 0 bytes spill loads, (\d+) bytes smem", out)
    assert m and int(m[1]) <= 255 and int(m[2]) <= 48 * 1024
    assert re.search(r"built 128x64x16_64x32_3_rz: aux_trunk_forward_cutlass: \d+ registers, 0 bytes spill stores", out)
    assert "10 shapes x 6 batch sizes" in out


# -- the host logic end to end, with numpy stand-ins for CuPy and torch ---------------------------------


def _elu(z):
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))


def _kernel(fault: str | None = None):
    """h_out[:B] = ELU(x W^T + b) in float32 on the host; ``fault``: "past" writes row B (a guard row), "error"
    adds 1e-3 to h_out[0, 0] at B = 300, "noise" makes every run differ in the last bit at B = 300."""
    calls = {"n": 0}

    def launch(grid, block, args, stream=None):
        x, W, b, h, B, E, SH2 = args
        B = int(B)
        z = (x.astype(np.float64) @ W.astype(np.float64).T + b).astype(np.float32)
        h[:B] = _elu(z).astype(np.float32)
        calls["n"] += 1
        if fault == "past":
            h[B] = 0.0
        elif fault == "error" and B == 300:
            h[0, 0] += 1e-3
        elif fault == "noise" and B == 300:
            h[0, 0] = np.nextafter(h[0, 0], np.float32(np.inf) if calls["n"] % 2 else np.float32(-np.inf))

    return launch


def _fakes(monkeypatch, bench, kernels):
    from test_wgrad_tc_bench import _fake_cupy, _fake_torch

    cp = _fake_cupy(kernels)
    cp.asarray = np.asarray
    torch = _fake_torch()

    def linear(x, W, b):
        return type(x)((x.a.astype(np.float32) @ W.a.astype(np.float32).T + b.a).astype(np.float32))

    def elu(t):
        return type(t)(_elu(t.a).astype(np.float32))

    torch.nn = types.SimpleNamespace(functional=types.SimpleNamespace(linear=linear, elu=elu))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "torch", torch)


def _run(bench, monkeypatch, tmp_path, kernels, tiles, extra=()):
    _fakes(monkeypatch, bench, kernels)
    monkeypatch.setattr(bench, "build", lambda out, tiles, include: ({"shipped": Path("s"), **{t.name: Path(t.name) for t in tiles}},
                                                                     {"shipped": "s: 1 registers"}))
    monkeypatch.setattr(bench, "cutlass_include", lambda: Path("/fake/include"))
    out = tmp_path / "r.json"
    code = bench.main(["--sizes", "1,300", "--time-sizes", "300", "--tiles", ",".join(tiles), "--replays", "3", "--warmup", "1",
                       "--json", str(out), *extra])
    return code, json.loads(out.read_text())


def test_host_logic_passes_a_right_candidate(bench, monkeypatch, tmp_path):
    t1, t2 = "128x64x16_64x32_3_rn", "64x64x16_32x32_4_rn"
    kernels = {("s", bench.KERNEL): _kernel(), (t1, bench.CANDIDATE): _kernel(), (t2, bench.CANDIDATE): _kernel()}
    code, data = _run(bench, monkeypatch, tmp_path, kernels, [t1, t2])
    assert code == 0 and data["candidate_ok"] is True and data["candidate"] == t1 and data["tiles"] == [t1, t2]
    rows = data["rows"]
    assert len(rows) == 20 and all("error" not in r for r in rows)  # 10 shapes x 2 sizes
    for r in rows:
        for tag in ("shipped", t1, t2):
            assert r[tag]["ok"] and r[tag]["deterministic"] and r[tag]["guard_rows_untouched"], (tag, r)
        assert r["torch_fp32"]["ok"]
    timed = [r for r in rows if "time" in r[t1]]
    assert [(r["E"], r["SH2"], r["B"], r["origin"]) for r in timed] == [(256, 256, 300, "shipped")]  # shipped shape, --time-sizes only
    r = timed[0]
    assert r["grid"] == {"shipped": [4, 3, 1], t1: [12, 1, 1], t2: [20, 1, 1]}
    assert all(r[tag]["time"]["median_us"] == pytest.approx(10.0 / r[tag]["rep"]) for tag in ("shipped", t1, t2, "torch_fp32"))


@pytest.mark.parametrize("fault,status", [("past", "FAIL wrote past B"), ("error", "FAIL mismatch"), ("noise", "FAIL nondeterministic")])
def test_host_logic_fails_a_wrong_candidate(bench, monkeypatch, tmp_path, fault, status):
    t1 = "128x64x16_64x32_3_rn"
    kernels = {("s", bench.KERNEL): _kernel(), (t1, bench.CANDIDATE): _kernel(fault)}
    code, data = _run(bench, monkeypatch, tmp_path, kernels, [t1])
    assert code == 1 and data["candidate_ok"] is False
    bad = sorted((r["E"], r["SH2"], r["B"], r["misaligned"]) for r in data["rows"] if bench.verdict(r[t1]) != "ok")
    want_b = (1, 300) if fault == "past" else (300,)
    assert bad == sorted((E, S, B, mis) for E, S, mis in ((256, 256, False), (256, 256, True), *((E, S, False) for E, S in ((256, 253), (256, 260), (253, 256), (253, 253), (253, 260), (260, 256), (260, 253), (260, 260))))
                         for B in want_b)
    assert {bench.verdict(r[t1]) for r in data["rows"] if (r["B"] in want_b)} == {status}
    assert all(bench.verdict(r["shipped"]) == "ok" for r in data["rows"])


def test_host_logic_reports_a_wrong_extra_tile_without_failing(bench, monkeypatch, tmp_path, capsys):
    t1, t2 = "128x64x16_64x32_3_rn", "64x64x16_32x32_4_rn"
    kernels = {("s", bench.KERNEL): _kernel(), (t1, bench.CANDIDATE): _kernel(), (t2, bench.CANDIDATE): _kernel("error")}
    code, data = _run(bench, monkeypatch, tmp_path, kernels, [t1, t2])
    assert code == 0 and data["candidate_ok"] is True
    assert {bench.verdict(r[t2]) for r in data["rows"] if r["B"] == 300} == {"FAIL mismatch"}
    assert "(FAIL mismatch); shipped ok" in capsys.readouterr().out


def test_not_worse_than_torch_is_reported(bench, monkeypatch, tmp_path):
    """A candidate within tolerance but less accurate than torch float32 passes and is listed as worse."""
    t1 = "128x64x16_64x32_3_rn"

    def coarse(grid, block, args, stream=None):  # rounds z to ~16 bits: within 1e-5 relative, worse than float32
        x, W, b, h, B, E, SH2 = args
        z = x.astype(np.float64) @ W.astype(np.float64).T + b
        z = (z * (1 + 2.0**-17)).astype(np.float32)
        h[: int(B)] = _elu(z).astype(np.float32)

    kernels = {("s", bench.KERNEL): _kernel(), (t1, bench.CANDIDATE): coarse}
    code, data = _run(bench, monkeypatch, tmp_path, kernels, [t1])
    assert code == 0 and data["candidate_ok"] is True
    assert len(data["candidate_worse_than_torch"]) == 20
    assert all(r["shipped"]["not_worse_than_torch"] for r in data["rows"])  # float64-then-rounded beats torch's float32
