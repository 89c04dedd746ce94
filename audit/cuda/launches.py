"""Kernel launches read from host code: which kernel, with what grid, block, shared memory and arguments.

One reader for the four ways host code launches a kernel, used by the launcher scan (a launch site is a
launch of that kernel) and by ``wireup init`` (its geometry becomes the contract's):

* CUDA C++ (``.cu``, ``.cuh``, ``.cpp``): ``name<<<grid, block, smem, stream>>>(args)``, with ``dim3``
  variables (``dim3 grid(x, y)``), local constants and file-scope ones (:func:`file_constants`, of the
  file and of the headers the caller read for it) resolved, and explicit template arguments
  (``name<128, 8><<<...>>>``) kept;
* Rust with cudarc: ``LaunchConfig { grid_dim, block_dim, shared_mem_bytes }`` (or
  ``LaunchConfig::for_num_elems(n)``) passed to ``func.launch(cfg, (args))`` or to
  ``stream.launch_builder(&func).arg(..)...launch(cfg)``, the function fetched by ``load_function("name")``
  or ``get_func("module", "name")``;
* Python with CuPy: ``k = cp.RawKernel(src, "name")`` or ``k = module.get_function("name")``, then
  ``k(grid, block, args, shared_mem=n)``;
* the driver API: ``cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra)`` with
  ``cuModuleGetFunction(&f, module, "name")``.

Expressions are kept as the host wrote them (C or Rust or Python text, with local constants substituted);
:func:`to_dim_expr` translates one into a contract dim expression where it can (``CEIL_DIV(N, 256)`` and
``(N + 255) / 256`` become ``ceil_div(N, 256)``, host variables passed as kernel arguments become the
parameters' names) and says why where it cannot.

>>> site, = find_launches('void f(float* x, int n) {\\n  scale<<<(n + 255) / 256, 256>>>(x, n);\\n}', "c")
>>> site.kernel, site.line, site.grid, site.block, site.args
('scale', 2, ('(n + 255) / 256', '1', '1'), ('256', '1', '1'), ('x', 'n'))
>>> to_dim_expr(site.grid[0], {"n": "N"})
('ceil_div(N, 256)', '')
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .hostlex import Literal, language_of, lex
from .tokens import define_value

__all__ = ["LaunchSite", "RustHelpers", "file_constants", "find_launches", "forwarded_calls", "language_of", "rust_helpers", "template_arguments", "to_dim_expr"]

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# template arguments may hold one level of parentheses (``k<(NT)>``, ``k<1024 / (n)>``, as macros write them)
_TARG = r"(?:[^<>;{}()]|\([^;{}()]*\))"
_GAP = r"(?:\s|\\\n)*"  # white space, and a macro body's continued lines
_CHEVRON = re.compile(rf"\b({_IDENT}(?:\s*::\s*{_IDENT})*){_GAP}(<{_TARG}*(?:<{_TARG}*>{_TARG}*)*>)?{_GAP}<<<")
_DEFINE = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+({_IDENT})[ \t]+([^\n]+?)[ \t]*$", re.MULTILINE)
_MAX_SUBSTITUTIONS = 8  # nested local constants followed at most this deep
_MAX_TEXT = 4_000_000  # characters of one host file read for launches


@dataclass(frozen=True)
class LaunchSite:
    """One launch in host code, with its geometry as the host wrote it (local constants substituted).

    ``grid`` and ``block`` are three expressions (missing components are ``"1"``); ``shared`` is the
    dynamic shared memory (``"0"`` where none is given); ``args`` the launch's arguments in order. A
    component the reader could not see is None (a ``LaunchConfig`` built elsewhere, say), and ``notes``
    say why. ``template_args`` are the explicit template arguments of a ``<<<...>>>`` launch
    (``gemm<BM, 8><<<...>>>`` with ``const int BM = 128`` gives ``("128", "8")``), None where it has none.
    ``arg_values`` (``<<<...>>>`` launches; None for the other styles) are the arguments with the
    constants they name substituted (``const``/``constexpr`` declarations and ``#define``s): an argument
    ``Bc`` after ``const int Bc = 32;`` is ``"32"`` there and stays ``"Bc"`` in ``args``, which the
    geometry keeps naming.
    """

    kernel: str
    file: str
    line: int
    style: str  # "cuda" | "cudarc" | "cupy" | "driver"
    grid: tuple[str, str, str] | None
    block: tuple[str, str, str] | None
    shared: str | None
    args: tuple[str, ...] | None
    notes: tuple[str, ...] = field(default=())
    template_args: tuple[str, ...] | None = None
    arg_values: tuple[str, ...] | None = None
    #: how ``kernel`` names the kernel: "exact"; "pattern" (a name built at run time, ``*`` for its unknown
    #: parts: ``kernel_name::<T>("affine")`` -> ``affine_*``); "unresolved" (``kernel`` is the host
    #: expression the reader could not turn into a name, ``kernel_name::<T>(U::KERNEL)``)
    name_kind: str = "exact"
    #: the launch is in a ``#define`` and pastes its kernel's name from the macro's parameters
    #: (``add_##t##_kernel<<<...>>>``): one site for several kernels, whose geometry the macro's arguments
    #: decide, so it is compared with no contract's
    pasted: bool = False
    #: the launched name is a parameter of the function around the launch (ggml's
    #: ``ggml_cuda_kernel_launch(Kernel kernel, ...) { kernel<<<...>>>(...); }``): (that function, the
    #: parameter's index); name_kind is "forwarded", and what runs is what its callers pass
    #: (:func:`forwarded_calls`)
    forwarded: tuple[str, int] | None = None
    #: what the launch goes through where it is no ``<<<...>>>`` of its own: the runtime API
    #: (``cudaLaunchCooperativeKernel``) or a launcher function (``ggml_cuda_kernel_launch()``)
    via: str = ""

    def names_kernel(self, symbol: str) -> bool:
        """Whether this launch may run the kernel whose entry (or C++ function) is ``symbol``."""
        if self.name_kind == "pattern":
            if self.template_args is not None and "<" not in self.kernel:
                symbol = symbol.split("<", 1)[0]  # add_*_kernel<(NT)> runs some instantiation of each match
            return re.fullmatch(".*".join(re.escape(p) for p in self.kernel.split("*")), symbol) is not None
        return self.name_kind == "exact" and self.kernel == symbol


# ---------------------------------------------------------------------------------------------------
# small text helpers over code whose comments and string contents are blanked


def _close(code: str, open_at: int) -> int:
    """Index of the bracket closing the one at ``open_at`` (len(code) when unbalanced)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth, j = 0, open_at
    while j < len(code):
        ch = code[j]
        if ch in pairs:
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(code)


def _split_top(text: str, sep: str = ",", angles: bool = False) -> list[str]:
    """``text`` split at ``sep`` outside brackets and template angle brackets (a ``..._cast<`` only, unless
    ``angles``: inside a template argument list every ``<`` opens one)."""
    parts, depth, angle, cur = [], 0, 0, []
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "<" and (angles or (depth == 0 and i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_") and "cast" in text[max(0, i - 12) : i])):
            angle += 1
        elif ch == ">" and angle:
            angle -= 1
        if ch == sep and depth == 0 and angle == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    tail = "".join(cur).strip()
    if tail or parts:
        parts.append(tail)
    return parts


def template_arguments(text: str) -> tuple[str, ...]:
    """The arguments of a template argument list ``<...>`` (the brackets included), split at its top-level
    commas: ``<Tile<64, 8>, 128>`` -> ``("Tile<64, 8>", "128")``."""
    return tuple(" ".join(p.split()) for p in _split_top(text.strip()[1:-1], angles=True) if p.strip())


def _line_at(text: str, pos: int) -> int:
    return bisect.bisect_left(_newlines(text), pos) + 1


@lru_cache(maxsize=8)
def _newlines(text: str) -> list[int]:
    """Where the newlines of ``text`` are (a file's launches ask for their line one by one)."""
    return [m.start() for m in re.finditer("\n", text)]


def _restore(text: str, code: str, a: int, b: int) -> str:
    """The original text of ``code[a:b]`` (string literals back), with whitespace runs folded."""
    return " ".join(text[a:b].split())


@lru_cache(maxsize=8)
def _defines(text: str) -> list[tuple[int, str, str]]:
    """(end, name, value) of each ``#define NAME V`` of ``text``, in order (read once per file), the
    value without its comments (``#define ROW_WARPS 2  // COLS / 64`` is 2, not ``2 // COLS / 64``, which
    reads as a floor division: cuda_hgemm's defines made ``wireup init`` divide by zero).

    >>> _defines("#define W 2  // C / 64\\n#define T 256 /* 32 * 8 */\\n#define U (W * 4) /* open")
    [(22, 'W', '2'), (49, 'T', '256'), (75, 'U', '(W * 4)')]
    """
    return [(m.end(), m.group(1), define_value(m.group(2))) for m in _DEFINE.finditer(text)]


_DIM3 = re.compile(rf"\bdim3\s+({_IDENT})\s*(?:=\s*(?:dim3\s*)?)?([({{])")
_DIM3_CALL = re.compile(rf"\bdim3\s+({_IDENT})\s*=\s*({_IDENT})\s*\(")


@lru_cache(maxsize=8)
def _dim3_functions(code: str) -> frozenset[str]:
    """The functions ``code`` defines or declares with a ``dim3`` return type (``dim3 grid_of(int n) {``)."""
    return frozenset(m.group(1) for m in re.finditer(rf"\bdim3\s+({_IDENT})\s*\([^;{{]*\)\s*[{{;]", code))


def _definitions(text: str, code: str, before: int, language: str, outer: dict[str, str] | None = None) -> dict[str, str]:
    """Local constants visible at ``before``: ``NAME = EXPR;`` (C, Rust ``let``) and ``#define NAME V``,
    the last one before the position winning over ``outer`` (the file-scope constants)."""
    defs: dict[str, str] = dict(outer or {})
    defines = _defines(text)
    for _at, name, value in defines[: bisect.bisect_right(defines, (before, "\U0010ffff"))]:
        defs[name] = value
    start = _scope_start(code, before, language)
    if language == "rust":
        pattern = re.compile(rf"\blet\s+(?:mut\s+)?({_IDENT})\s*(?::\s*[^=;]+)?=\s*([^;]+);")
    elif language == "python":
        pattern = re.compile(rf"^[ \t]*({_IDENT})\s*=\s*([^\n=][^\n]*)$", re.MULTILINE)
    else:
        # (no brace in the value: a default argument, f(int n_sums = 1) {, is no assignment, and reading it as
        # one ran on to the next semicolon, hiding the function's first constant: tiny-cuda-nn's reduce_sum)
        pattern = re.compile(rf"(?<![\w.>])({_IDENT})\s*=\s*([^;={{}}][^;{{}}]*);")
    for m in pattern.finditer(code, start, before):
        name, value = m.group(1), " ".join(text[m.start(2) : m.end(2)].split())
        if name in ("return", "if", "else"):
            continue
        if language == "c" and _conditional(code, m.start(), before):
            # `if (bs <= 64) bs = 128;`, a loop's counter, a block closed before the launch: the name has
            # no one value there, so it stays as written
            defs.pop(name, None)
            continue
        if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", value) and name in defs:
            # `bs = f(bs);` after `int bs = 64;`: the earlier value inside the new one
            value = re.sub(rf"(?<![\w.]){re.escape(name)}(?!\w)", lambda _: f"({defs[name]})", value)
        defs[name] = value
    if language == "c":
        for name in [n for n in defs if n not in (outer or {}) or n in code[start:before]]:
            if _varies(code, start, before, name):
                defs.pop(name, None)
    # dim3 NAME = f(...), f a function of this file that returns a dim3 (DeepSpeed's get_attn_softmax_grid):
    # its components are not known here, so each stays NAME.x, NAME.y, NAME.z (not compared), never the
    # (value, 1, 1) of a scalar
    for m in _DIM3_CALL.finditer(code, start, before):
        if m.group(2) in _dim3_functions(code):
            defs[m.group(1)] = f"dim3({m.group(1)}.x, {m.group(1)}.y, {m.group(1)}.z)"
    # dim3 NAME(a, b, c) / dim3 NAME{a, b, c} / dim3 NAME = {a, b, c} / dim3 NAME = dim3(a, b, c)
    for m in _DIM3.finditer(code, start, before):
        if language == "c" and _conditional(code, m.start(), before):
            continue
        end = _close(code, m.end(2) - 1)
        defs[m.group(1)] = "dim3(" + " ".join(text[m.end(2) : end].split()) + ")"
    return defs


def _opens_loop(code: str, brace: int) -> bool:
    """Whether the ``{`` at ``brace`` opens the body of a ``for``, ``while`` or ``do``.

    >>> code = "for (int i = 0; i < n; i++) { x(); } if (a) { y(); } do { z(); } while (b);"
    >>> [_opens_loop(code, i) for i, c in enumerate(code) if c == "{"]
    [True, False, True]
    """
    j = brace - 1
    while j >= 0 and code[j].isspace():
        j -= 1
    if j >= 1 and code[j - 1 : j + 1] == "do" and (j < 2 or not (code[j - 2].isalnum() or code[j - 2] == "_")):
        return True
    if j < 0 or code[j] != ")":
        return False
    depth = 0
    while j >= 0:
        if code[j] == ")":
            depth += 1
        elif code[j] == "(":
            depth -= 1
            if depth == 0:
                break
        j -= 1
    word = re.search(r"(\w+)\s*$", code[max(0, j - 64) : max(j, 0)])
    return word is not None and word.group(1) in ("for", "while")


def _varies(code: str, start: int, before: int, name: str) -> bool:
    """Whether ``name`` changes on the way to the launch at ``before`` other than by a plain assignment the
    reader follows: ``name++``, ``--name`` or ``name += v`` anywhere in the function before the launch, or
    any assignment to it inside a loop around the launch (after the launch too: the next pass sees it).
    apex's multi_tensor_apply counts ``loc_block_info++`` per chunk and launches ``<<<loc_block_info,
    ...>>>`` inside the loop; its ``int loc_block_info = 0;`` was read as the grid (``grid = [0, 1, 1]``).

    >>> code = "void f() { int n = 0; for (int c = 0; c < 9; c++) { n++; if (c == 8) { k<<<n, 64>>>(); n = 0; } } }"
    >>> _varies(code, 0, code.index("k<<<"), "n"), _varies(code, 0, code.index("k<<<"), "c")
    (True, True)
    >>> code = "void f() { int n = 4; for (int c = 0; c < 9; c++) { m += c; k<<<n, 64>>>(); } }"
    >>> _varies(code, 0, code.index("k<<<"), "n")
    False
    """
    ident = re.escape(name)
    bump = re.compile(rf"(?:\+\+|--)\s*{ident}(?!\w)|(?<![\w.]){ident}\s*(?:\+\+|--|(?:[-+*/%&|^]|<<|>>)=)")
    if bump.search(code, start, before):
        return True
    assign = re.compile(rf"(?<![\w.>]){ident}\s*=(?!=)")
    stack: list[int] = []
    for m in re.finditer(r"[{}]", code[start:before]):
        if m.group() == "{":
            stack.append(start + m.start())
        elif stack:
            stack.pop()
    for brace in stack:
        if _opens_loop(code, brace):
            end = _close(code, brace)
            if bump.search(code, brace, end) or assign.search(code, brace, end):
                return True
    return False


def _conditional(code: str, at: int, before: int) -> bool:
    """Whether the statement at ``at`` may not have run, or not as the last one, when the launch at ``before``
    runs: it is inside a block that closes before the launch (an ``if``/loop body, a nested scope), or it
    is the body of an ``if``/``else``/loop without braces, or the header of a ``for``.

    >>> code = "void f(int bs) { if (bs <= 64) { bs = 128; } k<<<1, bs>>>(); }"
    >>> _conditional(code, code.index("bs = 128"), code.index("k<<<"))
    True
    >>> code = "void f(int bs) { if (bs <= 64) bs = 128; k<<<1, bs>>>(); }"
    >>> _conditional(code, code.index("bs = 128"), code.index("k<<<"))
    True
    >>> code = "void f(int n) { int bs = 128; k<<<n, bs>>>(); }"
    >>> _conditional(code, code.index("bs = 128"), code.index("k<<<"))
    False
    """
    depth = low = 0
    for ch in code[at:before]:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            low = min(low, depth)
    if low < 0:
        return True
    stmt = max(code.rfind(c, 0, at) for c in ";{}") + 1
    prefix = code[stmt:at]
    if prefix.count("(") > prefix.count(")"):  # for (int i = 0; ...
        return True
    return re.search(r"(?:\b(?:if|while|for|switch)\s*\(.*\)|\belse|\bdo)\s*(?:\w[\w\s:<>*&]*)?$", prefix, re.S) is not None


def _scope_start(code: str, before: int, language: str) -> int:
    """Where the top-level function holding position ``before`` starts: local constants of other
    functions are not visible at a launch. (Python: the last unindented line.)"""
    if language == "python":
        tops = _python_tops(code)
        n = bisect.bisect_right(tops, before - 1) - 1  # the last one starting before the position
        return tops[n] if n >= 0 else 0
    opens, closes, starts = _top_level_blocks(code, language)
    n = bisect.bisect_left(opens, before) - 1  # the last top-level "{" before the position
    return starts[n] if n >= 0 and closes[n] >= before else before


@lru_cache(maxsize=8)
def _python_tops(code: str) -> list[int]:
    """Where each unindented ``def`` / ``class`` of a Python source starts."""
    return [m.start() for m in re.finditer(r"^(?:def|class|async def)\b", code, re.MULTILINE)]


@lru_cache(maxsize=8)
def _top_level_blocks(code: str, language: str) -> tuple[list[int], list[int], list[int]]:
    """The top-level ``{ ... }`` blocks of ``code`` in one pass, for :func:`_scope_start` (which every launch
    and every name it resolves asks: scanning the file up to the position each time was quadratic in the
    file): each one's opening and closing bracket (``len(code)`` when never closed) and where its statement
    starts (after the ``;`` in C, the line in Rust, and after the last ``}`` before it)."""
    opens: list[int] = []
    closes: list[int] = []
    starts: list[int] = []
    depth = 0
    for m in re.finditer(r"[{}]", code):
        i = m.start()
        if code[i] == "{":
            if depth == 0:
                start = code.rfind(";", 0, i) + 1 if language == "c" else code.rfind("\n", 0, i) + 1
                opens.append(i)
                closes.append(len(code))
                starts.append(max(start, code.rfind("}", 0, i) + 1))
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                closes[-1] = i
    return opens, closes, starts


_FILE_CONST = re.compile(
    rf"(?:(?:static|inline|extern|const|constexpr|__host__|__device__|__constant__)\s+)*"
    rf"(?:(?:unsigned|signed|short|long|int|size_t|std\s*::\s*size_t|u?int(?:8|16|32|64)_t|auto)\s+)+"
    rf"({_IDENT})\s*=\s*([^=].*)"
)

_PREPROCESSOR = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*$", re.MULTILINE)  # a directive, continued lines included


def file_constants(text: str) -> dict[str, str]:
    """The integer constants a C++ source declares at file or namespace scope, where a launch in it or in a
    file including it sees them: ``const int NT = 256;``, ``constexpr unsigned BM = 64;`` and object-like
    ``#define NAME V``. A variable that is not ``const`` or ``constexpr`` is no constant and is left out.

    >>> file_constants("#define TILE 16\\nconst int NT = 256;\\nint counter = 0;\\nvoid f() { const int x = 1; }")
    {'TILE': '16', 'NT': '256'}
    """
    if len(text) > _MAX_TEXT:
        return {}
    _, code = lex(text, "c")
    found = {m.group(1): m.group(2).strip() for m in _DEFINE.finditer(code)}
    # a function-like macro whose body is an integer expression, under the key NAME(a, b) (no identifier
    # has one: the launch scan expands its calls, :func:`_expand_macros`)
    for m in _EXPR_MACRO.finditer(code):
        params = tuple(p.strip() for p in m.group(2).split(",")) if m.group(2).strip() else ()
        body = define_value(m.group(3))
        if all(re.fullmatch(_IDENT, p) for p in params) and _EXPRESSION_BODY.fullmatch(body) and m.group(1) not in _CALLS:
            found[f"{m.group(1)}({', '.join(params)})"] = body
    # a function whose body is one return of an integer expression (tiny-cuda-nn's n_blocks_linear(n) and
    # div_round_up(val, divisor), which size every one of its launches), under the same key, a parameter's
    # default after "=": a name defined twice (overloads) is left out
    seen: dict[str, int] = {}
    for m in _EXPR_FUNCTION.finditer(code):
        seen[m.group(2)] = seen.get(m.group(2), 0) + 1
    for m in _EXPR_FUNCTION.finditer(code):
        name = m.group(2)
        if seen[name] > 1 or name in _CALLS or "__global__" in code[max(0, m.start() - 60) : m.start(2)]:
            continue
        types = set(re.findall(rf"\b(?:typename|class)\s+({_IDENT})", m.group(1) or ""))
        params = []
        for part in _split_top(m.group(3)):
            pm = re.fullmatch(rf"\s*(?:const\s+)?[\w:<>]+(?:\s+[\w:<>]+)*?[\s*&]+({_IDENT})\s*(?:=\s*(.+?))?\s*", part)
            if pm is None:
                break
            params.append(pm.group(1) + (f" = {' '.join(pm.group(2).split())}" if pm.group(2) else ""))
        else:
            body = " ".join(text[m.start(4) : m.end(4)].split())
            for t in types:  # a cast to a template type parameter, (T)n, says nothing of the value
                body = re.sub(rf"\(\s*{re.escape(t)}\s*\)", "", body)
            body = _CAST.sub("", _CXX_CAST.sub("", body))
            if params and _EXPRESSION_BODY.fullmatch(body) and len(_split_top(body)) == 1 and "dim3" not in body:
                found[f"{name}({', '.join(params)})"] = body
    scopes: list[bool] = []  # per open brace: a namespace or extern "C" block, whose declarations are file scope
    start = 0
    for brace in re.finditer(r"[{};]", code):
        i, ch = brace.start(), brace.group(0)
        if ch == ";" and all(scopes):
            stmt = " ".join(_PREPROCESSOR.sub("", code[start:i]).split())
            m = _FILE_CONST.fullmatch(stmt)
            if m and re.match(r"(?:\w+\s+)*?(?:const|constexpr)\b", stmt):
                found[m.group(1)] = " ".join(_PREPROCESSOR.sub("", text[start:i]).split()).split("=", 1)[1].strip()
        elif ch == "{":
            head = _PREPROCESSOR.sub("", code[start:i])
            scopes.append(bool(re.search(r"(?:\bnamespace\b[\w\s:]*|\bextern\s*\"\s*\")\s*$", head)))
        elif ch == "}" and scopes:
            scopes.pop()
        start = i + 1
    return found


_EXPR_MACRO = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+({_IDENT})\(([^)]*)\)[ \t]+([^\n]+?)[ \t]*$", re.MULTILINE)
#: a macro body the launch scan expands: names, integers, arithmetic and parentheses (no ternary, call
#: with braces, statement or string: ``CEILDIV(x, y) (((x) + (y) - 1) / (y))``, never ``CUDA_CHECK(e) do {...}``)
_EXPRESSION_BODY = re.compile(r"[\w\s()+\-*/%<>&|^~,.:]+")
_EXPR_FUNCTION = re.compile(
    rf"(?:\btemplate\s*(<[^<>{{}};]*>)\s*)?(?:(?:constexpr|inline|static|__host__|__device__|__forceinline__|[A-Z_]+_HOST_DEVICE)\s+)*"
    rf"(?!(?:dim3|void|bool|float|double|auto)\b)[\w:]+(?:<[^<>{{}};]*>)?\s+({_IDENT})\s*\(([^(){{}};]*)\)\s*(?:const\s*)?(?:noexcept\s*)?\{{\s*return\s+([^;{{}}]+);\s*\}}"
)
_MAX_EXPANSIONS = 4  # macros expanded inside expanded macros at most this deep


def _expand_macros(text: str, code: str, macros: dict[str, str]) -> str:
    r"""``text`` with each call of a function-like macro of ``macros`` (``"CEILDIV(x, y)"`` -> body, as
    :func:`file_constants` gives them) outside a preprocessor directive replaced by its body, the arguments
    parenthesised: vllm's ``shared = CEILDIV(e, w) * w * 4;`` becomes a translatable expression. A call
    over several lines keeps its newlines after the body, so every line number stays.

    >>> _expand_macros("s = CEILDIV(n,\n 4) * 4;", "s = CEILDIV(n,\n 4) * 4;", {"CEILDIV(x, y)": "(((x) + (y) - 1) / (y))"})
    's = ((((n) + (4) - 1) / (4)))\n * 4;'
    >>> _expand_macros("s = CEILDIV(a + b, w);", "s = CEILDIV(a + b, w);", {"CEILDIV(x, y)": "(x + y - 1) / y"})
    's = (((a + b) + w - 1) / w);'
    """
    table = {}
    for head, body in macros.items():
        name, params = head[: head.index("(")], head[head.index("(") + 1 : -1]
        table[name] = ([p.strip() for p in _split_top(params)] if params.strip() else [], body)
    if not table:
        return text
    call = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(table, key=len, reverse=True))) + r")\s*\(")
    directives = [(m.start(), m.end()) for m in _PREPROCESSOR.finditer(code)]
    for _ in range(_MAX_EXPANSIONS):
        out, last, changed = [], 0, False
        for m in call.finditer(code):
            if m.start() < last or any(a <= m.start() < b for a, b in directives):
                continue
            close = _close(code, m.end() - 1)
            if close >= len(code):
                continue
            params, body = table[m.group(1)]
            args = [a.strip() for a in _split_top(text[m.end() : close])]
            if args == [""]:
                args = []
            names = [p.split("=")[0].strip() for p in params]
            defaults = [p.split("=", 1)[1].strip() if "=" in p else None for p in params]
            args += [d for d in defaults[len(args) :] if d is not None]
            if len(args) != len(params) or _declares(code, m.start()):
                continue
            values = dict(zip(names, args))
            expanded = re.sub(rf"(?<![\w.])({_IDENT})(?!\w)", lambda n: _grouped(values[n.group(1)]) if n.group(1) in values else n.group(1), body)
            out.append(text[last : m.start()] + "(" + " ".join(expanded.split()) + ")" + "\n" * text.count("\n", m.start(), close + 1))
            last, changed = close + 1, True
        if not changed:
            return text
        text = "".join(out) + text[last:]
        _, code = lex(text, "c")
        directives = [(m.start(), m.end()) for m in _PREPROCESSOR.finditer(code)]
    return text


