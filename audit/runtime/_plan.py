"""What a verification runs: dim environments per size, dims variants, local-dim bindings, scalar values.

A kernel is verified at every requested batch size (the runtime dims take the size), at each value of the
dims its ``[kernel.verify] dims`` varies (``K = [2, 3]``), and for each distinct binding of its local
dims found in the schedules' launches (``N`` of ``aux_param_grad_reduce`` is 65536 for the trunk weights,
3 for the trade-outcome bias...).

>>> env = make_env(cs, 37)                                  # doctest: +SKIP
>>> env["B"], env["SH2"]                                    # doctest: +SKIP
(37, 256)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dims import Expr
from ..model import DTYPES, Buffer, ContractSet, Kernel, ScalarParam, Step, TensorParam
from ..shapes import bind_local_dims, fill_derived

# 4103 = 4 * 1025 + 3: a row tail after the float4 quads (B % 4 != 0) above one pass of a 1024-thread
# block, and an odd slice count on the last rank of a cluster split (mutation survivors of the first H200
# run needed it: a tail loop that never advances hangs only there)
DEFAULT_SIZES = (1, 37, 300, 4096, 4103, 65536)
DEFAULT_CHAIN_SIZES = (37, 300, 4096)
GRADCHECK_SIZES = (16, 37)
MAX_LOCAL_BINDINGS = 8


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype of a contract dtype (``bf16`` travels as uint16 bits)."""
    return np.dtype(DTYPES[name][1])


def shape_of(shape: Sequence[Expr], env: Mapping[str, int], slots: Mapping[str, int] | None = None) -> tuple[int, ...]:
    return tuple(int(e.evaluate(env, slots)) for e in shape)


def numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def runtime_dims(cs: ContractSet) -> list[str]:
    return [d.name for d in cs.dim_map.values() if d.kind == "runtime"]


def make_env(cs: ContractSet, size: int | None, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
    """Fixed dims (with ``overrides``), every runtime dim = ``size``, derived dims recomputed."""
    env: dict[str, int] = {}
    for d in cs.dim_map.values():
        if d.kind == "fixed" and d.value is not None:
            env[d.name] = d.value
    env.update(overrides or {})
    if size is not None:
        for n in runtime_dims(cs):
            env[n] = int(size)
    derived = [d for d in cs.dim_map.values() if d.kind == "derived" and d.expr is not None and d.name not in (overrides or {})]
    return fill_derived(env, derived)


def size_in_range(cs: ContractSet, size: int) -> str | None:
    """None when every runtime dim admits ``size``, else why not."""
    for d in cs.dim_map.values():
        if d.kind == "runtime" and ((d.min is not None and size < d.min) or (d.max is not None and size > d.max)):
            return f'dim "{d.name}" ranges over {d.min}..{d.max}'
    return None


def dims_variants(kernel: Kernel, cs: ContractSet) -> list[dict[str, int]]:
    """Each combination of the values ``[kernel.verify] dims`` lists (``[{}]`` when it lists none)."""
    variants: list[dict[str, int]] = [{}]
    for name, values in kernel.verify.dims:
        variants = [{**v, name: int(x)} for v in variants for x in values]
    return variants


@dataclass
class LocalBinding:
    """Values of a kernel's local dims for one launch (and the launch they came from)."""

    values: dict[str, int]
    schedule: str | None = None
    step: Step | None = None
    buffers: dict[str, Buffer] = field(default_factory=dict)  # param -> bound buffer

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.values.items())


def launch_buffers(cs: ContractSet, kernel: Kernel, step: Step | None) -> dict[str, Buffer]:
    out: dict[str, Buffer] = {}
    if step is None:
        return out
    for p in kernel.tensors:
        b = step.binding(p.name)
        if b is not None and not b.is_null and b.buffer in cs.buffer_map:
            out[p.name] = cs.buffer_map[b.buffer]
    return out


