"""Perturbed schedules: a kernel's source with some of its threads delayed, for the mutation run's last pass.

A race between threads of one block on *global* memory (a store that the kernel's own comments say needs no
barrier because the threads write disjoint elements, and a mutant that makes them overlap) is seen by no
compute-sanitizer tool (racecheck sees shared memory only) and rarely by a run on an idle GPU, whose warps
reach each barrier interval in much the same order every time. :func:`perturbed_source` rewrites a copy of
the source so that, in every block, half of the threads sleep :data:`PERTURB_NS` nanoseconds at the kernel's
start and after each ``__syncthreads();``: those whose linear thread index has bit k set, or clear, with k and
the side chosen by the block (k = (block / 2) mod 10, the side by the block's parity; bits 0-4 are lanes of a
warp, 5-9 warps). Over a launch of 20 blocks or more every two threads of a block run in both orders in some
block: warps 0 and 2 (one parity, never reordered by version 1's odd/even warps) differ in bit 6, and lanes
of one warp diverge (the trade-outcome backward's fill of the skipped rows and its row loop meet in lanes of
warp 0). Only the timing changes (``__nanosleep``, sm_70 and later), so the unmutated copy must give the same
results; a survivor whose values then fail is caught by MUTATE_UNSTABLE (audit.mutate._run, step 7). A kernel
that silently relies on the lanes of a warp running in step (no ``__syncwarp``, no ``.sync`` intrinsic) can
fail here unmutated: its baseline then fails the pass, which says so.

>>> print(perturbed_source('__global__ void k(float* p) { p[0] = 1; __syncthreads(); p[1] = 2; }', 'k.cu'))  # doctest: +ELLIPSIS
#define WIREUP_PERTURB() ...
#line 1 "k.cu"
__global__ void k(float* p) { WIREUP_PERTURB(); p[0] = 1; __syncthreads(); WIREUP_PERTURB(); p[1] = 2; }
"""

from __future__ import annotations

from pathlib import Path

from ..cuda.tokens import Token, tokenize

PERTURB_NS = 20_000  # a sleeping warp's delay at each point: far longer than a barrier interval's stores
# what the rewrite does, in the journal identity of its runs: 1 (6 December 2026) delayed the odd warps in
# even blocks and the even warps in odd ones; 2 (7 December) a bit of the thread index chosen per block
PERTURB_VERSION = 2
PERTURB_BITS = 10  # bits of the linear thread index a block may split on (1024 threads)
# the thread index's bit (block / 2) mod PERTURB_BITS, against the block's parity; empty where __nanosleep
# does not exist (before sm_70)
_MACRO = (
    "#define WIREUP_PERTURB() do { "
    "unsigned wireup_b_ = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); "
    "unsigned wireup_t_ = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); "
    f"if (((wireup_t_ >> ((wireup_b_ >> 1) % {PERTURB_BITS}u)) ^ wireup_b_) & 1u) WIREUP_SLEEP(); }} while (0)\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700\n"
    f"#define WIREUP_SLEEP() __nanosleep({PERTURB_NS}u)\n"
    "#else\n"
    "#define WIREUP_SLEEP() ((void)0)\n"
    "#endif\n"
)


def perturbation_points(tokens: list[Token]) -> list[int]:
    """Source offsets after which ``WIREUP_PERTURB();`` goes: just inside the body of each ``__global__``
    function definition, and after each ``__syncthreads ( ) ;`` statement."""
    out: list[int] = []
    n = len(tokens)
    for i, t in enumerate(tokens):
        if t.text == "__global__":
            depth = 0
            for j in range(i + 1, n):
                u = tokens[j].text
                if u in ("(", "["):
                    depth += 1
                elif u in (")", "]"):
                    depth -= 1
                elif depth == 0 and u == ";":  # a declaration: no body here
                    break
                elif depth == 0 and u == "{":
                    out.append(tokens[j].end)
                    break
        elif t.text == "__syncthreads" and [x.text for x in tokens[i + 1 : i + 4]] == ["(", ")", ";"]:
            out.append(tokens[i + 3].end)
    return sorted(set(out))


def perturbed_source(text: str, name: str) -> str:
    """``text`` with :data:`_MACRO` on top (a ``#line`` directive keeps the compiler's line numbers those
    of the original file ``name``) and ``WIREUP_PERTURB();`` at each :func:`perturbation_points` offset."""
    parts: list[str] = []
    last = 0
    for at in perturbation_points(tokenize(text)):
        parts += [text[last:at], " WIREUP_PERTURB();"]
        last = at
    parts.append(text[last:])
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'{_MACRO}#line 1 "{escaped}"\n' + "".join(parts)


def perturbed_copy(path: Path) -> Path:
    """Write the perturbed source of the copy ``path`` beside it (``<stem>.perturb.cu``: the same folder, so
    its includes resolve as the copy's do) when it changed, and return its path."""
    out = path.with_name(f"{path.stem}.perturb{path.suffix}")
    text = perturbed_source(path.read_text(encoding="utf-8"), path.name)
    if not out.is_file() or out.read_text(encoding="utf-8") != text:
        out.write_text(text, encoding="utf-8")
    return out
