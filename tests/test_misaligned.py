"""Run E of kernel verification: every pointer off a 16-byte boundary (each only as aligned as its
element, or as its declared ``align``), compared with the same reference. A kernel that vector-loads a
pointer it never checks faults there, or reads the wrong words, as it would in production on a view at an
odd offset. The emulated kernels below stand in for such code."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.errors import ContractError
from audit.load import load_contracts
from audit.runtime import verify
from audit.runtime._backend import DeviceError
from audit.serialize import dump_contracts

REPO = Path(__file__).resolve().parents[1]


def _pointer(launch, name: str) -> int:
    return int(launch.args[launch._param_index(name)].value)


def faults_unless_16_aligned(launch):
    """float4 loads of "src" with no alignment check: the GPU raises a misaligned-address error."""
    if _pointer(launch, "src") % 16:
        raise DeviceError("misaligned address", sticky=True, code="CUDA_ERROR_MISALIGNED_ADDRESS")
    launch.default()


def reads_rounded_down(launch):
    """Vector loads from the pointer rounded down to 16 bytes: the wrong words, no fault."""
    res = launch.run_reference()
    if _pointer(launch, "src") % 16:
        res["dst"] = res["dst"] * 0.0 + 1.0
    launch.write_outputs(res)


def test_an_unchecked_vector_load_faults_at_the_misaligned_run():
    out = verify(REPO, kernels=["strided_gather"], emulated={"strided_gather": faults_unless_16_aligned}, sizes=(1, 37), evidence=False)
    f = next(f for f in out.result.findings if f.rule == "VERIFY_LAUNCH_ERROR")
    assert "pointers misaligned" in f.message and "CUDA_ERROR_MISALIGNED_ADDRESS" in f.message, f.message
    assert out.result.exit_code == 1


def test_wrong_words_from_a_misaligned_pointer_fail_the_reference():
    out = verify(REPO, kernels=["strided_gather"], emulated={"strided_gather": reads_rounded_down}, sizes=(1, 37), evidence=False)
    bad = [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert bad and all("pointers misaligned" in f.message for f in bad), [f.message for f in out.result.findings]
    r = out.run.results[0]
    # the aligned runs of the same cases pass: only run E differs (at every S variant)
    failed = {c.case for c in r.checks if c.check == "reference" and c.verdict == "fail"}
    assert failed and all(c.startswith("B=37 (S=") and c.endswith("), pointers misaligned") for c in failed), failed
    assert "B=37 (S=32), pointers misaligned" in failed


def test_a_declared_alignment_is_kept(tmp_path):
    """``align = 16`` on "src": run E keeps that pointer 16-byte aligned (and still misaligns "dst")."""
    root = tmp_path / "repo"
    shutil.copytree(REPO, root, ignore=shutil.ignore_patterns(".git", ".venv", ".wireup-cache", "reports", "*.egg-info"))
    path = root / "contracts/kernels/label_producers.toml"
    text = path.read_text()
    old = '{ name = "src", dtype = "f32", shape = ["B", "S"], role = "in"'
    assert old in text
    path.write_text(text.replace(old, '{ name = "src", dtype = "f32", shape = ["B", "S"], role = "in", align = 16'))
    seen = []

    def record(launch):
        seen.append((_pointer(launch, "src") % 16, _pointer(launch, "dst") % 16))
        faults_unless_16_aligned(launch)

    out = verify(root, kernels=["strided_gather"], emulated={"strided_gather": record}, sizes=(1, 37), evidence=False)
    assert out.run.results[0].verdict == "pass", [f.message for f in out.result.findings]
    assert (0, 4) in seen  # run E: "src" at its declared 16 bytes, "dst" at its element's 4
    assert any(c.case.endswith("pointers misaligned") and c.verdict == "pass" for c in out.run.results[0].checks)


def _with_align(tmp_path, value) -> Path:
    root = tmp_path / "c"
    shutil.copytree(REPO / "contracts", root / "contracts")
    path = root / "contracts/kernels/label_producers.toml"
    text = path.read_text()
    old = '{ name = "src", dtype = "f32", shape = ["B", "S"], role = "in"'
    path.write_text(text.replace(old, old + f", align = {value}"))
    return root / "contracts"


@pytest.mark.parametrize("value, found", [(12, "12"), (2, "2"), (512, "512")])
def test_a_bad_alignment_does_not_load(tmp_path, value, found):
    with pytest.raises(ContractError) as e:
        load_contracts(_with_align(tmp_path, value))
    text = str(e.value)
    assert "label_producers.toml" in text and "align" in text
    assert f"expected a power of two from the element size (4 bytes) to 256 bytes, found {found}." in text


def test_alignment_round_trips_and_stays_out_of_the_hash_when_absent(tmp_path):
    from audit.hashing import contract_hash

    plain = load_contracts(REPO / "contracts")
    aligned = load_contracts(_with_align(tmp_path, 16))
    k0, k1 = plain.kernel("strided_gather"), aligned.kernel("strided_gather")
    assert k1.param("src").align == 16 and k0.param("src").align == 0
    assert contract_hash(k0) != contract_hash(k1)
    out = tmp_path / "dumped"
    for name, text in dump_contracts(aligned).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    again = load_contracts(out)
    assert again.kernel("strided_gather").param("src").align == 16
    assert contract_hash(again.kernel("strided_gather")) == contract_hash(k1)
