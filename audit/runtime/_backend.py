"""The device abstraction every verification check runs through.

A :class:`Backend` allocates and copies device memory, loads cubins, launches kernels with typed
arguments, synchronises with an error check after every launch, captures a stream into a CUDA graph and
replays it, times launches with events and describes the device. Three implementations:

* ``pycuda`` (:mod:`audit.runtime._pycuda`): PyCUDA in the primary context (``pycuda.autoprimaryctx``);
* ``cupy`` (:mod:`audit.runtime._cupy`): CuPy ``RawModule`` / ``RawKernel``;
* ``emulated`` (:mod:`audit.runtime._emulated`): numpy "device" memory and Python "kernels", for CPU
  tests only: the whole pipeline runs in CI and tests inject broken kernels.

The two GPU backends share :class:`DeviceBackend`: CUDA errors as :class:`DeviceError` (with
:func:`is_sticky`), function lookup, and the helper cubin's device-side count and hash.

GPU packages are imported only inside the first two modules, lazily, by :func:`audit.runtime._open.open_backend`.

>>> be = open_backend("emulated")   # from audit.runtime._open
>>> ptr = be.alloc(16); be.h2d(ptr, np.arange(4, dtype=np.float32)); be.d2h(ptr, 16).view(np.float32)
array([0., 1., 2., 3.], dtype=float32)
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# kernel argument kinds -> numpy scalar type (pointers travel as 64-bit unsigned integers)
ARG_TYPES: dict[str, type] = {
    "ptr": np.uint64,
    "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16,
    "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64,
    "f32": np.float32, "f64": np.float64, "f16": np.float16,
}  # fmt: skip


# word width in bytes -> the unsigned numpy type of one word
WORD_TYPES: dict[int, type] = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

# CUDA errors whose text says the context is lost (every later call fails): the worker must not go on
_STICKY = ("illegal address", "illegal memory", "launch failed", "unspecified launch failure", "misaligned", "illegal instruction",
           "hardware stack", "launch timeout", "timed out", "exception", "trap", "assert")  # fmt: skip


def is_sticky(message: str) -> bool:
    """Whether a CUDA error's message says the context is lost (illegal address, launch failure, ...).

    >>> is_sticky("cuStreamSynchronize failed: an illegal memory access was encountered")
    True
    """
    m = message.lower()
    return any(s in m for s in _STICKY)


def count_words(data: np.ndarray, width: int, mask: int, value: int) -> int:
    """Number of ``width``-byte words ``w`` of the uint8 array ``data`` with ``w & mask == value`` (a
    trailing partial word does not count)."""
    dt = WORD_TYPES[width]
    w = data[: data.size - data.size % width].view(dt)
    return int(np.count_nonzero((w & dt(mask)) == dt(value)))


@dataclass(frozen=True)
class Arg:
    """One kernel argument: ``kind`` (``ptr`` or a dtype name) and its value.

    >>> Arg("i32", 7).scalar
    np.int32(7)
    """

    kind: str
    value: int | float

    @property
    def scalar(self) -> np.generic:
        return ARG_TYPES[self.kind](self.value)


class DeviceError(RuntimeError):
    """A CUDA error: a failed launch, an asynchronous fault found at synchronisation, a failed load.

    ``sticky`` marks errors that poison the context (illegal address, launch failure): the worker reports
    them and exits so the supervisor can restart it with the remaining subjects.
    """

    def __init__(self, message: str, sticky: bool = False, code: str = ""):
        super().__init__(message)
        self.sticky = sticky
        self.code = code


class BackendUnavailable(RuntimeError):
    """The backend cannot start here (package missing, no driver, no device); the message says which."""


@dataclass
class LaunchMeta:
    """What the runner knows about a launch; GPU backends ignore it, the emulated one runs on it."""

    kernel: Any = None  # audit.model.Kernel
    env: dict[str, int] = field(default_factory=dict)
    slot_index: dict[str, int] = field(default_factory=dict)
    isv_dim: int = 0
    reference: Any = None  # the float64 reference callable, where one is declared
    label: str = ""  # "aux_trunk_forward B=37 (run A)", for error messages


class Graph(abc.ABC):
    """An instantiated CUDA graph captured from the backend's stream."""

    @abc.abstractmethod
    def replay(self) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional for implementations
        pass


