"""The block simulator behind SHARED_BARRIER_MISSING, OUT_OF_BOUNDS_ACCESS and GLOBAL_RMW_RACE
(:mod:`audit.cuda.barriers`, :mod:`audit.cuda.blockbounds` and :mod:`audit.cuda.globalraces` describe
what each does and gives up on): every thread of one block run over an entry's PTX with concrete
integers (numpy arrays over the block), its shared accesses recorded per barrier interval, every access
checked against its buffer and its global read-modify-writes recorded with their block and interval.
One run serves all three: the races are recorded until the race analysis must give up (then it stops
recording and the run goes on for the bounds alone); the global updates ride along with the bounds (they
need the global addresses), and a launch whose grid is small runs its other blocks for them alone. Kept
apart from the finding types so that a check whose analysis cache answers never imports numpy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cached_property, lru_cache
from typing import Any
from pathlib import PurePosixPath

import numpy as np

from .barriers import BarrierAnalysis, BarrierRace, BlockLaunch
from .blockbounds import BoundsAnalysis, OutOfBounds
from .blockwrites import BlockWriteOverlap
from .globalraces import GlobalRmwRace, RmwAnalysis
from .sharedraces import rmw_pairs
from .races import _COMMENT, _FILE, _INT, _REG, Dims, _cfg, _entry_text, _Inst, _int, _ipdom, _parse_body, _region, _strip_comment, _thread_extents

#: most threads a block may have; larger (or unknown) blocks are not analysed
MAX_THREADS = 1024
#: group-instructions one run of a block may take before it stops
MAX_STEPS = 30_000
#: the same for a run of the bounds alone (an entry the race analysis does not run: no shared memory, or
#: cp.async and the like): long per-thread loops over a large dim are checked on their first passes
MAX_BOUNDS_STEPS = 10_000
#: a launch's twin with its optional pointers given (:attr:`BlockLaunch.given`) runs what the launch stepped
#: over under ``if (p)`` (the per-sample partial loops: 32 rows of 128 x 256 in the trade-outcome backward's
#: block), so it may take this many times the steps
GIVEN_STEPS_FACTOR = 10
#: the most dynamic shared bytes a launch is checked against (any GPU's shared memory is far less)
MAX_DYNAMIC = 1 << 18
#: GLOBAL_RMW_RACE runs every block of a grid of at most this many blocks (block 0 and the last otherwise)
MAX_RMW_GRID = 8
#: besides block 0 and the last, a bounds run takes up to this many more blocks (:meth:`_Module.distinct_blocks`):
#: the ends of the paths thread 0 takes in the grid's blocks (an empty chunk in the middle of a grid, a tile
#: that only some blocks skip, the last block of block 0's path), found by one run of thread 0 of every block
#: of a grid of at most MAX_SIGNATURE_GRID blocks
MAX_DISTINCT_BLOCKS = 2
MAX_SIGNATURE_GRID = 4096
#: the most colliding global elements one launch's updates are searched for pairs at
MAX_RMW_ELEMENTS = 256
#: dynamic shared bytes assumed where the launch does not say
DEFAULT_DYNAMIC = 64 * 1024
_BASE = 0x4000_0000  # the synthetic shared window starts here (a generic pointer in it is shared)
_WINDOW = 0xC000_0000  # and runs to 2^32: shared addresses stay 32-bit
_GAP = 256
#: the synthetic shared regions of the arrays lie 2^24 bytes apart (fewer where a module has more than
#: 192 arrays, down to 2^18: more than any block's shared memory), the base in each one's middle
_SHIFT, _MIN_SHIFT = 24, 18
#: global addresses at or past this are parameters' buffers (:func:`audit.cuda.blockbounds.buffer_base`)
_GLOBAL_FLOOR = 1 << 39

_SHARED_DECL = re.compile(r"^[ \t]*((?:\.(?:visible|extern|weak|global)\s+)*)\.shared\s+(?:\.align\s+(\d+)\s+)?"
                          r"\.(\w+)\s+([A-Za-z_$][\w$]*)((?:\s*\[\s*\d*\s*\])*)", re.MULTILINE)
_MANGLED_LOCAL = re.compile(r"E(\d+)([A-Za-z_]\w*)$")
_GIVE_UP_HEADS = {"mbarrier", "cp", "wgmma", "tcgen05", "brx", "cvta.to.shared::cluster",
                  "mapa", "multimem", "tensormap", "clusterlaunchcontrol", "setmaxnreg"}
_SPACES = ("global", "local", "param", "const", "tex")
_ORDERED = ("relaxed", "acquire", "release", "mmio")
_FLOATS = ("f16", "f32", "f64", "bf16", "f16x2", "bf16x2", "e4m3x2", "e5m2x2", "tf32")
_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}
_MASK = {8: 0xFF, 16: 0xFFFF, 32: 0xFFFF_FFFF}


def find_barrier_races(ptx: str, entry: str, launches: Sequence[BlockLaunch]) -> list[BarrierRace]:
    """The races of ``entry`` over ``launches`` (see the module docstring), the first per (line, first
    line, order), ordered by line. Raises ValueError when the module has no such entry."""
    return [r for r in block_findings(ptx, entry, launches, False)[0] if r.scope != "uninit"]


def find_shared_uninit_reads(ptx: str, entry: str, launches: Sequence[BlockLaunch]) -> list[BarrierRace]:
    """SHARED_UNINIT_READ's reads of ``entry`` over ``launches`` (:meth:`_Block.found_uninit`): the first per
    line, ordered by line. Raises ValueError when the module has no such entry."""
    return [r for r in block_findings(ptx, entry, launches, False)[0] if r.scope == "uninit"]


def find_out_of_bounds(ptx: str, entry: str, launches: Sequence[BlockLaunch]) -> list[OutOfBounds]:
    """The out-of-bounds accesses of ``entry`` over ``launches`` (:mod:`audit.cuda.blockbounds`), the
    first per (line, buffer), ordered by line. Raises ValueError when the module has no such entry."""
    return block_findings(ptx, entry, launches, True)[1] or []


def find_global_rmw_races(ptx: str, entry: str, launches: Sequence[BlockLaunch],
                          extra: Sequence[BlockLaunch] = ()) -> list[GlobalRmwRace]:  # fmt: skip
    """The racing global read-modify-writes of ``entry`` over ``launches`` and ``extra`` (launches run for
    them alone; :mod:`audit.cuda.globalraces`), the first per (line, other line), ordered by line. Raises
    ValueError when the module has no such entry."""
    return block_findings(ptx, entry, launches, True, extra)[2] or []


class _Reach:
    """What the bounds runs of an entry reached, merged over blocks and launches: the accesses some run
    checked (:attr:`_Block.ran`), why each other access a run met or stepped over went unchecked
    (:attr:`_Block.unfollowed`), and the branches some run decided for every thread that met them."""

    def __init__(self) -> None:
        self.ran: set[int] = set()
        self.unfollowed: dict[int, tuple[str, int]] = {}
        self.decided: set[int] = set()

    def merge(self, got: Any) -> None:
        """Adds a :class:`_Block`'s reach, or a :class:`BoundsAnalysis`'s."""
        self.ran |= set(got.ran)
        self.decided |= set(got.decided)
        items = got.unfollowed.items() if isinstance(got.unfollowed, dict) else ((pc, (why, b)) for pc, why, b in got.unfollowed)
        for pc, got_why in items:
            self.unfollowed.setdefault(pc, got_why)

    def kept(self) -> tuple[frozenset[int], tuple[tuple[int, str, int], ...], frozenset[int]]:
        """(ran, unfollowed, decided) as :class:`BoundsAnalysis` keeps them."""
        return (frozenset(self.ran), tuple((pc, why, b) for pc, (why, b) in sorted(self.unfollowed.items()) if pc not in self.ran),
                frozenset(self.decided))  # fmt: skip

    def missed(self) -> dict[int, str]:
        """The accesses no run checked, for a reason of values (a branch no run decided, an address or a
        predicate not known, threads that may have left): PTX index -> why."""
        return {pc: why for pc, (why, b) in self.unfollowed.items() if pc not in self.ran and (b < 0 or b not in self.decided)}


def block_findings(ptx: str, entry: str, launches: Sequence[BlockLaunch], bounds: bool | None,
                   extra: Sequence[BlockLaunch] = (), gaps: dict[str, str] | None = None,
                   given: Sequence[BlockLaunch] = ()) -> tuple[list[BarrierRace], list[OutOfBounds] | None, list[GlobalRmwRace] | None,
                              list[BlockWriteOverlap] | None]:  # fmt: skip
    """(races and SHARED_UNINIT_READ's reads (scope ``"uninit"``), out-of-bounds accesses, global
    read-modify-write races, stores of one element by two blocks) of ``entry`` over ``launches`` from one
    run per launch (the overlaps come with the accesses: the same
    blocks, and the same gap). ``bounds`` False: the races alone (None for the others); True: all four; None:
    the accesses and updates too only where the race analysis runs the block anyway (it has shared memory
    and nothing it gives up on at sight), else None: what a check that wants the races takes for free.
    ``extra``: launches run for the global updates alone, wherever those are wanted; ``given``: launches run
    for the accesses (and overlaps) alone, whose stops leave the analysis as complete as it was. ``gaps``, where
    given, receives for "races", "uninit", "bounds" and "rmw" (each analysis this call made) why it did not reach
    every exit of every launch (``"gave up: cp.async (at B = 1)"``), or ``""`` where it did (an entry with
    no shared memory, or no global read-modify-write, has nothing left unexamined)."""
    races: list[BarrierRace] = []
    accesses: list[OutOfBounds] = []
    updates: list[GlobalRmwRace] = []
    overlaps: list[BlockWriteOverlap] = []
    seen_o: set[tuple] = set()
    seen_r: set[tuple[int | None, int | None, str]] = set()
    seen_b: set[tuple[int | None, str | None, str, str]] = set()
    seen_u: set[tuple[int | None, int | None, str | None, str | None]] = set()
    found_u: list[tuple[int, Sequence[GlobalRmwRace]]] = []  # (rank, races) of each launch
    module = _module(ptx, entry)
    check = bool(bounds) or (bounds is None and not module.race_skip)
    gap: dict[str, str] = {}
    reach = _Reach()  # the accesses some bounds run checked, and why each other one went unchecked

    def note(what: str, got: Any, label: str) -> None:
        if got is not None:
            gap.setdefault(what, "")
            if not got.complete and not gap[what]:
                gap[what] = f"{got.reason}, at {label}" if label else got.reason
            if what == "races":  # SHARED_UNINIT_READ's reads come with the races, and stop with them or before
                gap.setdefault("uninit", "")
                why = got.reason if not got.complete else got.uninit_gap
                if why and not gap["uninit"]:
                    gap["uninit"] = f"{why}, at {label}" if label else why

    for launch in launches:
        got_r, got_b, got_u = module.run(launch, True, check, tied=bounds is None, rmw=check)
        stopped = got_r is not None and not got_r.complete
        seen = (*got_r.races, *got_r.uninit) if got_r is not None else ()
        twin, label_r, label_u = launch.given, launch.label, launch.label
        if twin is not None:
            # the optional pointers this launch's step binds to buffers are unknown in it, so what runs under
            # `if (p)` was stepped over (and a branch on one around a barrier gives the races up: the shipped
            # backward kernels' `if (dW_partial)`): the launch with them given, the step's own case, is what the
            # races and updates are judged by; what the first run found stands too
            t_r, _, t_u = module.run(twin, True, False, rmw=got_u is not None, steps=GIVEN_STEPS_FACTOR)
            if t_r is not None:
                seen, got_r, label_r = (*seen, *t_r.races, *t_r.uninit), t_r, twin.label
            if t_u is not None and got_u is not None:
                got_u, label_u = RmwAnalysis((*got_u.races, *t_u.races), t_u.complete, t_u.reason), twin.label
        note("races", got_r, label_r)
        if bounds is None and stopped:
            check = False  # the run stopped with the races: the bounds are left to a run of their own
            gap.pop("bounds", None)
            gap.pop("rmw", None)
        else:
            note("bounds", got_b, launch.label)
            note("rmw", got_u, label_u)
            if got_b is not None:
                reach.merge(got_b)
        found_u.append((0 if not found_u else 2, got_u.races if got_u is not None else ()))
        for r in seen:
            key = (r.line, r.first_line, r.order)
            if key not in seen_r:
                seen_r.add(key)
                races.append(r)
        for b in got_b.accesses if got_b is not None else ():
            kb = (b.line, b.origin, "shared" if b.memory == "dynamic" else b.memory, b.name)
            if kb not in seen_b:
                seen_b.add(kb)
                accesses.append(b)
        for o in got_b.overlaps if got_b is not None else ():
            ko = (o.line, o.origin, o.other_line, o.other_origin)
            if ko not in seen_o:
                seen_o.add(ko)
                overlaps.append(o)
    if check:
        # launches with the optional pointers a step binds given (:func:`audit.cuda.static.given_launches`), for
        # the accesses alone: more coverage, so one that stops leaves the analysis as complete as it was
        for launch in given:
            got_b = module.run(launch, False, True)[1]
            if got_b is None:
                continue
            for b in got_b.accesses:
                kb = (b.line, b.origin, "shared" if b.memory == "dynamic" else b.memory, b.name)
                if kb not in seen_b:
                    seen_b.add(kb)
                    accesses.append(b)
            for o in got_b.overlaps:
                ko = (o.line, o.origin, o.other_line, o.other_origin)
                if ko not in seen_o:
                    seen_o.add(ko)
                    overlaps.append(o)
            reach.merge(got_b)
        for launch in extra:
            if launch in launches:
                continue
            got_u, label_u = module.run(launch, False, False, rmw=True)[2], launch.label
            if got_u is not None and launch.given is not None:  # as above
                t_u = module.run(launch.given, False, False, rmw=True, steps=GIVEN_STEPS_FACTOR)[2]
                if t_u is not None:
                    got_u, label_u = RmwAnalysis((*got_u.races, *t_u.races), t_u.complete, t_u.reason), launch.given.label
            note("rmw", got_u, label_u)
            found_u.append((1, got_u.races if got_u is not None else ()))
    # the first per (line, other line) at the smallest sizes: the least launch, the one at 2, then the others
    for _, got in sorted(found_u, key=lambda f: f[0]):
        for u in got:
            ku = (u.line, u.other_line, u.origin, u.other_origin)
            if ku not in seen_u:
                seen_u.add(ku)
                updates.append(u)
    races.sort(key=lambda r: (r.line is None, r.line or 0, r.first_line or 0))
    accesses.sort(key=lambda b: (b.line is None, b.line or 0))
    updates.sort(key=lambda u: (u.line is None, u.line or 0, u.other_line or 0))
    overlaps.sort(key=lambda o: (o.line is None, o.line or 0, o.other_line or 0))
    if check and gap.get("bounds") == "" and (missed := reach.missed()):
        gap["bounds"] = module.unchecked(missed)
    if gaps is not None:
        gaps.update({w: g for w, g in gap.items() if w in ("races", "uninit") or check})
        if check and "bounds" in gaps:
            gaps["overlap"] = gaps["bounds"]
    return races, (accesses if check else None), (updates if check else None), (overlaps if check else None)


def analyse_block(ptx: str, entry: str, launch: BlockLaunch) -> BarrierAnalysis:
    """One launch of ``entry``: its block 0 and its grid's last block run over the PTX. Raises ValueError
    when the module has no such entry."""
    got = _module(ptx, entry).run(launch, True, False)[0]
    assert got is not None
    return got


def analyse_bounds(ptx: str, entry: str, launch: BlockLaunch) -> BoundsAnalysis:
    """One launch of ``entry`` for OUT_OF_BOUNDS_ACCESS alone (see :func:`analyse_block`)."""
    got = _module(ptx, entry).run(launch, False, True)[1]
    assert got is not None
    return got


def analyse_updates(ptx: str, entry: str, launch: BlockLaunch) -> RmwAnalysis:
    """One launch of ``entry`` for GLOBAL_RMW_RACE alone: block 0, the last block, and every other block
    of a grid of at most :data:`MAX_RMW_GRID` blocks, where the entry has a global read-modify-write."""
    got = _module(ptx, entry).run(launch, False, False, rmw=True)[2]
    assert got is not None
    return got


#: the modules read in this process, by (PTX text, entry): the races rule and the bounds rule run the same
#: entry, each at the same launches
_MODULES: dict[tuple[str, str], _Module] = {}
_MAX_MODULES = 32


def _module(ptx: str, entry: str) -> _Module:
    """The :class:`_Module` of ``entry`` in ``ptx``, read once per process (what it keeps of a run, its
    static facts and shared layouts, follows from the text alone)."""
    key = (ptx, entry)
    got = _MODULES.get(key)
    if got is None:
        got = _Module(ptx, entry)
        if len(_MODULES) >= _MAX_MODULES:
            _MODULES.pop(next(iter(_MODULES)))
        _MODULES[key] = got
    return got


class _Module:
    """One entry of a PTX module, read once for every launch."""

    def __init__(self, ptx: str, entry: str) -> None:
        text = _COMMENT.sub(_strip_comment, ptx)
        params, self.head, body = _entry_text(text, entry)
        self.entry = entry
        self.insts, self.labels = _parse_body(body)
        self.insts = _scoped_registers(body, self.insts)
        self.static: _Static | None = None
        #: the global read-modify-writes: store -> its load
        self.grmw = {st: ld for ld, st in rmw_pairs(self.insts, self.labels, _global_access)}
        unsupported = ""
        if "shared" in body or self.grmw:
            for inst in self.insts:
                reason = _unsupported(inst)
                if reason:
                    unsupported = f"gave up: {reason}"
                    break
        # why the race analysis does not run (the bounds run on regardless), and the updates' analysis
        self.race_skip = unsupported if "shared" in body else "no shared memory"
        self.rmw_skip = unsupported if self.grmw else "no global read-modify-write"
        self.bounds_skip = next((f"gave up: an indirect branch ({i.text})" for i in self.insts if i.head == "brx"), "")
        self.files = {int(n): p for n, p in _FILE.findall(text)}
        self.order = _param_order(text, entry)
        self._layouts: dict[int | None, _Layout] = {}
        #: the module's shared declarations (what a :class:`_Layout` reads; the text itself is not kept)
        self.decls = [m.groups() for m in _SHARED_DECL.finditer(text)]

    def run(self, launch: BlockLaunch, races: bool = True, bounds: bool = False, tied: bool = False,
            rmw: bool = False, steps: int = 1) -> tuple[BarrierAnalysis | None, BoundsAnalysis | None, RmwAnalysis | None]:  # fmt: skip
        """The races (where ``races``), the out-of-bounds accesses (where ``bounds``) and the racing global
        read-modify-writes (where ``rmw``) of one launch; ``tied``: the run stops where the race analysis
        gives up (the bounds then are not complete); ``steps``: times the step limits of each block's run."""
        race_on = races and not self.race_skip
        bounds_on = bounds and not self.bounds_skip
        rmw_on = rmw and not self.rmw_skip
        r_out = BarrierAnalysis((), self.race_skip == "no shared memory", self.race_skip) if races and not race_on else None
        b_out = BoundsAnalysis((), False, self.bounds_skip) if bounds and not bounds_on else None
        u_out = RmwAnalysis((), self.rmw_skip == "no global read-modify-write", self.rmw_skip) if rmw and not rmw_on else None
        if not race_on and not bounds_on and not rmw_on:
            return r_out, b_out, u_out
        ext = _thread_extents(self.head, launch.block)
        why = ""
        if any(n is None or n < 1 for n in ext):
            why = "block not known"
        elif ext[0] * ext[1] * ext[2] > MAX_THREADS:  # type: ignore[operator]
            why = "block larger than 1024 threads"
        if why:
            return ((BarrierAnalysis((), False, why) if races else None), (BoundsAnalysis((), False, why) if bounds else None),
                    (RmwAnalysis((), False, why) if rmw else None))  # fmt: skip
        nx, ny, nz = (int(n) for n in ext)  # type: ignore[arg-type]
        if self.static is None:
            self.static = _Static(self.insts, self.labels)
        layout = self._layouts.get(launch.dynamic_shared)
        if layout is None:
            layout = self._layouts[launch.dynamic_shared] = _Layout(self.decls, launch.dynamic_shared)
        ctas = [(0, 0, 0)]
        distinct: list[tuple[int, int, int]] = []  # more blocks, run for the bounds alone (and the updates)
        others: list[tuple[int, int, int]] = []  # the blocks run for the global updates alone
        if all(g is not None and g >= 1 for g in launch.grid):
            gx, gy, gz = (int(g) for g in launch.grid)  # type: ignore[arg-type]
            last = (gx - 1, gy - 1, gz - 1)
            if last != (0, 0, 0):
                ctas.append(last)
            if bounds_on and 2 < gx * gy * gz <= MAX_SIGNATURE_GRID:
                distinct = self.distinct_blocks(launch, (nx, ny, nz), (gx, gy, gz), layout, ctas)
            meet = [c for c in _meeting_blocks((gx, gy, gz)) if c not in ctas]
            if bounds_on:  # where two blocks' parts of an output meet (BLOCK_WRITE_OVERLAP; the bounds too)
                distinct += [c for c in meet if c not in distinct]
            if rmw_on and gx * gy * gz <= MAX_RMW_GRID:
                others = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx) if (x, y, z) not in ctas]
            elif rmw_on:  # a larger grid: the same meeting blocks, for the updates (a tile's C = acc + beta * C)
                others = meet
        found_r: list[BarrierRace] = []
        found_b: list[OutOfBounds] = []
        r_done, r_reason = True, "analysed"
        found_n: list[BarrierRace] = []  # SHARED_UNINIT_READ's reads
        n_reason = ""  # why SHARED_UNINIT_READ's record stopped where the races' did not
        b_done, b_reason = True, "analysed"
        u_done, u_reason = True, "analysed"
        log = _RmwLog() if rmw_on else None
        wlog = _WriteLog() if bounds_on else None
        reach = _Reach()
        for n_cta, cta in enumerate([*ctas, *others]):
            alone = n_cta >= len(ctas)
            if alone and not rmw_on:
                break
            sim = _Block(self.insts, self.static, self.order, dict(launch.params), (nx, ny, nz), launch.grid, cta, layout,
                         race_on and not alone, bounds_on and not alone, launch.buffers, tied, rmw_on, log, self.grmw,
                         launch.fills)  # fmt: skip
            sim.limit *= steps
            if wlog is not None and bounds_on and not alone:
                sim.wlog, sim.wlog_block = wlog, wlog.block(cta)
            sim.run()
            if rmw_on and sim.rmw_stop:
                u_done, u_reason, rmw_on = False, sim.rmw_stop, False
            if alone:
                if sim.stopped:
                    break
                continue
            if race_on:
                for r in sim.found(self.entry, self.files, launch.label):
                    if all((r.line, r.first_line, r.order) != (q.line, q.first_line, q.order) for q in found_r):
                        found_r.append(r)
                for r in sim.found_uninit(self.entry, self.files, launch.label):
                    if all(r.line != q.line for q in found_n):
                        found_n.append(r)
                if (sim.uninit_stop or sim.uninit_skip) and not sim.race_stop and not n_reason:
                    n_reason = sim.uninit_stop or sim.uninit_skip
                if sim.race_stop:
                    r_done, r_reason, race_on = False, sim.race_stop, False
            if bounds_on:
                for b in sim.found_bounds(self.entry, self.files, launch):
                    if all((b.line, b.memory, b.name) != (q.line, q.memory, q.name) for q in found_b):
                        found_b.append(b)
                reach.merge(sim)
                if sim.stopped:
                    b_done, b_reason = False, sim.stopped
            if sim.stopped:
                break
            if not race_on and not bounds_on and not rmw_on:
                break
        # the blocks of other paths (or other ends of a path), for the bounds alone: extra coverage, so a run
        # of one that stops leaves the analysis as complete as it was
        for cta in distinct if bounds_on and b_done else ():
            sim = _Block(self.insts, self.static, self.order, dict(launch.params), (nx, ny, nz), launch.grid, cta, layout,
                         False, True, launch.buffers, False, False, None, None, launch.fills)  # fmt: skip
            if wlog is not None:
                sim.wlog, sim.wlog_block = wlog, wlog.block(cta)
            sim.run()
            for b in sim.found_bounds(self.entry, self.files, launch):
                if all((b.line, b.memory, b.name) != (q.line, q.memory, q.name) for q in found_b):
                    found_b.append(b)
            reach.merge(sim)
        if races and r_out is None:
            r_out = BarrierAnalysis(tuple(found_r), r_done, r_reason, n_reason, tuple(found_n))
        if bounds and b_out is None:
            b_out = BoundsAnalysis(tuple(found_b), b_done, b_reason,
                                   tuple(wlog.overlaps(self, launch, (nx, ny, nz))) if wlog is not None else (),
                                   *reach.kept())
        if rmw and u_out is None:
            found_u = log.races(self, launch, (nx, ny, nz)) if log is not None else []
            u_out = RmwAnalysis(tuple(found_u), u_done, u_reason)
        return r_out, b_out, u_out


    def unchecked(self, missed: dict[int, str]) -> str:
        """The gap of a bounds analysis whose runs checked none of the accesses ``missed`` (PTX index -> why):
        their source lines, file by file, and the first access's reason (how many others there are)."""
        files: dict[str, list[int]] = {}
        bare: list[str] = []
        for pc in sorted(missed):
            loc = self.insts[pc].loc
            if loc is None:
                bare.append(f"`{self.insts[pc].text}`")
                continue
            name = PurePosixPath(self.files[loc[0]]).name if loc[0] in self.files else "its source"
            lines = files.setdefault(name, [])
            if loc[1] not in lines:
                lines.append(loc[1])
        where = []
        for name, lines in files.items():
            lines.sort()
            shown = ", ".join(map(str, lines[:8])) + (f" and {len(lines) - 8} more" if len(lines) > 8 else "")
            where.append(f"line{'s' if len(lines) > 1 else ''} {shown} of {name}")
        where += bare[:4]
        reasons = list(dict.fromkeys(missed[pc] for pc in sorted(missed)))
        more = f"; {len(reasons) - 1} other reason{'s' if len(reasons) > 2 else ''} besides" if len(reasons) > 1 else ""
        return f"no thread it followed made the accesses at {', '.join(where)}: {reasons[0]}{more}"

    def distinct_blocks(self, launch: BlockLaunch, ext: tuple[int, int, int], grid: tuple[int, int, int], layout: _Layout,
                        taken: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:  # fmt: skip
        """Blocks of ``grid`` beyond ``taken``, at most :data:`MAX_DISTINCT_BLOCKS`: the first and the last block of
        each path of thread 0 that no block of ``taken`` takes, then the last block of each path they take
        (a path is the set of branch edges thread 0 of the block takes). One run: a pseudo-block whose lane i is thread 0
        of block i (its ``%ctaid`` that block's, its ``%tid`` 0), every branch edge a lane takes set as a bit of
        its signature (edges, not counts: a loop run more or fewer times is the same path). Where that run
        stops (it gave up), no block is added. Shared memory is one model for all lanes there, so a branch
        on a value loaded from it is unknown and its lanes are not told apart by it."""
        gx, gy, gz = grid
        n = gx * gy * gz
        if self.static is None:
            self.static = _Static(self.insts, self.labels)
        sim = _Block(self.insts, self.static, self.order, dict(launch.params), (n, 1, 1), launch.grid, (0, 0, 0), layout,
                     False, True, (), False, False, None, None, launch.fills)  # fmt: skip
        lin = np.arange(n, dtype=np.int64)
        cx, cy, cz = lin % gx, lin // gx % gy, lin // (gx * gy)
        zero = np.zeros(n, np.int64)
        for d, c in zip("xyz", (cx, cy, cz)):
            sim.special[f"%ctaid.{d}"] = (c, True)
        for d, size in zip("xyz", ext):
            sim.special[f"%tid.{d}"] = (zero, True)
            sim.special[f"%ntid.{d}"] = (np.full(n, size, np.int64), True)
        sim.special["%laneid"] = (zero, True)
        sim.trace = np.zeros(n, np.int64)
        sim.run()
        if sim.stopped:
            return []
        sig = sim.trace.tolist()
        have = {(c[2] * gy + c[1]) * gx + c[0] for c in taken}
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for i, s in enumerate(sig):
            first.setdefault(s, i)
            last[s] = i
        # each path's first and last block (a path's addresses grow with the block index: its last block
        # is the one nearest the end of the buffers), new paths first
        known = {sig[i] for i in have}
        order = [first[s] for s in first if s not in known] + [last[s] for s in first if s not in known]
        order += [last[s] for s in first if s in known]
        out: list[tuple[int, int, int]] = []
        for i in order:
            if len(out) >= MAX_DISTINCT_BLOCKS:
                break
            if i not in have:
                have.add(i)
                out.append((int(cx[i]), int(cy[i]), int(cz[i])))
        return out


_SCOPED_REG = re.compile(r"^\s*\.reg\s+\.\w+\s+([^;<]+);", re.MULTILINE)


def _scoped_registers(body: str, insts: list[_Inst]) -> list[_Inst]:
    """``insts`` with the registers an inline-asm scope of ``body`` declares (``{ .reg .pred p; setp.ne.b32
    p, %r1, 0; @p cp.async ... }``, CUTLASS's predicated copies) renamed ``%__s_p``, so that the run reads
    them as the registers they are (a bare name is otherwise a symbol, its value unknown). Each such scope
    writes its registers before it reads them, so one name serves every scope. The parsed list is shared
    with the other analyses: the renamed instructions are new ones."""
    if ".reg" not in body or "{" not in body:
        return insts
    names: set[str] = set()
    for m in _SCOPED_REG.finditer(body):
        names.update(n.strip() for n in m.group(1).split(",") if re.fullmatch(r"\s*[A-Za-z_]\w*\s*", n))
    if not names:
        return insts
    pattern = re.compile(r"(?<![%$.\w])(" + "|".join(map(re.escape, sorted(names))) + r")\b")

    def named(op: str) -> bool:
        return op in names or ("|" in op and any(x.strip() in names for x in op.split("|"))) or any(
            n in op for n in names) and pattern.search(op) is not None

    out = list(insts)
    for i, inst in enumerate(insts):
        opcode, ops, guard = inst.opcode, inst.operands, inst.guard
        if (guard is None or guard[0] not in names) and not any(named(op) for op in ops):
            continue  # (the shared parse reads ``@p`` of a scope register as the guard it is)
        ops = tuple(pattern.sub(r"%__s_\1", op) for op in ops)
        g = (f"%__s_{guard[0]}", guard[1]) if guard is not None and guard[0] in names else guard
        text = (f"@{'!' if g[1] else ''}{g[0]} " if g else "") + f"{opcode} {', '.join(ops)}"
        out[i] = _Inst(opcode, ops, g, inst.loc, text.strip(), inst.src)
    return out


def _param_order(text: str, entry: str) -> dict[str, int]:
    m = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(([^)]*)\)", text)
    names = [re.sub(r"\[\d*\]", "", p).split()[-1] for p in (m.group(1).split(",") if m else []) if p.strip()]
    return {n: i for i, n in enumerate(names)}


