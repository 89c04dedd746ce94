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

import tomllib
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
    if wt.is_file():
        table, source = _read(wt), "wireup.toml"
        tool = table.get("tool")
        if isinstance(tool, dict) and "wireup" in tool:
            table, source, where = tool["wireup"], "wireup.toml [tool.wireup]", _Where(wt, ("tool", "wireup"))
    elif pp.is_file():
        data = _read(pp)
        tool = data.get("tool")
        if isinstance(tool, dict) and "wireup" in tool:
            table, source, where = tool["wireup"], "pyproject.toml [tool.wireup]", _Where(pp, ("tool", "wireup"))
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
        updates[key] = value
    cfg = replace(cfg, **updates)
    _refuse_escaping_paths(cfg, where)
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


# keys whose paths must resolve inside the project root; "cache" (a build output) may live anywhere
_ROOTED = ("contracts", "kernels", "reports", "evidence", "report", "templates")


def _refuse_escaping_paths(cfg: Config, where: _Where) -> None:
    """Config paths stay inside the root, so a pull request cannot point the checker at other files."""
    import os

    checks = [(k, getattr(cfg, k)) for k in _ROOTED if getattr(cfg, k)]
    checks += [("include", v) for v in cfg.include] + [("reference_paths", v) for v in cfg.reference_paths]
    checks += [("generated", v) for _, v in cfg.generated]
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
        if why:
            raise where.error(cfg.source, key, f'key "{key}" ("{rel}") {why}; paths must stay inside the project root.')


def _read(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        if line is None and "(at line " in str(exc):
            try:
                line = int(str(exc).rsplit("(at line ", 1)[1].split(",")[0])
            except ValueError:
                line = None
        detail = f"not valid TOML ({exc})."
        raise ConfigError(f"{path.name}: {detail}", path.name, line, "", detail) from None
    except OSError as exc:
        detail = f"cannot be read ({exc.strerror})."
        raise ConfigError(f"{path}: {detail}", path.name, None, "", detail) from None


def with_overrides(cfg: Config, **kw: object) -> Config:
    """A copy with command-line overrides applied (None values are ignored)."""
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})



