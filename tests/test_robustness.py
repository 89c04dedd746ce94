"""Small things a CI leans on (issue 14 item 4), one test each.

- files wireup writes (reports, SARIF, scaffolded contracts) get the mode a plain ``open()`` would give,
  not ``mkstemp``'s 0600;
- ``py.typed`` (and every other package-data pattern) exists, so type checkers see the annotations;
- the ``wireup-layout-diff`` pre-commit hook works in a clone without ``origin/main``;
- ``wireup graph`` prints one Mermaid document;
- verify workers die with their parent;
- the benchmark harness stays in the virtualenv.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from audit.atomic import write_text_atomic
from audit.cli import main

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "tests" / "data" / "rules"
GIT = ("git", "-c", "user.email=wireup@example.invalid", "-c", "user.name=wireup", "-c", "init.defaultBranch=trunk")


@pytest.fixture
def umask() -> Iterator[callable]:
    """Set the process umask for one test and put the old one back."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- file modes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_atomic_writes_respect_the_umask(mask: int, expected: int, tmp_path: Path, umask) -> None:
    umask(mask)
    write_text_atomic(tmp_path / "new.md", "x\n")
    assert mode(tmp_path / "new.md") == expected


def test_atomic_writes_keep_the_mode_of_the_file_they_replace(tmp_path: Path, umask) -> None:
    umask(0o077)
    target = tmp_path / "tool.sh"
    target.write_text("old\n")
    target.chmod(0o755)
    write_text_atomic(target, "new\n")
    assert (target.read_text(), mode(target)) == ("new\n", 0o755)
    assert [p.name for p in tmp_path.iterdir()] == ["tool.sh"]  # no temporary file left behind


def test_sarif_and_scaffolded_contracts_are_readable_by_others(tmp_path: Path, umask, capsys: pytest.CaptureFixture[str]) -> None:
    umask(0o022)
    root = tmp_path / "project"
    shutil.copytree(RULES / "SHAPE_MISMATCH" / "good", root)
    assert main(["check", "--root", str(root), "--select", "schema", "--format", "sarif", "-o", str(root / "wireup.sarif")]) == 0
    assert mode(root / "wireup.sarif") == 0o644
    source = next((root / "kernels").glob("*.cu"))
    out = root / "contracts" / "scaffold" / "new.toml"
    out.parent.mkdir()  # an --output through a missing folder is a usage error (issue 20)
    assert main(["init", str(source), "--root", str(root), "--output", str(out)]) in (0, 1)
    capsys.readouterr()
    assert out.is_file() and mode(out) == 0o644


# --- package data ----------------------------------------------------------------------------------


def test_every_package_data_pattern_names_a_file() -> None:
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["audit"]
    assert "py.typed" in patterns
    missing = [p for p in patterns if not list((REPO / "audit").glob(p))]
    assert missing == [], f"package data that is not there (the wheel silently lacks it): {missing}"


def test_py_typed_marks_the_package_as_typed() -> None:
    import audit

    marker = Path(audit.__file__).with_name("py.typed")
    assert marker.is_file()
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "--error-unmatch", "audit/py.typed"], capture_output=True)
    assert tracked.returncode == 0 or not (REPO / ".git").exists(), "audit/py.typed is not committed"


# --- the layout hook without origin/main -----------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


def hook_argv(hook_id: str) -> list[str]:
    """The command line a pre-commit hook runs (entry + args), read from .pre-commit-hooks.yaml."""
    lines = (REPO / ".pre-commit-hooks.yaml").read_text().splitlines()
    start = lines.index(f"- id: {hook_id}")
    entry, args = None, []
    for line in lines[start + 1 :]:
        if line.startswith("- id: "):
            break
        key, _, value = line.strip().partition(": ")
        if key == "entry":
            entry = value.split()
        elif key == "args":
            args = [a.strip() for a in value.strip("[]").split(",")]
    assert entry and entry[0] == "wireup"
    return [*entry[1:], *args]


