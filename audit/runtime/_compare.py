"""The tolerance rule: when a float32 kernel output matches its float64 reference.

An output passes when, over the positions where the reference is finite,

* the relative error norm ``||out - ref||_2 / ||ref||_2 <= rtol`` (default 1e-5), and
* every element satisfies ``|out - ref| <= atol * max|ref| + rtol_elem * |ref|``
  (defaults ``atol`` 1e-5, ``rtol_elem`` 1e-4),

and the output is finite wherever the reference is (NaN or Inf never passes); where the reference itself
is NaN or +-Inf the output must be the same class. A reference that is exactly zero everywhere needs an
output that is zero everywhere. Integer outputs must be equal. An all-zero output against a non-zero
reference has relative error 1 and fails however loose the tolerance (``rtol`` is capped below 1).
The rationale and the numbers are in docs/verification.md.

The change of an ``inout`` or ``accumulate`` buffer (``out - in``) is compared with the reference's
change (``ref - in``) by :func:`compare_delta`, under its own tolerance relative to the change, so an
update of 1e-4 relative whose weight-decay term is missing does not hide inside the whole buffer's.

>>> c = compare(np.zeros(4, np.float32), np.ones(4))
>>> c.status, c.rel_norm
('trivial', 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-5
ELEMENT_RTOL_FACTOR = 10.0  # rtol_elem = 10 * rtol: one element may be 10x worse than the norm
ZERO_FLOOR = 1e-30  # "zero" for an output compared with an all-zero reference
MAX_RTOL = 0.5  # an override can never let an all-zero output pass (its error is exactly 1)
# the change of an inout buffer is computed from a handful of float32 roundings of the change itself,
# so 1e-3 of its size is generous; the rounding of the stored result is allowed on top (the floor)
DELTA_RTOL = 1e-3
# machine epsilon of the stored dtype: the floor is eps * (|in| + |ref|) per element, two ulps of the
# larger magnitude, what storing the updated value can cost (half an ulp) with margin; bf16 buffers travel
# as raw uint16 bits and integer ones are compared exactly as a whole, so neither has a delta comparison
DTYPE_EPS = {"f64": 2.0**-52, "f32": 2.0**-23, "f16": 2.0**-10}


@dataclass(frozen=True)
class Tolerance:
    """Relative-norm ``rtol`` and elementwise ``atol`` (relative to max |ref|) plus ``rtol_elem``.

    >>> Tolerance.of(None, None).rtol
    1e-05
    """

    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    rtol_elem: float = DEFAULT_RTOL * ELEMENT_RTOL_FACTOR

    @classmethod
    def of(cls, rtol: float | None, atol: float | None, scale: float = 1.0) -> Tolerance:
        """Contract overrides (None keeps the default), times ``scale`` (chains get a looser one)."""
        r = min((rtol if rtol is not None else DEFAULT_RTOL) * scale, MAX_RTOL)
        a = min((atol if atol is not None else DEFAULT_ATOL) * scale, MAX_RTOL)
        return cls(r, a, min(r * ELEMENT_RTOL_FACTOR, MAX_RTOL))


@dataclass(frozen=True)
class Comparison:
    """The verdict of one output against its reference, with the numbers a finding quotes."""

    status: str  # "pass" | "mismatch" | "nonfinite" | "trivial" | "shape"
    rel_norm: float = 0.0
    max_abs: float = 0.0
    max_rel: float = 0.0
    n_bad: int = 0
    n: int = 0
    worst: tuple[int, ...] | None = None
    got: float | None = None
    want: float | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    def describe(self) -> str:
        """``relative error 1.0e+00 (max abs 3.1e-02)``: the numbers of a failure, as findings quote them."""
        if self.status == "shape":
            return self.detail
        if self.status == "nonfinite":
            at = f" at {list(self.worst)}" if self.worst is not None else ""
            return f"{self.n_bad} non-finite value(s) where the reference is finite (first{at}: {self.got!r} against {self.want!r})"
        if self.status == "trivial":
            return f"an all-zero output where the reference is not zero (relative error {self.rel_norm:.1e}, max |ref| {self.max_abs:.1e})"
        at = f", worst at {list(self.worst)}: {_fmt(self.got)} against {_fmt(self.want)}" if self.worst is not None else ""
        return (
            f"relative error {self.rel_norm:.1e} (max abs {self.max_abs:.1e}, {self.n_bad} of {self.n} "
            f"element(s) outside the tolerance{at})"
        )


def _fmt(v: float | None) -> str:
    if v is None:
        return "?"
    return f"{v:.6g}"


def compare(out: np.ndarray, ref: np.ndarray, tol: Tolerance = Tolerance(), integer: bool | None = None) -> Comparison:
    """Compare a kernel output with its reference under ``tol`` (see the module docstring).

    A large float output takes :func:`_fast_pass` first: one float64 difference array, the two norms, and
    the elementwise bound in cache-sized chunks. It only ever answers "pass" (with the very numbers the
    full rule computes); anything else (NaN/Inf, a zero reference, one element or the norm out of bounds)
    goes through the full rule below, which then finds and describes the failure."""
    out = np.asarray(out)
    ref = np.asarray(ref)
    if out.size != ref.size:
        return Comparison("shape", detail=f"{out.size} element(s) where the reference has {ref.size}")
    if out.shape != ref.shape:
        ref = ref.reshape(out.shape)
    n = int(out.size)
    if n == 0:
        return Comparison("pass", n=0)
    if integer is None:
        integer = out.dtype.kind in "iub"
    if not integer and n >= FAST_MIN:
        fast = _fast_pass(out, ref, tol)
        if fast is not None:
            return fast
    return _compare_full(out, ref, tol, integer)


# outputs of at least this many elements take the chunked pass test first; the chunk keeps the
# temporaries of the elementwise bound in the CPU caches instead of streaming 8 arrays through memory
FAST_MIN = 1 << 14
CHUNK = 1 << 16


def _fast_pass(out: np.ndarray, ref: np.ndarray, tol: Tolerance) -> Comparison | None:
    """The "pass" verdict of :func:`compare` for a float output, or None where it is not a plain pass.

    Bit for bit the numbers of the full rule: the difference is formed in float64 as there (``out``
    widened exactly), the norms are the same two whole-array dot products, the maxima and the count of
    elements over the bound are exact whatever the chunking, and ``|d| > bound`` is ``|d| - bound > 0``
    for finite values. Any NaN or Inf shows as a non-finite maximum and sends the case to the full rule.
    """
    if not tol.rtol < 1.0:
        return None  # an all-zero output (relative error exactly 1) must be judged "trivial" by the full rule
    o = out.reshape(-1)
    r = ref.reshape(-1)
    if r.dtype != np.float64:
        r = r.astype(np.float64)
    d = np.subtract(o, r, dtype=np.float64)
    ref_norm = sqrt_sumsq(r)
    err_norm = sqrt_sumsq(d)
    n = int(d.size)
    step = min(CHUNK, n)
    a = np.empty(step)
    if ref_norm == 0.0 and np.isfinite(err_norm):
        # a reference zero everywhere (a masked-out output of the all-skip case): the output must be zero too
        top = 0.0
        for i in range(0, n, step):
            top = _top(top, float(np.abs(d[i : i + step], out=a[: min(step, n - i)]).max()))
        return Comparison("pass", n=n) if top <= ZERO_FLOOR else None
    if not (ref_norm > 0.0 and np.isfinite(ref_norm) and np.isfinite(err_norm)):
        return None
    rel_norm = err_norm / ref_norm
    if not rel_norm <= tol.rtol:
        return None
    b = np.empty(step)
    c = np.empty(step)
    max_ref = 0.0
    for i in range(0, n, step):
        ar = np.abs(r[i : i + step], out=a[: min(step, n - i)])
        max_ref = _top(max_ref, float(ar.max()))
    if not np.isfinite(max_ref):
        return None
    slack = tol.atol * max_ref
    max_abs = 0.0
    max_rel = 0.0
    for i in range(0, n, step):
        m = min(step, n - i)
        ad = np.abs(d[i : i + m], out=a[:m])
        ar = np.abs(r[i : i + m], out=b[:m])
        max_abs = _top(max_abs, float(ad.max()))
        q = np.maximum(ar, 1e-300, out=c[:m])
        max_rel = _top(max_rel, float(np.divide(ad, q, out=q).max()))
        bound = np.multiply(ar, tol.rtol_elem, out=b[:m])
        bound += slack
        if np.count_nonzero(ad > bound):
            return None
    if not (np.isfinite(max_abs) and max_rel == max_rel):
        return None
    return Comparison("pass", rel_norm=rel_norm, max_abs=max_abs, max_rel=max_rel, n=n)


def sqrt_sumsq(x: np.ndarray) -> float:
    """The 2-norm of a flat float64 array, summed by numpy's own loop, not BLAS: a threaded ``ddot`` splits
    the sum by the process's BLAS thread count, so the same arrays gave norms differing in the last bits
    with the thread count (and several processes, each with a pool of every core, slowed one another: the
    comparisons of two processes side by side took 2.1x as long with OpenBLAS's default threads as with
    one, on the 2-core CPU machine, 2026-12-06).

    >>> sqrt_sumsq(np.array([3.0, 4.0]))
    5.0
    """
    return float(np.sqrt(np.einsum("i,i->", x, x)))


def _top(m: float, x: float) -> float:
    """The larger of a running maximum and a chunk's, NaN winning (so a NaN is never lost in the chunks)."""
    return x if not x <= m else m


