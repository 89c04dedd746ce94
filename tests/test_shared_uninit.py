"""Reads of shared memory no thread wrote, found by the block run (rule SHARED_UNINIT_READ).

Small kernels compiled with the flags of the build (``-arch=sm_90 -ptx -O3 -lineinfo -std=c++17``): each
read (or atomic update) of a shared element before any thread of its block wrote it must be found with its
line, thread and element; each correct counterpart must stay clean; a read of an element another thread
writes later in the same barrier interval is a race (SHARED_BARRIER_MISSING's), not this; and where a shared
store may go unseen (under a branch on loaded data) the record stops and says so instead of guessing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from nvcc_flags import NVCC
from nvcc_flags import compile_ptx as _ptx

from audit.cuda.barriers import BlockLaunch
from audit.cuda.blocksim import block_findings, find_barrier_races, find_shared_uninit_reads


def _launch(block: int, n: int = 256, grid: int = 2) -> BlockLaunch:
    return BlockLaunch(((2, n),), (block, 1, 1), (grid, 1, 1), None, f"n = {n}")


def _reads(ptx: str, launch: BlockLaunch) -> list[tuple[str, int | None, str, tuple[int, ...]]]:
    return [(r.order, r.line, r.element, r.threads) for r in find_shared_uninit_reads(ptx, "k", [launch])]


def _gaps(ptx: str, launch: BlockLaunch) -> dict[str, str]:
    gaps: dict[str, str] = {}
    block_findings(ptx, "k", [launch], False, (), gaps)
    return gaps


# one partial sum per warp, added up by warp 0: lanes past the block's warps must not read their slot
WARPS = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float part[32];
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < GUARD ? part[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
        if (threadIdx.x == 0) out[blockIdx.x] = w;
    }
}
"""


@NVCC
def test_a_warp_slot_read_past_the_blocks_warps_is_found(tmp_path: Path) -> None:
    """128 threads write part[0..3]; lane 4 of warp 0 reads part[4] (the seeded DeepSpeed softmax bug)."""
    bad = _ptx(tmp_path, WARPS.replace("GUARD", "32"), "bad.cu")
    assert _reads(bad, _launch(128)) == [("read", 8, 'part[4] (byte 16 of shared array "part")', (4, 0, 0))]
    (read,) = find_shared_uninit_reads(bad, "k", [_launch(128)])
    assert read.message("k", "k.cu") == (
        'Kernel "k" reads shared memory that no thread has written (k.cu:8, ' + read.second_instruction + "): at n = 256, "
        'threadIdx (4, 0, 0) reads part[4] (byte 16 of shared array "part") before any thread of the block writes it, so it '
        "gets whatever the block's shared memory held; write the element first, or keep the read to the elements that are written.")
    assert read.second_instruction.startswith("ld.shared.f32")
    assert find_barrier_races(bad, "k", [_launch(128)]) == []  # not a race: SHARED_BARRIER_MISSING stays quiet
    good = _ptx(tmp_path, WARPS.replace("GUARD", "blockDim.x / 32"), "good.cu")
    assert _reads(good, _launch(128)) == []
    assert _gaps(good, _launch(128))["uninit"] == ""
    # at 1024 threads every slot is written: the bad kernel is clean there, as the block run says
    assert _reads(bad, _launch(1024)) == []


HIST = """extern "C" __global__ void k(const int* x, int* out, int n) {
    __shared__ int bins[64];
    ZERO
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[x[i] & 63], 1);
    __syncthreads();
    if (threadIdx.x < 64) atomicAdd(&out[threadIdx.x], bins[threadIdx.x]);
}
"""


