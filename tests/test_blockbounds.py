"""Out-of-bounds accesses found by running a block over PTX (audit.cuda.blockbounds, rule OUT_OF_BOUNDS_ACCESS).

Small kernels compiled with the flags of the build (``-arch=sm_90 -ptx -O3 -lineinfo -std=c++17``), each
run at a launch whose pointer parameters are buffers of a known extent: every access past a buffer, a
static shared array or the dynamic shared memory must be found with its thread, block, element and
extent; each correct counterpart must stay clean; what is not known (an optional pointer, an index loaded
from memory) must not be reported.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from audit.cuda.barriers import BlockLaunch
from audit.cuda.blockbounds import OutOfBounds, buffer_base
from audit.cuda.blocksim import analyse_bounds, find_out_of_bounds
from audit.cuda.cache import AnalysisCache
from nvcc_flags import compile_ptx as _ptx

NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")



def _buf(pos: int, name: str, numel: int, shape: str = "[n]", size: int = 4, wr: tuple | None = None) -> tuple:
    return (pos, name, numel * size, size, f"shape {shape}, f32", wr)


def _launch(n: int, block: int | tuple[int, int, int], grid: int | tuple[int, int, int], buffers: tuple,
            dynamic: int | None = 0, shared_text: str | None = None, label: str | None = None) -> BlockLaunch:
    b = (block, 1, 1) if isinstance(block, int) else block
    g = (grid, 1, 1) if isinstance(grid, int) else grid
    params = tuple(sorted({(bf[0], buffer_base(bf[0])) for bf in buffers} | {(2, n)}))
    return BlockLaunch(params, b, g, dynamic, label or f"n = {n}", buffers, shared_text)


def _found(ptx: str, launch: BlockLaunch) -> list[tuple]:
    """(memory, name, access, line, threads, first element) of each finding of entry "k"."""
    return [(o.memory, o.name, o.access, o.line, o.threads, o.start // max(o.element, 1))
            for o in find_out_of_bounds(ptx, "k", [launch])]


# x [n] -> y [n]; the third parameter is n
AFFINE = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i BOUND n) y[i] = 2.0f * x[i] + 1.0f;
}
"""


@NVCC
def test_an_off_by_one_guard_writes_past_the_end_and_its_message_says_where(tmp_path: Path) -> None:
    """candle's affine kernel, seeded: ``i <= n``. At n = 131 with blocks of 64, the last block's thread 3
    is index 131: it reads x[131] and writes y[131]."""
    launch = _launch(131, 64, 3, (_buf(0, "x", 131), _buf(1, "y", 131)), label="n = 131")
    bad = _ptx(tmp_path, AFFINE.replace("BOUND", "<="), "bad.cu")
    assert _found(bad, launch) == [("global", "x", "read", 3, (3, 0, 0, 2, 0, 0), 131),
                                   ("global", "y", "write", 3, (3, 0, 0, 2, 0, 0), 131)]
    write = find_out_of_bounds(bad, "k", [launch])[1]
    assert write.message("k", "kernels/affine.cu") == (
        'Kernel "k" writes past the end of "y" (kernels/affine.cu:3, ' + write.instruction + "): at n = 131, "
        "threadIdx (3, 0, 0) of blockIdx (2, 0, 0) writes y[131], but \"y\" holds 131 elements (shape [n], f32), "
        "so it corrupts another allocation, or faults; bound the index by the buffer's extent (or correct the "
        "contract's shape).")
    good = analyse_bounds(_ptx(tmp_path, AFFINE.replace("BOUND", "<"), "good.cu"), "k", launch)
    assert (good.accesses, good.complete) == ((), True)


@NVCC
def test_a_grid_stride_loop_is_clean_and_its_off_by_one_is_found(tmp_path: Path) -> None:
    body = """extern "C" __global__ void k(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i BOUND n; i += blockDim.x * gridDim.x)
        y[i] = x[i] * x[i];
}
"""
    launch = _launch(1000, 128, 2, (_buf(0, "x", 1000), _buf(1, "y", 1000)))
    good = analyse_bounds(_ptx(tmp_path, body.replace("BOUND", "<"), "good.cu"), "k", launch)
    assert (good.accesses, good.complete) == ((), True)
    # 1000 = 3 * 256 + 232: the last block's thread 232 - 128 = 104 reaches i = 1000 on its fourth pass
    bad = _found(_ptx(tmp_path, body.replace("BOUND", "<="), "bad.cu"), launch)
    assert [(f[1], f[2], f[4], f[5]) for f in bad] == [("x", "read", (104, 0, 0, 1, 0, 0), 1000),
                                                      ("y", "write", (104, 0, 0, 1, 0, 0), 1000)]


ROW = """extern "C" __global__ void k(const float* x, float* out, int C) {
    // one block per row of x [B, C]; the block is wider than a row
    int row = blockIdx.x, tid = threadIdx.x;
    GUARD out[row * C + tid] = x[row * C + tid] * 0.5f;
}
"""


