"""The rules of a check split over a forked child (audit.rules._parallel) give exactly what one process gives.

Every output format byte for byte, the not-run reasons, and what the check cache stores (the probes in the
order they were first asked, the contract lines the rules located), on the shipped contracts, a synthetic
project with mistakes and every rule fixture; through the command line too. Whatever happens to the child
(it raises, is killed, hangs, exits without an answer) the parent runs its rules itself and nothing is
lost; an error of a rule surfaces as in a sequential run; the child is always reaped, and dies with its
parent. Nothing here is timed: the figures are in docs/benchmarks.md section 2.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from audit.api import check
from audit.config import Config, load_config
from audit.errors import UsageError
from audit.printers import FORMATS, render
from audit.rules import CONTRACT_ONLY, REGISTRY, RuleNotRun, select_rules
from audit.rules import _parallel as par

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "tests" / "data" / "rules"
sys.path.insert(0, str(REPO / "benchmarks"))
from synth_contracts import write_project  # noqa: E402

STATIC = list(CONTRACT_ONLY)
FIXTURES = sorted(f"{p.parent.name}/{p.name}" for p in RULES.glob("*/*") if p.is_dir() and (p / "contracts").is_dir())

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the split check needs os.fork (POSIX)")


def halves():
    """(the child's rules, the parent's) of a static check (whose parent digests the parsed values beside
    its rules): SUPPRESSION_UNUSED runs after both."""
    return par.split([r for r in select_rules(STATIC) if r.id != "SUPPRESSION_UNUSED"], par.ALONGSIDE_MS)


def config(root: Path, cache: Path) -> Config:
    return dataclasses.replace(load_config(root), cache=str(cache))


class Spy:
    """Counts the runs that used a child's answer and those that fell back to the parent; records the
    child's pid (to prove it was reaped)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.answers = 0
        self.here = 0  # rule lists run in the parent: its own half, and the child's where it failed
        self.pids: list[int] = []
        decode, fork, fallback = par._decode, os.fork, par._run_here

        def _decode(answer: bytes):
            out = decode(answer)
            self.answers += out is not None
            return out

        def _fork() -> int:
            pid = fork()
            if pid:
                self.pids.append(pid)
            return pid

        def _run_here(*a, **k):
            self.here += 1
            return fallback(*a, **k)

        monkeypatch.setattr(par, "_decode", _decode)
        monkeypatch.setattr(par.os, "fork", _fork)
        monkeypatch.setattr(par, "_run_here", _run_here)

    @property
    def fallbacks(self) -> int:
        return self.here - len(self.pids)

    def reaped(self) -> bool:
        for pid in self.pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue  # not our child any more: reaped
            return False
        return True


def _plain_entry(path: Path) -> dict:
    data = json.loads(path.read_text())
    data.pop("key", None)
    if "lines" in data:
        data["lines"] = sorted((rel, sha, sorted(map(json.dumps, asked))) for rel, sha, asked in data["lines"])
    return data


def stored(cache: Path) -> dict:
    """What the check cache stored for the run: the entry by text, the entry by value and the index of
    values (their keys aside: they name the cache folder's configuration)."""
    (entry,) = sorted((cache / "check").glob("*.json"))
    data = _plain_entry(entry)
    data["by value"] = sorted((json.dumps(_plain_entry(p), sort_keys=True) for p in (cache / "check" / "values").glob("*")))
    return data


def run_both(root: Path, tmp_path: Path, select: list[str], monkeypatch: pytest.MonkeyPatch, cache: bool = True):
    """(sequential, split) outcomes of ``wireup check`` on ``root``: every output format, or the error."""
    spy = Spy(monkeypatch)
    out = []
    for jobs in (1, 2):
        folder = tmp_path / f"cache{jobs}"
        shutil.rmtree(folder, ignore_errors=True)
        try:
            result = check(config=config(root, folder), select=select, jobs=jobs)
        except Exception as exc:  # noqa: BLE001  (a load error: both ways the same)
            out.append(("error", type(exc).__name__, str(exc)))
            continue
        entry = stored(folder) if cache and (folder / "check").is_dir() else None
        out.append(({fmt: render(result, fmt) for fmt in FORMATS}, result.not_run, entry))
    assert spy.reaped()
    return out[0], out[1], spy


