"""Views, partial writes and aliasing: which elements of a buffer each launch touches.

A binding with an ``offset`` is a slice of a flat buffer (one allocation for every weight): it must lie
inside the buffer at every probed size, and two different slices of one buffer that are both written must
not overlap. A parameter with a ``write_range`` writes part of one axis: the range must lie inside that axis.
Two parameters a kernel declares aliased (``aliases``) must agree in dtype and shape, and every launch binds
them to one buffer; a launch that binds one buffer to two parameters, one of them written, must be running
a kernel that declares them aliased.

>>> # contracts: bind = { W1 = { buffer = "params", offset = "H * D", view = ["H"] } }   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..graph import Launch
from ..model import Binding, TensorParam
from ..shapes import numel, value_at
from ._base import CheckContext, Hit, rule
from .wiring import _at, show_shape


@dataclass(frozen=True)
class _Slice:
    """One launch's binding of a parameter to part of a buffer (a view at an offset)."""

    launch: Launch
    param: TensorParam
    binding: Binding

    def span(self, env: Mapping[str, int]) -> tuple[int, int] | None:
        """``[start, stop)`` in elements of the flat buffer at ``env`` (None where it does not evaluate)."""
        return _span(self.binding, env)

    @property
    def where(self) -> str:
        return f'kernel "{self.launch.kernel.name}" parameter "{self.param.name}", schedule "{self.launch.schedule.name}" step {self.launch.step.index + 1}'

    @property
    def shown(self) -> str:
        b = self.binding
        return f'the view at offset "{b.offset.text}" as [{", ".join(e.text for e in b.view)}]'


def _has_offsets(cs) -> bool:
    """Whether any launch binds a view at an offset (most projects: none, and the view rules stop there)."""
    return any(b.offset is not None for s in cs.schedules for st in s.steps for _, b in st.bind)


def _span(b: Binding, env: Mapping[str, int]) -> tuple[int, int] | None:
    if b.offset is None or b.view is None:
        return None
    off = value_at(b.offset, env)
    dims = [value_at(e, env) for e in b.view]
    if off is None or None in dims:
        return None
    return off, off + numel(dims)


