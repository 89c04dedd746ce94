"""``wireup mutate --reclassify``: recorded mutation results re-read with the current equivalence
records (no compiler, no GPU). The records are made on the emulated backend with stand-in kernels."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from audit.api import load_project
from audit.cli import main
from audit.mutate import reclassify, run_mutation, write_kernel_json
from audit.mutate._reclassify import dump

REPO = Path(__file__).resolve().parents[1]
LOOP = "for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B; b += gridDim.x * blockDim.x)"
RECORD_LOOP = f'[[equivalent]]\nkernel = "strided_gather"\nid = "loop:11:59:0"\ncode = "{LOOP}"\nreason = "proof of the loop"\n'
RECORD_ACCUM = f'[[equivalent]]\nkernel = "strided_gather"\nid = "accum:11:66:0"\ncode = "{LOOP}"\nreason = "proof of the accum"\n'


def _wrong(launch):
    out = launch.run_reference()
    launch.write_outputs({k: v * 1.5 for k, v in out.items()})


def _survive_loop_and_accum(m):
    return {} if m.operator in ("loop", "accum") else {m.kernel: _wrong}


def _record(tmp_path: Path, eq_text: str, kernels=("strided_gather",), **kw) -> Path:
    """Run the stand-in pipeline with the records ``eq_text`` and write its JSON to ``tmp_path/out``."""
    eq = tmp_path / "run-eq.toml"
    eq.write_text(eq_text)
    run = run_mutation(REPO, list(kernels), equivalent_file=eq, stand_in=_survive_loop_and_accum, sizes=(1, 37), **kw)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    for k in run.kernels:
        write_kernel_json(k, run, out)
    return out


def test_reclassify_applies_records_written_after_the_run(tmp_path, capsys):
    out = _record(tmp_path, "")
    path = out / "strided_gather.json"
    before = json.loads(path.read_text())
    assert (before["equivalent"], before["survived"], before["score"]) == (0, 2, round(7 / 9, 4))
    eq = tmp_path / "eq.toml"
    eq.write_text(RECORD_LOOP + RECORD_ACCUM)

    code = main(["mutate", "--root", str(REPO), "--reclassify", "--output-dir", str(out), "--equivalent", str(eq)])
    assert code == 0  # every survivor is now proven equivalent
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["kernel", "mutants", "caught", "equivalent", "survived", "score", "file"]
    assert text.splitlines()[1].split() == ["strided_gather", "9", "7", "2", "0", "100%", "rewritten"]
    assert text.endswith("reclassified 1 file(s) in " + str(out) + ": 1 rewritten.\n")
    after = json.loads(path.read_text())
    assert (after["equivalent"], after["survived"], after["score"]) == (2, 0, 1.0)
    assert [(s["id"], s["equivalent"], s["reason"]) for s in after["survivors"]] == [
        ("loop:11:59:0", True, "proof of the loop"), ("accum:11:66:0", True, "proof of the accum"),
    ]  # fmt: skip
    # the run's verdicts are kept: only the classification and what follows from it changed
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"equivalent", "survived", "score", "survivors", "settings"}
    assert after["settings"] == {**before["settings"], "equivalent_file": str(eq)}
    assert after["results"] == before["results"] and after["by_check"] == before["by_check"] and after["date"] == before["date"]


def test_reclassified_record_equals_a_fresh_run_with_the_same_records(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fresh = json.loads((_record(tmp_path / "a", RECORD_LOOP) / "strided_gather.json").read_text())
    old = _record(tmp_path / "b", "")
    cfg, cs = load_project(REPO)
    (r,) = reclassify(old, cfg, cs, equivalent_file=tmp_path / "a" / "run-eq.toml")
    assert r.changed and not r.problem
    got = json.loads((old / "strided_gather.json").read_text())
    for d in (fresh, got):
        d.pop("date")
    assert got == fresh
    assert len(r.unclassified) == 1 and r.unclassified[0]["id"] == "accum:11:66:0"


def test_reclassify_is_deterministic_and_leaves_unchanged_files_alone(tmp_path, capsys):
    out = _record(tmp_path, RECORD_LOOP)
    path = out / "strided_gather.json"
    eq = tmp_path / "run-eq.toml"
    cfg, cs = load_project(REPO)
    first = reclassify(out, cfg, cs, equivalent_file=eq)
    text = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    second = reclassify(out, cfg, cs, equivalent_file=eq)
    assert not second[0].changed and path.read_bytes() == text and path.stat().st_mtime_ns == mtime
    assert dump(json.loads(text)) == text.decode()
    assert [r.changed for r in first] == [False]  # the run classified with the same records: nothing to rewrite
    # dry run: nothing written
    eq.write_text(RECORD_LOOP + RECORD_ACCUM)
    (r,) = reclassify(out, cfg, cs, equivalent_file=eq, write=False)
    assert r.changed and path.read_bytes() == text
    assert [p.name for p in out.iterdir()] == ["strided_gather.json"]  # no temporary file left behind


def test_records_whose_source_changed_are_left_as_they_were(tmp_path, capsys):
    out = _record(tmp_path, "")
    path = out / "strided_gather.json"
    data = json.loads(path.read_text())
    data["source_sha256"] = hashlib.sha256(b"another source").hexdigest()
    path.write_text(json.dumps(data))
    text = path.read_text()
    eq = tmp_path / "eq.toml"
    eq.write_text(RECORD_LOOP)
    assert main(["mutate", "--root", str(REPO), "--reclassify", "strided_gather", "--output-dir", str(out), "--equivalent", str(eq)]) == 1
    shown = capsys.readouterr().out
    assert shown.splitlines()[1].split()[-4:] == ["left", "as", "it", "was"]
    assert (f'error: {path}: "kernels/strided_gather_kernel.cu" changed since the run, so its mutant ids may name other code; '
            "re-run `wireup mutate strided_gather`.") in shown  # fmt: skip
    assert path.read_text() == text


def test_unknown_kernels_and_unknown_survivors_are_reported(tmp_path, capsys):
    out = _record(tmp_path, "")
    data = json.loads((out / "strided_gather.json").read_text())
    (out / "ghost.json").write_text(json.dumps({**data, "kernel": "ghost"}))
    odd = json.loads((out / "strided_gather.json").read_text())
    odd["results"].append({"id": "ror:99:1:0", "status": "survived"})
    (out / "strided_gather.json").write_text(json.dumps(odd))
    (out / "broken.json").write_text("{")
    cfg, cs = load_project(REPO)
    got = {r.path.name: r.problem for r in reclassify(out, cfg, cs, equivalent_file=tmp_path / "run-eq.toml")}
    assert got["ghost.json"] == 'names kernel "ghost", which the contracts do not have'
    assert got["strided_gather.json"].startswith('surviving mutant "ror:99:1:0" is no mutant of "kernels/strided_gather_kernel.cu"')
    assert got["broken.json"].startswith("cannot be read as JSON")


def test_stale_records_are_reported_and_records_of_other_operators_are_not_stale(tmp_path, capsys):
    out = _record(tmp_path, "")
    eq = tmp_path / "eq.toml"
    eq.write_text(
        RECORD_LOOP.replace("proof of the loop", "p")
        + f'[[equivalent]]\nkernel = "strided_gather"\nid = "ror:11:59:0"\ncode = "{LOOP}"\nreason = "r"\n'
        + '[[equivalent]]\nkernel = "strided_gather"\nid = "aor:12:53:0"\ncode = "dst[b] = src[b];"\nreason = "r"\n'
    )
    assert main(["mutate", "--root", str(REPO), "--reclassify", "--output-dir", str(out), "--equivalent", str(eq)]) == 1
    shown = capsys.readouterr().out
    data = json.loads((out / "strided_gather.json").read_text())
    # ror:11:59:0 was caught in the run by a verify check: its record is not stale (it names the current
    # line) but refuted, since a record claims no admitted launch tells the mutant apart
    caught_by = next(r["checks"][0] for r in data["results"] if r["id"] == "ror:11:59:0")
    assert data["stale_equivalences"] == [
        f'{eq}:11: equivalence record "aor:12:53:0" of kernel "strided_gather" quotes "dst[b] = src[b];" but line 12 now reads '
        '"dst[b] = __ldg(src + (size_t)b * row_stride + col);"; the source changed, so the record is ignored until it is re-checked.',
        f'{eq}:6: equivalence record "ror:11:59:0" of kernel "strided_gather" is refuted: the run caught ror:11:59:0 ({caught_by}), so its '
        "argument no longer holds (it relies on a value the verification no longer fixes); delete or narrow the record.",
    ]
    assert "warning: " + data["stale_equivalences"][0] in shown
    assert "1 surviving mutant(s)" in shown and "  strided_gather accum:11:66:0  kernels/strided_gather_kernel.cu:11  " in shown


def test_a_run_restricted_to_some_operators_does_not_call_other_records_stale(tmp_path):
    eq = tmp_path / "eq.toml"
    eq.write_text(RECORD_ACCUM)
    run = run_mutation(REPO, ["strided_gather"], operators=["aor"], equivalent_file=eq, stand_in=lambda m: {m.kernel: _wrong}, sizes=(1,))
    assert run.kernels[0].stale == []


def test_an_unscored_record_stays_unscored(tmp_path):
    def bad_baseline(name):
        return {name: _wrong}

    out = _record(tmp_path, "", baseline_stand_in=bad_baseline)
    path = out / "strided_gather.json"
    before = path.read_text()
    assert json.loads(before)["baseline"] == "fail"
    eq = tmp_path / "eq.toml"
    eq.write_text(RECORD_LOOP)
    code = main(["mutate", "--root", str(REPO), "--reclassify", "--output-dir", str(out), "--equivalent", str(eq)])
    assert code == 1
    after = json.loads(path.read_text())
    assert (after["baseline"], after["score"], after["survivors"], after["mutants"]) == ("fail", None, [], 0)


def test_a_record_from_before_the_baseline_check_is_reclassified(tmp_path):
    out = _record(tmp_path, "")
    path = out / "strided_gather.json"
    data = json.loads(path.read_text())
    for key in ("baseline", "baseline_findings", "not_scored"):
        data.pop(key)
    path.write_text(dump(data))
    eq = tmp_path / "eq.toml"
    eq.write_text(RECORD_LOOP + RECORD_ACCUM)
    cfg, cs = load_project(REPO)
    (r,) = reclassify(out, cfg, cs, equivalent_file=eq)
    assert r.changed and r.data["score"] == 1.0 and "baseline" not in r.data


def test_reclassify_usage_errors(tmp_path, capsys):
    assert main(["mutate", "--root", str(REPO), "--reclassify", "--output-dir", str(tmp_path / "none")]) == 2
    assert 'no mutation results folder "' in capsys.readouterr().err
    assert main(["mutate", "--root", str(REPO), "--reclassify", "--output-dir", str(tmp_path)]) == 2
    assert "no mutation results (*.json)" in capsys.readouterr().err
    assert main(["mutate", "--root", str(REPO), "--reclassify", "strided_gather", "--output-dir", str(tmp_path)]) == 2
    assert 'no mutation result "' in capsys.readouterr().err
    assert main(["mutate", "--root", str(REPO), "--reclassify", "--sizes", "1", "--output-dir", str(tmp_path)]) == 2
    assert "--sizes belongs to a run" in capsys.readouterr().err


def test_shipped_results_are_classified_with_the_shipped_records():
    """reports/mutation/*.json (the H200 run) say what `wireup mutate --reclassify` would write now."""
    folder = REPO / "reports" / "mutation"
    if not any(folder.glob("*.json")):
        pytest.skip("no recorded mutation results")
    cfg, cs = load_project(REPO)
    for r in reclassify(folder, cfg, cs, write=False):
        if "changed since the run" in r.problem:
            continue  # a kernel edited after the run: its result waits for the next GPU run
        assert not r.problem, f"{r.path}: {r.problem}"
        assert not r.changed, f"{r.path} is not reclassified with the current equivalence records: run `wireup mutate --reclassify`"
        assert r.data.get("stale_equivalences") == [], r.data.get("stale_equivalences")

