"""The static kernel-code checks, one place for the rules of ``wireup check`` and for ``wireup mutate``.

Bugs that no run of a kernel shows, because the compiled code hides them or no test reaches them:

* LOCAL_ARRAY_BOUNDS (:mod:`audit.cuda.bounds`, on the source): a constant-bound loop that indexes a
  fixed-size local array out of bounds (``for (u = 0; u <= kQuads; ++u) v[u] = ...`` over
  ``float4 v[kQuads]``). It is undefined behaviour; nvcc drops the store or reads an undefined register.
* LOCAL_UNINIT_READ (:mod:`audit.cuda.uninit`, on the source): a read of a local array's element that
  was written only under a run-time guard the read lacks (``if (k < K) l[k] = ...`` read back by a loop
  without the guard, or with ``k <= K``): an uninitialised register, which nvcc may compile into code
  that behaves like the original.
* SHARED_ARRAY_BOUNDS (:mod:`audit.cuda.sharedbounds`, on the source): an index of a shared array (a
  ``__shared__`` array, a field of a shared struct or union, an element reached through a pointer into
  one) that a thread-strided loop (``for (e = tid; e <= kN; e += blockDim.x)``) or a constant-bound loop
  drives out of the array; memcheck is silent while it stays inside the block's shared allocation.
* STORE_RACE (:mod:`audit.cuda.races`, on the PTX): a non-atomic global store at an address that is the
  same for every thread, which more than one thread runs (a deleted ``if (tid == 0)`` around an ISV
  update). The lanes of a warp store the same value; warps that interleave blend an EMA twice.
* CP_ASYNC_WAIT (:mod:`audit.cuda.cpasync`, on the PTX): a ``cp.async.wait_group`` reached with copies
  not committed to a group (a lost ``cp_async_commit()``), or an exit reached with copies no
  ``wait_group 0`` drained (a lost final ``cp_async_wait<0>()``): copies that usually land in time, so no
  run or sanitizer sees them.
* INDEX_OVERFLOW (:mod:`audit.cuda.indexwidth`, on the PTX): a global-memory offset computed in 32-bit
  arithmetic (``out[row * H + j]`` with ``int`` operands) that passes 2^31 - 1 at the largest dims the
  contracts allow: it wraps, and the kernel reads or writes elsewhere, at sizes no test runs.
* SHARED_RMW_RACE (:mod:`audit.cuda.sharedraces`, on the PTX): a non-atomic read-modify-write of a
  shared-memory element that two threads which may run it both update (a deleted ``if (lane == 0)``
  around ``s[row] += p``, an ``atomicAdd`` on shared memory turned into ``+=``): lost updates, invisible
  while the lanes happen to add the same value.
* SHARED_BARRIER_MISSING (:mod:`audit.cuda.barriers`, on the PTX, the block run at a small valid size):
  a shared element that one thread writes and another reads (or overwrites) in the same barrier interval
  (a tree reduction whose loop lost its ``__syncthreads()``, a warp-synchronous reduction without
  ``__syncwarp()``): the result depends on the order warps or lanes happen to run in.
* OUT_OF_BOUNDS_ACCESS (:mod:`audit.cuda.blockbounds`, on the PTX, the same run): a read or write outside
  a parameter's buffer (its contract extent at the launch), a static shared array or the launch's dynamic
  shared memory (an off-by-one ``i <= n``, a tail block reading past a row): on a GPU it lands in another
  allocation and nothing faults.
* GLOBAL_RMW_RACE (:mod:`audit.cuda.globalraces`, on the PTX, the same run, every block of a small grid):
  a non-atomic read-modify-write of a global element that another thread updates too with nothing
  ordering them (an ``atomicAdd`` turned into ``+=``, threads of different batch rows adding into one
  ``dwpe[t][c]``): all but one update are lost, and the result is merely a little off.
* BLOCK_WRITE_OVERLAP (:mod:`audit.cuda.blockwrites`, on the PTX, the blocks of the bounds run): one global
  element stored by two blocks with plain stores (a tile bound ``m <= M`` that reaches the next chunk's
  row 0): which value stays depends on the order the blocks run.

>>> hits = kernel_code_findings(cs, wiring, cs.kernel("aux_heads_loss_ema_update"), path, [], ptx)  # doctest: +SKIP
>>> hits                                                                                           # doctest: +SKIP
[]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .barriers import BarrierRace, BlockLaunch
from .blockbounds import OutOfBounds, buffer_base
from .blockwrites import BlockWriteOverlap
from .bounds import Instance, Overrun, find_overruns, included_constants
from .cpasync import AsyncCopyHazard, find_async_copy_hazards
from .fixedtails import FixedTail
from .globalraces import GlobalRmwRace
from .indexwidth import IndexOverflow, Witness, find_index_overflows
from .races import StoreRace, find_store_races
from .sharedbounds import SharedOverrun, find_shared_overruns
from .sharedraces import SharedRace, find_shared_races
from .uninit import UninitRead
from .uninit import source_uninit_reads as _uninit_reads

if TYPE_CHECKING:
    from ..model import ContractSet, Kernel
    from .cache import AnalysisCache

T = TypeVar("T")

Extents = tuple[int | None, int | None, int | None]


def source_overruns(path: Path, include_dirs: Sequence[Path], cache: AnalysisCache | None = None,
                    instances: Sequence[Instance] = ()) -> list[Overrun]:  # fmt: skip
    """The LOCAL_ARRAY_BOUNDS overruns of one source file, with the integer constants of the local headers
    it includes (transitively) known and the functions of ``instances`` (:func:`kernel_instances`) read
    once more with their template arguments and block extents. A file that cannot be read or tokenized has
    none. ``cache`` keeps the result by the content of the file and its headers and the instances. Files
    are read bounded and only when regular."""
    from ..untrusted import SOURCE_LIMIT, read_regular
    from .tokens import TokenizeError

    def compute() -> list[Overrun]:
        try:
            text = read_regular(path, SOURCE_LIMIT).decode("utf-8", errors="replace")
            return find_overruns(text, included_constants(path, include_dirs), instances)
        except (OSError, TokenizeError):
            return []

    return _cached(cache, "bounds", path, include_dirs, Overrun, compute, [repr(i) for i in instances])


def source_shared_overruns(path: Path, include_dirs: Sequence[Path], cache: AnalysisCache | None = None,
                           instances: Sequence[Instance] = ()) -> list[SharedOverrun]:  # fmt: skip
    """The SHARED_ARRAY_BOUNDS overruns of one source file, with the integer constants of the local
    headers it includes known and ``instances`` read as :func:`source_overruns` does; read, tokenized and
    cached as that."""
    from ..untrusted import SOURCE_LIMIT, read_regular
    from .tokens import TokenizeError

    def compute() -> list[SharedOverrun]:
        try:
            text = read_regular(path, SOURCE_LIMIT).decode("utf-8", errors="replace")
            return find_shared_overruns(text, included_constants(path, include_dirs), instances)
        except (OSError, TokenizeError):
            return []

    return _cached(cache, "sharedbounds", path, include_dirs, SharedOverrun, compute, [repr(i) for i in instances])


def source_uninit_reads(path: Path, include_dirs: Sequence[Path], cache: AnalysisCache | None = None) -> list[UninitRead]:
    """The LOCAL_UNINIT_READ findings of one source file (see :func:`audit.cuda.uninit.source_uninit_reads`);
    ``cache`` keeps the result by the content of the file and its headers."""
    return _cached(cache, "uninit", path, include_dirs, UninitRead, lambda: _uninit_reads(path, include_dirs))


def source_fixed_tails(path: Path, include_dirs: Sequence[Path], cache: AnalysisCache | None = None) -> list[FixedTail]:
    """Every ``ARG % C`` test and chunk loop ``v < ARG; v += C`` of one source file, for any identifier
    (FIXED_DIM_TAIL keeps those of arguments bound to fixed dims), with the integer constants of the file
    and of the local headers it includes known; ``cache`` keeps the result by the content of the file and
    its headers. A file that cannot be read or tokenized has none."""
    from ..untrusted import SOURCE_LIMIT, read_regular
    from .bounds import integer_constants
    from .fixedtails import fixed_dim_tails
    from .tokens import TokenizeError

    def compute() -> list[FixedTail]:
        try:
            text = read_regular(path, SOURCE_LIMIT).decode("utf-8", errors="replace")
            return fixed_dim_tails(text, None, {**included_constants(path, include_dirs), **integer_constants(text)})
        except (OSError, TokenizeError):
            return []

    return _cached(cache, "fixedtails", path, include_dirs, FixedTail, compute)


def _cached(cache: AnalysisCache | None, kind: str, path: Path, include_dirs: Sequence[Path], cls: type[T],
            compute: Callable[[], list[T]], extra: Sequence[str] = ()) -> list[T]:  # fmt: skip
    """``compute()``, through ``cache`` keyed by the bytes of ``path`` and of its local headers in include
    order (what the source analyses read) and ``extra`` (the arguments it reads besides); uncached where a
    file cannot be read."""
    if cache is None:
        return compute()
    from ..hashing import include_closure
    from ..untrusted import SOURCE_LIMIT, read_regular

    try:
        own = path.resolve()
        parts = [read_regular(path, SOURCE_LIMIT)]
        parts += [read_regular(h, SOURCE_LIMIT) for h in include_closure(path, include_dirs) if h != own]
    except OSError:
        return compute()
    return cache.results(kind, [*parts, *extra], cls, compute)


def overrun_text(o: Overrun | UninitRead | SharedOverrun) -> str:
    """The overrun's (or uninitialised read's) sentence without its ``path:line:`` prefix (a finding
    carries the location)."""
    return o.message("").split(": ", 1)[1]


def _launch_envs(wiring: Any, k: Kernel) -> list[dict[str, int]]:
    """The dim environments of every launch the schedules make of ``k`` (its probe sizes where none does)."""
    return [env for _, launch in wiring.launches_by_kernel.get(k.name, ()) for env in launch.envs] or list(wiring.envs)


def launch_extents(cs: ContractSet, wiring: Any, k: Kernel) -> tuple[Extents, Extents]:
    """(block, grid) extents of ``k`` over every launch the schedules make of it (its probe sizes where
    none does): a dimension's value where every launch agrees, else None (more than one value: possibly
    more than one thread or block)."""
    from ..shapes import value_at

    envs = _launch_envs(wiring, k)

    def agree(exprs: Sequence[Any]) -> Extents:
        out: list[int | None] = []
        for e in exprs:
            values = {value_at(e, env) for env in envs} if envs else {None}
            out.append(values.pop() if len(values) == 1 else None)
        return (out[0], out[1], out[2])

    return agree(k.block), agree(k.grid)


def kernel_instances(cs: ContractSet, wiring: Any, kernels: Sequence[Kernel]) -> tuple[Instance, ...]:
    """The :class:`~audit.cuda.bounds.Instance` of each of ``kernels`` for the source checks: its function
    (the name its ``cpp_name`` or entry gives, with the template arguments of a ``cpp_name`` such as
    ``"tile<32>"``) and its block's x extent where every launch agrees (None without ``wiring``);
    distinct, in order."""
    out: list[Instance] = []
    for k in kernels:
        block_x = launch_extents(cs, wiring, k)[0][0] if wiring is not None else None
        inst = Instance.of(k.cpp_name or k.entry or k.name, block_x)
        if inst not in out:
            out.append(inst)
    return tuple(out)


def entry_store_races(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None,
                      cache: AnalysisCache | None = None) -> list[StoreRace]:  # fmt: skip
    """The STORE_RACE stores of ``k``'s entry in the PTX module ``ptx``; ``cache`` keeps them by the PTX
    text, the entry and the launch extents."""
    block, grid = launch_extents(cs, wiring, k)
    entry = symbol or k.symbol
    pinned = pinned_scalars(wiring, k)

    def compute() -> list[StoreRace]:
        return find_store_races(ptx, entry, block, grid, pinned)

    if cache is None:
        return compute()
    return cache.results("races", [ptx, entry, repr(block), repr(grid), repr(sorted(pinned.items()))], StoreRace, compute)


def pinned_scalars(wiring: Any, k: Kernel) -> dict[int, int]:
    """Position -> value of each integer scalar parameter of ``k`` whose value is the same at every launch
    (a literal, or a dim expression every launch environment agrees on, as :func:`launch_extents` reads the
    extents): tiny-cuda-nn launches ``novo_update_per_layer_second_moment`` with ``n_elements = 1``, so
    ``if (i >= n_elements) return;`` leaves one thread of the grid. Without ``wiring``, literals only."""
    from ..dims import Expr
    from ..shapes import value_at

    envs = _launch_envs(wiring, k) if wiring is not None else []
    out: dict[int, int] = {}
    for i, p in enumerate(k.params):
        if p.kind != "scalar" or not isinstance(p.value, Expr) or not p.dtype.startswith(("i", "u")):
            continue
        values = {value_at(p.value, env) for env in envs} if envs else {value_at(p.value, {})}
        if len(values) == 1 and (v := values.pop()) is not None:
            out[i] = v
    return out


#: the most distinct block extents of one kernel SHARED_RMW_RACE analyses (a block that follows a runtime
#: dim takes a value per launch environment)
MAX_BLOCKS = 4


def launch_blocks(cs: ContractSet, wiring: Any, k: Kernel) -> list[Extents]:
    """The distinct block extents of ``k`` over its launches' environments (its probe sizes where no
    schedule launches it), smallest first, at most :data:`MAX_BLOCKS` (the smallest and the largest kept);
    an extent that cannot be evaluated is None."""
    from ..shapes import value_at

    envs = _launch_envs(wiring, k)
    found = sorted({tuple(value_at(e, env) for e in k.block) for env in envs} or {(None, None, None)},
                   key=lambda b: tuple(-1 if v is None else v for v in b))  # fmt: skip
    if len(found) > MAX_BLOCKS:
        found = [*found[: MAX_BLOCKS - 1], found[-1]]
    return [(b[0], b[1], b[2]) for b in found]


def entry_shared_races(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None,
                       cache: AnalysisCache | None = None) -> list[SharedRace]:  # fmt: skip
    """The SHARED_RMW_RACE stores of ``k``'s entry in the PTX module ``ptx``, at each block extent its
    launches use (:func:`launch_blocks`), the first per (line, kind); ``cache`` keeps each block's by the
    PTX text, the entry and the block."""
    entry = symbol or k.symbol
    out: list[SharedRace] = []
    seen: set[tuple[int | None, str, str]] = set()
    for block in launch_blocks(cs, wiring, k):

        def compute(block: Extents = block) -> list[SharedRace]:
            return find_shared_races(ptx, entry, block)

        got = compute() if cache is None else cache.results("shared-races", [ptx, entry, repr(block)], SharedRace, compute)
        for r in got:
            if (r.line, r.kind, r.instruction) not in seen:
                seen.add((r.line, r.kind, r.instruction))
                out.append(r)
    return out


def index_witnesses(cs: ContractSet, wiring: Any, k: Kernel) -> list[Witness]:
    """Where INDEX_OVERFLOW evaluates ``k``: each launch of it (the kernel alone where no schedule launches
    it) with every runtime dim at the largest value its range allows (:func:`audit.cases.largest_env`) and
    its local dims bound there; the integer scalar parameters' values, block and grid in each, distinct."""
    from ..cases import fill_derived, largest_env
    from ..model import ScalarParam, assumed
    from ..shapes import value_at

    base = [largest_env(cs)]
    runtime = cs.runtime_ranges
    if not assumed(k.requires, set(runtime), base[0], cs.slot_indices):
        # the largest dims break an assumption of the kernel (requires = ["N % 2 == 0"] with an odd max):
        # the host never launches it there; the nearest sizes below that meet it
        derived = _derived_dims(cs)
        near = _nearest_valid(cs, k, {n: hi for n, (_, hi) in runtime.items()},
                              lambda t: fill_derived({**cs.fixed_env, **t}, derived),
                              lambda e: assumed(k.requires, set(runtime), e, cs.slot_indices))  # fmt: skip
        if near is not None:
            base = [near]
    launches = wiring.launches_by_kernel.get(k.name, ())
    envs = [env for _, launch in launches for env in launch.envs_at(cs.buffer_map, base)] or base
    slots = cs.slot_indices
    out: list[Witness] = []
    for env in envs:
        params: dict[int, int] = {}
        names: list[str] = []
        for i, p in enumerate(k.params):
            if isinstance(p, ScalarParam) and hasattr(p.value, "evaluate") and p.dtype.startswith(("i", "u")):
                v = value_at(p.value, env, slots)
                if v is not None:
                    params[i] = v
                    names += [n for n in sorted(p.value.names) if n not in names]
        for e in (*k.grid, *k.block):
            names += [n for n in sorted(getattr(e, "names", ())) if n not in names]
        shown = ", ".join(f"{n} = {env[n]}" + ((" (its largest)" if env[n] == runtime[n][1] else " (the largest its kernel's assumptions allow)")
                                                  if n in runtime else "") for n in names if n in env)  # fmt: skip
        w = Witness(params, tuple(value_at(e, env) for e in k.block), tuple(value_at(e, env) for e in k.grid),  # type: ignore[arg-type]
                    shown or "the contracts' dims")
        if w not in out:
            out.append(w)
    return out