def _overlap(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    if a is None or b is None:
        return None
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo < hi else None


def _envs(ctx: CheckContext, launch: Launch) -> Sequence[Mapping[str, int]]:
    return launch.envs or ctx.wiring.envs


@rule("WRITE_RANGE_OUTSIDE", "A parameter's write_range lies inside the axis it names and is not empty, at every probed size.", "wiring")
def check_write_ranges(ctx: CheckContext) -> Iterator[Hit]:
    cs = ctx.cs
    ranged = [(k, p) for k in cs.kernels for p in k.params if getattr(p, "write_range", None) is not None]
    if not ranged:  # most projects: no partial writes, no wiring walk
        return
    w = ctx.wiring
    launched: dict[str, list[Launch]] = {}
    for launches in w.launches.values():
        for launch in launches:
            if launch.kernel is not None:
                launched.setdefault(launch.kernel.name, []).append(launch)
    slots = cs.slot_indices
    for k, p in ranged:
        r = p.write_range
        if r.axis >= len(p.shape):
            continue
        envs = [env for launch in launched.get(k.name, []) for env in launch.envs] or ([] if k.dims else list(w.envs))
        for env in envs:
            start, stop, extent = (value_at(e, env, slots) for e in (r.start, r.stop, p.shape[r.axis]))
            if None in (start, stop, extent):
                continue
            if start < 0 or stop > extent or start >= stop:
                why = "is empty" if start >= stop else "lies outside it"
                yield Hit(
                    f'Kernel "{k.name}" parameter "{p.name}" writes {r.text} of its shape {show_shape(p.shape, w.envs)}, but at '
                    f"{_at(env, cs)} that is [{start}, {stop}) of an axis of {extent}, which {why}.",
                    r.loc, k.name,
                )  # fmt: skip
                break


@rule("VIEW_OUT_OF_BOUNDS", "A view at an offset into a flat buffer lies inside the buffer at every probed size.", "wiring")
def check_view_bounds(ctx: CheckContext) -> Iterator[Hit]:
    cs = ctx.cs
    if not _has_offsets(cs):
        return
    w = ctx.wiring
    for sname, launches in w.launches.items():
        for launch in launches:
            for p, b in launch.bound():
                buf = cs.buffer_map.get(b.buffer or "")
                if b.offset is None or buf is None:
                    continue
                for env in _envs(ctx, launch):
                    span = _span(b, env)
                    full = [value_at(e, env) for e in buf.shape]
                    if span is None or None in full:
                        continue
                    total = numel(full)
                    if span[0] < 0 or span[1] > total:
                        yield Hit(
                            f'Schedule "{sname}" step {launch.step.index + 1} views buffer "{buf.name}" {show_shape(buf.shape, w.envs)} at offset '
                            f'"{b.offset.text}" as {show_shape(b.view, w.envs)} for parameter "{p.name}": elements [{span[0]}, {span[1]}) at '
                            f"{_at(env, cs)}, but the buffer has {total}.",
                            b.loc.child("offset"), sname,
                        )  # fmt: skip
                        break


@rule("VIEW_OVERLAP", "Two different views at offsets into one flat buffer that are both written do not overlap at any probed size.", "wiring")
def check_view_overlap(ctx: CheckContext) -> Iterator[Hit]:
    """Views that partition a flat buffer (every weight's gradient in one allocation) must not share an
    element: a writer of one would clobber the other. The same view (same offset and size) written by
    several launches is one tensor, not an overlap; views only read may overlap."""
    cs = ctx.cs
    if not _has_offsets(cs):
        return
    w = ctx.wiring
    views: dict[str, dict[tuple, list[_Slice]]] = {}
    for launches in w.launches.values():
        for launch in launches:
            for p, b in launch.bound():
                if b.offset is not None and b.view is not None and b.buffer in cs.buffer_map:
                    s = _Slice(launch, p, b)
                    key = tuple(s.span(env) for env in _envs(ctx, launch))  # [H * D] and [H, D] at 0: one tensor
                    views.setdefault(b.buffer, {}).setdefault(key, []).append(s)
    for buffer, by_key in views.items():
        written = [(key, next(s for s in slices if s.param.writes)) for key, slices in by_key.items() if any(s.param.writes for s in slices)]
        for i, (_, a) in enumerate(written):
            for _, b in written[i + 1 :]:
                pairs = list(zip(_envs(ctx, a.launch), _envs(ctx, b.launch)))
                if all(a.span(ea) == b.span(eb) for ea, eb in pairs):
                    continue  # one tensor written as [H * D] and as [H, D]: the same elements
                for ea, eb in pairs:
                    both = _overlap(a.span(ea), b.span(eb))
                    if both is not None:
                        yield Hit(
                            f'Buffer "{buffer}": {a.shown} (written by {a.where}) overlaps {b.shown} (written by {b.where}) '
                            f"in elements [{both[0]}, {both[1]}) at {_at(ea, cs)}.",
                            a.binding.loc.child("offset"), buffer,
                        )  # fmt: skip
                        break


@rule("ALIAS_MISMATCH", "Two parameters a kernel declares aliased have the same dtype and shape at every probed size.", "wiring")
def check_alias_shapes(ctx: CheckContext) -> Iterator[Hit]:
    cs = ctx.cs
    if not any(k.aliases for k in cs.kernels):
        return
    w = ctx.wiring
    first_envs: dict[str, list[dict[str, int]]] = {}
    for launches in w.launches.values():
        for launch in launches:
            if launch.kernel is not None:
                first_envs.setdefault(launch.kernel.name, launch.envs)
    for k in cs.kernels:
        for a in k.aliases:
            p, q = k.param(a.first), k.param(a.second)
            if not isinstance(p, TensorParam) or not isinstance(q, TensorParam):
                continue
            envs = first_envs.get(k.name) or ([] if k.dims else w.envs)
            differ = p.dtype != q.dtype or len(p.shape) != len(q.shape)
            at = ""
            for env in envs:
                sp, sq = [value_at(e, env) for e in p.shape], [value_at(e, env) for e in q.shape]
                if None not in sp and None not in sq and sp != sq:
                    differ, at = True, f" at {_at(env, cs)}"
                    break
            if differ:
                shown = envs or w.envs
                yield Hit(
                    f'Kernel "{k.name}" declares "{p.name}" and "{q.name}" aliased (one pointer), but "{p.name}" is {p.dtype} '
                    f'{show_shape(p.shape, shown)} and "{q.name}" is {q.dtype} {show_shape(q.shape, shown)}{at}.',
                    a.loc, k.name,
                )  # fmt: skip


def _same_place(a: Binding, b: Binding) -> bool:
    """Whether two bindings give the kernel the same pointer (one buffer at one offset)."""
    return a.buffer == b.buffer and (a.offset.text if a.offset is not None else "0") == (b.offset.text if b.offset is not None else "0")


@rule("ALIAS_UNDECLARED", "A launch binds one buffer (or overlapping views of it) to two parameters, one of them written, only where the kernel declares them aliased.", "wiring")
def check_undeclared_alias(ctx: CheckContext) -> Iterator[Hit]:
    """A kernel handed the same memory twice, reading one pointer and writing the other, was verified on two
    separate buffers unless it declares the aliasing: an in-place launch of a kernel that reads a value after
    another thread overwrote it passes verify and fails in training."""
    cs = ctx.cs
    for sname, launches in ctx.wiring.launches.items():
        for launch in launches:
            k = launch.kernel
            bound = launch.bound()
            if len({b.buffer for _, b in bound}) == len(bound):
                continue  # every parameter has a buffer of its own
            for i, (p, bp) in enumerate(bound):
                for q, bq in bound[i + 1 :]:
                    if bp.buffer != bq.buffer or not (p.writes or q.writes) or k.alias_of(p.name) == q.name:
                        continue
                    if bp.offset is not None or bq.offset is not None:
                        whole = None
                        if bp.offset is None or bq.offset is None:
                            full = cs.buffer_map.get(bp.buffer or "")
                            if full is None:
                                continue
                            whole = full.shape
                        hit = False
                        for env in _envs(ctx, launch):
                            spans = [_span(b, env) if b.offset is not None else (0, numel([value_at(e, env) or 0 for e in whole])) for b in (bp, bq)]
                            if _overlap(*spans) is not None:
                                hit = True
                                break
                        if not hit:
                            continue
                    writer = q if q.writes else p
                    yield Hit(
                        f'Step {launch.step.index + 1} of schedule "{sname}" binds buffer "{bp.buffer}" to both "{p.name}" and "{q.name}" of '
                        f'kernel "{k.name}", which writes "{writer.name}", but the kernel declares no aliasing between them '
                        f'(aliases = [["{p.name}", "{q.name}"]] if it works in place).',
                        bq.loc, k.name,
                    )  # fmt: skip


@rule("ALIAS_NOT_BOUND", "A launch binds two parameters its kernel declares aliased to one buffer (the kernel was verified in place only).", "wiring")
def check_alias_bound(ctx: CheckContext) -> Iterator[Hit]:
    if not any(k.aliases for k in ctx.cs.kernels):
        return
    for sname, launches in ctx.wiring.launches.items():
        for launch in launches:
            k = launch.kernel
            if k is None or not k.aliases:
                continue
            for a in k.aliases:
                bp, bq = launch.step.binding(a.first), launch.step.binding(a.second)
                if bp is None or bq is None or bp.is_null or bq.is_null or _same_place(bp, bq):
                    continue
                yield Hit(
                    f'Kernel "{k.name}" declares "{a.first}" and "{a.second}" aliased (verified in place, one pointer), but step '
                    f'{launch.step.index + 1} of schedule "{sname}" binds them to buffer "{bp.buffer}"{_at_offset(bp)} and buffer "{bq.buffer}"{_at_offset(bq)}.',
                    bq.loc, k.name,
                )  # fmt: skip


def _at_offset(b: Binding) -> str:
    return f' at offset "{b.offset.text}"' if b.offset is not None else ""

