"""The one verification worker: ``python -m audit.runtime._worker JOB.json`` runs the job's *units* whose
indices arrive on stdin, one per line; :class:`UnitRunner` is its body, also run in-process (emulated).

A job (JSON) is ``{"base": JobSpec, "units": [...], "first_failure": bool}``. A unit is what one worker
verifies between two watchdog verdicts: ``{"id", "subjects": [[kind, name], ...]}``, with its own
``modules`` (cubins) and emulated ``plugins`` where it has them (a variant of ``verify_many``); a unit
without ``modules`` uses the base's (``verify``: one unit per kernel or schedule). The backends, the
wiring and the seeded test data are opened once and shared by every unit of the worker.

Protocol: one JSON object per line on the worker's original stdout (anything a library prints there goes
to stderr instead): ``hello`` (device and versions) or ``unavailable`` (a backend cannot start); per unit
``unit_start``, then ``subject_start``, ``launch`` (before every launch, so the watchdog knows where a
hang happened), ``launched``, ``subject_done`` (one result per backend), and ``unit_done`` with ``lost``
(the worker must not verify anything more: a sticky CUDA error, or a write past the guard bands that
may have reached memory the next unit uses) and ``suspect`` (a sticky error outside the unit's launches,
in wireup's own device work, which an earlier unit of this worker may have caused); ``bye`` (timing) when
stdin closes; ``crash`` (an internal error, with its traceback). The worker leaves with ``os._exit`` so
no atexit handler (a CUDA context pop after a fault) can hang it. Exit codes: 0 stdin closed, 3 a unit
lost the context, 4 an internal error or a backend that cannot start, 5 the supervisor is gone.

>>> runner = UnitRunner(job, emit=print, cs=cs, cfg=cfg)              # doctest: +SKIP
>>> runner.open() and runner.run(job["units"][0])                      # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..verify_checks import GUARDS, LAUNCH
from ._backend import Backend, BackendUnavailable, DeviceError
from ._open import open_backend
from ._results import EnvironmentInfo, SubjectResult
from ._session import JobSpec, LaunchFailure, Session
from ._verifiers import VerifyingSession

Emit = Callable[[dict[str, Any]], None]


def environment_of(be: Backend) -> EnvironmentInfo:
    """The device and software facts of an open backend (recorded in every evidence record)."""
    info = be.device_info()
    return EnvironmentInfo(
        backend=be.name,
        backend_version=be.version(),
        device={k: info.get(k) for k in ("name", "compute_capability", "memory_bytes")},
        driver_version=str(info.get("driver_version", "")),
        runtime_version=str(info.get("runtime_version", "")),
    )


def load_plugins(specs: list[str], backends: dict[str, Backend], paths: list[str]) -> None:
    """Call each ``module:function`` with the emulated backend (tests register broken kernels this way)."""
    from ._reference import load_callable

    for spec in specs:
        fn = load_callable(spec, paths)
        for be in backends.values():
            fn(be)


# -- first failure -----------------------------------------------------------------------------------


class _Caught(Exception):
    """Ends a kernel's verification under ``first_failure`` once a check has failed."""


def _first_failure_verifier():
    from ._kernel import KernelVerifier

    class FirstFailureVerifier(KernelVerifier):
        """Stops the kernel's verification after the case in which a check first failed. The stop comes
        where the next case is built, when no device memory of the failed case is still held."""

        failed = False

        def add(self, backend, check, verdict, case, message, **nums):  # noqa: ANN001 - KernelVerifier.add
            super().add(backend, check, verdict, case, message, **nums)
            self.failed = self.failed or verdict == "fail"

        def base_case(self, *args, **kwargs):  # noqa: ANN002, ANN003 - KernelVerifier.base_case
            if self.failed:
                raise _Caught()
            return super().base_case(*args, **kwargs)

        def grad_case(self, *args, **kwargs):  # noqa: ANN002, ANN003 - KernelVerifier.grad_case
            if self.failed:
                raise _Caught()
            return super().grad_case(*args, **kwargs)

    return FirstFailureVerifier


