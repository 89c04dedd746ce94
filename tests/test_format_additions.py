"""Format additions for real kernels: ``requires`` on a kernel and ``tolerance`` on a schedule.

Absent, neither changes a contract's hash (the shipped evidence stays valid); present, each loads into
the model, and malformed ones are load errors naming file, key and line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.errors import ContractError
from audit.hashing import contract_hash
from audit.load import load_contracts

RULES = Path(__file__).parent / "data" / "rules"
GOOD = RULES / "LAUNCH_GEOMETRY" / "good"


def load_with(old: str, new: str, rel: str = "contracts/kernels.toml"):
    texts = {p.relative_to(GOOD).as_posix(): p.read_text() for p in (GOOD / "contracts").glob("*.toml")}
    assert texts[rel].count(old) == 1
    texts[rel] = texts[rel].replace(old, new)
    return load_contracts(GOOD / "contracts", GOOD, texts=texts)


def test_requires_loads_each_condition() -> None:
    cs = load_with('dims = ["M", "N"]\n', 'dims = ["M", "N"]\nrequires = ["M % 32 == 0", "N <= 64", "ceil_div(B, 2) != 0"]\n')
    reqs = cs.kernel("weight_reduce").requires
    assert [(r.text, r.op, r.left.text, r.right.text) for r in reqs] == [
        ("M % 32 == 0", "==", "M % 32", "0"),
        ("N <= 64", "<=", "N", "64"),
        ("ceil_div(B, 2) != 0", "!=", "ceil_div(B, 2)", "0"),
    ]
    assert [r.holds({"M": 64, "N": 70, "B": 3}) for r in reqs] == [True, False, True]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('["M % 32"]', '"M % 32" is no condition; expected two dim expressions joined by one of "==", "!=", "<=", ">=", "<", ">".'),
        ('"M <= 4"', 'expected a list of conditions such as ["OC % 32 == 0", "V <= P"], found the string "M <= 4".'),
        ('["M <= 4 +"]', '"4 +" is not a valid dim expression.'),
    ],
)
def test_malformed_requires_is_a_load_error(value: str, message: str) -> None:
    with pytest.raises(ContractError) as exc:
        load_with('dims = ["M", "N"]\n', f'dims = ["M", "N"]\nrequires = {value}\n')
    (problem,) = exc.value.problems
    assert problem.path == "contracts/kernels.toml" and problem.line == 92
    assert message in problem.message


def test_schedule_tolerance_loads_and_needs_a_reason() -> None:
    rel = "contracts/schedules.toml"
    old = 'name = "forward"\n'
    cs = load_with(old, old + 'tolerance = { rtol = 3e-4, atol = 2e-4, reason = "tanh.approx.f32 in the forward" }\n', rel)
    tol = cs.schedule_map["forward"].tolerance
    assert (tol.rtol, tol.atol, tol.reason) == (3e-4, 2e-4, "tanh.approx.f32 in the forward")
    with pytest.raises(ContractError) as exc:
        load_with(old, old + "tolerance = { rtol = 3e-4, atol = 2e-4 }\n", rel)
    assert 'a schedule tolerance needs a "reason"' in exc.value.problems[0].message
    with pytest.raises(ContractError) as exc:
        load_with(old, old + 'tolerance = { rtol = 2.0, atol = 0.0, reason = "x" }\n', rel)
    assert "rtol must lie in (0, 1)" in exc.value.problems[0].message


def test_absent_additions_leave_hashes_unchanged() -> None:
    plain = load_with('dims = ["M", "N"]\n', 'dims = ["M", "N"]\n')
    with_req = load_with('dims = ["M", "N"]\n', 'dims = ["M", "N"]\nrequires = ["M > 0"]\n')
    assert contract_hash(plain.kernel("forward")) == contract_hash(with_req.kernel("forward"))
    assert contract_hash(plain.kernel("weight_reduce")) != contract_hash(with_req.kernel("weight_reduce"))


SUPPRESS = Path(__file__).parent / "data" / "rules" / "SUPPRESSION_UNUSED"


def test_a_suppression_moves_its_finding_out_of_the_count(capsys) -> None:
    import json

    from audit.cli import main

    assert main(["check", "--root", str(SUPPRESS / "good"), "--select", "isv,schema"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].endswith("; 1 finding(s) suppressed by [[suppress]] entries.")
    assert main(["check", "--root", str(SUPPRESS / "good"), "--select", "SLOT_GAP", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["findings"] == []
    (s,) = doc["suppressed"]
    assert (s["rule"], s["file"], s["line"]) == ("SLOT_GAP", "contracts/isv.toml", 5)
    assert s["reason"].startswith("indices 6..7 are reserved")


def test_a_suppression_of_an_unknown_rule_is_named(tmp_path: Path, capsys) -> None:
    import shutil

    from audit.cli import main

    root = tmp_path / "p"
    shutil.copytree(SUPPRESS / "good", root)
    f = root / "contracts" / "suppress.toml"
    f.write_text(f.read_text().replace('rule = "SLOT_GAP"', 'rule = "SLOT_GAPS"'))
    assert main(["check", "--root", str(root), "--select", "SUPPRESSION_UNUSED"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        'contracts/suppress.toml:4: SUPPRESSION_UNUSED (warning) The suppression of "SLOT_GAPS" names no rule; "wireup rules" lists them.'
    )


def test_a_suppression_needs_a_reason() -> None:
    texts = {p.relative_to(SUPPRESS / "good").as_posix(): p.read_text() for p in (SUPPRESS / "good" / "contracts").glob("*.toml")}
    texts["contracts/suppress.toml"] = '[[suppress]]\nrule = "SLOT_GAP"\nreason = " "\n'
    with pytest.raises(ContractError) as exc:
        load_contracts(SUPPRESS / "good" / "contracts", SUPPRESS / "good", texts=texts)
    (problem,) = exc.value.problems
    assert (problem.path, problem.line) == ("contracts/suppress.toml", 3)
    assert 'a suppression needs a "reason"' in problem.message


def test_a_suppression_matching_a_text_suppresses_only_the_findings_that_contain_it(tmp_path: Path, capsys) -> None:
    """``matching``: a text the finding's message must contain (one finding of a kernel, not every one of
    its rule); an entry whose text matches none is SUPPRESSION_UNUSED."""
    import shutil

    from audit.cli import main

    root = tmp_path / "p"
    shutil.copytree(SUPPRESS / "good", root)
    f = root / "contracts" / "suppress.toml"
    text = f.read_text()
    assert main(["check", "--root", str(root), "--select", "SLOT_GAP"]) == 0
    capsys.readouterr()
    f.write_text(text.replace('rule = "SLOT_GAP"', 'rule = "SLOT_GAP"\nmatching = "no such words"'))
    assert main(["check", "--root", str(root), "--select", "SLOT_GAP,SUPPRESSION_UNUSED"]) == 0  # warnings
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == [
        "contracts/isv.toml:5: SLOT_GAP (warning) ISV indices 6..7 belong to no slot; declare them as padding.",
        'contracts/suppress.toml:5: SUPPRESSION_UNUSED (warning) The suppression of SLOT_GAP matching "no such words" suppresses '
        "nothing: no finding of the rule there contains that text any more; remove it, or match the finding's new text."]
    message = next(line for line in out.splitlines() if ": SLOT_GAP " in line).split(": SLOT_GAP ", 1)[1].removeprefix("(warning) ")
    assert message == "ISV indices 6..7 belong to no slot; declare them as padding."
    f.write_text(text.replace('rule = "SLOT_GAP"', 'rule = "SLOT_GAP"\nmatching = "indices 6..7"'))
    assert main(["check", "--root", str(root), "--select", "SLOT_GAP,SUPPRESSION_UNUSED"]) == 0
    assert capsys.readouterr().out.splitlines() == ["wireup check: 0 error(s), 0 warning(s); 2 rule(s) ran; 1 finding(s) suppressed by [[suppress]] entries."]


@pytest.mark.parametrize(("value", "message"), [
    ('""', 'a suppression\'s "matching" is a text every finding it suppresses contains; found an empty one.'),
    ("3", 'expected'),
])
def test_a_suppression_matching_must_be_a_text(value: str, message: str) -> None:
    texts = {p.relative_to(SUPPRESS / "good").as_posix(): p.read_text() for p in (SUPPRESS / "good" / "contracts").glob("*.toml")}
    texts["contracts/suppress.toml"] = f'[[suppress]]\nrule = "SLOT_GAP"\nmatching = {value}\nreason = "r"\n'
    with pytest.raises(ContractError) as exc:
        load_contracts(SUPPRESS / "good" / "contracts", SUPPRESS / "good", texts=texts)
    (problem,) = exc.value.problems
    assert (problem.path, problem.line) == ("contracts/suppress.toml", 3)
    assert message in problem.message


def test_additions_round_trip_through_the_serializer() -> None:
    from audit.serialize import dump_contracts

    texts = {p.relative_to(GOOD).as_posix(): p.read_text() for p in (GOOD / "contracts").glob("*.toml")}
    texts["contracts/kernels.toml"] = texts["contracts/kernels.toml"].replace('dims = ["M", "N"]\n', 'dims = ["M", "N"]\nrequires = ["M % 32 == 0", "N <= 64"]\n')
    texts["contracts/schedules.toml"] = texts["contracts/schedules.toml"].replace(
        'name = "forward"\n', 'name = "forward"\ntolerance = { rtol = 3e-4, atol = 2e-4, reason = "fast tanh" }\n'
    )
    texts["contracts/suppress.toml"] = ('[[suppress]]\nrule = "SLOT_GAP"\nsubject = "isv"\nreason = "reserved"\n'
                                        '[[suppress]]\nrule = "SLOT_GAP"\nmatching = "index 6"\nreason = "reserved too"\n')
    cs = load_contracts(GOOD / "contracts", GOOD, texts=texts)
    again = load_contracts(GOOD / "contracts", GOOD, texts={f"contracts/{k}": v for k, v in dump_contracts(cs).items()})
    assert again.kernel("weight_reduce").requires == cs.kernel("weight_reduce").requires or [
        r.text for r in again.kernel("weight_reduce").requires
    ] == ["M % 32 == 0", "N <= 64"]
    assert (again.schedule_map["forward"].tolerance.rtol, again.schedule_map["forward"].tolerance.reason) == (3e-4, "fast tanh")
    assert [(x.rule, x.subject, x.matching, x.reason) for x in again.suppressions] == [
        ("SLOT_GAP", "isv", None, "reserved"), ("SLOT_GAP", None, "index 6", "reserved too")]


def _geometry_project(tmp_path: Path, requires: str) -> Path:
    """The LAUNCH_GEOMETRY good fixture with "backward" launched on B // 4 blocks (four rows a block), as
    llm.c's softmax_autoregressive_backward_kernel8 is on T / 4."""
    import shutil

    root = tmp_path / "p"
    shutil.copytree(GOOD, root)
    path = root / "contracts" / "kernels.toml"
    text = path.read_text()
    old = 'name = "backward"\n'
    assert text.count(old) == 1 and text.count('grid = ["B", 1, 1]') == 1
    text = text.replace('grid = ["B", 1, 1]', 'grid = ["B // 4", 1, 1]').replace(old, old + requires)
    path.write_text(text)
    return root


