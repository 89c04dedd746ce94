"""The one way wireup runs git: which repository, which environment, which output.

Git hooks (pre-commit among them) run with ``GIT_DIR``, ``GIT_WORK_TREE`` and ``GIT_INDEX_FILE`` set,
often as paths relative to the hook's working directory. Git itself reads those relative to the
directory it was started in, so a ``git -C <elsewhere>`` call would look for the repository in the wrong
folder. :func:`git_env` therefore keeps the variables, as git does, but makes relative ones absolute
against this process's working directory before any call changes directory. Every call also switches
off the user settings that would change the output's form (pager, signatures, quoting, locale).

>>> run_git(Path("."), "rev-parse", "--is-inside-work-tree").stdout     # doctest: +SKIP
b'true\\n'
>>> git_output(Path("."), "rev-parse", "--abbrev-ref", "HEAD")          # doctest: +SKIP
'main'
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .errors import EnvironmentProblem

#: git's environment variables that name paths and are read relative to git's starting directory
_PATH_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")

#: settings that change what git prints, whatever the user configured
_FIXED_CONFIG = (
    "-c", "log.showSignature=false", "-c", "log.follow=false", "-c", "core.quotePath=false",
    "-c", "i18n.logOutputEncoding=UTF-8", "-c", "color.ui=false",
)  # fmt: skip

TIMEOUT_S = 60


def git_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a git call: ``base`` (default ``os.environ``) with relative repository paths
    made absolute against the current directory, a fixed locale and no pager."""
    env = dict(os.environ if base is None else base)
    here = Path.cwd()
    for name in _PATH_VARIABLES:
        value = env.get(name)
        if value and not os.path.isabs(value):
            env[name] = str(here / value)
    env.update(LC_ALL="C", GIT_PAGER="cat", GIT_TERMINAL_PROMPT="0")
    return env


def run_git(cwd: Path, *args: str, stdin: bytes | None = None, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run ``git args`` from ``cwd`` and return the finished process (bytes out and err, never raises
    for git's own failures). Raises :class:`EnvironmentProblem` where git is missing or hangs."""
    if shutil.which("git") is None:
        raise EnvironmentProblem("git is not on PATH; reading the repository's history needs git.")
    try:
        return subprocess.run(
            ["git", *_FIXED_CONFIG, *args], cwd=cwd, input=stdin, capture_output=True, check=False,
            env=git_env(), timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f'git {" ".join(args[:2])} did not finish within {timeout:.0f} s in "{cwd}".') from None
    except OSError as exc:
        raise EnvironmentProblem(f'git could not be started in "{cwd}" ({exc.strerror or exc}).') from None


def git_output(cwd: Path, *args: str) -> str | None:
    """stdout of ``git args`` run from ``cwd`` (decoded, stripped), or None where git is missing, hangs
    or fails: for callers to whom history is optional."""
    try:
        proc = run_git(cwd, *args)
    except EnvironmentProblem:
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", "replace").strip()


def first_error_line(stderr: bytes) -> str:
    """The first line of git's stderr without its ``fatal:`` prefix, for a one-sentence message."""
    text = stderr.decode("utf-8", "replace").strip().splitlines()
    return text[0].removeprefix("fatal: ").rstrip(".") if text else "no message"
