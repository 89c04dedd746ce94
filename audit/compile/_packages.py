"""Header folders shipped by installed Python distributions (``include_packages``), CUTLASS's for one.

The ``nvidia-cutlass`` wheel carries CUTLASS's and CuTe's headers under
``cutlass_library/source/include``; a project whose kernels include them says so in its configuration::

    [tool.wireup]
    include_packages = { "nvidia-cutlass" = "cutlass_library/source/include" }

and wireup finds that folder in the distribution installed in the Python it runs in. The folder goes to
nvcc with ``-isystem`` (after the project's own ``-I`` folders, warnings from it silenced like a
toolkit's), and into the build cache key as the distribution's name, version, folder and the digest of
the ``RECORD`` rows of the files under that folder (the installer's list of what it wrote, each with its
sha256): another version or other headers rebuild, the same wheel installed elsewhere (a GPU host's
``pip install --target``) keeps the keys, and thousands of third-party headers are never read to
compute one. Those headers are the environment's, not the project's: the source rules neither walk nor
judge them, the source hash that GPU evidence records covers the project's own files only, and the
evidence records the distribution's version next to nvcc's. Whether the code built with another version is the code that was
verified is then the code hash's question, as it is for another nvcc.

>>> [p.describe() for p in package_includes(cfg)]          # doctest: +SKIP
['nvidia-cutlass 4.2.0.0 (cutlass_library/source/include)']
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import EnvironmentProblem

if TYPE_CHECKING:
    from ..config import Config


@dataclass(frozen=True)
class PackageInclude:
    """One configured distribution's header folder, resolved in this Python."""

    distribution: str
    version: str
    relative: str  # the folder inside the distribution, as configured
    folder: Path  # absolute, resolved
    record: str  # sha256 of the RECORD rows (path, hash) of the files under the folder; "" without any

    def key(self) -> str:
        """What the build cache key hashes for this folder."""
        return f"package={self.distribution}=={self.version}:{self.relative}:record={self.record}"

    def describe(self) -> str:
        return f"{self.distribution} {self.version} ({self.relative})"


def package_includes(cfg: Config) -> list[PackageInclude]:
    """The resolved folders of ``cfg.include_packages``, in configuration order (sorted by name).

    Raises :class:`~audit.errors.EnvironmentProblem` with one sentence where a distribution is not
    installed, has no such folder, or the folder leaves the distribution through a symbolic link.
    """
    return [resolve_package(cfg, dist, rel) for dist, rel in cfg.include_packages]


def resolve_package(cfg: Config, dist: str, rel: str) -> PackageInclude:
    from importlib import metadata

    where = f'{cfg.source} include_packages."{dist}"'
    try:
        d = metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        raise EnvironmentProblem(
            f'{where} asks for the headers of the Python distribution "{dist}", which is not installed in this Python '
            f"({_python()}); install it (pip install {dist}) or remove the entry."
        ) from None
    base = Path(str(d.locate_file(""))).resolve()
    folder = Path(str(d.locate_file(rel)))
    if not folder.is_dir():
        raise EnvironmentProblem(
            f'{where} names the folder "{rel}", which the installed "{dist}" {d.version} does not have '
            f'(looked for "{folder}"); expected the folder of its headers.'
        )
    real = folder.resolve()
    if not _within(real, base):
        raise EnvironmentProblem(
            f'{where} names the folder "{rel}", which resolves to "{real}", outside the installed distribution "{base}".'
        )
    return PackageInclude(dist, d.version or "", rel, real, _record_digest(d, rel))


def _record_digest(d, rel: str) -> str:
    """sha256 over the RECORD rows of the files under ``rel`` (path and hash, sorted), or "" without any.

    Only the headers' own rows count: the rest of RECORD differs between two installs of the same wheel
    (byte-compiled files, ``INSTALLER``, ``REQUESTED``, ``direct_url.json``), and a build cache carried from
    one machine to another must keep its keys.
    """
    import csv
    import io

    try:
        text = d.read_text("RECORD")
    except OSError:
        text = None
    if not text:
        return ""
    prefix = posixpath.normpath(rel.replace("\\", "/")).strip("/") + "/"
    rows = sorted(f"{row[0]},{row[1] if len(row) > 1 else ''}" for row in csv.reader(io.StringIO(text)) if row and row[0].replace("\\", "/").startswith(prefix))
    return hashlib.sha256("\n".join(rows).encode("utf-8")).hexdigest() if rows else ""


def _within(path: Path, base: Path) -> bool:
    try:
        path.relative_to(base)
        return True
    except ValueError:
        return False


def _python() -> str:
    import sys

    return os.path.realpath(sys.executable) if sys.executable else "the running interpreter"
