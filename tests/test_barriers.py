"""Missing barriers found by running a block over PTX (audit.cuda.barriers, rule SHARED_BARRIER_MISSING).

Small kernels compiled with the flags of the build (``-arch=sm_90 -ptx -O3 -lineinfo -std=c++17``): each
missing ``__syncthreads()``/``__syncwarp()`` must be found with its two lines, two threads and scope, each
correct counterpart must stay clean, and what the run cannot follow (a loop on loaded data around a
barrier, ``cp.async``) must be given up, not guessed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.cuda.barriers import BarrierAnalysis, BarrierRace, BlockLaunch
from audit.cuda.blocksim import analyse_block, c_name, find_barrier_races
from audit.cuda.cache import AnalysisCache
from nvcc_flags import compile_ptx as _ptx

NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")



def _launch(block: int | tuple[int, int, int], n: int = 256, grid: int = 2, dynamic: int | None = None) -> BlockLaunch:
    b = (block, 1, 1) if isinstance(block, int) else block
    return BlockLaunch(((2, n),), b, (grid, 1, 1), dynamic, f"n = {n}")


def _found(ptx: str, launch: BlockLaunch) -> list[tuple[str, int | None, int | None, str, tuple[int, ...]]]:
    """(order, first line, line, scope, threads) of each race of entry "k"."""
    return [(r.order, r.first_line, r.line, r.scope, r.threads) for r in find_barrier_races(ptx, "k", [launch])]


# one kernel per case, extern "C" so the entry is "k"; the third parameter is n
TREE = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float sd[256];
    unsigned tid = threadIdx.x;
    sd[tid] = tid < n ? x[blockIdx.x * 256 + tid] : 0.0f;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sd[tid] += sd[tid + s];
        SYNC
    }
    if (tid == 0) out[blockIdx.x] = sd[0];
}
"""


@NVCC
def test_a_tree_reduction_without_the_barrier_in_its_loop_is_found(tmp_path: Path) -> None:
    bad = _ptx(tmp_path, TREE.replace("SYNC", ""), "bad.cu")
    # stride 64 reads sd[64], which thread 64 (warp 2) wrote at stride 128 in the same interval
    assert _found(bad, _launch(256)) == [("raw", 7, 7, "warp", (64, 0, 0, 0, 0, 0))]
    (race,) = find_barrier_races(bad, "k", [_launch(256)])
    assert race.element == 'sd[64] (byte 256 of shared array "sd")'
    assert "put a __syncthreads() between the write at line 7 and the read at line 7" in race.message("k", "k.cu")
    good = _ptx(tmp_path, TREE.replace("SYNC", "__syncthreads();"), "good.cu")
    result = analyse_block(good, "k", _launch(256))
    assert (result.races, result.complete) == ((), True)


NEIGHBOUR = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[257];
    int tid = threadIdx.x;
    s[tid] = x[blockIdx.x * blockDim.x + tid];
    if (tid == 0) s[blockDim.x] = 0.0f;
    SYNC
    out[blockIdx.x * blockDim.x + tid] = s[tid + 1] - s[tid];
}
"""


@NVCC
def test_reading_the_neighbours_element_without_a_barrier_is_found_across_warps(tmp_path: Path) -> None:
    bad = _ptx(tmp_path, NEIGHBOUR.replace("SYNC", ""), "bad.cu")
    assert _found(bad, _launch(256)) == [
        ("raw", 4, 7, "warp", (32, 0, 0, 31, 0, 0)),  # s[32]: written by warp 1, read by lane 31 of warp 0
        ("raw", 5, 7, "warp", (0, 0, 0, 255, 0, 0)),  # s[256]: written by thread 0, read by thread 255
    ]
    assert _found(bad, _launch(32)) == [  # one warp: lanes of it, and __syncwarp() is the fix
        ("raw", 4, 7, "lane", (1, 0, 0, 0, 0, 0)), ("raw", 5, 7, "lane", (0, 0, 0, 31, 0, 0))]
    msg = find_barrier_races(bad, "k", [_launch(32)])[0].message("k", "k.cu")
    assert "a lane of the same warp" in msg and "put a __syncwarp() between the write at line 4 and the read at line 7" in msg
    assert _found(_ptx(tmp_path, NEIGHBOUR.replace("SYNC", "__syncthreads();"), "good.cu"), _launch(256)) == []


WARP = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[64];
    int tid = threadIdx.x;
    s[tid] = x[blockIdx.x * 64 + tid];
    __syncthreads();
    if (tid < 32) {
BODY
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}
"""
# the CUDA C++ Programming Guide's warp-synchronous reduction, in its three forms (Independent Thread
# Scheduling): without __syncwarp, with it after each statement ("incorrect use"), and split into a read
# and a write each followed by __syncwarp ("correct use")
VOLATILE = "\n".join(f"        v[tid] += v[tid + {o}];" for o in (32, 16, 8, 4, 2, 1))
SYNCED_STATEMENTS = "\n".join(f"        v[tid] += v[tid + {o}]; __syncwarp();" for o in (32, 16, 8, 4, 2, 1))
SPLIT = "        float a = s[tid];\n" + "\n".join(
    f"        a += s[tid + {o}]; __syncwarp(); s[tid] = a; __syncwarp();" for o in (32, 16, 8, 4, 2, 1))


