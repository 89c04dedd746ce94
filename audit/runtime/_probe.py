"""Is there a GPU to verify on? Asked without importing any GPU package (static commands never do).

The CUDA driver is asked through ctypes (``libcuda.so.1``: ``cuInit``, ``cuDeviceGetCount``, the compute
capability of device 0); the packages are only located (``importlib.util.find_spec``).

>>> probe(["auto"])                        # doctest: +SKIP
Probe(backends=['pycuda'], arch='sm_90', reason=None)
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

LIBCUDA_NAMES = ["libcuda.so.1", "libcuda.so", "nvcuda.dll"]
PACKAGES = {"pycuda": "PyCUDA", "cupy": "CuPy"}


@dataclass
class Probe:
    backends: list[str] = field(default_factory=list)
    arch: str | None = None
    reason: str | None = None  # the one sentence for the user when nothing can run


def _driver() -> tuple[ctypes.CDLL | None, str]:
    for name in LIBCUDA_NAMES:
        try:
            return ctypes.CDLL(name), ""
        except OSError:
            continue
    return None, "no CUDA driver"


def device_arch() -> tuple[str | None, str]:
    """``sm_XY`` of device 0, or (None, why not)."""
    lib, why = _driver()
    if lib is None:
        return None, why
    if lib.cuInit(0) != 0:
        return None, "the CUDA driver failed to initialise"
    n = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value == 0:
        return None, "the CUDA driver sees no GPU"
    dev = ctypes.c_int(0)
    lib.cuDeviceGet(ctypes.byref(dev), 0)
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
    return f"sm_{major.value}{minor.value}", ""


def installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def probe(requested: list[str]) -> Probe:
    """Which of the ``requested`` backends (``auto``, ``pycuda``, ``cupy``) can run here."""
    arch, why = device_arch()
    have = [b for b in PACKAGES if installed(b)]
    if arch is None:
        return Probe(reason=f"wireup verify needs an NVIDIA GPU and PyCUDA or CuPy; none was found ({why}).")
    if not have:
        return Probe(arch=arch, reason="wireup verify needs an NVIDIA GPU and PyCUDA or CuPy; none was found (neither PyCUDA nor CuPy is installed).")
    chosen: list[str] = []
    for r in requested or ["auto"]:
        if r == "auto":
            pick = have[0]
        elif r in have:
            pick = r
        else:
            return Probe(arch=arch, reason=f"wireup verify --backend {r} needs {PACKAGES.get(r, r)}; it is not installed (installed: {', '.join(PACKAGES[h] for h in have)}).")
        if pick not in chosen:
            chosen.append(pick)
    return Probe(chosen, arch)


def find_sanitizer() -> str | None:
    """compute-sanitizer from PATH, $CUDA_HOME/bin, next to nvcc, or /usr/local/cuda/bin."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    cands = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
    for c in cands:
        if c:
            p = Path(c) / "bin" / "compute-sanitizer"
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
    return None
