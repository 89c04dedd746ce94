"""The CUTLASS 3xTF32 aux trunk forward (issue 18; shipped since 5 December 2026) against the SIMT kernel it
replaced and torch on an H200: accuracy, determinism, unwritten rows and time, in ONE process.

    h_out[b, j] = ELU( sum_i x[b, i] * W[j, i] + b[j] )      x [B, E], W [SH2, E], b [SH2], h_out [B, SH2]

The candidate (``kernels/aux_trunk_forward_cutlass.cu``, entry ``aux_trunk_forward_cutlass``, the contract's
kernel ``aux_trunk_forward``) has the SIMT kernel's parameters and semantics and its own launch geometry
(:func:`cutlass_geometry`, the contract's). In this benchmark's output "shipped" names the SIMT baseline (entry
``aux_trunk_forward`` of ``kernels/aux_trunk_kernel.cu``, shipped until 5 December 2026), launched at its own
geometry (:data:`SIMT_TILE`), not the contract's; it is built from CUTLASS 2.x device
templates (``DefaultGemm``, ``OpClassTensorOp``, ``Sm80``, ``OpMultiplyAddFastF32``, mma.sync m16n8k8)
with the headers of the ``nvidia-cutlass`` wheel (``pip install --no-deps nvidia-cutlass==4.2.0.0``; its
``cutlass_library/source/include``) or of ``$CUTLASS_INCLUDE``. ``--tiles`` builds the same source with other
threadblock tiles ("TBMxTBNxTBK_WMxWN_STAGES", suffix "_rn": the operands split into tf32 big + small parts
with round-to-nearest instead of CUTLASS's round-toward-zero big part, ``-DAUX_TRUNK_CUTLASS_SPLIT_RN=1``);
the first build is "the candidate" (by default CUTLASS's stock 3xTF32 at the tile of its 3xTF32 example),
the others (by default: the same with the round-to-nearest split, and three other tiles) are measured beside it
for the record and decide nothing.

Cases (``shapes_of``): the shipped (E, SH2) (the contracts' fixed dims, 256 x 256), the same with every
pointer one float off 16-byte alignment (the candidate's and the shipped kernel's scalar paths), and every
other (E, SH2) of the contract's ``[kernel.verify] dims`` (253: no multiple of 4), each at ``--sizes``.

Per case:

1. **Accuracy**: x standard normal, W and b uniform in +-1/sqrt(E) (a Linear's init), float32, seeded; the
   reference is the contract's (``audit.references.dqn_aux.aux_trunk_forward``, float64). The shipped
   kernel, each candidate and torch in float32 with TF32 off (``torch.nn.functional.linear`` then
   ``torch.nn.functional.elu``) are compared with it by ``audit.runtime._compare.compare`` under the
   contract's tolerance, the comparison ``wireup verify`` makes: relative error norm, max relative and
   absolute error, verdict. h_out has 3 guard rows past B and is poisoned with NaN before each checked
   launch: an unwritten element shows as NaN, and a guard row that is no longer all poison is a write past B.
2. **Determinism**: each kernel runs 3 times on the same inputs; the outputs must be bit-identical.
3. **Time** (shipped (E, SH2), aligned, at ``--time-sizes``): each kernel and torch (linear + elu) captured
   ``rep`` times into one CUDA graph (``gpu_wgrad_tc.graph_time``: ``rep`` so that a replay takes ~50 us),
   median (min-max) of ``--replays`` replays after ``--warmup``, divided by ``rep``.

Prints a table and writes ``$OUT/gpu_fwd_cutlass.json`` (``--json PATH`` otherwise). Exit status 1 when the
candidate (the first tile) fails a tolerance, determinism or writes past B anywhere, 2 when the CUTLASS
headers cannot be found; 0 otherwise. The verdict against torch (the issue's bar: error no larger than torch
float32's) is reported per case, not in the exit status.

    python3 benchmarks/gpu_fwd_cutlass.py              # on the H200 (CuPy + torch), ~1-2 minutes
    python3 benchmarks/gpu_fwd_cutlass.py --cpu-check  # here, no GPU: the cases, the geometry and the nvcc builds
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import ClassVar

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_wgrad_tc import NVCC, REPO, ceil_div, environment, graph_time, log, torch_graph_time  # noqa: E402

from audit.load import load_contracts  # noqa: E402
from audit.references.dqn_aux import aux_trunk_forward as reference  # noqa: E402
from audit.runtime._compare import Tolerance, compare  # noqa: E402

KERNEL = "aux_trunk_forward"  # the SIMT baseline's entry (and the contract's kernel name)
SHIPPED_SOURCE = "kernels/aux_trunk_kernel.cu"
SIMT_TILE = (64, 128, 256)  # the SIMT baseline's launch: grid = (ceil_div(SH2, 64), ceil_div(B, 128), 1), block = (256, 1, 1)
CANDIDATE_SOURCE = "kernels/aux_trunk_forward_cutlass.cu"
CANDIDATE = "aux_trunk_forward_cutlass"
CUTLASS_PIP = "pip install --no-deps nvidia-cutlass==4.2.0.0"
SIZES = (1, 37, 256, 4096, 4103, 65536)
TIME_SIZES = (256, 4096, 65536)
GUARD_ROWS = 3


class HeadersMissing(RuntimeError):
    """The CUTLASS include folder cannot be found (one line, for the user)."""


# ---------------------------------------------------------------------------------------------------
# the tile, the geometry, the build


@dataclasses.dataclass(frozen=True)
class Tile:
    """A build of the candidate: threadblock tile TBM x TBN x TBK, warp tile WM x WN (x TBK), pipeline stages,
    and how the fp32 operands are split into tf32 big + small parts: "rz" (CUTLASS's OpMultiplyAddFastF32 as
    shipped: big rounded toward zero, small half-ulp-truncated) or "rn" (both rounded to nearest,
    ``-DAUX_TRUNK_CUTLASS_SPLIT_RN=1``)."""

    tbm: int = 128
    tbn: int = 64
    tbk: int = 16
    wm: int = 64
    wn: int = 32
    stages: int = 3
    split: str = "rz"
    #: the source's macro prefix (-D<MACRO>_TBM=...); a subclass with other defaults names another source's
    macro: ClassVar[str] = "AUX_TRUNK_CUTLASS"

    @classmethod
    def parse(cls, text: str) -> Tile:
        """``"128x64x16_64x32_3"`` -> Tile(128, 64, 16, 64, 32, 3); a ``_rn`` suffix selects the round-to-nearest split."""
        parts = text.strip().split("_")
        split = parts.pop() if len(parts) == 4 and parts[-1] in ("rz", "rn") else "rz"
        try:
            tb, w, s = parts
            tbm, tbn, tbk = (int(v) for v in tb.split("x"))
            wm, wn = (int(v) for v in w.split("x"))
            tile = cls(tbm, tbn, tbk, wm, wn, int(s), split)
        except ValueError:
            raise argparse.ArgumentTypeError(f"tile {text!r}: expected TBMxTBNxTBK_WMxWN_STAGES[_rn], e.g. 128x64x16_64x32_3") from None
        if tile.tbm % tile.wm or tile.tbn % tile.wn or tile.wm % 16 or tile.wn % 8 or tile.tbk % 8 or tile.stages < 3:
            raise argparse.ArgumentTypeError(f"tile {text!r}: TBM/WM and TBN/WN must divide, WM a multiple of 16, WN of 8, "
                                             "TBK of 8, and STAGES >= 3 (2 selects CUTLASS's MmaPipelined, without staged accumulation)")
        return tile

    @property
    def name(self) -> str:
        return f"{self.tbm}x{self.tbn}x{self.tbk}_{self.wm}x{self.wn}_{self.stages}" + ("_rn" if self.split == "rn" else "")

    @property
    def threads(self) -> int:
        return (self.tbm // self.wm) * (self.tbn // self.wn) * 32

    def defines(self) -> list[str]:
        d = [f"-D{self.macro}_{k}={v}" for k, v in (("TBM", self.tbm), ("TBN", self.tbn), ("TBK", self.tbk),
                                                         ("WM", self.wm), ("WN", self.wn), ("STAGES", self.stages))]
        return d + [f"-D{self.macro}_SPLIT_RN={1 if self.split == 'rn' else 0}"]  # explicit both ways: the shipped default is RN since 5 Dec


DEFAULT_TILE = Tile()
# the candidate; its round-to-nearest split; 64-row and 32-row tiles (2x and 4x the blocks: at B = 256 the
# default has 8 blocks for 132 SMs); 8 warps of 32 x 32 over the default tile (fewer registers per thread)
DEFAULT_TILES = (DEFAULT_TILE, dataclasses.replace(DEFAULT_TILE, split="rn"), Tile(64, 64, 16, 32, 32, 4), Tile(32, 64, 16, 32, 32, 4),
                 Tile(128, 64, 16, 32, 32, 3))


def cutlass_geometry(B: int, SH2: int, tile: Tile = DEFAULT_TILE) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The candidate's launch (its header comment): grid (tiles_m * tiles_n, 1, 1), block x on row tile
    x // tiles_n and column tile x % tiles_n (its RowTileColumnsSwizzle), block ((TBM / WM) * (TBN / WN) * 32, 1, 1)."""
    tiles_m, tiles_n = ceil_div(B, tile.tbm), ceil_div(SH2, tile.tbn)
    return (tiles_m * tiles_n, 1, 1), (tile.threads, 1, 1)