@NVCC
def test_a_warp_synchronous_reduction_needs_syncwarp_between_its_lanes(tmp_path: Path) -> None:
    bad = _ptx(tmp_path, WARP.replace("BODY", "        volatile float* v = s;\n" + VOLATILE), "bad.cu")
    found = _found(bad, _launch(64))
    # line 8 writes v[16] (lane 16), line 9 reads it (lane 0): a read of another lane's write
    assert found[0] == ("raw", 8, 9, "lane", (16, 0, 0, 0, 0, 0))
    assert {f[3] for f in found} == {"lane"} and {(f[1], f[2]) for f in found if f[0] == "raw"} == {(8, 9), (9, 10), (10, 11), (11, 12), (12, 13)}
    msg = find_barrier_races(bad, "k", [_launch(64)])[0].message("k", "k.cu")
    assert "put a __syncwarp() between the write at line 8 and the read at line 9" in msg
    # __syncwarp after each statement still lets lane 16 overwrite v[16] while lane 0 reads it
    incorrect = _ptx(tmp_path, WARP.replace("BODY", "        volatile float* v = s;\n" + SYNCED_STATEMENTS), "incorrect.cu")
    assert {(f[0], f[3]) for f in _found(incorrect, _launch(64))} == {("war", "lane")}
    assert _found(incorrect, _launch(64))[0] == ("war", 9, 9, "lane", (0, 0, 0, 16, 0, 0))
    correct = _ptx(tmp_path, WARP.replace("BODY", SPLIT), "correct.cu")
    result = analyse_block(correct, "k", _launch(64))
    assert (result.races, result.complete) == ((), True)


@NVCC
def test_a_loop_on_loaded_data_around_a_barrier_is_not_analysed(tmp_path: Path) -> None:
    body = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[256];
    int tid = threadIdx.x;
    float v = x[blockIdx.x * 256 + tid];
    while (v > 1.0f) {
        s[tid] = v;
        __syncthreads();
        v = s[(tid + 1) % 256] * 0.5f;
        __syncthreads();
    }
    s[tid] = v;
    out[blockIdx.x * 256 + tid] = s[(tid + 1) % 256];
}
"""
    result = analyse_block(_ptx(tmp_path, body), "k", _launch(256))
    assert result.races == () and not result.complete and result.reason.startswith("gave up: a branch on an unknown value")


@NVCC
def test_a_branch_on_loaded_data_without_a_barrier_is_stepped_over(tmp_path: Path) -> None:
    """``if (v > 1) v = ...``: its threads go on at the join with v unknown; the race after it is found."""
    body = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[256];
    int tid = threadIdx.x;
    float v = x[blockIdx.x * 256 + tid];
    if (v > 1.0f) v = sqrtf(v) + x[tid + 7];
    s[tid] = v;
    out[blockIdx.x * 256 + tid] = s[(tid + 1) % 256];
}
"""
    assert _found(_ptx(tmp_path, body), _launch(256)) == [("raw", 6, 7, "warp", (32, 0, 0, 31, 0, 0))]


DOUBLE_BUFFER = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float tile[2][128];
    int tid = threadIdx.x;
    float acc = 0.0f;
    tile[0][tid] = x[tid];
    __syncthreads();
    for (int t = 0; t < n; ++t) {
        int cur = t & 1;
        if (t + 1 < n) tile[cur ^ 1][tid] = x[(t + 1) * 128 + tid];
        for (int j = 0; j < 128; j += 32) acc += tile[cur][(tid + j) % 128];
        SYNC
    }
    out[blockIdx.x * 128 + tid] = acc;
}
"""


@NVCC
def test_a_double_buffered_loop_is_clean_with_its_barrier_and_found_without(tmp_path: Path) -> None:
    good = _ptx(tmp_path, DOUBLE_BUFFER.replace("SYNC", "__syncthreads();"), "good.cu")
    result = analyse_block(good, "k", _launch(128, n=5))
    assert (result.races, result.complete) == ((), True)
    bad = _ptx(tmp_path, DOUBLE_BUFFER.replace("SYNC", ""), "bad.cu")
    found = _found(bad, _launch(128, n=5))
    # iteration 1 loads tile[0] while warps still read it for iteration 0, and reads tile[1] as it is filled
    assert [(f[0], f[1], f[2], f[3]) for f in found] == [("war", 10, 9, "warp"), ("raw", 9, 10, "warp")]
    assert _found(bad, _launch(128, n=1)) == []  # one iteration: the buffers never swap


EXTERN = """extern "C" __global__ void k(const float* x, float* out, int n) {
    extern __shared__ float buf[];
    int tid = threadIdx.x;
    for (int i = tid; i < n; i += blockDim.x) buf[i] = x[i];
    SYNC
    float acc = 0.0f;
    for (int i = tid; i < n; i += blockDim.x) acc += buf[n - 1 - i];
    out[blockIdx.x * blockDim.x + tid] = acc;
}
"""


@NVCC
def test_dynamic_shared_memory_is_one_array_of_the_launch_size(tmp_path: Path) -> None:
    bad = _ptx(tmp_path, EXTERN.replace("SYNC", ""), "bad.cu")
    assert _found(bad, _launch(256, n=600, dynamic=2400)) == [("raw", 4, 7, "warp", (87, 0, 0, 0, 0, 0))]
    (race,) = find_barrier_races(bad, "k", [_launch(256, n=600, dynamic=2400)])
    assert race.element == 'buf[599] (byte 2396 of shared array "buf")'
    assert _found(_ptx(tmp_path, EXTERN.replace("SYNC", "__syncthreads();"), "good.cu"), _launch(256, n=600, dynamic=2400)) == []


CP_ASYNC = """#include <cuda_pipeline.h>
extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[256];
    int tid = threadIdx.x;
    __pipeline_memcpy_async(&s[tid], &x[blockIdx.x * 256 + tid], 4);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    SYNC
    out[blockIdx.x * 256 + tid] = s[(tid + 1) % 256];
}
"""


@NVCC
def test_a_read_of_another_threads_cp_async_bytes_without_a_barrier_after_the_wait_is_found(tmp_path: Path) -> None:
    """The copy lands for its own thread at its wait; thread 31 reads what thread 32 copied with no
    barrier after that wait: a race with the copy's line as the write. With the __syncthreads() the run
    reaches the end, clean (cp.async was given up on before)."""
    result = analyse_block(_ptx(tmp_path, CP_ASYNC.replace("SYNC", ""), "bad.cu"), "k", _launch(256))
    assert result.complete
    assert [(r.order, r.first_line, r.line, r.scope, r.threads) for r in result.races] == [("raw", 5, 9, "warp", (32, 0, 0, 31, 0, 0))]
    assert "cp.async" in result.races[0].first_instruction
    good = analyse_block(_ptx(tmp_path, CP_ASYNC.replace("SYNC", "__syncthreads();"), "good.cu"), "k", _launch(256))
    assert good.complete and good.races == ()


@NVCC
def test_a_cp_async_in_flight_across_a_barrier_races_until_its_wait(tmp_path: Path) -> None:
    """A barrier before the wait does not order the copy: another thread's read after the barrier but
    before a later barrier races with it; waiting first, then the barrier, is clean."""
    body = """#include <cuda_pipeline.h>
extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[256];
    int tid = threadIdx.x;
    __pipeline_memcpy_async(&s[tid], &x[blockIdx.x * 256 + tid], 4);
    __pipeline_commit();
    FIRST
    __syncthreads();
    SECOND
    out[blockIdx.x * 256 + tid] = s[(tid + 1) % 256];
}
"""
    bad = analyse_block(_ptx(tmp_path, body.replace("FIRST", "").replace("SECOND", "__pipeline_wait_prior(0);"), "bad.cu"), "k", _launch(256))
    assert bad.complete and [(r.order, r.first_line, r.line) for r in bad.races] == [("raw", 5, 10)]
    good = analyse_block(_ptx(tmp_path, body.replace("FIRST", "__pipeline_wait_prior(0);").replace("SECOND", ""), "good.cu"), "k", _launch(256))
    assert good.complete and good.races == ()


@NVCC
def test_overwriting_a_stage_another_thread_still_reads_is_found(tmp_path: Path) -> None:
    """A two-stage ring without the barrier before the refill: thread 1 reads s[0] (thread 0's copy) while
    thread 0's next copy may already be landing there (a write after read in one interval)."""
    body = """#include <cuda_pipeline.h>
extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[256];
    int tid = threadIdx.x;
    __pipeline_memcpy_async(&s[tid], &x[tid], 4);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    float v = s[(tid + 255) % 256];
    SYNC
    __pipeline_memcpy_async(&s[tid], &x[256 + tid], 4);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    out[tid] = v + s[(tid + 1) % 256];
}
"""
    bad = analyse_block(_ptx(tmp_path, body.replace("SYNC", ""), "bad.cu"), "k", _launch(256, grid=1))
    assert bad.complete and [(r.order, r.first_line, r.line) for r in bad.races] == [("war", 9, 11)]
    good = analyse_block(_ptx(tmp_path, body.replace("SYNC", "__syncthreads();"), "good.cu"), "k", _launch(256, grid=1))
    assert good.complete and good.races == ()


@NVCC
def test_a_bulk_copy_is_still_not_analysed(tmp_path: Path) -> None:
    body = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ __align__(16) float s[256];
    __shared__ __align__(8) unsigned long long bar;
    unsigned d = (unsigned)__cvta_generic_to_shared(s), b = (unsigned)__cvta_generic_to_shared(&bar);
    if (threadIdx.x == 0)
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 1024, [%2];" :: "r"(d), "l"(x), "r"(b) : "memory");
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}
"""
    result = analyse_block(_ptx(tmp_path, body), "k", _launch(256))
    assert result.races == () and not result.complete and result.reason.startswith("gave up: cp.async.bulk")


LABELLED = """extern "C" __global__ void k(const int* labels, float* out, int n) {
    __shared__ float s[256];
    int tid = threadIdx.x;
    int row = blockIdx.x;
    if (labels[row] == -1) return;  // a skipped row: block-uniform
    s[tid] = tid;
    __syncthreads();
    float v = s[(tid + 1) % 256];
    SYNC
    s[tid] = 2.0f * v;
    __syncthreads();
    out[row * 256 + tid] = s[255 - tid];
}
"""


def _labelled(fill: tuple[int, ...] | None) -> BlockLaunch:
    from audit.cuda.blockbounds import buffer_base

    fills = ((0, 4, 1, fill, "labels"),) if fill is not None else ()
    return BlockLaunch(((0, buffer_base(0)), (1, buffer_base(1)), (2, 256)), (256, 1, 1), (2, 1, 1), None, "n = 256",
                       ((0, "labels", 8, 4, "shape [2], i32", None), (1, "out", 2048, 4, "shape [2, 256], f32", None)), None, fills)


@NVCC
def test_a_race_behind_a_label_guard_is_found_with_the_labels_filled(tmp_path: Path) -> None:
    """``if (labels[row] == -1) return;`` branches on loaded data around an exit: unknown, the run gave up
    there; with the labels filled from their domain it takes the labelled path to its end and finds the
    write over what another warp reads (no barrier between them), and the good twin is clean."""
    bad = _ptx(tmp_path, LABELLED.replace("SYNC", ""), "bad.cu")
    unknown = analyse_block(bad, "k", _labelled(None))
    assert not unknown.complete and "unknown" in unknown.reason and unknown.races == ()
    found = analyse_block(bad, "k", _labelled((0,)))
    assert found.complete and [(r.order, r.first_line, r.line, r.threads) for r in found.races] == [("war", 8, 10, (255, 0, 0, 0, 0, 0))]
    skipped = analyse_block(bad, "k", _labelled((-1,)))  # every row skipped: the path is not taken
    assert skipped.complete and skipped.races == ()
    good = _ptx(tmp_path, LABELLED.replace("SYNC", "__syncthreads();"), "good.cu")
    for fill in ((0,), (-1,), (0, -1)):
        got = analyse_block(good, "k", _labelled(fill))
        assert got.complete and got.races == (), fill


@NVCC
def test_read_modify_writes_atomics_and_one_flag_stored_by_many_are_left_alone(tmp_path: Path) -> None:
    """``s[w] += v`` by every lane is SHARED_RMW_RACE's; atomics never race each other; every thread
    storing the same flag is no order-dependent result."""
    body = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[8]; __shared__ float a[8]; __shared__ int flag;
    int tid = threadIdx.x; float v = x[tid];
    if (tid < 8) { s[tid] = 0.0f; a[tid] = 0.0f; }
    if (tid == 0) flag = 0;
    __syncthreads();
    s[tid / 32] += v;
    atomicAdd(&a[(tid + 1) % 8], v);
    if (v > 0.0f) flag = 1;
    flag = 1;
    __syncthreads();
    if (tid == 0) out[0] = s[0] + a[0] + flag;
}
"""
    result = analyse_block(_ptx(tmp_path, body), "k", _launch(256))
    assert (result.races, result.complete) == ((), True)