@NVCC
def test_a_tail_block_reading_past_its_row_is_found_and_the_guarded_one_is_clean(tmp_path: Path) -> None:
    """llm.c's softmax_autoregressive_backward_kernel6 pattern: ``row * C + tid`` with tid up to blockDim.x
    > C. Block 0 reads into row 1 (inside the buffer: not an out-of-bounds access); the last row's block
    reads past the end of x."""
    launch = _launch(48, 64, 3, (_buf(0, "x", 3 * 48, "[B, C]"), _buf(1, "out", 3 * 48, "[B, C]")), label="B = 3, C = 48")
    bad = _found(_ptx(tmp_path, ROW.replace("GUARD", ""), "bad.cu"), launch)
    assert [(f[1], f[2], f[4], f[5]) for f in bad] == [("x", "read", (48, 0, 0, 2, 0, 0), 144),
                                                      ("out", "write", (48, 0, 0, 2, 0, 0), 144)]
    good = analyse_bounds(_ptx(tmp_path, ROW.replace("GUARD", "if (tid < C)"), "good.cu"), "k", launch)
    assert (good.accesses, good.complete) == ((), True)


@NVCC
def test_a_2d_parameter_is_one_buffer_of_its_element_count(tmp_path: Path) -> None:
    """x [B, D] with a 2-D block: a column loop ``d <= D`` leaves each row by one, which stays inside the
    buffer but on the last row, where it is found (flat index B * D)."""
    body = """extern "C" __global__ void k(const float* x, float* out, int D) {
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    float acc = 0.0f;
    for (int d = threadIdx.x; d BOUND D; d += blockDim.x) acc += x[b * D + d];
    out[b * blockDim.x + threadIdx.x] = acc;
}
"""
    bufs = (_buf(0, "x", 4 * 40, "[B, D] = [4, 40]"), _buf(1, "out", 4 * 32, "[B, 32]"))
    launch = _launch(40, (32, 2, 1), (1, 2, 1), bufs, label="B = 4, D = 40")
    (found,) = find_out_of_bounds(_ptx(tmp_path, body.replace("BOUND", "<="), "bad.cu"), "k", [launch])
    assert (found.name, found.access, found.threads, found.start // 4) == ("x", "read", (8, 1, 0, 0, 1, 0), 160)
    assert 'but "x" holds 160 elements (shape [B, D] = [4, 40], f32)' in found.message("k", "k.cu")
    assert _found(_ptx(tmp_path, body.replace("BOUND", "<"), "good.cu"), launch) == []


@NVCC
def test_an_isv_read_past_the_layout_is_found(tmp_path: Path) -> None:
    body = """extern "C" __global__ void k(const float* isv, float* out, int slot) {
    int t = threadIdx.x;
    if (t < 8) out[t] = isv[slot + t];
}
"""
    ptx = _ptx(tmp_path, body)
    isv = (0, "isv", 118 * 4, 4, "the ISV layout's total_dim = 118, f32", None)
    at = lambda slot: _launch(slot, 32, 1, (isv, _buf(1, "out", 8)), label=f"slot = {slot}")  # noqa: E731
    assert _found(ptx, at(110)) == []  # slots 110 .. 117: the last eight
    assert _found(ptx, at(112)) == [("global", "isv", "read", 3, (6, 0, 0, 0, 0, 0), 118)]


EXTERN = """extern "C" __global__ void k(const float* x, float* out, int C) {
    extern __shared__ float buf[];  // C floats (shared_bytes = "C * 4")
    for (int i = threadIdx.x; i BOUND C; i += blockDim.x) buf[i] = i < C ? x[blockIdx.x * C + i] : 0.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int i = 0; i < C; ++i) s += buf[i];
        out[blockIdx.x] = s;
    }
}
"""


@NVCC
def test_dynamic_shared_memory_is_checked_against_the_contracts_shared_bytes(tmp_path: Path) -> None:
    bufs = (_buf(0, "x", 2 * 100, "[B, C]"), _buf(1, "out", 2, "[B]"))
    launch = _launch(100, 64, 2, bufs, dynamic=400, shared_text="C * 4", label="C = 100")
    bad = find_out_of_bounds(_ptx(tmp_path, EXTERN.replace("BOUND", "<="), "bad.cu"), "k", [launch])
    assert [(o.memory, o.name, o.access, o.line, o.threads[:3], o.start) for o in bad] == [
        ("dynamic", "buf", "write", 3, (36, 0, 0), 400)]
    assert ("writes past the end of dynamic shared memory (\"buf\")" in bad[0].message("k", "k.cu")
            and 'but the launch gives 400 bytes of dynamic shared memory (shared_bytes = "C * 4")' in bad[0].message("k", "k.cu"))
    good = analyse_bounds(_ptx(tmp_path, EXTERN.replace("BOUND", "<"), "good.cu"), "k", launch)
    assert (good.accesses, good.complete) == ((), True)
    # no shared_bytes in the contract: the dynamic region's size is not known, so it is not checked
    unknown = _launch(100, 64, 2, bufs, dynamic=0, label="C = 100")
    assert _found(_ptx(tmp_path, EXTERN.replace("BOUND", "<="), "bad.cu"), unknown) == []


@NVCC
def test_a_static_shared_array_read_at_a_computed_index_past_its_size_is_found(tmp_path: Path) -> None:
    body = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[64];
    __shared__ float t[64];
    int tid = threadIdx.x;
    s[tid] = x[blockIdx.x * 64 + tid];
    t[tid] = 1.0f;
    __syncthreads();
    out[blockIdx.x * 64 + tid] = s[(tid * 5) % MOD] + t[tid];
}
"""
    launch = _launch(128, 64, 2, (_buf(0, "x", 128), _buf(1, "out", 128)))
    (found,) = find_out_of_bounds(_ptx(tmp_path, body.replace("MOD", "67"), "bad.cu"), "k", [launch])
    # thread 13: 65 % 67 = 65, past s's 64 floats (into what lies between s and t, or t itself on a GPU)
    assert (found.memory, found.name, found.access, found.line, found.threads, found.start) == (
        "shared", "s", "read", 8, (13, 0, 0, 0, 0, 0), 260)
    assert 'reads past the end of shared array "s"' in found.message("k", "k.cu") and 'but "s" holds 256 bytes' in found.message("k", "k.cu")
    assert _found(_ptx(tmp_path, body.replace("MOD", "64"), "good.cu"), launch) == []


CP_ASYNC = """extern "C" __global__ void k(const float* x, float* out, int n) {
    // float4 chunks of x [n] staged through shared memory with cp.async
    __shared__ __align__(16) float s[64 * 4];
    int tid = threadIdx.x;
    int i = (blockIdx.x * blockDim.x + tid) * 4;
    unsigned sa = (unsigned)__cvta_generic_to_shared(&s[tid * 4]);
    int bytes = i < n ? 16 : 0;
    COPY
    asm volatile("cp.async.commit_group;\\ncp.async.wait_group 0;\\n" ::: "memory");
    __syncthreads();
    if (i < n) out[i] = s[tid * 4] + s[tid * 4 + 3];
}
"""
ZFILL = 'asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"(sa), "l"(x + i), "r"(bytes));'
FULL = 'asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" :: "r"(sa), "l"(x + i));'


@NVCC
def test_cp_async_reads_its_src_size_bytes_only(tmp_path: Path) -> None:
    """The race analysis gives up on cp.async; the bounds go on: a lane past the end that copies 0 source
    bytes (zero-fill) reads nothing, one that copies 16 reads past x."""
    launch = _launch(524, 64, 3, (_buf(0, "x", 524), _buf(1, "out", 524)), label="n = 524")
    good = analyse_bounds(_ptx(tmp_path, CP_ASYNC.replace("COPY", ZFILL), "good.cu"), "k", launch)
    assert (good.accesses, good.complete) == ((), True)
    (found,) = find_out_of_bounds(_ptx(tmp_path, CP_ASYNC.replace("COPY", FULL), "bad.cu"), "k", [launch])
    # 524 floats are 131 chunks: the last block's thread 3 copies chunk 131, x[524..527]
    assert (found.name, found.access, found.threads, found.start, found.width) == ("x", "read", (3, 0, 0, 2, 0, 0), 2096, 16)
    assert found.element_text() == "x[524..527]" and found.instruction.startswith("cp.async.cg.shared.global")


@NVCC
def test_an_optional_pointer_and_a_loaded_index_are_not_checked(tmp_path: Path) -> None:
    body = """extern "C" __global__ void k(const int* idx, float* y, int n, const float* bias) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = y[idx[i]];              // an index loaded from memory: not known
        if (bias) v += bias[i + 1000];    // an optional pointer: no buffer, not checked
        y[i] = v;
    }
}
"""
    ptx = _ptx(tmp_path, body)
    launch = BlockLaunch(((0, buffer_base(0)), (1, buffer_base(1)), (2, 100)), (64, 1, 1), (2, 1, 1), 0, "n = 100",
                         (_buf(0, "idx", 100), _buf(1, "y", 100)))
    result = analyse_bounds(ptx, "k", launch)
    assert (result.accesses, result.complete) == ((), True)


@NVCC
def test_a_write_outside_the_write_range_is_found(tmp_path: Path) -> None:
    """logits [B, P] written in columns [0, V): a loop to P writes the padding someone else owns."""
    body = """extern "C" __global__ void k(const float* x, float* logits, int V) {
    int b = blockIdx.x;
    for (int j = threadIdx.x; j < BOUND; j += blockDim.x) logits[b * 64 + j] = x[b * 64 + j];
}
"""
    wr = (1, 64, 0, 50, "write_range axis 1 [0, V) = [0, 50)")
    bufs = (_buf(0, "x", 2 * 64, "[B, P]"), _buf(1, "logits", 2 * 64, "[B, P]", wr=wr))
    launch = _launch(50, 32, 2, bufs, label="V = 50")
    (found,) = find_out_of_bounds(_ptx(tmp_path, body.replace("BOUND", "64"), "bad.cu"), "k", [launch])
    assert (found.memory, found.name, found.threads, found.start // 4) == ("range", "logits", (18, 0, 0, 0, 0, 0), 50)
    assert found.message("k", "k.cu").startswith('Kernel "k" writes "logits" outside its write_range (k.cu:3, ')
    assert "(index 50 of write_range axis 1 [0, V) = [0, 50))" in found.message("k", "k.cu")
    assert _found(_ptx(tmp_path, body.replace("BOUND", "V"), "good.cu"), launch) == []


@NVCC
def test_a_block_the_race_analysis_gives_up_on_is_still_checked(tmp_path: Path) -> None:
    """A loop on loaded data around a barrier stops the race analysis; the accesses after it are still
    checked (the loop's threads go on at its exit with what it wrote unknown)."""
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
    out[blockIdx.x * 256 + tid + 1] = v;
}
"""
    from audit.cuda.blocksim import analyse_block

    ptx = _ptx(tmp_path, body)
    launch = _launch(512, 256, 2, (_buf(0, "x", 512), _buf(1, "out", 512)))
    assert not analyse_block(ptx, "k", launch).complete
    result = analyse_bounds(ptx, "k", launch)
    assert result.complete and [(o.name, o.access, o.line, o.threads) for o in result.accesses] == [
        ("out", "write", 11, (255, 0, 0, 1, 0, 0))]


def test_launches_give_each_pointer_its_contract_extent_and_an_odd_size() -> None:
    """The OUT_OF_BOUNDS_ACCESS fixture chain: every tensor's extent at B = 1 and B = 131 (and B = 257, just
    past the grid's divisor, which is too large for two whole tiles of it), the ISV's from
    its layout; an optional parameter is never a buffer (unknown, or NULL where so bound); a range that
    ends at an even number gets a third launch at an odd size."""
    from dataclasses import replace

    from audit.cuda.static import barrier_launches
    from audit.graph import Wiring
    from audit.load import load_contracts

    root = Path(__file__).resolve().parent / "data" / "rules" / "OUT_OF_BOUNDS_ACCESS" / "good"
    cs = load_contracts(root / "contracts", root)
    launches = barrier_launches(cs, Wiring(cs), cs.kernel("make_label"))
    assert [lc.label for lc in launches] == ["B = 1", "B = 131", "B = 257"]  # 257: just past ceil_div(B, 256)
    assert [(b[1], b[2]) for b in launches[1].buffers] == [("y", 524), ("label", 524), ("isv", cs.isv.total_dim * 4)]
    assert dict(launches[1].params)[0] == buffer_base(0) and dict(launches[1].params)[4] == 131
    # backward's optional dW_partial (parameter 3): unknown where its step binds a buffer (with a twin that
    # gives it), NULL where a step binds NULL; no schedule launching the kernel, NULL and given in launches apart
    backward = cs.kernel("backward")
    assert [p.name for p in backward.tensors if p.optional] == ["dW_partial"]
    launches = barrier_launches(cs, Wiring(cs), backward)
    assert [dict(lc.params).get(3) for lc in launches] == [None, None, 0]  # a second schedule binds NULL
    assert all("dW_partial" not in {b[1] for b in lc.buffers} for lc in launches)
    assert [lc.given is not None and dict(lc.given.params)[3] == buffer_base(3) for lc in launches] == [True, True, False]
    alone = barrier_launches(cs, None, backward)
    assert [dict(lc.params)[3] for lc in alone] == [0, buffer_base(3), 0, buffer_base(3)]
    assert [lc.label for lc in alone] == ["B = 1, D = 64, H = 32", "B = 1, D = 64, H = 32, dW_partial given",
                                          "B = 131, D = 64, H = 32", "B = 131, D = 64, H = 32, dW_partial given"]
    assert all(lc.given is None for lc in alone)
    # B in [1, 64]: 1 and 64, then 61 (a prime: no tile divides it)
    dims = tuple(replace(d, max=64) if d.name == "B" else d for d in cs.dims)
    small = replace(cs, dims=dims)
    assert [lc.label for lc in barrier_launches(small, Wiring(small), small.kernel("make_label"))] == ["B = 1", "B = 64", "B = 61"]


def test_message_forms_and_the_cache_round_trip(tmp_path: Path) -> None:
    before = OutOfBounds("k", 9, 1, "helper.cuh:4", "ld.global.f32 %f1, [%rd4]", "global", "x", "read", -8, 4, 400, 4,
                         (0, 0, 0, 0, 0, 0), "n = 100", "shape [n] = [100], f32")
    assert before.message("k", "k.cu") == (
        'Kernel "k" reads before the start of "x" (k.cu:9, inlined from helper.cuh:4, ld.global.f32 %f1, [%rd4]): at '
        'n = 100, threadIdx (0, 0, 0) of blockIdx (0, 0, 0) reads x[-2], but "x" holds 100 elements (shape [n] = '
        "[100], f32), so it reads another allocation's data, or faults; bound the index by the buffer's extent (or "
        "correct the contract's shape).")
    straddle = OutOfBounds("k", 9, 1, None, "st.global.v4.f32 [%rd4], {%f1, %f2, %f3, %f4}", "global", "y", "write",
                           392, 16, 400, 4, (1, 0, 0, 3, 0, 0), "n = 100", "shape [n] = [100], f32")
    assert "writes across the end of \"y\"" in straddle.message("k", "k.cu") and "writes y[98..101]" in straddle.message("k", "k.cu")
    cache = AnalysisCache(tmp_path)
    assert cache.results("out-of-bounds", ["ptx", "k"], OutOfBounds, lambda: [before, straddle]) == [before, straddle]
    assert AnalysisCache(tmp_path).results("out-of-bounds", ["ptx", "k"], OutOfBounds, lambda: []) == [before, straddle]


def test_a_shared_overrun_on_a_line_shared_array_bounds_reports_is_left_to_it() -> None:
    from audit.cuda.static import _reported_at

    shared = OutOfBounds("k", 12, 1, None, "st.shared.f32 [%r3], %f1", "shared", "s", "write", 256, 4, 256, 4,
                         (64, 0, 0, 0, 0, 0), "n = 1", "")
    lines = {("kernels/k.cu", 12)}
    assert _reported_at(shared, "kernels/k.cu", lines)
    assert not _reported_at(shared, "kernels/other.cu", lines)
    inlined = OutOfBounds(**{**shared.__dict__, "line": 30, "origin": "tile.cuh:7"})
    assert _reported_at(inlined, "kernels/k.cu", {("kernels/tile.cuh", 7)})
    glob = OutOfBounds(**{**shared.__dict__, "memory": "global"})
    assert not _reported_at(glob, "kernels/k.cu", lines)  # a parameter's buffer is this rule's alone


# -- bit-field and logic ops (bfe, bfi, lop3, prmt) ---------------------------------------------------------

def _bits_ref_bfe(a: int, pos: int, length: int, bits: int, signed: bool) -> int:
    """The PTX ISA's bfe, bit by bit."""
    a &= (1 << bits) - 1
    pos, length, msb = pos & 0xFF, length & 0xFF, bits - 1
    sbit = (a >> min(pos + length - 1, msb)) & 1 if signed and length else 0
    return sum(((a >> (pos + i)) & 1 if i < length and pos + i <= msb else sbit) << i for i in range(bits))


