"""The ISV layout: fingerprint, diff between revisions, generated slot constants.

The public face of :mod:`audit.layout`; the submodules hold the details (``fingerprint``, ``diff``,
``gitrev``, ``codegen``). Names are imported on first use, so ``wireup check`` pays only for the
parts its rules touch; nothing here imports Jinja (rendering the generated files does, on use).

>>> from audit.layout import fingerprint, diff_layouts, load_layout_at_revision
>>> old = load_layout_at_revision("06d0fa4", Path("."))         # doctest: +SKIP
>>> d = diff_layouts(old, load_contracts(Path("contracts")).isv)  # doctest: +SKIP
>>> d.verdict, d.old_fingerprint != d.new_fingerprint           # doctest: +SKIP
('migratable', True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# "fingerprint" is both a submodule and a function. Binding the function while the package initialises
# keeps it the package attribute for good: a later ``from audit.layout.fingerprint import ...`` finds
# the module in sys.modules and no longer rebinds the name. (Use that form, not
# ``import audit.layout.fingerprint as m``, to reach the module.)
from .fingerprint import canonical_layout as canonical_layout, fingerprint as fingerprint  # noqa: E402

_PUBLIC = {
    "diff_layouts": "diff",
    "LayoutDiff": "diff",
    "LayoutChange": "diff",
    "CHANGE_KINDS": "diff",
    "load_layout_at_revision": "gitrev",
}
__all__ = sorted([*_PUBLIC, "fingerprint", "canonical_layout"])

if TYPE_CHECKING:
    from .diff import CHANGE_KINDS as CHANGE_KINDS, LayoutChange as LayoutChange, LayoutDiff as LayoutDiff
    from .diff import diff_layouts as diff_layouts
    from .gitrev import load_layout_at_revision as load_layout_at_revision


def __getattr__(name: str) -> Any:
    # PEP 562: the submodule is imported when one of its names is first asked for.
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
