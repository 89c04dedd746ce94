"""Project configuration: ``[tool.wireup]`` in ``pyproject.toml`` or a ``wireup.toml`` at the root.

Every key is optional; the defaults describe this repository's layout, so a project that keeps
``contracts/``, ``kernels/`` and ``reports/`` at its root needs no configuration at all. Inside another
codebase (a Rust workspace holding ``.cu`` files, say) a ``wireup.toml`` points at its folders::

    contracts = "gpu/contracts"
    kernels = "crates/ml/src/cuda"
    launchers = ["crates/**/*.rs", "build.rs"]
    select = ["wiring", "isv"]
    ignore = ["DEAD_KERNEL"]
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import MutableMapping
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import ConfigError, UsageError

_KEYS = {
    "contracts": str,
    "kernels": str,
    "reports": str,
    "evidence": str,
    "report": str,
    "templates": str,
    "arch": str,
    "nvcc_flags": list,
    "include": list,
    "include_packages": dict,
    "select": list,
    "ignore": list,
    "launchers": list,
    "generated": dict,
    "cache": str,
    "reference_paths": list,
    "verify_strict": bool,
}


@dataclass(frozen=True)
class Config:
    """Resolved configuration; paths are relative to ``root`` unless absolute."""

    root: Path
    contracts: str = "contracts"
    kernels: str = "kernels"
    reports: str = "reports"
    evidence: str = "reports/evidence"
    report: str = "reports/dqn-wire-up-audit.md"
    templates: str | None = None
    arch: str = "sm_90"
    nvcc_flags: tuple[str, ...] = ("-O3", "-lineinfo")
    include: tuple[str, ...] = ()
    # header folders shipped by installed Python distributions: (distribution, folder inside it), e.g.
    # ("nvidia-cutlass", "cutlass_library/source/include"); given to nvcc with -isystem (audit/compile/_packages.py)
    include_packages: tuple[tuple[str, str], ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    launchers: tuple[str, ...] = ()
    generated: tuple[tuple[str, str], ...] = (
        ("cuda", "kernels/isv_layout.cuh"),
        ("python", "audit/references/isv_layout.py"),
        ("rust", "reports/generated/isv_layout.rs"),
    )
    cache: str = ".wireup-cache"
    reference_paths: tuple[str, ...] = ()
    verify_strict: bool = False  # `wireup verify --strict` always: uncovered tails and unverified subjects fail
    source: str = "defaults"

    def path(self, rel: str) -> Path:
        p = Path(rel)
        return p if p.is_absolute() else self.root / p

    @property
    def contracts_dir(self) -> Path:
        return self.path(self.contracts)

    @property
    def include_dirs(self) -> tuple[str, ...]:
        return self.include or (self.kernels,)


def find_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` with a wireup.toml, a pyproject.toml or a .git."""
    start = start.resolve()
    for d in (start, *start.parents):
        if (d / "wireup.toml").is_file() or (d / "pyproject.toml").is_file() or (d / ".git").exists():
            return d
    return start


def load_config(root: Path | None = None, cwd: Path | None = None) -> Config:
    """Read the configuration of the project at ``root`` (or the one containing ``cwd``)."""
    root = (root or find_root(cwd or Path.cwd())).resolve()
    if not root.is_dir():
        raise UsageError(f'--root "{root}" is not a folder.')
    table: dict = {}
    source = "defaults"
    wt = root / "wireup.toml"
    pp = root / "pyproject.toml"
    where = _Where(wt, ())
    text = ""
    prefix: tuple[str, ...] = ()
    if wt.is_file() or _is_special(wt):
        (table, text), source = _read(wt, root), "wireup.toml"
        tool = table.get("tool")
        if isinstance(tool, dict) and "wireup" in tool:
            table, source, prefix = tool["wireup"], "wireup.toml [tool.wireup]", ("tool", "wireup")
            where = _Where(wt, prefix)
    elif pp.is_file() or _is_special(pp):
        data, text = _read(pp, root)
        where = _Where(pp, ())
        tool = data.get("tool")
        if isinstance(tool, dict) and "wireup" in tool:
            table, source, prefix = tool["wireup"], "pyproject.toml [tool.wireup]", ("tool", "wireup")
            where = _Where(pp, prefix)
    if not isinstance(table, dict):
        raise where.error(source, None, f"[tool.wireup] must be a table of settings, found {type(table).__name__} {table!r}.")
    cfg = Config(root=root, source=source)
    updates: dict = {}
    for key, value in table.items():
        want = _KEYS.get(key)
        if want is None:
            valid = ", ".join(f'"{k}"' for k in _KEYS)
            raise where.error(source, key, f'unknown key "{key}"; valid keys are {valid}.')
        if not isinstance(value, want):
            raise where.error(source, key, f'key "{key}" must be a {want.__name__}, found {type(value).__name__} {value!r}.')
        if want is list:
            if not all(isinstance(v, str) for v in value):
                raise where.error(source, key, f'key "{key}" must be a list of strings.')
            value = tuple(value)
        if key == "generated":
            value = tuple((str(k), str(v)) for k, v in value.items())
        if key == "include_packages":
            value = _include_packages(value, where, source)
        updates[key] = value
    cfg = replace(cfg, **updates)
    _refuse_escaping_paths(cfg, where)
    _refuse_nvcc_flags(cfg, text, prefix)
    cache = os.environ.get(CACHE_ENV)
    if cache:  # the user's own choice (not the project's): any folder, e.g. one shared across checkouts
        cfg = replace(cfg, cache=os.path.abspath(os.path.expanduser(cache)))
    return cfg



