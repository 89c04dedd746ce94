"""Sampled references for kernels that are not rowwise (issue 15, item 4), on the CPU.

A kernel with a large fixed dim (tests/data/wide_columns: the column sum of a [B, V] input, V = 50,257)
stays verifiable beyond the reference budget: its contract names the outputs the reference can compute a
sample of (``[kernel.verify] sample_axes``), the reference receives ``select = {output: indices}`` and
returns only those elements, a probe checks that against a full call, and only the sample is compared,
with the results saying so. A reference that cannot sample leaves the check not run, and a kernel whose
reference was never compared is *not verified* (a warning, an error under ``--strict``, no evidence).
The budgets are scaled down (2^20 reference elements) so that B = 37 plays the part of B = 1027.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from audit.api import load_project
from audit.cli import main
from audit.errors import ContractError
from audit.graph import Wiring
from audit.hashing import contract_hash
from audit.load import load_contracts
from audit.runtime import verify
from audit.runtime.report import summary_table
from audit.search.sizes import plan_kernel

REPO = Path(__file__).resolve().parents[1]
WIDE = REPO / "tests" / "data" / "wide_columns"
V = 50257
SMALL = {"reference": 1 << 20}  # B = 37 is 1.9e6 reference elements: sampled; B = 3 (2.0e5) runs in full


@pytest.fixture
def wide(tmp_path: Path) -> Path:
    dst = tmp_path / "wide_columns"
    shutil.copytree(WIDE, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def drops_the_last_rows(launch) -> None:
    """The buggy copy (buggy/column_sum_no_tail.cu) in Python: the last rows % 4 rows are never added."""
    x, out, rows = launch.tensor("x"), launch.tensor("colsum"), int(launch.scalar("rows"))
    out[:] = x[: rows - rows % 4].astype(np.float64).sum(axis=0).astype(np.float32)


def nan_in_one_column(launch) -> None:
    """Right everywhere but one column that no sample of 256 is likely to hold."""
    res = launch.run_reference()
    col = np.array(res["colsum"], copy=True)
    col[12345] = np.nan
    launch.write_outputs({"colsum": col})


def reference_checks(out):
    [r] = [r for r in out.run.results if r.kind == "kernel"]
    return r, {c.case: c for c in r.checks if c.check == "reference"}


def test_beyond_the_budget_a_sample_is_compared_and_the_result_says_so(wide: Path) -> None:
    out = verify(wide, emulated={}, kernels=["column_sum"], sizes=["B=3", "B=37"], evidence=False, budgets=SMALL)
    r, ref = reference_checks(out)
    # column_sum takes the fixed dim as an argument, verified at one value: that coverage warning only
    assert [f.rule for f in out.result.findings] == ["VERIFY_FIXED_DIM_ONE_VALUE"] and out.result.exit_code == 0
    assert ref["B=3"].verdict == "pass" and ref["B=3"].message == "matches the float64 reference"
    assert ref["B=37"].verdict == "pass"
    assert ref["B=37"].message == 'matches the float64 reference (sampled 256 of 50,257 elements of "colsum")'
    assert any('computes sampled elements of "colsum" when given select= (checked against a full call)' in n for n in r.notes)
    assert r.verdict == "pass"
    assert r.cases == [{"B": 3}, {"B": 37}] and r.references == ["full", "sampled"]  # the case matrix's last row


def test_the_case_matrix_says_which_cases_were_sampled(wide: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from audit.runtime.report import matrix_lines

    assert matrix_lines([{"B": 3}, {"B": 37}], ["full", "sampled"]) == "  B          3     37\n  reference  full  sampled\n"
    rc = main(["verify", "--root", str(wide), "--emulated", "--kernel", "column_sum", "--sizes", "3,37", "--no-evidence", "--format", "json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    [subject] = doc["verify"]["subjects"]
    # the CLI keeps the default budgets: B = 37 (1.9e6 reference elements) runs in full there
    assert subject["matrix"] == {"dims": ["B"], "values": [[3, 37]], "reference": ["full", "full"]}


def test_the_sampled_comparison_catches_a_wrong_kernel_and_names_a_real_column(wide: Path) -> None:
    out = verify(wide, emulated={"column_sum": drops_the_last_rows}, kernels=["column_sum"], sizes=["B=37"], evidence=False, budgets=SMALL)
    [f] = [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert f.message.startswith('Kernel "column_sum" fails VERIFY_REFERENCE at B=37: output "colsum" has relative error')
    assert f.message.endswith('against the float64 reference (sampled 256 of 50,257 elements of "colsum").')
    assert "256 of 256 element(s) outside the tolerance" in f.message
    worst = int(f.message.split("worst at [")[1].split("]")[0])
    assert 0 <= worst < V and worst > 256  # an index of the output, not a position in the sample
    assert out.result.exit_code == 1


def test_nan_outside_the_sample_still_fails(wide: Path) -> None:
    out = verify(wide, emulated={"column_sum": nan_in_one_column}, kernels=["column_sum"], sizes=["B=37"], evidence=False, budgets=SMALL)
    [f] = [f for f in out.result.findings if f.rule == "VERIFY_NAN"]
    assert 'output "colsum" has 1 NaN/Inf element(s) outside the sampled elements where the reference elements are finite' in f.message


def test_the_sample_holds_both_ends_the_tile_edges_and_the_last_partial_tile(wide: Path) -> None:
    out = verify(wide, emulated={}, kernels=["column_sum"], sizes=["B=37"], evidence=False, budgets=SMALL)
    # the indices themselves: reproduce them through the verifier's own function
    from audit.runtime._kernel import SAMPLE_ELEMENTS, KernelVerifier

    assert out.result.exit_code == 0
    kv = KernelVerifier.__new__(KernelVerifier)

    class _S:
        class factory:  # noqa: N801 - a stand-in with the one method sample_indices uses
            @staticmethod
            def rng(*key):
                return np.random.default_rng(abs(hash(key)) % (1 << 32))

    kv.s, kv.k = _S(), type("K", (), {"name": "column_sum"})()
    case = type("C", (), {"label": "B=37"})()
    idx = kv.sample_indices(case, "colsum", V)
    assert len(idx) == SAMPLE_ELEMENTS and len(set(idx.tolist())) == SAMPLE_ELEMENTS and list(idx) == sorted(idx)
    assert {0, 1, V - 2, V - 1, 31, 32, 255, 256} <= set(idx.tolist())
    assert {(V - 1) // t * t for t in (32, 256, 1024)} <= set(idx.tolist())  # where each last partial tile starts
    assert list(kv.sample_indices(case, "colsum", 100)) == list(range(100))  # a short axis: every element


def test_a_reference_that_ignores_select_is_not_run_and_the_kernel_is_not_verified(wide: Path) -> None:
    # a copy of the reference that ignores select= (a module of its own name: the original stays imported)
    text = (wide / "refs" / "wide_refs.py").read_text()
    (wide / "refs" / "wide_refs_whole.py").write_text(text.replace("    if cols is not None:\n        x = x[:, np.asarray(cols, dtype=np.int64)]\n", ""))
    toml = wide / "contracts" / "wide.toml"
    toml.write_text(toml.read_text().replace('"wide_refs:column_sum"', '"wide_refs_whole:column_sum"'))
    ev = wide / "evidence"
    out = verify(wide, emulated={}, kernels=["column_sum"], sizes=["B=37"], evidence_dir=ev, budgets=SMALL)
    r, ref_checks = reference_checks(out)
    assert ref_checks["B=37"].verdict == "not_run"
    assert ref_checks["B=37"].message == (
        'not run at B=37: reference too large (1.91e+06 elements) and called with select= it returns "colsum" of shape '
        "[50257], not the [4] of the 4 selected indices along axis 0 (it must return only the selected elements)"
    )
    assert r.verdict == "not_run"
    assert [(f.rule, f.severity.value) for f in out.result.findings] == [("VERIFY_NOT_VERIFIED", "warning")]
    assert "not verified: kernel column_sum on emulated: no case compared it with its reference" in summary_table(out)
    assert not (ev / "kernels" / "column_sum.emulated.json").exists()  # never a record, so evidence reads as missing
    assert main(["report", "--root", str(wide), "--output", str(wide / "r.md")]) == 0
    section = (wide / "r.md").read_text().split("### column_sum")[1].split("\n### ")[0]
    assert "**GPU verification:** ⚠️ missing" in section and "✅ verified" not in section
    strict = verify(wide, emulated={}, kernels=["column_sum"], sizes=["B=37"], evidence=False, budgets=SMALL, strict=True)
    assert [(f.rule, f.severity.value) for f in strict.result.findings] == [("VERIFY_NOT_VERIFIED", "error")]
    assert strict.result.exit_code == 1


def test_without_sample_axes_the_reference_is_not_run_past_the_budget(wide: Path) -> None:
    toml = wide / "contracts" / "wide.toml"
    toml.write_text(toml.read_text().replace("sample_axes = { colsum = 0 }", ""))
    out = verify(wide, emulated={}, kernels=["column_sum"], sizes=["B=3", "B=37"], evidence=False, budgets=SMALL)
    _, ref = reference_checks(out)
    assert ref["B=3"].verdict == "pass"
    assert ref["B=37"].verdict == "not_run"
    assert ref["B=37"].message.endswith("the kernel is not rowwise and declares no sample_axes)")


def test_the_default_sweep_starts_small_and_reaches_past_the_reference_budget(wide: Path) -> None:
    from audit.runtime._session import INPUT_BUDGET, REFERENCE_BUDGET

    cfg, cs = load_project(wide)
    plan = plan_kernel(cs, cs.kernel_map["column_sum"], Wiring(cs), root=cfg.root)
    bs = [c.as_dict()["B"] for c in plan.cases]
    assert bs[0] == 1 and bs == sorted(bs)
    assert all(b * V <= INPUT_BUDGET for b in bs)  # 4096 and 65536 are over the memory budget here
    past = [b for b in bs if (b + 1) * V > REFERENCE_BUDGET]
    assert past == [1027]  # the contract's extra case: compared on sampled columns on the GPU


_KERNEL = """[dims]
B = { min = 1, max = 8 }
V = { value = 300 }

