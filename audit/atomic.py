"""Atomic file writes: reports, evidence and generated files are never left half-written.

The text goes to a temporary file in the same folder, is flushed and fsynced, then renamed over the
target (``os.replace`` is atomic on POSIX and Windows). ``mkstemp`` creates that file with mode 0600;
it gets the mode a plain ``open(path, "w")`` would give (the target's own mode where it exists, else
0666 less the umask) before the rename, so a committed report stays 0644 and a CI artifact readable.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if hasattr(os, "fchmod"):  # POSIX; on Windows the temporary file's mode is already the default
                os.fchmod(fh.fileno(), _mode_for(path))
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _mode_for(path: Path) -> int:
    """The permission bits ``path`` has, or those a new file gets under the current umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask: from /proc on Linux, else by setting it and putting it straight back."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)  # another thread creating a file in this instant would get 0o022
    os.umask(umask)
    return umask


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, newlines as given)."""
    write_bytes_atomic(path, text.encode("utf-8"))
