"""Every wireup verify check fails on an injected bug (emulated backend: numpy memory, Python kernels).

The default emulated kernel is the float64 reference stored in float32, so the shipped chain passes; each
test below replaces one kernel by a broken version and pins the rule that must catch it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from audit.runtime import verify
from audit.runtime._backend import DeviceError

SMALL = (1, 37)


@pytest.fixture(scope="module")
def repo_root(request):
    return request.config.rootpath


def run(root, kernels=(), schedules=(), bugs=None, sizes=SMALL, chain_sizes=(37,)):
    return verify(root, kernels=kernels, schedules=schedules, emulated=bugs or {}, sizes=sizes, chain_sizes=chain_sizes, evidence=False)


def rules(outcome) -> set[str]:
    return {f.rule for f in outcome.result.findings}


def test_shipped_chain_passes_on_the_emulated_backend(repo_root):
    out = run(repo_root, kernels=["strided_gather", "aux_trade_outcome_loss_reduce", "aux_next_bar_loss_reduce"], schedules=["aux_heads_forward"])
    # the small sizes are multiples of no block size: only the tail sides ran (VERIFY_TAIL_UNCOVERED warnings);
    # strided_gather's row stride is verified at several S (its dims), so VERIFY_FIXED_DIM_ONE_VALUE is silent
    assert [f.message for f in out.result.findings if f.rule != "VERIFY_TAIL_UNCOVERED"] == []
    assert out.result.exit_code == 0
    assert all(r.verdict == "pass" for r in out.run.results)
    checks = {c.check for r in out.run.results for c in r.checks if c.verdict == "pass"}
    assert {"reference", "written", "guards", "inputs_unmodified", "finite", "determinism", "all_skip",
            "unit_scale", "divisor_zero", "chain", "graph_replay"} <= checks  # fmt: skip


# -- broken kernels ----------------------------------------------------------------------------------


def mask_ignored(launch):
    labels = launch.tensor("labels").astype(np.int64)
    launch.write_outputs(launch.run_reference(labels=np.where(labels < 0, 0, labels)))


def inv_b_not_inv_b_valid(launch):
    launch.write_outputs(launch.run_reference(valid_count=np.array([launch.scalar("B")])))


def saxpy_overwrites(launch):
    res = launch.run_reference()
    res["dh_s2_aux_accum"] = res["dh_s2_aux_out"] * launch.scalar("saxpy_alpha")  # `=` where `+=` belongs
    launch.write_outputs(res)


def last_row_unwritten(launch):
    res = launch.run_reference()
    launch.tensor("dst")[:-1] = res["dst"][:-1]


def nan_output(launch):
    res = launch.run_reference()
    res["h_out"][0, 5] = np.nan
    launch.write_outputs(res)


def writes_past_the_end(launch):
    launch.default()
    ptr = int(launch.arg("dst").value)
    launch.view(ptr + 4 * launch.scalar("B"), np.float32, 1)[0] = 1.0  # dst[B] = ...: the guard band


def copies_one_past_the_end(launch):
    """The broken gather's off-by-one (``b <= B``): dst[B] = src[B * stride + col], a word read from just past
    one buffer's end written just past another's; with one guard pattern for every buffer this rewrote the
    bytes already there and went unseen on the H200."""
    launch.default()
    b, stride, col = launch.scalar("B"), launch.scalar("row_stride"), launch.scalar("col")
    src = int(launch.arg("src").value) + 4 * (b * stride + col)
    dst = int(launch.arg("dst").value) + 4 * b
    launch.view(dst, np.float32, 1)[0] = launch.view(src, np.float32, 1)[0]


def threshold_inclusive(launch):
    """``r <= -flat_threshold`` where the kernel must use ``<``: differs only at the threshold itself, which
    the contract's ``values.include`` puts into the data (a mutant that survived the first H200 run)."""
    closed = launch.tensor("trade_closed")
    r = launch.tensor("realized_return")
    thr = np.float32(launch.scalar("flat_threshold"))
    label = np.where(r <= -thr, 0, np.where(r > thr, 2, 1))
    launch.tensor("labels")[...] = np.where(closed == 0, -1, label).astype(np.int32)


