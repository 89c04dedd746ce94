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
    # the emulated run built nothing: its records name no code hash, so they cover no build
    assert r.code_hashes == {} and r.code_hash_version == ""
    cfg, cs = load_project(project)
    status = freshness(cs, cfg, recs)
    assert status["scale_rows"].status == "stale"
    assert status["scale_rows"].reason.endswith(': "" then, "-O3 -lineinfo -std=c++17" now')  # no build, no flags
    # sorted, indented JSON that diffs well
    text = (folder / "kernels" / "scale_rows.emulated.json").read_text()
    assert json.loads(text)["subject"] == "scale_rows" and text.endswith("\n") and '\n  "arch"' in text


class _Build:
    """What build_record reads of a BuildResult: a build of the generality sources on another machine."""

    def __init__(self, cfg, cs, code="c0de"):
        from audit.compile._compile import effective_flags

        sources = sorted({k.source for k in cs.kernels})
        self.flags, self.arch, self.nvcc_version = effective_flags(cfg), cfg.arch, "13.0.88 (test)"
        self.cubin_hashes = {s: "cub1" + s for s in sources}  # bytes that differ per machine do not matter
        self.code_hashes = {s: code + s for s in sources}


def test_records_of_a_built_run_are_fresh_against_the_same_code_only(project):
    from audit.runtime._evidence import write_evidence

    cfg, cs = load_project(project)
    out = verify(project, emulated={}, sizes=(1,), chain_sizes=(37,), evidence_dir=project / "scratch")
    out.run.build = _Build(cfg, cs)
    paths, _ = write_evidence(out.run, cs, cfg, project / "evidence")
    recs = load_records(project / "evidence")
    assert len(paths) == len(recs) == 6
    r = next(r for r in recs if r.subject == "gen_step")
    assert r.code_hashes == {s: "c0de" + s for s in r.cubin_hashes} and r.code_hash_version == "wireup-code-1"
    assert r.build_flags == ["-O3", "-lineinfo", "-std=c++17"] and r.format == 3
    # what the run read outside the contracts: a schedule's dims and related schedules, a kernel's launches too
    assert sorted(r.inputs) == ["dims", "schedules"]
    assert sorted(next(r for r in recs if r.subject == "scale_rows").inputs) == ["dims", "isv", "launches"]
    here = _Build(cfg, cs)
    here.cubin_hashes = {s: "other bytes" for s in here.cubin_hashes}
    status = freshness(cs, cfg, recs, here)
    assert {f.status for f in status.values()} == {"verified"} and all(f.code_compared and f.inputs_compared for f in status.values())
    other = freshness(cs, cfg, recs, _Build(cfg, cs, code="beef"))
    assert {f.status for f in other.values()} == {"stale"}
    assert other["scale_rows"].reason.startswith('the code built from "kernels/generality.cu" differs from the code the last one ran (')
    # without a build here the record matches on its source, contract, flags and architecture
    unbuilt = freshness(cs, cfg, recs)
    assert {f.status for f in unbuilt.values()} == {"verified"} and not any(f.code_compared for f in unbuilt.values())


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
