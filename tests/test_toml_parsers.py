"""The optional rtoml fast path reads every contract exactly as tomllib does (audit/load.py screens texts
where the two TOML versions differ and lets tomllib decide everything else)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from audit import load

REPO = Path(__file__).resolve().parents[1]
TEXTS = sorted(p for p in REPO.glob("**/*.toml") if ".venv" not in p.parts and ".wireup-cache" not in p.parts)

rtoml = pytest.importorskip("rtoml", reason="rtoml is not installed (the optional `fast` extra)")


def test_the_fast_path_is_active_when_rtoml_is_installed() -> None:
    assert load._rtoml is not None


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_both_parsers_agree_on_every_toml_file_of_the_repository(path: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        pytest.skip("not UTF-8: the loader reports it before parsing")
    try:
        want = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            load._parse_toml(text)
        return
    got = load._parse_toml(text)
    assert got == want
