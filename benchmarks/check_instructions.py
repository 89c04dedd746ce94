"""Instructions executed by the static ``wireup check`` of a synthetic project: a cost that the load of a
shared machine does not move.

On a machine shared with other sessions, CPU times move by 10-30 % between two runs of the same code
(other processes share the cores' caches and, with SMT, the cores themselves), which hides changes of
that size. The number of instructions a process executes does not depend on that load. This script
counts them with valgrind's cachegrind (``--cache-sim=no``: instruction counts only; a run takes about
40 times its native time) for the three variants of ``scaling.py``'s static check:

* ``cold``: no check cache and no parsed files (every file parsed, every rule run, both caches written);
* ``edit``: one contract file edited since the last check (a comment line appended to
  ``contracts/dims.toml``): that file parsed again, the model built, every rule run;
* ``warm``: nothing changed since the last check: the cached result;
* ``doc``: one kernel's doc string changed in one module file (a value no rule reads);
* ``dim``: the range of the runtime dim ``B`` changed in ``contracts/dims.toml`` (a value every shape reads).

``--variants`` picks some (cold takes ~20 minutes under valgrind at 10,000 kernels).

Each variant is counted ``--runs`` times (the counts of a variant agree to about 0.1 %: hash seeds and
file-system order). ``--checkout DIR`` counts another checkout of wireup (an exported commit, for a
"before" figure) with this script's harness.

    python benchmarks/check_instructions.py --size 10000 --json instructions.json
    python benchmarks/check_instructions.py --size 10000 --checkout /tmp/before --json before.json
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import REPO, host_info, python, toml_parser, write_json  # noqa: E402
from synth_contracts import edit_project, write_project  # noqa: E402

STATIC = "schema,wiring,isv,invariants"
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def env_for(checkout: Path, pyc: Path) -> dict[str, str]:
    """This environment with ``checkout`` first on the path and a warm bytecode cache (as installed)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), env.get("PYTHONPATH", "")) if p)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pyc)
    return env


def check(project: Path, env: dict[str, str], checkout: Path, counted: bool) -> int | None:
    """Run the static check of ``project``; its instruction count where ``counted``."""
    cmd = [python(), "-m", "audit", "check", "--root", str(project), "--select", STATIC]
    if counted:
        cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *cmd]
    r = subprocess.run(cmd, env=env, cwd=checkout, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"wireup check exited {r.returncode}: {(r.stderr or r.stdout).strip()[-400:]}")
    if not counted:
        return None
    m = _REFS.search(r.stderr)
    if m is None:
        raise SystemExit(f"no instruction count in valgrind's output: {r.stderr.strip()[-400:]}")
    return int(m.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10_000, help="kernels in the synthetic project (default 10000)")
    ap.add_argument("--runs", type=int, default=1, help="counts per variant (default 1)")
    ap.add_argument("--checkout", type=Path, default=REPO, help="the wireup checkout to count (default: this one)")
    ap.add_argument("--json", metavar="PATH", help="write every number to PATH as JSON")
    ap.add_argument("--variants", default="edit,warm,cold,doc,dim", help="which to count, comma-separated (default all: edit,warm,cold,doc,dim)")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing counted", file=sys.stderr)
        return 2
    checkout = args.checkout.resolve()
    host = host_info()
    with tempfile.TemporaryDirectory(prefix="wireup-instructions-") as tmp:
        base = Path(tmp)
        env = env_for(checkout, base / "pyc")
        project = base / "p"
        write_project(args.size, project)
        print(f"checkout {checkout}, {args.size} kernels, TOML parser {toml_parser(env)}")
        check(project, env, checkout, counted=False)  # warms the bytecode cache and both caches
        variants = [v for v in ("edit", "warm", "cold", "doc", "dim") if v in args.variants.split(",")]
        counts: dict[str, list[int]] = {v: [] for v in variants}
        for i in range(args.runs):
            for v in variants:
                if v == "edit":
                    edit_project(project, "comment", i)
                elif v == "warm":
                    pass  # nothing changed since the check of the variant before
                elif v == "cold":
                    for kind in ("check", "parsed"):
                        shutil.rmtree(project / ".wireup-cache" / kind, ignore_errors=True)
                else:
                    check(project, env, checkout, counted=False)  # the edit follows a check of the same contracts
                    edit_project(project, v, i)
                counts[v].append(check(project, env, checkout, counted=True))  # type: ignore[arg-type]
            print(f"run {i + 1}: " + ", ".join(f"{k} {v[-1] / 1e9:.3f} G" for k, v in counts.items()))
    medians = {k: statistics.median(v) for k, v in counts.items()}
    print("instructions, median: " + ", ".join(f"{k} {v / 1e9:.3f} G" for k, v in medians.items()))
    write_json(args.json, {"host": host, "checkout": str(checkout), "size": args.size, "counts": counts, "medians": medians})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
