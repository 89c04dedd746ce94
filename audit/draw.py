"""Drawings of the chain: Mermaid (GitHub renders it) and Graphviz DOT, one diagram per schedule (or one
Mermaid document with a subgraph per schedule).

Kernels are boxes labelled with their stage, buffers are rounded nodes, ISV slots hexagons; edges follow
the data in launch order.

>>> print(mermaid(cs, "aux_heads_forward"))    # doctest: +SKIP
flowchart LR
  k0["strided_gather<br/><small>producer</small>"]
"""

from __future__ import annotations

import re

from .graph import Wiring
from .model import ContractSet


def _ident(prefix: str, name: str, ids: dict[str, str]) -> str:
    key = f"{prefix}:{name}"
    if key not in ids:
        ids[key] = f"{prefix}{len(ids)}"
    return ids[key]


def _label(text: str) -> str:
    """A Mermaid label: no quote, angle bracket or line break of a contract name survives to end the label
    or open markup (``"]-->X["`` or ``<img onerror=...>`` stay text)."""
    return re.sub(r'["<>`#]', "", " ".join(text.split()))


def _dot(text: str) -> str:
    """A DOT quoted string's body: backslashes and quotes escaped, line breaks and controls dropped."""
    text = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text)
    return text.replace("\\", "\\\\").replace('"', '\\"')


def schedule_edges(cs: ContractSet, schedule: str, wiring: Wiring | None = None) -> list[tuple[str, str, str]]:
    """``(from node, to node, kind)`` for one schedule, nodes as ``kernel:X`` / ``buffer:Y`` / ``slot:Z``."""
    w = wiring or Wiring(cs)
    edges: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str]] = set()

    def add(a: str, b: str, kind: str) -> None:
        if (a, b) not in seen:
            seen.add((a, b))
            edges.append((a, b, kind))

    reads = {(st, s) for st, _, s, _ in w.slot_reads.get(schedule, [])}
    for acc in w.accesses.get(schedule, []):
        if acc.kernel is None:
            add(f"zero:{acc.buffer}", f"buffer:{acc.buffer}", "zero")
            continue
        if acc.reads:
            add(f"buffer:{acc.buffer}", f"kernel:{acc.kernel}", acc.mode)
        if acc.writes:
            add(f"kernel:{acc.kernel}", f"buffer:{acc.buffer}", acc.mode)
    for step, kernel, slot, _prev in w.slot_reads.get(schedule, []):
        add(f"slot:{slot}", f"kernel:{kernel}", "isv-read")
    for step, kernel, slot in w.slot_writes.get(schedule, []):
        add(f"kernel:{kernel}", f"slot:{slot}", "isv-write")
    _ = reads
    return edges


def mermaid(cs: ContractSet, schedule: str, wiring: Wiring | None = None, id_prefix: str = "", header: bool = True) -> str:
    """A Mermaid flowchart of one schedule (without ``header``: its node and edge lines alone, node IDs
    starting with ``id_prefix``, to sit in a subgraph of :func:`mermaid_document`)."""
    ids: dict[str, str] = {}
    lines = ["flowchart LR"] if header else []
    declared: set[str] = set()
    for a, b, kind in schedule_edges(cs, schedule, wiring):
        for node in (a, b):
            if node in declared:
                continue
            declared.add(node)
            kind_, name = node.split(":", 1)
            nid = id_prefix + _ident(kind_[0], name, ids)
            if kind_ == "kernel":
                k = cs.kernel_map.get(name)
                stage = k.stage if k else "?"
                lines.append(f'  {nid}["{_label(name)}<br/><small>{stage}</small>"]:::{stage}')
            elif kind_ == "buffer":
                lines.append(f'  {nid}("{_label(name)}")')
            elif kind_ == "slot":
                lines.append(f'  {nid}{{{{"ISV {_label(name)}"}}}}')
            else:
                lines.append(f'  {nid}[/"zero"/]')
        arrow = "-.->" if kind in ("isv-read", "isv-write") else ("==>" if kind == "accumulate" else "-->")
        label = "|+=|" if kind == "accumulate" else ""
        lines.append(f"  {id_prefix}{_ident(a.split(':', 1)[0][0], a.split(':', 1)[1], ids)} {arrow}{label} {id_prefix}{_ident(b.split(':', 1)[0][0], b.split(':', 1)[1], ids)}")
    if header:
        lines += _CLASS_DEFS
    return "\n".join(lines) + "\n"


