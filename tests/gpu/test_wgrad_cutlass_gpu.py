"""GPU test of the CUTLASS 3xTF32 candidate for the split weight-gradient partial
(``kernels/aux_weight_grad_partial_cutlass.cu``, ``aux_weight_grad_partial_cutlass``; not
shipped, docs/benchmarks.md section 4a) with the shipped finish (``aux_weight_grad_finish``), marked ``gpu``
(skipped with the conftest's reason where no GPU is) and skipped where the CUTLASS headers are missing
(``pip install --no-deps nvidia-cutlass==4.2.0.0`` or ``CUTLASS_INCLUDE``):

* at every (M, N) ``benchmarks/gpu_wgrad_split.py`` uses (the fused schedule's launches and the verify
  bindings, M <= 8 included: the CUTLASS kernel claims any M), B = 37, 4103 and 65536, P = the contract's
  WGP, with ws, wsb, dW and db poisoned with NaN first, dW and db are within the contract's tolerance of the
  float64 reference (the comparison ``wireup verify`` makes) and bit-identical over three runs;
* the 32-bit-access instantiation is taken, and right, when the pointers are not 16-byte aligned although
  M and N are multiples of 4 (dz and x offset by one float);
* for M > 8 the bias sums are the shipped partial's, bit for bit (its tiled path: same order, double,
  rounded once; its M <= 8 path sums per warp first, so there only the tolerance applies).

Needs CuPy (the device machine has it); ``python -m pytest -q tests/gpu/test_wgrad_cutlass_gpu.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
SOURCE = "kernels/aux_weight_grad_partial_cutlass.cu"
SIZES = (37, 4103, 65536)


def test_cutlass_partial_is_accurate_and_deterministic(tmp_path, monkeypatch):
    cp = pytest.importorskip("cupy", reason="CuPy is not installed (pip install -e '.[gpu]')")
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_wgrad_split as bench

    from audit.load import load_contracts
    from audit.runtime._compare import compare

    try:
        bench.cutlass_include()
    except bench.SetupError as e:
        pytest.skip(str(e))
    cs = load_contracts(REPO / "contracts", REPO)
    tol = bench.tolerance(cs)
    wgp_expr = cs.dim_map["WGP"].expr
    cubins = bench.build(tmp_path, cutlass_source=SOURCE)
    shipped = cp.RawModule(path=str(cubins["split"]))
    part, fin = shipped.get_function("aux_weight_grad_partial"), shipped.get_function("aux_weight_grad_finish")
    cut = cp.RawModule(path=str(cubins["cutlass"])).get_function("aux_weight_grad_partial_cutlass")

    def launch(kernel, dz, x, ws, wsb, dW, db, B, M, N, P):
        args = (np.int32(B), np.int32(M), np.int32(N), np.int32(P))
        kernel((bench.ceil_div(N, 128), bench.ceil_div(M, 128), P), (256, 1, 1), (dz, x, ws, wsb, *args))
        fin((bench.ceil_div(M * N + M, 256),), (256, 1, 1), (ws, wsb, dW, db, np.int32(M), np.int32(N), np.int32(P)))

    cases = [(s.M, s.N, B, 0) for s in bench.shapes_of(cs) for B in SIZES] + [(256, 256, 4103, 1), (128, 256, 37, 1)]
    assert {(256, 256), (128, 256), (3, 128), (1, 128), (9, 100), (130, 129)} <= {(M, N) for M, N, _, _ in cases}
    report, problems = [], []
    for M, N, B, shift in cases:
        P = int(wgp_expr.evaluate({"B": B}, cs.slot_indices))
        rs = cp.random.RandomState(1000 + B + 7 * M + N)
        # shift = 1: dz and x start one float into their buffers (not 16-byte aligned)
        dz = rs.standard_normal(B * M + shift, dtype=cp.float32)[shift:].reshape(B, M)
        x = rs.standard_normal(B * N + shift, dtype=cp.float32)[shift:].reshape(B, N)
        ref = cp.asnumpy(dz.astype(cp.float64).T @ x.astype(cp.float64))
        ref_b = cp.asnumpy(dz.astype(cp.float64).sum(axis=0))
        ws, wsb = cp.empty((P, M, N), dtype=cp.float32), cp.empty((P, M), dtype=cp.float32)
        dW, db = cp.empty((M, N), dtype=cp.float32), cp.empty((M,), dtype=cp.float32)
        outs = []
        for _ in range(3):
            for buf in (ws, wsb, dW, db):
                buf.fill(cp.nan)
            launch(cut, dz, x, ws, wsb, dW, db, B, M, N, P)
            cp.cuda.Device().synchronize()
            outs.append((cp.asnumpy(dW), cp.asnumpy(db), cp.asnumpy(wsb)))
        where = f"M={M} N={N} B={B} P={P}{' misaligned' if shift else ''}"
        c, cb = compare(outs[0][0], ref, tol), compare(outs[0][1], ref_b, tol)
        if not (c.ok and cb.ok):
            problems.append(f"{where}: dW {c.detail}; db {cb.detail}")
        if not all(np.array_equal(outs[0][i].view(np.uint32), o[i].view(np.uint32)) for o in outs[1:] for i in range(3)):
            problems.append(f"{where}: three runs are not bit-identical")
        # the shipped partial (its dW error for the record; for M > 8 its bias sums, bit for bit)
        wsb_cut = outs[0][2]
        for buf in (ws, wsb, dW, db):
            buf.fill(cp.nan)
        launch(part, dz, x, ws, wsb, dW, db, B, M, N, P)
        cp.cuda.Device().synchronize()
        if M > 8 and not np.array_equal(wsb_cut.view(np.uint32), cp.asnumpy(wsb).view(np.uint32)):
            problems.append(f"{where}: wsb differs from the shipped partial's")
        shipped_rel = float(compare(cp.asnumpy(dW), ref, tol).rel_norm)
        report.append({"M": M, "N": N, "B": B, "P": P, "shift": shift, "cutlass_rel": float(c.rel_norm), "shipped_rel": shipped_rel})
        del dz, x, ws, wsb, dW, db
        cp.get_default_memory_pool().free_all_blocks()
    print(json.dumps(report), file=sys.stderr)
    assert problems == []
