"""compute-sanitizer: run the workers under a tool and turn its report into per-kernel records.

``wireup verify --sanitizer memcheck`` runs each worker as ``compute-sanitizer --tool memcheck
--error-exitcode 86 --log-file LOG python -m audit.runtime._worker ...``; every report block in LOG
("Invalid __global__ write of size 4 bytes ... at strided_gather+0x90 in strided_gather_kernel.cu:12")
is attributed to the kernel whose symbol, C++ name or contract name it quotes. Under memcheck the guard
bands are switched off so an out-of-bounds access meets the allocation boundary the tool watches.

>>> parse_report(text, symbols)      # doctest: +SKIP
{'strided_gather': [SanitizerReport(...)]}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
_PREFIX = re.compile(r"^=+ ?")
_AT = re.compile(r"\bat (?:0x[0-9a-f]+ in )?(.+?)\+0x[0-9a-f]+(?: in (\S+))?")
# an inlined or calling frame under the "at" line: "Device Frame:void f<...>(...)+0x2a0 in file.cu:12" (also the
# "[0x2a0]" offset form); the last one is the kernel entry whose code the faulting function was inlined into
_FRAME = re.compile(r"^Device Frame:\s*(?:0x[0-9a-f]+ in )?(.+?)(?:\+0x[0-9a-f]+| \[0x[0-9a-f]+\])(?: in (\S+))?\s*$")
_SKIP = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY", "Saved host backtrace", "Host Frame", "Target application returned")


@dataclass
class SanitizerReport:
    header: str  # "Invalid __global__ write of size 4 bytes"
    function: str | None  # as the tool prints it
    where: str | None  # file:line
    detail: str  # "by thread (36,0,0) in block (0,0,0)" ...
    frames: tuple[str, ...] = ()  # the device frames under the "at" line (inlined callers, then the kernel entry)


def _norm(s: str) -> str:
    s = re.sub(r"\s+", " ", s.strip())
    return re.sub(r" ?([^\w\s]) ?", r"\1", s)


def sanitizer_command(tool: str, exe: str, log: Path) -> list[str]:
    cmd = [exe, "--tool", tool, "--error-exitcode", "86", "--log-file", str(log), "--print-limit", "200"]
    if tool == "racecheck":
        cmd += ["--racecheck-report", "all"]
    return cmd


def parse_blocks(text: str) -> list[SanitizerReport]:
    blocks: list[list[str]] = []
    for raw in text.splitlines():
        if not raw.startswith("="):
            continue
        body = _PREFIX.sub("", raw)
        if not body.strip():
            continue
        indented = body.startswith(" ") or body.startswith("\t")
        if not indented:
            if any(body.startswith(s) for s in _SKIP) or body.startswith("Program hit"):
                blocks.append(["__skip__"])
                continue
            blocks.append([body.strip()])
        elif blocks:
            blocks[-1].append(body.strip())
    out = []
    for b in blocks:
        if b[0] == "__skip__":
            continue
        header = re.sub(r"^Error: ", "", b[0])
        fn, where = None, None
        for line in b:
            m = _AT.search(line)
            if m:
                fn, where = m.group(1).strip(), m.group(2)
                break
        thread = next((ln for ln in b[1:] if ln.startswith("by thread")), "")
        address = next((ln for ln in b[1:] if ln.startswith("Address")), "")
        nearest = next((ln for ln in b[1:] if ln.startswith("and is ")), "")
        if address and nearest:  # "Address 0x.. is out of bounds", "and is 4 bytes after the nearest allocation ..."
            address = f"{address}, {nearest[len('and '):]}"
        detail = "; ".join(part for part in (thread, address) if part)
        frames = tuple(m.group(1).strip() for m in (_FRAME.match(ln) for ln in b[1:]) if m)
        out.append(SanitizerReport(header, fn, where, detail, frames))
    return out


def base_name(text: str) -> str:
    """The unqualified function name in a symbol or signature: ``void ns::f<float, (int)4>(int*)`` -> ``f``."""
    depth = 0
    cut = len(text)
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            cut = i
            break
    head = text[:cut]
    out, depth = [], 0
    for ch in head:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    head = "".join(out).strip()
    return head.split(" ")[-1].split("::")[-1]


def attribute(reports: list[SanitizerReport], kernels: dict[str, list[str]]) -> dict[str, list[SanitizerReport]]:
    """Reports per kernel; ``kernels`` maps a kernel name to the names it may appear under (symbol,
    demangled signature, C++ name). A report is matched on the full name first, then on the unqualified
    function name where exactly one kernel has it (the tool may print template arguments differently).
    A report whose "at" function is no kernel (a device function inlined into one: a CUTLASS copy, a shared
    helper) is matched through its device frames, innermost first, so the kernel entry it ran in owns it.
    Reports that name no known kernel go under ""."""
    out: dict[str, list[SanitizerReport]] = {}
    bases: dict[str, set[str]] = {}
    for k, names in kernels.items():
        for n in names:
            if n:
                bases.setdefault(base_name(n), set()).add(k)
    for r in reports:
        owner = ""
        for function in (r.function, *r.frames):
            owner = _owner(function, kernels, bases) if function else ""
            if owner:
                break
        out.setdefault(owner, []).append(r)
    return out


def _owner(function: str, kernels: dict[str, list[str]], bases: dict[str, set[str]]) -> str:
    """The kernel a function name printed by the tool is, or ""."""
    f = _norm(function)
    for k, names in kernels.items():
        for n in names:
            if not n:
                continue
            nn = _norm(n)
            if f == nn or f.startswith(nn + "(") or (" " + nn + "(") in (" " + f) or f.endswith(" " + nn):
                return k
    cands = bases.get(base_name(function), set())
    return next(iter(cands)) if len(cands) == 1 else ""


def describe(tool: str, reps: list[SanitizerReport]) -> str:
    r = reps[0]
    where = f" at {r.where}" if r.where else (f" in {r.function}" if r.function else "")
    detail = f" ({r.detail}" + (f"; {len(reps)} report(s))" if len(reps) > 1 else ")") if r.detail else (f" ({len(reps)} report(s))" if len(reps) > 1 else "")
    return f'compute-sanitizer {tool} reports "{r.header}"{where}{detail}'
