"""CuPy launchers of the aux kernels."""

from pathlib import Path

import cupy as cp

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
_module = cp.RawModule(path=str(KERNELS / "scale_rows_kernel.cubin"))
scale_rows = _module.get_function("scale_rows")
rogue = _module.get_function(
    'rogue_py_kernel'
)
# dead_scale lands in phase B: _module.get_function("dead_scale")
HELP = """Kernels: get_function("dead_scale") is documentation, not a call."""
