"""The mutation operators: one declarative object per operator (id, one-sentence purpose, site finder),
listed in one registry in a fixed order.

Each operator looks at the tokens of the bodies a kernel reaches (:mod:`audit.cuda.scope`) and yields
*sites*: the token the mutation is named after and the text edits that make the mutant. Nothing here
compiles or runs anything; a site that turns out not to compile is a *stillborn* mutant, dropped later.

>>> [op.id for op in OPERATORS]
['aor', 'ror', 'loop', 'guard', 'jump', 'accum', 'sync', 'norm', 'clamp', 'const', 'swap']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from ..cuda.scope import Source
from ..cuda.tokens import Token

_TYPE_WORDS = frozenset(
    "void bool char short int long float double signed unsigned size_t ptrdiff_t intptr_t uintptr_t auto const "
    "volatile __restrict__ __restrict restrict half __half __nv_bfloat16 nv_bfloat16 dim3 struct union class "
    "typename".split()
)
_VECTOR_TYPE = re.compile(r"^(u?(char|short|int|long|longlong)|float|double|half|bfloat16)[1-4]$")
_NOT_OPERANDS = frozenset("return case else do throw new delete typedef goto co_return co_yield sizeof".split())
# barriers and memory ordering: __syncthreads, __syncwarp, cluster.sync, named-barrier helpers, fences,
# and the cp.async group commit/wait pair of a copy pipeline
_SYNC_CALLEE = re.compile(r"(?i)(^__sync|^sync$|barrier|fence|cp_async_wait|cp_async_commit)")
_CLAMPS = frozenset({"fmaxf", "fminf", "fmax", "fmin", "max", "min"})
_FMAS = frozenset({"fmaf", "fma", "__fmaf_rn", "__fma_rn"})
_ACCUMULATING_CALLS = frozenset({"atomicAdd"})


@dataclass(frozen=True)
class Edit:
    """Replace source[start:end] by ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Site:
    """One mutation: the token it is named after (line and column), its edits and a short description."""

    token: Token
    edits: tuple[Edit, ...]
    what: str


