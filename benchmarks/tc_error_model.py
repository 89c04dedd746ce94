"""Where the chain's error against float64 comes from at large B: a CPU emulation of the fp32 arithmetic of the
weight-gradient reductions and the head forwards' first Linear, on the data ``gpu_chain_vs_torch.py`` checks
(issue 18). A MODEL, not a measurement: the H200's tensor cores are not emulated bit for bit.

The chain is run once with the contracts' float64 references on input set 0 of ``make_problem(B, seed=1000 + B)``
(the set the GPU benchmark checks). Then each GEMM whose output the error clause found above torch's is redone
from the float64 operands rounded to fp32, under several arithmetic models, and compared with the float64
result like the benchmark does (norm of the difference over the norm of the reference):

- ``simt``: the SIMT kernels' order: ``fmaf`` in row order within each WGP chunk (the partial's M > 8 path; the
  skinny path's 8 warps over every 8th row, summed in warp order, for M <= 8), then the finish's double sum
  over chunks rounded once; the forward: ``fmaf`` over k in order.
- ``3xtf32 split S, staged T, mma R``: CUTLASS's 3xTF32: each operand split into tf32 big + small (S = ``rz``:
  CUTLASS's truncated big and half-ulp-truncated small; ``rn``: both rounded to nearest, the shipped
  ``SPLIT_RN``), per k8 step three MMAs into one fragment (small*big, big*small, big*big; small*small dropped),
  each MMA's 8 products plus its accumulator summed exactly and rounded to fp32 by R (``rz``: toward zero, as
  published dissections of the tensor cores' accumulation describe it; ``rn``: to nearest, an optimistic
  bound); the fragment added to the running sum with a round-to-nearest fp32 add every T rows (``16``:
  MmaMultistage's staged accumulation at TBK = 16, the shipped build; ``8``: ``AUX_CUTLASS_STAGE_K8``).

For the partials the operands are the reference's ``dz`` and ``x``; the error printed is the reduction's own
(the GPU run adds the error its operands carry from the kernels before it). For the forwards (the trunk's and
both heads' first Linear and ELU), the output is emulated and the printed error is that of each weight gradient
that reads it, computed exactly from it (``dW = dz^T h``): how much the forward's rounding moves it (coherently:
rounding errors cancel in the sum unless they lean one way); for the trade-outcome head also with its ``dz2``
recomputed from the emulated ``h1`` (logits, softmax, ``(probs - onehot) / B_valid``).

Calibration against the H200 (docs/benchmarks.md 4m): ``to_dW2`` from the emulated trade-outcome forward comes
out at 1.18e-7 (``simt``) and 2.26e-7 (``rn``, 16, ``rz``: main's forward) against 1.52e-7 and 2.58e-7 measured;
for ``aux_trunk_dW`` (its x is an input, so its excess is the partial's) the truncating-split CUTLASS run
measured 2.65e-7 against the SIMT chain's 1.47e-7, where this model gives 1.74e-7 (``rz``, 16, ``rz``) against
1.07e-7 (``simt``): the direction, and the tensor cores' part about 1.8x short.

    python3 benchmarks/tc_error_model.py                          # B = 65536: ~8 minutes on the 2-core CPU machine
    python3 benchmarks/tc_error_model.py --batch 4096 --columns 16
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_chain_vs_torch as chain  # noqa: E402

# the partial launches of the fused schedule: output -> (dz buffer, x buffer, M, N)
PARTIALS = {
    "aux_trunk_dW": ("trunk_db_partial", "q_encoder_features", "SH2", "E"),
    "nb_dW1": ("nb_db1_partial", "h_s2_aux", "H", "SH2"),
    "nb_dW2": ("nb_db2_partial", "nb_h1", "KNB", "H"),
}
# the forwards: name -> (input, W, b, output buffer, [(the consumer's dz buffer, its weight gradient, the rows
# it sums over)], whether to model a sample of the output's columns only)
FORWARDS = {
    "to": ("h_s2_aux", "to_W1", "to_b1", "to_h1", [("to_db2_partial", "to_dW2", "labelled")], False),
    "nb": ("h_s2_aux", "nb_W1", "nb_b1", "nb_h1", [("nb_db2_partial", "nb_dW2", "all")], False),
    "trunk": ("q_encoder_features", "aux_trunk_W", "aux_trunk_b", "h_s2_aux",
              [("nb_db1_partial", "nb_dW1", "all"), ("to_db1_partial", "to_dW1", "labelled")], True),
}
TC_MODELS = [(split, stage, acc) for split in ("rz", "rn") for stage in (16, 8) for acc in ("rz", "rn")]


# ------------------------------------------------------------------------------------------------------------
# fp32 / tf32 rounding


def f32(a) -> np.ndarray:
    """Round to fp32 (to nearest, ties to even)."""
    return np.asarray(a, np.float64).astype(np.float32)


def f32_rz(t: np.ndarray) -> np.ndarray:
    """Round float64 values to fp32 toward zero."""
    t = np.asarray(t, np.float64)
    r = t.astype(np.float32)
    over = np.abs(r.astype(np.float64)) > np.abs(t)
    r[over] = np.nextafter(r[over], np.float32(0))
    return r


def _bits(a) -> np.ndarray:
    return f32(a).view(np.uint32).astype(np.uint64)


def _from_bits(u: np.ndarray) -> np.ndarray:
    return (u & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def tf32_rz(a) -> np.ndarray:
    """The top 10 mantissa bits (truncation toward zero), as CUTLASS's big part."""
    return _from_bits(_bits(a) & 0xFFFFE000)


