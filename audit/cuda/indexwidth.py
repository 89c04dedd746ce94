"""Global-memory offsets computed in 32-bit arithmetic that overflow inside the declared dims (INDEX_OVERFLOW).

``out[row * H + j]`` with ``int row, H, j`` is a 32-bit product: once ``B * H`` passes 2^31 - 1 the offset
wraps (signed overflow is undefined behaviour; nvcc computes it in a 32-bit register) and the kernel reads
or writes another row, or faults. Nothing fails at the sizes a test runs (B = 4096), and a run at the
contract's largest B needs tens of GiB, so the bug waits for the first production batch that is large
enough. The PTX shows where the width is lost: a 32-bit value widened for an address (``cvt.s64.s32``,
``mul.wide.s32 %rd, %r, 4``) only after the arithmetic that made it.

The analysis of one ``.entry`` at one *witness* (the kernel parameters' values at the largest dims the
contracts allow, the launch's block and grid there), for every thread index in ``{0, block - 1}`` and block
index in ``{0, grid - 2}`` of each dimension used (the second-to-last block, so that a row bound check such
as ``if (row < B)`` cannot exclude the thread: with ``grid = ceil_div(B, n)`` every thread of that block is
in range):

* **Values as intervals** of the exact (unbounded) arithmetic: kernel parameters (``ld.param``) of the
  witness, ``%tid``/``%ntid``/``%ctaid``/``%nctaid``, immediates; through ``mov``, ``add``, ``sub``,
  ``mul.lo``, ``mad.lo``, ``shl``, ``neg``, ``not`` (ring operations: a 32-bit register holds the exact
  value modulo 2^32, a 64-bit one modulo 2^64), ``mul.wide``/``mad.wide`` and integer ``cvt`` both ways (a
  64-bit product narrowed back to 32 bits keeps its exact value, modulo 2^32), and, on 32-bit values that
  fit their type, ``shr``, ``and``, ``rem``, ``div``, ``min``, ``max``.
  A register read by an instruction has the values of the definitions that reach it (a forward
  dataflow over the entry's branches: nvcc reuses registers, so the ``%tid.x`` read early is not blurred
  by a loop counter written into the same register later); several reaching definitions give the hull of
  their values, and one that adds a non-negative amount to the register itself (a counter's step) keeps
  the lower bound and drops the upper (``j = tid % 2; j < H; j += 2`` is at least 0); anything else is
  unknown.
* **Widenings**: ``cvt.s64.s32``, ``cvt.u64.u32``, ``mul.wide.{s,u}32``, ``mad.wide.{s,u}32``, whose 64-bit
  result reaches the address of a global (or generic) load, store or atomic through 64-bit ``add``/
  ``sub``/``mul``/``mad``/``shl``/``cvta``/``mov``.
* A widened 32-bit register whose least possible exact value at the witness is past the range of the
  widening's type (2^31 - 1 signed, 2^32 - 1 unsigned), or whose largest is below it, **overflows**: its
  register holds another number than the code meant. Only definite overflows are reported, so a value
  with an unknown part (a loaded index, a counter with no lower bound) is never a finding; what a
  counter reaches through many iterations (a running offset ``p += H``) is not seen.
* A signed ``div``/``rem`` whose dividend overflows (a flat index ``i = blockIdx.x * blockDim.x +
  threadIdx.x`` past 2^31 - 1, then ``b = i / (T * V)``) and whose result goes on in 32-bit integer
  arithmetic into such a widening overflows too: what comes out of the division is another number
  (signed overflow never wraps on purpose; an unsigned hash that does is not reported).

>>> w = Witness({2: 65536, 3: 40000}, (256, 1, 1), (256, 1, 1), "B = 65536, H = 40000")          # doctest: +SKIP
>>> find_index_overflows(ptx, "forward", [w])[0].message("forward", "kernels/f.cu")              # doctest: +SKIP
'Kernel "forward" computes a global-memory offset in 32-bit arithmetic that overflows ...'
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from .races import _COMMENT, _FILE, _REG, Dims, _cfg, _entry_text, _Inst, _int, _parse_body, _strip_comment, finding_place

Interval = tuple[int | None, int | None]  # (least, largest) exact value; None: unbounded that way
_UNKNOWN: Interval = (None, None)
_LIMITS = {True: (-(1 << 31), (1 << 31) - 1), False: (0, (1 << 32) - 1)}  # signed?, range of the 32-bit type
_WIDEN = re.compile(r"^(?:cvt(?:\.rn|\.rz|\.rm|\.rp)?\.([su])64\.([su])32|(?:mul|mad)\.wide\.([su])32)$")
_PRESERVE64 = frozenset({"add", "sub", "mul", "mad", "shl", "cvta", "mov"})
_RING = frozenset({"add", "sub", "mul", "mad", "shl", "neg", "not"})  # exact modulo 2^32 (2^64): ideal values go on
_BOUNDED = frozenset({"shr", "and", "rem", "div", "min", "max"})  # computed only on values that fit their type
_INT_CVT = re.compile(r"^cvt\.[su](?:8|16|32|64)\.[su](?:8|16|32|64)$")
_MEMORY = frozenset({"ld", "st", "atom", "red", "prefetch", "cp", "ldu", "multimem"})
_OTHER_SPACES = (".shared", ".local", ".param", ".const", ".tex")
_PARAM = re.compile(r"^\[\s*([\w$]+)\s*(?:\+\s*(\d+))?\s*\]$")
_SPECIAL = re.compile(r"^%(n?tid|n?ctaid)\.([xyz])$")
_DIMS = ("x", "y", "z")
MAX_THREADS = 64  # thread and block index assignments per witness (2 per index dimension the entry reads)


@dataclass(frozen=True)
class Witness:
    """Where an entry is evaluated: ``params`` maps a kernel parameter's position to its integer value (a
    parameter not listed is unknown), ``block``/``grid`` the launch extents (None: unknown), ``label``
    names the dims in the message (``"B = 65536 (its largest)"``)."""

    params: Mapping[int, int]
    block: Dims
    grid: Dims
    label: str


@dataclass(frozen=True)
class IndexOverflow:
    """One widened 32-bit offset that overflows at a witness."""

    entry: str
    line: int | None  # the kernel's own source line of the widening (for an inlined helper, where it is inlined)
    file_index: int | None
    file: str | None
    instruction: str  # the widening, whitespace-normalised: "mul.wide.s32 %rd8, %r7, 4"
    value: int  # the exact value the 32-bit register would need (its least, or largest when below the range)
    exact: bool  # the value is the register's only one at the witness (else a bound: a loop counter took part)
    signed: bool
    witness: str  # the dims
    thread: str  # "blockIdx.x = 1022, threadIdx.x = 255"
    access: str  # the first load or store its address reaches: "st.global.f32 [%rd9], %f1"
    origin: str = ""  # "k.cu:526" where the widening is inlined from another line (a helper), else ""

    def message(self, kernel: str, source: str) -> str:
        """One sentence for the finding; ``source`` is the path shown for the kernel's file."""
        where = finding_place(source, self.line, self.origin)
        kind = "int" if self.signed else "unsigned"
        limit = "2^31 - 1" if self.signed else "2^32 - 1"
        amount = f"{self.value:,}" if self.exact else f"at least {self.value:,}"
        if self.value < 0:
            amount, limit = (f"{self.value:,}" if self.exact else f"at most {self.value:,}"), "-2^31"
        return (f'Kernel "{kernel}" computes a global-memory offset in 32-bit {kind} arithmetic that overflows '
                f"within the contracts' dims ({where}, {self.instruction}, for {self.access}): at "
                f"{self.witness} and {self.thread} it is {amount}, past {limit}; compute it in 64 bits, "
                "e.g. (size_t)row * H + j.")


