"""Constant-bound ``for`` loops that index a fixed-size local or ``__shared__`` array out of bounds.

nvcc treats such an access as undefined behaviour: it may drop the store or read an undefined register, so no
run-time check can see it. This check is static and source-level: every ``NAME[...]`` use of a function-local
array of constant extents has its index evaluated over the values that the enclosing constant-bound loops give
their variables, and each index that leaves ``[0, extent)`` is reported. A local object of an array class template
(``std::array<T, N>``, ``cutlass::Array<T, N>``, ``cutlass::AlignedArray``, ``cute::array``) is such an array of
its second template argument's extent. Anything it cannot evaluate (a run-time
bound, a template extent, another name in the index, a guard comparing the loop variable) is skipped.

The thread index may be part of an index (``s[d * BS + threadIdx.x % BS]``, directly or through a variable
initialised to an expression of it and never assigned again): ``threadIdx.x % C`` (C a positive constant)
is evaluated over ``0 .. C - 1``, the values it takes in any block of at least C threads; any other use of
``threadIdx.x`` (``threadIdx.x / C``, ``threadIdx.x`` itself) only over the block of a kernel whose
contract gives its x extent (an :class:`Instance`). A use whose thread term is neither, or that a condition
on the thread index may keep some threads from (an ``if``/``while``/``for`` around it, an earlier ``if``
that returns, a ``?`` in its statement), is skipped. A template kernel's extents are evaluated with the
non-type template arguments of the instantiation its contract names (``cpp_name = "tile<32>"``): each
:class:`Instance` has its function read once more with them bound; a template no contract instantiates
keeps its unknown extents (only the symbolic ``v <= E`` over ``a[E]`` is reported there).

>>> src = ('constexpr int kN = 4;\\n__global__ void k(float* o) {\\n    float v[kN];\\n'
...        '    for (int i = 0; i <= kN; ++i) v[i] = o[i];\\n}\\n')
>>> [(o.line, o.array, o.size, o.index, o.low, o.high, o.loops) for o in find_overruns(src)]
[(4, 'v', 4, 'i', 0, 4, (('i', 0, 4, 4),))]
>>> find_overruns(src)[0].message("k.cu")[:60]
'k.cu:4: "v[i]" indexes the local array "v" of 4 elements (de'
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .scope import Source
from .tokens import Token, TokenizeError, define_value, tokenize

_MAX_EVALS = 100_000  # index evaluations per use, iterations per loop; above it the use is skipped
_NOT_DECL = frozenset(
    "return case goto throw delete using typedef else do if for while switch break continue default asm "
    "static_assert co_return co_yield co_await".split()
)
_KEYWORDS = _NOT_DECL | frozenset(
    "const constexpr static extern inline volatile register mutable unsigned signed int long short char bool "
    "float double void auto struct class union enum namespace template typename operator sizeof new this "
    "true false nullptr __shared__ __device__ __global__ __host__ __forceinline__ __constant__ __restrict__".split()
)
_ATTRS = frozenset("__align__ alignas __attribute__ __declspec __launch_bounds__ __cluster_dims__".split())
_INT_WORDS = frozenset(
    "int unsigned signed long short char size_t ptrdiff_t int8_t int16_t int32_t int64_t uint8_t uint16_t "
    "uint32_t uint64_t".split()
)
_CONTROL = frozenset("if for while switch catch sizeof decltype alignof return".split())
_AFTER_PARAMS = frozenset("const noexcept override final volatile mutable & &&".split())
_ASSIGN = frozenset("= += -= *= /= %= <<= >>= &= |= ^= ++ --".split())
_GUARD_BEFORE = frozenset("( && || ! ? : , = return".split())  # a comparison of a bare loop variable ...
_GUARD_AFTER = frozenset(") && || ? : , ;".split())  # ... between these tokens is a guard
# class templates whose object is a fixed-size array indexed with [] and whose second template argument is its
# extent: std::array<T, N>, cuda::std::array, cutlass::Array<T, N[, RegisterSized]>, cutlass::AlignedArray<T, N, A>,
# cute::array<T, N> (qualified or not: `using namespace cutlass;` code names them bare)
_ARRAY_TEMPLATES = frozenset(("array", "Array", "AlignedArray"))
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+(.*?)[ \t]*$", re.M)
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "!=": operator.ne,
}  # fmt: skip


@dataclass(frozen=True)
class Instance:
    """A kernel of the contracts as its source defines it: the function's name, the template arguments its
    ``cpp_name`` gives (none: not a template instantiation) and the x extent of its block where every
    launch of it agrees (None: unknown). The checks read that function once more with them known.

    >>> Instance.of("ns::tile_t<32, kN * 2>", 256)
    Instance(function='tile_t', args=('32', 'kN * 2'), block_x=256, label='ns::tile_t<32, kN * 2>')
    """

    function: str
    args: tuple[str, ...] = ()
    block_x: int | None = None
    label: str = ""  # the kernel's cpp_name (or entry) as written, for messages

    @classmethod
    def of(cls, name: str, block_x: int | None = None) -> Instance:
        """The instance that a kernel's ``cpp_name`` (or entry) ``name`` and block x extent describe."""
        head, _, rest = name.partition("<")
        args: list[str] = []
        depth, piece = 0, ""
        for ch in rest.strip().removesuffix(">") if rest else "":
            depth += (ch in "<([") - (ch in ">)]")
            if ch == "," and depth == 0:
                args, piece = [*args, piece.strip()], ""
            else:
                piece += ch
        args += [piece.strip()] if piece.strip() else []
        return cls(head.split("::")[-1].strip(), tuple(args), block_x, name)


