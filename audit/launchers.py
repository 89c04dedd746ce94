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

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .config import Config
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
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Literal:
    """A string literal of a host source: its text (between the quotes) and where it starts."""

    value: str
    start: int
    end: int
    line: int


@dataclass(frozen=True)
class HostReference:
    """One place host code names a kernel: file (root-relative), line, kind and the literal."""

    file: str
    line: int
    kind: str  # "launch" | "load" | "build"
    text: str
    kernel: str | None = None  # the contracted kernel; None for an unaudited reference
    call: str = ""  # the fetching call, for function names (e.g. "get_func")


@dataclass
class LauncherScan:
    """What the scan found: references per contracted kernel, and references no contract covers."""

    globs: tuple[str, ...]
    files: list[str] = field(default_factory=list)
    references: dict[str, list[HostReference]] = field(default_factory=dict)
    unaudited: list[HostReference] = field(default_factory=list)

    def launched(self, kernel: str) -> bool:
        return any(r.kind == "launch" for r in self.references.get(kernel, []))


# ---------------------------------------------------------------------------------------------------
# lexing: string literals and code with comments and strings blanked out


def language_of(path: str) -> str:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix == ".rs":
        return "rust"
    if suffix in (".py", ".pyi"):
        return "python"
    if suffix in (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh"):
        return "c"
    return "generic"


_RUST_CHAR = re.compile(r"'(?:\\u\{[0-9a-fA-F]{1,6}\}|\\.|[^\\'\n])'")
_RUST_RAW = re.compile(r'b?r(#*)"')
_CPP_RAW = re.compile(r'(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(')
_C_CHAR = re.compile(r"'(?:\\.|[^\\'\n])*'")


def lex(text: str, language: str) -> tuple[list[Literal], str]:
    """String literals of ``text`` and the code with comments and literal contents blanked.

    Blanked characters become spaces (newlines are kept), so offsets and line numbers stay valid and
    parentheses inside strings or comments do not count when calls are matched.

    >>> lits, code = lex('f("a(b", x) // "c"', "rust")
    >>> [l.value for l in lits], code
    (['a(b'], 'f("   ", x)       ')
    """
    out = list(text)
    lits: list[Literal] = []
    i, n = 0, len(text)
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def blank(a: int, b: int) -> None:
        for j in range(a, b):
            if out[j] != "\n":
                out[j] = " "

    def literal(q_start: int, c_start: int, c_end: int, q_end: int) -> None:
        lits.append(Literal(text[c_start:c_end], q_start, q_end, line_of(q_start)))
        blank(c_start, c_end)

    line_comment = "#" if language == "python" else ("//" if language in ("rust", "c") else None)
    while i < n:
        c = text[i]
        if line_comment and text.startswith(line_comment, i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
            continue
        if language in ("rust", "c") and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if language == "rust" and text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
            continue
        if language == "rust" and c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = _RUST_RAW.match(text, i)
            if m:
                close = '"' + m.group(1)
                j = text.find(close, m.end())
                j = n if j < 0 else j
                literal(i, m.end(), j, min(n, j + len(close)))
                i = j + len(close)
                continue
        if language == "c" and c in "uULR" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = _CPP_RAW.match(text, i)
            if m:
                close = ")" + m.group(1) + '"'
                j = text.find(close, m.end())
                j = n if j < 0 else j
                literal(i, m.end(), j, min(n, j + len(close)))
                i = j + len(close)
                continue
        if c == "'" and language == "rust":
            m = _RUST_CHAR.match(text, i)
            i = m.end() if m else i + 1  # a char literal, or the quote of a lifetime
            continue
        if c == "'" and language == "c":
            m = _C_CHAR.match(text, i)
            i = m.end() if m else i + 1
            continue
        if c == '"' or (c == "'" and language in ("python", "generic")):
            # String prefixes (r, b, f) are lexed as code; a backslash skips the next character even in
            # a raw Python string (r"\"" is one string), which is all that finding its end needs.
            quote = text[i : i + 3] if language == "python" and text[i : i + 3] in ('"""', "'''") else c
            j = i + len(quote)
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    break
                if len(quote) == 1 and text[j] == "\n" and language != "rust":
                    break  # unterminated single-line string: stop at the line end
                j += 1
            literal(i, i + len(quote), min(j, n), min(n, j + len(quote)))
            i = j + len(quote)
            continue
        i += 1
    return lits, "".join(out)


def getter_arguments(code: str, lits: list[Literal]) -> list[tuple[str, Literal]]:
    """(call name, literal) for each function name passed to a kernel-fetching call in ``code``."""
    found = []
    for m in _GETTER_CALL.finditer(code):
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
        if FUNCTION_GETTERS[call] == "last":
            direct = [lit for lit in inside if _depth(code, open_at, lit.start) == 1]
            if direct:
                found.append((call, direct[-1]))
        else:  # "array": the names inside [...] / &[...]
            found.extend((call, lit) for lit in inside if _depth(code, open_at, lit.start) >= 2)
    return found


def _depth(code: str, start: int, pos: int) -> int:
    depth = 0
    for ch in code[start:pos]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


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
    """Scan the host sources the ``launchers`` globs name for references to kernels."""
    from .untrusted import read_regular

    root = cfg.root.resolve()
    scan = LauncherScan(tuple(cfg.launchers), host_files(root, tuple(cfg.launchers), cfg.source.split(" ")[0]))
    by_symbol: dict[str, list[str]] = {}
    by_source: dict[Path, list[str]] = {}
    by_name: dict[str, list[str]] = {}  # source file name -> kernels
    by_stem: dict[str, list[str]] = {}
    for k in cs.kernel_map.values():
        by_symbol.setdefault(k.symbol, []).append(k.name)
        src = PurePosixPath(k.source)
        by_source.setdefault((root / k.source).resolve(), []).append(k.name)
        by_name.setdefault(src.name, []).append(k.name)
        by_stem.setdefault(src.stem, []).append(k.name)
    for k in cs.kernel_map.values():
        scan.references[k.name] = []

    def add(ref: HostReference, kernels: list[str]) -> None:
        for name in kernels:
            refs = scan.references[name]
            if not any(r.file == ref.file and r.line == ref.line and r.kind == ref.kind for r in refs):
                refs.append(HostReference(ref.file, ref.line, ref.kind, ref.text, name, ref.call))

    for rel in scan.files:
        path = root / rel
        try:
            text = read_regular(path, MAX_FILE_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        lits, code = lex(text, language_of(rel))
        getters = {id(lit): call for call, lit in getter_arguments(code, lits)}
        for lit in lits:
            value = lit.value.strip()
            call = getters.get(id(lit), "")
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
            elif call and _IDENT.match(value) and not value.startswith("_Z"):
                scan.unaudited.append(HostReference(rel, lit.line, "launch", value, None, call))
    return scan


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
    from .rules import RuleNotRun

    cfg = ctx.config
    if cfg is None or not cfg.launchers:
        raise RuleNotRun('no launcher scan is configured (set launchers = ["crates/**/*.rs", "build.rs"] in [tool.wireup])')
    scan = scan_launchers(cfg, ctx.cs)
    if not scan.files:
        globs = ", ".join(f'"{g}"' for g in cfg.launchers)
        raise RuleNotRun(f"the launcher globs {globs} match no file under the project root")
    return scan
