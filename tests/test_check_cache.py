"""The incremental check (audit.check_cache, audit.toml_cache) gives exactly what a full check gives.

A cached result equals an uncached one in every output format, on the shipped contracts, on a synthetic
project and on every fixture of a contract-only rule; any change to what it depends on (a contract file,
the configuration, wireup's code, a probed source or header) is a miss; damaged or forged entries are
ignored; the contract-only rules read no project file except through probes.
"""

from __future__ import annotations

import builtins
import dataclasses
import io
import json
import marshal
import os
import shutil
import sys
from pathlib import Path

import pytest

from audit import api, check_cache, load, toml_cache
from audit.api import check, run_check
from audit.config import Config, load_config
from audit.load import load_contracts
from audit.printers import FORMATS, render
from audit.rules import CONTRACT_ONLY, REGISTRY, CheckContext, select_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "tests" / "data" / "rules"
sys.path.insert(0, str(REPO / "benchmarks"))
from synth_contracts import write_project  # noqa: E402

STATIC = ",".join(CONTRACT_ONLY)
SEL = list(CONTRACT_ONLY)
CONTRACT_ONLY_FIXTURES = sorted(
    p.name for p in RULES.iterdir() if p.is_dir() and p.name in REGISTRY and REGISTRY[p.name].category in CONTRACT_ONLY
)


def config(root: Path, cache: Path) -> Config:
    """The project's configuration with its cache in ``cache`` (a folder of the test)."""
    return dataclasses.replace(load_config(root), cache=str(cache))


def uncached(cfg: Config, select: str = STATIC, options: dict | None = None):
    """The result of a full check: contracts parsed from their text, every rule run."""
    cs = load_contracts(cfg.contracts_dir, cfg.root)
    return run_check(config=cfg, select=select.split(","), options=options, contracts=cs).result


def outputs(result) -> dict[str, str]:
    return {fmt: render(result, fmt) for fmt in FORMATS}


def entries(cache: Path, kind: str) -> list[Path]:
    return sorted((cache / kind).glob("*.json" if kind == "check" else "*.bin")) if (cache / kind).is_dir() else []


