"""The audit report: a view over one check run; content, the per-subject check matrix, determinism,
--check, HTML escaping and the git-history scheme.

Most tests render a small five-kernel project (tests/data/report/mini) copied to a temporary folder,
with the build switched off (``no_nvcc``) so that they stay fast; one test marked ``nvcc`` renders the
build facts for real. The mini report with evidence and mutation records is pinned in
``tests/data/snapshots/report-mini.{md,html}``; after an intended change of the layout rewrite them with
``WIREUP_UPDATE_SNAPSHOTS=1 pytest tests/test_report.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit.api import load_project, run_check
from audit.cli import main
from audit.errors import EnvironmentProblem
from audit.compile import CODE_HASH_VERSION
from audit.evidence import CheckOutcome, EvidenceRecord, kernel_source_hash, write_record
from audit.hashing import contract_hash
from audit.report import ReportOptions, c_prototype, collect_report, render_report
from audit.findings import NotRun
from audit.report.collect import phase_sort_key
from audit.report.filters import cell_mark
from audit.report.matrix import check_matrix, split_case
from audit.report.render import md, report_diff
from audit.report.views import CheckRow, MatrixCell

DATA = Path(__file__).parent / "data" / "report"
SNAPSHOTS = Path(__file__).parent / "data" / "snapshots"


def copy_project(tmp_path: Path, name: str = "mini") -> Path:
    dst = tmp_path / name
    shutil.copytree(DATA / name, dst, ignore=shutil.ignore_patterns(".wireup-cache", "reports"))
    return dst


@pytest.fixture
def no_nvcc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The build behaves as on a machine without nvcc (fast; the nvcc test renders real build facts)."""

    def missing(*args, **kwargs):
        raise EnvironmentProblem("nvcc is not on PATH (switched off by the test)")

    import audit.compile
    import audit.compile.facts

    monkeypatch.setattr(audit.compile, "build_kernels", missing)
    monkeypatch.setattr(audit.compile.facts, "build_kernels", missing)


def render(root: Path, fmt: str = "md", **options) -> str:
    cfg, cs = load_project(root)
    return render_report(collect_report(run_check(cfg.root, config=cfg, contracts=cs), ReportOptions(**options)), fmt)


def git(root: Path, *args: str) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com", GIT_AUTHOR_DATE="2026-12-01T10:00:00Z",
        GIT_COMMITTER_DATE="2026-12-01T10:00:00Z",
    )  # fmt: skip
    out = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def git_project(tmp_path: Path) -> Path:
    root = copy_project(tmp_path)
    (root / ".gitignore").write_text(".wireup-cache/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first chain")
    return root


MERMAID_NODE = re.compile(r'^  [a-z]\d+(\[".*"\]|\(".*"\)|\{\{".*"\}\}|\[/".*"/\])(:::\w+)?$')
MERMAID_EDGE = re.compile(r"^  ([a-z]\d+) (-->|==>|-\.->)(\|[^|]*\|)? ([a-z]\d+)$")


def mermaid_blocks(text: str) -> list[list[str]]:
    return [block.strip("\n").splitlines() for block in re.findall(r"^```mermaid\n(.*?)^```$", text, re.S | re.M)]


def assert_valid_mermaid(lines: list[str]) -> None:
    assert lines[0] == "flowchart LR"
    declared, edges = set(), 0
    for line in lines[1:]:
        if line.startswith("  classDef "):
            continue
        node, edge = MERMAID_NODE.match(line), MERMAID_EDGE.match(line)
        assert node or edge, f"not a Mermaid node or edge line: {line!r}"
        if node:
            declared.add(line.split()[0].split("[")[0].split("(")[0].split("{")[0])
        else:
            edges += 1
            assert edge.group(1) in declared and edge.group(4) in declared, line
    assert declared and edges


# ---------------------------------------------------------------------------------------------------


def test_shipped_report_names_every_kernel_and_draws_each_schedule(repo: Path, no_nvcc: None) -> None:
    text = render(repo, history=False)
    cfg, cs = load_project(repo)
    headings = set(re.findall(r"^### (\S+)$", text, re.M))
    assert {k.name for k in cs.kernels} <= headings
    for k in cs.kernels:
        assert f'extern "C" __global__ void {k.symbol}(' in text
    blocks = mermaid_blocks(text)
    assert len(blocks) == len(cs.schedules)
    for lines in blocks:
        assert_valid_mermaid(lines)
    phases = re.findall(r"^## Phase (\S+)$", text, re.M)
    assert phases == sorted(phases, key=phase_sort_key) and "A1" in phases and "B" in phases
    assert "not built here" in text


