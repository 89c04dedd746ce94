"""benchmarks/gpu_wgrad_tc.py off the GPU: the cases it measures come from the contracts (every (M, N) a
schedule launches the shipped weight-gradient reduction aux_weight_grad_partial with, then its verify bindings) and the new kernel's launch
geometry from the contract's expressions; its host logic (comparisons, determinism, verdicts, JSON, exit
status) runs end to end against numpy stand-ins for CuPy and torch, and a wrong kernel is reported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from audit.load import load_contracts

REPO = Path(__file__).resolve().parents[1]


def test_cases_and_geometry_come_from_the_contracts(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_tc as bench

    cs = load_contracts(REPO / "contracts", REPO)
    shapes = bench.shapes_of(cs)
    # the launches of the partial contracts (the CUTLASS one at M = 256 and 128, the masked one at 128 and 3, the
    # skinny one at 1), then the CUTLASS and skinny partials' bindings
    assert [(s.M, s.N) for s in shapes] == [(256, 256), (128, 256), (3, 128), (1, 128), (8, 129), (9, 100), (130, 129), (4, 100), (132, 260)]
    assert [s.origin for s in shapes][:4] == [f"schedule aux_heads_backward_fused step {i}" for i in (4, 6, 8, 12)]
    assert [s.launches for s in shapes] == [1, 2, 1, 1, 0, 0, 0, 0, 0]
    assert {s.origin for s in shapes[4:]} == {"[kernel.verify] bindings"}
    # the tensor-core experiment keeps the cluster SIMT kernel's geometry (benchmarks/kernels_baseline)
    for s in shapes:
        for B in (1, 4103, 65536):
            assert bench.new_geometry(cs, B, s.M, s.N) == bench.old_geometry(B, s.M, s.N)
    assert bench.new_geometry(cs, 65536, 130, 129) == ((5, 3, 8), (256, 1, 1))
    assert bench.alt_geometry(65536, 130, 129) == ((3, 3, 8), (256, 1, 1))
    tol = bench.tolerance(cs)
    assert (tol.rtol, tol.atol, tol.rtol_elem) == (1e-5, 1e-5, 1e-4)


# -- the host logic end to end, with numpy stand-ins for CuPy and torch ---------------------------------


class _Timed:
    """A stream / event / graph stand-in: everything runs eagerly, every elapsed time is 10 us."""

    def __init__(self, *a, **k):
        self.ops = None

    def synchronize(self):
        pass

    def record(self, *a):
        pass

    def elapsed_time(self, other):  # torch: ms
        return 0.01

    def begin_capture(self):
        pass

    def end_capture(self):
        return self

    def upload(self, *a):
        pass

    def launch(self, *a):
        pass

    def replay(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _fake_cupy(kernels):
    import types

    import numpy as np

    cp = types.ModuleType("cupy")
    cp.__version__ = "fake"
    cp.float32, cp.float64, cp.nan = np.float32, np.float64, np.nan
    cp.empty = np.empty
    cp.asnumpy = lambda a: np.array(a)

    class RandomState:
        def __init__(self, seed):
            self.rng = np.random.default_rng(seed)

        def standard_normal(self, shape, dtype):
            return self.rng.standard_normal(shape).astype(dtype)

    cp.random = types.SimpleNamespace(RandomState=RandomState)

    class RawModule:
        def __init__(self, path):
            self.path = path

        def get_function(self, name):
            return kernels[(self.path, name)]

    cp.RawModule = RawModule
    cp.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)
    cp.cuda = types.SimpleNamespace(Stream=_Timed, Event=_Timed, get_elapsed_time=lambda a, b: 0.01,
                                    Device=lambda *a: types.SimpleNamespace(synchronize=lambda: None))
    return cp


def _fake_torch():
    import types

    import numpy as np

    class T:
        def __init__(self, a):
            self.a = a

        def t(self):
            return T(self.a.T)

        def cpu(self):
            return self

        def numpy(self):
            return self.a

    def mm(a, b, out=None):
        r = (a.a.astype(np.float32) @ b.a.astype(np.float32)).astype(np.float32)
        if out is None:
            return T(r)
        out.a[...] = r
        return out

    torch = types.ModuleType("torch")
    torch.__version__ = "fake"
    torch.float32 = np.float32
    torch.as_tensor = lambda a, device=None: T(a)
    torch.empty = lambda shape, dtype=None, device=None: T(np.empty(shape, dtype))
    torch.mm = mm
    torch.set_float32_matmul_precision = lambda p: None
    torch.backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace()), cudnn=types.SimpleNamespace())
    torch.cuda = types.SimpleNamespace(Stream=_Timed, stream=lambda s: s, synchronize=lambda: None, CUDAGraph=_Timed,
                                       graph=lambda g: g, Event=_Timed, empty_cache=lambda: None,
                                       get_device_properties=lambda i: types.SimpleNamespace(name="fake", multi_processor_count=1))
    return torch


def _kernel(wrong: bool):
    """dW = dz^T x on the host (float64 then float32); ``wrong`` puts 1 into dW[0, 0] at B = 300."""
    import numpy as np

    def launch(grid, block, args, stream=None):
        dz, x, dW, B, M, N = args
        dW[...] = (dz.astype(np.float64).T @ x.astype(np.float64)).astype(np.float32)
        if wrong and int(B) == 300:
            dW[0, 0] += 1.0

    return launch


def test_host_logic_reports_a_wrong_new_kernel_and_only_it(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_tc as bench

    for wrong, code_want in ((False, 0), (True, 1)):
        kernels = {("n", bench.KERNEL): _kernel(wrong), ("o", bench.KERNEL): _kernel(False), ("a", bench.ALT_ENTRY): _kernel(False)}
        monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(kernels))
        monkeypatch.setitem(sys.modules, "torch", _fake_torch())
        monkeypatch.setattr(bench, "build", lambda out_dir, cs: {"new": Path("n"), "old": Path("o"), "alt": Path("a")})
        out = tmp_path / f"r{int(wrong)}.json"
        code = bench.main(["--sizes", "1,300", "--replays", "3", "--warmup", "1", "--json", str(out)])
        data = json.loads(out.read_text())
        assert code == code_want and data["new_kernel_ok"] is (not wrong)
        rows = {(r["M"], r["N"], r["B"]): r for r in data["rows"]}
        assert len(rows) == 18 and all("error" not in r for r in rows.values())
        bad = sorted(k for k, r in rows.items() if not r["new"]["ok"])
        assert bad == (sorted((M, N, 300) for M, N in [(256, 256), (128, 256), (3, 128), (1, 128), (8, 129), (9, 100), (130, 129), (4, 100), (132, 260)]) if wrong else [])
        assert not wrong or rows[(256, 256, 300)]["new"]["status"] == "mismatch"
        assert all(r["new"]["deterministic"] and r["old"]["ok"] and r["alt"]["ok"] and r["torch_fp32"]["ok"] for r in rows.values())
        assert rows[(256, 256, 1)]["new"]["time"]["median_us"] == pytest.approx(10.0 / rows[(256, 256, 1)]["new"]["rep"])
        # the step total counts 128x256 twice (the fused backward launches it for both heads)
        assert data["step_totals_us"]["launches"] == 5