[[kernel]]
name = "k"
source = "kernels/k.cu"
stage = "reduce"
grid = [1, 1, 1]
block = [32, 1, 1]
params = [
  { name = "x", dtype = "f32", shape = ["B", "V"], role = "in" },
  { name = "s", dtype = "f32", shape = ["V"], role = "out" },
  { name = "t", dtype = "f32", shape = [], role = "out" },
  { name = "w", dtype = "f32", shape = ["V"], role = "out", write_range = { axis = 0, stop = 100 } },
]

[kernel.verify]
"""


@pytest.mark.parametrize(
    ("verify_toml", "key", "message"),
    [
        ("sample_axes = { q = 0 }\n", "kernel[0].verify.sample_axes.q",
         '"q" is not an output of kernel "k"; its outputs are "s", "t", "w".'),
        ("sample_axes = { x = 0 }\n", "kernel[0].verify.sample_axes.x",
         '"x" is not an output of kernel "k"; its outputs are "s", "t", "w".'),
        ("sample_axes = { s = 1 }\n", "kernel[0].verify.sample_axes.s",
         'expected an axis of output "s" (an integer from 0 to 0), found the integer 1.'),
        ('sample_axes = { s = "0" }\n', "kernel[0].verify.sample_axes.s",
         'expected an axis of output "s" (an integer from 0 to 0), found the string "0".'),
        ("sample_axes = { t = 0 }\n", "kernel[0].verify.sample_axes.t",
         'output "t" is a scalar; expected "sample_axes" only on outputs with an axis to sample.'),
        ("sample_axes = { w = 0 }\n", "kernel[0].verify.sample_axes.w",
         'output "w" has a write_range; expected "sample_axes" only on outputs written whole.'),
        ("rowwise = true\nsample_axes = { s = 0 }\n", "kernel[0].verify.sample_axes",
         'expected "sample_axes" or rowwise = true, found both; a rowwise kernel is compared on sampled rows already.'),
    ],
)
def test_bad_sample_axes_name_file_key_and_line(verify_toml: str, key: str, message: str) -> None:
    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": _KERNEL + verify_toml})
    (problem,) = info.value.problems
    assert (problem.path, problem.key, problem.message) == ("contracts/k.toml", key, message)
    assert problem.line == _KERNEL.count("\n") + verify_toml.count("\n")


def test_a_bad_sample_axes_exits_2_with_one_sentence(wide: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = wide / "contracts" / "wide.toml"
    toml.write_text(toml.read_text().replace("sample_axes = { colsum = 0 }", "sample_axes = { colsum = 2 }"))
    assert main(["check", "--root", str(wide)]) == 2
    err = capsys.readouterr().err
    assert 'error: contracts/wide.toml:37: kernel[0].verify.sample_axes.colsum: expected an axis of output "colsum" (an integer from 0 to 0), found the integer 2.' in err
    assert "Traceback" not in err


def test_sample_axes_moves_the_contract_hash_only_where_it_is_given() -> None:
    base = _KERNEL.replace('  { name = "w", dtype = "f32", shape = ["V"], role = "out", write_range = { axis = 0, stop = 100 } },\n', "")
    a = load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": base})
    b = load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": base + "sample_axes = { s = 0 }\n"})
    assert b.kernel_map["k"].verify.sample_axes == (("s", 0),)
    assert contract_hash(a.kernel_map["k"]) != contract_hash(b.kernel_map["k"])
    # absent, the field is left out of the hash: a kernel without it hashes as before the key existed
    from audit.hashing import canonical

    assert "sample_axes" not in str(canonical(a.kernel_map["k"]))
    assert "sample_axes" in str(canonical(b.kernel_map["k"]))


def test_sample_axes_survives_the_contract_round_trip() -> None:
    from audit.serialize import dump_contracts

    _, cs = load_project(WIDE)
    texts = dump_contracts(cs)
    again = load_contracts(Path("contracts"), Path("."), texts=texts)
    assert again.kernel_map["column_sum"].verify.sample_axes == (("colsum", 0),)
    assert contract_hash(again.kernel_map["column_sum"]) == contract_hash(cs.kernel_map["column_sum"])
