"""Float64 references of the DQN aux-heads kernels (numpy only).

One function per kernel, named like the kernel. Calling convention (the runner relies on it):

* keyword arguments named like the contract params: every tensor that is not role "out" as a numpy
  array (float64 for f32, int64 for i32), every scalar as a Python number, the ``kind = "isv"`` param as
  the current ISV (float64, length ``ISV_TOTAL_DIM``); unknown keywords are ignored;
* the result maps param name -> array for every tensor the kernel writes: role "out" in full,
  inout / accumulate as the full new value, and the ISV param as the full new ISV when slots change.
  Optional outputs (NULL-able partials) are included unless ``include_optional=False``.

For the three backward kernels, ``<kernel>_gradcheck(rng, dims)`` builds a
:class:`~audit.gradcheck.GradCheckCase`: primals, kernel inputs made consistent by the float64 forward,
the forward + loss closure, and which primal each kernel output is the gradient of. Example::

    case = aux_next_bar_backward_gradcheck(np.random.default_rng(0), {"B": 7, "SH2": 10, "H": 9, ...})
    out = aux_next_bar_backward(**case.inputs)
    g = central_difference(case.loss, case.primals, "W1", direction)  # ~ (out["dW1_partial"].sum(0) * direction).sum()

Mask semantics follow the kernels: a trade-outcome row is valid when ``0 <= label < K``; ``-1`` (no trade
closed) and any other out-of-range label are skipped, contribute nothing, and get exact-zero partials.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from audit.gradcheck import GradCheckCase, GradTarget

# ISV layout facts used by the references and their cases (contracts/isv.toml; a test pins them).
ISV_TOTAL_DIM = 118
AUX_TRADE_OUTCOME_CE_EMA = 104
AUX_NEXT_BAR_MSE_EMA = 105
AUX_VALID_FRAC_EMA = 106
AUX_LABEL_SCALE_EMA = 117

LABEL_SCALE_FLOOR = 1e-6
SKIP_LABEL = -1
K_MAX = 8  # kernels support 1 <= K <= K_MAX

__all__ = [
    "strided_gather",
    "trade_outcome_label",
    "aux_label_scale_ema_update",
    "aux_heads_loss_ema_update",
    "aux_trunk_forward",
    "aux_trunk_backward",
    "aux_trunk_backward_gradcheck",
    "aux_trade_outcome_forward",
    "aux_trade_outcome_loss_reduce",
    "aux_trade_outcome_backward",
    "aux_trade_outcome_backward_gradcheck",
    "aux_next_bar_forward",
    "aux_next_bar_loss_reduce",
    "aux_next_bar_backward",
    "aux_next_bar_backward_gradcheck",
    "aux_next_bar_backward_store",
    "aux_next_bar_backward_store_gradcheck",
    "aux_param_grad_reduce",
    "aux_weight_grad_reduce",
    "aux_weight_grad_partial",
    "aux_weight_grad_partial_masked",
    "aux_weight_grad_finish",
]


# ---------------------------------------------------------------------------------------------------
# math shared by the references


def _f64(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _f32(x: float) -> float:
    """A scalar as the kernel sees it (an f32 parameter)."""
    return float(np.float32(x))


def _elu(z: np.ndarray) -> np.ndarray:
    return np.where(z > 0.0, z, np.expm1(np.minimum(z, 0.0)))


def _elu_grad_from_output(h: np.ndarray) -> np.ndarray:
    """ELU'(z) from h = ELU(z): 1 where h > 0, else exp(z) = 1 + h."""
    return np.where(h > 0.0, 1.0, 1.0 + h)


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _logsumexp(logits: np.ndarray) -> np.ndarray:
    m = logits.max(axis=-1)
    return m + np.log(np.exp(logits - m[..., None]).sum(axis=-1))


def _slot_ok(slot: int) -> bool:
    return 0 <= int(slot) < ISV_TOTAL_DIM


def _label_scale(isv: np.ndarray, slot: int) -> float:
    """max(isv[slot], 1e-6); NaN for an out-of-range slot (the kernels poison their outputs then)."""
    if not _slot_ok(slot):
        return float("nan")
    return float(np.maximum(_f64(isv)[int(slot)], _f32(LABEL_SCALE_FLOOR)))


