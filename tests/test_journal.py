"""The verification journal: a run cut short loses nothing it had finished, and the next run of the
same variants (same builds, settings, version) takes those outcomes instead of running them again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from audit.cli import main
from audit.runtime import Variant, verify_many
from audit.runtime._journal import Journal, unit_identity
from audit.runtime._results import SubjectResult
from audit.runtime._supervisor import UnitOutcome

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "mutate"


def _wrong(launch):
    res = launch.run_reference()
    launch.write_outputs({k: np.asarray(v) + 1.0 for k, v in res.items()})


def _variants() -> list[Variant]:
    return [Variant("a", ("strided_gather",)), Variant("b", ("strided_gather",), emulated={"strided_gather": _wrong}),
            Variant("c", ("trade_outcome_label",))]  # fmt: skip


def _run(journal, variants=None, seed=0, notes=None):
    def progress(ev):
        if notes is not None and ev.get("event") == "note":
            notes.append(ev["text"])

    return verify_many(REPO, variants or _variants(), backends=["emulated"], sizes=[1, 37], seed=seed, journal=journal, progress=progress)


def _verdicts(outs):
    return [(o.id, o.failed_rules, o.error) for o in outs]


def test_a_second_run_takes_every_finished_variant_from_the_journal(tmp_path):
    journal = tmp_path / "j.jsonl"
    first = _run(journal)
    assert len(journal.read_text().splitlines()) == 3
    notes: list[str] = []
    again = _run(journal, notes=notes)
    assert notes == [f"resumed 3 of 3 variant(s) from the journal {journal}"]
    assert _verdicts(again) == _verdicts(first) and _verdicts(first)[1][1]  # b is caught, from the journal too
    assert [r.to_dict() for o in again for r in o.outcome.run.results] == [r.to_dict() for o in first for r in o.outcome.run.results]


def test_a_cut_short_run_is_resumed_and_only_the_rest_runs(tmp_path):
    journal = tmp_path / "j.jsonl"
    whole = _run(tmp_path / "other.jsonl")
    _run(journal, variants=_variants()[:1])  # the run that was cut short after variant "a"
    notes: list[str] = []
    resumed = _run(journal, notes=notes)
    assert notes == [f"resumed 1 of 3 variant(s) from the journal {journal}"]
    assert _verdicts(resumed) == _verdicts(whole)
    assert len(journal.read_text().splitlines()) == 3


def test_other_settings_or_stand_ins_take_nothing(tmp_path):
    journal = tmp_path / "j.jsonl"
    _run(journal)
    notes: list[str] = []
    _run(journal, seed=1, notes=notes)  # another seed: other inputs
    swapped = [Variant("a", ("strided_gather",), emulated={"strided_gather": _wrong}), *_variants()[1:]]
    out = _run(journal, variants=swapped, seed=1, notes=notes)
    assert notes == [f"resumed 2 of 3 variant(s) from the journal {journal}"]  # "a" changed its kernel: it ran
    assert out[0].failed_rules


def test_an_edited_contract_runs_every_unit_again(tmp_path):
    """A contract edited between two runs (a tolerance, a domain, a buffer's values: what the verdicts are
    judged by) gives every unit a new identity; the unedited copy resumes them all."""
    import shutil

    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(REPO / "pyproject.toml", root)
    for folder in ("contracts", "kernels"):
        shutil.copytree(REPO / folder, root / folder)
    journal = tmp_path / "j.jsonl"

    def run() -> list[str]:
        notes: list[str] = []
        verify_many(root, _variants(), backends=["emulated"], sizes=[1, 37], journal=journal,
                    progress=lambda ev: notes.append(ev["text"]) if ev.get("event") == "note" else None)  # fmt: skip
        return notes

    run()
    assert run() == [f"resumed 3 of 3 variant(s) from the journal {journal}"]
    dims = root / "contracts" / "dims.toml"
    dims.write_text(dims.read_text().replace('K   = { value = 3,', 'K   = { value = 4,'))
    assert not [n for n in run() if n.startswith("resumed")]
    assert run() == [f"resumed 3 of 3 variant(s) from the journal {journal}"]  # the edited contracts' own lines


def test_contracts_digest_follows_each_contract_file(tmp_path):
    from audit.config import load_config
    from audit.hashing import contracts_digest

    (tmp_path / "pyproject.toml").write_text('[tool.wireup]\ncontracts = "c"\n')
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.toml").write_text("[dims]\nB = { min = 1, max = 8 }\n")
    cfg = load_config(tmp_path)
    a = contracts_digest(cfg)
    assert a == contracts_digest(cfg)
    (tmp_path / "c" / "b.toml").write_text("")  # a new file
    b = contracts_digest(cfg)
    (tmp_path / "c" / "b.toml").write_text("# a comment\n")  # its text
    c = contracts_digest(cfg)
    (tmp_path / "c" / "b.toml").rename(tmp_path / "c" / "d.toml")  # its name
    assert len({a, b, c, contracts_digest(cfg)}) == 4


def test_damaged_lines_and_internal_errors_are_never_taken(tmp_path):
    path = tmp_path / "j.jsonl"
    j = Journal(path)
    ok = UnitOutcome([SubjectResult("strided_gather", "kernel", "pass")], 1.5, ["n"])
    j.append("id-1", "a", ok, {})
    j.append("id-2", "b", UnitOutcome(error="the worker died"), {})
    with open(path, "a") as fh:
        fh.write('{"format": 1, "identity": "id-3", "results": [{"subject": 5}], "seconds": 1}\n')
        fh.write("not json\n")
        fh.write(json.dumps({"format": 99, "identity": "id-4", "results": [], "seconds": 1}) + "\n")
    got = j.load()
    assert set(got) == {"id-1"}
    assert got["id-1"][0].results[0].to_dict() == ok.results[0].to_dict() and got["id-1"][0].notes == ["n"]
    j.remove()
    assert not path.exists() and Journal(path).load() == {}


def test_identity_follows_the_cubin_bytes_and_the_settings(tmp_path):
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"one")
    unit = {"id": "x", "subjects": [["kernel", "k"]], "modules": {"k": {"cubin": str(cubin), "symbol": "k"}}}
    base = {"seed": 0, "sizes": [1]}
    a = unit_identity(base, unit, {"first_failure": True})
    assert a == unit_identity(base, unit, {"first_failure": True})
    assert a != unit_identity(base, unit, {"first_failure": False})
    assert a != unit_identity({"seed": 1, "sizes": [1]}, unit, {"first_failure": True})
    cubin.write_bytes(b"two")  # the same path, other code
    assert a != unit_identity(base, unit, {"first_failure": True})


def test_mutate_resumes_a_cut_short_run_and_forgets_it_once_recorded(tmp_path, capsys):
    from audit.config import load_config
    from audit.mutate import journal_path, run_mutation

    sys.path.insert(0, str(DATA))
    try:
        import stand_in

        cfg = load_config(REPO)
        journal = journal_path(cfg, ["strided_gather"])
        Journal(journal).remove()
        # the run that was cut short before its records: the CLI's settings, its verifications journaled
        run_mutation(REPO, ["strided_gather"], stand_in=stand_in.by_operator, journal=journal, python_paths=[str(DATA.resolve())])
        assert journal.is_file()
        code = main(["mutate", "--root", str(REPO), "strided_gather", "--stand-in", "stand_in:by_operator", "--output-dir", str(tmp_path)])
    finally:
        sys.path.remove(str(DATA))
    err = capsys.readouterr().err
    assert code == 1 and "note     resumed 10 of 10 variant(s) from the journal" in err, err
    assert not journal.exists()


def test_keep_journal_keeps_both_journals_for_a_run_with_more_passes(tmp_path, capsys):
    from audit.config import load_config
    from audit.mutate import journal_path
    from audit.runtime import sanitizer_journal_path

    sys.path.insert(0, str(DATA))
    try:
        journal = journal_path(load_config(REPO), ["strided_gather"])
        Journal(journal).remove()
        args = ["mutate", "--root", str(REPO), "strided_gather", "--stand-in", "stand_in:by_operator", "--output-dir", str(tmp_path)]
        assert main([*args, "--keep-journal"]) == 1
        assert journal.is_file()
        assert (tmp_path / "strided_gather.json").is_file()
        capsys.readouterr()
        assert main(args) == 1  # the next run takes every verification, then deletes the journals
    finally:
        sys.path.remove(str(DATA))
    assert "note     resumed 10 of 10 variant(s) from the journal" in capsys.readouterr().err
    assert not journal.exists() and not sanitizer_journal_path(journal).exists()


def test_fresh_discards_the_journal(tmp_path, capsys):
    from audit.config import load_config
    from audit.mutate import journal_path, run_mutation

    sys.path.insert(0, str(DATA))
    try:
        import stand_in

        journal = journal_path(load_config(REPO), ["strided_gather"])
        run_mutation(REPO, ["strided_gather"], stand_in=stand_in.by_operator, journal=journal, python_paths=[str(DATA.resolve())])
        code = main(["mutate", "--root", str(REPO), "strided_gather", "--stand-in", "stand_in:by_operator", "--output-dir", str(tmp_path), "--fresh"])
    finally:
        sys.path.remove(str(DATA))
    assert code == 1 and "resumed" not in capsys.readouterr().err
    assert not journal.exists()
