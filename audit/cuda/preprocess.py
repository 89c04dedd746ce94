"""A CUDA source through nvcc's preprocessor, its own lines kept where the expansion puts them.

What macros make is read from there: the kernels a macro declares (candle's ``AFFINE_OP(float, affine_f32)``,
:func:`audit.scaffold.macro_kernels`) and the launches a macro makes with a pasted kernel name (LeetCUDA's
``elementwise_add_##packed_type##_kernel<<<grid, block>>>``, :func:`audit.launchers.macro_launches`), each at
the line of the macro call that expands to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

LINE_MARKER = re.compile(r'^#(?:line)?\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')


def preprocessed(
    path: Path, include_dirs: Iterable[Path], nvcc: Path, timeout: float = 60.0, flags: Iterable[str] = ()
) -> tuple[str | None, str | None]:
    """``path`` run through nvcc's preprocessor (``-E``), only its own lines kept, each where the expansion
    puts it: a macro call's expansion on the line of the call, so that what is read from it (a kernel a
    macro declares, a launch a macro makes) keeps that line. (None, why) where the preprocessor fails."""
    import subprocess

    cmd = [str(nvcc), "-E", "-x", "cu", *flags, *[f"-I{d}" for d in include_dirs], path.name]
    try:
        run = subprocess.run(cmd, cwd=path.parent, capture_output=True, text=True, errors="replace", timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"nvcc -E did not run ({exc})"
    if run.returncode != 0:
        first = next((ln for ln in run.stderr.splitlines() if ln.strip()), "")
        return None, f"nvcc -E failed: {first}"
    own: dict[int, list[str]] = {}
    here, line = False, 0
    for raw in run.stdout.split("\n"):
        m = LINE_MARKER.match(raw)
        if m:
            here, line = m.group(2) == path.name, int(m.group(1))
            continue
        if here:
            own.setdefault(line, []).append(raw)
        line += 1
    last = max(own, default=0)
    return "\n".join(" ".join(own.get(n, ())) for n in range(1, last + 1)), None
