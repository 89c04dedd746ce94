"""Lost updates in shared memory found in PTX (audit.cuda.sharedraces, rule SHARED_RMW_RACE).

Small kernels compiled with the flags of the build (``-arch=sm_90 -ptx -O3 -lineinfo -std=c++17``): each
race class must be found with its kind and two colliding threads, each correct counterpart must stay
clean; the shipped kernels must be clean at their contract's block, and the two survivors of the
``aux_head_forward.cuh`` mutation run (the ``if (lane == 0)`` guard deleted, or made ``lane != 0``) must be
found. Hand-written PTX covers what nvcc output does not pin (an unknown block, a symbol address).
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from audit.cuda.cache import AnalysisCache
from audit.cuda.races import entries
from audit.cuda.sharedraces import SharedRace, find_shared_races
from nvcc_flags import compile_ptx

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
BASELINE = REPO / "benchmarks" / "kernels_baseline"  # the SIMT head forwards (shipped until 5 December 2026) and their header
NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")


def _ptx(tmp_path: Path, body: str, name: str = "k.cu", include: Path | None = None, extra: tuple[str, ...] = ()) -> str:
    return compile_ptx(tmp_path, body, name, ("-I", str(include or KERNELS), *extra))


def _races(ptx: str, block: tuple[int | None, int | None, int | None], entry: str = "k") -> list[tuple[str, int | None, tuple[int, ...]]]:
    return [(r.kind, r.line, r.threads) for r in find_shared_races(ptx, entry, block)]


# one kernel per case, extern "C" so the entry is "k"; line 3 is the update under test
WARP_SUM = """extern "C" __global__ void k(const float* x, float* out) {{
    __shared__ float s[32]; float v = x[threadIdx.x]; if (threadIdx.x < 32) s[threadIdx.x] = 0.0f; __syncthreads();
    {update}
    __syncthreads(); if (threadIdx.x == 0) out[blockIdx.x] = s[0] + s[1];
}}
"""


@NVCC
@pytest.mark.parametrize(("update", "block", "expected"), [
    # every lane of a warp adds to its warp's slot: lanes 0 and 1 collide
    ("s[threadIdx.x / 32] += v;", (128, 1, 1), [("lane", 3, (0, 0, 0, 1, 0, 0))]),
    # the guard made lane != 0: 31 lanes still collide
    ("if (threadIdx.x % 32 != 0) s[threadIdx.x / 32] += v;", (128, 1, 1), [("lane", 3, (1, 0, 0, 2, 0, 0))]),
    # pairs of lanes share an element
    ("s[threadIdx.x / 2 % 32] += v;", (64, 1, 1), [("lane", 3, (0, 0, 0, 1, 0, 0))]),
    # lane 0 of every warp adds to one element: warps collide
    ("if (threadIdx.x % 32 == 0) s[0] += v;", (128, 1, 1), [("warp", 3, (0, 0, 0, 32, 0, 0))]),
    # 2-D block: threadIdx.y is the warp; every lane of it adds to s[y]
    ("s[threadIdx.y] += v;", (32, 4, 1), [("lane", 3, (0, 0, 0, 1, 0, 0))]),
])
def test_races_are_found_with_their_kind_and_two_threads(tmp_path: Path, update: str, block: tuple[int, int, int],
                                                         expected: list[tuple[str, int, tuple[int, ...]]]) -> None:
    assert _races(_ptx(tmp_path, WARP_SUM.format(update=update)), block) == expected


@NVCC
@pytest.mark.parametrize(("update", "block"), [
    ("if (threadIdx.x % 32 == 0) s[threadIdx.x / 32] += v;", (128, 1, 1)),  # one lane per warp, own slot
    ("s[threadIdx.x % 32] += v;", (32, 1, 1)),  # one warp: each lane its own element
    ("if (threadIdx.x % 32 == 0) s[0] += v;", (32, 1, 1)),  # one warp, one lane: nothing to collide with
    ("atomicAdd(&s[threadIdx.x / 32], v);", (128, 1, 1)),  # atomics are never reported
    ("s[threadIdx.x / 32] = v;", (128, 1, 1)),  # a plain store is not a read-modify-write
    ("if (threadIdx.x == 0) s[0] += v;", (128, 1, 1)),  # one thread of the block
    # a leader chosen by a vote: how many lanes pass is not known, so nothing is said
    ("if ((__ffs(__ballot_sync(0xffffffffu, v > 0.0f)) - 1) == (int)(threadIdx.x % 32)) s[threadIdx.x / 32] += v;",
     (128, 1, 1)),
])
def test_correct_updates_are_clean(tmp_path: Path, update: str, block: tuple[int, int, int]) -> None:
    assert _races(_ptx(tmp_path, WARP_SUM.format(update=update)), block) == []


@NVCC
def test_a_strided_loop_per_warp_into_one_row_is_a_warp_race_found_through_induction_variables(tmp_path: Path) -> None:
    # every warp walks the same columns c = lane, lane + 32, ... of one shared row: an atomicAdd made
    # "+=" (nvcc strength-reduces the address into a pointer stepped by 128 bytes per iteration)
    body = """extern "C" __global__ void k(const float* x, float* out, int C) {
    extern __shared__ float row[];
    for (int c = threadIdx.x % 32; c < C; c += 32)
        row[c] += x[(blockIdx.x * 4 + threadIdx.x / 32) * C + c];
    __syncthreads(); if (threadIdx.x == 0) out[blockIdx.x] = row[0];
}
"""
    ptx = _ptx(tmp_path, body)
    assert _races(ptx, (128, 1, 1)) == [("warp", 4, (0, 0, 0, 32, 0, 0))]
    assert _races(ptx, (32, 1, 1)) == []  # one warp: the lanes' columns differ
    assert _races(_ptx(tmp_path, body.replace("row[c] += x", "atomicAdd(&row[c], x").replace("+ c];", "+ c]);"),
                       "atomic.cu"), (128, 1, 1)) == []


@NVCC
def test_an_unknown_block_is_not_analysed(tmp_path: Path) -> None:
    ptx = _ptx(tmp_path, WARP_SUM.format(update="s[threadIdx.x / 32] += v;"))
    assert _races(ptx, (None, 1, 1)) == []
    assert _races(ptx, (2048, 1, 1)) == []  # larger than any block may be
    # a .reqntid directive fills the unknown extent; __launch_bounds__ (.maxntid) is a bound, not the extent
    src = WARP_SUM.format(update="s[threadIdx.x / 32] += v;").replace("__global__ void", "__global__ void __launch_bounds__(128)")
    bounded = _ptx(tmp_path, src, "lb.cu")
    assert "\n.maxntid 128, 1, 1\n" in bounded
    assert _races(bounded, (None, 1, 1)) == []
    required = bounded.replace("\n.maxntid 128, 1, 1\n", "\n.reqntid 128, 1, 1\n")
    assert _races(required, (None, None, None)) == [("lane", 3, (0, 0, 0, 1, 0, 0))]


def test_message_of_each_kind_is_one_sentence_with_the_fix() -> None:
    lane = SharedRace("k", 19, 1, "/x/k.cu", "aux_head_forward.cuh:102", "st.shared.f32 [%r314+21504], %f2644", "lane",
                      (0, 0, 0, 1, 0, 0))
    assert lane.message("aux_next_bar_forward", "kernels/aux_next_bar_forward_kernel.cu") == (
        'Kernel "aux_next_bar_forward" read-modify-writes shared memory at an address that several lanes of one '
        "warp share (kernels/aux_next_bar_forward_kernel.cu:19, inlined from aux_head_forward.cuh:102, "
        "st.shared.f32 [%r314+21504], %f2644): threadIdx (0, 0, 0) and (1, 0, 0) update the same element without "
        "an atomic, so all but one update are lost; let one lane update it (if (lane == 0)), give each lane its "
        "own element, or use atomicAdd.")
    warp = SharedRace("k", 4, 1, "/x/k.cu", None, "st.shared.f32 [%r84], %f54", "warp", (0, 0, 0, 32, 0, 0))
    assert warp.message("k", "k.cu") == (
        'Kernel "k" read-modify-writes shared memory at an address that lanes of different warps share (k.cu:4, '
        "st.shared.f32 [%r84], %f54): threadIdx (0, 0, 0) and (32, 0, 0) update the same element without an "
        "atomic, so all but one update are lost; give each warp its own element, or use atomicAdd.")


def test_results_round_trip_through_the_analysis_cache(tmp_path: Path) -> None:
    race = SharedRace("k", 4, 1, "/x/k.cu", None, "st.shared.f32 [%r84], %f54", "warp", (0, 0, 0, 32, 0, 0))
    cache = AnalysisCache(tmp_path)
    assert cache.results("shared-races", ["ptx", "k"], SharedRace, lambda: [race]) == [race]
    assert AnalysisCache(tmp_path).results("shared-races", ["ptx", "k"], SharedRace, lambda: []) == [race]


def _shipped_blocks(root: Path = REPO) -> dict[str, tuple[int | None, int | None, int | None]]:
    out: dict[str, tuple[int | None, int | None, int | None]] = {}
    for path in sorted((root / "contracts" / "kernels").glob("*.toml")):
        for k in tomllib.loads(path.read_text()).get("kernel", []):
            out[k["entry"]] = tuple(v if isinstance(v, int) else None for v in k["block"])  # type: ignore[assignment]
    return out


@NVCC
def test_shipped_kernels_are_clean_at_their_blocks(tmp_path: Path, simt_repo: Path) -> None:
    """Every entry of the shipped sources (the CUTLASS ones with the wheel's headers) at its contract's block,
    and the SIMT head forwards at theirs (the chain before the CUTLASS kernels: tests/simt_chain.py)."""
    from nvcc_flags import package_include_flags

    blocks = _shipped_blocks() | {e: b for e, b in _shipped_blocks(simt_repo).items() if e.endswith("_forward")}
    analysed = 0
    sources = [*sorted(KERNELS.glob("*.cu")), BASELINE / "aux_trade_outcome_forward_kernel.cu", BASELINE / "aux_next_bar_forward_kernel.cu"]
    for src in sources:
        ptx = _ptx(tmp_path, src.read_text(), src.name, extra=("-I", str(BASELINE), *package_include_flags()))
        for entry in entries(ptx):
            assert find_shared_races(ptx, entry, blocks[entry]) == [], entry
            analysed += all(n is not None for n in blocks[entry])
    assert analysed >= 17


@NVCC
@pytest.mark.parametrize(("old", "new"), [
    ("if (lane == 0) s.logits[ty * kTM + r][k] += p;", "s.logits[ty * kTM + r][k] += p;"),  # guard:102:17:0
    ("if (lane == 0) s.logits[ty * kTM + r][k] += p;", "if (lane != 0) s.logits[ty * kTM + r][k] += p;"),  # ror:102:26:0
])
def test_the_header_survivors_of_aux_head_forward_are_found(tmp_path: Path, old: str, new: str) -> None:
    for h in [*KERNELS.glob("*.cuh"), BASELINE / "aux_head_forward.cuh"]:
        shutil.copy(h, tmp_path / h.name)
    header = tmp_path / "aux_head_forward.cuh"
    assert header.read_text().count(old) == 1
    header.write_text(header.read_text().replace(old, new))
    ptx = _ptx(tmp_path, (BASELINE / "aux_next_bar_forward_kernel.cu").read_text(), "fwd.cu", include=tmp_path)
    (race,) = find_shared_races(ptx, "aux_next_bar_forward", (128, 1, 1))  # the SIMT kernel's block
    assert (race.kind, race.origin) == ("lane", "aux_head_forward.cuh:102")


def test_a_block_that_follows_a_runtime_dim_is_analysed_at_each_launch_value() -> None:
    """``block = ["min(B, 256)", 1, 1]`` has no one extent: each distinct value over the launch
    environments is analysed (at most MAX_BLOCKS, the smallest and the largest kept), not none."""
    from audit.cuda.static import MAX_BLOCKS, launch_blocks
    from audit.graph import Wiring
    from audit.load import load_contracts

    root = REPO / "tests" / "data" / "rules" / "SHARED_RMW_RACE" / "good"
    texts = {p.relative_to(root).as_posix(): p.read_text() for p in (root / "contracts").glob("*.toml")}
    old = 'name = "loss"\nsource = "kernels/chain.cu"\nstage = "loss"\ngrid = [1, 1, 1]\nblock = [256, 1, 1]\n'
    assert texts["contracts/kernels.toml"].count(old) == 1
    cs = load_contracts(root / "contracts", root, texts=texts)
    assert launch_blocks(cs, Wiring(cs), cs.kernel("loss")) == [(256, 1, 1)]
    texts["contracts/kernels.toml"] = texts["contracts/kernels.toml"].replace(old, old.replace("[256, 1, 1]", '["min(B, 256)", 1, 1]'))
    cs = load_contracts(root / "contracts", root, texts=texts)
    blocks = launch_blocks(cs, Wiring(cs), cs.kernel("loss"))
    assert 2 <= len(blocks) <= MAX_BLOCKS and blocks == sorted(blocks) and blocks[-1] == (256, 1, 1), blocks
    assert all(isinstance(b[0], int) for b in blocks)
