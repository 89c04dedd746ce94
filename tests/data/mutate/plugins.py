"""Emulated stand-ins for mutants of "strided_gather": each function registers one kernel behaviour on
the emulated backend (``verify_many(..., plugins=["plugins:<name>"])`` in a worker process)."""

from __future__ import annotations

import os
import signal
import time


def _register(be, fn) -> None:
    be.register("strided_gather", fn)


def wrong(be) -> None:
    """Caught by VERIFY_REFERENCE: every output off by a factor 1.5."""

    def kernel(launch):
        out = launch.run_reference()
        launch.write_outputs({k: v * 1.5 for k, v in out.items()})

    _register(be, kernel)


def equivalent(be) -> None:
    """Survives: computes exactly what the reference computes."""
    _register(be, lambda launch: launch.default())


def hang(be) -> None:
    """Caught by VERIFY_TIMEOUT: the launch never finishes."""

    def kernel(launch):
        while True:
            time.sleep(0.5)

    _register(be, kernel)


def illegal_address(be) -> None:
    """Caught by VERIFY_LAUNCH_ERROR: reads far outside any allocation (a sticky error poisons the context)."""

    def kernel(launch):
        launch.view(0x10, "float32", 4)

    _register(be, kernel)


def segfault(be) -> None:
    """Caught by VERIFY_LAUNCH_ERROR: the worker process dies."""

    def kernel(launch):
        os.kill(os.getpid(), signal.SIGSEGV)

    _register(be, kernel)
