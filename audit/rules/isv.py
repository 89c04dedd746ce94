"""ISV rules: slot indices, reset policies, read-after-write order and writers within a schedule."""

from __future__ import annotations

from collections.abc import Iterator

from ..dims import Expr
from ..findings import Severity
from ..model import ADDITIVE_ROLES, MULTIPLICATIVE_ROLES, HostRead, IsvParam, ScalarParam
from ._base import CheckContext, Hit, rule


@rule("SLOT_INDEX", "ISV slot indices are unique and inside the total dimension.", "isv")
def check_slot_indices(ctx: CheckContext) -> Iterator[Hit]:
    isv = ctx.cs.isv
    if isv is None:
        return
    if isv.total_dim < 1:
        yield Hit(f"The ISV total dimension is {isv.total_dim}; it must be at least 1.", isv.loc.child("total_dim"), "isv")
    earlier: list = []  # slots with a valid count, in declaration order
    overlapping = _any_overlap(isv.slots)  # without any, no slot can clash (and the search is quadratic)
    for s in isv.slots:
        if s.count < 1:
            yield Hit(f'ISV slot "{s.name}" has count {s.count}; it must be at least 1.', s.loc.child("count"), s.name)
            continue
        if s.index < 0 or s.index + s.count > isv.total_dim:
            span = f"index {s.index}" if s.count == 1 else f"indices {s.index}..{s.index + s.count - 1}"
            yield Hit(f'ISV slot "{s.name}" has {span}, outside the total dimension {isv.total_dim}.', s.loc.child("index"), s.name)
        # the first index of s that an earlier slot already holds (spans compared as intervals: counts can be huge)
        clash = min((max(s.index, t.index) for t in earlier if _overlap(s, t)), default=None) if overlapping else None
        if clash is not None:
            owner = next(t for t in earlier if t.index <= clash < t.index + t.count)
            if owner.name != s.name:
                yield Hit(f'ISV slot "{s.name}" has index {clash}, already taken by slot "{owner.name}".', s.loc.child("index"), s.name)
        earlier.append(s)


def _overlap(a, b) -> bool:
    return a.index < b.index + b.count and b.index < a.index + a.count


def _any_overlap(slots) -> bool:
    """Whether any two slots with a valid count share an index: sort by first index, sweep the ends."""
    end = None
    for lo, hi in sorted((s.index, s.index + s.count) for s in slots if s.count >= 1):
        if end is not None and lo < end:
            return True
        end = hi if end is None else max(end, hi)
    return False


@rule("SLOT_GAP", "Every ISV index belongs to a slot (declare unused indices as padding).", "isv", Severity.WARNING)
def check_slot_gaps(ctx: CheckContext) -> Iterator[Hit]:
    isv = ctx.cs.isv
    if isv is None:
        return
    gaps, start = [], 0  # (first, last) index runs no slot covers, by interval arithmetic
    for lo, hi in sorted((s.index, s.index + s.count) for s in isv.slots if s.count >= 1):
        if lo > start:
            gaps.append((start, min(lo, isv.total_dim) - 1))
        start = max(start, hi)
        if start >= isv.total_dim:
            break
    if start < isv.total_dim:
        gaps.append((start, isv.total_dim - 1))
    gaps = [(a, b) for a, b in gaps if a <= b]
    if gaps:
        text = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in gaps)
        if len(gaps) == 1 and gaps[0][0] == gaps[0][1]:
            message = f"ISV index {text} belongs to no slot; declare it as padding."
        else:
            message = f"ISV indices {text} belong to no slot; declare them as padding."
        yield Hit(message, isv.loc.child("total_dim"), "isv")


@rule("RESET_POLICY", "Every slot has a reset value for every declared reset event, and for no other event.", "isv")
def check_reset_policy(ctx: CheckContext) -> Iterator[Hit]:
    isv = ctx.cs.isv
    if isv is None:
        return
    if not isv.reset_events:
        yield Hit('The ISV layout declares no reset events (e.g. reset_events = ["FoldReset"]).', isv.loc, "isv")
    for s in isv.slots:
        events = [ev for ev, _ in s.reset]
        for ev in isv.reset_events:
            if ev not in events:
                yield Hit(f'ISV slot "{s.name}" has no reset value for event "{ev}".', s.loc.child("reset"), s.name)
        for ev in events:
            if ev not in isv.reset_events:
                yield Hit(f'ISV slot "{s.name}" resets on "{ev}", which is not a declared reset event ({", ".join(isv.reset_events)}).', s.loc.child("reset", ev), s.name)


@rule("DIVISOR_RESET_ZERO", "A slot used as a divisor or scale never resets to 0.", "isv")
def check_divisor_reset(ctx: CheckContext) -> Iterator[Hit]:
    isv = ctx.cs.isv
    if isv is None:
        return
    for s in isv.slots:
        if s.role in MULTIPLICATIVE_ROLES:
            for ev, v in s.reset:
                if v == 0.0:
                    yield Hit(
                        f'ISV slot "{s.name}" is a {s.role} but resets to 0.0 on "{ev}"; a divisor must reset to 1.0, the multiplicative identity.',
                        s.loc.child("reset", ev), s.name,
                    )  # fmt: skip