def tf32_half_ulp_truncate(a) -> np.ndarray:
    """CUTLASS's ``round_half_ulp_truncate``: add half a tf32 ulp to the magnitude, then truncate."""
    return _from_bits((_bits(a) + 0x1000) & 0xFFFFE000)


def tf32_rn(a) -> np.ndarray:
    """Round to tf32 to nearest, ties to even (``cvt.rn.tf32.f32``)."""
    u = _bits(a)
    return _from_bits((u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000)


def split(a, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """3xTF32's big + small parts of fp32 ``a`` (float64 arrays holding tf32 values)."""
    a = f32(a)
    if mode == "rz":
        big = tf32_rz(a)
        small = tf32_half_ulp_truncate(a.astype(np.float64) - big)
    elif mode == "rn":
        big = tf32_rn(a)
        small = tf32_rn(a.astype(np.float64) - big)
    else:
        raise ValueError(f"split mode {mode!r}: expected rz or rn")
    return big.astype(np.float64), small.astype(np.float64)


# ------------------------------------------------------------------------------------------------------------
# the arithmetic models: batched over chunks, a[p, k, m] b[p, k, n] -> out[p, m, n] (fp32)


def simt_chunks(a: np.ndarray, b: np.ndarray, warps: int = 1) -> np.ndarray:
    """``fmaf`` in row order per chunk; with ``warps`` > 1, warp w takes rows w, w + warps, ... and the warps'
    sums are added in warp order in fp32 (the skinny path)."""
    if warps > 1:
        parts = [simt_chunks(a[:, w::warps], b[:, w::warps]) for w in range(warps)]
        total = np.zeros_like(parts[0])
        for part in parts:
            total = f32(total.astype(np.float64) + part)
        return total
    acc = np.zeros((a.shape[0], a.shape[2], b.shape[2]), np.float32)
    for k in range(a.shape[1]):  # fmaf: the product exact in float64, one rounding
        acc = f32(acc.astype(np.float64) + a[:, k, :, None].astype(np.float64) * b[:, k, None, :])
    return acc


def tc_chunks(a: np.ndarray, b: np.ndarray, split_mode: str, stage: int, acc_round: str) -> np.ndarray:
    """3xTF32 on mma.sync m16n8k8 (see the module docstring); K per chunk padded with zeros to a multiple of 8."""
    rows = a.shape[1]
    pad = (-rows) % 8
    if pad:
        a = np.concatenate([a, np.zeros((a.shape[0], pad, a.shape[2]), a.dtype)], axis=1)
        b = np.concatenate([b, np.zeros((b.shape[0], pad, b.shape[2]), b.dtype)], axis=1)
    a_big, a_small = split(a, split_mode)
    b_big, b_small = split(b, split_mode)
    rnd = f32_rz if acc_round == "rz" else f32
    acc = np.zeros((a.shape[0], a.shape[2], b.shape[2]), np.float32)
    frag = np.zeros_like(acc)
    for k0 in range(0, a.shape[1], 8):
        for pa, pb in ((a_small, b_big), (a_big, b_small), (a_big, b_big)):
            frag = rnd(frag.astype(np.float64) + np.einsum("pkm,pkn->pmn", pa[:, k0:k0 + 8], pb[:, k0:k0 + 8]))
        if (k0 + 8) % stage == 0 or k0 + 8 >= a.shape[1]:
            acc = f32(acc.astype(np.float64) + frag)
            frag = np.zeros_like(acc)
    return acc


def chunked(x: np.ndarray, P: int) -> np.ndarray:
    """[B, n] -> [P, B / P, n] (the WGP chunks; B a multiple of P)."""
    return x.reshape(P, x.shape[0] // P, x.shape[1])


def finish(ws: np.ndarray) -> np.ndarray:
    """aux_weight_grad_finish: the chunks summed in double, rounded once."""
    return f32(ws.astype(np.float64).sum(axis=0))


def rel_err(a, ref) -> float:
    return chain.rel_err(np.asarray(a, np.float64), np.asarray(ref, np.float64))


# ------------------------------------------------------------------------------------------------------------


def reference_chain(B: int) -> tuple[dict, dict]:
    """The fused chain's buffers from the float64 references at batch B, and the dims."""
    cs = chain.load_contracts(chain.REPO / "contracts", chain.REPO)
    csB = chain.contracts_at(cs, B)
    problem = chain.make_problem(cs, B, 3, seed=1000 + B)  # the benchmark's problem; set 0 is the checked one
    wiring = chain.Wiring(csB)
    ops = chain.build_plan(csB, wiring, (chain.FORWARD, chain.FUSED), problem["n_valid"][0])
    bufs, _ = chain.reference_buffers(csB, ops, problem)
    return bufs, dict(problem["dims"], WGP=wiring.envs[0]["WGP"])


def partial_errors(bufs: dict, dims: dict, name: str, columns: int, rng) -> dict[str, float]:
    """The error of one weight gradient's partial + finish under each model, on ``columns`` sampled rows and
    columns of the output (all of them where it is smaller)."""
    dzb, xb, Md, Nd = PARTIALS[name]
    B, M, N, P = dims["B"], dims[Md], dims[Nd], dims["WGP"]
    dz, x, ref = bufs[dzb].reshape(B, M), bufs[xb].reshape(B, N), bufs[name].reshape(M, N)
    ms = np.arange(M) if M <= columns else np.sort(rng.choice(M, columns, replace=False))
    ns = np.arange(N) if N <= columns or M == 1 else np.sort(rng.choice(N, columns, replace=False))
    a, b, r = chunked(f32(dz[:, ms]), P), chunked(f32(x[:, ns]), P), ref[np.ix_(ms, ns)]
    out = {"simt": rel_err(finish(simt_chunks(a, b, warps=8 if M <= 8 else 1)), r)}
    for s, t, acc in TC_MODELS:
        out[f"3xtf32 split {s}, staged {t}, mma {acc}"] = rel_err(finish(tc_chunks(a, b, s, t, acc)), r)
    return out


def forward_errors(bufs: dict, dims: dict, name: str, columns: int, rng) -> dict[str, str]:
    """The error of each consumer's weight gradient computed exactly from the forward's emulated output
    ``ELU(x W^T + b)`` (the trunk: on ``columns`` sampled output columns); for the trade-outcome head also that
    of ``to_db2`` and ``to_dW2`` with ``dz2`` recomputed from that ``h1``."""
    inb, wb, bb, outb, consumers, sample = FORWARDS[name]
    W = f32(bufs[wb]).reshape(len(bufs[bb]), -1)
    N, K, B = W.shape[0], W.shape[1], dims["B"]
    cols = np.sort(rng.choice(N, columns, replace=False)) if sample and N > columns else np.arange(N)
    x, W, b = f32(bufs[inb].reshape(B, K)), W[cols], f32(bufs[bb])[cols]
    labelled = (bufs["aux_to_labels"] >= 0) & (bufs["aux_to_labels"] < dims["K"])

    def errors(h: np.ndarray) -> str:
        h = h.astype(np.float64)
        parts = []
        for dzb, dwb, rows in consumers:
            keep = labelled if rows == "labelled" else np.ones(B, bool)
            dz = bufs[dzb].reshape(B, -1)
            ref = bufs[dwb].reshape(dz.shape[1], N)[:, cols]
            parts.append(f"{dwb} {rel_err(dz[keep].T @ h[keep], ref):.3g}")
        if name == "to":
            # the trade-outcome head's dz2 itself follows h1: dl = (softmax(h1 W2^T + b2) - onehot) / B_valid,
            # exact from the emulated h1; its bias gradient (a sum of probs minus a count: cancellation) and dW2
            labels = bufs["aux_to_labels"][labelled]
            logits = h[labelled] @ bufs["to_W2"].reshape(-1, N).T + bufs["to_b2"]
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            dl = (p - np.eye(p.shape[1])[labels]) / labelled.sum()
            parts.append(f"with dz2 from it: to_db2 {rel_err(dl.sum(axis=0), bufs['to_db2']):.3g}, "
                         f"to_dW2 {rel_err(dl.T @ h[labelled], bufs['to_dW2'].reshape(-1, N)):.3g}")
        return ";   ".join(parts)

    def from_pre(pre: np.ndarray) -> str:
        z = f32(pre.astype(np.float64) + b)
        return errors(np.where(z > 0, z, f32(np.expm1(z.astype(np.float64)))))

    one = lambda a: a[None]  # noqa: E731  (a single chunk: the forward's K runs over the whole row)
    out = {"fp32-rounded output": errors(f32(bufs[outb].reshape(B, N)[:, cols]))}
    out["simt"] = from_pre(simt_chunks(one(x.T), one(W.T))[0])
    for s, t, acc in TC_MODELS:
        out[f"3xtf32 split {s}, staged {t}, mma {acc}"] = from_pre(tc_chunks(one(x.T), one(W.T), s, t, acc)[0])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=65536, help="B (default 65536, where the error clause failed)")
    ap.add_argument("--columns", type=int, default=32, help="output rows / columns sampled per wide gradient (default 32)")
    ap.add_argument("--outputs", default=",".join(PARTIALS), help=f"partials to model (default {','.join(PARTIALS)})")
    ap.add_argument("--forwards", default=",".join(FORWARDS), help=f"forwards to model (default {','.join(FORWARDS)}; '' for none)")
    args = ap.parse_args(argv)
    unknown = [o for o in args.outputs.split(",") if o and o not in PARTIALS] + [f for f in args.forwards.split(",") if f and f not in FORWARDS]
    if unknown:
        print(f"tc_error_model: unknown output or forward {', '.join(unknown)}; expected {', '.join([*PARTIALS, *FORWARDS])}")
        return 2
    t0 = time.perf_counter()
    bufs, dims = reference_chain(args.batch)
    print(f"B = {args.batch}, WGP = {dims['WGP']} chunks; float64 reference chain in {time.perf_counter() - t0:.1f} s")
    rng = np.random.default_rng(0)
    tables = [(f"partial + finish of {o}", partial_errors(bufs, dims, o, args.columns, rng)) for o in args.outputs.split(",") if o]
    tables += [(f"{f} forward's {FORWARDS[f][3]}, seen in " + " and ".join(c[1] for c in FORWARDS[f][4]),
                forward_errors(bufs, dims, f, args.columns, rng)) for f in args.forwards.split(",") if f]
    for title, errs in tables:
        print(f"\n{title} (relative error against float64)")
        for model, e in errs.items():
            print(f"  {model:<36} {e if isinstance(e, str) else f'{e:.3g}'}")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
