"""The supervisor: runs a job in worker processes and keeps a hanging or crashing kernel from taking
wireup down with it.

A worker reports an event before every launch. When no event arrives for ``timeout`` seconds the kernel
in flight is hung: the worker's process group is killed, the subject gets a VERIFY_TIMEOUT record naming
the launch, and a fresh worker continues with the remaining subjects. A worker that dies (a segfault, a
CUDA error that poisoned its context) gives its subject a VERIFY_LAUNCH_ERROR record with the last
launch and the tail of its stderr, and is likewise replaced. Under ``--sanitizer`` every worker runs
inside ``compute-sanitizer``, whose report goes to a log file parsed per worker.

>>> out = run_supervised(job, timeout=60.0, progress=print)     # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EnvironmentProblem
from ..verify_checks import LAUNCH, TIMEOUT
from ._results import EnvironmentInfo, SubjectResult
from ._session import JobSpec

STDERR_TAIL = 1500


@dataclass
class SupervisedRun:
    results: list[SubjectResult] = field(default_factory=list)
    environments: dict[str, EnvironmentInfo] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sanitizer_logs: list[Path] = field(default_factory=list)
    restarts: int = 0


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


def run_supervised(
    job: JobSpec,
    timeout: float,
    progress: Callable[[dict[str, Any]], None] | None = None,
    wrapper: Callable[[int], tuple[list[str], Path | None]] | None = None,
    python: str | None = None,
    workdir: Path | None = None,
) -> SupervisedRun:
    """Verify ``job`` in workers (see the module docstring); ``wrapper(n)`` gives a command prefix and log
    file for the n-th worker (compute-sanitizer)."""
    progress = progress or (lambda ev: None)
    out = SupervisedRun()
    remaining = [list(s) for s in job.subjects]
    per_subject = len(job.backends)
    tmp = Path(tempfile.mkdtemp(prefix="wireup-verify-", dir=workdir))
    attempt = 0
    env = dict(os.environ)
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([pkg_root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.setdefault("PYTHONUNBUFFERED", "1")
    while remaining:
        attempt += 1
        before = len(remaining)
        part = JobSpec.from_dict({**job.to_dict(), "subjects": remaining})
        job_file = tmp / f"job-{attempt}.json"
        job_file.write_text(json.dumps(part.to_dict()))
        err_file = tmp / f"worker-{attempt}.stderr"
        prefix, log = wrapper(attempt) if wrapper else ([], None)
        if log is not None:
            out.sanitizer_logs.append(log)
        cmd = [*prefix, python or sys.executable, "-m", "audit.runtime._worker", str(job_file)]
        with open(err_file, "wb") as errfh:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errfh, cwd=job.root, env=env, start_new_session=True)
        q: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        current: list[str] | None = None
        done_for: dict[str, int] = {}
        last_event = time.monotonic()
        last_launch = "starting the worker"
        started_any = False
        timed_out = False
        crash: str | None = None
        poisoned: str | None = None
        unavailable: str | None = None
        while True:
            try:
                ev = q.get(timeout=0.25)
            except queue.Empty:
                ev = None
                if time.monotonic() - last_event > timeout:
                    timed_out = True
                    _kill(proc)
                    break
                if proc.poll() is not None and q.empty():
                    # the reader thread posts None at EOF; give it a moment
                    try:
                        ev = q.get(timeout=2.0)
                    except queue.Empty:
                        break
                    if ev is None:
                        break
                else:
                    continue
            if ev is None:
                break
            last_event = time.monotonic()
            kind = ev.get("event")
            if kind == "hello":
                for n, e in ev.get("environments", {}).items():
                    out.environments[n] = EnvironmentInfo.from_dict(e)
            elif kind == "subject_start":
                current = [ev["kind"], ev["subject"]]
                started_any = True
                last_launch = f'starting "{ev["subject"]}"'
            elif kind == "launch":
                last_launch = ev.get("what", last_launch)
            elif kind == "launched":
                # the launch finished: a hang from here on is host work (a reference, a check)
                if not last_launch.startswith("host work after "):
                    last_launch = "host work after " + last_launch
            elif kind == "subject_done":
                r = SubjectResult.from_dict(ev["result"])
                out.results.append(r)
                key = f"{r.kind}:{r.subject}"
                done_for[key] = done_for.get(key, 0) + 1
                if done_for[key] >= per_subject and [r.kind, r.subject] in remaining:
                    remaining.remove([r.kind, r.subject])
                    current = None
            elif kind == "poisoned":
                poisoned = ev.get("reason", "")
            elif kind == "bye":
                for k, v in ev.get("timing", {}).items():
                    out.timing[k] = out.timing.get(k, 0.0) + float(v)
            elif kind == "crash":
                crash = ev.get("error", "") + "\n" + ev.get("traceback", "")
            elif kind == "unavailable":
                unavailable = f'{ev.get("backend")} backend: {ev.get("reason")}'
            progress(ev)
        if proc.poll() is None:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                _kill(proc)
        code = proc.returncode
        if unavailable:
            raise EnvironmentProblem(f"wireup verify could not start the {unavailable}.")
        if timed_out and current is not None:
            name = current[1]
            what = "Kernel" if current[0] == "kernel" else "Schedule"
            msg = TIMEOUT.failure(current[0], name, f"no progress for {timeout:g} s during {last_launch}; the worker was killed and restarted")
            for b in job.backends:
                r = SubjectResult(name, current[0], b)
                r.add(TIMEOUT, "fail", "", msg)
                out.results.append(r)
            remaining.remove(current)
            out.restarts += 1
            progress({"event": "timeout", "subject": name, "what": last_launch})
            continue
        if current is not None:
            # the worker died inside a subject: a crash or a poisoned context
            name = current[1]
            what = "Kernel" if current[0] == "kernel" else "Schedule"
            why = f"exit code {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
            detail = (crash.strip().splitlines()[0] if crash else "") or _tail(err_file)
            msg = LAUNCH.failure(current[0], name, f"the worker died ({why}) during {last_launch}" + (f" ({detail})" if detail else ""))
            have = {r.backend for r in out.results if r.subject == name and r.kind == current[0]}
            for b in job.backends:
                if b in have:
                    continue
                r = SubjectResult(name, current[0], b)
                r.add(LAUNCH, "fail", "", msg)
                out.results.append(r)
            if current in remaining:
                remaining.remove(current)
            out.restarts += 1
            continue
        if remaining and not started_any:
            detail = (crash or "").strip() or _tail(err_file) or f"exit code {code}"
            raise EnvironmentProblem(f"wireup verify's worker failed before verifying anything ({detail.splitlines()[0] if detail else code}).")
        if remaining and poisoned is None and code not in (0, 3, 86):
            out.notes.append(f"a worker exited with code {code} between subjects: {_tail(err_file)}")
        if poisoned:
            out.restarts += 1
        if remaining and len(remaining) == before:
            detail = (crash or "").strip() or _tail(err_file) or f"exit code {code}"
            raise EnvironmentProblem(f"wireup verify's worker stopped without verifying anything ({detail.splitlines()[0]}).")
    return out
