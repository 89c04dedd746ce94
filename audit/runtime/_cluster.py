"""``--cluster ray[://ADDRESS]``: the units of a job on the GPUs of a Ray cluster, through the same
supervisor and worker as a local run.

Each Ray actor (a *host*, one GPU each: Ray pins it with ``CUDA_VISIBLE_DEVICES``; one CPU each on the
emulated backend) keeps a one-slot :class:`~audit.runtime._supervisor._Supervision` and its long-lived
worker, and runs the units the driver hands it one at a time: the watchdog, the worker retirement and
the context-lost retry are the local ones, on the host's node. The driver keeps every host busy (a unit
goes to whichever host is free, so uneven units balance), replays each unit's progress events with the
host as ``worker``, and keeps each unit's outcome by its index, so the merged run is the same whatever
host ran what.

A host lost mid-unit (its node went down, its process was killed): Ray fails the pending call, the unit
runs again from the start on another host and a fresh host replaces the lost one; what the lost call
reported never reached the driver, so nothing is counted twice. A unit whose host is lost
:data:`MAX_LOSSES` times gets a VERIFY_LAUNCH_ERROR record per subject, as a unit whose worker is killed
twice does locally.

Build once, ship the cubins: the driver compiles (its build cache), then :func:`ship` replaces every cubin
path of the job by its SHA-256 and puts the bytes in Ray's object store once; each host writes them into a
content-addressed folder of its node (:func:`land`, ``$WIREUP_CACHE/shipped`` or the temp folder) and
never compiles. The project itself (contracts, references, plugins) must be at the same path on every
node, and wireup installed there.

Ray is an optional extra (``pip install 'wireup-audit[cluster]'``); :func:`require_ray` turns its absence
into a one-sentence usage error.

>>> run = supervise_on_ray(job, "ray", workers="auto", timeout=60.0, launch_timeout=5.0)   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import queue
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import EnvironmentProblem, UsageError
from ..verify_checks import LAUNCH
from ._results import SubjectResult
from ._supervisor import SupervisedRun, UnitOutcome, locked, mixed_devices

Progress = Callable[[dict[str, Any]], None]
MAX_LOSSES = 2  # hosts lost during one unit before it is judged (VERIFY_LAUNCH_ERROR)
PLACEMENT_SLACK = 600.0  # seconds without any result beyond the watchdog's timeout: no host could be placed
SCHEMES = ("ray",)


def parse_cluster(text: str | None, flag: str = "--cluster") -> str | None:
    """``ray`` (a local Ray instance, or the cluster ``RAY_ADDRESS`` names) or ``ray://HOST:PORT`` (a Ray
    client address) as the address :func:`ray.init` takes (None for plain ``ray``); a :class:`UsageError`
    for anything else."""
    if text is None:
        return None
    value = text.strip()
    if value == "ray":
        return "ray"
    if value.startswith("ray://") and len(value) > len("ray://"):
        return value
    raise UsageError(f'{flag} takes "ray" or "ray://HOST:PORT", found "{text}".')


def require_ray(flag: str = "--cluster") -> Any:
    """The ``ray`` module, or a :class:`UsageError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"{flag} ray needs Ray, which is not installed; install it with: pip install 'wireup-audit[cluster]'.") from None
    return ray


# -- shipping cubins ------------------------------------------------------------------------------------------


def _module_tables(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [job["base"].get("modules") or {}] + [u.get("modules") or {} for u in job["units"]]


def ship(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A copy of ``job`` whose cubins are named by content (``cubin_sha256``) and the bytes of each, read
    once per distinct file: what a host on another node needs instead of the driver's build cache."""
    import copy

    out = copy.deepcopy(job)
    blobs: dict[str, bytes] = {}
    by_path: dict[str, str] = {}

    def content(path: str) -> str:
        if path not in by_path:
            data = Path(path).read_bytes()
            sha = hashlib.sha256(data).hexdigest()
            blobs[sha] = data
            by_path[path] = sha
        return by_path[path]

    for table in _module_tables(out):
        for mod in table.values():
            if mod.get("cubin"):
                mod["cubin_sha256"] = content(mod["cubin"])
    if out["base"].get("helper_cubin"):
        out["base"]["helper_cubin_sha256"] = content(out["base"]["helper_cubin"])
    return out, blobs


def shipped_folder() -> Path:
    """Where a host keeps shipped cubins: ``$WIREUP_CACHE/shipped``, else under the temp folder."""
    base = os.environ.get("WIREUP_CACHE")
    return Path(base) / "shipped" if base else Path(tempfile.gettempdir()) / "wireup-cache" / "shipped"


def land(job: dict[str, Any], blobs: Mapping[str, bytes], folder: Path) -> dict[str, Any]:
    """``job`` with each shipped cubin written to ``folder/<sha256>.cubin`` (once: a file already there is
    kept) and its path pointing there. A blob whose bytes do not hash to its name is refused."""
    import copy

    out = copy.deepcopy(job)
    folder.mkdir(parents=True, exist_ok=True)

    def place(sha: str) -> str:
        target = folder / f"{sha}.cubin"
        if not target.is_file():
            data = blobs[sha]
            if hashlib.sha256(data).hexdigest() != sha:
                raise EnvironmentProblem(f"a shipped cubin does not match its hash {sha[:12]}: it was damaged on the way.")
            tmp = target.with_name(f".{sha}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        return str(target)

    for table in _module_tables(out):
        for mod in table.values():
            if mod.get("cubin_sha256"):
                mod["cubin"] = place(mod.pop("cubin_sha256"))
    if out["base"].get("helper_cubin_sha256"):
        out["base"]["helper_cubin"] = place(out["base"].pop("helper_cubin_sha256"))
    return out


# -- a host ----------------------------------------------------------------------------------------------------


class UnitHost:
    """The body of a Ray actor: one supervised worker slot on its node (see the module docstring)."""

    def __init__(self, job: dict[str, Any], blobs: Mapping[str, bytes], timeout: float, launch_timeout: float, crash_verdict: bool):
        from ._supervisor import _Supervision

        self.events: list[dict[str, Any]] = []
        self.sup = _Supervision(land(job, blobs, shipped_folder()) if blobs else job, timeout, launch_timeout, locked(self.events.append),
                                None, crash_verdict, None)  # fmt: skip

    def pid(self) -> int:
        return os.getpid()

    def run(self, i: int) -> dict[str, Any]:
        """Unit ``i`` on this host's worker: its outcome, events, and what the worker said about itself."""
        self.events.clear()
        self.sup.out.notes.clear()
        pending: queue.Queue = queue.Queue()
        pending.put(i)
        self.sup.drive(0, pending, keep=True)
        if self.sup.fatal:
            return {"fatal": self.sup.fatal[0]}
        out = self.sup.out
        got = {"outcome": out.outcomes.pop(i, None), "events": list(self.events), "environments": dict(out.environments),
               "timing": dict(out.timing), "notes": list(out.notes)}  # fmt: skip
        out.timing.clear()
        return got

    def close(self) -> None:
        self.sup.close()


def lost_outcome(unit: Mapping[str, Any], backends: list[str], what: str) -> UnitOutcome:
    """A failed VERIFY_LAUNCH_ERROR record per subject and backend of a unit that could not be run."""
    res = []
    for kind, name in unit["subjects"]:
        for b in backends:
            r = SubjectResult(name, kind, b)
            r.add(LAUNCH, "fail", "", LAUNCH.failure(kind, name, what))
            res.append(r)
    return UnitOutcome(res, 0.0, ["lost"])


def supervise_on_ray(job: dict[str, Any], address: str, workers: int | str | None = "auto", timeout: float = 60.0,
                     launch_timeout: float | None = None, progress: Progress | None = None, crash_verdict: bool = True,
                     ray_init: Mapping[str, Any] | None = None, on_done: Any = None) -> SupervisedRun:  # fmt: skip
    """Run every unit of ``job`` on Ray hosts (see the module docstring): ``workers`` hosts (``auto``:
    one per GPU of the cluster, or per CPU on the emulated backend). ``address`` is ``ray`` or a
    ``ray://`` address; a Ray already initialised in this process is used as it is. The same
    :class:`SupervisedRun` and progress events as :func:`~audit.runtime._supervisor.supervise`."""
    ray = require_ray()
    progress = locked(progress or (lambda ev: None))
    launch_timeout = launch_timeout if launch_timeout is not None else timeout
    started = False
    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "ray" else address, log_to_driver=False, **dict(ray_init or {}))
        except Exception as exc:  # noqa: BLE001 - whatever Ray raises, it is the cluster that cannot be reached
            raise EnvironmentProblem(f"wireup could not connect to the Ray cluster {address!r} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'}).") from None
        started = True
    try:
        return _drive(ray, job, workers, timeout, launch_timeout, progress, crash_verdict, on_done)
    finally:
        if started:
            ray.shutdown()


def _drive(ray: Any, job: dict[str, Any], workers: int | str | None, timeout: float, launch_timeout: float, progress: Progress,
           crash_verdict: bool, on_done: Any = None) -> SupervisedRun:  # fmt: skip
    units = job["units"]
    backends = list(job["base"]["backends"])
    emulated = backends == ["emulated"]
    resources = ray.cluster_resources()
    gpus = float(resources.get("GPU", 0.0))
    if workers in (None, "auto"):
        n = int(resources.get("CPU", 1)) if emulated else int(gpus)
    else:
        n = int(workers)
    if n < 1:
        raise EnvironmentProblem("the Ray cluster has no GPU to verify on (its resources list none).")
    n = max(1, min(n, len(units) or 1))
    need = {"num_cpus": 1} if emulated else {"num_cpus": 0, "num_gpus": min(1.0, gpus / n) if gpus else 1.0}
    shipped, blobs = ship(job)
    job_ref, blobs_ref = ray.put(shipped), ray.put(blobs)
    actor = ray.remote(max_restarts=0, max_task_retries=0)(UnitHost)

    def new_host() -> Any:
        return actor.options(**need).remote(job_ref, blobs_ref, timeout, launch_timeout, crash_verdict)

    out = SupervisedRun()
    hosts = [new_host() for _ in range(n)]
    progress({"event": "workers", "count": n, "devices": [f"ray:{i}" for i in range(n)], "units": len(units), "cluster": "ray",
              "each": "one CPU" if emulated else (f"{need['num_gpus']:g} GPU" if need.get("num_gpus", 1) < 1 else "one GPU")})
    pending = deque(range(len(units)))
    losses: dict[int, int] = {}
    inflight: dict[Any, tuple[int, int]] = {}
    idle = deque(range(n))
    t0 = time.perf_counter()
    last = time.monotonic()
    try:
        while pending or inflight:
            while pending and idle:
                h, i = idle.popleft(), pending.popleft()
                progress({"event": "unit_start", "unit": units[i]["id"], "worker": h})
                inflight[hosts[h].run.remote(i)] = (h, i)
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=5.0)
            if not ready:
                if time.monotonic() - last > max(timeout, launch_timeout) + PLACEMENT_SLACK:
                    raise EnvironmentProblem(f"no Ray host reported for {max(timeout, launch_timeout) + PLACEMENT_SLACK:g} s: the cluster cannot place a worker needing {need}.")
                continue
            last = time.monotonic()
            fut = ready[0]
            h, i = inflight.pop(fut)
            try:
                got = ray.get(fut)
            except ray.exceptions.RayTaskError as exc:  # wireup itself failed inside the host: an internal error
                raise exc.as_instanceof_cause() from None
            except ray.exceptions.RayError as exc:  # the host (its process or node) is gone
                if getattr(exc, "actor_init_failed", False):  # it never started (wireup failed in it): no unit's doing
                    detail = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
                    raise EnvironmentProblem(f"a Ray host could not start ({detail}).") from None
                losses[i] = losses.get(i, 0) + 1
                what = f"its Ray host was lost ({type(exc).__name__})"
                out.notes.append(f'{what} during "{units[i]["id"]}"; it ran again on another host')
                progress({"event": "lost", "unit": units[i]["id"], "worker": h, "what": what})
                if losses[i] < MAX_LOSSES:
                    pending.appendleft(i)
                else:
                    _finish(out, units, i, lost_outcome(units[i], backends, f"{what} {losses[i]} times"), h, progress, on_done)
                hosts[h] = new_host()
                idle.append(h)
                continue
            if "fatal" in got:
                raise EnvironmentProblem(got["fatal"])
            for ev in got["events"]:
                if ev.get("event") not in ("workers", "unit_start", "unit_done"):
                    progress({**ev, "worker": h})
            why = mixed_devices(out.environments, got["environments"])
            if why:
                raise EnvironmentProblem(why)
            out.environments.update(got["environments"])
            for k, v in got["timing"].items():
                out.timing[k] = out.timing.get(k, 0.0) + float(v)
            out.notes.extend(got["notes"])
            _finish(out, units, i, got["outcome"] or UnitOutcome(error="the host never reported it"), h, progress, on_done)
            idle.append(h)
    finally:
        # each host ends its worker and removes its job folder, then goes; a host that does not answer is killed
        try:
            ray.wait([h.close.remote() for h in hosts], num_returns=len(hosts), timeout=30.0)
        except Exception:  # noqa: BLE001 - a host already gone
            pass
        for host in hosts:
            try:
                ray.kill(host)
            except Exception:  # noqa: BLE001 - a host already gone
                pass
    out.timing["total"] = time.perf_counter() - t0
    out.notes.sort()
    return out


def _finish(out: SupervisedRun, units: list[dict[str, Any]], i: int, outcome: UnitOutcome, host: int, progress: Progress,
            on_done: Any = None) -> None:  # fmt: skip
    from ._supervisor import failed_rules

    out.outcomes[i] = outcome
    if on_done is not None:
        on_done(i, outcome, dict(out.environments))
    failed = None if outcome.error else failed_rules(outcome.results)
    ev = {"event": "unit_done", "unit": units[i]["id"], "worker": host, "seconds": outcome.seconds, "failed": failed}
    progress({**ev, "error": outcome.error} if outcome.error else ev)
