"""``wireup build``: a cold parallel compile of the shipped kernels against a cached rebuild.

The shipped ``contracts/`` and ``kernels/`` are copied into a temp project whose ``wireup.toml`` points
the build cache at a folder of its own, so the checkout's ``.wireup-cache`` is neither used nor touched.

* cold: ``wireup build --jobs 2 --force``, each run into a fresh, empty cache folder (nvcc's version is
  asked for again too), whole process; a few runs, as each takes a while;
* cached, whole process: ``wireup build --jobs 2`` with the cache warm (interpreter start and imports
  included);
* cached, in process: ``audit.compile.build_kernels(cfg, cs, jobs=2)`` called repeatedly in one process
  after a first call (hashing the sources' include closures and reading the cache entries only).

Target: cached rebuild under 0.2 s (both ways are reported, and which one meets it is said).

    python benchmarks/build_cache.py                      # 3 cold runs, 20 cached runs of each kind
    python benchmarks/build_cache.py --cold-runs 1 --json build.json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
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
    summary,
    wireup,
    write_json,
)

TARGET_S = 0.2

IN_PROCESS = r"""
import json, sys, time
from pathlib import Path
from audit.api import load_project
from audit.compile import build_kernels
root, runs = Path(sys.argv[1]), int(sys.argv[2])
cfg, cs = load_project(root)
first = build_kernels(cfg, cs, jobs=2)
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    r = build_kernels(cfg, cs, jobs=2)
    times.append(time.perf_counter() - t0)
    assert r.compiled == 0, "expected a fully cached build"
