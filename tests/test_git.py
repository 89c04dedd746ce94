"""The one git module (audit.git): every caller sees the repository git itself would see.

Hooks run with GIT_DIR (and GIT_WORK_TREE, GIT_INDEX_FILE) set, often relative to the hook's working
directory; a call that changes directory must not reinterpret them, and no caller may drop them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from audit import changes
from audit.git import git_env, git_output, run_git
from audit.layout import gitrev
from audit.report import history

pytestmark = pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0, reason="git is not installed")


def _repo(path: Path, marker: str) -> Path:
    path.mkdir(parents=True)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    run = lambda *a: subprocess.run(["git", *a], cwd=path, check=True, capture_output=True, env={**env, "PATH": "/usr/bin:/bin"})  # noqa: E731
    run("init", "-q", "-b", "main")
    (path / "sub").mkdir()
    (path / "sub" / "f.txt").write_text(marker)
    run("add", ".")
    run("commit", "-qm", marker)
    return path


def test_relative_git_dir_is_read_against_the_callers_directory(tmp_path, monkeypatch):
    repo = _repo(tmp_path / "repo", "one")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("GIT_DIR", ".git")  # as a hook sets it: relative to the repository's top
    # called from a subfolder, git would otherwise look for sub/.git
    assert git_output(repo / "sub", "log", "-1", "--format=%s") == "one"
    assert git_env()["GIT_DIR"] == str(repo / ".git")


def test_every_caller_uses_the_repository_git_dir_names(tmp_path, monkeypatch):
    one = _repo(tmp_path / "one", "first repository")
    two = _repo(tmp_path / "two", "second repository")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_DIR", str(two / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(two))
    # the working folder is the first repository, but git (and so every wireup caller) follows GIT_DIR
    assert git_output(one, "log", "-1", "--format=%s") == "second repository"
    assert run_git(one, "log", "-1", "--format=%s").stdout.decode().strip() == "second repository"
    assert gitrev.git_toplevel(one) == two.resolve()
    assert history.GitHistory.open(one).top == two
    assert changes.git_output is git_output


def test_missing_git_is_an_environment_problem(tmp_path, monkeypatch):
    from audit.errors import EnvironmentProblem

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentProblem, match="git is not on PATH"):
        run_git(tmp_path, "status")
    assert git_output(tmp_path, "status") is None


def test_one_git_module():
    """No other module starts git itself."""
    root = Path(__file__).resolve().parents[1] / "audit"
    offenders = [
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if p.name != "git.py" and ('["git"' in p.read_text() or "['git'" in p.read_text())
    ]
    assert offenders == []
