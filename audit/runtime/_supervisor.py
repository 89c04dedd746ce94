"""The one supervisor: runs a job's units in worker processes (:mod:`audit.runtime._worker`) and keeps a
hanging or crashing kernel from taking wireup down with it. ``verify`` and ``verify_many`` both use it.

Each of ``workers`` slots starts a worker (:func:`spawn_worker`, the one place a worker process is
made) and gives it the next unit when it reports the last one done, so the slots stay busy however
uneven the units are. Around every unit a watchdog runs:

* a hang: no event for ``launch_timeout`` seconds while a launch is in flight, or for ``timeout``
  seconds otherwise (host work: references, checks). The worker's process group is killed, every subject
  of the unit not yet reported gets a VERIFY_TIMEOUT record naming what was running, and a fresh worker
  takes the next unit;
* a death (a segfault, a context that an illegal address poisoned, a Python exception in the worker):
  VERIFY_LAUNCH_ERROR records with the last launch and the error or the tail of the worker's stderr;
  with ``crash_verdict=False`` an internal error (a Python exception) is instead no verdict on the unit
  (its outcome carries the ``error``). A worker that dies between two units costs the next unit nothing:
  it runs again on a fresh worker;
* retirement: a unit that reports its context ``lost`` (a sticky CUDA error, a write past the guard
  bands) ends its worker, and the next unit runs on a fresh one;
* the context-lost retry: a sticky CUDA error outside a unit's launches, in wireup's own device work,
  cannot be pinned on the unit (an earlier unit may have corrupted the worker): the unit runs again on a
  fresh worker, and only a second such error there is its VERIFY_LAUNCH_ERROR.

A worker that cannot start (no backend, a plugin that cannot be loaded, no answer) is an
:class:`~audit.errors.EnvironmentProblem`. Under ``--sanitizer`` ``wrapper(n)`` gives the n-th worker a
command prefix (compute-sanitizer) and its log file. Leaving early (Ctrl-C) kills every worker.

>>> out = supervise(job, workers=2, timeout=60.0, launch_timeout=10.0, progress=print)   # doctest: +SKIP
>>> out.outcomes[0].results                                                             # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import single_blas_thread
from ..errors import EnvironmentProblem
from ..verify_checks import LAUNCH, TIMEOUT, VerifyCheck
from ._results import EnvironmentInfo, SubjectResult
from ._worker_lifetime import closing, supervised_env, track, workers_die_with_supervisor

STDERR_TAIL = 1500
# a worker ended by one of these signals was killed from outside (not by its kernel): its unit runs again
LOST = (-signal.SIGKILL, -signal.SIGTERM)
Progress = Callable[[dict[str, Any]], None]
Wrapper = Callable[[int], tuple[list[str], Path | None]]


@dataclass
class UnitOutcome:
    """What became of one unit: its results, how long it took, notes, and the internal error that kept it
    from a verdict (``crash_verdict=False`` only)."""

    results: list[SubjectResult] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class SupervisedRun:
    """Every unit's outcome (by index) and what the workers reported about themselves."""

    outcomes: dict[int, UnitOutcome] = field(default_factory=dict)
    environments: dict[str, EnvironmentInfo] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sanitizer_logs: list[Path] = field(default_factory=list)


def failed_rules(results: Sequence[SubjectResult]) -> list[str]:
    """Rule IDs of the failed checks, in first-seen order (what a progress line shows)."""
    return list(dict.fromkeys(c.rule for r in results for c in r.failed))


def mixed_devices(known: Mapping[str, EnvironmentInfo], new: Mapping[str, EnvironmentInfo]) -> str:
    """The sentence refusing a run whose workers report GPUs of different models (name or compute
    capability) for one backend, or "": an evidence record names one device, and the cubins were built
    for one architecture."""
    for name, env in new.items():
        old = known.get(name)
        if old is None:
            continue
        a, b = (tuple(str(e.device.get(k, "")) for k in ("name", "compute_capability")) for e in (old, env))
        if a != b:
            return (f'wireup\'s workers run on GPUs of different models ("{a[0]}", compute capability {a[1]}, and "{b[0]}", {b[1]}): '
                    "an evidence record names one device, so a run uses GPUs of one model (choose them with CUDA_VISIBLE_DEVICES).")
    return ""


def locked(fn: Progress) -> Progress:
    """``fn`` behind a lock: the slots report from several threads."""
    lock = threading.Lock()

    def call(ev: dict[str, Any]) -> None:
        with lock:
            fn(ev)

    return call


# -- worker processes ---------------------------------------------------------------------------------


