"""Shared-memory indexes out of bounds in thread-strided loops (audit.cuda.sharedbounds, rule SHARED_ARRAY_BOUNDS).

Each form the check reads (a plain ``__shared__`` array, a field of a shared struct or union, a flat pointer
into one, written inline or held in a variable) must be found one element past its end and be clean at
its end; what the check cannot follow (a guard, a run-time bound, a reassigned pointer or thread index)
is skipped, never reported. The shipped kernels and headers are clean, and the survivor of the H200 run
of 4 December that reads one element past the group tiles of ``aux_weight_grad_reduce``
(``ror:249:29:0``) is caught, through ``wireup mutate``'s static pass too.
"""

from __future__ import annotations

import dataclasses

from pathlib import Path

import pytest

from audit.api import load_project
from audit.cuda.bounds import Instance, find_overruns, included_constants
from audit.cuda.cache import AnalysisCache
from audit.cuda.sharedbounds import SharedOverrun, find_shared_overruns
from audit.cuda.static import kernel_code_findings
from audit.graph import Wiring
from audit.mutate._mutants import mutants_of_source
from audit.mutate._static import STATIC_RULES

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
# The one-launch cluster kernel shipped until 4 December (then replaced by the split reduction of
# kernels/aux_weight_grad_split_kernel.cu): its survivors are these rules' regression cases.
WG = REPO / "benchmarks" / "kernels_baseline" / "aux_weight_grad_reduce_cluster.cu"


def _kernel(body: str, before: str = "") -> str:
    return f"constexpr int kN = 64;\n{before}\n__global__ void k(float* o, int n) {{\n{body}\n}}\n"


def _found(src: str) -> list[tuple[int, str, int, int, int, int]]:
    return [(o.line, o.array, o.dim, o.size, o.low, o.high) for o in find_shared_overruns(src)]


STRUCT = "struct Smem { float a[2][kN]; float b[kN]; };"
UNION = "union Smem { struct { float a[2][kN]; float b[kN]; } pipe; float tiles[2][kN]; };"

# (a use one past its array, its correct counterpart, the expected (line, array, dim, size, low, high))
CASES = [
    pytest.param("    __shared__ float s[kN];\n    for (int e = threadIdx.x; e <= kN; e += blockDim.x) s[e] = 0.0f;",
                 "<= kN", "< kN", (5, "s", 0, 64, 0, 64), id="plain-threadIdx"),
    pytest.param("    __shared__ float s[kN];\n    const int tid = (int)threadIdx.x;\n"
                 "    for (int e = tid; e < kN + 1; e += 256) s[e] = 1.0f;",
                 "kN + 1", "kN", (6, "s", 0, 64, 0, 64), id="plain-tid-alias-constant-stride"),
    pytest.param("    __shared__ float s[kN];\n    const int tid = threadIdx.x;\n    const int nt = blockDim.x;\n"
                 "    for (int e = tid + 1; e <= kN; e += nt) s[e - 1] = 0.0f;",
                 "s[e - 1]", "s[e - 2]", None, id="start-offset-and-stride-alias"),
    pytest.param("    __shared__ Smem sm;\n    for (int e = threadIdx.x; e <= kN; e += blockDim.x) sm.b[e] = 0.0f;",
                 "<= kN", "< kN", (5, "sm.b", 0, 64, 0, 64), id="struct-field"),
    pytest.param("    __shared__ Smem sm;\n    for (int i = 0; i < 2; ++i)\n"
                 "        for (int e = threadIdx.x; e <= kN; e += blockDim.x) sm.a[i][e] = 0.0f;",
                 "<= kN", "< kN", (6, "sm.a", 1, 64, 0, 64), id="struct-field-2d"),
    pytest.param("    __shared__ __align__(16) Smem sm;\n    float* t = &sm.tiles[0][0];\n"
                 "    for (int e = threadIdx.x; e <= 2 * kN; e += blockDim.x) t[e] = 0.0f;",
                 "<= 2 * kN", "< 2 * kN", (6, "sm.tiles", -1, 128, 0, 128), id="union-flat-pointer"),
    pytest.param("    __shared__ Smem sm;\n    for (int e = threadIdx.x; e <= kN; e += blockDim.x)\n"
                 "        for (int q = 1; q < 2; ++q) o[e] += (&sm.tiles[q][0])[e];",
                 "<= kN", "< kN", (6, "sm.tiles", -1, 128, 64, 128), id="union-inline-flat"),
    pytest.param("    __shared__ Smem sm;\n    float* row = sm.pipe.a[1];\n"
                 "    for (int e = threadIdx.x; e <= kN; e += blockDim.x) row[e] = 0.0f;",
                 "<= kN", "< kN", (6, "sm.pipe.a", -1, 128, 64, 128), id="nested-decayed-row"),
    pytest.param("    __shared__ union { float x[kN]; float y[2 * kN]; } u;\n"
                 "    for (int e = threadIdx.x; e <= kN; e += blockDim.x) u.x[e] = 0.0f;",
                 "<= kN", "< kN", (5, "u.x", 0, 64, 0, 64), id="anonymous-shared-union"),
]


