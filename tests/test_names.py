"""Names compared exactly as written: full-match identifier checks and Unicode look-alikes.

The fixture pairs ``tests/data/rules/NAME_NOT_IDENTIFIER`` and ``NAME_NOT_NORMALIZED`` pin the two rules'
messages; these tests cover what a pair cannot: the parser keeping names as written, the message variants
of declared names, and ``wireup layout generate`` refusing a slot name that would not compile.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.api import check
from audit.cli import main
from audit.config import Config
from audit.dims import ExprError, parse_expr
from audit.load import load_contracts
from audit.names import is_identifier, nfkc_change, shown, why_not_identifier

RULES = Path(__file__).resolve().parent / "data" / "rules"


def test_identifiers_are_full_matches() -> None:
    assert is_identifier("ROW_SCALE") and is_identifier("_x1")
    for name, why in (
        ("ROW_SCALE\n", "it ends in a newline"),
        ("", "it is empty"),
        ("1ROW", "it starts with a digit"),
        ("ROW-SCALE", 'it contains "-"'),
        ("ROW SCALE", "it contains a space"),
        ("ROWＳ", "it ends in U+FF33 FULLWIDTH LATIN CAPITAL LETTER S"),
    ):
        assert not is_identifier(name)
        assert why_not_identifier(name) == why
    assert shown('A\n"\\') == 'A\\n\\"\\\\'


def test_nfkc_change_reports_only_what_normalisation_changes() -> None:
    assert nfkc_change("B") is None and nfkc_change("é") is None  # NFC-composed é stays é
    assert nfkc_change("ℬ") == "B" and nfkc_change("Ｄ") == "D" and nfkc_change("ﬁ") == "fi"


def test_dim_expressions_keep_names_as_written() -> None:
    # Python's parser would read "ℬ" as B (identifiers are NFKC-normalised): the contract said ℬ
    e = parse_expr("ceil_div(ℬ, 64) + slot(ＳLOT) * B")
    assert e.names == frozenset({"ℬ", "B"}) and e.slots == frozenset({"ＳLOT"})
    assert e.evaluate({"ℬ": 128, "B": 1}, {"ＳLOT": 3}) == 5
    with pytest.raises(KeyError):
        e.evaluate({"B": 128}, {"ＳLOT": 3})
    with pytest.raises(ExprError, match=r'calls "ｍax", which Unicode normalisation would turn into "max"'):
        parse_expr("ｍax(B, 1)")
    multi = parse_expr("(ℬ\n + Ｄ)")
    assert multi.names == frozenset({"ℬ", "Ｄ"})


def variant(rule_id: str, rel: str, old: str, new: str, *select: str) -> list[str]:
    """Finding lines on ``rule_id``'s good set with one edit (``select`` defaults to the rule)."""
    root = RULES / rule_id / "good"
    texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in (root / "contracts").glob("*.toml")}
    assert texts[rel].count(old) == 1
    texts[rel] = texts[rel].replace(old, new)
    cs = load_contracts(root / "contracts", root, texts=texts)
    result = check(root, select=list(select or [rule_id]), config=Config(root=root.resolve()), contracts=cs)
    return [f"{f.location}: {f.rule} {f.message}" for f in result.findings]


def test_a_look_alike_is_not_silently_the_dim_it_resembles() -> None:
    lines = variant("NAME_NOT_NORMALIZED", "contracts/kernels.toml", '{ name = "y", dtype = "f32", shape = ["B"]', '{ name = "y", dtype = "f32", shape = ["ℬ"]', "NAME_NOT_NORMALIZED", "UNKNOWN_DIM")
    assert sorted(lines) == [
        'contracts/kernels.toml:12: NAME_NOT_NORMALIZED Kernel "make_label" parameter "y" shape uses "ℬ", written with U+212C SCRIPT '
        'CAPITAL B, which Unicode NFKC normalisation turns into "B"; names are compared exactly as written, so it is not the name "B".',
        'contracts/kernels.toml:12: UNKNOWN_DIM Kernel "make_label" parameter "y" shape uses "ℬ", which is not a declared dim.',
    ]


def test_a_declared_look_alike_name_is_a_finding_and_not_an_identifier_finding_too() -> None:
    old = 'D = { value = 64, doc = "input width" }\n'
    lines = variant("NAME_NOT_NORMALIZED", "contracts/buffers.toml", old, old + '"Ｄ" = { value = 8 }\n', "NAME_NOT_NORMALIZED", "NAME_NOT_IDENTIFIER", "DUPLICATE_NAME")
    assert lines == [
        'contracts/buffers.toml:5: NAME_NOT_NORMALIZED Dim "Ｄ" is written with U+FF24 FULLWIDTH LATIN CAPITAL LETTER D, which Unicode '
        'NFKC normalisation turns into "D"; names are compared exactly as written, so it is not the name "D".'
    ]


def test_identifier_rule_names_what_breaks_the_name() -> None:
    lines = variant("NAME_NOT_IDENTIFIER", "contracts/kernels.toml", '{ name = "label", dtype = "f32", shape = ["B"], role = "out" }', '{ name = "label-1", dtype = "f32", shape = ["B"], role = "out" }')
    assert lines == [
        'contracts/kernels.toml:13: NAME_NOT_IDENTIFIER Kernel "make_label" parameter "label-1" is not an identifier (it contains "-"); '
        "expected ASCII letters, digits and underscores, not starting with a digit."
    ]


def test_layout_generate_refuses_a_slot_name_that_would_not_compile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "p"
    shutil.copytree(RULES / "NAME_NOT_IDENTIFIER" / "bad", root)
    (root / "wireup.toml").write_text('generated = { python = "gen/isv_layout.py" }\n')
    rc = main(["layout", "generate", "--root", str(root)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err == (
        'error: contracts/isv.toml:26: slot name "RESERVED\\n" cannot become the constant RESERVED\\n_INDEX (it ends in a newline); '
        "expected ASCII letters, digits and underscores, not starting with a digit.\n"
    )
    assert not (root / "gen").exists()


def test_architecture_is_a_full_match(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["build", "--root", str(RULES / "NAME_NOT_IDENTIFIER" / "good"), "--arch", "sm_90\n"])
    _, err = capsys.readouterr()
    assert rc == 2 and err.startswith('error: Architecture "sm_90\n" is not a CUDA SM architecture')


def test_a_look_alike_spelled_with_a_toml_escape_in_an_ascii_file_is_found() -> None:
    # the rule skips projects whose files are all ASCII; a \u escape spells a look-alike in ASCII
    lines = variant("NAME_NOT_NORMALIZED", "contracts/kernels.toml", '{ name = "y", dtype = "f32", shape = ["B"]', '{ name = "y", dtype = "f32", shape = ["\\u212C"]')
    assert lines == [
        'contracts/kernels.toml:12: NAME_NOT_NORMALIZED Kernel "make_label" parameter "y" shape uses "ℬ", written with U+212C SCRIPT '
        'CAPITAL B, which Unicode NFKC normalisation turns into "B"; names are compared exactly as written, so it is not the name "B".'
    ]
