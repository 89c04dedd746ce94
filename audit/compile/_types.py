"""What a build produces: per source a :class:`SourceBuild`, per compiled ``.entry`` an :class:`EntryInfo`.

Everything here is plain data that round-trips through the ``build.json`` of a cache entry, so a cached
build rebuilds these objects without starting any tool.

>>> sb, entry = result.kernel(cs.kernel("aux_trunk_forward"))     # doctest: +SKIP
>>> entry.registers, [p.ptx_type for p in entry.params][:2]       # doctest: +SKIP
(79, ['u64', 'u64'])
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model import Kernel

_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}


@dataclass(frozen=True)
class PtxParam:
    """One ``.param`` of a PTX ``.entry``, in declaration order.

    ``size`` is the parameter's byte size (``.b8 p[16]`` is 16 bytes); ``is_pointer_hint`` is True
    where the PTX marks the parameter ``.ptr`` (newer nvcc versions do for some pointers, most do not).

    >>> PtxParam(0, "u64", 8, None, False).type_bytes
    8
    """

    index: int
    ptx_type: str  # "u64", "s32", "f32", "b8", ...
    size: int
    align: int | None = None
    is_pointer_hint: bool = False

    @property
    def type_bytes(self) -> int:
        """Bytes of one element of the PTX type (``b8`` -> 1)."""
        return _TYPE_BYTES.get(re.sub(r"\D", "", self.ptx_type), self.size)

    @property
    def is_array(self) -> bool:
        """A by-value aggregate, declared as a byte array (``.align 8 .b8 p[16]``)."""
        return self.size != self.type_bytes

    def describe(self) -> str:
        """``a .u32 (4 bytes)``, ``a .b8[16] (16 bytes)``: how messages name a compiled parameter."""
        if self.is_array:
            return f"a .{self.ptx_type}[{self.size // max(self.type_bytes, 1)}] ({self.size} bytes)"
        return f"a .{self.ptx_type} ({self.size} byte{'s' if self.size != 1 else ''})"


@dataclass(frozen=True)
class EntryInfo:
    """One compiled kernel entry: its symbol, PTX parameter list and ptxas resource usage.

    ``symbol`` is the name in the PTX and cubin (the C name of an ``extern "C"`` kernel, else the
    mangled C++ name); ``demangled`` is the C++ signature for mangled names (via c++filt), else None.
    ``max_threads`` / ``required_threads`` come from ``.maxntid`` (``__launch_bounds__``) and
    ``.reqntid``; ``const_bytes`` is None where ptxas does not report constant banks (CUDA 13 on sm_90).

    >>> EntryInfo("k", None, [], registers=32).registers
    32
    """

    symbol: str
    demangled: str | None
    params: list[PtxParam]
    registers: int | None = None
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    shared_static_bytes: int = 0
    const_bytes: int | None = None
    max_threads: int | None = None
    required_threads: tuple[int, ...] | None = None

    @property
    def display_name(self) -> str:
        return self.demangled or self.symbol


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message: ``file`` relative to the project root where it lies inside it.

    >>> Diagnostic("kernels/x.cu", 42, "error", 'identifier "foo" is undefined').render()
    'kernels/x.cu:42: error: identifier "foo" is undefined'
    """

    file: str | None
    line: int | None
    severity: str  # "error" | "warning" | "remark"
    message: str

    def render(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file and self.line else (f"{self.file}: " if self.file else "")
        return f"{where}{self.severity}: {self.message}"


@dataclass
class SourceBuild:
    """The build of one kernel source: its PTX and cubin (in the cache), log, diagnostics and entries.

    ``source`` is the path as the contract writes it (or the override path); ``key`` the cache key;
    ``cached`` whether this run found it in the cache; ``seconds`` the wall time this run spent on it.

    >>> sb = result.sources["kernels/aux_trunk_kernel.cu"]      # doctest: +SKIP
    >>> sb.ok, sorted(sb.entries)                              # doctest: +SKIP
    (True, ['aux_trunk_backward', 'aux_trunk_forward'])
    """

    source: str
    ok: bool
    cubin: Path | None
    ptx: Path | None
    log: str
    diagnostics: list[Diagnostic]
    entries: dict[str, EntryInfo]
    cached: bool
    key: str
    cubin_sha256: str | None = None
    cubin_size: int | None = None
    code_sha256: str | None = None  # audit.compile.code_hash of the cubin: what the GPU runs
    seconds: float = 0.0
    code_size: int | None = None  # audit.compile.code_size of the cubin (None: not computed yet, see code_bytes)

    def code_bytes(self) -> int | None:
        """:func:`audit.compile.code_size` of the cubin, the same in every checkout (the file's size is not:
        its line tables name the source paths); computed from the cubin where the cache entry predates it."""
        if self.code_size is None and self.cubin is not None:
            from ._identity import NotACubin, code_size

            try:
                self.code_size = code_size(self.cubin.read_bytes())
            except (OSError, NotACubin):
                return None
        return self.code_size

    @property
    def first_error(self) -> Diagnostic | None:
        for d in self.diagnostics:
            if d.severity == "error":
                return d
        return None

    # -- the build.json of a cache entry --------------------------------------------------------------
    def to_meta(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "ok": self.ok,
            "cubin": self.cubin.name if self.cubin else None,
            "ptx": self.ptx.name if self.ptx else None,
            "log": self.log,
            "diagnostics": [asdict(d) for d in self.diagnostics],
            "entries": {name: _entry_meta(e) for name, e in self.entries.items()},
            "key": self.key,
            "cubin_sha256": self.cubin_sha256,
            "cubin_size": self.cubin_size,
            "code_sha256": self.code_sha256,
            "code_size": self.code_size,
        }

    @classmethod
    def from_meta(cls, meta: dict[str, Any], folder: Path, source: str) -> SourceBuild:
        entries = {}
        for name, e in meta["entries"].items():
            params = [PtxParam(**p) for p in e.pop("params")]
            req = e.pop("required_threads")
            entries[name] = EntryInfo(params=params, required_threads=tuple(req) if req else None, **e)
        return cls(
            source=source,
            ok=meta["ok"],
            cubin=folder / meta["cubin"] if meta["cubin"] else None,
            ptx=folder / meta["ptx"] if meta["ptx"] else None,
            log=meta["log"],
            diagnostics=[Diagnostic(**d) for d in meta["diagnostics"]],
            entries=entries,
            cached=True,
            key=meta["key"],
            cubin_sha256=meta["cubin_sha256"],
            cubin_size=meta["cubin_size"],
            code_sha256=meta["code_sha256"],
            code_size=meta.get("code_size"),  # entries written before it: code_bytes() computes it
        )


def _entry_meta(e: EntryInfo) -> dict[str, Any]:
    d = asdict(e)
    d["required_threads"] = list(e.required_threads) if e.required_threads else None
    return d


@dataclass
class BuildResult:
    """Every source a build covered, and how to find a contract kernel's compiled entry in them.

    >>> result = build_kernels(cfg, cs)                           # doctest: +SKIP
    >>> sb, entry = result.kernel(cs.kernel("strided_gather"))    # doctest: +SKIP
    >>> result.compiled, result.cached                            # doctest: +SKIP
    (0, 11)
    """

    sources: dict[str, SourceBuild]
    arch: str
    flags: list[str]
    nvcc_version: str
    include_dirs: list[str] = field(default_factory=list)
    packages: dict[str, str] = field(default_factory=dict)  # include_packages distribution -> installed version
    overrides: dict[str, str] = field(default_factory=dict)  # kernel name -> key in ``sources``
    seconds: float = 0.0

    @property
    def compiled(self) -> int:
        return sum(1 for s in self.sources.values() if not s.cached)

    @property
    def cached(self) -> int:
        return sum(1 for s in self.sources.values() if s.cached)

    @property
    def cubin_hashes(self) -> dict[str, str]:
        """Source path -> sha256 of its cubin, for every source that compiled."""
        return {k: s.cubin_sha256 for k, s in self.sources.items() if s.cubin_sha256}

    @property
    def code_hashes(self) -> dict[str, str]:
        """Source path -> code hash of its cubin (:func:`audit.compile.code_hash`), for every source
        that compiled: the identity GPU evidence is keyed by, equal in every checkout."""
        return {k: s.code_sha256 for k, s in self.sources.items() if s.code_sha256}

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.sources.values())

    def source_of(self, k: Kernel) -> SourceBuild | None:
        """The build of ``k``'s source (or its override), or None where this build did not cover it."""
        return self.sources.get(self.overrides.get(k.name, k.source))

    def kernel(self, k: Kernel) -> tuple[SourceBuild, EntryInfo | None]:
        """``k``'s source build and its compiled entry (None where the module has no such entry).

        An ``entry`` is looked up by its C symbol; a ``cpp_name`` such as ``"ns::scale<float>"`` matches
        the entry whose demangled signature is ``[return type] ns::scale<float>(...)``; a ``cpp_name``
        with a parameter list matches the whole signature. Raises KeyError where the build did not cover
        the kernel's source (it does not exist, or was not selected).
        """
        sb = self.source_of(k)
        if sb is None:
            raise KeyError(f'kernel "{k.name}": source "{self.overrides.get(k.name, k.source)}" was not built')
        if k.cpp_name:
            return sb, match_cpp_name(sb.entries, k.cpp_name, k.params)
        return sb, sb.entries.get(k.entry or k.name)


