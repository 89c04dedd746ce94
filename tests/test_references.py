"""CPU tests of the float64 references of the aux-heads kernels (numpy only, fast).

The backward references are checked against central finite differences of each gradcheck case's own
forward + loss closure, so a wrong reference (or a wrong case) fails here before any GPU is involved.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from audit.gradcheck import central_difference, random_directions
from audit.references import dqn_aux as ref

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"B": 7, "E": 12, "SH2": 10, "H": 9, "K": 3, "S": 5, "KNB": 1}
REL_TOL = 1e-6
ELEMENTWISE_MAX_NUMEL = 120  # smaller primals are checked element by element, larger along directions


def _fd_gradient_errors(case, outputs, rng):
    """Yield (output name, primal, worst relative error) of the reference outputs against central differences."""
    for out_name, target in case.grads.items():
        got = target.reduced(outputs[out_name])
        primal = case.primals[target.primal]
        assert got.shape == primal.shape, (out_name, got.shape, primal.shape)
        if primal.size <= ELEMENTWISE_MAX_NUMEL:
            fd = np.empty(primal.size)
            for e in range(primal.size):
                d = np.zeros(primal.size)
                d[e] = 1.0
                fd[e] = central_difference(case.loss, case.primals, target.primal, d.reshape(primal.shape))
            floor = 1e-3 * max(np.abs(fd).max(), 1e-12)  # entries far below the tensor's scale: absolute
            err = np.abs(got.reshape(-1) - fd) / np.maximum(np.abs(fd), floor)
            yield out_name, target.primal, float(err.max())
        else:
            worst = 0.0
            for d in random_directions(rng, primal.shape, 3):
                fd = central_difference(case.loss, case.primals, target.primal, d)
                an = float(np.sum(got * d))
                worst = max(worst, abs(an - fd) / max(abs(fd), 1e-12))
            yield out_name, target.primal, worst


BACKWARD_CASES = [
    pytest.param(ref.aux_trunk_backward_gradcheck, ref.aux_trunk_backward, {}, id="trunk"),
    pytest.param(ref.aux_trade_outcome_backward_gradcheck, ref.aux_trade_outcome_backward, {"K": 2}, id="trade_K2"),
    pytest.param(ref.aux_trade_outcome_backward_gradcheck, ref.aux_trade_outcome_backward, {"K": 3}, id="trade_K3"),
    pytest.param(ref.aux_next_bar_backward_gradcheck, ref.aux_next_bar_backward, {}, id="next_bar"),
]


@pytest.mark.parametrize(("make_case", "backward", "extra_dims"), BACKWARD_CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_backward_reference_matches_finite_differences(make_case, backward, extra_dims, seed):
    rng = np.random.default_rng(seed)
    case = make_case(rng, {**SMALL, **extra_dims})
    outputs = backward(**case.inputs)
    checked = 0
    for out_name, primal, err in _fd_gradient_errors(case, outputs, rng):
        assert err < REL_TOL, f'"{out_name}" vs d loss / d "{primal}": relative error {err:.3e}'
        checked += 1
    assert checked == len(case.grads) >= 2


@pytest.mark.parametrize(("make_case", "backward", "extra_dims"), BACKWARD_CASES)
def test_finite_difference_check_rejects_a_slightly_wrong_gradient(make_case, backward, extra_dims):
    """The comparison above has teeth: a 1e-4 relative error in one output is caught."""
    rng = np.random.default_rng(3)
    case = make_case(rng, {**SMALL, **extra_dims})
    outputs = dict(backward(**case.inputs))
    victim = next(iter(case.grads))
    outputs[victim] = outputs[victim] * (1.0 + 1e-4)
    errors = {name: err for name, _, err in _fd_gradient_errors(case, outputs, rng)}
    assert errors[victim] > 10 * REL_TOL


def test_isv_constants_match_contract():
    isv = tomllib.loads((ROOT / "contracts" / "isv.toml").read_text())["isv"]
    by_name = {s["name"]: s["index"] for s in isv["slot"]}
    assert ref.ISV_TOTAL_DIM == isv["total_dim"]
    assert ref.AUX_LABEL_SCALE_EMA == by_name["AUX_LABEL_SCALE_EMA"]
    assert ref.AUX_TRADE_OUTCOME_CE_EMA == by_name["AUX_TRADE_OUTCOME_CE_EMA"]
    assert ref.AUX_NEXT_BAR_MSE_EMA == by_name["AUX_NEXT_BAR_MSE_EMA"]
    assert ref.AUX_VALID_FRAC_EMA == by_name["AUX_VALID_FRAC_EMA"]


# ---- trade-outcome mask ----


def _labels_with_mask(B, K, rng):
    labels = np.full(B, ref.SKIP_LABEL, dtype=np.int64)
    labels[[1, 4]] = rng.integers(0, K, size=2)
    return labels


@pytest.mark.parametrize("K", [2, 3])
def test_trade_outcome_masked_rows_get_exact_zeros(K):
    rng = np.random.default_rng(5)
    dims = {**SMALL, "K": K}
    labels = _labels_with_mask(dims["B"], K, rng)
    case = ref.aux_trade_outcome_backward_gradcheck(rng, dims, labels=labels)
    out = ref.aux_trade_outcome_backward(**case.inputs)
    skipped = labels == ref.SKIP_LABEL
    for name in ("dW1_partial", "db1_partial", "dW2_partial", "db2_partial", "dh_s2_aux_out"):
        assert np.all(out[name][skipped] == 0.0), name
        assert np.any(out[name][~skipped] != 0.0), f"{name} is zero on valid rows too"
    old = case.inputs["dh_s2_aux_accum"]
    assert np.array_equal(out["dh_s2_aux_accum"][skipped], old[skipped])
    assert np.allclose(out["dh_s2_aux_accum"][~skipped], old[~skipped] + out["dh_s2_aux_out"][~skipped], rtol=0, atol=1e-15)
    assert not np.allclose(out["dh_s2_aux_accum"][~skipped], old[~skipped])


def test_trade_outcome_gradient_uses_valid_count_not_batch():
    """Sparse labels: d logits = (p - onehot) / B_valid, so the row gradient does not shrink with B."""
    rng = np.random.default_rng(6)
    labels = _labels_with_mask(SMALL["B"], 3, rng)
    case = ref.aux_trade_outcome_backward_gradcheck(rng, SMALL, labels=labels)
    out = ref.aux_trade_outcome_backward(**case.inputs)
    assert int(case.inputs["valid_count"][0]) == 2
    row = 1
    p = case.inputs["probs"][row].copy()
    p[labels[row]] -= 1.0
    assert np.allclose(out["db2_partial"][row], p / 2.0, rtol=1e-14, atol=0)


def test_trade_outcome_all_skip_batch_is_zero_and_finite():
    rng = np.random.default_rng(7)
    labels = np.full(SMALL["B"], ref.SKIP_LABEL)
    case = ref.aux_trade_outcome_backward_gradcheck(rng, SMALL, labels=labels)
    fw = ref.aux_trade_outcome_forward(**case.primals)
    red = ref.aux_trade_outcome_loss_reduce(logits=fw["logits"], labels=labels, B=SMALL["B"], K=SMALL["K"])
    assert red["valid_count"].tolist() == [0]
    assert red["loss"].tolist() == [0.0]
    assert int(case.inputs["valid_count"][0]) == 0
    out = ref.aux_trade_outcome_backward(**case.inputs)
    for name, value in out.items():
        assert np.all(np.isfinite(value)), name
        if name != "dh_s2_aux_accum":
            assert np.all(value == 0.0), name
    assert np.array_equal(out["dh_s2_aux_accum"], case.inputs["dh_s2_aux_accum"])


def test_trade_outcome_out_of_range_labels_are_skipped():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0], [2.0, 1.0, 1.0]])
    red = ref.aux_trade_outcome_loss_reduce(logits=logits, labels=np.array([3, -1, 0]), B=3, K=3)
    assert red["valid_count"].tolist() == [1]
    expected = np.log(np.exp(logits[2]).sum()) - logits[2, 0]
    assert red["loss"][0] == pytest.approx(expected, rel=1e-14)


def test_trade_outcome_loss_is_mean_negative_log_prob():
    rng = np.random.default_rng(8)
    case = ref.aux_trade_outcome_backward_gradcheck(rng, SMALL)
    fw = ref.aux_trade_outcome_forward(**case.primals)
    labels = case.inputs["labels"]
    red = ref.aux_trade_outcome_loss_reduce(logits=fw["logits"], labels=labels, B=SMALL["B"], K=SMALL["K"])
    valid = labels >= 0
    nll = -np.log(fw["probs"][valid, labels[valid]])
    assert red["valid_count"][0] == valid.sum()
    assert red["loss"][0] == pytest.approx(nll.mean(), rel=1e-12)
    assert np.allclose(fw["probs"].sum(axis=1), 1.0, rtol=0, atol=1e-14)


# ---- next-bar label scale ----


def _track_label_scale(labels, steps, alpha=0.05):
    isv = np.zeros(ref.ISV_TOTAL_DIM)
    isv[ref.AUX_LABEL_SCALE_EMA] = 1.0  # ColdStart / FoldReset value
    for _ in range(steps):
        isv = ref.aux_label_scale_ema_update(
            labels=labels, isv=isv, slot=ref.AUX_LABEL_SCALE_EMA, B=labels.size, alpha=alpha
        )["isv"]
    return isv


def _next_bar_loss(pred, labels, isv):
    return float(
        ref.aux_next_bar_loss_reduce(
            pred=pred, label=labels, isv=isv, label_scale_slot=ref.AUX_LABEL_SCALE_EMA, B=labels.size
        )["loss"][0]
    )


def test_label_scale_ema_keeps_next_bar_loss_unit_scale():
    rng = np.random.default_rng(9)
    log_returns = 1e-3 * rng.standard_normal(64)
    pred = rng.standard_normal(64)
    losses = {}
    for magnitude in (1.0, 1e6):  # log returns, then raw-price-sized labels
        labels = magnitude * log_returns
        isv = _track_label_scale(labels, steps=600)
        assert isv[ref.AUX_LABEL_SCALE_EMA] == pytest.approx(np.abs(labels).mean(), rel=1e-6)
        losses[magnitude] = _next_bar_loss(pred, labels, isv)
        assert 1e-3 < losses[magnitude] < 100.0
    assert losses[1e6] == pytest.approx(losses[1.0], rel=1e-5)
    # Without the EMA having tracked them, the same labels blow the loss up: the check can fail.
    untracked = np.zeros(ref.ISV_TOTAL_DIM)
    untracked[ref.AUX_LABEL_SCALE_EMA] = 1.0
    assert _next_bar_loss(pred, 1e6 * log_returns, untracked) > 1e4


def test_label_scale_floor_divides_by_max_not_raw_slot():
    isv = np.zeros(ref.ISV_TOTAL_DIM)  # slot holds 0: dividing by it would give inf
    loss = _next_bar_loss(np.array([0.0]), np.array([1e-6]), isv)
    assert np.isfinite(loss)
    assert loss == pytest.approx((1e-6 / float(np.float32(1e-6))) ** 2, rel=1e-12)


def test_next_bar_gradient_is_label_scale_invariant():
    rng = np.random.default_rng(10)
    a = ref.aux_next_bar_backward_gradcheck(np.random.default_rng(10), SMALL, label_magnitude=1e-3)
    b = ref.aux_next_bar_backward_gradcheck(np.random.default_rng(10), SMALL, label_magnitude=5e3)
    ga = ref.aux_next_bar_backward(**a.inputs)
    gb = ref.aux_next_bar_backward(**b.inputs)
    for name in ("db1_partial", "db2_partial", "dh_s2_aux_out"):
        assert np.allclose(ga[name], gb[name], rtol=1e-9, atol=1e-15), name
    del rng


# ---- ISV EMA updates ----


def test_label_scale_ema_update_math():
    isv = np.full(ref.ISV_TOTAL_DIM, 7.0)
    isv[ref.AUX_LABEL_SCALE_EMA] = 2.0
    labels = np.array([1.0, -3.0, 0.5, -0.5])
    new = ref.aux_label_scale_ema_update(labels=labels, isv=isv, slot=ref.AUX_LABEL_SCALE_EMA, B=4, alpha=0.05)["isv"]
    a = float(np.float32(0.05))
    assert new[ref.AUX_LABEL_SCALE_EMA] == pytest.approx((1 - a) * 2.0 + a * 1.25, rel=1e-15)
    others = np.arange(ref.ISV_TOTAL_DIM) != ref.AUX_LABEL_SCALE_EMA
    assert np.array_equal(new[others], isv[others])
    for bad in ({"B": 0, "slot": ref.AUX_LABEL_SCALE_EMA}, {"B": 4, "slot": ref.ISV_TOTAL_DIM}, {"B": 4, "slot": -1}):
        same = ref.aux_label_scale_ema_update(labels=labels, isv=isv, alpha=0.05, **bad)["isv"]
        assert np.array_equal(same, isv), bad


def test_heads_loss_ema_update_math():
    isv = np.arange(ref.ISV_TOTAL_DIM, dtype=np.float64)
    kw = dict(
        to_loss=np.array([0.8]),
        nb_loss=np.array([2.0]),
        valid_count=np.array([3]),
        isv=isv,
        ce_slot=ref.AUX_TRADE_OUTCOME_CE_EMA,
        mse_slot=ref.AUX_NEXT_BAR_MSE_EMA,
        valid_frac_slot=ref.AUX_VALID_FRAC_EMA,
        B=100,
        alpha=0.05,
    )
    new = ref.aux_heads_loss_ema_update(**kw)["isv"]
    a = float(np.float32(0.05))
    assert new[ref.AUX_TRADE_OUTCOME_CE_EMA] == pytest.approx((1 - a) * isv[ref.AUX_TRADE_OUTCOME_CE_EMA] + a * 0.8)
    assert new[ref.AUX_NEXT_BAR_MSE_EMA] == pytest.approx((1 - a) * isv[ref.AUX_NEXT_BAR_MSE_EMA] + a * 2.0)
    assert new[ref.AUX_VALID_FRAC_EMA] == pytest.approx((1 - a) * isv[ref.AUX_VALID_FRAC_EMA] + a * 0.03)
    touched = [ref.AUX_TRADE_OUTCOME_CE_EMA, ref.AUX_NEXT_BAR_MSE_EMA, ref.AUX_VALID_FRAC_EMA]
    untouched = np.setdiff1d(np.arange(ref.ISV_TOTAL_DIM), touched)
    assert np.array_equal(new[untouched], isv[untouched])
    # B = 0 leaves the valid fraction alone (no division by zero); the losses still blend.
    zero_b = ref.aux_heads_loss_ema_update(**{**kw, "B": 0})["isv"]
    assert zero_b[ref.AUX_VALID_FRAC_EMA] == isv[ref.AUX_VALID_FRAC_EMA]
    assert zero_b[ref.AUX_TRADE_OUTCOME_CE_EMA] == new[ref.AUX_TRADE_OUTCOME_CE_EMA]


# ---- label producers ----


def test_trade_outcome_label_thresholds():
    t = 5e-4
    t32 = float(np.float32(t))
    r = np.array([-1e-2, -t32, -np.nextafter(t32, 1.0), 0.0, t32, np.nextafter(t32, 1.0), 1e-2, 5.0])
    closed = np.array([1, 1, 1, 1, 1, 1, 1, 0])
    out = ref.trade_outcome_label(trade_closed=closed, realized_return=r, B=r.size, flat_threshold=t)["labels"]
    assert out.tolist() == [0, 1, 0, 1, 1, 2, 2, -1]
    assert out.dtype == np.int64


def test_strided_gather_takes_one_column():
    src = np.arange(4 * 5, dtype=np.float64).reshape(4, 5)
    out = ref.strided_gather(src=src, B=4, row_stride=5, col=0)["dst"]
    assert out.tolist() == [0.0, 5.0, 10.0, 15.0]
    assert ref.strided_gather(src=src, B=3, row_stride=5, col=2)["dst"].tolist() == [2.0, 7.0, 12.0]


# ---- reductions ----


@pytest.mark.parametrize(
    ("make_case", "backward", "x_name", "pairs"),
    [
        (ref.aux_trunk_backward_gradcheck, ref.aux_trunk_backward, "x", [("dW_partial", "db_partial")]),
        (
            ref.aux_trade_outcome_backward_gradcheck,
            ref.aux_trade_outcome_backward,
            "h_s2",
            [("dW1_partial", "db1_partial")],
        ),
        (ref.aux_next_bar_backward_gradcheck, ref.aux_next_bar_backward, "h_s2", [("dW1_partial", "db1_partial")]),
    ],
)
def test_param_grad_reduce_agrees_with_weight_grad_reduce(make_case, backward, x_name, pairs):
    rng = np.random.default_rng(11)
    case = make_case(rng, SMALL)
    out = backward(**case.inputs)
    x = case.inputs[x_name]
    B = SMALL["B"]
    for partial_name, dz_name in pairs:
        partial = out[partial_name]
        dz = out[dz_name]
        M, N = dz.shape[1], x.shape[1]
        start = rng.standard_normal(M * N)
        summed = ref.aux_param_grad_reduce(partial=partial.reshape(B, M * N), grad=start, B=B, N=M * N)["grad"]
        fused = ref.aux_weight_grad_reduce(dz=dz, x=x, B=B, M=M, N=N)["dW"]
        assert fused.shape == (M, N)
        assert np.allclose(summed - start, fused.reshape(-1), rtol=1e-12, atol=1e-15)
        assert not np.allclose(summed, fused.reshape(-1))  # accumulate really adds to the old value


def test_trade_outcome_head_second_layer_reduces_like_weight_grad():
    rng = np.random.default_rng(12)
    case = ref.aux_trade_outcome_backward_gradcheck(rng, SMALL)
    out = ref.aux_trade_outcome_backward(**case.inputs)
    B, K, H = SMALL["B"], SMALL["K"], SMALL["H"]
    fused = ref.aux_weight_grad_reduce(dz=out["db2_partial"], x=case.inputs["h1"], B=B, M=K, N=H)["dW"]
    summed = ref.aux_param_grad_reduce(partial=out["dW2_partial"].reshape(B, K * H), grad=np.zeros(K * H), B=B, N=K * H)
    assert np.allclose(summed["grad"].reshape(K, H), fused, rtol=1e-12, atol=1e-15)


def test_trunk_backward_has_no_dx_output():
    rng = np.random.default_rng(13)
    case = ref.aux_trunk_backward_gradcheck(rng, SMALL)
    out = ref.aux_trunk_backward(**case.inputs)
    assert set(out) == {"dW_partial", "db_partial"}
    assert set(ref.aux_trunk_backward(**case.inputs, include_optional=False)) == {"db_partial"}