class _Where:
    """The configuration file being read and the key path of its settings table, for error locations."""

    def __init__(self, path: Path, prefix: tuple[str, ...]):
        self.path, self.prefix = path, prefix

    def error(self, source: str, key: str | None, detail: str) -> ConfigError:
        """``source: detail`` as a :class:`ConfigError` pointing at the line of ``key`` (the table for None)."""
        from ._tomlpos import line_of, locate_lines

        keypath = (*self.prefix, key) if key else self.prefix
        try:
            line = line_of(locate_lines(self.path.read_text(encoding="utf-8")), keypath)
        except (OSError, UnicodeDecodeError, ValueError, IndexError):
            line = None  # the position is a courtesy; the message stands without it
        return ConfigError(f"{source}: {detail}", self.path.name, line, ".".join(keypath), detail)


#: An environment variable naming the build cache folder; it overrides "cache" and may lie outside the root.
CACHE_ENV = "WIREUP_CACHE"

#: The thread counts of BLAS and OpenMP pools, which wireup sets to "1" where the environment leaves them unset:
#: in its console script before numpy loads (``audit.cli.console``) and in every worker process
#: (``audit.runtime._supervisor.spawn_worker``). A threaded BLAS sums matrix products of some shapes (a
#: width of 253 or 260, at 37 or 300 rows) in an order set by its thread count, so one thread everywhere
#: keeps results the same whatever the worker count; and several workers (or sanitizer runs, up to 8 side by
#: side), each with a pool of every core, oversubscribe the machine while OpenBLAS's idle threads spin (two
#: processes comparing outputs side by side took 2.1x as long with the default pools as with one thread each
#: on the 2-core CPU machine, 2026-12-06; docs/benchmarks.md section 6).
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_blas_thread(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """``env`` with each of :data:`BLAS_THREADS` it leaves unset set to "1" (the user's own counts stay)."""
    for var in BLAS_THREADS:
        env.setdefault(var, "1")
    return env

# nvcc options a project's configuration may not give: they name programs nvcc runs (a host compiler,
# options passed on to it or to the linker, a program run after the build), files or folders nvcc
# writes (outputs, kept intermediates, dependency files), files it reads options or code from, or they
# change what the build produces. A pull request could otherwise run its own script during
# `wireup check` or write outside the project. Users set such options in their environment
# (NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS), which a pull request does not control.
_REFUSED_NVCC = {
    "-ccbin": "chooses the host compiler, a program nvcc runs",
    "--compiler-bindir": "chooses the host compiler, a program nvcc runs",
    "-Xcompiler": "passes options to the host compiler",
    "--compiler-options": "passes options to the host compiler",
    "-forward-unknown-to-host-compiler": "passes options to the host compiler",
    "--forward-unknown-to-host-compiler": "passes options to the host compiler",
    "-forward-unknown-opts": "passes options to the host compiler",
    "--forward-unknown-opts": "passes options to the host compiler",
    "-Xlinker": "passes options to the host linker",
    "--linker-options": "passes options to the host linker",
    "-Xnvlink": "passes options to the device linker",
    "--nvlink-options": "passes options to the device linker",
    "-Xarchive": "passes options to the archiver",
    "--archive-options": "passes options to the archiver",
    "-Xcicc": "passes options to the front end (wireup passes its own)",
    "-Xcudafe": "passes options to the front end",
    "-run": "runs the compiled program",
    "--run": "runs the compiled program",
    "-run-args": "runs the compiled program",
    "--run-args": "runs the compiled program",
    "-optf": "reads further options from a file",
    "--options-file": "reads further options from a file",
    "-o": "names an output file",
    "--output-file": "names an output file",
    "-odir": "names an output folder",
    "--output-directory": "names an output folder",
    "-keep": "keeps intermediate files",
    "--keep": "keeps intermediate files",
    "-keep-dir": "names a folder for intermediate files",
    "--keep-dir": "names a folder for intermediate files",
    "-save-temps": "keeps intermediate files",
    "--save-temps": "keeps intermediate files",
    "-objtemp": "names intermediate files",
    "--objdir-as-tempdir": "writes intermediate files next to the output",
    "-MF": "names a dependency file to write",
    "--dependency-output": "names a dependency file to write",
    "-M": "writes dependencies instead of compiling",
    "-MD": "writes a dependency file",
    "-MMD": "writes a dependency file",
    "--generate-dependencies": "writes dependencies instead of compiling",
    "--generate-nonsystem-dependencies": "writes dependencies instead of compiling",
    "--generate-dependencies-with-compile": "writes a dependency file",
    "--generate-nonsystem-dependencies-with-compile": "writes a dependency file",
    "-I": "adds an include folder (use the \"include\" key, which stays inside the root)",
    "--include-path": "adds an include folder (use the \"include\" key, which stays inside the root)",
    "-isystem": "adds an include folder (use the \"include\" key, which stays inside the root)",
    "--system-include": "adds an include folder (use the \"include\" key, which stays inside the root)",
    "-include": "includes a file named in the flags",
    "--pre-include": "includes a file named in the flags",
    "-L": "adds a library folder",
    "--library-path": "adds a library folder",
    "-l": "links a library",
    "--library": "links a library",
    "-lib": "changes what the build produces",
    "--lib": "changes what the build produces",
    "-link": "changes what the build produces",
    "--link": "changes what the build produces",
    "-dlink": "changes what the build produces",
    "--device-link": "changes what the build produces",
}
_JOINED = ("-o", "-I", "-L", "-MF", "-isystem", "-include")  # short options nvcc also takes joined: "-Ipath"
_PTXAS_REFUSED = ("-o", "--output-file", "--input-as-string", "--options-file", "-optf")


def _refuse_nvcc_flags(cfg: Config, text: str, prefix: tuple[str, ...]) -> None:
    """Refuse nvcc options from the project's configuration that run programs or read or write files."""
    flags = cfg.nvcc_flags
    for i, flag in enumerate(flags):
        why = _nvcc_refusal(flag, flags[i + 1] if i + 1 < len(flags) else None)
        if why is None:
            continue
        file = cfg.source.split(" ")[0]
        line = _line_of(text, (*prefix, "nvcc_flags"), i, len(flags))
        raise UsageError(
            f'{file}:{line}: key "nvcc_flags" holds "{flag}", which {why}; a project may not set nvcc options that '
            f"run programs or read or write files (set them in NVCC_PREPEND_FLAGS instead)."
            if line else
            f'{file}: key "nvcc_flags" holds "{flag}", which {why}; a project may not set nvcc options that '
            f"run programs or read or write files (set them in NVCC_PREPEND_FLAGS instead)."
        )  # fmt: skip


def _nvcc_refusal(flag: str, following: str | None) -> str | None:
    """Why the nvcc option ``flag`` (followed by ``following``) is refused from a project, or None."""
    name = flag.split("=", 1)[0]
    why = _REFUSED_NVCC.get(name)
    if why is not None:
        return why
    for short in _JOINED:  # "-Ipath", "-ofile"
        if name.startswith(short) and name not in ("-odir", "-objtemp", "-optf") and not name.startswith("-include"):
            return _REFUSED_NVCC[short]
    if name.startswith("-l") and name not in ("-lineinfo", "-lto"):
        return _REFUSED_NVCC["-l"]
    if name in ("-Xptxas", "--ptxas-options"):
        value = flag.split("=", 1)[1] if "=" in flag else following or ""
        if any(p.strip().split("=", 1)[0].startswith(_PTXAS_REFUSED) for p in value.split(",")):
            return "names a file for ptxas to read or write"
    return None


def _line_of(text: str, key: tuple[str, ...], index: int, count: int) -> int | None:
    """The line of element ``index`` of the array at ``key`` in the TOML ``text`` (else of the key)."""
    if not text:
        return None
    from ._tomlpos import locate_lines

    try:
        lines = locate_lines(text)
    except Exception:  # noqa: BLE001 - a line number is a courtesy; the message stands without it
        return None
    return lines.get((*key, index)) or lines.get(key)


# keys whose paths must resolve inside the project root; the build cache too (a pull request could
# otherwise point it anywhere): a cache outside the root is the user's choice, made with WIREUP_CACHE
_ROOTED = ("contracts", "kernels", "reports", "evidence", "report", "templates", "cache")


def _refuse_escaping_paths(cfg: Config, where: _Where) -> None:
    """Config paths stay inside the root, so a pull request cannot point the checker at other files."""
    checks = [(k, getattr(cfg, k)) for k in _ROOTED if getattr(cfg, k)]
    checks += [("include", v) for v in cfg.include] + [("reference_paths", v) for v in cfg.reference_paths]
    checks += [("generated", v) for _, v in cfg.generated]
    checks += [("launchers", v) for v in cfg.launchers]  # globs: absolute or ".." would walk outside
    root = cfg.root.resolve()
    for key, rel in checks:
        why = None
        if os.path.isabs(rel):
            why = "is an absolute path"
        elif os.path.normpath(rel).startswith(".."):
            why = 'leaves the project root through ".."'
        else:
            try:
                (root / rel).resolve().relative_to(root)
            except ValueError:
                why = "resolves outside the project root (through a symbolic link)"
            except (RuntimeError, OSError):
                why = "is a symbolic link loop"
        if why:
            raise where.error(cfg.source, key, f'key "{key}" ("{rel}") {why}; paths must stay inside the project root.')


_DISTRIBUTION = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")  # a project name as PEP 508 spells it


def _include_packages(table: dict, where: _Where, source: str) -> tuple[tuple[str, str], ...]:
    """``include_packages = { "nvidia-cutlass" = "cutlass_library/source/include" }``: each key a
    distribution name, each value a relative folder inside the installed distribution (no ".."), so the
    preprocessor reads only what an installer put there, never a path a pull request chose."""
    out = []
    for dist, rel in table.items():
        if not _DISTRIBUTION.fullmatch(dist):
            raise where.error(source, "include_packages", f'key "include_packages" names "{dist}", which is not a Python distribution name (letters, digits, ".", "_" and "-").')
        if not isinstance(rel, str) or not rel.strip():
            raise where.error(source, "include_packages", f'key "include_packages" gives "{dist}" the value {rel!r}; expected a folder inside the installed distribution, e.g. "cutlass_library/source/include".')
        if os.path.isabs(rel) or rel.startswith("\\") or ".." in Path(rel.replace("\\", "/")).parts:
            raise where.error(source, "include_packages", f'key "include_packages" gives "{dist}" the folder "{rel}", which leaves the distribution (absolute or through ".."); expected a folder inside it.')
        out.append((dist, rel))
    return tuple(sorted(out))


def _is_special(path: Path) -> bool:
    """Whether ``path`` exists but is no regular file (a FIFO, a folder, a link loop): refused, not skipped."""
    return os.path.lexists(path) and not path.is_file() and not path.is_dir()


def _read(path: Path, root: Path) -> tuple[dict, str]:
    from .untrusted import CONTRACT_LIMIT, UnreadableFile, read_bytes

    try:
        text = read_bytes(path, root, CONTRACT_LIMIT).decode("utf-8")
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        if line is None and "(at line " in str(exc):
            try:
                line = int(str(exc).rsplit("(at line ", 1)[1].split(",")[0])
            except ValueError:
                line = None
        detail = f"not valid TOML ({exc})."
        raise ConfigError(f"{path.name}: {detail}", path.name, line, "", detail) from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path.name}: expected UTF-8 text, found the byte 0x{exc.object[exc.start:exc.start + 1].hex()} at offset {exc.start}; save the file as UTF-8.") from None
    except RecursionError:
        raise UsageError(f"{path.name}: not valid TOML (arrays or tables are nested too deeply).") from None
    except UnreadableFile as exc:
        raise UsageError(f"{path.name}: this configuration file {exc}; expected a regular file inside the project root.") from None
    except ValueError:  # tomllib's int() of an integer of more than 4300 digits
        raise UsageError(f"{path.name}: not valid TOML (an integer of thousands of digits).") from None
    except OSError as exc:
        detail = f"cannot be read ({exc.strerror})."
        raise ConfigError(f"{path}: {detail}", path.name, None, "", detail) from None


def with_overrides(cfg: Config, **kw: object) -> Config:
    """A copy with command-line overrides applied (None values are ignored)."""
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})



