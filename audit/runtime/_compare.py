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
    """Compare a kernel output with its reference under ``tol`` (see the module docstring)."""
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
    ref_norm = float(np.sqrt(np.dot(r, r)))
    err_norm = float(np.sqrt(np.dot(d, d)))
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
