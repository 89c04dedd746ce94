"""Does compute-sanitizer memcheck report a cp.async whose source size is 0 (a zero-fill that reads nothing)?

CUTLASS's predicated multistage iterators issue `cp.async.ca.shared.global [s], [g], 4, src_size` for every
element of a tile, with src_size 0 where the predicate is off and `g` computed anyway, so past a buffer's end
at the M, N and K edges. One process per case, each under memcheck (the script runs itself):

    python3 tests/gpu/zfill_probe.py              # the table: case, what memcheck said
    python3 tests/gpu/zfill_probe.py CASE         # one case, no sanitizer (what the table runs)

Cases (a 1000-float cudaMalloc allocation, no memory pool, 32 threads each copying one float at src + off + tid;
the cg16 cases 4 floats at src + off + 4 tid): in_bounds (off 0, 4 bytes), past_end_full (off 1000, 4 bytes: a
real over-read, memcheck must report it), past_end_zero (off 1000, 0 bytes), far_zero (off 2^20, 0 bytes); the
same with CUTLASS's L2 prefetch hint (`cp.async.ca.shared.global.L2::128B`, which CUTLASS 4.2 emits on sm_75 and
later: CUTLASS_ENABLE_L2_PREFETCH in cutlass/arch/memory.h), suffix _l2; and the 16-byte `.cg` copy with the
hint (cutlass::arch::cp_async_zfill<16, CacheOperation::Global>), prefix cg16_.

On 5 December 2026 (H100, compute-sanitizer of CUDA 13.0) the four cases without the hint: memcheck reports
past_end_full only (28 errors), none of the zero-byte copies.
"""
import subprocess
import sys

_BASE = {
    "in_bounds": (0, 4),
    "past_end_full": (1000, 4),
    "past_end_zero": (1000, 0),
    "far_zero": (1 << 20, 0),
}
# case -> (kernel, offset in floats, source bytes per thread)
CASES = {name: ("probe", off, size) for name, (off, size) in _BASE.items()}
CASES.update({f"{name}_l2": ("probe_l2", off, size) for name, (off, size) in _BASE.items()})
CASES.update({f"cg16_{name}": ("probe_cg16", off, 4 * size) for name, (off, size) in _BASE.items()})
_KERNEL = r"""
extern "C" __global__ void NAME(const float* src, float* dst, long long off, int srcsize) {
    __shared__ __align__(16) float s[32 * WIDTH];
    unsigned sp = (unsigned)__cvta_generic_to_shared(&s[WIDTH * threadIdx.x]);
    const float* g = src + off + WIDTH * threadIdx.x;
    asm volatile("COPY [%0], [%1], BYTES, %2;\n" ::"r"(sp), "l"(g), "r"(srcsize));
    asm volatile("cp.async.wait_all;\n" ::);
    __syncthreads();
    dst[threadIdx.x] = s[WIDTH * threadIdx.x];
}
"""
# kernel -> (the copy, floats per thread)
_COPIES = {"probe": ("cp.async.ca.shared.global", 1), "probe_l2": ("cp.async.ca.shared.global.L2::128B", 1),
           "probe_cg16": ("cp.async.cg.shared.global.L2::128B", 4)}
SRC = "".join(_KERNEL.replace("NAME", name).replace("COPY", copy).replace("WIDTH", str(width)).replace("BYTES", str(4 * width))
              for name, (copy, width) in _COPIES.items())


def one(case: str) -> None:
    import cupy as cp

    cp.cuda.set_allocator(None)  # plain cudaMalloc: memcheck sees the 4000-byte allocation itself
    kernel, off, size = CASES[case]
    src = cp.arange(1000, dtype=cp.float32)
    dst = cp.full(32, -1.0, dtype=cp.float32)
    k = cp.RawModule(code=SRC, options=("-arch=sm_90",)).get_function(kernel)
    k((1,), (32,), (src, dst, cp.int64(off), cp.int32(size)))
    cp.cuda.Device().synchronize()
    print(case, "dst[:4] =", dst[:4].get().tolist())


def table() -> int:
    print("case                   off      src_size  memcheck")
    for case, (_, off, size) in CASES.items():
        p = subprocess.run(["compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "9", sys.executable,
                            __file__, case], capture_output=True, text=True, timeout=60)
        errs = [ln for ln in p.stdout.splitlines() if "Invalid" in ln or "out of bounds" in ln or "nearest" in ln]
        summary = [ln for ln in p.stdout.splitlines() if "ERROR SUMMARY" in ln]
        print(f"{case:22} {off:<8} {size:<9} rc={p.returncode} {summary[-1].strip() if summary else '(no summary)'}")
        for ln in errs[:3]:
            print("    ", ln.strip())
        if p.returncode not in (0, 9):
            print("    stderr:", p.stderr.strip()[-400:])
    return 0


if __name__ == "__main__":
    sys.exit(one(sys.argv[1]) if len(sys.argv) > 1 else table())
