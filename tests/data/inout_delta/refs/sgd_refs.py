"""Float64 reference of the delta fixture's SGD step (found through ``reference_paths = ["refs"]``)."""

from __future__ import annotations

import numpy as np


def sgd_step(*, param, grad, lr, wd, **_):
    """param - lr * (grad + wd * param), in float64."""
    p = np.asarray(param, dtype=np.float64)
    return {"param": p - float(lr) * (np.asarray(grad, dtype=np.float64) + float(wd) * p)}
