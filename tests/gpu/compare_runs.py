"""Compare the files of two runs of the same work, the clock aside (dates, durations, timings: see
:mod:`audit.sameness`): two folders of mutation results (``wireup mutate --output-dir``) or evidence
records, matched by relative path, or two JSON files (``wireup verify --format json --output``).

    python tests/gpu/compare_runs.py device-out/serial device-out/auto

Prints ``identical: N file(s), the clock aside`` and exits 0, or one line per difference (``file: path:
first != second``, a file only in one run) and exits 1. Exit 2: a path that is neither a folder nor a
JSON file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from audit.sameness import differences  # noqa: E402


def compare(first: Path, second: Path) -> tuple[int, list[str]]:
    """(files compared, difference lines) of two folders or two JSON files."""
    if first.is_file() and second.is_file():
        return 1, [f"{first.name}: {d}" for d in differences(json.loads(first.read_text()), json.loads(second.read_text()))]
    a = {p.relative_to(first).as_posix() for p in first.rglob("*.json")}
    b = {p.relative_to(second).as_posix() for p in second.rglob("*.json")}
    out = [f"{n}: only in {first}" for n in sorted(a - b)] + [f"{n}: only in {second}" for n in sorted(b - a)]
    for n in sorted(a & b):
        out += [f"{n}: {d}" for d in differences(json.loads((first / n).read_text()), json.loads((second / n).read_text()))]
    return len(a | b), out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not all(Path(p).is_dir() or Path(p).suffix == ".json" and Path(p).is_file() for p in argv):
        sys.stderr.write("usage: compare_runs.py FIRST SECOND (two folders of JSON results, or two JSON files)\n")
        return 2
    n, diffs = compare(Path(argv[0]), Path(argv[1]))
    if n == 0:
        sys.stderr.write(f"error: no JSON file in {argv[0]} or {argv[1]}: nothing was compared.\n")
        return 2
    for line in diffs:
        print(line)
    if not diffs:
        print(f"identical: {n} file(s), the clock aside")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
