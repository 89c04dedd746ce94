"""benchmarks/tc_error_model.py: the fp32 / tf32 roundings and the arithmetic models it emulates, and its run on a
small batch of the shipped chain."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def model(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import tc_error_model

    return tc_error_model


def test_tf32_roundings_keep_ten_mantissa_bits_and_round_as_named(model):
    one_ulp = 2.0**-10  # tf32's ulp at 1.0
    x = np.array([1 + 0.25 * one_ulp, 1 + 0.5 * one_ulp, 1 + 0.75 * one_ulp, 1 + 1.5 * one_ulp, -(1 + 0.75 * one_ulp)], np.float32)
    assert model.tf32_rz(x).tolist() == [1.0, 1.0, 1.0, 1 + one_ulp, -1.0]
    assert model.tf32_rn(x).tolist() == [1.0, 1.0, 1 + one_ulp, 1 + 2 * one_ulp, -(1 + one_ulp)]  # ties to even
    assert model.tf32_half_ulp_truncate(x).tolist() == [1.0, 1 + one_ulp, 1 + one_ulp, 1 + 2 * one_ulp, -(1 + one_ulp)]
    r = np.random.default_rng(1).standard_normal(10000).astype(np.float32)
    for f in (model.tf32_rz, model.tf32_rn, model.tf32_half_ulp_truncate):
        assert not (f(r).view(np.uint32) & 0x1FFF).any()  # the low 13 mantissa bits are clear


def test_the_splits_recover_the_operand_to_22_bits_and_only_rz_leans_one_way(model):
    a = np.random.default_rng(2).standard_normal(200000).astype(np.float32)
    for mode, bound in (("rz", 2.0**-21), ("rn", 2.0**-22)):
        big, small = model.split(a, mode)
        resid = (a.astype(np.float64) - big - small) / np.abs(a)
        assert np.abs(resid).max() <= bound
    big, small = model.split(a, "rz")
    assert (big / a >= 0).all() and (np.abs(big) <= np.abs(a)).all()  # the truncated big part never overshoots
    rz = (a.astype(np.float64) - big) * np.sign(a)
    assert (rz >= 0).all()
    with pytest.raises(ValueError, match="split mode 'x'"):
        model.split(a, "x")


def test_f32_rz_rounds_toward_zero(model):
    t = np.array([1 + 2.0**-30, -(1 + 2.0**-30), 1 - 2.0**-30, 3.0])
    assert model.f32_rz(t).tolist() == [1.0, -1.0, np.nextafter(np.float32(1), np.float32(0)), 3.0]


def test_exactly_representable_sums_are_exact_under_every_model(model):
    """Small integers: every product and partial sum is exact in fp32 and tf32, so each model returns the exact
    result: what differs between the models is rounding only."""
    rng = np.random.default_rng(3)
    a = rng.integers(-8, 9, (3, 40, 5)).astype(np.float32)
    b = rng.integers(-8, 9, (3, 40, 4)).astype(np.float32)
    exact = np.einsum("pkm,pkn->pmn", a.astype(np.float64), b.astype(np.float64))
    assert (model.simt_chunks(a, b) == exact).all()
    assert (model.simt_chunks(a, b, warps=8) == exact).all()
    for s, t, acc in model.TC_MODELS:
        assert (model.tc_chunks(a, b, s, t, acc) == exact).all(), (s, t, acc)


def test_the_models_order_their_rounding_as_the_text_says(model):
    """On random data: truncating MMA accumulation is worse than rounding to nearest, and staging per k8 step
    sits between the two (the claim kernels/cutlass_fast_f32_rn.cuh's AUX_CUTLASS_STAGE_K8 rests on)."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 512, 8)).astype(np.float32)
    b = rng.standard_normal((4, 512, 8)).astype(np.float32)
    exact = np.einsum("pkm,pkn->pmn", a.astype(np.float64), b.astype(np.float64)).sum(0)
    err = {(s, t, acc): model.rel_err(model.finish(model.tc_chunks(a, b, s, t, acc)), exact) for s, t, acc in model.TC_MODELS}
    assert err[("rn", 16, "rz")] > err[("rn", 8, "rz")] > err[("rn", 16, "rn")]
    assert err[("rz", 16, "rz")] > err[("rn", 16, "rz")]


def test_the_cli_models_the_shipped_chain_on_a_small_batch(model, capsys):
    assert model.main(["--batch", "512", "--columns", "4", "--outputs", "nb_dW2", "--forwards", "to,trunk"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("B = 512, WGP = 32 chunks; float64 reference chain in ")
    assert "\npartial + finish of nb_dW2 (relative error against float64)\n  simt " in out
    assert "\nto forward's to_h1, seen in to_dW2 (relative error against float64)\n  fp32-rounded output " in out
    assert "\ntrunk forward's h_s2_aux, seen in nb_dW1 and to_dW1 (relative error against float64)\n" in out
    assert out.count("3xtf32 split") == 3 * len(model.TC_MODELS)
    line = next(x for x in out.splitlines() if x.startswith("  3xtf32 split rn, staged 8, mma rz") and "to_db2" in x)
    assert line.count("to_dW2 ") == 2
    assert model.main(["--outputs", "nb_dW9"]) == 2
    assert capsys.readouterr().out.startswith("tc_error_model: unknown output or forward nb_dW9; expected aux_trunk_dW, ")
