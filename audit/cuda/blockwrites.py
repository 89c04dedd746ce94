"""Two blocks storing to one global element, found by running blocks over the PTX (BLOCK_WRITE_OVERLAP).

A kernel whose blocks each own a tile, a batch chunk or a row of the output is correct only if those
parts do not overlap: ``if (m <= M)`` where ``m < M`` was meant, in a tile loop that stores zeros, writes
row 0 of the *next* chunk's slab, which another block fills with its real result; ``threadIdx.x <= kTile``
makes thread 128 of tile ``y`` compute and store the first element of tile ``y + 1``. Nothing orders the
blocks of a grid, so which value stays depends on the order they run: in every test the neighbour block
usually runs later (or stores the same value) and the result is right, so ``wireup verify`` passes, and
compute-sanitizer's racecheck does not look at global memory at all. This finds it in the PTX, on the CPU,
before merge. Found by the mutation run of the CUTLASS weight-gradient partial (4 of its 8 survivors on
5 Dec 2026 were such overlaps).

It is the run of OUT_OF_BOUNDS_ACCESS (:mod:`audit.cuda.blockbounds`, engine :mod:`audit.cuda.blocksim`):
the same launches and the same blocks -- block ``(0, 0, 0)``, the grid's last block, up to two blocks of
other paths, and where two blocks' parts meet: block 0's next block along each axis (a row or tile offset
one short) and the last block along each axis from block 0 (a column bound one past the row wraps into the
next row, which block 0 owns) -- with pointer parameters as disjoint synthetic regions, so a store's address is
(parameter, byte). What it adds:

* **Each plain global store** (``st.global``, a generic ``st`` at a global address, and the vector forms)
  a thread whose guard is known to hold makes, at an address known exactly, inside its buffer (a store
  past the end is OUT_OF_BOUNDS_ACCESS's), is recorded with its block, thread and instruction.
* **Two blocks overlap** where one byte is stored by threads of two different blocks of one launch.
  Reported: the first pair per (store line, other store line), with both threads and blocks, the element
  and the dims of the launch.
* **Not reported**: the store of a read-modify-write (``c[i] = acc + beta * c[i]``: GLOBAL_RMW_RACE runs
  the same meeting blocks for those), atomics (``atom``/``red``: GLOBAL_RMW_RACE's when mixed with plain updates), ordered
  or volatile stores (``st.relaxed``, ``st.release``, ``st.volatile``: a kernel's own flags and tickets),
  stores of two threads of *one* block (STORE_RACE's and SHARED_BARRIER_MISSING's concerns), and every
  store of a thread that may have left the kernel earlier (an exit under an unknown condition: the "last
  block finishes" ticket, whose winner is not known on the CPU, stores nothing here).

Only blocks the run takes are compared, so an overlap between two blocks neither of which it runs is not
seen; the blocks it takes are the ones where partitions meet the buffers' ends and the paths change (an
empty chunk beside a full one).

>>> entry_block_writes(cs, wiring, k, ptx)[0].message("k", "kernels/k.cu")     # doctest: +SKIP
'Kernel "k" stores to ws[400] from two blocks ...'
"""

from __future__ import annotations

from dataclasses import dataclass

from .races import finding_place, thread_pair


@dataclass(frozen=True)
class BlockWriteOverlap:
    """One global element stored by threads of two different blocks of one launch, with plain stores."""

    entry: str
    line: int | None  # the later store's line in the kernel's own file (an inlined helper: where it is inlined)
    file_index: int | None
    origin: str | None  # "helper.cuh:12" where the store is inlined from another file
    store: str  # the later store's instruction
    other_line: int | None
    other_origin: str | None
    other: str  # the earlier store's instruction
    name: str  # the parameter
    element: str  # "ws[400]"
    threads: tuple[int, ...]  # threadIdx (x, y, z), blockIdx (x, y, z) of the earlier store, then of the later one
    launch: str  # the dims: "B = 1, M = 4, N = 100, P = 40"

    def message(self, kernel: str, source: str) -> str:
        """One sentence for the finding; ``source`` is the path shown for the kernel's file."""
        where = finding_place(source, self.line, self.origin)
        a, b = thread_pair(self.threads)
        if self.other_line == self.line and self.other_origin == self.origin:
            how = f"{a} and {b} both store it there"
        else:
            other = f"line {self.other_line}" if self.other_line is not None else "another line"
            if self.other_origin:
                other += f" (inlined from {self.other_origin})"
            how = f"{a} stores it at {other} and {b} there"
        return (f'Kernel "{kernel}" stores to {self.element} from two blocks ({where}, {self.store}): at {self.launch}, '
                f"{how}; nothing orders the blocks of a grid, so which value "
                f"stays depends on the order they run; give each block its own elements (check the bound or the offset "
                f"that makes the blocks' parts of {self.name} overlap).")
