"""Which steps of a chain of schedules must wait for which: the dependency graph the contracts prove.

A schedule is a list of steps on one stream. Two steps conflict when one of them writes something the
other reads or writes: a buffer (a view or slice counts as its whole buffer), or an ISV slot. Keeping
every conflicting pair in schedule order, and nothing else, gives a graph whose every topological order
computes what the serial schedule computes — *if* the contracts declare every access, which
``wireup verify`` checks (outputs beyond the declared ones, guard bands, undeclared ISV writes) and which
a replay of this graph on several streams checks once more.

>>> deps = step_dependencies(Wiring(cs), ["aux_heads_forward", "aux_heads_backward_fused"])  # doctest: +SKIP
>>> plan = stream_plan(deps)                                                                 # doctest: +SKIP

Everything here is static: no GPU. ``benchmarks/gpu_chain_vs_torch.py`` captures the plan into one CUDA
graph with fork/join events and checks that graph's results against torch in the same run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import Wiring


@dataclass(frozen=True, slots=True)
class StepNode:
    """One step of the chain: its schedule, its index there, a label, and what it touches."""

    schedule: str
    step: int
    label: str  # the kernel, or "zero <buffer>"
    reads: frozenset[str]  # "buffer:NAME" / "slot:NAME"
    writes: frozenset[str]


def chain_steps(wiring: Wiring, schedules: Sequence[str]) -> list[StepNode]:
    """Every step of ``schedules`` in order (the schedules run one after another), with the buffers and
    ISV slots each reads and writes, from the resolved launches."""
    out: list[StepNode] = []
    for sname in schedules:
        sched = wiring.cs.schedule_map.get(sname)
        if sched is None:
            raise KeyError(sname)
        reads: dict[int, set[str]] = {}
        writes: dict[int, set[str]] = {}
        for a in wiring.accesses.get(sname, ()):
            if a.reads:
                reads.setdefault(a.step, set()).add(f"buffer:{a.buffer}")
            if a.writes:
                writes.setdefault(a.step, set()).add(f"buffer:{a.buffer}")
        for index, _kernel, slot, _previous in wiring.slot_reads.get(sname, ()):
            reads.setdefault(index, set()).add(f"slot:{slot}")
        for index, _kernel, slot in wiring.slot_writes.get(sname, ()):
            writes.setdefault(index, set()).add(f"slot:{slot}")
        for step in sched.steps:
            label = f"zero {step.zero}" if step.zero else (step.launch or "?")
            out.append(StepNode(sname, step.index, label, frozenset(reads.get(step.index, ())),
                                frozenset(writes.get(step.index, ()))))
    return out


def step_dependencies(steps: Sequence[StepNode]) -> list[tuple[int, ...]]:
    """For each step, the earlier steps it must wait for, transitively reduced (ascending indices).

    Step j waits for step i < j when i writes what j reads or writes (read after write, write after
    write), or i reads what j writes (write after read)."""
    direct: list[set[int]] = []
    last_write: dict[str, int] = {}
    readers_since: dict[str, list[int]] = {}
    for j, node in enumerate(steps):
        need: set[int] = set()
        for r in node.reads | node.writes:
            if r in last_write:
                need.add(last_write[r])
        for w in node.writes:
            need.update(readers_since.get(w, ()))
        need.discard(j)
        direct.append(need)
        for w in node.writes:
            last_write[w] = j
            readers_since[w] = []
        for r in node.reads:
            if r not in node.writes:
                readers_since.setdefault(r, []).append(j)
    # transitive reduction: drop i from j's waits when another wait of j already comes after i
    ancestors: list[set[int]] = []
    reduced: list[tuple[int, ...]] = []
    for j, need in enumerate(direct):
        anc: set[int] = set()
        for i in need:
            anc.add(i)
            anc |= ancestors[i]
        ancestors.append(anc)
        implied: set[int] = set()
        for i in need:
            implied |= ancestors[i]
        reduced.append(tuple(sorted(need - implied)))
    return reduced


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """Steps spread over streams: ``stream[j]`` runs step j, after waiting for the steps ``waits[j]``
    ran on other streams (same-stream order needs no wait). Stream 0 is where the chain starts and ends."""

    stream: tuple[int, ...]
    waits: tuple[tuple[int, ...], ...]
    streams: int  # how many streams the plan uses


def stream_plan(deps: Sequence[Sequence[int]], max_streams: int = 8) -> StreamPlan:
    """A stream for each step such that the streams plus the cross-stream waits order exactly the pairs
    of ``deps`` (and, when more than ``max_streams`` branches are open, a few more: never fewer).

    A step continues the stream whose last step it waits for (the first such, by stream number); one
    that waits for no stream's last step opens a new stream while fewer than ``max_streams`` are open,
    else continues the stream whose last step finished earliest in step order."""
    if max_streams < 1:
        raise ValueError("max_streams must be at least 1")
    tails: list[int] = []  # last step of each stream
    stream: list[int] = []
    waits: list[tuple[int, ...]] = []
    for j, need in enumerate(deps):
        need_set = set(need)
        choice = next((s for s, t in enumerate(tails) if t in need_set), None)
        if choice is None:
            if len(tails) < max_streams:
                choice = len(tails)
                tails.append(-1)
            else:
                choice = min(range(len(tails)), key=lambda s: tails[s])
        prev = tails[choice]
        stream.append(choice)
        waits.append(tuple(sorted(i for i in need_set if i != prev and stream[i] != choice)))
        tails[choice] = j
    return StreamPlan(tuple(stream), tuple(waits), max(len(tails), 1))
