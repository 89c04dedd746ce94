"""The host side of ``wireup verify`` on the CPU: CPU seconds per phase of an emulated verification, and
the comparison rule on the shipped output shapes (issue 15: the host does ~21 s of the H200's 31).

Four parts, each a median over ``--repeat`` fresh child processes with one BLAS thread (the CPU machine
is shared, so CPU time of the process, not wall time, is what is compared):

1. **inputs**: every case of the default plan of every subject (or ``--kernel``) built and its inputs
   drawn, with no backend, so nothing is launched or compared: the input generation of a full verify
   (CPU seconds, and the elements drawn), the part of the H200's 7.35 s that is the host's alone.
2. **plan**: the comparisons of run A of every case of every kernel's default plan, as verify makes them,
   the output being the float64 reference stored in float32 and nothing launched (CPU seconds of the
   ``compare`` phase: the part of the H200's 8.45 s that does not depend on the device).
3. **phases**: ``verify(..., emulated={})`` in-process over ``--kernel`` (default: the kernels whose
   emulation fits in a few GiB: the aux trunk, next-bar and trade-outcome forwards, the two gradient
   reduces, the gather and the label kernel) at their default sweep, the input budget at ``--input-budget``
   elements (the B = 65536 cases of the widest kernels are over it, as their emulated kernels would need
   16 GiB). Each phase the runner records (``Session.phase``) is timed in CPU seconds of the process
   (``time.process_time``) instead of wall seconds. On the emulated backend "transfer" and "checks" also
   hold what the GPU does on the device (the byte hash and the word counts, here numpy on the host) and
   "kernel" is the float64 reference run as the kernel: ``input_generation`` and ``compare`` are host work
   on both, the rest only partly.
4. **compare**: :func:`audit.runtime._compare.compare` and ``compare_delta`` on a passing float32 output of
   ``--rows`` x 256 against its float64 reference, with the chunked pass test (as verify runs it) and with
   the full rule only (``FAST_MIN`` raised), CPU seconds per call.

    python3 benchmarks/verify_host.py                       # the four parts, 3 runs each
    python3 benchmarks/verify_host.py --part compare --rows 65536
    python3 benchmarks/verify_host.py --kernel aux_trunk_forward --repeat 5 --json host.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import REPO, child_env, host_info, python, run_child, write_json  # noqa: E402

KERNELS = ["aux_trunk_forward", "aux_next_bar_forward", "aux_trade_outcome_forward", "aux_weight_grad_reduce",
           "aux_param_grad_reduce", "strided_gather", "trade_outcome_label"]  # fmt: skip


def child_phases(kernels: list[str], budget: int) -> dict:
    import time
    import types

    from audit.runtime import _session, verify

    _session.time = types.SimpleNamespace(perf_counter=time.process_time)  # phases in CPU seconds
    t0 = time.process_time()
    out = verify(REPO, kernels=kernels, emulated={}, evidence=False, budgets={"input": budget})
    cpu = time.process_time() - t0
    verdicts = sorted({(r.subject, r.verdict) for r in out.run.results})
    timing = {k: v for k, v in out.run.timing.items() if k not in ("wall", "total", "context_start", "module_load")}
    return {"cpu_s": cpu, "phases": timing, "verdicts": verdicts}


def child_inputs(kernels: list[str]) -> dict:
    """Every case of the default plan of ``kernels`` (all subjects when empty) built, its inputs drawn, and
    nothing run: the worker gets no backend, so the verifiers loop over none (no launch, no comparison)."""
    import time
    import types

    from audit.runtime import _inputs, _session, _worker, verify

    _session.time = types.SimpleNamespace(perf_counter=time.process_time)
    _worker.UnitRunner._backends = lambda self, unit, emulated: {}
    factories = []
    init = _inputs.InputFactory.__init__

    def spy(self, *a, **k):
        init(self, *a, **k)
        factories.append(self)

    _inputs.InputFactory.__init__ = spy
    t0 = time.process_time()
    out = verify(REPO, kernels=kernels, emulated={}, evidence=False)
    cpu = time.process_time() - t0
    return {"cpu_s": cpu, "input_generation_s": out.run.timing.get("input_generation", 0.0),
            "drawn_elements": sum(f.generated_elements for f in factories)}  # fmt: skip


def child_plan(kernels: list[str], full_rule: bool) -> dict:
    """The comparisons of every case of every kernel's default plan (``kernels``: all when empty), the
    output being the float64 reference stored in float32 (what the emulated kernel writes), with no
    launch: each case's reference is computed as verify computes it (in full, or on sampled rows) and its
    outputs go through ``check_reference`` (and the ``inout``/``accumulate`` delta) as run A's do."""
    import time
    import types

    import numpy as np

    from audit.runtime import _compare as C
    from audit.runtime import _kernel, _session, _worker, verify
    from audit.runtime._plan import np_dtype
    from audit.runtime._reference import ReferenceProblem

    _session.time = types.SimpleNamespace(perf_counter=time.process_time)
    host = types.SimpleNamespace(name="host", free_memory=lambda: None)
    _worker.UnitRunner._backends = lambda self, unit, emulated: {"host": host}
    if full_rule and hasattr(C, "FAST_MIN"):
        C.FAST_MIN = 1 << 62
    kv = _kernel.KernelVerifier
    for name in ("gradcheck", "unit_scale", "divisor_zero"):
        setattr(kv, name, lambda self, *a, **k: None)
    compared = [0]

    def run_case(self, be, case, full):
        if case.ref_mode is None:
            return
        try:
            ref = self.reference_of(case)
        except ReferenceProblem:
            return
        outs = {}
        for p in self.written:
            if p.name in ref and p.write_range is None:
                outs[p.name] = np.asarray(ref[p.name]).astype(np_dtype(p.dtype))
                compared[0] += outs[p.name].size
        self.check_reference(be, case, outs, {n: 0 for n in outs})

    kv.run_case = run_case
    from audit.api import load_project

    _, cs = load_project(REPO)
    t0 = time.process_time()
    out = verify(REPO, kernels=kernels or [k.name for k in cs.kernels], emulated={}, evidence=False)
    cpu = time.process_time() - t0
    return {"cpu_s": cpu, "compare_s": out.run.timing.get("compare", 0.0), "reference_s": out.run.timing.get("reference", 0.0),
            "compared_elements": compared[0], "verdicts": sorted({(r.subject, r.verdict) for r in out.run.results})}  # fmt: skip


