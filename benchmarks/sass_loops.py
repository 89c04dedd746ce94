"""The tensor-core main loops of compiled kernels, by SASS opcode: what a build variant adds per iteration, read
off the cubin on the CPU machine (no GPU). Issue 18 uses it for ``AUX_CUTLASS_STAGE_K8`` (docs/benchmarks.md 4m).

Each source is built like ``wireup build`` builds it (``nvcc -arch=sm_90 -cubin -O3 -std=c++17 -I kernels``, CUTLASS's
headers where it includes them: ``gpu_chain_vs_torch.nvcc_command``) and disassembled with ``cuobjdump -sass``
(not in the CUDA 13.0 toolkit of the CPU machine: ``pip install nvidia-cuda-cuobjdump`` and put its
``nvidia/cu13/bin`` on PATH). A loop is a backward branch; each loop that issues HMMA is printed with its length
and its most frequent opcodes (predicates and modifiers stripped: ``@!P0 HMMA.1688.F32.TF32`` counts as HMMA).
Static counts, not time: whether the extra instructions cost time depends on what the loop waits for.

    python3 benchmarks/sass_loops.py kernels/aux_trunk_forward_cutlass.cu benchmarks/kernels_baseline/aux_trunk_forward_cutlass_k8.cu
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

_INSTR = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_BRANCH = re.compile(r"\bBRA\b.*?\b0x([0-9a-f]+)\b")


def opcode(instruction: str) -> str:
    """``@!P0 HMMA.1688.F32.TF32 R1, ...`` -> ``HMMA``."""
    words = instruction.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def loops(sass: str, unit: str = "HMMA") -> list[tuple[str, int, collections.Counter]]:
    """Per function of ``cuobjdump -sass`` output, each backward-branch loop that issues ``unit``: (function,
    instructions in the loop, opcode counts), in address order."""
    out = []
    for chunk in sass.split("Function : ")[1:]:
        name = chunk.split("\n", 1)[0].strip()
        instrs = [(int(m[1], 16), m[2]) for m in map(_INSTR.match, chunk.splitlines()) if m]
        for addr, body in instrs:
            b = _BRANCH.search(body)
            if b and (target := int(b[1], 16)) < addr:
                counts = collections.Counter(opcode(i) for a, i in instrs if target <= a <= addr)
                if counts[unit]:
                    out.append((name, sum(counts.values()), counts))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+", help="kernel sources (repository paths)")
    ap.add_argument("--top", type=int, default=8, help="opcodes shown per loop (default 8)")
    args = ap.parse_args(argv)
    if shutil.which("cuobjdump") is None:
        print("sass_loops: cuobjdump is not on PATH (pip install nvidia-cuda-cuobjdump; its nvidia/cu13/bin)")
        return 2
    import gpu_chain_vs_torch as chain

    with tempfile.TemporaryDirectory() as tmp:
        for src in args.sources:
            cubin = Path(tmp) / (Path(src).stem + ".cubin")
            build = subprocess.run(chain.nvcc_command(src, cubin), cwd=chain.REPO, capture_output=True, text=True)
            if build.returncode:
                print(f"{src}: nvcc failed: {build.stderr.strip().splitlines()[-1] if build.stderr.strip() else build.returncode}")
                return 1
            sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
            print(src)
            for name, n, counts in loops(sass):
                hmma = counts["HMMA"]
                top = " ".join(f"{k} {v}" for k, v in counts.most_common(args.top))
                print(f"  {name}: loop of {n} instructions, {n / hmma:.2f} per HMMA: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
