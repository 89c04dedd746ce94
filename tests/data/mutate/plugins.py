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


def _record_pid() -> None:
    """Append this worker's process id to the file named by WIREUP_TEST_PIDS (which worker ran what)."""
    path = os.environ.get("WIREUP_TEST_PIDS")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{os.getpid()}\n")


def pid(be) -> None:
    """Survives (the reference's values) and records which worker ran it."""

    def kernel(launch):
        _record_pid()
        launch.default()

    _register(be, kernel)


def past_the_end(be) -> None:
    """Caught by VERIFY_OUT_OF_BOUNDS: right values, and one float32 written past the end of "dst" (into
    its guard band); records which worker ran it."""

    def kernel(launch):
        _record_pid()
        launch.default()
        out = launch.arg("dst").value
        n = launch.tensor("dst").size
        launch.view(int(out), "float32", n + 1)[n] = 1.0

    _register(be, kernel)


def corrupts_helpers(be) -> None:
    """Survives, but leaves the worker broken as a wild write into wireup's own device memory would: every
    later backend of this process faults (a sticky illegal address) in its first buffer hash."""
    from audit.runtime._backend import DeviceError
    from audit.runtime._emulated import EmulatedBackend

    original = EmulatedBackend.hash

    def hash(self, ptr, nbytes):
        if self is not be:
            raise DeviceError("the hash helper kernel: an illegal memory access was encountered", sticky=True, code="CUDA_ERROR_ILLEGAL_ADDRESS")
        return original(self, ptr, nbytes)

    EmulatedBackend.hash = hash
    _register(be, lambda launch: launch.default())


def faults_in_helpers(be) -> None:
    """Computes the reference's values, but every buffer hash after its launch faults (a sticky illegal
    address), in any worker: the variant itself breaks the context."""
    from audit.runtime._backend import DeviceError

    def hash(ptr, nbytes):
        raise DeviceError("the hash helper kernel: an illegal memory access was encountered", sticky=True, code="CUDA_ERROR_ILLEGAL_ADDRESS")

    be.hash = hash
    _register(be, lambda launch: launch.default())
