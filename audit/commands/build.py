"""``wireup build``: compile every kernel source (cached) and show each entry's resources.

Exit 0 when every source compiles, 1 when one does not (its diagnostics are printed), 2 without nvcc.

    $ wireup build --jobs 2
    compiled  kernels/aux_trunk_kernel.cu  2.31 s
    cached    kernels/strided_gather_kernel.cu
    ...
    1 compiled, 10 cached in 2.4 s (nvcc 13.0.88 ..., sm_90)
"""

from __future__ import annotations

import argparse
import sys

from ._common import root_of, split_list

NAME = "build"
HELP = "compile the kernel sources with nvcc (cached) and report registers, shared memory and spills per entry"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", metavar="SM", help="target architecture (default: the configured arch, sm_90)")
    p.add_argument("--jobs", "-j", type=int, metavar="N", help="sources compiled in parallel (default: the number of CPUs)")
    p.add_argument("--force", action="store_true", help="recompile even what the cache holds")
    p.add_argument("--kernel", action="append", default=[], metavar="NAME", help="build only the sources of these kernels (repeatable, or comma-separated)")


def run(args: argparse.Namespace) -> int:
    from ..api import load_project
    from ..compile import build_kernels
    from ..errors import ExitCode, UsageError

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, found {args.jobs}.")
    cfg, cs = load_project(root_of(args))

    def progress(line: str) -> None:
        print(line, flush=True)

    kernels = split_list(args.kernel) or None
    result = build_kernels(cfg, cs, arch=args.arch, jobs=args.jobs, force=args.force, sources=kernels, progress=progress)
    print()
    print(render_table(result, [k for k in cs.kernels if kernels is None or k.name in kernels]))
    failed = [sb for sb in result.sources.values() if not sb.ok]
    for sb in failed:
        errors = [d for d in sb.diagnostics if d.severity == "error"]
        if errors:
            for d in errors:
                print(f"error: {d.render()}", file=sys.stderr)
        else:
            tail = [ln for ln in sb.log.strip().splitlines() if ln.strip()][-5:] or ["(no output)"]
            print(f"error: {sb.source} did not compile:", file=sys.stderr)
            for ln in tail:
                print(f"  {ln}", file=sys.stderr)
    print(f"nvcc {result.nvcc_version}, {result.arch}, flags: {' '.join(result.flags)}")
    if result.packages:
        print("header packages: " + ", ".join(f"{name} {v}" for name, v in result.packages.items()))
    if failed:
        n = len(failed)
        print(f"{n} source{'s do' if n != 1 else ' does'} not compile: " + ", ".join(sb.source for sb in failed))
    print(f"{result.compiled} compiled, {result.cached} cached in {result.seconds:.2f} s")
    return ExitCode.FINDINGS if failed else ExitCode.CLEAN


def render_table(result, kernels) -> str:
    """One row per contract kernel: its entry symbol, cubin size and ptxas resources."""
    rows = [("kernel", "entry", "cubin B", "regs", "smem B", "stack B", "spill st/ld B")]
    for k in kernels:
        sb = result.source_of(k)
        if sb is None:
            continue
        if not sb.ok:
            rows.append((k.name, "(does not compile)", "-", "-", "-", "-", "-"))
            continue
        _, e = result.kernel(k)
        if e is None:
            rows.append((k.name, f'(no entry "{k.cpp_name or k.entry or k.name}")', str(sb.cubin_size), "-", "-", "-", "-"))
            continue
        symbol = e.symbol if len(e.symbol) <= 40 else e.symbol[:37] + "..."
        regs = "?" if e.registers is None else str(e.registers)
        rows.append((k.name, symbol, str(sb.cubin_size), regs, str(e.shared_static_bytes), str(e.stack_frame), f"{e.spill_stores}/{e.spill_loads}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1])] + [c.rjust(w) for c, w in zip(r[2:], widths[2:])]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