def _valid_mask(labels: np.ndarray, K: int) -> np.ndarray:
    labels = np.asarray(labels).astype(np.int64)
    return (labels >= 0) & (labels < K)


def _ema(old: float, value: float, alpha: float) -> float:
    return (1.0 - alpha) * old + alpha * value


def _head_hidden(h_s2: np.ndarray, W1: np.ndarray, b1: np.ndarray) -> np.ndarray:
    return _elu(h_s2 @ W1.T + b1)


# ---------------------------------------------------------------------------------------------------
# label producers


def strided_gather(*, src, B: int, row_stride: int, col: int, **_) -> dict[str, np.ndarray]:
    """dst[b] = src[b * row_stride + col] (src read flat, as the kernel does)."""
    flat = _f64(src).reshape(-1)
    idx = np.arange(int(B), dtype=np.int64) * int(row_stride) + int(col)
    return {"dst": flat[idx]}


def trade_outcome_label(*, trade_closed, realized_return, B: int, flat_threshold: float, **_) -> dict[str, np.ndarray]:
    """-1 where no trade closed, else 0 (r < -t), 2 (r > t) or 1; t compared in f32 like the kernel."""
    B = int(B)
    closed = np.asarray(trade_closed).astype(np.int64)[:B]
    r = _f64(realized_return)[:B]
    t = _f32(flat_threshold)
    label = np.where(r < -t, 0, np.where(r > t, 2, 1))
    return {"labels": np.where(closed != 0, label, SKIP_LABEL).astype(np.int64)}


# ---------------------------------------------------------------------------------------------------
# ISV producers


def aux_label_scale_ema_update(*, labels, isv, slot: int, B: int, alpha: float, **_) -> dict[str, np.ndarray]:
    """isv[slot] = (1 - alpha) isv[slot] + alpha mean|labels|; unchanged for B <= 0 or a bad slot."""
    new = _f64(isv).copy()
    B = int(B)
    if B > 0 and _slot_ok(slot):
        mean_abs = float(np.abs(_f64(labels)[:B]).mean())
        new[int(slot)] = _ema(new[int(slot)], mean_abs, _f32(alpha))
    return {"isv": new}


def aux_heads_loss_ema_update(
    *, to_loss, nb_loss, valid_count, isv, ce_slot: int, mse_slot: int, valid_frac_slot: int, B: int, alpha: float, **_
) -> dict[str, np.ndarray]:
    """Blend the CE loss, the MSE loss and B_valid / B into their EMA slots, in that order."""
    new = _f64(isv).copy()
    a = _f32(alpha)
    if _slot_ok(ce_slot):
        new[int(ce_slot)] = _ema(new[int(ce_slot)], float(_f64(to_loss).reshape(-1)[0]), a)
    if _slot_ok(mse_slot):
        new[int(mse_slot)] = _ema(new[int(mse_slot)], float(_f64(nb_loss).reshape(-1)[0]), a)
    if _slot_ok(valid_frac_slot) and int(B) > 0:
        frac = float(np.asarray(valid_count).reshape(-1)[0]) / float(B)
        new[int(valid_frac_slot)] = _ema(new[int(valid_frac_slot)], frac, a)
    return {"isv": new}


# ---------------------------------------------------------------------------------------------------
# aux trunk


def aux_trunk_forward(*, x, W, b, **_) -> dict[str, np.ndarray]:
    """h_out = ELU(x W^T + b)."""
    return {"h_out": _elu(_f64(x) @ _f64(W).T + _f64(b))}


def aux_trunk_backward(*, dh_accum, h, x, include_optional: bool = True, **_) -> dict[str, np.ndarray]:
    """dz = dh_accum * ELU'(h); db_partial = dz; dW_partial[b] = outer(dz[b], x[b]). No dx."""
    dz = _f64(dh_accum) * _elu_grad_from_output(_f64(h))
    out = {"db_partial": dz}
    if include_optional:
        out["dW_partial"] = dz[:, :, None] * _f64(x)[:, None, :]
    return out


