"""Evidence records of wireup verify: written atomically, read back, matched by hashes."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import numpy as np
import pytest

from audit.api import load_project
from audit.evidence import freshness, load_records
from audit.runtime import verify


@pytest.fixture
def project(tmp_path, request):
    src = request.config.rootpath / "tests" / "data" / "generality"
    dst = tmp_path / "generality"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def test_records_are_written_read_back_and_fresh(project):
    folder = project / "evidence"
    out = verify(project, emulated={}, sizes=(1, 37), chain_sizes=(37,), evidence_dir=folder)
    assert out.result.exit_code == 0
    recs = load_records(folder)
    assert {(r.kind, r.subject) for r in recs} == {
        ("kernel", "scale_rows"), ("kernel", "clamp_inplace"), ("kernel", "row_softmax"),
        ("kernel", "masked_scale"), ("kernel", "col_sum_atomic"), ("schedule", "gen_step"),
    }  # fmt: skip
    assert len(out.evidence) == 6 and all(p.is_file() for p in out.evidence)
    r = next(r for r in recs if r.subject == "scale_rows")
    assert r.verdict == "pass" and r.backend == "emulated" and r.seed == 0
    assert r.sizes == ["B=1", "B=37"]
    assert r.versions["numpy"] == np.__version__ and r.versions["python"]
    assert r.device["name"] == "emulated (numpy)"
    assert dt.datetime.fromisoformat(r.date).tzinfo is not None
    assert r.duration_s is not None and r.duration_s >= 0
    names = {c.name for c in r.checks}
    assert {"reference", "written", "guards", "inputs_unmodified", "determinism", "divisor_zero"} <= names
    assert all(c.verdict in ("pass", "fail", "not_run") for c in r.checks)
    ref = next(c for c in r.checks if c.name == "reference" and c.verdict == "pass")
    assert ref.rel_norm_err is not None and ref.rel_norm_err < 1e-5
    # the static side sees the current sources as verified
    cfg, cs = load_project(project)
    status = freshness(cs, cfg, recs)
    assert status["scale_rows"].status == "verified"
    assert status["schedule:gen_step"].status == "verified"
    # sorted, indented JSON that diffs well
    text = (folder / "kernels" / "scale_rows.emulated.json").read_text()
    assert json.loads(text)["subject"] == "scale_rows" and text.endswith("\n") and '\n  "arch"' in text


def test_an_edited_kernel_makes_its_record_stale(project):
    folder = project / "evidence"
    verify(project, kernels=["clamp_inplace"], emulated={}, sizes=(1,), evidence_dir=folder)
    cu = project / "kernels" / "generality.cu"
    cu.write_text(cu.read_text() + "\n// edited\n")
    cfg, cs = load_project(project)
    assert freshness(cs, cfg, load_records(folder))["clamp_inplace"].status == "stale"


def test_a_failed_run_records_fail(project):
    def broken(launch):
        launch.default()
        launch.tensor("v")[...] = 0.0

    folder = project / "evidence"
    out = verify(project, kernels=["clamp_inplace"], emulated={"clamp_inplace": broken}, sizes=(37,), evidence_dir=folder)
    assert out.result.exit_code == 1
    (rec,) = load_records(folder)
    assert rec.verdict == "fail" and rec.failed_checks


def test_no_evidence_and_emulated_defaults_write_nothing(project):
    verify(project, kernels=["clamp_inplace"], emulated={}, sizes=(1,), evidence_dir=project / "ev", evidence=False)
    assert not (project / "ev").exists()
    verify(project, kernels=["clamp_inplace"], emulated={}, sizes=(1,))
    assert not (project / "evidence").exists()  # an emulated run proves nothing about a GPU


def test_replacement_sources_get_no_record(project):
    out = verify(project, kernels=["clamp_inplace"], emulated={}, sizes=(1,), evidence_dir=project / "ev",
                 source_overrides={"clamp_inplace": project / "kernels" / "generality.cu"})  # fmt: skip
    assert out.evidence == [] and "replacement source" in out.evidence_skipped[0]
