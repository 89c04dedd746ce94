"""Lost updates in global memory, found by running blocks over the PTX (GLOBAL_RMW_RACE).

``atomicAdd(&dbias[i], v)`` made ``dbias[i] += v``, or llm.c's ``encoder_backward_kernel1`` with
``atomicAdd(dwpe + t * C + c, ...)`` turned into ``+=``, where the threads of different batch rows ``b``
map to one ``t``: each thread loads the old value, adds its own and stores, and all but one of the
updates that overlap are lost. Nothing faults and the result is merely a little off, so a test with a
loose tolerance passes; compute-sanitizer's racecheck does not look at global memory at all. This finds
it in the PTX, on the CPU, before merge.

It is the run of SHARED_BARRIER_MISSING and OUT_OF_BOUNDS_ACCESS (:mod:`audit.cuda.barriers`,
:mod:`audit.cuda.blockbounds`; the engine is :mod:`audit.cuda.blocksim`): every thread of a block runs
the entry's PTX with concrete integers, pointer parameters are disjoint synthetic global regions, so an
address is (parameter, byte). What it adds:

* **A read-modify-write** is a global ``ld`` (``ld.global``, or a generic ``ld`` whose address lies in a
  parameter's region) and a later ``st`` of the same address text in the same basic block -- no write to
  the address's registers, no branch, barrier or call in between -- storing a value computed from the
  loaded one (:func:`audit.cuda.sharedraces.rmw_pairs`, the pairing SHARED_RMW_RACE uses for shared
  memory). A thread's update is recorded where it runs the store at the address it loaded, both known.
  Volatile and ordered (``.relaxed``/``.acquire``/``.release``) accesses are not pairs; ``atom``/``red``
  are recorded as atomic updates.
* **Two updates race** when two *different* threads make them to one byte with nothing ordering them
  and at least one is a read-modify-write (atomics never race each other; an ``atomicAdd`` racing a
  ``+=`` of the same element loses the atomic's addition as surely): threads of *different blocks*
  always (no barrier orders blocks: the kernel's own ordering of blocks -- a grid sync, a flag or lock
  spun on -- is a call or a loop on an atomic or volatile value, where the run gives up); threads of
  *one block* when both fall in the same barrier interval (lanes of one warp not ordered by a
  ``__syncwarp()`` either).
* **Not reported**: a read-modify-write racing another thread's *plain* store or load of the element.
  Those are real ordering races too, but of a different kind, with a different fix (an initialising
  store that belongs before the kernel, a value read while it is updated): many deliberate patterns
  read a slot that one thread of the grid updates (a step counter, an EMA beside its readers), so
  reporting them would be noise in this rule's name. A lost update needs two updates.
* **Blocks**: block ``(0, 0, 0)`` and the grid's last block at each launch of the two other rules; every
  block where the grid has at most :data:`audit.cuda.blocksim.MAX_RMW_GRID` blocks, else the blocks where
  two blocks' parts meet (block 0's next block and the last block from block 0 along each axis: a tile
  offset one short in SGEMM's ``C = acc + beta * C``, a read-modify-write, lies between blocks 0 and 1);
  and one more launch
  for this rule alone, every runtime dim at the least value of at least 2 its range allows (the
  kernel's ``requires`` met): at the least sizes a collision often cannot happen (``B = 1``: one
  batch row), and at 131 the colliding threads are thousands of blocks apart, while at ``B = 2, T = 2``
  llm.c's encoder threads ``b = 0`` and ``b = 1`` of one ``(t, c)`` lie in blocks 0 and 1. Blocks other
  than 0 and the last run only where the entry has a global read-modify-write pair at all: a kernel
  without one costs nothing more.
* **Given up** (nothing reported for the entry): what the race analysis gives up on at sight (``mbarrier``,
  ``cp.async``, calls, cluster barriers, ordered accesses ...); and from the point where the run meets a
  barrier for part of the block, a branch on an unknown value around a barrier or an exit, or an exit
  under an unknown condition, the updates are no longer recorded (what was found before stands).

Only *definite* races are reported: both updates made by threads whose guards are known to hold, at
addresses known exactly (an index loaded from memory is unknown: ``dwte[inp[bt] * C + c] += ...`` is not
seen), inside the parameter's extent (an update past it is OUT_OF_BOUNDS_ACCESS's). Reported: the first
per (store line, other update's line), at the smallest launch that shows it, with two concrete threads and their blocks, the parameter's
element, the dims, and the fix: ``atomicAdd``, one element per thread (or per block, partial sums reduced
afterwards), or -- two different updates in one block -- a ``__syncthreads()`` between them.

>>> launch = BlockLaunch(((0, 1 << 40), (1, 3 << 40), (2, 8)), (256, 1, 1), (1, 1, 1), None, "n = 8")  # doctest: +SKIP
>>> find_global_rmw_races(ptx, "k", [launch])[0].message("k", "kernels/k.cu")                       # doctest: +SKIP
'Kernel "k" updates global memory that another thread updates too, without an atomic ...'
"""