#: calls that touch no shared memory: printf, and a failed assert (which ends the kernel: the run gives up
#: where one is made, and a branch around one is stepped over)
_HARMLESS_CALLS = ("vprintf", "__assertfail")


def _callee(inst: _Inst) -> str:
    return next((o for o in inst.operands if not o.startswith("(")), "")


def _global_access(inst: _Inst, head: str) -> bool:
    """Whether ``inst`` is a plain (not volatile, ordered or asynchronous) ``head`` (``ld``/``st``) of
    global memory or a generic one: the loads and stores a global read-modify-write pairs."""
    if inst.head != head:
        return False
    parts = inst.opcode.split(".")
    if any(p in ("async", "bulk", "volatile", "mmio") or p in _ORDERED for p in parts):
        return False
    return all(p == "global" for p in parts if p.split("::")[0] in (*_SPACES, "shared"))


def _async_copy(parts: list[str]) -> bool:
    """Whether an opcode's parts are a ``cp.async`` the block run models: a non-bulk copy from global to
    shared (``cp.async.ca/cg.shared{::cta}.global``, any cache qualifiers), ``commit_group``,
    ``wait_group`` or ``wait_all`` (the ``bulk``, ``mbarrier`` and ``reduce`` forms are not)."""
    if len(parts) < 3 or parts[0] != "cp" or parts[1] != "async":
        return False
    if parts[2] in ("commit_group", "wait_group", "wait_all"):
        return len(parts) == 3
    if parts[2] not in ("ca", "cg") or len(parts) < 5:
        return False
    return parts[3] in ("shared", "shared::cta") and parts[4] == "global" and not any(
        p in ("bulk", "mbarrier", "reduce") or "cluster" in p for p in parts)


def _unsupported(inst: _Inst) -> str | None:
    """Why an entry holding this instruction is not analysed (synchronisation not modelled), or None."""
    head, op = inst.head, inst.opcode
    parts = op.split(".")
    if head == "cp" and _async_copy(parts):
        return None
    if head in _GIVE_UP_HEADS:
        return op
    if head == "call" and _callee(inst) not in _HARMLESS_CALLS:
        return f"a call of {_callee(inst)}"
    if head in ("bar", "barrier"):
        if "warp" in parts:
            return None
        if "cluster" in parts or "arrive" in parts or not ("sync" in parts or "red" in parts or len(parts) == 1 or parts[1:] == ["cta"]):
            return op
        return None
    if head in ("membar", "fence"):
        return op if ("cta" in parts or "proxy" in parts or "mbarrier_init" in parts) else None
    if head in ("ld", "st", "atom", "red", "ldu"):
        if any(p in _ORDERED for p in parts) or any("cluster" in p for p in parts) or "async" in parts or "bulk" in parts:
            return op
    if head == "cvta" and any("cluster" in p for p in parts):
        return op
    return None


