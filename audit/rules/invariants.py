"""Invariant rules: declared path / no-path queries over the data-flow graph hold."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ._base import CheckContext, Hit, rule


def _show(path: list[str]) -> str:
    return " -> ".join(n.split(":", 1)[1] for n in path)


def _shortest_path_code() -> bytes | None:
    """The source of the shortest-path search (``audit.graph.shortest_path``: which of several shortest
    paths a message names depends on it); None where it cannot be read."""
    import inspect

    from ..graph import shortest_path

    try:
        return inspect.getsource(shortest_path).encode()
    except (OSError, TypeError):
        return None


def _path_value(value: object) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(type(n) is str for n in value):
        raise TypeError("a path is a list of node names")
    return value


def _path_finder(ctx: CheckContext) -> Callable[[str, str], list[str] | None]:
    """``ctx.wiring.path``, through the analysis cache beside the build cache where there is a
    configuration: keyed by the graph's nodes and edges, the query and the shortest-path code, so a check
    of unchanged contracts answers its invariants without resolving the graph's adjacency."""
    w = ctx.wiring
    cfg = ctx.config
    code = _shortest_path_code() if cfg is not None else None
    if cfg is None or code is None:
        return w.path
    from ..cuda.cache import AnalysisCache

    cache = AnalysisCache(cfg.path(cfg.cache) / "analysis")
    digest: list[str] = []

    def path(src: str, dst: str) -> list[str] | None:
        if not digest:
            digest.append(w.graph_digest())
        return cache.value("paths", [digest[0], src, dst, code], _path_value, lambda: w.path(src, dst))

    return path


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
    find_path = _path_finder(ctx)
    for inv in ctx.cs.invariants:
        sources = [(n, w.node(n)) for n in inv.sources]
        targets = [(n, w.node(n)) for n in inv.targets]
        for sname, s in sources:
            for tname, t in targets:
                if s is None or t is None:
                    continue
                path = find_path(s, t)
                if inv.kind == "no_path" and path is not None:
                    yield Hit(
                        f'Invariant "{inv.name}" is violated: "{sname}" reaches "{tname}" through {_show(path)}.',
                        inv.loc, inv.name,
                    )  # fmt: skip
                elif inv.kind == "path" and path is None:
                    yield Hit(f'Invariant "{inv.name}" is violated: "{sname}" does not reach "{tname}".', inv.loc, inv.name)
