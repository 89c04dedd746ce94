"""``verify()``: the library face of ``wireup verify`` (select, build, run supervised, judge, record).

>>> outcome = verify(Path("."), kernels=["strided_gather"], sizes=[1, 37])    # doctest: +SKIP
>>> outcome.result.exit_code                                                  # doctest: +SKIP
0
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EnvironmentProblem, UsageError
from ..findings import CheckResult, NotRun
from ..cases import DimCase
from ._plan import DEFAULT_CHAIN_SIZES, DEFAULT_SIZES
from ..verify_checks import SANITIZER_CHECKS
from ._results import CheckRecord, SubjectResult, VerifyRun
from ._session import JobSpec

SANITIZER_TIMEOUT_FACTOR = 20
# 4096: the first size at which the vectorised single-block reductions run every quad of a pass
SANITIZER_SIZES = (1, 37, 300, 4096)
SANITIZER_CHAIN_SIZES = (37,)


@dataclass
class VerifyOutcome:
    """Findings (``result``), the facts behind them (``run``) and the evidence written."""

    result: CheckResult
    run: VerifyRun
    evidence: list[Path] = field(default_factory=list)
    evidence_skipped: list[str] = field(default_factory=list)


def select_subjects(cs: Any, kernels: Sequence[str], schedules: Sequence[str]) -> list[list[str]]:
    for n in kernels:
        if n not in cs.kernel_map:
            valid = ", ".join(f'"{k}"' for k in cs.kernel_map)
            raise UsageError(f'--kernel "{n}" is not a kernel of the contracts; the kernels are {valid}.')
    for n in schedules:
        if n not in cs.schedule_map:
            valid = ", ".join(f'"{s}"' for s in cs.schedule_map)
            raise UsageError(f'--schedule "{n}" is not a schedule of the contracts; the schedules are {valid}.')
    if not kernels and not schedules:
        kernels = [k.name for k in cs.kernels]
        schedules = [s.name for s in cs.schedules]
    return [["kernel", k] for k in dict.fromkeys(kernels)] + [["schedule", s] for s in dict.fromkeys(schedules)]


def build_modules(cfg: Any, cs: Any, subjects: list[list[str]], arch: str | None, overrides: Mapping[str, Path] | None,
                  progress: Callable[[str], None] | None) -> tuple[dict[str, dict[str, Any]], Any]:  # fmt: skip
    """Compile what the subjects launch; per kernel its cubin and entry symbol, or the error that stops it."""
    from ..compile import build_kernels

    names: dict[str, None] = {}
    for kind, name in subjects:
        if kind == "kernel":
            names[name] = None
        else:
            sched = cs.schedule_map[name]
            order = [sched]
            seen = {name}
            while order:
                s = order.pop()
                for st in s.launches:
                    names[st.launch] = None
                for dep in s.after:
                    if dep in cs.schedule_map and dep not in seen:
                        seen.add(dep)
                        order.append(cs.schedule_map[dep])
                if s.equivalent_to in cs.schedule_map and s.equivalent_to not in seen:
                    seen.add(s.equivalent_to)
                    order.append(cs.schedule_map[s.equivalent_to])
    names = {n: None for n in names if n in cs.kernel_map}
    result = build_kernels(cfg, cs, arch=arch, sources=list(names), source_overrides=dict(overrides or {}), progress=progress)
    modules: dict[str, dict[str, Any]] = {}
    for n in names:
        k = cs.kernel(n)
        try:
            sb, entry = result.kernel(k)
        except KeyError as exc:
            modules[n] = {"error": f"its source was not built ({exc.args[0]})"}
            continue
        if not sb.ok or sb.cubin is None:
            first = sb.first_error
            modules[n] = {"error": f'its source "{sb.source}" failed to compile' + (f" ({first.render()})" if first else "")}
        elif entry is None:
            modules[n] = {"error": f'its cubin has no entry point for "{k.symbol}" (entries: {", ".join(sorted(sb.entries)) or "none"})'}
        else:
            modules[n] = {"cubin": str(sb.cubin), "symbol": entry.symbol, "names": [entry.symbol, entry.demangled or "", k.cpp_name or "", k.name]}
    return modules, result


def verify(
    root: Path | None = None,
    kernels: Sequence[str] = (),
    schedules: Sequence[str] = (),
    backends: Sequence[str] = ("auto",),
    seed: int = 0,
    sizes: Sequence[int | str | DimCase] | None = None,
    chain_sizes: Sequence[int | str | DimCase] | None = None,
    sanitizer: str | None = None,
    evidence: bool = True,
    timeout: float = 60.0,
    progress: Callable[[dict[str, Any]], None] | None = None,
    emulated: Mapping[str, Any] | None = None,
    plugins: Sequence[str] = (),
    in_process: bool | None = None,
    source_overrides: Mapping[str, Path] | None = None,
    budgets: Mapping[str, int] | None = None,
    config: Any = None,
    python_paths: Sequence[str] = (),
    evidence_dir: Path | None = None,
    strict: bool | None = None,
    max_cases: int | None = None,
    workers: int | str | None = None,
    cluster: str | None = None,
    devices: Sequence[str | None] | None = None,
    repeats: bool = True,
) -> VerifyOutcome:
    """Verify kernels and schedules on the GPU (or the emulated backend); see docs/verification.md.

    ``emulated`` (a mapping of symbol -> Python kernel, possibly empty) selects the emulated backend, for
    CPU tests; ``plugins`` names ``module:function`` hooks that register emulated kernels in a worker.
    Evidence goes to the configured evidence folder, or ``evidence_dir``; an emulated run proves nothing
    about a GPU and writes evidence only to an explicit ``evidence_dir`` (tests).

    ``sizes`` / ``chain_sizes`` hold scalars (every runtime dim at that value), :class:`~audit.cases.DimCase`
    s, or ``--sizes`` texts (``"37,4096"``, ``"B=4,T=17;B=1,T=1"``); None runs each subject's default sweep
    (:mod:`audit.search.sizes`, at most ``max_cases`` cases). ``strict`` (default: the config's
    ``verify_strict``) makes uncovered tails errors and a subject never compared with its reference a failure.

    ``workers`` (``"auto"`` or a count, default 1) verifies the subjects in that many worker processes,
    one per GPU (:mod:`audit.runtime._placement`; ``devices`` pins one worker to each GPU given), or
    ``cluster`` (``"ray"``, ``"ray://HOST:PORT"``) on the GPUs of a Ray cluster
    (:mod:`audit.runtime._cluster`); the outcome is the same whatever ran where.

    ``repeats=False`` (with ``sanitizer`` only: a run whose judge is the tool's reports, as ``wireup
    mutate``'s survivor passes) launches each case's inputs once: runs B and C, the same inputs and pointers
    again with other initial contents of the outputs, are left out (D, NULL optional outputs, and the
    misaligned run E take other paths and stay).
    """
    from ..api import load_project

    t_start = time.perf_counter()
    progress = progress or (lambda ev: None)
    cfg, cs = load_project(root, config)
    subjects = select_subjects(cs, kernels, schedules)
    timing: dict[str, float] = {}
    use_emulated = emulated is not None or "emulated" in backends
    if not repeats and sanitizer is None:
        raise ValueError("repeats=False leaves out the determinism, unwritten-output and accumulate checks: only a sanitizer run, judged by its tool's reports, may drop them")
    if sanitizer is not None and sanitizer not in SANITIZER_CHECKS:
        raise UsageError(f'--sanitizer "{sanitizer}" is not a compute-sanitizer tool; the tools are "memcheck", "racecheck", "initcheck" and "synccheck".')
    from ._cluster import parse_cluster, require_ray
    from ._placement import parse_workers, run_units

    workers, cluster = parse_workers(workers), parse_cluster(cluster)
    if cluster is not None:
        if sanitizer is not None:
            raise UsageError("--sanitizer runs compute-sanitizer on this machine only; leave out --cluster.")
        require_ray()
    parallel = cluster is not None or workers not in (None, 1) or (devices is not None and len(devices) > 1)
    if parallel and emulated:
        raise ValueError("emulated stand-in kernels run in this process only: register them with plugins to verify in several workers")
    sanitizer_exe = None
    if use_emulated:
        names = ["emulated"]
        arch = None
    else:
        from ._probe import find_sanitizer, probe

        pr = probe(list(backends))
        if pr.reason and cluster is not None and pr.arch is None:
            # no GPU here: the cluster's nodes have them (a worker without the backend says so)
            pr = type(pr)([b for b in backends if b != "auto"] or ["pycuda"], cfg.arch.rstrip("a").rstrip("f") if cfg.arch else None)
        if pr.reason:
            raise EnvironmentProblem(pr.reason)
        names, arch = pr.backends, pr.arch
        if sanitizer:
            sanitizer_exe = find_sanitizer()
            if sanitizer_exe is None:
                raise EnvironmentProblem(f"wireup verify --sanitizer {sanitizer} needs compute-sanitizer; it was not found on PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin.")
        if arch and cfg.arch and cfg.arch.rstrip("a").rstrip("f") == arch:
            arch = cfg.arch  # keep the configured variant (sm_90a) where it fits this device
    sweep_kernels, sweep_chains = sizes is None and not sanitizer, chain_sizes is None and not sanitizer
    sizes = _cases_of(cs, sizes, "--sizes") if sizes is not None else list(SANITIZER_SIZES if sanitizer else DEFAULT_SIZES)
    chain_sizes = _cases_of(cs, chain_sizes, "--chain-sizes") if chain_sizes is not None else list(SANITIZER_CHAIN_SIZES if sanitizer else DEFAULT_CHAIN_SIZES)
    if max_cases is not None and max_cases < 1:
        raise UsageError(f"--max-cases takes a positive number of cases, found {max_cases}.")
    planned, plans = plan_cases(cfg, cs, subjects, seed, sizes, chain_sizes, sweep_kernels, sweep_chains, max_cases)
    strict = cfg.verify_strict if strict is None else bool(strict)
    for plan in plans:
        progress({"event": "plan", "plan": plan})

    # the scalar sizes of the run (none where every kernel subject got its own sweep: see plans)
    scalars = [] if sweep_kernels else [int(s) for s in sizes if not isinstance(s, DimCase)]
    run = VerifyRun(seed=int(seed), sizes=scalars, plans=plans)
    helper = None
    if use_emulated:
        modules = {k.name: {"symbol": k.symbol, "names": [k.symbol, k.cpp_name or "", k.name]} for k in cs.kernels}
    else:
        t = time.perf_counter()
        modules, build = build_modules(cfg, cs, subjects, arch, source_overrides, lambda line: progress({"event": "build", "line": line}))
        run.build = build
        timing["compile"] = time.perf_counter() - t
        from ._helpers import helper_cubin

        cubin, why = helper_cubin(cfg.path(cfg.cache), build.arch)
        helper = str(cubin) if cubin else None
        if why:
            run.notes.append(why)
    job = JobSpec(
        root=str(cfg.root), backends=names, subjects=subjects, seed=int(seed), sizes=[int(s) for s in sizes if not isinstance(s, DimCase)],
        chain_sizes=[int(s) for s in chain_sizes if not isinstance(s, DimCase)], modules=modules, helper_cubin=helper,
        guard_bytes=0 if sanitizer == "memcheck" else 4096, python_paths=[str(cfg.path(p)) for p in cfg.reference_paths] + [str(p) for p in python_paths],
        plugins=list(plugins), sanitizer=sanitizer, budgets=dict(budgets or {}), cases=planned, repeats=bool(repeats),
    )  # fmt: skip
    if in_process is None:
        in_process = use_emulated and not plugins and not parallel
    # one unit per subject: the watchdog judges each kernel and schedule on its own
    units = [{"id": f"{kind}:{name}", "subjects": [[kind, name]]} for kind, name in subjects]
    work = {"base": job.to_dict(), "units": units, "first_failure": False}
    if in_process:
        from ._supervisor import run_in_process

        sup = run_in_process(work, cs, cfg, progress, [dict(emulated or {})] * len(units))
    else:
        wrapper = None
        if sanitizer:
            from ._sanitizer import sanitizer_command

            logdir = sanitizer_log_dir(cfg, sanitizer)

            def wrapper(n: int) -> tuple[list[str], Path]:
                log = logdir / f"{sanitizer}-{n}.log"
                log.unlink(missing_ok=True)
                return sanitizer_command(sanitizer, sanitizer_exe, log), log

        factor = SANITIZER_TIMEOUT_FACTOR if sanitizer else 1
        sup = run_units(work, workers, cluster, timeout * factor, progress=progress, wrapper=wrapper, devices=devices)
    run.results = [r for i in range(len(units)) for r in sup.outcomes[i].results]
    run.environments = sup.environments
    for k2, v in sup.timing.items():
        timing[k2] = timing.get(k2, 0.0) + v
    run.notes.extend(sup.notes)
    if sanitizer and not in_process:
        add_sanitizer_records(run, sanitizer, sup.sanitizer_logs, modules, names)
        if not any(c.verdict == "fail" and c.check == SANITIZER_CHECKS[sanitizer].name for r in run.results for c in r.checks):
            shutil.rmtree(logdir, ignore_errors=True)  # nothing to look at: keep only the logs of reports
    timing["wall"] = time.perf_counter() - t_start
    run.timing = timing

    result = judge(run, cs, cfg, strict)
    outcome = VerifyOutcome(result, run)
    if use_emulated and evidence_dir is None:
        evidence = False
    if evidence and not sanitizer:
        from ._evidence import write_evidence

        skip = set(source_overrides or {})
        for sched in cs.schedules:
            if any(st.launch in skip for st in sched.launches):
                skip.add(sched.name)
        folder = Path(evidence_dir) if evidence_dir is not None else cfg.path(cfg.evidence)
        outcome.evidence, outcome.evidence_skipped = write_evidence(run, cs, cfg, folder, skip)
    return outcome


def sanitizer_log_dir(cfg: Any, tool: str) -> Path:
    """A new folder of its own for one run's compute-sanitizer logs, under the cache. Runs at the same time
    (``wireup mutate`` checks survivors eight at a time) must not share log names: the logs of one would
    be attributed to another (seen on the H200: a mutant's races reported as the unmutated kernel's)."""
    base = cfg.path(cfg.cache) / "runtime" / "sanitizer"
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{tool}-", dir=base))


def add_sanitizer_records(run: VerifyRun, tool: str, logs: list[Path], modules: dict[str, dict[str, Any]], backends: list[str]) -> None:
    from ._sanitizer import attribute, describe, parse_blocks

    reports = []
    for log in logs:
        try:
            reports += parse_blocks(log.read_text(errors="replace"))
        except OSError:
            continue
    names = {k: [x for x in v.get("names", []) if x] for k, v in modules.items()}
    by_kernel = attribute(reports, names)
    check = SANITIZER_CHECKS[tool]
    kernels_run = [r.subject for r in run.results if r.kind == "kernel"]
    launched = set(kernels_run) | {k for k in names if any(r.kind == "schedule" for r in run.results)}
    for k in sorted(launched):
        reps = by_kernel.get(k)
        for b in backends:
            target = next((r for r in run.results if r.subject == k and r.kind == "kernel" and r.backend == b), None)
            if target is None:
                if not reps:
                    continue
                target = SubjectResult(k, "kernel", b)
                run.results.append(target)
            if reps:
                target.add(check, "fail", "", check.failure("kernel", k, describe(tool, reps)))
            else:
                target.add(check, "pass", "", f"compute-sanitizer {tool}: no reports")
    if by_kernel.get(""):
        r = SubjectResult("compute-sanitizer", "kernel", backends[0])
        r.add(check, "fail", "", f"compute-sanitizer {tool} reports an error in no known kernel: {describe(tool, by_kernel[''])}.")
        run.results.append(r)


def _cases_of(cs: Any, items: Sequence[int | str | DimCase], flag: str) -> list[int | DimCase]:
    """Scalars and cases from ``--sizes`` texts, scalars and cases (a bad one is a usage error)."""
    from ..cases import CaseError, cases_from_sizes

    out: list[int | DimCase] = []
    for s in items:
        if isinstance(s, DimCase):
            out.append(s)
        elif isinstance(s, str):
            try:
                out += cases_from_sizes(cs, [s], flag) or []
            except CaseError as exc:
                raise UsageError(str(exc)) from None
        else:
            if int(s) < 1:
                raise UsageError(f"--sizes takes positive batch sizes, found {s}.")
            out.append(int(s))
    return out


def plan_cases(cfg: Any, cs: Any, subjects: Sequence[Sequence[str]], seed: int, sizes: Sequence[int | DimCase],
               chain_sizes: Sequence[int | DimCase], sweep_kernels: bool, sweep_chains: bool,
               max_cases: int | None) -> tuple[dict[str, list[dict[str, int]]], list[dict[str, Any]]]:  # fmt: skip
    """Each subject's cases: the default sweep, or the given cases (scalars set every runtime dim)."""
    from ..cases import as_case
    from ..graph import Wiring
    from ..search.sizes import MAX_CHAIN_CASES, MAX_KERNEL_CASES, plan_kernel, plan_schedule

    planned: dict[str, list[dict[str, int]]] = {}
    plans: list[dict[str, Any]] = []
    wiring = Wiring(cs) if (sweep_kernels or sweep_chains) else None
    for kind, name in subjects:
        sweep = sweep_kernels if kind == "kernel" else sweep_chains
        given = sizes if kind == "kernel" else chain_sizes
        if sweep:
            if kind == "kernel":
                plan = plan_kernel(cs, cs.kernel_map[name], wiring, seed=seed, max_cases=max_cases or MAX_KERNEL_CASES, root=cfg.root)
            else:
                plan = plan_schedule(cs, cs.schedule_map[name], wiring, seed=seed, max_cases=max_cases or MAX_CHAIN_CASES, root=cfg.root)
            planned[f"{kind}:{name}"] = [c.as_dict() for c in plan.cases]
            plans.append(plan.to_dict())
        elif any(isinstance(c, DimCase) for c in given):
            planned[f"{kind}:{name}"] = [as_case(cs, c).as_dict() for c in given]
            if kind == "kernel":
                for c in given:
                    if isinstance(c, DimCase):
                        _check_case_budget(cs, cs.kernel_map[name], c, wiring or Wiring(cs), "--sizes")
    return planned, plans


def _check_case_budget(cs: Any, kernel: Any, case: DimCase, wiring: Any, flag: str) -> None:
    """A given case whose inputs exceed the memory budget for every launch of the kernel is a usage error."""
    from ..cases import make_env
    from ..search.coverage import launch_envs
    from ..search.sizes import MAX_CASE_ELEMENTS, case_elements

    elements = min(case_elements(kernel, e) for e in launch_envs(cs, kernel, wiring)(make_env(cs, case)))
    if elements > MAX_CASE_ELEMENTS:
        raise UsageError(f'{flag} case "{case.label}" gives kernel "{kernel.name}" {elements:.2e} input elements, over the budget of {MAX_CASE_ELEMENTS:.2e}; choose smaller values.')


def judge(run: VerifyRun, cs: Any, cfg: Any, strict: bool = False) -> CheckResult:
    """Findings from the verify rules over the run's facts, plus not-run notes and subjects per rule.

    Under ``strict`` an uncovered tail is an error, a subject whose reference was never compared fails
    (VERIFY_NOT_VERIFIED), and so does a fixed dim argument verified at one value (VERIFY_FIXED_DIM_ONE_VALUE)."""
    from ..rules import CheckContext, run_rules
    from ..rules import verify as verify_rules

    rules = verify_rules.rules()
    escalate = frozenset(verify_rules.COVERAGE_RULES) if strict else frozenset()
    ctx = CheckContext(cs, cfg, facts={"verify": run}, escalate=escalate)
    result = run_rules(ctx, rules)
    subjects = run.subjects()
    for r in rules:
        result.subjects[r.id] = subjects
    result.not_run.extend(not_run_notes(run))
    return result


def not_run_notes(run: VerifyRun) -> list[NotRun]:
    """One entry per (rule, subject) with the first reason and how many cases it covers."""
    grouped: dict[tuple[str, str], list[CheckRecord]] = {}
    failed_subjects = set()
    for r in run.results:
        for c in r.checks:
            if c.verdict == "not_run":
                grouped.setdefault((c.rule, r.subject), []).append(c)
            elif c.verdict == "fail":
                failed_subjects.add((c.rule, r.subject))
    out = []
    for (rule, subject), recs in grouped.items():
        first = recs[0]
        reasons = list(dict.fromkeys(c.message for c in recs))
        more = f" (and {len(reasons) - 1} more case(s))" if len(reasons) > 1 else ""
        out.append(NotRun(rule, f'{subject}: {first.message}{more}'))
    return out
