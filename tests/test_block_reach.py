"""What the block runs of OUT_OF_BOUNDS_ACCESS reach, and what they say where they do not.

The 3D Gaussian splatting trial (docs/adopting.md, sixteenth) found the run ending threads on a condition it
could not decide (``if (!(radii[i] > 0)) return;``, a float or an input with no ``values``) with no note, a
row's ``[first, last)`` range filled with one value (so a loop over it never ran), and the code under
``if (p)`` for an optional pointer a schedule binds stepped over at every launch. Each is checked here
with its counterpart: an access no followed thread made is a note naming its lines; an integer input with
no stated domain is filled with verify's default draws; a row's elements are filled apart; an optional
pointer a step binds is given its buffer in launches of its own.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")
FIXTURE = Path(__file__).resolve().parent / "data" / "rules" / "OUT_OF_BOUNDS_ACCESS" / "good"


def _fixture(tmp_path: Path, old: str, new: str) -> Path:
    """The OUT_OF_BOUNDS_ACCESS good fixture with one change to its kernels."""
    root = tmp_path / "chain"
    shutil.copytree(FIXTURE, root)
    chain = root / "kernels" / "chain.cu"
    text = chain.read_text()
    assert text.count(old) == 1, old
    chain.write_text(text.replace(old, new))
    return root


def _check(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    from audit.cli import main

    rc = main(["check", "--root", str(root), "--select", "OUT_OF_BOUNDS_ACCESS"])
    lines = capsys.readouterr().out.splitlines()
    return rc, [line for line in lines if not line.startswith("wireup: compiling")][:-1]


GATE = "    if (i < B) label[i] = y[i] / isv[slot];\n    if (blockIdx.x == 0 && threadIdx.x == 0) isv[slot]"


@NVCC
def test_accesses_no_followed_thread_made_are_a_note_not_a_silent_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """make_label's threads leave on a float test (the rasterizer's ``!(radii[i] > 0)``, here of the label
    scale in the ISV, whose contents no contract states): the run does not know it, so every thread may have
    left and the label store and ISV update after it were checked for none. Before, the check said nothing,
    as for a kernel it had checked; now it names the lines. With the same exit on the row index alone
    (decided), it checks them and says nothing."""
    root = _fixture(tmp_path, GATE, "    if (i >= B || !(isv[slot] > 0.0f)) return;\n    label[i] = y[i] / isv[slot];\n"
                                    "    if (i == 0) isv[slot]")
    rc, out = _check(root, capsys)
    assert rc == 0  # a note fails nothing
    assert out == [
        'contracts/kernels.toml:5: OUT_OF_BOUNDS_ACCESS (note) Kernel "make_label" was not analysed to its end for '
        "accesses outside its buffers and shared memory (no thread it followed made the accesses at lines 8, 9 of "
        "chain.cu: stepped over on a value the run does not know (line 7: `@%p2 bra $L__BB0_4`)): what it does "
        "past that point is not checked, so no finding there is no proof of none."
    ]
    decided = _fixture(tmp_path / "decided", GATE, "    if (i >= B) return;\n    label[i] = y[i] / isv[slot];\n"
                                                   "    if (i == 0) isv[slot]")
    assert _check(decided, capsys) == (0, [])


@NVCC
def test_an_optional_pointer_a_step_binds_is_given_its_buffer_in_launches_of_its_own(tmp_path: Path,
                                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The fixture's backward writes its per-sample partial under ``if (dW_partial)``; a step binds the
    pointer to a buffer, another to NULL. The regular launches keep a bound optional pointer unknown (the
    code under the test is stepped over), so a partial written one element on was found by no run; the
    launch with the pointer given finds it, and the correct index stays clean."""
    bad = _fixture(tmp_path, "if (dW_partial) dW_partial[r * (numel / B) + i] =", "if (dW_partial) dW_partial[r * (numel / B) + i + 1] =")
    rc, out = _check(bad, capsys)
    assert rc == 1
    assert out == [
        'kernels/chain.cu:64: OUT_OF_BOUNDS_ACCESS Kernel "backward" writes past the end of "dW_partial" (kernels/chain.cu:64, '
        "st.global.f32 [%rd16], %f1): at B = 1, D = 64, H = 32, dW_partial given, threadIdx (255, 0, 0) of blockIdx "
        '(0, 0, 0) writes dW_partial[2048], but "dW_partial" holds 2048 elements (shape [B, H, D] = [1, 32, 64], f32), '
        "so it corrupts another allocation, or faults; bound the index by the buffer's extent (or correct the "
        "contract's shape)."
    ]
    good = tmp_path / "good"
    shutil.copytree(FIXTURE, good)
    assert _check(good, capsys) == (0, [])