def modifies_its_input(launch):
    launch.default()
    launch.tensor("src")[0, 0] = 42.0


_NOISE = np.random.default_rng(7)


def nondeterministic(launch):
    res = launch.run_reference()
    res["h_out"] = res["h_out"] * (1.0 + 1e-7 * _NOISE.standard_normal())
    launch.write_outputs(res)


def nan_when_all_skipped(launch):
    res = launch.run_reference()
    if int(res["valid_count"][0]) == 0:
        res["loss"] = np.array([np.nan])  # 0 / 0
    launch.write_outputs(res)


def raw_slot_divisor(launch):
    kw = launch.reference_inputs()
    s = kw["isv"][kw["label_scale_slot"]]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = kw["pred"] - kw["label"] / s  # no max(s, 1e-6)
    launch.write_outputs({"loss": np.array([np.mean(r * r)])})


def unnormalised_label(launch):
    kw = launch.reference_inputs()
    r = kw["pred"] - kw["label"]
    launch.write_outputs({"loss": np.array([np.mean(r * r)])})


def elu_derivative_wrong_sign(launch):
    kw = launch.reference_inputs()
    h = kw["h"]
    dz = kw["dh_accum"] * np.where(h < 0.0, 1.0, 1.0 + h)  # the sign test flipped
    out = {"db_partial": dz}
    if kw["include_optional"]:
        out["dW_partial"] = dz[:, :, None] * kw["x"][:, None, :]
    launch.write_outputs(out)


def reduce_drops_last_row(launch):
    kw = launch.reference_inputs()
    B, N = int(kw["B"]), int(kw["N"])
    p = kw["partial"].reshape(B, N)
    launch.write_outputs({"grad": kw["grad"].reshape(-1) + p[:-1].sum(axis=0)})


def weight_grad_off_by_a_bit(launch):
    res = launch.run_reference()
    res["dW"] = res["dW"] * 1.01
    launch.write_outputs(res)


class StaleIsvAtCapture:
    """Reads the ISV on the host when the launch is recorded: a graph replays the stale value."""

    def __init__(self):
        self.seen = None

    def __call__(self, launch):
        if launch.replay and self.seen is not None:
            res = launch.run_reference(isv=self.seen)
        else:
            self.seen = launch.tensor("isv").astype(np.float64).copy()
            res = launch.run_reference()
        launch.write_outputs(res)


def illegal_address(launch):
    raise DeviceError("an illegal memory access was encountered", sticky=True, code="CUDA_ERROR_ILLEGAL_ADDRESS")


CASES = [
    ("mask_ignored", "aux_trade_outcome_backward", mask_ignored, "VERIFY_MASK_ZERO"),
    ("inv_b", "aux_trade_outcome_backward", inv_b_not_inv_b_valid, "VERIFY_REFERENCE"),
    ("inv_b_grad", "aux_trade_outcome_backward", inv_b_not_inv_b_valid, "VERIFY_GRADCHECK"),
    ("overwrite", "aux_next_bar_backward", saxpy_overwrites, "VERIFY_ACCUMULATE"),
    ("off_by_one_row", "strided_gather", last_row_unwritten, "VERIFY_UNWRITTEN_OUTPUT"),
    ("nan", "aux_trunk_forward", nan_output, "VERIFY_NAN"),
    ("oob", "strided_gather", writes_past_the_end, "VERIFY_OUT_OF_BOUNDS"),
    ("oob_copy", "strided_gather", copies_one_past_the_end, "VERIFY_OUT_OF_BOUNDS"),
    ("threshold", "trade_outcome_label", threshold_inclusive, "VERIFY_REFERENCE", (4096,)),
    ("input_modified", "strided_gather", modifies_its_input, "VERIFY_INPUT_MODIFIED"),
    ("nondeterminism", "aux_trunk_forward", nondeterministic, "VERIFY_DETERMINISM"),
    ("all_skip", "aux_trade_outcome_loss_reduce", nan_when_all_skipped, "VERIFY_ALL_SKIP"),
    ("divisor_zero", "aux_next_bar_loss_reduce", raw_slot_divisor, "VERIFY_DIVISOR_ZERO"),
    ("unit_scale", "aux_next_bar_loss_reduce", unnormalised_label, "VERIFY_UNIT_SCALE"),
    ("elu_sign", "aux_trunk_backward", elu_derivative_wrong_sign, "VERIFY_GRADCHECK"),
    ("launch_error", "strided_gather", illegal_address, "VERIFY_LAUNCH_ERROR"),
]


