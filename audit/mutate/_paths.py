"""Where mutants are written, shared by the kernel and the header mutants' builds (no import circle)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic


def mutant_dir(cfg: Any, kernel: str) -> Path:
    """Where the mutants of ``kernel`` are written (inside the build cache folder)."""
    return cfg.path(cfg.cache) / "mutate" / kernel


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    write_text_atomic(path, text)
