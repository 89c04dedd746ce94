"""Latency of ``wireup check`` on this repository, whole process (interpreter start included).

Every run is a fresh child process pinned to one core (``taskset -c 0`` where taskset exists), reaped
with ``os.wait4`` for its own CPU time and peak RSS. The variants run round-robin, so drift in the
machine's load spreads over all of them alike:

* ``python -c pass``                 the interpreter's own start, the floor under everything else;
* ``check`` as configured here       the environment as it is (this workplace sets
                                     PYTHONDONTWRITEBYTECODE=1, so the checkout's modules are compiled
                                     from source on every run);
* ``check`` with bytecode cache      PYTHONPYCACHEPREFIX on a warmed temp folder, as after ``pip install``;
* ``check`` with bytecode cache and a cold analysis cache: ``<cache>/analysis`` removed before each run,
                                     so LOCAL_ARRAY_BOUNDS, LOCAL_UNINIT_READ and STORE_RACE recompute
                                     (the build cache stays warm);
* ``check --select schema,wiring,isv,invariants``  the static rules only (no build, evidence or
                                     launcher facts), with bytecode cache.

Then ``-X importtime`` (median per module over a few runs) names the biggest imports, an in-process
phase split (imports, config, load, each rule) says where the rest goes, and ``--profile`` adds a
cProfile listing. Target: under 0.5 s. Nothing here is a test assertion.

    python benchmarks/check_latency.py                     # N = 20 runs of each variant
    python benchmarks/check_latency.py --runs 5 --json out.json --profile
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (  # noqa: E402
    REPO,
    child_env,
    fmt_s,
    host_info,
    pin_prefix,
    python,
    run_child,
    summarize_runs,
    toml_parser,
    wireup,
    write_json,
)

TARGET_S = 0.5
STATIC = "schema,wiring,isv,invariants"
COLD = "wireup check (bytecode cache, cold analysis cache)"


def analysis_cache_folder(env: dict) -> Path:
    """Where ``wireup check`` on this repository keeps the results of its source/PTX analyses."""
    code = "from audit.config import load_config; from pathlib import Path; c = load_config(Path('.')); print(c.path(c.cache) / 'analysis')"
    r = run_child([python(), "-c", code], env=env, cwd=REPO, timeout=120)
    return Path(r.stdout.strip() or REPO / ".wireup-cache" / "analysis")

# Runs in a child: the same steps as ``wireup check`` (audit.api.check), each one timed.
PHASES = r"""
import json, sys, time
t = [("start", time.perf_counter())]
import audit.cli, audit.api
t.append(("import audit.cli + audit.api", time.perf_counter()))
from audit.api import fact_providers
from audit.config import load_config
from audit.load import load_contracts
from audit.rules import CheckContext, select_rules, RuleNotRun
from audit.printers import render
from audit.findings import CheckResult
root = sys.argv[1]; select = tuple(s for s in sys.argv[2].split(",") if s)
cfg = load_config(__import__("pathlib").Path(root))
t.append(("load_config", time.perf_counter()))
cs = load_contracts(cfg.contracts_dir, cfg.root)
t.append(("load_contracts (TOML parse + model)", time.perf_counter()))
rules = select_rules(select or cfg.select, cfg.ignore)
t.append(("select_rules (imports the rule modules)", time.perf_counter()))
ctx = CheckContext(cs, cfg, options={}, providers=fact_providers())
result = CheckResult()
per_rule = []
try:  # run_rules pauses the cyclic GC around the rules where the checkout does: time them the same way
    from audit.load import gc_paused
except ImportError:
    from contextlib import nullcontext as gc_paused
with gc_paused():
    for r in rules:
        a = time.perf_counter()
        try:
            result.findings.extend(r.run(ctx)); result.ran.append(r.id)
        except RuleNotRun:
            pass
        per_rule.append((r.id, r.category, time.perf_counter() - a))
