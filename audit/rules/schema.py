"""Schema rules: names resolve, are identifiers where they become code and are written as Unicode
normalises them, nothing is declared twice, dims are sane, paths stay inside the root."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..dims import Expr
from ..findings import Severity
from ..model import HostRead, ScalarParam, TensorParam
from ..names import changed_characters, code_point, is_identifier, nfkc_change, shown, why_not_identifier
from ..shapes import probe_envs, value_at
from ._base import CheckContext, Hit, probe, rule

INT32_MAX = 2**31 - 1
_INT_RANGES = {
    "i8": (-(2**7), 2**7 - 1), "u8": (0, 2**8 - 1), "i16": (-(2**15), 2**15 - 1),
    "i32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-(2**63), 2**63 - 1), "u64": (0, 2**64 - 1),
}  # fmt: skip


@rule("DUPLICATE_NAME", "Every dim, buffer, kernel, slot, schedule, invariant and parameter name is declared once.", "schema")
def check_duplicates(ctx: CheckContext) -> Iterator[Hit]:
    cs = ctx.cs
    groups = [
        ("Dim", cs.dims),
        ("Buffer", cs.buffers),
        ("Kernel", cs.kernels),
        ("Schedule", cs.schedules),
        ("Invariant", cs.invariants),
        ("ISV slot", cs.isv.slots if cs.isv else ()),
    ]
    for what, items in groups:
        first: dict[str, object] = {}
        for item in items:
            prev = first.get(item.name)
            if prev is None:
                first[item.name] = item
            else:
                yield Hit(f'{what} "{item.name}" is declared twice; the first declaration is at {prev.loc}.', item.loc, item.name)
    for k in cs.kernels:
        seen: dict[str, object] = {}
        for p in k.params:
            if p.name in seen:
                yield Hit(f'Kernel "{k.name}" has two parameters named "{p.name}".', p.loc, k.name)
            seen[p.name] = p
        for d in k.dims:
            if d in cs.dim_map:
                yield Hit(f'Kernel "{k.name}" declares local dim "{d}", which shadows the global dim of that name.', k.loc.child("dims"), k.name)


def _dim_names_ok(expr: Expr, known: set[str]) -> list[str]:
    names = expr.names
    if not names or names <= known:  # the common case, without sorting
        return []
    return sorted(n for n in names if n not in known)


def _all_dims_known(cs) -> bool:
    """Whether every expression UNKNOWN_DIM reads uses declared dims only (then it has nothing to say):
    the same expressions against the same known names, without a call per expression."""
    glob = set(cs.dim_map)
    for b in cs.buffers:
        for e in b.shape:
            if not e.names <= glob:
                return False
    for k in cs.kernels:
        known = glob | set(k.dims) if k.dims else glob
        for e in k.grid:
            if not e.names <= known:
                return False
        for e in k.block:
            if not e.names <= known:
                return False
        if k.shared_bytes is not None and not k.shared_bytes.names <= known:
            return False
        for p in k.params:
            if type(p) is TensorParam or isinstance(p, TensorParam):
                for e in p.shape:
                    if not e.names <= known:
                        return False
            elif isinstance(p, ScalarParam) and isinstance(p.value, Expr) and not p.value.names <= known:
                return False
    kernels = cs.kernel_map
    for s in cs.schedules:
        for step in s.steps:
            for _, b in step.bind:
                for e in b.view or ():
                    if not e.names <= glob:
                        return False
            for _, e in step.dims:
                if not e.names <= glob:
                    return False
            if step.args:
                k = kernels.get(step.launch or "")
                local = glob | set(k.dims) if k else glob
                for _, e in step.args:
                    if isinstance(e, Expr) and not e.names <= local:
                        return False
    return True


@rule("UNKNOWN_DIM", "Shapes, geometry and scalar values use only declared dims (global or the kernel's local dims).", "schema")
def check_unknown_dims(ctx: CheckContext) -> Iterator[Hit]:
    cs = ctx.cs
    if _all_dims_known(cs):
        return  # the common case: no finding, found in one pass without the per-expression calls below
    glob = set(cs.dim_map)
    for b in cs.buffers:
        for i, e in enumerate(b.shape):
            for n in _dim_names_ok(e, glob):
                yield Hit(f'Buffer "{b.name}" shape uses "{n}", which is not a declared dim.', b.loc.child("shape", i), b.name)
    for k in cs.kernels:
        known = glob | set(k.dims) if k.dims else glob
        for label, exprs, key in (("grid", k.grid, "grid"), ("block", k.block, "block")):
            for i, e in enumerate(exprs):
                for n in _dim_names_ok(e, known):
                    yield Hit(f'Kernel "{k.name}" {label} uses "{n}", which is not a declared dim.', k.loc.child(key, i), k.name)
        if k.shared_bytes is not None:
            for n in _dim_names_ok(k.shared_bytes, known):
                yield Hit(f'Kernel "{k.name}" shared_bytes uses "{n}", which is not a declared dim.', k.loc.child("shared_bytes"), k.name)
        for p in k.params:
            if isinstance(p, TensorParam):
                for i, e in enumerate(p.shape):
                    for n in _dim_names_ok(e, known):
                        yield Hit(
                            f'Kernel "{k.name}" parameter "{p.name}" shape uses "{n}", which is not a declared dim.',
                            p.loc.child("shape", i), k.name,
                        )  # fmt: skip
            elif isinstance(p, ScalarParam) and isinstance(p.value, Expr):
                for n in _dim_names_ok(p.value, known):
                    yield Hit(f'Kernel "{k.name}" parameter "{p.name}" value uses "{n}", which is not a declared dim.', p.loc.child("value"), k.name)
    for s in cs.schedules:
        for step in s.steps:
            for _, b in step.bind:
                for i, e in enumerate(b.view or ()):
                    for n in _dim_names_ok(e, glob):
                        yield Hit(f'Schedule "{s.name}" step {step.index + 1} view uses "{n}", which is not a declared dim.', b.loc.child("view", i), s.name)
            for name, e in step.dims:
                for n in _dim_names_ok(e, glob):
                    yield Hit(f'Schedule "{s.name}" step {step.index + 1} dim "{name}" uses "{n}", which is not a declared dim.', step.loc.child("dims", name), s.name)
            k = cs.kernel_map.get(step.launch or "")
            local = set(k.dims) if k else set()
            for name, e in step.args:
                if isinstance(e, Expr):
                    for n in _dim_names_ok(e, glob | local):
                        yield Hit(f'Schedule "{s.name}" step {step.index + 1} argument "{name}" uses "{n}", which is not a declared dim.', step.loc.child("args", name), s.name)


@rule("UNKNOWN_BUFFER", "Every buffer a schedule binds, zeroes or a contract refers to is declared.", "schema")
def check_unknown_buffers(ctx: CheckContext) -> Iterator[Hit]:
    cs = ctx.cs
    bufs = cs.buffer_map
    valid = _suggest(bufs)
    for s in cs.schedules:
        for step in s.steps:
            if step.zero and step.zero not in bufs:
                yield Hit(f'Schedule "{s.name}" step {step.index + 1} zeroes "{step.zero}", which is not a declared buffer{valid(step.zero)}.', step.loc.child("zero"), s.name)
            for pname, b in step.bind:
                if b.buffer is not None and b.buffer not in bufs:
                    yield Hit(
                        f'Schedule "{s.name}" binds "{step.launch}" parameter "{pname}" to "{b.buffer}", which is not a declared buffer{valid(b.buffer)}.',
                        b.loc, s.name,
                    )  # fmt: skip
    for b in cs.buffers:
        if b.grad_of and b.grad_of not in bufs:
            yield Hit(f'Buffer "{b.name}" is the gradient of "{b.grad_of}", which is not a declared buffer.', b.loc.child("grad_of"), b.name)
    for k in cs.kernels:
        for p in k.tensors:
            if p.partial_of and p.partial_of not in bufs:
                yield Hit(
                    f'Kernel "{k.name}" parameter "{p.name}" is a partial of "{p.partial_of}", which is not a declared buffer.',
                    p.loc.child("partial_of"), k.name,
                )  # fmt: skip


@rule("UNKNOWN_SLOT", "Every ISV slot a kernel reads, writes or passes by index exists in the layout.", "schema")
def check_unknown_slots(ctx: CheckContext) -> Iterator[Hit]:
    cs = ctx.cs
    slots = cs.slot_map
    valid = _suggest(slots)
    for k in cs.kernels:
        for r in k.isv_reads:
            if r.slot not in slots:
                yield Hit(f'Kernel "{k.name}" reads ISV slot "{r.slot}", which is not in the layout{valid(r.slot)}.', r.loc, k.name)
        for i, w in enumerate(k.isv_writes):
            if w not in slots:
                yield Hit(f'Kernel "{k.name}" writes ISV slot "{w}", which is not in the layout{valid(w)}.', k.loc.child("isv_writes", i), k.name)
        for p in k.params:
            if isinstance(p, ScalarParam) and isinstance(p.value, Expr):
                for sname in sorted(p.value.slots):
                    if sname not in slots:
                        yield Hit(f'Kernel "{k.name}" parameter "{p.name}" passes slot "{sname}", which is not in the layout{valid(sname)}.', p.loc.child("value"), k.name)
            if isinstance(p, ScalarParam) and isinstance(p.value, HostRead) and p.value.slot not in slots:
                sname = p.value.slot
                yield Hit(f'Kernel "{k.name}" parameter "{p.name}" reads slot "{sname}" on the host, which is not in the layout{valid(sname)}.', p.loc.child("value"), k.name)
    for sched in cs.schedules:
        for step in sched.steps:
            for name, e in step.args:
                if isinstance(e, HostRead) and e.slot not in slots:
                    yield Hit(
                        f'Schedule "{sched.name}" step {step.index + 1} argument "{name}" reads slot "{e.slot}" on the host, which is not in the layout{valid(e.slot)}.',
                        step.loc.child("args", name), sched.name,
                    )  # fmt: skip
                if isinstance(e, Expr):
                    for sname in sorted(e.slots):
                        if sname not in slots:
                            yield Hit(
                                f'Schedule "{sched.name}" step {step.index + 1} argument "{name}" passes slot "{sname}", which is not in the layout{valid(sname)}.',
                                step.loc.child("args", name), sched.name,
                            )  # fmt: skip
    for s in cs.isv.slots if cs.isv else ():
        for i, w in enumerate(s.shared_writers):
            if w not in cs.kernel_map:
                yield Hit(f'ISV slot "{s.name}" lists shared writer "{w}", which is not a declared kernel.', s.loc.child("shared_writers", i), s.name)


@rule("UNKNOWN_KERNEL", "Every kernel a schedule launches is declared.", "schema")
def check_unknown_kernels(ctx: CheckContext) -> Iterator[Hit]:
    kernels = ctx.cs.kernel_map
    valid = _suggest(kernels)
    for s in ctx.cs.schedules:
        for step in s.steps:
            if step.launch and step.launch not in kernels:
                yield Hit(f'Schedule "{s.name}" step {step.index + 1} launches "{step.launch}", which is not a declared kernel{valid(step.launch)}.', step.loc.child("launch"), s.name)
        for i, dep in enumerate(s.after):
            if dep not in ctx.cs.schedule_map:
                yield Hit(f'Schedule "{s.name}" comes after "{dep}", which is not a declared schedule.', s.loc.child("after", i), s.name)
        if s.equivalent_to and s.equivalent_to not in ctx.cs.schedule_map:
            yield Hit(f'Schedule "{s.name}" is equivalent to "{s.equivalent_to}", which is not a declared schedule.', s.loc.child("equivalent_to"), s.name)


@rule("UNKNOWN_PARAM", "Bindings, launch arguments and mask lists name parameters the kernel has.", "schema")
def check_unknown_params(ctx: CheckContext) -> Iterator[Hit]:
    for s in ctx.cs.schedules:
        for step in s.steps:
            k = ctx.cs.kernel_map.get(step.launch or "")
            if k is None:
                continue
            names = [p.name for p in k.params]
            for pname, b in step.bind:
                p = k.param(pname)
                if p is None:
                    yield Hit(f'Schedule "{s.name}" binds "{pname}", but kernel "{k.name}" has no such parameter (it has {_list(names)}).', b.loc, s.name)
                elif not isinstance(p, TensorParam):
                    yield Hit(f'Schedule "{s.name}" binds "{pname}" of kernel "{k.name}" to a buffer, but it is a {p.kind} parameter.', b.loc, s.name)
            for aname, _ in step.args:
                p = k.param(aname)
                if not isinstance(p, ScalarParam):
                    yield Hit(f'Schedule "{s.name}" passes argument "{aname}", but kernel "{k.name}" has no scalar parameter of that name.', step.loc.child("args", aname), s.name)
            for dname, _ in step.dims:
                if dname not in k.dims:
                    yield Hit(f'Schedule "{s.name}" binds dim "{dname}", but kernel "{k.name}" has no local dim of that name.', step.loc.child("dims", dname), s.name)
    for k in ctx.cs.kernels:
        for p in k.tensors:
            if p.mask:
                for i, z in enumerate(p.mask.zeroes):
                    target = k.param(z)
                    if not isinstance(target, TensorParam) or target.role == "in":
                        yield Hit(f'Kernel "{k.name}" mask on "{p.name}" zeroes "{z}", which is not an output parameter of the kernel.', p.mask.loc.child("zeroes", i), k.name)


@rule("UNBOUND_PARAM", "Every launch binds every tensor parameter (NULL only where the parameter is optional) and every scalar has a value.", "schema")
def check_unbound(ctx: CheckContext) -> Iterator[Hit]:
    for s in ctx.cs.schedules:
        for step in s.steps:
            k = ctx.cs.kernel_map.get(step.launch or "")
            if k is None:
                continue
            for p in k.params:
                if isinstance(p, TensorParam):
                    b = step.binding(p.name)
                    if b is None:
                        yield Hit(f'Schedule "{s.name}" launches "{k.name}" without binding parameter "{p.name}".', step.loc, s.name)
                    elif b.is_null and not p.optional:
                        yield Hit(f'Schedule "{s.name}" binds NULL to "{k.name}" parameter "{p.name}", which is not optional.', b.loc, s.name)
                elif isinstance(p, ScalarParam) and p.value is None and step.arg(p.name) is None:
                    yield Hit(f'Schedule "{s.name}" launches "{k.name}" without a value for scalar "{p.name}" (give "value" in the contract or "args" in the step).', step.loc, s.name)


@rule("DIM_RANGE", "Dims are positive and fit a 32-bit launch: fixed values in 1..2^31-1, runtime ranges ordered.", "schema")
def check_dim_ranges(ctx: CheckContext) -> Iterator[Hit]:
    cs = ctx.cs
    env = cs.fixed_env
    for d in cs.dims:
        if d.kind == "fixed" and d.value is not None and not 1 <= d.value <= INT32_MAX:
            yield Hit(f'Dim "{d.name}" is {d.value}; a dim must be between 1 and {INT32_MAX}.', d.loc, d.name)
        elif d.kind == "runtime" and d.min is not None and d.max is not None:
            if d.min < 1:
                yield Hit(f'Runtime dim "{d.name}" has min {d.min}; it must be at least 1.', d.loc.child("min"), d.name)
            if d.max < d.min:
                yield Hit(f'Runtime dim "{d.name}" has max {d.max} below its min {d.min}.', d.loc.child("max"), d.name)
            if d.max > INT32_MAX:
                yield Hit(f'Runtime dim "{d.name}" has max {d.max}; a dim must fit in {INT32_MAX}.', d.loc.child("max"), d.name)
        elif d.kind == "derived" and d.name in env and not 1 <= env[d.name] <= INT32_MAX:
            yield Hit(f'Derived dim "{d.name}" = "{d.expr}" evaluates to {env[d.name]}; a dim must be between 1 and {INT32_MAX}.', d.loc, d.name)
        elif d.kind == "derived" and cs.dim_map.get(d.name) is d:
            # derived from runtime dims: in range at every probed size, like the shapes it feeds
            for penv in probe_envs(cs):
                v = penv.get(d.name)
                if v is not None and not 1 <= v <= INT32_MAX:
                    at = ", ".join(f"{n} = {penv[n]}" for n in sorted(cs.runtime_ranges) if n in penv)
                    yield Hit(
                        f'Derived dim "{d.name}" = "{d.expr}" evaluates to {v} at {at}; a dim must be between 1 and {INT32_MAX}.',
                        d.loc, d.name,
                    )  # fmt: skip
                    break
    from ..shapes import resolve_fixed_dims

    for name, sentence in resolve_fixed_dims(cs)[1]:
        yield Hit(sentence, cs.dim_map[name].loc, name)


@rule("SCALAR_RANGE", "Scalar argument values fit their dtype at every probed batch size and at the largest dims the ranges allow.", "schema")
def check_scalar_range(ctx: CheckContext) -> Iterator[Hit]:
    from ..cases import largest_env

    slots = ctx.cs.slot_indices
    # the probe environments, and the corner where every runtime dim is at its largest (probe points vary
    # several runtime dims together, so a product of two of them may never reach its largest value there)
    largest = [largest_env(ctx.cs)] if ctx.cs.runtime_ranges else []
    base_envs = [*ctx.wiring.envs, *largest]
    # launches that bind no local dim all run at the probe environments: the first out-of-range value of
    # an expression there depends only on the expression (equal texts share one Expr) and the dtype
    at_base: dict[tuple[int, str], tuple[Expr, int | None]] = {}
    for k in ctx.cs.kernels:  # a kernel no schedule launches (yet): its own scalars at those environments
        if k.name in ctx.wiring.launched:
            continue
        for p in k.params:
            if isinstance(p, ScalarParam) and p.dtype in _INT_RANGES and isinstance(p.value, Expr):
                v = _first_out_of_range(p.value, p.dtype, base_envs, slots)
                if v is not None:
                    yield Hit(f'Kernel "{k.name}" scalar "{p.name}" = "{p.value}" is {v} within the dims\' ranges, outside the range of {p.dtype}.',
                              p.loc, k.name)  # fmt: skip
    for launches in ctx.wiring.launches.values():
        for launch in launches:
            k = launch.kernel
            if k is None:
                continue
            for p in k.params:
                if not isinstance(p, ScalarParam) or p.dtype not in _INT_RANGES:
                    continue
                arg = launch.step.arg(p.name)
                value = arg if arg is not None else p.value
                if isinstance(value, float):  # only a launch argument can be a number here; the loader rejects the rest
                    yield Hit(
                        f'Schedule "{launch.schedule.name}" step {launch.step.index + 1} passes the number {value} to '
                        f'scalar "{p.name}" of kernel "{k.name}", which is an integer ({p.dtype}).',
                        _scalar_loc(launch, p, arg), k.name,
                    )  # fmt: skip
                    continue
                if not isinstance(value, Expr):
                    continue
                if launch.base_envs:
                    key = (id(value), p.dtype)
                    hit = at_base.get(key)
                    if hit is None:
                        hit = at_base[key] = (value, _first_out_of_range(value, p.dtype, base_envs, slots))
                    v = hit[1]
                else:
                    envs = [*launch.envs, *launch.envs_at(ctx.cs.buffer_map, largest)] if largest else launch.envs
                    v = _first_out_of_range(value, p.dtype, envs, slots)
                if v is not None:
                    yield Hit(
                        f'Kernel "{k.name}" scalar "{p.name}" = "{value}" is {v} in schedule "{launch.schedule.name}", outside the range of {p.dtype}.',
                        _scalar_loc(launch, p, arg), k.name,
                    )  # fmt: skip


def _scalar_loc(launch, p: ScalarParam, arg: object):
    return launch.step.loc.child("args", p.name) if arg is not None else p.loc


def _first_out_of_range(value: Expr, dtype: str, envs, slots) -> int | None:
    """The first value of ``value`` (in probe order) outside the range of ``dtype``, or None."""
    lo, hi = _INT_RANGES[dtype]
    for env in envs:
        v = value_at(value, env, slots)
        if v is not None and not lo <= v <= hi:
            return v
    return None


def _inside(root: Path, rel: str) -> str | None:
    """None when ``rel`` stays inside ``root``; otherwise why not."""
    if "\x00" in rel:
        return "holds a NUL character"
    if os.path.isabs(rel):
        return "is an absolute path"
    p = Path(rel)
    if ".." in p.parts:
        norm = os.path.normpath(rel)
        if norm.startswith(".."):
            return 'leaves the project root through ".."'
    try:
        real = (root / p).resolve()
        real.relative_to(root.resolve())
    except ValueError:
        return "resolves outside the project root (through a symbolic link)"
    except (RuntimeError, OSError):
        return "is a symbolic link loop"
    return None


# The three rules below are the schema rules that look at files: each asks through a probe (kernels share
# a few sources, so each distinct path is asked once per check), which also lets a cached result be
# re-validated by asking again.
@probe("inside")
def _probe_inside(root: Path, config: object, rel: str) -> str | None:
    return _inside(root, rel)


@probe("source_refusal")
def _probe_source_refusal(root: Path, config: Any, rel: str) -> str | None:
    from ..untrusted import source_refusal

    dirs = [config.path(d) for d in config.include_dirs] if config else []
    return source_refusal(root / rel, dirs, root)


@probe("source_exists")
def _probe_source_exists(root: Path, config: object, rel: str) -> bool:
    from ..untrusted import refusal

    # a FIFO, a folder or a link loop is SOURCE_UNSAFE's
    return (root / rel).is_file() or refusal(root / rel, root) is not None


@rule("PATH_OUTSIDE_ROOT", "Paths in contracts resolve inside the project root: no absolute paths, no escaping '..' or symlinks.", "schema")
def check_paths(ctx: CheckContext) -> Iterator[Hit]:
    for k in ctx.cs.kernels:
        why = ctx.probe("inside", k.source)
        if why:
            yield Hit(f'Kernel "{k.name}" source "{k.source}" {why}; sources must lie inside the project root.', k.loc.child("source"), k.name)


@rule("SOURCE_UNSAFE", "Every kernel source and local header it includes is a bounded regular file inside the root, included by a literal relative name (the build reads nothing else).", "schema")
def check_sources_safe(ctx: CheckContext) -> Iterator[Hit]:
    for k in ctx.cs.kernels:
        if ctx.probe("inside", k.source):
            continue
        why = ctx.probe("source_refusal", k.source)
        if why:
            yield Hit(f'Kernel "{k.name}" source "{k.source}" {why}; it is neither compiled nor analysed.', k.loc.child("source"), k.name)


@rule("SOURCE_MISSING", "Every kernel's source file exists.", "schema")
def check_sources_exist(ctx: CheckContext) -> Iterator[Hit]:
    for k in ctx.cs.kernels:
        if ctx.probe("inside", k.source):
            continue
        if not ctx.probe("source_exists", k.source):
            yield Hit(f'Kernel "{k.name}" source "{k.source}" does not exist.', k.loc.child("source"), k.name)


def _suggest(names: dict) -> object:
    import difflib

    def hint(name: str) -> str:
        close = difflib.get_close_matches(name, list(names), n=1)
        return f' (did you mean "{close[0]}"?)' if close else ""

    return hint


def _list(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)



@rule("SUPPRESSION_UNUSED", "Every [[suppress]] entry names a rule that exists and still suppresses a finding of it.", "schema", Severity.WARNING)
def check_unused_suppressions(ctx: CheckContext) -> Iterator[Hit]:
    """Runs after every other selected rule (the engine orders it last); an entry whose rule did not run in
    this invocation (not run here; or not selected, where the rule reads more than the contracts and every
    other rule selected reads the contracts alone) is not judged."""
    from ._base import REGISTRY

    hits, ran = ctx.fact("suppressions")
    for entry, count in hits.items():
        about = f' about "{entry.subject}"' if entry.subject else ""
        if entry.rule not in REGISTRY:
            yield Hit(f'The suppression of "{entry.rule}"{about} names no rule; "wireup rules" lists them.', entry.loc.child("rule"), entry.rule)
        elif count == 0 and entry.rule in ran and entry.matching is not None:
            yield Hit(f'The suppression of {entry.rule}{about} matching "{entry.matching}" suppresses nothing: no finding of the rule '
                      "there contains that text any more; remove it, or match the finding's new text.", entry.loc.child("matching"), entry.rule)
        elif count == 0 and entry.rule in ran:
            yield Hit(
                f'The suppression of {entry.rule}{about} suppresses nothing: the rule finds nothing there any more; remove it.',
                entry.loc, entry.rule,
            )  # fmt: skip
# --- names as written ------------------------------------------------------------------------------


def _declared_names(cs) -> Iterator[tuple[str, tuple, str, object, str, bool]]:
    """(template, its arguments, name, loc, subject, must be an identifier) for every name a contract
    declares; the sentence is only built for a finding (``template.format(*arguments)``)."""
    for d in cs.dims:
        yield "Dim", (), d.name, d.loc, d.name, True
    for b in cs.buffers:
        yield "Buffer", (), b.name, b.loc, b.name, False
    for k in cs.kernels:
        # the kernel's name is its entry point unless "entry" or "cpp_name" says otherwise
        yield "Kernel", (), k.name, k.loc, k.name, not (k.entry or k.cpp_name)
        if k.entry:
            yield 'Kernel "{}" entry point', (k.name,), k.entry, k.loc.child("entry"), k.name, True
        for i, d in enumerate(k.dims):
            yield 'Kernel "{}" local dim', (k.name,), d, k.loc.child("dims", i), k.name, True
        for p in k.params:
            yield 'Kernel "{}" parameter', (k.name,), p.name, p.loc, k.name, True
    if cs.isv is not None:
        for s in cs.isv.slots:
            yield "ISV slot", (), s.name, s.loc, s.name, True
        for i, ev in enumerate(cs.isv.reset_events):
            yield "ISV reset event", (), ev, cs.isv.loc.child("reset_events", i), ev, True
    for s in cs.schedules:
        yield "Schedule", (), s.name, s.loc, s.name, False
    for inv in cs.invariants:
        yield "Invariant", (), inv.name, inv.loc, inv.name, False


def _expr_names(e) -> Iterator[str]:
    if isinstance(e, Expr):
        yield from sorted(e.names)
        yield from sorted(e.slots)


def _referenced_names(cs) -> Iterator[tuple[str, tuple, str, object, tuple, str]]:
    """(template, its arguments, name, loc, key below loc, subject) for every name a contract refers to.

    The sentence and the location are only built for a finding (``template.format(*arguments)``,
    ``loc.child(*key)``): a 10,000-kernel project refers to some 200,000 names."""
    for d in cs.dims:
        for n in _expr_names(d.expr):
            yield 'Dim "{}" = "{}" uses', (d.name, d.expr), n, d.loc, (), d.name
    for b in cs.buffers:
        for i, e in enumerate(b.shape):
            for n in _expr_names(e):
                yield 'Buffer "{}" shape uses', (b.name,), n, b.loc, ("shape", i), b.name
        if b.grad_of:
            yield 'Buffer "{}" is the gradient of', (b.name,), b.grad_of, b.loc, ("grad_of",), b.name
    for k in cs.kernels:
        for key, exprs in (("grid", k.grid), ("block", k.block), ("shared_bytes", (k.shared_bytes,))):
            for i, e in enumerate(exprs):
                for n in _expr_names(e):
                    yield 'Kernel "{}" {} uses', (k.name, key), n, k.loc, (key,) if key == "shared_bytes" else (key, i), k.name
        for key in ("cpp_name", "reference", "gradcheck"):
            value = getattr(k, key)
            if value:
                yield 'Kernel "{}" {}', (k.name, key), value, k.loc, (key,), k.name
        for p in k.params:
            if isinstance(p, TensorParam):
                for i, e in enumerate(p.shape):
                    for n in _expr_names(e):
                        yield 'Kernel "{}" parameter "{}" shape uses', (k.name, p.name), n, p.loc, ("shape", i), k.name
                if p.partial_of:
                    yield 'Kernel "{}" parameter "{}" is a partial of', (k.name, p.name), p.partial_of, p.loc, ("partial_of",), k.name
                for i, z in enumerate(p.mask.zeroes if p.mask else ()):
                    yield 'Kernel "{}" mask on "{}" zeroes', (k.name, p.name), z, p.mask.loc, ("zeroes", i), k.name
            elif isinstance(p, ScalarParam):
                for n in _expr_names(p.value):
                    yield 'Kernel "{}" parameter "{}" value uses', (k.name, p.name), n, p.loc, ("value",), k.name
        for r in k.isv_reads:
            yield 'Kernel "{}" reads ISV slot', (k.name,), r.slot, r.loc, (), k.name
        for i, w in enumerate(k.isv_writes):
            yield 'Kernel "{}" writes ISV slot', (k.name,), w, k.loc, ("isv_writes", i), k.name
        for name, _ in k.verify.dims:
            yield 'Kernel "{}" verify.dims names', (k.name,), name, k.verify.loc, ("dims", name), k.name
    if cs.isv is not None:
        for s in cs.isv.slots:
            for ev, _ in s.reset:
                yield 'ISV slot "{}" resets on', (s.name,), ev, s.loc, ("reset", ev), s.name
            for i, w in enumerate(s.shared_writers):
                yield 'ISV slot "{}" lists shared writer', (s.name,), w, s.loc, ("shared_writers", i), s.name
    for s in cs.schedules:
        for i, dep in enumerate(s.after):
            yield 'Schedule "{}" comes after', (s.name,), dep, s.loc, ("after", i), s.name
        if s.equivalent_to:
            yield 'Schedule "{}" is equivalent to', (s.name,), s.equivalent_to, s.loc, ("equivalent_to",), s.name
        for step in s.steps:
            at = (s.name, step.index + 1)
            if step.launch:
                yield 'Schedule "{}" step {} launches', at, step.launch, step.loc, ("launch",), s.name
            if step.zero:
                yield 'Schedule "{}" step {} zeroes', at, step.zero, step.loc, ("zero",), s.name
            for pname, b in step.bind:
                yield 'Schedule "{}" step {} binds parameter', at, pname, b.loc, (), s.name
                if b.buffer is not None:
                    yield 'Schedule "{}" step {} binds "{}" to', (*at, pname), b.buffer, b.loc, (), s.name
                for i, e in enumerate(b.view or ()):
                    for n in _expr_names(e):
                        yield 'Schedule "{}" step {} view of "{}" uses', (*at, pname), n, b.loc, ("view", i), s.name
            for name, e in step.dims:
                yield 'Schedule "{}" step {} binds dim', at, name, step.loc, ("dims", name), s.name
                for n in _expr_names(e):
                    yield 'Schedule "{}" step {} dim "{}" uses', (*at, name), n, step.loc, ("dims", name), s.name
            for name, e in step.args:
                yield 'Schedule "{}" step {} passes argument', at, name, step.loc, ("args", name), s.name
                for n in _expr_names(e):
                    yield 'Schedule "{}" step {} argument "{}" uses', (*at, name), n, step.loc, ("args", name), s.name
    for inv in cs.invariants:
        for key, nodes in (("sources", inv.sources), ("targets", inv.targets)):
            for i, n in enumerate(nodes):
                yield 'Invariant "{}" {} name', (inv.name, key), n, inv.loc, (key, i), inv.name


@rule("NAME_NOT_IDENTIFIER", "Dim, parameter, ISV slot, reset event and entry-point names are whole ASCII identifiers (nothing after them, not even a newline): they become dim expressions, C parameters and generated constants.", "schema")
def check_identifiers(ctx: CheckContext) -> Iterator[Hit]:
    if _needed_names_are_identifiers(ctx.cs):
        return  # the common case: no finding, found without building the names' locations
    for template, args, name, loc, subject, needed in _declared_names(ctx.cs):
        if not needed or is_identifier(name):
            continue
        norm = nfkc_change(name)
        if norm is not None and is_identifier(norm):
            continue  # a look-alike of an identifier: NAME_NOT_NORMALIZED says so more precisely
        yield Hit(
            f'{template.format(*args)} "{shown(name)}" is not an identifier ({why_not_identifier(name)}); expected ASCII letters, digits '
            "and underscores, not starting with a digit.",
            loc, subject,
        )  # fmt: skip


def _needed_names_are_identifiers(cs) -> bool:
    """Whether every name :func:`_declared_names` marks as needing to be an identifier is one (then
    NAME_NOT_IDENTIFIER has nothing to say): the same names, each distinct one matched once."""
    good: set[str] = set()

    def ok(name: str) -> bool:
        if name in good:
            return True
        if is_identifier(name):
            good.add(name)
            return True
        return False

    for d in cs.dims:
        if not ok(d.name):
            return False
    for k in cs.kernels:
        if not (k.entry or k.cpp_name) and not ok(k.name):
            return False
        if k.entry and not ok(k.entry):
            return False
        for d in k.dims:
            if not ok(d):
                return False
        for p in k.params:
            if not ok(p.name):
                return False
    if cs.isv is not None:
        for s in cs.isv.slots:
            if not ok(s.name):
                return False
        for ev in cs.isv.reset_events:
            if not ok(ev):
                return False
    return True


_ESCAPES = ("\\u", "\\U", "\\x")  # the TOML escapes that can spell a character beyond ASCII (the last one TOML 1.1's)


def _all_ascii(cs) -> bool:
    """Every contract file is ASCII without a TOML ``\\u``/``\\U``/``\\x`` escape, so no name can be anything
    else (a fast path: most projects; a model built in memory, without files, is always walked)."""
    top = (*cs.dims, *cs.buffers, *cs.kernels, *cs.schedules, *cs.invariants, *((cs.isv,) if cs.isv else ()))
    sources = {id(o.loc.source): o.loc.source for o in top}
    # one scan for a backslash first: the escapes' two-character searches cost ~25 ms over 9.6 MB of text
    return all(
        src is not None and src.text.isascii() and not ("\\" in src.text and any(e in src.text for e in _ESCAPES))
        for src in sources.values()
    )


def _look_alike(name: str, norm: str) -> str:
    chars = " and ".join(code_point(c) for c in changed_characters(name)[:3])
    return f'written with {chars}, which Unicode NFKC normalisation turns into "{shown(norm)}"; names are compared exactly as written, so it is not the name "{shown(norm)}".'


@rule("NAME_NOT_NORMALIZED", "Names are compared exactly as written: a declared or referenced name that Unicode NFKC normalisation changes (look-alike letters such as \"ℬ\" or \"Ｄ\") is a finding, never silently equal to another name.", "schema")
def check_normalized(ctx: CheckContext) -> Iterator[Hit]:
    if _all_ascii(ctx.cs):
        return
    for template, args, name, loc, subject, _ in _declared_names(ctx.cs):
        norm = nfkc_change(name)
        if norm is not None:
            yield Hit(f'{template.format(*args)} "{shown(name)}" is {_look_alike(name, norm)}', loc, subject)
    for template, args, name, loc, key, subject in _referenced_names(ctx.cs):
        if name.isascii():
            continue
        norm = nfkc_change(name)
        if norm is not None:
            yield Hit(f'{template.format(*args)} "{shown(name)}", {_look_alike(name, norm)}', loc.child(*key) if key else loc, subject)