def entry_index_overflows(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None,
                          cache: AnalysisCache | None = None) -> list[IndexOverflow]:  # fmt: skip
    """The INDEX_OVERFLOW offsets of ``k``'s entry in the PTX module ``ptx`` (:mod:`audit.cuda.indexwidth`)
    at its :func:`index_witnesses`; ``cache`` keeps them by the PTX text, the entry and the witnesses."""
    entry = symbol or k.symbol
    witnesses = index_witnesses(cs, wiring, k)

    def compute() -> list[IndexOverflow]:
        return find_index_overflows(ptx, entry, witnesses)

    if cache is None:
        return compute()
    return cache.results("index-overflow", [ptx, entry, repr(witnesses)], IndexOverflow, compute)


#: the runtime-dim value SHARED_BARRIER_MISSING runs a block at besides each dim's least (within its range):
#: loops over a dim run more than once per thread of a 64-thread stride, yet the run stays short
BARRIER_DIM = 131
#: the most launches (distinct parameter values, block, grid) of one kernel SHARED_BARRIER_MISSING runs
MAX_BARRIER_LAUNCHES = 3
#: the most launches at the contract's ``[kernel.verify] bindings`` the block runs take besides those
MAX_BINDING_LAUNCHES = 5
#: the largest value of a runtime dim in a ``[kernel.verify] cases`` entry the block runs take (a larger case
#: is left to verify: the run's cost grows with the sizes)
CASE_DIM_MAX = 1024


