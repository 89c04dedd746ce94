"""The evidence records' summaries in the build cache (audit.evidence.load_records with a cache folder): a
record read and validated once is built from its summary, its checks parsed from its bytes when asked for,
and the result is the record a full parse gives."""

from __future__ import annotations

import json
import marshal
import shutil
from pathlib import Path

import pytest

from audit.evidence import SUMMARY_FORMAT, EvidenceRecord, _Summaries, freshness, load_records
from audit.toml_cache import _read, _write

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """A copy of the shipped evidence records."""
    out = tmp_path / "evidence"
    shutil.copytree(REPO / "reports" / "evidence", out)
    return out


def _store(cache: Path, folder: Path) -> Path:
    (path,) = (cache / "evidence").iterdir()
    return path


def test_a_record_from_its_summary_is_the_record_a_full_parse_gives(folder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    full = load_records(folder)
    first = load_records(folder, cache)  # parses every record, keeps the summaries
    assert all("checks" in r.__dict__ for r in first) and first == full
    again = load_records(folder, cache)
    assert len(again) == len(full) == len(list(folder.glob("*/*.json")))
    # built from the summaries: no check parsed until one is asked for
    assert not any("checks" in r.__dict__ for r in again)
    assert again[0].subject == full[0].subject and "checks" not in again[0].__dict__
    assert again == full  # comparing reads every record's checks
    assert all("checks" in r.__dict__ and "_pending_checks" not in r.__dict__ for r in again)
    assert sum(len(r.checks) for r in again) == sum(len(r.checks) for r in full) > 1000
    assert [json.loads(r.to_json()) for r in load_records(folder, cache)] == [json.loads(r.to_json()) for r in full]
    assert len(_read(_store(cache, folder), SUMMARY_FORMAT)) == len(full)


def test_the_freshness_of_the_shipped_chain_is_the_same_from_the_summaries(tmp_path: Path) -> None:
    from audit.config import load_config
    from audit.load import load_contracts

    cfg = load_config(REPO)
    cs = load_contracts(cfg.path(cfg.contracts), cfg.root)
    folder = cfg.path(cfg.evidence)
    cache = tmp_path / "cache"
    plain = freshness(cs, cfg, load_records(folder))
    load_records(folder, cache)
    cached = freshness(cs, cfg, load_records(folder, cache))
    assert {k: (f.status, f.reason, f.record) for k, f in cached.items()} == {k: (f.status, f.reason, f.record) for k, f in plain.items()}


def test_an_edited_record_is_parsed_and_validated_again(folder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    n = len(load_records(folder, cache))
    path = folder / "kernels" / "strided_gather.pycuda.json"
    data = json.loads(path.read_text())
    data["checks"][3]["max_abs_err"] = "0.0"  # a check of the wrong type: the record is not valid
    path.write_text(json.dumps(data))
    assert [r.subject for r in load_records(folder)].count("strided_gather") == 1  # the CuPy record only
    records = load_records(folder, cache)
    assert len(records) == n - 1 and [r.backend for r in records if r.subject == "strided_gather"] == ["cupy"]
    data["checks"][3]["max_abs_err"] = 0.0
    data["date"] = "2027-01-01T00:00:00+00:00"
    path.write_text(json.dumps(data))
    load_records(folder, cache)
    (rec,) = [r for r in load_records(folder, cache) if r.subject == "strided_gather" and r.backend == "pycuda"]
    assert rec.date == "2027-01-01T00:00:00+00:00" and "checks" not in rec.__dict__ and rec.checks[3].max_abs_err == 0.0


@pytest.mark.parametrize(
    "forge",
    [
        lambda s: {**s, "seed": "7"},  # a field of the wrong type
        lambda s: {**s, "cases": [(1, 2)]},  # a value JSON never gives (a tuple)
        lambda s: {**s, "versions": {"nvcc": b"13.0"}},  # bytes
        lambda s: {**s, "checks": []},  # a summary holds no checks
        lambda s: [s],  # not a table
    ],
)
def test_a_forged_summary_is_not_used(folder: Path, tmp_path: Path, forge) -> None:
    cache = tmp_path / "cache"
    full = load_records(folder)
    load_records(folder, cache)
    store = _store(cache, folder)
    table = _read(store, SUMMARY_FORMAT)
    path = folder / "kernels" / "strided_gather.pycuda.json"
    key = _Summaries.key(path.read_bytes())
    table[key] = forge(table[key])
    _write(store, marshal.dumps(table), SUMMARY_FORMAT)
    records = load_records(folder, cache)
    (rec,) = [r for r in records if r.subject == "strided_gather" and r.backend == "pycuda"]
    assert "checks" in rec.__dict__  # parsed from the file, not built from the entry
    assert records == full


def test_the_file_holds_the_summaries_of_the_last_load_only(folder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    n = len(load_records(folder, cache))
    (folder / "kernels" / "strided_gather.cupy.json").unlink()
    assert len(load_records(folder, cache)) == n - 1
    assert len(_read(_store(cache, folder), SUMMARY_FORMAT)) == n - 1
    (_store(cache, folder)).write_bytes(b"damaged")
    assert load_records(folder, cache) == load_records(folder)  # a damaged file is ignored and rewritten
    assert len(_read(_store(cache, folder), SUMMARY_FORMAT)) == n - 1


def test_a_lazy_record_survives_a_copy_and_a_pickle(folder: Path, tmp_path: Path) -> None:
    import copy
    import pickle

    cache = tmp_path / "cache"
    full = load_records(folder)
    load_records(folder, cache)
    lazy = load_records(folder, cache)
    assert pickle.loads(pickle.dumps(lazy)) == full
    assert copy.deepcopy(load_records(folder, cache)) == full
    assert EvidenceRecord.from_dict(json.loads(load_records(folder, cache)[0].to_json())) == full[0]
    with pytest.raises(AttributeError):
        lazy[0].no_such_field  # noqa: B018 - the lookup is the test