def child_compare(rows: int, width: int = 256) -> dict:
    import time

    import numpy as np

    from audit.runtime import _compare as C

    rng = np.random.default_rng(0)
    ref = rng.standard_normal((rows, width))
    out = (ref * (1 + 1e-7 * rng.standard_normal((rows, width)))).astype(np.float32)
    before = rng.standard_normal((rows, width)).astype(np.float32)
    new = before.astype(np.float64) - 1e-3 * rng.standard_normal((rows, width))
    upd = new.astype(np.float32)
    res = {}
    for mode, fast_min in (("fast", getattr(C, "FAST_MIN", None)), ("full", 1 << 62)):
        if fast_min is None:
            continue  # a tree without the chunked pass test (the measurement before it)
        C.FAST_MIN = fast_min
        for name, fn in (("compare", lambda: C.compare(out, ref)), ("compare_delta", lambda: C.compare_delta(upd, before, new))):
            fn()  # the first call pays the page faults of its temporaries; time the next three
            times = []
            for _ in range(3):
                t = time.process_time()
                c = fn()
                times.append(time.process_time() - t)
            assert c.ok, c
            res[f"{name}_{mode}_s"] = statistics.median(times)
    return res


def run_children(part: str, extra: list[str], repeat: int, timeout: float) -> list[dict]:
    docs = []
    for i in range(repeat):
        # one BLAS thread: the norms' dot products would otherwise spin threads whose CPU time the
        # shared machine charges to the phase (the dot products give the same numbers either way here)
        env = child_env(extra={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        r = run_child([python(), str(Path(__file__).resolve()), "--child", part, *extra], env=env, cwd=REPO, timeout=timeout)
        if r.rc != 0:
            print(r.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"child {i + 1} of part {part} exited {r.rc}")
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        doc["maxrss_mib"] = r.maxrss_kib / 1024
        docs.append(doc)
    return docs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("inputs", "plan", "phases", "compare", "all"), default="all")
    ap.add_argument("--kernel", action="append", default=[], help="kernels of the phases part (repeatable)")
    ap.add_argument("--input-budget", type=int, default=1 << 24)
    ap.add_argument("--rows", type=int, default=65536, help="rows of the compare part's [rows, 256] output")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--child", choices=("phases", "compare", "inputs", "plan", "plan-full"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    kernels = args.kernel or KERNELS
    if args.child == "phases":
        print(json.dumps(child_phases(kernels, args.input_budget)))
        return 0
    if args.child == "compare":
        print(json.dumps(child_compare(args.rows)))
        return 0
    if args.child in ("plan", "plan-full"):
        print(json.dumps(child_plan(args.kernel, args.child == "plan-full")))
        return 0
    if args.child == "inputs":
        print(json.dumps(child_inputs(args.kernel)))
        return 0

    result: dict = {"benchmark": "verify_host", "host": host_info(), "repeat": args.repeat}
    if args.part in ("inputs", "all"):
        extra = [a for k in args.kernel for a in ("--kernel", k)]
        docs = run_children("inputs", extra, args.repeat, args.timeout)
        gen = statistics.median(d["input_generation_s"] for d in docs)
        drawn = docs[0]["drawn_elements"]
        print(f"inputs: every case of the default plan ({', '.join(args.kernel) or 'all subjects'}) built, nothing run; "
              f"input generation {gen:.2f} CPU s (median of {args.repeat}), {drawn / 1e6:.0f}M elements drawn")  # fmt: skip
        result["inputs"] = {"kernels": args.kernel, "input_generation_cpu_s": gen, "drawn_elements": drawn, "runs": docs}
    if args.part in ("plan", "all"):
        extra = [a for k in args.kernel for a in ("--kernel", k)]
        docs = run_children("plan", extra, args.repeat, args.timeout)
        cmp_s = statistics.median(d["compare_s"] for d in docs)
        ref_s = statistics.median(d["reference_s"] for d in docs)
        print(f"plan: the run-A comparisons of every case of every kernel's default plan ({docs[0]['compared_elements'] / 1e6:.0f}M "
              f"output elements), no launch: compare {cmp_s:.2f} CPU s, reference {ref_s:.2f} (median of {args.repeat})")  # fmt: skip
        bad = [f"{s} {v}" for s, v in docs[0]["verdicts"] if v != "pass"]
        print("  verdicts: " + (", ".join(bad) if bad else f"all {len(docs[0]['verdicts'])} pass"))
        result["plan"] = {"kernels": args.kernel, "compare_cpu_s": cmp_s, "reference_cpu_s": ref_s, "runs": docs}
    if args.part in ("phases", "all"):
        extra = [a for k in kernels for a in ("--kernel", k)] + ["--input-budget", str(args.input_budget)]
        docs = run_children("phases", extra, args.repeat, args.timeout)
        names = sorted({k for d in docs for k in d["phases"]})
        med = {k: statistics.median(d["phases"].get(k, 0.0) for d in docs) for k in names}
        cpu = statistics.median(d["cpu_s"] for d in docs)
        print(f"phases: emulated verify of {len(kernels)} kernel(s), median of {args.repeat} runs, CPU seconds")
        for k, v in sorted(med.items(), key=lambda kv: -kv[1]):
            print(f"  {k:<18} {v:8.2f}")
        host = med.get("input_generation", 0.0) + med.get("compare", 0.0)
        print(f"  input_generation + compare (host work on the GPU too): {host:.2f}; whole verify call {cpu:.2f}; "
              f"peak RSS {max(d['maxrss_mib'] for d in docs):.0f} MiB")  # fmt: skip
        print("  verdicts: " + ", ".join(f"{s} {v}" for s, v in docs[0]["verdicts"]))
        result["phases"] = {"kernels": kernels, "input_budget": args.input_budget, "median_cpu_s": med, "verify_cpu_s": cpu, "runs": docs}
    if args.part in ("compare", "all"):
        docs = run_children("compare", ["--rows", str(args.rows)], args.repeat, args.timeout)
        med = {k: statistics.median(d[k] for d in docs) for k in docs[0] if k.endswith("_s")}
        print(f"compare: a passing [{args.rows}, 256] float32 output, CPU seconds per call (median of {args.repeat} runs)")
        for name in ("compare", "compare_delta"):
            f, s = med.get(f"{name}_fast_s"), med[f"{name}_full_s"]
            fast = f"chunked pass test {f:.3f}, " if f else "(no chunked pass test in this tree) "
            print(f"  {name:<14} {fast}full rule {s:.3f}" + (f" ({s / f:.1f}x)" if f else ""))
        result["compare"] = {"rows": args.rows, "median_cpu_s": med, "runs": docs}
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
