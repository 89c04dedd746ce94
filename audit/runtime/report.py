"""How ``wireup verify`` shows its work: progress lines while it runs, a summary table, a JSON section.

>>> print(summary_table(outcome))        # doctest: +SKIP
subject                      backend  passed  failed  not run  max rel err  time
aux_trunk_forward            pycuda       18       0        0      3.1e-07  0.4 s
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from ..cases import case_matrix
from ..verify_checks import CHAIN, REFERENCE


def describe_workers(devices: list[str | None], ev: dict[str, Any] | None = None) -> str:
    """The workers of a run in words (``devices`` of its ``workers`` event ``ev``): ``4 worker(s), 2 on each
    of 2 GPUs (GPU-a, GPU-b)``, or ``2 Ray host(s), one GPU each``."""
    if ev and ev.get("cluster"):
        return f"{len(devices)} Ray host(s), {ev.get('each', 'one GPU')} each"
    pinned = [d for d in devices if d is not None]
    if not pinned:
        return f"{len(devices)} worker(s)"
    per = {d: pinned.count(d) for d in dict.fromkeys(pinned)}
    names = ", ".join(per)
    if len(set(per.values())) == 1:
        return f"{len(devices)} worker(s), {next(iter(per.values()))} on each of {len(per)} GPUs ({names})"
    return f"{len(devices)} worker(s): " + ", ".join(f"{n} on {d}" for d, n in per.items())


def worker_tag(ev: dict[str, Any], devices: list[str | None]) -> str:
    """`` on worker 2 (GPU-b)``: where an event's unit ran, for runs of several workers; else ""."""
    if len(devices) < 2 or ev.get("worker") is None:
        return ""
    slot = int(ev["worker"])
    dev = devices[slot] if slot < len(devices) else None
    return f" on worker {slot}" + (f" ({dev})" if dev else "")


