"""``wireup init``: read the ``__global__`` functions of a CUDA source and scaffold their contracts.

The parser reads C/CUDA declarations, not the C preprocessor: comments and string literals are removed,
``#`` lines dropped, then each ``__global__`` declaration is taken apart -- ``extern "C"`` (on the
declaration or as a block), ``template <...>``, namespaces, attributes such as ``__launch_bounds__(256)``
and ``__cluster_dims__(1, 1, 8)``, multi-line parameter lists, ``const float* __restrict__ x``,
``float *x``, ``float x[]``, ``long long``, ``int64_t``, ``unsigned``... A kernel declared by a macro is
not seen.

The contract it writes has the parameters (names, order, kind and dtype from the signature; pointers
become tensors, role "in" when the data is ``const`` and "out" otherwise). Where host code in the same
file (or a ``--host`` file) launches the kernel (:mod:`audit.cuda.launches`: ``<<<...>>>``, cudarc,
CuPy, ``cuLaunchKernel``), the grid, block, dynamic shared memory and scalar values come from that launch:
host variables passed as integer arguments become dims named after the kernel's parameters (a constant
passed by name, ``const int Bc = 32;``, a fixed dim ``Bc = 32``), and ``CEIL_DIV(n, b)`` or
``(n + b - 1) / b`` become ``ceil_div(n, b)``. What neither the signature nor a launch can tell stays the
placeholder ``TODO`` (shapes, always; a grid or block component a launch does not show or that does not
translate, with the host expression quoted; the other components of a ``dim3`` are kept). The first
launch of a kernel gives its geometry; a later one with other geometry or arguments is named in a
comment. Several sources make one file with one ``[dims]`` table (:func:`scaffold_sources`). ``TODO``
parses as a dim name that is not declared, so ``wireup check`` fails (``UNKNOWN_DIM``) until every one
is filled in.

>>> [k.name for k in parse_kernels('extern "C" __global__ void f(const float* x, int n) {}')]
['f']
>>> print(scaffold_contracts(parse_kernels('extern "C" __global__ void f(const float* x, int n) {}'), "k.cu").splitlines()[4])
name = "f"
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .cuda.hostlex import lex
from .cuda.preprocess import preprocessed
from .cuda.scope import template_params, with_defaults

if TYPE_CHECKING:
    from .cuda.launches import LaunchSite

TODO = "TODO"

#: C spellings (qualifiers removed, words sorted) -> contract dtype.
_C_DTYPES = {
    "float": "f32", "double": "f64", "__half": "f16", "half": "f16",
    "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16", "__bfloat16": "bf16",
    "int": "i32", "signed": "i32", "int signed": "i32", "int32_t": "i32",
    "unsigned": "u32", "int unsigned": "u32", "uint32_t": "u32", "uint": "u32",
    "long long": "i64", "int long long": "i64", "long": "i64", "int long": "i64", "long long signed": "i64",
    "int64_t": "i64", "ptrdiff_t": "i64", "ssize_t": "i64", "long long int signed": "i64",
    "long long unsigned": "u64", "int long long unsigned": "u64", "long unsigned": "u64", "int long unsigned": "u64",
    "uint64_t": "u64", "size_t": "u64",
    "short": "i16", "int short": "i16", "int16_t": "i16", "short signed": "i16",
    "char": "i8", "char signed": "i8", "int8_t": "i8",
    "char unsigned": "u8", "uint8_t": "u8", "bool": "u8",
}  # fmt: skip
#: CUDA's vector types -> (contract dtype of a lane, lanes, the type's alignment in bytes): a pointer to one
#: is a buffer of that dtype with a trailing axis of the lanes (and ``align`` where the vector's exceeds the lane's)
_C_VECTORS = {
    **{f"{c}{n}": (d, n, a) for c, d, sizes in (
        ("char", "i8", (1, 2, 1, 4)), ("uchar", "u8", (1, 2, 1, 4)), ("short", "i16", (2, 4, 2, 8)),
        ("ushort", "u16", (2, 4, 2, 8)), ("int", "i32", (4, 8, 4, 16)), ("uint", "u32", (4, 8, 4, 16)),
        ("float", "f32", (4, 8, 4, 16)), ("longlong", "i64", (8, 16, 8, 0)), ("ulonglong", "u64", (8, 16, 8, 0)),
        ("double", "f64", (8, 16, 8, 0))) for n, a in zip((1, 2, 3, 4), sizes) if a},
    "__half2": ("f16", 2, 4), "half2": ("f16", 2, 4), "__nv_bfloat162": ("bf16", 2, 4), "nv_bfloat162": ("bf16", 2, 4),
}  # fmt: skip
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "__grid_constant__", "struct", "class",
               "typename", "register", "enum"}  # fmt: skip
_ATTRIBUTES = {"__launch_bounds__", "__cluster_dims__", "__maxnreg__", "__attribute__", "__declspec", "__noinline__",
               "__forceinline__", "static", "inline", "__inline__", "void", "extern", "__global__", "extern_C"}  # fmt: skip
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|::|\d[\w.]*|\S")
_ISV_NAME = re.compile(r"isv(?:_dev)?(?:_ptr)?|isv_dev_ptr")  # used with fullmatch


@dataclass
class CParam:
    """One parameter as written: its name, C base type, pointer depth and whether the data is const."""

    name: str
    ctype: str
    pointer: int
    const_data: bool
    dtype: str | None
    template_type: bool = False
    #: a CUDA vector type's lanes and alignment (``float4``: 4, 16); 1, None for a plain type
    lanes: int = 1
    align: int | None = None

    @property
    def kind(self) -> str:
        if self.pointer and _ISV_NAME.fullmatch(self.name) and self.dtype == "f32":
            return "isv"
        return "tensor" if self.pointer else "scalar"


@dataclass
class CKernel:
    """A ``__global__`` function: name, qualified C++ name, parameters and what surrounds it."""

    name: str
    line: int
    extern_c: bool
    namespace: tuple[str, ...] = ()
    template: str | None = None
    launch_bounds: str | None = None
    params: list[CParam] = field(default_factory=list)
    defined: bool = True  # False for a declaration only (``__global__ void k(float* y);``, a header's prototype)
    #: explicit instantiations the file declares (``template __global__ void k<half, 1024>(...);``), each as
    #: (its template arguments as written, its line)
    instantiations: list[tuple[tuple[str, ...], int]] = field(default_factory=list)
    #: the contract's name where it is not the function's: an overload after the first of its name
    #: (``scale(__half*, int)`` after ``scale(float*, int)``: "scale_f16"), whose cpp_name stays the function's
    #: (the build picks the overload by the contract's dtypes)
    contract_name: str | None = None
    #: pointer parameters its body tests against NULL (``if (mean != nullptr)``): name -> (line, the test as
    #: written), from :func:`mark_null_tests`; each is scaffolded ``optional = true``
    null_tested: dict[str, tuple[int, str]] = field(default_factory=dict)

    @property
    def cpp_name(self) -> str:
        ns = "::".join(n for n in self.namespace if n)
        base = f"{ns}::{self.name}" if ns else self.name
        return base + ("<TODO>" if self.template else "")


def _strip(text: str) -> str:
    """Code with comments, string literals and preprocessor lines blanked (line numbers kept)."""
    text = re.sub(r'\bextern\s*"C(?:\+\+)?"', lambda m: "extern_C" + " " * (len(m.group(0)) - 8) if '"C"' in m.group(0) else m.group(0), text)
    _, code = lex(text, "c")
    lines = code.split("\n")
    cont = False
    for i, line in enumerate(lines):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            lines[i] = ""
    return "\n".join(lines)


def parse_kernels(text: str) -> list[CKernel]:
    """Every ``__global__`` function declared or defined in ``text``, in file order (one per name: its
    definition where the file has one; each further overload of a name, defined with other parameter types,
    as its own, :attr:`CKernel.contract_name` telling them apart)."""
    code = _strip(text)
    tokens = []
    line, seen = 1, 0
    for m in _TOKEN.finditer(code):
        line += code.count("\n", seen, m.start())
        seen = m.start()
        tokens.append((m.group(0), line))
    out: dict[str, CKernel] = {}
    overloads: list[CKernel] = []
    scopes: list[tuple[str, str]] = []  # (kind, name): "namespace", "extern_c", "other"
    i = 0
    decl_start = 0
    while i < len(tokens):
        tok, line = tokens[i]
        if tok == "namespace":
            j = i + 1
            name = ""
            while j < len(tokens) and tokens[j][0] not in ("{", ";", "="):
                name += tokens[j][0]
                j += 1
            if j < len(tokens) and tokens[j][0] == "{":
                scopes.append(("namespace", name))
                i = j + 1
                decl_start = i
                continue
        if tok == "extern_C" and i + 1 < len(tokens) and tokens[i + 1][0] == "{":
            scopes.append(("extern_c", ""))
            i += 2
            decl_start = i
            continue
        if tok == "{":
            # a body: skip it whole (kernels are declared at namespace scope)
            depth, j = 1, i + 1
            while j < len(tokens) and depth:
                depth += {"{": 1, "}": -1}.get(tokens[j][0], 0)
                j += 1
            i = j
            decl_start = i
            continue
        if tok == "}":
            if scopes:
                scopes.pop()
            i += 1
            decl_start = i
            continue
        if tok == ";":
            i += 1
            decl_start = i
            continue
        if tok == "__global__":
            k, end = _declaration(tokens, decl_start, i, scopes)
            prev = out.get(k.name) if k is not None else None
            if k is not None and prev is not None and _overloads(prev, k):
                # a second definition of the name with other parameter types: an overload, its own contract
                k.contract_name = _overload_name(k, prev, {*out, *(o.contract_name for o in overloads)})
                overloads.append(k)
                i = max(end, i + 1)
                decl_start = i
                continue
            if k is not None and k.name in out:
                k.instantiations = out[k.name].instantiations + k.instantiations
            if k is not None and (k.name not in out or (k.defined and not out[k.name].defined)):
                out[k.name] = k  # the definition, where a prototype came first
            elif k is not None:
                out[k.name].instantiations = k.instantiations  # an explicit instantiation of a kernel defined above
            i = max(end, i + 1)
            decl_start = i
            continue
        i += 1
    return [*out.values(), *overloads]


def mark_null_tests(kernels: Iterable[CKernel], text: str) -> None:
    """Fill in :attr:`CKernel.null_tested` of each kernel of ``kernels`` that ``text`` defines: the pointer
    parameters its body (or a device function of ``text`` it passes them on to) tests against NULL
    (:mod:`audit.cuda.nulltests`); a file that does not parse leaves them empty.

    >>> ks = parse_kernels("__global__ void k(float* y, const float* b) {\\n  if (b) y[0] = b[0]; }")
    >>> mark_null_tests(ks, "__global__ void k(float* y, const float* b) {\\n  if (b) y[0] = b[0]; }")
    >>> ks[0].null_tested
    {'b': (2, 'if (b)')}
    """
    from .cuda.nulltests import null_tests
    from .cuda.scope import Source
    from .cuda.tokens import TokenizeError

    try:
        src = Source.parse(text)
    except (TokenizeError, RecursionError):
        return
    for k in kernels:
        if not k.defined:
            continue
        named = [f for f in src.functions if f.is_global and f.name == k.name and f.close > f.open]
        if not named:
            continue
        entry = min(named, key=lambda f: abs(f.line - k.line))  # an overload: the definition at its line
        for t in null_tests({None: src}, None, entry):
            k.null_tested.setdefault(t.param, (t.line, t.text))


def name_overload(k: CKernel, others: Iterable[CKernel], taken: set[str]) -> bool:
    """Where ``k`` (of another source) defines another overload of a name ``others`` (the kernels of that
    name chosen so far, the plain one first) define, give it its own :attr:`CKernel.contract_name` (unique
    in ``taken``) and return True; False where it is one of them (a prototype, the same definition)."""
    others = list(others)
    if not others or k.contract_name is not None:
        return False
    if any(not _overloads(o, k) for o in others):
        return False
    k.contract_name = _overload_name(k, others[0], taken)
    return True


def second_definition_name(k: CKernel, source: str, taken: Iterable[str]) -> str:
    """The contract name of ``k`` where another source defines a kernel of its name too: the name and the
    stem of ``source`` (``renderCUDA_backward`` for ``backward.cu``), made unique against ``taken``.

    >>> second_definition_name(CKernel("renderCUDA", 1, False), "cuda_rasterizer/backward.cu", {"renderCUDA"})
    'renderCUDA_backward'
    """
    taken = set(taken)
    stem = re.sub(r"\W+", "_", source.rsplit("/", 1)[-1].split(".", 1)[0]).strip("_") or "source"
    base = f"{k.name}_{stem}"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def _overloads(prev: CKernel, k: CKernel) -> bool:
    """Whether ``k`` defines another overload of ``prev``'s name (both definitions, neither a template,
    other parameter types), not its definition after a prototype or an instantiation of it."""
    return prev.defined and k.defined and not prev.template and not k.template and [p.ctype for p in prev.params] != [p.ctype for p in k.params]


def _overload_name(k: CKernel, first: CKernel, taken: set) -> str:
    """``scale_f16`` for ``scale(__half*, int)`` after ``scale(float*, int)``: the name and the dtypes (else C
    types) of the parameters whose types differ, made unique."""
    diff = [p.dtype or re.sub(r"\W+", "_", p.ctype).strip("_") for p, q in zip(k.params, first.params) if p.ctype != q.ctype]
    if len(k.params) != len(first.params):
        diff.append(f"{len(k.params)}_args")
    base = "_".join([k.name, *dict.fromkeys(diff)])
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


#: a function-like macro whose body declares a kernel (``#define AFFINE_OP(T, NAME) extern "C" __global__ ...``)
_MACRO_KERNEL = re.compile(r"^[ \t]*#[ \t]*define[ \t]+\w+\((?:[^\n]*\\\n)*[^\n]*\b__global__\b", re.MULTILINE)


def declares_macro_kernels(texts: Iterable[str]) -> bool:
    """Whether any of ``texts`` (a source and its local headers) defines a macro that declares a kernel."""
    return any(_MACRO_KERNEL.search(t) for t in texts)


def macro_kernels(path: Path, include_dirs: Iterable[Path], nvcc: Path, timeout: float = 60.0) -> tuple[list[CKernel], str | None]:
    """The kernels ``path`` declares through macros (candle's ``AFFINE_OP(float, affine_f32)``): the file run
    through nvcc's preprocessor (``-E``), its own lines kept where the expansion puts them (a kernel's line
    is the line of the macro call) and read like a source. ([], why) where the preprocessor fails."""
    text, why = preprocessed(path, include_dirs, nvcc, timeout)
    if text is None:
        return [], why
    return parse_kernels(text.replace("__attribute__((global))", "__global__")), None


def _declaration(tokens, start: int, at: int, scopes) -> tuple[CKernel | None, int]:
    before = [t for t, _ in tokens[start:at]]
    extern_c = "extern_C" in before or any(kind == "extern_c" for kind, _ in scopes)
    template = None
    if "template" in before:
        k = before.index("template")
        template = " ".join(before[k + 1 :])
    j = at + 1
    launch_bounds = None
    name = None
    explicit_args: tuple[str, ...] | None = None
    qualifier: list[str] = []  # "ns::" parts of an out-of-namespace definition
    while j < len(tokens):
        tok = tokens[j][0]
        if tok == "::" and name is not None:
            qualifier.append(name)
            name = None
            j += 1
            continue
        if tok in ("__launch_bounds__", "__cluster_dims__", "__maxnreg__", "__attribute__", "__declspec") and j + 1 < len(tokens) and tokens[j + 1][0] == "(":
            close = _match(tokens, j + 1)
            if tok == "__launch_bounds__":
                launch_bounds = " ".join(t for t, _ in tokens[j + 2 : close]).replace(" , ", ", ")
            j = close + 1
            continue
        if tok == "[" and j + 1 < len(tokens) and tokens[j + 1][0] == "[":  # [[attribute]]
            while j < len(tokens) and not (tokens[j][0] == "]" and j + 1 < len(tokens) and tokens[j + 1][0] == "]"):
                j += 1
            j += 2
            continue
        if tok == "<" and name is not None:
            # the template argument list of an explicit instantiation (template __global__ void k<half, 4>(...)):
            # its names are no function name
            depth, close_at = 0, j
            while close_at < len(tokens):
                t = tokens[close_at][0]
                depth += t.count("<") * (t in ("<", "<<")) - t.count(">") * (t in (">", ">>"))
                if depth <= 0:
                    break
                close_at += 1
            explicit_args = template_arguments_of(" ".join(t for t, _ in tokens[j : close_at + 1]))
            j = close_at + 1
            continue
        if tok == "(":
            break
        if re.match(r"[A-Za-z_]", tok) and tok not in _ATTRIBUTES:
            if name is not None:
                qualifier = []  # that was the return type or a qualifier word, not a scope
            name = tok  # the last identifier before the parameter list
        if tok in (";", "{"):
            return None, j
        j += 1
    if name is None or j >= len(tokens):
        return None, j
    close = _match(tokens, j)
    params = _params(tokens[j + 1 : close], template)
    namespace = tuple(n for kind, n in scopes if kind == "namespace") + tuple(qualifier)
    after = next((t for t, _ in tokens[close + 1 :] if t in ("{", ";")), ";")
    if explicit_args is not None and "template" in before and (not template or template.replace(" ", "") == "<>"):
        # ``template __global__ void k<half, 4>(...);``: an instantiation of the template k, declared; and
        # ``template <> __global__ void k<__half>(__half* ...) { ... }``, an explicit specialisation (DeepSpeed's
        # transform_0213<__half>): each is an instance of the template (the float one was typed f32 for both,
        # the second dropped). The parameter types are the instance's, so the kernel's own come from the template
        k = CKernel(name, tokens[at][1], extern_c, namespace, "< >", launch_bounds, params, False)
        k.instantiations = [(explicit_args, tokens[at][1])]
        return k, close + 1
    return CKernel(name, tokens[at][1], extern_c, namespace, template, launch_bounds, params, after == "{"), close + 1


def template_arguments_of(text: str) -> tuple[str, ...]:
    """The arguments of a template argument list ``< ... >`` as written (tokens joined by spaces, the spaces of
    ``unsigned char`` kept, around punctuation dropped).

    >>> template_arguments_of("< half , 1024 , 0 >"), template_arguments_of("< unsigned char , FILL >")
    (('half', '1024', '0'), ('unsigned char', 'FILL'))
    """
    from .cuda.launches import template_arguments

    return tuple(re.sub(r"\s*([^\w\s])\s*", r"\1", a).strip() for a in template_arguments(text))


def _match(tokens, open_at: int) -> int:
    depth = 0
    for j in range(open_at, len(tokens)):
        t = tokens[j][0]
        if t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


def _params(toks, template: str | None) -> list[CParam]:
    parts: list[list[str]] = [[]]
    depth = 0
    for t, _ in toks:
        if t in ("(", "[", "{", "<"):
            depth += 1
        elif t in (")", "]", "}", ">"):
            depth -= 1
        if t == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(t)
    if parts == [[]] or parts == [["void"]]:
        return []
    template_names = set(re.findall(r"(?:typename|class)\s+([A-Za-z_]\w*)", template or ""))
    return [_param(p, i, template_names) for i, p in enumerate(parts)]


def _param(toks: list[str], index: int, template_names: set[str]) -> CParam:
    if "=" in toks:
        toks = toks[: toks.index("=")]
    pointer = toks.count("*") + toks.count("&")
    if "[" in toks:  # float x[] or float x[16]
        pointer += 1
        toks = toks[: toks.index("[")]
    first_star = toks.index("*") if "*" in toks else len(toks)
    const_data = "const" in toks[:first_star]
    words = [t for t in toks if t not in _QUALIFIERS and t not in ("*", "&")]
    name = f"arg{index}"
    if len(words) >= 2 and re.match(r"[A-Za-z_]", words[-1]) and words[-1] not in ("int", "long", "short", "char", "unsigned", "signed"):
        name = words.pop()
    ctype = " ".join(words).replace(" :: ", "::")
    key = " ".join(sorted(w for w in words if w != "::"))
    dtype = _C_DTYPES.get(key) or _C_DTYPES.get(ctype)
    vector = _C_VECTORS.get(ctype)
    if dtype is None and vector is not None:
        return CParam(name, ctype, pointer, const_data, vector[0], False, vector[1], vector[2])
    return CParam(name, ctype, pointer, const_data, dtype, ctype in template_names)


# ---------------------------------------------------------------------------------------------------
# writing contracts


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _guess_stage(name: str) -> str:
    n = name.lower()
    for word, stage in (("backward", "backward"), ("forward", "forward"), ("loss", "loss"), ("reduce", "reduce"),
                        ("adam", "optimizer"), ("sgd", "optimizer"), ("optim", "optimizer"), ("label", "producer"),
                        ("gather", "producer")):  # fmt: skip
        if word in n:
            return stage
    return "other"


_INT_DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
_FLOAT_LITERAL = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:[fFlL]|_?f32|_?f64)?$")


@dataclass
class LaunchGeometry:
    """What one launch site tells a contract: grid, block and shared memory as dim expressions (None
    where it does not translate, with ``notes`` saying why), scalar values, and the dims they use."""

    site: LaunchSite
    grid: list[str | None] = field(default_factory=list)
    block: list[str | None] = field(default_factory=list)
    shared: str | None = None
    values: dict[str, str] = field(default_factory=dict)  # scalar parameter -> TOML value text
    dims: set[str] = field(default_factory=set)  # integer parameters the geometry or values use as dims
    notes: dict[str, str] = field(default_factory=dict)  # "grid.x" / "block.y" / "shared_bytes" / param -> why not
    fixed: dict[str, int] = field(default_factory=dict)  # parameter passed a constant by name -> its value
    passed: dict[str, str] = field(default_factory=dict)  # such a parameter -> the host's name for it

    def differences(self, other: LaunchGeometry) -> list[str]:
        """What ``other`` (another launch of the same kernel) sets differently, as contract text.

        >>> from audit.cuda.launches import LaunchSite
        >>> site = LaunchSite("k", "k.cu", 3, "cuda", None, None, None, None)
        >>> LaunchGeometry(site, ["n", "1", "1"], fixed={"B": 32}).differences(LaunchGeometry(site, ["n", "2", "1"], fixed={"B": 64}))
        ['grid = ["n", 2, 1]', 'B = 64']
        """
        out = []
        for key, mine, theirs in (("grid", self.grid, other.grid), ("block", self.block, other.block)):
            if mine != theirs:
                out.append(f"{key} = [{', '.join(_component(p) for p in theirs)}]")
        if self.shared != other.shared:
            out.append(f"shared_bytes = {_component(other.shared)}")
        for name in sorted(set(self.fixed) | set(other.fixed) | set(self.values) | set(other.values)):
            if name in other.fixed and self.fixed.get(name) != other.fixed[name]:
                out.append(f"{name} = {other.fixed[name]}")
            elif name not in other.fixed and self.values.get(name) != other.values.get(name):
                out.append(f"{name} = {other.values.get(name, _toml_str(TODO))}")
        return out


def _component(part: str | None) -> str:
    """One grid, block or shared memory component as TOML: a number, a dim expression string, or "TODO"."""
    if part is None:
        return _toml_str(TODO)
    return part if part.lstrip("-").isdigit() else _toml_str(part)


@dataclass(frozen=True)
class Instance:
    """A template instantiation that host code launches with explicit arguments (``k<256, float><<<...>>>``):
    the arguments as the contract's ``cpp_name`` spells them (an integer expression by its value), the
    contract's name and the launch that shows it."""

    args: tuple[str, ...]
    name: str
    where: str
    how: str = "the instantiation launched at"  # or "the explicit instantiation at" (template __global__ void k<half, 4>(...);)

    def cpp_name(self, k: CKernel) -> str:
        ns = "::".join(n for n in k.namespace if n)
        return (f"{ns}::{k.name}" if ns else k.name) + "<" + ", ".join(self.args) + ">"

    def bind(self, k: CKernel) -> CKernel:
        """``k`` with the parameters of a template type this instantiation binds to a built-in type typed
        (``const T* x`` with ``T = float``: dtype f32); one bound to a type with no contract dtype keeps its TODO."""
        bound = {}
        for param, arg in zip(template_params(k.template), self.args):
            dtype = _C_DTYPES.get(" ".join(sorted(arg.split()))) or _C_DTYPES.get(arg)
            if param.is_type and dtype:
                bound[param.name] = dtype
        params = [replace(p, dtype=bound[p.ctype], template_type=False) if p.template_type and p.ctype in bound else p for p in k.params]
        return replace(k, params=params)


