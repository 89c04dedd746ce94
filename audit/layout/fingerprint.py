"""The ISV layout fingerprint: a 64-bit hash of the layout's canonical serialisation.

Checkpoints record the fingerprint of the layout they were written with (in the ``fingerprint`` slots
of the ISV itself), so the hash covers exactly what decides how the ISV's memory is read: the total
dimension and dtype, and for every slot its index, count, dtype, role and reset policy. Slot names,
docs and ``shared_writers`` are left out because they do not change what any index of the vector
means: renaming a slot or rewording its doc must not make every checkpoint unreadable. The pinned
``fingerprint`` and the ``[[isv.acknowledge]]`` tables are left out too (the hash pins them, not the
other way round). ``docs/layout.md`` gives the format line by line.

>>> text = canonical_layout(layout)                 # doctest: +SKIP
>>> text.splitlines()[0]                            # doctest: +SKIP
'wireup-isv-layout 1'
>>> fingerprint(layout)                             # doctest: +SKIP
'0x...'
"""

from __future__ import annotations

import hashlib

from ..model import IsvLayout, Slot

#: Bumped whenever the serialisation below changes; it is the first line of the hashed text, so a new
#: format can never collide with an old one.
FORMAT_VERSION = 1

#: Separates a slot line from the name comment that ``canonical_layout(names=True)`` appends; the
#: comment is never hashed.
NAME_COMMENT = "  # "


def format_number(value: float | str) -> str:
    """The canonical text of a reset value: ``keep``, or the shortest decimal that round-trips.

    Python's ``repr`` of a float is the shortest string that reads back to the same double, so 1, 1.0
    and 1.00 all serialise as ``1.0``; ``-0.0`` is folded into ``0.0`` because both reset a slot to
    zero.

    >>> [format_number(v) for v in (1, 0.05, -0.0, 1e-6, "keep")]
    ['1.0', '0.05', '0.0', '1e-06', 'keep']
    """
    if isinstance(value, str):
        return value
    f = float(value)
    return repr(0.0 if f == 0.0 else f)


def slot_line(slot: Slot) -> str:
    """One slot's hashed line: ``slot INDEX count=N dtype=D role=R reset=EV:V,...`` (no name).

    >>> slot_line(Slot(117, "AUX_LABEL_SCALE_EMA", "scale", reset=(("FoldReset", 1.0), ("ColdStart", 1.0))))
    'slot 117 count=1 dtype=f32 role=scale reset=ColdStart:1.0,FoldReset:1.0'
    """
    reset = ",".join(f"{ev}:{format_number(v)}" for ev, v in sorted(slot.reset, key=lambda r: r[0]))
    return f"slot {slot.index} count={slot.count} dtype={slot.dtype} role={slot.role} reset={reset}"


def canonical_layout(layout: IsvLayout, names: bool = False) -> str:
    """The text that is hashed: a three-line header, then one line per slot in index order.

    With ``names=True`` each slot line ends with ``  # NAME`` for people to read; those comments are
    not part of the hashed text (strip everything from ``"  # "`` to the end of each line to get it).

    >>> print(canonical_layout(layout, names=True))     # doctest: +SKIP
    wireup-isv-layout 1
    total_dim 118
    dtype f32
    slot 0 count=1 dtype=f32 role=ema reset=ColdStart:0.0,FoldReset:0.0  # Q_LOSS_EMA
    ...
    """
    lines = [f"wireup-isv-layout {FORMAT_VERSION}", f"total_dim {layout.total_dim}", f"dtype {layout.dtype}"]
    # Sorted by index, then by the line itself, so the order of [[isv.slot]] tables in the file and any
    # duplicate index (a SLOT_INDEX error) still give one deterministic text.
    rows = sorted(((s.index, slot_line(s), s.name) for s in layout.slots), key=lambda r: (r[0], r[1]))
    for _, line, name in rows:
        lines.append(f"{line}{NAME_COMMENT}{name}" if names else line)
    return "\n".join(lines) + "\n"


def fingerprint_of_text(text: str) -> str:
    """``0x`` + 16 lowercase hex digits: the first 8 bytes of sha256(``text``), big-endian.

    >>> fingerprint_of_text("")
    '0xe3b0c44298fc1c14'
    """
    return "0x" + hashlib.sha256(text.encode("utf-8")).digest()[:8].hex()


def fingerprint(layout: IsvLayout) -> str:
    """The layout fingerprint, e.g. ``'0x5c0d...'`` (see :func:`canonical_layout` for what is hashed).

    >>> fingerprint(cs.isv) == cs.isv.fingerprint       # doctest: +SKIP
    True
    """
    return fingerprint_of_text(canonical_layout(layout))
