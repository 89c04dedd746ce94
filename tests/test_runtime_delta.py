"""VERIFY_INOUT_DELTA (issue 16 item 4): the change of an ``inout``/``accumulate`` buffer against the reference's.

The fixture (tests/data/inout_delta) is one SGD step with weight decay, ``p -= lr * (g + wd * p)`` with
``lr = 1e-4`` and ``wd = 1e-2``: the weight-decay term moves each parameter by about 1e-6 relative, inside
the whole-buffer tolerance (1e-5), so a kernel that drops it passes every other check. Its kernels are
emulated here in float32 exactly as kernels/sgd_step.cu computes them; tests/gpu/test_delta_gpu.py runs
the compiled ones on the GPU.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from audit.printers import render
from audit.runtime import verify
from audit.runtime._compare import DeltaTolerance, Tolerance, compare, compare_delta
from audit.runtime.report import summary_table, verify_json

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "data" / "inout_delta"
SIZES = (1, 37, 300)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    dst = tmp_path / "inout_delta"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def _f32_step(launch, decay: bool) -> None:
    """The fixture's kernels in float32 arithmetic, as the .cu computes them (one rounding per operation)."""
    p = launch.tensor("param")
    g = launch.tensor("grad").astype(np.float32)
    lr, wd = np.float32(launch.scalar("lr")), np.float32(launch.scalar("wd"))
    old = p.astype(np.float32).copy()
    step = (g + wd * old) if decay else g
    p[...] = old - lr * step


def sgd_step_f32(launch) -> None:
    _f32_step(launch, decay=True)


def sgd_step_no_decay_f32(launch) -> None:
    _f32_step(launch, decay=False)


KERNELS = {"sgd_step": sgd_step_f32, "sgd_step_no_decay": sgd_step_no_decay_f32}


def _checks(out, subject: str, check: str) -> list:
    return [c for r in out.run.results if r.subject == subject for c in r.checks if c.check == check]


@pytest.mark.parametrize("emulated", [{}, KERNELS], ids=["float64-reference", "float32"])
def test_the_right_step_passes_every_check_including_the_delta(project: Path, emulated) -> None:
    out = verify(project, kernels=["sgd_step"], emulated=emulated, sizes=SIZES, evidence=False)
    assert [f.message for f in out.result.findings if f.rule != "VERIFY_TAIL_UNCOVERED"] == []
    deltas = _checks(out, "sgd_step", "inout_delta")
    assert len(deltas) == len(SIZES) and all(c.verdict == "pass" for c in deltas)
    assert deltas[0].message == 'the change of "param" matches the reference\'s change'


def test_a_dropped_weight_decay_term_fails_only_the_delta_check(project: Path) -> None:
    out = verify(project, kernels=["sgd_step_no_decay"], emulated=KERNELS, sizes=SIZES, evidence=False)
    rules = {f.rule for f in out.result.findings if f.rule != "VERIFY_TAIL_UNCOVERED"}
    assert rules == {"VERIFY_INOUT_DELTA"}
    # the old checks pass: the whole buffer matches its reference at every size
    ref = _checks(out, "sgd_step_no_decay", "reference")
    assert all(c.verdict == "pass" for c in ref)
    # one comparison per size, and run E's (every pointer misaligned) at the stress size
    assert sorted(c.case for c in ref) == sorted([f"N={n}" for n in SIZES] + ["N=37, pointers misaligned"])
    assert all(c.verdict == "fail" for c in _checks(out, "sgd_step_no_decay", "inout_delta"))
    (finding,) = [f for f in out.result.findings if f.rule == "VERIFY_INOUT_DELTA"]
    assert finding.message.startswith(
        'Kernel "sgd_step_no_decay" fails VERIFY_INOUT_DELTA at N=1: the change of "param" (out - in) has relative error '
    )
    assert "against the reference's change (1 of 1 element(s) outside the tolerance beyond the rounding floor, worst at [0]: " in finding.message
    assert finding.message.endswith(" (and 2 more case(s): N=37; N=300).")
    assert out.result.exit_code == 1