from __future__ import annotations

from dataclasses import dataclass

from .races import finding_place, thread_pair


@dataclass(frozen=True)
class GlobalRmwRace:
    """Two unordered updates of one global element by two threads, at least the second a non-atomic
    read-modify-write. ``scope`` is ``"block"`` (threads of different blocks), ``"warp"`` (of different
    warps of one block) or ``"lane"`` (lanes of one warp); ``other_atomic`` whether the other update is an
    ``atom``/``red``."""

    entry: str
    line: int | None  # the store's line in the kernel's own file (an inlined helper: where it is inlined)
    file_index: int | None
    origin: str | None  # "helper.cuh:12" where the store is inlined from another file
    load: str  # the read-modify-write's load and store instructions
    store: str
    other_line: int | None
    other_origin: str | None
    other: str  # the other update's store (or atomic) instruction
    other_atomic: bool
    same_instruction: bool  # both updates are the same load and store (run by two threads)
    scope: str
    name: str  # the parameter
    element: str  # "dbias[3]"
    threads: tuple[int, ...]  # threadIdx (x, y, z), blockIdx (x, y, z) of the other update, then of this one
    launch: str  # the dims: "B = 2, T = 2"

    def message(self, kernel: str, source: str) -> str:
        """One sentence for the finding; ``source`` is the path shown for the kernel's file."""
        where = finding_place(source, self.line, self.origin)
        a, b = thread_pair(self.threads)
        if self.same_instruction:
            how = f"{a} and {b} both load, modify and store {self.element}"
        else:
            other = f"line {self.other_line}" if self.other_line is not None else "another line"
            if self.other_origin:
                other += f" (inlined from {self.other_origin})"
            did = "atomically updates" if self.other_atomic else "read-modify-writes"
            how = f"{a} {did} {self.element} at {other} and {b} loads, modifies and stores it"
        order = {"block": "different blocks, which nothing orders",
                 "warp": "different warps of one block, in one barrier interval",
                 "lane": "lanes of one warp, in one barrier interval"}[self.scope]
        if self.scope == "block":
            fix = "give each thread its own element (per-block partials reduced afterwards, say)"
        elif self.same_instruction:
            fix = "give each thread its own element"
        else:
            fix = "give each thread its own element, or put a __syncthreads() between the two updates"
        lost = "the atomic's update" if self.other_atomic else "one of the two updates"
        return (f'Kernel "{kernel}" updates global memory that another thread updates too, without an atomic ({where}, '
                f"{self.load} then {self.store}): at {self.launch}, {how} ({order}), so {lost} is lost; use "
                f"atomicAdd (or the atomic of the operation), or {fix}.")


@dataclass(frozen=True)
class RmwAnalysis:
    """The global read-modify-write races of one entry at one launch, and whether the run reached every
    exit of every block it ran (``reason`` says why not)."""

    races: tuple[GlobalRmwRace, ...]
    complete: bool
    reason: str