@dataclass
class Context:
    """What an operator sees: the parsed source, the token indices it may mutate, the float variables of
    the file and the runtime dims (batch-size scalars) of the contracts."""

    src: Source
    indices: list[int]
    runtime_dims: tuple[str, ...] = ("B",)
    entry_params: frozenset[str] = frozenset()
    mutable: set[int] = field(default_factory=set)
    float_names: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.mutable = set(self.indices)
        toks = self.src.tokens
        for i, t in enumerate(toks[:-1]):
            if t.text in ("float", "double"):
                j = i + 1
                while j < len(toks) and toks[j].text in ("const", "*", "&", "__restrict__"):
                    j += 1
                if j < len(toks) and toks[j].kind == "ident":
                    self.float_names.add(toks[j].text)

    @property
    def tokens(self) -> list[Token]:
        return self.src.tokens

    def tok(self, i: int) -> Token | None:
        return self.src.tokens[i] if 0 <= i < len(self.src.tokens) else None

    def text(self, i: int, j: int) -> str:
        """Source text from token ``i`` to token ``j`` inclusive."""
        return self.src.text[self.tokens[i].start : self.tokens[j].end]

    # -- expression shapes ------------------------------------------------------------------------------
    def is_type_word(self, t: Token | None) -> bool:
        return t is not None and t.kind == "ident" and (
            t.text in _TYPE_WORDS or t.text in self.src.structs or t.text.endswith("_t") or bool(_VECTOR_TYPE.match(t.text))
        )

    def is_cast_close(self, i: int) -> bool:
        """Token ``i`` is the ``)`` of a C cast such as ``(float)`` or ``(const float*)``."""
        t = self.tok(i)
        if t is None or t.text != ")" or i not in self.src.match:
            return False
        inner = self.tokens[self.src.match[i] + 1 : i]
        return bool(inner) and any(self.is_type_word(x) for x in inner) and all(
            self.is_type_word(x) or x.text in ("*", "&", "::") for x in inner
        )

    def is_binary(self, i: int) -> bool:
        """Token ``i`` (``+ - * /``) is a binary operator, not a sign, a dereference or a pointer declarator."""
        prev, nxt = self.tok(i - 1), self.tok(i + 1)
        if prev is None or nxt is None or i in self.src.template_brackets:
            return False
        if prev.kind == "ident":
            if prev.text in _NOT_OPERANDS or (self.tokens[i].text == "*" and self.is_type_word(prev)):
                return False
        elif prev.kind in ("number", "string", "char"):
            pass
        elif prev.text == "]" or (prev.text == ")" and not self.is_cast_close(i - 1)):
            pass
        else:
            return False
        if self.tokens[i].text == "*" and (nxt.text in ("const", "__restrict__", ")", ">", ",") or self.is_type_word(nxt) and nxt.text in _TYPE_WORDS):
            return False
        return True

    def operand_back(self, j: int) -> int | None:
        """Start index of the postfix expression (with a leading cast) that ends at token ``j``."""
        toks = self.tokens
        k = j
        while True:
            t = self.tok(k)
            if t is None:
                return None
            if t.text in (")", "]") and k in self.src.match:
                k = self.src.match[k]
                before = self.tok(k - 1)
                if before is not None and (before.kind == "ident" and before.text not in _NOT_OPERANDS and not self.is_type_word(before) or before.text in ("]", ")")) and not self.is_cast_close(k - 1):
                    k -= 1
                    continue
            elif t.kind in ("ident", "number"):
                if t.kind == "ident" and (t.text in _NOT_OPERANDS or self.is_type_word(t)):
                    return None
                sep = self.tok(k - 1)
                if sep is not None and sep.text in (".", "->", "::") and self.tok(k - 2) is not None and (toks[k - 2].kind == "ident" or toks[k - 2].text in (")", "]")):
                    k -= 2
                    continue
            else:
                return None
            break
        if self.is_cast_close(k - 1):
            k = self.src.match[k - 1]
        return k

    def operand_forward(self, i: int) -> int | None:
        """End index of the postfix expression (a cast allowed in front) that starts at token ``i``."""
        t = self.tok(i)
        if t is None:
            return None
        if t.text == "(" and i in self.src.match:
            close = self.src.match[i]
            if self.is_cast_close(close):
                return self.operand_forward(close + 1)
            k = close
        elif t.kind in ("ident", "number") and not (t.kind == "ident" and (t.text in _NOT_OPERANDS or self.is_type_word(t))):
            k = i
        else:
            return None
        while True:
            nxt = self.tok(k + 1)
            if nxt is None:
                return k
            if nxt.text in ("(", "[") and k + 1 in self.src.match:
                k = self.src.match[k + 1]
            elif nxt.text == "<" and k + 1 in self.src.template_brackets:
                close = next(c for c in sorted(self.src.template_brackets) if c > k + 1 and self.tokens[c].text in (">", ">>"))
                k = close
            elif nxt.text in (".", "->", "::") and self.tok(k + 2) is not None and self.tokens[k + 2].kind == "ident":
                k += 2
            else:
                return k

    def call_args(self, open_paren: int) -> list[tuple[int, int]]:
        """(first, last) token indices of each top-level argument of the call whose ``(`` is at ``open_paren``."""
        close = self.src.match.get(open_paren)
        if close is None or close == open_paren + 1:
            return []
        args, start, k = [], open_paren + 1, open_paren + 1
        while k < close:
            x = self.tokens[k].text
            if x in ("(", "[", "{") and k in self.src.match:
                k = self.src.match[k]
            elif x == "<" and k in self.src.template_brackets:
                k = next(c for c in sorted(self.src.template_brackets) if c > k and self.tokens[c].text in (">", ">>"))
            elif x == ",":
                args.append((start, k - 1))
                start = k + 1
            k += 1
        args.append((start, close - 1))
        return args

    def statement_end(self, i: int) -> int | None:
        """Last token index of the statement starting at token ``i``."""
        t = self.tok(i)
        if t is None:
            return None
        if t.text == "{":
            return self.src.match.get(i)
        if t.text in ("if", "for", "while", "switch") and self.tok(i + 1) is not None and self.tokens[i + 1].text == "(":
            close = self.src.match.get(i + 1)
            if close is None:
                return None
            end = self.statement_end(close + 1)
            if t.text == "if" and end is not None and self.tok(end + 1) is not None and self.tokens[end + 1].text == "else":
                return self.statement_end(end + 2)
            return end
        if t.text == "do":
            body = self.statement_end(i + 1)
            return None if body is None else self.statement_end(body + 1)
        k = i
        while k < len(self.tokens):
            x = self.tokens[k].text
            if x in ("(", "[", "{") and k in self.src.match:
                k = self.src.match[k]
            elif x == ";":
                return k
            elif x == "}":
                return None
            k += 1
        return None

    def is_statement_start(self, i: int) -> bool:
        """Token ``i`` begins a statement inside a block (not the direct body of an if, else or loop)."""
        prev = self.tok(i - 1)
        return prev is not None and prev.text in (";", "{", "}")


