"""GPU tests of views at an offset, partial writes and declared aliasing (issue 17 item 4), marked ``gpu``.

The fixture tests/data/views (one training step over a flat weight buffer, see its wireup.toml) runs under
``wireup verify`` on both backends (PyCUDA and CuPy):

* the right kernels pass every check, VERIFY_UNTOUCHED included (the padding of ``logits`` and the rest of
  ``params`` around each view keep their bytes);
* with ``pad_copy`` swapped for ``pad_copy_zero_padding`` (zeroes the padding): VERIFY_UNTOUCHED;
* with ``relu_inplace`` swapped for ``relu_inplace_zero_first`` (right on two buffers, zeros in place):
  VERIFY_REFERENCE, because the aliased parameters get one device pointer;
* with ``sgd_step`` swapped for ``sgd_step_overrun`` (one element past its view): VERIFY_UNTOUCHED in the
  chain (the W view's overrun lands in b, inside the flat buffer).

The CPU versions, with float32 emulations of the same kernels, are tests/test_views_runtime.py. Run on the
device machine:

    python3 -m pytest -q -m gpu tests/gpu/test_views_gpu.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.runtime import verify

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "views"
SIZES = (1, 37, 300)


def project(tmp_path: Path, kernel: str | None = None, entry: str | None = None) -> Path:
    """A copy of the fixture, with ``kernel`` launched through the broken twin ``entry`` where given."""
    dst = tmp_path / "views"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    if kernel is not None:
        toml = dst / "contracts" / "step.toml"
        text = toml.read_text()
        old = f'name = "{kernel}"\n'
        assert text.count(old) == 1
        toml.write_text(text.replace(old, f'{old}entry = "{entry}"\n'))
    return dst


def findings(out) -> list[tuple[str, str]]:
    return [(f.rule, f.subject) for f in out.result.findings if f.rule != "VERIFY_TAIL_UNCOVERED"]


def checks(out, subject: str, check: str) -> list:
    return [c for r in out.run.results if r.subject == subject for c in r.checks if c.check == check]


def test_the_right_kernels_pass_on_the_gpu(tmp_path: Path) -> None:
    out = verify(project(tmp_path), sizes=SIZES, chain_sizes=(37, 300), evidence=False, backends=("pycuda", "cupy"))
    assert findings(out) == [], [f.message for f in out.result.findings]
    assert len(out.run.backends) == 2, out.run.backends
    for subject in ("pad_copy", "train_step"):
        got = checks(out, subject, "untouched")
        assert got and all(c.verdict == "pass" for c in got), (subject, [c.message for c in got])
    ref = checks(out, "relu_inplace", "reference")
    assert ref and all(c.verdict == "pass" for c in ref)


@pytest.mark.parametrize(
    ("kernel", "entry", "rule", "subject"),
    [
        ("pad_copy", "pad_copy_zero_padding", "VERIFY_UNTOUCHED", "pad_copy"),
        ("relu_inplace", "relu_inplace_zero_first", "VERIFY_REFERENCE", "relu_inplace"),
        ("sgd_step", "sgd_step_overrun", "VERIFY_UNTOUCHED", "train_step"),
    ],
)
def test_each_broken_twin_is_caught_on_the_gpu(tmp_path: Path, kernel: str, entry: str, rule: str, subject: str) -> None:
    out = verify(project(tmp_path, kernel, entry), sizes=SIZES, chain_sizes=(37,), evidence=False, backends=("pycuda", "cupy"))
    assert (rule, subject) in findings(out), [f.message for f in out.result.findings]
    failed = [f for f in out.result.findings if (f.rule, f.subject) == (rule, subject)]
    assert all(" only]" not in f.message for f in failed), [f.message for f in failed]  # caught on both backends
