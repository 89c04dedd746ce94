"""The default compiled TOML parser (tomli, a dependency) reads every contract exactly as tomllib does:
same values, same errors (tomllib's exception and message), same nesting limit behaviour. rtoml, where
installed, is switched off here so that tomli is the parser under test."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

import pytest

from audit import load

REPO = Path(__file__).resolve().parents[1]
TEXTS = sorted(p for p in REPO.glob("**/*.toml") if ".venv" not in p.parts and ".wireup-cache" not in p.parts)
CONTRACTS = sorted((REPO / "contracts").rglob("*.toml"))


@pytest.fixture(autouse=True)
def tomli_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "_rtoml", None)


def outcome(parse, text: str):
    """The value, or (exception class, message) of an error."""
    try:
        return parse(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        return type(exc), str(exc)


def test_tomli_is_the_default_parser_with_the_lowered_nesting_limit():
    assert load._tomli is not None, "tomli (a default dependency) is not importable"
    tomli, reads_1_1 = load._tomli
    assert tomli._parser.MAX_INLINE_NESTING == load._TOMLI_NESTING == 200
    assert not reads_1_1  # the pinned releases read TOML 1.0, like tomllib


def test_the_parse_goes_through_tomli(monkeypatch: pytest.MonkeyPatch):
    tomli, _ = load._tomli
    calls = []
    monkeypatch.setattr(load, "_tomli", (type("T", (), {"loads": staticmethod(lambda t: calls.append(t) or {"x": 1})}), False))
    assert load._parse_toml("a = 1") == {"x": 1} and calls == ["a = 1"]


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_tomli_and_tomllib_agree_on_every_toml_file_of_the_repository(path: Path):
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        pytest.skip("not UTF-8: the loader reports it before parsing")
    assert repr(outcome(load._parse_toml, text)) == repr(outcome(tomllib.loads, text))  # repr: nan == nan


EDGE = [
    "a = {x = 1,}", 'a = "\\e"', 'a = "\\x41"', "a = 07:32", "a = 07:32:00", "a = 1979-05-27T07:32:00-08:00",
    "a = {x = 1,\ny = 2}", "a = 1\na = 2", "x = [1, 2", "a.b = 1\n[a]\nc = 1", "a = 1e400", "a = nan", "a = -inf",
    "a = 0x_1", "a = 99999999999999999999", 'a = """\r\nx\r\n"""', "a = 'x'\r\n", "a = 1\r", "\ufeffa = 1",
    'a = "\\u00e9\\U0001F600"', "[[a]]\nb = 1\n[a]\n", "a = [1, 'x']", "'quoted key' = 1\n\"a.b\".c = 2",
    "a = 1 # comment\x7f", "a = \"tab\there\"", "a = 1_000", "a = 01", "a = +0.0e-0", "a = true\nb = false",
]


@pytest.mark.parametrize("text", EDGE)
def test_tomli_and_tomllib_agree_on_edge_cases(text: str):
    assert repr(outcome(load._parse_toml, text)) == repr(outcome(tomllib.loads, text))  # repr: nan == nan


@pytest.mark.parametrize("depth", [150, 199, 200, 201, 250, 300, 330, 400, 600, 1100])
@pytest.mark.parametrize("kind", ["array", "table", "mixed"])
def test_deep_nesting_is_decided_as_tomllib_decides(depth: int, kind: str):
    opened = {"array": "[" * depth, "table": "{b = " * depth, "mixed": "[{b = " * (depth // 2)}[kind]
    closed = {"array": "]" * depth, "table": "}" * depth, "mixed": "}]" * (depth // 2)}[kind]
    text = f"a = {opened}1{closed}\n"
    want = outcome(tomllib.loads, text)
    got = outcome(load._parse_toml, text)
    assert got == want


def test_random_mutations_of_the_contracts_read_alike():
    """Edits of one to three characters of every shipped contract (seeded): values or errors agree."""
    rng = random.Random(20261204)
    alphabet = "[]{}=,.\"'#\n \\xe0123456789abcdefTZ:+-_"
    texts = [p.read_text() for p in CONTRACTS]
    for _ in range(600):
        text = rng.choice(texts)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text))
            op = rng.random()
            if op < 0.4:
                text = text[:i] + text[i + 1 :]
            elif op < 0.8:
                text = text[:i] + rng.choice(alphabet) + text[i:]
            else:
                text = text[:i] + rng.choice(alphabet) + text[i + 1 :]
        assert repr(outcome(load._parse_toml, text)) == repr(outcome(tomllib.loads, text)), text


def test_a_tomli_that_reads_toml_1_1_is_used_only_for_texts_both_versions_read_alike(monkeypatch: pytest.MonkeyPatch):
    seen = []

    class Newer:
        @staticmethod
        def loads(text: str) -> dict:
            seen.append(text)
            return tomllib.loads(text)

    monkeypatch.setattr(load, "_tomli", (Newer, True))
    assert load._parse_toml("a = 1\n") == {"a": 1}
    assert outcome(load._parse_toml, "a = {x = 1,}") == outcome(tomllib.loads, "a = {x = 1,}")
    assert seen == ["a = 1\n"]  # the trailing comma (TOML 1.1 only) went to tomllib alone


def test_a_tomli_imported_with_another_nesting_limit_is_not_used(monkeypatch: pytest.MonkeyPatch):
    import sys

    import tomli._parser

    monkeypatch.setattr(tomli._parser, "MAX_INLINE_NESTING", 1000, raising=False)
    assert "tomli._parser" in sys.modules
    assert load._import_tomli() is None