@pytest.mark.parametrize(("kernel", "bug", "rule", "sizes"), [(*c[1:4], c[4] if len(c) > 4 else SMALL) for c in CASES], ids=[c[0] for c in CASES])
def test_each_check_fails_on_its_bug(repo_root, kernel, bug, rule, sizes):
    out = run(repo_root, kernels=[kernel], bugs={kernel: bug}, sizes=sizes)
    found = rules(out)
    assert rule in found, (rule, [f.message for f in out.result.findings])
    assert out.result.exit_code == 1
    f = next(f for f in out.result.findings if f.rule == rule)
    assert f.subject == kernel
    assert f.message.startswith(f'Kernel "{kernel}" fails {rule}')
    assert f.message.endswith(".") and f.file.startswith("contracts/kernels/") and f.line
    assert all(r.verdict == "fail" for r in out.run.results if r.subject == kernel)


def test_only_the_divisor_check_catches_a_raw_slot_division(repo_root):
    """The slot is random positive in every other case, so max(slot, 1e-6) == slot: nothing else fails."""
    out = run(repo_root, kernels=["aux_next_bar_loss_reduce"], bugs={"aux_next_bar_loss_reduce": raw_slot_divisor})
    assert rules(out) == {"VERIFY_DIVISOR_ZERO"}


def test_graph_replay_catches_a_value_baked_in_at_capture(repo_root):
    out = run(repo_root, schedules=["aux_heads_forward"], bugs={"aux_label_scale_ema_update": StaleIsvAtCapture()})
    assert "VERIFY_GRAPH_REPLAY" in rules(out)
    f = next(f for f in out.result.findings if f.rule == "VERIFY_GRAPH_REPLAY")
    assert f.subject == "aux_heads_forward" and f.file == "contracts/schedules.toml"
    assert "differ bitwise" in f.message and '"isv"' in f.message


def test_chain_catches_a_broken_reduce_in_the_schedule(repo_root):
    out = run(repo_root, schedules=["aux_heads_backward"], bugs={"aux_param_grad_reduce": reduce_drops_last_row})
    assert "VERIFY_CHAIN" in rules(out)
    f = next(f for f in out.result.findings if f.rule == "VERIFY_CHAIN")
    assert re.search(r'buffer "\w+" \((loss|gradient), last written by "aux_param_grad_reduce"', f.message), f.message


def test_equivalence_catches_a_fused_path_that_drifts(repo_root):
    out = run(repo_root, schedules=["aux_heads_backward_fused"], bugs={"aux_weight_grad_finish": weight_grad_off_by_a_bit})
    found = rules(out)
    assert {"VERIFY_EQUIVALENCE", "VERIFY_CHAIN"} <= found
    f = next(f for f in out.result.findings if f.rule == "VERIFY_EQUIVALENCE")
    assert 'differs from schedule "aux_heads_backward" (declared equivalent)' in f.message


