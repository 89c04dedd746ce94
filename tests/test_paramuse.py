"""OUTPUT_NEVER_WRITTEN and PARAM_UNREAD's reading of a compiled entry (:mod:`audit.cuda.paramuse`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.cuda.paramuse import param_uses
from nvcc_flags import compile_ptx as _ptx

NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="compiling the test kernels needs nvcc on PATH")


def _use(tmp_path: Path, src: str, entry: str = "k") -> tuple[list[int], list[int] | None]:
    """(positions of the parameters read, positions of those written through, or None: not judged)."""
    use = param_uses(_ptx(tmp_path, src, "k.cu"), entry)
    pos = {n: i for i, n in enumerate(use.names)}
    stored = None if use.stored is None else sorted(pos[n] for n in use.stored)
    return sorted(pos[n] for n in use.read), stored


@NVCC
def test_a_loss_scale_never_applied_is_a_parameter_never_read(tmp_path: Path) -> None:
    """tiny-cuda-nn trial, seeded: the cross-entropy gradient not multiplied by ``loss_scale``: nvcc loads no
    parameter nothing uses."""
    src = ('extern "C" __global__ void k(const float* p, const float* t, float* g, float loss_scale, int n) {\n'
           "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "    if (i < n) g[i] = SCALE(p[i] - t[i]);\n}\n")  # fmt: skip
    assert _use(tmp_path, src.replace("SCALE", "loss_scale * ")) == ([0, 1, 2, 3, 4], [2])
    assert _use(tmp_path, src.replace("SCALE", "")) == ([0, 1, 2, 4], [2])


@NVCC
def test_writes_through_atomics_offsets_and_selects_count_for_their_parameter(tmp_path: Path) -> None:
    src = ('extern "C" __global__ void k(float* a, float* b, float* c, float* d, const float* x, int n, int w) {\n'
           "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "    if (i >= n) return;\n"
           "    atomicAdd(a + 3, x[i]);\n"
           "    float* q = w ? b : c;\n"
           "    q[i * 2 + 1] = x[i];\n}\n")  # fmt: skip
    assert _use(tmp_path, src) == ([0, 1, 2, 4, 5, 6], [0, 1, 2])


@NVCC
def test_a_store_through_a_pointer_read_from_memory_is_not_judged(tmp_path: Path) -> None:
    """A table of output pointers (apex's multi_tensor_apply): the store's buffer is not known, so no parameter
    is said to be written by nothing."""
    src = ('extern "C" __global__ void k(float* const* outs, const float* x, float* unused_out, int n) {\n'
           "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "    if (i < n) outs[blockIdx.y][i] = x[i];\n}\n")  # fmt: skip
    assert _use(tmp_path, src) == ([0, 1, 3], None)


@NVCC
def test_a_generic_store_to_shared_memory_is_no_global_write(tmp_path: Path) -> None:
    src = ('extern "C" __global__ void k(const float* x, float* y, int n) {\n'
           "    __shared__ float s[128];\n"
           "    float* p = s + threadIdx.x;  // a generic pointer into shared memory\n"
           "    volatile float* vp = p;\n"
           "    *vp = x[threadIdx.x];\n"
           "    __syncthreads();\n"
           "    if (threadIdx.x < n) y[threadIdx.x] = s[127 - threadIdx.x];\n}\n")  # fmt: skip
    assert _use(tmp_path, src) == ([0, 1, 2], [1])


def test_a_call_or_a_tensor_map_store_is_not_judged() -> None:
    head = ".visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)\n{\n"
    load = "ld.param.u64 %rd1, [k_param_0];\nld.param.u64 %rd2, [k_param_1];\nst.global.f32 [%rd1], %f1;\n"
    assert param_uses(head + load + "}", "k").stored == frozenset({"k_param_0"})
    call = "call.uni (retval0), helper, (param0);\n"
    assert param_uses(head + load + call + "}", "k").stored is None
    tma = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd2, {%r1, %r2}], [%r3];\n"
    assert param_uses(head + load + tma + "}", "k").stored is None
    with pytest.raises(ValueError, match="no PTX entry"):
        param_uses(head + load + "}", "other")


@NVCC
def test_check_reports_an_unread_integer_as_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An integer the host passes and the kernel ignores is often a size the grid already covers (vllm's
    ``num_tokens``, DeepSpeed's ``batch_size``): a warning, the check passes; a float or a buffer never read is
    an error."""
    from audit.cli import main

    (tmp_path / "wireup.toml").write_text("")
    (tmp_path / "contracts").mkdir()
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(const float* x, float* y, int rows, int n) {\n'
                                   "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                   "    if (i < n) y[i] = x[i];\n}\n")  # fmt: skip
    (tmp_path / "contracts" / "k.toml").write_text("""[dims]
n = { min = 1, max = 4096 }
[[kernel]]
name = "k"
source = "k.cu"
stage = "other"
grid = ["ceil_div(n, 128)", 1, 1]
block = [128, 1, 1]
params = [
  { name = "x", dtype = "f32", shape = ["n"], role = "in" },
  { name = "y", dtype = "f32", shape = ["n"], role = "out" },
  { name = "rows", kind = "scalar", dtype = "i32", value = 1 },
  { name = "n", kind = "scalar", dtype = "i32", value = "n" },
]
""")
    assert main(["check", "--root", str(tmp_path), "--select", "PARAM_UNREAD,OUTPUT_NEVER_WRITTEN"]) == 0
    out = capsys.readouterr().out
    assert ('contracts/k.toml:12: PARAM_UNREAD (warning) Kernel "k" never reads its parameter "rows": the compiled code has '
            "no use of it, so the integer the host passes changes nothing (a size the grid covers is often left unread: "
            "check that this one may be).") in out
    assert "OUTPUT_NEVER_WRITTEN" not in out
