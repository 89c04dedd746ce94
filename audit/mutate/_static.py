"""The static kernel-code checks of ``wireup check``, applied to mutants: no GPU, no launch.

A mutant is caught here when LOCAL_ARRAY_BOUNDS finds a constant-bound loop of its source indexing a
local array out of bounds (``u <= kQuads`` over ``v[kQuads]``: undefined behaviour that nvcc hides by
dropping the store, so no run can see it), when LOCAL_UNINIT_READ finds a read of a local array element
that was written only under a run-time guard the read lacks (a deleted ``if (k < K)`` in the loop that
reads back ``l[k]``: an uninitialised register that nvcc may compile into the original's behaviour), when
SHARED_ARRAY_BOUNDS finds a thread-strided loop indexing a shared array (or a field of a shared union, or
through a pointer into one) past its end (``e <= kBM * kBN``: one element past a tile, inside the block's
shared allocation, where memcheck sees nothing), or
when STORE_RACE finds a global store of its entry, at an
address the same for every thread, that more than one thread runs (a deleted ``if (tid == 0)`` around an
ISV update: the lanes of a warp store the same value, so no run sees that either), or when SHARED_RMW_RACE
finds a shared-memory read-modify-write that two threads which may run it make to one element (a deleted
``if (lane == 0)`` around ``s.logits[row][k] += p``: lost updates the lanes hide by adding the same
value), or when CP_ASYNC_WAIT finds a ``cp.async.wait_group`` reached with copies not committed to a
group, or an exit with copies no ``wait_group 0`` drained (a removed ``cp_async_commit()`` or final
``cp_async_wait<0>()``: the copies land in time in every run), or when INDEX_OVERFLOW finds a global
offset computed in 32-bit arithmetic that wraps at the contracts' largest dims (a widening cast dropped:
the overflow needs a batch larger than any test's), or when SHARED_BARRIER_MISSING finds a shared
element that one thread writes and another reads or overwrites in the same barrier interval (a deleted
``__syncthreads()`` in a reduction loop: the warps usually run in an order that hides it), or when
OUT_OF_BOUNDS_ACCESS finds a thread of the block, run at small valid sizes, reading or writing outside a
parameter's buffer or a shared array (``i < n`` turned into ``i <= n``: the access lands in another
allocation and nothing faults), or when GLOBAL_RMW_RACE finds two threads loading, modifying and
storing one global element with nothing ordering them (an ``atomicAdd`` turned into ``+=``: the lost
updates leave the result a little off, inside a loose tolerance), or when BLOCK_WRITE_OVERLAP finds one
global element stored by two blocks (``m < M`` turned into ``m <= M`` in a tile loop: the store lands in
the next chunk's first row, which its own block fills too, usually later), or when SHARED_UNINIT_READ
finds a thread reading shared memory no thread of its block wrote (a zeroing loop whose bound lost a
warp: the stale bytes are often zero on a quiet GPU). Findings a ``[[suppress]]`` entry accepts are not
catches. The unmutated copy
goes through the same checks; a finding there makes the kernel's baseline fail.

>>> hits = static_catches(cfg, cs, [(m.key, m.kernel, builds[m.key])])     # doctest: +SKIP
>>> hits[m.key]                                                           # doctest: +SKIP
[('STORE_RACE', 'Kernel "aux_heads_loss_ema_update" stores to global memory at an address ...')]
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ._build import usable_cpus

STATIC_RULES = ("LOCAL_ARRAY_BOUNDS", "LOCAL_UNINIT_READ", "SHARED_ARRAY_BOUNDS", "STORE_RACE", "SHARED_RMW_RACE",
                "CP_ASYNC_WAIT", "INDEX_OVERFLOW", "SHARED_BARRIER_MISSING", "OUT_OF_BOUNDS_ACCESS",
                "GLOBAL_RMW_RACE", "BLOCK_WRITE_OVERLAP", "SHARED_UNINIT_READ")


def static_catches(cfg: Any, cs: Any, items: Sequence[tuple[str, str, Any]], jobs: int | None = 1, cache: bool = True,
                   progress: Any = None) -> dict[str, list[tuple[str, str]]]:
    """For each ``(key, kernel, build)`` (a :class:`~audit.mutate.MutantBuild`: its source and PTX), the
    ``(rule, message)`` findings of :data:`STATIC_RULES` (those of every item with that key); keys
    without a finding are left out. ``jobs`` > 1 checks the items in that many forked processes (the PTX
    analyses are pure Python: a thousand mutants took minutes on one core); the result is the same.

    With ``cache``, each item's findings are kept in ``<cache>/mutate-journal/static.jsonl`` (as they
    come, so a run cut short keeps what it finished) under the sha256 of everything they are a function of
    (:meth:`_StaticStore.item_key`: wireup's code, not the interpreter's version, the contract files and
    configuration, the include folders, the kernel, its source closure and its PTX), so a resumed run (each device call of a
    long mutation run starts over from its journal) does not analyse its mutants again: the static phase of
    the next-bar pair's 476 mutants took ~37 s of every call on the H100's 16 cores. The file lies beside the
    journals and travels with them; it is not used where git tracks files in the cache folder.

    ``progress`` (a callable) gets ``{"event": "static_checked", "done": n, "total": len(items), "stored": k}``
    when the items are keyed (``k`` of them read from the store) and after each batch checked."""
    from ..graph import Wiring

    global _SHARED
    wiring = Wiring(cs) if items else None
    dirs = [cfg.path(d) for d in cfg.include_dirs]
    store = _StaticStore.open(cfg, dirs) if cache and items else None
    keys = [store.item_key(kernel, build) for _key, kernel, build in items] if store is not None else []
    todo = [i for i in range(len(items)) if store is None or keys[i] not in store.known]
    # the store read each PTX to key its item: a worker decodes those bytes instead of reading the file again
    _SHARED = (cs, wiring, dirs, list(items), store._files if store is not None else {})
    by_index: dict[int, list[tuple[str, str]]] = {}
    stored = len(items) - len(todo)

    def tell() -> None:
        if progress is not None and items:
            progress({"event": "static_checked", "done": stored + len(by_index), "total": len(items), "stored": stored})

    def keep(done: list[tuple[int, list[tuple[str, str]]]]) -> None:
        # into the store as they come, a batch at a time: a run cut short (a device call's limit) keeps
        # what its static phase finished (the trade-outcome backward's 279 mutants took ~290 s of one,
        # with no word on the console: hence the progress)
        if not done:
            return
        by_index.update(done)
        if store is not None:
            store.add({keys[i]: hits for i, hits in done})
        done.clear()
        tell()

    tell()

    batch: list[tuple[int, list[tuple[str, str]]]] = []
    try:
        workers = min(jobs or usable_cpus(), len(todo))
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
                chunk = max(1, min(len(todo) // (4 * workers), 8))
                for i, hits in zip(todo, pool.map(_check_item, todo, chunksize=chunk)):
                    batch.append((i, hits))
                    if len(batch) >= 4 * chunk:
                        keep(batch)
        else:
            for i in todo:
                batch.append((i, _check_item(i)))
                if len(batch) >= 8:
                    keep(batch)
    finally:
        _SHARED = None
        keep(batch)  # also when interrupted: what finished stands
    found = [by_index[i] if i in by_index else store.known[keys[i]] for i in range(len(items))]  # type: ignore[union-attr]
    out: dict[str, list[tuple[str, str]]] = {}
    for (key, _kernel, _build), hits in zip(items, found):
        if hits:  # a header mutant has one item per including kernel, all under its key
            out.setdefault(key, []).extend(hits)
    return out


def static_store_lines(cfg: Any, items: Sequence[tuple[str, str, Any]]) -> str:
    """The store's lines (``static.jsonl``'s format) of the ``(key, kernel, build)`` items it holds, in
    their order, each once: what ``wireup mutate --build-only --archive`` ships with the builds. "" where
    the store is not used (no cache folder, wireup's code unreadable)."""
    dirs = [cfg.path(d) for d in cfg.include_dirs]
    store = _StaticStore.open(cfg, dirs)
    if store is None:
        return ""
    return store.lines([store.item_key(kernel, build) for _key, kernel, build in items])


#: what the forked workers of :func:`static_catches` read (set in the parent before the fork)
_SHARED: tuple[Any, Any, list[Any], list[tuple[str, str, Any]], dict[Any, bytes]] | None = None


def _check_item(i: int) -> list[tuple[str, str]]:
    from ..cuda.static import kernel_code_findings

    assert _SHARED is not None
    cs, wiring, dirs, items, read = _SHARED
    _key, kernel, build = items[i]
    k = cs.kernel(kernel)
    ptx = None
    if build.ptx is not None:
        data = read.get(build.ptx)
        if data is not None and data != b"(unreadable)":
            ptx = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")  # as read_text
        elif build.ptx.is_file():
            ptx = build.ptx.read_text(errors="replace")
    return kernel_code_findings(cs, wiring, k, build.path, dirs, ptx, display=k.source, symbol=_entry_symbol(k, ptx))


def _entry_symbol(k: Any, ptx: str | None) -> str | None:
    """The symbol of ``k``'s entry in ``ptx`` where a ``cpp_name`` names it (a C++ kernel's mangled name, as
    the build resolves it); None where ``k.symbol`` is the module's entry, or none matches (the analyses
    then say the entry is missing, as for any kernel)."""
    if ptx is None or not k.cpp_name:
        return None
    from ..compile import ptx_entry_of

    found = ptx_entry_of(ptx, k.symbol, k.cpp_name, k.params)
    return found if found != k.symbol else None


#: Bump when the layout of a static.jsonl line or what its key covers changes.
STATIC_FORMAT = "wireup-mutate-static-1"


class _StaticStore:
    """The static findings of earlier runs, by :meth:`item_key` (``<cache>/mutate-journal/static.jsonl``,
    one ``{"key": ..., "hits": [[rule, message], ...]}`` per line; a line that does not parse or holds
    anything else is ignored)."""

    def __init__(self, path: Any, base: str, dirs: Sequence[Any]) -> None:
        self.path = path
        self.base = base
        self.dirs = list(dirs)
        self.known: dict[str, list[tuple[str, str]]] = {}
        self._files: dict[Any, bytes] = {}

    @classmethod
    def open(cls, cfg: Any, dirs: Sequence[Any]) -> _StaticStore | None:
        import hashlib
        import json

        from ..check_cache import cache_folder, package_digest
        from ..hashing import contracts_digest

        folder = cache_folder(cfg)
        code = package_digest()  # not the interpreter: findings made on a CPU machine serve the GPU machine's
        contracts = contracts_digest(cfg)  # the contracts and configuration, as a journaled verification's identity
        if folder is None or not code or contracts.startswith("unreadable"):
            return None
        h = hashlib.sha256(f"{STATIC_FORMAT}\0{code}\0{contracts}\0".encode())
        for d in dirs:
            h.update(str(d).encode("utf-8", "surrogatepass") + b"\0")
        store = cls(folder / "mutate-journal" / "static.jsonl", h.hexdigest(), dirs)
        lines = []
        # static.jsonl, and the static.<name>.jsonl files `wireup mutate --build-only --archive` ships
        for path in [store.path, *sorted(store.path.parent.glob("static.*.jsonl"))]:
            try:
                lines += path.read_text(errors="replace").splitlines()
            except OSError:
                pass
        for line in lines:
            try:
                entry = json.loads(line)
                key, hits = entry["key"], entry["hits"]
            except (ValueError, TypeError, KeyError):
                continue
            if type(key) is str and type(hits) is list and all(type(x) is list and len(x) == 2 and all(type(y) is str for y in x) for x in hits):
                store.known[key] = [(r, m) for r, m in hits]
        return store

    def item_key(self, kernel: str, build: Any) -> str:
        """sha256 of the store's base (code, contracts, include folders), the kernel, and the bytes of the
        build's source closure and PTX."""
        import hashlib

        from ..hashing import include_closure

        h = hashlib.sha256(f"{self.base}\0{kernel}\0".encode())
        paths = []
        if build.path is not None:
            try:
                paths = [build.path, *(p for p in include_closure(build.path, self.dirs) if p != build.path)]
            except OSError:
                paths = [build.path]
        for p in [*paths, build.ptx]:
            h.update(b"\0" + self._bytes(p))
        return h.hexdigest()

    def _bytes(self, path: Any) -> bytes:
        if path is None:
            return b"(none)"
        data = self._files.get(path)
        if data is None:
            try:
                data = path.read_bytes()
            except OSError:
                data = b"(unreadable)"
            self._files[path] = data
        return data

    def lines(self, keys: Sequence[str]) -> str:
        """The file's lines (one per key this store knows) for ``keys``, in their order, each once."""
        import json

        return "".join(json.dumps({"key": k, "hits": [list(x) for x in self.known[k]]}) + "\n" for k in dict.fromkeys(keys) if k in self.known)

    def add(self, found: dict[str, list[tuple[str, str]]]) -> None:
        """Append the findings of ``found`` to the file (best effort) and to :attr:`known`."""
        new = {k: v for k, v in found.items() if k not in self.known}
        self.known.update(found)
        if not new:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(self.lines(list(new)))
        except OSError:
            pass