@dataclass(frozen=True)
class Overrun:
    """One index of a local array that a constant-bound loop drives out of the array's bounds."""

    line: int  # 1-based line of the offending index expression
    col: int  # 1-based column of the array name at that use
    array: str
    size: int  # declared extent of the dimension indexed
    dim: int  # 0 for the first []
    decl_line: int
    index: str  # the index expression as written, whitespace-normalised
    low: int  # the range the index takes over the loops
    high: int
    loops: tuple[tuple[str, int, int, int], ...]  # (variable, first, last, line of its for), outermost first
    use: str = ""  # the whole use as written, e.g. "acc[r][c]"
    rank: int = 1  # number of dimensions of the array
    shared: bool = False  # a __shared__ array
    extent: str = ""  # the extent as written where it is not evaluated: the loop runs up to it, inclusive
    threads: str = ""  # the thread index's range where the index depends on it, e.g. "threadIdx.x % 32 = 0 .. 31"
    instance: str = ""  # the template instantiation (a kernel's cpp_name) whose arguments the extents need

    def message(self, path: str) -> str:
        """One sentence naming the use, the array, the loop ranges and the worst offending index."""
        worst = self.high if self.high >= self.size else self.low
        dim = f"dimension {self.dim + 1} of " if self.rank > 1 else ""
        if self.extent:
            var, first, _, line = self.loops[0]
            return (
                f'{path}:{self.line}: "{self.use or self.array}" indexes {dim}the {"shared" if self.shared else "local"} '
                f'array "{self.array}" of {self.extent} elements (declared at line {self.decl_line}) with {var} = {first} '
                f"up to {self.extent} inclusive (the loop at line {line}): index {self.extent} is out of bounds whatever "
                "its value, undefined behaviour the compiler may hide."
            )
        parts = [
            f"{var} = {first}" + (f" .. {last}" if last != first else "") + f" (the loop at line {line})"
            for var, first, last, line in self.loops
        ]
        parts += [self.threads] if self.threads else []
        ranges = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)
        where = f' in "{self.instance}"' if self.instance else ""
        return (
            f'{path}:{self.line}: "{self.use or self.array}" indexes {dim}the {"shared" if self.shared else "local"} '
            f'array "{self.array}" of {self.size} element{"s" if self.size != 1 else ""} (declared at line '
            f"{self.decl_line}){where} with {ranges}: index {worst} is out of bounds, undefined behaviour the "
            "compiler may hide."
        )


def find_overruns(text: str, constants: Mapping[str, int] | None = None, instances: Sequence[Instance] = ()) -> list[Overrun]:
    """The out-of-bounds loop indices of one source text, sorted by (line, col) and deduplicated.

    ``constants`` are integer constants known from the headers it includes (see :func:`integer_constants`);
    the text's own ``#define`` constants join them, and a name given two values is dropped. Each of
    ``instances`` (the kernels the contracts define in it) has its function read once more with its
    template arguments and block extent known. A source that cannot be tokenized raises
    :class:`~audit.cuda.tokens.TokenizeError`.
    """
    found = {(o.line, o.col, o.dim): o for o in analysis(text, constants).overruns()}
    for inst in instances:
        for o in analysis(text, constants, inst).overruns():
            found.setdefault((o.line, o.col, o.dim), o)
    return [found[key] for key in sorted(found)]


def integer_constants(text: str, known: Mapping[str, int] | None = None) -> dict[str, int]:
    """The compile-time integer constants that ``text`` defines, at any scope, by name.

    ``constexpr`` / ``const`` integer declarations with a constant initialiser and object-like ``#define``
    macros with an integer constant expression; a name defined twice with different values (or once
    without a constant value) is left out. ``known`` (constants of included headers) may appear in the
    expressions but is not part of the result.
    """
    return dict(_integer_constants(text, _key(known)))


def _key(constants: Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((constants or {}).items()))


@functools.lru_cache(maxsize=256)
def _integer_constants(text: str, known_items: tuple[tuple[str, int], ...]) -> dict[str, int]:
    """:func:`integer_constants`, once per (text, known constants): a header included by several sources
    is read once per run."""
    known = dict(known_items)
    macros = _macros(text, known)
    values: dict[str, set[int | None]] = {name: {value} for name, value in macros.items()}
    for decls in _analysis(text, _key(_merge(macros, known))).decls.values():
        for d in decls:
            if d.const_int:
                values.setdefault(d.name, set()).add(d.value)
    return {name: v for name, vs in values.items() if len(vs) == 1 and (v := next(iter(vs))) is not None}


def included_constants(path: Path, include_dirs: Sequence[Path]) -> dict[str, int]:
    """The integer constants of the local headers that ``path`` includes (transitively), in include order;
    raises OSError when a header cannot be read."""
    from ..hashing import include_closure
    from ..untrusted import SOURCE_LIMIT, read_regular

    constants: dict[str, int] = {}
    for header in include_closure(path, include_dirs):
        if header != path.resolve():
            constants.update(integer_constants(read_regular(header, SOURCE_LIMIT).decode("utf-8", errors="replace"), constants))
    return constants


def analysis(text: str, constants: Mapping[str, int] | None = None, instance: Instance | None = None) -> _Analysis:
    """The analysis of one source text with the constants of its headers (``constants``) and its own
    ``#define`` constants known, built once per (text, constants, instance): LOCAL_ARRAY_BOUNDS and
    LOCAL_UNINIT_READ read the same one. With ``instance``, its uses are those of the instance's function,
    read with its template arguments and block extent. Nothing changes an analysis after it is built."""
    consts = constants or {}
    return _analysis(text, _key(_merge(_macros(text, consts), consts)), instance)


@functools.lru_cache(maxsize=128)
def _analysis(text: str, fallback_items: tuple[tuple[str, int], ...], instance: Instance | None = None) -> _Analysis:
    return _Analysis(text, dict(fallback_items), instance)


def _macros(text: str, known: Mapping[str, int]) -> dict[str, int | None]:
    """Object-like ``#define NAME EXPR`` macros of ``text``: value, or None (not constant, or ambiguous)."""
    out: dict[str, int | None] = {}
    for m in _DEFINE.finditer(text):
        env = {**known, **{k: v for k, v in out.items() if v is not None}}
        try:
            text = define_value(m.group(2))
            value = None if text.endswith("\\") else _Expr(tokenize(text), env.get).parse()({})
        except (_Unknown, TokenizeError):
            value = None
        out[m.group(1)] = value if out.get(m.group(1), value) == value else None
    return out


