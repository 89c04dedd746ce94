"""32-bit global-memory offsets that wrap at the contracts' largest dims (audit.cuda.indexwidth, INDEX_OVERFLOW).

Small kernels compiled with the build's flags (``-arch=sm_90 -ptx -O3 -lineinfo``): each overflow class must
be found with its exact (or least) value, thread and access, each correct counterpart must stay clean, and so
must every shipped kernel at the shipped contracts. Hand-written PTX pins what nvcc output does not (a loaded
index, a shared-memory address, a counter without a lower bound). The rule's fixture pair is in
tests/data/rules/INDEX_OVERFLOW.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.api import load_project
from audit.cuda.indexwidth import IndexOverflow, Witness, find_index_overflows
from audit.cuda.static import entry_index_overflows, index_witnesses
from audit.graph import Wiring
from nvcc_flags import compile_ptx as _ptx

REPO = Path(__file__).resolve().parents[1]
NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")



def _rows(B: int, H: int, block: int = 128, rows_per_block: int | None = None) -> Witness:
    grid = -(-B // (rows_per_block or block))
    return Witness({2: B, 3: H}, (block, 1, 1), (grid, 1, 1), f"B = {B}, H = {H}")


ROWS = """extern "C" __global__ void k(const float* __restrict__ x, float* __restrict__ y, {t} B, {t} H) {{
    {t} r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= B) return;
    y[{store}] = x[{load}];
}}
"""


@NVCC
def test_a_signed_row_offset_that_passes_int_max_is_found_with_its_value_and_thread(tmp_path: Path) -> None:
    ptx = _ptx(tmp_path, ROWS.format(t="int", store="(size_t)r * H", load="r * H"))
    (o,) = find_index_overflows(ptx, "k", [_rows(1 << 24, 256)])
    # the second-to-last block's first thread: r = (131072 - 2) * 128 = 16776960, r * H = 4294901760
    assert (o.line, o.value, o.exact, o.signed, o.thread) == (4, 4294901760, True, True, "blockIdx.x = 131070, threadIdx.x = 0")
    assert o.access.startswith("ld.global.nc.f32") and o.instruction.startswith(("mul.wide.s32", "cvt.s64.s32"))
    assert o.message("k", "kernels/k.cu") == (
        f'Kernel "k" computes a global-memory offset in 32-bit int arithmetic that overflows within the contracts\' '
        f"dims (kernels/k.cu:4, {o.instruction}, for {o.access}): at B = 16777216, H = 256 and blockIdx.x = 131070, "
        "threadIdx.x = 0 it is 4,294,901,760, past 2^31 - 1; compute it in 64 bits, e.g. (size_t)row * H + j.")


@NVCC
def test_offsets_computed_in_64_bits_or_inside_the_range_are_clean(tmp_path: Path) -> None:
    ptx = _ptx(tmp_path, ROWS.format(t="int", store="(size_t)r * H", load="(size_t)r * H + 1"))
    assert find_index_overflows(ptx, "k", [_rows(1 << 24, 256)]) == []
    ptx = _ptx(tmp_path, ROWS.format(t="int", store="r * H", load="r * H + 1"))
    assert find_index_overflows(ptx, "k", [_rows(1 << 22, 256)]) == []  # 2^30: inside int
    assert len(find_index_overflows(ptx, "k", [_rows(1 << 22, 256), _rows(1 << 24, 256)])) == 1  # one per line


@NVCC
def test_unsigned_offsets_wrap_at_2_to_the_32(tmp_path: Path) -> None:
    ptx = _ptx(tmp_path, ROWS.format(t="unsigned", store="r * H", load="r * H + 1"))
    assert find_index_overflows(ptx, "k", [_rows(1 << 24, 256)]) == []  # 4294901760 fits unsigned
    (o,) = find_index_overflows(ptx, "k", [_rows(1 << 25, 256)])
    assert (o.signed, o.value) == (False, 8589869057)  # the load r * H + 1 comes first in the PTX (one finding per line)
    assert "32-bit unsigned arithmetic" in o.message("k", "k.cu") and "past 2^32 - 1" in o.message("k", "k.cu")


@NVCC
def test_the_tail_block_a_row_guard_excludes_is_not_a_witness(tmp_path: Path) -> None:
    # B * H = 2^31 exactly: the in-range rows reach (B - 1) * H < 2^31, only the last block's threads past
    # B would compute 2^31 and more, and the guard stops them
    ptx = _ptx(tmp_path, ROWS.format(t="int", store="r * H", load="r * H + 1"))
    assert find_index_overflows(ptx, "k", [_rows(1 << 23, 256)]) == []


@NVCC
def test_a_loop_counter_counts_from_its_start(tmp_path: Path) -> None:
    body = """extern "C" __global__ void k(const float* __restrict__ x, float* __restrict__ y, int B, int H) {
    int r = blockIdx.x * 64 + threadIdx.x / 2;
    if (r >= B) return;
    for (int j = threadIdx.x % 2; j < H; j += 2) y[r * H + j] = x[(size_t)r * H + j];
}
"""
    ptx = _ptx(tmp_path, body)
    w = Witness({2: 1 << 24, 3: 256}, (128, 1, 1), (1 << 18, 1, 1), "B = 16777216, H = 256")
    (o,) = find_index_overflows(ptx, "k", [w])
    # nvcc peels the first iterations: there only the counter's start (threadIdx.x % 2) reaches the offset,
    # so the value is exact
    assert (o.line, o.exact, o.value) == (4, True, 4294934528) and "it is 4,294,934,528" in o.message("k", "k.cu")
    assert o.access.startswith("st.global.f32")


def test_unknown_values_and_other_state_spaces_are_never_findings() -> None:
    head = ".visible .entry k(\n.param .u64 k_param_0,\n.param .u32 k_param_1\n)\n{\n"
    loaded = head + """ld.param.u64 %rd1, [k_param_0];
