"""Parsers for what the CUDA tools print and write: PTX ``.entry`` signatures, ``ptxas -v`` resource
lines and compiler diagnostics. Pure text in, data out, so they are tested on checked-in snippets.

>>> entries = parse_ptx_entries(".visible .entry k(\\n\\t.param .u64 k_param_0\\n)\\n{\\n}\\n")
>>> entries["k"].params[0].ptx_type
'u64'
>>> parse_ptxas_resources("ptxas info    : Compiling entry function 'k' for 'sm_90'\\n"
...                       "ptxas info    : Used 12 registers, used 0 barriers\\n")["k"]["registers"]
12
"""

from __future__ import annotations

import re
from pathlib import Path

from ._types import Diagnostic, EntryInfo, PtxParam

# -- PTX ------------------------------------------------------------------------------------------------

_ENTRY = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)\s+)*\.entry\s+([\w$.]+)\s*\(", re.MULTILINE)
_PARAM = re.compile(r"\.param\b([^,]*)")
_TYPE = re.compile(r"\.([usbf](?:8|16|32|64)|bf16)")  # used with fullmatch
_NAME = re.compile(r"([\w$.%]+)\s*(?:\[\s*(\d+)\s*\])?\s*$")
_DIRECTIVE = re.compile(r"^\s*\.(maxntid|reqntid)\s+([\d,\s]+)$", re.MULTILINE)


def parse_ptx_entries(ptx: str) -> dict[str, EntryInfo]:
    """Every ``.entry`` of a PTX module with its ordered parameter list and thread-count directives.

    Handles ``.param .u64 p``, ``.param .u64 .ptr .global .align 4 p`` and by-value aggregates
    ``.param .align 8 .b8 p[16]``.
    """
    out: dict[str, EntryInfo] = {}
    for m in _ENTRY.finditer(ptx):
        name = m.group(1)
        close = ptx.find(")", m.end())
        if close < 0:
            continue
        params = []
        for i, pm in enumerate(_PARAM.finditer(ptx[m.end() : close])):
            params.append(_param(i, pm.group(1)))
        # performance directives sit between ")" and the body's "{"
        body = ptx.find("{", close)
        head = ptx[close + 1 : body if body >= 0 else close + 1]
        max_threads = required = None
        for dm in _DIRECTIVE.finditer(head):
            dims = tuple(int(x) for x in re.findall(r"\d+", dm.group(2)))
            if dm.group(1) == "maxntid":
                max_threads = _product(dims)
            else:
                required = dims
        out[name] = EntryInfo(name, None, params, max_threads=max_threads, required_threads=required)
    return out


def _param(index: int, text: str) -> PtxParam:
    tokens = text.split()
    ptx_type, align, pointer = "b8", None, False
    name_part = ""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == ".align" and i + 1 < len(tokens):
            align = int(tokens[i + 1])
            i += 2
            continue
        if tok == ".ptr":
            pointer = True
        elif _TYPE.fullmatch(tok):
            ptx_type = tok[1:]
        elif not tok.startswith("."):
            name_part = " ".join(tokens[i:])
            break
        i += 1
    bits = int(re.sub(r"\D", "", ptx_type) or 8)
    size = bits // 8
    nm = _NAME.search(name_part)
    if nm and nm.group(2):
        size *= int(nm.group(2))
    return PtxParam(index, ptx_type, size, align, pointer)


def _product(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


PTX_FILE_STAMP = ", 1, 0"  # timestamp, size of every .file directive (see normalize_ptx_files)
_FILE = re.compile(r'^(\s*\.file\s+\d+\s+)"([^"]*)"(?:\s*,\s*\d+\s*,\s*\d+)?', re.MULTILINE)


def normalize_ptx_files(ptx: str, roots: list[str]) -> str:
    """``.file`` directives with the project root prefix dropped and a fixed timestamp and size.

    nvcc writes absolute paths into the line tables of ``-lineinfo`` builds, and ptxas, given a ``.file``
    without a timestamp (or with timestamp 0), looks the file up and records its modification time and
    size: the same source would give different cubin bytes in two checkouts, or in one checkout after
    ``git checkout`` touched it. Relative names and an explicit timestamp of 1 (0 means "look it up")
    and size 0 (DWARF's "unknown") make the cubin a function of the PTX alone.

    >>> normalize_ptx_files('\\t.file\\t1 "/w/r/kernels/x.cu"', ["/w/r"])
    '\\t.file\\t1 "kernels/x.cu", 1, 0'
    """
    prefixes = [r.rstrip("/") + "/" for r in roots if r]

    def fix(m: re.Match) -> str:
        path = m.group(2)
        for p in prefixes:
            if path.startswith(p):
                path = path[len(p) :]
                break
        return f'{m.group(1)}"{path}"{PTX_FILE_STAMP}'

    return _FILE.sub(fix, ptx)


# -- ptxas -v ---------------------------------------------------------------------------------------------

_COMPILING = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")


def parse_ptxas_resources(log: str) -> dict[str, dict[str, int | None]]:
    """Per entry: registers, spill stores / loads, stack frame, static shared and constant bytes.

    Understands the CUDA 11-13 formats; ``const_bytes`` is the sum of the ``cmem[n]`` banks reported for
    the entry, or None where this ptxas reports none (CUDA 13 does not for sm_90). Device functions
    that ptxas lists under an entry do not overwrite the entry's own frame.
    """
    out: dict[str, dict[str, int | None]] = {}
    entry: str | None = None  # the entry being compiled
    props: str | None = None  # the function whose properties the next frame line describes
    for line in log.splitlines():
        m = _COMPILING.search(line)
        if m:
            entry = m.group(1)
            out.setdefault(entry, _empty())
            props = None
            continue
        m = _PROPERTIES.search(line)
        if m:
            props = m.group(1)
            continue
        m = _FRAME.search(line)
        if m:
            if props is not None and props in out:
                r = out[props]
                r["stack_frame"], r["spill_stores"], r["spill_loads"] = (int(x) for x in m.groups())
            continue
        m = _USED.search(line)
        if m and entry is not None:
            r = out[entry]
            r["registers"] = int(m.group(1))
            sm = _SMEM.search(line)
            r["shared_static_bytes"] = int(sm.group(1)) if sm else 0
            banks = _CMEM.findall(line)
            r["const_bytes"] = sum(int(b) for b, _ in banks) if banks else None
    return out


def _empty() -> dict[str, int | None]:
    return {
        "registers": None,
        "spill_stores": 0,
        "spill_loads": 0,
        "stack_frame": 0,
        "shared_static_bytes": 0,
        "const_bytes": None,
    }


# -- diagnostics ----------------------------------------------------------------------------------------

# EDG front end (cudafe++):   kernels/x.cu(42): error: identifier "foo" is undefined
_EDG = re.compile(
    r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|remark)(?: #[\w-]+)?: (?P<msg>.*)$"
)
# host preprocessor (gcc):    kernels/x.cu:1:10: fatal error: missing.cuh: No such file or directory
_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)? (?P<sev>fatal error|error|warning): (?P<msg>.*)$")
# ptxas on a PTX line:         ptxas /tmp/x.ptx, line 6; error   : Unknown modifier '.instr'
_PTXAS_LINE = re.compile(r"^ptxas (?P<file>.+?), line (?P<line>\d+); (?P<sev>error|warning)\s*: (?P<msg>.*)$")
# tool-level:                  ptxas error   : Entry function 'k' uses too much shared data (...)
_TOOL = re.compile(r"^(?P<tool>nvcc|ptxas|nvlink|cicc)(?: (?P<sev>fatal|error|warning))?\s*: (?P<msg>.*)$")

_NOISE = ("Ptx assembly aborted due to errors",)


def parse_diagnostics(log: str, root: Path | None = None, ptx_source: str | None = None) -> list[Diagnostic]:
    """Errors and warnings in an nvcc / ptxas log, in order; files made relative to ``root``.

    ptxas errors point into the generated PTX, not the source: they are reported against
    ``ptx_source`` (the ``.cu`` file) without a line, quoting the PTX line in the message.

    >>> parse_diagnostics('kernels/x.cu(4): error: identifier "y" is undefined')[0].line
    4
    """
    out: list[Diagnostic] = []
    for raw in log.splitlines():
        line = raw.rstrip()
        m = _EDG.match(line) or _GCC.match(line)
        if m:
            sev = "error" if "error" in m.group("sev") else m.group("sev")
            out.append(Diagnostic(_rel(m.group("file"), root), int(m.group("line")), sev, m.group("msg").strip()))
            continue
        m = _PTXAS_LINE.match(line)
        if m:
            msg = f"ptxas: {m.group('msg').strip()} (line {m.group('line')} of the generated PTX)"
            out.append(Diagnostic(ptx_source, None, m.group("sev"), msg))
            continue
        m = _TOOL.match(line)
        if m and m.group("tool") and not line.startswith(("ptxas info", "nvcc info")):
            sev = m.group("sev") or ""
            if sev not in ("fatal", "error", "warning"):
                continue
            msg = m.group("msg").strip()
            if any(n in msg for n in _NOISE):
                continue
            out.append(Diagnostic(ptx_source, None, "warning" if sev == "warning" else "error", f"{m.group('tool')}: {msg}"))
    return out


def _rel(path: str, root: Path | None) -> str:
    path = path.strip()
    if root is not None and Path(path).is_absolute():
        for r in (root, root.resolve()):
            try:
                return Path(path).relative_to(r).as_posix()
            except ValueError:
                continue
    return path
