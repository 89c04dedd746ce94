"""Printers: every output format is well formed, and one bad fixture's output is pinned per format.

Snapshots live in ``tests/data/snapshots/``; after an intended change of a message or format, rewrite
them with ``WIREUP_UPDATE_SNAPSHOTS=1 pytest tests/test_printers.py`` and review the diff.
"""

from __future__ import annotations

import functools
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.cli import main
from audit.findings import CheckResult, Finding, NotRun, Severity
from audit.printers import FORMATS, render
from audit.rules import iter_rules

DATA = Path(__file__).resolve().parent / "data"
SNAPSHOTS = DATA / "snapshots"
RULES = DATA / "rules"
STATIC = ("schema", "wiring", "isv", "invariants")
SNAPSHOT_CASE = ("SLOT_INDEX", "isv")  # bad fixture, selection: one error and one warning
SUFFIX = {"text": "txt", "json": "json", "github": "github.txt", "junit": "junit.xml", "sarif": "sarif.json"}
URI_REFERENCE = re.compile(r"^(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$")


def cli_output(capsys: pytest.CaptureFixture[str], root: Path, select: str, fmt: str) -> tuple[int, str]:
    rc = main(["check", "--root", str(root), "--select", select, "--format", fmt])
    out, err = capsys.readouterr()
    # the one progress line a cold build prints (whole-project fixtures build in a fresh folder) is not output
    assert [line for line in err.splitlines() if not line.startswith("wireup: compiling ")] == []
    return rc, out


def normalise_sarif(text: str, categories: tuple[str, ...]) -> str:
    """The SARIF text without what changes when wireup's version or other categories' rules change."""
    doc = json.loads(text)
    driver = doc["runs"][0]["tool"]["driver"]
    driver["version"] = "<version>"
    rules = driver["rules"]
    for res in doc["runs"][0]["results"]:
        assert rules[res.pop("ruleIndex")]["id"] == res["ruleId"]
    driver["rules"] = [r for r in rules if r["properties"]["category"] in categories]
    return json.dumps(doc, indent=2) + "\n"


# --- snapshots ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_snapshot(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    rule_id, select = SNAPSHOT_CASE
    rc, out = cli_output(capsys, RULES / rule_id / "bad", select, fmt)
    assert rc == 1
    if fmt == "sarif":
        out = normalise_sarif(out, (select,))
    snap = SNAPSHOTS / f"{rule_id}-bad.{select}.{SUFFIX[fmt]}"
    if os.environ.get("WIREUP_UPDATE_SNAPSHOTS"):
        snap.write_text(out, encoding="utf-8")
    assert out == snap.read_text(encoding="utf-8"), f"{snap.name} is stale; see this module's docstring"


# --- SARIF ---------------------------------------------------------------------------------------------


