"""Launcher scan: where host code (Rust, Python, C++) registers, loads or launches each kernel.

A contracted kernel that no host code launches is dead code; a kernel that host code launches or builds
but no contract covers is unaudited. Both are read off the string literals of the host sources that the
``launchers`` globs of the configuration name (``launchers = ["crates/**/*.rs", "build.rs"]``); comments
are skipped, so a kernel named only in a comment is not wired. A literal counts as

* **launch**: its text is a contracted kernel's entry symbol (``get_func("aux", "aux_trunk_forward")``,
  ``module.get_function("aux_trunk_forward")``, ``load_ptx(ptx, "aux", &["aux_trunk_forward"])``, a
  ``const NAME: &str = "aux_trunk_forward"``);
* **load**: it names a compiled module of a contracted source (``include_bytes!(".../aux_trunk_kernel.cubin")``,
  ``.ptx``, ``.fatbin``);
* **build**: it names a contracted ``.cu`` file, or a glob matching some (``.file("kernels/aux_trunk_kernel.cu")``
  in ``build.rs``), or is a source's file stem (``"aux_trunk_kernel"`` in a list a build script formats).

Unaudited references are module and source files no contract covers, and function names passed to the
calls that fetch a kernel from a module (``get_function``, ``get_func``, ``load_function``, ``get_kernel``,
``cuModuleGetFunction``, ``RawKernel``, and the name list of ``load_ptx``) that are no contracted symbol.

>>> scan = scan_launchers(cfg, cs)                               # doctest: +SKIP
>>> [(r.file, r.line, r.kind) for r in scan.references["aux_trunk_forward"]]   # doctest: +SKIP
[('crates/ml/src/gpu_aux_heads.rs', 41, 'launch')]
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .config import Config
from .cuda.hostlex import Literal as Literal
from .cuda.hostlex import flag_defines, inactive_blanked
from .cuda.hostlex import language_of as language_of
from .cuda.hostlex import lex as lex
from .cuda.launches import _depth_at, find_launches, rust_helpers
from .errors import UsageError
from .model import ContractSet

#: Folders never scanned: tool caches, virtual environments, build output.
SKIP_DIRS = frozenset({"target", "node_modules", "__pycache__", "site-packages"})
MAX_FILE_BYTES = 2_000_000
MODULE_SUFFIXES = (".cubin", ".ptx", ".fatbin")
#: Calls that fetch a kernel function by name: which of their string arguments is the function name.
FUNCTION_GETTERS = {
    "get_function": "last", "get_func": "last", "load_function": "last", "get_kernel": "last",
    "cuModuleGetFunction": "last", "RawKernel": "last", "load_ptx": "array",
}  # fmt: skip
_GETTER_CALL = re.compile(r"\b(" + "|".join(FUNCTION_GETTERS) + r")\s*(?:::\s*<[^>]*>\s*)?\(")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # used with fullmatch: a "$" would accept a trailing newline


@dataclass(frozen=True)
class HostReference:
    """One place host code names a kernel: file (root-relative), line, kind and the literal."""

    file: str
    line: int
    kind: str  # "launch" | "load" | "build"
    text: str
    kernel: str | None = None  # the contracted kernel; None for an unaudited reference
    call: str = ""  # the fetching call, for function names (e.g. "get_func")
    name_kind: str = "exact"  # "pattern": ``text`` is a name built at run time, ``*`` for what is unknown


@dataclass
class LauncherScan:
    """What the scan found: references per contracted kernel, and references no contract covers."""

    globs: tuple[str, ...]
    files: list[str] = field(default_factory=list)
    references: dict[str, list[HostReference]] = field(default_factory=dict)
    unaudited: list[HostReference] = field(default_factory=list)
    #: every launch site read from those files (geometry and arguments), for the geometry-drift rule
    launch_sites: list = field(default_factory=list)
    #: launches whose kernel name the reader could not resolve (a name built from a value it does not see)
    unresolved: list = field(default_factory=list)

    def launched(self, kernel: str) -> bool:
        return any(r.kind == "launch" for r in self.references.get(kernel, []))


def getter_arguments(code: str, lits: list[Literal], getters: dict[str, str] | None = None) -> list[tuple[str, Literal]]:
    """(call name, literal) for each function name passed to a kernel-fetching call in ``code``: the calls
    of :data:`FUNCTION_GETTERS`, or of ``getters`` (those and a code base's own wrappers)."""
    getters = getters or FUNCTION_GETTERS
    pattern = _GETTER_CALL if getters is FUNCTION_GETTERS else _getter_call(getters)
    found = []
    for m in pattern.finditer(code):
        call, open_at = m.group(1), m.end() - 1
        depth, j = 0, open_at
        while j < len(code):
            ch = code[j]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        inside = [lit for lit in lits if open_at < lit.start < j]
        if getters[call] == "last":
            direct = [lit for lit in inside if _depth_at(code, open_at, lit.start) == 1]
            if direct:
                found.append((call, direct[-1]))
        else:  # "array": the names inside [...] / &[...]
            found.extend((call, lit) for lit in inside if _depth_at(code, open_at, lit.start) >= 2)
    return found


def _getter_call(getters: dict[str, str]) -> re.Pattern:
    return re.compile(r"\b(" + "|".join(map(re.escape, getters)) + r")\s*(?:::\s*<[^>]*>\s*)?\(")


def _getter_spans(code: str, getters: dict[str, str]) -> list[tuple[int, int]]:
    """Where the argument lists of kernel-fetching calls lie in ``code`` (open and close bracket)."""
    from .cuda.launches import _close

    return [(m.end() - 1, _close(code, m.end() - 1)) for m in _getter_call(getters).finditer(code)]




# ---------------------------------------------------------------------------------------------------
# the scan


def host_files(root: Path, globs: tuple[str, ...], source: str = "configuration") -> list[str]:
    """Files the globs match under ``root`` (root-relative, sorted), skipping hidden and build folders.

    A match that is a link leading out of the root, a FIFO or a device is a
    :class:`~audit.errors.UsageError` naming the glob (``source`` names the configuration file).
    """
    from .untrusted import refusal

    seen: set[str] = set()
    root = root.resolve()
    for pattern in globs:
        if _leaves(pattern):  # the configuration refuses these; a caller passing one gets nothing
            continue
        for p in root.glob(pattern):
            try:
                rel = p.relative_to(root)
            except ValueError:
                continue
            if any(part.startswith(".") or part in SKIP_DIRS for part in rel.parts[:-1]):
                continue
            # a regular file inside the root: a link out of it (or a folder linked from outside), a FIFO
            # or a device is refused, naming the glob that matched it
            why = refusal(p, root)
            if why is not None:
                raise UsageError(
                    f'{source}: key "launchers" ("{pattern}") matches "{rel.as_posix()}", which {why}; '
                    "launcher files are regular files inside the project root."
                )
            if p.is_file() and p.stat().st_size <= MAX_FILE_BYTES:
                seen.add(rel.as_posix())
    return sorted(seen)


def _leaves(pattern: str) -> bool:
    """Whether a glob is absolute or climbs out through ".." (it would walk outside the root)."""
    return pattern.startswith(("/", "\\")) or ":" in pattern[:3] or ".." in PurePosixPath(pattern.replace("\\", "/")).parts


def scan_launchers(cfg: Config, cs: ContractSet) -> LauncherScan:
    """Scan for references to kernels: the host sources the ``launchers`` globs name and the kernels' own
    source files (a ``.cu`` whose host functions launch its kernels with ``<<<...>>>``)."""
    from .untrusted import read_regular, resolve

    root = cfg.root.resolve()
    include_dirs = [cfg.path(d) for d in cfg.include_dirs]
    files = host_files(root, tuple(cfg.launchers), cfg.source.split(" ")[0])
    own = sorted({k.source for k in cs.kernels if _own_source_is_readable(root, k.source)} - set(files))
    scan = LauncherScan(tuple(cfg.launchers), sorted({*files, *own}))
    own_only = set(own)
    by_symbol: dict[str, list[str]] = {}
    by_source: dict[Path, list[str]] = {}
    by_name: dict[str, list[str]] = {}  # source file name -> kernels
    by_stem: dict[str, list[str]] = {}
    by_function: dict[str, list[str]] = {}  # the C++ function a <<<>>> launch names (no template arguments)
    for k in cs.kernel_map.values():
        by_symbol.setdefault(k.symbol, []).append(k.name)
        by_function.setdefault(launch_name(k), []).append(k.name)
        src = PurePosixPath(k.source)
        real = resolve(root / k.source)
        if real is not None:
            by_source.setdefault(real, []).append(k.name)
        by_name.setdefault(src.name, []).append(k.name)
        by_stem.setdefault(src.stem, []).append(k.name)
    for k in cs.kernel_map.values():
        scan.references[k.name] = []

    def add(ref: HostReference, kernels: list[str]) -> None:
        for name in kernels:
            refs = scan.references[name]
            if not any(r.file == ref.file and r.line == ref.line and r.kind == ref.kind for r in refs):
                refs.append(HostReference(ref.file, ref.line, ref.kind, ref.text, name, ref.call))

    heads = TemplateHeads(root)  # template heads of the contracted kernels, for launches with template arguments
    visible = Visibility(root, include_dirs)  # several contracts of one name: the one a launch's own file sees

    def judge(site, rel: str) -> None:
        """The contracts one launch site runs, as references; what it runs that no contract covers, unaudited."""
        call = site.via or {"cuda": "<<<>>>", "driver": "cuLaunchKernel"}.get(site.style, "launch")
        if site.name_kind == "unresolved":
            scan.unresolved.append(site)
            return
        if site.name_kind == "pattern":
            kernels = [name for symbol, names in by_symbol.items() if site.names_kernel(symbol) for name in names]
        else:
            kernels = by_symbol.get(site.kernel) or by_function.get(site.kernel)
        if kernels and site.template_args is not None and site.kernel not in by_symbol:
            # tile<64><<<...>>> launches one instantiation: it wires only the contract whose cpp_name
            # names it (or names none); with every argument known and no such contract, the launch runs
            # an instantiation nobody contracted
            want = instantiation(site.template_args)
            if all(_known_argument(a) for a in want):
                candidates = kernels
                kernels = [n for n in kernels if _runs(cs.kernel_map[n], site.template_args, heads)]
                if not kernels:
                    # the instantiation as its compiled entry names it (the template's defaults written out)
                    args = heads.complete(cs.kernel_map[candidates[0]], site.template_args)
                    shown = f"{site.kernel}<{', '.join(spelled(args))}>"
                    scan.unaudited.append(HostReference(rel, site.line, "launch", shown, None, call))
                    return
        if kernels:
            kernels = [k.name for k in visible.narrow(rel, site.style, [cs.kernel_map[n] for n in kernels])]
        if kernels:
            add(HostReference(rel, site.line, "launch", site.kernel, None, call), kernels)
        elif site.style in ("cuda", "cudarc", "runtime"):  # the other styles name the kernel in a literal, judged below
            scan.unaudited.append(HostReference(rel, site.line, "launch", site.kernel, None, call if site.style != "cudarc" else "", site.name_kind))

    forwarders: list = []  # launches of a function's parameter (ggml_cuda_kernel_launch): judged at the calls
    codes: dict[str, tuple[str, str]] = {}  # C and CUDA files' text and code (comments and strings blanked), for those calls
    headers: dict[Path, dict[str, str]] = {}  # file-scope constants per header, read once per scan
    defines = flag_defines(cfg.nvcc_flags)
    texts: dict[str, str] = {}
    for rel in scan.files:
        try:
            texts[rel] = read_regular(root / rel, MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
    # the Rust code base's own wrappers of cudarc (get_or_load_func, func.builder(), builder_arg!), read
    # from every Rust file first: a wrapper defined in one file is used in the others
    rust = rust_helpers([text for rel, text in texts.items() if language_of(rel) == "rust"])
    getter_calls = {**FUNCTION_GETTERS, **{name: "last" for name in rust.getters}}
    for rel in scan.files:
        path = root / rel
        if rel not in texts:
            continue
        text = texts[rel]
        if rel in own_only and not any(mark in text for mark in _HOST_MARKS) and not _SPACED_LAUNCH.search(text):
            continue  # a kernel source with no host code in it (the usual case): nothing to lex
        if language_of(rel) == "c":
            # a launch in a block the build certainly compiles out (#ifndef X after #define X) launches nothing
            text = inactive_blanked(text, defines)
        lits, code = lex(text, language_of(rel))
        launches_here = language_of(rel) == "c" and ("<<<" in code or "cuLaunchKernel" in code)
        included = included_constants(text, path, root, headers, include_dirs) if launches_here else None
        sites = find_launches(text, language_of(rel), rel, included, rust)
        if launches_here and any(s.pasted for s in sites):
            # a macro's launch pastes its kernel's name: what each use of the macro launches, with its geometry,
            # read from nvcc -E; without nvcc the pasted launch stays a pattern that no geometry is compared with
            expanded, _why = macro_launches(cfg, path, rel, sites)
            if expanded:
                sites = [s for s in sites if not s.pasted] + expanded
        forwarders += [s for s in sites if s.name_kind == "forwarded"]
        if language_of(rel) == "c":
            codes[rel] = (text, code)  # the text as lexed: blanking inactive blocks moves offsets
        sites = [s for s in sites if s.name_kind != "forwarded"]  # judged at their callers, below
        scan.launch_sites.extend(sites)
        for site in sites:
            judge(site, rel)
        getters = {id(lit): call for call, lit in getter_arguments(code, lits, getter_calls)}
        inside_getters = _getter_spans(code, getter_calls)
        for lit in lits:
            value = lit.value.strip()
            call = getters.get(id(lit), "")
            if not call and any(a < lit.start < b for a, b in inside_getters):
                continue  # a part of a kernel name built at run time (kernel_name::<T>("affine")): judged with its launch
            if value in by_symbol:
                add(HostReference(rel, lit.line, "launch", value, None, call), by_symbol[value])
            elif value.lower().endswith((".cu", *MODULE_SUFFIXES)):
                for name, kernels in _files_named(value, path.parent, root, by_source, by_name):
                    kind = "build" if name.lower().endswith(".cu") else "load"
                    if kernels:
                        add(HostReference(rel, lit.line, kind, value), kernels)
                    elif "*" not in value and "{" not in value:
                        scan.unaudited.append(HostReference(rel, lit.line, kind, value, None))
            elif value in by_stem:
                add(HostReference(rel, lit.line, "build", value), by_stem[value])
            elif call and _IDENT.fullmatch(value) and not value.startswith("_Z"):
                scan.unaudited.append(HostReference(rel, lit.line, "launch", value, None, call))
    for site in {s.forwarded: s for s in forwarders}.values():  # one launcher may launch its parameter twice (PDL or not)
        for ref_site in _calls_of_forwarder(site, codes):
            scan.launch_sites.append(ref_site)
            judge(ref_site, ref_site.file)
    # one finding per fetch: a Rust launch through a getter is seen as a launch site (at the builder) and as
    # the literal the getter is passed (a few lines above it); the literal's line is kept
    fetches = [r for r in scan.unaudited if r.call]
    unique: dict[tuple[str, int, str], HostReference] = {}
    for ref in scan.unaudited:
        if not ref.call and any(f.file == ref.file and f.text == ref.text and 0 <= ref.line - f.line <= _FETCH_TO_LAUNCH for f in fetches):
            continue
        unique.setdefault((ref.file, ref.line, ref.text), ref)
    scan.unaudited = list(unique.values())
    return scan


def _calls_of_forwarder(site, codes: dict[str, tuple[str, str]]) -> list:
    """The launches a forwarding launcher makes (``site`` launches its function's parameter: ggml's
    ``ggml_cuda_kernel_launch(Kernel kernel, params, args...) { kernel<<<...>>>(args...); }``): one site per
    call of that function in the scanned files, at the call, running the function the call passes
    (``ggml_cuda_kernel_launch(k_bin_bcast<op, T>, ...)``: ``k_bin_bcast`` with those template arguments; a
    variable holding one, as a launch of the variable reads it). Its geometry is in the launcher's parameters,
    so none is compared. A call passing what the reader cannot name (a call's result), and a launcher with no
    call in the scanned files, are unresolved launches."""
    from .cuda.launches import LaunchSite

    function, index = site.forwarded
    via = f"{function}() ({site.file}:{site.line})"
    out = []
    seen = {(function, index)}
    todo = [(function, index, 0)]
    while todo:  # a launcher's caller may pass on its own parameter (launch_fattn(..., fattn_kernel) calls it with that)
        fn, ix, depth = todo.pop(0)
        out += _forwarder_call_sites(fn, ix, via, codes, depth, seen, todo)
    if not out:
        out.append(LaunchSite(site.kernel, site.file, site.line, "cuda", None, None, None, None,
                              notes=(f"{function}() launches its parameter {site.kernel!r}, and no call of it was found in the scanned files",), name_kind="unresolved"))  # fmt: skip
    return out


#: how many launcher functions deep a kernel passed on from parameter to parameter is followed
MAX_FORWARDING = 4


def _forwarder_call_sites(function: str, index: int, via: str, codes: dict[str, tuple[str, str]], depth: int,
                          seen: set[tuple[str, int]], todo: list) -> list:  # fmt: skip
    """The launch sites of the calls of one launcher function (:func:`_calls_of_forwarder`); a call passing its
    own function's parameter queues that function's calls instead."""
    from .cuda.launches import LaunchSite, enclosing_function, forwarded_calls, function_refs, pointer_targets, template_arguments

    out = []
    for rel, (text, code) in codes.items():
        for line, arg, at in forwarded_calls(function, index, text, code):
            refs = function_refs(arg)
            if refs is not None and len(refs) == 1 and refs[0][1] is None and re.fullmatch(r"[A-Za-z_]\w*", arg):
                held = pointer_targets(arg, text, code, at)  # a variable holding the kernel, assigned before the call
                if held is None:
                    around = enclosing_function(code, at)
                    if around is not None and arg in around[1]:
                        key = (around[0], around[1].index(arg))
                        if key not in seen and depth + 1 < MAX_FORWARDING:
                            seen.add(key)
                            todo.append((*key, depth + 1))
                        continue
                refs = held if held is not None else refs
            if not refs:
                out.append(LaunchSite(arg, rel, line, "cuda", None, None, None, None, notes=(f"passed to {via}, which launches it; the reader cannot tell which kernel it is",), name_kind="unresolved"))
                continue
            for name, targs in dict.fromkeys(refs):
                out.append(LaunchSite(name, rel, line, "cuda", None, None, None, None, notes=(f"launched through {via}",),
                                      template_args=template_arguments(targs) if targs else None, via=f"{function}()"))  # fmt: skip
    return out


#: lines between a getter fetching a kernel by a literal name and the launch of what it fetched, at most
_FETCH_TO_LAUNCH = 40


#: local includes followed from a launching file: this many levels, this many headers in all
MAX_INCLUDE_DEPTH = 4
MAX_INCLUDED_FILES = 64
_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)


def included_constants(text: str, path: Path, root: Path, cache: dict[Path, dict[str, str]] | None = None,
                       include_dirs: Sequence[Path] = ()) -> dict[str, str]:  # fmt: skip
    """The file-scope integer constants (:func:`audit.cuda.launches.file_constants`) of the local headers
    ``text`` (the source at ``path``) includes with ``#include "..."``, followed into their own local
    includes: what a launch in ``path`` sees besides its own file. A header is looked up next to the file
    including it, then in ``include_dirs`` (the configuration's include folders, as nvcc's ``-I``: DeepSpeed's
    ``csrc/includes``, whose ``#define TILE_DIM 32`` its launches use); one outside ``root``, unreadable or beyond :data:`MAX_INCLUDE_DEPTH` levels and
    :data:`MAX_INCLUDED_FILES` files is skipped (its constants stay unknown, so the launches using them are
    not compared). Later includes win, as a redefinition after them would.
    """
    from .cuda.launches import file_constants
    from .untrusted import inside, read_regular, resolve

    cache = {} if cache is None else cache
    seen: set[Path] = set()
    real = resolve(path)
    if real is not None:
        seen.add(real)

    def walk(source: str, here: Path, depth: int) -> dict[str, str]:
        found: dict[str, str] = {}
        for m in _LOCAL_INCLUDE.finditer(source):
            header = next((h for h in (resolve(d / m.group(1)) for d in (here.parent, *include_dirs)) if h is not None and h.is_file()), None)
            if header is None or header in seen or len(seen) > MAX_INCLUDED_FILES or not inside(header, root):
                continue
            seen.add(header)
            if header not in cache:
                try:
                    body = read_regular(header, MAX_FILE_BYTES).decode("utf-8", errors="replace")
                except OSError:
                    cache[header] = {}
                    continue
                nested = walk(body, header, depth + 1) if depth < MAX_INCLUDE_DEPTH else {}
                cache[header] = {**nested, **file_constants(body)}
            found.update(cache[header])
        return found

    return walk(text, path, 1)


#: template arguments that name one instantiation whatever the launch's scope (besides integers)
_TYPE_ARGUMENTS = frozenset(
    "float double half __half __nv_bfloat16 nv_bfloat16 __nv_fp8_e4m3 __nv_fp8_e5m2 bool true false char "
    "signedchar unsignedchar short unsignedshort int unsignedint unsigned long unsignedlong longlong "
    "unsignedlonglong int8_t uint8_t int16_t uint16_t int32_t uint32_t int64_t uint64_t size_t".split()
)


def _known_argument(arg: str) -> bool:
    """Whether an :func:`instantiation` argument is a value (an integer, a built-in type): a name left
    over (``T``, ``Config``) may stand for any instantiation. A template's instantiation whose arguments
    are all values (``silu<float>``, ``&silu<float>``: a function template argument, vllm's
    ``act_and_mul_kernel<float, silu_kernel<float>, true>``) is one.

    >>> [_known_argument(a) for a in ("128", "float", "T", "silu<float>", "&ns::silu<float,4>", "silu<T>")]
    [True, True, False, True, True, False]
    """
    if arg in _TYPE_ARGUMENTS or re.fullmatch(r"-?\d+", arg) is not None:
        return True
    from .cuda.launches import template_arguments

    m = re.fullmatch(r"&?[A-Za-z_][\w:]*(<.*>)", arg)
    return m is not None and all(_known_argument(a) for a in instantiation(template_arguments(m.group(1))))


def instantiation(args: tuple[str, ...]) -> tuple[str, ...]:
    """Template arguments as two spellings of one instantiation share them: an integer expression by its
    value (``(64 * 2)``, ``128u`` -> ``"128"``), anything else without spaces (``unsigned int`` ->
    ``"unsignedint"``), a standard typedef as the type it names (``int32_t`` -> ``"int"``)."""
    from .compile import builtin_spelling
    from .cuda.launches import to_dim_expr
    from .dims import ExprError, parse_expr

    out = []
    for arg in args:
        text, _why = to_dim_expr(arg, {})
        value = None
        if text is not None:
            try:
                value = parse_expr(text).constant
            except (ExprError, ArithmeticError):
                value = None
        out.append(str(value) if value is not None else "".join(builtin_spelling(arg).split()))
    return tuple(out)


def macro_launches(cfg: Config, path: Path, rel: str, sites: list) -> tuple[list, str | None]:
    """The launches the macro calls of ``path`` expand to, where ``sites`` (its launches as written) has one
    whose kernel name a macro pastes together (``add_##t##_kernel<<<...>>>``): read from nvcc's preprocessor
    output (:func:`audit.cuda.preprocess.preprocessed`, with the configured include folders and ``-D``/``-U``
    flags), each with its own kernel name, template arguments and geometry at the line of the macro call;
    launches that ``sites`` already has at that line are left out. The preprocessed text is kept in the cache
    folder under the digest of everything nvcc reads (the file, the local headers it includes, the flags,
    nvcc's path), so a check runs nvcc -E once per change. ([], why) where nvcc is missing or fails."""
    import hashlib

    from .compile import find_nvcc
    from .cuda.preprocess import preprocessed
    from .hashing import include_closure

    if not any(s.pasted for s in sites):
        return [], None
    nvcc = find_nvcc()
    if nvcc is None:
        return [], "nvcc was not found"
    dirs = [cfg.path(d) for d in cfg.include_dirs]
    flags = [f for f in cfg.nvcc_flags if f.startswith(("-D", "-U"))]
    digest = hashlib.sha256(repr((str(nvcc), [str(d) for d in dirs], flags)).encode())
    for p in include_closure(path, dirs):
        try:
            digest.update(p.as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
        except OSError:
            digest.update(p.as_posix().encode() + b"\0missing\0")
    folder = cfg.path(cfg.cache) / "macro-launches"
    entry = folder / f"{digest.hexdigest()[:32]}.cu"
    try:
        text: str | None = entry.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text, why = preprocessed(path, dirs, nvcc, flags=flags)
        if text is None:
            return [], why
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = entry.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, entry)
        except OSError:
            pass  # a read-only cache folder: nvcc -E runs again next time
    have = {(s.line, s.kernel) for s in sites if not s.pasted}
    expanded = [s for s in find_launches(text, "c", rel) if not s.pasted and s.name_kind != "pattern" and (s.line, s.kernel) not in have]
    return expanded, None


def spelled(args: tuple[str, ...]) -> tuple[str, ...]:
    """Template arguments as a ``cpp_name`` writes them: an integer expression by its value, anything else
    as written with its spaces normalised (``((1024))``, ``2 * NT`` with NT = 64 -> ``1024``, ``128``;
    ``unsigned  int`` -> ``unsigned int``).

    >>> spelled(("((1024))", "2 * 64", "unsigned  int", "T"))
    ('1024', '128', 'unsigned int', 'T')
    """
    return tuple(v if re.fullmatch(r"-?\d+", v) else " ".join(raw.split()) for v, raw in zip(instantiation(args), args))


def contract_instantiation(k, heads: TemplateHeads | None = None) -> tuple[str, ...] | None:
    """The template arguments of the instantiation a contract's ``cpp_name`` names (``gemm<128, 8>`` ->
    ``("128", "8")``), None where it names none; with ``heads``, those it leaves out are the template's
    defaults."""
    from .cuda.launches import template_arguments
    from .cuda.scope import without_parameters

    name = without_parameters(k.cpp_name or "")
    if "<" not in name or not name.endswith(">"):
        return None
    args = template_arguments(name[name.index("<") :])
    return instantiation(heads.complete(k, args) if heads is not None else args)


def _runs(k, args: tuple[str, ...], heads: TemplateHeads) -> bool:
    """Whether a launch of ``k``'s function with explicit template arguments ``args`` runs the instantiation
    ``k``'s ``cpp_name`` names (every launch of the function does where it names none)."""
    have = contract_instantiation(k, heads)
    return have is None or have == heads.launches(k, args)


class TemplateHeads:
    """The ``template <...>`` heads of contracted kernels' functions, each source read once, so that a
    launch's explicit template arguments and a contract's ``cpp_name`` compare with the defaults they leave
    out filled in (``g<128><<<...>>>`` and ``cpp_name = "g<128, 0>"`` name one instantiation of
    ``template <int BM, int OFFSET = 0>``; the compiled entry spells every argument)."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self._heads: dict[tuple[str, str], str | None] = {}

    def head(self, k) -> str | None:
        key = (k.source, k.symbol)
        if key not in self._heads:
            self._heads[key] = self._read(k)
        return self._heads[key]

    def _read(self, k) -> str | None:
        from .cuda.scope import Source
        from .untrusted import read_regular, resolve

        real = resolve(self.root / k.source)
        if real is None or not _own_source_is_readable(self.root, k.source):
            return None
        try:
            text = read_regular(real, MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return None
        fn = Source.parse(text).entry(k.symbol)
        return fn.template if fn is not None else None

    def complete(self, k, args: tuple[str, ...]) -> tuple[str, ...]:
        """``args`` with the defaults of ``k``'s template appended where they leave parameters out (unchanged
        where the head is not known or a parameter left out has no default)."""
        from .cuda.scope import with_defaults

        return with_defaults(self.head(k), args) or args

    def launches(self, k, args: tuple[str, ...]) -> tuple[str, ...]:
        """The instantiation a launch with explicit template arguments ``args`` runs, if it runs ``k``'s function."""
        return instantiation(self.complete(k, args))


