#!/usr/bin/env python3
"""GPU smoke test of the aux-heads kernels against their float64 references (run by hand on a GPU host).

Not a pytest module (nothing here is collected): run it directly from the repository root::

    python3 tests/gpu/smoke_kernels.py            # full: correctness at B in {1, 37, 300, 4096, 65536}, timing, graphs
    python3 tests/gpu/smoke_kernels.py --quick    # correctness at B <= 300 only (for compute-sanitizer)

Needs numpy, CuPy and nvcc. Each kernels/*.cu is compiled with ``nvcc -arch=sm_90 -cubin -I kernels`` and
loaded with ``cupy.RawModule``; every launch uses the geometry and scalar values of its contract
(contracts/kernels/*.toml, evaluated here). Every output is filled with NaN (ints with a sentinel) before
the launch, so an element the kernel forgets to write fails. A kernel passes when, for each written
tensor, ``||out - ref|| / ||ref|| < 1e-5`` and ``|out - ref| <= 1e-4 max|ref| + 1e-6`` elementwise, with
no NaN and no all-zero output where the reference is non-zero; masked trade-outcome rows must be exact
zeros and leave the accumulator bit-identical. The chains of contracts/schedules.toml are then run
buffer by buffer against the references, and timed as CUDA graphs. Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from audit.references import dqn_aux as ref  # noqa: E402

WATCHDOG_S = 900
REL_TOL = 1e-5
ELEM_TOL = 1e-4
ABS_TOL = 1e-6
CHAIN_REL_TOL = 1e-4  # errors compound along a chain of float32 kernels
INT_SENTINEL = -123456789

try:
    import cupy as cp
except ImportError:  # pragma: no cover - GPU host only
    cp = None


# ------------------------------------------------------------------------------------------------
# contracts


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Contracts:
    def __init__(self, root: Path):
        self.kernels: dict[str, dict] = {}
        for path in sorted((root / "contracts" / "kernels").glob("*.toml")):
            for k in tomllib.loads(path.read_text()).get("kernel", []):
                self.kernels[k["name"]] = k
        isv = tomllib.loads((root / "contracts" / "isv.toml").read_text())["isv"]
        self.isv_dim = int(isv["total_dim"])
        self.isv_buffer = isv.get("buffer", "isv")
        self.slots = {s["name"]: int(s["index"]) for s in isv["slot"]}
        self.isv_slots = isv["slot"]
        dims = tomllib.loads((root / "contracts" / "dims.toml").read_text())["dims"]
        self.fixed_dims = {n: int(d["value"]) for n, d in dims.items() if "value" in d}
        self.buffers = {b["name"]: b for b in tomllib.loads((root / "contracts" / "buffers.toml").read_text())["buffer"]}
        self.schedules = {
            s["name"]: s for s in tomllib.loads((root / "contracts" / "schedules.toml").read_text())["schedule"]
        }

    def eval(self, expr, dims: dict) -> int:
        if isinstance(expr, (int, float)):
            return int(expr)
        text = str(expr)
        text = re.sub(r"slot\((\w+)\)", lambda m: str(self.slots[m.group(1)]), text)
        return int(eval(text, {"__builtins__": {}}, {"ceil_div": ceil_div, "min": min, "max": max, **dims}))

    def scalar(self, param: dict, dims: dict):
        v = param["value"]
        if isinstance(v, str):
            return self.eval(v, dims)
        return v

    def shape(self, param_or_buffer: dict, dims: dict) -> tuple[int, ...]:
        return tuple(self.eval(d, dims) for d in param_or_buffer["shape"])

    def isv_reset(self, event: str = "ColdStart") -> np.ndarray:
        isv = np.zeros(self.isv_dim)
        for s in self.isv_slots:
            v = s.get("reset", {}).get(event, 0.0)
            if isinstance(v, (int, float)):
                isv[s["index"] : s["index"] + int(s.get("count", 1))] = float(v)
        return isv


def tensor_params(kernel: dict) -> list[dict]:
    return [p for p in kernel["params"] if p.get("kind", "tensor") != "scalar"]


def np_dtype(param: dict):
    return np.int32 if param.get("dtype") == "i32" else np.float32


# ------------------------------------------------------------------------------------------------
# build and launch


def compile_kernels(tmp: Path) -> dict[str, Path]:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("nvcc not found on PATH")
    sources = sorted((REPO / "kernels").glob("*.cu"))

    def build(src: Path) -> tuple[Path, Path, str]:
        out = tmp / (src.stem + ".cubin")
        cmd = [nvcc, "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-I", str(REPO / "kernels"), "-o", str(out), str(src)]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise SystemExit(f"nvcc failed on {src.name}:\n{res.stderr}")
        return src, out, res.stderr

    cubins = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        for src, out, log in pool.map(build, sources):
            cubins[f"kernels/{src.name}"] = out
            entry, spills = None, "spills ?"
            for line in log.splitlines():
                m = re.search(r"Compiling entry function '(\w+)'", line)
                if m:
                    entry = m.group(1)
                m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
                if m and entry:
                    spills = f"spills {m.group(1)}/{m.group(2)} B"
                m = re.search(r"Used (\d+) registers.*?(?:(\d+) bytes smem)?$", line)
                if m and entry:
                    print(f"  ptxas {entry:<34} {m.group(1):>3} regs, {m.group(2) or 0:>6} B smem, {spills}")
                    if "warning" in log:
                        print(f"  ptxas warnings in {src.name}:\n{log}")
    return cubins


class Launcher:
    def __init__(self, contracts: Contracts, cubins: dict[str, Path]):
        self.c = contracts
        self.modules = {src: cp.RawModule(path=str(path)) for src, path in cubins.items()}
        self.functions = {}
        for name, k in contracts.kernels.items():
            self.functions[name] = self.modules[k["source"]].get_function(k["entry"])

    def geometry(self, name: str, dims: dict):
        k = self.c.kernels[name]
        grid = tuple(self.c.eval(g, dims) for g in k["grid"])
        block = tuple(self.c.eval(b, dims) for b in k["block"])
        return grid, block

    def launch(self, name: str, args: dict, dims: dict) -> None:
        k = self.c.kernels[name]
        packed = []
        for p in k["params"]:
            v = args[p["name"]]
            if p.get("kind") == "scalar":
                packed.append(np.int32(v) if p["dtype"] == "i32" else np.float32(v))
            elif v is None:
                packed.append(np.uint64(0))  # NULL optional output
            else:
                packed.append(v)
        grid, block = self.geometry(name, dims)
        self.functions[name](grid, block, tuple(packed))


# ------------------------------------------------------------------------------------------------
# inputs


def elu(z):
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))


def trade_labels(rng, B, K, frac=0.03, all_skip=False):
    labels = np.full(B, -1, dtype=np.int64)
    if all_skip:
        return labels
    valid = rng.random(B) < frac
    if B >= 2 and not valid.any():
        valid[rng.integers(0, B)] = True
    labels[valid] = rng.integers(0, K, size=int(valid.sum()))
    return labels


def head_primals(rng, d, k_out):
    return {
        "W1": rng.standard_normal((d["H"], d["SH2"])) / math.sqrt(d["SH2"]),
        "b1": 0.1 * rng.standard_normal(d["H"]),
        "W2": rng.standard_normal((k_out, d["H"])) / math.sqrt(d["H"]),
        "b2": 0.1 * rng.standard_normal(k_out),
    }


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def build_inputs(name: str, rng, d: dict, contracts: Contracts, variant: dict) -> dict:
    """float64 / int64 values (already rounded to the kernel's f32) of every non-out tensor and the ISV."""
    B = d["B"]
    isv = contracts.isv_reset()
    isv[: ref.AUX_LABEL_SCALE_EMA] += 0.01 * rng.random(ref.AUX_LABEL_SCALE_EMA)
    label_mag = variant.get("label_magnitude", 1e-3)
    if name == "strided_gather":
        return {"src": f32(rng.standard_normal((B, d["S"])))}
    if name == "trade_outcome_label":
        r = 1e-3 * rng.standard_normal(B)
        r[::7] = np.float32(5e-4)
        r[3::11] = -np.float32(5e-4)
        return {"trade_closed": (rng.random(B) < 0.5).astype(np.int64), "realized_return": f32(r)}
    if name == "aux_label_scale_ema_update":
        return {"labels": f32(label_mag * rng.standard_normal(B)), "isv": f32(isv)}
    if name == "aux_heads_loss_ema_update":
        return {
            "to_loss": f32([1.1]),
            "nb_loss": f32([0.7]),
            "valid_count": np.array([max(B // 30, 0)]),
            "isv": f32(isv),
        }
    if name == "aux_trunk_forward":
        return {
            "x": f32(rng.standard_normal((B, d["E"]))),
            "W": f32(rng.standard_normal((d["SH2"], d["E"])) / math.sqrt(d["E"])),
            "b": f32(0.1 * rng.standard_normal(d["SH2"])),
        }
    if name == "aux_trunk_backward":
        return {
            "dh_accum": f32(rng.standard_normal((B, d["SH2"])) / B),
            "h": f32(elu(rng.standard_normal((B, d["SH2"])))),
            "x": f32(rng.standard_normal((B, d["E"]))),
        }
    if name in ("aux_trade_outcome_forward", "aux_next_bar_forward"):
        k_out = d["K"] if name == "aux_trade_outcome_forward" else d["KNB"]
        p = head_primals(rng, d, k_out)
        return {"h_s2": f32(elu(rng.standard_normal((B, d["SH2"])))), **{k: f32(v) for k, v in p.items()}}
    if name == "aux_trade_outcome_loss_reduce":
        return {
            "logits": f32(2.0 * rng.standard_normal((B, d["K"]))),
            "labels": trade_labels(rng, B, d["K"], all_skip=variant.get("all_skip", False)),
        }
    if name == "aux_trade_outcome_backward":
        p = {k: f32(v) for k, v in head_primals(rng, d, d["K"]).items()}
        h_s2 = f32(elu(rng.standard_normal((B, d["SH2"]))))
        fw = ref.aux_trade_outcome_forward(h_s2=h_s2, **p)
        labels = trade_labels(rng, B, d["K"], all_skip=variant.get("all_skip", False))
        count = int(((labels >= 0) & (labels < d["K"])).sum())
        return {
            "h_s2": h_s2,
            "h1": f32(fw["h1_out"]),
            "probs": f32(fw["probs"]),
            "labels": labels,
            "valid_count": np.array([count]),
            "W1": p["W1"],
            "W2": p["W2"],
            "dh_s2_aux_accum": f32(rng.standard_normal((B, d["SH2"]))),
        }
    if name == "aux_next_bar_loss_reduce":
        label = f32(label_mag * rng.standard_normal(B))
        isv[ref.AUX_LABEL_SCALE_EMA] = float(np.abs(label).mean()) if B else 1.0
        return {"pred": f32(rng.standard_normal(B)), "label": label, "isv": f32(isv)}
    if name == "aux_next_bar_backward":
        p = {k: f32(v) for k, v in head_primals(rng, d, 1).items()}
        h_s2 = f32(elu(rng.standard_normal((B, d["SH2"]))))
        fw = ref.aux_next_bar_forward(h_s2=h_s2, **p)
        label = f32(label_mag * rng.standard_normal(B))
        isv[ref.AUX_LABEL_SCALE_EMA] = float(np.abs(label).mean())
        return {
            "h_s2": h_s2,
            "h1": f32(fw["h1_out"]),
            "pred": f32(fw["pred"]),
            "label": label,
            "isv": f32(isv),
            "W1": p["W1"],
            "W2": p["W2"],
            "dh_s2_aux_accum": f32(rng.standard_normal((B, d["SH2"]))),
        }
    if name == "aux_param_grad_reduce":
        return {"partial": f32(rng.standard_normal((B, d["N"]))), "grad": f32(rng.standard_normal(d["N"]))}
    if name == "aux_weight_grad_reduce":
        dz = rng.standard_normal((B, d["M"])) / B
        return {"dz": f32(dz), "x": f32(elu(rng.standard_normal((B, d["N"]))))}
    raise KeyError(name)


# ------------------------------------------------------------------------------------------------
# comparison


class Report:
    def __init__(self):
        self.failures: list[str] = []
        self.passed = 0

    def check(self, label: str, got: np.ndarray, want: np.ndarray, rel_tol: float = REL_TOL) -> str:
        """Compare one tensor; returns a short error summary and records failures."""
        got = np.asarray(got)
        want = np.asarray(want)
        problem = None
        if got.size != want.size:
            problem = f"size {got.size} != reference {want.size}"
        else:
            want = want.reshape(got.shape)
            if np.issubdtype(got.dtype, np.integer):
                bad = int(np.count_nonzero(got.astype(np.int64) != want.astype(np.int64)))
                summary = f"int mismatches {bad}"
                if bad:
                    problem = summary
                return self._record(label, problem, summary)
            g = got.astype(np.float64)
            w = want.astype(np.float64)
            nan = int(np.count_nonzero(~np.isfinite(g)))
            ref_nan = int(np.count_nonzero(~np.isfinite(w)))
            if ref_nan:
                problem = f"reference has {ref_nan} non-finite values"
            elif nan:
                problem = f"{nan} NaN/inf in output (unwritten or poisoned)"
            else:
                diff = np.abs(g - w)
                wnorm = float(np.linalg.norm(w))
                rel = float(np.linalg.norm(g - w)) / wnorm if wnorm > 0 else float(np.linalg.norm(g))
                wmax = float(np.abs(w).max()) if w.size else 0.0
                worst = float(diff.max()) if w.size else 0.0
                summary = f"rel {rel:.2e} max|err| {worst:.2e}"
                if wnorm > 0 and not np.any(g != 0):
                    problem = "output all zero but reference is not"
                elif rel >= rel_tol:
                    problem = f"relative error {rel:.3e} >= {rel_tol:g}"
                elif np.any(diff > ELEM_TOL * wmax + ABS_TOL):
                    problem = f"elementwise error {worst:.3e} > {ELEM_TOL:g} * max|ref| ({wmax:.3e}) + {ABS_TOL:g}"
                return self._record(label, problem, summary)
        return self._record(label, problem, "")

    def require(self, label: str, ok: bool, why: str) -> None:
        self._record(label, None if ok else why, "")

    def _record(self, label, problem, summary):
        if problem:
            self.failures.append(f"{label}: {problem}")
            return f"FAIL({problem})"
        self.passed += 1
        return summary


# ------------------------------------------------------------------------------------------------
# unit runs


def base_dims(c: Contracts) -> dict:
    return dict(c.fixed_dims)


def run_unit(L: Launcher, rep: Report, name: str, B: int, seed: int, dims_over=None, variant=None, scalars=None,
             null_optional=False, tag="") -> None:
    c = L.c
    k = c.kernels[name]
    variant = variant or {}
    d = {**base_dims(c), **(dims_over or {}), "B": B}
    rng = np.random.default_rng(seed)
    inputs = build_inputs(name, rng, d, c, variant)
    scal = {p["name"]: c.scalar(p, d) for p in k["params"] if p.get("kind") == "scalar"}
    scal.update(scalars or {})

    dev, initial = {}, {}
    for p in tensor_params(k):
        pname = p["name"]
        if p.get("kind") == "isv":
            dev[pname] = cp.asarray(inputs[pname].astype(np.float32))
        elif p.get("role") == "out":
            if p.get("optional") and null_optional:
                dev[pname] = None
                continue
            shape = c.shape(p, d)
            fill = INT_SENTINEL if p["dtype"] == "i32" else np.nan
            dev[pname] = cp.full(shape, fill, dtype=np_dtype(p))
        else:
            initial[pname] = inputs[pname].astype(np_dtype(p))
            dev[pname] = cp.asarray(initial[pname].reshape(c.shape(p, d)))
    L.launch(name, {**dev, **scal}, d)
    cp.cuda.Device().synchronize()

    kw = {pname: v for pname, v in inputs.items()}
    kw.update(scal)
    kw["include_optional"] = not null_optional
    want = getattr(ref, name)(**kw)

    label = f"{name}{tag} B={B}"
    parts = []
    for p in tensor_params(k):
        pname = p["name"]
        written = p.get("role") in ("out", "inout", "accumulate") or (
            p.get("kind") == "isv" and k.get("isv_writes")
        )
        if p.get("kind") == "isv" and not k.get("isv_writes"):
            same = np.array_equal(cp.asnumpy(dev[pname]), inputs[pname].astype(np.float32))
            rep.require(f"{label} {pname}", same, "read-only ISV was modified")
            continue
        if not written or dev.get(pname) is None:
            continue
        if pname not in want:
            rep.require(f"{label} {pname}", False, "reference returned no value")
            continue
        got = cp.asnumpy(dev[pname])
        tol = REL_TOL
        parts.append(f"{pname}: {rep.check(f'{label} {pname}', got, want[pname], tol)}")

    if name == "aux_trade_outcome_backward":
        labels = inputs["labels"]
        skipped = ~((labels >= 0) & (labels < d["K"]))
        if int(inputs["valid_count"][0]) == 0:
            skipped[:] = True
        for pname in ("dW1_partial", "db1_partial", "dW2_partial", "db2_partial", "dh_s2_aux_out"):
            if dev[pname] is None:
                continue
            rows = cp.asnumpy(dev[pname])[skipped]
            rep.require(f"{label} {pname} masked rows", bool(np.all(rows == 0.0)), "masked rows are not exact zeros")
        acc = cp.asnumpy(dev["dh_s2_aux_accum"])[skipped]
        rep.require(f"{label} accum masked rows", np.array_equal(acc, initial["dh_s2_aux_accum"][skipped]),
                    "accumulator changed on masked rows")
        parts.append(f"masked rows {int(skipped.sum())}/{B} exact")
    status = "ok" if not any("FAIL" in s for s in parts) else "FAIL"
    print(f"  [{status}] {label:<58} " + "; ".join(parts), flush=True)


def unit_plan(quick: bool):
    """(name, B, kwargs) triples."""
    sizes = [1, 37, 300] if quick else [1, 37, 300, 4096]
    big = [] if quick else [65536]
    cheap = ["strided_gather", "trade_outcome_label", "aux_label_scale_ema_update", "aux_heads_loss_ema_update",
             "aux_trade_outcome_loss_reduce", "aux_next_bar_loss_reduce", "aux_trunk_backward",
             "aux_trunk_forward", "aux_trade_outcome_forward", "aux_next_bar_forward",
             "aux_trade_outcome_backward", "aux_next_bar_backward"]
    plan = []
    for B in sizes + big:
        for name in cheap:
            with_partials = B <= 300
            plan.append((name, B, {"null_optional": not with_partials}))
        for N in ([256, 3, 1, 1000] + ([65536] if B <= 300 else [32768] if B == 4096 else [])):
            plan.append(("aux_param_grad_reduce", B, {"dims_over": {"N": N}, "tag": f"[N={N}]"}))
        for M, N in [(256, 256), (128, 256), (3, 128), (1, 128), (37, 50), (130, 66), (8, 12)]:
            plan.append(("aux_weight_grad_reduce", B, {"dims_over": {"M": M, "N": N}, "tag": f"[M={M},N={N}]"}))
    # Variants: run-time dims that are not tile or float4 multiples, masks, scalars.
    odd_dims = [
        {"E": 12, "SH2": 10, "H": 9, "K": 3},
        {"E": 130, "SH2": 70, "H": 36, "K": 2},
        {"E": 64, "SH2": 300, "H": 260, "K": 8},
    ]
    for od in odd_dims:
        tag = "[" + ",".join(f"{k}={v}" for k, v in od.items()) + "]"
        for B in (7, 300):
            for name in ("aux_trunk_forward", "aux_trunk_backward", "aux_trade_outcome_forward",
                         "aux_trade_outcome_loss_reduce", "aux_trade_outcome_backward", "aux_next_bar_forward",
                         "aux_next_bar_backward"):
                plan.append((name, B, {"dims_over": od, "tag": tag}))
    plan.append(("aux_trade_outcome_backward", 300, {"variant": {"all_skip": True}, "tag": "[all-skip]"}))
    plan.append(("aux_trade_outcome_loss_reduce", 300, {"variant": {"all_skip": True}, "tag": "[all-skip]"}))
    plan.append(("aux_trade_outcome_backward", 37, {"scalars": {"saxpy_alpha": 0.5}, "tag": "[alpha=0.5]"}))
    plan.append(("aux_next_bar_backward", 37, {"scalars": {"saxpy_alpha": 0.5}, "tag": "[alpha=0.5]"}))
    plan.append(("aux_next_bar_backward", 300, {"variant": {"label_magnitude": 5e3}, "tag": "[price labels]"}))
    plan.append(("aux_next_bar_loss_reduce", 300, {"variant": {"label_magnitude": 5e3}, "tag": "[price labels]"}))
    plan.append(("aux_label_scale_ema_update", 300, {"variant": {"label_magnitude": 5e3}, "tag": "[price labels]"}))
    plan.append(("aux_label_scale_ema_update", 300, {"scalars": {"slot": ref.ISV_TOTAL_DIM}, "tag": "[bad slot]"}))
    plan.append(("strided_gather", 300, {"scalars": {"col": 3}, "tag": "[col=3]"}))
    return plan


# ------------------------------------------------------------------------------------------------
# chains (schedules.toml), against the references, and as CUDA graphs


def chain_buffers(c: Contracts, schedule_names, d, rng):
    """Initial float64 / int64 host values for every buffer bound by the schedules."""
    used = set()
    for s in schedule_names:
        for step in c.schedules[s]["step"]:
            if "zero" in step:
                used.add(step["zero"])
            for v in step.get("bind", {}).values():
                if isinstance(v, dict):
                    used.add(v["buffer"])
                elif v != "NULL":
                    used.add(v)
    host = {}
    for name in sorted(used):
        b = c.buffers[name]
        shape = c.shape(b, d)
        if b["dtype"] == "i32":
            host[name] = np.zeros(shape, dtype=np.int64)
        elif b["kind"] == "parameter":
            fan = shape[-1] if len(shape) > 1 else 1
            host[name] = f32(rng.standard_normal(shape) / math.sqrt(fan) * (1.0 if len(shape) > 1 else 0.1))
        else:
            host[name] = np.zeros(shape)
    B = d["B"]
    ns = rng.standard_normal((B, d["S"]))
    ns[:, 0] *= 1e-3
    host["next_states"] = f32(ns)
    host["trade_closed"] = (rng.random(B) < 0.03).astype(np.int64)
    host["realized_return"] = f32(1e-3 * rng.standard_normal(B))
    host["q_encoder_features"] = f32(rng.standard_normal((B, d["E"])))
    host[c.isv_buffer] = f32(c.isv_reset())
    return host


def step_bindings(c: Contracts, step: dict, d: dict, arrays: dict, reshape):
    """Kernel args (arrays or None) and the launch dims, resolving views and kernel-level dims (N, M)."""
    k = c.kernels[step["launch"]]
    bound, dims, bound_dims = {}, dict(d), set()
    for p in tensor_params(k):
        if p.get("kind") == "isv":
            bound[p["name"]] = arrays[c.isv_buffer]
            continue
        v = step["bind"].get(p["name"], "NULL")
        if v == "NULL":
            bound[p["name"]] = None
            continue
        if isinstance(v, dict):
            view = tuple(c.eval(e, d) for e in v["view"])
            arr = reshape(arrays[v["buffer"]], view)
        else:
            arr = arrays[v]
        if len(arr.shape) == len(p["shape"]):  # a [N] gradient may be bound to an [SH2, E] buffer
            for axis, dim in enumerate(p["shape"]):
                if isinstance(dim, str) and dim in k.get("dims", []) and dim not in bound_dims:
                    bound_dims.add(dim)
                    dims[dim] = int(arr.shape[axis])
        bound[p["name"]] = arr
    return k, bound, dims


def run_chain_reference(c: Contracts, schedule_names, d, host):
    bufs = {k: v.copy() for k, v in host.items()}
    for s in schedule_names:
        for step in c.schedules[s]["step"]:
            if "zero" in step:
                bufs[step["zero"]][...] = 0
                continue
            k, bound, dims = step_bindings(c, step, d, bufs, lambda a, shape: a.reshape(shape))
            kw = {n: a for n, a in bound.items() if a is not None}
            kw.update({p["name"]: c.scalar(p, dims) for p in k["params"] if p.get("kind") == "scalar"})
            kw["include_optional"] = all(a is not None for a in bound.values())
            out = getattr(ref, k["name"])(**kw)
            for p in tensor_params(k):
                written = p.get("role") in ("out", "inout", "accumulate") or (
                    p.get("kind") == "isv" and k.get("isv_writes")
                )
                if written and bound[p["name"]] is not None:
                    dst = bound[p["name"]]
                    dst[...] = np.asarray(out[p["name"]]).reshape(dst.shape)
    return bufs


def upload_chain(c: Contracts, host):
    dev = {}
    for name, v in host.items():
        dt = np.int32 if np.issubdtype(v.dtype, np.integer) else np.float32
        dev[name] = cp.asarray(v.astype(dt))
    return dev


def enqueue_chain(L: Launcher, schedule_names, d, dev):
    c = L.c
    for s in schedule_names:
        for step in c.schedules[s]["step"]:
            if "zero" in step:
                dev[step["zero"]].fill(0)
                continue
            k, bound, dims = step_bindings(c, step, d, dev, lambda a, shape: a.reshape(shape))
            scal = {p["name"]: c.scalar(p, dims) for p in k["params"] if p.get("kind") == "scalar"}
            L.launch(k["name"], {**bound, **scal}, dims)


def check_chain(L: Launcher, rep: Report, schedule_names, B, seed):
    c = L.c
    d = {**base_dims(c), "B": B}
    host = chain_buffers(c, schedule_names, d, np.random.default_rng(seed))
    dev = upload_chain(c, host)
    enqueue_chain(L, schedule_names, d, dev)
    cp.cuda.Device().synchronize()
    want = run_chain_reference(c, schedule_names, d, host)
    label = f"chain {'+'.join(schedule_names)} B={B}"
    worst, fails = 0.0, 0
    for name in sorted(want):
        before = len(rep.failures)
        msg = rep.check(f"{label} buffer {name}", cp.asnumpy(dev[name]), want[name], CHAIN_REL_TOL)
        if len(rep.failures) > before:
            fails += 1
            print(f"    {name}: {msg}")
        m = re.search(r"rel ([0-9.e+-]+)", msg)
        if m:
            worst = max(worst, float(m.group(1)))
    print(f"  [{'ok' if not fails else 'FAIL'}] {label:<58} {len(want)} buffers, worst rel {worst:.2e}", flush=True)


# ------------------------------------------------------------------------------------------------
# timing


def time_fn(fn, reps=20, warmup=3) -> float:
    """Median microseconds of fn() between two events (includes Python launch overhead)."""
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e3)  # us
    return float(np.median(times))


def time_launches(enqueue, reps=20, per_graph=10) -> tuple[float, str]:
    """Median microseconds per launch: `per_graph` launches captured into one CUDA graph, replayed `reps`
    times after warm-up (so Python launch overhead is excluded, as in the graph-captured chain)."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        enqueue()
        stream.synchronize()
        try:
            stream.begin_capture()
            for _ in range(per_graph):
                enqueue()
            graph = stream.end_capture()
            run, n, how = (lambda: graph.launch(stream)), per_graph, "graph"
        except Exception:  # no capture: fall back to timing single eager launches
            run, n, how = enqueue, 1, "eager"
        for _ in range(3):
            run()
        stream.synchronize()
        times = []
        for _ in range(reps):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            run()
            stop.record(stream)
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) * 1e3 / n)
    return float(np.median(times)), how


def flops_of(name: str, d: dict, inputs: dict) -> float:
    B = d["B"]
    if name == "aux_trunk_forward":
        return 2.0 * B * d["E"] * d["SH2"]
    if name == "aux_trade_outcome_forward":
        return 2.0 * B * d["SH2"] * d["H"] + 2.0 * B * d["H"] * d["K"]
    if name == "aux_next_bar_forward":
        return 2.0 * B * d["SH2"] * d["H"] + 2.0 * B * d["H"]
    if name == "aux_next_bar_backward":
        return 2.0 * B * d["H"] * d["SH2"]
    if name == "aux_trade_outcome_backward":
        return 2.0 * int(inputs["valid_count"][0]) * d["H"] * d["SH2"]
    if name == "aux_weight_grad_reduce":
        return 2.0 * B * d["M"] * d["N"]
    return 0.0


def time_unit(L: Launcher, name: str, B: int, dims_over=None, tag=""):
    c = L.c
    k = c.kernels[name]
    d = {**base_dims(c), **(dims_over or {}), "B": B}
    if name == "aux_param_grad_reduce":  # content is irrelevant to timing; skip a huge host draw
        inputs = {"partial": np.zeros((1, 1)), "grad": np.zeros(1)}
    else:
        inputs = build_inputs(name, np.random.default_rng(1), d, c, {})
    scal = {p["name"]: c.scalar(p, d) for p in k["params"] if p.get("kind") == "scalar"}
    dev, nbytes = {}, 0
    for p in tensor_params(k):
        pname = p["name"]
        if p.get("role") == "out" and p.get("optional"):
            dev[pname] = None
            continue
        if p.get("role") == "out" or name == "aux_param_grad_reduce":
            dev[pname] = cp.zeros(c.shape(p, d), dtype=np_dtype(p))
        else:
            dev[pname] = cp.asarray(inputs[pname].astype(np_dtype(p)))
        mult = 2 if p.get("role") in ("inout", "accumulate") else 1
        nbytes += mult * dev[pname].nbytes
    us, how = time_launches(lambda: L.launch(name, {**dev, **scal}, d))
    fl = flops_of(name, d, inputs)
    extra = f"  {fl / us / 1e6:7.2f} TFLOP/s" if fl else ""
    print(f"  {name + tag:<44} B={B:<6} {us:9.2f} us ({how})  {nbytes / us / 1e3:8.1f} GB/s (nominal){extra}",
          flush=True)
    del dev
    return us


def time_chain(L: Launcher, schedule_names, B: int) -> None:
    c = L.c
    d = {**base_dims(c), "B": B}
    host = chain_buffers(c, schedule_names, d, np.random.default_rng(2))
    dev = upload_chain(c, host)
    label = "+".join(schedule_names)
    eager = time_fn(lambda: enqueue_chain(L, schedule_names, d, dev), reps=10)
    stream = cp.cuda.Stream(non_blocking=True)
    try:
        with stream:
            stream.begin_capture()
            enqueue_chain(L, schedule_names, d, dev)
            graph = stream.end_capture()
        graph.upload(stream) if hasattr(graph, "upload") else None

        def replay():
            graph.launch(stream)

        for _ in range(3):
            replay()
        stream.synchronize()
        times = []
        for _ in range(20):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            replay()
            stop.record(stream)
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
        graphed = f"{float(np.median(times)):9.1f} us as one CUDA graph"
    except Exception as exc:  # graph capture is a bonus measurement, never a failure of the kernels
        graphed = f"graph capture unavailable ({type(exc).__name__}: {exc})"
    print(f"  chain {label:<52} B={B:<6} eager (with Python launch overhead) {eager:9.1f} us; {graphed}",
          flush=True)


# ------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="correctness at B <= 300 only, no timing")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--only", metavar="SUBSTRING", help="only kernels whose name contains this (skips the chains)")
    args = ap.parse_args(argv)

    def on_alarm(signum, frame):
        print(f"watchdog: smoke test exceeded {WATCHDOG_S} s, aborting", flush=True)
        os._exit(2)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(WATCHDOG_S)

    if cp is None:
        print("CuPy is not installed: this script runs on a GPU host")
        return 1
    t0 = time.time()
    contracts = Contracts(REPO)
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    print(f"device: {props['name'].decode()}  (CuPy {cp.__version__}, numpy {np.__version__})")
    rep = Report()
    with tempfile.TemporaryDirectory(prefix="wireup-smoke-") as tmp:
        cubins = compile_kernels(Path(tmp))
        print(f"compiled {len(cubins)} kernel files in {time.time() - t0:.1f} s")
        L = Launcher(contracts, cubins)
        try:
            print("correctness (kernel vs float64 reference):")
            for i, (name, B, kw) in enumerate(unit_plan(args.quick)):
                if args.only and args.only not in name:
                    continue
                run_unit(L, rep, name, B, seed=1000 + i, **kw)
            chains = not args.only
            if chains:
                print("chains (schedules.toml, every bound buffer vs the reference chain):")
            fused = ["aux_heads_forward", "aux_heads_backward_fused"]
            faithful = ["aux_heads_forward", "aux_heads_backward"]
            if chains:
                check_chain(L, rep, faithful, 37, 7)
                check_chain(L, rep, fused, 300, 8)
            if chains and not args.quick:
                check_chain(L, rep, faithful, 300, 9)
                check_chain(L, rep, fused, 4096, 10)
            cp.cuda.Device().synchronize()
            if not (args.quick or args.no_timing):
                print("timing (median of 20 after warm-up; NULL optional partials):")
                for B in (4096, 65536):
                    for name in ("strided_gather", "aux_label_scale_ema_update", "trade_outcome_label",
                                 "aux_trunk_forward", "aux_trade_outcome_forward", "aux_trade_outcome_loss_reduce",
                                 "aux_next_bar_forward", "aux_next_bar_loss_reduce", "aux_heads_loss_ema_update",
                                 "aux_trade_outcome_backward", "aux_next_bar_backward", "aux_trunk_backward"):
                        if not args.only or args.only in name:
                            time_unit(L, name, B)
                    if not args.only or args.only in "aux_weight_grad_reduce":
                        for M, N in [(256, 256), (128, 256), (3, 128), (1, 128)]:
                            time_unit(L, "aux_weight_grad_reduce", B, {"M": M, "N": N}, f"[{M}x{N}]")
                    if not args.only or args.only in "aux_param_grad_reduce":
                        for N in (256, 128, 3):
                            time_unit(L, "aux_param_grad_reduce", B, {"N": N}, f"[N={N}]")
                        if B == 4096:
                            time_unit(L, "aux_param_grad_reduce", B, {"N": 65536}, "[N=65536]")
                    if chains:
                        time_chain(L, ["aux_heads_forward", "aux_heads_backward_fused"], B)
                if chains:
                    time_chain(L, ["aux_heads_forward", "aux_heads_backward"], 4096)
        except cp.cuda.runtime.CUDARuntimeError as exc:
            rep.failures.append(f"CUDA error: {exc}")
            print(f"CUDA error: {exc}", flush=True)
        except cp.cuda.driver.CUDADriverError as exc:
            rep.failures.append(f"CUDA driver error: {exc}")
            print(f"CUDA driver error: {exc}", flush=True)

    print(f"summary: {rep.passed} checks passed, {len(rep.failures)} failed, {time.time() - t0:.1f} s")
    for f in rep.failures[:50]:
        print(f"  FAIL {f}")
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.exit(main())
