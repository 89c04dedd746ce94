"""Write races on global memory, found statically in a kernel's PTX.

A non-atomic global store whose address is the same for every thread of a block, run by more than one
thread, is a write race: 32 lanes (or 8 interleaving warps) doing ``isv[slot] = blend(isv[slot], v)``
blend the EMA several times. compute-sanitizer's racecheck sees shared memory only and the lanes of a
warp usually store identical values, so no runtime tool reports it; the PTX shows it plainly.

The analysis of one ``.entry``:

* **Uniformity** (taint to a fixed point): a register is *thread-varying* when a definition reads
  ``%tid``/``%laneid``/``%warpid``/``%lanemask_*``/a clock or a thread-varying register, or is a load
  other than ``ld.param`` of a kernel parameter or ``ld.const`` (loaded values are unknown), or a
  ``shfl``/``atom``/``vote``/``match``/``activemask``/``redux``...; *block-varying* likewise from
  ``%ctaid``/``%clusterid``/``%cluster_ctaid``/``%cluster_ctarank``/``%smid``. A register written under
  a varying branch and read after it (a loop counted by a thread-varying bound) is varying too.
* **Facts** (a forward must-dataflow over the CFG): ``tid.x == c``, ``ctaid.y != c``..., from branch
  (or store) predicates made by ``setp`` on a register copied once from a special register, or on an
  ``or``/``add`` of several, or a ``mad.lo``/``mul.lo`` of thread indices by a block extent (cooperative
  groups' ``thread_rank()``; these give ``== 0`` facts only), combined by ``and/or/not.pred``.
  A register written again later (nvcc keeps a loop counter started from ``tid`` in ``tid``'s register)
  still gives facts at the tests only its first write, the copy, reaches.
* **The "last block" ticket** (threadFenceReduction's idiom, :func:`_ticket_preds`): the value an
  ``atomicAdd``/``atomicInc`` returns is each caller's own, so ``ticket == X`` (``X`` uniform) holds in one
  thread of the grid at most; a ``__shared__`` flag set only from such a test (``amLast = ticket ==
  gridDim.x - 1``, or 0) and read back holds in one block at most. The first pins thread and block, the
  second the block: the winner's ``if (amLast && tid == 0) out[0] = total`` is no race.
* A store ``st.global*`` (a generic ``st`` only when its address comes from a kernel parameter and
  from no shared/local/stack address) whose address is not thread-varying, reached while a thread
  dimension of extent > 1 (or unknown) has no ``tid.d == c`` fact, is a *thread race*. One pinned to a
  single thread whose address is not block-varying either, reached while a grid dimension of extent > 1
  (or unknown) has no ``ctaid.d == c`` fact, is a *block race*. A thread-indexed address shared by all
  blocks (``out[threadIdx.x]`` in a grid of several blocks) is out of scope; so are atomics
  (``atom``/``red``/``st.relaxed``/``st.release``) and shared/local/param stores.

>>> races = find_store_races(ptx, "aux_heads_loss_ema_update", block=(32, 1, 1), grid=(1, 1, 1))  # doctest: +SKIP
>>> races[0].message("aux_heads_loss_ema_update", "kernels/aux_heads_loss_ema_kernel.cu")       # doctest: +SKIP
'Kernel "aux_heads_loss_ema_update" stores to global memory at an address that is the same for every ...'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from dataclasses import dataclass

Fact = tuple[str, str, int]  # ("tid.x", "==", 0)
Facts = frozenset[Fact]
Dims = tuple[int | None, int | None, int | None]
_NO: Facts = frozenset()
_DIMS = ("x", "y", "z")
_FACT_VARS = {f"{s}.{d}" for s in ("tid", "ctaid") for d in _DIMS} | {"cluster_ctarank"}
_SPECIAL = {"tid", "ntid", "laneid", "warpid", "nwarpid", "ctaid", "nctaid", "smid", "nsmid", "gridid", "clusterid",
            "nclusterid", "cluster_ctaid", "cluster_nctaid", "cluster_ctarank", "cluster_nctarank", "lanemask_eq",
            "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt", "clock", "clock64", "globaltimer",
            "globaltimer_lo", "globaltimer_hi", "dynamic_smem_size", "total_smem_size"}
_THREAD_SPECIAL = ("tid", "laneid", "warpid", "lanemask_", "clock", "globaltimer")  # name prefixes
_BLOCK_SPECIAL = ("ctaid", "clusterid", "cluster_ctaid", "cluster_ctarank", "smid", "clock", "globaltimer")
_FRESH = {"ldu", "ldmatrix", "tex", "tld4", "suld", "atom", "shfl", "vote", "match", "activemask", "redux", "elect",
          "mbarrier", "wmma", "tcgen05", "getctarank"}
_NO_DEST = {"st", "red", "bra", "brx", "ret", "exit", "trap", "bar", "barrier", "membar", "fence", "prefetch",
            "prefetchu", "cp", "call", "nanosleep", "pmevent", "stmatrix", "sust", "griddepcontrol"}
_ENDS = ("bra", "brx", "ret", "exit", "trap")
_SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "lo": "hi", "hi": "lo", "ls": "hs", "hs": "ls"}

_COMMENT = re.compile(r'"[^"\n]*"|//[^\n]*|/\*.*?\*/', re.DOTALL)
_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.MULTILINE)
_GLOBAL_VAR = re.compile(r"^\s*(?:\.(?:visible|extern|weak)\s+)*\.global\s[^;=]*?([\w$]+)\s*(?:\[\d*\])?\s*[;=]",
                         re.MULTILINE)
_SHARED_VAR = re.compile(r"\.shared\s[^;=]*?([\w$]+)\s*(?:\[\d*\])?\s*;")
_LOC = re.compile(r"\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:[^\n]*?inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?[^\n]*")
_SKIP = re.compile(r"[\s{}]+")  # whitespace and the braces of inline-asm scopes
_LABEL = re.compile(r"([$\w.]+)\s*:(?!:)")
_GUARD = re.compile(r"@(!?)(%?[A-Za-z_$][\w$]*)\s+")  # also a bare name: an inline-asm scope's `.reg .pred p` (CUTLASS)
_REG = re.compile(r"%[A-Za-z_$][\w$]*(?:\.[xyz])?")
_INT = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|\d+)U?")
_BRACKET = re.compile(r"[{}\[\]()]")
_SPLIT = re.compile(r"[{}\[\](),]")
_BRACE = re.compile(r"[{}]")
_WORD = re.compile(r"[\w$]+")
_SP = re.compile(r"%SPL?\b")
_CVTA_OTHER = re.compile(r"cvta\.(shared|local|const|param)")


@dataclass(frozen=True)
class StoreRace:
    """One racy global store of one entry; ``kind`` is ``"thread"`` (within a block) or ``"block"``."""

    entry: str
    line: int | None  # the kernel's own source line (for an inlined helper, the line it is inlined at)
    file_index: int | None  # the .loc file number
    file: str | None  # that number's path in the module's .file table, as written there
    instruction: str  # whitespace-normalised, with its guard: "st.global.f32 [%rd7], %f7"
    threads: str  # which threads run it: "every thread of the block", "threads with tid.x != 0"
    kind: str
    dims: tuple[str, ...]  # the dimensions with no single-index fact at the store: ("x",)

    def message(self, kernel: str, source: str) -> str:
        """One sentence for the finding; ``source`` is the path shown for the kernel's file."""
        where = finding_place(source, self.line)
        scope, index = ("thread", "threadIdx") if self.kind == "thread" else ("block", "blockIdx")
        same = "every thread of a block" if self.kind == "thread" else "every block of the grid"
        guard = " && ".join(f"{index}.{d} == 0" for d in self.dims)
        return (f'Kernel "{kernel}" stores to global memory at an address that is the same for {same} '
                f"({where}, {self.instruction}) from more than one {scope}: a write race; guard it so one "
                f"{scope} stores (if ({guard})), or use an atomic.")