@functools.cache
def sarif_schema_validator():
    """A validator for the trimmed SARIF schema, or None without jsonschema (the structural asserts remain)."""
    try:
        import jsonschema
    except ImportError:
        return None
    schema = json.loads((SNAPSHOTS / "sarif-2.1.0.trimmed.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def assert_sarif_well_formed(doc: dict, result_count: int) -> None:
    if sarif_schema_validator() is not None:
        sarif_schema_validator().validate(doc)
    assert doc["version"] == "2.1.0"
    (run,) = doc["runs"]
    driver = run["tool"]["driver"]
    ids = [r["id"] for r in driver["rules"]]
    assert ids == [r.id for r in iter_rules()] and len(set(ids)) == len(ids)
    levels = {r.id: r.severity.value for r in iter_rules()}
    for r in driver["rules"]:
        assert r["defaultConfiguration"]["level"] == levels[r["id"]]
        assert r["shortDescription"]["text"].endswith(".")
    assert len(run["results"]) == result_count
    for res in run["results"]:
        assert driver["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["level"] in ("error", "warning", "note")
        assert res["message"]["text"].endswith(".")
        for loc in res["locations"]:
            phys = loc["physicalLocation"]
            assert URI_REFERENCE.match(phys["artifactLocation"]["uri"])
            assert phys["artifactLocation"]["uriBaseId"] in run["originalUriBaseIds"]
            assert phys["region"]["startLine"] >= 1
    assert run["invocations"][0]["executionSuccessful"] is True


@pytest.mark.parametrize("rule_id", sorted(p.name for p in RULES.iterdir() if p.is_dir() and not p.name.startswith("EVIDENCE_")))  # those: test_evidence_rules.py
def test_sarif_is_well_formed_for_every_bad_fixture(rule_id: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import shutil

    from audit.rules import iter_rules

    category = {r.id: r.category for r in iter_rules()}[rule_id]
    root, select = RULES / rule_id / "bad", ",".join(STATIC)
    if category not in STATIC:  # whole-project fixtures (build, layout, launchers, evidence) run on a copy
        if category == "build" and shutil.which("nvcc") is None:
            pytest.skip("the build rules' fixtures need nvcc on PATH")
        root, select = tmp_path / "bad", f"{select},{category}"
        shutil.copytree(RULES / rule_id / "bad", root)
    rc, out = cli_output(capsys, root, select, "sarif")
    doc = json.loads(out)
    _, js = cli_output(capsys, root, select, "json")
    findings = json.loads(js)["findings"]
    assert_sarif_well_formed(doc, len(findings))
    results = doc["runs"][0]["results"]
    assert [(r["ruleId"], r["level"], r["message"]["text"]) for r in results] == [
        (f["rule"], f["severity"], f["message"]) for f in findings
    ]
    assert rule_id in {r["ruleId"] for r in results}
    assert rc == (1 if any(r["level"] == "error" for r in results) else 0)


def test_sarif_uri_is_percent_encoded() -> None:
    result = CheckResult(findings=[Finding("DEAD_KERNEL", Severity.ERROR, "Kernel \"k\" is dead.", "contracts/my dir/a#b%ü.toml", 3)])
    doc = json.loads(render(result, "sarif"))
    assert_sarif_well_formed(doc, 1)
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "contracts/my%20dir/a%23b%25%C3%BC.toml"


def test_sarif_schema_rejects_a_malformed_log() -> None:
    pytest.importorskip("jsonschema")
    validator = sarif_schema_validator()
    good = json.loads(render(CheckResult(findings=[Finding("DEAD_KERNEL", Severity.ERROR, "m.", "f.toml", 1)]), "sarif"))
    validator.validate(good)
    for breakage in (
        lambda d: d.update(version="2.0.0"),
        lambda d: d["runs"][0]["results"][0].pop("message"),
        lambda d: d["runs"][0]["results"][0].update(level="fatal"),
        lambda d: d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(startLine=0),
        lambda d: d["runs"][0]["tool"]["driver"]["rules"][0].pop("id"),
        lambda d: d["runs"][0]["results"][0].update(ruleid="X"),
    ):
        bad = json.loads(json.dumps(good))
        breakage(bad)
        assert list(validator.iter_errors(bad)), breakage


# --- JUnit ---------------------------------------------------------------------------------------------


def junit_cases(xml_text: str) -> tuple[ET.Element, list[ET.Element]]:
    suite = ET.fromstring(xml_text)
    assert suite.tag == "testsuite"
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases)
    assert int(suite.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
    assert int(suite.get("skipped")) == sum(1 for c in cases if c.find("skipped") is not None)
    assert suite.get("errors") == "0"
    names = [c.get("name") for c in cases]
    assert len(names) == len(set(names)), "one testcase per rule per subject"
    return suite, cases


@pytest.mark.parametrize("rule_id", ["SHAPE_MISMATCH", "DEAD_KERNEL", "SCHEDULE_CYCLE", "UNKNOWN_BUFFER"])
def test_junit_has_one_testcase_per_rule_and_subject(rule_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    root = RULES / rule_id / "bad"
    _, js = cli_output(capsys, root, "schema,wiring", "json")
    findings = [f for f in json.loads(js)["findings"] if f["severity"] == "error"]
    rc, xml_text = cli_output(capsys, root, "schema,wiring", "junit")
    assert rc == 1
    _, cases = junit_cases(xml_text)
    kernels = ["make_label", "forward", "loss", "backward", "reduce", "weight_reduce"]
    schedules = ["forward", "backward", "backward_fused"]
    rules = [r.id for r in iter_rules() if r.category in ("schema", "wiring")]
    expected = {f"{r}[{s}]" for r in rules for s in kernels + schedules} | {f"{f['rule']}[{f['subject']}]" for f in findings}
    assert {c.get("name") for c in cases} == expected
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == {f"{f['rule']}[{f['subject']}]" for f in findings}
    assert any(name.startswith(f"{rule_id}[") for name in failed)
    for c in cases:
        fail = c.find("failure")
        if fail is not None:
            assert fail.get("type") == c.get("classname").removeprefix("wireup.")
            assert fail.get("message").endswith(".")


def test_junit_of_a_good_fixture_has_no_failures(capsys: pytest.CaptureFixture[str]) -> None:
    rc, xml_text = cli_output(capsys, RULES / "SHAPE_MISMATCH" / "good", ",".join(STATIC), "junit")
    assert rc == 0
    suite, cases = junit_cases(xml_text)
    assert suite.get("failures") == "0" and len(cases) > 33


def test_junit_skips_rules_not_run_and_survives_control_characters() -> None:
    result = CheckResult(
        findings=[Finding("DEAD_KERNEL", Severity.ERROR, 'Kernel "a\x01b" is in no schedule.', "c.toml", 2, "a\x01b")],
        ran=["DEAD_KERNEL"],
        not_run=[NotRun("EVIDENCE_MISSING", "no evidence folder\x0c")],
        subjects={"DEAD_KERNEL": ["a\x01b", "c"]},
    )
    suite, cases = junit_cases(render(result, "junit"))
    assert [c.get("name") for c in cases] == ["DEAD_KERNEL[a\\x01b]", "DEAD_KERNEL[c]", "EVIDENCE_MISSING"]
    assert cases[0].find("failure").get("message") == 'Kernel "a\\x01b" is in no schedule.'
    assert cases[2].find("skipped").get("message") == "not run: no evidence folder\\x0c"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")


# --- JSON ----------------------------------------------------------------------------------------------


def test_json_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = cli_output(capsys, RULES / "SAVED_FOR_BACKWARD" / "bad", ",".join(STATIC), "json")
    doc = json.loads(out)
    assert set(doc) == {"tool", "version", "findings", "not_run", "summary"}
    assert doc["tool"] == "wireup check" and doc["version"] == 1
    assert doc["findings"]
    for f in doc["findings"]:
        assert set(f) == {"rule", "severity", "category", "message", "file", "line", "key", "subject"}
        assert f["severity"] in ("error", "warning", "note") and f["category"] in STATIC
        assert isinstance(f["line"], int) and f["file"].startswith("contracts/")
    summary = doc["summary"]
    assert set(summary) == {"errors", "findings", "rules_ran", "rules_not_run", "exit_code"}
    assert summary["findings"] == len(doc["findings"])
    assert summary["errors"] == sum(1 for f in doc["findings"] if f["severity"] == "error")
    assert summary["rules_ran"] == sum(1 for r in iter_rules() if r.category in STATIC)
    assert summary["exit_code"] == rc == 1
    assert {"rule": "SAVED_FOR_BACKWARD", "key": "kernel[0].params[1].saved", "subject": "make_label"}.items() <= doc["findings"][0].items()


# --- GitHub --------------------------------------------------------------------------------------------

GITHUB_LINE = re.compile(r"^::(error|warning|notice) (?:file=([^,:\n]*),)?(?:line=(\d+),)?title=([^,:\n]+)::([^\n]*)$")


@pytest.mark.parametrize("rule_id", ["SHAPE_MISMATCH", "SLOT_GAP", "INVARIANT_VIOLATED"])
def test_github_lines_match_the_workflow_command_syntax(rule_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, js = cli_output(capsys, RULES / rule_id / "bad", ",".join(STATIC), "json")
    findings = json.loads(js)["findings"]
    _, out = cli_output(capsys, RULES / rule_id / "bad", ",".join(STATIC), "github")
    lines = out.splitlines()
    assert len(lines) == len(findings) > 0
    for line, f in zip(lines, findings):
        m = GITHUB_LINE.match(line)
        assert m, line
        level = {"error": "error", "warning": "warning", "note": "notice"}[f["severity"]]
        assert m.groups() == (level, f["file"], str(f["line"]), f["rule"], f["message"])


def test_github_escapes_properties_and_data() -> None:
    result = CheckResult(
        findings=[Finding("SHAPE_MISMATCH", Severity.ERROR, "50% of\nrows: a, b\r.", "c,d:e%.toml", 7)],
        not_run=[NotRun("BUILD_FAILED", "nvcc: not found\n")],
    )
    assert render(result, "github").splitlines() == [
        "::error file=c%2Cd%3Ae%25.toml,line=7,title=SHAPE_MISMATCH::50%25 of%0Arows: a, b%0D.",
        "::notice title=BUILD_FAILED not run::nvcc: not found%0A",
    ]


# --- every printer on arbitrary findings ------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=30)
_finding = st.builds(
    Finding,
    rule=st.sampled_from([r.id for r in iter_rules()]),
    severity=st.sampled_from(list(Severity)),
    message=_text,
    file=_text,
    line=st.one_of(st.none(), st.integers(1, 10**6)),
    subject=_text,
    key=_text,
    category=st.sampled_from(STATIC),
)


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(findings=st.lists(_finding, max_size=6), not_run=st.lists(st.builds(NotRun, rule=_text, reason=_text), max_size=2, unique_by=lambda n: n.rule))
def test_every_printer_renders_arbitrary_findings(findings: list[Finding], not_run: list[NotRun]) -> None:
    ran = sorted({f.rule for f in findings})
    result = CheckResult(findings=findings, ran=ran, not_run=not_run, subjects={r: ["k"] for r in ran})
    doc = json.loads(render(result, "json"))
    assert [f["message"] for f in doc["findings"]] == [f.message for f in findings]
    sarif = json.loads(render(result, "sarif"))
    assert [r["message"]["text"] for r in sarif["runs"][0]["results"]] == [f.message for f in findings]
    if sarif_schema_validator() is not None:
        sarif_schema_validator().validate(sarif)
    _, cases = junit_cases(render(result, "junit"))
    assert len(cases) >= len(ran) + len(not_run)
    lines = render(result, "github").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(findings) + len(not_run)
    text = render(result, "text")
    assert text.endswith(".\n") and "error(s)" in text.split("\n")[-2]
    assert text.count("\n") == len(findings) + len(not_run) + 1, "one line per finding"


def test_sarif_rules_carry_help_and_a_help_uri_into_the_rules_page(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    _, out = cli_output(capsys, RULES / "SLOT_GAP" / "bad", "isv", "sarif")
    rules = {r["id"]: r for r in json.loads(out)["runs"][0]["tool"]["driver"]["rules"]}
    page = (Path(__file__).resolve().parents[1] / "docs" / "rules.md").read_text(encoding="utf-8")
    anchors = {h.lower() for h in re.findall(r"^## ([A-Z_]+)$", page, re.M)}
    for rule_id, r in rules.items():
        assert r["helpUri"].endswith(f"/docs/rules.md#{rule_id.lower()}")
        assert rule_id.lower() in anchors, f"{rule_id} has no section in docs/rules.md"
        assert r["help"]["text"].startswith(f"{rule_id}: ")
    assert "```diff" in rules["SLOT_GAP"]["help"]["markdown"]  # a static rule's help shows its example


def test_sarif_lists_suppressed_findings_as_suppressed(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = cli_output(capsys, RULES / "SUPPRESSION_UNUSED" / "good", "isv,schema", "sarif")
    assert rc == 0
    results = json.loads(out)["runs"][0]["results"]
    (res,) = results
    assert res["ruleId"] == "SLOT_GAP"
    assert res["suppressions"] == [{"kind": "inSource", "justification": "indices 6..7 are reserved for the next head's EMAs; checkpoints already carry them"}]