class NoLoad:
    """Makes building the model fail, to prove a check was answered from the cache."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        monkeypatch.setattr(api, "load_contracts", self)

    def __call__(self, *a, **k):
        raise AssertionError("the model was built although the check cache holds the result")


def copy_of(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "project"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".wireup-cache", ".git", ".venv", "__pycache__"))
    return dst


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    root = tmp_path / "synth"
    write_project(100, root)
    return root


# -- cached equals uncached ---------------------------------------------------------------------------


def assert_second_check_is_cached_and_equal(cfg: Config, monkeypatch: pytest.MonkeyPatch, select: str = STATIC) -> None:
    reference = outputs(uncached(cfg, select))
    first = check(config=cfg, select=select.split(","))
    assert outputs(first) == reference
    assert len(entries(Path(cfg.cache), "check")) == 1
    with monkeypatch.context() as m:
        NoLoad(m)
        second = check(config=cfg, select=select.split(","))
    assert outputs(second) == reference
    assert second == first


def test_shipped_contracts_cached_equal_uncached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert_second_check_is_cached_and_equal(config(REPO, tmp_path / "cache"), monkeypatch)


def test_synthetic_project_cached_equal_uncached(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert_second_check_is_cached_and_equal(config(synthetic, tmp_path / "cache"), monkeypatch)


@pytest.mark.parametrize("rule_id", CONTRACT_ONLY_FIXTURES)
def test_every_contract_only_fixture_cached_equal_uncached(rule_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = copy_of(RULES / rule_id / "bad", tmp_path)
    cfg = config(root, tmp_path / "cache")
    assert uncached(cfg).findings, "a bad fixture has findings"
    assert_second_check_is_cached_and_equal(cfg, monkeypatch)


def test_the_cli_prints_the_same_from_the_cache(synthetic: Path, capsys: pytest.CaptureFixture[str]):
    from audit.cli import main

    (synthetic / "contracts" / "modules" / "m00000.toml").write_text(
        (synthetic / "contracts" / "modules" / "m00000.toml").read_text().replace('dtype = "f32"', 'dtype = "f16"', 1)
    )
    runs = []
    for _ in range(2):
        rc = main(["check", "--root", str(synthetic), "--select", STATIC, "--format", "json"])
        runs.append((rc, capsys.readouterr().out))
    assert runs[0] == runs[1] and runs[0][0] == 1
    assert len(entries(synthetic / ".wireup-cache", "check")) == 1


# -- what is and is not cached ------------------------------------------------------------------------


def test_a_selection_with_a_rule_that_reads_more_is_not_cached(tmp_path: Path):
    cfg = config(REPO, tmp_path / "cache")
    check(config=cfg, select=["schema", "FINGERPRINT_PIN"])
    check(config=cfg, select=["schema", "evidence"])
    assert entries(tmp_path / "cache", "check") == []


def test_a_suppression_of_a_rule_that_reads_more_is_judged_outside_the_contract_only_selection(tmp_path: Path):
    """A contract-only selection leaves an entry of an evidence (or build) rule unjudged, so its result is
    the contracts' alone and cached (the shipped contracts suppress three SHARED_UNINIT_READ findings: their
    contract-only check stays cached); SUPPRESSION_UNUSED selected alone judges it, and is not cached."""
    root = copy_of(RULES / "SUPPRESSION_UNUSED" / "bad", tmp_path)
    with (root / "contracts" / "suppress.toml").open("a") as fh:
        fh.write('\n[[suppress]]\nrule = "EVIDENCE_MISSING"\nsubject = "nothing"\nreason = "judged by an evidence rule"\n')
    cfg = config(root, tmp_path / "cache")
    quick = check(config=cfg, select=["schema"])
    assert not any("EVIDENCE_MISSING" in f.message for f in quick.findings)
    assert len(entries(tmp_path / "cache", "check")) == 1
    alone = check(config=cfg, select=["SUPPRESSION_UNUSED"])
    assert [f.message for f in alone.findings if "EVIDENCE_MISSING" in f.message] == [
        'The suppression of EVIDENCE_MISSING about "nothing" suppresses nothing: the rule finds nothing there any more; remove it.']
    assert len(entries(tmp_path / "cache", "check")) == 1


def test_a_load_error_is_not_cached(tmp_path: Path):
    from audit.errors import ContractError

    root = copy_of(RULES / "DUPLICATE_NAME" / "good", tmp_path)
    (root / "contracts" / "broken.toml").write_text('[[kernel]]\nname = "k"\nstage = "TODO"\n')
    cfg = config(root, tmp_path / "cache")
    for _ in range(2):
        with pytest.raises(ContractError):
            check(config=cfg, select=SEL)
    assert entries(tmp_path / "cache", "check") == []


def test_a_committed_cache_folder_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = config(REPO, tmp_path / "cache")
    monkeypatch.setattr("audit.compile.committed_cache_files", lambda folder, root: True)
    assert check_cache.cache_folder(cfg) is None
    check(config=cfg, select=SEL)
    assert entries(tmp_path / "cache", "check") == entries(tmp_path / "cache", "parsed") == []


# -- invalidation -------------------------------------------------------------------------------------


def check_twice_equal_to_uncached(cfg: Config) -> None:
    reference = outputs(uncached(cfg))
    assert outputs(check(config=cfg, select=SEL)) == reference
    assert outputs(check(config=cfg, select=SEL)) == reference


def test_a_changed_contract_file_is_a_miss_and_only_it_is_parsed_again(synthetic: Path, tmp_path: Path, monkeypatch):
    cfg = config(synthetic, tmp_path / "cache")
    before = check(config=cfg, select=SEL)
    n_files = len(list((synthetic / "contracts").rglob("*.toml")))
    assert parsed_values(tmp_path / "cache") == n_files  # every file's value, in the shards of the contracts folder
    f = synthetic / "contracts" / "modules" / "m00003.toml"
    f.write_text(f.read_text().replace('shape = ["B", "D"]', 'shape = ["B", "H"]', 1))
    calls = []
    real = load._parse_toml
    monkeypatch.setattr(load, "_parse_toml", lambda text: calls.append(text) or real(text))
    after = check(config=cfg, select=SEL)
    assert calls == [f.read_text()]  # every other file came from the parsed-file cache
    assert after.findings != before.findings
    assert outputs(after) == outputs(uncached(cfg))
    assert len(entries(tmp_path / "cache", "check")) == 2
    assert parsed_values(tmp_path / "cache") == n_files  # rewritten with the values this load used
    calls.clear()
    check(config=dataclasses.replace(cfg), select=["schema"])
    assert calls == []


def test_a_new_or_removed_contract_file_is_a_miss(synthetic: Path, tmp_path: Path):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    extra = synthetic / "contracts" / "extra.toml"
    extra.write_text('[[buffer]]\nname = "unused_extra"\ndtype = "f32"\nshape = ["B"]\n')
    check_twice_equal_to_uncached(cfg)
    extra.unlink()
    check_twice_equal_to_uncached(cfg)


def test_a_changed_configuration_is_a_miss(synthetic: Path, tmp_path: Path):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    other = dataclasses.replace(cfg, include=("elsewhere",))
    store = check_cache.CheckCache.open(other, select_rules(SEL), {})
    assert store is not None and store.lookup() is None


def test_changed_options_and_selection_are_misses(synthetic: Path, tmp_path: Path):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    rules = select_rules(SEL)
    assert check_cache.CheckCache.open(cfg, rules, {}).lookup() is not None
    assert check_cache.CheckCache.open(cfg, rules, {"escalate": ("DEAD_KERNEL",)}).lookup() is None
    assert check_cache.CheckCache.open(cfg, rules[1:], {}).lookup() is None


def test_a_change_to_wireups_code_is_a_miss(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cfg = config(synthetic, tmp_path / "cache")
    check(config=cfg, select=SEL)
    monkeypatch.setattr(check_cache, "code_version", lambda: "another version of wireup")
    assert check_cache.CheckCache.open(cfg, select_rules(SEL), {}).lookup() is None


def test_a_removed_source_is_seen_through_its_probe(synthetic: Path, tmp_path: Path):
    cfg = config(synthetic, tmp_path / "cache")
    check_twice_equal_to_uncached(cfg)
    source = sorted((synthetic / "kernels").glob("*.cu"))[0]
    source.unlink()
    after = check(config=cfg, select=SEL)
    assert "SOURCE_MISSING" in {f.rule for f in after.findings}
    assert outputs(after) == outputs(uncached(cfg))


def test_a_changed_included_header_is_seen_through_its_probe(synthetic: Path, tmp_path: Path):
    cfg = config(synthetic, tmp_path / "cache")
    source = sorted((synthetic / "kernels").glob("*.cu"))[0]
    header = synthetic / "kernels" / "common.cuh"
    header.write_text("#pragma once\n")
    source.write_text('#include "common.cuh"\n' + source.read_text())
    check_twice_equal_to_uncached(cfg)
    assert not check(config=cfg, select=SEL).findings
    header.write_text('#pragma once\n#include "/etc/hostname"\n')  # an absolute include: SOURCE_UNSAFE
    after = check(config=cfg, select=SEL)
    assert "SOURCE_UNSAFE" in {f.rule for f in after.findings}
    assert outputs(after) == outputs(uncached(cfg))
    header.write_text("#pragma once\n")
    assert not check(config=cfg, select=SEL).findings


def test_a_source_made_a_link_out_of_the_root_is_seen(synthetic: Path, tmp_path: Path):
    cfg = config(synthetic, tmp_path / "cache")
    check_twice_equal_to_uncached(cfg)
    source = sorted((synthetic / "kernels").glob("*.cu"))[0]
    outside = tmp_path / "outside.cu"
    outside.write_text(source.read_text())
    source.unlink()
    source.symlink_to(outside)
    after = check(config=cfg, select=SEL)
    assert {"PATH_OUTSIDE_ROOT", "SOURCE_UNSAFE"} & {f.rule for f in after.findings}
    assert outputs(after) == outputs(uncached(cfg))


# -- damaged and forged entries -----------------------------------------------------------------------


def _entry(cache: Path) -> Path:
    (path,) = entries(cache, "check")
    return path


def _forge(data: dict) -> dict:
    data["result"]["findings"] = [["DEAD_KERNEL", "error", "forged", "x.toml", "three", "", "", "wiring"]]
    return data


def _forge_severity(data: dict) -> dict:
    data["result"]["findings"] = [["DEAD_KERNEL", "fatal", "forged", "x.toml", 3, "", "", "wiring"]]
    return data


def _forge_subjects(data: dict) -> dict:
    data["result"]["subjects"] = {"DEAD_KERNEL": 99}
    return data


def _forge_probe(data: dict) -> dict:
    data["probes"] = [["no such probe", "kernels/a.cu", None]]
    return data


def _forge_probe_answer(data: dict) -> dict:
    data["probes"] = [["source_exists", data["probes"][0][1], False]]
    return data


DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:40]),
    "not json": lambda p: p.write_bytes(b"\x00\xff garbage"),
    "another format": lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "format": "wireup-check-0"})),
    "another key": lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "key": "0" * 64})),
    "a line of the wrong type": lambda p: p.write_text(json.dumps(_forge(json.loads(p.read_text())))),
    "an unknown severity": lambda p: p.write_text(json.dumps(_forge_severity(json.loads(p.read_text())))),
    "a subject list out of range": lambda p: p.write_text(json.dumps(_forge_subjects(json.loads(p.read_text())))),
    "an unknown probe": lambda p: p.write_text(json.dumps(_forge_probe(json.loads(p.read_text())))),
    "a probe answered otherwise now": lambda p: p.write_text(json.dumps(_forge_probe_answer(json.loads(p.read_text())))),
    "a folder": lambda p: (p.unlink(), p.mkdir()),
    "a FIFO": lambda p: (p.unlink(), os.mkfifo(p)),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_or_forged_entry_is_ignored(damage: str, synthetic: Path, tmp_path: Path):
    cfg = config(synthetic, tmp_path / "cache")
    reference = outputs(uncached(cfg))
    check(config=cfg, select=SEL)
    DAMAGE[damage](_entry(tmp_path / "cache"))
    assert outputs(check(config=cfg, select=SEL)) == reference


# -- the parsed-file cache ----------------------------------------------------------------------------


def parsed_cache(folder: Path) -> toml_cache.ParsedCache:
    return toml_cache.ParsedCache(folder, "test", "/project/contracts")


def parsed_values(cache: Path) -> int:
    """How many values the parsed-file cache in ``cache`` holds, over all its files."""
    return sum(len(toml_cache._read(p)) for p in entries(cache, "parsed"))


def parse_saved(folder: Path, text: str) -> object:
    """Parse ``text`` through a fresh cache over ``folder`` and save; the value and whether it was a hit."""
    cache = parsed_cache(folder)
    value = cache.parse(text, load._parse_toml)
    cache.save()
    return value, cache.hits == 1


def test_parsed_values_round_trip_exactly(tmp_path: Path):
    texts = [path.read_text(encoding="utf-8") for path in load.contract_files(REPO / "contracts")]
    first = parsed_cache(tmp_path)
    values = [first.parse(text, load._parse_toml) for text in texts]
    first.save()
    again = parsed_cache(tmp_path)
    assert [again.parse(text, lambda t: pytest.fail("parsed again")) for text in texts] == values
    assert values == [load._parse_toml(text) for text in texts]
    assert again.hits == len(texts) and first.misses == len(texts)


def test_special_values_round_trip(tmp_path: Path):
    text = 'a = -0.0\nb = 1e308\nc = 4611686018427387904\nd = "\\u00e9 \\U0001F600"\ne = nan\n[f]\ng = [[1, 2], [true]]\n'
    value, hit = parse_saved(tmp_path, text)
    again, hit = parse_saved(tmp_path, text)
    assert hit and repr(again) == repr(load._parse_toml(text)) and str(again["a"]) == "-0.0"


def test_dates_are_not_cached(tmp_path: Path):
    parse_saved(tmp_path, "when = 2026-12-04\n")
    assert parse_saved(tmp_path, "when = 2026-12-04\n")[1] is False


def test_only_the_values_of_the_last_load_are_kept(tmp_path: Path):
    parse_saved(tmp_path, "a = 1\n")
    parse_saved(tmp_path, "a = 2\n")
    assert parse_saved(tmp_path, "a = 2\n")[1] is True
    assert parse_saved(tmp_path, "a = 1\n")[1] is False
    assert [p.name for p in tmp_path.iterdir()] == [parsed_cache(tmp_path).shard_path(KEY_A1).name]
    assert sum(len(toml_cache._read(p)) for p in tmp_path.iterdir()) == 1


def test_an_edit_rewrites_only_the_shards_of_the_old_and_new_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    texts = [f"a = {i}\n" for i in range(200)]
    first = parsed_cache(tmp_path)
    for t in texts:
        first.parse(t, load._parse_toml)
    first.save()
    assert len(list(tmp_path.iterdir())) == toml_cache.SHARDS
    edited = [*texts[:-1], "a = -1\n"]
    written = []
    real = toml_cache._write
    monkeypatch.setattr(toml_cache, "_write", lambda path, payload: written.append(path) or real(path, payload))
    again = parsed_cache(tmp_path)
    assert [again.parse(t, load._parse_toml) for t in edited] == [load._parse_toml(t) for t in edited]
    again.save()
    assert sorted(written) == sorted({again.shard_path(again.key(texts[-1])), again.shard_path(again.key(edited[-1]))})
    third = parsed_cache(tmp_path)
    assert [third.parse(t, lambda t: pytest.fail("parsed again")) for t in edited] == [load._parse_toml(t) for t in edited]
    assert sum(len(toml_cache._read(p)) for p in tmp_path.iterdir()) == len(edited)  # the old value is gone


def test_a_shard_left_without_values_and_the_file_before_the_shards_are_removed(tmp_path: Path):
    parse_saved(tmp_path, "a = 1\n")
    legacy = tmp_path / f"{parsed_cache(tmp_path).name}.bin"
    legacy.write_bytes(_entry_bytes({KEY_A1: {"a": 1}}))
    parse_saved(tmp_path, "a = 2\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [parsed_cache(tmp_path).shard_path(parsed_cache(tmp_path).key("a = 2\n")).name]


def _entry_bytes(table: object) -> bytes:
    import hashlib

    payload = marshal.dumps(table)
    return toml_cache.PARSED_FORMAT + b"\n" + hashlib.sha256(payload).digest() + payload


def _nested(depth: int) -> dict:
    v: dict = {}
    for _ in range(depth):
        v = {"a": v}
    return v


TEXT = 'a = 1\n[b]\nc = "d"\n'
KEY = parsed_cache(Path("/nowhere")).key(TEXT)
KEY_A1 = parsed_cache(Path("/nowhere")).key("a = 1\n")
FORGED = {
    "a code object": _entry_bytes({KEY: {"a": compile("1", "x", "eval")}}),
    "bytes": _entry_bytes({KEY: {"a": b"x"}}),
    "a set": _entry_bytes({KEY: {"a": {1}}}),
    "a tuple": _entry_bytes({KEY: {"a": (1,)}}),
    "an integer key": _entry_bytes({KEY: {1: "x"}}),
    "a list as the value": _entry_bytes({KEY: [1]}),
    "a list at the top": _entry_bytes([1]),
    "an integer text key": _entry_bytes({1: {"a": 1}}),
    "nesting past the limit": _entry_bytes({KEY: _nested(toml_cache.MAX_NESTING + 2)}),
    "a wrong digest": _entry_bytes({KEY: {"a": 1}})[:-1] + b"\x02",
    "truncated": _entry_bytes({KEY: {"a": "x" * 100}})[:-5],
    "another format": b"wireup-parsed-toml-0\n" + _entry_bytes({KEY: {"a": 1}})[len(toml_cache.PARSED_FORMAT) + 1 :],
    "garbage": b"\x00" * 80,
}


@pytest.mark.parametrize("forged", sorted(FORGED))
def test_a_damaged_or_forged_parsed_entry_is_ignored(forged: str, tmp_path: Path):
    parsed_cache(tmp_path).shard_path(KEY).write_bytes(FORGED[forged])
    assert parse_saved(tmp_path, TEXT) == ({"a": 1, "b": {"c": "d"}}, False)
    assert parse_saved(tmp_path, TEXT) == ({"a": 1, "b": {"c": "d"}}, True)  # rewritten


def test_a_parsed_cache_that_is_a_folder_or_a_fifo_is_ignored(tmp_path: Path):
    path = parsed_cache(tmp_path).shard_path(KEY)
    os.mkfifo(path)
    assert parse_saved(tmp_path, TEXT) == ({"a": 1, "b": {"c": "d"}}, False)
    path.unlink()
    path.mkdir()
    assert parse_saved(tmp_path, TEXT) == ({"a": 1, "b": {"c": "d"}}, False)


def test_a_forged_parsed_entry_of_toml_values_goes_through_every_check_of_the_loader(tmp_path: Path):
    """An entry claims another text's value: the model is built from it with the loader's checks, so a
    value no contract may hold is a load error as if the file said it."""
    from audit.errors import ContractError

    root = copy_of(RULES / "DUPLICATE_NAME" / "good", tmp_path)
    cache = tmp_path / "parsed"
    cfolder = root / "contracts"
    load_contracts(cfolder, root, cache=cache)
    cached = toml_cache.ParsedCache(cache, load.parser_name(), str(cfolder.absolute()))
    key = cached.key((cfolder / "kernels.toml").read_text())
    path = cached.shard_path(key)
    assert path in cache.glob("*.bin")
    table = marshal.loads(path.read_bytes()[len(toml_cache.PARSED_FORMAT) + 33 :])
    table[key] = {"kernel": [{"name": "k", "stage": "TODO"}]}
    path.write_bytes(_entry_bytes(table))
    with pytest.raises(ContractError, match="TODO"):
        load_contracts(cfolder, root, cache=cache)


def test_load_with_the_parsed_cache_equals_load_without(synthetic: Path, tmp_path: Path):
    plain = load_contracts(synthetic / "contracts", synthetic)
    for _ in range(2):
        cached = load_contracts(synthetic / "contracts", synthetic, cache=tmp_path / "parsed")
        assert repr(cached) == repr(plain)
        assert [(k.loc.file, k.loc.line) for k in cached.kernels] == [(k.loc.file, k.loc.line) for k in plain.kernels]


# -- contract-only rules read the project only through probes -----------------------------------------


class ProjectReadGuard:
    """Records every open, stat and listing of a path inside ``root`` while armed, except inside a probe;
    the cache folder, the interpreter's own files (a checkout's virtualenv) and wireup's modules aside."""

    def __init__(self, root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch):
        self.root = str(root.resolve())
        self.allowed = tuple(str(Path(p).resolve()) for p in (cache, sys.prefix, sys.base_prefix, api.__file__.rsplit(os.sep, 1)[0]))
        self.armed = False
        self.reads: list[str] = []
        for mod, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "lstat"), (os, "scandir"), (os, "listdir"), (os, "readlink")):
            monkeypatch.setattr(mod, name, self.wrap(getattr(mod, name)))

    def wrap(self, fn):
        def guarded(path, *a, **k):
            if self.armed and isinstance(path, (str, bytes, os.PathLike)):
                p = os.path.abspath(os.fsdecode(path))
                if (p == self.root or p.startswith(self.root + os.sep)) and not p.startswith(self.allowed):
                    self.reads.append(p)
            return fn(path, *a, **k)

        return guarded


