"""Atomic file writes for wireup's own files (evidence records, mutation results, caches).

A thin face over :func:`audit.output.write_output`, the one place that writes files: a regular file is
replaced atomically with the permissions a plain write gives (umask), a character device or FIFO is
written in place, a folder is a usage error. These callers write paths of the project's own layout,
so missing folders are created and no root is enforced here (the callers pass paths under it).

>>> write_text_atomic(Path("reports/evidence/k.json"), "{}\\n")      # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from .output import write_output


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step."""
    write_output(path, data, explicit=False, root=None, make_parents=True)


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, newlines as given)."""
    write_output(path, text, explicit=False, root=None, make_parents=True)