@pytest.mark.parametrize(("body", "bad", "good", "expected"), CASES)
def test_one_past_the_end_is_found_and_the_end_is_clean(body: str, bad: str, good: str, expected) -> None:
    before = UNION if "tiles" in body or "pipe" in body else STRUCT
    src = _kernel(body, before)
    assert body.count(bad) == 1
    if expected is None:  # the correct one is the body as written; the bad one indexes one before the array
        assert _found(src) == []
        (hit,) = _found(_kernel(body.replace(bad, good), before))
        assert (hit[1], hit[4], hit[5]) == ("s", -1, 62)
        return
    assert _found(src) == [expected]
    assert _found(_kernel(body.replace(bad, good), before)) == []


@pytest.mark.parametrize("body", [
    # a guard on the loop variable before the use: not followed, so skipped
    "    __shared__ float s[kN];\n    for (int e = threadIdx.x; e <= kN; e += blockDim.x)\n        if (e < kN) s[e] = 0.0f;",
    # a run-time bound
    "    __shared__ float s[kN];\n    for (int e = threadIdx.x; e < n; e += blockDim.x) s[e] = 0.0f;",
    # a thread index that is assigned again
    "    __shared__ float s[kN];\n    int tid = threadIdx.x;\n    tid += 3;\n    for (int e = tid; e <= kN; e += blockDim.x) s[e] = 0.0f;",
    # a pointer into the array that is moved: its offset is unknown
    "    __shared__ Smem sm;\n    float* t = &sm.b[0];\n    t += 1;\n    for (int e = threadIdx.x; e <= kN; e += blockDim.x) t[e] = 0.0f;",
    # a stride the check cannot size (a run-time value)
    "    __shared__ float s[kN];\n    for (int e = threadIdx.x; e <= kN; e += n) s[e] = 0.0f;",
    # a start that is not the thread index plus a constant
    "    __shared__ float s[kN];\n    for (int e = 2 * threadIdx.x; e <= kN; e += blockDim.x) s[e] = 0.0f;",
    # a local (not shared) array: LOCAL_ARRAY_BOUNDS' domain
    "    float s[kN];\n    for (int e = threadIdx.x; e <= kN; e += blockDim.x) s[e] = 0.0f;\n    o[0] = s[3];",
])
def test_what_the_check_cannot_follow_is_skipped(body: str) -> None:
    assert _found(_kernel(body, STRUCT)) == []


def test_plain_shared_arrays_in_constant_loops_are_left_to_local_array_bounds() -> None:
    src = _kernel("    __shared__ float s[kN];\n    for (int e = 0; e <= kN; ++e) s[e] = 0.0f;", STRUCT)
    assert _found(src) == []
    assert [(o.array, o.shared) for o in find_overruns(src)] == [("s", True)]
    # a field is not seen by LOCAL_ARRAY_BOUNDS: a constant loop over it is reported here
    src = _kernel("    __shared__ Smem sm;\n    for (int e = 0; e <= kN; ++e) sm.b[e] = 0.0f;", STRUCT)
    assert _found(src) == [(5, "sm.b", 0, 64, 0, 64)]
    assert find_overruns(src) == []


