"""GPU test of verify's run E (every pointer off a 16-byte boundary), marked ``gpu``.

The fixture tests/data/misaligned loads and stores float4 without checking its pointers: every aligned
case passes, run E faults with a misaligned address on the GPU (VERIFY_LAUNCH_ERROR at "..., pointers
misaligned"); with ``align = 16`` declared on both parameters, run E keeps that alignment and the kernel
passes. The shipped kernels, which check ``aligned16`` before every vector access, pass run E in the
full verification of the shipped set. Run on the device machine:

    python3 -m pytest -q -m gpu tests/gpu/test_misaligned_gpu.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.runtime import verify

pytestmark = pytest.mark.gpu

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "misaligned"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    dst = tmp_path / "misaligned"
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def test_an_unchecked_float4_kernel_faults_at_run_e(project: Path) -> None:
    out = verify(project, kernels=["scale4"], evidence=False, sizes=[1, 37, 300])
    errors = [f for f in out.result.findings if f.severity.value == "error"]
    assert errors and errors[0].rule == "VERIFY_LAUNCH_ERROR", [f.message for f in out.result.findings]
    assert "pointers misaligned" in errors[0].message and "misaligned" in errors[0].message.lower()
    r = out.run.results[0]
    # the aligned runs of the cases before run E passed
    assert any(c.check == "reference" and c.verdict == "pass" and "misaligned" not in c.case for c in r.checks)
    assert out.result.exit_code == 1


def test_a_declared_alignment_is_kept_and_the_kernel_passes(project: Path) -> None:
    path = project / "contracts" / "scale4.toml"
    text = path.read_text()
    for name in ("x", "y"):
        old = f'{{ name = "{name}", dtype = "f32", shape = ["B", 4], role = "{"in" if name == "x" else "out"}" }}'
        assert old in text
        text = text.replace(old, old[:-2] + ", align = 16 }")
    path.write_text(text)
    out = verify(project, kernels=["scale4"], evidence=False, sizes=[1, 37, 300])
    assert [f.message for f in out.result.findings if f.severity.value == "error"] == []
    assert any(c.case.endswith("pointers misaligned") and c.verdict == "pass" for c in out.run.results[0].checks)