def _with_defaults(k: CKernel, args: tuple[str, ...]) -> tuple[str, ...] | None:
    """``args`` completed with the defaults of ``k``'s template (:func:`audit.cuda.scope.with_defaults`)."""
    return with_defaults(k.template, args)


def _instances(k: CKernel, sites: list[LaunchSite], source: str = "") -> tuple[list[tuple[Instance, list[LaunchSite]]], list[LaunchSite], list[str]]:
    """The instantiations of the template kernel ``k`` that ``sites`` launch with template arguments that
    are all values (integers, built-in types; explicit, or the template's defaults for those left out),
    each with its launches in order; and the launches whose instantiation is not known (an argument the
    compiler deduces from the call, or a name such as ``T`` left over). Where no launch names one, the
    instantiations ``source`` declares explicitly (``template __global__ void k<half, 1024>(...);``, as
    bitsandbytes lists them) whose arguments are values; the third list names those that are not."""
    from .launchers import _known_argument, instantiation
    from .launchers import spelled as spelled_args

    groups: dict[tuple[str, ...], list[LaunchSite]] = {}
    spelled: dict[tuple[str, ...], tuple[str, ...]] = {}
    unknown: list[LaunchSite] = []
    for site in sites:
        # the compiled entry names every argument: those a launch leaves out are the template's defaults
        args = _with_defaults(k, site.template_args or ())
        key = instantiation(args) if args else ()
        if not key or not all(_known_argument(a) for a in key):
            unknown.append(site)
            continue
        groups.setdefault(key, []).append(site)
        spelled.setdefault(key, spelled_args(args))

    def slug(arg: str) -> str:
        dtype = _C_DTYPES.get(" ".join(sorted(arg.split()))) or _C_DTYPES.get(arg)
        return dtype or re.sub(r"\W+", "", arg.replace("-", "m"))

    def order(key: tuple[str, ...]) -> tuple:
        """By the first launch's line, then by the arguments, integers by value (a macro call's expansion puts
        the launches of a ``switch`` over instantiations on one line)."""
        return (groups[key][0].line, [(0, int(a), "") if re.fullmatch(r"-?\d+", a) else (1, 0, a) for a in key])

    explicit: dict[tuple[str, ...], int] = {}  # explicit instantiations -> line, used where no launch names one
    not_values: list[str] = []
    if not groups:
        for args, line in k.instantiations:
            full = _with_defaults(k, args)
            key = instantiation(full) if full else ()
            if key and all(_known_argument(a) for a in key):
                explicit.setdefault(key, line)
                spelled.setdefault(key, spelled_args(full))
            else:
                not_values.append(f"{source}:{line} explicitly instantiates {k.name}<{', '.join(args)}>, whose arguments are not values here")
    keys = sorted(groups, key=order) if groups else sorted(explicit, key=lambda key: (explicit[key], key))
    out, names = [], set()
    for key in keys:
        own = k.contract_name or k.name  # a second definition's own name (renderCUDA_backward)
        name = own if len(keys) == 1 else f"{own}_" + "_".join(slug(a) for a in spelled[key])
        while name in names:
            name += "_"
        names.add(name)
        if groups:
            group = groups[key]
            out.append((Instance(spelled[key], name, f"{group[0].file or 'the launch'}:{group[0].line}"), group))
        else:
            out.append((Instance(spelled[key], name, f"{source}:{explicit[key]}", "the explicit instantiation at"), []))
    return out, unknown, not_values