# -- the operators ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operator:
    """One mutation operator: stable ``id``, one-sentence ``purpose``, and its site finder."""

    id: str
    purpose: str
    example: str
    sites: Callable[[Context], Iterator[Site]]


def _replace(t: Token, text: str) -> tuple[Edit, ...]:
    return (Edit(t.start, t.end, text),)


def _aor(ctx: Context) -> Iterator[Site]:
    swap = {"+": "-", "-": "+", "*": "/", "/": "*"}
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.kind == "punct" and t.text in swap and ctx.is_binary(i):
            yield Site(t, _replace(t, swap[t.text]), f"{t.text} -> {swap[t.text]}")


def _ror(ctx: Context) -> Iterator[Site]:
    swap = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.kind == "punct" and t.text in swap and i not in ctx.src.template_brackets:
            yield Site(t, _replace(t, swap[t.text]), f"{t.text} -> {swap[t.text]}")


def _loop(ctx: Context) -> Iterator[Site]:
    """The bound of a loop condition ``i < n`` moved by one: ``i < n - 1`` (``i > n`` -> ``i > n + 1``)."""
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.text not in ("for", "while") or ctx.tok(i + 1) is None or ctx.tokens[i + 1].text != "(":
            continue
        close = ctx.src.match.get(i + 1)
        if close is None:
            continue
        semis = [k for k in range(i + 2, close) if ctx.tokens[k].text == ";" and _depth0(ctx, i + 2, k)]
        if t.text == "for":
            if len(semis) != 2:
                continue
            lo, hi = semis[0] + 1, semis[1] - 1
        else:
            lo, hi = i + 2, close - 1
        if hi < lo:
            continue
        comps = [k for k in range(lo, hi + 1) if _depth0(ctx, lo, k) and ctx.tokens[k].text in ("<", "<=", ">", ">=") and k not in ctx.src.template_brackets]
        if len(comps) != 1 or any(_depth0(ctx, lo, k) and ctx.tokens[k].text in ("&&", "||", "?", ",") for k in range(lo, hi + 1)):
            continue
        c = comps[0]
        if c + 1 > hi:
            continue
        rhs = ctx.text(c + 1, hi)
        single = c + 1 == hi
        delta = "- 1" if ctx.tokens[c].text in ("<", "<=") else "+ 1"
        new = f"{rhs} {delta}" if single else f"({rhs}) {delta}"
        yield Site(ctx.tokens[c], (Edit(ctx.tokens[c + 1].start, ctx.tokens[hi].end, new),), f"bound {rhs} -> {new}")


def _depth0(ctx: Context, lo: int, k: int) -> bool:
    """Token ``k`` is at bracket depth 0 relative to ``lo``."""
    depth = 0
    for j in range(lo, k):
        x = ctx.tokens[j].text
        if x in ("(", "[", "{"):
            depth += 1
        elif x in (")", "]", "}"):
            depth -= 1
    return depth == 0