class _Layout:
    """A module's shared arrays: each has a synthetic address in a region of its own of the 32-bit shared
    window (``arrays``: name -> (address, size); every ``extern`` array is the one dynamic region), so
    that an address names its array however far past the end it runs, and a compact offset where the
    race records keep its bytes (``regions``: (start, end, name))."""

    def __init__(self, decls: Sequence[tuple[str, ...]], dynamic: int | None) -> None:
        self.arrays: dict[str, tuple[int, int]] = {}
        self.regions: list[tuple[int, int, str]] = []  # (start offset, end offset, name)
        checked: list[bool] = []  # whether a region's size is known (the dynamic one: where the launch gives it)
        at = 0
        extern: list[str] = []
        for mods, align, typ, name, dims in decls:  # the groups of each _SHARED_DECL match
            sizes = re.findall(r"\[\s*(\d*)\s*\]", dims)
            if ".extern" in mods or (sizes and sizes[-1] == ""):
                extern.append(name)
                continue
            n = 1
            for s in sizes:
                n *= int(s or 1)
            size = n * max(1, _width(typ) // 8)
            a = max(int(align or 1), 16)
            at = -(-at // a) * a
            self.regions.append((at, at + size, name))
            checked.append(True)
            at += size + _GAP
        self.dynamic = -1  # the dynamic region's index
        if extern:
            at = -(-at // 1024) * 1024
            # a size past any GPU's shared memory (LAUNCH_RESOURCES reports it) is not checked against
            given = dynamic is not None and 0 < dynamic <= MAX_DYNAMIC
            size = dynamic if given else DEFAULT_DYNAMIC  # type: ignore[assignment]
            self.dynamic = len(self.regions)
            self.regions.append((at, at + size, extern[0]))
            checked.append(given)
            at += size
        self.size = at
        shift = _SHIFT
        while shift > _MIN_SHIFT and len(self.regions) << shift > _WINDOW:
            shift -= 1
        self.regions = self.regions[: _WINDOW >> shift]
        self.shift, self.half = shift, 1 << (shift - 1)
        self.n = len(self.regions)
        self.span, self.mask = self.n << shift, (1 << shift) - 1  # the window the regions take; an offset's bits
        for r, (lo, hi, name) in enumerate(self.regions):
            base = _BASE + (r << shift) + self.half
            for alias in (extern if r == self.dynamic else [name]):
                self.arrays[alias] = (base, hi - lo)
        self.starts = np.array([lo for lo, _, _ in self.regions] or [0], np.int64)
        self.sizes = np.array([hi - lo for lo, hi, _ in self.regions] or [0], np.int64)
        self.checked = np.array(checked[: self.n] or [False], bool)

    def name(self, off: int) -> tuple[str, int]:
        """(array, byte offset in it) of a shared offset."""
        for lo, hi, name in self.regions:
            if lo <= off < hi:
                return name, off - lo
        return "?", off


def c_name(symbol: str) -> str:
    """The C name of a PTX shared symbol: a function's ``__shared__`` array ``s`` is ``_ZZ1kE1s``.

    >>> c_name("_ZZ6reduceE5sdata"), c_name("smem"), c_name("_ZZN2ns1kEvE3buf_0")
    ('sdata', 'smem', 'buf')
    """
    base = re.sub(r"_\d+$", "", symbol)
    m = _MANGLED_LOCAL.search(base)
    if symbol.startswith("_ZZ") and m:
        n, rest = int(m.group(1)), m.group(2)
        if len(rest) >= n:
            return rest[:n]
    return symbol


@lru_cache(maxsize=256)
def _width(typ: str) -> int:
    if typ == "pred":
        return 1
    digits = "".join(c for c in typ.split("x")[0] if c.isdigit())
    bits = int(digits) if digits else 32
    return bits * 2 if typ.endswith("x2") else bits


def _access_bytes(parts: list[str]) -> int:
    typ = parts[-1]
    n = 1
    for p in parts:
        if p in ("v2", "v4", "v8"):
            n = int(p[1])
    return max(1, _width(typ) // 8) * n


class _GiveUp(Exception):
    pass


class _Static:
    """What a run needs of an entry once: its blocks, post-dominators, read-modify-write pairs, the
    registers a synchronising load reaches, the registers written under each branch."""

    def __init__(self, insts: list[_Inst], labels: dict[str, int]) -> None:

        self.insts, self.labels = insts, labels
        self.blocks, self.succ = _cfg(insts, labels)
        self.block_of = [0] * (len(insts) + 1)
        for n, (a, b) in enumerate(self.blocks):
            for i in range(a, b):
                self.block_of[i] = n
        self.block_of[len(insts)] = len(self.blocks) - 1
        self._ipdom: list[int | None] | None = None
        self._regions: dict[int, tuple[int, frozenset[str], bool, frozenset[str]] | None] = {}
        self._rmw: dict[int, set[int]] | None = None
        self._synced: set[str] | None = None
        #: per instruction: 0 nothing to evaluate (its registers become unknown), 1 evaluate, 2 memory, 3 memory
        #: only a bounds run reaches, 4 nothing to do (what it writes reaches no address, guard or branch)
        self.kind = [_kind(inst) for inst in insts]
        #: a shared load whose value only one ``selp`` of its block takes (``v = n > 5 ? s[5] : 0`` compiled to
        #: a load nvcc hoisted out of the condition): load pc -> (selp pc, the selp's operand it is), and back
        self.spec = _speculative_loads(insts, self.block_of)
        self.spec_selp = {sel: (ld, which) for ld, (sel, which) in self.spec.items()}
        #: the selps that may choose a value computed from a shared load: their predicates are evaluated, so
        #: a held read whose value a selp discards (cub's block reduction adds a slot nvcc loads
        #: unconditionally, then selects the sum without it) is no use of it (:meth:`_Block._used`)
        derived = _shared_derived(insts)
        self.choosing = {i for i, inst in enumerate(insts) if inst.head == "selp" and len(inst.operands) == 4
                         and (inst.operands[1] in derived or inst.operands[2] in derived)}
        relevant = self._relevant()
        #: whether a run needs what shared memory holds: a value loaded from it (or through a generic
        #: pointer) reaches an address, a guard or a branch (then what every shared store stores is needed too)
        self.track = any(_reads_shared(inst) and not relevant.isdisjoint(inst.dests()) for inst in insts)
        if self.track:
            relevant = self._relevant(stored=True)
        for i, inst in enumerate(insts):
            if self.kind[i] in (0, 1) and inst.head not in _STOPS and relevant.isdisjoint(inst.dests()) and i not in self.spec_selp:
                self.kind[i] = 4
        #: the next instruction a run stops at after each: runs of kind 4 within a basic block are jumped
        self.leaders = set(labels.values())
        self.next = _jumps(self.kind, self.leaders)
        #: (kinds, next, steps jumped) of a run for the global updates alone (:meth:`updates_only`)
        self._updates: tuple[list[int], list[int], list[int]] | None = None
        self._accesses_in: dict[tuple[int, int], list[int]] = {}
        #: per instruction, its opcode read once for :meth:`_Block._eval` (:func:`_opcode`)
        self.opcodes: list[tuple[list[str], str, bool, bool, int, bool] | None] = [None] * len(insts)
        # 4-byte units where every load or store that may touch shared memory moves whole words
        self.unit = 4 if all(_access_bytes(inst.opcode.split(".")) % 4 == 0 for inst in insts
                             if inst.head in ("ld", "st", "atom", "red") and not any(p in _SPACES for p in inst.opcode.split("."))) else 1
        if any(_wmma_memory(inst) and "global" not in inst.opcode.split(".") and _WMMA_BYTES.get(inst.opcode.split(".")[-1], 1) % 4
               for inst in insts):
            self.unit = 1  # a wmma fragment of 2-byte or 1-byte elements in shared memory

    @cached_property
    def accesses(self) -> frozenset[int]:
        """The loads and stores a bounds run checks: global, shared or generic (not a parameter, local or
        constant one)."""
        return frozenset(i for i, inst in enumerate(self.insts) if self.kind[i] == 2 and inst.head in ("ld", "ldu", "st", "atom", "red")
                         and not {"param", "local", "const", "tex"} & set(inst.opcode.split(".")))  # fmt: skip

    def accesses_in(self, start: int, stop: int) -> list[int]:
        """The :attr:`accesses` at ``start`` <= pc < ``stop``, in order."""
        got = self._accesses_in.get((start, stop))
        if got is None:
            got = self._accesses_in[(start, stop)] = sorted(p for p in self.accesses if start <= p < stop)
        return got

    def updates_only(self, grmw: dict[int, int]) -> tuple[list[int], list[int], list[int]]:
        """(kind, next, steps) for a run that records the global updates alone (no races, no bounds): an
        instruction is jumped (kind 4) where what it writes reaches no update's address or guard, no
        branch, exit, barrier or call, through what the run reads of the instructions it keeps; ``steps``
        the instructions a full run would stop at in between, counted so that the step limit falls where
        it does in a full run. Every register such a run reads takes the values it takes in a full run:
        each instruction of a full run that writes one is kept, with what it reads."""
        if self._updates is not None:
            return self._updates
        insts, full = self.insts, self.kind
        updates = {*grmw, *grmw.values()}
        seeds: list[str] = []
        makers: dict[str, list[tuple[str, ...]]] = {}  # register -> what each kept writer of it reads
        from_shared: set[str] = set()  # registers a load that may read shared memory writes
        shared_writes: list[int] = []  # the stores and atomics that may write it
        for i, inst in enumerate(insts):
            if full[i] == 4:
                continue
            head, ops = inst.head, inst.operands
            if head in ("st", "atom", "red") and _may_be_shared(inst.opcode.split(".")):
                shared_writes.append(i)
            if head in _STOPS:
                seeds += inst.sources()
            elif full[i] == 2 and (i in updates or head in ("atom", "red")):
                addr = ops[1] if head in ("ld", "atom", "ldu") and len(ops) > 1 else ops[0] if ops else ""
                seeds += _REG.findall(addr)
                if inst.guard:
                    seeds.append(inst.guard[0])
            else:  # evaluated: its sources and guard; a load its address too (a filled buffer's values,
                # shared memory a run tracks); else (unknown, a copy) its guard alone
                reads = inst.sources() if full[i] == 1 else ((inst.guard[0],) if inst.guard else ())
                if full[i] == 2 and head in ("ld", "ldu") and len(ops) > 1:
                    reads = (*reads, *_REG.findall(ops[1]))
                for d in inst.dests():
                    makers.setdefault(d, []).append(reads)
                if _reads_shared(inst):
                    from_shared.update(inst.dests())
        needed: set[str] = set()
        # a needed value loaded from shared memory (the trade-outcome backward's row flags, OR-ed from
        # flag_s into the mask its row loop branches on) is what some shared store stored: every such store
        # is kept, with its address and value (shared memory is tracked where a run needs what it holds)
        kept_writes = False
        while seeds:
            r = seeds.pop()
            if r not in needed:
                needed.add(r)
                for reads in makers.get(r, ()):
                    seeds += reads
                if r in from_shared and not kept_writes:
                    kept_writes = True
                    for i in shared_writes:
                        seeds += insts[i].sources()
        kind = list(full)
        for i, inst in enumerate(insts):
            if kind[i] != 4 and inst.head not in _STOPS and not (kind[i] == 2 and (i in updates or inst.head in ("atom", "red"))) \
                    and not (kept_writes and i in shared_writes) and needed.isdisjoint(inst.dests()):
                kind[i] = 4
        nxt = _jumps(kind, self.leaders)
        # a full run stops at each instruction that is not of kind 4 or that starts a block
        stops = [0] * (len(insts) + 2)
        for i in range(len(insts)):
            stops[i + 1] = stops[i] + (1 if full[i] != 4 or i in self.leaders else 0)
        steps = [stops[nxt[i]] - stops[i + 1] for i in range(len(insts))]
        self._updates = (kind, nxt, steps)
        return self._updates

    @property
    def rmw(self) -> dict[int, set[int]]:
        """Read-modify-write pairs (what a race run needs only): the store and the load of the same address
        text before it."""
        if self._rmw is None:
            from .sharedraces import _rmw_pairs

            insts = self.insts
            self._rmw = {}
            for s in _rmw_pairs(insts, self.labels):
                lo = self.blocks[self.block_of[s]][0]
                for j in range(s - 1, lo - 1, -1):
                    if insts[j].head == "ld" and len(insts[j].operands) > 1 and insts[j].operands[1] == insts[s].operands[0]:
                        self._rmw.setdefault(s, set()).add(j)
                        self._rmw.setdefault(j, set()).add(s)
                        break
        return self._rmw

    @property
    def synced(self) -> set[str]:
        if self._synced is None:
            self._synced = self._sync_taint()
        return self._synced

    def _relevant(self, stored: bool = False) -> set[str]:
        """The registers whose values a run needs: those an address, a guard, a branch, a barrier or a copy
        size reads, and (a fixed point) whatever an evaluated instruction computes them from. A value
        stored is needed only where ``stored`` (the run keeps what shared memory holds: a shared or generic
        store's value)."""
        seeds: list[str] = []
        makers: dict[str, list[tuple[str, ...]]] = {}  # register -> the sources of each evaluated write of it
        for i, (inst, kind) in enumerate(zip(self.insts, self.kind)):
            head, ops = inst.head, inst.operands
            if (i in self.spec_selp or i in self.choosing) and len(ops) == 4:
                seeds += _REG.findall(ops[3])  # which value a selp of a loaded value takes (SHARED_UNINIT_READ)
            if kind == 2:
                addr = ops[1] if head in ("ld", "atom", "ldu") and len(ops) > 1 else ops[0] if ops else ""
                seeds += _REG.findall(addr)
                if inst.guard:
                    seeds.append(inst.guard[0])
                if stored and head == "st" and len(ops) > 1 and _may_be_shared(inst.opcode.split(".")):
                    seeds += _REG.findall(ops[1])
            elif kind == 3 or head in _STOPS:
                seeds += inst.sources()
            elif kind == 1:
                srcs = inst.sources()
                for d in inst.dests():
                    makers.setdefault(d, []).append(srcs)
        out: set[str] = set()
        while seeds:
            r = seeds.pop()
            if r in out:
                continue
            out.add(r)
            for srcs in makers.get(r, ()):
                seeds += srcs
        return out

    def _sync_taint(self) -> set[str]:
        """Registers that follow from a shared, volatile, generic, ordered or atomic load: a branch on one
        may be a spin on a flag or lock."""
        seeds: set[str] = set()
        steps = []
        for inst in self.insts:
            dests = inst.dests()
            if not dests:
                continue
            parts = inst.opcode.split(".")
            if inst.head in ("atom", "red", "vote", "match", "redux") or (
                    inst.head in ("ld", "ldu") and not any(p in ("global", "local", "param", "const") for p in parts)) or (
                    inst.head == "ld" and "volatile" in parts):
                seeds.update(dests)
            steps.append((dests, inst.sources()))
        out = set(seeds)
        changed = True
        while changed:
            changed = False
            for dests, srcs in steps:
                if not out.isdisjoint(srcs) and not set(dests) <= out:
                    out.update(dests)
                    changed = True
        return out

    @cached_property
    def _events(self) -> list[tuple[tuple[str, bool], ...]]:
        """Per instruction, the registers it reads (True), then those it writes (False)."""
        return [tuple((r, True) for r in inst.sources()) + tuple((r, False) for r in inst.dests()) for inst in self.insts]

    @cached_property
    def _regs(self) -> list[frozenset[str]]:
        return [frozenset(r for r, _ in ev) for ev in self._events]

    def regs_of(self, pc: int) -> frozenset[str]:
        """The registers instruction ``pc`` reads or writes."""
        return self._regs[pc]

    def events(self, pc: int) -> tuple[tuple[str, bool], ...]:
        """(register, read) of instruction ``pc``: what it reads, then what it writes (SHARED_UNINIT_READ's
        held reads: :meth:`_Block._used`)."""
        return self._events[pc]

    @cached_property
    def _loaded(self) -> dict[int, tuple[str, ...]]:
        return {i: inst.dests() for i, inst in enumerate(self.insts) if inst.head in ("ld", "ldu", "ldmatrix", "wmma") and inst.dests()}

    @cached_property
    def _moves(self) -> dict[int, tuple[str, str]]:
        out = {}
        for i, inst in enumerate(self.insts):
            ops = inst.operands
            if inst.head == "mov" and inst.guard is None and len(ops) == 2 and _REG.fullmatch(ops[0]) and _REG.fullmatch(ops[1]):
                out[i] = (ops[0], ops[1])
        return out

    def move(self, pc: int) -> tuple[str, str] | None:
        """(destination, source) of an unguarded register-to-register ``mov`` at ``pc``, else None."""
        return self._moves.get(pc)

    def dests_of(self, pc: int) -> tuple[str, ...]:
        """The registers a load at ``pc`` (``ld``, ``ldmatrix``, ``wmma.load``) writes; () for any other
        instruction (an atomic's update reads the old value itself)."""
        return self._loaded.get(pc, ())

    def region(self, pc: int) -> tuple[int, frozenset[str], bool, frozenset[str]] | None:
        """(the post-dominator's first instruction, registers written on the way, whether the way
        loops back to the branch, what the way holds: "barrier", "exit", "call" (which the race analysis
        cannot step over), "trap", "store", "shared store" (one that may make a shared element defined))
        of the branch at ``pc``, or None where only the exit post-dominates."""
        n = self.block_of[pc]
        if n in self._regions:
            return self._regions[n]
        if self._ipdom is None:
            self._ipdom = _ipdom(self.succ)
        stop = self._ipdom[n]
        got: tuple[int, frozenset[str], bool, frozenset[str]] | None = None
        if stop is not None:
            inside = _region(n, self.succ, stop)
            written: set[str] = set()
            holds: set[str] = set()
            for r in inside:
                a, b = self.blocks[r]
                for i in range(a, b):
                    inst = self.insts[i]
                    if inst.head in ("bar", "barrier"):
                        holds.add("barrier")
                    elif inst.head in ("ret", "exit"):
                        holds.add("exit")
                    elif inst.head == "trap":
                        holds.add("trap")
                    elif inst.head == "call" and _callee(inst) != "__assertfail":
                        holds.add("call")
                    elif inst.head in ("st", "atom", "red", "cp", "stmatrix") or (_wmma_memory(inst) and _shared_store(inst)):
                        holds.add("store")
                        if _shared_store(inst):
                            holds.add("shared store")
                    written.update(inst.dests())
            got = (self.blocks[stop][0], frozenset(written), n in inside, frozenset(holds))
        self._regions[n] = got
        return got


def _loads_shared(inst: _Inst) -> bool:
    """A load whose value may come from shared memory: ``ld`` (shared or generic), ``ldmatrix``, ``wmma.load``."""
    return _reads_shared(inst) or inst.head == "ldmatrix" or (inst.head == "wmma" and inst.opcode.split(".")[1:2] == ["load"])


def _shared_derived(insts: list[_Inst]) -> set[str]:
    """The registers that may hold a value computed from a shared load (a fixed point over every instruction)."""
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for inst in insts:
            if _loads_shared(inst) or not out.isdisjoint(inst.sources()):
                new = set(inst.dests()) - out
                if new:
                    out |= new
                    changed = True
    return out


#: instructions whose results are computed from their sources and do nothing else: a held read's value
#: passes through them to what they write (SHARED_UNINIT_READ, :meth:`_Block._used`)
_PURE = frozenset("""add sub mul mad mad24 mul24 fma div rem min max neg abs and or xor not cnot shl shr shf lop3 cvt
    setp set rcp sqrt rsqrt ex2 lg2 sin cos tanh copysign sad bfe bfi brev popc clz fns prmt testp dp4a dp2a
    addc subc madc""".split())


def _speculative_loads(insts: list[_Inst], block_of: list[int]) -> dict[int, tuple[int, int]]:
    """Shared (or generic) loads of one register that one ``selp`` later in the same basic block reads and
    nothing else does: load pc -> (selp pc, 1 where the load is the value taken when the predicate holds,
    2 where it is the other). A read of unwritten shared memory there is a finding only for threads whose
    selp takes the loaded value (nvcc loads ``s[5]`` of ``n > 5 ? s[5] : 0`` whatever ``n`` is)."""
    uses: dict[str, list[int]] = {}
    for i, inst in enumerate(insts):
        for r in inst.sources():
            uses.setdefault(r, []).append(i)
    out: dict[int, tuple[int, int]] = {}
    for i, inst in enumerate(insts):
        if not _reads_shared(inst) or inst.guard is not None:
            continue
        dests = inst.dests()
        if len(dests) != 1:
            continue
        at = uses.get(dests[0], [])
        if len(at) != 1 or at[0] <= i or block_of[at[0]] != block_of[i]:
            continue
        sel = insts[at[0]]
        ops = sel.operands
        if sel.head != "selp" or sel.guard is not None or len(ops) != 4 or dests[0] == ops[3]:
            continue
        if any(dests[0] in insts[j].dests() for j in range(i + 1, at[0])):
            continue  # written again before the selp: not the loaded value it takes
        which = 1 if ops[1] == dests[0] else 2 if ops[2] == dests[0] else 0
        if which and ops[1] != ops[2]:
            out[i] = (at[0], which)
    return out


def _jumps(kind: list[int], leaders: set[int]) -> list[int]:
    """The next instruction a run stops at after each: runs of kind 4 within a basic block are jumped."""
    nxt = list(range(1, len(kind) + 1))
    for i in range(len(kind) - 2, -1, -1):
        if kind[i + 1] == 4 and (i + 1) not in leaders:
            nxt[i] = nxt[i + 1]
    return nxt


#: instructions the run itself handles (control, barriers) or that may end a thread: never jumped over
_STOPS = {"bra", "brx", "ret", "exit", "trap", "bar", "barrier", "call"}
_EVAL = {"mov", "cvta", "cvt", "setp", "selp", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not",
         "neg", "abs", "min", "max", "div", "rem", "popc", "brev", "bfind", "clz", "shfl", "vote",
         "bfe", "bfi", "lop3", "prmt"}


_WRITE, _READ, _ATOMIC = 0, 2, 4  # kinds of access, and their first record slot
#: the records an access of each kind is checked against: a read against writes and atomics, a write against
#: everything, an atomic against plain reads and writes (atomics never race each other)
_AGAINST = {_READ: (0, 1, 4, 5), _WRITE: (2, 3, 0, 1, 4, 5), _ATOMIC: (0, 1, 2, 3)}
_AGAINST_INDEX = {k: np.array(v) for k, v in _AGAINST.items()}


def _may_be_shared(parts: list[str]) -> bool:
    """Whether an access with these opcode parts may touch shared memory (it names shared, or no space)."""
    return not any(p in _SPACES for p in parts)


def _wmma_memory(inst: _Inst) -> bool:
    """A ``wmma.load`` or ``wmma.store`` (a warp's matrix fragment from or to memory)."""
    return inst.head == "wmma" and inst.opcode.split(".")[1:2] in (["load"], ["store"])


#: bytes of a wmma fragment's element, by its type (the sub-byte types are not read here)
_WMMA_BYTES = {"f16": 2, "bf16": 2, "s8": 1, "u8": 1, "f32": 4, "s32": 4, "tf32": 4, "f64": 8}


def _wmma_form(parts: list[str]) -> tuple[bool, int, int, bool, int] | None:
    """(a store, rows, columns, row-major, element bytes) of a ``wmma.load``/``wmma.store`` by its opcode
    parts (``wmma.load.a.sync.aligned.row.m16n16k16.shared.f16``): matrix A is m x k, B k x n, C and D
    m x n; None for a form not read here."""
    if len(parts) < 4 or parts[1] not in ("load", "store"):
        return None
    which = parts[2]
    shape = next((re.fullmatch(r"m(\d+)n(\d+)k(\d+)", q) for q in parts if re.fullmatch(r"m\d+n\d+k\d+", q)), None)
    size = _WMMA_BYTES.get(parts[-1])
    layout = [q for q in parts if q in ("row", "col")]
    if shape is None or size is None or len(layout) != 1 or which not in ("a", "b", "c", "d") or (parts[1] == "store") != (which == "d"):
        return None
    m, n, k = (int(x) for x in shape.groups())
    rows, cols = {"a": (m, k), "b": (k, n)}.get(which, (m, n))
    if rows * cols % 32:
        return None
    return parts[1] == "store", rows, cols, layout[0] == "row", size


def _shared_store(inst: _Inst) -> bool:
    """A store, exchange, compare-and-swap or copy that may write shared memory (a generic one too): what
    may make an element defined (:func:`_may_initialise`; other atomics only update)."""
    if inst.head in ("cp", "stmatrix"):
        return True
    if inst.head == "wmma":
        parts = inst.opcode.split(".")
        return parts[1:2] == ["store"] and "global" not in parts
    parts = inst.opcode.split(".")
    return (inst.head == "st" or (inst.head == "atom" and ("exch" in parts or "cas" in parts))) and _may_be_shared(parts)


def _may_initialise(mine: int, inst: _Inst) -> bool:
    """Whether a shared write of kind ``mine`` can make an element defined that no thread wrote before: a
    store, an exchange or a compare-and-swap can; another atomic (add, min, or...) only updates what is
    there, so one at an unknown address leaves SHARED_UNINIT_READ's record as it was (an update of an
    element nothing wrote reads it first, a finding wherever its address is known)."""
    return mine == _WRITE or any(p in ("exch", "cas") for p in inst.opcode.split("."))


def _reads_shared(inst: _Inst) -> bool:
    """A load whose value may come from shared memory (``ld.shared`` or a generic ``ld``)."""
    return inst.head == "ld" and _may_be_shared(inst.opcode.split("."))


def _kind(inst: _Inst) -> int:
    if inst.head in ("ld", "st", "atom", "red", "ldu"):
        return 2
    if inst.head in ("ldmatrix", "stmatrix") or (inst.head == "cp" and inst.opcode.startswith("cp.async")) or _wmma_memory(inst):
        return 3  # memory the race analysis gives up on: only a bounds run reaches it
    parts = inst.opcode.split(".")
    if _float_form(inst.head, parts):
        return 1
    if inst.head not in _EVAL or parts[-1] in _FLOATS or any(p in ("sat", "cc", "ftz") for p in parts):
        return 0
    return 1


#: the float instructions a run computes (f32 and f64; half precision stays unknown), by their values
_FEVAL = frozenset({"add", "sub", "mul", "fma", "mad", "div", "neg", "abs", "min", "max", "rcp", "sqrt", "rsqrt",
                    "ex2", "lg2", "sin", "cos", "tanh", "copysign", "mov", "selp", "setp", "cvt"})
_FTYPES = ("f32", "f64")
#: rounding of a float result other than to nearest: not computed (its last bit would be a guess)
_DIRECTED = frozenset({"rz", "rm", "rp"})


def _float_form(head: str, parts: list[str]) -> bool:
    """Whether :meth:`_Block._float` computes the instruction: an f32/f64 operation of :data:`_FEVAL` (a compare
    of two floats, a conversion to or from one), rounded to nearest where it rounds, or (an f32 result of an
    add, sub, mul, fma, div, sqrt or narrowing cvt) in a direction: ``expf``'s ``fma.rm.f32`` of the
    12582913.0 trick)."""
    if head not in _FEVAL or "cc" in parts:
        return False
    if _DIRECTED & set(parts) and not (head in ("add", "sub", "mul", "fma", "mad", "div", "sqrt", "cvt")
                                       and (parts[-1] == "f32" or (head == "cvt" and parts[-2] == "f32"))):
        return False
    if head == "cvt":
        to, frm = parts[-2], parts[-1]
        ints = {"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"}
        return (to in _FTYPES and (frm in _FTYPES or frm in ints)) or (to in ints and frm in _FTYPES)
    if head == "setp":
        return parts[-1] in _FTYPES
    return parts[-1] in _FTYPES


_FIMM = re.compile(r"0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}")
#: operand text -> its form (:func:`_operand`)
_OPERANDS: dict[str, tuple] = {}


def _operand(op: str) -> tuple:
    """What :meth:`_Block._get` reads for an operand: (0,) a register (special or not), (1, inner) a
    negated one, (2, value) an integer (``WARP_SZ`` too), (3,) a name (a shared array's address, or
    unknown)."""
    if op.startswith("%"):
        form: tuple = (0,)
    elif op.startswith("!"):
        form = (1, op[1:])
    elif _FIMM.fullmatch(op):  # 0f3F800000 (f32 bits), 0d3FF0000000000000 (f64 bits)
        bits = int(op[2:], 16)
        form = (2, bits - (1 << 64) if bits >= 1 << 63 else bits)
    else:
        c = _imm(op)
        form = (2, c) if c is not None else (2, 32) if op == "WARP_SZ" else (3,)
    _OPERANDS[op] = form
    return form


def _opcode(inst: _Inst) -> tuple[list[str], str, bool, bool, int, bool]:
    """(the opcode's parts, its type, whether :meth:`_Block._eval` reads it further: not a float type
    but for a compare, select, move or conversion, no saturation, carry or flush, or a float form
    :meth:`_Block._float` computes; whether it names a state space other than shared; the bytes a load or
    store of it moves; whether it is such a float form, :func:`_float_form`)."""
    parts = inst.opcode.split(".")
    typ = parts[-1]
    plain = _float_form(inst.head, parts) or (not (typ in _FLOATS and inst.head not in ("setp", "selp", "mov", "cvt")) and not (
        any(p in ("sat", "cc", "ftz") for p in parts) or inst.head in ("addc", "subc", "madc")))
    return parts, typ, plain, any(p in _SPACES for p in parts), _access_bytes(parts), _float_form(inst.head, parts)


@lru_cache(maxsize=4096)
def _address_terms(op: str) -> tuple[str, ...]:
    """The operands a memory operand adds up: ``[%rd1+-16]`` is ``("%rd1", "-16")``."""
    out = []
    for term in op.strip("[] ").replace(" ", "").replace("+-", "+~").split("+"):
        neg = term.startswith("~")
        term = term.lstrip("~")
        if term:
            out.append(term if not neg else f"-{term}" if _INT.fullmatch(term) else term)
    return tuple(out)


def _imm(op: str) -> int | None:
    if _INT.fullmatch(op):
        v = _int(op)
        return ((v + (1 << 63)) % (1 << 64)) - (1 << 63)
    return None


def _distinct(held: tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """A load's held reads (threads, offsets, intervals, register -> which of them it holds) with each read
    dropped whose thread has an earlier one held in exactly the same registers: from here on the two are
    used, or dropped, by the same instructions, and the earlier one is what a finding names. Without it a
    loop whose loads all reach the accumulators (a GEMM tile read unwritten: a mutant's wrong column) held
    one read per iteration and thread, each followed through every later instruction."""
    t, off, epochs, regs = held
    if len(t) < 2:
        return held
    names = sorted(regs)
    bits = np.packbits(np.stack([regs[r] for r in names], axis=1), axis=1) if names else np.zeros((len(t), 0), np.uint8)
    width = -(-bits.shape[1] // 8) * 8
    words = np.zeros((len(t), width), np.uint8)
    words[:, : bits.shape[1]] = bits
    columns = [t.astype(np.int64), *words.view(np.uint64).T]
    order = np.lexsort(columns[::-1])  # by thread, then registers; stable: earliest first within a group
    step = np.zeros(len(t), bool)
    step[0] = True
    for c in columns:
        sc = c[order]
        step[1:] |= sc[1:] != sc[:-1]
    if step.all():
        return held
    first = np.sort(order[step])
    return t[first], off[first], epochs[first], {r: regs[r][first] for r in names}


class _Block:
    """One block of threads run over an entry's PTX (see the module docstring)."""

    def __init__(self, insts: list[_Inst], static: _Static, order: dict[str, int], params: dict[int, int],
                 ext: tuple[int, int, int], grid: Dims, cta: tuple[int, int, int], layout: _Layout,
                 races: bool = True, bounds: bool = False, buffers: Sequence[tuple] = (), tied: bool = False,
                 rmw: bool = False, log: _RmwLog | None = None, grmw: dict[int, int] | None = None,
                 fills: Sequence[tuple] = ()) -> None:  # fmt: skip
        self.insts, self.st, self.order, self.params, self.layout = insts, static, order, params, layout
        self.races, self.bounds, self.tied = races, bounds, tied
        self.limit = MAX_STEPS if races else MAX_BOUNDS_STEPS
        self.race_stop = ""  # why the race records stopped (the run goes on for the bounds)
        # the global read-modify-writes (store -> load) recorded in ``log``, until ``rmw_stop`` says why not
        self.grmw = grmw or {}
        self.rmw = rmw and log is not None and bool(self.grmw)
        self.rmw_loads = {ld: st for st, ld in self.grmw.items()}
        self.rmw_stop = ""
        self.log = log
        #: the plain global stores of a bounds run, where its launch compares blocks (BLOCK_WRITE_OVERLAP)
        self.wlog: _WriteLog | None = None
        self.wlog_block = -1
        self.loaded: dict[int, np.ndarray] = {}  # a pair's load -> the address each thread loaded (-1: none)
        self.cta_index = log.block(cta) if log is not None and self.rmw else -1
        self.cta = cta
        # what each instruction is to this run, where it goes next, the steps a jump counts (see _Static)
        if not races and not bounds and self.rmw:
            self.kinds, self.next, self.jumped = static.updates_only(self.grmw)
        else:
            self.kinds, self.next, self.jumped = static.kind, static.next, None
        self.fuzzy = False  # a barrier was passed by part of the block: bar.red results are unknown
        # the buffers: by parameter position, extent (-1: not checked) and element bytes
        self.buffers = {int(b[0]): b for b in buffers}
        top = max(self.buffers, default=-1) + 1
        self.g_ext = np.full(top + 1, -1, np.int64)
        self.g_is = np.zeros(top + 1, bool)  # which positions are buffers (the last slot never)
        for pos, b in self.buffers.items():
            self.g_ext[pos] = b[2]
            self.g_is[pos] = True
        self.g_ranges = {pos: b[5] for pos, b in self.buffers.items() if b[5] is not None and b[2] >= 0}
        #: (pc, "g" buffer / "w" write range / "s" shared region, index) -> (thread, start, width, kind, index on the axis)
        self.oob: dict[tuple[int, str, int], tuple[int, int, int, int, int]] = {}
        # a bounds run's reach: the accesses it checked for some thread (one it followed, at a known address),
        # and why each access it did not check went unchecked (its threads stepped over it, or left before it,
        # on a value the run does not know; its address was not known): an access no block of no launch
        # checked is a gap of the analysis (:func:`block_findings`), not a pass
        self.ran: set[int] = set()
        self.unfollowed: dict[int, tuple[str, int]] = {}  # access -> (why, the branch that stepped over it, or -1)
        self.decided: set[int] = set()  # branches every thread that met them decided (once at least)
        self.left = ""  # why threads stopped being followed (their accesses not reported): the first such exit
        nx, ny, nz = self.ext = ext
        self.total = total = nx * ny * nz
        lin = np.arange(total, dtype=np.int64)
        self.lin = lin
        self.warp = lin // 32
        self.consts: dict[tuple[int, int], np.ndarray] = {}
        self.trues: dict[int, np.ndarray] = {}
        self.falses: dict[int, np.ndarray] = {}
        lane = lin % 32
        self.special: dict[str, tuple[np.ndarray, bool]] = {
            "%tid.x": (lin % nx, True), "%tid.y": (lin // nx % ny, True), "%tid.z": (lin // (nx * ny), True),
            "%laneid": (lane, True),
            "%lanemask_eq": (np.left_shift(1, lane), True), "%lanemask_lt": (np.left_shift(1, lane) - 1, True),
            "%lanemask_le": (np.left_shift(2, lane) - 1, True),
            "%lanemask_gt": ((~(np.left_shift(2, lane) - 1)) & 0xFFFF_FFFF, True),
            "%lanemask_ge": ((~(np.left_shift(1, lane) - 1)) & 0xFFFF_FFFF, True),
        }
        for d, n, g, c in zip("xyz", ext, grid, cta):
            self.special[f"%ntid.{d}"] = (np.full(total, n, np.int64), True)
            self.special[f"%ctaid.{d}"] = (np.full(total, c, np.int64), True)
            if g is not None:
                self.special[f"%nctaid.{d}"] = (np.full(total, g, np.int64), True)
        self.v: dict[str, np.ndarray] = {}
        self.k: dict[str, np.ndarray] = {}
        self.alive = np.ones(total, dtype=bool)
        self.sure = np.ones(total, dtype=bool)  # not past an exit it may have taken: its accesses are reported
        self.ws = np.zeros(total, dtype=np.int64)  # __syncwarp()s each thread has passed
        self.epoch = 0
        self.steps = 0
        self.stopped = ""
        size = max(layout.size, 1)
        # per byte: the latest access of each kind in this interval, and the latest one by another thread
        # [unit][kind][field]: kinds w, w2, r, r2, a, a2 (atomic); fields epoch, thread, pc, warp barriers passed; a unit is
        # a byte, or a 4-byte word where every access that may be shared is whole words
        self.unit = static.unit
        self.rec = np.full((size // self.unit + 1, 6, 4), -1, np.int32)
        self.hits: dict[tuple[int, int, str], dict[str, tuple[int, int, int, int]]] = {}
        self.last_row: np.ndarray | None = None  # scratch of :meth:`_record_only`, per unit
        self.rows = np.arange(0, dtype=np.int64)
        self.decoded: dict[int, tuple] = {}
        # cp.async copies in flight (a race run): per unit the thread whose copy may still land there (-1:
        # none) and that copy's instruction; per issue (threads, units, group of each, instruction); the
        # groups each thread has committed
        self.pend_t: np.ndarray | None = None
        self.pend_pc: np.ndarray | None = None
        self.pend_g: np.ndarray | None = None  # the group of that copy (its thread's commits when it was issued)
        self.copies: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
        self.commits = np.zeros(total, np.int64)
        # a wait_group whose count is not an immediate: what it completes is not known, so a thread's read
        # of its own copy after it is not reported (another thread's still is: a barrier orders those)
        self.waits_unknown = False
        # what shared memory holds, per 4-byte word (where the entry reads back values a run needs)
        self.track = static.track and self.unit == 4
        self.sv = np.zeros(len(self.rec), np.int64) if self.track else None
        self.sk = np.zeros(len(self.rec), bool) if self.track else None
        # SHARED_UNINIT_READ (a race run): per unit, the interval, thread and instruction of its first write (-1: none
        # yet); per reading instruction, its reads of units no thread had written (threads, bytes, interval);
        # ``uninit_stop``: why writes may go unseen from interval ``uninit_epoch`` on (what was read before stands)
        self.first_w = np.full(len(self.rec), -1, np.int32) if races else None
        self.first_wt = np.full(len(self.rec), -1, np.int32) if races else None
        self.first_wpc = np.full(len(self.rec), -1, np.int32) if races else None
        self.unread: dict[int, list[tuple[np.ndarray, np.ndarray, int]]] = {}
        # a speculated load's reads of unwritten units, until its selp runs (:func:`_speculative_loads`)
        self.held: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # load pc -> threads, bytes, intervals
        # any other load's reads of unwritten units, until an instruction its thread runs uses a register it
        # loaded (then they count) or every such register is written again first, or the run ends (then the
        # value was never used: a pipelined loop's last prefetch from the stage no tile filled):
        # load pc -> threads, bytes, intervals, and per register which of those reads it still holds
        self.pend: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]] = {}
        self.uninit_stop = ""
        self.uninit_epoch = -1
        self.uninit_skip = ""  # why a read was not checked (its address is not known): the record goes on
        # the contents of the launch's filled input buffers (:attr:`BlockLaunch.fills`), by position
        self.fills = {int(f[0]): f for f in fills}
        self.fill_values: dict[int, np.ndarray] = {}  # position -> its filling's pattern as an array (:meth:`_fill_load`)
        # per thread, the branch edges it took, each a bit (:meth:`_Module.distinct_blocks`); None: not kept
        self.trace: np.ndarray | None = None

    @cached_property
    def xyz(self) -> list[tuple[int, int, int]]:
        """(x, y, z) of each linear thread index (the findings name threads by them)."""
        nx, ny, _ = self.ext
        return [(t % nx, t // nx % ny, t // (nx * ny)) for t in range(self.total)]

    # -- running ----------------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            with np.errstate(all="ignore"):
                self._run()
        except _GiveUp as e:
            self.stopped = f"gave up: {e}"
            self._unseen(self.stopped)
            if self.races and not self.race_stop:
                self.race_stop = self.stopped
            if self.rmw and not self.rmw_stop:
                self.rmw_stop = self.stopped

    def _soft(self, reason: str) -> None:
        """What the race analysis must give up on: the run stops, or, where it checks the bounds, goes on
        with the race records stopped."""
        if not self.bounds or (self.tied and self.races):
            raise _GiveUp(reason)
        if self.races:
            self._unseen(f"gave up: {reason}")
            self.races = False
            self.race_stop = f"gave up: {reason}"
        if self.rmw:  # what orders the updates from here on is not known
            self.rmw = False
            self.rmw_stop = f"gave up: {reason}"

    def _run(self) -> None:
        n = len(self.insts)
        groups: dict[int, np.ndarray] = {0: self.lin.copy()}
        waiting: dict[int, np.ndarray] = {}
        while groups or waiting:
            if not groups:
                self._close(waiting)
                groups = {pc + 1: idx for pc, idx in waiting.items()}
                waiting = {}
                continue
            pc = min(groups)
            idx = groups.pop(pc)
            while True:
                other = groups.pop(pc, None)
                if other is not None:
                    idx = np.union1d(idx, other)
                if pc >= n:
                    self.alive[idx] = False
                    break
                self.steps += 1
                if self.steps > self.limit:
                    raise _GiveUp(f"stopped after {self.limit} steps")
                inst = self.insts[pc]
                head = inst.head
                if self.pend:
                    self._used(pc, pc + 1, idx)
                if head in ("bra", "ret", "exit", "trap", "bar", "barrier"):
                    nxt = self._control(inst, pc, idx, waiting)
                    for npc, nidx in nxt:
                        if len(nidx):
                            old = groups.get(npc)
                            groups[npc] = nidx if old is None else np.union1d(old, nidx)
                    break
                self._step(inst, pc, idx)
                if self.pend and self.next[pc] > pc + 1:
                    self._used(pc + 1, self.next[pc], idx)  # the instructions jumped: their uses count too
                if self.jumped is not None and self.jumped[pc]:
                    self.steps += self.jumped[pc]  # what a full run steps through here (it does nothing there)
                    if self.steps > self.limit:
                        raise _GiveUp(f"stopped after {self.limit} steps")
                pc = self.next[pc]

    def _guard(self, inst: _Inst, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(holds, known) of the instruction's guard for the threads ``idx``."""
        if inst.guard is None:
            return np.ones(len(idx), bool), np.ones(len(idx), bool)
        p, neg = inst.guard
        v, k = self._get(p, idx, 1)
        holds = (v != 0) != neg
        return holds & k, k

    def _control(self, inst: _Inst, pc: int, idx: np.ndarray, waiting: dict[int, np.ndarray]) -> list[tuple[int, np.ndarray]]:
        holds, known = self._guard(inst, idx)
        head = inst.head
        if head in ("ret", "exit", "trap"):
            if not known.all():
                self._soft(f"an exit under an unknown condition ({inst.text})")
                self.sure[idx[~known]] = False  # may have left: goes on, its accesses not reported
                if self.bounds and not self.left:
                    self.left = f"made only by threads that may have left at an exit on a value the run does not know{self._at(inst)}"
            self.alive[idx[holds]] = False
            return [(pc + 1, idx[~holds])]
        if head in ("bar", "barrier"):
            parts = inst.opcode.split(".")
            if "arrive" in parts or "cluster" in parts:  # only a bounds run gets here: no wait
                return [(pc + 1, idx)]
            if not known.all():
                self._soft(f"a barrier under an unknown condition ({inst.text})")
                self.fuzzy = True  # the unknown ones go on as if they skipped it
            skip, go = idx[~holds], idx[holds]
            if "warp" in parts:
                self._warp_sync(inst, go)
                return [(pc + 1, idx)]
            if not self._check_count(inst, go):
                return [(pc + 1, idx)]  # a barrier for part of the block (a bounds run): no wait
            if len(go):
                old = waiting.get(pc)
                waiting[pc] = go if old is None else np.union1d(old, go)
            return [(pc + 1, skip)]
        # bra
        target = self.st.labels.get(inst.operands[-1]) if inst.operands else None
        if target is None:
            raise _GiveUp(f"a branch to an unknown label ({inst.text})")
        out = [(target, idx[holds & known]), (pc + 1, idx[~holds & known])]
        if self.trace is not None:
            for bit, (npc, nidx) in enumerate(out):
                if len(nidx):
                    self.trace[nidx] |= np.int64(1) << np.int64((pc * 2 + bit) % 63)
        unknown = idx[~known]
        if self.bounds and len(idx) and not len(unknown):
            self.decided.add(pc)
        if len(unknown):
            if self.pend:  # they skip a region whose uses are not followed: what they hold counts
                self._settle(unknown)
            region = self.st.region(pc)
            if region is None or region[3] & {"barrier", "exit", "call"}:
                self._soft(f"a branch on an unknown value around a barrier or an exit ({inst.text})")
            if region is None:  # only the exit post-dominates (a bounds run): where they go is not known
                self.alive[unknown] = False
                if self.bounds:
                    self._unfollowed(pc + 1, len(self.insts), f"past a branch on a value the run does not know{self._at(inst)}, where it stopped following them", pc)
                return out
            stop, written, loop, holds_in = region
            if self.bounds:
                self._unfollowed(pc + 1, stop, f"stepped over on a value the run does not know{self._at(inst)}", pc)
            if loop and inst.guard is not None and inst.guard[0] in self.st.synced:
                raise _GiveUp(f"a loop on a value loaded from shared or volatile memory or an atomic ({inst.text})")
            if holds_in & {"exit", "trap"}:
                self.sure[unknown] = False
            if "barrier" in holds_in:
                self.fuzzy = True
            if "store" in holds_in and self.sk is not None:
                self.sk[:] = False  # a store stepped over: what shared memory holds is not known
            if "shared store" in holds_in:
                self._unseen(f"a shared store under a branch on an unknown value ({inst.text})")
            for r in written:
                if r in self.k:
                    self.k[r][unknown] = False
            out.append((stop, unknown))
        return out

    def _unfollowed(self, start: int, stop: int, why: str, branch: int) -> None:
        """The accesses at ``start`` <= pc < ``stop``, which threads did not run for ``why`` (at ``branch``):
        unchecked unless a thread the run follows makes them (here or in another block or launch), or
        another run decides that branch (they are then a matter of sizes, as any access not reached)."""
        for p in self.st.accesses_in(start, stop):
            if p not in self.unfollowed:
                self.unfollowed[p] = (why, branch)

    @staticmethod
    def _at(inst: _Inst) -> str:
        """`` (line N: `text`)`` of an instruction, for a reason."""
        return f" (line {inst.loc[1]}: `{inst.text}`)" if inst.loc else f" (`{inst.text}`)"

    def _check_count(self, inst: _Inst, idx: np.ndarray) -> bool:
        """Whether the barrier is for the whole block (else, in a bounds run, it is passed without a wait)."""
        ops = inst.operands
        parts = inst.opcode.split(".")
        n_ops = len(ops) - (2 if "red" in parts else 0)  # bar.red: a destination and a predicate besides
        if n_ops >= 2:
            count_op = ops[2] if "red" in parts else ops[1]
            v, k = self._get(count_op, idx, 32)
            if not k.all() or not (v == self.total).all():
                self._soft(f"a barrier for part of the block ({inst.text})")
                self.fuzzy = True
                return False
        return True

    def _warp_sync(self, inst: _Inst, idx: np.ndarray) -> None:
        mask = 0xFFFF_FFFF
        if inst.operands:
            v, k = self._get(inst.operands[0], idx, 32)
            if len(idx) and (not k.all() or (v != v[0]).any()):
                self._soft(f"a __syncwarp with an unknown mask ({inst.text})")
                return
            if len(idx):
                mask = int(v[0]) & 0xFFFF_FFFF
        here = np.zeros(self.total, bool)
        here[idx] = True
        for w in np.unique(self.warp[idx]):
            lanes = np.arange(w * 32, min(w * 32 + 32, self.total))
            lanes = lanes[(mask >> (lanes % 32)) & 1 == 1]
            if (self.alive[lanes] & ~here[lanes]).any():
                self._soft(f"a __syncwarp that the lanes of its mask reach apart ({inst.text})")
                return
        self.ws[idx] += 1

    def _close(self, waiting: dict[int, np.ndarray]) -> None:
        """Every live thread waits at a barrier: the interval ends (bar.red results are computed)."""
        self.epoch += 1
        reds = [(pc, idx) for pc, idx in waiting.items() if "red" in self.insts[pc].opcode.split(".")]
        if not reds:
            return
        allp = np.concatenate([idx for _, idx in reds])
        inst0 = self.insts[reds[0][0]]
        ops = inst0.operands
        pv, pk = self._pred_operand(ops[-1], allp)
        parts = inst0.opcode.split(".")
        known = bool(pk.all()) and all(self.insts[pc].opcode == inst0.opcode for pc, _ in reds) and not self.fuzzy
        if "popc" in parts:
            val = int(pv.sum())
        elif "and" in parts:
            val = int(pv.all())
        else:
            val = int(pv.any())
        for pc, idx in reds:
            d = self.insts[pc].operands[0]
            self._set(d, idx, np.full(len(idx), val, np.int64), np.full(len(idx), known, bool))

    # -- registers --------------------------------------------------------------------------------------

    def _get(self, op: str, idx: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
        """(values, known) of operand ``op`` for the threads ``idx``. Where ``idx`` is the whole block the
        register's own arrays come back (not copies), and constants are shared read-only arrays: what this
        returns is read, never written in place."""
        form = _OPERANDS.get(op)
        if form is None:
            form = _operand(op)
        n = len(idx)
        kind = form[0]
        if kind == 0:  # a register, special or not
            s = self.special.get(op)
            if s is not None:
                return (s[0] if n == self.total else s[0][idx]), self._ones(n)
            v = self.v.get(op)
            if v is None:
                return self._zeros(n), self._nones(n)
            if n == self.total:
                return v, self.k[op]
            return v[idx], self.k[op][idx]
        if kind == 1:  # !operand
            v, k = self._get(form[1], idx, bits)
            return (v == 0).astype(np.int64), k
        if kind == 2:  # an integer
            return self._const(form[1], n), self._ones(n)
        arr = self.layout.arrays.get(op)  # a shared array's address, else unknown
        if arr is not None:
            return self._const(arr[0], n), self._ones(n)
        return self._zeros(n), self._nones(n)

    def _const(self, c: int, n: int) -> np.ndarray:
        got = self.consts.get((c, n))
        if got is None:
            got = self.consts[(c, n)] = np.full(n, c, np.int64)
            got.flags.writeable = False
        return got

    def _ones(self, n: int) -> np.ndarray:
        """All known: a shared read-only array."""
        got = self.trues.get(n)
        if got is None:
            got = self.trues[n] = np.ones(n, bool)
            got.flags.writeable = False
        return got

    def _nones(self, n: int) -> np.ndarray:
        got = self.falses.get(n)
        if got is None:
            got = self.falses[n] = np.zeros(n, bool)
            got.flags.writeable = False
        return got

    def _zeros(self, n: int) -> np.ndarray:
        return self._const(0, n)

    def _pred_operand(self, op: str, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v, k = self._get(op, idx, 1)
        return v != 0, k

    def _set(self, reg: str, idx: np.ndarray, v: np.ndarray, k: np.ndarray) -> None:
        arr = self.v.get(reg)
        if arr is None:
            arr = self.v[reg] = np.zeros(self.total, np.int64)
            self.k[reg] = np.zeros(self.total, bool)
        if len(idx) == self.total:
            arr[:] = v
            self.k[reg][:] = k
        else:
            arr[idx] = v
            self.k[reg][idx] = k

    def _unknown(self, inst: _Inst, idx: np.ndarray) -> None:
        for d in inst.dests():
            if d in self.k:
                self.k[d][idx] = False

    # -- one instruction ----------------------------------------------------------------------------------

    def _step(self, inst: _Inst, pc: int, idx: np.ndarray) -> None:
        head = inst.head
        if inst.guard is not None:
            holds, known = self._guard(inst, idx)
            if not known.all():
                self._unknown(inst, idx[~known])  # may or may not run: its results are unknown, its access unseen
                if self.bounds and pc in self.st.accesses and pc not in self.unfollowed:
                    self.unfollowed[pc] = (f"under a predicate on a value the run does not know{self._at(inst)}", -1)
                if self.sk is not None and head in ("st", "atom", "red", "cp", "stmatrix"):
                    self.sk[:] = False  # what it may have stored is not known
                if _shared_store(inst):
                    self._unseen(f"a shared store under an unknown condition ({inst.text})")
            idx = idx[holds]
            if not len(idx):
                return
        if head == "call" and _callee(inst) == "__assertfail":
            self._soft(f"an assert fails ({inst.text})")
            self.sure[idx] = False  # the kernel traps: what they do next is not made
            if self.bounds and not self.left:
                self.left = f"made only by threads past a failing assert{self._at(inst)}"
            return
        if self.held and pc in self.st.spec_selp:
            self._taken(inst, pc, idx)
        kind = self.kinds[pc]
        if kind == 4:
            return
        if kind == 2:
            self._memory(inst, pc, idx)
            return
        if kind == 3:
            self._unknown(inst, idx)
            self._bulk_memory(inst, pc, idx)
            return
        dests = inst.dests()
        if not dests:
            return
        if kind == 0:
            for d in dests:
                if d in self.k:
                    self.k[d][idx] = False
            return
        try:
            got = self._eval(inst, idx, pc)
        except (ValueError, IndexError, KeyError, OverflowError):
            got = None
        if got is None:
            for d in dests:
                self._set(d, idx, np.zeros(len(idx), np.int64), np.zeros(len(idx), bool))
            return
        for d, (v, k) in zip(dests, got):
            self._set(d, idx, v, k)

    def _eval(self, inst: _Inst, idx: np.ndarray, pc: int) -> list[tuple[np.ndarray, np.ndarray]] | None:
        got = self.st.opcodes[pc]
        if got is None:
            got = self.st.opcodes[pc] = _opcode(inst)
        parts, typ, plain = got[:3]
        if not plain:
            return None
        head = inst.head
        ops = inst.operands
        if got[5]:
            return self._float(head, parts, ops, idx)
        if head == "mov":
            if typ in _FLOATS or "{" in ops[0] or "{" in ops[1]:
                return None
            bits = _width(typ) if typ != "pred" else 1
            v, k = self._get(ops[1], idx, bits)
            return [(_norm(v, bits) if typ != "pred" else (v != 0).astype(np.int64), k)]
        if head == "cvta":
            v, k = self._get(ops[1], idx, 64)
            return [(v, k)]
        if head == "cvt":
            to, frm = parts[-2], parts[-1]
            if to[:1] not in "usb" or frm[:1] not in "usb" or any(p.startswith("r") and len(p) <= 3 for p in parts[1:-2]):
                return None
            fb, tb = _width(frm), _width(to)
            v, k = self._get(ops[1], idx, fb)
            v = _sx(v, fb) if frm[0] == "s" else _ux(v, fb)
            return [(_norm(v, tb), k)]
        if head == "setp":
            return self._setp(inst, parts, idx)
        if head == "selp":
            if typ in _FLOATS:
                return None
            bits = _width(typ)
            a, ka = self._get(ops[1], idx, bits)
            b, kb = self._get(ops[2], idx, bits)
            c, kc = self._pred_operand(ops[3], idx)
            return [(np.where(c, a, b), kc & np.where(c, ka, kb))]
        if head in ("shfl", "vote"):
            return self._lanes(inst, parts, idx)
        if typ == "pred":
            if head in ("and", "or", "xor", "not"):
                vals = [self._pred_operand(o, idx) for o in ops[1:]]
                k = vals[0][1]
                for x in vals[1:]:
                    k = k & x[1]
                if head == "not":
                    r = ~vals[0][0]
                else:
                    f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[head]
                    (a, ka), (b, kb) = vals[0], vals[1]
                    r = f(a, b)
                    if head != "xor":  # one known operand decides: false for and, true for or
                        decides = (lambda x: ~x) if head == "and" else (lambda x: x)
                        first, second = ka & decides(a), kb & decides(b)
                        k = k | first | second
                        r = np.where(first, a, np.where(second, b, r))
                return [(r.astype(np.int64), k)]
            return None
        if typ[:1] not in "usb" or not typ[1:].isdigit():
            return None
        bits = _width(typ)
        signed = typ[0] == "s"
        if head in ("popc", "brev", "bfind", "clz"):
            a, k = self._get(ops[1], idx, bits)
            return [(_bits(head, parts, _ux(a, bits) if bits < 64 else a, bits, signed), k)]
        if head in ("bfe", "bfi", "lop3", "prmt"):
            return self._bitfield(head, parts, ops, idx, bits, signed)
        args = [self._get(o, idx, bits) for o in ops[1:]]
        k = args[0][1] if args else np.ones(len(idx), bool)
        for x in args[1:]:
            k = k & x[1]
        a = args[0][0] if args else None
        b = args[1][0] if len(args) > 1 else None
        if head in ("add", "sub"):
            r = a + b if head == "add" else a - b
            return [(_norm(r, bits), k)]
        if head in ("mul", "mad"):
            c = args[2][0] if head == "mad" else None
            if "wide" in parts:
                if bits > 32:
                    return None
                ea, eb = (_sx(a, bits), _sx(b, bits)) if signed else (_ux(a, bits), _ux(b, bits))
                r = ea * eb
                out = 2 * bits
            elif "hi" in parts:
                if bits > 32:
                    return None
                if signed:
                    r = (_sx(a, bits) * _sx(b, bits)) >> bits
                else:
                    r = ((_ux(a, bits).astype(np.uint64) * _ux(b, bits).astype(np.uint64)) >> np.uint64(bits)).astype(np.int64)
                if head == "mad":
                    return None
                out = bits
            else:
                r = a * b
                out = bits
            if c is not None:
                r = r + c
            return [(_norm(r, out), k)]
        if head in ("shl", "shr"):
            s = _ux(b, 32) if bits <= 32 else (b & 0xFFFF_FFFF)
            big = s >= bits
            s = np.minimum(s, bits - 1)
            if head == "shl":
                r = np.where(big, 0, _norm(a, bits) << s)
            elif signed:
                r = _sx(a, bits) >> s
                r = np.where(big, np.where(_sx(a, bits) < 0, -1, 0), r)
            elif bits == 64:
                r = np.where(big, 0, (a.astype(np.uint64) >> s.astype(np.uint64)).astype(np.int64))
            else:
                r = np.where(big, 0, _ux(a, bits) >> s)
            return [(_norm(r, bits), k)]
        if head in ("and", "or", "xor"):
            f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[head]
            return [(_norm(f(a, b), bits), k)]
        if head in ("not", "neg", "abs"):
            if head == "not":
                r = ~a
            elif head == "neg":
                r = -a
            else:
                r = np.abs(_sx(a, bits))
            return [(_norm(r, bits), k)]
        if head in ("min", "max"):
            if bits == 64 and not signed:
                ua, ub = a.astype(np.uint64), b.astype(np.uint64)
                r = (np.minimum(ua, ub) if head == "min" else np.maximum(ua, ub)).astype(np.int64)
            else:
                ia, ib = (_sx(a, bits), _sx(b, bits)) if signed else (_ux(a, bits), _ux(b, bits))
                r = np.minimum(ia, ib) if head == "min" else np.maximum(ia, ib)
            return [(_norm(r, bits), k)]
        if head in ("div", "rem"):
            if bits == 64 and not signed:
                ua, ub = a.astype(np.uint64), b.astype(np.uint64)
                zero = ub == 0
                ub = np.where(zero, np.uint64(1), ub)
                r = (ua // ub if head == "div" else ua % ub).astype(np.int64)
            else:
                ia, ib = (_sx(a, bits), _sx(b, bits)) if signed else (_ux(a, bits), _ux(b, bits))
                zero = ib == 0
                ib = np.where(zero, 1, ib)
                q = np.abs(ia) // np.abs(ib)
                if head == "div":
                    r = np.where((ia < 0) != (ib < 0), -q, q)
                else:
                    m = np.abs(ia) % np.abs(ib)
                    r = np.where(ia < 0, -m, m)
            return [(_norm(r, bits), k & ~zero)]
        return None

    def _float(self, head: str, parts: list[str], ops: tuple[str, ...] | list[str], idx: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """An f32/f64 instruction of :func:`_float_form`: its operands' bits read as floats (numpy's IEEE
        arithmetic, rounded to nearest; ``.approx`` forms computed exactly, ``.ftz`` as if no operand were
        subnormal, ``.sat`` clamped to [0, 1]), its result written back as bits."""
        typ = parts[-1]
        if head == "cvt":
            to, frm = parts[-2], parts[-1]
            v, k = self._get(ops[1], idx, _width(frm))
            if frm in _FTYPES:
                x = _as_float(v, frm).astype(np.float64)
            else:
                x = (_sx(v, _width(frm)) if frm[0] == "s" else _ux(v, _width(frm))).astype(np.float64)
            mode = next((p for p in parts[1:-2] if p in ("rni", "rzi", "rmi", "rpi")), None)
            if mode is not None:
                x = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[mode](x)
            if to in _FTYPES:
                toward = next((p for p in parts if p in _DIRECTED), None)
                if toward is not None:
                    x = _round_f32(x, toward).astype(np.float64)
                if "sat" in parts:
                    x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
                return [(_float_bits(x, to), k)]
            if mode is None:
                return None
            bits = _width(to)
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if to[0] == "s" else (0, (1 << bits) - 1)
            x = np.where(np.isnan(x), 0.0, np.clip(x, lo, hi))
            if bits == 64 and to[0] == "u":
                return [(np.where(x >= 2.0**63, (x - 2.0**64), x).astype(np.int64), k)]
            return [(_norm(x.astype(np.int64), bits), k)]
        bits = _width(typ)
        if head == "mov":
            v, k = self._get(ops[1], idx, bits)
            return [(_norm(v, bits), k)]
        if head == "selp":
            a, ka = self._get(ops[1], idx, bits)
            b, kb = self._get(ops[2], idx, bits)
            c, kc = self._pred_operand(ops[3], idx)
            return [(np.where(c, a, b), kc & np.where(c, ka, kb))]
        if head == "setp":
            return self._setp_float(parts, ops, idx)
        args = [self._get(o, idx, bits) for o in ops[1:]]
        k = args[0][1]
        for _v, kk in args[1:]:
            k = k & kk
        dt = np.float32 if typ == "f32" else np.float64
        x = [_as_float(v, typ) for v, _k in args]
        toward = next((p for p in parts if p in _DIRECTED), None)
        if toward is not None:  # an f32 result: exact in float64 (up to an fma's last bit), rounded that way
            w = [a.astype(np.float64) for a in x]
            if head in ("fma", "mad") and len(w) == 3:
                e = w[0] * w[1] + w[2]
            elif head == "sqrt" and len(w) == 1:
                e = np.sqrt(w[0])
            elif len(w) == 2 and head in ("add", "sub", "mul", "div"):
                e = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[head](w[0], w[1])
            else:
                return None
            return [(_float_bits(_round_f32(e, toward), "f32"), k)]
        if head in ("add", "sub", "mul", "div", "min", "max", "copysign") and len(x) != 2:
            return None
        if head == "add":
            r = x[0] + x[1]
        elif head == "sub":
            r = x[0] - x[1]
        elif head == "mul":
            r = x[0] * x[1]
        elif head in ("fma", "mad"):
            if len(x) != 3:
                return None
            r = (x[0].astype(np.float64) * x[1].astype(np.float64) + x[2].astype(np.float64)).astype(dt)
        elif head == "div":
            r = x[0] / x[1]
        elif head == "min":
            r = np.fmin(x[0], x[1])
        elif head == "max":
            r = np.fmax(x[0], x[1])
        elif head == "copysign":  # the magnitude of the second, the sign of the first
            r = np.copysign(x[1], x[0])
        else:
            f = {"neg": np.negative, "abs": np.abs, "rcp": lambda a: dt(1) / a, "sqrt": np.sqrt,
                 "rsqrt": lambda a: dt(1) / np.sqrt(a), "ex2": np.exp2, "lg2": np.log2, "sin": np.sin,
                 "cos": np.cos, "tanh": np.tanh}[head]  # fmt: skip
            r = f(x[0])
        r = np.asarray(r, dt)
        if "sat" in parts:
            r = np.where(np.isnan(r), dt(0), np.clip(r, dt(0), dt(1)))
        return [(_float_bits(r, typ), k)]

    def _setp_float(self, parts: list[str], ops: tuple[str, ...] | list[str], idx: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """``setp`` of two floats: ordered compares false where either is NaN, the ``u`` forms true there,
        ``num``/``nan`` whether neither/either is; a combining ``and``/``or``/``xor`` as for integers."""
        cmp, typ = parts[1], parts[-1]
        base = cmp[:-1] if cmp in ("equ", "neu", "ltu", "leu", "gtu", "geu") else cmp
        if base not in ("eq", "ne", "lt", "le", "gt", "ge", "num", "nan"):
            return None
        bits = _width(typ)
        a, ka = self._get(ops[1], idx, bits)
        b, kb = self._get(ops[2], idx, bits)
        fa, fb = _as_float(a, typ), _as_float(b, typ)
        nan = np.isnan(fa) | np.isnan(fb)
        if base == "num":
            r = ~nan
        elif base == "nan":
            r = nan
        else:
            r = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
                 "ge": np.greater_equal}[base](fa, fb)  # fmt: skip
            r = (r | nan) if base != cmp else (r & ~nan)
        return self._setp_out(parts, ops, idx, r, ka & kb)

    def _setp_out(self, parts: list[str], ops: tuple[str, ...] | list[str], idx: np.ndarray, r: np.ndarray,
                  k: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
        """A ``setp``'s predicates from its compare ``r`` (known ``k``): ``p`` and, where named (``p|q``),
        ``q = !r``, each combined with the predicate operand by ``.and``/``.or``/``.xor``."""
        dests = [d.strip() for d in ops[0].split("|")]
        outs = [r, ~r]
        boolop = parts[2] if len(parts) > 3 and parts[2] in ("and", "or", "xor") else None
        if boolop:
            c, kc = self._pred_operand(ops[3], idx)
            f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[boolop]
            outs = [f(o, c) for o in outs]
            k = k & kc
        return [(o.astype(np.int64), k) for o in outs[: len(dests)]]

    def _bitfield(self, head: str, parts: list[str], ops: tuple[str, ...], idx: np.ndarray, bits: int,
                  signed: bool) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """``bfe``, ``bfi``, ``lop3`` and ``prmt`` (the default mode), as the PTX ISA defines them. CUTLASS's
        predicated tile iterators pack their guard predicates into a word with ``bfi`` and test bits of it
        (the ``src-size`` of each ``cp.async``): without these a run knew no copy size there."""
        if "|" in ops[0] or (head == "prmt" and len(parts) > 2):
            return None  # lop3's predicate form; prmt's f4e/b4e/rc8/ecl/ecr/rc16 modes
        n = len(ops) - 1
        if (head, n) not in (("bfe", 3), ("bfi", 4), ("lop3", 4), ("prmt", 3)):
            return None
        args = [self._get(o, idx, bits if i < (2 if head == "bfi" else 1) or head in ("lop3", "prmt") else 32)
                for i, o in enumerate(ops[1:])]
        k = args[0][1]
        for x in args[1:]:
            k = k & x[1]
        if head in ("bfe", "bfi"):
            cols = [[int(v) for v in x[0].tolist()] for x in args]
            if head == "bfe":
                out = [_bfe(a, pos, ln, bits, signed) for a, pos, ln in zip(*cols)]
            else:
                out = [_bfi(a, b, pos, ln, bits) for a, b, pos, ln in zip(*cols)]
            return [(np.array([_signed(v, bits) for v in out], dtype=np.int64), k)]
        if head == "lop3":
            lut = args[3][0]
            a, b, c = (_norm(x[0], bits) for x in args[:3])
            r = np.zeros(len(idx), np.int64)
            for sel in range(8):
                hit = ((lut >> sel) & 1).astype(bool)
                term = (a if sel & 4 else ~a) & (b if sel & 2 else ~b) & (c if sel & 1 else ~c)
                r = np.where(hit, r | term, r)
            return [(_norm(r, bits), k)]
        # prmt.b32 d, a, b, c: the bytes of {b, a} (a the low four), picked by c's four low nibbles; a
        # nibble's top bit replicates the picked byte's sign bit
        a, b, c = (_ux(x[0], 32) for x in args)
        pool = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
        r = np.zeros(len(idx), np.int64)
        for i in range(4):
            sel = (c >> (4 * i)) & 0xF
            byte = np.choose(sel & 7, pool)
            byte = np.where(sel & 8, np.where(byte & 0x80, 0xFF, 0), byte)
            r |= byte << (8 * i)
        return [(_norm(r, 32), k)]

    def _lanes(self, inst: _Inst, parts: list[str], idx: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """``shfl.sync`` (idx, up, down, bfly: the source lane's value, and whether it was in range) and
        ``vote.sync`` (ballot, any, all, uni over the lanes of the mask): known for a thread where every
        lane it reads is at this instruction with it (the same group) and every value it reads is known."""
        ops = inst.operands
        total = self.total
        here = np.zeros(total, bool)
        here[idx] = True
        lane = idx % 32
        base = idx - lane
        if inst.head == "shfl":
            if len(parts) < 4 or parts[1] != "sync" or parts[-1] != "b32" or len(ops) < 5:
                return None
            mode = parts[2]
            b, kb = self._get(ops[2], idx, 32)
            c, kc = self._get(ops[3], idx, 32)
            m, km = self._get(ops[4], idx, 32)
            seg = (c >> 8) & 0x1F
            top = (lane & seg) | (c & 0x1F & ~seg)
            low = lane & seg
            if mode == "idx":
                j = low | (b & 0x1F & ~seg)
                ok = j <= top
            elif mode == "up":
                j = lane - b
                ok = j >= top
            elif mode == "down":
                j = lane + b
                ok = j <= top
            elif mode == "bfly":
                j = lane ^ (b & 0x1F)
                ok = j <= top
            else:
                return None
            j = np.where(ok, j, lane)
            src = base + j
            inside = (src >= 0) & (src < total)
            src = np.where(inside, src, idx)
            v = self.v.get(ops[1])
            if v is None and self.special.get(ops[1]) is None:
                kv = np.zeros(len(idx), bool)
                val = np.zeros(len(idx), np.int64)
            else:
                full, fk = (self.special[ops[1]][0], np.ones(total, bool)) if v is None else (v, self.k[ops[1]])
                val, kv = full[src], fk[src]
            in_mask = ((m >> j) & 1) == 1
            k = kb & kc & km & inside & here[src] & kv & in_mask
            dests = [d.strip() for d in ops[0].split("|")]
            out = [(_norm(val, 32), k), (ok.astype(np.int64), kb & kc)]
            return out[: len(dests)]
        # vote
        if len(parts) < 3 or parts[1] != "sync" or len(ops) < 3:
            return None
        mode = parts[2]
        p, kp = self._pred_operand(ops[1], idx)
        m, km = self._get(ops[2], idx, 32)
        bit = np.zeros(total, np.int64)
        known = np.zeros(total, bool)
        bit[idx] = p.astype(np.int64) << lane
        known[idx] = kp
        warps = self.warp[idx]
        out_v = np.zeros(len(idx), np.int64)
        out_k = np.zeros(len(idx), bool)
        for w in np.unique(warps):
            sel = warps == w
            mask = int(m[sel][0]) & 0xFFFF_FFFF
            if not km[sel].all() or (m[sel] != m[sel][0]).any():
                continue
            lanes = np.arange(w * 32, min(w * 32 + 32, total))
            lanes = lanes[(mask >> (lanes % 32)) & 1 == 1]
            if not (here[lanes] & known[lanes]).all():
                continue
            ballot = int(np.bitwise_or.reduce(bit[lanes])) if len(lanes) else 0
            if mode == "ballot":
                r = ballot
            elif mode == "any":
                r = int(ballot != 0)
            elif mode == "all":
                r = int(ballot == int(np.bitwise_or.reduce(np.left_shift(1, lanes % 32)))) if len(lanes) else 1
            elif mode == "uni":
                r = int(ballot == 0 or ballot == int(np.bitwise_or.reduce(np.left_shift(1, lanes % 32))))
            else:
                return None
            out_v[sel], out_k[sel] = r, True
        return [(out_v, out_k)]

    def _setp(self, inst: _Inst, parts: list[str], idx: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]] | None:
        cmp, typ = parts[1], parts[-1]
        ops = inst.operands
        if typ[:1] not in "usb" or cmp not in _CMP:
            return None
        bits = _width(typ)
        a, ka = self._get(ops[1], idx, bits)
        b, kb = self._get(ops[2], idx, bits)
        if typ[0] == "s" and cmp not in ("lo", "ls", "hi", "hs"):
            a, b = _sx(a, bits), _sx(b, bits)
        elif bits == 64:
            a, b = a.astype(np.uint64), b.astype(np.uint64)
        else:
            a, b = _ux(a, bits), _ux(b, bits)
        return self._setp_out(parts, ops, idx, _CMP[cmp](a, b), ka & kb)

    # -- memory -------------------------------------------------------------------------------------------

    def _memory(self, inst: _Inst, pc: int, idx: np.ndarray) -> None:
        got = self.st.opcodes[pc]
        if got is None:
            got = self.st.opcodes[pc] = _opcode(inst)
        parts = got[0]
        head = inst.head
        loads = head in ("ld", "atom", "ldu")
        if loads and "param" in parts:
            self._ld_param(inst, parts, idx)
            return
        glob = "global" in parts
        update = self.rmw and (pc in self.grmw or pc in self.rmw_loads or head in ("atom", "red"))
        fill = bool(self.fills) and head in ("ld", "ldu") and (glob or not got[3])
        if got[3] and not (glob and (self.bounds or update or fill)):
            if loads:
                self._unknown(inst, idx)
            return
        # a generic address is shared when it is one of the synthetic shared ones, global when a buffer's
        addr_op = inst.operands[1] if loads else inst.operands[0]
        a, k = self._address(addr_op, idx)
        if self.bounds and len(idx) and pc not in self.ran and pc in self.st.accesses:
            sure = self.sure[idx]
            if (k & sure).any():
                self.ran.add(pc)
            elif pc not in self.unfollowed:
                self.unfollowed[pc] = ("its address is not known" if sure.any() else self.left or "made only by threads it stopped following", -1)
        if loads:  # what it loads is unknown (but where a filling or shared memory's contents say), after
            if a is self.v.get(addr_op.strip("[] ")):  # its address is read: ``ld %r7, [%r7]``
                a, k = a.copy(), k.copy()  # (a register's own arrays, which the next line changes)
            self._unknown(inst, idx)
        mine = _WRITE if head == "st" else _READ if head in ("ld", "ldu") else _ATOMIC
        width = got[4]
        if self.bounds:
            plain = self.wlog is not None and mine == _WRITE and not any(q in parts for q in (*_ORDERED, "volatile"))
            self._global(mine, pc, idx, a, k, width, plain)
        if update:
            self._update(pc, idx, a, k, width, head)
        if not glob and (self.bounds or self.races):
            self._shared(mine, pc, idx, a, k, width)
        if fill:
            self._fill_load(inst, parts, idx, a, k)
        if self.track and not glob:
            self._values(inst, parts, idx, a, k, width)

    def _fill_load(self, inst: _Inst, parts: list[str], idx: np.ndarray, a: np.ndarray, k: np.ndarray) -> None:
        """A load of integers from a filled input buffer (:attr:`BlockLaunch.fills`): each thread whose
        address is known and inside it reads the filling's element there."""
        dests = inst.dests()
        typ = parts[-1]
        if not self.fills or not dests or (typ[:1] not in "usb" and typ not in _FTYPES) or not typ[1:].isdigit():
            return
        bits = _width(typ)
        each = bits // 8
        at = np.where(k & (a >= _GLOBAL_FLOOR), a >> 41, -1)
        first = int(at[0]) if len(at) else -1
        # as a rule every thread loads from one buffer: its filling alone is looked at
        one = bool(len(at)) and bool((at == first).all())
        places = (first,) if one else np.unique(at).tolist()
        for position in places:
            fill = self.fills.get(position)
            if fill is None:
                continue
            _, elem, inner, pattern, _text = fill
            if elem != each:
                continue
            if one:  # every thread: no selection to make
                t, off = idx, a - ((2 * position + 1) << 40)
            else:
                sel = at == position
                t, off = idx[sel], a[sel] - ((2 * position + 1) << 40)
            size = int(self.g_ext[position]) if position < len(self.g_ext) else -1
            values = self.fill_values.get(position)
            if values is None:  # made once per run: a filling holds a pattern of up to a row's elements
                values = self.fill_values[position] = np.asarray(pattern, np.int64)
            for j, d in enumerate(dests):
                o = off + j * each
                ok = (o >= 0) & (o % each == 0) & ((size < 0) | (o + each <= size))
                if ok.all():  # every thread inside (the rule): no selection to make
                    self._set(d, t, _norm(values[(o // each // inner) % len(values)], bits), np.ones(len(t), bool))
                elif ok.any():
                    e = o[ok] // each
                    self._set(d, t[ok], _norm(values[(e // inner) % len(values)], bits), np.ones(int(ok.sum()), bool))

    def _words(self, a: np.ndarray, k: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """(word, whole) of shared accesses of ``width`` bytes at addresses ``a``: the first 4-byte word of
        each, and whether it is known, inside its array and word-aligned."""
        lay = self.layout
        rel = a - _BASE
        inside = k & (rel >= 0) & (rel < lay.span)
        region = np.where(inside, rel >> lay.shift, 0)
        off = (rel & lay.mask) - lay.half
        ok = inside & (off >= 0) & (off + width <= lay.sizes[region]) & (off % 4 == 0)
        return np.where(ok, (lay.starts[region] + off) // 4, 0), ok

    def _forget(self, a: np.ndarray | None, k: np.ndarray | None, width: int) -> None:
        """What shared memory holds at these accesses is no longer known (everywhere, where an address is
        not known: a store there may have touched any word)."""
        if self.sk is None:
            return
        if a is None or k is None:
            self.sk[:] = False
            return
        word, ok = self._words(a, k, max(width, 4) if width % 4 == 0 else 4)
        rel = a - _BASE
        if not ok.all() and ((~k) | ((rel >= 0) & (rel < self.layout.span))).any():
            self.sk[:] = False  # an unknown (or unaligned) shared address
            return
        for j in range(max(1, -(-width // 4))):
            self.sk[word[ok] + j] = False

    def _values(self, inst: _Inst, parts: list[str], idx: np.ndarray, a: np.ndarray, k: np.ndarray, width: int) -> None:
        """What a shared (or generic) store leaves in shared memory and a load reads back from it, per
        4-byte word: 32- and 64-bit integer (and f32/f64) elements; anything else makes the words it touches unknown."""
        head = inst.head
        sv, sk = self.sv, self.sk
        assert sv is not None and sk is not None
        typ = parts[-1]
        integer = (typ[:1] in "usb" and typ[1:].isdigit()) or typ in _FTYPES  # (a float is its bits)
        if head in ("ld", "ldu"):
            dests = inst.dests()
            if not dests or not integer:
                return
            each = width // len(dests)
            if each not in (4, 8):
                return
            word, ok = self._words(a, k, width)
            if not ok.any():
                return
            t, w = idx[ok], word[ok]
            for j, d in enumerate(dests):
                if each == 4:
                    v, kv = sv[w + j], sk[w + j]
                else:
                    lo, hi = w + 2 * j, w + 2 * j + 1
                    v, kv = sv[lo] | (sv[hi] << 32), sk[lo] & sk[hi]
                self._set(d, t, _norm(v, _width(typ)) if each == 4 else v, kv)
            return
        if head != "st" or len(inst.operands) < 2:
            self._forget(a, k, width)  # an atomic: its result is not computed
            return
        word, ok = self._words(a, k, width)
        rel = a - _BASE
        if not ok.all() and ((~k) | ((rel >= 0) & (rel < self.layout.span))).any():
            sk[:] = False  # a store at an unknown (or unaligned) shared address: any word may have changed
        if not ok.any():
            return
        src = inst.operands[1]
        elems = [e.strip() for e in src.strip("{} ").split(",")] if src.startswith("{") else [src]
        each = width // len(elems)
        t, w = idx[ok], word[ok]
        for j, e in enumerate(elems):
            if not integer or each not in (4, 8):
                for b in range(j * each // 4, max(j * each // 4 + 1, -(-(j + 1) * each // 4))):
                    sk[w + b] = False
                continue
            v, kv = self._get(e, t, each * 8)
            if each == 4:
                sv[w + j], sk[w + j] = v & 0xFFFF_FFFF, kv
            else:
                lo, hi = w + 2 * j, w + 2 * j + 1
                sv[lo], sv[hi] = v & 0xFFFF_FFFF, (v >> 32) & 0xFFFF_FFFF
                sk[lo], sk[hi] = kv, kv

    def _update(self, pc: int, idx: np.ndarray, a: np.ndarray, k: np.ndarray, width: int, head: str) -> None:
        """A global read-modify-write's load (the address each thread loaded kept), its store (an update
        where the thread stores at the address it loaded) or an atomic, at addresses ``a`` of threads
        ``idx``: recorded where known, inside a parameter's buffer, by a thread sure to make it."""
        ext = self.g_ext
        pos = np.where(a >= _GLOBAL_FLOOR, a >> 41, len(ext) - 1)
        pos = np.where(pos < len(ext), pos, len(ext) - 1)
        off = a - ((2 * pos + 1) << 40)
        size = ext[pos]
        ok = k & self.sure[idx] & self.g_is[pos] & (off >= 0)
        ok &= (size < 0) | (off + width <= size)
        if pc in self.rmw_loads:
            got = self.loaded.get(pc)
            if got is None:
                got = self.loaded[pc] = np.full(self.total, -1, np.int64)
            got[idx] = np.where(ok, a, -1)
            return
        atomic = head != "st"
        if not atomic:
            got = self.loaded.get(self.grmw[pc])
            if got is None:
                return
            ok &= got[idx] == a
            got[idx] = -1  # the next update loads again
        if ok.any():
            t = idx[ok]
            self.log.add(self.cta_index, t, a[ok], width, self.epoch, self.ws[t], pc, atomic)  # type: ignore[union-attr]

    def _shared(self, mine: int, pc: int, idx: np.ndarray, a: np.ndarray, k: np.ndarray, width: int, copy: bool = False) -> None:
        """Accesses of ``width`` bytes at shared addresses ``a`` (where known) by threads ``idx``: checked
        against their array (a bounds run), recorded (a race run; ``copy``: the shared write of a
        ``cp.async``, in flight until its thread's wait completes it)."""
        lay = self.layout
        rel = a - _BASE
        ok = k & (rel >= 0) & (rel < lay.span)  # the known shared addresses (every one, as a rule)
        if self.races and not k.all():
            inst = self.insts[pc]
            if mine != _READ and _may_initialise(mine, inst):
                self._unseen(f"a shared store at an unknown address ({inst.text})")
            elif mine == _READ and not self.uninit_skip and "shared" in inst.opcode.split("."):
                self.uninit_skip = f"a shared read at an unknown address ({inst.text})"  # that read is not checked
        if ok.all():
            t = idx
        elif ok.any():
            t, rel = idx[ok], rel[ok]
        else:
            return
        region = rel >> lay.shift
        off = (rel & lay.mask) - lay.half
        r = int(region[0])
        if not (region == r).all():
            self._shared_regions(mine, pc, t, region, off, width, copy)
            return
        # one array (as a rule): its size and start are numbers
        size = int(lay.sizes[r])
        within = off.min() >= 0 and off.max() + width <= size  # every byte of every access inside it
        if self.bounds and lay.checked[r] and not within:
            bad = ((off < 0) | (off + width > size)) & self.sure[t]
            if bad.any() and (pc, "s", r) not in self.oob:
                j = int(np.flatnonzero(bad)[0])
                self.oob[(pc, "s", r)] = (int(t[j]), int(off[j]), width, mine, 0)
        if not self.races:
            return
        step = self.unit
        if width > step:
            t = np.repeat(t, width // step)
            off = (off[:, None] + np.arange(0, width, step)).ravel()
        if not within:
            inside = (off >= 0) & (off < size)
            t, off = t[inside], off[inside]
        if len(t):
            if copy:
                self._issue(pc, t, off + int(lay.starts[r]))
            else:
                self._access(mine, pc, t, off + int(lay.starts[r]))

    def _shared_regions(self, mine: int, pc: int, t: np.ndarray, region: np.ndarray, off: np.ndarray, width: int,
                        copy: bool = False) -> None:  # fmt: skip
        """:meth:`_shared` of accesses to several arrays: ``region`` and ``off`` (from its start) of each."""
        lay = self.layout
        if self.bounds:
            bad = lay.checked[region] & ((off < 0) | (off + width > lay.sizes[region])) & self.sure[t]
            if bad.any():
                for r in np.unique(region[bad]):
                    key = (pc, "s", int(r))
                    if key not in self.oob:
                        j = int(np.flatnonzero(bad & (region == r))[0])
                        self.oob[key] = (int(t[j]), int(off[j]), width, mine, 0)
        if not self.races:
            return
        step = self.unit
        if width > step:
            t = np.repeat(t, width // step)
            region = np.repeat(region, width // step)
            off = (off[:, None] + np.arange(0, width, step)).ravel()
        inside = (off >= 0) & (off < lay.sizes[region])
        t, off = t[inside], lay.starts[region[inside]] + off[inside]
        if len(t):
            if copy:
                self._issue(pc, t, off)
            else:
                self._access(mine, pc, t, off)

    # -- cp.async -------------------------------------------------------------------------------------------

    def _issue(self, pc: int, t: np.ndarray, off: np.ndarray) -> None:
        """The shared write of a ``cp.async`` by threads ``t`` at offsets ``off`` (one per unit): it may land
        at once (recorded as a write in this interval) or at any time until the wait that completes its
        group (in flight: any access of another thread to those units races with it until then)."""
        self._access(_WRITE, pc, t, off)
        unit = off // self.unit
        if self.pend_t is None:
            self.pend_t = np.full(len(self.rec), -1, np.int32)
            self.pend_pc = np.full(len(self.rec), -1, np.int32)
            self.pend_g = np.full(len(self.rec), -1, np.int64)
        assert self.pend_pc is not None and self.pend_g is not None
        self.pend_t[unit] = t
        self.pend_pc[unit] = pc
        self.pend_g[unit] = self.commits[t]
        self.copies.append((t, unit, self.commits[t], pc))

    def _async_group(self, what: str, ops: tuple[str, ...], idx: np.ndarray) -> None:
        """``cp.async.commit_group`` (the threads' copies since their last commit form a group),
        ``wait_group N`` (each thread's groups but its newest N are complete), ``wait_all`` (every copy
        of the thread, committed or not): a complete copy's write has landed, visible to its own thread
        (recorded as a write in this interval; other threads see it after a barrier)."""
        if what == "commit_group":
            self.commits[idx] += 1
            return
        if not self.copies:
            return
        if what == "wait_all":
            keep_from = np.full(self.total, np.iinfo(np.int64).max, np.int64)
        else:
            c = _imm(ops[0]) if ops else None
            if c is None:
                self.waits_unknown = True
                return  # not an immediate: nothing completes that is known
            keep_from = self.commits - c  # groups below this are complete
        here = np.zeros(self.total, bool)
        here[idx] = True
        left: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
        assert self.pend_t is not None and self.pend_pc is not None
        for t, unit, group, pc in self.copies:
            done = here[t] & (group < keep_from[t])
            if done.any():
                dt, du = t[done], unit[done]
                # the unit stays pending where a newer copy of the same thread (a later group) went there since
                assert self.pend_g is not None
                mine = (self.pend_t[du] == dt) & (self.pend_g[du] <= group[done])
                self.pend_t[du[mine]] = -1
                self.pend_pc[du[mine]] = -1
                self._access(_WRITE, pc, dt, du * self.unit, landing=True)
                if not done.all():
                    left.append((t[~done], unit[~done], group[~done], pc))
            else:
                left.append((t, unit, group, pc))
        self.copies = left
        if not left:
            self.pend_t[:] = -1
            self.pend_pc[:] = -1

    def _in_flight(self, mine: int, pc: int, t: np.ndarray, unit: np.ndarray, off: np.ndarray, own: bool = True) -> None:
        """An access of units a ``cp.async`` may still be writing: of another thread's copy, a race with it
        (scope ``lane`` or ``warp``); of the accessing thread's own copy, before a ``cp.async.wait_group``
        completed its group, a hazard of its own (scope ``self``; not where a wait's count was unknown)."""
        assert self.pend_t is not None and self.pend_pc is not None
        owner = self.pend_t[unit]
        hit = owner >= 0
        if not hit.any():
            return
        mine_own = hit & (owner == t) if own else np.zeros(len(t), bool)
        if mine_own.any() and not self.waits_unknown:
            cpc = self.pend_pc[unit]
            order = "raw" if mine == _READ else "waw"
            for first_pc in np.unique(cpc[mine_own]):
                slot = self.hits.setdefault((int(first_pc), pc, order), {})
                if "self" not in slot:
                    j = int(np.flatnonzero(mine_own & (cpc == first_pc))[0])
                    slot["self"] = (int(owner[j]), int(t[j]), int(off[j]), self.epoch)
        other = hit & (owner != t)
        if other.any():
            cpc = self.pend_pc[unit]
            same = (owner >> 5) == (t >> 5)
            order = "raw" if mine == _READ else "waw"
            for first_pc in np.unique(cpc[other]):
                at = other & (cpc == first_pc)
                slot = self.hits.setdefault((int(first_pc), pc, order), {})
                for scope, which in (("lane", at & same), ("warp", at & ~same)):
                    if scope not in slot and which.any():
                        j = int(np.flatnonzero(which)[0])
                        slot[scope] = (int(owner[j]), int(t[j]), int(off[j]), self.epoch)

    def _global(self, mine: int, pc: int, idx: np.ndarray, a: np.ndarray, k: np.ndarray, width: int | np.ndarray,
                log: bool = False) -> None:
        """Accesses of ``width`` bytes at addresses ``a`` by threads ``idx``, checked against the buffer of
        the parameter whose synthetic region each lies in (where its extent is known). ``log``: a plain store,
        whose bytes inside their buffer go into :attr:`wlog` (BLOCK_WRITE_OVERLAP; one past it is this check's)."""
        ext = self.g_ext
        if len(ext) <= 1:
            return
        ok = k & (a >= _GLOBAL_FLOOR) & self.sure[idx]
        if not ok.any():  # no buffer's address (a shared access, say)
            return
        pos = np.where(ok, a >> 41, len(ext) - 1)
        pos = np.where(pos < len(ext), pos, len(ext) - 1)  # the last slot is never a buffer's: unchecked
        size = ext[pos]
        ok &= size >= 0
        if not ok.any():
            return
        off = a - ((2 * pos + 1) << 40)
        end = off + width
        bad = ok & ((off < 0) | (end > size))
        if bad.any():
            for r in np.unique(pos[bad]):
                key = (pc, "g", int(r))
                if key not in self.oob:
                    j = int(np.flatnonzero(bad & (pos == r))[0])
                    w = int(width[j]) if isinstance(width, np.ndarray) else width
                    self.oob[key] = (int(idx[j]), int(off[j]), w, mine, 0)
        if log and self.wlog is not None and (inside := ok & ~bad).any():
            self.wlog.add(self.wlog_block, idx[inside], a[inside], int(width), pc)
        if mine == _READ or not self.g_ranges:
            return
        for r, (inner, length, start, stop, _) in self.g_ranges.items():
            sel = ok & ~bad & (pos == r)
            if not sel.any() or (pc, "w", r) in self.oob:
                continue
            elem = max(1, self.buffers[r][3])
            first = (off // elem // inner) % length
            last = ((end - 1) // elem // inner) % length
            out = sel & ((first < start) | (first >= stop) | (last < start) | (last >= stop))
            if out.any():
                j = int(np.flatnonzero(out)[0])
                w = int(width[j]) if isinstance(width, np.ndarray) else width
                at = int(first[j]) if not start <= first[j] < stop else int(last[j])
                self.oob[(pc, "w", r)] = (int(idx[j]), int(off[j]), w, mine, at)

    def _wmma(self, inst: _Inst, pc: int, idx: np.ndarray, parts: list[str]) -> None:
        """A bounds or race run through ``wmma.load``/``wmma.store``: the warp's tile (rows x columns of the
        matrix, ``stride`` elements from one row, or column, to the next), each element by one lane. Which
        lane holds which element is not specified (a fragment is opaque): element ``e`` of the tile in row
        order goes to lane ``e % 32``, the same for a load and a store of one shape, so a lane that stores a
        tile and loads it back meets only its own elements; what another warp reads or writes in that tile,
        and the tile's bounds, are what a run checks. Where the form is not read, a store to shared memory
        makes its writes unseen from there."""
        form = _wmma_form(parts)
        shared_ok = "global" not in parts  # .shared, or a generic address that may be shared
        global_ok = not any(q.startswith("shared") for q in parts)
        ops = inst.operands
        if form is None or len(ops) < 2:
            if parts[1:2] == ["store"] and shared_ok:
                self._forget(None, None, 0)
                self._unseen(f"a shared store of a form not read here ({inst.text})")
            return
        store, rows, cols, row_major, size = form
        a, k = self._address(ops[0] if store else ops[1], idx)
        if len(ops) >= 3:
            stride, ks = self._get(ops[2], idx, 32)
            k = k & ks
        else:  # the default stride: the matrix's own width (row-major) or height
            stride = np.full(len(idx), cols if row_major else rows, np.int64)
        mine = _WRITE if store else _READ
        lane = idx % 32
        for j in range(rows * cols // 32):
            e = lane + 32 * j
            r, c = e // cols, e % cols
            at = a + ((r * stride + c) if row_major else (c * stride + r)) * size
            if self.bounds and global_ok:
                self._global(mine, pc, idx, at, k, size, self.wlog is not None and store)
            if shared_ok and (self.bounds or self.races):
                self._shared(mine, pc, idx, at, k, size)
            if store and shared_ok:
                self._forget(at, k, size)

    def _bulk_memory(self, inst: _Inst, pc: int, idx: np.ndarray) -> None:
        """A bounds run through ``cp.async`` (a global read of its ``src-size`` bytes, a shared write of
        its ``cp-size``), ``cp.async.bulk`` (not tensor) and ``ldmatrix``/``stmatrix`` (16 bytes at each
        row address of lanes ``0 .. 8 * num - 1``)."""
        if not self.bounds and not self.races and self.sk is None:
            return
        parts = inst.opcode.split(".")
        ops = inst.operands
        head = inst.head
        if head == "wmma":
            self._wmma(inst, pc, idx, parts)
            return
        if head in ("ldmatrix", "stmatrix"):
            num = next((int(p[1:]) for p in parts if p in ("x1", "x2", "x4")), 0)
            if "m8n8" not in parts or not num or len(ops) < 2:
                if head == "stmatrix":
                    self._forget(None, None, 0)
                    self._unseen(f"a shared store of a form not read here ({inst.text})")
                return
            idx = idx[(idx % 32) < 8 * num]
            a, k = self._address(ops[1] if head == "ldmatrix" else ops[0], idx)
            self._shared(_READ if head == "ldmatrix" else _WRITE, pc, idx, a, k, 16)
            if head == "stmatrix":
                self._forget(a, k, 16)
            return
        if head == "cp" and len(parts) == 3 and parts[1] == "async":
            if self.races:
                self._async_group(parts[2], ops, idx)
            return
        if "bulk" in parts:
            spaces = [p.split("::")[0] for p in parts[3:] if p.split("::")[0] in ("shared", "global")]
            if "tensor" in parts or "prefetch" in parts or len(spaces) != 2 or len(ops) < 3:
                return
            n, kn = self._get(ops[2], idx, 32)
            ok = kn & (n > 0)
            if spaces[0] == "shared" and not (kn.all() and (n[ok] == n[ok][:1]).all()):
                self._unseen(f"a shared copy of unknown or differing sizes ({inst.text})")
            idx, n = idx[ok], n[ok]
            for op, space, mine in ((ops[0], spaces[0], _WRITE), (ops[1], spaces[1], _READ)):
                a, k = self._address(op, idx)
                if space == "global":
                    self._global(mine, pc, idx, a, k, n)
                elif len(idx) and (n == n[0]).all():
                    self._shared(mine, pc, idx, a, k, int(n[0]))
            return
        size = _imm(ops[2]) if len(ops) >= 3 else None
        if size is None or not ("shared" in parts[2:] or any(p.startswith("shared") for p in parts[2:])):
            if any(p.startswith("shared") for p in parts[2:]):
                self._unseen(f"a shared copy of a form not read here ({inst.text})")
            return  # commit_group, wait_group, wait_all, or a form not read here
        rest = list(ops[3:])
        if any("cache_hint" in p for p in parts) and rest:
            rest = rest[:-1]  # the cache policy
        n = np.full(len(idx), size, np.int64)
        kn = np.ones(len(idx), bool)
        if rest:
            if rest[0].lstrip("!").startswith("%p"):  # ignore-src: a predicate that holds reads nothing
                v, kn = self._pred_operand(rest[0], idx)
                n = np.where(v, 0, size)
            else:
                v, kn = self._get(rest[0], idx, 32)
                n = np.minimum(v & 0xFFFF_FFFF, size)
        dst, kd = self._address(ops[0], idx)
        if self.bounds:
            src, ks = self._address(ops[1], idx)
            reads = kn & (n > 0)
            self._global(_READ, pc, idx[reads], src[reads], ks[reads], n[reads])
        if "async" in parts and self.races:
            self._shared(_WRITE, pc, idx, dst, kd, size, copy=True)
        elif self.bounds:
            self._shared(_WRITE, pc, idx, dst, kd, size)
        self._forget(dst, kd, size)

    def _ld_param(self, inst: _Inst, parts: list[str], idx: np.ndarray) -> None:
        d = inst.dests()
        m = re.fullmatch(r"\[\s*([\w$]+)\s*\]", inst.operands[1]) if len(inst.operands) > 1 else None
        value = self.params.get(self.order[m.group(1)]) if m and m.group(1) in self.order else None
        typ = parts[-1]
        if value is None or len(d) != 1 or (typ[:1] not in "usb" and typ not in _FTYPES):
            for r in d:
                self._set(r, idx, np.zeros(len(idx), np.int64), np.zeros(len(idx), bool))
            return
        v = np.full(len(idx), value, np.int64)
        self._set(d[0], idx, _norm(v, _width(typ)), np.ones(len(idx), bool))

    def _address(self, op: str, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(address, known) of a memory operand ``[%rd1+16]``: the sum of its terms. May return a register's
        own arrays (see :meth:`_get`): read, never written in place."""
        terms = _address_terms(op)
        if len(terms) == 1:
            return self._get(terms[0], idx, 64)
        if not terms:
            return np.zeros(len(idx), np.int64), np.ones(len(idx), bool)
        total, known = self._get(terms[0], idx, 64)
        for term in terms[1:]:
            v, k = self._get(term, idx, 64)
            total = total + v
            known = known & k
        return total, known

    def _taken(self, inst: _Inst, pc: int, idx: np.ndarray) -> None:
        """The selp of a speculated load, run by threads ``idx``: the held reads of the threads whose selp
        takes the loaded value (or whose predicate is not known) become findings, the others are dropped."""
        ld, which = self.st.spec_selp[pc]
        held = self.held.get(ld)
        if held is None:
            return
        t, off, epochs = held
        here = np.isin(t, idx)
        if not here.any():
            return
        p, k = self._pred_operand(inst.operands[3], t[here])
        takes = ~k | (p if which == 1 else ~p)
        chosen = np.flatnonzero(here)[takes]
        self._release(ld, t[chosen], off[chosen], epochs[chosen])
        rest = ~here  # the threads not at this selp now stay held
        if rest.any():
            self.held[ld] = (t[rest], off[rest], epochs[rest])
        else:
            del self.held[ld]

    def _used(self, a: int, b: int, idx: np.ndarray) -> None:
        """Instructions ``a .. b - 1`` run by threads ``idx``, in order, for the held reads (:attr:`pend`):
        a value passes through a ``mov`` and an arithmetic instruction (:data:`_PURE`) to what it writes, and
        through a ``selp`` to its result for the threads whose predicate takes it (both operands where the
        predicate is not known); any other instruction that reads it (a store, an address, a guard, a
        branch, a shuffle, a call) uses it: the read counts (it is kept). A read none of whose registers
        holds it any more is dropped."""
        member: np.ndarray | None = None  # threads idx, as a mask over the block's threads (made once)
        for pc in range(a, b):
            inst = self.insts[pc]
            names = self.st.regs_of(pc)
            if not any(not names.isdisjoint(regs) for *_rest, regs in self.pend.values()):
                continue
            if member is None:
                member = np.zeros(self.total, bool)
                member[idx] = True
            pure = inst.head in _PURE or self.st.move(pc) is not None
            selp = inst.head == "selp" and len(inst.operands) == 4 and inst.guard is None
            dests = inst.dests()
            for ld in list(self.pend):
                t, off, epochs, regs = self.pend[ld]
                if names.isdisjoint(regs):
                    continue
                here = member[t]
                holds = {r: regs[r] & here for r in names if r in regs}
                guard = inst.guard[0] if inst.guard is not None else None
                used = np.zeros(len(t), bool)
                if guard is not None and guard in holds:
                    used |= holds[guard]
                if selp:
                    d, x, y, p = inst.operands
                    pr = _REG.findall(p)
                    if pr and pr[0] in holds:
                        used |= holds[pr[0]]
                    took = np.zeros(len(t), bool)
                    if x in holds or y in holds:
                        v, k = self._pred_operand(p, t)
                        hx, hy = holds.get(x, np.zeros(len(t), bool)), holds.get(y, np.zeros(len(t), bool))
                        took = (hx & (~k | v)) | (hy & (~k | ~v))
                    gives = {d: took}
                elif pure:
                    carried = np.logical_or.reduce([holds[r] for r in inst.sources() if r in holds] or [np.zeros(len(t), bool)])
                    gives = {d: carried for d in dests}
                else:
                    for r in inst.sources():
                        if r in holds:
                            used |= holds[r]
                    gives = {d: np.zeros(len(t), bool) for d in dests}
                lost = np.zeros(len(t), bool)  # reads a register written here held before and holds no more
                for d, m in gives.items():  # a register written holds the value for the threads it came to
                    if d in regs:
                        new = (regs[d] & ~here) | m
                        lost |= regs[d] & ~new
                    else:
                        new = m
                    if new.any():
                        regs[d] = new
                    else:
                        regs.pop(d, None)  # (a register that holds it in no thread is dropped: fewer to look up)
                if used.any():
                    self._release(ld, t[used], off[used], epochs[used])
                drop = used
                if lost.any():  # every held read is in some register: only those that lost one may be in none now
                    cand = np.flatnonzero(lost & ~used)
                    still = np.zeros(len(cand), bool)
                    for m in regs.values():
                        still |= m[cand]
                    if not still.all():
                        drop = used.copy()
                        drop[cand[~still]] = True
                if not drop.any():
                    continue
                keep = ~drop
                if keep.any():
                    self.pend[ld] = (t[keep], off[keep], epochs[keep], {r: m[keep] for r, m in regs.items()})
                else:
                    del self.pend[ld]

    def _settle(self, idx: np.ndarray) -> None:
        """The held reads of threads ``idx`` count: where they go next (a region skipped on an unknown
        branch) their uses are not followed."""
        for ld in list(self.pend):
            t, off, epochs, regs = self.pend[ld]
            here = np.isin(t, idx)
            if here.any():
                self._release(ld, t[here], off[here], epochs[here])
                if here.all():
                    del self.pend[ld]
                else:
                    self.pend[ld] = (t[~here], off[~here], epochs[~here], {r: m[~here] for r, m in regs.items()})

    def _release(self, ld: int, t: np.ndarray, off: np.ndarray, epochs: np.ndarray) -> None:
        """Held reads of the load at ``ld`` (threads, bytes, intervals) that count: kept as its reads, one
        entry per interval, as :meth:`_first_access` keeps a plain load's."""
        for epoch in np.unique(epochs):
            sel = epochs == epoch
            got = self.unread.setdefault(ld, [])
            if len(got) < 8:
                got.append((t[sel][:64], off[sel][:64], int(epoch)))

    def _unseen(self, reason: str) -> None:
        """A shared write the run may not see (or see where it lands) from here on: a later read of an element
        no write was seen at proves nothing. SHARED_UNINIT_READ keeps the reads of the intervals before."""
        if self.first_w is not None and not self.uninit_stop:
            self.uninit_stop, self.uninit_epoch = reason, self.epoch

    def _first_access(self, mine: int, pc: int, t: np.ndarray, off: np.ndarray, unit: np.ndarray) -> None:
        """SHARED_UNINIT_READ's record of accesses by threads ``t`` at shared offsets ``off`` (units ``unit``):
        a read (or an atomic that reads: all but exchange) of a unit no thread has written yet is kept, by a
        thread sure to make it; a write (or an atomic) marks its units written, with its interval and thread."""
        fw = self.first_w
        assert fw is not None and self.first_wt is not None
        if mine != _WRITE and not (mine == _ATOMIC and "exch" in self.insts[pc].opcode.split(".")):
            fresh = (fw[unit] < 0) & self.sure[t]
            if fresh.any():
                if pc in self.st.spec:  # held until its selp says which threads take the value
                    ht, ho, he = t[fresh], off[fresh], np.full(int(fresh.sum()), self.epoch, np.int64)
                    if pc in self.held:
                        old = self.held[pc]
                        ht, ho, he = np.concatenate((old[0], ht)), np.concatenate((old[1], ho)), np.concatenate((old[2], he))
                    self.held[pc] = (ht, ho, he)
                elif self.st.dests_of(pc):  # held until its thread uses what it loaded
                    ht, ho = t[fresh], off[fresh]
                    he = np.full(len(ht), self.epoch, np.int64)
                    regs = {r: np.ones(len(ht), bool) for r in self.st.dests_of(pc)}
                    if pc in self.pend:
                        old = _distinct(self.pend[pc])
                        names = set(old[3]) | set(regs)
                        regs = {r: np.concatenate((old[3].get(r, np.zeros(len(old[0]), bool)), regs.get(r, np.zeros(len(ht), bool))))
                                for r in names}
                        ht, ho, he = np.concatenate((old[0], ht)), np.concatenate((old[1], ho)), np.concatenate((old[2], he))
                    self.pend[pc] = (ht, ho, he, regs)
                else:  # an atomic: its update reads the old value itself
                    got = self.unread.setdefault(pc, [])
                    if len(got) < 8:
                        got.append((t[fresh][:64].copy(), off[fresh][:64].copy(), self.epoch))
        if mine != _READ:
            new = fw[unit] < 0
            if new.any():
                fw[unit[new]] = self.epoch
                self.first_wt[unit[new]] = t[new]
                self.first_wpc[unit[new]] = pc  # type: ignore[index]

    def found_uninit(self, entry: str, files: dict[int, str], label: str) -> list[BarrierRace]:
        """SHARED_UNINIT_READ's reads: per instruction, the first read of a shared unit that no thread wrote
        before it (in an earlier interval, or earlier in its own interval by the same thread), by its lowest
        thread. A read of a unit another thread writes later in the same interval is a race
        (SHARED_BARRIER_MISSING's), not this (but the updates of one atomic instruction, which never race each
        other); a read in or after the interval where writes began to go unseen (:meth:`_unseen`) is dropped."""
        fw, fwt, fpc = self.first_w, self.first_wt, self.first_wpc
        if fw is None or fwt is None or fpc is None:
            return []
        limit = self.uninit_epoch if self.uninit_stop else self.epoch + 1
        for ld, (t, off, epochs) in self.held.items():  # a load whose selp the run never reached: kept
            self._release(ld, t, off, epochs)
        self.held.clear()
        if self.stopped:  # a run that did not reach the end: a held value may be used past where it stopped
            for ld, (t, off, epochs, _regs) in self.pend.items():
                self._release(ld, t, off, epochs)
        self.pend.clear()  # values their threads never used
        out: list[BarrierRace] = []
        for pc, got in sorted(self.unread.items()):
            for t, off, epoch in got:
                if epoch >= limit:
                    continue
                unit = off // self.unit
                # another thread's write in the same interval is a race, unless it is this very atomic instruction
                keep = ~((fw[unit] == epoch) & (fwt[unit] != t) & (fpc[unit] != pc))
                if keep.any():
                    j = int(np.flatnonzero(keep)[np.argmin(t[keep])])  # the lowest thread: one the reader can follow
                    inst = self.insts[pc]
                    name, byte = self.layout.name(int(off[j]))
                    width = max(1, _width(inst.opcode.split(".")[-1]) // 8)  # an element (of a vector access too)
                    width = width if width in (1, 2, 4, 8) else 0
                    shown = c_name(name)
                    start = byte - byte % width if width else byte
                    element = (f"{shown}[{start // width}] (byte {byte} of shared array \"{shown}\")" if width
                               else f"byte {byte} of shared array \"{shown}\"")
                    file_index, line = inst.loc if inst.loc else (None, None)
                    order = "read" if inst.head not in ("atom", "red") else "atomic"
                    out.append(BarrierRace(entry, line, file_index, files.get(file_index) if file_index is not None else None,
                                           None, None, _origin(inst, files), "", inst.text, order, "uninit",
                                           self.xyz[int(t[j])], element, label))  # fmt: skip
                    break
        return out

    def _record_only(self, mine: int, pc: int, t: np.ndarray, unit: np.ndarray) -> bool:
        """:meth:`_access` where no record of this interval at the units ``unit`` can race with it (False,
        nothing done, where one may): the records it leaves, made once per unit rather than once per row
        (many threads read one word, as a rule). Per unit, the last row is the one kept, as assigning every
        row in order keeps; the record it replaces moves to the second slot where a row's thread differs
        from the one that made it."""
        n = len(unit)
        if self.last_row is None:
            self.last_row = np.zeros(len(self.rec), np.int64)
            self.rows = np.arange(max(n, 1024), dtype=np.int64)
        if n > len(self.rows):
            self.rows = np.arange(n, dtype=np.int64)
        rows = self.rows[:n]
        last = self.last_row
        last[unit] = rows
        keep = last[unit] == rows  # the last row of each unit
        units = unit[keep]
        got = self.rec[units]  # (unit, kind, field)
        now = got[:, :, 0] == self.epoch
        if now[:, _AGAINST_INDEX[mine]].any():
            return False
        if now[:, mine].any():  # the record of this kind moves where another thread made it
            last[units] = np.arange(len(units))
            at = last[unit]  # each row's unit among ``units``
            differs = now[at, mine] & (got[at, mine, 1] != t)
            moved = np.zeros(len(units), bool)
            moved[at[differs]] = True
            self.rec[units[moved], mine + 1] = got[moved, mine]
        kept = t[keep]
        new = np.empty((len(units), 4), np.int32)
        new[:, 0], new[:, 1], new[:, 2], new[:, 3] = self.epoch, kept, pc, self.ws[kept]
        self.rec[units, mine] = new
        return True

    def _access(self, mine: int, pc: int, t: np.ndarray, off: np.ndarray, landing: bool = False) -> None:
        """Check and record accesses of kind ``mine`` (:data:`_WRITE`, :data:`_READ`, :data:`_ATOMIC`) by
        threads ``t`` at shared offsets ``off``; ``landing``: the write of a completed ``cp.async`` (the thread's
        own newer copy of those bytes, still in flight, was judged when it was issued)."""
        rec = self.rec
        unit = off // self.unit
        if self.first_w is not None and not self.uninit_stop:
            self._first_access(mine, pc, t, off, unit)
        if self.copies:
            self._in_flight(mine, pc, t, unit, off, own=not landing)
        if len(unit) > 32 and self._record_only(mine, pc, t, unit):
            return
        ws = self.ws[t]
        got = rec[unit]  # (access, kind, field)
        live = (got[:, :, 0] == self.epoch) & (got[:, :, 1] != t[:, None])
        kinds = _AGAINST[mine]
        if live[:, list(kinds)].any():
            partners = self.st.rmw.get(pc, ())
            for kind in kinds:
                c = live[:, kind]
                if not c.any():
                    continue
                rt, rpc = got[:, kind, 1], got[:, kind, 2]
                same = (rt >> 5) == (t >> 5)  # the linear thread index: 32 to a warp
                c = c & (~same | (ws <= got[:, kind, 3]))
                if kind < 2 and mine == _WRITE:
                    c &= rpc != pc  # one instruction run by many threads: the same value, as a rule
                if partners:
                    c &= ~np.isin(rpc, list(partners))
                if not c.any():
                    continue
                order = "war" if kind in (2, 3) else "raw" if mine == _READ else "waw"
                for first_pc in np.unique(rpc[c]):
                    at = c & (rpc == first_pc)
                    slot = self.hits.setdefault((int(first_pc), pc, order), {})
                    for scope, which in (("lane", at & same), ("warp", at & ~same)):
                        if scope not in slot and which.any():
                            j = int(np.flatnonzero(which)[0])
                            slot[scope] = (int(rt[j]), int(t[j]), int(off[j]), self.epoch)
        # record this access; the one it replaces moves to the second slot when another thread made it
        move = live[:, mine]
        if move.any():
            rec[unit[move], mine + 1] = got[move, mine]
        new = np.empty((len(t), 4), np.int32)
        new[:, 0], new[:, 1], new[:, 2], new[:, 3] = self.epoch, t, pc, ws
        rec[unit, mine] = new

    # -- results -------------------------------------------------------------------------------------------

    def found_bounds(self, entry: str, files: dict[int, str], launch: BlockLaunch) -> list[OutOfBounds]:
        return _bounds_found(self, entry, files, launch)

    def found(self, entry: str, files: dict[int, str], label: str) -> list[BarrierRace]:
        out: list[BarrierRace] = []
        for (first_pc, second_pc, order), slot in sorted(self.hits.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            for scope in [s for s in ("warp" if "warp" in slot else "lane", "self") if s in slot]:
                out.append(self._race(entry, files, label, first_pc, second_pc, order, scope, slot[scope]))
        return out

    def _race(self, entry: str, files: dict[int, str], label: str, first_pc: int, second_pc: int, order: str, scope: str,
              hit: tuple[int, int, int, int]) -> BarrierRace:  # fmt: skip
        """One finding of :meth:`found`: the access pair ``first_pc``/``second_pc`` of ``order`` in ``scope``."""
        t1, t2, off, _ = hit
        fi, si = self.insts[first_pc], self.insts[second_pc]
        name, byte = self.layout.name(off)
        width = _access_bytes(si.opcode.split("."))
        start = byte - byte % width
        shown = c_name(name)
        element = (f"{shown}[{start // width}] (byte {byte} of shared array \"{shown}\")" if width in (1, 2, 4, 8)
                   else f"byte {byte} of shared array \"{shown}\"")
        file_index, line = si.loc if si.loc else (None, None)
        return BarrierRace(entry, line, file_index, files.get(file_index) if file_index is not None else None,
                           fi.loc[1] if fi.loc else None, _origin(fi, files), _origin(si, files), fi.text,
                           si.text, order, scope, (*self.xyz[t1], *self.xyz[t2]), element, label)


def _meeting_blocks(grid: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """Blocks where two blocks' parts of an output meet, beside block 0 and the grid's last: block 0's next
    block along each axis (a row or tile offset one short), and the last block along each axis from block 0
    (a bound one past the buffer's row wraps into the next row's first elements, which another block owns)."""
    gx, gy, gz = grid
    out: list[tuple[int, int, int]] = []
    for c in ((1, 0, 0), (0, 1, 0), (0, 0, 1), (gx - 1, 0, 0), (0, gy - 1, 0), (0, 0, gz - 1)):
        if 0 < sum(c) and c[0] < gx and c[1] < gy and c[2] < gz and c not in out:
            out.append(c)
    return out


def _units(a: np.ndarray, width: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The accesses of ``width`` bytes at ``a`` as units (4-byte words where every access is whole words, else
    bytes): (unit, each row's unit key, each row's access, where each unit's rows start and end), rows sorted
    by unit, and within a unit in the order the accesses were made."""
    unit = 4 if not ((a % 4).any() or (width % 4).any()) else 1
    per = width // unit
    ev = np.repeat(np.arange(len(a)), per)  # one row per unit of each access
    key = a[ev] // unit + (np.arange(len(ev)) - np.repeat(np.cumsum(per) - per, per))
    order = np.lexsort((ev, key))
    key, ev = key[order], ev[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    return unit, key, ev, starts, np.r_[starts[1:], len(ev)]


def _element(launch: BlockLaunch, byte: int) -> tuple[tuple, str]:
    """The buffer a synthetic global address lies in, and the element it names (``"dbias[3]"``)."""
    pos = byte >> 41
    buf = next(b for b in launch.buffers if int(b[0]) == pos)
    off = byte - ((2 * pos + 1) << 40)
    size = int(buf[3])
    return buf, (f"{buf[1]}[{off // size}]" if size else f'byte {off} of "{buf[1]}"')


class _RmwLog:
    """The global updates of one launch's blocks: per update, its block, thread, address, bytes, barrier
    interval, warp barriers passed, store (or atomic) and whether it is an atomic."""

    def __init__(self) -> None:
        self.ctas: list[tuple[int, int, int]] = []
        self.parts: list[tuple] = []

    def block(self, cta: tuple[int, int, int]) -> int:
        self.ctas.append(cta)
        return len(self.ctas) - 1

    def add(self, block: int, t: np.ndarray, a: np.ndarray, width: int, epoch: int, ws: np.ndarray, pc: int, atomic: bool) -> None:
        self.parts.append((block, t, a, width, epoch, ws, pc, atomic))

    def races(self, module: _Module, launch: BlockLaunch, ext: tuple[int, int, int]) -> list[GlobalRmwRace]:
        """The first pair per (store, other update) of unordered updates of one byte by two threads, at
        least one of them a read-modify-write (:mod:`audit.cuda.globalraces`)."""
        if not self.parts or all(p[7] for p in self.parts):
            return []
        n = [len(p[1]) for p in self.parts]
        cat = np.concatenate
        blk = cat([np.full(m, p[0], np.int64) for m, p in zip(n, self.parts)])
        t = cat([p[1] for p in self.parts])
        a = cat([p[2] for p in self.parts])
        width = cat([np.full(m, p[3], np.int64) for m, p in zip(n, self.parts)])
        epoch = cat([np.full(m, p[4], np.int64) for m, p in zip(n, self.parts)])
        ws = cat([p[5] for p in self.parts])
        pc = cat([np.full(m, p[6], np.int64) for m, p in zip(n, self.parts)])
        atomic = cat([np.full(m, p[7], bool) for m, p in zip(n, self.parts)])
        total = ext[0] * ext[1] * ext[2]
        who = blk * total + t
        unit, key, ev, starts, ends = _units(a, width)
        w = who[ev]
        mixed = np.minimum.reduceat(w, starts) != np.maximum.reduceat(w, starts)
        plain = np.maximum.reduceat((~atomic[ev]).astype(np.int8), starts) > 0
        out: list[GlobalRmwRace] = []
        seen: set[tuple] = set()
        nx, ny = ext[0], ext[1]
        for g in np.flatnonzero(mixed & plain)[:MAX_RMW_ELEMENTS]:
            rows = np.unique(ev[starts[g]:ends[g]])  # the updates of this unit, in the order they were made
            for i in rows[~atomic[rows]][:64]:
                other = rows[(who[rows] != who[i]) & ((rows < i) | atomic[rows])]
                if not len(other):
                    continue
                same_block = blk[other] == blk[i]
                same_warp = same_block & (t[other] // 32 == t[i] // 32)
                ok = ~same_block | ((epoch[other] == epoch[i]) & ~(same_warp & (ws[other] != ws[i])))
                if not ok.any():
                    continue
                j = int(other[np.flatnonzero(ok)[0]])
                si, sj = module.insts[int(pc[i])], module.insts[int(pc[j])]
                pair = (si.loc, sj.loc)  # the first per (store line, other line)
                if pair in seen:
                    continue
                seen.add(pair)
                scope = "block" if blk[j] != blk[i] else "lane" if t[j] // 32 == t[i] // 32 else "warp"
                out.append(self._finding(module, launch, int(key[starts[g]]) * unit, (int(i), int(j)), scope,
                                         blk, t, pc, atomic, (nx, ny)))  # fmt: skip
        return out

    def _finding(self, module: _Module, launch: BlockLaunch, byte: int, pair: tuple[int, int], scope: str,
                 blk: np.ndarray, t: np.ndarray, pc: np.ndarray, atomic: np.ndarray, ext: tuple[int, int]) -> GlobalRmwRace:  # fmt: skip
        i, j = pair
        insts, files = module.insts, module.files
        store, other = insts[int(pc[i])], insts[int(pc[j])]
        load = insts[module.grmw[int(pc[i])]]
        buf, element = _element(launch, byte)
        nx, ny = ext

        def who(e: int) -> tuple[int, ...]:
            x = int(t[e])
            return (x % nx, x // nx % ny, x // (nx * ny), *self.ctas[int(blk[e])])

        file_index, line = store.loc if store.loc else (None, None)
        return GlobalRmwRace(module.entry, line, file_index, _origin(store, files), load.text, store.text,
                             other.loc[1] if other.loc else None, _origin(other, files), other.text, bool(atomic[j]),
                             int(pc[i]) == int(pc[j]), scope, str(buf[1]), element, (*who(j), *who(i)), launch.label)


class _WriteLog:
    """The plain global stores of one launch's bounds blocks: per store, its block, threads, addresses,
    bytes and instruction (BLOCK_WRITE_OVERLAP, :mod:`audit.cuda.blockwrites`)."""

    def __init__(self) -> None:
        self.ctas: list[tuple[int, int, int]] = []
        self.parts: list[tuple[int, np.ndarray, np.ndarray, int, int]] = []

    def block(self, cta: tuple[int, int, int]) -> int:
        self.ctas.append(cta)
        return len(self.ctas) - 1

    def add(self, block: int, t: np.ndarray, a: np.ndarray, width: int, pc: int) -> None:
        self.parts.append((block, t, a, width, pc))

    def overlaps(self, module: _Module, launch: BlockLaunch, ext: tuple[int, int, int]) -> list[BlockWriteOverlap]:
        """The first pair per (store line, other store line) of stores of one byte by two blocks. The store of
        a global read-modify-write (``*db += v``) is left to GLOBAL_RMW_RACE."""
        parts = [p for p in self.parts if p[4] not in module.grmw]
        if len({p[0] for p in parts}) < 2:
            return []
        cat = np.concatenate
        n = [len(p[1]) for p in parts]
        blk = cat([np.full(m, p[0], np.int64) for m, p in zip(n, parts)])
        t = cat([p[1] for p in parts])
        a = cat([p[2] for p in parts])
        width = cat([np.full(m, p[3], np.int64) for m, p in zip(n, parts)])
        pc = cat([np.full(m, p[4], np.int64) for m, p in zip(n, parts)])
        unit, key, ev, starts, ends = _units(a, width)
        b = blk[ev]
        mixed = np.minimum.reduceat(b, starts) != np.maximum.reduceat(b, starts)  # the units two blocks store
        out: list[BlockWriteOverlap] = []
        seen: set[tuple] = set()
        nx, ny = ext[0], ext[1]
        insts, files = module.insts, module.files

        def who(e: int) -> tuple[int, ...]:
            x = int(t[e])
            return (x % nx, x // nx % ny, x // (nx * ny), *self.ctas[int(blk[e])])

        for g in np.flatnonzero(mixed)[:MAX_RMW_ELEMENTS]:
            rows = ev[starts[g]:ends[g]]
            first = int(rows[0])
            later = rows[blk[rows] != blk[first]]
            i = int(later[0])
            si, sj = insts[int(pc[i])], insts[int(pc[first])]
            pair = (si.loc, si.src, sj.loc, sj.src)
            if pair in seen:
                continue
            seen.add(pair)
            buf, element = _element(launch, int(key[starts[g]]) * unit)
            file_index, line = si.loc if si.loc else (None, None)
            out.append(BlockWriteOverlap(module.entry, line, file_index, _origin(si, files), si.text,
                                         sj.loc[1] if sj.loc else None, _origin(sj, files), sj.text, str(buf[1]), element,
                                         (*who(first), *who(i)), launch.label))  # fmt: skip
        return out


def _bounds_found(sim: _Block, entry: str, files: dict[int, str], launch: BlockLaunch) -> list[OutOfBounds]:
    out: list[OutOfBounds] = []
    kinds = {_READ: "read", _WRITE: "write", _ATOMIC: "atomic"}
    for (pc, mem, r), (t, start, width, mine, at) in sorted(sim.oob.items()):
        inst = sim.insts[pc]
        file_index, line = inst.loc if inst.loc else (None, None)
        threads = (*sim.xyz[t], *sim.cta)
        if mem in ("g", "w"):
            buf = sim.buffers[r]
            name, extent, element, detail = buf[1], int(buf[2]), int(buf[3]), buf[4]
            memory = "global"
            if mem == "w":
                memory = "range"
                detail = f"index {at} of {buf[5][4]}"
        else:
            lay = sim.layout
            name = c_name(lay.regions[r][2])
            extent = int(lay.sizes[r])
            element = width if width in (1, 2, 4, 8) else 0
            memory = "dynamic" if r == lay.dynamic else "shared"
            detail = f'shared_bytes = "{launch.shared_text}"' if launch.shared_text else "the contract's shared_bytes"
        out.append(OutOfBounds(entry, line, file_index, _origin(inst, files), inst.text, memory, name, kinds[mine],
                               start, width, extent, element, tuple(int(x) for x in threads), launch.label, detail))
    return out


def _origin(inst: _Inst, files: dict[int, str]) -> str | None:
    if inst.src is not None and inst.loc is not None and inst.src != inst.loc and inst.src[0] in files:
        return f"{PurePosixPath(files[inst.src[0]]).name}:{inst.src[1]}"
    return None


def _bits(head: str, parts: list[str], a: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    """``popc``, ``brev``, ``bfind`` (``.shiftamt`` too) and ``clz`` of the ``bits``-wide values ``a``
    (non-negative below 64 bits)."""
    shifts = np.arange(bits, dtype=np.uint64)
    u = a.astype(np.uint64)
    set_ = ((u[:, None] >> shifts[None, :]) & np.uint64(1)).astype(bool)  # (value, bit)
    if head == "popc":
        return set_.sum(axis=1).astype(np.int64)
    if head == "brev":
        w = np.left_shift(np.uint64(1), shifts[::-1].astype(np.uint64))
        return (set_ * w).sum(axis=1, dtype=np.uint64).astype(np.int64)
    if head == "clz":
        high = np.where(set_.any(axis=1), bits - 1 - np.argmax(set_[:, ::-1], axis=1), -1)
        return (bits - 1 - high).astype(np.int64)
    # bfind: the highest set bit (of a negative signed value: the highest clear one), 0xFFFFFFFF where none
    look = set_
    if signed:
        neg = set_[:, -1]
        look = np.where(neg[:, None], ~set_, set_)
    has = look.any(axis=1)
    high = bits - 1 - np.argmax(look[:, ::-1], axis=1)
    if "shiftamt" in parts:
        high = bits - 1 - high
    return np.where(has, high, 0xFFFF_FFFF).astype(np.int64)


def _bfe(a: int, pos: int, length: int, bits: int, signed: bool) -> int:
    """PTX ``bfe``: ``length`` bits of ``a`` from bit ``pos`` (each taken modulo 256), zero- or sign-extended
    (the sign: the field's top bit, or ``a``'s own where the field runs past it)."""
    a &= (1 << bits) - 1
    pos, length = pos & 0xFF, length & 0xFF
    w = max(0, min(length, bits - pos)) if pos < bits else 0
    d = (a >> pos) & ((1 << w) - 1) if w else 0
    if signed and length and (a >> min(pos + length - 1, bits - 1)) & 1:
        d |= ((1 << bits) - 1) ^ ((1 << w) - 1)
    return d


def _bfi(a: int, b: int, pos: int, length: int, bits: int) -> int:
    """PTX ``bfi``: ``b`` with ``length`` bits from bit ``pos`` replaced by ``a``'s low bits."""
    mask = (1 << bits) - 1
    pos, length = pos & 0xFF, length & 0xFF
    w = max(0, min(length, bits - pos)) if pos < bits else 0
    m = (((1 << w) - 1) << pos) & mask
    return (b & mask & ~m) | ((a << pos) & m)


def _signed(v: int, bits: int) -> int:
    """The ``bits``-wide pattern ``v`` as the signed int64 the run keeps it in (64-bit values wrap)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if bits == 64 and v >> 63 else v


def _round_f32(e: np.ndarray, toward: str) -> np.ndarray:
    """float64 values ``e`` rounded to float32 toward minus infinity (``rm``), plus infinity (``rp``) or zero
    (``rz``): the nearest float32, stepped one ulp back where it lies on the wrong side."""
    r = e.astype(np.float32)
    back = r.astype(np.float64)
    if toward == "rm":
        return np.where(back > e, np.nextafter(r, np.float32(-np.inf)), r)
    if toward == "rp":
        return np.where(back < e, np.nextafter(r, np.float32(np.inf)), r)
    return np.where(np.abs(back) > np.abs(e), np.nextafter(r, np.float32(0)), r)


def _as_float(v: np.ndarray, typ: str) -> np.ndarray:
    """The float values of registers holding ``typ`` (f32 or f64) bits."""
    if typ == "f32":
        return (v & 0xFFFF_FFFF).astype(np.uint32).view(np.float32)
    return np.ascontiguousarray(v, dtype=np.int64).view(np.float64)


def _float_bits(x: np.ndarray, typ: str) -> np.ndarray:
    """The register bits of float values as ``typ`` (rounded to nearest where narrowed)."""
    if typ == "f32":
        return np.asarray(x, np.float32).view(np.uint32).astype(np.int64)
    return np.ascontiguousarray(x, dtype=np.float64).view(np.int64).copy()


def _norm(v: np.ndarray, bits: int) -> np.ndarray:
    """The register's bits: the value modulo 2^bits (as a non-negative number below 64 bits). Its
    result is written to a register, not kept: at 64 bits an int64 array comes back itself."""
    return v & _MASK[bits] if bits < 64 else v if v.dtype == np.int64 else v.astype(np.int64)


def _sx(v: np.ndarray, bits: int) -> np.ndarray:
    if bits >= 64:
        return v
    m = 1 << (bits - 1)
    return ((v & _MASK[bits]) ^ m) - m


def _ux(v: np.ndarray, bits: int) -> np.ndarray:
    return v if bits >= 64 else v & _MASK[bits]