def shipped_geometry(cs, B: int, E: int, SH2: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The SIMT baseline's launch (its own geometry; the contract now launches the CUTLASS kernel)."""
    cols, rows, threads = SIMT_TILE
    return ((SH2 + cols - 1) // cols, (B + rows - 1) // rows, 1), (threads, 1, 1)


def cutlass_include(environ: dict[str, str] | None = None) -> Path:
    """The folder holding ``cutlass/cutlass.h``: ``$CUTLASS_INCLUDE`` when set, else the ``nvidia-cutlass``
    wheel's ``cutlass_library/source/include``; HeadersMissing (one line naming the pip command) otherwise."""
    environ = os.environ if environ is None else environ
    env = environ.get("CUTLASS_INCLUDE")
    if env:
        inc = Path(env)
        if not (inc / "cutlass" / "cutlass.h").is_file():
            raise HeadersMissing(f"CUTLASS_INCLUDE={env} holds no cutlass/cutlass.h; unset it or point it at CUTLASS's include folder")
        return inc
    spec = importlib.util.find_spec("cutlass_library")
    if spec is not None and spec.origin:
        inc = Path(spec.origin).parent / "source" / "include"
        if (inc / "cutlass" / "cutlass.h").is_file():
            return inc
    raise HeadersMissing(f"CUTLASS headers not found: run `{CUTLASS_PIP}` (or set CUTLASS_INCLUDE to a folder holding cutlass/cutlass.h)")


def candidate_command(cubin: Path, include: Path, tile: Tile = DEFAULT_TILE, source: str = CANDIDATE_SOURCE) -> list[str]:
    """The nvcc command line of one candidate build (run in the repository root)."""
    return [*NVCC, "-Xptxas", "-v", "-isystem", str(include), *tile.defines(), "-o", str(cubin), source]


def shipped_command(cubin: Path, source: str = SHIPPED_SOURCE) -> list[str]:
    return [*NVCC, "-Xptxas", "-v", "-o", str(cubin), source]


def ptxas_summary(text: str) -> str:
    """``nvcc -Xptxas -v`` output, per entry function: "name: N registers, S bytes spill stores, L bytes spill
    loads, M bytes smem", joined with "; "."""
    entries: list[str] = []
    name, spill = None, ""
    for ln in text.splitlines():
        if "Compiling entry function" in ln:
            name = ln.split("'")[1] if "'" in ln else ln.rsplit(" ", 1)[-1]
        elif "spill stores" in ln:
            parts = [p.strip() for p in ln.split(",")]
            spill = ", ".join(p for p in parts if "spill" in p)
        elif "Used" in ln and "registers" in ln:
            used = ln.split("Used", 1)[1].strip()
            regs = used.split(",")[0].strip()
            smem = next((p.strip() for p in used.split(",") if "smem" in p), "0 bytes smem")
            entries.append(f"{name or '?'}: {regs}, {spill}, {smem}" if spill else f"{name or '?'}: {regs}, {smem}")
            name, spill = None, ""
    return "; ".join(entries)


def build(out_dir: Path, tiles: tuple[Tile, ...], include: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """nvcc the shipped source and one candidate cubin per tile, in parallel: ({tag: cubin}, {tag: ptxas summary});
    tags "shipped" and the tile names."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = {"shipped": shipped_command(out_dir / "shipped.cubin")}
    for t in tiles:
        jobs[t.name] = candidate_command(out_dir / f"cutlass_{t.name}.cubin", include, t)
    return compile_jobs(jobs)


def compile_jobs(jobs: dict[str, list[str]]) -> tuple[dict[str, Path], dict[str, str]]:
    """Run the nvcc command lines ``{tag: argv}`` (each ending ``-o CUBIN SOURCE``) in parallel in the repository
    root: ({tag: cubin}, {tag: ptxas summary}); RuntimeError naming the tag when one fails."""
    procs = {tag: subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for tag, cmd in jobs.items()}
    cubins, ptxas = {}, {}
    for tag, p in procs.items():
        out, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"nvcc failed on {tag}: {err.strip()[-1200:]}")
        ptxas[tag] = ptxas_summary(out + err)
        log(f"built {tag}: {ptxas[tag]}")
        cubins[tag] = Path(jobs[tag][jobs[tag].index("-o") + 1])
    return cubins, ptxas


# ---------------------------------------------------------------------------------------------------
# the cases, from the contracts


@dataclasses.dataclass(frozen=True)
class Shape:
    E: int
    SH2: int
    origin: str  # "shipped", "shipped, misaligned" or "[kernel.verify] dims"
    misaligned: bool = False


def shapes_of(cs) -> list[Shape]:
    """The shipped (E, SH2), the same one float off alignment, then the verify dims' other (E, SH2) pairs."""
    E, SH2 = int(cs.dim_map["E"].value), int(cs.dim_map["SH2"].value)
    shapes = [Shape(E, SH2, "shipped"), Shape(E, SH2, "shipped, misaligned", True)]
    k = cs.kernel_map[KERNEL]
    dims = dict(k.verify.dims) if k.verify is not None else {}
    for e in dims.get("E", (E,)):
        for s in dims.get("SH2", (SH2,)):
            if (e, s) != (E, SH2):
                shapes.append(Shape(int(e), int(s), "[kernel.verify] dims"))
    return shapes


def tolerance(cs) -> Tolerance:
    v = cs.kernel_map[KERNEL].verify
    return Tolerance.of(v.rtol if v is not None else None, v.atol if v is not None else None)


def inputs(B: int, E: int, SH2: int, seed: int) -> dict[str, np.ndarray]:
    """x standard normal, W and b uniform in +-1/sqrt(E), float32."""
    rng = np.random.default_rng(seed)
    bound = 1.0 / math.sqrt(E)
    return {"x": rng.standard_normal((B, E), dtype=np.float32),
            "W": rng.uniform(-bound, bound, (SH2, E)).astype(np.float32),
            "b": rng.uniform(-bound, bound, SH2).astype(np.float32)}


def accuracy(out: np.ndarray, ref: np.ndarray, tol: Tolerance) -> dict:
    c = compare(out, ref, tol)
    return {"status": c.status, "ok": bool(c.ok), "rel_norm": float(c.rel_norm), "max_rel": float(c.max_rel),
            "max_abs": float(c.max_abs), "n_bad": int(c.n_bad), "detail": c.detail}


def not_worse(tag_row: dict, torch_row: dict) -> bool:
    """The issue's bar: relative error norm no larger than torch float32's (same inputs, same reference)."""
    return tag_row["rel_norm"] <= torch_row["rel_norm"]


# ---------------------------------------------------------------------------------------------------
# on the GPU


class Runner:
    def __init__(self, cs, cubins: dict[str, Path], tiles: tuple[Tile, ...], args):
        import cupy as cp
        import torch

        self.cp, self.torch = cp, torch
        self.cs, self.tiles, self.args = cs, {t.name: t for t in tiles}, args
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.fn = {}
        for tag, cubin in cubins.items():
            fn = cp.RawModule(path=str(cubin)).get_function(KERNEL if tag == "shipped" else CANDIDATE)
            getattr(fn, "kernel", None)  # load the module now, outside any capture
            self.fn[tag] = fn
        self.tags = list(cubins)  # "shipped", then the tiles (the first is the candidate)
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.tol = tolerance(cs)

    def geometry(self, tag: str, B: int, E: int, SH2: int):
        return shipped_geometry(self.cs, B, E, SH2) if tag == "shipped" else cutlass_geometry(B, SH2, self.tiles[tag])

    def launch(self, tag: str, bufs: dict, B: int, E: int, SH2: int) -> None:
        grid, block = self.geometry(tag, B, E, SH2)
        self.fn[tag](grid, block, (bufs["x"], bufs["W"], bufs["b"], bufs["h_out"], np.int32(B), np.int32(E), np.int32(SH2)),
                     stream=self.stream)

    def checked(self, tag: str, bufs: dict, B: int, E: int, SH2: int) -> np.ndarray:
        """One launch into a NaN-poisoned h_out (with its guard rows); the host copy, guard rows included."""
        cp = self.cp
        bufs["h_out"].fill(cp.nan)
        cp.cuda.Device().synchronize()
        self.launch(tag, bufs, B, E, SH2)
        self.stream.synchronize()
        return cp.asnumpy(bufs["h_out"])

    def device_buffers(self, host: dict[str, np.ndarray], B: int, SH2: int, misaligned: bool) -> dict:
        """Device copies; misaligned: each one float into a larger allocation (4 bytes off 16-byte alignment)."""
        cp = self.cp
        off = 1 if misaligned else 0
        bufs = {}
        for name, a in (*host.items(), ("h_out", np.empty((B + GUARD_ROWS, SH2), np.float32))):
            base = cp.empty(a.size + off, dtype=cp.float32)
            view = base[off:].reshape(a.shape)
            if name != "h_out":
                view[...] = cp.asarray(a)
            bufs[name] = view
        return bufs

    def case(self, shape: Shape, B: int, seed: int) -> dict:
        cp, torch = self.cp, self.torch
        E, SH2 = shape.E, shape.SH2
        host = inputs(B, E, SH2, seed)
        ref = reference(**host)["h_out"]
        bufs = self.device_buffers(host, B, SH2, shape.misaligned)
        row: dict = {"E": E, "SH2": SH2, "B": B, "origin": shape.origin, "misaligned": shape.misaligned,
                     "grid": {tag: list(self.geometry(tag, B, E, SH2)[0]) for tag in self.tags}, "flop": 2.0 * B * E * SH2}
        for tag in self.tags:
            outs = [self.checked(tag, bufs, B, E, SH2) for _ in range(3)]
            acc = accuracy(outs[0][:B], ref, self.tol)
            acc["deterministic"] = all(np.array_equal(outs[0].view(np.uint32), o.view(np.uint32)) for o in outs[1:])
            poison = np.full((GUARD_ROWS, SH2), np.nan, np.float32).view(np.uint32)
            acc["guard_rows_untouched"] = all(np.array_equal(o[B:].view(np.uint32), poison) for o in outs)
            row[tag] = acc
        xt, Wt, bt = (torch.as_tensor(bufs[n], device="cuda") for n in ("x", "W", "b"))

        def torch_fwd():
            return torch.nn.functional.elu(torch.nn.functional.linear(xt, Wt, bt))

        out_t = torch_fwd()
        torch.cuda.synchronize()
        row["torch_fp32"] = accuracy(out_t.cpu().numpy(), ref, self.tol)
        for tag in self.tags:
            row[tag]["not_worse_than_torch"] = not_worse(row[tag], row["torch_fp32"])
        if B in self.args.time_sizes and shape.origin == "shipped":
            hint = 2.0 * B * E * SH2 / 20e12 * 1e6 + 3.0  # ~20 TFLOP/s + 3 us, only to size the graph
            for tag in self.tags:
                row[tag]["time"], row[tag]["rep"] = graph_time(cp, self.stream, lambda t=tag: self.launch(t, bufs, B, E, SH2), hint,
                                                              self.args.warmup, self.args.replays)
            row["torch_fp32"]["time"], row["torch_fp32"]["rep"] = torch_graph_time(torch, torch_fwd, hint, self.args.warmup, self.args.replays)
            for tag in (*self.tags, "torch_fp32"):
                t = row[tag]["time"]["median_us"]
                row[tag]["tflops"] = row["flop"] / (t * 1e-6) / 1e12 if t > 0 else None
        return row

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()
        self.torch.cuda.empty_cache()


def verdict(acc: dict) -> str:
    if not acc["ok"]:
        return "FAIL " + acc["status"]
    if not acc["deterministic"]:
        return "FAIL nondeterministic"
    if not acc["guard_rows_untouched"]:
        return "FAIL wrote past B"
    return "ok"


def print_table(rows: list[dict], tags: list[str], tol: Tolerance) -> None:
    cand = tags[1]
    print()
    print(f"aux_trunk_forward: shipped SIMT vs CUTLASS 3xTF32 candidate ({cand}; others for the record) vs torch fp32 (TF32 off); "
          f"tolerance rtol {tol.rtol:g}, atol {tol.atol:g} x max|ref|, rtol_elem {tol.rtol_elem:g}")
    hdr = (f"{'E':>4} {'SH2':>4} {'B':>6} {'case':<20} | {'rel shipped':>11} {'rel cand':>9} {'rel torch':>9} | {'maxrel cand':>11} "
           f"{'maxrel torch':>12} | {'<= torch':>8} | verdict cand (others)")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        if "error" in r:
            print(f"{r['E']:>4} {r['SH2']:>4} {r['B']:>6} {r['origin']:<20} | ERROR {r['error']}")
            continue
        c, t, s = r[cand], r["torch_fp32"], r["shipped"]
        others = " ".join(verdict(r[tag]) for tag in tags[2:])
        print(f"{r['E']:>4} {r['SH2']:>4} {r['B']:>6} {r['origin']:<20} | {s['rel_norm']:>11.2e} {c['rel_norm']:>9.2e} {t['rel_norm']:>9.2e} | "
              f"{c['max_rel']:>11.2e} {t['max_rel']:>12.2e} | {'yes' if c['not_worse_than_torch'] else 'NO':>8} | {verdict(c)}"
              f"{f' ({others})' if others else ''}; shipped {verdict(s)}")
    timed = [r for r in rows if "error" not in r and "time" in r[cand]]
    if timed:
        print()
        print("times: median us per launch (CUDA graph), min-max; TFLOP/s (fp32-equivalent)")
        for r in timed:
            parts = [f"{tag} {r[tag]['time']['median_us']:.2f} ({r[tag]['time']['min_us']:.2f}-{r[tag]['time']['max_us']:.2f}, "
                     f"{(r[tag]['tflops'] or 0):.1f} TF/s)" for tag in (*tags, "torch_fp32")]
            print(f"  B={r['B']:>6}: " + "; ".join(parts) + f"; shipped/candidate x{r['shipped']['time']['median_us'] / r[cand]['time']['median_us']:.2f}, "
                  f"torch/candidate x{r['torch_fp32']['time']['median_us'] / r[cand]['time']['median_us']:.2f}")


def int_list(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int_list, default=list(SIZES), help="batch sizes B checked (comma-separated)")
    ap.add_argument("--time-sizes", type=int_list, default=list(TIME_SIZES), help="B timed at the shipped (E, SH2); empty: none")
    ap.add_argument("--tiles", type=lambda s: [Tile.parse(t) for t in s.split(",") if t.strip()],
                    default=list(DEFAULT_TILES), help="candidate builds TBMxTBNxTBK_WMxWN_STAGES[_rn]; the first is the candidate")
    ap.add_argument("--replays", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", default=None, help="result path (default $OUT/gpu_fwd_cutlass.json when $OUT is set)")
    ap.add_argument("--cpu-check", action="store_true", help="no GPU: the cases, the geometry and the nvcc builds only")
    args = ap.parse_args(argv)
    if not args.tiles:
        ap.error("--tiles: at least one tile")
    args.tiles = list(dict.fromkeys(args.tiles))  # a tile named twice is built once
    return args


def cpu_check(cs, args, include: Path) -> int:
    """No GPU: the cases and both kernels' grids at B = 65536, and every nvcc build."""
    for s in shapes_of(cs):
        grids = ", ".join(f"{t.name} {cutlass_geometry(65536, s.SH2, t)}" for t in args.tiles)
        print(f"E={s.E:<4} SH2={s.SH2:<4} ({s.origin}): shipped {shipped_geometry(cs, 65536, s.E, s.SH2)}, candidate {grids} at B=65536")
    print(f"tolerance: {tolerance(cs)}; CUTLASS include: {include}")
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), tuple(args.tiles), include)
    print(f"{len(shapes_of(cs))} shapes x {len(args.sizes)} batch sizes; nvcc built the shipped kernel and {len(args.tiles)} candidate tile(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cs = load_contracts(REPO / "contracts", REPO)
    try:
        include = cutlass_include()
    except HeadersMissing as exc:
        print(f"gpu_fwd_cutlass: {exc}", file=sys.stderr)
        return 2
    if args.cpu_check:
        return cpu_check(cs, args, include)

    shapes = shapes_of(cs)
    log(f"{len(shapes)} shapes: " + ", ".join(f"{s.E}x{s.SH2} ({s.origin})" for s in shapes) + f"; B = {args.sizes}; CUTLASS {include}")
    with tempfile.TemporaryDirectory(prefix="fwd_cutlass_") as tmp:
        cubins, ptxas = build(Path(tmp), tuple(args.tiles), include)
        runner = Runner(cs, cubins, tuple(args.tiles), args)
        tags = runner.tags
        cand = tags[1]
        results: dict = {"environment": environment(), "kernel": KERNEL, "candidate_source": CANDIDATE_SOURCE, "candidate": cand,
                         "tiles": [t.name for t in args.tiles], "cutlass_include": str(include), "ptxas": ptxas,
                         "tolerance": dataclasses.asdict(runner.tol), "replays": args.replays, "warmup": args.warmup, "rows": []}
        for i, shape in enumerate(shapes):
            for B in args.sizes:
                try:
                    row = runner.case(shape, B, args.seed + 1000 * i + B)
                except Exception as exc:  # noqa: BLE001 - report the case and go on
                    row = {"E": shape.E, "SH2": shape.SH2, "B": B, "origin": shape.origin, "error": f"{type(exc).__name__}: {exc}"}
                runner.release()
                results["rows"].append(row)
                if "error" in row:
                    log(f"E={shape.E} SH2={shape.SH2} B={B} ({shape.origin}): {row['error']}")
                else:
                    times = "".join(f", {tag} {row[tag]['time']['median_us']:.2f} us" for tag in (*tags, "torch_fp32") if "time" in row[tag])
                    log(f"E={shape.E} SH2={shape.SH2} B={B} ({shape.origin}): candidate rel {row[cand]['rel_norm']:.2e} ({verdict(row[cand])}), "
                        f"shipped {row['shipped']['rel_norm']:.2e}, torch {row['torch_fp32']['rel_norm']:.2e}{times}")
    rows = results["rows"]
    bad = [r for r in rows if "error" in r or verdict(r[cand]) != "ok"]
    worse = [r for r in rows if "error" not in r and not r[cand]["not_worse_than_torch"]]
    results["candidate_ok"] = not bad
    results["candidate_worse_than_torch"] = [{k: r[k] for k in ("E", "SH2", "B", "origin")} for r in worse]
    path = args.json or (str(Path(os.environ["OUT"]) / "gpu_fwd_cutlass.json") if os.environ.get("OUT") else None)
    if path:
        Path(path).write_text(json.dumps(results, indent=1, default=str))
        log(f"wrote {path}")
    print_table(rows, tags, runner.tol)
    print(f"\ncandidate {cand}: {'every case within tolerance, bit-deterministic, nothing written past B' if not bad else f'{len(bad)} case(s) FAILED'}; "
          f"error above torch fp32's in {len(worse)} of {len(rows)} case(s)")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
