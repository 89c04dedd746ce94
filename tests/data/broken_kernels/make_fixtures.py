#!/usr/bin/env python3
"""Write the broken-kernel fixtures: copies of shipped kernels with ONE change each, which `wireup verify`
must catch. Each fixture starts with a comment giving the change as a diff and the rule that catches it.

    python3 tests/data/broken_kernels/make_fixtures.py          # rewrite the fixtures from kernels/
    python3 tests/data/broken_kernels/make_fixtures.py --check  # exit 1 where a fixture is stale

The GPU test (tests/gpu/test_verify_gpu.py) compiles each one through ``source_overrides`` in place of its
kernel's source; a CPU test checks they are in step with the shipped kernels.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


@dataclass(frozen=True)
class Broken:
    name: str  # fixture file stem
    kernel: str  # contract kernel the fixture replaces
    source: str  # shipped source, relative to the repository root
    old: str  # the one line changed (exact text, must occur once)
    new: str
    rules: tuple[str, ...]  # rules verify must report for this kernel
    what: str  # the bug, in words
    sanitizer: str | None = None  # run verify under this compute-sanitizer tool


FIXTURES = (
    Broken(
        "mask_check_removed", "aux_trade_outcome_backward", "kernels/aux_trade_outcome_backward_fast_kernel.cu",
        "            if (k_ok && b_valid > 0 && label >= 0 && label < K) bit = 1u << r;",
        "            if (k_ok && b_valid > 0 && label < K) bit = 1u << r;",
        ("VERIFY_MASK_ZERO",), "the mask check removed: rows labelled -1 are treated as valid",
    ),
    Broken(
        "inv_b_not_inv_b_valid", "aux_trade_outcome_backward", "kernels/aux_trade_outcome_backward_fast_kernel.cu",
        "            const float dl = (__ldg(probs + (size_t)row * K + tid) - onehot) / (float)b_valid;",
        "            const float dl = (__ldg(probs + (size_t)row * K + tid) - onehot) / (float)B;",
        ("VERIFY_REFERENCE", "VERIFY_GRADCHECK"), "1/B instead of 1/B_valid in d_logits",
    ),
    Broken(
        "saxpy_overwrites", "aux_trade_outcome_backward", "kernels/aux_trade_outcome_backward_fast_kernel.cu",
        "                    float4 acc = *reinterpret_cast<const float4*>(dh_s2_aux_accum + o);",
        "                    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);",
        ("VERIFY_ACCUMULATE",), "`=` instead of `+=` in the SAXPY into dh_s2_aux_accum (the float4 path no longer reads it)",
    ),
    Broken(
        "gather_off_by_one", "strided_gather", "kernels/strided_gather_kernel.cu",
        "    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x)",
        "    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b <= B; b += gridDim.x * blockDim.x)",
        ("VERIFY_OUT_OF_BOUNDS",), "an off-by-one loop bound (b <= B) writes dst[B]",
    ),
    Broken(
        "elu_wrong_sign", "aux_trunk_backward", "kernels/aux_trunk_kernel.cu",
        "                dz = __ldg(dh_accum + rbase + j) * elu_grad_from_output(__ldg(h + rbase + j));",
        "                dz = __ldg(dh_accum + rbase + j) * (__ldg(h + rbase + j) < 0.0f ? 1.0f : 1.0f + __ldg(h + rbase + j));",
        ("VERIFY_GRADCHECK",), "the ELU derivative taken from the wrong sign test (h < 0 ? 1 : 1 + h)",
    ),
    Broken(
        "ema_missing_syncthreads", "aux_label_scale_ema_update", "kernels/aux_heads_loss_ema_kernel.cu",
        "    partial[tid] = sum;\n    __syncthreads();",
        "    partial[tid] = sum;",
        ("SANITIZER_RACECHECK",), "a missing __syncthreads before the shared-memory tree of the EMA reduction",
        sanitizer="racecheck",
    ),
    Broken(
        "label_raw_slot", "aux_next_bar_loss_reduce", "kernels/aux_next_bar_loss_reduce_kernel.cu",
        "    const float s = aux_label_scale(isv, label_scale_slot);",
        "    const float s = isv[label_scale_slot];",
        ("VERIFY_DIVISOR_ZERO",), "the label divided by the raw slot instead of max(slot, 1e-6)",
    ),
)


def header(b: Broken) -> str:
    old = "\n".join(f"// -{line}" for line in b.old.splitlines())
    new = "\n".join(f"// +{line}" for line in b.new.splitlines()) or "// +"
    return (
        f"// BROKEN FIXTURE for `wireup verify` (tests/gpu/test_verify_gpu.py): a copy of {b.source} with ONE change,\n"
        f"// {b.what}; verify must report {', '.join(b.rules)} for kernel \"{b.kernel}\".\n"
        f"// The change:\n{old}\n{new}\n"
        "// Regenerate with: python3 tests/data/broken_kernels/make_fixtures.py\n"
    )


def render(b: Broken, repo: Path = REPO) -> str:
    text = (repo / b.source).read_text()
    if text.count(b.old) != 1:
        raise ValueError(f"{b.source}: the line to break occurs {text.count(b.old)} times (expected once): {b.old!r}")
    return header(b) + text.replace(b.old, b.new, 1)


def path_of(b: Broken) -> Path:
    return HERE / f"{b.name}.cu"


def main(argv: list[str]) -> int:
    stale = []
    for b in FIXTURES:
        want = render(b)
        p = path_of(b)
        if "--check" in argv:
            if not p.is_file() or p.read_text() != want:
                stale.append(p.name)
        else:
            p.write_text(want)
    if stale:
        print(f"stale fixtures: {', '.join(stale)}; run python3 tests/data/broken_kernels/make_fixtures.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
