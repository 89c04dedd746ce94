"""benchmarks/gpu_to_bwd.py (the trade-outcome head backward candidate, issue 18) on the CPU: its cases, inputs,
geometry and checks with numpy stand-ins for CuPy and the kernels; the candidate's build (``nvcc``) and the
shipped chain with the candidate swapped in passing every static rule of ``wireup check`` (``nvcc``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from shipped_notes import assert_clean_but_known_notes, errors_and_warnings

from audit.load import load_contracts

REPO = Path(__file__).resolve().parents[1]
KERNEL, ENTRY = "aux_trade_outcome_backward", "aux_trade_outcome_backward_fast"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_to_bwd

    return gpu_to_bwd


@pytest.fixture(scope="module")
def cs():
    return load_contracts(REPO / "contracts", REPO)


def _signature(text: str, entry: str) -> list[str]:
    m = re.search(rf"\b{entry}\s*\(([^)]*)\)", text)
    assert m, entry
    return [" ".join(p.split()) for p in m[1].split(",")]


def test_candidate_entry_takes_the_shipped_parameters_and_states_its_geometry(bench):
    src = (REPO / bench.CANDIDATE_SOURCE).read_text()
    shipped = _signature((REPO / bench.SHIPPED_SOURCE).read_text(), KERNEL)
    assert _signature(src, ENTRY) == shipped and len(shipped) == 18
    assert "grid = (ceil_div(B, 32), 1, 1), block = (256, 1, 1)" in src
    assert "constexpr int kRowsPerBlock = AUX_TO_BWD_FAST_ROWS;" in src and "constexpr int kThreads = 256;" in src
    assert set(bench.VARIANTS) == {"fast", "fast_u8", "fast_r16", "ship"} and bench.VARIANTS["fast"] == bench.VARIANTS["ship"] == ()
    assert bench.source_of("fast_r16") == bench.CANDIDATE_SOURCE and bench.source_of("ship") == bench.SHIP_SOURCE
    for define in (*bench.VARIANTS["fast_u8"], *bench.VARIANTS["fast_r16"]):
        assert f"#ifndef {define[2:].split('=')[0]}" in src
    assert "#define AUX_TO_BWD_FAST_ROWS 32" in src


def test_geometry_and_chain_spec(bench, cs, monkeypatch):
    assert bench.candidate_geometry(65536) == ((2048, 1, 1), (256, 1, 1))
    assert bench.candidate_geometry(65536, "fast_r16") == ((4096, 1, 1), (256, 1, 1)) and bench.rows_per_block("fast_u8") == 32
    assert bench.candidate_geometry(1) == ((1, 1, 1), (256, 1, 1)) and bench.candidate_geometry(4103) == ((129, 1, 1), (256, 1, 1))
    assert bench.shipped_geometry(cs, bench.Case(65536, 0.03)) == ((8192, 1, 1), (256, 1, 1))  # the contract's ceil_div(B, 8)
    assert bench.chain_spec() == f"{KERNEL}=benchmarks/kernels_baseline/aux_trade_outcome_backward_fast.cu:{ENTRY};grid=ceil_div(B, 32),1,1;block=256,1,1"
    import gpu_chain_vs_torch as chain

    c = chain.Candidate.parse(bench.chain_spec())
    assert [e.evaluate({"B": 65536}, {}) for e in c.grid] == [2048, 1, 1] and [e.evaluate({}, {}) for e in c.block] == [256, 1, 1]


def test_the_reference_keeps_its_own_launch_once_the_contract_ships_the_32_row_kernel(bench, tmp_path):
    """After SHIP_CONTRACT_EDITS the contract's grid is ceil_div(B, 32): the 8-row kernel (still this benchmark's
    bit-equality reference) must keep ceil_div(B, 8), or 3 of every 4 of its rows would go unwritten."""
    shipped_src = (REPO / bench.SHIPPED_SOURCE).read_text()
    assert "constexpr int kRowsPerBlock = 8;" in shipped_src and bench.SHIPPED_ROWS_PER_BLOCK == 8
    root = _shipped_tree(tmp_path / "p", ("contracts", "kernels"))
    swapped = load_contracts(root / "contracts", root)
    assert [str(e) for e in swapped.kernel_map[KERNEL].grid][0].replace(" ", "") == "ceil_div(B,32)"
    for B in (1, 37, 4103, 65536):
        assert bench.shipped_geometry(swapped, bench.Case(B, 0.03)) == ((-(-B // 8), 1, 1), (256, 1, 1))


def _code(text: str) -> str:
    """The text from the first function on, without comments, whitespace-normalised."""
    text = text[text.index("__device__ __forceinline__ void fill_skipped_rows(") :]
    text = re.sub(r"//[^\n]*", "", text)
    return " ".join(text.split())


def test_the_contract_ready_kernel_is_the_candidate_with_its_defaults_fixed(bench):
    """The contract-ready copy runs the candidate's code token for token, with the candidate's build-time defaults
    as constants, no override left, and the contract's name as its entry (a scaffold of it names the kernel the
    contract does: tests/test_init.py), and its one addition: dh_s2_aux_out may be NULL (the fused path binds it
    so), each of its three stores guarded."""
    cand = (REPO / bench.CANDIDATE_SOURCE).read_text()
    ship = (REPO / bench.SHIP_SOURCE).read_text()
    guarded = _code(cand).replace("__launch_bounds__(kThreads, AUX_TO_BWD_FAST_MIN_BLOCKS)", "__launch_bounds__(kThreads, kMinBlocks)").replace(
        f"{ENTRY}(", f"{KERNEL}(")
    for store in ("fill_skipped_rows(dh_s2_aux_out + (size_t)row0 * SH2, SH2, nrows, keep, fill);",
                  "*reinterpret_cast<float4*>(dh_s2_aux_out + o) = total;", "dh_s2_aux_out[o] = dh;"):  # fmt: skip
        assert guarded.count(store) == 1, store
        guarded = guarded.replace(store, "if (dh_s2_aux_out != nullptr) " + store)
    assert _code(ship) == guarded
    for macro, const in (("AUX_TO_BWD_FAST_ROWS", "kRowsPerBlock"), ("AUX_TO_BWD_FAST_MIN_BLOCKS", "kMinBlocks"),
                         ("AUX_TO_BWD_FAST_W1_UNROLL", "kW1Unroll")):  # fmt: skip
        default = re.search(rf"#define {macro} (\d+)", cand)[1]
        assert re.search(rf"constexpr int {const} = {default};", ship), const
        assert macro not in ship
    assert _signature(ship, KERNEL) == _signature((REPO / bench.SHIPPED_SOURCE).read_text(), KERNEL)
    assert bench.entry_of("ship") == bench.entry_of("shipped") == KERNEL and bench.entry_of("fast") == ENTRY
    assert "// Launch: grid = (ceil_div(B, 32), 1, 1), block = (256, 1, 1)" in ship and "CANDIDATE" not in ship


def test_the_cases_cover_the_matrix(bench):
    cases = bench.cases()
    assert {c.B for c in cases} == {1, 37, 300, 4103, 65536}
    plain = {(c.B, c.K, c.density) for c in cases if c == bench.Case(c.B, c.density, c.K)}
    assert plain == {(B, K, d) for B in (1, 37, 300, 4103, 65536) for K in (3, 1, 8, 0, 9) for d in (0.0, 0.03, 0.5, 1.0)}
    per_sample = [c for c in cases if c.per_sample]
    assert {c.B for c in per_sample} == {1, 37, 300} and {c.K for c in per_sample} == {3, 1, 8, 0, 9}
    for B in (1, 37, 300, 4103, 65536):
        assert bench.Case(B, 0.5, valid_count=0) in cases and bench.Case(B, 0.03, misaligned=True) in cases
        assert bench.Case(B, 0.5, saxpy_alpha=0.5) in cases
    assert {(c.SH2, c.H) for c in cases} == {(256, 128), (260, 257), (261, 257), (261, 128)}
    assert len({c.name for c in cases}) == len(cases)  # names identify cases in the JSON


def test_labels_density_out_of_range_labels_and_valid_count(bench):
    rng = np.random.default_rng(1)
    case = bench.Case(4103, 0.03, K=3)
    labels = bench.labels_of(case, rng)
    inside = (labels >= 0) & (labels < 3)
    assert inside.sum() == round(0.03 * 4103)
    odd = labels[~inside & (labels != -1)]
    assert odd.size > 100 and set(odd.tolist()) == {3, 8, -2}  # skipped like -1: outside [0, K)
    assert bench.valid_count_of(case, labels) == inside.sum()
    assert bench.valid_count_of(bench.Case(4103, 0.03, valid_count=0), labels) == 0
    full = bench.labels_of(bench.Case(300, 1.0, K=8), rng)
    assert ((full >= 0) & (full < 8)).all()
    none = bench.labels_of(bench.Case(300, 0.0, K=0), rng)
    assert bench.valid_count_of(bench.Case(300, 0.0, K=0), none) == 0 and set(none[none != -1].tolist()) == {0, 5, -2}


def test_host_inputs_poison_outputs_and_add_guard_rows(bench):
    case = bench.Case(37, 0.5, K=8, per_sample=True)
    host = bench.host_inputs(case)
    g = bench.GUARD_ROWS
    assert host["db1_partial"].shape == (37 + g, 128) and host["dW1_partial"].shape == (37 + g, 128, 256)
    assert host["dW2_partial"].shape == (37 + g, 8, 128) and host["db2_partial"].shape == (37 + g, 8)
    for name in bench.OUTPUTS:
        assert (host[name].view(np.uint32) == bench.POISON).all()
    assert host["h1"].min() > -1 and (host["h1"] < 0).any() and (host["h1"] > 0).any()  # both ELU' branches
    assert "dW1_partial" not in bench.host_inputs(bench.Case(37, 0.5))
    assert bench.host_inputs(bench.Case(37, 0.5, K=0))["db2_partial"].shape == (37 + g, 0)
    assert bench.stored_bytes(bench.Case(65536, 0.03), 1966) == 4 * (65536 * (128 + 3 + 256) + 1966 * 256)


# ---------------------------------------------------------------------------------------------------
# the host logic, with the kernels emulated in numpy


def _emulate(args, fault: str | None = None) -> None:
    """The contract's semantics in float32 (NULL partials are np.uint64(0)); ``fault`` breaks one thing."""
    h_s2, h1, probs, labels, vc, W1, W2, dW1, db1, dW2, db2, dh, acc, alpha, B, SH2, H, K = args
    B, K = int(B), int(K)
    partials = [p for p in (dW1, dW2) if not isinstance(p, np.uint64)]
    k_ok = 1 <= K <= 8
    fill = np.float32(0.0) if k_ok else np.uint32(0x7FC00000).view(np.float32)
    for o in (db1, db2, dh, *partials):
        o[:B] = fill
    if not k_ok:
        return
    rows = np.nonzero((labels >= 0) & (labels < K) & (int(vc[0]) > 0))[0]
    onehot = np.zeros((rows.size, K), np.float32)
    onehot[np.arange(rows.size), labels[rows]] = 1.0
    dl = ((probs[rows] - onehot) / np.float32(vc[0])).astype(np.float32)
    hv = h1[rows]
    dz = ((dl @ W2) * np.where(hv > 0, np.float32(1), 1 + hv)).astype(np.float32)
    d = (dz @ W1).astype(np.float32)
    db2[rows], db1[rows], dh[rows] = dl, dz, d
    acc[rows] = acc[rows] + np.float32(alpha) * d
    if partials:
        dW1[rows] = dz[:, :, None] * h_s2[rows][:, None, :]
        dW2[rows] = dl[:, :, None] * hv[:, None, :]
    if fault == "bit" and rows.size:
        db1.view(np.uint32)[rows[0], 0] ^= 1
    elif fault == "guard":
        dh[B] = 0.0
    elif fault == "unwritten":
        dh.view(np.uint32)[B - 1, -1] = 0x7FC0DEAD
    elif fault == "accum":
        skipped = np.setdiff1d(np.arange(B), rows)
        if skipped.size:
            acc[skipped[0], 0] += 1.0


