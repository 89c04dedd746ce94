"""Evidence rules: every kernel and schedule has a passing GPU verification of its current source.

Without ``--require-evidence`` a stale or missing record is a warning (CPU-only CI can still pass); with
it, both are errors. Either way the statuses come from :func:`audit.evidence.freshness`, the one
function ``wireup audit``, ``wireup report`` and the pytest plugin use too: a record covers a kernel when
its source-closure and contract hashes, build flags and architecture match the tree, what its verification
read outside the contract matches (records of evidence format 3 and later name it) and, where nvcc built
the kernels here, its code hash (the cubin without debug information) matches the build's, so an edited
kernel or an edited buffer domain it draws from cannot ride on an old record and a clone at another path
keeps its evidence.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..findings import Severity
from ._base import CheckContext, Hit, rule

# what --require-evidence (wireup check, pytest --wireup-require-evidence) turns from warnings into errors
REQUIRE_EVIDENCE_ESCALATES = ("EVIDENCE_STALE", "EVIDENCE_MISSING")


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


@rule(
    "EVIDENCE_STALE",
    "The latest GPU verification of every kernel and schedule matches its current source, contract, build flags, architecture, compiled code and what it read outside its contract (dims, ISV layout, bound buffers and their writers' domains, where the record names them).",
    "evidence",
    Severity.WARNING,
)
def check_stale(ctx: CheckContext) -> Iterator[Hit]:
    for f in ctx.fact("evidence").values():
        if f.status == "stale":
            what = "Kernel" if f.kind == "kernel" else "Schedule"
            yield Hit(f'{what} "{f.subject}" has no GPU verification of its current build: {f.reason}.', _loc(ctx, f.subject, f.kind), f.subject)


@rule("EVIDENCE_FAILED", "No kernel or schedule's current source has a failing GPU verification.", "evidence")
def check_failed(ctx: CheckContext) -> Iterator[Hit]:
    for f in ctx.fact("evidence").values():
        if f.status == "failed":
            what = "Kernel" if f.kind == "kernel" else "Schedule"
            yield Hit(f'{what} "{f.subject}" failed GPU verification: {f.reason}.', _loc(ctx, f.subject, f.kind), f.subject)
