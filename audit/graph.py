"""The wiring of a contract set: every launch resolved against its kernel and buffers, and the
data-flow graph (networkx) with kernels, buffers and ISV slots as nodes.

Edges follow the data: a buffer or slot a kernel reads points at the kernel, a kernel points at what it
writes. Path and no-path invariants, schedule cycles and the Mermaid / DOT drawings are all read off
this graph. Everything here is static: no GPU, no compiler.

>>> w = Wiring(cs)                                      # doctest: +SKIP
>>> w.path("kernel:aux_trade_outcome_backward", "buffer:q_encoder_dx")   # doctest: +SKIP
None
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .dims import Expr
from .model import Binding, Buffer, ContractSet, Kernel, Schedule, Step, TensorParam, fast_init
from .shapes import ShapeKeys, bind_local_dims, probe_envs

if TYPE_CHECKING:
    import networkx as nx


@dataclass(frozen=True, slots=True)
class Access:
    """One read or write of a buffer by a schedule step."""

    schedule: str
    step: int
    kernel: str | None  # None for a zero step
    param: str | None
    buffer: str
    mode: str  # "read", "write", "accumulate", "inout", "zero"

    @property
    def reads(self) -> bool:
        return self.mode in ("read", "accumulate", "inout")

    @property
    def writes(self) -> bool:
        return self.mode in ("write", "accumulate", "inout", "zero")


@dataclass
class Launch:
    """A launch step resolved: its kernel, bindings and the dim environments it runs under."""

    schedule: Schedule
    step: Step
    kernel: Kernel | None
    envs: list[dict[str, int]] = field(default_factory=list)
    dim_problems: list[str] = field(default_factory=list)

    def bound(self) -> list[tuple[TensorParam, Binding]]:
        """(tensor parameter, its binding) for every bound, non-NULL tensor parameter that exists."""
        cached = self.__dict__.get("_bound")
        if cached is None:
            cached = self.__dict__["_bound"] = _bound(self.kernel, self.step)
        return list(cached)

    def envs_at(self, buffers: Mapping[str, Buffer], base_envs: Sequence[Mapping[str, int]]) -> list[dict[str, int]]:
        """The launch's dim environments over ``base_envs`` instead of the wiring's probe environments: its
        local dims bound the same way (from the bound buffers' shapes and the step's explicit dims)."""
        if self.kernel is None:
            return []
        if not self.kernel.dims and not self.step.dims:
            return [dict(env) for env in base_envs]
        envs, _ = bind_local_dims(self.kernel.dims, _shape_pairs(self.bound(), buffers), dict(self.step.dims), base_envs)
        return envs

    @property
    def base_envs(self) -> bool:
        """True when the launch binds no local dim: its ``envs`` equal (as copies) the wiring's probe envs."""
        return self.__dict__.get("_base_envs", False)


def _shape_pairs(bound: Sequence[tuple[TensorParam, Binding]], buffers: Mapping[str, Buffer]) -> list[tuple[str, tuple[Expr, ...], tuple[Expr, ...]]]:
    """(param name, param shape, the shape it is bound to: the view's, else the buffer's) of each bound
    tensor parameter whose buffer exists: what binds a launch's local dims."""
    pairs = []
    for p, b in bound:
        buf = buffers.get(b.buffer or "")
        target = b.view if b.view is not None else (buf.shape if buf else None)
        if target is not None:
            pairs.append((p.name, p.shape, target))
    return pairs


def _bound(kernel: Kernel | None, step: Step) -> list[tuple[TensorParam, Binding]]:
    if kernel is None:
        return []
    # the first binding of a name, as Step.binding finds it (reversed: the first one is assigned last)
    binds: dict[str, Binding] = dict(reversed(step.bind))
    get = binds.get
    out = []
    for p in kernel.params:
        if type(p) is TensorParam or isinstance(p, TensorParam):
            b = get(p.name)
            if b is not None and b.buffer is not None:  # not b.is_null
                out.append((p, b))
    return out


fast_init(Access)  # ~50,000 of them at 10,000 kernels
_MODE = {"in": "read", "out": "write", "inout": "inout", "accumulate": "accumulate"}


