"""Lost updates in shared memory, found statically in a kernel's PTX (SHARED_RMW_RACE).

``s.logits[row][k] += p`` run by every lane of a warp, where the warp's lanes share ``row``, is a
read-modify-write of one shared element by 32 threads at once: each reads the old value, adds its own
``p`` and stores, and all but one addition are lost. When the lanes hold the same ``p`` (after a
shuffle reduction) the result even comes out right, which is why no run, and no compute-sanitizer tool,
reports it; the first change that gives the lanes different values breaks it. The same holds for one
element updated by a lane of every warp (``if (lane == 0) s_total += warp_sum``).

The analysis of one ``.entry``, for a launch whose block extents are known (from the contract or a
``.reqntid``; with an unknown extent the entry is not analysed):

* **Thread values.** Every register written once (not under a guard) whose value follows from the thread
  index is evaluated for every thread of the block: ``%tid``, ``%laneid``, ``%ntid``, constants and
  integer arithmetic on them (``tid % 32`` compiled as a signed remainder, ``tid / 32`` as shifts...).
  A register that adds such a value to one that is the same for every thread of the block (a kernel
  parameter, ``%ctaid``, the address of a ``.shared`` array, a uniform loop counter) is kept as that
  unknown base plus the per-thread offsets, through ``add``/``sub``/``mul``/``shl``/``mad``/``cvt``.
* **Lane-varying registers** (a taint to a fixed point): a register with thread values that differ
  within a warp, a load, a shuffle, ``%clock`` ..., anything computed from them, and what is written
  under a branch on one of them and read after it.
* **Which threads run each block** (a forward may-dataflow of thread bit masks): a branch on a predicate
  with thread values sends exactly the threads for which it holds; a branch on another predicate sends
  all. A block under a branch whose predicate varies within a warp but has no thread values (it tests a
  loaded value, ``elect.sync`` ...) is *opaque*: how many lanes reach it is unknown, and nothing in it is
  reported. A block under a branch that varies between warps only (``if (warp < rows)``) is opaque to
  the question which warps reach it.
* A **read-modify-write** is an ``st.shared`` to the address text an ``ld.shared`` of the same basic
  block read (no write to its registers in between), storing a value computed from the loaded one. It
  races when two threads that may run it write the same element: with per-thread address values, two
  threads with one address; without them, an address that does not vary within a warp run by two lanes
  of one warp, or one the same for the whole block run by lanes of two warps. Atomics (``atom``/``red``)
  are never reported.

>>> races = find_shared_races(ptx, "aux_next_bar_forward", block=(256, 1, 1))             # doctest: +SKIP
>>> races[0].message("aux_next_bar_forward", "kernels/aux_next_bar_forward_kernel.cu")   # doctest: +SKIP
'Kernel "aux_next_bar_forward" read-modify-writes shared memory at an address that several lanes ...'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from .races import (
    _COMMENT,
    _FILE,
    _INT,
    _REG,
    Dims,
    _cfg,
    _entry_text,
    _fresh,
    _Inst,
    _int,
    _ipdom,
    _parse_body,
    _region,
    _strip_comment,
    _thread_extents,
    _uniformity,
    finding_place,
)

#: most threads a block may have; larger extents are not analysed
MAX_THREADS = 1024

# an abstract value: an int (every thread the same, known), a tuple (one value per thread), or
# ("base", tuple): an unknown value the same for every thread of the block plus per-thread offsets
Value = int | tuple[int, ...] | tuple[str, tuple[int, ...]]

_LANE_SPECIAL = ("laneid", "lanemask_", "clock", "globaltimer")
_ARITH = {"add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor", "not", "neg", "div", "rem", "min", "max",
          "mov", "cvt", "selp", "setp", "abs"}


@dataclass(frozen=True)
class SharedRace:
    """One racy shared-memory read-modify-write of one entry; ``kind`` is ``"lane"`` (lanes of one warp
    update one element) or ``"warp"`` (lanes of different warps do)."""

    entry: str
    line: int | None  # the kernel's own source line (for an inlined helper, the line it is inlined at)
    file_index: int | None
    file: str | None  # that number's path in the module's .file table, as written there
    origin: str | None  # "aux_head_forward.cuh:102" where the store is inlined from another file, else None
    instruction: str  # the store, whitespace-normalised, with its guard
    kind: str
    threads: tuple[int, ...]  # two threads that update one element: (x, y, z) of one, then of the other

    def message(self, kernel: str, source: str) -> str:
        """One sentence for the finding; ``source`` is the path shown for the kernel's file."""
        where = finding_place(source, self.line, self.origin)
        t = self.threads
        a, b = f"({t[0]}, {t[1]}, {t[2]})", f"({t[3]}, {t[4]}, {t[5]})"
        if self.kind == "lane":
            share = "several lanes of one warp share"
            fix = "let one lane update it (if (lane == 0)), give each lane its own element, or use atomicAdd"
        else:
            share = "lanes of different warps share"
            fix = "give each warp its own element, or use atomicAdd"
        return (f'Kernel "{kernel}" read-modify-writes shared memory at an address that {share} ({where}, '
                f"{self.instruction}): threadIdx {a} and {b} update the same element without an atomic, so "
                f"all but one update are lost; {fix}.")