def _guard(ctx: Context) -> Iterator[Site]:
    """``if (c) return;`` and early-exit branches deleted; any other ``if`` without ``else`` made unconditional."""
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.text != "if" or ctx.tok(i + 1) is None or ctx.tokens[i + 1].text != "(":
            continue
        close = ctx.src.match.get(i + 1)
        if close is None or close + 1 not in ctx.mutable:
            continue
        end = ctx.statement_end(close + 1)
        if end is None or (ctx.tok(end + 1) is not None and ctx.tokens[end + 1].text == "else"):
            continue
        body = ctx.tokens[close + 1]
        if _ends_in_jump(ctx, close + 1, end):
            yield Site(t, (Edit(t.start, ctx.tokens[end].end, ";"),), f"early exit `if {ctx.text(i + 1, close)}` removed")
        else:
            cut_end = body.start
            yield Site(t, (Edit(t.start, cut_end, ""),), f"guard `if {ctx.text(i + 1, close)}` removed")


def _ends_in_jump(ctx: Context, start: int, end: int) -> bool:
    first = ctx.tokens[start]
    if first.text in ("return", "break", "continue"):
        return True
    if first.text == "{" and end - 1 > start and ctx.tokens[end - 1].text == ";":
        k = end - 2
        while k > start and ctx.tokens[k].text not in (";", "{", "}"):
            k -= 1
        return ctx.tokens[k + 1].text in ("return", "break", "continue")
    return False


def _jump(ctx: Context) -> Iterator[Site]:
    """A ``continue;``, ``break;`` or bare ``return;`` statement of a block removed (never a no-op one at the
    end of a loop body or of the function)."""
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.text not in ("continue", "break", "return") or ctx.tok(i + 1) is None or ctx.tokens[i + 1].text != ";":
            continue
        if not ctx.is_statement_start(i):
            continue
        after = ctx.tok(i + 2)
        if after is not None and after.text == "}" and (i + 2 not in ctx.mutable or (t.text == "continue" and _closes_loop_body(ctx, i + 2))):
            continue  # the last statement of the function, or a continue that ends its loop body: a no-op
        yield Site(t, (Edit(t.start, t.end, ""),), f"`{t.text};` removed")


def _closes_loop_body(ctx: Context, close: int) -> bool:
    open_ = ctx.src.match.get(close)
    if open_ is None or ctx.tok(open_ - 1) is None or ctx.tokens[open_ - 1].text != ")":
        return False
    head = ctx.src.match.get(open_ - 1)
    return head is not None and ctx.tok(head - 1) is not None and ctx.tokens[head - 1].text in ("for", "while")


def _accum(ctx: Context) -> Iterator[Site]:
    """An accumulation turned into an overwrite: ``+=`` -> ``=``, ``fmaf(a, b, c)`` -> ``a * b``,
    ``atomicAdd(p, v)`` -> ``*p = v``."""
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.text in ("+=", "-="):
            yield Site(t, _replace(t, "="), f"{t.text} -> =")
        elif t.kind == "ident" and ctx.tok(i + 1) is not None and ctx.tokens[i + 1].text == "(" and ctx.tok(i - 1) is not None and ctx.tokens[i - 1].text not in (".", "->"):
            args = ctx.call_args(i + 1)
            close = ctx.src.match.get(i + 1)
            if t.text in _FMAS and len(args) == 3:
                a, b = ctx.text(*args[0]), ctx.text(*args[1])
                yield Site(t, (Edit(t.start, ctx.tokens[close].end, f"({a}) * ({b})"),), f"{t.text}(a, b, c) -> a * b")
            elif t.text in _ACCUMULATING_CALLS and len(args) == 2:
                p, v = ctx.text(*args[0]), ctx.text(*args[1])
                yield Site(t, (Edit(t.start, ctx.tokens[close].end, f"(*({p}) = ({v}))"),), f"{t.text}(p, v) -> *p = v")