def _compare_full(out: np.ndarray, ref: np.ndarray, tol: Tolerance, integer: bool) -> Comparison:
    """The tolerance rule on whole arrays: every verdict, and the worst element of a failure."""
    n = int(out.size)
    if integer:
        o = out.astype(np.int64)
        r = np.rint(ref.astype(np.float64)).astype(np.int64) if ref.dtype.kind == "f" else ref.astype(np.int64)
        bad = o != r
        nb = int(bad.sum())
        if nb == 0:
            return Comparison("pass", n=n)
        k = int(np.argmax(bad.reshape(-1)))
        diff = np.abs(o - r)
        return Comparison(
            "mismatch", rel_norm=float(nb) / n, max_abs=float(diff.max()), n_bad=nb, n=n,
            worst=_idx(k, out.shape), got=float(o.reshape(-1)[k]), want=float(r.reshape(-1)[k]),
        )  # fmt: skip

    o = out.astype(np.float64, copy=False).reshape(-1)
    r = ref.astype(np.float64, copy=False).reshape(-1)
    shape = out.shape
    rfin_all = bool(np.isfinite(r).all())
    if not np.isfinite(o).all() or not rfin_all:
        rfin = np.isfinite(r)
        ofin = np.isfinite(o)
        bad_nf = rfin & ~ofin
        if bad_nf.any():
            k = int(np.argmax(bad_nf))
            return Comparison(
                "nonfinite", n_bad=int(bad_nf.sum()), n=n, worst=_idx(k, shape),
                got=float(o[k]), want=float(r[k]), rel_norm=float("inf"), max_abs=float("inf"),
            )  # fmt: skip
        if not rfin_all:
            # where the reference is NaN / +-Inf the output must be the same kind of value
            nf = ~rfin
            same = (np.isnan(r[nf]) & np.isnan(o[nf])) | (r[nf] == o[nf])
            if not same.all():
                k = int(np.flatnonzero(nf)[int(np.argmax(~same))])
                return Comparison(
                    "mismatch", rel_norm=float("inf"), max_abs=float("inf"), n_bad=int((~same).sum()), n=n,
                    worst=_idx(k, shape), got=float(o[k]), want=float(r[k]),
                    detail="non-finite reference values not reproduced",
                )  # fmt: skip
            o = np.where(rfin, o, 0.0)
            r = np.where(rfin, r, 0.0)

    d = o - r
    ad = np.abs(d)
    ar = np.abs(r)
    max_abs = float(ad.max())
    max_ref = float(ar.max())
    ref_norm = sqrt_sumsq(r)
    err_norm = sqrt_sumsq(d)
    if ref_norm == 0.0:
        if max_abs <= ZERO_FLOOR:
            return Comparison("pass", n=n)
        k = int(np.argmax(ad))
        return Comparison(
            "mismatch", rel_norm=float("inf"), max_abs=max_abs, n_bad=int(np.count_nonzero(ad > ZERO_FLOOR)), n=n,
            worst=_idx(k, shape), got=float(o[k]), want=0.0, detail="the reference is zero everywhere",
        )  # fmt: skip
    rel_norm = err_norm / ref_norm
    excess = ad - (tol.atol * max_ref + tol.rtol_elem * ar)
    nb = int(np.count_nonzero(excess > 0))
    max_rel = float((ad / np.maximum(ar, 1e-300)).max())
    if not np.any(o):
        return Comparison("trivial", rel_norm=rel_norm, max_abs=max_ref, max_rel=max_rel, n_bad=nb, n=n)
    if rel_norm <= tol.rtol and nb == 0:
        return Comparison("pass", rel_norm=rel_norm, max_abs=max_abs, max_rel=max_rel, n=n)
    k = int(np.argmax(excess)) if nb else int(np.argmax(ad))
    return Comparison(
        "mismatch", rel_norm=rel_norm, max_abs=max_abs, max_rel=max_rel, n_bad=nb, n=n,
        worst=_idx(k, shape), got=float(o[k]), want=float(r[k]),
    )  # fmt: skip


