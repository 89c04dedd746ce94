"""Shared-memory accesses of two threads with no barrier between them, found by running a block over the
PTX (SHARED_BARRIER_MISSING).

A tree reduction whose loop lost its ``__syncthreads()``, ``s[tid] = v`` read back as ``s[tid + 1]`` before
a barrier, a warp-synchronous ``volatile`` reduction without ``__syncwarp()``: one thread reads (or
overwrites) a shared element that another thread writes (or reads) in the same *barrier interval*. The
result depends on the order in which warps (or, since Volta, the lanes of one warp) happen to run; it is
usually right, which is why tests pass. compute-sanitizer's racecheck finds it on a GPU; this finds it
in the PTX, on the CPU, before merge.

The analysis of one ``.entry`` at one *launch* (:class:`BlockLaunch`: the integer scalar parameters'
values at a small valid size, the block, the grid and the dynamic shared bytes), for block ``(0, 0, 0)``
and the grid's last block (the bounds run of :mod:`audit.cuda.blockbounds` takes a few more: the ends of the
other paths thread 0 takes across the grid, :meth:`audit.cuda.blocksim._Module.distinct_blocks`):

* **Every thread of the block runs the PTX** with concrete integers: registers hold one value per thread
  and a known-mask (numpy arrays over the block), through ``mov``, ``add``, ``sub``, ``mul.lo/.hi/.wide``,
  ``mad.lo/.wide``, ``shl``, ``shr``, ``and/or/xor/not``, ``neg``, ``abs``, ``div``, ``rem``, ``min``,
  ``max``, ``bfe``, ``bfi``, ``lop3``, ``prmt`` (its default mode), ``popc``, ``brev``, ``bfind``, ``clz``,
  integer ``cvt`` (width and sign per type suffix), ``cvta``, ``setp`` (with a boolean
  combination), ``selp`` and predicate logic; ``%tid``, ``%ntid``, ``%ctaid``, ``%nctaid``, ``%laneid``,
  ``%lanemask_*`` and ``ld.param`` of the integer scalars. Anything else (float math, loaded values,
  shuffles, votes, atomics' results, clocks) is *unknown*. Shared arrays (static ``.shared`` ones and the
  dynamic ``extern`` one, which every ``extern`` array names) get disjoint synthetic addresses, so that an
  address is (array, byte) also through a generic pointer made by ``cvta.shared``.
* **Control flow**: threads at one instruction form a group; the group with the smallest PC not waiting
  at a barrier runs (groups meeting at one PC merge); a branch on a predicate known per thread splits the
  group. A branch on an *unknown* predicate (data-dependent) sends its threads straight to the branch's
  post-dominator with every register written in between made unknown (their shared accesses there are
  not seen) -- unless that region holds a barrier, an exit or a call, or it is a loop whose predicate
  follows from a shared, volatile, generic, ordered or atomic load (a flag or lock someone spins on:
  synchronisation that is not modelled): then the entry is **given up**. Pointer
  parameters hold their buffers' synthetic addresses (:func:`audit.cuda.blockbounds.buffer_base`: non-null,
  apart from each other); an optional one the launch's step binds ``NULL`` (or that no schedule launches)
  is 0 (a ``if (ptr)`` test is known), one bound to a buffer unknown. Loaded values are unknown but where
  the launch *fills* an integer input from its contract domain (:attr:`BlockLaunch.fills`: labels every
  row valid, every row skipped, in turn), and where shared memory's integer words are kept (a value loaded
  back from it reaching an address or a branch). ``cp.async`` (``.ca``/``.cg`` ``.shared.global``) is a
  shared write in flight from its issue to the issuing thread's ``cp.async.wait_group``/``wait_all`` that
  completes its group: another thread's access of its bytes until then (the issue's and the wait's
  intervals included) races with it. ``ldmatrix``/``stmatrix`` are shared reads/writes of each row's 16
  bytes by the lane that gives its address; ``wmma.load``/``wmma.store`` of the warp's tile, element ``e``
  in row order by lane ``e % 32``. Given up too: an entry with ``mbarrier``, bulk or reducing
  ``cp.async`` forms, TMA copies, ``wgmma``, ``tcgen05``, cluster barriers or
  ``shared::cluster``, ``bar.arrive``, a barrier with a thread count other than the block's,
  ``membar.cta``/``fence...cta``, ``ld.acquire``/``st.release``/``.relaxed`` accesses, a ``call`` (but of
  ``vprintf``, or of ``__assertfail``, which gives up where it is made), an indirect branch, or a ``__syncwarp`` that not all live lanes of its mask reach together; and a run past
  :data:`MAX_STEPS` group-instructions stops (what was found before it stands: every access recorded was
  made, exactly, before the stop).
* **Barrier intervals**: ``bar.sync``/``barrier.sync``/``bar.red`` (``__syncthreads_count/and/or``, whose
  result is computed) close the interval once every live thread waits at one; ``bar.warp.sync``
  (``__syncwarp``) orders the accesses of the lanes of one warp that pass it (each lane counts its warp
  barriers; lane B's access follows lane A's when B has passed more of them than A had at its access).
* **A race**: within one interval, a byte that thread A writes (``st.shared``, or a generic ``st`` at a
  shared address) and another thread B reads, or reads before A writes it. Atomics (``atom``/``red``)
  count as writes that never race each other: an ``atomicAdd`` into a shared sum read back, or zeroed,
  with no barrier between is reported. Shared accesses at an unknown or out-of-array address are not
  recorded (a lock built from atomics ends in a loop on their result, which gives up). Two *different*
  instructions writing one byte from two threads are reported too (the surviving value depends on the
  order: a reset racing a set); one instruction run by many threads (``if (x) flag = 1``) is not. A load
  and store pair that :mod:`audit.cuda.sharedraces` reads as a read-modify-write (``s[w] += v``) is left
  to SHARED_RMW_RACE. Reported: the first pair per (write line, other line), with two concrete threads,
  the element, the launch and whether the threads are lanes of one warp (fix: ``__syncwarp()``) or of
  different warps (``__syncthreads()``).

Only races on a path that a valid launch takes, with every value involved known, are reported.

>>> launch = BlockLaunch(((2, 1),), (256, 1, 1), (1, 1, 1), None, "B = 1")                       # doctest: +SKIP
>>> find_barrier_races(ptx, "reduce", [launch])[0].message("reduce", "kernels/r.cu")              # doctest: +SKIP
'Kernel "reduce" reads shared memory that another thread writes in the same barrier interval ...'
"""