def find_index_overflows(ptx: str, entry: str, witnesses: Sequence[Witness]) -> list[IndexOverflow]:
    """The overflowing widened offsets of ``entry``, the first per source line, ordered by line (see the
    module docstring). Raises ValueError when the module has no such entry."""
    text = _COMMENT.sub(_strip_comment, ptx)
    files = {int(n): p for n, p in _FILE.findall(text)}
    _, _, body = _entry_text(text, entry)
    order = _param_order(text, entry)
    insts, labels = _parse_body(body)
    widenings = [(i, m) for i, inst in enumerate(insts) if (m := _WIDEN.match(inst.opcode))]
    if not widenings:
        return []
    reaches = _reaching_access(insts)
    # a signed division or remainder of a wrapped value (i = blockIdx.x * blockDim.x + threadIdx.x past
    # 2^31 - 1, then b = i / (T * V)) whose result goes on, in 32 bits, into a widened offset: the wrap
    # happened before the division, which only an unknown comes out of
    into = _reaching_widening(insts, reaches)
    widenings += [(i, None) for i, inst in enumerate(insts)
                  if inst.head in ("div", "rem") and ".s32" in inst.opcode and inst.dests() and inst.dests()[0] in into]  # fmt: skip
    reaching = _Reaching(insts, labels)
    specials = sorted({m.group(0) for inst in insts for op in inst.operands for m in re.finditer(r"%n?(?:tid|ctaid)\.[xyz]", op)})
    out: list[IndexOverflow] = []
    seen: set[tuple[int, int] | int] = set()
    for w in witnesses:
        for thread in _threads(specials, w):
            ev = _Evaluator(insts, reaching, order, w.params, thread)
            for i, m in widenings:
                inst = insts[i]
                access = (reaches if m is not None else into).get(inst.dests()[0]) if inst.dests() else None
                key = inst.loc or i
                if access is None or key in seen:
                    continue
                signed = m is None or (m.group(2) or m.group(3)) == "s"
                lo_lim, hi_lim = _LIMITS[signed]
                srcs = inst.operands[1:3] if inst.head in ("mul", "mad") else inst.operands[1:2]
                for src in srcs:
                    lo, hi = ev.value(src, i)
                    if lo is not None and lo > hi_lim:
                        value = lo
                    elif hi is not None and hi < lo_lim:
                        value = hi
                    else:
                        continue
                    seen.add(key)
                    fi, line = inst.loc if inst.loc else (None, None)
                    shown = ", ".join(f"{'threadIdx' if k[1] == 't' else 'blockIdx'}.{k[-1]} = {v}"
                                      for k, v in sorted(thread.items()) if k[1] in "tc")
                    origin = ""
                    if inst.src is not None and inst.src != inst.loc and inst.src[0] in files:
                        origin = f"{PurePosixPath(files[inst.src[0]]).name}:{inst.src[1]}"
                    out.append(IndexOverflow(entry, line, fi, files.get(fi) if fi is not None else None, inst.text,
                                             value, lo == hi, signed, w.label, shown or "every thread", access, origin))
                    break
    out.sort(key=lambda o: (o.line is None, o.line or 0))
    return out