cvta.to.global.u64 %rd2, %rd1;
ld.global.u32 %r1, [%rd2];
ld.param.u32 %r2, [k_param_1];
mul.lo.s32 %r3, %r1, %r2;
mul.wide.s32 %rd3, %r3, 4;
add.s64 %rd4, %rd2, %rd3;
st.global.u32 [%rd4], %r3;
mul.lo.s32 %r4, %r2, %r2;
cvt.s64.s32 %rd5, %r4;
st.shared.u32 [%rd5], %r4;
sub.s32 %r5, 0, %r2;
mov.u32 %r6, %r5;
add.s32 %r6, %r6, %r1;
mul.lo.s32 %r7, %r6, %r2;
mul.wide.s32 %rd6, %r7, 4;
add.s64 %rd7, %rd2, %rd6;
st.global.u32 [%rd7], %r7;
ret;
}
"""
    w = Witness({1: 1 << 20}, (1, 1, 1), (1, 1, 1), "N = 1048576")
    # %r1 is loaded (unknown); %r4 = N * N overflows but reaches a shared address only; %r6 counts by a
    # loaded amount from -N (no lower bound)
    assert find_index_overflows(loaded, "k", [w]) == []
    # the same N * N into a global address is found
    found = find_index_overflows(loaded.replace("st.shared.u32 [%rd5]", "st.global.u32 [%rd5]"), "k", [w])
    assert [(o.instruction, o.value, o.exact) for o in found] == [("cvt.s64.s32 %rd5, %r4", 1 << 40, True)]


def test_the_shipped_kernels_are_clean_and_their_witnesses_are_the_largest_dims(repo: Path) -> None:
    cfg, cs = load_project(repo)
    w = Wiring(cs)
    (tob,) = index_witnesses(cs, w, cs.kernel("aux_trade_outcome_backward"))
    assert tob.label == "B = 65536 (its largest), SH2 = 256, H = 128, K = 3" and tob.grid == (2048, 1, 1)
    partial = index_witnesses(cs, w, cs.kernel("aux_weight_grad_partial"))
    assert [x.label for x in partial] == ["B = 65536 (its largest), M = 256, N = 256, P = 128",
                                          "B = 65536 (its largest), M = 128, N = 256, P = 128"]  # fmt: skip


@NVCC
def test_entry_index_overflows_reads_the_witnesses_of_the_contracts(tmp_path: Path, repo: Path) -> None:
    cfg, cs = load_project(repo)
    k = cs.kernel("strided_gather")
    body = (repo / "kernels" / "strided_gather_kernel.cu").read_text()
    safe = _ptx(tmp_path, body)
    assert entry_index_overflows(cs, Wiring(cs), k, safe) == []
    # the 32-bit form of its offset stays inside int at B = 65536 (65536 * 32), so it is clean too
    narrow = _ptx(tmp_path, body.replace("(size_t)b * row_stride", "b * row_stride"))
    assert entry_index_overflows(cs, Wiring(cs), k, narrow) == []
    (o,) = find_index_overflows(narrow, k.symbol, [Witness({2: 1 << 27, 3: 32}, (256, 1, 1), (1 << 19, 1, 1), "B")])
    # the grid-stride loop's counter: its start and its steps reach the offset, so the value is a bound
    assert isinstance(o, IndexOverflow) and not o.exact and "at least 4,294,950,912" in o.message(k.name, k.source)


@NVCC
def test_a_kernel_defined_in_a_local_header_is_reported_at_the_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The PTX rules report lines of the file that defines the entry: for a header-only kernel library
    (the contract's source a .cu that includes the header) that is the header, never the .cu."""
    import re as _re

    from audit.cli import main

    root = tmp_path / "p"
    shutil.copytree(REPO / "tests" / "data" / "rules" / "INDEX_OVERFLOW" / "bad", root)
    chain = (root / "kernels" / "chain.cu").read_text()
    start = chain.index('extern "C" __global__ void forward(')
    end = chain.index('extern "C" __global__ void loss(')
    (root / "kernels" / "forward.cuh").write_text("#pragma once\n" + chain[start:end])
    (root / "kernels" / "chain.cu").write_text(chain[:start] + '#include "forward.cuh"\n\n' + chain[end:])
    line = 1 + next(i for i, t in enumerate(chain[start:end].splitlines(), 1) if "x[r * D + k % D]" in t)
    assert main(["check", "--root", str(root), "--select", "INDEX_OVERFLOW"]) == 1
    out = capsys.readouterr().out
    assert _re.search(rf"^kernels/forward\.cuh:{line}: INDEX_OVERFLOW Kernel \"forward\" .*\(kernels/forward\.cuh:{line}, ", out, _re.M), out


