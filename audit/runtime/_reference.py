"""Float64 references and gradient-check cases named in contracts as ``"module:function"``.

They are imported here only (``wireup verify``), with the project root and ``reference_paths`` of the
configuration on ``sys.path``, so a project's own reference module (``refs.my_kernels:scale``) works as the
shipped ``audit.references.dqn_aux`` does.

>>> fn = load_callable("audit.references.dqn_aux:aux_trunk_forward", cfg)   # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Callable
from typing import Any


class ReferenceProblem(Exception):
    """A reference that cannot be imported or that raised; the message is one sentence."""


_CACHE: dict[str, Callable[..., Any]] = {}


def add_paths(paths: list[str]) -> None:
    for p in reversed(paths):
        if p and p not in sys.path:
            sys.path.insert(0, p)


def load_callable(spec: str, paths: list[str]) -> Callable[..., Any]:
    """The function ``spec`` names (``module:function``), imported with ``paths`` first on sys.path."""
    key = f"{spec}@{'|'.join(paths)}"
    if key in _CACHE:
        return _CACHE[key]
    add_paths(paths)
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ReferenceProblem(f'"{spec}" is not of the form "module:function"')
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure of user code is reported, not raised
        raise ReferenceProblem(f'module "{module}" cannot be imported ({type(exc).__name__}: {exc})') from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ReferenceProblem(f'module "{module}" has no function "{name}"')
    _CACHE[key] = fn
    return fn


def call(fn: Callable[..., Any], spec: str, **kwargs: Any) -> Any:
    """``fn(**kwargs)``; any exception becomes a :class:`ReferenceProblem` naming the call site."""
    try:
        return fn(**kwargs)
    except Exception as exc:  # noqa: BLE001
        where = traceback.extract_tb(exc.__traceback__)[-1]
        raise ReferenceProblem(
            f'"{spec}" raised {type(exc).__name__}: {exc} ({where.filename.rsplit("/", 1)[-1]}:{where.lineno})'
        ) from None