def test_mini_report_content(tmp_path: Path, no_nvcc: None) -> None:
    text = render(copy_project(tmp_path), history=False)
    assert re.findall(r"^## Phase (\S+)$", text, re.M) == ["A1", "A2", "A10", "B"]
    assert "| 0 | `x` | tensor | f32 | `[B, N]` | `[B, 8]` | in |" in text  # dims bound
    assert "| 4 | `scale_slot` | scalar | i32 |  |  | value slot(LABEL_SCALE) = 0 |" in text
    assert "mask: rows where labels = -1 are skipped; their rows of dW_partial are exactly zero" in text
    assert "- **ISV reads:** LABEL_SCALE (0), LOSS_EMA (1)" in text
    assert "- **ISV writes:** LOSS_EMA (1)" in text
    assert "- **Saved for backward:** `h`" in text
    assert "- **Per-sample partials:** dW_partial → W" in text
    # geometry: the expression, then its value at the representative B (4096 clamped to the range 1..1024)
    assert "Launch geometry values are given at B = 1024." in text
    assert "| train step 1 | `[8, 1, 1]` | `[128, 1, 1]` | 0 B |" in text
    assert "| train step 6 | `[1, 1, 1]` | `[256, 1, 1]` | 0 B |" in text  # local dim M = N * N = 64
    assert "**Build:** ➖ not built here." in text
    assert "**Mutation score:** not run" in text
    assert "| `make_labels` | kernel | ⚠️ missing | no GPU verification record |" in text
    assert "wire-up" not in text.lower() or "Wire-up audit" in text


def test_representative_dims_can_be_chosen(tmp_path: Path, no_nvcc: None) -> None:
    text = render(copy_project(tmp_path), history=False, at=(("B", 300),))
    assert "Launch geometry values are given at B = 300." in text
    assert "| train step 1 | `[3, 1, 1]` | `[128, 1, 1]` | 0 B |" in text


def test_rendering_is_deterministic_and_independent_of_the_checkout_path(tmp_path: Path, no_nvcc: None) -> None:
    a = copy_project(tmp_path / "one")
    b = copy_project(tmp_path / "elsewhere" / "two")
    first = render(a).encode()
    assert render(a).encode() == first
    assert render(b).encode() == first
    assert str(tmp_path) not in first.decode()


def test_c_prototype_from_contract(tmp_path: Path) -> None:
    _, cs = load_project(copy_project(tmp_path))
    assert c_prototype(cs.kernel("loss")) == (
        'extern "C" __global__ void loss(\n'
        "    const float* __restrict__ h,\n"
        "    const int* __restrict__ labels,\n"
        "    float* __restrict__ loss,\n"
        "    float* __restrict__ isv,\n"
        "    int scale_slot,\n"
        "    int ema_slot,\n"
        "    int B,\n"
        "    int N);"
    )


def test_md_filter_keeps_tables_intact() -> None:
    assert md("a | b") == "a \\| b"
    assert md("<img src=x>") == "&lt;img src=x>"
    assert md("two\nlines") == "two lines"


# ---------------------------------------------------------------------------------------------------
# --check


