"""Partial writes, views at an offset and declared aliasing at run time (issue 17 item 4), on the emulated backend.

The fixture ``tests/data/views`` is one training step over a flat weight buffer: ``linear`` reads W and b as
views at offsets into ``params``, ``relu_inplace`` runs in place on ``h`` (its two pointers declared aliased),
``pad_copy`` writes columns [0, H) of rows padded to P = H + 4, and ``sgd_step`` updates each weight view of
``params`` from the same view of ``grads``. The emulated kernels are the float64 references stored in float32
(right by construction); each test swaps one for a float32 emulation of a broken twin that
``kernels/views.cu`` also holds (tests/gpu/test_views_gpu.py runs those on the device), and the matching check
must fail while the right kernels pass every check.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from audit.runtime import verify

FIXTURE = Path(__file__).resolve().parent / "data" / "views"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("views") / "views"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def run(root: Path, **kernels):
    return verify(root, emulated=kernels, sizes=(37,), chain_sizes=(37,), evidence=False)


def findings(out) -> list[str]:
    # the coverage warnings (tails, a fixed dim argument at one value) say what the fixture does not exercise
    return [f"{f.rule} {f.message}" for f in out.result.findings if f.rule not in ("VERIFY_TAIL_UNCOVERED", "VERIFY_FIXED_DIM_ONE_VALUE")]


def checks(out, subject: str, check: str) -> list:
    return [c for r in out.run.results if r.subject == subject for c in r.checks if c.check == check]


# -- float32 emulations of the broken twins in kernels/views.cu ----------------------------------------------


def pad_copy_zero_padding(launch) -> None:
    launch.default()
    launch.tensor("logits")[:, launch.scalar("H") :] = 0


def pad_copy_short(launch) -> None:
    """Writes columns [0, H - 1) only: the last column of the range is never written."""
    res = launch.run_reference()
    H = launch.scalar("H")
    launch.tensor("logits")[:, : H - 1] = res["logits"][:, : H - 1]


def relu_inplace_zero_first(launch) -> None:
    x, y = launch.tensor("x"), launch.tensor("y")
    y[...] = 0
    y[...] = np.where(x > 0, x, y)  # in place, x now reads the zeros just stored


def sgd_step_overrun(launch) -> None:
    n = launch.scalar("n")
    p = launch.view(int(launch.arg("param").value), np.float32, n + 1)
    g = launch.view(int(launch.arg("grad").value), np.float32, n)
    p[:n] -= np.float32(launch.scalar("lr")) * g
    p[n] = np.float32(1.0)  # one element past the view: the next weight, or the guard band


# -- the right kernels ---------------------------------------------------------------------------------------


def test_the_right_kernels_pass_every_check(project: Path) -> None:
    seen: list[tuple[int, int]] = []

    def relu_spy(launch) -> None:
        seen.append((int(launch.arg("x").value), int(launch.arg("y").value)))
        launch.default()

    out = run(project, relu_inplace=relu_spy)
    assert findings(out) == []
    # declared aliasing: one device pointer for both parameters, in the kernel's own verify and in the chain
    assert seen and all(x == y for x, y in seen)
    untouched = checks(out, "pad_copy", "untouched")
    assert untouched and all(c.verdict == "pass" for c in untouched)
    assert untouched[0].message == '"logits" unchanged outside the write range'
    (chain_views,) = checks(out, "train_step", "untouched")
    assert (chain_views.verdict, chain_views.message) == ("pass", "every launch wrote only inside the views it was given of its flat buffers")
    (chain,) = checks(out, "train_step", "chain")
    assert chain.verdict == "pass"
    notes = [n for r in out.run.results if r.subject == "relu_inplace" for n in r.notes]
    assert '"x" and "y" are one allocation (aliases): the kernel runs in place and the reference gets one array under both names; "y" is not poisoned, so VERIFY_UNWRITTEN_OUTPUT does not judge it' in notes


# -- partial writes ------------------------------------------------------------------------------------------


def test_writing_outside_the_write_range_is_caught(project: Path) -> None:
    out = run(project, pad_copy=pad_copy_zero_padding)
    assert 'VERIFY_UNTOUCHED Kernel "pad_copy" fails VERIFY_UNTOUCHED at B=37: output "logits" changed 148 element(s) outside its write range axis 1 [0, H) (first at [0, 8]), which must keep what it held before the launch.' in findings(out)
    # the written range itself is right: the reference comparison (on the range) passes
    assert all(c.verdict == "pass" for c in checks(out, "pad_copy", "reference"))


def test_an_unwritten_element_inside_the_range_is_caught(project: Path) -> None:
    out = run(project, pad_copy=pad_copy_short)
    assert 'VERIFY_UNWRITTEN_OUTPUT Kernel "pad_copy" fails VERIFY_UNWRITTEN_OUTPUT at B=37: output "logits" has 37 of 296 element(s) never written (they still hold the poison pattern after two runs).' in findings(out)
    # the padding holds poison by design and is not counted: 37 rows x 1 column, of the 37 x 8 written part
    assert all(c.verdict == "pass" for c in checks(out, "pad_copy", "untouched"))


# -- aliasing ------------------------------------------------------------------------------------------------


def test_a_kernel_that_breaks_in_place_fails_when_aliasing_is_declared(project: Path) -> None:
    out = run(project, relu_inplace=relu_inplace_zero_first)
    assert 'VERIFY_REFERENCE Kernel "relu_inplace" fails VERIFY_REFERENCE at B=37: output "y" has an all-zero output where the reference is not zero (relative error 1.0e+00, max |ref| 3.3e+00) against the float64 reference (and 1 more case(s): B=37, pointers misaligned).' in findings(out)


def test_without_the_declaration_the_same_kernel_passes_its_own_verify(tmp_path: Path) -> None:
    """The reason for the key: verified on two buffers the broken kernel is right (its chain launch in place
    still fails, and ALIAS_UNDECLARED reports the binding statically)."""
    root = tmp_path / "views"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    toml = root / "contracts" / "step.toml"
    toml.write_text(toml.read_text().replace('aliases = [["x", "y"]]\n', ""))
    out = run(root, relu_inplace=relu_inplace_zero_first)
    assert all(c.verdict == "pass" for c in checks(out, "relu_inplace", "reference"))
    assert any(f.startswith('VERIFY_CHAIN Schedule "train_step" fails VERIFY_CHAIN at B=37: buffer "h"') for f in findings(out))


# -- views ---------------------------------------------------------------------------------------------------


def test_a_kernel_writing_past_its_view_is_caught_in_the_chain(project: Path) -> None:
    out = run(project, sgd_step=sgd_step_overrun)
    got = findings(out)
    # the W view [0, 128): the element past it is b[0], inside the flat buffer, which no guard band sees
    assert (
        'VERIFY_UNTOUCHED Kernel "sgd_step" fails VERIFY_UNTOUCHED at B=37 in schedule "train_step" (step 3 of "train_step" ("sgd_step")): '
        'it wrote outside its views of buffer "params" ("param" [0, 128)): 1 element(s) changed, first at element 128.'
    ) in got
    # the b view ends the buffer: past it is the guard band (and alone the kernel overruns its own buffer)
    assert any(f.startswith('VERIFY_OUT_OF_BOUNDS Kernel "sgd_step" fails VERIFY_OUT_OF_BOUNDS at B=37 in schedule "train_step"') for f in got)
    assert any(f.startswith('VERIFY_OUT_OF_BOUNDS Kernel "sgd_step" fails VERIFY_OUT_OF_BOUNDS at B=37 (N=128)') for f in got)


def test_the_chain_passes_each_view_at_its_offset(project: Path) -> None:
    """The second sgd_step launch gets ``params + H * D``: the emulated kernel sees the b slice (8 elements)
    starting at the flat buffer's element 128, and the float64 chain updates the same slice."""
    starts: list[int] = []

    def sgd_spy(launch) -> None:
        starts.append(int(launch.arg("param").value))
        launch.default()

    out = run(project, sgd_step=sgd_spy)
    assert findings(out) == []
    chain_starts = starts[-2:]  # the chain runs after the kernels' own verifies
    assert chain_starts[1] - chain_starts[0] == 128 * 4


