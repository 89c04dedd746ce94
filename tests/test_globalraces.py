"""Lost global updates found by running blocks over PTX (audit.cuda.globalraces, rule GLOBAL_RMW_RACE).

Small kernels compiled with the flags of the build (``-arch=sm_90 -ptx -O3 -lineinfo -std=c++17``), each
run at a launch whose pointer parameters are buffers: two threads that load, modify and store one global
element with nothing ordering them must be found with their threads, blocks and element; the atomic,
one-element-per-thread and barrier-ordered counterparts must stay clean; an index loaded from memory
must not be reported.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.cuda.barriers import BlockLaunch
from audit.cuda.blockbounds import buffer_base
from audit.cuda.blocksim import analyse_updates, find_global_rmw_races
from audit.cuda.cache import AnalysisCache
from audit.cuda.globalraces import GlobalRmwRace
from nvcc_flags import compile_ptx as _ptx

NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")



def _launch(n: int, block: int, grid: int, sizes: dict[int, tuple[str, int]], scalars: tuple[tuple[int, int], ...] = ()) -> BlockLaunch:
    """Pointer parameters ``sizes`` (position -> (name, elements)) of f32, the int ``n`` third unless
    ``scalars`` gives the integer parameters."""
    buffers = tuple((pos, name, numel * 4, 4, "shape [n], f32", None) for pos, (name, numel) in sizes.items())
    params = tuple((pos, buffer_base(pos)) for pos in sizes) + (scalars or ((2, n),))
    return BlockLaunch(params, (block, 1, 1), (grid, 1, 1), 0, f"n = {n}", buffers)


def _found(ptx: str, launch: BlockLaunch, entry: str = "k") -> list[tuple]:
    """(line, other line, scope, element, threads, same instruction) of each finding."""
    got = analyse_updates(ptx, entry, launch)
    assert got.complete, got.reason
    return [(u.line, u.other_line, u.scope, u.element, u.threads, u.same_instruction) for u in got.races]


UPDATE = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) UPDATE;
}
"""
XY = {0: ("x", 128), 1: ("y", 128)}


@NVCC
def test_two_threads_adding_into_one_element_are_found_and_the_message_says_who(tmp_path: Path) -> None:
    """``y[i / 2] += x[i]``: lanes 0 and 1 of the first warp load, add and store y[0] at once."""
    launch = _launch(128, 64, 2, XY)
    ptx = _ptx(tmp_path, UPDATE.replace("UPDATE", "y[i / 2] += x[i]"))
    assert _found(ptx, launch) == [(3, 3, "lane", "y[0]", (0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0), True)]
    u = find_global_rmw_races(ptx, "k", [launch])[0]
    assert u.message("k", "kernels/k.cu") == (
        'Kernel "k" updates global memory that another thread updates too, without an atomic (kernels/k.cu:3, '
        f"{u.load} then {u.store}): at n = 128, threadIdx (0, 0, 0) of blockIdx (0, 0, 0) and threadIdx (1, 0, 0) of "
        "blockIdx (0, 0, 0) both load, modify and store y[0] (lanes of one warp, in one barrier interval), so one of "
        "the two updates is lost; use atomicAdd (or the atomic of the operation), or give each thread its own element.")
    assert u.load.startswith("ld.global.f32") and u.store.startswith("st.global.f32")


@NVCC
@pytest.mark.parametrize("update", ["atomicAdd(&y[i / 2], x[i])", "y[i] += x[i]", "y[i] = y[i] * 0.5f + x[i]"])
def test_an_atomic_and_one_element_per_thread_are_clean(tmp_path: Path, update: str) -> None:
    ptx = _ptx(tmp_path, UPDATE.replace("UPDATE", update))
    assert _found(ptx, _launch(128, 64, 2, XY)) == []


