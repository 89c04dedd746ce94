"""cp.async copies that no wait covers, found in PTX (audit.cuda.cpasync, rule CP_ASYNC_WAIT).

Hand-written PTX pins each path of the dataflow (a wait reached with uncommitted copies, an exit with
undrained ones, what is not analysed); nvcc-compiled code pins the shipped kernels clean and the two
pipeline survivors of ``aux_weight_grad_reduce`` from the H200 run of 4 December caught (a removed
``cp_async_commit()``, a removed final ``cp_async_wait<0>()``), while the pipeline mutants recorded
equivalent stay clean.
"""

from __future__ import annotations

import dataclasses

import shutil
import subprocess
from pathlib import Path

import pytest

from audit.api import load_project
from audit.cuda.cache import AnalysisCache
from audit.cuda.cpasync import AsyncCopyHazard, find_async_copy_hazards
from audit.cuda.races import entries
from audit.cuda.static import kernel_code_findings
from audit.graph import Wiring
from audit.mutate._mutants import mutants_of_source
from nvcc_flags import compile_ptx

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
# The one-launch cluster kernel shipped until 4 December (then replaced by the split reduction of
# kernels/aux_weight_grad_split_kernel.cu): its survivors are these rules' regression cases.
WG = REPO / "benchmarks" / "kernels_baseline" / "aux_weight_grad_reduce_cluster.cu"
NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")

COPY = "cp.async.cg.shared.global [%r1], [%rd1], 16, %r2;"


def _ptx(*lines: str) -> str:
    body = "\n".join(f"\t{x}" for x in lines)
    return (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n"
            "\t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n" + body + "\n\tret;\n}\n")


# a two-stage loop: copy, commit, wait_group 1, read; the loop back edge; the final drain
LOOP = ["mov.u32 %r3, 0;", COPY, "cp.async.commit_group;", "$L_loop:", COPY, "cp.async.commit_group;",
        "cp.async.wait_group 1;", "ld.shared.f32 %r4, [%r1];", "add.s32 %r3, %r3, 1;",
        "setp.lt.s32 %p1, %r3, %r5;", "@%p1 bra $L_loop;", "cp.async.wait_group 0;"]


def _kinds(ptx: str) -> list[str]:
    return [h.kind for h in find_async_copy_hazards(ptx, "k")]


def test_a_committed_and_drained_pipeline_is_clean() -> None:
    assert _kinds(_ptx(*LOOP)) == []
    assert _kinds(_ptx(COPY, "cp.async.wait_all;")) == []  # wait_all commits and drains


def test_a_lost_commit_is_an_uncommitted_wait_and_an_undrained_exit() -> None:
    lines = list(LOOP)
    del lines[5]  # the loop's commit
    assert _kinds(_ptx(*lines)) == ["uncommitted", "uncommitted", "undrained"]


def test_a_lost_final_drain_is_an_undrained_exit() -> None:
    assert _kinds(_ptx(*LOOP[:-1])) == ["undrained"]
    # a guarded early exit after the copies counts as an exit too
    assert _kinds(_ptx(COPY, "cp.async.commit_group;", "@%p2 ret;", "cp.async.wait_group 0;")) == ["undrained"]


def test_a_copy_predicated_by_an_inline_asm_scope_register_counts() -> None:
    """CUTLASS's cp_async: ``{ .reg .pred p; setp.ne.b32 p, %r, 0; @p cp.async ... }``. The guard is a bare
    name, not a %-register; until 5 December the parser took "@p" for the opcode and the copy was not seen."""
    scoped = ["{", ".reg .pred p;", "setp.ne.b32 p, %r6, 0;", "@p cp.async.ca.shared.global [%r1], [%rd1], 4;", "}"]
    assert _kinds(_ptx(*scoped, "cp.async.commit_group;")) == ["undrained"]
    assert _kinds(_ptx(*scoped, "cp.async.commit_group;", "cp.async.wait_group 0;")) == []


def test_barrier_completed_copies_and_run_time_counts_are_not_analysed() -> None:
    lines = list(LOOP)
    del lines[5]
    assert _kinds(_ptx(*lines, "cp.async.mbarrier.arrive.shared.b64 [%r6];")) == []
    # cuda::pipeline's consumer_wait: a switch over the count of stages in flight
    switch = ["@%p2 bra $L_a;", "cp.async.wait_group 2;", "$L_a:", "cp.async.wait_group 3;"]
    assert _kinds(_ptx(*lines[:-1], *switch)) == []
    # bulk copies (TMA) are another mechanism
    assert _kinds(_ptx("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 16, [%r2];")) == []


