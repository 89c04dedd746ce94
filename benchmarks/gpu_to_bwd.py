"""The trade-outcome head backward, ``aux_trade_outcome_backward``: the shipped kernel
(``kernels/aux_trade_outcome_backward_kernel.cu``, 8 rows per block one after the other, each behind its own
label load) against the candidate ``benchmarks/kernels_baseline/aux_trade_outcome_backward_fast.cu`` (32 rows per
block: the labels loaded at once, the skipped rows' outputs filled span-wise, the few valid rows by the shipped
per-row code; build-time overrides for the ``fast_u8`` / ``fast_r16`` builds) and its contract-ready copy
``aux_trade_outcome_backward_fast_kernel.cu`` (build ``ship``: the same code with the defaults as constants, no
overrides, entry ``aux_trade_outcome_backward``; in benchmarks/kernels_baseline/ until a contract points at it
from kernels/). Issue 18.

Correctness (the candidate must be BIT-EQUAL to the shipped kernel): every case runs both kernels on the same
inputs, into outputs poisoned with a NaN pattern and followed by ``GUARD_ROWS`` guard rows, and checks
* every output of the candidate equals the shipped kernel's bit for bit (the accumulator included);
* for both kernels: the guard rows past B still hold the poison, every element of the rows < B was written, and
  the accumulator's skipped rows (and guard rows) are unchanged bit for bit.
The cases (``cases``): B in ``--sizes`` x label densities {0, 3 %, 50 %, 100 %} (with a few labels outside
[0, K) among the unlabelled rows) x K in {3, 1, 8, 0, 9} (0 and 9: outside [1, AUX_K_MAX], the NaN rule), NULL weight
partials; the same with non-NULL dW1 / dW2 partials at B <= ``--per-sample-max``; valid_count = 0; every float
pointer one float off 16-byte alignment (the scalar paths); the contract's other verify shapes (H = 257,
SH2 = 260 / 261) at small B; saxpy_alpha = 0.5.

Time: each kernel captured into a CUDA graph (``gpu_wgrad_tc.graph_time``) at B in ``--time-sizes`` with 3 %
and 100 % labels, the shipped shape (SH2 = 256, H = 128, K = 3), NULL partials (the fused schedule's call);
the achieved store bandwidth (bytes the kernel must store: every row's db1, db2 and dh_s2_aux_out, plus the
valid rows' accumulator, over the median time).

    python3 benchmarks/gpu_to_bwd.py     (on the GPU host: CuPy; writes $OUT/gpu_to_bwd.json, or --json PATH)
    python3 benchmarks/gpu_to_bwd.py --cpu-check                       (builds both, prints ptxas; no GPU)

Exit 0 when every check holds, 1 when one fails, 2 on a build failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_fwd_cutlass import compile_jobs  # noqa: E402
from gpu_wgrad_tc import NVCC, REPO, ceil_div, environment, graph_time, log  # noqa: E402

from audit.load import load_contracts  # noqa: E402

KERNEL = "aux_trade_outcome_backward"  # the shipped kernel (and its contract)


def _where(name: str) -> str:
    """kernels/NAME while it is there, else benchmarks/kernels_baseline/NAME: shipping the 32-row kernel moves it
    into kernels/ and the 8-row one out (kernels/ holds the contracted kernels), and this benchmark keeps both."""
    return f"kernels/{name}" if (REPO / "kernels" / name).is_file() else f"benchmarks/kernels_baseline/{name}"


SHIPPED_SOURCE = _where("aux_trade_outcome_backward_kernel.cu")  # the 8-row kernel, the bit-equality reference
SHIPPED_ROWS_PER_BLOCK = 8  # its header: grid = (ceil_div(B, 8), 1, 1), block = (256, 1, 1)
CANDIDATE_SOURCE = "benchmarks/kernels_baseline/aux_trade_outcome_backward_fast.cu"
SHIP_SOURCE = _where("aux_trade_outcome_backward_fast_kernel.cu")  # the contract-ready copy, entry KERNEL
CANDIDATE = "aux_trade_outcome_backward_fast"
ROWS_PER_BLOCK = 32  # the candidate's header: grid = (ceil_div(B, 32), 1, 1), block = (256, 1, 1)
THREADS = 256
# candidate builds: tag -> extra nvcc defines ("fast" is the source's defaults, the build the chain uses)
VARIANTS: dict[str, tuple[str, ...]] = {
    "fast": (),
    "fast_u8": ("-DAUX_TO_BWD_FAST_MIN_BLOCKS=2", "-DAUX_TO_BWD_FAST_W1_UNROLL=8"),  # the shipped 8-deep W1 unroll, 96 registers
    "fast_r16": ("-DAUX_TO_BWD_FAST_ROWS=16",),  # 16 rows per block: twice the blocks
    "ship": (),  # SHIP_SOURCE, as a contract builds it
}


def source_of(tag: str) -> str:
    """The source a candidate build compiles."""
    return SHIP_SOURCE if tag == "ship" else CANDIDATE_SOURCE


def entry_of(tag: str) -> str:
    """The entry a build ("shipped" included) launches: the contract's name in the shipped kernel and its
    contract-ready successor, ``aux_trade_outcome_backward_fast`` in the candidate's builds."""
    return KERNEL if tag in ("shipped", "ship") else CANDIDATE


