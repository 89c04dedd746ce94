"""Helper kernels the GPU backends use to inspect large buffers without copying them to the host.

Counting poison words, non-finite or non-zero values and hashing a buffer run on the device: a
[65536, 256, 256] float32 partial is 17 GB, which the host could neither copy nor scan in time. The
source is compiled once per architecture with nvcc into the wireup cache; where nvcc is missing the
backends fall back to chunked host copies (slow, but correct).

The hash is ``sum_i splitmix64(i << 32 | word_i) mod 2**64``: addition commutes, so atomics in any
order give the same value (:func:`audit.runtime._backend.hash_words` computes it on the host).

>>> path = helper_cubin(cfg, "sm_90")           # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

HELPER_SOURCE = r"""
// wireup verification helpers: device-side counts and hashes over raw words.
#include <stdint.h>

template <typename T>
__device__ __forceinline__ void count_masked(const T* __restrict__ p, unsigned long long n, T mask, T value,
                                             unsigned long long* out) {
    unsigned long long c = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        c += ((p[i] & mask) == value) ? 1ull : 0ull;
    for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c != 0) atomicAdd(out, c);
}

extern "C" __global__ void wireup_count_masked_u8(const uint8_t* p, unsigned long long n, unsigned mask,
                                                  unsigned value, unsigned long long* out) {
    count_masked<uint8_t>(p, n, (uint8_t)mask, (uint8_t)value, out);
}
extern "C" __global__ void wireup_count_masked_u16(const uint16_t* p, unsigned long long n, unsigned mask,
                                                   unsigned value, unsigned long long* out) {
    count_masked<uint16_t>(p, n, (uint16_t)mask, (uint16_t)value, out);
}
extern "C" __global__ void wireup_count_masked_u32(const uint32_t* p, unsigned long long n, unsigned mask,
                                                   unsigned value, unsigned long long* out) {
    count_masked<uint32_t>(p, n, mask, value, out);
}
extern "C" __global__ void wireup_count_masked_u64(const unsigned long long* p, unsigned long long n,
                                                   unsigned long long mask, unsigned long long value,
                                                   unsigned long long* out) {
    count_masked<unsigned long long>(p, n, mask, value, out);
}

extern "C" __global__ void wireup_hash_u32(const uint32_t* __restrict__ p, unsigned long long n,
                                           unsigned long long first, unsigned long long* out) {
    unsigned long long h = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long x = ((first + i) << 32) | (unsigned long long)p[i];
        x += 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        x ^= x >> 31;
        h += x;
    }
    for (int o = 16; o > 0; o >>= 1) h += __shfl_down_sync(0xffffffffu, h, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, h);
}
"""

HELPER_THREADS = 256
HELPER_MAX_BLOCKS = 8192


def helper_blocks(n: int) -> int:
    return max(1, min(HELPER_MAX_BLOCKS, -(-n // HELPER_THREADS)))


def helper_cubin(cache_dir: Path, arch: str, nvcc: str | None = None) -> tuple[Path | None, str]:
    """Compile the helpers for ``arch`` into ``cache_dir`` (once); returns (cubin or None, why not)."""
    nvcc = nvcc or _find_nvcc()
    if nvcc is None:
        return None, "nvcc not found: buffers are inspected through host copies"
    key = hashlib.sha256((HELPER_SOURCE + arch).encode()).hexdigest()[:16]
    folder = Path(cache_dir) / "runtime"
    cubin = folder / f"helpers-{arch}-{key}.cubin"
    if cubin.is_file():
        return cubin, ""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f"helpers-{key}.cu"
    src.write_text(HELPER_SOURCE)
    tmp = cubin.with_suffix(".tmp.cubin")
    try:
        proc = subprocess.run(
            [nvcc, "-cubin", f"-arch={arch}", "-O3", "-o", str(tmp), str(src)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"nvcc failed on the helper kernels ({exc})"
    if proc.returncode != 0 or not tmp.is_file():
        return None, f"nvcc failed on the helper kernels: {proc.stderr.strip()[-400:]}"
    tmp.replace(cubin)
    return cubin, ""


def _find_nvcc() -> str | None:
    from ..compile import find_nvcc

    p = find_nvcc()
    return str(p) if p else None