def _declares(code: str, at: int) -> bool:
    """Whether the name at ``at`` is declared or defined there (``uint32_t f(T n) {``: a type before it), not
    called."""
    j = at - 1
    while j >= 0 and code[j].isspace():
        j -= 1
    if j >= 0 and (code[j].isalnum() or code[j] == "_"):
        word = re.search(r"\w+$", code[: j + 1])
        return word is None or word.group(0) not in ("return", "case")
    return j >= 0 and code[j] == ">" and code[max(0, j - 2) : j + 1] != ">>>"


def _grouped(arg: str) -> str:
    """A macro argument as it goes into the body: a name or number as is, anything else parenthesised."""
    return arg if re.fullmatch(rf"{_IDENT}|\d+", arg) else f"({arg})"


def _substitute(expr: str, defs: dict[str, str], keep: set[str]) -> str:
    """``expr`` with local constants replaced by their values (parenthesised), ``keep`` names left alone; a
    component of a ``dim3`` variable (``block.y``) by that component. A name whose value names itself
    (``bs = f(bs);`` with no earlier value of ``bs`` in sight) is replaced once: the inner ``bs`` is the
    value before that assignment, which nothing here knows."""
    done: set[str] = set()  # self-referencing names already replaced
    for _ in range(_MAX_SUBSTITUTIONS):
        changed = False
        again: set[str] = set()

        def component(m: re.Match) -> str:
            nonlocal changed
            name, axis = m.group(1), m.group(2)
            value = defs.get(name, "")
            if name in keep or not value.startswith("dim3("):
                return m.group(0)
            parts = [p for p in _split_top(value[5:-1]) if p]
            part = (parts + ["1", "1", "1"])["xyz".index(axis)]
            if part == f"{name}.{axis}":  # a dim3 whose components are not known (see _definitions)
                return m.group(0)
            changed = True
            return part if re.fullmatch(rf"{_IDENT}|\d+", part) else f"({part})"

        def repl(m: re.Match) -> str:
            nonlocal changed
            name = m.group(0)
            if name in keep or name not in defs or defs[name] == name or name in done:
                return name
            changed = True
            value = defs[name]
            if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", value):
                again.add(name)
            return value if re.fullmatch(rf"{_IDENT}|\d+|dim3\(.*\)", value) else f"({value})"

        expr = re.sub(rf"(?<![\w.])(?<!->)({_IDENT})\s*\.\s*([xyz])\b", component, expr)
        expr = re.sub(rf"(?<![\w.])(?<!->){_IDENT}(?!\s*\()(?!\s*\.\s*[xyz]\b)", repl, expr)
        done |= again
        if not changed:
            break
    return expr


