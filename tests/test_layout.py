"""ISV layout: fingerprint, diff (fixture pairs per change kind, git revisions), generated constants.

Fixture pairs live in ``tests/data/layout/<case>/{previous,current}/isv.toml`` with ``expected.json``
listing the findings (rule, severity, line in the current file, slot), the verdict, the exit code and
the migrator mapping.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from audit.cli import main
from audit.config import load_config
from audit.errors import ContractError, UsageError
from audit.layout import (
    CHANGE_KINDS,
    LayoutChange,
    LayoutDiff,
    canonical_layout,
    diff_layouts,
    fingerprint,
    load_layout_at_revision,
)
from audit.layout.codegen import generate, generated_files, render_generated, stale_reason
from audit.layout.fingerprint import format_number
from audit.load import load_contracts
from audit.model import Slot

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "layout"
CASES = sorted(p.name for p in DATA.iterdir() if (p / "expected.json").is_file())
SHIPPED_FINGERPRINT = "0x9d2828b683dc5492"
FINGERPRINT_AT_06D0FA4 = "0x940390f49558c7e8"
FIXTURE_BASE_FINGERPRINT = "0x8174ca8810e50f71"  # tests/data/layout/*/previous/isv.toml


def _layout(folder: Path):
    return load_contracts(folder, REPO).isv


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _git(cwd: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *env_args, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _has_revision(rev: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True).returncode == 0


# ---------------------------------------------------------------------------------------------------
# fixture pairs: one per change kind


@pytest.mark.parametrize("case", CASES)
def test_fixture_pair_findings(case: str, capsys) -> None:
    folder = DATA / case
    expected = json.loads((folder / "expected.json").read_text())
    d = diff_layouts(_layout(folder / "previous"), _layout(folder / "current"))
    result = d.check_result()
    found = [{"rule": f.rule, "severity": f.severity.value, "line": f.line, "slot": f.subject} for f in result.findings]
    assert found == expected["findings"]
    assert all(f.file == f"tests/data/layout/{case}/current/isv.toml" for f in result.findings)
    assert d.verdict == expected["verdict"]
    assert [list(p) for p in d.migrator] == expected["migrator"]
    assert d.exit_code == expected["exit_code"] == result.exit_code
    code, out, _ = _cli(capsys, "layout", "diff", "--root", str(REPO), str(folder / "previous"), str(folder / "current"))
    assert code == expected["exit_code"]
    assert out.splitlines()[-3].startswith(f"verdict: {expected['verdict']}")


def test_every_change_kind_has_a_fixture() -> None:
    covered = {f["rule"] for case in CASES for f in json.loads((DATA / case / "expected.json").read_text())["findings"]}
    assert covered == set(CHANGE_KINDS)


def test_verdict_is_compatible_exactly_when_the_fingerprint_is_unchanged() -> None:
    for case in CASES:
        d = diff_layouts(_layout(DATA / case / "previous"), _layout(DATA / case / "current"))
        assert (d.verdict == "compatible") == (d.old_fingerprint == d.new_fingerprint), case


def test_tail_append_messages_and_migrator_line() -> None:
    d = diff_layouts(_layout(DATA / "slot_appended" / "previous"), _layout(DATA / "slot_appended" / "current"))
    appended = next(c for c in d.changes if c.rule == "SLOT_APPENDED")
    assert isinstance(appended, LayoutChange) and isinstance(d, LayoutDiff)
    assert (appended.old_index, appended.new_index, appended.slot) == (None, 8, "LABEL_SCALE")
    assert appended.message == (
        'Slot "LABEL_SCALE" is appended at index 8, past the old end of the layout (total dimension 8); old slots '
        "keep their indices and a migrator initialises it from its reset policy (ColdStart 1.0, FoldReset 1.0)."
    )
    assert d.summary_lines() == [
        f"verdict: migratable (not acknowledged: add an [[isv.acknowledge]] from {FIXTURE_BASE_FINGERPRINT} to {d.new_fingerprint} with a reason)",
        f"fingerprint: {FIXTURE_BASE_FINGERPRINT} -> {d.new_fingerprint}",
        f'migrator: old 0..4 -> new 0..4; rewrite index 7 "LAYOUT_FP" with {d.new_fingerprint}; '
        'initialise index 8 "LABEL_SCALE" from its reset policy (ColdStart 1.0, FoldReset 1.0)',
    ]
    assert [s.name for s in d.initialised] == ["LABEL_SCALE"] and [s.name for s in d.rewritten] == ["LAYOUT_FP"]


def test_acknowledgement_must_match_both_fingerprints(tmp_path: Path) -> None:
    text = (DATA / "slot_appended_acknowledged" / "current" / "isv.toml").read_text()
    (tmp_path / "isv.toml").write_text(text.replace(f'from = "{FIXTURE_BASE_FINGERPRINT}"', 'from = "0x0000000000000001"'))
    d = diff_layouts(_layout(DATA / "slot_appended" / "previous"), load_contracts(tmp_path, tmp_path).isv)
    assert d.acknowledged is None and d.exit_code == 1


def test_docs_table_lists_every_change_kind() -> None:
    doc = (REPO / "docs" / "layout.md").read_text()
    for k in CHANGE_KINDS.values():
        assert f"| `{k.id}` | {k.what} | {k.effect} | {k.verdict} |" in doc, k.id


# ---------------------------------------------------------------------------------------------------
# fingerprint


def test_fingerprint_of_fixture_layout_is_pinned() -> None:
    layout = _layout(DATA / "slot_appended" / "previous")
    assert fingerprint(layout) == FIXTURE_BASE_FINGERPRINT
    assert canonical_layout(layout).splitlines()[:4] == [
        "wireup-isv-layout 1",
        "total_dim 8",
        "dtype f32",
        "slot 0 count=1 dtype=f32 role=ema reset=ColdStart:0.0,FoldReset:0.0",
    ]


def test_fingerprint_is_sha256_prefix_of_canonical_text() -> None:
    layout = _layout(REPO / "contracts")
    digest = hashlib.sha256(canonical_layout(layout).encode()).digest()[:8]
    assert fingerprint(layout) == f"0x{int.from_bytes(digest, 'big'):016x}" == SHIPPED_FINGERPRINT
    named = canonical_layout(layout, names=True)
    stripped = "".join(re.sub(r"  # .*$", "", line) + "\n" for line in named.splitlines())
    assert stripped == canonical_layout(layout)


def test_shipped_pin_matches_and_docs_show_the_canonical_text() -> None:
    layout = _layout(REPO / "contracts")
    assert layout.fingerprint == SHIPPED_FINGERPRINT
    doc = (REPO / "docs" / "layout.md").read_text()
    for line in canonical_layout(layout, names=True).splitlines()[:6]:
        assert line in doc


def test_doc_name_and_writer_edits_keep_the_fingerprint() -> None:
    layout = _layout(REPO / "contracts")
    slots = tuple(dataclasses.replace(s, doc="reworded", name=f"X_{s.name}", shared_writers=("k",)) for s in layout.slots)
    edited = dataclasses.replace(layout, slots=tuple(reversed(slots)), fingerprint=None, acknowledgements=(), buffer="other")
    assert fingerprint(edited) == fingerprint(layout)


@pytest.mark.parametrize(
    "edit",
    [
        {"index": 200},
        {"count": 2},
        {"dtype": "f16"},
        {"role": "ema"},
        {"reset": (("ColdStart", 1.0), ("FoldReset", 0.5))},
        {"reset": (("ColdStart", 1.0), ("FoldReset", "keep"))},
        {"reset": (("ColdStart", 1.0),)},
    ],
)
def test_any_slot_edit_changes_the_fingerprint(edit: dict) -> None:
    layout = _layout(REPO / "contracts")
    last = layout.slots[-1]
    assert last.name == "AUX_LABEL_SCALE_EMA"
    edited = dataclasses.replace(layout, slots=(*layout.slots[:-1], dataclasses.replace(last, **edit)))
    assert fingerprint(edited) != fingerprint(layout)


def test_layout_wide_edits_change_the_fingerprint() -> None:
    layout = _layout(REPO / "contracts")
    assert fingerprint(dataclasses.replace(layout, total_dim=119)) != fingerprint(layout)
    assert fingerprint(dataclasses.replace(layout, dtype="f64")) != fingerprint(layout)


def test_canonical_numbers() -> None:
    assert [format_number(v) for v in (1, 1.0, 0.05, -0.0, 1e-6, 1e20, "keep")] == ["1.0", "1.0", "0.05", "0.0", "1e-06", "1e+20", "keep"]
    a = Slot(0, "A", "ema", reset=(("FoldReset", 1), ("ColdStart", 0.0)))
    b = Slot(0, "B", "ema", reset=(("ColdStart", -0.0), ("FoldReset", 1.0)))
    from audit.layout.fingerprint import slot_line

    assert slot_line(a) == slot_line(b) == "slot 0 count=1 dtype=f32 role=ema reset=ColdStart:0.0,FoldReset:1.0"


def test_fingerprint_command_last_line(capsys) -> None:
    code, out, _ = _cli(capsys, "layout", "fingerprint", "--root", str(REPO))
    assert code == 0 and out.splitlines()[-1] == SHIPPED_FINGERPRINT and len(out.splitlines()) == 2
    assert "matches the pin" in out
    code, out, _ = _cli(capsys, "layout", "fingerprint", "--verbose", "--root", str(REPO))
    lines = out.splitlines()
    assert code == 0 and lines[-1] == SHIPPED_FINGERPRINT and lines[0] == "wireup-isv-layout 1"
    assert lines[3] == "slot 0 count=1 dtype=f32 role=ema reset=ColdStart:0.0,FoldReset:0.0  # Q_LOSS_EMA"
    code, out, _ = _cli(capsys, "layout", "fingerprint", "--root", str(REPO), str(DATA / "slot_appended" / "previous" / "isv.toml"))
    assert out.splitlines()[-1] == FIXTURE_BASE_FINGERPRINT


# ---------------------------------------------------------------------------------------------------
# FINGERPRINT_PIN


def _check_layout(root: Path, rule: str):
    from audit.api import check

    return [f for f in check(root, select=[rule]).findings]


def test_shipped_contracts_pass_the_layout_rules() -> None:
    assert _check_layout(REPO, "layout") == []


def _project(tmp_path: Path, layout_dir: Path, pin: str | None) -> Path:
    (tmp_path / "wireup.toml").write_text('contracts = "contracts"\ngenerated = {}\n')
    (tmp_path / "contracts").mkdir(exist_ok=True)
    text = (layout_dir / "isv.toml").read_text()
    if pin is not None:
        text = text.replace('reset_events = ["ColdStart", "FoldReset"]\n', f'reset_events = ["ColdStart", "FoldReset"]\nfingerprint = "{pin}"\n')
    (tmp_path / "contracts" / "isv.toml").write_text(text)
    return tmp_path


def test_missing_pin_is_a_finding(tmp_path: Path) -> None:
    root = _project(tmp_path, DATA / "slot_appended" / "previous", None)
    (hit,) = _check_layout(root, "FINGERPRINT_PIN")
    assert hit.message == f'The [isv] table in "contracts/isv.toml" pins no layout fingerprint; add fingerprint = "{FIXTURE_BASE_FINGERPRINT}" so that every later layout change shows up in review.'


def test_stale_pin_names_the_changed_slots_from_git_history(tmp_path: Path) -> None:
    root = _project(tmp_path, DATA / "slot_appended" / "previous", FIXTURE_BASE_FINGERPRINT)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "layout")
    assert _check_layout(root, "FINGERPRINT_PIN") == []
    # the layout grows by a tail slot, the pin stays
    _project(tmp_path, DATA / "slot_appended" / "current", FIXTURE_BASE_FINGERPRINT)
    (hit,) = _check_layout(root, "FINGERPRINT_PIN")
    new = fingerprint(load_contracts(root / "contracts", root).isv)
    sha = _git(root, "rev-parse", "--short=7", "HEAD").strip()
    assert hit.line == 7 and hit.file == "contracts/isv.toml"
    assert hit.message == (
        f"The pinned ISV layout fingerprint {FIXTURE_BASE_FINGERPRINT} does not match the layout, which hashes to {new}: "
        f'the layout at revision {sha} hashes to the pin and since then SLOT_APPENDED "LABEL_SCALE" at 8, '
        f'TOTAL_DIM_CHANGED 8 -> 9; set fingerprint = "{new}" and acknowledge the shift (migratable) with an '
        f"[[isv.acknowledge]] from {FIXTURE_BASE_FINGERPRINT} to {new}."
    )


def test_stale_pin_without_matching_revision(tmp_path: Path) -> None:
    root = _project(tmp_path, DATA / "slot_appended" / "previous", "0x0000000000000000")
    (hit,) = _check_layout(root, "FINGERPRINT_PIN")
    assert "no layout among the last 64 revisions of the contracts hashes to the pin, so the changed slots cannot be named" in hit.message
    assert f'set fingerprint = "{FIXTURE_BASE_FINGERPRINT}"' in hit.message


# ---------------------------------------------------------------------------------------------------
# diff against git revisions


def test_diff_against_a_revision_of_a_temporary_repo(tmp_path: Path, capsys) -> None:
    root = _project(tmp_path, DATA / "slot_appended" / "previous", None)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "117 slots")
    _project(tmp_path, DATA / "slot_appended" / "current", None)
    _git(root, "commit", "-qam", "tail append")
    (root / "untracked.txt").write_text("work tree state must survive\n")
    status = _git(root, "status", "--porcelain")

    code, out, _ = _cli(capsys, "layout", "diff", "--against", "HEAD~1", "--root", str(root))
    assert code == 1
    assert re.findall(r"^contracts/isv.toml:\d+: (\w+)", out, re.M) == ["TOTAL_DIM_CHANGED", "SLOT_APPENDED"]
    assert out.splitlines()[-2].startswith(f"fingerprint: {FIXTURE_BASE_FINGERPRINT} -> 0x")
    assert _git(root, "status", "--porcelain") == status

    layout = load_layout_at_revision("HEAD~1", root)
    assert layout.total_dim == 8 and fingerprint(layout) == FIXTURE_BASE_FINGERPRINT

    # acknowledging the shift in the new contracts makes it pass
    new = fingerprint(load_contracts(root / "contracts", root).isv)
    with (root / "contracts" / "isv.toml").open("a") as fh:
        fh.write(f'\n[[isv.acknowledge]]\nfrom = "{FIXTURE_BASE_FINGERPRINT}"\nto = "{new}"\nreason = "checkpoint-incompatible, no migrator per spec"\n')
    code, out, _ = _cli(capsys, "layout", "diff", "--against", "HEAD~1", "--root", str(root))
    assert code == 0 and "(warning)" in out and 'no migrator per spec")' in out.splitlines()[-3]
    # the default revision is HEAD (same layout as the work tree: compatible)
    _git(root, "commit", "-qam", "acknowledge")
    code, out, _ = _cli(capsys, "layout", "diff", "--root", str(root))
    assert code == 0 and out.splitlines()[-3].startswith("verdict: compatible")


def test_diff_against_this_repos_history(capsys) -> None:
    if not _has_revision("06d0fa4"):
        pytest.skip("shallow clone: revision 06d0fa4 is not in this repository's history")
    code, out, _ = _cli(capsys, "layout", "diff", "--against", "06d0fa4", "--root", str(REPO))
    assert code == 0, out
    assert re.findall(r"^contracts/isv.toml:\d+: (\w+) \(warning\)", out, re.M) == ["TOTAL_DIM_CHANGED", "SLOT_APPENDED"]
    lines = out.splitlines()
    assert "total dimension changes 117 -> 118" in out and 'Slot "AUX_LABEL_SCALE_EMA" is appended at index 117' in out
    assert lines[-3].startswith("verdict: migratable (acknowledged in contracts/isv.toml:")
    assert lines[-2] == f"fingerprint: {FINGERPRINT_AT_06D0FA4} -> {SHIPPED_FINGERPRINT}"
    assert lines[-1].startswith("migrator: old 0..106 -> new 0..106; rewrite indices 113..116")
    code, out, _ = _cli(capsys, "layout", "diff", "--against", "HEAD~1", "--root", str(REPO))
    assert code in (0, 1) and out.splitlines()[-3].startswith("verdict: ")


def test_exit_code_2_for_bad_revisions_and_unreadable_contracts(tmp_path: Path, capsys) -> None:
    code, out, err = _cli(capsys, "layout", "diff", "--against", "no-such-rev", "--root", str(REPO))
    assert code == 2 and out == ""
    assert err == f'error: Git revision "no-such-rev" does not name a commit of the repository at "{REPO}".\n'
    with pytest.raises(UsageError, match="is not a git revision"):
        load_layout_at_revision("--output=x", REPO)
    (tmp_path / "broken.toml").write_text("[isv]\ntotal_dim = 'eight'\n")
    code, _, err = _cli(capsys, "layout", "diff", "--root", str(REPO), str(DATA / "slot_appended" / "previous"), str(tmp_path / "broken.toml"))
    assert code == 2 and "total_dim" in err and "Traceback" not in err
    code, _, err = _cli(capsys, "layout", "diff", "--root", str(REPO), str(DATA / "slot_appended" / "previous"))
    assert code == 2 and err == "error: Expected two contract files or folders (OLD NEW), found 1.\n"
    code, _, err = _cli(capsys, "layout", "diff", "--root", str(REPO), str(tmp_path / "missing"), str(tmp_path / "missing"))
    assert code == 2 and "is neither a contract file nor a folder" in err
    (tmp_path / "plain.toml").write_text("[dims]\nB = 4\n")
    code, _, err = _cli(capsys, "layout", "diff", "--root", str(REPO), str(tmp_path / "plain.toml"), str(tmp_path / "plain.toml"))
    assert code == 2 and "declare no [isv] table" in err


def test_contract_errors_at_a_revision_name_the_revision(tmp_path: Path) -> None:
    root = _project(tmp_path, DATA / "slot_appended" / "previous", None)
    (root / "contracts" / "isv.toml").write_text("[isv]\ntotal_dim = 'eight'\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "broken")
    with pytest.raises(ContractError) as exc:
        load_layout_at_revision("HEAD", root)
    assert str(exc.value).startswith('revision "HEAD": contracts/isv.toml:2: isv.total_dim:')


# ---------------------------------------------------------------------------------------------------
# output formats


@pytest.mark.parametrize("fmt", ["text", "json", "github", "junit", "sarif"])
def test_diff_output_formats_parse(fmt: str, tmp_path: Path, capsys) -> None:
    case = DATA / "slot_inserted"
    target = tmp_path / f"out.{fmt}"
    code = main(["layout", "diff", "--root", str(REPO), "--format", fmt, "--output", str(target), str(case / "previous"), str(case / "current")])
    assert code == 1 and capsys.readouterr().out == ""
    text = target.read_text()
    if fmt == "json":
        doc = json.loads(text)
        assert [f["rule"] for f in doc["findings"]][:2] == ["TOTAL_DIM_CHANGED", "SLOT_INSERTED"]
        assert doc["layout"]["verdict"] == "migratable" and doc["layout"]["migrator"][1] == [1, 2]
        assert doc["summary"]["exit_code"] == 1
    elif fmt == "junit":
        suite = ET.fromstring(text.encode())
        props = {p.get("name"): p.get("value") for p in suite.find("properties")}
        assert props["verdict"] == "migratable" and suite.get("failures") != "0"
    elif fmt == "sarif":
        doc = json.loads(text)
        assert doc["version"] == "2.1.0"
        run = doc["runs"][0]
        rules = run["tool"]["driver"]["rules"]
        assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in run["results"])
        assert run["properties"]["layout"]["verdict"] == "migratable"
    elif fmt == "github":
        lines = text.splitlines()
        assert all(line.startswith("::") for line in lines)
        assert lines[-1].startswith("::error title=ISV layout migratable::verdict: migratable")
    else:
        assert text.splitlines()[-3].startswith("verdict: migratable")


# ---------------------------------------------------------------------------------------------------
# generated constants

# Macro names the hand-written header defined and the kernels include: they must never change.
KERNEL_MACROS = [
    "ISV_TOTAL_DIM", "Q_LOSS_EMA_INDEX", "TD_ABS_EMA_INDEX", "REWARD_SCALE_EMA_INDEX", "RETURN_SCALE_EMA_INDEX",
    "GRAD_NORM_EMA_INDEX", "GRAD_CLIP_DIVISOR_INDEX", "TRAIN_STEP_COUNT_INDEX", "TARGET_SYNC_COUNT_INDEX",
    "FEATURE_MEAN_EMA_INDEX", "FEATURE_MEAN_EMA_COUNT", "FEATURE_SCALE_EMA_INDEX", "FEATURE_SCALE_EMA_COUNT",
    "AUX_TRADE_OUTCOME_CE_EMA_INDEX", "AUX_NEXT_BAR_MSE_EMA_INDEX", "AUX_VALID_FRAC_EMA_INDEX", "RESERVED_INDEX",
    "RESERVED_COUNT", "LAYOUT_FINGERPRINT_INDEX", "LAYOUT_FINGERPRINT_COUNT", "AUX_LABEL_SCALE_EMA_INDEX",
    "LAYOUT_FINGERPRINT",
]  # fmt: skip


def test_generated_files_are_up_to_date_in_the_repo() -> None:
    cfg = load_config(REPO)
    layout = _layout(REPO / "contracts")
    files = generated_files(cfg.generated)
    assert [s for _, s in generate(REPO, layout, files, "contracts/isv.toml", check=True)] == ["unchanged"] * 3
    assert [stale_reason(REPO / f.path, layout, f.lang, "contracts/isv.toml") for f in files] == [None] * 3


def test_cuda_header_keeps_the_kernel_macro_names() -> None:
    text = (REPO / "kernels" / "isv_layout.cuh").read_text()
    assert text.startswith("// Generated by wireup from contracts/isv.toml; do not edit.\n")
    defines = dict(re.findall(r"^#define (\w+) (\S+)", text, re.M))
    assert set(KERNEL_MACROS) <= set(defines)
    assert defines["ISV_TOTAL_DIM"] == "118" and defines["AUX_LABEL_SCALE_EMA_INDEX"] == "117"
    assert defines["FEATURE_SCALE_EMA_COUNT"] == "48" and "Q_LOSS_EMA_COUNT" not in defines
    assert defines["LAYOUT_FINGERPRINT"] == f"{SHIPPED_FINGERPRINT}ULL"


def test_python_constants_match_the_layout() -> None:
    path = REPO / "audit" / "references" / "isv_layout.py"
    assert path.read_text().startswith("# Generated by wireup from contracts/isv.toml; do not edit.\n")
    spec = importlib.util.spec_from_file_location("generated_isv_layout", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    layout = _layout(REPO / "contracts")
    assert mod.ISV_TOTAL_DIM == 118 and mod.LAYOUT_FINGERPRINT == int(SHIPPED_FINGERPRINT, 16)
    assert mod.SLOT_INDICES == {s.name: s.index for s in layout.slots}
    assert mod.FEATURE_MEAN_EMA_COUNT == 48 and not hasattr(mod, "Q_LOSS_EMA_COUNT")
    for ev in ("ColdStart", "FoldReset"):
        values = mod.RESET_VALUES[ev]
        assert len(values) == 118
        for s in layout.slots:
            want = s.reset_value(ev)
            assert set(values[s.index : s.index + s.count]) == {None if want == "keep" else want}, (ev, s.name)


def test_rust_constants_text() -> None:
    text = (REPO / "reports" / "generated" / "isv_layout.rs").read_text()
    assert text.startswith("// Generated by wireup from contracts/isv.toml; do not edit.\n")
    assert "pub const ISV_TOTAL_DIM: usize = 118;" in text
    assert "pub const AUX_LABEL_SCALE_EMA_INDEX: usize = 117;" in text
    assert f"pub const LAYOUT_FINGERPRINT: u64 = {SHIPPED_FINGERPRINT};" in text
    assert '("FoldReset", 117) => Some(Reset::Value(1.0))' in text
    assert '("ColdStart", 113..=116) => Some(Reset::Keep)' in text


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")
def test_cuda_header_compiles_as_cpp(tmp_path: Path) -> None:
    src = tmp_path / "t.cpp"
    src.write_text('#include "isv_layout.cuh"\nint main() { return ISV_RESET_VALUES[ISV_EVENT_FOLD_RESET][AUX_LABEL_SCALE_EMA_INDEX] == 1.0f ? 0 : 1; }\n')
    out = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", str(REPO / "kernels"), str(src)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.skipif(shutil.which("rustc") is None, reason="rustc is not on PATH")
def test_rust_constants_compile(tmp_path: Path) -> None:
    main_rs = tmp_path / "main.rs"
    shutil.copy(REPO / "reports" / "generated" / "isv_layout.rs", tmp_path / "isv_layout.rs")
    main_rs.write_text(
        "#![allow(dead_code)]\nmod isv_layout;\nuse isv_layout::*;\nfn main() {\n"
        '    assert_eq!(reset_value("FoldReset", AUX_LABEL_SCALE_EMA_INDEX), Some(Reset::Value(1.0)));\n'
        '    assert_eq!(reset_value("ColdStart", LAYOUT_FINGERPRINT_INDEX), Some(Reset::Keep));\n'
        '    assert_eq!(reset_value("Nope", 0), None);\n    assert_eq!(reset_value("ColdStart", ISV_TOTAL_DIM), None);\n}\n'
    )
    out = subprocess.run(["rustc", "--edition", "2021", "--emit=metadata", "-o", str(tmp_path / "m"), str(main_rs)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_generation_is_deterministic() -> None:
    layout = _layout(REPO / "contracts")
    for lang in ("cuda", "python", "rust"):
        assert render_generated(layout, lang, "contracts/isv.toml") == render_generated(layout, lang, "contracts/isv.toml")


def _generated_copy(tmp_path: Path) -> Path:
    (tmp_path / "wireup.toml").write_text('contracts = "contracts"\n')
    shutil.copytree(REPO / "contracts", tmp_path / "contracts", ignore=shutil.ignore_patterns("kernels"))
    for rel in ("kernels/isv_layout.cuh", "audit/references/isv_layout.py", "reports/generated/isv_layout.rs"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    return tmp_path


def test_stale_generated_files_are_detected_and_regenerated(tmp_path: Path, capsys) -> None:
    root = _generated_copy(tmp_path)
    assert _check_layout(root, "GENERATED_STALE") == []
    code, _, _ = _cli(capsys, "layout", "generate", "--check", "--root", str(root))
    assert code == 0

    isv = root / "contracts" / "isv.toml"
    isv.write_text(isv.read_text().replace('doc = "EMA of the distributional Q loss"', 'doc = "EMA of the C51 loss"'))
    hits = _check_layout(root, "GENERATED_STALE")
    assert sorted(h.subject for h in hits) == ["audit/references/isv_layout.py", "kernels/isv_layout.cuh", "reports/generated/isv_layout.rs"]
    assert hits[0].message.endswith("is out of date; run `wireup layout generate`.")
    code, out, _ = _cli(capsys, "layout", "generate", "--check", "--root", str(root))
    assert code == 1 and out.count(": stale; run `wireup layout generate`.") == 3

    code, out, _ = _cli(capsys, "layout", "generate", "--root", str(root))
    assert code == 0 and out.count(": written.") == 3
    assert _check_layout(root, "GENERATED_STALE") == []
    assert "EMA of the C51 loss" in (root / "reports" / "generated" / "isv_layout.rs").read_text()


def test_hand_edits_and_missing_files_are_stale(tmp_path: Path, capsys) -> None:
    root = _generated_copy(tmp_path)
    header = root / "kernels" / "isv_layout.cuh"
    header.write_text(header.read_text().replace("#define AUX_LABEL_SCALE_EMA_INDEX 117", "#define AUX_LABEL_SCALE_EMA_INDEX 116"))
    (root / "reports" / "generated" / "isv_layout.rs").unlink()
    (root / "audit" / "references" / "isv_layout.py").write_text("ISV_TOTAL_DIM = 118\n")
    messages = sorted(h.message for h in _check_layout(root, "GENERATED_STALE"))
    assert messages == [
        'Generated file "audit/references/isv_layout.py" has no wireup header (it was not generated, or was edited); run `wireup layout generate`.',
        'Generated file "kernels/isv_layout.cuh" was edited by hand; run `wireup layout generate`.',
        'Generated file "reports/generated/isv_layout.rs" is missing; run `wireup layout generate`.',
    ]
    code, out, _ = _cli(capsys, "layout", "generate", "--check", "--root", str(root))
    assert code == 1 and "reports/generated/isv_layout.rs: missing" in out


def test_stale_check_does_not_need_jinja(monkeypatch) -> None:
    # GENERATED_STALE runs in every `wireup check`; importing Jinja there would cost ~50 ms.
    monkeypatch.setitem(sys.modules, "jinja2", None)  # any import of jinja2 now fails
    assert _check_layout(REPO, "GENERATED_STALE") == []
    with pytest.raises(ImportError):
        render_generated(_layout(REPO / "contracts"), "cuda", "contracts/isv.toml")
