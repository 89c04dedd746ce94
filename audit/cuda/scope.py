"""Where a kernel's mutations may land: the body of its entry function and of the functions and types of
the same file that the entry reaches, never another kernel of that file.

:func:`find_functions` finds every function definition at namespace or class scope (with its owning
struct, and whether it is ``__global__``; a functor's ``operator()`` counts); :func:`reachable_bodies` starts
from the entry and follows every identifier that names a function, a struct or a type alias of the file (a
struct brings all its member functions: ``Dz1Loader la{...}`` passed to a header's main loop still runs
``Dz1Loader::load``; an alias brings what it names: ``using Op = LinearCombinationGeneric<Elu, float>;``
reaches ``Elu::operator()``, which a template library calls where no name shows it).
Headers are not followed: what a kernel shares with others through a header is mutated nowhere, so a
mutant always stays private to the kernel under test. :class:`Source` also marks template angle brackets,
so ``reinterpret_cast<float4*>`` is never read as two comparisons.

>>> src = Source.parse('__device__ int sq(int x) { return x * x; }\\n'
...                    'extern "C" __global__ void k(int* o) { o[0] = sq(3); }\\n'
...                    'extern "C" __global__ void other(int* o) { o[0] = 1; }')
>>> [f.name for f in src.reachable_bodies("k")]
['sq', 'k']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Hashable, NamedTuple, TypeVar

from .tokens import Token, tokenize

K = TypeVar("K", bound=Hashable)

# words that can precede "(" without naming a function being defined
_NOT_FUNCTIONS = frozenset(
    "if for while switch catch return sizeof alignof decltype static_assert __launch_bounds__ __cluster_dims__ "
    "__align__ alignas __attribute__ __declspec noexcept throw new delete operator".split()
)
_AFTER_PARAMS = frozenset({"const", "noexcept", "override", "final", "volatile", "mutable", "&", "&&"})


@dataclass
class Function:
    """A function definition: its name, owning struct (or None), ``__global__`` or not, and token indices
    of its body braces (``open`` and ``close``)."""

    name: str
    owner: str | None
    is_global: bool
    open: int
    close: int = -1
    line: int = 0
    template: str | None = None  # its ``template <...>`` head as written, tokens joined by spaces ("< int N = 4 >")


@dataclass
class Source:
    """A tokenized kernel source with its functions, structs and template brackets."""

    text: str
    tokens: list[Token]
    functions: list[Function] = field(default_factory=list)
    structs: set[str] = field(default_factory=set)
    template_brackets: set[int] = field(default_factory=set)  # token indices of template "<" and ">"
    match: dict[int, int] = field(default_factory=dict)  # bracket token index -> its partner
    # type aliases (``using N = ...;``, ``typedef ... N;``) at any scope: name -> token ranges of what they name
    aliases: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Source:
        """The structure of ``text``, kept for the process by the text: the source analyses of one check
        (bounds per instance, shared bounds, uninitialised reads, fixed tails, headers) read the same file
        many times. The result is shared: nothing may change it."""
        return _parsed(cls, text)

    @classmethod
    def _parse(cls, text: str) -> Source:
        src = cls(text, tokenize(text))
        src._match_brackets()
        src._find_functions()
        src._find_templates()
        src._find_aliases()
        return src

    # -- structure ------------------------------------------------------------------------------------
    def _match_brackets(self) -> None:
        stack: list[int] = []
        pairs = {")": "(", "]": "[", "}": "{"}
        for i, t in enumerate(self.tokens):
            if t.kind != "punct":
                continue
            if t.text in "([{":
                stack.append(i)
            elif t.text in pairs:
                # tolerate unbalanced code: pop to the nearest opener of the right kind
                while stack and self.tokens[stack[-1]].text != pairs[t.text]:
                    stack.pop()
                if stack:
                    j = stack.pop()
                    self.match[i] = j
                    self.match[j] = i

    def _find_functions(self) -> None:
        toks = self.tokens
        scopes: list[tuple[str, str | None, Function | None]] = []  # (kind, struct name, function)
        stmt_start = 0
        i = 0
        while i < len(toks):
            t = toks[i]
            in_code = any(k == "function" for k, _, _ in scopes)
            if t.text == "{" and t.kind == "punct":
                if in_code:
                    scopes.append(("block", None, None))
                else:
                    kind, name, fn = self._classify_brace(stmt_start, i, scopes)
                    if fn is not None:
                        self.functions.append(fn)
                    if kind == "class" and name:
                        self.structs.add(name)
                    scopes.append((kind, name, fn))
                stmt_start = i + 1
            elif t.text == "}" and t.kind == "punct":
                if scopes:
                    kind, _, fn = scopes.pop()
                    if fn is not None:
                        fn.close = i
                stmt_start = i + 1
            elif t.text == ";" and t.kind == "punct" and not in_code:
                stmt_start = i + 1
            i += 1

    def _classify_brace(self, start: int, i: int, scopes) -> tuple[str, str | None, Function | None]:
        toks = self.tokens
        words = [t.text for t in toks[start:i]]
        if "namespace" in words:
            return "namespace", None, None
        if words[:2] == ["extern", '"C"'] and len(words) == 2:
            return "namespace", None, None
        j = i - 1
        while j >= start and toks[j].text in _AFTER_PARAMS:
            j -= 1
        if j >= start and toks[j].text == ")" and j in self.match:
            k = self.match[j] - 1
            name = toks[k].text if k >= start and toks[k].kind == "ident" and toks[k].text not in _NOT_FUNCTIONS else None
            if name is None and k >= start and toks[k].kind == "punct":
                # an operator: "operator()", "operator[]", "operator+=" ... (a functor's call is how CUTLASS,
                # CUB and thrust hand code to a template)
                m = k
                while m > start and toks[m].kind == "punct" and k - m < 3:
                    m -= 1
                if toks[m].text == "operator" and m < k:
                    name, k = "operator" + "".join(t.text for t in toks[m + 1 : k + 1]), m
            if name is not None:
                owner = next((n for kind, n, _ in reversed(scopes) if kind == "class"), None)
                return "function", None, Function(name, owner, "__global__" in words, i, line=toks[k].line, template=_template_head(words))
        for kw in ("struct", "class", "union"):
            if kw in words and "=" not in words[: words.index(kw)]:
                after = words[words.index(kw) + 1 :]
                name = next((w for w in after if w.isidentifier() and not w.startswith("__")), None)
                return "class", name, None
        return "other", None, None

    def _find_templates(self) -> None:
        """Mark ``<`` ... ``>`` pairs that are template argument lists (see :meth:`_template_close`)."""
        toks = self.tokens
        for i, t in enumerate(toks):
            if t.text == "<" and t.kind == "punct" and i > 0 and (toks[i - 1].kind == "ident" or toks[i - 1].text == "template"):
                close = self._template_close(i)
                if close is not None:
                    self.template_brackets.update((i, close))

    def _template_close(self, i: int) -> int | None:
        """The ``>`` closing a template list opened at ``i``, or None when ``<`` is a comparison: the list
        must close before any ``;``, brace, ``&&``, ``||``, ``?``, unmatched ``)`` / ``]`` or ``=`` (but in
        a ``template <...>`` header, whose parameters may have defaults), and be followed
        by ``(``, ``::``, ``{``, ``>``, ``)``, ``,``, ``;`` or a name."""
        toks = self.tokens
        depth = 1
        j = i + 1
        while j < len(toks):
            x = toks[j].text
            if toks[j].kind == "punct":
                if x in ("(", "["):
                    j = self.match.get(j, j)
                elif x in (";", "{", "}", "&&", "||", "?", ")", "]") or (x == "=" and toks[i - 1].text != "template"):
                    return None  # (a template header's parameters may have defaults)
                elif x == "<" and toks[j - 1].kind == "ident":
                    depth += 1
                elif x in (">", ">>"):
                    depth -= 1 if x == ">" else 2
                    if depth <= 0:
                        nxt = toks[j + 1] if j + 1 < len(toks) else None
                        if nxt is None or nxt.kind == "ident" or nxt.text in ("(", "::", "{", ">", ")", ",", ";", "*", "&"):
                            return j
                        return None
            j += 1
        return None

    def _find_aliases(self) -> None:
        """``using NAME = TYPE;`` and ``typedef TYPE NAME;`` anywhere (namespace, struct or function scope):
        NAME -> the token range of TYPE, so that reaching NAME reaches what TYPE names."""
        toks = self.tokens
        for i, t in enumerate(toks):
            if t.kind != "ident" or t.text not in ("using", "typedef"):
                continue
            j = i + 1
            while j < len(toks) and not (toks[j].kind == "punct" and toks[j].text in (";", "{", "}")):
                j = self.match.get(j, j) if toks[j].text in ("(", "[") else j
                j += 1
            if j >= len(toks) or toks[j].text != ";":
                continue
            if t.text == "using":
                if i + 2 < j and toks[i + 1].kind == "ident" and toks[i + 2].text == "=":
                    self.aliases.setdefault(toks[i + 1].text, []).append((i + 3, j))
            else:
                names = [m for m in range(i + 1, j) if toks[m].kind == "ident"]
                if len(names) >= 2:
                    self.aliases.setdefault(toks[names[-1]].text, []).append((i + 1, names[-1]))

    # -- reachability ---------------------------------------------------------------------------------
    def entry(self, symbol: str) -> Function | None:
        """The ``__global__`` function named ``symbol`` (else any function of that name). A C++ name is
        looked up as the function it names (:func:`function_name`): ``ns::tile<32>`` is the definition of
        the template ``tile``, which every instantiation of it shares."""
        name = function_name(symbol)
        named = [f for f in self.functions if f.name == name and f.close > f.open]
        return next((f for f in named if f.is_global), named[0] if named else None)

    def reachable_bodies(self, symbol: str) -> list[Function]:
        """The entry and every function of this file it reaches (see the module docstring), in file order;
        empty when the file defines no such entry. A type alias it names is followed to what it names
        (``using Kernel = Gemm<Epilogue<Elu>>;`` reaches ``Elu``'s member functions)."""
        entry = self.entry(symbol)
        if entry is None:
            return []
        return reach({None: self}, None, entry).get(None, [])

    def body_indices(self, symbol: str) -> list[int]:
        """Token indices inside the reachable bodies (braces excluded), in order."""
        out: list[int] = []
        for f in self.reachable_bodies(symbol):
            out.extend(range(f.open + 1, f.close))
        return sorted(set(out))


def _template_head(words: list[str]) -> str | None:
    """The ``< ... >`` after the first ``template`` of a declaration's tokens, joined by spaces; None where
    there is none (an angle bracket inside parentheses, ``(4 > 2)``, closes nothing)."""
    if "template" not in words:
        return None
    p = words.index("template")
    angles = parens = 0
    for q in range(p + 1, len(words)):
        w = words[q]
        parens += (w in ("(", "[")) - (w in (")", "]"))
        if not parens:
            angles += w.count("<") * (w in ("<", "<<")) - w.count(">") * (w in (">", ">>"))
        if q > p + 1 and angles <= 0 and not parens:
            return " ".join(words[p + 1 : q + 1])
        if q == p + 1 and w != "<":
            return None
    return None


class TemplateParam(NamedTuple):
    """One parameter of a ``template <...>`` head: its name, whether it is a type, its default as written."""

    name: str
    is_type: bool
    default: str | None = None


def template_params(template: str | None) -> list[TemplateParam]:
    """The parameters of a ``template <...>`` head as :class:`CKernel` keeps it (``...`` dropped).

    >>> [tuple(p) for p in template_params("< typename T , int NT = ( 4 > 2 ) , class Acc = float >")]
    [('T', True, None), ('NT', False, '( 4 > 2 )'), ('Acc', True, 'float')]
    >>> template_params(None)
    []
    """
    text = (template or "").strip()
    if not (text.startswith("<") and text.endswith(">")):
        return []

    def top_level(part: str):
        """(character, whether it is outside every bracket) of ``part``; an angle bracket counts only outside
        parentheses (``(4 > 2)`` closes nothing)."""
        parens = angles = 0
        for ch in part:
            parens += (ch in "([") - (ch in ")]")
            if not parens:
                angles += (ch == "<") - (ch == ">")
            yield ch, not parens and not angles and ch not in ")]>"

    parts: list[str] = [""]
    for ch, top in top_level(text[1:-1]):
        if ch == "," and top:
            parts.append("")
        else:
            parts[-1] += ch
    out = []
    for part in parts:
        head, default = part, None
        for n, (ch, top) in enumerate(top_level(part)):  # a top-level "=" starts the default
            if ch == "=" and top:
                head, default = part[:n], part[n + 1 :].strip()
                break
        words = re.findall(r"[A-Za-z_]\w*", head)
        if words:
            out.append(TemplateParam(words[-1], words[0] in ("typename", "class"), default))
    return out


def with_defaults(template: str | None, args: tuple[str, ...]) -> tuple[str, ...] | None:
    """``args`` (explicit template arguments, possibly none, of a function whose ``template <...>`` head is
    ``template``) with the defaults of the parameters they leave out appended, an earlier parameter's name
    in a default replaced by its argument; None where a parameter left out has no default (the compiler
    deduces it from the call). A compiled entry's name carries every argument, defaults included.

    >>> with_defaults("< int BM = 128 , int BN = BM / 2 , int OFFSET = 0 >", ("256",))
    ('256', '(256) / 2', '0')
    >>> with_defaults("< typename T , int N = 4 >", ()) is None
    True
    """
    params = template_params(template)
    out = list(args)
    for param in params[len(args) :]:
        if param.default is None:
            return None
        default = param.default
        for earlier, arg in zip(params, out):
            default = re.sub(rf"\b{re.escape(earlier.name)}\b", f"({arg})" if not earlier.is_type else arg, default)
        out.append(default)
    return tuple(out)


def without_parameters(symbol: str) -> str:
    """``symbol`` without a trailing parameter list: a ``cpp_name`` that names one overload by its signature
    (``ns::f<float>(float*, int)`` -> ``ns::f<float>``); unchanged where it has none.

    >>> without_parameters("scale(float*, int)"), without_parameters("k<(N > 2)>"), without_parameters("operator()")
    ('scale', 'k<(N > 2)>', 'operator()')
    """
    name = symbol.strip()
    if name.endswith(")") and not name.endswith("operator()"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += (name[i] in ")]>") - (name[i] in "([<")
            if depth == 0:
                if name[:i].strip():
                    name = name[:i].rstrip()
                break
    return name


def function_name(symbol: str) -> str:
    """The name a function definition of the C++ name ``symbol`` (a contract's ``cpp_name``, or an entry)
    carries: without a parameter list (``scale(float*, int)``, an overload named by its signature), its template argument list (nested ``<...>`` and parenthesized ``(N > 2)`` within it
    included) and without its namespaces. ``symbol`` unchanged where it closes no balanced argument list
    (``operator->``), as an ``extern "C"`` entry is.

    >>> function_name("ns::tile<Pair<int, 2>, (N > 2)>"), function_name("k<256>"), function_name("k")
    ('tile', 'k', 'k')
    >>> function_name("operator<<int>"), function_name("operator->")
    ('operator<', 'operator->')
    >>> function_name("ns::add2<float>(int, float*, float const*)")   # a cpp_name with its parameter list
    'add2'
    """
    name = without_parameters(symbol)
    if name.endswith(">"):
        depth, parens = 0, 0
        for i in range(len(name) - 1, -1, -1):
            ch = name[i]
            parens += (ch in ")]") - (ch in "([")
            if parens:
                continue
            depth += (ch == ">") - (ch == "<")
            if depth == 0:
                head = name[:i].rstrip()
                if head and not head.endswith("operator"):  # "operator<>" is no template argument list
                    name = head
                break
    depth, start = 0, 0
    for i, ch in enumerate(name):  # the last "::" outside any argument list (``Outer<a::b>::k``)
        depth += (ch in "<([") - (ch in ">)]")
        if depth == 0 and name.startswith("::", i) and not name[:i].rstrip().endswith("operator"):
            start = i + 2
    return name[start:].strip() or symbol.strip()


def reach(files: dict[K, Source], own: K, entry: Function) -> dict[K, list[Function]]:
    """The functions ``entry`` (a function of ``files[own]``) reaches over ``files`` (a kernel source and the
    headers it includes, or one file alone): by name, by owning struct, through type aliases, transitively;
    every other ``__global__`` function excluded. Per file, in file order (files reaching nothing left out)."""
    by_name: dict[str, list[tuple[K, Function]]] = {}
    by_owner: dict[str, list[tuple[K, Function]]] = {}
    aliases: dict[str, list[tuple[K, tuple[int, int]]]] = {}
    for key, src in files.items():
        for f in src.functions:
            if f.close <= f.open or (f.is_global and f is not entry):
                continue
            by_name.setdefault(f.name, []).append((key, f))
            if f.owner:
                by_owner.setdefault(f.owner, []).append((key, f))
        for name, ranges in src.aliases.items():
            aliases.setdefault(name, []).extend((key, r) for r in ranges)
    seen: set[tuple[K, int]] = {(own, entry.open)}
    seen_aliases: set[tuple[K, tuple[int, int]]] = set()
    out: dict[K, list[Function]] = {own: [entry]}
    todo: list[tuple[K, tuple[int, int]]] = [(own, (entry.open + 1, entry.close))]
    while todo:
        key, (a, b) = todo.pop()
        for t in files[key].tokens[a:b]:
            if t.kind != "ident":
                continue
            for q, g in by_name.get(t.text, []) + by_owner.get(t.text, []):
                if (q, g.open) not in seen:
                    seen.add((q, g.open))
                    out.setdefault(q, []).append(g)
                    todo.append((q, (g.open + 1, g.close)))
            for q, rng in aliases.get(t.text, ()):  # a type alias: what it names (using Op = Generic<Elu>;)
                if (q, rng) not in seen_aliases:
                    seen_aliases.add((q, rng))
                    todo.append((q, rng))
    return {key: sorted(fs, key=lambda f: f.open) for key, fs in out.items()}


@lru_cache(maxsize=64)
def _parsed(cls: type[Source], text: str) -> Source:
    return cls._parse(text)

