"""A 3xTF32 tensor-core version of the weight-gradient reduction ``aux_weight_grad_reduce`` against the
shipped SIMT kernel and ``torch.mm`` on an H200: accuracy, determinism and time, in ONE process.

The tensor-core version (``benchmarks/kernels_baseline/aux_param_grad_reduce_kernel_tc.cu``, the same
file as the shipped one with the M > 8 path on ``mma.sync.m16n8k8`` tf32) is an experiment: on the H200
on 4 December 2026 it first failed the contract's tolerance at B = 65536 (relative error 1.4e-5 against the
SIMT kernel's 1.2e-6: the tensor cores' own rounding of the running sum). Since each k8 step's products
are summed in a zero fragment and added with round-to-nearest adds, it passes everywhere (3.1e-7 at
65536, below SIMT and torch fp32), at about the cluster kernel's speed (docs/benchmarks.md section 4a).

    dW[m, n] = sum_b dz[b, m] * x[b, n]        dz [B, M], x [B, N], dW [M, N]

Cases: every (M, N) the shipped schedules launch the kernel with (resolved from the contracts with
``audit.load`` + ``audit.graph.Wiring``, as ``gpu_chain_vs_torch.py`` does) plus the contract's
``[kernel.verify] bindings``, each at B = 1, 37, 300, 4096, 4103, 65536 (``--sizes``).

Per case:

1. **Accuracy**: dz and x are float32 standard normal (seeded); the reference is ``dz^T x`` in float64
   (CuPy). The new kernel (the experiment), the old one (the shipped SIMT kernel,
   ``kernels/aux_param_grad_reduce_kernel.cu``), an experimental variant of the new one with a 64 x 64 tile
   (``benchmarks/kernels_baseline/aux_weight_grad_reduce_tc64.cu``, grid (ceil_div(N, 64),
   ceil_div(M, 64), 8): half the operand traffic per FLOP, half the blocks; "alt" below, for the record
   only, it decides nothing) and ``torch.mm(dz.T, x)`` in float32 with TF32 off are each compared with it: relative error norm ``||out - ref|| / ||ref||``, max abs error, and the verdict of
   ``audit.runtime._compare.compare`` under the contract's tolerance (``[kernel.verify] rtol/atol``,
   the defaults otherwise), the same comparison ``wireup verify`` makes. The output is poisoned with
   NaN before each checked launch, so an unwritten element shows.
2. **Determinism**: the new kernel runs 3 times on the same inputs; the outputs must be bit-identical.
   (The old kernel is checked the same way, for the record.)
3. **Time**: each variant is captured into a CUDA graph of ``rep`` back-to-back launches (``rep`` so
   that one replay takes >= ~50 us; no launch gaps inside), replayed after ``--warmup`` replays; CUDA
   events around each replay; median (min-max) of ``--replays`` replays, divided by ``rep``. Inputs
   stay the same between replays (at B = 65536, dz and x are 2 x 64 MiB, larger than the 50 MB L2; at
   small B they are L2-resident, for every variant alike).

Grid and block of the new kernel come from the contract's expressions; the old kernel's are its own
(grid (ceil_div(N, 32), ceil_div(M, 64), 8), block 256). Both cubins are built with
``nvcc -arch=sm_90 -cubin -O3 -std=c++17 -lineinfo -I kernels``.

Prints a table and writes ``$OUT/gpu_wgrad_tc.json`` (``--json PATH`` otherwise). Exit status 1 when the
new kernel fails a tolerance, determinism or writes no value somewhere; 0 otherwise.

    python3 benchmarks/gpu_wgrad_tc.py              # on the H200 (CuPy + torch), ~1 minute
    python3 benchmarks/gpu_wgrad_tc.py --cpu-check  # here, no GPU: the cases, grids and both nvcc builds
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from audit.graph import Wiring  # noqa: E402
from audit.load import load_contracts  # noqa: E402
from audit.runtime._compare import Tolerance, compare  # noqa: E402

KERNEL = "aux_weight_grad_reduce"  # the entry of the cluster kernel and of the experiment
# the shipped kernels whose launches and bindings give the cases: the partial of the fused path's reductions, its
# wide gradients on the CUTLASS kernel, the next-bar head's skinny one (M = KNB = 1) on the SIMT kernel (since
# 5 December 2026)
SCHEDULED = ("aux_weight_grad_partial", "aux_weight_grad_partial_skinny")
MASKED = "aux_weight_grad_partial_masked"  # the fused schedule's trade-outcome head steps: their shapes are cases too
NEW_SOURCE = "benchmarks/kernels_baseline/aux_param_grad_reduce_kernel_tc.cu"  # the experiment ("new")
OLD_SOURCE = "benchmarks/kernels_baseline/aux_weight_grad_reduce_cluster.cu"  # the cluster SIMT kernel, shipped until 4 December ("old")
ALT_SOURCE = "benchmarks/kernels_baseline/aux_weight_grad_reduce_tc64.cu"
ALT_ENTRY = "aux_weight_grad_reduce_tc64"
FUSED = "aux_heads_backward_fused"
SIZES = (1, 37, 300, 4096, 4103, 65536)
NVCC = ["nvcc", "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "-lineinfo", "-I", "kernels"]
_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f} s] {msg}", flush=True)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------------------------
# the cases, from the contracts


@dataclasses.dataclass(frozen=True)
class Shape:
    M: int
    N: int
    origin: str  # "schedule <name> step <i>" (the first launch) or "[kernel.verify] bindings"
    launches: int = 0  # launches with this (M, N) in the fused backward schedule


def contracts_at(cs, B: int):
    """A copy of the contract set with the runtime dim ``B`` fixed (its one probe env is the run's)."""
    dims = tuple(dataclasses.replace(d, kind="fixed", value=B, min=None, max=None) if d.name == "B" else d for d in cs.dims)
    return dataclasses.replace(cs, dims=dims)


def shapes_of(cs) -> list[Shape]:
    """Every (M, N) a schedule launches the kernel (or its masked variant: the trade-outcome head's two reductions,
    whose dense cost is the baseline here) with, then the contract's verify bindings (deduplicated, in order)."""
    csB = contracts_at(cs, 256)
    wiring = Wiring(csB)
    seen: dict[tuple[int, int], Shape] = {}
    for sched in csB.schedules:
        for launch in wiring.launches[sched.name]:
            if launch.kernel is None or launch.kernel.name not in (*SCHEDULED, MASKED):
                continue
            env = launch.envs[0]
            key = (int(env["M"]), int(env["N"]))
            first = seen.setdefault(key, Shape(*key, f"schedule {sched.name} step {launch.step.index + 1}"))
            if sched.name == FUSED:
                seen[key] = dataclasses.replace(first, launches=first.launches + 1)
    for name in SCHEDULED:
        k = cs.kernel_map[name]
        for binding in k.verify.bindings if k.verify is not None else ():
            b = dict(binding)
            key = (int(b["M"]), int(b["N"]))
            seen.setdefault(key, Shape(*key, "[kernel.verify] bindings"))
    return list(seen.values())


def new_geometry(cs, B: int, M: int, N: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:  # noqa: ARG001
    """The experiment keeps the cluster kernel's launch: grid (ceil_div(N, 32), ceil_div(M, 64), 8), block 256."""
    return old_geometry(B, M, N)


def old_geometry(B: int, M: int, N: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:  # noqa: ARG001
    """The SIMT kernel's own launch (its contract at 7959a4e): grid (ceil_div(N, 32), ceil_div(M, 64), 8)."""
    return (ceil_div(N, 32), ceil_div(M, 64), 8), (256, 1, 1)


def alt_geometry(B: int, M: int, N: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:  # noqa: ARG001
    """The 64 x 64 tile experiment: grid (ceil_div(N, 64), ceil_div(M, 64), 8)."""
    return (ceil_div(N, 64), ceil_div(M, 64), 8), (256, 1, 1)


VARIANTS = ("new", "old", "alt")


def tolerance(cs) -> Tolerance:
    k = cs.kernel_map["aux_weight_grad_finish"]  # the shipped reduction's output kernel (default tolerance)
    v = k.verify
    return Tolerance.of(v.rtol if v is not None else None, v.atol if v is not None else None)


def build(out_dir: Path, cs) -> dict[str, Path]:
    """nvcc the three sources; {"new": cubin, "old": cubin, "alt": cubin}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = {"new": NEW_SOURCE, "old": OLD_SOURCE, "alt": ALT_SOURCE}
    cubins = {}
    procs = {}
    for tag, src in sources.items():
        cubin = out_dir / f"{tag}_{Path(src).stem}.cubin"
        procs[tag] = (subprocess.Popen([*NVCC, "-Xptxas", "-v", "-o", str(cubin), src], cwd=REPO, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True), cubin, src)
    for tag, (p, cubin, src) in procs.items():
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"nvcc failed on {src}: {err.strip()[-800:]}")
        regs = [ln.strip() for ln in (out + err).splitlines() if "registers" in ln]
        log(f"built {src}: {'; '.join(regs)}")
        cubins[tag] = cubin
    return cubins


# ---------------------------------------------------------------------------------------------------
# on the GPU


def stats(us: list[float]) -> dict:
    return {"median_us": statistics.median(us), "min_us": min(us), "max_us": max(us), "n": len(us)}


def graph_time(cp, stream, enqueue, per_launch_hint_us: float, warmup: int, replays: int,
               replay_us: float = 50.0) -> tuple[dict, int]:
    """``enqueue`` captured ``rep`` times into one CUDA graph on ``stream`` (``rep`` so that one replay takes
    about ``replay_us``; no launch gaps inside), replayed after ``warmup`` replays; CUDA events around each
    of ``replays`` replays: per-launch microseconds, and ``rep``."""
    rep = max(1, min(256, int(replay_us / max(per_launch_hint_us, 0.5))))
    stream.begin_capture()
    try:
        for _ in range(rep):
            enqueue()
    finally:
        graph = stream.end_capture()
    graph.upload(stream)
    for _ in range(warmup):
        graph.launch(stream)
    stream.synchronize()
    ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(replays)]
    for a, b in ev:
        a.record(stream)
        graph.launch(stream)
        b.record(stream)
    stream.synchronize()
    return stats([cp.cuda.get_elapsed_time(a, b) * 1000.0 / rep for a, b in ev]), rep


def torch_graph_time(torch, fn, per_launch_hint_us: float, warmup: int, replays: int, replay_us: float = 50.0) -> tuple[dict, int]:
    """``fn()`` captured ``rep`` times into a torch CUDA graph, timed as ``graph_time`` times a kernel."""
    rep = max(1, min(256, int(replay_us / max(per_launch_hint_us, 0.5))))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # warm-up (cuBLAS workspace, heuristics) before capture
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(rep):
            fn()
    for _ in range(warmup):
        g.replay()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for a, b in ev:
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    return stats([a.elapsed_time(b) * 1000.0 / rep for a, b in ev]), rep


def torch_mm_time(torch, dzt, xt, outt, per_launch_hint_us: float, warmup: int, replays: int,
                  replay_us: float = 50.0) -> tuple[dict, int]:
    """``torch.mm(dzt.T, xt, out=outt)`` timed as ``graph_time`` times a kernel, from a torch CUDA graph."""
    return torch_graph_time(torch, lambda: torch.mm(dzt.t(), xt, out=outt), per_launch_hint_us, warmup, replays, replay_us)


class Runner:
    def __init__(self, cs, cubins: dict[str, Path], args):
        import cupy as cp
        import torch

        self.cp, self.torch = cp, torch
        self.cs = cs
        self.args = args
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.fn = {}
        for tag, cubin in cubins.items():
            mod = cp.RawModule(path=str(cubin))
            fn = mod.get_function(ALT_ENTRY if tag == "alt" else KERNEL)
            getattr(fn, "kernel", None)  # load the module now, outside any capture
            self.fn[tag] = fn
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.tol = tolerance(cs)

    def launch(self, tag: str, dz, x, dW, B: int, M: int, N: int) -> None:
        grid, block = {"new": lambda: new_geometry(self.cs, B, M, N), "old": lambda: old_geometry(B, M, N),
                       "alt": lambda: alt_geometry(B, M, N)}[tag]()
        self.fn[tag](grid, block, (dz, x, dW, np.int32(B), np.int32(M), np.int32(N)), stream=self.stream)

    def checked(self, tag: str, dz, x, dW, B, M, N):
        """One launch into a NaN-poisoned dW; the host copy of dW."""
        cp = self.cp
        dW.fill(cp.nan)
        cp.cuda.Device().synchronize()
        self.launch(tag, dz, x, dW, B, M, N)
        self.stream.synchronize()
        return cp.asnumpy(dW)

    def time_graph(self, enqueue, per_launch_hint_us: float) -> tuple[dict, int]:
        """Graph of ``rep`` launches, replayed; per-launch microseconds."""
        return graph_time(self.cp, self.stream, enqueue, per_launch_hint_us, self.args.warmup, self.args.replays)

    def time_torch(self, dzt, xt, outt, per_launch_hint_us: float) -> tuple[dict, int]:
        return torch_mm_time(self.torch, dzt, xt, outt, per_launch_hint_us, self.args.warmup, self.args.replays)

    def case(self, shape: Shape, B: int, seed: int) -> dict:
        cp, torch = self.cp, self.torch
        M, N = shape.M, shape.N
        rs = cp.random.RandomState(seed)
        dz = rs.standard_normal((B, M), dtype=cp.float32)
        x = rs.standard_normal((B, N), dtype=cp.float32)
        ref = cp.asnumpy(dz.astype(cp.float64).T @ x.astype(cp.float64))
        dW = cp.empty((M, N), dtype=cp.float32)
        row: dict = {"M": M, "N": N, "B": B, "origin": shape.origin, "launches": shape.launches, "grid_new": list(new_geometry(self.cs, B, M, N)[0]),
                     "flop": 2.0 * B * M * N}

        def accuracy(out: np.ndarray) -> dict:
            c = compare(out, ref, self.tol)
            return {"status": c.status, "rel_norm": float(c.rel_norm), "max_abs": float(c.max_abs), "max_rel": float(c.max_rel),
                    "n_bad": int(c.n_bad), "ok": bool(c.ok), "detail": c.detail}

        for tag in VARIANTS:
            outs = [self.checked(tag, dz, x, dW, B, M, N) for _ in range(3)]
            acc = accuracy(outs[0])
            acc["deterministic"] = all(np.array_equal(outs[0].view(np.uint32), o.view(np.uint32)) for o in outs[1:])
            row[tag] = acc
        row["new_vs_old_max_abs"] = float(np.max(np.abs(self.checked("new", dz, x, dW, B, M, N) - self.checked("old", dz, x, dW, B, M, N))))

        dzt = torch.as_tensor(dz, device="cuda")
        xt = torch.as_tensor(x, device="cuda")
        outt = torch.empty((M, N), dtype=torch.float32, device="cuda")
        torch.mm(dzt.t(), xt, out=outt)
        torch.cuda.synchronize()
        row["torch_fp32"] = accuracy(outt.cpu().numpy())

        hint = 2.0 * B * M * N / 20e12 * 1e6 + 3.0  # ~20 TFLOP/s + 3 us, only to size the graph
        for tag in VARIANTS:
            row[tag]["time"], row[tag]["rep"] = self.time_graph(lambda t=tag: self.launch(t, dz, x, dW, B, M, N), hint)
        row["torch_fp32"]["time"], row["torch_fp32"]["rep"] = self.time_torch(dzt, xt, outt, hint)
        for tag in (*VARIANTS, "torch_fp32"):
            t = row[tag]["time"]["median_us"]
            row[tag]["tflops"] = row["flop"] / (t * 1e-6) / 1e12 if t > 0 else None
        row["speedup_vs_old"] = row["old"]["time"]["median_us"] / row["new"]["time"]["median_us"]
        row["speedup_vs_torch"] = row["torch_fp32"]["time"]["median_us"] / row["new"]["time"]["median_us"]
        row["alt_vs_new"] = row["new"]["time"]["median_us"] / row["alt"]["time"]["median_us"]
        return row

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()
        self.torch.cuda.empty_cache()


def environment() -> dict:
    info: dict = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        import cupy as cp
        import torch

        info["cupy"] = cp.__version__
        info["torch"] = torch.__version__
        p = torch.cuda.get_device_properties(0)
        info["device"] = p.name
        info["sm_count"] = p.multi_processor_count
    except Exception as exc:  # noqa: BLE001
        info["error"] = repr(exc)
    for key, cmd in (("nvidia_smi", ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm", "--format=csv,noheader"]),
                     ("nvcc", ["nvcc", "--version"])):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            info[key] = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr.strip()[-200:]
        except Exception as exc:  # noqa: BLE001
            info[key] = repr(exc)
    return info


def print_table(rows: list[dict], tol: Tolerance) -> None:
    print()
    print(f"aux_weight_grad_reduce: 3xTF32 (new) vs SIMT (old) vs torch.mm fp32 (TF32 off); tolerance rtol {tol.rtol:g}, "
          f"atol {tol.atol:g} x max|ref|, rtol_elem {tol.rtol_elem:g}; times: median us per launch")
    hdr = (f"{'M':>4} {'N':>4} {'B':>6} | {'new us':>9} {'old us':>9} {'torch us':>9} {'alt us':>9} | {'x old':>6} {'x torch':>7} | "
           f"{'new TF/s':>8} | {'rel new':>8} {'rel old':>8} {'rel torch':>9} {'rel alt':>8} | {'max|e| new':>10} {'old':>9} "
           f"{'torch':>9} | verdict (alt)")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        if "error" in r:
            print(f"{r['M']:>4} {r['N']:>4} {r['B']:>6} | ERROR {r['error']}")
            continue
        n, o, t, a = r["new"], r["old"], r["torch_fp32"], r["alt"]
        verdict = "ok" if n["ok"] and n["deterministic"] else (
            ("FAIL " + n["status"]) if not n["ok"] else "FAIL nondeterministic")
        alt = "ok" if a["ok"] and a["deterministic"] else "FAIL"
        print(f"{r['M']:>4} {r['N']:>4} {r['B']:>6} | {n['time']['median_us']:>9.2f} {o['time']['median_us']:>9.2f} "
              f"{t['time']['median_us']:>9.2f} {a['time']['median_us']:>9.2f} | {r['speedup_vs_old']:>6.2f} {r['speedup_vs_torch']:>7.2f} | "
              f"{(n['tflops'] or 0):>8.2f} | {n['rel_norm']:>8.1e} {o['rel_norm']:>8.1e} {t['rel_norm']:>9.1e} {a['rel_norm']:>8.1e} | "
              f"{n['max_abs']:>10.2e} {o['max_abs']:>9.2e} {t['max_abs']:>9.2e} | {verdict} ({alt})")


def cpu_check(cs) -> int:
    """No GPU: the cases and grids from the contracts, and both nvcc builds."""
    shapes = shapes_of(cs)
    for s in shapes:
        print(f"M={s.M:<4} N={s.N:<4} ({s.origin}): new grid at B=65536 {new_geometry(cs, 65536, s.M, s.N)[0]}, "
              f"old grid {old_geometry(65536, s.M, s.N)[0]}, alt grid {alt_geometry(65536, s.M, s.N)[0]}")
    print(f"tolerance: {tolerance(cs)}")
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), cs)
    print(f"{len(shapes)} shapes x {len(SIZES)} batch sizes; nvcc built the three sources")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=list(SIZES))
    ap.add_argument("--replays", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", default=None, help="result path (default $OUT/gpu_wgrad_tc.json when $OUT is set)")
    ap.add_argument("--cpu-check", action="store_true")
    args = ap.parse_args(argv)
    cs = load_contracts(REPO / "contracts", REPO)
    if args.cpu_check:
        return cpu_check(cs)

    shapes = shapes_of(cs)
    log(f"{len(shapes)} shapes: " + ", ".join(f"{s.M}x{s.N}" for s in shapes) + f"; B = {args.sizes}")
    tmp = Path(tempfile.mkdtemp(prefix="wgrad_tc_"))
    cubins = build(tmp, cs)
    runner = Runner(cs, cubins, args)
    results: dict = {"environment": environment(), "kernel": KERNEL, "old_source": OLD_SOURCE,
                     "tolerance": dataclasses.asdict(runner.tol), "replays": args.replays, "warmup": args.warmup, "rows": []}
    for i, shape in enumerate(shapes):
        for B in args.sizes:
            try:
                row = runner.case(shape, B, args.seed + 1000 * i + B)
            except Exception as exc:  # noqa: BLE001 - report the case and go on
                row = {"M": shape.M, "N": shape.N, "B": B, "error": f"{type(exc).__name__}: {exc}"}
            runner.release()
            results["rows"].append(row)
            if "error" in row:
                log(f"M={shape.M} N={shape.N} B={B}: {row['error']}")
            else:
                log(f"M={shape.M} N={shape.N} B={B}: new {row['new']['time']['median_us']:.2f} us "
                    f"(rel {row['new']['rel_norm']:.1e}, {row['new']['status']}, deterministic {row['new']['deterministic']}), "
                    f"old {row['old']['time']['median_us']:.2f} us, alt {row['alt']['time']['median_us']:.2f} us "
                    f"({row['alt']['status']}), torch {row['torch_fp32']['time']['median_us']:.2f} us")
    rows = results["rows"]
    bad = [r for r in rows if "error" in r or not (r["new"]["ok"] and r["new"]["deterministic"])]
    results["new_kernel_ok"] = not bad
    big = [r for r in rows if "error" not in r and r["B"] == max(args.sizes) and r["launches"]]
    if big:  # the fused backward's launches of the kernel at the largest B, each (M, N) as often as it is launched
        results["step_totals_us"] = {"B": max(args.sizes), "launches": sum(r["launches"] for r in big)} | {
            tag: sum(r["launches"] * r[tag]["time"]["median_us"] for r in big) for tag in (*VARIANTS, "torch_fp32")}
    path = args.json or (str(Path(os.environ["OUT"]) / "gpu_wgrad_tc.json") if os.environ.get("OUT") else None)
    if path:
        Path(path).write_text(json.dumps(results, indent=1, default=str))
        log(f"wrote {path}")
    print_table(rows, runner.tol)
    if big:
        tot = results["step_totals_us"]
        print(f"\nat B = {tot['B']}, the fused backward's {tot['launches']} launches of the kernel: new {tot['new']:.1f} us, "
              f"old {tot['old']:.1f} us, alt {tot['alt']:.1f} us, torch.mm {tot['torch_fp32']:.1f} us")
    print(f"\nnew kernel: {'every case within tolerance and bit-deterministic' if not bad else f'{len(bad)} case(s) FAILED'}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
