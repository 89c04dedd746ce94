"""Reading files of a project that may be hostile: inside the root, regular, bounded, never blocking.

Static commands (``check``, ``graph``, ``layout``, ``report``) run on pull requests from anyone, so every
file they read from the project goes through here. A path is read only when it resolves inside the
project root (a symbolic link leading out of it is refused, a loop of links is named as one), is a
regular file (a FIFO, a device or a socket would block or never end) and is no larger than the limit
for its kind; it is opened with ``O_NONBLOCK`` so a file swapped for a FIFO after the check cannot hang
the read either. Folders are walked without following links into other folders and no deeper than
:data:`MAX_DEPTH`.

>>> data = read_bytes(Path("kernels/aux_trunk_kernel.cu"), Path("."), SOURCE_LIMIT)   # doctest: +SKIP
>>> why = refusal(Path("kernels/x.cu"), Path("."))                                 # doctest: +SKIP
'is a symbolic link loop'
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

#: Largest kernel source or header read (bytes); the shipped kernels are below 40 KB each.
SOURCE_LIMIT = 4 << 20
#: Largest contract or configuration file read (bytes); 10,000 generated kernels fit in one.
CONTRACT_LIMIT = 64 << 20
#: Largest evidence record or build-cache entry read (bytes).
RECORD_LIMIT = 4 << 20
#: Folders nested deeper than this under a walked folder are not entered.
MAX_DEPTH = 32


class UnreadableFile(OSError):
    """A project file that is refused; ``str()`` is the reason, a phrase such as "is not a regular file"."""


def resolve(path: Path) -> Path | None:
    """``path`` with every symbolic link followed, or None for a loop of links (or an unusable name)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError, ValueError):
        return None


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, links followed, lies inside ``root``."""
    real = resolve(path)
    if real is None:
        return False
    try:
        real.relative_to(root.resolve())
        return True
    except ValueError:
        return False


def refusal(path: Path, root: Path, limit: int | None = None) -> str | None:
    """Why ``path`` may not be read as a project file, or None when it may (it may still not exist).

    The phrase completes a sentence that starts with the file's name: ``"kernels/x.cu" is not a regular
    file (a FIFO)``.
    """
    if "\x00" in str(path):
        return "has a NUL character in its name"
    real = resolve(path)
    if real is None:
        return "is a symbolic link loop"
    try:
        real.relative_to(root.resolve())
    except ValueError:
        return "leads outside the project root (through a symbolic link or an absolute path)"
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return f"is not a regular file ({_kind(st.st_mode)})"
    if limit is not None and st.st_size > limit:
        return f"is {st.st_size} bytes, more than the {limit} bytes read for it"
    return None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def read_bytes(path: Path, root: Path, limit: int) -> bytes:
    """The bytes of a project file; :class:`UnreadableFile` (or FileNotFoundError) otherwise."""
    why = refusal(path, root, limit)
    if why is not None:
        raise UnreadableFile(why)
    return read_regular(resolve(path) or path, limit)


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes (wherever it lies);
    :class:`UnreadableFile` or another OSError otherwise. Never blocks on a FIFO or device."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped after the check
            raise UnreadableFile(f"is not a regular file ({_kind(st.st_mode)})")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnreadableFile(f"is more than the {limit} bytes read for it")
    return data


def read_text(path: Path, root: Path, limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8 with undecodable bytes replaced."""
    return read_bytes(path, root, limit).decode("utf-8", errors="replace")


_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*include(?:_next)?\b[ \t]*([^\r\n]*)", re.MULTILINE)
#: Most files one kernel's include closure may hold before it is refused.
MAX_INCLUDES = 512


def source_refusal(source: Path, include_dirs: list[Path], root: Path) -> str | None:
    """Why the kernel source ``source`` may not be compiled or analysed, or None.

    The source and every local header it includes (transitively) must be regular files inside the root
    of at most :data:`SOURCE_LIMIT` bytes, and every ``#include`` must name its file literally (no
    absolute path, no macro): the preprocessor would otherwise read whatever a pull request points it
    at, a FIFO or ``/dev/zero`` included, and block or never end. The phrase completes a sentence that
    starts with the source's name.
    """
    why = refusal(source, root, SOURCE_LIMIT)
    if why is not None:
        return why
    if not source.exists():
        return None
    seen: set[Path] = set()
    stack = [(resolve(source) or source, None)]
    while stack:
        path, via = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        if len(seen) > MAX_INCLUDES:
            return f"includes more than {MAX_INCLUDES} local headers"
        try:
            data = read_regular(path, SOURCE_LIMIT)
        except OSError as exc:
            return f'includes "{via}", which {exc if isinstance(exc, UnreadableFile) else "cannot be read"}'
        for m in _DIRECTIVE.finditer(data):
            arg = m.group(1).split(b"//", 1)[0].strip().decode("utf-8", "replace")
            if not arg or arg[0] not in "\"<" or arg[-1] not in "\">" or len(arg) < 3:
                return f"has the computed include \"#include {arg[:60]}\" (includes must name their file literally)"
            name = arg[1:-1]
            if os.path.isabs(name) or "\x00" in name:
                return f'includes "{name[:80]}", an absolute path (includes must be relative)'
            if arg[0] == "<":
                if ".." in Path(name).parts:
                    return f'includes <{name[:80]}>, which climbs out through ".."'
                continue
            for d in (path.parent, *include_dirs):
                cand = d / name
                if os.path.lexists(cand):
                    why = refusal(cand, root, SOURCE_LIMIT)
                    if why is not None:
                        return f'includes "{name[:80]}", which {why}'
                    if cand.is_file():
                        stack.append((resolve(cand) or cand, name))
                        break
            else:
                # not a local header: nvcc looks for it in the system folders (the toolkit's, the
                # include_packages ones), where ".." would reach any file next to them
                if ".." in Path(name).parts:
                    return f'includes "{name[:80]}", which is no local header and climbs out through ".."'
                continue
    return None


def walk_files(folder: Path, suffix: str, max_depth: int = MAX_DEPTH) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Files named ``*suffix`` under ``folder`` (links to folders not followed), and what was skipped.

    Returns ``(files, skipped)`` where each skipped entry is ``(path, reason)``: a folder deeper than
    ``max_depth`` or a folder that cannot be listed. Files are returned unsorted; links among them are
    returned as found (check each with :func:`refusal`).
    """
    files: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    stack: list[tuple[str, int]] = [(str(folder), 0)]
    while stack:
        here, depth = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError as exc:
            skipped.append((Path(here), f"cannot be listed ({exc.strerror})"))
            continue
        for e in entries:
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if depth + 1 > max_depth:
                    skipped.append((Path(e.path), f"is nested more than {max_depth} folders deep"))
                else:
                    stack.append((e.path, depth + 1))
            elif e.name.endswith(suffix):
                files.append(Path(e.path))
    return files, skipped