class _DevArray(np.ndarray):
    """A device array of ``_stream_cupy``: element assignment (``d[...] = x``, a CuPy kernel) is enqueued on the
    current stream, like every other device operation."""

    cp = None

    def __setitem__(self, key, value):
        target = self.view(np.ndarray)
        _DevArray.cp.current().enqueue(lambda: np.ndarray.__setitem__(target, key, np.asarray(value)))


def _stream_cupy(kernels: dict):
    """A CuPy stand-in that keeps CUDA's stream ordering: every device operation (a host-to-device copy by
    ``asarray``, an assignment, a kernel launch) is enqueued on a stream (the one passed, else the current one:
    ``with stream:``, else the legacy default stream) and runs when that stream is synchronised, in order. A
    ``Stream(non_blocking=True)`` does not wait for the default stream's work, so a launch on it can run before
    copies left on the default stream, and those then land after it (what CuPy and CUDA allow, the worst order).
    ``asnumpy`` synchronises the current stream first, as ``ndarray.get()`` does. Graph capture records the
    stream's operations; a replay enqueues them again."""
    import types

    cp = types.ModuleType("cupy")
    cp.__version__ = "fake-streams"
    cp.float32 = np.float32

    class Stream:
        def __init__(self, non_blocking: bool = False):
            self.queue, self.capture = [], None

        def enqueue(self, op):
            (self.capture if self.capture is not None else self.queue).append(op)

        def synchronize(self):
            while self.queue:
                self.queue.pop(0)()

        def __enter__(self):
            cp.stack.append(self)
            return self

        def __exit__(self, *exc):
            cp.stack.pop()

        def begin_capture(self):
            self.capture = []

        def end_capture(self):
            ops, self.capture = self.capture, None
            return types.SimpleNamespace(upload=lambda stream: None, launch=lambda stream: [stream.enqueue(op) for op in ops])

        def record(self, *a):
            pass

    cp.null = Stream()
    cp.stack = []
    cp.streams = []
    cp.current = lambda: cp.stack[-1] if cp.stack else cp.null

    def new_stream(non_blocking=False):
        s = Stream(non_blocking)
        cp.streams.append(s)
        return s

    def device_synchronize():
        for s in (cp.null, *cp.streams):
            s.synchronize()

    def alloc(shape, dtype):
        """256-byte aligned (as CuPy's pool is); zeros stand for what it holds before its copy arrives."""
        dtype = np.dtype(dtype)
        n = int(np.prod(shape)) * dtype.itemsize
        raw = np.zeros(n + 256, np.uint8)
        off = -raw.ctypes.data % 256
        return raw[off : off + n].view(dtype).reshape(shape).view(_DevArray)

    def asarray(a):
        snapshot = np.array(a)  # CuPy stages the host data into pinned memory at the call
        d = alloc(snapshot.shape, snapshot.dtype)
        cp.current().enqueue(lambda: np.ndarray.__setitem__(d.view(np.ndarray), ..., snapshot))
        return d

    def asnumpy(a):
        cp.current().synchronize()
        return np.array(a.view(np.ndarray))

    class RawModule:
        def __init__(self, path):
            self.path = path

        def get_function(self, name):
            kernel = kernels[(self.path, name)]

            def launch(grid, block, args, stream=None):
                plain = tuple(a.view(np.ndarray) if isinstance(a, np.ndarray) else a for a in args)
                (stream or cp.current()).enqueue(lambda: kernel(grid, block, plain))

            return launch

    _DevArray.cp = cp
    cp.asarray, cp.asnumpy, cp.empty, cp.RawModule = asarray, asnumpy, alloc, RawModule
    cp.cuda = types.SimpleNamespace(Stream=new_stream, Event=lambda: types.SimpleNamespace(record=lambda s: None),
                                    get_elapsed_time=lambda a, b: 0.01, Device=lambda *a: types.SimpleNamespace(synchronize=device_synchronize))  # fmt: skip
    return cp