def test_reference_message_names_kernel_check_size_output_and_numbers(repo_root):
    def doubled(launch):
        res = launch.run_reference()
        res["h_out"] = res["h_out"] * 2.0
        launch.write_outputs(res)

    out = run(repo_root, kernels=["aux_trunk_forward"], bugs={"aux_trunk_forward": doubled}, sizes=(37,))
    (f,) = [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert re.fullmatch(
        r'Kernel "aux_trunk_forward" fails VERIFY_REFERENCE at B=37 \(E=256, SH2=256\): output "h_out" has relative error 1\.0e\+00 '
        r"\(max abs \d\.\de[+-]\d\d, \d+ of 9472 element\(s\) outside the tolerance, worst at \[\d+, \d+\]: \S+ against \S+\) "
        r"against the float64 reference \(and 37 more case\(s\): B=37 \(E=256, SH2=256\), pointers misaligned; B=37 \(E=256, SH2=253\); "
        r"B=37 \(E=256, SH2=253\), pointers misaligned; B=37 \(E=256, SH2=260\); \.\.\.\)\.",
        f.message,
    ), f.message


def test_a_sticky_launch_error_does_not_stop_the_other_kernels(repo_root):
    out = run(repo_root, kernels=["strided_gather", "trade_outcome_label"], bugs={"strided_gather": illegal_address})
    verdicts = {r.subject: r.verdict for r in out.run.results}
    assert verdicts == {"strided_gather": "fail", "trade_outcome_label": "pass"}
    f = next(f for f in out.result.findings if f.rule == "VERIFY_LAUNCH_ERROR")
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in f.message and "grid=(1, 1, 1) block=(256, 1, 1)" in f.message


def test_not_run_is_reported_never_passed(repo_root):
    out = verify(repo_root, kernels=["aux_trade_outcome_loss_reduce"], emulated={}, sizes=(1, 37), evidence=False, budgets={"reference": 100})
    assert out.result.exit_code == 0
    reasons = [n.reason for n in out.result.not_run if n.rule == "VERIFY_REFERENCE"]
    assert reasons and "reference too large" in reasons[0] and "the kernel is not rowwise" in reasons[0]
    r = out.run.results[0]
    assert r.not_run and r.verdict == "pass"  # B=1 was compared; B=37 is listed as not run, not as passed
    # (at K = 1 the reference of B=37 has 37 elements, inside the budget of 100: compared; 4-7 are the search's
    # neighbours of the listed 1, 2, 3, 8)
    assert {c.case for c in r.checks if c.check == "reference" and c.verdict == "not_run"} == {f"B=37 (K={k}{m})" for k in (2, 3, 4, 5, 6, 7, 8) for m in ("", ", all-skip", ", all-valid")}


def test_out_of_bounds_message_names_buffer_side_and_offset(repo_root):
    out = run(repo_root, kernels=["strided_gather"], bugs={"strided_gather": writes_past_the_end}, sizes=(1,))
    (f,) = [f for f in out.result.findings if f.rule == "VERIFY_OUT_OF_BOUNDS"]
    assert f.message == (
        'Kernel "strided_gather" fails VERIFY_OUT_OF_BOUNDS at B=1 (S=32) (run A): it wrote outside a buffer: 4 byte(s) of the '
        'guard band after "dst" changed (first at byte 4, the buffer has 4 bytes) (and 15 more case(s): B=1 (S=1); B=1 (S=7); '
        "B=1 (S=64); B=1 (S=2); ...)."
    )  # one finding for the kernel, at its first case; the S variants that fail the same way are counted


def test_unwritten_message_counts_the_poisoned_elements(repo_root):
    out = run(repo_root, kernels=["strided_gather"], bugs={"strided_gather": last_row_unwritten}, sizes=(37,))
    (f,) = [f for f in out.result.findings if f.rule == "VERIFY_UNWRITTEN_OUTPUT"]
    assert f.message == (
        'Kernel "strided_gather" fails VERIFY_UNWRITTEN_OUTPUT at B=37 (S=32): output "dst" has 1 of 37 element(s) never '
        "written (they still hold the poison pattern after two runs) (and 15 more case(s): B=37 (S=1); B=37 (S=7); "
        "B=37 (S=64); B=37 (S=2); ...)."
    )