ATOMIC_SUM = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float sum[64];
    int tid = threadIdx.x;
    if (tid < 64) sum[tid] = 0.0f;
    __syncthreads();
    atomicAdd(&sum[tid % 64], x[blockIdx.x * blockDim.x + tid]);
    SYNC
    if (tid < 64) out[blockIdx.x * 64 + tid] = sum[tid];
}
"""


@NVCC
def test_atomics_into_a_shared_sum_read_back_without_a_barrier_are_found(tmp_path: Path) -> None:
    """The seeded llm.c bug: layernorm_backward_kernel2 without the barrier between its atomicAdds into
    shared memory and the loop that copies the sums out."""
    bad = _ptx(tmp_path, ATOMIC_SUM.replace("SYNC", ""), "bad.cu")
    assert _found(bad, _launch(256)) == [("raw", 6, 8, "warp", (192, 0, 0, 0, 0, 0))]  # the latest adder of sum[0]
    assert _found(_ptx(tmp_path, ATOMIC_SUM.replace("SYNC", "__syncthreads();"), "good.cu"), _launch(256)) == []


@NVCC
def test_a_2d_block_transposing_a_tile_without_its_barrier_is_found(tmp_path: Path) -> None:
    body = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float t[16][17];
    t[threadIdx.y][threadIdx.x] = x[(blockIdx.y * 16 + threadIdx.y) * n + blockIdx.x * 16 + threadIdx.x];
    SYNC
    out[(blockIdx.x * 16 + threadIdx.y) * n + blockIdx.y * 16 + threadIdx.x] = t[threadIdx.x][threadIdx.y];
}
"""
    bad = _ptx(tmp_path, body.replace("SYNC", ""), "bad.cu")
    assert _found(bad, _launch((16, 16, 1), n=64)) == [("raw", 3, 5, "warp", (0, 2, 0, 2, 0, 0))]
    assert _found(_ptx(tmp_path, body.replace("SYNC", "__syncthreads();"), "good.cu"), _launch((16, 16, 1), n=64)) == []


@NVCC
def test_syncthreads_count_gives_its_result_and_a_partial_barrier_gives_up(tmp_path: Path) -> None:
    body = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[256];
    int tid = threadIdx.x;
    s[tid] = x[tid];
    int c = __syncthreads_count(tid < n);
    out[tid] = c > 100 ? s[(tid + 1) % 256] : 0.0f;
    if (c > 100) s[(tid + 3) % 256] = 1.0f;
}
"""
    ptx = _ptx(tmp_path, body)
    # n = 200 threads pass: c = 200, so every thread reads s[tid + 1] and writes s[tid + 3] (thread 30 writes
    # the s[33] thread 32 reads)
    assert _found(ptx, _launch(256, n=200)) == [("war", 6, 7, "warp", (32, 0, 0, 30, 0, 0))]
    assert _found(ptx, _launch(256, n=50)) == []  # c = 50: neither runs
    hand = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u32 k_param_0)
{
.reg .b32 %r<4>;
.shared .align 4 .b8 s[1024];
mov.u32 %r1, %tid.x;
shl.b32 %r2, %r1, 2;
st.shared.u32 [s], %r1;
bar.sync 1, 64;
ld.shared.u32 %r3, [s+4];
ret;
}
"""
    result = analyse_block(hand, "k", _launch(256))
    assert result.races == () and not result.complete and "bar.sync 1, 64" in result.reason