class _FirstFailureSession(VerifyingSession):
    """A session whose kernel subjects stop at their first failing case (``first_failure``): enough to
    know a mutant is caught, and much cheaper than every check at every size."""

    def run_subject(self, kind: str, name: str) -> list[SubjectResult]:
        if kind != "kernel":
            return super().run_subject(kind, name)
        self.current = name
        self._subject_timing = {}
        t0 = time.perf_counter()
        verifier = _first_failure_verifier()(self, self.cs.kernel(name))
        try:
            results = verifier.run()
        except _Caught:
            results = list(verifier.results.values())
        finally:
            timing, self._subject_timing = self._subject_timing, None
        for r in results:
            r.duration_s = time.perf_counter() - t0
            r.timing = dict(timing or {})
        return results


# -- the runner ---------------------------------------------------------------------------------------


class UnitRunner:
    """Verifies units one after the other with shared backends, wiring and test data (see the module
    docstring). ``emulated`` (symbol -> Python kernel) stands in for the kernels on the emulated backend,
    which is made afresh for every unit (with the job's and the unit's plugins registered on it)."""

    def __init__(self, job: dict[str, Any], emit: Emit, cs: Any = None, cfg: Any = None, emulated: Mapping[str, Any] | None = None):
        from ..api import load_project
        from ..graph import Wiring

        self.base = JobSpec.from_dict(job["base"])
        self.first_failure = bool(job.get("first_failure"))
        self.emit = emit
        if cs is None or cfg is None:
            cfg, cs = load_project(Path(self.base.root))
        self.cs, self.cfg = cs, cfg
        self.wiring = Wiring(cs)
        self.emulated = dict(emulated or {})
        self.shared: dict[str, Backend] = {}  # the GPU backends, opened once
        self._pending: Backend | None = None  # the emulated backend made by open(), for the first unit
        self.factory = None
        self._base_session: Session | None = None
        self.timing: dict[str, float] = {}
        self.suspect = ""  # the last unit's sticky error outside its launches, if any
        self._paths = [str(cfg.root), *self.base.python_paths]

    def open(self) -> bool:
        """Open the GPU backends and load the job's plugins; emits ``hello``, or ``unavailable`` and
        returns False when a backend cannot start. A plugin that cannot be loaded raises."""
        envs = {}
        for name in self.base.backends:
            t = time.perf_counter()
            if name == "emulated":
                be = self._pending = self._emulated_backend()  # the first unit's: the job's plugins load here, before "hello"
            else:
                try:
                    be = self.shared[name] = open_backend(name, helper_cubin=self.base.helper_cubin)
                except BackendUnavailable as exc:
                    self.emit({"event": "unavailable", "backend": name, "reason": str(exc)})
                    return False
            self.timing["context_start"] = self.timing.get("context_start", 0.0) + time.perf_counter() - t
            envs[name] = environment_of(be).to_dict()
        self.emit({"event": "hello", "environments": envs})
        return True

    def _emulated_backend(self) -> Backend:
        """A fresh emulated backend with the runner's stand-in kernels and the job's plugins."""
        from ._emulated import EmulatedBackend

        be = EmulatedBackend(kernels=self.emulated)
        if self.base.plugins:
            load_plugins(self.base.plugins, {"emulated": be}, self._paths)
        return be

    def _backends(self, unit: Mapping[str, Any], emulated: Mapping[str, Any] | None) -> dict[str, Backend]:
        bes: dict[str, Backend] = {}
        for name in self.base.backends:
            if name != "emulated":
                bes[name] = self.shared[name]
                continue
            be, self._pending = self._pending or self._emulated_backend(), None
            for symbol, fn in dict(emulated or {}).items():
                be.register(symbol, fn)
            if unit.get("plugins"):
                load_plugins(unit["plugins"], {"emulated": be}, self._paths)
            bes[name] = be
        return bes

    def _session(self, unit: Mapping[str, Any], bes: dict[str, Backend]) -> Session:
        """The base session (its modules loaded once) for a unit of the base's modules on the GPU
        backends; a session of its own for a unit with its own modules or an emulated backend."""
        cls = _FirstFailureSession if self.first_failure else VerifyingSession
        own = "modules" in unit or "emulated" in bes
        if not own and self._base_session is not None:
            return self._base_session
        job = JobSpec.from_dict({**self.base.to_dict(), "subjects": unit["subjects"], **({"modules": unit["modules"]} if "modules" in unit else {})})
        session = cls(job, self.cs, self.cfg, bes, self.emit, wiring=self.wiring)
        if self.factory is not None:
            session.factory = self.factory  # the seeded data of every unit is the same: generate it once
        self.factory = session.factory
        if not own:
            self._base_session = session
        return session

    def run(self, unit: Mapping[str, Any], emulated: Mapping[str, Any] | None = None) -> tuple[list[SubjectResult], bool]:
        """Verify one unit, emitting ``subject_start`` and ``subject_done`` per subject; returns its
        results and whether the worker must stop (``lost``; see the module docstring)."""
        bes = self._backends(unit, emulated)
        session = self._session(unit, bes)
        before = dict(session.timing)
        results: list[SubjectResult] = []
        lost = False
        self.suspect = ""
        for kind, name in unit["subjects"]:
            self.emit({"event": "subject_start", "unit": unit["id"], "kind": kind, "subject": name})
            try:
                res = session.run_subject(kind, name)
            except LaunchFailure as exc:
                # a sticky error in a launch of this subject: the context is gone
                res = getattr(exc, "results", None) or self._failed(bes, kind, name, str(exc))
                lost = True
            except DeviceError as exc:
                if not exc.sticky:
                    raise
                # outside the subject's launches (each is synchronised and checked): wireup's own device
                # work found the context lost, which an earlier unit of this worker may have caused
                self.suspect = str(exc)
                what = f"the CUDA context was lost after its launches, in wireup's own device work ({exc}), on a fresh worker too"
                res, lost = self._failed(bes, kind, name, what), True
            for r in res:
                self.emit({"event": "subject_done", "unit": unit["id"], "result": r.to_dict()})
            results.extend(res)
            if lost:
                break
            if self.first_failure and any(r.failed for r in res):
                # the variant is caught (a header mutant is caught when any kernel including the header
                # catches it): the unit's other subjects could only repeat the verdict, so none starts
                break
        if not lost and any(c.check == GUARDS.name for r in results for c in r.failed):
            lost = True  # its writes past the guard bands may have reached memory the next unit uses
        for k, v in session.timing.items():
            if v != before.get(k, 0.0):
                self.timing[k] = self.timing.get(k, 0.0) + v - before.get(k, 0.0)
        return results, lost

    @staticmethod
    def _failed(bes: Mapping[str, Any], kind: str, name: str, what: str) -> list[SubjectResult]:
        out = []
        for b in bes:
            r = SubjectResult(name, kind, b)
            r.add(LAUNCH, "fail", "", LAUNCH.failure(kind, name, what))
            out.append(r)
        return out

    def close(self) -> None:
        for b in self.shared.values():
            try:
                b.close()
            except Exception:  # noqa: BLE001 - closing after a fault is best effort
                pass