def launch_geometry(k: CKernel, site: LaunchSite, known_dims: Iterable[str] = ()) -> LaunchGeometry:
    """Translate ``site`` (a launch of ``k``) into the contract's geometry, in ``k``'s parameter names.

    >>> from audit.cuda.launches import find_launches
    >>> (k,) = parse_kernels('__global__ void f(float* y, int n) {}')
    >>> g = launch_geometry(k, find_launches('void h(float* d, int rows) { f<<<(rows + 127) / 128, 128>>>(d, rows); }', "c")[0])
    >>> g.grid, g.block, g.values, sorted(g.dims)
    (['ceil_div(n, 128)', '1', '1'], ['128', '1', '1'], {'n': '"n"'}, ['n'])
    """
    from .cuda.launches import to_dim_expr

    geo = LaunchGeometry(site)
    known = set(known_dims)
    # integer arguments that may be dims; a bool (dtype u8 here) is a flag, never a size (DeepSpeed's
    # preLayerNorm, training: scaffolded as dims of 1..65536 before)
    ints = {p.name for p in k.params if p.kind == "scalar" and (p.dtype or "") in _INT_DTYPES and p.ctype.strip() != "bool"}
    renames: dict[str, str] = {}
    args = list(site.args or ())
    for p, arg in zip(k.params, args):
        # a variable, a field (model->n) or an expression (B * NH) passed as an integer argument: where the
        # geometry uses it, the contract uses the parameter
        # (never a literal: tiny-cuda-nn passes 1u, and every 1 of the geometry became the parameter)
        if p.name in ints and re.search(r"[A-Za-z_]", arg) and _constant(arg) is None:
            renames[arg] = p.name
    where = f"{site.file}:{site.line}" if site.file else f"line {site.line}"

    def translate(key: str, host: str | None) -> str | None:
        if host is None:
            geo.notes[key] = f"the launch at {where} does not show it"
            return None
        text, why = to_dim_expr(host, renames)
        if text is None:
            geo.notes[key] = f"{why} (the launch at {where})"
            return None
        from .dims import parse_expr

        free = set(parse_expr(text).names) - ints - known
        if free:
            names = ", ".join(f'"{n}"' for n in sorted(free))
            geo.notes[key] = f'"{host}" at {where} uses {names}, which no integer kernel argument or declared dim names'
            return None
        parsed = parse_expr(text)
        try:
            constant = parsed.constant
        except ArithmeticError:  # `TILE / (W - 2)` with W = 2: the launch itself is wrong, or a macro was misread
            geo.notes[key] = f'"{host}" at {where} divides by zero where its names are constants'
            return None
        geo.dims |= set(parsed.names) & ints
        return str(constant) if constant is not None else text

    for i, axis in enumerate("xyz"):
        geo.grid.append(translate(f"grid.{axis}", site.grid[i] if site.grid else None))
        geo.block.append(translate(f"block.{axis}", site.block[i] if site.block else None))
    geo.shared = translate("shared_bytes", site.shared)
    arg_values = list(site.arg_values or args)
    for i, (p, arg) in enumerate(zip(k.params, args)):
        if p.kind != "scalar":
            continue
        constant = _constant(arg_values[i]) if p.name in ints and i < len(arg_values) and arg_values[i] != arg else None
        if constant is not None and constant >= 1 and p.name not in known:
            # `const int Bc = 32;` passed as Bc: the parameter is a dim fixed at that value, which the
            # geometry (block = ["Bc"]) keeps naming
            geo.fixed[p.name], geo.passed[p.name] = constant, arg
            geo.values[p.name] = _toml_str(p.name)
            geo.dims.add(p.name)
            continue
        if p.name in ints:
            text, _ = to_dim_expr(arg, renames)
            if text is not None:
                from .dims import parse_expr

                names = set(parse_expr(text).names)
                if names <= ints | known:
                    geo.values[p.name] = _toml_str(text) if names else text
                    geo.dims |= names & ints
                    continue
            geo.notes[p.name] = f'the launch at {where} passes "{arg}"'
        elif (p.dtype or "") in ("f32", "f64", "f16", "bf16") and _FLOAT_LITERAL.match(arg):
            geo.values[p.name] = repr(float(re.sub(r"(?:[fFlL]|_?f32|_?f64)$", "", arg)))
        else:
            geo.notes[p.name] = f'the launch at {where} passes "{arg}"'
    return geo