_CLASS_DEFS = [
    "  classDef producer fill:#e8f4ea,stroke:#3a7d44",
    "  classDef forward fill:#e6effa,stroke:#2f5d9b",
    "  classDef loss fill:#fdf0e0,stroke:#b5651d",
    "  classDef backward fill:#f6e6f4,stroke:#8e3a87",
    "  classDef reduce fill:#f0f0f0,stroke:#555",
    "  classDef optimizer fill:#fff7d6,stroke:#9a7b00",
    "  classDef other fill:#ffffff,stroke:#999",
]


def mermaid_document(cs: ContractSet, schedules: list[str], wiring: Wiring | None = None) -> str:
    """One Mermaid flowchart holding every schedule in ``schedules`` as a subgraph of its own.

    A file or stream holds one Mermaid diagram, so several schedules are subgraphs of one flowchart, not
    several flowcharts; each subgraph's node IDs carry its index (a buffer used by two schedules is drawn
    in both). One schedule alone is :func:`mermaid`'s flowchart.

    >>> print(mermaid_document(cs, ["forward", "backward"]))    # doctest: +SKIP
    flowchart LR
      subgraph s0 ["schedule forward"]
        s0_k0["forward<br/><small>forward</small>"]:::forward
    """
    w = wiring or Wiring(cs)
    if len(schedules) == 1:
        return f"%% schedule {schedules[0]}\n" + mermaid(cs, schedules[0], w)
    lines = ["flowchart LR"]
    for i, name in enumerate(schedules):
        lines.append(f'  subgraph s{i} ["schedule {_label(name)}"]')  # Mermaid's documented form: subgraph ID [TITLE]
        lines += ["  " + line for line in mermaid(cs, name, w, id_prefix=f"s{i}_", header=False).splitlines()]
        lines.append("  end")
    return "\n".join(lines + _CLASS_DEFS) + "\n"


def dot(cs: ContractSet, schedule: str, wiring: Wiring | None = None) -> str:
    """A Graphviz digraph of one schedule."""
    lines = [f'digraph "{_dot(schedule)}" {{', "  rankdir=LR;", '  node [fontname="Helvetica"];']
    shapes = {"kernel": "box", "buffer": "ellipse", "slot": "hexagon", "zero": "plaintext"}
    declared: set[str] = set()
    for a, b, kind in schedule_edges(cs, schedule, wiring):
        for node in (a, b):
            if node not in declared:
                declared.add(node)
                kind_, name = node.split(":", 1)
                label = "zero" if kind_ == "zero" else name
                lines.append(f'  "{_dot(node)}" [label="{_dot(label)}", shape={shapes[kind_]}];')
        style = ' [style=dashed]' if kind.startswith("isv") else (' [label="+="]' if kind == "accumulate" else "")
        lines.append(f'  "{_dot(a)}" -> "{_dot(b)}"{style};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def steps_diagram(cs: ContractSet, schedules: list[str], fmt: str = "mermaid", wiring: Wiring | None = None) -> str:
    """The steps of ``schedules`` (run one after another, in that order) and which waits for which, as
    the contracts' declared accesses prove it (:mod:`audit.stepdag`): an edge per dependency, each
    step labelled with its schedule, step number, kernel (or zero step) and the stream a concurrent
    launch gives it. Steps with no path between them may run at the same time."""
    from .stepdag import chain_steps, step_dependencies, stream_plan

    steps = chain_steps(wiring or Wiring(cs), schedules)
    deps = step_dependencies(steps)
    plan = stream_plan(deps)
    labels = [f"{n.schedule} step {n.step + 1}: {n.label} (stream {plan.stream[j]})" for j, n in enumerate(steps)]
    if fmt == "dot":
        lines = [f'digraph "steps of {_dot(" then ".join(schedules))}" {{', "  rankdir=TB;", '  node [fontname="Helvetica", shape=box];']
        lines += [f'  "s{j}" [label="{_dot(text)}"];' for j, text in enumerate(labels)]
        lines += [f'  "s{i}" -> "s{j}";' for j, d in enumerate(deps) for i in d]
        return "\n".join([*lines, "}"]) + "\n"
    lines = [f"%% steps of {_label(' then '.join(schedules))}: an edge where a step waits for another", "flowchart TB"]
    lines += [f'  s{j}["{_label(text)}"]' for j, text in enumerate(labels)]
    lines += [f"  s{i} --> s{j}" for j, d in enumerate(deps) for i in d]
    return "\n".join(lines) + "\n"