def finding_place(source: str, line: int | None, origin: str | None = None) -> str:
    """Where a PTX finding stands, as its message says it: ``source:line`` (the source alone without a line),
    and ``, inlined from helper.cuh:12`` where the instruction comes from another file."""
    where = f"{source}:{line}" if line is not None else source
    return f"{where}, inlined from {origin}" if origin else where


def thread_pair(t: tuple[int, ...]) -> tuple[str, str]:
    """Two threads as the block-run findings name them: ``t`` is threadIdx (x, y, z) and blockIdx (x, y, z) of
    the first, then of the second ("threadIdx (0, 0, 0) of blockIdx (1, 0, 0)")."""
    return (f"threadIdx ({t[0]}, {t[1]}, {t[2]}) of blockIdx ({t[3]}, {t[4]}, {t[5]})",
            f"threadIdx ({t[6]}, {t[7]}, {t[8]}) of blockIdx ({t[9]}, {t[10]}, {t[11]})")


class _Inst:
    """One PTX instruction. Its head, written and read registers are computed once, when it is parsed:
    the analyses below ask for them hundreds of thousands of times (a fixed point over every
    instruction of an entry)."""

    __slots__ = ("opcode", "operands", "guard", "loc", "text", "head", "src", "_dests", "_sources")

    def __init__(self, opcode: str, operands: tuple[str, ...], guard: tuple[str, bool] | None,
                 loc: tuple[int, int] | None, text: str, src: tuple[int, int] | None = None) -> None:
        self.opcode, self.operands, self.guard, self.loc, self.text = opcode, operands, guard, loc, text
        self.src = src  # (file, line) of its own .loc, before inlining resolves it to the kernel's file
        self.head = opcode.split(".", 1)[0]
        dests: tuple[str, ...] = ()
        if self.head not in _NO_DEST and operands and operands[0][0] in "%{":
            dests = tuple(r for r in _REG.findall(operands[0]) if not _special(r))
        self._dests = dests
        ops = operands[1:] if dests else operands
        self._sources = tuple(r for op in ops for r in _REG.findall(op)) + ((guard[0],) if guard else ())

    def dests(self) -> tuple[str, ...]:
        """The registers written: the first operand, a vector ``{%r1, %r2}`` or a pair ``%p|%q``."""
        return self._dests

    def sources(self) -> tuple[str, ...]:
        """The registers read, the guard predicate included."""
        return self._sources


@dataclass(frozen=True)
class _Form:
    """What a register written once holds: a special register (``var``), an ``or``/``add`` of several or a
    thread rank (``any``: zero exactly when each is), or an integer (``const``)."""

    kind: str
    names: frozenset[str] = frozenset()
    value: int = 0


Forms = dict[str, _Form]
Preds = dict[str, tuple[Facts, Facts]]  # predicate -> (facts when true, facts when false)


def entries(ptx: str) -> list[str]:
    """The ``.entry`` names of a PTX module, in module order."""
    return _ENTRY.findall(_COMMENT.sub(_strip_comment, ptx))


def entry_file(ptx: str, entry: str) -> str | None:
    """The path the PTX's ``.file`` table gives for the file ``entry`` is defined in (that of its body's first
    ``.loc`` that is not inlined): the file whose lines the analyses report. None where it has no ``.loc``
    or no such entry.

    >>> entry_file('.file 1 "k.cuh"\n.visible .entry k()\n{\n.loc 1 3 0\nret;\n}\n', "k")
    'k.cuh'
    """
    text = _COMMENT.sub(_strip_comment, ptx)
    try:
        _, _, body = _entry_text(text, entry)
    except ValueError:
        return None
    for m in _LOC.finditer(body):
        if not m[4]:
            return {int(n): p for n, p in _FILE.findall(text)}.get(int(m[1]))
    return None


