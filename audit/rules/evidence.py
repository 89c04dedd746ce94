"""Evidence rules: every kernel and schedule has a passing GPU verification of its current source.

Without ``--require-evidence`` a stale or missing record is a warning (CPU-only CI can still pass); with
it, both are errors, and the source, contract and cubin hashes are re-derived from the current tree so
an edited kernel cannot ride on an old record.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..findings import Severity
from ._base import CheckContext, Hit, rule


def _loc(ctx: CheckContext, name: str, kind: str):
    if kind == "kernel":
        return ctx.cs.kernel_map[name].loc
    return ctx.cs.schedule_map[name].loc


@rule("EVIDENCE_MISSING", "Every kernel and schedule has a GPU verification record.", "evidence", Severity.WARNING)
def check_missing(ctx: CheckContext) -> Iterator[Hit]:
    for f in ctx.fact("evidence").values():
        if f.status == "missing":
            what = "Kernel" if f.kind == "kernel" else "Schedule"
            yield Hit(f'{what} "{f.subject}" has never been verified on a GPU (no record under the evidence folder).', _loc(ctx, f.subject, f.kind), f.subject)


@rule("EVIDENCE_STALE", "The latest GPU verification of every kernel and schedule matches its current source, contract and cubin.", "evidence", Severity.WARNING)
def check_stale(ctx: CheckContext) -> Iterator[Hit]:
    for f in ctx.fact("evidence").values():
        if f.status == "stale":
            what = "Kernel" if f.kind == "kernel" else "Schedule"
            yield Hit(f'{what} "{f.subject}" changed since its last GPU verification: {f.reason}.', _loc(ctx, f.subject, f.kind), f.subject)


@rule("EVIDENCE_FAILED", "No kernel or schedule's current source has a failing GPU verification.", "evidence")
def check_failed(ctx: CheckContext) -> Iterator[Hit]:
    for f in ctx.fact("evidence").values():
        if f.status == "failed":
            what = "Kernel" if f.kind == "kernel" else "Schedule"
            yield Hit(f'{what} "{f.subject}" failed GPU verification: {f.reason}.', _loc(ctx, f.subject, f.kind), f.subject)
