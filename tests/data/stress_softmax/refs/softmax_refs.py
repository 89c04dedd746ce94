"""Float64 reference of the stress fixture's kernel (found through ``reference_paths = ["refs"]``)."""

from __future__ import annotations

import numpy as np


def stress_softmax(*, logits, **_):
    """probs = softmax over each row, the row max subtracted first (exact for any finite logits)."""
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"probs": e / e.sum(axis=1, keepdims=True)}