def _param_order(text: str, entry: str) -> dict[str, int]:
    """Parameter name -> position in ``entry``'s signature."""
    m = re.search(rf"\.entry\s+{re.escape(entry)}\s*\(([^)]*)\)", text)
    names = [re.sub(r"\[\d*\]", "", p).split()[-1] for p in (m.group(1).split(",") if m else []) if p.strip()]
    return {n: i for i, n in enumerate(names)}


def _threads(specials: Sequence[str], w: Witness) -> list[dict[str, int]]:
    """Thread and block index assignments: each index dimension the entry reads at 0 and at its last
    thread / second-to-last block; extents as known (``%ntid``/``%nctaid``)."""
    fixed: dict[str, int] = {}
    choices: list[tuple[str, tuple[int, ...]]] = []
    for reg in specials:
        kind, dim = reg[1:].split(".")
        ext = (w.block if "tid" in kind else w.grid)[_DIMS.index(dim)]
        if ext is None:
            continue
        if kind.startswith("n"):
            fixed[reg] = ext
        else:
            top = ext - 1 if kind == "tid" else max(ext - 2, 0)
            choices.append((reg, (0, top) if top > 0 else (0,)))
    out = []
    for values in itertools.product(*(c for _, c in choices)):
        out.append({**fixed, **dict(zip((r for r, _ in choices), values))})
        if len(out) >= MAX_THREADS:
            break
    return out