@NVCC
def test_histogram_bins_not_zeroed_are_found_in_the_block_past_the_data(tmp_path: Path) -> None:
    """Bins updated at a loaded index (unknown here) do not stop the record: an update only changes what is
    there. The grid's last block, past n, updates none and reads its bins back: unwritten where the zeroing
    is gone or covers half of them."""
    gone = _ptx(tmp_path, HIST.replace("ZERO", ""), "gone.cu")
    assert _reads(gone, _launch(256)) == [("read", 8, 'bins[0] (byte 0 of shared array "bins")', (0, 0, 0))]
    half = _ptx(tmp_path, HIST.replace("ZERO", "if (threadIdx.x < 32) bins[threadIdx.x] = 0;"), "half.cu")
    assert _reads(half, _launch(256)) == [("read", 8, 'bins[32] (byte 128 of shared array "bins")', (32, 0, 0))]
    good = _ptx(tmp_path, HIST.replace("ZERO", "if (threadIdx.x < 64) bins[threadIdx.x] = 0;"), "good.cu")
    assert _reads(good, _launch(256)) == []
    assert _gaps(good, _launch(256))["uninit"] == ""


COUNT = """extern "C" __global__ void k(const int* x, int* out, int n) {
    __shared__ int cnt[4];
    ZERO
    __syncthreads();
    atomicAdd(&cnt[threadIdx.x % 4], 1);
    __syncthreads();
    if (threadIdx.x < 4) out[blockIdx.x * 4 + threadIdx.x] = cnt[threadIdx.x];
}
"""


@NVCC
def test_an_atomic_update_of_an_unwritten_counter_is_found(tmp_path: Path) -> None:
    bad = _ptx(tmp_path, COUNT.replace("ZERO", ""), "bad.cu")
    (update,) = find_shared_uninit_reads(bad, "k", [_launch(64)])
    assert (update.order, update.line, update.element, update.threads) == ("atomic", 5, 'cnt[0] (byte 0 of shared array "cnt")', (0, 0, 0))
    # the place: line 5, inlined from the CUDA header's atomicAdd (whose line is the toolkit's)
    text = update.message("k", "k.cu")
    assert text.startswith('Kernel "k" updates shared memory that no thread has written (k.cu:5, inlined from device_atomic_functions.hpp:')
    assert text.endswith(", " + update.second_instruction + "): at n = 256, "
        'threadIdx (0, 0, 0) updates cnt[0] (byte 0 of shared array "cnt") atomically before any thread of the block writes it, '
        "so the update starts from whatever the block's shared memory held; set it (and __syncthreads()) before the first update.")
    good = _ptx(tmp_path, COUNT.replace("ZERO", "if (threadIdx.x < 4) cnt[threadIdx.x] = 0;"), "good.cu")
    assert _reads(good, _launch(64)) == []
    # an exchange writes whatever was there: no read, and the element is written after it
    exch = _ptx(tmp_path, COUNT.replace("ZERO", "").replace("atomicAdd(&cnt[threadIdx.x % 4], 1)", "atomicExch(&cnt[threadIdx.x % 4], 1)"), "exch.cu")
    assert _reads(exch, _launch(64)) == []


OWN = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    BODY
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x];
}
"""


@NVCC
def test_a_read_before_the_threads_own_write_is_found_and_a_race_is_left_to_the_barrier_rule(tmp_path: Path) -> None:
    own = _ptx(tmp_path, OWN.replace("BODY", "s[t] += x[t];"), "own.cu")
    assert _reads(own, _launch(256)) == [("read", 4, 's[0] (byte 0 of shared array "s")', (0, 0, 0))]
    good = _ptx(tmp_path, OWN.replace("BODY", "s[t] = x[t];"), "good.cu")
    assert _reads(good, _launch(256)) == []
    # thread t reads s[t + 1] before thread t + 1 writes it in the same interval: a race, not an unwritten read
    race = _ptx(tmp_path, OWN.replace("BODY", "float a = s[(t + 1) % blockDim.x]; s[t] = x[t] + a;"), "race.cu")
    assert _reads(race, _launch(256)) == []
    assert [(r.order, r.line) for r in find_barrier_races(race, "k", [_launch(256)])] == [("war", 4)]


DATA = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    if (x[t] > 0.0f) s[t] = x[t];
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = s[t];
}
"""


@NVCC
def test_a_store_under_a_branch_on_loaded_data_stops_the_record_and_says_so(tmp_path: Path) -> None:
    """Where the store happens is not known here (x is data): the reads after it prove nothing either way, so
    none is reported and the gap names the branch (the rule's note: not analysed to its end)."""
    ptx = _ptx(tmp_path, DATA)
    assert _reads(ptx, _launch(256)) == []
    gap = _gaps(ptx, _launch(256))["uninit"]
    assert gap.startswith("a shared store under a branch on an unknown value (@%p") and gap.endswith(", at n = 256")