def _bits_ref_bfi(a: int, b: int, pos: int, length: int, bits: int) -> int:
    """The PTX ISA's bfi, bit by bit."""
    f = b & ((1 << bits) - 1)
    pos, length = pos & 0xFF, length & 0xFF
    for i in range(length):
        if pos + i > bits - 1:
            break
        f = (f & ~(1 << (pos + i))) | (((a >> i) & 1) << (pos + i))
    return f


def test_bfe_and_bfi_follow_the_ptx_isa_bit_by_bit() -> None:
    import random

    from audit.cuda.blocksim import _bfe, _bfi

    rng = random.Random(7)
    for bits in (32, 64):
        for _ in range(2000):
            a, b = rng.getrandbits(bits), rng.getrandbits(bits)
            pos, length = rng.choice([0, 1, 3, bits - 1, bits, bits + 5, 255, 300, rng.randrange(256)]), rng.choice([0, 1, 4, bits, 200, rng.randrange(256)])
            for signed in (False, True):
                assert _bfe(a, pos, length, bits, signed) == _bits_ref_bfe(a, pos, length, bits, signed), (a, pos, length, bits, signed)
            assert _bfi(a, b, pos, length, bits) == _bits_ref_bfi(a, b, pos, length, bits), (a, b, pos, length, bits)


