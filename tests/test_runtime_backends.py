"""The PyCUDA and CuPy backends' own logic, on the CPU, against minimal stand-ins for the two packages.

The stand-ins keep device memory in the emulated backend and run the helper kernels in numpy, so what is
tested here is the backends' bookkeeping: allocation, copies, chunked fills (PyCUDA's 32-bit counts),
64-bit poison through two strided memsets, typed launch arguments, helper-kernel argument order, error
translation with the sticky flag, and the device facts. Whether the real packages behave as these
stand-ins do is what the GPU tests check.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from audit.runtime._backend import Arg, DeviceError, hash_words
from audit.runtime._emulated import EmulatedBackend

MEM = EmulatedBackend()
LAUNCHES: list[tuple] = []


def _helper(name, args):
    if name.startswith("wireup_count_masked_u"):
        width = int(name.rsplit("u", 1)[1]) // 8
        ptr, n, mask, value, out = (int(a) for a in args)
        got = MEM.count_masked(ptr, n * width, width, mask, value)
    else:
        ptr, n, first, out = (int(a) for a in args)
        got = hash_words(MEM.d2h(ptr, n * 4).view(np.uint32), first) if n else 0
    before = int(MEM.d2h(out, 8).view(np.uint64)[0])  # the kernels atomicAdd into their result
    MEM.h2d(out, np.array([(before + got) & ((1 << 64) - 1)], np.uint64))


def _fill(ptr, value, count, width):
    if count >= 1 << 32:
        raise AssertionError("a 32-bit count would wrap")
    MEM.fill(int(ptr), int(value).to_bytes(width, "little"), int(count))


def fake_pycuda() -> dict[str, types.ModuleType]:
    drv = types.ModuleType("pycuda.driver")

    class Error(Exception):
        pass

    class LaunchError(Error):
        pass

    class Alloc:
        def __init__(self, n):
            self.ptr = MEM.alloc(n)

        def __int__(self):
            return self.ptr

        def free(self):
            MEM.free(self.ptr)

    class Stream:
        handle = 0x5EED

        def synchronize(self):
            if drv.fail_next_sync:
                drv.fail_next_sync = False
                raise LaunchError("cuStreamSynchronize failed: an illegal memory access was encountered")

    class Event:
        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

        def time_since(self, other):
            return 0.25

    class Function:
        def __init__(self, name):
            self.name = name
            self.attrs = {}

        def __call__(self, *args, grid, block, shared=0, stream=None):
            assert isinstance(grid, tuple) and isinstance(block, tuple) and stream is not None
            assert all(isinstance(a, np.generic) for a in args), args
            LAUNCHES.append((self.name, args, grid, block, shared))
            if self.name.startswith("wireup_"):
                _helper(self.name, args)

        def set_attribute(self, attr, value):
            self.attrs[attr] = value

    class Module:
        def get_function(self, name):
            if name == "missing":
                raise Error("cuModuleGetFunction failed: named symbol not found")
            return Function(name)

    drv.Error, drv.LaunchError, drv.Stream, drv.Event = Error, LaunchError, Stream, Event
    drv.fail_next_sync = False
    drv.mem_alloc = Alloc
    drv.memcpy_htod = lambda dst, src: MEM.h2d(int(dst), np.ascontiguousarray(src))
    drv.memcpy_dtoh = lambda dst, src: dst.view(np.uint8).__setitem__(slice(None), MEM.d2h(int(src), dst.nbytes))
    drv.memcpy_dtod = lambda dst, src, n: MEM.d2d(int(dst), int(src), int(n))
    drv.memset_d8 = lambda p, v, n: _fill(p, v, n, 1)
    drv.memset_d8_async = lambda p, v, n, s: _fill(p, v, n, 1)
    drv.memset_d16 = lambda p, v, n: _fill(p, v, n, 2)
    drv.memset_d32 = lambda p, v, n: _fill(p, v, n, 4)

    def memset_d2d32(p, pitch, value, width, height):
        assert width == 1 and pitch == 8 and height < 1 << 32
        arr, off = MEM._locate(int(p), (height - 1) * pitch + 4)
        rows = arr[off : off + height * pitch - 4 if height else off]
        np.lib.stride_tricks.as_strided(rows.view(np.uint8), shape=(height, 4), strides=(pitch, 1))[:] = np.frombuffer(
            int(value).to_bytes(4, "little"), np.uint8
        )

    drv.memset_d2d32 = memset_d2d32
    drv.module_from_file = lambda path: Module()
    drv.function_attribute = types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES="MAX_DYNAMIC_SHARED_SIZE_BYTES")
    drv.get_driver_version = lambda: 13000
    drv.get_version = lambda: (13, 0, 0)
    drv.mem_get_info = lambda: (100 << 30, 141 << 30)
    apc = types.ModuleType("pycuda.autoprimaryctx")
    apc.device = types.SimpleNamespace(name=lambda: "NVIDIA H200", compute_capability=lambda: (9, 0), total_memory=lambda: 141 << 30)
    apc.context = object()
    pkg = types.ModuleType("pycuda")
    pkg.VERSION_TEXT = "2026.1"
    pkg.driver, pkg.autoprimaryctx = drv, apc
    return {"pycuda": pkg, "pycuda.driver": drv, "pycuda.autoprimaryctx": apc}


@pytest.fixture
def pycuda_backend(monkeypatch):
    for name, mod in fake_pycuda().items():
        monkeypatch.setitem(sys.modules, name, mod)
    from audit.runtime._pycuda import PyCudaBackend

    LAUNCHES.clear()
    return PyCudaBackend(helper_cubin="helpers.cubin")


def test_pycuda_memory_fills_and_device_side_counts(pycuda_backend):
    be = pycuda_backend
    p = be.alloc(64)
    be.h2d(p, np.arange(16, dtype=np.float32))
    assert be.d2h(p, 64).view(np.float32).tolist() == list(range(16))
    be.fill(p, (0x7FC0DEAD).to_bytes(4, "little"), 16)
    assert be.count_masked(p, 64, 4, 0xFFFFFFFF, 0x7FC0DEAD) == 16
    assert LAUNCHES[-1][0] == "wireup_count_masked_u32" and LAUNCHES[-1][2] == (1, 1, 1)
    be.fill(p, (0x7FF8DEADDEADDEAD).to_bytes(8, "little"), 8)  # two strided 32-bit memsets
    assert (be.d2h(p, 64).view(np.uint64) == 0x7FF8DEADDEADDEAD).all()
    assert be.count_masked(p, 64, 8, (1 << 64) - 1, 0x7FF8DEADDEADDEAD) == 8
    data = np.random.default_rng(0).integers(0, 255, 63, dtype=np.uint8)
    be.h2d(p, data)
    assert be.hash(p, 63) == EmulatedBackend.hash(MEM, p, 63)  # device words + host tail == host fallback


def test_pycuda_fills_go_in_chunks_below_32_bit_counts(pycuda_backend, monkeypatch):
    be = pycuda_backend
    calls = []
    monkeypatch.setattr(be, "_CHUNK", 5)
    monkeypatch.setattr(be.drv, "memset_d32", lambda p, v, n: calls.append((p, n)) or _fill(p, v, n, 4))
    p = be.alloc(4 * 12)
    be.fill(p, b"\x01\x02\x03\x04", 12)
    assert [n for _, n in calls] == [5, 5, 2] and [q - p for q, _ in calls] == [0, 20, 40]


def test_pycuda_launch_arguments_and_errors(pycuda_backend):
    be = pycuda_backend
    mod = be.load_module("k.cubin")
    fn = be.get_function(mod, "k")
    be.launch(fn, (2, 1, 1), (256, 1, 1), 64 * 1024, [Arg("ptr", 0), Arg("i32", 7), Arg("i64", 1 << 40), Arg("u32", 3), Arg("f32", 0.5), Arg("f64", 0.25)])
    name, args, grid, block, shared = LAUNCHES[-1]
    assert [type(a) for a in args] == [np.uint64, np.int32, np.int64, np.uint32, np.float32, np.float64]
    assert (grid, block, shared) == ((2, 1, 1), (256, 1, 1), 65536)
    assert fn.attrs == {"MAX_DYNAMIC_SHARED_SIZE_BYTES": 65536}  # more than 48 KiB of dynamic shared memory is opted in
    be.drv.fail_next_sync = True
    with pytest.raises(DeviceError) as err:
        be.synchronize()
    assert err.value.sticky and "illegal memory access" in str(err.value)
    with pytest.raises(DeviceError, match="named symbol not found"):
        be.get_function(mod, "missing")
    info = be.device_info()
    assert info == {"name": "NVIDIA H200", "compute_capability": "9.0", "memory_bytes": 141 << 30,
                    "driver_version": "13.0", "runtime_version": "driver API; PyCUDA built against CUDA 13.0.0"}  # fmt: skip
    assert be.version() == "pycuda 2026.1" and be.free_memory() == 100 << 30
    assert be.elapsed(be.timer()) == pytest.approx(0.25e-3)


def test_pycuda_capture_uses_the_driver_api_on_the_stream_handle(pycuda_backend, monkeypatch):
    import audit.runtime._cuda_graph as cg

    seen = []

    class Cap:
        def __init__(self, handle):
            seen.append(handle)

        def begin(self):
            seen.append("begin")

        def end(self):
            seen.append("end")
            return "graph"

    monkeypatch.setattr(cg, "DriverCapture", Cap)
    be = pycuda_backend
    be.begin_capture()
    be.memset8(be.alloc(8), 0, 8, capture=True)
    assert be.end_capture() == "graph"
    assert seen == [0x5EED, "begin", "end"]


def fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.__version__ = "14.2.0"

    class CUDARuntimeError(Exception):
        pass

    class CUDADriverError(Exception):
        pass

    rt = types.SimpleNamespace(
        CUDARuntimeError=CUDARuntimeError, memcpyHostToDevice=1, memcpyDeviceToHost=2, memcpyDeviceToDevice=3,
        malloc=lambda n: MEM.alloc(n), free=lambda p: MEM.free(p),
        memsetAsync=lambda p, v, n, s: MEM.memset8(p, v, n),
        getDeviceProperties=lambda d: {"name": b"NVIDIA H200", "major": 9, "minor": 0, "totalGlobalMem": 141 << 30},
        driverGetVersion=lambda: 13000, runtimeGetVersion=lambda: 12090, memGetInfo=lambda: (1 << 30, 2 << 30),
    )  # fmt: skip

    def memcpy(dst, src, n, kind):
        if kind == 1:
            MEM.h2d(dst, np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * n).from_address(src)))
        elif kind == 2:
            np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * n).from_address(dst))[:] = MEM.d2h(src, n)
        else:
            MEM.d2d(dst, src, n)

    rt.memcpy = memcpy

    class Stream:
        ptr = 0xC0FFEE

        def __init__(self, non_blocking=False):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def synchronize(self):
            pass

    class RawKernel:
        def __init__(self, name):
            self.name = name

        def __call__(self, grid, block, args, shared_mem=0):
            assert all(isinstance(a, np.generic) for a in args)
            LAUNCHES.append((self.name, args, grid, block, shared_mem))
            if self.name.startswith("wireup_"):
                _helper(self.name, args)

    class RawModule:
        def __init__(self, path=None):
            self.path = path

        def get_function(self, name):
            return RawKernel(name)

    class UnownedMemory:
        def __init__(self, ptr, size, owner):
            self.ptr, self.size = ptr, size

    class MemoryPointer:
        def __init__(self, mem, off):
            self.mem, self.off = mem, off

    class ndarray:
        def __init__(self, shape, dtype, memptr):
            self.shape, self.dtype, self.memptr = shape, np.dtype(dtype), memptr

        def fill(self, value):
            MEM.fill(self.memptr.mem.ptr, int(value).to_bytes(self.dtype.itemsize, "little"), self.shape[0])

    cp.cuda = types.SimpleNamespace(
        runtime=rt, driver=types.SimpleNamespace(CUDADriverError=CUDADriverError), Device=lambda i: types.SimpleNamespace(use=lambda: None),
        Stream=Stream, UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer,
        Event=lambda: types.SimpleNamespace(record=lambda s=None: None, synchronize=lambda: None), get_elapsed_time=lambda a, b: 0.5,
    )  # fmt: skip
    cp.RawModule, cp.ndarray = RawModule, ndarray
    return cp


@pytest.fixture
def cupy_backend(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    from audit.runtime._cupy import CupyBackend

    LAUNCHES.clear()
    return CupyBackend(helper_cubin="helpers.cubin")


def test_cupy_memory_fills_counts_and_launches(cupy_backend):
    be = cupy_backend
    p = be.alloc(40)
    be.h2d(p, np.arange(10, dtype=np.int32))
    assert be.d2h(p, 40).view(np.int32).tolist() == list(range(10))
    be.fill(p, (0x5A5AA5A5).to_bytes(4, "little"), 10)
    assert be.count_masked(p, 40, 4, 0xFFFFFFFF, 0x5A5AA5A5) == 10
    be.memset8(p, 0, 40)
    assert be.count_masked(p, 40, 4, 0xFFFFFFFF, 0) == 10
    assert be.hash(p, 40) == EmulatedBackend.hash(MEM, p, 40)
    fn = be.get_function(be.load_module("k.cubin"), "k")
    be.launch(fn, (3, 1, 1), (128, 1, 1), 0, [Arg("ptr", p), Arg("i32", -1), Arg("f32", 1.5)])
    name, args, grid, block, shared = LAUNCHES[-1]
    assert name == "k" and [type(a) for a in args] == [np.uint64, np.int32, np.float32] and int(args[0]) == p
    assert be.device_info()["runtime_version"] == "12.9" and be.version() == "cupy 14.2.0"
    assert be.elapsed(be.timer()) == pytest.approx(0.5e-3)


@pytest.mark.parametrize("which", ["pycuda", "cupy"])
def test_hashes_of_several_buffers_in_one_round_trip(which, monkeypatch):
    """``hash_many``: one helper launch per buffer into its own result slot, one synchronise, one copy of
    the results; each equals the buffer's own ``hash`` (the device words plus a host tail)."""
    if which == "pycuda":
        for name, mod in fake_pycuda().items():
            monkeypatch.setitem(sys.modules, name, mod)
        from audit.runtime._pycuda import PyCudaBackend as cls
    else:
        monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
        from audit.runtime._cupy import CupyBackend as cls
    be = cls(helper_cubin="helpers.cubin")
    rng = np.random.default_rng(2)
    spans = []
    for n in (64, 63, 4096, 3, 0, 40):
        p = be.alloc(max(n, 1))
        be.h2d(p, rng.integers(0, 255, max(n, 1), dtype=np.uint8))
        spans.append((p, n))
    want = [EmulatedBackend.hash(MEM, p, n) if n else 0 for p, n in spans]
    LAUNCHES.clear()
    assert be.hash_many(spans) == want
    hashes = [x for x in LAUNCHES if x[0] == "wireup_hash_u32"]
    assert len(hashes) == 4  # 64, 63, 4096 and 40 bytes; 3 bytes is a host tail only, 0 nothing
    slots = sorted(int(x[1][-1]) for x in hashes)
    assert len(set(slots)) == 4 and slots[-1] - slots[0] == 24  # four adjacent 8-byte result slots
    assert be.hash_many(spans[::-1]) == want[::-1]  # the results buffer is reused, zeroed each time