def test_the_shipped_contracts_split_equal_sequential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    seq, split, spy = run_both(REPO, tmp_path, STATIC, monkeypatch)
    assert split == seq
    assert spy.answers == 1 and spy.fallbacks == 0
    assert seq[2]["probes"], "the shipped check asks probes: their merge is tested"


def test_a_mixed_selection_keeps_the_fact_rules_in_the_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # the layout rules read a fact (the fingerprint): they run in the parent, the contract-only rules are shared
    rules = select_rules(["schema", "layout"])
    child, parent = par.split(rules)
    assert child and all(r.category in CONTRACT_ONLY for r in child)
    assert {r.id for r in rules if r.category == "layout"} <= {r.id for r in parent}
    seq, split_, spy = run_both(REPO, tmp_path, ["schema", "layout"], monkeypatch, cache=False)
    assert split_ == seq and spy.answers == 1


@pytest.fixture
def mistaken(tmp_path: Path) -> Path:
    """A synthetic project with mistakes that different rules find, in several files."""
    root = tmp_path / "p"
    write_project(100, root)
    for m, (old, new) in enumerate(
        [
            ('shape = ["B", "D"], role = "in"', 'shape = ["B", "H"], role = "in"'),  # SHAPE_MISMATCH
            ('kind = "scalar", dtype = "i32", value = "B"', 'kind = "scalar", dtype = "i32", value = "B * Q"'),  # UNKNOWN_DIM
            ('dtype = "f32"', 'dtype = "f16"'),  # DTYPE_MISMATCH
        ]
    ):
        module = root / "contracts" / "modules" / f"m{m + 1:05d}.toml"
        text = module.read_text(encoding="utf-8")
        assert old in text
        module.write_text(text.replace(old, new, 1), encoding="utf-8")
    schedules = root / "contracts" / "schedules.toml"
    text = schedules.read_text(encoding="utf-8").replace('x = "m00004_x"', 'x = "m00004_nothing"', 1)  # UNKNOWN_BUFFER
    text = text.replace('launch = "m00005_mix3"', 'launch = "m00005_nothing"', 1)  # UNKNOWN_KERNEL, DEAD_KERNEL
    schedules.write_text(text, encoding="utf-8")
    return root