t.append(("rules", time.perf_counter()))
render(result, "text")
t.append(("render (text)", time.perf_counter()))
print(json.dumps({"phases": [(t[i][0], t[i][1] - t[i - 1][1]) for i in range(1, len(t))], "rules": per_rule}))
"""


def parse_importtime(stderr: str) -> dict[str, tuple[int, int, int]]:
    """module -> (self us, cumulative us, nesting depth) from ``-X importtime`` output."""
    out: dict[str, tuple[int, int, int]] = {}
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            out[m.group(4)] = (int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2)
    return out


def importtime_breakdown(env: dict, pin: list[str], runs: int, args: list[str]) -> dict[str, object]:
    """Median self and cumulative import time per module over ``runs`` runs."""
    samples: dict[str, list[tuple[int, int, int]]] = {}
    for _ in range(runs):
        r = run_child([*pin, python(), "-X", "importtime", *wireup()[1:], *args], env=env, cwd=REPO)
        for mod, v in parse_importtime(r.stderr).items():
            samples.setdefault(mod, []).append(v)
    rows = []
    for mod, vs in samples.items():
        rows.append(
            {
                "module": mod,
                "self_ms": statistics.median(v[0] for v in vs) / 1000,
                "cumulative_ms": statistics.median(v[1] for v in vs) / 1000,
                "depth": vs[0][2],
            }
        )
    top_level = sorted((r for r in rows if r["depth"] <= 1), key=lambda r: -r["cumulative_ms"])
    by_self = sorted(rows, key=lambda r: -r["self_ms"])
    total_ms = sum(r["self_ms"] for r in rows)
    return {"runs": runs, "total_import_ms": total_ms, "top_cumulative": top_level[:20], "top_self": by_self[:20]}


def phases(env: dict, pin: list[str], runs: int, select: str) -> dict[str, object]:
    """Median time of each in-process step of ``wireup check`` over ``runs`` children."""
    per_phase: dict[str, list[float]] = {}
    per_rule: dict[tuple[str, str], list[float]] = {}
    for _ in range(runs):
        r = run_child([*pin, python(), "-c", PHASES, str(REPO), select], env=env, cwd=REPO)
        if r.rc != 0:
            return {"error": r.stderr.strip().splitlines()[-1:] or [f"exit {r.rc}"]}
        data = json.loads(r.stdout.strip().splitlines()[-1])
        for name, dt in data["phases"]:
            per_phase.setdefault(name, []).append(dt)
        for rid, cat, dt in data["rules"]:
            per_rule.setdefault((rid, cat), []).append(dt)
    rules = sorted(
        ({"rule": k[0], "category": k[1], "ms": statistics.median(v) * 1000} for k, v in per_rule.items()),
        key=lambda x: -x["ms"],
    )
    cats: dict[str, float] = {}
    for x in rules:
        cats[x["category"]] = cats.get(x["category"], 0.0) + x["ms"]
    return {
        "runs": runs,
        "phases_ms": {k: statistics.median(v) * 1000 for k, v in per_phase.items()},
        "categories_ms": dict(sorted(cats.items(), key=lambda kv: -kv[1])),
        "rules_ms": rules[:12],
    }


def profile(env: dict, pin: list[str], top: int) -> list[str]:
    """cProfile of one ``wireup check`` run: the top entries by cumulative and by own time."""
    with tempfile.TemporaryDirectory() as tmp:
        prof = Path(tmp) / "check.prof"
        run_child([*pin, python(), "-m", "cProfile", "-o", str(prof), "-m", "audit", "check"], env=env, cwd=REPO)
        script = (
            "import pstats, sys, io\n"
            "s = io.StringIO(); p = pstats.Stats(sys.argv[1], stream=s)\n"
            f"p.sort_stats('cumulative').print_stats({top}); p.sort_stats('tottime').print_stats({top})\n"
            "print(s.getvalue())\n"
        )
        r = run_child([python(), "-c", script, str(prof)], env=env)
        return [ln for ln in r.stdout.splitlines() if ln.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="runs of each variant (default 20)")
    ap.add_argument("--cpu", type=int, default=0, help="core to pin every child to (default 0; -1: no pinning)")
    ap.add_argument("--importtime-runs", type=int, default=5)
    ap.add_argument("--phase-runs", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="also print a cProfile listing of one run")
    ap.add_argument("--json", metavar="PATH", help="write every number to PATH as JSON")
    args = ap.parse_args(argv)

    pin = pin_prefix(None if args.cpu < 0 else args.cpu)
    host = host_info()
    print(f"host: {host['cpu_model']}, {host['logical_cpus']} logical CPUs, Python {host['python']}, "
          f"pinned: {' '.join(pin) or 'no'}, load average {host['load_average_1_5_15']}")
    print(f"PYTHONDONTWRITEBYTECODE={host['PYTHONDONTWRITEBYTECODE']!r} in this environment")

    with tempfile.TemporaryDirectory(prefix="wireup-pyc-") as pyc:
        env_as_is = child_env()
        env_pyc = child_env(bytecode_cache=Path(pyc))
        parser = toml_parser(env_pyc)
        print(f"TOML parser in the children: {parser}")
        analysis = analysis_cache_folder(env_pyc)
        print(f"analysis cache: {analysis}")
        variants = {
            "python -c pass": ([python(), "-c", "pass"], env_as_is),
            "wireup check (environment as is)": ([*wireup(), "check"], env_as_is),
            "wireup check (bytecode cache)": ([*wireup(), "check"], env_pyc),
            COLD: ([*wireup(), "check"], env_pyc),
            f"wireup check --select {STATIC} (bytecode cache)": ([*wireup(), "check", "--select", STATIC], env_pyc),
        }
        # Warm the bytecode cache and the OS file cache; check that every command works.
        for name, (cmd, env) in variants.items():
            r = run_child([*pin, *cmd], env=env, cwd=REPO)
            if r.rc not in (0, 1):
                print(f"error: {name} exited {r.rc}: {r.stderr.strip()[-400:]}", file=sys.stderr)
                return 2
        runs: dict[str, list] = {name: [] for name in variants}
        for _ in range(args.runs):
            for name, (cmd, env) in variants.items():
                if name == COLD:  # the source/PTX analyses recomputed (the build cache stays warm)
                    shutil.rmtree(analysis, ignore_errors=True)
                runs[name].append(run_child([*pin, *cmd], env=env, cwd=REPO))
        results = {name: summarize_runs(rs) for name, rs in runs.items()}

        imports = importtime_breakdown(env_pyc, pin, args.importtime_runs, ["check"])
        split = phases(env_pyc, pin, args.phase_runs, "")
        prof = profile(env_pyc, pin, 30) if args.profile else []

    print(f"\n{args.runs} runs each, median (min-max); CPU = the child's user + system time")
    w = max(len(n) for n in results)
    print(f"{'variant'.ljust(w)}  {'wall':>26}  {'CPU':>26}  {'peak RSS':>26}")
    for name, s in results.items():
        print(f"{name.ljust(w)}  {fmt_s(s['wall_s']):>26}  {fmt_s(s['cpu_s']):>26}  {fmt_s(s['maxrss_mib'], 'MiB', digits=1):>26}")

    print(f"\n-X importtime, median of {imports['runs']} runs (bytecode cache): "
          f"{imports['total_import_ms']:.0f} ms in imports; biggest top-level imports (cumulative):")
    for r in imports["top_cumulative"][:12]:
        print(f"  {r['cumulative_ms']:8.1f} ms  {'  ' * r['depth']}{r['module']}")
    print("biggest own (self) import times:")
    for r in imports["top_self"][:12]:
        print(f"  {r['self_ms']:8.1f} ms  {r['module']}")

    if "error" in split:
        print(f"\nphase split failed: {split['error']}")
    else:
        print(f"\nin-process phases of wireup check, median of {split['runs']} runs (bytecode cache; interpreter start not included):")
        for name, ms in split["phases_ms"].items():
            print(f"  {ms:8.1f} ms  {name}")
        print("  by rule category: " + ", ".join(f"{c} {ms:.1f} ms" for c, ms in split["categories_ms"].items()))
        print("  slowest rules (the first rule to need a fact or a lazy import pays for it): "
              + ", ".join(f"{x['rule']} {x['ms']:.1f} ms" for x in split["rules_ms"][:6]))

    if prof:
        print("\ncProfile of one run (bytecode cache):")
        print("\n".join(prof))

    verdicts = {}
    for name in ("wireup check (environment as is)", "wireup check (bytecode cache)", COLD):
        med = results[name]["wall_s"]["median"]
        verdicts[name] = {"median_wall_s": med, "met": med < TARGET_S}
        print(f"target < {TARGET_S} s: {name}: {med:.3f} s -> {'MET' if med < TARGET_S else 'NOT MET'}")
    host_after = host_info()["load_average_1_5_15"]
    print(f"load average after: {host_after}")

    write_json(args.json, {
        "benchmark": "check_latency",
        "host": host,
        "toml_parser": parser,
        "load_average_after": host_after,
        "command": [*pin, *wireup(), "check"],
        "runs": args.runs,
        "results": results,
        "importtime": imports,
        "phases": split,
        "profile": prof,
        "target_s": TARGET_S,
        "verdicts": verdicts,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
