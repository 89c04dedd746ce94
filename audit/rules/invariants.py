"""Invariant rules: declared path / no-path queries over the data-flow graph hold."""

from __future__ import annotations

from collections.abc import Iterator

from ._base import CheckContext, Hit, rule


def _show(path: list[str]) -> str:
    return " -> ".join(n.split(":", 1)[1] for n in path)


@rule("INVARIANT_UNKNOWN_NODE", "Invariants name kernels, buffers or slots that exist, unambiguously.", "invariants")
def check_invariant_nodes(ctx: CheckContext) -> Iterator[Hit]:
    w = ctx.wiring
    for inv in ctx.cs.invariants:
        for key, names in (("from", inv.sources), ("to", inv.targets)):
            for i, name in enumerate(names):
                if w.node(name) is None:
                    amb = w.ambiguous(name)
                    if amb:
                        opts = " or ".join(f'"{a}"' for a in amb)
                        yield Hit(f'Invariant "{inv.name}" names "{name}", which is ambiguous; write {opts}.', inv.loc.child(key, i), inv.name)
                    else:
                        yield Hit(f'Invariant "{inv.name}" names "{name}", which is no kernel, buffer or ISV slot.', inv.loc.child(key, i), inv.name)


@rule("INVARIANT_VIOLATED", "Declared structural invariants (path / no-path between kernels, buffers and slots) hold.", "invariants")
def check_invariants(ctx: CheckContext) -> Iterator[Hit]:
    w = ctx.wiring
    for inv in ctx.cs.invariants:
        sources = [(n, w.node(n)) for n in inv.sources]
        targets = [(n, w.node(n)) for n in inv.targets]
        for sname, s in sources:
            for tname, t in targets:
                if s is None or t is None:
                    continue
                path = w.path(s, t)
                if inv.kind == "no_path" and path is not None:
                    yield Hit(
                        f'Invariant "{inv.name}" is violated: "{sname}" reaches "{tname}" through {_show(path)}.',
                        inv.loc, inv.name,
                    )  # fmt: skip
                elif inv.kind == "path" and path is None:
                    yield Hit(f'Invariant "{inv.name}" is violated: "{sname}" does not reach "{tname}".', inv.loc, inv.name)
