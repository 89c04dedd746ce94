"""benchmarks/gpu_head_fwd_cutlass.py off the GPU: argument parsing and the head tiles (``gpu_fwd_cutlass.Tile``
with the head source's defaults and macros), the candidate source's defaults and entry signatures against the
shipped entries', the launch geometry and the chain specs, the cases, buffer shapes and launch arguments from
the contracts, the nvcc command lines, and the host logic end to end against numpy stand-ins for CuPy and
torch: a wrong candidate (a write past B, an error, a nondeterministic result, a broken K-range rule) is
reported and fails the run, a wrong extra tile is reported without failing it."""

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
TRADE, NEXT = "aux_trade_outcome_forward", "aux_next_bar_forward"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_head_fwd_cutlass

    return gpu_head_fwd_cutlass


@pytest.fixture(scope="module")
def cs():
    return load_contracts(REPO / "contracts", REPO)


def test_arguments_heads_and_tiles(bench):
    a = bench.parse_args([])
    assert a.sizes == [1, 37, 256, 4096, 4103, 65536] and a.time_sizes == [256, 4096, 65536]
    # the shipped build (round-to-nearest split) first, CUTLASS's truncating split of it second; names state the split
    assert [t.name for t in a.tiles] == ["64x128x16_32x32_3_rn", "64x128x16_32x32_3_rz", "32x128x16_32x32_3_rn", "32x128x16_32x32_4_rn",
                                         "64x128x16_64x32_3_rn"]
    assert a.tiles[0].split == "rn" and a.tiles[1].split == "rz"
    assert [h.kernel for h in a.heads] == [TRADE, NEXT] and not a.cpu_check
    a = bench.parse_args(["--heads", "next_bar,next_bar", "--tiles", "32x128x16_32x32_4,32x128x16_32x32_4", "--time-sizes", ""])
    assert [h.kernel for h in a.heads] == [NEXT] and a.tiles == [bench.HeadTile(32, 128, 16, 32, 32, 4)] and a.time_sizes == []
    t = bench.HeadTile.parse("64x128x16_32x32_3")
    assert t == bench.DEFAULT_TILE == bench.HeadTile.parse("64x128x16_32x32_3_rn") and t.threads == 256  # bare: the source's default
    assert bench.HeadTile.parse("64x128x16_64x32_3").threads == 128 and isinstance(t, bench.HeadTile)
    rz = bench.HeadTile.parse("64x128x16_32x32_3_rz")
    assert rz.split == "rz" and rz != t and rz.name == "64x128x16_32x32_3_rz"
    # the head tile's macros (the split stated both ways), and the trunk tile's unchanged
    assert bench.DEFAULT_TILE.defines() == ["-DAUX_HEAD_CUTLASS_TBM=64", "-DAUX_HEAD_CUTLASS_TBN=128", "-DAUX_HEAD_CUTLASS_TBK=16",
                                            "-DAUX_HEAD_CUTLASS_WM=32", "-DAUX_HEAD_CUTLASS_WN=32", "-DAUX_HEAD_CUTLASS_STAGES=3",
                                            "-DAUX_HEAD_CUTLASS_SPLIT_RN=1"]
    assert rz.defines()[-1] == "-DAUX_HEAD_CUTLASS_SPLIT_RN=0"
    assert bench.Tile().defines()[0] == "-DAUX_TRUNK_CUTLASS_TBM=128"
    for bad in ("64x64x16_32x32_3", "64x256x16_64x64_3", "64x128x16_64x32_2", "64x128x16_48x32_3"):
        with pytest.raises(argparse.ArgumentTypeError, match="tile"):
            bench.HeadTile.parse(bad)
    with pytest.raises(SystemExit):
        bench.parse_args(["--heads", "trunk"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--tiles", "64x64x16_32x32_3"])


def _signature(text: str, entry: str) -> list[str]:
    """The parameter list of ``extern "C" __global__ ... entry(...)``, one normalised declaration each."""
    m = re.search(rf"\b{entry}\s*\(([^)]*)\)", text)
    assert m, entry
    return [" ".join(p.split()) for p in m[1].split(",")]


def test_candidate_source_defaults_and_entries_match_the_shipped_ones(bench):
    src = (REPO / bench.CANDIDATE_SOURCE).read_text()
    defaults = {m[0]: int(m[1]) for m in re.findall(r"#define AUX_HEAD_CUTLASS_(\w+) (\d+)", src)}
    t = bench.DEFAULT_TILE
    assert defaults == {"TBM": t.tbm, "TBN": t.tbn, "TBK": t.tbk, "WM": t.wm, "WN": t.wn, "STAGES": t.stages, "SPLIT_RN": 1} and t.split == "rn"
    for head in bench.HEADS:
        shipped = _signature((REPO / head.source).read_text(), head.kernel)
        assert f'extern "C" __global__ void __launch_bounds__(aux_head_cutlass::kThreads)\n{head.entry}(' in src
        assert _signature(src, head.entry) == shipped and len(shipped) == {TRADE: 12, NEXT: 10}[head.kernel]
    assert bench.aux_k_max() == 8


def test_geometry_and_chain_specs(bench):
    g = bench.cutlass_geometry
    assert g(65536) == ((1024, 1, 1), (256, 1, 1)) and g(1) == ((1, 1, 1), (256, 1, 1)) and g(4103) == ((65, 1, 1), (256, 1, 1))
    assert g(65536, bench.HeadTile(64, 128, 16, 64, 32, 3)) == ((1024, 1, 1), (128, 1, 1))
    assert g(65536, bench.HeadTile(32, 128, 16, 32, 32, 4)) == ((2048, 1, 1), (128, 1, 1))
    assert g(256, bench.HeadTile(64, 128, 16, 32, 32, 3)) == ((4, 1, 1), (256, 1, 1))
    trade, nxt = bench.HEADS
    assert bench.chain_spec(trade) == (f"{TRADE}=kernels/aux_head_forward_cutlass.cu:aux_trade_outcome_forward_cutlass;"
                                       "grid=ceil_div(B, 64),1,1;block=256,1,1")
    assert bench.chain_spec(nxt).startswith(f"{NEXT}=kernels/aux_head_forward_cutlass.cu:aux_next_bar_forward_cutlass;")
    with pytest.raises(ValueError, match="with its defaults"):
        bench.chain_spec(trade, bench.HeadTile(32, 128, 16, 32, 32, 4))


def test_cases_shapes_and_arguments_come_from_the_contracts(bench, cs):
    shapes = bench.shapes_of(cs)
    trade = [(s.SH2, s.H, s.K, s.origin, s.misaligned) for s in shapes if s.head == TRADE]
    assert trade[:2] == [(256, 128, 3, "shipped", False), (256, 128, 3, "shipped, misaligned", True)]
    verify = {(s, h, k) for s, h, k, o, _ in trade if o == "[kernel.verify] dims"}
    assert verify == {(s, h, k) for s in (256, 253) for h in (128, 129, 100) for k in (3, 1, 8)} - {(256, 128, 3)} and len(trade) == 21
    assert trade[-2:] == [(256, 128, 0, "K-range rule", False), (256, 128, 9, "K-range rule", False)]
    nxt = [(s.SH2, s.H, s.K, s.origin) for s in shapes if s.head == NEXT]
    assert nxt == [(256, 128, 1, "shipped"), (256, 128, 1, "shipped, misaligned"), (256, 129, 1, "[kernel.verify] dims"),
                   (256, 100, 1, "[kernel.verify] dims"), (253, 128, 1, "[kernel.verify] dims"), (253, 129, 1, "[kernel.verify] dims"),
                   (253, 100, 1, "[kernel.verify] dims")]
    assert [s.head for s in bench.shapes_of(cs, (bench.HEADS[1],))] == [NEXT] * 7
    s9 = shapes[20]
    assert not s9.k_in_range and bench.checked_outputs(bench.HEADS[0], s9) == ("h1_out",) and np.isfinite(bench.poison_of(s9))
    assert np.isnan(bench.poison_of(shapes[0])) and bench.checked_outputs(bench.HEADS[0], shapes[0]) == ("h1_out", "logits", "probs")
    # shipped geometry, buffer shapes (outputs with guard rows) and the argument order from the contract
    assert bench.shipped_geometry(cs, shapes[0], 65536) == ((2048, 1, 1), (128, 1, 1))
    assert bench.buffer_shapes(cs, shapes[0], 37) == {"h_s2": (37, 256), "W1": (128, 256), "b1": (128,), "W2": (3, 128), "b2": (3,),
                                                      "h1_out": (40, 128), "logits": (40, 3), "probs": (40, 3)}
    nb = next(s for s in shapes if s.head == NEXT and s.H == 100 and s.SH2 == 253)
    assert bench.buffer_shapes(cs, nb, 5) == {"h_s2": (5, 253), "W1": (100, 253), "b1": (100,), "W2": (1, 100), "b2": (1,),
                                              "h1_out": (8, 100), "pred": (8,)}
    bufs = {n: n for n in bench.buffer_shapes(cs, shapes[20], 7)}
    args = bench.launch_args(cs, shapes[20], 7, bufs)
    assert args[:8] == ("h_s2", "W1", "b1", "W2", "b2", "h1_out", "logits", "probs")
    assert [int(a) for a in args[8:]] == [7, 256, 128, 9] and all(isinstance(a, np.int32) for a in args[8:])
    assert [int(a) for a in bench.launch_args(cs, nb, 5, {n: n for n in bench.buffer_shapes(cs, nb, 5)})[7:]] == [5, 253, 100]
    for h in bench.HEADS:
        tol = bench.tolerance(cs, h)
        assert (tol.rtol, tol.atol, tol.rtol_elem) == (1e-5, 1e-5, 1e-4)


def test_build_command_lines(bench, monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(bench, "compile_jobs", lambda jobs: seen.update(jobs) or ({}, {}))
    bench.build(tmp_path, bench.HEADS, (bench.DEFAULT_TILE, bench.HeadTile.parse("32x128x16_32x32_4_rn")), Path("/inc"))
    assert list(seen) == [f"shipped {TRADE}", f"shipped {NEXT}", "64x128x16_32x32_3_rn", "32x128x16_32x32_4_rn"]
    assert seen[f"shipped {TRADE}"][-3:] == ["-o", str(tmp_path / f"{TRADE}.cubin"), "benchmarks/kernels_baseline/aux_trade_outcome_forward_kernel.cu"]
    assert seen[f"shipped {NEXT}"][-1] == "benchmarks/kernels_baseline/aux_next_bar_forward_kernel.cu" and "-isystem" not in seen[f"shipped {NEXT}"]
    cmd = seen["32x128x16_32x32_4_rn"]
    assert cmd[:8] == ["nvcc", "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "-lineinfo", "-I", "kernels"]
    assert cmd[cmd.index("-isystem") + 1] == "/inc" and cmd[cmd.index("-Xptxas") + 1] == "-v"
    assert [c for c in cmd if c.startswith("-D")] == ["-DAUX_HEAD_CUTLASS_TBM=32", "-DAUX_HEAD_CUTLASS_TBN=128", "-DAUX_HEAD_CUTLASS_TBK=16",
                                                      "-DAUX_HEAD_CUTLASS_WM=32", "-DAUX_HEAD_CUTLASS_WN=32", "-DAUX_HEAD_CUTLASS_STAGES=4",
                                                      "-DAUX_HEAD_CUTLASS_SPLIT_RN=1"]
    assert cmd[-3:] == ["-o", str(tmp_path / "head_cutlass_32x128x16_32x32_4_rn.cubin"), "kernels/aux_head_forward_cutlass.cu"]


def test_missing_headers_exit_2_with_one_line(bench, monkeypatch, capsys):
    monkeypatch.setenv("CUTLASS_INCLUDE", "/nonexistent/cutlass-include")
    assert bench.main(["--cpu-check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpu_head_fwd_cutlass: CUTLASS_INCLUDE=/nonexistent/cutlass-include holds no")


@pytest.mark.nvcc
@pytest.mark.cutlass
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_cpu_check_builds_both_shipped_heads_and_the_candidate(bench, capsys):
    try:
        bench.cutlass_include()
    except bench.HeadersMissing as exc:
        pytest.skip(str(exc))
    # the shipped tile and its truncating split; 64 x 32 warps spill once staged per k8 (the source's default since 5 Dec)
    assert bench.main(["--cpu-check", "--tiles", "64x128x16_32x32_3,64x128x16_32x32_3_rz,64x128x16_64x32_3"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"built shipped {TRADE}: {TRADE}: \d+ registers", out) and re.search(rf"built shipped {NEXT}: {NEXT}: \d+ registers", out)
    for tile in ("64x128x16_32x32_3_rn", "64x128x16_32x32_3_rz"):
        line = next(ln for ln in out.splitlines() if f"built {tile}:" in ln)
        entries = re.findall(r"(aux_\w+_cutlass): (\d+) registers, 0 bytes spill stores, 0 bytes spill loads, (\d+) bytes smem", line)
        assert sorted(e[0] for e in entries) == ["aux_next_bar_forward_cutlass", "aux_trade_outcome_forward_cutlass"], line
        assert all(int(r) <= 255 and int(s) <= 48 * 1024 for _, r, s in entries), line
    line = next(ln for ln in out.splitlines() if "built 64x128x16_64x32_3_rn:" in ln)
    assert re.search(r"255 registers, [1-9]\d* bytes spill stores", line), line
    assert "28 shapes x 6 batch sizes" in out and "--candidate 'aux_next_bar_forward=" in out


# -- the host logic end to end, with numpy stand-ins for CuPy and torch ---------------------------------


def _elu(z):
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))


def _head_kernel(kind: str, fault: str | None = None):
    """The head forward on the host (float64, rounded to float32 per output), with the K-range rule;
    ``fault``: "past" writes row B of h1 (a guard row), "error" adds 1e-3 to the last output's [0] at B = 300,
    "noise" makes every run differ in the last bit of h1[0, 0] at B = 300, "nonan" writes nothing into logits and
    probs where K is out of range."""
    calls = {"n": 0}

    def launch(grid, block, args, stream=None):
        if kind == "trade":
            h_s2, W1, b1, W2, b2, h1, logits, probs, B, SH2, H, K = args
        else:
            h_s2, W1, b1, W2, b2, h1, pred, B, SH2, H = args
            K = 1
        B, K = int(B), int(K)
        h = _elu(h_s2.astype(np.float64) @ W1.astype(np.float64).T + b1).astype(np.float32)
        h1[:B] = h
        calls["n"] += 1
        if kind == "trade":
            if 1 <= K <= 8:
                z = h.astype(np.float64) @ W2.astype(np.float64).T + b2
                e = np.exp(z - z.max(axis=1, keepdims=True))
                logits[:B], probs[:B] = z.astype(np.float32), (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
            elif fault != "nonan":
                logits[:B], probs[:B] = np.nan, np.nan
            last = probs
        else:
            pred[:B] = (h.astype(np.float64) @ W2[0].astype(np.float64) + b2[0]).astype(np.float32)
            last = pred
        if fault == "past":
            h1[B] = 0.0
        elif fault == "error" and B == 300 and last.size:
            last.reshape(last.shape[0], -1)[0, 0] += 1e-3
        elif fault == "noise" and B == 300:
            h1[0, 0] = np.nextafter(h1[0, 0], np.float32(np.inf) if calls["n"] % 2 else np.float32(-np.inf))

    return launch


def _fakes(monkeypatch, kernels):
    from test_wgrad_tc_bench import _fake_cupy, _fake_torch

    cp = _fake_cupy(kernels)
    cp.asarray = np.asarray
    torch = _fake_torch()
    T = type(torch.as_tensor(np.zeros(1)))
    T.__getitem__ = lambda self, i: T(self.a[i])

    def linear(x, W, b):
        return T((x.a.astype(np.float32) @ W.a.astype(np.float32).T + b.a).astype(np.float32))

    def softmax(t, dim):
        e = np.exp(t.a - t.a.max(axis=dim, keepdims=True))
        return T((e / e.sum(axis=dim, keepdims=True)).astype(np.float32))

    torch.nn = types.SimpleNamespace(functional=types.SimpleNamespace(linear=linear, elu=lambda t: T(_elu(t.a).astype(np.float32))))
    torch.softmax = softmax
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "torch", torch)


def _run(bench, monkeypatch, tmp_path, kernels, tiles, extra=()):
    _fakes(monkeypatch, kernels)
    monkeypatch.setattr(bench, "build", lambda out, heads, tiles, include: (
        {f"shipped {TRADE}": Path("st"), f"shipped {NEXT}": Path("sn"), **{t.name: Path(t.name) for t in tiles}}, {}))
    monkeypatch.setattr(bench, "cutlass_include", lambda: Path("/fake/include"))
    out = tmp_path / "r.json"
    code = bench.main(["--sizes", "1,300", "--time-sizes", "300", "--tiles", ",".join(tiles), "--replays", "3", "--warmup", "1",
                       "--json", str(out), *extra])
    return code, json.loads(out.read_text())


def _kernels(tiles: dict[str, dict[str, str | None]]):
    """Right shipped kernels, and per tile name {"trade": fault, "next": fault} for the candidate entries."""
    k = {("st", TRADE): _head_kernel("trade"), ("sn", NEXT): _head_kernel("next")}
    for name, faults in tiles.items():
        k[(name, "aux_trade_outcome_forward_cutlass")] = _head_kernel("trade", faults.get("trade"))
        k[(name, "aux_next_bar_forward_cutlass")] = _head_kernel("next", faults.get("next"))
    return k


T1, T2 = "64x128x16_64x32_3_rn", "32x128x16_32x32_4_rn"


def test_host_logic_passes_right_candidates(bench, monkeypatch, tmp_path, capsys):
    code, data = _run(bench, monkeypatch, tmp_path, _kernels({T1: {}, T2: {}}), [T1, T2])
    assert code == 0 and data["candidate_ok"] is True and data["candidate"] == T1 and data["tiles"] == [T1, T2]
    rows = data["rows"]
    assert len(rows) == 56 and all("error" not in r for r in rows)  # 28 shapes x 2 sizes
    for r in rows:
        for tag in ("shipped", T1, T2):
            assert bench.verdict(r[tag]) == "ok", (tag, r)
        assert r["torch_fp32"]["ok"]
        want = {"trade_outcome": ["h1_out", "logits", "probs"], "next_bar": ["h1_out", "pred"]}[r["head"]]
        assert sorted(r[T1]["outputs"]) == sorted(want if r["origin"] != "K-range rule" else ["h1_out"])
        assert (r[T1]["nan_rule"] is True) == (r["origin"] == "K-range rule") and r[T1]["nan_rule"] in (None, True)
    timed = [r for r in rows if "time" in r[T1]]
    assert [(r["head"], r["B"], r["origin"]) for r in timed] == [("trade_outcome", 300, "shipped"), ("next_bar", 300, "shipped")]
    assert timed[0]["grid"] == {"shipped": [10, 1, 1], T1: [5, 1, 1], T2: [10, 1, 1]}
    assert all(r[tag]["time"]["median_us"] == pytest.approx(10.0 / r[tag]["rep"]) for r in timed for tag in ("shipped", T1, T2, "torch_fp32"))
    # tests/gpu/head_fwd_candidates.sh copies the time lines and the verdict into its summary with this pattern
    pattern = re.search(r'grep -E "([^"]+)" "\$OUT/A_head_fwd.log"', (REPO / "tests" / "gpu" / "head_fwd_candidates.sh").read_text())[1]
    kept = [ln for ln in capsys.readouterr().out.splitlines() if re.search(pattern, ln)]
    assert [ln.split(":")[0].split()[0] for ln in kept] == ["trade_outcome", "next_bar", "candidate"], kept


@pytest.mark.parametrize("fault,status,head", [("past", "FAIL wrote past B", "next"), ("error", "FAIL probs mismatch", "trade"),
                                               ("error", "FAIL pred mismatch", "next"), ("noise", "FAIL nondeterministic", "trade")])
def test_host_logic_fails_a_wrong_candidate(bench, monkeypatch, tmp_path, fault, status, head):
    code, data = _run(bench, monkeypatch, tmp_path, _kernels({T1: {head: fault}}), [T1])
    assert code == 1 and data["candidate_ok"] is False
    short = {"trade": "trade_outcome", "next": "next_bar"}[head]
    bad = [r for r in data["rows"] if bench.verdict(r[T1]) != "ok"]
    want_b = {1, 300} if fault == "past" else {300}
    # every case of that head at the faulty sizes (the K-range cases compare h1 alone: an error in probs passes there)
    expect = [r for r in data["rows"] if r["head"] == short and r["B"] in want_b and not (fault == "error" and r["origin"] == "K-range rule")]
    assert bad == expect and expect and {bench.verdict(r[T1]) for r in bad} == {status}
    assert all(bench.verdict(r["shipped"]) == "ok" for r in data["rows"])


def test_host_logic_fails_a_broken_k_range_rule(bench, monkeypatch, tmp_path):
    code, data = _run(bench, monkeypatch, tmp_path, _kernels({T1: {"trade": "nonan"}}), [T1])
    assert code == 1
    bad = [(r["K"], r["B"]) for r in data["rows"] if bench.verdict(r[T1]) != "ok"]
    assert bad == [(9, 1), (9, 300)]  # K = 0 has no logits to write
    assert {bench.verdict(r[T1]) for r in data["rows"] if r["K"] == 9} == {"FAIL K-range rule (logits/probs not NaN)"}


def test_host_logic_reports_a_wrong_extra_tile_without_failing(bench, monkeypatch, tmp_path, capsys):
    code, data = _run(bench, monkeypatch, tmp_path, _kernels({T1: {}, T2: {"next": "error"}}), [T1, T2])
    assert code == 0 and data["candidate_ok"] is True
    assert {bench.verdict(r[T2]) for r in data["rows"] if r["B"] == 300 and r["head"] == "next_bar"} == {"FAIL pred mismatch"}
    assert "(FAIL pred mismatch); shipped ok" in capsys.readouterr().out


def test_not_worse_than_torch_is_reported(bench, monkeypatch, tmp_path):
    """A candidate within tolerance but less accurate than torch float32 passes and is listed as worse."""

    def coarse(grid, block, args, stream=None):  # h1 scaled by 1 + 2^-19: within 1e-5 relative, worse than float32
        h_s2, W1, b1, W2, b2, h1, pred, B, SH2, H = args
        h = _elu((h_s2.astype(np.float64) @ W1.astype(np.float64).T + b1) * (1 + 2.0**-19))
        h1[: int(B)] = h.astype(np.float32)
        pred[: int(B)] = (h1[: int(B)].astype(np.float64) @ W2[0].astype(np.float64) + b2[0]).astype(np.float32)

    kernels = _kernels({T1: {}})
    kernels[(T1, "aux_next_bar_forward_cutlass")] = coarse
    code, data = _run(bench, monkeypatch, tmp_path, kernels, [T1], ["--heads", "next_bar"])
    assert code == 0 and data["candidate_ok"] is True and data["kernels"] == [NEXT]
    assert len(data["candidate_worse_than_torch"]) == len(data["rows"]) == 14
    # float64-then-rounded beats torch's float32 (at B = 1, pred is one number: either may round luckier)
    assert all(r["shipped"]["not_worse_than_torch"] for r in data["rows"] if r["B"] == 300)