_WRAPPED = re.compile(r"^(?:cp|cupy|np|numpy)\.(?:u?int|float)\d+\((.*)\)$")


def _argument(text: str) -> str:
    """One launch argument as a name where it is one: ``&x``, ``&mut *x``, ``cp.int32(n)`` -> ``x``, ``n``."""
    text = " ".join(text.split())
    m = _WRAPPED.match(text)
    if m:
        text = m.group(1).strip()
    text = text.lstrip("&").strip()
    text = text.removeprefix("mut ").strip().lstrip("*").strip()
    return text


def _three(expr: str, defs: dict[str, str], keep: set[str]) -> tuple[str, str, str]:
    """A grid or block expression as three components: ``dim3(x, y)``, ``(x, y, z)`` tuples, a scalar."""
    expr = _substitute(expr.strip(), defs, keep)
    m = re.fullmatch(r"\(?\s*dim3\s*[({](.*)[)}]\s*\)?", expr)
    inner = None
    if m:
        inner = m.group(1)
    elif expr.startswith("(") and _close(expr, 0) == len(expr) - 1 and len(_split_top(expr[1:-1])) > 1:
        inner = expr[1:-1]
    elif expr.startswith("(") and expr.rstrip().endswith(",)"):
        inner = expr[1:-2]
    if inner is None:
        parts = [expr]
    else:
        parts = [p for p in _split_top(inner) if p]
    parts = (parts + ["1", "1", "1"])[:3]
    return (parts[0], parts[1], parts[2])


# ---------------------------------------------------------------------------------------------------
# the four launch styles


_PASTED = re.compile(rf"((?:{_IDENT}\s*##\s*)+)$")
_MACRO_HEAD = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+{_IDENT}\(([^)]*)\)", re.MULTILINE)


@lru_cache(maxsize=8)
def _macro_heads(text: str) -> list[tuple[int, frozenset[str]]]:
    """(start, parameters) of each function-like ``#define NAME(a, b)`` of ``text``, in order."""
    return [(m.start(), frozenset(p.strip() for p in m.group(1).split(","))) for m in _MACRO_HEAD.finditer(text)]


def _pasted_name(text: str, code: str, name: str, at: int) -> str | None:
    r"""The kernel name a launch inside a ``#define`` builds by token pasting, as a pattern (``*`` for each
    macro parameter pasted in): ``elementwise_add_##packed_type##_kernel<<<...>>>`` in ``#define
    BIND(packed_type, ...)`` is ``elementwise_add_*_kernel``; None where ``name`` (at ``at``) is not the
    end of a pasted name. A piece that is no parameter of the macro around it stays as written.

    >>> src = "#define B(t, n) \\\n  void f_##t(float* x) { add_##t##_kernel<<<1, 256 / n>>>(x); }\nB(f32, 1)\n"
    >>> _pasted_name(src, src, "_kernel", src.index("_kernel<<<"))
    'add_*_kernel'
    """
    m = _PASTED.search(code, max(0, at - 400), at)
    if m is None:
        # a macro's parameter that is the whole name (#define CASE(kernel, n) kernel<n><<<...>>>(...)): any kernel
        return "*" if name in _macro_params_at(text, at) else None
    pieces = [p.strip() for p in m.group(1).split("##") if p.strip()] + [name]
    params = _macro_params_at(text, at)
    pattern = "".join("*" if p in params else p for p in pieces)
    return re.sub(r"\*+", "*", pattern)