@pytest.fixture
def clone_without_origin_main(tmp_path: Path) -> Path:
    """A clone of a repository whose main branch is "trunk": it has origin/trunk and no origin/main."""
    upstream = tmp_path / "upstream"
    shutil.copytree(RULES / "SLOT_GAP" / "good", upstream)
    subprocess.run([*GIT, "init", "-q", str(upstream)], check=True)
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "layout")
    clone = tmp_path / "clone"
    subprocess.run([*GIT, "clone", "-q", str(upstream), str(clone)], check=True, capture_output=True)
    return clone


def break_layout(root: Path) -> None:
    """Move the fingerprint slot up by one index: a change an old checkpoint does not survive."""
    isv = root / "contracts" / "isv.toml"
    text = isv.read_text()
    for old, new in (("total_dim = 6", "total_dim = 7"), ("index = 4\ncount = 2", "index = 5\ncount = 2"), ("index = 3\nname", "index = 3\ncount = 2\nname")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    isv.write_text(text)


def test_layout_hook_falls_back_to_the_merge_base_with_the_upstream(clone_without_origin_main: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = clone_without_origin_main
    argv = hook_argv("wireup-layout-diff")
    assert argv[:4] == ["layout", "diff", "--against", "origin/main"]
    base = git(root, "rev-parse", "HEAD").strip()
    git(root, "commit", "-q", "--allow-empty", "-m", "local work")  # the merge base is not HEAD
    assert main([*argv, "--root", str(root)]) == 0
    out, err = capsys.readouterr()
    assert err == f'wireup: "origin/main" is not in this clone; comparing with the merge base of HEAD and its upstream "origin/trunk" ({base[:7]}).\n'
    assert "verdict: compatible" in out
    break_layout(root)
    assert main([*argv, "--root", str(root)]) == 1
    assert "TOTAL_DIM_CHANGED" in capsys.readouterr().out
    # without --or-upstream the missing revision stays an error: an explicit --against is not second-guessed
    assert main(["layout", "diff", "--against", "origin/main", "--root", str(root)]) == 2
    assert 'Git revision "origin/main" does not name a commit' in capsys.readouterr().err


def test_layout_hook_uses_origin_main_where_it_exists(clone_without_origin_main: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = clone_without_origin_main
    git(root, "branch", "-q", "-m", "trunk", "work")
    git(root, "update-ref", "refs/remotes/origin/main", "HEAD")
    break_layout(root)
    assert main([*hook_argv("wireup-layout-diff"), "--root", str(root)]) == 1
    out, err = capsys.readouterr()
    assert err == "" and "TOTAL_DIM_CHANGED" in out


def test_layout_hook_without_a_base_says_how_to_set_one(clone_without_origin_main: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = clone_without_origin_main
    git(root, "branch", "-q", "--unset-upstream")
    assert main([*hook_argv("wireup-layout-diff"), "--root", str(root)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        'error: Git revision "origin/main" is not in this clone and the current branch has no upstream to fall back to; '
        "pass the branch your checkpoints come from with --against REV (in .pre-commit-config.yaml: args: [--against, REV]) "
        'or set an upstream with "git branch --set-upstream-to=REMOTE/BRANCH".\n'
    )


# --- wireup graph: one Mermaid document ------------------------------------------------------------

MERMAID_NODE = re.compile(r'^(?P<id>[a-z]\d+_[a-z]\d+)(\[".*"\]|\(".*"\)|\{\{".*"\}\}|\[/".*"/\])(:::\w+)?$')
MERMAID_EDGE = re.compile(r"^(?P<a>[a-z]\d+_[a-z]\d+) (-->|==>|-\.->)(\|[^|]*\|)? (?P<b>[a-z]\d+_[a-z]\d+)$")
SUBGRAPH = re.compile(r'^subgraph (?P<id>s\d+) \["schedule (?P<name>[^"]+)"\]$')


def mermaid_subgraphs(text: str) -> dict[str, tuple[set[str], int]]:
    """Schedule -> (node IDs, edge count) of a Mermaid document, asserting it is one well-formed flowchart."""
    lines = text.splitlines()
    assert lines[0] == "flowchart LR" and text.count("flowchart") == 1
    out: dict[str, tuple[set[str], int]] = {}
    every: set[str] = set()
    current = None
    for raw in lines[1:]:
        line = raw.strip()
        if line.startswith("classDef "):
            assert current is None, "classDef inside a subgraph"
            continue
        if m := SUBGRAPH.match(line):
            assert current is None, "nested subgraph"
            current = m["name"]
            out[current] = (set(), 0)
            prefix = m["id"] + "_"
            continue
        if line == "end":
            assert current is not None
            current = None
            continue
        assert current is not None, f"a line outside every subgraph: {raw!r}"
        nodes, edges = out[current]
        if m := MERMAID_NODE.match(line):
            assert m["id"].startswith(prefix) and m["id"] not in every, line
            nodes.add(m["id"])
            every.add(m["id"])
        elif m := MERMAID_EDGE.match(line):
            assert m["a"] in nodes and m["b"] in nodes, f"edge between nodes not declared in its subgraph: {line!r}"
            out[current] = (nodes, edges + 1)
        else:
            raise AssertionError(f"not a Mermaid line: {raw!r}")
    assert current is None, "a subgraph is not closed"
    return out


def test_graph_prints_one_mermaid_document_with_a_subgraph_per_schedule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from audit.api import load_project
    from audit.draw import mermaid

    root = RULES / "SHAPE_MISMATCH" / "good"
    _, cs = load_project(root)
    assert main(["graph", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    graphs = mermaid_subgraphs(out)
    assert list(graphs) == [s.name for s in cs.schedules] == ["forward", "backward", "backward_fused"]
    for name, (nodes, edges) in graphs.items():
        # the same drawing as the schedule's own flowchart, node for node and edge for edge
        alone = mermaid(cs, name).splitlines()
        assert len(nodes) == sum(1 for line in alone if re.match(r"^  [a-z]\d+[\[({]", line))
        assert edges == sum(1 for line in alone if re.match(r"^  [a-z]\d+ (-->|==>|-\.->)", line)) > 0
    assert main(["graph", "--root", str(root), "--schedule", "backward", "--schedule", "forward", "-o", str(tmp_path / "g.mmd")]) == 0
    assert list(mermaid_subgraphs((tmp_path / "g.mmd").read_text())) == ["backward", "forward"]


def test_graph_of_the_shipped_chain_is_one_document(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", "--root", str(repo)]) == 0
    graphs = mermaid_subgraphs(capsys.readouterr().out)
    assert len(graphs) >= 2 and all(edges for _, edges in graphs.values())


# --- the benchmark harness stays in the virtualenv -------------------------------------------------


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import _harness

    return _harness


def test_benchmark_children_run_in_this_virtualenv(harness) -> None:
    exe = harness.python()
    assert exe == sys.executable
    probe = "import sys; print(sys.prefix)"
    child = subprocess.run([exe, "-c", probe], capture_output=True, text=True, check=True)
    assert child.stdout.strip() == sys.prefix  # a venv's packages (rtoml, this wireup) are the child's too
    run = harness.run_child([*harness.wireup(), "--version"], env=harness.child_env())
    assert run.rc == 0 and run.stdout.startswith("wireup ")


def test_a_virtualenv_python_is_not_followed_out_of_it(harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(os.path.realpath(sys.executable))  # how venv lays it out
    monkeypatch.setattr(sys, "executable", str(venv_python))
    assert harness.python() == str(venv_python)


@pytest.mark.skipif(not Path("/proc/self/exe").exists(), reason="finds the binary through /proc")
def test_a_launcher_shim_is_replaced_by_the_binary(harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shim = tmp_path / "shims" / "python"
    shim.parent.mkdir()
    shim.write_text('#!/usr/bin/env bash\nexec python3 "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(shim))
    assert harness.python() == os.path.realpath("/proc/self/exe")