def test_not_narrowing_and_64_bit_products_keep_the_exact_value() -> None:
    """``gridDim.x - blockIdx.x - 1`` compiles to ``not.b32`` (llm.c's softmax_forward_kernel5); a 64-bit
    product narrowed back to 32 bits (``cvt.u32.u64``, llm.c's fused classifier after a partial fix) wraps
    modulo 2^32; both are ring operations, so the exact value goes on to the widening."""
    head = ".visible .entry k(\n.param .u64 k_param_0,\n.param .u32 k_param_1\n)\n{\n"
    body = head + """ld.param.u64 %rd1, [k_param_0];
cvta.to.global.u64 %rd2, %rd1;
ld.param.u32 %r1, [k_param_1];
mov.u32 %r2, %ctaid.x;
not.b32 %r3, %r2;
mov.u32 %r4, %nctaid.x;
add.s32 %r5, %r4, %r3;
mul.lo.s32 %r6, %r5, %r1;
mul.wide.s32 %rd3, %r6, 4;
add.s64 %rd4, %rd2, %rd3;
ld.global.f32 %f1, [%rd4];
mul.wide.s32 %rd5, %r5, %r1;
cvt.u32.u64 %r7, %rd5;
add.s32 %r8, %r7, 1;
cvt.s64.s32 %rd6, %r8;
shl.b64 %rd7, %rd6, 2;
add.s64 %rd8, %rd2, %rd7;
st.global.f32 [%rd8], %f1;
ret;
}
"""
    # gridDim.x - blockIdx.x - 1 at block 0 of 65536 is 65535; times N = 65536 is 4294901760
    w = Witness({1: 1 << 16}, (1, 1, 1), (1 << 16, 1, 1), "N = 65536")
    found = find_index_overflows(body, "k", [w])
    assert [(o.instruction, o.value, o.exact, o.thread) for o in found] == [
        ("mul.wide.s32 %rd3, %r6, 4", 4294901760, True, "blockIdx.x = 0"),
        ("cvt.s64.s32 %rd6, %r8", 4294901761, True, "blockIdx.x = 0"),
    ]