LOOKUP = """extern "C" __global__ void k(const int* x, float* out, int n) {
    __shared__ float tab[64];
    if (threadIdx.x < 32) tab[threadIdx.x] = 1.0f;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tab[x[threadIdx.x] & 63];
}
"""


@NVCC
def test_a_shared_read_at_a_loaded_index_is_not_checked_and_says_so(tmp_path: Path) -> None:
    """tab[32..63] are never written, but which element the read takes is data: no finding, and the gap
    names the read (cuda-samples' histogram64 without its zeroing was missed in silence before)."""
    ptx = _ptx(tmp_path, LOOKUP)
    assert _reads(ptx, _launch(64)) == []
    gap = _gaps(ptx, _launch(64))["uninit"]
    assert gap.startswith("a shared read at an unknown address (ld.shared.f32 ") and gap.endswith(", at n = 256")


@NVCC
def test_a_kernel_that_does_not_compile_is_a_note_where_compile_error_is_not_selected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A check of the PTX rules alone passed a kernel whose source did not compile in silence (exit 0, no
    word: the llm.c trial, a stand-in header missing). Each PTX rule now notes each kernel it could not
    read; where COMPILE_ERROR runs too, its finding says it once and the notes are left out."""
    from audit.cli import main

    root = tmp_path / "p"
    shutil.copytree(Path(__file__).resolve().parent / "data" / "rules" / "SHARED_UNINIT_READ" / "good", root)
    chain = root / "kernels" / "chain.cu"
    text = chain.read_text()
    assert text.count("float s = 0.0f;") == 1
    chain.write_text(text.replace("float s = 0.0f;", "float s = 0.0f"))
    assert main(["check", "--root", str(root), "--select", "SHARED_UNINIT_READ"]) == 0  # notes fail nothing
    out = capsys.readouterr().out.splitlines()
    assert out[2] == ('contracts/kernels.toml:38: SHARED_UNINIT_READ (note) Kernel "loss" was not analysed: its source does not '
                      "compile (COMPILE_ERROR says why), so no finding here is no proof of none.")
    assert len(out) == 7
    assert main(["check", "--root", str(root), "--select", "SHARED_UNINIT_READ,COMPILE_ERROR"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" Kernel ")[0].split(": ", 1)[1] for line in out[:-1]] == ["COMPILE_ERROR"] * 6


@NVCC
def test_a_suppression_is_not_judged_by_a_kernel_its_rule_could_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A [[suppress]] entry without ``matching`` took the rule's note that it did not read the kernel (its
    source no longer compiles) as its finding: the note was hidden and the entry counted as used. The note
    is shown now, and the entry is not judged there (what it suppressed may be in the unread kernel); where
    the kernel compiles and the finding is gone, SUPPRESSION_UNUSED says so."""
    from audit.cli import main

    root = tmp_path / "p"
    shutil.copytree(Path(__file__).resolve().parent / "data" / "rules" / "SHARED_UNINIT_READ" / "bad", root)
    (root / "contracts" / "suppressions.toml").write_text('[[suppress]]\nrule = "SHARED_UNINIT_READ"\nkernel = "loss"\nreason = "reviewed"\n')
    assert main(["check", "--root", str(root), "--select", "SHARED_UNINIT_READ,SUPPRESSION_UNUSED"]) == 0  # the finding, suppressed
    assert "SUPPRESSION_UNUSED" not in capsys.readouterr().out
    chain = root / "kernels" / "chain.cu"
    text = chain.read_text()
    chain.write_text(text.replace("float s = 0.0f;", "float s = 0.0f", 1))
    assert main(["check", "--root", str(root), "--select", "SHARED_UNINIT_READ,SUPPRESSION_UNUSED"]) == 0
    out = capsys.readouterr().out
    assert 'SHARED_UNINIT_READ (note) Kernel "loss" was not analysed: its source does not compile' in out and "SUPPRESSION_UNUSED" not in out
    assert main(["check", "--root", str(root), "--select", "SUPPRESSION_UNUSED"]) == 0  # the rule run only to judge the entry
    assert "SUPPRESSION_UNUSED" not in capsys.readouterr().out
    # where COMPILE_ERROR runs too (no note then: its error says it), the entry is not judged either
    assert main(["check", "--root", str(root), "--select", "SHARED_UNINIT_READ,COMPILE_ERROR,SUPPRESSION_UNUSED"]) == 1
    out = capsys.readouterr().out
    assert "COMPILE_ERROR" in out and "SUPPRESSION_UNUSED" not in out and "was not analysed" not in out
    good = Path(__file__).resolve().parent / "data" / "rules" / "SHARED_UNINIT_READ" / "good" / "kernels" / "chain.cu"
    chain.write_text(good.read_text())
    assert main(["check", "--root", str(root), "--select", "SHARED_UNINIT_READ,SUPPRESSION_UNUSED"]) == 0  # warnings fail nothing
    assert ("SUPPRESSION_UNUSED (warning) The suppression of SHARED_UNINIT_READ about \"loss\" suppresses nothing: the rule finds "
            "nothing there any more; remove it.") in capsys.readouterr().out


