"""``cp.async`` copies that no wait covers, found statically in a kernel's PTX (CP_ASYNC_WAIT).

An asynchronous copy into shared memory (``cp.async.ca/cg.shared.global``) lands at some later time; the
issuing thread learns that it has landed only through ``cp.async.wait_group N`` (every committed group
but the N most recent is complete) or ``cp.async.wait_all``. Two slips leave a copy that no wait covers,
and in practice the copy has usually landed anyway by the time its data is read, so no run, memcheck or
racecheck reports either (racecheck passed both survivors of the H200 run of 4 December):

* **uncommitted**: a ``cp.async.wait_group`` is reached while copies issued since the last
  ``cp.async.commit_group`` may be outstanding. ``wait_group`` waits for *committed* groups only: a
  pipeline that lost its ``cp_async_commit()`` reads a stage whose copies nothing has waited for.
* **undrained**: the entry can exit with copies that no ``cp.async.wait_group 0`` (or ``wait_all``)
  has drained since they were issued. Whether shared memory reused after a pipeline (a union of the
  stages and an epilogue tile) or the block's exit races with them then rests on every trailing group of
  the pipeline being empty; CUTLASS's multistage mainloops drain every pending copy after the loop for
  that reason, and so does ``aux_weight_grad_reduce`` (``cp_async_wait<0>()`` before its tiles).

The analysis is a forward dataflow over the entry's control-flow graph (every path, both ways of every
branch) of two sets of copy instructions: those issued since the last commit, and those in committed
groups not yet drained by a ``wait_group 0``. A ``wait_group N`` with N > 0 drains nothing in this
analysis (which groups it covers depends on how many commits each path made). Copies completed through
an mbarrier (``cp.async.mbarrier.arrive``: ``cuda::pipeline`` with a barrier, ``cuda::memcpy_async`` on a
block) are waited for by the barrier, not by ``wait_group``: an entry with one is not analysed, nor is an
entry whose ``wait_group`` counts take more than :data:`MAX_WAIT_COUNTS` values (``cuda::pipeline``'s
``consumer_wait`` picks the count at run time from the stages in flight). Bulk copies
(``cp.async.bulk``, TMA) are another mechanism and are ignored.

>>> hazards = find_async_copy_hazards(ptx, "aux_weight_grad_reduce")   # doctest: +SKIP
>>> hazards[0].kind                                                    # doctest: +SKIP
'uncommitted'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from .races import _COMMENT, _FILE, _cfg, _entry_text, _Inst, _int, _parse_body, _strip_comment, finding_place


@dataclass(frozen=True)
class AsyncCopyHazard:
    """One ``cp.async`` slip of one entry: ``kind`` is ``"uncommitted"`` (a wait reached with copies not
    committed to a group) or ``"undrained"`` (an exit reached with copies no ``wait_group 0`` drained)."""

    entry: str
    kind: str
    line: int | None  # the kernel's own source line of the wait (uncommitted) or the exit (undrained)
    copy_line: int | None  # the kernel's own source line of one copy it concerns
    origin: str | None  # "sgemm_tile.cuh:225" where that copy is inlined from another file, else None
    instruction: str  # the wait or the exit, as written

    def message(self, kernel: str, source: str) -> str:
        """One sentence for the finding; ``source`` is the path shown for the kernel's file."""
        copy = f"{source}:{self.copy_line}" if self.copy_line is not None else source
        if self.origin:
            copy += f", inlined from {self.origin}"
        if self.kind == "uncommitted":
            where = finding_place(source, self.line)
            return (f'Kernel "{kernel}" reaches "{self.instruction}" ({where}) with cp.async copies ({copy}) '
                    "issued since the last cp.async.commit_group: wait_group waits for committed groups only, "
                    "so their shared memory may be read before they land; commit them to a group "
                    "(cp.async.commit_group) before the wait.")
        at = f" ({source}:{self.line})" if self.line is not None else ""
        return (f'Kernel "{kernel}" can exit{at} with cp.async copies ({copy}) that no cp.async.wait_group 0 '
                "or cp.async.wait_all has drained: shared memory reused after the pipeline, or the block's "
                "exit, may race with copies still landing; drain them (cp.async.wait_group 0) after the last read "
                "of the pipeline.")


#: most distinct ``wait_group`` counts an analysed entry has: ``cuda::pipeline``'s ``consumer_wait`` (and
#: ``__pipeline_wait_prior`` with a run-time count) compiles to a switch over ``wait_group 0`` .. ``8`` on
#: the number of stages in flight, a choice this path-insensitive analysis cannot follow
MAX_WAIT_COUNTS = 2