def test_given_launches_name_the_pointers_they_give_and_only_bound_ones() -> None:
    """The shipped chain: the backward kernels whose schedules bind their optional partial pointers get
    launches at the least sizes and at 16 rows with them given; a kernel with no optional pointer gets none."""
    from audit.api import load_project
    from audit.cuda.static import given_launches
    from audit.graph import Wiring

    _cfg, cs = load_project(Path(__file__).resolve().parents[1])
    wiring = Wiring.of(cs)
    assert [lc.label for lc in given_launches(cs, wiring, cs.kernel("aux_trunk_backward"))] == [
        "B = 1, E = 256, SH2 = 256, dW_partial given", "B = 16, E = 256, SH2 = 256, dW_partial given"]
    assert given_launches(cs, wiring, cs.kernel("aux_trunk_forward")) == []


UNFILLED = """[dims]
n = { min = 1, max = 65536 }

[[kernel]]
name = "gated"
source = "k.cu"
stage = "backward"
grid = ["ceil_div(n, 256)", 1, 1]
block = [256, 1, 1]
params = [
  { name = "n", kind = "scalar", dtype = "i32", value = "n" },
  { name = "radii", dtype = "i32", shape = ["n"], role = "in" },
  { name = "x", dtype = "f32", shape = ["n"], role = "in" },
  { name = "y", dtype = "f32", shape = ["n"], role = "out" },
]
"""

GATED = """extern "C" __global__ void gated(int n, const int* radii, const float* x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || !(radii[i] > 0))
        return;
    y[i] = x[STRIDE * i];
}
"""


def _project(tmp_path: Path, name: str, contract: str, source: str) -> Path:
    root = tmp_path / name
    (root / "contracts").mkdir(parents=True)
    (root / "contracts" / "k.toml").write_text(contract)
    (root / "k.cu").write_text(source)
    (root / "wireup.toml").write_text("")
    return root


def _findings(root: Path) -> list[str]:
    from audit.api import check

    result = check(root, select=("OUT_OF_BOUNDS_ACCESS",), jobs=1)
    return [f.message for f in result.findings]


@NVCC
def test_an_integer_input_with_no_values_is_filled_as_verify_draws_it(tmp_path: Path) -> None:
    """The rasterizer's gate on ``radii`` (an int input with no ``values``): filled with verify's default
    0..9, element by element, the threads of rows with radius 9 go on, and the seeded stride-2 read of x
    is found; stride 1 is clean and analysed to its end."""
    bad = _findings(_project(tmp_path, "bad", UNFILLED, GATED.replace("STRIDE", "2")))
    assert bad == [
        'Kernel "gated" reads past the end of "x" (k.cu:6, ld.global.f32 %f1, [%rd10]): at n = 131 (radii = 0, 9 in '
        "turn element by element (no values: verify's default 0..9)), threadIdx (67, 0, 0) of blockIdx (0, 0, 0) reads "
        'x[134], but "x" holds 131 elements (shape [n] = [131], f32), so it reads another allocation\'s data, or faults; '
        "bound the index by the buffer's extent (or correct the contract's shape)."
    ]
    assert _findings(_project(tmp_path, "good", UNFILLED, GATED.replace("STRIDE", "1"))) == []


RANGES = """[dims]
T = { min = 1, max = 1024 }
L = { min = 1, max = 65536 }

[[kernel]]
name = "batches"
source = "k.cu"
stage = "forward"
grid = ["T", 1, 1]
block = [256, 1, 1]
params = [
  { name = "ranges", dtype = "u32", shape = ["T", 2], role = "in", align = 8, values = { min = 0, max = "L" } },
  { name = "list", dtype = "u32", shape = ["L"], role = "in" },
  { name = "out", dtype = "f32", shape = ["T", 256], role = "out" },
]
"""