def test_a_generic_pointer_into_shared_memory_is_followed_and_a_syncwarp_orders_lanes() -> None:
    """Hand-written PTX: a ``cvta.shared`` pointer stored through with a generic ``st``, read back by
    another lane with and without ``bar.warp.sync`` between."""
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u32 k_param_0)
{
.reg .b32 %r<8>;
.reg .b64 %rd<8>;
.shared .align 4 .b8 _ZZ1kE3buf[128];
mov.u32 %r1, %tid.x;
mov.u64 %rd1, _ZZ1kE3buf;
cvta.shared.u64 %rd2, %rd1;
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd2, %rd3;
st.u32 [%rd4], %r1;
SYNC
ld.u32 %r2, [%rd4+4];
ret;
}
"""
    launch = BlockLaunch((), (32, 1, 1), (1, 1, 1), None, "the contracts' dims")
    (race,) = find_barrier_races(ptx.replace("SYNC", ""), "k", [launch])
    assert (race.order, race.scope, race.threads, race.element) == ("raw", "lane", (1, 0, 0, 0, 0, 0), 'buf[1] (byte 4 of shared array "buf")')
    assert find_barrier_races(ptx.replace("SYNC", "bar.warp.sync -1;"), "k", [launch]) == []
    # a __syncwarp that half the warp skips is not modelled
    skipped = ptx.replace("SYNC", "setp.lt.u32 %p1, %r1, 16;\n@%p1 bar.warp.sync -1;").replace(".reg .b32", ".reg .pred %p<2>;\n.reg .b32")
    result = analyse_block(skipped, "k", launch)
    assert not result.complete and "__syncwarp" in result.reason


def test_message_is_one_sentence_with_both_lines_threads_element_and_fix() -> None:
    race = BarrierRace("k", 51, 1, "/x/chain.cu", 48, None, "helper.cuh:12", "st.shared.f32 [%r36], %f50",
                       "ld.shared.f32 %f53, [_ZZ4lossE8warp_sum+4]", "raw", "warp", (32, 0, 0, 0, 0, 0),
                       'warp_sum[1] (byte 4 of shared array "warp_sum")', "B = 1, H = 32")
    assert race.message("loss", "kernels/chain.cu") == (
        'Kernel "loss" reads shared memory that another thread writes in the same barrier interval '
        "(kernels/chain.cu:51, inlined from helper.cuh:12, ld.shared.f32 %f53, [_ZZ4lossE8warp_sum+4] after "
        "st.shared.f32 [%r36], %f50 at line 48): at B = 1, H = 32, threadIdx (32, 0, 0) writes warp_sum[1] "
        '(byte 4 of shared array "warp_sum") and threadIdx (0, 0, 0), of another warp, reads it with no barrier '
        "between, so the read may see the old value or the new; put a __syncthreads() between the write at "
        "line 48 and the read at line 51.")
    war = BarrierRace("k", 9, 1, None, 10, None, None, "ld.shared.f32 %f1, [%r6+512]", "st.shared.f32 [%r2+512], %f16",
                      "war", "lane", (0, 0, 0, 16, 0, 0), 's[16] (byte 64 of shared array "s")', "n = 5")
    assert war.message("k", "k.cu").endswith(
        "threadIdx (0, 0, 0) reads s[16] (byte 64 of shared array \"s\") and threadIdx (16, 0, 0), a lane of the "
        "same warp, overwrites it with no barrier between, so the read may see the new value instead of the old; "
        "put a __syncwarp() between the read at line 10 and the write at line 9.")


def test_results_round_trip_through_the_analysis_cache(tmp_path: Path) -> None:
    race = BarrierRace("k", 51, 1, None, 48, "a.cuh:3", None, "st", "ld", "raw", "warp", (32, 0, 0, 0, 0, 0), "s[1]", "B = 1")
    cache = AnalysisCache(tmp_path)
    assert cache.results("barrier-races", ["ptx", "k"], BarrierRace, lambda: [race]) == [race]
    assert AnalysisCache(tmp_path).results("barrier-races", ["ptx", "k"], BarrierRace, lambda: []) == [race]


def test_c_names_of_shared_symbols() -> None:
    assert c_name("_ZZ6reduceE5sdata") == "sdata"
    assert c_name("_ZZ26aux_trade_outcome_backwardPKfS0_iE6flag_s") == "flag_s"
    assert c_name("smem") == "smem"


def test_launches_are_small_valid_sizes_with_the_scalar_parameters() -> None:
    """B at its least and at 131 (clamped to its range), the loss kernel's B and H parameters filled,
    its pointers non-null, its block and grid evaluated there."""
    from audit.cuda.static import barrier_launches
    from audit.graph import Wiring
    from audit.load import load_contracts

    root = Path(__file__).resolve().parent / "data" / "rules" / "SHARED_BARRIER_MISSING" / "good"
    cs = load_contracts(root / "contracts", root)
    launches = barrier_launches(cs, Wiring(cs), cs.kernel("loss"))
    assert [(dict(lc.params)[7], dict(lc.params)[8], lc.block, lc.grid, lc.label) for lc in launches] == [
        (1, 32, (256, 1, 1), (1, 1, 1), "B = 1, H = 32"), (131, 32, (256, 1, 1), (1, 1, 1), "B = 131, H = 32")]
    assert all(dict(lc.params)[0] != 0 for lc in launches)  # h, a bound buffer: not null


def test_launches_meet_the_kernels_assumptions_nearest_the_small_sizes(tmp_path: Path) -> None:
    """A tiled kernel whose M and K must be multiples of 32 and 128 (requires): the least and the 131
    environments break that, and no probe environment meets it (they are spread over the range); the
    launches are the multiples nearest each target, so the tile loop runs more than once at the second
    (the race between one tile's reads and the next tile's stores needs two passes)."""
    from audit.cuda.static import barrier_launches
    from audit.graph import Wiring
    from audit.load import load_contracts

    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text(
        "[dims]\nM = { min = 1, max = 4096 }\nK = { min = 1, max = 4096 }\n"
        '[[kernel]]\nname = "tiled"\nsource = "k.cu"\nstage = "forward"\n'
        'grid = ["ceil_div(M, 32)", 1, 1]\nblock = [1024, 1, 1]\nrequires = ["M % 32 == 0", "K % 128 == 0", "K % 64 == 0"]\n'
        'params = [\n  { name = "a", dtype = "f32", shape = ["M", "K"], role = "in" },\n'
        '  { name = "c", dtype = "f32", shape = ["M"], role = "out" },\n'
        '  { name = "M", kind = "scalar", dtype = "i32", value = "M" },\n  { name = "K", kind = "scalar", dtype = "i32", value = "K" },\n]\n'
    )
    cs = load_contracts(tmp_path / "contracts", tmp_path)
    launches = barrier_launches(cs, Wiring(cs), cs.kernel("tiled"))
    assert [(lc.label, lc.grid) for lc in launches] == [("M = 32, K = 128", (1, 1, 1)), ("M = 128, K = 128", (4, 1, 1)),
                                                        ("M = 96, K = 128", (3, 1, 1))]  # the dims apart (_apart)


ROWWISE = """extern "C" __global__ void k(const float4* x, float4* y, int n4, int passes) {
    for (int p = 0; p < passes; ++p) {
        int j = p * blockDim.x + threadIdx.x;
        if (j BOUND n4) y[blockIdx.x * n4 + j] = x[blockIdx.x * n4 + j];
    }
}
"""


def _rowwise(tmp_path: Path) -> tuple:
    """A row of N floats as float4s, the block sized so that the passes cover the row (ceil_div(N, 1024)
    passes of ceil_div(N, passes * 4) threads): the launch arithmetic of DeepSpeed's bias-GeLU, written here."""
    from audit.graph import Wiring
    from audit.load import load_contracts

    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text(
        '[dims]\nR = { min = 1, max = 64 }\nN = { min = 4, max = 65536 }\n'
        '[[kernel]]\nname = "rowwise"\nsource = "k.cu"\nentry = "k"\nstage = "forward"\n'
        'grid = ["R", 1, 1]\nblock = ["ceil_div(N, ceil_div(N, 1024) * 4)", 1, 1]\nrequires = ["N % 4 == 0"]\n'
        'params = [\n  { name = "x", dtype = "f32", shape = ["R", "N"], role = "in" },\n'
        '  { name = "y", dtype = "f32", shape = ["R", "N"], role = "out" },\n'
        '  { name = "n4", kind = "scalar", dtype = "i32", value = "N // 4" },\n'
        '  { name = "passes", kind = "scalar", dtype = "i32", value = "ceil_div(N, 1024)" },\n]\n'
    )
    cs = load_contracts(tmp_path / "contracts", tmp_path)
    return cs, Wiring(cs), cs.kernel("rowwise")


