"""The CUTLASS 3xTF32 head forwards (issue 18; shipped since 5 December 2026) against the SIMT kernels they
replaced and torch on an H200: accuracy, determinism, unwritten rows, the K-range rule and time, in ONE process.

    h1     = ELU(h_s2 W1^T + b1)                    h_s2 [B, SH2], W1 [H, SH2], b1 [H]       -> h1_out [B, H]
    logits = h1 W2^T + b2, probs = softmax(logits)  W2 [K, H], b2 [K] (trade-outcome head)   -> logits, probs [B, K]
    pred   = h1 W2[0] + b2[0]                       W2 [1, H], b2 [1] (next-bar head)         -> pred [B]

The candidates (``kernels/aux_head_forward_cutlass.cu``, entries ``aux_trade_outcome_forward_cutlass`` and
``aux_next_bar_forward_cutlass``, the contracts' kernels ``aux_trade_outcome_forward`` / ``aux_next_bar_forward``)
have the SIMT kernels' parameters and semantics and their own launch geometry (:func:`cutlass_geometry`: one
block per TBM rows). In this benchmark's output "shipped" names the SIMT baselines
(``benchmarks/kernels_baseline/aux_trade_outcome_forward_kernel.cu`` and ``aux_next_bar_forward_kernel.cu``,
shipped until 5 December 2026), launched at their own geometry (:data:`SIMT_GRID_ROWS`, :data:`SIMT_BLOCK`), not
the contracts'. The first Linear is a CUTLASS 2.x
threadblock GEMM per 128-unit hidden chunk (``DefaultGemm``, ``Sm80``, ``OpMultiplyAddFastF32``), the second
Linear and the softmax SIMT fp32 as shipped. Headers, tiles and the nvcc lines are
``gpu_fwd_cutlass``'s (``cutlass_include``, :class:`HeadTile` = its ``Tile`` with this source's defaults and
macro prefix ``AUX_HEAD_CUTLASS``; TBN is the hidden chunk and stays 128; suffix "_rn": both tf32 parts of
the split rounded to nearest, the shipped default since 5 December; "_rz": CUTLASS's truncating split; tile
names always carry the suffix). ``--tiles``: the first build is "the candidate" (by default the shipped build:
64 x 128 x 16 with the round-to-nearest split), the others (by default the same tile with CUTLASS's truncating
split and three other tiles) are measured beside it for the record and decide nothing.

Cases (``shapes_of``), per head (``--heads``): the shipped (SH2, H, K) from the contracts' fixed dims, the
same with every pointer one float off 16-byte alignment (both kernels' scalar paths), every other
combination of the contract's ``[kernel.verify] dims``, and for the trade-outcome head K = 0 and
K = AUX_K_MAX + 1 (the K-range rule: h1 as usual, logits and probs NaN for k < K), each at ``--sizes``.

Per case:

1. **Accuracy**: h_s2 standard normal, W1 and b1 uniform in +-1/sqrt(SH2), W2 and b2 in +-1/sqrt(H) (a Linear's
   init), float32, seeded; the reference is the contract's (``audit.references.dqn_aux``, float64). Every
   output of the shipped kernel, each candidate and torch in float32 with TF32 off (``F.linear``, ``F.elu``,
   ``F.linear``, ``torch.softmax``) is compared with it by ``audit.runtime._compare.compare`` under the
   contract's tolerance, the comparison ``wireup verify`` makes. Outputs have 3 guard rows past B and are
   poisoned before each checked launch (NaN; a finite sentinel in the K-range cases, where the kernel
   itself writes NaN): an unwritten element shows, and a guard row that is no longer all poison is a write
   past B. Launch arguments and buffer shapes come from the contract's parameter list.
2. **Determinism**: each kernel runs 3 times on the same inputs; every output must be bit-identical.
3. **Time** (shipped shape, aligned, at ``--time-sizes``): each kernel and the torch forward captured ``rep``
   times into one CUDA graph (``gpu_wgrad_tc.graph_time`` / ``torch_graph_time``), median (min-max) of
   ``--replays`` replays after ``--warmup``, divided by ``rep``.

Prints a table and writes ``$OUT/gpu_head_fwd_cutlass.json`` (``--json PATH`` otherwise). Exit status 1 when
the candidate (the first tile) fails a tolerance, determinism, the K-range rule or writes past B anywhere, 2
when the CUTLASS headers cannot be found; 0 otherwise. The verdict against torch (the issue's bar: error no
larger than torch float32's) is reported per case, not in the exit status.

    python3 benchmarks/gpu_head_fwd_cutlass.py              # on the H200 (CuPy + torch), ~1-3 minutes
    python3 benchmarks/gpu_head_fwd_cutlass.py --cpu-check  # here, no GPU: the cases, the geometry and the nvcc builds
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_fwd_cutlass import (  # noqa: E402
    GUARD_ROWS,
    SIZES,
    TIME_SIZES,
    HeadersMissing,
    Tile,
    accuracy,
    candidate_command,
    compile_jobs,
    cutlass_include,
    int_list,
    not_worse,
    shipped_command,
)
from gpu_wgrad_tc import REPO, ceil_div, environment, graph_time, log, torch_graph_time  # noqa: E402

from audit.load import load_contracts  # noqa: E402
from audit.references import dqn_aux  # noqa: E402
from audit.runtime._compare import Tolerance  # noqa: E402

CANDIDATE_SOURCE = "kernels/aux_head_forward_cutlass.cu"
SIMT_GRID_ROWS = 32  # the SIMT baselines' launch: grid = (ceil_div(B, 32), 1, 1), block = (128, 1, 1)
SIMT_BLOCK = (128, 1, 1)
INPUTS = ("h_s2", "W1", "b1", "W2", "b2")


@functools.lru_cache(maxsize=1)
def aux_k_max() -> int:
    """``AUX_K_MAX`` of kernels/aux_common.cuh (the largest K the trade-outcome head takes)."""
    m = re.search(r"#define AUX_K_MAX (\d+)", (REPO / "kernels" / "aux_common.cuh").read_text())
    if m is None:
        raise RuntimeError("kernels/aux_common.cuh defines no AUX_K_MAX")
    return int(m[1])


@dataclasses.dataclass(frozen=True)
class Head:
    """One head forward: the SIMT baseline (the contract's kernel name, its former entry), its source, the candidate's entry,
    its outputs, the dim counting its outputs per row (``K`` or ``KNB``) and the contract's reference."""

    kernel: str
    source: str
    entry: str
    outputs: tuple[str, ...]
    k_dim: str
    reference: Callable[..., dict]
    short: str


HEADS = (
    Head("aux_trade_outcome_forward", "benchmarks/kernels_baseline/aux_trade_outcome_forward_kernel.cu", "aux_trade_outcome_forward_cutlass",
         ("h1_out", "logits", "probs"), "K", dqn_aux.aux_trade_outcome_forward, "trade_outcome"),
    Head("aux_next_bar_forward", "benchmarks/kernels_baseline/aux_next_bar_forward_kernel.cu", "aux_next_bar_forward_cutlass",
         ("h1_out", "pred"), "KNB", dqn_aux.aux_next_bar_forward, "next_bar"),
)  # fmt: skip
HEAD_BY_KERNEL = {h.kernel: h for h in HEADS}
HEAD_BY_SHORT = {h.short: h for h in HEADS}


# ---------------------------------------------------------------------------------------------------
# the tile, the geometry, the build


@dataclasses.dataclass(frozen=True)
class HeadTile(Tile):
    """A build of the head candidate: ``gpu_fwd_cutlass.Tile`` with this source's defaults (64 x 128 x 16,
    warps 32 x 32 since 5 December, 3 stages, the round-to-nearest split: ``-DAUX_HEAD_CUTLASS_SPLIT_RN=1``,
    kernels/cutlass_fast_f32_rn.cuh; the ``_rz`` suffix: ``=0``, CUTLASS's truncating split) and macros
    (``-DAUX_HEAD_CUTLASS_TBM=...``). TBN is the hidden chunk the read-back spreads over a warp (one float4
    per lane): always 128. Every build stages the accumulation per k8 step (the source's
    ``AUX_CUTLASS_STAGE_K8`` default, 1 since 5 December): with warps of 64 x 32 that fragment spills."""

    tbm: int = 64
    tbn: int = 128
    tbk: int = 16
    wm: int = 32
    wn: int = 32
    stages: int = 3
    split: str = "rn"
    macro: ClassVar[str] = "AUX_HEAD_CUTLASS"

    @classmethod
    def parse(cls, text: str) -> HeadTile:
        tile = super().parse(text)
        if tile.tbn != 128:
            raise argparse.ArgumentTypeError(f"tile {text!r}: the head candidate's TBN is its 128-unit hidden chunk: "
                                             "TBMx128xTBK_WMxWN_STAGES[_rn|_rz], e.g. 64x128x16_64x32_3_rz")
        return tile


DEFAULT_TILE = HeadTile()  # the shipped build (the source's defaults: round-to-nearest split)
# the shipped tile (8 warps of 32 x 32) and CUTLASS's truncating split of it; 32-row tiles (2x the blocks) with
# 3 and 4 stages; 4 warps of 64 x 32 over the same tile (the default until 5 December; it spills when staged per k8)
DEFAULT_TILES = (DEFAULT_TILE, dataclasses.replace(DEFAULT_TILE, split="rz"), HeadTile(32, 128, 16, 32, 32, 3),
                 HeadTile(32, 128, 16, 32, 32, 4), HeadTile(64, 128, 16, 64, 32, 3))


def cutlass_geometry(B: int, tile: HeadTile = DEFAULT_TILE) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The candidates' launch (their header comment): grid (ceil_div(B, TBM), 1, 1), block ((TBM / WM) * (TBN / WN) * 32, 1, 1)."""
    return (ceil_div(B, tile.tbm), 1, 1), (tile.threads, 1, 1)


def chain_spec(head: Head, tile: HeadTile = DEFAULT_TILE) -> str:
    """The ``gpu_chain_vs_torch.py --candidate`` spec launching ``head``'s candidate (built with the source's
    defaults, which ``tile`` must be) in place of the shipped kernel; the geometry as contract expressions over B."""
    if tile != DEFAULT_TILE:
        raise ValueError(f"the chain builds the source with its defaults ({DEFAULT_TILE.name}), not {tile.name}")
    return f"{head.kernel}={CANDIDATE_SOURCE}:{head.entry};grid=ceil_div(B, {tile.tbm}),1,1;block={tile.threads},1,1"


def build(out_dir: Path, heads: tuple[Head, ...], tiles: tuple[HeadTile, ...], include: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """nvcc each head's shipped source and one candidate cubin per tile (both entries), in parallel:
    ({tag: cubin}, {tag: ptxas summary}); tags "shipped <kernel>" and the tile names."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = {f"shipped {h.kernel}": shipped_command(out_dir / f"{h.kernel}.cubin", h.source) for h in heads}
    for t in tiles:
        jobs[t.name] = candidate_command(out_dir / f"head_cutlass_{t.name}.cubin", include, t, CANDIDATE_SOURCE)
    return compile_jobs(jobs)


# ---------------------------------------------------------------------------------------------------
# the cases, from the contracts


@dataclasses.dataclass(frozen=True)
class Shape:
    head: str  # the shipped kernel's name
    SH2: int
    H: int
    K: int  # the head's outputs per row: K (trade-outcome) or KNB (next-bar)
    origin: str  # "shipped", "shipped, misaligned", "[kernel.verify] dims" or "K-range rule"
    misaligned: bool = False

    @property
    def k_in_range(self) -> bool:
        return 1 <= self.K <= aux_k_max()


def fixed_dims(cs) -> dict[str, int]:
    return {d.name: int(d.value) for d in cs.dims if d.kind == "fixed"}


def shapes_of(cs, heads: tuple[Head, ...] = HEADS) -> list[Shape]:
    """Per head: the shipped (SH2, H, K), the same one float off alignment, the other combinations of the verify
    dims (SH2 x H x K, in the contract's order), then (trade-outcome) K = 0 and K = AUX_K_MAX + 1."""
    fixed = fixed_dims(cs)
    shapes: list[Shape] = []
    for head in heads:
        ship = (fixed["SH2"], fixed["H"], fixed[head.k_dim])
        shapes += [Shape(head.kernel, *ship, "shipped"), Shape(head.kernel, *ship, "shipped, misaligned", True)]
        v = cs.kernel_map[head.kernel].verify
        dims = dict(v.dims) if v is not None else {}
        for combo in itertools.product(*(dims.get(n, (fixed[n],)) for n in ("SH2", "H", head.k_dim))):
            combo = tuple(int(c) for c in combo)
            if combo != ship:
                shapes.append(Shape(head.kernel, *combo, "[kernel.verify] dims"))
        if head.k_dim == "K":
            shapes += [Shape(head.kernel, fixed["SH2"], fixed["H"], k, "K-range rule") for k in (0, aux_k_max() + 1)]
    return shapes


def tolerance(cs, head: Head) -> Tolerance:
    v = cs.kernel_map[head.kernel].verify
    return Tolerance.of(v.rtol if v is not None else None, v.atol if v is not None else None)


def env_of(cs, shape: Shape, B: int) -> dict[str, int]:
    """The dims of one launch: the contracts' fixed dims with B, SH2, H and the head's K (or KNB) of the case."""
    return {**fixed_dims(cs), "B": B, "SH2": shape.SH2, "H": shape.H, HEAD_BY_KERNEL[shape.head].k_dim: shape.K}


def shipped_geometry(cs, shape: Shape, B: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The SIMT baseline's launch (its own geometry; the contracts now launch the CUTLASS kernels)."""
    return (ceil_div(B, SIMT_GRID_ROWS), 1, 1), SIMT_BLOCK


def buffer_shapes(cs, shape: Shape, B: int) -> dict[str, tuple[int, ...]]:
    """Every pointer parameter's shape from the contract at the case's dims; outputs with GUARD_ROWS more rows."""
    env = env_of(cs, shape, B)
    out = {}
    for p in cs.kernel_map[shape.head].params:
        if p.kind != "tensor":
            continue
        dims = [int(e.evaluate(env, cs.slot_indices)) for e in p.shape]
        if p.role == "out":
            dims[0] += GUARD_ROWS
        out[p.name] = tuple(dims)
    return out


def launch_args(cs, shape: Shape, B: int, bufs: dict) -> tuple:
    """The kernel's arguments in the contract's order: the buffers, then each scalar's dim expression as int32."""
    env = env_of(cs, shape, B)
    return tuple(bufs[p.name] if p.kind == "tensor" else np.int32(int(p.value.evaluate(env, cs.slot_indices)))
                 for p in cs.kernel_map[shape.head].params)


def inputs(shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, np.ndarray]:
    """h_s2 standard normal; W1, b1 uniform in +-1/sqrt(SH2); W2, b2 uniform in +-1/sqrt(H); float32."""
    rng = np.random.default_rng(seed)
    b_in, b_hid = 1.0 / math.sqrt(max(shapes["W1"][1], 1)), 1.0 / math.sqrt(max(shapes["W2"][1], 1))
    return {"h_s2": rng.standard_normal(shapes["h_s2"], dtype=np.float32),
            "W1": rng.uniform(-b_in, b_in, shapes["W1"]).astype(np.float32),
            "b1": rng.uniform(-b_in, b_in, shapes["b1"]).astype(np.float32),
            "W2": rng.uniform(-b_hid, b_hid, shapes["W2"]).astype(np.float32),
            "b2": rng.uniform(-b_hid, b_hid, shapes["b2"]).astype(np.float32)}  # fmt: skip


def checked_outputs(head: Head, shape: Shape) -> tuple[str, ...]:
    """The outputs compared with the reference: all of them, or h1 alone where K is outside [1, AUX_K_MAX]."""
    return head.outputs if shape.k_in_range else ("h1_out",)


def poison_of(shape: Shape) -> np.float32:
    """NaN, except in the K-range cases, where NaN is what the kernel must write: a finite sentinel there."""
    return np.float32(np.nan) if shape.k_in_range else np.float32(-7.0e37)


def judge(outs: list[dict[str, np.ndarray]], ref: dict[str, np.ndarray], head: Head, shape: Shape, B: int, tol: Tolerance) -> dict:
    """One kernel's three runs: per-output accuracy of the first, bit-determinism, untouched guard rows and (K out
    of range) logits and probs all NaN in rows < B."""
    res: dict = {"outputs": {n: accuracy(outs[0][n][:B], ref[n], tol) for n in checked_outputs(head, shape)}}
    res["ok"] = all(a["ok"] for a in res["outputs"].values())
    res["rel_norm"] = max(a["rel_norm"] for a in res["outputs"].values())
    res["max_rel"] = max(a["max_rel"] for a in res["outputs"].values())
    res["deterministic"] = all(np.array_equal(outs[0][n].view(np.uint32), o[n].view(np.uint32)) for o in outs[1:] for n in head.outputs)
    poison = poison_of(shape)
    res["guard_rows_untouched"] = all(np.array_equal(o[n][B:].view(np.uint32), np.full_like(o[n][B:], poison).view(np.uint32))
                                      for o in outs for n in head.outputs)
    res["nan_rule"] = None if shape.k_in_range else all(bool(np.isnan(o[n][:B]).all()) for o in outs for n in head.outputs if n != "h1_out")
    return res


def verdict(res: dict) -> str:
    if not res["ok"]:
        bad = [f"{n} {a['status']}" for n, a in res["outputs"].items() if not a["ok"]]
        return "FAIL " + ", ".join(bad)
    if not res["deterministic"]:
        return "FAIL nondeterministic"
    if not res["guard_rows_untouched"]:
        return "FAIL wrote past B"
    if res["nan_rule"] is False:
        return "FAIL K-range rule (logits/probs not NaN)"
    return "ok"


# ---------------------------------------------------------------------------------------------------
# on the GPU


class Runner:
    def __init__(self, cs, cubins: dict[str, Path], heads: tuple[Head, ...], tiles: tuple[HeadTile, ...], args):
        import cupy as cp
        import torch

        self.cp, self.torch = cp, torch
        self.cs, self.tiles, self.args = cs, {t.name: t for t in tiles}, args
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.tags = ["shipped", *(t.name for t in tiles)]  # the first tile is the candidate
        self.fn = {}
        for head in heads:
            for tag in self.tags:
                cubin = cubins[f"shipped {head.kernel}" if tag == "shipped" else tag]
                fn = cp.RawModule(path=str(cubin)).get_function(head.kernel if tag == "shipped" else head.entry)
                getattr(fn, "kernel", None)  # load the module now, outside any capture
                self.fn[(tag, head.kernel)] = fn
        self.stream = cp.cuda.Stream(non_blocking=True)

    def geometry(self, tag: str, shape: Shape, B: int):
        return shipped_geometry(self.cs, shape, B) if tag == "shipped" else cutlass_geometry(B, self.tiles[tag])

    def launch(self, tag: str, shape: Shape, B: int, bufs: dict) -> None:
        grid, block = self.geometry(tag, shape, B)
        self.fn[(tag, shape.head)](grid, block, launch_args(self.cs, shape, B, bufs), stream=self.stream)

    def checked(self, tag: str, shape: Shape, B: int, bufs: dict) -> dict[str, np.ndarray]:
        """One launch into poisoned outputs (with their guard rows); the host copies, guard rows included."""
        cp = self.cp
        head = HEAD_BY_KERNEL[shape.head]
        for n in head.outputs:
            bufs[n].fill(poison_of(shape))
        cp.cuda.Device().synchronize()
        self.launch(tag, shape, B, bufs)
        self.stream.synchronize()
        return {n: cp.asnumpy(bufs[n]) for n in head.outputs}

    def device_buffers(self, host: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]], misaligned: bool) -> dict:
        """Device copies of the inputs and the outputs' buffers; misaligned: each one float into a larger
        allocation (4 bytes off 16-byte alignment)."""
        cp = self.cp
        off = 1 if misaligned else 0
        bufs = {}
        for name, shp in shapes.items():
            base = cp.empty(int(np.prod(shp)) + off, dtype=cp.float32)
            view = base[off:].reshape(shp)
            if name in host:
                view[...] = cp.asarray(host[name])
            bufs[name] = view
        return bufs

    def torch_forward(self, head: Head, t: dict, hidden_only: bool = False):
        """torch float32 (TF32 off): F.linear, F.elu, F.linear, then softmax (trade-outcome) or column 0 (next-bar);
        ``hidden_only``: h1 alone (the K-range cases)."""
        F = self.torch.nn.functional
        h1 = F.elu(F.linear(t["h_s2"], t["W1"], t["b1"]))
        if hidden_only:
            return {"h1_out": h1}
        z = F.linear(h1, t["W2"], t["b2"])
        if "probs" in head.outputs:
            return {"h1_out": h1, "logits": z, "probs": self.torch.softmax(z, dim=1)}
        return {"h1_out": h1, "pred": z[:, 0]}

    def case(self, shape: Shape, B: int, seed: int) -> dict:
        cp, torch = self.cp, self.torch
        head = HEAD_BY_KERNEL[shape.head]
        tol = tolerance(self.cs, head)
        shapes = buffer_shapes(self.cs, shape, B)
        host = inputs(shapes, seed)
        # out of the K range only h1 is compared: its reference with a one-class stand-in for W2 and b2
        ref_in = host if shape.k_in_range else {**host, "W2": np.zeros((1, shape.H), np.float32), "b2": np.zeros(1, np.float32)}
        ref = head.reference(**ref_in)
        bufs = self.device_buffers(host, shapes, shape.misaligned)
        flop = 2.0 * B * shape.SH2 * shape.H + 2.0 * B * shape.H * max(shape.K, 0)
        row: dict = {"head": head.short, "SH2": shape.SH2, "H": shape.H, "K": shape.K, "B": B, "origin": shape.origin,
                     "misaligned": shape.misaligned, "grid": {tag: list(self.geometry(tag, shape, B)[0]) for tag in self.tags}, "flop": flop}
        for tag in self.tags:
            row[tag] = judge([self.checked(tag, shape, B, bufs) for _ in range(3)], ref, head, shape, B, tol)
        # out of the K range torch computes h1 alone (W2 and b2 may be empty there)
        tin = {n: torch.as_tensor(bufs[n], device="cuda") for n in (INPUTS if shape.k_in_range else ("h_s2", "W1", "b1"))}
        out_t = self.torch_forward(head, tin, hidden_only=not shape.k_in_range)
        torch.cuda.synchronize()
        t_res = {n: accuracy(out_t[n].cpu().numpy(), ref[n], tol) for n in checked_outputs(head, shape)}
        row["torch_fp32"] = {"outputs": t_res, "ok": all(a["ok"] for a in t_res.values()),
                             "rel_norm": max(a["rel_norm"] for a in t_res.values()), "max_rel": max(a["max_rel"] for a in t_res.values())}
        for tag in self.tags:
            row[tag]["not_worse_than_torch"] = all(not_worse(row[tag]["outputs"][n], t_res[n]) for n in t_res)
        if B in self.args.time_sizes and shape.origin == "shipped":
            hint = flop / 20e12 * 1e6 + 3.0  # ~20 TFLOP/s + 3 us, only to size the graph
            for tag in self.tags:
                row[tag]["time"], row[tag]["rep"] = graph_time(cp, self.stream, lambda t=tag: self.launch(t, shape, B, bufs), hint,
                                                              self.args.warmup, self.args.replays)
            row["torch_fp32"]["time"], row["torch_fp32"]["rep"] = torch_graph_time(torch, lambda: self.torch_forward(head, tin), hint,
                                                                                  self.args.warmup, self.args.replays)
            for tag in (*self.tags, "torch_fp32"):
                t = row[tag]["time"]["median_us"]
                row[tag]["tflops"] = flop / (t * 1e-6) / 1e12 if t > 0 else None
        return row

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()
        self.torch.cuda.empty_cache()


def print_table(rows: list[dict], tags: list[str]) -> None:
    cand = tags[1]
    print()
    print(f"aux head forwards: shipped SIMT vs CUTLASS 3xTF32 candidate ({cand}; others for the record) vs torch fp32 (TF32 off); "
          "rel = the worst output's relative error norm against the float64 reference (each head's contract tolerance)")
    hdr = (f"{'head':<13} {'SH2':>4} {'H':>4} {'K':>2} {'B':>6} {'case':<20} | {'rel shipped':>11} {'rel cand':>9} {'rel torch':>9} | "
           f"{'maxrel cand':>11} {'maxrel torch':>12} | {'<= torch':>8} | verdict cand (others)")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        lead = f"{r['head']:<13} {r['SH2']:>4} {r['H']:>4} {r['K']:>2} {r['B']:>6} {r['origin']:<20}"
        if "error" in r:
            print(f"{lead} | ERROR {r['error']}")
            continue
        c, t, s = r[cand], r["torch_fp32"], r["shipped"]
        others = " ".join(verdict(r[tag]) for tag in tags[2:])
        print(f"{lead} | {s['rel_norm']:>11.2e} {c['rel_norm']:>9.2e} {t['rel_norm']:>9.2e} | {c['max_rel']:>11.2e} {t['max_rel']:>12.2e} | "
              f"{'yes' if c['not_worse_than_torch'] else 'NO':>8} | {verdict(c)}{f' ({others})' if others else ''}; shipped {verdict(s)}")
    timed = [r for r in rows if "error" not in r and "time" in r[cand]]
    if timed:
        print()
        print("times: median us per launch (CUDA graph), min-max; TFLOP/s (fp32-equivalent, both Linears)")
        for r in timed:
            parts = [f"{tag} {r[tag]['time']['median_us']:.2f} ({r[tag]['time']['min_us']:.2f}-{r[tag]['time']['max_us']:.2f}, "
                     f"{(r[tag]['tflops'] or 0):.1f} TF/s)" for tag in (*tags, "torch_fp32")]
            print(f"  {r['head']:<13} B={r['B']:>6}: " + "; ".join(parts) +
                  f"; shipped/candidate x{r['shipped']['time']['median_us'] / r[cand]['time']['median_us']:.2f}, "
                  f"torch/candidate x{r['torch_fp32']['time']['median_us'] / r[cand]['time']['median_us']:.2f}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heads", type=lambda s: [v.strip() for v in s.split(",") if v.strip()], default=[h.short for h in HEADS],
                    help=f"heads checked (comma-separated): {', '.join(h.short for h in HEADS)}")
    ap.add_argument("--sizes", type=int_list, default=list(SIZES), help="batch sizes B checked (comma-separated)")
    ap.add_argument("--time-sizes", type=int_list, default=list(TIME_SIZES), help="B timed at the shipped shape; empty: none")
    ap.add_argument("--tiles", type=lambda s: [HeadTile.parse(t) for t in s.split(",") if t.strip()],
                    default=list(DEFAULT_TILES),
                    help="candidate builds TBMx128xTBK_WMxWN_STAGES[_rn|_rz] (split: _rn round-to-nearest, the shipped default; "
                         "_rz CUTLASS's truncating); the first is the candidate")
    ap.add_argument("--replays", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", default=None, help="result path (default $OUT/gpu_head_fwd_cutlass.json when $OUT is set)")
    ap.add_argument("--cpu-check", action="store_true", help="no GPU: the cases, the geometry and the nvcc builds only")
    args = ap.parse_args(argv)
    if not args.tiles:
        ap.error("--tiles: at least one tile")
    unknown = [h for h in args.heads if h not in HEAD_BY_SHORT]
    if unknown or not args.heads:
        ap.error(f"--heads: expected some of {', '.join(HEAD_BY_SHORT)}, got {', '.join(unknown) or 'none'}")
    args.tiles = list(dict.fromkeys(args.tiles))  # a tile named twice is built once
    args.heads = tuple(HEAD_BY_SHORT[h] for h in dict.fromkeys(args.heads))
    return args


def cpu_check(cs, args, include: Path) -> int:
    """No GPU: the cases and both kernels' grids at B = 65536, the chain specs, and every nvcc build."""
    shapes = shapes_of(cs, args.heads)
    for s in shapes:
        grids = ", ".join(f"{t.name} {cutlass_geometry(65536, t)}" for t in args.tiles)
        print(f"{s.head} SH2={s.SH2:<4} H={s.H:<4} K={s.K:<2} ({s.origin}): shipped {shipped_geometry(cs, s, 65536)}, candidate {grids} at B=65536")
    for h in args.heads:
        print(f"tolerance {h.kernel}: {tolerance(cs, h)}; chain spec: --candidate '{chain_spec(h)}'")
    print(f"CUTLASS include: {include}")
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), args.heads, tuple(args.tiles), include)
    print(f"{len(shapes)} shapes x {len(args.sizes)} batch sizes; nvcc built {len(args.heads)} shipped kernel(s) and "
          f"{len(args.tiles)} candidate tile(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cs = load_contracts(REPO / "contracts", REPO)
    try:
        include = cutlass_include()
    except HeadersMissing as exc:
        print(f"gpu_head_fwd_cutlass: {exc}", file=sys.stderr)
        return 2
    if args.cpu_check:
        return cpu_check(cs, args, include)

    shapes = shapes_of(cs, args.heads)
    log(f"{len(shapes)} shapes; B = {args.sizes}; CUTLASS {include}")
    with tempfile.TemporaryDirectory(prefix="head_fwd_cutlass_") as tmp:
        cubins, ptxas = build(Path(tmp), args.heads, tuple(args.tiles), include)
        runner = Runner(cs, cubins, args.heads, tuple(args.tiles), args)
        tags = runner.tags
        cand = tags[1]
        results: dict = {"environment": environment(), "kernels": [h.kernel for h in args.heads], "candidate_source": CANDIDATE_SOURCE,
                         "candidate": cand, "tiles": [t.name for t in args.tiles], "cutlass_include": str(include), "ptxas": ptxas,
                         "tolerance": {h.kernel: dataclasses.asdict(tolerance(cs, h)) for h in args.heads},
                         "replays": args.replays, "warmup": args.warmup, "rows": []}
        for i, shape in enumerate(shapes):
            for B in args.sizes:
                try:
                    row = runner.case(shape, B, args.seed + 1000 * i + B)
                except Exception as exc:  # noqa: BLE001 - report the case and go on
                    row = {"head": HEAD_BY_KERNEL[shape.head].short, "SH2": shape.SH2, "H": shape.H, "K": shape.K, "B": B,
                           "origin": shape.origin, "misaligned": shape.misaligned, "error": f"{type(exc).__name__}: {exc}"}
                runner.release()
                results["rows"].append(row)
                where = f"{shape.head} SH2={shape.SH2} H={shape.H} K={shape.K} B={B} ({shape.origin})"
                if "error" in row:
                    log(f"{where}: {row['error']}")
                else:
                    times = "".join(f", {tag} {row[tag]['time']['median_us']:.2f} us" for tag in (*tags, "torch_fp32") if "time" in row[tag])
                    log(f"{where}: candidate rel {row[cand]['rel_norm']:.2e} ({verdict(row[cand])}), shipped {row['shipped']['rel_norm']:.2e} "
                        f"({verdict(row['shipped'])}), torch {row['torch_fp32']['rel_norm']:.2e}{times}")
    rows = results["rows"]
    bad = [r for r in rows if "error" in r or verdict(r[cand]) != "ok"]
    worse = [r for r in rows if "error" not in r and not r[cand]["not_worse_than_torch"]]
    results["candidate_ok"] = not bad
    results["candidate_worse_than_torch"] = [{k: r[k] for k in ("head", "SH2", "H", "K", "B", "origin")} for r in worse]
    path = args.json or (str(Path(os.environ["OUT"]) / "gpu_head_fwd_cutlass.json") if os.environ.get("OUT") else None)
    if path:
        Path(path).write_text(json.dumps(results, indent=1, default=str))
        log(f"wrote {path}")
    print_table(rows, tags)
    print(f"\ncandidate {cand}: {'every case within tolerance, bit-deterministic, nothing written past B' if not bad else f'{len(bad)} case(s) FAILED'}; "
          f"error above torch fp32's in {len(worse)} of {len(rows)} case(s)")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