def _macro_params_at(text: str, at: int) -> frozenset[str]:
    """The parameters of the function-like ``#define`` whose body holds position ``at`` (every line from the
    ``#define`` to it continued with a backslash); empty outside one."""
    heads = _macro_heads(text)
    i = bisect.bisect_left(heads, (at,)) - 1
    if i >= 0 and all(line.rstrip().endswith("\\") for line in text[heads[i][0] : at].split("\n")[:-1]):
        return heads[i][1]
    return frozenset()


def _angle_close(text: str, lt: int) -> int:
    """The index of the ``>`` closing the ``<`` at ``lt`` (nested lists counted), ``len(text)`` where none does.

    >>> _angle_close("k<a<b>, c>(x)", 1)
    9
    """
    depth = 0
    for j in range(lt, len(text)):
        depth += (text[j] == "<") - (text[j] == ">")
        if depth == 0:
            return j
    return len(text)


_CASTS = frozenset({"reinterpret_cast", "static_cast", "const_cast"})
_NOT_KERNELS = frozenset({*_CASTS, "void", "const", "auto", "decltype", "nullptr", "NULL", "true", "false"})
_FUNCTION_REF = re.compile(rf"(&\s*)?({_IDENT}(?:\s*::\s*{_IDENT})*)(\s*<)?")


def function_refs(value: str) -> list[tuple[str, str | None]] | None:
    """The functions an expression assigned to a function pointer names, each as (name without scope,
    template argument list as written or None): ``&k<Ktraits>`` -> ``[("k", "<Ktraits>")]``, ``c ? &a : &b``
    -> both, ``(void*)k`` -> ``[("k", None)]``; None where it names none (a call, a number, ``nullptr``).

    >>> function_refs("&selective_scan_fwd_kernel<Ktraits>"), function_refs("is_even ? &ns::a<64, true> : &ns::a<64, false>")
    ([('selective_scan_fwd_kernel', '<Ktraits>')], [('a', '<64, true>'), ('a', '<64, false>')])
    >>> function_refs("get_kernel(n)"), function_refs("(void*)plain"), function_refs("nullptr")
    (None, [('plain', None)], None)
    >>> function_refs("reinterpret_cast<const void *>(k<64>)"), function_refs("reinterpret_cast<const void*>(plain)")
    ([('k', '<64>')], [('plain', None)])
    >>> function_refs("k_bin_bcast<op, T, type_for_index<const T *, I>...>")
    [('k_bin_bcast', '<op, T, type_for_index<const T *, I>...>')]
    """
    refs: list[tuple[str, str | None]] = []
    bare: list[str] = []
    skip_to = 0  # past the template argument list of the last name: the types in it are no kernels
    for m in _FUNCTION_REF.finditer(value):
        if m.start() < skip_to:
            continue
        if m.start() and (value[m.start() - 1].isalnum() or value[m.start() - 1] == "_"):
            continue
        name = re.sub(r"\s+", "", m.group(2)).split("::")[-1]
        if name in _CASTS and m.group(3):  # reinterpret_cast<const void*>(k): the cast's type is no kernel
            skip_to = _angle_close(value, m.end() - 1) + 1
            continue
        if name in _NOT_KERNELS or name.isdigit():
            continue
        after = value[m.end() :].lstrip()
        if m.group(3):  # a template argument list: up to its balanced ">"
            lt = m.end() - 1
            j = _angle_close(value, lt)
            if j >= len(value) or value[j + 1 :].lstrip().startswith("("):
                return None  # a call of a template function: what it returns is not known
            refs.append((name, " ".join(value[lt : j + 1].split())))
            skip_to = j + 1
        elif after.startswith("("):
            return None  # a call: the pointer it returns is not known
        elif m.group(1):
            refs.append((name, None))
        else:
            bare.append(name)
    if not refs and len(bare) == 1 and re.fullmatch(rf"\s*(?:\(\s*(?:const\s+)?void\s*\*\s*\)\s*|(?:{'|'.join(sorted(_CASTS))})\s*<[^<>]*>\s*\()?\s*{_IDENT}(?:\s*::\s*{_IDENT})*\s*\)?\s*", value):
        refs.append((bare[0], None))  # ``auto kernel = my_kernel;``, ``(void*)my_kernel``, ``reinterpret_cast<void*>(k)``
    return refs or None


def pointer_targets(name: str, text: str, code: str, before: int) -> list[tuple[str, str | None]] | None:
    """What a launch ``name<<<...>>>`` runs where ``name`` is a variable holding a kernel (``auto kernel =
    &k<Ktraits>;``, flash-attention's and mamba's way of choosing an instantiation before setting its shared
    memory and launching it): the functions its assignments in the enclosing function name, in order (one
    entry per assignment and branch); None where the function assigns ``name`` nothing (it is the kernel's
    own name), and ``[]`` where an assignment names no function the reader can see (a call's result)."""
    start = _scope_start(code, before, "c")
    found: list[tuple[str, str | None]] = []
    assigned = False
    # ``name = ...;``, and the declarator of a pointer to a function, ``void (*name)(float*, int) = ...;``
    pattern = re.compile(rf"(?<![\w.>]){re.escape(name)}\s*(?:\)\s*\([^;()]*\)\s*)?=\s*([^;=][^;]*);")
    for m in pattern.finditer(code, start, before):
        assigned = True
        refs = function_refs(" ".join(text[m.start(1) : m.end(1)].split()))
        if refs is None:
            return []
        found.extend(refs)
    return found if assigned else None


def enclosing_function(code: str, before: int) -> tuple[str, list[str]] | None:
    """(name, parameter names) of the top-level function whose body holds position ``before``; None outside
    one (or where its head is not ``name(...)`` / ``name<...>(...)`` before the body's brace).

    >>> src = "template <typename K, typename... A> void launch(K kernel, const P& p, A&&... args) {\\n kernel<<<1, 1>>>(args...); }"
    >>> enclosing_function(src, src.index("kernel<<<"))
    ('launch', ['kernel', 'p', 'args'])
    """
    opens, closes, starts = _top_level_blocks(code, "c")
    n = bisect.bisect_left(opens, before) - 1
    if n < 0 or closes[n] < before:
        return None
    head = code[starts[n] : opens[n]].rstrip()
    while True:  # qualifiers after the parameter list
        m = re.search(r"(?:\bconst|\bnoexcept|\boverride|\bfinal|->\s*[\w:<>]+)\s*$", head)
        if m is None:
            break
        head = head[: m.start()].rstrip()
    if not head.endswith(")"):
        return None
    depth, i = 0, len(head) - 1
    while i >= 0:
        depth += (head[i] == ")") - (head[i] == "(")
        if depth == 0:
            break
        i -= 1
    if i <= 0:
        return None
    m = re.search(rf"({_IDENT})\s*$", head[:i])
    if m is None or m.group(1) in ("if", "for", "while", "switch", "return"):
        return None
    params = []
    for part in _split_top(head[i + 1 : -1], angles=True):
        decl = _split_top(part, "=")[0] if "=" in part else part
        words = re.findall(_IDENT, decl)
        if words:
            params.append(words[-1])
    return m.group(1), params


def forwarded_calls(function: str, index: int, text: str, code: str) -> list[tuple[int, str, int]]:
    """(line, argument as written, position) of each call of ``function`` in one file whose argument at
    ``index`` is the kernel a forwarding launcher launches (``ggml_cuda_kernel_launch(scale_f32,
    launch_params, x, dst, ...)``); the function's definitions and declarations are no calls.

    >>> src = "void f(K kernel, int n) { kernel<<<1, n>>>(); }\\nvoid g() { f(scale_f32, 4); ns::f(k<float>, 2); }\\n"
    >>> [(line, arg) for line, arg, _ in forwarded_calls("f", 0, src, src)]
    [(2, 'scale_f32'), (2, 'k<float>')]
    """
    out = []
    for m in re.finditer(rf"(?<![\w.>]){re.escape(function)}\s*(?=[<(])", code):
        at = m.end()
        if code[at] == "<":  # explicit template arguments of the call
            at = _angle_close(code, at) + 1
            while at < len(code) and code[at].isspace():
                at += 1
            if at >= len(code) or code[at] != "(":
                continue
        close = _close(code, at)
        if close >= len(code):
            continue
        rest = code[close + 1 : close + 200].lstrip()
        if rest.startswith("{") or re.match(r"(?:const|noexcept|override)\b", rest):
            continue  # a definition
        args = _split_top(text[at + 1 : close], angles=True)  # a kernel passed with its template arguments, k<64, 128>
        if index >= len(args):
            continue
        arg = " ".join(args[index].split())
        if re.fullmatch(rf"(?:const\s+)?{_IDENT}(?:\s*::\s*{_IDENT})*(?:\s*<.*>)?(?:\s+|\s*[&*]+\s*){_IDENT}", arg):
            continue  # a declaration's parameter (``Kernel kernel``)
        out.append((_line_at(text, m.start()), arg, m.start()))
    return out


@dataclass(frozen=True)
class _Held:
    """What a launch's name stands for where it is no kernel of its own: ``kind`` "exact" (``kernel``, with
    ``template_args``), "unresolved" (several functions, or one the reader cannot see) or "forwarded" (a
    parameter of the function around the launch: ``forwarded`` is that function and the parameter's index)."""

    kind: str
    kernel: str
    note: str
    template_args: tuple[str, ...] | None = None
    forwarded: tuple[str, int] | None = None


def _kernel_of(refs: list[tuple[str, str | None]] | None, defs: dict[str, str], name: str, note: str) -> _Held:
    """The kernel that the functions ``refs`` (:func:`function_refs`) name: one function, with its template
    arguments (constants substituted; ``("?",)`` for several instantiations chosen at run time: no one known
    instantiation); unresolved where they name none or several."""
    functions = list(dict.fromkeys(f for f, _ in refs or ()))
    if len(functions) != 1:
        held = ", ".join(functions) if functions else "a function pointer the reader cannot follow"
        return _Held("unresolved", name, f'"{name}" holds {held}: which kernel runs is chosen at run time')
    lists = list(dict.fromkeys(t for _, t in refs or ()))
    targs = ("?",) if len(lists) > 1 else tuple(" ".join(_substitute(a, defs, set()).split()) for a in template_arguments(lists[0])) if lists[0] else None
    return _Held("exact", functions[0], note.format(held=functions[0] + ((lists[0] or "") if len(lists) == 1 else "<...>")), targs)


