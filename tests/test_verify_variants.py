"""Dims variants of fixed dims (``[kernel.verify] dims``) and their ``variant_cases`` cap, on the
emulated backend: the shipped head forwards are verified at H = 129 and SH2 = 253 as well as at the
production 128 / 256, so a bug only the scalar tail paths of aux_head_forward.cuh reach is caught."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit.load import load_contracts
from audit.runtime import verify


@pytest.fixture(scope="module")
def repo_root(request):
    return request.config.rootpath


def wrong_when_h_is_no_multiple_of_4(launch):
    """The class of the surviving header mutants: a tail path (H % 4 != 0) that drops the last unit."""
    res = launch.run_reference()
    if launch.scalar("H") % 4:
        res["h1_out"] = np.array(res["h1_out"], copy=True)
        res["h1_out"][:, -1] = 0.0
    launch.write_outputs(res)


def test_the_shipped_head_forward_declares_a_tail_variant(repo_root):
    cs = load_contracts(repo_root / "contracts", repo_root)
    spec = cs.kernel_map["aux_next_bar_forward"].verify
    assert dict(spec.dims) == {"H": (128, 129, 100), "SH2": (256, 253)}
    assert spec.variant_cases == 3


def test_a_bug_only_a_fixed_dim_tail_reaches_is_caught_by_the_variant(repo_root):
    out = verify(repo_root, kernels=["aux_next_bar_forward"], emulated={"aux_next_bar_forward": wrong_when_h_is_no_multiple_of_4},
                 evidence=False)  # fmt: skip
    bad = [f for f in out.result.findings if f.rule == "VERIFY_REFERENCE"]
    assert bad, [f.message for f in out.result.findings]
    assert all("H=129" in f.message for f in bad), [f.message for f in bad]
    assert out.result.exit_code == 1


def test_later_variants_run_only_the_smallest_cases(repo_root):
    out = verify(repo_root, kernels=["aux_next_bar_forward"], emulated={}, evidence=False)
    r = out.run.results[0]
    assert r.verdict == "pass", [c for c in r.checks if c.verdict == "fail"]
    labels = {c.case for c in r.checks if c.check == "reference" and c.verdict == "pass"}
    at_129 = {lab for lab in labels if "H=129" in lab}
    at_prod = {lab for lab in labels if "(H=128, SH2=256)" in lab}
    assert at_129 and len({lab.split(" ")[0] for lab in at_129}) <= 3, sorted(at_129)
    assert len({lab.split(" ")[0] for lab in at_prod}) > 3, sorted(at_prod)
    assert any("variant_cases = 3" in n for n in r.notes)


def test_capped_variants_skip_the_numeric_stress_cases(repo_root):
    out = verify(repo_root, kernels=["aux_trade_outcome_forward"], emulated={}, evidence=False)
    r = out.run.results[0]
    stress = {c.case for c in r.checks if "stress" in c.case}
    assert stress, "the first variant runs stress cases"
    assert all("(K=3, H=128, SH2=256, stress" in lab for lab in stress), sorted(stress)
    assert {c.case for c in r.checks if "K=8" in c.case}, "the later variants still run"
    assert any("numeric stress cases ran at the first dims variant only" in n for n in r.notes)


_KERNEL = """[dims]
B = { min = 1, max = 8 }
H = { value = 4 }

[[kernel]]
name = "k"
source = "kernels/k.cu"
stage = "forward"
grid = [1, 1, 1]
block = [32, 1, 1]
params = [{ name = "x", dtype = "f32", shape = ["B", "H"], role = "in" }]

[kernel.verify]
"""


@pytest.mark.parametrize(
    ("verify", "line", "message"),
    [
        ("dims = { H = [4, 5] }\nvariant_cases = 0\n", 15, "expected a positive number of cases, found 0."),
        ("variant_cases = 2\n", 14, 'expected "variant_cases" only next to "dims" (it caps the cases of the dims variants after the first), found no dims.'),
        ('dims = { H = [4, 5] }\nvariant_cases = "3"\n', 15, None),
    ],
)
def test_bad_variant_cases_name_file_key_and_line(verify, line, message):
    from audit.errors import ContractError

    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": _KERNEL + verify})
    (problem,) = info.value.problems
    assert (problem.path, problem.line, problem.key) == ("contracts/k.toml", line, "kernel[0].verify.variant_cases")
    if message is not None:
        assert problem.message == message
    else:
        assert "integer" in problem.message and '"3"' in problem.message


def test_variant_cases_stays_out_of_the_contract_hash():
    from audit.hashing import contract_hash

    texts = {"contracts/k.toml": _KERNEL + "dims = { H = [4, 5] }\n"}
    a = load_contracts(Path("contracts"), Path("."), texts=texts)
    b = load_contracts(Path("contracts"), Path("."), texts={"contracts/k.toml": texts["contracts/k.toml"] + "variant_cases = 1\n"})
    assert b.kernel_map["k"].verify.variant_cases == 1
    assert contract_hash(a.kernel_map["k"]) == contract_hash(b.kernel_map["k"])
