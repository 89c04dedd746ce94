"""Every output format of ``wireup check`` speaks on load errors.

A configuration or contract that does not load (a TOML syntax error, an unknown dtype, an unknown
configuration key, a missing contracts folder) stops the check with exit 2 and the ``error:`` lines on
stderr; the chosen format (``--output`` as usual, or stdout for the machine formats) carries the same
problems as ``LOAD_ERROR`` findings with file and line, so a CI job that uploads SARIF or reads JUnit is
not left blind. Each format is parsed here, not string-matched.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from audit.cli import main
from audit.findings import LOAD_ERROR
from audit.printers import FORMATS

CORPUS = Path(__file__).resolve().parent / "data" / "bad_input"
DTYPE_MESSAGE = (
    'kernel[0].params[0].dtype: expected one of "f32", "f64", "f16", "bf16", "i8", "u8", "i16", "i32", "u32", "i64", '
    '"u64", found "f31".'
)
CONFIG_MESSAGE = 'unknown key "contract"; valid keys are "contracts", '
GITHUB = re.compile(r"^::error file=(?P<file>[^,:]+)(?:,line=(?P<line>\d+))?,title=(?P<title>[A-Z_]+)::(?P<msg>.+)$")
TEXT = re.compile(r"^(?P<file>[\w./-]+)(?::(?P<line>\d+))?: (?P<rule>[A-Z_]+) (?P<msg>.+)$")


def project(tmp_path: Path, case: str) -> Path:
    root = tmp_path / case
    shutil.copytree(CORPUS / case, root)
    return root


def config_project(tmp_path: Path) -> Path:
    """A project whose contracts are fine but whose wireup.toml has a typo on line 3."""
    root = project(tmp_path, "unknown_dim")
    (root / "wireup.toml").write_text('kernels = "kernels"\n\ncontract = "contracts"\n', encoding="utf-8")
    return root


def check(capsys: pytest.CaptureFixture[str], root: Path, fmt: str, to_file: bool = True) -> tuple[int, str, str]:
    """Exit code, the rendered output (from --output, or stdout) and stderr of ``wireup check``."""
    argv = ["check", "--root", str(root), "--format", fmt]
    target = root / f"out.{fmt}"
    if to_file:
        argv += ["--output", str(target)]
    rc = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if to_file:
        assert out == ""
        return rc, target.read_text(encoding="utf-8"), err
    return rc, out, err


def parse(fmt: str, text: str) -> list[tuple[str, str, int | None, str]]:
    """(rule, file, line, message) of every finding in ``text``, read the way a consumer of ``fmt`` reads it."""
    if fmt == "json":
        doc = json.loads(text)
        assert doc["summary"]["exit_code"] == 2 and doc["summary"]["rules_ran"] == 0
        return [(f["rule"], f["file"], f["line"], f["message"]) for f in doc["findings"]]
    if fmt == "sarif":
        run = json.loads(text)["runs"][0]
        rules = run["tool"]["driver"]["rules"]
        assert run["invocations"][0]["executionSuccessful"] is True  # else code scanning drops the results
        assert run["invocations"][0]["toolExecutionNotifications"][-1]["level"] == "error"
        out = []
        for res in run["results"]:
            assert rules[res["ruleIndex"]]["id"] == res["ruleId"]
            assert res["level"] == "error"
            loc = res["locations"][0]["physicalLocation"]
            out.append((res["ruleId"], loc["artifactLocation"]["uri"], loc.get("region", {}).get("startLine"), res["message"]["text"]))
        return out
    if fmt == "junit":
        suite = ET.fromstring(text)
        assert suite.get("failures") == suite.get("tests")
        out = []
        for case in suite.iter("testcase"):
            failure = case.find("failure")
            assert failure is not None and failure.get("type") == case.get("classname", "").removeprefix("wireup.")
            for line in (failure.text or "").splitlines():
                m = TEXT.match(f"{line.split(': ', 1)[0]}: {failure.get('type')} {line.split(': ', 1)[1]}")
                assert m, line
                out.append((m["rule"], m["file"], int(m["line"]) if m["line"] else None, m["msg"]))
        return out
    if fmt == "github":
        out = []
        for line in text.splitlines():
            m = GITHUB.match(line)
            assert m, line
            out.append((m["title"], m["file"], int(m["line"]) if m["line"] else None, m["msg"]))
        return out
    lines = text.splitlines()
    assert lines[-1].startswith("wireup check: ") and lines[-1].endswith(" load error(s); nothing was checked."), lines[-1]
    out = []
    for line in lines[:-1]:
        m = TEXT.match(line)
        assert m, line
        out.append((m["rule"], m["file"], int(m["line"]) if m["line"] else None, m["msg"]))
    return out


@pytest.mark.parametrize("fmt", FORMATS)
def test_unknown_dtype_is_a_finding_in_every_format(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, text, err = check(capsys, project(tmp_path, "unknown_dtype"), fmt)
    assert rc == 2
    assert parse(fmt, text) == [(LOAD_ERROR, "contracts/chain.toml", 25, DTYPE_MESSAGE)]
    # stderr says what it always said
    assert err.splitlines() == (CORPUS / "unknown_dtype" / "expected.txt").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("fmt", FORMATS)
def test_toml_syntax_error_is_a_finding_in_every_format(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, text, _ = check(capsys, project(tmp_path, "malformed_toml"), fmt)
    assert rc == 2
    assert parse(fmt, text) == [
        (LOAD_ERROR, "contracts/chain.toml", 18, "not valid TOML: Expected ']]' at the end of an array declaration.")
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_configuration_error_is_a_finding_with_its_line(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, text, err = check(capsys, config_project(tmp_path), fmt)
    assert rc == 2
    [(rule, file, line, message)] = parse(fmt, text)
    assert (rule, file, line) == (LOAD_ERROR, "wireup.toml", 3)
    assert message.startswith("contract: " + CONFIG_MESSAGE) and message.endswith(".")
    assert err.startswith(f"error: wireup.toml: {CONFIG_MESSAGE}")  # the stderr sentence is unchanged


def test_configuration_errors_in_pyproject_point_at_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path, "unknown_dim")
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.wireup]\nselect = "wiring"\n', encoding="utf-8")
    rc, text, _ = check(capsys, root, "json")
    [finding] = json.loads(text)["findings"]
    assert (rc, finding["file"], finding["line"], finding["key"]) == (2, "pyproject.toml", 5, "tool.wireup.select")
    assert finding["message"] == 'tool.wireup.select: key "select" must be a list, found str \'wiring\'.'
    (root / "pyproject.toml").write_text('[tool.wireup]\nkernels = "kernels"\nselect = [1,,]\n', encoding="utf-8")
    rc, text, _ = check(capsys, root, "github")
    [(_, file, line, message)] = parse("github", text)
    assert (rc, file, line) == (2, "pyproject.toml", 3) and message.startswith("not valid TOML (")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_problem_without_a_line_still_names_its_file(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, text, _ = check(capsys, project(tmp_path, "missing_contracts"), fmt)
    assert rc == 2
    assert parse(fmt, text) == [
        (LOAD_ERROR, "contracts", None, "the contracts folder does not exist; expected a folder of *.toml contract files.")
    ]


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "text"])
def test_machine_formats_speak_on_stdout_too(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, text, err = check(capsys, project(tmp_path, "unknown_dtype"), fmt, to_file=False)
    assert rc == 2 and err.startswith("error: contracts/chain.toml:25: ")
    assert parse(fmt, text) == [(LOAD_ERROR, "contracts/chain.toml", 25, DTYPE_MESSAGE)]


def test_text_on_a_terminal_is_not_said_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = check(capsys, project(tmp_path, "unknown_dtype"), "text", to_file=False)
    assert (rc, out) == (2, "")
    assert err.splitlines()[-1] == "wireup: 1 contract problem; nothing was checked."


def test_several_problems_are_several_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path, "unknown_dtype")
    chain = root / "contracts" / "chain.toml"
    text = chain.read_text(encoding="utf-8")
    assert text.count('"f31"') == 1
    (root / "contracts" / "second.toml").write_text("[[kernel]\n", encoding="utf-8")
    rc, out, err = check(capsys, root, "junit")
    findings = parse("junit", out)
    assert rc == 2 and [(f[0], f[1]) for f in findings] == [(LOAD_ERROR, "contracts/chain.toml"), (LOAD_ERROR, "contracts/second.toml")]
    suite = ET.fromstring(out)
    assert [c.get("name") for c in suite.iter("testcase")] == ["LOAD_ERROR[contracts/chain.toml]", "LOAD_ERROR[contracts/second.toml]"]


def test_the_newcomer_todo_dtype_reaches_sarif(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path, "unknown_dtype")
    chain = root / "contracts" / "chain.toml"
    chain.write_text(chain.read_text(encoding="utf-8").replace('"f31"', '"TODO"'), encoding="utf-8")
    rc, text, _ = check(capsys, root, "sarif")
    assert rc == 2
    assert parse("sarif", text) == [(LOAD_ERROR, "contracts/chain.toml", 25, DTYPE_MESSAGE.replace('"f31"', '"TODO"'))]