def _held_by(name: str, text: str, code: str, at: int, defs: dict[str, str]) -> _Held | None:
    """What the launch of ``name`` at ``at`` runs where ``name`` is a variable holding a kernel (its assignments
    in the function around it: :func:`pointer_targets`) or a parameter of that function (forwarded: what
    runs is what its callers pass); None where it is neither (the kernel's own name)."""
    targets = pointer_targets(name, text, code, at)
    if targets is not None:
        return _kernel_of(targets, defs, name, f'launched through "{name}", which holds {{held}}')
    around = enclosing_function(code, at)
    if around is not None and name in around[1]:
        index = around[1].index(name)
        return _Held("forwarded", name, f'"{name}" is parameter {index + 1} of {around[0]}(): what runs is the kernel its callers pass',
                     forwarded=(around[0], index))  # fmt: skip
    return None


def _cuda_launches(text: str, code: str, file: str, outer: dict[str, str]) -> list[LaunchSite]:
    sites = []
    assignments = _Assignments(text, code)
    for m in _CHEVRON.finditer(code):
        name = re.sub(r"\s+", "", m.group(1)).split("::")[-1]
        pasted = _pasted_name(text, code, name, m.start(1)) if "#" in text else None
        start = m.end()
        end = code.find(">>>", start)
        if end < 0:
            continue
        config = _split_top(text[start:end])
        paren = end + 3
        while paren < len(code) and code[paren].isspace():
            paren += 1
        if paren >= len(code) or code[paren] != "(":
            continue
        close = _close(code, paren)
        # inside a #define, a continued line ends in "\\", which is no part of an argument
        args = tuple(a for a in (" ".join(x.replace("\\\n", " ").split()) for x in _split_top(text[paren + 1 : close])) if a)
        defs = _definitions(text, code, m.start(), "c", outer)
        keep = set(args)
        grid = _three(config[0], defs, keep) if config else None
        block = _three(config[1], defs, keep) if len(config) > 1 else None
        shared = _substitute(config[2], defs, keep) if len(config) > 2 and config[2] else "0"
        targs = None
        if m.group(2):
            targs = tuple(" ".join(_substitute(a, defs, set()).split()) for a in template_arguments(text[m.start(2) : m.end(2)].replace("\\\n", " ")))
        values = tuple(" ".join(_substitute(a, _constants(m.start(), args, defs, assignments), set()).split()) for a in args)
        kind, notes = "pattern" if pasted else "exact", ()
        if pasted == "*":
            # the whole name is a parameter of the macro: which kernel runs, each use of the macro decides (read
            # per use through nvcc -E where the scan can; otherwise a launch of a kernel it cannot name)
            kind, notes = "unresolved", (f'"{name}" is a parameter of the macro around the launch: each use of the macro names the kernel',)
        forwarded = None
        held = _held_by(name, text, code, m.start(), defs) if not pasted and not m.group(2) and "::" not in m.group(1) else None
        if held is not None:  # a variable holding the kernel, or the parameter of a launcher function
            name, kind, notes, forwarded = held.kernel, held.kind, (held.note,), held.forwarded
            targs = held.template_args if held.kind == "exact" else targs
        sites.append(LaunchSite(name if pasted == "*" else pasted or name, file, _line_at(text, m.start()), "cuda", grid, block, " ".join(shared.split()), args,
                                notes=notes, template_args=targs, arg_values=values, name_kind=kind, pasted=bool(pasted),
                                forwarded=forwarded))  # fmt: skip
    return sites


class _Assignments:
    """Where each name is assigned in one file (``NAME = ...``, ``#define NAME ...``), read once per name
    asked about, and whether the last assignment before a launch declares a constant: a ``const`` /
    ``constexpr`` declaration or a ``#define``; a loop index (``for (int i = 0; ...)``) or a variable is
    not one value for the launch."""

    def __init__(self, text: str, code: str):
        self.text, self.code = text, code
        self._at: dict[str, list[tuple[int, bool]]] | None = None  # name -> (position, is a #define), in order

    def constant_before(self, name: str, before: int) -> bool:
        import bisect

        if self._at is None:  # one pass over the file, on the first question
            found = [(m.start(1), m.group(1), False) for m in re.finditer(rf"(?<![\w.>])({_IDENT})\s*=(?!=)", self.code)]
            found += [(m.start(1), m.group(1), True) for m in _DEFINE.finditer(self.text)]
            self._at = {}
            for pos, n, define in sorted(found):
                self._at.setdefault(n, []).append((pos, define))
        seen = self._at.get(name, [])
        at = bisect.bisect_left(seen, (before,)) - 1
        if at < 0:
            return False
        pos, define = seen[at]
        if define:
            return True
        lo = max(0, pos - 512)  # a declaration's words are near its name
        declared = self.code[max(lo - 1, *(self.code.rfind(c, lo, pos) for c in ";{}(")) + 1 : pos]
        return re.search(r"\b(?:const|constexpr)\b", declared) is not None


def _constants(before: int, args: tuple[str, ...], defs: dict[str, str], assignments: _Assignments) -> dict[str, str]:
    """The definitions among ``defs`` that the arguments name (directly or through another constant) and
    that are constants where the launch at ``before`` sees them."""
    out: dict[str, str] = {}
    todo = [n for n in re.findall(_IDENT, " ".join(args)) if n in defs]
    while todo:
        name = todo.pop()
        if name not in out and assignments.constant_before(name, before):
            out[name] = defs[name]
            todo += [n for n in re.findall(_IDENT, defs[name]) if n in defs]
    return out


def _getter_names(text: str, code: str, lits: list[Literal], language: str) -> dict[str, str]:
    """variable -> kernel name for ``var = ...load_function("name")`` / ``get_func(.., "name")`` /
    ``RawKernel(src, "name")`` / ``get_function("name")`` / ``cuModuleGetFunction(&var, mod, "name")``."""
    found: dict[str, str] = {}
    getter = re.compile(rf"(?:let\s+(?:mut\s+)?)?(?<![\w.])({_IDENT})[ \t]*(?::[ \t]*[^=;\n(){{}},]+)?=[ \t]*[^;\n=]*?\b(load_function|get_func|get_function|RawKernel|get_kernel)\s*\(")
    for m in getter.finditer(code):
        close = _close(code, m.end() - 1)
        inside = [lit for lit in lits if m.end() - 1 < lit.start < close]
        if inside:
            found[m.group(1)] = inside[-1].value
    for m in re.finditer(rf"\bcuModuleGetFunction\s*\(\s*&\s*({_IDENT})", code):
        close = _close(code, code.index("(", m.start()))
        inside = [lit for lit in lits if m.end() < lit.start < close]
        if inside:
            found[m.group(1)] = inside[-1].value
    return found


def _cudarc_config(text: str, code: str, expr: str, defs: dict[str, str], keep: set[str]) -> tuple[tuple | None, tuple | None, str | None, list[str]]:
    expr = _substitute(expr.strip(), {k: v for k, v in defs.items() if "LaunchConfig" in v}, set())
    m = re.search(r"LaunchConfig\s*\{(.*)\}", expr, re.S)
    if m:
        fields = {}
        for part in _split_top(m.group(1)):
            if ":" in part:
                key, _, value = part.partition(":")
                fields[key.strip()] = value.strip()
        grid = _three(fields["grid_dim"], defs, keep) if "grid_dim" in fields else None
        block = _three(fields["block_dim"], defs, keep) if "block_dim" in fields else None
        shared = _substitute(fields.get("shared_mem_bytes", "0"), defs, keep)
        notes = [] if grid and block else ["the LaunchConfig literal lacks grid_dim or block_dim"]
        return grid, block, " ".join(shared.split()), notes
    m = re.search(r"LaunchConfig\s*::\s*for_num_elems\s*\(", expr)
    if m:
        # its own argument, to the bracket closing it (a substituted ``cfg`` comes wrapped in brackets)
        n = _substitute(expr[m.end() : _close(expr, m.end() - 1)].strip(), defs, keep)
        # cudarc: 1024 threads per block, as many blocks as the elements need
        return (f"({n} + 1023) / 1024", "1", "1"), ("1024", "1", "1"), "0", []
    return None, None, None, [f"the launch configuration {expr!r} is not a LaunchConfig literal the reader can see"]


@dataclass(frozen=True)
class RustHelpers:
    """Functions and macros of a Rust code base that wrap cudarc's own calls, read from its sources
    (:func:`rust_helpers`) so that launches through them are seen like direct ones:

    * ``getters``: a function passing one of its parameters to ``load_function`` / ``get_func`` (or to
      another getter) as the kernel name -> that parameter's position (``fn get_or_load_func(&self,
      fn_name: &str, mdl: &Module)`` ... ``load_function(fn_name)`` -> 0);
    * ``namers``: a function returning ``format!(...)`` of its parameters -> (its parameters, the template):
      ``fn kernel_name<T>(root: &str) -> String { format!("{root}_{dtype}") }``;
    * ``builders``: methods whose body calls ``launch_builder`` (``func.builder()``);
    * ``arg_macros``: macros whose body pushes arguments with ``.arg(...)`` (``builder_arg!(b, x, y)``).
    """

    getters: dict[str, int] = field(default_factory=dict)
    namers: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    builders: frozenset[str] = frozenset()
    arg_macros: frozenset[str] = frozenset()


#: cudarc's own calls that fetch a kernel by name, and the position of the name among their arguments
_RUST_GETTERS = {"load_function": -1, "get_func": -1, "get_function": -1, "get_kernel": -1}
_RUST_FN = re.compile(rf"\bfn\s+({_IDENT})\s*(?:<[^{{}}();]*?>)?\s*\(")
_FORMAT = re.compile(r"\bformat\s*!\s*\(")


def _rust_functions(text: str, code: str):
    """(name, parameter names without ``self``, body start, body end, return type text) of each ``fn``."""
    for m in _RUST_FN.finditer(code):
        close = _close(code, m.end() - 1)
        brace = code.find("{", close)
        semi = code.find(";", close)
        if brace < 0 or (0 <= semi < brace):
            continue  # a declaration without a body (a trait's)
        params = []
        for part in _split_top(code[m.end() : close]):
            name = part.split(":")[0].strip().removeprefix("mut ").strip()
            if ":" in part and re.fullmatch(_IDENT, name):
                params.append(name)
        yield m.group(1), tuple(params), brace, _close(code, brace), code[close + 1 : brace]


def _call_args(text: str, code: str, open_at: int) -> list[str]:
    return [" ".join(a.split()) for a in _split_top(text[open_at + 1 : _close(code, open_at)])]