print(json.dumps({"times": times, "first_compiled": first.compiled, "cached": r.cached}))
"""


def make_project(base: Path, cache: Path) -> Path:
    """A copy of the shipped contracts and kernels with its own build cache folder."""
    proj = base / "project"
    if proj.exists():
        shutil.rmtree(proj)
    proj.mkdir(parents=True)
    shutil.copytree(REPO / "contracts", proj / "contracts")
    shutil.copytree(REPO / "kernels", proj / "kernels")
    import tomllib

    conf = tomllib.loads((REPO / "pyproject.toml").read_text()).get("tool", {}).get("wireup", {})
    lines = [f'{k} = "{v}"' for k, v in conf.items() if isinstance(v, str) and k != "cache"]
    lines.append(f'cache = "{cache}"')
    (proj / "wireup.toml").write_text("\n".join(lines) + "\n")
    return proj


def per_source(stdout: str) -> dict[str, float]:
    """``compiled  kernels/x.cu  2.31 s`` lines of ``wireup build`` -> {source: seconds}."""
    out = {}
    for m in re.finditer(r"^(?:compiled|cached)\s+(\S+)\s+([\d.]+) s$", stdout, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cold-runs", type=int, default=3, help="cold builds, each into a fresh cache (default 3)")
    ap.add_argument("--runs", type=int, default=20, help="cached rebuilds of each kind (default 20)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cpu", type=int, default=0, help="core for the cached whole-process runs (default 0; -1: none)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        print("nvcc not found: the build cannot be measured here.")
        return 2
    pin = pin_prefix(None if args.cpu < 0 else args.cpu)
    host = host_info()
    print(f"host: {host['cpu_model']}, {host['logical_cpus']} logical CPUs, Python {host['python']}, "
          f"load average {host['load_average_1_5_15']}")
    nvcc = run_child(["nvcc", "--version"]).stdout.strip().splitlines()[-1:]
    print(f"nvcc: {' '.join(nvcc)}")

    with tempfile.TemporaryDirectory(prefix="wireup-build-") as tmp:
        base = Path(tmp)
        env = child_env(bytecode_cache=base / "pyc")
        cold = []
        sources: dict[str, list[float]] = {}
        for i in range(args.cold_runs):
            cache = base / f"cache-cold-{i}"
            proj = make_project(base, cache)
            # not pinned: the point is the parallel compile on --jobs cores
            r = run_child([*wireup(), "build", "--root", str(proj), "--jobs", str(args.jobs), "--force"], env=env, cwd=REPO, timeout=1800)
            if r.rc != 0:
                print(f"error: cold build exited {r.rc}: {(r.stderr or r.stdout).strip()[-600:]}")
                return 1
            cold.append(r)
            for s, t in per_source(r.stdout).items():
                sources.setdefault(s, []).append(t)
            print(f"  cold build {i + 1}: {r.wall:.2f} s wall, {r.stdout.strip().splitlines()[-1]}")
        proj_dir = proj  # the last project: its cache is warm
        cached = [run_child([*pin, *wireup(), "build", "--root", str(proj_dir), "--jobs", str(args.jobs)], env=env, cwd=REPO)
                  for _ in range(args.runs + 1)][1:]
        if any(" 0 cached" in r.stdout or r.rc != 0 for r in cached):
            print("warning: a cached rebuild recompiled something or failed")
        ip = run_child([*pin, python(), "-c", IN_PROCESS, str(proj_dir), str(args.runs)], env=env, cwd=REPO)
        in_proc = json.loads(ip.stdout.strip().splitlines()[-1]) if ip.rc == 0 else {"error": ip.stderr.strip()[-500:]}
        floor = [run_child([*pin, *wireup(), "--version"], env=env, cwd=REPO) for _ in range(args.runs)]

    res = {
        "cold_whole_process": summarize_runs(cold),  # cpu_s includes the nvcc children it reaped
        "cached_whole_process": summarize_runs(cached),
        "wireup_version_whole_process": summarize_runs(floor),
        "cached_in_process_s": summary(in_proc.get("times", [])),
        "per_source_cold_s": {s: summary(v) for s, v in sorted(sources.items(), key=lambda kv: -max(kv[1]))},
    }
    print(f"\n{'what':<44}{'wall, median (min-max)':>30}{'CPU (incl. children)':>22}")
    print(f"{'cold: build --jobs %d --force, fresh cache' % args.jobs:<44}{fmt_s(res['cold_whole_process']['wall_s']):>30}"
          f"{res['cold_whole_process']['cpu_s']['median']:>20.3f} s")
    print(f"{'cached: build --jobs %d (whole process)' % args.jobs:<44}{fmt_s(res['cached_whole_process']['wall_s']):>30}"
          f"{res['cached_whole_process']['cpu_s']['median']:>20.3f} s")
    print(f"{'  for scale: wireup --version (whole process)':<44}{fmt_s(res['wireup_version_whole_process']['wall_s']):>30}"
          f"{res['wireup_version_whole_process']['cpu_s']['median']:>20.3f} s")
    if "error" in in_proc:
        print(f"cached in process: failed: {in_proc['error']}")
    else:
        print(f"{'cached: build_kernels() in process':<44}{fmt_s(res['cached_in_process_s'], 'ms', 1000, 1):>30}")
    print("slowest sources (cold, seconds each, compiled --jobs at a time): " + ", ".join(
        f"{Path(s).name} {v['median']:.1f}" for s, v in list(res["per_source_cold_s"].items())[:5]))
    cold_med = res["cold_whole_process"]["wall_s"]["median"]
    whole = res["cached_whole_process"]["wall_s"]["median"]
    inproc = res["cached_in_process_s"].get("median")
    print(f"cold / cached (whole process): x{cold_med / whole:.0f}")
    verdict = {"whole_process_s": whole, "whole_process_met": whole < TARGET_S,
               "in_process_s": inproc, "in_process_met": inproc is not None and inproc < TARGET_S}
    print(f"target: cached rebuild < {TARGET_S} s: whole process {whole:.3f} s -> {'MET' if whole < TARGET_S else 'NOT MET'}; "
          f"in process {inproc if inproc is None else round(inproc, 4)} s -> {'MET' if verdict['in_process_met'] else 'NOT MET'}")
    write_json(args.json, {"benchmark": "build_cache", "host": host, "nvcc": nvcc, "jobs": args.jobs, "results": res,
                           "target_s": TARGET_S, "verdict": verdict, "load_average_after": host_info()["load_average_1_5_15"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
