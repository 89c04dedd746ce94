"""The check cache by value (audit.check_cache): a result reused for texts whose values did not change.

A contract-only result is reused when every contract file's parsed value is the one it was computed
from but for doc strings, after its probes and every line it cited are asked again. These tests hold it
to a full check: docs change no finding of any contract-only rule (on the shipped contracts, a synthetic
project and every fixture); comments, docs and appended lines are hits that equal a full check; a line
that moved (a finding's or one a message cites), a changed value, a doc of another type, a doc where
none is read, a new or removed file are misses that equal a full check; damaged or forged index and
entries are ignored.
"""

from __future__ import annotations

import dataclasses
import json
import marshal
import re
import shutil
from pathlib import Path

import pytest

from audit import check_cache, load
from audit.api import check
from audit.check_cache import DOC_MARKER, values_digest
from audit.errors import ContractError
from audit.model import SourceFile
from audit.rules import select_rules

from test_check_cache import (  # noqa: F401  (the synthetic fixture)
    CONTRACT_ONLY_FIXTURES,
    REPO,
    RULES,
    SEL,
    NoLoad,
    config,
    copy_of,
    outputs,
    synthetic,
    uncached,
)

_DOC = re.compile(r'(\bdoc\s*=\s*)"(?:[^"\\\n]|\\.)*"')


def change_docs(root: Path, text: str = "another doc") -> int:
    """Give every one-line basic-string ``doc`` of the contracts under ``root`` the text ``text``; how many."""
    n = 0
    for f in sorted((root / "contracts").rglob("*.toml")):
        old = f.read_text(encoding="utf-8")
        new, k = _DOC.subn(lambda m: m.group(1) + json.dumps(text), old)
        if k:
            f.write_text(new, encoding="utf-8")
            n += k
    return n


def model_built(cfg, monkeypatch) -> tuple[bool, object]:
    """Check ``cfg`` statically: whether the model was built (the cache missed), and the result."""
    built = []
    real = load._load_contracts
    monkeypatch.setattr(load, "_load_contracts", lambda *a, **k: built.append(1) or real(*a, **k))
    try:
        result = check(config=cfg, select=SEL)
    finally:
        monkeypatch.setattr(load, "_load_contracts", real)
    return bool(built), result


def project(src: Path, tmp_path: Path) -> tuple[Path, object]:
    root = copy_of(src, tmp_path)
    return root, config(root, tmp_path / "cache")


# -- docs are read by no contract-only rule -----------------------------------------------------------


def assert_docs_change_nothing(root: Path, cfg) -> None:
    before = outputs(uncached(cfg))
    assert change_docs(root, 'a "doc" with <b>markup</b> and a line\\n break') > 0
    assert outputs(uncached(cfg)) == before


def test_docs_change_no_finding_on_the_shipped_contracts(tmp_path: Path):
    assert_docs_change_nothing(*project(REPO, tmp_path))


def test_docs_change_no_finding_on_a_synthetic_project(synthetic: Path, tmp_path: Path):
    f = synthetic / "contracts" / "modules" / "m00002.toml"
    f.write_text(f.read_text().replace('dtype = "f32"', 'dtype = "f16"', 1))  # with findings
    assert_docs_change_nothing(synthetic, config(synthetic, tmp_path / "cache"))


@pytest.mark.parametrize("rule_id", CONTRACT_ONLY_FIXTURES)
def test_docs_change_no_finding_of_any_contract_only_fixture(rule_id: str, tmp_path: Path):
    root, cfg = project(RULES / rule_id / "bad", tmp_path)
    before = outputs(uncached(cfg))
    change_docs(root)
    assert outputs(uncached(cfg)) == before


# -- hits ---------------------------------------------------------------------------------------------


