"""Verify workers die with the wireup process that supervises them (issue 14 item 4).

A worker runs in a session of its own, so ``timeout 600 wireup verify`` used to end wireup and leave a
worker busy in a hung launch. Here an emulated kernel hangs (the plugin hook below registers it in the
worker, which writes its pid to a file first), the supervising process is signalled, and the worker must
be gone: SIGTERM and SIGINT through the supervisor's handler, SIGKILL through the parent-death signal.
CPU only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LINUX = sys.platform.startswith("linux")


def _hang(launch) -> None:  # noqa: ANN001 - an emulated kernel
    Path(os.environ["WIREUP_TEST_HANG_MARKER"]).write_text(str(os.getpid()))
    time.sleep(3600)


def register_hang(backend) -> None:  # noqa: ANN001 - the plugin hook of the emulated backend
    backend.register("strided_gather", _hang)


# the two supervisors: wireup verify's (one worker per job) and verify_many's (mutate: long-lived workers)
# A background job of a non-interactive shell (`bash .ci/run &`, `nohup ... &`) starts with SIGINT ignored, and
# an ignored signal stays ignored across exec: the supervisor would then rightly leave it ignored (see
# audit/runtime/_worker_lifetime.py) and never end. These tests are about a supervisor that takes SIGINT, so the
# child first gives SIGINT Python's usual handler, whatever the test runner's shell did.
SIGINT_AS_USUAL = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"

SUPERVISORS = {
    "verify": """
from pathlib import Path
from audit.runtime import verify
verify(Path({root!r}), kernels=["strided_gather"], emulated={{}}, plugins=["test_worker_lifetime:register_hang"],
       python_paths=[{here!r}], sizes=(1,), evidence=False, timeout=600.0)
""",
    "verify_many": """
from pathlib import Path
from audit.runtime import Variant, verify_many
verify_many(Path({root!r}), [Variant("hang", ("strided_gather",), plugins=("test_worker_lifetime:register_hang",))],
            backends=["emulated"], sizes=[1], timeout=600.0, launch_timeout=600.0, python_paths=[{here!r}])
""",
}


def gone(pid: int) -> bool:
    """``pid`` has exited (a zombie nobody reaped counts: it runs nothing and holds no GPU)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return state in ("Z", "X")


def start_hung_verify(tmp_path: Path, supervisor: str = "verify") -> tuple[subprocess.Popen, int]:
    """A ``verify`` supervising one worker stuck in a launch; the supervisor and the worker's pid."""
    marker = tmp_path / "worker.pid"
    env = {**os.environ, "WIREUP_TEST_HANG_MARKER": str(marker), "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)])}
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGINT_AS_USUAL + SUPERVISORS[supervisor].format(root=str(REPO), here=str(HERE))],
        env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists() or not marker.read_text().strip():
        if proc.poll() is not None:
            pytest.fail(f"verify ended before its worker hung: {proc.stderr.read().decode(errors='replace')[-2000:]}")
        assert time.monotonic() < deadline, "the worker never reached the hanging launch"
        time.sleep(0.1)
    worker = int(marker.read_text())
    assert os.getpgid(worker) == worker, "the worker runs in a process group of its own"
    return proc, worker