def _sync(ctx: Context) -> Iterator[Site]:
    """A barrier or memory-ordering call statement removed (``__syncthreads();``, ``cluster.sync();``,
    ``cp_async_wait<N>();``, ``cp_async_commit();``, a named-barrier helper)."""
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.kind != "ident" or not _SYNC_CALLEE.search(t.text):
            continue
        k = i + 1
        if ctx.tok(k) is not None and ctx.tokens[k].text == "<" and k in ctx.src.template_brackets:
            k = next(c for c in sorted(ctx.src.template_brackets) if c > k and ctx.tokens[c].text in (">", ">>")) + 1
        if ctx.tok(k) is None or ctx.tokens[k].text != "(":
            continue
        close = ctx.src.match.get(k)
        if close is None or ctx.tok(close + 1) is None or ctx.tokens[close + 1].text != ";":
            continue
        start = i
        while ctx.tok(start - 1) is not None and ctx.tokens[start - 1].text in (".", "->", "::") and ctx.tok(start - 2) is not None and ctx.tokens[start - 2].kind == "ident":
            start -= 2
        prev = ctx.tok(start - 1)
        if prev is None or prev.text not in (";", "{", "}", ")", "else"):
            continue
        yield Site(t, (Edit(ctx.tokens[start].start, ctx.tokens[close].end, ""),), f"`{ctx.text(start, close)};` removed")


def _norm(ctx: Context) -> Iterator[Site]:
    """A normaliser changed: a float division's divisor dropped (``x / (float)n`` -> ``x``, ``1.0f / s`` ->
    ``1.0f``), or an integer count in it replaced by the batch size (``/ (float)b_valid`` -> ``/ (float)B``)."""
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.text != "/" or not ctx.is_binary(i):
            continue
        end = ctx.operand_forward(i + 1)
        if end is None:
            continue
        divisor = ctx.tokens[i + 1 : end + 1]
        names = [x for x in divisor if x.kind == "ident" and not ctx.is_type_word(x)]
        cast_float = ctx.tokens[i + 1].text == "(" and any(x.text in ("float", "double") for x in divisor[:4])
        float_div = cast_float or any(x.text in ctx.float_names for x in names) or _is_float_literal(ctx.tokens[i - 1])
        if not float_div:
            continue
        yield Site(t, (Edit(ctx.tokens[i - 1].end, ctx.tokens[end].end, ""),), f"`/ {ctx.text(i + 1, end)}` removed")
        ints = [x for x in names if x.text not in ctx.float_names]
        batch = next((d for d in ctx.runtime_dims if d in ctx.entry_params), None)
        if batch and len(ints) == 1 and ints[0].text != batch and cast_float:
            x = ints[0]
            # the whole indexed or called operand goes: "(float)valid_count[0]" -> "(float)B"
            last = ctx.operand_forward(divisor.index(x) + i + 1) or (divisor.index(x) + i + 1)
            yield Site(t, (Edit(x.start, ctx.tokens[last].end, batch),), f"divisor {ctx.text(divisor.index(x) + i + 1, last)} -> {batch}")


def _clamp(ctx: Context) -> Iterator[Site]:
    """A clamp dropped: ``fmaxf(x, c)`` -> ``x`` (likewise ``fminf``, ``max``, ``min``)."""
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.kind != "ident" or t.text not in _CLAMPS or ctx.tok(i + 1) is None or ctx.tokens[i + 1].text != "(":
            continue
        if ctx.tok(i - 1) is not None and ctx.tokens[i - 1].text in (".", "->"):
            continue
        args = ctx.call_args(i + 1)
        if len(args) != 2:
            continue
        close = ctx.src.match[i + 1]
        yield Site(t, (Edit(t.start, ctx.tokens[close].end, f"({ctx.text(*args[0])})"),), f"{t.text}(x, c) -> x")


def _is_float_literal(t: Token | None) -> bool:
    if t is None or t.kind != "number" or t.text.lower().startswith("0x"):
        return False
    s = t.text.lower()
    return "." in s or "e" in s.rstrip("f") or s.endswith("f")