SIZES = (1, 37, 300, 4103, 65536)
TIME_SIZES = (256, 4096, 65536)
TIME_DENSITIES = (0.03, 1.0)
DENSITIES = (0.0, 0.03, 0.5, 1.0)
KS = (3, 1, 8, 0, 9)  # 0 and 9: outside [1, AUX_K_MAX], every output row NaN
GUARD_ROWS = 3
POISON = np.uint32(0x7FC0DEAD)  # a quiet NaN no kernel writes (aux_nan() is 0x7fc00000)
FLOAT_INPUTS = ("h_s2", "h1", "probs", "W1", "W2")
OUTPUTS = ("dW1_partial", "db1_partial", "dW2_partial", "db2_partial", "dh_s2_aux_out")
ACCUM = "dh_s2_aux_accum"


def chain_spec() -> str:
    """The ``--candidate`` spec of benchmarks/gpu_chain_vs_torch.py for this candidate (its default build)."""
    return f"{KERNEL}={CANDIDATE_SOURCE}:{CANDIDATE};grid=ceil_div(B, {ROWS_PER_BLOCK}),1,1;block={THREADS},1,1"


def rows_per_block(tag: str) -> int:
    """A candidate build's rows per block: its -DAUX_TO_BWD_FAST_ROWS, else the source's default."""
    for d in VARIANTS[tag]:
        if d.startswith("-DAUX_TO_BWD_FAST_ROWS="):
            return int(d.split("=", 1)[1])
    return ROWS_PER_BLOCK


def candidate_geometry(B: int, tag: str = "fast") -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    return (ceil_div(B, rows_per_block(tag)), 1, 1), (THREADS, 1, 1)


def shipped_geometry(cs, case: Case) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The 8-row kernel's launch: its contract's grid and block expressions while the contract names its source;
    once the contract points at another source (the 32-row kernel shipped), the 8-row kernel stays this
    benchmark's reference and keeps its own launch, ceil_div(B, 8) blocks of 256 threads."""
    k = cs.kernel_map[KERNEL]
    if k.source != SHIPPED_SOURCE:
        return (ceil_div(case.B, SHIPPED_ROWS_PER_BLOCK), 1, 1), (THREADS, 1, 1)
    env = {"B": case.B, "SH2": case.SH2, "H": case.H, "K": case.K}
    return (tuple(int(e.evaluate(env, cs.slot_indices)) for e in k.grid), tuple(int(e.evaluate(env, cs.slot_indices)) for e in k.block))


# ---------------------------------------------------------------------------------------------------
# the cases and their inputs


