"""Device buffers with guard bands and poison: out-of-bounds writes and unwritten outputs are caught
without a sanitizer.

Every buffer is one allocation ``[guard | data | guard]``: 4 KiB guard bands filled with a position-
dependent byte pattern sit right before and right after the data (the data starts 256-byte aligned, as
cudaMalloc's would, so vectorised float4 paths run as in production). After every launch the guards are
read back: a changed byte is an out-of-bounds write, named by buffer, side and offset. Outputs are filled
before the launch with a distinctive quiet NaN (float) or sentinel (integer) so that an element the
kernel never wrote is found; two runs use two different patterns, so a legitimately written value that
happens to equal one pattern is never mistaken for an unwritten one.

>>> arena = Arena(backend, guard_bytes=4096)                   # doctest: +SKIP
>>> buf = arena.alloc("h_out", np.float32, (37, 256))         # doctest: +SKIP
>>> arena.poison(buf, 0); arena.guard_damage()                # doctest: +SKIP
[]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ._backend import Backend

GUARD_BYTES = 4096
SMALL_BUFFER = 16 << 10  # buffers up to this size have their guard bands read back in one copy
_ALIGN = 256

# two poison patterns per element width and kind: (float, integer)
_POISON = {
    ("f", 8): (0x7FF8DEADDEADDEAD, 0x7FF8BEEFBEEFBEEF),
    ("f", 4): (0x7FC0DEAD, 0x7FC0BEEF),
    ("f", 2): (0x7E5A, 0x7E3C),
    ("i", 8): (0x5A5AA5A55A5AA5A5, 0xA5A55A5AA5A55A5A),
    ("i", 4): (0x5A5AA5A5, 0xA5A55A5A),
    ("i", 2): (0x5AA5, 0xA55A),
    ("i", 1): (0x5A, 0xA5),
}


def poison_word(dtype: np.dtype, which: int, bf16: bool = False) -> int:
    """The poison bit pattern ``which`` (0 or 1) for ``dtype`` (bf16 stored as uint16 uses a bf16 NaN)."""
    dtype = np.dtype(dtype)
    if bf16:
        return (0x7FDA, 0x7FDB)[which]
    kind = "f" if dtype.kind == "f" else "i"
    return _POISON[(kind, dtype.itemsize)][which]


def guard_pattern(n: int, salt: int = 0) -> np.ndarray:
    """The byte pattern of one guard band. ``salt`` differs per buffer and side: with one pattern for all
    bands, an off-by-one kernel that copies the first word past one buffer's end into the first word
    past another's (``dst[B] = src[B * stride]``) writes back exactly the bytes already there, and the
    out-of-bounds write goes unseen (found on the H200 with a broken strided_gather).

    The pattern depends on ``97 * salt mod 256`` only, so the 256 patterns of one band size are made once
    and shared (read-only): every launch checks every band against one."""
    return _patterns(int(n))[(97 * int(salt)) & 0xFF]


@functools.lru_cache(maxsize=4)
def _patterns(n: int) -> tuple[np.ndarray, ...]:
    base = (np.arange(n, dtype=np.uint32) * 167 + 0x3D) & 0xFF
    out = []
    for shift in range(256):
        a = ((base + shift) & 0xFF).astype(np.uint8)
        a.flags.writeable = False
        out.append(a)
    return tuple(out)


def row_runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """``[i, j)`` spans of ``rows`` whose values are consecutive (``rows[k + 1] == rows[k] + 1``).

    >>> row_runs(np.array([0, 31, 32, 63, 64, 70]))
    [(0, 1), (1, 3), (3, 5), (5, 6)]
    """
    if rows.size == 0:
        return []
    cuts = np.flatnonzero(np.diff(rows) != 1) + 1
    edges = [0, *cuts.tolist(), int(rows.size)]
    return list(zip(edges[:-1], edges[1:]))


@dataclass
class DeviceBuffer:
    """One guarded allocation: ``ptr`` is where the data starts."""

    name: str
    base: int
    ptr: int
    nbytes: int
    guard: int
    dtype: np.dtype
    shape: tuple[int, ...]
    bf16: bool = False
    salt: int = 0  # selects the guard patterns: 2 * salt before the data, 2 * salt + 1 after it
    allocation: int = 0  # what the backend allocated (``base`` moved by a misalignment offset); 0: ``base``

    @property
    def count(self) -> int:
        return self.nbytes // max(self.dtype.itemsize, 1)

    @property
    def row_bytes(self) -> int:
        if not self.shape:
            return self.nbytes
        return self.nbytes // max(self.shape[0], 1)


@dataclass(frozen=True)
class GuardDamage:
    buffer: str
    side: str  # "before" | "after"
    offset: int  # bytes from the data start of the changed byte nearest the data (negative before it)
    count: int  # changed bytes in that band
    size: int = 0  # the buffer's size in bytes

    def describe(self) -> str:
        if self.side == "after":
            return (
                f'{self.count} byte(s) of the guard band after "{self.buffer}" changed (first at byte '
                f"{self.offset}, the buffer has {self.size} bytes)"
            )
        return f'{self.count} byte(s) of the guard band before "{self.buffer}" changed (nearest at byte {self.offset})'


class Arena:
    """The buffers of one case or chain, with their guard bands (see the module docstring)."""

    def __init__(self, backend: Backend, guard_bytes: int = GUARD_BYTES):
        self.backend = backend
        self.guard = int(guard_bytes)
        if self.guard % _ALIGN:
            self.guard += _ALIGN - self.guard % _ALIGN
        self.buffers: dict[str, DeviceBuffer] = {}
        self._allocated = 0

    def alloc(self, name: str, dtype: np.dtype, shape: tuple[int, ...], bf16: bool = False, offset: int = 0) -> DeviceBuffer:
        """A guarded buffer whose data starts 256-byte aligned, or ``offset`` bytes past that (a pointer
        aligned to ``offset`` only, as a view into a larger buffer can be)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        got = self.backend.alloc(self.guard * 2 + max(nbytes, 1) + offset)
        base = got + offset
        self._allocated += 1
        buf = DeviceBuffer(name, base, base + self.guard, nbytes, self.guard, dtype, tuple(shape), bf16, self._allocated, got)
        if self.guard:
            self.backend.h2d(base, self.pattern(buf, "before"))
            self.backend.h2d(buf.ptr + nbytes, self.pattern(buf, "after"))
        self.buffers[name] = buf
        return buf

    def pattern(self, buf: DeviceBuffer, side: str) -> np.ndarray:
        return guard_pattern(self.guard, 2 * buf.salt + (side == "after"))

    def free_all(self) -> None:
        for b in self.buffers.values():
            try:
                self.backend.free(b.allocation or b.base)
            except Exception:  # noqa: BLE001 - a poisoned context cannot free; the process exits anyway
                pass
        self.buffers.clear()

    # -- contents -----------------------------------------------------------------------------------
    def upload(self, buf: DeviceBuffer, data: np.ndarray) -> None:
        arr = np.ascontiguousarray(data, dtype=buf.dtype)
        if arr.nbytes != buf.nbytes:
            raise ValueError(f'"{buf.name}": {arr.nbytes} bytes of data for a {buf.nbytes}-byte buffer')
        if buf.nbytes:
            self.backend.h2d(buf.ptr, arr)

    def poison(self, buf: DeviceBuffer, which: int = 0) -> None:
        if buf.nbytes:
            word = poison_word(buf.dtype, which, buf.bf16)
            self.backend.fill(buf.ptr, int(word).to_bytes(buf.dtype.itemsize, "little"), buf.count)

    def zero(self, buf: DeviceBuffer) -> None:
        if buf.nbytes:
            self.backend.memset8(buf.ptr, 0, buf.nbytes)

    def download(self, buf: DeviceBuffer) -> np.ndarray:
        if not buf.nbytes:
            return np.zeros(buf.shape, buf.dtype)
        return self.backend.d2h(buf.ptr, buf.nbytes).view(buf.dtype).reshape(buf.shape)

    def download_rows(self, buf: DeviceBuffer, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows`` of a batch-leading buffer: one copy per run of consecutive rows (sampled rows come
        sorted, and the tile edges 31, 32, 63, 64, ... pair up), since each copy is a round trip."""
        rb = buf.row_bytes
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.empty((len(rows), rb), np.uint8)
        for i, j in row_runs(rows):
            out[i:j] = self.backend.d2h(buf.ptr + int(rows[i]) * rb, (j - i) * rb).reshape(j - i, rb)
        return out.reshape(-1).view(buf.dtype).reshape((len(rows), *buf.shape[1:]))

    # -- device-side inspection ---------------------------------------------------------------------
    def hash(self, buf: DeviceBuffer) -> int:
        return self.backend.hash(buf.ptr, buf.nbytes) if buf.nbytes else 0

    def hash_many(self, bufs: list[DeviceBuffer]) -> list[int]:
        """:meth:`hash` of each buffer, in one round trip on a GPU backend."""
        return self.backend.hash_many([(b.ptr, b.nbytes) for b in bufs])

    def count_poison(self, buf: DeviceBuffer, which: int) -> int:
        return self.count_poison_many([buf], which)[0]

    def count_poison_many(self, bufs: list[DeviceBuffer], which: int) -> list[int]:
        """Elements still holding poison pattern ``which``, per buffer (one round trip on a GPU backend)."""
        calls = []
        for b in bufs:
            w = b.dtype.itemsize
            calls.append((b.ptr, b.nbytes, w, (1 << (8 * w)) - 1, poison_word(b.dtype, which, b.bf16)))
        return self._counts(calls)

    def count_nonfinite(self, buf: DeviceBuffer) -> int:
        """NaN or Inf elements of a float buffer (0 for integer buffers)."""
        return self.count_nonfinite_many([buf])[0]

    def count_nonfinite_many(self, bufs: list[DeviceBuffer]) -> list[int]:
        """:meth:`count_nonfinite` of each buffer (one round trip on a GPU backend)."""
        calls = []
        for b in bufs:
            if b.dtype.kind != "f" and not b.bf16:
                calls.append((b.ptr, 0, 1, 0, 0))  # integers are never NaN: nothing to count
                continue
            w = b.dtype.itemsize
            exp = {8: 0x7FF0000000000000, 4: 0x7F800000, 2: 0x7F80 if b.bf16 else 0x7C00}[w]
            calls.append((b.ptr, b.nbytes, w, exp, exp))
        return self._counts(calls)

    def _counts(self, calls: list[tuple[int, int, int, int, int]]) -> list[int]:
        """The backend's counts of the non-empty calls, 0 for the empty ones."""
        todo = [i for i, c in enumerate(calls) if c[1]]
        got = self.backend.count_many([calls[i] for i in todo]) if todo else []
        out = [0] * len(calls)
        for i, c in zip(todo, got):
            out[i] = int(c)
        return out

    def count_nonzero(self, buf: DeviceBuffer) -> int:
        """Elements that are not (+-)0."""
        if not buf.nbytes:
            return 0
        w = buf.dtype.itemsize
        if buf.dtype.kind == "f" or buf.bf16:
            mask = (1 << (8 * w - 1)) - 1  # drop the sign bit: -0.0 counts as zero
        else:
            mask = (1 << (8 * w)) - 1
        return buf.count - self.backend.count_masked(buf.ptr, buf.nbytes, w, mask, 0)

    def guard_damage(self, names: list[str] | None = None) -> list[GuardDamage]:
        """Every guard band that no longer holds its pattern."""
        if not self.guard:
            return []
        out = []
        for b in self.buffers.values():
            if names is not None and b.name not in names:
                continue
            if b.nbytes <= SMALL_BUFFER:
                # one copy of the whole allocation instead of two of its bands (each copy is a round trip)
                whole = self.backend.d2h(b.base, 2 * self.guard + b.nbytes)
                before, after = whole[: self.guard], whole[self.guard + b.nbytes :]
            else:
                before = self.backend.d2h(b.base, self.guard)
                after = self.backend.d2h(b.ptr + b.nbytes, self.guard)
            for side, got in (("before", before), ("after", after)):
                want = self.pattern(b, side)
                if got.size == want.size and got.tobytes() == want.tobytes():
                    continue  # intact (a byte comparison; the positions are only needed for damage)
                bad = np.flatnonzero(got != want)
                if bad.size:
                    # report the changed byte nearest the data: the likeliest off-by-one
                    first = int(bad[-1]) - self.guard if side == "before" else b.nbytes + int(bad[0])
                    out.append(GuardDamage(b.name, side, first, int(bad.size), b.nbytes))
        return out

    def restore_guards(self) -> None:
        """Rewrite every guard band (after damage was reported, so later checks start clean)."""
        if not self.guard:
            return
        for b in self.buffers.values():
            self.backend.h2d(b.base, self.pattern(b, "before"))
            self.backend.h2d(b.ptr + b.nbytes, self.pattern(b, "after"))