def _is_copy(inst: _Inst) -> bool:
    parts = inst.opcode.split(".")
    return (inst.head == "cp" and len(parts) > 2 and parts[1] == "async" and parts[2] in ("ca", "cg")
            and any(p.startswith("shared") for p in parts))


def _kind(inst: _Inst) -> str | None:
    """``copy``, ``commit``, ``wait0``, ``waitN``, ``waitall`` or None for any other instruction."""
    if inst.head != "cp" or not inst.opcode.startswith("cp.async"):
        return None
    if _is_copy(inst):
        return "copy"
    op = inst.opcode
    if op == "cp.async.commit_group":
        return "commit"
    if op == "cp.async.wait_all":
        return "waitall"
    if op == "cp.async.wait_group":
        try:
            return "wait0" if inst.operands and _int(inst.operands[0]) == 0 else "waitN"
        except ValueError:
            return "waitN"
    return None


def find_async_copy_hazards(ptx: str, entry: str) -> list[AsyncCopyHazard]:
    """The CP_ASYNC_WAIT hazards of ``entry``: each uncommitted wait once per source line, in PTX order,
    then at most one undrained exit. Raises ValueError when the module has no such entry."""
    text = _COMMENT.sub(_strip_comment, ptx)
    _, _, body = _entry_text(text, entry)
    if "cp.async" not in body or "cp.async.mbarrier" in body:
        return []
    insts, labels = _parse_body(body)
    copies = [i for i, inst in enumerate(insts) if _is_copy(inst)]
    counts = {inst.operands[0] for inst in insts if inst.opcode == "cp.async.wait_group" and inst.operands}
    if not copies or len(counts) > MAX_WAIT_COUNTS:
        return []  # no copy; or the count of each wait is picked at run time (cuda::pipeline's consumer_wait)
    files = {int(n): p for n, p in _FILE.findall(text)}
    blocks, succ = _cfg(insts, labels)
    State = tuple[int, int]  # (uncommitted copies, committed but undrained copies) as bit masks of indices
    into: list[State | None] = [None] * len(blocks)
    into[0] = (0, 0)

    def run(n: int, state: State, report: list[tuple[int, int]] | None = None) -> State:
        u, p = state
        a, b = blocks[n]
        for i in range(a, b):
            k = _kind(insts[i])
            if k == "copy":
                u |= 1 << i
            elif k == "commit":
                p, u = p | u, 0
            elif k in ("wait0", "waitN") and u and report is not None:
                report.append((i, u))
            if k == "wait0":
                p = 0
            elif k == "waitall":
                u = p = 0
        return u, p

    work = [0]
    while work:
        n = work.pop()
        state = into[n]
        assert state is not None
        out = run(n, state)
        for s in succ[n]:
            old = into[s]
            new = out if old is None else (old[0] | out[0], old[1] | out[1])
            if new != old:
                into[s] = new
                work.append(s)
    found: list[AsyncCopyHazard] = []
    waits: list[tuple[int, int]] = []
    exits: list[tuple[int, int]] = []
    for n, (a, b) in enumerate(blocks):
        state = into[n]
        if state is None:
            continue
        out = run(n, state, waits)
        last = insts[b - 1] if b > a else None
        if (last is None and not succ[n]) or (last is not None and last.head in ("ret", "exit")):
            if out[0] | out[1]:
                exits.append((b - 1 if last is not None else -1, out[0] | out[1]))
    seen: set[tuple[int, int] | int] = set()
    for i, mask in sorted(waits):
        where = insts[i].loc or i  # an unrolled loop repeats one source wait: it is reported once
        if where not in seen:
            seen.add(where)
            found.append(_hazard(entry, "uncommitted", insts, i, mask, files))
    if exits:
        i, mask = exits[0]
        found.append(_hazard(entry, "undrained", insts, i, mask, files))
    return found


def _hazard(entry: str, kind: str, insts: list[_Inst], at: int, mask: int, files: dict[int, str]) -> AsyncCopyHazard:
    copy = (mask & -mask).bit_length() - 1  # the first copy concerned, in PTX order
    c = insts[copy]
    origin = None
    if c.src is not None and c.loc is not None and c.src[0] != c.loc[0] and c.src[0] in files:
        origin = f"{PurePosixPath(files[c.src[0]]).name}:{c.src[1]}"
    here = insts[at] if at >= 0 else None
    line = here.loc[1] if here is not None and here.loc else None
    shown = here.text if here is not None else "the end of the entry"
    return AsyncCopyHazard(entry, kind, line, c.loc[1] if c.loc else None, origin, shown)
