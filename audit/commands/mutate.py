"""``wireup mutate``: mutation testing of the kernels: mutate each kernel's source, compile, verify the
mutant on the GPU, and report which checks caught it and which mutants survived.

Exit codes: 0 every counted mutant caught or proven equivalent, 1 a survivor is unclassified (a missing
check or an unproven equivalent), a mutant could not be verified, or a kernel's unmutated baseline fails
its checks (the kernel is not scored), 2 no GPU / nvcc / package, or a bad argument. ``--list`` and
``--reclassify`` need neither GPU nor compiler; ``--build-only`` needs the compiler, no GPU.

    wireup mutate strided_gather --list
    wireup mutate --all --max-mutants 40 --jobs 16
    wireup mutate aux_trade_outcome_backward --operators ror,guard,sync --sizes 1,37,300 --sanitizers none
    wireup mutate --all --max-mutants 30 --build-only   # compile here (no GPU); carry the cache to the GPU
    wireup mutate --headers-only --max-mutants 20       # the shared headers' mutants, each judged by every including kernel
    wireup mutate --reclassify                      # apply equivalent.toml to reports/mutation/*.json
    wireup mutate --all --workers auto              # one worker per GPU of this machine
    wireup mutate --all --cluster ray://head:10001  # on the GPUs of a Ray cluster
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from ..errors import ExitCode
from ._common import root_of, split_list

NAME = "mutate"
HELP = "mutation testing: mutate each kernel's source, verify the mutants on the GPU, report what survives"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernels", nargs="*", metavar="KERNEL", help="kernels to mutate (names from the contracts), or included headers (by file name, e.g. aux_common.cuh: each header mutant is judged against every kernel including it)")
    p.add_argument("--all", action="store_true", help="mutate every kernel of the contracts and every included header some kernel reaches a function of")
    p.add_argument("--headers-only", action="store_true", help="mutate only the included headers (every one some kernel reaches a function of; with --all too)")
    p.add_argument("--operators", action="append", default=[], metavar="OP,OP,...", help="only these mutation operators (default: all; see docs/mutation.md)")
    p.add_argument("--max-mutants", type=int, metavar="N", help="at most N mutants per kernel, chosen deterministically with every operator represented (default: all)")
    p.add_argument("--list", action="store_true", help="print the mutants and exit (no compiler, no GPU)")
    p.add_argument("--build-only", action="store_true", help="compile the selected mutants into the build cache for the configured arch and exit (no GPU): carry the cache to a GPU machine, which then only verifies")
    p.add_argument("--no-static", action="store_true", help="with --build-only: leave the static checks (pure Python, minutes for a large selection) to the GPU run instead of running them here into the build cache")
    p.add_argument("--archive", metavar="FILE", help="with --build-only: also write FILE (.tar, .tar.gz/.tgz, .tar.xz/.txz) holding the build cache entries of exactly this selection, named relative to the cache folder: unpack it on the GPU machine with tar xf FILE -C <cache> (e.g. .wireup-cache)")
    p.add_argument("--diff", action="store_true", help="with --list: print each mutant's diff")
    p.add_argument("--jobs", type=int, metavar="N", help="compile N mutants at a time (default: the number of CPU cores)")
    p.add_argument("--workers", metavar="auto|N", help="verify in N worker processes, spread over the GPUs of this machine (N on one GPU share it; auto: one per GPU; default: one per 4 cores, at most 4)")
    p.add_argument("--cluster", metavar="ray[://HOST:PORT]", help="verify the mutants on the GPUs of a Ray cluster: ray (a local Ray, or RAY_ADDRESS) or ray://HOST:PORT (needs: pip install 'wireup-audit[cluster]')")
    p.add_argument("--backend", choices=("auto", "pycuda", "cupy"), default="auto", help="GPU backend (default: auto, PyCUDA where installed)")
    p.add_argument("--sizes", action="append", default=[], metavar="B,B,...", help="batch sizes of each mutant's verification, each setting every runtime dim, every dims variant at each (default: the cases wireup verify plans for the kernel, its sweep; the kernel's gradient check runs as well)")
    p.add_argument("--sanitizers", action="append", default=[], metavar="TOOL,TOOL", help="the passes of the survivors after the verification: compute-sanitizer memcheck (at 1,37,300,4096), racecheck (at 37,300, or 37 alone where it spans more than one block along the runtime dims; kernels using shared memory and lost barriers), perturb (at 1,37,300,4096, half of each block's threads delayed at the kernel's start and after each barrier, split on a bit of the thread index that changes from block to block: races on global memory), or none (default: memcheck,racecheck,perturb)")
    p.add_argument("--sanitizer-workers", type=int, metavar="N", help="run N processes of a sanitizer pass at a time (default: one per 2 cores, at most 8); a run's verdict is kept only when it ends, so where one run takes minutes (racecheck), fewer at a time let some end within a time limit")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated test data (default 0)")
    p.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS", help="a launch still running after this long is a hang: the mutant is caught by VERIFY_TIMEOUT (default 5)")
    p.add_argument("--equivalent", metavar="FILE", help="equivalence records (default: audit/mutate/equivalent.toml)")
    p.add_argument("--output-dir", metavar="DIR", help="where <kernel>.json is written (default: <reports>/mutation)")
    p.add_argument("--keep-journal", action="store_true", help="keep the journals once the records are written (by default they are deleted): a later run of the same selection, with more passes (--sanitizers) or after a record was needed early, takes every verification and sanitizer run whose builds and settings still match")
    p.add_argument("--fresh", action="store_true", help="discard the journal of an earlier run of the same selection that was cut short (by default its finished verifications are taken, when builds and settings match, and only the rest run)")
    p.add_argument("--reclassify", action="store_true", help="re-read the recorded results (<reports>/mutation/*.json, or --output-dir) and the equivalence records, and rewrite each result's classification of its survivors and its score (no compiler, no GPU)")
    p.add_argument("--stand-in", metavar="MODULE:FUNCTION", help=argparse.SUPPRESS)
    p.add_argument("--baseline-stand-in", metavar="MODULE:FUNCTION", help=argparse.SUPPRESS)


def _ints(values: list[str], flag: str) -> list[int] | None:
    from ..errors import UsageError

    items = split_list(values)
    if not items:
        return None
    try:
        return [int(x) for x in items]
    except ValueError:
        raise UsageError(f"{flag} takes comma-separated integers, found {','.join(items)!r}.") from None


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _load_callable(spec: str) -> Any:
    import importlib

    from ..errors import UsageError

    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f'--stand-in "{spec}" cannot be imported ({exc}).') from None


def _import_root(spec: str) -> list[str]:
    """The folder that makes ``spec``'s module importable (for the workers: a stand-in may name plugins
    that load in them)."""
    import importlib

    module = spec.partition(":")[0]
    path = getattr(importlib.import_module(module), "__file__", None)
    if not path:
        return []
    depth = module.count(".") + (1 if Path(path).name == "__init__.py" else 0)
    return [str(Path(path).resolve().parents[depth])]


class MutateProgress:
    """Progress on ``stream``: the plan, compile counts, the static checks' counts, one line per verified mutant."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.total = 0
        self.built: dict[str, int] = {}
        self.done = 0
        self.static_done = -1
        self.devices: list[str | None] = [None]
        self.t0 = time.perf_counter()

    def write(self, line: str) -> None:
        self.stream.write(f"{time.perf_counter() - self.t0:7.1f}s  {line}\n")
        self.stream.flush()

    def __call__(self, ev: dict[str, Any]) -> None:
        from ..runtime.report import describe_workers, worker_tag

        kind = ev.get("event")
        if kind == "workers":
            self.devices = list(ev.get("devices") or [None])
            if len(self.devices) > 1 or ev.get("cluster"):
                self.write(f"workers  {describe_workers(self.devices, ev)}")
        elif kind == "lost":
            self.write(f"lost     {ev['variant']}{worker_tag(ev, self.devices)} ({ev.get('what')}): it runs again on a fresh worker")
        elif kind == "planned":
            self.total = int(ev["mutants"])
            self.write(f"mutate   {ev['mutants']} mutant(s) selected of {ev['generated']} generated")
        elif kind == "mutant_built":
            self.built[ev["status"]] = self.built.get(ev["status"], 0) + 1
            n = sum(self.built.values())
            if n == self.total or n % 50 == 0:
                self.write(f"compile  {n}/{self.total}  " + ", ".join(f"{k} {v}" for k, v in sorted(self.built.items())))
        elif kind == "static_checked":
            done, total, stored = int(ev["done"]), int(ev["total"]), int(ev["stored"])
            # the first event (the store read), then every 50 checked, and the last
            if done == stored or done == total or done // 50 > self.static_done // 50:
                kept = f", {stored} from the store" if stored else ""
                self.write(f"static   {done}/{total}  checked{kept}")
            self.static_done = done
        elif kind == "variant_done":
            failed = ev.get("failed")
            if str(ev["variant"]).endswith("/siblings"):  # a survivor (or a baseline) judged by the other kernels of its source
                verdict = "ERROR" if failed is None else ("fails " + ", ".join(failed) if failed else "passes")
                self.write(f"siblings {str(ev['variant'])[: -len('/siblings')]}  {verdict}  ({float(ev.get('seconds', 0.0)):.1f} s){worker_tag(ev, self.devices)}")
                return
            if str(ev["variant"]).endswith("/baseline"):
                verdict = "ERROR" if failed is None else ("FAILS " + ", ".join(failed) + ": not scored" if failed else "passes")
                self.write(f"baseline {ev['variant']}  {verdict}  ({float(ev.get('seconds', 0.0)):.1f} s){worker_tag(ev, self.devices)}")
                return
            self.done += 1
            verdict = "ERROR" if failed is None else ("caught by " + ", ".join(failed) if failed else "SURVIVED")
            of = f"/{self.total}" if self.total else ""
            self.write(f"verify   [{self.done}{of}] {ev['variant']}  {verdict}  ({float(ev.get('seconds', 0.0)):.1f} s){worker_tag(ev, self.devices)}")
        elif kind == "sanitizer":
            took = f" ({ev['seconds']:.0f} s)" if isinstance(ev.get("seconds"), (int, float)) else ""
            how = "with threads delayed" if ev["tool"] == "perturb" else f"under compute-sanitizer {ev['tool']}"
            self.write(f"{ev['tool']:<8} {ev['variant']}  {ev['verdict']} {how}{took}")
        elif kind == "note":
            self.write(f"note     {ev['text']}")
        elif kind == "sibling":
            self.write(f"sibling  {ev['variant']}  caught {ev['message']}")
        elif kind == "timing":
            self.write(f"slowdown {ev['variant']}  {ev['message']}")
        elif kind == "slowdown":
            caught = not ev["message"].startswith("not slower")
            self.write(f"slowdown {ev['variant']}  " + (f"caught by MUTATE_SLOWDOWN: {ev['message']}" if caught else ev["message"]))