@NVCC
def test_an_index_loaded_from_memory_is_not_reported(tmp_path: Path) -> None:
    """``y[idx[i]] += x[i]`` collides whenever two indices agree, which the PTX alone cannot tell."""
    body = """extern "C" __global__ void k(const float* x, float* y, const int* idx, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[idx[i]] += x[i];
}
"""
    launch = _launch(128, 64, 2, {0: ("x", 128), 1: ("y", 128), 2: ("idx", 128)}, ((3, 128),))
    assert _found(_ptx(tmp_path, body), launch) == []


REDUCE = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int k = 32; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[SLOT] += s[0];
}
"""


@NVCC
def test_a_block_reduction_adding_its_sum_from_thread_0_is_clean_unless_two_blocks_share_a_slot(tmp_path: Path) -> None:
    """One update per block into ``out[blockIdx.x]`` is clean; ``out[blockIdx.x / 2]`` makes blocks 0 and
    1 add into out[0], found where the grid is small enough to run every block, and in a larger grid at
    block 0's next block."""
    launch = _launch(256, 64, 4, {0: ("x", 256), 1: ("out", 4)})
    assert _found(_ptx(tmp_path, REDUCE.replace("SLOT", "blockIdx.x"), "good.cu"), launch) == []
    bad = _ptx(tmp_path, REDUCE.replace("SLOT", "blockIdx.x / 2"), "bad.cu")
    assert _found(bad, launch) == [(10, 10, "block", "out[0]", (0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), True)]
    assert "(different blocks, which nothing orders)" in find_global_rmw_races(bad, "k", [launch])[0].message("k", "k.cu")
    # a grid larger than MAX_RMW_GRID runs block 0, the last and the blocks where two parts meet: block 1 too
    big = _launch(1024, 64, 16, {0: ("x", 1024), 1: ("out", 16)})
    assert _found(bad, big) == [(10, 10, "block", "out[0]", (0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), True)]
    assert _found(_ptx(tmp_path, REDUCE.replace("SLOT", "blockIdx.x"), "good.cu"), big) == []


ENCODER = """extern "C" __global__ void k(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C) {
    // llm.c encoder_backward_kernel1 with its atomicAdds turned into +=
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;
    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;
        int ix = inp[b * T + t];
        const float* dout_btc = dout + b * T * C + t * C + c;
        float* dwte_ix = dwte + ix * C + c;
        float* dwpe_tc = dwpe + t * C + c;
        UPDATE(dwte_ix, *dout_btc);
        UPDATE(dwpe_tc, *dout_btc);
    }
}
"""


