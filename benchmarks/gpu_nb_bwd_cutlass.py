"""A CUTLASS 3xTF32 candidate of the next-bar head backward (issue 18) against the shipped SIMT kernel and torch
on an H200: accuracy of every output, the bad-slot rule, determinism, unwritten rows and time, in ONE process.

    d_pred = 2 (pred - label / max(isv[slot], 1e-6)) / B                    -> db2_partial [B, 1]
    dz1    = d_pred W2[0] ELU'(h1)                                          -> db1_partial [B, H]
    dh     = dz1 @ W1          (B x H times H x SH2: the GEMM)              -> dh_s2_aux_out [B, SH2]
    accum += saxpy_alpha dh                                                 -> dh_s2_aux_accum [B, SH2]
    per-sample call only: dW1_partial [B, H, SH2] = dz1 (x) h_s2, dW2_partial [B, 1, H] = d_pred h1

The candidate (``benchmarks/kernels_baseline/aux_next_bar_backward_cutlass.cu``, entry
``aux_next_bar_backward_cutlass``; not shipped, no contract) has the shipped ``aux_next_bar_backward``'s
parameters and semantics and its own launch geometry (:func:`cutlass_geometry`: one block per TBM rows, all of
SH2). Its GEMM is one CUTLASS 2.x threadblock tile per TBN-column chunk (``DefaultGemm``, ``Sm80``,
``OpMultiplyAddFastF32``); the rest is the shipped fp32 arithmetic. Headers, tiles and the nvcc lines are
``gpu_fwd_cutlass``'s (``cutlass_include``, :class:`NbBwdTile` = its ``Tile`` with this source's defaults and
macro prefix ``AUX_NB_BWD_CUTLASS``; suffix "_rn": both tf32 parts of the split rounded to nearest, "_rz":
CUTLASS's truncating split, this source's default, unlike the shipped forwards'; tile names always carry the
suffix). ``--tiles``: the first build is "the candidate" (by default CUTLASS's stock 3xTF32 at 32 x 128 x 16,
warps 32 x 32, 4 stages, the truncating split),
the others (by default its round-to-nearest split, a 64-row tile, and 64 x 128 and 128 x 64 tiles of 8 warps)
are measured beside it for the record and decide nothing.

Cases (``shapes_of``): the shipped (SH2, H) from the contracts' fixed dims, the same with every pointer one
float off 16-byte alignment (both kernels' scalar paths), every other combination of the contract's
``[kernel.verify] dims`` (SH2 = 253; H = 129, 100), the shipped shape with saxpy_alpha = 0.5 (the contract
binds 1.0) and with the ISV slot out of range (the bad-slot rule: every output of every row < B, the
accumulator included, is NaN), each at ``--sizes`` (``--cases`` runs some of these kinds only; a case's inputs
are the same either way). Each case runs the **fused** call (dW1_partial and dW2_partial NULL, as
``aux_heads_backward_fused`` binds them) and, at B <= ``--per-sample-max``, the **per-sample** call (both
non-NULL, as ``aux_heads_backward`` binds them).

Per case and call:

1. **Accuracy**: h_s2 and h1 = ELU(standard normal), W1 uniform in +-1/sqrt(SH2), W2 in +-1/sqrt(H), pred
   standard normal, label 1e-3 x standard normal with isv[AUX_LABEL_SCALE_EMA] = mean |label| (log-return
   labels, the scale the EMA tracks), the accumulator standard normal; float32, seeded. The reference is the
   contract's (``audit.references.dqn_aux.aux_next_bar_backward``, float64). Every output of the shipped
   kernel, each candidate and torch in float32 with TF32 off (the same formulas; ``dz1 @ W1`` a matmul) is
   compared with it by ``audit.runtime._compare.compare`` under the contract's tolerance, the comparison
   ``wireup verify`` makes. Outputs have 3 guard rows past B; before each checked launch they are poisoned
   (NaN; a finite sentinel in the bad-slot case, where NaN is what the kernel must write) and the accumulator
   gets its start value in rows < B, poison past them: an unwritten element shows, and a guard row that is no
   longer all poison is a write past B. Launch arguments and buffer shapes come from the contract's
   parameter list (a NULL binding is a 0 pointer).
2. **Determinism**: each kernel runs 3 times on the same inputs; every output must be bit-identical.
3. **Time** (shipped shape, aligned, fused call, at ``--time-sizes``): each kernel and the torch backward
   captured ``rep`` times into one CUDA graph (``gpu_wgrad_tc.graph_time`` / ``torch_graph_time``), median
   (min-max) of ``--replays`` replays after ``--warmup``, divided by ``rep``; TFLOP/s (the GEMM and the
   elementwise terms) and GB/s (each tensor read or written once).

Prints a table and writes ``$OUT/gpu_nb_bwd_cutlass.json`` (``--json PATH`` otherwise). Exit status 1 when the
candidate (the first tile) fails a tolerance, determinism or the bad-slot rule or writes past B anywhere, 2
when the CUTLASS headers cannot be found; 0 otherwise. The verdict against torch (the issue's bar: error no
larger than torch float32's) is reported per case, not in the exit status.

    python3 benchmarks/gpu_nb_bwd_cutlass.py              # on the H200 (CuPy + torch), ~1-3 minutes
    python3 benchmarks/gpu_nb_bwd_cutlass.py --cpu-check  # here, no GPU: the cases, the geometry and the nvcc builds
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import sys
import tempfile
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
from gpu_head_fwd_cutlass import fixed_dims  # noqa: E402
from gpu_wgrad_tc import REPO, ceil_div, environment, graph_time, log, torch_graph_time  # noqa: E402

from audit.load import load_contracts  # noqa: E402
from audit.references import dqn_aux  # noqa: E402
from audit.runtime._compare import Tolerance  # noqa: E402

KERNEL = "aux_next_bar_backward"  # the shipped kernel (and its contract)
SHIPPED_SOURCE = "kernels/aux_next_bar_backward_kernel.cu"
CANDIDATE_SOURCE = "benchmarks/kernels_baseline/aux_next_bar_backward_cutlass.cu"
CANDIDATE = "aux_next_bar_backward_cutlass"
OPTIONAL = ("dW1_partial", "dW2_partial")  # NULL in the fused call, bound in the per-sample call
FUSED_OUTPUTS = ("db1_partial", "db2_partial", "dh_s2_aux_out", "dh_s2_aux_accum")
PER_SAMPLE_OUTPUTS = ("dW1_partial", "db1_partial", "dW2_partial", "db2_partial", "dh_s2_aux_out", "dh_s2_aux_accum")
PER_SAMPLE_MAX = 256  # largest B of the per-sample call (dW1_partial is B x H x SH2 floats: 8.4 M at 256)
ALPHA_CASE = 0.5  # the saxpy_alpha of the "saxpy_alpha" case (the contract binds 1.0)
BAD_SLOT = dqn_aux.ISV_TOTAL_DIM  # the first slot out of range
POISON_NAN = np.float32(np.nan)
POISON_FINITE = np.float32(-7.0e37)  # where NaN is the expected output


# ---------------------------------------------------------------------------------------------------
# the tile, the geometry, the build


@dataclasses.dataclass(frozen=True)
class NbBwdTile(Tile):
    """A build of the candidate: ``gpu_fwd_cutlass.Tile`` with this source's defaults (32 x 128 x 16, warps 32 x 32,
    4 stages, CUTLASS's truncating split: "rz", a bare tile name's split here) and macros
    (``-DAUX_NB_BWD_CUTLASS_TBM=...``; the ``_rn`` suffix: ``-DAUX_NB_BWD_CUTLASS_SPLIT_RN=1``,
    kernels/cutlass_fast_f32_rn.cuh). TBN is the column chunk of SH2 one GEMM tile covers."""

    tbm: int = 32
    tbn: int = 128
    tbk: int = 16
    wm: int = 32
    wn: int = 32
    stages: int = 4
    split: str = "rz"
    macro: ClassVar[str] = "AUX_NB_BWD_CUTLASS"


DEFAULT_TILE = NbBwdTile()
# the candidate and its round-to-nearest split; 64-row blocks with 64-column chunks (half the blocks, W1 read half
# as often); 8 warps over 64 x 128 and over 128 x 64 (the shipped row tile; one block per SM). The 64 x 32 warp
# tile spills with both alignment instantiations in one entry (the source's header): not offered.
DEFAULT_TILES = (DEFAULT_TILE, dataclasses.replace(DEFAULT_TILE, split="rn"), NbBwdTile(64, 64, 16, 32, 32, 4),
                 NbBwdTile(64, 128, 16, 32, 32, 3), NbBwdTile(128, 64, 16, 32, 32, 3))


def cutlass_geometry(B: int, tile: NbBwdTile = DEFAULT_TILE) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The candidate's launch (its header comment): grid (ceil_div(B, TBM), 1, 1), block ((TBM / WM) * (TBN / WN) * 32, 1, 1)."""
    return (ceil_div(B, tile.tbm), 1, 1), (tile.threads, 1, 1)


