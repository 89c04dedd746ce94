"""Wall and CPU time of the static ``wireup check`` after a dim edit, in one process and split over a forked
child (``WIREUP_JOBS``), and against other checkouts: what ``audit/rules/_parallel.py`` buys on this machine.

The children are **not** pinned to a core (a pinned check never forks: it would gain nothing), so the wall
time depends on what else runs on the machine: the script prints the load average before and after, and
interleaves the variants run by run so that a change of load hits them alike. Before each run the dim edit
of ``synth_contracts.edit_project`` lowers ``B``'s maximum (a value every rule reads, never given before,
so the check cache misses and every rule runs); one unrecorded run of each variant comes first (bytecode
and parsed-file caches warm). CPU time is user + system of the child and its forked child (``os.wait4``
of a process counts the children it reaped).

A variant is ``NAME=JOBS`` (this checkout, ``WIREUP_JOBS`` set to JOBS; empty: unset, the automatic
choice) or ``NAME=DIR:JOBS`` (another checkout, e.g. an exported commit for "before").

    python benchmarks/check_jobs.py --size 10000 --runs 5 one=1 auto= --json check_jobs.json
    python benchmarks/check_jobs.py --size 10000 before=/tmp/main: after=
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import REPO, ChildRun, host_info, python, summary, write_json  # noqa: E402
from synth_contracts import edit_project, write_project  # noqa: E402

STATIC = "schema,wiring,isv,invariants"


def variant(spec: str) -> tuple[str, Path, str]:
    name, _, rest = spec.partition("=")
    checkout, _, jobs = rest.rpartition(":") if ":" in rest else ("", "", rest)
    return name, Path(checkout) if checkout else REPO, jobs


def run_blocking(cmd: list[str], env: dict[str, str], cwd: Path) -> ChildRun:
    """One child in ``cwd``, reaped with a blocking ``os.wait4`` (``_harness.run_child`` polls every
    0.5 ms, which would take a little of the second CPU the forked check uses). Not run from this
    checkout: ``python -m`` puts the working folder first on the path, before the checkout asked for."""
    import subprocess
    import time

    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=cwd)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return ChildRun(wall, ru.ru_utime, ru.ru_stime, int(ru.ru_maxrss), proc.returncode, "", err.read().decode(errors="replace"))


def env_for(checkout: Path, jobs: str, pyc: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), env.get("PYTHONPATH", "")) if p)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pyc / checkout.as_posix().strip("/").replace("/", "_"))
    env.pop("WIREUP_JOBS", None)
    if jobs:
        env["WIREUP_JOBS"] = jobs
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", nargs="*", default=["one=1", "auto="], help="NAME=JOBS or NAME=CHECKOUT:JOBS (default: one=1 auto=)")
    ap.add_argument("--size", type=int, default=10000, help="kernels in the synthetic project (default 10,000)")
    ap.add_argument("--runs", type=int, default=5, help="recorded runs per variant (default 5)")
    ap.add_argument("--project", type=Path, help="an existing synthetic project (default: a fresh one in a temp folder)")
    ap.add_argument("--json", type=Path, help="write every number to this file")
    args = ap.parse_args(argv)
    variants = [variant(v) for v in args.variants]
    with tempfile.TemporaryDirectory() as tmp:
        project = args.project or Path(tmp) / "p"
        if args.project is None:
            write_project(args.size, project)
        pyc = Path(tmp) / "pyc"
        runs: dict[str, list] = {name: [] for name, _, _ in variants}
        load = [os.getloadavg()]
        edit = 0
        for i in range(args.runs + 1):
            for name, checkout, jobs in variants:
                edit += 1
                edit_project(project, "dim", edit)
                cmd = [python(), "-m", "audit", "check", "--root", str(project), "--select", STATIC]
                run = run_blocking(cmd, env_for(checkout, jobs, pyc), project)
                if run.rc not in (0, 1):
                    raise SystemExit(f"{name}: exit {run.rc}: {run.stderr.strip()}")
                if i:
                    runs[name].append(run)
        load.append(os.getloadavg())
    print(f"load average before {load[0][0]:.2f}, after {load[1][0]:.2f}; {os.cpu_count()} CPUs; {args.size} kernels, dim edit")
    out = {}
    for name, checkout, jobs in variants:
        rs = runs[name]
        out[name] = {
            "checkout": str(checkout),
            "jobs": jobs or "auto",
            "wall_s": summary([r.wall for r in rs]),
            "cpu_s": summary([r.cpu for r in rs]),
            "maxrss_mib": summary([r.maxrss_kib / 1024 for r in rs]),
        }
        w, c = out[name]["wall_s"], out[name]["cpu_s"]
        print(f"{name:>10}: wall median {w['median']:.3f} s ({w['min']:.3f}-{w['max']:.3f}), CPU median {c['median']:.3f} s ({c['min']:.3f}-{c['max']:.3f})")
    if args.json:
        write_json(str(args.json), {"host": host_info(), "size": args.size, "runs": args.runs, "load": load, "variants": out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
