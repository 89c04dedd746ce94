"""``wireup verify``: run the compiled kernels on the GPU against float64 references, gradient checks and
contract properties, run the schedules end to end with CUDA-graph capture, and record evidence.

Exit codes: 0 every check passed, 1 a check failed, 2 no GPU / package / sanitizer, or a bad argument.

    wireup verify --kernel aux_trunk_forward --sizes 37,4096
    wireup verify --kernel tail_rows_partial --sizes "B=4,T=17;B=1,T=1" --strict
    wireup verify --backend pycuda --backend cupy --format json --output verify.json
    wireup verify --sanitizer memcheck --kernel strided_gather
    wireup verify --workers auto                  # one worker per GPU of this machine
    wireup verify --cluster ray://head:10001      # on the GPUs of a Ray cluster
"""

from __future__ import annotations

import argparse
import json
import sys

from ._common import add_output_arguments, emit, root_of

NAME = "verify"
HELP = "run the compiled kernels on the GPU against float64 references, gradients and contract properties"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel", action="append", default=[], metavar="NAME", help="verify this kernel (repeatable; default: every kernel and schedule)")
    p.add_argument("--schedule", action="append", default=[], metavar="NAME", help="verify this schedule end to end (repeatable)")
    p.add_argument("--backend", action="append", default=[], choices=("auto", "pycuda", "cupy"), help="GPU backend; repeat it to run both on the same inputs (default: auto, PyCUDA where installed)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated test data (default 0)")
    p.add_argument("--sizes", action="append", default=[], metavar="CASES", help="cases of the kernel checks: batch sizes that set every runtime dim (37,4096) or dim assignments (B=4,T=17;B=1,T=1); default: each kernel's tail-hunting sweep")
    p.add_argument("--chain-sizes", action="append", default=[], metavar="CASES", help="cases of the schedule runs, in the same forms (default: each schedule's sweep)")
    p.add_argument("--max-cases", type=int, default=None, metavar="N", help="cases per kernel (and dims variant) of the default sweep (default 12; schedules 6)")
    p.add_argument("--strict", action="store_true", default=None, help="uncovered tails (VERIFY_TAIL_UNCOVERED), fixed dim arguments verified at one value (VERIFY_FIXED_DIM_ONE_VALUE) and subjects never compared with their reference (VERIFY_NOT_VERIFIED) are errors (also: verify_strict = true in [tool.wireup])")
    p.add_argument("--sanitizer", choices=("memcheck", "racecheck", "initcheck", "synccheck"), help="run the verification under compute-sanitizer with this tool")
    add_output_arguments(p)
    p.add_argument("--no-evidence", action="store_true", help="write no evidence records (broken fixtures, mutants)")
    p.add_argument("--workers", metavar="auto|N", help="verify in N worker processes, spread over the GPUs of this machine (auto: one per GPU; default 1)")
    p.add_argument("--cluster", metavar="ray[://HOST:PORT]", help="verify on the GPUs of a Ray cluster: ray (a local Ray, or RAY_ADDRESS) or ray://HOST:PORT (needs: pip install 'wireup-audit[cluster]')")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="a kernel with no progress for this long is killed (default 60)")
    p.add_argument("--replace-source", action="append", default=[], metavar="KERNEL=FILE", help="compile KERNEL from FILE instead of its contract source (no evidence is written for it)")
    p.add_argument("--emulated", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--plugin", action="append", default=[], help=argparse.SUPPRESS)
    p.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..errors import UsageError
    from ..printers import render
    from ..runtime import verify
    from ..runtime.report import Progress, summary_table, verify_json

    overrides = {}
    for item in args.replace_source:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f'--replace-source takes KERNEL=FILE, found "{item}".')
        if not Path(path).is_file():
            raise UsageError(f'--replace-source {item}: "{path}" is not a file.')
        overrides[name] = Path(path).resolve()
    show = args.format == "text" and (args.output is not None or sys.stderr.isatty() or True)
    progress = Progress(sys.stderr) if show else None
    outcome = verify(
        root_of(args),
        kernels=args.kernel,
        schedules=args.schedule,
        backends=args.backend or ["auto"],
        seed=args.seed,
        sizes=list(args.sizes) or None,
        chain_sizes=list(args.chain_sizes) or None,
        strict=args.strict,
        max_cases=args.max_cases,
        sanitizer=args.sanitizer,
        evidence=not args.no_evidence,
        timeout=args.timeout,
        progress=progress,
        emulated={} if args.emulated else None,
        plugins=args.plugin,
        in_process=True if args.in_process else None,
        source_overrides=overrides or None,
        workers=args.workers,
        cluster=args.cluster,
    )
    result = outcome.result
    if args.format == "text":
        text = render(result, "text", tool="wireup verify")
        text += summary_table(outcome)
    elif args.format == "json":
        text = verify_json(render(result, "json", tool="wireup verify"), outcome)
    else:
        text = render(result, args.format, tool="wireup verify")
    emit(text, args.output)
    return result.exit_code


def _unused() -> None:  # keep json imported for type checkers of verify_json callers
    json.dumps({})
