"""``verify_many()``: verify many variants of the project's kernels (mutants, candidate fixes) in a few
long-lived workers instead of one ``verify()`` (one process, one CUDA context) per variant.

A :class:`Variant` is an id, the kernels to verify and the sources it replaces. ``verify_many`` builds
every variant (in parallel, through the build cache), then hands them as *units* to ``workers`` worker
processes through the one supervisor (:mod:`audit.runtime._supervisor`, the same as ``verify``'s). Each
worker opens its backend once and verifies the variants it is given one after the other, sharing the
backend, the wiring and the seeded test data between them; a variant's kernels are loaded from that
variant's cubins only. Nothing is written to the evidence folder.

The supervisor's watchdog ends a variant that hangs: ``launch_timeout`` (a launch that has not finished:
the mutated kernel spins) and ``timeout`` (no progress at all) give it a VERIFY_TIMEOUT record; a worker
that dies or whose context the variant lost (an illegal address) gives it VERIFY_LAUNCH_ERROR; a variant
that wrote past its buffers (VERIFY_OUT_OF_BOUNDS) retires its worker; a sticky CUDA error outside the
variant's launches runs it again on a fresh worker. An internal error of wireup (a Python exception in
the worker) is no verdict on the variant: its outcome carries the ``error``.

``sizes`` left out (None), each kernel runs the cases ``wireup verify`` plans for it (its sweep of sizes,
dims variants past the first capped by ``variant_cases``, sampled float64 references at large sizes), so a
mutant is judged by the verification its kernel gets; given scalars (``--sizes 1,37,300``) run every dims
variant at each of them instead, each setting every runtime dim.

With ``first_failure=True`` a kernel's verification stops after the first case in which a check failed:
enough to know a mutant is caught (the checks that failed are recorded), and much cheaper than every
check at every size. A variant of several kernels (a header mutant, judged by every kernel including the
header) stops at the first kernel that fails: it is caught. A variant that passes runs every check either way.

>>> outs = verify_many(Path("."), [Variant("m1", ("strided_gather",), {"strided_gather": Path("m1.cu")})],
...                    sizes=[1, 37, 300], first_failure=True)                     # doctest: +SKIP
>>> outs[0].outcome.result.exit_code                                              # doctest: +SKIP
1
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EnvironmentProblem
from ._results import VerifyRun
from ._session import JobSpec
from ._supervisor import UnitOutcome, locked, run_in_process

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
    workers: int | str | None = 1,
    first_failure: bool = False,
    jobs: int | None = None,
    progress: Progress | None = None,
    in_process: bool | None = None,
    config: Any = None,
    python_paths: Sequence[str] = (),
    cluster: str | None = None,
    devices: Sequence[str | None] | None = None,
    journal: Path | None = None,
) -> list[VariantOutcome]:
    """Verify each variant's kernels (see the module docstring); one :class:`VariantOutcome` per variant,
    in order. The emulated backend (``backends=["emulated"]``) runs in this process unless a variant has
    ``plugins`` or ``in_process=False``. Raises :class:`~audit.errors.EnvironmentProblem` when there is no
    GPU or backend, before anything is compiled.

    ``workers`` is a count or ``"auto"`` (one per GPU; on the emulated backend one per core), spread
    over the GPUs (:mod:`audit.runtime._placement`; ``devices`` pins one worker to each GPU given);
    ``cluster`` (``"ray"``, ``"ray://HOST:PORT"``) runs the variants on a Ray cluster's GPUs instead
    (:mod:`audit.runtime._cluster`). The outcomes are the same whatever ran where.

    ``journal`` (a file): each variant that ends with a verdict is appended to it as it ends, and a
    variant whose identity (builds, settings, version: :mod:`audit.runtime._journal`) is already there is
    taken from it instead of run: a run cut short is resumed, not repeated."""
    from ..api import load_project
    from ._plan import DEFAULT_SIZES
    from ._verify import VerifyOutcome, build_modules, judge

    from ._cluster import parse_cluster, require_ray
    from ._placement import parse_workers, run_units

    progress = locked(progress or (lambda ev: None))
    workers, cluster = parse_workers(workers), parse_cluster(cluster)
    if cluster is not None:
        require_ray()
    cfg, cs = load_project(root, config)
    ids = [v.id for v in variants]
    if len(set(ids)) != len(ids):
        raise ValueError("variant ids must be unique")
    emulated = "emulated" in backends
    names, arch = (["emulated"], None) if emulated else gpu_target(backends, cfg, cluster)
    planned: dict[str, list[dict[str, int]]] = {}
    if sizes is None:
        # the cases `wireup verify` runs: each kernel's own sweep (sizes, dims variants capped by variant_cases,
        # sampled references at large sizes), planned once per kernel from its contract, so that a variant (a
        # mutant) is judged by exactly the verification its kernel gets
        from ._verify import plan_cases

        kernels = sorted({k for v in variants for k in v.kernels})
        planned, _plans = plan_cases(cfg, cs, [["kernel", k] for k in kernels], seed, list(DEFAULT_SIZES), [], True, False, None)
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
        python_paths=[str(cfg.path(p)) for p in cfg.reference_paths] + [str(p) for p in python_paths], cases=planned,
    )  # fmt: skip
    units = [{"id": v.id, "subjects": [["kernel", k] for k in v.kernels], "modules": modules[v.id], "plugins": list(v.plugins)} for v in variants]
    job = {"base": base.to_dict(), "units": units, "first_failure": bool(first_failure)}
    parallel = cluster is not None or workers not in (None, 1) or (devices is not None and len(devices) > 1)
    if in_process is None:
        in_process = emulated and not any(v.plugins for v in variants) and not (parallel and not any(v.emulated for v in variants))
    say = _as_variants(progress)
    # a journal: the variants a cut-short run had finished are taken from it, the rest run and are added
    from ..hashing import contracts_digest
    from ._journal import Journal, unit_identity

    book = Journal(journal) if journal is not None else None
    settings = {"first_failure": bool(first_failure), "launch_timeout": float(launch_timeout), "timeout": float(timeout)}
    if book is not None:  # what the verdicts are judged by: a contract edited between two runs runs its units again
        settings["contracts"] = contracts_digest(cfg)
    identities = [unit_identity(job["base"], u, {**settings, "stand_in": _stand_in_names(v)}) for u, v in zip(units, variants)] if book is not None else []
    done = book.load() if book is not None else {}
    todo = [i for i in range(len(units)) if not identities or identities[i] not in done]
    if book is not None and len(todo) < len(units):
        progress({"event": "note", "text": f"resumed {len(units) - len(todo)} of {len(units)} variant(s) from the journal {journal}"})
    sub = {**job, "units": [units[i] for i in todo]}

    def on_done(j: int, outcome: UnitOutcome, environments: dict[str, Any]) -> None:
        if book is not None:
            book.append(identities[todo[j]], units[todo[j]]["id"], outcome, environments)

    if not todo:
        ran = None
    elif in_process:
        ran = run_in_process(sub, cs, cfg, say, [variants[i].emulated for i in todo], on_done=on_done)
    else:
        ran = run_units(sub, workers, cluster, timeout, launch_timeout, say, crash_verdict=False, devices=devices, on_done=on_done)
    run = _merged(ran, todo, {i: done[identities[i]] for i in range(len(units)) if identities and i not in todo and identities[i] in done})

    for i, v in enumerate(variants):
        got = run.outcomes.get(i) if run is not None else None
        if got is None:
            got = UnitOutcome(error="the worker never reported it")
        vr = VerifyRun(results=got.results, environments=dict(run.environments if run else {}), seed=int(seed), sizes=sizes,
                       build=outs[v.id].build, notes=list(got.notes))  # fmt: skip
        vr.timing = {"wall": got.seconds}
        outs[v.id].outcome = VerifyOutcome(judge(vr, cs, cfg), vr)
        outs[v.id].seconds = got.seconds
        outs[v.id].error = got.error
    return [outs[v.id] for v in variants]


def _stand_in_names(v: Variant) -> list[str]:
    """What identifies a variant's in-process stand-in kernels (tests): each callable's qualified name."""
    return sorted(f"{sym}={getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__name__)}" for sym, fn in (v.emulated or {}).items())


def _merged(ran: Any, todo: Sequence[int], journaled: Mapping[int, tuple[UnitOutcome, Mapping[str, Any]]]) -> Any:
    """One :class:`SupervisedRun` by index over every unit: those run now (``todo[j]`` is unit ``j`` of
    ``ran``) and those taken from the journal (with their workers' environments where none ran now)."""
    from ._supervisor import SupervisedRun

    if ran is None and not journaled:
        return None
    out = SupervisedRun()
    for i, (outcome, envs) in sorted(journaled.items()):
        out.outcomes[i] = outcome
        for n, e in envs.items():
            out.environments.setdefault(n, e)
    if ran is not None:
        out.outcomes.update({todo[j]: o for j, o in ran.outcomes.items()})
        out.environments.update(ran.environments)
        out.timing, out.notes, out.sanitizer_logs = dict(ran.timing), list(ran.notes), list(ran.sanitizer_logs)
    return out


def _as_variants(progress: Progress) -> Progress:
    """The supervisor's events in the words of variants: ``unit_start``/``unit_done`` become
    ``variant_start``/``variant_done`` and every ``unit`` key a ``variant`` key."""
    names = {"unit_start": "variant_start", "unit_done": "variant_done"}

    def say(ev: dict[str, Any]) -> None:
        ev = {("variant" if k == "unit" else k): v for k, v in ev.items()}
        if ev.get("event") in names:
            ev["event"] = names[ev["event"]]
        progress(ev)

    return say


def gpu_target(backends: Sequence[str], cfg: Any, cluster: str | None = None) -> tuple[list[str], str]:
    """The backends to open and the SM architecture to compile for on this machine's GPU (the configured
    ``sm_90a`` where the device is an sm_90); raises :class:`EnvironmentProblem` with one sentence when
    there is no GPU or no backend package. Callers that compile before verifying (mutants) use it first.
    With a ``cluster`` and no GPU here, the configured architecture and the backends asked for (PyCUDA
    for ``auto``): the cluster's nodes have the GPUs.
    """
    from ._probe import probe

    pr = probe(list(backends))
    if pr.reason and cluster is not None and pr.arch is None and cfg.arch:
        return [b for b in backends if b != "auto"] or ["pycuda"], cfg.arch
    if pr.reason:
        raise EnvironmentProblem(pr.reason)
    arch = pr.arch
    if arch and cfg.arch and cfg.arch.rstrip("a").rstrip("f") == arch:
        arch = cfg.arch  # keep the configured variant (sm_90a) where it fits this device
    return list(pr.backends), arch
