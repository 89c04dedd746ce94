"""``run_mutation()``: generate, compile and verify the mutants of the selected kernels, then classify.

1. Generate every mutant of each kernel's own source (:mod:`audit.mutate._operators`), and of each named
   header (:mod:`audit.mutate._headers`: a header mutant is compiled into, verified with and judged
   against every kernel including the header; below, "kernel" stands for such a header too), and keep
   at most ``max_mutants`` per kernel (a deterministic selection that keeps every operator represented).
2. Find the GPU (before anything is compiled) and compile every mutant, ``jobs`` at a time, through the
   build cache; drop the stillborn and the identical ones (:mod:`audit.mutate._build`).
3. Run the static kernel-code checks of ``wireup check`` on each mutant (:mod:`audit.mutate._static`:
   LOCAL_ARRAY_BOUNDS and LOCAL_UNINIT_READ on its source, STORE_RACE on its PTX). A mutant they flag is
   caught without a GPU; one whose PTX is identical to the original's but whose source indexes a local
   array out of bounds or reads an unwritten element is caught too (the compiler dropped undefined
   behaviour, it did not prove the mutant equivalent).
4. Verify each other compiled mutant, for its own kernel only, at the sizes of ``wireup verify``, in
   ``workers`` long-lived workers (:func:`audit.runtime.verify_many`); a kernel's verification stops after
   its first failing case (the checks that failed are recorded); a hang ends at ``launch_timeout`` and
   counts as caught by VERIFY_TIMEOUT. The unmutated kernel (its *baseline*, the copy the mutants are
   compared with) is one more variant of the same call, so it is verified with exactly the same sizes,
   seed, backends and first-failure rule; the baselines go first, so no mutant has touched their
   workers (a worker is retired after a variant that wrote past its buffers, see the supervisor that
   ``wireup verify`` shares, :mod:`audit.runtime._supervisor`).
5. A survivor whose fastest launch in some case takes :data:`SLOWDOWN_RATIO` times the baseline's, and
   :data:`SLOWDOWN_SECONDS` more, is timed again alone (one worker, the kernels and sizes of its slow cases
   only) with its baseline verified before and after it, :data:`SLOWDOWN_PASSES` times; if every pass agrees it is caught by MUTATE_SLOWDOWN (the
   same numbers for far more work). Another process sharing the GPU can hold it for milliseconds, which
   is why one pass is not enough.
6. A survivor in code that other kernels of the contracts run too (their entries are defined in the same
   source and reach the mutated line: two entries instantiating one template, or sharing a device
   function) is judged by those *siblings* as well, as a header's mutant is by every including kernel:
   the static checks on each sibling's entry in the mutant's PTX, then verification of the siblings built
   from the mutated source, after their unmutated copy from the same folder (:func:`sibling_kernels`).
   A line one entry runs only with values another entry gives it (the trade-outcome head's K = 3 path in
   a template the next-bar head instantiates with K = 1) is tested by that other entry.
7. Every other survivor runs again under compute-sanitizer memcheck (:data:`MEMCHECK_SIZES`), and those
   of kernels that use shared memory (or that lost a barrier) under racecheck (:data:`RACE_SIZES`); the
   baseline of each kernel involved runs under the same tool (a report it has itself would "catch"
   every such survivor, so it makes the baseline fail). A survivor with siblings (step 6) that its own
   run leaves is run as them too, built from the mutated source, under racecheck as those siblings that
   use shared memory (every sibling for a lost barrier), after their unmutated copy from the same folder;
   a report on that copy only keeps them from judging the kernel's survivors under that tool. A
   survivor whose run under the tool fails one of verify's value checks (:data:`UNSTABLE_RULES`) with no
   report of the tool's own is caught by MUTATE_UNSTABLE where the unmutated copy passes the same run:
   the tool changes only the timing of its threads and where its buffers lie, so the mutant's result
   depends on one of them (a race on global memory, a read of memory it should not read). Last, the
   survivors left run with perturbed schedules (:data:`PERTURB`, :mod:`audit.mutate._perturb`: half of each
   block's threads delayed at the kernel's start and after each barrier), no tool, and the same rule.
8. A kernel whose baseline fails is not scored (every check it fails would "catch" every mutant).
   Classify the other kernels' survivors with the equivalence records, and count.

``stand_in`` replaces steps 2-4's code with emulated Python kernels, one mapping per mutant, for CPU
tests of the accounting: no compiler, no GPU, no static checks, no sanitizer (``baseline_stand_in`` maps
a kernel name to the baseline's stand-ins; by default the baseline runs the emulated reference and
passes). A stand-in may instead be a ``module:function`` plugin (found on ``python_paths``) that registers
the kernels in a worker process: such runs use ``workers`` and ``cluster`` like a GPU run.

>>> run = run_mutation(Path("."), ["strided_gather"], jobs=16, workers=4)    # doctest: +SKIP
>>> run.kernels[0].caught, run.kernels[0].mutants                          # doctest: +SKIP
(9, 9)
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import __version__
from .. import verify_checks as vc
from ..errors import UsageError
from ._build import MutantBuild, build_header_original, build_mutants, build_original, mutant_dir, usable_cpus
from ._equivalent import DEFAULT_FILE, load_records, match_records, refuted_records
from ._headers import header_mutants, header_units, judge_hashes
from ._mutants import Mutant, check_operators, mutants_of_source, select_mutants
from ._perturb import PERTURB_VERSION, perturbed_copy
from ._results import KernelMutation, MutantOutcome, MutationRun, not_scored_reason
from ._siblings import sibling_kernels
from ._static import STATIC_RULES, static_catches, static_store_lines

BASELINE = "baseline"  # the variant id of a kernel's unmutated copy: "<kernel>/baseline" (a mutant id has colons)
# a mutant is judged by the verification its kernel gets: the cases `wireup verify` plans for the kernel
# (audit.runtime._many.verify_many with sizes=None: the kernel's sweep). Until 6 December 2026 mutants ran
# these scalar sizes instead (audit.runtime._plan.DEFAULT_SIZES, every dims variant at each, full references
# where the budget allowed): the trade-outcome backward's baseline took 146 s there against 4.4 s in `wireup
# verify`, and the sweep's tail sizes (4, 5, 32, 33, 256, 257) were not run. Kept for the records made so.
MUTATE_SIZES = (1, 37, 300, 4096, 4103, 65536)
MEMCHECK_SIZES = (1, 37, 300, 4096)  # those of `wireup verify --sanitizer` (audit.runtime._verify.SANITIZER_SIZES)
RACE_SIZES = (37, 300)  # a removed barrier is judged by compute-sanitizer racecheck at these sizes
SANITIZERS = ("memcheck", "racecheck")  # the compute-sanitizer passes survivors go through, in this order
PERTURB = "perturb"  # then the perturbed schedules (audit.mutate._perturb): some threads delayed, no tool
PASSES = (*SANITIZERS, PERTURB)  # what --sanitizers chooses from (the default: all of them)
# what a sanitizer run of a survivor covers, in its journal identity: 2 (6 December 2026) caps the dims
# variants after the first at their kernel's variant_cases of the sizes above, as `wireup verify --sanitizer`
# does; 1 ran every variant at every size (the trade-outcome backward's memcheck run took ~100 s a survivor);
# 3 (6 December, later) is 2 with each case's inputs launched once (verify's repeats=False: runs B and C, the
# same inputs and pointers again, left out; 134 -> 86 launches of the next-bar backward under racecheck)
# 4 (6 December, later still) is 3 with racecheck at B = 37 alone for a kernel whose every grid axis that
# follows a runtime dim has more blocks there than at B = 1, in every dims variant (:func:`race_sizes`);
# memcheck's runs are plan 3's
SANITIZER_PLAN = 4
# plan -> the earlier plans whose runs cover all of its launches: a verdict journaled under one of them stands
# (a run that reported nothing over more launches reports nothing over fewer; a report is a report)
FULLER_PLANS: dict[int, tuple[int, ...]] = {3: (2,), 4: (3, 2)}
# seconds without progress before a sanitizer run is stopped (times verify's factor of 20 for an
# instrumented run: 2 minutes); a run without a report by then is inconclusive, not caught (on the H200 a
# removed cp.async barrier kept racecheck reporting for minutes)
SANITIZER_TIMEOUT = 6.0
SLOWDOWN_RATIO = 10.0  # a surviving mutant this many times slower than its baseline in one case is caught ...
SLOWDOWN_SECONDS = 1e-3  # ... when it is also this much slower (launch noise is microseconds)
SLOWDOWN_PASSES = 3  # ... in each of this many passes timed alone (another process's kernels can hold the GPU for ms)
SLOWDOWN_CHUNK = 4  # suspects timed in one verification (between their kernels' baselines), journaled as it ends
DEFAULT_LAUNCH_TIMEOUT = 5.0
# the checks of verify whose failure in a sanitizer run is the kernel's values, not the tool's slowdown (a
# launch past the watchdog, VERIFY_TIMEOUT) or the tool's own trouble (a launch it could not make): a
# survivor failing one of them there, while its unmutated copy passes the same run, is caught by
# MUTATE_UNSTABLE (step 7; on the trade-outcome backward, 6 December 2026, three survivors that can zero
# elements of kept rows which other threads of the block write, with no barrier between)
UNSTABLE = "MUTATE_UNSTABLE"
UNSTABLE_RULES = frozenset(c.rule for c in (
    vc.REFERENCE, vc.WRITTEN, vc.GUARDS, vc.UNTOUCHED, vc.INPUTS_UNMODIFIED, vc.FINITE, vc.GRADCHECK, vc.MASK_ZERO, vc.ALL_SKIP,
    vc.UNIT_SCALE, vc.DIVISOR_ZERO, vc.ACCUMULATE, vc.INOUT_DELTA, vc.DETERMINISM,
))  # fmt: skip

Progress = Callable[[dict[str, Any]], None]


def default_workers() -> int:
    """Verification workers by default: one per 4 CPU cores, at most 4 (host work, references and
    comparisons, dominates a mutant's verification; 4 contexts share one GPU comfortably)."""
    return max(1, min(4, usable_cpus() // 4))


def sanitizer_workers() -> int:
    """compute-sanitizer processes at a time: one per 2 CPU cores, at most 8 (an instrumented run is
    mostly host work: the tool's bookkeeping, the references and the comparisons)."""
    return max(1, min(8, usable_cpus() // 2))


def plan_mutants(cs: Any, cfg: Any, kernels: Sequence[str], operators: Sequence[str] | None = None,
                 max_mutants: int | None = None) -> tuple[dict[str, list[Mutant]], dict[str, list[Mutant]]]:  # fmt: skip
    """Per kernel, every generated mutant and the selected ones (see :func:`select_mutants`), keyed by the
    names of :func:`resolve_names` (a kernel defined in an included header stands for that header).

    Raises :class:`UsageError` for an unknown kernel or operator, or a kernel whose source cannot be read
    or whose entry no file of the project defines."""
    check_operators(operators)
    kernels, _ = resolve_names(cfg, cs, kernels)
    units = _units_named(cs, cfg, kernels)
    generated: dict[str, list[Mutant]] = {}
    selected: dict[str, list[Mutant]] = {}
    for name in kernels:
        if name in units:
            ms = header_mutants(cfg, cs, units[name], operators)
        else:
            k = cs.kernel(name)
            path = cfg.path(k.source)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise UsageError(f'Kernel "{name}" has source "{k.source}", which cannot be read ({exc.strerror}).') from None
            _require_own_entry(cfg, cs, name)
            ms = kernel_mutants(cs, name, text, operators)
        generated[name] = ms
        selected[name] = select_mutants(ms, max_mutants)
    return generated, selected


def resolve_names(cfg: Any, cs: Any, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """``names`` as ``wireup mutate`` runs them, in order, each once, and a note per name replaced: a
    header named by its path becomes its unit's name, and a kernel whose entry is defined in an included
    local header (its source a small ``.cu`` that includes it) becomes that header's unit, whose mutants
    include the entry's body (one place per mutated line, so ids, records and journals name the header).
    Names that are neither stay as they are (:func:`plan_mutants` says what is wrong with them).

    >>> resolve_names(cfg, cs, ["sgemm_naive", "src/kernels/1_naive.cuh"])    # doctest: +SKIP
    (['1_naive.cuh'], ['Kernel "sgemm_naive" is defined in the included header "src/kernels/1_naive.cuh", ...'])
    """
    from ..cuda.headers import entry_file
    from ..untrusted import resolve
    from ._headers import unit_named

    units: dict[str, Any] | None = None
    out: list[str] = []
    notes: list[str] = []
    for name in names:
        if name in cs.kernel_map:
            k = cs.kernel(name)
            where = entry_file(cfg, cs, name)
            if where is not None and where != resolve(cfg.path(k.source)):
                units = header_units(cfg, cs) if units is None else units
                unit = next((u for u in units.values() if u.path == where), None)
                if unit is not None:
                    notes.append(f'Kernel "{name}" is defined in the included header "{unit.source}", not in its source "{k.source}", '
                                 f'so its body is mutated as the header unit "{unit.name}", judged by every kernel including it.')  # fmt: skip
                    name = unit.name
        elif name not in (units := header_units(cfg, cs) if units is None else units):
            unit = unit_named(cfg, units, name)
            name = unit.name if unit is not None else name
        if name not in out:
            out.append(name)
    return out, notes


def _require_own_entry(cfg: Any, cs: Any, name: str) -> None:
    """Raise :class:`UsageError` unless kernel ``name``'s own source defines its entry (one defined in a
    header unit was replaced by the unit in :func:`resolve_names`)."""
    from ..cuda.headers import entry_file
    from ..untrusted import resolve

    k = cs.kernel(name)
    own = resolve(cfg.path(k.source))
    where = entry_file(cfg, cs, name)
    if where == own:
        return
    if where is None:
        raise UsageError(f'Kernel "{name}": neither its source "{k.source}" nor any local header it includes defines a function "{k.symbol}" to mutate.')
    other = next((o for o in cs.kernels if resolve(cfg.path(o.source)) == where), None)
    if other is not None:
        raise UsageError(f'Kernel "{name}" is defined in "{other.source}", the source of kernel "{other.name}", whose mutants cover "{other.name}" only; '
                         f'make "{other.source}" the source of "{name}" too to mutate it.')  # fmt: skip
    raise UsageError(f'Kernel "{name}" is defined in "{where}", a header outside the project root, which wireup mutate does not mutate.')


def empty_reasons(cfg: Any, cs: Any, generated: Mapping[str, Sequence[Mutant]], operators: Sequence[str] | None = None) -> dict[str, str]:
    """Why each name of ``generated`` (kernels and header units, as :func:`plan_mutants` keys them) has no
    mutant: one sentence each, so no listing or run reports 0 mutants without saying whether the code was
    looked at."""
    from ..cuda.headers import entry_file, reached_bodies

    ops = f" of the operators {', '.join(operators)}" if operators else ""
    out: dict[str, str] = {}
    units = _units_named(cs, cfg, [n for n, ms in generated.items() if not ms])
    for name, ms in generated.items():
        if ms:
            continue
        unit = units.get(name)
        if unit is None:
            out[name] = f'no mutation{ops} applies in the functions its entry reaches in "{cs.kernel(name).source}".'
            continue
        lost = [k for k in unit.kernels if entry_file(cfg, cs, k) is None]
        reaching = [k for k in unit.kernels if reached_bodies(cfg, cs, k, unit.path)]
        if reaching:
            out[name] = f"no mutation{ops} applies in the functions of it that {', '.join(reaching)} reach."
        elif lost:
            out[name] = (f"no file of {', '.join(lost)}'s include closure defines its entry, so what it runs was not looked at, "
                         f"and no other including kernel reaches a function of it.")  # fmt: skip
        else:
            them = f"its including kernels ({', '.join(unit.kernels)})" if len(unit.kernels) <= 4 else f"its {len(unit.kernels)} including kernels"
            out[name] = f"none of {them} reaches a function of it (it holds no code they run)."
    return out


def _units_named(cs: Any, cfg: Any, names: Sequence[str]) -> dict[str, Any]:
    """The header units among ``names`` (the others must be kernels), by the name given (a unit's name or
    its header's path); raises :class:`UsageError` for a name that is neither."""
    from ._headers import unit_named

    others = [n for n in names if n not in cs.kernel_map]
    if not others:
        return {}
    units = header_units(cfg, cs)
    found = {n: unit_named(cfg, units, n) for n in others}
    unknown = [n for n, u in found.items() if u is None]
    if unknown:
        valid = ", ".join(f'"{k}"' for k in cs.kernel_map)
        heads = ", ".join(f'"{h}"' for h in units)
        raise UsageError(f'"{unknown[0]}" is not a kernel of the contracts; the kernels are {valid}'
                         + (f", and the included headers {heads}." if heads else "."))  # fmt: skip
    return found


def mutated_headers(cfg: Any, cs: Any) -> list[str]:
    """The header units some including kernel reaches a function of (where their mutants are made), in
    path order: what ``--all`` and ``--headers-only`` add."""
    from ..cuda.headers import reached_headers

    return reached_headers(cfg, cs)


def journal_path(cfg: Any, names: Sequence[str], all_: bool = False, headers_only: bool = False,
                 operators: Any = None, max_mutants: int | None = None) -> Path:
    """The journal file of a ``wireup mutate`` selection, in the build cache (outside the repository)."""
    import hashlib

    key = hashlib.sha256(repr((sorted(names), all_, headers_only, operators, max_mutants)).encode()).hexdigest()[:16]
    return cfg.path(cfg.cache) / "mutate-journal" / f"{key}.jsonl"


def build_only(root: Path | None, kernels: Sequence[str], operators: Sequence[str] | None = None, max_mutants: int | None = None,
               jobs: int | None = None, progress: Progress | None = None, config: Any = None, archive: Path | None = None,
               static: bool = True) -> dict[str, int]:
    """Compile the mutants a run with the same kernels, operators and ``max_mutants`` selects, and each
    kernel's unmutated copy, into the build cache for the configured architecture (no GPU): a GPU machine
    given that cache then only verifies. Returns the number of mutants per build status.

    With ``static``, the static checks (:data:`STATIC_RULES`) run on every built mutant and unmutated copy
    too, into the cache's store (``mutate-journal/static.jsonl``, keyed by wireup's code, the contracts and
    the bytes checked, not by the interpreter), which the GPU run reads instead of checking again; a
    ``static`` event (items checked, mutants caught, seconds) goes to ``progress``.

    ``archive`` (a ``.tar``, ``.tar.gz``/``.tgz`` or ``.tar.xz``/``.txz`` file) is then written with the
    build cache entries of exactly this selection (its mutants and unmutated copies), named relative to
    the build cache folder: ``tar xf FILE -C <cache>`` on the GPU machine gives it what a run of the same
    selection looks up, and none of the other entries a long-lived cache holds; ``progress`` then gets an
    ``archived`` event with the number of entries written and the file's size. The archive holds the
    selection's static findings too (``mutate-journal/static.<archive name>.jsonl``), which the store reads
    beside its own file."""
    from ..api import load_project

    mode = archive_mode(archive) if archive is not None else ""
    cfg, cs = load_project(root, config)
    if max_mutants is not None and max_mutants < 1:
        raise UsageError(f"--max-mutants takes a positive number, found {max_mutants}.")
    generated, selected = plan_mutants(cs, cfg, kernels, operators, max_mutants)
    all_selected = [m for ms in selected.values() for m in ms]
    (progress or (lambda ev: None))({"event": "planned", "mutants": len(all_selected), "generated": sum(len(v) for v in generated.values())})
    builds = build_mutants(cfg, cs, all_selected, cfg.arch, jobs, progress)
    counts: dict[str, int] = {}
    for b in builds.values():
        counts[b.status] = counts.get(b.status, 0) + 1
    originals = {name: build_header_original(cfg, cs, ms[0], cfg.arch) if ms[0].is_header else build_original(cfg, cs, name, ms[0].original, cfg.arch)
                 for name, ms in selected.items() if ms}  # fmt: skip (cached: built above)
    static_lines = ""
    if static:
        # the static checks a GPU run would make first (pure Python: minutes of its time for a large
        # selection), made here and kept in the store that run reads
        items = [it for m in all_selected if builds[m.key].status in ("compiled", "identical") for it in _static_items(m.key, m, builds[m.key])]
        items += [it for name, b in originals.items() for it in _static_items(name, selected[name][0], b)]
        t = time.perf_counter()
        hits = static_catches(cfg, cs, items, jobs, progress=progress)
        caught = sum(1 for m in all_selected if m.key in hits)
        (progress or (lambda ev: None))({"event": "static", "items": len(items), "caught": caught, "seconds": round(time.perf_counter() - t, 1)})
        static_lines = static_store_lines(cfg, items)
    if archive is not None:
        keys = sorted({k for b in [*originals.values(), *builds.values()] for k in b.keys})
        written = write_build_archive(cfg.path(cfg.cache), cfg.arch, keys, archive, mode, static_lines)
        (progress or (lambda ev: None))({"event": "archived", "path": str(archive), "entries": written, "bytes": archive.stat().st_size})
    return counts


def archive_mode(path: Path) -> str:
    """The ``tarfile`` write mode of an archive named ``path`` (by its suffix), or :class:`UsageError`."""
    name = Path(path).name.lower()
    for suffixes, mode in (((".tar.xz", ".txz"), "w:xz"), ((".tar.gz", ".tgz"), "w:gz"), ((".tar",), "w")):
        if name.endswith(suffixes):
            return mode
    raise UsageError(f'--archive takes a file ending in .tar, .tar.gz, .tgz, .tar.xz or .txz, found "{path}".')


def write_build_archive(cache: Path, arch: str, keys: Sequence[str], archive: Path, mode: str, static: str = "") -> int:
    """Write the build cache entries ``build/<arch>/<key>/`` of ``keys`` (those that exist: a failed build
    may have none) into ``archive``, named relative to ``cache``, files in sorted order, owners cleared,
    and ``static`` (lines of the static checks' store, if any) as ``mutate-journal/static.<archive>.jsonl``.
    Returns the number of build entries written."""
    import io
    import tarfile

    written = 0
    archive.parent.mkdir(parents=True, exist_ok=True)
    part = archive.with_name(archive.name + ".part")

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(part, mode) as tar:
        for key in keys:
            folder = cache / "build" / arch / key
            if not folder.is_dir():
                continue
            written += 1
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                tar.add(path, arcname=path.relative_to(cache).as_posix(), recursive=False, filter=clean)
        if static:
            data = static.encode("utf-8")
            info = clean(tarfile.TarInfo(f"mutate-journal/static.{_archive_stem(archive)}.jsonl"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    part.replace(archive)
    return written


def _archive_stem(archive: Path) -> str:
    """``archive``'s name without its archive suffix, in letters, digits, ``-`` and ``_`` (a file name part)."""
    name = Path(archive).name
    for suffix in (".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name) or "archive"


def kernel_mutants(cs: Any, name: str, text: str, operators: Sequence[str] | None = None) -> list[Mutant]:
    """Every mutant of kernel ``name`` whose source reads ``text`` (``operators`` restricts them)."""
    k = cs.kernel(name)
    dims = [d.name for d in cs.dim_map.values() if d.kind == "runtime"] or ["B"]
    return mutants_of_source(text, k.symbol, k.source, name, operators, dims)


def run_mutation(
    root: Path | None,
    kernels: Sequence[str],
    operators: Sequence[str] | None = None,
    max_mutants: int | None = None,
    jobs: int | None = None,
    workers: int | str | None = None,
    backends: Sequence[str] = ("auto",),
    sizes: Sequence[int] | None = None,
    seed: int = 0,
    launch_timeout: float = DEFAULT_LAUNCH_TIMEOUT,
    timeout: float | None = None,
    equivalent_file: Path | None = None,
    stand_in: Callable[[Mutant], Mapping[str, Any] | str] | None = None,
    progress: Progress | None = None,
    config: Any = None,
    baseline_stand_in: Callable[[str], Mapping[str, Any] | str] | None = None,
    sanitizers: Sequence[str] | None = None,
    slowdown: bool | None = None,
    cluster: str | None = None,
    python_paths: Sequence[str] = (),
    journal: Path | None = None,
    sanitizer_processes: int | None = None,
) -> MutationRun:
    """Mutate, compile, verify and classify (see the module docstring). ``sanitizers`` are the
    compute-sanitizer passes of the survivors (default :data:`SANITIZERS` on a GPU, none with
    ``stand_in``), ``sanitizer_processes`` of their runs at a time (default :func:`sanitizer_workers`); ``slowdown`` turns the MUTATE_SLOWDOWN comparison on or off (default: on a GPU).
    ``workers`` (a count or ``"auto"``: one per GPU) spread over this machine's GPUs, or ``cluster``
    (``"ray"``, ``"ray://HOST:PORT"``) verifies the mutants on a Ray cluster's GPUs; the results are the
    same whatever ran where. ``journal`` (a file) keeps each finished verification of the mutants and
    baselines as it ends, and takes those a cut-short run had finished (see
    :mod:`audit.runtime._journal`); the sanitizer passes keep theirs beside it, the survivors' runs as
    their siblings included."""
    from ..api import load_project
    from ..runtime import Variant, gpu_target, parse_cluster, parse_workers, require_ray, verify_many

    workers, cluster = parse_workers(workers), parse_cluster(cluster)
    if cluster is not None:
        require_ray()  # before anything is compiled

    progress = progress or (lambda ev: None)
    t_start = time.perf_counter()
    timing: dict[str, float] = {}
    date = datetime.now(UTC).isoformat(timespec="seconds")
    cfg, cs = load_project(root, config)
    for s in sizes or ():
        if int(s) < 1:
            raise UsageError(f"--sizes takes positive batch sizes, found {s}.")
    if max_mutants is not None and max_mutants < 1:
        raise UsageError(f"--max-mutants takes a positive number, found {max_mutants}.")
    if sanitizer_processes is not None and sanitizer_processes < 1:
        raise UsageError(f"--sanitizer-workers takes a positive number, found {sanitizer_processes}.")
    tools = tuple(PASSES if sanitizers is None and stand_in is None else sanitizers or ())
    for tool in tools:
        if tool not in PASSES:
            raise UsageError(f'--sanitizers takes {", ".join(f"{t!r}" for t in PASSES)} (or "none"), found "{tool}".')
    tools = tuple(t for t in PASSES if t in tools)  # in the passes' order, whatever the order given
    slowdown = stand_in is None if slowdown is None else slowdown
    kernels, _ = resolve_names(cfg, cs, kernels)
    generated, selected = plan_mutants(cs, cfg, kernels, operators, max_mutants)
    # the other kernels of the same source that run each mutant's line (for identical builds and step 6)
    siblings = sibling_kernels(cfg, cs, [m for ms in selected.values() for m in ms])
    units = _units_named(cs, cfg, kernels)
    eq_path = equivalent_file or DEFAULT_FILE
    records = load_records(eq_path, _display(eq_path, cfg.root))
    timing["generate"] = time.perf_counter() - t_start
    all_selected = [m for ms in selected.values() for m in ms]
    progress({"event": "planned", "mutants": len(all_selected), "generated": sum(len(v) for v in generated.values())})
    for name, why in empty_reasons(cfg, cs, generated, operators).items():
        progress({"event": "note", "text": f"{name}: 0 mutants: {why}"})

    if stand_in is None:
        names, arch = gpu_target(backends, cfg, cluster)
        t = time.perf_counter()
        builds = build_mutants(cfg, cs, all_selected, arch, jobs, progress, siblings)
        timing["compile"] = time.perf_counter() - t
        statuses = {key: b.status for key, b in builds.items()}
        details = {key: b.detail for key, b in builds.items()}
        # per mutant, the source overrides its variant is built with: its own kernel's mutated copy, or
        # for a header mutant the copy of every including kernel's source beside the mutated header
        by_m = {m.key: m for m in all_selected}
        paths = {key: dict(b.overrides) if b.overrides else {by_m[key].kernel: b.path} for key, b in builds.items() if b.status != "stillborn"}
        nvcc = next((b.nvcc for b in builds.values() if b.nvcc), "")
        # the static kernel-code checks of `wireup check`, on each mutant and on each unmutated copy
        t = time.perf_counter()
        originals_built = {
            name: build_header_original(cfg, cs, ms[0], arch) if ms[0].is_header else build_original(cfg, cs, name, ms[0].original, arch)
            for name, ms in selected.items() if ms
        }  # fmt: skip
        hits = static_catches(cfg, cs, [it for m in all_selected if statuses[m.key] in ("compiled", "identical") for it in _static_items(m.key, m, builds[m.key])], jobs,
                              progress=progress)
        static = {key: (tuple(dict.fromkeys(r for r, _ in v)), v[0][1]) for key, v in hits.items()}
        static_baselines = static_catches(cfg, cs, [it for name, ms in selected.items() if ms for it in _static_items(name, ms[0], originals_built[name])], jobs)
        for key in static:
            statuses[key] = "compiled"  # an identical mutant that a static check flags is caught, not dropped
        timing["static"] = time.perf_counter() - t
    else:
        names, arch = ["emulated"], None
        statuses = {m.key: "compiled" for m in all_selected}
        details, paths, nvcc = {}, {}, ""
        static, static_baselines = {}, {}

    # interleave the kernels so the heavy ones do not all queue at the end
    order = [m for group in _round_robin(list(selected.values())) for m in group]
    to_run = [m for m in order if statuses[m.key] == "compiled" and m.key not in static]
    # a header mutant is caught when any including kernel catches it, and first_failure ends its unit at the
    # first kernel that fails: the kernels whose verification costs least (by their evidence) go first
    cost = _verify_costs(cfg) if any(m.is_header for m in to_run) else {}
    variants = [_stand_in_variant(m.key, _cheapest_first(m.kernels, cost) if m.is_header else m.kernels, paths.get(m.key, {}),
                                  stand_in(m) if stand_in else None) for m in to_run]  # fmt: skip
    # the unmutated copy of every kernel, verified in the same call with the same settings (a check that
    # fails without any mutation would "catch" every mutant), and first, on workers no mutant has used
    originals: dict[str, dict[str, Path]] = {}
    baseline_variants: list[Variant] = []
    for name, ms in selected.items():
        judged = ms[0].kernels if ms else (name,)
        if stand_in is None and ms and ms[0].is_header:
            originals[name] = dict(originals_built[name].overrides)
        elif stand_in is None and (copy := mutant_dir(cfg, name) / "original.cu").is_file():
            originals[name] = {name: copy}
        baseline_variants.append(_stand_in_variant(
            f"{name}/{BASELINE}", judged, originals.get(name, {}),
            (baseline_stand_in(name) if baseline_stand_in else {}) if stand_in else None,
        ))  # fmt: skip
    variants = baseline_variants + variants
    t = time.perf_counter()
    outs = verify_many(
        cfg.root, variants, backends=names, seed=seed, sizes=sizes, timeout=timeout or max(60.0, 6 * launch_timeout),
        launch_timeout=launch_timeout, workers=workers or ("auto" if cluster else default_workers()), first_failure=True, jobs=jobs,
        progress=progress, config=cfg, cluster=cluster, python_paths=python_paths, journal=journal,
    )  # fmt: skip
    timing["verify"] = time.perf_counter() - t
    by_key = {o.id: o for o in outs}
    baselines = {name: _baseline(by_key[f"{name}/{BASELINE}"]) for name in selected}
    for name, hits in static_baselines.items():
        if baselines[name][0] == "pass":
            baselines[name] = ("fail", [f"{rule}: {message}" for rule, message in hits])
    # later passes, each over the survivors of the one before: mutant key -> (rule IDs, first message)
    late: dict[str, tuple[tuple[str, ...], str]] = dict(static)
    survivors = [m for m in to_run if by_key[m.key].error is None and not by_key[m.key].failed_rules]
    # what each journaled slowdown or sanitizer run depends on (its journal key): the same builds and contracts
    identities = _sanitizer_identities(cs, builds, originals_built, selected, siblings) if stand_in is None and (tools or slowdown) else None
    if slowdown:
        # workers share the GPU, and an event pair around one launch also times the kernels other processes
        # run in between: a survivor that looks far slower is timed again alone (one worker), between two
        # verifications of its baseline. Alone within this run only: another process on the GPU (a second
        # `wireup mutate`, a sanitizer run) can still hold it for milliseconds, so a suspect must be slower
        # in each of SLOWDOWN_PASSES passes; one that is not, in some pass, is dropped there.
        suspects = [m for m in survivors if slower(by_key[m.key], by_key[f"{m.kernel}/{BASELINE}"])]
        # each suspect's outcome is kept beside the sanitizer passes' (a resumed run took ~140 s on the H100
        # to time 49 suspects alone again, for the same verdicts)
        book, idents = _slowdown_journal(journal, identities, seed, sizes, names)
        done = book.load() if book is not None else {}
        for m in [m for m in suspects if idents.get(m.key) in done]:
            errors = done[idents[m.key]]
            suspects.remove(m)
            if errors:
                late[m.key] = (("MUTATE_SLOWDOWN",), errors[0][1])
            progress({"event": "slowdown", "variant": m.key, "message": (errors[0][1] if errors else "not slower when timed alone") + " (from the journal)"})
        # each pass a suspect was slower in is journaled as it ends (a call cut off in the middle of the
        # passes keeps them; the header sets' call of 7 December spent ~475 s here and kept nothing): a
        # resumed run starts each suspect at its first pass not journaled
        first: dict[str, int] = {}
        hits: dict[str, str] = {}
        for m in suspects:
            n = 0
            while n < SLOWDOWN_PASSES and m.key in idents and _pass_key(idents[m.key], n) in done:
                hits.setdefault(m.key, done[_pass_key(idents[m.key], n)][0][1] if done[_pass_key(idents[m.key], n)] else "")
                n += 1
            first[m.key] = n

        def keep(m: Mutant, message: str) -> None:
            if book is not None and m.key in idents:
                book.append(idents[m.key], m.key, [("MUTATE_SLOWDOWN", message)] if message else [])

        def passed(m: Mutant, n: int, message: str) -> None:
            if book is not None and m.key in idents:
                book.append(_pass_key(idents[m.key], n), f"{m.key} pass {n + 1}", [("MUTATE_SLOWDOWN", message)])

        t = time.perf_counter()
        by_id = {v.id: v for v in variants}
        # each suspect is timed alone at the sizes of the cases it was slow in (a verification of the whole
        # sweep took ~8 s per suspect of the trade-outcome backward on the H100, 6 December); one whose slow
        # case those sizes do not run, or whose cases name no one size, at the run's own sizes
        at: dict[str, tuple[int, ...] | None] = {m.key: slow_sizes(by_key[m.key], by_key[f"{m.kernel}/{BASELINE}"]) or None for m in suspects}
        # ... and only on the kernels those cases are of: a header mutant's variant verifies every kernel that
        # includes the header (the chain's aux_common.cuh: 12 kernels, ~36 s a verification on the H100 with
        # 4 workers), where its slow cases were in one or two of them
        on: dict[str, tuple[str, ...]] = {m.key: slow_subjects(by_key[m.key], by_key[f"{m.kernel}/{BASELINE}"], by_id[m.key].kernels) for m in suspects}
        for n in range(SLOWDOWN_PASSES):
            if not suspects:
                break
            timed = [m for m in suspects if first[m.key] <= n]  # the others' pass n is in the journal
            kept = [m for m in suspects if first[m.key] > n]
            # a few suspects at a time, each chunk between its kernels' baselines: each chunk's verdicts are
            # journaled as it ends
            for start in range(0, len(timed), SLOWDOWN_CHUNK):
                chunk = timed[start : start + SLOWDOWN_CHUNK]
                # each suspect says what it is about to be timed on, before the chunk's verifications: a run cut
                # off in a chunk (the header sets' call of 7 December, ~427 s in one) shows which ones held it
                for m in chunk:
                    sizes_of = ", ".join(map(str, at[m.key])) if at[m.key] else "the run's sizes"
                    progress({"event": "timing", "variant": m.key,
                              "message": f"timed alone next (pass {n + 1} of {SLOWDOWN_PASSES}): {len(on[m.key])} kernel(s) at {sizes_of}"})  # fmt: skip
                # (sizes, kernels, variant id) -> its outcome timed alone
                alone: dict[tuple[tuple[int, ...] | None, tuple[str, ...], str], Any] = {}
                pending = chunk
                while pending:
                    for group_sizes, subjects in dict.fromkeys((at[m.key], on[m.key]) for m in pending):
                        group = [m for m in pending if (at[m.key], on[m.key]) == (group_sizes, subjects)]
                        kernels = list(dict.fromkeys(m.kernel for m in group))
                        # each baseline before and after the suspects: a mutant must be slower than both timings
                        before = [dataclasses.replace(by_id[f"{k}/{BASELINE}"], kernels=subjects) for k in kernels]
                        after = [dataclasses.replace(v, id=f"{v.id}/again") for v in before]
                        again = verify_many(
                            cfg.root, before + [dataclasses.replace(by_id[m.key], kernels=subjects) for m in group] + after,
                            backends=names, seed=seed, sizes=group_sizes if group_sizes is not None else sizes,
                            timeout=timeout or max(60.0, 6 * launch_timeout), launch_timeout=launch_timeout,
                            workers=1, first_failure=True, jobs=jobs, progress=lambda ev: None, config=cfg, cluster=cluster, python_paths=python_paths,
                        )  # fmt: skip
                        alone.update({(group_sizes, subjects, o.id): o for o in again})
                    # a slow case those sizes did not run: timed again in this pass, at the run's own sizes
                    pending = [m for m in pending
                               if at[m.key] is not None and not _ran_slow_case(alone[(at[m.key], on[m.key], m.key)], by_key[m.key], by_key[f"{m.kernel}/{BASELINE}"])]  # fmt: skip
                    for m in pending:
                        at[m.key] = None
                for m in chunk:
                    b, g = f"{m.kernel}/{BASELINE}", (at[m.key], on[m.key])
                    hit = slower(alone[(*g, m.key)], alone[(*g, b)])
                    hits.setdefault(m.key, hit)
                    if hit and slower(alone[(*g, m.key)], alone[(*g, f"{b}/again")]):
                        kept.append(m)
                        passed(m, n, hit)
                        progress({"event": "slowdown", "variant": m.key, "message": f"slower when timed alone (pass {n + 1} of {SLOWDOWN_PASSES})"})
                    else:
                        keep(m, "")
                        progress({"event": "slowdown", "variant": m.key, "message": f"not slower when timed alone (pass {n + 1} of {SLOWDOWN_PASSES})"})
            suspects = [m for m in suspects if m in kept]
        for m in suspects:  # slower in every pass: the first pass's message
            hits[m.key] = hits.get(m.key) or "slower when timed alone"
            keep(m, hits[m.key])
            progress({"event": "slowdown", "variant": m.key, "message": hits[m.key]})
            late[m.key] = (("MUTATE_SLOWDOWN",), hits[m.key])
        if hits:  # a first suspect was timed alone at least once
            timing["slowdown"] = time.perf_counter() - t
    # a survivor of a source that other kernels of the contracts are built from too, in code their entries
    # reach, is judged by those siblings as well (step 6); the sanitizers then take what is left, for its
    # own kernel and as those siblings
    if stand_in is None:
        sib_static = {n: originals_built[n] for n, ms in selected.items() if ms and not ms[0].is_header}
    else:
        sib_static = {}
    t = time.perf_counter()
    found = _sibling_pass(cfg, cs, [m for m in survivors if m.key not in late], siblings, paths, originals, sib_static,
                          {key: builds[key] for key in paths} if stand_in is None else {},
                          stand_in, baseline_stand_in, progress,
                          lambda vs: verify_many(cfg.root, vs, backends=names, seed=seed, sizes=sizes, timeout=timeout or max(60.0, 6 * launch_timeout),
                                                 launch_timeout=launch_timeout, workers=workers or ("auto" if cluster else default_workers()),
                                                 first_failure=True, jobs=jobs, progress=progress, config=cfg, cluster=cluster,
                                                 python_paths=python_paths, journal=journal), jobs)  # fmt: skip
    if found is not None:
        timing["siblings"] = time.perf_counter() - t
        late.update(found)
    shared: dict[str, bool] = {}

    def uses_shared(kernel: str) -> bool:
        if kernel not in shared:
            shared[kernel] = _uses_shared(cfg, cs, kernel, arch)
        return shared[kernel]

    # the survivors an equivalence record claims go after the others in each pass
    claimed = {m.key for name, ms in selected.items() if ms for matched in [match_records(name, generated[name], records)[0]] for m in ms if m.id in matched}
    for tool in tools:
        # a removed barrier or a read past the end rarely changes numbers on one run: the survivors run
        # again under compute-sanitizer, as the broken fixtures are, and so does the unmutated copy of
        # their kernel (a report it has itself would "catch" every such survivor). racecheck sees shared
        # memory only, so it takes the survivors of kernels that use it and every lost barrier. A survivor
        # with siblings (step 6) runs as them too, after their unmutated copy; racecheck takes the siblings
        # that use shared memory (all of them for a lost barrier).
        left = [m for m in survivors if m.key not in late]
        todo = [m for m in left if tool != "racecheck" or m.operator == "sync" or any(uses_shared(k) for k in m.kernels)]
        sibs = {m.key: tuple(s for s in siblings[m.key] if tool != "racecheck" or m.operator == "sync" or uses_shared(s)) for m in left if m.key in siblings}
        sibs = {key: ks for key, ks in sibs.items() if ks}
        t = time.perf_counter()
        from ..runtime import sanitizer_journal_path

        found, checked = _sanitize(cfg, tool, todo, paths, originals, names, seed, progress, sanitizer_processes or sanitizer_workers(),
                                   journal=sanitizer_journal_path(journal) if journal is not None and stand_in is None else None,
                                   identities=identities,
                                   siblings=sibs, cs=cs, claimed=claimed)  # fmt: skip
        timing[tool] = timing.get(tool, 0.0) + time.perf_counter() - t
        late.update(found)
        for name, hit in checked.items():
            if baselines[name][0] == "pass" and hit is not None:
                baselines[name] = ("fail", [f"{rule}: {message}" for rule, message in hit])

    results: list[KernelMutation] = []
    for name, ms in selected.items():
        unit = units.get(name)
        source = unit.source if unit else cs.kernel(name).source
        text = ms[0].original if ms else cfg.path(source).read_text(encoding="utf-8")
        # records are matched against the mutants of every operator, so a run restricted by --operators
        # does not report the records of the other operators stale
        if operators is None:
            every = generated[name]
        else:
            every = header_mutants(cfg, cs, unit) if unit else kernel_mutants(cs, name, text)
        matched, stale = match_records(name, every, records)
        baseline, baseline_findings = baselines[name]
        unscored = not_scored_reason(baseline, baseline_findings)
        outcomes = []
        for m in ms:
            st = statuses[m.key]
            if st != "compiled":
                outcomes.append(MutantOutcome(m, st, detail=details.get(m.key, "")))
                continue
            o = by_key.get(m.key)
            if o is None:  # caught by a static check: never verified
                rules, first = late[m.key]
                outcomes.append(MutantOutcome(m, "not_scored" if unscored else "caught", rules, unscored or first))
                continue
            if o.error:
                outcomes.append(MutantOutcome(m, "error", detail=o.error, seconds=o.seconds))
                continue
            rules = tuple(o.failed_rules)
            if not rules and m.key in late:
                rules, first = late[m.key]
            elif rules:
                first = next((f.message for f in o.outcome.result.findings if f.severity.value == "error"), "")
            if unscored:
                outcomes.append(MutantOutcome(m, "not_scored", rules, unscored, seconds=o.seconds))
            elif rules:
                outcomes.append(MutantOutcome(m, "caught", rules, first, seconds=o.seconds))
            else:
                outcomes.append(MutantOutcome(m, "survived", equivalent=matched.get(m.id), seconds=o.seconds))
        stale = stale + refuted_records(name, matched, {o.mutant.id: o.checks for o in outcomes if o.status == "caught"})
        per_op: dict[str, int] = {}
        for m in generated[name]:
            per_op[m.operator] = per_op.get(m.operator, 0) + 1
        results.append(KernelMutation(name, source, hashlib.sha256(text.encode()).hexdigest(), len(generated[name]), per_op, outcomes, stale,
                                      baseline=baseline, baseline_findings=baseline_findings, judged_by=list(unit.kernels) if unit else [],
                                      judged_sources=judge_hashes(cfg, cs, unit) if unit else {}))  # fmt: skip

    run = MutationRun(results, settings={
        # None: each kernel's cases as `wireup verify` plans them (its sweep); a list: the --sizes given
        "sizes": [int(s) for s in sizes] if sizes is not None else None, "seed": int(seed), "operators": sorted(check_operators(operators)),
        "max_mutants": max_mutants, "launch_timeout_s": launch_timeout, "first_failure": True,
        "equivalent_file": _display(eq_path, cfg.root), "static_checks": [] if stand_in else list(STATIC_RULES),
        # racecheck: RACE_SIZES, the first alone for a kernel race_sizes finds it enough for (plan 4)
        "sanitizers": {t: list(RACE_SIZES if t == "racecheck" else MEMCHECK_SIZES) for t in tools}, "sanitizer_plan": SANITIZER_PLAN,
        "slowdown": {"ratio": SLOWDOWN_RATIO, "seconds": SLOWDOWN_SECONDS, "passes": SLOWDOWN_PASSES} if slowdown else None,
    }, date=date)  # fmt: skip
    _run_facts(run, outs, arch, nvcc)
    timing["wall"] = time.perf_counter() - t_start
    run.timing = timing
    return run


def _sibling_pass(cfg: Any, cs: Any, survivors: Sequence[Mutant], siblings: Mapping[str, tuple[str, ...]], paths: Mapping[str, Mapping[str, Path]],
                  originals: Mapping[str, Mapping[str, Path]], originals_built: Mapping[str, MutantBuild],
                  builds: Mapping[str, MutantBuild], stand_in: Any, baseline_stand_in: Any, progress: Progress,
                  verify: Callable[[list[Any]], list[Any]], jobs: int | None) -> dict[str, tuple[tuple[str, ...], str]] | None:  # fmt: skip
    """Step 6 of the module docstring: the survivors of a source other kernels are built from too, judged
    by those ``siblings`` (:func:`sibling_kernels`, mutant key -> kernels): the static checks on each sibling's entry in the mutant's
    PTX, then verification of the siblings built from the mutated source, after their unmutated copy
    (built from the same copy of the source) in the same call. A sibling whose unmutated copy fails a check
    judges nothing with that check (it would "catch" every mutant). Returns mutant key -> (failed rule IDs,
    first message, naming the sibling) for those caught, or None when no survivor has a sibling."""
    sibs = {m.key: siblings[m.key] for m in survivors if m.key in siblings and (m.key in paths or stand_in is not None)}
    if not sibs:
        return None
    todo = [m for m in survivors if m.key in sibs]
    progress({"event": "note", "text": f"{len(todo)} survivor(s) in code other kernels of the same source run: judged by those kernels too"})
    found: dict[str, tuple[tuple[str, ...], str]] = {}
    # the static checks, on each sibling's entry in the mutant's PTX (where its unmutated copy passes them)
    if builds:
        pairs = dict.fromkeys((m.kernel, s) for m in todo for s in sibs[m.key] if m.kernel in originals_built)  # each once
        bases = static_catches(cfg, cs, [(f"{k}/{s}", s, originals_built[k]) for k, s in pairs], jobs)
        items = [(f"{m.key}\t{s}", s, builds[m.key]) for m in todo for s in sibs[m.key] if f"{m.kernel}/{s}" not in bases]
        for item, hits in static_catches(cfg, cs, items, jobs).items():
            key, s = item.split("\t")
            if key not in found:
                found[key] = (tuple(dict.fromkeys(r for r, _ in hits)), f"as {s} (same source): {hits[0][1]}")
                progress({"event": "sibling", "variant": key, "message": found[key][1]})
    todo = [m for m in todo if m.key not in found]
    # verification: each kernel's siblings from its unmutated copy first, then each mutant
    judged: dict[str, list[str]] = {}
    for m in todo:
        judged.setdefault(m.kernel, [])
        judged[m.kernel] += [s for s in sibs[m.key] if s not in judged[m.kernel]]
    variants = []
    for name, kernels in judged.items():
        copy = originals.get(name, {}).get(name)
        emulated: dict[str, Any] = {}
        if stand_in is not None and baseline_stand_in is not None:
            for s in kernels:
                got = baseline_stand_in(s)
                emulated.update(got if isinstance(got, Mapping) else {})
        variants.append(_stand_in_variant(f"{name}/{BASELINE}/siblings", tuple(kernels), {s: copy for s in kernels} if copy else {},
                                          emulated if stand_in is not None else None))  # fmt: skip
    for m in todo:
        own = paths.get(m.key, {}).get(m.kernel)
        variants.append(_stand_in_variant(f"{m.key}/siblings", sibs[m.key], {s: own for s in sibs[m.key]} if own else {},
                                          stand_in(m) if stand_in is not None else None))  # fmt: skip
    if not todo:
        return found
    outs = {o.id: o for o in verify(variants)}
    failing: dict[str, set[str]] = {}
    for name in judged:
        o = outs[f"{name}/{BASELINE}/siblings"]
        if o.error:
            progress({"event": "note", "text": f"{name}: the unmutated copy of its siblings could not be verified ({o.error}); they judge none of its survivors"})
            failing[name] = {"*"}
        elif o.failed_rules:
            failing[name] = set(o.failed_rules)
            progress({"event": "note", "text": f"{name}: its siblings' unmutated copy fails {', '.join(o.failed_rules)}; those checks judge none of its survivors"})
    for m in todo:
        o = outs[f"{m.key}/siblings"]
        bad = failing.get(m.kernel, set())
        if o.error:
            progress({"event": "note", "text": f"{m.key}: not judged by {', '.join(sibs[m.key])} (its verification ended in an internal error: {o.error})"})
        if o.error or "*" in bad:
            continue
        rules = [r for r in o.failed_rules if r not in bad]
        if rules:
            hit = next((f for f in o.outcome.result.findings if f.severity.value == "error" and f.rule == rules[0]), None)
            who = hit.subject if hit is not None and hit.subject in sibs[m.key] else ", ".join(sibs[m.key])
            found[m.key] = (tuple(rules), f"as {who} (same source): {hit.message if hit is not None else ''}")
            progress({"event": "sibling", "variant": m.key, "message": found[m.key][1]})
    return found


def race_sizes(cs: Any, kernels: Sequence[str], plan: int = SANITIZER_PLAN) -> tuple[int, ...]:
    """The sizes a racecheck run of ``kernels`` takes: :data:`RACE_SIZES`, or (from plan 4) their first
    alone where, in every dims variant of every kernel, each grid axis that follows a runtime dim has more
    blocks there than at size 1: the first size then spans more than one block along the runtime dims.
    racecheck judges the shared-memory accesses of each block on its own, between its barriers; a
    ``ceil_div(B, 32)`` grid at B = 37 has a full block and a tail, and B = 300 adds blocks of the same two
    kinds, with their launches (under racecheck a run's time follows its launches). A kernel whose grid
    does not follow a runtime dim (a grid-stride loop: its blocks take more rows as B grows), or whose
    first size is one block along them (``ceil_div(B, 128) * ceil_div(SH2, 64)`` at B = 37: four blocks,
    each a tail), keeps both sizes."""
    from ..cases import make_env
    from ..runtime import dims_variants, uses_runtime_dim

    if plan < 4:
        return RACE_SIZES
    first = RACE_SIZES[0]
    for name in kernels:
        k = cs.kernel(name)
        following = [e for e in k.grid if uses_runtime_dim(e, cs)]
        if not following:
            return RACE_SIZES
        for variant in dims_variants(k, cs):
            at = {n: make_env(cs, n, variant) for n in (1, first)}
            try:
                if any(e.evaluate(at[first], cs.slot_indices) <= e.evaluate(at[1], cs.slot_indices) for e in following):
                    return RACE_SIZES
            except (ArithmeticError, KeyError, ValueError):  # a grid that cannot be evaluated there: both sizes
                return RACE_SIZES
    return (first,)


def _verify_costs(cfg: Any) -> dict[str, float]:
    """Kernel -> the seconds its last recorded verification took (the least over its backends' evidence
    records); empty where no record can be read."""
    from ..check_cache import cache_folder
    from ..evidence import load_records

    out: dict[str, float] = {}
    try:
        records = load_records(cfg.path(cfg.evidence), cache_folder(cfg))
    except (OSError, ValueError):
        return out
    for r in records:
        if r.kind == "kernel" and isinstance(r.duration_s, (int, float)):
            out[r.subject] = min(out.get(r.subject, float("inf")), float(r.duration_s))
    return out


def _cheapest_first(kernels: Sequence[str], cost: Mapping[str, float]) -> tuple[str, ...]:
    """``kernels`` by their recorded verification time, least first; those without a record last, each
    group in its given order.

    >>> _cheapest_first(("a", "b", "c"), {"b": 0.5, "a": 2.0})
    ('b', 'a', 'c')
    """
    order = {k: i for i, k in enumerate(kernels)}
    return tuple(sorted(kernels, key=lambda k: (k not in cost, cost.get(k, 0.0), order[k])))


def _stand_in_variant(id: str, kernels: tuple[str, ...], overrides: Mapping[str, Path], stand_in: Mapping[str, Any] | str | None) -> Any:
    """A variant to verify; a stand-in is emulated kernels (symbol -> function, run in this process) or a
    ``module:function`` plugin registering them in a worker, so stand-in runs can use several workers."""
    from ..runtime import Variant

    if isinstance(stand_in, str):
        return Variant(id, kernels, overrides, None, (stand_in,))
    return Variant(id, kernels, overrides, stand_in)


def _baseline(o: Any) -> tuple[str, list[str]]:
    """("pass" | "fail" | "error", ["RULE: message", ...]) of a kernel's unmutated copy."""
    if o.error:
        return "error", [f"error: {o.error.splitlines()[0] if o.error.strip() else 'no detail'}"]
    if not o.failed_rules:
        return "pass", []
    return "fail", [f"{f.rule}: {f.message}" for f in o.outcome.result.findings if f.severity.value == "error"]


def _slow_cases(mutant: Any, baseline: Any) -> Iterator[tuple[str, str, str, float, float]]:
    """(subject, case label, backend, mutant's seconds, baseline's seconds) of each case where ``mutant``'s
    fastest launch took :data:`SLOWDOWN_RATIO` times its baseline's (same subject, backend and case label)
    and :data:`SLOWDOWN_SECONDS` more."""
    if mutant.outcome is None or baseline.outcome is None:
        return
    base = {(r.subject, r.backend): r.launch_seconds for r in baseline.outcome.run.results}
    for r in mutant.outcome.run.results:
        ref = base.get((r.subject, r.backend), {})
        for case, t in r.launch_seconds.items():
            t0 = ref.get(case)
            if t0 is not None and t0 > 0 and t >= SLOWDOWN_RATIO * t0 and t - t0 >= SLOWDOWN_SECONDS:
                yield r.subject, case, r.backend, t, t0


def _slow_launches(mutant: Any, baseline: Any) -> Iterator[tuple[str, str, float, float]]:
    """:func:`_slow_cases` without the subject."""
    for _, case, backend, t, t0 in _slow_cases(mutant, baseline):
        yield case, backend, t, t0


def slower(mutant: Any, baseline: Any) -> str:
    """The MUTATE_SLOWDOWN message when ``mutant``'s fastest launch in some case (same backend, same case
    label) took :data:`SLOWDOWN_RATIO` times its baseline's and :data:`SLOWDOWN_SECONDS` more; else "".
    The case where the mutant lost the most time is named."""
    worst = max(_slow_launches(mutant, baseline), key=lambda x: x[2] - x[3], default=None)
    if worst is None:
        return ""
    case, backend, t, t0 = worst
    return (f"its launch at {case} on {backend} takes {_ms(t)}, {t / t0:.0f} times the unmutated kernel's {_ms(t0)}: "
            "the same results for far more work")  # fmt: skip


def slow_sizes(mutant: Any, baseline: Any) -> tuple[int, ...]:
    """The sizes of the cases where ``mutant`` is :func:`slower` than ``baseline`` (``B=300 (K=3)``: 300),
    sorted; () when there is none, or when a case is not at one runtime dim's value (``B=4,T=17``)."""
    out = set()
    for case, *_ in _slow_launches(mutant, baseline):
        head = case.split(" ", 1)[0]
        _, eq, value = head.partition("=")
        if not eq or not value.isdigit():
            return ()
        out.add(int(value))
    return tuple(sorted(out))


def slow_subjects(mutant: Any, baseline: Any, kernels: Sequence[str]) -> tuple[str, ...]:
    """The kernels of ``kernels`` (in their order) whose cases ``mutant`` is :func:`slower` than ``baseline``
    in; all of ``kernels`` where a slow case is of none of them (a schedule's)."""
    slow = {subject for subject, *_ in _slow_cases(mutant, baseline)}
    return tuple(k for k in kernels if k in slow) if slow <= set(kernels) else tuple(kernels)


def _ran_slow_case(alone: Any, first: Any, baseline: Any) -> bool:
    """Whether the timing ``alone`` launched a case that ``first`` (the suspect's timing beside other
    workers) was slower than ``baseline`` in."""
    if alone.outcome is None:
        return False
    ran = {case for r in alone.outcome.run.results for case in r.launch_seconds}
    return any(case in ran for case, *_ in _slow_launches(first, baseline))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


def _uses_shared(cfg: Any, cs: Any, kernel: str, arch: str | None) -> bool:
    """Whether ``kernel`` uses shared memory (static, or dynamic by its contract): racecheck sees only that."""
    k = cs.kernel(kernel)
    if k.shared_bytes is not None:
        return True
    from ..compile import build_kernels

    try:
        _, entry = build_kernels(cfg, cs, arch=arch, jobs=1, sources=[kernel]).kernel(k)
    except Exception:  # noqa: BLE001 - unknown: let racecheck decide
        return True
    return entry is None or entry.shared_static_bytes > 0


def _slowdown_journal(journal: Path | None, identities: Mapping[str, str] | None, seed: int, sizes: Any,
                      backends: Sequence[str]) -> tuple[Any, dict[str, str]]:  # fmt: skip
    """The journal of the MUTATE_SLOWDOWN passes (the sanitizer passes' file: keys of their own) and each
    variant's key there: the run's settings and what the variant and its kernel's unmutated copy load and
    judge (``identities``, :func:`_sanitizer_identities`). (None, {}) without a journal or identities (a stand-in)."""
    if journal is None or identities is None:
        return None, {}
    from ..runtime import VerdictJournal, sanitizer_journal_path

    settings = [__version__, "slowdown", SLOWDOWN_RATIO, SLOWDOWN_SECONDS, SLOWDOWN_PASSES, seed, sizes, list(backends)]
    out = {}
    for key, ident in identities.items():
        base = identities.get(f"{key.partition('/')[0]}/{BASELINE}")
        if "/siblings" not in key and base is not None:
            out[key] = hashlib.sha256(json.dumps([*settings, key, ident, base], sort_keys=True, default=str).encode()).hexdigest()
    return VerdictJournal(sanitizer_journal_path(journal)), out


def _pass_key(identity: str, n: int) -> str:
    """The slowdown journal's key of pass ``n`` of the suspect whose verdict's key is ``identity``."""
    return hashlib.sha256(f"{identity}\0pass {n}".encode()).hexdigest()


def _build_keys(b: Any) -> list[str]:
    """The build-cache keys (folder names) of a mutant's or an unmutated copy's compiled PTX: the hash of its
    source, includes, flags and toolchain."""
    ptxs = [b.ptx] if b.ptx is not None else []
    ptxs += [v for _, v in sorted(b.ptxs.items())]
    return [p.parent.name for p in ptxs]


def _sanitizer_identities(cs: Any, builds: Mapping[str, Any], originals: Mapping[str, Any], selected: Mapping[str, Sequence[Mutant]],
                          siblings: Mapping[str, Sequence[str]] | None = None) -> dict[str, str]:  # fmt: skip
    """Variant key -> what its sanitizer runs depend on beyond the run's settings: the build keys of what it
    loads, the contract hashes of the kernels it judges (their bindings, shapes and tolerances) and what
    verifying each reads outside its contract (:func:`audit.evidence.kernel_inputs`: the dims, the ISV
    layout, its launches' buffers and their writers' domains, from which its inputs are drawn). With
    ``siblings`` (mutant key -> the other kernels of its source that run its line), also each such mutant's
    run as its siblings (``<key>/siblings``, the mutant's build) and each kernel's siblings' unmutated copy
    (``<kernel>/baseline/siblings``, the kernel's unmutated build, judged by every sibling of its mutants)."""
    from ..evidence import kernel_inputs
    from ..hashing import contract_hash

    def contracts(kernels: Sequence[str]) -> list:
        return [[contract_hash(cs.kernel(k)), kernel_inputs(cs, cs.kernel(k))] for k in kernels]

    # a stillborn mutant never runs; a header mutant's build names the kernels it judges in its overrides, and
    # where it has none (a stillborn one: the kernel of its key is the header, which no contract names)
    # nothing loads it
    judged = {m.key: m.kernels for ms in selected.values() for m in ms}
    out = {key: json.dumps([_build_keys(b), contracts(list(b.overrides) or list(judged.get(key, (key.partition("/")[0],))))])
           for key, b in builds.items() if b.status != "stillborn"}
    for name, ms in selected.items():
        if ms and name in originals:
            b = originals[name]
            out[f"{name}/{BASELINE}"] = json.dumps([_build_keys(b), contracts(list(b.overrides) or list(ms[0].kernels))])
    for key, sibs in (siblings or {}).items():
        if sibs and key in builds:
            out[f"{key}/siblings"] = json.dumps([_build_keys(builds[key]), contracts(list(sibs))])
    for name, ms in selected.items():
        sibs = list(dict.fromkeys(s for m in ms for s in (siblings or {}).get(m.key, ())))
        if sibs and name in originals:
            out[f"{name}/{BASELINE}/siblings"] = json.dumps([_build_keys(originals[name]), contracts(sibs)])
    return out


def _sanitize(cfg: Any, tool: str, mutants: Sequence[Mutant], paths: Mapping[str, Path | Mapping[str, Path]], originals: Mapping[str, Path | Mapping[str, Path]], backends: Sequence[str],
              seed: int, progress: Progress, workers: int = 4, journal: Path | None = None,
              identities: Mapping[str, str] | None = None,
              siblings: Mapping[str, Sequence[str]] | None = None, cs: Any = None,
              claimed: Collection[str] = ()) -> tuple[dict[str, tuple[tuple[str, ...], str]], dict[str, list[tuple[str, str]] | None]]:  # fmt: skip
    """Under compute-sanitizer ``tool`` (memcheck at :data:`MEMCHECK_SIZES`, racecheck at
    :func:`race_sizes` of the run's kernels), or for ``tool`` = :data:`PERTURB` without one, each copy
    rewritten by :func:`audit.mutate._perturb.perturbed_copy` and run at :data:`MEMCHECK_SIZES` with
    verify's repeats (``cs``: the contracts, loaded from ``cfg`` if None): mutant key -> (failed rule IDs, first message) for the mutants the run catches,
    and kernel -> the (rule, message) findings of its unmutated copy (None where it passes) for every
    kernel with a mutant checked. ``workers`` sanitizer processes run at a time. ``journal`` (a file, with
    ``identities``: variant key -> its builds and contracts) keeps each conclusive run as it ends and takes
    those an earlier, cut-short run of the same builds and settings had finished (a key without an
    identity is run and not kept).

    ``siblings`` (mutant key -> kernels) runs those mutants as the other kernels of their source too, built
    from the mutated source (``<key>/siblings``), as step 6 verifies them: each kernel's siblings run first
    from its unmutated copy (``<kernel>/baseline/siblings``), and a survivor of that kernel is run as them
    only where its own run (if any: a key of ``siblings`` need not be one of ``mutants``) reports nothing
    and their unmutated copy reported nothing either. Such a report judges none of that kernel's survivors
    under ``tool``; it is no finding of the kernel's own baseline. A survivor its siblings' run catches
    has a message naming the sibling ("as <sibling> (same source): ...").

    A mutant's run (its own, or as its siblings) that the tool reports nothing in but that fails a value
    check (:data:`UNSTABLE_RULES`) catches it by MUTATE_UNSTABLE when the unmutated copy's run of the same
    kernels under the tool (``<kernel>/baseline``, ``<kernel>/baseline/siblings``) passes with no finding
    at all; such a run is journaled like a report. Any other run with findings but no report of the
    tool's own (a launch past the watchdog) is inconclusive: not caught, not kept.

    The runs go lost barriers first, then the mutants not in ``claimed`` (keys with an equivalence record:
    a run can refute one, but the unclaimed survivors are the score's), each group in the given order."""
    import itertools

    from ..runtime import VerdictJournal, verify, visible_gpus
    from ..verify_checks import SANITIZER_CHECKS

    if cs is None:
        from ..api import load_project

        cs = load_project(cfg.root, cfg)[1]

    def sizes_of(kernels: Sequence[str], plan: int = SANITIZER_PLAN) -> tuple[int, ...]:
        return race_sizes(cs, kernels, plan) if tool == "racecheck" else MEMCHECK_SIZES

    perturb = tool == PERTURB
    # where the run's values fail: under a tool, or with the perturbed schedules
    under = "with half of each block's threads delayed at its start and after each barrier" if perturb else f"under compute-sanitizer {tool}"

    stop = threading.Event()  # set when the pass is interrupted (Ctrl-C, or SIGTERM, which `wireup mutate` turns into it)
    book = VerdictJournal(journal) if journal is not None and identities is not None else None
    done = book.load() if book is not None else {}
    book_lock = threading.Lock()

    def identity(key: str, kernels: Sequence[str], plan: int = SANITIZER_PLAN) -> str | None:
        if book is None or key not in identities:
            return None
        settings = [__version__, tool, list(sizes_of(kernels, plan)), seed, list(backends)[:1], SANITIZER_TIMEOUT, key, identities[key], plan]
        if perturb:  # what the rewrite does
            settings.append(PERTURB_VERSION)
        if key.endswith("/siblings"):  # the siblings run in this pass (racecheck takes those with shared memory)
            settings.append(sorted(kernels))
        return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()

    def journaled(key: str, kernels: Sequence[str], current: str | None) -> tuple[list[tuple[str, str]], int] | None:
        """The journal's verdict of this run under the current plan (identity ``current``), else under a
        fuller one (and which)."""
        for plan in (SANITIZER_PLAN, *FULLER_PLANS.get(SANITIZER_PLAN, ())):
            ident = current if plan == SANITIZER_PLAN else identity(key, kernels, plan)
            if ident is not None and ident in done:
                return done[ident], plan
        return None
    # on several GPUs, the sanitizer runs take them in turn (one GPU: every run shares it, unpinned)
    gpus = visible_gpus() if backends and list(backends) != ["emulated"] else []
    turn, turn_lock = itertools.count(), threading.Lock()

    def named(f: Any, kernels: Mapping[str, Path]) -> str:  # a siblings' run: the sibling that reported, as step 6 names it
        who = getattr(f, "subject", None)
        return f"as {who if who in kernels else ', '.join(kernels)} (same source): {f.message}"

    def verdict_of(key: str, errors: list[tuple[str, str]]) -> str:
        base = key.endswith((f"/{BASELINE}", f"/{BASELINE}/siblings"))
        if base:
            return "fail" if errors else "pass"
        if errors and all(rule == UNSTABLE for rule, _ in errors):
            return f"caught by {UNSTABLE} where its unmutated copy passes this run"
        return "caught" if errors else "survived"

    def one(job: tuple[str, Mapping[str, Path]]) -> tuple[str, list[tuple[str, str]], bool]:
        """The run's key, its findings that judge (the tool's reports, else MUTATE_UNSTABLE's), and whether
        it had findings that judge nothing (inconclusive)."""
        key, overrides = job
        if stop.is_set():  # the pass was interrupted: nothing more starts
            return key, [], True
        ident = identity(key, list(overrides))
        held = journaled(key, list(overrides), ident)
        if held is not None:
            errors, plan = held
            fuller = "" if plan == SANITIZER_PLAN else f", a run of the fuller plan {plan}"
            progress({"event": "sanitizer", "tool": tool, "variant": key, "verdict": verdict_of(key, errors) + f" (from the journal{fuller})"})
            return key, errors, False
        with turn_lock:
            n = next(turn)
        pin = [gpus[n % len(gpus)]] if len(gpus) > 1 else None
        started = time.perf_counter()
        # a perturbed schedule runs each case's launches again (repeats): each run is another chance for a race
        sources = {k: perturbed_copy(p) for k, p in overrides.items()} if perturb else dict(overrides)
        out = verify(cfg.root, kernels=list(overrides), backends=list(backends)[:1], seed=seed, sizes=sizes_of(list(overrides)), chain_sizes=(),
                     sanitizer=None if perturb else tool, evidence=False, source_overrides=sources, config=cfg, timeout=SANITIZER_TIMEOUT,
                     devices=pin, repeats=perturb)  # fmt: skip
        if stop.is_set():  # its workers were killed by the interruption: the run proves nothing and is not kept
            return key, [], True
        # the tool's own reports judge; a run the instrumentation slowed past the watchdog (VERIFY_TIMEOUT)
        # says nothing about the kernel; a value check failing in a mutant's run judges it by
        # MUTATE_UNSTABLE, once its unmutated copy is known to pass the same run (the caller decides)
        found = [f for f in out.result.findings if f.severity.value == "error"]
        hits = [f for f in found if tool in SANITIZER_CHECKS and f.rule == SANITIZER_CHECKS[tool].rule]
        errors = [(f.rule, named(f, overrides) if key.endswith("/siblings") else f.message) for f in hits]
        base = key.endswith((f"/{BASELINE}", f"/{BASELINE}/siblings"))
        values = [f for f in found if f.rule in UNSTABLE_RULES] if not hits and not base else []
        if values:
            f = values[0]
            said = named(f, overrides) if key.endswith("/siblings") else f.message
            errors = [(UNSTABLE, f"{said.rstrip('.')} ({under}, whose run of the unmutated copy passes: "
                                 f"the result depends on the timing of its threads or on memory it should not read)")]  # fmt: skip
        verdict = verdict_of(key, errors)
        inconclusive = bool(found) and not errors
        if inconclusive:
            verdict += f" (inconclusive: {', '.join(dict.fromkeys(f.rule for f in found))})"
        elif ident is not None and book is not None:
            with book_lock:
                book.append(ident, key, errors)
        # the run's wall seconds: what a sanitizer plan costs (SANITIZER_PLAN) is measured from these
        progress({"event": "sanitizer", "tool": tool, "variant": key, "verdict": verdict, "seconds": round(time.perf_counter() - started, 1)})
        return key, errors, inconclusive

    # lost barriers first (the likeliest to be caught, racecheck's own target), then the survivors no
    # equivalence record claims: a pass cut short by a call's limit has judged those (a racecheck run of the
    # trade-outcome backward takes ~150 s on the H100)
    todo = sorted((m for m in mutants if m.key in paths), key=lambda m: (m.operator != "sync", m.key in claimed))

    def overrides(kernel: str, v: Path | Mapping[str, Path]) -> Mapping[str, Path]:  # one kernel's copy, or a header's copies
        return {kernel: v} if isinstance(v, Path) else v

    def copy(kernel: str, v: Path | Mapping[str, Path] | None) -> Path | None:  # a kernel's copy of its own source
        return v if isinstance(v, Path) or v is None else v.get(kernel)

    # the survivors' siblings: per kernel, every sibling of its survivors, run from the kernel's unmutated copy
    # (a sibling shares the source file, so that copy is the sibling's too)
    sibs = {key: tuple(ks) for key, ks in (siblings or {}).items() if ks and copy(key.partition("/")[0], paths.get(key)) is not None}
    judged: dict[str, list[str]] = {}
    for key, ks in sibs.items():
        kernel = key.partition("/")[0]
        if copy(kernel, originals.get(kernel)) is not None:
            judged.setdefault(kernel, [])
            judged[kernel] += [s for s in ks if s not in judged[kernel]]
    sibs = {key: ks for key, ks in sibs.items() if key.partition("/")[0] in judged}
    if sibs:
        progress({"event": "note", "text": f"{len(sibs)} survivor(s) in code other kernels of the same source run: run under {tool} as those kernels too"})

    jobs = [(f"{k}/{BASELINE}", overrides(k, originals[k])) for k in dict.fromkeys(m.kernel for m in todo) if k in originals]
    jobs += [(f"{k}/{BASELINE}/siblings", dict.fromkeys(ks, copy(k, originals[k]))) for k, ks in judged.items()]
    jobs += [(m.key, overrides(m.kernel, paths[m.key])) for m in todo]
    found: dict[str, tuple[tuple[str, ...], str]] = {}
    bases: dict[str, list[tuple[str, str]] | None] = {}
    quiet: set[str] = set()  # the kernels whose siblings' unmutated copy the tool reports nothing in
    clean: set[str] = set()  # "<kernel>/baseline" (and ".../siblings") runs with no finding at all
    unstable: dict[str, list[tuple[str, str]]] = {}  # mutant runs judged by MUTATE_UNSTABLE, until their baseline's run is known

    def unstable_note(base_key: str, n: int) -> None:
        progress({"event": "note", "text": f"{base_key} has findings of verify's checks {under}: {UNSTABLE} judges none of its "
                                           f"{n} survivor run(s) that failed a value check so"})  # fmt: skip

    with _interruptible_pool(workers, stop) as pool:
        for key, errors, inconclusive in pool.map(one, jobs):
            kernel, _, rest = key.partition("/")
            if rest in (BASELINE, f"{BASELINE}/siblings") and not errors and not inconclusive:
                clean.add(key)
            if rest == BASELINE:
                bases[kernel] = errors or None
            elif rest == f"{BASELINE}/siblings":
                if errors:  # not the kernel's own report: it only leaves its survivors to their own runs
                    rule, message = errors[0]
                    progress({"event": "note", "text": f"{kernel}: its siblings' unmutated copy fails {rule} under compute-sanitizer {tool} "
                                                       f"({message}); they judge none of its survivors under {tool}"})  # fmt: skip
                else:
                    quiet.add(kernel)
            elif errors and errors[0][0] == UNSTABLE:
                unstable[key] = errors
            elif errors:
                found[key] = (tuple(dict.fromkeys(r for r, _ in errors)), errors[0][1])
        held = [key for key in unstable if f"{key.partition('/')[0]}/{BASELINE}" not in clean]
        for key in unstable:
            if key not in held:
                found[key] = ((UNSTABLE,), unstable[key][0][1])
        for base_key in dict.fromkeys(f"{key.partition('/')[0]}/{BASELINE}" for key in held):
            unstable_note(base_key, sum(1 for key in held if key.startswith(base_key.partition("/")[0] + "/")))
        # then each survivor its own run left, as its siblings built from the mutated source
        later = [(f"{key}/siblings", dict.fromkeys(ks, copy(key.partition("/")[0], paths[key])))
                 for key, ks in sibs.items() if key not in found and key.partition("/")[0] in quiet]  # fmt: skip
        for key, errors, _ in pool.map(one, later):
            kernel = key.partition("/")[0]
            if errors and errors[0][0] == UNSTABLE and f"{kernel}/{BASELINE}/siblings" not in clean:
                unstable_note(f"{kernel}/{BASELINE}/siblings", 1)
            elif errors:
                key = key[: -len("/siblings")]
                found[key] = (tuple(dict.fromkeys(r for r, _ in errors)), errors[0][1])
                progress({"event": "sibling", "variant": key, "message": found[key][1]})
    return found, bases


@contextlib.contextmanager
def _interruptible_pool(workers: int, stop: threading.Event) -> Iterator[ThreadPoolExecutor]:
    """A thread pool of ``verify`` calls that an interruption ends within seconds: the queued calls are
    dropped, ``stop`` is set (a call that ends now keeps nothing), the workers of the running calls are
    killed and no supervisor starts another while their threads end. A plain ``with ThreadPoolExecutor``
    waited for every queued call: on 6 December a ``timeout`` sent SIGTERM during the memcheck pass and the
    run went on for the ~100 s of each survivor's memcheck run until the outer timeout killed it, its last
    journal snapshot then 50 s old."""
    from ..runtime import all_workers_stopped

    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        yield pool
    except BaseException:
        stop.set()
        with all_workers_stopped():
            pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _static_items(key: str, m: Mutant, build: MutantBuild) -> list[tuple[str, str, Any]]:
    """The ``(key, kernel, build)`` items of :func:`static_catches` for a mutant (or an unmutated copy):
    its own kernel's build, or one per kernel including a header (its source copy and PTX), keyed alike."""
    if not m.is_header:
        return [(key, m.kernel, build)]
    return [(key, k, MutantBuild(build.status, p, ptx=build.ptxs.get(k))) for k, p in build.overrides.items()]


def _round_robin(groups: list[list[Mutant]]) -> list[list[Mutant]]:
    out: list[list[Mutant]] = []
    queues = [list(g) for g in groups]
    while any(queues):
        out.append([q.pop(0) for q in queues if q])
    return out


def _display(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


def _run_facts(run: MutationRun, outs: Sequence[Any], arch: str | None, nvcc: str) -> None:
    """Device, backend and versions: the compiler's, and those of the first verified variant's run."""
    run.versions = {"wireup": __version__}
    if arch:
        run.versions["arch"] = arch
    if nvcc:
        run.versions["nvcc"] = nvcc
    for o in sorted(outs, key=lambda o: o.id.endswith(f"/{BASELINE}")):  # a mutant's run first, as before
        if o.outcome is None or not o.outcome.run.environments:
            continue
        name, env = next(iter(o.outcome.run.environments.items()))
        run.backend = name
        run.device = {k: v for k, v in env.device.items() if v not in (None, "")}
        if env.backend_version:
            run.versions["backend"] = env.backend_version
        if env.driver_version:
            run.versions["driver"] = env.driver_version
        if env.runtime_version:
            run.versions["runtime"] = env.runtime_version
        break