@dataclasses.dataclass(frozen=True)
class Case:
    B: int
    density: float  # the fraction of rows with a label in [0, K)
    K: int = 3
    SH2: int = 256
    H: int = 128
    per_sample: bool = False  # dW1_partial / dW2_partial passed (else NULL)
    valid_count: int | None = None  # None: the number of labels in [0, K) (what the loss reduce writes)
    misaligned: bool = False  # every float pointer one float past 16-byte alignment
    saxpy_alpha: float = 1.0
    seed: int = 0

    @property
    def name(self) -> str:
        extra = [f"SH2={self.SH2} H={self.H}"] if (self.SH2, self.H) != (256, 128) else []
        extra += ["per-sample"] if self.per_sample else []
        extra += [f"valid_count={self.valid_count}"] if self.valid_count is not None else []
        extra += ["misaligned"] if self.misaligned else []
        extra += [f"alpha={self.saxpy_alpha:g}"] if self.saxpy_alpha != 1.0 else []
        return " ".join([f"B={self.B} K={self.K} labels={self.density:.0%}", *extra])

    @property
    def k_rows(self) -> int:
        """Columns of probs and db2_partial, rows of W2: K (0 for a K below 1: those arrays are empty)."""
        return max(self.K, 0)


def cases(sizes=SIZES, per_sample_max: int = 300) -> list[Case]:
    out = []
    for B in sizes:
        for K in KS:
            for d in DENSITIES:
                out.append(Case(B, d, K))
                if B <= per_sample_max:
                    out.append(Case(B, d, K, per_sample=True))
        out.append(Case(B, 0.5, 3, valid_count=0))
        out.append(Case(B, 0.5, 3, misaligned=True))
        out.append(Case(B, 0.03, 3, misaligned=True))
        if B <= per_sample_max:
            out.append(Case(B, 0.5, 3, per_sample=True, misaligned=True))
            for SH2, H in ((260, 257), (261, 257), (261, 128)):  # the contract's other verify shapes: chunks, scalar dh
                out.append(Case(B, 0.5, 3, SH2=SH2, H=H))
                out.append(Case(B, 0.5, 8, SH2=SH2, H=H, per_sample=True))
        out.append(Case(B, 0.5, 3, saxpy_alpha=0.5))
    return out


def labels_of(case: Case, rng: np.random.Generator) -> np.ndarray:
    """``round(density * B)`` rows with a label in [0, K) (in [0, 3) when K is outside the range); 1 in 16 of the
    other rows gets a label outside [0, K) (K, K + 5 or -2: skipped like -1), the rest -1."""
    B = case.B
    labels = np.full(B, -1, np.int32)
    n = int(round(case.density * B))
    rows = rng.choice(B, n, replace=False) if n else np.zeros(0, np.int64)
    labels[rows] = rng.integers(0, case.K if case.K >= 1 else 3, n)
    rest = np.setdiff1d(np.arange(B), rows)
    odd = rest[rng.random(rest.size) < 1 / 16]
    labels[odd] = rng.choice(np.array([case.K, case.K + 5, -2], np.int32), odd.size)
    return labels


def valid_count_of(case: Case, labels: np.ndarray) -> int:
    if case.valid_count is not None:
        return case.valid_count
    return int(np.count_nonzero((labels >= 0) & (labels < case.K))) if case.K >= 1 else 0


def poisoned(shape: tuple[int, ...]) -> np.ndarray:
    return np.full(shape, POISON, np.uint32).view(np.float32)


@functools.lru_cache(maxsize=4)
def _dense(B: int, SH2: int, H: int, seed: int) -> dict[str, np.ndarray]:
    """The large random arrays of a shape (shared by the cases of that shape; never written: runs copy them)."""
    rng = np.random.default_rng(seed * 1_000_003 + B * 7 + SH2 * 3 + H)
    z = rng.standard_normal((B, H)).astype(np.float32)
    return {
        "h_s2": rng.standard_normal((B, SH2)).astype(np.float32),
        "h1": np.where(z > 0, z, np.expm1(z)).astype(np.float32),  # ELU outputs: both branches of ELU'
        "W1": (rng.standard_normal((H, SH2)) / np.sqrt(H)).astype(np.float32),
        ACCUM: rng.standard_normal((B + GUARD_ROWS, SH2)).astype(np.float32),
    }