def _fake(monkeypatch, bench, faults: dict[str, str | None]):
    kernels = {}
    for tag in ("shipped", *bench.VARIANTS):
        entry = bench.entry_of(tag)
        kernels[(tag, entry)] = lambda grid, block, args, f=faults.get(tag): _emulate(args, f)
    cp = _stream_cupy(kernels)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(bench, "build", lambda out_dir, tags: ({t: Path(t) for t in ("shipped", *tags)}, {t: "fake" for t in ("shipped", *tags)}))
    monkeypatch.setattr(bench, "SIZES", (1, 37, 300))


def _main(bench, tmp_path, extra=()):
    out = tmp_path / "r.json"
    code = bench.main(["--sizes", "1,37,300", "--time-sizes", "256", "--replays", "2", "--warmup", "1", "--json", str(out), *extra])
    return code, json.loads(out.read_text())


def test_host_logic_passes_a_right_candidate(bench, monkeypatch, tmp_path):
    _fake(monkeypatch, bench, {})
    code, data = _main(bench, tmp_path)
    assert code == 0 and data["correctness"]["failed"] == 0
    assert data["correctness"]["cases"] == len(bench.cases((1, 37, 300)))
    (t3, t100) = data["timing"]
    assert (t3["B"], t3["density"], t100["density"]) == (256, 0.03, 1.0) and t3["n_valid"] == 8 and t100["n_valid"] == 256
    for tag in ("shipped", "fast", "fast_u8", "fast_r16", "ship"):
        assert t3[tag]["median_us"] > 0 and t3[tag]["store_GBps"] == pytest.approx(t3["stored_bytes"] / t3[tag]["median_us"] / 1e3)
    assert t3["shipped"]["grid"] == [32, 1, 1] and t3["fast"]["grid"] == t3["ship"]["grid"] == [8, 1, 1] and t3["fast_r16"]["grid"] == [16, 1, 1]
    assert data["chain_spec"] == bench.chain_spec()


