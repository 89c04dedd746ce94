"""Shared pieces of the CPU benchmarks: child processes timed with their own rusage, summaries, host facts.

A benchmark runs ``wireup`` as a child process (``python -m audit``, which is what the ``wireup`` console
script runs) so interpreter start and imports are part of every number. Each child is reaped with
``os.wait4``, which gives *that* child's user and system CPU time and peak resident set size
(``ru_maxrss``, KiB on Linux); ``resource.getrusage(RUSAGE_CHILDREN)`` would give the maximum over all
children instead.

>>> r = run_child([python(), "-c", "pass"])        # doctest: +SKIP
>>> round(r.wall, 3), r.maxrss_kib                  # doctest: +SKIP
(0.018, 9344)
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def python() -> str:
    """The interpreter running the benchmark, inside its virtualenv.

    ``sys.executable`` as it is: a virtualenv's ``python`` is a symbolic link to the base interpreter, and
    following it (``realpath``) starts a Python without the virtualenv's packages (no rtoml, or another
    installed wireup). Only a launcher script (a pyenv shim, whose bash start-up would be timed too) is
    replaced by the binary that runs this process.
    """
    exe = sys.executable
    if _is_script(exe) and os.path.exists("/proc/self/exe"):
        return os.path.realpath("/proc/self/exe")
    return exe


def _is_script(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return False


def wireup() -> list[str]:
    """The command that runs ``wireup`` from this checkout: ``python -m audit``."""
    return [python(), "-m", "audit"]


def pin_prefix(cpu: int | None) -> list[str]:
    """``taskset -c CPU`` where taskset exists and a CPU is asked for, else nothing."""
    if cpu is None or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", str(cpu)]


def child_env(bytecode_cache: Path | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a timed child: this one, with PYTHONPATH on the checkout.

    ``bytecode_cache`` set: byte-compiled modules are written to (and read from) that folder, as after a
    ``pip install``; unset: the caller's setting of PYTHONDONTWRITEBYTECODE is kept as it is.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    if bytecode_cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(bytecode_cache)
    if extra:
        env.update(extra)
    return env


@dataclass
class ChildRun:
    """One child process: wall seconds, its own CPU seconds and peak RSS, exit code and output."""

    wall: float
    user: float
    sys: float
    maxrss_kib: int
    rc: int
    stdout: str = ""
    stderr: str = ""

    @property
    def cpu(self) -> float:
        return self.user + self.sys


def run_child(
    cmd: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 600.0,
) -> ChildRun:
    """Run ``cmd`` once; wall time from spawn to reap, rusage of this child alone (``os.wait4``)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=dict(env) if env else None, cwd=cwd)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            time.sleep(0.0005)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return ChildRun(
            wall=wall,
            user=ru.ru_utime,
            sys=ru.ru_stime,
            maxrss_kib=int(ru.ru_maxrss),
            rc=proc.returncode,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
        )


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max (and the count) of a list of numbers."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize_runs(runs: Sequence[ChildRun]) -> dict[str, object]:
    """Wall, CPU and peak-RSS summaries of repeated runs of one command."""
    return {
        "wall_s": summary([r.wall for r in runs]),
        "cpu_s": summary([r.cpu for r in runs]),
        "user_s": summary([r.user for r in runs]),
        "maxrss_mib": summary([r.maxrss_kib / 1024 for r in runs]),
        "exit_codes": sorted({r.rc for r in runs}),
    }


def fmt_s(s: Mapping[str, float], unit: str = "s", scale: float = 1.0, digits: int = 3) -> str:
    """``0.412 s (0.398-0.455)`` from a :func:`summary`."""
    if not s.get("n"):
        return "-"
    f = f"{{:.{digits}f}}"
    return f"{f.format(s['median'] * scale)} {unit} ({f.format(s['min'] * scale)}-{f.format(s['max'] * scale)})"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_info() -> dict[str, object]:
    """The machine and software a result was measured on (docs/benchmarks.md records these)."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        affinity = None
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    info: dict[str, object] = {
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "cpus_usable": affinity,
        "load_average_1_5_15": load,
        "python": platform.python_version(),
        "python_executable": python(),
        "platform": platform.platform(),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
        "taskset": shutil.which("taskset") is not None,
    }
    try:
        info["git_commit"] = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "audit", "contracts", "kernels"],
            capture_output=True, text=True, timeout=10,
        ).stdout
        info["work_tree_dirty"] = bool(dirty.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def toml_parser(env: Mapping[str, str] | None = None) -> str:
    """Which TOML parser ``wireup`` uses in a child with ``env``: "rtoml X.Y.Z" (the optional fast path of
    audit/load.py, where rtoml is importable), "tomli X.Y.Z (compiled|pure Python)" (the default) or
    "tomllib"."""
    code = ("import audit.load as L; r = getattr(L, '_rtoml', None); t = getattr(L, '_tomli', None)\n"
            "if r: print('rtoml ' + r.VERSION)\n"
            "elif t: print('tomli ' + t[0].__version__ + (' (compiled)' if t[0].__file__.endswith('.so') else ' (pure Python)'))\n"
            "else: print('tomllib')")
    r = run_child([python(), "-c", code], env=env, cwd=REPO, timeout=120)
    return r.stdout.strip() or f"unknown ({r.stderr.strip()[-200:]})"


def write_json(path: str | None, data: object) -> None:
    """Write ``data`` as JSON to ``path`` (``-`` for stdout); nothing when ``path`` is None."""
    if not path:
        return
    text = json.dumps(data, indent=2, default=_jsonable)
    if path == "-":
        print(text)
    else:
        Path(path).write_text(text + "\n")
        print(f"wrote {path}")


def _jsonable(o: object) -> object:
    if hasattr(o, "__dataclass_fields__"):
        return asdict(o)  # type: ignore[arg-type]
    if isinstance(o, Path):
        return str(o)
    return str(o)