def run(args: argparse.Namespace) -> int:
    from ..api import load_project
    from ..errors import EnvironmentProblem, UsageError
    from ..mutate import (
        empty_reasons,
        plan_mutants,
        render_list,
        render_table,
        resolve_names,
        run_mutation,
        write_kernel_json,
    )

    root = root_of(args)
    cfg, cs = load_project(root)
    if args.reclassify:
        return _reclassify(args, cfg, cs)
    from ..mutate import mutated_headers

    names = [k.name for k in cs.kernels] if args.all and not args.headers_only else []
    if args.all or args.headers_only:
        names += [h for h in mutated_headers(cfg, cs) if h not in names]
    names += [k for k in args.kernels if k not in names]
    if not names:
        raise UsageError("wireup mutate needs kernel names or --all; the kernels are " + ", ".join(f'"{k.name}"' for k in cs.kernels) + ".")
    # one name per place mutated: a header by its path, and a kernel defined in an included header, run as
    # that header's unit (so the journal, the records and the listing name it alike)
    names, notes = resolve_names(cfg, cs, names)
    for note in notes:
        MutateProgress(sys.stderr)({"event": "note", "text": note})
    operators = list(split_list(args.operators)) or None
    if args.max_mutants is not None and args.max_mutants < 1:
        raise UsageError(f"--max-mutants takes a positive number, found {args.max_mutants}.")
    if args.list:
        generated, selected = plan_mutants(cs, cfg, names, operators, args.max_mutants)
        flat = [m for ms in selected.values() for m in ms]
        from ..mutate import sibling_kernels

        sys.stdout.write(render_list(flat, {k: len(v) for k, v in generated.items()}, diffs=args.diff,
                                     empty=empty_reasons(cfg, cs, generated, operators), siblings=sibling_kernels(cfg, cs, flat)))  # fmt: skip
        return ExitCode.CLEAN
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs takes a positive number, found {args.jobs}.")
    from ..runtime import parse_cluster, parse_workers, require_ray

    workers, cluster = parse_workers(args.workers), parse_cluster(args.cluster)
    if cluster is not None and not args.build_only:
        require_ray()
    if args.archive is not None and not args.build_only:
        raise UsageError("--archive writes the builds of --build-only; give both, or neither.")
    if args.no_static and not args.build_only:
        raise UsageError("--no-static applies to --build-only (a GPU run checks its mutants statically first, or reads the findings --build-only kept); give it with --build-only.")
    if args.build_only:
        from ..mutate import build_only

        archive = Path(args.archive) if args.archive is not None else None
        printer, archived, static = MutateProgress(sys.stderr), {}, {}

        def progress(ev: dict[str, Any]) -> None:
            if ev.get("event") == "archived":
                archived.update(ev)
            elif ev.get("event") == "static":
                static.update(ev)
            else:
                printer(ev)

        counts = build_only(root, names, operators, args.max_mutants, args.jobs, progress, cfg, archive, static=not args.no_static)
        sys.stdout.write(f"built {sum(counts.values())} mutant(s) for {cfg.arch} into the build cache: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + "\n")
        if static:
            sys.stdout.write(f"ran the static checks on {static['items']} build(s) in {static['seconds']:.1f} s: {static['caught']} mutant(s) caught; "
                             "the GPU run reads their findings from the build cache\n")
        if archived:
            folder = cfg.path(cfg.cache)
            cache = folder.relative_to(cfg.root).as_posix() if folder.is_relative_to(cfg.root) else str(folder)
            sys.stdout.write(f'wrote their {archived["entries"]} build cache entries (mutants and unmutated copies) to {archive} ({archived["bytes"] / 1e6:.1f} MB): '
                             f"on the GPU machine, tar xf {archive} -C {cache}\n")
        return ExitCode.CLEAN
    if args.timeout <= 0:
        raise UsageError(f"--timeout takes a positive number of seconds, found {args.timeout:g}.")
    sizes = _ints(args.sizes, "--sizes")
    tools = list(split_list(args.sanitizers))
    sanitizers = None if not tools else [] if tools == ["none"] else tools
    stand_in = _load_callable(args.stand_in) if args.stand_in else None
    baseline_stand_in = _load_callable(args.baseline_stand_in) if args.baseline_stand_in else None
    # a SIGTERM (`timeout`, a CI cancel) ends the run like Ctrl-C, so the workers are killed, not orphaned
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    # the journal of this selection (in the build cache): a run cut short is resumed by the next one
    from ..mutate import journal_path
    from ..runtime import Journal, VerdictJournal, sanitizer_journal_path

    journal = journal_path(cfg, names, bool(args.all), bool(args.headers_only), operators, args.max_mutants)

    def forget() -> None:  # the verifications' journal and the sanitizer passes' beside it
        Journal(journal).remove()
        VerdictJournal(sanitizer_journal_path(journal)).remove()

    if args.fresh:
        forget()
    try:
        result = run_mutation(
            root, names, operators=operators, max_mutants=args.max_mutants, jobs=args.jobs, workers=workers, cluster=cluster,
            backends=[args.backend], sizes=sizes or None, seed=args.seed, launch_timeout=args.timeout, sanitizers=sanitizers,
            equivalent_file=Path(args.equivalent) if args.equivalent else None, stand_in=stand_in,
            progress=MutateProgress(sys.stderr), config=cfg, baseline_stand_in=baseline_stand_in,
            python_paths=_import_root(args.stand_in) if args.stand_in else (), journal=journal,
            sanitizer_processes=args.sanitizer_workers,
        )  # fmt: skip
    except EnvironmentProblem as exc:
        raise EnvironmentProblem(str(exc).replace("wireup verify", "wireup mutate", 1)) from None
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    out_dir = Path(args.output_dir) if args.output_dir else cfg.path(cfg.reports) / "mutation"
    written = [write_kernel_json(k, result, out_dir, explicit=bool(args.output_dir), root=cfg.root) for k in result.kernels]
    if not args.keep_journal:
        forget()  # recorded: the next run starts afresh
    text = render_table(result)
    t = result.timing
    text += f"wrote {len(written)} file(s) to {out_dir}; " + ", ".join(f"{k} {v:.1f} s" for k, v in t.items()) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    return result.exit_code


def _reclassify(args: argparse.Namespace, cfg: Any, cs: Any) -> int:
    """``--reclassify``: the recorded results, reclassified with the current equivalence records."""
    from ..errors import UsageError
    from ..mutate import reclassify, reclassify_exit_code, render_reclassified, resolve_names

    if args.all and args.kernels:
        raise UsageError("--reclassify takes kernel names or --all (every recorded result), not both.")
    conflicting = [f for f, v in (("--list", args.list), ("--max-mutants", args.max_mutants), ("--operators", args.operators),
                                  ("--sizes", args.sizes), ("--sanitizers", args.sanitizers), ("--stand-in", args.stand_in)) if v]  # fmt: skip
    if conflicting:
        raise UsageError(f"--reclassify re-reads recorded results; {conflicting[0]} belongs to a run.")
    folder = Path(args.output_dir) if args.output_dir else cfg.path(cfg.reports) / "mutation"
    # the record of a kernel defined in an included header is its header's (and a header may be named by its path)
    names = resolve_names(cfg, cs, args.kernels)[0] if args.kernels else []
    results = reclassify(folder, cfg, cs, names, Path(args.equivalent) if args.equivalent else None)
    if not results:
        raise UsageError(f'--reclassify: no mutation results (*.json) in "{folder}"; run `wireup mutate` first.')
    sys.stdout.write(render_reclassified(results))
    changed = sum(1 for r in results if r.changed)
    sys.stdout.write(f"reclassified {len(results)} file(s) in {folder}: {changed} rewritten.\n")
    return reclassify_exit_code(results)
