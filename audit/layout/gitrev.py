"""Contracts as they were at a git revision, read through git alone.

The work tree is never touched (no checkout, no stash): file lists come from ``git ls-tree`` and file
texts from ``git cat-file --batch`` (the batch form of ``git show REV:path``), then go through the
ordinary loader with :func:`audit.load.load_contracts` ``(texts=...)``. Only TOML is parsed; no code of
the repository is imported or run.

>>> layout = load_layout_at_revision("06d0fa4", Path("."))     # doctest: +SKIP
>>> layout.total_dim                                            # doctest: +SKIP
117
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from ..errors import ContractError, ContractProblem, UsageError
from ..git import first_error_line, run_git
from ..model import IsvLayout

#: How far back FINGERPRINT_PIN looks for the revision whose layout hashes to the pinned value.
HISTORY_LIMIT = 64

# A file declares the layout with an [isv] table, [[isv.*]] tables, or dotted/inline "isv" keys.
_DECLARES_ISV = re.compile(r"^[ \t]*(?:\[\[?[ \t]*isv[ \t]*[\].]|isv[ \t]*[.=])", re.MULTILINE)


def git_toplevel(root: Path) -> Path:
    """The top folder of the git repository holding ``root``; UsageError outside a repository."""
    out = run_git(root, "rev-parse", "--show-toplevel")
    if out.returncode != 0:
        raise UsageError(f'"{root}" is not inside a git repository, so no revision can be read ({first_error_line(out.stderr)}).')
    return Path(out.stdout.decode().strip()).resolve()


def resolve_revision(root: Path, rev: str) -> str:
    """The full commit id ``rev`` names (any form git accepts: ``HEAD~1``, a tag, a short id).

    >>> resolve_revision(Path("."), "HEAD")[:7]         # doctest: +SKIP
    'eca26a1'
    """
    if not rev or rev.startswith("-"):
        raise UsageError(f'"{rev}" is not a git revision; expected a commit, branch, tag or e.g. HEAD~1.')
    git_toplevel(root)
    out = run_git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if out.returncode != 0:
        raise UsageError(f'Git revision "{rev}" does not name a commit of the repository at "{root}".')
    return out.stdout.decode().strip()


def base_or_upstream(root: Path, rev: str) -> tuple[str, str | None]:
    """``rev`` where this clone has it, else the merge base of HEAD and the branch's upstream.

    Returns the revision to compare with and, when it fell back, a sentence saying so. A clone without
    ``rev`` (the pre-commit hook's ``origin/main`` in a fork, a mirror, a repository whose main branch has
    another name) then still compares with the commit the branch forked from.

    >>> base_or_upstream(Path("."), "origin/main")     # doctest: +SKIP
    ('3f2c...', 'wireup: "origin/main" is not in this clone; comparing with the merge base of HEAD and its upstream "origin/trunk" (3f2c1a0).')
    """
    if rev.startswith("-"):
        resolve_revision(root, rev)  # its own one-sentence error; never an option for git
    git_toplevel(root)
    if run_git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode == 0:
        return rev, None
    upstream = run_git(root, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    name = upstream.stdout.decode("utf-8", "replace").strip()
    if upstream.returncode != 0 or not name:
        raise UsageError(
            f'Git revision "{rev}" is not in this clone and the current branch has no upstream to fall back to; '
            f'pass the branch your checkpoints come from with --against REV (in .pre-commit-config.yaml: args: [--against, REV]) '
            f'or set an upstream with "git branch --set-upstream-to=REMOTE/BRANCH".'
        )
    base = run_git(root, "merge-base", "HEAD", "@{upstream}")
    sha = base.stdout.decode().strip()
    if base.returncode != 0 or not sha:
        raise UsageError(
            f'Git revision "{rev}" is not in this clone and HEAD shares no commit with its upstream "{name}"; '
            f"pass the branch your checkpoints come from with --against REV."
        )
    return sha, f'wireup: "{rev}" is not in this clone; comparing with the merge base of HEAD and its upstream "{name}" ({sha[:7]}).'


def _contracts_in_repo(root: Path, contracts: str | Path, top: Path) -> str:
    folder = (root / contracts).resolve()
    try:
        return folder.relative_to(top).as_posix()
    except ValueError:
        raise UsageError(f'The contracts folder "{folder}" is outside the git repository "{top}".') from None


def _read_blobs(top: Path, specs: list[str]) -> list[bytes | None]:
    """Contents of ``REV:path`` for each spec, in one ``git cat-file --batch`` (None where missing)."""
    if not specs:
        return []
    out = run_git(top, "cat-file", "--batch", stdin="".join(s + "\n" for s in specs).encode())
    if out.returncode != 0:
        raise UsageError(f"git cat-file failed ({first_error_line(out.stderr)}).")
    data, pos, blobs = out.stdout, 0, []
    for _ in specs:
        end = data.index(b"\n", pos)
        header = data[pos:end].split()
        pos = end + 1
        if len(header) != 3 or header[1] != b"blob":
            blobs.append(None)  # "<spec> missing", or a tree where a file was expected
            if len(header) == 3:
                pos += int(header[2]) + 1
            continue
        size = int(header[2])
        blobs.append(data[pos : pos + size])
        pos += size + 1
    return blobs


def contract_texts_at(root: Path, rev: str, contracts: str | Path = "contracts") -> dict[str, str]:
    """Every ``*.toml`` under the contracts folder at ``rev``: path relative to ``root`` -> text.

    >>> sorted(contract_texts_at(Path("."), "HEAD"))[:1]          # doctest: +SKIP
    ['contracts/buffers.toml']
    """
    sha = resolve_revision(root, rev)
    top = git_toplevel(root)
    folder = _contracts_in_repo(root, contracts, top)
    out = run_git(top, "ls-tree", "-r", "-z", "--name-only", sha, "--", folder)
    if out.returncode != 0:
        raise UsageError(f'Cannot list "{folder}" at revision "{rev}" ({first_error_line(out.stderr)}).')
    names = [n for n in out.stdout.decode("utf-8", "replace").split("\0") if n.endswith(".toml")]
    texts: dict[str, str] = {}
    for name, blob in zip(names, _read_blobs(top, [f"{sha}:{n}" for n in names])):
        if blob is not None:
            texts[_relative_to_root(top / name, root)] = blob.decode("utf-8", "replace")
    return texts


def _relative_to_root(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def layout_from_texts(texts: dict[str, str], root: Path, where: str) -> IsvLayout:
    """The ISV layout declared in ``texts`` (path -> TOML), loaded by the ordinary loader.

    Only the files that declare the layout are loaded, so a revision whose kernel contracts used keys
    this version of wireup no longer accepts still yields its layout. ``where`` names the source in
    messages (``"revision 06d0fa4"``, ``"old/isv.toml"``); problems are reported against ``where``.
    """
    from ..load import load_contracts

    isv_texts = {p: t for p, t in texts.items() if _DECLARES_ISV.search(t)}
    if not isv_texts:
        raise UsageError(f"The contracts at {where} declare no [isv] table, so there is no layout to compare.")
    try:
        cs = load_contracts(root, root, texts=isv_texts)
    except ContractError as exc:
        prefix = f"{where}: "
        raise ContractError(
            [ContractProblem(prefix + p.path, p.line, p.key, p.message) for p in exc.problems]
        ) from None
    if cs.isv is None:
        raise UsageError(f"The contracts at {where} declare no [isv] table, so there is no layout to compare.")
    return cs.isv


def load_layout_at_revision(rev: str, root: Path, contracts: str | Path = "contracts") -> IsvLayout:
    """The ISV layout declared by the contracts at git revision ``rev`` (work tree untouched).

    Raises :class:`~audit.errors.UsageError` for a revision git cannot resolve or that has no layout,
    and :class:`~audit.errors.ContractError` for contracts that do not load.

    >>> load_layout_at_revision("HEAD~1", Path(".")).total_dim     # doctest: +SKIP
    118
    """
    texts = contract_texts_at(root, rev, contracts)
    return layout_from_texts(texts, root, f'revision "{rev}"')


def layout_history(
    root: Path, contracts: str | Path = "contracts", limit: int = HISTORY_LIMIT, isv_file: str | None = None
) -> Iterator[tuple[str, IsvLayout]]:
    """(commit id, layout) for the last ``limit`` commits touching the contracts, newest first.

    Revisions whose layout cannot be read (no [isv] yet, a contract that no longer loads) are
    skipped: this serves FINGERPRINT_PIN's search for the layout a pin was taken from, which must
    never fail a check. ``isv_file`` (relative to ``root``) is tried first at every revision, so the
    common case costs two git processes in all. Yields nothing outside a git repository.
    """
    if shutil.which("git") is None:
        return
    probe = run_git(root, "rev-parse", "--show-toplevel")
    if probe.returncode != 0:
        return
    top = Path(probe.stdout.decode().strip()).resolve()
    try:
        folder = _contracts_in_repo(root, contracts, top)
    except UsageError:
        return
    out = run_git(top, "log", f"-n{int(limit)}", "--format=%H", "--", folder)
    if out.returncode != 0:
        return
    shas = out.stdout.decode().split()
    blobs: list[bytes | None] = [None] * len(shas)
    in_repo = None
    if isv_file:
        try:
            in_repo = (root / isv_file).resolve().relative_to(top).as_posix()
        except ValueError:
            in_repo = None
    if in_repo:
        blobs = _read_blobs(top, [f"{sha}:{in_repo}" for sha in shas])
    parsed: dict[bytes, IsvLayout | None] = {}  # an unchanged file between revisions is parsed once
    for sha, blob in zip(shas, blobs):
        layout: IsvLayout | None = None
        try:
            if blob is not None and _DECLARES_ISV.search(blob.decode("utf-8", "replace")):
                if blob not in parsed:
                    parsed[blob] = None  # stays None if it does not load
                    text = blob.decode("utf-8", "replace")
                    parsed[blob] = layout_from_texts({isv_file or "isv.toml": text}, root, sha[:7])
                layout = parsed[blob]
            else:  # the layout moved to another file: list the folder at this revision
                layout = layout_from_texts(contract_texts_at(root, sha, contracts), root, sha[:7])
        except (UsageError, ContractError):
            continue
        if layout is not None:
            yield sha, layout