from __future__ import annotations

from dataclasses import dataclass

from .races import Dims, finding_place

@dataclass(frozen=True)
class BlockLaunch:
    """Where an entry is run: ``params`` the integer scalar parameters' values as (position, value)
    pairs (a pointer's: its buffer's synthetic address), ``block``/``grid`` the launch extents (None:
    unknown), ``dynamic_shared`` the dynamic shared bytes (None: unknown), ``label`` the dims in the message
    (``"B = 1, T = 64"``)."""

    params: tuple[tuple[int, int], ...]
    block: Dims
    grid: Dims
    dynamic_shared: int | None
    label: str
    #: the pointer parameters' buffers OUT_OF_BOUNDS_ACCESS checks (:data:`audit.cuda.blockbounds.Buffer`)
    buffers: tuple[tuple, ...] = ()
    #: the contract's ``shared_bytes`` text, where it gives one (the dynamic shared memory is checked then)
    shared_text: str | None = None
    #: input buffers whose contents the run knows (loads of them read these values, not unknowns): each
    #: (parameter position, element bytes, elements per row, the rows' values in turn, what it says)
    fills: tuple[tuple, ...] = ()
    #: the same launch with the optional pointers its schedule step binds to buffers given them, where this
    #: one leaves them unknown (so that what runs under ``if (p)`` is stepped over): the step's own case, by
    #: which the races, the uninitialised shared reads and the global updates are judged
    #: (:func:`audit.cuda.blocksim.block_findings`); this one keeps the bounds (the given launches check theirs)
    given: BlockLaunch | None = None


