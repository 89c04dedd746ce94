"""Header mutants: the shared headers' functions the including kernels reach are mutated once, and each
mutant is judged against every kernel that includes the header (emulated backend with stand-ins); the
``nvcc`` tests compile header mutants into both kernels including ``aux_head_forward.cuh``.

The subject is the chain before its CUTLASS kernels (``tests/simt_chain.py``, fixture ``simt_repo``): the SIMT
head forwards, now benchmark baselines, are the two kernels that share ``aux_head_forward.cuh``."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from audit.api import load_project
from audit.cli import main
from audit.errors import UsageError
from audit.mutate import header_mutants, header_units, kernel_json, mutated_headers, plan_mutants, reclassify, run_mutation
from audit.mutate._headers import reached_bodies

TESTS = Path(__file__).resolve().parent
REPO: Path  # the SIMT chain's tree, set by _subject before any test of this module runs
HEAD = "aux_head_forward.cuh"
FORWARDS = ("aux_next_bar_forward", "aux_trade_outcome_forward")


def _wrong(launch):
    out = launch.run_reference()
    launch.write_outputs({k: v * 1.5 for k, v in out.items()})


@pytest.fixture(autouse=True, scope="module")
def _subject(simt_repo: Path) -> None:
    global REPO
    REPO = simt_repo


@pytest.fixture(scope="module")
def project(_subject):
    return load_project(REPO)


def test_header_units_name_the_headers_and_every_kernel_including_them(project):
    cfg, cs = project
    units = header_units(cfg, cs)
    assert list(units) == ["aux_common.cuh", "aux_head_forward.cuh", "isv_layout.cuh", "sgemm_tile.cuh"]
    assert units[HEAD].source == "kernels/aux_head_forward.cuh" and units[HEAD].kernels == FORWARDS
    # sgemm_tile.cuh is included directly by the GEMM kernels and through aux_head_forward.cuh by the forwards
    assert set(FORWARDS) <= set(units["sgemm_tile.cuh"].kernels) and "aux_trunk_forward" in units["sgemm_tile.cuh"].kernels
    assert "strided_gather" not in units["aux_common.cuh"].kernels  # it includes no header
    # isv_layout.cuh holds constants only: no function to mutate, so --all and --headers-only leave it out
    assert header_mutants(cfg, cs, units["isv_layout.cuh"]) == []
    assert mutated_headers(cfg, cs) == ["aux_common.cuh", "aux_head_forward.cuh", "sgemm_tile.cuh"]


def test_a_header_function_reached_by_two_kernels_yields_its_mutants_once_judged_against_both(project):
    cfg, cs = project
    unit = header_units(cfg, cs)[HEAD]
    spans = [reached_bodies(cfg, cs, k, unit.path) for k in FORWARDS]
    assert spans[0] and spans[0] == spans[1]  # both forwards reach the same header functions
    ms = header_mutants(cfg, cs, unit)
    assert ms and len({m.key for m in ms}) == len(ms) == len({m.mutated for m in ms})
    assert all(m.kernel == HEAD and m.source == "kernels/aux_head_forward.cuh" and m.kernels == FORWARDS and m.is_header for m in ms)
    assert all(m.key == f"{HEAD}/{m.id}" for m in ms)  # the id names the header
    # only inside the reached bodies: every mutated line lies in one of them
    lines = unit.path.read_text().splitlines()
    assert all(m.original.splitlines() == lines for m in ms)
    assert [m.key for m in header_mutants(cfg, cs, unit)] == [m.key for m in ms]  # deterministic
    # a kernel that includes no header and one that reaches no function of this header
    assert reached_bodies(cfg, cs, "strided_gather", unit.path) == []
    assert reached_bodies(cfg, cs, "aux_next_bar_loss_reduce", unit.path) == []


def test_plan_takes_kernels_and_headers_and_names_both_in_its_error(project):
    cfg, cs = project
    generated, selected = plan_mutants(cs, cfg, ["strided_gather", HEAD], None, 5)
    assert list(generated) == ["strided_gather", HEAD]
    assert len(selected[HEAD]) == 5 and len(generated[HEAD]) > 5
    assert {m.operator for m in selected[HEAD]} <= {m.operator for m in generated[HEAD]}
    with pytest.raises(UsageError, match=r'"nope.cuh" is not a kernel of the contracts; the kernels are "aux_label_scale_ema_update".*, '
                                         r'and the included headers "aux_common.cuh", "aux_head_forward.cuh", "isv_layout.cuh", "sgemm_tile.cuh"\.$'):  # fmt: skip
        plan_mutants(cs, cfg, ["nope.cuh"])


def test_list_shows_header_mutants_and_the_kernels_judging_them(capsys):
    assert main(["mutate", "--root", str(REPO), "--headers-only", "--list"]) == 0
    out = capsys.readouterr().out
    heads = [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ") and ": " in line]
    assert heads == ["aux_common.cuh", "aux_head_forward.cuh", "sgemm_tile.cuh"]
    assert f"each judged against 2 including kernel(s): {', '.join(FORWARDS)}" in out
    assert main(["mutate", "--root", str(REPO), "--all", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "strided_gather: " in listed and "aux_common.cuh: " in listed and "sgemm_tile.cuh: " in listed


def test_a_header_mutant_is_caught_when_any_including_kernel_catches_it(tmp_path):
    """Three mutants: wrong in the second including kernel only (caught), wrong in the first only
    (caught), right in both (survives): each is verified against both kernels in one variant."""
    picks = {}

    def stand_in(m):
        n = picks.setdefault(m.id, len(picks))
        assert m.kernels == FORWARDS
        return [{FORWARDS[1]: _wrong}, {FORWARDS[0]: _wrong}, {}][n]

    events = []
    run = run_mutation(REPO, [HEAD], max_mutants=3, sizes=(1,), stand_in=stand_in, equivalent_file=tmp_path / "none.toml", progress=events.append)
    (k,) = run.kernels
    assert (k.kernel, k.source, k.judged_by, k.baseline) == (HEAD, "kernels/aux_head_forward.cuh", list(FORWARDS), "pass")
    assert [o.status for o in k.outcomes] == ["caught", "caught", "survived"]
    assert [o.checks for o in k.outcomes[:2]] == [("VERIFY_REFERENCE",), ("VERIFY_REFERENCE",)]
    assert k.outcomes[0].detail.startswith(f'Kernel "{FORWARDS[1]}" fails VERIFY_REFERENCE')
    assert k.outcomes[1].detail.startswith(f'Kernel "{FORWARDS[0]}" fails VERIFY_REFERENCE')
    assert (k.mutants, k.caught, k.score) == (3, 2, pytest.approx(2 / 3)) and run.exit_code == 1
    # the baseline (the unmutated header) is verified with both kernels too
    done = {e["variant"] for e in events if e["event"] == "variant_done"}
    assert f"{HEAD}/baseline" in done and {o.mutant.key for o in k.outcomes} <= done
    data = kernel_json(k, run)
    assert data["header"] is True and data["judged_by"] == list(FORWARDS) and data["kernel"] == HEAD
    assert (data["generated"], data["selected"], data["mutants"], data["caught"], data["survived"]) == (k.generated, 3, 3, 2, 1)
    assert [r["status"] for r in data["results"]] == ["caught", "caught", "survived"]
    assert data["survivors"][0]["diff"].startswith("--- a/kernels/aux_head_forward.cuh\n")
    # a kernel's own record keeps its format: no header keys
    own = run_mutation(REPO, ["trade_outcome_label"], max_mutants=1, sizes=(1,), stand_in=lambda m: {m.kernel: _wrong})
    assert not {"header", "judged_by"} & set(kernel_json(own.kernels[0], own))


def test_header_records_are_written_reclassified_and_counted_by_the_report(tmp_path, capsys):
    from audit.report.collect import _header_mutations

    sys.path.insert(0, str(TESTS / "data" / "mutate"))
    try:
        code = main(["mutate", "--root", str(REPO), HEAD, "--max-mutants", "2", "--sizes", "1", "--stand-in", "stand_in:by_operator",
                     "--output-dir", str(tmp_path)])  # fmt: skip
    finally:
        sys.path.remove(str(TESTS / "data" / "mutate"))
    out = capsys.readouterr().out
    assert code in (0, 1) and f"{HEAD} " in out
    data = json.loads((tmp_path / f"{HEAD}.json").read_text())
    assert data["header"] is True and data["selected"] == 2
    cfg, cs = load_project(REPO)
    (r,) = reclassify(tmp_path, cfg, cs, [HEAD], write=False)
    assert r.problem == "" or r.problem is None
    ((name, view),) = _header_mutations(tmp_path)
    assert name == HEAD and view.selected == 2 and view.generated == data["generated"]


def test_a_header_mutant_is_verified_by_its_cheapest_including_kernel_first(monkeypatch):
    """first_failure ends a header mutant's verification at the first including kernel that fails, so the
    kernels go in the order of their recorded verification time, least first (unrecorded ones last)."""
    import audit.mutate._run as mrun
    from audit import runtime

    seen: list[tuple[str, tuple[str, ...]]] = []
    real = runtime.verify_many

    def spy(root, variants, *args, **kwargs):
        seen.extend((v.id, tuple(v.kernels)) for v in variants)
        return real(root, variants, *args, **kwargs)

    monkeypatch.setattr(runtime, "verify_many", spy)
    monkeypatch.setattr(mrun, "_verify_costs", lambda cfg: {FORWARDS[1]: 0.2, FORWARDS[0]: 3.0})
    run_mutation(REPO, [HEAD], max_mutants=2, sizes=(1,), stand_in=lambda m: {k: _wrong for k in m.kernels})
    mutants = [kernels for id_, kernels in seen if "/" in id_ and not id_.endswith("/baseline")]
    assert mutants and set(mutants) == {(FORWARDS[1], FORWARDS[0])}, seen
    monkeypatch.setattr(mrun, "_verify_costs", lambda cfg: {FORWARDS[1]: 0.2})
    assert mrun._cheapest_first(FORWARDS, mrun._verify_costs(None)) == (FORWARDS[1], FORWARDS[0])
    assert mrun._cheapest_first(FORWARDS, {}) == FORWARDS


def test_a_header_record_is_stale_once_other_kernels_include_it_or_theirs_change(tmp_path, capsys):
    """A header's mutants are judged by the kernels including it: the record keeps their names and their
    sources' hashes (without the header), and the report calls it stale when the including kernels are no
    longer those, or one of their sources changed since (the shipped sgemm_tile.cuh record was judged
    against five kernels that no longer include it, and not against three that do)."""
    from audit.report.collect import _header_judges, _header_mutations

    sys.path.insert(0, str(TESTS / "data" / "mutate"))
    try:
        main(["mutate", "--root", str(REPO), HEAD, "--max-mutants", "1", "--sizes", "1", "--stand-in", "stand_in:by_operator",
              "--output-dir", str(tmp_path)])  # fmt: skip
    finally:
        sys.path.remove(str(TESTS / "data" / "mutate"))
    capsys.readouterr()
    cfg, cs = load_project(REPO)
    judges = _header_judges(cfg, cs)
    path = tmp_path / f"{HEAD}.json"
    data = json.loads(path.read_text())
    assert sorted(data["judged_sources"]) == sorted(FORWARDS) and data["judged_sources"] == judges[HEAD][1]
    ((_, view),) = _header_mutations(tmp_path, REPO, judges)
    assert view.stale == "" and view.judged_by == list(FORWARDS)
    day = data["date"][:10]

    def stale_with(**edit) -> str:
        path.write_text(json.dumps({**data, **edit}))
        ((_, v),) = _header_mutations(tmp_path, REPO, judges)
        return v.stale

    assert stale_with(judged_by=[FORWARDS[0], "aux_gone"]) == (
        f"its mutants were judged against aux_gone, which no longer includes it, and not against {FORWARDS[1]}, which includes it now ({day})")
    assert stale_with(judged_by=list(FORWARDS), judged_sources={**data["judged_sources"], FORWARDS[1]: "0" * 64}) == (
        f"the sources of {FORWARDS[1]}, which judged its mutants, changed since this run ({day})")
    # an older record without the hashes: only the kernels' names judge
    assert stale_with(judged_sources=None) == ""
    assert "no longer include it" in stale_with(judged_by=[*FORWARDS, "a", "b"])


@pytest.mark.nvcc
def test_build_only_compiles_a_header_mutant_into_both_including_kernels(tmp_path, project):
    from audit.config import with_overrides
    from audit.mutate import build_mutants, build_only

    cfg, cs = project
    cfg = with_overrides(cfg, cache=str(tmp_path / "cache"))
    archive = tmp_path / "builds.tar"
    assert build_only(REPO, [HEAD], max_mutants=2, jobs=2, config=cfg, archive=archive) == {"compiled": 2}
    import tarfile

    with tarfile.open(archive) as tar:  # one entry per including kernel, for each mutant and the unmutated tree
        names = tar.getnames()
        assert names[-1] == "mutate-journal/static.builds.jsonl" and len({n.split("/")[2] for n in names[:-1]}) == 3 * len(FORWARDS)
    _, selected = plan_mutants(cs, cfg, [HEAD], None, 2)
    events = []
    builds = build_mutants(cfg, cs, selected[HEAD], cfg.arch, jobs=2, progress=events.append)
    assert [e["cached"] for e in events if e["event"] == "mutant_built"] == [True, True]  # the second pass starts no compiler
    for m in selected[HEAD]:
        b = builds[m.key]
        folder = tmp_path / "cache" / "mutate" / HEAD / m.file_stem
        assert b.status == "compiled" and b.path == folder / HEAD and b.path.read_text() == m.mutated
        assert sorted(b.overrides) == sorted(FORWARDS) and all(p.parent == folder for p in b.overrides.values())
        assert sorted(b.ptxs) == sorted(FORWARDS)
        # the unmutated sibling headers sit beside it, so no include reaches the project's own copy
        assert (folder / "aux_common.cuh").read_text() == (REPO / "kernels" / "aux_common.cuh").read_text()
    original = tmp_path / "cache" / "mutate" / HEAD / "original" / HEAD
    assert original.read_text() == (REPO / "kernels" / HEAD).read_text()


@pytest.mark.nvcc
def test_compiled_pipeline_runs_header_mutants_through_the_static_checks_and_verification(tmp_path, monkeypatch, project):
    """The real compile step and the static checks on each including kernel's copy, then the emulated
    backend (the reference stands in for every variant, so the compiled mutants survive)."""
    from audit import runtime
    from audit.config import with_overrides
    from audit.mutate import _run

    cfg, _ = project
    cfg = with_overrides(cfg, cache=str(tmp_path / "cache"))
    monkeypatch.setattr(runtime, "gpu_target", lambda backends, c, cluster=None: (["emulated"], c.arch))
    seen = []
    real = _run.static_catches
    monkeypatch.setattr(_run, "static_catches", lambda c, cs, items, jobs=1, **kw: seen.append([(k, n, b.path.name) for k, n, b in items]) or real(c, cs, items, jobs, **kw))
    run = run_mutation(REPO, [HEAD], max_mutants=2, config=cfg, sizes=(1,), sanitizers=(), slowdown=False, equivalent_file=tmp_path / "none.toml")
    (k,) = run.kernels
    assert k.baseline == "pass" and [o.status for o in k.outcomes] == ["survived", "survived"]
    keys = [o.mutant.key for o in k.outcomes]
    # each mutant is checked once per including kernel, on that kernel's copy beside the mutated header
    assert seen[0] == [(key, kern, f) for key in keys for kern, f in zip(FORWARDS, ("aux_next_bar_forward_kernel.cu", "aux_trade_outcome_forward_kernel.cu"))]
    assert seen[1] == [(HEAD, kern, f) for kern, f in zip(FORWARDS, ("aux_next_bar_forward_kernel.cu", "aux_trade_outcome_forward_kernel.cu"))]


def test_the_report_counts_header_mutants_and_never_calls_a_sample_full(tmp_path, monkeypatch):
    """The summary's mutation row: header records counted, headers without one named as not run, and a
    sample (or a run missing headers) a warning, never a full score."""
    import shutil

    import audit.compile
    import audit.compile.facts
    from audit.api import run_check
    from audit.errors import EnvironmentProblem
    from audit.report import ReportOptions, collect_report

    def missing(*args, **kwargs):
        raise EnvironmentProblem("nvcc is not on PATH (switched off by the test)")

    monkeypatch.setattr(audit.compile, "build_kernels", missing)
    monkeypatch.setattr(audit.compile.facts, "build_kernels", missing)
    root = tmp_path / "p"
    for part in ("contracts", "kernels", "reports/mutation"):
        shutil.copytree(REPO / part, root / part)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    names = {k.name for k in load_project(root)[1].kernels}
    for record in (root / "reports" / "mutation").glob("*.json"):
        # start from this chain's kernel records only: the repository may hold header samples, and records of
        # kernels this chain does not have (aux_weight_grad_partial_skinny), which the report does not count
        if record.name.endswith(".cuh.json") or record.stem not in names:
            record.unlink()

    def row() -> tuple[str, str]:
        cfg, cs = load_project(root)
        totals = dict(collect_report(run_check(cfg.root, config=cfg, contracts=cs), ReportOptions(history=False)).totals)
        return totals["mutation score"].state, totals["mutation score"].text

    # a sampled kernel record (30 of the 32-row trade-outcome backward's 279 mutants: its set has not run on a GPU
    # yet, and the repository's other kernel records are full sets), so the row is a sample, not a full score
    (root / "reports" / "mutation" / "aux_trade_outcome_backward.json").write_text(json.dumps({
        "kernel": "aux_trade_outcome_backward", "generated": 279, "selected": 30, "mutants": 30, "caught": 30, "equivalent": 0,
        "score": 1.0, "baseline": "pass", "survivors": [],
    }))  # fmt: skip
    state, text = row()
    assert "header mutants not run for aux_common.cuh, aux_head_forward.cuh, sgemm_tile.cuh" in text
    kernel_records = [json.loads(p.read_text()) for p in (root / "reports" / "mutation").glob("*.json")]
    run_n, generated = sum(d["selected"] for d in kernel_records), sum(d["generated"] for d in kernel_records)
    # the sample's 279 generated mutants count beside the full records' (whatever records the repository holds)
    others = sum(d["generated"] for d in kernel_records if d["kernel"] != "aux_trade_outcome_backward")
    assert run_n < generated == others + 279 and others > 0
    assert f"; a sample, not a full score: {run_n} of {generated} generated mutants run" in text and state == "warn"
    # full kernel records and every header recorded, all caught: a full score
    folder = root / "reports" / "mutation"
    caught_n = 0
    for p in folder.glob("*.json"):
        data = json.loads(p.read_text())
        # every survivor recorded equivalent: the recorded runs may hold real survivors, this row is about
        # what counts as a full score
        eq = [s for s in data["survivors"] if s.get("equivalent")]
        data.update(generated=data["selected"], survivors=eq, equivalent=len(eq), caught=data["mutants"] - len(eq), survived=0, score=1.0)
        if isinstance(data.get("source"), str) and (root / data["source"]).is_file():  # of the current source (not stale)
            data["source_sha256"] = hashlib.sha256((root / data["source"]).read_text(encoding="utf-8").encode()).hexdigest()
        caught_n += data["caught"]
        p.write_text(json.dumps(data))
    # kernels added to the chain since these records (main's masked partial and next-bar store entry): one
    # caught mutant each, so every kernel has a full record
    _, cs = load_project(root)
    missing = [k.name for k in cs.kernels if not (folder / f"{k.name}.json").is_file()]
    for name in missing:
        (folder / f"{name}.json").write_text(json.dumps({
            "kernel": name, "generated": 1, "selected": 1, "mutants": 1, "caught": 1, "equivalent": 0, "score": 1.0,
            "baseline": "pass", "survivors": [],
        }))  # fmt: skip
    caught_n += len(missing)
    run_n += len(missing)
    n = len(cs.kernels)
    units = header_units(*load_project(root))  # a record judged by other kernels than those including the header now is stale
    for name, caught in (("aux_common.cuh", 5), ("aux_head_forward.cuh", 4), ("sgemm_tile.cuh", 3)):
        (folder / f"{name}.json").write_text(json.dumps({
            "header": True, "judged_by": list(units[name].kernels), "kernel": name, "generated": caught, "selected": caught, "mutants": caught,
            "caught": caught, "equivalent": 0, "score": 1.0, "baseline": "pass", "survivors": [],
        }))  # fmt: skip
    state, text = row()
    assert text == (f"{caught_n} of {caught_n} mutants caught (100%) over {n} of {n} kernels; header mutants: 12 of 12 caught over 3 of 3 headers "
                    "(each judged against every kernel including it)") and state == "ok"  # fmt: skip
    # one header sampled: a warning again
    data = json.loads((folder / "sgemm_tile.cuh.json").read_text())
    (folder / "sgemm_tile.cuh.json").write_text(json.dumps(data | {"generated": 157}))
    state, text = row()
    assert text.endswith(f"; a sample, not a full score: {run_n + 12} of {run_n + 5 + 4 + 157} generated mutants run") and state == "warn"


def _slow(launch):
    import time as _time

    _time.sleep(0.02)  # the reference's numbers, 20 ms late: far more work for the same results
    launch.write_outputs(launch.run_reference())


def test_a_header_suspect_is_timed_alone_on_the_kernels_it_was_slow_in_only(tmp_path, monkeypatch):
    """A header mutant's variant verifies every including kernel (aux_common.cuh: 12 of them, ~36 s on the
    H100); timed alone, a suspect and its baselines run only the kernels of its slow cases (the header sets'
    call of 7 December spent ~475 s timing 27 suspects on all 12 and ended no pass)."""
    from audit import runtime

    calls = []
    real = runtime.verify_many

    def spy(root, variants, **kw):
        calls.append({v.id: v.kernels for v in variants})
        return real(root, variants, **kw)

    monkeypatch.setattr(runtime, "verify_many", spy)
    picks = {}

    def stand_in(m):
        n = picks.setdefault(m.id, len(picks))
        return [{FORWARDS[1]: _slow}, {}][n]  # slow in the second including kernel only; the same cost

    run = run_mutation(REPO, [HEAD], max_mutants=2, sizes=(1,), stand_in=stand_in, equivalent_file=tmp_path / "none.toml", slowdown=True)
    (k,) = run.kernels
    slow = next(m for m, n in picks.items() if n == 0)
    by_id = {o.mutant.id: o for o in k.outcomes}
    assert by_id[slow].status == "caught" and by_id[slow].checks == ("MUTATE_SLOWDOWN",)
    assert by_id[slow].detail.startswith("its launch at B=1")
    assert set(calls[0][f"{HEAD}/{slow}"]) == set(FORWARDS)  # the first verification: both kernels
    assert len(calls) == 4  # then three passes, each on the slow kernel alone, baselines before and after
    for alone in calls[1:]:
        assert alone == {f"{HEAD}/baseline": (FORWARDS[1],), f"{HEAD}/{slow}": (FORWARDS[1],), f"{HEAD}/baseline/again": (FORWARDS[1],)}


def test_slow_subjects_are_the_kernels_of_the_slow_cases_in_the_variants_order():
    from types import SimpleNamespace

    from audit.mutate._run import slow_subjects

    def outcome(times):
        rs = [SimpleNamespace(subject=s, backend="pycuda", launch_seconds=t) for s, t in times.items()]
        return SimpleNamespace(outcome=SimpleNamespace(run=SimpleNamespace(results=rs)))

    base = outcome({"a": {"B=1": 10e-6}, "b": {"B=1": 10e-6}, "c": {"B=1": 10e-6}})
    assert slow_subjects(outcome({"a": {"B=1": 10e-6}, "b": {"B=1": 5e-3}, "c": {"B=1": 6e-3}}), base, ("c", "a", "b")) == ("c", "b")
    assert slow_subjects(outcome({"a": {"B=1": 10e-6}}), base, ("a", "b")) == ()  # none slower
    sched = outcome({"s": {"B=1": 10e-6}})
    assert slow_subjects(outcome({"s": {"B=1": 5e-3}}), sched, ("a", "b")) == ("a", "b")  # a schedule's case: every kernel