def normalize_cpp(text: str) -> str:
    """C++ text with whitespace dropped around punctuation: ``"f<float, 4>"`` == ``"f<float,4>"``."""
    text = re.sub(r"\s+", " ", text.strip())
    return re.sub(r" ?([^\w\s]) ?", r"\1", text)


def _unnamed(text: str) -> str:
    """``text`` without the qualifier of an unnamed namespace: a kernel declared in ``namespace { }``
    demangles as ``(anonymous namespace)::f<float>(...)`` and is named ``f<float>`` in C++ source."""
    return re.sub(r"\(\s*anonymous\s+namespace\s*\)\s*::\s*", "", text)


def _function_arguments(text: str) -> str:
    """``text`` with each function template argument written by the function's name: c++filt shows
    ``act<float, silu<float>>``'s second argument as ``&(float silu<float>(float const&))`` (vllm's
    ``act_and_mul_kernel``), the source may write it ``&silu<float>`` or ``silu<float>``.

    >>> _function_arguments("void act<float, &(float ns::silu<float>(float const&)), true>(float*, int)")
    'void act<float, ns::silu<float>, true>(float*, int)'
    >>> _function_arguments("act<float, &silu<float>>")
    'act<float, silu<float>>'
    """
    out, i = [], 0
    while True:
        at = text.find("&(", i)
        if at < 0 or (at > 0 and text[at - 1 : at].strip() and text[at - 1] not in "<,"):
            if at < 0:
                break
            out.append(text[i : at + 2])
            i = at + 2
            continue
        depth, end = 0, at + 1
        while end < len(text):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
            end += 1
        inner = text[at + 2 : end].strip()
        # RET NAME<...>(PARAMS): the name is the last top-level word before the parameter list
        level, cut = 0, len(inner)
        for j in range(len(inner) - 1, -1, -1):
            level += {")": 1, "(": -1}.get(inner[j], 0)
            if level == 0 and inner[j] == "(":
                cut = j
                break
        head, level, start = inner[:cut].rstrip(), 0, 0
        for j in range(len(head) - 1, -1, -1):
            level += {">": 1, "<": -1}.get(head[j], 0)
            if level == 0 and head[j] == " ":
                start = j + 1
                break
        out.append(text[i:at] + head[start:])
        i = end + 1
    out.append(text[i:])
    return re.sub(r"([<,]\s*)&\s*(?=[A-Za-z_:])", r"\1", "".join(out))


