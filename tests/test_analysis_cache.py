"""The on-disk cache of the source/PTX analyses (audit.cuda.cache): same results as computing them,
keyed by content (not path) and the analyses' code, damaged or forged entries ignored and recomputed."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from audit.cuda import cache as cache_mod
from audit.cuda.bounds import Overrun
from audit.cuda.cache import AnalysisCache, analysis_version
from audit.cuda.races import StoreRace, find_store_races
from audit.cuda.static import source_overruns, source_uninit_reads
from audit.cuda.uninit import UninitRead

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels"
HEADER = 'constexpr int kN = 4;\n'
OVERRUN = ('#include "consts.cuh"\n__global__ void k(float* o) {\n    float v[kN];\n'
           "    for (int u = 0; u <= kN; ++u) v[u] = 1.0f;\n    o[0] = v[0];\n}\n")
UNINIT = ("__global__ void k(const float* x, float* o, int K) {\n    float l[4];\n"
          "    for (int k = 0; k < 4; ++k) { if (k < K) l[k] = x[k]; }\n"
          "    for (int k = 0; k < 4; ++k) o[k] = l[k];\n}\n")
PTX = ('.version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 k_param_0, .param .f32 k_param_1)\n\n{\n'
       "\t.reg .b64 %rd<9>;\n\t.reg .f32 %f<9>;\n\t.loc 1 10 0\n"
       "\tld.param.u64 %rd1, [k_param_0];\n\tld.param.f32 %f1, [k_param_1];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
       '\t.loc 1 12 5\n\tst.global.f32 [%rd2], %f1;\n$L__END:\n\tret;\n}\n\t.file 1 "/tmp/x/k.cu"\n')


def project(folder: Path) -> Path:
    """A kernel with an overrun (through a header constant) and an uninitialised read, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "consts.cuh").write_text(HEADER)
    (folder / "k.cu").write_text(OVERRUN)
    (folder / "u.cu").write_text(UNINIT)
    return folder


def entries(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.json"))


def test_every_result_field_type_can_be_stored():
    for cls in (Overrun, UninitRead, StoreRace):
        for f in dataclasses.fields(cls):
            assert str(f.type) in cache_mod._FIELD_TYPES, f"{cls.__name__}.{f.name}: {f.type}"


def test_cached_results_equal_computed_ones_and_the_second_read_is_a_hit(tmp_path: Path):
    src = project(tmp_path / "p")
    cache = AnalysisCache(tmp_path / "cache")
    want_o, want_u = source_overruns(src / "k.cu", []), source_uninit_reads(src / "u.cu", [])
    assert len(want_o) == 1 and want_o[0].high == 4 and len(want_u) == 1  # the fixtures have findings
    for _ in range(2):
        assert source_overruns(src / "k.cu", [], cache) == want_o
        assert source_uninit_reads(src / "u.cu", [], cache) == want_u
    assert (cache.hits, cache.misses) == (2, 2)
    assert len(entries(tmp_path / "cache")) == 2


def test_store_races_are_cached_by_ptx_entry_and_extents(tmp_path: Path):
    from audit.cuda.static import entry_store_races

    class K:
        name, symbol, block, grid, params = "k", "k", (), (), ()

    cache = AnalysisCache(tmp_path / "cache")
    want = find_store_races(PTX, "k", (256, 1, 1), (1, 1, 1))
    assert len(want) == 1

    def fake_extents(cs, wiring, k):
        return (256, 1, 1), (1, 1, 1)

    mp = pytest.MonkeyPatch()
    mp.setattr("audit.cuda.static.launch_extents", fake_extents)
    try:
        assert entry_store_races(None, None, K(), PTX, cache=cache) == want
        assert entry_store_races(None, None, K(), PTX, cache=cache) == want
        assert (cache.hits, cache.misses) == (1, 1)
        # other extents are another entry: one block of one thread stores once, no race
        mp.setattr("audit.cuda.static.launch_extents", lambda cs, w, k: ((1, 1, 1), (1, 1, 1)))
        assert entry_store_races(None, None, K(), PTX, cache=cache) == []
        assert cache.misses == 2
    finally:
        mp.undo()


def test_the_key_is_the_content_not_the_path(tmp_path: Path):
    a, b = project(tmp_path / "a"), project(tmp_path / "elsewhere" / "b")
    cache = AnalysisCache(tmp_path / "cache")
    first = source_overruns(a / "k.cu", [], cache)
    assert source_overruns(b / "k.cu", [], cache) == first
    assert (cache.hits, cache.misses) == (1, 1)


def test_a_changed_header_is_a_new_entry(tmp_path: Path):
    src = project(tmp_path / "p")
    cache = AnalysisCache(tmp_path / "cache")
    assert source_overruns(src / "k.cu", [], cache)[0].size == 4
    (src / "consts.cuh").write_text("constexpr int kN = 8;\n")
    (found,) = source_overruns(src / "k.cu", [], cache)
    assert (found.size, found.high, cache.misses) == (8, 8, 2)


def test_the_analyses_code_is_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cache = AnalysisCache(tmp_path / "cache")
    before = cache.key("bounds", ["x"])
    assert analysis_version() and len(analysis_version()) == 64
    monkeypatch.setattr(cache_mod, "analysis_version", lambda: "another version of the analyses")
    assert cache.key("bounds", ["x"]) != before
    monkeypatch.setattr(cache_mod, "analysis_version", lambda: "")  # sources unreadable: nothing cached
    src = project(tmp_path / "p")
    assert source_overruns(src / "k.cu", [], cache) == source_overruns(src / "k.cu", [])
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: data[: len(data) // 2],
        lambda data: b"\xff\xfe not json",
        lambda data: json.dumps({**json.loads(data), "format": "wireup-analysis-0"}).encode(),
        lambda data: json.dumps({**json.loads(data), "key": "0" * 64}).encode(),
        lambda data: json.dumps({**json.loads(data), "results": [["1"] * 13]}).encode(),
        lambda data: json.dumps({**json.loads(data), "results": [json.loads(data)["results"][0][:-1]]}).encode(),
        lambda data: json.dumps({**json.loads(data), "results": {"a": 1}}).encode(),
        lambda data: json.dumps([1, 2]).encode(),
        lambda data: json.dumps({**json.loads(data), "results": [[True, *json.loads(data)["results"][0][1:]]]}).encode(),
    ],
    ids=["empty", "truncated", "not-json", "other-format", "other-key", "wrong-types", "too-few-fields", "not-a-list",
         "not-a-table", "bool-for-int"],
)
def test_a_damaged_or_forged_entry_is_ignored_and_rewritten(tmp_path: Path, damage):
    src = project(tmp_path / "p")
    cache = AnalysisCache(tmp_path / "cache")
    want = source_overruns(src / "k.cu", [], cache)
    (entry,) = entries(tmp_path / "cache")
    good = entry.read_bytes()
    entry.write_bytes(damage(good))
    assert source_overruns(src / "k.cu", [], cache) == want
    assert (cache.hits, cache.misses) == (0, 2)
    assert entry.read_bytes() == good