@NVCC
def test_an_offset_inlined_from_a_helper_names_the_helper_line(tmp_path: Path) -> None:
    body = """__device__ __forceinline__ float second_of_row(const float* x, int r, int P) {
    return x[r * P + 1];
}
extern "C" __global__ void k(const float* __restrict__ x, float* __restrict__ y, int B, int P) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= B) return;
    y[r] = second_of_row(x, r, P);
}
"""
    (o,) = find_index_overflows(_ptx(tmp_path, body), "k", [_rows(1 << 16, 1 << 16)])
    assert (o.line, o.origin) == (7, "k.cu:2")
    assert "(k.cu:7, inlined from k.cu:2, " in o.message("k", "k.cu")


def test_a_register_reused_for_a_counter_keeps_its_first_value_where_only_that_reaches() -> None:
    """nvcc reuses registers (llm.c's layernorm_backward_kernel2: the register of ``%tid.x`` later counts a
    loop): a use is evaluated from the definitions that reach it, so the counter written later does not
    blur the thread index read before it."""
    body = """.visible .entry k(
.param .u64 k_param_0,
.param .u32 k_param_1
)
{
ld.param.u64 %rd1, [k_param_0];
cvta.to.global.u64 %rd2, %rd1;
ld.param.u32 %r9, [k_param_1];
mov.u32 %r1, %tid.x;
mul.lo.s32 %r2, %r1, %r9;
mul.wide.s32 %rd3, %r2, 4;
add.s64 %rd4, %rd2, %rd3;
st.global.f32 [%rd4], %f1;
mov.u32 %r1, 0;
$L_loop:
add.s32 %r1, %r1, 1;
setp.lt.s32 %p1, %r1, %r9;
@%p1 bra $L_loop;
mul.lo.s32 %r3, %r1, %r9;
mul.wide.s32 %rd5, %r3, 4;
add.s64 %rd6, %rd2, %rd5;
st.global.f32 [%rd6], %f1;
ret;
}
"""
    w = Witness({1: 1 << 22}, (1024, 1, 1), (1, 1, 1), "N = 4194304")
    found = find_index_overflows(body, "k", [w])
    # the first store: threadIdx.x = 1023 times N, exactly; the second: the counter is at least 1 there
    # (its start 0 plus steps of 1), 1 * N fits, so it is no finding
    assert [(o.instruction, o.value, o.exact, o.thread) for o in found] == [("mul.wide.s32 %rd3, %r2, 4", 1023 << 22, True, "threadIdx.x = 1023")]



FLAT = """extern "C" __global__ void k(float* __restrict__ y, const float* __restrict__ x, int B, int T, int V) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < B * T * V) {
        int b = i / (T * V);
        int t = (i / V) % T;
        int v = i % V;
        y[b * T * V + t * V + v] += x[b * T + t];
    }
}
"""


