"""The static uninitialised-read check (audit.cuda.uninit, future rule LOCAL_UNINIT_READ).

Pure source analysis, no nvcc and no GPU. The shipped kernels and the build fixtures must come out clean; the
two mutants of ``aux_trade_outcome_forward`` that survived every GPU test (the softmax loop's ``if (k < K)``
deleted, or turned into ``k <= K``) must be found; small synthetic kernels pin the rules, each "ok" case
next to the "bad" one it differs from by one token, so a check that reports nothing fails as surely as one
that reports everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.cuda.uninit import UninitRead, find_uninit_reads, source_uninit_reads

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
BASELINE = REPO / "benchmarks" / "kernels_baseline"  # the SIMT head forwards (shipped until 5 December 2026) and their header
FIXTURES = REPO / "tests" / "data" / "build" / "project" / "kernels"
SHIPPED = sorted([*KERNELS.glob("*.cu"), *KERNELS.glob("*.cuh")])
FIXTURE_SOURCES = sorted(p for p in FIXTURES.glob("*.cu") if p.name != "uninit_read.cu")  # the bad fixture: test_build.py
SIMT_FORWARDS = [BASELINE / "aux_trade_outcome_forward_kernel.cu", BASELINE / "aux_next_bar_forward_kernel.cu", BASELINE / "aux_head_forward.cuh"]
INCLUDE = [KERNELS, BASELINE]
FORWARD = BASELINE / "aux_trade_outcome_forward_kernel.cu"
FWD = "benchmarks/kernels_baseline/aux_trade_outcome_forward_kernel.cu"


def findings(text: str, constants: dict[str, int] | None = None) -> list[tuple[int, str]]:
    """(line, use) of each finding of a source text."""
    return [(u.line, u.use) for u in find_uninit_reads(text, constants)]


def kernel(*body: str, params: str = "const float* x, float* o, int K, int n") -> str:
    """A kernel whose body is ``body`` (one statement a line); its first body line is line 2."""
    return f"__global__ void k({params}) {{\n" + "".join(f"    {line}\n" for line in body) + "}\n"


def forward_mutant(tmp_path: Path, edit) -> list[UninitRead]:
    """The findings of the forward kernel with its lines changed by ``edit`` (a list -> list function), as a
    file next to nothing but the real headers (found through the ``kernels`` include folder)."""
    lines = FORWARD.read_text().split("\n")
    assert lines[47] == "        if (k < K) {" and lines[50] == "        }", "the kernel changed"
    path = tmp_path / FORWARD.name
    path.write_text("\n".join(edit(list(lines))))
    return source_uninit_reads(path, INCLUDE)


# ---------------------------------------------------------------------------------------------------------
# the shipped tree


def test_the_real_forward_kernel_is_clean(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(REPO)  # relative paths, as a project's configuration gives them: include folder "kernels"
    assert source_uninit_reads(Path(FWD), [Path("kernels"), Path("benchmarks/kernels_baseline")]) == []
    assert source_uninit_reads(FORWARD, INCLUDE) == []


@pytest.mark.parametrize("path", SHIPPED + SIMT_FORWARDS + FIXTURE_SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_kernels_and_fixtures_have_no_findings(path: Path):
    assert [u.message(path.name) for u in source_uninit_reads(path, INCLUDE)] == []


def test_the_shipped_folder_is_where_expected():
    names = {p.name for p in SHIPPED}
    assert {"aux_head_forward_cutlass.cu", "aux_common.cuh", "aux_trade_outcome_loss_reduce_kernel.cu"} <= names
    assert all(p.is_file() for p in SIMT_FORWARDS)
    assert len(FIXTURE_SOURCES) >= 5


# ---------------------------------------------------------------------------------------------------------
# the mutants of aux_trade_outcome_forward that no GPU test kills

DELETED_GUARD_MESSAGE = (
    f'{FWD}:48: "l[k]" reads the local array "l" (8 elements, declared at line 35) where k = 0 .. 7 (the loop '
    "at line 47) with no guard, but its elements are written only where k < K (line 39): the elements past "
    "that bound are uninitialised registers (undefined behaviour)."
)
WEAKER_GUARD_MESSAGE = (
    f'{FWD}:49: "l[k]" reads the local array "l" (8 elements, declared at line 35) where k = 0 .. 7 (the loop '
    "at line 47) under k <= K, but its elements are written only where k < K (line 39): the elements past "
    "that bound are uninitialised registers (undefined behaviour)."
)


def test_deleting_the_softmax_guard_line_is_found(tmp_path: Path):
    # line 48 `if (k < K) {` and its closing brace (line 51) deleted: the body runs for every k
    found = forward_mutant(tmp_path, lambda ls: ls[:47] + ls[48:50] + ls[51:])
    # the read inside expf (now line 48) is the only one: the statement's own write initialises l[k]
    # for `sum += l[k]` on the next line
    assert [(u.line, u.use) for u in found] == [(48, "l[k]")]
    assert [u.message(FWD) for u in found] == [DELETED_GUARD_MESSAGE]
    u = found[0]
    assert (u.col, u.guard, u.guard_line, u.read_guard, u.loops) == (25, "k < K", 39, "", (("k", 0, 7, 47),))
    # K in [1, AUX_K_MAX] after the early exit, so l[0] is always written: only elements 1 .. 7 may not be
    assert u.elements == (1, 2, 3, 4, 5, 6, 7)


def test_the_guard_operator_mutant_is_found(tmp_path: Path):
    # what `wireup mutate`'s guard operator makes: `if (k < K) ` cut, the braces kept (lines unchanged)
    def edit(ls: list[str]) -> list[str]:
        ls[47] = ls[47].replace("if (k < K) ", "")
        return ls

    found = forward_mutant(tmp_path, edit)
    assert [(u.line, u.use) for u in found] == [(49, "l[k]")]
    assert found[0].message(FWD) == DELETED_GUARD_MESSAGE.replace(f"{FWD}:48:", f"{FWD}:49:")


def test_the_weaker_softmax_guard_is_found(tmp_path: Path):
    def edit(ls: list[str]) -> list[str]:
        ls[47] = ls[47].replace("k < K", "k <= K")
        return ls

    found = forward_mutant(tmp_path, edit)
    # line 49 reads l[K] before anything wrote it; line 50 reads the (garbage) value line 49 wrote there
    assert [(u.line, u.use) for u in found] == [(49, "l[k]")]
    assert [u.message(FWD) for u in found] == [WEAKER_GUARD_MESSAGE]
    assert found[0].read_guard == "k <= K" and found[0].guard == "k < K"


def test_the_same_mutants_of_the_last_loop_are_found(tmp_path: Path):
    lines = FORWARD.read_text().split("\n")
    assert lines[54] == "        if (k < K) prow[k] = l[k] / sum;"

    def weaker(ls: list[str]) -> list[str]:
        ls[54] = ls[54].replace("k < K", "k <= K")
        return ls

    def deleted(ls: list[str]) -> list[str]:
        ls[54] = ls[54].replace("if (k < K) ", "")
        return ls

    for edit in (weaker, deleted):
        found = forward_mutant(tmp_path, edit)
        assert [(u.line, u.use, u.guard, u.guard_line) for u in found] == [(55, "l[k]", "k < K", 48)]


def test_a_mutated_guard_on_the_writes_is_found_without_the_early_exit_range(tmp_path: Path):
    # the first loop writing one element fewer leaves l[7] unwritten where K == 8
    def edit(ls: list[str]) -> list[str]:
        assert ls[37] == "    for (int k = 0; k < AUX_K_MAX; ++k) {"
        ls[37] = "    for (int k = 0; k < AUX_K_MAX - 1; ++k) {"
        return ls

    found = forward_mutant(tmp_path, edit)
    assert [(u.line, u.use, u.guard, u.elements) for u in found] == [(49, "l[k]", "", (7,))]
    assert found[0].message(FWD) == (
        f'{FWD}:49: "l[k]" reads the local array "l" (8 elements, declared at line 35) where k = 0 .. 7 (the '
        "loop at line 47) under k < K, but no statement before it writes element 7 (the array is first written "
        "at line 40): it is an uninitialised register (undefined behaviour)."
    )


def test_the_early_exit_bounds_the_run_time_value(tmp_path: Path):
    # without `if (K < 1 || K > AUX_K_MAX) return;` nothing bounds K below, so l[0] may be unwritten too
    def edit(ls: list[str]) -> list[str]:
        assert ls[26] == "    if (K < 1 || K > AUX_K_MAX) {"
        ls[26] = "    if (B < 0) {"
        ls[47] = ls[47].replace("if (k < K) ", "")
        return ls

    found = forward_mutant(tmp_path, edit)
    assert [(u.line, u.elements) for u in found] == [(49, tuple(range(8)))]


# ---------------------------------------------------------------------------------------------------------
# synthetic kernels: the rules

WRITE_LT = ("float a[4];", "for (int k = 0; k < 4; ++k)", "    if (k < K) a[k] = x[k];")
WRITE_LE = ("float a[4];", "for (int k = 0; k < 4; ++k)", "    if (k <= K) a[k] = x[k];")
LOOP = "for (int j = 0; j < 4; ++j)"


def test_guarded_write_and_guarded_read_are_fine():
    assert findings(kernel(*WRITE_LT, LOOP, "    if (j < K) o[j] = a[j];")) == []
    assert findings(kernel(*WRITE_LT, LOOP, "    if (K > j) o[j] = a[j];")) == []  # the mirrored comparison
    assert findings(kernel(*WRITE_LT, LOOP, "    if (j < K) { o[j] = a[j]; }")) == []


def test_guarded_write_and_unguarded_read_are_reported():
    src = kernel(*WRITE_LT, LOOP, "    o[j] = a[j];")
    [u] = find_uninit_reads(src)
    assert (u.line, u.col, u.array, u.size, u.decl_line, u.use) == (6, 16, "a", 4, 2, "a[j]")
    assert (u.guard, u.guard_line, u.loops, u.read_guard) == ("k < K", 4, (("j", 0, 3, 5),), "")
    assert u.elements == (0, 1, 2, 3)  # nothing bounds K below


def test_the_message_is_pinned():
    [u] = find_uninit_reads(kernel(*WRITE_LT, LOOP, "    o[j] = a[j];"))
    assert u.message("k.cu") == (
        'k.cu:6: "a[j]" reads the local array "a" (4 elements, declared at line 2) where j = 0 .. 3 (the loop at '
        "line 5) with no guard, but its elements are written only where k < K (line 4): the elements past that "
        "bound are uninitialised registers (undefined behaviour)."
    )
    [u] = find_uninit_reads(kernel(*WRITE_LT, "o[0] = a[2];"))
    assert u.message("k.cu") == (
        'k.cu:5: "a[2]" reads the local array "a" (4 elements, declared at line 2) with no guard, but its '
        "elements are written only where k < K (line 4): the elements past that bound are uninitialised "
        "registers (undefined behaviour)."
    )


def test_the_mirrored_write_guard_is_named_as_written():
    src = kernel("float a[4];", "for (int k = 0; k < 4; ++k)", "    if (K > k) a[k] = x[k];", LOOP, "    o[j] = a[j];")
    assert [(u.line, u.guard) for u in find_uninit_reads(src)] == [(6, "K > k")]


def test_an_unconditional_write_initialises():
    assert findings(kernel("float a[4];", "for (int k = 0; k < 4; ++k) a[k] = x[k];", LOOP, "    o[j] = a[j];")) == []
    # a condition on something other than the loop variable leaves the write unconditional here
    other = ("float a[4];", "for (int k = 0; k < 4; ++k)", "    if (n > 0) a[k] = x[k];")
    assert findings(kernel(*other, LOOP, "    o[j] = a[j];")) == []
    # constant indices
    assert findings(kernel("float a[2];", "a[0] = x[0];", "a[1] = x[1];", "o[0] = a[0] + a[1];")) == []


def test_a_weaker_read_guard_is_reported_and_a_stronger_one_is_not():
    assert findings(kernel(*WRITE_LT, LOOP, "    if (j <= K) o[j] = a[j];")) == [(6, "a[j]")]
    assert findings(kernel(*WRITE_LE, LOOP, "    if (j < K) o[j] = a[j];")) == []
    assert findings(kernel(*WRITE_LE, LOOP, "    if (j <= K) o[j] = a[j];")) == []
    assert findings(kernel(*WRITE_LE, LOOP, "    o[j] = a[j];")) == [(6, "a[j]")]
    [u] = find_uninit_reads(kernel(*WRITE_LT, LOOP, "    if (j <= K) o[j] = a[j];"))
    assert (u.read_guard, u.guard) == ("j <= K", "k < K")


def test_a_different_bound_expression_is_not_reported():
    assert findings(kernel(*WRITE_LT, LOOP, "    if (j < n) o[j] = a[j];")) == []
    assert findings(kernel(*WRITE_LT, LOOP, "    if (j <= n) o[j] = a[j];")) == []


def test_an_upper_part_written_is_followed_too():
    write = ("float a[4];", "for (int k = 0; k < 4; ++k)", "    if (k >= K) a[k] = x[k];")
    assert findings(kernel(*write, LOOP, "    if (j >= K) o[j] = a[j];")) == []
    assert findings(kernel(*write, LOOP, "    if (j > K) o[j] = a[j];")) == []
    assert findings(kernel(*write, LOOP, "    if (j >= K - 1) o[j] = a[j];")) == []  # another E: not followed
    assert findings(kernel(*write, LOOP, "    if (j < K) o[j] = a[j];")) == [(6, "a[j]")]


@pytest.mark.parametrize(
    "read",
    [
        "    f(&a[0]);",  # address taken
        "    f(a);",  # the array passed to a function
        "    float* p = a;",  # aliased
        "    o[j] = *(a + j);",  # pointer arithmetic
        "    g(a[j]);",  # an element passed whole to a function that may take it by reference
        "    memcpy(o, a, sizeof(a));",
    ],
)
def test_an_array_used_other_than_by_index_is_skipped(read: str):
    bad = kernel(*WRITE_LT, LOOP, "    o[j] = a[j];")
    assert findings(bad) == [(6, "a[j]")]
    assert findings(kernel(*WRITE_LT, LOOP, "    o[j] = a[j];", read)) == []


def test_an_element_passed_to_a_math_function_is_a_read():
    assert findings(kernel(*WRITE_LT, LOOP, "    o[j] = fmaxf(o[j], a[j]);")) == [(6, "a[j]")]


@pytest.mark.parametrize(
    "decl",
    ["float a[4] = {0};", "float a[4] = {};", "float a[4]{};", "__shared__ float a[4];", "static float a[4];",
     "float a[4][1];", "Acc a[4];"],
)  # fmt: skip
def test_initialised_shared_static_multidimensional_and_class_arrays_are_skipped(decl: str):
    assert findings(kernel(*WRITE_LT, LOOP, "    o[j] = a[j];")) == [(6, "a[j]")]
    src = kernel(decl, *WRITE_LT[1:], LOOP, "    o[j] = a[j];")
    if "[1]" in decl:
        src = src.replace("a[k]", "a[k][0]").replace("a[j]", "a[j][0]")
    assert findings(src) == []


def test_a_read_before_any_write_of_its_element_is_reported():
    src = kernel("float a[4];", "for (int k = 0; k < 3; ++k) a[k] = x[k];", LOOP, "    o[j] = a[j];")
    [u] = find_uninit_reads(src)
    assert (u.line, u.use, u.guard, u.guard_line, u.elements) == (5, "a[j]", "", 3, (3,))
    assert u.message("k.cu").endswith(
        "with no guard, but no statement before it writes element 3 (the array is first written at line 3): it "
        "is an uninitialised register (undefined behaviour)."
    )
    # a constant index: fully evaluable, so reported; an index of a run-time value is not followed
    assert findings(kernel("float a[4];", "for (int k = 0; k < 3; ++k) a[k] = x[k];", "o[0] = a[3];")) == [(4, "a[3]")]
    assert findings(kernel("float a[4];", "for (int k = 0; k < 3; ++k) a[k] = x[k];", "o[0] = a[n];")) == []
    # nothing written at all: not followed (something the check does not see may fill it)
    assert findings(kernel("float a[4];", "o[0] = a[0];")) == []


def test_a_write_later_in_the_source_does_not_initialise_an_earlier_read():
    src = kernel("float a[4];", LOOP, "    o[j] = a[j];", "for (int k = 0; k < 4; ++k) a[k] = x[k];")
    assert findings(src) == [(4, "a[j]")]
    # ... nor does the write of the read's own statement
    assert findings(kernel("float a[4];", "a[1] = x[1];", "a[0] = a[0] + 1.0f;")) == [(4, "a[0]")]


def test_a_compound_assignment_reads_before_it_writes():
    src = kernel("float a[4];", "a[3] = 0.0f;", LOOP, "    a[j] += x[j];")
    [u] = find_uninit_reads(src)
    assert (u.line, u.use, u.elements) == (5, "a[j]", (0, 1, 2))
    assert findings(kernel("float a[4];", LOOP, "    a[j] = 0.0f;", LOOP, "    a[j] += x[j];")) == []
    # its write counts for later reads, like any write under the same guard
    src = kernel(*WRITE_LT, LOOP, "    a[j] += x[j];", LOOP, "    o[j] = a[j];")
    assert findings(src) == [(6, "a[j]")]
    assert findings(kernel("float a[4];", "++a[2];", "a[0] = 1;")) == [(3, "a[2]")]


@pytest.mark.parametrize(
    "read",
    [
        "    if (j < K && n > 0) o[j] = a[j];",  # a condition it cannot classify
        "    if (n > 0) o[j] = a[j];",
        "    o[j] = j < K ? a[j] : 0.0f;",  # a ternary around the read
        "    o[j] = (j < K && a[j] > 0.0f) ? 1.0f : 0.0f;",  # short-circuit
        "    { if (j >= K) break; o[j] = a[j]; }",  # an exit from the read's loop
        "    { if (j >= K) continue; o[j] = a[j]; }",
        "    { if (j == n) o[j] = a[j]; }",
    ],
)
def test_a_read_under_a_condition_it_cannot_follow_is_not_reported(read: str):
    assert findings(kernel(*WRITE_LT, LOOP, read)) == []


def test_early_exits_bound_the_run_time_value():
    # K >= 4: every element is written
    assert findings(kernel("if (K < 4) return;", *WRITE_LT, LOOP, "    o[j] = a[j];")) == []
    assert findings(kernel("if (K < 3) { o[0] = 0.0f; return; }", *WRITE_LT, LOOP, "    o[j] = a[j];")) == [(7, "a[j]")]
    # a condition around the whole use constrains the same way
    assert findings(kernel("if (K == 4) {", *WRITE_LT, LOOP, "    o[j] = a[j];", "}")) == []
    # an exit on other things is ignored; one on K that the check cannot evaluate silences it
    assert findings(kernel("if (n < 0) return;", *WRITE_LT, LOOP, "    o[j] = a[j];")) == [(7, "a[j]")]
    assert findings(kernel("if (n >= K) return;", *WRITE_LT, LOOP, "    o[j] = a[j];")) == []
    # an exit inside the read's loop, after it, also bounds which iterations read
    assert findings(kernel(*WRITE_LT, LOOP, "{ o[j] = a[j]; if (j + 1 >= K) return; }")) == []


@pytest.mark.parametrize(
    "write",
    [
        "    while (n > 0) { if (k < K) a[k] = x[k]; --n; }",  # a write in a while loop
        "    if (k < K) a[k] = x[k]; else a[k] = 0.0f;",  # an else branch on the loop variable
        "    if (k < K && n > 0) a[k] = x[k];",  # a condition it cannot classify
        "    if (k == 2) a[k] = x[k];",
        "    if (k < K) { if (k < n) a[k] = x[k]; }",  # two guards
        "    if (k < K) a[n] = x[k];",  # a run-time index
        "    o[k] = a[k] = x[k];",  # a write inside an expression
        "    if (k < K) a[k] = x[k], o[k] = 1.0f;",  # a comma expression
        "    if (k < K) { a[k] = x[k]; K = 0; }",  # the bound changes
        "    if (k < K) a[k] = x[k]; auto f = [&]() { a[0] = 1.0f; };",  # a lambda
        "    if (k < K) a[k] = x[k]; float& r = a[0];",  # a reference to an element
        "    if (k < K) a[k] = x[k]; (a[0]) = 1.0f;",
        "    if (k < K) a[k] = x[k]; int s = sizeof(a[0]);",
    ],
)
def test_a_write_it_cannot_follow_skips_the_array(write: str):
    assert findings(kernel(*WRITE_LT, LOOP, "    o[j] = a[j];")) == [(6, "a[j]")]
    assert findings(kernel("float a[4];", "for (int k = 0; k < 4; ++k) {", write, "}", LOOP, "    o[j] = a[j];")) == []


def test_a_non_constant_loop_is_not_followed():
    write = ("float a[4];", "for (int k = 0; k < n; ++k)", "    if (k < K) a[k] = x[k];")
    assert findings(kernel(*write, LOOP, "    o[j] = a[j];")) == []
    assert findings(kernel(*WRITE_LT, "for (int j = 0; j < n; ++j)", "    o[j] = a[j];")) == []


def test_shadowing_and_other_arrays_are_kept_apart():
    inner = ("{", "    float a[4];", "    for (int j = 0; j < 4; ++j) a[j] = 1.0f;", "    o[0] = a[3];", "}")
    src = kernel(*WRITE_LT, *inner, LOOP, "    o[j] = a[j];")
    assert findings(src) == [(11, "a[j]")]  # the outer a, not the inner one (fully written)
    src = kernel(*WRITE_LT, "float b[4];", "for (int k = 0; k < 4; ++k) b[k] = 1.0f;", LOOP, "    o[j] = b[j];")
    assert findings(src) == []


def test_preprocessor_alternatives_and_macros_are_not_followed():
    body = kernel(*WRITE_LT, LOOP, "    o[j] = a[j];")
    assert findings(body.replace("    for (int j", "#if FAST\n#endif\n    for (int j", 1)) == []
    fill = body.replace("o[j] = a[j];", "{ FILL(j); o[j] = a[j]; }")
    assert findings("#define FILL(i) b[i] = 0.0f\n" + fill) == [(7, "a[j]")]
    assert findings("#define FILL(i) a[i] = 0.0f\n" + fill) == []


def test_header_constants_give_the_extents_and_bounds():
    write = ("float a[KMAX];", "for (int k = 0; k < KMAX; ++k)", "    if (k < K) a[k] = x[k];")
    src = kernel(*write, "for (int j = 0; j < KMAX; ++j)", "    o[j] = a[j];")
    assert findings(src) == []  # KMAX unknown: nothing to follow
    assert findings(src, {"KMAX": 3}) == [(6, "a[j]")]
    assert find_uninit_reads(src, {"KMAX": 3})[0].loops == (("j", 0, 2, 5),)


def test_nested_loops_and_offsets():
    src = kernel(
        "float a[8];",
        "for (int i = 0; i < 2; ++i)",
        "    for (int k = 0; k < 4; ++k)",
        "        if (k < K) a[4 * i + k] = x[k];",
        "for (int i = 0; i < 2; ++i)",
        "    for (int j = 0; j < 4; ++j)",
        "        if (j < K) o[j] = a[4 * i + j];",
    )
    assert findings(src) == []
    [u] = find_uninit_reads(src.replace("if (j < K) o[j]", "if (j <= K) o[j]"))
    assert (u.line, u.use, u.loops) == (8, "a[4 * i + j]", (("i", 0, 1, 6), ("j", 0, 3, 7)))
    assert 'where i = 0 .. 1 (the loop at line 6) and j = 0 .. 3 (the loop at line 7) under j <= K' in u.message("k.cu")
    # an offset index: a[k + 1] written where k < K covers elements 1 .. K
    src = kernel("float a[5];", "a[0] = 0.0f;", "for (int k = 0; k < 4; ++k)", "    if (k < K) a[k + 1] = x[k];",
                 "for (int j = 0; j < 4; ++j)", "    if (j < K) o[j] = a[j + 1];")  # fmt: skip
    assert findings(src) == []
    assert findings(src.replace("if (j < K) o[j]", "o[j]")) == [(7, "a[j + 1]")]


def test_one_finding_per_use_sorted():
    src = kernel(*WRITE_LT, LOOP, "    o[j] = a[j] + a[j];", "o[0] = a[3];")
    assert findings(src) == [(6, "a[j]"), (6, "a[j]"), (7, "a[3]")]
    assert [u.col for u in find_uninit_reads(src)] == [16, 23, 12]


def test_a_source_that_cannot_be_read_has_none(tmp_path: Path):
    assert source_uninit_reads(tmp_path / "missing.cu", []) == []
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k() { /* unterminated")
    assert source_uninit_reads(bad, []) == []