@pytest.mark.parametrize(("fault", "message"), [
    ("bit", "db1_partial: 1 elements differ from the shipped kernel's bits"),
    ("guard", "dh_s2_aux_out: a guard row past B was written"),
    ("unwritten", "dh_s2_aux_out: 1 elements of rows < B not written"),
    ("accum", "dh_s2_aux_accum: 1 skipped or guard rows changed"),
])  # fmt: skip
def test_host_logic_fails_a_wrong_candidate(bench, monkeypatch, tmp_path, fault, message):
    _fake(monkeypatch, bench, {"fast_u8": fault})
    code, data = _main(bench, tmp_path, ["--time-sizes", ""])
    assert code == 1
    failed = [r for r in data["correctness"]["rows"] if r["problems"]]
    assert failed and all(set(r["problems"]) == {"fast_u8"} for r in failed)
    assert any(message in r["problems"]["fast_u8"] for r in failed)


def test_a_wrong_shipped_run_is_reported_as_the_shipped_kernels(bench, monkeypatch, tmp_path):
    _fake(monkeypatch, bench, {"shipped": "guard"})
    code, data = _main(bench, tmp_path, ["--time-sizes", "", "--variants", "fast"])
    assert code == 1
    failed = [r for r in data["correctness"]["rows"] if r["problems"]]
    assert all("dh_s2_aux_out: a guard row past B was written" in r["problems"]["shipped"] for r in failed)