def test_a_dim_divided_by_a_large_constant_is_also_run_just_past_it(tmp_path: Path) -> None:
    """Up to N = 1024 one pass covers the row exactly, so a `j <= n4` overrun never shows; the block runs
    take N just past the divisor 1024 too, at the least value the kernel's assumptions allow (1028); two whole
    tiles are taken of divisors up to 131 only (here 4, of which N = 132 is a multiple already)."""
    from audit.cuda.static import barrier_launches

    cs, wiring, k = _rowwise(tmp_path)
    launches = barrier_launches(cs, wiring, k)
    assert [(lc.label, lc.block) for lc in launches] == [
        ("N = 4, R = 1", (1, 1, 1)), ("N = 132, R = 64", (33, 1, 1)), ("N = 132, R = 61", (33, 1, 1)),  # R odd: a tail
        ("N = 1028, R = 1", (129, 1, 1)), ("N = 96, R = 64", (24, 1, 1))]  # past the divisor; the dims apart
    assert dict(launches[3].params)[3] == 2  # two passes


@NVCC
def test_the_overrun_of_a_second_pass_is_found_past_the_divisor(tmp_path: Path) -> None:
    from audit.cuda.blocksim import find_out_of_bounds
    from audit.cuda.static import barrier_launches

    cs, wiring, k = _rowwise(tmp_path)
    launches = barrier_launches(cs, wiring, k)
    bad = _ptx(tmp_path, ROWWISE.replace("BOUND", "<="), "bad.cu")
    found = find_out_of_bounds(bad, "k", launches)
    assert {(o.name, o.launch) for o in found} == {("x", "N = 1028, R = 1"), ("y", "N = 1028, R = 1")}
    assert find_out_of_bounds(bad, "k", launches[:2]) == []  # the sizes the runs took before: nothing seen
    good = _ptx(tmp_path, ROWWISE.replace("BOUND", "<"), "good.cu")
    assert find_out_of_bounds(good, "k", launches) == []


STRIDE = """extern "C" __global__ void k(const float* x, float* y, int M, int N) {
    int r = blockIdx.x;
    for (int c = threadIdx.x; c < N; c += blockDim.x) y[r * N + c] = x[r * STRIDE + c];
}
"""


def _stride(tmp_path: Path) -> tuple:
    from audit.graph import Wiring
    from audit.load import load_contracts

    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text(
        '[dims]\nM = { min = 1, max = 256 }\nN = { min = 1, max = 256 }\n'
        '[[kernel]]\nname = "copy"\nsource = "k.cu"\nentry = "k"\nstage = "forward"\n'
        'grid = ["M", 1, 1]\nblock = [64, 1, 1]\n'
        'params = [\n  { name = "x", dtype = "f32", shape = ["M", "N"], role = "in" },\n'
        '  { name = "y", dtype = "f32", shape = ["M", "N"], role = "out" },\n'
        '  { name = "M", kind = "scalar", dtype = "i32", value = "M" },\n  { name = "N", kind = "scalar", dtype = "i32", value = "N" },\n]\n'
    )
    cs = load_contracts(tmp_path / "contracts", tmp_path)
    return cs, Wiring(cs), cs.kernel("copy")


def test_two_runtime_dims_are_also_run_apart_in_both_orders(tmp_path: Path) -> None:
    """Every other run gives M and N one value (1, then 131): a row read with the other dim's stride is
    exactly right there. Two more runs give them distinct values, in both orders."""
    from audit.cuda.static import barrier_launches

    cs, wiring, k = _stride(tmp_path)
    assert [lc.label for lc in barrier_launches(cs, wiring, k)] == [
        "M = 1, N = 1", "M = 131, N = 131", "M = 131, N = 97", "M = 97, N = 131"]


@NVCC
def test_a_row_read_with_the_other_dims_stride_is_found_where_the_dims_differ(tmp_path: Path) -> None:
    from audit.cuda.blocksim import find_out_of_bounds
    from audit.cuda.static import barrier_launches

    cs, wiring, k = _stride(tmp_path)
    launches = barrier_launches(cs, wiring, k)
    bad = _ptx(tmp_path, STRIDE.replace("STRIDE", "M"), "bad.cu")
    assert {(o.name, o.launch) for o in find_out_of_bounds(bad, "k", launches)} == {("x", "M = 131, N = 97")}
    assert find_out_of_bounds(bad, "k", launches[:2]) == []  # one value for both dims: nothing to see
    good = _ptx(tmp_path, STRIDE.replace("STRIDE", "N"), "good.cu")
    assert find_out_of_bounds(good, "k", launches) == []