def rust_helpers(texts: list[str]) -> RustHelpers:
    """The wrappers of cudarc's calls that ``texts`` (Rust sources) define; see :class:`RustHelpers`.

    >>> h = rust_helpers(['fn get(&self, name: &str) -> F { self.m.load_function(name).unwrap() }\\n'
    ...                   'fn kname(root: &str) -> String { format!("{root}_{}", T::NAME) }'])
    >>> h.getters, h.namers
    ({'get': 0}, {'kname': (('root',), '{root}_{}')})
    """
    getters: dict[str, int] = {}
    namers: dict[str, tuple[tuple[str, ...], str]] = {}
    builders: set[str] = set()
    macros: set[str] = set()
    functions = []
    for text in texts:
        if len(text) > _MAX_TEXT:
            continue
        lits, code = lex(text, "rust")
        for name, params, body_at, body_end, returns in _rust_functions(text, code):
            body = code[body_at:body_end]
            functions.append((name, params, text, code, body_at, body_end))
            if re.search(r"\blaunch_builder\s*\(", body):
                builders.add(name)
            fmt = [f for f in _FORMAT.finditer(code, body_at, body_end)]
            if "String" in returns and len(fmt) == 1 and params:
                open_at = fmt[0].end() - 1
                inside = [lit for lit in lits if open_at < lit.start < _close(code, open_at)]
                if inside:
                    namers[name] = (params, inside[0].value)
        for m in re.finditer(rf"\bmacro_rules\s*!\s*({_IDENT})\s*\{{", code):
            if re.search(r"\.\s*arg\s*\(", code[m.end() : _close(code, m.end() - 1)]):
                macros.add(m.group(1))
    known = dict(_RUST_GETTERS)
    for _ in range(3):  # a wrapper of a wrapper, a few levels deep
        for name, params, text, code, body_at, body_end in functions:
            if name in known:
                continue
            for call in re.finditer(rf"\b({'|'.join(map(re.escape, known))})\s*\(", code[body_at:body_end]):
                open_at = body_at + call.end() - 1
                args = _call_args(text, code, open_at)
                pos = known[call.group(1)]
                if args and -len(args) <= pos < len(args):
                    arg = args[pos].lstrip("&").strip()
                    if arg in params:
                        getters[name] = known[name] = params.index(arg)
                        break
    return RustHelpers(getters, namers, frozenset(builders), frozenset(macros))


def _literal_text(expr: str) -> str | None:
    m = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', expr.strip())
    return m.group(1) if m else None


def _format_pattern(template: str, values: dict[str, list[str]], positional: list[list[str]]) -> list[str]:
    """The names a ``format!`` template gives: each ``{name}`` / ``{}`` replaced by the candidates of its
    value (``*`` where unknown); ``{{``/``}}`` are braces."""
    parts: list[list[str]] = []
    index = 0
    for m in re.finditer(r"\{\{|\}\}|\{([^{}]*)\}|[^{}]+", template):
        piece = m.group(0)
        if piece in ("{{", "}}"):
            parts.append([piece[0]])
        elif m.group(1) is not None:
            key = m.group(1).split(":")[0].strip()
            if key == "":
                parts.append(positional[index] if index < len(positional) else ["*"])
                index += 1
            elif key.isdigit():
                parts.append(positional[int(key)] if int(key) < len(positional) else ["*"])
            else:
                parts.append(values.get(key, ["*"]))
        else:
            parts.append([piece])
    names = [""]
    for options in parts:
        names = [n + o for n in names for o in options][:64]
    return [re.sub(r"\*+", "*", n) for n in dict.fromkeys(names)]


def _rust_name(text: str, code: str, expr_at: int, expr_end: int, helpers: RustHelpers, depth: int = 0) -> list[str]:
    """The kernel names (``*`` for a part known only at run time) the Rust expression ``text[expr_at:expr_end]``
    evaluates to: a literal, ``format!(...)``, a call of a name-building function, or a variable bound to one
    of those (or to a ``match`` whose arms are such literals) earlier in the function; [] where none is seen."""
    expr = text[expr_at:expr_end].strip()
    lead = len(text[expr_at:expr_end]) - len(text[expr_at:expr_end].lstrip())
    at = expr_at + lead
    while expr.startswith("&"):
        expr, at = expr[1:].lstrip(), at + 1 + (len(expr[1:]) - len(expr[1:].lstrip()))
    expr = re.sub(r"\s*\.\s*(?:as_str|to_string|as_ref|clone)\s*\(\s*\)\s*$", "", expr)
    if depth > 4 or not expr:
        return []
    lit = _literal_text(expr)
    if lit is not None:
        return [lit]

    def values_of(args_at: int, args: list[str], skip: int) -> tuple[list[list[str]], dict[str, list[str]]]:
        positional, named = [], {}
        for a in args[skip:]:
            key, eq, value = a.partition("=")
            if eq and re.fullmatch(_IDENT, key.strip()) and not value.startswith("="):
                named[key.strip()] = _sub_name(value.strip(), args_at) or ["*"]
            else:
                positional.append(_sub_name(a, args_at) or ["*"])
        return positional, named

    def _sub_name(sub: str, near: int) -> list[str]:
        pos = text.find(sub, near)
        if pos < 0:
            return []
        return _rust_name(text, code, pos, pos + len(sub), helpers, depth + 1)

    m = _FORMAT.match(expr)
    if m:
        open_at = at + m.end() - 1
        args = _call_args(text, code, open_at)
        template = _literal_text(args[0]) if args else None
        if template is None:
            return []
        positional, named = values_of(open_at, args, 1)
        # {name} inline: a variable of the function
        for key in re.findall(r"\{(" + _IDENT + r")(?::[^}]*)?\}", template):
            if key not in named:
                named[key] = _variable(text, code, key, at, helpers, depth) or ["*"]
        return _named(_format_pattern(template, named, positional))
    m = re.match(rf"(?:{_IDENT}\s*::\s*)*({_IDENT})\s*(?:::\s*<[^()]*>\s*)?\(", expr)
    if m and m.group(1) in helpers.namers and _close(expr, m.end() - 1) == len(expr) - 1:
        params, template = helpers.namers[m.group(1)]
        open_at = at + m.end() - 1
        args = _call_args(text, code, open_at)
        named = {p: (_sub_name(a, open_at) or ["*"]) for p, a in zip(params, args)}
        return _named(_format_pattern(template, named, []))
    if re.fullmatch(_IDENT, expr):
        return _variable(text, code, expr, at, helpers, depth)
    return []


def _named(names: list[str]) -> list[str]:
    """Names that say something: a pattern with no fixed letters (``{}`` alone) is no name."""
    return [n for n in names if re.search(r"[A-Za-z0-9]", n)]


_LET_BINDING = re.compile(rf"\blet\s+(?:mut\s+)?(\(?)([^=;]*?)\s*(?::[^=;]*)?=(?!=)")


def _variable(text: str, code: str, name: str, before: int, helpers: RustHelpers, depth: int) -> list[str]:
    """What the last ``let`` binding ``name`` before ``before`` in the same function gives (see :func:`_rust_name`)."""
    start = _scope_start(code, before, "rust")
    found = None
    for m in _LET_BINDING.finditer(code, start, before):
        bound = re.findall(_IDENT, m.group(2))
        if name in bound:
            found = m
    if found is None:
        return []
    rhs_at = found.end()
    rhs_end = code.find(";", rhs_at)
    while rhs_end >= 0 and _depth_at(code, rhs_at, rhs_end) > 0:
        rhs_end = code.find(";", rhs_end + 1)
    if rhs_end < 0:
        return []
    if not found.group(1):  # let name = EXPR;
        direct = _rust_name(text, code, rhs_at, rhs_end, helpers, depth + 1)
        if direct:
            return direct
    # a match (or if) choosing among literals: each arm's literal is a candidate, except literals of an
    # arm that returns or fails (``op: "const_set"`` in an error value) and struct fields
    rhs = text[rhs_at:rhs_end]
    lits = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', rhs):
        before = code[rhs_at : rhs_at + m.start()]
        arm = before[max(before.rfind("=>"), 0) :]
        if re.search(r"\b(?:return|Err|bail|panic)\b", arm) or re.search(rf"{_IDENT}\s*:\s*$", before):
            continue
        lits.append(m.group(1))
    return list(dict.fromkeys(v for v in lits if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v)))


def _depth_at(code: str, start: int, pos: int) -> int:
    depth = 0
    for ch in code[start:pos]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


def _rust_getter_names(text: str, code: str, helpers: RustHelpers) -> dict[str, list[tuple[list[str], str, int]]]:
    """variable -> [(kernel names or patterns, the name expression as written, where it is bound), ...] for
    each ``let VAR = ...getter(.., NAME, ..)...;``, with cudarc's getters and the project's wrappers."""
    known = {**_RUST_GETTERS, **helpers.getters}
    call = re.compile(rf"\b({'|'.join(map(re.escape, known))})\s*\(")
    found: dict[str, list[tuple[list[str], str, int]]] = {}
    for m in re.finditer(rf"\blet\s+(?:mut\s+)?({_IDENT})\s*(?::[^=;]*)?=(?!=)", code):
        end = code.find(";", m.end())
        while end >= 0 and _depth_at(code, m.end(), end) > 0:
            end = code.find(";", end + 1)
        c = call.search(code, m.end(), end if end >= 0 else len(code))
        if c is None or _depth_at(code, m.end(), c.start()) > 1:
            continue
        open_at = c.end() - 1
        parts = _split_top(text[open_at + 1 : _close(code, open_at)])
        pos = known[c.group(1)]
        if not parts or not -len(parts) <= pos < len(parts):
            continue
        arg = parts[pos]
        arg_at = text.find(arg, open_at)
        names = _rust_name(text, code, arg_at, arg_at + len(arg), helpers)
        found.setdefault(m.group(1), []).append((names, " ".join(arg.split()), m.start()))
    return found


def _fetched_at(fetched: dict[str, list[tuple[list[str], str, int]]], var: str, code: str, at: int) -> tuple[list[str], str, int] | None:
    """The binding of ``var`` that a use at ``at`` sees: the last one before it in the same function."""
    start = _scope_start(code, at, "rust")
    bindings = fetched.get(var, ())
    n = _before(bindings, at)
    return bindings[n] if n >= 0 and bindings[n][2] >= start else None