def test_an_assumption_over_runtime_dims_selects_the_sizes_launch_geometry_checks(tmp_path: Path) -> None:
    """``requires = ["B % 4 == 0"]`` says the host never launches the kernel at B = 1: its grid there (0
    blocks) is no finding; without the assumption it is one (at B = 1, a probe point)."""
    from audit.api import check

    found = check(_geometry_project(tmp_path / "without", ""), select=["LAUNCH_GEOMETRY"]).findings
    assert [f.message for f in found] == [
        f'Kernel "backward" in schedule "{s}" at B = 1: grid [0, 1, 1] has a dimension below 1.' for s in ("backward", "backward_fused")
    ]
    assert check(_geometry_project(tmp_path / "with", 'requires = ["B % 4 == 0"]\n'), select=["LAUNCH_GEOMETRY", "REQUIRES_VIOLATED"]).findings == []


def test_an_assumption_over_runtime_dims_selects_the_verify_cases(tmp_path: Path) -> None:
    """contracts.md: an assumption "selects the probe points and verify cases": every case of the kernel's
    size sweep has B % 4 == 0 (before, B = 1, 2, 3, ... were chosen and the launch of 0 blocks failed)."""
    from audit.api import load_project
    from audit.graph import Wiring
    from audit.search.sizes import plan_kernel

    cfg, cs = load_project(_geometry_project(tmp_path, 'requires = ["B % 4 == 0"]\n'))
    plan = plan_kernel(cs, cs.kernel_map["backward"], Wiring(cs), root=cfg.root)
    values = [c.as_dict()["B"] for c in plan.cases]
    assert len(values) >= 3 and all(b % 4 == 0 for b in values), values
    cfg, cs = load_project(_geometry_project(tmp_path / "free", ""))
    assert any(c.as_dict()["B"] % 4 for c in plan_kernel(cs, cs.kernel_map["backward"], Wiring(cs), root=cfg.root).cases)
