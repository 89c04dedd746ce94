"""Shared-memory indexes out of bounds in thread-strided loops, found in the source (SHARED_ARRAY_BOUNDS).

``for (int e = tid; e <= kBM * kBN; e += kThreads) tile[e] = ...`` runs one element past a shared tile.
Memcheck reports nothing while the extra element stays inside the block's shared allocation (the next
field of a shared union, another ``__shared__`` array), and the value written there is often never read
again, so no run can tell: it is undefined behaviour that the next change of the layout turns into a
corrupted tile. LOCAL_ARRAY_BOUNDS (:mod:`audit.cuda.bounds`) evaluates constant-bound loops only; this
check adds what it cannot see:

* **Thread-strided loops**: ``for (T v = TID [+ C]; v < BOUND; v += STRIDE)`` (also ``<=``), where
  ``TID`` is ``threadIdx.x`` or a variable initialised to it and never assigned again, ``BOUND`` and ``C``
  are compile-time constants and ``STRIDE`` is ``blockDim.x`` (or a variable holding it) or a positive
  constant. Over the threads of the block, ``v`` takes every value from ``C`` up to the bound: a
  ``blockDim.x`` stride covers them all; a constant stride is taken to be the block size (the idiom, the
  block having at least that many threads along x), and then covers them all too.
* **Fields of a shared struct or union** (``smem.pipe.As[g][s][k][m]``, ``__shared__ WgSmem smem;``)
  checked against the field's extents: PTX only sees one shared allocation, the source keeps the fields.
* **Flat pointers into a shared array**: ``(&smem.tiles[q][0][0])[e]`` and a pointer initialised once to
  such an address (``float* tile = &smem.tiles[0][0][0];``) or to an array that decays to one, never
  assigned again: the element reached is the address's flat offset plus the index, and it must lie within
  the whole array (flattening a multi-dimensional array through a pointer is allowed; leaving it is not).

A use is evaluated over every combination of the values its enclosing loops give their variables (the
constant-bound loops of LOCAL_ARRAY_BOUNDS and the thread-strided ones); a use is skipped, never
reported, when an index is not a function of those loop variables and constants, when a loop variable
it uses is compared on its own in a guard before the use (``if (e < n)``), or when the combinations pass
:data:`audit.cuda.bounds._MAX_EVALS`. Plain ``__shared__`` arrays indexed through constant-bound loops
only are LOCAL_ARRAY_BOUNDS' findings and are not repeated here. Thread terms of an index and template
instances are read as LOCAL_ARRAY_BOUNDS reads them (:mod:`audit.cuda.bounds`), but a thread term is never
combined with a thread-strided loop's variable (the two vary together over the threads).

>>> src = ('__global__ void k(float* o) {\\n    __shared__ float s[256];\\n    const int tid = threadIdx.x;\\n'
...        '    for (int e = tid; e <= 256; e += blockDim.x) s[e] = 0.0f;\\n}\\n')
>>> [(o.line, o.array, o.size, o.low, o.high) for o in find_shared_overruns(src)]
[(4, 's', 256, 0, 256)]
>>> find_shared_overruns(src)[0].message("k.cu")[:72]
'k.cu:4: "s[e]" indexes the shared array "s" of 256 elements (declared at'
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .bounds import _MAX_EVALS, Instance, _Analysis, _Expr, _key, _Loop, _macros, _merge, _Unknown
from .tokens import TokenizeError, tokenize

_THREAD = ("threadIdx", ".", "x")
_BLOCK = ("blockDim", ".", "x")
_CASTS = (("(", "int", ")"), ("(", "unsigned", ")"), ("(", "unsigned", "int", ")"), ("int", "("))
_ASSIGN = frozenset("= += -= *= /= %= <<= >>= &= |= ^=".split())
_QUALIFIERS = frozenset("const volatile static __restrict__ struct union".split())


@dataclass(frozen=True)
class SharedOverrun:
    """One index of a shared array (a ``__shared__`` array, a field of a shared struct or union, or an
    element reached through a pointer into one) that its loops drive out of the array's bounds."""

    line: int  # 1-based line of the use
    col: int  # 1-based column where the use starts
    array: str  # as written through the shared variable: "s", "smem.tiles"
    size: int  # the extent of the dimension indexed (flat: the whole array's element count)
    dim: int  # 0 for the first [], -1 for a flat index through a pointer
    shape: tuple[int, ...]  # the array's declared extents
    decl_line: int
    index: str  # the index (flat: offset + index) as written, whitespace-normalised
    low: int  # the range it takes over the loops
    high: int
    loops: tuple[tuple[str, int, int, int], ...]  # (variable, first, last, line of its for), outermost first
    strided: tuple[str, ...]  # the loop variables among them that start at the thread index
    use: str  # the whole use as written, e.g. "(&smem.tiles[q][0][0])[e]"
    threads: str = ""  # the thread index's range where the index depends on it, e.g. "threadIdx.x % 32 = 0 .. 31"
    instance: str = ""  # the template instantiation (a kernel's cpp_name) whose arguments the extents need

    def message(self, path: str) -> str:
        """One sentence naming the use, the array, the loop ranges and the worst offending index."""
        worst = self.high if self.high >= self.size else self.low
        parts = []
        for var, first, last, line in self.loops:
            how = ", from the thread index by the block size" if var in self.strided else ""
            parts.append(f"{var} = {first}" + (f" .. {last}" if last != first else "") + f" (the loop at line {line}{how})")
        parts += [self.threads] if self.threads else []
        ranges = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)
        shape = " x ".join(str(n) for n in self.shape)
        where = f' in "{self.instance}"' if self.instance else ""
        if self.dim < 0:
            count = f"{shape} = {self.size}" if len(self.shape) > 1 else str(self.size)
            what = (f'reaches flat element {self.index} of the shared array "{self.array}" ({count} '
                    f"element{'s' if self.size != 1 else ''}, declared at line {self.decl_line}){where} through a pointer,")
            idx = f"element {worst}"
        else:
            dim = f"dimension {self.dim + 1} of " if len(self.shape) > 1 else ""
            what = (f'indexes {dim}the shared array "{self.array}" of {self.size} element{"s" if self.size != 1 else ""} '
                    f"(declared at line {self.decl_line}){where}")
            idx = f"index {worst}"
        return (f'{path}:{self.line}: "{self.use}" {what} with {ranges}: {idx} is out of bounds, undefined '
                "behaviour that touches the shared memory past the array, which no run reports while it stays "
                "inside the block's allocation.")