def host_inputs(case: Case) -> dict[str, np.ndarray]:
    """Every array argument: inputs of B rows; outputs and the accumulator of B + GUARD_ROWS rows (outputs poisoned,
    the accumulator random), dW1 / dW2 partials only on a per-sample case."""
    rng = np.random.default_rng([case.seed, case.B, case.K, int(case.density * 1000)])
    B, SH2, H, Kr = case.B, case.SH2, case.H, case.k_rows
    logits = rng.standard_normal((B, max(Kr, 1)))[:, :Kr]
    probs = np.exp(logits - logits.max(axis=1, keepdims=True)) if Kr else logits
    labels = labels_of(case, rng)
    host = {
        **_dense(B, SH2, H, case.seed),
        "probs": (probs / probs.sum(axis=1, keepdims=True) if Kr else probs).astype(np.float32),
        "labels": labels,
        "valid_count": np.array([valid_count_of(case, labels)], np.int32),
        "W2": (rng.standard_normal((Kr, H)) / np.sqrt(max(Kr, 1))).astype(np.float32),
        "db1_partial": poisoned((B + GUARD_ROWS, H)),
        "db2_partial": poisoned((B + GUARD_ROWS, Kr)),
        "dh_s2_aux_out": poisoned((B + GUARD_ROWS, SH2)),
    }
    if case.per_sample:
        host["dW1_partial"] = poisoned((B + GUARD_ROWS, H, SH2))
        host["dW2_partial"] = poisoned((B + GUARD_ROWS, Kr, H))
    return host


def valid_rows(case: Case, host: dict[str, np.ndarray]) -> np.ndarray:
    """The rows the contract computes (all others are skipped): label in [0, K), K in [1, 8], valid_count > 0."""
    lab = host["labels"]
    ok = 1 <= case.K <= 8 and int(host["valid_count"][0]) > 0
    return (lab >= 0) & (lab < case.K) & ok


def stored_bytes(case: Case, n_valid: int) -> int:
    """Bytes the kernel must store: every row's db1_partial, db2_partial and dh_s2_aux_out (and the weight
    partials on a per-sample case), plus the accumulator rows of the valid rows."""
    per_row = case.H + case.k_rows + case.SH2 + (case.H * case.SH2 + case.k_rows * case.H if case.per_sample else 0)
    return 4 * (case.B * per_row + n_valid * case.SH2)


# ---------------------------------------------------------------------------------------------------
# the checks (host side: numpy arrays of the outputs after a run)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint32)


def bit_mismatches(a: np.ndarray, b: np.ndarray) -> int:
    """Elements whose 32 bits differ (NaN payloads count); shapes must agree."""
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    return int(np.count_nonzero(bits(a) != bits(b)))