def _before(bindings: Sequence[tuple[list[str], str, int]], at: int) -> int:
    """The index of the last binding placed before ``at`` (bindings are in the order of the file)."""
    lo, hi = 0, len(bindings)
    while lo < hi:
        mid = (lo + hi) // 2
        if bindings[mid][2] < at:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def _cudarc_launches(text: str, code: str, lits: list[Literal], file: str, helpers: RustHelpers | None = None) -> list[LaunchSite]:
    helpers = helpers or RustHelpers()
    fetched = _rust_getter_names(text, code, helpers)
    sites: list[LaunchSite] = []

    def emit(var: str, at: int, cfg_text: str, args: list[str], defs: dict[str, str], notes: list[str]) -> None:
        names, expr, _ = _fetched_at(fetched, var, code, at)  # type: ignore[misc]
        grid, block, shared, more = _cudarc_config(text, code, cfg_text, defs, set(args))
        line = _line_at(text, at)
        if not names:
            why = f'the kernel name {expr} is not one the reader resolves'
            sites.append(LaunchSite(expr, file, line, "cudarc", grid, block, shared, tuple(args), (why, *notes, *more), name_kind="unresolved"))
        for name in names:
            kind = "pattern" if "*" in name else "exact"
            sites.append(LaunchSite(name, file, line, "cudarc", grid, block, shared, tuple(args), (*notes, *more), name_kind=kind))

    # func.launch(cfg, (a, b, n))
    for m in re.finditer(rf"\b({_IDENT})(?:\.clone\(\))?\s*\.\s*launch\s*\(", code):
        var = m.group(1)
        close = _close(code, m.end() - 1)
        parts = _split_top(text[m.end() : close])
        if len(parts) < 2 or _fetched_at(fetched, var, code, m.start()) is None:
            continue
        tup = parts[1].strip()
        inner = tup[1:-1] if tup.startswith("(") and tup.endswith(")") else tup
        args = [_argument(a) for a in _split_top(inner) if a.strip()]
        emit(var, m.start(), parts[0], args, _definitions(text, code, m.start(), "rust"), [])
    # stream.launch_builder(&func) / func.builder() (a method that calls launch_builder), then the arguments
    # (.arg(&x), an argument macro builder_arg!(b, x, y), a helper passed the builder) and .launch(cfg)
    methods = "|".join(map(re.escape, sorted(helpers.builders)))
    creation = re.compile(rf"\blaunch_builder\s*\(\s*&?\s*({_IDENT})\s*\)" + (rf"|\b({_IDENT})\s*\.\s*(?:{methods})\s*\(\s*\)" if methods else ""))
    for m in creation.finditer(code):
        var = m.group(1) or m.group(2)
        if _fetched_at(fetched, var, code, m.start()) is None:
            continue
        bound = re.search(rf"\blet\s+(?:mut\s+)?({_IDENT})\s*(?::[^=;]*)?=\s*[^;]*$", code[max(0, m.start() - 200) : m.start()])
        builder = bound.group(1) if bound else None
        if builder is None:  # a chain: f.builder().arg(..).launch(cfg)
            launch = re.compile(r"\.\s*launch\s*\(").search(code, m.end())
            if launch is None:
                continue
            args = []
            for a in re.finditer(r"\.\s*arg\s*\(", code[m.end() : launch.start()]):
                start = m.end() + a.end() - 1
                args.append(_argument(text[start + 1 : _close(code, start)]))
            emit(var, m.start(), text[launch.end() : _close(code, launch.end() - 1)], args, _definitions(text, code, m.start(), "rust"), [])
            continue
        launch = re.compile(rf"\b{re.escape(builder)}\s*\.\s*launch\s*\(").search(code, m.end())
        if launch is None:
            continue
        args, notes = _builder_arguments(text, code, m.end(), launch.start(), builder, helpers)
        emit(var, m.start(), text[launch.end() : _close(code, launch.end() - 1)], args, _definitions(text, code, m.start(), "rust"), notes)
    return sites


@lru_cache(maxsize=8)
def _macro_names(code: str, arg_macros: frozenset[str]) -> str:
    """The argument macros a Rust source may call, as a regex alternation: ``arg_macros`` and the aliases
    it gives them (``use crate::builder_arg as barg;``), read once per file."""
    aliases = {m.group(2) for m in re.finditer(rf"\b({_IDENT})\s+as\s+({_IDENT})", code) if m.group(1) in arg_macros}
    return "|".join(map(re.escape, sorted(arg_macros | aliases)))


def _builder_arguments(text: str, code: str, start: int, end: int, builder: str, helpers: RustHelpers) -> tuple[list[str], list[str]]:
    """The arguments pushed onto the launch builder ``builder`` between ``start`` and ``end``, in order:
    ``builder.arg(&x)`` (and ``.arg(..)`` chained to it), an argument macro ``builder_arg!(builder, x, y)``,
    and ``helper(&mut builder)`` / ``x.helper(&mut builder)``, which pushes what the reader does not see
    (taken as one argument, ``?``, and noted)."""
    found: list[tuple[int, str]] = []
    notes: list[str] = []
    b = re.escape(builder)
    for m in re.finditer(rf"\b{b}\s*\.\s*arg\s*\(", code[start:end]):
        at = start + m.end() - 1
        while True:
            close = _close(code, at)
            found.append((at, _argument(text[at + 1 : close])))
            nxt = re.compile(r"\s*\.\s*arg\s*\(").match(code, close + 1)
            if nxt is None:
                break
            at = nxt.end() - 1
    macros = _macro_names(code, helpers.arg_macros)
    for m in re.finditer(rf"\b(?:{_IDENT}\s*::\s*)*(?:{macros})\s*!\s*\(\s*{b}\s*,", code[start:end]) if macros else ():
        open_at = start + code[start:end].index("(", m.start())
        for a in _split_top(text[open_at + 1 : _close(code, open_at)])[1:]:
            if a.strip():
                found.append((open_at + text[open_at:].find(a), _argument(a)))
    for m in re.finditer(rf"((?:{_IDENT}\s*\.\s*)*{_IDENT})\s*\(\s*&\s*mut\s+{b}\s*\)", code[start:end]):
        found.append((start + m.start(), "?"))
        notes.append(f'"{" ".join(text[start + m.start() : start + m.end()].split())}" pushes an argument the reader does not see (taken as one)')
    return [a for _, a in sorted(found)], notes


def _cupy_launches(text: str, code: str, lits: list[Literal], file: str) -> list[LaunchSite]:
    names = _getter_names(text, code, lits, "python")
    sites = []
    for var, kernel in names.items():
        for m in re.finditer(rf"(?<![\w.]){re.escape(var)}\s*\(", code):
            line_start = code.rfind("\n", 0, m.start()) + 1
            if re.match(rf"\s*{re.escape(var)}\s*=", code[line_start:]):
                continue  # the assignment that fetches it
            close = _close(code, m.end() - 1)
            parts = _split_top(text[m.end() : close])
            positional = [p for p in parts if not re.match(rf"{_IDENT}\s*=", p)]
            keywords = dict(p.split("=", 1) for p in parts if re.match(rf"{_IDENT}\s*=", p))
            keywords = {k.strip(): v.strip() for k, v in keywords.items()}
            if len(positional) < 3:
                continue
            defs = _definitions(text, code, m.start(), "python")
            tup = positional[2].strip()
            inner = tup[1:-1] if tup[:1] in "([" and tup[-1:] in ")]" else tup
            args = tuple(_argument(a) for a in _split_top(inner) if a.strip())
            keep = set(args)
            shared = _substitute(keywords.get("shared_mem", "0"), defs, keep)
            sites.append(LaunchSite(kernel, file, _line_at(text, m.start()), "cupy", _three(positional[0], defs, keep),
                                    _three(positional[1], defs, keep), " ".join(shared.split()), args))  # fmt: skip
    return sites


def _driver_launches(text: str, code: str, lits: list[Literal], file: str, outer: dict[str, str]) -> list[LaunchSite]:
    names = _getter_names(text, code, lits, "c")
    sites = []
    for m in re.finditer(r"\bcuLaunchKernel\s*\(", code):
        close = _close(code, m.end() - 1)
        parts = _split_top(text[m.end() : close])
        if len(parts) < 9 or parts[0].strip() not in names:
            continue
        defs = _definitions(text, code, m.start(), "c", outer)
        # the kernel's arguments: void* args[] = { &x, &y, &n }; passed as the tenth argument
        args: tuple[str, ...] | None = None
        notes: tuple[str, ...] = ()
        array = parts[9].strip() if len(parts) > 9 else ""
        arrays = list(re.finditer(rf"\bvoid\s*\*\s*{re.escape(array)}\s*\[[^\]]*\]\s*=\s*\{{", code[: m.start()])) if array else []
        if arrays:
            open_at = arrays[-1].end() - 1
            args = tuple(_argument(a) for a in _split_top(text[open_at + 1 : _close(code, open_at)]) if a.strip())
        else:
            notes = (f'the kernel\'s arguments are passed through "{array}", which the reader does not follow',)
        keep = set(args or ())
        sub = [" ".join(_substitute(p, defs, keep).split()) for p in parts]
        sites.append(LaunchSite(names[parts[0].strip()], file, _line_at(text, m.start()), "driver",
                                (sub[1], sub[2], sub[3]), (sub[4], sub[5], sub[6]), sub[7], args, notes))  # fmt: skip
    return sites


_RUNTIME_LAUNCH = re.compile(r"\b(cudaLaunchKernel|cudaLaunchCooperativeKernel|cudaLaunchKernelEx)\s*(?:<[^<>;()]*>\s*)?\(")


def _runtime_launches(text: str, code: str, file: str, outer: dict[str, str]) -> list[LaunchSite]:
    """The runtime API's launches: ``cudaLaunchKernel(func, grid, block, args, shared, stream)`` and
    ``cudaLaunchCooperativeKernel`` (the same arguments), whose geometry is read as a ``<<<...>>>``'s; and
    ``cudaLaunchKernelEx(&config, func, args...)``, whose geometry is in the config (not read). ``func`` is
    read as an assignment to a function pointer is (``(void*)k``, ``reinterpret_cast<const void*>(k<64>)``,
    a variable holding the kernel, a parameter of the function around the launch: forwarded).

    >>> src = "void h(float* y, int n) { void* a[] = {&y, &n}; cudaLaunchCooperativeKernel((void*)fill<64>, dim3(n / 64), 64, a, 0, 0); }"
    >>> [(s.kernel, s.template_args, s.grid, s.block, s.shared) for s in _runtime_launches(src, src, "h.cu", {})]
    [('fill', ('64',), ('n / 64', '1', '1'), ('64', '1', '1'), '0')]
    """
    sites = []
    for m in _RUNTIME_LAUNCH.finditer(code):
        close = _close(code, m.end() - 1)
        if close >= len(code):
            continue
        parts = _split_top(text[m.end() : close], angles=True)
        ex = m.group(1) == "cudaLaunchKernelEx"
        if len(parts) < (2 if ex else 3):
            continue
        func = " ".join(parts[1 if ex else 0].split())
        line = _line_at(text, m.start())
        defs = _definitions(text, code, m.start(), "c", outer)
        grid = block = None
        shared: str | None = None
        if not ex:
            grid, block = _three(parts[1], defs, set()), _three(parts[2], defs, set())
            shared = " ".join(_substitute(parts[4], defs, set()).split()) if len(parts) > 4 else "0"
        notes = (f"{m.group(1)} passes the kernel's arguments through a pointer array or a parameter pack, which the reader does not follow",)
        bare = re.fullmatch(rf"(?:\(\s*(?:const\s+)?void\s*\*\s*\)\s*)?({_IDENT})", func)
        held = _held_by(bare.group(1), text, code, m.start(), defs) if bare is not None else None
        if held is None:  # the kernel named in place: (void*)k, reinterpret_cast<const void*>(k<64>)
            held = _kernel_of(function_refs(func), defs, func, "")
        if held.kind == "forwarded":
            sites.append(LaunchSite(held.kernel, file, line, "runtime", grid, block, shared, None, (held.note,), name_kind="forwarded", forwarded=held.forwarded))
        elif held.kind == "unresolved":
            sites.append(LaunchSite(func, file, line, "runtime", grid, block, shared, None, (f'{m.group(1)} launches "{func}", which the reader cannot name',), name_kind="unresolved"))
        else:
            sites.append(LaunchSite(held.kernel, file, line, "runtime", grid, block, shared, None, notes, template_args=held.template_args, via=m.group(1)))
    return sites


