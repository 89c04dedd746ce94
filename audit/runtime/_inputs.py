"""Seeded test data from the contracts: value domains, realistic magnitudes, sparse masks, the ISV.

Every tensor a kernel reads is drawn from its value domain (``values`` on the parameter, else on the
buffer a launch binds to it):

* ``choices`` (+ ``weights``): flags and labels; ``min``/``max``: integers in [min, max] (dim expressions,
  so ``max = "K - 1"`` follows a ``K`` variant) or uniform floats; ``scale``: normal floats of that
  standard deviation;
* without a domain: floats are N(0, 1), times 1/sqrt(fan_in) for a weight (a buffer of kind ``parameter``
  with two or more dims, fan_in = its last dim) and 0.1 for a bias (a one-dim parameter); integers are
  uniform in 0..9 (as docs/contracts.md says).

A parameter with a ``mask`` gets rows valid with probability 1-5% (the realistic sparse rate of
trade-close labels) and ``skip_value`` elsewhere; the edge cases all-skip and all-valid are separate
cases. Data for a batch-leading tensor is one seeded array per (name, row shape, domain), sliced, so
every size and every kernel that reads a same-named tensor reuse it (generation is a real cost at B =
65536). Float data is drawn row block by row block as far as the cases need it (:class:`_Stream`, the
same values as one draw at the largest size); other data is drawn once at the largest size.

>>> f = InputFactory(seed=0, max_rows=64)
>>> f.tensor("x", "f32", (37, 4), Domain(scale=2.0), batch=True).shape
(37, 4)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..dims import Expr
from ..model import DTYPES, MULTIPLICATIVE_ROLES, Buffer, ContractSet, TensorParam, Values
from ._plan import np_dtype

VALID_RATE = (0.01, 0.05)
DEFAULT_INT_RANGE = (0, 9)  # docs/contracts.md: "integers uniform in 0..9"


@dataclass(frozen=True)
class Domain:
    """A resolved value domain (numbers only; dim expressions already evaluated)."""

    choices: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    lo: float | None = None
    hi: float | None = None
    scale: float | None = None
    include: tuple[float, ...] = ()

    def key(self) -> tuple:
        return (self.choices, self.weights, self.lo, self.hi, self.scale, self.include)


def resolve_domain(
    param: TensorParam, buffer: Buffer | None, shape: tuple[int, ...], env: Mapping[str, int],
    upstream: Values | None = None,
) -> Domain:
    """The domain of ``param`` at ``env``: its own values, else its buffer's, else ``upstream`` (the values
    the kernel that writes the buffer declares on its output), else the defaults above.

    A domain flows along the chain: where the reader declares its own values *and* the buffer or its
    producer declares integer choices the reader's domain leaves out (a sentinel, an out-of-range code the
    producer may emit), those choices are drawn too (as ``include``), so every reader of the buffer is
    verified on every value its writer says it holds."""
    declared = (buffer.values if buffer is not None else None) or upstream
    vals: Values | None = param.values or declared
    domain = _resolve(vals, param, buffer, shape, env)
    include = list(vals.include) if vals is not None and vals.include else []
    include += [float(c) for c in inherited_sentinels(param, domain, declared, env) if float(c) not in include]
    if include:
        domain = Domain(domain.choices, domain.weights, domain.lo, domain.hi, domain.scale, tuple(include))
    return domain


def inherited_sentinels(param: TensorParam, own: Domain, declared: Values | None, env: Mapping[str, int]) -> list[float]:
    """The integer choices of the buffer's (or producer's) declared domain that ``param``'s own domain
    ``own`` does not draw (none when ``param`` declares no values of its own: then it draws ``declared``)."""
    if param.values is None or declared is None or not declared.choices or DTYPES[param.dtype][3] == "float":
        return []
    skip = param.mask.skip_value if param.mask is not None else None  # drawn by the mask's own cases
    out = []
    for c in declared.choices:
        v = float(c)
        if (skip is not None and v == float(skip)) or v in own.choices or (own.lo is not None and own.hi is not None and own.lo <= v <= own.hi):
            continue
        out.append(v)
    return out


def _resolve(vals: Values | None, param: TensorParam, buffer: Buffer | None, shape: tuple[int, ...], env: Mapping[str, int]) -> Domain:
    is_float = DTYPES[param.dtype][3] == "float"
    if vals is not None and (vals.choices or vals.min is not None or vals.max is not None or vals.scale is not None):
        lo = _num(vals.min, env)
        hi = _num(vals.max, env)
        if vals.choices:
            return Domain(choices=tuple(vals.choices), weights=tuple(vals.weights))
        if lo is not None or hi is not None:
            if lo is None:
                lo = hi - 1 if not is_float else hi - 1.0
            if hi is None:
                hi = lo + (15 if not is_float else 1.0)
            return Domain(lo=lo, hi=hi)
        return Domain(scale=float(vals.scale))
    if not is_float:
        return Domain(lo=DEFAULT_INT_RANGE[0], hi=DEFAULT_INT_RANGE[1])
    if buffer is not None and buffer.kind == "parameter":
        if len(shape) >= 2 and shape[-1] > 0:
            return Domain(scale=float(1.0 / np.sqrt(shape[-1])))
        return Domain(scale=0.1)
    return Domain(scale=1.0)


def _num(v: Expr | float | None, env: Mapping[str, int]) -> float | None:
    if v is None:
        return None
    if isinstance(v, Expr):
        return float(v.evaluate(env))
    return float(v)


def _seed_of(*parts: object) -> int:
    h = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


class InputFactory:
    """Deterministic, cached test data: the same (seed, name, domain, shape) gives the same array."""

    def __init__(self, seed: int, max_rows: int = 1, max_elements: int = 1 << 26):
        self.seed = int(seed)
        self.max_rows = max(1, int(max_rows))
        self.max_elements = int(max_elements)
        self._cache: dict[tuple, np.ndarray] = {}
        self._streams: dict[tuple, _Stream] = {}
        self.generated_elements = 0

    def rng(self, *key: object) -> np.random.Generator:
        return np.random.default_rng(_seed_of(self.seed, *key))

    def tensor(
        self, name: str, dtype: str, shape: tuple[int, ...], domain: Domain, batch: bool, salt: str = ""
    ) -> np.ndarray:
        """Data for one tensor; ``batch`` tensors are slices of one array generated at the largest size."""
        if batch and shape:
            rows = max(self.max_rows, shape[0])
            row_elems = int(np.prod(shape[1:], dtype=np.int64))
            if rows * row_elems > self.max_elements:
                # too wide to draw at the largest batch (a [65536, 65536] partial): draw just these rows
                rows = shape[0]
            key = (name, dtype, tuple(shape[1:]), domain.key(), salt)
            if _streams(dtype, domain):
                stream = self._streams.get(key)
                if stream is None:
                    stream = self._streams[key] = _Stream(self.rng("tensor", *key), dtype, domain, tuple(shape[1:]))
                before = stream.filled
                data = stream.rows(shape[0], rows)
                self.generated_elements += (stream.filled - before) * stream.row_elems
                return data
            cached = self._cache.get(key)
            if cached is None or cached.shape[0] < shape[0]:
                cached = self._draw(key, dtype, (rows, *shape[1:]), domain)
                self._cache[key] = cached
            return cached[: shape[0]]
        key = (name, dtype, tuple(shape), domain.key(), salt)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._draw(key, dtype, tuple(shape), domain)
            self._cache[key] = cached
        return cached

    def _draw(self, key: tuple, dtype: str, shape: tuple[int, ...], d: Domain) -> np.ndarray:
        rng = self.rng("tensor", *key)
        npd = np_dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64))
        self.generated_elements += n
        if d.choices:
            p = np.asarray(d.weights, dtype=np.float64) if d.weights else None
            if p is not None:
                p = p / p.sum()
            out = rng.choice(np.asarray(d.choices, dtype=np.float64), size=n, p=p)
        elif d.lo is not None:
            if npd.kind in "iu":
                lo, hi = int(np.ceil(d.lo)), int(np.floor(d.hi))
                out = rng.integers(lo, max(lo, hi) + 1, size=n, dtype=np.int64)
            else:
                out = rng.uniform(d.lo, d.hi, size=n).astype(np.float32 if npd.itemsize <= 4 else np.float64)
        else:
            scale = d.scale if d.scale is not None else 1.0
            if npd.kind in "iu":
                out = np.rint(rng.standard_normal(n) * scale)
            elif npd.itemsize <= 4:
                out = rng.standard_normal(n, dtype=np.float32) * np.float32(scale)
            else:
                out = rng.standard_normal(n) * scale
        if d.include and n:
            # edge values at a quarter of the positions (at least one per value where there is room): dense
            # enough that an edge value meets a rare flag in another input (a closed trade, 3% of rows) at
            # a real batch size, sparse enough that the rest of the data stays random
            k = max(len(d.include), n // 4)
            pos = rng.choice(n, size=min(k, n), replace=False)
            out[pos] = np.resize(np.asarray(d.include, dtype=np.float64), pos.size).astype(out.dtype)
        if npd == np.uint16 and dtype == "bf16":
            f = np.asarray(out, dtype=np.float32)
            return (f.view(np.uint32) >> 16).astype(np.uint16).reshape(shape)
        return np.asarray(out).astype(npd, copy=False).reshape(shape)  # every branch above drew a fresh array

    def mask_rows(self, key: tuple, rows: int) -> np.ndarray:
        """Boolean validity per row at the realistic sparse rate (1-5%, drawn per key)."""
        rng = self.rng("mask", *key)
        rate = rng.uniform(*VALID_RATE)
        return rng.random(rows) < rate


def _streams(dtype: str, d: Domain) -> bool:
    """Whether a batch tensor of this dtype and domain is drawn row block by row block (:class:`_Stream`):
    float data drawn element after element from one generator (normal or uniform), with no edge values
    placed at random positions of the whole array."""
    return dtype in ("f32", "f64") and not d.choices and not d.include


class _Stream:
    """The rows of one batch tensor drawn only as far as a case needs them, in place of one draw at the
    largest batch. The generator's float draws continue from call to call exactly as one long call runs,
    so the first ``n`` rows are the values :meth:`InputFactory._draw` gives the first ``n`` rows of the
    whole array (tests/test_fast_verify.py checks it for every kind streamed): the data of every case is
    what it was, and a dims variant that runs only at the smallest cases no longer draws 65536 rows."""

    def __init__(self, rng: np.random.Generator, dtype: str, domain: Domain, tail: tuple[int, ...]):
        self.rng = rng
        self.npd = np_dtype(dtype)
        self.domain = domain
        self.tail = tail
        self.row_elems = int(np.prod(tail, dtype=np.int64))
        self.buf = np.empty(0, self.npd)
        self.filled = 0  # rows drawn

    def rows(self, n: int, limit: int) -> np.ndarray:
        """The first ``n`` rows; room is kept for up to ``limit`` rows (the largest batch)."""
        if n > self.filled:
            e = self.row_elems
            if n * e > self.buf.size:
                cap = min(max(limit, n), max(n, 2 * self.filled))  # room to grow without a copy per case
                grown = np.empty(cap * e, self.npd)
                grown[: self.filled * e] = self.buf[: self.filled * e]
                self.buf = grown
            self._draw_into(self.buf[self.filled * e : n * e])
            self.filled = n
        return self.buf[: n * self.row_elems].reshape((n, *self.tail))

    def _draw_into(self, out: np.ndarray) -> None:
        d, m = self.domain, out.size
        if m == 0:
            return
        if d.lo is not None:
            out[...] = self.rng.uniform(d.lo, d.hi, size=m).astype(np.float32 if self.npd.itemsize <= 4 else np.float64)
        elif self.npd.itemsize <= 4:
            self.rng.standard_normal(dtype=np.float32, out=out)
            out *= np.float32(d.scale if d.scale is not None else 1.0)
        else:
            self.rng.standard_normal(dtype=np.float64, out=out)
            out *= d.scale if d.scale is not None else 1.0


def apply_mask(values: np.ndarray, valid: np.ndarray, skip_value: int) -> np.ndarray:
    """``values`` with every row whose ``valid`` is False set to ``skip_value``."""
    out = np.array(values, copy=True)
    out[~valid] = skip_value
    return out


def isv_reset(cs: ContractSet, rng: np.random.Generator, event: str | None = None) -> np.ndarray:
    """The ISV after the first reset event (``keep`` slots random), in the layout's dtype."""
    lay = cs.isv
    if lay is None:
        return np.zeros(0, np.float32)
    event = event or (lay.reset_events[0] if lay.reset_events else None)
    out = rng.standard_normal(lay.total_dim)
    for s in lay.slots:
        v = s.reset_value(event) if event else None
        for i in s.indices:
            if 0 <= i < lay.total_dim and isinstance(v, (int, float)):
                out[i] = float(v)
    return out.astype(np_dtype(lay.dtype))


def isv_perturbed(cs: ContractSet, rng: np.random.Generator) -> np.ndarray:
    """The ISV from its reset policy, then perturbed: scale and divisor slots random positive (0.1..10),
    every other slot random N(0, 1); kernels must not rely on reset values."""
    out = isv_reset(cs, rng).astype(np.float64)
    lay = cs.isv
    if lay is None:
        return out.astype(np.float32)
    for s in lay.slots:
        for i in s.indices:
            if not 0 <= i < lay.total_dim:
                continue
            out[i] = 10.0 ** rng.uniform(-1.0, 1.0) if s.role in MULTIPLICATIVE_ROLES else rng.standard_normal()
    return out.astype(np_dtype(lay.dtype))
