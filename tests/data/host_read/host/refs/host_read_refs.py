"""Float64 references of the host-read fixture (both variants use this one module)."""

from __future__ import annotations

import numpy as np


def label_scale_update(*, y, isv, slot, B, **_):
    out = np.asarray(isv, dtype=np.float64).copy()
    out[int(slot)] = 0.9 * out[int(slot)] + 0.1 * float(np.mean(np.abs(np.asarray(y, dtype=np.float64)))) if int(B) else out[int(slot)]
    return {"isv": out}


def normalize_by_slot(*, y, isv, slot, **_):
    return {"z": np.asarray(y, dtype=np.float64) / max(float(isv[int(slot)]), float(np.float32(1e-6)))}


def normalize_by_value(*, y, scale, **_):
    return {"z": np.asarray(y, dtype=np.float64) / max(float(scale), float(np.float32(1e-6)))}
