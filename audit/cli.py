"""The ``wireup`` command line.

Each subcommand lives in :mod:`audit.commands` as a module with ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; this module only parses and maps errors to exit
codes in one place: 0 clean, 1 findings, 2 usage or environment errors (printed as one sentence, no
traceback).

    wireup check --format sarif --output wireup.sarif
    wireup graph --format mermaid
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__
from .errors import ContractError, ExitCode, UserError

COMMANDS = ("check", "graph", "rules", "build", "verify", "layout", "report", "audit", "init", "mutate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wireup",
        description="Prove hand-written CUDA training kernels are wired up correctly.",
    )
    parser.add_argument("--version", action="version", version=f"wireup {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        mod = importlib.import_module(f".commands.{name}", __package__)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        p.add_argument("--root", metavar="DIR", help="project root (default: the folder holding wireup.toml / pyproject.toml / .git)")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser




def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse prints its own usage message
        return int(exc.code or 0) if exc.code in (0, None) else int(ExitCode.USAGE)
    if not getattr(args, "_run", None):
        parser.print_help()
        return int(ExitCode.USAGE)
    try:
        return int(args._run(args))
    except ContractError as exc:
        for p in exc.problems:
            print(f"error: {p.render()}", file=sys.stderr)
        n = len(exc.problems)
        print(f"wireup: {n} contract problem{'s' if n != 1 else ''}; nothing was checked.", file=sys.stderr)
        return int(exc.exit_code)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("wireup: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return int(ExitCode.CLEAN)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
