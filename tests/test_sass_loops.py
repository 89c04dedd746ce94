"""benchmarks/sass_loops.py: finding the HMMA main loops in ``cuobjdump -sass`` text and counting their opcodes."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SASS = """
        Function : k
        .headerflags    @"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                      /* 0x00000a00ff017b82 */
        /*0010*/              @P0 BRA 0x60 ;                                   /* 0x0000000000100947 */
        /*0020*/                   HMMA.1688.F32.TF32 R4, R8, R12, R4 ;        /* 0x0000000c0804723c */
        /*0030*/              @!P1 HMMA.1688.F32.TF32 R4, R8, R14, R4 ;       /* 0x0000000e0804723c */
        /*0040*/                   FADD R20, R4, R20 ;                         /* 0x0000001404147221 */
        /*0050*/              @P2 BRA 0x20 ;                                   /* 0x0000000000f00947 */
        /*0060*/                   IADD3 R2, R2, 0x1, RZ ;                     /* 0x0000000102027810 */
        /*0070*/              @P3 BRA 0x60 ;                                   /* 0x0000000000f00947 */
        /*0080*/                   EXIT ;                                      /* 0x000000000000794d */
        Function : other
        /*0000*/                   HMMA.1688.F32.TF32 R4, R8, R12, R4 ;        /* 0x0000000c0804723c */
        /*0010*/                   EXIT ;                                      /* 0x000000000000794d */
"""


@pytest.fixture()
def sass_loops(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import sass_loops

    return sass_loops


def test_opcode_strips_predicate_and_modifiers(sass_loops):
    assert sass_loops.opcode("@!P1 HMMA.1688.F32.TF32 R4, R8, R14, R4") == "HMMA"
    assert sass_loops.opcode("FADD R20, R4, R20") == "FADD"
    assert sass_loops.opcode("") == ""


def test_only_backward_branches_that_issue_hmma_are_loops(sass_loops):
    found = sass_loops.loops(SASS)
    assert [(name, n, dict(c)) for name, n, c in found] == [("k", 4, {"HMMA": 2, "FADD": 1, "BRA": 1})]
    assert sass_loops.loops(SASS, unit="IADD3")[0][1] == 2  # the 0x60 loop: IADD3 and its branch


def test_without_cuobjdump_it_says_where_to_get_it(sass_loops, monkeypatch, capsys):
    monkeypatch.setattr(sass_loops.shutil, "which", lambda _: None)
    assert sass_loops.main(["kernels/aux_trunk_forward_cutlass.cu"]) == 2
    assert capsys.readouterr().out.startswith("sass_loops: cuobjdump is not on PATH (pip install nvidia-cuda-cuobjdump")
