"""``verify_many()``: verify many variants of the project's kernels (mutants, candidate fixes) in a few
long-lived workers instead of one ``verify()`` (one process, one CUDA context) per variant.

A :class:`Variant` is an id, the kernels to verify and the sources it replaces. ``verify_many`` builds
every variant (in parallel, through the build cache), then hands them to ``workers`` worker processes
(``python -m audit.runtime._many JOB.json``). Each worker opens its backend once and verifies the
variants it is given one after the other, sharing the backend, the wiring and the seeded test data
between them; a variant's kernels are loaded from that variant's cubins only. Nothing is written to
the evidence folder. The supervisor gives a worker its next variant when it
reports the last one done, so the workers stay busy however uneven the variants are.

Two limits end a variant that hangs: ``launch_timeout`` (a launch that has not finished: the mutated
kernel spins) and ``timeout`` (no progress at all). Either kills the worker; the variant gets a
VERIFY_TIMEOUT record and a fresh worker takes the next variant. A worker that dies, or whose CUDA
context a variant poisoned (an illegal address), is replaced the same way, the variant keeping the
VERIFY_LAUNCH_ERROR record of what killed it. A variant that wrote outside its buffers (VERIFY_OUT_OF_BOUNDS)
retires its worker too: a write past the guard bands may have landed in memory the next variant uses
(another allocation, wireup's own helper module). A sticky CUDA error outside any launch of the variant
(in wireup's own device work: a hash, a count, a copy) cannot be pinned on it, since an earlier variant
may have corrupted the worker: the variant runs again on a fresh worker, and only a second such error
there is its VERIFY_LAUNCH_ERROR.

With ``first_failure=True`` a kernel's verification stops after the first case in which a check failed:
enough to know a mutant is caught (the checks that failed are recorded), and much cheaper than every
check at every size. A variant that passes runs every check either way.

>>> outs = verify_many(Path("."), [Variant("m1", ("strided_gather",), {"strided_gather": Path("m1.cu")})],
...                    sizes=[1, 37, 300], first_failure=True)                     # doctest: +SKIP
>>> outs[0].outcome.result.exit_code                                              # doctest: +SKIP
1
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EnvironmentProblem
from ..verify_checks import GUARDS, LAUNCH, TIMEOUT, VerifyCheck
from ._backend import DeviceError
from ._results import EnvironmentInfo, SubjectResult, VerifyRun
from ._session import JobSpec, LaunchFailure, Session

Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Variant:
    """One variant to verify: ``kernels`` (names from the contracts) compiled with ``source_overrides``.

    ``emulated`` (symbol -> Python kernel) and ``plugins`` (``module:function`` registering emulated
    kernels in a worker) only matter on the emulated backend, where they stand in for the variant's code.
    """

    id: str
    kernels: tuple[str, ...]
    source_overrides: Mapping[str, Path] = field(default_factory=dict)
    emulated: Mapping[str, Any] | None = None
    plugins: tuple[str, ...] = ()


@dataclass
class VariantOutcome:
    """What became of one variant: its verify outcome (findings and facts), its build, and the internal
    error that kept it from a verdict, if any."""

    id: str
    outcome: Any = None  # audit.runtime.VerifyOutcome
    build: Any = None  # audit.compile.BuildResult of the variant, where one was made
    error: str | None = None  # an internal error of the worker while verifying it (not a verdict)
    seconds: float = 0.0

    @property
    def failed_rules(self) -> list[str]:
        """Rule IDs of the verify findings (errors) of this variant, in first-seen order."""
        if self.outcome is None:
            return []
        return list(dict.fromkeys(f.rule for f in self.outcome.result.findings if f.severity.value == "error"))


def verify_many(
    root: Path | None,
    variants: Sequence[Variant],
    backends: Sequence[str] = ("auto",),
    seed: int = 0,
    sizes: Sequence[int] | None = None,
    timeout: float = 60.0,
    launch_timeout: float = 10.0,
    workers: int = 1,
    first_failure: bool = False,
    jobs: int | None = None,
    progress: Progress | None = None,
    in_process: bool | None = None,
    config: Any = None,
    python_paths: Sequence[str] = (),
) -> list[VariantOutcome]:
    """Verify each variant's kernels (see the module docstring); one :class:`VariantOutcome` per variant,
    in order. The emulated backend (``backends=["emulated"]``) runs in this process unless a variant has
    ``plugins`` or ``in_process=False``. Raises :class:`~audit.errors.EnvironmentProblem` when there is no
    GPU or backend, before anything is compiled."""
    from ..api import load_project
    from ._plan import DEFAULT_SIZES
    from ._verify import VerifyOutcome, build_modules, judge

    progress = _locked(progress or (lambda ev: None))
    cfg, cs = load_project(root, config)
    ids = [v.id for v in variants]
    if len(set(ids)) != len(ids):
        raise ValueError("variant ids must be unique")
    emulated = "emulated" in backends
    names, arch = (["emulated"], None) if emulated else gpu_target(backends, cfg)
    sizes = [int(s) for s in (sizes if sizes is not None else DEFAULT_SIZES)]
    outs = {v.id: VariantOutcome(v.id) for v in variants}
    modules: dict[str, dict[str, dict[str, Any]]] = {}

    if emulated:
        for v in variants:
            modules[v.id] = {k.name: {"symbol": k.symbol, "names": [k.symbol, k.cpp_name or "", k.name]} for k in cs.kernels}
        helper = None
    else:
        from concurrent.futures import ThreadPoolExecutor

        from ._helpers import helper_cubin

        def build(v: Variant) -> None:
            subjects = [["kernel", k] for k in v.kernels]
            mods, result = build_modules(cfg, cs, subjects, arch, v.source_overrides, lambda line: progress({"event": "build", "variant": v.id, "line": line}))
            modules[v.id] = mods
            outs[v.id].build = result

        with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1), thread_name_prefix="variant-build") as pool:
            for fut in [pool.submit(build, v) for v in variants]:
                fut.result()
        cubin, why = helper_cubin(cfg.path(cfg.cache), arch)
        helper = str(cubin) if cubin else None
        if why:
            progress({"event": "note", "text": why})

    base = JobSpec(
        root=str(cfg.root), backends=names, subjects=[], seed=int(seed), sizes=sizes, chain_sizes=[], modules={}, helper_cubin=helper,
        python_paths=[str(cfg.path(p)) for p in cfg.reference_paths] + [str(p) for p in python_paths],
    )  # fmt: skip
    specs = [{"id": v.id, "subjects": [["kernel", k] for k in v.kernels], "modules": modules[v.id], "plugins": list(v.plugins)} for v in variants]
    job = {"base": base.to_dict(), "variants": specs, "first_failure": bool(first_failure)}
    if in_process is None:
        in_process = emulated and not any(v.plugins for v in variants)
    if not variants:
        results, envs = {}, {}
    elif in_process:
        results, envs = _run_in_process(job, variants, cs, cfg, progress)
    else:
        results, envs = _run_supervised(job, variants, workers, timeout, launch_timeout, progress)

    for v in variants:
        got = results.get(v.id) or _Done([], 0.0, error="the worker never reported it")
        run = VerifyRun(results=got.results, environments=dict(envs), seed=int(seed), sizes=sizes, build=outs[v.id].build, notes=list(got.notes))
        run.timing = {"wall": got.seconds}
        outs[v.id].outcome = VerifyOutcome(judge(run, cs, cfg), run)
        outs[v.id].seconds = got.seconds
        outs[v.id].error = got.error
    return [outs[v.id] for v in variants]


def _failed_rules(results: Sequence[SubjectResult]) -> list[str]:
    """Rule IDs of the failed checks, in first-seen order (what a progress line shows)."""
    return list(dict.fromkeys(c.rule for r in results for c in r.failed))


@dataclass
class _Done:
    results: list[SubjectResult]
    seconds: float
    notes: list[str] = field(default_factory=list)
    error: str | None = None


def _locked(fn: Progress) -> Progress:
    lock = threading.Lock()

    def call(ev: dict[str, Any]) -> None:
        with lock:
            fn(ev)

    return call


def gpu_target(backends: Sequence[str], cfg: Any) -> tuple[list[str], str]:
    """The backends to open and the SM architecture to compile for on this machine's GPU (the configured
    ``sm_90a`` where the device is an sm_90); raises :class:`EnvironmentProblem` with one sentence when
    there is no GPU or no backend package. Callers that compile before verifying (mutants) use it first.
    """
    from ._probe import probe

    pr = probe(list(backends))
    if pr.reason:
        raise EnvironmentProblem(pr.reason)
    arch = pr.arch
    if arch and cfg.arch and cfg.arch.rstrip("a").rstrip("f") == arch:
        arch = cfg.arch  # keep the configured variant (sm_90a) where it fits this device
    return list(pr.backends), arch


# -- running variants (the worker side) ----------------------------------------------------------------


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


class _VariantSession(Session):
    """A session whose kernel subjects may stop at their first failure (see ``first_failure``)."""

    first_failure = False

    def run_subject(self, kind: str, name: str) -> list[SubjectResult]:
        if kind != "kernel" or not self.first_failure:
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


class _VariantRunner:
    """Verifies variants one after the other with shared backends, wiring and test data."""

    def __init__(self, job: dict[str, Any], emit: Progress, cs: Any = None, cfg: Any = None, backends: dict[str, Any] | None = None):
        from ..api import load_project
        from ..graph import Wiring

        self.base = JobSpec.from_dict(job["base"])
        self.first_failure = bool(job.get("first_failure"))
        self.emit = emit
        if cs is None or cfg is None:
            cfg, cs = load_project(Path(self.base.root))
        self.cs, self.cfg = cs, cfg
        self.wiring = Wiring(cs)
        self.factory = None
        self.shared: dict[str, Any] = dict(backends or {})
        self.timing: dict[str, float] = {}
        self.suspect = ""  # the last variant's sticky error outside its launches, if any

    def open(self) -> bool:
        """Open the GPU backends (the emulated one is made per variant); False when one is unavailable."""
        from ._backend import BackendUnavailable, open_backend
        from ._runner import environment_of

        envs = {}
        for name in self.base.backends:
            if name == "emulated":
                from ._emulated import EmulatedBackend

                envs[name] = environment_of(EmulatedBackend()).to_dict()
                continue
            if name not in self.shared:
                try:
                    self.shared[name] = open_backend(name, helper_cubin=self.base.helper_cubin)
                except BackendUnavailable as exc:
                    self.emit({"event": "unavailable", "backend": name, "reason": str(exc)})
                    return False
            envs[name] = environment_of(self.shared[name]).to_dict()
        self.emit({"event": "hello", "environments": envs})
        return True

    def run(self, spec: dict[str, Any], emulated: Mapping[str, Any] | None = None) -> tuple[list[SubjectResult], bool]:
        """Verify one variant; returns its results and whether the CUDA context is lost."""
        from ._emulated import EmulatedBackend
        from ._runner import load_plugins

        bes = dict(self.shared)
        if "emulated" in self.base.backends:
            bes["emulated"] = EmulatedBackend(kernels=dict(emulated or {}))
            if spec.get("plugins"):
                load_plugins(spec["plugins"], {"emulated": bes["emulated"]}, [str(self.cfg.root), *self.base.python_paths])
        job = JobSpec.from_dict({**self.base.to_dict(), "subjects": spec["subjects"], "modules": spec["modules"]})
        session = _VariantSession(job, self.cs, self.cfg, bes, self.emit, wiring=self.wiring)
        session.first_failure = self.first_failure
        if self.factory is not None:
            session.factory = self.factory  # the seeded data of every variant is the same: generate it once
        self.factory = session.factory
        results: list[SubjectResult] = []
        lost = False
        self.suspect = ""
        for kind, name in spec["subjects"]:
            self.emit({"event": "subject_start", "variant": spec["id"], "kind": kind, "subject": name})
            try:
                res = session.run_subject(kind, name)
            except LaunchFailure as exc:
                res = getattr(exc, "results", None) or []
                if not res:
                    res = self._failed(bes, kind, name, f"{exc}")
                lost = True
            except DeviceError as exc:
                if not exc.sticky:
                    raise
                # outside the variant's launches (each is synchronised and checked): wireup's own device
                # work found the context lost, which an earlier variant of this worker may have caused
                self.suspect = str(exc)
                what = f"the CUDA context was lost after its launches, in wireup's own device work ({exc}), on a fresh worker too"
                res, lost = self._failed(bes, kind, name, what), True
            results.extend(res)
            if lost:
                break
        if not lost and any(c.check == GUARDS.name for r in results for c in r.failed):
            lost = True  # its writes past the guard bands may have reached memory the next variant uses
        for k, v in session.timing.items():
            self.timing[k] = self.timing.get(k, 0.0) + v
        return results, lost

    @staticmethod
    def _failed(bes: Mapping[str, Any], kind: str, name: str, what: str) -> list[SubjectResult]:
        out = []
        for b in bes:
            r = SubjectResult(name, kind, b)
            r.add(LAUNCH, "fail", "", LAUNCH.failure("kernel", name, what))
            out.append(r)
        return out

    def close(self) -> None:
        for b in self.shared.values():
            try:
                b.close()
            except Exception:  # noqa: BLE001 - closing after a fault is best effort
                pass


def _run_in_process(job: dict[str, Any], todo: Sequence[Variant], cs: Any, cfg: Any, progress: Progress):
    envs: dict[str, EnvironmentInfo] = {}

    def emit(ev: dict[str, Any]) -> None:
        if ev.get("event") == "hello":
            envs.update({n: EnvironmentInfo.from_dict(e) for n, e in ev["environments"].items()})
        progress(ev)

    runner = _VariantRunner(job, emit, cs, cfg)
    if not runner.open():
        raise EnvironmentProblem("wireup could not start the verification backend.")
    out = {}
    try:
        for v, spec in zip(todo, job["variants"], strict=True):
            progress({"event": "variant_start", "variant": v.id})
            t0 = time.perf_counter()
            res, _lost = runner.run(spec, v.emulated)
            out[v.id] = _Done(res, time.perf_counter() - t0)
            progress({"event": "variant_done", "variant": v.id, "seconds": out[v.id].seconds, "failed": _failed_rules(res)})
            # a lost context needs no restart here: the emulated backend is made afresh per variant
    finally:
        runner.close()
    return out, envs


def worker_main(argv: list[str]) -> int:
    """``python -m audit.runtime._many JOB.json``: verify the variants whose indices arrive on stdin, one
    per line, reporting JSON lines on the original stdout (as :mod:`audit.runtime._worker` does). Exit
    codes: 0 stdin closed, 3 a variant poisoned the CUDA context, 4 an internal error."""
    import traceback

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(ev: dict[str, Any]) -> None:
        proto.write(json.dumps(ev, default=str) + "\n")
        proto.flush()

    code = 0
    runner = None
    try:
        with open(argv[0]) as fh:
            job = json.load(fh)
        base = job["base"]
        for p in reversed([base["root"], *base.get("python_paths", [])]):
            if p not in sys.path:
                sys.path.insert(0, p)
        _exit_with_parent()
        runner = _VariantRunner(job, emit)
        if not runner.open():
            code = 4
        else:
            for line in sys.stdin:
                if not line.strip():
                    continue
                i = int(line)
                spec = job["variants"][i]
                emit({"event": "variant_start", "index": i, "variant": spec["id"]})
                t0 = time.perf_counter()
                res, lost = runner.run(spec)
                emit({"event": "variant_done", "index": i, "variant": spec["id"], "seconds": time.perf_counter() - t0,
                      "results": [r.to_dict() for r in res], "lost": lost, "suspect": runner.suspect})  # fmt: skip
                if lost:
                    code = 3
                    break
            emit({"event": "bye", "timing": runner.timing})
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


# -- supervising workers ---------------------------------------------------------------------------


class _Worker:
    """One worker process and the queue its reader thread fills with its events."""

    def __init__(self, job_file: Path, err_file: Path, root: str, env: dict[str, str]):
        from ._supervisor import _reader

        self.err_file = err_file
        with open(err_file, "ab") as errfh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "audit.runtime._many", str(job_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=errfh, cwd=root, env=env, start_new_session=True,
            )  # fmt: skip
        self.events: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(self.proc.stdout, self.events), daemon=True).start()
        self.started = False  # "hello" seen

    def send(self, index: int) -> bool:
        try:
            self.proc.stdin.write(f"{index}\n".encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def stop(self, kill: bool = False) -> None:
        from ._supervisor import _kill

        if self.proc.poll() is not None and not kill:
            return
        if kill:
            _kill(self.proc)
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _kill(self.proc)


def _run_supervised(job: dict[str, Any], todo: Sequence[Variant], workers: int, timeout: float, launch_timeout: float, progress: Progress):
    tmp = Path(tempfile.mkdtemp(prefix="wireup-many-"))
    job_file = tmp / "job.json"
    job_file.write_text(json.dumps(job))
    env = dict(os.environ)
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([pkg_root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.setdefault("PYTHONUNBUFFERED", "1")
    pending: queue.Queue = queue.Queue()
    for i in range(len(todo)):
        pending.put(i)
    state = _Supervision(job, todo, tmp, job_file, env, timeout, launch_timeout, progress)
    n = max(1, min(workers, len(todo) or 1))
    threads = [threading.Thread(target=state.drive, args=(slot, pending), daemon=True) for slot in range(n)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        import shutil

        state.stopping = True  # leaving early (Ctrl-C, SIGTERM): no new variants, no worker left behind
        for w in list(state.live):
            w.stop(kill=True)
        shutil.rmtree(tmp, ignore_errors=True)  # job file and worker stderr: what mattered is in the records
    if state.fatal:
        raise EnvironmentProblem(state.fatal[0])
    return state.results, state.envs


class _Supervision:
    """The supervisor's shared state; :meth:`drive` runs one worker slot (see the module docstring)."""

    def __init__(self, job, todo, tmp: Path, job_file: Path, env: dict[str, str], timeout: float, launch_timeout: float, progress: Progress):
        self.job, self.todo, self.tmp, self.job_file, self.env = job, todo, tmp, job_file, env
        self.timeout, self.launch_timeout, self.progress = timeout, launch_timeout, progress
        self.results: dict[str, _Done] = {}
        self.envs: dict[str, EnvironmentInfo] = {}
        self.fatal: list[str] = []
        self.live: set[_Worker] = set()  # running workers, killed if the supervisor is interrupted
        self.retried: set[int] = set()  # variants run again on a fresh worker after a context lost outside their launches
        self.stopping = False
        self.lock = threading.Lock()

    def retire(self, worker: _Worker, kill: bool) -> None:
        worker.stop(kill=kill)
        self.live.discard(worker)

    def record(self, i: int, check: VerifyCheck, what: str, seconds: float, note: str) -> None:
        """Give every kernel of variant ``i`` one failed ``check`` record saying ``what``."""
        v = self.todo[i]
        res = []
        for k in v.kernels:
            for b in self.job["base"]["backends"]:
                r = SubjectResult(k, "kernel", b)
                r.add(check, "fail", "", check.failure("kernel", k, what))
                res.append(r)
        with self.lock:
            self.results[v.id] = _Done(res, seconds, [note])
        self.progress({"event": "variant_done", "variant": v.id, "seconds": seconds, "failed": _failed_rules(res)})

    def drive(self, slot: int, pending: queue.Queue) -> None:
        from ._supervisor import _tail

        worker: _Worker | None = None
        starts = 0
        while not self.fatal and not self.stopping:
            try:
                i = pending.get_nowait()
            except queue.Empty:
                break
            if worker is None:
                starts += 1
                worker = _Worker(self.job_file, self.tmp / f"worker-{slot}-{starts}.stderr", self.job["base"]["root"], self.env)
                self.live.add(worker)
            v = self.todo[i]
            self.progress({"event": "variant_start", "variant": v.id, "worker": slot})
            t0 = time.perf_counter()
            outcome, what, in_launch, crash, lost = self.wait(worker, i, slot)
            seconds = time.perf_counter() - t0
            if outcome == "retry":  # the context was lost outside its launches: once more, on a fresh worker
                self.retire(worker, kill=True)
                worker = None
                with self.lock:
                    self.retried.add(i)
                pending.put(i)
                continue
            if outcome == "done":
                if lost:  # the variant poisoned the CUDA context: the worker exits, a fresh one takes over
                    self.retire(worker, kill=True)
                    worker = None
                continue
            started = worker.started
            self.retire(worker, kill=True)
            code = worker.proc.returncode  # its own exit status where it died before the kill
            worker = None
            err = _tail(self.tmp / f"worker-{slot}-{starts}.stderr")
            if outcome == "fatal":
                break
            if not started:
                detail = crash or err or (f"exit code {code}" if outcome == "died" else f"no answer within {self.timeout:g} s")
                self.fatal.append(f"wireup's verification worker failed before verifying anything ({detail.splitlines()[0]}).")
                break
            if crash:  # wireup itself failed (a Python exception in the worker): no verdict on the variant
                with self.lock:
                    self.results[v.id] = _Done([], seconds, [f"internal error: {crash}"], error=crash)
                self.progress({"event": "variant_done", "variant": v.id, "seconds": seconds, "failed": None, "error": crash})
                continue
            if outcome == "timeout":
                limit = self.launch_timeout if in_launch else self.timeout
                self.record(i, TIMEOUT, f"no progress for {limit:g} s during {what}; the worker was killed and restarted", seconds, "timeout")
                self.progress({"event": "timeout", "variant": v.id, "what": what})
                continue
            why = f"exit code {code}" if code is not None and code >= 0 else f"signal {-(code or 0)}"
            detail = crash or err
            self.record(i, LAUNCH, f"the worker died ({why}) during {what}" + (f" ({detail})" if detail else ""), seconds, "died")
        if worker is not None:
            self.retire(worker, kill=False)

    def wait(self, worker: _Worker, i: int, slot: int) -> tuple[str, str, bool, str, bool]:
        """Send variant ``i`` and follow the worker's events until it is done, hangs, dies or cannot start.
        Returns (outcome, last launch, a launch in flight, crash text, context lost)."""
        v = self.todo[i]
        what = "starting the variant" if worker.started else "starting the worker"
        in_launch = False
        crash = ""
        if not worker.send(i):
            return "died", what, in_launch, crash, False
        last = time.monotonic()
        while True:
            try:
                ev = worker.events.get(timeout=0.25)
            except queue.Empty:
                limit = self.launch_timeout if in_launch else self.timeout
                if time.monotonic() - last > limit:
                    return "timeout", what, in_launch, crash, False
                if worker.proc.poll() is not None:
                    try:
                        ev = worker.events.get(timeout=2.0)
                    except queue.Empty:
                        return "died", what, in_launch, crash, False
                else:
                    continue
            if ev is None:  # the worker's stdout closed
                return "died", what, in_launch, crash, False
            last = time.monotonic()
            kind = ev.get("event")
            if kind == "launched":  # the kernel finished: what follows is host work, under ``timeout``
                in_launch = False
                continue
            if kind == "hello":
                worker.started = True
                with self.lock:
                    self.envs.update({n: EnvironmentInfo.from_dict(e) for n, e in ev.get("environments", {}).items()})
            elif kind == "unavailable":
                self.fatal.append(f'wireup could not start the {ev.get("backend")} backend: {ev.get("reason")}.')
                return "fatal", what, in_launch, crash, False
            elif kind == "launch":
                in_launch, what = True, ev.get("what", what)
            elif kind == "crash":
                crash = ev.get("error", "")
            elif kind == "variant_done" and ev.get("index") == i:
                if ev.get("suspect") and i not in self.retried:
                    self.progress({"event": "retry", "variant": v.id, "worker": slot, "what": ev["suspect"]})
                    return "retry", what, in_launch, crash, True
                res = [SubjectResult.from_dict(d) for d in ev.get("results", [])]
                with self.lock:
                    self.results[v.id] = _Done(res, float(ev.get("seconds", 0.0)))
                self.progress({"event": "variant_done", "variant": v.id, "worker": slot, "seconds": ev.get("seconds", 0.0), "failed": _failed_rules(res)})
                return "done", what, in_launch, crash, bool(ev.get("lost"))
            if kind not in ("variant_start", "variant_done"):
                self.progress({**ev, "variant": v.id, "worker": slot})


if __name__ == "__main__":
    worker_main(sys.argv[1:])