def test_one_store_of_a_flag_repeated_by_other_threads_is_no_race_but_two_stores_are() -> None:
    """Hand-written PTX: thread t stores the flag on each of its max(1, t) loop iterations, so threads
    store it again while others have stored it already: the same instruction (the same value) is no
    order-dependent result; a reset by another instruction in the same interval is."""
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u32 k_param_0)
{
.reg .pred %p<2>;
.reg .b32 %r<4>;
.shared .align 4 .b8 flag[4];
mov.u32 %r1, %tid.x;
RESET
mov.u32 %r2, 0;
$L_loop:
st.shared.u32 [flag], 1;
add.s32 %r2, %r2, 1;
setp.lt.u32 %p1, %r2, %r1;
@%p1 bra $L_loop;
ret;
}
"""
    launch = BlockLaunch((), (64, 1, 1), (1, 1, 1), None, "the contracts' dims")
    result = analyse_block(ptx.replace("RESET", ""), "k", launch)
    assert (result.races, result.complete) == ((), True)
    reset = ptx.replace("RESET", "setp.eq.u32 %p1, %r1, 40;\n@%p1 st.shared.u32 [flag], 0;")
    (race,) = find_barrier_races(reset, "k", [launch])
    assert (race.order, race.scope, race.threads) == ("waw", "warp", (40, 0, 0, 0, 0, 0))


# --- the rule: an entry the run gives up on is reported as not analysed (a note), never passed in silence --


@NVCC
def test_an_entry_given_up_on_is_a_note_not_a_silent_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """apex's scaled_masked_softmax_warp_forward_new returns early on a float test (everything masked) and
    zeroes shared[0] while other warps may still read it; the run gives up at that branch. Before, wireup
    check said nothing about the kernel, the same as for a clean one; now it says it did not analyse it."""
    from audit.cli import main

    root = tmp_path / "good"
    shutil.copytree(Path(__file__).resolve().parent / "data" / "rules" / "SHARED_BARRIER_MISSING" / "good", root)
    chain = root / "kernels" / "chain.cu"
    text = chain.read_text()
    old = "    __syncthreads();\n    if (threadIdx.x == 0) {\n        float total"
    assert text.count(old) == 1
    chain.write_text(text.replace(old, "    if (isv[scale_slot] > 0.0f) __syncthreads();\n    if (threadIdx.x == 0) {\n        float total"))
    rc = main(["check", "--root", str(root), "--select", "SHARED_BARRIER_MISSING"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0  # a note fails nothing
    assert out[:-1] == [
        'contracts/kernels.toml:38: SHARED_BARRIER_MISSING (note) Kernel "loss" was not analysed to its end for '
        "shared-memory accesses of two threads with no barrier between them (gave up: a branch on an unknown value "
        "around a barrier or an exit (@%p18 bra $L__BB2_25), at B = 1, H = 32): what it does past that point is not "
        "checked, so no finding there is no proof of none."
    ]
    # the clean kernel, run to its end, gives no note
    chain.write_text(text)
    assert main(["check", "--root", str(root), "--select", "SHARED_BARRIER_MISSING"]) == 0
    assert capsys.readouterr().out.splitlines()[:-1] == []


def test_a_masked_label_input_is_filled_from_its_contract_and_keys_the_launch(tmp_path: Path) -> None:
    """An integer input with a ``mask`` and ``values`` gets three fillings (every row valid at the domain's
    least value, every row skipped, the two in turn), each its own launch (so the analysis cache keys on
    them) named in its label; an integer with no stated domain gets verify's default draws in one filling
    (its greatest, 9, in a buffer of one element); a float input with none gets 1 and -1 element by element,
    in every launch (so its label does not name it)."""
    from audit.cuda.static import barrier_launches
    from audit.graph import Wiring
    from audit.load import load_contracts

    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text(
        "[dims]\nB = { min = 1, max = 4096 }\nK = { value = 3 }\n"
        '[[kernel]]\nname = "masked"\nsource = "k.cu"\nstage = "backward"\n'
        'grid = ["B", 1, 1]\nblock = [256, 1, 1]\n'
        'params = [\n  { name = "x", dtype = "f32", shape = ["B"], role = "in" },\n'
        '  { name = "labels", dtype = "i32", shape = ["B"], role = "in", mask = { skip_value = -1 }, values = { min = 0, max = "K - 1" } },\n'
        '  { name = "count", dtype = "i32", shape = [1], role = "in" },\n'
        '  { name = "y", dtype = "f32", shape = ["B"], role = "out" },\n'
        '  { name = "B", kind = "scalar", dtype = "i32", value = "B" },\n]\n'
    )
    cs = load_contracts(tmp_path / "contracts", tmp_path)
    launches = barrier_launches(cs, Wiring(cs), cs.kernel("masked"))
    x = (0, 4, 1, (0x3F800000, 0xBF800000), "")  # 1.0f, -1.0f as register bits
    assert [(lc.label, lc.fills) for lc in launches if "B = 1 " in lc.label] == [
        ("B = 1 (labels = 0 in every row; count = 9 (no values: verify's default 0..9))",
         (x, (1, 4, 1, (0,), "labels = 0 in every row"), (2, 4, 1, (9,), "count = 9 (no values: verify's default 0..9)"))),
        ("B = 1 (labels = -1 in every row; count = 9 (no values: verify's default 0..9))",
         (x, (1, 4, 1, (-1,), "labels = -1 in every row"), (2, 4, 1, (9,), "count = 9 (no values: verify's default 0..9)"))),
        ("B = 1 (labels = 0, -1 in turn; count = 9 (no values: verify's default 0..9))",
         (x, (1, 4, 1, (0, -1), "labels = 0, -1 in turn"), (2, 4, 1, (9,), "count = 9 (no values: verify's default 0..9)"))),
    ]
    assert len(launches) == 6 and len({repr(lc) for lc in launches}) == 6


def test_a_cp_async_under_an_inline_asm_scoped_predicate_is_run() -> None:
    """CUTLASS's predicated copy, ``{ .reg .pred p; setp.ne.b32 p, %r, 0; @p cp.async ... }``: the scoped
    ``p`` is read as a register (its guard known), so the copies it lets through are in flight and a read
    of one by another thread after the wait, with no barrier, races; a copy the predicate turns off races
    with nothing."""
    ptx = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)
{
.reg .pred %p<2>;
.reg .b32 %r<8>;
.reg .b64 %rd<4>;
.shared .align 16 .b8 s[1024];
ld.param.u64 %rd1, [k_param_0];
ld.param.u32 %r5, [k_param_1];
mov.u32 %r1, %tid.x;
shl.b32 %r2, %r1, 2;
mov.u32 %r3, s;
add.s32 %r4, %r3, %r2;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
setp.lt.u32 %p1, %r1, %r5;
selp.u32 %r6, 1, 0, %p1;
{
  .reg .pred p;
  setp.ne.b32 p, %r6, 0;
  @p cp.async.ca.shared.global [%r4], [%rd3], 4;
}
cp.async.commit_group;
cp.async.wait_group 0;
add.s32 %r7, %r4, 4;
ld.shared.u32 %r7, [%r7];
ret;
}
"""
    from audit.cuda.blockbounds import buffer_base

    def run(n: int) -> BarrierAnalysis:
        return analyse_block(ptx, "k", BlockLaunch(((0, buffer_base(0)), (1, n)), (64, 1, 1), (1, 1, 1), None, f"n = {n}"))

    on = run(64)
    assert on.complete and [(r.order, r.threads) for r in on.races] == [("raw", (32, 0, 0, 31, 0, 0))]
    assert on.races[0].first_instruction.startswith("@%__s_p cp.async")
    off = run(0)  # every copy turned off: nothing in flight
    assert off.complete and off.races == ()


