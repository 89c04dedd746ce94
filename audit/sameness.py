"""What two runs of the same work must agree on: everything but the clock.

A run sharded over several workers, GPUs or hosts must give the same verdicts, findings, evidence and
mutation results as a serial run. Their files differ only where they record *when* and *how long*
(:data:`VOLATILE`: dates, durations, per-phase timings, launch times); :func:`stable_view` drops those,
and :func:`differences` lists what else differs, one line per path. ``tests/gpu/compare_runs.py`` applies
them to two folders of mutation results or evidence records.

>>> differences({"date": "2026-12-04", "status": "caught"}, {"date": "2026-12-05", "status": "caught"})
[]
>>> differences({"results": [{"status": "caught"}]}, {"results": [{"status": "survived"}]})
["results[0].status: 'caught' != 'survived'"]
"""

from __future__ import annotations

from typing import Any

# keys whose values record the clock, not the work: a date, a duration, per-phase seconds, launch timings
VOLATILE = frozenset({"date", "seconds", "duration_s", "timing", "launch_seconds", "wall"})


def stable_view(doc: Any) -> Any:
    """``doc`` (parsed JSON) without the :data:`VOLATILE` keys, at any depth."""
    if isinstance(doc, dict):
        return {k: stable_view(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [stable_view(v) for v in doc]
    return doc


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where the stable views of ``a`` and ``b`` differ: ``path: a != b`` per leaf, in document order."""
    a, b = stable_view(a), stable_view(b)
    out: list[str] = []
    _walk(a, b, path, out)
    return out


def _walk(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            where = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(f"{where}: only in {'the second' if k not in a else 'the first'}")
            else:
                _walk(a[k], b[k], where, out)
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{path}[{i}]", out)
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items != {len(b)}")
    elif a != b:
        out.append(f"{path}: {a!r} != {b!r}")
