"""The emulated backend: numpy "device" memory and Python "kernels", for CPU tests only.

Device memory is one uint8 array per allocation at a fake 64-bit address (with unmapped gaps between
allocations, so a stray pointer raises an illegal-address error as the GPU would). A "kernel" is a
Python callable registered per symbol, receiving an :class:`EmulatedLaunch`; the default kernel is the
kernel's own float64 reference run on the launch's memory and stored in the parameter dtypes (float32).
Everything around the kernels (inputs, poison, guard bands, comparisons, properties, chains, graph
capture and replay, evidence, findings) is the real verification pipeline, so tests can inject a broken
kernel and watch the matching check fail.

>>> be = EmulatedBackend(kernels={"aux_trunk_forward": my_broken_forward})   # doctest: +SKIP
"""

from __future__ import annotations

import bisect
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ._backend import WORD_TYPES, Arg, Backend, DeviceError, Graph, LaunchMeta, count_words

KernelFn = Callable[["EmulatedLaunch"], None]
_GAP = 1 << 20
_BASE = 0x7F00_0000_0000


class EmulatedLaunch:
    """One launch as an emulated kernel sees it: geometry, typed args, and access to device memory.

    ``tensor(name)`` is a writable numpy view of the buffer bound to a tensor parameter, shaped as the
    contract says (None for NULL); ``scalar(name)`` its by-value argument; ``run_reference()`` the
    default behaviour; ``replay`` is True when the launch runs from a CUDA-graph replay.
    """

    def __init__(self, backend: EmulatedBackend, symbol: str, grid, block, shared: int, args: list[Arg],
                 meta: LaunchMeta | None, replay: bool = False):  # fmt: skip
        self.backend = backend
        self.symbol = symbol
        self.grid = grid
        self.block = block
        self.shared = shared
        self.args = list(args)
        self.meta = meta or LaunchMeta()
        self.replay = replay

    # -- memory -------------------------------------------------------------------------------------
    def view(self, ptr: int, dtype: Any, count: int) -> np.ndarray:
        """``count`` elements of ``dtype`` at ``ptr`` (raises an illegal-address DeviceError outside any allocation)."""
        dt = np.dtype(dtype)
        arr, off = self.backend._locate(ptr, count * dt.itemsize)
        return arr[off : off + count * dt.itemsize].view(dt)

    def _param_index(self, name: str) -> int:
        for i, p in enumerate(self.meta.kernel.params):
            if p.name == name:
                return i
        raise KeyError(name)

    def arg(self, name: str) -> Arg:
        return self.args[self._param_index(name)]

    def tensor(self, name: str) -> np.ndarray | None:
        from ._plan import np_dtype, shape_of

        p = self.meta.kernel.params[self._param_index(name)]
        ptr = int(self.args[self._param_index(name)].value)
        if ptr == 0:
            return None
        if p.kind == "isv":
            return self.view(ptr, np.float32, self.meta.isv_dim)
        shape = shape_of(p.shape, self.meta.env)
        return self.view(ptr, np_dtype(p.dtype), int(np.prod(shape, dtype=np.int64))).reshape(shape)

    def scalar(self, name: str) -> int | float:
        return self.arg(name).scalar.item()

    # -- the default behaviour ----------------------------------------------------------------------
    def reference_inputs(self) -> dict[str, Any]:
        """Keyword arguments for the float64 reference, read from the launch's memory and arguments."""
        kwargs: dict[str, Any] = {}
        for p, a in zip(self.meta.kernel.params, self.args):
            if p.kind == "scalar":
                kwargs[p.name] = a.scalar.item()
            elif p.kind == "isv":
                kwargs[p.name] = self.tensor(p.name).astype(np.float64)
            elif int(a.value) != 0 and (p.role != "out" or self.meta.kernel.alias_of(p.name)):
                t = self.tensor(p.name)  # an aliased output is its partner's memory: the reference gets it too
                kwargs[p.name] = t.astype(np.int64) if t.dtype.kind in "iu" else t.astype(np.float64)
        optional = [p for p in self.meta.kernel.tensors if p.optional]
        kwargs["include_optional"] = all(int(self.arg(p.name).value) != 0 for p in optional)
        return kwargs

    def run_reference(self, **overrides: Any) -> dict[str, np.ndarray]:
        if self.meta.reference is None:
            raise DeviceError(f'emulated kernel "{self.symbol}" has no float64 reference to run', sticky=True)
        kwargs = self.reference_inputs()
        kwargs.update(overrides)
        return self.meta.reference(**kwargs)

    def write_outputs(self, result: Mapping[str, Any]) -> None:
        """Store reference results in the written parameters (cast to their dtypes)."""
        from ._plan import write_index, written_part

        for p, a in zip(self.meta.kernel.params, self.args):
            if p.name not in result or p.kind == "scalar" or int(a.value) == 0:
                continue
            if p.kind == "tensor" and p.role == "in":
                continue
            view = self.tensor(p.name)
            val = np.asarray(result[p.name])
            if view.dtype.kind in "iu":
                val = np.rint(val) if val.dtype.kind == "f" else val
            index = write_index(p, self.meta.env) if p.kind == "tensor" else None
            if index is not None:  # a partial write stores its range only, the rest keeps what was there
                view[index] = written_part(view, index, val).astype(view.dtype)
                continue
            view[...] = val.reshape(view.shape).astype(view.dtype)

    def default(self) -> None:
        self.write_outputs(self.run_reference())