def test_message_of_each_kind_is_one_sentence_with_the_fix() -> None:
    up = AsyncCopyHazard("k", "uncommitted", 231, 218, "sgemm_tile.cuh:198", "cp.async.wait_group 1")
    assert up.message("k", "k.cu") == (
        'Kernel "k" reaches "cp.async.wait_group 1" (k.cu:231) with cp.async copies (k.cu:218, inlined from '
        "sgemm_tile.cuh:198) issued since the last cp.async.commit_group: wait_group waits for committed groups "
        "only, so their shared memory may be read before they land; commit them to a group (cp.async.commit_group) "
        "before the wait.")
    down = AsyncCopyHazard("k", "undrained", 272, 218, None, "ret")
    assert down.message("k", "k.cu") == (
        'Kernel "k" can exit (k.cu:272) with cp.async copies (k.cu:218) that no cp.async.wait_group 0 or '
        "cp.async.wait_all has drained: shared memory reused after the pipeline, or the block's exit, may race "
        "with copies still landing; drain them (cp.async.wait_group 0) after the last read of the pipeline.")


def test_results_round_trip_through_the_analysis_cache(tmp_path: Path) -> None:
    h = AsyncCopyHazard("k", "undrained", 272, 218, None, "ret")
    cache = AnalysisCache(tmp_path)
    assert cache.results("cp-async", ["ptx", "k"], AsyncCopyHazard, lambda: [h]) == [h]
    assert AnalysisCache(tmp_path).results("cp-async", ["ptx", "k"], AsyncCopyHazard, lambda: []) == [h]


def _compile(tmp_path: Path, text: str, name: str, extra: tuple[str, ...] = ()) -> str:
    return compile_ptx(tmp_path, text, name, ("-I", str(KERNELS), *extra))


def _cluster_kernel(cs):
    """A contract for the cluster kernel (no longer in the contracts): the split kernel's, renamed."""
    return dataclasses.replace(cs.kernel_map["aux_weight_grad_partial"], name="aux_weight_grad_reduce", entry="aux_weight_grad_reduce",
                               source="benchmarks/kernels_baseline/aux_weight_grad_reduce_cluster.cu")


def _mutant(mutant_id: str) -> str:
    (m,) = [m for m in mutants_of_source(WG.read_text(), "aux_weight_grad_reduce", "kernels/aux_param_grad_reduce_kernel.cu")
            if m.id == mutant_id]
    return m.mutated


@NVCC
def test_shipped_kernels_are_clean(tmp_path: Path) -> None:
    from nvcc_flags import package_include_flags

    analysed = 0
    for src in sorted(KERNELS.glob("*.cu")):  # the CUTLASS kernels with the wheel's headers, as wireup build compiles them
        ptx = _compile(tmp_path, src.read_text(), src.name, tuple(package_include_flags()))
        for entry in entries(ptx):
            assert find_async_copy_hazards(ptx, entry) == [], entry
            analysed += "cp.async" in ptx
    assert analysed >= 1


@NVCC
@pytest.mark.parametrize(("mutant", "expected"), [
    ("sync:235:20:0", [("uncommitted", 231), ("uncommitted", 241), ("undrained", 272)]),  # cp_async_commit() lost
    ("sync:241:16:0", [("undrained", 272)]),  # the final cp_async_wait<0>() lost
    # recorded equivalent (audit/mutate/equivalent.toml): every copy stays committed and drained
    ("ror:226:27:0", []), ("guard:227:13:0", []), ("ror:230:27:0", []), ("ror:234:22:0", []),
])
def test_the_pipeline_survivors_of_aux_weight_grad_reduce(tmp_path: Path, mutant: str, expected: list[tuple[str, int]]) -> None:
    ptx = _compile(tmp_path, _mutant(mutant), "wg.cu")
    found = find_async_copy_hazards(ptx, "aux_weight_grad_reduce")
    assert [(h.kind, h.line) for h in found] == expected
    assert all((h.copy_line, h.origin) == (218, "sgemm_tile.cuh:198") for h in found)
    assert find_async_copy_hazards(ptx, "aux_param_grad_reduce") == []


@NVCC
def test_the_mutate_static_pass_runs_it(tmp_path: Path) -> None:
    cfg, cs = load_project(REPO)
    k = _cluster_kernel(cs)
    copy = tmp_path / WG.name
    copy.write_text(WG.read_text())
    wiring = Wiring(cs)
    assert kernel_code_findings(cs, wiring, k, copy, [KERNELS], _compile(tmp_path, WG.read_text(), "o.cu")) == []
    copy.write_text(_mutant("sync:241:16:0"))
    hits = kernel_code_findings(cs, wiring, k, copy, [KERNELS], _compile(tmp_path, copy.read_text(), "m.cu"))
    assert [rule for rule, _ in hits] == ["CP_ASYNC_WAIT"]
    assert hits[0][1].startswith('Kernel "aux_weight_grad_reduce" can exit (benchmarks/kernels_baseline/aux_weight_grad_reduce_cluster.cu:272)')


# -- a thread's own copy touched before its wait (the block run of SHARED_BARRIER_MISSING, reported here) ----