BATCHES = """#include <cstdint>
extern "C" __global__ void batches(const uint2* ranges, const uint32_t* list, float* out)
{
    __shared__ uint32_t batch[256];
    uint2 range = ranges[blockIdx.x];
    const int rounds = ((range.y - range.x + 256 - 1) / 256);
    float acc = 0.0f;
    for (int i = 0; i < rounds; i++) {
        int progress = i * 256 + threadIdx.x;
        if (range.x + progress BOUND range.y)
            batch[threadIdx.x] = list[range.x + progress];
        __syncthreads();
        acc += batch[0];
        __syncthreads();
    }
    out[blockIdx.x * 256 + threadIdx.x] = acc;
}
"""


@NVCC
def test_a_rows_range_is_filled_element_by_element_so_its_loop_runs(tmp_path: Path) -> None:
    """The rasterizer's tile loop over ``[range.x, range.y)`` of a list: every filling row by row gives both
    ends one value (an empty range, no round of the loop), so the seeded ``<=`` read one past the range
    ran in no launch; filled element by element ((0, 1) at T = L = 1) it is found, and ``<`` is clean."""
    bad = _findings(_project(tmp_path, "bad", RANGES, BATCHES.replace("BOUND", "<=")))
    assert len(bad) == 1 and bad[0].startswith(
        'Kernel "batches" reads past the end of "list" (k.cu:11, ') and (
        "at T = 1 (ranges = 0, 1 in turn element by element; list = 9 (no values: verify's default 0..9)), "
        'threadIdx (1, 0, 0) of blockIdx (0, 0, 0) reads list[1], but "list" holds 1 element') in bad[0]
    assert _findings(_project(tmp_path, "good", RANGES, BATCHES.replace("BOUND", "<"))) == []


TILES = """[dims]
W = { min = 1, max = 4096 }
H = { min = 1, max = 4096 }
TX = "ceil_div(W, 16)"
TY = "ceil_div(H, 16)"
TILES = "TX * TY"

[[kernel]]
name = "tile_ranges"
source = "k.cu"
stage = "forward"
grid = ["TX", "TY", 1]
block = [16, 16, 1]
params = [
  { name = "ranges", dtype = "f32", shape = ["TILES"], role = "in" },
  { name = "out", dtype = "f32", shape = ["TILES"], role = "out" },
  { name = "W", kind = "scalar", dtype = "i32", value = "W" },
  { name = "H", kind = "scalar", dtype = "i32", value = "H" },
]
"""

TILE_ROW = """#include <cstdint>
extern "C" __global__ void tile_ranges(const float* ranges, float* out, int W, int H)
{
    const uint32_t horizontal_blocks = (W + ROUND) / 16;  // the tile grid's row stride
    const uint32_t tile = blockIdx.y * horizontal_blocks + blockIdx.x;
    if (threadIdx.x == 0 && threadIdx.y == 0)
        out[tile] = ranges[tile];
}
"""


@NVCC
def test_a_tile_count_wrong_only_at_whole_tiles_is_run_there(tmp_path: Path) -> None:
    """The rasterizer's ``(W + BLOCK_X) / BLOCK_X`` for ``ceil_div(W, BLOCK_X)``: the two agree but where W is a
    multiple of 16, which the block runs' sizes (1, 131, 43) never are; the launch at two whole tiles
    (W = H = 32, from the derived dims' ``ceil_div``) finds the last tile's read past ``ranges``, and the
    right count stays clean there."""
    from audit.api import load_project
    from audit.cuda.static import barrier_launches
    from audit.graph import Wiring

    bad_root = _project(tmp_path, "bad", TILES, TILE_ROW.replace("ROUND", "16"))
    _cfg, cs = load_project(bad_root)
    labels = [lc.label for lc in barrier_launches(cs, Wiring.of(cs), cs.kernel("tile_ranges"))]
    assert "W = 32, H = 32, TX = 2, TY = 2" in labels and not any(lc.startswith("W = 16,") for lc in labels)
    bad = _findings(bad_root)
    assert [m[: m.index(" (k.cu")] for m in bad] == ['Kernel "tile_ranges" reads past the end of "ranges"',
                                                      'Kernel "tile_ranges" writes past the end of "out"']
    assert all("at W = 32, H = 32, TX = 2, TY = 2, threadIdx (0, 0, 0) of blockIdx (1, 1, 0)" in m for m in bad)
    assert _findings(_project(tmp_path, "good", TILES, TILE_ROW.replace("ROUND", "15"))) == []