_WEST_CONST = re.compile(r"(^|[<,(]\s*)(const|volatile)\s+((?:(?:unsigned|signed|long|short)\s+)*[A-Za-z_][\w:]*(?:<[^<>]*>)?)")


def _east_const(text: str) -> str:
    """``text`` with each ``const`` (``volatile``) that leads a type written after it, as c++filt shows it:
    a template argument deduced from ``const float*`` (tiny-cuda-nn's ``reduce_sum(gradients + offset, ...)``)
    demangles as ``<float const>``.

    >>> _east_const("block_reduce<const float, float>"), _east_const("f(const unsigned int*, int)")
    ('block_reduce<float const, float>', 'f(unsigned int const*, int)')
    """
    return _WEST_CONST.sub(lambda m: f"{m.group(1)}{m.group(3)} {m.group(2)}", text)


def _unsuffixed(text: str) -> str:
    """``text`` with the suffixes of its integer literals dropped: a template argument of an ``unsigned
    int`` (``size_t``, ``long``) parameter demangles as ``256u`` (``256ul``, ``256l``), and the source
    that launches the kernel writes ``f<float, 256>``."""
    return re.sub(r"(?<![\w.])(\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)(?!\w)", r"\1", text)


def match_cpp_name(entries: dict[str, EntryInfo], cpp_name: str, params: Sequence[Any] | None = None) -> EntryInfo | None:
    """The entry whose demangled signature names ``cpp_name``; where it names several (overloads: ``scale(float*,
    int)`` and ``scale(__half*, int)``), the one whose parameter types agree with the contract's ``params``
    (:func:`overloads_of`); None where none does or several still do (ENTRY_MISSING says which).

    >>> e = EntryInfo("_ZN2ns5scaleIfEEvPfi", "void ns::scale<float>(float*, int)", [])
    >>> match_cpp_name({e.symbol: e}, "ns::scale<float>") is e
    True

    A kernel of an unnamed namespace (``namespace { template <int N> __global__ void f(...); }``, which
    demangles as ``(anonymous namespace)::f<...>``) is named as in the source, ``f<4>``, or with the
    qualifier. An integer template argument may leave out the suffix its demangling carries
    (``reduce6<float, 256, false>`` names ``reduce6<float, 256u, false>``) where no entry matches it as
    written.
    """
    named, agreeing = overloads_of(entries, cpp_name, params)
    if len(named) == 1:
        return named[0]
    return agreeing[0] if len(agreeing) == 1 else None