def aux_trunk_backward_gradcheck(rng: np.random.Generator, dims: Mapping[str, int]) -> GradCheckCase:
    """Loss = sum(dh_accum * ELU(x W^T + b)) for a fixed random cotangent dh_accum; primals W, b."""
    B, E, SH2 = int(dims["B"]), int(dims["E"]), int(dims["SH2"])
    x = rng.standard_normal((B, E))
    W = rng.standard_normal((SH2, E)) / np.sqrt(E)
    b = 0.1 * rng.standard_normal(SH2)
    dh_accum = rng.standard_normal((B, SH2)) / B

    def loss(p: Mapping[str, np.ndarray]) -> float:
        return float(np.sum(dh_accum * _elu(x @ _f64(p["W"]).T + _f64(p["b"]))))

    h = aux_trunk_forward(x=x, W=W, b=b)["h_out"]
    return GradCheckCase(
        inputs={"dh_accum": dh_accum, "h": h, "x": x, "B": B, "E": E, "SH2": SH2},
        primals={"W": W, "b": b},
        loss=loss,
        grads={"dW_partial": GradTarget("W", "sum0"), "db_partial": GradTarget("b", "sum0")},
    )


# ---------------------------------------------------------------------------------------------------
# trade-outcome head


def aux_trade_outcome_forward(*, h_s2, W1, b1, W2, b2, **_) -> dict[str, np.ndarray]:
    """h1 = ELU(h_s2 W1^T + b1); logits = h1 W2^T + b2; probs = softmax(logits)."""
    h1 = _head_hidden(_f64(h_s2), _f64(W1), _f64(b1))
    logits = h1 @ _f64(W2).T + _f64(b2)
    return {"h1_out": h1, "logits": logits, "probs": _softmax(logits)}


def aux_trade_outcome_loss_reduce(*, logits, labels, B: int, K: int, **_) -> dict[str, np.ndarray]:
    """Mean sparse CE over rows with 0 <= label < K; valid_count = their number; loss 0 when none."""
    B, K = int(B), int(K)
    logits = _f64(logits).reshape(B, K)
    labels = np.asarray(labels).astype(np.int64)[:B]
    valid = _valid_mask(labels, K)
    count = int(valid.sum())
    loss = 0.0
    if count > 0:
        rows = np.nonzero(valid)[0]
        ce = _logsumexp(logits[rows]) - logits[rows, labels[rows]]
        loss = float(ce.sum() / count)
    return {"loss": np.array([loss]), "valid_count": np.array([count], dtype=np.int64)}


def aux_trade_outcome_backward(
    *,
    h_s2,
    h1,
    probs,
    labels,
    valid_count,
    W1,
    W2,
    dh_s2_aux_accum,
    saxpy_alpha: float,
    B: int,
    K: int,
    include_optional: bool = True,
    **_,
) -> dict[str, np.ndarray]:
    """Softmax-CE gradient of valid rows back through Linear -> ELU -> Linear; skipped rows are exact zeros."""
    K = int(K)
    h_s2, h1, W1, W2 = _f64(h_s2), _f64(h1), _f64(W1), _f64(W2)
    rows_in = h1.shape[0]  # B, or fewer when a runner checks sampled rows (the mean uses valid_count)
    probs = _f64(probs).reshape(rows_in, K)
    labels = np.asarray(labels).astype(np.int64).reshape(-1)[:rows_in]
    b_valid = int(np.asarray(valid_count).reshape(-1)[0])
    valid = _valid_mask(labels, K) & (b_valid > 0)

    onehot = np.zeros((rows_in, K))
    rows = np.nonzero(valid)[0]
    onehot[rows, labels[rows]] = 1.0
    dl = np.where(valid[:, None], (probs - onehot) / max(b_valid, 1), 0.0)
    dz1 = (dl @ W2) * _elu_grad_from_output(h1)
    dz1[~valid] = 0.0  # exact zeros, whatever h1 holds on skipped rows
    dh = dz1 @ W1
    accum = _f64(dh_s2_aux_accum).copy()
    accum[valid] += float(saxpy_alpha) * dh[valid]
    out = {
        "db1_partial": dz1,
        "db2_partial": dl,
        "dh_s2_aux_out": dh,
        "dh_s2_aux_accum": accum,
    }
    if include_optional:
        out["dW1_partial"] = dz1[:, :, None] * h_s2[:, None, :]
        out["dW2_partial"] = dl[:, :, None] * h1[:, None, :]
    return out