def test_a_partial_in_place_update_keeps_the_rest_of_its_view(tmp_path: Path) -> None:
    """An ``inout`` with a write range: the change is judged on the range (VERIFY_INOUT_DELTA), the rest must
    keep its input (VERIFY_UNTOUCHED), and in the chain the reference updates the range of the view at its
    offset only. Here sgd_step skips the last element of each view; a kernel updating all of it fails."""
    root = tmp_path / "views"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    toml = root / "contracts" / "step.toml"
    old = '{ name = "param", dtype = "f32", shape = ["N"], role = "inout" }'
    toml.write_text(toml.read_text().replace(old, old[:-2] + ', write_range = { axis = 0, stop = "N - 1" } }'))
    out = run(root)
    assert findings(out) == []
    for check in ("untouched", "inout_delta", "reference"):
        got = checks(out, "sgd_step", check)
        assert got and all(c.verdict == "pass" for c in got), (check, [c.message for c in got])

    def sgd_whole(launch) -> None:
        p, g = launch.tensor("param"), launch.tensor("grad")
        p -= np.float32(launch.scalar("lr")) * g

    got = findings(run(root, sgd_step=sgd_whole))
    assert (
        'VERIFY_UNTOUCHED Kernel "sgd_step" fails VERIFY_UNTOUCHED at B=37 (N=128): output "param" changed 1 element(s) outside its write '
        "range axis 0 [0, N - 1) (first at [127]), which must keep what it held before the launch (and 1 more case(s): B=37 (N=8))."
    ) in got
    assert any(f.startswith('VERIFY_CHAIN Schedule "train_step" fails VERIFY_CHAIN at B=37: buffer "params"') for f in got)


def test_a_flat_buffer_over_the_fetch_budget_is_not_compared_and_says_so(project: Path) -> None:
    """The views of "params" (136 elements) are not compared with a budget of 100: the check is recorded as
    not run for that buffer, never as passed."""
    out = verify(project, emulated={}, sizes=(37,), chain_sizes=(37,), evidence=False, budgets={"fetch": 100, "reference": 100})
    views = checks(out, "train_step", "untouched")
    assert [(c.verdict, c.message) for c in views] == [
        ("not_run", 'buffer "params" (136 elements) is over the fetch budget: the writes outside its views are not compared at B=37'),
    ]
    partial = checks(out, "pad_copy", "untouched")
    assert partial and {(c.verdict, c.message) for c in partial} == {("not_run", '"logits" is too large to fetch at B=37')}