@NVCC
def test_a_float_gate_is_decided_by_the_float_fill(tmp_path: Path) -> None:
    """The same gate on a float input with no ``values`` (``!(radii[i] > 0)``, the rasterizer's culling):
    filled 1, -1 element by element, as verify's N(0, 1) draws take both signs, half the rows go on and the
    stride-2 read is found; stride 1 is clean. The fill is the same in every launch, so the label does not
    name it."""
    contract = UNFILLED.replace('{ name = "radii", dtype = "i32"', '{ name = "radii", dtype = "f32"')
    source = GATED.replace("const int* radii", "const float* radii").replace("radii[i] > 0", "radii[i] > 0.0f")
    bad = _findings(_project(tmp_path, "bad", contract, source.replace("STRIDE", "2")))
    assert len(bad) == 1 and "at n = 131, threadIdx (66, 0, 0) of blockIdx (0, 0, 0) reads x[132]" in bad[0]
    assert _findings(_project(tmp_path, "good", contract, source.replace("STRIDE", "1"))) == []


FLOAT_PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_param_0, .param .f32 k_param_1)
{
.reg .pred %p<4>;
.reg .b32 %r<8>;
.reg .f32 %f<8>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [k_param_0];
ld.param.f32 %f1, [k_param_1];
mul.f32 %f2, %f1, 0f3FC00000;
fma.rn.f32 %f3, %f2, 0f40000000, 0fBF800000;
cvt.rzi.s32.f32 %r1, %f3;
div.rn.f32 %f4, 0f00000000, 0f00000000;
setp.gtu.f32 %p1, %f4, 0f00000000;
setp.gt.f32 %p2, %f4, 0f00000000;
selp.s32 %r2, 1, 0, %p1;
selp.s32 %r3, 100, 0, %p2;
add.s32 %r4, %r1, %r2;
add.s32 %r5, %r4, %r3;
mul.wide.s32 %rd2, %r5, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.f32 [%rd3], %f3;
ret;
}
"""


def test_float_arithmetic_compares_and_conversions_follow_the_ptx_isa() -> None:
    """A float scalar the contract fixes (3.0) reaches an index through ``mul``, ``fma``, ``cvt.rzi``
    (3 * 1.5 * 2 - 1 = 8); 0/0 is NaN, which an unordered ``gtu`` takes as true (+1) and an ordered ``gt``
    as false (+0): the store is at element 9, one past a 9-element buffer. With the scalar at 2.0 the
    index is 5 + 1 = 6, inside."""
    from audit.cuda.barriers import BlockLaunch
    from audit.cuda.blockbounds import buffer_base
    from audit.cuda.blocksim import find_out_of_bounds

    def run(value: float) -> list[tuple[int, int]]:
        import numpy as np

        bits = int(np.array(value, np.float32).view(np.uint32))
        launch = BlockLaunch(((0, buffer_base(0)), (1, bits)), (1, 1, 1), (1, 1, 1), 0, "the contracts' dims",
                             ((0, "y", 36, 4, "shape [9], f32", None),))
        return [(o.start // 4, o.extent // 4) for o in find_out_of_bounds(FLOAT_PTX, "k", [launch])]

    assert run(3.0) == [(9, 9)]
    assert run(2.0) == []


STAGED = ("    for (int i = threadIdx.x; i < numel / B; i += blockDim.x) {\n"
          "        if (dW_partial) dW_partial[r * (numel / B) + i] = dh[r] * h[r] * x[r];\n    }\n")


def _staged(tmp_path: Path, barrier: str) -> Path:
    """The fixture's backward with its per-sample partial staged through shared memory under ``if (dW_partial)``
    (``barrier``: what orders the staging store before the neighbour's read)."""
    return _fixture(tmp_path, STAGED,
                    "    if (dW_partial) {\n        __shared__ float stage[256];\n        stage[threadIdx.x] = dh[r] * h[r];\n"
                    f"        {barrier}\n        for (int i = threadIdx.x; i < numel / B; i += blockDim.x)\n"
                    "            dW_partial[r * (numel / B) + i] = stage[(threadIdx.x + 1) % 256] * x[r];\n    }\n")  # fmt: skip


def _races(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    from audit.cli import main

    rc = main(["check", "--root", str(root), "--select", "SHARED_BARRIER_MISSING,SHARED_UNINIT_READ"])
    lines = capsys.readouterr().out.splitlines()
    return rc, [line for line in lines if not line.startswith("wireup: compiling")][:-1]


@NVCC
def test_the_races_under_an_optional_pointer_a_step_binds_are_run_with_it_given(tmp_path: Path,
                                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A launch keeps an optional pointer its step binds unknown, so the code under ``if (dW_partial)`` was
    stepped over: with a barrier inside, the race analysis gave up there (the shipped trunk and trade-outcome
    backwards' five notes); with none, a race inside was never looked at, and nothing was said. Each launch's
    twin with the pointer given (the step's own case) is what the races are judged by now: the race is found,
    and the barrier-ordered version is analysed to its end, with no note."""
    rc, out = _races(_staged(tmp_path / "bad", ""), capsys)
    assert rc == 1
    # (nvcc's line table places the hoisted load at the kernel's first line; the store is the staging one)
    assert len(out) == 1 and re.fullmatch(
        r'kernels/chain\.cu:\d+: SHARED_BARRIER_MISSING Kernel "backward" reads shared memory that another thread writes in the same '
        r"barrier interval \(.*\): at B = 1, D = 64, H = 32, dW_partial given, threadIdx \(32, 0, 0\) writes stage\[32\] .* "
        r"put a __syncthreads\(\) between the write at line 65 and the read at line \d+\.", out[0]), out
    assert _races(_staged(tmp_path / "good", "__syncthreads();"), capsys) == (0, [])


def test_a_launch_twin_gives_the_optional_pointers_its_step_binds() -> None:
    """The shipped chain: each block-run launch of a kernel whose step binds an optional pointer to a buffer
    carries its twin with that pointer given (same sizes, fillings and other parameters); the other launches
    carry none."""
    from audit.api import load_project
    from audit.cuda.static import barrier_launches
    from audit.graph import Wiring

    _cfg, cs = load_project(Path(__file__).resolve().parents[1])
    wiring = Wiring.of(cs)
    launches = barrier_launches(cs, wiring, cs.kernel("aux_trunk_backward"))
    # the per-sample schedule binds dW_partial, the fused one NULL: those launches pass 0 and carry no twin
    assert {lc.given is None for lc in launches} == {True, False}
    assert all(dict(lc.params).get(3) == 0 for lc in launches if lc.given is None)
    first = next(lc for lc in launches if lc.given is not None)
    twin = first.given
    assert first.label == "B = 1, E = 256, SH2 = 256" and twin.label == "B = 1, E = 256, SH2 = 256, dW_partial given"
    assert (twin.block, twin.grid, twin.fills, twin.given) == (first.block, first.grid, first.fills, None)
    assert set(dict(twin.params)) - set(dict(first.params)) == {3}  # dW_partial (position 3) given an address
    assert [b[1] for b in twin.buffers if b[1] not in {b2[1] for b2 in first.buffers}] == ["dW_partial"]
    assert all(lc.given is None for lc in barrier_launches(cs, wiring, cs.kernel("aux_trunk_forward")))


@NVCC
def test_a_kernel_no_schedule_launches_is_run_with_its_optional_pointers_null_and_given(tmp_path: Path) -> None:
    """With no schedule, an optional pointer was NULL at every launch (a value the contract allows), so the
    code under ``if (dW_partial)`` ran at none: the race there was not looked at. The launches with the
    pointer given come beside the NULL ones now, and find it; the barrier-ordered version is clean to its end."""
    from audit.cuda.blocksim import block_findings
    from audit.cuda.static import barrier_launches
    from audit.load import load_contracts
    from nvcc_flags import compile_ptx

    for barrier, found in (("", 1), ("__syncthreads();", 0)):
        root = _staged(tmp_path / f"b{len(barrier)}", barrier)
        cs = load_contracts(root / "contracts", root)
        launches = barrier_launches(cs, None, cs.kernel("backward"))
        ptx = compile_ptx(root / "kernels", (root / "kernels" / "chain.cu").read_text(), "copy.cu")
        gaps: dict[str, str] = {}
        races = block_findings(ptx, "backward", launches, False, gaps=gaps)[0]
        assert len(races) == found and gaps["races"] == "", (races, gaps)
        if found:
            assert races[0].launch.endswith("dW_partial given"), races[0]