def _constant(host: str) -> int | None:
    """``host`` (a launch argument with its constants substituted) as an integer, where it is one."""
    from .cuda.launches import to_dim_expr
    from .dims import parse_expr

    text, _ = to_dim_expr(host, {})
    return parse_expr(text).constant if text is not None else None


def _geometry_line(key: str, parts: list[str | None], geo: LaunchGeometry | None, fallback: str) -> str:
    """``grid = [...]`` / ``block = [...]``: each component translated on its own, "TODO" (with the reason)
    only for one that is not; ``fallback`` where no launch shows the key at all."""
    if geo is None or getattr(geo.site, key) is None:
        why = f"  # {geo.notes[f'{key}.x']}" if geo and f"{key}.x" in geo.notes else ""
        return fallback + why
    items = ", ".join(_component(p) for p in parts)
    missing = [axis for axis, p in zip("xyz", parts) if p is None and f"{key}.{axis}" in geo.notes]
    # a 1-D launch's note needs no axis; a dim3 one says which component it is about
    notes = [geo.notes[f"{key}.{axis}"] if missing == ["x"] else f"{key}.{axis}: {geo.notes[f'{key}.{axis}']}" for axis in missing]
    if notes:
        return f"{key} = [{items}]  # " + "; ".join(notes)
    return f"{key} = [{items}]  # from {geo.site.file or 'the launch'}:{geo.site.line}"


