"""The fused path's weight-gradient reduction split over P batch chunks through a workspace (issue 18),
against the one-launch cluster kernel it replaced and ``torch.mm`` on an H200: accuracy, determinism, time.

    ws[p], wsb[p] = dz[chunk p]^T x[chunk p], dz[chunk p] summed   (aux_weight_grad_partial)
    dW, db        = sum_p ws[p], sum_p wsb[p], in order           (aux_weight_grad_finish)

Source: ``kernels/aux_weight_grad_split_kernel.cu`` (its partial is shipped as ``aux_weight_grad_partial_skinny`` for
M = 1; for M = 256 and 128 the contract ``aux_weight_grad_partial`` launches the CUTLASS partial, tag
"cutlass" below, since 5 December; "split" is the SIMT partial at every M); the cluster kernel shipped until 4 December
is ``benchmarks/kernels_baseline/aux_weight_grad_reduce_cluster.cu`` ("old"). P = the contract's WGP unless
``--splits`` is given; "contract P" in the output is WGP at that B. Cases: the (M, N) of the shipped schedules and the
contract's verify bindings (``gpu_wgrad_tc.shapes_of``), at ``--sizes``; P from ``--splits`` (values above B
are skipped). Accuracy is the comparison ``wireup verify`` makes (``audit.runtime._compare``) against
float64, with the workspace and dW poisoned with NaN first; determinism: 3 runs bit-identical. Time: a
CUDA graph of back-to-back (partial, finish) pairs, median of ``--replays`` replays.

Tensor-core candidates for the partial's M > 8 path, each with the shipped finish at the contract's P,
checked and timed like the shipped kernel (same launch and ABI): ``--tc-source`` (``aux_weight_grad_partial_tc``,
hand-written 3xTF32, tag "tc") and ``--cutlass-source`` (``aux_weight_grad_partial_cutlass``, a CUTLASS 2.x
3xTF32 GEMM, tag "cutlass"). The CUTLASS build needs its headers: ``$CUTLASS_INCLUDE`` when set (the
folder holding ``cutlass/`` and ``cute/``), the ``nvidia-cutlass`` wheel's ``cutlass_library/source/include``
otherwise (``pip install --no-deps nvidia-cutlass==4.2.0.0``).

    python3 benchmarks/gpu_wgrad_split.py              # on the H200, ~1-2 minutes
    python3 benchmarks/gpu_wgrad_split.py --cpu-check  # here: the cases and the nvcc build
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_wgrad_tc import (  # noqa: E402
    KERNEL, NVCC, OLD_SOURCE, REPO, ceil_div, environment, graph_time, log, shapes_of, tolerance, torch_mm_time,
)

from audit.load import load_contracts  # noqa: E402
from audit.runtime._compare import compare  # noqa: E402

SOURCE = "kernels/aux_weight_grad_split_kernel.cu"


CUTLASS_PIP = "pip install --no-deps nvidia-cutlass==4.2.0.0"
# The candidates' tags and entry points ("split" and "old" are the shipped and the cluster kernel).
CANDIDATES = {"tc": "aux_weight_grad_partial_tc", "cutlass": "aux_weight_grad_partial_cutlass"}


class SetupError(Exception):
    """Something the run needs is missing on this machine (reported in one line, exit status 2)."""


def cutlass_include() -> Path:
    """The CUTLASS include folder: ``$CUTLASS_INCLUDE`` when set, else the nvidia-cutlass wheel's headers."""
    env = os.environ.get("CUTLASS_INCLUDE")
    if env:
        inc = Path(env)
        origin = f"CUTLASS_INCLUDE={env}"
    else:
        import importlib.util

        spec = importlib.util.find_spec("cutlass_library")
        if spec is None or not spec.submodule_search_locations:
            raise SetupError(f"the CUTLASS headers are not installed: run `{CUTLASS_PIP}` or set CUTLASS_INCLUDE to the folder holding cutlass/cutlass.h")
        inc = Path(next(iter(spec.submodule_search_locations))) / "source" / "include"
        origin = f"the cutlass_library package ({inc})"
    if not (inc / "cutlass" / "cutlass.h").is_file():
        raise SetupError(f"{origin}: expected cutlass/cutlass.h under {inc}, found none (`{CUTLASS_PIP}` installs them)")
    return inc


def nvcc_command(src: str, cubin: Path, tag: str) -> list[str]:
    """The nvcc line for one source; the CUTLASS candidate adds the baseline folder and the CUTLASS headers."""
    extra = ["-I", "benchmarks/kernels_baseline", "-isystem", str(cutlass_include())] if tag == "cutlass" else []
    return [*NVCC, *extra, "-Xptxas", "-v", "-o", str(cubin), src]