def test_a_doc_edit_is_answered_without_building_the_model(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    f = synthetic / "contracts" / "modules" / "m00004.toml"
    f.write_text(f.read_text().replace('doc = "', 'doc = "edited: ', 3))
    (synthetic / "contracts" / "dims.toml").write_text((synthetic / "contracts" / "dims.toml").read_text().replace("batch rows", "rows of a batch"))
    with monkeypatch.context() as m:
        NoLoad(m)
        result = check(config=cfg, select=SEL)
    assert outputs(result) == outputs(uncached(cfg))
    with monkeypatch.context() as m:  # and the next check of the same texts reads the entry by text
        NoLoad(m)
        m.setattr(load, "_parse_toml", lambda text: pytest.fail("parsed a file although its text is cached"))
        assert check(config=cfg, select=SEL) == result


@pytest.mark.parametrize("rule_id", CONTRACT_ONLY_FIXTURES)
def test_every_fixture_after_comments_and_doc_edits_equals_a_full_check(rule_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root, cfg = project(RULES / rule_id / "bad", tmp_path)
    check(config=cfg, select=SEL)
    files = sorted((root / "contracts").rglob("*.toml"))
    for f in files:  # appended lines move no line a result cites: a hit
        f.write_text(f.read_text() + "\n# a comment\n")
    change_docs(root, "edited")
    built, result = model_built(cfg, monkeypatch)
    assert not built
    assert outputs(result) == outputs(uncached(cfg))
    for f in files:  # a line inserted at the top moves every line a finding cites: a miss where there is one
        f.write_text("# the top\n" + f.read_text())
    built, result = model_built(cfg, monkeypatch)
    assert built == any(x.line for x in [*result.findings, *(s for s, _ in result.suppressed)])
    assert outputs(result) == outputs(uncached(cfg))


def test_the_shipped_contracts_after_comments_and_doc_edits_equal_a_full_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root, cfg = project(REPO, tmp_path)
    check(config=cfg, select=SEL)
    for f in sorted((root / "contracts").rglob("*.toml")):
        f.write_text(f.read_text() + "\n# a comment\n\n")
    assert change_docs(root, "edited") > 0
    built, result = model_built(cfg, monkeypatch)
    assert not built
    assert outputs(result) == outputs(uncached(cfg))


def test_a_value_edit_reverted_is_answered_from_the_first_entry(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = config(synthetic, tmp_path / "cache")
    dims = synthetic / "contracts" / "dims.toml"
    original = dims.read_text()
    first = check(config=cfg, select=SEL)
    dims.write_text(original.replace("max = 65536", "max = 65535"))
    assert model_built(cfg, monkeypatch)[0]
    dims.write_text(original + "# back as it was\n")
    built, result = model_built(cfg, monkeypatch)
    assert not built and result == first


# -- misses -------------------------------------------------------------------------------------------


def test_a_line_a_message_cites_that_moved_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root, cfg = project(RULES / "DUPLICATE_NAME" / "bad", tmp_path)
    first = root / "contracts" / "aa.toml"  # sorts first: the first declaration of "y" the others cite
    first.write_text('[[buffer]]\nname = "y"\ndtype = "f32"\nshape = ["B"]\nkind = "input"\n')
    before = check(config=cfg, select=SEL)
    assert any("contracts/aa.toml:1." in f.message for f in before.findings)
    first.write_text("# moved down by two lines\n\n" + first.read_text())
    built, after = model_built(cfg, monkeypatch)
    assert built
    assert any("contracts/aa.toml:3." in f.message for f in after.findings)
    assert [(f.file, f.line) for f in after.findings] == [(f.file, f.line) for f in before.findings]
    assert outputs(after) == outputs(uncached(cfg))


EDITS = {
    "a value": lambda t: t.replace("max = 65536", "max = 65535"),
    "a doc of another type": lambda t: t.replace('doc = "batch rows"', "doc = 5"),
    "a doc removed": lambda t: t.replace(', doc = "batch rows"', ""),
    "a doc where none is read": lambda t: t + '\n[isv.doc]\ndoc = "x"\n',
    "a key added": lambda t: t.replace('doc = "batch rows"', 'doc = "batch rows", test = [3]'),
    "not TOML": lambda t: t + "\n[[[\n",
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_of_what_a_rule_may_read_is_a_miss(edit: str, synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    dims = synthetic / "contracts" / "dims.toml"
    dims.write_text(EDITS[edit](dims.read_text()))
    try:
        reference = outputs(uncached(cfg))
    except ContractError as exc:  # a load error, which the check reports as ever
        with pytest.raises(ContractError) as caught:
            model_built(cfg, monkeypatch)
        assert str(caught.value) == str(exc)
    else:
        built, result = model_built(cfg, monkeypatch)
        assert built
        assert outputs(result) == reference


def comment_everywhere(root: Path) -> None:
    for f in sorted((root / "contracts").rglob("*.toml")):
        f.write_text(f.read_text() + "# a comment\n")


def test_a_removed_source_is_seen_through_its_probe_by_value(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    comment_everywhere(synthetic)
    sorted((synthetic / "kernels").glob("*.cu"))[0].unlink()
    built, result = model_built(cfg, monkeypatch)
    assert built and "SOURCE_MISSING" in {f.rule for f in result.findings}
    assert outputs(result) == outputs(uncached(cfg))


def test_configuration_options_rules_and_code_are_in_the_key_by_value(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    comment_everywhere(synthetic)
    rules = select_rules(SEL)
    assert check_cache.CheckCache.open(dataclasses.replace(cfg, include=("elsewhere",)), rules, {}).lookup() is None
    assert check_cache.CheckCache.open(cfg, rules, {"escalate": ("DEAD_KERNEL",)}).lookup() is None
    assert check_cache.CheckCache.open(cfg, rules[1:], {}).lookup() is None
    with monkeypatch.context() as m:
        m.setattr(check_cache, "code_version", lambda: "another version of wireup")
        assert check_cache.CheckCache.open(cfg, rules, {}).lookup() is None
    assert check_cache.CheckCache.open(cfg, rules, {}).lookup() is not None  # the same, by value


def test_a_new_or_removed_file_is_a_miss(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    extra = synthetic / "contracts" / "extra.toml"
    extra.write_text("# nothing but a comment\n")
    built, result = model_built(cfg, monkeypatch)
    assert built and outputs(result) == outputs(uncached(cfg))
    extra.unlink()
    (synthetic / "contracts" / "modules" / "m00001.toml").unlink()
    built, result = model_built(cfg, monkeypatch)
    assert built and outputs(result) == outputs(uncached(cfg))


# -- damaged and forged -------------------------------------------------------------------------------


def _index(cache: Path) -> Path:
    (path,) = (cache / "check" / "values").glob("index-*.json")
    return path


def _values_entry(cache: Path) -> list[Path]:
    return [p for p in (cache / "check" / "values").glob("*.json") if not p.name.startswith("index-")]


def _forge_positions(p: Path) -> None:
    data = json.loads(p.read_text())
    for versions in data["files"].values():
        for v in versions:
            v[2] = [["dims", "B", "max"]]  # no table with a doc
    p.write_text(json.dumps(data))


def _forge_types(p: Path) -> None:
    data = json.loads(p.read_text())
    next(iter(data["files"].values()))[0][2] = [[1.5]]
    p.write_text(json.dumps(data))


def _forge_lines(p: Path) -> None:
    data = json.loads(p.read_text())
    data["lines"] = [["contracts/dims.toml", "0" * 64, [[["dims", "B"], "two"]]]]
    p.write_text(json.dumps(data))


INDEX_DAMAGE = {
    "not json": lambda p: p.write_bytes(b"\x00 garbage"),
    "another format": lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "format": "wireup-check-values-0"})),
    "positions of no doc": _forge_positions,
    "a position of the wrong type": _forge_types,
    "a folder": lambda p: (p.unlink(), p.mkdir()),
}
ENTRY_DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:50]),
    "another key": lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "key": "0" * 64})),
    "lines of the wrong type": _forge_lines,
    "no lines": lambda p: p.write_text(json.dumps({k: v for k, v in json.loads(p.read_text()).items() if k != "lines"})),
}


