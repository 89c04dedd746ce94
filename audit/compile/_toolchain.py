"""Finding the CUDA tools (nvcc, ptxas, a demangler) and the nvcc version, cached on disk.

The version is part of every cache key, and asking nvcc for it costs a process start; it is cached in
``<cache>/build/nvcc-versions.json`` keyed by the resolved path, size and mtime of the nvcc binary, so
a fully cached build starts no process at all. Replacing or upgrading nvcc changes its size or mtime
and therefore the key.

>>> find_nvcc()                                    # doctest: +SKIP
PosixPath('/usr/local/cuda-13.0/bin/nvcc')
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from ..errors import EnvironmentProblem

NVCC_MISSING = (
    "nvcc was not found on PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin; install the CUDA toolkit, "
    "or `pip install nvidia-cuda-nvcc-cu12` and put its bin folder on PATH."
)


def find_nvcc() -> Path | None:
    """nvcc from PATH, then ``$CUDA_HOME/bin`` (or ``$CUDA_PATH/bin``), then ``/usr/local/cuda/bin``.

    >>> find_nvcc() is None or find_nvcc().name == "nvcc"
    True
    """
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for home in homes:
        if home:
            cand = Path(home) / "bin" / "nvcc"
            if cand.is_file() and os.access(cand, os.X_OK):
                return cand
    return None


def find_ptxas(nvcc: Path) -> Path:
    """The ptxas of nvcc's own toolkit (so the two always match), else the one on PATH."""
    for d in (nvcc.parent, nvcc.resolve().parent):
        cand = d / "ptxas"
        if cand.is_file():
            return cand
    found = shutil.which("ptxas")
    if found:
        return Path(found)
    raise EnvironmentProblem(
        f"ptxas was not found next to {nvcc} or on PATH; install the complete CUDA toolkit (ptxas comes with nvcc)."
    )


def find_demangler(nvcc: Path) -> Path | None:
    """c++filt (binutils) or the toolkit's cu++filt; None where neither exists."""
    found = shutil.which("c++filt")
    if found:
        return Path(found)
    for d in (nvcc.parent, nvcc.resolve().parent):
        cand = d / "cu++filt"
        if cand.is_file():
            return cand
    return None


def nvcc_version(nvcc: Path, cache_dir: Path | None) -> str:
    """A stable version string, e.g. ``13.0.88 (cuda_13.0.r13.0/compiler.36424714_0)``.

    Read from ``cache_dir`` when the binary is unchanged; otherwise nvcc runs once and the answer is
    stored (best effort: an unwritable cache only costs the process start next time).
    """
    real = nvcc.resolve()
    st = real.stat()
    ident = f"{real}|{st.st_size}|{st.st_mtime_ns}"
    store = cache_dir / "nvcc-versions.json" if cache_dir else None
    known: dict[str, str] = {}
    if store is not None:
        try:
            known = json.loads(store.read_text())
        except (OSError, ValueError):
            known = {}
        if isinstance(known, dict) and isinstance(known.get(ident), str):
            return known[ident]
    import subprocess

    try:
        proc = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"{nvcc} --version failed ({exc}); check the CUDA toolkit installation.") from None
    version = parse_nvcc_version(proc.stdout)
    if proc.returncode != 0 or version is None:
        first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        raise EnvironmentProblem(
            f'{nvcc} --version printed no "Cuda compilation tools" line ({first[0] if first else f"exit {proc.returncode}"}); '
            "check the CUDA toolkit installation."
        )
    if store is not None:
        from ..atomic import write_text_atomic

        known = known if isinstance(known, dict) else {}
        known[ident] = version
        try:
            write_text_atomic(store, json.dumps(known, indent=1, sort_keys=True) + "\n")
        except OSError:
            pass
    return version


def parse_nvcc_version(text: str) -> str | None:
    """``nvcc --version`` output -> ``"13.0.88 (cuda_13.0.r13.0/compiler.36424714_0)"``.

    >>> parse_nvcc_version("Cuda compilation tools, release 12.4, V12.4.131\\nBuild cuda_12.4.r12.4/compiler.34097967_0")
    '12.4.131 (cuda_12.4.r12.4/compiler.34097967_0)'
    """
    m = re.search(r"release [\d.]+, V([\d.]+)", text)
    if not m:
        return None
    b = re.search(r"^Build (\S+)", text, re.MULTILINE)
    return f"{m.group(1)} ({b.group(1)})" if b else m.group(1)


def ptxas_options(nvcc_flags: list[str]) -> list[str]:
    """The ptxas options nvcc would pass when compiling to a cubin itself.

    The build runs the front end to PTX and ptxas separately, so flags that nvcc forwards to ptxas are
    translated here: ``-lineinfo`` -> ``--generate-line-info``, ``-G`` -> ``--device-debug``,
    ``-maxrregcount=N`` -> ``--maxrregcount N``, ``-Xptxas a,b`` / ``--ptxas-options=a,b`` -> ``a b``.
    With these ptxas runs as ``nvcc -cubin`` with the same flags would run it.

    >>> ptxas_options(["-O3", "-lineinfo", "-Xptxas", "-dlcm=cg", "--maxrregcount=64"])
    ['--generate-line-info', '-dlcm=cg', '--maxrregcount', '64']
    """
    out: list[str] = []
    it = iter(range(len(nvcc_flags)))
    for i in it:
        f = nvcc_flags[i]
        if f in ("-lineinfo", "--generate-line-info"):
            out.append("--generate-line-info")
        elif f in ("-G", "--device-debug"):
            out.append("--device-debug")
        elif f in ("-Xptxas", "--ptxas-options") and i + 1 < len(nvcc_flags):
            out.extend(x for x in nvcc_flags[i + 1].split(",") if x)
            next(it, None)
        elif f.startswith(("-Xptxas=", "--ptxas-options=")):
            out.extend(x for x in f.split("=", 1)[1].split(",") if x)
        elif f in ("-maxrregcount", "--maxrregcount") and i + 1 < len(nvcc_flags):
            out.extend(["--maxrregcount", nvcc_flags[i + 1]])
            next(it, None)
        elif f.startswith(("-maxrregcount=", "--maxrregcount=")):
            out.extend(["--maxrregcount", f.split("=", 1)[1]])
    return out
