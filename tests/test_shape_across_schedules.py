"""SHAPE_MISMATCH names the producer in an earlier schedule when a backward reads what a forward saved."""

from __future__ import annotations

import shutil
from pathlib import Path

from audit.cli import main


def test_backward_consumer_of_a_forward_output_names_its_producer(repo: Path, tmp_path: Path, capsys) -> None:
    root = tmp_path / "proj"
    shutil.copytree(repo / "contracts", root / "contracts")
    (root / "wireup.toml").write_text("generated = {}\n")
    trunk = root / "contracts" / "kernels" / "aux_trunk.toml"
    text = trunk.read_text()
    old = '{ name = "h", dtype = "f32", shape = ["B", "SH2"], role = "in" }'
    assert old in text
    trunk.write_text(text.replace(old, '{ name = "h", dtype = "f32", shape = ["B", "SH2 + 6"], role = "in" }'))
    rc = main(["check", "--root", str(root), "--select", "SHAPE_MISMATCH"])
    out = capsys.readouterr().out
    assert rc == 1
    assert (
        'Kernel "aux_trunk_forward" parameter "h_out" has shape [B, 256] but its consumer "aux_trunk_backward" '
        'expects [B, 262] for parameter "h" (buffer "h_s2_aux", schedules "aux_heads_forward" -> "aux_heads_backward").'
    ) in out
