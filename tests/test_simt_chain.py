"""tests/simt_chain.py builds the chain as it was before the CUTLASS kernels shipped: a project of its own whose
contracts launch the SIMT forwards and partial, which the tests of SIMT-specific analyses use as their subject."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.api import check, load_project
from simt_chain import CUTLASS_FILES, SIMT_CONTRACTS, SIMT_FILES, simt_chain

REPO = Path(__file__).resolve().parents[1]


def test_the_simt_chain_launches_the_simt_kernels_and_needs_no_wheel(simt_repo: Path) -> None:
    cfg, cs = load_project(simt_repo)
    assert cfg.include_packages == ()
    sources = {k.name: (k.source, k.entry, [str(g) for g in k.grid], [str(b) for b in k.block]) for k in cs.kernels}
    assert sources["aux_trunk_forward"] == ("kernels/aux_trunk_kernel.cu", "aux_trunk_forward", ["ceil_div(SH2, 64)", "ceil_div(B, 128)", "1"], ["256", "1", "1"])
    for head in ("aux_trade_outcome_forward", "aux_next_bar_forward"):
        assert sources[head] == (f"kernels/{head}_kernel.cu", head, ["ceil_div(B, 32)", "1", "1"], ["128", "1", "1"])
    assert sources["aux_weight_grad_partial"][:2] == ("kernels/aux_weight_grad_split_kernel.cu", "aux_weight_grad_partial")
    assert "aux_weight_grad_partial_skinny" not in cs.kernel_map
    assert {s.launch for sch in cs.schedules for s in sch.steps if s.launch} >= {"aux_weight_grad_partial", "aux_trunk_forward"}
    assert all((simt_repo / "kernels" / n).is_file() for n in SIMT_FILES)
    assert not any((simt_repo / "kernels" / n).exists() for n in CUTLASS_FILES)
    assert sorted(p.name for p in (simt_repo / "reports" / "mutation").glob("aux_head_forward.cuh.json")) == ["aux_head_forward.cuh.json"]
    # the repository's own contracts differ exactly there
    _, shipped = load_project(REPO)
    changed = {k.name for k in shipped.kernels if k.name not in cs.kernel_map or cs.kernel_map[k.name].source != k.source}
    assert changed == {name for _, name in SIMT_CONTRACTS} | {"aux_weight_grad_partial_skinny"}


def test_the_simt_chain_passes_the_contract_rules(simt_repo: Path) -> None:
    """Schema, wiring, ISV, layout and invariant rules: the tree is a consistent project, not a half-edited copy."""
    result = check(simt_repo, select=["schema", "wiring", "isv", "layout", "invariants"])
    assert result.findings == [], [f.message for f in result.findings]


def test_a_kernel_table_that_is_gone_is_an_error(tmp_path: Path) -> None:
    """The helper fails loudly when a contract it rewrites no longer has the kernel (a rename in the repository)."""
    repo = tmp_path / "repo"
    for part in ("contracts", "kernels", "audit/references", "reports", "benchmarks/kernels_baseline"):
        import shutil

        shutil.copytree(REPO / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    path = repo / "contracts" / "kernels" / "aux_trunk.toml"
    path.write_text(path.read_text().replace('name = "aux_trunk_forward"', 'name = "aux_trunk_fwd"'))
    with pytest.raises(ValueError):
        simt_chain(tmp_path / "out", repo)