SPEC = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[32];
    if (threadIdx.x < n) s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    float v = (n > GUARD) ? s[5] : 0.0f;
    out[threadIdx.x] = v;
}
"""


@NVCC
def test_a_load_nvcc_hoists_out_of_its_condition_counts_only_where_its_value_is_taken(tmp_path: Path) -> None:
    """nvcc loads s[5] of ``n > 5 ? s[5] : 0`` unconditionally and selects (a constant index cannot fault):
    at n = 3 the load reads an unwritten element whose value the selp drops, no bug (the llm.c trial's
    probe: a false finding before). With ``n > 2`` the value is taken at n = 3: a finding."""
    ptx = _ptx(tmp_path, SPEC.replace("GUARD", "5"), "guarded.cu")
    assert "selp.f32" in ptx  # the form this test is about (else nvcc branched, and it tests nothing)
    assert _reads(ptx, _launch(32, n=3)) == []
    taken = _ptx(tmp_path, SPEC.replace("GUARD", "2"), "taken.cu")
    assert _reads(taken, _launch(32, n=3)) == [("read", 5, 's[5] (byte 20 of shared array "s")', (0, 0, 0))]
    assert _reads(taken, _launch(32, n=8)) == []


# a double-buffered loop: each iteration fills the next stage (when there is a next tile) and prefetches
# from it; the last iteration's prefetch reads the stage no tile filled, into a value only a next iteration
# (or TAIL) would use
PIPELINE = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[2][64];
    const int t = threadIdx.x;
    s[0][t] = x[t];
    __syncthreads();
    float acc = 0.0f, cur = s[0][t];
    for (int it = 0; it < n; ++it) {
        if (it + 1 < n) s[(it + 1) % 2][t] = x[(it + 1) * 64 + t];
        __syncthreads();
        const float nxt = s[(it + 1) % 2][(t + 1) % 64];
        acc += cur;
        cur = nxt;
        __syncthreads();
    }
    out[blockIdx.x * 64 + t] = acc TAIL;
}
"""


@NVCC
def test_a_prefetch_no_instruction_uses_is_no_finding(tmp_path: Path) -> None:
    """sgemm_v3 of How_to_optimize_in_GPU (trial of 7 December): the last pass of a double-buffered loop loads
    the next fragment from the stage no tile filled, and exits; the value is never used, the read is harmless.
    A read counts where an instruction its thread runs uses what it loaded; its uses are followed through the
    instructions the run jumps, a ``mov`` passes the value on (the remainder loop rotates ``cur = nxt`` so);
    where the value is used after the loop, it is found."""
    unused = _ptx(tmp_path, PIPELINE.replace("TAIL", ""), "unused.cu")
    for n in (1, 3):
        assert _reads(unused, _launch(64, n=n, grid=1)) == []
    used = _ptx(tmp_path, PIPELINE.replace("TAIL", "+ cur"), "used.cu")
    assert _reads(used, _launch(64, n=1, grid=1)) == [("read", 10, 's[65] (byte 260 of shared array "s")', (0, 0, 0))]
    assert _reads(used, _launch(64, n=3, grid=1)) == []  # the last prefetch reads stage 1, filled by the first pass