def find_shared_overruns(text: str, constants: Mapping[str, int] | None = None,
                         instances: Sequence[Instance] = ()) -> list[SharedOverrun]:  # fmt: skip
    """The out-of-bounds shared-memory indexes of one source text, by (line, col, dim). ``constants`` are
    the integer constants of the headers it includes (:func:`audit.cuda.bounds.integer_constants`);
    ``instances`` the kernels the contracts define in it, whose functions are read once more with their
    template arguments and block extents known (as :func:`audit.cuda.bounds.find_overruns`). A source
    that cannot be tokenized raises :class:`~audit.cuda.tokens.TokenizeError`."""
    consts = constants or {}
    key = _key(_merge(_macros(text, consts), consts))
    found = {(o.line, o.col, o.dim): o for o in _find(text, key)}
    for inst in instances:
        for o in _find(text, key, inst):
            found.setdefault((o.line, o.col, o.dim), o)
    return [found[k] for k in sorted(found)]


@functools.lru_cache(maxsize=32)
def _find(text: str, fallback_items: tuple[tuple[str, int], ...], instance: Instance | None = None) -> tuple[SharedOverrun, ...]:
    return tuple(_SharedAnalysis(text, dict(fallback_items), instance).shared_overruns())


@dataclass
class _Field:
    """A member of a struct or union: an array (``extents``) or a nested struct (``members``)."""

    name: str
    line: int
    extents: tuple[int, ...] | None = None
    members: dict[str, _Field] | None = None
    type_name: str | None = None  # a named struct type, resolved on use


@dataclass
class _Array:
    """A shared array reached by an access path: its name as written, extents and declaration line."""

    name: str
    extents: tuple[int, ...]
    line: int


