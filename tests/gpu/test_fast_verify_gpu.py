"""GPU tests of the host-side fast paths of wireup verify (issue 15), marked ``gpu``.

On each GPU backend (PyCUDA, CuPy): the guard bands of a small buffer (read back in one copy of the
whole allocation) and of a large one (two copies) find a changed byte on either side, and the shared
read-only patterns restore them; sampled rows fetched one copy per run of consecutive rows equal the
rows of a whole download; the hashes of several buffers in one round trip (``hash_many``) equal each
buffer's own device hash and the host's. The CPU versions on the emulated backend are in tests/test_fast_verify.py. Run
on the device machine:

    python3 -m pytest -q -m gpu tests/gpu/test_fast_verify_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest

from audit.runtime._backend import Backend, BackendUnavailable
from audit.runtime._helpers import helper_cubin
from audit.runtime._memory import SMALL_BUFFER, Arena
from audit.runtime._open import open_backend

pytestmark = pytest.mark.gpu


@pytest.fixture(params=["pycuda", "cupy"], scope="module")
def backend(request, tmp_path_factory):
    """The backend with its helper cubin (device-side counts and hashes), built for this device."""
    try:
        probe = open_backend(request.param)
    except BackendUnavailable as exc:
        pytest.skip(f"{request.param}: {exc}")
    arch = "sm_" + probe.device_info()["compute_capability"].replace(".", "")
    probe.close()
    cubin, why = helper_cubin(tmp_path_factory.mktemp("helpers"), arch)
    assert cubin is not None, why
    be = open_backend(request.param, helper_cubin=str(cubin))
    assert be._helpers, "the helper cubin did not load"
    yield be
    be.close()


@pytest.mark.parametrize("nbytes", [4, SMALL_BUFFER, SMALL_BUFFER + 4, 1 << 22])
@pytest.mark.parametrize("side", ["before", "after"])
def test_guard_damage_on_the_device(backend, nbytes, side):
    arena = Arena(backend)
    try:
        arena.alloc("neighbour", np.float32, (5,))
        buf = arena.alloc("x", np.uint8, (nbytes,))
        assert arena.guard_damage() == []
        at = buf.ptr - 1 if side == "before" else buf.ptr + nbytes + 3
        old = backend.d2h(at, 1)
        backend.h2d(at, np.array([old[0] ^ 0x5A], np.uint8))
        damage = arena.guard_damage()
        assert [(d.buffer, d.side, d.count, d.offset) for d in damage] == [("x", side, 1, -1 if side == "before" else nbytes + 3)]
        arena.restore_guards()  # writes the shared read-only patterns
        assert arena.guard_damage() == []
    finally:
        arena.free_all()


def test_sampled_rows_on_the_device(backend):
    arena = Arena(backend)
    try:
        data = np.random.default_rng(0).standard_normal((4103, 33)).astype(np.float32)
        buf = arena.alloc("h", np.float32, data.shape)
        arena.upload(buf, data)
        rows = np.array(sorted({0, 31, 32, 63, 64, 127, 128, 255, 256, 1000, 1001, 1002, 4102}))
        assert np.array_equal(arena.download_rows(buf, rows), data[rows])
        assert np.array_equal(arena.download(buf)[rows], data[rows])
    finally:
        arena.free_all()


def test_hash_many_on_the_device(backend):
    rng = np.random.default_rng(1)
    arena = Arena(backend)
    try:
        bufs = []
        for i, n in enumerate((64, 63, 4096 * 37 + 2, 3, 0, 1 << 20)):
            b = arena.alloc(f"b{i}", np.uint8, (n,))
            arena.upload(b, rng.integers(0, 256, n, dtype=np.uint8))
            bufs.append(b)
        many = arena.hash_many(bufs)
        assert many == [arena.hash(b) for b in bufs]
        assert many == [Backend.hash(backend, b.ptr, b.nbytes) if b.nbytes else 0 for b in bufs]  # the host's hash
        assert arena.hash_many(bufs[::-1]) == many[::-1]
    finally:
        arena.free_all()


def test_count_many_on_the_device(backend):
    arena = Arena(backend)
    try:
        f32 = arena.alloc("f32", np.float32, (4103, 5))
        f64 = arena.alloc("f64", np.float64, (300,))
        i32 = arena.alloc("i32", np.int32, (77,))
        empty = arena.alloc("empty", np.float32, (0,))
        for b in (f32, f64, i32):
            arena.poison(b, 0)
        data = np.ones((4103, 5), np.float32)
        data[::7] = np.nan
        data[3, 1] = np.inf
        arena.upload(f32, data)
        bufs = [f32, f64, i32, empty]
        assert arena.count_poison_many(bufs, 0) == [arena.count_poison(b, 0) for b in bufs] == [0, 300, 77, 0]
        want = [int((~np.isfinite(data)).sum()), 300, 0, 0]  # the float64 poison is a NaN; integers never are
        assert arena.count_nonfinite_many(bufs) == [arena.count_nonfinite(b) for b in bufs] == want
    finally:
        arena.free_all()
