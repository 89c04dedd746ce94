"""``wmma.load`` / ``wmma.store`` in the block run: a warp's matrix fragment read from or written to memory.

The block run ignored them (a trial on Bruce-Lee-LY/cuda_hgemm, 7 December): a tile written by
``wmma::store_matrix_sync`` and read back after a barrier was a false SHARED_UNINIT_READ, a
``wmma::load_matrix_sync`` of a tile other warps were still filling (no barrier) was missed, and so was a
``store_matrix_sync`` of 256 halves into a 128-element buffer. Each element of the tile (rows x columns of
the matrix, ``stride`` elements between rows) is now one lane's access: the race, the uninitialised read and
the bound are checked as for a plain load or store. Small kernels compiled with the build's flags.
"""

from __future__ import annotations

from pathlib import Path

from nvcc_flags import NVCC
from nvcc_flags import compile_ptx as _ptx

from audit.cuda.barriers import BlockLaunch
from audit.cuda.blockbounds import buffer_base
from audit.cuda.blocksim import find_barrier_races, find_out_of_bounds, find_shared_uninit_reads

HEAD = "#include <mma.h>\n#include <cuda_fp16.h>\nusing namespace nvcuda;\n"

# one warp stores a 16 x 16 tile of halves, then (after BARRIER) every lane reads it back
STORE_THEN_READ = HEAD + """extern "C" __global__ void k(half* out, int n) {
    __shared__ __align__(32) half tile[16 * 16];
    wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;
    wmma::fill_fragment(c, 0.0);
    wmma::store_matrix_sync(tile, c, 16, wmma::mem_row_major);
    BARRIER
    for (int i = threadIdx.x; i < 256; i += 32) out[i] = tile[i];
}
"""

# two warps fill a tile; warp 0 loads it as matrices A and B, with or without the barrier between
FILL_THEN_LOAD = HEAD + """extern "C" __global__ void k(const half* a, half* out, int n) {
    __shared__ __align__(32) half tile[16 * 16];
    for (int i = threadIdx.x; i < 256; i += 64) tile[i] = a[i];
    BARRIER
    if (threadIdx.x < 32) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
        wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;
        wmma::fill_fragment(c, 0.0);
        wmma::load_matrix_sync(fa, tile, 16);
        wmma::load_matrix_sync(fb, tile, 16);
        wmma::mma_sync(c, fa, fb, c);
        wmma::store_matrix_sync(out, c, 16, wmma::mem_row_major);
    }
}
"""

# a warp's 16 x 16 result stored to global memory with a row stride of LDM halves
STORE_GLOBAL = HEAD + """extern "C" __global__ void k(half* out, int n) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;
    wmma::fill_fragment(c, 1.0);
    wmma::store_matrix_sync(out, c, LDM, wmma::mem_row_major);
}
"""


def _launch(block: int, buffers: tuple = (), n: int = 256) -> BlockLaunch:
    params = tuple(sorted({(bf[0], buffer_base(bf[0])) for bf in buffers} | {(len(buffers), n)}))
    return BlockLaunch(params, (block, 1, 1), (1, 1, 1), 0, f"n = {n}", buffers)


def _halves(pos: int, name: str, numel: int) -> tuple:
    return (pos, name, numel * 2, 2, f"shape [{numel}], f16", None)


@NVCC
def test_a_tile_written_by_store_matrix_sync_is_written(tmp_path: Path) -> None:
    """The warp's store writes every element of the tile: read back after the barrier, nothing is
    uninitialised; without the barrier each lane's read of another lane's element is no wait (the store is
    one warp's, the reads that warp's: the lanes' order within a warp is SHARED_BARRIER_MISSING's to judge)."""
    launch = _launch(32, (_halves(0, "out", 256),))
    good = _ptx(tmp_path, STORE_THEN_READ.replace("BARRIER", "__syncthreads();"), "good.cu")
    assert find_shared_uninit_reads(good, "k", [launch]) == []
    assert find_barrier_races(good, "k", [launch]) == []


@NVCC
def test_a_load_matrix_sync_of_a_tile_other_warps_fill_needs_the_barrier(tmp_path: Path) -> None:
    launch = _launch(64, (_halves(0, "a", 256), _halves(1, "out", 256)))
    good = _ptx(tmp_path, FILL_THEN_LOAD.replace("BARRIER", "__syncthreads();"), "good.cu")
    assert find_barrier_races(good, "k", [launch]) == [] and find_shared_uninit_reads(good, "k", [launch]) == []
    bad = _ptx(tmp_path, FILL_THEN_LOAD.replace("BARRIER", ""), "bad.cu")
    races = find_barrier_races(bad, "k", [launch])
    assert [(r.order, r.line, r.first_line) for r in races] == [("raw", 13, 6), ("raw", 14, 6)]
    assert all(r.second_instruction.startswith("wmma.load.") for r in races)
    assert races[0].element == 'tile[32] (byte 64 of shared array "tile")'  # a row warp 1 stores (i = 32 .. 63)


@NVCC
def test_store_matrix_sync_past_its_buffer_is_out_of_bounds(tmp_path: Path) -> None:
    """16 rows of 16 halves at a row stride of 16 need 256 elements; with a stride of 8 the rows overlap
    inside 128 (a wrong ldm, still in bounds of a 136-element buffer)."""
    ptx = _ptx(tmp_path, STORE_GLOBAL.replace("LDM", "16"), "wide.cu")
    assert find_out_of_bounds(ptx, "k", [_launch(32, (_halves(0, "out", 256),))]) == []
    (oob,) = find_out_of_bounds(ptx, "k", [_launch(32, (_halves(0, "out", 128),))])
    assert (oob.memory, oob.name, oob.access, oob.start // oob.element) == ("global", "out", "write", 128)
    narrow = _ptx(tmp_path, STORE_GLOBAL.replace("LDM", "8"), "narrow.cu")
    assert find_out_of_bounds(narrow, "k", [_launch(32, (_halves(0, "out", 136),))]) == []
    assert find_out_of_bounds(narrow, "k", [_launch(32, (_halves(0, "out", 135),))]) != []