class Progress:
    """Progress callback: one line per compiled source and per verified subject, on ``stream``; with
    several workers, the workers first, then each subject with the worker and GPU it ran on and a count
    of the units done."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.devices: list[str | None] = [None]
        self.units = 0
        self.done = 0

    def __call__(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        line = None
        if kind == "workers":
            self.devices, self.units = list(ev.get("devices") or [None]), int(ev.get("units", 0))
            if len(self.devices) > 1 or ev.get("cluster"):
                line = f"workers  {describe_workers(self.devices, ev)}"
        elif kind == "unit_done" and len(self.devices) > 1:
            self.done += 1
            line = f"done     [{self.done}/{self.units}] {ev.get('unit')}{worker_tag(ev, self.devices)}"
        elif kind == "lost":
            line = f"verify   worker lost during {ev.get('unit')}{worker_tag(ev, self.devices)} ({ev.get('what')}); it runs again on a fresh worker"
        elif kind == "build":
            line = f"build    {ev.get('line', '').strip()}"
        elif kind == "subject_done":
            r = ev["result"]
            checks = r.get("checks", [])
            p = sum(1 for c in checks if c["verdict"] == "pass")
            f = sum(1 for c in checks if c["verdict"] == "fail")
            n = sum(1 for c in checks if c["verdict"] == "not_run")
            verdict = "FAIL" if f else ("ok" if p else "not run")
            line = f"verify   {r['kind']:<8} {r['subject']} [{r['backend']}] {verdict}: {p} passed, {f} failed, {n} not run ({r.get('duration_s', 0):.1f} s){worker_tag(ev, self.devices)}"
        elif kind == "plan":
            p = ev["plan"]
            cases = " ".join(",".join(f"{k}={v}" for k, v in c.items()) for c in p.get("cases", []))
            tails = p.get("tails", [0, 0])
            line = f"cases    {p['kind']:<8} {p['subject']}: {len(p.get('cases', []))} ({cases}); tail sides {tails[0]} of {tails[1]}"
            if p.get("large"):
                line += "; large case " + ",".join(f"{k}={v}" for k, v in p["large"].items())
        elif kind == "timeout":
            line = f"verify   timeout in {ev.get('subject')} during {ev.get('what')}; restarting the worker"
        if line:
            self.stream.write(line + "\n")
            self.stream.flush()


def _max_rel(checks: list[Any]) -> float | None:
    vals = [c.rel_norm_err for c in checks if c.verdict in ("pass", "fail") and c.check in (REFERENCE.name, CHAIN.name) and c.rel_norm_err is not None]
    return max(vals) if vals else None


def summary_table(outcome: Any) -> str:
    run = outcome.run
    rows = [("subject", "backend", "passed", "failed", "not run", "max rel err", "time")]
    for r in run.results:
        mr = _max_rel(r.checks)
        rows.append((
            f"{'schedule:' if r.kind == 'schedule' else ''}{r.subject}", r.backend, str(len(r.passed)), str(len(r.failed)),
            str(len(r.not_run)), f"{mr:.1e}" if mr is not None else "-", f"{r.duration_s:.1f} s",
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])] + [row[i].rjust(widths[i]) for i in range(2, len(row))]
        lines.append("  ".join(cells).rstrip())
    t = run.timing
    keys = ("compile", "context_start", "module_load", "input_generation", "transfer", "kernel", "reference", "compare", "checks", "gradcheck", "graph", "wall")
    parts = [f"{k} {t[k]:.1f} s" for k in keys if k in t]
    out = "\n" + "\n".join(lines) + "\n"
    if parts:
        out += "time: " + ", ".join(parts) + "\n"
    if outcome.evidence:
        out += f"evidence: {len(outcome.evidence)} record(s) written\n"
    for s in outcome.evidence_skipped:
        out += f"evidence: {s}\n"
    for n in run.notes:
        out += f"note: {n}\n"
    notes = sorted({n for r in run.results for n in r.notes})
    for n in notes:
        out += f"note: {n}\n"
    out += coverage_lines(run)
    return out


def coverage_lines(run: Any) -> str:
    """Per subject (once, whatever the backends): the cases that ran and the tail-coverage verdicts."""
    out = ""
    seen: set[tuple[str, str]] = set()
    for r in run.results:
        if r.verdict == "not_run" and r.checks:
            out += f"not verified: {r.kind} {r.subject} on {r.backend}: no case compared it with its reference\n"
        if (r.kind, r.subject) in seen or not (r.cases or r.tails):
            continue
        seen.add((r.kind, r.subject))
        name = f"{'schedule:' if r.kind == 'schedule' else ''}{r.subject}"
        if r.cases:
            labels = [",".join(f"{k}={v}" for k, v in c.items()) for c in r.cases]
            out += f"cases: {name}: {len(labels)} ({' '.join(labels)})\n"
            out += matrix_lines(r.cases, r.references)
        for t in r.tails:
            state = "covered" if t.get("covered") else "NOT COVERED"
            out += f"tails: {name}: {t.get('kernel')} {t.get('field')} {t.get('expr')}: {t.get('exact', 0)} exact, {t.get('tail', 0)} with a tail, {state}\n"
    return out


def matrix_lines(cases: list[dict[str, int]], references: list[str]) -> str:
    """The case matrix under a ``cases:`` line: a row per dim, a column per case, and a ``reference``
    row (how each case was compared with the float64 reference: full, sampled or not run).

    >>> print(matrix_lines([{"B": 1, "T": 8}, {"B": 300, "T": 3}], ["full", "sampled"]), end="")
      B          1     300
      T          8     3
      reference  full  sampled
    """
    dims, rows = case_matrix(cases)
    table = [(d, ["-" if v is None else str(v) for v in row]) for d, row in zip(dims, rows)]
    if len(references) == len(cases):
        table.append(("reference", list(references)))
    head = max(len(t[0]) for t in table)
    widths = [max(len(t[1][j]) for t in table) for j in range(len(cases))]
    return "".join(("  " + t[0].ljust(head) + "  " + "  ".join(v.ljust(w) for v, w in zip(t[1], widths))).rstrip() + "\n" for t in table)


def verify_json(rendered: str, outcome: Any) -> str:
    doc = json.loads(rendered)
    run = outcome.run
    doc["verify"] = {
        "seed": run.seed,
        "sizes": run.sizes,
        "timing": run.timing,
        "environments": {k: v.to_dict() for k, v in run.environments.items()},
        "subjects": [
            {
                "subject": r.subject, "kind": r.kind, "backend": r.backend, "verdict": r.verdict,
                "passed": len(r.passed), "failed": len(r.failed), "not_run": len(r.not_run),
                "max_rel_err": _max_rel(r.checks), "duration_s": r.duration_s, "timing": r.timing, "notes": r.notes,
                "cases": r.cases, "tails": r.tails, "references": r.references,
                "matrix": dict(zip(("dims", "values"), case_matrix(r.cases)), reference=r.references),
            }  # fmt: skip
            for r in run.results
        ],
        "evidence": [str(p) for p in outcome.evidence],
        "notes": run.notes,
        "plans": run.plans,
    }
    return json.dumps(doc, indent=2) + "\n"
