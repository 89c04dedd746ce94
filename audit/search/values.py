"""Numeric stress cases: which kernel inputs reach ``exp``, ``log``, ``sqrt``, a divisor..., and the extra
verify cases that push exactly those inputs to the values where float32 numerics break.

The normal verify cases draw every input from its value domain (N(0, 1) logits, say), which never
reaches the regime where a kernel's numerics break: a softmax that forgets to subtract the row max
is right for every logit below ~88.7 (float32 ``exp`` overflows at 88.72) and NaN past it. This
module reads the kernel's source and proposes *stress cases*, each one input changed in one way:

* :func:`math_uses` — a simple, documented flow analysis of the entry function (through the tokenizer
  and :class:`audit.cuda.scope.Source`): a parameter *flows into* a local variable that is assigned an
  expression naming it (``const float* row = logits + b * K``, ``l[k] = __ldg(row + k)``; taint follows
  assignments, compound assignments and loops to a fixed point); a call statement (``helper(x, W, s)``)
  taints its identifier arguments, indirectly. The flow is **direct** while every step is a load or an
  additive term (``+``, ``-``, ``fmaxf``/``fminf``, ``__ldg``, casts, indexing by something else): the
  value at the use is the input's value up to a shift; a product, quotient or any other call makes it
  indirect (``expf(l - m)`` yields a value that no longer tracks ``l`` additively). Uses are arguments
  of ``exp``-like calls (``exp``, ``expf``, ``__expf``, ``exp2f``, ``expm1f``, ``tanh``, ``tanhf``),
  ``log``-like calls, ``sqrt``/``rsqrt`` calls, and right operands of ``/``. Only direct uses make stress
  cases (an indirect use is reported as found but not stressed: the input's magnitude does not reach
  the function). Calls of the source's own functions and of those of the local headers it includes are
  followed into (parameters mapped to arguments, three levels deep); a use in a header names its file.
* :func:`stress_plan` — per float input, within its declared domain: for a direct ``exp``/``tanh`` use,
  every element shifted by +100, by -100, and by ±100 at random signs (past float32 ``exp`` overflow
  and underflow; still far inside float64's 709, so a float64 reference stays exact), plus ±0 and
  denormals at a quarter of the positions; for a direct divisor, ``log``, ``sqrt`` or ``rsqrt`` use,
  near-zero values (±1e-30, positive only for ``log``/``sqrt``/``rsqrt``) at a quarter of the positions,
  where the domain contains them. A bounded domain clips the values; a case the bounds keep out of the
  regime (``max = 10`` for an ``exp`` input) is not made and the plan says why. An input opts out with
  ``values = { ..., stress = false, stress_reason = "..." }``.

The runtime (:mod:`audit.runtime._kernel`) runs every stress case as an extra case at the first size of
the sweep (reference, NaN, guard and mask checks), labelled ``B=37 (stress logits exp+100)``; the plan's
lines are the kernel's notes in ``wireup verify``'s output.

>>> uses = math_uses('extern "C" __global__ void k(const float* x, float* y, int n) {'
...                  '  float v = x[0] + 1.0f; y[0] = expf(v) / n; }', "k")
>>> sorted((u.param, u.op, u.direct) for u in uses)   # the plan stresses tensor inputs only (not n)
[('n', 'div', True), ('x', 'exp', True)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cuda.scope import Source

if TYPE_CHECKING:
    import numpy as np

    from ..model import Kernel

EXP_FUNCS = frozenset({"exp", "expf", "__expf", "exp2f", "exp2", "expm1f", "expm1", "tanh", "tanhf", "__tanhf"})
LOG_FUNCS = frozenset({"log", "logf", "__logf", "log2f", "log10f", "__log2f", "__log10f"})
ROOT_FUNCS = frozenset({"sqrt", "sqrtf", "__fsqrt_rn", "rsqrt", "rsqrtf", "__frsqrt_rn"})
# calls that keep a value's flow direct (a load, a max/min, a conversion)
PASS_THROUGH = frozenset({"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv", "fmaxf", "fminf", "fmax", "fmin", "max", "min",
                          "static_cast", "float", "double", "__float2half", "__half2float", "__bfloat162float"})  # fmt: skip
_ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "|=", "&=", "^=", "%="})
_TERM_BOUNDARY = frozenset({"+", "-", ",", "?", ":", "=", "+=", "-=", "return", "<", ">", "<=", ">=", "==", "!=", "&&", "||"})

SHIFT = 100.0  # past float32 exp overflow (88.72) and underflow; far from float64's 709.8
EXP_OVERFLOW = 88.72
NEAR_ZERO = 1e-30
DENORMAL = 1e-40


@dataclass(frozen=True)
class MathUse:
    """Parameter ``param`` reaches a use of kind ``op`` (``exp``, ``log``, ``root``, ``div``) at ``line``;
    ``direct``: through loads and additive terms only (see the module docstring)."""

    param: str
    op: str
    line: int
    direct: bool
    file: str = ""  # the header the use is in ("": the kernel's own source)


@dataclass(frozen=True)
class StressCase:
    """One extra verify case: input ``param`` transformed by ``kind`` (``exp+100``, ``exp-100``,
    ``exp±100``, ``zeros``, ``near-zero``), because of ``why`` (``exp at line 49``)."""

    param: str
    kind: str
    why: str
    lo: float | None = None  # the domain's bounds the values are clipped to
    hi: float | None = None
    signed: bool = True  # near-zero values may be negative

    @property
    def label(self) -> str:
        return f"stress {self.param} {self.kind}"


@dataclass(frozen=True)
class StressPlan:
    """The stress cases of a kernel and one sentence per input that was not stressed, and why."""

    cases: tuple[StressCase, ...]
    skipped: tuple[str, ...]

    def lines(self, kernel: str) -> list[str]:
        """What was stressed, one line per input (the kernel's notes in ``wireup verify``'s output)."""
        by_param: dict[str, dict[str, list[str]]] = {}
        for c in self.cases:
            by_param.setdefault(c.param, {}).setdefault(c.why, []).append(c.kind)
        out = [f'stress cases of "{kernel}": input "{p}": ' + "; ".join(f'{", ".join(kinds)} ({why})' for why, kinds in groups.items())
               for p, groups in by_param.items()]  # fmt: skip
        return out + [f'stress cases of "{kernel}": {s}' for s in self.skipped]


# -- the flow analysis -----------------------------------------------------------------------------------
def _param_names(src: Source, open_brace: int) -> list[str]:
    toks = src.tokens
    j = open_brace - 1
    while j >= 0 and toks[j].text != ")":
        j -= 1
    start = src.match.get(j)
    if start is None:
        return []
    names, depth, last = [], 0, None
    for t in toks[start + 1 : j]:
        if t.text in "([{<":
            depth += 1
        elif t.text in ")]}>":
            depth -= 1
        elif t.text == "," and depth == 0:
            if last:
                names.append(last)
            last = None
        elif t.kind == "ident" and depth == 0:
            last = t.text
    if last:
        names.append(last)
    return names


def _binary(toks, i: int) -> bool:
    """Whether the ``*``/``/``/``%`` at ``i`` is a binary operator (not a dereference or a pointer type)."""
    if i == 0:
        return False
    p = toks[i - 1]
    return p.kind in ("ident", "number") or p.text in (")", "]")


def _is_direct(src: Source, i: int, lo: int, hi: int) -> bool:
    """Whether the identifier at token ``i`` is an additive term of the expression ``[lo, hi)`` (through
    parentheses, casts and pass-through calls)."""
    toks = src.tokens
    pos, glo, ghi = i, lo, hi
    while True:
        # the innermost bracket group around pos inside [glo, ghi)
        opener = None
        depth = 0
        for j in range(pos - 1, glo - 1, -1):
            t = toks[j].text
            if t in (")", "]"):
                depth += 1
            elif t in ("(", "["):
                if depth == 0:
                    opener = j
                    break
                depth -= 1
        a = (opener + 1) if opener is not None else glo
        b = src.match.get(opener, ghi) if opener is not None else ghi
        # the term around pos at this level
        for rng, opens, closes in ((range(pos - 1, a - 1, -1), ")]", "(["), (range(pos + 1, b), "([", ")]")):
            d = 0
            for j in rng:
                t = toks[j].text
                if t in opens:
                    d += 1
                    continue
                if t in closes:
                    d -= 1
                    continue
                if d != 0:
                    continue
                if t in _TERM_BOUNDARY or t == ";":
                    break
                if t in ("*", "/", "%") and _binary(toks, j):
                    return False
        if opener is None:
            return True
        if toks[opener].text == "[":
            return False  # an index: the value is an address, not a term
        prev = toks[opener - 1] if opener > 0 else None
        if prev is not None and prev.kind == "ident" and prev.text not in PASS_THROUGH:
            return False  # a call (a math function or a helper): its result does not track the value
        if prev is not None and prev.text == ">" and opener - 1 in src.template_brackets:
            pass  # static_cast<float>(x)
        pos = opener - 1 if prev is not None and prev.kind == "ident" else opener
        if pos < glo:
            return True


def _statements(src: Source, open_: int, close: int) -> list[tuple[int, int]]:
    out, start = [], open_ + 1
    for i in range(open_ + 1, close):
        t = src.tokens[i]
        if t.kind == "punct" and t.text in (";", "{", "}"):
            if i > start:
                out.append((start, i))
            start = i + 1
    if close > start:
        out.append((start, close))
    return out


def _strip_head(src: Source, a: int, b: int) -> int:
    """Skip ``if (...)``, ``else``, ``for (``, ``while (...)`` at the front of a statement."""
    toks = src.tokens
    for j in range(a, b):  # the rest of a for header: "++k) x = ..." starts after its ")"
        if toks[j].text == ")" and src.match.get(j, -1) < a:
            a = j + 1
    while a < b:
        t = toks[a].text
        if t in ("if", "while", "switch") and a + 1 < b and toks[a + 1].text == "(":
            a = src.match.get(a + 1, b - 1) + 1
        elif t == "for" and a + 1 < b and toks[a + 1].text == "(":
            a += 2
        elif t in ("else", "do", "return"):
            a += 1
        else:
            break
    return a


def _refs(src: Source, a: int, b: int, taint: Mapping[str, dict[str, bool]], lo: int, hi: int) -> dict[str, bool]:
    """param -> direct for the tainted identifiers in tokens [a, b) (not inside an index)."""
    toks = src.tokens
    out: dict[str, bool] = {}
    depth = 0
    for i in range(a, b):
        t = toks[i]
        if t.text == "[":
            depth += 1
        elif t.text == "]":
            depth -= 1
        elif depth == 0 and t.kind == "ident" and t.text in taint and not (i > 0 and toks[i - 1].text in (".", "->")):
            here = _is_direct(src, i, lo, hi)
            for p, d in taint[t.text].items():
                out[p] = out.get(p, False) or (d and here)
    return out


def _merge(dst: dict[str, bool], src_: Mapping[str, bool]) -> bool:
    changed = False
    for p, d in src_.items():
        if p not in dst or (d and not dst[p]):
            dst[p] = dst.get(p, False) or d
            changed = True
    return changed


def _lhs_name(src: Source, a: int, op: int) -> str | None:
    toks = src.tokens
    depth = 0
    name = None
    for i in range(a, op):
        t = toks[i]
        if t.text in ("[", "("):
            depth += 1
        elif t.text in ("]", ")"):
            depth -= 1
        elif depth == 0 and t.kind == "ident" and not (i > 0 and toks[i - 1].text in (".", "->")):
            name = t.text
    return name


def math_uses(text: str, entry: str, headers: Sequence[tuple[str, str]] = ()) -> list[MathUse]:
    """The uses of the entry function's parameters in math functions and divisors (see the module
    docstring). ``headers``: (path, text) of the headers the source includes, whose functions are followed
    too where the source does not define one of that name; a use in one names its path."""
    src = Source.parse(text)
    fn = src.entry(entry)  # a cpp_name (ns::k<256>) is the template's definition
    if fn is None:
        return []
    helpers: dict[str, tuple[Source, Any, str]] = {}
    for path, htext in headers:
        hsrc = Source.parse(htext)
        for f in hsrc.functions:
            if not f.is_global and f.close > f.open:
                helpers.setdefault(f.name, (hsrc, f, path))
    for f in src.functions:
        if not f.is_global and f.close > f.open and f is not fn:
            helpers[f.name] = (src, f, "")
    return [MathUse(p, op, line, d, file) for (p, op, line, file), d in _function_uses(src, fn, "", helpers, {}, 0).items()]


def _function_uses(src: Source, fn, path: str, helpers: Mapping[str, tuple[Source, Any, str]], memo: dict,
                   depth: int) -> dict[tuple[str, str, int, str], bool]:  # fmt: skip
    """(param, op, line, file) -> direct for one function; calls of ``helpers`` (the source's own
    functions, then its headers') are followed (their parameters mapped to the arguments), three levels deep."""
    key = (path, fn.name)
    if key in memo:
        return memo[key]
    memo[key] = {}  # recursion guard
    toks = src.tokens
    taint: dict[str, dict[str, bool]] = {p: {p: True} for p in _param_names(src, fn.open)}
    stmts = _statements(src, fn.open, fn.close)
    for _ in range(8):  # to a fixed point (loops carry values back)
        changed = False
        for a0, b in stmts:
            a = _strip_head(src, a0, b)
            op = next((i for i in range(a, b) if toks[i].text in _ASSIGN and _depth_at(src, a, i) == 0), None)
            if op is None:
                # a call statement: its identifier arguments may be outputs of the call (indirect)
                if b - a >= 2 and toks[a].kind == "ident" and toks[a + 1].text == "(":
                    refs = _refs(src, a + 2, b, taint, a + 2, b)
                    if refs:
                        for i in range(a + 2, b):
                            if toks[i].kind == "ident" and toks[i].text not in taint and toks[i + 1].text in (",", ")"):
                                taint[toks[i].text] = {p: False for p in refs}
                                changed = True
                continue
            name = _lhs_name(src, a, op)
            if name is None:
                continue
            refs = _refs(src, op + 1, b, taint, op + 1, b)
            if toks[op].text not in ("=", "+=", "-="):
                refs = {p: False for p in refs}
            if refs:
                changed |= _merge(taint.setdefault(name, {}), refs)
        if not changed:
            break
    uses: dict[tuple[str, str, int, str], bool] = {}

    def add(key: tuple[str, str, int, str], d: bool) -> None:
        uses[key] = uses.get(key, False) or d

    for i in range(fn.open + 1, fn.close):
        t = toks[i]
        kind = None
        if t.kind == "ident" and i + 1 < fn.close and toks[i + 1].text == "(":
            kind = "exp" if t.text in EXP_FUNCS else "log" if t.text in LOG_FUNCS else "root" if t.text in ROOT_FUNCS else None
            if kind:
                a, b = i + 2, src.match.get(i + 1, fn.close)
            elif t.text in helpers and helpers[t.text][1] is not fn and depth < 3:
                hsrc, hfn, hpath = helpers[t.text]
                inner = _function_uses(hsrc, hfn, hpath, helpers, memo, depth + 1)
                hparams = _param_names(hsrc, hfn.open)
                close = src.match.get(i + 1, fn.close)
                for k, (a, b) in enumerate(_args(src, i + 2, close)):
                    if k >= len(hparams):
                        break
                    refs = _refs(src, a, b, taint, a, b)
                    for (hp, op, line, file), d in inner.items():
                        if hp == hparams[k]:
                            for p, dp in refs.items():
                                add((p, op, line, file), d and dp)
                continue
        elif t.text in ("/", "/=") and (t.text == "/=" or _binary(toks, i)):
            kind = "div"
            a, b = i + 1, _operand_end(src, i + 1, fn.close)
        if not kind:
            continue
        for p, d in _refs(src, a, b, taint, a, b).items():
            add((p, kind, t.line, path), d)
    memo[key] = uses
    return uses


def _args(src: Source, a: int, b: int) -> list[tuple[int, int]]:
    out, start, depth = [], a, 0
    for i in range(a, b):
        t = src.tokens[i].text
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif t == "," and depth == 0:
            out.append((start, i))
            start = i + 1
    if b > start:
        out.append((start, b))
    return out


def _depth_at(src: Source, a: int, i: int) -> int:
    d = 0
    for j in range(a, i):
        t = src.tokens[j].text
        if t in ("(", "["):
            d += 1
        elif t in (")", "]"):
            d -= 1
    return d


def _operand_end(src: Source, i: int, limit: int) -> int:
    """The end of the unary/postfix operand starting at ``i`` (the right operand of a ``/``)."""
    toks = src.tokens
    j = i
    while j < limit and toks[j].text in ("(",) and j + 1 < limit and toks[j + 1].kind == "ident" and src.match.get(j, limit) < limit \
            and toks[src.match[j] - 1].kind == "ident" and src.match[j] - j <= 3:  # fmt: skip
        j = src.match[j] + 1  # a cast: (float)x
    while j < limit and toks[j].text in ("-", "+", "!", "~", "*", "&"):
        j += 1
    if j < limit and toks[j].text == "(":
        j = src.match.get(j, limit - 1) + 1
    elif j < limit:
        j += 1
    while j < limit and toks[j].text in ("[", "(", ".", "->"):
        j = src.match.get(j, limit - 1) + 1 if toks[j].text in "([" else j + 2
    return j


# -- the plan ---------------------------------------------------------------------------------------------
def stress_plan(kernel: Kernel, text: str | None, domains: Mapping[str, tuple[str, float | None, float | None, bool]],
                opt_out: Mapping[str, str], headers: Sequence[tuple[str, str]] = ()) -> StressPlan:  # fmt: skip
    """The stress cases of ``kernel`` from its source ``text`` and the ``headers`` it includes ((path, text),
    whose functions its calls are followed into).

    ``domains``: input name -> (kind, lo, hi, float) with kind ``choices``, ``range`` or ``scale`` (the
    resolved domain at the case's dims); ``opt_out``: input name -> the contract's ``stress_reason``.
    """
    if text is None:
        return StressPlan((), ("the kernel source cannot be read; nothing stressed",))
    # the contract's name of the entry: its extern "C" symbol, or its cpp_name (``entry`` is None then)
    if Source.parse(text).entry(kernel.symbol) is None:
        return StressPlan((), (f'the source defines no function "{kernel.symbol}" (the entry); nothing stressed',))
    uses = math_uses(text, kernel.symbol, headers)
    inputs = {p.name: p for p in kernel.tensors if p.role != "out"}
    by_param: dict[str, list[MathUse]] = {}
    for u in uses:
        if u.param in inputs:
            by_param.setdefault(u.param, []).append(u)
    cases: list[StressCase] = []
    skipped: list[str] = []
    for name, us in by_param.items():
        us.sort(key=lambda u: (u.file, u.line, u.op))
        direct = [u for u in us if u.direct]
        if not direct:
            skipped.append(f'input "{name}" reaches {_ops(us)} only through products or calls; not stressed')
            continue
        if name in opt_out:
            skipped.append(f'input "{name}" ({_ops(direct)}) opts out: {opt_out[name]}')
            continue
        if inputs[name].dtype not in ("f32", "f64"):
            skipped.append(f'input "{name}" ({_ops(direct)}) is {inputs[name].dtype}; only f32 and f64 inputs are stressed')
            continue
        kind, lo, hi, _ = domains.get(name, ("scale", None, None, True))
        if kind == "choices":
            skipped.append(f'input "{name}" ({_ops(direct)}) has a domain of choices; not stressed')
            continue
        ops = {u.op for u in direct}
        if "exp" in ops:
            why = _ops([u for u in direct if u.op == "exp"])
            made = []
            if hi is None or hi > EXP_OVERFLOW:
                made.append(StressCase(name, "exp+100", why, lo, hi))
            if lo is None or lo < -EXP_OVERFLOW:
                made.append(StressCase(name, "exp-100", why, lo, hi))
            if (hi is None or hi > EXP_OVERFLOW) and (lo is None or lo < -EXP_OVERFLOW):
                made.append(StressCase(name, "exp±100", why, lo, hi))
            if lo is None or hi is None or lo <= 0.0 <= hi:
                made.append(StressCase(name, "zeros", why, lo, hi))
            if not made:
                skipped.append(f'input "{name}" ({why}): its domain [{lo:g}, {hi:g}] stays inside float32 exp range; not stressed')
            cases.extend(made)
        near = sorted(ops & {"div", "log", "root"})
        if near:
            why = _ops([u for u in direct if u.op in near])
            positive = bool(ops & {"log", "root"})
            if (lo is None or lo <= NEAR_ZERO) and (hi is None or hi >= NEAR_ZERO):
                cases.append(StressCase(name, "near-zero", why, lo, hi, signed=not positive and (lo is None or lo <= -NEAR_ZERO)))
            else:
                skipped.append(f'input "{name}" ({why}): its domain [{lo:g}, {hi:g}] excludes near-zero values; not stressed')
    for name, reason in opt_out.items():
        if name in inputs and name not in by_param:
            skipped.append(f'input "{name}" opts out ({reason}) but reaches no exp, log, root or divisor')
    return StressPlan(tuple(cases), tuple(skipped))


def stress_headers(cfg: Any, source: Path) -> list[tuple[str, str]]:
    """(path relative to the project root, text) of every local header ``source`` includes, transitively
    (:func:`audit.hashing.include_closure`: next to the including file or in the include folders; package
    headers such as CUTLASS's are not among them); an unreadable one is left out."""
    from ..hashing import include_closure
    from ..untrusted import SOURCE_LIMIT, UnreadableFile, read_text

    root = Path(cfg.root).resolve()
    out = []
    me = source.resolve()
    for path in include_closure(source, [cfg.path(d) for d in cfg.include_dirs]):
        if path.resolve() == me:
            continue
        try:
            text = read_text(path, root, SOURCE_LIMIT)
        except (OSError, UnreadableFile, UnicodeDecodeError):
            continue
        try:
            rel = path.resolve().relative_to(root).as_posix()
        except ValueError:
            rel = path.as_posix()
        out.append((rel, text))
    return out


def _ops(us: list[MathUse]) -> str:
    """``exp at lines 12, 40, a divisor at line 7`` (a use in a header: ``exp at line 23 of kernels/common.cuh``)."""
    names = {"exp": "exp", "log": "log", "root": "sqrt", "div": "a divisor"}
    seen: dict[tuple[str, str], list[int]] = {}
    for u in us:
        seen.setdefault((names[u.op], u.file), []).append(u.line)
    return ", ".join(f"{op} at line{'s' if len(ls) > 1 else ''} {', '.join(str(x) for x in sorted(set(ls)))}" + (f" of {file}" if file else "")
                     for (op, file), ls in seen.items())  # fmt: skip


def apply_stress(case: StressCase, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``data`` (one input's drawn values) with ``case`` applied, clipped to the domain, in its dtype."""
    import numpy as np

    x = np.asarray(data, dtype=np.float64).copy()
    flat = x.reshape(-1)
    n = flat.size
    if case.kind == "exp+100":
        flat += SHIFT
    elif case.kind == "exp-100":
        flat -= SHIFT
    elif case.kind == "exp±100":
        flat += SHIFT * rng.choice(np.array([-1.0, 1.0]), size=n)
    elif case.kind in ("zeros", "near-zero"):
        if case.kind == "zeros":
            special = np.array([0.0, -0.0, DENORMAL, -DENORMAL, 2 * DENORMAL])
        else:
            special = np.array([NEAR_ZERO, -NEAR_ZERO, 3 * NEAR_ZERO] if case.signed else [NEAR_ZERO, 3 * NEAR_ZERO])
        if n:
            pos = rng.choice(n, size=max(min(n, len(special)), n // 4), replace=False)
            flat[pos] = np.resize(special, pos.size)
    else:
        raise ValueError(f"unknown stress kind {case.kind!r}")
    if case.lo is not None or case.hi is not None:
        zero_sign = np.signbit(flat) & (flat == 0)
        flat[:] = np.clip(flat, case.lo if case.lo is not None else -np.inf, case.hi if case.hi is not None else np.inf)
        flat[zero_sign & (flat == 0)] = -0.0
    return x.astype(data.dtype)
