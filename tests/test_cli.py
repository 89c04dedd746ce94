"""The ``wireup`` command line: exit codes 0 / 1 / 2 in one place, one-sentence errors, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audit.cli import main
from audit.rules import iter_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "tests" / "data" / "rules"
BAD = RULES / "SHAPE_MISMATCH" / "bad"
GOOD = RULES / "SHAPE_MISMATCH" / "good"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


def test_exit_codes_clean_findings_and_warnings_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "check", "--root", str(GOOD), "--select", "wiring")[0] == 0
    assert run(capsys, "check", "--root", str(BAD), "--select", "wiring")[0] == 1
    # a warning alone does not fail the check
    rc, out, _ = run(capsys, "check", "--root", str(RULES / "SLOT_GAP" / "bad"), "--select", "isv")
    assert rc == 0 and "SLOT_GAP (warning)" in out and out.endswith("0 error(s), 1 warning(s); 9 rule(s) ran.\n")


def test_select_and_ignore_take_ids_categories_and_commas(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "check", "--root", str(BAD), "--select", "SHAPE_MISMATCH,isv", "--select", "DEAD_KERNEL")
    assert rc == 1 and out.endswith("1 error(s), 0 warning(s); 11 rule(s) ran.\n")
    rc, out, _ = run(capsys, "check", "--root", str(BAD), "--select", "wiring", "--ignore", "SHAPE_MISMATCH")
    assert rc == 0 and "SHAPE_MISMATCH" not in out


def test_unknown_rule_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "check", "--root", str(BAD), "--select", "SHAPE_MISMACH")
    assert (rc, out) == (2, "")
    assert err.startswith('error: Unknown rule or category "SHAPE_MISMACH"; categories are ')
    assert err.endswith('rule IDs are listed by "wireup rules".\n')


def test_bad_flags_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(capsys, "check", "--root", str(BAD), "--format", "xml")
    assert rc == 2 and "invalid choice: 'xml'" in err
    rc, _, err = run(capsys, "check", "--root", str(REPO / "no" / "such" / "folder"))
    assert rc == 2 and err.startswith('error: --root "') and err.endswith('" is not a folder.\n')
    rc, out, _ = run(capsys)
    assert rc == 2 and "COMMAND" in out


def test_output_file_gets_the_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    rc, out, _ = run(capsys, "check", "--root", str(BAD), "--select", "SHAPE_MISMATCH", "--format", "json", "-o", str(target))
    assert (rc, out) == (1, "")
    doc = json.loads(target.read_text(encoding="utf-8"))
    assert [f["rule"] for f in doc["findings"]] == ["SHAPE_MISMATCH"]


def test_rules_lists_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "rules")
    assert rc == 0
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == [r.id for r in iter_rules()]
    rc, out, _ = run(capsys, "rules", "--format", "markdown")
    assert rc == 0 and out.startswith("| rule | category | severity | purpose |")
    assert "| `SHAPE_MISMATCH` | wiring | error |" in out


def test_graph_draws_a_fixture_and_rejects_unknown_schedules(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "graph", "--root", str(GOOD), "--schedule", "forward")
    assert rc == 0 and out.startswith("%% schedule forward\nflowchart LR\n")
    rc, out, _ = run(capsys, "graph", "--root", str(GOOD), "--format", "dot")
    assert rc == 0 and out.count("digraph ") == 3
    rc, out, err = run(capsys, "graph", "--root", str(GOOD), "--schedule", "fwd")
    assert (rc, out) == (2, "")
    assert err == 'error: --schedule "fwd" is not a schedule; the schedules are "forward", "backward", "backward_fused".\n'


def test_contract_errors_stop_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    root = REPO / "tests" / "data" / "bad_input" / "unknown_dtype"
    for argv in (("check",), ("graph",)):
        rc, out, err = run(capsys, *argv, "--root", str(root))
        assert (rc, out) == (2, "")
        assert err.splitlines()[-1] == "wireup: 1 contract problem; nothing was checked."


def test_python_m_audit_is_wireup() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "audit", "check", "--root", str(BAD), "--select", "SHAPE_MISMATCH"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1 and proc.stderr == ""
    assert proc.stdout.splitlines() == [
        (RULES / "SHAPE_MISMATCH" / "bad" / "expected.txt").read_text(encoding="utf-8").splitlines()[1],
        "wireup check: 1 error(s), 0 warning(s); 1 rule(s) ran.",
    ]