def test_report_check_exit_codes(tmp_path: Path, no_nvcc: None, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_project(tmp_path)
    assert main(["report", "--root", str(root), "--check"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["report", "--root", str(root)]) == 0
    report = root / "reports" / "dqn-wire-up-audit.md"
    assert report.is_file()
    capsys.readouterr()
    assert main(["report", "--root", str(root), "--check"]) == 0
    assert "is up to date" in capsys.readouterr().err

    kernels = root / "contracts" / "kernels.toml"
    kernels.write_text(kernels.read_text().replace("h = x @ W^T | saved for backward", "h = x @ W^T"))
    assert main(["report", "--root", str(root), "--check"]) == 1
    out = capsys.readouterr()
    assert "is out of date" in out.err
    assert "-> h = x @ W^T \\| saved for backward" in out.out
    assert "+> h = x @ W^T" in out.out
    assert out.out.startswith("--- reports/dqn-wire-up-audit.md (committed)")


def test_report_diff_is_short() -> None:
    old = "\n".join(f"line {i}" for i in range(500)) + "\n"
    new = "\n".join(f"line {i}" if i % 3 else f"changed {i}" for i in range(500)) + "\n"
    diff = report_diff(old, new, "r.md", limit=20)
    assert len(diff) == 21 and diff[-1].startswith("... ")
    assert report_diff(old, old) == []
    assert report_diff("a\n", "a") != []


def test_report_html_escapes_contract_strings(tmp_path: Path, no_nvcc: None) -> None:
    root = copy_project(tmp_path)
    kernels = root / "contracts" / "kernels.toml"
    kernels.write_text(
        kernels.read_text()
        + '\n[[kernel]]\nname = "<script>alert(1)</script>"\nsource = "kernels/labels_kernel.cu"\nentry = "make_labels"\n'
        'stage = "producer"\nphase = "<b>P</b>"\ngrid = [1, 1, 1]\nblock = [128, 1, 1]\ndoc = "<img src=x onerror=alert(2)>"\n'
        'params = [\n  { name = "x", dtype = "f32", shape = ["B", "N"], role = "in" },\n'
        '  { name = "labels", dtype = "i32", shape = ["B"], role = "out" },\n'
        '  { name = "B", kind = "scalar", dtype = "i32", value = "B" },\n  { name = "N", kind = "scalar", dtype = "i32", value = "N" },\n]\n'
    )
    html = render(root, "html", history=False)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<b>P</b>" not in html
    assert '<pre class="mermaid">' in html and "<script" not in html  # no mermaid script unless asked
    text = render(root, "md", history=False)
    # Markdown: raw HTML only where GitHub shows it as text (code spans and fences), escaped elsewhere
    prose = re.sub(r"`[^`]*`", "", re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M))
    assert "<script>" not in prose and "<img" not in prose and "<b>" not in prose
    assert "### &lt;script>alert(1)&lt;/script>" in text


def test_html_is_self_contained_and_optionally_loads_mermaid(tmp_path: Path, no_nvcc: None) -> None:
    cfg, cs = load_project(copy_project(tmp_path))
    report = collect_report(run_check(cfg.root, config=cfg, contracts=cs), ReportOptions(history=False))
    html = render_report(report, "html")
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html and "http" not in html.split("<body>")[0]
    with_js = render_report(report, "html", mermaid_js="https://cdn.example/mermaid.esm.min.mjs")
    assert 'import mermaid from "https://cdn.example/mermaid.esm.min.mjs";' in with_js


def test_user_templates_override_the_shipped_ones(tmp_path: Path, no_nvcc: None, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_project(tmp_path)
    custom = tmp_path / "templates"
    custom.mkdir()
    (custom / "report.md.j2").write_text("{% for k in r.kernels %}{{ k.name }} {{ k.compiled.text }}\n{% endfor %}")
    assert main(["report", "--root", str(root), "--templates", str(custom), "-o", "-", "--no-history"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "make_labels not built here"
    assert main(["report", "--root", str(root), "--templates", str(tmp_path / "nope")]) == 2
    assert 'templates folder "' in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------
# evidence and mutation


def write_evidence_and_mutation(root: Path) -> None:
    """Records for the mini project: forward verified (cases, one not run), loss stale, two mutation runs."""
    cfg, cs = load_project(root)
    k = cs.kernel("forward")
    write_record(cfg.path(cfg.evidence), EvidenceRecord(
        subject="forward", kind="kernel", backend="pycuda", verdict="pass",
        source_hash=kernel_source_hash(cs, cfg, k), contract_hash=contract_hash(k),
        build_flags=["-O3", "-lineinfo", "-std=c++17"], arch="sm_90", code_hashes={k.source: "c0de"}, code_hash_version=CODE_HASH_VERSION,
        device={"name": "NVIDIA H200", "cc": "9.0"}, date="2026-12-02T14:03:11Z", sizes=["B=1", "B=1024"],
        checks=[
            CheckOutcome("guards", "pass", "guard bands intact", "B=1"),
            CheckOutcome("reference", "pass", "matches the float64 reference", "B=1", 2.0e-8, 1.0e-7, 5.0e-9),
            CheckOutcome("all_skip", "pass", "all-skip batch: zeros and no NaN", "B=1 (all-skip)"),
            CheckOutcome("guards", "pass", "guard bands intact", "B=1024"),
            CheckOutcome("reference", "pass", "", "B=1024", 3.1e-7, 2.5e-6, 1.2e-7),
            CheckOutcome("reference", "not_run", "not run: inputs too large at B=1024 (N=64)", "B=1024 (N=64)"),
        ],
    ))  # fmt: skip
    write_record(cfg.path(cfg.evidence), EvidenceRecord(
        subject="loss", kind="kernel", backend="pycuda", verdict="pass", source_hash="0" * 64, contract_hash="0" * 64,
        device={"name": "NVIDIA H200"}, date="2026-11-30T09:00:00Z",
    ))  # fmt: skip
    mutation = root / "reports" / "mutation"
    mutation.mkdir(parents=True)
    (mutation / "backward.json").write_text(json.dumps({
        "kernel": "backward", "mutants": 4, "caught": 3, "by_check": {"reference": 2, "mask": 1},
        "survivors": [{"id": "M3", "diff": "-    g * x\n+    g * x * 1.0f", "equivalent": True, "reason": "multiplies by one"}],
        "device": {"name": "NVIDIA H200"}, "date": "2026-12-02",
    }))  # fmt: skip
    (mutation / "loss.json").write_text(json.dumps({
        "kernel": "loss", "generated": 53, "selected": 30, "mutants": 30, "caught": 26, "equivalent": 4, "score": 1.0,
        "baseline": "pass", "by_check": {"reference": 26}, "survivors": [], "device": {"name": "NVIDIA H200"}, "date": "2026-12-03",
    }))  # fmt: skip


def test_evidence_and_mutation_results_are_shown(tmp_path: Path, no_nvcc: None) -> None:
    root = copy_project(tmp_path)
    write_evidence_and_mutation(root)
    text = render(root, history=False)
    assert "**GPU verification:** ✅ verified on NVIDIA H200, 2026-12-02T14:03:11Z (pycuda backend; sizes B=1, B=1024)" in text
    # one matrix, checks x sizes: the worst of a check's cases per cell, the largest norm-relative error
    assert "| check | B=1 | B=1024 |\n| --- | --- | --- |\n| guards | ✅ | ✅ |\n" in text
    assert "| reference | ✅ 5.00e-09 | ➖ 1 of 2 not run · 1.20e-07 |" in text
    assert "| all_skip | ✅ |  |" in text  # no all-skip case at B=1024: an empty cell
    # every outcome, losslessly, folded: errors, cases and the details that differ from the row's
    assert "<details><summary>Every outcome: 6 check outcome(s) in 4 case(s), 1 not run</summary>" in text
    assert "| reference |  | ✅ 2.00e-08 / 1.00e-07 / 5.00e-09 | ✅ 3.10e-07 / 2.50e-06 / 1.20e-07 — (no detail) | matches the float64 reference |" in text
    assert "| reference | N=64 |  | ➖ — not run: inputs too large at B=1024 (N=64) | not run: inputs too large at B=1024 (N=64) |" not in text
    assert "| reference | N=64 |  | ➖ | not run: inputs too large at B=1024 (N=64) |" in text
    assert "| all_skip | all-skip | ✅ |  | all-skip batch: zeros and no NaN |" in text
    assert "| [A2](#phase-a2) | [`forward`](#forward) | forward | ➖ not built here | ✅ clean | ✅ train step 2 | ✅ NVIDIA H200, 2026-12-02 | not run |" in text
    assert "**GPU verification:** ⚠️ stale: its source changed since the last one (2026-11-30)" in text
    assert "**Mutation score:** 3 of 4 caught (75%) on NVIDIA H200, 2026-12-02 — caught by mask: 1, reference: 2" in text
    assert "- `M3` (equivalent): multiplies by one" in text
    assert "**Mutation score:** 26 of 26 caught (100%; 4 equivalent mutants not counted; a sample: 30 of its 53 mutants run) on NVIDIA H200" in text
    # the older record has no generated/selected counts, so the summary cannot say how large a sample it is
    assert "| mutation score | ⚠️ 29 of 30 mutants caught (97%) over 2 of 5 kernels |" in text
    assert ("| GPU-verified | ⚠️ 1 of 5 (1 stale, 3 missing, 0 failed); 1 verified before records named their inputs: an edited dim, "
            "ISV layout, bound buffer or writer's domain is not seen for them |") in text  # its record names no inputs


def test_a_failed_check_is_marked_failed_in_the_matrix_and_the_verdict(tmp_path: Path, no_nvcc: None) -> None:
    root = copy_project(tmp_path)
    cfg, cs = load_project(root)
    k = cs.kernel("reduce")
    write_record(cfg.path(cfg.evidence), EvidenceRecord(
        subject="reduce", kind="kernel", backend="cupy", verdict="fail",
        source_hash=kernel_source_hash(cs, cfg, k), contract_hash=contract_hash(k),
        build_flags=["-O3", "-lineinfo", "-std=c++17"], arch="sm_90", code_hashes={k.source: "c0de"}, code_hash_version=CODE_HASH_VERSION,
        device={"name": "NVIDIA H200"}, date="2026-12-03T08:00:00Z", sizes=["B=1", "B=1024"],
        checks=[
            CheckOutcome("reference", "pass", "matches the float64 reference", "B=1", 1e-8, 1e-7, 1e-9),
            CheckOutcome("reference", "fail", 'output "W_grad" has relative error 1.0e+00', "B=1024", 3e-2, 1.0, 1.0),
            CheckOutcome("reference", "pass", "matches the float64 reference", "B=1024 (M=3)", 1e-8, 1e-7, 2e-9),
        ],
    ))  # fmt: skip
    text = render(root, history=False)
    assert "| reference | ✅ 1.00e-09 | ❌ 1 of 2 failed · 1.00e+00 |" in text
    assert '| reference |  | ✅ 1.00e-08 / 1.00e-07 / 1.00e-09 | ❌ 3.00e-02 / 1.00e+00 / 1.00e+00 — output "W_grad" has relative error 1.0e+00 | matches the float64 reference |' in text
    assert "**GPU verification:** ❌ its last GPU verification failed (reference) — NVIDIA H200, 2026-12-03T08:00:00Z" in text
    assert "**Verdict: ❌ not wired up** — wireup check reports 1 error(s); GPU verification failed for reduce;" in text
    assert "| GPU-verified | ❌ 0 of 5 (0 stale, 4 missing, 1 failed) |" in text
    html = render(root, "html", history=False)
    assert '<td class="bad">❌ 1 of 2 failed · 1.00e+00</td>' in html


def test_check_matrix_folds_cases_and_keeps_every_outcome() -> None:
    rows = [
        CheckRow("finite", "pass", "B=37", None, None, None, "no NaN/Inf"),
        CheckRow("reference", "pass", "B=37 (K=2, all-skip)", 1e-8, 2e-8, 3e-9, "ok"),
        CheckRow("reference", "pass", "B=37 (K=3), optional pointers NULL", 1e-8, 2e-8, 7e-9, "ok"),
        CheckRow("reference", "not_run", "B=4 (K=2, all-skip)", None, None, None, "too large"),
        CheckRow("finite", "fail", "B=4", None, None, None, "NaN at [0]"),
        CheckRow("finite", "not_run", "B=4, optional pointers NULL", None, None, None, "skipped"),
    ]
    m = check_matrix(rows)
    assert m.columns == ["B=4", "B=37"]  # natural order, not the record's
    assert [(r.check, [cell_mark(c) for c in r.cells]) for r in m.rows] == [
        ("finite", ["❌ 1 of 2 failed · 1 not run", "✅"]),
        ("reference", ["➖ not run", "✅ 7.00e-09"]),
    ]
    assert [(c.check, c.case) for c in m.cases] == [
        ("finite", ""), ("reference", "K=2, all-skip"), ("reference", "(K=3), optional pointers NULL"), ("finite", "optional pointers NULL"),
    ]  # fmt: skip
    assert sum(len(cell) for case in m.cases for cell in case.cells) == len(rows) == m.outcomes
    assert (m.failed, m.not_run) == (1, 2)
    assert check_matrix([]) is None
    assert cell_mark(MatrixCell("")) == "" and cell_mark(MatrixCell("mixed", 3, 0, 1, 2e-9)) == "➖ 1 of 3 not run · 2.00e-09"


@pytest.mark.parametrize(
    "size, column, case",
    [
        ("B=4096", "B=4096", ""),
        ("B=37 (K=2, all-skip)", "B=37", "K=2, all-skip"),
        ("B=1 (K=2), optional pointers NULL", "B=1", "(K=2), optional pointers NULL"),
        ("B=1, optional pointers NULL", "B=1", "optional pointers NULL"),
        ("B=4096 (|label| ~ 0.001)", "B=4096", "|label| ~ 0.001"),
        ("B=4 T=3 (all-valid)", "B=4 T=3", "all-valid"),
        ("whole chain", "whole chain", ""),
    ],
)
def test_split_case(size: str, column: str, case: str) -> None:
    assert split_case(size) == (column, case)


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_mini_report_snapshot(tmp_path: Path, no_nvcc: None, fmt: str) -> None:
    root = copy_project(tmp_path)
    write_evidence_and_mutation(root)
    text = render(root, fmt, history=False)
    snap = SNAPSHOTS / f"report-mini.{fmt}"
    if os.environ.get("WIREUP_UPDATE_SNAPSHOTS"):
        snap.write_text(text, encoding="utf-8")
    assert text == snap.read_text(encoding="utf-8"), f"{snap.name} is stale; see this module's docstring"


# ---------------------------------------------------------------------------------------------------
# a view over one check run


def test_report_and_audit_build_once_and_check_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The report reads the check run's facts: one build, one rule run, one evidence lookup per command."""
    import audit.api
    import audit.compile.facts
    import audit.evidence

    calls: dict[str, int] = {"build": 0, "rules": 0, "freshness": 0}

    def no_build(*args, **kwargs):
        calls["build"] += 1
        raise EnvironmentProblem("nvcc is not on PATH (switched off by the test)")

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(audit.compile.facts, "build_kernels", no_build)
    monkeypatch.setattr(audit.api, "run_rules", counting("rules", audit.api.run_rules))
    monkeypatch.setattr(audit.evidence, "freshness", counting("freshness", audit.evidence.freshness))
    root = copy_project(tmp_path)
    assert main(["report", "--root", str(root), "--no-history"]) == 0
    assert calls == {"build": 1, "rules": 1, "freshness": 1}
    assert main(["audit", "--root", str(root), "--no-verify", "--check"]) == 0  # not in git: history or not, the same report
    assert calls == {"build": 2, "rules": 2, "freshness": 2}
    assert "[2/4] build: not built here (nvcc is not on PATH (switched off by the test))" in capsys.readouterr().err


def test_collect_report_shows_the_facts_it_is_given(tmp_path: Path, no_nvcc: None) -> None:
    """Facts come from the run, not from a second computation: a fact set on the run is what is shown."""
    cfg, cs = load_project(copy_project(tmp_path))
    run = run_check(cfg.root, config=cfg, contracts=cs, select=["wiring"])
    run.context.facts["build"] = NotRun("", f"nvcc exploded in {cfg.root}")
    run.context.facts["fingerprint"] = "0123456789abcdef"
    run.context.facts["evidence"] = {}
    report = collect_report(run, ReportOptions(history=False))
    assert report.build_note == "not built here: nvcc exploded in ."  # the checkout's path cut out
    assert report.isv is not None and report.isv.computed == "0123456789abcdef"
    assert "differs from the layout's 0123456789abcdef" in report.isv.fingerprint_note
    assert {kv.evidence.status for kv in report.kernels} == {"missing"}
    assert report.rules_ran == len(run.result.ran)


def test_a_launcher_scan_that_did_not_run_judges_no_kernel(tmp_path: Path, no_nvcc: None) -> None:
    """Globs that match no file: the launcher rules did not run, so no kernel is called dead code for it."""
    root = copy_project(tmp_path)
    (root / "wireup.toml").write_text((root / "wireup.toml").read_text() + 'launchers = ["crates/**/*.rs"]\n')
    text = render(root, history=False)
    assert (
        'Launcher globs `crates/**/*.rs`: the scan did not run (the launcher globs "crates/\\*\\*/\\*.rs" match no file '
        "under the project root), so no kernel was judged by its host references."
    ) in text
    assert "dead code" not in text and "**Host references:**" not in text
    assert "| `NO_LAUNCHER` | the launcher globs" in text  # the same reason, from the same check run


# ---------------------------------------------------------------------------------------------------
# git history: stable once committed


def test_history_is_stable_across_the_commit_that_adds_the_report(tmp_path: Path, no_nvcc: None, capsys: pytest.CaptureFixture[str]) -> None:
    root = git_project(tmp_path)
    first = git(root, "rev-parse", "HEAD")[:10]
    src = root / "kernels" / "forward_kernel.cu"
    src.write_text(src.read_text().replace("float acc = 0.0f;", "float acc = 0.0f;  // fp32 accumulation"))
    assert main(["report", "--root", str(root)]) == 0
    text = (root / "reports" / "dqn-wire-up-audit.md").read_text()
    blob = git(root, "hash-object", "kernels/forward_kernel.cu")[:10]
    assert f'**History:** source blob {blob} · supersedes {first} 2026-12-01 "first chain"' in text
    assert "contract `contracts/kernels.toml` blob" in text and "· first version" in text

    # the kernel change and its report in one commit: the committed report is current on a clean tree
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "forward: comment the accumulation, re-render the report")
    capsys.readouterr()
    assert main(["report", "--root", str(root), "--check"]) == 0, capsys.readouterr().out
    # an unrelated later commit does not make it stale either
    (root / "NOTES.md").write_text("unrelated\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "notes")
    assert main(["report", "--root", str(root), "--check"]) == 0, capsys.readouterr().out
    # ...and neither does a clean clone of it
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
    assert main(["report", "--root", str(clone), "--check"]) == 0, capsys.readouterr().out


def test_history_outside_git_and_in_a_shallow_clone(tmp_path: Path, no_nvcc: None, capsys: pytest.CaptureFixture[str]) -> None:
    plain = copy_project(tmp_path / "plain")
    assert "**History:** source not in git · contract `contracts/kernels.toml` not in git" in render(plain)
    root = git_project(tmp_path)
    (root / "NOTES.md").write_text("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "second")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{root}", str(shallow)], check=True)
    assert main(["report", "--root", str(shallow), "--check"]) == 2
    assert "shallow" in capsys.readouterr().err
    assert main(["report", "--root", str(shallow), "--check", "--no-history"]) == 1  # runs; the report is not there


def test_layout_diff_against_a_base_revision(tmp_path: Path, no_nvcc: None) -> None:
    root = git_project(tmp_path)
    isv = root / "contracts" / "isv.toml"
    isv.write_text(isv.read_text().replace('name = "RESERVED"\nrole = "padding"\ncount = 2', 'name = "RESERVED"\nrole = "padding"\ncount = 2\ndoc = "spare"'))
    text = render(root, base="HEAD")
    assert "**Layout diff against `HEAD`:**" in text
    assert "- verdict: compatible" in text
    text = render(root, base="no-such-rev")
    assert '**Layout diff against `no-such-rev`:** Git revision "no-such-rev" does not name a commit' in text
    assert str(tmp_path) not in text


@pytest.mark.nvcc
def test_build_facts_in_the_report(tmp_path: Path) -> None:
    text = render(copy_project(tmp_path), history=False)
    assert re.search(r"\*\*Build:\*\* cubin `forward_kernel\.cubin` · code [\d,]+ B( \([\d.]+ KiB\))? · \d+ registers · static shared", text)
    assert re.search(r"\| compiled \| ✅ 5 of 5 \(nvcc ", text)


def test_report_check_imports_no_repository_or_gpu_code(tmp_path: Path) -> None:
    """--check runs in CI on untrusted branches: it must not import references, the runtime or GPU packages."""
    root = copy_project(tmp_path)
    script = (
        "import sys\n"
        "import audit.compile, audit.compile.facts\n"
        "from audit.errors import EnvironmentProblem\n"
        "def missing(*a, **k):\n"
        "    raise EnvironmentProblem('nvcc switched off')\n"
        "audit.compile.build_kernels = audit.compile.facts.build_kernels = missing\n"
        "from audit.cli import main\n"
        f"rc = main(['report', '--root', {str(root)!r}, '--check'])\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('audit.references', 'audit.runtime', 'pycuda', 'cupy', 'torch')))\n"
        "print(rc, bad)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root, env=env, check=True)
    assert out.stdout.strip() == "1 []"


def test_the_report_lists_suppressed_findings_with_their_reasons(tmp_path: Path) -> None:
    import shutil

    from audit.cli import main

    root = tmp_path / "p"
    shutil.copytree(Path(__file__).parent / "data" / "rules" / "SUPPRESSION_UNUSED" / "good", root)
    assert main(["report", "--root", str(root), "--no-history", "--output", str(root / "r.md")]) == 0
    text = (root / "r.md").read_text(encoding="utf-8")
    assert "Suppressed by `[[suppress]]` entries of the contracts (reviewed, not counted):" in text
    assert "| `SLOT_GAP` | `contracts/isv.toml:5` |" in text
    assert "indices 6..7 are reserved for the next head's EMAs; checkpoints already carry them |" in text


def test_a_mutation_record_of_an_older_source_is_shown_stale_and_never_a_full_score(tmp_path: Path, no_nvcc: None) -> None:
    """A mutation record names the source it was made from and its sha256: once the source changes, its
    score is of other code. The kernel's row says so, and the summary counts it as stale, not as a score."""
    import hashlib

    root = copy_project(tmp_path)
    folder = root / "reports" / "mutation"
    folder.mkdir(parents=True)
    cfg, cs = load_project(root)
    for k in cs.kernels:
        text = (root / k.source).read_text(encoding="utf-8")
        (folder / f"{k.name}.json").write_text(json.dumps({
            "kernel": k.name, "source": k.source, "source_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "generated": 4, "selected": 4, "mutants": 4, "caught": 4, "equivalent": 0, "score": 1.0, "baseline": "pass",
            "survivors": [], "date": "2026-12-05T17:00:00+00:00",
        }))  # fmt: skip

    def summary() -> tuple[str, str, str]:
        cfg, cs = load_project(root)
        rep = collect_report(run_check(cfg.root, config=cfg, contracts=cs), ReportOptions(history=False))
        row = dict(rep.totals)["mutation score"]
        fwd = next(kv for kv in rep.kernels if kv.name == "forward")
        return row.state, row.text, fwd.mutation.score

    state, text, fwd = summary()
    n = len(cs.kernels)
    assert (state, text, fwd) == ("ok", f"{4 * n} of {4 * n} mutants caught (100%) over {n} of {n} kernels", "4 of 4 caught (100%)")
    src = root / "kernels" / "forward_kernel.cu"
    src.write_text(src.read_text(encoding="utf-8") + "\n// changed after the mutation run\n", encoding="utf-8")
    state, text, fwd = summary()
    assert fwd == "4 of 4 caught (100%); stale: kernels/forward_kernel.cu changed since this run (2026-12-05)"
    assert state == "warn" and text == f"{4 * n} of {4 * n} mutants caught (100%) over {n} of {n} kernels; 1 stale record (of an older source, or of a header judged by other kernels than now)"


def test_a_mutation_record_says_which_passes_its_survivors_went_through() -> None:
    """A record written with ``--sanitizers memcheck,perturb`` (racecheck to follow) says so next to its score;
    one that names no passes (an older format) says nothing rather than guess."""
    from audit.mutate._run import PASSES
    from audit.report.collect import MUTATION_PASSES, _passes_text

    assert MUTATION_PASSES == PASSES  # the report's copy of mutate's passes, kept equal here
    assert _passes_text({"settings": {"sanitizers": {"memcheck": [1, 37], "perturb": [1, 37]}}}) == "memcheck, perturb (not run: racecheck)"
    assert _passes_text({"settings": {"sanitizers": {"memcheck": [1], "racecheck": [37], "perturb": [1]}}}) == "memcheck, racecheck, perturb"
    assert _passes_text({"settings": {"sanitizers": {}}}) == "none (not run: memcheck, racecheck, perturb)"
    assert _passes_text({"settings": {}}) == "" and _passes_text({}) == ""


def test_a_score_with_survivors_never_reads_as_complete() -> None:
    """1582 of 1587 caught rounded to "100%" beside 5 survivors (the report of 7 December); now floored to a
    tenth where whole percent would claim all, and "<1%" where it would claim none."""
    from audit.report.filters import percent

    assert percent(1582 / 1587) == "99.6%" and percent(1.0) == "100%" and percent(0.98) == "98%"
    assert percent(0.0) == "0%" and percent(0.004) == "<1%" and percent(0.9999) == "99.9%"