def test_bit_mismatches_counts_nan_payloads(bench):
    a = np.array([np.nan, 0.0, -0.0], np.float32)
    b = a.copy()
    assert bench.bit_mismatches(a, b) == 0
    b.view(np.uint32)[0] = 0x7FC0DEAD
    b[2] = 0.0  # -0.0 and 0.0 compare equal as floats, not as bits
    assert bench.bit_mismatches(a, b) == 2
    with pytest.raises(ValueError, match="shapes differ"):
        bench.bit_mismatches(a, b[:2])


def test_unknown_variant_is_refused(bench, capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--variants", "fast,slow"])
    assert e.value.code == 2 and "--variants: slow not among fast, fast_u8, fast_r16, ship" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------
# the build and the static rules


@pytest.mark.nvcc
def test_cpu_check_builds_both_without_spill(bench, capsys):
    assert bench.main(["--cpu-check"]) == 0
    out = capsys.readouterr().out
    assert "shipped: aux_trade_outcome_backward: 48 registers, 0 bytes spill stores, 0 bytes spill loads" in out
    assert f"fast: {ENTRY}: 64 registers, 0 bytes spill stores, 0 bytes spill loads, 5408 bytes smem" in out
    assert f"fast_u8: {ENTRY}: 96 registers, 0 bytes spill stores, 0 bytes spill loads" in out
    assert f"fast_r16: {ENTRY}: 64 registers, 0 bytes spill stores, 0 bytes spill loads" in out
    assert f"ship: {KERNEL}: 64 registers, 0 bytes spill stores, 0 bytes spill loads, 5408 bytes smem" in out


# Shipping the 32-row kernel: the contract-ready file moves into kernels/ and the 8-row one out of it (kernels/
# holds the contracted kernels; the 8-row one stays gpu_to_bwd.py's reference in benchmarks/kernels_baseline/),
# and the contract of aux_trade_outcome_backward (contracts/kernels/aux_trade_outcome.toml) takes the new source
# and grid, nothing else (the entry keeps its name; the parameters, the mask, the verify dims stay). Applied to a
# copy of the project.
SHIP_MOVES = (("benchmarks/kernels_baseline/aux_trade_outcome_backward_fast_kernel.cu", "kernels/aux_trade_outcome_backward_fast_kernel.cu"),
              ("kernels/aux_trade_outcome_backward_kernel.cu", "benchmarks/kernels_baseline/aux_trade_outcome_backward_kernel.cu"))  # fmt: skip
SHIP_CONTRACT_EDITS = (
    ('source = "kernels/aux_trade_outcome_backward_kernel.cu"\nentry = "aux_trade_outcome_backward"\n',
     'source = "kernels/aux_trade_outcome_backward_fast_kernel.cu"\nentry = "aux_trade_outcome_backward"\n'),
    ('grid = ["ceil_div(B, 8)", 1, 1]\nblock = [256, 1, 1]\n', 'grid = ["ceil_div(B, 32)", 1, 1]\nblock = [256, 1, 1]\n'),
)


def _shipped_tree(root: Path, parts=("contracts", "kernels", "audit/references", "reports"), source_edit=None) -> Path:
    """A copy of the project's ``parts`` with SHIP_MOVES and SHIP_CONTRACT_EDITS applied (``source_edit`` on the new
    kernel); the moves and edits already made in the project (once it is shipped) are taken as they are."""
    for part in parts:
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    for src, dst in SHIP_MOVES:
        text = (REPO / src).read_text() if (REPO / src).is_file() else (REPO / dst).read_text()
        (root / dst).parent.mkdir(parents=True, exist_ok=True)
        (root / dst).write_text(source_edit(text) if source_edit and dst.startswith("kernels/") else text)
        (root / src).unlink(missing_ok=True)
    path = root / "contracts" / "kernels" / "aux_trade_outcome.toml"
    t = path.read_text()
    for old, new in SHIP_CONTRACT_EDITS:
        assert t.count(old) + t.count(new) == 1, old
        t = t.replace(old, new)
    path.write_text(t)
    return root


def _swapped_project(tmp_path: Path, source_edit=None) -> Path:
    root = _shipped_tree(tmp_path / "p", source_edit=source_edit)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[tool.wireup]\n", '[tool.wireup]\ncache = "build-cache"\n', 1))
    assert sorted(p.name for p in (root / "kernels").glob("aux_trade_outcome_backward*")) == ["aux_trade_outcome_backward_fast_kernel.cu"]
    return root


@pytest.mark.nvcc
def test_the_shipped_chain_with_the_fast_trade_outcome_backward_passes_every_static_rule(tmp_path):
    """The trade-outcome head backward swapped for the contract-ready 32-row kernel (SHIP_CONTRACT_EDITS: the
    contract pointed at its source, entry and grid ceil_div(B, 32)): the build, the ABI and resource checks and the
    source analyses find nothing to report; the same swap with a wrong parameter type is an ABI finding (the check
    sees the new kernel)."""
    from audit.api import check

    result = check(_swapped_project(tmp_path / "good"), ignore=["evidence", "launchers", "GENERATED_STALE"])
    assert_clean_but_known_notes(result)
    assert not [nr for nr in result.not_run if nr.rule not in ("NO_LAUNCHER", "UNAUDITED_KERNEL", "GEOMETRY_DRIFT")]
    bad = _swapped_project(tmp_path / "bad", lambda s: s.replace("dh_s2_aux_accum, float saxpy_alpha, int B", "dh_s2_aux_accum, int saxpy_alpha, int B"))
    result = check(bad, ignore=["evidence", "launchers", "GENERATED_STALE"])
    assert errors_and_warnings(result) == ["ABI_MISMATCH"]
    assert 'parameter 14 "saxpy_alpha" is a scalar f32' in next(f for f in result.findings if f.rule == "ABI_MISMATCH").message


# ---------------------------------------------------------------------------------------------------
# the skipped-row fills, the candidate's own source compiled for the host

_HOST_SHIM = r"""
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define __device__
#define __forceinline__ inline
struct float4 { float x, y, z, w; };
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct Dim { int x; };
static Dim threadIdx, blockDim;
"""

# every thread of a block run one after the other (the fills have no barrier and no thread reads what another
# writes): X = 0 .. 13 elements per row, 1 .. 32 rows, kept-row masks (none, all, random, sparse), a 16-byte
# aligned and a misaligned base, 256 and 96 threads; every element of a skipped row must hold the fill value and
# nothing else (kept rows, before and past the span) may be touched
_HOST_MAIN = r"""
int main() {
    long bad = 0, runs = 0;
    srand(7);
    for (int X = 0; X <= 13; ++X)
    for (int nrows = 1; nrows <= 32; ++nrows)
    for (int trial = 0; trial < 12; ++trial)
    for (int off = 0; off < 2; ++off)
    for (int nt : {256, 96}) {
        unsigned keep = trial == 0 ? 0u : trial == 1 ? 0xffffffffu : ((unsigned)rand() * 2654435761u) & (trial % 2 ? 0x11111111u : 0xffffffffu);
        if (nrows < 32) keep &= (1u << nrows) - 1u;
        std::vector<float> big(nrows * X + 16, -1.0f);
        float* p = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(big.data()) + 15) & ~uintptr_t(15)) + off;
        blockDim.x = nt;
        for (int t = 0; t < nt; ++t) { threadIdx.x = t; fill_skipped_rows(p, X, nrows, keep, 7.0f); }
        std::vector<float> q(big.size(), -1.0f);
        float* pw = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(q.data()) + 15) & ~uintptr_t(15)) + off;
        for (int t = 0; t < nt; ++t) { threadIdx.x = t; fill_skipped_rows_wide(pw, (long long)X, nrows, keep, 7.0f); }
        ++runs;
        for (long e = -off; e < nrows * X + 4; ++e) {
            bool in = e >= 0 && e < (long)nrows * X;
            float want = (in && !((keep >> (e / (X ? X : 1))) & 1u)) ? 7.0f : -1.0f;
            if (p[e] != want || pw[e] != want) { if (bad < 10) printf("X=%d nrows=%d keep=%08x off=%d nt=%d e=%ld got %g %g want %g\n", X, nrows, keep, off, nt, e, p[e], pw[e], want); ++bad; }
        }
    }
    printf("runs %ld bad %ld\n", runs, bad);
    return bad != 0;
}
"""


def _function(text: str, signature: str) -> str:
    """The definition (qualifiers to closing brace) of the function whose declaration contains ``signature``."""
    start = text.rfind("\n", 0, text.index(signature)) + 1
    depth = 0
    for k in range(text.index("{", start), len(text)):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth == 0:
            return text[start : k + 1]
    raise AssertionError(signature)


def _host_fill_program(src: str) -> str:
    common = (REPO / "kernels" / "aux_common.cuh").read_text()
    parts = [_function(common, "bool aligned16("), _function(common, "void block_fill("), _function(src, "void fill_skipped_rows("),
             _function(src, "void fill_skipped_rows_wide(")]  # fmt: skip
    return _HOST_SHIM + "\n".join(parts) + _HOST_MAIN


def _run_host(tmp_path: Path, program: str) -> str:
    import subprocess

    (tmp_path / "fill.cpp").write_text(program)
    subprocess.run(["g++", "-O1", "-std=c++17", "-o", str(tmp_path / "fill"), str(tmp_path / "fill.cpp")], check=True, capture_output=True)
    return subprocess.run([str(tmp_path / "fill")], capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler (g++)")
def test_the_skipped_row_fills_write_exactly_the_skipped_rows(bench, tmp_path):
    src = (REPO / bench.CANDIDATE_SOURCE).read_text()
    out = _run_host(tmp_path, _host_fill_program(src))
    assert out.strip().splitlines()[-1] == "runs 21504 bad 0", out
    # the harness sees a wrong row mask in the float4 path
    broken = src.replace("(2u << rb) - (1u << ra)", "(1u << ra)")
    assert broken != src
    (tmp_path / "b").mkdir()
    assert "bad 0" not in _run_host(tmp_path / "b", _host_fill_program(broken)).strip().splitlines()[-1]


# ---------------------------------------------------------------------------------------------------
# the device copies and the launch stream (the H200 run of 5 December: 70 of 201 cases failed, the shipped
# kernel's runs too, with "N elements of rows < B not written" counts that changed from run to run)


def _copies_on_the_default_stream(self, case, host):
    """Runner.device as it was until 5 December: every copy on the current (legacy default) stream, no sync."""
    cp = self.cp
    dev = {}
    for name, a in host.items():
        if case.misaligned and a.dtype == np.float32:
            buf = cp.empty(a.size + 1, np.float32)
            d = buf[1:].reshape(a.shape)
            d[...] = cp.asarray(a)
        else:
            d = cp.asarray(a)
        dev[name] = d
    return dev


def _read_back_on_the_default_stream(self, tag, case, host):
    """Runner.run as it was until 5 December: the launch on the non-blocking stream, the copies back on the default one."""
    dev = self.device(case, host)
    grid, block = self.geometry(tag, case)
    self.fn[tag](grid, block, self.args(case, dev), stream=self.stream)
    self.stream.synchronize()
    bench = sys.modules[type(self).__module__]
    return {name: self.cp.asnumpy(dev[name]) for name in (*bench.OUTPUTS, bench.ACCUM) if name in dev}


def test_copies_left_on_the_default_stream_reproduce_the_h200_failures(bench, monkeypatch, tmp_path):
    """The stream-ordering stand-in catches the harness's old bug: the launch on the non-blocking stream runs
    before the copies on the default stream, and the poisoned outputs arriving after it read as "not written"
    (the shipped kernel's too), where the fixed ``Runner.device`` passes (test_host_logic_passes_a_right_candidate)."""
    _fake(monkeypatch, bench, {})
    monkeypatch.setattr(bench.Runner, "device", _copies_on_the_default_stream)
    monkeypatch.setattr(bench.Runner, "run", _read_back_on_the_default_stream)
    code, data = _main(bench, tmp_path, ["--sizes", "37", "--time-sizes", "", "--variants", "fast"])
    assert code == 1
    rows = {r["case"]: r["problems"] for r in data["correctness"]["rows"]}
    assert "dh_s2_aux_out: 9472 elements of rows < B not written" in rows["B=37 K=3 labels=50%"]["shipped"]
    assert "dW1_partial: 1212416 elements of rows < B not written" in rows["B=37 K=3 labels=50% per-sample"]["shipped"]
    assert "dh_s2_aux_out: 9472 elements of rows < B not written" in rows["B=37 K=3 labels=3% misaligned"]["fast"]


def test_the_device_copies_are_made_on_the_launch_stream_and_complete(bench, monkeypatch):
    cp = _stream_cupy({})
    monkeypatch.setitem(sys.modules, "cupy", cp)
    runner = bench.Runner(None, {})
    case = bench.Case(37, 0.5, misaligned=True)
    host = bench.host_inputs(case)
    dev = runner.device(case, host)
    assert not cp.null.queue and not runner.stream.queue  # nothing left in flight on either stream
    for name, a in host.items():
        assert bench.bit_mismatches(dev[name].view(np.ndarray), a) == 0, name
        assert (dev[name].ctypes.data % 16 == 4) is (a.dtype == np.float32)  # one float past 16-byte alignment


# ---------------------------------------------------------------------------------------------------
# both kernels' own sources run on the host (tests/host_simt.py: one fiber per thread, barriers honoured)
# through the benchmark's own checks: the candidate bit-equal to the shipped kernel, every row written, the
# guards and the accumulator's skipped rows untouched, on the cases the H200 run reported


@pytest.fixture(scope="module")
def simt_dir(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("no host C++ compiler (g++)")
    return tmp_path_factory.mktemp("simt")


def _simt_runner(bench, monkeypatch, simt_dir, candidate_source=None, variants=None):
    import host_simt

    variants = variants or list(bench.VARIANTS)
    kernels = {("shipped", KERNEL): host_simt.Kernel(host_simt.build(bench.SHIPPED_SOURCE, KERNEL, simt_dir))}
    for tag in variants:
        kernels[(tag, bench.entry_of(tag))] = host_simt.Kernel(
            host_simt.build(candidate_source or bench.source_of(tag), bench.entry_of(tag), simt_dir, bench.VARIANTS[tag]))
    monkeypatch.setitem(sys.modules, "cupy", _stream_cupy({k: (lambda g, b, a, k=k: kernels[k](g, b, a)) for k in kernels}))
    runner = bench.Runner(load_contracts(REPO / "contracts", REPO), {t: Path(t) for t in ("shipped", *variants)})
    return runner, kernels


# the H200 run's failing shapes (B = 37: every case; B = 300: the per-sample ones at every K, two densities, and
# the other verify shapes; B = 4103: the ones it reported); tests/host_simt.py ran every case at B <= 4103 (177)
# and the B = 65536 ones at 0 / 3 % labels and K = 0 / 9 with no failure (docs/benchmarks.md 4h)
def _h200_failing_shapes(bench):
    out = list(bench.cases((37,)))
    out += [c for c in bench.cases((300,)) if c.per_sample and (c.density in (0.03, 1.0) or c.SH2 != 256 or c.misaligned)]
    out += [bench.Case(4103, 0.0, 3), bench.Case(4103, 0.5, 9), bench.Case(4103, 0.03, 3, misaligned=True)]
    return out


def test_both_kernels_run_on_the_host_are_bit_equal_on_the_h200_failing_cases(bench, monkeypatch, simt_dir):
    runner, kernels = _simt_runner(bench, monkeypatch, simt_dir)
    cases = _h200_failing_shapes(bench)
    assert len(cases) == 51 + 14 + 3
    failed = {}
    for case in cases:
        row = bench.check_case(runner, case, list(bench.VARIANTS))
        if row["problems"]:
            failed[case.name] = row["problems"]
    assert failed == {}
    assert all(k.launches == len(cases) and k.divergent == 0 for k in kernels.values())


@pytest.mark.skipif(not os.environ.get("TO_BWD_SIMT_SIZES"), reason="the whole matrix on the host: ~2 min at B <= 4103, "
                    "~23 min more at 65536 (one core); set TO_BWD_SIMT_SIZES=1,37,300,4103,65536 (or some of them)")
def test_every_case_on_the_host(bench, monkeypatch, simt_dir):
    """Every case of ``gpu_to_bwd.cases()`` at the sizes asked for, every build, through the benchmark's checks."""
    runner, kernels = _simt_runner(bench, monkeypatch, simt_dir)
    cases = bench.cases(bench.int_list(os.environ["TO_BWD_SIMT_SIZES"]))
    failed = {}
    for case in cases:
        row = bench.check_case(runner, case, list(bench.VARIANTS))
        if row["problems"]:
            failed[case.name] = row["problems"]
    assert failed == {}
    assert all(k.launches == len(cases) and k.divergent == 0 for k in kernels.values())


@pytest.mark.parametrize(("edit", "problem"), [
    # a wrong span of the per-sample fill (K H elements a row, not H): skipped rows' dW2 partly unwritten
    (("fill_skipped_rows_wide(dW2_partial + (size_t)row0 * K * H, (long long)K * H,",
      "fill_skipped_rows_wide(dW2_partial + (size_t)row0 * K * H, (long long)H,"), "dW2_partial: "),
    # the per-row fill stepping over kept rows by the wrong stride
    (("block_fill(p + (size_t)r * (size_t)X, X, v)", "block_fill(p + (size_t)r * (size_t)X / 2, X, v)"), "dW1_partial: "),
    # the dh groups summed in the other order: a rounding difference only (bit-equality, not closeness)
    (("for (int g = 0; g < kJGroups; ++g) {", "for (int g = kJGroups - 1; g >= 0; --g) {"), "dh_s2_aux_out: "),
])  # fmt: skip
def test_the_host_run_catches_a_wrong_candidate(bench, monkeypatch, simt_dir, tmp_path, edit, problem):
    src = (REPO / bench.CANDIDATE_SOURCE).read_text()
    assert src.count(edit[0]) == 1
    broken = tmp_path / "aux_trade_outcome_backward_fast.cu"
    broken.write_text(src.replace(*edit))
    runner, _ = _simt_runner(bench, monkeypatch, simt_dir, broken, ["fast"])
    row = bench.check_case(runner, bench.Case(37, 0.5, 3, per_sample=True), ["fast"])
    assert set(row["problems"]) == {"fast"}
    assert any(p.startswith(problem) and "differ from the shipped kernel's bits" in p for p in row["problems"]["fast"])


def test_the_host_run_reports_threads_that_split_at_a_barrier(bench, monkeypatch, simt_dir, tmp_path):
    src = (REPO / bench.CANDIDATE_SOURCE).read_text()
    anchor = "    __syncthreads();\n    unsigned keep = 0u;"
    assert src.count(anchor) == 1
    broken = tmp_path / "aux_trade_outcome_backward_fast.cu"
    broken.write_text(src.replace(anchor, "    if (tid == 5) return;\n" + anchor))
    runner, kernels = _simt_runner(bench, monkeypatch, simt_dir, broken, ["fast"])
    bench.check_case(runner, bench.Case(37, 0.5, 3), ["fast"])
    assert kernels[("fast", ENTRY)].divergent == 2 and kernels[("shipped", KERNEL)].divergent == 0
