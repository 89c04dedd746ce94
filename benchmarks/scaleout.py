"""Scale-out: the wall time of ``wireup verify`` (and ``wireup mutate``) with 1, 2, 4 and ``auto``
workers, and whether every run gave the serial run's results (``audit.sameness``: the clock aside).

Each run is one child process: ``wireup verify --no-evidence --format json --output TMP --workers N``
(plus the arguments after ``--``); with ``--mutate KERNEL``, ``wireup mutate KERNEL --max-mutants M
--workers N --output-dir TMP`` instead. On one GPU several workers share it (the host work, drawing
inputs and comparing outputs, is most of a verification: several processes overlap it); on several GPUs
``auto`` puts one worker on each. ``--emulated`` runs the CPU emulation (``-- --emulated`` for verify),
which only shows the script works and what process-level parallelism gives on this machine's cores.

    python3 benchmarks/scaleout.py                                    # verify, workers 1,2,4,auto, on the GPU
    python3 benchmarks/scaleout.py --mutate aux_next_bar_loss_reduce --max-mutants 20
    python3 benchmarks/scaleout.py --workers 1,2 -- --emulated --sizes 1,37 --chain-sizes 37
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import REPO, child_env, host_info, run_child, wireup, write_json  # noqa: E402

sys.path.insert(0, str(REPO))
from audit.sameness import differences  # noqa: E402


def _results(folder: Path) -> dict[str, object]:
    return {p.relative_to(folder).as_posix(): json.loads(p.read_text()) for p in sorted(folder.rglob("*.json"))}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="1,2,4,auto", help="the worker counts to run, the first being the reference (default 1,2,4,auto)")
    ap.add_argument("--mutate", metavar="KERNEL", help="time wireup mutate KERNEL instead of wireup verify")
    ap.add_argument("--max-mutants", type=int, default=20)
    ap.add_argument("--json", metavar="PATH", help="results JSON (default: $OUT/scaleout.json when $OUT is set)")
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args(argv)
    json_path = args.json or (str(Path(os.environ["OUT"]) / "scaleout.json") if os.environ.get("OUT") else None)
    counts = [w.strip() for w in args.workers.split(",") if w.strip()]

    rows = []
    reference = None
    with tempfile.TemporaryDirectory(prefix="wireup-scaleout-") as tmp:
        for n in counts:
            out = Path(tmp) / f"workers-{n}"
            out.mkdir()
            if args.mutate:
                cmd = [*wireup(), "mutate", args.mutate, "--max-mutants", str(args.max_mutants), "--workers", n, "--output-dir", str(out), *extra]
            else:
                cmd = [*wireup(), "verify", "--no-evidence", "--format", "json", "--output", str(out / "verify.json"), "--workers", n, *extra]
            print("running: " + " ".join(cmd[2:] if cmd[1] == "-m" else cmd), flush=True)
            r = run_child(cmd, env=child_env(), cwd=REPO, timeout=args.timeout)
            got = _results(out)
            if reference is None:
                reference = got
            diffs = differences(reference, got)
            rows.append({"workers": n, "rc": r.rc, "wall_s": round(r.wall, 2), "files": len(got), "differences": diffs[:20],
                         "identical": not diffs and bool(got)})  # fmt: skip
            if r.rc not in (0, 1):
                print((r.stderr or r.stdout).strip()[-1500:])
    base = rows[0]["wall_s"] if rows else 0.0
    print(f"\n{'workers':>8}  {'wall':>8}  {'speed-up':>8}  same results as workers={counts[0]}")
    for row in rows:
        speed = base / row["wall_s"] if row["wall_s"] else 0.0
        print(f"{row['workers']:>8}  {row['wall_s']:7.1f}s  {speed:7.2f}x  {'yes' if row['identical'] else 'NO: ' + '; '.join(row['differences'][:3])}")
    if json_path:
        write_json(json_path, {"host": host_info(), "mode": "mutate" if args.mutate else "verify", "extra": extra, "runs": rows})
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
