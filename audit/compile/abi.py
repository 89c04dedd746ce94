"""The ABI check: does a compiled entry take the parameters its contract declares, in that order?

PTX keeps each kernel parameter's size and a coarse class but no names and no C++ types:

==========================  =====================================  ===============================
contract                    expected in PTX                        notes
==========================  =====================================  ===============================
tensor / isv (a pointer)    8-byte ``.u64`` / ``.b64`` / ``.s64``  pointers are plain 64-bit words
scalar i64 / u64            8-byte ``.u64`` / ``.s64`` / ``.b64``  indistinguishable from a pointer
scalar i32 / u32            4-byte ``.u32`` / ``.s32`` / ``.b32``  signedness is not in the PTX
scalar i16 / u8 / i8        2- / 1-byte integer                    likewise
scalar f32 / f64            ``.f32`` (or ``.b32``) / ``.f64``      a float is never an integer
scalar f16 / bf16           2 bytes: ``.b16`` or ``.b8[2]``        passed as a 2-byte aggregate
==========================  =====================================  ===============================

So an 8-byte integer scalar and a pointer are compatible, and two swapped parameters of the same class
(two pointers, say) cannot be told apart from the PTX alone. When counts differ, the check aligns the two
lists by class; where several parameters could be the missing (or extra) one, it reads the parameter
names of the kernel's definition in the source and prefers the one whose name is gone, so the message
names the parameter a human dropped. Positions in messages count from 1.

>>> from audit.compile import PtxParam
>>> [p.message for p in compare_params(kernel, [PtxParam(0, "u64", 8)])]   # doctest: +SKIP
['Kernel "k" parameter 2 "n" is a scalar i32 (4 bytes) in the contract but the compiled entry takes 1 parameter and has none at position 2.']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import DTYPES, Kernel, Loc, Param
from ._types import PtxParam


@dataclass(frozen=True)
class Expected:
    """What one contract parameter must look like in PTX: a class and a byte size."""

    cls: str  # "pointer" | "int" | "float" | "half"
    size: int


@dataclass(frozen=True)
class AbiProblem:
    """One ABI finding: its sentence and where it points (a parameter, or the kernel's params)."""

    message: str
    loc: Loc


def expected(p: Param) -> Expected:
    """The PTX class and size a contract parameter compiles to."""
    if p.kind != "scalar":
        return Expected("pointer", 8)
    size, _, _, kind = DTYPES[p.dtype]
    if p.dtype in ("f16", "bf16"):
        return Expected("half", 2)
    return Expected("float" if kind == "float" else "int", size)


def compatible(e: Expected, q: PtxParam) -> bool:
    """Whether compiled parameter ``q`` can carry contract class ``e`` (see the module table)."""
    if q.size != e.size:
        return False
    t = q.ptx_type
    if e.cls == "half":
        return t in ("b16", "u16", "s16", "f16", "bf16") or (q.is_array and t == "b8")
    if q.is_array:
        return False
    if e.cls in ("pointer", "int"):
        return t[0] in "usb"
    return t in (f"f{e.size * 8}", f"b{e.size * 8}")


def describe(p: Param) -> str:
    """``a pointer (8 bytes)`` / ``a scalar i32 (4 bytes)``: how messages name a contract parameter."""
    e = expected(p)
    if e.cls == "pointer":
        return "a pointer (8 bytes)"
    return f"a scalar {p.dtype} ({e.size} byte{'s' if e.size != 1 else ''})"


def compare_params(kernel: Kernel, params: Sequence[PtxParam], source_names: Sequence[str | None] | None = None) -> list[AbiProblem]:
    """Every way the compiled parameter list ``params`` differs from ``kernel``'s contract.

    ``source_names`` are the parameter names of the kernel's definition in the source (see
    :func:`source_param_names`); they only decide which parameter a count difference is about.
    """
    want = [expected(p) for p in kernel.params]
    n, m = len(want), len(params)
    if n == m:
        return [
            AbiProblem(
                f'Kernel "{kernel.name}" parameter {i + 1} "{p.name}" is {describe(p)} in the contract '
                f"but the compiled entry takes {q.describe()} at position {i + 1}.",
                p.loc,
            )
            for i, (p, q) in enumerate(zip(kernel.params, params))
            if not compatible(want[i], q)
        ]
    names = list(source_names) if source_names is not None and len(source_names) == m else None
    if m < n:
        return [_missing(kernel, want, params, names)]
    return [_extra(kernel, want, params, names)]


def _missing(kernel: Kernel, want: list[Expected], params: Sequence[PtxParam], names: list[str | None] | None) -> AbiProblem:
    n, m = len(want), len(params)
    cands: list[int] = []
    if n - m == 1:
        cands = [i for i in range(n) if all(compatible(want[j if j < i else j + 1], params[j]) for j in range(m))]
        if names is not None and len(cands) > 1:
            gone = [i for i in cands if kernel.params[i].name not in names]
            cands = gone or cands
    if len(cands) == 1:
        i = cands[0]
        p = kernel.params[i]
        if i == m:
            return AbiProblem(
                f'Kernel "{kernel.name}" parameter {i + 1} "{p.name}" is {describe(p)} in the contract but the '
                f"compiled entry takes {_count(m)} and has none at position {i + 1}.",
                p.loc,
            )
        return AbiProblem(
            f'Kernel "{kernel.name}" parameter {i + 1} "{p.name}" is {describe(p)} in the contract but is not in '
            f"the compiled entry, which takes {_count(m)} where the contract declares {n}.",
            p.loc,
        )
    if cands:
        listed = ", ".join(f'{i + 1} "{kernel.params[i].name}"' for i in cands)
        return AbiProblem(
            f'Kernel "{kernel.name}" declares {_count(n)} but the compiled entry takes {m}: one of parameters '
            f"{listed} is not in it.",
            kernel.loc.child("params"),
        )
    return _first_difference(kernel, want, params)


def _extra(kernel: Kernel, want: list[Expected], params: Sequence[PtxParam], names: list[str | None] | None) -> AbiProblem:
    n, m = len(want), len(params)
    cands: list[int] = []
    if m - n == 1:
        cands = [j for j in range(m) if all(compatible(want[i], params[i if i < j else i + 1]) for i in range(n))]
        if names is not None and len(cands) > 1:
            declared = {p.name for p in kernel.params}
            new = [j for j in cands if names[j] and names[j] not in declared]
            cands = new or cands
    if len(cands) == 1:
        j = cands[0]
        label = f' "{names[j]}"' if names is not None and names[j] else ""
        return AbiProblem(
            f'Kernel "{kernel.name}" declares {_count(n)} but the compiled entry takes {m}: its parameter '
            f"{j + 1}{label}, {params[j].describe()}, is not in the contract.",
            kernel.loc.child("params"),
        )
    if cands:
        listed = ", ".join(str(j + 1) for j in cands)
        return AbiProblem(
            f'Kernel "{kernel.name}" declares {_count(n)} but the compiled entry takes {m}: one of its parameters '
            f"{listed} is not in the contract.",
            kernel.loc.child("params"),
        )
    return _first_difference(kernel, want, params)


def _first_difference(kernel: Kernel, want: list[Expected], params: Sequence[PtxParam]) -> AbiProblem:
    n, m = len(want), len(params)
    head = f'Kernel "{kernel.name}" declares {_count(n)} but the compiled entry takes {m}'
    for i in range(min(n, m)):
        if not compatible(want[i], params[i]):
            p = kernel.params[i]
            return AbiProblem(
                f'{head}; the first difference is parameter {i + 1} "{p.name}": {describe(p)} in the contract, '
                f"{params[i].describe()} in the compiled entry.",
                p.loc,
            )
    if n > m:
        rest = ", ".join(f'"{p.name}"' for p in kernel.params[m:])
        return AbiProblem(f"{head}; contract parameters {m + 1}-{n} ({rest}) have no counterpart in it.", kernel.params[m].loc)
    rest = ", ".join(params[j].describe() for j in range(n, m))
    return AbiProblem(f"{head}; its parameters {n + 1}-{m} ({rest}) are not in the contract.", kernel.loc.child("params"))


def _count(n: int) -> str:
    return f"{n} parameter{'s' if n != 1 else ''}"


# -- parameter names from the source -------------------------------------------------------------------------

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def source_param_names(text: str, function: str) -> list[str | None] | None:
    """Parameter names of the ``__global__`` definition of ``function`` in ``text`` (None if not found).

    A best-effort reading for messages only (macros are not expanded): an unnamed parameter is None.

    >>> source_param_names('extern "C" __global__ void k(const float* __restrict__ x, int n) {}', "k")
    ['x', 'n']
    """
    text = _COMMENTS.sub(" ", text)
    for m in re.finditer(r"\b" + re.escape(function) + r"\s*\(", text):
        if "__global__" not in text[max(0, m.start() - 400) : m.start()]:
            continue
        inner, end = _balanced(text, m.end() - 1)
        if inner is None or not text[end:].lstrip().startswith("{"):
            continue  # a declaration, a call or an explicit instantiation
        if not inner.strip() or inner.strip() == "void":
            return []
        return [_param_name(a) for a in _split_top(inner)]
    return None


def function_name(kernel: Kernel) -> str:
    """The unqualified function name: ``"scale"`` for ``cpp_name = "ns::scale<float>"``."""
    name = kernel.cpp_name or kernel.entry or kernel.name
    name = name.split("(", 1)[0]
    name = re.sub(r"<.*>$", "", name.strip())
    return name.rsplit("::", 1)[-1].strip()


def _balanced(text: str, open_at: int) -> tuple[str | None, int]:
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i], i + 1
    return None, len(text)


def _split_top(args: str) -> list[str]:
    out, depth, cur = [], 0, []
    for c in args:
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
    return out


def _param_name(arg: str) -> str | None:
    arg = arg.split("=", 1)[0]
    arg = re.sub(r"\[[^\]]*\]", "", arg).strip()
    m = re.search(r"(\w+)\s*$", arg)
    if not m or len(arg.split()) < 2 and not re.search(r"[*&]\s*\w+$", arg):
        return None  # "int" alone is a type, not a name
    return m.group(1)
