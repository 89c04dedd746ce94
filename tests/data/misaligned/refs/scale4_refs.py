"""float64 reference of the misalignment fixture."""

import numpy as np


def scale4(x, B, **_):
    return {"y": 2.0 * np.asarray(x, dtype=np.float64)}
