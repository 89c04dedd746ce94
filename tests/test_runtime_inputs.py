"""Test data of wireup verify: value domains, sparse masks, edge cases, the ISV from its reset policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit.api import load_project
from audit.runtime._emulated import EmulatedBackend
from audit.runtime._inputs import VALID_RATE, Domain, InputFactory, apply_mask, isv_perturbed, isv_reset, resolve_domain
from audit.runtime._kernel import KernelVerifier
from audit.runtime._plan import local_bindings, make_env, shape_of
from audit.runtime._session import JobSpec, Session


@pytest.fixture(scope="module")
def shipped(request):
    cfg, cs = load_project(request.config.rootpath)
    return cfg, cs


def test_same_seed_same_data_other_seed_other_data():
    a = InputFactory(0, 64).tensor("x", "f32", (37, 8), Domain(scale=1.0), batch=True)
    b = InputFactory(0, 64).tensor("x", "f32", (37, 8), Domain(scale=1.0), batch=True)
    c = InputFactory(1, 64).tensor("x", "f32", (37, 8), Domain(scale=1.0), batch=True)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_batch_tensors_are_slices_of_one_draw():
    f = InputFactory(0, 300)
    small = f.tensor("x", "f32", (37, 4), Domain(scale=1.0), batch=True)
    big = f.tensor("x", "f32", (300, 4), Domain(scale=1.0), batch=True)
    assert np.array_equal(small, big[:37])
    assert f.generated_elements == 300 * 4


def test_domains_choices_ranges_and_scales():
    f = InputFactory(0, 10_000)
    flags = f.tensor("t", "i32", (10_000,), Domain(choices=(0.0, 1.0), weights=(0.97, 0.03)), batch=True)
    assert set(np.unique(flags)) <= {0, 1}
    assert 0.02 < flags.mean() < 0.04
    labels = f.tensor("l", "i32", (10_000,), Domain(lo=0, hi=2), batch=True)
    assert set(np.unique(labels)) == {0, 1, 2}
    r = f.tensor("r", "f32", (10_000,), Domain(scale=2e-3), batch=True)
    assert r.dtype == np.float32 and 1.5e-3 < r.std() < 2.5e-3


def test_resolve_domain_follows_parameter_buffer_and_kind(shipped):
    _, cs = shipped
    k = cs.kernel("aux_trade_outcome_backward")
    labels = k.param("labels")
    env = make_env(cs, 37, {"K": 2})
    # max = "K - 1" follows the variant; the out-of-range label 3 the loss also tests (DOMAIN_MISMATCH) is mixed in
    assert resolve_domain(labels, None, (37,), env) == Domain(lo=0.0, hi=1.0, include=(3.0,))
    w1 = k.param("W1")
    d = resolve_domain(w1, cs.buffer_map["to_W1"], (128, 256), env)
    assert d.scale == pytest.approx(1 / 16)  # a weight: 1/sqrt(fan_in)
    assert resolve_domain(cs.kernel("aux_trunk_forward").param("b"), cs.buffer_map["aux_trunk_b"], (256,), env).scale == 0.1
    h = resolve_domain(k.param("h_s2"), cs.buffer_map["h_s2_aux"], (37, 256), env)
    assert h.scale == 1.0
    valid_count = resolve_domain(k.param("valid_count"), cs.buffer_map["to_valid_count"], (1,), env)
    assert (valid_count.lo, valid_count.hi) == (0, 9)


def test_mask_rows_are_sparse_at_a_realistic_rate():
    f = InputFactory(3, 65536)
    for key in range(5):
        valid = f.mask_rows(("k", key), 65536)
        assert VALID_RATE[0] * 0.8 < valid.mean() < VALID_RATE[1] * 1.2
    labels = apply_mask(np.full(10, 2), np.array([True] + [False] * 9), -1)
    assert labels.tolist() == [2] + [-1] * 9


def _session(cs, cfg, sizes=(37,), budgets=None):
    job = JobSpec(root=str(cfg.root), backends=["emulated"], subjects=[], sizes=list(sizes), chain_sizes=[37], budgets=budgets or {})
    return Session(job, cs, cfg, {"emulated": EmulatedBackend()})


def test_cases_cover_mixed_all_skip_and_all_valid(shipped):
    cfg, cs = shipped
    s = _session(cs, cfg)
    v = KernelVerifier(s, cs.kernel("aux_trade_outcome_backward"))
    lb = local_bindings(cs, v.k, make_env(cs, 300), s.wiring)[0][0]
    mixed = v.base_case(300, {"K": 3}, lb)
    skip = v.base_case(300, {"K": 3}, lb, "all_skip")
    full = v.base_case(300, {"K": 3}, lb, "all_valid")
    assert (skip.inputs["labels"] == -1).all()
    assert ((full.inputs["labels"] >= 0) & (full.inputs["labels"] <= 3)).all()  # 3: the out-of-range label, skipped
    m = mixed.inputs["labels"]
    assert 0 < (m >= 0).sum() < 0.1 * m.size
    assert set(np.unique(m[m >= 0])) <= {0, 1, 2, 3}
    # accumulate buffers start from random non-zero data, a different draw for the second contents
    acc1, acc2 = mixed.inputs["dh_s2_aux_accum"], mixed.init2["dh_s2_aux_accum"]
    assert np.abs(acc1).min() > 0 and not np.array_equal(acc1, acc2)
    assert mixed.scalars == {"saxpy_alpha": 1.0, "B": 300, "SH2": 256, "H": 128, "K": 3}
    assert shape_of(v.k.param("dW1_partial").shape, mixed.env) == (300, 128, 256)


def test_sizes_default_to_the_brief_and_sample_rows_beyond_the_budget(shipped):
    cfg, cs = shipped
    from audit.runtime._plan import DEFAULT_SIZES

    assert DEFAULT_SIZES == (1, 37, 300, 4096, 4103, 65536)
    # budgets scaled down so the test stays fast: 300 rows play the part of 65536
    s = _session(cs, cfg, sizes=(300,), budgets={"rowwise": 100_000, "reference": 100_000})
    v = KernelVerifier(s, cs.kernel("aux_trunk_backward"))
    lb = local_bindings(cs, v.k, make_env(cs, 300), s.wiring)[0][0]
    case = v.base_case(300, {}, lb)
    v.decide_reference(case)
    assert case.ref_mode == "rows"
    rows = set(case.rows.tolist())
    assert {0, 299, 127, 128} <= rows and len(rows) < 80
    assert any("full-size scalars" in n for n in v.results["emulated"].notes)


def test_non_rowwise_kernel_above_the_budget_is_not_run(shipped):
    cfg, cs = shipped
    s = _session(cs, cfg, sizes=(37,), budgets={"reference": 1_000_000})
    v = KernelVerifier(s, cs.kernel("aux_param_grad_reduce"))
    env = make_env(cs, 37)
    big = next(b for b in local_bindings(cs, v.k, env, s.wiring)[0] if b.values["N"] == 32768)
    case = v.base_case(37, {}, big)
    v.decide_reference(case)
    assert case.ref_mode is None
    assert "reference too large (1.25e+06 elements; the budget is 1.00e+06 elements; the kernel is not rowwise and declares no sample_axes)" in case.ref_reason


def test_local_dims_are_bound_from_every_launch(shipped):
    cfg, cs = shipped
    s = _session(cs, cfg)
    bindings, note = local_bindings(cs, cs.kernel("aux_param_grad_reduce"), make_env(cs, 37), s.wiring)
    assert sorted(b.values["N"] for b in bindings) == [1, 3, 128, 256, 384, 32768, 65536]
    assert note == ""


def test_isv_from_reset_policy_then_perturbed(shipped):
    _, cs = shipped
    rng = np.random.default_rng(0)
    isv = isv_reset(cs, rng)
    assert isv.dtype == np.float32 and isv.size == 118
    assert isv[117] == 1.0 and isv[0] == 0.0 and isv[5] == 1.0  # ColdStart values
    fp = isv[113:117]
    assert not np.all(fp == 0)  # "keep" slots are random, not zeros
    pert = isv_perturbed(cs, np.random.default_rng(1))
    scales = [i for s in cs.isv.slots if s.role in ("scale", "divisor") for i in s.indices]
    assert (pert[scales] > 0).all() and (pert[scales] != 1.0).all()
    assert (pert[[0, 1, 104]] != 0).all()


def test_wide_batch_tensors_are_drawn_at_the_requested_rows_only():
    """Found on the H200: a [B, 65536] partial was drawn at the largest B (4.3e9 elements) before the
    input budget was consulted, so aux_param_grad_reduce hit the 60 s watchdog. Prefix sharing across
    sizes stops where the largest batch would exceed the budget."""
    f = InputFactory(seed=0, max_rows=65536, max_elements=1000)
    dom = Domain()
    small = f.tensor("partial", "f32", (3, 500), dom, batch=True)
    assert small.shape == (3, 500)
    assert f.generated_elements == 1500
    roomy = InputFactory(seed=0, max_rows=100, max_elements=1000)
    narrow = roomy.tensor("grad", "f32", (3, 2), dom, batch=True)
    # float data is drawn only as far as asked: the first rows of the draw at the largest batch
    assert narrow.shape == (3, 2) and roomy.generated_elements == 6
    whole = InputFactory(seed=0, max_rows=100)._draw(("grad", "f32", (2,), dom.key(), ""), "f32", (100, 2), dom)
    assert np.array_equal(narrow, whole[:3])
    labels = roomy.tensor("labels", "i32", (3,), Domain(lo=0, hi=2), batch=True)
    assert labels.shape == (3,) and roomy.generated_elements == 6 + 100  # integers: drawn at the largest batch, sliced


def test_over_budget_cases_are_refused_before_any_data_is_drawn():
    cfg, cs = load_project(Path(__file__).resolve().parents[1])
    from audit.runtime._verify import verify

    out = verify(cs.root, kernels=["aux_param_grad_reduce"], emulated={}, evidence=False, in_process=True,
                 sizes=[4096], budgets={"input": 1 << 20})  # fmt: skip
    assert out.result.exit_code == 0
    notes = [c for s in out.run.results for c in s.checks if c.verdict == "not_run"]
    assert any("inputs too large at B=4096" in c.message for c in notes), [c.message for c in notes][:5]