def find_store_races(ptx: str, entry: str, block: Dims = (None, None, None),
                     grid: Dims = (None, None, None), pinned: Mapping[int, int] | None = None) -> list[StoreRace]:
    """The racy global stores of ``entry``, in PTX order, the first per (source line, kind).

    ``block``/``grid`` are the launch extents (None: unknown, possibly > 1); a dimension of extent 1 has
    index 0. ``.reqntid`` fills unknown block extents, and ``.maxntid 1, 1, 1`` all of them (a larger
    ``.maxntid`` bounds the product only). ``pinned`` gives the value of integer parameters (by position)
    every launch passes alike: ``if (i >= n) return;`` with ``n`` pinned to 1 leaves the thread whose
    global index is 0. Raises ValueError when the module has no such entry.
    """
    text = _COMMENT.sub(_strip_comment, ptx)
    files = {int(n): p for n, p in _FILE.findall(text)}
    params, head, body = _entry_text(text, entry)
    block = _thread_extents(head, block)
    implicit = frozenset((f"{s}.{d}", "==", 0) for s, ext in (("tid", block), ("ctaid", grid))
                         for d, n in zip(_DIMS, ext) if n == 1)
    insts, labels = _parse_body(body)
    blocks, succ = _cfg(insts, labels)
    names = _param_order(text, entry)
    consts = {names[i]: v for i, v in (pinned or {}).items() if i < len(names)}
    forms, preds = _forms(insts, blocks, succ, consts)
    thread_var, block_var = _uniformity(insts, params, blocks, succ)
    _ticket_preds(insts, preds, thread_var | block_var, set(_SHARED_VAR.findall(text)))
    _uniform_index_preds(insts, forms, preds, thread_var)
    facts_in = _facts(blocks, succ, insts, preds, implicit)
    origin = _address_origin(insts, params, text)
    out: list[StoreRace] = []
    seen: set[tuple[tuple[int, int] | None, str]] = set()
    for (lo, hi), here in zip(blocks, facts_in):
        for inst in insts[lo:hi] if here is not None else ():
            if not _is_global_store(inst, origin):
                continue
            facts = here | (_pred_facts(preds, inst.guard[0], not inst.guard[1]) if inst.guard else _NO)
            race = _classify(facts, implicit, _REG.findall(inst.operands[0]), thread_var, block_var, block, grid)
            if race is None or (inst.loc, race[0]) in seen:
                continue
            seen.add((inst.loc, race[0]))
            fi, line = inst.loc if inst.loc else (None, None)
            out.append(StoreRace(entry, line, fi, files.get(fi) if fi is not None else None, inst.text, race[2],
                                 race[0], race[1]))
    return out


# -- parsing ---------------------------------------------------------------------------------------------


def _strip_comment(m: re.Match[str]) -> str:
    return m.group(0) if m.group(0).startswith('"') else " "


def _int(text: str) -> int:
    t = text.rstrip("U")
    neg, t = t.startswith("-"), t.lstrip("-")
    v = int(t, 16) if t[:2] in ("0x", "0X") else int(t, 8) if len(t) > 1 and t[0] == "0" else int(t)
    return -v if neg else v


def _params_at(text: str, at: int) -> list[str]:
    """The parameter names of the entry whose list opens at ``at`` (after ``.entry name(``), in order."""
    close = text.index(")", at)
    return [re.sub(r"\[\d*\]", "", p).split()[-1] for p in text[at:close].split(",") if p.strip()]


def _param_order(text: str, entry: str) -> list[str]:
    """The parameter names of ``entry``, in order."""
    return next((_params_at(text, m.end()) for m in _ENTRY.finditer(text) if m.group(1) == entry), [])


def _entry_text(text: str, entry: str) -> tuple[set[str], str, str]:
    """(parameter names, the directives between ``)`` and ``{``, the body) of one entry."""
    for m in _ENTRY.finditer(text):
        if m.group(1) != entry:
            continue
        close = text.index(")", m.end())
        params = set(_params_at(text, m.end()))
        start, depth = text.index("{", close), 0
        for b in _BRACE.finditer(text, start):
            depth += 1 if b.group() == "{" else -1
            if depth == 0:
                return params, text[close + 1 : start], text[start + 1 : b.start()]
        raise ValueError(f"PTX entry {entry!r} has no closing brace")
    raise ValueError(f"no PTX entry {entry!r} in this module")


def _thread_extents(head: str, block: Dims) -> Dims:
    req = re.search(r"\.reqntid\s+([\d,\s]+)", head)
    known: list[int | None] = [*(int(x) for x in re.findall(r"\d+", req.group(1))), 1, 1] if req else [None] * 3
    most = re.search(r"\.maxntid\s+([\d,\s]+)", head)
    if most and all(int(x) == 1 for x in re.findall(r"\d+", most.group(1))):
        known = [1, 1, 1]
    return (block[0] if block[0] is not None else known[0], block[1] if block[1] is not None else known[1],
            block[2] if block[2] is not None else known[2])


def _split_operands(text: str) -> tuple[str, ...]:
    """The comma-separated operands of ``text``, commas inside ``{}``, ``[]`` or ``()`` kept."""
    if not _BRACKET.search(text):
        parts = text.split(",")
    else:
        parts, depth, start = [], 0, 0
        for m in _SPLIT.finditer(text):
            ch = m.group()
            if ch == ",":
                if depth == 0:
                    parts.append(text[start : m.start()])
                    start = m.end()
            else:
                depth += 1 if ch in "{[(" else -1
        parts.append(text[start:])
    return tuple(" ".join(o.split()) for o in parts if o.strip())