def wait_gone(pid: int, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def cleanup() -> list[int]:
    pids: list[int] = []
    yield pids
    for pid in pids:  # a failing test must not leave a sleeping worker behind
        if not gone(pid):
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.parametrize("supervisor", sorted(SUPERVISORS))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_supervisor_kills_its_workers(sig: int, supervisor: str, tmp_path: Path, cleanup: list[int]) -> None:
    proc, worker = start_hung_verify(tmp_path, supervisor)
    cleanup.append(worker)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert wait_gone(worker), f"the worker {worker} outlived its supervisor (signal {sig})"
    if sig == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM  # it still ends the way SIGTERM ends a process
    else:
        assert b"KeyboardInterrupt" in proc.stderr.read()


@pytest.mark.skipif(not LINUX, reason="the parent-death signal is Linux's prctl(PR_SET_PDEATHSIG)")
@pytest.mark.parametrize("supervisor", sorted(SUPERVISORS))
def test_a_supervisor_killed_outright_takes_its_workers_with_it(supervisor: str, tmp_path: Path, cleanup: list[int]) -> None:
    proc, worker = start_hung_verify(tmp_path, supervisor)
    cleanup.append(worker)
    proc.kill()  # no handler runs: only the kernel can end the worker now
    proc.wait(timeout=60)
    assert wait_gone(worker), f"the worker {worker} outlived a SIGKILLed supervisor"


@pytest.mark.skipif(not LINUX, reason="the parent-death signal is Linux's prctl(PR_SET_PDEATHSIG)")
def test_die_with_parent_sets_sigkill_as_the_parent_death_signal() -> None:
    code = textwrap.dedent(
        """
        import ctypes, signal
        from audit.runtime._worker_lifetime import die_with_parent
        libc = ctypes.CDLL(None, use_errno=True)
        sig = ctypes.c_int(0)
        assert libc.prctl(2, ctypes.byref(sig), 0, 0, 0) == 0 and sig.value == 0  # PR_GET_PDEATHSIG
        assert die_with_parent() is True
        assert libc.prctl(2, ctypes.byref(sig), 0, 0, 0) == 0 and sig.value == signal.SIGKILL
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=60)


def test_a_worker_whose_supervisor_is_already_gone_leaves_at_once() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    code = "from audit.runtime._worker_lifetime import die_with_parent; die_with_parent(); print('still here')"
    env = {**os.environ, "WIREUP_SUPERVISOR_PID": str(dead.pid), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    if LINUX:
        assert (out.returncode, out.stdout) == (5, "")
    else:
        assert out.stdout == "still here\n"


def test_handlers_are_restored_and_delegate(monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.runtime import _worker_lifetime as lifetime

    seen: list[int] = []
    mine = lambda sig, frame: seen.append(sig)  # noqa: E731 - the handler that was there before
    previous = signal.signal(signal.SIGTERM, mine)
    try:
        killed: list[int] = []
        monkeypatch.setattr(lifetime, "kill_workers", lambda: killed.append(1) or 0)

        @lifetime.workers_die_with_supervisor
        def supervise() -> object:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs between bytecodes of the main thread
            return signal.getsignal(signal.SIGTERM)

        during = supervise()
        assert killed == [1] and seen == [signal.SIGTERM]  # workers first, then the handler that was there
        assert during is not mine  # the supervisor's handler was in place while it ran
        assert signal.getsignal(signal.SIGTERM) is mine  # and the previous one is back afterwards
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.skipif(not LINUX, reason="the parent-death signal is Linux's prctl(PR_SET_PDEATHSIG)")
def test_a_worker_behind_a_wrapper_leaves_when_the_supervisor_dies(tmp_path: Path, cleanup: list[int]) -> None:
    # supervisor (sleeps) -> wrapper (a shell, as compute-sanitizer would be) -> worker (die_with_parent, sleeps)
    worker_code = (
        "import os, time, pathlib; from audit.runtime._worker_lifetime import die_with_parent; die_with_parent(); "
        f"pathlib.Path({str(tmp_path / 'pid')!r}).write_text(str(os.getpid())); time.sleep(3600)"
    )
    supervisor_code = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        from audit.runtime._worker_lifetime import supervised_env
        subprocess.Popen(["/bin/sh", "-c", '"$0" -c "$1"; exit $?', sys.executable, {worker_code!r}],
                         env=supervised_env(os.environ), start_new_session=True)
        time.sleep(3600)
        """
    )
    sup = subprocess.Popen([sys.executable, "-c", supervisor_code], env={**os.environ, "PYTHONPATH": str(REPO)})
    marker = tmp_path / "pid"
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline and sup.poll() is None
        time.sleep(0.1)
    worker = int(marker.read_text())
    cleanup.append(worker)
    assert Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[1] != str(sup.pid), "the shell stays between"
    sup.kill()
    sup.wait(timeout=30)
    assert wait_gone(worker), "a worker whose parent is not the supervisor outlived it"


def test_an_ignored_signal_stays_ignored() -> None:
    from audit.runtime._worker_lifetime import workers_die_with_supervisor

    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        during = workers_die_with_supervisor(lambda: signal.getsignal(signal.SIGTERM))()
        assert during == signal.SIG_IGN and signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)
