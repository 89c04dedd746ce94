"""One global element stored by two blocks, found by running blocks over PTX (audit.cuda.blockwrites, rule
BLOCK_WRITE_OVERLAP).

Small kernels compiled with the flags of the build, run at a launch whose pointer parameters are buffers:
blocks whose parts of an output overlap (a row stride one short, a tile bound ``m <= M`` that reaches the
next chunk, an empty chunk between full ones) must be found with both threads, blocks and the element;
disjoint parts, atomics, ordered and volatile stores, a read-modify-write (GLOBAL_RMW_RACE's), two threads
of one block and a store only the "last block" of a ticket makes must stay clean.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.cuda.barriers import BlockLaunch
from audit.cuda.blockbounds import buffer_base
from audit.cuda.blocksim import analyse_bounds, block_findings
from nvcc_flags import compile_ptx as _ptx

NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")



def _launch(grid: tuple[int, int, int], block: int, sizes: dict[int, tuple[str, int]], scalars: tuple[tuple[int, int], ...],
            label: str = "n = 128") -> BlockLaunch:  # fmt: skip
    """Pointer parameters ``sizes`` (position -> (name, f32 elements)) and the integer ``scalars``."""
    buffers = tuple((pos, name, numel * 4, 4, "shape [n], f32", None) for pos, (name, numel) in sizes.items())
    params = tuple((pos, buffer_base(pos)) for pos in sizes) + scalars
    return BlockLaunch(params, (block, 1, 1), grid, 0, label, buffers)


def _found(ptx: str, launch: BlockLaunch) -> list[tuple]:
    """(line, other line, element, threads) of each overlap; the run must reach every exit."""
    got = analyse_bounds(ptx, "k", launch)
    assert got.complete, got.reason
    assert got.accesses == ()  # an overlap is no out-of-bounds access: these kernels stay inside their buffers
    return [(o.line, o.other_line, o.element, o.threads) for o in got.overlaps]


ROWS = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * STRIDE + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
XY = {0: ("x", 128), 1: ("y", 128)}


@NVCC
def test_a_block_stride_one_short_is_found_and_the_message_says_who(tmp_path: Path) -> None:
    """Blocks of 32 threads, each starting 31 elements after the last: thread 31 of block 0 and thread 0 of
    block 1 both store y[31]."""
    ptx = _ptx(tmp_path, ROWS.replace("STRIDE", "31"))
    launch = _launch((4, 1, 1), 32, XY, ((2, 128),))
    assert _found(ptx, launch) == [(3, 3, "y[31]", (31, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0))]
    o = analyse_bounds(ptx, "k", launch).overlaps[0]
    assert o.message("k", "kernels/k.cu") == (
        f'Kernel "k" stores to y[31] from two blocks (kernels/k.cu:3, {o.store}): at n = 128, threadIdx (31, 0, 0) of '
        "blockIdx (0, 0, 0) and threadIdx (0, 0, 0) of blockIdx (1, 0, 0) both store it there; nothing orders the "
        "blocks of a grid, so which value stays depends on the order they run; give each block its own elements (check "
        "the bound or the offset that makes the blocks' parts of y overlap).")
    assert o.store.startswith("st.global.f32")


@NVCC
def test_disjoint_blocks_are_clean(tmp_path: Path) -> None:
    ptx = _ptx(tmp_path, ROWS.replace("STRIDE", "blockDim.x"))
    assert _found(ptx, _launch((4, 1, 1), 32, XY, ((2, 128),))) == []


@NVCC
@pytest.mark.parametrize("store", ["atomicExch(&y[0], x[i])", "atomicAdd(&y[0], x[i])",
                                   "*(volatile float*)&y[0] = x[i]",
                                   "asm volatile(\"st.relaxed.gpu.global.f32 [%0], %1;\" :: \"l\"(y), \"f\"(x[i]))",
                                   "y[0] += x[i]"])
def test_atomics_ordered_stores_and_read_modify_writes_are_not_this_rule(tmp_path: Path, store: str) -> None:
    """Every thread of every block stores y[0], but with an atomic, a volatile or relaxed store (a kernel's
    own flag), or as the store of a read-modify-write (GLOBAL_RMW_RACE's lost update)."""
    ptx = _ptx(tmp_path, ROWS.replace("if (i < n) y[i] = 2.0f * x[i];", f"if (i < n) {store};").replace("STRIDE", "blockDim.x"))
    assert _found(ptx, _launch((4, 1, 1), 32, XY, ((2, 128),))) == []


@NVCC
def test_two_threads_of_one_block_are_not_this_rule(tmp_path: Path) -> None:
    """``y[i / 2]``: threads 0 and 1 of a block store one element; the blocks' halves stay disjoint."""
    ptx = _ptx(tmp_path, ROWS.replace("y[i] = 2.0f * x[i]", "y[i / 2] = 2.0f * x[i]").replace("STRIDE", "blockDim.x"))
    assert _found(ptx, _launch((4, 1, 1), 32, XY, ((2, 128),))) == []


LAST_BLOCK = """extern "C" __global__ void k(const float* x, float* y, unsigned* ticket, int n) {
    __shared__ bool last;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[1 + i] = x[i];
    __threadfence();
    if (threadIdx.x == 0) last = atomicInc(ticket, gridDim.x) == gridDim.x - 1;
    __syncthreads();
    if (last && threadIdx.x == 0) y[0] = 1.0f;
}
"""


@NVCC
def test_the_store_of_the_last_block_of_a_ticket_is_not_reported(tmp_path: Path) -> None:
    """Which block draws the last ticket is not known on the CPU: its store of y[0] is under an unknown
    condition in every block, so no block is sure to make it."""
    ptx = _ptx(tmp_path, LAST_BLOCK)
    launch = _launch((4, 1, 1), 32, {0: ("x", 128), 1: ("y", 129), 2: ("ticket", 1)}, ((3, 128),))
    got = analyse_bounds(ptx, "k", launch)
    assert got.overlaps == ()


CHUNKS = """extern "C" __global__ void k(const float* x, float* ws, int B, int N, int P) {
    const int p = blockIdx.y;
    const int b0 = B * p / P, rows = B * (p + 1) / P - b0;
    float* out = ws + (size_t)p * N;
    if (rows == 0) {
        for (int n = threadIdx.x; n BOUND N; n += blockDim.x) out[n] = 0.0f;
    } else {
        for (int n = threadIdx.x; n < N; n += blockDim.x) {
            float s = 0.0f;
            for (int b = b0; b < b0 + rows; ++b) s += x[(size_t)b * N + n];
            out[n] = s;
        }
    }
}
"""


@NVCC
@pytest.mark.parametrize("bound, found", [("<", False), ("<=", True)])
def test_an_empty_chunk_whose_zeros_reach_the_next_chunk_is_found(tmp_path: Path, bound: str, found: bool) -> None:
    """B = 2 rows in P = 5 chunks: chunks 0, 1, 3 are empty, 2 and 4 hold a row. With ``n <= N`` the empty
    chunk 3 (the last block of block 0's path) stores ws[4][0], which chunk 4 (the grid's last block) sums
    into, and the empty chunks 0 and 1 (block 0 and its next block) both zero ws[1][0]: the mutant of the
    CUTLASS partial's zero-tile loop that its GPU runs did not catch."""
    ptx = _ptx(tmp_path, CHUNKS.replace("BOUND", bound))
    launch = _launch((1, 5, 1), 32, {0: ("x", 2 * 8), 1: ("ws", 5 * 8)}, ((2, 2), (3, 8), (4, 5)), "B = 2, N = 8, P = 5")
    got = analyse_bounds(ptx, "k", launch)
    assert got.complete, got.reason
    pairs = [(o.element, o.threads[3:6], o.threads[9:12]) for o in got.overlaps]
    if not found:
        assert pairs == []
        return
    assert pairs == [("ws[8]", (0, 0, 0), (0, 1, 0)), ("ws[32]", (0, 4, 0), (0, 3, 0))]


@NVCC
def test_block_findings_returns_the_overlaps_with_the_accesses_and_none_without_them(tmp_path: Path) -> None:
    ptx = _ptx(tmp_path, ROWS.replace("STRIDE", "31"))
    launch = _launch((4, 1, 1), 32, XY, ((2, 128),))
    races, accesses, updates, overlaps = block_findings(ptx, "k", [launch], True)
    assert accesses == [] and updates == [] and [o.element for o in overlaps] == ["y[31]"]
    assert block_findings(ptx, "k", [launch], False)[3] is None


TRANSPOSE = """#define TILE 32
extern "C" __global__ void k(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += 8)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += 8)
        if (x < rows && y + j < cols) out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
"""


@NVCC
@pytest.mark.parametrize("tile_y", ["TILE", "(TILE - 1)"])
def test_a_tiled_transpose_is_clean_and_a_tile_one_row_short_is_found(tmp_path: Path, tile_y: str) -> None:
    """The classic shared-tile transpose over a 2-D grid (blocks of 32 x 8 threads, 32 x 32 tiles): every
    block's tile of ``out`` is its own, along both axes. With the output's row offset one row short per
    block (``blockIdx.x * (TILE - 1)``), block (1, 0)'s first output row is block (0, 0)'s last."""
    body = TRANSPOSE if tile_y == "TILE" else TRANSPOSE.replace("y = blockIdx.x * TILE + threadIdx.y;", f"y = blockIdx.x * {tile_y} + threadIdx.y;")
    ptx = _ptx(tmp_path, body)
    launch = BlockLaunch(((0, buffer_base(0)), (1, buffer_base(1)), (2, 70), (3, 70)), (32, 8, 1), (3, 3, 1), 0,
                         "rows = 70, cols = 70", ((0, "in", 70 * 70 * 4, 4, "shape [70, 70], f32", None),
                                                  (1, "out", 70 * 70 * 4, 4, "shape [70, 70], f32", None)))  # fmt: skip
    got = analyse_bounds(ptx, "k", launch)
    assert got.complete, got.reason
    assert got.accesses == ()
    found = [(o.element, o.threads[3:6], o.threads[9:12]) for o in got.overlaps]
    if tile_y == "TILE":
        assert found == []
    else:
        assert found == [("out[2170]", (0, 0, 0), (1, 0, 0))], found


WRAP = """extern "C" __global__ void k(const float* a, float* c, int M, int N) {
    const int row = blockIdx.x * 32 + threadIdx.x / 32, col = blockIdx.y * 32 + threadIdx.x % 32;
    if (row < M && col BOUND N) c[row * N + col] = 2.0f * a[row * N + col];
}
"""


@NVCC
@pytest.mark.parametrize("bound", ["<", "<="])
def test_a_column_bound_one_past_the_row_is_found_at_the_last_block_of_the_axis(tmp_path: Path, bound: str) -> None:
    """``col <= N``: the last column block's extra column N of row r is element (r + 1, 0), which block
    (0, 0) stores. Neither block 0's next blocks nor the grid's last block meet there; the last block along
    y from block 0, (0, 4, 0), does (SGEMM_CUDA's kernel 2 with this bound, at M = N = 130)."""
    ptx = _ptx(tmp_path, WRAP.replace("BOUND", bound))
    launch = _launch((5, 5, 1), 1024, {0: ("a", 130 * 130 + 1), 1: ("c", 130 * 130 + 1)}, ((2, 130), (3, 130)),
                     "M = 130, N = 130")
    got = analyse_bounds(ptx, "k", launch)
    assert got.complete, got.reason
    found = [(o.element, o.threads[3:6], o.threads[9:12]) for o in got.overlaps]
    assert found == ([] if bound == "<" else [("c[130]", (0, 0, 0), (0, 4, 0))])
