"""Classify the differences between two ISV layouts and decide what they do to checkpoints.

Each kind of change has a stable rule ID (as buf's breaking-change rules do for protobuf) and a
verdict of its own; the diff's verdict is the worst of its changes:

- ``compatible``: an old checkpoint loads byte for byte and its stored fingerprint still matches
  (this is exactly "the fingerprint did not change": only renames, docs and ``shared_writers``);
- ``migratable``: a migrator can carry it over with an old index -> new index mapping, filling new
  slots from their reset policy and rewriting the fingerprint slots;
- ``incompatible``: no index mapping can carry it (a value's bytes or meaning changed).

A change that is not compatible fails ``wireup layout diff`` unless the new contracts acknowledge the
fingerprint shift with an ``[[isv.acknowledge]]`` whose ``from``/``to`` match. ``CHANGE_KINDS`` is the
registry; ``docs/layout.md`` renders it as a table (a test keeps the two in step).

>>> d = diff_layouts(old_cs.isv, new_cs.isv)                 # doctest: +SKIP
>>> [c.rule for c in d.changes], d.verdict                   # doctest: +SKIP
(['SLOT_APPENDED', 'TOTAL_DIM_CHANGED'], 'migratable')
>>> d.migrator[:2]                                           # doctest: +SKIP
[(0, 0), (1, 1)]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..findings import CheckResult, Finding, Severity, make_finding
from ..model import NOWHERE, Acknowledgement, IsvLayout, Loc, Slot
from .fingerprint import fingerprint, format_number

COMPATIBLE = "compatible"
MIGRATABLE = "migratable"
INCOMPATIBLE = "incompatible"
VERDICTS = (COMPATIBLE, MIGRATABLE, INCOMPATIBLE)  # in order of severity


@dataclass(frozen=True)
class ChangeKind:
    """One kind of layout change: stable ID, what changed, its effect on checkpoints, its verdict.

    >>> CHANGE_KINDS["SLOT_APPENDED"].verdict
    'migratable'
    """

    id: str
    what: str
    effect: str
    verdict: str


CHANGE_KINDS: dict[str, ChangeKind] = {
    k.id: k
    for k in (
        ChangeKind("SLOT_APPENDED", "A new slot past the old end of the layout (monotonic growth).",
                   "Old slots keep their indices; the vector grows. A migrator copies every old index and initialises the new slot from its reset policy.", MIGRATABLE),
        ChangeKind("SLOT_INSERTED", "A new slot inside the old layout; later slots usually shift (each reported as SLOT_MOVED).",
                   "Shifted values must move to their new indices and the new slot is initialised from its reset policy.", MIGRATABLE),
        ChangeKind("SLOT_REMOVED", "A slot of the old layout is gone.",
                   "Its stored value is dropped (the new code no longer reads it); later slots may shift.", MIGRATABLE),
        ChangeKind("SLOT_MOVED", "A slot keeps its name but has a new index.",
                   "Its value must be copied from the old index to the new one.", MIGRATABLE),
        ChangeKind("SLOT_RENAMED", "Same index, count, dtype, role and reset policy; new name.",
                   "None: names are not hashed, the bytes and their meaning are unchanged.", COMPATIBLE),
        ChangeKind("SLOT_DTYPE_CHANGED", "A slot's dtype changes.",
                   "Its stored bytes would be reinterpreted; an index mapping cannot convert them.", INCOMPATIBLE),
        ChangeKind("SLOT_ROLE_CHANGED", "A slot's role changes (e.g. ema -> scale).",
                   "The stored value means something else now; carrying it over would be silently wrong.", INCOMPATIBLE),
        ChangeKind("SLOT_RESET_CHANGED", "A slot's reset value for some event changes (or an event is added or dropped).",
                   "Stored values keep their meaning; only future resets differ. The fingerprint (stored in the checkpoint) changes, so a migrator copies every index and rewrites it.", MIGRATABLE),
        ChangeKind("PADDING_REUSED", "A new slot takes indices that were padding.",
                   "The old checkpoint holds padding there, not the new quantity: a migrator must initialise the slot from its reset policy, never carry the padding value (a scale would come back as 0).", MIGRATABLE),
        ChangeKind("TOTAL_DIM_CHANGED", "The ISV total dimension changes.",
                   "A checkpoint's vector has the wrong length for the new code; a migrator resizes it.", MIGRATABLE),
        ChangeKind("SLOT_COUNT_CHANGED", "A grouped slot's count changes (e.g. 48 -> 50 feature normalisers).",
                   "The group's elements are indexed by something outside the layout (features); the layout cannot tell which kept their meaning.", INCOMPATIBLE),
        ChangeKind("ISV_DTYPE_CHANGED", "The dtype of the whole ISV changes.",
                   "Every stored value would be reinterpreted.", INCOMPATIBLE),
        ChangeKind("PADDING_CHANGED", "Padding slots are redeclared (split, merged, resized) with no real slot moving.",
                   "No stored value moves, but the fingerprint changes; a migrator copies every index and rewrites it.", MIGRATABLE),
    )
}  # fmt: skip


@dataclass(frozen=True)
class LayoutChange:
    """One classified change: its rule ID, a one-sentence message, the indices and slot it concerns.

    >>> LayoutChange("SLOT_MOVED", 'Slot "X" moves from index 5 to 6.', 5, 6, "X").verdict
    'migratable'
    """

    rule: str
    message: str
    old_index: int | None
    new_index: int | None
    slot: str
    loc: Loc = field(default=NOWHERE, compare=False, repr=False)

    @property
    def verdict(self) -> str:
        return CHANGE_KINDS[self.rule].verdict


@dataclass
class LayoutDiff:
    """What changed between two layouts and what that means for checkpoints written with the old one.

    ``migrator`` is the old index -> new index mapping a migrator needs (only when the verdict is
    ``migratable``; empty when none is needed or none can exist); ``initialised`` lists the new slots
    it fills from their reset policy and ``rewritten`` the fingerprint slots it overwrites with the new
    fingerprint. ``acknowledged`` is the new contracts' ``[[isv.acknowledge]]`` for this shift, if any.

    >>> d.breaking, d.exit_code                                  # doctest: +SKIP
    (False, 0)
    """

    changes: list[LayoutChange]
    verdict: str
    migrator: list[tuple[int, int]]
    old_fingerprint: str
    new_fingerprint: str
    acknowledged: Acknowledgement | None = None
    initialised: list[Slot] = field(default_factory=list)
    rewritten: list[Slot] = field(default_factory=list)
    new_loc: Loc = field(default=NOWHERE, repr=False)

    @property
    def breaking(self) -> bool:
        """True when old checkpoints break and the new contracts do not acknowledge it."""
        return self.verdict != COMPATIBLE and self.acknowledged is None

    @property
    def exit_code(self) -> int:
        return 1 if self.breaking else 0

    def severity(self, change: LayoutChange) -> Severity:
        """Error for an unacknowledged break, warning for an acknowledged one, note when compatible."""
        if change.verdict == COMPATIBLE:
            return Severity.NOTE
        return Severity.WARNING if self.acknowledged is not None else Severity.ERROR

    def check_result(self) -> CheckResult:
        """The changes as findings (category "layout"), for the printers of ``wireup check``."""
        findings: list[Finding] = [
            make_finding(c.rule, self.severity(c), c.message, c.loc, c.slot or "isv", "layout") for c in self.changes
        ]
        findings.sort(key=Finding.sort_key)
        return CheckResult(findings=findings, ran=list(CHANGE_KINDS), subjects={k: ["isv"] for k in CHANGE_KINDS})

    def verdict_line(self) -> str:
        """``verdict: migratable (acknowledged in contracts/isv.toml:125: "...")``."""
        line = f"verdict: {self.verdict}"
        if self.verdict == COMPATIBLE:
            return line + " (old checkpoints load as they are)"
        if self.acknowledged is not None:
            where = str(self.acknowledged.loc) or "the new contracts"
            return line + f' (acknowledged in {where}: "{self.acknowledged.reason}")'
        return line + f" (not acknowledged: add an [[isv.acknowledge]] from {self.old_fingerprint} to {self.new_fingerprint} with a reason)"

    def fingerprint_line(self) -> str:
        """``fingerprint: 0x940390f49558c7e8 -> 0x9d2828b683dc5492``."""
        same = " (unchanged)" if self.old_fingerprint == self.new_fingerprint else ""
        return f"fingerprint: {self.old_fingerprint} -> {self.new_fingerprint}{same}"

    def migrator_line(self) -> str:
        """``migrator: old 0..106 -> new 0..106; rewrite ...; initialise ...`` (runs of pairs compressed)."""
        if self.verdict == COMPATIBLE:
            return "migrator: none needed"
        if self.verdict == INCOMPATIBLE:
            kinds = sorted({c.rule for c in self.changes if c.verdict == INCOMPATIBLE})
            return f"migrator: none possible ({', '.join(kinds)} cannot be carried by an index mapping)"
        parts = [f"old {o} -> new {n}" for o, n in _runs(self.migrator)] or ["no old value is carried"]
        for s in self.rewritten:
            parts.append(f"rewrite {_span(s.index, s.count)} \"{s.name}\" with {self.new_fingerprint}")
        for s in self.initialised:
            parts.append(f"initialise {_span(s.index, s.count)} \"{s.name}\" from its reset policy ({_reset_text(s)})")
        return "migrator: " + "; ".join(parts)

    def summary_lines(self) -> list[str]:
        """The three closing lines of the text output: verdict, fingerprint old -> new, migrator."""
        return [self.verdict_line(), self.fingerprint_line(), self.migrator_line()]

    def as_dict(self) -> dict:
        """A JSON-ready summary (added as ``"layout"`` to the JSON and SARIF outputs)."""
        return {
            "verdict": self.verdict,
            "old_fingerprint": self.old_fingerprint,
            "new_fingerprint": self.new_fingerprint,
            "acknowledged": None
            if self.acknowledged is None
            else {"reason": self.acknowledged.reason, "file": self.acknowledged.loc.file, "line": self.acknowledged.loc.line},
            "migrator": [[o, n] for o, n in self.migrator],
            "initialised": [s.name for s in self.initialised],
            "rewritten": [s.name for s in self.rewritten],
            "changes": [
                {"rule": c.rule, "verdict": c.verdict, "slot": c.slot, "old_index": c.old_index, "new_index": c.new_index}
                for c in self.changes
            ],
        }


def diff_layouts(old: IsvLayout, new: IsvLayout) -> LayoutDiff:
    """Classify every change from ``old`` to ``new`` and decide the verdict and migrator mapping.

    Real slots are matched by name; padding is compared by the indices it covers (padding carries
    nothing, so splitting ``RESERVED`` to make room for a slot is not a move).

    >>> d = diff_layouts(layout_at_06d0fa4, layout_now)          # doctest: +SKIP
    >>> [(c.rule, c.new_index) for c in d.changes]               # doctest: +SKIP
    [('SLOT_APPENDED', 117), ('TOTAL_DIM_CHANGED', None)]
    """
    changes: list[LayoutChange] = []
    old_fp, new_fp = fingerprint(old), fingerprint(new)
    old_real = _by_name(s for s in old.slots if s.role != "padding")
    new_real = _by_name(s for s in new.slots if s.role != "padding")
    old_padding = {i: s for s in old.slots if s.role == "padding" for i in s.indices}
    old_end = max([old.total_dim, *(s.index + s.count for s in old.slots)])
    carried: list[tuple[Slot, Slot]] = []  # (old, new) pairs whose values a migrator copies

    if old.dtype != new.dtype:
        changes.append(LayoutChange("ISV_DTYPE_CHANGED", f"The ISV dtype changes {old.dtype} -> {new.dtype}; every stored value would be reinterpreted.", None, None, "", new.loc.child("dtype")))
    if old.total_dim != new.total_dim:
        changes.append(LayoutChange("TOTAL_DIM_CHANGED", f"The ISV total dimension changes {old.total_dim} -> {new.total_dim}; an old checkpoint's vector no longer has the length the new code allocates.", None, None, "", new.loc.child("total_dim")))

    for name, n in new_real.items():
        o = old_real.get(name)
        if o is None:
            continue
        before = len(changes)
        if o.index != n.index:
            what = "writes the new fingerprint there" if n.role == "fingerprint" else "copies its value to the new place"
            changes.append(LayoutChange("SLOT_MOVED", f'Slot "{name}" moves from {_span(o.index, o.count)} to {_span(n.index, n.count)}; a migrator {what}.', o.index, n.index, name, n.loc.child("index")))
        if o.count != n.count:
            changes.append(LayoutChange("SLOT_COUNT_CHANGED", f'Slot "{name}" ({_span(n.index, n.count)}) changes count {o.count} -> {n.count}; the layout cannot say which of its elements kept their meaning.', o.index, n.index, name, n.loc.child("count")))
        if o.dtype != n.dtype:
            changes.append(LayoutChange("SLOT_DTYPE_CHANGED", f'Slot "{name}" ({_span(n.index, n.count)}) changes dtype {o.dtype} -> {n.dtype}; its stored bytes cannot be carried over by an index mapping.', o.index, n.index, name, n.loc.child("dtype")))
        if o.role != n.role:
            changes.append(LayoutChange("SLOT_ROLE_CHANGED", f'Slot "{name}" ({_span(n.index, n.count)}) changes role {o.role} -> {n.role}; its stored value means something else now.', o.index, n.index, name, n.loc.child("role")))
        reset_delta = _reset_delta(o, n)
        if reset_delta:
            changes.append(LayoutChange("SLOT_RESET_CHANGED", f'Slot "{name}" ({_span(n.index, n.count)}) changes its reset policy: {reset_delta}; stored values keep their meaning, only future resets differ.', o.index, n.index, name, n.loc.child("reset")))
        if all(c.verdict != INCOMPATIBLE for c in changes[before:]):
            carried.append((o, n))

    gone = {name: o for name, o in old_real.items() if name not in new_real}
    added = [n for name, n in new_real.items() if name not in old_real]
    initialised: list[Slot] = []
    for n in added:
        twin = next(
            (o for o in gone.values()
             if (o.index, o.count, o.dtype, o.role, _reset_map(o)) == (n.index, n.count, n.dtype, n.role, _reset_map(n))),
            None,
        )  # fmt: skip
        if twin is not None:
            del gone[twin.name]
            carried.append((twin, n))
            changes.append(LayoutChange("SLOT_RENAMED", f'Slot "{twin.name}" ({_span(n.index, n.count)}) is renamed to "{n.name}"; names are not hashed, so checkpoints are unaffected.', twin.index, n.index, n.name, n.loc.child("name")))
            continue
        initialised.append(n)
        reused = sorted({old_padding[i].name for i in n.indices if i in old_padding})
        if reused:
            pads = ", ".join(f'"{p}"' for p in reused)
            changes.append(LayoutChange("PADDING_REUSED", f'Slot "{n.name}" takes {_span(n.index, n.count)}, which was padding ({pads}); a migrator must initialise it from its reset policy ({_reset_text(n)}), never carry the padding value.', None, n.index, n.name, n.loc.child("index")))
        elif n.index >= old_end:
            changes.append(LayoutChange("SLOT_APPENDED", f'Slot "{n.name}" is appended at {_span(n.index, n.count)}, past the old end of the layout (total dimension {old_end}); old slots keep their indices and a migrator initialises it from its reset policy ({_reset_text(n)}).', None, n.index, n.name, n.loc.child("index")))
        else:
            shifted = sum(1 for o, m in carried if m.index != o.index and o.index >= n.index)
            shift = f"{shifted} later slot{'s' if shifted != 1 else ''} shift (SLOT_MOVED)" if shifted else "no slot shifts"
            changes.append(LayoutChange("SLOT_INSERTED", f'Slot "{n.name}" is inserted at {_span(n.index, n.count)}, inside the old layout (0..{old_end - 1}); {shift}, and a migrator initialises it from its reset policy ({_reset_text(n)}).', None, n.index, n.name, n.loc.child("index")))
    for o in gone.values():
        changes.append(LayoutChange("SLOT_REMOVED", f'Slot "{o.name}" ({_span(o.index, o.count)}) is removed; a migrator drops its stored value.', o.index, None, o.name, new.loc))

    if old_fp != new_fp and all(c.verdict == COMPATIBLE for c in changes):
        # Only padding declarations (or slots the name matching cannot see, e.g. a duplicate name)
        # differ; the fingerprint still shifts, so a checkpoint needs its fingerprint slots rewritten.
        old_pad = _padding_text(old)
        new_pad = _padding_text(new)
        if old_pad != new_pad:
            msg = f"Padding changes from {old_pad} to {new_pad}; no stored value moves, but the fingerprint changes."
        else:
            msg = "The layout fingerprint changes but no slot change could be classified (a duplicate slot name?); no stored value is known to move."
        changes.append(LayoutChange("PADDING_CHANGED", msg, None, None, "", new.loc))

    order = list(CHANGE_KINDS)
    # Slot changes in index order, then the layout-wide ones (total dimension, dtype, padding).
    changes.sort(key=lambda c: (_change_index(c) is None, _change_index(c) or 0, order.index(c.rule), c.slot))
    verdict = max((c.verdict for c in changes), key=VERDICTS.index, default=COMPATIBLE)
    if old_fp != new_fp and verdict == COMPATIBLE:  # cannot happen after PADDING_CHANGED; kept as a guard
        verdict = MIGRATABLE

    migrator: list[tuple[int, int]] = []
    rewritten: list[Slot] = []
    if verdict == MIGRATABLE:
        for o, n in sorted(carried, key=lambda p: p[0].index):
            if n.role == "fingerprint":
                rewritten.append(n)  # holds the layout's own fingerprint: written anew, never copied
                continue
            migrator.extend((o.index + k, n.index + k) for k in range(min(o.count, n.count)))
        rewritten.extend(s for s in initialised if s.role == "fingerprint")
        initialised = [s for s in initialised if s.role != "fingerprint"]
    else:
        initialised = []
    ack = next((a for a in new.acknowledgements if a.from_fingerprint == old_fp and a.to_fingerprint == new_fp), None)
    return LayoutDiff(
        changes=changes,
        verdict=verdict,
        migrator=sorted(migrator),
        old_fingerprint=old_fp,
        new_fingerprint=new_fp,
        acknowledged=ack if old_fp != new_fp else None,
        initialised=sorted(initialised, key=lambda s: s.index),
        rewritten=sorted(rewritten, key=lambda s: s.index),
        new_loc=new.loc,
    )


def _change_index(c: LayoutChange) -> int | None:
    return c.new_index if c.new_index is not None else c.old_index


def _by_name(slots) -> dict[str, Slot]:
    out: dict[str, Slot] = {}
    for s in slots:
        out.setdefault(s.name, s)  # first declaration wins, as in ContractSet.slot_map
    return out


def _reset_map(s: Slot) -> dict[str, str]:
    return {ev: format_number(v) for ev, v in s.reset}


def _reset_text(s: Slot) -> str:
    return ", ".join(f"{ev} {format_number(v)}" for ev, v in sorted(s.reset)) or "no reset values"


def _reset_delta(o: Slot, n: Slot) -> str:
    a, b = _reset_map(o), _reset_map(n)
    return ", ".join(f"{ev} {a.get(ev, '(none)')} -> {b.get(ev, '(none)')}" for ev in sorted(set(a) | set(b)) if a.get(ev) != b.get(ev))


def _span(index: int, count: int) -> str:
    return f"index {index}" if count == 1 else f"indices {index}..{index + count - 1}"


def _padding_text(layout: IsvLayout) -> str:
    pads = sorted((s for s in layout.slots if s.role == "padding"), key=lambda s: s.index)
    if not pads:
        return "none"
    return ", ".join(f"{_span(s.index, s.count)} ({s.dtype}; {_reset_text(s)})" for s in pads)


def _runs(pairs: list[tuple[int, int]]) -> list[tuple[str, str]]:
    """Compress consecutive pairs: [(0,0),(1,1),(2,3)] -> [("0..1","0..1"), ("2","3")]."""
    out: list[tuple[str, str]] = []
    start = prev = None
    for o, n in sorted(pairs):
        if prev is not None and o == prev[0] + 1 and n == prev[1] + 1:
            prev = (o, n)
            continue
        if start is not None:
            out.append(_run_text(start, prev))
        start = prev = (o, n)
    if start is not None:
        out.append(_run_text(start, prev))
    return out


def _run_text(start: tuple[int, int], end: tuple[int, int]) -> tuple[str, str]:
    if start == end:
        return str(start[0]), str(start[1])
    return f"{start[0]}..{end[0]}", f"{start[1]}..{end[1]}"
