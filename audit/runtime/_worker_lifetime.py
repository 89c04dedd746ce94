"""Verification workers live no longer than the wireup process that supervises them.

Workers start in a session of their own (``start_new_session=True``) so that a hung kernel can be killed
with its whole process group, and so that a Ctrl-C in the terminal reaches only the supervisor. That also
means nothing kills them when the supervisor goes: ``timeout 600 wireup verify`` would end wireup and
leave a worker spinning in a hung launch, holding the GPU. Two things bind them:

- **the supervisor's SIGTERM and SIGINT handler** (:func:`workers_die_with_supervisor`, a decorator for
  the functions that run workers) kills the process group of every live worker (:func:`track`), then
  does what the signal did before: SIGINT raises ``KeyboardInterrupt``, a default SIGTERM ends the
  process by that signal, an installed handler is called;
- **a parent-death signal** (:func:`die_with_parent`, called first thing in a worker): on Linux
  ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, so a supervisor killed outright (SIGKILL, the OOM killer) takes
  its workers with it. The kernel sends it when the *thread* that started the worker ends, so workers are
  started from a thread that outlives them (the main thread, or a slot thread that stops its worker).

>>> @workers_die_with_supervisor
... def run_workers():
...     proc = subprocess.Popen([...], start_new_session=True, env=supervised_env(os.environ))
...     track(proc)                                         # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

SUPERVISOR_PID = "WIREUP_SUPERVISOR_PID"  # set in a worker's environment: the pid whose death ends it
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

_live: weakref.WeakSet[subprocess.Popen] = weakref.WeakSet()
_closing = threading.Event()  # set while supervisors running in other threads are being stopped (stop_all_workers)
_depth = 0  # nesting of workers_die_with_supervisor in the main thread
F = TypeVar("F", bound=Callable[..., Any])


def track(proc: subprocess.Popen) -> subprocess.Popen:
    """Remember ``proc`` (a worker started with ``start_new_session=True``) until it is collected."""
    _live.add(proc)
    return proc


def supervised_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` plus this process's pid, so a worker can tell that its supervisor died before it could ask
    for a parent-death signal."""
    return {**env, SUPERVISOR_PID: str(os.getpid())}


def kill_workers() -> int:
    """SIGKILL the process group of every tracked worker not yet reaped; how many were signalled.

    Safe in a signal handler: no locks; a reaped worker (``returncode`` set) is skipped, so a recycled
    process-group ID is never hit.
    """
    n = 0
    for proc in tuple(_live):
        if proc.returncode is not None:
            continue
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            n += 1
        except (ProcessLookupError, PermissionError):
            pass  # already gone, or no longer ours
    return n


def closing() -> bool:
    """Whether every supervisor of this process is being stopped: none may start a worker now."""
    return _closing.is_set()


@contextmanager
def all_workers_stopped() -> Iterator[int]:
    """Stop the supervisors that run in other threads (a pool of ``verify`` calls, each its own supervisor,
    none of them the main thread's, so no signal handler of theirs runs): while inside, no supervisor starts
    a worker, and every live one was killed on entry (how many: the value). Wait for those threads inside;
    their supervisors see their workers die and start no others, so they end within seconds."""
    _closing.set()
    try:
        yield kill_workers()
    finally:
        _closing.clear()


def _on_signal(signum: int, previous: Any) -> Callable[[int, Any], None]:
    def handle(sig: int, frame: Any) -> None:
        kill_workers()
        if callable(previous):
            previous(sig, frame)  # Python's SIGINT handler raises KeyboardInterrupt
        elif previous == signal.SIG_DFL:
            signal.signal(sig, signal.SIG_DFL)  # end the way the signal would have ended us
            os.kill(os.getpid(), sig)
        # SIG_IGN (or a handler set outside Python): the signal was ignored before, and still is

    return handle


@contextmanager
def _handlers() -> Iterator[None]:
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may install handlers; its own decorator has done so
        return
    previous = {}
    if _depth == 0:
        for sig in (signal.SIGTERM, signal.SIGINT):
            prev = signal.getsignal(sig)
            if prev == signal.SIG_IGN:
                continue  # e.g. SIGINT in a background job of a non-interactive shell: leave it ignored
            previous[sig] = prev
            signal.signal(sig, _on_signal(sig, prev))
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        for sig, prev in previous.items():
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)


def workers_die_with_supervisor(fn: F) -> F:
    """Run ``fn`` with SIGTERM/SIGINT handlers that kill every tracked worker first (see the module)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with _handlers():
            return fn(*args, **kwargs)

    return run  # type: ignore[return-value]


def die_with_parent() -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux); leave at once if the
    supervisor named in the environment is already gone. True where the signal is set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    supervisor = os.environ.get(SUPERVISOR_PID, "")
    if ok and supervisor.isdigit():
        pid = int(supervisor)
        if not _alive(pid):
            os._exit(5)  # the supervisor died between starting us and the prctl: nobody will read our results
        if os.getppid() != pid:
            _watch(pid)  # a wrapper (compute-sanitizer) is our parent: the signal follows it, not the supervisor
    return ok


def _watch(pid: int) -> None:
    """Leave once ``pid`` is gone (checked every second by a daemon thread)."""
    import time

    def watch() -> None:
        while _alive(pid):
            time.sleep(1.0)
        os._exit(5)

    threading.Thread(target=watch, name="wireup-supervisor-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
