"""The generality fixture (tests/data/generality) and the broken-kernel fixtures, on the CPU.

The emulated backend runs the fixture's own references through the whole pipeline; with nvcc, the build
resolves its mangled C++ template symbol and every broken copy of a shipped kernel still compiles.
What they do on a GPU is tests/gpu/test_verify_gpu.py's business.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from audit.api import load_project
from audit.runtime import verify

REPO = Path(__file__).resolve().parents[1]
BROKEN = REPO / "tests" / "data" / "broken_kernels"


def _fixtures_module():
    spec = importlib.util.spec_from_file_location("make_fixtures", BROKEN / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_fixtures"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def generality(tmp_path):
    dst = tmp_path / "generality"
    shutil.copytree(REPO / "tests" / "data" / "generality", dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def test_generality_fixture_passes_on_the_emulated_backend(generality):
    out = verify(generality, emulated={}, sizes=(1, 37, 300), chain_sizes=(37, 300))
    # none of these sizes makes B * D a multiple of 512 (scale_rows' grid): that tail side is reported unrun;
    # three of its kernels take D as an argument and are verified at D = 48 only (VERIFY_FIXED_DIM_ONE_VALUE)
    assert [f.message for f in out.result.findings if f.rule not in ("VERIFY_TAIL_UNCOVERED", "VERIFY_FIXED_DIM_ONE_VALUE")] == []
    assert sorted(f.subject for f in out.result.findings if f.rule == "VERIFY_FIXED_DIM_ONE_VALUE") == ["masked_scale", "row_softmax", "scale_rows"]
    assert {f.severity.value for f in out.result.findings} <= {"warning"}
    by = {r.subject: r for r in out.run.results}
    assert set(by) == {"scale_rows", "clamp_inplace", "row_softmax", "masked_scale", "col_sum_atomic", "gen_step"}
    assert all(r.verdict == "pass" for r in by.values())
    checks = lambda s: {c.check for c in by[s].checks if c.verdict == "pass"}  # noqa: E731
    assert "divisor_zero" in checks("scale_rows")  # reads the ROW_SCALE scale slot
    assert {"accumulate", "determinism"} <= checks("col_sum_atomic")
    assert {"mask_zero", "all_skip"} <= checks("masked_scale")
    # run D passes NULL for both optional pointers: the input mask (all rows valid) and the output row_norm
    assert any("optional pointers NULL" in c.case for c in by["masked_scale"].checks if c.check == "reference")
    # both bindings of the local dim N (48 through the plain buffer, 96 through the flat buffer's view)
    assert {c.case for c in by["col_sum_atomic"].checks if c.check == "reference"} >= {"B=37 (N=48)", "B=37 (N=96)"}
    assert {"chain", "graph_replay"} <= checks("gen_step")


def test_generality_references_come_from_the_projects_own_module(generality):
    cfg, cs = load_project(generality)
    assert cfg.reference_paths == ("refs",)
    assert cs.kernel("scale_rows").reference == "gen_refs:scale_rows"
    assert "gen_refs" not in sys.modules or Path(sys.modules["gen_refs"].__file__).parent.name == "refs"


def test_sampled_rows_use_full_size_scalars_for_the_generality_kernels(generality):
    out = verify(generality, kernels=["scale_rows", "masked_scale"], emulated={}, sizes=(300,), budgets={"rowwise": 1000})
    assert [f for f in out.result.findings if f.rule not in ("VERIFY_TAIL_UNCOVERED", "VERIFY_FIXED_DIM_ONE_VALUE")] == []
    notes = {n for r in out.run.results for n in r.notes}
    assert any("full-size scalars" in n for n in notes)
    assert any("sampled rows" in c.message for r in out.run.results for c in r.checks if c.check == "reference")


@pytest.mark.nvcc
def test_generality_builds_and_resolves_the_mangled_template(generality):
    from audit.compile import build_kernels

    cfg, cs = load_project(generality)
    result = build_kernels(cfg, cs)
    sb, entry = result.kernel(cs.kernel("scale_rows"))
    assert sb.ok, sb.log
    assert entry.symbol.startswith("_ZN3gen10scale_rows")
    assert entry.demangled.startswith("void gen::scale_rows<float, 4>(")
    assert [p.ptx_type for p in entry.params][3:] == ["u32", "u64", "u32", "f64"]
    for name in ("clamp_inplace", "row_softmax", "masked_scale", "col_sum_atomic"):
        assert result.kernel(cs.kernel(name))[1].symbol == name


def test_broken_fixtures_are_in_step_with_the_shipped_kernels():
    mod = _fixtures_module()
    stale = [b.name for b in mod.FIXTURES if mod.path_of(b).read_text() != mod.render(b)]
    assert not stale, f"stale broken-kernel fixtures {stale}: run python3 tests/data/broken_kernels/make_fixtures.py"
    for b in mod.FIXTURES:
        text = mod.path_of(b).read_text()
        assert text.startswith("// BROKEN FIXTURE") and f"a copy of {b.source} with ONE change" in text
        assert all(r in text.splitlines()[1] for r in b.rules)


@pytest.mark.nvcc
def test_broken_fixtures_compile_in_place_of_their_kernels():
    from audit.compile import build_kernels

    mod = _fixtures_module()
    cfg, cs = load_project(REPO)
    for b in mod.FIXTURES:
        result = build_kernels(cfg, cs, sources=[b.kernel], source_overrides={b.kernel: mod.path_of(b)})
        sb, entry = result.kernel(cs.kernel(b.kernel))
        assert sb.ok and entry is not None, (b.name, sb.log[-2000:])


@pytest.mark.nvcc
def test_helper_kernels_compile(tmp_path):
    from audit.runtime._helpers import helper_cubin

    cubin, why = helper_cubin(tmp_path, "sm_90")
    assert cubin is not None and cubin.stat().st_size > 0, why
    again, _ = helper_cubin(tmp_path, "sm_90")
    assert again == cubin