class Wiring:
    """Launches, buffer accesses and ISV slot accesses of every schedule, and the data-flow graph."""

    @classmethod
    def of(cls, cs: ContractSet) -> Wiring:
        """The wiring of ``cs``, built once per contract set (both are immutable once built)."""
        memo = getattr(cs, "__dict__", None)
        if memo is None:
            return cls(cs)
        w = memo.get("_wiring")
        if w is None:
            w = memo["_wiring"] = cls(cs)
        return w

    def __init__(self, cs: ContractSet):
        self.cs = cs
        self.envs = probe_envs(cs)
        self.launches: dict[str, list[Launch]] = {}
        self.accesses: dict[str, list[Access]] = {}
        self.slot_reads: dict[str, list[tuple[int, str, str, bool]]] = {}  # schedule -> (step, kernel, slot, previous)
        self.slot_writes: dict[str, list[tuple[int, str, str]]] = {}
        self.launched: set[str] = set()
        for sched in cs.schedule_map.values():
            self._resolve(sched)

    def _resolve(self, sched: Schedule) -> None:
        launches: list[Launch] = []
        acc: list[Access] = []
        reads: list[tuple[int, str, str, bool]] = []
        writes: list[tuple[int, str, str]] = []
        buffers = self.cs.buffer_map
        kernels = self.cs.kernel_map
        sname = sched.name
        base_envs = self.envs
        add_access = acc.append
        launched = self.launched
        for step in sched.steps:
            if step.zero:
                add_access(Access(sname, step.index, None, None, step.zero, "zero"))
                continue
            kernel = kernels.get(step.launch or "")
            launch = Launch(sched, step, kernel)
            launches.append(launch)
            if kernel is None:
                continue
            kname = kernel.name
            index = step.index
            launched.add(kname)
            bound = launch.__dict__["_bound"] = _bound(kernel, step)  # what Launch.bound() memoizes
            if not kernel.dims and not step.dims:
                # nothing to bind (most launches): the probe environments as they are, as copies
                # (bind_local_dims' own shortcut, without the (param, shape, target) pairs it would ignore)
                for p, b in bound:
                    add_access(Access(sname, index, kname, p.name, b.buffer or "", _MODE[p.role]))
                launch.envs = [dict(env) for env in base_envs]
                launch.__dict__["_base_envs"] = True
            else:
                for p, b in bound:
                    add_access(Access(sname, index, kname, p.name, b.buffer or "", _MODE[p.role]))
                explicit: dict[str, Expr] = dict(step.dims)
                launch.envs, launch.dim_problems = bind_local_dims(kernel.dims, _shape_pairs(bound, buffers), explicit, base_envs)
            for r in kernel.isv_reads:
                reads.append((index, kname, r.slot, r.previous_step))
            for w in kernel.isv_writes:
                writes.append((index, kname, w))
        self.launches[sched.name] = launches
        self.accesses[sched.name] = acc
        self.slot_reads[sched.name] = reads
        self.slot_writes[sched.name] = writes

    @functools.cached_property
    def launches_by_kernel(self) -> dict[str, list[tuple[str, Launch]]]:
        """Kernel name -> (schedule, launch) of every launch of it, in schedule and step order."""
        out: dict[str, list[tuple[str, Launch]]] = {}
        for sname, launches in self.launches.items():
            for launch in launches:
                if launch.kernel is not None:
                    out.setdefault(launch.kernel.name, []).append((sname, launch))
        return out

    @functools.cached_property
    def base_shape_key(self) -> ShapeKeys:
        """``shape_key(shape, self.envs)``, memoized per shape (also right for a launch whose ``base_envs``)."""
        return ShapeKeys(self.envs)

    # -- schedule order -----------------------------------------------------------------------------
    @functools.cached_property
    def before(self) -> dict[str, set[str]]:
        """Schedule -> every schedule it (transitively) comes after, by its declared ``after``."""
        out: dict[str, set[str]] = {}
        scheds = self.cs.schedule_map

        def walk(name: str, seen: tuple[str, ...]) -> set[str]:
            if name in out:
                return out[name]
            result: set[str] = set()
            for dep in scheds[name].after if name in scheds else ():
                if dep in seen or dep not in scheds:
                    continue
                result.add(dep)
                result |= walk(dep, (*seen, dep))
            out[name] = result
            return result

        for name in scheds:
            walk(name, (name,))
        return out

    @functools.cached_property
    def writers(self) -> dict[str, list[Access]]:
        """Buffer -> every write to it, over all schedules."""
        out: dict[str, list[Access]] = {}
        for accs in self.accesses.values():
            for a in accs:
                if a.writes:
                    out.setdefault(a.buffer, []).append(a)
        return out

    @functools.cached_property
    def readers(self) -> dict[str, list[Access]]:
        out: dict[str, list[Access]] = {}
        for accs in self.accesses.values():
            for a in accs:
                if a.reads:
                    out.setdefault(a.buffer, []).append(a)
        return out

    # -- graph --------------------------------------------------------------------------------------
    @functools.cached_property
    def _node_list(self) -> list[tuple[str, dict[str, str]]]:
        """The declared nodes with their attributes, in the order the graph adds them."""
        nodes: list[tuple[str, dict[str, str]]] = []
        for k in self.cs.kernel_map.values():
            nodes.append((f"kernel:{k.name}", {"kind": "kernel", "stage": k.stage}))
        for b in self.cs.buffer_map.values():
            nodes.append((f"buffer:{b.name}", {"kind": "buffer"}))
        for s in self.cs.slot_map:
            nodes.append((f"slot:{s}", {"kind": "slot"}))
        return nodes

    @functools.cached_property
    def _edge_list(self) -> list[tuple[str, str]]:
        """Every data-flow edge, in the order the graph adds them (repeats included)."""
        edges: list[tuple[str, str]] = []
        add = edges.append
        for accs in self.accesses.values():
            for a in accs:
                if a.kernel is None:
                    continue
                if a.reads:
                    add((f"buffer:{a.buffer}", f"kernel:{a.kernel}"))
                if a.writes:
                    add((f"kernel:{a.kernel}", f"buffer:{a.buffer}"))
        for name, reads in self.slot_reads.items():
            for _, kernel, slot, _prev in reads:
                add((f"slot:{slot}", f"kernel:{kernel}"))
            for _, kernel, slot in self.slot_writes[name]:
                add((f"kernel:{kernel}", f"slot:{slot}"))
        return edges

    @functools.cached_property
    def nodes(self) -> frozenset[str]:
        """The nodes of :attr:`graph` (declared ones and every edge's ends), without building it."""
        out = {n for n, _ in self._node_list}
        for u, v in self._edge_list:
            out.add(u)
            out.add(v)
        return frozenset(out)

    @functools.cached_property
    def graph(self) -> nx.DiGraph:
        """Data flow over all schedules: ``kernel:X``, ``buffer:Y`` and ``slot:Z`` nodes."""
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(self._node_list)
        g.add_edges_from(self._edge_list)
        return g

    def node(self, name: str) -> str | None:
        """The graph node a name refers to (``kernel:``/``buffer:``/``slot:`` prefixes disambiguate)."""
        nodes = self.nodes
        if ":" in name:
            return name if name in nodes else None
        hits = [f"{kind}:{name}" for kind in ("kernel", "buffer", "slot") if f"{kind}:{name}" in nodes]
        return hits[0] if len(hits) == 1 else None

    def ambiguous(self, name: str) -> list[str]:
        nodes = self.nodes
        return [f"{kind}:{name}" for kind in ("kernel", "buffer", "slot") if f"{kind}:{name}" in nodes]

    @functools.cached_property
    def _adjacency(self) -> tuple[dict[str, dict[str, None]], dict[str, dict[str, None]]]:
        """Successors and predecessors of every node of :attr:`graph`, in the order networkx's DiGraph
        holds them (nodes as added, each neighbour where its first edge put it), without networkx."""
        succ: dict[str, dict[str, None]] = {n: {} for n, _ in self._node_list}
        pred: dict[str, dict[str, None]] = {n: {} for n in succ}
        for u, v in self._edge_list:
            if u not in succ:
                succ[u], pred[u] = {}, {}
            if v not in succ:
                succ[v], pred[v] = {}, {}
            succ[u][v] = None
            pred[v][u] = None
        return succ, pred

    def path(self, src: str, dst: str) -> list[str] | None:
        """A shortest path from ``src`` to ``dst`` over :attr:`graph` (None where there is none or either
        is no node): the one ``networkx.shortest_path`` returns, found without building the graph."""
        succ, pred = self._adjacency
        if src not in succ or dst not in succ:
            return None
        return shortest_path(succ, pred, src, dst)

    @functools.cached_property
    def _schedule_ops(self) -> list[tuple[str, ...]]:
        """How :attr:`schedule_graph` is built, in order: ``("node", S)`` and ``("edge", T, S, why)``.

        Kept as a list so that the graph's node and edge order (which the cycle messages follow) is the
        same whether or not it is built, and so that acyclicity can be decided without networkx."""
        ops: list[tuple[str, ...]] = []
        edges: set[tuple[str, str]] = set()
        for s in self.cs.schedule_map.values():
            ops.append(("node", s.name))
            for dep in s.after:
                if dep in self.cs.schedule_map:
                    ops.append(("edge", dep, s.name, "after"))
                    edges.add((dep, s.name))
        buffers = self.cs.buffer_map
        for sname, accs in self.accesses.items():
            own = {a.buffer for a in accs if a.writes}
            for a in accs:
                if not a.reads or a.buffer in own:
                    continue
                buf = buffers.get(a.buffer)
                if buf is None or buf.is_external:
                    continue
                producers = {w.schedule for w in self.writers.get(a.buffer, []) if w.schedule != sname}
                if len(producers) == 1:
                    (p,) = producers
                    if (p, sname) not in edges:
                        ops.append(("edge", p, sname, f'reads "{a.buffer}"'))
                        edges.add((p, sname))
        return ops

    @functools.cached_property
    def schedule_graph(self) -> nx.DiGraph:
        """Schedules with an edge T -> S when S is declared after T or reads what only T produces."""
        import networkx as nx

        g = nx.DiGraph()
        for op in self._schedule_ops:
            if op[0] == "node":
                g.add_node(op[1])
            else:
                g.add_edge(op[1], op[2], why=op[3])
        return g

    def schedules_acyclic(self) -> bool:
        """Whether :attr:`schedule_graph` has no cycle (self-loops included), decided without building it
        (Kahn's algorithm over its edges): the common case, where SCHEDULE_CYCLE needs no networkx."""
        succ: dict[str, set[str]] = {}
        indegree: dict[str, int] = {}
        for op in self._schedule_ops:
            if op[0] == "node":
                indegree.setdefault(op[1], 0)
                continue
            u, v = op[1], op[2]
            if u == v:
                return False
            indegree.setdefault(u, 0)
            if v not in succ.setdefault(u, set()):
                succ[u].add(v)
                indegree[v] = indegree.get(v, 0) + 1
        ready = [n for n, d in indegree.items() if d == 0]
        seen = 0
        while ready:
            n = ready.pop()
            seen += 1
            for m in succ.get(n, ()):
                indegree[m] -= 1
                if indegree[m] == 0:
                    ready.append(m)
        return seen == len(indegree)

    def graph_digest(self) -> str:
        """sha256 of the data-flow graph's nodes and edges in insertion order: a cache key for answers
        about :attr:`graph` (such as :meth:`path`) that holds across runs."""
        import hashlib

        h = hashlib.sha256()
        for n, _ in self._node_list:
            h.update(n.encode() + b"\0")
        h.update(b"\1")
        for u, v in self._edge_list:
            h.update(u.encode() + b"\0" + v.encode() + b"\0")
        return h.hexdigest()