OWN = """extern "C" __global__ void k(const float* x, float* y, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    unsigned sp = (unsigned)__cvta_generic_to_shared(&s[t]);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(sp), "l"(x + t) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    BEFORE
    float v = s[t];
    AFTER
    y[t] = 2.0f * v;
}
"""
WAIT0 = 'asm volatile("cp.async.wait_group 0;" ::: "memory");'


def _own_ptx(tmp_path: Path, before: str, after: str, name: str) -> str:
    src = tmp_path / f"{name}.cu"
    src.write_text(OWN.replace("BEFORE", before).replace("AFTER", after))
    out = src.with_suffix(".ptx")
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-O3", "-lineinfo", "-std=c++17", str(src), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return out.read_text()


def _own_hazards(ptx: str) -> list:
    from audit.cuda.barriers import BlockLaunch
    from audit.cuda.blockbounds import buffer_base
    from audit.cuda.blocksim import find_barrier_races

    bufs = ((0, "x", 1024, 4, "shape [n], f32", None), (1, "y", 1024, 4, "shape [n], f32", None))
    launch = BlockLaunch(((0, buffer_base(0)), (1, buffer_base(1)), (2, 256)), (256, 1, 1), (1, 1, 1), 0, "n = 256", bufs)
    return find_barrier_races(ptx, "k", [launch])


@NVCC
def test_a_thread_reading_its_own_copy_before_the_wait_is_found(tmp_path: Path) -> None:
    """The copy may land after the read: a __syncthreads() does not complete it, a wait_group does."""
    bad = _own_hazards(_own_ptx(tmp_path, "", WAIT0, "before_wait"))
    assert [(r.scope, r.order, r.threads[3:]) for r in bad] == [("self", "raw", (0, 0, 0))]
    msg = bad[0].message("k", "kernels/k.cu")
    assert msg.startswith('Kernel "k" reads shared memory its own cp.async may still be writing (kernels/k.cu:8, ld.shared.f32')
    assert ("at n = 256, threadIdx (0, 0, 0) copies into s[0] (byte 0 of shared array \"s\") and reads it before a "
            "cp.async.wait_group completes the copy's group, so the read may see the old bytes; wait for the group "
            "(cp.async.wait_group N, cp_async_wait<N>()) between the copy at line 5 and line 8.") in msg
    barrier_only = _own_hazards(_own_ptx(tmp_path, "__syncthreads();", WAIT0, "barrier_only"))
    assert [(r.scope, r.order) for r in barrier_only] == [("self", "raw")]
    assert _own_hazards(_own_ptx(tmp_path, WAIT0, "", "waited")) == []
    # wait_all completes every copy of the thread, committed or not
    assert _own_hazards(_own_ptx(tmp_path, 'asm volatile("cp.async.wait_all;" ::: "memory");', "", "wait_all")) == []


@NVCC
def test_the_rule_reports_it_under_cp_async_wait_not_shared_barrier_missing(tmp_path: Path) -> None:
    """kernel_code_findings (the mutate static pass) and the rules split the block run's findings: a
    thread's own copy is CP_ASYNC_WAIT's, two threads' accesses SHARED_BARRIER_MISSING's."""
    from types import SimpleNamespace

    from audit.cuda import static

    ptx = _own_ptx(tmp_path, "", WAIT0, "split")
    races = _own_hazards(ptx)
    fake = SimpleNamespace()
    orig = static._block_findings
    try:
        static._block_findings = lambda *a, **kw: races  # type: ignore[assignment]
        assert static.entry_barrier_races(fake, None, fake, ptx) == []
        assert static.entry_own_copy_hazards(fake, None, fake, ptx) == races
    finally:
        static._block_findings = orig  # type: ignore[assignment]


@NVCC
def test_a_newer_copy_of_the_same_bytes_stays_in_flight_when_the_older_group_completes(tmp_path: Path) -> None:
    """Copy into s[t] (group 0), commit, copy into s[t] again (group 1: an overwrite of a pending copy),
    commit, wait_group 1 (group 0 complete), read s[t]: the newer copy may still be landing, so the read is
    a hazard too (found in the sixth trial: completing the older group cleared the newer copy's state)."""
    src = tmp_path / "twice.cu"
    src.write_text('''extern "C" __global__ void k(const float* x, float* y, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    unsigned sp = (unsigned)__cvta_generic_to_shared(&s[t]);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(sp), "l"(x + t) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(sp), "l"(x + 256 + t) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    float v = s[t];
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    y[t] = 2.0f * v;
}
''')
    out = src.with_suffix(".ptx")
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-O3", "-lineinfo", "-std=c++17", str(src), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    found = _own_hazards(out.read_text())
    assert [(r.scope, r.order, r.line, r.first_line) for r in found] == [("self", "waw", 7, 5), ("self", "raw", 10, 7)]