class Visibility:
    """Which contracts a ``<<<>>>`` launch may run where several share its name: two translation units that
    each define a kernel of that name (3DGS's forward and backward ``renderCUDA<3u>``, scaffolded by `init`
    as ``renderCUDA`` and ``renderCUDA_backward``) each launch their own, the one whose source the launching
    file is or includes. Where none of them is (a host file launching through a header's prototype), or the
    launch is no ``<<<>>>`` (a module getter names its module elsewhere), all of them."""

    def __init__(self, root: Path, include_dirs: list[Path]):
        self.root = root
        self.include_dirs = include_dirs
        self._seen: dict[str, set[Path]] = {}

    def files(self, rel: str) -> set[Path]:
        """The file ``rel`` (relative to the root) and every file it includes, resolved."""
        if rel not in self._seen:
            from .hashing import include_closure

            here = (self.root / rel).resolve()
            try:
                self._seen[rel] = {p.resolve() for p in include_closure(self.root / rel, self.include_dirs)} | {here}
            except (OSError, ValueError, RecursionError):
                self._seen[rel] = {here}
        return self._seen[rel]

    def narrow(self, rel: str | None, style: str, kernels: list) -> list:
        """``kernels`` (contracts a launch in ``rel`` names) narrowed to those its file sees (see the class)."""
        if len(kernels) < 2 or style != "cuda" or not rel:
            return kernels
        seen = self.files(rel)
        own = [k for k in kernels if (self.root / k.source).resolve() in seen]
        return own or kernels