def test_a_forged_entry_of_the_right_shape_is_read(tmp_path: Path):
    """The cache is trusted like the build cache beside it: an entry of valid types is taken as is
    (this pins that reads really come from the entry, not from a recomputation)."""
    src = project(tmp_path / "p")
    cache = AnalysisCache(tmp_path / "cache")
    source_overruns(src / "k.cu", [], cache)
    (entry,) = entries(tmp_path / "cache")
    data = json.loads(entry.read_text())
    data["results"] = []
    entry.write_text(json.dumps(data))
    assert source_overruns(src / "k.cu", [], cache) == []


def test_an_unwritable_cache_only_costs_time(tmp_path: Path):
    src = project(tmp_path / "p")
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be")
    cache = AnalysisCache(blocker / "analysis")
    assert source_overruns(src / "k.cu", [], cache) == source_overruns(src / "k.cu", [])


def test_check_reads_the_cache_on_a_second_run_with_the_same_findings(tmp_path: Path):
    """The three rules of wireup check through the cache: the shipped contracts and kernels copied, run
    twice; findings identical, the second run computes nothing (every analysis entry is reused)."""
    pytest.importorskip("networkx")
    from audit.api import check

    root = tmp_path / "repo"
    for name in ("contracts", "kernels"):
        shutil.copytree(REPO / name, root / name)
    (root / "wireup.toml").write_text('contracts = "contracts"\nkernels = "kernels"\n')
    select = ["LOCAL_ARRAY_BOUNDS", "LOCAL_UNINIT_READ"]
    first = check(root, select=select)
    stored = entries(root / ".wireup-cache" / "analysis")
    sources = [*(root / "kernels").glob("*.cu"), *(root / "kernels").glob("*.cuh")]  # each source and header once
    assert len(stored) == 2 * len(sources)
    mtimes = [p.stat().st_mtime_ns for p in stored]
    second = check(root, select=select)
    assert [f.message for f in second.findings] == [f.message for f in first.findings]
    assert [p.stat().st_mtime_ns for p in entries(root / ".wireup-cache" / "analysis")] == mtimes