@lru_cache(maxsize=64)
def _parse_body(body: str) -> tuple[list[_Inst], dict[str, int]]:
    """Instructions with their location in the kernel's own file, and label -> instruction index.

    Kept for the process by the body's text (STORE_RACE, SHARED_RMW_RACE, INDEX_OVERFLOW and CP_ASYNC_WAIT
    each read every entry of a cold check, rule after rule: 64 holds a project of a few dozen entries): the
    result is shared, and no analysis may change it.

    The own file is the one of the body's first ``.loc`` (the kernel's signature line). An inlined
    location resolves through its ``inlined_at`` chain to that file; line 0 (compiler-made code) keeps
    the line before."""
    insts: list[_Inst] = []
    labels: dict[str, int] = {}
    inlined: dict[tuple[int, int, int], tuple[int, int, int]] = {}
    own: int | None = None
    loc: tuple[int, int] | None = None
    src: tuple[int, int] | None = None
    pos = 0
    n = len(body)
    while pos < n:
        if skip := _SKIP.match(body, pos):
            pos = skip.end()
        elif body.startswith(".loc", pos) and (m := _LOC.match(body, pos)) is not None:
            pos = m.end()
            here = (int(m[1]), int(m[2]), int(m[3]))
            at = (int(m[4]), int(m[5]), int(m[6])) if m[4] else None
            own = here[0] if own is None and at is None else own
            while at is not None and at[0] != own and at in inlined:
                at = inlined[at]
            if at is not None:
                inlined[here] = at
            where = at or here
            if here[1] > 0:
                src = (here[0], here[1])
            if where[0] == own and where[1] > 0:
                loc = (where[0], where[1])
        elif body.startswith(".", pos):  # a directive: .reg, .shared, .pragma, .param, an unreadable .loc ...
            ends = [x for x in (body.find(";", pos), body.find("\n", pos)) if x >= 0]
            pos = min(ends) + 1 if ends else len(body)
        elif label := _LABEL.match(body, pos):
            labels[label[1]] = len(insts)
            pos = label.end()
        else:
            end = body.find(";", pos)
            end = len(body) if end < 0 else end
            stmt, pos = body[pos:end].strip(), end + 1
            guard = None
            if g := _GUARD.match(stmt):
                guard, stmt = (g[2], g[1] == "!"), stmt[g.end() :]
            opcode, *rest = stmt.split(None, 1)
            operands = _split_operands(rest[0] if rest else "")
            shown = (f"@{'!' if guard[1] else ''}{guard[0]} " if guard else "") + f"{opcode} {', '.join(operands)}"
            insts.append(_Inst(opcode, operands, guard, loc, shown.strip(), src))
    return insts, labels