def chain_spec(tile: NbBwdTile = DEFAULT_TILE) -> str:
    """The ``gpu_chain_vs_torch.py --candidate`` spec launching the candidate (built with the source's defaults,
    which ``tile`` must be) in place of the shipped kernel; the geometry as contract expressions over B."""
    if tile != DEFAULT_TILE:
        raise ValueError(f"the chain builds the source with its defaults ({DEFAULT_TILE.name}), not {tile.name}")
    return f"{KERNEL}={CANDIDATE_SOURCE}:{CANDIDATE};grid=ceil_div(B, {tile.tbm}),1,1;block={tile.threads},1,1"


def build(out_dir: Path, tiles: tuple[NbBwdTile, ...], include: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """nvcc the shipped source and one candidate cubin per tile, in parallel: ({tag: cubin}, {tag: ptxas summary});
    tags "shipped" and the tile names. The shipped source has two entries of one template body (``KERNEL`` and
    ``aux_next_bar_backward_store``, which ptxas reports first): "shipped"'s summary is ``KERNEL``'s, the one launched."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = {"shipped": shipped_command(out_dir / "shipped.cubin", SHIPPED_SOURCE)}
    for t in tiles:
        jobs[t.name] = candidate_command(out_dir / f"nb_bwd_cutlass_{t.name}.cubin", include, t, CANDIDATE_SOURCE)
    return compile_jobs(jobs, {"shipped": KERNEL, **{t.name: CANDIDATE for t in tiles}})


# ---------------------------------------------------------------------------------------------------
# the cases, from the contracts


@dataclasses.dataclass(frozen=True)
class Shape:
    SH2: int
    H: int
    origin: str  # "shipped", "shipped, misaligned", "[kernel.verify] dims", "saxpy_alpha" or "bad ISV slot"
    misaligned: bool = False
    alpha: float | None = None  # saxpy_alpha; None: the contract's
    slot: int | None = None  # label_scale_slot; None: the contract's (AUX_LABEL_SCALE_EMA)

    @property
    def slot_ok(self) -> bool:
        return self.slot is None or 0 <= self.slot < dqn_aux.ISV_TOTAL_DIM


def shapes_of(cs) -> list[Shape]:
    """The shipped (SH2, H), the same one float off alignment, the verify dims' other (SH2, H) pairs (in the
    contract's order), then the shipped shape with saxpy_alpha = 0.5 and with the ISV slot out of range."""
    fixed = fixed_dims(cs)
    ship = (fixed["SH2"], fixed["H"])
    shapes = [Shape(*ship, "shipped"), Shape(*ship, "shipped, misaligned", True)]
    v = cs.kernel_map[KERNEL].verify
    dims = dict(v.dims) if v is not None else {}
    for combo in itertools.product(*(dims.get(n, (fixed[n],)) for n in ("SH2", "H"))):
        combo = tuple(int(c) for c in combo)
        if combo != ship:
            shapes.append(Shape(*combo, "[kernel.verify] dims"))
    return [*shapes, Shape(*ship, "saxpy_alpha", alpha=ALPHA_CASE), Shape(*ship, "bad ISV slot", slot=BAD_SLOT)]


CASE_KINDS = {"shipped": "shipped", "misaligned": "shipped, misaligned", "verify": "[kernel.verify] dims", "alpha": "saxpy_alpha",
              "slot": "bad ISV slot"}  # --cases keyword -> Shape.origin


def case_kinds(text: str) -> tuple[str, ...]:
    """``--cases``: comma-separated keywords of CASE_KINDS (the origins of the shapes run), in CASE_KINDS' order."""
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in CASE_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"--cases: expected some of {', '.join(CASE_KINDS)}, got {', '.join(unknown) or 'none'}")
    return tuple(k for k in CASE_KINDS if k in kinds)


