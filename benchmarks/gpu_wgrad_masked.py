"""The trade-outcome head's weight-gradient partials over its labelled rows only (``aux_weight_grad_partial_masked``,
``kernels/aux_weight_grad_masked_kernel.cu``) against the dense ``aux_weight_grad_partial`` it replaces in the fused
backward schedule, on an H200: accuracy, that skipped rows are never read, determinism, time (issue 18).

Cases: the two shapes the fused schedule launches it with, (M, N) = (H, SH2) = (128, 256) and (K, H) = (3, 128),
and two off the tiles, (130, 129) and (8, 129); B = 37, 4103 and 65536 at P = the contract's WGP, and at P = 1
(one chunk: 256 label segments at B = 65536); labels valid on 0, 3 % and 100 % of the rows (1 in 10 of the others
labelled -2, K or K + 4: no class, skipped too); every float pointer 16-byte aligned, and one float off (the
scalar loads). For each case:

* the masked kernel's ws and wsb, on inputs whose skipped rows hold NaN in dz and x, against the float64
  reference (``audit.references.dqn_aux:aux_weight_grad_partial_masked``) with the comparison ``wireup verify``
  makes (``audit.runtime._compare``, the contract's default tolerance): a read of a skipped row is NaN there;
* with the skipped rows' dz zeroed (the backward's contract) and x finite, the dense kernel's ws and wsb against
  the same reference (so the two paths agree where the schedule uses them), and
* three runs of the masked kernel bit-identical; ws and wsb poisoned with NaN before each run (every element
  must be written).

Times (CUDA graph, median of ``--replays``) of the masked and the dense kernel at ``--time-sizes``, 3 % labels, the
two schedule shapes, P = WGP: the numbers for docs/benchmarks.md.

    python3 benchmarks/gpu_wgrad_masked.py              # on the H200, < 1 minute; $OUT/gpu_wgrad_masked.json
    python3 benchmarks/gpu_wgrad_masked.py --cpu-check  # here: the cases and the nvcc build
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
from gpu_wgrad_tc import NVCC, REPO, ceil_div, environment, graph_time, log  # noqa: E402

from audit.load import load_contracts  # noqa: E402
from audit.references import dqn_aux as ref  # noqa: E402
from audit.runtime._compare import Tolerance, compare  # noqa: E402

MASKED_SOURCE = "kernels/aux_weight_grad_masked_kernel.cu"
DENSE_SOURCE = "kernels/aux_weight_grad_split_kernel.cu"
MASKED, DENSE = "aux_weight_grad_partial_masked", "aux_weight_grad_partial"
SCHEDULE_SHAPES = ((128, 256), (3, 128))
SHAPES = (*SCHEDULE_SHAPES, (130, 129), (8, 129))
SIZES = (37, 4103, 65536)
DENSITIES = (0.0, 0.03, 1.0)
K = 3


def wgp(cs, B: int) -> int:
    return int(cs.dim_map["WGP"].expr.evaluate({"B": B}, cs.slot_indices))


def cases(cs, sizes=SIZES) -> list[dict]:
    out = []
    for M, N in SHAPES:
        for B in sizes:
            for P in sorted({wgp(cs, B), 1}):
                for density in DENSITIES:
                    for misaligned in (False, True):
                        if misaligned and (density != 0.03 or P != wgp(cs, B)):
                            continue
                        out.append({"M": M, "N": N, "B": B, "P": P, "density": density, "misaligned": misaligned})
    return out


def labels_of(rng, B: int, density: float) -> np.ndarray:
    """Classes 0 .. K-1 on ``density`` of the rows, -1 elsewhere, and 1 in 10 of those -1 replaced by -2, K or K + 4."""
    lab = rng.integers(0, K, size=B)
    lab[rng.random(B) >= density] = -1
    odd = (lab == -1) & (rng.random(B) < 0.1)
    lab[odd] = rng.choice([-2, K, K + 4], size=int(odd.sum()))
    return lab.astype(np.int32)


def host_inputs(case: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """dz and x with NaN on the skipped rows (``dz_nan``, ``x_nan``), and the same with the skipped rows' dz zero
    and x finite (``dz``, ``x``): what the trade-outcome backward writes."""
    B, M, N = case["B"], case["M"], case["N"]
    rng = np.random.default_rng(seed + 7 * B + 131 * M + N + case["P"] + int(1000 * case["density"]))
    lab = labels_of(rng, B, case["density"])
    skipped = ~((lab >= 0) & (lab < K))
    dz = rng.standard_normal((B, M)).astype(np.float32)
    x = rng.standard_normal((B, N)).astype(np.float32)
    dz_nan, x_nan = dz.copy(), x.copy()
    dz_nan[skipped] = np.nan
    x_nan[skipped] = np.nan
    dz[skipped] = 0.0
    return {"labels": lab, "dz": dz, "x": x, "dz_nan": dz_nan, "x_nan": x_nan}


def build(out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    cubins = {}
    for tag, src in (("masked", MASKED_SOURCE), ("dense", DENSE_SOURCE)):
        cubin = out / f"{tag}.cubin"
        r = subprocess.run([*NVCC, "-Xptxas", "-v", "-o", str(cubin), src], cwd=REPO, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed on {src}: {r.stderr.strip()[-800:]}")
        log(f"built {src}: " + "; ".join(ln.strip() for ln in (r.stdout + r.stderr).splitlines() if "registers" in ln or "spill" in ln))
        cubins[tag] = cubin
    return cubins


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--time-sizes", default="256,4096,65536")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--cpu-check", action="store_true")
    args = ap.parse_args(argv)
    cs = load_contracts(REPO / "contracts", REPO)
    tol = Tolerance.of(None, None)  # the contract's default: it declares no rtol / atol
    todo = cases(cs, [int(s) for s in args.sizes.split(",")])
    log(f"{len(todo)} cases")
    with tempfile.TemporaryDirectory() as tmp:
        cubins = build(Path(tmp))
        if args.cpu_check:
            return 0
        import cupy as cp

        masked = cp.RawModule(path=str(cubins["masked"])).get_function(MASKED)
        dense = cp.RawModule(path=str(cubins["dense"])).get_function(DENSE)
        stream = cp.cuda.Stream(non_blocking=True)
        rows, failures = [], 0

        def dev(a: np.ndarray, off: bool):
            """A device copy of ``a``, one element past a 16-byte boundary when ``off``."""
            flat = cp.empty(a.size + 4, dtype=a.dtype)
            view = flat[1 : 1 + a.size] if off else flat[: a.size]
            view[...] = cp.asarray(a.ravel())
            return view

        for case in todo:
            B, M, N, P, off = case["B"], case["M"], case["N"], case["P"], case["misaligned"]
            h = host_inputs(case)
            want = ref.aux_weight_grad_partial_masked(dz=h["dz_nan"], x=h["x_nan"], labels=h["labels"], B=B, M=M, N=N, P=P, K=K)
            lab = dev(h["labels"], False)
            ws = dev(np.zeros(P * M * N, np.float32), off)
            wsb = dev(np.zeros(P * M, np.float32), off)
            grid = (ceil_div(N, 128), ceil_div(M, 128), P)

            def run(kernel, dz, x, with_labels=True, ws=ws, wsb=wsb, lab=lab, grid=grid, B=B, M=M, N=N, P=P):
                ws.fill(cp.nan)
                wsb.fill(cp.nan)
                extra = (np.int32(K),) if with_labels else ()
                args_ = (dz, x, lab, ws, wsb) if with_labels else (dz, x, ws, wsb)
                kernel(grid, (256, 1, 1), (*args_, np.int32(B), np.int32(M), np.int32(N), np.int32(P), *extra), stream=stream)
                stream.synchronize()
                return cp.asnumpy(ws).reshape(P, M, N), cp.asnumpy(wsb).reshape(P, M)

            dz_nan, x_nan = dev(h["dz_nan"], off), dev(h["x_nan"], off)
            outs = [run(masked, dz_nan, x_nan) for _ in range(3)]
            cw, cb = compare(outs[0][0], want["ws"], tol), compare(outs[0][1], want["wsb"], tol)
            det = all(np.array_equal(outs[0][i].view(np.uint32), o[i].view(np.uint32)) for o in outs[1:] for i in (0, 1))
            dz, x = dev(h["dz"], off), dev(h["x"], off)
            dw, db = run(dense, dz, x, with_labels=False)
            dcw, dcb = compare(dw, want["ws"], tol), compare(db, want["wsb"], tol)
            row = {**case, "ok": bool(cw.ok and cb.ok), "rel_norm": float(cw.rel_norm), "bias_rel_norm": float(cb.rel_norm),
                   "deterministic": det, "dense_ok": bool(dcw.ok and dcb.ok), "dense_rel_norm": float(dcw.rel_norm)}
            if not (row["ok"] and det and row["dense_ok"]):
                failures += 1
                log(f"FAIL {case}: masked ws {cw.detail}; wsb {cb.detail}; deterministic={det}; dense ws {dcw.detail}; wsb {dcb.detail}")
            rows.append(row)
            del dz_nan, x_nan, dz, x, ws, wsb, lab
            cp.get_default_memory_pool().free_all_blocks()

        times = []
        for M, N in SCHEDULE_SHAPES:
            for B in [int(s) for s in args.time_sizes.split(",") if s]:
                case = {"M": M, "N": N, "B": B, "P": wgp(cs, B), "density": 0.03, "misaligned": False}
                h = host_inputs(case)
                P = case["P"]
                dz, x, lab = cp.asarray(h["dz"]), cp.asarray(h["x"]), cp.asarray(h["labels"])
                ws, wsb = cp.empty((P, M, N), cp.float32), cp.empty((P, M), cp.float32)
                grid = (ceil_div(N, 128), ceil_div(M, 128), P)
                sc = (np.int32(B), np.int32(M), np.int32(N), np.int32(P))
                hint = 2.0 * B * M * N / 20e12 * 1e6 + 3.0
                t_m = graph_time(cp, stream, lambda: masked(grid, (256, 1, 1), (dz, x, lab, ws, wsb, *sc, np.int32(K)), stream=stream),
                                 hint / 10, args.warmup, args.replays)[0]
                t_d = graph_time(cp, stream, lambda: dense(grid, (256, 1, 1), (dz, x, ws, wsb, *sc), stream=stream),
                                 hint, args.warmup, args.replays)[0]
                times.append({**case, "masked_us": t_m["median_us"], "dense_us": t_d["median_us"]})
                log(f"{M}x{N} B={B} P={P}, 3 % labels: masked {t_m['median_us']:.1f} us, dense {t_d['median_us']:.1f} us")
                del dz, x, lab, ws, wsb
                cp.get_default_memory_pool().free_all_blocks()
        out = Path(args.json or (Path(os.environ.get("OUT", ".")) / "gpu_wgrad_masked.json"))
        out.write_text(json.dumps({"environment": environment(), "rows": rows, "times": times, "failures": failures}, indent=1))
        log(f"{failures} failing case(s) of {len(rows)}; wrote {out}")
        return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
