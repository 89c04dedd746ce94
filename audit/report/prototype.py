"""The C prototype of a kernel, reconstructed from its contract.

The report shows what the contract says the kernel's signature is, in the form the ``.cu`` file writes
it, so a reviewer can hold the two side by side. Inputs (role ``in``) are ``const``; every pointer is
``__restrict__`` (the shipped kernels' convention); the ISV pointer is ``const`` when the kernel writes
no slot.

>>> print(c_prototype(cs.kernel("strided_gather")))        # doctest: +SKIP
extern "C" __global__ void strided_gather(
    const float* __restrict__ src,
    float* __restrict__ dst,
    int B,
    int row_stride,
    int col);
"""

from __future__ import annotations

from ..model import DTYPES, IsvParam, Kernel, Param, ScalarParam, TensorParam


def c_type(dtype: str) -> str:
    """The C spelling of a contract dtype (``i64`` -> ``long long``); unknown dtypes pass through."""
    return DTYPES[dtype][2] if dtype in DTYPES else dtype


def c_param(p: Param, writes_isv: bool = True) -> str:
    """One parameter as C: ``const float* __restrict__ x``, ``int n``."""
    if isinstance(p, TensorParam):
        const = "const " if p.role == "in" else ""
        return f"{const}{c_type(p.dtype)}* __restrict__ {p.name}"
    if isinstance(p, IsvParam):
        const = "" if writes_isv else "const "
        return f"{const}float* __restrict__ {p.name}"
    if isinstance(p, ScalarParam):
        return f"{c_type(p.dtype)} {p.name}"
    return f"/* ? */ {getattr(p, 'name', '?')}"


def c_prototype(kernel: Kernel) -> str:
    """The kernel's declaration, one parameter per line (it reads well in a diff and on GitHub)."""
    head = f'extern "C" __global__ void {kernel.symbol}(' if not kernel.cpp_name else f"__global__ void {kernel.cpp_name}("
    params = [c_param(p, bool(kernel.isv_writes)) for p in kernel.params]
    if not params:
        return head + "void);"
    return head + "\n" + ",\n".join(f"    {p}" for p in params) + ");"