def _merge(*maps: Mapping[str, int | None]) -> dict[str, int]:
    """The names that every map giving them agrees on (a name with two values, or None, is dropped)."""
    out: dict[str, int | None] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = v if out.get(k, v) == v else None
    return {k: v for k, v in out.items() if v is not None}


class _Unknown(Exception):
    """An expression the evaluator does not handle, or an undefined operation (division by zero)."""


def _qualified_name(words: list[str]) -> bool:
    """Whether declaration words are one (possibly ``::``-qualified) name after storage and cv words only:
    ``const cutlass :: Array``, not ``Foo <> :: Array`` or a pointer."""
    rest = [w for w in words if w not in ("const", "constexpr", "static", "volatile", "register", "__shared__")]
    return bool(rest) and all(w.isidentifier() if k % 2 == (rest[0] == "::") else w == "::" for k, w in enumerate(rest))


def _div(a: int, b: int) -> int:
    if b == 0:
        raise _Unknown
    return abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1)  # C: truncates toward zero


def _shift(a: int, b: int, left: bool) -> int:
    if not 0 <= b < 64:
        raise _Unknown
    return a << b if left else a >> b


_BINARY: dict[str, Callable[[int, int], int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div, "%": lambda a, b: a - b * _div(a, b),
    "<<": lambda a, b: _shift(a, b, True), ">>": lambda a, b: _shift(a, b, False),
}  # fmt: skip
_LEVELS = (("<<", ">>"), ("+", "-"), ("*", "/", "%"))
_Fn = Callable[[Mapping[str, int]], int]


def _number(text: str) -> int:
    t = text.replace("'", "").rstrip("uUlL").lower()
    try:
        if t.startswith(("0x", "0b")):
            return int(t[2:], 16 if t[1] == "x" else 2)
        return int(t, 8) if len(t) > 1 and t.startswith("0") else int(t)
    except ValueError:  # a floating-point literal
        raise _Unknown from None


TID = "threadIdx.x"  # the name an _Expr resolver is asked for ``threadIdx.x``; its value's key in an environment


@dataclass(frozen=True)
class _Thread:
    """A variable initialised to an expression of ``threadIdx.x`` and never assigned again (``tx =
    threadIdx.x % BS``): its value as a function of the environment's :data:`TID`, with the uses of the
    thread index it makes (see :class:`_Expr`)."""

    fn: Callable[[Mapping[str, int]], int]
    bare: int
    mods: tuple[int, ...]


class _Expr:
    """A tiny integer expression parser (C precedence and division) compiling tokens to a closure over the
    loop variables' values; ``resolve`` maps a name to its constant value, to a loop variable (its name), to
    a :class:`_Thread`, or to None (unknown: so is the whole expression). ``threadIdx.x`` is resolved as
    :data:`TID`. ``bare`` counts the uses of the thread index that are not the left operand of ``% C``
    (a positive constant), ``mods`` holds those C: an expression with ``bare == 0`` takes, over the threads
    of a block of at least ``max(mods)`` threads, exactly the values it takes for ``threadIdx.x`` in
    ``range(max(mods))``."""

    def __init__(self, toks: list[Token], resolve: Callable[[str], int | str | _Thread | None]) -> None:
        self.toks, self.i, self.resolve, self.vars = toks, 0, resolve, set[str]()
        self.bare, self.mods, self.uses = 0, list[int](), 0
        self.tid_span: tuple[int, int] | None = None  # the tokens of the last bare thread index parsed

    def parse(self) -> _Fn:
        fn = self._binary(0)
        if self.i != len(self.toks):
            raise _Unknown
        return fn

    def _next(self, *texts: str) -> str | None:
        """Consume and return the next token's text when it is one of ``texts``."""
        if self.i < len(self.toks) and self.toks[self.i].text in texts and self.toks[self.i].kind == "punct":
            self.i += 1
            return self.toks[self.i - 1].text
        return None

    def _binary(self, level: int) -> _Fn:
        if level == len(_LEVELS):
            return self._unary()
        start = self.i
        fn = self._binary(level + 1)
        while (op := self._next(*_LEVELS[level])) is not None:
            tid_left = op == "%" and self.tid_span == (start, self.i - 1)
            uses, bare = self.uses, self.bare
            g = self._binary(level + 1)
            if tid_left and self.uses == uses and self.bare == bare:
                c = g({})
                if c > 0:  # threadIdx.x % C, C constant: in [0, C) whatever the block
                    self.mods.append(c)
                    self.bare -= 1
            fn = lambda e, f=fn, g=g, op=_BINARY[op]: op(f(e), g(e))  # noqa: E731
        return fn

    def _unary(self) -> _Fn:
        if (sign := self._next("-", "+")) is not None:
            inner = self._unary()
            return (lambda e: -inner(e)) if sign == "-" else inner
        start = self.i
        if self._next("("):
            fn, end = self._binary(0), self.i
            if not self._next(")"):
                raise _Unknown
            if self.tid_span == (start + 1, end):  # (threadIdx.x): still the bare thread index
                self.tid_span = (start, self.i)
            return fn
        if self.i >= len(self.toks):
            raise _Unknown
        t = self.toks[self.i]
        self.i += 1
        texts = [x.text for x in self.toks[self.i : self.i + 2]]
        if t.text == "threadIdx" and texts == [".", "x"]:
            self.i += 2
            resolved = self.resolve(TID)
        else:
            resolved = _number(t.text) if t.kind == "number" else self.resolve(t.text) if t.kind == "ident" else None
        if isinstance(resolved, _Thread):
            self.vars.add(TID)
            self.uses += 1
            self.bare += resolved.bare
            self.mods += resolved.mods
            return resolved.fn
        if isinstance(resolved, str):
            self.vars.add(resolved)
            if resolved == TID:
                self.bare += 1
                self.tid_span = (start, self.i)
            else:
                self.uses += 1
            return lambda e: e[resolved]
        if resolved is None:
            raise _Unknown
        return lambda e: resolved


@dataclass
class _Decl:
    """A declared name visible over the token indices (pos, end]: a function-local array of constant extents
    when ``extents`` is set, a constant integer when ``value`` is."""

    name: str
    pos: int
    end: int
    line: int
    extents: tuple[int, ...] | None = None
    shared: bool = False
    const_int: bool = False
    value: int | None = None
    texts: tuple[str, ...] | None = None  # each extent as written, for an array with one the check cannot evaluate
    init: tuple[int, int] | None = None  # the token span of its initialiser (``= E``, ``{E}``, ``(E)``)


@dataclass
class _Loop:
    """A ``for`` loop: its variable's declaration, the values it takes (None: not a constant-bound loop, or
    the body assigns the variable) and the token span of its body."""

    decl: _Decl
    values: list[int] | None
    line: int
    start: int
    end: int
    upto: str | None = None  # BOUND as written, for ``for (v = 0; v <= BOUND; ++v)`` with a BOUND it cannot evaluate


class _Analysis:
    """The declarations (with their scopes), loops and out-of-bounds uses of one tokenized source."""

    def __init__(self, text: str, fallback: Mapping[str, int], instance: Instance | None = None) -> None:
        src = Source.parse(text)
        self.text, self.toks, self.match, self.fallback = text, src.tokens, src.match, fallback
        self.instance = instance
        self.bodies: dict[str, list[tuple[int, int]]] = {}  # function name -> token spans of its definitions' bodies
        self.n = len(self.toks)
        self.tmpl = self._template_pairs(src.template_brackets)
        self.encl: list[int] = []  # innermost open bracket around each token (-1: none)
        stack: list[int] = []
        for i, t in enumerate(self.toks):
            self.encl.append(stack[-1] if stack else -1)
            if t.kind == "punct" and t.text in ("(", "[", "{") and i in self.match:
                stack.append(i)
            elif t.kind == "punct" and t.text in (")", "]", "}") and self.match.get(i, -1) in stack:
                del stack[stack.index(self.match[i]) :]
        self.kinds = {i: self._brace_kind(i) for i, t in enumerate(self.toks) if t.text == "{" and t.kind == "punct"}
        self.decls: dict[str, list[_Decl]] = {}
        self.decl_tokens: set[int] = set()
        self.loops: list[_Loop] = []
        self._templates_and_params()
        for i, t in enumerate(self.toks):
            prev = self.toks[i - 1] if i else None
            starts = prev is None or (prev.kind == "punct" and prev.text in (";", "{", "}"))
            starts |= i > 1 and prev.text == ":" and self.toks[i - 2].text in ("public", "private", "protected")
            if starts and (self.encl[i] < 0 or self.toks[self.encl[i]].text == "{"):
                self._declaration(i, self.encl[i])
            if t.text == "for" and i + 1 in self.match and self.toks[i + 1].text == "(":
                self._loop(i)

    # -- scopes -----------------------------------------------------------------------------------------------
    def _template_pairs(self, marks: set[int]) -> dict[int, int]:
        """Template ``<`` -> its closing ``>`` (or ``>>``)."""
        pairs: dict[int, int] = {}
        stack: list[int] = []
        for i in sorted(marks):
            for _ in range({">>": 2, ">": 1}.get(self.toks[i].text, 0)):
                if stack:
                    pairs[stack.pop()] = i
            if self.toks[i].text == "<":
                stack.append(i)
        return pairs

    def _brace_kind(self, b: int) -> str:
        """``namespace`` (also ``extern "C" {``), ``class`` (struct, class, union) or ``block``."""
        before = self.toks[max(b - 2, 0) : b]
        if any(t.text == "namespace" for t in before) or (len(before) == 2 and before[0].text == "extern"):
            return "namespace"
        j = b - 1
        while j >= 0 and self.toks[j].text not in (";", "{", "}", ")"):
            if self.toks[j].text in ("struct", "class", "union"):
                return "class"
            j -= 1
        return "block"

    def _add(self, at: int, end: int, pos: int | None = None, **kw: Any) -> _Decl:
        t = self.toks[at]
        d = _Decl(t.text, at if pos is None else pos, end, t.line, **kw)
        self.decls.setdefault(t.text, []).append(d)
        self.decl_tokens.add(at)
        return d

    def _template_arg(self, open_: int, index: int) -> tuple[int, int] | None:
        """The token span of the ``index``-th argument (from 0) of the template argument list opening at ``open_``."""
        close, j, start, args = self.tmpl[open_], open_ + 1, open_ + 1, []
        while j < close:
            if self.toks[j].text == ",":
                args.append((start, j))
                start = j + 1
                j += 1
            else:
                j = self.tmpl[j] + 1 if j in self.tmpl else self._skip(j)
        args.append((start, close))
        lo, hi = args[index] if index < len(args) else (0, 0)
        return (lo, hi) if hi > lo else None

    def _skip(self, j: int) -> int:
        """The index just past the bracketed group opening at ``j`` (or past ``j``)."""
        if self.toks[j].text in ("(", "[", "{") and j in self.match:
            return self.match[j] + 1
        return self.tmpl[j] + 1 if j in self.tmpl and self.toks[j].text == "<" else j + 1

    def _names(self, open_: int, close: int) -> list[int]:
        """Token indices of the names that a (template) parameter list ``open_`` .. ``close`` declares."""
        toks, j = self.toks, open_ + 1
        out: list[int] = []
        piece: list[int] = []
        while j <= close:
            if j < close and toks[j].text != ",":
                piece.append(j)
                j = self._skip(j)
                continue
            texts = [toks[k].text for k in piece]
            piece = piece[: texts.index("=")] if "=" in texts else piece  # drop a default argument
            while piece and toks[piece[-1]].text == "[":
                piece.pop()  # extents name nothing
            k = piece[-1] if len(piece) >= 2 else -1
            if k >= 0 and toks[k].text == "(":  # float (&acc)[4]
                k = max((i for i in range(k + 1, self.match.get(k, k)) if toks[i].kind == "ident"), default=-1)
            if k >= 0 and toks[k].kind == "ident" and toks[k].text not in _KEYWORDS:
                out.append(k)
            piece, j = [], j + 1
        return out

    def _templates_and_params(self) -> None:
        """Declare template parameters over their template (bound to the values of :attr:`instance`'s
        template arguments in the template of its function), function parameters over the body; note the
        body of each function definition by its name."""
        toks = self.toks
        for i, t in enumerate(toks):
            if t.text == "template" and i + 1 in self.tmpl:
                j = self.tmpl[i + 1] + 1
                fname = None
                while j < self.n and toks[j].text not in ("{", ";"):
                    if toks[j].text == "(" and fname is None and toks[j - 1].kind == "ident":
                        fname = toks[j - 1].text if toks[j - 1].text not in _ATTRS | _KEYWORDS else None
                    j = self._skip(j) if toks[j].text in ("(", "[") else j + 1
                end = self.match.get(j, j) if j < self.n else self.n - 1
                bound = self._template_args(i + 1, fname)
                for k in self._names(i + 1, self.tmpl[i + 1]):
                    value = bound.get(k)
                    self._add(k, end, pos=i, value=value)
            if i in self.kinds:
                j = i - 1
                while j >= 0 and toks[j].text in _AFTER_PARAMS:
                    j -= 1
                p = self.match.get(j, 0) if j >= 0 and toks[j].text == ")" else 0
                owner = toks[p - 1] if p > 0 else None  # the function's name, or "]" of a lambda
                if owner and (owner.text == "]" or owner.kind == "ident") and owner.text not in _CONTROL:
                    for k in self._names(p, j):
                        self._add(k, self.match.get(i, self.n - 1))
                    if owner.kind == "ident" and (self.encl[i] < 0 or self.kinds.get(self.encl[i]) == "namespace"):
                        self.bodies.setdefault(owner.text, []).append((i, self.match.get(i, self.n - 1)))

    def _template_args(self, open_: int, function: str | None) -> dict[int, int]:
        """The values :attr:`instance` gives the non-type integer parameters of the template parameter list
        at ``open_`` (a template of ``function``), by the parameter's name token; none for another function,
        a type or pack parameter, or an argument that is not a constant."""
        inst, toks = self.instance, self.toks
        if inst is None or not inst.args or function != inst.function:
            return {}
        close, out = self.tmpl[open_], dict[int, int]()
        j, piece, pos = open_ + 1, list[int](), 0
        while j <= close:
            if j < close and toks[j].text != ",":
                piece.append(j)
                j = self._skip(j)
                continue
            words = [toks[k].text for k in piece]
            if "..." in words or "template" in words:
                return out  # a pack, or a template template parameter: the positions after it are unknown
            names = piece[: words.index("=")] if "=" in words else piece  # a default argument names nothing
            if pos < len(inst.args) and words and words[0] not in ("typename", "class") and _INT_WORDS & set(words):
                k = names[-1]
                try:
                    known = {**self.fallback, **{toks[a].text: v for a, v in out.items()}}
                    value = _Expr(tokenize(inst.args[pos]), known.get).parse()({})
                except (_Unknown, TokenizeError):
                    value = None
                if value is not None and toks[k].kind == "ident":
                    out[k] = value
            piece, j, pos = [], j + 1, pos + 1
        return out

    def _lookup(self, name: str, at: int) -> _Decl | None:
        """The innermost declaration of ``name`` visible at token ``at`` (two in one block: neither)."""
        seen = [d for d in self.decls.get(name, ()) if d.pos < at <= d.end]
        if not seen:
            return None
        best = max(seen, key=lambda d: d.pos)
        if any(d.end == best.end and (d.extents, d.value) != (best.extents, best.value) for d in seen):
            return _Decl(name, best.pos, best.end, best.line)  # e.g. both branches of an #if
        return best

    def _constant(self, name: str, at: int) -> int | None:
        d = self._lookup(name, at)
        return self.fallback.get(name) if d is None else d.value

    def _eval(self, lo: int, hi: int, at: int) -> int | None:
        """The constant value of the tokens [lo, hi) with names as seen from token ``at``, or None."""
        try:
            return _Expr(self.toks[lo:hi], lambda name: self._constant(name, at)).parse()({})
        except _Unknown:
            return None

    # -- declarations -----------------------------------------------------------------------------------------
    def _declaration(self, s: int, brace: int) -> None:
        """Declare the names of the declaration statement starting at token ``s``, if it is one, in the block
        ``brace`` (names at namespace scope stay visible to the end of the file)."""
        toks, n = self.toks, self.n
        if toks[s].kind != "ident" or toks[s].text in _NOT_DECL:
            return
        while brace >= 0 and self.kinds.get(brace) == "namespace":
            brace = self.encl[brace]
        end, kind = (self.match.get(brace, n - 1), self.kinds.get(brace)) if brace >= 0 else (n, "namespace")
        words: list[str] = []
        array_arg: tuple[int, int] | None = None  # the extent argument's tokens of an array class template type
        j = s
        while j < n:
            t = toks[j]
            if t.kind == "ident" and t.text in _ATTRS and j + 1 < n and toks[j + 1].text == "(":
                j = self._skip(j + 1)
            elif t.kind == "ident" or t.text in ("::", "*", "&", "&&"):
                words.append(t.text)
                j += 1
            elif j in self.tmpl:
                if words and words[-1] in _ARRAY_TEMPLATES and _qualified_name(words):
                    array_arg = self._template_arg(j, 1)
                words.append("<>")
                j = self.tmpl[j] + 1
            else:
                break
        types = {w for w in words[:-1] if w.isidentifier()}  # the words before the first declared name
        if j >= n or not types or not words[-1].isidentifier():
            return
        const_int = bool({"const", "constexpr"} & types and _INT_WORDS & types) and not {"*", "&", "&&"} & set(words)
        at = j - 1
        while j < n and toks[at].text not in _KEYWORDS and toks[j].text in ("[", "=", ";", ",", "{", "(", ":"):
            extents: list[int | None] = []
            texts: list[str] = []
            while j < n and toks[j].text == "[" and j in self.match:
                extents.append(self._eval(j + 1, self.match[j], j))
                texts.append(" ".join(t.text for t in toks[j + 1 : self.match[j]]))
                j = self.match[j] + 1
            if not extents and array_arg is not None and words[-2] == "<>" and not {"*", "&", "&&"} & set(words):
                lo, hi = array_arg  # `cutlass::Array<T, N> out;`: out is an array of N elements
                extents.append(self._eval(lo, hi, lo))
                texts.append(" ".join(t.text for t in toks[lo:hi]))
            value, init = None, None
            if j < n and toks[j].text == "=":
                k = j + 1
                while k < n and toks[k].text not in (",", ";", "}", ")"):
                    k = self._skip(k)
                value, init, j = self._eval(j + 1, k, j), (j + 1, k), k
            elif j < n and toks[j].text in ("{", "(") and j in self.match:
                value, init, j = self._eval(j + 1, self.match[j], j), (j + 1, self.match[j]), self.match[j] + 1
            sized = kind not in ("namespace", "class") and bool(extents) and all(e and e > 0 for e in extents)
            scalar = const_int and not extents
            symbolic = bool(texts) and all(texts) and None in extents
            self._add(
                at, end, pos=brace if kind == "class" else None, extents=tuple(extents) if sized else None,
                shared="__shared__" in types, const_int=scalar, value=value if scalar else None,
                texts=tuple(texts) if symbolic else None, init=init if not extents else None,
            )  # fmt: skip
            if j + 1 >= n or toks[j].text != ",":
                return
            j += 1
            while j < n and toks[j].text in ("*", "&", "&&"):
                j += 1
            if j + 1 >= n or toks[j].kind != "ident":
                return
            at, j = j, j + 1

    # -- loops ------------------------------------------------------------------------------------------------
    def _stmt_end(self, i: int) -> int:
        """The index of the last token of the statement starting at ``i``."""
        toks, n = self.toks, self.n
        if i >= n:
            return n - 1
        if toks[i].text == "{":
            return self.match.get(i, n - 1)
        if toks[i].text in ("for", "while", "switch", "if") and i + 1 in self.match:
            e = self._stmt_end(self.match[i + 1] + 1)
            return self._stmt_end(e + 2) if toks[i].text == "if" and e + 1 < n and toks[e + 1].text == "else" else e
        j = i
        while j < n and toks[j].text != ";":
            if toks[j].text in ("}", ")", "]"):
                return j - 1
            j = self._skip(j)
        return min(j, n - 1)

    def _loop(self, i: int) -> None:
        """Record ``for (T VAR = INIT; VAR OP BOUND; STEP) BODY`` with the values that VAR takes."""
        toks, lp = self.toks, i + 1
        rp = self.match[lp]
        semis = [j for j in range(lp + 1, rp) if toks[j].text == ";" and self.encl[j] == lp]
        words = [t.text for t in toks[lp + 1 : semis[0]]] if semis else []
        eq = words.index("=") if "=" in words else -1
        if len(semis) != 2 or eq < 2 or not all(w.isidentifier() for w in words[:eq]):
            return
        start, end = rp + 1, self._stmt_end(rp + 1)
        decl = self._add(lp + eq, end)
        unsigned = any(w.startswith(("unsigned", "size_t", "uint")) for w in words[: eq - 1])
        values = self._values(i, lp + 1 + eq, semis[0], semis[1], rp, decl.name, unsigned)
        for k in range(start, min(end + 1, self.n - 1)):
            if toks[k].text == decl.name and (toks[k + 1].text in _ASSIGN or toks[k - 1].text in ("++", "--", "&")):
                values = None  # the body changes the variable
        upto = None
        cond = [t.text for t in toks[semis[0] + 1 : semis[1]]]
        if values is None and cond[:2] == [decl.name, "<="] and len(cond) > 2 and self._eval(lp + 1 + eq + 1, semis[0], i) == 0:
            if [t.text for t in toks[semis[1] + 1 : rp]] in ([decl.name, "++"], ["++", decl.name]):
                upto = " ".join(cond[2:])
        for k in range(start, min(end + 1, self.n - 1)):
            if toks[k].text == decl.name and (toks[k + 1].text in _ASSIGN or toks[k - 1].text in ("++", "--", "&")):
                upto = None
        self.loops.append(_Loop(decl, values, toks[i].line, start, end, upto))

    def _values(self, i: int, eq: int, a: int, b: int, rp: int, var: str, unsigned: bool) -> list[int] | None:
        """The values of ``var`` in ``for (T var = INIT; var OP BOUND; STEP)`` (semicolons at a, b), or None."""
        toks = self.toks
        init = self._eval(eq + 1, a, i)
        if init is None or b - a < 3 or toks[a + 1].text != var or toks[a + 2].text not in _COMPARE:
            return None
        bound, cmp = self._eval(a + 3, b, i), _COMPARE[toks[a + 2].text]
        words = [t.text for t in toks[b + 1 : rp]]
        step: int | None = None
        if words in ([var, "++"], ["++", var], [var, "--"], ["--", var]):
            step = 1 if "++" in words else -1
        elif words[:2] in ([var, "+="], [var, "-="]) and (c := self._eval(b + 3, rp, i)) is not None and c > 0:
            step = c if words[1] == "+=" else -c
        if bound is None or step is None:
            return None
        out: list[int] = []
        v = init
        while cmp(v, bound):
            if len(out) >= _MAX_EVALS or (unsigned and v < 0):
                return None  # runs away, or wraps around
            out.append(v)
            v += step
        return out

    # -- uses -------------------------------------------------------------------------------------------------
    def overruns(self) -> list[Overrun]:
        """Every out-of-bounds index of a local array in constant-bound loops, by (line, col, dim)."""
        toks = self.toks
        found: dict[tuple[int, int, int], Overrun] = {}
        for k, t in enumerate(toks[:-1]):
            if t.kind != "ident" or toks[k + 1].text != "[" or k in self.decl_tokens or not self._in_scope(k):
                continue
            d = self._lookup(t.text, k) if k == 0 or toks[k - 1].text not in (".", "->", "::") else None
            if d is not None and d.extents is None and d.texts is not None:
                self._symbolic(found, k, d)
                continue
            if d is None or d.extents is None:
                continue
            groups: list[tuple[int, int]] = []
            j = k + 1
            while j < self.n and toks[j].text == "[" and j in self.match:
                groups.append((j + 1, self.match[j]))
                j = self.match[j] + 1
            texts = [" ".join(self.text[toks[lo].start : toks[hi - 1].end].split()) for lo, hi in groups if hi > lo]
            if len(texts) < len(groups):
                continue  # an empty []
            for dim, ((lo, hi), size) in enumerate(zip(groups, d.extents)):
                hit = self._range(lo, hi, k)
                if hit is not None and (hit[0] < 0 or hit[1] >= size):
                    loops = tuple((L.decl.name, L.values[0], L.values[-1], L.line) for L in hit[2] if L.values)
                    found[(t.line, t.col, dim)] = Overrun(
                        t.line, t.col, t.text, size, dim, d.line, texts[dim], hit[0], hit[1], loops,
                        use=t.text + "".join(f"[{x}]" for x in texts), rank=len(d.extents), shared=d.shared,
                        threads=hit[3], instance=self._label(),
                    )  # fmt: skip
        return [found[key] for key in sorted(found)]

    def _symbolic(self, found: dict[tuple[int, int, int], Overrun], k: int, d: _Decl) -> None:
        """Record ``NAME[v]`` in ``for (v = 0; v <= E; ++v)`` where NAME's extent in that dimension is written
        ``E`` too (a template-dependent ``kPer``, say): v = E is one past the end whatever E's value."""
        toks, t = self.toks, self.toks[k]
        assert d.texts is not None
        j, dim = k + 1, 0
        while j < self.n and toks[j].text == "[" and j in self.match and dim < len(d.texts):
            close = self.match[j]
            if close == j + 2 and toks[j + 1].kind == "ident":
                v = self._lookup(toks[j + 1].text, j + 1)
                loop = next((L for L in self.loops if L.decl is v and L.start <= k <= L.end), None)
                if loop is not None and loop.upto is not None and loop.upto == d.texts[dim] and not self._guarded(loop, k):
                    found[(t.line, t.col, dim)] = Overrun(
                        t.line, t.col, t.text, 0, dim, d.line, v.name, 0, 0, ((v.name, 0, 0, loop.line),),
                        use=self._use_text(k), rank=len(d.texts), shared=d.shared, extent=d.texts[dim],
                        instance=self._label(),
                    )  # fmt: skip
            j, dim = close + 1, dim + 1

    def _use_text(self, k: int) -> str:
        toks, j = self.toks, k + 1
        while j < self.n and toks[j].text == "[" and j in self.match:
            j = self.match[j] + 1
        return " ".join(self.text[toks[k].start : toks[j - 1].end].split())

    def _range(self, lo: int, hi: int, at: int) -> tuple[int, int, list[_Loop], str] | None:
        """(low, high, loops used, thread range) of the index tokens [lo, hi) at token ``at`` (see
        :meth:`_range_of`)."""
        return self._range_of([(lo, hi, 1)], at)

    def _range_of(self, terms: list[tuple[int, int, int]], at: int) -> tuple[int, int, list[_Loop], str] | None:
        """(low, high, loops used, thread range) of the sum of ``weight * index`` over ``terms`` (token
        spans) at token ``at``, over the enclosing loops' values and, where it uses the thread index, the
        values of that (:meth:`_thread_values`; the range is described in the last item, else ""); None
        when it is unknown, uses no loop variable, is guarded, or needs too many evaluations."""
        loops = {id(L.decl): L for L in self.loops if L.start <= at <= L.end}

        def resolve(name: str) -> int | str | _Thread | None:
            if name == TID:
                return TID
            d = self._lookup(name, at)
            if d is not None and id(d) in loops:
                return name if loops[id(d)].values is not None else None
            if d is None:
                return self.fallback.get(name)
            return d.value if d.value is not None else self._thread_alias(d)

        fns = []
        names: set[str] = set()
        bare, mods = 0, list[int]()
        try:
            for lo, hi, w in terms:
                expr = _Expr(self.toks[lo:hi], resolve)
                fns.append((expr.parse(), w))
                names |= expr.vars
                bare, mods = bare + expr.bare, mods + expr.mods
        except _Unknown:
            return None
        used = sorted((L for L in loops.values() if L.decl.name in names), key=lambda L: L.start)
        keys, sets = [L.decl.name for L in used], [L.values or [] for L in used]
        if not used or any(self._guarded(L, at) for L in used):
            return None
        threads = ""
        if TID in names:
            got = self._thread_values(at, bare, mods, used)
            if got is None:
                return None
            keys, sets, threads = [*keys, TID], [*sets, got[0]], got[1]
        if math.prod(len(s) for s in sets) > _MAX_EVALS:
            return None
        try:
            seen = [sum(f(env) * w for f, w in fns) for combo in itertools.product(*sets) for env in [dict(zip(keys, combo))]]
        except _Unknown:
            return None
        return (min(seen), max(seen), used, threads) if seen else None

    # -- the thread index -------------------------------------------------------------------------------------
    def _in_scope(self, at: int) -> bool:
        """Whether token ``at`` is checked by this analysis: anywhere without an instance, else in the body
        of the instance's function."""
        inst = self.instance
        return inst is None or any(lo <= at <= hi for lo, hi in self.bodies.get(inst.function, ()))

    def _label(self) -> str:
        """The instantiation named in messages: the instance's, where it binds template arguments."""
        return self.instance.label if self.instance is not None and self.instance.args else ""

    def _per_thread(self, loop: _Loop) -> bool:
        """Whether ``loop``'s values depend on the thread (none here; the thread-strided loops of
        :mod:`audit.cuda.sharedbounds`), so that they cannot be combined freely with the thread index's."""
        return False

    def _thread_values(self, at: int, bare: int, mods: list[int], used: list[_Loop]) -> tuple[list[int], str] | None:
        """The values of ``threadIdx.x`` an index at token ``at`` is evaluated over, with their description:
        every thread of the block where the instance's block extent is known, else, where the index uses
        the thread index only as ``threadIdx.x % C`` (``bare == 0``), ``0 .. C - 1``, the values it takes
        over any block of at least C threads; None otherwise, or when a loop of ``used`` depends on the
        thread, or a condition on the thread index guards the use."""
        if any(self._per_thread(L) for L in used) or self._thread_guarded(at):
            return None
        inst = self.instance
        if inst is not None and inst.block_x and self._in_scope(at):
            n = inst.block_x
            return list(range(n)), f'threadIdx.x = 0 .. {n - 1} (the block of "{inst.label}")'
        if bare == 0 and mods:
            c = max(mods)
            return list(range(c)), f"threadIdx.x % {c} = 0 .. {c - 1} (the threads of a block of at least {c})"
        return None

    def _thread_alias(self, d: _Decl, depth: int = 0) -> str | _Thread | None:
        """What the variable ``d`` holds where it is initialised to an expression of ``threadIdx.x`` (and
        constants, and other such variables) and never assigned again: :data:`TID` for the thread index
        itself, else a :class:`_Thread`; None for anything else."""
        toks = self.toks
        if d.init is None or d.extents is not None or depth > 8 or not (0 <= d.pos < self.n) or toks[d.pos].text != d.name:
            return None
        if any(toks[k].text == d.name and (toks[k + 1].text in _ASSIGN or toks[k - 1].text in ("++", "--", "&"))
               for k in range(d.pos + 1, min(d.end + 1, self.n - 1))):  # fmt: skip
            return None

        def resolve(name: str) -> int | str | _Thread | None:
            if name == TID:
                return TID
            e = self._lookup(name, d.pos)
            if e is None:
                return self.fallback.get(name)
            return e.value if e.value is not None else self._thread_alias(e, depth + 1)

        lo, hi = d.init
        expr = _Expr(toks[lo:hi], resolve)
        try:
            fn = expr.parse()
        except _Unknown:
            return None
        if TID not in expr.vars or expr.vars - {TID}:
            return None
        if expr.tid_span == (0, hi - lo) and expr.bare == 1:
            return TID
        return _Thread(fn, expr.bare, tuple(expr.mods))

    def _thread_guarded(self, at: int) -> bool:
        """Whether the thread index (``threadIdx``, or a variable holding an expression of it) appears in a
        condition that may keep some threads from the use at token ``at``: an ``if``, ``while`` or ``for``
        of the function around it, one before it whose body leaves (``return``, ``break``, ``continue``),
        or a ``?`` / ``&&`` / ``||`` in its statement. Such a guard is not followed: the use is skipped."""
        toks, body, b = self.toks, -1, self.encl[at]
        while b >= 0:
            if toks[b].text == "{" and self.kinds.get(b) == "block":
                body = b
            b = self.encl[b]
        if body < 0:
            return False

        def thread(lo: int, hi: int) -> bool:
            for k in range(lo, hi):
                if toks[k].kind == "ident" and (toks[k].text == "threadIdx" or (toks[k - 1].text not in (".", "->") and (
                        (d := self._lookup(toks[k].text, k)) is not None and d.value is None and self._thread_alias(d) is not None))):  # fmt: skip
                    return True
            return False

        for k in range(body + 1, at):
            if toks[k].text in ("if", "while", "for") and toks[k].kind == "ident" and k + 1 in self.match:
                close = self.match[k + 1]
                end = self._stmt_end(close + 1)
                leaves = any(toks[x].text in ("return", "break", "continue", "goto") for x in range(close + 1, end + 1))
                if (at <= end or leaves) and thread(k + 2, close):
                    return True
        stmt, end = at, at
        while stmt > body + 1 and toks[stmt - 1].text not in (";", "{", "}"):
            close = stmt - 1
            if toks[close].text == ")" and self.match.get(close, 0) > 0 and toks[self.match[close] - 1].text in ("if", "for", "while"):
                break  # the statement of a loop or if body starts after its header
            stmt -= 1
        while end < self.n and toks[end].text not in (";", "}", ")", "]"):
            end = self._skip(end)
        return any(toks[x].text in ("?", "&&", "||") for x in range(stmt, end)) and thread(stmt, end)

    def _guarded(self, loop: _Loop, at: int) -> bool:
        """Whether the loop variable is compared on its own (``if (k < K)``, ``k < K ? a[k] : 0``) in an ``if``
        condition of the body before token ``at`` or earlier in the statement of ``at``: a guard this check
        does not follow, so the use is skipped rather than risk a false report."""
        toks, name = self.toks, loop.decl.name
        stmt = at
        while stmt > loop.start and toks[stmt - 1].text not in (";", "{", "}"):
            stmt -= 1
        spans = [(stmt, at)] + [
            (k + 2, self.match[k + 1]) for k in range(loop.start, at) if toks[k].text == "if" and k + 1 in self.match
        ]
        for lo, hi in spans:
            for k in range(max(lo, 1), min(hi, self.n - 1)):
                if toks[k].text == name and toks[k].kind == "ident":
                    before, after = toks[k - 1].text, toks[k + 1].text
                    if (after in _COMPARE or after == "==") and before in _GUARD_BEFORE:
                        return True
                    if (before in _COMPARE or before == "==") and after in _GUARD_AFTER:
                        return True
        return False
