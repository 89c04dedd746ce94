"""Running a job's subjects in this process: the body of a worker, and of ``--emulated`` runs and tests.

:func:`run_job` opens the backends, verifies each subject in turn and reports through ``emit``:
``hello`` (device and versions), ``subject_start``, ``launch`` (before every launch, so a watchdog knows
where a hang happened), ``subject_done`` (the results) and ``bye`` (timing). A sticky CUDA error (the
context is gone) ends the job early with ``poisoned``; the supervisor restarts a worker for the rest.

>>> run_job(job, emit=print, backends={"emulated": EmulatedBackend()})   # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..verify_checks import LAUNCH
from ._backend import Backend, BackendUnavailable, open_backend
from ._results import EnvironmentInfo, SubjectResult
from ._session import JobSpec, LaunchFailure, Session

Emit = Callable[[dict[str, Any]], None]


def environment_of(be: Backend) -> EnvironmentInfo:
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


def run_job(job: JobSpec, emit: Emit, backends: dict[str, Backend] | None = None, cs: Any = None, cfg: Any = None) -> list[SubjectResult]:
    """Verify every subject of ``job`` here; returns the results (also emitted as ``subject_done``)."""
    from ..api import load_project
    from ..config import load_config

    t0 = time.perf_counter()
    if cs is None or cfg is None:
        cfg = cfg or load_config(Path(job.root))
        cfg, cs = load_project(Path(job.root), cfg)
    timing: dict[str, float] = {}
    if backends is None:
        backends = {}
        for name in job.backends:
            t = time.perf_counter()
            opts = {"helper_cubin": job.helper_cubin} if name != "emulated" else {}
            try:
                backends[name] = open_backend(name, **opts)
            except BackendUnavailable as exc:
                emit({"event": "unavailable", "backend": name, "reason": str(exc)})
                return []
            timing["context_start"] = timing.get("context_start", 0.0) + time.perf_counter() - t
    if job.plugins:
        load_plugins(job.plugins, backends, [str(cfg.root), *job.python_paths])
    emit({"event": "hello", "environments": {n: environment_of(b).to_dict() for n, b in backends.items()}})
    session = Session(job, cs, cfg, backends, emit)
    session.timing.update(timing)
    results: list[SubjectResult] = []
    for kind, name in job.subjects:
        emit({"event": "subject_start", "kind": kind, "subject": name})
        try:
            res = session.run_subject(kind, name)
        except LaunchFailure as exc:
            # a sticky error: the context is gone; report what the subject found and stop
            res = getattr(exc, "results", None) or []
            if not res:
                for b in backends:
                    r = SubjectResult(name, kind, b)
                    r.add(LAUNCH, "fail", "", LAUNCH.failure(kind, name, str(exc)))
                    res.append(r)
            for r in res:
                emit({"event": "subject_done", "result": r.to_dict()})
            results.extend(res)
            if all(b.name == "emulated" for b in backends.values()):
                session.poisoned = None  # numpy memory has no context to lose: carry on
                continue
            emit({"event": "poisoned", "subject": name, "reason": str(exc)})
            break
        for r in res:
            emit({"event": "subject_done", "result": r.to_dict()})
        results.extend(res)
    session.timing["total"] = time.perf_counter() - t0
    emit({"event": "bye", "timing": session.timing})
    for b in backends.values():
        try:
            b.close()
        except Exception:  # noqa: BLE001
            pass
    return results