#: the standard typedefs a template argument may be written with, by what a demangled signature shows on
#: the LP64 hosts nvcc targets (``fill<int32_t>`` is the entry ``fill<int>``: vllm's MoE kernels)
_TYPEDEFS = {
    "int8_t": "signed char", "uint8_t": "unsigned char", "int16_t": "short", "uint16_t": "unsigned short",
    "int32_t": "int", "uint32_t": "unsigned int", "int64_t": "long", "uint64_t": "unsigned long",
    "size_t": "unsigned long", "ptrdiff_t": "long", "intptr_t": "long", "uintptr_t": "unsigned long",
    "half": "__half", "nv_bfloat16": "__nv_bfloat16",
}  # fmt: skip
_TYPEDEF = re.compile(r"(?<![\w:])(?:(?:::)?std::)?(" + "|".join(_TYPEDEFS) + r")(?![\w:])")


def builtin_spelling(text: str) -> str:
    """``text`` with each standard typedef (``int32_t``, ``std::uint64_t``, ``size_t``, ``half``) written as
    the type it names on LP64 hosts, as a demangled signature shows it.

    >>> builtin_spelling("moe_align<int32_t, std::uint64_t>")
    'moe_align<int, unsigned long>'
    """
    return _TYPEDEF.sub(lambda m: _TYPEDEFS[m.group(1)], text)