@dataclass(frozen=True)
class DeltaTolerance:
    """The tolerance of a change: ``rtol`` of its norm, ``rtol_elem`` per element, ``eps`` of the stored dtype.

    >>> DeltaTolerance.of(Tolerance()).rtol
    0.001
    """

    rtol: float = DELTA_RTOL
    rtol_elem: float = DELTA_RTOL * ELEMENT_RTOL_FACTOR
    eps: float = DTYPE_EPS["f32"]

    @classmethod
    def of(cls, tol: Tolerance, dtype: str = "f32") -> DeltaTolerance:
        """Scaled as the whole-buffer tolerance is: a contract that loosens ``rtol`` tenfold loosens this tenfold."""
        r = min(DELTA_RTOL * tol.rtol / DEFAULT_RTOL, MAX_RTOL)
        return cls(r, min(r * ELEMENT_RTOL_FACTOR, MAX_RTOL), DTYPE_EPS.get(dtype, DTYPE_EPS["f32"]))


def compare_delta(out: np.ndarray, before: np.ndarray, ref: np.ndarray, tol: DeltaTolerance = DeltaTolerance(),
                  slack: np.ndarray | float = 0.0) -> Comparison:  # fmt: skip
    """Compare the kernel's change ``out - before`` with the reference's ``ref - before``.

    Per element the error ``e = |(out - before) - (ref - before)|`` is first reduced by the rounding floor
    ``q = eps * (|before| + |ref|) + slack`` (what storing the result in its dtype can cost, plus any declared
    nondeterministic slack); what is left must satisfy

    * ``||max(e - q, 0)||_2 <= rtol * ||ref - before||_2`` (norm-relative to the size of the change), and
    * ``max(e - q, 0) <= rtol_elem * |ref - before| + rtol * max|ref - before|`` everywhere.

    Where the reference does not change a buffer (``ref == before``), both bounds are 0: the kernel's change
    must stay within the rounding floor too. Only positions where ``before`` and ``ref`` are finite count;
    a non-finite output there is status "nonfinite" (VERIFY_NAN judges it).

    >>> p = np.ones(4, np.float32); want = 1.0 - 1e-4 * 1.01
    >>> compare_delta(np.float32(1.0 - 1e-4) * p, p, np.full(4, want)).status
    'mismatch'
    >>> compare_delta(np.float32(want) * p, p, np.full(4, want)).status
    'pass'
    """
    out = np.asarray(out)
    b = np.asarray(before, dtype=np.float64).reshape(-1)
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    if not (out.size == b.size == r.size):
        return Comparison("shape", detail=f"{out.size} element(s) where the input has {b.size} and the reference {r.size}")
    shape = out.shape
    n = int(out.size)
    if n == 0:
        return Comparison("pass", n=0)
    if n >= FAST_MIN and out.dtype.kind == "f":
        fast = _fast_delta_pass(out, b, r, tol, slack)
        if fast is not None:
            return fast
    o = out.astype(np.float64, copy=False).reshape(-1)
    fin = np.isfinite(b) & np.isfinite(r)
    bad_nf = fin & ~np.isfinite(o)
    if bad_nf.any():
        k = int(np.argmax(bad_nf))
        return Comparison("nonfinite", n_bad=int(bad_nf.sum()), n=n, worst=_idx(k, shape), got=float(o[k]), want=float(r[k]),
                          rel_norm=float("inf"), max_abs=float("inf"))  # fmt: skip
    o, b, r = np.where(fin, o, 0.0), np.where(fin, b, 0.0), np.where(fin, r, 0.0)
    d_got = o - b
    d_ref = r - b
    err = np.abs(d_got - d_ref)
    floor = tol.eps * (np.abs(b) + np.abs(r)) + np.broadcast_to(np.asarray(slack, dtype=np.float64), shape).reshape(-1)
    excess = np.maximum(err - floor, 0.0)
    ad = np.abs(d_ref)
    max_change = float(ad.max())
    change_norm = sqrt_sumsq(d_ref)
    excess_norm = sqrt_sumsq(excess)
    over = excess - (tol.rtol_elem * ad + tol.rtol * max_change)
    nb = int(np.count_nonzero(over > 0))
    rel_norm = excess_norm / change_norm if change_norm > 0 else (0.0 if excess_norm == 0 else float("inf"))
    max_rel = float((excess / np.maximum(ad, 1e-300)).max())
    if excess_norm <= tol.rtol * change_norm and nb == 0:
        return Comparison("pass", rel_norm=rel_norm, max_abs=float(err.max()), max_rel=max_rel, n=n)
    k = int(np.argmax(over))
    return Comparison(
        "mismatch", rel_norm=rel_norm, max_abs=float(err.max()), max_rel=max_rel, n_bad=max(nb, 1), n=n,
        worst=_idx(k, shape), got=float(d_got[k]), want=float(d_ref[k]),
        detail="the reference does not change it" if max_change == 0 else "",
    )  # fmt: skip


