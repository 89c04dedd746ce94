"""Starting a backend by name: the one module that imports the concrete backends (which import the base
classes of :mod:`._backend`, so the base cannot import them back).

>>> be = open_backend("emulated")   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from ._backend import Backend, BackendUnavailable


def open_backend(name: str, **options: Any) -> Backend:
    """Start the named backend (``pycuda``, ``cupy`` or ``emulated``); raises :class:`BackendUnavailable`."""
    if name == "pycuda":
        from ._pycuda import PyCudaBackend

        return PyCudaBackend(**options)
    if name == "cupy":
        from ._cupy import CupyBackend

        return CupyBackend(**options)
    if name == "emulated":
        from ._emulated import EmulatedBackend

        return EmulatedBackend(**options)
    raise BackendUnavailable(f'unknown backend "{name}"; the backends are "pycuda", "cupy" and "emulated"')
