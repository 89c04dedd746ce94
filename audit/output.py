"""The one way wireup writes a file: reports, SARIF, diagrams, generated constants, evidence, results.

``write_output`` decides what to do from what the path names, never from the command:

* a regular file, or a path that does not exist yet: written atomically (a temporary file in the same
  folder, flushed, fsynced and renamed over the target), so a reader never sees half a file; the result
  has the permissions a plain ``open(path, "w")`` would give: an existing file keeps its mode, a new one
  gets ``0o666`` less the umask (not the ``0o600`` of a bare ``mkstemp``);
* a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a named pipe a CI step reads): written
  in place, never replaced: ``wireup check -o /dev/null`` run as root must not turn the machine's
  ``/dev/null`` into a regular file;
* a symbolic link: written through to what it points at (the link stays);
* a folder, a block device, a socket, a path through a missing folder, or a path the process may not
  write: a :class:`~audit.errors.OutputError` (a usage error) of one sentence naming the path (exit 2);
* outside the project root: only when the user named the path on the command line (``explicit``);
  a path from the configuration or the contracts must stay inside the root;
* ``-`` named on the command line: standard output (the usual convention; a file named ``-`` is ``./-``).

>>> write_output("report.sarif", text, explicit=True, root=cfg.root)     # doctest: +SKIP
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
from pathlib import Path

from .errors import OutputError

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask: from ``/proc/self/status`` on Linux, else read by setting it and putting it
    back (a moment in which another thread creating a file would get 0o022; the lock keeps ours apart)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_output(
    path: str | os.PathLike[str],
    data: str | bytes,
    *,
    explicit: bool,
    root: Path | None,
    what: str | None = None,
    make_parents: bool | None = None,
) -> Path:
    """Write ``data`` (``str`` as UTF-8) to ``path`` as described in the module docstring; returns the
    path written (a symbolic link's target).

    ``explicit``: the user gave ``path`` on the command line (``--output``); it may then lie outside
    ``root``. ``root``: the project root (``None`` only for callers with no project, e.g. a test).
    ``what``: how messages name the path when it is not an ``--output`` (e.g. ``'the configuration key
    "report"'``). ``make_parents``: create missing folders on the way (default: only for paths that
    are not explicit, which the project's own layout names, like ``reports/evidence/``).
    """
    if explicit and os.fspath(path) == "-":  # --output -: standard output
        import sys

        if isinstance(data, str):
            sys.stdout.write(data)
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(bytes(data))
        sys.stdout.flush()
        return Path("-")
    raw = Path(path)
    blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if make_parents is None:
        make_parents = not explicit
    name = _name(raw, explicit, what)
    target = Path(os.path.realpath(raw))  # through symbolic links: a link is written through, not replaced
    if root is not None and not explicit:
        real_root = Path(os.path.realpath(root))
        if not target.is_relative_to(real_root):
            raise OutputError(f"{name} lies outside the project root \"{real_root}\"; paths from the configuration and the contracts must stay inside it (an --output on the command line may leave it).")
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{name} cannot be written ({_why(exc)}).") from None
    if st is not None:
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            raise OutputError(f"{name} is a folder; give the path of a file.")
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            _write_in_place(target, blob, name)
            return target
        if not stat.S_ISREG(mode):
            kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
            raise OutputError(f"{name} is {kind}; give the path of a regular file, a character device or a FIFO.")
    parent = target.parent
    if not parent.is_dir():
        if parent.exists():
            raise OutputError(f'{name} cannot be written: "{parent}" is not a folder.')
        if not make_parents:
            raise OutputError(f'{name} cannot be written: the folder "{parent}" does not exist.')
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f'{name} cannot be written: the folder "{parent}" cannot be created ({_why(exc)}).') from None
    _replace_atomically(target, blob, st, name)
    return target


def _name(raw: Path, explicit: bool, what: str | None) -> str:
    if explicit:
        return f'--output "{raw}"'
    return f'"{raw}" ({what})' if what else f'"{raw}"'


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _write_in_place(target: Path, blob: bytes, name: str) -> None:
    """Write through a character device or FIFO without truncating, replacing or re-creating it."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NOCTTY)  # a FIFO blocks here until a reader opens it, as `>` does
    except OSError as exc:
        raise OutputError(f"{name} cannot be written ({_why(exc)}).") from None
    try:
        view = memoryview(blob)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError as exc:
        raise OutputError(f"{name} cannot be written ({_why(exc)}).") from None
    finally:
        os.close(fd)


def _replace_atomically(target: Path, blob: bytes, old: os.stat_result | None, name: str) -> None:
    """Temporary file in the same folder -> fsync -> the mode a plain write gives -> rename over ``target``."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputError(f"{name} cannot be written ({_why(exc)}).") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            # an existing file keeps its mode (and, where we may, its owner), as with open(path, "w")
            # (the permission bits only: no set-user-ID bit is carried onto new content)
            os.fchmod(fh.fileno(), old.st_mode & 0o777 if old is not None else 0o666 & ~current_umask())
            if old is not None and hasattr(os, "fchown") and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(fh.fileno(), old.st_uid, old.st_gid)
                except OSError:
                    pass  # not permitted to keep the owner: the file becomes ours, as any replacing writer's would
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise OutputError(f"{name} cannot be written ({_why(exc)}).") from None
        raise
