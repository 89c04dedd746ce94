"""Git history of kernel sources and contracts, in a form that is stable once committed.

The report is committed in the same commit that changes a kernel, so "the last commit that touched
this file" would be the report's own commit, which does not exist yet when the report is rendered.
Instead the report shows, per file:

* the **content id**: the git blob id of the file as it is now (``git hash-object``, the id git will
  store it under) -- known before committing, unchanged by committing;
* the commit it **supersedes**: the newest commit in ``HEAD``'s history whose version of the file
  *differs* from the current content. Committing the current content (with or without the report)
  adds a commit whose version equals the current content, so it is skipped; later commits that do not
  touch the file are not considered at all. The answer is therefore the same before and after the
  commit and on a clean clone of any later commit, as long as the file does not change.

A file with no earlier version in history shows "first version"; outside a git work tree every file
shows "not in git". History that was rewritten (a rebase or a squash merge of several commits that each
changed the file) changes the commits a report names: re-render after rewriting. A shallow clone hides
the history this needs, so it is refused (``fetch-depth: 0`` in CI).

>>> hist = GitHistory.open(Path("."))                           # doctest: +SKIP
>>> hist.of("kernels/aux_trunk_kernel.cu").text                 # doctest: +SKIP
'blob 4f3c2a9e1b · supersedes 2971ea8e53 2026-12-02 "Contract model, ..."'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import EnvironmentProblem
from ..git import git_output as _git

#: Commit and blob ids are cut to a fixed length: git's own abbreviation grows with the repository,
#: which would change the report without any change to what it describes.
ID_LENGTH = 10


@dataclass(frozen=True)
class Commit:
    """A commit as the report shows it: fixed-length id, author date (YYYY-MM-DD) and subject."""

    id: str
    date: str
    subject: str


@dataclass(frozen=True)
class FileHistory:
    """Where one file stands: ``state`` is "tracked" (in a git work tree) or "not in git"."""

    path: str
    state: str
    blob: str | None = None
    supersedes: Commit | None = None

    @property
    def text(self) -> str:
        if self.state != "tracked":
            return self.state
        if self.blob is None:
            return "file missing"
        prev = f'supersedes {self.supersedes.id} {self.supersedes.date} "{self.supersedes.subject}"' if self.supersedes else "first version"
        return f"blob {self.blob} · {prev}"


class GitHistory:
    """Answers :meth:`of` for files under ``root``; every answer is computed once."""

    def __init__(self, root: Path, top: Path | None):
        self.root = root.resolve()
        self.top = top
        self._cache: dict[str, FileHistory] = {}

    @classmethod
    def open(cls, root: Path, enabled: bool = True) -> GitHistory:
        """History of the git work tree holding ``root`` (none when ``enabled`` is false or no git).

        Raises :class:`EnvironmentProblem` for a shallow clone, whose history would be cut short.
        """
        if not enabled:
            return cls(root, None)
        top = _git(root, "rev-parse", "--show-toplevel")
        if top is None:
            return cls(root, None)
        if _git(root, "rev-parse", "--is-shallow-repository") == "true":
            raise EnvironmentProblem(
                f'"{top}" is a shallow git clone, so the history the report shows (the commit each kernel\'s '
                "current source supersedes) cannot be read; fetch the full history (actions/checkout with "
                "fetch-depth: 0, or git fetch --unshallow) or render with --no-history."
            )
        return cls(root, Path(top))

    @property
    def available(self) -> bool:
        return self.top is not None

    def of(self, rel: str) -> FileHistory:
        """The history of ``rel`` (a path relative to the project root)."""
        if rel not in self._cache:
            self._cache[rel] = self._lookup(rel)
        return self._cache[rel]

    def prefetch(self, paths: list[str]) -> None:
        """Hash many files in one ``git hash-object`` call (the per-file log queries stay separate)."""
        if self.top is None:
            return
        todo = [p for p in dict.fromkeys(paths) if p not in self._cache and (self.root / p).is_file()]
        if not todo:
            return
        out = _git(self.root, "hash-object", "--", *todo)
        if out is None:
            return
        for rel, blob in zip(todo, out.splitlines()):
            self._cache[rel] = self._supersedes(rel, blob)

    def _lookup(self, rel: str) -> FileHistory:
        if self.top is None:
            return FileHistory(rel, "not in git")
        if not (self.root / rel).is_file():
            return FileHistory(rel, "tracked", None)
        blob = _git(self.root, "hash-object", "--", rel)
        return self._supersedes(rel, blob) if blob else FileHistory(rel, "not in git")

    def _supersedes(self, rel: str, blob: str) -> FileHistory:
        # --raw lists the file's blob after each commit; the first (newest) that differs from the current
        # content is the version the current one replaced.
        out = _git(
            self.root, "log", "--no-renames", "--no-color", "--raw", "--no-abbrev", "--date=short",
            "--format=%x00%H%x01%ad%x01%s", "HEAD", "--", rel,
        )  # fmt: skip
        found = None
        # NUL and SOH separate records and fields (not \x1e/\x1f: str.strip() counts those as whitespace)
        for chunk in (out or "").split("\x00")[1:]:
            head, _, rest = chunk.partition("\n")
            parts = head.split("\x01")
            if len(parts) != 3:
                continue
            new_blob = None
            for line in rest.splitlines():
                if line.startswith(":"):
                    fields = line.split("\t", 1)[0].split()
                    if len(fields) >= 4:
                        new_blob = fields[3]
                        break
            if new_blob is None or new_blob == blob:
                continue  # a merge with no change of its own, or a commit of the current content
            found = Commit(parts[0][:ID_LENGTH], parts[1], parts[2].strip())
            break
        return FileHistory(rel, "tracked", blob[:ID_LENGTH], found)
