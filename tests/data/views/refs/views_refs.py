"""Float64 references of the views fixture (found through ``reference_paths = ["refs"]``)."""

from __future__ import annotations

import numpy as np


def linear(*, x, W, b, **_):
    """h = x W^T + b."""
    return {"h": np.asarray(x) @ np.asarray(W).T + np.asarray(b)}


def relu(*, x, **_):
    """y = max(x, 0): in place, ``x`` is also what ``y`` held (aliases)."""
    return {"y": np.maximum(np.asarray(x), 0.0)}


def pad_copy(*, h, **_):
    """The written part only: logits[:, :H] = 2 h (the runner leaves the padding to the contract)."""
    return {"logits": 2.0 * np.asarray(h)}


def sgd_step(*, param, grad, lr, **_):
    """param - lr * grad over one view."""
    return {"param": np.asarray(param) - float(lr) * np.asarray(grad)}
