"""float64 references of the docs/contracts.md example."""

import numpy as np


def scale_rows(*, x, isv, slot, **_):
    return {"y": x / max(isv[slot], 1e-6)}


def masked_pick_loss(*, y, labels, isv, ema_slot, B, D, **_):
    valid = labels != -1
    picked = y[np.arange(B)[valid], labels[valid]]
    loss = picked.mean() if valid.any() else 0.0
    out = isv.copy()
    out[ema_slot] = 0.9 * isv[ema_slot] + 0.1 * loss
    return {"loss": np.array([loss]), "isv": out}
