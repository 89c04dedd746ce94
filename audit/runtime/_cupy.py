"""The CuPy backend: cubins through ``cupy.RawModule(path=...)``, the second backend that must agree.

Memory comes straight from ``cudaMalloc`` (not CuPy's pool), so compute-sanitizer sees the exact
allocation bounds. Launches run on one stream and are synchronised and error-checked one by one; graphs
use CuPy's ``Stream.begin_capture`` / ``end_capture`` / ``Graph.launch`` (the driver API where that is
missing).

>>> be = CupyBackend()        # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._backend import BackendUnavailable, DeviceBackend, DeviceError, Graph, StreamGraph
from ._helpers import HELPER_THREADS, helper_blocks


class CupyBackend(DeviceBackend):
    name = "cupy"

    def __init__(self, helper_cubin: str | None = None, **_: Any):
        try:
            import cupy
        except ImportError as exc:
            raise BackendUnavailable(f"CuPy is not installed ({exc})") from None
        try:
            cupy.cuda.Device(0).use()
            self.stream = cupy.cuda.Stream(non_blocking=False)
        except Exception as exc:  # noqa: BLE001
            raise BackendUnavailable(f"CuPy cannot start a CUDA context ({exc})") from None
        self.cp = cupy
        self.rt = cupy.cuda.runtime
        self._errors = self._device_errors = (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError)
        self._capture: Any = None
        self._capturing = False
        self._scratch = self.rt.malloc(8)
        self._results = 0  # the results of several helper launches (_run_helpers), grown as needed
        self._results_size = 0
        self._helpers = {}
        if helper_cubin:
            self._load_helpers(lambda: cupy.RawModule(path=str(helper_cubin)))

    # -- facts ----------------------------------------------------------------------------------------
    def version(self) -> str:
        return f"cupy {self.cp.__version__}"

    def device_info(self) -> dict[str, Any]:
        p = self.rt.getDeviceProperties(0)
        name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
        dv, rv = self.rt.driverGetVersion(), self.rt.runtimeGetVersion()
        return {
            "name": name,
            "compute_capability": f"{p['major']}.{p['minor']}",
            "memory_bytes": int(p["totalGlobalMem"]),
            "driver_version": f"{dv // 1000}.{(dv % 1000) // 10}",
            "runtime_version": f"{rv // 1000}.{(rv % 1000) // 10}",
        }

    def free_memory(self) -> int | None:
        try:
            return int(self.rt.memGetInfo()[0])
        except self._errors:
            return None

    # -- memory ---------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        try:
            return int(self.rt.malloc(max(int(nbytes), 1)))
        except self._errors as exc:
            raise self._err(exc, f"allocating {nbytes} bytes") from None

    def free(self, ptr: int) -> None:
        self.rt.free(int(ptr))

    def h2d(self, ptr: int, host: np.ndarray) -> None:
        h = np.ascontiguousarray(host)
        try:
            self.rt.memcpy(int(ptr), h.ctypes.data, h.nbytes, self.rt.memcpyHostToDevice)
        except self._errors as exc:
            raise self._err(exc, "copying to the device") from None

    def d2h(self, ptr: int, nbytes: int) -> np.ndarray:
        out = np.empty(int(nbytes), np.uint8)
        try:
            self.rt.memcpy(out.ctypes.data, int(ptr), int(nbytes), self.rt.memcpyDeviceToHost)
        except self._errors as exc:
            raise self._err(exc, "copying from the device") from None
        return out

    def d2d(self, dst: int, src: int, nbytes: int) -> None:
        self.rt.memcpy(int(dst), int(src), int(nbytes), self.rt.memcpyDeviceToDevice)

    def memset8(self, ptr: int, byte: int, nbytes: int, capture: bool = False) -> None:
        try:
            self.rt.memsetAsync(int(ptr), byte & 0xFF, int(nbytes), self.stream.ptr)
            if not (capture or self._capturing):
                self.stream.synchronize()
        except self._errors as exc:
            raise self._err(exc, "memset") from None

    def fill(self, ptr: int, pattern: bytes, count: int) -> None:
        cp = self.cp
        w = len(pattern)
        if w == 1:
            self.memset8(ptr, pattern[0], count)
            return
        dt = {2: np.uint16, 4: np.uint32, 8: np.uint64}[w]
        mem = cp.cuda.UnownedMemory(int(ptr), int(count) * w, self)
        view = cp.ndarray((int(count),), dtype=dt, memptr=cp.cuda.MemoryPointer(mem, 0))
        try:
            with self.stream:
                view.fill(dt(int.from_bytes(pattern, "little")))
            self.stream.synchronize()
        except self._errors as exc:
            raise self._err(exc, "fill") from None

    # -- modules and launches -------------------------------------------------------------------------
    def load_module(self, path: str) -> Any:
        try:
            return self.cp.RawModule(path=str(path))
        except self._errors as exc:
            raise self._err(exc, f'loading "{path}"') from None

    def launch(self, fn: Any, grid, block, shared: int, args, meta=None) -> None:
        try:
            if shared > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = int(shared)
            with self.stream:
                fn(tuple(int(g) for g in grid), tuple(int(b) for b in block), tuple(a.scalar for a in args), shared_mem=int(shared))
        except self._errors as exc:
            raise self._err(exc, "cuLaunchKernel") from None

    def synchronize(self) -> None:
        try:
            self.stream.synchronize()
        except self._errors as exc:
            raise self._err(exc, "cudaStreamSynchronize") from None

    # -- graphs ---------------------------------------------------------------------------------------
    def begin_capture(self) -> None:
        if hasattr(self.stream, "begin_capture"):
            self.stream.begin_capture()
            self._capture = "native"
        else:
            from ._cuda_graph import DriverCapture

            self._capture = DriverCapture(self.stream.ptr)
            self._capture.begin()
        self._capturing = True

    def end_capture(self) -> Graph:
        cap, self._capture = self._capture, None
        self._capturing = False
        try:
            if cap == "native":
                return StreamGraph(self.stream.end_capture(), self.stream)
            if cap is None:
                raise DeviceError("no capture is open")
            return cap.end()
        except self._errors as exc:
            raise self._err(exc, "ending the stream capture") from None

    # -- timing ---------------------------------------------------------------------------------------
    def timer(self) -> Any:
        ev = self.cp.cuda.Event()
        ev.record(self.stream)
        return ev

    def elapsed(self, mark: Any) -> float:
        end = self.cp.cuda.Event()
        end.record(self.stream)
        end.synchronize()
        return self.cp.cuda.get_elapsed_time(mark, end) / 1000.0

    # -- device-side inspection -----------------------------------------------------------------------
    def _run_helper(self, fn: Any, args: list, n: int) -> int:
        self.rt.memsetAsync(self._scratch, 0, 8, self.stream.ptr)
        with self.stream:
            fn((helper_blocks(n),), (HELPER_THREADS,), tuple(args) + (np.uint64(self._scratch),))
        self.stream.synchronize()
        out = np.empty(1, np.uint64)
        self.rt.memcpy(out.ctypes.data, self._scratch, 8, self.rt.memcpyDeviceToHost)
        return int(out[0])

    def _run_helpers(self, jobs: list[tuple[Any, list, int]]) -> list[int]:
        k = len(jobs)
        if self._results_size < k:
            if self._results:
                self.rt.free(self._results)
                self._results, self._results_size = 0, 0
            self._results = self.rt.malloc(8 * k)
            self._results_size = k
        base = int(self._results)
        self.rt.memsetAsync(base, 0, 8 * k, self.stream.ptr)
        with self.stream:
            for slot, (fn, args, n) in enumerate(jobs):
                fn((helper_blocks(n),), (HELPER_THREADS,), tuple(args) + (np.uint64(base + 8 * slot),))
        self.stream.synchronize()
        out = np.empty(k, np.uint64)
        self.rt.memcpy(out.ctypes.data, base, 8 * k, self.rt.memcpyDeviceToHost)
        return [int(x) for x in out]
