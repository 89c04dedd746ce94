"""Fixture pairs of the evidence rules (``tests/data/rules/EVIDENCE_*/{good,bad}``) and their message variants.

Each good set is the compact chain of the static fixtures plus a passing record (evidence format 2: source,
contract, flags, architecture and code hashes) of every kernel and schedule under ``reports/evidence``;
each bad set changes one thing (a record gone, a contract value, a verdict). The records are committed
data, written once by ``wireup verify``'s record writer with the hashes of the fixture tree; a test never
writes them.

The pairs run with the build switched off, so their findings do not depend on the nvcc installed: the
records then match on their source, contract, flags and architecture. The variants below give the
evidence rules a build (one whose code hash matches the records, one whose does not) and edit records in
memory, pinning every stale reason.
"""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest

import audit.compile.facts
from audit.cli import main
from audit.compile import BuildResult, SourceBuild
from audit.errors import EnvironmentProblem
from audit.rules import iter_rules

RULES = Path(__file__).resolve().parent / "data" / "rules"
EVIDENCE = {r.id: r for r in iter_rules() if r.category == "evidence"}
NVCC = "13.0.88 (cuda_13.0.r13.0/compiler.36424714_0)"
CHAIN_CODE = "382ca875a2ad216acb834d1ee689ec3b194a0b02aa3fac9fca0c08789b2dac7f"  # the records' code hash


def build_returning(code: str | None, nvcc: str = NVCC):
    """A stand-in for build_kernels: nvcc missing (``code`` None) or one compiled source with that code hash."""

    def build(cfg, cs, **kwargs):
        if code is None:
            raise EnvironmentProblem("nvcc is not on PATH (switched off by the test)")
        sb = SourceBuild("kernels/chain.cu", True, None, None, "", [], {}, True, "key", "cubin", 1, code)
        return BuildResult({"kernels/chain.cu": sb}, "sm_90", ["-O3", "-lineinfo", "-std=c++17"], nvcc)

    return build


@pytest.fixture
def build(monkeypatch: pytest.MonkeyPatch):
    """Switch the build off; ``build(code)`` switches a stand-in build on."""

    def use(code: str | None, nvcc: str = NVCC) -> None:
        monkeypatch.setattr(audit.compile.facts, "build_kernels", build_returning(code, nvcc))

    use(None)
    return use


def run_check(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, list[str]]:
    rc = main(["check", "--root", str(root), *args])
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines and lines[-1].startswith("wireup check: "), out
    return rc, lines[:-1]


