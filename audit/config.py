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

from .errors import UsageError

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
    if wt.is_file():
        table, source = _read(wt), "wireup.toml"
        tool = table.get("tool")
        if isinstance(tool, dict) and "wireup" in tool:
            table, source = tool["wireup"], "wireup.toml [tool.wireup]"
    elif pp.is_file():
        data = _read(pp)
        tool = data.get("tool")
        if isinstance(tool, dict) and "wireup" in tool:
            table, source = tool["wireup"], "pyproject.toml [tool.wireup]"
    if not isinstance(table, dict):
        raise UsageError(f"{source}: [tool.wireup] must be a table of settings, found {type(table).__name__} {table!r}.")
    cfg = Config(root=root, source=source)
    updates: dict = {}
    for key, value in table.items():
        want = _KEYS.get(key)
        if want is None:
            valid = ", ".join(f'"{k}"' for k in _KEYS)
            raise UsageError(f'{source}: unknown key "{key}"; valid keys are {valid}.')
        if not isinstance(value, want):
            raise UsageError(
                f'{source}: key "{key}" must be a {want.__name__}, found {type(value).__name__} {value!r}.'
            )
        if want is list:
            if not all(isinstance(v, str) for v in value):
                raise UsageError(f'{source}: key "{key}" must be a list of strings.')
            value = tuple(value)
        if key == "generated":
            value = tuple((str(k), str(v)) for k, v in value.items())
        updates[key] = value
    cfg = replace(cfg, **updates)
    _refuse_escaping_paths(cfg)
    return cfg


# keys whose paths must resolve inside the project root; "cache" (a build output) may live anywhere
_ROOTED = ("contracts", "kernels", "reports", "evidence", "report", "templates")


def _refuse_escaping_paths(cfg: Config) -> None:
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
            except (RuntimeError, OSError):
                why = "is a symbolic link loop"
        if why:
            raise UsageError(f'{cfg.source}: key "{key}" ("{rel}") {why}; paths must stay inside the project root.')


def _read(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path.name}: not valid TOML ({exc}).") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror}).") from None


def with_overrides(cfg: Config, **kw: object) -> Config:
    """A copy with command-line overrides applied (None values are ignored)."""
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})



