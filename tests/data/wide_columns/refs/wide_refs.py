"""Float64 reference of the sampled-reference fixture (found through ``reference_paths = ["refs"]``).

The reference takes the optional keyword ``select``: a mapping from an output named in the contract's
``[kernel.verify] sample_axes`` to the indices of that output's sampled axis. Given it, the reference
computes and returns only those elements (here: the selected columns), so a check at B = 1027 costs
B x 256 additions instead of B x 50,257.
"""

from __future__ import annotations

import numpy as np


def column_sum(*, x, select=None, **_):
    """colsum[v] = sum over rows of x[:, v]; with ``select={"colsum": idx}``, colsum[idx] only."""
    x = np.asarray(x, dtype=np.float64)
    cols = (select or {}).get("colsum")
    if cols is not None:
        x = x[:, np.asarray(cols, dtype=np.int64)]
    return {"colsum": x.sum(axis=0)}