def _users(insts: list[_Inst]) -> dict[str, list[int]]:
    """register -> the instructions that read it, in order."""
    users: dict[str, list[int]] = {}
    for i, inst in enumerate(insts):
        for r in set(inst.sources()):
            users.setdefault(r, []).append(i)
    return users


def _reaching_access(insts: list[_Inst]) -> dict[str, str]:
    """64-bit register -> the first global/generic memory instruction whose address it reaches through
    offset arithmetic (see the module docstring)."""
    users = _users(insts)
    memo: dict[str, str | None] = {}

    def walk(reg: str, stack: frozenset[str]) -> str | None:
        if reg in memo:
            return memo[reg]
        found = None
        for i in users.get(reg, ()):
            inst = insts[i]
            if inst.head in _MEMORY and (inst.head == "cp" or not any(s in inst.opcode for s in _OTHER_SPACES)):
                if any(o.startswith("[") and reg in _REG.findall(o) for o in inst.operands):
                    found = inst.text
                    break
            elif inst.head in _PRESERVE64 and inst.dests() and not inst.opcode.endswith(("32", "16", "8")):
                for d in inst.dests():
                    if d not in stack and (got := walk(d, stack | {d})) is not None:
                        found = got
                        break
                if found:
                    break
        memo[reg] = found
        return found

    out = {}
    for inst in insts:
        if _WIDEN.match(inst.opcode) and inst.dests():
            got = walk(inst.dests()[0], frozenset(inst.dests()))
            if got is not None:
                out[inst.dests()[0]] = got
    return out


def _reaching_widening(insts: list[_Inst], reaches: Mapping[str, str]) -> dict[str, str]:
    """32-bit register -> the access (:func:`_reaching_access`) that a widening reached through 32-bit
    integer arithmetic from it feeds."""
    users = _users(insts)
    memo: dict[str, str | None] = {}

    def walk(reg: str, stack: frozenset[str]) -> str | None:
        if reg in memo:
            return memo[reg]
        memo[reg] = None  # a cycle through a loop counter ends here
        found = None
        for i in users.get(reg, ()):
            inst = insts[i]
            dests = inst.dests()
            if not dests:
                continue
            if _WIDEN.match(inst.opcode):
                found = reaches.get(dests[0])
            elif (inst.head in _RING or inst.head in _BOUNDED or inst.head in ("mov", "cvt")) and inst.opcode.endswith("32"):
                found = next((got for d in dests if d not in stack and (got := walk(d, stack | {d})) is not None), None)
            if found is not None:
                break
        memo[reg] = found
        return found

    out: dict[str, str] = {}
    for inst in insts:
        if inst.head in ("div", "rem") and inst.dests() and (got := walk(inst.dests()[0], frozenset(inst.dests()))) is not None:
            out[inst.dests()[0]] = got
    return out


