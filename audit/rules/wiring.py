"""Wiring rules: the schedules compose end to end.

Producers come before consumers, shapes and dtypes agree across every binding with dims bound over the
whole chain, saved tensors flow from a forward to a backward, per-sample partials are reduced,
accumulators are zeroed before their first ``+=``, every kernel is launched somewhere, launch geometry is
legal, and schedules do not depend on each other in a cycle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from ..dims import Expr
from ..graph import Launch
from ..model import Kernel, assumed, assumptions
from ..shapes import numel, probe_envs, shape_key, value_at
from ._base import CheckContext, Hit, rule

MAX_SHARED_BYTES = 227 * 1024  # sm_90 opt-in maximum per block


def show_shape(shape: Sequence[Expr], envs: Sequence[Mapping[str, int]]) -> str:
    """``[B, 262]``: dims that are the same at every probe are shown as numbers, runtime ones as written."""
    parts = []
    for e in shape:
        vals = {value_at(e, env) for env in envs}
        parts.append(str(vals.pop()) if len(vals) == 1 and None not in vals else e.text)
    return "[" + ", ".join(parts) + "]"


@rule("SHAPE_MISMATCH", "Each tensor parameter's shape, with dims bound across the chain, equals the shape of the buffer bound to it.", "wiring")
def check_shapes(ctx: CheckContext) -> Iterator[Hit]:
    cs, w = ctx.cs, ctx.wiring
    # buffer -> (launch, param) that last wrote it with a matching shape, per schedule at its end, so a
    # consumer in a later schedule (a backward reading what the forward saved) can name its producer too
    final: dict[str, dict[str, tuple[Launch, str]]] = {}
    mismatches: list[tuple[str, dict[str, tuple[Launch, str]], Launch, object, object, object]] = []
    base_key = w.base_shape_key
    for sname, launches in w.launches.items():
        producer: dict[str, tuple[Launch, str]] = {}
        for launch in launches:
            if launch.kernel is None:
                continue
            for p, b in launch.bound():
                buf = cs.buffer_map.get(b.buffer or "")
                if buf is None:
                    continue
                target = b.view if b.view is not None else buf.shape
                got = base_key(p.shape) if launch.base_envs else shape_key(p.shape, launch.envs)
                want = base_key(target)
                if got is None or want is None or got == want:
                    if got is not None and got == want and p.writes:
                        producer[buf.name] = (launch, p.name)
                    continue
                mismatches.append((sname, dict(producer), launch, p, b, buf))
        final[sname] = producer
    for sname, producer, launch, p, b, buf in mismatches:
        k = launch.kernel
        target = b.view if b.view is not None else buf.shape
        have = show_shape(p.shape, launch.envs)
        decl = show_shape(target, w.envs)
        prev = producer.get(buf.name)
        if prev is None:
            for earlier in sorted(w.before.get(sname, ())):
                prev = final.get(earlier, {}).get(buf.name) or prev
        if p.reads and prev is not None:
            pl, pp = prev
            where = f'schedule "{sname}"' if pl.schedule.name == sname else f'schedules "{pl.schedule.name}" -> "{sname}"'
            yield Hit(
                f'Kernel "{pl.kernel.name}" parameter "{pp}" has shape {decl} but its consumer "{k.name}" '
                f'expects {have} for parameter "{p.name}" (buffer "{buf.name}", {where}).',
                p.loc.child("shape"), k.name,
            )  # fmt: skip
        else:
            what = f'views buffer "{buf.name}" as {decl}' if b.view is not None else f'binds buffer "{buf.name}" of shape {decl}'
            yield Hit(
                f'Kernel "{k.name}" parameter "{p.name}" has shape {have} but schedule "{sname}" {what}.',
                p.loc.child("shape"), k.name,
            )  # fmt: skip


@rule("VIEW_SIZE_MISMATCH", "A view of a buffer without an offset (a reshape) has exactly as many elements as the buffer.", "wiring")
def check_views(ctx: CheckContext) -> Iterator[Hit]:
    cs, w = ctx.cs, ctx.wiring
    # the outcome depends only on the two shapes' expressions (equal texts share one Expr); each key keeps
    # its shapes alive so that their ids are not reused
    memo: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[object, object, tuple | None]] = {}
    for s in cs.schedules:
        for step in s.steps:
            for pname, b in step.bind:
                buf = cs.buffer_map.get(b.buffer or "")
                if b.view is None or buf is None or b.offset is not None:
                    continue  # a view at an offset is a slice: VIEW_OUT_OF_BOUNDS checks it
                key = (tuple(map(id, b.view)), tuple(map(id, buf.shape)))
                hit = memo.get(key)
                if hit is None:
                    hit = memo[key] = (b.view, buf.shape, _view_mismatch(b.view, buf.shape, w.envs))
                found = hit[2]
                if found is not None:
                    env, got, want = found
                    yield Hit(
                        f'Schedule "{s.name}" views buffer "{buf.name}" {show_shape(buf.shape, w.envs)} as '
                        f"{show_shape(b.view, w.envs)}, which has {got} elements instead of {want} at {_at(env, cs)}.",
                        b.loc.child("view"), s.name,
                    )  # fmt: skip


def _view_mismatch(view, shape, envs) -> tuple[Mapping[str, int], int, int] | None:
    """(environment, elements of the view, elements of the buffer) at the first probe where they differ;
    None when they never do or a size does not evaluate (the search stops there)."""
    for env in envs:
        v = [value_at(e, env) for e in view]
        full = [value_at(e, env) for e in shape]
        if None in v or None in full:
            return None
        if numel(v) != numel(full):
            return env, numel(v), numel(full)
    return None


@rule("DTYPE_MISMATCH", "Each tensor parameter's dtype equals the dtype of the buffer bound to it.", "wiring")
def check_dtypes(ctx: CheckContext) -> Iterator[Hit]:
    cs, w = ctx.cs, ctx.wiring
    for sname, launches in w.launches.items():
        for launch in launches:
            for p, b in launch.bound():
                buf = cs.buffer_map.get(b.buffer or "")
                if buf is not None and buf.dtype != p.dtype:
                    yield Hit(
                        f'Kernel "{launch.kernel.name}" parameter "{p.name}" is {p.dtype} but schedule "{sname}" binds buffer "{buf.name}" of dtype {buf.dtype}.',
                        p.loc.child("dtype"), launch.kernel.name,
                    )  # fmt: skip


@rule("DIM_BINDING_CONFLICT", "A kernel's local dims bind to one value per launch.", "wiring")
def check_dim_binding(ctx: CheckContext) -> Iterator[Hit]:
    for sname, launches in ctx.wiring.launches.items():
        for launch in launches:
            for problem in launch.dim_problems:
                yield Hit(f'In schedule "{sname}" step {launch.step.index + 1}, kernel "{launch.kernel.name}" {problem}.', launch.step.loc, launch.kernel.name)
            if launch.kernel is None:
                continue
            for d in launch.kernel.dims:
                if any(d not in env for env in launch.envs):
                    yield Hit(
                        f'In schedule "{sname}" step {launch.step.index + 1}, local dim "{d}" of kernel "{launch.kernel.name}" is bound by no parameter and no "dims" entry.',
                        launch.step.loc, launch.kernel.name,
                    )  # fmt: skip


@rule("CONSUMED_BEFORE_PRODUCED", "Every buffer a launch reads is produced earlier in its schedule, by a schedule it comes after, or is a declared external input.", "wiring")
def check_produced_before_consumed(ctx: CheckContext) -> Iterator[Hit]:
    cs, w = ctx.cs, ctx.wiring
    for sname, accesses in w.accesses.items():
        written: set[str] = set()
        later = {a.buffer: a for a in reversed(accesses) if a.writes}
        for a in accesses:
            if a.reads and a.buffer not in written:
                buf = cs.buffer_map.get(a.buffer)
                if buf is not None and not buf.is_external and not _produced_before(w, sname, a.buffer):
                    launch = _launch(w, sname, a.step)
                    loc = launch.step.binding(a.param).loc if launch and a.param else None
                    other = sorted({x.schedule for x in w.writers.get(a.buffer, []) if x.schedule != sname})
                    if a.mode == "accumulate":
                        pass  # reported by ACCUMULATOR_NOT_ZEROED
                    elif a.buffer in later and later[a.buffer].step > a.step:
                        p = later[a.buffer]
                        yield Hit(
                            f'Kernel "{a.kernel}" reads buffer "{a.buffer}" at step {a.step + 1} of schedule "{sname}" before its producer "{p.kernel or "zero"}" writes it at step {p.step + 1}.',
                            loc, a.kernel or sname,
                        )  # fmt: skip
                    elif other:
                        yield Hit(
                            f'Kernel "{a.kernel}" reads buffer "{a.buffer}" in schedule "{sname}", which is produced in schedule "{other[0]}" but "{sname}" is not declared after it.',
                            loc, a.kernel or sname,
                        )  # fmt: skip
                    else:
                        yield Hit(
                            f'Kernel "{a.kernel}" reads buffer "{a.buffer}" in schedule "{sname}" but nothing produces it and it is not declared as an external input.',
                            loc, a.kernel or sname,
                        )  # fmt: skip
            if a.writes:
                written.add(a.buffer)


def _produced_before(w, sname: str, buffer: str) -> bool:
    return any(x.schedule in w.before.get(sname, ()) for x in w.writers.get(buffer, []))


def _launch(w, sname: str, step: int) -> Launch | None:
    for launch in w.launches.get(sname, []):
        if launch.step.index == step:
            return launch
    return None


@rule("ACCUMULATOR_NOT_ZEROED", "A buffer bound to an accumulate (+=) parameter is zeroed or overwritten earlier in the same schedule.", "wiring")
def check_accumulators(ctx: CheckContext) -> Iterator[Hit]:
    w = ctx.wiring
    for sname, accesses in w.accesses.items():
        initialised: set[str] = set()
        reported: set[str] = set()
        for a in accesses:
            if a.mode == "accumulate" and a.buffer not in initialised and a.buffer not in reported:
                reported.add(a.buffer)
                launch = _launch(w, sname, a.step)
                loc = launch.step.binding(a.param).loc if launch and a.param else None
                yield Hit(
                    f'Kernel "{a.kernel}" adds into buffer "{a.buffer}" (parameter "{a.param}") at step {a.step + 1} of schedule "{sname}", but nothing zeroes it earlier in that schedule.',
                    loc, a.kernel or sname,
                )  # fmt: skip
            if a.mode in ("zero", "write"):
                initialised.add(a.buffer)
            elif a.mode == "accumulate":
                initialised.add(a.buffer)  # later += after the first are fine once it was zeroed


@rule("SAVED_FOR_BACKWARD", "Tensors saved for backward are produced by a forward kernel and read by a backward kernel.", "wiring")
def check_saved(ctx: CheckContext) -> Iterator[Hit]:
    cs, w = ctx.cs, ctx.wiring
    for k in cs.kernels:
        for p in k.tensors:
            if p.saved and k.stage != "forward":
                yield Hit(f'Kernel "{k.name}" saves "{p.name}" for backward, but it is a {k.stage} kernel, not a forward one.', p.loc.child("saved"), k.name)
            if p.saved and p.role == "in":
                yield Hit(f'Kernel "{k.name}" saves "{p.name}" for backward, but the parameter is an input.', p.loc.child("saved"), k.name)
    for sname, launches in w.launches.items():
        for launch in launches:
            for p, b in launch.bound():
                if not p.saved:
                    continue
                readers = w.readers.get(b.buffer or "", [])
                if not any(cs.kernel_map[r.kernel].stage == "backward" for r in readers if r.kernel in cs.kernel_map):
                    yield Hit(
                        f'Kernel "{launch.kernel.name}" saves "{p.name}" into buffer "{b.buffer}" in schedule "{sname}", but no backward kernel reads that buffer.',
                        p.loc.child("saved"), launch.kernel.name,
                    )  # fmt: skip


def _reduced_grads(ctx: CheckContext, sname: str, step: int, grads: set[str], seen: set[tuple[str, str]]) -> None:
    """The parameters whose gradient buffers the reduce launch at ``step`` of ``sname`` writes, directly or
    through ``scratch`` buffers that later reduce launches of the same schedule read (a two-level
    reduction: per-chunk sums into a workspace, then the chunks summed)."""
    cs, w = ctx.cs, ctx.wiring
    for acc in w.accesses[sname]:
        if acc.step != step or not acc.writes:
            continue
        buf = cs.buffer_map.get(acc.buffer)
        if buf is None:
            continue
        if buf.grad_of:
            grads.add(buf.grad_of)
        elif buf.kind == "scratch" and (sname, acc.buffer) not in seen:
            seen.add((sname, acc.buffer))
            for r in w.readers.get(acc.buffer, []):
                if r.schedule == sname and r.step > step and r.kernel in cs.kernel_map and cs.kernel_map[r.kernel].stage == "reduce":
                    _reduced_grads(ctx, sname, r.step, grads, seen)


@rule("PARTIAL_WITHOUT_REDUCER", "Every per-sample partial is read by a reduce kernel that writes the gradient of its parameter.", "wiring")
def check_partials(ctx: CheckContext) -> Iterator[Hit]:
    cs, w = ctx.cs, ctx.wiring
    for sname, launches in w.launches.items():
        allowed = {sname, *w.before.get(sname, ())}
        for launch in launches:
            for p, b in launch.bound():
                if not p.partial_of:
                    continue
                reducers = [
                    r for r in w.readers.get(b.buffer or "", [])
                    if r.kernel in cs.kernel_map and cs.kernel_map[r.kernel].stage == "reduce"
                    and (r.schedule != sname or r.step > launch.step.index)
                    and (r.schedule in allowed or sname in w.before.get(r.schedule, ()))
                ]  # fmt: skip
                if not reducers:
                    yield Hit(
                        f'Kernel "{launch.kernel.name}" writes per-sample partial "{p.name}" of "{p.partial_of}" into buffer "{b.buffer}" in schedule "{sname}", but no later reduce kernel reads it.',
                        p.loc.child("partial_of"), launch.kernel.name,
                    )  # fmt: skip
                    continue
                grads: set[str] = set()
                seen: set[tuple[str, str]] = set()
                for r in reducers:
                    _reduced_grads(ctx, r.schedule, r.step, grads, seen)
                if p.partial_of not in grads:
                    yield Hit(
                        f'Kernel "{launch.kernel.name}" partial "{p.name}" of "{p.partial_of}" is reduced in schedule "{sname}", but no reducer writes a buffer declared as the gradient of "{p.partial_of}".',
                        p.loc.child("partial_of"), launch.kernel.name,
                    )  # fmt: skip


@rule("DEAD_KERNEL", "Every kernel is launched by some schedule; a kernel in no schedule is dead code as far as the contracts say.", "wiring")
def check_dead(ctx: CheckContext) -> Iterator[Hit]:
    for k in ctx.cs.kernels:
        if k.name not in ctx.wiring.launched:
            yield Hit(f'Kernel "{k.name}" is in no schedule: no step launches it, so the contracts make it dead code; add a [[schedule.step]] that launches it or remove its contract.', k.loc, k.name)


@rule("SCHEDULE_CYCLE", "Schedules do not depend on each other in a cycle (declared order plus data dependencies).", "wiring")
def check_cycles(ctx: CheckContext) -> Iterator[Hit]:
    if ctx.wiring.schedules_acyclic():  # no cycle, no finding: networkx is neither imported nor asked
        return
    import networkx as nx

    g = ctx.wiring.schedule_graph
    reported: set[frozenset[str]] = set()
    for comp in nx.strongly_connected_components(g):
        if len(comp) < 2 and not any(g.has_edge(n, n) for n in comp):
            continue
        key = frozenset(comp)
        if key in reported:
            continue
        reported.add(key)
        cycle = nx.find_cycle(g.subgraph(comp))
        text = " -> ".join(f'"{u}"' for u, _ in cycle) + f' -> "{cycle[0][0]}"'
        whys = "; ".join(f'"{v}" {g.edges[u, v]["why"]}' if g.edges[u, v]["why"] != "after" else f'"{v}" is after "{u}"' for u, v in cycle)
        first = ctx.cs.schedule_map[cycle[0][0]]
        yield Hit(f"Schedules depend on each other in a cycle: {text} ({whys}).", first.loc, first.name)


@rule("LAUNCH_GEOMETRY", "Grid, block and shared memory are positive and within sm_90 limits at every probed size that meets the kernel's runtime-dim assumptions.", "wiring")
def check_geometry(ctx: CheckContext) -> Iterator[Hit]:
    """A kernel that requires ``T % 4 == 0`` (an assumption over runtime dims) is not launched at T = 1,
    where its ``grid = ["T // 4"]`` would be 0: such probe environments are skipped."""
    cs, w = ctx.cs, ctx.wiring
    runtime = set(cs.runtime_ranges)
    slots = cs.slot_indices
    # launches that bind no local dim all run at the probe environments: their result depends only on the
    # geometry expressions and the assumptions, keyed by identity (equal texts share one Expr) and kept
    # alive with the kernel
    at_base: dict[tuple[int, ...], tuple[Kernel, tuple[dict[str, int], tuple[str, str]] | None]] = {}
    for sname, launches in w.launches.items():
        for launch in launches:
            k = launch.kernel
            if k is None:
                continue
            given = assumptions(k.requires, runtime)
            envs = [env for env in launch.envs if assumed(given, runtime, env, slots)] if given else launch.envs
            if launch.base_envs:
                geo = (*map(id, k.grid), *map(id, k.block), id(k.shared_bytes), *map(id, given))
                hit = at_base.get(geo)
                if hit is None:
                    hit = at_base[geo] = (k, _first_geometry_problem(k, envs))
                first = hit[1]
            else:
                first = _first_geometry_problem(k, envs)
            if first is not None:
                env, (key, problem) = first
                yield Hit(f'Kernel "{k.name}" in schedule "{sname}" at {_at(env, cs)}: {problem}.', k.loc.child(key), k.name)


def _first_geometry_problem(k: Kernel, envs) -> tuple[dict[str, int], tuple[str, str]] | None:
    """The first environment (in probe order) at which ``k``'s launch is illegal, and why; None when none
    is, or when one does not evaluate (the search stops there)."""
    for env in envs:
        grid = [value_at(e, env) for e in k.grid]
        block = [value_at(e, env) for e in k.block]
        shared = value_at(k.shared_bytes, env) if k.shared_bytes is not None else 0
        if None in grid or None in block or shared is None:
            return None
        found = _geometry_problem(grid, block, shared)
        if found:
            return env, found
    return None


def _geometry_problem(grid: list[int], block: list[int], shared: int) -> tuple[str, str] | None:
    """``(contract key, what is wrong)`` for the first illegal launch dimension, or None."""
    if min(grid) < 1:
        return "grid", f"grid {grid} has a dimension below 1"
    if min(block) < 1:
        return "block", f"block {block} has a dimension below 1"
    if block[0] * block[1] * block[2] > 1024:
        return "block", f"block {block} has {block[0] * block[1] * block[2]} threads, more than 1024"
    if block[2] > 64 or block[0] > 1024 or block[1] > 1024:
        return "block", f"block {block} exceeds the per-dimension limits (1024, 1024, 64)"
    if grid[0] > 2**31 - 1 or grid[1] > 65535 or grid[2] > 65535:
        return "grid", f"grid {grid} exceeds the limits (2^31-1, 65535, 65535)"
    if shared < 0 or shared > MAX_SHARED_BYTES:
        return "shared_bytes", f"dynamic shared memory {shared} bytes is outside 0..{MAX_SHARED_BYTES}"
    return None


@rule("EQUIVALENCE_OUTPUTS", "A schedule declared equivalent to another writes the same gradient and loss buffers.", "wiring")
def check_equivalence(ctx: CheckContext) -> Iterator[Hit]:
    cs, w = ctx.cs, ctx.wiring

    def outputs(name: str) -> set[str]:
        out = set()
        for a in w.accesses.get(name, []):
            buf = cs.buffer_map.get(a.buffer)
            if a.writes and a.kernel and buf is not None and buf.kind in ("gradient", "loss"):
                out.add(a.buffer)
        return out

    for s in cs.schedules:
        if not s.equivalent_to or s.equivalent_to not in cs.schedule_map:
            continue
        mine, theirs = outputs(s.name), outputs(s.equivalent_to)
        if mine != theirs:
            missing = sorted(theirs - mine)
            extra = sorted(mine - theirs)
            parts = []
            if missing:
                parts.append("does not write " + ", ".join(f'"{m}"' for m in missing))
            if extra:
                parts.append("also writes " + ", ".join(f'"{m}"' for m in extra))
            yield Hit(f'Schedule "{s.name}" is declared equivalent to "{s.equivalent_to}" but {" and ".join(parts)}.', s.loc.child("equivalent_to"), s.name)


def _at(env: Mapping[str, int], cs) -> str:
    names = sorted(cs.runtime_ranges)
    return ", ".join(f"{n} = {env[n]}" for n in names if n in env) or "the declared dims"


@rule("REQUIRES_VIOLATED", "Every launch meets its kernel's declared preconditions (requires) at every probed size that meets the runtime-dim assumptions.", "wiring")
def check_requires(ctx: CheckContext) -> Iterator[Hit]:
    """A requirement written over runtime dims alone is an assumption the host guarantees: it only selects the
    probe environments (and verify's cases) at which the other requirements are checked."""
    cs, w = ctx.cs, ctx.wiring
    runtime = set(cs.runtime_ranges)
    slots = cs.slot_indices
    for sname, launches in w.launches.items():
        for launch in launches:
            k = launch.kernel
            if k is None or not k.requires:
                continue
            given = assumptions(k.requires, runtime)
            checked = [r for r in k.requires if r not in given]
            envs = [env for env in launch.envs if assumed(given, runtime, env, slots)]
            for r in checked:
                for env in envs:
                    if r.holds(env, slots) is False:
                        names = sorted(r.left.names | r.right.names)
                        values = ", ".join(f"{n} = {env[n]}" for n in names if n in env)
                        yield Hit(
                            f'Kernel "{k.name}" requires "{r.text}", but step {launch.step.index + 1} of schedule "{sname}" '
                            f"launches it with {values} at {_at(env, cs)}.",
                            r.loc, k.name,
                        )  # fmt: skip
                        break


def _domain_values(p, env: Mapping[str, int], slots) -> tuple[set[int], tuple[int, int] | None]:
    """(the special integer values a reader's contract tests: include and mask skip values; its range
    min..max or None) for an integer tensor parameter at ``env``."""
    special: set[int] = set()
    rng = None
    v = p.values
    if p.mask is not None:
        special.add(int(p.mask.skip_value))
    if v is not None:
        special.update(int(x) for x in v.include if float(x).is_integer())
        special.update(int(x) for x in v.choices if float(x).is_integer())
        lo = value_at(v.min, env, slots) if isinstance(v.min, Expr) else v.min
        hi = value_at(v.max, env, slots) if isinstance(v.max, Expr) else v.max
        if lo is not None and hi is not None:
            rng = (int(lo), int(hi))
    return special, rng


def _covers(special: set[int], rng: tuple[int, int] | None, value: int) -> bool:
    return value in special or (rng is not None and rng[0] <= value <= rng[1])


@rule("DOMAIN_MISMATCH", "Kernels that read one integer buffer are verified on the same special values (mask skip values, out-of-range codes): a value one reader's contract says the buffer may hold is in every other reader's test domain.", "wiring")
def check_domain_mismatch(ctx: CheckContext) -> Iterator[Hit]:
    """A loss that tests an out-of-range label (and skips it) beside a backward that never sees one lets a
    backward that counts such labels pass: the buffer's values mean one thing to one kernel and are never
    shown to the other. Compared at the first probe environment (the ranges are dim expressions)."""
    cs, w = ctx.cs, ctx.wiring
    env = (probe_envs(cs) or [{}])[0]
    slots = cs.slot_indices
    readers: dict[str, dict[tuple[str, str], object]] = {}
    for launches in w.launches.values():
        for launch in launches:
            k = launch.kernel
            if k is None:
                continue
            for p, b in launch.bound():
                if p.role not in ("in", "inout") or p.dtype[0] not in "iu" or b.buffer is None:
                    continue
                if p.values is None and p.mask is None:
                    continue
                readers.setdefault(b.buffer, {}).setdefault((k.name, p.name), (k, p))
    for buffer, found in sorted(readers.items()):
        if len(found) < 2:
            continue
        domains = {key: _domain_values(p, env, slots) for key, (k, p) in found.items()}
        reported: set[tuple[str, str]] = set()
        for (ka, pa), (special_a, _) in sorted(domains.items()):
            for value in sorted(special_a):
                for (kb, pb), (special_b, rng_b) in sorted(domains.items()):
                    if (kb, pb) == (ka, pa) or (kb, pb) in reported or _covers(special_b, rng_b, value):
                        continue
                    reported.add((kb, pb))
                    where = "its mask's skip value" if found[(ka, pa)][1].mask is not None and found[(ka, pa)][1].mask.skip_value == value else "values.include"
                    k, p = found[(kb, pb)]
                    tested = (f"{rng_b[0]}..{rng_b[1]}" if rng_b else "no range") + (
                        " and " + ", ".join(str(x) for x in sorted(special_b)) if special_b else ""
                    )
                    yield Hit(
                        f'Buffer "{buffer}" may hold {value} (kernel "{ka}" parameter "{pa}" tests it: {where}), but kernel '
                        f'"{kb}" parameter "{pb}" is verified only on {tested}; add {value} to its values.include so every '
                        f"reader is verified on what the buffer may hold.",
                        (p.values.loc if p.values is not None else p.loc), k.name,
                    )  # fmt: skip
