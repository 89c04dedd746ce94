"""The ``build`` fact for rules: the cached build of every kernel source, or "not run" without nvcc.

``wireup check`` calls this only when a selected rule asks for ``ctx.fact("build")``; on a repository
whose sources are already in the cache it compiles nothing and starts no process.

>>> ctx = CheckContext(cs, cfg, providers={"build": build_facts})   # doctest: +SKIP
>>> ctx.fact("build").compiled                                      # doctest: +SKIP
0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import EnvironmentProblem, RuleNotRun
from ._compile import build_kernels
from ._types import BuildResult

if TYPE_CHECKING:
    from ..rules import CheckContext


def build_facts(ctx: CheckContext) -> BuildResult:
    """Build (or load from the cache) every kernel source of ``ctx.cs``.

    ``ctx.options["source_overrides"]`` (kernel name -> replacement ``.cu``) is passed through, so
    ``wireup mutate`` and broken-kernel fixtures check a replacement without touching the tree. A missing
    toolchain makes the build rules "not run" with the reason, never "passed".
    """
    cfg = ctx.config
    if cfg is None:
        raise RuleNotRun("no project configuration, so the kernels were not built")
    try:
        return build_kernels(cfg, ctx.cs, source_overrides=ctx.options.get("source_overrides"), on_compile=announce_compile)
    except EnvironmentProblem as exc:
        raise RuleNotRun(str(exc)) from None


def announce_compile(count: int) -> None:
    """One line on stderr before a check compiles sources that are not in the build cache, so a cold
    check (nvcc takes seconds per source) is not silent. Always one line, TTY or not: a CI log shows why
    the step took long, and stdout (where JSON, SARIF and JUnit go) is untouched."""
    import sys

    what = "source" if count == 1 else "sources"
    print(f"wireup: compiling {count} kernel {what} with nvcc (not in the build cache yet); this takes a few seconds each.",
          file=sys.stderr, flush=True)  # fmt: skip