@pytest.mark.parametrize("which", ["pycuda", "cupy"])
def test_counts_of_several_buffers_in_one_round_trip(which, monkeypatch):
    """``count_many``: poison and NaN counts of several buffers (words of 2, 4 and 8 bytes) by one helper
    launch each into its own result slot; each equals ``count_masked`` of that buffer."""
    if which == "pycuda":
        for name, mod in fake_pycuda().items():
            monkeypatch.setitem(sys.modules, name, mod)
        from audit.runtime._pycuda import PyCudaBackend as cls
    else:
        monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
        from audit.runtime._cupy import CupyBackend as cls
    be = cls(helper_cubin="helpers.cubin")
    a = be.alloc(40)
    be.h2d(a, np.array([0x7FC0DEAD] * 7 + [1, 2, 0x7F800000], np.uint32))
    b = be.alloc(64)
    be.h2d(b, np.array([0x7FF8DEADDEADDEAD] * 3 + [0] * 5, np.uint64))
    c = be.alloc(8)
    be.h2d(c, np.array([0x7E5A, 0x7C00, 1, 0x7E5A], np.uint16))
    calls = [(a, 40, 4, 0xFFFFFFFF, 0x7FC0DEAD), (b, 64, 8, (1 << 64) - 1, 0x7FF8DEADDEADDEAD), (a, 40, 4, 0x7F800000, 0x7F800000),
             (c, 8, 2, 0xFFFF, 0x7E5A), (a + 2, 8, 4, 0xFFFFFFFF, 0), (c, 0, 2, 0xFFFF, 0)]  # fmt: skip
    want = [7, 3, 8, 2, EmulatedBackend.count_masked(MEM, a + 2, 8, 4, 0xFFFFFFFF, 0), 0]
    LAUNCHES.clear()
    assert be.count_many(calls) == want
    counts = [x for x in LAUNCHES if x[0].startswith("wireup_count_masked")]
    assert [x[0][-3:] for x in counts] == ["u32", "u64", "u32", "u16"]  # the misaligned one on the host, the empty one nowhere
    assert len({int(x[1][-1]) for x in counts}) == 4
    assert be.count_many(calls[::-1]) == want[::-1]