def local_bindings(cs: ContractSet, kernel: Kernel, env: Mapping[str, int], wiring: Any) -> tuple[list[LocalBinding], str]:
    """The distinct local-dim bindings of ``kernel`` at ``env`` over every launch of it, and a note when
    some were left out (more than :data:`MAX_LOCAL_BINDINGS`) or none could be bound."""
    launches = [(sname, ln) for sname, lns in wiring.launches.items() for ln in lns if ln.kernel is not None and ln.kernel.name == kernel.name]
    if not kernel.dims:
        first = launches[0] if launches else (None, None)
        step = first[1].step if first[1] is not None else None
        return [LocalBinding({}, first[0], step, launch_buffers(cs, kernel, step))], ""
    found: dict[tuple, LocalBinding] = {}
    for sname, ln in launches:
        pairs = []
        for p, b in ln.bound():
            buf = cs.buffer_map.get(b.buffer or "")
            target = b.view if b.view is not None else (buf.shape if buf else None)
            if target is not None:
                pairs.append((p.name, p.shape, target))
        envs, _ = bind_local_dims(kernel.dims, pairs, dict(ln.step.dims), [dict(env)])
        vals = {d: envs[0][d] for d in kernel.dims if d in envs[0]}
        if len(vals) != len(kernel.dims):
            continue
        key = tuple(sorted(vals.items()))
        found.setdefault(key, LocalBinding(vals, sname, ln.step, launch_buffers(cs, kernel, ln.step)))
    if not found:
        names = ", ".join(f'"{d}"' for d in kernel.dims)
        return [], f"no launch in the schedules binds its local dim(s) {names}"
    bindings = list(found.values())
    note = ""
    if len(bindings) > MAX_LOCAL_BINDINGS:
        # a representative set: the smallest and largest element counts, then the rest in launch order
        by_size = sorted(bindings, key=lambda lb: numel(lb.values.values()))
        keep = [by_size[0], by_size[-1]] + [b for b in bindings if b not in (by_size[0], by_size[-1])]
        note = f"{len(bindings) - MAX_LOCAL_BINDINGS} of {len(bindings)} local-dim bindings left out"
        bindings = keep[:MAX_LOCAL_BINDINGS]
    return bindings, note


def scalar_value(p: ScalarParam, env: Mapping[str, int], slots: Mapping[str, int], step: Step | None = None) -> int | float | None:
    """The value a launch passes for scalar ``p``: the step's ``args`` win over the contract's value."""
    raw = step.arg(p.name) if step is not None else None
    if raw is None:
        raw = p.value
    if raw is None:
        return None
    if isinstance(raw, Expr):
        v = raw.evaluate(env, slots)
        return float(v) if DTYPES[p.dtype][3] == "float" else int(v)
    return float(raw) if DTYPES[p.dtype][3] == "float" else int(raw)


def batch_leading(p_shape: Sequence[Expr], cs: ContractSet) -> bool:
    """True when the tensor's first dim is a bare runtime dim (its rows can be sampled)."""
    if not p_shape:
        return False
    t = p_shape[0].tree
    return isinstance(t, tuple) and t[0] == "name" and t[1] in runtime_dims(cs)


def uses_runtime_dim(value: Any, cs: ContractSet) -> bool:
    return isinstance(value, Expr) and bool(set(value.names) & set(runtime_dims(cs)))


def case_label(size: int | None, variant: Mapping[str, int], local: Mapping[str, int], extra: str = "", cs: ContractSet | None = None) -> str:
    """``B=4096 (K=3, N=65536)`` as findings quote it."""
    rt = runtime_dims(cs) if cs is not None else ["B"]
    head = f"{rt[0] if rt else 'B'}={size}" if size is not None else ""
    inner = [f"{k}={v}" for k, v in {**variant, **local}.items()]
    if extra:
        inner.append(extra)
    return head + (f" ({', '.join(inner)})" if inner else "")


def tensor_param(kernel: Kernel, name: str) -> TensorParam | None:
    p = kernel.param(name)
    return p if isinstance(p, TensorParam) else None