def find_shared_races(ptx: str, entry: str, block: Dims = (None, None, None)) -> list[SharedRace]:
    """The racy shared-memory read-modify-writes of ``entry``, in PTX order, the first per (source line,
    kind). ``block`` is the launch's block extent (None: unknown; ``.reqntid`` fills it); an entry whose
    block is not fully known, or larger than :data:`MAX_THREADS`, is not analysed (no result). Raises
    ValueError when the module has no such entry."""
    text = _COMMENT.sub(_strip_comment, ptx)
    params, head, body = _entry_text(text, entry)
    if "st.shared" not in body or "ld.shared" not in body:
        return []
    ext = _thread_extents(head, block)
    if any(n is None or n < 1 for n in ext):
        return []
    nx, ny, nz = (int(n) for n in ext)  # type: ignore[arg-type]
    total = nx * ny * nz
    if total > MAX_THREADS or total < 2:
        return []
    insts, labels = _parse_body(body)
    pairs = _rmw_pairs(insts, labels)
    if not pairs:
        return []
    files = {int(n): p for n, p in _FILE.findall(text)}
    blocks, succ = _cfg(insts, labels)
    thread_var, _ = _uniformity(insts, params, blocks, succ)
    threads = [(t % nx, t // nx % ny, t // (nx * ny)) for t in range(total)]
    values = _Values(insts, blocks, succ, thread_var, threads, (nx, ny, nz))
    lane_var = _lane_varying(insts, params, blocks, succ, values)
    ipdom = _ipdom(succ)
    masks = _masks(blocks, succ, insts, values, total)
    lane_opaque = _opaque(blocks, succ, ipdom, insts, values, lane_var)
    warp_opaque = _opaque(blocks, succ, ipdom, insts, values, thread_var) | lane_opaque
    lane_selectors, warp_selectors = _selectors(insts, lane_var), _selectors(insts, thread_var)
    block_of = {}
    for n, (a, b) in enumerate(blocks):
        for i in range(a, b):
            block_of[i] = n
    out: list[SharedRace] = []
    seen: set[tuple[tuple[int, int] | None, str]] = set()
    for i in pairs:
        inst = insts[i]
        n = block_of[i]
        mask = masks[n]
        if mask is None or n in lane_opaque:
            continue
        warps_unknown = n in warp_opaque
        if inst.guard is not None:
            p, negated = inst.guard
            pv = values.at(i, p)
            if _is_vec(pv):
                mask &= _bits(pv, negated)  # type: ignore[arg-type]
            elif p in lane_selectors:
                continue
            elif p in warp_selectors:
                warps_unknown = True  # which warps run it is unknown: only same-warp collisions count
        found = _collision(inst, i, mask, values, lane_var, thread_var, threads, warps_unknown)
        if found is None or (inst.loc, found[0]) in seen:
            continue
        seen.add((inst.loc, found[0]))
        fi, line = inst.loc if inst.loc else (None, None)
        origin = None
        if inst.src is not None and inst.src[0] != fi and inst.src[0] in files:
            origin = f"{PurePosixPath(files[inst.src[0]]).name}:{inst.src[1]}"
        out.append(SharedRace(entry, line, fi, files.get(fi) if fi is not None else None, origin, inst.text,
                              found[0], (*found[1][0], *found[1][1])))
    return out


# -- read-modify-writes ------------------------------------------------------------------------------------


def _is_shared(inst: _Inst, head: str) -> bool:
    parts = inst.opcode.split(".")
    return (parts[0] == head and any(p.startswith("shared") for p in parts)
            and not any(p in ("async", "bulk", "relaxed", "release", "acquire", "volatile") for p in parts))


def _rmw_pairs(insts: list[_Inst], labels: dict[str, int]) -> list[int]:
    """Indices of the ``st.shared`` that store, to the address an ``ld.shared`` of the same basic block
    read, a value computed from the loaded one."""
    return [s for _, s in rmw_pairs(insts, labels, _is_shared)]


def rmw_pairs(insts: list[_Inst], labels: dict[str, int], access: Callable[[_Inst, str], bool]) -> list[tuple[int, int]]:
    """(load, store) indices of the read-modify-writes of one memory: a store (``access(inst, "st")``)
    to the address text a load (``access(inst, "ld")``) of the same basic block read, no write to its
    registers and no branch, barrier or call in between, storing a value computed from the loaded one
    (SHARED_RMW_RACE's over ``.shared``, GLOBAL_RMW_RACE's over global and generic accesses)."""
    starts = set(labels.values())
    out: list[tuple[int, int]] = []
    loads: dict[str, tuple[set[str], set[str], int]] = {}  # address text -> (its registers, values derived, load)
    for i, inst in enumerate(insts):
        if i in starts:
            loads = {}
        if access(inst, "ld") and len(inst.operands) >= 2:
            addr = inst.operands[1]
            loads[addr] = (set(_REG.findall(addr)), set(inst.dests()), i)
        elif access(inst, "st") and len(inst.operands) >= 2:
            hit = loads.get(inst.operands[0])
            if hit is not None and hit[1].intersection(_REG.findall(" ".join(inst.operands[1:]))):
                out.append((hit[2], i))
        else:
            dests = set(inst.dests())
            if dests:
                srcs = inst.sources()
                for addr in list(loads):
                    regs, derived, _ = loads[addr]
                    if regs & dests:
                        del loads[addr]  # the address registers changed: another address
                    elif derived.intersection(srcs):
                        derived |= dests
        if inst.head in ("bra", "brx", "ret", "exit", "trap", "bar", "barrier", "call"):
            loads = {}
    return out


# -- thread values -----------------------------------------------------------------------------------------


def _width(t: str) -> int:
    digits = "".join(c for c in t if c.isdigit())
    return int(digits) if digits else 32


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


def _is_vec(v: Value | None) -> bool:
    return isinstance(v, tuple) and (not v or not isinstance(v[0], str))


class _Values:
    """Per-thread values of the registers as each instruction reads them (by reaching definitions).

    A definition is evaluated when it is integer arithmetic (or a predicate) on values known per thread
    or the same for the whole block. A read sees the value of its one reaching definition, or of several
    that agree; a loop's induction variable (set to one value, otherwise stepped by a block-uniform
    amount, as nvcc's strength reduction leaves pointers and indices) reads as that value plus an unknown
    block-uniform base: threads at the same iteration keep their offsets."""

    def __init__(self, insts: list[_Inst], blocks: list[tuple[int, int]], succ: list[list[int]],
                 thread_var: set[str], threads: list[tuple[int, int, int]], ext: tuple[int, int, int]) -> None:
        total = len(threads)
        self.insts, self.thread_var, self.total = insts, thread_var, total
        self.zero: tuple[int, ...] = (0,) * total
        self.special: dict[str, Value] = {
            "%tid.x": tuple(t[0] for t in threads), "%tid.y": tuple(t[1] for t in threads),
            "%tid.z": tuple(t[2] for t in threads), "%laneid": tuple(t % 32 for t in range(total)),
            "%ntid.x": ext[0], "%ntid.y": ext[1], "%ntid.z": ext[2], "WARP_SZ": 32,  # PTX's warpSize
        }
        self.uses = _reaching_uses(insts, blocks, succ)
        self.val: dict[int, Value] = {}
        todo = [i for i, inst in enumerate(insts) if len(inst.dests()) == 1 and inst.head in _ARITH]
        for _ in range(6):
            before = len(self.val)
            for i in todo:
                if i in self.val:
                    continue
                inst = self.insts[i]
                d = inst.dests()[0]
                if _step(inst, d, thread_var):
                    v = self._induction(i, d, include_self=True)
                else:
                    v = _eval(inst, i, self)
                if v is not None:
                    self.val[i] = v
            if len(self.val) == before:
                break

    def at(self, i: int, reg: str) -> Value | None:
        """The value of ``reg`` (a register, special register, integer or symbol) as instruction ``i``
        reads it; None where it is not known per thread nor the same for the whole block."""
        if reg in self.special:
            return self.special[reg]
        if _INT.fullmatch(reg):
            return _int(reg)
        if not reg.startswith("%"):
            return ("base", self.zero) if reg[:1].isalpha() or reg[:1] in "_$" else None  # a symbol's address
        defs = self.uses.get(i, {}).get(reg)
        if defs:
            vals = [self.val.get(d) for d in defs]
            if vals[0] is not None and all(v == vals[0] for v in vals):
                return vals[0]
            v = self._induction(i, reg)
            if v is not None:
                return v
        if reg in self.thread_var or reg.startswith(("%tid", "%laneid", "%warpid", "%lanemask", "%clock", "%globaltimer")):
            return None
        return ("base", self.zero)  # the same for every thread of the block, unknown

    def _induction(self, i: int, reg: str, include_self: bool = False) -> Value | None:
        defs = self.uses.get(i, {}).get(reg) or ()
        steps = [d for d in defs if _step(self.insts[d], reg, self.thread_var)]
        inits = [self.val.get(d) for d in defs if d not in steps]
        if not (steps or include_self) or not inits or inits[0] is None or any(v != inits[0] for v in inits):
            return None
        v = inits[0]
        return ("base", v[1] if isinstance(v, tuple) and v and isinstance(v[0], str) else  # type: ignore[index,return-value]
                v if isinstance(v, tuple) else (v,) * self.total)


def _reaching_uses(insts: list[_Inst], blocks: list[tuple[int, int]], succ: list[list[int]]) -> dict[int, dict[str, tuple[int, ...]]]:
    """For each instruction, the definitions (instruction indices) of each register it reads that reach
    it; a guarded definition adds to the ones before it instead of replacing them."""
    defs_of: dict[str, list[int]] = {}
    for i, inst in enumerate(insts):
        for d in inst.dests():
            defs_of.setdefault(d, []).append(i)
    mask_of = {r: sum(1 << i for i in ds) for r, ds in defs_of.items()}
    gen: list[int] = []
    kill: list[int] = []
    for a, b in blocks:
        g = k = 0
        for i in range(a, b):
            for d in insts[i].dests():
                if insts[i].guard is None:
                    k |= mask_of[d]
                    g &= ~mask_of[d]
                g |= 1 << i
        gen.append(g)
        kill.append(k)
    preds: list[list[int]] = [[] for _ in blocks]
    for n, ss in enumerate(succ):
        for t in ss:
            preds[t].append(n)
    into = [0] * len(blocks)
    out = list(gen)
    changed = True
    while changed:
        changed = False
        for n in range(len(blocks)):
            inn = 0
            for p in preds[n]:
                inn |= out[p]
            new = gen[n] | (inn & ~kill[n])
            if inn != into[n] or new != out[n]:
                into[n], out[n], changed = inn, new, True
    uses: dict[int, dict[str, tuple[int, ...]]] = {}
    for n, (a, b) in enumerate(blocks):
        current: dict[str, tuple[int, ...]] = {}
        for i in range(a, b):
            inst = insts[i]
            here: dict[str, tuple[int, ...]] = {}
            for s in inst.sources():
                if s in defs_of:
                    got = current.get(s)
                    if got is None:
                        got = tuple(d for d in defs_of[s] if into[n] >> d & 1)
                    here[s] = got
            if here:
                uses[i] = here
            for d in inst.dests():
                if inst.guard is None:
                    current[d] = (i,)
                else:
                    prev = current.get(d)
                    if prev is None:
                        prev = tuple(x for x in defs_of[d] if into[n] >> x & 1)
                    current[d] = (*prev, i)
    return uses


def _step(inst: _Inst, reg: str, thread_var: set[str]) -> bool:
    """Whether ``inst`` is ``reg = reg +/- u`` with ``u`` the same for every thread of the block."""
    if inst.head not in ("add", "sub") or len(inst.operands) != 3 or inst.operands[0] != reg or inst.guard:
        return False
    a, b = inst.operands[1], inst.operands[2]
    other = b if a == reg else a if (b == reg and inst.head == "add") else None
    return other is not None and (bool(_INT.fullmatch(other)) or (other.startswith("%") and other not in thread_var
                                                                  and not other.startswith(("%tid", "%laneid", "%lanemask", "%clock"))))


def _eval(inst: _Inst, i: int, vals: _Values) -> Value | None:
    total = vals.total
    parts = inst.opcode.split(".")
    head, typ = parts[0], parts[-1]
    srcs = inst.operands[1:]
    if head == "setp":
        return _setp(parts, srcs, i, vals)
    if typ == "pred":
        if head in ("and", "or", "xor", "not"):
            vs = [vals.at(i, s.lstrip("!")) for s in srcs]
            if not all(_is_vec(v) for v in vs):
                return None
            bs = [tuple(not x for x in v) if s.startswith("!") else v for s, v in zip(srcs, vs)]  # type: ignore[union-attr]
            if head == "not":
                return tuple(int(not x) for x in bs[0])
            f = {"and": lambda a, b: a and b, "or": lambda a, b: a or b, "xor": lambda a, b: a != b}[head]
            return tuple(int(f(a, b)) for a, b in zip(bs[0], bs[1]))
        return vals.at(i, srcs[0]) if head == "mov" and len(srcs) == 1 else None
    if not typ[:1] in ("u", "s", "b") or typ[1:] not in ("16", "32", "64"):
        return None
    bits = _width(typ)
    ops = [vals.at(i, s) for s in srcs]
    if any(o is None for o in ops):
        return None
    if head in ("mov", "cvt") and len(ops) == 1:
        o = ops[0]
        if head == "cvt":
            to, frm = parts[-2], parts[-1]
            if not (to[:1] in "usb" and frm[:1] in "usb" and to[1:] in ("8", "16", "32", "64")):
                return None
            fb, tm = _width(frm), (1 << _width(to)) - 1
            if frm[0] == "s":
                return _map1(o, lambda x: _signed(x, fb) & tm)  # type: ignore[arg-type]
            return _map1(o, lambda x: x & ((1 << fb) - 1) & tm)  # type: ignore[arg-type]
        return o
    if head == "selp" and len(ops) == 3:
        a, b, p = ops
        if not (_is_vec(p) and _is_vec(a) | isinstance(a, int) and _is_vec(b) | isinstance(b, int)):
            return None
        av = a if isinstance(a, tuple) else (a,) * total
        bv = b if isinstance(b, tuple) else (b,) * total
        return tuple(x if c else y for x, y, c in zip(av, bv, p))  # type: ignore[arg-type]
    signed = typ[0] == "s"
    mask = (1 << bits) - 1
    if head == "mul" and "wide" in parts:
        wb = bits * 2
        ext = (lambda x: _signed(x, bits)) if signed else (lambda x: x & mask)
        return _linear(lambda a, b: (ext(a) * ext(b)) & ((1 << wb) - 1), ops[0], ops[1], scale=True)
    if head == "mad" and len(ops) == 3:
        wide = "wide" in parts
        ext = (lambda x: _signed(x, bits)) if signed else (lambda x: x & mask)
        out_mask = (1 << (bits * 2)) - 1 if wide else mask
        prod = _linear(lambda a, b: (ext(a) * ext(b)) & out_mask if wide else (a * b) & mask, ops[0], ops[1], scale=True)
        return None if prod is None else _linear(lambda a, b: (a + b) & out_mask, prod, ops[2])
    if head == "neg" and len(ops) == 1:
        return _map1(ops[0], lambda x: -x & mask) if _is_vec(ops[0]) or isinstance(ops[0], int) else None
    if head == "not" and len(ops) == 1:
        return _map1(ops[0], lambda x: ~x & mask) if _is_vec(ops[0]) or isinstance(ops[0], int) else None
    if len(ops) != 2:
        return None
    a, b = ops
    if head == "add":
        return _linear(lambda x, y: (x + y) & mask, a, b)
    if head == "sub":
        return _linear(lambda x, y: (x - y) & mask, a, b)
    if head == "mul" and "hi" not in parts:
        return _linear(lambda x, y: (x * y) & mask, a, b, scale=True)
    if head == "shl":
        return _linear(lambda x, y: (x << (y & 0xFF)) & mask if (y & 0xFF) < bits else 0, a, b, shift=True)
    fn = {
        "shr": (lambda x, y: (_signed(x, bits) >> min(y, bits - 1)) & mask) if signed
        else (lambda x, y: (x & mask) >> y if y < bits else 0),
        "and": lambda x, y: x & y & mask, "or": lambda x, y: (x | y) & mask, "xor": lambda x, y: (x ^ y) & mask,
        "min": (lambda x, y: min(_signed(x, bits), _signed(y, bits)) & mask) if signed else (lambda x, y: min(x, y)),
        "max": (lambda x, y: max(_signed(x, bits), _signed(y, bits)) & mask) if signed else (lambda x, y: max(x, y)),
        "div": _div(signed, bits), "rem": _rem(signed, bits),
    }.get(head)
    if fn is None or not ((_is_vec(a) or isinstance(a, int)) and (_is_vec(b) or isinstance(b, int))):
        return None
    return _binary(fn, a, b)  # type: ignore[arg-type]


def _div(signed: bool, bits: int):  # type: ignore[no-untyped-def]
    mask = (1 << bits) - 1

    def f(x: int, y: int) -> int | None:
        if signed:
            x, y = _signed(x, bits), _signed(y, bits)
            if y == 0:
                return None
            q = abs(x) // abs(y)
            return (q if (x < 0) == (y < 0) else -q) & mask
        return None if y == 0 else (x // y) & mask
    return f


def _rem(signed: bool, bits: int):  # type: ignore[no-untyped-def]
    mask = (1 << bits) - 1

    def f(x: int, y: int) -> int | None:
        if signed:
            x, y = _signed(x, bits), _signed(y, bits)
            if y == 0:
                return None
            r = abs(x) % abs(y)
            return (r if x >= 0 else -r) & mask
        return None if y == 0 else (x % y) & mask
    return f


def _map1(v: Value, f) -> Value | None:  # type: ignore[no-untyped-def]
    """``f`` of each thread's value; a base is kept (a conversion of base + offset is taken as the base
    plus the converted offset: no wrap-around is tracked)."""
    if isinstance(v, int):
        return f(v)
    if _is_vec(v):
        return tuple(f(x) for x in v)  # type: ignore[union-attr]
    return ("base", tuple(f(x) for x in v[1]))  # type: ignore[index]


def _binary(f, a: int | tuple[int, ...], b: int | tuple[int, ...]) -> Value | None:  # type: ignore[no-untyped-def]
    if isinstance(a, int) and isinstance(b, int):
        return f(a, b)
    n = len(a) if isinstance(a, tuple) else len(b)  # type: ignore[arg-type]
    av = a if isinstance(a, tuple) else (a,) * n
    bv = b if isinstance(b, tuple) else (b,) * n
    out = tuple(f(x, y) for x, y in zip(av, bv))
    return None if None in out else out


def _linear(f, a: Value, b: Value, scale: bool = False, shift: bool = False) -> Value | None:  # type: ignore[no-untyped-def]
    """``f`` on values that may carry an unknown block-uniform base: a base survives an add or sub (of
    known values or another base: the bases combine into one), and a multiply or shift by a known
    constant (the base times a constant is still the same for every thread)."""
    ab, bb = isinstance(a, tuple) and a and isinstance(a[0], str), isinstance(b, tuple) and b and isinstance(b[0], str)
    if not ab and not bb:
        return _binary(f, a, b)  # type: ignore[arg-type]
    if scale or shift:
        if ab and isinstance(b, int):
            return ("base", _binary(f, a[1], b))  # type: ignore[index,return-value]
        if bb and isinstance(a, int) and not shift:
            return ("base", _binary(f, a, b[1]))  # type: ignore[index,return-value]
        return None
    # a sum or difference of block-uniform unknowns is one: the bases combine, the offsets follow f
    off = _binary(f, a[1] if ab else a, b[1] if bb else b)  # type: ignore[index,arg-type]
    if off is None:
        return None
    n = len(a[1] if ab else b[1])  # type: ignore[index,arg-type]
    return ("base", off if isinstance(off, tuple) else (off,) * n)


def _setp(parts: list[str], srcs: tuple[str, ...], i: int, vals: _Values) -> Value | None:
    total = vals.total
    if len(parts) < 3 or len(srcs) < 2:
        return None
    cmp, typ = parts[1], parts[-1]
    if typ[:1] not in ("u", "s", "b") or len(parts) > 3:  # a combined setp.CMP.BOOLOP is not evaluated
        return None
    bits = _width(typ)
    a, b = vals.at(i, srcs[0]), vals.at(i, srcs[1])
    if not ((_is_vec(a) or isinstance(a, int)) and (_is_vec(b) or isinstance(b, int))):
        return None
    conv = (lambda x: _signed(x, bits)) if typ[0] == "s" else (lambda x: x & ((1 << bits) - 1))
    ops = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y, "le": lambda x, y: x <= y,
           "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y, "lo": lambda x, y: x < y, "ls": lambda x, y: x <= y,
           "hi": lambda x, y: x > y, "hs": lambda x, y: x >= y}
    f = ops.get(cmp)
    if f is None:
        return None
    if cmp in ("lo", "ls", "hi", "hs"):
        conv = lambda x: x & ((1 << bits) - 1)  # noqa: E731 - unsigned comparisons whatever the type
    out = _binary(lambda x, y: int(f(conv(x), conv(y))), a, b)  # type: ignore[arg-type]
    return out if out is None or isinstance(out, tuple) else (out,) * total


# -- lane-varying registers, thread masks, opaque regions --------------------------------------------------


def _warp_uniform(v: Value) -> bool:
    if isinstance(v, int):
        return True
    vec = v[1] if isinstance(v[0], str) else v  # type: ignore[index]
    return all(len(set(vec[w : w + 32])) == 1 for w in range(0, len(vec), 32))  # type: ignore[arg-type]


def _lane_varying(insts: list[_Inst], params: set[str], blocks: list[tuple[int, int]], succ: list[list[int]],
                  values: _Values) -> set[str]:
    """Registers whose value may differ between the lanes of one warp (at some definition)."""
    ipdom = _ipdom(succ)
    var: set[str] = {r for r, v in values.special.items() if not _warp_uniform(v)}
    steps = []
    for i, inst in enumerate(insts):
        dests = inst.dests()
        if not dests:
            continue
        v = values.val.get(i)
        if v is not None:  # a definition with thread values: varying exactly when they vary in a warp
            if not _warp_uniform(v):
                var.update(dests)
            continue
        srcs = inst.sources()
        # %tid/%laneid have thread values (in var where they vary within a warp); these vary and have none
        seed = _fresh(inst, params) or any(s[1:].startswith(_LANE_SPECIAL) for s in srcs)
        steps.append((frozenset(dests), srcs, seed))
    defs = [{d for i in range(a, b) for d in insts[i].dests()} for a, b in blocks]
    use_blocks: dict[str, set[int]] = {}
    for n, (a, b) in enumerate(blocks):
        for i in range(a, b):
            for u in insts[i].sources():
                use_blocks.setdefault(u, set()).add(n)
    regions: dict[int, set[str]] = {}
    changed = True
    while changed:
        changed = False
        for dests, srcs, seed in steps:
            if (seed or not var.isdisjoint(srcs)) and not dests <= var:
                var |= dests
                changed = True
        for n, (a, b) in enumerate(blocks):
            last = insts[b - 1] if b > a else None
            if last is None or last.guard is None or len(succ[n]) < 2 or last.guard[0] not in var:
                continue
            if n not in regions:
                inside = _region(n, succ, ipdom[n])
                written = set().union(*(defs[r] for r in inside))
                regions[n] = {r for r in written if not use_blocks.get(r, set()) <= inside}
            new = regions[n] - var
            var |= new
            changed |= bool(new)
    return var


def _bits(vec: tuple[int, ...], negated: bool) -> int:
    out = 0
    for t, x in enumerate(vec):
        if bool(x) != negated:
            out |= 1 << t
    return out


def _masks(blocks: list[tuple[int, int]], succ: list[list[int]], insts: list[_Inst], values: _Values,
           total: int) -> list[int | None]:
    """Bit masks of the threads that may run each block (None: none)."""
    full = (1 << total) - 1
    into: list[int | None] = [None] * len(blocks)
    into[0] = full
    changed = True
    while changed:
        changed = False
        for n, (a, b) in enumerate(blocks):
            here = into[n]
            if here is None:
                continue
            last = insts[b - 1] if b > a else None
            cond = None
            if last is not None and last.guard is not None and last.head in ("bra", "ret", "exit", "trap"):
                pv = values.at(b - 1, last.guard[0])
                if _is_vec(pv):
                    cond = _bits(pv, last.guard[1])  # type: ignore[arg-type]
            for k, s in enumerate(succ[n]):
                new = here
                if cond is not None:
                    taken = k == 0 and last is not None and last.head == "bra"
                    new = here & (cond if taken else full & ~cond)
                if not new:
                    continue
                old = into[s]
                merged = new if old is None else old | new
                if merged != old:
                    into[s], changed = merged, True
    return into


def _selectors(insts: list[_Inst], tainted: set[str]) -> set[str]:
    """Predicates that may pick out single threads in a way thread values do not show: an equality on a
    tainted value (``lane == leader``, ``idx == loaded``), a vote, ``elect.sync``, a match, and
    combinations of them. An inequality on a tainted value (a strided loop's ``i < C``) is not one."""
    out: set[str] = set()
    for _ in range(3):
        before = len(out)
        for inst in insts:
            dests = [d for d in inst.dests() if d in tainted]
            if not dests:
                continue
            parts = inst.opcode.split(".")
            srcs = inst.sources()
            if parts[0] == "setp" and len(parts) > 1 and parts[1] in ("eq", "ne", "equ", "neu"):
                hit = any(s in tainted for s in srcs)
            elif parts[0] in ("vote", "elect", "match", "activemask", "redux", "atom"):
                hit = True
            else:
                hit = parts[-1] == "pred" and any(s in out for s in srcs)
            if hit:
                out.update(dests)
        if len(out) == before:
            break
    return out


def _opaque(blocks: list[tuple[int, int]], succ: list[list[int]], ipdom: Sequence[int | None], insts: list[_Inst],
            values: _Values, tainted: set[str]) -> set[int]:
    """Blocks under a branch on a selector predicate (:func:`_selectors`) that has no thread values."""
    selectors = _selectors(insts, tainted)
    out: set[int] = set()
    for n, (a, b) in enumerate(blocks):
        last = insts[b - 1] if b > a else None
        if last is None or last.guard is None or last.head not in ("bra", "ret", "exit", "trap"):
            continue
        p = last.guard[0]
        if p in selectors and not _is_vec(values.at(b - 1, p)):
            out |= _region(n, succ, ipdom[n])
    return out


def _collision(inst: _Inst, i: int, mask: int, values: _Values, lane_var: set[str], thread_var: set[str],
               threads: list[tuple[int, int, int]], warps_unknown: bool) -> tuple[str, tuple[tuple[int, int, int], tuple[int, int, int]]] | None:
    """(kind, two threads) of a collision of the store at ``inst`` among the threads of ``mask``."""
    addr = inst.operands[0].strip("[]").replace(" ", "")
    reg = next(iter(_REG.findall(addr)), None)
    members = [t for t in range(len(threads)) if mask >> t & 1]
    if len(members) < 2:
        return None
    v = values.at(i, reg) if reg is not None else ("base", values.zero)
    if isinstance(v, int):
        v = (v,) * len(threads)
    if v is not None:
        vec = v[1] if isinstance(v[0], str) else v  # type: ignore[index]
        first: dict[int, int] = {}
        cross: tuple[int, int] | None = None
        for t in members:
            o = first.setdefault(vec[t], t)  # type: ignore[index]
            if o != t:
                if o // 32 == t // 32:
                    return "lane", (threads[o], threads[t])
                cross = cross or (o, t)
        if cross is not None and not warps_unknown:
            return "warp", (threads[cross[0]], threads[cross[1]])
        return None
    if reg is None or reg in lane_var:
        return None
    v_block = reg in thread_var
    by_warp: dict[int, int] = {}
    for t in members:
        o = by_warp.setdefault(t // 32, t)
        if o != t:
            return "lane", (threads[o], threads[t])
    if not v_block and not warps_unknown and len(by_warp) > 1:
        a, b = sorted(by_warp.values())[:2]
        return "warp", (threads[a], threads[b])
    return None
