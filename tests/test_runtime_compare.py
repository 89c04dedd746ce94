"""The float32-vs-float64 tolerance rule of wireup verify (audit/runtime/_compare.py)."""

from __future__ import annotations

import numpy as np
import pytest

from audit.runtime._compare import Tolerance, compare, within


def test_matching_float32_output_passes():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((37, 256))
    out = ref.astype(np.float32)
    c = compare(out, ref)
    assert c.ok, c
    assert c.rel_norm < 1e-7


def test_all_zero_output_never_passes_against_a_nonzero_reference():
    ref = np.linspace(-1, 1, 100)
    c = compare(np.zeros(100, np.float32), ref, Tolerance(rtol=0.5, atol=0.5, rtol_elem=0.5))
    assert c.status == "trivial"
    assert c.rel_norm == pytest.approx(1.0)
    assert "all-zero output" in c.describe()


def test_overrides_cannot_loosen_past_an_all_zero_output():
    t = Tolerance.of(10.0, 10.0)
    assert t.rtol < 1 and t.atol < 1


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_never_pass(bad):
    ref = np.ones(10)
    out = np.ones(10, np.float32)
    out[3] = bad
    c = compare(out, ref, Tolerance(rtol=0.4, atol=0.4, rtol_elem=0.4))
    assert c.status == "nonfinite"
    assert c.worst == (3,)
    assert "non-finite" in c.describe()


def test_nonfinite_reference_must_be_reproduced():
    ref = np.array([1.0, np.nan, np.inf])
    assert compare(np.array([1.0, np.nan, np.inf], np.float32), ref).ok
    assert not compare(np.array([1.0, 0.0, np.inf], np.float32), ref).ok


def test_one_bad_element_fails_even_when_the_norm_is_fine():
    ref = np.ones(100_000)
    out = ref.astype(np.float32)
    out[12345] += 1e-2  # norm error 3e-5 relative: the elementwise bound catches it
    c = compare(out, ref, Tolerance(rtol=1e-4))
    assert c.status == "mismatch"
    assert c.worst == (12345,)
    assert c.n_bad == 1


def test_small_elements_get_absolute_slack_relative_to_the_largest():
    ref = np.array([1.0, 1e-9])
    out = np.array([1.0, 2e-9], np.float32)  # 100% off on an element far below the scale: within atol * max|ref|
    assert compare(out, ref).ok


def test_zero_reference_needs_zero_output():
    assert compare(np.zeros(5, np.float32), np.zeros(5)).ok
    assert compare(np.array([0.0, -0.0], np.float32), np.zeros(2)).ok
    c = compare(np.array([0.0, 1e-3], np.float32), np.zeros(2))
    assert not c.ok and c.worst == (1,)


def test_integer_outputs_must_be_exact():
    ref = np.array([0, 1, 2, -1])
    assert compare(np.array([0, 1, 2, -1], np.int32), ref).ok
    c = compare(np.array([0, 1, 1, -1], np.int32), ref)
    assert c.status == "mismatch" and c.worst == (2,)


def test_size_mismatch_is_reported():
    c = compare(np.zeros(3, np.float32), np.zeros(4))
    assert c.status == "shape"


def test_within_for_nondeterministic_runs():
    a = np.array([1.0, 2.0, 3.0])
    assert within(a, a + 1e-7, 1e-5, 1e-7)[0]
    ok, mx, nbad = within(a, a + 1e-2, 1e-5, 1e-7)
    assert not ok and nbad == 3 and mx == pytest.approx(1e-2)
    assert not within(np.array([np.nan]), np.array([1.0]), 1, 1)[0]
    # atol is relative to the largest magnitude: a column that cancels to ~0 gets the same absolute slack
    sums = np.array([256.0, 1e-3])
    assert within(sums + np.array([1e-5, 1e-5]), sums, 1e-5, 1e-7)[0]
    assert not within(sums + np.array([0.0, 1e-3]), sums, 1e-5, 1e-7)[0]
