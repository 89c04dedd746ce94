"""Public exceptions and the exit codes the CLI maps them to.

User errors (a contract that cannot be read, a bad flag, a missing tool) and internal errors stay
apart: everything a user can cause derives from :class:`UserError`, carries a one-sentence message
that names file, key and line where there is one, and is printed without a traceback (exit 2). Anything
else is a bug in wireup: the command line prints one line saying so, where to report it and how to see
the traceback (``WIREUP_DEBUG=1`` or ``--debug``), and exits 3, never 1, so that a crash is not read as
findings.

>>> raise ContractError("contracts/isv.toml", 12, "isv.slot[3].role", 'expected one of "ema", ...')
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of every ``wireup`` command."""

    CLEAN = 0
    FINDINGS = 1
    USAGE = 2  # usage or environment error, one sentence
    INTERNAL = 3  # a bug in wireup: an exception that is no UserError


#: where the one-line message of an internal error sends its reader
REPORT_BUGS_TO = "the wireup issue tracker"


class UserError(Exception):
    """A problem the user can fix; printed as one sentence, exit code 2."""

    exit_code = ExitCode.USAGE


class UsageError(UserError):
    """A bad command line or configuration value."""


class OutputError(UsageError, OSError):
    """A path wireup was asked to write that it cannot or must not write (a folder, a missing folder, a
    path outside the project root from the configuration). An :class:`OSError` too, so callers that
    tolerate a failed write (a cache) keep doing so."""


class EnvironmentProblem(UserError):
    """A tool, device or package the command needs is missing (nvcc, a GPU, PyCUDA)."""


@dataclass(frozen=True)
class ContractProblem:
    """One unreadable or ill-typed value in a contract file."""

    path: str
    line: int | None
    key: str
    message: str

    def render(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        key = f" {self.key}:" if self.key else ""
        return f"{where}:{key} {self.message}"


class ConfigError(UsageError):
    """A configuration file (``wireup.toml``, ``pyproject.toml``) that cannot be read or holds a bad value.

    The message is the one sentence printed; ``path``, ``line`` and ``key`` say where, so ``wireup check``
    can also report it as a ``LOAD_ERROR`` finding in every output format.
    """

    def __init__(self, message: str, path: str, line: int | None = None, key: str = "", detail: str = ""):
        super().__init__(message)
        self.path = path
        self.line = line
        self.key = key
        self.detail = detail or message  # the sentence without the file name in front

    @property
    def problems(self) -> list[ContractProblem]:
        return [ContractProblem(self.path, self.line, self.key, self.detail)]


class ContractError(UserError):
    """One or more contract files could not be turned into a model (syntax, types, unknown keys)."""

    def __init__(self, problems: list[ContractProblem]):
        self.problems = list(problems)
        super().__init__("\n".join(p.render() for p in self.problems))


class RuleNotRun(Exception):
    """A check, or a fact it needs (the build, evidence, a launcher scan), cannot be had here (no nvcc, no
    build); the reason is shown as "not run", never as a pass. Raised below the rules layer too, so it
    lives here rather than in :mod:`audit.rules`."""