def _flat(B: int, T: int, V: int) -> Witness:
    return Witness({2: B, 3: T, 4: V}, (256, 1, 1), (-(-B * T * V // 256), 1, 1), f"B = {B}, T = {T}, V = {V}")


@NVCC
def test_a_flat_index_that_wraps_before_its_division_is_found_at_the_division(tmp_path: Path) -> None:
    """llm.c's crossentropy_softmax_backward_kernel1: ``i = blockIdx.x * blockDim.x + threadIdx.x`` over
    B * T * V elements passes 2^31 - 1 from B * T = 42,692 at V = 50304, and the row ``b = i / (T * V)``
    comes out of the wrapped ``i``; the division only gave an unknown, so nothing was reported. A flat
    index that fits is clean, and so is one computed in 64 bits."""
    ptx = _ptx(tmp_path, FLAT)
    found = find_index_overflows(ptx, "k", [_flat(64, 1024, 50304)])
    assert found and all(o.instruction.startswith(("div.s32", "rem.s32")) and o.signed for o in found), found
    assert found[0].value > (1 << 31) - 1 and found[0].access.startswith(("st.global", "ld.global"))
    assert found[0].thread.startswith("blockIdx.x = 12877822")
    assert find_index_overflows(ptx, "k", [_flat(8, 1024, 50304)]) == []
    wide = FLAT.replace("int i = blockIdx.x * blockDim.x + threadIdx.x;", "size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;")
    wide = wide.replace("i < B * T * V", "i < (size_t)B * T * V").replace("int b =", "size_t b =").replace("int t =", "size_t t =")
    wide = wide.replace("int v =", "size_t v =").replace("y[b * T * V", "y[b * (size_t)T * V")
    assert find_index_overflows(_ptx(tmp_path, wide), "k", [_flat(64, 1024, 50304)]) == []


@pytest.mark.nvcc
def test_the_witness_meets_the_kernels_assumptions_below_the_largest_dims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``2 * N`` wraps in ``int`` at N = 2^30 + 1, the largest N the dims allow, but the kernel requires N
    to be a multiple of 3: the host never launches it there, and at the largest such N (2^30 - 1) the
    product fits. Without the assumption the same kernel is a finding."""
    from audit.cli import main

    root = tmp_path / "p"
    (root / "contracts").mkdir(parents=True)
    (root / "wireup.toml").write_text('arch = "sm_90"\n')
    (root / "k.cu").write_text(
        'extern "C" __global__ void half_tail(float* y, int N) { y[2 * N - 1] = 0.f; }\n')
    contract = (
        "[dims]\nN = { min = 3, max = 1073741825 }\n"
        '[[kernel]]\nname = "half_tail"\nsource = "k.cu"\nstage = "forward"\ngrid = [1, 1, 1]\nblock = [1, 1, 1]\n'
        "{requires}"
        'params = [\n  { name = "y", dtype = "f32", shape = ["2 * N"], role = "out" },\n'
        '  { name = "N", kind = "scalar", dtype = "i32", value = "N" },\n]\n'
    )
    (root / "contracts" / "k.toml").write_text(contract.replace("{requires}", 'requires = ["N % 3 == 0"]\n'))
    assert main(["check", "--root", str(root), "--select", "INDEX_OVERFLOW"]) == 0
    capsys.readouterr()
    (root / "contracts" / "k.toml").write_text(contract.replace("{requires}", ""))
    assert main(["check", "--root", str(root), "--select", "INDEX_OVERFLOW"]) == 1
    assert "N = 1073741825 (its largest)" in capsys.readouterr().out


@NVCC
def test_a_wrap_seen_by_the_block_run_is_reported_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """D = 2^24: at B = 131 the block run's row 130 reads x[130 * D], which the int product wraps to
    x[-2^31]. INDEX_OVERFLOW reports the wrap at line 18; OUT_OF_BOUNDS_ACCESS, which saw the same wrap as a
    read before x's start, leaves that line to it (it reported both before: two findings for one bug). A
    read before a buffer's start on a line with no wrap is still its own (line 73)."""
    from audit.cli import main

    root = tmp_path / "p"
    shutil.copytree(REPO / "tests" / "data" / "rules" / "INDEX_OVERFLOW" / "bad", root)
    dims = root / "contracts" / "buffers.toml"
    text = dims.read_text()
    old_b = 'B = { min = 1, max = 67000000, doc = "batch rows (B * H stays below 2^31)" }'
    old_d = 'D = { value = 64, doc = "input width" }'
    assert text.count(old_b) == 1 and text.count(old_d) == 1
    dims.write_text(text.replace(old_b, "B = { min = 1, max = 1024 }").replace(old_d, "D = { value = 16777216 }"))
    assert main(["check", "--root", str(root), "--select", "OUT_OF_BOUNDS_ACCESS,INDEX_OVERFLOW"]) == 1
    found = [line.split(" Kernel ", 1)[0] for line in capsys.readouterr().out.splitlines() if line.startswith("kernels/")]
    assert found == ["kernels/chain.cu:18: INDEX_OVERFLOW", "kernels/chain.cu:63: INDEX_OVERFLOW", "kernels/chain.cu:73: OUT_OF_BOUNDS_ACCESS"]