def reference_kernel(launch: EmulatedLaunch) -> None:
    """The default emulated kernel: the float64 reference, stored in float32."""
    launch.default()


class _EmulatedGraph(Graph):
    def __init__(self, backend: EmulatedBackend, ops: list[Callable[[], None]]):
        self.backend = backend
        self.ops = ops

    def replay(self) -> None:
        for op in self.ops:
            op()


class _Function:
    def __init__(self, symbol: str, fn: KernelFn):
        self.symbol = symbol
        self.fn = fn


class EmulatedBackend(Backend):
    """See the module docstring. ``kernels`` maps symbols (or contract kernel names) to callables."""

    name = "emulated"

    def __init__(self, kernels: Mapping[str, KernelFn] | None = None, default: KernelFn | None = None, **_: Any):
        self.kernels: dict[str, KernelFn] = dict(kernels or {})
        self.default = default or reference_kernel
        self._mem: dict[int, np.ndarray] = {}
        self._bases: list[int] = []
        self._next = _BASE
        self._capture: list[Callable[[], None]] | None = None
        self._pending: DeviceError | None = None
        self.launches = 0

    def register(self, symbol: str, fn: KernelFn) -> None:
        self.kernels[symbol] = fn

    def version(self) -> str:
        return f"numpy {np.__version__}"

    def device_info(self) -> dict[str, Any]:
        return {
            "name": "emulated (numpy)", "compute_capability": "0.0", "memory_bytes": 0,
            "driver_version": "", "runtime_version": "",
        }  # fmt: skip

    # -- memory -------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        base = self._next
        # uninitialised device memory holds garbage, never convenient zeros
        self._mem[base] = np.full(max(int(nbytes), 1), 0xCD, dtype=np.uint8)
        bisect.insort(self._bases, base)
        self._next = base + ((int(nbytes) + 255) // 256) * 256 + _GAP
        return base

    def free(self, ptr: int) -> None:
        if ptr in self._mem:
            del self._mem[ptr]
            self._bases.remove(ptr)

    def _locate(self, ptr: int, nbytes: int) -> tuple[np.ndarray, int]:
        i = bisect.bisect_right(self._bases, int(ptr)) - 1
        if i >= 0:
            base = self._bases[i]
            arr = self._mem[base]
            off = int(ptr) - base
            if 0 <= off and off + int(nbytes) <= arr.size:
                return arr, off
        raise DeviceError(
            f"an illegal memory access was encountered (address {int(ptr):#x}, {int(nbytes)} bytes)",
            sticky=True, code="CUDA_ERROR_ILLEGAL_ADDRESS",
        )  # fmt: skip

    def _no_capture(self, what: str) -> None:
        if self._capture is not None:
            raise DeviceError(f"{what} is not allowed while a stream capture is open", code="CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")

    def h2d(self, ptr: int, host: np.ndarray) -> None:
        self._no_capture("a host-to-device copy")
        data = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
        arr, off = self._locate(ptr, data.size)
        arr[off : off + data.size] = data

    def d2h(self, ptr: int, nbytes: int) -> np.ndarray:
        self._no_capture("a device-to-host copy")
        arr, off = self._locate(ptr, nbytes)
        return arr[off : off + int(nbytes)].copy()

    def d2d(self, dst: int, src: int, nbytes: int) -> None:
        s, so = self._locate(src, nbytes)
        d, do = self._locate(dst, nbytes)
        d[do : do + nbytes] = s[so : so + nbytes]

    def memset8(self, ptr: int, byte: int, nbytes: int, capture: bool = False) -> None:
        def op() -> None:
            arr, off = self._locate(ptr, nbytes)
            arr[off : off + int(nbytes)] = byte & 0xFF

        if self._capture is not None:
            self._capture.append(op)
        else:
            op()

    def fill(self, ptr: int, pattern: bytes, count: int) -> None:
        self._no_capture("a fill")
        width = len(pattern)
        arr, off = self._locate(ptr, width * count)
        dt = WORD_TYPES[width]
        region = arr[off : off + width * count]
        if off % width == 0:
            region.view(dt)[:] = np.frombuffer(pattern, dt)[0]
        else:
            region.reshape(count, width)[:] = np.frombuffer(pattern, np.uint8)

    def count_masked(self, ptr: int, nbytes: int, width: int, mask: int, value: int) -> int:
        arr, off = self._locate(ptr, nbytes)
        return count_words(arr[off : off + nbytes], width, mask, value)

    # -- modules and launches -----------------------------------------------------------------------
    def load_module(self, path: str) -> Any:
        return str(path)

    def get_function(self, module: Any, symbol: str) -> _Function:
        return _Function(symbol, self.kernels.get(symbol, self.default))

    def function_for(self, symbol: str, kernel_name: str | None = None) -> _Function:
        fn = self.kernels.get(symbol) or (self.kernels.get(kernel_name) if kernel_name else None)
        return _Function(symbol, fn or self.default)

    def launch(self, fn: Any, grid, block, shared: int, args: list[Arg], meta: LaunchMeta | None = None) -> None:
        if meta is not None and meta.kernel is not None and fn.fn is self.default:
            fn = self.function_for(fn.symbol, meta.kernel.name)
        if any(int(g) <= 0 for g in grid) or any(int(b) <= 0 for b in block) or int(np.prod(block)) > 1024:
            raise DeviceError(f"invalid launch configuration grid={tuple(grid)} block={tuple(block)}", code="CUDA_ERROR_INVALID_VALUE")

        def run(replay: bool) -> None:
            launch = EmulatedLaunch(self, fn.symbol, tuple(grid), tuple(block), shared, args, meta, replay)
            try:
                fn.fn(launch)
            except DeviceError as exc:
                self._pending = self._pending or exc
            except Exception as exc:  # noqa: BLE001 - a crashing emulated kernel is a device fault
                tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
                self._pending = self._pending or DeviceError(f"emulated kernel {fn.symbol} raised {tb}", sticky=True)
            self.launches += 1

        if self._capture is not None:
            self._capture.append(lambda: run(True))
        else:
            run(False)

    def synchronize(self) -> None:
        if self._pending is not None:
            exc, self._pending = self._pending, None
            raise exc

    def begin_capture(self) -> None:
        if self._capture is not None:
            raise DeviceError("a stream capture is already open")
        self._capture = []

    def end_capture(self) -> Graph:
        if self._capture is None:
            raise DeviceError("no stream capture is open")
        ops, self._capture = self._capture, None
        return _EmulatedGraph(self, ops)