# -- the worker process -------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """``python -m audit.runtime._worker JOB.json``: run the units whose indices arrive on stdin (see the
    module docstring)."""
    from ._worker_lifetime import die_with_parent

    die_with_parent()  # a supervisor killed outright takes this worker with it
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(ev: dict[str, Any]) -> None:
        proto.write(json.dumps(ev, default=str) + "\n")
        proto.flush()

    code = 0
    runner = None
    t0 = time.perf_counter()
    try:
        with open(argv[0]) as fh:
            job = json.load(fh)
        base = job["base"]
        for p in reversed([base["root"], *base.get("python_paths", [])]):
            if p not in sys.path:
                sys.path.insert(0, p)
        _exit_with_parent()
        runner = UnitRunner(job, emit)
        if not runner.open():
            code = 4
        else:
            for line in sys.stdin:
                if not line.strip():
                    continue
                i = int(line)
                unit = job["units"][i]
                emit({"event": "unit_start", "index": i, "unit": unit["id"]})
                t = time.perf_counter()
                _, lost = runner.run(unit)
                emit({"event": "unit_done", "index": i, "unit": unit["id"], "seconds": time.perf_counter() - t, "lost": lost, "suspect": runner.suspect})
                if lost:
                    code = 3
                    break
            emit({"event": "bye", "timing": {**runner.timing, "total": time.perf_counter() - t0}})
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the supervisor
        emit({"event": "crash", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
        code = 4
    try:
        proto.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _exit_with_parent() -> None:
    """Leave when the supervisor is gone (killed outright): a worker stuck in a hung kernel would
    otherwise hold the GPU forever."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(5)

    threading.Thread(target=watch, daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1:])