def test_message_is_one_sentence_naming_the_loops() -> None:
    src = _kernel("    __shared__ Smem sm;\n    for (int e = threadIdx.x; e <= kN; e += blockDim.x)\n"
                  "        for (int q = 1; q < 2; ++q) o[e] += (&sm.tiles[q][0])[e];", UNION)
    (o,) = find_shared_overruns(src)
    assert o.message("k.cu") == (
        'k.cu:6: "(&sm.tiles[q][0])[e]" reaches flat element q * 64 + e of the shared array "sm.tiles" '
        "(2 x 64 = 128 elements, declared at line 2) through a pointer, with e = 0 .. 64 (the loop at line 5, "
        "from the thread index by the block size) and q = 1 (the loop at line 6): element 128 is out of bounds, "
        "undefined behaviour that touches the shared memory past the array, which no run reports while it stays "
        "inside the block's allocation.")


def test_results_round_trip_through_the_analysis_cache(tmp_path: Path) -> None:
    src = _kernel("    __shared__ float s[kN];\n    for (int e = threadIdx.x; e <= kN; e += blockDim.x) s[e] = 0.0f;")
    found = find_shared_overruns(src)
    assert found and all(isinstance(o, SharedOverrun) for o in found)
    cache = AnalysisCache(tmp_path)
    assert cache.results("sharedbounds", [src], SharedOverrun, lambda: found) == found
    assert AnalysisCache(tmp_path).results("sharedbounds", [src], SharedOverrun, lambda: []) == found


def test_shipped_kernels_and_headers_are_clean() -> None:
    files = sorted(KERNELS.glob("*.cu")) + sorted(KERNELS.glob("*.cuh"))
    assert len(files) >= 12
    for f in files:
        assert find_shared_overruns(f.read_text(), included_constants(f, [KERNELS])) == [], f.name


def _cluster_kernel(cs):
    """A contract for the cluster kernel (no longer in the contracts): the split kernel's, renamed."""
    return dataclasses.replace(cs.kernel_map["aux_weight_grad_partial"], name="aux_weight_grad_reduce", entry="aux_weight_grad_reduce",
                               source="benchmarks/kernels_baseline/aux_weight_grad_reduce_cluster.cu")


def _mutant(mutant_id: str) -> str:
    text = WG.read_text()
    (m,) = [m for m in mutants_of_source(text, "aux_weight_grad_reduce", "kernels/aux_param_grad_reduce_kernel.cu")
            if m.id == mutant_id]
    return m.mutated


def test_the_group_tile_survivor_of_aux_weight_grad_reduce_is_found() -> None:
    text = _mutant("ror:249:29:0")  # for (int e = tid; e <= kWgBM * kWgBN; e += kWgThreads)
    (o,) = find_shared_overruns(text, included_constants(WG, [KERNELS]))
    assert (o.line, o.array, o.size, o.low, o.high, o.strided) == (252, "smem.tiles", 4096, 2048, 4096, ("e",))
    # its skinny-path twin writes one past tiles[0] but inside tiles (tiles[1][0][0], never read again):
    # in bounds of the array, recorded equivalent instead (audit/mutate/equivalent.toml)
    assert find_shared_overruns(_mutant("ror:192:29:0"), included_constants(WG, [KERNELS])) == []


def test_the_mutate_static_pass_runs_it(tmp_path: Path) -> None:
    assert "SHARED_ARRAY_BOUNDS" in STATIC_RULES
    cfg, cs = load_project(REPO)
    k = _cluster_kernel(cs)
    tree = tmp_path / "tree"
    tree.mkdir()
    for h in KERNELS.glob("*.cuh"):
        (tree / h.name).write_text(h.read_text())
    copy = tree / WG.name
    copy.write_text(WG.read_text())
    assert kernel_code_findings(cs, Wiring(cs), k, copy, [KERNELS], None) == []
    copy.write_text(_mutant("ror:249:29:0"))
    hits = kernel_code_findings(cs, Wiring(cs), k, copy, [KERNELS], None)
    assert [rule for rule, _ in hits] == ["SHARED_ARRAY_BOUNDS"]
    assert hits[0][1].startswith('benchmarks/kernels_baseline/aux_weight_grad_reduce_cluster.cu:252: "(&smem.tiles[q][0][0])[e]" reaches '
                                 'flat element q * 2048 + e of the shared array "smem.tiles" (2 x 64 x 32 = 4096')