class _SharedAnalysis(_Analysis):
    """:class:`audit.cuda.bounds._Analysis` whose loops also evaluate thread-strided ``for`` loops, with
    the struct and union layouts, shared struct variables and flat pointers into shared arrays of the text."""

    def __init__(self, text: str, fallback: Mapping[str, int], instance: Instance | None = None) -> None:
        self.strided: set[int] = set()  # token index of the declared variable of each thread-strided loop
        super().__init__(text, fallback, instance)
        self.types: dict[str, dict[str, _Field]] = {}
        self.shared_vars: dict[int, dict[str, _Field]] = {}  # name token of a __shared__ struct variable
        self._layouts()
        self.pointers: dict[int, tuple[_Array, list[tuple[int, int]], int]] = {}  # name token -> base, groups, end
        self._pointers()

    # -- thread-strided loops ---------------------------------------------------------------------------------
    def _texts(self, lo: int, hi: int) -> tuple[str, ...]:
        return tuple(t.text for t in self.toks[lo:hi])

    def _alias(self, name: str, at: int, what: tuple[str, ...]) -> bool:
        """Whether ``name`` at token ``at`` is a variable initialised to ``what`` (threadIdx.x, blockDim.x),
        possibly through a cast, and never assigned again."""
        d = self._lookup(name, at)
        if d is None or d.extents is not None or not (0 <= d.pos < self.n - 1) or self.toks[d.pos].text != name:
            return False
        toks = self.toks
        if toks[d.pos + 1].text != "=":
            return False
        k = d.pos + 2
        end = k
        while end < self.n and toks[end].text not in (";", ","):
            end += 1
        if not self._is(k, end, what):
            return False
        for j in range(d.pos + 1, min(d.end + 1, self.n - 1)):
            if toks[j].text == name and j != d.pos and (toks[j + 1].text in _ASSIGN or toks[j - 1].text in ("++", "--", "&")):
                return False
        return True

    def _is(self, lo: int, hi: int, what: tuple[str, ...]) -> bool:
        texts = self._texts(lo, hi)
        for cast in _CASTS:
            if texts[: len(cast)] == cast:
                texts = texts[len(cast) :]
                if cast[-1] == "(":
                    texts = texts[:-1] if texts[-1:] == (")",) else ()
                break
        texts = texts[1:-1] if texts[:1] == ("(",) and texts[-1:] == (")",) else texts
        return texts == what

    def _values(self, i: int, eq: int, a: int, b: int, rp: int, var: str, unsigned: bool) -> list[int] | None:
        values = super()._values(i, eq, a, b, rp, var, unsigned)
        if values is not None:
            return values
        return self._strided(i, eq, a, b, rp, var)

    def _strided(self, i: int, eq: int, a: int, b: int, rp: int, var: str) -> list[int] | None:
        """The values of a thread-strided loop's variable over the block: every value from the first
        thread's start up to the bound (see the module docstring), or None."""
        toks = self.toks
        if b - a < 3 or toks[a + 1].text != var or toks[a + 2].text not in ("<", "<="):
            return None
        steps = self._texts(b + 1, rp)
        if steps[:2] != (var, "+="):
            return None
        lo, hi = b + 3, rp
        if not (self._is(lo, hi, _BLOCK) or (hi - lo == 1 and toks[lo].kind == "ident" and self._alias(toks[lo].text, i, _BLOCK))):
            c = self._eval(lo, hi, i)
            if c is None or c <= 0:
                return None
        # the start: TID, TID + C or C + TID
        span = list(range(eq + 1, a))
        tid_at: list[int] = []
        k = 0
        while k < len(span):
            j = span[k]
            if self._texts(j, j + 3) == _THREAD:
                tid_at.append(j)
                k += 3
                continue
            if toks[j].kind == "ident" and toks[j].text not in ("int", "unsigned") and self._alias(toks[j].text, i, _THREAD):
                tid_at.append(j)
            k += 1
        if len(tid_at) != 1:
            return None
        t = tid_at[0]
        width = 3 if self._texts(t, t + 3) == _THREAD else 1
        text = " ".join(self._texts(eq + 1, t)) + " __tid__ " + " ".join(self._texts(t + width, a))
        for cast in ("( int ) __tid__", "( unsigned ) __tid__", "( unsigned int ) __tid__", "int ( __tid__ )"):
            text = text.replace(cast, "__tid__")
        try:
            fn = _Expr(tokenize(text), lambda name: "__tid__" if name == "__tid__" else self._constant(name, i)).parse()
            first, second = fn({"__tid__": 0}), fn({"__tid__": 1})
        except (_Unknown, TokenizeError):
            return None
        bound = self._eval(a + 3, b, i)
        if bound is None or second - first != 1:
            return None
        last = bound if toks[a + 2].text == "<=" else bound - 1
        if last - first + 1 > _MAX_EVALS:
            return None
        self.strided.add(eq - 1)
        return list(range(first, last + 1))

    # -- struct layouts and shared variables ------------------------------------------------------------------
    def _layouts(self) -> None:
        """Named struct/union types (``struct T {...};``, ``typedef struct {...} T;``) and the ``__shared__``
        variables of such a type (``__shared__ __align__(16) T smem;``, ``__shared__ union {...} smem;``)."""
        toks = self.toks
        for i, t in enumerate(toks):
            if t.text not in ("struct", "union") or t.kind != "ident":
                continue
            j = i + 1
            name = toks[j].text if j < self.n and toks[j].kind == "ident" else None
            if name is not None:
                j += 1
            if j >= self.n or toks[j].text != "{" or j not in self.match:
                continue
            members = self._members(j)
            close = self.match[j]
            if name is not None:
                self.types.setdefault(name, members)
            if i > 0 and toks[i - 1].text == "typedef" and close + 2 < self.n and toks[close + 1].kind == "ident":
                self.types.setdefault(toks[close + 1].text, members)
        for i, t in enumerate(toks):
            if t.text != "__shared__":
                continue
            j = i + 1
            members: dict[str, _Field] | None = None
            while j < self.n:
                tj = toks[j]
                if tj.text in ("__align__", "alignas", "__attribute__") and j + 1 in self.match:
                    j = self.match[j + 1] + 1
                elif tj.text in ("struct", "union") and j + 1 < self.n:
                    k = j + 1 if toks[j + 1].text == "{" else j + 2
                    if k < self.n and toks[k].text == "{" and k in self.match:
                        members, j = self._members(k), self.match[k] + 1
                    else:
                        j += 1
                elif tj.text in _QUALIFIERS:
                    j += 1
                elif tj.kind == "ident" and members is None and tj.text in self.types and j + 1 < self.n and toks[j + 1].kind == "ident":
                    members, j = self.types[tj.text], j + 1
                else:
                    break
            if members is not None and j + 1 < self.n and toks[j].kind == "ident" and toks[j + 1].text == ";":
                self.shared_vars[j] = members
                if j not in self.decl_tokens:  # __shared__ union {...} u;: no declaration statement the base parses
                    brace = self.encl[j]
                    self._add(j, self.match.get(brace, self.n - 1) if brace >= 0 else self.n - 1)

    def _members(self, brace: int) -> dict[str, _Field]:
        """The array and nested-struct members declared in the braces at ``brace``."""
        toks, close = self.toks, self.match[brace]
        out: dict[str, _Field] = {}
        j = brace + 1
        while j < close:
            if toks[j].text in ("struct", "union"):
                k = j + 1 if toks[j + 1].text == "{" else j + 2
                if k < close and toks[k].text == "{" and k in self.match:
                    nested = self._members(k)
                    j = self.match[k] + 1
                    while j < close and toks[j].text != ";":
                        if toks[j].kind == "ident" and toks[j + 1].text in (";", ","):
                            out[toks[j].text] = _Field(toks[j].text, toks[j].line, members=nested)
                        j += 1
                    j += 1
                    continue
            end = j
            while end < close and toks[end].text != ";":
                end = self._skip(end) if toks[end].text in ("(", "{") else end + 1
            self._member(j, end, brace, out)
            j = end + 1
        return out

    def _member(self, lo: int, hi: int, brace: int, out: dict[str, _Field]) -> None:
        """One member declaration ``TYPE NAME[E]...[, NAME2[E]...];`` at [lo, hi)."""
        toks = self.toks
        if any(toks[k].text in ("(", "static", "typedef", "using", "template", "operator") for k in range(lo, hi)):
            return  # a member function, a static member, a type
        words = [k for k in range(lo, hi) if toks[k].kind == "ident" and toks[k].text not in _QUALIFIERS]
        if len(words) < 2:
            return
        type_name = toks[words[0]].text
        k = words[1]
        while k < hi:
            if toks[k].kind != "ident":
                return
            at = k
            k += 1
            extents: list[int | None] = []
            while k < hi and toks[k].text == "[" and k in self.match:
                extents.append(self._eval(k + 1, self.match[k], brace))
                k = self.match[k] + 1
            name = toks[at].text
            if extents and all(e is not None and e > 0 for e in extents):
                out[name] = _Field(name, toks[at].line, extents=tuple(int(e) for e in extents))  # type: ignore[arg-type]
            elif not extents:
                out[name] = _Field(name, toks[at].line, type_name=type_name)
            if k < hi and toks[k].text == ",":
                k += 1
                while k < hi and toks[k].text in ("*", "&"):
                    k += 1
            else:
                return

    # -- access paths -----------------------------------------------------------------------------------------
    def _access(self, k: int, limit: int) -> tuple[_Array, list[tuple[int, int]], int] | None:
        """The shared array that the access path starting at identifier ``k`` names (``s``, ``smem.a.b``),
        the index groups that follow it (before ``limit``) and the index just past them; None when the
        path names no shared array this check knows."""
        toks = self.toks
        if k > 0 and toks[k - 1].text in (".", "->", "::"):
            return None
        d = self._lookup(toks[k].text, k)
        if d is None:
            return None
        j = k + 1
        if d.extents is not None:
            if not d.shared:
                return None
            arr = _Array(toks[k].text, d.extents, d.line)
        else:
            members = self.shared_vars.get(d.pos)
            if members is None:
                return None
            path = [toks[k].text]
            arr = None
            while j + 1 < limit and toks[j].text == "." and toks[j + 1].kind == "ident":
                f = members.get(toks[j + 1].text) if members is not None else None
                if f is None:
                    return None
                if f.type_name is not None and f.type_name in self.types:
                    f = _Field(f.name, f.line, members=self.types[f.type_name])
                path.append(f.name)
                j += 2
                if f.extents is not None:
                    arr = _Array(".".join(path), f.extents, f.line)
                    break
                members = f.members
            if arr is None:
                return None
        groups: list[tuple[int, int]] = []
        while j < limit and toks[j].text == "[" and j in self.match:
            groups.append((j + 1, self.match[j]))
            j = self.match[j] + 1
        if len(groups) > len(arr.extents) or any(hi <= lo for lo, hi in groups):
            return None
        return arr, groups, j

    def _pointers(self) -> None:
        """Pointers declared with an address into a shared array (``T* p = &s[i][j];``, ``T* p = s[i];``) and
        never assigned again."""
        toks = self.toks
        for name, decls in self.decls.items():
            for d in decls:
                at = d.pos
                if d.extents is not None or not (1 <= at < self.n - 2) or toks[at].text != name:
                    continue
                if toks[at - 1].text != "*" or toks[at + 1].text != "=":
                    continue
                k = at + 2
                amp = toks[k].text == "&"
                k += amp
                if k >= self.n or toks[k].kind != "ident":
                    continue
                end = k
                while end < self.n and toks[end].text not in (";", ","):
                    end += 1
                got = self._access(k, end)
                if got is None or got[2] != end:
                    continue
                arr, groups, _ = got
                if len(groups) != (len(arr.extents) if amp else len(arr.extents) - 1):
                    continue
                if any(toks[j].text == name and j != at and (toks[j + 1].text in _ASSIGN | {"++", "--"} or toks[j - 1].text in ("++", "--", "&"))
                       for j in range(at + 1, min(d.end + 1, self.n - 1))):
                    continue
                self.pointers[at] = (arr, groups, at)

    # -- uses -------------------------------------------------------------------------------------------------
    def shared_overruns(self) -> list[SharedOverrun]:
        toks = self.toks
        found: dict[tuple[int, int, int], SharedOverrun] = {}
        for k, t in enumerate(toks[:-1]):
            if not self._in_scope(k):
                continue
            if t.kind == "ident" and k not in self.decl_tokens and k not in self.shared_vars:
                d = self._lookup(t.text, k) if k == 0 or toks[k - 1].text not in (".", "->", "::") else None
                if d is not None and d.pos in self.pointers and toks[k + 1].text == "[" and k + 1 in self.match:
                    arr, base, _ = self.pointers[d.pos]
                    self._flat(found, k, k, arr, base, (k + 2, self.match[k + 1]), self.match[k + 1])
                    continue
                if k > 0 and toks[k - 1].text == "&":
                    continue
                got = self._access(k, self.n)
                if got is None:
                    continue
                arr, groups, end = got
                if not groups:
                    continue
                plain = toks[k + 1].text == "["  # a plain __shared__ array: LOCAL_ARRAY_BOUNDS' own unless strided
                text = " ".join(self.text[toks[k].start : toks[end - 1].end].split())
                for dim, ((lo, hi), size) in enumerate(zip(groups, arr.extents)):
                    hit = self._range_of([(lo, hi, 1)], k)
                    if hit is None or (0 <= hit[0] and hit[1] < size):
                        continue
                    strided = tuple(L.decl.name for L in hit[2] if id(L.decl) in self._strided_ids())
                    if plain and not strided:
                        continue
                    found[(t.line, t.col, dim)] = SharedOverrun(
                        t.line, t.col, arr.name, size, dim, arr.extents, arr.line, self._src(lo, hi), hit[0], hit[1],
                        self._loops(hit[2]), strided, text, hit[3], self._label(),
                    )  # fmt: skip
            elif t.text == "(" and toks[k + 1].text == "&" and k in self.match:
                close = self.match[k]
                if close + 1 >= self.n or toks[close + 1].text != "[" or close + 1 not in self.match:
                    continue
                got = self._access(k + 2, close)
                if got is None or got[2] != close or len(got[1]) != len(got[0].extents):
                    continue
                self._flat(found, k, k + 2, got[0], got[1], (close + 2, self.match[close + 1]), self.match[close + 1])
        return [found[key] for key in sorted(found)]

    def _per_thread(self, loop: _Loop) -> bool:
        return loop.decl.pos in self.strided

    def _strided_ids(self) -> set[int]:
        return {id(L.decl) for L in self.loops if L.decl.pos in self.strided}

    def _src(self, lo: int, hi: int) -> str:
        return " ".join(self.text[self.toks[lo].start : self.toks[hi - 1].end].split())

    def _loops(self, loops: list[_Loop]) -> tuple[tuple[str, int, int, int], ...]:
        return tuple((L.decl.name, L.values[0], L.values[-1], L.line) for L in loops if L.values)

    def _flat(self, found: dict[tuple[int, int, int], SharedOverrun], start: int, name_at: int, arr: _Array,
              base: list[tuple[int, int]], index: tuple[int, int], end: int) -> None:  # fmt: skip
        """Record the use at ``start`` when its flat element (the address ``base`` into ``arr`` plus
        ``index``) leaves the array."""
        ext = arr.extents
        weights = [math.prod(ext[d + 1 :]) for d in range(len(ext))]
        terms = [(lo, hi, w) for (lo, hi), w in zip(base, weights)] + [(index[0], index[1], 1)]
        hit = self._range_of(terms, start)
        total = math.prod(ext)
        if hit is None or (0 <= hit[0] and hit[1] < total):
            return
        t = self.toks[start]
        pieces = []
        for lo, hi, w in terms:
            src = self._src(lo, hi)
            if src != "0":
                src = src if hi - lo == 1 or w == 1 and len(pieces) == 0 else f"({src})"
                pieces.append(f"{src} * {w}" if w != 1 else src)
        strided = tuple(L.decl.name for L in hit[2] if id(L.decl) in self._strided_ids())
        found[(t.line, t.col, -1)] = SharedOverrun(
            t.line, t.col, arr.name, total, -1, ext, arr.line, " + ".join(pieces) or "0", hit[0], hit[1],
            self._loops(hit[2]), strided, " ".join(self.text[t.start : self.toks[end].end].split()), hit[3], self._label(),
        )  # fmt: skip
