"""A hanging or crashing kernel cannot take wireup verify down: the worker is killed or dies, the kernel
gets a finding, and a fresh worker verifies the rest (emulated kernels registered in the worker through a
plugin hook defined in this module)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from audit.runtime import verify

HERE = Path(__file__).resolve().parent


def _hang(launch):
    time.sleep(3600)


def _segfault(launch):
    os.kill(os.getpid(), signal.SIGSEGV)


def register_hang(backend):
    backend.register("strided_gather", _hang)


def register_crash(backend):
    backend.register("strided_gather", _segfault)


def _run(root, plugin, timeout=4.0):
    return verify(
        root, kernels=["strided_gather", "trade_outcome_label"], emulated={}, plugins=[f"test_runtime_supervisor:{plugin}"],
        python_paths=[str(HERE)], sizes=(1, 37), evidence=False, timeout=timeout,
    )  # fmt: skip


def test_a_hanging_kernel_times_out_and_the_rest_is_verified(request):
    t0 = time.monotonic()
    out = _run(request.config.rootpath, "register_hang")
    assert time.monotonic() - t0 < 60
    verdicts = {r.subject: r.verdict for r in out.run.results}
    assert verdicts == {"strided_gather": "fail", "trade_outcome_label": "pass"}
    (f,) = [f for f in out.result.findings if f.subject == "strided_gather"]
    assert f.rule == "VERIFY_TIMEOUT"
    assert f.message.startswith('Kernel "strided_gather" fails VERIFY_TIMEOUT: no progress for 4 s during strided_gather B=1 (run A) grid=(1, 1, 1) block=(256, 1, 1)')


def test_a_crashing_worker_is_a_launch_error_and_is_replaced(request):
    out = _run(request.config.rootpath, "register_crash")
    verdicts = {r.subject: r.verdict for r in out.run.results}
    assert verdicts == {"strided_gather": "fail", "trade_outcome_label": "pass"}
    (f,) = [f for f in out.result.findings if f.subject == "strided_gather"]
    assert f.rule == "VERIFY_LAUNCH_ERROR"
    assert "the worker died (signal 11) during strided_gather B=1 (run A)" in f.message


def test_the_worker_reports_environment_and_timing(request):
    out = verify(request.config.rootpath, kernels=["trade_outcome_label"], emulated={}, plugins=["test_runtime_supervisor:register_nothing"],
                 python_paths=[str(HERE)], sizes=(37,), evidence=False)  # fmt: skip
    assert out.result.exit_code == 0
    assert out.run.environments["emulated"].device["name"] == "emulated (numpy)"
    assert out.run.timing["kernel"] >= 0 and out.run.timing["wall"] > 0


def register_nothing(backend):
    pass


@pytest.mark.parametrize("bad", ["nosuchmodule:register", "test_runtime_supervisor:nosuchfunction"])
def test_a_worker_that_cannot_start_is_an_environment_error(request, bad):
    from audit.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem, match="worker failed before verifying anything"):
        verify(request.config.rootpath, kernels=["trade_outcome_label"], emulated={}, plugins=[bad], python_paths=[str(HERE)], sizes=(1,), evidence=False)
