"""The PyCUDA backend: cubins through ``pycuda.driver.module_from_file`` in the primary context.

``pycuda.autoprimaryctx`` (never ``pycuda.autoinit``: a process mixing autoinit and CuPy hung at exit)
retains the device's primary context, the one CuPy and the CUDA runtime use, so both backends can share a
process. Launches go to one blocking stream; every launch is followed by a stream synchronise whose
error (with the CUDA error name) becomes a :class:`~audit.runtime._backend.DeviceError`. Graphs are
captured through the driver API (:mod:`audit.runtime._cuda_graph`) where PyCUDA has no wrapper.

>>> be = PyCudaBackend(helper_cubin=".wireup-cache/runtime/helpers-sm_90-....cubin")   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._backend import BackendUnavailable, DeviceBackend, DeviceError, Graph, StreamGraph
from ._helpers import HELPER_THREADS, helper_blocks


class PyCudaBackend(DeviceBackend):
    name = "pycuda"

    def __init__(self, helper_cubin: str | None = None, **_: Any):
        try:
            import pycuda.driver as drv
        except ImportError as exc:
            raise BackendUnavailable(f"PyCUDA is not installed ({exc})") from None
        try:
            import pycuda.autoprimaryctx as apc
        except Exception as exc:  # noqa: BLE001 - driver errors of any kind mean no usable device
            raise BackendUnavailable(f"PyCUDA cannot start a CUDA context ({exc})") from None
        self.drv = drv
        self._device_errors = (drv.Error,)
        self.device = apc.device
        self.context = apc.context
        self.stream = drv.Stream()
        self._allocs: dict[int, Any] = {}
        self._capture: Any = None
        self._capturing = False
        self._scratch = drv.mem_alloc(8)
        self._results: Any = None  # the results of several helper launches (_run_helpers), grown as needed
        self._results_size = 0
        self._helpers = {}
        if helper_cubin:
            self._load_helpers(lambda: drv.module_from_file(helper_cubin))

    # -- facts ----------------------------------------------------------------------------------------
    def version(self) -> str:
        import pycuda

        return f"pycuda {pycuda.VERSION_TEXT}"

    def device_info(self) -> dict[str, Any]:
        drv = self.drv
        major, minor = self.device.compute_capability()
        dv = drv.get_driver_version()
        return {
            "name": self.device.name(),
            "compute_capability": f"{major}.{minor}",
            "memory_bytes": int(self.device.total_memory()),
            "driver_version": f"{dv // 1000}.{(dv % 1000) // 10}",
            "runtime_version": "driver API; PyCUDA built against CUDA " + ".".join(str(x) for x in drv.get_version()),
        }

    def free_memory(self) -> int | None:
        try:
            return int(self.drv.mem_get_info()[0])
        except self.drv.Error:
            return None

    # -- memory ---------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        try:
            a = self.drv.mem_alloc(max(int(nbytes), 1))
        except self.drv.Error as exc:
            raise self._err(exc, f"allocating {nbytes} bytes") from None
        self._allocs[int(a)] = a
        return int(a)

    def free(self, ptr: int) -> None:
        a = self._allocs.pop(int(ptr), None)
        if a is not None:
            a.free()

    def h2d(self, ptr: int, host: np.ndarray) -> None:
        try:
            self.drv.memcpy_htod(int(ptr), np.ascontiguousarray(host))
        except self.drv.Error as exc:
            raise self._err(exc, "copying to the device") from None

    def d2h(self, ptr: int, nbytes: int) -> np.ndarray:
        out = np.empty(int(nbytes), np.uint8)
        try:
            self.drv.memcpy_dtoh(out, int(ptr))
        except self.drv.Error as exc:
            raise self._err(exc, "copying from the device") from None
        return out

    def d2d(self, dst: int, src: int, nbytes: int) -> None:
        self.drv.memcpy_dtod(int(dst), int(src), int(nbytes))

    # PyCUDA's memset wrappers take 32-bit counts: a [65536, 256, 256] partial (2**32 floats) would wrap to
    # zero elements, so every fill goes in chunks of at most 2**30 elements
    _CHUNK = 1 << 30

    def memset8(self, ptr: int, byte: int, nbytes: int, capture: bool = False) -> None:
        try:
            for off in range(0, int(nbytes), self._CHUNK):
                n = min(self._CHUNK, int(nbytes) - off)
                if capture or self._capturing:
                    self.drv.memset_d8_async(int(ptr) + off, byte & 0xFF, n, self.stream)
                else:
                    self.drv.memset_d8(int(ptr) + off, byte & 0xFF, n)
        except self.drv.Error as exc:
            raise self._err(exc, "memset") from None

    def fill(self, ptr: int, pattern: bytes, count: int) -> None:
        drv = self.drv
        w = len(pattern)
        word = int.from_bytes(pattern, "little")
        try:
            for first in range(0, int(count), self._CHUNK):
                n = min(self._CHUNK, int(count) - first)
                p = int(ptr) + first * w
                if w == 1:
                    drv.memset_d8(p, word, n)
                elif w == 2:
                    drv.memset_d16(p, word, n)
                elif w == 4:
                    drv.memset_d32(p, word, n)
                else:
                    # two strided 32-bit memsets write the low and the high word of every 8-byte element
                    drv.memset_d2d32(p, 8, word & 0xFFFFFFFF, 1, n)
                    drv.memset_d2d32(p + 4, 8, word >> 32, 1, n)
        except drv.Error:
            chunk = np.frombuffer(pattern * min(int(count), 1 << 20), np.uint8)
            done = 0
            while done < count:
                n = min(int(count) - done, 1 << 20)
                self.h2d(int(ptr) + done * w, chunk[: n * w])
                done += n

    # -- modules and launches -------------------------------------------------------------------------
    def load_module(self, path: str) -> Any:
        try:
            return self.drv.module_from_file(str(path))
        except self.drv.Error as exc:
            raise self._err(exc, f'loading "{path}"') from None

    def launch(self, fn: Any, grid, block, shared: int, args, meta=None) -> None:
        drv = self.drv
        try:
            if shared > 48 * 1024:
                fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared))
            fn(*[a.scalar for a in args], grid=tuple(int(g) for g in grid), block=tuple(int(b) for b in block),
               shared=int(shared), stream=self.stream)  # fmt: skip
        except drv.Error as exc:
            raise self._err(exc, "cuLaunchKernel") from None

    def synchronize(self) -> None:
        try:
            self.stream.synchronize()
        except self.drv.Error as exc:
            raise self._err(exc, "cuStreamSynchronize") from None

    # -- graphs ---------------------------------------------------------------------------------------
    def _handle(self) -> int:
        for attr in ("handle", "handle_int"):
            h = getattr(self.stream, attr, None)
            if h is not None:
                return int(h() if callable(h) else h)
        raise DeviceError("PyCUDA exposes no stream handle to capture")

    def begin_capture(self) -> None:
        if hasattr(self.stream, "begin_capture"):
            try:
                self.stream.begin_capture()
                self._capture = "native"
                self._capturing = True
                return
            except (AttributeError, TypeError, self.drv.Error):
                pass
        from ._cuda_graph import DriverCapture

        self._capture = DriverCapture(self._handle())
        self._capture.begin()
        self._capturing = True

    def end_capture(self) -> Graph:
        cap, self._capture = self._capture, None
        self._capturing = False
        if cap == "native":
            g = self.stream.end_capture()
            return StreamGraph(g.instantiate(), self.stream)
        if cap is None:
            raise DeviceError("no capture is open")
        return cap.end()

    # -- timing ---------------------------------------------------------------------------------------
    def timer(self) -> Any:
        ev = self.drv.Event()
        ev.record(self.stream)
        return ev

    def elapsed(self, mark: Any) -> float:
        end = self.drv.Event()
        end.record(self.stream)
        end.synchronize()
        return end.time_since(mark) / 1000.0

    # -- device-side inspection -----------------------------------------------------------------------
    def _run_helper(self, fn: Any, args: list, n: int) -> int:
        drv = self.drv
        drv.memset_d8(int(self._scratch), 0, 8)
        fn(*args, np.uint64(int(self._scratch)), grid=(helper_blocks(n), 1, 1), block=(HELPER_THREADS, 1, 1), stream=self.stream)
        self.stream.synchronize()
        out = np.empty(1, np.uint64)
        drv.memcpy_dtoh(out, int(self._scratch))
        return int(out[0])

    def _run_helpers(self, jobs: list[tuple[Any, list, int]]) -> list[int]:
        drv = self.drv
        k = len(jobs)
        if self._results_size < k:
            self._results = drv.mem_alloc(8 * k)
            self._results_size = k
        base = int(self._results)
        drv.memset_d8(base, 0, 8 * k)
        for slot, (fn, args, n) in enumerate(jobs):
            fn(*args, np.uint64(base + 8 * slot), grid=(helper_blocks(n), 1, 1), block=(HELPER_THREADS, 1, 1), stream=self.stream)
        self.stream.synchronize()
        out = np.empty(k, np.uint64)
        drv.memcpy_dtoh(out, base)
        return [int(x) for x in out]
