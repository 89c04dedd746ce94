"""CUDA-graph capture through the driver API (ctypes on libcuda), for backends without a graph API.

PyCUDA 2026.1 as built for the GPU host has no stream-capture wrapper, so the PyCUDA backend captures its
own stream with ``cuStreamBeginCapture_v2`` / ``cuStreamEndCapture`` / ``cuGraphInstantiateWithFlags`` /
``cuGraphLaunch`` called directly on the driver every CUDA package in the process shares.

>>> cap = DriverCapture(stream_handle); cap.begin(); ...; graph = cap.end()   # doctest: +SKIP
"""

from __future__ import annotations

import ctypes

from ._backend import DeviceError, Graph

CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
_LIB: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        for name in ("libcuda.so.1", "libcuda.so"):
            try:
                _LIB = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if _LIB is None:
            raise DeviceError("libcuda cannot be loaded for graph capture")
    return _LIB


def _check(code: int, what: str) -> None:
    if code == 0:
        return
    name = ctypes.c_char_p()
    text = ctypes.c_char_p()
    lib = _lib()
    lib.cuGetErrorName(code, ctypes.byref(name))
    lib.cuGetErrorString(code, ctypes.byref(text))
    n = name.value.decode() if name.value else str(code)
    t = text.value.decode() if text.value else ""
    sticky = code in (700, 701, 702, 714, 715, 716, 717, 718, 719)  # illegal address, launch failures...
    raise DeviceError(f"{what}: {t}", sticky=sticky, code=n)


class DriverGraph(Graph):
    def __init__(self, graph: ctypes.c_void_p, exe: ctypes.c_void_p, stream: int):
        self.graph = graph
        self.exe = exe
        self.stream = stream

    def replay(self) -> None:
        _check(_lib().cuGraphLaunch(self.exe, ctypes.c_void_p(self.stream)), "cuGraphLaunch")

    def close(self) -> None:
        lib = _lib()
        if self.exe:
            lib.cuGraphExecDestroy(self.exe)
            self.exe = None
        if self.graph:
            lib.cuGraphDestroy(self.graph)
            self.graph = None


class DriverCapture:
    """Begin / end a capture of the stream with handle ``stream`` (a CUstream as an integer)."""

    def __init__(self, stream: int):
        self.stream = int(stream)

    def begin(self) -> None:
        _check(_lib().cuStreamBeginCapture_v2(ctypes.c_void_p(self.stream), ctypes.c_int(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)), "cuStreamBeginCapture")

    def end(self) -> DriverGraph:
        lib = _lib()
        g = ctypes.c_void_p()
        _check(lib.cuStreamEndCapture(ctypes.c_void_p(self.stream), ctypes.byref(g)), "cuStreamEndCapture")
        exe = ctypes.c_void_p()
        _check(lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), g, ctypes.c_ulonglong(0)), "cuGraphInstantiateWithFlags")
        return DriverGraph(g, exe, self.stream)