COUNTED = """extern "C" __global__ void counted(const float* x, const int* labels, const int* count, float* y, int B) {
    __shared__ float s[256];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    if (labels[row] == -1) return;  // a skipped row
    if (count[0] == 0) return;      // no labelled row in the batch
    s[tid] = x[row] + tid;
    SYNC
    y[row * 256 + tid] = s[(tid + 1) % 256];
}
"""

COUNTED_CONTRACT = """
[[kernel]]
name = "counted"
source = "kernels/counted.cu"
stage = "backward"
grid = ["B", 1, 1]
block = [256, 1, 1]
params = [
  { name = "x", dtype = "f32", shape = ["B"], role = "in" },
  { name = "labels", dtype = "i32", shape = ["B"], role = "in", mask = { skip_value = -1 }, values = { min = 0, max = 2 } },
  { name = "count", dtype = "i32", shape = [1], role = "in", values = { min = 0, max = "B" } },
  { name = "y", dtype = "f32", shape = ["B", 256], role = "out" },
  { name = "B", kind = "scalar", dtype = "i32", value = "B" },
]
"""


@NVCC
def test_a_race_behind_two_filled_inputs_is_found_where_both_let_rows_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The body runs only where the row is labelled AND the batch's count is above zero. Filled one pattern
    index at a time (every row valid with the count's least value 0, every row skipped with the greatest,
    the two in turn), no filling let a row through and the missing barrier went unseen; every two inputs now
    meet in every pair of their patterns, and the filling with labelled rows and count = B finds it."""
    from audit.cli import main

    root = tmp_path / "proj"
    shutil.copytree(Path(__file__).resolve().parent / "data" / "rules" / "SHARED_BARRIER_MISSING" / "good", root)
    (root / "kernels" / "counted.cu").write_text(COUNTED.replace("SYNC", ""))
    kernels = root / "contracts" / "kernels.toml"
    kernels.write_text(kernels.read_text() + COUNTED_CONTRACT)
    rc = main(["check", "--root", str(root), "--select", "SHARED_BARRIER_MISSING"])
    out = capsys.readouterr().out.splitlines()[:-1]
    assert rc == 1 and out == [
        'kernels/counted.cu:9: SHARED_BARRIER_MISSING Kernel "counted" reads shared memory that another thread writes in the same '
        "barrier interval (kernels/counted.cu:9, ld.shared.f32 %f4, [%r16] after st.shared.f32 [%r8], %f3 at line 7): at B = 1 "
        "(labels = 0 in every row; count = 1 everywhere), threadIdx (32, 0, 0) writes s[32] (byte 128 of shared array \"s\") and "
        "threadIdx (31, 0, 0), of another warp, reads it with no barrier between, so the read may see the old value or the new; "
        "put a __syncthreads() between the write at line 7 and the read at line 9."
    ]
    (root / "kernels" / "counted.cu").write_text(COUNTED.replace("SYNC", "__syncthreads();"))
    assert main(["check", "--root", str(root), "--select", "SHARED_BARRIER_MISSING"]) == 0
    assert capsys.readouterr().out.splitlines()[:-1] == []


def test_two_filled_inputs_meet_in_every_pair_of_their_patterns(tmp_path: Path) -> None:
    from audit.cuda.static import _covering, barrier_launches
    from audit.graph import Wiring
    from audit.load import load_contracts

    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text("[dims]\nB = { min = 1, max = 4096 }\n" + COUNTED_CONTRACT.replace("kernels/counted.cu", "k.cu"))
    cs = load_contracts(tmp_path / "contracts", tmp_path)
    labels = [lc.label for lc in barrier_launches(cs, Wiring(cs), cs.kernel("counted")) if lc.label.startswith("B = 1 ")]
    assert labels == [
        "B = 1 (labels = 0 in every row; count = 0 everywhere)",
        "B = 1 (labels = -1 in every row; count = 1 everywhere)",
        "B = 1 (labels = 0, -1 in turn; count = 0, 1 in turn)",
        "B = 1 (labels = 0 in every row; count = 1 everywhere)",
        "B = 1 (labels = 0 in every row; count = 0, 1 in turn)",
        "B = 1 (labels = -1 in every row; count = 0 everywhere)",
        "B = 1 (labels = -1 in every row; count = 0, 1 in turn)",
        "B = 1 (labels = 0, -1 in turn; count = 0 everywhere)",
        "B = 1 (labels = 0, -1 in turn; count = 1 everywhere)",
    ]
    # three inputs of three patterns: all 27 pairs in 9 rows; one input: its three patterns
    rows = _covering([3, 3, 3])
    assert len(rows) == 9 and {(a, b, r[a], r[b]) for r in rows for a in range(3) for b in range(a + 1, 3)} == {
        (a, b, x, y) for a in range(3) for b in range(a + 1, 3) for x in range(3) for y in range(3)
    }
    assert _covering([3]) == [(0,), (1,), (2,)]
