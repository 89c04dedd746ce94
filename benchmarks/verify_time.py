"""Where the time of a full ``wireup verify`` goes: context start, compile, module load, input generation,
transfers, kernel time, reference time, comparisons.

Runs ``wireup verify --format json --output TMP --no-evidence`` (plus any arguments given after ``--``)
as one child process, measures its whole-process wall time, CPU time and peak RSS, and reads the phase
timing the runner records itself (``verify.timing`` of the JSON: seconds per phase summed over every
subject, ``wall`` for the whole verify call) and each subject's duration. No evidence is written, so
the repository's records are left as they are. Needs a GPU (``-- --emulated`` runs the CPU emulation,
which only shows that the script works).

    python3 benchmarks/verify_time.py                          # the whole default verification, on the GPU
    python3 benchmarks/verify_time.py -- --kernel aux_trunk_forward --sizes 4096
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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="PATH", help="results JSON (default: $OUT/verify_time.json when $OUT is set)")
    ap.add_argument("--timeout", type=float, default=1800.0)
    args = ap.parse_args(argv)
    json_path = args.json or (str(Path(os.environ["OUT"]) / "verify_time.json") if os.environ.get("OUT") else None)

    with tempfile.TemporaryDirectory(prefix="wireup-verify-") as tmp:
        out = Path(tmp) / "verify.json"
        cmd = [*wireup(), "verify", "--format", "json", "--output", str(out), "--no-evidence", *extra]
        print("running: " + " ".join(cmd[2:] if cmd[1] == "-m" else cmd), flush=True)
        r = run_child(cmd, env=child_env(), cwd=REPO, timeout=args.timeout)
        doc = json.loads(out.read_text()) if out.exists() else {}
    ver = doc.get("verify", {})
    timing = {k: float(v) for k, v in ver.get("timing", {}).items()}
    subjects = sorted(ver.get("subjects", []), key=lambda s: -float(s.get("duration_s") or 0.0))
    print(f"exit {r.rc}; whole process {r.wall:.2f} s wall, {r.cpu:.2f} s CPU (this process only; workers are "
          f"children of it), peak RSS {r.maxrss_kib / 1024:.0f} MiB")
    if r.rc not in (0, 1) or not timing:
        print((r.stderr or r.stdout).strip()[-1500:])
    wall = timing.get("wall") or r.wall
    phases = {k: v for k, v in timing.items() if k not in ("wall", "total")}
    print(f"\nphases recorded by the runner (seconds, % of verify's own wall {wall:.2f} s):")
    for k, v in sorted(phases.items(), key=lambda kv: -kv[1]):
        print(f"  {k:<20} {v:9.3f}  {100 * v / wall:5.1f}%")
    rest = wall - sum(phases.values())
    print(f"  {'(not in a phase)':<20} {rest:9.3f}  {100 * rest / wall:5.1f}%   process start, imports, worker start, judging")
    if "total" in timing:
        print(f"  worker total {timing['total']:.3f} s; process overhead outside verify(): {r.wall - wall:.2f} s")
    if subjects:
        print("\nslowest subjects: " + ", ".join(f"{s['subject']} ({s['backend']}) {float(s.get('duration_s') or 0):.2f} s" for s in subjects[:8]))
        fails = [s["subject"] for s in subjects if s.get("verdict") not in ("pass", None)]
        if fails:
            print("not passing: " + ", ".join(sorted(set(fails))))
    write_json(json_path, {"benchmark": "verify_time", "host": host_info(), "command": cmd, "exit_code": r.rc,
                           "process": {"wall_s": r.wall, "cpu_s": r.cpu, "maxrss_mib": r.maxrss_kib / 1024},
                           "timing": timing, "subjects": subjects, "environments": ver.get("environments", {})})
    return 0 if r.rc in (0, 1) else r.rc


if __name__ == "__main__":
    sys.exit(main())
