"""What each static rule costs on a synthetic project after a dim edit: the table
:data:`audit.rules._parallel.COST_MS` balances the two halves of a forked check by.

In process, on the synthetic project of ``--size`` kernels (``synth_contracts.py``), after the dim edit
of ``edit_project``: the contracts are loaded once, then ``--runs`` times a fresh check context is made,
its wiring resolved, and every rule of ``schema,wiring,isv,invariants`` run in the engine's order, each
timed; the median per rule is printed (ms) as the Python dict to paste into ``COST_MS``. Also printed:
which rules read the wiring (each run alone on a fresh context: is the wiring resolved after it?), for
``READS_WIRING``. The figures balance the split only; no finding depends on them.

    python benchmarks/rule_costs.py --size 10000 --json rule_costs.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import REPO, host_info, write_json  # noqa: E402
from synth_contracts import edit_project, write_project  # noqa: E402

sys.path.insert(0, str(REPO))

STATIC = ("schema", "wiring", "isv", "invariants")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10000, help="kernels in the synthetic project (default 10,000)")
    ap.add_argument("--runs", type=int, default=3, help="timed passes over the rules (default 3)")
    ap.add_argument("--project", type=Path, help="an existing synthetic project to use (default: a fresh one)")
    ap.add_argument("--json", type=Path, help="write every number to this file")
    args = ap.parse_args(argv)

    from audit.api import fact_providers, load_project
    from audit.hashing import closures_memoized
    from audit.load import gc_paused
    from audit.rules import CheckContext, select_rules
    from audit.rules._base import RuleNotRun

    with tempfile.TemporaryDirectory() as tmp:
        project = args.project or Path(tmp) / "p"
        if args.project is None:
            write_project(args.size, project)
        edit_project(project, "dim", 1)
        rules = [r for r in select_rules(STATIC) if r.id != "SUPPRESSION_UNUSED"]
        times: dict[str, list[float]] = {r.id: [] for r in rules}
        wiring_s = []
        with gc_paused(), closures_memoized():
            for _ in range(args.runs):
                # a fresh model each pass: the wiring and what it memoizes are paid again, by the first
                # rule that asks, as in one check
                cfg, cs = load_project(project.resolve())
                ctx = CheckContext(cs, cfg, providers=fact_providers())
                t = time.perf_counter()
                ctx.wiring  # noqa: B018
                wiring_s.append(time.perf_counter() - t)
                for r in rules:
                    t = time.perf_counter()
                    try:
                        r.run(ctx)
                    except RuleNotRun:
                        pass
                    times[r.id].append(time.perf_counter() - t)
            reads_wiring = []
            for r in rules:
                cs.__dict__.pop("_wiring", None)
                ctx = CheckContext(cs, cfg, providers=fact_providers())
                try:
                    r.run(ctx)
                except RuleNotRun:
                    pass
                if "_wiring" in cs.__dict__:
                    reads_wiring.append(r.id)
    costs = {rid: round(statistics.median(v) * 1000, 1) for rid, v in times.items()}
    print(f"# {args.size} kernels, dim edit, median of {args.runs}; wiring resolved first: {statistics.median(wiring_s) * 1000:.0f} ms; load {os.getloadavg()[0]:.2f}")
    print("COST_MS = {")
    for rid, ms in sorted(costs.items(), key=lambda kv: -kv[1]):
        print(f'    "{rid}": {ms},')
    print("}")
    print(f"READS_WIRING = frozenset({sorted(reads_wiring)!r})")
    print(f"total {sum(costs.values()):.0f} ms over {len(costs)} rules")
    if args.json:
        write_json(args.json, {"host": host_info(), "size": args.size, "runs": args.runs, "wiring_ms": [w * 1000 for w in wiring_s],
                               "cost_ms": costs, "reads_wiring": reads_wiring})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
