"""Dim expressions: parsing, free names, evaluation and symbolic comparison.

Shapes, launch geometry and scalar values are written as small integer expressions over named dims:
``"SH2 + 6"``, ``"ceil_div(B, 256)"``, ``"min(ceil_div(B, 64), 32)"``, ``"slot(AUX_LABEL_SCALE_EMA)"``.
Allowed: integers, names, ``+ - * // %``, unary minus, parentheses and the calls ``ceil_div``,
``min``, ``max`` and ``slot``. Anything else is rejected when the contract loads.

Runtime dims (``B`` from 1 to 65536) stay symbolic. Two expressions are equal when they agree at a set
of probe points for the runtime dims (range ends plus a few odd values): the expressions are integer
polynomials with floor divisions, and for contract-sized expressions agreement at these probes
is what equality means in practice.

>>> e = parse_expr("ceil_div(B, 256) * 2")
>>> e.evaluate({"B": 300})
4
>>> sorted(e.names)
['B']
"""

from __future__ import annotations

import ast
import functools
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class ExprError(ValueError):
    """An expression that is not a valid dim expression; the message says why."""


_FUNCS = {"ceil_div": 2, "min": None, "max": None, "slot": 1}
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


@dataclass(frozen=True, slots=True)
class Expr:
    """A parsed dim expression. ``text`` is the source; ``tree`` a nested tuple; ``names`` its free dims."""

    text: str
    tree: object
    names: frozenset[str] = field(default=frozenset())
    slots: frozenset[str] = field(default=frozenset())

    def evaluate(self, env: Mapping[str, int], slot_index: Mapping[str, int] | None = None) -> int:
        """Integer value with every free name taken from ``env`` (KeyError names a missing one).

        Raises ZeroDivisionError for a division by zero and OverflowError for a value past 2^62 in
        magnitude (both ArithmeticError).
        """
        return _eval(self.tree, env, slot_index or {})

    @property
    def constant(self) -> int | None:
        """The value when the expression has no free names, else None."""
        if self.names or self.slots:
            return None
        return _eval(self.tree, {}, {})

    def __str__(self) -> str:
        return self.text


def parse_expr(source: str | int) -> Expr:
    """Parse an integer, or the text of a dim expression, into an :class:`Expr`.

    Results are memoized by source (an :class:`Expr` is immutable, so equal sources share one): a large
    contract set writes the same few thousand expressions hundreds of thousands of times.
    """
    if type(source) is str:  # the common case first (177,000 calls at 10,000 kernels)
        return _parse_text(source)
    if isinstance(source, bool):
        raise ExprError(f"expected an integer or a dim expression, found the boolean {str(source).lower()}")
    if isinstance(source, int):
        return _parse_int(source)
    return _parse_text(str(source))


#: Largest magnitude of a literal or of any intermediate value; past it evaluation raises OverflowError
#: (contract dims are far smaller, and an unbounded product of dims would take unbounded time).
MAX_VALUE = 2**62


def _too_large(value: int) -> str:
    return f"an integer of {value.bit_length()} bits; dim expression values are at most 2^62 in magnitude"


@functools.lru_cache(maxsize=4096)
def _parse_int(source: int) -> Expr:
    if not -MAX_VALUE <= source <= MAX_VALUE:
        raise ExprError(f"found {_too_large(source)}")
    return Expr(str(source), ("int", source))


@functools.lru_cache(maxsize=16384)
def _parse_text(source: str) -> Expr:
    """An expression's text parsed (errors are raised, never cached)."""
    text = source.strip()
    if not text:
        raise ExprError("expected a dim expression, found an empty string")
    if "\x00" in text:  # ast.parse raises ValueError or SyntaxError for it, depending on the Python
        raise ExprError(f'"{_clip(text)}" contains a NUL character; it is not a valid dim expression')
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise ExprError(f'"{_clip(text)}" is not a valid dim expression') from None
    except (RecursionError, MemoryError):
        raise ExprError(f'"{_clip(text)}" is too long or too deeply nested to be a dim expression') from None
    names: set[str] = set()
    slots: set[str] = set()
    tree = _convert(node, text, names, slots)
    if not text.isascii():  # Python normalised the names (NFKC): take them back as written
        tree = _as_written(tree, _written_names(node, text), text)
        names = _names_of(tree, "name")
        slots = _names_of(tree, "slot")
    return Expr(text, tree, frozenset(names), frozenset(slots))