def _trade_outcome_labels(rng: np.random.Generator, B: int, K: int) -> np.ndarray:
    """Mostly -1 with a few valid classes; at least one valid row, and a skipped one when B > 1."""
    labels = np.where(rng.random(B) < 0.4, rng.integers(0, K, size=B), SKIP_LABEL).astype(np.int64)
    if not (labels >= 0).any():
        labels[rng.integers(0, B)] = rng.integers(0, K)
    if B > 1 and not (labels < 0).any():
        labels[rng.integers(0, B)] = SKIP_LABEL
    return labels


# both heads' backward kernels: per-sample partials of the two Linear layers, and the gradient into the trunk
_HEAD_GRADS = {
    "dW1_partial": GradTarget("W1", "sum0"),
    "db1_partial": GradTarget("b1", "sum0"),
    "dW2_partial": GradTarget("W2", "sum0"),
    "db2_partial": GradTarget("b2", "sum0"),
    "dh_s2_aux_out": GradTarget("h_s2", "none"),
}


def aux_trade_outcome_backward_gradcheck(
    rng: np.random.Generator, dims: Mapping[str, int], labels: np.ndarray | None = None
) -> GradCheckCase:
    """Loss = mean CE over valid rows of the head on h_s2; primals h_s2, W1, b1, W2, b2.

    ``labels`` (optional, int array of length B) overrides the random mix of -1 and valid classes,
    e.g. all -1 for the all-skip case.
    """
    B, SH2, H, K = int(dims["B"]), int(dims["SH2"]), int(dims["H"]), int(dims["K"])
    h_s2 = _elu(rng.standard_normal((B, SH2)))
    W1 = rng.standard_normal((H, SH2)) / np.sqrt(SH2)
    b1 = 0.1 * rng.standard_normal(H)
    W2 = rng.standard_normal((K, H)) / np.sqrt(H)
    b2 = 0.1 * rng.standard_normal(K)
    labels = _trade_outcome_labels(rng, B, K) if labels is None else np.asarray(labels).astype(np.int64)
    accum = rng.standard_normal((B, SH2))

    def forward(p: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return aux_trade_outcome_forward(h_s2=p["h_s2"], W1=p["W1"], b1=p["b1"], W2=p["W2"], b2=p["b2"])

    def loss(p: Mapping[str, np.ndarray]) -> float:
        fw = forward(p)
        return float(aux_trade_outcome_loss_reduce(logits=fw["logits"], labels=labels, B=B, K=K)["loss"][0])

    primals = {"h_s2": h_s2, "W1": W1, "b1": b1, "W2": W2, "b2": b2}
    fw = forward(primals)
    count = aux_trade_outcome_loss_reduce(logits=fw["logits"], labels=labels, B=B, K=K)["valid_count"]
    return GradCheckCase(
        inputs={
            "h_s2": h_s2,
            "h1": fw["h1_out"],
            "probs": fw["probs"],
            "labels": labels,
            "valid_count": count,
            "W1": W1,
            "W2": W2,
            "dh_s2_aux_accum": accum,
            "saxpy_alpha": 1.0,
            "B": B,
            "SH2": SH2,
            "H": H,
            "K": K,
        },
        primals=primals,
        loss=loss,
        grads=dict(_HEAD_GRADS),
    )


# ---------------------------------------------------------------------------------------------------
# next-bar head


def aux_next_bar_forward(*, h_s2, W1, b1, W2, b2, **_) -> dict[str, np.ndarray]:
    """h1 = ELU(h_s2 W1^T + b1); pred = h1 W2[0] + b2[0]."""
    h1 = _head_hidden(_f64(h_s2), _f64(W1), _f64(b1))
    pred = h1 @ _f64(W2).reshape(-1, h1.shape[1])[0] + float(_f64(b2).reshape(-1)[0])
    return {"h1_out": h1, "pred": pred}


def _next_bar_residual(pred, label, isv, label_scale_slot: int, B: int) -> np.ndarray:
    s = _label_scale(isv, label_scale_slot)
    return _f64(pred).reshape(-1)[:B] - _f64(label).reshape(-1)[:B] / s


def aux_next_bar_loss_reduce(*, pred, label, isv, label_scale_slot: int, B: int, **_) -> dict[str, np.ndarray]:
    """loss = mean_b (pred[b] - label[b] / max(isv[slot], 1e-6))^2."""
    B = int(B)
    if B <= 0:
        return {"loss": np.array([0.0 if _slot_ok(label_scale_slot) else float("nan")])}
    r = _next_bar_residual(pred, label, isv, label_scale_slot, B)
    return {"loss": np.array([float(np.sum(r * r) / B)])}


def aux_next_bar_backward(
    *,
    h_s2,
    h1,
    pred,
    label,
    isv,
    label_scale_slot: int,
    W1,
    W2,
    dh_s2_aux_accum,
    saxpy_alpha: float,
    B: int,
    include_optional: bool = True,
    **_,
) -> dict[str, np.ndarray]:
    """d_pred = 2 r / B back through Linear -> ELU -> Linear; dh SAXPYs into the accumulator."""
    B = int(B)
    h_s2, h1, W1 = _f64(h_s2), _f64(h1), _f64(W1)
    w2 = _f64(W2).reshape(-1, h1.shape[1])[0]
    d_pred = 2.0 * _next_bar_residual(pred, label, isv, label_scale_slot, B) / B
    dz1 = d_pred[:, None] * w2[None, :] * _elu_grad_from_output(h1)
    dh = dz1 @ W1
    out = {
        "db1_partial": dz1,
        "db2_partial": d_pred[:, None],
        "dh_s2_aux_out": dh,
        "dh_s2_aux_accum": _f64(dh_s2_aux_accum) + float(saxpy_alpha) * dh,
    }
    if include_optional:
        out["dW1_partial"] = dz1[:, :, None] * h_s2[:, None, :]
        out["dW2_partial"] = (d_pred[:, None] * h1)[:, None, :]
    return out


def aux_next_bar_backward_store(*, h_s2, W1, B: int, **kw) -> dict[str, np.ndarray]:
    """aux_next_bar_backward as the accumulator's first writer: dh_s2_aux_accum = saxpy_alpha * dh (never read)."""
    zeros = np.zeros((int(B), np.shape(W1)[1]))
    return aux_next_bar_backward(h_s2=h_s2, W1=W1, B=B, **{**kw, "dh_s2_aux_accum": zeros})


def aux_next_bar_backward_store_gradcheck(
    rng: np.random.Generator, dims: Mapping[str, int], label_magnitude: float = 1e-3
) -> GradCheckCase:
    """The gradient check of aux_next_bar_backward, without the accumulator input (the store variant writes it)."""
    case = aux_next_bar_backward_gradcheck(rng, dims, label_magnitude)
    inputs = {k: v for k, v in case.inputs.items() if k != "dh_s2_aux_accum"}
    return GradCheckCase(inputs=inputs, primals=case.primals, loss=case.loss, grads=case.grads)


def aux_next_bar_backward_gradcheck(
    rng: np.random.Generator, dims: Mapping[str, int], label_magnitude: float = 1e-3
) -> GradCheckCase:
    """Loss = mean (pred - label / max(isv[AUX_LABEL_SCALE_EMA], 1e-6))^2; primals h_s2, W1, b1, W2, b2.

    Labels are ~``label_magnitude`` (log returns by default) and the ISV label scale holds their mean
    absolute value, as the label-scale EMA would after tracking them.
    """
    B, SH2, H = int(dims["B"]), int(dims["SH2"]), int(dims["H"])
    knb = int(dims.get("KNB", 1))
    if knb != 1:
        raise ValueError(f"the next-bar head has one output (KNB = 1), got KNB = {knb}")
    h_s2 = _elu(rng.standard_normal((B, SH2)))
    W1 = rng.standard_normal((H, SH2)) / np.sqrt(SH2)
    b1 = 0.1 * rng.standard_normal(H)
    W2 = rng.standard_normal((1, H)) / np.sqrt(H)
    b2 = 0.1 * rng.standard_normal(1)
    label = label_magnitude * rng.standard_normal(B)
    isv = np.ones(ISV_TOTAL_DIM)
    isv[AUX_LABEL_SCALE_EMA] = max(float(np.abs(label).mean()), LABEL_SCALE_FLOOR)
    accum = rng.standard_normal((B, SH2))

    def forward(p: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return aux_next_bar_forward(h_s2=p["h_s2"], W1=p["W1"], b1=p["b1"], W2=p["W2"], b2=p["b2"])

    def loss(p: Mapping[str, np.ndarray]) -> float:
        pred = forward(p)["pred"]
        return float(
            aux_next_bar_loss_reduce(pred=pred, label=label, isv=isv, label_scale_slot=AUX_LABEL_SCALE_EMA, B=B)[
                "loss"
            ][0]
        )

    primals = {"h_s2": h_s2, "W1": W1, "b1": b1, "W2": W2, "b2": b2}
    fw = forward(primals)
    return GradCheckCase(
        inputs={
            "h_s2": h_s2,
            "h1": fw["h1_out"],
            "pred": fw["pred"],
            "label": label,
            "isv": isv,
            "label_scale_slot": AUX_LABEL_SCALE_EMA,
            "W1": W1,
            "W2": W2,
            "dh_s2_aux_accum": accum,
            "saxpy_alpha": 1.0,
            "B": B,
            "SH2": SH2,
            "H": H,
        },
        primals=primals,
        loss=loss,
        grads=dict(_HEAD_GRADS),
    )


# ---------------------------------------------------------------------------------------------------
# parameter-gradient reductions


def aux_param_grad_reduce(*, partial, grad, B: int, N: int, **_) -> dict[str, np.ndarray]:
    """grad += sum_b partial[b, :] (partial viewed as [B, N])."""
    N = int(N)
    p = _f64(partial).reshape(-1, N)
    g = _f64(grad).reshape(-1)
    return {"grad": g + p.sum(axis=0)}


def aux_weight_grad_reduce(*, dz, x, B: int, M: int, N: int, **_) -> dict[str, np.ndarray]:
    """dW = dz^T x, the batch sum of the per-sample outer products dz[b] x[b]^T."""
    M, N = int(M), int(N)
    return {"dW": _f64(dz).reshape(-1, M).T @ _f64(x).reshape(-1, N)}


def aux_weight_grad_partial(*, dz, x, B: int, M: int, N: int, P: int, **_) -> dict[str, np.ndarray]:
    """Per batch chunk p = rows [B*p // P, B*(p+1) // P): ws[p] = dz[chunk]^T x[chunk], wsb[p] = dz[chunk] summed."""
    B, M, N, P = int(B), int(M), int(N), int(P)
    d = _f64(dz).reshape(-1, M)[:B]
    xx = _f64(x).reshape(-1, N)[:B]
    ws = np.zeros((P, M, N))
    wsb = np.zeros((P, M))
    for p in range(P):
        lo, hi = B * p // P, B * (p + 1) // P
        ws[p] = d[lo:hi].T @ xx[lo:hi]
        wsb[p] = d[lo:hi].sum(axis=0)
    return {"ws": ws, "wsb": wsb}


def aux_weight_grad_partial_masked(*, dz, x, labels, B: int, M: int, N: int, P: int, K: int, **_) -> dict[str, np.ndarray]:
    """aux_weight_grad_partial over the rows whose label is a class (0 <= label < K) only: a skipped row's dz
    contributes nothing whatever it holds (its dz is zero by the trade-outcome backward's contract)."""
    B, M, N, P, K = int(B), int(M), int(N), int(P), int(K)
    d = _f64(dz).reshape(-1, M)[:B]
    xx = _f64(x).reshape(-1, N)[:B]
    valid = _valid_mask(np.asarray(labels).reshape(-1)[:B], K)
    ws = np.zeros((P, M, N))
    wsb = np.zeros((P, M))
    for p in range(P):
        lo, hi = B * p // P, B * (p + 1) // P
        rows = lo + np.flatnonzero(valid[lo:hi])
        ws[p] = d[rows].T @ xx[rows]
        wsb[p] = d[rows].sum(axis=0)
    return {"ws": ws, "wsb": wsb}


def aux_weight_grad_finish(*, ws, wsb, M: int, N: int, P: int, **_) -> dict[str, np.ndarray]:
    """dW = sum over p of ws[p], db = sum over p of wsb[p]."""
    M, N, P = int(M), int(N), int(P)
    return {"dW": _f64(ws).reshape(P, M, N).sum(axis=0), "db": _f64(wsb).reshape(P, M).sum(axis=0)}
