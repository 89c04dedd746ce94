"""Launcher rules: every contracted kernel is launched by host code, and host code launches or builds no
kernel that a contract does not cover. They run only where ``launchers`` globs are configured; the scan
is :mod:`audit.launchers`.

``NO_LAUNCHER`` is a warning by default: teams land a kernel (with its contract and GPU evidence) before
its launcher, as the reference user's phase A did ("dead code — no launcher"); escalate it in CI once
launchers are expected. ``UNAUDITED_KERNEL`` is an error: host code running a kernel nobody contracted is
what the tool exists to catch.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..findings import Severity
from ..model import Loc, SourceFile
from ._base import CheckContext, Hit, rule


class HostLine(SourceFile):
    """A host source position for a finding's location (host files are not TOML: the line is given)."""

    __slots__ = ("_fixed",)

    def __init__(self, path: str, line: int):
        super().__init__(path, "")
        self._fixed = line

    def line(self, key_path: tuple) -> int | None:
        return self._fixed


def _globs(ctx: CheckContext) -> str:
    return ", ".join(ctx.config.launchers) if ctx.config else ""


@rule("NO_LAUNCHER", "Every contracted kernel is launched by host code: its entry symbol appears in a host source the launcher globs name.", "launchers", Severity.WARNING)
def check_no_launcher(ctx: CheckContext) -> Iterator[Hit]:
    scan = ctx.fact("launchers")
    for k in ctx.cs.kernel_map.values():
        if scan.launched(k.name):
            continue
        other = [r for r in scan.references.get(k.name, []) if r.kind in ("build", "load")]
        tail = ""
        if other:
            r = other[0]
            tail = f'; its source is only {"compiled" if r.kind == "build" else "loaded"} ({r.file}:{r.line})'
        yield Hit(
            f'Kernel "{k.name}" is dead code — no launcher: no host source ({_globs(ctx)}) names its entry "{k.symbol}"{tail}.',
            k.loc, k.name,
        )  # fmt: skip


@rule("UNAUDITED_KERNEL", "Host code launches, loads or builds only kernels that a contract covers.", "launchers")
def check_unaudited(ctx: CheckContext) -> Iterator[Hit]:
    scan = ctx.fact("launchers")
    for r in scan.unaudited:
        where = Loc(HostLine(r.file, r.line))
        if r.kind == "launch":
            via = f" through {r.call}" if r.call else ""
            yield Hit(
                f'Host code fetches kernel "{r.text}"{via}, but no contract declares a kernel with that entry; '
                f"add a [[kernel]] contract for it (wireup init scaffolds one) or remove the reference.",
                where, r.text,
            )  # fmt: skip
        else:
            what = "builds" if r.kind == "build" else "loads"
            yield Hit(
                f'Host code {what} "{r.text}", but no contract covers a kernel in that source; add contracts for its '
                f"kernels (wireup init scaffolds them) or remove it from the build.",
                where, r.text,
            )  # fmt: skip
