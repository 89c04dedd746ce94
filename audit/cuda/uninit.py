"""Reads of a fixed-size local array's elements that were written only under a run-time guard the read lacks.

``float l[AUX_K_MAX]`` filled by ``for (k ...) if (k < K) l[k] = ...`` and then read by a loop that lost its
``if (k < K)`` (or has ``k <= K``) reads ``l[k]`` for ``k >= K``: an uninitialised register, undefined
behaviour that nvcc is free to compile into code that behaves like the original, so no run can see it.
This check (LOCAL_UNINIT_READ) is static and source-level, and conservative: it follows only 1-D
function-local arrays of constant extent that are never aliased (every use is ``NAME[index]``), written by
whole-element statements ``NAME[i] = ...`` in constant-bound ``for`` loops, each unconditionally or under one
comparison of a loop variable with a run-time expression ``E`` (``k < K``). A read is reported when, for
some value of ``E`` that the early exits before it allow, one of the elements it reads has no earlier write
that covers it, while the read's own guards (comparisons of its loop variables with the same ``E``) hold.
Anything it cannot follow (another condition, a ``?:``/``&&``/``||`` around the read, a ``break`` in its
loop, a while loop, a call that might take the element by reference) makes it report nothing.

>>> src = ('__global__ void k(const float* x, float* o, int K) {\\n    float l[4];\\n'
...        '    for (int k = 0; k < 4; ++k)\\n        if (k < K) l[k] = x[k];\\n'
...        '    for (int k = 0; k < 4; ++k)\\n        if (k <= K) o[k] = l[k];\\n}\\n')
>>> [(u.line, u.use, u.guard, u.read_guard, u.loops) for u in find_uninit_reads(src)]
[(6, 'l[k]', 'k < K', 'k <= K', (('k', 0, 3, 5),))]
>>> find_uninit_reads(src)[0].message("k.cu")[:62]
'k.cu:6: "l[k]" reads the local array "l" (4 elements, declared'
>>> find_uninit_reads(src.replace("k <= K", "k < K"))
[]
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .bounds import _MAX_EVALS, _Analysis, _Decl, _Expr, _Loop, _Unknown, analysis, included_constants

_CMP: dict[str, Callable[[int, int], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
_CMP_ALL: dict[str, Callable[[int, int], bool]] = {**_CMP, "==": operator.eq, "!=": operator.ne}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_COMPOUND = frozenset("+= -= *= /= %= <<= >>= &= |= ^=".split())
_MODIFY = frozenset("= += -= *= /= %= <<= >>= &= |= ^= ++ --".split())
_EXITS = frozenset("return throw break continue".split())
# element types with no constructor: a declaration without an initialiser leaves them uninitialised
_POD = frozenset(
    "const volatile register signed unsigned short long int char bool float double size_t ptrdiff_t int8_t "
    "int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t half __half __half2 __nv_bfloat16 "
    "__nv_bfloat162 float1 float2 float3 float4 double1 double2 double3 double4 int1 int2 int3 int4 uint1 "
    "uint2 uint3 uint4 char1 char2 char3 char4 uchar1 uchar2 uchar3 uchar4 short2 short4 ushort2 ushort4 "
    "long2 longlong2 ulonglong2".split()
)
# functions known to take their arguments by value: an element passed whole to one of them is only read
_BY_VALUE = frozenset(
    "fmaxf fminf fmax fmin max min expf exp exp2f exp10f __expf logf log log2f log10f __logf log1pf expm1f "
    "sqrtf sqrt rsqrtf rsqrt cbrtf fabsf fabs abs tanhf tanh sinf cosf tanf __sinf __cosf sinhf coshf atanf "
    "atan2f asinf acosf erff erfcf powf pow __powf floorf ceilf roundf rintf truncf floor ceil round trunc "
    "fmaf fma __fmaf_rn __fdividef fdividef __frcp_rn __fsqrt_rn __fmul_rn __fadd_rn __fsub_rn __fdiv_rn "
    "__saturatef isnan isinf isfinite signbit copysignf copysign make_float1 make_float2 make_float3 "
    "make_float4 make_int2 make_int3 make_int4 make_uint2 make_uint4 make_double2 __float2int_rn "
    "__float2int_rz __int2float_rn __float2half __half2float __float_as_int __int_as_float __float_as_uint "
    "__uint_as_float __shfl_sync __shfl_xor_sync __shfl_up_sync __shfl_down_sync float double int unsigned "
    "bool".split()
)
_CONTROL_OPEN = frozenset("if while switch for return sizeof".split())  # "(" after these groups, not a call
_E_PUNCT = frozenset("+ - * / % ( ) . -> ::".split())  # what a guard's run-time expression may contain
_UNEVALUATED = frozenset("sizeof decltype alignof _Alignof __alignof__ typeid noexcept".split())
_PP_COND = re.compile(r"^[ \t]*#[ \t]*(?:if|ifdef|ifndef|elif|else)\b", re.M)
_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)((?:\\\n|[^\n])*)", re.M)


@dataclass(frozen=True)
class UninitRead:
    """One read of a local array whose elements may not have been written before it."""

    line: int  # 1-based line of the array name at the read
    col: int  # 1-based column of the array name at the read
    array: str
    size: int  # the array's extent
    decl_line: int
    use: str  # the read as written, whitespace-normalised, e.g. "l[k]"
    guard: str  # the write guard, e.g. "k < K"; "" when the elements read are not written at all before it
    guard_line: int  # line of that guard ("" guard: of the array's first write)
    loops: tuple[tuple[str, int, int, int], ...]  # (variable, first, last, line of its for), outermost first
    read_guard: str  # "" when the read has none, else e.g. "k <= K"
    elements: tuple[int, ...] = field(default=())  # the elements the read may find uninitialised

    def message(self, path: str) -> str:
        """One sentence naming the read, the array, the loop ranges, the read's and the writes' guards."""
        parts = [
            f"{var} = {first}" + (f" .. {last}" if last != first else "") + f" (the loop at line {line})"
            for var, first, last, line in self.loops
        ]
        ranges = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)
        where = f" where {ranges}" if ranges else ""
        how = "with no guard" if not self.read_guard else "under " + self.read_guard
        head = (
            f'{path}:{self.line}: "{self.use}" reads the local array "{self.array}" ({self.size} elements, '
            f"declared at line {self.decl_line}){where} {how}, "
        )
        if self.guard:
            return head + (
                f"but its elements are written only where {self.guard} (line {self.guard_line}): the elements "
                "past that bound are uninitialised registers (undefined behaviour)."
            )
        many = len(self.elements) != 1
        vals = ", ".join(map(str, self.elements))
        what = "they are uninitialised registers" if many else "it is an uninitialised register"
        return head + (
            f"but no statement before it writes element{'s' if many else ''} {vals} (the array is first "
            f"written at line {self.guard_line}): {what} (undefined behaviour)."
        )


def find_uninit_reads(text: str, constants: Mapping[str, int] | None = None) -> list[UninitRead]:
    """The possibly uninitialised reads of local arrays in one source text, one per use, by (line, col).

    ``constants`` are integer constants known from the headers it includes (see
    :func:`~audit.cuda.bounds.integer_constants`); the text's own ``#define`` constants join them. A source
    that cannot be tokenized raises :class:`~audit.cuda.tokens.TokenizeError`.
    """
    return _Uninit(analysis(text, constants)).reads()


def source_uninit_reads(path: Path, include_dirs: Sequence[Path]) -> list[UninitRead]:
    """The LOCAL_UNINIT_READ findings of one source file, with the integer constants of the local headers it
    includes (transitively) known. A file that cannot be read or tokenized has none."""
    from ..untrusted import SOURCE_LIMIT, read_regular
    from .tokens import TokenizeError

    try:
        text = read_regular(path, SOURCE_LIMIT).decode("utf-8", errors="replace")
        return find_uninit_reads(text, included_constants(path, include_dirs))
    except (OSError, TokenizeError):
        return []


# ---------------------------------------------------------------------------------------------------------
# the analysis


class _Skip(Exception):
    """The array is used in a way this check does not follow: it reports nothing for it."""


@dataclass
class _Region:
    """A control structure of a function body: ``then`` / ``else`` (an if's branch, ``cond`` its condition
    tokens [a, b)), ``cfor`` (a constant-bound for's body, ``loop`` set), ``loop`` (any other loop, header
    included; ``cond`` its header), ``switch``, or ``forhdr`` (a for's parentheses). ``lo`` .. ``hi`` are
    inclusive token indices."""

    kind: str
    lo: int
    hi: int
    cond: tuple[int, int] | None = None
    loop: _Loop | None = None

    def holds(self, p: int) -> bool:
        return self.lo <= p <= self.hi


@dataclass
class _Body:
    """A function body's regions and early exits; ``opaque`` when it has a lambda, a local class, a goto
    or a try (its arrays are skipped)."""

    open: int
    close: int
    regions: list[_Region]
    exits: list[int]
    opaque: bool


@dataclass(frozen=True)
class _Guard:
    """``var OP E`` on a loop variable: the variable's declaration, the operator with the variable on the
    left, ``E`` as normalised token text, and the condition as written with its line."""

    var: _Decl
    op: str
    e: str
    e_toks: tuple[int, int]
    text: str
    line: int


@dataclass
class _Write:
    pos: int  # the array name's token
    end: int  # the statement's last token: reads after it see the write
    line: int
    guard: _Guard | None
    covers: dict[int, list[int | None]]  # element -> guard-variable values that write it (None: always)


class _Uninit:
    def __init__(self, a: _Analysis) -> None:
        self.a, self.toks, self.match, self.n = a, a.toks, a.match, a.n
        self.bodies: dict[int, _Body] = {}
        self.macros = [(m.group(1), m.group(2)) for m in _MACRO.finditer(a.text)]

    # -- helpers ----------------------------------------------------------------------------------------------
    def _body_of(self, at: int) -> _Body | None:
        """The function body (outermost block brace) around token ``at``, with its structure."""
        a = self.a
        b = a.encl[at]
        while b >= 0 and self.toks[b].text != "{":
            b = a.encl[b]
        if b < 0 or a.kinds.get(b) != "block":
            return None
        while a.encl[b] >= 0 and self.toks[a.encl[b]].text == "{" and a.kinds.get(a.encl[b]) == "block":
            b = a.encl[b]
        if a.encl[b] >= 0 and self.toks[a.encl[b]].text != "{":
            return None  # a brace inside parentheses: an initializer or a lambda, not a function body
        if b not in self.bodies:
            self.bodies[b] = self._structure(b, self.match.get(b, self.n - 1))
        return self.bodies[b]

    def _structure(self, lo: int, hi: int) -> _Body:
        toks, match, a = self.toks, self.match, self.a
        loops = {L.start: L for L in a.loops}
        regions: list[_Region] = []
        exits: list[int] = []
        trailers: set[int] = set()
        opaque = False
        for i in range(lo + 1, hi):
            t = toks[i]
            if t.kind == "ident" and t.text in ("goto", "try", "catch"):
                opaque = True
            elif t.text == "{" and t.kind == "punct" and a.kinds.get(i) == "class":
                opaque = True
            elif t.text == "[" and t.kind == "punct":
                prev = toks[i - 1]
                if not (prev.kind in ("ident", "number") or prev.text in ("]", ")")):
                    opaque = True  # a lambda's capture list or an attribute
            if t.kind != "ident":
                continue
            has_parens = i + 1 < hi and toks[i + 1].text == "(" and i + 1 in match
            if t.text == "if" and has_parens:
                rp = match[i + 1]
                e1 = a._stmt_end(rp + 1)
                regions.append(_Region("then", rp + 1, e1, (i + 2, rp)))
                if e1 + 1 < hi and toks[e1 + 1].text == "else":
                    regions.append(_Region("else", e1 + 2, a._stmt_end(e1 + 2), (i + 2, rp)))
            elif t.text == "for" and has_parens:
                rp = match[i + 1]
                regions.append(_Region("forhdr", i + 1, rp))
                L = loops.get(rp + 1)
                end = a._stmt_end(rp + 1)
                if L is not None and L.values is not None:
                    regions.append(_Region("cfor", rp + 1, end, None, L))
                else:
                    regions.append(_Region("loop", rp + 1, end, (i + 2, rp)))
            elif t.text == "while" and has_parens and i not in trailers:
                rp = match[i + 1]
                regions.append(_Region("loop", i, a._stmt_end(rp + 1), (i + 2, rp)))
            elif t.text == "do":
                e = a._stmt_end(i + 1)
                end = e
                if e + 2 < hi and toks[e + 1].text == "while" and e + 2 in match:
                    trailers.add(e + 1)
                    end = match[e + 2] + 1
                    regions.append(_Region("loop", i, end, (e + 3, match[e + 2])))
                else:
                    opaque = True
            elif t.text == "switch" and has_parens:
                rp = match[i + 1]
                regions.append(_Region("switch", i, a._stmt_end(rp + 1), (i + 2, rp)))
            elif t.text in _EXITS:
                exits.append(i)
            elif t.text in ("asm", "__asm__", "__asm"):
                opaque = True
        if _PP_COND.search(self.a.text, toks[lo].end, toks[hi].start):
            opaque = True  # alternative branches of an #if: source order means nothing
        return _Body(lo, hi, regions, exits, opaque)

    def _text(self, lo: int, hi: int) -> str:
        """Source text of tokens [lo, hi), whitespace-normalised."""
        return " ".join(self.a.text[self.toks[lo].start : self.toks[hi - 1].end].split()) if hi > lo else ""

    def _norm(self, lo: int, hi: int) -> str:
        return " ".join(t.text for t in self.toks[lo:hi])

    def _whole_operand(self, lo: int, hi: int) -> bool:
        """Whether tokens [lo, hi] are a whole argument of a call or a brace initializer that might bind it to
        a reference (a call of a function not known to take its arguments by value)."""
        toks = self.toks
        prev, nxt = toks[lo - 1].text, toks[hi + 1].text if hi + 1 < self.n else ";"
        if prev not in ("(", ",", "{") or nxt not in (")", ",", "}"):
            return False
        opener = self.a.encl[lo]
        if opener < 0 or toks[opener].text == "{":
            return opener >= 0  # inside an initializer list (a brace block would end the operand with ";")
        if toks[opener].text != "(":
            return False  # an index
        before = toks[opener - 1] if opener > 0 else None
        if before is None:
            return False
        if before.kind == "ident":
            return before.text not in _BY_VALUE and before.text not in _CONTROL_OPEN
        return before.kind != "punct" or before.text in (")", "]", ">", ">>")

    def _unevaluated(self, k: int) -> bool:
        """Whether token ``k`` sits in an unevaluated operand (``sizeof``, ``decltype``, ...)."""
        toks, o = self.toks, k
        if k > 0 and toks[k - 1].text in _UNEVALUATED:
            return True
        while (o := self.a.encl[o]) >= 0:
            if toks[o].text == "(" and o > 0 and toks[o - 1].text in _UNEVALUATED:
                return True
        return False

    def _stmt_start(self, k: int) -> bool:
        """Whether token ``k`` begins a statement."""
        toks = self.toks
        if k == 0:
            return True
        prev = toks[k - 1]
        if prev.text in (";", "{", "}", "else", "do"):
            return True
        if prev.text == ")" and k - 1 in self.match:
            o = self.match[k - 1]
            return o > 0 and toks[o - 1].text in ("if", "for", "while")
        return False

    def _stmt_close(self, k: int) -> int:
        """The ``;`` ending the expression statement starting at ``k``; _Skip on a top-level comma or when
        the statement does not end with ``;``."""
        toks, j = self.toks, k
        while j < self.n and toks[j].text != ";":
            if toks[j].text in (")", "]", "}", ","):
                raise _Skip
            j = self.a._skip(j)
        if j >= self.n:
            raise _Skip
        return j

    def _mentions(self, lo: int, hi: int, names: set[str]) -> bool:
        return any(t.kind == "ident" and t.text in names for t in self.toks[lo:hi])

    # -- guards -----------------------------------------------------------------------------------------------
    def _top_ops(self, lo: int, hi: int) -> list[int]:
        """Indices of the operators of [lo, hi) outside brackets and template brackets."""
        toks, out, j = self.toks, [], lo
        while j < hi:
            if toks[j].text in ("(", "[", "{") and j in self.match:
                j = self.match[j] + 1
                continue
            if j in self.a.tmpl and toks[j].text == "<":
                j = self.a.tmpl[j] + 1
                continue
            if toks[j].kind == "punct":
                out.append(j)
            j += 1
        return out

    def _strip(self, lo: int, hi: int) -> tuple[int, int]:
        while hi - lo >= 2 and self.toks[lo].text == "(" and self.match.get(lo) == hi - 1:
            lo, hi = lo + 1, hi - 1
        return lo, hi

    def _classify(self, lo: int, hi: int, loops: dict[int, _Loop], decl: int, close: int) -> _Guard | None:
        """``var OP E`` (or ``E OP var``) over the condition tokens [lo, hi): ``var`` one of ``loops``' variables,
        ``E`` a run-time expression of no loop variable, no call and no name modified after token ``decl``;
        None otherwise."""
        toks, a = self.toks, self.a
        lo, hi = self._strip(lo, hi)
        ops = self._top_ops(lo, hi)
        cmps = [j for j in ops if toks[j].text in _CMP]
        if len(cmps) != 1 or any(toks[j].text in ("&&", "||", "?", ":", "==", "!=", "=", ",", "!") for j in ops):
            return None
        c = cmps[0]
        for vlo, vhi, elo, ehi, op in ((lo, c, c + 1, hi, toks[c].text), (c + 1, hi, lo, c, _FLIP[toks[c].text])):
            if vhi - vlo != 1 or toks[vlo].kind != "ident":
                continue
            d = a._lookup(toks[vlo].text, vlo)
            if d is None or id(d) not in loops:
                continue
            if not self._runtime(elo, ehi, loops, decl, close):
                return None
            return _Guard(d, op, self._norm(elo, ehi), (elo, ehi), self._text(lo, hi), toks[lo].line)
        return None

    def _runtime(self, lo: int, hi: int, loops: dict[int, _Loop], decl: int, close: int) -> bool:
        """Whether [lo, hi) is a run-time expression that stays the same over the array's life: names, numbers
        and arithmetic, no loop variable, no call, no name assigned (or possibly so) after token ``decl``, and
        not a compile-time constant."""
        toks, a = self.toks, self.a
        if hi <= lo or a._eval(lo, hi, lo) is not None:
            return False
        loop_names = {L.decl.name for L in a.loops}
        names: set[str] = set()
        for j in range(lo, hi):
            t = toks[j]
            if t.kind == "ident":
                d = a._lookup(t.text, j)
                if (d is not None and id(d) in loops) or t.text in loop_names:
                    return False
                if j + 1 < hi and toks[j + 1].text == "(":
                    return False  # a call
                names.add(t.text)
            elif t.kind == "number" or (t.kind == "punct" and t.text in _E_PUNCT):
                if t.text == "(" and j > lo and (toks[j - 1].kind == "ident" or toks[j - 1].text == ">"):
                    return False
            else:
                return False
        for j in range(decl + 1, close):
            t = toks[j]
            if t.kind != "ident" or t.text not in names:
                continue
            if (j + 1 < self.n and toks[j + 1].text in _MODIFY) or toks[j - 1].text in ("++", "--", "&"):
                return False
            if self._whole_operand(j, j):
                return False
        return True

    def _constraint(self, lo: int, hi: int, e: str) -> tuple[Callable[[int], bool], set[int]] | None:
        """The condition [lo, hi) as a predicate of the single name ``e`` (the other operands compile-time
        constants), with the constants it compares ``e`` against; None when it is not of that form."""
        toks, a = self.toks, self.a
        lo, hi = self._strip(lo, hi)
        if hi <= lo:
            return None
        ops = self._top_ops(lo, hi)
        for join, combine in (("||", any), ("&&", all)):
            cuts = [j for j in ops if toks[j].text == join]
            if cuts:
                parts, start = [], lo
                for j in [*cuts, hi]:
                    part = self._constraint(start, j, e)
                    if part is None:
                        return None
                    parts.append(part)
                    start = j + 1
                fns = [p[0] for p in parts]
                consts = set().union(*(p[1] for p in parts))
                return (lambda x, fns=fns, combine=combine: combine(f(x) for f in fns)), consts
        if toks[lo].text == "!" and toks[lo + 1].text == "(" and self.match.get(lo + 1) == hi - 1:
            inner = self._constraint(lo + 1, hi, e)
            return None if inner is None else ((lambda x, f=inner[0]: not f(x)), inner[1])
        if any(toks[j].text in ("?", ":", ",", "=", "!", "~", "&", "|", "^") for j in ops):
            return None  # (bitwise operators bind looser than comparisons: not followed)
        cmps = [j for j in ops if toks[j].text in _CMP_ALL]
        if len(cmps) != 1:
            return None
        c = cmps[0]
        op = toks[c].text

        def side(slo: int, shi: int) -> int | str | None:
            slo, shi = self._strip(slo, shi)
            if shi - slo == 1 and toks[slo].kind == "ident" and toks[slo].text == e:
                return e
            return a._eval(slo, shi, slo)

        left, right = side(lo, c), side(c + 1, hi)
        if left == e and isinstance(right, int):
            return (lambda x, f=_CMP_ALL[op], v=right: f(x, v)), {right}
        if right == e and isinstance(left, int):
            return (lambda x, f=_CMP_ALL[op], v=left: f(v, x)), {left}
        if isinstance(left, int) and isinstance(right, int):
            value = _CMP_ALL[op](left, right)
            return (lambda x: value), set()
        return None

    # -- the uses of one array --------------------------------------------------------------------------------
    def reads(self) -> list[UninitRead]:
        out: list[UninitRead] = []
        for decls in self.a.decls.values():
            for d in decls:
                if d.extents is None or len(d.extents) != 1 or d.shared:
                    continue
                try:
                    out += self._array(d)
                except _Skip:
                    pass
        return sorted(out, key=lambda u: (u.line, u.col))

    def _array(self, d: _Decl) -> list[UninitRead]:
        toks, a = self.toks, self.a
        at = d.pos
        if toks[at].text != d.name or at not in a.decl_tokens:
            raise _Skip
        body = self._body_of(at)
        if body is None or body.opaque:
            raise _Skip
        if any(o is not d and o.end == d.end and o.pos != d.pos for o in a.decls.get(d.name, ())):
            raise _Skip  # declared twice in one block (both branches of an #if)
        # the declaration: plain scalar or vector elements, no storage class, no initializer
        j = at - 1
        while j > body.open and toks[j].text not in (";", "{", "}"):
            j -= 1
        words = {t.text for t in toks[j + 1 : at] if t.kind == "ident"}
        if not words or not words <= _POD or "const" in words:
            raise _Skip
        after = at + 1
        while after < self.n and toks[after].text == "[" and after in self.match:
            after = self.match[after] + 1
        if after >= self.n or toks[after].text in ("=", "{", "("):
            raise _Skip
        size = d.extents[0]
        assert size is not None
        close = min(d.end, body.close)
        word = re.compile(rf"\b{re.escape(d.name)}\b")
        used = {t.text for t in toks[body.open : body.close] if t.kind == "ident"}
        if any(name in used and word.search(repl) for name, repl in self.macros):
            raise _Skip  # a macro of this file that names the array may write it unseen
        writes: list[_Write] = []
        reads: list[tuple[int, int]] = []  # (name token, index close)
        for k in range(at + 1, close):
            t = toks[k]
            if t.kind != "ident" or t.text != d.name or toks[k - 1].text in (".", "->", "::"):
                continue
            if a._lookup(t.text, k) is not d:
                continue
            if toks[k + 1].text != "[" or k + 1 not in self.match or toks[k - 1].text == "&":
                raise _Skip
            if self._unevaluated(k):
                raise _Skip
            rb = self.match[k + 1]
            if rb == k + 2:
                raise _Skip
            nxt = toks[rb + 1].text if rb + 1 < self.n else ";"
            if nxt == "[":
                raise _Skip
            end = rb  # the element expression's last token (a member included)
            if nxt in (".", "->"):
                end = rb + 2
                if end + 1 < self.n and (toks[end + 1].text in _MODIFY or toks[end + 1].text == "("):
                    raise _Skip  # a partial write, or a member call
            if any(r.kind == "forhdr" and r.holds(k) for r in body.regions):
                raise _Skip
            pre = toks[k - 1].text
            tail = toks[end + 1].text if end + 1 < self.n else ";"
            if nxt == "=":
                if not self._stmt_start(k):
                    raise _Skip
                writes.append(self._write(d, k, rb, self._stmt_close(rb + 2), body, size))
            elif nxt in _COMPOUND or nxt in ("++", "--") or pre in ("++", "--"):
                start = k - 1 if pre in ("++", "--") else k
                if end != rb or not self._stmt_start(start):
                    raise _Skip
                reads.append((k, rb))
                writes.append(self._write(d, k, rb, self._stmt_close(rb + 1), body, size))
            else:
                if self._whole_operand(k, end):
                    raise _Skip
                j = end + 1
                while j < self.n and toks[j].text == ")":
                    j += 1
                if j < self.n and toks[j].text in _MODIFY:
                    raise _Skip  # (a[i]) = ..., (c ? a[i] : b) = ...
                if pre == "=" and toks[k - 2].kind == "ident" and toks[k - 3].text in ("&", "&&"):
                    raise _Skip  # float& r = a[i];
                if tail in _MODIFY:
                    raise _Skip
                reads.append((k, rb))
        if not writes:
            return []
        guarded = {w.guard.e for w in writes if w.guard is not None}
        if len(guarded) > 1:
            raise _Skip
        e = next(iter(guarded), None)
        out = []
        for k, rb in reads:
            hit = self._read(d, k, rb, body, size, writes, e)
            if hit is not None:
                out.append(hit)
        return out

    def _enclosing_loops(self, body: _Body, k: int) -> dict[int, _Loop]:
        return {id(r.loop.decl): r.loop for r in body.regions if r.kind == "cfor" and r.holds(k) and r.loop}

    def _write(self, d: _Decl, k: int, rb: int, end: int, body: _Body, size: int) -> _Write:
        """One whole-element write ``d[i] = ...`` (or compound) at token ``k``: the elements it writes, by the
        values of its guard's variable. _Skip when its loops, guard or index are not followed."""
        toks, a = self.toks, self.a
        regs = [r for r in body.regions if r.holds(k)]
        if any(r.kind in ("loop", "switch", "forhdr") for r in regs):
            raise _Skip
        loops = self._enclosing_loops(body, k)
        names = {L.decl.name for L in loops.values()}
        guards: list[_Guard] = []
        for r in regs:
            if r.kind not in ("then", "else") or r.cond is None:
                continue
            lo, hi = r.cond
            if not any(
                t.kind == "ident" and (dd := a._lookup(t.text, lo + n)) is not None and id(dd) in loops
                for n, t in enumerate(toks[lo:hi])
            ) and not self._mentions(lo, hi, names):
                continue  # a condition on other things: the write is taken as unconditional (fewer reports)
            g = self._classify(lo, hi, loops, d.pos, min(d.end, body.close)) if r.kind == "then" else None
            if g is None:
                raise _Skip
            guards.append(g)
        if len(guards) > 1:
            raise _Skip
        guard = guards[0] if guards else None
        fn, used = self._index(k + 2, rb, k, loops)
        if fn is None:
            raise _Skip
        if guard is not None and id(guard.var) not in {id(L.decl) for L in used}:
            used.append(loops[id(guard.var)])
        covers: dict[int, list[int | None]] = {}
        for env in self._combos(used):
            try:
                v = fn(env)
            except _Unknown:
                raise _Skip from None
            if 0 <= v < size:
                covers.setdefault(v, []).append(None if guard is None else env[guard.var.name])
        return _Write(k, end, toks[k].line, guard, covers)

    def _index(self, lo: int, hi: int, at: int, loops: dict[int, _Loop]) -> tuple[Callable | None, list[_Loop]]:
        """The index tokens [lo, hi) compiled over the constant loops' variables, and the loops it uses."""
        a = self.a
        by_name: dict[str, _Loop] = {}

        def resolve(name: str) -> int | str | None:
            dd = a._lookup(name, at)
            if dd is not None and id(dd) in loops:
                by_name[name] = loops[id(dd)]
                return name
            return a.fallback.get(name) if dd is None else dd.value

        expr = _Expr(self.toks[lo:hi], resolve)
        try:
            fn = expr.parse()
        except _Unknown:
            return None, []
        return fn, sorted((by_name[n] for n in expr.vars), key=lambda L: L.start)

    def _combos(self, used: list[_Loop]) -> list[dict[str, int]]:
        total = 1
        for L in used:
            total *= len(L.values or [])
        if total > _MAX_EVALS or len({L.decl.name for L in used}) != len(used):
            raise _Skip
        names = [L.decl.name for L in used]
        return [dict(zip(names, combo)) for combo in itertools.product(*[L.values or [] for L in used])]

    def _read(self, d: _Decl, k: int, rb: int, body: _Body, size: int, writes: list[_Write], e: str | None):
        """The finding for the read ``d[...]`` at token ``k``, or None (initialised, or not followed)."""
        toks, a = self.toks, self.a
        regs = [r for r in body.regions if r.holds(k)]
        if any(r.kind in ("loop", "switch") for r in regs):
            return None
        lo = k - 1
        while lo > body.open and toks[lo].text not in (";", "{", "}"):
            lo -= 1
        hi = k
        while hi < body.close and toks[hi].text not in (";", "{", "}"):
            hi += 1
        if any(t.text in ("?", "&&", "||") for t in toks[lo + 1 : hi]):
            return None
        loops = self._enclosing_loops(body, k)
        e_name = e if e is not None and e.isidentifier() else None
        close = min(d.end, body.close)
        guards: list[_Guard] = []
        constraints: list[tuple[Callable[[int], bool], set[int]]] = []
        for r in regs:
            if r.kind not in ("then", "else") or r.cond is None:
                continue
            clo, chi = r.cond
            g = self._classify(clo, chi, loops, d.pos, close) if r.kind == "then" else None
            if g is not None and g.e == e:
                guards.append(g)
                continue
            c = self._constraint(clo, chi, e_name) if e_name else None
            if c is None:
                return None
            constraints.append(c if r.kind == "then" else ((lambda x, f=c[0]: not f(x)), c[1]))
        # early exits: before the read, or anywhere in a loop around it
        relevant = {L.decl.name for L in loops.values()}
        if e is not None:
            relevant |= set(e.split()) - set("+-*/%().") - {"->", "::"}
        for x in body.exits:
            around = [r for r in body.regions if r.kind in ("cfor", "loop") and r.holds(x) and r.holds(k)]
            if x >= k and not around:
                continue
            if toks[x].text in ("break", "continue"):
                kinds = ("cfor", "loop", "switch") if toks[x].text == "break" else ("cfor", "loop")
                targets = [r for r in body.regions if r.kind in kinds and r.holds(x)]
                if not targets:
                    return None
                target = max(targets, key=lambda r: r.lo)
                if target.holds(k):
                    return None
                continue
            xregs = [r for r in body.regions if r.holds(x) and not r.holds(k) and r.kind != "cfor"]
            if not xregs:
                return None  # an unconditional exit: the read is not reached (or we cannot tell)
            if any(r.kind == "switch" for r in xregs):
                return None
            if not any(r.cond is not None and self._mentions(r.cond[0], r.cond[1], relevant) for r in xregs):
                continue  # an exit on other things: ignored
            if len(xregs) != 1 or xregs[0].kind != "then" or e_name is None or xregs[0].cond is None:
                return None
            c = self._constraint(xregs[0].cond[0], xregs[0].cond[1], e_name)
            if c is None:
                return None
            constraints.append(((lambda v, f=c[0]: not f(v)), c[1]))
        if e is None and (guards or constraints):
            return None
        fn, used = self._index(k + 2, rb, k, loops)
        if fn is None:
            return None
        index_loops = list(used)
        for g in guards:
            if id(g.var) not in {id(L.decl) for L in used}:
                used.append(loops[id(g.var)])
        try:
            envs = self._combos(used)
        except _Skip:
            return None
        earlier = [w for w in writes if w.end < k]
        # candidate values of E: around every value compared with it
        points: set[int] = {0}
        for env in envs:
            points.update(env.values())
        for w in earlier:
            for gvs in w.covers.values():
                points.update(v for v in gvs if v is not None)
        for _, consts in constraints:
            points |= consts
        cands = sorted({p + dlt for p in points for dlt in (-1, 0, 1)} | {min(points) - 2**20, max(points) + 2**20})
        feasible = [x for x in cands if all(f(x) for f, _ in constraints)]
        bad: dict[int, _Write | None] = {}
        for env in envs:
            try:
                v = fn(env)
            except _Unknown:
                return None
            if not 0 <= v < size or v in bad:
                continue
            entries = [(w, gv) for w in earlier for gv in w.covers.get(v, ())]
            if any(gv is None for _, gv in entries):
                continue  # written unconditionally before
            for x in feasible:
                if not all(_CMP[g.op](env[g.var.name], x) for g in guards):
                    continue
                if any(w.guard is not None and _CMP[w.guard.op](gv, x) for w, gv in entries if gv is not None):
                    continue
                bad[v] = max((w for w, _ in entries), key=lambda w: w.pos) if entries else None
                break
        if not bad:
            return None
        guarded = [w for w in bad.values() if w is not None]
        w = max(guarded, key=lambda w: w.pos) if guarded else None
        first = min(writes, key=lambda w: w.pos)
        loops_t = tuple(
            (L.decl.name, L.values[0], L.values[-1], L.line)
            for L in sorted({id(L): L for L in index_loops + used}.values(), key=lambda L: L.start)
            if L.values
        )
        return UninitRead(
            toks[k].line, toks[k].col, d.name, size, d.line, f"{d.name}[{self._text(k + 2, rb)}]",
            w.guard.text if w is not None and w.guard is not None else "",
            w.guard.line if w is not None and w.guard is not None else first.line,
            loops_t, " and ".join(g.text for g in guards), tuple(sorted(bad)),
        )  # fmt: skip
