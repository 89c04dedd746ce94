"""Write races on global memory found in PTX (audit.cuda.races).

Hand-written PTX snippets test the parser and the predicate forms everywhere; tests marked ``nvcc``
compile the shipped kernels (every entry must be clean), three real mutants of
kernels/aux_heads_loss_ema_kernel.cu (each must be found) and small synthetic kernels, with the flags
of the build (``-arch=sm_90 -ptx -O3 -lineinfo -std=c++17``).
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from audit.cuda.races import StoreRace, entries, find_store_races

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
EMA = KERNELS / "aux_heads_loss_ema_kernel.cu"
Dims = tuple[int | None, int | None, int | None]


def _nvcc(src: Path, extra: tuple[str, ...] = ()) -> str:
    out = src.with_suffix(".ptx")
    flags = ["-arch=sm_90", "-ptx", "-O3", "-lineinfo", "-std=c++17", "-I", str(KERNELS), *extra]
    subprocess.run(["nvcc", *flags, str(src), "-o", str(out)], check=True, capture_output=True, text=True)
    return out.read_text()


def _launch_extents() -> dict[str, tuple[Dims, Dims]]:
    """entry -> (block, grid) from the shipped contracts; an expression (``ceil_div(B, 32)``) is unknown."""
    out: dict[str, tuple[Dims, Dims]] = {}
    for path in sorted((REPO / "contracts" / "kernels").glob("*.toml")):
        for k in tomllib.loads(path.read_text()).get("kernel", []):
            block, grid = (tuple(v if isinstance(v, int) else None for v in k[key]) for key in ("block", "grid"))
            out[k["entry"]] = (block, grid)  # type: ignore[assignment]
    return out


def _ptx(body: str, params: str = ".param .u64 k_param_0, .param .f32 k_param_1", head: str = "") -> str:
    """A one-entry module ``k`` whose body loads ``%rd1`` (a global pointer) and ``%f1``."""
    return (f'.version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k({params})\n{head}\n{{\n'
            f"\t.reg .pred %p<9>;\n\t.reg .b32 %r<9>;\n\t.reg .b64 %rd<9>;\n\t.reg .f32 %f<9>;\n\t.loc 1 10 0\n"
            f"\tld.param.u64 %rd1, [k_param_0];\n\tld.param.f32 %f1, [k_param_1];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
            f'{body}\n$L__END:\n\tret;\n}}\n\t.file 1 "/tmp/x/k.cu"\n\t.file 2 "/tmp/x/helper.cuh"\n')


ONE_BLOCK: tuple[Dims, Dims] = ((256, 1, 1), (1, 1, 1))
MANY_BLOCKS: tuple[Dims, Dims] = ((256, 1, 1), (64, 1, 1))


def _races(ptx: str, extents: tuple[Dims, Dims] = ONE_BLOCK, entry: str = "k") -> list[tuple[str, tuple[str, ...]]]:
    return [(r.kind, r.dims) for r in find_store_races(ptx, entry, *extents)]


# ---------------------------------------------------------------------------------------------------------
# hand-written PTX (no nvcc)


def test_unguarded_store_is_a_thread_race_with_its_location_and_message():
    ptx = _ptx("\t.loc 1 12 5\n\tst.global.f32   [%rd2],\t%f1;\n\t.loc 1 13 5\n\tst.shared.f32 [%r1], %f1;")
    (race,) = find_store_races(ptx, "k", *ONE_BLOCK)
    assert race == StoreRace("k", 12, 1, "/tmp/x/k.cu", "st.global.f32 [%rd2], %f1", "every thread of the block",
                             "thread", ("x",))
    assert race.message("kern", "kernels/k.cu") == (
        'Kernel "kern" stores to global memory at an address that is the same for every thread of a block '
        "(kernels/k.cu:12, st.global.f32 [%rd2], %f1) from more than one thread: a write race; guard it so one "
        "thread stores (if (threadIdx.x == 0)), or use an atomic.")
    assert entries(ptx) == ["k"]


def test_store_predicated_directly_on_tid_eq_0_is_clean_and_negated_is_a_race():
    setp = "\tmov.u32 %r1, %tid.x;\n\tsetp.eq.s32 %p1, %r1, 0;\n"
    assert _races(_ptx(setp + "\t@%p1 st.global.f32 [%rd2], %f1;")) == []
    (race,) = find_store_races(_ptx(setp + "\t@!%p1 st.global.f32 [%rd2], %f1;"), "k", *ONE_BLOCK)
    assert (race.kind, race.threads, race.instruction) == ("thread", "threads with tid.x != 0",
                                                           "@!%p1 st.global.f32 [%rd2], %f1")


@pytest.mark.parametrize("test", ["setp.lt.u32 %p1, %r1, 1", "setp.le.u32 %p1, %r1, 0", "setp.gt.u32 %p1, 1, %r1",
                                  "setp.ne.s32 %p2|%p1, %r1, 0", "setp.eq.s32 %p1, %r1, %r5"])
def test_single_thread_comparison_forms(test):
    body = f"\tmov.u32 %r5, 0;\n\tmov.u32 %r1, %tid.x;\n\t{test};\n\t@!%p1 bra $L__END;\n\tst.global.f32 [%rd2], %f1;"
    assert _races(_ptx(body)) == []
    wide = body.replace("%r1, %tid.x", "%r1, %ntid.x")  # not a thread index: no fact
    assert _races(_ptx(wide)) == [("thread", ("x",))]


def test_and_pred_or_pred_and_or_b32_guards():
    two = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ctaid.x;\n\tsetp.eq.s32 %p1, %r1, 0;\n\tsetp.eq.s32 %p2, %r2, 0;\n"
    store = "\tst.global.f32 [%rd2], %f1;"
    assert _races(_ptx(two + "\tand.pred %p3, %p1, %p2;\n\t@!%p3 bra $L__END;\n" + store), MANY_BLOCKS) == []
    # !p1 || !p2 -> return: the fall-through has both facts
    neg = two + "\tnot.pred %p4, %p1;\n\tnot.pred %p5, %p2;\n\tor.pred %p3, %p4, %p5;\n\t@%p3 bra $L__END;\n"
    assert _races(_ptx(neg + store), MANY_BLOCKS) == []
    # p1 || p2 -> store: no thread is pinned
    assert _races(_ptx(two + "\tor.pred %p3, %p1, %p2;\n\t@!%p3 bra $L__END;\n" + store), MANY_BLOCKS) == [
        ("thread", ("x",))]
    # the nvcc form of `threadIdx.x != 0 || blockIdx.x != 0` -> return
    ored = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ctaid.x;\n\tor.b32 %r3, %r2, %r1;\n\tsetp.ne.s32 %p1, %r3, 0;\n"
    assert _races(_ptx(ored + "\t@%p1 bra $L__END;\n" + store), MANY_BLOCKS) == []
    # or-sets give == 0 facts only
    assert _races(_ptx(ored.replace("ne.s32 %p1, %r3, 0", "ne.s32 %p1, %r3, 1") + "\t@%p1 bra $L__END;\n" + store),
                  MANY_BLOCKS) == [("thread", ("x",))]


def test_cooperative_groups_thread_rank_eq_0_pins_one_thread():
    # cuda-samples' reduction: `if (cta.thread_rank() == 0) g_odata[blockIdx.x] = mySum;`, where nvcc computes
    # thread_rank() as (tid.z * ntid.y + tid.y) * ntid.x + tid.x with two mad.lo: zero only where each index is
    rank = ("\tmov.u32 %r1, %ntid.x;\n\tmov.u32 %r2, %tid.x;\n\tmov.u32 %r3, %ntid.y;\n\tmov.u32 %r4, %tid.z;\n"
            "\tmov.u32 %r5, %tid.y;\n\tmad.lo.s32 %r6, %r3, %r4, %r5;\n\tmad.lo.s32 %r7, %r6, %r1, %r2;\n")
    store = "\tst.global.f32 [%rd2], %f1;"
    block = ((16, 16, 2), (1, 1, 1))
    assert _races(_ptx(rank + "\tsetp.ne.s32 %p1, %r7, 0;\n\t@%p1 bra $L__END;\n" + store), block) == []
    assert _races(_ptx(rank + "\tsetp.eq.s32 %p1, %r7, 0;\n\t@%p1 bra $L__END;\n" + store), block) == [
        ("thread", ("x", "y", "z"))]
    # a multiplier that may be zero (a loaded value), or a product of two indices, pins nothing
    loaded = rank.replace("mov.u32 %r3, %ntid.y", "ld.global.u32 %r3, [%rd2]")
    assert _races(_ptx(loaded + "\tsetp.ne.s32 %p1, %r7, 0;\n\t@%p1 bra $L__END;\n" + store), block) != []
    product = "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %tid.y;\n\tmul.lo.s32 %r7, %r1, %r2;\n"
    assert _races(_ptx(product + "\tsetp.ne.s32 %p1, %r7, 0;\n\t@%p1 bra $L__END;\n" + store), block) != []


def test_a_thread_index_register_reused_later_still_guards_the_stores_before_it():
    # cuda-samples' threadFenceReduction: `if (tid == 0) g_odata[blockIdx.x] = sdata[0];`, then the last
    # block's loop `int i = tid; while (i < gridDim.x) i += blockSize;` -- nvcc keeps i in the register that
    # held tid.x, so it is written twice, yet the test before the loop reads tid.x itself
    head = "\tmov.u32 %r1, %tid.x;\n\tsetp.ne.s32 %p1, %r1, 0;\n\t@%p1 bra $L__A;\n\tst.global.f32 [%rd2], %f1;\n$L__A:\n"
    loop = "$L__LOOP:\n\tadd.s32 %r1, %r1, 128;\n\tsetp.lt.u32 %p2, %r1, 1000;\n\t@%p2 bra $L__LOOP;\n"
    store_after = "\t@%p1 bra $L__END;\n\tst.global.f32 [%rd2+4], %f1;"
    assert _races(_ptx(head + loop + store_after)) == []
    # a test of the register after the loop (or inside it) reads i, not tid.x: no fact
    late = "\tsetp.ne.s32 %p3, %r1, 0;\n\t@%p3 bra $L__END;\n\tst.global.f32 [%rd2+8], %f1;"
    assert _races(_ptx(head + loop + late)) == [("thread", ("x",))]
    # nor where the later write can reach the test around a loop enclosing both
    around = ("$L__TOP:\n\tsetp.ne.s32 %p3, %r1, 0;\n\t@%p3 bra $L__B;\n\tst.global.f32 [%rd2+8], %f1;\n$L__B:\n"
              "\tadd.s32 %r1, %r1, 128;\n\tsetp.lt.u32 %p2, %r1, 1000;\n\t@%p2 bra $L__TOP;\n")
    assert _races(_ptx("\tmov.u32 %r1, %tid.x;\n" + around)) == [("thread", ("x",))]


def test_block_race_message_and_per_block_address():
    body = "\tmov.u32 %r1, %tid.x;\n\tsetp.ne.s32 %p1, %r1, 0;\n\t@%p1 bra $L__END;\n\t.loc 1 20 9\n"
    (race,) = find_store_races(_ptx(body + "\tst.global.f32 [%rd2+8], %f1;"), "k", *MANY_BLOCKS)
    assert (race.kind, race.threads) == ("block", "threads with tid.x == 0 of every block")
    assert race.message("kern", "kernels/k.cu") == (
        'Kernel "kern" stores to global memory at an address that is the same for every block of the grid '
        "(kernels/k.cu:20, st.global.f32 [%rd2+8], %f1) from more than one block: a write race; guard it so one "
        "block stores (if (blockIdx.x == 0)), or use an atomic.")
    per_block = "\tmov.u32 %r2, %ctaid.x;\n\tmul.wide.u32 %rd3, %r2, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n"
    assert _races(_ptx(body + per_block + "\tst.global.f32 [%rd4], %f1;"), MANY_BLOCKS) == []
    assert _races(_ptx(body + "\tst.global.f32 [%rd2], %f1;"), ONE_BLOCK) == []


def test_varying_and_unknown_addresses_atomics_and_other_spaces_are_not_findings():
    tid = "\tmov.u32 %r1, %tid.x;\n\tmul.wide.u32 %rd3, %r1, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n"
    assert _races(_ptx(tid + "\tst.global.f32 [%rd4], %f1;")) == []
    loaded = "\tld.global.u64 %rd5, [%rd2];\n\tst.global.f32 [%rd5], %f1;"  # an address read from memory
    assert _races(_ptx(loaded)) == []
    lane = "\tshfl.sync.idx.b32 %r2, %r3, 0, 31, -1;\n\tmul.wide.u32 %rd3, %r2, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n"
    assert _races(_ptx(lane + "\tst.global.f32 [%rd4], %f1;")) == []
    others = ("\tred.global.add.f32 [%rd2], %f1;\n\tatom.global.add.f32 %f2, [%rd2], %f1;\n"
              "\tst.relaxed.gpu.global.f32 [%rd2], %f1;\n\tst.local.f32 [%rd2], %f1;\n\tst.param.f32 [%rd2], %f1;")
    assert _races(_ptx(others)) == []


def test_generic_store_counts_only_through_a_kernel_parameter_pointer():
    assert _races(_ptx("\tst.f32 [%rd1], %f1;")) == [("thread", ("x",))]
    shared = "\tmov.u64 %rd5, buf;\n\tcvta.shared.u64 %rd6, %rd5;\n\tst.f32 [%rd6], %f1;"
    assert _races(_ptx(shared)) == []
    ret_val = "\tld.param.u64 %rd7, [retval0];\n\tst.f32 [%rd7], %f1;"  # a callee's result: unknown
    assert _races(_ptx(ret_val)) == []


def test_divergent_loop_count_is_thread_varying():
    body = ("\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, 0;\n$L__LOOP:\n\tsetp.ge.u32 %p1, %r2, %r1;\n"
            "\t@%p1 bra $L__DONE;\n\tadd.s32 %r2, %r2, 1;\n\tbra.uni $L__LOOP;\n$L__DONE:\n"
            "\tmul.wide.u32 %rd3, %r2, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n\tst.global.f32 [%rd4], %f1;")
    assert _races(_ptx(body)) == []  # %r2 == tid.x at the store although no instruction reads tid into it


def test_predicated_ret_extents_and_directives():
    body = "\tmov.u32 %r1, %tid.x;\n\tsetp.ne.u32 %p1, %r1, 0;\n\t@%p1 ret;\n\tst.global.f32 [%rd2], %f1;"
    assert _races(_ptx(body)) == []
    assert _races(_ptx(body), ((None, None, None), (1, 1, 1))) == [("thread", ("y", "z"))]
    assert _races(_ptx(body), ((16, 16, 1), (1, 1, 1))) == [("thread", ("y",))]
    store = "\tst.global.f32 [%rd2], %f1;"
    assert _races(_ptx(store), ((1, 1, 1), (1, 1, 1))) == []
    assert _races(_ptx(store), ((1, 1, 1), (None, 1, 1))) == [("block", ("x",))]
    assert _races(_ptx(store, head=".reqntid 1, 1, 1"), ((None, None, None), (1, 1, 1))) == []
    assert _races(_ptx(store, head=".maxntid 1, 1, 1"), ((None, None, None), (1, 1, 1))) == []
    assert _races(_ptx(store, head=".maxntid 256, 1, 1"), ((None, None, None), (1, 1, 1))) == [
        ("thread", ("x", "y", "z"))]  # .maxntid bounds the product only: (16, 16, 1) is allowed


def test_contradictory_facts_make_a_store_unreachable():
    # `if (threadIdx.x != 0 || blockIdx.x == 0) return;` in a one-block grid: no thread reaches the store
    body = ("\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ctaid.x;\n\tsetp.ne.s32 %p1, %r1, 0;\n"
            "\tsetp.eq.s32 %p2, %r2, 0;\n\tor.pred %p3, %p1, %p2;\n\t@%p3 bra $L__END;\n\tst.global.f32 [%rd2], %f1;")
    assert _races(_ptx(body), ONE_BLOCK) == []
    (race,) = find_store_races(_ptx(body), "k", (256, 1, 1), (None, 1, 1))
    assert (race.kind, race.dims) == ("block", ("x",))
    assert race.threads == "threads with tid.x == 0 of blocks with ctaid.x != 0"


def test_inlined_locations_resolve_to_the_kernel_line_and_findings_dedupe_per_line():
    body = ("\t.loc 1 29 5\n\t.loc 2 7 3, function_name $L__info_string0, inlined_at 1 30 5\n"
            "\t.loc 3 9 1, function_name $L__info_string1, inlined_at 2 7 3\n\tst.global.f32 [%rd2], %f1;\n"
            "\tst.global.f32 [%rd2+4], %f1;\n\t.loc 1 0 5\n\tst.global.f32 [%rd2+8], %f1;\n"
            "\t.loc 1 31 5\n\tst.global.f32 [%rd2+12], %f1;")
    got = find_store_races(_ptx(body), "k", *ONE_BLOCK)
    assert [(r.line, r.file_index, r.file, r.instruction) for r in got] == [
        (30, 1, "/tmp/x/k.cu", "st.global.f32 [%rd2], %f1"), (31, 1, "/tmp/x/k.cu", "st.global.f32 [%rd2+12], %f1")]


def test_no_location_message_and_missing_entry():
    ptx = _ptx("\tst.global.f32 [%rd2], %f1;").replace("\t.loc 1 10 0\n", "")
    (race,) = find_store_races(ptx, "k", (16, 16, 1), (1, 1, 1))
    assert race.line is None and race.file is None
    assert "(kernels/k.cu, st.global.f32 [%rd2], %f1)" in race.message("kern", "kernels/k.cu")
    assert "(if (threadIdx.x == 0 && threadIdx.y == 0))" in race.message("kern", "kernels/k.cu")
    with pytest.raises(ValueError, match="no PTX entry 'nope'"):
        find_store_races(ptx, "nope")


# ---------------------------------------------------------------------------------------------------------
# compiled (nvcc)


@pytest.mark.nvcc
@pytest.mark.parametrize("source", sorted(p.name for p in KERNELS.glob("*.cu")))
def test_shipped_kernels_have_no_store_races(tmp_path, source):
    from nvcc_flags import package_include_flags  # the CUTLASS kernels include the wheel's headers

    extents = _launch_extents()
    src = tmp_path / source
    src.write_text((KERNELS / source).read_text())
    ptx = _nvcc(src, tuple(package_include_flags()))
    assert entries(ptx)
    for entry in entries(ptx):
        block, grid = extents.get(entry, ((None, None, None), (None, None, None)))
        assert find_store_races(ptx, entry, block, grid) == [], entry


MUTANTS = {
    "guard deleted": ("aux_heads_loss_ema_update", "    if (threadIdx.x != 0 || blockIdx.x != 0) return;\n", ""),
    "guard != -> ==": ("aux_heads_loss_ema_update", "if (threadIdx.x != 0 ||", "if (threadIdx.x == 0 ||"),
    "tid == 0 deleted": ("aux_label_scale_ema_update", "    if (tid == 0) {\n", "    {\n"),
}


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_real_mutants_of_the_ema_kernel_are_found(tmp_path, name):
    entry, old, new = MUTANTS[name]
    text = EMA.read_text()
    assert text.count(old) == 1
    src = tmp_path / EMA.name
    src.write_text(text.replace(old, new))
    ptx = _nvcc(src)
    block, grid = _launch_extents()[entry]
    races = find_store_races(ptx, entry, block, grid)
    assert races and all(r.kind == "thread" and r.file == str(src) for r in races)
    (other,) = set(entries(ptx)) - {entry}  # the file's other entry is untouched
    assert find_store_races(ptx, other, *_launch_extents()[other]) == []
    if name == "guard deleted":
        assert [r.line for r in races] == [76, 77, 79]  # the three EMA updates, one line up
        assert races[0].message(entry, "kernels/aux_heads_loss_ema_kernel.cu") == (
            'Kernel "aux_heads_loss_ema_update" stores to global memory at an address that is the same for every '
            "thread of a block (kernels/aux_heads_loss_ema_kernel.cu:76, st.global.f32 [%rd8], %f7) from more than "
            "one thread: a write race; guard it so one thread stores (if (threadIdx.x == 0)), or use an atomic.")
    elif name == "guard != -> ==":
        assert [(r.line, r.threads) for r in races] == [(line, "threads with tid.x != 0") for line in (77, 78, 80)]
    else:
        assert [(r.line, r.threads, r.instruction) for r in races] == [
            (68, "every thread of the block", "st.global.f32 [%rd25], %f177")]


SYNTHETIC = r"""
extern "C" __global__ void guarded(float* out, float v) { if (threadIdx.x == 0) *out = v; }
extern "C" __global__ void unguarded(float* out, float v) { *out = v; }
extern "C" __global__ void per_block(float* out, float v) { if (threadIdx.x == 0) out[blockIdx.x] = v; }
extern "C" __global__ void per_thread(float* out, float v) { out[threadIdx.x] = v; }
extern "C" __global__ void per_warp(float* out, float v) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) out[warp] = v;
}
extern "C" __global__ void atomic(float* out, float v) { atomicAdd(out, v); }
extern "C" __global__ void first_warp(float* out, float v) { if (threadIdx.x < 32) *out = v; }
extern "C" __global__ void corner(float* out, float v) { if (threadIdx.x == 0 && threadIdx.y == 0) *out = v; }
extern "C" __global__ void counted(float* out, const int* n, float v) {
    int k = 0;
    for (int i = 0; i < n[threadIdx.x]; ++i) k += 3;
    out[k] = v;
}
"""
B256_G1: tuple[Dims, Dims] = ((256, 1, 1), (1, 1, 1))
B256_G64: tuple[Dims, Dims] = ((256, 1, 1), (64, 1, 1))
B1_G1: tuple[Dims, Dims] = ((1, 1, 1), (1, 1, 1))
B16x16_G1: tuple[Dims, Dims] = ((16, 16, 1), (1, 1, 1))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> str:
    src = tmp_path_factory.mktemp("races") / "synthetic.cu"
    src.write_text(SYNTHETIC)
    return _nvcc(src)


@pytest.mark.nvcc
@pytest.mark.parametrize(("entry", "extents", "expected"), [
    ("guarded", B256_G1, []),
    ("guarded", B256_G64, [("block", ("x",))]),
    ("guarded", B16x16_G1, [("thread", ("y",))]),
    ("unguarded", B256_G1, [("thread", ("x",))]),
    ("unguarded", B1_G1, []),
    ("per_block", B256_G64, []),
    ("per_thread", B256_G1, []),
    ("per_thread", B256_G64, []),  # a thread-indexed address shared by blocks is out of scope
    ("per_warp", B256_G64, []),
    ("atomic", B256_G64, []),
    ("first_warp", B256_G1, [("thread", ("x",))]),
    ("corner", B16x16_G1, []),
    ("counted", B256_G1, []),
])
def test_synthetic_kernels(synthetic, entry, extents, expected):
    assert _races(synthetic, extents, entry) == expected


@pytest.mark.nvcc
def test_synthetic_lines(synthetic):
    (race,) = find_store_races(synthetic, "unguarded", *B256_G1)
    assert (race.line, race.file_index, race.threads) == (3, 1, "every thread of the block")
    assert entries(synthetic) == ["guarded", "unguarded", "per_block", "per_thread", "per_warp", "atomic",
                                  "first_warp", "corner", "counted"]


# ---------------------------------------------------------------------------------------------------------
# the "last block" ticket (threadFenceReduction's idiom): one block, or one thread, of the grid stores

TICKET = """__device__ unsigned int retirementCount = 0;
extern "C" __global__ void shared_flag(const float* x, float* partial, float* out, int n) {
    __shared__ bool amLast;
    __shared__ float s[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int o = 128; o > 0; o >>= 1) { if (tid < o) s[tid] += s[tid + o]; __syncthreads(); }
    if (tid == 0) partial[blockIdx.x] = s[0];
    if (tid == 0) {
        __threadfence();
        unsigned int ticket = atomicInc(&retirementCount, gridDim.x);
        amLast = (ticket == gridDim.x - 1);
    }
    __syncthreads();
    if (amLast) {
        if (tid == 0) {
            float t = 0.0f;
            for (int b = 0; b < gridDim.x; ++b) t += partial[b];
            out[0] = t;
            retirementCount = 0;
        }
    }
}
extern "C" __global__ void direct(const float* x, float* partial, unsigned* count, float* out) {
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = x[blockIdx.x];
        __threadfence();
        if (atomicAdd(count, 1) == gridDim.x - 1) out[0] = 1.0f;
    }
}
extern "C" __global__ void data_flag(const float* x, float* out) {
    __shared__ bool pick;
    if (threadIdx.x == 0) pick = x[blockIdx.x] > 0.0f;
    __syncthreads();
    if (pick && threadIdx.x == 0) out[0] = 1.0f;
}
extern "C" __global__ void varying_target(unsigned* count, float* out) {
    if (threadIdx.x == 0 && atomicAdd(count, 1) == blockIdx.x) out[0] = 1.0f;
}
extern "C" __global__ void exchanged(unsigned* count, float* out) {
    if (threadIdx.x == 0 && atomicExch(count, 1u) == 0u) out[0] = 1.0f;
}
extern "C" __global__ void every_thread_of_the_last_block(const float* x, unsigned* count, float* out) {
    __shared__ bool amLast;
    if (threadIdx.x == 0) amLast = atomicInc(count, gridDim.x) == gridDim.x - 1;
    __syncthreads();
    if (amLast) out[0] = x[0];
}
"""


@pytest.mark.nvcc
@pytest.mark.parametrize(("entry", "expected"), [
    ("shared_flag", []),  # amLast: only the block that drew the last ticket; tid == 0 in it
    ("direct", []),  # atomicAdd(count, 1) == gridDim.x - 1 in the one thread that drew it
    ("data_flag", [("block", ("x",))]),  # a flag from data: every block may hold it
    ("varying_target", [("block", ("x",))]),  # each block compares with its own index: several may win
    ("exchanged", [("block", ("x",))]),  # atomicExch hands no thread its own value
    ("every_thread_of_the_last_block", [("thread", ("x",))]),  # one block, but all of its threads
])
def test_the_last_block_ticket_pins_one_block(tmp_path, entry, expected):
    """A value an atomicAdd / atomicInc returns is each caller's own, so comparing it for equality with a
    uniform value holds in one thread of the grid at most, and a shared flag set only from that test holds
    in one block; its stores are no block race. A flag from data, a thread-varying target or an exchange
    pins nothing."""
    src = tmp_path / "ticket.cu"
    src.write_text(TICKET)
    ptx = _nvcc(src)
    assert _races(ptx, ((256, 1, 1), (4, 1, 1)), entry) == expected


@pytest.mark.nvcc
def test_a_thread_index_equal_to_a_kernel_argument_is_one_thread(tmp_path: Path) -> None:
    """vllm's moe_align_block_size: ``if (threadIdx.x == num_experts) *total = ...`` is one thread of the
    block (the argument is the same in every thread); ``>=`` is many, a race."""
    for cond, races in (("==", []), (">=", [("thread", ("x",))])):
        src = tmp_path / f"k{len(races)}.cu"
        src.write_text('extern "C" __global__ void k(int* total, int n) {\n'
                       f"    if ((int)threadIdx.x {cond} n) *total = (int)threadIdx.x * 2;\n}}\n")
        assert _races(_nvcc(src), ((1024, 1, 1), (1, 1, 1))) == races, cond


_GLOBAL_INDEX = """extern "C" __global__ void upd(const unsigned n_elements, const float b, const float* __restrict__ g, float* __restrict__ m) {
    const unsigned i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i >= n_elements) return;
    *m = b * *m + (1 - b) * *g;
}
extern "C" __global__ void first_only(const unsigned n, const float* __restrict__ g, float* __restrict__ m) {
    const unsigned i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i >= n) return;
    if (i COND) *m = *g;
}
"""


@pytest.mark.nvcc
@pytest.mark.parametrize(("entry", "cond", "pinned", "expected"), [
    ("upd", "== 0", {0: 1}, []),  # tiny-cuda-nn's novo_update_per_layer_second_moment, launched with n_elements = 1
    ("upd", "== 0", {0: 2}, [("thread", ("x",))]),  # two threads store
    ("upd", "== 0", {}, [("thread", ("x",))]),  # n not known: any number of threads
    ("first_only", "== 0", {}, []),  # the global index 0 is one thread of the grid
    ("first_only", "< 1", {}, []),
    ("first_only", "<= 1", {}, [("thread", ("x",))]),  # two
])
def test_the_global_index_pinned_to_zero_is_one_thread(tmp_path: Path, entry: str, cond: str, pinned: dict[int, int],
                                                       expected: list) -> None:  # fmt: skip
    """``i = threadIdx.x + blockIdx.x * blockDim.x`` is zero in one thread of the grid: ``if (i == 0)``, and
    ``if (i >= n) return;`` with every launch passing n = 1 (the contract's scalar), leave one thread; each
    was a false STORE_RACE (tiny-cuda-nn trial)."""
    src = tmp_path / "g.cu"
    src.write_text(_GLOBAL_INDEX.replace("COND", cond))
    races = find_store_races(_nvcc(src), entry, (128, 1, 1), (None, 1, 1), pinned)
    assert [(r.kind, r.dims) for r in races] == expected


def test_a_scalar_the_launches_agree_on_is_pinned(tmp_path: Path) -> None:
    """The positions and values :func:`audit.cuda.static.pinned_scalars` reads from a contract: integer
    scalars with one value at every launch (a literal here), never a float or a dim that varies."""
    from audit.cuda.static import pinned_scalars
    from audit.load import load_contracts

    cs = load_contracts(tmp_path / "contracts", tmp_path, texts={"contracts/k.toml": """
[dims]
n = { min = 1, max = 64 }
[[kernel]]
name = "upd"
source = "k.cu"
stage = "optimizer"
grid = [1, 1, 1]
block = [128, 1, 1]
params = [
  { name = "one", kind = "scalar", dtype = "u32", value = 1 },
  { name = "b", kind = "scalar", dtype = "f32", value = 0.5 },
  { name = "n", kind = "scalar", dtype = "i32", value = "n" },
  { name = "m", dtype = "f32", shape = [1], role = "inout" },
]
"""})
    (k,) = cs.kernels
    assert pinned_scalars(None, k) == {0: 1}