@rule("RESET_CONTRADICTS_ROLE", "Multiplicative slots (scale, divisor) reset to 1.0 and additive ones (sum, counter) to 0.0.", "isv")
def check_reset_role(ctx: CheckContext) -> Iterator[Hit]:
    isv = ctx.cs.isv
    if isv is None:
        return
    for s in isv.slots:
        for ev, v in s.reset:
            if s.role in MULTIPLICATIVE_ROLES and v not in (1.0, 0.0, "keep"):
                yield Hit(f'ISV slot "{s.name}" is a {s.role} but resets to {v} on "{ev}"; expected 1.0.', s.loc.child("reset", ev), s.name)
            elif s.role in ADDITIVE_ROLES and v not in (0.0, "keep"):
                yield Hit(f'ISV slot "{s.name}" is a {s.role} but resets to {v} on "{ev}"; expected 0.0.', s.loc.child("reset", ev), s.name)
            elif s.role == "fingerprint" and v != "keep":
                yield Hit(f'ISV slot "{s.name}" holds the layout fingerprint but resets to {v} on "{ev}"; expected "keep".', s.loc.child("reset", ev), s.name)


@rule("ISV_READ_BEFORE_WRITE", "Within a schedule, a kernel reads an ISV slot only after the launch that writes it.", "isv")
def check_isv_order(ctx: CheckContext) -> Iterator[Hit]:
    w = ctx.wiring
    for sname, reads in w.slot_reads.items():
        writes = w.slot_writes[sname]
        for step, kernel, slot, previous in reads:
            if previous:
                continue
            own = any(ws == step and wslot == slot for ws, _, wslot in writes)
            earlier = any(ws < step and wslot == slot for ws, _, wslot in writes)
            later = [(ws, wk) for ws, wk, wslot in writes if ws > step and wslot == slot]
            if later and not earlier and not own:
                ws, wk = later[0]
                k = ctx.cs.kernel_map[kernel]
                read = next(r for r in k.isv_reads if r.slot == slot)
                yield Hit(
                    f'Kernel "{kernel}" reads ISV slot "{slot}" at step {step + 1} of schedule "{sname}", before "{wk}" writes it at step {ws + 1}.',
                    read.loc, kernel,
                )  # fmt: skip


@rule("ISV_MULTIPLE_WRITERS", "Two kernels write one ISV slot in a schedule only where the slot declares them as shared writers.", "isv")
def check_isv_writers(ctx: CheckContext) -> Iterator[Hit]:
    w = ctx.wiring
    for sname, writes in w.slot_writes.items():
        by_slot: dict[str, list[str]] = {}
        for _, kernel, slot in writes:
            names = by_slot.setdefault(slot, [])
            if kernel not in names:
                names.append(kernel)
        for slot, kernels in by_slot.items():
            s = ctx.cs.slot_map.get(slot)
            if len(kernels) > 1 and s is not None and not set(kernels) <= set(s.shared_writers):
                listed = ", ".join(f'"{k}"' for k in kernels)
                yield Hit(f'ISV slot "{slot}" is written by {listed} in schedule "{sname}", but the slot does not declare them as shared writers.', s.loc, slot)


@rule("ISV_ACCESS_DECLARED", "A kernel that reads or writes ISV slots takes the ISV pointer, and every slot it is passed by index is a declared read or write.", "isv")
def check_isv_access(ctx: CheckContext) -> Iterator[Hit]:
    for k in ctx.cs.kernels:
        has_ptr = any(isinstance(p, IsvParam) for p in k.params)
        touched = {r.slot for r in k.isv_reads} | set(k.isv_writes)
        if touched and not has_ptr:
            yield Hit(f'Kernel "{k.name}" declares ISV reads or writes but has no parameter of kind "isv".', k.loc, k.name)
        if has_ptr and not touched:
            yield Hit(f'Kernel "{k.name}" takes the ISV pointer but declares no ISV reads or writes.', k.loc, k.name)
        for p in k.params:
            if isinstance(p, ScalarParam) and isinstance(p.value, Expr):
                for slot in sorted(p.value.slots - touched):
                    yield Hit(f'Kernel "{k.name}" parameter "{p.name}" passes slot "{slot}", which the kernel does not declare in isv_reads or isv_writes.', p.loc.child("value"), k.name)



@rule(
    "HOST_READ_IN_GRAPH",
    'A scalar read on the host from an ISV slot (isv(SLOT)) is not passed in a schedule captured into a CUDA graph, unless the schedule is re-captured every step (recapture = "every_step").',
    "isv",
)
def check_host_read_in_graph(ctx: CheckContext) -> Iterator[Hit]:
    # a launch argument is copied into the graph at capture: a host read there is frozen for every replay,
    # while the slot it read moves every training step
    for sched in ctx.cs.schedules:
        if not sched.graph_capture or sched.recapture == "every_step":
            continue
        for step in sched.launches:
            k = ctx.cs.kernel_map.get(step.launch or "")
            if k is None:
                continue
            for p in k.params:
                if not isinstance(p, ScalarParam):
                    continue
                arg = step.arg(p.name)
                value = arg if arg is not None else p.value
                if not isinstance(value, HostRead):
                    continue
                where = step.loc.child("args", p.name) if arg is not None else p.loc.child("value")
                yield Hit(
                    f'Schedule "{sched.name}" is captured into a CUDA graph, but step {step.index + 1} passes scalar "{p.name}" '
                    f'of kernel "{k.name}" as {value.text}, read on the host at capture and frozen for every replay; pass the '
                    f'ISV pointer and the slot index instead, or declare recapture = "every_step".',
                    where, sched.name,
                )  # fmt: skip