def _encoder(b: int, t: int, c: int) -> BlockLaunch:
    sizes = {0: ("dwte", 50 * c), 1: ("dwpe", t * c), 2: ("dout", b * t * c), 3: ("inp", b * t)}
    launch = _launch(0, 256, -(-b * t * c // 256), sizes, ((4, b), (5, t), (6, c)))
    return BlockLaunch(launch.params, launch.block, launch.grid, 0, f"B = {b}, T = {t}, C = {c}", launch.buffers)


@NVCC
def test_the_encoder_backward_collision_across_batch_rows_is_found_in_different_blocks(tmp_path: Path) -> None:
    """Threads ``b * T * C + t * C + c`` of every ``b`` add into ``dwpe[t * C + c]``: at B = 2, T = 2,
    C = 128 thread 0 of block 0 (b = 0) and thread 0 of block 1 (b = 1) both update dwpe[0]. The dwte
    update's row is loaded from ``inp``: not seen. At B = 1 nothing collides."""
    bad = _ptx(tmp_path, ENCODER.replace("UPDATE(dwte_ix, *dout_btc)", "*dwte_ix += *dout_btc")
               .replace("UPDATE(dwpe_tc, *dout_btc)", "*dwpe_tc += *dout_btc"), "bad.cu")
    assert _found(bad, _encoder(2, 2, 128)) == [(15, 15, "block", "dwpe[0]", (0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0), True)]
    assert _found(bad, _encoder(1, 1, 128)) == []
    good = _ptx(tmp_path, ENCODER.replace("UPDATE(dwte_ix, *dout_btc)", "atomicAdd(dwte_ix, *dout_btc)")
                .replace("UPDATE(dwpe_tc, *dout_btc)", "atomicAdd(dwpe_tc, *dout_btc)"), "good.cu")
    assert _found(good, _encoder(2, 2, 128)) == []


TURNS = """extern "C" __global__ void k(const float* x, float* y, int n) {
    // one warp's first lane after another adds into y[0]
    for (int s = 0; s < 4; ++s) {
        if (threadIdx.x == s * 32) y[0] += x[threadIdx.x];
        BARRIER
    }
}
"""


@NVCC
def test_updates_in_different_barrier_intervals_are_ordered_and_without_the_barrier_they_race(tmp_path: Path) -> None:
    launch = _launch(128, 128, 1, {0: ("x", 128), 1: ("y", 1)})
    assert _found(_ptx(tmp_path, TURNS.replace("BARRIER", "__syncthreads();"), "good.cu"), launch) == []
    bad = _found(_ptx(tmp_path, TURNS.replace("BARRIER", ""), "bad.cu"), launch)
    assert bad and all(f[2:4] == ("warp", "y[0]") for f in bad)
    assert bad[0][4][:6] == (0, 0, 0, 0, 0, 0) and bad[0][4][6] in (32, 64, 96)


@NVCC
def test_a_plain_update_racing_an_atomic_one_is_found(tmp_path: Path) -> None:
    """Thread 0 adds a bias with ``+=`` while the others ``atomicAdd`` into the same sum: the atomic's
    addition can land between thread 0's load and store, and is lost."""
    body = """extern "C" __global__ void k(const float* x, float* y, int n) {
    if (threadIdx.x == 0) y[0] += 1.0f;
    else atomicAdd(y, x[threadIdx.x]);
}
"""
    ptx = _ptx(tmp_path, body)
    got = analyse_updates(ptx, "k", _launch(64, 64, 1, {0: ("x", 64), 1: ("y", 1)}))
    assert [(u.line, u.other_line, u.other_atomic, u.scope) for u in got.races] == [(2, 3, True, "lane")]
    assert "atomically updates y[0] at line 3" in got.races[0].message("k", "k.cu")
    assert "so the atomic's update is lost" in got.races[0].message("k", "k.cu")


@NVCC
def test_an_entry_without_a_global_update_costs_no_run(tmp_path: Path) -> None:
    ptx = _ptx(tmp_path, UPDATE.replace("UPDATE", "y[i] = x[i]"))
    got = analyse_updates(ptx, "k", _launch(128, 64, 2, XY))
    assert (got.races, got.complete, got.reason) == ((), True, "no global read-modify-write")


def test_the_extra_launch_puts_every_runtime_dim_at_2() -> None:
    """The fixture chain: B in [1, 4096] runs at 1 and 131 for the other rules; this one adds B = 2."""
    from audit.cuda.static import rmw_launches
    from audit.graph import Wiring
    from audit.load import load_contracts

    root = Path(__file__).resolve().parent / "data" / "rules" / "GLOBAL_RMW_RACE" / "good"
    cs = load_contracts(root / "contracts", root)
    launches = rmw_launches(cs, Wiring(cs), cs.kernel("backward"))
    assert [(lc.label, lc.grid) for lc in launches] == [("B = 2, D = 64, H = 32", (2, 1, 1))]


def test_message_forms_and_the_cache_round_trip(tmp_path: Path) -> None:
    u = GlobalRmwRace("k", 7, 1, "acc.cuh:3", "ld.global.f32 %f1, [%rd2]", "st.global.f32 [%rd2], %f3", 5, None,
                      "st.global.f32 [%rd2], %f9", False, False, "warp", "dbias", "dbias[3]",
                      (0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0), "B = 2")
    assert u.message("k", "k.cu") == (
        'Kernel "k" updates global memory that another thread updates too, without an atomic (k.cu:7, inlined from '
        "acc.cuh:3, ld.global.f32 %f1, [%rd2] then st.global.f32 [%rd2], %f3): at B = 2, threadIdx (0, 0, 0) of "
        "blockIdx (0, 0, 0) read-modify-writes dbias[3] at line 5 and threadIdx (40, 0, 0) of blockIdx (0, 0, 0) loads, "
        "modifies and stores it (different warps of one block, in one barrier interval), so one of the two updates is "
        "lost; use atomicAdd (or the atomic of the operation), or give each thread its own element, or put a "
        "__syncthreads() between the two updates.")
    cache = AnalysisCache(tmp_path)
    assert cache.results("global-rmw", ["ptx", "k"], GlobalRmwRace, lambda: [u]) == [u]
    assert AnalysisCache(tmp_path).results("global-rmw", ["ptx", "k"], GlobalRmwRace, lambda: []) == [u]


TILE_RMW = """extern "C" __global__ void k(const float* a, float* c, int n, float beta) {
    const int i = blockIdx.x * STRIDE + threadIdx.x;
    if (i < n) c[i] = 2.0f * a[i] + beta * c[i];
}
"""


@NVCC
@pytest.mark.parametrize("stride", ["32", "31"])
def test_a_tile_offset_one_short_in_a_grid_of_many_blocks_is_found_at_block_0s_next_block(tmp_path: Path, stride: str) -> None:
    """``C = acc + beta * C`` (SGEMM's epilogue) reads each element before it stores it: a read-modify-write.
    With the block offset one short, thread 31 of block 0 and thread 0 of block 1 both update c[31]. The grid
    has 16 blocks, more than GLOBAL_RMW_RACE runs all of: block 0's next block is run for the updates too."""
    ptx = _ptx(tmp_path, TILE_RMW.replace("STRIDE", stride))
    launch = _launch(512, 32, 16, {0: ("a", 512), 1: ("c", 512)}, ((2, 512), (3, 0)))
    found = [(u.element, u.threads[3:6], u.threads[9:12], u.scope) for u in analyse_updates(ptx, "k", launch).races]
    assert found == ([] if stride == "32" else [("c[31]", (0, 0, 0), (1, 0, 0), "block")])


FLAGGED = """extern "C" __global__ void k(const int* labels, float* acc, int n) {
    __shared__ int any;
    if (threadIdx.x == 0) any = labels[blockIdx.x] >= 0;
    __syncthreads();
    if (any) {  // block-uniform, from shared memory: the trade-outcome backward's row mask
        __syncthreads();
        if (threadIdx.x == 0) acc[SLOT] += 1.0f;
    }
}
"""


@NVCC
def test_a_block_run_for_the_updates_alone_keeps_what_a_shared_flag_is_made_of(tmp_path: Path) -> None:
    """Blocks 1 and 2 of a 4-block grid run for the updates alone, skipping what reaches no update; a flag
    they branch on around a barrier was read from shared memory, whose store (and the label load behind it,
    with its address) were skipped: the run gave up there (the trade-outcome backward's GLOBAL_RMW_RACE note at
    B = 131). They are kept now: blocks 0 and 1 adding into acc[0] are found, and each block's own slot is clean."""
    buffers = ((0, "labels", 16, 4, "shape [n], i32", None), (1, "acc", 16, 4, "shape [n], f32", None))
    params = ((0, buffer_base(0)), (1, buffer_base(1)), (2, 4))
    fills = ((0, 4, 1, (0,), "labels = 0 in every row"),)
    launch = BlockLaunch(params, (64, 1, 1), (4, 1, 1), 0, "n = 4", buffers, None, fills)
    bad = _ptx(tmp_path, FLAGGED.replace("SLOT", "blockIdx.x / 2"), "bad.cu")
    assert [(f[3], f[4][3:6], f[4][9:12]) for f in _found(bad, launch)] == [("acc[0]", (0, 0, 0), (1, 0, 0))]
    assert _found(_ptx(tmp_path, FLAGGED.replace("SLOT", "blockIdx.x"), "good.cu"), launch) == []
