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
from typing import Any

import numpy as np

from ..cases import (  # noqa: F401  (re-exported: the runtime's modules import them from here)
    MAX_LOCAL_BINDINGS, NEIGHBOUR_STEPS, DimCase, LocalBinding, binding_neighbours, binding_neighbours_by_dim, case_in_range, case_label, dims_neighbours, extra_bindings,
    launch_buffers, local_bindings, make_env, producer_domains, runtime_dims,
)
from ..dims import Expr
from ..model import DTYPES, ContractSet, HostRead, Kernel, ScalarParam, Step, TensorParam

# 4103 = 4 * 1025 + 3: a row tail after the float4 quads (B % 4 != 0) above one pass of a 1024-thread
# block, and an odd slice count on the last rank of a cluster split (mutation survivors of the first H200
# run needed it: a tail loop that never advances hangs only there)
DEFAULT_SIZES = (1, 37, 300, 4096, 4103, 65536)
DEFAULT_CHAIN_SIZES = (37, 300, 4096)
GRADCHECK_SIZES = (16, 37)


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


def size_in_range(cs: ContractSet, case: DimCase | int) -> str | None:
    """None when every runtime dim admits its value in ``case`` (a scalar: every dim at it), else why not."""
    return case_in_range(cs, case)


def dims_variants(kernel: Kernel, cs: ContractSet) -> list[dict[str, int]]:
    """Each combination of the values ``[kernel.verify] dims`` lists (``[{}]`` when it lists none), then one
    variant per neighbour value (:func:`dims_neighbours`), the other dims at their first listed value."""
    variants: list[dict[str, int]] = [{}]
    for name, values in kernel.verify.dims:
        variants = [{**v, name: int(x)} for v in variants for x in values]
    return variants + [{**variants[0], name: x} for name, x in dims_neighbours(kernel)]


def host_read_of(p: ScalarParam, step: Step | None = None) -> HostRead | None:
    """The ``isv(SLOT)`` host read a launch passes for scalar ``p`` (the step's ``args`` win), or None."""
    raw = step.arg(p.name) if step is not None else None
    if raw is None:
        raw = p.value
    return raw if isinstance(raw, HostRead) else None


def scalar_value(p: ScalarParam, env: Mapping[str, int], slots: Mapping[str, int], step: Step | None = None,
                 isv: Any = None) -> int | float | None:  # fmt: skip
    """The value a launch passes for scalar ``p``: the step's ``args`` win over the contract's value.

    An ``isv(SLOT)`` host read takes the slot's value from ``isv`` (the ISV as the host read it); without
    one, it raises KeyError naming the slot, as an unbound name does."""
    raw = step.arg(p.name) if step is not None else None
    if raw is None:
        raw = p.value
    if raw is None:
        return None
    if isinstance(raw, HostRead):
        if isv is None or raw.slot not in slots or not 0 <= slots[raw.slot] < len(isv):
            raise KeyError(raw.text)
        v = float(isv[slots[raw.slot]])
        return v if DTYPES[p.dtype][3] == "float" else int(v)
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


def tensor_param(kernel: Kernel, name: str) -> TensorParam | None:
    p = kernel.param(name)
    return p if isinstance(p, TensorParam) else None


def write_index(p: TensorParam, env: Mapping[str, int], slots: Mapping[str, int] | None = None) -> tuple[slice, ...] | None:
    """The index of the part of ``p`` its kernel writes (``[:, 0:V]`` for ``write_range = { axis = 1, stop =
    "V" }``), clipped to the axis; None where the parameter is written whole.

    >>> from audit.dims import parse_expr
    >>> from audit.model import WriteRange
    >>> p = TensorParam("y", "f32", (parse_expr("B"), parse_expr("P")), "out", write_range=WriteRange(1, parse_expr(0), parse_expr("V")))
    >>> write_index(p, {"B": 2, "P": 8, "V": 5})
    (slice(None, None, None), slice(0, 5, None))
    """
    r = p.write_range
    if r is None:
        return None
    extent = int(p.shape[r.axis].evaluate(env, slots))
    start = min(max(int(r.start.evaluate(env, slots)), 0), extent)
    stop = min(max(int(r.stop.evaluate(env, slots)), start), extent)
    return (slice(None),) * r.axis + (slice(start, stop),)


def written_part(full: np.ndarray, index: tuple[slice, ...], result: np.ndarray) -> np.ndarray:
    """A reference's value of a partly written output as the written part: ``result`` itself where the
    reference returns only that part, its ``index`` where it returns the whole shape."""
    result = np.asarray(result)
    part_shape = full[index].shape
    if result.shape == part_shape or result.size == int(np.prod(part_shape, dtype=np.int64)) and result.size != full.size:
        return result.reshape(part_shape)
    return result.reshape(full.shape)[index]


def outside_mask(shape: tuple[int, ...], index: tuple[slice, ...]) -> np.ndarray:
    """True where an element of ``shape`` lies outside the written ``index``."""
    mask = np.ones(shape, dtype=bool)
    mask[index] = False
    return mask