def cpp_name_matches(entries: dict[str, EntryInfo], cpp_name: str) -> list[EntryInfo]:
    """Every entry whose demangled signature names ``cpp_name`` (by symbol), as written or, where none
    does, with the integer suffixes of its template arguments left out, or its standard typedefs written as
    the types they name (:func:`builtin_spelling`)."""
    for strip in (lambda t: t, _unsuffixed, lambda t: _unsuffixed(builtin_spelling(t))):
        want = normalize_cpp(strip(_east_const(_function_arguments(_unnamed(cpp_name)))))
        full = "(" in want
        found = []
        for symbol in sorted(entries):
            e = entries[symbol]
            if not e.demangled:
                continue
            have = normalize_cpp(strip(_east_const(_function_arguments(_unnamed(e.demangled)))))
            if full:
                # template functions demangle with their return type first: drop it before comparing
                if have == want or have.endswith(" " + want):
                    found.append(e)
                continue
            at = have.find(want + "(")
            # the name must start the signature or follow the return type, never sit in the parameter list
            if at == 0 or (at > 0 and have[at - 1] == " " and "(" not in have[:at]):
                found.append(e)
        if found:
            return found
    return []


def overloads_of(entries: dict[str, EntryInfo], cpp_name: str, params: Sequence[Any] | None) -> tuple[list[EntryInfo], list[EntryInfo]]:
    """(the entries ``cpp_name`` names, those of them whose parameter types agree with ``params``, the
    contract's parameters): a pointer parameter for a tensor or the ISV, a value for a scalar, and where
    the demangled type is a plain C type (``float``, ``__half``, ``int``...) the one of the parameter's
    dtype. A type that is no plain C type (``T``, ``float4``, a struct) agrees with any dtype. Without
    ``params`` every entry named agrees."""
    named = cpp_name_matches(entries, cpp_name)
    if params is None or len(named) < 2:
        return named, list(named)
    return named, [e for e in named if _params_agree(e.demangled or "", params)]


# the C spellings of each dtype in a demangled signature (audit.model.DTYPES's, and the aliases c++filt
# or a header may give)
_C_TYPES: dict[str, frozenset[str]] = {
    "f32": frozenset({"float"}), "f64": frozenset({"double"}), "f16": frozenset({"__half", "half"}),
    "bf16": frozenset({"__nv_bfloat16", "nv_bfloat16"}), "i8": frozenset({"signed char", "char"}),
    "u8": frozenset({"unsigned char"}), "i16": frozenset({"short"}), "u16": frozenset({"unsigned short"}),
    "i32": frozenset({"int"}), "u32": frozenset({"unsigned int", "unsigned"}), "i64": frozenset({"long long", "long"}),
    "u64": frozenset({"unsigned long long", "unsigned long"}), "bool": frozenset({"bool"}),
}  # fmt: skip
_PLAIN = frozenset().union(*_C_TYPES.values())


def _param_list(demangled: str) -> list[str] | None:
    """The parameter types of a demangled signature (``void f<float, 4>(float const*, int)`` ->
    ``["float const*", "int"]``); None where it has no trailing parameter list."""
    text = demangled.strip()
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        c = text[i]
        if c in ")>]":
            depth += 1
        elif c in "(<[":
            depth -= 1
            if depth == 0 and c == "(":
                inner = text[i + 1 : -1]
                break
    else:
        return None
    out, depth, start = [], 0, 0
    for j, c in enumerate(inner):
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(inner[start:j].strip())
            start = j + 1
    if inner.strip():
        out.append(inner[start:].strip())
    return [] if out == ["void"] else out


def _params_agree(demangled: str, params: Sequence[Any]) -> bool:
    types = _param_list(demangled)
    if types is None:
        return True
    if len(types) != len(params):
        return False
    for t, p in zip(types, params):
        stars = t.count("*")
        base = " ".join(w for w in t.replace("*", " ").replace("&", " ").split() if w not in ("const", "volatile", "__restrict__", "__restrict"))
        pointer = getattr(p, "kind", "") != "scalar"  # a tensor or the ISV
        if base not in _PLAIN:
            continue
        if stars != (1 if pointer else 0):
            return False
        dtype = getattr(p, "dtype", None)
        if dtype in _C_TYPES and base not in _C_TYPES[dtype]:
            return False
    return True
