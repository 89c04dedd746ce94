"""The static kernel-code checks, one place for the rules of ``wireup check`` and for ``wireup mutate``.

Three bugs that no run of a kernel can show, because the compiled code hides them:

* LOCAL_ARRAY_BOUNDS (:mod:`audit.cuda.bounds`, on the source): a constant-bound loop that indexes a
  fixed-size local array out of bounds (``for (u = 0; u <= kQuads; ++u) v[u] = ...`` over
  ``float4 v[kQuads]``). It is undefined behaviour; nvcc drops the store or reads an undefined register.
* LOCAL_UNINIT_READ (:mod:`audit.cuda.uninit`, on the source): a read of a local array's element that
  was written only under a run-time guard the read lacks (``if (k < K) l[k] = ...`` read back by a loop
  without the guard, or with ``k <= K``): an uninitialised register, which nvcc may compile into code
  that behaves like the original.
* STORE_RACE (:mod:`audit.cuda.races`, on the PTX): a non-atomic global store at an address that is the
  same for every thread, which more than one thread runs (a deleted ``if (tid == 0)`` around an ISV
  update). The lanes of a warp store the same value; warps that interleave blend an EMA twice.

>>> hits = kernel_code_findings(cs, wiring, cs.kernel("aux_heads_loss_ema_update"), path, [], ptx)  # doctest: +SKIP
>>> hits                                                                                           # doctest: +SKIP
[]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bounds import Overrun, find_overruns, included_constants
from .races import StoreRace, find_store_races
from .uninit import UninitRead, source_uninit_reads

if TYPE_CHECKING:
    from ..model import ContractSet, Kernel

Extents = tuple[int | None, int | None, int | None]


def source_overruns(path: Path, include_dirs: Sequence[Path]) -> list[Overrun]:
    """The LOCAL_ARRAY_BOUNDS overruns of one source file, with the integer constants of the local headers
    it includes (transitively) known. A file that cannot be read or tokenized has none."""
    from ..untrusted import SOURCE_LIMIT, read_regular
    from .tokens import TokenizeError

    try:
        text = read_regular(path, SOURCE_LIMIT).decode("utf-8", errors="replace")
        return find_overruns(text, included_constants(path, include_dirs))
    except (OSError, TokenizeError):
        return []


def overrun_text(o: Overrun | UninitRead) -> str:
    """The overrun's (or uninitialised read's) sentence without its ``path:line:`` prefix (a finding
    carries the location)."""
    return o.message("").split(": ", 1)[1]


def launch_extents(cs: ContractSet, wiring: Any, k: Kernel) -> tuple[Extents, Extents]:
    """(block, grid) extents of ``k`` over every launch the schedules make of it (its probe sizes where
    none does): a dimension's value where every launch agrees, else None (more than one value: possibly
    more than one thread or block)."""
    from ..shapes import value_at

    envs = [env for _, launch in wiring.launches_by_kernel.get(k.name, ()) for env in launch.envs] or list(wiring.envs)

    def agree(exprs: Sequence[Any]) -> Extents:
        out: list[int | None] = []
        for e in exprs:
            values = {value_at(e, env) for env in envs} if envs else {None}
            out.append(values.pop() if len(values) == 1 else None)
        return (out[0], out[1], out[2])

    return agree(k.block), agree(k.grid)


def entry_store_races(cs: ContractSet, wiring: Any, k: Kernel, ptx: str, symbol: str | None = None) -> list[StoreRace]:
    """The STORE_RACE stores of ``k``'s entry in the PTX module ``ptx``."""
    block, grid = launch_extents(cs, wiring, k)
    return find_store_races(ptx, symbol or k.symbol, block, grid)


def race_line(race: StoreRace, source: str) -> int | None:
    """The race's line in ``source`` (a path as the contract writes it), where its ``.loc`` is that file."""
    if race.line is None or race.file is None:
        return None
    return race.line if Path(race.file).name == Path(source).name or race.file_index == 1 else None


def kernel_code_findings(cs: ContractSet, wiring: Any, k: Kernel, source: Path, include_dirs: Sequence[Path], ptx: str | None,
                         display: str | None = None) -> list[tuple[str, str]]:  # fmt: skip
    """``(rule, message)`` of the three checks for kernel ``k`` compiled from ``source`` (a mutant, say) to
    ``ptx`` (None: STORE_RACE is skipped); messages name ``display`` (default ``k.source``) as the file."""
    display = display or k.source
    out = [("LOCAL_ARRAY_BOUNDS", o.message(display)) for o in source_overruns(source, include_dirs)]
    out += [("LOCAL_UNINIT_READ", r.message(display)) for r in source_uninit_reads(source, include_dirs)]
    if ptx is not None:
        out += [("STORE_RACE", r.message(k.name, display)) for r in entry_store_races(cs, wiring, k, ptx)]
    return out