def test_thread_term_beside_a_strided_loop_is_skipped() -> None:
    # e and threadIdx.x % 8 vary together over the threads: their free combinations are not all reached
    src = _kernel("    __shared__ float s[kN];\n    for (int e = threadIdx.x; e < kN - 8; e += blockDim.x) s[e + threadIdx.x % 8 + 1] = 0.0f;")
    assert find_shared_overruns(src) == []


def test_template_instance_of_a_strided_loop() -> None:
    src = ("template <int kT>\n__global__ void z(float* o) {\n    __shared__ float s[kT];\n"
           "    for (int e = threadIdx.x; e <= kT; e += blockDim.x) s[e] = 0.0f;\n}\n")
    assert find_shared_overruns(src) == []
    (o,) = find_shared_overruns(src, None, [Instance.of("z<128>", 128)])
    assert (o.line, o.size, o.high, o.instance) == (4, 128, 128, "z<128>")
    assert o.message("k.cu").startswith('k.cu:4: "s[e]" indexes the shared array "s" of 128 elements (declared at line 3) in "z<128>" with e = 0 .. 128')


def test_rule_reads_cpp_name_and_block_of_the_contracts(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    kernel = ("#define BS 16\ntemplate <int kT>\n__global__ void tile_t(const float* x, float* out) {\n"
              "    __shared__ float s[kT * kT];\n    float acc = 0.f;\n"
              "    for (int d = 0; d <= kT; ++d) acc += s[d * kT + threadIdx.x % kT];\n    out[threadIdx.x] = acc;\n}\n"
              "template __global__ void tile_t<16>(const float*, float*);\n")
    (tmp_path / "contracts").mkdir()
    (tmp_path / "k.cu").write_text(kernel)
    (tmp_path / "wireup.toml").write_text('select = ["build"]\n')
    (tmp_path / "contracts" / "k.toml").write_text(
        '[[buffer]]\nname = "x"\ndtype = "f32"\nshape = [256]\nkind = "input"\n\n[[buffer]]\nname = "out_t"\ndtype = "f32"\n'
        'shape = [256]\n\n[[kernel]]\nname = "tile_t"\nsource = "k.cu"\ncpp_name = "tile_t<16>"\nstage = "forward"\n'
        'grid = [1]\nblock = [256]\nparams = [\n  { name = "x", dtype = "f32", shape = [256], role = "in" },\n'
        '  { name = "out", dtype = "f32", shape = [256], role = "out" },\n]\n\n[[schedule]]\nname = "s"\n'
        '[[schedule.step]]\nlaunch = "tile_t"\nbind = { x = "x", out = "out_t" }\n'
    )
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "audit", "check", "--select", "LOCAL_ARRAY_BOUNDS,SHARED_ARRAY_BOUNDS"]
    got = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert got.returncode == 1, got.stdout + got.stderr
    assert ('k.cu:6: LOCAL_ARRAY_BOUNDS "s[d * kT + threadIdx.x % kT]" indexes the shared array "s" of 256 elements '
            '(declared at line 4) in "tile_t<16>" with d = 0 .. 16 (the loop at line 6) and threadIdx.x = 0 .. 255 '
            '(the block of "tile_t<16>"): index 271 is out of bounds') in got.stdout
    (tmp_path / "k.cu").write_text(kernel.replace("d <= kT", "d < kT"))
    shutil.rmtree(tmp_path / ".wireup-cache", ignore_errors=True)
    got = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert got.returncode == 0, got.stdout + got.stderr
