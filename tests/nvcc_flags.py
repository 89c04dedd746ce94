"""nvcc flags for tests that compile the shipped kernels themselves (not through ``wireup build``).

The shipped chain's CUTLASS kernels include the ``nvidia-cutlass`` wheel's headers, which the configuration
names in ``include_packages``; ``wireup build`` passes them with ``-isystem``. A test that runs nvcc on a
shipped source directly takes the same folders from here. Without the wheel it is skipped with the reason
(the ``dev`` extra installs it), as the tests marked ``cutlass`` are.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from audit.compile._packages import package_includes
from audit.config import load_config
from audit.errors import EnvironmentProblem

REPO = Path(__file__).resolve().parents[1]


def package_include_flags(root: Path = REPO) -> list[str]:
    """``-isystem FOLDER`` for each ``include_packages`` entry of the project at ``root``, in configuration order."""
    try:
        packages = package_includes(load_config(root))
    except EnvironmentProblem as exc:
        pytest.skip(f"the shipped kernels need a header package that is not installed: {exc}")
    return [flag for p in packages for flag in ("-isystem", str(p.folder))]


def shipped_include_flags(root: Path = REPO) -> list[str]:
    """What ``wireup build`` gives nvcc to find the shipped kernels' headers: ``-I kernels`` and the packages' ``-isystem``."""
    return ["-I", str(root / "kernels"), *package_include_flags(root)]


#: a test that compiles its own small kernels: skipped with the reason where nvcc is not on PATH
NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")
#: the build's flags for a test kernel's PTX (``wireup build`` gives the same, -lineinfo for the lines)
PTX_FLAGS = ("-arch=sm_90", "-ptx", "-O3", "-lineinfo", "-std=c++17")


def compile_ptx(folder: Path, body: str, name: str = "k.cu", extra: tuple[str, ...] | list[str] = ()) -> str:
    """The PTX of the CUDA source ``body``, written to ``folder / name`` and compiled with :data:`PTX_FLAGS`
    and ``extra`` (include folders, defines)."""
    src = folder / name
    src.write_text(body)
    out = src.with_suffix(".ptx")
    subprocess.run(["nvcc", *PTX_FLAGS, *extra, str(src), "-o", str(out)], check=True, capture_output=True, text=True)
    return out.read_text()