def build(out: Path, tc_source: str | None = None, cutlass_source: str | None = None) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    cubins = {}
    sources = [("split", SOURCE), ("old", OLD_SOURCE)]  # OLD_SOURCE: the cluster kernel
    if tc_source:
        sources.append(("tc", tc_source))
    if cutlass_source:
        sources.append(("cutlass", cutlass_source))
    for tag, src in sources:
        cubin = out / f"{tag}.cubin"
        r = subprocess.run(nvcc_command(src, cubin, tag), cwd=REPO, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed on {src}: {r.stderr.strip()[-800:]}")
        log(f"built {src}: " + "; ".join(ln.strip() for ln in (r.stdout + r.stderr).splitlines() if "registers" in ln or "spill" in ln))
        cubins[tag] = cubin
    return cubins


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,37,256,300,4096,4103,65536")
    ap.add_argument("--time-sizes", default="256,4096,65536")
    ap.add_argument("--splits", default="", help="comma-separated P values to sweep besides the contract's WGP")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--cpu-check", action="store_true")
    ap.add_argument("--tc-source", default=None, metavar="CU",
                    help="also measure an experimental aux_weight_grad_partial_tc (same launch) for M > 8, with the shipped finish, "
                         "at the contract's P (e.g. benchmarks/kernels_baseline/aux_weight_grad_partial_tc.cu)")
    ap.add_argument("--cutlass-source", default=None, metavar="CU",
                    help="the same for a CUTLASS aux_weight_grad_partial_cutlass (tag cutlass; headers from $CUTLASS_INCLUDE or the "
                         "nvidia-cutlass wheel), e.g. kernels/aux_weight_grad_partial_cutlass.cu")
    args = ap.parse_args(argv)
    cs = load_contracts(REPO / "contracts")
    shapes = shapes_of(cs)
    sizes = [int(s) for s in args.sizes.split(",")]
    tsizes = {int(s) for s in args.time_sizes.split(",")}
    wgp_expr = cs.dim_map["WGP"].expr

    def wgp(B: int) -> int:
        return int(wgp_expr.evaluate({"B": B}, cs.slot_indices))

    splits_arg = [int(s) for s in args.splits.split(",")] if args.splits else []
    log("shapes: " + ", ".join(f"{s.M}x{s.N} ({s.origin}, {s.launches} fused launches)" for s in shapes))
    if args.cutlass_source:
        try:
            log(f"CUTLASS headers: {cutlass_include()}")
        except SetupError as e:
            print(f"gpu_wgrad_split.py: {e}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp:
        cubins = build(Path(tmp), tc_source=args.tc_source, cutlass_source=args.cutlass_source)
        if args.cpu_check:
            return 0
        import cupy as cp
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        mod = cp.RawModule(path=str(cubins["split"]))
        part, fin = mod.get_function("aux_weight_grad_partial"), mod.get_function("aux_weight_grad_finish")
        old = cp.RawModule(path=str(cubins["old"])).get_function(KERNEL)
        candidates = {tag: cp.RawModule(path=str(cubins[tag])).get_function(entry) for tag, entry in CANDIDATES.items() if tag in cubins}
        stream = cp.cuda.Stream(non_blocking=True)
        tol = tolerance(cs)
        rows = []
        failures = 0

        def time_graph(enqueue, hint_us):
            return graph_time(cp, stream, enqueue, hint_us, args.warmup, args.replays, replay_us=60.0)[0]

        for shape in shapes:
            M, N = shape.M, shape.N
            for B in sizes:
                rs = cp.random.RandomState(1000 + B + 7 * M + N)
                dz = rs.standard_normal((B, M), dtype=cp.float32)
                x = rs.standard_normal((B, N), dtype=cp.float32)
                ref = cp.asnumpy(dz.astype(cp.float64).T @ x.astype(cp.float64))
                dW = cp.empty((M, N), dtype=cp.float32)
                splits = sorted({wgp(B), *splits_arg})
                pmax = max(splits)
                ws = cp.empty((pmax, M, N), dtype=cp.float32)
                wsb = cp.empty((pmax, M), dtype=cp.float32)
                db = cp.empty((M,), dtype=cp.float32)
                ref_b = cp.asnumpy(dz.astype(cp.float64).sum(axis=0))

                def enqueue(P, dz=dz, x=x, dW=dW, ws=ws, wsb=wsb, db=db, B=B, M=M, N=N):
                    part((ceil_div(N, 128), ceil_div(M, 128), P), (256, 1, 1), (dz, x, ws, wsb, np.int32(B), np.int32(M), np.int32(N), np.int32(P)), stream=stream)
                    fin((ceil_div(M * N + M, 256),), (256, 1, 1), (ws, wsb, dW, db, np.int32(M), np.int32(N), np.int32(P)), stream=stream)

                def enqueue_with(kernel, dz=dz, x=x, dW=dW, ws=ws, wsb=wsb, db=db, B=B, M=M, N=N):
                    def enqueue_candidate(P):
                        kernel((ceil_div(N, 128), ceil_div(M, 128), P), (256, 1, 1), (dz, x, ws, wsb, np.int32(B), np.int32(M), np.int32(N), np.int32(P)), stream=stream)
                        fin((ceil_div(M * N + M, 256),), (256, 1, 1), (ws, wsb, dW, db, np.int32(M), np.int32(N), np.int32(P)), stream=stream)
                    return enqueue_candidate

                def enqueue_old(dz=dz, x=x, dW=dW, B=B, M=M, N=N):
                    old((ceil_div(N, 32), ceil_div(M, 64), 8), (256, 1, 1), (dz, x, dW, np.int32(B), np.int32(M), np.int32(N)), stream=stream)

                variants = [("split", P, enqueue) for P in splits]
                if M > 8:
                    variants += [(tag, wgp(B), enqueue_with(kernel)) for tag, kernel in candidates.items()]
                for variant, P, run in variants:
                    if P > B:
                        continue
                    outs = []
                    for _ in range(3):
                        for buf in (ws, wsb, dW, db):
                            buf.fill(cp.nan)
                        cp.cuda.Device().synchronize()
                        run(P)
                        stream.synchronize()
                        outs.append(np.concatenate([cp.asnumpy(dW).ravel(), cp.asnumpy(db)]))
                    c = compare(outs[0][: M * N].reshape(M, N), ref, tol)
                    cb = compare(outs[0][M * N :], ref_b, tol)
                    det = all(np.array_equal(outs[0].view(np.uint32), o.view(np.uint32)) for o in outs[1:])
                    row = {"variant": variant, "M": M, "N": N, "B": B, "P": P, "contract_P": P == wgp(B), "ok": bool(c.ok and cb.ok), "rel_norm": float(c.rel_norm),
                           "bias_rel_norm": float(cb.rel_norm), "deterministic": det}
                    if not (c.ok and cb.ok and det):
                        failures += 1
                        log(f"FAIL {variant} {M}x{N} B={B} P={P}: dW {c.detail}; db {cb.detail}; deterministic={det}")
                    if B in tsizes:
                        hint = 2.0 * B * M * N / 20e12 * 1e6 + 4.0
                        row["time"] = time_graph(lambda P=P, run=run: run(P), hint)
                    rows.append(row)
                if B in tsizes:
                    hint = 2.0 * B * M * N / 20e12 * 1e6 + 3.0
                    t_old = time_graph(enqueue_old, hint)
                    dzt, xt = torch.as_tensor(dz, device="cuda"), torch.as_tensor(x, device="cuda")
                    outt = torch.mm(dzt.t(), xt)
                    torch.cuda.synchronize()
                    ct = compare(outt.cpu().numpy(), ref, tol)
                    t_torch = torch_mm_time(torch, dzt, xt, outt, hint, args.warmup, args.replays, replay_us=60.0)[0]
                    here = [r for r in rows if r["M"] == M and r["N"] == N and r["B"] == B and "time" in r]
                    best = min((r for r in here if r["variant"] == "split"), key=lambda r: r["time"]["median_us"])
                    tc_row = next((r for r in here if r["variant"] == "tc"), None)
                    cutlass_row = next((r for r in here if r["variant"] == "cutlass"), None)
                    rows.append({"M": M, "N": N, "B": B, "old_us": t_old["median_us"], "torch_us": t_torch["median_us"], "torch_rel_norm": float(ct.rel_norm),
                                 "best_P": best["P"], "best_us": best["time"]["median_us"]})
                    line = " ".join(f"P{r['P']}={r['time']['median_us']:.1f}" for r in here if r["variant"] == "split")
                    if tc_row is not None:
                        line += f"; tc (3xTF32) P{tc_row['P']}={tc_row['time']['median_us']:.1f} rel {tc_row['rel_norm']:.1e}{'' if tc_row['ok'] and tc_row['deterministic'] else ' FAIL'}"
                    log(f"{M}x{N} B={B}: old {t_old['median_us']:.1f} us, torch {t_torch['median_us']:.1f} us (rel {ct.rel_norm:.1e}); split {line}; "
                        f"best P={best['P']} {best['time']['median_us']:.1f} us rel {best['rel_norm']:.1e}; contract P={wgp(B)}")
                    if cutlass_row is not None:
                        shipped = next(r for r in here if r["variant"] == "split" and r["P"] == cutlass_row["P"])
                        log(f"{M}x{N} B={B}: cutlass (3xTF32) P{cutlass_row['P']}={cutlass_row['time']['median_us']:.1f} us rel {cutlass_row['rel_norm']:.1e}"
                            f"{'' if cutlass_row['ok'] and cutlass_row['deterministic'] else ' FAIL'}; split P{shipped['P']}={shipped['time']['median_us']:.1f} us rel {shipped['rel_norm']:.1e}"
                            + (f"; tc P{tc_row['P']}={tc_row['time']['median_us']:.1f} us rel {tc_row['rel_norm']:.1e}" if tc_row is not None else "")
                            + f"; torch {t_torch['median_us']:.1f} us (rel {ct.rel_norm:.1e})")
                    del dzt, xt, outt
                del dz, x, ws, dW
                cp.get_default_memory_pool().free_all_blocks()
        out = Path(args.json or (Path(os.environ.get("OUT", ".")) / "gpu_wgrad_split.json"))
        out.write_text(json.dumps({"environment": environment(), "rows": rows, "failures": failures}, indent=1))
        log(f"{failures} failing (case, P) pairs; wrote {out}")
        return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
