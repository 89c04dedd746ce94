"""Where the "transfer" and "checks" time of a GPU ``wireup verify`` goes: every call the runner makes into
a backend, counted and timed, per backend and per method (issue 15: the H200's 5.27 s of transfers and
3.99 s of other checks are not split any further by ``verify.timing``).

Runs ``verify(...)`` in this process (``in_process=True``: the worker's own body, no child process) on the
given backends with every backend method wrapped: calls, wall seconds and bytes of ``alloc``, ``free``,
``h2d``, ``d2h``, ``d2d``, ``memset8``, ``fill``, ``count_masked``, ``hash``, ``launch`` and
``synchronize`` (each of these returns after the device finished, so the time of a call is its cost),
and of the host-side ``Arena.guard_damage`` and ``Arena.download_rows``; then the runner's own phase
split. No evidence is written. Needs a GPU.

    python3 benchmarks/verify_transfer.py                              # pycuda + cupy, the default verify
    python3 benchmarks/verify_transfer.py --backend cupy -- --kernel aux_trunk_forward
    python3 benchmarks/verify_transfer.py --emulated -- --kernel strided_gather --sizes 37,300   # CPU smoke
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import REPO, host_info, write_json  # noqa: E402

METHODS = ("alloc", "free", "h2d", "d2h", "d2d", "memset8", "fill", "count_masked", "hash", "launch", "synchronize")


def _nbytes(name: str, args: tuple) -> int:
    try:
        if name == "h2d":
            return int(args[1].nbytes)
        if name in ("d2h", "alloc"):
            return int(args[1] if name == "d2h" else args[0])
        if name in ("d2d", "memset8", "count_masked", "hash"):
            return int(args[2] if name in ("d2d", "memset8") else args[1])
        if name == "fill":
            return len(args[1]) * int(args[2])
    except (IndexError, TypeError, AttributeError, ValueError):
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", action="append", default=[], choices=("pycuda", "cupy"))
    ap.add_argument("--json", metavar="PATH", help="results JSON (default: $OUT/verify_transfer.json when $OUT is set)")
    ap.add_argument("--emulated", action="store_true", help="the CPU emulation (shows that the script works, nothing about a GPU)")
    args = ap.parse_args(argv)
    ex = argparse.ArgumentParser()
    ex.add_argument("--kernel", action="append", default=[])
    ex.add_argument("--schedule", action="append", default=[])
    ex.add_argument("--sizes", action="append", default=[])
    eargs = ex.parse_args(extra)
    json_path = args.json or (str(Path(os.environ["OUT"]) / "verify_transfer.json") if os.environ.get("OUT") else None)

    from audit.runtime import verify
    from audit.runtime._cupy import CupyBackend
    from audit.runtime._emulated import EmulatedBackend
    from audit.runtime._memory import Arena
    from audit.runtime._pycuda import PyCudaBackend

    stats: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0])  # calls, seconds, bytes

    def wrap(cls: type, name: str, label: str | None = None) -> None:
        fn = getattr(cls, name)

        @functools.wraps(fn)
        def timed(self, *a, **k):
            t = time.perf_counter()
            try:
                return fn(self, *a, **k)
            finally:
                s = stats[(label or getattr(self, "name", cls.__name__), name)]
                s[0] += 1
                s[1] += time.perf_counter() - t
                s[2] += _nbytes(name, a)

        setattr(cls, name, timed)

    for cls in (PyCudaBackend, CupyBackend, EmulatedBackend):
        for m in METHODS:
            if hasattr(cls, m):
                wrap(cls, m)
    wrap(Arena, "guard_damage", "arena (host side, device calls included)")
    wrap(Arena, "download_rows", "arena (host side, device calls included)")

    t0 = time.perf_counter()
    backends = ["emulated"] if args.emulated else (args.backend or ["pycuda", "cupy"])
    out = verify(REPO, kernels=eargs.kernel, schedules=eargs.schedule, backends=backends, sizes=eargs.sizes or None,
                 evidence=False, in_process=True)  # fmt: skip
    wall = time.perf_counter() - t0
    rows = sorted(stats.items(), key=lambda kv: -kv[1][1])
    print(f"verify in process: {wall:.2f} s wall; exit {out.result.exit_code}")
    print(f"{'backend':<42} {'method':<14} {'calls':>8} {'seconds':>9} {'MiB':>10} {'us/call':>9}")
    for (be, m), (n, sec, nb) in rows:
        print(f"{be:<42} {m:<14} {n:>8} {sec:>9.3f} {nb / 2**20:>10.1f} {1e6 * sec / max(n, 1):>9.1f}")
    timing = {k: round(v, 3) for k, v in out.run.timing.items()}
    print("phases: " + ", ".join(f"{k} {v}" for k, v in sorted(timing.items(), key=lambda kv: -kv[1])))
    write_json(json_path, {"benchmark": "verify_transfer", "host": host_info(), "wall_s": wall, "timing": timing,
                           "calls": [{"backend": be, "method": m, "calls": n, "seconds": sec, "bytes": nb} for (be, m), (n, sec, nb) in rows]})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