def calls_at(B: int, per_sample_max: int) -> tuple[str, ...]:
    """The calls checked at B: the fused one always, the per-sample one up to ``per_sample_max``."""
    return ("fused", "per-sample") if B <= per_sample_max else ("fused",)


def tolerance(cs) -> Tolerance:
    v = cs.kernel_map[KERNEL].verify
    return Tolerance.of(v.rtol if v is not None else None, v.atol if v is not None else None)


def env_of(cs, shape: Shape, B: int) -> dict[str, int]:
    return {**fixed_dims(cs), "B": B, "SH2": shape.SH2, "H": shape.H}


def shipped_geometry(cs, shape: Shape, B: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shipped kernel's launch, from its contract's grid and block expressions."""
    k = cs.kernel_map[KERNEL]
    env = env_of(cs, shape, B)
    return (tuple(int(e.evaluate(env, cs.slot_indices)) for e in k.grid), tuple(int(e.evaluate(env, cs.slot_indices)) for e in k.block))


def outputs_of(call: str) -> tuple[str, ...]:
    return PER_SAMPLE_OUTPUTS if call == "per-sample" else FUSED_OUTPUTS


def buffer_shapes(cs, shape: Shape, B: int, call: str) -> dict[str, tuple[int, ...]]:
    """Every bound pointer parameter's shape from the contract at the case's dims (the optional partials only in
    the per-sample call; the ISV its ISV_TOTAL_DIM floats); outputs and the accumulator with GUARD_ROWS more rows."""
    env = env_of(cs, shape, B)
    out: dict[str, tuple[int, ...]] = {}
    for p in cs.kernel_map[KERNEL].params:
        if p.kind == "isv":
            out[p.name] = (dqn_aux.ISV_TOTAL_DIM,)
        elif p.kind == "tensor" and (call == "per-sample" or p.name not in OPTIONAL):
            dims = [int(e.evaluate(env, cs.slot_indices)) for e in p.shape]
            if p.role in ("out", "accumulate"):
                dims[0] += GUARD_ROWS
            out[p.name] = tuple(dims)
    return out


def scalar_values(cs, shape: Shape, B: int) -> dict[str, float | int]:
    """Each scalar parameter's value: the contract's expression at the case's dims, the case's slot and alpha."""
    env = env_of(cs, shape, B)
    vals: dict[str, float | int] = {}
    for p in cs.kernel_map[KERNEL].params:
        if p.kind == "scalar":
            v = p.value.evaluate(env, cs.slot_indices) if hasattr(p.value, "evaluate") else p.value
            vals[p.name] = float(v) if p.dtype.startswith("f") else int(v)
    if shape.slot is not None:
        vals["label_scale_slot"] = shape.slot
    if shape.alpha is not None:
        vals["saxpy_alpha"] = float(shape.alpha)
    return vals


def launch_args(cs, shape: Shape, B: int, bufs: dict) -> tuple:
    """The kernel's arguments in the contract's order: the buffers (a parameter without one, an optional partial
    in the fused call, is a NULL pointer), then each scalar as int32 or float32."""
    vals = scalar_values(cs, shape, B)
    args = []
    for p in cs.kernel_map[KERNEL].params:
        if p.kind == "scalar":
            args.append(np.float32(vals[p.name]) if p.dtype.startswith("f") else np.int32(vals[p.name]))
        else:
            args.append(bufs[p.name] if p.name in bufs else np.uint64(0))
    return tuple(args)


def elu(z: np.ndarray) -> np.ndarray:
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0))).astype(np.float32)


def inputs(shapes: dict[str, tuple[int, ...]], B: int, seed: int) -> dict[str, np.ndarray]:
    """h_s2, h1 = ELU(standard normal); W1 uniform in +-1/sqrt(SH2), W2 in +-1/sqrt(H); pred standard normal; label
    1e-3 x standard normal, isv ones with isv[AUX_LABEL_SCALE_EMA] = mean |label|; the accumulator's start value
    (rows < B) standard normal; float32."""
    rng = np.random.default_rng(seed)
    SH2, H = shapes["h_s2"][1], shapes["h1"][1]
    b_in, b_hid = 1.0 / math.sqrt(max(SH2, 1)), 1.0 / math.sqrt(max(H, 1))
    label = (1e-3 * rng.standard_normal(B)).astype(np.float32)
    isv = np.ones(shapes["isv"], np.float32)
    isv[dqn_aux.AUX_LABEL_SCALE_EMA] = max(float(np.abs(label).mean()), dqn_aux.LABEL_SCALE_FLOOR)
    return {"h_s2": elu(rng.standard_normal((B, SH2), dtype=np.float32)), "h1": elu(rng.standard_normal((B, H), dtype=np.float32)),
            "pred": rng.standard_normal(B, dtype=np.float32), "label": label, "isv": isv,
            "W1": rng.uniform(-b_in, b_in, (H, SH2)).astype(np.float32), "W2": rng.uniform(-b_hid, b_hid, (1, H)).astype(np.float32),
            "accum0": rng.standard_normal((B, SH2), dtype=np.float32)}  # fmt: skip


def reference(host: dict[str, np.ndarray], vals: dict, B: int, call: str) -> dict[str, np.ndarray]:
    """The contract's float64 reference, per-sample partials only for the per-sample call."""
    ref = dqn_aux.aux_next_bar_backward(
        h_s2=host["h_s2"], h1=host["h1"], pred=host["pred"], label=host["label"], isv=host["isv"],
        label_scale_slot=int(vals["label_scale_slot"]), W1=host["W1"], W2=host["W2"], dh_s2_aux_accum=host["accum0"],
        saxpy_alpha=float(np.float32(vals["saxpy_alpha"])), B=B, include_optional=call == "per-sample")  # fmt: skip
    return {n: np.asarray(ref[n]) for n in outputs_of(call)}


def poison_of(shape: Shape) -> np.float32:
    """NaN, except in the bad-slot case, where NaN is what the kernel must write: a finite sentinel there."""
    return POISON_NAN if shape.slot_ok else POISON_FINITE


def judge(outs: list[dict[str, np.ndarray]], ref: dict[str, np.ndarray] | None, shape: Shape, B: int, call: str, tol: Tolerance) -> dict:
    """One kernel's three runs: per-output accuracy of the first (not in the bad-slot case), bit-determinism,
    untouched guard rows, and (bad slot) every output NaN in every row < B."""
    names = outputs_of(call)
    res: dict = {"outputs": {n: accuracy(outs[0][n][:B], ref[n], tol) for n in names} if ref is not None else {}}
    res["ok"] = all(a["ok"] for a in res["outputs"].values())
    res["rel_norm"] = max((a["rel_norm"] for a in res["outputs"].values()), default=0.0)
    res["max_rel"] = max((a["max_rel"] for a in res["outputs"].values()), default=0.0)
    res["deterministic"] = all(np.array_equal(outs[0][n].view(np.uint32), o[n].view(np.uint32)) for o in outs[1:] for n in names)
    poison = poison_of(shape)
    res["guard_rows_untouched"] = all(np.array_equal(o[n][B:].view(np.uint32), np.full_like(o[n][B:], poison).view(np.uint32))
                                      for o in outs for n in names)
    res["nan_rule"] = None if shape.slot_ok else all(bool(np.isnan(o[n][:B]).all()) for o in outs for n in names)
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
        return "FAIL bad-slot rule (outputs not NaN)"
    return "ok"


def flop_of(B: int, SH2: int, H: int) -> float:
    """The fused call's operations: the GEMM, dz1 (3 per element), the SAXPY (2 per element), d_pred (4 per row)."""
    return 2.0 * B * H * SH2 + 3.0 * B * H + 2.0 * B * SH2 + 4.0 * B


def bytes_of(B: int, SH2: int, H: int) -> float:
    """The fused call's bytes, each tensor once: h1 in, db1_partial out, dh_s2_aux_out out, the accumulator in and
    out, pred, label and db2_partial, W1 and W2."""
    return 4.0 * (B * (2 * H + 3 * SH2 + 3) + H * SH2 + H)


# ---------------------------------------------------------------------------------------------------
# on the GPU


class Runner:
    def __init__(self, cs, cubins: dict[str, Path], tiles: tuple[NbBwdTile, ...], args):
        import cupy as cp
        import torch

        self.cp, self.torch = cp, torch
        self.cs, self.tiles, self.args = cs, {t.name: t for t in tiles}, args
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.tags = ["shipped", *(t.name for t in tiles)]  # the first tile is the candidate
        self.fn = {}
        for tag in self.tags:
            fn = cp.RawModule(path=str(cubins[tag])).get_function(KERNEL if tag == "shipped" else CANDIDATE)
            getattr(fn, "kernel", None)  # load the module now, outside any capture
            self.fn[tag] = fn
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.tol = tolerance(cs)

    def geometry(self, tag: str, shape: Shape, B: int):
        return shipped_geometry(self.cs, shape, B) if tag == "shipped" else cutlass_geometry(B, self.tiles[tag])

    def launch(self, tag: str, shape: Shape, B: int, bufs: dict) -> None:
        grid, block = self.geometry(tag, shape, B)
        self.fn[tag](grid, block, launch_args(self.cs, shape, B, bufs), stream=self.stream)

    def checked(self, tag: str, shape: Shape, B: int, call: str, bufs: dict, accum0) -> dict[str, np.ndarray]:
        """One launch into poisoned outputs (with their guard rows; the accumulator's rows < B at their start value);
        the host copies, guard rows included."""
        cp = self.cp
        for n in outputs_of(call):
            bufs[n].fill(poison_of(shape))
        bufs["dh_s2_aux_accum"][:B] = accum0
        cp.cuda.Device().synchronize()
        self.launch(tag, shape, B, bufs)
        self.stream.synchronize()
        return {n: cp.asnumpy(bufs[n]) for n in outputs_of(call)}

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

    def torch_backward(self, t: dict, s: float, alpha: float, B: int, per_sample: bool) -> dict:
        """torch float32 (TF32 off), the same formulas: ELU'(h1) as 1 + min(h1, 0) (equal to h1 > 0 ? 1 : 1 + h1),
        dh a matmul, the SAXPY as accum + alpha * dh."""
        dp = 2.0 * (t["pred"] - t["label"] / s) / B
        dz1 = dp[:, None] * t["W2"][0][None, :] * (1.0 + t["h1"].clamp(max=0.0))
        dh = dz1 @ t["W1"]
        out = {"db1_partial": dz1, "db2_partial": dp[:, None], "dh_s2_aux_out": dh, "dh_s2_aux_accum": t["accum0"] + alpha * dh}
        if per_sample:
            out["dW1_partial"] = dz1[:, :, None] * t["h_s2"][:, None, :]
            out["dW2_partial"] = (dp[:, None] * t["h1"])[:, None, :]
        return out

    def case(self, shape: Shape, B: int, call: str, seed: int) -> dict:
        cp, torch = self.cp, self.torch
        shapes = buffer_shapes(self.cs, shape, B, call)
        vals = scalar_values(self.cs, shape, B)
        host = inputs(shapes, B, seed)
        ref = reference(host, vals, B, call) if shape.slot_ok else None
        bufs = self.device_buffers(host, shapes, shape.misaligned)
        accum0 = cp.asarray(host["accum0"])
        flop = flop_of(B, shape.SH2, shape.H)
        row: dict = {"SH2": shape.SH2, "H": shape.H, "B": B, "call": call, "origin": shape.origin, "misaligned": shape.misaligned,
                     "saxpy_alpha": vals["saxpy_alpha"], "label_scale_slot": vals["label_scale_slot"],
                     "grid": {tag: list(self.geometry(tag, shape, B)[0]) for tag in self.tags}, "flop": flop}
        for tag in self.tags:
            row[tag] = judge([self.checked(tag, shape, B, call, bufs, accum0) for _ in range(3)], ref, shape, B, call, self.tol)
        if ref is None:  # the bad-slot case: torch has no rule to compare with
            row["torch_fp32"] = None
            return row
        s = float(np.maximum(host["isv"][int(vals["label_scale_slot"])], np.float32(dqn_aux.LABEL_SCALE_FLOOR)))
        alpha = float(np.float32(vals["saxpy_alpha"]))
        tin = {n: torch.as_tensor(bufs[n], device="cuda") for n in ("h_s2", "h1", "pred", "label", "W1", "W2")}
        tin["accum0"] = torch.as_tensor(accum0, device="cuda")
        out_t = self.torch_backward(tin, s, alpha, B, call == "per-sample")
        torch.cuda.synchronize()
        t_res = {n: accuracy(np.asarray(out_t[n].cpu().numpy()).reshape(ref[n].shape), ref[n], self.tol) for n in outputs_of(call)}
        row["torch_fp32"] = {"outputs": t_res, "ok": all(a["ok"] for a in t_res.values()),
                             "rel_norm": max(a["rel_norm"] for a in t_res.values()), "max_rel": max(a["max_rel"] for a in t_res.values())}
        for tag in self.tags:
            row[tag]["not_worse_than_torch"] = all(not_worse(row[tag]["outputs"][n], t_res[n]) for n in t_res)
        if B in self.args.time_sizes and shape.origin == "shipped" and call == "fused":
            hint = flop / 20e12 * 1e6 + 3.0  # ~20 TFLOP/s + 3 us, only to size the graph
            nbytes = bytes_of(B, shape.SH2, shape.H)
            for tag in self.tags:
                row[tag]["time"], row[tag]["rep"] = graph_time(cp, self.stream, lambda t=tag: self.launch(t, shape, B, bufs), hint,
                                                              self.args.warmup, self.args.replays)
            row["torch_fp32"]["time"], row["torch_fp32"]["rep"] = torch_graph_time(
                torch, lambda: self.torch_backward(tin, s, alpha, B, False), hint, self.args.warmup, self.args.replays)
            for tag in (*self.tags, "torch_fp32"):
                t = row[tag]["time"]["median_us"]
                row[tag]["tflops"] = flop / (t * 1e-6) / 1e12 if t > 0 else None
                row[tag]["gbps"] = nbytes / (t * 1e-6) / 1e9 if t > 0 else None
        return row

    def release(self) -> None:
        self.cp.get_default_memory_pool().free_all_blocks()
        self.torch.cuda.empty_cache()


def print_table(rows: list[dict], tags: list[str], tol: Tolerance) -> None:
    cand = tags[1]
    print()
    print(f"aux_next_bar_backward: shipped SIMT vs CUTLASS 3xTF32 candidate ({cand}; others for the record) vs torch fp32 (TF32 off); "
          f"rel = the worst output's relative error norm against the float64 reference; tolerance rtol {tol.rtol:g}, atol {tol.atol:g} "
          f"x max|ref|, rtol_elem {tol.rtol_elem:g}")
    hdr = (f"{'SH2':>4} {'H':>4} {'B':>6} {'call':<10} {'case':<20} | {'rel shipped':>11} {'rel cand':>9} {'rel torch':>9} | "
           f"{'rel dh cand':>11} {'rel dh torch':>12} | {'<= torch':>8} | verdict cand (others)")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        lead = f"{r['SH2']:>4} {r['H']:>4} {r['B']:>6} {r['call']:<10} {r['origin']:<20}"
        if "error" in r:
            print(f"{lead} | ERROR {r['error']}")
            continue
        c, t, s = r[cand], r["torch_fp32"], r["shipped"]
        others = " ".join(verdict(r[tag]) for tag in tags[2:])
        tail = f"{verdict(c)}{f' ({others})' if others else ''}; shipped {verdict(s)}"
        if t is None:  # the bad-slot case
            print(f"{lead} | {'-':>11} {'-':>9} {'-':>9} | {'-':>11} {'-':>12} | {'-':>8} | {tail}")
            continue
        print(f"{lead} | {s['rel_norm']:>11.2e} {c['rel_norm']:>9.2e} {t['rel_norm']:>9.2e} | "
              f"{c['outputs']['dh_s2_aux_out']['rel_norm']:>11.2e} {t['outputs']['dh_s2_aux_out']['rel_norm']:>12.2e} | "
              f"{'yes' if c['not_worse_than_torch'] else 'NO':>8} | {tail}")
    timed = [r for r in rows if "error" not in r and "time" in r[cand]]
    if timed:
        print()
        print("times: median us per launch (CUDA graph), min-max; TFLOP/s (fp32-equivalent); GB/s (each tensor once)")
        for r in timed:
            parts = [f"{tag} {r[tag]['time']['median_us']:.2f} ({r[tag]['time']['min_us']:.2f}-{r[tag]['time']['max_us']:.2f}, "
                     f"{(r[tag]['tflops'] or 0):.1f} TF/s, {(r[tag]['gbps'] or 0):.0f} GB/s)" for tag in (*tags, "torch_fp32")]
            print(f"  B={r['B']:>6}: " + "; ".join(parts) +
                  f"; shipped/candidate x{r['shipped']['time']['median_us'] / r[cand]['time']['median_us']:.2f}, "
                  f"torch/candidate x{r['torch_fp32']['time']['median_us'] / r[cand]['time']['median_us']:.2f}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int_list, default=list(SIZES), help="batch sizes B checked (comma-separated)")
    ap.add_argument("--time-sizes", type=int_list, default=list(TIME_SIZES), help="B timed at the shipped shape; empty: none")
    ap.add_argument("--per-sample-max", type=int, default=PER_SAMPLE_MAX, help="largest B of the per-sample call (non-NULL partials)")
    ap.add_argument("--cases", type=case_kinds, default=tuple(CASE_KINDS),
                    help=f"the shapes run (comma-separated): {', '.join(CASE_KINDS)} (default all)")
    ap.add_argument("--tiles", type=lambda s: [NbBwdTile.parse(t) for t in s.split(",") if t.strip()],
                    default=list(DEFAULT_TILES),
                    help="candidate builds TBMxTBNxTBK_WMxWN_STAGES[_rn|_rz] (split: _rz CUTLASS's truncating, this "
                         "candidate's default; _rn round-to-nearest); the first is the candidate")
    ap.add_argument("--replays", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", default=None, help="result path (default $OUT/gpu_nb_bwd_cutlass.json when $OUT is set)")
    ap.add_argument("--cpu-check", action="store_true", help="no GPU: the cases, the geometry and the nvcc builds only")
    args = ap.parse_args(argv)
    if not args.tiles:
        ap.error("--tiles: at least one tile")
    args.tiles = list(dict.fromkeys(args.tiles))  # a tile named twice is built once
    return args


def selected(cs, args) -> list[Shape]:
    """The shapes of ``shapes_of`` whose origin ``--cases`` names."""
    origins = {CASE_KINDS[k] for k in args.cases}
    return [s for s in shapes_of(cs) if s.origin in origins]


def cpu_check(cs, args, include: Path) -> int:
    """No GPU: the cases and both kernels' grids at B = 65536, the chain spec, and every nvcc build."""
    shapes = selected(cs, args)
    for s in shapes:
        grids = ", ".join(f"{t.name} {cutlass_geometry(65536, t)}" for t in args.tiles)
        print(f"SH2={s.SH2:<4} H={s.H:<4} ({s.origin}): shipped {shipped_geometry(cs, s, 65536)}, candidate {grids} at B=65536")
    calls = sum(len(calls_at(B, args.per_sample_max)) for B in args.sizes)
    print(f"tolerance: {tolerance(cs)}; chain spec: --candidate '{chain_spec()}'")
    print(f"CUTLASS include: {include}")
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), tuple(args.tiles), include)
    print(f"{len(shapes)} shapes x {calls} (B, call) pairs; nvcc built the shipped kernel and {len(args.tiles)} candidate tile(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cs = load_contracts(REPO / "contracts", REPO)
    try:
        include = cutlass_include()
    except HeadersMissing as exc:
        print(f"gpu_nb_bwd_cutlass: {exc}", file=sys.stderr)
        return 2
    if args.cpu_check:
        return cpu_check(cs, args, include)

    shapes = selected(cs, args)
    log(f"{len(shapes)} shapes; B = {args.sizes}; per-sample call at B <= {args.per_sample_max}; CUTLASS {include}")
    with tempfile.TemporaryDirectory(prefix="nb_bwd_cutlass_") as tmp:
        cubins, ptxas = build(Path(tmp), tuple(args.tiles), include)
        runner = Runner(cs, cubins, tuple(args.tiles), args)
        tags = runner.tags
        cand = tags[1]
        results: dict = {"environment": environment(), "kernel": KERNEL, "candidate_source": CANDIDATE_SOURCE, "candidate": cand,
                         "tiles": [t.name for t in args.tiles], "cutlass_include": str(include), "ptxas": ptxas,
                         "tolerance": dataclasses.asdict(runner.tol), "replays": args.replays, "warmup": args.warmup, "rows": []}
        every = shapes_of(cs)
        for shape in shapes:
            i = every.index(shape)  # the seed follows the case, not the selection
            for B in args.sizes:
                for call in calls_at(B, args.per_sample_max):
                    try:
                        row = runner.case(shape, B, call, args.seed + 1000 * i + B)
                    except Exception as exc:  # noqa: BLE001 - report the case and go on
                        row = {"SH2": shape.SH2, "H": shape.H, "B": B, "call": call, "origin": shape.origin, "misaligned": shape.misaligned,
                               "error": f"{type(exc).__name__}: {exc}"}
                    runner.release()
                    results["rows"].append(row)
                    where = f"SH2={shape.SH2} H={shape.H} B={B} {call} ({shape.origin})"
                    if "error" in row:
                        log(f"{where}: {row['error']}")
                    elif row["torch_fp32"] is None:
                        log(f"{where}: candidate {verdict(row[cand])}, shipped {verdict(row['shipped'])}")
                    else:
                        times = "".join(f", {tag} {row[tag]['time']['median_us']:.2f} us" for tag in (*tags, "torch_fp32") if "time" in row[tag])
                        log(f"{where}: candidate rel {row[cand]['rel_norm']:.2e} ({verdict(row[cand])}), shipped {row['shipped']['rel_norm']:.2e} "
                            f"({verdict(row['shipped'])}), torch {row['torch_fp32']['rel_norm']:.2e}{times}")
    rows = results["rows"]
    bad = [r for r in rows if "error" in r or verdict(r[cand]) != "ok"]
    worse = [r for r in rows if "error" not in r and r["torch_fp32"] is not None and not r[cand]["not_worse_than_torch"]]
    results["candidate_ok"] = not bad
    results["candidate_worse_than_torch"] = [{k: r[k] for k in ("SH2", "H", "B", "call", "origin")} for r in worse]
    path = args.json or (str(Path(os.environ["OUT"]) / "gpu_nb_bwd_cutlass.json") if os.environ.get("OUT") else None)
    if path:
        Path(path).write_text(json.dumps(results, indent=1, default=str))
        log(f"wrote {path}")
    print_table(rows, tags, runner.tol)
    print(f"\ncandidate {cand}: {'every case within tolerance, bit-deterministic, bad-slot rule kept, nothing written past B' if not bad else f'{len(bad)} case(s) FAILED'}; "
          f"error above torch fp32's in {len(worse)} of {len([r for r in rows if 'error' not in r and r['torch_fp32'] is not None])} case(s)")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