def find_launches(text: str, language: str, file: str = "", included: dict[str, str] | None = None,
                  rust: RustHelpers | None = None) -> list[LaunchSite]:
    """Every launch site of ``text`` (a host source in ``language``: "c", "rust", "python"), in order.

    A C++ launch sees the file-scope constants of ``text`` (:func:`file_constants`) and ``included``: those
    of the headers it includes, which the caller reads (this module reads no files). A Rust launch sees
    through the wrappers ``rust`` names (:func:`rust_helpers` of the code base's Rust sources)."""
    if len(text) > _MAX_TEXT:
        return []
    lits, code = lex(text, language)
    sites: list[LaunchSite] = []
    if language == "c":
        outer = {**(included or {}), **file_constants(text)} if "<<<" in code or "cuLaunchKernel" in code or "cudaLaunch" in code else {}
        macros = {k: v for k, v in outer.items() if k.endswith(")")}
        if macros:
            text = _expand_macros(text, code, macros)
            lits, code = lex(text, language)
        outer = {k: v for k, v in outer.items() if not k.endswith(")")}
        if "<<<" in code:
            sites += _cuda_launches(text, code, file, outer)
        if "cuLaunchKernel" in code:
            sites += _driver_launches(text, code, lits, file, outer)
        if "cudaLaunch" in code:
            sites += _runtime_launches(text, code, file, outer)
    elif language == "rust":
        sites += _cudarc_launches(text, code, lits, file, rust)
    elif language == "python":
        sites += _cupy_launches(text, code, lits, file)
    return sorted(sites, key=lambda s: (s.line, s.kernel))


# ---------------------------------------------------------------------------------------------------
# C / Rust / Python expressions -> contract dim expressions

_CALLS = {
    "ceil_div": "ceil_div", "CEIL_DIV": "ceil_div", "DIV_UP": "ceil_div", "div_up": "ceil_div", "cdiv": "ceil_div",
    "CDIV": "ceil_div", "ceildiv": "ceil_div", "div_ceil": "ceil_div", "DIVUP": "ceil_div", "divUp": "ceil_div",
    "min": "min", "max": "max", "std::min": "min", "std::max": "max", "MIN": "min", "MAX": "max", "fminf": "min",
    "fmaxf": "max",
}  # fmt: skip
_SIZEOF = {"float": 4, "double": 8, "int": 4, "unsigned": 4, "half": 2, "__half": 2, "__nv_bfloat16": 2, "float4": 16,
           "float2": 8, "int4": 16, "char": 1, "long": 8, "size_t": 8, "int64_t": 8, "uint32_t": 4, "int32_t": 4,
           "f32": 4, "f64": 8, "u32": 4, "i32": 4, "u64": 8, "i64": 8, "unsigned int": 4, "unsigned char": 1,
           "short": 2, "unsigned short": 2, "long long": 8, "unsigned long": 8, "unsigned long long": 8, "bool": 1,
           "uint8_t": 1, "int8_t": 1, "int16_t": 2, "uint16_t": 2, "uint64_t": 8, "__nv_fp8_e4m3": 1,
           "__nv_fp8_e5m2": 1, "__half2": 4, "half2": 4, "__nv_bfloat162": 4, "double2": 16, "int2": 8, "uint4": 16,
           "uint2": 8}  # fmt: skip
_CAST = re.compile(r"\(\s*(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:int|long(?:\s+long)?|size_t|unsigned|uint32_t|int32_t|int64_t|uint64_t|u32|usize|i32)\s*\)")
_CXX_CAST = re.compile(r"\b(?:static_cast|reinterpret_cast)\s*<[^<>]*>")


_MEMBER = re.compile(rf"({_IDENT})\s*(?:->|\.)\s*(?={_IDENT}\b(?!\s*\())")
_SIZEOF_OF = re.compile(r"\bsizeof\s*\(\s*((?:(?:const|unsigned|signed|long|short)\s+)*[A-Za-z_][\w:]*)\s*\)")


def _size_of(m: re.Match) -> str:
    """The bytes of the type ``sizeof(...)`` names where it is a built-in or standard one (``unsigned int``,
    ``std::int32_t``, ``size_t``); ``sizeof_NAME`` (which does not translate) for any other.

    >>> [_size_of(_SIZEOF_OF.search(t)) for t in ("sizeof(int32_t)", "sizeof(unsigned long long)", "sizeof(std::uint8_t)", "sizeof(Foo)")]
    ['4', '8', '1', 'sizeof_Foo']
    """
    words = [w for w in re.sub(r"^(?:::)?std::", "", m.group(1).strip()).split() if w != "const"]
    name = " ".join(words)
    size = _SIZEOF.get(name) or _SIZEOF.get(name.replace("signed ", "", 1) if name.startswith("signed ") else "")
    return str(size) if size else "sizeof_" + re.sub(r"\W+", "_", name)


def _host_python(src: str) -> str:
    """A C, Rust or Python integer expression rewritten as Python source (``/`` -> ``//``, casts and
    literal suffixes dropped, ``a->b``/``a.b`` fields as single names), ready for :mod:`ast`."""
    src = src.strip()
    # sizeof first: the casts' pattern would take sizeof(int32_t)'s parentheses for a cast (vllm's shared
    # memory sizes were left "sizeof" times the count)
    src = _SIZEOF_OF.sub(_size_of, src)
    src = _CXX_CAST.sub("", src)
    src = _CAST.sub("", src)
    src = re.sub(r"\bstd\s*::\s*(min|max)\b", r"\1", src)
    src = re.sub(r"\b(\d+)(?:[uUlL]+|_?(?:u32|usize|i32|u64|i64))\b", r"\1", src)
    src = re.sub(r"\s+as\s+(?:u32|usize|i32|u64|i64|c_int)\b", "", src)  # Rust casts
    for _ in range(4):
        src = _MEMBER.sub(r"\1__", src)
    return src.replace("/", "//").replace("////", "//")


def to_dim_expr(host: str, renames: dict[str, str]) -> tuple[str | None, str]:
    """``host`` (a C, Rust or Python integer expression) as a contract dim expression, with host names
    renamed by ``renames`` (host variable or expression passed as an argument -> kernel parameter: a
    subexpression equal to an argument's expression becomes that parameter); (None, why) where it does
    not translate."""
    exprs: dict[str, str] = {}
    names: dict[str, str] = {}
    for key, name in renames.items():
        py = _host_python(key)
        if re.fullmatch(_IDENT, py):
            names[py] = name
            continue
        try:
            exprs[ast.dump(ast.parse(py, mode="eval").body)] = name
        except SyntaxError:
            continue
    src = host.strip()
    if re.search(r"\.\s*div_ceil\s*\(", src):
        return None, f'"{host}" uses a method call the reader does not translate'
    src = _host_python(src)
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError:
        return None, f'"{host}" is not an expression the reader can translate'
    try:
        out = _emit(tree, names, exprs)
    except _Untranslatable as exc:
        return None, f'"{host}": {exc}'
    from ..dims import ExprError, parse_expr

    try:
        parse_expr(out)
    except ExprError as exc:
        return None, f'"{host}" translates to "{out}", which is no dim expression ({exc})'
    return out, ""


class _Untranslatable(Exception):
    pass


def _is_minus_one_of(node: ast.AST, divisor: ast.AST) -> bool:
    """``node`` is ``divisor - 1`` (or the constant one less than a constant divisor)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.right, ast.Constant) and node.right.value == 1:
        return ast.dump(node.left) == ast.dump(divisor)
    if isinstance(node, ast.Constant) and isinstance(divisor, ast.Constant) and isinstance(node.value, int):
        return node.value == divisor.value - 1
    return False


def _emit(node: ast.AST, renames: dict[str, str], exprs: dict[str, str] | None = None) -> str:
    exprs = exprs or {}
    if exprs and ast.dump(node) in exprs:
        return exprs[ast.dump(node)]
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return str(node.value)
    if isinstance(node, ast.Name):
        if node.id.startswith("sizeof_"):
            raise _Untranslatable(f"the size of type {node.id[7:]} is not known")
        return renames.get(node.id, node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return f"-{_emit(node.operand, renames, exprs)}"
    if isinstance(node, ast.BinOp):
        op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}.get(type(node.op))
        if op is None:
            raise _Untranslatable("it uses an operator dim expressions do not have")
        if op == "//":
            num, den = node.left, node.right
            # (a + b - 1) / b, (a + (b - 1)) / b  ->  ceil_div(a, b)
            if isinstance(num, ast.BinOp) and isinstance(num.op, ast.Add) and _is_minus_one_of(num.right, den):
                return f"ceil_div({_emit(num.left, renames, exprs)}, {_emit(den, renames, exprs)})"
            if (isinstance(num, ast.BinOp) and isinstance(num.op, ast.Sub) and isinstance(num.right, ast.Constant)
                    and num.right.value == 1 and isinstance(num.left, ast.BinOp) and isinstance(num.left.op, ast.Add)
                    and ast.dump(num.left.right) == ast.dump(den)):  # fmt: skip
                return f"ceil_div({_emit(num.left.left, renames, exprs)}, {_emit(den, renames, exprs)})"
        return f"{_wrap(node.left, renames, exprs)} {op} {_wrap(node.right, renames, exprs)}"
    if isinstance(node, ast.Call):
        func = ast.unparse(node.func).replace(" ", "")
        name = _CALLS.get(func)
        if name is None:
            raise _Untranslatable(f"it calls {func}(), which dim expressions do not have")
        if name == "ceil_div" and len(node.args) != 2:
            raise _Untranslatable(f"{func}() takes two arguments")
        return f"{name}({', '.join(_emit(a, renames, exprs) for a in node.args)})"
    raise _Untranslatable("it has a form dim expressions do not have")


def _wrap(node: ast.AST, renames: dict[str, str], exprs: dict[str, str]) -> str:
    text = _emit(node, renames, exprs)
    plain = text.startswith("ceil_div(") or re.fullmatch(rf"{_IDENT}|\d+", text)
    return f"({text})" if isinstance(node, ast.BinOp) and not plain else text