def shortest_path(succ: dict[str, dict[str, None]], pred: dict[str, dict[str, None]], source: str, target: str) -> list[str] | None:
    """A shortest path from ``source`` to ``target`` by breadth-first search from both ends, expanding
    the smaller frontier first: networkx's unweighted ``bidirectional_shortest_path`` step for step, so
    that where several paths are shortest it names the same one (a message quotes it). None where no
    path exists. ``succ`` / ``pred``: each node's successors / predecessors in insertion order."""
    if source == target:
        return [source]
    before: dict[str, str | None] = {source: None}  # towards the source
    after: dict[str, str | None] = {target: None}  # towards the target
    forward, reverse = [source], [target]
    meet: str | None = None
    while forward and reverse and meet is None:
        if len(forward) <= len(reverse):
            level, forward = forward, []
            for v in level:
                for w in succ[v]:
                    if w not in before:
                        forward.append(w)
                        before[w] = v
                    if w in after:
                        meet = w
                        break
                if meet is not None:
                    break
        else:
            level, reverse = reverse, []
            for v in level:
                for w in pred[v]:
                    if w not in after:
                        after[w] = v
                        reverse.append(w)
                    if w in before:
                        meet = w
                        break
                if meet is not None:
                    break
    if meet is None:
        return None
    path: list[str] = []
    node: str | None = meet
    while node is not None:
        path.append(node)
        node = before[node]
    path.reverse()
    node = after[path[-1]]
    while node is not None:
        path.append(node)
        node = after[node]
    return path