def _scaled(text: str, factor: Decimal) -> str | None:
    suffix = ""
    body = text
    while body and body[-1] in "fFlL":
        suffix = body[-1] + suffix
        body = body[:-1]
    try:
        v = Decimal(body)
    except InvalidOperation:
        return None
    if v == 0:
        return None
    s = format((v * factor).normalize(), "f" if 1e-4 <= abs(v * factor) < 1e7 else "e")
    if "." not in s and "e" not in s.lower():
        s += ".0"
    return s + suffix


def _const(ctx: Context) -> Iterator[Site]:
    """A non-zero floating-point constant multiplied and divided by 10."""
    for i in ctx.indices:
        t = ctx.tokens[i]
        if not _is_float_literal(t):
            continue
        for factor, word in ((Decimal(10), "x10"), (Decimal("0.1"), "/10")):
            new = _scaled(t.text, factor)
            if new is not None and new != t.text:
                yield Site(t, _replace(t, new), f"{t.text} -> {new} ({word})")


def _swap(ctx: Context) -> Iterator[Site]:
    """The operands of a whole ``a - b`` or ``a / b`` swapped (only where both are simple operands)."""
    stops_before = {"(", ",", "=", "?", ":", "[", "return", "+=", "-=", "*=", "/=", "{"}
    stops_after = {")", ",", ";", "]", "?", ":", "}"}
    for i in ctx.indices:
        t = ctx.tokens[i]
        if t.text not in ("-", "/") or not ctx.is_binary(i):
            continue
        a0 = ctx.operand_back(i - 1)
        b1 = ctx.operand_forward(i + 1)
        if a0 is None or b1 is None:
            continue
        before, after = ctx.tok(a0 - 1), ctx.tok(b1 + 1)
        if before is None or after is None or before.text not in stops_before or after.text not in stops_after:
            continue
        if before.text == "(" and ctx.is_cast_close(ctx.src.match.get(a0 - 1, -1)):
            continue
        a, b = ctx.text(a0, i - 1), ctx.text(i + 1, b1)
        if a == b:
            continue
        gap_l = ctx.src.text[ctx.tokens[i - 1].end : t.start]
        gap_r = ctx.src.text[t.end : ctx.tokens[i + 1].start]
        yield Site(t, (Edit(ctx.tokens[a0].start, ctx.tokens[b1].end, f"{b}{gap_l}{t.text}{gap_r}{a}"),), f"{a} {t.text} {b} -> {b} {t.text} {a}")


OPERATORS: tuple[Operator, ...] = (
    Operator("aor", "Arithmetic operator replaced: binary + <-> -, * <-> /.", "a * b -> a / b", _aor),
    Operator("ror", "Comparison replaced: < <-> <=, > <-> >=, == <-> !=.", "i < n -> i <= n", _ror),
    Operator("loop", "Loop bound moved by one: i < n -> i < n - 1 (i > n -> i > n + 1).", "b < B -> b < B - 1", _loop),
    Operator("guard", "Guard removed: an early-exit branch deleted, or an if without else made unconditional.", "if (row >= B) break; -> ;", _guard),
    Operator("jump", "A continue, break or bare return statement of a block removed.", "continue; -> ;", _jump),
    Operator("accum", "Accumulation made an overwrite: += -> =, fmaf(a, b, c) -> a * b, atomicAdd(p, v) -> *p = v.", "acc += v -> acc = v", _accum),
    Operator("sync", "A barrier or memory-ordering call removed (__syncthreads, cluster.sync, cp.async commit or wait).", "__syncthreads(); -> ;", _sync),
    Operator("norm", "A normaliser changed: a float division's divisor dropped or its count replaced by the batch size.", "dl / (float)b_valid -> dl / (float)B", _norm),
    Operator("clamp", "A clamp dropped: fmaxf(x, c) -> x (fminf, max, min likewise).", "fmaxf(m, l) -> m", _clamp),
    Operator("const", "A non-zero floating-point constant multiplied or divided by 10.", "2.0f -> 20.0f", _const),
    Operator("swap", "Operands of a whole non-commutative a - b or a / b swapped.", "p - onehot -> onehot - p", _swap),
)
OPERATOR_MAP = {op.id: op for op in OPERATORS}