def _written_names(node: ast.AST, text: str) -> list[str]:
    """The names of ``node`` in source order, as the text writes them (``ast`` gives them after NFKC
    normalisation: ``"ℬ"`` parses as ``B``, and a contract must not silently mean another name)."""
    lines = re.split(r"\r\n|\r|\n", text)  # the tokenizer's line ends (str.splitlines knows more)
    out = []
    spans = sorted(
        ((n.lineno, n.col_offset, n.end_lineno, n.end_col_offset, n.id) for n in ast.walk(node) if isinstance(n, ast.Name)),
    )
    for line, col, end_line, end_col, ident in spans:
        if line != end_line or line > len(lines):
            raise ExprError(f'"{_clip(text)}" is not a valid dim expression')
        raw = lines[line - 1].encode("utf-8")[col:end_col].decode("utf-8", errors="replace")
        out.append(raw if unicodedata.normalize("NFKC", raw) == ident else ident)
    return out


def _as_written(tree: object, written: list[str], text: str) -> object:
    """``tree`` with the names of its ("name", x) and ("slot", x) leaves replaced, in source order, by
    ``written`` (which also holds the names of called functions: each must be written as it is named)."""
    it = iter(written)

    def function(name: str) -> None:
        fn = next(it)
        if fn != name:
            raise ExprError(f'"{_clip(text)}" calls "{fn}", which Unicode normalisation would turn into "{name}"; the functions are "ceil_div", "min", "max" and "slot", written in ASCII')

    def walk(t: object) -> object:
        op = t[0]  # type: ignore[index]
        if op == "int":
            return t
        if op in ("name", "slot"):
            if op == "slot":
                function("slot")
            return (op, next(it))
        if op in _FUNCS:
            function(op)
        return (op, *(walk(a) for a in t[1:]))  # type: ignore[index]

    return walk(tree)


def _names_of(tree: object, kind: str) -> set[str]:
    op = tree[0]  # type: ignore[index]
    if op == kind:
        return {tree[1]}  # type: ignore[index]
    if op in ("int", "name", "slot"):
        return set()
    out: set[str] = set()
    for a in tree[1:]:  # type: ignore[index]
        out |= _names_of(a, kind)
    return out


MAX_DEPTH = 64  # operators and calls nested deeper than this are no contract's dim expression


def _clip(text: str, width: int = 80) -> str:
    """``text`` for a message: control characters as ``\\xNN``, shortened (it can be thousands of characters)."""
    text = "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 else c for c in text)
    return text if len(text) <= width else text[: width - 3] + "..."


