"""Run a CUDA kernel's own source on the host: every thread of a block is a fiber (``ucontext``), and
``__syncthreads()`` switches to the next fiber until every live thread of the block has reached it; blocks run one
after the other. ``__shared__`` becomes a function-level ``static`` (one copy shared by the block's fibers);
``__ldg`` a plain load; float arithmetic is the host's IEEE single precision (x86-64 SSE, no contraction) and
``fmaf`` the C library's correctly rounded fused multiply-add, which are the operations the device performs for
the kernels run here (explicit ``fmaf`` chains, plain products, sums and IEEE division). Between two barriers a
block's threads run one after the other, one legal schedule of a race-free kernel.

A barrier reached by some threads of a block while others have returned is reported (``barrier_divergence``):
on the device that is undefined behaviour.

Used by tests/test_bench_to_bwd.py to run both trade-outcome backward kernels (the shipped one and the candidate,
with each build's defines) through ``benchmarks/gpu_to_bwd.py``'s own checks on the CPU.
"""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

SHIM = r"""
#include <ucontext.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <vector>
struct float4 { float x, y, z, w; };
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct simt_dim3 { unsigned x, y, z; };
static simt_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
static ucontext_t simt_sched;
static std::vector<ucontext_t> simt_ctx;
static std::vector<int> simt_state;  // 0 runnable, 1 at a barrier, 2 returned
static int simt_cur;
static std::function<void()> simt_body;
static void __syncthreads() {
    simt_state[simt_cur] = 1;
    swapcontext(&simt_ctx[simt_cur], &simt_sched);
}
static void simt_trampoline() {
    simt_body();
    simt_state[simt_cur] = 2;
}
"""

LAUNCHER = r"""
static std::vector<std::vector<char>> simt_stacks;
// One launch: grid (gx, 1, 1) x block (bx, 1, 1); returns the number of blocks whose threads split at a barrier.
extern "C" long simt_launch(int gx, int bx, void** p, float alpha, int B, int SH2, int H, int K) {
    const size_t kStack = 256 * 1024;
    simt_ctx.assign(bx, ucontext_t{});
    simt_state.assign(bx, 0);
    if ((int)simt_stacks.size() < bx) simt_stacks.resize(bx, std::vector<char>(kStack));
    gridDim = {(unsigned)gx, 1, 1};
    blockDim = {(unsigned)bx, 1, 1};
    simt_body = [&] {
        SIMT_ENTRY((const float*)p[0], (const float*)p[1], (const float*)p[2], (const int*)p[3], (const int*)p[4],
                   (const float*)p[5], (const float*)p[6], (float*)p[7], (float*)p[8], (float*)p[9], (float*)p[10],
                   (float*)p[11], (float*)p[12], alpha, B, SH2, H, K);
    };
    long divergent = 0;
    for (int b = 0; b < gx; ++b) {
        blockIdx = {(unsigned)b, 0, 0};
        for (int t = 0; t < bx; ++t) {
            getcontext(&simt_ctx[t]);
            simt_ctx[t].uc_stack.ss_sp = simt_stacks[t].data();
            simt_ctx[t].uc_stack.ss_size = kStack;
            simt_ctx[t].uc_link = &simt_sched;
            makecontext(&simt_ctx[t], simt_trampoline, 0);
            simt_state[t] = 0;
        }
        for (;;) {
            for (int t = 0; t < bx; ++t) {
                if (simt_state[t] != 0) continue;
                simt_cur = t;
                threadIdx = {(unsigned)t, 0, 0};
                swapcontext(&simt_sched, &simt_ctx[t]);
            }
            int waiting = 0, done = 0;
            for (int t = 0; t < bx; ++t) waiting += simt_state[t] == 1, done += simt_state[t] == 2;
            if (done == bx) break;
            if (done > 0) {  // some threads returned, others wait at a barrier: undefined on the device
                ++divergent;
                break;  // the waiting fibers are abandoned (their stacks are reused by the next block)
            }
            for (int t = 0; t < bx; ++t) simt_state[t] = 0;  // every thread reached the barrier
        }
    }
    return divergent;
}
"""

# the kernels' parameter list, shared by aux_trade_outcome_backward and its candidate
N_POINTERS = 13


def build(source: str | Path, entry: str, out_dir: Path, defines: tuple[str, ...] = ()) -> ctypes.CDLL:
    """``source`` (a .cu file; its quoted includes resolved from its own folder and kernels/) compiled with g++
    into a shared library whose ``simt_launch`` runs ``entry``; cached in ``out_dir`` by content."""
    source = Path(source)
    if not source.is_absolute():
        source = REPO / source
    unit = f'{SHIM}\n#include "{source}"\n#define SIMT_ENTRY {entry}\n{LAUNCHER}'
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-Wno-unknown-pragmas",
             f"-I{source.parent}", f"-I{REPO / 'kernels'}", *defines]  # fmt: skip
    deps = source.read_text() + (REPO / "kernels" / "aux_common.cuh").read_text()
    key = hashlib.sha256((unit + deps + " ".join(flags)).encode()).hexdigest()[:16]
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / f"simt_{entry}_{key}.so"
    if not lib.exists():
        cpp = out_dir / f"simt_{entry}_{key}.cpp"
        cpp.write_text(unit)
        r = subprocess.run(["g++", *flags, "-o", str(lib), str(cpp)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"g++ failed on {source}:\n{r.stderr[-4000:]}")
    dll = ctypes.CDLL(str(lib))
    dll.simt_launch.restype = ctypes.c_long
    dll.simt_launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_float,
                                ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]  # fmt: skip
    return dll


class Kernel:
    """A CuPy ``RawKernel``-like callable: ``kernel(grid, block, args, stream=None)`` with the trade-outcome
    backward's 18 arguments (numpy arrays, ``np.uint64(0)`` for NULL, numpy scalars). ``divergent`` counts the
    blocks that split at a barrier over every launch."""

    def __init__(self, dll: ctypes.CDLL):
        self.dll = dll
        self.divergent = 0
        self.launches = 0

    @staticmethod
    def _pointer(a) -> int | None:
        if isinstance(a, np.ndarray):
            return a.ctypes.data if a.size else None
        if isinstance(a, np.uint64):
            return int(a) or None
        raise TypeError(f"not a pointer argument: {type(a).__name__}")

    def __call__(self, grid, block, args, stream=None) -> None:
        assert tuple(grid[1:]) == (1, 1) and tuple(block[1:]) == (1, 1), (grid, block)
        ptrs = (ctypes.c_void_p * N_POINTERS)(*[self._pointer(a) for a in args[:N_POINTERS]])
        alpha, B, SH2, H, K = args[N_POINTERS:]
        self.divergent += self.dll.simt_launch(int(grid[0]), int(block[0]), ptrs, float(alpha), int(B), int(SH2), int(H), int(K))
        self.launches += 1
