"""Pre-merge integration: the pytest plugin, the pre-commit hooks file and ``check --changed-since``."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from audit.api import load_project
from audit.changes import compute_changes
from audit.cli import build_parser, main

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
MINI = Path(__file__).parent / "data" / "report" / "mini"


def copy_mini(dst: Path) -> Path:
    shutil.copytree(MINI, dst, ignore=shutil.ignore_patterns(".wireup-cache", "reports"), dirs_exist_ok=True)
    return dst


def break_make_labels(root: Path) -> None:
    """Give "make_labels" a SHAPE_MISMATCH (its output no longer matches the buffer it writes)."""
    k = root / "contracts" / "kernels.toml"
    k.write_text(k.read_text().replace('{ name = "labels", dtype = "i32", shape = ["B"], role = "out" }', '{ name = "labels", dtype = "i32", shape = ["N"], role = "out" }'))


# ---------------------------------------------------------------------------------------------------
# pytest plugin


def test_plugin_is_inert_unless_enabled(pytester: pytest.Pytester) -> None:
    copy_mini(pytester.path)
    break_make_labels(pytester.path)
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest("-p", "no:wireup", "-p", "audit.pytest_plugin")
    result.assert_outcomes(passed=1)
    assert "wireup" not in result.stdout.str()


def test_plugin_collects_one_item_per_rule_and_subject(pytester: pytest.Pytester) -> None:
    copy_mini(pytester.path)
    break_make_labels(pytester.path)
    pytester.makepyfile("def test_plain():\n    assert True\n")
    pytester.makeini("[pytest]\nwireup = true\nwireup_select = wiring\n")
    result = pytester.runpytest("-p", "no:wireup", "-p", "audit.pytest_plugin", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and outcomes["passed"] > 20
    result.stdout.fnmatch_lines([
        "*_ SHAPE_MISMATCH[[]make_labels[]] _*",
        'contracts/kernels.toml:*: SHAPE_MISMATCH Kernel "make_labels" parameter "labels" has shape [[]8[]]*',
        "FAILED wireup::SHAPE_MISMATCH[[]make_labels[]]*",
    ])  # fmt: skip
    assert "Traceback" not in result.stdout.str()
    # -k and -m select among the collected checks like among any tests
    result = pytester.runpytest("-p", "no:wireup", "-p", "audit.pytest_plugin", "-p", "no:cacheprovider", "-k", "SHAPE_MISMATCH and not forward", "-m", "wireup")
    result.assert_outcomes(failed=1, passed=4, deselected=outcomes["failed"] + outcomes["passed"] - 5)


def test_plugin_skips_rules_that_cannot_run_and_reports_contract_errors(pytester: pytest.Pytester) -> None:
    copy_mini(pytester.path)
    pytester.makeini("[pytest]\nwireup_select = launchers\n")
    result = pytester.runpytest("-p", "no:wireup", "-p", "audit.pytest_plugin", "--wireup", "-rs")
    result.assert_outcomes(skipped=4)  # NO_LAUNCHER, UNAUDITED_KERNEL, GEOMETRY_DRIFT, LAUNCH_ARG_ORDER
    result.stdout.fnmatch_lines(["*not run here: no launcher scan is configured*"])
    (pytester.path / "contracts" / "dims.toml").write_text("[dims]\nB = { min = 1, max = 1024 }\nN = { vaule = 8 }\n")
    result = pytester.runpytest("-p", "no:wireup", "-p", "audit.pytest_plugin", "--wireup")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(['contracts/dims.toml:3: dims.N.vaule: unknown key "vaule" in dim "N"*'])


# ---------------------------------------------------------------------------------------------------
# pre-commit hooks


def _hooks() -> list[dict]:
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    try:
        import yaml
    except ImportError:  # the hook file is a flat list of maps: read it without PyYAML
        hooks: list[dict] = []
        for line in text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            m = re.match(r"^(- )?\s*(\w+): (.*)$", line)
            assert m, f"unexpected line {line!r}"
            if m.group(1):
                hooks.append({})
            value = m.group(3)
            if value.startswith("["):
                value = [v.strip() for v in value.strip("[]").split(",")]
            elif value in ("true", "false"):
                value = value == "true"
            hooks[-1][m.group(2)] = value
        return hooks
    return yaml.safe_load(text)


def test_pre_commit_hooks_parse_and_name_real_commands() -> None:
    hooks = {h["id"]: h for h in _hooks()}
    assert set(hooks) == {"wireup-check", "wireup-layout-diff", "wireup-report-check"}
    assert hooks["wireup-layout-diff"]["entry"] == "wireup layout diff"
    assert hooks["wireup-layout-diff"]["args"] == ["--against", "origin/main", "--or-upstream"]
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for h in hooks.values():
        assert h["language"] == "python" and h["pass_filenames"] is False
        argv = h["entry"].split()
        assert argv[0] == "wireup"
        files = re.compile(h["files"])
        assert files.search("contracts/kernels/aux_trunk.toml")
        assert argv[1] in commands, f"wireup has no command {argv[1]!r}"
        parser.parse_args(argv[1:] + list(h.get("args", [])))  # argparse exits on an unknown flag
    assert re.search(hooks["wireup-check"]["files"], "kernels/aux_trunk_kernel.cu")
    assert not re.search(hooks["wireup-check"]["files"], "README.md")


# ---------------------------------------------------------------------------------------------------
# --changed-since


def git(root: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo_with_history(tmp_path: Path) -> Path:
    root = copy_mini(tmp_path / "mini")
    (root / ".gitignore").write_text(".wireup-cache/\nreports/\n")
    break_make_labels(root)  # a finding that predates the change under review
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def test_changed_since_limits_findings_to_the_change_and_downstream(repo_with_history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = repo_with_history
    assert main(["check", "--root", str(root), "--select", "wiring"]) == 1
    assert 'Kernel "make_labels"' in capsys.readouterr().out
    # unchanged tree: the old finding is not this change's business
    assert main(["check", "--root", str(root), "--select", "wiring", "--changed-since", "HEAD"]) == 0
    capsys.readouterr()
    # a new problem in "backward" (edited, not committed) is reported; the old one on make_labels is not
    k = root / "contracts" / "kernels.toml"
    k.write_text(k.read_text().replace('shape = ["B", "N", "N"], role = "out", partial_of = "W"', 'shape = ["B", "N", "N + 1"], role = "out", partial_of = "W"'))
    assert main(["check", "--root", str(root), "--select", "wiring", "--changed-since", "HEAD"]) == 1
    out = capsys.readouterr()
    assert 'Kernel "backward" parameter "dW_partial" has shape [B, 8, 9]' in out.out
    assert "make_labels" not in out.out
    assert "1 changed file(s)" in out.err


def test_changed_kernel_source_selects_it_and_everything_downstream(repo_with_history: Path) -> None:
    root = repo_with_history
    src = root / "kernels" / "forward_kernel.cu"
    src.write_text(src.read_text() + "// touched\n")
    cfg, cs = load_project(root)
    ch = compute_changes(cfg, cs, "HEAD")
    assert ch.files == ["kernels/forward_kernel.cu"]
    assert ch.kernels == {"forward", "loss", "backward", "reduce"}
    assert "make_labels" not in ch.kernels and ch.schedules == {"train"}
    assert {"h", "loss", "dW_partial", "dW"} <= ch.buffers and "LOSS_EMA" in ch.slots
    assert not ch.layout  # a slot downstream of a kernel is not a layout change


def test_changed_contract_is_compared_object_by_object(repo_with_history: Path) -> None:
    root = repo_with_history
    k = root / "contracts" / "kernels.toml"
    k.write_text(k.read_text().replace('doc = "grad[m] += sum over b of partial[b, m]"', 'doc = "grad[m] += sum_b partial[b, m]"'))
    (root / "contracts" / "extra.toml").write_text('[[buffer]]\nname = "unused"\ndtype = "f32"\nshape = [1]\nkind = "scratch"\n')  # untracked
    cfg, cs = load_project(root)
    ch = compute_changes(cfg, cs, "main")
    assert ch.files == ["contracts/extra.toml", "contracts/kernels.toml"]
    assert ch.kernels == {"reduce"} and ch.buffers == {"unused", "dW"}
    isv = root / "contracts" / "isv.toml"
    isv.write_text(isv.read_text().replace("reset = { ColdStart = 0.0, FoldReset = 0.0 }\n\n[[isv.slot]]\nindex = 2", "reset = { ColdStart = 0.0, FoldReset = 1.0 }\n\n[[isv.slot]]\nindex = 2"))
    ch = compute_changes(cfg, load_project(root)[1], "main")
    assert ch.layout and "LOSS_EMA" in ch.slots and "loss" in ch.kernels  # its reader is downstream


def test_changed_since_errors(repo_with_history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--root", str(repo_with_history), "--select", "wiring", "--changed-since", "no-such-branch"]) == 2
    assert 'does not name a commit' in capsys.readouterr().err
    plain = copy_mini(tmp_path / "plain")
    assert main(["check", "--root", str(plain), "--select", "wiring", "--changed-since", "HEAD"]) == 2
    assert "needs a git repository" in capsys.readouterr().err