def check_run(case: Case, host: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> list[str]:
    """One kernel's run on its own: guard rows still poisoned, every element of the rows < B written (no poison
    left), the accumulator's skipped rows and guard rows unchanged bit for bit."""
    problems = []
    B = case.B
    for name in OUTPUTS:
        if name not in host:
            continue
        o = bits(out[name])
        if np.any(o[B:] != POISON):
            problems.append(f"{name}: a guard row past B was written")
        left = int(np.count_nonzero(o[:B] == POISON))
        if left:
            problems.append(f"{name}: {left} elements of rows < B not written")
    keep = np.ones(B + GUARD_ROWS, bool)
    keep[:B] = ~valid_rows(case, host)
    changed = int(np.count_nonzero(np.any(bits(out[ACCUM])[keep] != bits(host[ACCUM])[keep], axis=1)))
    if changed:
        problems.append(f"{ACCUM}: {changed} skipped or guard rows changed")
    return problems


def compare_runs(shipped: dict[str, np.ndarray], cand: dict[str, np.ndarray]) -> list[str]:
    """The candidate's outputs against the shipped kernel's, bit for bit."""
    problems = []
    for name in (*OUTPUTS, ACCUM):
        if name not in shipped:
            continue
        n = bit_mismatches(shipped[name], cand[name])
        if n:
            problems.append(f"{name}: {n} elements differ from the shipped kernel's bits")
    return problems


# ---------------------------------------------------------------------------------------------------
# the device side (CuPy)


class Runner:
    def __init__(self, cs, cubins: dict[str, Path], warmup: int = 5, replays: int = 50):
        import cupy as cp

        self.cp, self.cs = cp, cs
        self.warmup, self.replays = warmup, replays
        self.fn = {}
        for tag, cubin in cubins.items():
            fn = cp.RawModule(path=str(cubin)).get_function(entry_of(tag))
            getattr(fn, "kernel", None)  # load the module now, outside any capture
            self.fn[tag] = fn
        self.stream = cp.cuda.Stream(non_blocking=True)

    def geometry(self, tag: str, case: Case):
        return shipped_geometry(self.cs, case) if tag == "shipped" else candidate_geometry(case.B, tag)

    def device(self, case: Case, host: dict[str, np.ndarray]) -> dict:
        """Fresh device copies of every array (one float past 16-byte alignment on a misaligned case), complete
        when this returns. CuPy's host-to-device copies (``cp.asarray``: a pinned staging buffer and
        ``cudaMemcpyAsync``; ``d[...] = ...``: a kernel) are asynchronous on the *current* stream, and
        ``self.stream`` is non-blocking (it does not wait for the legacy default stream): so every copy is made on
        ``self.stream``, and the stream is synchronised. (Copies left on the default stream let the kernels start
        before their inputs and poisoned outputs had arrived, and the late poison then overwrote what they had
        written: the H200 run of 5 December, 70 of 201 cases, the shipped kernel's too.)"""
        cp = self.cp
        dev = {}
        with self.stream:
            for name, a in host.items():
                if case.misaligned and a.dtype == np.float32:
                    buf = cp.empty(a.size + 1, np.float32)
                    d = buf[1:].reshape(a.shape)
                    d[...] = cp.asarray(a)
                else:
                    d = cp.asarray(a)
                dev[name] = d
        self.stream.synchronize()
        return dev

    def args(self, case: Case, dev: dict) -> tuple:
        return (dev["h_s2"], dev["h1"], dev["probs"], dev["labels"], dev["valid_count"], dev["W1"], dev["W2"],
                dev.get("dW1_partial", np.uint64(0)), dev["db1_partial"], dev.get("dW2_partial", np.uint64(0)), dev["db2_partial"],
                dev["dh_s2_aux_out"], dev[ACCUM], np.float32(case.saxpy_alpha), np.int32(case.B), np.int32(case.SH2),
                np.int32(case.H), np.int32(case.K))  # fmt: skip

    def run(self, tag: str, case: Case, host: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        dev = self.device(case, host)
        grid, block = self.geometry(tag, case)
        self.fn[tag](grid, block, self.args(case, dev), stream=self.stream)
        self.stream.synchronize()
        with self.stream:  # the copies back on the launch stream too
            return {name: self.cp.asnumpy(dev[name]) for name in (*OUTPUTS, ACCUM) if name in dev}

    def time(self, tag: str, case: Case, host: dict[str, np.ndarray]) -> dict:
        dev = self.device(case, host)
        grid, block = self.geometry(tag, case)
        args = self.args(case, dev)
        t, rep = graph_time(self.cp, self.stream, lambda: self.fn[tag](grid, block, args, stream=self.stream), 20.0,
                            self.warmup, self.replays)  # fmt: skip
        return {**t, "graph_launches": rep, "grid": list(grid), "block": list(block)}


def check_case(runner: Runner, case: Case, tags: list[str]) -> dict:
    """Both kernels (and every candidate build) on one case: the per-run checks and the bit comparison."""
    host = host_inputs(case)
    outs = {tag: runner.run(tag, case, host) for tag in ["shipped", *tags]}
    row = {"case": case.name, **dataclasses.asdict(case), "n_valid": int(valid_rows(case, host).sum()), "problems": {}}
    for tag, out in outs.items():
        p = check_run(case, host, out) + (compare_runs(outs["shipped"], out) if tag != "shipped" else [])
        if p:
            row["problems"][tag] = p
    return row


# ---------------------------------------------------------------------------------------------------


def build(out_dir: Path, tags: list[str]) -> tuple[dict[str, Path], dict[str, str]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = {"shipped": [*NVCC, "-Xptxas", "-v", "-o", str(out_dir / "shipped.cubin"), SHIPPED_SOURCE]}
    for tag in tags:
        jobs[tag] = [*NVCC, "-Xptxas", "-v", *VARIANTS[tag], "-o", str(out_dir / f"{tag}.cubin"), source_of(tag)]
    return compile_jobs(jobs)


def float_list(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int_list, default=list(SIZES), help="B of the correctness cases ('' for none)")
    p.add_argument("--per-sample-max", type=int, default=300, help="largest B of the cases with non-NULL weight partials")
    p.add_argument("--time-sizes", type=int_list, default=list(TIME_SIZES), help="B of the timed cases ('' for none)")
    p.add_argument("--time-densities", type=float_list, default=list(TIME_DENSITIES))
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"candidate builds, of {', '.join(VARIANTS)}")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--replays", type=int, default=50)
    p.add_argument("--json", default=None, help="result path (default $OUT/gpu_to_bwd.json when $OUT is set)")
    p.add_argument("--cpu-check", action="store_true", help="build both kernels and print ptxas; no GPU")
    args = p.parse_args(argv)
    args.variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown or not args.variants:
        p.error(f"--variants: {', '.join(unknown) or 'none'} not among {', '.join(VARIANTS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cs = load_contracts(REPO / "contracts", REPO)
    try:
        cubins, ptxas = build(Path(tempfile.mkdtemp(prefix="to_bwd_")), args.variants)
    except RuntimeError as exc:
        print(f"gpu_to_bwd: {exc}", file=sys.stderr)
        return 2
    results: dict = {"kernel": KERNEL, "candidate": CANDIDATE_SOURCE, "ship": SHIP_SOURCE, "chain_spec": chain_spec(), "ptxas": ptxas}
    if args.cpu_check:
        for tag, line in ptxas.items():
            print(f"{tag}: {line}")
        return 0
    results["environment"] = environment()
    runner = Runner(cs, cubins, args.warmup, args.replays)
    rows = []
    for case in cases(args.sizes, args.per_sample_max):
        try:
            row = check_case(runner, case, args.variants)
        except Exception as exc:  # noqa: BLE001 - one failing case is reported, the others still run
            row = {"case": case.name, "problems": {"run": [repr(exc)]}}
        rows.append(row)
        for tag, p in row["problems"].items():
            log(f"FAIL {case.name} [{tag}]: {'; '.join(p)}")
    failed = [r for r in rows if r["problems"]]
    log(f"correctness: {len(rows) - len(failed)} of {len(rows)} cases pass (bit-equal to the shipped kernel, guards, mask)")
    results["correctness"] = {"cases": len(rows), "failed": len(failed), "rows": rows}
    timed = []
    for B in args.time_sizes:
        for d in args.time_densities:
            case = Case(B, d)
            host = host_inputs(case)
            n_valid = int(valid_rows(case, host).sum())
            row = {"B": B, "density": d, "n_valid": n_valid, "stored_bytes": stored_bytes(case, n_valid)}
            for tag in ["shipped", *args.variants]:
                t = runner.time(tag, case, host)
                t["store_GBps"] = row["stored_bytes"] / t["median_us"] / 1e3
                row[tag] = t
            timed.append(row)
            log(f"B={B:6d} labels={d:4.0%}: " + ", ".join(
                f"{tag} {row[tag]['median_us']:8.1f} us ({row[tag]['store_GBps']:6.0f} GB/s)" for tag in ["shipped", *args.variants])
                + "".join(f"; x{row['shipped']['median_us'] / row[tag]['median_us']:.2f} {tag}" for tag in args.variants))  # fmt: skip
    results["timing"] = timed
    path = args.json or (str(Path(os.environ["OUT"]) / "gpu_to_bwd.json") if os.environ.get("OUT") else None)
    if path:
        Path(path).write_text(json.dumps(results, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