class StreamGraph(Graph):
    """A graph whose executable is replayed with ``launch(stream)`` (PyCUDA's GraphExec, CuPy's Graph)."""

    def __init__(self, executable: Any, stream: Any):
        self.executable = executable
        self.stream = stream

    def replay(self) -> None:
        self.executable.launch(self.stream)


class Backend(abc.ABC):
    """Device memory, modules, launches, graphs, timing and device facts (see the module docstring)."""

    name = "abstract"

    # -- lifecycle and facts --------------------------------------------------------------------------
    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def device_info(self) -> dict[str, Any]:
        """``name``, ``compute_capability`` ("9.0"), ``memory_bytes``, ``driver_version``, ``runtime_version``."""

    def free_memory(self) -> int | None:
        return None

    def close(self) -> None:  # noqa: B027
        pass

    # -- memory ---------------------------------------------------------------------------------------
    @abc.abstractmethod
    def alloc(self, nbytes: int) -> int: ...

    @abc.abstractmethod
    def free(self, ptr: int) -> None: ...

    @abc.abstractmethod
    def h2d(self, ptr: int, host: np.ndarray) -> None:
        """Copy the bytes of the C-contiguous ``host`` array to ``ptr`` (synchronous)."""

    @abc.abstractmethod
    def d2h(self, ptr: int, nbytes: int) -> np.ndarray:
        """``nbytes`` bytes at ``ptr`` as a uint8 array (synchronous)."""

    @abc.abstractmethod
    def d2d(self, dst: int, src: int, nbytes: int) -> None: ...

    @abc.abstractmethod
    def memset8(self, ptr: int, byte: int, nbytes: int, capture: bool = False) -> None:
        """Fill bytes; ``capture`` marks a memset enqueued on the capture stream (a schedule's zero step)."""

    @abc.abstractmethod
    def fill(self, ptr: int, pattern: bytes, count: int) -> None:
        """Fill ``count`` elements of ``len(pattern)`` (1, 2, 4 or 8) bytes with ``pattern``."""

    # -- modules and launches ---------------------------------------------------------------------------
    @abc.abstractmethod
    def load_module(self, path: str) -> Any: ...

    @abc.abstractmethod
    def get_function(self, module: Any, symbol: str) -> Any: ...

    @abc.abstractmethod
    def launch(
        self,
        fn: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        args: list[Arg],
        meta: LaunchMeta | None = None,
    ) -> None:
        """Enqueue one launch on the backend's stream (captured while a capture is open)."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait for the stream; raise :class:`DeviceError` with the CUDA error where one occurred."""

    # -- graphs ---------------------------------------------------------------------------------------
    @abc.abstractmethod
    def begin_capture(self) -> None: ...

    @abc.abstractmethod
    def end_capture(self) -> Graph: ...

    # -- timing ---------------------------------------------------------------------------------------
    def timer(self) -> Any:
        """An opaque start mark; :meth:`elapsed` turns it into seconds after a synchronize."""
        return time.perf_counter()

    def elapsed(self, mark: Any) -> float:
        return time.perf_counter() - mark

    # -- device-side reductions (host fallbacks; GPU backends use the helper cubin) -------------------
    CHUNK = 64 << 20

    def _chunks(self, ptr: int, nbytes: int, width: int):
        step = max(width, (self.CHUNK // width) * width)
        for off in range(0, nbytes - nbytes % width, step):
            n = min(step, nbytes - nbytes % width - off)
            yield off, self.d2h(ptr + off, n)

    def count_masked(self, ptr: int, nbytes: int, width: int, mask: int, value: int) -> int:
        """Number of ``width``-byte words ``w`` at ``ptr`` with ``w & mask == value``."""
        return sum(count_words(chunk, width, mask, value) for _, chunk in self._chunks(ptr, nbytes, width))

    def hash(self, ptr: int, nbytes: int) -> int:
        """An order-independent 64-bit hash of the bytes at ``ptr`` (equal bytes give equal hashes)."""
        total = 0
        for off, chunk in self._chunks(ptr, nbytes, 4):
            total = (total + hash_words(chunk.view(np.uint32), off // 4)) & MASK64
        tail = nbytes % 4
        if tail:
            last = np.zeros(4, np.uint8)
            last[:tail] = self.d2h(ptr + nbytes - tail, tail)
            total = (total + hash_words(last.view(np.uint32), nbytes // 4)) & MASK64
        return total

    def hash_many(self, spans: list[tuple[int, int]]) -> list[int]:
        """:meth:`hash` of each ``(ptr, nbytes)``, 0 for an empty one (GPU backends: one round trip for all)."""
        return [self.hash(p, n) if n else 0 for p, n in spans]

    def count_many(self, calls: list[tuple[int, int, int, int, int]]) -> list[int]:
        """:meth:`count_masked` of each ``(ptr, nbytes, width, mask, value)`` (GPU backends: one round trip)."""
        return [self.count_masked(*c) for c in calls]


MASK64 = (1 << 64) - 1


class DeviceBackend(Backend):
    """What the two GPU backends do alike: CUDA errors become :class:`DeviceError` (sticky where
    :func:`is_sticky` says so), function lookup, and the count and hash on the device through the helper
    cubin (:mod:`audit.runtime._helpers`), with the host fallbacks of :class:`Backend` where it is
    missing or a pointer is misaligned. A subclass sets ``_device_errors`` (its package's CUDA error
    types) and implements :meth:`_run_helper`.
    """

    _device_errors: tuple[type[BaseException], ...] = ()
    _helpers: dict[str, Any]

    def _err(self, exc: BaseException, what: str) -> DeviceError:
        return DeviceError(f"{what}: {exc}", sticky=is_sticky(str(exc)), code=type(exc).__name__)

    def _load_helpers(self, load: Callable[[], Any]) -> None:
        """Look the helper kernels up in the module ``load()`` returns; none (host fallbacks) if it fails."""
        self._helpers = {}
        try:
            mod = load()
            for w in (8, 16, 32, 64):
                self._helpers[f"count{w}"] = mod.get_function(f"wireup_count_masked_u{w}")
            self._helpers["hash"] = mod.get_function("wireup_hash_u32")
            self._helper_module = mod
        except self._device_errors:
            self._helpers = {}

    def get_function(self, module: Any, symbol: str) -> Any:
        try:
            return module.get_function(symbol)
        except self._device_errors as exc:
            raise self._err(exc, f'looking up "{symbol}"') from None

    @abc.abstractmethod
    def _run_helper(self, fn: Any, args: list, n: int) -> int:
        """Launch helper ``fn`` over ``n`` words with ``args`` and a zeroed 64-bit result; return the result."""

    @abc.abstractmethod
    def _run_helpers(self, jobs: list[tuple[Any, list, int]]) -> list[int]:
        """:meth:`_run_helper` of each ``(fn, args, n)``, each into its own zeroed result: all launched on
        the stream, then one synchronise and one copy of the results (one round trip, not one per job)."""

    def count_many(self, calls: list[tuple[int, int, int, int, int]]) -> list[int]:
        """The counts of several buffers in one round trip; equal to :meth:`count_masked` of each (one the
        helper cannot take, misaligned or without a helper of its width, goes through it on its own)."""
        out = [0] * len(calls)
        jobs: list[tuple[int, Any, list, int]] = []  # (index, fn, args, words)
        for i, (p, nb, width, mask, value) in enumerate(calls):
            p, nb, width = int(p), int(nb), int(width)
            fn = self._helpers.get(f"count{width * 8}")
            n = nb // width
            if fn is None or p % width:
                out[i] = self.count_masked(p, nb, width, mask, value)
            elif n:
                t = np.uint64 if width == 8 else np.uint32
                jobs.append((i, fn, [np.uint64(p), np.uint64(n), t(mask), t(value)], n))
        if len(jobs) == 1:
            i = jobs[0][0]
            out[i] = self.count_masked(*calls[i])
        elif jobs:
            try:
                counts = self._run_helpers([(fn, args, n) for _, fn, args, n in jobs])
            except self._device_errors as exc:
                raise self._err(exc, "the count helper kernel") from None
            for (i, *_), c in zip(jobs, counts):
                out[i] = c
        return out

    def hash_many(self, spans: list[tuple[int, int]]) -> list[int]:
        """The hashes of several buffers in one round trip; equal to :meth:`hash` of each (a span the
        helper cannot take, misaligned or under one word, goes through :meth:`hash` on its own)."""
        fn = self._helpers.get("hash")
        out = [0] * len(spans)
        jobs: list[tuple[int, int, int]] = []  # (index, ptr, nbytes)
        for i, (p, nb) in enumerate(spans):
            p, nb = int(p), int(nb)
            if nb == 0:
                continue
            if fn is None or p % 4 or nb < 4:
                out[i] = self.hash(p, nb)
            else:
                jobs.append((i, p, nb))
        if len(jobs) == 1:
            i, p, nb = jobs[0]
            out[i] = self.hash(p, nb)
        elif jobs:
            try:
                totals = self._run_helpers([(fn, [np.uint64(p), np.uint64(nb // 4), np.uint64(0)], nb // 4) for _, p, nb in jobs])
            except self._device_errors as exc:
                raise self._err(exc, "the hash helper kernel") from None
            for (i, p, nb), total in zip(jobs, totals):
                tail = nb % 4
                if tail:
                    last = np.zeros(4, np.uint8)
                    last[:tail] = self.d2h(p + nb - tail, tail)
                    total = (total + hash_words(last.view(np.uint32), nb // 4)) & MASK64
                out[i] = total
        return out

    def count_masked(self, ptr: int, nbytes: int, width: int, mask: int, value: int) -> int:
        fn = self._helpers.get(f"count{width * 8}")
        if fn is None or int(ptr) % width:
            return super().count_masked(ptr, nbytes, width, mask, value)
        n = int(nbytes) // width
        if n == 0:
            return 0
        t = np.uint64 if width == 8 else np.uint32
        try:
            return self._run_helper(fn, [np.uint64(int(ptr)), np.uint64(n), t(mask), t(value)], n)
        except self._device_errors as exc:
            raise self._err(exc, "the count helper kernel") from None

    def hash(self, ptr: int, nbytes: int) -> int:
        fn = self._helpers.get("hash")
        if fn is None or int(ptr) % 4:
            return super().hash(ptr, nbytes)
        n = int(nbytes) // 4
        try:
            total = self._run_helper(fn, [np.uint64(int(ptr)), np.uint64(n), np.uint64(0)], n) if n else 0
        except self._device_errors as exc:
            raise self._err(exc, "the hash helper kernel") from None
        tail = int(nbytes) % 4
        if tail:
            last = np.zeros(4, np.uint8)
            last[:tail] = self.d2h(int(ptr) + int(nbytes) - tail, tail)
            total = (total + hash_words(last.view(np.uint32), n)) & MASK64
        return total


def hash_words(words: np.ndarray, first_index: int = 0) -> int:
    """Sum over i of splitmix64(index_i << 32 | word_i), mod 2**64 (the helper kernel computes the same)."""
    if words.size == 0:
        return 0
    idx = np.arange(first_index, first_index + words.size, dtype=np.uint64)
    x = (idx << np.uint64(32)) | words.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
        return int(x.sum(dtype=np.uint64))