class _Reaching:
    """Which definitions of a register reach an instruction: a forward may-dataflow over the entry's CFG
    (a definition under a guard adds itself and kills nothing). nvcc reuses a register for unrelated
    values (``%tid.x`` early, a loop counter later), so a use is evaluated from the definitions that reach
    it, not from every definition the register has."""

    def __init__(self, insts: list[_Inst], labels: dict[str, int]) -> None:
        self.insts = insts
        self.memo: dict[tuple[str, int], tuple[int, ...]] = {}
        blocks, succ = _cfg(insts, labels)
        self.blocks = blocks
        self.block_of = [0] * len(insts)
        self.mask: dict[str, int] = {}  # register -> bits of its definitions (bit i: instruction i)
        for b, (lo, hi) in enumerate(blocks):
            for i in range(lo, hi):
                self.block_of[i] = b
                for d in insts[i].dests():
                    self.mask[d] = self.mask.get(d, 0) | (1 << i)
        gen, kill = [0] * len(blocks), [0] * len(blocks)
        for b, (lo, hi) in enumerate(blocks):
            g = k = 0
            for i in range(lo, hi):
                for d in insts[i].dests():
                    if insts[i].guard is None:
                        g &= ~self.mask[d]
                        k |= self.mask[d]
                    g |= 1 << i
            gen[b], kill[b] = g, k
        preds: list[list[int]] = [[] for _ in blocks]
        for b, ss in enumerate(succ):
            for t in ss:
                preds[t].append(b)
        self.into = [0] * len(blocks)
        out = list(gen)
        changed = True
        while changed:
            changed = False
            for b in range(len(blocks)):
                came = 0
                for q in preds[b]:
                    came |= out[q]
                new = gen[b] | (came & ~kill[b])
                if came != self.into[b] or new != out[b]:
                    self.into[b], out[b], changed = came, new, True

    def at(self, reg: str, i: int) -> tuple[int, ...]:
        """The definitions of ``reg`` (instruction indices) that reach instruction ``i``."""
        key = (reg, i)
        got = self.memo.get(key)
        if got is not None:
            return got
        mask = self.mask.get(reg, 0)
        bits = 0
        if mask:
            lo, _ = self.blocks[self.block_of[i]]
            bits = self.into[self.block_of[i]] & mask
            for j in range(lo, i):
                if reg in self.insts[j].dests():
                    bits = (bits | (1 << j)) if self.insts[j].guard is not None else (1 << j)
        found = []
        while bits:
            low = bits & -bits
            found.append(low.bit_length() - 1)
            bits ^= low
        self.memo[key] = got = tuple(found)
        return got


class _Evaluator:
    """Intervals of registers at one witness and thread (see the module docstring)."""

    def __init__(self, insts: list[_Inst], reaching: _Reaching, order: Mapping[str, int],
                 params: Mapping[int, int], thread: Mapping[str, int]) -> None:  # fmt: skip
        self.insts, self.reaching, self.order, self.params, self.thread = insts, reaching, order, params, thread
        self.defined: dict[int, Interval] = {}  # instruction index -> the value it writes

    def value(self, op: str, at: int) -> Interval:
        """The value of operand ``op`` read by instruction ``at``."""
        op = op.strip()
        if op in self.thread:
            v = self.thread[op]
            return (v, v)
        if op.startswith("%"):
            return self._register(op, self.reaching.at(op, at))
        try:
            v = _int(op)
        except ValueError:
            return _UNKNOWN
        return (v, v)

    def _written(self, i: int) -> Interval:
        if i not in self.defined:
            self.defined[i] = _UNKNOWN  # a cycle through this definition is unknown
            self.defined[i] = self._define(self.insts[i], i)
        return self.defined[i]

    def _register(self, reg: str, where: tuple[int, ...]) -> Interval:
        if len(where) == 1:
            return self._written(where[0])
        if not where:
            return _UNKNOWN
        # several definitions: the hull of their values; one that adds a non-negative amount to the
        # register itself (a counter's step) leaves the lower bound and makes it unbounded above
        lows: list[int] = []
        highs: list[int | None] = []
        for i in where:
            inst = self.insts[i]
            ops = inst.operands
            if inst.head == "add" and len(ops) == 3 and reg in ops[1:]:
                lo, _ = self.value(ops[2] if ops[1] == reg else ops[1], i)
                if lo is None or lo < 0:
                    return _UNKNOWN
                highs.append(None)
                continue
            lo, hi = self._written(i)
            if lo is None:
                return _UNKNOWN
            lows.append(lo)
            highs.append(hi)
        if not lows:
            return _UNKNOWN
        return (min(lows), None if None in highs else max(h for h in highs if h is not None))

    def _define(self, inst: _Inst, i: int) -> Interval:
        ops = inst.operands
        head, opcode = inst.head, inst.opcode
        if not opcode.endswith(("32", "64")):
            return _UNKNOWN
        try:
            if head == "ld":
                m = _PARAM.match(ops[1]) if opcode.startswith("ld.param") else None
                if m and not m.group(2) and m.group(1) in self.order:
                    v = self.params.get(self.order[m.group(1)])
                    return (v, v) if v is not None else _UNKNOWN
                return _UNKNOWN
            if head == "mov":
                return self.value(ops[1], i)
            if head == "cvt":
                # widening (an exact copy) or narrowing (the register keeps the value modulo 2^32, a ring
                # operation like the others): the exact value goes on; float conversions are unknown
                return self.value(ops[1], i) if _INT_CVT.match(opcode) else _UNKNOWN
            if head in ("mul", "mad") and ".wide." in opcode:
                prod = _mul(self.value(ops[1], i), self.value(ops[2], i))
                return prod if head == "mul" else _add(prod, self.value(ops[3], i))
            if head in _RING or (head in _BOUNDED and opcode.endswith("32")):
                args = [self.value(o, i) for o in ops[1:]]
                return _arith(opcode, args)
        except (IndexError, ValueError):
            return _UNKNOWN
        return _UNKNOWN


