"""aux_weight_grad_partial_masked (kernels/aux_weight_grad_masked_kernel.cu), the trade-outcome head's weight-
gradient partials over its labelled rows only, on the CPU: its contract and its place in the fused schedule, its
float64 reference against a brute-force loop, the fused path with it against the per-sample path (references),
verify on the emulated backend (a kernel that reads the skipped rows fails), and the kernel's own source compiled
for the host with g++ (a block of 256 std::threads, barriers and warp ballots emulated) against the reference on
inputs whose skipped rows hold NaN, so that a wrong compaction index or a read of a skipped row fails here.
Nothing here runs on a GPU."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from audit.load import load_contracts
from audit.references import dqn_aux as ref

REPO = Path(__file__).resolve().parents[1]
NAME = "aux_weight_grad_partial_masked"
SOURCE = REPO / "kernels" / "aux_weight_grad_masked_kernel.cu"


@pytest.fixture(scope="module")
def cs():
    return load_contracts(REPO / "contracts", REPO)


# ---------------------------------------------------------------------------------------------------
# contract and schedule


def test_the_contract_declares_the_mask_the_domain_and_the_bindings(cs):
    k = cs.kernel_map[NAME]
    assert k.source == "kernels/aux_weight_grad_masked_kernel.cu" and k.entry == NAME and k.stage == "reduce"
    assert [p.name for p in k.params] == ["dz", "x", "labels", "ws", "wsb", "B", "M", "N", "P", "K"]
    labels = k.param("labels")
    assert labels.dtype == "i32" and labels.role == "in" and labels.mask.skip_value == -1 and not labels.mask.zeroes
    # the out-of-range label the loss and the backward are verified on (DOMAIN_MISMATCH keeps the three equal)
    assert [float(v) for v in labels.values.include] == [3.0]
    assert k.param("ws").role == "out" and k.param("wsb").role == "out"
    assert list(k.dims) == ["M", "N", "P"]
    bindings = [dict(b) for b in k.verify.bindings]
    assert {"M": 128, "N": 256, "P": 1} in bindings and {"M": 130, "N": 129, "P": 7} in bindings
    assert any(b["M"] <= 8 and b["N"] % 4 for b in bindings) and any(b["M"] > 8 and b["M"] % 4 for b in bindings)
    # the bindings run the whole sweep (chunks above 256 rows need B > 256); the K variants 3 cases of it
    assert (k.verify.binding_cases, k.verify.variant_cases, dict(k.verify.dims)) == (12, 3, {"K": (3, 8, 1)})
    assert k.reference == "audit.references.dqn_aux:aux_weight_grad_partial_masked"
    # the entry takes the contract's parameters in order
    m = re.search(rf"{NAME}\(([^)]*)\)", SOURCE.read_text())
    names = [a.split()[-1].lstrip("*") for a in m[1].split(",")]
    assert names == [p.name for p in k.params]


def _steps(cs, schedule):
    return [s for s in cs.schedule_map[schedule].steps if getattr(s, "launch", None)]


def _bind(step, name):
    return dict(step.bind)[name].buffer


def test_the_fused_schedule_reduces_the_trade_outcome_head_over_its_labelled_rows(cs):
    fused = cs.schedule_map["aux_heads_backward_fused"]
    assert fused.equivalent_to == "aux_heads_backward"
    steps = _steps(cs, "aux_heads_backward_fused")
    masked = [s for s in steps if s.launch == NAME]
    assert [(_bind(s, "dz"), _bind(s, "x"), _bind(s, "labels"), _bind(s, "ws"), _bind(s, "wsb")) for s in masked] == [
        ("to_db1_partial", "h_s2_aux", "aux_to_labels", "wg_ws_to1", "wg_wsb_to1"),
        ("to_db2_partial", "to_h1", "aux_to_labels", "wg_ws_to2", "wg_wsb_to2"),
    ]
    # the labels the backward masks with are the ones the reduction skips by
    (bwd,) = [s for s in steps if s.launch == "aux_trade_outcome_backward"]
    assert _bind(bwd, "labels") == "aux_to_labels"
    # no unmasked reduction of the head's dz is left, and each workspace is finished into the head's gradients
    plain = [_bind(s, "dz") for s in steps if s.launch == "aux_weight_grad_partial"]  # the CUTLASS partial
    assert plain == ["trunk_db_partial", "nb_db1_partial"]
    assert [_bind(s, "dz") for s in steps if s.launch == "aux_weight_grad_partial_skinny"] == ["nb_db2_partial"]  # M = KNB = 1
    finishes = {_bind(s, "ws"): (_bind(s, "dW"), _bind(s, "db")) for s in steps if s.launch == "aux_weight_grad_finish"}
    assert finishes["wg_ws_to1"] == ("to_dW1", "to_db1") and finishes["wg_ws_to2"] == ("to_dW2", "to_db2")
    # after the backward that writes the head's dz
    order = [s.launch for s in steps]
    assert order.index("aux_trade_outcome_backward") < order.index(NAME)


# ---------------------------------------------------------------------------------------------------
# the float64 reference


def _brute(dz, x, labels, B, M, N, P, K):
    ws = np.zeros((P, M, N))
    wsb = np.zeros((P, M))
    for p in range(P):
        for b in range(B * p // P, B * (p + 1) // P):
            if 0 <= labels[b] < K:
                for m in range(M):
                    wsb[p, m] += dz[b, m]
                    for n in range(N):
                        ws[p, m, n] += dz[b, m] * x[b, n]
    return ws, wsb


def _labels(rng, B, K, density):
    lab = rng.integers(0, K, size=B)
    lab[rng.random(B) >= density] = -1
    odd = rng.random(B) < 0.1
    lab[odd] = rng.choice([-2, K, K + 4], size=int(odd.sum()))  # labels of no class: skipped like -1
    return lab.astype(np.int32)


@pytest.mark.parametrize(
    "B, M, N, P, density",
    [(37, 3, 5, 4, 0.3), (9, 4, 3, 12, 0.5), (20, 2, 3, 3, 0.0), (16, 3, 2, 4, 1.0), (1, 1, 1, 1, 1.0), (50, 5, 4, 7, 0.05)],
)
def test_reference_matches_a_brute_force_loop(B, M, N, P, density):
    rng = np.random.default_rng(B * 100 + P)
    K = 3
    lab = _labels(rng, B, K, density)
    dz = rng.standard_normal((B, M))
    x = rng.standard_normal((B, N))
    skipped = ~((lab >= 0) & (lab < K))
    dz[skipped] = np.nan  # a skipped row is never part of a sum
    x[skipped] = np.inf
    out = ref.aux_weight_grad_partial_masked(dz=dz.astype(np.float32), x=x.astype(np.float32), labels=lab, B=B, M=M, N=N, P=P, K=K)
    ws, wsb = _brute(dz.astype(np.float32).astype(np.float64), x.astype(np.float32).astype(np.float64), lab, B, M, N, P, K)
    assert out["ws"].shape == (P, M, N) and out["wsb"].shape == (P, M)
    assert np.isfinite(out["ws"]).all() and np.isfinite(out["wsb"]).all()
    np.testing.assert_allclose(out["ws"], ws, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["wsb"], wsb, rtol=1e-12, atol=1e-12)
    if P > B:  # empty chunks are zeros
        empty = [p for p in range(P) if B * p // P == B * (p + 1) // P]
        assert empty and not out["ws"][empty].any() and not out["wsb"][empty].any()
    if density == 0.0:
        assert not out["ws"].any() and not out["wsb"].any()


def test_reference_is_the_unmasked_partial_of_the_zeroed_rows():
    rng = np.random.default_rng(5)
    B, M, N, P, K = 300, 6, 7, 5, 3
    lab = _labels(rng, B, K, 0.05)
    dz = rng.standard_normal((B, M))
    x = rng.standard_normal((B, N))
    valid = (lab >= 0) & (lab < K)
    masked = ref.aux_weight_grad_partial_masked(dz=dz, x=x, labels=lab, B=B, M=M, N=N, P=P, K=K)
    plain = ref.aux_weight_grad_partial(dz=np.where(valid[:, None], dz, 0.0), x=x, B=B, M=M, N=N, P=P)
    np.testing.assert_allclose(masked["ws"], plain["ws"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(masked["wsb"], plain["wsb"], rtol=1e-12, atol=1e-14)
    unmasked = ref.aux_weight_grad_partial(dz=dz, x=x, B=B, M=M, N=N, P=P)
    assert not np.allclose(masked["ws"], unmasked["ws"])  # the mask matters on these inputs


def test_fused_masked_path_equals_the_per_sample_path_of_the_trade_outcome_backward():
    """The equivalence the schedule declares, on the references: the backward's per-sample partials summed over
    all rows against the masked partial + finish over the valid rows, with labels -1, -2 and K among the rows."""
    rng = np.random.default_rng(12)
    dims = {"B": 40, "E": 12, "SH2": 10, "H": 9, "K": 3, "S": 5, "KNB": 1}
    case = ref.aux_trade_outcome_backward_gradcheck(rng, dims)
    B, K, H, SH2 = dims["B"], dims["K"], dims["H"], dims["SH2"]
    inputs = dict(case.inputs)
    inputs["labels"] = _labels(rng, B, K, 0.4)
    inputs["valid_count"] = np.array([int(((inputs["labels"] >= 0) & (inputs["labels"] < K)).sum())])
    assert 0 < inputs["valid_count"][0] < B
    out = ref.aux_trade_outcome_backward(**inputs)
    for dz, x, w, b, M, N in (("db1_partial", "h_s2", "dW1_partial", "db1_partial", H, SH2), ("db2_partial", "h1", "dW2_partial", "db2_partial", K, H)):
        part = ref.aux_weight_grad_partial_masked(dz=out[dz], x=inputs[x], labels=inputs["labels"], B=B, M=M, N=N, P=6, K=K)
        fin = ref.aux_weight_grad_finish(ws=part["ws"], wsb=part["wsb"], M=M, N=N, P=6)
        dW = ref.aux_param_grad_reduce(partial=out[w].reshape(B, M * N), grad=np.zeros(M * N), B=B, N=M * N)["grad"]
        db = ref.aux_param_grad_reduce(partial=out[b].reshape(B, M), grad=np.zeros(M), B=B, N=M)["grad"]
        np.testing.assert_allclose(fin["dW"].reshape(-1), dW, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(fin["db"], db, rtol=1e-12, atol=1e-15)
        assert np.abs(dW).max() > 0


# ---------------------------------------------------------------------------------------------------
# verify on the emulated backend


def _reads_the_skipped_rows(launch):
    """A kernel that forgot the mask: the unmasked partial over every row."""
    every_row = np.zeros(launch.tensor("labels").shape, dtype=np.int64)  # class 0 on every row
    launch.write_outputs(launch.run_reference(labels=every_row))


def test_verify_passes_the_reference_and_fails_a_kernel_that_reads_skipped_rows():
    from audit.runtime import verify

    ok = verify(REPO, kernels=[NAME], emulated={}, sizes=(37, 300), evidence=False)
    assert ok.run.results[0].verdict == "pass", [c for c in ok.run.results[0].checks if c.verdict == "fail"]
    all_skip = [c.case for c in ok.run.results[0].checks if c.check == "all_skip" and c.verdict == "pass"]
    assert "B=37 (K=3, M=128, N=256, P=3, all-skip)" in all_skip and "B=37 (K=3, M=3, N=128, P=3, all-skip)" in all_skip
    # K = 8: the second launch binds M = K
    assert "B=37 (K=8, M=8, N=128, P=3, all-skip)" in all_skip
    bad = verify(REPO, kernels=[NAME], emulated={NAME: _reads_the_skipped_rows}, sizes=(37, 300), evidence=False)
    found = [f for f in bad.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert found and all(f.subject == NAME for f in found), [f.message for f in bad.result.findings]


# ---------------------------------------------------------------------------------------------------
# the kernel's source compiled for the host: 256 std::threads per block, __syncthreads a std::barrier, a warp
# ballot through a per-warp barrier; blocks run one after the other (so __shared__ can be a static local)

_HOST_SHIM = r"""
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct float4 { float x, y, z, w; };
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct Idx { int x, y, z; };
static thread_local Idx threadIdx, blockIdx;
static std::barrier<>* g_block;
static std::barrier<>* g_warp[8];
static bool g_pred[8][32];
static inline void __syncthreads() { g_block->arrive_and_wait(); }
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline unsigned __ballot_sync(unsigned, bool pred) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    g_pred[w][l] = pred;
    g_warp[w]->arrive_and_wait();
    unsigned b = 0;
    for (int i = 0; i < 32; ++i) b |= (unsigned)g_pred[w][i] << i;
    g_warp[w]->arrive_and_wait();
    return b;
}
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
"""

# argv: in-file out-file. The input: int32 B, M, N, P, K, dz_off, x_off; float dz[B*M], x[B*N]; int32 labels[B].
# dz and x are placed dz_off / x_off floats past a 16-byte boundary (1: the scalar load paths).
_HOST_MAIN = r"""
int main(int argc, char** argv) {
    FILE* f = fopen(argv[1], "rb");
    int h[7];
    if (fread(h, 4, 7, f) != 7) return 2;
    const int B = h[0], M = h[1], N = h[2], P = h[3], K = h[4];
    std::vector<float> dzb((size_t)B * M + 8), xb((size_t)B * N + 8);
    float* dz = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(dzb.data()) + 15) & ~uintptr_t(15)) + h[5];
    float* x = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(xb.data()) + 15) & ~uintptr_t(15)) + h[6];
    std::vector<int> labels(B + 8, -1);  // padded: a read past the batch finds no class
    if (fread(dz, 4, (size_t)B * M, f) != (size_t)B * M || fread(x, 4, (size_t)B * N, f) != (size_t)B * N ||
        fread(labels.data(), 4, B, f) != (size_t)B) return 2;
    fclose(f);
    const float poison = std::nanf("");
    std::vector<float> ws((size_t)P * M * N, poison), wsb((size_t)P * M, poison);
    const int gx = (N + 127) / 128, gy = (M + 127) / 128;
    std::barrier<> block(256);
    g_block = &block;
    for (int w = 0; w < 8; ++w) g_warp[w] = new std::barrier<>(32);
    std::vector<std::thread> threads;
    for (int t = 0; t < 256; ++t)
        threads.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            for (int z = 0; z < P; ++z)
                for (int y = 0; y < gy; ++y)
                    for (int xx = 0; xx < gx; ++xx) {
                        blockIdx = {xx, y, z};
                        aux_weight_grad_partial_masked(dz, x, labels.data(), ws.data(), wsb.data(), B, M, N, P, K);
                        block.arrive_and_wait();  // the next block starts on a retired shared memory
                    }
        });
    for (auto& t : threads) t.join();
    FILE* o = fopen(argv[2], "wb");
    fwrite(ws.data(), 4, ws.size(), o);
    fwrite(wsb.data(), 4, wsb.size(), o);
    fclose(o);
    return 0;
}
"""


def _host_program(src: str) -> str:
    body = "\n".join(line for line in src.splitlines() if not line.startswith("#include"))
    return _HOST_SHIM + body + _HOST_MAIN


def _build(tmp_path: Path, src: str) -> Path:
    (tmp_path / "k.cpp").write_text(_host_program(src))
    exe = tmp_path / "k"
    r = subprocess.run(["g++", "-O1", "-std=c++20", "-pthread", "-o", str(exe), str(tmp_path / "k.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


# (B, M, N, P, density, dz_off, x_off): the skinny path (M = 3, 8) and the tile path (M = 9, 128, 130) with full and
# partial tiles, float4 and scalar loads (N % 4, M % 4, misaligned bases), chunks of several 256-row segments (P = 1,
# 2), empty chunks (P > B), no valid row, every row valid
HOST_CASES = [
    (600, 3, 128, 2, 0.05, 0, 0),
    (600, 128, 256, 1, 0.05, 0, 0),
    (530, 130, 129, 3, 0.3, 0, 0),
    (300, 9, 100, 2, 0.5, 0, 0),
    (40, 8, 129, 5, 0.3, 0, 1),
    (70, 128, 132, 4, 0.2, 1, 1),
    (5, 3, 128, 9, 1.0, 0, 0),
    (5, 130, 20, 9, 1.0, 0, 0),
    (300, 128, 256, 3, 0.0, 0, 0),
    (260, 3, 128, 1, 1.0, 1, 0),
    (513, 128, 128, 2, 1.0, 0, 0),
]


def _run_case(exe: Path, tmp_path: Path, B, M, N, P, density, dz_off, x_off, seed=0):
    rng = np.random.default_rng(seed + B * 7 + M * 131 + P)
    K = 3
    lab = _labels(rng, B, K, density)
    dz = rng.standard_normal((B, M)).astype(np.float32)
    x = rng.standard_normal((B, N)).astype(np.float32)
    skipped = ~((lab >= 0) & (lab < K))
    dz[skipped] = np.nan  # read a skipped row, and NaN lands in the output
    x[skipped] = np.nan
    inp, outp = tmp_path / f"in{B}_{M}_{N}_{P}.bin", tmp_path / f"out{B}_{M}_{N}_{P}.bin"
    inp.write_bytes(np.array([B, M, N, P, K, dz_off, x_off], np.int32).tobytes() + dz.tobytes() + x.tobytes() + lab.tobytes())
    subprocess.run([str(exe), str(inp), str(outp)], check=True, timeout=300)
    got = np.frombuffer(outp.read_bytes(), np.float32)
    ws, wsb = got[: P * M * N].reshape(P, M, N), got[P * M * N :].reshape(P, M)
    want = ref.aux_weight_grad_partial_masked(dz=dz, x=x, labels=lab, B=B, M=M, N=N, P=P, K=K)
    return ws, wsb, want


def _agrees(ws, wsb, want) -> bool:
    for got, w in ((ws, want["ws"]), (wsb, want["wsb"])):
        if not np.isfinite(got).all():
            return False
        scale = max(float(np.abs(w).max()), 1.0)
        if not np.allclose(got, w, rtol=1e-5, atol=1e-5 * scale):
            return False
    return True


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler (g++)")


@needs_gxx
def test_the_kernel_compiled_for_the_host_matches_the_reference(tmp_path):
    exe = _build(tmp_path, SOURCE.read_text())
    for case in HOST_CASES:
        ws, wsb, want = _run_case(exe, tmp_path, *case)
        assert _agrees(ws, wsb, want), (case, np.nanmax(np.abs(ws - want["ws"])), np.nanmax(np.abs(wsb - want["wsb"])))


# each a wrong index or bound of the compaction or the gather; every one must fail some host case
BROKEN = [
    ("ballot & ((1u << lane) - 1u)", "ballot & ((2u << lane) - 1u)"),   # a lane's slot counts itself
    ("for (int w = 0; w < warp; ++w) base", "for (int w = 0; w <= warp; ++w) base"),  # its own warp twice
    ("if (k0 + sk < nv) {", "if (k0 + sk <= nv) {"),                   # gathers one stale row past the list
    ("for (int i = lane; i < nv; i += kMkWarps)", "for (int i = lane; i < nv - 1; i += kMkWarps)"),  # skinny: drops the last
    ("const bool valid = r < rows && masked_label_valid", "const bool valid = r <= rows && masked_label_valid"),  # reads the next chunk's row
    ("return label >= 0 && label < K;", "return label != -1;"),         # reads the rows of out-of-range labels
]


@needs_gxx
@pytest.mark.parametrize("old, new", BROKEN)
def test_a_broken_compaction_fails_on_the_host(tmp_path, old, new):
    src = SOURCE.read_text()
    assert src.count(old) == 1, old
    exe = _build(tmp_path, src.replace(old, new))
    assert not all(_agrees(*_run_case(exe, tmp_path, *case)) for case in HOST_CASES)


# ---------------------------------------------------------------------------------------------------
# benchmarks/gpu_wgrad_masked.py (its GPU run: tests/gpu/test_wgrad_masked_gpu.py) on the CPU


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_masked

    return gpu_wgrad_masked


def test_the_benchmark_cases_cover_the_schedule_shapes_edges_and_densities(bench, cs):
    cases = bench.cases(cs)
    assert {(c["M"], c["N"]) for c in cases} == {(128, 256), (3, 128), (130, 129), (8, 129)}
    launched = set()
    for s in _steps(cs, "aux_heads_backward_fused"):
        if s.launch == NAME:
            dz, x = (cs.buffer_map[_bind(s, n)] for n in ("dz", "x"))
            launched.add((cs.fixed_env[dz.shape[1].text], cs.fixed_env[x.shape[1].text]))
    assert launched == set(bench.SCHEDULE_SHAPES)
    assert {c["B"] for c in cases} == {37, 4103, 65536} and {c["density"] for c in cases} == {0.0, 0.03, 1.0}
    assert {(c["B"], c["P"]) for c in cases} == {(37, 1), (37, 3), (4103, 1), (4103, 64), (65536, 1), (65536, 128)}
    assert sum(c["misaligned"] for c in cases) == 12 and len(cases) == 84


def test_the_benchmark_inputs_hide_nan_in_the_skipped_rows_only(bench):
    h = bench.host_inputs({"M": 3, "N": 5, "B": 4000, "P": 2, "density": 0.03, "misaligned": False})
    lab = h["labels"]
    valid = (lab >= 0) & (lab < 3)
    assert 0.01 < valid.mean() < 0.05 and {-2, 3, 7} <= set(lab.tolist()) and (lab == -1).any()
    assert np.isnan(h["dz_nan"][~valid]).all() and np.isnan(h["x_nan"][~valid]).all()
    assert np.isfinite(h["dz_nan"][valid]).all() and np.isfinite(h["x"]).all()
    assert not h["dz"][~valid].any() and np.array_equal(h["dz"][valid], h["dz_nan"][valid])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_benchmark_builds_both_kernels(bench, capsys):
    assert bench.main(["--cpu-check"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "built kernels/aux_weight_grad_masked_kernel.cu" in ln]
    assert "0 bytes spill stores" in line and "84 cases" in out


class _Timed:
    """A stream / event / graph stand-in: everything runs eagerly, every elapsed time is 10 us."""

    def __init__(self, *a, **k):
        pass

    def synchronize(self):
        pass

    def record(self, *a):
        pass

    def begin_capture(self):
        pass

    def end_capture(self):
        return self

    def upload(self, *a):
        pass

    def launch(self, *a):
        pass


def _fake_cupy(masked, dense):
    import types

    cp = types.ModuleType("cupy")
    cp.float32, cp.nan = np.float32, np.nan
    cp.empty, cp.asarray = np.empty, np.asarray
    cp.asnumpy = lambda a: np.array(a)

    class RawModule:
        def __init__(self, path):
            self.path = str(path)

        def get_function(self, name):
            return masked if name == NAME else dense

    cp.RawModule = RawModule
    cp.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)
    cp.cuda = types.SimpleNamespace(Stream=_Timed, Event=_Timed, get_elapsed_time=lambda a, b: 0.01)
    return cp


def _emulated_masked(reads_skipped: bool):
    """The masked kernel as its reference; ``reads_skipped``: the dense partial over every row (NaN from the skipped ones)."""

    def launch(grid, block, args, stream=None):
        dz, x, lab, ws, wsb, B, M, N, P, K = args
        B, M, N, P = int(B), int(M), int(N), int(P)
        if reads_skipped:
            r = ref.aux_weight_grad_partial(dz=dz.reshape(B, M), x=x.reshape(B, N), B=B, M=M, N=N, P=P)
        else:
            r = ref.aux_weight_grad_partial_masked(dz=dz.reshape(B, M), x=x.reshape(B, N), labels=lab, B=B, M=M, N=N, P=P, K=int(K))
        ws.reshape(-1)[...] = r["ws"].astype(np.float32).ravel()
        wsb.reshape(-1)[...] = r["wsb"].astype(np.float32).ravel()

    return launch


def _emulated_dense(grid, block, args, stream=None):
    dz, x, ws, wsb, B, M, N, P = args
    B, M, N, P = int(B), int(M), int(N), int(P)
    r = ref.aux_weight_grad_partial(dz=dz.reshape(B, M), x=x.reshape(B, N), B=B, M=M, N=N, P=P)
    ws.reshape(-1)[...] = r["ws"].astype(np.float32).ravel()
    wsb.reshape(-1)[...] = r["wsb"].astype(np.float32).ravel()


@pytest.mark.parametrize("reads_skipped", [False, True])
def test_the_benchmark_host_logic_fails_a_kernel_that_reads_skipped_rows(bench, monkeypatch, tmp_path, reads_skipped):
    import sys

    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(_emulated_masked(reads_skipped), _emulated_dense))
    monkeypatch.setattr(bench, "build", lambda out: {"masked": out / "m.cubin", "dense": out / "d.cubin"})
    monkeypatch.setattr(bench, "environment", lambda: {"device": "fake"})
    out = tmp_path / "r.json"
    code = bench.main(["--sizes", "37,300", "--time-sizes", "300", "--replays", "2", "--warmup", "1", "--json", str(out)])
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert len(rows) == 4 * 2 * 7  # four shapes, two sizes, P = WGP (3, 19) and 1 at 3 densities, one misaligned case
    assert all(r["dense_ok"] and r["deterministic"] for r in rows)
    assert [(t["M"], t["N"], t["B"]) for t in data["times"]] == [(128, 256, 300), (3, 128, 300)]
    assert all(t["masked_us"] > 0 and t["dense_us"] > 0 for t in data["times"])
    if reads_skipped:
        assert code == 1 and data["failures"] == sum(r["density"] < 1.0 for r in rows) and data["failures"] > 0
    else:
        assert code == 0 and data["failures"] == 0 and all(r["ok"] for r in rows)
