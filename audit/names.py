"""Names as written: identifier checks with full-match semantics and Unicode look-alikes.

Every name in the contracts is compared exactly as written. Two traps make that harder than ``==``:

* a pattern ending in ``$`` also accepts a trailing newline (``re.match(r"^[A-Z_]+$", "ROW_SCALE\\n")``
  matches), so an identifier check must use :func:`re.fullmatch` (or ``\\Z``): :func:`is_identifier`;
* Python normalises identifiers with Unicode NFKC while parsing (``ast.parse("ℬ")`` names ``B``), and
  TOML keys and strings are not normalised at all, so a name written with look-alike letters
  (``"ℬ"``, ``"Ｄ"``) would silently equal ``B`` or ``D`` in one place and differ in another.
  :func:`nfkc_change` tells where normalisation would change a name; rule NAME_NOT_NORMALIZED reports it.

>>> is_identifier("ROW_SCALE"), is_identifier("ROW_SCALE\\n")
(True, False)
>>> nfkc_change("ℬ")
'B'
"""

from __future__ import annotations

import re
import unicodedata

#: what a C, Python and Rust constant and a dim name can all be: ASCII, not starting with a digit
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}


def is_identifier(name: str) -> bool:
    """``name`` is one whole identifier (letters, digits, underscores; no digit first; nothing after)."""
    return IDENTIFIER.fullmatch(name) is not None


def nfkc_change(name: str) -> str | None:
    """What Unicode NFKC normalisation makes of ``name``, or None where it leaves it as written."""
    if name.isascii():  # NFKC leaves ASCII alone: the common case costs one scan
        return None
    norm = unicodedata.normalize("NFKC", name)
    return None if norm == name else norm


def shown(name: str) -> str:
    """``name`` for a message between double quotes: control characters, quotes and backslashes escaped.

    >>> shown("ROW_SCALE\\n")
    'ROW_SCALE\\\\n'
    """
    if name.isprintable() and '"' not in name and "\\" not in name:
        return name
    out = []
    for c in name:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif not c.isprintable():
            out.append(f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
        else:
            out.append(c)
    return "".join(out)


def code_point(c: str) -> str:
    """``"ℬ"`` -> ``"U+212C SCRIPT CAPITAL B"``."""
    return f"U+{ord(c):04X} {unicodedata.name(c, 'UNNAMED')}"


def changed_characters(name: str) -> list[str]:
    """The distinct characters of ``name`` that NFKC changes, in order of first appearance."""
    out: list[str] = []
    for c in name:
        if c not in out and unicodedata.normalize("NFKC", c) != c:
            out.append(c)
    return out


def why_not_identifier(name: str) -> str:
    """Why :func:`is_identifier` rejects ``name``, as a clause: ``"it ends in a newline"``."""
    if not name:
        return "it is empty"
    if name[0].isdigit() and name[0].isascii():
        return "it starts with a digit"
    for i, c in enumerate(name):
        if c.isascii() and (c.isalnum() or c == "_"):
            continue
        what = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a space"}.get(c)
        if what is None:
            what = f'"{c}"' if c.isprintable() and c.isascii() else code_point(c)
        where = "ends in" if i == len(name) - 1 else "contains"
        return f"it {where} {what}"
    return "it is not an identifier"  # unreachable for a name the pattern rejects
