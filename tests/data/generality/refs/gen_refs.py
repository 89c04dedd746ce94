"""Float64 references of the generality fixture's kernels (the fixture's own module, found through
``reference_paths = ["refs"]`` in its wireup.toml)."""

from __future__ import annotations

import numpy as np


def scale_rows(*, x, isv, slot, n, cols, alpha, **_):
    s = max(float(isv[int(slot)]), float(np.float32(1e-6)))
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    col = np.arange(flat.size) % int(cols)  # rows are contiguous, so this is the column of every element
    return {"y": (alpha * flat * (1.0 + col / int(cols)) / s).reshape(np.shape(x))}


def clamp_inplace(*, v, lo, hi, **_):
    return {"v": np.clip(np.asarray(v, dtype=np.float64), lo, hi)}


def row_softmax(*, x, **_):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return {"y": e / e.sum(axis=-1, keepdims=True)}


def masked_scale(*, x, mask=None, include_optional=True, **_):
    x = np.asarray(x, dtype=np.float64)
    valid = np.ones(x.shape[0], bool) if mask is None else np.asarray(mask) != 0
    y = np.where(valid[:, None], 2.0 * x, 0.0)
    out = {"y": y}
    if include_optional:
        out["row_norm"] = (y * y).sum(axis=1)
    return out


def col_sum_atomic(*, x, acc, B, N, **_):
    return {"acc": np.asarray(acc, dtype=np.float64) + np.asarray(x, dtype=np.float64).reshape(int(B), int(N)).sum(axis=0)}
