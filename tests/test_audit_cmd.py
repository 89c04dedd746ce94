"""``wireup audit``: the quick-start command end to end on the mini project (build switched off)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import audit.commands.audit as audit_cmd
from audit.api import load_project
from audit.cli import main
from audit.errors import EnvironmentProblem
from audit.compile import CODE_HASH_VERSION
from audit.evidence import EvidenceRecord, freshness, kernel_inputs, kernel_source_hash, load_records, write_record
from audit.hashing import contract_hash

MINI = Path(__file__).parent / "data" / "report" / "mini"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    def missing(*args, **kwargs):
        raise EnvironmentProblem("nvcc is not on PATH (switched off by the test)")

    import audit.compile
    import audit.compile.facts

    monkeypatch.setattr(audit.compile, "build_kernels", missing)
    monkeypatch.setattr(audit.compile.facts, "build_kernels", missing)
    monkeypatch.setattr(audit_cmd, "gpu_available", lambda: "no GPU here")
    dst = tmp_path / "mini"
    shutil.copytree(MINI, dst, ignore=shutil.ignore_patterns(".wireup-cache", "reports"))
    return dst


def record_all(root: Path, verdict: str = "pass", device: str = "NVIDIA H200", date: str = "2026-12-02T10:00:00Z", inputs: bool = True) -> None:
    cfg, cs = load_project(root)
    for k in cs.kernels:
        write_record(cfg.path(cfg.evidence), EvidenceRecord(
            subject=k.name, kind="kernel", backend="pycuda", verdict=verdict, source_hash=kernel_source_hash(cs, cfg, k),
            contract_hash=contract_hash(k), build_flags=["-O3", "-lineinfo", "-std=c++17"], arch="sm_90",
            code_hashes={k.source: "c0de"}, code_hash_version=CODE_HASH_VERSION, device={"name": device}, date=date,
            inputs=kernel_inputs(cs, k) if inputs else {},
        ))  # fmt: skip


def test_audit_without_gpu_relies_on_recorded_evidence(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--root", str(root)]) == 0
    out = capsys.readouterr()
    steps = [line for line in out.err.splitlines() if line.startswith("wireup audit: [")]
    assert [s.split("]")[0] for s in steps] == ["wireup audit: [1/4", "wireup audit: [2/4", "wireup audit: [3/4", "wireup audit: [4/4"]
    assert "[2/4] build: not built here (nvcc is not on PATH (switched off by the test))" in out.err
    assert "[3/4] verify: no GPU here: using recorded evidence (0 of 5 kernels verified, 0 stale, 5 missing; compiled code not compared (not built here))" in out.err
    assert "[4/4] report: wrote reports/dqn-wire-up-audit.md" in out.err
    assert out.out.startswith("wireup audit: incomplete: statically sound, not yet fully proven.\n")
    assert (root / "reports" / "dqn-wire-up-audit.md").is_file()


def test_audit_check_mode(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--root", str(root), "--check"]) == 1
    assert "report: reports/dqn-wire-up-audit.md does not exist" in capsys.readouterr().err
    assert main(["report", "--root", str(root)]) == 0
    assert main(["audit", "--root", str(root), "--check"]) == 0
    assert "is up to date" in capsys.readouterr().err


def test_audit_fails_on_check_errors(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k = root / "contracts" / "kernels.toml"
    k.write_text(k.read_text().replace('{ name = "labels", dtype = "i32", shape = ["B"], role = "out" }', '{ name = "labels", dtype = "i32", shape = ["N"], role = "out" }'))
    assert main(["audit", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert 'SHAPE_MISMATCH Kernel "make_labels"' in out
    assert "wireup audit: fail: not wired up." in out


def test_audit_summarises_fresh_and_failed_evidence(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record_all(root)
    assert main(["audit", "--root", str(root)]) == 0
    err = capsys.readouterr().err
    assert "using recorded evidence (5 of 5 kernels verified on NVIDIA H200, newest 2026-12-02, 0 stale; compiled code not compared (not built here))" in err
    record_all(root, verdict="fail", date="2026-12-03T10:00:00Z")
    assert main(["audit", "--root", str(root)]) == 1
    out = capsys.readouterr()
    assert "0 of 5 kernels verified, newest 2026-12-03, 0 stale, 5 failed; compiled code not compared" in out.err
    assert "GPU verification failed for" in out.out


def test_audit_runs_verify_where_a_gpu_is_present(root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls = []

    def fake_cli(argv):
        calls.append(argv)
        record_all(root, device="Fake GPU")
        return 0

    monkeypatch.setattr(audit_cmd, "gpu_available", lambda: None)
    monkeypatch.setattr("audit.cli.main", fake_cli)
    assert audit_cmd.run(audit_cmd.argparse.Namespace(root=str(root), check=False, no_verify=False, base=None)) == 0
    assert calls == [["verify", "--root", str(root.resolve())]]
    assert "[3/4] verify: 5 of 5 kernels verified on Fake GPU" in capsys.readouterr().err
    # the check ran again after verify: the report and its findings see the new records
    assert "| GPU-verified | ✅ 5 of 5 (0 stale, 0 missing, 0 failed) |" in (root / "reports" / "dqn-wire-up-audit.md").read_text()


def test_evidence_summary_wording(root: Path) -> None:
    record_all(root)
    cfg, cs = load_project(root)
    text, failed = audit_cmd.evidence_summary(freshness(cs, cfg, load_records(cfg.path(cfg.evidence))))
    assert (text, failed) == ("5 of 5 kernels verified on NVIDIA H200, newest 2026-12-02, 0 stale; compiled code not compared (not built here)", 0)


def test_evidence_summary_counts_records_that_predate_input_hashes(root: Path) -> None:
    record_all(root, inputs=False)
    cfg, cs = load_project(root)
    text, failed = audit_cmd.evidence_summary(freshness(cs, cfg, load_records(cfg.path(cfg.evidence))))
    assert (text, failed) == (
        "5 of 5 kernels verified on NVIDIA H200, newest 2026-12-02, 0 stale; compiled code not compared (not built here); 5 of them "
        "verified before records named their inputs (dims, ISV layout, bound buffers, writers' domains), not compared",
        0,
    )


def test_the_report_says_how_many_records_predate_input_hashes(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record_all(root, inputs=False)
    assert main(["report", "--root", str(root)]) == 0
    text = (root / "reports" / "dqn-wire-up-audit.md").read_text()
    assert (
        "| GPU-verified | ✅ 5 of 5 (0 stale, 0 missing, 0 failed); 5 verified before records named their inputs: an edited dim, "
        "ISV layout, bound buffer or writer's domain is not seen for them |"
    ) in text
    record_all(root)
    assert main(["report", "--root", str(root)]) == 0
    assert "| GPU-verified | ✅ 5 of 5 (0 stale, 0 missing, 0 failed) |" in (root / "reports" / "dqn-wire-up-audit.md").read_text()


def test_audit_exits_3_when_verify_stops_on_an_internal_error(root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    record_all(root)  # even with passing records, a crashed verify is no pass
    monkeypatch.setattr(audit_cmd, "gpu_available", lambda: None)
    monkeypatch.setattr("audit.cli.main", lambda argv: 3)
    assert audit_cmd.run(audit_cmd.argparse.Namespace(root=str(root), check=False, no_verify=False, base=None)) == 3
    assert "[3/4] verify: stopped by an internal error (see above): using recorded evidence (5 of 5 kernels verified" in capsys.readouterr().err