def _arith(opcode: str, args: list[Interval]) -> Interval:
    head = opcode.split(".", 1)[0]
    if head == "not":  # ~x == -x - 1 in two's complement: a ring operation too
        return (None if args[0][1] is None else -args[0][1] - 1, None if args[0][0] is None else -args[0][0] - 1)
    if head == "add":
        return _add(args[0], args[1])
    if head == "sub":
        return _add(args[0], (None if args[1][1] is None else -args[1][1], None if args[1][0] is None else -args[1][0]))
    if head == "neg":
        return (None if args[0][1] is None else -args[0][1], None if args[0][0] is None else -args[0][0])
    if head == "mul":
        if ".lo." not in opcode + ".":
            return _UNKNOWN
        return _mul(args[0], args[1])
    if head == "mad":
        if ".lo." not in opcode + ".":
            return _UNKNOWN
        return _add(_mul(args[0], args[1]), args[2])
    if head == "shl":
        s = args[1]
        if s[0] is None or s[0] != s[1] or not 0 <= s[0] < (64 if opcode.endswith("64") else 32):
            return _UNKNOWN
        return _mul(args[0], (1 << s[0], 1 << s[0]))
    # the rest only on values that fit the operation's type (no wrap before them), non-negative
    signed = ".s32" in opcode
    lo_lim, hi_lim = _LIMITS[signed]
    for lo, hi in args:
        if lo is None or hi is None or lo < max(lo_lim, 0) or hi > hi_lim:
            return _UNKNOWN
    (alo, ahi), (blo, bhi) = args[0], args[1]
    if head == "shr":
        return (alo >> bhi, ahi >> blo) if blo < 32 else _UNKNOWN
    if head == "and":
        return (alo & blo, ahi & bhi) if alo == ahi and blo == bhi else (0, min(ahi, bhi))
    if head == "rem":
        return (alo % blo, alo % blo) if alo == ahi and blo == bhi and blo else ((0, min(ahi, bhi - 1)) if blo else _UNKNOWN)
    if head == "div":
        return (alo // bhi, ahi // blo) if blo else _UNKNOWN
    if head == "min":
        return (min(alo, blo), min(ahi, bhi))
    if head == "max":
        return (max(alo, blo), max(ahi, bhi))
    return _UNKNOWN


def _add(a: Interval, b: Interval) -> Interval:
    return (None if a[0] is None or b[0] is None else a[0] + b[0], None if a[1] is None or b[1] is None else a[1] + b[1])


def _mul(a: Interval, b: Interval) -> Interval:
    """Product of intervals; with an unbounded side only for non-negative operands (else unknown)."""
    if None not in a and None not in b:
        corners = [x * y for x in a for y in b]  # type: ignore[operator]
        return (min(corners), max(corners))
    if a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0:
        hi = None if a[1] is None or b[1] is None else a[1] * b[1]
        return (a[0] * b[0], hi)
    return _UNKNOWN