def scaffold_contract(
    k: CKernel,
    source: str,
    known_dims: Iterable[str] = (),
    geometry: LaunchGeometry | None = None,
    others: Iterable[str] = (),
    instance: Instance | None = None,
) -> str:
    """The ``[[kernel]]`` table for ``k`` (``source`` as the contract should name it), with the grid,
    block, shared memory and scalar values of ``geometry`` (a launch site of ``k``) where one is given;
    ``others`` are comment lines about other launches of ``k``; ``instance`` the template instantiation
    the table is for (its ``cpp_name`` and the dtypes of the template type parameters it binds)."""
    dims = set(known_dims) | (geometry.dims if geometry else set())
    lines = [f"# Scaffolded by `wireup init` from {source}:{k.line}. Replace every \"TODO\"; `wireup check` fails until they are gone."]
    lines.append("[[kernel]]")
    lines.append(f"name = {_toml_str(instance.name if instance else (k.contract_name or k.name))}")
    lines.append(f"source = {_toml_str(source)}")
    if instance is not None:
        lines.append(f"cpp_name = {_toml_str(instance.cpp_name(k))}  # {instance.how} {instance.where}")
    elif k.extern_c and not k.template:
        lines.append(f"entry = {_toml_str(k.name)}")
    else:
        lines.append(f"cpp_name = {_toml_str(k.cpp_name)}  # TODO: the instantiation the host launches" if k.template else f"cpp_name = {_toml_str(k.cpp_name)}")
    lines.append(f'stage = "{_guess_stage(k.name)}"  # TODO: check (producer, forward, loss, backward, reduce, optimizer, other)')
    lines.append('phase = ""')
    lines += [f"# {line}" for line in others]
    lines.append(_geometry_line("grid", geometry.grid if geometry else [None], geometry, f'grid = ["{TODO}", 1, 1]'))
    bounds = (k.launch_bounds or "").split(",")[0].strip()
    if geometry is not None and all(b is not None for b in geometry.block):
        lines.append(_geometry_line("block", geometry.block, geometry, ""))
    elif bounds.isdigit():
        lines.append(f"block = [{bounds}, 1, 1]  # from __launch_bounds__({k.launch_bounds})")
    else:
        note = f"  # __launch_bounds__({k.launch_bounds})" if k.launch_bounds else ""
        lines.append(_geometry_line("block", geometry.block if geometry else [None], geometry, f'block = ["{TODO}", 1, 1]{note}'))
    if geometry is not None:
        if geometry.shared is None:
            lines.append(f'shared_bytes = "{TODO}"  # {geometry.notes.get("shared_bytes", "")}')
        elif geometry.shared != "0":
            shared = geometry.shared if geometry.shared.isdigit() else _toml_str(geometry.shared)
            lines.append(f"shared_bytes = {shared}  # from {geometry.site.file or 'the launch'}:{geometry.site.line}")
    lines.append('doc = ""')
    lines.append("params = [")
    values = geometry.values if geometry else {}
    for p in k.params:
        dtype, note = p.dtype or TODO, ""
        if p.template_type:
            dtype, note = "f32", f"  # TODO: dtype of template parameter {p.ctype}"
        elif p.dtype is None or (p.lanes > 1 and not p.pointer):
            dtype = TODO if p.lanes > 1 else dtype
            note = f'  # TODO: C type "{p.ctype}" has no contract dtype'
        if p.kind == "isv":
            lines.append(f'  {{ name = {_toml_str(p.name)}, kind = "isv" }},')
        elif p.kind == "tensor":
            role = "in" if p.const_data else "out"
            if p.pointer > 1 and not note:
                note = "  # TODO: a pointer to pointers; contracts describe flat device buffers"
            elif role == "out" and not note:
                note = "  # TODO: out, inout or accumulate?"
            optional = ""
            if p.name in k.null_tested and p.pointer == 1:
                line, test = k.null_tested[p.name]
                optional = ", optional = true"
                said = f'the kernel tests "{test}" at line {line}: the host may pass NULL (verify runs it NULL too)'
                note = f"{note}; {said}" if note else f"  # {said}"
            shape, align = f'["{TODO}"]', ""
            if p.lanes > 1:  # a CUDA vector type: its lanes as the trailing axis
                shape = f'["{TODO}", {p.lanes}]'
                lane = {"i8": 1, "u8": 1, "i16": 2, "u16": 2, "f16": 2, "bf16": 2, "i64": 8, "u64": 8, "f64": 8}.get(dtype, 4)
                align = f", align = {p.align}" if p.align and p.align > lane else ""
                note = note or f"  # {p.ctype}: {p.lanes} x {dtype} per element"
            lines.append(f'  {{ name = {_toml_str(p.name)}, dtype = "{dtype}", shape = {shape}, role = "{role}"{align}{optional} }},{note}')
        else:
            if p.name in values:
                value = values[p.name]
            else:
                # an integer scalar named like a declared dim is that dim; anything else is left to fill in
                value = _toml_str(p.name) if p.name in dims and dtype[0] in "iu" else f'"{TODO}"'
                if geometry is not None and p.name in geometry.notes and not note:
                    note = f"  # TODO: {geometry.notes[p.name]}"
                elif dtype in ("f32", "f64", "f16", "bf16") and not note:
                    note = "  # TODO: the value passed (a number)"
                elif p.ctype.strip() == "bool" and not note:
                    value, note = "1", "  # TODO: a bool flag (0 or 1); the value passed"
            lines.append(f'  {{ name = {_toml_str(p.name)}, kind = "scalar", dtype = "{dtype}", value = {value} }},{note}')
    lines.append("]")
    return "\n".join(lines) + "\n"


