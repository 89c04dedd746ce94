"""A verification session: one process, one or more backends, the subjects it verifies in turn.

The session owns what every check shares: the contracts and their wiring, the backends and the modules
loaded into them, the references, the test-data factory, the budgets and the timing breakdown. It runs
one subject at a time (:meth:`Session.run_subject`) and reports progress through ``emit`` (JSON lines in
a worker, a callback in-process).

>>> s = Session(job, cs, cfg, backends={"emulated": EmulatedBackend()}, emit=print)   # doctest: +SKIP
>>> [r.verdict for r in s.run_subject("kernel", "aux_trunk_forward")]                # doctest: +SKIP
['pass']
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from ..cases import DimCase
from ..model import ContractSet, IsvParam, Kernel, ScalarParam, TensorParam
from ._backend import Arg, Backend, DeviceError, LaunchMeta
from ._inputs import InputFactory
from ._plan import DEFAULT_CHAIN_SIZES, DEFAULT_SIZES
from ._reference import ReferenceProblem, load_callable
from ._results import SubjectResult

REFERENCE_BUDGET = 1 << 25  # elements a float64 reference is run on in full (sum over its tensors)
ROWWISE_BUDGET = 1 << 22  # the same for rowwise kernels, which switch to sampled rows beyond it
INPUT_BUDGET = 1 << 26  # elements of host-generated input per case (256 MiB of float32)
HOST_FETCH_BUDGET = 1 << 24  # elements of one output copied to the host in full (else sampled rows)


@dataclass
class JobSpec:
    """Everything a worker needs to verify its subjects (JSON-serialisable)."""

    root: str
    backends: list[str]
    subjects: list[list[str]]  # [kind, name]
    seed: int = 0
    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    chain_sizes: list[int] = field(default_factory=lambda: list(DEFAULT_CHAIN_SIZES))
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)  # kernel -> cubin, symbol, error
    helper_cubin: str | None = None
    guard_bytes: int = 4096
    python_paths: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)  # "module:function" registering emulated kernels
    sanitizer: str | None = None
    budgets: dict[str, int] = field(default_factory=dict)
    # "kernel:NAME" / "schedule:NAME" -> the subject's cases (dim assignments); a subject not listed runs
    # at ``sizes`` / ``chain_sizes``, each scalar setting every runtime dim
    cases: dict[str, list[dict[str, int]]] = field(default_factory=dict)
    # False (a sanitizer run judged by its tool's reports only): each case's inputs launch once, runs B and C
    # (the same inputs and pointers again, other initial output contents) left out
    repeats: bool = field(default=True, metadata={"omit_default": True})

    def to_dict(self) -> dict[str, Any]:
        # a key added later (``omit_default``) is left out at its default: a job's dict is part of the
        # verification journal's unit identity (audit.runtime._journal.unit_identity), which must not change
        # for the jobs that ran before the key, as ``hash_omit_default`` keeps contract hashes
        d = asdict(self)
        for f in fields(self):
            if f.metadata.get("omit_default") and d[f.name] == f.default:
                del d[f.name]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobSpec:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


class LaunchFailure(Exception):
    """A launch raised a CUDA error; the subject stops here (and the worker too where ``sticky``)."""

    def __init__(self, message: str, sticky: bool):
        super().__init__(message)
        self.sticky = sticky


class Session:
    """See the module docstring."""

    def __init__(
        self,
        job: JobSpec,
        cs: ContractSet,
        cfg: Any,
        backends: dict[str, Backend],
        emit: Callable[[dict[str, Any]], None] | None = None,
        wiring: Any = None,
    ):
        from ..graph import Wiring

        self.job = job
        self.cs = cs
        self.cfg = cfg
        self.backends = backends
        self.emit = emit or (lambda ev: None)
        self.wiring = wiring or Wiring(cs)
        from ._plan import producer_domains

        self.producer_domains = producer_domains(cs, self.wiring)  # buffer -> the values its writer declares
        largest = [v for cases in job.cases.values() for c in cases for v in c.values()]
        self.factory = InputFactory(job.seed, max_rows=max([*job.sizes, *job.chain_sizes, *largest, 1]))
        self.timing: dict[str, float] = {}
        self._subject_timing: dict[str, float] | None = None
        self._modules: dict[tuple[str, str], Any] = {}
        self._functions: dict[tuple[str, str], Any] = {}
        self.slot_index = dict(cs.slot_indices)
        self.isv_dim = cs.isv.total_dim if cs.isv else 0
        self.ref_paths = [str(cfg.root), *[str(cfg.path(p)) for p in getattr(cfg, "reference_paths", ())], *job.python_paths]
        self.current: str = ""
        self.last_launch: str = ""
        b = job.budgets or {}
        self.reference_budget = int(b.get("reference", REFERENCE_BUDGET))
        self.rowwise_budget = int(b.get("rowwise", ROWWISE_BUDGET))
        self.input_budget = int(b.get("input", INPUT_BUDGET))
        self.fetch_budget = int(b.get("fetch", HOST_FETCH_BUDGET))
        self.factory.max_elements = self.input_budget
        self.poisoned: str | None = None

    def cases_for(self, kind: str, name: str) -> list[DimCase | int]:
        """The cases of one subject: its planned dim assignments, else the job's scalar sizes."""
        planned = self.job.cases.get(f"{kind}:{name}")
        if planned is not None:
            return [DimCase.of(c) for c in planned]
        return list(self.job.sizes if kind == "kernel" else self.job.chain_sizes)

    # -- timing -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add_time(name, time.perf_counter() - t0)

    def add_time(self, name: str, seconds: float) -> None:
        self.timing[name] = self.timing.get(name, 0.0) + seconds
        if self._subject_timing is not None:
            self._subject_timing[name] = self._subject_timing.get(name, 0.0) + seconds

    # -- references ---------------------------------------------------------------------------------
    def reference(self, kernel: Kernel) -> tuple[Callable[..., Any] | None, str]:
        """The kernel's float64 reference, or (None, why not)."""
        if not kernel.reference:
            return None, f'kernel "{kernel.name}" declares no float64 reference'
        try:
            return load_callable(kernel.reference, self.ref_paths), ""
        except ReferenceProblem as exc:
            return None, f'its reference "{kernel.reference}" cannot be loaded: {exc}'

    def gradcheck_fn(self, kernel: Kernel) -> tuple[Callable[..., Any] | None, str]:
        if not kernel.gradcheck:
            return None, ""
        try:
            return load_callable(kernel.gradcheck, self.ref_paths), ""
        except ReferenceProblem as exc:
            return None, f'its gradcheck case "{kernel.gradcheck}" cannot be loaded: {exc}'

    # -- modules and launches -----------------------------------------------------------------------
    def function(self, backend: Backend, kernel: Kernel) -> Any:
        """The backend's function handle for ``kernel``; raises LaunchFailure when it cannot be loaded."""
        key = (backend.name, kernel.name)
        if key in self._functions:
            return self._functions[key]
        info = self.job.modules.get(kernel.name, {})
        if info.get("error"):
            raise LaunchFailure(info["error"], sticky=False)
        cubin = info.get("cubin")
        symbol = info.get("symbol") or kernel.symbol
        with self.phase("module_load"):
            try:
                mkey = (backend.name, str(cubin))
                if mkey not in self._modules:
                    self._modules[mkey] = backend.load_module(cubin)
                fn = backend.get_function(self._modules[mkey], symbol)
            except DeviceError as exc:
                raise LaunchFailure(f'its cubin "{cubin}" cannot be loaded or has no entry "{symbol}" ({exc})', sticky=exc.sticky) from None
        self._functions[key] = fn
        return fn

    def geometry(self, kernel: Kernel, env: dict[str, int]) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        slots = self.slot_index
        grid = tuple(int(e.evaluate(env, slots)) for e in kernel.grid)
        block = tuple(int(e.evaluate(env, slots)) for e in kernel.block)
        shared = int(kernel.shared_bytes.evaluate(env, slots)) if kernel.shared_bytes is not None else 0
        return grid, block, shared  # type: ignore[return-value]

    def args_for(self, kernel: Kernel, pointers: dict[str, int], scalars: dict[str, int | float]) -> list[Arg]:
        """Typed arguments in parameter order: pointers (0 for NULL), scalars by dtype, the ISV pointer."""
        out = []
        for p in kernel.params:
            if isinstance(p, TensorParam) or isinstance(p, IsvParam):
                out.append(Arg("ptr", int(pointers.get(p.name, 0))))
            elif isinstance(p, ScalarParam):
                out.append(Arg(p.dtype if p.dtype != "bf16" else "u16", scalars[p.name]))
        return out

    def launch(self, backend: Backend, kernel: Kernel, env: dict[str, int], pointers: dict[str, int],
               scalars: dict[str, int | float], label: str, reference: Any = None) -> float | None:  # fmt: skip
        """One launch, synchronised and error-checked (the ``label`` names it in every message); returns
        its time in seconds by the backend's timer (None where it could not be read)."""
        fn = self.function(backend, kernel)
        grid, block, shared = self.geometry(kernel, env)
        args = self.args_for(kernel, pointers, scalars)
        meta = LaunchMeta(kernel, dict(env), self.slot_index, self.isv_dim, reference, label)
        if kernel.name not in label:
            label = f"{kernel.name} {label}"
        self.last_launch = f"{label} grid={grid} block={block} shared={shared}"
        self.emit({"event": "launch", "subject": self.current, "backend": backend.name, "what": self.last_launch})
        t0 = backend.timer()
        seconds = None
        try:
            backend.launch(fn, grid, block, shared, args, meta)
            backend.synchronize()
            self.emit({"event": "launched", "subject": self.current, "backend": backend.name})
        except DeviceError as exc:
            code = f"{exc.code}: " if exc.code else ""
            if exc.sticky:
                self.poisoned = kernel.name
            raise LaunchFailure(
                f"launch {label} with grid={grid} block={block} shared={shared} failed ({code}{exc})", exc.sticky
            ) from None
        finally:
            try:
                seconds = backend.elapsed(t0)
                self.add_time("kernel", seconds)
            except Exception:  # noqa: BLE001 - timing after a fault is best effort
                pass
        return seconds

    def enqueue(self, backend: Backend, kernel: Kernel, env: dict[str, int], pointers: dict[str, int],
                scalars: dict[str, int | float], label: str, reference: Any = None) -> None:  # fmt: skip
        """One launch without synchronising (inside a stream capture); errors surface at replay."""
        fn = self.function(backend, kernel)
        grid, block, shared = self.geometry(kernel, env)
        args = self.args_for(kernel, pointers, scalars)
        meta = LaunchMeta(kernel, dict(env), self.slot_index, self.isv_dim, reference, label)
        try:
            backend.launch(fn, grid, block, shared, args, meta)
        except DeviceError as exc:
            raise LaunchFailure(f"capturing {label} with grid={grid} block={block} shared={shared} failed ({exc})", exc.sticky) from None

    # -- subjects -----------------------------------------------------------------------------------
    def verifier(self, kind: str, name: str) -> Any:
        """The verifier of one kernel or schedule. The verifiers use this class, so they are chosen one
        layer up (:class:`audit.runtime._verifiers.VerifyingSession`), not imported here."""
        raise NotImplementedError("a Session verifies through a subclass that chooses the verifiers (VerifyingSession)")

    def run_subject(self, kind: str, name: str) -> list[SubjectResult]:
        """Verify one kernel or schedule on every backend; one result per backend."""
        self.current = name
        self._subject_timing = {}
        t0 = time.perf_counter()
        try:
            results = self.verifier(kind, name).run()
        finally:
            timing, self._subject_timing = self._subject_timing, None
        dt = time.perf_counter() - t0
        for r in results:
            r.duration_s = dt
            r.timing = dict(timing)
        return results

    def fetch_rows_needed(self, shape: tuple[int, ...]) -> bool:
        return int(np.prod(shape, dtype=np.int64)) > self.fetch_budget
