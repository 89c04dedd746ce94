"""``wireup check --changed-since REV``: findings about what changed since a git revision, and what
is downstream of it.

What changed is read from git: the files that differ between the merge base of ``REV`` and ``HEAD``
(``git diff REV...``) and the work tree, plus untracked files. Contract files are compared object by
object against the contracts at that merge base (loaded from git, never checked out), so editing one
kernel of a file that declares five selects that one kernel. Kernel sources select the kernels whose
``.cu`` file or included headers changed. From there the data-flow graph (:class:`audit.graph.Wiring`)
gives everything downstream: kernels that read what a changed kernel writes, schedules that launch any
of them, invariants whose paths cross them. A changed buffer also selects the kernels that access it (a
producer's shape can stop matching a changed buffer).

The full check still runs (the rules are fast); only the findings are limited, so a finding on an
untouched kernel upstream does not block a change that cannot have caused it.

>>> result = limit_to_changed(check(Path(".")), Path("."), "origin/main")   # doctest: +SKIP
>>> sorted({f.subject for f in result.findings})                           # doctest: +SKIP
['aux_trunk_backward']
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from .config import Config, load_config
from .errors import ContractError, EnvironmentProblem, UsageError
from .findings import CheckResult
from .git import git_output
from .hashing import contract_hash, include_closure
from .load import load_contracts
from .model import ContractSet


@dataclass
class ChangeSet:
    """What changed since the base revision and what is downstream of it, by name."""

    base: str
    files: list[str] = field(default_factory=list)  # relative to the project root
    changed: set[str] = field(default_factory=set)  # graph nodes (kernel:X, buffer:Y, slot:Z) changed directly
    kernels: set[str] = field(default_factory=set)
    buffers: set[str] = field(default_factory=set)
    slots: set[str] = field(default_factory=set)
    schedules: set[str] = field(default_factory=set)
    invariants: set[str] = field(default_factory=set)
    dims: set[str] = field(default_factory=set)
    isv: bool = False  # the layout's header (total dim, dtype, events) changed
    layout: bool = False  # the layout changed at all (header or a slot), not merely a slot downstream

    @property
    def names(self) -> set[str]:
        return self.kernels | self.buffers | self.slots | self.schedules | self.invariants | self.dims


def changed_files(root: Path, rev: str) -> tuple[str, list[str]]:
    """(merge base of ``rev`` and HEAD, files changed since it incl. work tree and untracked), root-relative."""
    top = git_output(root, "rev-parse", "--show-toplevel")
    if top is None:
        raise UsageError(f'--changed-since needs a git repository, and "{root}" is not inside one.')
    if rev.startswith("-") or git_output(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}") is None:
        raise UsageError(f'--changed-since "{rev}" does not name a commit here; expected a branch, tag or commit (e.g. origin/main, HEAD~1).')
    base = git_output(root, "merge-base", rev, "HEAD")
    if not base:
        raise UsageError(f'--changed-since "{rev}" has no common ancestor with HEAD.')
    diff = git_output(Path(top), "diff", "--name-only", "-z", "--no-renames", base)
    untracked = git_output(Path(top), "ls-files", "-z", "--others", "--exclude-standard")
    if diff is None or untracked is None:
        raise EnvironmentProblem(f'git could not list the files changed since "{rev}".')
    names = [n for n in (diff + "\0" + untracked).split("\0") if n]
    out = []
    root_r = root.resolve()
    for n in sorted(set(names)):
        try:
            out.append((Path(top) / n).resolve().relative_to(root_r).as_posix())
        except ValueError:
            continue  # outside the project root
    return base, out


def _old_contracts(cfg: Config, base: str) -> ContractSet | None:
    """The contracts at ``base``, or None where they cannot be read (then whole files count as changed)."""
    try:
        from .layout.gitrev import contract_texts_at

        texts = contract_texts_at(cfg.root, base, cfg.contracts)
        return load_contracts(cfg.contracts_dir, cfg.root, texts=texts)
    except (ImportError, ContractError, UsageError, EnvironmentProblem):
        return None


def _differs(old_map: dict, new_map: dict) -> tuple[set[str], set[str]]:
    """(names whose definition changed or is new, names that were removed)."""
    changed = {n for n, obj in new_map.items() if n not in old_map or contract_hash(old_map[n]) != contract_hash(obj)}
    return changed, set(old_map) - set(new_map)


def compute_changes(cfg: Config, cs: ContractSet, rev: str) -> ChangeSet:
    """Everything changed since ``rev`` (its merge base with HEAD) and downstream of it."""
    import networkx as nx

    from .graph import Wiring

    base, files = changed_files(cfg.root, rev)
    ch = ChangeSet(rev, files)
    touched = set(files)
    old = _old_contracts(cfg, base)
    removed: set[str] = set()
    if old is not None:
        pairs = (
            (old.kernel_map, cs.kernel_map, ch.kernels), (old.buffer_map, cs.buffer_map, ch.buffers),
            (old.schedule_map, cs.schedule_map, ch.schedules), (old.slot_map, cs.slot_map, ch.slots),
            (old.dim_map, cs.dim_map, ch.dims),
        )  # fmt: skip
        for old_map, new_map, target in pairs:
            c, r = _differs(old_map, new_map)
            target |= c
            removed |= r
        old_inv = {i.name: i for i in old.invariants}
        c, r = _differs(old_inv, {i.name: i for i in cs.invariants})
        ch.invariants |= c
        removed |= r
        if (old.isv is None) != (cs.isv is None) or (
            old.isv is not None and cs.isv is not None
            and (old.isv.total_dim, old.isv.dtype, old.isv.reset_events, old.isv.buffer)
            != (cs.isv.total_dim, cs.isv.dtype, cs.isv.reset_events, cs.isv.buffer)
        ):  # fmt: skip
            ch.isv = True
            ch.slots |= set(cs.slot_map)
    else:  # coarse: every object declared in a changed contract file
        ch.kernels |= {k.name for k in cs.kernels if k.loc.file in touched}
        ch.buffers |= {b.name for b in cs.buffers if b.loc.file in touched}
        ch.schedules |= {s.name for s in cs.schedules if s.loc.file in touched}
        ch.invariants |= {i.name for i in cs.invariants if i.loc.file in touched}
        ch.dims |= {d.name for d in cs.dims if d.loc.file in touched}
        if cs.isv is not None and cs.isv.loc.file in touched:
            ch.isv = True
            ch.slots |= set(cs.slot_map)

    # kernel sources and the headers they include
    include_dirs = [cfg.path(d) for d in cfg.include_dirs]
    root = cfg.root.resolve()
    for k in cs.kernels:
        src = root / k.source
        if not src.is_file():
            continue
        for p in include_closure(src, include_dirs):
            try:
                if p.relative_to(root).as_posix() in touched:
                    ch.kernels.add(k.name)
                    break
            except ValueError:
                continue

    # a changed dim changes every shape written with it
    for b in cs.buffers:
        if any(ch.dims & e.names for e in b.shape):
            ch.buffers.add(b.name)
    for k in cs.kernels:
        exprs = [*k.grid, *k.block, *(e for p in k.tensors for e in p.shape)]
        if any(ch.dims & e.names for e in exprs):
            ch.kernels.add(k.name)

    # whatever names a removed object now refers to nothing: its users are affected
    for s in cs.schedules:
        refs = {st.launch for st in s.steps} | {st.zero for st in s.steps} | {b.buffer for st in s.steps for _, b in st.bind}
        if refs & removed:
            ch.schedules.add(s.name)
    for k in cs.kernels:
        if ({r.slot for r in k.isv_reads} | set(k.isv_writes)) & removed:
            ch.kernels.add(k.name)

    removed_slots = removed & {s.name for s in old.isv.slots} if old is not None and old.isv is not None else set()
    ch.layout = ch.isv or bool(ch.slots) or bool(removed_slots)  # before slots downstream are added below
    w = Wiring(cs)
    g = w.graph
    seeds = {f"kernel:{n}" for n in ch.kernels} | {f"slot:{n}" for n in ch.slots} | {f"buffer:{n}" for n in ch.buffers}
    seeds = {n for n in seeds if n in g}
    ch.changed = set(seeds)
    for b in ch.buffers:  # producers and consumers of a changed buffer
        node = f"buffer:{b}"
        if node in g:
            seeds |= set(g.predecessors(node)) | set(g.successors(node))
    affected = set(seeds)
    for n in seeds:
        affected |= nx.descendants(g, n)
    for node in affected:
        kind, _, name = node.partition(":")
        {"kernel": ch.kernels, "buffer": ch.buffers, "slot": ch.slots}[kind].add(name)

    for sname, accs in w.accesses.items():
        if any((a.kernel in ch.kernels) or (a.buffer in ch.buffers) for a in accs):
            ch.schedules.add(sname)
    for sname, launches in w.launches.items():
        if any(la.step.launch in ch.kernels for la in launches):
            ch.schedules.add(sname)
    for inv in cs.invariants:
        ends = {w.node(n) for n in (*inv.sources, *inv.targets)} - {None}
        reach = set(ends)
        for n in ends:
            reach |= nx.descendants(g, n)
        if reach & affected:
            ch.invariants.add(inv.name)
    return ch


def limit_to_changed(result: CheckResult, root: Path | None, rev: str) -> CheckResult:
    """``result`` with only the findings about what changed since ``rev`` or is downstream of it."""
    cfg = load_config(root)
    cs = load_contracts(cfg.contracts_dir, cfg.root)
    ch = compute_changes(cfg, cs, rev)
    names = ch.names
    touched = set(ch.files)

    def keep(f) -> bool:
        if f.subject and f.subject in names:
            return True
        layout_wide = f.subject == "isv" or (f.category in ("isv", "layout") and f.subject not in cs.slot_map)
        if layout_wide:  # about the layout as a whole
            return ch.layout
        return not f.subject and f.file in touched

    kept = [f for f in result.findings if keep(f)]
    subjects = {rule: [s for s in subs if s in names or (s == "isv" and ch.layout)] for rule, subs in result.subjects.items()}
    print(
        f"wireup check --changed-since {rev}: {len(ch.files)} changed file(s); checking {len(ch.kernels)} kernel(s), "
        f"{len(ch.schedules)} schedule(s) and {len(ch.invariants)} invariant(s) changed or downstream "
        f"({len(result.findings) - len(kept)} other finding(s) left out).",
        file=sys.stderr,
    )
    return CheckResult(findings=kept, ran=list(result.ran), not_run=list(result.not_run), subjects=subjects)