# a read copied by a mov, then stored; or the copy written again before the store (inline PTX: nvcc keeps it)
COPIED = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float s[64];
    if (threadIdx.x < 32) s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    float v, w;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"((unsigned)__cvta_generic_to_shared(&s[threadIdx.x])));
    asm volatile("mov.f32 %0, %1;" : "=f"(w) : "f"(v));
    AGAIN
    out[threadIdx.x] = w;
}
"""


@NVCC
def test_a_read_passed_on_by_a_mov_counts_where_the_copy_is_used(tmp_path: Path) -> None:
    used = _ptx(tmp_path, COPIED.replace("AGAIN", ""), "used.cu")
    assert _reads(used, _launch(64, grid=1)) == [("read", 6, 's[32] (byte 128 of shared array "s")', (32, 0, 0))]
    again = _ptx(tmp_path, COPIED.replace("AGAIN", 'asm volatile("mov.f32 %0, 0f3F800000;" : "=f"(w));'), "again.cu")
    assert _reads(again, _launch(64, grid=1)) == []  # the copy is written again: the value loaded is never used


# warp 0's thread 0 adds the warps' slots its guard admits; nvcc loads every slot and adds it, then selects
# the sum with or without it (cub's BlockReduce with num_valid does so: vllm's rms_norm)
SELECTED = """extern "C" __global__ void k(const float* x, float* out, int n) {
    __shared__ float part[32];
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = part[0];
#pragma unroll
        for (int w = 1; w < 32; ++w)
            if (GUARD) total += part[w];
        out[blockIdx.x] = total;
    }
}
"""


@NVCC
def test_a_read_a_selp_discards_after_arithmetic_is_no_finding(tmp_path: Path) -> None:
    """The slot's value passes through the add to the selp, which takes the sum without it where the guard
    fails: no use of the unwritten slots part[4..31] at 128 threads (vllm trial, 7 December: every norm
    kernel's cub reduction was a false finding). A guard one warp too wide takes part[4]'s sum: found."""
    good = _ptx(tmp_path, SELECTED.replace("GUARD", "w * 32 < n"), "good.cu")
    assert _reads(good, _launch(128, n=128, grid=1)) == []
    bad = _ptx(tmp_path, SELECTED.replace("GUARD", "w * 32 <= n"), "bad.cu")
    assert _reads(bad, _launch(128, n=128, grid=1)) == [("read", 9, 'part[4] (byte 16 of shared array "part")', (0, 0, 0))]


def test_held_reads_of_one_thread_in_the_same_registers_are_kept_once() -> None:
    """A GEMM tile read before any write (a mutant's wrong column) sends every iteration's loads into the same
    accumulators: each load's held reads are kept once per thread and register set, the earliest, so a
    static run no longer follows one per iteration through every later instruction (a header mutant's check
    took minutes). Reads in other registers, or of other threads, stay."""
    import numpy as np

    from audit.cuda.blocksim import _distinct

    t = np.array([0, 1, 0, 0, 1, 2])
    off = np.array([0, 4, 8, 12, 16, 20])
    epochs = np.array([0, 0, 1, 1, 1, 2])
    acc = np.array([1, 1, 1, 1, 1, 0], bool)
    tmp = np.array([0, 0, 0, 1, 0, 1], bool)
    t2, off2, e2, regs = _distinct((t, off, epochs, {"%f1": acc, "%f2": tmp}))
    assert t2.tolist() == [0, 1, 0, 2] and off2.tolist() == [0, 4, 12, 20] and e2.tolist() == [0, 0, 1, 2]
    assert regs["%f1"].tolist() == [True, True, True, False] and regs["%f2"].tolist() == [False, False, True, True]
    one = (t[:1], off[:1], epochs[:1], {"%f1": acc[:1]})
    assert _distinct(one) is one