#: candidates per runtime dim, and environments, :func:`_nearest_valid` tries at most
NEAREST_CANDIDATES = 6
NEAREST_TRIES = 4096


def _nearest_valid(cs: ContractSet, k: Kernel, target: dict[str, int], fill: Callable[[dict[str, int]], dict[str, int]],
                   valid: Callable[[dict[str, int]], bool]) -> dict[str, int] | None:  # fmt: skip
    """The environment nearest ``target`` (runtime dim -> value) that meets ``k``'s assumptions
    (``requires = ["K % 32 == 0"]``): per dim, values near its target that are multiples of the kernel's
    tiling constants (block extents, the divisors of its geometry and of its assumptions) or one past
    them, inside its range; combinations tried in order of their distance from the target. None where
    none of those meets them (the caller falls back to the probe environments).

    The probe environments alone gave none for a tiled SGEMM whose ``M``, ``N`` and ``K`` must be multiples
    of 32 (the race between one tile's reads and the next tile's stores was never run)."""
    import itertools
    import math

    from ..dims import divisions, eval_tree
    from ..search.sizes import tiling_constants

    constants = set(tiling_constants(cs, [k]))
    for r in k.requires:
        for side in (r.left, r.right):
            for _op, _a, b in divisions(side):
                try:
                    v = eval_tree(b, cs.fixed_env)
                except (KeyError, ZeroDivisionError, TypeError):
                    continue
                if isinstance(v, int) and 1 < v <= 1 << 20:
                    constants.add(v)
    # a dim that an assumption makes a multiple of c (``K % 32 == 0``) takes only multiples of their lcm
    step: dict[str, int] = {}
    for r in k.requires:
        left, right = r.left.tree, r.right.tree
        if r.op == "==" and right == ("int", 0) and left[0] == "%" and left[1][0] == "name" and left[2][0] == "int":
            name, c = left[1][1], left[2][1]
            if isinstance(c, int) and c > 1:
                step[name] = math.lcm(step.get(name, 1), c)
    runtime = cs.runtime_ranges
    # the bounds an assumption puts on a dim (``dims >= 3``: 3 and its neighbours), and dims an assumption
    # compares (``dims <= stride``: each takes the other's values too): tiny-cuda-nn's luminance loss, whose
    # least environment met them only at stride = dims = 128, where its channel reads stay inside the row
    bounds: dict[str, set[int]] = {}
    pairs: list[tuple[str, str]] = []
    for r in k.requires:
        left, right = r.left.tree, r.right.tree
        for a, b in ((left, right), (right, left)):
            if a[0] != "name" or a[1] not in runtime:
                continue
            if b[0] == "name" and b[1] in runtime:
                pairs.append((a[1], b[1]))
                continue
            try:
                v = eval_tree(b, cs.fixed_env)
            except (KeyError, ZeroDivisionError, TypeError):
                continue
            if isinstance(v, int):
                bounds.setdefault(a[1], set()).update((v - 1, v, v + 1))
    nears: dict[str, set[int]] = {}
    for n in runtime:
        t = target[n]
        if n in step:
            c = step[n]
            up = -(-t // c) * c
            near = {up - c, up, up + c, up + 2 * c}
        else:
            near = {t, t + 1} | bounds.get(n, set())
            for c in constants:
                up = -(-t // c) * c
                near |= {up, up + c, up - c, up + 1}
        nears[n] = near
    for a, b in pairs:
        if a not in step:
            nears[a] = nears[a] | nears[b]
    options: dict[str, list[int]] = {}
    for n, (lo, hi) in runtime.items():
        t = target[n]
        options[n] = sorted((v for v in nears[n] if lo <= v <= hi), key=lambda v: (abs(v - t), v))[:NEAREST_CANDIDATES]
    names = sorted(options)
    combos = itertools.product(*(range(len(options[n])) for n in names))
    ranked = sorted(itertools.islice(combos, NEAREST_TRIES), key=lambda c: (sum(c), c))
    for combo in ranked:
        env = fill({n: options[n][i] for n, i in zip(names, combo)})
        if valid(env):
            return env
    return None


def barrier_launches(cs: ContractSet, wiring: Any, k: Kernel) -> list[BlockLaunch]:
    """Where SHARED_BARRIER_MISSING (and OUT_OF_BOUNDS_ACCESS, GLOBAL_RMW_RACE) runs ``k``'s block: every runtime dim at its least value, then at
    :data:`BARRIER_DIM` (each clamped to its range; an environment that breaks one of ``k``'s runtime-dim
    assumptions (``requires``) is replaced by the smallest probe environment that meets them), with the
    launches' local dims bound there; the integer scalar parameters' values, block, grid and dynamic
    shared bytes of each, distinct, at most :data:`MAX_BARRIER_LAUNCHES`. Small sizes: a race needs two
    threads and one barrier interval, not a large problem, and the run's cost grows with the sizes. Then
    the launches at the contract's verify bindings (:func:`binding_launches`) and its small verify cases
    (:func:`case_launches`)."""
    from ..cases import probe_envs
    from ..model import assumed

    runtime = cs.runtime_ranges
    slots = cs.slot_indices
    derived = _derived_dims(cs)

    def valid(env: dict[str, int]) -> bool:
        return assumed(k.requires, set(runtime), env, slots)

    bases: list[dict[str, int]] = []
    for pick in (lambda lo, hi: lo, lambda lo, hi: min(max(BARRIER_DIM, lo), hi)):
        target = {n: pick(lo, hi) for n, (lo, hi) in runtime.items()}
        env = _valid_near(cs, k, target, derived, valid)
        if env is None:  # no tiling value near the target meets them: the smallest probe environments that do
            found = sorted((e for e in probe_envs(cs) if valid(e)), key=lambda e: sorted(e.get(n, 0) for n in runtime))
            if not found:
                continue
            env = found[0] if not bases else found[min(1, len(found) - 1)]
        if env not in bases:
            bases.append(env)
    # an off-by-one tail needs a size that is no multiple of the tile: where no runtime dim the kernel reads
    # takes an odd value above 2 (ranges that end below 131 at a power of two), one more launch with the
    # first of them at an odd one (the largest prime its range allows)
    used = sorted(_kernel_dims(k) & set(runtime))
    if bases and not any(b.get(n, 0) % 2 and b.get(n, 0) > 2 for b in bases for n in used):
        for n in used:
            lo, hi = runtime[n]
            odd = _odd_value(lo, min(hi, BARRIER_DIM))
            if odd is not None:
                env = _rebased(bases[-1], {n: odd}, derived)
                if valid(env) and env not in bases:
                    bases.append(env)
                    break
    out = _launches_at(cs, wiring, k, bases)
    past = _past_divisor(cs, k, bases, valid, derived) if bases else None
    whole = _whole_tiles(cs, k, bases, valid, derived) if bases else None
    extra = [e for e in (past, whole) if e is not None] + _apart(cs, k, used, bases, valid, derived)
    for env in extra:
        out += [launch for launch in _launches_at(cs, wiring, k, [env], cap=1) if launch not in out]
    out += [launch for launch in binding_launches(cs, wiring, k, bases) if launch not in out]
    return out + [launch for launch in case_launches(cs, wiring, k) if launch not in out]


#: the values :func:`_apart` gives a kernel's runtime dims, one each (distinct primes, the largest first)
APART_VALUES = (131, 97, 67, 43, 29, 17, 11, 7)


def _apart(cs: ContractSet, k: Kernel, used: list[str], bases: list[dict[str, int]], valid: Callable[[dict[str, int]], bool],
           derived: list[Any]) -> list[dict[str, int]]:  # fmt: skip
    """Two more environments where ``k`` reads two runtime dims or more: each dim at its own value of
    :data:`APART_VALUES` (clamped to its range), in name order, then in the reverse order. The other runs
    give every dim one value (its least, then 131), where a dim read for another (``r * M + c`` for
    ``r * N + c``, a tile loaded at the other operand's offset) indexes exactly as the right one: the
    overrun shows only where the wrong dim is the larger, so both orders are run. An environment that
    breaks ``k``'s assumptions is moved to the nearest valid one (:func:`_nearest_valid`) or dropped."""
    if len(used) < 2 or not bases:
        return []
    runtime = cs.runtime_ranges
    out: list[dict[str, int]] = []
    for names in (used, used[::-1]):
        target = {**{n: lo for n, (lo, _hi) in runtime.items()},
                  **{n: min(max(v, runtime[n][0]), runtime[n][1]) for n, v in zip(names, APART_VALUES)}}
        if len({target[n] for n in used}) < 2:
            continue  # the ranges leave them one value: nothing apart
        env = _valid_near(cs, k, target, derived, valid)
        if env is not None and env not in bases and env not in out:
            out.append(env)
    return out


def _valid_near(cs: ContractSet, k: Kernel, target: dict[str, int], derived: list[Any],
                valid: Callable[[dict[str, int]], bool]) -> dict[str, int] | None:  # fmt: skip
    """``target`` (runtime dim -> value) with the fixed and derived dims, where it meets ``k``'s assumptions;
    else the nearest environment that does (:func:`_nearest_valid`); None where none near it does."""
    from ..cases import fill_derived

    env = fill_derived({**cs.fixed_env, **target}, derived)
    if valid(env):
        return env
    return _nearest_valid(cs, k, target, lambda t: fill_derived({**cs.fixed_env, **t}, derived), valid)


#: the largest divisor :func:`_past_divisor` takes a dim past (the run's cost grows with the sizes)
PAST_DIVISOR_MAX = 4096


def _past_divisor(cs: ContractSet, k: Kernel, bases: list[dict[str, int]], valid: Callable[[dict[str, int]], bool],
                  derived: list[Any]) -> dict[str, int] | None:  # fmt: skip
    """One more environment for the block runs: the first base with a runtime dim just past a constant its
    launch divides it by (``iterations = ceil_div(GI, 1024)``, a block of ``ceil_div(GI, ceil_div(GI, 1024) *
    4)`` threads), where the other runs stay below it: a per-thread loop whose trip count follows that
    division has a tail only past the divisor (DeepSpeed's ``fused_bias_gelu`` with ``id <= row_stride``
    overruns from ``GI = 1028`` on, and at no size up to 1024). The least value above the divisor (up to 64
    more) that meets ``k``'s assumptions; None where no division of a dim by a constant in
    (:data:`BARRIER_DIM`, :data:`PAST_DIVISOR_MAX`] is in its grid, block, shared bytes or scalar values."""
    from ..dims import divisions
    from ..model import ScalarParam

    runtime = cs.runtime_ranges
    exprs = [*k.grid, *k.block, *((k.shared_bytes,) if k.shared_bytes is not None else ())]
    exprs += [p.value for p in k.params if isinstance(p, ScalarParam) and hasattr(p.value, "tree")]
    found: list[tuple[int, str]] = []
    for e in exprs:
        for _op, a, b in divisions(e):
            c = b[1] if isinstance(b, tuple) and b[0] == "int" else None
            if isinstance(a, tuple) and a[0] == "name" and a[1] in runtime and isinstance(c, int) and BARRIER_DIM < c <= PAST_DIVISOR_MAX:
                found.append((c, a[1]))
    for c, n in sorted(set(found)):
        lo, hi = runtime[n]
        if any(b.get(n, 0) > c for b in bases) or hi <= c:
            continue
        for v in range(max(c + 1, lo), min(c + 64, hi) + 1):
            env = _rebased(bases[0], {n: v}, derived)
            if valid(env):
                return env
    return None


def _whole_tiles(cs: ContractSet, k: Kernel, bases: list[dict[str, int]], valid: Callable[[dict[str, int]], bool],
                 derived: list[Any]) -> dict[str, int] | None:  # fmt: skip
    """One more environment for the block runs: every runtime dim the kernel's geometry divides by a
    constant (its grid, block, shared bytes and integer scalars, and the derived dims they name:
    ``TX = ceil_div(W, 16)``) at two whole tiles of the divisor (their least common multiple, where it
    divides by several), where no base is a multiple already. The other sizes (1, 131, 97, ...) never
    are, and a tile count written ``(W + 16) / 16`` differs from ``ceil_div(W, 16)`` only at a multiple
    of 16 (the rasterizer's row stride of its tile grid, the sixteenth trial). None where the kernel
    divides no runtime dim by a constant in [2, :data:`BARRIER_DIM`] (a larger one is
    :func:`_past_divisor`'s, and two of its tiles cost the runs seconds), or no such environment meets
    ``k``'s assumptions."""
    from math import lcm

    from ..dims import divisions
    from ..model import ScalarParam

    runtime = cs.runtime_ranges
    exprs = [*k.grid, *k.block, *((k.shared_bytes,) if k.shared_bytes is not None else ())]
    exprs += [p.value for p in k.params if isinstance(p, ScalarParam) and hasattr(p.value, "tree")]
    seen: set[str] = set()
    while True:  # the derived dims they name, and those these name
        named = {n for e in exprs for n in getattr(e, "names", ())} - seen
        more = [cs.dim_map[n].expr for n in sorted(named) if n in cs.dim_map and cs.dim_map[n].kind == "derived" and cs.dim_map[n].expr is not None]
        seen |= named
        if not more:
            break
        exprs += more
    by: dict[str, set[int]] = {}
    for e in exprs:
        for _op, a, b in divisions(e):
            c = b[1] if isinstance(b, tuple) and b[0] == "int" else None
            if isinstance(a, tuple) and a[0] == "name" and a[1] in runtime and isinstance(c, int) and 2 <= c <= BARRIER_DIM:
                by.setdefault(a[1], set()).add(c)
    target: dict[str, int] = {}
    for n, cs_ in sorted(by.items()):
        lo, hi = runtime[n]
        m = lcm(*cs_)
        if m > BARRIER_DIM or any(b.get(n, 0) % m == 0 and b.get(n, 0) >= m for b in bases):
            continue
        v = 2 * m if 2 * m <= hi else m
        v = max(v, -(-lo // m) * m)
        if v <= hi:
            target[n] = v
    if not target:
        return None
    env = _rebased(bases[0], target, derived)
    if valid(env) and env not in bases:
        return env
    near = _valid_near(cs, k, {**{n: bases[0].get(n, lo) for n, (lo, _hi) in runtime.items()}, **target}, derived, valid)
    return near if near is not None and near not in bases and all(near.get(n, 0) % min(by[n]) == 0 for n in target) else None


def case_launches(cs: ContractSet, wiring: Any, k: Kernel) -> list[BlockLaunch]:
    """The :class:`BlockLaunch` of ``k`` at each of its contract's ``[kernel.verify] cases`` (a value of every
    runtime dim) where every dim ``k`` names is at most :data:`CASE_DIM_MAX` and that meet ``k``'s assumptions, at most
    :data:`MAX_BINDING_LAUNCHES`. The other block runs give every runtime dim one value (its least, then
    :data:`BARRIER_DIM`), so what goes wrong only where two dims differ is never run: cuda-samples' matrix
    product that loads B's tile at A's offset reads past B only where A has more rows than B has columns."""
    from ..cases import fill_derived
    from ..model import assumed

    if not k.verify.cases:
        return []
    runtime = cs.runtime_ranges
    derived = _derived_dims(cs)
    used = _kernel_dims(k) - set(cs.fixed_env)  # runtime and derived dims the kernel names
    envs = []
    for case in k.verify.cases:
        env = fill_derived({**cs.fixed_env, **dict(case)}, derived)
        if any(isinstance(env.get(n), int) and env[n] > CASE_DIM_MAX for n in used):
            continue
        if assumed(k.requires, set(runtime), env, cs.slot_indices) and env not in envs:
            envs.append(env)
    return _launches_at(cs, wiring, k, envs, cap=MAX_BINDING_LAUNCHES) if envs else []


def rmw_launches(cs: ContractSet, wiring: Any, k: Kernel) -> list[BlockLaunch]:
    """The launch GLOBAL_RMW_RACE runs ``k`` at besides :func:`barrier_launches`: every runtime dim at the
    least value of at least 2 its range allows (the nearest environment that meets ``k``'s assumptions
    where that one does not), so that two of every dim exist (two batch rows whose threads may collide on
    one element) while the grid stays small enough to run every block
    (:data:`audit.cuda.blocksim.MAX_RMW_GRID`). Empty where no such environment is found."""
    from ..cases import fill_derived
    from ..model import assumed

    runtime = cs.runtime_ranges
    slots = cs.slot_indices
    derived = _derived_dims(cs)

    def valid(env: dict[str, int]) -> bool:
        return assumed(k.requires, set(runtime), env, slots)

    target = {n: min(max(2, lo), hi) for n, (lo, hi) in runtime.items()}
    env = fill_derived({**cs.fixed_env, **target}, derived)
    if not valid(env):
        near = _nearest_valid(cs, k, target, lambda t: fill_derived({**cs.fixed_env, **t}, derived), valid)
        if near is None:
            return []
        env = near
    return _launches_at(cs, wiring, k, [env])[:1]


#: the second size of :func:`given_launches`: a few rows (a kernel's per-row tile of 8 rows is whole), not
#: the 131 of the other runs, where a per-sample partial loop costs the run seconds
GIVEN_DIM = 16


def given_launches(cs: ContractSet, wiring: Any, k: Kernel) -> list[BlockLaunch]:
    """The launches OUT_OF_BOUNDS_ACCESS (and BLOCK_WRITE_OVERLAP) runs ``k``'s blocks at besides
    :func:`barrier_launches`, where a schedule step binds an optional pointer of ``k`` to a buffer: every
    runtime dim at its least value, then at :data:`GIVEN_DIM` (the nearest environments that meet ``k``'s
    assumptions), each such step's optional pointers given their buffers. The other launches keep a bound optional pointer unknown,
    so what runs under ``if (p)`` (the shipped backward kernels' per-sample partials) is stepped over
    there: a run that stops here (its step budget) leaves the analysis as complete as it was, and what it
    checked counts. Empty where no step binds one."""
    from ..model import TensorParam, assumed

    if not any(isinstance(p, TensorParam) and p.optional for p in k.params):
        return []
    runtime = cs.runtime_ranges
    derived = _derived_dims(cs)

    def valid(env: dict[str, int]) -> bool:
        return assumed(k.requires, set(runtime), env, cs.slot_indices)

    bases = []
    for pick in (lambda lo, hi: lo, lambda lo, hi: min(max(GIVEN_DIM, lo), hi)):
        env = _valid_near(cs, k, {n: pick(lo, hi) for n, (lo, hi) in runtime.items()}, derived, valid)
        if env is not None and env not in bases:
            bases.append(env)
    return _launches_at(cs, wiring, k, bases, given=True)


def binding_launches(cs: ContractSet, wiring: Any, k: Kernel, bases: list[dict[str, int]]) -> list[BlockLaunch]:
    """The :class:`BlockLaunch` of ``k`` at each of its contract's ``[kernel.verify] bindings`` (values of its
    local dims that verify runs besides the schedules' own), at the first of ``bases`` (every runtime dim at its
    least: where a chunk, a tile or a row comes out empty), with its first launch's step (its optional
    pointers and input domains), at most :data:`MAX_BINDING_LAUNCHES`. The schedules bind a shape-generic
    kernel to a few shapes; the bindings are the shapes its author says it must also handle (the CUTLASS
    partial's empty chunks, P > B, were found here: a read past dz that no schedule launch reaches)."""
    from ..model import assumed

    if not bases or not k.verify.bindings:
        return []
    runtime = cs.runtime_ranges
    derived = _derived_dims(cs)
    launches = wiring.launches_by_kernel.get(k.name, ()) if wiring is not None else ()
    step = launches[0][1].step if launches else None
    pairs = []
    for b in k.verify.bindings:
        env = _rebased(bases[0], dict(b), derived)
        if assumed(k.requires, set(runtime), env, cs.slot_indices):
            pairs.append((step, env))
    return _launches_at(cs, wiring, k, [], pairs=pairs, cap=MAX_BINDING_LAUNCHES)


def _launches_at(cs: ContractSet, wiring: Any, k: Kernel, bases: list[dict[str, int]],
                 pairs: list[tuple[Any, dict[str, int]]] | None = None, cap: int | None = None,
                 given: bool = False) -> list[BlockLaunch]:  # fmt: skip
    """The :class:`BlockLaunch` of ``k`` at each of ``bases`` (with each launch's local dims bound there:
    every schedule step that launches it), or at the given (step, environment) ``pairs``, distinct, at most
    ``cap`` (default :data:`MAX_BARRIER_LAUNCHES`) per filling. ``given``: an optional pointer its step binds
    to a buffer is that buffer (else it stays unknown); only launches that give one are kept."""
    from ..model import IsvParam, ScalarParam, TensorParam
    from ..shapes import value_at

    slots = cs.slot_indices
    cap = MAX_BARRIER_LAUNCHES if cap is None else cap
    if pairs is not None:
        envs = pairs
    else:
        launches = wiring.launches_by_kernel.get(k.name, ()) if wiring is not None else ()
        steps = [(launch.step, env) for _, launch in launches for env in launch.envs_at(cs.buffer_map, bases)]
        envs = steps or [(None, env) for env in bases]
    out: list[BlockLaunch] = []
    for step, env in envs:
        bound_to = [p.name for p in k.params if isinstance(p, TensorParam) and p.optional and step is not None
                    and (b := step.binding(p.name)) is not None and not b.is_null]  # fmt: skip
        if given and not bound_to:
            continue

        # a kernel no schedule launches: its optional pointers are NULL in its launches and given their buffers
        # in launches of their own (both are what the contract allows; until 7 December 2026 only NULL ran, so what
        # runs under `if (p)` in a kernel with no schedule was checked at no launch)
        free = [p.name for p in k.params if isinstance(p, TensorParam) and p.optional] if step is None and not given else []

        def at(give: Collection[str]) -> tuple[list[tuple[int, int]], list[tuple], list[str]]:
            """(params, buffers, dims named) of this launch, the optional pointers named in ``give`` given their
            buffers."""
            params: list[tuple[int, int]] = []
            buffers: list[tuple] = []
            names: list[str] = []
            for i, p in enumerate(k.params):
                if isinstance(p, ScalarParam) and hasattr(p.value, "evaluate") and p.dtype.startswith(("i", "u")):
                    v = value_at(p.value, env, slots)
                    if v is not None:
                        params.append((i, v))
                        names += [n for n in sorted(p.value.names) if n not in names]
                elif isinstance(p, ScalarParam) and p.dtype in ("f32", "f64") and isinstance(p.value, (int, float)) and not isinstance(p.value, bool):
                    params.append((i, _scalar_bits(float(p.value), p.dtype)))  # a float the contract fixes: its bits
                elif isinstance(p, IsvParam) or (isinstance(p, TensorParam) and (not p.optional or p.name in give)):
                    params.append((i, buffer_base(i)))  # a buffer's address: not null, and apart from the others
                    buffers.append(_buffer(cs, p, i, env, slots))
                elif isinstance(p, TensorParam) and p.name not in bound_to:
                    # an optional pointer: NULL where its step binds NULL or no schedule launches the kernel (a
                    # value the contract allows: its `if (p)` tests are known); bound to a buffer and not given,
                    # it stays unknown, so what runs under `if (p)` is stepped over (the per-sample partial loops of
                    # the shipped backward kernels would otherwise cost the bounds runs their step budget), and
                    # the launch's twin with it given (BlockLaunch.given) judges the races and updates
                    params.append((i, 0))
            for e in (*k.grid, *k.block, *((k.shared_bytes,) if k.shared_bytes is not None else ())):
                names += [n for n in sorted(getattr(e, "names", ())) if n not in names]
            return params, buffers, names

        params, buffers, names = at(bound_to if given else ())
        shown = ", ".join(f"{n} = {env[n]}" for n in names if n in env) or "the contracts' dims"
        if given:
            shown += ", " + ", ".join(bound_to) + " given"
        twin = at(bound_to) if bound_to and not given else None
        dynamic = value_at(k.shared_bytes, env, slots) if k.shared_bytes is not None else 0
        fillings = _fillings(cs, wiring, k, step, env, {b[0]: b for b in buffers})
        block = tuple(value_at(e, env, slots) for e in k.block)
        grid = tuple(value_at(e, env, slots) for e in k.grid)
        shared_text = k.shared_bytes.text if k.shared_bytes is not None else None
        also = at(free) if free else None
        for fills in fillings or [()]:
            text = f" ({t})" if (t := "; ".join(f[4] for f in fills if f[4])) else ""
            given_too = None if twin is None else BlockLaunch(tuple(twin[0]), block, grid, dynamic, shown + ", " + ", ".join(bound_to) + " given" + text,  # type: ignore[arg-type]
                                                              tuple(twin[1]), shared_text, tuple(fills))  # fmt: skip
            made = [BlockLaunch(tuple(params), block, grid, dynamic, shown + text, tuple(buffers), shared_text, tuple(fills), given_too)]  # type: ignore[arg-type]
            if also is not None:
                made.append(BlockLaunch(tuple(also[0]), block, grid, dynamic, shown + ", " + ", ".join(free) + " given" + text,  # type: ignore[arg-type]
                                        tuple(also[1]), shared_text, tuple(fills)))  # fmt: skip
            out += [launch for launch in made if launch not in out]
        if len(out) >= cap * max(1, len(fillings)) * (2 if free else 1):
            break
    return out


#: the most fillings of a kernel's input buffers each launch is run with (:func:`_fillings`): three for one
#: filled input, all nine pairs for two, a pairwise covering for more
MAX_FILLINGS = 12


#: the integers an input with no stated domain is filled with (:func:`_fillings`): verify's draws for it
#: (:data:`audit.runtime._inputs.DEFAULT_INT_RANGE`, docs/contracts.md: "integers uniform in 0..9")
DEFAULT_INT_DOMAIN = (0, 9)


def _fillings(cs: ContractSet, wiring: Any, k: Kernel, step: Any, env: dict[str, int], buffers: dict[int, tuple]) -> list[tuple]:
    """The contents the block run gives ``k``'s integer input buffers whose values the contracts state
    (the parameter's ``values`` or ``mask``, else its bound buffer's ``values``, else the ones the
    buffer's writer declares on its output, as verify draws them; with none of these, verify's default
    :data:`DEFAULT_INT_DOMAIN`, in one filling: its two ends element by element, or the greatest in a buffer
    of one element): a few fillings, each a tuple of
    :attr:`audit.cuda.barriers.BlockLaunch.fills` entries -- with a ``mask``, every row valid, every row
    skipped, and the two in turn; else the domain's least value, its greatest, the two in turn row by row
    and, where a row has several elements, element by element (a row's ``[first, last)`` range apart); with
    several such inputs, every two of them in every pair of their patterns (:func:`_covering`). A float input
    stays unknown (its loads, and what follows from them, are not computed). Empty where no input is an
    integer one."""
    from ..model import DTYPES, TensorParam
    from ..shapes import value_at

    slots = cs.slot_indices
    per: list[list[tuple]] = []  # per filled parameter: its fillings
    for i, p in enumerate(k.params):
        if not isinstance(p, TensorParam) or p.role != "in" or i not in buffers or buffers[i][2] < 0:
            continue
        size, _, _, kind = DTYPES.get(p.dtype, (0, "", "", ""))[:4]
        if not size or (kind == "float" and size not in (4, 8)):
            continue  # half precision stays unknown (the run computes f32 and f64)
        values = p.values
        if values is None and step is not None:
            bound = step.binding(p.name)
            buf = cs.buffer_map.get(bound.buffer) if bound is not None and bound.buffer else None
            values = buf.values if buf is not None else None
            if values is None and bound is not None and bound.buffer and wiring is not None:
                values = _producer_domains(cs, wiring).get(bound.buffer, (None, ""))[0]
        if kind == "float":
            dims = [value_at(e, env, slots) for e in p.shape]
            inner = 1
            for d in dims[1:]:
                inner *= d if d else 1
            pats = _float_patterns(p.name, values, env, slots, max(inner, 1), "f32" if size == 4 else "f64")
            per.append([(i, size, each, pat, text) for pat, text, each in pats])
            continue
        domain = _int_domain(values, env, slots)
        skip = p.mask.skip_value if p.mask is not None else None
        default = ""
        if domain is None and skip is None:
            if values is not None:
                continue  # a domain of another kind (a scale): verify's draws are not these
            domain, default = DEFAULT_INT_DOMAIN, f" (no values: verify's default {DEFAULT_INT_DOMAIN[0]}..{DEFAULT_INT_DOMAIN[1]})"
        lo, hi = domain if domain is not None else (None, None)
        dims = [value_at(e, env, slots) for e in p.shape]
        inner = 1
        for d in dims[1:]:
            inner *= d if d else 1
        inner = max(inner, 1)
        name = p.name
        if default:  # one filling, not three (two such inputs would pair into nine launches): both values
            numel = inner * (dims[0] if dims and dims[0] else 1)
            pats = ([((hi,), f"{name} = {hi}{default}", inner)] if numel == 1 else
                    [((lo, hi), f"{name} = {lo}, {hi} in turn element by element{default}", 1)])  # fmt: skip
        elif skip is not None:
            valid = lo if lo is not None else (0 if skip != 0 else 1)
            pats = [((valid,), f"{name} = {valid} in every row", inner), ((skip,), f"{name} = {skip} in every row", inner),
                    ((valid, skip), f"{name} = {valid}, {skip} in turn", inner)]
        else:
            pats = [((lo,), f"{name} = {lo} everywhere{default}", inner)]
            if hi != lo:
                pats += [((hi,), f"{name} = {hi} everywhere{default}", inner), ((lo, hi), f"{name} = {lo}, {hi} in turn{default}", inner)]
                if inner > 1:  # rows of several elements: a row's elements apart too (a range [first, last) per row)
                    pats.append(((lo, hi), f"{name} = {lo}, {hi} in turn element by element{default}", 1))
        per.append([(i, size, each, pat, text) for pat, text, each in pats])
    if not per:
        return []
    return [tuple(f[j] for f, j in zip(per, row)) for row in _covering([len(f) for f in per])]


#: what a float input with no stated domain is filled with (:func:`_float_patterns`): verify draws it from
#: N(0, 1) (a weight's scaled by 1/sqrt(fan_in), a bias's by 0.1), so both signs, one standard deviation
DEFAULT_FLOAT_FILL = (1.0, -1.0)


def _float_patterns(name: str, values: Any, env: dict[str, int], slots: dict[str, int], inner: int,
                    typ: str) -> list[tuple[tuple[int, ...], str, int]]:  # fmt: skip
    """The fillings of a float input (each: its values as register bits, what it says, elements per row
    the pattern steps by): a ``min``/``max`` or ``choices`` domain as an integer one's (the least, the
    greatest, the two in turn, and element by element where a row has several); a ``scale`` its plus and
    minus one standard deviation element by element; no stated range :data:`DEFAULT_FLOAT_FILL` element by
    element (both signs in one launch: ``if (x[i] > 0) return;`` decided both ways), which says nothing
    (every launch has it: the launch labels name what differs between them)."""
    from ..shapes import value_at

    def bits(v: float) -> int:
        return _scalar_bits(v, typ)

    def num(v: Any) -> float | None:
        if v is None:
            return None
        got = value_at(v, env, slots) if hasattr(v, "evaluate") else v
        return float(got) if got is not None else None

    lo = hi = None
    if values is not None and values.choices:
        lo, hi = float(min(values.choices)), float(max(values.choices))
    elif values is not None and (values.min is not None or values.max is not None):
        lo, hi = num(values.min), num(values.max)
        lo = hi if lo is None else lo
        hi = lo if hi is None else hi
    if lo is not None and hi is not None and lo <= hi:
        pats = [((bits(lo),), f"{name} = {lo:g} everywhere", inner)]
        if hi != lo:
            pats += [((bits(hi),), f"{name} = {hi:g} everywhere", inner),
                     ((bits(lo), bits(hi)), f"{name} = {lo:g}, {hi:g} in turn", inner)]  # fmt: skip
            if inner > 1:
                pats.append(((bits(lo), bits(hi)), f"{name} = {lo:g}, {hi:g} in turn element by element", 1))
        return pats
    if values is not None and values.scale is not None:
        sd = float(values.scale)
        return [((bits(sd), bits(-sd)), f"{name} = {sd:g}, {-sd:g} in turn element by element (scale {sd:g})", 1)]
    a, b = DEFAULT_FLOAT_FILL  # the same in every launch, so not named in them (docs/build.md says it)
    return [((bits(a), bits(b)), "", 1)]


def _covering(levels: list[int]) -> list[tuple[int, ...]]:
    """Rows of pattern indices over inputs with ``levels`` patterns each: first the j-th pattern of every
    input together (each pattern at least once), then rows chosen greedily until every two inputs have
    met in every pair of their patterns, at most :data:`MAX_FILLINGS` rows. Pairing matters: the first
    rows alone put a mask's "every row valid" with a count's least value only, so a path that needs both
    (rows valid and a count above zero) never ran. Two inputs of three patterns get all nine pairs; more
    inputs may leave pairs out at the cap (deterministic: the same rows every run)."""
    n = len(levels)
    rows = [tuple(j % m for m in levels) for j in range(max(levels))]
    uncovered = {(a, b, x, y) for a in range(n) for b in range(a + 1, n) for x in range(levels[a]) for y in range(levels[b])}

    def pairs(row: tuple[int, ...]) -> set[tuple[int, int, int, int]]:
        return {(a, b, row[a], row[b]) for a in range(n) for b in range(a + 1, n)}

    for row in rows:
        uncovered -= pairs(row)
    while uncovered and len(rows) < MAX_FILLINGS:
        a, b, x, y = min(uncovered)
        row: list[int | None] = [None] * n
        row[a], row[b] = x, y
        for c in range(n):
            if row[c] is None:  # the pattern that meets the most uncovered pairs with those already set
                row[c] = max(range(levels[c]), key=lambda v: (sum(((d, c, row[d], v) if d < c else (c, d, v, row[d])) in uncovered
                                                                  for d in range(n) if row[d] is not None), -v))  # fmt: skip
        done = tuple(int(v) for v in row)  # type: ignore[arg-type]
        rows.append(done)
        uncovered -= pairs(done)
    return rows


def _int_domain(values: Any, env: dict[str, int], slots: dict[str, int]) -> tuple[int, int] | None:
    """(least, greatest) integer of a ``values`` domain (its choices, or min/max with the dims of ``env``),
    None where it states neither."""
    if values is None:
        return None
    if values.choices:
        ints = [int(c) for c in values.choices if float(c) == int(c)]
        return (min(ints), max(ints)) if ints else None
    got = []
    for v in (values.min, values.max):
        if v is None:
            got.append(None)
        elif hasattr(v, "evaluate"):
            from ..shapes import value_at

            got.append(value_at(v, env, slots))
        else:
            got.append(int(v) if float(v) == int(v) else None)
    lo, hi = got
    if lo is None and hi is None:
        return None
    lo = hi if lo is None else lo
    hi = lo if hi is None else hi
    return (int(lo), int(hi)) if lo <= hi else None  # type: ignore[operator]


def _scalar_bits(v: float, dtype: str) -> int:
    """The register bits of a float scalar parameter's value (f32 rounded to nearest, or f64; an f64's as a
    signed 64-bit integer, as the block run's registers hold it). With :mod:`struct`, not numpy: the launches
    are made on a warm check too, which imports no numpy."""
    import struct

    if dtype == "f32":
        return struct.unpack("<I", struct.pack("<f", v))[0]
    return struct.unpack("<q", struct.pack("<d", v))[0]


def _rebased(base: dict[str, int], changes: dict[str, int], derived: list[Any]) -> dict[str, int]:
    """``base`` with ``changes`` and its derived dims computed again from them (:func:`audit.cases.fill_derived`
    keeps a derived dim the environment binds already: ``TX`` of ``W = 1`` where ``W`` is now 32)."""
    from ..cases import fill_derived

    names = {d.name for d in derived}
    return fill_derived({**{n: v for n, v in base.items() if n not in names}, **changes}, derived)


def _derived_dims(cs: ContractSet) -> list[Any]:
    """The derived dims an environment's :func:`audit.cases.fill_derived` computes (those the contracts do not fix)."""
    return [d for d in cs.dim_map.values() if d.kind == "derived" and d.name not in cs.fixed_env]


def _producer_domains(cs: ContractSet, wiring: Any) -> dict[str, tuple[Any, str]]:
    """:func:`audit.cases.producer_domains`, once per wiring (every filling of every launch asks for it)."""
    from ..cases import producer_domains

    memo = getattr(wiring, "__dict__", None)
    if memo is None:
        return producer_domains(cs, wiring)
    got = memo.get("_producer_domains")
    if got is None:
        got = memo["_producer_domains"] = producer_domains(cs, wiring)
    return got


def _kernel_dims(k: Kernel) -> set[str]:
    """The dims ``k``'s shapes, integer scalars, grid, block and shared bytes name."""
    from ..model import ScalarParam, TensorParam

    out: set[str] = set()
    exprs: list[Any] = [*k.grid, *k.block, k.shared_bytes]
    for p in k.params:
        if isinstance(p, TensorParam):
            exprs += p.shape
        elif isinstance(p, ScalarParam):
            exprs.append(p.value)
    for e in exprs:
        out |= set(getattr(e, "names", ()))
    return out


def _odd_value(lo: int, hi: int) -> int | None:
    """The largest prime in ``[lo, hi]`` (an odd number where there is none; None where neither is).

    >>> _odd_value(1, 64), _odd_value(32, 32), _odd_value(64, 66)
    (61, None, 65)
    """
    for v in range(hi, max(lo, 2) - 1, -1):
        if v > 2 and all(v % d for d in range(2, int(v**0.5) + 1)):
            return v
    return next((v for v in range(hi, lo - 1, -1) if v % 2), None)


#: the largest buffer OUT_OF_BOUNDS_ACCESS checks: each pointer parameter's synthetic region is 2^40 bytes
#: apart from the next (a contract may declare sizes up to 2^62 elements, which no simulated address holds)
MAX_BUFFER_BYTES = 1 << 39


def _buffer(cs: ContractSet, p: Any, position: int, env: dict[str, int], slots: dict[str, int]) -> tuple:
    """The :data:`audit.cuda.blockbounds.Buffer` of pointer parameter ``p`` at ``env``: a tensor's extent
    is ``numel(shape) * dtype size`` (the element count a view gives it too), the ISV's its layout's
    ``total_dim`` slots; -1 where it does not evaluate (not checked)."""
    from ..model import DTYPES, IsvParam
    from ..shapes import value_at

    if isinstance(p, IsvParam):
        isv = cs.isv
        if isv is None:
            return (position, p.name, -1, 4, "", None)
        size = DTYPES.get(isv.dtype, (4,))[0]
        extent = isv.total_dim * size
        return (position, p.name, extent if extent < MAX_BUFFER_BYTES else -1, size, f"the ISV layout's total_dim = {isv.total_dim}, {isv.dtype}", None)
    size = DTYPES.get(p.dtype, (0,))[0]
    dims = [value_at(e, env, slots) for e in p.shape]
    shape = ", ".join(e.text for e in p.shape)
    if not size or any(d is None or d < 0 for d in dims):
        return (position, p.name, -1, size, f"shape [{shape}]", None)
    numel = 1
    for d in dims:
        numel *= d  # type: ignore[operator]
    values = ", ".join(str(d) for d in dims)
    detail = f"shape [{shape}]" + (f" = [{values}]" if values != shape else "") + f", {p.dtype}"
    wr = None
    if p.write_range is not None and 0 <= p.write_range.axis < len(dims):
        axis = p.write_range.axis
        start, stop = value_at(p.write_range.start, env, slots), value_at(p.write_range.stop, env, slots)
        inner = 1
        for d in dims[axis + 1 :]:
            inner *= d  # type: ignore[operator]
        if start is not None and stop is not None and inner > 0 and dims[axis]:
            wr = (inner, dims[axis], start, stop, f"write_range {p.write_range.text} = [{start}, {stop})")
    if numel * size >= MAX_BUFFER_BYTES:
        return (position, p.name, -1, size, detail, None)  # past any synthetic region: not checked
    return (position, p.name, numel * size, size, detail, wr)


def _block_launches(cs: ContractSet, wiring: Any, k: Kernel) -> tuple[list[BlockLaunch], list[BlockLaunch], list[BlockLaunch], str, str, str]:
    """(:func:`barrier_launches`, :func:`rmw_launches`, :func:`given_launches`, and the ``repr`` of each, which key the analysis
    cache) of ``k``, computed once per wiring: a check asks for them from seven rules and notes per kernel,
    and the texts of a kernel's launches with their buffers and fillings took ~40 ms a check to make again."""
    memo = getattr(wiring, "__dict__", None)
    if memo is None:
        launches, extra, given = barrier_launches(cs, wiring, k), rmw_launches(cs, wiring, k), given_launches(cs, wiring, k)
        return launches, extra, given, repr(launches), repr(extra), repr(given)
    store = memo.setdefault("_block_launches", {})
    got = store.get(k.name)
    if got is None or got[0] is not k:
        launches, extra, given = barrier_launches(cs, wiring, k), rmw_launches(cs, wiring, k), given_launches(cs, wiring, k)
        got = store[k.name] = (k, launches, extra, given, repr(launches), repr(extra), repr(given))
    return got[1:]


def _block_findings(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None, cache: AnalysisCache | None,
                    want: str, gap: bool = False) -> Any:  # fmt: skip
    """SHARED_BARRIER_MISSING's races (``want`` "races"), OUT_OF_BOUNDS_ACCESS's accesses ("bounds") or
    GLOBAL_RMW_RACE's updates ("rmw") of ``k``'s entry at its :func:`barrier_launches` (and, for the
    updates, its :func:`rmw_launches`), from one run of the block for all three: ``cache`` keeps each by the
    PTX text, the entry and the launches, and a run made for one stores what it found of the others (the
    races rule runs the bounds and updates along where it runs the block anyway). With ``gap``: instead
    of the findings, why that analysis did not reach every exit of every launch (``""`` where it did; see
    :func:`audit.cuda.blocksim.block_findings`), cached beside them."""
    entry = symbol or k.symbol
    launches, extra, given, shown, shown_extra, shown_given = _block_launches(cs, wiring, k)
    got: dict[str, Any] = {}
    gaps: dict[str, str] = {}

    def run(want: str) -> dict[str, Any]:
        if "races" not in got or (want not in ("races", "uninit") and got.get(want) is None):
            from .blocksim import block_findings  # numpy: only where the analysis cache does not answer

            gaps.clear()
            found, got["bounds"], got["rmw"], got["overlap"] = block_findings(ptx, entry, launches, None if want in ("races", "uninit") else True, extra, gaps, given)
            got["races"] = [r for r in found if r.scope != "uninit"]
            got["uninit"] = [r for r in found if r.scope == "uninit"]
        return got

    def gap_of(want: str) -> str:
        run(want)
        return gaps.get(want, "")

    if cache is None:
        return gap_of(want) if gap else (run(want)[want] or [])
    parts = {"races": [ptx, entry, shown], "uninit": [ptx, entry, shown], "bounds": [ptx, entry, shown, shown_given],
             "rmw": [ptx, entry, shown, shown_extra], "overlap": [ptx, entry, shown, shown_given]}
    kinds = {"races": ("barrier-races", BarrierRace), "uninit": ("shared-uninit", BarrierRace),
             "bounds": ("out-of-bounds", OutOfBounds), "rmw": ("global-rmw", GlobalRmwRace),
             "overlap": ("block-writes", BlockWriteOverlap)}

    def text(stored: Any) -> str:
        if not isinstance(stored, str):
            raise TypeError("not a string")
        return stored

    if gap:
        out = cache.value(kinds[want][0] + "-gap", parts[want], text, lambda: gap_of(want))
    else:
        out = cache.results(kinds[want][0], parts[want], kinds[want][1], lambda: run(want)[want])
    for other, (kind, cls) in kinds.items():
        if got.get(other) is not None:  # found alongside: kept for the other rule (and the gap rules)
            if other != want:
                cache.results(kind, parts[other], cls, lambda other=other: got[other])  # type: ignore[misc]
            if other in gaps:
                cache.value(kind + "-gap", parts[other], text, lambda other=other: gaps[other])  # type: ignore[misc]
    return out


def entry_block_gap(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, want: str, symbol: str | None = None,
                    cache: AnalysisCache | None = None) -> str:  # fmt: skip
    """Why the block run of SHARED_BARRIER_MISSING (``want`` "races"), OUT_OF_BOUNDS_ACCESS ("bounds") or
    GLOBAL_RMW_RACE ("rmw") did not reach every exit of ``k``'s entry at every launch (``"gave up: cp.async
    (at B = 1)"``, ``"stopped after 30000 steps (at ...)"``), or ``""`` where it did: what the rule could
    not examine, reported as not analysed rather than passed."""
    return _block_findings(cs, wiring, k, ptx, symbol, cache, want, gap=True)


def entry_barrier_races(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None,
                        cache: AnalysisCache | None = None) -> list[BarrierRace]:  # fmt: skip
    """The SHARED_BARRIER_MISSING races of ``k``'s entry in the PTX module ``ptx`` (:mod:`audit.cuda.barriers`)
    at its :func:`barrier_launches`; ``cache`` keeps them by the PTX text, the entry and the launches. A
    thread's access of its own copy in flight (scope ``self``) is CP_ASYNC_WAIT's: :func:`entry_own_copy_hazards`."""
    return [r for r in _block_findings(cs, wiring, k, ptx, symbol, cache, "races") if r.scope != "self"]


def entry_shared_uninit_reads(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None,
                              cache: AnalysisCache | None = None) -> list[BarrierRace]:  # fmt: skip
    """The SHARED_UNINIT_READ reads of ``k``'s entry in the PTX module ``ptx``: shared bytes read (or updated
    atomically) before any thread of the block wrote them, found by the run of :func:`entry_barrier_races`
    (:meth:`audit.cuda.blocksim._Block.found_uninit`); cached beside them."""
    return _block_findings(cs, wiring, k, ptx, symbol, cache, "uninit")


def entry_own_copy_hazards(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None,
                           cache: AnalysisCache | None = None) -> list[BarrierRace]:  # fmt: skip
    """A thread's read or write of shared bytes its own ``cp.async`` may still be writing (no
    ``cp.async.wait_group`` completed the copy's group before), found by the run of :func:`entry_barrier_races`."""
    return [r for r in _block_findings(cs, wiring, k, ptx, symbol, cache, "races") if r.scope == "self"]


def entry_block_writes(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None,
                       cache: AnalysisCache | None = None) -> list[BlockWriteOverlap]:  # fmt: skip
    """The BLOCK_WRITE_OVERLAP stores of ``k``'s entry in the PTX module ``ptx`` (:mod:`audit.cuda.blockwrites`):
    one global element stored by two blocks, from the blocks of OUT_OF_BOUNDS_ACCESS's run, at its launches;
    cached as :func:`entry_barrier_races`."""
    return _block_findings(cs, wiring, k, ptx, symbol, cache, "overlap")


def entry_out_of_bounds(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None,
                        cache: AnalysisCache | None = None) -> list[OutOfBounds]:  # fmt: skip
    """The OUT_OF_BOUNDS_ACCESS accesses of ``k``'s entry in the PTX module ``ptx``
    (:mod:`audit.cuda.blockbounds`) at its :func:`barrier_launches`; cached as :func:`entry_barrier_races`."""
    return _block_findings(cs, wiring, k, ptx, symbol, cache, "bounds")


def entry_global_rmw_races(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None,
                           cache: AnalysisCache | None = None) -> list[GlobalRmwRace]:  # fmt: skip
    """The GLOBAL_RMW_RACE updates of ``k``'s entry in the PTX module ``ptx`` (:mod:`audit.cuda.globalraces`)
    at its :func:`barrier_launches` and :func:`rmw_launches`; cached as :func:`entry_barrier_races`."""
    return _block_findings(cs, wiring, k, ptx, symbol, cache, "rmw")


def entry_async_copy_hazards(k: Kernel, ptx: str, symbol: str | None = None,
                             cache: AnalysisCache | None = None) -> list[AsyncCopyHazard]:
    """The CP_ASYNC_WAIT hazards of ``k``'s entry in the PTX module ``ptx`` (no launch extent matters);
    ``cache`` keeps them by the PTX text and the entry."""
    entry = symbol or k.symbol

    def compute() -> list[AsyncCopyHazard]:
        return find_async_copy_hazards(ptx, entry)

    return compute() if cache is None else cache.results("cp-async", [ptx, entry], AsyncCopyHazard, compute)


def ptx_finding_file(ptx: str, entry: str, source: str, root: Path) -> str:
    """The file whose lines the PTX analyses of ``entry`` report (its definition's: the kernel source, or
    the local header that defines the kernel, as a kernel of a header-only library does), as a path
    relative to ``root``; ``source`` where the PTX names no file inside the root."""
    from .races import entry_file

    named = entry_file(ptx, entry)
    if not named:
        return source
    path = Path(named)
    path = path if path.is_absolute() else root / path
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except (OSError, ValueError):
        return source
    return rel if path.is_file() else source


def kernel_code_findings(cs: ContractSet, wiring: Any, k: Kernel, source: Path, include_dirs: Sequence[Path], ptx: str | None,
                         display: str | None = None, symbol: str | None = None) -> list[tuple[str, str]]:  # fmt: skip
    """``(rule, message)`` of the static checks for kernel ``k`` compiled from ``source`` (a mutant, say) to
    ``ptx`` (None: STORE_RACE is skipped); messages name ``display`` (default ``k.source``) as the file.
    ``symbol`` is the entry's symbol in ``ptx`` where it is not ``k.symbol`` (a ``cpp_name``'s mangled
    name, which the build resolves). Findings a ``[[suppress]]`` entry of ``cs`` covers are left out."""
    from ..hashing import include_closure

    display = display or k.source
    # the source and every local header it includes, found beside it first: a header mutant is compiled
    # from a copy of the kernel source next to the mutated header, so that is the header read here
    first = source.resolve()
    files = [first, *(h for h in include_closure(source, include_dirs) if h != first)]
    instances = kernel_instances(cs, wiring, [k])
    out: list[tuple[str, str]] = []
    shared_overruns: dict[Path, list[SharedOverrun]] = {}
    shown_of: dict[Path, str] = {}
    for f in files:
        shown = shown_of[f] = display if f == first else (Path(display).parent / f.name).as_posix()
        out += [("LOCAL_ARRAY_BOUNDS", o.message(shown)) for o in source_overruns(f, include_dirs, None, instances)]
        out += [("LOCAL_UNINIT_READ", r.message(shown)) for r in source_uninit_reads(f, include_dirs)]
        shared_overruns[f] = source_shared_overruns(f, include_dirs, None, instances)
        out += [("SHARED_ARRAY_BOUNDS", o.message(shown)) for o in shared_overruns[f]]
    if ptx is not None:
        out += [("STORE_RACE", r.message(k.name, display)) for r in entry_store_races(cs, wiring, k, ptx, symbol)]
        out += [("SHARED_RMW_RACE", r.message(k.name, display)) for r in entry_shared_races(cs, wiring, k, ptx, symbol)]
        out += [("CP_ASYNC_WAIT", h.message(k.name, display)) for h in entry_async_copy_hazards(k, ptx, symbol)]
        out += [("INDEX_OVERFLOW", o.message(k.name, display)) for o in entry_index_overflows(cs, wiring, k, ptx, symbol)]
        from .blocksim import block_findings  # one run for the three rules

        races, accesses, updates, overlaps = block_findings(ptx, symbol or k.symbol, barrier_launches(cs, wiring, k), True, rmw_launches(cs, wiring, k),
                                                          given=given_launches(cs, wiring, k))
        out += [("CP_ASYNC_WAIT" if r.scope == "self" else "SHARED_UNINIT_READ" if r.scope == "uninit" else "SHARED_BARRIER_MISSING",
                 r.message(k.name, display)) for r in races]
        out += [("GLOBAL_RMW_RACE", u.message(k.name, display)) for u in updates or ()]
        out += [("BLOCK_WRITE_OVERLAP", o.message(k.name, display)) for o in overlaps or ()]
        # a shared overrun SHARED_ARRAY_BOUNDS reports on its line (it explains it with its loop) is left to it
        lines = {(shown_of[f], o.line) for f, found in shared_overruns.items() for o in found}
        out += [("OUT_OF_BOUNDS_ACCESS", o.message(k.name, display)) for o in accesses or ()
                if not _reported_at(o, display, lines)]
    # what a [[suppress]] entry accepts for this kernel is no finding here either (as in ``wireup check``)
    return [(rule, message) for rule, message in out if not any(s.matches(rule, k.name, message) for s in cs.suppressions)]


def _reported_at(o: OutOfBounds, shown: str, lines: set[tuple[str, int | None]]) -> bool:
    """Whether the shared overrun ``o`` (of the entry whose file is shown as ``shown``) is on a line of
    ``lines`` ((file shown, line) of SHARED_ARRAY_BOUNDS findings): its own, or the inlined helper's."""
    if o.memory not in ("shared", "dynamic"):
        return False
    if (shown, o.line) in lines:
        return True
    if o.origin:
        name, _, line = o.origin.rpartition(":")
        return any(Path(f).name == name and str(n) == line for f, n in lines)
    return False


_EXTERN_SHARED = re.compile(r"^\s*\.extern\s+\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+([A-Za-z_$][\w$]*)\s*\[\s*\]\s*;", re.MULTILINE)


def extern_shared_names(ptx: str) -> list[str]:
    """The ``.extern .shared`` arrays a PTX module declares (none: no entry of it uses dynamic shared memory)."""
    return _EXTERN_SHARED.findall(ptx)


def dynamic_shared_arrays(ptx: str, entry: str) -> list[str]:
    """The ``extern __shared__`` arrays (dynamic shared memory) that the PTX entry ``entry`` uses.

    >>> ptx = ".extern .shared .align 16 .b8 smem[];\\n.visible .entry k(\\n.param .u32 n\\n)\\n{\\nmov.u32 %r1, smem;\\n}\\n"
    >>> dynamic_shared_arrays(ptx, "k"), dynamic_shared_arrays(ptx.replace("mov.u32 %r1, smem;", ""), "k")
    (['smem'], [])
    >>> named = ptx.replace("smem", "shared").replace("mov.u32 %r1, shared;", "st.shared.f32 [%r1], %f1;")
    >>> dynamic_shared_arrays(named, "k")   # an array named "shared", and an entry that only uses .shared
    []
    """
    names = extern_shared_names(ptx)
    if not names:
        return []
    m = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(", ptx)
    if m is None:
        return []
    open_at = ptx.find("{", ptx.find(")", m.end()))
    if open_at < 0:
        return []
    depth, i = 0, open_at
    while i < len(ptx):
        if ptx[i] == "{":
            depth += 1
        elif ptx[i] == "}":
            depth -= 1
            if depth == 0:
                break
        i += 1
    body = ptx[open_at:i]
    # a symbol, not part of a longer name or of an instruction ("shared" in st.shared.f32)
    return [n for n in names if re.search(rf"(?<![\w$.]){re.escape(n)}(?![\w$])", body)]