def test_lop3_and_prmt_follow_the_ptx_isa() -> None:
    """lop3's look-up table over (a, b, c) bit triples and prmt's byte selection with sign replication, on
    the run's own arrays (a fake block holding the operands)."""
    import random

    import numpy as np

    from audit.cuda.blocksim import _Block

    rng = random.Random(3)
    n = 64
    vals = {f"%r{i}": np.array([rng.getrandbits(32) for _ in range(n)], np.int64) for i in range(3)}

    class Fake:
        def _get(self, op, idx, bits):
            if op in vals:
                return vals[op], np.ones(n, bool)
            return np.full(n, int(op, 0), np.int64), np.ones(n, bool)

    idx = np.arange(n)
    a, b, c = ([int(v) for v in vals[f"%r{i}"]] for i in range(3))
    for lut in (0x00, 0xFF, 0xF0, 0xCC, 0xAA, 0x96, 0xE8, 0x80, 0x1E, 0x6A):
        (got, known), = _Block._bitfield(Fake(), "lop3", ["lop3", "b32"], ("%d", "%r0", "%r1", "%r2", str(lut)), idx, 32, False)
        want = [sum((((lut >> (((x >> i) & 1) << 2 | ((y >> i) & 1) << 1 | ((z >> i) & 1))) & 1) << i) for i in range(32))
                for x, y, z in zip(a, b, c)]
        assert got.tolist() == want and known.all(), hex(lut)
    for sel in (0x3210, 0x7654, 0x0123, 0x4444, 0x8888, 0xF0E1, 0x5B3A):
        (got, _), = _Block._bitfield(Fake(), "prmt", ["prmt", "b32"], ("%d", "%r0", "%r1", str(sel)), idx, 32, False)
        want = []
        for x, y in zip(a, b):
            pool = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
            r = 0
            for i in range(4):
                s = (sel >> (4 * i)) & 0xF
                byte = pool[s & 7]
                r |= ((0xFF if byte & 0x80 else 0) if s & 8 else byte) << (8 * i)
            want.append(r)
        assert got.tolist() == want, hex(sel)
    # the modes and lop3's predicate form are not read: their results stay unknown
    assert _Block._bitfield(Fake(), "prmt", ["prmt", "b32", "f4e"], ("%d", "%r0", "%r1", "%r2"), idx, 32, False) is None


