"""The ``wireup`` command line.

Each subcommand lives in :mod:`audit.commands` as a module with ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; this module only parses and maps errors to exit
codes in one place: 0 clean, 1 findings, 2 usage or environment errors (printed as one sentence, no
traceback), 3 an internal error, a bug in wireup (one line saying so; the traceback only with
``WIREUP_DEBUG=1`` in the environment or ``--debug``).

    wireup check --format sarif --output wireup.sarif
    wireup graph --format mermaid
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from . import __version__
from .errors import REPORT_BUGS_TO, ContractError, ExitCode, UserError

COMMANDS = ("check", "graph", "rules", "build", "verify", "layout", "report", "audit", "init", "mutate")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of the command ``only`` alone (then only its module is imported:
    a run of one command parses nothing else)."""
    parser = argparse.ArgumentParser(
        prog="wireup",
        description="Prove hand-written CUDA training kernels are wired up correctly.",
    )
    parser.add_argument("--version", action="version", version=f"wireup {__version__}")
    add_debug_argument(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only not in COMMANDS else (only,):
        mod = importlib.import_module(f".commands.{name}", __package__)
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        p.add_argument("--root", metavar="DIR", help="project root (default: the folder holding wireup.toml / pyproject.toml / .git)")
        add_debug_argument(p)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _fast_exit=getattr(mod, "FAST_EXIT", False))
    return parser


def add_debug_argument(p: argparse.ArgumentParser, top: bool = False) -> None:
    """``--debug``: show the traceback of an internal error (accepted before or after the command)."""
    # SUPPRESS below the top level keeps "wireup --debug check" from being reset by the subparser
    p.add_argument("--debug", action="store_true", default=False if top else argparse.SUPPRESS,
                   help="on an internal error (exit 3), print its traceback (also WIREUP_DEBUG=1)")  # fmt: skip


def debug_wanted(args: argparse.Namespace | None) -> bool:
    """``--debug`` given, or ``WIREUP_DEBUG`` set to anything but "", "0", "false", "no"."""
    env = os.environ.get("WIREUP_DEBUG", "").strip().lower()
    return bool(getattr(args, "debug", False)) or env not in ("", "0", "false", "no", "off")


def report_internal_error(exc: BaseException, args: argparse.Namespace | None) -> int:
    """One line on stderr for an exception that is no user error (the traceback with the debug switch);
    returns :attr:`ExitCode.INTERNAL`.

    >>> report_internal_error(RuntimeError("boom"), None)      # doctest: +SKIP
    wireup: internal error (RuntimeError: boom); this is a bug in wireup: please report it on ...
    """
    if debug_wanted(args):
        traceback.print_exception(exc, file=sys.stderr)
        how = "with the traceback above"
    else:
        how = "with the traceback, which WIREUP_DEBUG=1 or --debug prints"
    what = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(what) > 200:
        what = what[:197] + "..."
    print(f"wireup: internal error ({what}); this is a bug in wireup, not a finding: please report it on {REPORT_BUGS_TO} "
          f"{how} (exit {int(ExitCode.INTERNAL)}).", file=sys.stderr)  # fmt: skip
    return int(ExitCode.INTERNAL)


def _command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word that is no option (the top level takes only options
    without values), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


class _EXIT:
    fast = False  # the command that ran may end the process without tearing the interpreter down


def console() -> None:
    """The ``wireup`` console script and ``python -m audit``: :func:`main`, then exit with its code.

    A command that sets ``FAST_EXIT`` (``wireup check``) ends the process with :func:`os._exit` once it
    has returned and its output is flushed, instead of freeing every object of the model one by one on
    the way out (about 0.3 s at 10,000 kernels; nothing of a check is left to run at exit: its files are
    written and renamed, its build threads joined). Called in process, :func:`main` just returns.
    """
    # before numpy loads: one BLAS thread, as in every worker, unless the user set the counts (audit.config.BLAS_THREADS)
    from .config import single_blas_thread

    single_blas_thread(os.environ)
    rc = main()
    # under a profiler or a tracer (cProfile, coverage) the process ends the usual way: they write their
    # results at exit
    if _EXIT.fast and sys.getprofile() is None and sys.gettrace() is None:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(rc)  # let the interpreter report what it reports on a failed flush
        os._exit(rc)
    sys.exit(rc)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``wireup`` command; returns its exit code (:class:`~audit.errors.ExitCode`)."""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser(_command_of(argv))
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse prints its own usage message
        return int(exc.code or 0) if exc.code in (0, None) else int(ExitCode.USAGE)
    except Exception as exc:
        return report_internal_error(exc, None)
    if not getattr(args, "_run", None):
        parser.print_help()
        return int(ExitCode.USAGE)
    try:
        rc = int(args._run(args))
        if getattr(args, "_fast_exit", False):
            _EXIT.fast = True
        return rc
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
    except Exception as exc:  # anything else is a bug in wireup; it must not pass for findings (exit 1)
        return report_internal_error(exc, args)


if __name__ == "__main__":  # pragma: no cover
    console()