def _cfg(insts: list[_Inst], labels: dict[str, int]) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Basic blocks as [first, end) instruction ranges, and each block's successors; a block ending in a
    predicated branch lists the taken target first, then the fall-through."""
    leaders = {0, len(insts), *labels.values(), *(i + 1 for i, inst in enumerate(insts) if inst.head in _ENDS)}
    starts = sorted(leaders)
    blocks = [*zip(starts, starts[1:]), (len(insts), len(insts))]  # the last one: an empty exit block
    index = {a: n for n, (a, _) in enumerate(blocks)}
    succ: list[list[int]] = [[] for _ in blocks]
    for n, (a, b) in enumerate(blocks[:-1]):
        last = insts[b - 1]
        if last.head == "bra" and last.operands and last.operands[-1] in labels:
            succ[n].append(index[labels[last.operands[-1]]])
        elif last.head == "brx":  # an indirect branch: any label
            succ[n].extend(sorted({index[i] for i in labels.values()}))
        if last.head not in _ENDS or last.guard is not None:
            succ[n].append(n + 1)
    return blocks, succ


# -- forms and predicate facts ---------------------------------------------------------------------------


def _first_copies(insts: list[_Inst], blocks: list[tuple[int, int]], succ: list[list[int]],
                  count: dict[str, int]) -> dict[str, tuple[str, set[int]]]:
    """Registers written more than once whose first write (in the text) is an unguarded copy of a thread or
    block index (``mov.u32 %r1, %tid.x``), each with the special register and the instructions where that
    copy is the only write that may reach (a reaching-definitions pass over the CFG): nvcc reuses the
    register of ``tid`` for a loop counter started from it, after the ``tid == 0`` tests."""
    first: dict[str, tuple[int, str]] = {}
    for i, inst in enumerate(insts):
        for d in inst.dests():
            if count.get(d, 0) > 1 and d not in first:
                src = inst.operands[1] if len(inst.operands) == 2 else ""
                ok = inst.guard is None and inst.opcode in ("mov.u32", "mov.b32", "mov.s32") and src[1:] in _FACT_VARS
                first[d] = (i, src[1:] if ok else "")
    regs = {r: (i, v) for r, (i, v) in first.items() if v}
    if not regs:
        return {}
    FIRST, OTHER = 1, 2
    out: dict[str, tuple[str, set[int]]] = {}
    for r, (at, var) in regs.items():
        def step(state: int, lo: int, hi: int, seen: set[int] | None = None) -> int:
            for i in range(lo, hi):
                if seen is not None and state == FIRST:
                    seen.add(i)
                if r in insts[i].dests():
                    state = FIRST if i == at else (state | OTHER if insts[i].guard else OTHER)
            return state
        state_in = [0] * len(blocks)
        work = [0]
        done: set[int] = set()
        while work:
            n = work.pop()
            done.add(n)
            lo, hi = blocks[n]
            got = step(state_in[n], lo, hi)
            for m in succ[n]:
                if (state_in[m] | got) != state_in[m] or m not in done:
                    state_in[m] |= got
                    work.append(m)
        where: set[int] = set()
        for n, (lo, hi) in enumerate(blocks):
            if n in done:
                step(state_in[n], lo, hi, where)
        out[r] = (var, where)
    return out


def _forms(insts: list[_Inst], blocks: list[tuple[int, int]] | None = None,
           succ: list[list[int]] | None = None, consts: Mapping[str, int] | None = None) -> tuple[Forms, Preds]:
    """Register forms and predicate facts, for registers written exactly once (and not under a guard); with
    the CFG, also a ``setp`` on a register whose only write that reaches it copies a thread or block index
    (:func:`_first_copies`); ``consts`` gives parameters (by PTX name) whose loads are constants."""
    count = _write_counts(insts)
    forms: Forms = {}
    preds: Preds = {}
    once = [(inst, inst.dests()) for inst in insts if inst.dests() and all(count[d] == 1 for d in inst.dests())]
    copies = _first_copies(insts, blocks, succ, count) if blocks is not None and succ is not None else {}
    if copies:
        index = {id(inst): i for i, inst in enumerate(insts)}
    # registers copied once from a block extent (%ntid.x ...): never zero
    positive = {d[0] for inst, d in once if inst.opcode.split(".")[0] == "mov" and len(inst.operands) == 2
                and re.fullmatch(r"%ntid\.[xyz]", inst.operands[1])}
    for _ in range(3):  # definitions nearly always come first; a few passes settle the rest
        for inst, dests in once:
            parts, src, d = inst.opcode.split("."), inst.operands[1:], dests[0]
            if parts[0] in ("mov", "cvt") and len(src) == 1:
                s = src[0]
                if parts[-1] == "pred" and s in preds:
                    preds[d] = preds[s]
                elif s[1:] in _FACT_VARS and (parts[0] == "mov" or _keeps_value(parts[-2], {s[1:]})):
                    forms[d] = _Form("var", frozenset({s[1:]}))
                elif s in forms and (parts[0] == "mov" or _keeps_value(parts[-2], forms[s].names)):
                    forms[d] = forms[s]
                elif parts[0] == "mov" and _INT.fullmatch(s):
                    forms[d] = _Form("const", value=_int(s))
            elif parts[0] == "ld" and "param" in parts and consts and len(src) == 1 and src[0].strip("[] ") in consts:
                forms[d] = _Form("const", value=consts[src[0].strip("[] ")])
            elif parts[0] in ("or", "add") and parts[-1] != "pred" and len(src) == 2:
                fs = [forms.get(s) for s in src]
                if all(f is not None and f.kind != "const" for f in fs):
                    forms[d] = _Form("any", frozenset().union(*(f.names for f in fs if f is not None)))
            elif parts[0] in ("mad", "mul") and parts[1] == "lo" and len(src) == (3 if parts[0] == "mad" else 2):
                # cooperative groups' thread_rank(): (tid.z * ntid.y + tid.y) * ntid.x + tid.x, zero exactly
                # when each thread index is (a block extent is at least 1; thread indices never wrap 32 bits)
                fs = [forms.get(s) for s in src]
                idx = [f for f in fs[:2] if f is not None and f.kind != "const"]
                ok = len(idx) == 1 and any(s in positive for s in src[:2]) and (len(src) == 2 or (
                    fs[2] is not None and fs[2].kind != "const"))
                names = frozenset().union(*(f.names for f in fs if f is not None and f.kind != "const"))
                # and the global index ctaid.x * ntid.x + tid.x, zero exactly when both are (a grid of
                # 2^32 threads along x would wrap it: no launch of a kernel with such a guard is that large)
                grid_index = parts[0] == "mad" and len(names) == 2 and {n.split(".")[0] for n in names} == {"tid", "ctaid"}
                if ok and (all(n.startswith("tid.") for n in names) or grid_index):
                    forms[d] = _Form("any", names)
            elif parts[-1] == "pred" and parts[0] in ("and", "or", "not") and src:
                preds[d] = _combined(parts[0], src, preds)
            elif parts[0] == "setp" and len(src) >= 2:
                here = forms
                if copies and any(x in copies for x in src):
                    i = index[id(inst)]
                    here = {**forms, **{x: _Form("var", frozenset({v})) for x, (v, where) in copies.items()
                                        if x in src and i in where}}
                _setp(inst, parts, src, here, preds)
    return forms, preds


def _write_counts(insts: list[_Inst]) -> dict[str, int]:
    """How often each register is written (a guarded write counts twice: it may or may not happen)."""
    count: dict[str, int] = {}
    for inst in insts:
        for d in inst.dests():
            count[d] = count.get(d, 0) + (2 if inst.guard else 1)
    return count


def _combined(op: str, src: tuple[str, ...], preds: Preds) -> tuple[Facts, Facts]:
    """The facts of ``and``/``or``/``not.pred`` over ``src`` (when it holds, when it fails)."""
    (at, af), (bt, bf) = _pred_pair(preds, src[0]), _pred_pair(preds, src[-1])
    return {"not": (af, at), "and": (at | bt, af & bf), "or": (at & bt, af | bf)}[op]


def _keeps_value(to: str, names: frozenset[str] | set[str]) -> bool:
    """Whether ``cvt`` to integer type ``to`` keeps these special registers' values (ctaid.x may not fit
    16 bits; the others do)."""
    bits = int(re.sub(r"\D", "", to) or 0)
    return bool(names) and to[:1] in ("u", "s", "b") and (bits >= 32 or (bits >= 16 and "ctaid.x" not in names))


def _setp(inst: _Inst, parts: list[str], src: tuple[str, ...], forms: Forms, preds: Preds) -> None:
    """Facts of ``setp.CMP[.BOOLOP].TYPE p[|q], a, b[, c]``, where ``q`` is ``!(a CMP b) BOOLOP c``."""
    cmp, typ = parts[1], parts[-1]
    boolop = parts[2] if len(parts) > 3 and parts[2] in ("and", "or", "xor") else None
    a, b = src[0], src[1]
    t, f = _NO, _NO
    if typ[:1] in ("u", "s", "b") and cmp in ("eq", "ne", *_SWAP):
        if a in forms and forms[a].kind != "const" and (c := _imm(b, forms)) is not None:
            t, f = _cmp_facts(forms[a], cmp, c)
        elif b in forms and forms[b].kind != "const" and (c := _imm(a, forms)) is not None:
            t, f = _cmp_facts(forms[b], _SWAP.get(cmp, cmp), c)
    ct, cf = _pred_pair(preds, src[2]) if len(src) > 2 else (_NO, _NO)
    for dest, (pt, pf) in zip((x.strip() for x in inst.operands[0].split("|")), ((t, f), (f, t))):
        if boolop == "and":
            pt, pf = pt | ct, pf & cf
        elif boolop == "or":
            pt, pf = pt & ct, pf | cf
        elif boolop == "xor":
            pt, pf = _NO, _NO
        preds[dest] = (pt, pf)


def _imm(op: str, forms: Forms) -> int | None:
    if _INT.fullmatch(op):
        return _int(op)
    f = forms.get(op)
    return f.value if f is not None and f.kind == "const" else None


def _cmp_facts(form: _Form, cmp: str, c: int) -> tuple[Facts, Facts]:
    """(facts when ``form CMP c`` holds, facts when it fails); special registers are never negative, so
    ``< 1`` and ``<= 0`` mean ``== 0``, ``> 0`` and ``>= 1`` mean ``!= 0``."""
    zero_true = (cmp == "eq" and c == 0) or (cmp in ("lt", "lo") and c == 1) or (cmp in ("le", "ls") and c == 0)
    zero_false = (cmp == "ne" and c == 0) or (cmp in ("gt", "hi") and c == 0) or (cmp in ("ge", "hs") and c == 1)
    if form.kind == "any":
        zeros = frozenset((v, "==", 0) for v in form.names)
        return (zeros, _NO) if zero_true else (_NO, zeros) if zero_false else (_NO, _NO)
    (var,) = form.names
    if zero_true or zero_false:
        c, cmp = 0, "eq" if zero_true else "ne"
    eq, ne = frozenset({(var, "==", c)}), frozenset({(var, "!=", c)})
    return (eq, ne) if cmp == "eq" else (ne, eq) if cmp == "ne" else (_NO, _NO)


def _pred_pair(preds: Preds, op: str) -> tuple[Facts, Facts]:
    t, f = preds.get(op.lstrip("!"), (_NO, _NO))
    return (f, t) if op.startswith("!") else (t, f)


def _pred_facts(preds: Preds, p: str, value: bool) -> Facts:
    t, f = preds.get(p, (_NO, _NO))
    return t if value else f


# -- uniformity, facts, stores ---------------------------------------------------------------------------


def _special(reg: str) -> bool:
    return reg[1:].split(".")[0] in _SPECIAL


def _fresh(inst: _Inst, params: set[str]) -> bool:
    """Whether the instruction's result is unknown: a load (not of a kernel parameter or a constant),
    a shuffle, an atomic ... (a callee's result comes back through ``ld.param`` of ``retval0``)."""
    if inst.head == "ld":
        space = inst.opcode.split(".")[1] if "." in inst.opcode else ""
        sym = re.sub(r"[\[\]\s]|\+.*", "", inst.operands[1]) if len(inst.operands) > 1 else ""
        return not (space == "const" or (space == "param" and sym in params))
    return inst.head in _FRESH


def _uniformity(insts: list[_Inst], params: set[str], blocks: list[tuple[int, int]],
                succ: list[list[int]]) -> tuple[set[str], set[str]]:
    """(thread-varying registers, block-varying registers), to a fixed point."""
    ipdom = _ipdom(succ)
    defs = [{d for i in range(a, b) for d in insts[i].dests()} for a, b in blocks]
    use_blocks: dict[str, set[int]] = {}  # register -> the blocks reading it
    for n, (a, b) in enumerate(blocks):
        for i in range(a, b):
            for u in insts[i].sources():
                use_blocks.setdefault(u, set()).add(n)
    regions: dict[int, set[str]] = {}  # branch block -> registers written under the branch and read after it
    varying: tuple[set[str], set[str]] = (set(), set())
    # per instruction, once: (dests, sources, seeds thread-varying, seeds block-varying); an instruction
    # writing nothing cannot change the sets
    steps = []
    for inst in insts:
        dests = inst.dests()
        if not dests:
            continue
        srcs, fresh = inst.sources(), _fresh(inst, params)
        seeds = tuple(fresh or any(_special(s) and s[1:].startswith(kinds) for s in srcs)
                      for kinds in (_THREAD_SPECIAL, _BLOCK_SPECIAL))
        steps.append((frozenset(dests), srcs, seeds))
    changed = True
    while changed:
        changed = False
        for dests, srcs, seeds in steps:
            for seed, var in zip(seeds, varying):
                if (seed or not var.isdisjoint(srcs)) and not dests <= var:
                    var |= dests
                    changed = True
        for n, (a, b) in enumerate(blocks):
            last = insts[b - 1] if b > a else None
            if last is None or last.guard is None or len(succ[n]) < 2:
                continue
            for var in varying:
                if last.guard[0] in var:
                    if n not in regions:
                        inside = _region(n, succ, ipdom[n])
                        written = set().union(*(defs[r] for r in inside))
                        regions[n] = {r for r in written if not use_blocks.get(r, set()) <= inside}
                    new = regions[n] - var
                    var |= new
                    changed |= bool(new)
    return varying


def _ipdom(succ: list[list[int]]) -> list[int | None]:
    """Each block's immediate post-dominator (None: only the exit). Post-dominator sets are bit masks."""
    n = exit_ = len(succ)
    pdom: list[int] = [(1 << (n + 1)) - 1] * n + [1 << exit_]
    changed = True
    while changed:
        changed = False
        for b in reversed(range(n)):
            new = pdom[exit_]
            if succ[b]:
                new = pdom[succ[b][0]]
                for s in succ[b][1:]:
                    new &= pdom[s]
            new |= 1 << b
            if new != pdom[b]:
                pdom[b], changed = new, True
    out: list[int | None] = []
    for b in range(n):  # the nearest strict post-dominator: the one all the others post-dominate
        strict = pdom[b] & ~(1 << b)
        size, near = strict.bit_count(), None
        if strict >> exit_ & 1:
            rest = strict
            while rest:
                low = rest & -rest
                d = low.bit_length() - 1
                if pdom[d].bit_count() == size:
                    near = d
                    break
                rest ^= low
        out.append(near if near is not None and near != exit_ else None)
    return out


def _region(b: int, succ: list[list[int]], stop: int | None) -> set[int]:
    """The blocks run under the branch ending block ``b``: reachable from it before its post-dominator."""
    seen: set[int] = set()
    todo = list(succ[b])
    while todo:
        x = todo.pop()
        if x != stop and x not in seen:
            seen.add(x)
            todo.extend(succ[x])
    return seen


def _facts(blocks: list[tuple[int, int]], succ: list[list[int]], insts: list[_Inst], preds: Preds,
           implicit: Facts) -> list[Facts | None]:
    """The facts holding on entry to each block (None: not reached, or only under contradictory facts)."""
    into: list[Facts | None] = [None] * len(blocks)
    into[0] = implicit
    changed = True
    while changed:
        changed = False
        for n, (a, b) in enumerate(blocks):
            here = into[n]
            last = insts[b - 1] if b > a else None
            for k, s in enumerate(succ[n] if here is not None else ()):
                new = here
                if last is not None and last.guard is not None and last.head in ("bra", "ret", "exit", "trap"):
                    taken = k == 0 and last.head == "bra"
                    new = here | _pred_facts(preds, last.guard[0], taken != last.guard[1])
                old = into[s]
                merged = new if old is None else old & new
                if _feasible(new) and merged != old:
                    into[s], changed = merged, True
    return into


def _feasible(facts: Facts) -> bool:
    eq: dict[str, int] = {}
    for v, op, c in facts:
        if op == "==" and eq.setdefault(v, c) != c:
            return False
    return not any(op == "!=" and eq.get(v) == c for v, op, c in facts)


#: the facts of a ticket test (:func:`_ticket_preds`): one thread of the grid holds it, or the threads of one block
_ONE_THREAD: Fact = ("ticket", "==", 1)
_ONE_BLOCK: Fact = ("ticket_block", "==", 1)
_TICKET_ATOMS = ("add", "inc", "dec", "sub")


#: a fact's value: "equal to a value the same in every thread of the block" (never a thread index itself)
_UNIFORM_VALUE = -(1 << 62)


def _uniform_index_preds(insts: list[_Inst], forms: Forms, preds: Preds, varying: set[str]) -> None:
    """Facts of ``tid.d == X`` for an ``X`` that is the same in every thread of the block (a kernel
    argument, a value computed from arguments and block indices): it holds in one thread of the block at
    most (vllm's ``if (threadIdx.x == num_experts) *total = ...``). The fact ``tid.d == _UNIFORM_VALUE``
    pins the dimension as ``tid.d == 0`` does. Predicates written once only."""
    count = _write_counts(insts)
    for inst in insts:
        parts, src = inst.opcode.split("."), inst.operands[1:]
        if inst.head != "setp" or len(src) != 2 or parts[1] not in ("eq", "ne") or "|" in inst.operands[0] or parts[-1][:1] not in "usb":
            continue
        (d,) = inst.dests() or ("",)
        if count.get(d) != 1:
            continue
        for x, y in ((src[0], src[1]), (src[1], src[0])):
            f = forms.get(x)
            if f is None or f.kind != "var" or len(f.names) != 1 or not next(iter(f.names)).startswith("tid."):
                continue
            if _INT.fullmatch(y) or y in forms or y in varying or not y.startswith("%"):
                continue
            fact: Fact = (next(iter(f.names)), "==", _UNIFORM_VALUE)
            t, fl = preds.get(d, (_NO, _NO))
            preds[d] = (t | {fact}, fl) if parts[1] == "eq" else (t, fl | {fact})
            break


def _ticket_preds(insts: list[_Inst], preds: Preds, varying: set[str], shared: set[str]) -> None:
    """Facts of the "last block" ticket (threadFenceReduction's idiom): ``t = atomicInc(&count, n)`` (or
    ``atomicAdd(&count, 1)``) returns each caller its own value, so ``t == X`` for a uniform ``X`` holds in at
    most one thread of the grid (fact ``ticket == 1``); that thread's ``amLast = (t == X)`` stored to a
    ``__shared__`` flag (and nothing but such tests, or 0, ever stored there) and read back after a barrier
    is non-zero in the threads of one block at most (``ticket_block == 1``). Registers written once only;
    ``shared`` names the module's ``.shared`` variables (a store at a computed address into another array
    cannot reach the flag; one whose array is not known voids it)."""
    count = _write_counts(insts)
    once = [inst for inst in insts if inst.dests() and all(count[d] == 1 for d in inst.dests())]
    tickets = {inst.dests()[0] for inst in once if inst.head == "atom" and len(inst.dests()) == 1
               and any(op in inst.opcode.split(".") for op in _TICKET_ATOMS)}  # fmt: skip
    if not tickets:
        return
    wins: set[str] = set()  # predicates true in the one thread that drew the ticket
    for inst in once:
        parts, src = inst.opcode.split("."), inst.operands[1:]
        if inst.head != "setp" or len(src) != 2 or parts[1] not in ("eq", "ne") or "|" in inst.operands[0]:
            continue
        a, b = src
        other = b if a in tickets else a if b in tickets else None
        if other is None or other in tickets or other in varying:
            continue
        d = inst.dests()[0]
        t, f = preds.get(d, (_NO, _NO))
        if parts[1] == "eq":
            preds[d] = (t | {_ONE_THREAD}, f)
            wins.add(d)
        else:
            preds[d] = (t, f | {_ONE_THREAD})
    # the flag: selp 1, 0 on a winning predicate (the bool amLast), stored to a shared symbol
    flags = {inst.dests()[0] for inst in once if inst.head == "selp" and len(inst.operands) == 4
             and inst.operands[3] in wins and _int_or_none(inst.operands[1]) not in (None, 0)
             and _int_or_none(inst.operands[2]) == 0}  # fmt: skip
    if not flags:
        return
    # which shared symbols each register's address derives from (mov of a symbol, add, mad, cvta, ...)
    base: dict[str, frozenset[str]] = {}
    for _ in range(2):
        for inst in insts:
            dests = inst.dests()
            if not dests or inst.head in ("ld", "atom", "ldu"):
                continue
            names = {w for op in inst.operands[1:] for w in _WORD.findall(op) if w in shared}
            for r in inst.sources():
                names |= base.get(r, frozenset())
            if names:
                for d in dests:
                    base[d] = base.get(d, frozenset()) | names
    stored: dict[str, bool] = {}  # shared symbol -> every store to it is a flag (or 0)
    for inst in insts:
        parts = inst.opcode.split(".")
        if inst.head not in ("st", "atom", "red", "cp", "stmatrix") or not inst.operands:
            continue
        if "global" in parts or "local" in parts or "param" in parts:
            continue
        addr = inst.operands[0].strip("[] ")
        targets = {addr} if addr in shared else set().union(*(base.get(r, frozenset()) for r in _REG.findall(addr)))
        if not targets:
            if any(x.startswith("shared") for x in parts):
                return  # a shared store whose array is not known may land on the flag: no flag is sure
            continue  # a generic store of no shared symbol's address
        ok = inst.head == "st" and addr in shared and len(inst.operands) == 2 and (
            inst.operands[1] in flags or _int_or_none(inst.operands[1]) == 0)
        for sym in targets:
            stored[sym] = stored.get(sym, True) and ok
    symbols = {sym for sym, ok in stored.items() if ok}
    if not symbols:
        return
    loaded = {inst.dests()[0] for inst in once if inst.head == "ld" and any(x.startswith("shared") for x in inst.opcode.split("."))
              and inst.operands[1].strip("[] ") in symbols}  # fmt: skip
    for inst in once:
        parts, src = inst.opcode.split("."), inst.operands[1:]
        if inst.head != "setp" or len(src) != 2 or parts[1] not in ("eq", "ne") or "|" in inst.operands[0]:
            continue
        a, b = src
        flag, zero = (a, b) if a in loaded else (b, a) if b in loaded else (None, None)
        if flag is None or _int_or_none(zero) != 0:
            continue
        d = inst.dests()[0]
        t, f = preds.get(d, (_NO, _NO))
        preds[d] = (t, f | {_ONE_BLOCK}) if parts[1] == "eq" else (t | {_ONE_BLOCK}, f)
    # and, or, not of those predicates: _forms combined them before these facts existed
    for inst in insts:
        parts, src = inst.opcode.split("."), inst.operands[1:]
        if parts[-1] == "pred" and parts[0] in ("and", "or", "not") and src and len(inst.dests()) == 1 and count[inst.dests()[0]] == 1:
            preds[inst.dests()[0]] = _combined(parts[0], src, preds)


def _int_or_none(op: str) -> int | None:
    return _int(op) if _INT.fullmatch(op) else None


def _address_origin(insts: list[_Inst], params: set[str], text: str) -> tuple[set[str], set[str]]:
    """(registers derived from a kernel parameter or a ``.global`` variable, registers derived from a
    shared/local/const/param-space or stack address): what a generic ``st`` may be writing."""
    gvars = set(_GLOBAL_VAR.findall(text))
    glob: set[str] = set()
    other: set[str] = set()
    # per instruction, once: (kind, dests, sources, names a .global variable); only writers matter
    steps = []
    for inst in insts:
        dests = inst.dests()
        if not dests:
            continue
        ops = " ".join(inst.operands[1:])
        if inst.opcode.startswith("ld.param") and not _fresh(inst, params):
            steps.append(("param", dests, (), False))
        elif _CVTA_OTHER.match(inst.opcode) or _SP.search(ops):
            steps.append(("other", dests, (), False))
        elif inst.head != "ld":
            steps.append(("op", dests, inst.sources(), not gvars.isdisjoint(_WORD.findall(ops))))
    for _ in range(3):
        for kind, dests, srcs, names_global in steps:
            if kind == "param":
                glob.update(dests)
            elif kind == "other":
                other.update(dests)
            else:
                if names_global or not glob.isdisjoint(srcs):
                    glob.update(dests)
                if not other.isdisjoint(srcs):
                    other.update(dests)
    return glob, other


def _is_global_store(inst: _Inst, origin: tuple[set[str], set[str]]) -> bool:
    parts = inst.opcode.split(".")
    if parts[0] != "st" or not inst.operands or any(p in ("relaxed", "release", "async", "bulk") for p in parts):
        return False
    if "global" in parts:
        return True
    if any(p.startswith(("shared", "local", "param")) for p in parts):
        return False
    addr = _REG.findall(inst.operands[0])
    return bool(addr) and all(a in origin[0] and a not in origin[1] for a in addr)


def _classify(facts: Facts, implicit: Facts, addr: list[str], thread_var: set[str], block_var: set[str],
              block: Dims, grid: Dims) -> tuple[str, tuple[str, ...], str] | None:
    """(kind, unpinned dimensions, which threads) of a racy store, or None."""
    if any(a in thread_var for a in addr):
        return None
    if _ONE_THREAD in facts:  # the one thread of the grid that drew the ticket
        return None
    shown = sorted(f for f in facts - implicit if f not in (_ONE_THREAD, _ONE_BLOCK))
    tids = " and ".join(f"{v} {op} {c}" for v, op, c in shown if v.startswith("tid"))
    ctas = " and ".join(f"{v} {op} {c}" for v, op, c in shown if not v.startswith("tid"))
    pinned = {v for v, op, _ in facts if op == "=="}
    free = tuple(d for d, n in zip(_DIMS, block) if n != 1 and f"tid.{d}" not in pinned)
    if free:
        who = f"threads with {tids}" if tids else "every thread of the block"
        return "thread", free, who + (f", in blocks with {ctas}" if ctas else "")
    if any(a in block_var for a in addr):
        return None
    free = tuple(d for d, n in zip(_DIMS, grid) if n != 1 and f"ctaid.{d}" not in pinned and _ONE_BLOCK not in facts)
    if free:
        who = f"threads with {tids}" if tids else "the only thread"
        return "block", free, who + (f" of blocks with {ctas}" if ctas else " of every block")
    return None