# a guard packed into a word with bfi and read back with bfe, lop3 and prmt (as CUTLASS's predicated tile
# iterators pack theirs): the store's guard is known only where the run computes all four
PACKED = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned packed, bit, same, picked;
    asm volatile("bfi.b32 %0, %1, %2, 3, 1;" : "=r"(packed) : "r"((unsigned)(i BOUND n)), "r"(0x5u));
    asm volatile("bfe.u32 %0, %1, 3, 1;" : "=r"(bit) : "r"(packed));
    asm volatile("lop3.b32 %0, %1, %2, %3, 0xF0;" : "=r"(same) : "r"(bit), "r"(0x77u), "r"(0x99u));
    asm volatile("prmt.b32 %0, %1, %2, 0x7650;" : "=r"(picked) : "r"(same), "r"(0u));
    if (picked) y[i] = 2.0f * x[i];
}
"""


@NVCC
def test_a_guard_packed_with_bfi_and_read_with_bfe_lop3_prmt_is_known(tmp_path: Path) -> None:
    bufs = (_buf(0, "x", 131), _buf(1, "y", 131))
    bad = _ptx(tmp_path, PACKED.replace("BOUND", "<="), "bad.cu")
    assert [(f[0], f[1], f[2], f[5]) for f in _found(bad, _launch(131, 256, 1, bufs))] == [("global", "x", "read", 131), ("global", "y", "write", 131)]
    good = _ptx(tmp_path, PACKED.replace("BOUND", "<"), "good.cu")
    assert _found(good, _launch(131, 256, 1, bufs)) == []
    assert "bfi.b32" in bad and "bfe.u32" in bad and "lop3.b32" in bad and "prmt.b32" in bad


@pytest.mark.nvcc
@pytest.mark.cutlass
@NVCC
def test_the_cutlass_partial_read_past_dz_on_an_empty_chunk_is_found_and_the_shipped_one_is_clean(tmp_path: Path) -> None:
    """kernels/aux_weight_grad_partial_cutlass.cu ran CUTLASS's multistage GEMM on empty chunks (K = 0) until
    5 December 2026: its prologue's second stage copies rows 16 .. 31 of the chunk with the copy masks not
    cleared (compute-sanitizer memcheck on the H100: "Invalid __global__ read of size 4 bytes" at
    memory_sm80.h:171, block (0,0,0), at the contract's binding M = 9, N = 100, P = 3 and B = 1). The block
    run finds it (it follows the bfi-packed predicates to each copy's src-size); the shipped kernel, which
    writes a zero tile for an empty chunk, is clean there and where no chunk is empty."""
    import importlib.util

    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        pytest.skip("the nvidia-cutlass wheel is not installed (pip install -e \".[dev]\" installs it)")
    inc = Path(spec.origin).parent / "source" / "include"
    src = Path(__file__).resolve().parents[1] / "kernels" / "aux_weight_grad_partial_cutlass.cu"

    def ptx(old: int) -> str:
        out = tmp_path / f"partial{old}.ptx"
        subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-O3", "-lineinfo", "-std=c++17", f"-DAUX_WGRAD_CUTLASS_EMPTY_CHUNK_GEMM={old}",
                        "-I", str(src.parent), "-isystem", str(inc), str(src), "-o", str(out)], check=True, capture_output=True, text=True)
        return out.read_text()

    def launch(B: int, M: int, N: int, P: int) -> BlockLaunch:
        bufs = (_buf(0, "dz", B * M, "[B, M]"), _buf(1, "x", B * N, "[B, N]"), _buf(2, "ws", P * M * N, "[P, M, N]"), _buf(3, "wsb", P * M, "[P, M]"))
        params = tuple((i, buffer_base(i)) for i in range(4)) + ((4, B), (5, M), (6, N), (7, P))
        return BlockLaunch(params, (256, 1, 1), ((N + 127) // 128, (M + 127) // 128, P), 0, f"B = {B}, M = {M}, N = {N}, P = {P}", bufs)

    entry = "aux_weight_grad_partial_cutlass"
    old, shipped = ptx(1), ptx(0)
    found = find_out_of_bounds(old, entry, [launch(1, 9, 100, 3)])
    assert [(o.name, o.access, o.start // o.element, o.extent // o.element, o.origin) for o in found] == [
        ("dz", "read", 144, 9, "memory_sm80.h:171"), ("x", "read", 1600, 100, "memory_sm80.h:171")]
    assert find_out_of_bounds(shipped, entry, [launch(1, 9, 100, 3), launch(3, 9, 100, 3), launch(37, 130, 129, 7)]) == []
    # B = 37, P = 40: chunks 0, 13 and 26 are empty; memcheck on the H100 reported blocks 13 and 26 (block 0's
    # reads of rows 16 .. 31 stay inside dz there); the run takes the last block of block 0's path, 26
    mid = find_out_of_bounds(old, entry, [launch(37, 4, 100, 40)])
    assert [(o.name, o.origin) for o in mid] == [("dz", "memory_sm80.h:378"), ("x", "memory_sm80.h:378")]
    assert all("of blockIdx (0, 0, 26)" in o.message("aux_weight_grad_partial", "k.cu") for o in mid)
    assert find_out_of_bounds(shipped, entry, [launch(37, 4, 100, 40)]) == []


def test_block_runs_also_take_the_contracts_verify_bindings() -> None:
    """The schedules bind the wide partial to M = 256 / 128, N = 256 and P <= B / 8 (no chunk is ever
    empty); its contract's verify bindings name the shapes it must also handle. The block runs take those
    too, at the least B, so an empty chunk (P > B) is run statically: where the K = 0 read was found."""
    from audit.api import load_project
    from audit.cuda.static import MAX_BINDING_LAUNCHES, barrier_launches, binding_launches
    from audit.graph import Wiring

    cfg, cs = load_project(Path(__file__).resolve().parents[1])
    wiring = Wiring.of(cs)
    k = cs.kernel("aux_weight_grad_partial")
    labels = [launch.label for launch in barrier_launches(cs, wiring, k)]
    assert labels[:3] == ["B = 1, M = 256, N = 256, P = 1", "B = 131, M = 256, N = 256, P = 9", "B = 1, M = 128, N = 256, P = 1"]
    assert labels[3:] == ["B = 1, M = 8, N = 129, P = 5", "B = 1, M = 9, N = 100, P = 3", "B = 1, M = 130, N = 129, P = 7",
                          "B = 1, M = 4, N = 100, P = 40", "B = 1, M = 132, N = 260, P = 7"]
    assert len(k.verify.bindings) == MAX_BINDING_LAUNCHES == 5
    # a kernel without bindings runs where it ran before
    trunk = cs.kernel("aux_trunk_forward")
    assert not trunk.verify.bindings and binding_launches(cs, wiring, trunk, [{"B": 1}]) == []


# -- blocks other than the first and the last ----------------------------------------------------------------

# a middle block takes a path of its own (BOTH: blocks 0 and the last take the guarded one)
MIDDLE_PATH = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * 64 + threadIdx.x;
    if (blockIdx.x == 2) {
        y[n + threadIdx.x] = 1.0f;
    } else if (i < n) {
        y[i] = x[i];
    }
}
"""
# the even blocks take one path: block 0 stays inside y, block 2 (the last even one, not the grid's last) does not
SAME_PATH = """extern "C" __global__ void k(const float* x, float* y, int n) {
    int i = blockIdx.x * 64 + threadIdx.x;
    if (blockIdx.x % 2 == 0) {
        y[i + 40] = x[threadIdx.x];
    } else if (i < n) {
        y[i] = x[i];
    }
}
"""


@NVCC
def test_a_middle_block_on_a_path_of_its_own_is_run(tmp_path: Path) -> None:
    from audit.cuda import blocksim

    ptx = _ptx(tmp_path, MIDDLE_PATH)
    launch = _launch(200, 64, 4, (_buf(0, "x", 200), _buf(1, "y", 200)))
    found = find_out_of_bounds(ptx, "k", [launch])
    assert [(o.name, o.access, o.start // o.element) for o in found] == [("y", "write", 200)]
    assert "blockIdx (2, 0, 0) writes y[200]" in found[0].message("k", "kernels/k.cu")
    # block 0 and the last alone (what the run took before) do not see it
    grid = blocksim.MAX_SIGNATURE_GRID
    try:
        blocksim.MAX_SIGNATURE_GRID = 0
        assert find_out_of_bounds(_ptx(tmp_path, MIDDLE_PATH, "k2.cu"), "k", [launch]) == []
    finally:
        blocksim.MAX_SIGNATURE_GRID = grid


@NVCC
def test_the_last_block_of_a_path_block_0_takes_is_run(tmp_path: Path) -> None:
    ptx = _ptx(tmp_path, SAME_PATH)
    found = find_out_of_bounds(ptx, "k", [_launch(200, 64, 4, (_buf(0, "x", 200), _buf(1, "y", 200)))])
    assert [(o.name, o.access) for o in found] == [("y", "write")]
    assert "blockIdx (2, 0, 0)" in found[0].message("k", "kernels/k.cu")
    # the same with the guard on that path: clean
    assert find_out_of_bounds(_ptx(tmp_path, SAME_PATH.replace("y[i + 40] = x[threadIdx.x];", "if (i + 40 < n) y[i + 40] = x[threadIdx.x];"), "g.cu"),
                              "k", [_launch(200, 64, 4, (_buf(0, "x", 200), _buf(1, "y", 200)))]) == []


def test_a_kernels_block_launches_are_computed_once_per_wiring(monkeypatch) -> None:
    """Seven rules and notes ask for each kernel's launches in one check: they are computed once per wiring
    (and again for another contract object of the same name)."""
    import dataclasses

    from audit.api import load_project
    from audit.cuda import static
    from audit.graph import Wiring

    cfg, cs = load_project(Path(__file__).resolve().parents[1])
    wiring = Wiring.of(cs)
    wiring.__dict__.pop("_block_launches", None)
    calls: list[str] = []
    real = static.barrier_launches
    monkeypatch.setattr(static, "barrier_launches", lambda cs, w, k: calls.append(k.name) or real(cs, w, k))
    k = cs.kernel("aux_weight_grad_partial")
    first = static._block_launches(cs, wiring, k)
    assert static._block_launches(cs, wiring, k) == first and calls == ["aux_weight_grad_partial"]
    other = dataclasses.replace(k, doc="another contract object")
    assert static._block_launches(cs, wiring, other) == first and calls == ["aux_weight_grad_partial"] * 2
    static._block_launches(cs, None, k)
    static._block_launches(cs, None, k)
    assert len(calls) == 4  # no wiring (no schedule binds the dims): nothing kept, computed each time


# a matrix product whose tile of B is loaded at A's offset (cuda-samples' MatrixMulAsyncCopyLargeChunk,
# `&B[a + wA * threadIdx.y + t4x]`): inside B only while A has no more rows than B has columns
WRONG_B_TILE = """extern "C" __global__ void k(const float* A, const float* B, float* C, int wA, int wB) {
    int row = blockIdx.y * 4 + threadIdx.y, col = blockIdx.x * 4 + threadIdx.x;
    float acc = 0.0f;
    for (int a = 0; a < wA; a += 4)
        acc += A[row * wA + a + threadIdx.x] * B[row * wA + a + threadIdx.x];
    C[row * wB + col] = acc;
}
"""


@NVCC
def test_block_runs_also_take_the_contracts_small_verify_cases(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block runs give every runtime dim one value (its least, then 131): a read that leaves its buffer
    only where two dims differ (hA > wB) is never run there. The runs with the dims apart find it (the
    cuda-samples matrix product that loads B's tile at A's offset, with no case named); and, those runs
    left out, a verify case that names such sizes does: the block runs take the small ones (every value
    at most CASE_DIM_MAX)."""
    from audit.cli import main
    from audit.cuda import static

    root = tmp_path / "p"
    (root / "contracts").mkdir(parents=True)
    (root / "wireup.toml").write_text('arch = "sm_90"\n')
    (root / "k.cu").write_text(WRONG_B_TILE)
    contract = (
        "[dims]\nhA = { min = 4, max = 4096 }\nwA = { min = 4, max = 4096 }\nwB = { min = 4, max = 4096 }\n"
        '[[kernel]]\nname = "k"\nsource = "k.cu"\nstage = "forward"\ngrid = ["wB // 4", "hA // 4", 1]\n'
        'block = [4, 4, 1]\nrequires = ["hA % 4 == 0", "wA % 4 == 0", "wB % 4 == 0"]\n'
        'params = [\n  { name = "A", dtype = "f32", shape = ["hA", "wA"], role = "in" },\n'
        '  { name = "B", dtype = "f32", shape = ["wA", "wB"], role = "in" },\n'
        '  { name = "C", dtype = "f32", shape = ["hA", "wB"], role = "out" },\n'
        '  { name = "wA", kind = "scalar", dtype = "i32", value = "wA" },\n'
        '  { name = "wB", kind = "scalar", dtype = "i32", value = "wB" },\n]\n'
    )
    (root / "contracts" / "k.toml").write_text(contract)
    assert main(["check", "--root", str(root), "--select", "OUT_OF_BOUNDS_ACCESS"]) == 1
    out = capsys.readouterr().out
    assert 'reads past the end of "B"' in out and "at wA = 96, wB = 68, hA = 132," in out  # the dims apart
    monkeypatch.setattr(static, "_apart", lambda *args: [])
    assert main(["check", "--root", str(root), "--select", "OUT_OF_BOUNDS_ACCESS"]) == 0
    capsys.readouterr()
    (root / "contracts" / "k.toml").write_text(contract + '[kernel.verify]\ncases = ["hA=8,wA=4,wB=4"]\n')
    assert main(["check", "--root", str(root), "--select", "OUT_OF_BOUNDS_ACCESS"]) == 1
    out = capsys.readouterr().out
    assert 'reads past the end of "B"' in out and "hA = 8" in out
    # a case past CASE_DIM_MAX is left to verify
    from audit.cuda.static import CASE_DIM_MAX

    big = f'[kernel.verify]\ncases = ["hA={CASE_DIM_MAX + 4 - CASE_DIM_MAX % 4},wA=4,wB=4"]\n'
    (root / "contracts" / "k.toml").write_text(contract + big)
    assert main(["check", "--root", str(root), "--select", "OUT_OF_BOUNDS_ACCESS"]) == 0
    # a dim the kernel does not name (another kernel's) may be large: a case gives every runtime dim a value
    other = contract.replace("[dims]\n", "[dims]\nn = { min = 1, max = 1048576 }\n")
    (root / "contracts" / "k.toml").write_text(other + '[kernel.verify]\ncases = ["hA=8,wA=4,wB=4,n=65536"]\n')
    assert main(["check", "--root", str(root), "--select", "OUT_OF_BOUNDS_ACCESS"]) == 1


_LUM = """extern "C" __global__ void lum(const unsigned n_elements, const unsigned stride, const unsigned dims,
                                const float* __restrict__ p, float* __restrict__ out) {
    const unsigned i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i >= n_elements) return;
    const unsigned intra = i % stride;
    if (intra >= dims) { out[i] = 0; return; }
    float r = p[i - intra + 0], g = p[i - intra + 1], b = p[i - intra + 2];
    if (dims >= WIDE) { r += p[i - intra + 3]; g += p[i - intra + 4]; b += p[i - intra + 5]; }
    out[i] = 0.299f * r + 0.587f * g + 0.114f * b;
}
"""

_LUM_TOML = """[dims]
batch = { min = 1, max = 4096 }
stride = { min = 1, max = 128 }
dims = { min = DMIN, max = 128 }
[[kernel]]
name = "lum"
source = "k.cu"
stage = "loss"
grid = ["ceil_div(batch * stride, 128)", 1, 1]
block = [128, 1, 1]
requires = REQUIRES
params = [
  { name = "n_elements", kind = "scalar", dtype = "u32", value = "batch * stride" },
  { name = "stride", kind = "scalar", dtype = "u32", value = "stride" },
  { name = "dims", kind = "scalar", dtype = "u32", value = "dims" },
  { name = "p", dtype = "f32", shape = ["batch", "stride"], role = "in" },
  { name = "out", dtype = "f32", shape = ["batch", "stride"], role = "out" },
]
"""


@NVCC
@pytest.mark.parametrize(("dmin", "requires"), [("1", '["dims <= stride", "dims >= 3"]'), ("3", '["dims <= stride"]')])
def test_the_least_block_run_meets_assumptions_that_bound_and_relate_dims(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                          dmin: str, requires: str) -> None:  # fmt: skip
    """tiny-cuda-nn's luminance loss, seeded (``dims >= 6`` written ``dims >= 3``): rows of 3 to 5 channels read
    past the row. The least environment that meets ``dims >= 3`` (or a range from 3) and ``dims <= stride`` was
    found only at stride = dims = 128, where the reads stay inside: the seed passed. A bound an assumption
    names, and the values of the dim it relates to, are candidates now."""
    from audit.cli import main

    (tmp_path / "wireup.toml").write_text("")
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text(_LUM_TOML.replace("DMIN", dmin).replace("REQUIRES", requires))
    args = ["check", "--root", str(tmp_path), "--select", "OUT_OF_BOUNDS_ACCESS"]
    for wide, rc in (("6", 0), ("3", 1)):
        (tmp_path / "k.cu").write_text(_LUM.replace("WIDE", wide))
        capsys.readouterr()
        assert main(args) == rc
        out = capsys.readouterr().out
        assert ('reads past the end of "p"' in out and "at batch = 1, stride = 3, dims = 3" in out) == (rc == 1), out