def test_a_synthetic_project_with_mistakes_split_equal_sequential(mistaken: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    seq, split, spy = run_both(mistaken, tmp_path, STATIC, monkeypatch)
    assert split == seq and spy.answers == 1
    found = {f["rule"] for f in json.loads(seq[0]["json"])["findings"]}
    child, _ = halves()
    assert found & {r.id for r in child} and found - {r.id for r in child}, "findings from both halves"
    assert seq[2]["lines"], "the rules located lines: their merge is tested"


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_rule_fixture_split_equal_sequential(fixture: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "project"
    shutil.copytree(RULES / fixture, root, ignore=shutil.ignore_patterns(".wireup-cache"))
    seq, split, _ = run_both(root, tmp_path, STATIC, monkeypatch)
    assert split == seq


def _cli(root: Path, jobs: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), par.JOBS_ENV: jobs, "WIREUP_CACHE": str(root / f".cache-{jobs}")}
    cmd = [sys.executable, "-m", "audit", "check", "--root", str(root), "--select", ",".join(STATIC), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_command_line_prints_the_same_both_ways(fmt: str, mistaken: Path):
    seq, split = _cli(mistaken, "1", "--format", fmt), _cli(mistaken, "2", "--format", fmt)
    assert (split.returncode, split.stdout, split.stderr) == (seq.returncode, seq.stdout, seq.stderr)
    assert seq.returncode == 1 and seq.stdout


def test_jobs_flag_and_variable_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "p"
    write_project(10, root)
    bad = _cli(root, "two")
    assert bad.returncode == 2
    assert bad.stderr.strip() == 'error: The environment variable WIREUP_JOBS must be a whole number of at least 1 (1 runs the rules in one process); found "two".'
    zero = _cli(root, "1", "--jobs", "0")
    assert zero.returncode == 2 and zero.stderr.strip() == "error: --jobs must be at least 1, found 0."
    assert _cli(root, "0").returncode == 2
    monkeypatch.setenv(par.JOBS_ENV, "-1")
    with pytest.raises(UsageError):
        par.requested_jobs()
    assert par.requested_jobs(3) == 3  # the flag wins over the variable


def test_when_the_rules_are_split(monkeypatch: pytest.MonkeyPatch, mistaken: Path):
    from audit.api import load_project
    from audit.rules import CheckContext

    _, cs = load_project(mistaken)
    ctx = CheckContext(cs)
    monkeypatch.delenv(par.JOBS_ENV, raising=False)
    monkeypatch.setattr(par, "_usable_cpus", lambda: 2)
    monkeypatch.setattr(par, "_threads", lambda: 1)  # (pytest may run a thread of its own)
    monkeypatch.setattr(par, "_running", lambda: 1)  # (the machine may be busy)
    assert sum(len(s.steps) for s in cs.schedules) < par.AUTO_MIN_STEPS
    assert par.jobs_for(ctx, None) == 1  # small: not worth a fork
    monkeypatch.setattr(par, "AUTO_MIN_STEPS", 1)
    assert par.jobs_for(ctx, None) == 2
    assert par.jobs_for(ctx, 1) == 1
    monkeypatch.setenv(par.JOBS_ENV, "1")
    assert par.jobs_for(ctx, None) == 1
    assert par.jobs_for(ctx, 4) == 2  # the flag wins; one child at most
    monkeypatch.delenv(par.JOBS_ENV)
    monkeypatch.setattr(par, "_threads", lambda: 2)
    assert par.jobs_for(ctx, None) == 1  # another thread might hold a lock the child would need
    assert par.jobs_for(ctx, 2) == 2  # asked for: the caller knows
    monkeypatch.setattr(par, "_threads", lambda: 1)
    monkeypatch.setattr(par, "_running", lambda: 2)
    assert par.jobs_for(ctx, None) == 1  # the other CPU is busy: a child would only share it
    assert par.jobs_for(ctx, 2) == 2
    monkeypatch.setattr(par, "_running", lambda: 1)
    monkeypatch.setattr(par, "_usable_cpus", lambda: 1)
    assert par.jobs_for(ctx, None) == 1  # one usable CPU (a process pinned with taskset)
    monkeypatch.delattr(par.os, "fork")
    assert par.jobs_for(ctx, 2) == 1


def test_the_split_is_balanced_and_keeps_the_order():
    rules = select_rules(STATIC)
    child, parent = par.split(rules)
    assert sorted(r.id for r in child + parent) == sorted(r.id for r in rules)
    order = [r.id for r in rules]
    for side in (child, parent):
        ids = [r.id for r in side]
        assert ids == sorted(ids, key=order.index)
    cost = lambda side: sum(par.COST_MS.get(r.id, par.DEFAULT_COST_MS) for r in side)  # noqa: E731
    assert abs(cost(child) - cost(parent)) <= max(par.COST_MS.values())


def test_running_threads_are_read(tmp_path: Path):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("1.94 2.20 1.54 3/92 22071\n")
    assert par._running(str(loadavg)) == 3
    loadavg.write_text("garbage\n")
    assert par._running(str(loadavg)) == 1  # unreadable: the CPU count alone decides
    assert par._running(str(tmp_path / "missing")) == 1


def test_threads_are_counted():
    import threading

    started, stop = threading.Event(), threading.Event()
    t = threading.Thread(target=lambda: (started.set(), stop.wait()))
    before = par._threads()
    t.start()
    started.wait()
    try:
        assert par._threads() == before + 1
    finally:
        stop.set()
        t.join()


def test_every_contract_only_rule_has_a_measured_cost():
    # a new rule gets a figure from benchmarks/rule_costs.py, or the split is balanced by a guess
    rules = {r.id for r in select_rules(STATIC) if r.id != "SUPPRESSION_UNUSED"}
    assert rules <= set(par.COST_MS), f"no cost for {sorted(rules - set(par.COST_MS))}"
    assert par.READS_WIRING <= rules


# -- the child fails: the parent runs its rules -------------------------------------------------------


def _sabotage(monkeypatch: pytest.MonkeyPatch, what) -> str:
    """Make the costliest rule of the child's half call ``what`` when it runs in a child process."""
    child, _ = halves()
    victim = max(child, key=lambda r: par.COST_MS.get(r.id, 0.0))
    parent_pid = os.getpid()
    original = victim.check

    def check_(ctx):
        if os.getpid() != parent_pid:
            what()
        return original(ctx)

    monkeypatch.setitem(REGISTRY, victim.id, dataclasses.replace(victim, check=check_))
    return victim.id


def _raise() -> None:
    raise RuntimeError("broken in the child")


def _sleep() -> None:
    time.sleep(3600)


@pytest.mark.parametrize(
    "what",
    {
        "raises": _raise,
        "is killed": lambda: os.kill(os.getpid(), signal.SIGKILL),
        "exits without an answer": lambda: os._exit(0),
        "interrupted": lambda: (_ for _ in ()).throw(KeyboardInterrupt()),
        "hangs": _sleep,
    }.items(),
    ids=lambda x: x[0] if isinstance(x, tuple) else x,
)
def test_a_failing_child_loses_nothing(what, mistaken: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    name, fn = what
    reference, _, _ = run_both(mistaken, tmp_path / "ref", STATIC, monkeypatch)
    _sabotage(monkeypatch, fn)
    if name == "hangs":
        monkeypatch.setattr(par, "WAIT_MIN_S", 0.5)
        monkeypatch.setattr(par, "WAIT_FACTOR", 0.0)
    seq, split, spy = run_both(mistaken, tmp_path, STATIC, monkeypatch)
    assert seq == reference  # the sabotage does nothing in the parent
    assert split == reference
    assert spy.answers == 0 and spy.fallbacks == 1 and spy.reaped()


def test_an_error_of_a_rule_surfaces_as_in_one_process(mistaken: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    child, _ = halves()
    victim = child[0]

    def broken(ctx):
        raise RuntimeError("a bug in a rule")

    monkeypatch.setitem(REGISTRY, victim.id, dataclasses.replace(victim, check=broken))
    seq, split, spy = run_both(mistaken, tmp_path, STATIC, monkeypatch, cache=False)
    assert seq == split == ("error", "RuntimeError", "a bug in a rule")
    assert spy.fallbacks == 1 and spy.reaped()


def test_an_error_in_the_parent_takes_the_child_with_it(mistaken: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _, parent = halves()
    victim = parent[-1]

    def broken(ctx):
        raise RuntimeError("a bug in a rule")

    _sabotage(monkeypatch, _sleep)  # the child would run for an hour
    monkeypatch.setitem(REGISTRY, victim.id, dataclasses.replace(victim, check=broken))
    spy = Spy(monkeypatch)
    with pytest.raises(RuntimeError, match="a bug in a rule"):
        check(config=config(mistaken, tmp_path / "c"), select=STATIC, jobs=2)
    assert len(spy.pids) == 1 and spy.reaped()


def test_a_rule_not_run_in_the_child_is_reported_the_same(mistaken: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    child, _ = halves()
    victim = child[0]

    def not_run(ctx):
        raise RuleNotRun("nothing to look at here")

    monkeypatch.setitem(REGISTRY, victim.id, dataclasses.replace(victim, check=not_run))
    seq, split, spy = run_both(mistaken, tmp_path, STATIC, monkeypatch)
    assert split == seq and spy.answers == 1
    assert [(n.rule, n.reason) for n in seq[1]] == [(victim.id, "nothing to look at here")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_the_child_dies_with_its_parent(mistaken: Path, tmp_path: Path):
    """A parent killed outright (SIGKILL) takes its child with it."""
    pidfile = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import dataclasses, os, time
        from pathlib import Path
        from audit.api import check
        from audit.config import load_config
        from audit.rules import REGISTRY, select_rules, _parallel as par
        child, _ = par.split([r for r in select_rules({STATIC!r}) if r.id != 'SUPPRESSION_UNUSED'], par.ALONGSIDE_MS)
        me = os.getpid()
        def hang(ctx):
            if os.getpid() != me:
                Path({str(pidfile)!r}).write_text(str(os.getpid()))
                time.sleep(3600)
            return []
        REGISTRY[child[0].id] = dataclasses.replace(child[0], check=hang)
        cfg = dataclasses.replace(load_config(Path({str(mistaken)!r})), cache={str(tmp_path / "c")!r})
        par.WAIT_MIN_S = 3600.0
        check(config=cfg, select={STATIC!r}, jobs=2)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists() or not pidfile.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        child = int(pidfile.read_text())
        os.kill(child, 0)  # alive, asleep in its rule
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30
    while _alive(child):
        assert time.monotonic() < deadline, "the child outlived its parent"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, waiting for init
    except FileNotFoundError:
        return False



def test_the_callers_work_runs_once_in_the_parent(mistaken: Path):
    from audit.api import load_project
    from audit.rules import CheckContext
    from audit.rules._engine import _run_one

    _, cs = load_project(mistaken)
    rules = [r for r in select_rules(STATIC) if r.id != "SUPPRESSION_UNUSED"]
    calls: list[int] = []
    split = par.run_split(CheckContext(cs), rules, _run_one, alongside=lambda: calls.append(os.getpid()))
    assert calls == [os.getpid()]
    assert split == [_run_one(CheckContext(cs), r) for r in rules]


def test_the_default_check_of_the_shipped_repo_split_equal_sequential(monkeypatch: pytest.MonkeyPatch):
    # every category: the build, evidence, launcher and layout rules (and the facts they gather) stay in the
    # parent; the project's own cache folder, so the build is the one the other tests warm
    spy = Spy(monkeypatch)
    seq, split = (check(REPO, jobs=jobs) for jobs in (1, 2))
    assert {fmt: render(split, fmt) for fmt in FORMATS} == {fmt: render(seq, fmt) for fmt in FORMATS}
    assert split.not_run == seq.not_run and split.ran == seq.ran
    assert {"build", "evidence"} <= {REGISTRY[r].category for r in seq.ran + [n.rule for n in seq.not_run]}
    assert spy.answers == 1 and spy.reaped()


def test_no_fork_to_spare_means_one_process(mistaken: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    reference, _, _ = run_both(mistaken, tmp_path / "ref", STATIC, monkeypatch)

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(par.os, "fork", no_fork)
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    folder = tmp_path / "c"
    result = check(config=config(mistaken, folder), select=STATIC, jobs=2)
    assert ({fmt: render(result, fmt) for fmt in FORMATS}, result.not_run, stored(folder)) == reference
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) == fds  # the pipe was closed


def test_the_answer_is_read_past_descriptor_1023(monkeypatch: pytest.MonkeyPatch):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip("this process may not open 1,100 files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    try:
        r, w = os.pipe()
        high_r, high_w = os.dup2(r, 1050), os.dup2(w, 1051)
        os.close(r)
        os.close(w)
        os.write(high_w, b"answer")
        os.close(high_w)
        assert par._receive(high_r, 5.0) == b"answer"
        os.close(high_r)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_closed_or_missing_stdout_does_not_stop_the_split(mistaken: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import io

    reference, _, _ = run_both(mistaken, tmp_path / "ref", STATIC, monkeypatch)
    closed = io.StringIO()
    closed.close()
    for stdout in (closed, None):
        monkeypatch.setattr(sys, "stdout", stdout)
        spy = Spy(monkeypatch)
        folder = tmp_path / f"c{stdout is None}"
        result = check(config=config(mistaken, folder), select=STATIC, jobs=2)
        monkeypatch.undo()
        assert ({fmt: render(result, fmt) for fmt in FORMATS}, result.not_run, stored(folder)) == reference
        assert spy.answers == 1