def scaffold_contracts(kernels: Iterable[CKernel], source: str, known_dims: Iterable[str] = (), launches: Iterable[LaunchSite] = ()) -> str:
    """Contracts for every kernel of one source, as the text of one TOML file; ``launches`` (host launch
    sites, :func:`audit.cuda.launches.find_launches`) give each launched kernel its geometry, and the
    integer arguments they use become dims declared in a ``[dims]`` table (ranges to review, or the value
    of a constant passed by name)."""
    return scaffold_sources([(kernels, source, launches)], known_dims)


def scaffold_sources(units: Iterable[tuple[Iterable[CKernel], str, Iterable[LaunchSite]]], known_dims: Iterable[str] = ()) -> str:
    """Contracts for the kernels of several sources as the text of one TOML file: one ``[dims]`` table
    for them all (a second one would not load), then a ``[[kernel]]`` table per kernel. Each unit is
    (kernels, the source as contracts name it, the launch sites that give its kernels their geometry).

    >>> text = scaffold_sources([(parse_kernels("__global__ void a(float* y) {}"), "a.cu", ()),
    ...                          (parse_kernels("__global__ void b(float* y) {}"), "b.cu", ())])
    >>> text.count("[[kernel]]"), text.splitlines()[0]
    (2, '# Contracts scaffolded by `wireup init` from a.cu, b.cu.')
    """
    dims = tuple(known_dims)
    tables: list[str] = []
    new_dims: dict[str, _NewDim] = {}
    sources = []

    def table(k: CKernel, source: str, sites: list[LaunchSite], pasted: list[LaunchSite], inst: Instance | None = None, others: list[str] | None = None) -> str:
        """One ``[[kernel]]`` table: the first of ``sites`` gives the geometry, the others that differ are named."""
        others = list(others or ())
        k = inst.bind(k) if inst else k
        geo = launch_geometry(k, sites[0], dims) if sites else None
        if not sites:
            others += [f'TODO: {s.file or "the host"}:{s.line} launches "{s.kernel}" in a macro that pastes the name together, '
                       f"which may be this kernel; the macro's arguments decide the geometry, which is not read from there." for s in pasted[:1] if s.names_kernel(k.name)]  # fmt: skip
        if geo is not None:
            where = f"{geo.site.file or 'the launch'}:{geo.site.line}"
            for d in sorted(geo.dims - set(dims)):
                new_dims.setdefault(d, _NewDim(d)).add(geo.fixed.get(d), where, geo.passed.get(d, d))
            seen: set[tuple[str, ...]] = set()
            for site in sites[1:]:
                diff = tuple(geo.differences(launch_geometry(k, site, dims)))
                if diff and diff not in seen:
                    seen.add(diff)
                    others.append(f'TODO: {site.file or "the host"}:{site.line} launches "{k.name}" too, with other geometry or arguments '
                                  f"({'; '.join(diff)}); this contract describes the launch at {where}.")  # fmt: skip
        return scaffold_contract(k, source, dims, geo, others, inst)

    for kernels, source, launches in units:
        sources.append(source)
        by_kernel: dict[str, list[LaunchSite]] = {}
        launches = list(launches)
        for site in launches:
            by_kernel.setdefault(site.kernel, []).append(site)
        patterns = [s for s in launches if s.name_kind == "pattern" and not s.pasted]  # a name built at run time: affine_*
        pasted = [s for s in launches if s.pasted]  # a macro's launch, add_##t##_kernel<<<...>>>: for several kernels
        for k in kernels:
            sites = by_kernel.get(k.name) or by_kernel.get(k.name.split("::")[-1]) or [s for s in patterns if s.names_kernel(k.name)]
            instances, unresolved, not_values = _instances(k, sites, source) if k.template else ([], sites, [])
            if not instances:
                tables.append(table(k, source, sites, pasted, others=[f"TODO: {n}; add a contract for each instantiation." for n in not_values[:8]]))
                continue
            # a template launched with known arguments: one contract per instantiation (each its own cpp_name,
            # geometry and dtypes); launches whose instantiation is not known are named in the first one
            unknown = [f'TODO: {s.file or "the host"}:{s.line} launches "{k.name}" with template arguments '
                       + (f'<{", ".join(s.template_args)}> that are not values here' if s.template_args else "the compiler deduces from the call")
                       + "; add a contract for each instantiation it runs." for s in unresolved]  # fmt: skip
            unknown += [f"TODO: {n}; add a contract for each instantiation." for n in not_values[:8]]
            for n, (inst, inst_sites) in enumerate(instances):
                notes = unknown if n == 0 else []
                tables.append(table(k, source, inst_sites, pasted, inst, notes))
    header = f"# Contracts scaffolded by `wireup init` from {', '.join(dict.fromkeys(sources))}.\n"
    if new_dims:
        header += "\n" + "\n".join(["[dims]", *(d.line() for d in new_dims.values())]) + "\n"
    return header + "\n" + "\n".join(tables)
    header = f"# Contracts scaffolded by `wireup init` from {', '.join(dict.fromkeys(sources))}.\n"
    if new_dims:
        header += "\n" + "\n".join(["[dims]", *(d.line() for d in new_dims.values())]) + "\n"
    return header + "\n" + "\n".join(tables)


