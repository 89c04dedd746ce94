"""The complete example in docs/contracts.md is a real, clean contract set."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from audit.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "contracts.md"
FIXTURE = Path(__file__).resolve().parent / "data" / "docs_example"


def example_toml() -> str:
    text = DOC.read_text()
    section = text.split("## A complete example", 1)[1]
    match = re.search(r"```toml\n(# contracts/example.toml\n.*?)```", section, re.S)
    assert match, "the complete example's TOML block is missing from docs/contracts.md"
    return match.group(1)


def test_docs_example_passes_check(tmp_path: Path, capsys) -> None:
    shutil.copytree(FIXTURE, tmp_path / "proj")
    root = tmp_path / "proj"
    (root / "contracts").mkdir()
    (root / "contracts" / "example.toml").write_text(example_toml())
    rc = main(["check", "--root", str(root), "--ignore", "evidence,layout,launchers"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "0 error(s)" in out


def test_docs_example_breaks_when_a_shape_changes(tmp_path: Path, capsys) -> None:
    shutil.copytree(FIXTURE, tmp_path / "proj")
    root = tmp_path / "proj"
    (root / "contracts").mkdir()
    broken = example_toml().replace('{ name = "y", dtype = "f32", shape = ["B", "D"], role = "in" }', '{ name = "y", dtype = "f32", shape = ["B", "D + 1"], role = "in" }')
    (root / "contracts" / "example.toml").write_text(broken)
    rc = main(["check", "--root", str(root), "--select", "SHAPE_MISMATCH"])
    out = capsys.readouterr().out
    assert rc == 1
    assert 'Kernel "scale_rows" parameter "y" has shape [B, 64] but its consumer "masked_pick_loss" expects [B, 65]' in out