def test_the_delta_is_reported_in_text_json_and_evidence(project: Path, tmp_path: Path) -> None:
    ev = tmp_path / "ev"
    out = verify(project, kernels=["sgd_step_no_decay"], emulated=KERNELS, sizes=(37,), evidence_dir=ev)
    text = render(out.result, "text", tool="wireup verify")
    assert 'VERIFY_INOUT_DELTA Kernel "sgd_step_no_decay" fails VERIFY_INOUT_DELTA at N=37: the change of "param"' in text
    assert "sgd_step_no_decay" in summary_table(out)
    doc = json.loads(verify_json(render(out.result, "json", tool="wireup verify"), out))
    assert any(f["rule"] == "VERIFY_INOUT_DELTA" for f in doc["findings"])
    record = json.loads((ev / "kernels" / "sgd_step_no_decay.emulated.json").read_text())
    (delta,) = [c for c in record["checks"] if c["name"] == "inout_delta"]
    assert (delta["verdict"], delta["size"]) == ("fail", "N=37")
    assert delta["detail"].startswith('Kernel "sgd_step_no_decay" fails VERIFY_INOUT_DELTA at N=37: the change of "param" (out - in)')
    assert delta["rel_norm_err"] > 0.01


def test_the_shipped_accumulate_kernels_pass_the_delta_on_the_emulated_backend() -> None:
    # the shipped kernels with accumulate parameters (none has an inout one): the GPU run must stay clean too
    kernels = ["aux_next_bar_backward", "aux_trade_outcome_backward", "aux_param_grad_reduce"]
    out = verify(REPO, kernels=kernels, emulated={}, sizes=(1, 37), evidence=False)
    assert [f.message for f in out.result.findings if f.rule != "VERIFY_TAIL_UNCOVERED"] == []
    for k in kernels:
        deltas = _checks(out, k, "inout_delta")
        assert deltas and all(c.verdict == "pass" for c in deltas), (k, [c.message for c in deltas])


# -- the comparison itself ------------------------------------------------------------------------------


def _sgd(n: int, decay: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.uniform(-2, 2, n).astype(np.float32)
    g = rng.uniform(-1, 1, n).astype(np.float32)
    lr, wd = np.float32(1e-4), np.float32(1e-2)
    out = p - lr * ((g + wd * p) if decay else g)
    ref = p.astype(np.float64) - float(lr) * (g.astype(np.float64) + float(wd) * p.astype(np.float64))
    return out.astype(np.float32), p, ref


def test_the_whole_buffer_comparison_misses_what_the_delta_catches() -> None:
    out, p, ref = _sgd(4096, decay=False)
    assert compare(out, ref).ok  # the blind spot: 1e-6 relative inside the 1e-5 tolerance
    c = compare_delta(out, p, ref)
    assert c.status == "mismatch" and c.rel_norm > 0.01 and c.n_bad > 2000
    good, p, ref = _sgd(4096, decay=True)
    assert compare_delta(good, p, ref).ok


def test_a_reference_that_changes_nothing_needs_a_kernel_that_changes_nothing() -> None:
    p = np.linspace(-1, 1, 64).astype(np.float32)
    assert compare_delta(p.copy(), p, p.astype(np.float64)).ok
    moved = p.copy()
    moved[5] = np.nextafter(np.nextafter(np.nextafter(p[5], np.float32(9)), np.float32(9)), np.float32(9))
    assert compare_delta(moved, p, p.astype(np.float64)).ok  # three ulps at |p| < 1: inside the floor 2 eps (|in| + |ref|)
    moved[5] = p[5] + np.float32(1e-4)
    c = compare_delta(moved, p, p.astype(np.float64))
    assert (c.status, c.worst, c.detail, c.n_bad) == ("mismatch", (5,), "the reference does not change it", 1)
    zeros = np.zeros(8, np.float32)
    assert not compare_delta(np.full(8, 1e-30, np.float32), zeros, zeros.astype(np.float64)).ok


def test_a_nonfinite_change_and_the_declared_slack() -> None:
    out, p, ref = _sgd(16, decay=False)
    bad = out.copy()
    bad[3] = np.nan
    c = compare_delta(bad, p, ref)
    assert (c.status, c.worst) == ("nonfinite", (3,))
    # a nondeterministic kernel's declared slack is allowed on top of the floor
    assert compare_delta(out, p, ref, slack=1e-5).ok


def test_the_delta_tolerance_follows_the_contract_override() -> None:
    assert DeltaTolerance.of(Tolerance()).rtol == 1e-3
    assert DeltaTolerance.of(Tolerance.of(1e-4, None)).rtol == pytest.approx(1e-2)
    assert DeltaTolerance.of(Tolerance.of(1.0, None)).rtol == 0.5
    assert DeltaTolerance.of(Tolerance(), "f64").eps == 2.0**-52