@dataclass(frozen=True)
class BarrierRace:
    """Two accesses of one shared byte by two threads in one barrier interval. ``order`` is ``"raw"`` (a
    read of what another thread wrote), ``"war"`` (a write over what another thread read) or ``"waw"``
    (two writes); ``first``/``second`` are the accesses in the order the block ran them (the second is
    where the finding is shown); ``scope`` is ``"warp"`` (threads of different warps) or ``"lane"``
    (lanes of one warp), or ``"self"``: one thread's access of bytes its own ``cp.async`` (the first) may still
    be writing, before a ``cp.async.wait_group`` completed the copy's group (CP_ASYNC_WAIT reports those), or
    ``"uninit"``: a read (``order`` ``"read"``) or atomic update (``"atomic"``) of shared bytes no thread wrote
    before it (SHARED_UNINIT_READ reports those; ``first_*`` are empty, ``threads`` the reader's alone)."""

    entry: str
    line: int | None  # the second access's line in the kernel's own file (an inlined helper: where it is inlined)
    file_index: int | None
    file: str | None
    first_line: int | None
    first_origin: str | None  # "helper.cuh:12" where the first access is inlined from another file
    second_origin: str | None
    first_instruction: str
    second_instruction: str
    order: str
    scope: str
    threads: tuple[int, ...]  # threadIdx (x, y, z) of the first access, then of the second
    element: str  # 's[9] (byte 36 of shared array "s")'
    launch: str  # the dims: "B = 1"

    def message(self, kernel: str, source: str) -> str:
        """One sentence for the finding; ``source`` is the path shown for the kernel's file."""
        t = self.threads
        if self.scope == "uninit":
            where = finding_place(source, self.line, self.second_origin)
            if self.order == "atomic":
                return (f'Kernel "{kernel}" updates shared memory that no thread has written ({where}, {self.second_instruction}): '
                        f"at {self.launch}, threadIdx ({t[0]}, {t[1]}, {t[2]}) updates {self.element} atomically before any thread "
                        "of the block writes it, so the update starts from whatever the block's shared memory held; set it "
                        "(and __syncthreads()) before the first update.")
            return (f'Kernel "{kernel}" reads shared memory that no thread has written ({where}, {self.second_instruction}): '
                    f"at {self.launch}, threadIdx ({t[0]}, {t[1]}, {t[2]}) reads {self.element} before any thread of the "
                    "block writes it, so it gets whatever the block's shared memory held; write the element first, or keep "
                    "the read to the elements that are written.")
        a, b = f"({t[0]}, {t[1]}, {t[2]})", f"({t[3]}, {t[4]}, {t[5]})"
        first = f"line {self.first_line}" if self.first_line is not None else "an earlier line"
        second = f"line {self.line}" if self.line is not None else "a later line"
        where = finding_place(source, self.line, self.second_origin)
        if self.first_origin:
            first += f" (inlined from {self.first_origin})"
        if self.scope == "self":
            access = "reads" if self.order == "raw" else "writes"
            return (f'Kernel "{kernel}" {access} shared memory its own cp.async may still be writing ({where}, '
                    f"{self.second_instruction} after {self.first_instruction} at {first}): at {self.launch}, threadIdx {b} "
                    f"copies into {self.element} and {access} it before a cp.async.wait_group completes the copy's group, so "
                    f"{'the read may see the old bytes' if self.order == 'raw' else 'the copy may land after the write'}; "
                    f"wait for the group (cp.async.wait_group N, cp_async_wait<N>()) between the copy at {first} and {second}.")
        other = "a lane of the same warp" if self.scope == "lane" else "of another warp"
        barrier = "__syncwarp()" if self.scope == "lane" else "__syncthreads()"
        if self.order == "raw":
            what = "reads shared memory that another thread writes in the same barrier interval"
            done = f"threadIdx {a} writes {self.element} and threadIdx {b}, {other}, reads it"
            effect = "so the read may see the old value or the new"
            fix = f"put a {barrier} between the write at {first} and the read at {second}"
        elif self.order == "war":
            what = "overwrites shared memory that another thread reads in the same barrier interval"
            done = f"threadIdx {a} reads {self.element} and threadIdx {b}, {other}, overwrites it"
            effect = "so the read may see the new value instead of the old"
            fix = f"put a {barrier} between the read at {first} and the write at {second}"
        else:
            what = "writes shared memory that another thread writes in the same barrier interval"
            done = f"threadIdx {a} writes {self.element} and threadIdx {b}, {other}, writes it again"
            effect = "so which value stays depends on the order they run in"
            fix = f"put a {barrier} between the writes at {first} and at {second}"
        return (f'Kernel "{kernel}" {what} ({where}, {self.second_instruction} after {self.first_instruction} at '
                f"{first}): at {self.launch}, {done} with no barrier between, {effect}; {fix}.")


@dataclass(frozen=True)
class BarrierAnalysis:
    """The races of one entry at one launch, and whether the run reached every exit (``reason`` says
    why not: ``"gave up: cp.async"``, ``"stopped after 30000 steps"``, ``"block not known"``)."""

    races: tuple[BarrierRace, ...]
    complete: bool
    reason: str
    #: why SHARED_UNINIT_READ's reads (scope ``"uninit"`` among ``races``) stopped being recorded where the
    #: races were not (a shared store the run could not place: :meth:`audit.cuda.blocksim._Block._unseen`)
    uninit_gap: str = ""
    #: SHARED_UNINIT_READ's reads (scope ``"uninit"``): shared bytes read before any thread of the block wrote them
    uninit: tuple[BarrierRace, ...] = ()