@pytest.mark.parametrize("damage", sorted(INDEX_DAMAGE) + sorted(ENTRY_DAMAGE))
def test_a_damaged_or_forged_index_or_entry_is_ignored(damage: str, synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = config(synthetic, tmp_path / "cache")
    f = synthetic / "contracts" / "modules" / "m00002.toml"
    f.write_text(f.read_text().replace('dtype = "f32"', 'dtype = "f16"', 1))  # with findings
    check(config=cfg, select=SEL)
    if damage in INDEX_DAMAGE:
        INDEX_DAMAGE[damage](_index(tmp_path / "cache"))
    else:
        for p in _values_entry(tmp_path / "cache"):
            ENTRY_DAMAGE[damage](p)
    f.write_text("# a comment\n" + f.read_text().replace('doc = "', 'doc = "edited ', 1))
    built, result = model_built(cfg, monkeypatch)
    assert built
    assert outputs(result) == outputs(uncached(cfg))


# -- the pieces ---------------------------------------------------------------------------------------


def test_value_digests_differ_but_for_docs():
    base = {"kernel": [{"name": "k", "doc": "one", "params": [{"name": "x", "doc": "p"}]}], "dims": {"B": {"value": 2, "doc": "d"}}}
    positions = [("kernel", 0), ("kernel", 0, "params", 0), ("dims", "B")]
    d = values_digest(base, positions)
    assert d is not None
    other = json.loads(json.dumps(base))
    other["kernel"][0]["doc"], other["dims"]["B"]["doc"] = "two", ""
    assert values_digest(other, positions) == d
    assert base["kernel"][0]["doc"] == "one"  # the value itself is not changed
    changed = json.loads(json.dumps(base))
    changed["dims"]["B"]["value"] = 3
    assert values_digest(changed, positions) != d
    changed = json.loads(json.dumps(base))
    changed["kernel"][0]["doc"] = 1
    assert values_digest(changed, positions) is None
    del changed["kernel"][0]["doc"]
    assert values_digest(changed, positions) is None
    assert values_digest(base, [("kernel", 1)]) is None
    assert values_digest(base, [("dims", "B", "value")]) is None
    assert values_digest(base, positions[:1]) != d  # a doc not replaced is part of the value
    assert values_digest(base, positions + positions[:1]) is None  # a position given twice holds no doc the second time


def test_doc_positions_are_the_tables_whose_doc_the_load_read(tmp_path: Path):
    root, cfg = project(RULES / "DUPLICATE_NAME" / "bad", tmp_path)
    from audit.load import read_contract_files

    read = read_contract_files(cfg.contracts_dir, root.resolve())
    cs = load.load_contracts(cfg.contracts_dir, root, read=read)
    positions = check_cache.doc_positions(cs, set(read.texts), read.values)
    assert positions["contracts/buffers.toml"][:3] == [("dims", "B"), ("dims", "D"), ("dims", "H")]  # a fixed dim points at its value
    assert ("schedule", 0) in positions["contracts/schedules.toml"]
    for rel, keys in positions.items():
        assert len(set(keys)) == len(keys)
        for key in keys:
            assert type(check_cache._at(read.values[rel], key)["doc"]) is str


def test_value_digests_depend_on_values_not_on_shared_objects():
    s = "a string long enough not to be interned, " * 3
    shared = {"a": [s, s], "b": {"c": s}}
    distinct = {"a": [s[:], "".join(s)], "b": {"c": str(s.encode().decode())}}
    assert values_digest(shared, []) == values_digest(distinct, [])
    assert marshal.loads(marshal.dumps({"x": DOC_MARKER}, 2)) == {"x": DOC_MARKER}
    assert values_digest({"a": 1}, []) != values_digest({"a": True}, [])
    assert values_digest({"a": 1.0}, []) != values_digest({"a": 1}, [])


def test_a_source_file_records_the_lines_asked():
    src = SourceFile("contracts/a.toml", '[[kernel]]\nname = "k"\n\n[[kernel]]\nname = "j"\n')
    assert src.line(("kernel", 1)) == 4
    assert src.line(("kernel", 0, "name")) == 2
    assert src.asked == {("kernel", 1): 4, ("kernel", 0, "name"): 2}


def test_the_index_and_entries_lie_in_the_cache(synthetic: Path, tmp_path: Path):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    index = json.loads(_index(tmp_path / "cache").read_text())
    assert index["format"] == check_cache.INDEX_FORMAT
    assert sorted(index["files"]) == sorted(p.relative_to(synthetic).as_posix() for p in (synthetic / "contracts").rglob("*.toml"))
    assert len(_values_entry(tmp_path / "cache")) == 1
    shutil.rmtree(tmp_path / "cache" / "check" / "values")
    check(config=cfg, select=SEL)  # the entry by text answers; the index is not needed