@pytest.mark.parametrize("project", ["shipped", "synthetic", *CONTRACT_ONLY_FIXTURES])
def test_contract_only_rules_read_no_project_file_but_through_probes(project: str, synthetic: Path, tmp_path: Path, monkeypatch):
    root = REPO if project == "shipped" else synthetic if project == "synthetic" else RULES / project / "bad"
    cfg = config(root, tmp_path / "cache")
    cs = load_contracts(cfg.contracts_dir, cfg.root)
    guard = ProjectReadGuard(root, tmp_path / "cache", monkeypatch)
    ctx = CheckContext(cs, cfg, providers=api.fact_providers())
    real_probe = CheckContext.probe

    def probe(self, kind, arg):
        guard.armed = False
        try:
            return real_probe(self, kind, arg)
        finally:
            guard.armed = True

    monkeypatch.setattr(CheckContext, "probe", probe)
    rules = select_rules(SEL)
    from audit.rules import run_rules

    guard.armed = True
    try:
        result = run_rules(ctx, rules)
    finally:
        guard.armed = False
    assert guard.reads == []
    assert set(ctx.facts) <= {"suppressions"}, "a contract-only rule asked for a fact"
    assert result.ran


def test_a_load_error_is_reported_before_an_unknown_rule_as_without_the_cache(tmp_path: Path):
    from audit.errors import ContractError

    root = copy_of(RULES / "DUPLICATE_NAME" / "good", tmp_path)
    (root / "contracts" / "broken.toml").write_text('[[kernel]]\nname = "k"\nstage = "TODO"\n')
    with pytest.raises(ContractError):
        check(config=config(root, tmp_path / "cache"), select=["NO_SUCH_RULE"])