@dataclass
class _NewDim:
    """A dim the scaffold declares: fixed where every launch that uses it passes the same constant, else a
    range to review."""

    name: str
    uses: list[tuple[int | None, str, str]] = field(default_factory=list)  # (constant or None, "file:line", host name)

    def add(self, value: int | None, where: str, host: str) -> None:
        self.uses.append((value, where, host))

    def line(self) -> str:
        values = {v for v, _, _ in self.uses}
        wheres = list(dict.fromkeys(w for _, w, _ in self.uses))
        at = f"the launch{'es' if len(wheres) > 1 else ''} at {', '.join(wheres)}"
        (value,) = values if len(values) == 1 else (None,)
        if value is not None:
            hosts = ", ".join(f'"{h}"' for h in dict.fromkeys(h for _, _, h in self.uses))
            return f"{self.name} = {value}  # fixed: {at} pass{'' if len(wheres) > 1 else 'es'} the constant {hosts}; make it a range if it varies at run time"
        if len(values) > 1:
            passed = ", ".join(f"{v} at {w}" if v is not None else f"a variable at {w}" for v, w, _ in self.uses)
            return f"{self.name} = {{ min = 1, max = 65536 }}  # TODO: the range of {self.name} (kernel arguments passed {passed})"
        return f"{self.name} = {{ min = 1, max = 65536 }}  # TODO: the range of {self.name} (a kernel argument of {at})"