def _convert(node: ast.AST, text: str, names: set[str], slots: set[str], depth: int = 0) -> object:
    """The tuple tree of ``node``; ``text`` (the whole expression) is clipped only for a message."""
    if depth > MAX_DEPTH:
        raise ExprError(f'"{_clip(text)}" is nested more than {MAX_DEPTH} levels deep; dim expressions are short')
    depth += 1
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise ExprError(f'"{_clip(text)}" uses {_clip(repr(node.value))}; dim expressions take integers only')
        if not -MAX_VALUE <= node.value <= MAX_VALUE:
            raise ExprError(f'"{_clip(text)}" uses {_too_large(node.value)}')
        return ("int", node.value)
    if isinstance(node, ast.Name):
        names.add(node.id)
        return ("name", node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return ("neg", _convert(node.operand, text, names, slots, depth))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        return _convert(node.operand, text, names, slots, depth)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return (
            _BINOPS[type(node.op)],
            _convert(node.left, text, names, slots, depth),
            _convert(node.right, text, names, slots, depth),
        )
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        fname = node.func.id
        if fname not in _FUNCS:
            raise ExprError(
                f'"{_clip(text)}" calls "{fname}"; the functions are "ceil_div", "min", "max" and "slot"'
            )
        arity = _FUNCS[fname]
        if (arity is not None and len(node.args) != arity) or (arity is None and len(node.args) < 2):
            raise ExprError(f'"{_clip(text)}" calls "{fname}" with {len(node.args)} argument(s)')
        if fname == "slot":
            arg = node.args[0]
            if not isinstance(arg, ast.Name):
                raise ExprError(f'"{_clip(text)}": slot() takes the name of an ISV slot')
            slots.add(arg.id)
            return ("slot", arg.id)
        return (fname, *(_convert(a, text, names, slots, depth) for a in node.args))
    raise ExprError(f'"{_clip(text)}" is not a dim expression (integers, dim names, + - * // %, ceil_div, min, max)')


def _eval(t: object, env: Mapping[str, int], slots: Mapping[str, int]) -> int:
    op = t[0]  # type: ignore[index]
    if op == "int":
        return t[1]  # type: ignore[index]
    if op == "name":
        return env[t[1]]  # type: ignore[index]
    if op == "slot":
        return slots[t[1]]  # type: ignore[index]
    if op == "neg":
        return -_eval(t[1], env, slots)  # type: ignore[index]
    args = [_eval(a, env, slots) for a in t[1:]]  # type: ignore[index]
    if op in ("+", "-", "*"):
        # operands are at most 2^62 (literals are, and so is every result), so this is cheap; checking
        # each step keeps a chain of squaring dims from building numbers of billions of digits
        r = args[0] + args[1] if op == "+" else args[0] - args[1] if op == "-" else args[0] * args[1]
        if not -MAX_VALUE <= r <= MAX_VALUE:
            raise OverflowError("a value exceeds 2^62 in magnitude")
        return r
    if op == "//":
        if args[1] == 0:
            raise ZeroDivisionError("division by zero in a dim expression")
        return args[0] // args[1]
    if op == "%":
        if args[1] == 0:
            raise ZeroDivisionError("modulo by zero in a dim expression")
        return args[0] % args[1]
    if op == "ceil_div":
        if args[1] == 0:
            raise ZeroDivisionError("ceil_div by zero in a dim expression")
        return -(-args[0] // args[1])
    if op == "min":
        return min(args)
    if op == "max":
        return max(args)
    raise AssertionError(op)


def probe_points(runtime: Mapping[str, tuple[int, int]]) -> list[dict[str, int]]:
    """Assignments of the runtime dims at which symbolic shapes are compared.

    Each runtime dim takes its range ends and three interior odd values; dims vary together in a
    few offset patterns so that swapped dims are told apart.
    """
    if not runtime:
        return [{}]
    names = sorted(runtime)
    picks: dict[str, list[int]] = {}
    for n, (lo, hi) in runtime.items():
        cand = [lo, hi, lo + (hi - lo) // 3, lo + (hi - lo) // 2 + 1, lo + 2 * (hi - lo) // 3 + 3]
        vals = []
        for v in cand:
            v = min(max(v, lo), hi)
            if v not in vals:
                vals.append(v)
        picks[n] = vals
    width = max(len(v) for v in picks.values())
    points = []
    for shift in range(width):
        points.append({n: picks[n][(i + shift) % len(picks[n])] for i, n in enumerate(names)})
    return points


def format_shape(shape: tuple[Expr, ...]) -> str:
    """``[B, SH2 + 6]`` as written in the contract."""
    return "[" + ", ".join(e.text for e in shape) + "]"


# -- the divisions inside an expression (tail coverage reads them) ------------------------------------

_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


def divisions(expr: Expr) -> list[tuple[str, object, object]]:
    """Every ``ceil_div(a, b)``, ``a // b`` and ``a % b`` inside ``expr``, outermost first, as
    ``(op, a tree, b tree)``.

    >>> [(op, tree_text(a), tree_text(b)) for op, a, b in divisions(parse_expr("min(ceil_div(B * T, 64), 256)"))]
    [('ceil_div', 'B * T', '64')]
    """
    out: list[tuple[str, object, object]] = []

    def walk(t: object) -> None:
        if not isinstance(t, tuple) or t[0] in ("int", "name", "slot"):
            return
        if t[0] in ("ceil_div", "//", "%"):
            out.append((t[0], t[1], t[2]))
        for child in t[1:]:
            walk(child)

    walk(expr.tree)
    return out


def tree_text(t: object) -> str:
    """The text of an expression tree, with the parentheses its operators need."""
    op = t[0]  # type: ignore[index]
    if op == "int":
        return str(t[1])  # type: ignore[index]
    if op == "name":
        return str(t[1])  # type: ignore[index]
    if op == "slot":
        return f"slot({t[1]})"  # type: ignore[index]
    if op == "neg":
        inner = t[1]  # type: ignore[index]
        s = tree_text(inner)
        return f"-({s})" if inner[0] in _PREC else f"-{s}"
    if op in _PREC:
        left, right = t[1], t[2]  # type: ignore[index]
        ls, rs = tree_text(left), tree_text(right)
        if left[0] in _PREC and _PREC[left[0]] < _PREC[op]:
            ls = f"({ls})"
        if right[0] in _PREC and (_PREC[right[0]] < _PREC[op] or (_PREC[right[0]] == _PREC[op] and op in ("-", "//", "%"))):
            rs = f"({rs})"
        return f"{ls} {op} {rs}"
    return f"{op}(" + ", ".join(tree_text(a) for a in t[1:]) + ")"  # type: ignore[index]


def eval_tree(t: object, env: Mapping[str, int], slots: Mapping[str, int] | None = None) -> int:
    """The value of an expression tree (a part of an :class:`Expr`) in ``env``."""
    return _eval(t, env, slots or {})


def tree_names(t: object) -> set[str]:
    """The dim names an expression tree uses."""
    if not isinstance(t, tuple):
        return set()
    if t[0] == "name":
        return {t[1]}
    out: set[str] = set()
    for child in t[1:]:
        out |= tree_names(child)
    return out


def literals(expr: Expr) -> set[int]:
    """The integer literals of ``expr`` (its tiling constants, where it is launch geometry)."""
    out: set[int] = set()

    def walk(t: object) -> None:
        if not isinstance(t, tuple):
            return
        if t[0] == "int":
            out.add(int(t[1]))
            return
        for child in t[1:]:
            walk(child)

    walk(expr.tree)
    return out


def resolve_fixed(dims: Mapping[str, Any]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Values of fixed dims and of derived dims that depend only on fixed ones; ``dims`` maps each name to
    its declaration (an :class:`audit.model.Dim`: ``kind``, ``value``, ``expr``).

    Returns ``(env, problems)``; each problem is ``(dim name, sentence)`` for a derived dim that refers
    to an unknown name, is part of a cycle, or fails to evaluate.
    """
    env: dict[str, int] = {}
    problems: list[tuple[str, str]] = []
    for d in dims.values():
        if d.kind == "fixed" and d.value is not None:
            env[d.name] = d.value
    state: dict[str, str] = {}

    def finish(name: str, ok: bool) -> None:
        d = dims[name]
        assert d.expr is not None
        if ok and all(r in env for r in d.expr.names):
            try:
                env[name] = d.expr.evaluate(env)
            except ArithmeticError as exc:
                problems.append((name, f'Derived dim "{name}" = "{d.expr.text}" cannot be evaluated: {exc}.'))
        state[name] = "done"

    def visit(start: str) -> None:
        """Evaluate the derived dim ``start`` after the derived dims it uses, depth first.

        An explicit stack rather than recursion: a contract may chain thousands of derived dims.
        """
        if state.get(start) == "done":
            return
        path: list[str] = [start]
        on_path = {start}
        stack: list[list] = [[start, iter(sorted(dims[start].expr.names)), True]]
        while stack:
            frame = stack[-1]
            name = frame[0]
            descended = False
            for ref in frame[1]:
                rd = dims.get(ref)
                if rd is None:
                    problems.append((name, f'Derived dim "{name}" = "{dims[name].expr.text}" uses "{ref}", which is not a declared dim.'))
                    frame[2] = False
                elif rd.kind != "derived":
                    if ref not in env and rd.kind != "runtime":
                        frame[2] = False
                elif state.get(ref) == "done":
                    if ref not in env:
                        frame[2] = False
                elif ref in on_path:
                    cyc = " -> ".join((*path[path.index(ref) :], ref))
                    problems.append((ref, f'Derived dim "{ref}" depends on itself: {cyc}.'))
                    state[ref] = "done"
                    frame[2] = False
                else:
                    stack.append([ref, iter(sorted(rd.expr.names)), True])
                    path.append(ref)
                    on_path.add(ref)
                    descended = True
                    break
            if descended:
                continue
            finish(name, frame[2])
            stack.pop()
            path.pop()
            on_path.discard(name)
            if stack and name not in env:
                stack[-1][2] = False

    for d in dims.values():
        if d.kind == "derived":
            visit(d.name)
    return env, problems