def _fast_delta_pass(out: np.ndarray, b: np.ndarray, r: np.ndarray, tol: DeltaTolerance, slack: np.ndarray | float) -> Comparison | None:
    """The "pass" verdict of :func:`compare_delta` (``b``, ``r`` flat float64), or None where it is not a
    plain pass; as :func:`_fast_pass`, the very numbers of the full rule: the change and the excess over
    the rounding floor are whole arrays for the two norms, the rest goes by cache-sized chunks."""
    o = out.reshape(-1)
    n = int(o.size)
    sa = np.asarray(slack, dtype=np.float64)
    sl = float(sa) if sa.ndim == 0 else np.broadcast_to(sa, out.shape).reshape(-1)  # a scalar is added as one
    d_ref = np.subtract(r, b)
    excess = np.empty(n)
    step = min(CHUNK, n)
    a, c, e = np.empty(step), np.empty(step), np.empty(step)
    max_err = max_mag = max_change = 0.0
    for i in range(0, n, step):
        j = min(i + step, n)
        m = j - i
        err = np.subtract(o[i:j], b[i:j], out=a[:m], dtype=np.float64)
        err -= d_ref[i:j]
        np.abs(err, out=err)
        max_err = _top(max_err, float(err.max()))
        floor = np.abs(b[i:j], out=c[:m])
        floor += np.abs(r[i:j], out=e[:m])
        max_mag = _top(max_mag, float(floor.max()))
        floor *= tol.eps
        floor += sl if isinstance(sl, float) else sl[i:j]
        x = np.subtract(err, floor, out=excess[i:j])
        np.maximum(x, 0.0, out=x)
        max_change = _top(max_change, float(np.abs(d_ref[i:j], out=e[:m]).max()))
    if not (np.isfinite(max_err) and np.isfinite(max_mag) and np.isfinite(max_change)):
        return None  # NaN or Inf somewhere: the full rule judges it
    change_norm = sqrt_sumsq(d_ref)
    excess_norm = sqrt_sumsq(excess)
    if not excess_norm <= tol.rtol * change_norm:
        return None
    allowed = tol.rtol * max_change
    max_rel = 0.0
    for i in range(0, n, step):
        j = min(i + step, n)
        m = j - i
        ad = np.abs(d_ref[i:j], out=a[:m])
        q = np.maximum(ad, 1e-300, out=c[:m])
        max_rel = _top(max_rel, float(np.divide(excess[i:j], q, out=q).max()))
        bound = np.multiply(ad, tol.rtol_elem, out=e[:m])
        bound += allowed
        if np.count_nonzero(excess[i:j] > bound):
            return None
    if max_rel != max_rel:
        return None
    rel_norm = excess_norm / change_norm if change_norm > 0 else (0.0 if excess_norm == 0 else float("inf"))
    return Comparison("pass", rel_norm=rel_norm, max_abs=max_err, max_rel=max_rel, n=n)


def _idx(k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(k, shape)) if shape else ()


def within(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> tuple[bool, float, int]:
    """Two runs of a nondeterministic kernel agree: ``|a - b| <= atol * max|b| + rtol * |b|`` everywhere
    (``atol`` relative to the largest magnitude, as everywhere in wireup, so a sum that cancels to nearly
    zero is not held to a bound its rounding cannot meet). Returns (ok, max abs difference, elements
    outside). NaN in one run only, or Inf that differs, never passes."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0:
        return True, 0.0, 0
    fin = np.isfinite(a) & np.isfinite(b)
    nan = np.isnan(a) != np.isnan(b)
    d = np.abs(np.where(fin, a - b, 0.0))
    inf_mismatch = ~fin & ~((a == b) | (np.isnan(a) & np.isnan(b)))
    scale = float(np.abs(np.where(fin, b, 0.0)).max())
    bad = (d > atol * scale + rtol * np.abs(np.where(fin, b, 0.0))) | nan | inf_mismatch
    return (not bad.any()), float(d.max()), int(bad.sum())
