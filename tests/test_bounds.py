"""The static loop-bounds check (audit.cuda.bounds): constant-bound loops indexing local arrays out of bounds.

Pure source analysis, no nvcc and no GPU: the shipped kernels must come out clean, one-token mutants of
them (``u < kQuads`` -> ``u <= kQuads``) must be found, and small synthetic sources pin the rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.cuda.bounds import Instance, Overrun, find_overruns, integer_constants
from audit.hashing import include_closure

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
SHIPPED = sorted([*KERNELS.glob("*.cu"), *KERNELS.glob("*.cuh")])


def header_constants(path: Path) -> dict[str, int]:
    """The integer constants of every header ``path`` includes (a name two headers disagree on is dropped)."""
    out: dict[str, int | None] = {}
    for header in include_closure(path, []):
        if header != path.resolve():
            for name, value in integer_constants(header.read_text()).items():
                out[name] = value if out.get(name, value) == value else None
    return {name: value for name, value in out.items() if value is not None}


def mutant(name: str, old: str, new: str) -> str:
    """The shipped kernel ``name`` with ``old`` replaced by ``new``, which must occur exactly once."""
    text = (KERNELS / name).read_text()
    assert text.count(old) == 1, f"{name}: {old!r} occurs {text.count(old)} times; the kernel changed"
    return text.replace(old, new)


def overruns(name: str, old: str) -> list[Overrun]:
    """The findings of the one-token mutant that turns the first `` < `` of ``old`` into `` <= ``."""
    return find_overruns(mutant(name, old, old.replace(" < ", " <= ", 1)), header_constants(KERNELS / name))


def check(src: str, constants: dict[str, int] | None = None) -> list[tuple[int, str, int, int, int]]:
    """(line, array, dim, low, high) of each finding of a synthetic source."""
    return [(o.line, o.array, o.dim, o.low, o.high) for o in find_overruns(src, constants)]


# ---------------------------------------------------------------------------------------------------------
# the shipped tree


def test_the_shipped_folder_has_kernels_and_headers():
    names = {p.name for p in SHIPPED}
    assert {"aux_heads_loss_ema_kernel.cu", "aux_trunk_kernel.cu", "aux_common.cuh", "sgemm_tile.cuh"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_kernels_have_no_findings(path: Path):
    found = find_overruns(path.read_text(), header_constants(path))
    assert [o.message(f"kernels/{path.name}") for o in found] == []


def test_header_constants_reach_the_kernels():
    consts = header_constants(KERNELS / "aux_trade_outcome_loss_reduce_kernel.cu")
    assert consts["AUX_K_MAX"] == 8 and consts["ISV_TOTAL_DIM"] == 118
    assert integer_constants((KERNELS / "aux_trunk_kernel.cu").read_text())["kFwdTN"] == 4


# ---------------------------------------------------------------------------------------------------------
# one-token mutants of the shipped kernels

EMA = "aux_heads_loss_ema_kernel.cu"
NEXT_BAR = "aux_next_bar_loss_reduce_kernel.cu"
TRADE = "aux_trade_outcome_loss_reduce_kernel.cu"
TRUNK = "aux_trunk_kernel.cu"
TAIL = "undefined behaviour the compiler may hide."


def test_ema_store_loop_message_is_pinned():
    found = overruns(EMA, "u < kQuads; ++u) {\n            const int q")
    assert [o.message("kernels/aux_heads_loss_ema_kernel.cu") for o in found] == [
        'kernels/aux_heads_loss_ema_kernel.cu:49: "v[u]" indexes the local array "v" of 8 elements (declared at '
        f"line 45) with u = 0 .. 8 (the loop at line 47): index 8 is out of bounds, {TAIL}"
    ]
    assert found[0] == Overrun(49, 13, "v", 8, 0, 45, "u", 0, 8, (("u", 0, 8, 47),), use="v[u]")


def test_ema_single_statement_read_loop():
    found = overruns(EMA, "u < kQuads; ++u)\n            sum +=")
    assert [(o.line, o.array, o.high, o.loops) for o in found] == [(53, "v", 8, (("u", 0, 8, 52),))] * 4
    assert len({o.col for o in found}) == 4  # the four reads .x .y .z .w, each its own use


def test_next_bar_store_loop():
    found = overruns(NEXT_BAR, "u < kQuads; ++u) {\n            const int q")
    assert [(o.line, o.array, o.size, o.decl_line, o.high) for o in found] == [(42, "p", 4, 36, 4), (43, "y", 4, 37, 4)]


def test_next_bar_loop_with_break_is_still_reported():
    found = overruns(NEXT_BAR, "u < kQuads; ++u) {\n            if (q0")
    assert {(o.line, o.array) for o in found} == {(line, a) for line in (48, 49, 50, 51) for a in ("p", "y")}
    assert {o.loops for o in found} == {(("u", 0, 4, 46),)}


def test_trade_outcome_label_loops():
    store = overruns(TRADE, "u < kQuads; ++u) {\n                const int q")
    assert [(o.line, o.array, o.size, o.decl_line, o.index, o.high) for o in store] == [(69, "lab", 4, 65, "u", 4)]
    read = overruns(TRADE, "u < kQuads; ++u) {\n                const int b")
    assert [(o.line, o.array, o.loops) for o in read] == [(n, "lab", (("u", 0, 4, 72),)) for n in (74, 75, 76, 77)]


def test_trunk_bias_loop_single_statement_body():
    found = overruns(TRUNK, "c < kFwdTN; ++c) bias[c]")
    assert [(o.line, o.col, o.array, o.size, o.dim, o.decl_line, o.low, o.high) for o in found] == [
        (62, 39, "bias", 4, 0, 60, 0, 4)
    ]


def test_trunk_epilogue_loop_messages_are_pinned():
    found = overruns(TRUNK, "c < kFwdTN; ++c) v[c]")
    assert [o.message("kernels/aux_trunk_kernel.cu") for o in found] == [
        'kernels/aux_trunk_kernel.cu:71: "v[c]" indexes the local array "v" of 4 elements (declared at line 69) '
        f"with c = 0 .. 4 (the loop at line 71): index 4 is out of bounds, {TAIL}",
        'kernels/aux_trunk_kernel.cu:71: "acc[r][c]" indexes dimension 2 of the local array "acc" of 4 elements '
        f"(declared at line 54) with c = 0 .. 4 (the loop at line 71): index 4 is out of bounds, {TAIL}",
        'kernels/aux_trunk_kernel.cu:71: "bias[c]" indexes the local array "bias" of 4 elements (declared at line '
        f"60) with c = 0 .. 4 (the loop at line 71): index 4 is out of bounds, {TAIL}",
    ]
    acc = found[1]
    assert (acc.dim, acc.rank, acc.size, acc.index, acc.use) == (1, 2, 4, "c", "acc[r][c]")


def test_trunk_outer_row_loop_hits_the_first_dimension():
    found = overruns(TRUNK, "r < kFwdTM; ++r) {")
    assert [(o.line, o.array, o.dim, o.size, o.high, o.loops) for o in found] == [
        (71, "acc", 0, 8, 8, (("r", 0, 8, 65),))
    ]


def test_guard_on_another_expression_does_not_hide_the_overrun():
    # `if (j0 + c < SH2) out[j0 + c] = v[c];` bounds j0 + c, not c: v[4] is still read
    found = overruns(TRUNK, "c < kFwdTN; ++c)\n                if (j0")
    assert [(o.line, o.array, o.high) for o in found] == [(77, "v", 4)]


def test_comma_separated_declarators():
    found = overruns("aux_next_bar_backward_kernel.cu", "c < 4; ++c) {\n                    dz[c]")
    assert {(o.array, o.decl_line, o.size) for o in found} == {
        ("dw2", 72, 4), ("h", 72, 4), ("w", 72, 4), ("dz", 68, 4),
    }


def test_guarded_shipped_loop_is_skipped():
    # `for (k <= AUX_K_MAX) if (k < K) l[k] = ...`: the run-time guard on k is not followed, so no report
    assert overruns(TRADE, "k < AUX_K_MAX; ++k)\n        if (k < K) {\n            l[k] = __ldg") == []


# ---------------------------------------------------------------------------------------------------------
# synthetic sources

K = "__global__ void k(float* out, int B, int tid) {\n"


def test_two_dimensional_array():
    src = K + "    float a[4][8];\n    for (int i = 0; i < 4; ++i)\n"
    src += "        for (int j = 0; j <= 8; ++j) a[i][j] = 0;\n}\n"
    (o,) = find_overruns(src)
    assert (o.line, o.array, o.dim, o.size, o.index, o.high, o.loops) == (4, "a", 1, 8, "j", 8, (("j", 0, 8, 4),))
    assert 'indexes dimension 2 of the local array "a" of 8 elements' in o.message("x.cu")


def test_index_over_two_loops_names_both():
    src = K + (
        "    float a[16];\n    for (int i = 0; i < 4; ++i) {\n        for (int j = 0; j <= 4; ++j)\n"
        "            a[i * 4 + j] = 0;\n    }\n}\n"
    )
    (o,) = find_overruns(src)
    assert (o.index, o.low, o.high, o.loops) == ("i * 4 + j", 0, 16, (("i", 0, 3, 3), ("j", 0, 4, 4)))
    assert o.message("x.cu") == (
        'x.cu:5: "a[i * 4 + j]" indexes the local array "a" of 16 elements (declared at line 2) with i = 0 .. 3 '
        f"(the loop at line 3) and j = 0 .. 4 (the loop at line 4): index 16 is out of bounds, {TAIL}"
    )


def test_shared_array():
    src = K + "    __shared__ float s[32];\n    for (int i = 0; i <= 32; i++) s[i] = 0.0f;\n}\n"
    (o,) = find_overruns(src)
    assert o.shared and o.high == 32
    assert 'indexes the shared array "s" of 32 elements (declared at line 2)' in o.message("x.cu")


def test_counting_down():
    src = K + "    float a[8];\n    for (int i = 8; i >= 0; --i) a[i] = 1.0f;\n}\n"
    (o,) = find_overruns(src)
    assert (o.low, o.high, o.loops) == (0, 8, (("i", 8, 0, 3),))
    assert "with i = 8 .. 0 (the loop at line 3): index 8 is out of bounds" in o.message("x.cu")


def test_step_two():
    assert check(K + "    float a[8];\n    for (int i = 0; i < 10; i += 2) a[i] = 0;\n}\n") == [(3, "a", 0, 0, 8)]
    clean = K + "    float a[8];\n    for (int i = 0; i < 8; i += 2) { a[i] = 0; a[i + 1] = 0; }\n}\n"
    assert check(clean) == []
    assert check(K + "    float a[8];\n    for (int i = 7; i > 0; i -= 2) a[i + 1] = 0;\n}\n") == [(3, "a", 0, 2, 8)]


def test_negative_index():
    src = K + "    float a[8];\n    for (int i = 0; i < 8; ++i) out[i] = a[i - 1];\n}\n"
    (o,) = find_overruns(src)
    assert (o.index, o.low, o.high) == ("i - 1", -1, 6)
    assert "index -1 is out of bounds" in o.message("x.cu")


def test_c_division_truncates_toward_zero():
    src = K + "    float a[8];\n    for (int i = 0; i < 8; ++i) out[i] = a[(i - 7) / 2];\n}\n"
    assert check(src) == [(3, "a", 0, -3, 0)]  # (0 - 7) / 2 == -3 in C, not -4


def test_constants_from_define():
    src = "#define N 4\n#define M (N * 2)  // eight\n" + K + "    float a[M];\n"
    src += "    for (int i = 0; i <= M; ++i) a[i] = 0;\n}\n"
    assert check(src) == [(5, "a", 0, 0, 8)]
    assert integer_constants(src) == {"N": 4, "M": 8}


def test_constants_from_headers():
    src = K + "    float a[kN];\n    for (int i = 0; i <= kN; ++i) a[i] = 0;\n}\n"
    # without the header's constants kN is not evaluated: the loop up to the extent, inclusive, is still found
    assert [(o.line, o.array, o.extent) for o in find_overruns(src)] == [(3, "a", "kN")]
    assert check(src, {"kN": 4}) == [(3, "a", 0, 0, 4)]


def test_ambiguous_redefinition_is_ignored():
    src = "#if WIDE\n#define N 8\n#else\n#define N 4\n#endif\n" + K
    src += "    float a[N];\n    for (int i = 0; i < 8; ++i) a[i] = 0;\n}\n"
    assert check(src) == []
    assert "N" not in integer_constants(src)
    twice = "namespace { constexpr int kA = 4; }\n__device__ void f() { constexpr int kA = 8; }\n"
    assert integer_constants(twice) == {}
    assert check(K + "    float a[4];\n    for (int i = 0; i <= N; ++i) a[i] = 0;\n}\n#define N 4\n", {"N": 8}) == []


def test_integer_constants_forms():
    src = (
        "#define HEX 0x10u\n#define SHIFTED (1 << 3)\n#define FLOAT 1e-6f\n#define CALL(x) (x)\n"
        "namespace {\nconstexpr int kA = 4;\nstatic constexpr unsigned kB = kA * 2 + 1;\nconst int kC = -(kB % 4);\n"
        "constexpr size_t kD = HEX >> 2;\nconstexpr int kE = 7 / -2;\nconstexpr float kF = 1.0f;\n"
        "constexpr int kNotConst = kMissing;\n}\n"
        "__global__ void k(int n) {\n    constexpr int kLocal = kA + 1;\n    const int tid = threadIdx.x;\n}\n"
        "template <int N> struct S { static constexpr int kT = N / 4; };\n"
    )
    expected = {"HEX": 16, "SHIFTED": 8, "kA": 4, "kB": 9, "kC": -1, "kD": 4, "kE": -3, "kLocal": 5}
    assert integer_constants(src) == expected


def test_in_bounds_loops_are_clean():
    src = (
        "namespace { constexpr int kQuads = 8; }\n" + K + "    float4 v[kQuads];\n"
        "    for (int u = 0; u < kQuads - 1; ++u) v[u + 1] = v[u];\n"
        "    for (int u = 0; u < kQuads; u++) { v[u] = v[kQuads - 1 - u]; }\n"
        "    for (int u = kQuads - 1; u >= 0; u--) v[u].x = 0.0f;\n"
        "    for (int u = 0; u != kQuads; ++u) v[u % kQuads] = v[(u + 1) % kQuads];\n}\n"
    )
    assert check(src) == []


def test_non_constant_bound_is_skipped():
    assert check(K + "    float a[4];\n    for (int b = 0; b < B; ++b) a[b] = 0;\n}\n") == []
    assert check(K + "    float a[4];\n    for (int b = tid; b < 8; ++b) a[b] = 0;\n}\n") == []


def test_unknown_identifier_or_construct_in_index_is_skipped():
    for index in ("u + tid", "(int)u", "u ? 1 : 9", "idx[u]", "f(u)", "sizeof(u)"):
        src = K + f"    float v[4];\n    int idx[8];\n    for (int u = 0; u < 8; ++u) out[u] = v[{index}];\n}}\n"
        assert check(src) == [], index


def test_constant_index_is_not_a_loop_finding():
    assert check(K + "    float v[4];\n    for (int u = 0; u < 8; ++u) out[u] = v[4];\n}\n") == []


def test_loop_variable_modified_in_body_is_skipped():
    for change in ("u += 1;", "++u;", "u = 7;", "u--;", "bump(&u);"):
        src = K + f"    float v[4];\n    for (int u = 0; u <= 4; ++u) {{ v[u] = 0; {change} }}\n}}\n"
        assert check(src) == [], change


def test_shadowing_parameter_and_inner_declaration():
    src = (
        "__device__ void g(float* v) {\n    for (int u = 0; u <= 8; ++u) v[u] = 0;\n}\n" + K + "    float v[4];\n"
        "    {\n        float* v = out;\n        for (int u = 0; u <= 8; ++u) v[u] = 0;\n    }\n"
        "    for (int u = 0; u <= 4; ++u) v[u] = 1;\n}\n"
    )
    assert check(src) == [(10, "v", 0, 0, 4)]  # only the outer local array, after the inner block


def test_pointer_global_member_and_template_extents_are_not_local_arrays():
    src = (
        "__device__ float g[4];\nstruct S { float m[4]; };\n"
        "template <int N> __device__ void t(S s, float* p) {\n    float a[N];\n    float (*q)[4] = nullptr;\n"
        "    for (int i = 0; i <= 4; ++i) { a[i] = g[i] + s.m[i] + p[i]; }\n}\n"
        "constexpr int N = 4;\n"
    )
    assert check(src) == []


def test_other_variable_and_inner_loop_variable():
    src = K + (
        "    float a4[4];\n    float a8[8];\n    for (int i = 0; i < 8; ++i)\n"
        "        for (int j = 0; j < 4; ++j) a4[j] = a8[i];\n}\n"
    )
    assert check(src) == []
    shadowed = K + "    float a[4];\n    for (int i = 0; i < 8; ++i)\n"
    shadowed += "        for (int i = 0; i < 4; ++i) a[i] = 0;\n}\n"
    assert check(shadowed) == []  # the inner i shadows the outer one


def test_guard_comparing_the_loop_variable_skips_the_use():
    src = K + (
        "    float l[8];\n    for (int k = 0; k <= 8; ++k)\n        if (k < B) l[k] = 0;\n"
        "    for (int k = 0; k <= 8; ++k) out[k] = k < 8 ? l[k] : 0.0f;\n}\n"
    )
    assert check(src) == []
    unguarded = K + (
        "    float l[8];\n    for (int k = 0; k <= 8; ++k) {\n        if (k + tid < B) break;\n"
        "        l[k] = 0;\n    }\n}\n"
    )
    assert check(unguarded) == [(5, "l", 0, 0, 8)]


def test_evaluation_cap_skips_huge_products():
    nest = K + "    float a[4];\n    for (int i = 0; i < N; ++i)\n        for (int j = 0; j < N; ++j) a[i + j] = 0;\n"
    nest += "}\n"
    assert check(nest, {"N": 1000}) == []  # 10^6 evaluations: above the cap
    assert check(nest, {"N": 100}) == [(4, "a", 0, 0, 198)]


def test_findings_are_sorted_and_deduplicated():
    src = K + "    float a[2], b[2];\n    for (int i = 0; i <= 2; ++i) { b[i] = a[i]; a[i] = b[i]; }\n}\n"
    found = find_overruns(src)
    assert [(o.line, o.col, o.array) for o in found] == [(3, 36, "b"), (3, 43, "a"), (3, 49, "a"), (3, 56, "b")]
    assert {o.decl_line for o in found} == {2}


# -- a loop up to an extent the check cannot evaluate, inclusive ----------------------------------------


SYMBOLIC = ("template <int ROWS, int NT>\nstruct Loader {\n    static constexpr int kPer = ROWS / NT;\n    float reg[kPer];\n"
            "    __device__ void load(const float* src) {\n        for (int p = 0; p <= kPer; ++p) reg[p] = src[p];\n    }\n};\n")


def test_a_loop_up_to_a_template_extent_inclusive_is_one_past_the_end_whatever_its_value():
    (o,) = find_overruns(SYMBOLIC)
    assert (o.line, o.array, o.extent, o.index, o.loops) == (6, "reg", "kPer", "p", (("p", 0, 0, 6),))
    assert o.message("k.cuh") == (
        'k.cuh:6: "reg[p]" indexes the local array "reg" of kPer elements (declared at line 4) with p = 0 up to kPer '
        "inclusive (the loop at line 6): index kPer is out of bounds whatever its value, undefined behaviour the "
        "compiler may hide.")


@pytest.mark.parametrize("change", [
    ("p <= kPer", "p < kPer"),  # the correct loop
    ("reg[p] = src[p]", "if (p < kPer) reg[p] = src[p]"),  # guarded
    ("reg[p] = src[p]", "reg[p - 1] = src[p]"),  # another index than the loop variable: not evaluated
    ("int p = 0", "int p = 1"),  # a start other than 0: the loop may not run at all
    ("++p)", "p += 2)"),  # another step: it may jump over kPer
    ("reg[p] = src[p];", "{ reg[p] = src[p]; ++p; }"),  # the body moves the variable
    ("float reg[kPer]", "float reg[kPer + 1]"),  # another extent text: not compared
])
def test_what_the_symbolic_case_does_not_follow_is_skipped(change):
    old, new = change
    assert SYMBOLIC.count(old) == 1
    assert find_overruns(SYMBOLIC.replace(old, new)) == []


# A local object of an array class template is an array of its second template argument's extent: the
# H100 mutation run of 5 December left cutlass_elu.cuh's `i < N` -> `i <= N` over `cutlass::Array<T, N> out`
# alive (a write one past a register fragment that nvcc drops), which no check read.
ARRAY_OBJECTS = """\
template <typename T, int N>
struct Elu {
    __device__ cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& frag) const {
        cutlass::Array<T, N> out;
        for (int i = 0; i < N; ++i) out[i] = frag[i];
        return out;
    }
};
__global__ void k(float* o) {
    std::array<float, 4> v;
    for (int i = 0; i < 4; ++i) v[i] = o[i];
    const cute::array<int, 8> w{};
    cutlass::AlignedArray<float, 8, 16> x, y;
    for (int i = 0; i < 8; ++i) { x[i] = w[i]; y[i] = 1; }
}
"""


def test_array_class_template_objects_are_local_arrays():
    assert find_overruns(ARRAY_OBJECTS) == []
    bad = ARRAY_OBJECTS.replace("i < N;", "i <= N;").replace("i < 4;", "i <= 4;").replace("{ x[i] = w[i]; y[i] = 1; }", "{ y[i + 1] = w[i]; }")
    found = [(o.line, o.array, o.size or o.extent, o.high) for o in find_overruns(bad)]
    assert found == [(5, "out", "N", 0), (11, "v", 4, 4), (14, "y", 8, 8)]
    assert find_overruns(bad)[0].message("cutlass_elu.cuh") == (
        'cutlass_elu.cuh:5: "out[i]" indexes the local array "out" of N elements (declared at line 4) with i = 0 up to N '
        "inclusive (the loop at line 5): index N is out of bounds whatever its value, undefined behaviour the "
        "compiler may hide.")


@pytest.mark.parametrize("decl", [
    "std::array<float, 4>* v = nullptr;",  # a pointer to one
    "std::array<float, 4>& v = *q;",  # a reference
    "Foo<float, 4> v;",  # another class template
    "std::vector<float> v;",  # no extent argument
    "Outer<int>::array<float, 4> v;",  # a member template of a class template instance: not followed
])
def test_what_is_not_an_array_object(decl):
    src = f"__global__ void k(float* o, std::array<float, 4>* q) {{\n    {decl}\n    for (int i = 0; i <= 4; ++i) v[i] = o[i];\n}}\n"
    assert find_overruns(src) == []


def test_the_kcontig_loader_survivor_of_sgemm_tile_is_found():
    """sgemm_tile.cuh ror:43:27:0 (H200 sample of 4 December): p <= kPer over float4 reg[kPer]."""
    header = KERNELS / "sgemm_tile.cuh"
    text = header.read_text()
    lines = text.splitlines(keepends=True)
    assert lines[42].strip() == "for (int p = 0; p < kPer; ++p) {"  # line 43: the KContigLoader::load loop
    lines[42] = lines[42].replace("p < kPer", "p <= kPer")
    found = find_overruns("".join(lines), header_constants(header))
    assert {(o.array, o.extent, o.loops[0][3]) for o in found} == {("reg", "kPer", 43)}
    assert find_overruns(text, header_constants(header)) == []


# ---------------------------------------------------------------------------------------------------------
# thread terms of an index, template instances (the SGEMM tile pattern of the foreign trial, findings 8 and 9)

TILE = (
    "#define BS 32\n__global__ void tile(const float* x, float* out) {\n    __shared__ float s[BS * BS];\n"
    "    const int tx = threadIdx.x % BS, ty = threadIdx.x / BS;\n    float acc = 0.f;\n"
    "    for (int d = 0; d < BS; ++d) acc += s[d * BS + tx];\n    out[threadIdx.x] = acc;\n}\n"
)


@pytest.mark.parametrize("use", ["s[d * BS + tx]", "s[d * BS + threadIdx.x % BS]", "s[BS * d + (threadIdx.x) % BS]"])
def test_thread_modulo_term_is_evaluated_over_its_range(use: str) -> None:
    src = TILE.replace("d < BS", "d <= BS").replace("s[d * BS + tx]", use)
    (o,) = find_overruns(src)
    assert (o.line, o.array, o.low, o.high) == (6, "s", 0, 32 * 32 + 31)
    assert o.threads == "threadIdx.x % 32 = 0 .. 31 (the threads of a block of at least 32)"
    assert o.message("k.cu") == (
        f'k.cu:6: "{use}" indexes the shared array "s" of 1024 elements (declared at line 3) with d = 0 .. 32 (the '
        "loop at line 6) and threadIdx.x % 32 = 0 .. 31 (the threads of a block of at least 32): index 1055 is out of "
        "bounds, undefined behaviour the compiler may hide."
    )
    assert find_overruns(TILE.replace("s[d * BS + tx]", use)) == []  # d < BS stays within the tile


@pytest.mark.parametrize(
    "change",
    [
        ("    for (int d", "    if (tx < 16) for (int d"),  # a guard on the thread
        ("    for (int d", "    if (threadIdx.x >= 16) return;\n    for (int d"),  # an early exit of some threads
        ("acc += s[d * BS + tx]", "acc += tx < 1 ? 0.f : s[d * BS + tx]"),
        ("s[d * BS + tx]", "s[ty * BS + d]"),  # threadIdx.x / BS: its range needs the block
        ("s[d * BS + tx]", "s[d * BS + threadIdx.x]"),
        ("s[d * BS + tx]", "s[d * BS + 2 * threadIdx.x % BS]"),  # (2 * tid) % BS: not a bare thread index
        ("const int tx = threadIdx.x % BS,", "int tx = threadIdx.x % BS; tx += 1; const int"),  # assigned again
        ("s[d * BS + tx]", "s[d * BS + threadIdx.y % BS]"),
    ],
)
def test_unknown_or_guarded_thread_term_is_skipped(change: tuple[str, str]) -> None:
    src = TILE.replace("d < BS", "d <= BS").replace(*change)
    assert change[0] in TILE and find_overruns(src) == []


def test_block_extent_of_the_instance_gives_the_thread_range() -> None:
    src = TILE.replace("d < BS", "d <= BS").replace("s[d * BS + tx]", "s[ty * BS + d]")
    (o,) = find_overruns(src, None, [Instance.of("tile", 1024)])
    assert (o.line, o.low, o.high) == (6, 0, 1024)
    assert "and threadIdx.x = 0 .. 1023 (the block of \"tile\"): index 1024 is out of bounds" in o.message("k.cu")
    assert find_overruns(TILE.replace("s[d * BS + tx]", "s[ty * BS + d]"), None, [Instance.of("tile", 1024)]) == []
    assert find_overruns(src, None, [Instance.of("other", 1024)]) == []  # the block of another kernel


TEMPLATE = (
    "template <typename T, const int BS, int kPad = 0>\n__global__ void tile_t(const T* x, T* out) {\n"
    "    __shared__ T s[BS * BS];\n    T acc = 0;\n    for (int d = 0; d < BS; ++d) acc += s[d * BS];\n"
    "    out[threadIdx.x] = acc;\n}\n"
)


def test_template_instance_binds_non_type_parameters() -> None:
    bad = TEMPLATE.replace("d < BS", "d <= BS")
    assert find_overruns(bad) == []  # no instantiation named: the extent is unknown, the use skipped
    (o,) = find_overruns(bad, None, [Instance.of("ns::tile_t<float, 16>")])
    assert (o.line, o.size, o.high, o.instance) == (5, 256, 256, "ns::tile_t<float, 16>")
    assert o.message("k.cu") == (
        'k.cu:5: "s[d * BS]" indexes the shared array "s" of 256 elements (declared at line 3) in '
        '"ns::tile_t<float, 16>" with d = 0 .. 16 (the loop at line 5): index 256 is out of bounds, undefined '
        "behaviour the compiler may hide."
    )
    assert find_overruns(TEMPLATE, None, [Instance.of("tile_t<float, 16>"), Instance.of("tile_t<double, 32>")]) == []
    assert find_overruns(bad, None, [Instance.of("tile_u<float, 16>"), Instance.of("tile_t<float, n>")]) == []


def test_instance_of_parses_cpp_names() -> None:
    assert Instance.of("k") == Instance("k", (), None, "k")
    assert Instance.of("a::b::gemm<float, Tile<2, 3>, (4 > 2) * 8>", 128).args == ("float", "Tile<2, 3>", "(4 > 2) * 8")
