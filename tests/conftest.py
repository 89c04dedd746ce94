"""Shared test configuration: GPU and nvcc markers skip with a clear reason where the tool is absent."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from audit.config import single_blas_thread

# before numpy loads: one BLAS thread, as the console script sets (audit.cli.console) and every worker has. The
# tests call audit.cli.main in this process, and the emulated backend verifies in-process: with this process's
# default pool (2 threads here; numpy 2.4.6, OpenBLAS 0.3.31) a serial run's float64 references differed from a
# Ray worker's in their last bits (test_scaleout, fresh install of 7 December 2026; equal with one thread)
single_blas_thread(os.environ)

REPO = Path(__file__).resolve().parents[1]


@functools.cache
def gpu_reason() -> str | None:
    """None when an NVIDIA GPU is usable here, else why not."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no NVIDIA GPU on this machine (nvidia-smi not found); GPU tests run on the device machine"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed ({exc}); no usable GPU"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return "nvidia-smi lists no GPU; GPU tests run on the device machine"
    return None


@functools.cache
def nvcc_reason() -> str | None:
    return None if shutil.which("nvcc") else "nvcc is not on PATH (install the CUDA toolkit or the nvidia-cuda-nvcc wheel)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            reason = gpu_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
        if item.get_closest_marker("nvcc") is not None:
            reason = nvcc_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def repo() -> Path:
    """The repository root (its contracts and kernels are the shipped subject)."""
    return REPO


@pytest.fixture(scope="session")
def simt_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chain before its CUTLASS kernels shipped (tests/simt_chain.py): the SIMT forwards and partial with
    their contracts, for the tests that pin analyses of those kernels. Built once per session; read-only by
    convention (a test that edits it copies it first)."""
    from simt_chain import simt_chain

    return simt_chain(tmp_path_factory.mktemp("simt") / "repo")
