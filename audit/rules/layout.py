"""Layout rules: the pinned fingerprint matches the layout, and the generated constants are current.

Both stay cheap on a clean tree: the fingerprint is one sha256 over ~120 short lines, and generated
files are checked through the digests in their headers (no Jinja import, no rendering). Git is run
only when the pin is stale, to name what changed since the pinned layout.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import UsageError
from ._base import CheckContext, Hit, rule


@rule("FINGERPRINT_PIN", "The [isv] table pins the fingerprint of the layout it declares.", "layout")
def check_fingerprint_pin(ctx: CheckContext) -> Iterator[Hit]:
    isv = ctx.cs.isv
    if isv is None:
        return
    computed = ctx.fact("fingerprint")  # audit.api.fingerprint_facts, shared with the report
    where = isv.loc.file or "the contracts"
    if isv.fingerprint is None:
        yield Hit(
            f'The [isv] table in "{where}" pins no layout fingerprint; add fingerprint = "{computed}" so that every later layout change shows up in review.',
            isv.loc, "isv",
        )  # fmt: skip
        return
    if isv.fingerprint == computed:
        return
    yield Hit(_stale_pin_message(ctx, isv, computed), isv.loc.child("fingerprint"), "isv")


def _stale_pin_message(ctx: CheckContext, isv, computed: str) -> str:
    """Name what changed since the pin: find the revision whose layout hashes to it and diff."""
    from ..layout.diff import COMPATIBLE, diff_layouts
    from ..layout.fingerprint import fingerprint
    from ..layout.gitrev import HISTORY_LIMIT, layout_history

    root = ctx.config.root if ctx.config else ctx.cs.root
    contracts = ctx.config.contracts if ctx.config else "contracts"
    head = f"The pinned ISV layout fingerprint {isv.fingerprint} does not match the layout, which hashes to {computed}"
    fix = f'set fingerprint = "{computed}"'
    for sha, old in layout_history(root, contracts, HISTORY_LIMIT, isv.loc.file or None):
        if fingerprint(old) != isv.fingerprint:
            continue
        d = diff_layouts(old, isv)
        changed = ", ".join(_brief(c, old, isv) for c in d.changes) or "only padding changed"
        if d.verdict != COMPATIBLE and d.acknowledged is None:
            fix += f" and acknowledge the shift ({d.verdict}) with an [[isv.acknowledge]] from {isv.fingerprint} to {computed}"
        return f"{head}: the layout at revision {sha[:7]} hashes to the pin and since then {changed}; {fix}."
    return (
        f"{head}; no layout among the last {HISTORY_LIMIT} revisions of the contracts hashes to the pin, so the changed "
        f"slots cannot be named; review the change with `wireup layout diff --against REV`, then {fix}."
    )


def _brief(c, old, new) -> str:
    """``SLOT_APPENDED "AUX_LABEL_SCALE_EMA" at 117`` (the short form used inside one message)."""
    if c.rule == "TOTAL_DIM_CHANGED":
        return f"TOTAL_DIM_CHANGED {old.total_dim} -> {new.total_dim}"
    if c.rule == "ISV_DTYPE_CHANGED":
        return f"ISV_DTYPE_CHANGED {old.dtype} -> {new.dtype}"
    if not c.slot:
        return c.rule
    if c.old_index is not None and c.new_index is not None and c.old_index != c.new_index:
        return f'{c.rule} "{c.slot}" {c.old_index} -> {c.new_index}'
    return f'{c.rule} "{c.slot}" at {c.new_index if c.new_index is not None else c.old_index}'


#: Most ISV indices the generated files describe (their reset tables walk every index); the shipped
#: layout has 117.
MAX_GENERATED_SLOTS = 1 << 20


def refuse_huge_layout(isv) -> str | None:
    """Why the generated files of ``isv`` are not rendered (it spans too many indices), or None."""
    largest = max([isv.total_dim, *(s.index + s.count for s in isv.slots)])
    if largest > MAX_GENERATED_SLOTS:
        return f"the layout spans {largest} indices; generated constants cover at most {MAX_GENERATED_SLOTS} (2^20)."
    return None


@rule("GENERATED_STALE", "Every generated slot-constant file exists and matches the layout (run `wireup layout generate`).", "layout")
def check_generated(ctx: CheckContext) -> Iterator[Hit]:
    isv = ctx.cs.isv
    if isv is None or ctx.config is None:
        return
    from ..layout.codegen import generated_files, layout_context, stale_reason

    source = isv.loc.file or ctx.config.contracts
    too_large = refuse_huge_layout(isv)
    if too_large:
        yield Hit(f"The slot constants cannot be generated: {too_large}", isv.loc, "isv")
        return
    try:
        files = generated_files(ctx.config.generated)
        context = layout_context(isv, source)
    except UsageError as exc:
        yield Hit(f"The slot constants cannot be generated: {exc}", isv.loc, "isv")
        return
    for f in files:
        reason = stale_reason(ctx.config.path(f.path), isv, f.lang, source, context)
        if reason:
            yield Hit(f'Generated file "{f.path}" {reason}; run `wireup layout generate`.', isv.loc, f.path)
