"""Printers over the same results: the ``--list`` listing, the summary table, and the per-kernel JSON
record ``reports/mutation/<kernel>.json`` that ``wireup report`` reads.

The JSON is deterministic for a given source, settings and outcome: keys sorted, lists in source order,
no timings; only ``device``, ``backend``, ``versions`` and ``date`` describe the run itself.

>>> render_list([])
'0 mutants.\\n'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..output import write_output
from ..report.filters import percent
from ._mutants import Mutant
from ._operators import OPERATORS
from ._results import KernelMutation, MutationRun

FORMAT = "wireup-mutation-1"
UNCLASSIFIED = "missing check (or unproven equivalent)"


def render_list(mutants: Sequence[Mutant], generated: dict[str, int] | None = None, diffs: bool = False,
                empty: dict[str, str] | None = None, siblings: dict[str, tuple[str, ...]] | None = None) -> str:  # fmt: skip
    """One line per mutant (kernel, id, file:line, before -> after), a count per kernel, and with
    ``diffs`` each mutant's unified diff; ``empty`` says why a kernel or header has none (one line each);
    ``siblings`` (mutant key -> the other kernels of its source that run its line) marks those mutants.

    >>> render_list([], {"act.cuh": 0}, empty={"act.cuh": "none of its including kernels (act) reaches a function of it."})
    'act.cuh: 0 mutants: none of its including kernels (act) reaches a function of it.\\n0 mutants.\\n'
    """
    lines = [f"{k}: 0 mutants: {why}" for k, why in (empty or {}).items()]
    kernels = list(dict.fromkeys(m.kernel for m in mutants))
    width = max((len(m.id) for m in mutants), default=0)
    for k in kernels:
        mine = [m for m in mutants if m.kernel == k]
        ops = {op.id: sum(1 for m in mine if m.operator == op.id) for op in OPERATORS}
        ops = {o: n for o, n in ops.items() if n}
        total = (generated or {}).get(k, len(mine))
        of = f" of {total}" if total != len(mine) else ""
        judged = f", each judged against {len(mine[0].judged_by)} including kernel(s): {', '.join(mine[0].judged_by)}" if mine[0].is_header else ""
        shared = [m for m in mine if m.key in (siblings or {})]
        if shared:
            them = ", ".join(dict.fromkeys(s for m in shared for s in siblings[m.key]))  # type: ignore[index]
            judged += f"; {len(shared)} in code {them} run(s) too, judged by them where the kernel's own checks pass"
        lines.append(f"{k}: {len(mine)}{of} mutant(s) in {mine[0].source} (" + ", ".join(f"{o} {n}" for o, n in ops.items()) + f"){judged}")
        for m in mine:
            also = f"  [also {', '.join(siblings[m.key])}]" if siblings and m.key in siblings else ""
            lines.append(f"  {m.id.ljust(width)}  {m.source}:{m.line}  {m.summary}{also}")
            if diffs:
                lines.extend("    " + x for x in m.diff.rstrip("\n").splitlines())
    lines.append(f"{len(mutants)} mutant{'s' if len(mutants) != 1 else ''}.")
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "-" if x is None else percent(x)


def survivor_row(m: Mutant, record: Any = None) -> dict:
    """A survivor of the JSON record: the mutant and its classification (an equivalence record or none)."""
    return {
        "id": m.id, "operator": m.operator, "line": m.line, "change": m.summary, "diff": m.diff,
        "equivalent": record is not None, "reason": record.reason if record is not None else UNCLASSIFIED,
    }  # fmt: skip


def render_table(run: MutationRun, diffs: bool = True) -> str:
    """The summary table, the checks that caught mutants, stale records, errors, and every unclassified
    survivor (with its diff)."""
    head = ("kernel", "selected", "stillborn", "identical", "mutants", "caught", "equivalent", "survived", "score")
    rows = [head]
    for k in run.kernels:
        rows.append((k.kernel, str(k.selected), str(k.count("stillborn")), str(k.count("identical")), str(k.mutants),
                     str(k.caught), str(k.equivalent), str(len(k.unclassified)), _pct(k.score) if k.scored else "not scored"))  # fmt: skip
    tot = {c: sum(int(r[i]) for r in rows[1:]) for i, c in enumerate(head) if 0 < i < len(head) - 1}
    denom = tot["mutants"] - tot["equivalent"]
    rows.append(("total", *(str(tot[c]) for c in head[1:-1]), _pct(tot["caught"] / denom if denom > 0 else None)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    out = ["  ".join([r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, len(head))]) for r in rows]
    by_check: dict[str, int] = {}
    for k in run.kernels:
        for rule, n in k.by_check.items():
            by_check[rule] = by_check.get(rule, 0) + n
    if by_check:
        out.append("caught by: " + ", ".join(f"{r} {n}" for r, n in sorted(by_check.items(), key=lambda x: (-x[1], x[0]))))
    for k in run.kernels:
        if not k.scored:
            n = k.count("not_scored")
            out.append(f"not scored: {k.kernel}: the unmutated kernel, verified with the same settings, "
                       + ("could not be verified" if k.baseline == "error" else "fails " + ", ".join(dict.fromkeys(f.split(":", 1)[0] for f in k.baseline_findings)))
                       + f", so a check catches every mutant trivially; its {n} verified mutant(s) are not scored. Fix the kernel or its contract first.")  # fmt: skip
            out.extend(f"  {line.splitlines()[0] if line else ''}" for line in k.baseline_findings[:5])
        for s in k.stale:
            out.append(f"warning: {s}")
        for o in k.errors:
            out.append(f"error: {k.kernel} {o.mutant.id}: wireup failed while verifying it ({o.detail.splitlines()[0] if o.detail else 'no detail'}).")
    unclassified = [(k, o) for k in run.kernels for o in k.unclassified]
    if unclassified:
        out.append(f"{len(unclassified)} surviving mutant(s): a missing check, or an equivalent mutant not yet proven (record it in the equivalence file):")
        for k, o in unclassified:
            out.append(f"  {k.kernel} {o.mutant.id}  {o.mutant.source}:{o.mutant.line}  {o.mutant.summary}")
            if diffs:
                out.extend("    " + x for x in o.mutant.diff.rstrip("\n").splitlines())
    return "\n".join(out) + "\n"


def kernel_json(k: KernelMutation, run: MutationRun) -> dict:
    """The record of one kernel (the keys ``wireup report`` reads: kernel, mutants, caught, by_check,
    survivors with id/diff/equivalent/reason, device, date; the rest for people and tools)."""
    survivors = [survivor_row(o.mutant, o.equivalent) for o in k.survivors]
    results = []
    for o in k.outcomes:
        row = {"id": o.mutant.id, "status": o.status}
        if o.status == "caught":
            row["checks"] = list(o.checks)
        if o.status in ("stillborn", "error", "not_scored") and o.detail:
            row["detail"] = o.detail.splitlines()[0][:300]
        results.append(row)
    # a header's record (its "kernel" is the header): the kernels that judged its mutants, and their sources then
    header = {"header": True, "judged_by": list(k.judged_by), "judged_sources": dict(sorted(k.judged_sources.items()))} if k.is_header else {}
    return header | {
        "format": FORMAT,
        "kernel": k.kernel,
        "baseline": k.baseline,
        "baseline_findings": [f.splitlines()[0][:300] if f else "" for f in k.baseline_findings],
        "not_scored": k.count("not_scored"),
        "source": k.source,
        "source_sha256": k.source_sha256,
        "generated": k.generated,
        "selected": k.selected,
        "stillborn": k.count("stillborn"),
        "identical": k.count("identical"),
        "errors": len(k.errors),
        "mutants": k.mutants,
        "caught": k.caught,
        "equivalent": k.equivalent,
        "survived": len(k.unclassified),
        "score": round(k.score, 4) if k.score is not None else None,
        "by_check": k.by_check,
        "by_operator": k.by_operator,
        "survivors": survivors,
        "results": results,
        "stale_equivalences": list(k.stale),
        "settings": run.settings,
        "device": run.device,
        "backend": run.backend,
        "versions": run.versions,
        "date": run.date,
    }


def write_kernel_json(k: KernelMutation, run: MutationRun, folder: Path, *, explicit: bool = False, root: Path | None = None) -> Path:
    """Write ``<folder>/<kernel>.json`` atomically; returns its path. ``explicit``: ``folder`` is the
    user's ``--output-dir`` (it may lie outside ``root``); else it must lie inside ``root``."""
    path = folder / f"{k.kernel}.json"
    text = json.dumps(kernel_json(k, run), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    write_output(path, text, explicit=explicit, root=root, what='the mutation results folder of the configuration key "reports"', make_parents=True)
    return path