def launch_name(k) -> str:
    """The name a ``<<<...>>>`` launch of ``k`` uses: its C++ function without namespace or template
    arguments (``ns::scale<float>`` -> ``scale``)."""
    from .cuda.scope import function_name

    return function_name(k.cpp_name or k.entry or k.name)


#: what host code in a kernel's own source shows (a launch, a module loaded or a kernel fetched by name)
_SPACED_LAUNCH = re.compile(r"<<[ \t]+<")  # a launch written k << <grid, block >> > (args)
_HOST_MARKS = ("<<<", "cuLaunchKernel", "cuModuleGetFunction", "get_function", "load_function", "RawKernel", "get_func", ".cubin", ".ptx")


def _own_source_is_readable(root: Path, source: str) -> bool:
    """A kernel's own source joins the scan where it is a regular file inside the root (a link loop, a
    FIFO or a name with a NUL byte is left to SOURCE_UNSAFE and the build, never read here)."""
    from .untrusted import resolve

    real = resolve(root / source)
    if real is None:
        return False
    try:
        real.relative_to(root)
        return real.is_file()
    except (ValueError, OSError):
        return False


def _files_named(value: str, here: Path, root: Path, by_source: dict, by_name: dict) -> list[tuple[str, list[str]]]:
    """(file name, contracted kernels whose source it is) for a path or glob literal."""
    from .untrusted import inside

    if "{" in value:  # a format string (``format!("kernels/{name}.cu")``): nothing to resolve
        return []
    if "*" in value or "?" in value:
        if _leaves(value):  # a literal in a host file is the project's text: never walk outside the root
            return []
        matches: dict[Path, None] = {}
        for base in (here, root):
            try:
                for p in sorted(base.glob(value)):
                    if inside(p, root):
                        matches[p.resolve()] = None
            except (ValueError, NotImplementedError, OSError, RuntimeError):
                continue
        return [(p.name, _kernels_of(p, by_source, by_name)) for p in matches]
    stem_path = PurePosixPath(value)
    name = stem_path.name
    source_name = stem_path.stem + ".cu" if name.lower().endswith(MODULE_SUFFIXES) else name
    for base in (here, root):
        p = (base / value).resolve() if not name.lower().endswith(MODULE_SUFFIXES) else None
        if p is not None and p.is_file():
            return [(name, _kernels_of(p, by_source, by_name))]
    return [(name, list(by_name.get(source_name, [])))]


def _kernels_of(path: Path, by_source: dict, by_name: dict) -> list[str]:
    return list(by_source.get(path.resolve()) or by_name.get(path.name, []))


def launcher_facts(ctx) -> LauncherScan:
    """Fact provider for the launcher rules; they do not run where no ``launchers`` globs are configured."""
    from .errors import RuleNotRun

    cfg = ctx.config
    if cfg is None:
        raise RuleNotRun('no launcher scan is configured (set launchers = ["crates/**/*.rs", "build.rs"] in [tool.wireup])')
    if cfg.launchers and not host_files(cfg.root.resolve(), tuple(cfg.launchers), cfg.source.split(" ")[0]):
        globs = ", ".join(f'"{g}"' for g in cfg.launchers)
        raise RuleNotRun(f"the launcher globs {globs} match no file under the project root")
    scan = scan_launchers(cfg, ctx.cs)
    if not cfg.launchers and not scan.launch_sites:
        # the kernels' own files launch nothing: the host code lives elsewhere, and nobody said where
        raise RuleNotRun(
            'no launcher scan is configured and the kernel sources launch no kernel themselves (set launchers = '
            '["crates/**/*.rs", "build.rs"] in [tool.wireup])'
        )
    return scan