def expected_lines(rule_id: str) -> list[str]:
    text = (RULES / rule_id / "bad" / "expected.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_every_evidence_rule_has_a_fixture_pair() -> None:
    assert {p.name for p in RULES.iterdir() if p.name.startswith("EVIDENCE_")} == set(EVIDENCE)
    for rule_id in EVIDENCE:
        for half in ("good", "bad"):
            assert list((RULES / rule_id / half / "contracts").glob("*.toml"))
        assert list((RULES / rule_id / "good" / "reports" / "evidence").glob("*/*.json"))
        assert expected_lines(rule_id)


@pytest.mark.parametrize("rule_id", sorted(EVIDENCE))
def test_good_fixture_is_clean(rule_id: str, build, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_check(capsys, RULES / rule_id / "good", "--select", "evidence") == (0, [])
    assert run_check(capsys, RULES / rule_id / "good", "--select", "evidence", "--require-evidence") == (0, [])
    build(CHAIN_CODE)  # a build whose code is the code the records name
    assert run_check(capsys, RULES / rule_id / "good", "--select", "evidence", "--require-evidence") == (0, [])


@pytest.mark.parametrize("rule_id", sorted(EVIDENCE))
def test_bad_fixture_gives_the_expected_findings(rule_id: str, build, capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines = run_check(capsys, RULES / rule_id / "bad", "--select", rule_id)
    assert lines == expected_lines(rule_id)
    error = EVIDENCE[rule_id].severity.value == "error"
    assert rc == (1 if error else 0)
    # --require-evidence makes stale and missing evidence errors
    rc, strict = run_check(capsys, RULES / rule_id / "bad", "--select", rule_id, "--require-evidence")
    assert rc == 1
    assert strict == [line.replace(f" {rule_id} (warning) ", f" {rule_id} ") for line in lines]


@pytest.mark.parametrize("rule_id", sorted(EVIDENCE))
def test_bad_fixture_is_one_small_change(rule_id: str) -> None:
    good, bad = RULES / rule_id / "good", RULES / rule_id / "bad"

    def listing(root: Path) -> set[str]:
        return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".wireup-cache" not in p.parts}

    a, b = listing(good), listing(bad) - {"expected.txt"}
    assert len(a ^ b) <= 1, f"{rule_id}: files added or removed: {sorted(a ^ b)}"
    changed = 0
    for rel in sorted(a & b):
        x = (good / rel).read_text(encoding="utf-8").splitlines()
        y = (bad / rel).read_text(encoding="utf-8").splitlines()
        changed += sum(1 for d in difflib.ndiff(x, y) if d[:1] in "+-")
    assert changed <= 14, f"{rule_id}: bad differs from good in {changed} lines"
    assert changed or a ^ b


# --- every stale reason, on a copy of the good set -------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    dst = tmp_path / "chain"
    shutil.copytree(RULES / "EVIDENCE_STALE" / "good", dst, ignore=shutil.ignore_patterns(".wireup-cache"))
    return dst


def edit_record(root: Path, subject: str, **changes) -> None:
    path = root / "reports" / "evidence" / "kernels" / f"{subject}.pycuda.json"
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def stale_lines(capsys, root: Path) -> list[str]:
    rc, lines = run_check(capsys, root, "--select", "EVIDENCE_STALE", "--require-evidence")
    assert rc == (1 if lines else 0)
    return lines


def test_code_that_differs_from_the_verified_code_is_stale(project: Path, build, capsys) -> None:
    build("f" * 64)
    lines = stale_lines(capsys, project)
    assert len(lines) == 9  # every kernel and schedule runs kernels/chain.cu
    assert lines[0] == (
        'contracts/kernels.toml:3: EVIDENCE_STALE Kernel "make_label" has no GPU verification of its current build: the code built from '
        '"kernels/chain.cu" differs from the code the last one ran (2026-12-02).'
    )
    build("f" * 64, nvcc="12.9.41 (test)")
    assert stale_lines(capsys, project)[0].endswith(
        f'differs from the code the last one ran (2026-12-02); nvcc {NVCC} then, 12.9.41 (test) now.'
    )
    # another toolkit that produces the same code keeps the evidence
    build(CHAIN_CODE, nvcc="12.9.41 (test)")
    assert stale_lines(capsys, project) == []


def test_a_record_without_code_hashes_is_stale_with_or_without_a_build(project: Path, build, capsys) -> None:
    edit_record(project, "loss", code_hashes=None, code_hash_version=None, format=1)
    want = [
        'contracts/kernels.toml:36: EVIDENCE_STALE Kernel "loss" has no GPU verification of its current build: the last one (2026-12-02) '
        "recorded no wireup-code-1 code hash, only cubin hashes, which older builds made depend on the checkout's path and file times: "
        "verify it again."
    ]
    assert stale_lines(capsys, project) == want
    build(CHAIN_CODE)
    assert stale_lines(capsys, project) == want


def test_changed_flags_architecture_and_source_are_stale(project: Path, build, capsys) -> None:
    build(CHAIN_CODE)
    edit_record(project, "loss", build_flags=["-O2", "-std=c++17"])
    edit_record(project, "reduce", arch="sm_80")
    assert stale_lines(capsys, project) == [
        'contracts/kernels.toml:36: EVIDENCE_STALE Kernel "loss" has no GPU verification of its current build: its build flags changed '
        'since the last one (2026-12-02): "-O2 -std=c++17" then, "-O3 -lineinfo -std=c++17" now.',
        'contracts/kernels.toml:72: EVIDENCE_STALE Kernel "reduce" has no GPU verification of its current build: its architecture changed '
        'since the last one (2026-12-02): "sm_80" then, "sm_90" now.',
    ]
    cu = project / "kernels" / "chain.cu"
    cu.write_text(cu.read_text() + "\n// edited\n")
    lines = stale_lines(capsys, project)
    assert len(lines) == 9 and lines[0].endswith("its source changed since the last one (2026-12-02).")


def test_a_source_that_does_not_compile_here_cannot_be_compared(project: Path, build, capsys, monkeypatch) -> None:
    def failing(cfg, cs, **kwargs):
        sb = SourceBuild("kernels/chain.cu", False, None, None, "error", [], {}, False, "key")
        return BuildResult({"kernels/chain.cu": sb}, "sm_90", ["-O3", "-lineinfo", "-std=c++17"], NVCC)

    monkeypatch.setattr(audit.compile.facts, "build_kernels", failing)
    lines = stale_lines(capsys, project)
    assert lines[0].endswith('"kernels/chain.cu" did not compile here, so its code cannot be compared with the last one (2026-12-02).')


def name_inputs(root: Path) -> None:
    """Give every record what its verification read outside its contract, as verify's record writer does
    (evidence format 3); the committed records predate it."""
    from audit.api import load_project
    from audit.evidence import kernel_inputs, schedule_inputs

    cfg, cs = load_project(root)
    for path in sorted((root / "reports" / "evidence").glob("*/*.json")):
        data = json.loads(path.read_text())
        subject = data["subject"]
        data["inputs"] = kernel_inputs(cs, cs.kernel(subject)) if data["kind"] == "kernel" else schedule_inputs(cs, cs.schedule_map[subject])
        data["format"] = 3
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def edit_text(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_buffer_domain_an_input_is_drawn_from_makes_its_readers_stale(project: Path, build, capsys) -> None:
    name_inputs(project)
    assert stale_lines(capsys, project) == []
    # make_label reads y; verify draws y from the buffer's domain, which make_label's contract does not hold
    edit_text(project / "contracts" / "buffers.toml", 'name = "y"\ndtype = "f32"\nshape = ["B"]\n', 'name = "y"\ndtype = "f32"\nshape = ["B"]\nvalues = { min = -1, max = 1 }\n')
    assert stale_lines(capsys, project) == [
        'contracts/kernels.toml:3: EVIDENCE_STALE Kernel "make_label" has no GPU verification of its current build: the steps that '
        "launch it, the buffers they bind or the domains the writers of those buffers declare changed since the last one (2026-12-02).",
        'contracts/schedules.toml:3: EVIDENCE_STALE Schedule "forward" has no GPU verification of its current build: its contract '
        "changed since the last one (2026-12-02).",
        'contracts/schedules.toml:21: EVIDENCE_STALE Schedule "backward" has no GPU verification of its current build: the schedules '
        "it runs after or is equivalent to changed since the last one (2026-12-02).",
        'contracts/schedules.toml:41: EVIDENCE_STALE Schedule "backward_fused" has no GPU verification of its current build: the schedules '
        "it runs after or is equivalent to changed since the last one (2026-12-02).",
    ]
    # the other kernels bind x, W, b, h, label, loss, dh...: not y, so their records still cover them


def test_a_record_that_names_no_inputs_is_matched_without_them(project: Path, build, capsys) -> None:
    """Records written before evidence format 3 keep covering their kernels (the domain change above goes
    unseen for them, as before); wireup audit counts them (tests/test_audit_cmd.py)."""
    edit_text(project / "contracts" / "buffers.toml", 'name = "y"\ndtype = "f32"\nshape = ["B"]\n', 'name = "y"\ndtype = "f32"\nshape = ["B"]\nvalues = { min = -1, max = 1 }\n')
    lines = stale_lines(capsys, project)
    assert [line.split('"')[1] for line in lines] == ["forward"]  # the schedule's contract hash holds its buffers


def test_changed_dims_and_isv_make_records_that_name_them_stale(project: Path, build, capsys) -> None:
    name_inputs(project)
    edit_text(project / "contracts" / "buffers.toml", "B = { min = 1, max = 4096,", "B = { min = 1, max = 8192,")
    lines = stale_lines(capsys, project)
    assert len(lines) == 9  # every kernel and schedule is verified at the dims
    assert lines[0] == (
        'contracts/kernels.toml:3: EVIDENCE_STALE Kernel "make_label" has no GPU verification of its current build: the dims it is '
        "verified at changed since the last one (2026-12-02)."
    )
    assert all("the dims it is verified at changed" in line for line in lines)
    edit_text(project / "contracts" / "buffers.toml", "B = { min = 1, max = 8192,", "B = { min = 1, max = 4096,")
    assert stale_lines(capsys, project) == []


def test_the_schedules_a_schedule_runs_after_are_its_inputs(project: Path, build, capsys) -> None:
    from audit.api import load_project
    from audit.evidence import schedule_inputs

    name_inputs(project)
    _, cs = load_project(project)
    before = {s.name: schedule_inputs(cs, s) for s in cs.schedules}
    edit_text(project / "contracts" / "schedules.toml", 'doc = "labels, forward and loss"', 'doc = "labels, forward and the loss"')
    _, cs = load_project(project)
    after = {s.name: schedule_inputs(cs, s) for s in cs.schedules}
    # "backward" runs after "forward", whose contract hash changed with its doc; forward's own inputs did not
    assert after["forward"] == before["forward"]
    assert after["backward"]["schedules"] != before["backward"]["schedules"]
    assert after["backward"]["dims"] == before["backward"]["dims"]


# --- the pytest plugin decides as wireup check does ------------------------------------------------------

pytest_plugins = ["pytester"]


def test_plugin_items_follow_the_same_freshness_and_require_evidence(pytester: pytest.Pytester, build) -> None:
    shutil.copytree(RULES / "EVIDENCE_STALE" / "bad", pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\nwireup = true\nwireup_select = evidence\n")
    args = ("-p", "no:wireup", "-p", "audit.pytest_plugin", "-p", "no:cacheprovider")
    result = pytester.runpytest(*args)
    assert result.parseoutcomes()["passed"] > 0 and "failed" not in result.parseoutcomes()  # stale is a warning
    result = pytester.runpytest(*args, "--wireup-require-evidence")
    result.assert_outcomes(failed=2, passed=result.parseoutcomes()["passed"])
    result.stdout.fnmatch_lines([
        '*EVIDENCE_STALE Kernel "make_label" has no GPU verification of its current build: its contract changed since the last one (2026-12-02).',
        "FAILED wireup::EVIDENCE_STALE[[]make_label[]]*",
    ])  # fmt: skip
    pytester.makeini("[pytest]\nwireup = true\nwireup_select = evidence\nwireup_require_evidence = true\n")
    assert pytester.runpytest(*args).parseoutcomes()["failed"] == 2


@pytest.mark.parametrize("rule_id", sorted(EVIDENCE))
def test_every_format_carries_the_bad_fixtures_findings(rule_id: str, build, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_printers import assert_sarif_well_formed

    root = RULES / rule_id / "bad"
    main(["check", "--root", str(root), "--select", "evidence", "--format", "json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [f["rule"] for f in findings] == [rule_id] * len(expected_lines(rule_id))
    main(["check", "--root", str(root), "--select", "evidence", "--format", "sarif"])
    doc = json.loads(capsys.readouterr().out)
    assert_sarif_well_formed(doc, len(findings))
    assert [(r["ruleId"], r["message"]["text"]) for r in doc["runs"][0]["results"]] == [(f["rule"], f["message"]) for f in findings]


def test_a_record_with_fields_of_the_wrong_type_is_skipped_not_a_traceback(project: Path, build, capsys) -> None:
    build(CHAIN_CODE)
    edit_record(project, "loss", code_hashes=["kernels/chain.cu"])
    edit_record(project, "reduce", build_flags="-O3")
    rc, lines = run_check(capsys, project, "--select", "evidence")
    assert rc == 0 and [line.split(": ")[1].split(" ")[0] for line in lines] == ["EVIDENCE_MISSING", "EVIDENCE_MISSING"]