def _reader(stream, q: queue.Queue) -> None:
    for line in iter(stream.readline, b""):
        try:
            q.put(json.loads(line.decode("utf-8", "replace")))
        except ValueError:
            q.put({"event": "noise", "text": line.decode("utf-8", "replace")[:200]})
    q.put(None)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-6:])[-STDERR_TAIL:]


def spawn_worker(job_file: Path, err_file: Path, cwd: str, prefix: Sequence[str] = (), pin: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start one worker process (``python -m audit.runtime._worker JOB.json``, behind ``prefix`` such as
    compute-sanitizer) in a session of its own, so that killing its process group ends everything it
    started; ``pin`` is added to its environment (``CUDA_VISIBLE_DEVICES``: the one GPU it may see). The
    one place wireup makes a worker process."""
    env = {**os.environ, **dict(pin or {})}
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([pkg_root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.setdefault("PYTHONUNBUFFERED", "1")
    single_blas_thread(env)  # one BLAS thread a worker, unless the user set it (audit.config.BLAS_THREADS)
    env = supervised_env(env)  # the worker leaves when this process dies (audit/runtime/_worker_lifetime.py)
    with open(err_file, "ab") as errfh:
        return track(subprocess.Popen(
            [*prefix, sys.executable, "-m", "audit.runtime._worker", str(job_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=errfh, cwd=cwd, env=env, start_new_session=True,
        ))  # fmt: skip


class _Worker:
    """One worker process and the queue its reader thread fills with its events."""

    def __init__(self, proc: subprocess.Popen, err_file: Path):
        self.proc = proc
        self.err_file = err_file
        self.events: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, self.events), daemon=True).start()
        self.started = False  # "hello" seen

    def send(self, index: int) -> bool:
        try:
            self.proc.stdin.write(f"{index}\n".encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def stop(self, kill: bool = False) -> None:
        if kill:
            _kill(self.proc)
            return
        if self.proc.poll() is not None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _kill(self.proc)

    def leftover(self) -> list[dict[str, Any]]:
        """Events still queued after the worker stopped (its ``bye``)."""
        out = []
        while True:
            try:
                ev = self.events.get(timeout=0.5 if self.proc.poll() is not None else 0)
            except queue.Empty:
                return out
            if ev is None:
                return out
            out.append(ev)


# -- supervising ----------------------------------------------------------------------------------------


@workers_die_with_supervisor
def supervise(
    job: dict[str, Any],
    workers: int = 1,
    timeout: float = 60.0,
    launch_timeout: float | None = None,
    progress: Progress | None = None,
    wrapper: Wrapper | None = None,
    crash_verdict: bool = True,
    workdir: Path | None = None,
    devices: Sequence[str | None] | None = None,
    on_done: Callable[[int, UnitOutcome, dict[str, EnvironmentInfo]], None] | None = None,
) -> SupervisedRun:
    """Run every unit of ``job`` in supervised workers (see the module docstring); ``launch_timeout``
    defaults to ``timeout``. ``devices[slot]`` pins the workers of a slot to one GPU (a
    ``CUDA_VISIBLE_DEVICES`` value; None: not pinned; see :mod:`audit.runtime._placement`). Progress
    events: the workers' own (with ``unit`` and ``worker``, the slot), and ``workers`` (``count``,
    ``devices``) first, ``unit_start``, ``unit_done`` (``seconds``, ``failed`` rule IDs, or None and
    ``error``), ``retry``, ``lost`` (``what``) and ``timeout`` (``subject``, ``what``). ``on_done(i,
    outcome, environments)`` is called as each unit ends (a journal keeps what a run cut short had done)."""
    state = _Supervision(job, timeout, launch_timeout if launch_timeout is not None else timeout, locked(progress or (lambda ev: None)),
                         wrapper, crash_verdict, workdir, devices)  # fmt: skip
    state.on_done = on_done
    slots = max(1, min(workers, len(job["units"]) or 1))
    state.progress({"event": "workers", "count": slots, "devices": [state.device(s) for s in range(slots)], "units": len(job["units"])})
    return state.run(slots)


class _Supervision:
    """The supervisor's shared state; :meth:`drive` runs one worker slot."""

    def __init__(self, job: dict[str, Any], timeout: float, launch_timeout: float, progress: Progress, wrapper: Wrapper | None,
                 crash_verdict: bool, workdir: Path | None, devices: Sequence[str | None] | None = None):  # fmt: skip
        self.job, self.units, self.backends = job, job["units"], list(job["base"]["backends"])
        self.devices = list(devices or [])
        self.kept: dict[int, _Worker] = {}  # a slot's worker kept between calls of drive(keep=True) (a cluster host)
        self.timeout, self.launch_timeout, self.progress = timeout, launch_timeout, progress
        self.wrapper, self.crash_verdict = wrapper, crash_verdict
        self.tmp = Path(tempfile.mkdtemp(prefix="wireup-verify-", dir=workdir))
        self.job_file = self.tmp / "job.json"
        self.job_file.write_text(json.dumps(job))
        self.out = SupervisedRun()
        self.fatal: list[str] = []
        self.live: set[_Worker] = set()  # running workers, killed if the supervisor is interrupted
        self.retried: set[int] = set()  # units run again on a fresh worker (a context lost outside their launches, a death between units)
        self.spawned = 0
        self.stopping = False
        self.lock = threading.Lock()
        self.on_done: Callable[[int, UnitOutcome, dict[str, EnvironmentInfo]], None] | None = None

    def run(self, slots: int) -> SupervisedRun:
        pending: queue.Queue = queue.Queue()
        for i in range(len(self.units)):
            pending.put(i)
        threads = [threading.Thread(target=self.drive, args=(slot, pending), daemon=True) for slot in range(slots)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            self.close()
        self.out.notes.sort()  # the slots finish in any order: the notes of a run do not depend on it
        if self.fatal:
            raise EnvironmentProblem(self.fatal[0])
        return self.out

    def close(self) -> None:
        """End every worker and remove the job file and the workers' stderr (what mattered is in the records)."""
        with self.lock:  # under the lock: no slot starts a worker after this (start() checks stopping)
            self.stopping = True  # leaving early (Ctrl-C, SIGTERM): no new units, no worker left behind
            live = list(self.live)
        for w in live:
            w.stop(kill=True)
        self.kept.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def device(self, slot: int) -> str | None:
        """The GPU the workers of ``slot`` are pinned to (None: not pinned)."""
        return self.devices[slot % len(self.devices)] if self.devices else None

    # -- workers of a slot --------------------------------------------------------------------------------
    def start(self, slot: int) -> _Worker | None:
        """A new worker for ``slot``; None once the supervision is closing (a unit re-queued after its
        worker was killed by the supervisor's own signal handler must not start another)."""
        with self.lock:
            if self.stopping or closing():
                return None
            self.spawned += 1
            n = self.spawned
        prefix, log = self.wrapper(n) if self.wrapper else ([], None)
        if log is not None:
            with self.lock:
                self.out.sanitizer_logs.append(log)
        err = self.tmp / f"worker-{slot}-{n}.stderr"
        dev = self.device(slot)
        pin = {"CUDA_VISIBLE_DEVICES": dev} if dev is not None else None
        with self.lock:
            if self.stopping or closing():
                return None
            worker = _Worker(spawn_worker(self.job_file, err, self.job["base"]["root"], prefix, pin), err)
            self.live.add(worker)
        return worker

    def retire(self, worker: _Worker, kill: bool) -> None:
        worker.stop(kill=kill)
        with self.lock:
            self.live.discard(worker)
        for ev in worker.leftover():
            self.absorb(ev)

    def absorb(self, ev: dict[str, Any]) -> None:
        """Keep what a worker says about itself: its environment and its timing."""
        with self.lock:
            if ev.get("event") == "hello":
                envs = {n: EnvironmentInfo.from_dict(e) for n, e in ev.get("environments", {}).items()}
                why = mixed_devices(self.out.environments, envs)
                if why:
                    self.fatal.append(why)
                self.out.environments.update(envs)
            elif ev.get("event") == "bye":
                for k, v in ev.get("timing", {}).items():
                    self.out.timing[k] = self.out.timing.get(k, 0.0) + float(v)

    def finish(self, i: int, outcome: UnitOutcome, slot: int) -> None:
        with self.lock:
            self.out.outcomes[i] = outcome
            if self.on_done is not None:
                self.on_done(i, outcome, dict(self.out.environments))
        failed = None if outcome.error else failed_rules(outcome.results)
        ev = {"event": "unit_done", "unit": self.units[i]["id"], "worker": slot, "seconds": outcome.seconds, "failed": failed}
        self.progress({**ev, "error": outcome.error} if outcome.error else ev)

    def again(self, i: int, pending: queue.Queue) -> bool:
        """Queue unit ``i`` once more (for a fresh worker); False when it already had its second chance."""
        with self.lock:
            if i in self.retried:
                return False
            self.retried.add(i)
        pending.put(i)
        return True

    def drive(self, slot: int, pending: queue.Queue, keep: bool = False) -> None:
        """Run units from ``pending`` on the workers of ``slot`` until none is left; with ``keep`` the
        last worker stays up for the next call (a cluster host, :mod:`audit.runtime._cluster`)."""
        worker: _Worker | None = self.kept.pop(slot, None)
        while not self.fatal and not self.stopping:
            try:
                i = pending.get_nowait()
            except queue.Empty:
                break
            if worker is None:
                worker = self.start(slot)
                if worker is None:
                    break
            unit = self.units[i]
            self.progress({"event": "unit_start", "unit": unit["id"], "worker": slot})
            t0 = time.perf_counter()
            w = _Watch(self, worker, i, slot)
            outcome = w.follow()
            seconds = time.perf_counter() - t0
            # a worker that answered leaves by itself (stdin closed): under compute-sanitizer its log is
            # complete only then; one that hung or died is killed
            if outcome == "retry":  # the context was lost outside its launches: once more, on a fresh worker
                self.retire(worker, kill=False)
                worker = None
                self.again(i, pending)
                continue
            if outcome == "done":
                self.finish(i, UnitOutcome(w.results, w.seconds), slot)
                if w.lost:  # the unit lost the context or wrote past its buffers: a fresh worker takes over
                    self.retire(worker, kill=False)
                    worker = None
                continue
            started = worker.started
            self.retire(worker, kill=True)
            code = worker.proc.returncode  # its own exit status where it died before the kill
            err = _tail(worker.err_file)
            worker = None
            if outcome == "fatal":
                break
            if not started:
                detail = w.crash or err or (f"exit code {code}" if outcome == "died" else f"no answer within {self.timeout:g} s")
                self.fatal.append(f"wireup's verification worker failed before verifying anything ({detail.splitlines()[0]}).")
                break
            why = f"exit code {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
            if outcome == "died" and code in LOST and not w.crash:
                # killed from outside (the OOM killer, an operator, a node going down), not by its kernel,
                # which faults (SIGSEGV, a sticky CUDA error) rather than SIGKILLs itself: what the unit
                # reported is dropped and it runs again from the start on a fresh worker; a second loss
                # is the unit's own VERIFY_LAUNCH_ERROR below
                if self.again(i, pending):
                    with self.lock:
                        self.out.notes.append(f'a worker was lost ({why}) during {w.what}; "{unit["id"]}" ran again on a fresh worker')
                    self.progress({"event": "lost", "unit": unit["id"], "worker": slot, "what": f"{why} during {w.what}"})
                    continue
            if outcome == "died" and not w.in_unit and not w.crash:
                # it died before it took the unit up (after the one before): not the unit's doing
                with self.lock:
                    self.out.notes.append(f"a worker exited ({why}) between units: {err}" if err else f"a worker exited ({why}) between units")
                if self.again(i, pending):
                    continue
            if w.crash and not self.crash_verdict:  # wireup itself failed (a Python exception in the worker): no verdict
                self.finish(i, UnitOutcome(w.results, seconds, [f"internal error: {w.crash}"], error=w.crash), slot)
                continue
            if outcome == "timeout":
                limit = self.launch_timeout if w.in_launch else self.timeout
                self.progress({"event": "timeout", "unit": unit["id"], "subject": w.subject, "what": w.what, "worker": slot})
                self.finish(i, self.failed(i, w, TIMEOUT, f"no progress for {limit:g} s during {w.what}; the worker was killed and restarted", seconds, "timeout"), slot)
                continue
            detail = (w.crash.splitlines() or [""])[0] or err
            what = f"the worker died ({why}) during {w.what}" + (f" ({detail})" if detail else "")
            self.finish(i, self.failed(i, w, LAUNCH, what, seconds, "died"), slot)
        if worker is not None:
            if keep and not self.fatal and not self.stopping:
                self.kept[slot] = worker
            else:
                self.retire(worker, kill=False)

    def failed(self, i: int, w: _Watch, check: VerifyCheck, what: str, seconds: float, note: str) -> UnitOutcome:
        """The unit's outcome after its worker was lost: what it reported, and one failed ``check`` record
        per backend for every subject it had not reported."""
        res = list(w.results)
        done = {(r.kind, r.subject, r.backend) for r in res}
        for kind, name in self.units[i]["subjects"]:
            for b in self.backends:
                if (kind, name, b) not in done:
                    r = SubjectResult(name, kind, b)
                    r.add(check, "fail", "", check.failure(kind, name, what))
                    res.append(r)
        return UnitOutcome(res, seconds, [note])


class _Watch:
    """Follows one unit on one worker: sends it, reads the worker's events until the unit is done, the
    worker hangs, dies or cannot start (the watchdog), and keeps what the unit reported."""

    def __init__(self, sup: _Supervision, worker: _Worker, i: int, slot: int):
        self.sup, self.worker, self.i, self.slot = sup, worker, i, slot
        self.unit = sup.units[i]
        self.what = f'starting "{self.unit["id"]}"' if worker.started else "starting the worker"
        self.subject = ""
        self.in_unit = False  # "unit_start" seen
        self.in_launch = False
        self.crash = ""
        self.results: list[SubjectResult] = []
        self.seconds = 0.0
        self.lost = False

    def follow(self) -> str:
        """"done", "retry", "timeout", "died" or "fatal"."""
        sup, worker = self.sup, self.worker
        if not worker.send(self.i):
            return "died"
        last = time.monotonic()
        while True:
            try:
                ev = worker.events.get(timeout=0.25)
            except queue.Empty:
                limit = sup.launch_timeout if self.in_launch else sup.timeout
                if time.monotonic() - last > limit:
                    return "timeout"
                if worker.proc.poll() is None:
                    continue
                try:  # the reader thread posts None at EOF; give it a moment
                    ev = worker.events.get(timeout=2.0)
                except queue.Empty:
                    return "died"
            if ev is None:  # the worker's stdout closed
                return "died"
            last = time.monotonic()
            kind = ev.get("event")
            if kind == "hello":
                worker.started = True
                sup.absorb(ev)
            elif kind == "bye":
                sup.absorb(ev)
            elif kind == "unavailable":
                sup.fatal.append(f'wireup could not start the {ev.get("backend")} backend: {ev.get("reason")}.')
                return "fatal"
            elif kind == "crash":
                self.crash = ev.get("error", "")
            elif kind == "unit_start":
                self.in_unit = True
                continue
            elif kind == "subject_start":
                self.subject = ev.get("subject", "")
                self.what = f'starting "{self.subject}"'
            elif kind == "launch":
                self.in_launch, self.what = True, ev.get("what", self.what)
            elif kind == "launched":
                # the launch finished: a hang from here on is host work (a reference, a check), under ``timeout``
                self.in_launch = False
                if not self.what.startswith("host work after "):
                    self.what = "host work after " + self.what
            elif kind == "subject_done":
                self.results.append(SubjectResult.from_dict(ev["result"]))
            elif kind == "unit_done" and ev.get("index") == self.i:
                if ev.get("suspect") and self.i not in sup.retried:
                    self.sup.progress({"event": "retry", "unit": self.unit["id"], "worker": self.slot, "what": ev["suspect"]})
                    return "retry"
                self.seconds = float(ev.get("seconds", 0.0))
                self.lost = bool(ev.get("lost"))
                return "done"
            if kind not in ("unit_start", "unit_done"):
                sup.progress({**ev, "unit": self.unit["id"], "worker": self.slot})


# -- in process ---------------------------------------------------------------------------------------------


def run_in_process(job: dict[str, Any], cs: Any, cfg: Any, progress: Progress | None = None,
                   emulated: Sequence[Mapping[str, Any] | None] | None = None,
                   on_done: Callable[[int, UnitOutcome, dict[str, EnvironmentInfo]], None] | None = None) -> SupervisedRun:  # fmt: skip
    """Run every unit here, one after the other, with the worker's own body (the emulated backend only:
    numpy memory has no context to lose, and nothing can hang it for good); ``emulated[i]`` are the stand-in
    kernels of unit ``i``. The same progress events as :func:`supervise`."""
    from ._worker import UnitRunner

    progress = progress or (lambda ev: None)
    out = SupervisedRun()

    def emit(ev: dict[str, Any]) -> None:
        if ev.get("event") == "hello":
            out.environments.update({n: EnvironmentInfo.from_dict(e) for n, e in ev["environments"].items()})
        progress(ev)

    t0 = time.perf_counter()
    runner = UnitRunner(job, emit, cs, cfg)
    if not runner.open():
        raise EnvironmentProblem("wireup could not start the verification backend.")
    try:
        for i, unit in enumerate(job["units"]):
            progress({"event": "unit_start", "unit": unit["id"]})
            t = time.perf_counter()
            res, _lost = runner.run(unit, (emulated or [None] * (i + 1))[i])  # a fresh emulated backend per unit: nothing to retire
            out.outcomes[i] = UnitOutcome(res, time.perf_counter() - t)
            if on_done is not None:
                on_done(i, out.outcomes[i], dict(out.environments))
            progress({"event": "unit_done", "unit": unit["id"], "seconds": out.outcomes[i].seconds, "failed": failed_rules(res)})
    finally:
        runner.close()
    out.timing = {**runner.timing, "total": time.perf_counter() - t0}
    progress({"event": "bye", "timing": out.timing})
    return out
