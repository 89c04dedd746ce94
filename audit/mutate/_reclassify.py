"""``wireup mutate --reclassify``: apply the current equivalence records to recorded mutation results,
without a compiler or a GPU.

A GPU run writes ``reports/mutation/<kernel>.json``; the proofs of its equivalent survivors are usually
written afterwards. Reclassifying re-reads each record file and the equivalence file, regenerates the
kernel's mutants from its source (to check each record against the code it quotes, exactly as a run
does) and rewrites what depends on the records: each survivor's ``equivalent`` and ``reason``, the
``equivalent`` and ``survived`` counts, the ``score``, ``stale_equivalences`` and
``settings.equivalent_file``. Every verdict of the run (caught, survived, the checks, the baseline) is
kept as it was: reclassifying never turns a survivor into a caught mutant, it only says which survivors
are proven equivalent.

A record is left untouched, and reported, when its kernel's source changed since the run (its
``source_sha256`` no longer matches: the ids may name other code), when it names a kernel the contracts
do not have, or when a surviving id is not a mutant of the source. The rewrite is deterministic (the
same records and results give the same bytes) and atomic; a file whose content would not change is not
rewritten.

>>> out = reclassify(Path("reports/mutation"), cfg, cs)             # doctest: +SKIP
>>> [(r.kernel, r.changed) for r in out]                            # doctest: +SKIP
[('strided_gather', False), ...]
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic
from ..errors import UsageError
from ._equivalent import DEFAULT_FILE, load_records, match_records, refuted_records
from ._render import survivor_row
from ._headers import header_mutants, header_units
from ._run import _display, kernel_mutants


@dataclass
class Reclassified:
    """One record file: what it says after reclassification, and what changed."""

    path: Path
    kernel: str
    data: dict = field(default_factory=dict)  # the record as written (or as found, when skipped)
    changed: bool = False  # the file was rewritten
    problem: str = ""  # why the file was left as it was ("" when it was reclassified)
    before: dict = field(default_factory=dict)  # equivalent, survived, score before

    @property
    def unclassified(self) -> list[dict]:
        return [s for s in self.data.get("survivors") or [] if isinstance(s, dict) and not s.get("equivalent")]


def dump(data: dict) -> str:
    """A record's text, exactly as a run writes it (keys sorted, one-space indent, trailing newline)."""
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def reclassify(folder: Path, cfg: Any, cs: Any, kernels: Sequence[str] = (), equivalent_file: Path | None = None,
               write: bool = True) -> list[Reclassified]:  # fmt: skip
    """Reclassify ``folder/<kernel>.json`` for ``kernels`` (default: every ``*.json`` there) with the
    records of ``equivalent_file`` (default: the shipped file). Raises :class:`UsageError` when the folder
    or a named kernel's file is missing, or the equivalence file is malformed."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f'--reclassify: no mutation results folder "{folder}"; run `wireup mutate` first (or name it with --output-dir).')
    if kernels:
        paths = []
        for k in dict.fromkeys(kernels):
            p = folder / f"{k}.json"
            if not p.is_file():
                raise UsageError(f'--reclassify: no mutation result "{p}" for kernel "{k}".')
            paths.append(p)
    else:
        paths = sorted(folder.glob("*.json"))
    eq_path = equivalent_file or DEFAULT_FILE
    eq_name = _display(eq_path, cfg.root)
    records = load_records(eq_path, eq_name)
    return [_one(p, cfg, cs, records, eq_name, write) for p in paths]


def _one(path: Path, cfg: Any, cs: Any, records: Sequence[Any], eq_name: str, write: bool) -> Reclassified:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as exc:
        return Reclassified(path, path.stem, problem=f"cannot be read as JSON ({exc})")
    if not isinstance(data, dict) or not isinstance(data.get("kernel"), str) or not isinstance(data.get("results"), list):
        return Reclassified(path, path.stem, problem='is no mutation record (it needs "kernel" and "results")')
    name = data["kernel"]
    out = Reclassified(path, name, data, before={k: data.get(k) for k in ("equivalent", "survived", "score")})
    unit = header_units(cfg, cs).get(name) if data.get("header") is True else None
    if unit is None and name not in cs.kernel_map:
        out.problem = f'names kernel "{name}", which the contracts do not have'
        return out
    k_source = unit.source if unit else cs.kernel(name).source
    source = data.get("source") or k_source
    if source != k_source:
        out.problem = f'was made from "{source}" but kernel "{name}" now lives in "{k_source}"; re-run `wireup mutate {name}`'
        return out
    try:
        src = cfg.path(k_source).read_text(encoding="utf-8")
    except OSError as exc:
        out.problem = f'its source "{k_source}" cannot be read ({exc.strerror})'
        return out
    if hashlib.sha256(src.encode()).hexdigest() != data.get("source_sha256"):
        out.problem = f'"{k_source}" changed since the run, so its mutant ids may name other code; re-run `wireup mutate {name}`'
        return out
    every = header_mutants(cfg, cs, unit) if unit else kernel_mutants(cs, name, src)
    by_id = {m.id: m for m in every}
    matched, stale = match_records(name, every, records)
    survived = [r.get("id") for r in data["results"] if isinstance(r, dict) and r.get("status") == "survived"]
    unknown = [i for i in survived if i not in by_id]
    if unknown:
        out.problem = f'surviving mutant "{unknown[0]}" is no mutant of "{k_source}" (a newer or older wireup?); re-run `wireup mutate {name}`'
        return out

    new = dict(data)
    new["survivors"] = [survivor_row(by_id[i], matched.get(i)) for i in survived]
    eq = sum(1 for s in new["survivors"] if s["equivalent"])
    new["equivalent"] = eq
    new["survived"] = len(survived) - eq
    mutants, caught = int(data.get("mutants") or 0), int(data.get("caught") or 0)
    scored = data.get("baseline", "pass") == "pass"
    new["score"] = round(caught / (mutants - eq), 4) if scored and mutants - eq > 0 else None
    caught = {r["id"]: tuple(r.get("checks") or ()) for r in data["results"] if isinstance(r, dict) and r.get("status") == "caught" and isinstance(r.get("id"), str)}
    new["stale_equivalences"] = stale + refuted_records(name, matched, caught)
    new["settings"] = {**(data.get("settings") or {}), "equivalent_file": eq_name}
    out.data = new
    text_new = dump(new)
    if text_new != text:
        out.changed = True
        if write:
            write_text_atomic(path, text_new)
    return out


def render_reclassified(results: Sequence[Reclassified]) -> str:
    """The table of the reclassified records, problems, stale records and every unclassified survivor."""
    head = ("kernel", "mutants", "caught", "equivalent", "survived", "score", "file")
    rows = [head]
    for r in results:
        d = r.data
        if r.problem and not d:
            rows.append((r.kernel, "-", "-", "-", "-", "-", "unreadable"))
            continue
        baseline = d.get("baseline", "pass")
        score = d.get("score")
        shown = "not scored" if baseline != "pass" else ("-" if score is None else f"{100.0 * float(score):.0f}%")
        state = "left as it was" if r.problem else ("rewritten" if r.changed else "unchanged")
        rows.append((r.kernel, str(d.get("mutants", "-")), str(d.get("caught", "-")), str(d.get("equivalent", "-")),
                     str(d.get("survived", "-")), shown, state))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    out = ["  ".join([row[0].ljust(widths[0])] + [row[i].rjust(widths[i]) for i in range(1, len(head) - 1)] + [row[-1]]) for row in rows]
    for r in results:
        if r.problem:
            out.append(f"error: {r.path}: {r.problem}.")
        elif r.data.get("baseline", "pass") != "pass":
            out.append(f"not scored: {r.kernel}: the unmutated kernel failed its checks in that run; re-run it once it passes.")
        if not r.problem:
            out.extend(f"warning: {s}" for s in r.data.get("stale_equivalences") or [])
    left = [(r, s) for r in results if not r.problem for s in r.unclassified]
    if left:
        out.append(f"{len(left)} surviving mutant(s): a missing check, or an equivalent mutant not yet proven (record it in the equivalence file):")
        for r, s in left:
            out.append(f"  {r.kernel} {s.get('id')}  {r.data.get('source')}:{s.get('line')}  {s.get('change')}")
    return "\n".join(out) + "\n"


def reclassify_exit_code(results: Sequence[Reclassified]) -> int:
    """0 when every record was reclassified, is scored, has no error and no unclassified survivor; else 1."""
    for r in results:
        if r.problem or r.unclassified or r.data.get("baseline", "pass") != "pass" or int(r.data.get("errors") or 0):
            return 1
    return 0
