"""The static rules of one check on two cores: a forked child runs part of them over the same model.

After the model is loaded (and, where the rules read it, the wiring resolved), :func:`run_split` forks one
child (``os.fork``: it shares the model, nothing is rebuilt or sent to it). The selected rules are split
into two lists balanced by their measured cost (:data:`COST_MS`); the child runs one, the parent the
other, and the child sends back what its rules found as plain data (tuples of strings and numbers,
pickled, over a pipe). The parent then hands the engine one outcome per rule, in the order of the rule
list, so the result is the one a sequential run gives, byte for byte, in every output format.

Only rules of :data:`~audit.rules._base.CONTRACT_ONLY` categories go to the child: they read the
contracts, the configuration and the recorded probes, and nothing a fact provider gathers (a build, the
evidence), which stay in one process. What the child's rules recorded that the check cache keys a result
by comes back too: the probes they asked and the contract lines they located.

The child never outlives the parent and never hangs it: it asks the kernel for SIGKILL when its parent
dies (Linux), ends with ``os._exit`` (no teardown, no flush of the parent's buffers), and the parent
waits for its answer a bounded time (:func:`wait_bound`) after finishing its own rules. Whatever goes
wrong with the child (it raised, was killed, sent something unreadable, took too long) the parent kills
and reaps it and runs the child's rules itself: findings are never lost, and an error a rule raises is
raised by the parent as in a sequential run.

When: :func:`jobs_for` (``--jobs``, then ``WIREUP_JOBS``, then automatic: fork exists, this process runs
no other thread, the project has at least :data:`AUTO_MIN_STEPS` schedule steps, and a CPU this process
may use is idle right now).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import UsageError
from ..findings import Finding, Severity
from ._base import CONTRACT_ONLY, CheckContext, Rule

#: ``WIREUP_JOBS``: how many processes run the static rules of a check (1: this one alone).
JOBS_ENV = "WIREUP_JOBS"
#: Below this many schedule steps (launches and zero steps) a split is not worth its CPU (docs/benchmarks.md
#: section 2: at 1,400 steps it took 0.02 s off 0.31 s of wall time for 10 % more CPU; at 4,200, 0.06 s
#: off 0.65 s).
AUTO_MIN_STEPS = 3000
#: The parent waits this long for the child's answer after its own rules are done, plus
#: :data:`WAIT_FACTOR` times the time its own rules took (the two halves cost about the same).
WAIT_MIN_S = 10.0
WAIT_FACTOR = 4.0

#: What each rule costs on the 10,000-kernel synthetic project after a dim edit, in ms, with the wiring
#: resolved beforehand (``benchmarks/rule_costs.py``); a rule not listed counts :data:`DEFAULT_COST_MS`.
#: Only the balance of the split depends on these numbers, never a finding.
COST_MS: dict[str, float] = {
    "TAIL_UNREACHABLE": 103.1,
    "SHAPE_MISMATCH": 100.5,
    "LAUNCH_GEOMETRY": 59.3,
    "INVARIANT_UNKNOWN_NODE": 49.5,
    "SCALAR_RANGE": 48.9,
    "UNKNOWN_PARAM": 41.4,
    "DOMAIN_MISMATCH": 38.7,
    "SAVED_FOR_BACKWARD": 37.5,
    "CONSUMED_BEFORE_PRODUCED": 33.6,
    "UNKNOWN_DIM": 29.9,
    "UNBOUND_PARAM": 27.9,
    "DUPLICATE_NAME": 27.7,
    "DTYPE_MISMATCH": 26.8,
    "ISV_ACCESS_DECLARED": 26.7,
    "UNKNOWN_BUFFER": 24.7,
    "NAME_NOT_IDENTIFIER": 24.5,
    "UNKNOWN_SLOT": 24.4,
    "SOURCE_UNSAFE": 23.3,
    "PARTIAL_WITHOUT_REDUCER": 23.0,
    "HOST_READ_IN_GRAPH": 22.6,
    "SCHEDULE_CYCLE": 19.6,
    "INVARIANT_VIOLATED": 18.6,
    "ALIAS_UNDECLARED": 16.5,
    "VIEW_SIZE_MISMATCH": 14.4,
    "DIM_BINDING_CONFLICT": 12.0,
    "ISV_READ_BEFORE_WRITE": 9.6,
    "PATH_OUTSIDE_ROOT": 8.2,
    "WRITE_RANGE_OUTSIDE": 7.8,
    "NAME_NOT_NORMALIZED": 7.0,
    "VIEW_OVERLAP": 7.0,
    "VIEW_OUT_OF_BOUNDS": 6.9,
    "REQUIRES_VIOLATED": 6.4,
    "SOURCE_MISSING": 6.3,
    "ACCUMULATOR_NOT_ZEROED": 5.8,
    "UNKNOWN_KERNEL": 4.9,
    "DEAD_KERNEL": 3.7,
    "ISV_MULTIPLE_WRITERS": 2.9,
    "RESET_POLICY": 2.3,
    "ALIAS_MISMATCH": 1.3,
    "ALIAS_NOT_BOUND": 1.3,
    "RESET_CONTRADICTS_ROLE": 1.1,
    "SLOT_INDEX": 1.0,
    "DIVISOR_RESET_ZERO": 0.7,
    "SLOT_GAP": 0.6,
    "DIM_RANGE": 0.1,
    "EQUIVALENCE_OUTPUTS": 0.0,
}
DEFAULT_COST_MS = 10.0
#: The work the parent does beside its rules (the check cache digesting the parsed values), same scale.
ALONGSIDE_MS = 45.0

#: Rules that read the wiring (:attr:`CheckContext.wiring`): where both halves hold one, it is resolved
#: once before the fork rather than once in each process.
READS_WIRING: frozenset[str] = frozenset(
    {
        "ACCUMULATOR_NOT_ZEROED",
        "ALIAS_UNDECLARED",
        "CONSUMED_BEFORE_PRODUCED",
        "DEAD_KERNEL",
        "DIM_BINDING_CONFLICT",
        "DOMAIN_MISMATCH",
        "DTYPE_MISMATCH",
        "EQUIVALENCE_OUTPUTS",
        "INVARIANT_UNKNOWN_NODE",
        "INVARIANT_VIOLATED",
        "ISV_MULTIPLE_WRITERS",
        "ISV_READ_BEFORE_WRITE",
        "LAUNCH_GEOMETRY",
        "PARTIAL_WITHOUT_REDUCER",
        "REQUIRES_VIOLATED",
        "SAVED_FOR_BACKWARD",
        "SCALAR_RANGE",
        "SCHEDULE_CYCLE",
        "SHAPE_MISMATCH",
        "TAIL_UNREACHABLE",
        "VIEW_SIZE_MISMATCH",
    }
)

# what the engine gets back per rule: (findings, None) where it ran, (None, reason) where it did not
Outcome = tuple[list[Finding] | None, str | None]


def requested_jobs(requested: int | None = None) -> int | None:
    """The number of processes asked for: ``requested`` (``--jobs``) where given, else :data:`JOBS_ENV`
    where set, else None (automatic); :class:`UsageError` for a value of the variable that is no whole
    number of at least 1."""
    if requested is not None:
        return requested
    raw = os.environ.get(JOBS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise UsageError(f'The environment variable {JOBS_ENV} must be a whole number of at least 1 (1 runs the rules in one process); found "{raw}".')
    return int(raw)


def jobs_for(ctx: CheckContext, requested: int | None) -> int:
    """How many processes run the rules: 1 or 2.

    ``requested`` (``--jobs``) wins, then :data:`JOBS_ENV`; 1 asks for a sequential run, 2 or more for
    a split wherever ``os.fork`` exists. Unset, the split is used where fork exists, this process runs no
    other thread, the project is large (:data:`AUTO_MIN_STEPS`) and one of the CPUs it may use is idle
    (fewer threads running on the machine than usable CPUs)."""
    requested = requested_jobs(requested)
    if not hasattr(os, "fork"):
        return 1
    if requested is not None:
        return 1 if requested <= 1 else 2
    if _threads() > 1:
        return 1  # a process with other threads is not forked unasked (a lock one of them holds stays held)
    if sum(len(s.steps) for s in ctx.cs.schedules) < AUTO_MIN_STEPS:
        return 1
    cpus = _usable_cpus()
    # a child only helps on a CPU nobody else is using: with the other one busy the two halves and the
    # other work share the CPUs, and the split was measured slower (docs/benchmarks.md section 2)
    return 2 if cpus >= 2 and _running() < cpus else 1


def _threads() -> int:
    threading = sys.modules.get("threading")  # not imported: this process never started a thread
    return threading.active_count() if threading is not None else 1


def _running(loadavg: str = "/proc/loadavg") -> int:
    """Threads running or ready to run on the machine now, this one included (Linux ``/proc/loadavg``);
    1 where that cannot be read (then only the CPU count decides)."""
    try:
        with open(loadavg, "rb") as fh:
            return max(1, int(fh.read().split()[3].split(b"/")[0]))
    except (OSError, ValueError, IndexError):
        return 1


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # a process pinned to one core gains nothing from a child
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def split(rules: Sequence[Rule], parent_ms: float = 0.0) -> tuple[list[Rule], list[Rule]]:
    """(the child's rules, the parent's), each in the order of ``rules``: the rules of contract-only
    categories shared out greedily, costliest first, to the lighter side; every other rule to the parent,
    which also has ``parent_ms`` of other work."""
    child: set[str] = set()
    loads = [0.0, parent_ms]  # child, parent
    eligible = [r for r in rules if r.category in CONTRACT_ONLY]
    for r in rules:
        if r.category not in CONTRACT_ONLY:
            loads[1] += COST_MS.get(r.id, DEFAULT_COST_MS)
    for r in sorted(eligible, key=lambda r: -COST_MS.get(r.id, DEFAULT_COST_MS)):
        side = 0 if loads[0] <= loads[1] else 1
        loads[side] += COST_MS.get(r.id, DEFAULT_COST_MS)
        if side == 0:
            child.add(r.id)
    return [r for r in rules if r.id in child], [r for r in rules if r.id not in child]


def wait_bound(own_s: float) -> float:
    """Seconds the parent waits for the child once its own rules, which took ``own_s``, are done."""
    return WAIT_MIN_S + WAIT_FACTOR * own_s


def run_split(
    ctx: CheckContext,
    rules: Sequence[Rule],
    run_one: Callable[[CheckContext, Rule], Outcome],
    alongside: Callable[[], None] | None = None,
) -> list[Outcome]:
    """The outcome of every rule of ``rules``, in their order, part of them run by a forked child (see
    the module); exactly what ``[run_one(ctx, r) for r in rules]`` gives. ``alongside`` (the caller's
    own work, which reads no rule's outcome) is called in the parent while the child runs its rules."""
    child_rules, parent_rules = split(rules, ALONGSIDE_MS if alongside is not None else 0.0)
    if not child_rules or not parent_rules:
        return _sequential(ctx, rules, run_one, alongside)
    if READS_WIRING.intersection(r.id for r in child_rules) and READS_WIRING.intersection(r.id for r in parent_rules):
        ctx.wiring  # noqa: B018  (resolved once, shared by both processes)
    import pickle  # noqa: F401  (imported before the fork, for both processes)
    import select  # noqa: F401
    import struct  # noqa: F401

    probes_at_fork = len(ctx.probes)
    base = list(ctx.probes.items())
    asked_at_fork = {path: len(src.asked) for path, src in ctx.sources.items()}
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice (the child never flushes)
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # None, closed or broken: nothing to write either
            pass
    try:
        read_fd, write_fd = os.pipe()
    except OSError:  # out of file descriptors: one process it is
        return _sequential(ctx, rules, run_one, alongside)
    try:
        pid = os.fork()
    except OSError:  # no process or memory to spare (EAGAIN, ENOMEM): one process it is
        os.close(read_fd)
        os.close(write_fd)
        return _sequential(ctx, rules, run_one, alongside)
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _child(ctx, child_rules, run_one, write_fd, probes_at_fork, asked_at_fork)
    os.close(write_fd)
    payload = None
    reaped = False
    try:
        outcomes: dict[str, Outcome] = {}
        probes: dict[str, list[tuple[tuple[str, str], Any]]] = {}
        start = time.perf_counter()
        if alongside is not None:
            alongside()
        _run_here(ctx, parent_rules, run_one, outcomes, probes)
        answer = _receive(read_fd, wait_bound(time.perf_counter() - start))
        payload = _decode(answer) if answer is not None else None
        if payload is None:
            # the child failed (raised, killed, hung, sent garbage): its rules are run here, nothing is lost;
            # they ask the probes afresh, as in the child, so that the probes keep a sequential run's order
            reaped = True
            _reap(pid, kill=True)
            own = dict(ctx.probes)
            ctx.probes.clear()
            ctx.probes.update(base)
            _run_here(ctx, child_rules, run_one, outcomes, probes)
            for key, value in own.items():
                ctx.probes.setdefault(key, value)
        else:
            child_outcomes, child_probes, asked = payload
            for r, (plain, reason), asked_probes in zip(child_rules, child_outcomes, child_probes):
                outcomes[r.id] = ([_finding(t) for t in plain] if plain is not None else None, reason)
                probes[r.id] = asked_probes
            for path, items in asked.items():
                src = ctx.sources.get(path)
                if src is not None:
                    for key, line in items:
                        src.asked.setdefault(key, line)
        # the probes in the order a sequential run asks them first (what the check cache stores)
        merged = dict(base)
        for r in rules:
            for key, answer_ in probes.get(r.id, ()):
                merged.setdefault(key, answer_)
        merged.update((k, v) for k, v in ctx.probes.items() if k not in merged)
        ctx.probes.clear()
        ctx.probes.update(merged)
        return [outcomes[r.id] for r in rules]
    finally:
        os.close(read_fd)
        # a child that answered has closed the pipe and is ending (its exit overlapped the merge above);
        # any other (the parent's own rules raised, it was interrupted) is killed: it goes with the parent
        if not reaped:  # (never twice: the pid may be another process's by then)
            _reap(pid, kill=payload is None)


def _run_here(
    ctx: CheckContext,
    rules: Sequence[Rule],
    run_one: Callable[[CheckContext, Rule], Outcome],
    outcomes: dict[str, Outcome],
    probes: dict[str, list[tuple[tuple[str, str], Any]]],
) -> None:
    """Run ``rules`` in this process: each one's outcome, and the probes it asked first, by rule ID."""
    for r in rules:
        before = len(ctx.probes)
        outcomes[r.id] = run_one(ctx, r)
        probes[r.id] = list(ctx.probes.items())[before:] if len(ctx.probes) > before else []


def _sequential(
    ctx: CheckContext, rules: Sequence[Rule], run_one: Callable[[CheckContext, Rule], Outcome], alongside: Callable[[], None] | None
) -> list[Outcome]:
    if alongside is not None:
        alongside()
    return [run_one(ctx, r) for r in rules]


def _child(
    ctx: CheckContext,
    rules: Sequence[Rule],
    run_one: Callable[[CheckContext, Rule], Outcome],
    fd: int,
    probes_at_fork: int,
    asked_at_fork: dict[str, int],
) -> None:
    """Run ``rules``, write the length-prefixed pickle of what they found to ``fd``, and end the process."""
    code = 1
    try:
        parent = os.getppid()
        _die_with_parent()
        if os.getppid() != parent:
            os._exit(1)
        outcomes: list[tuple[list[tuple] | None, str | None]] = []
        probes: list[list[tuple[tuple[str, str], Any]]] = []
        for r in rules:
            before = len(ctx.probes)
            found, reason = run_one(ctx, r)
            outcomes.append(([_plain(f) for f in found] if found is not None else None, reason))
            probes.append(list(ctx.probes.items())[before:] if len(ctx.probes) > before else [])
        asked = {
            path: list(src.asked.items())[asked_at_fork.get(path, 0) :]
            for path, src in ctx.sources.items()
            if len(src.asked) > asked_at_fork.get(path, 0)
        }
        import pickle
        import struct

        data = pickle.dumps((outcomes, probes, asked), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(struct.pack("<Q", len(data)) + data)
        while view:
            view = view[os.write(fd, view) :]
        os.close(fd)  # the parent reads to the end now, not once this process has been torn down
        code = 0
    except BaseException:  # noqa: BLE001  (anything: the parent runs these rules itself)
        code = 1
    finally:
        os._exit(code)


def _die_with_parent() -> None:
    """SIGKILL this process when its parent dies (Linux ``PR_SET_PDEATHSIG``); elsewhere nothing: the
    child only runs rules and ends, and a write to a pipe nobody reads ends it too."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _receive(fd: int, bound_s: float) -> bytes | None:
    """Everything the child writes to ``fd`` until it closes it, or None after ``bound_s`` seconds."""
    import select

    deadline = time.monotonic() + bound_s
    chunks = []
    poller = select.poll() if hasattr(select, "poll") else None  # select() refuses descriptors past 1023
    if poller is not None:
        poller.register(fd, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if poller is not None:
            ready = poller.poll(max(1, int(left * 1000)))
        else:
            ready = select.select([fd], [], [], left)[0]
        if not ready:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _reap(pid: int, kill: bool) -> int | None:
    """Wait for the child (SIGKILLed first when ``kill``); its exit code, or None where it was killed."""
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else None


def _decode(answer: bytes) -> Any:
    import pickle
    import struct

    if len(answer) < 8:
        return None
    (size,) = struct.unpack("<Q", answer[:8])
    if size != len(answer) - 8:
        return None
    try:
        return pickle.loads(answer[8:])  # noqa: S301  (our own child's data, over our own pipe)
    except Exception:  # noqa: BLE001
        return None


def _plain(f: Finding) -> tuple:
    return (f.rule, f.severity.value, f.message, f.file, f.line, f.subject, f.key, f.category)


def _finding(t: tuple) -> Finding:
    rule, severity, message, file, line, subject, key, category = t
    return Finding(rule, Severity(severity), message, file, line, subject, key, category)
