"""``wireup init``: the CUDA signature parser and the contracts it scaffolds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.api import check, load_project
from audit.cli import main
from audit.load import load_contracts
from audit.scaffold import parse_kernels, scaffold_contracts

DATA = Path(__file__).parent / "data" / "report"


def signature(kernel) -> list[tuple[str, str, str]]:
    return [(p.name, p.kind, p.dtype) for p in kernel.params]


# entries of shipped sources that no contract launches: the SIMT trunk forward, kept beside the trunk backward as
# the baseline of benchmarks/gpu_fwd_cutlass.py since the CUTLASS kernel replaced it (5 December 2026)
BASELINE_ENTRIES = {"kernels/aux_trunk_kernel.cu": {"aux_trunk_forward"}}


def test_scaffolds_match_the_shipped_contracts(repo: Path) -> None:
    cfg, cs = load_project(repo)
    sources = sorted((repo / cfg.kernels).glob("*.cu"))
    assert sources, "no shipped kernels"
    for cu in sources:
        rel = cu.relative_to(repo).as_posix()
        text = scaffold_contracts(parse_kernels(cu.read_text()), rel, cs.dim_map)
        scaffolded = load_contracts(repo / "contracts", repo, texts={"scaffold.toml": text})
        # a scaffold names each kernel by its entry; the contracts of the CUTLASS kernels (and the skinny partial)
        # keep the names of the kernels they replaced, so match by entry
        contracted = {k.entry: k for k in cs.kernels if k.source == rel}
        baselines = BASELINE_ENTRIES.get(rel, set())
        assert {k.name for k in scaffolded.kernels} == set(contracted) | baselines, rel
        for k in scaffolded.kernels:
            if k.name in baselines:
                continue
            assert signature(k) == signature(contracted[k.name]), k.name
            assert k.entry == contracted[k.name].entry


SOURCE = r'''
#include "common.cuh"
#define LAUNCH_KERNEL(name) __global__ void name(float* p)   // a macro: not seen
namespace ops {
namespace cg = cooperative_groups;
template <typename T, int kTile>
__global__ void __launch_bounds__(256, 2)
scale(const T* __restrict__ x,   // input rows
      T *y,                      /* output, same shape */
      long long n, unsigned m, int64_t k, float alpha = 1.0f, const double* const z, float w[]);
}  // namespace ops

extern "C" {
__global__ void plain(int n, const float* __restrict__ isv, bool flag, unsigned long long u) { if (n) { return; } }
}

extern "C" __global__ void __cluster_dims__(1, 1, 8) __launch_bounds__(kThreads)
clustered(const float* __restrict__ a,
          float* __restrict__ isv,
          int /* unnamed count */) {
    const char* s = "__global__ void fake(int x)";
}
'''


def test_parser_reads_real_world_signatures() -> None:
    ks = {k.name: k for k in parse_kernels(SOURCE)}
    assert list(ks) == ["scale", "plain", "clustered"]
    scale = ks["scale"]
    assert (scale.extern_c, scale.namespace, scale.launch_bounds, scale.cpp_name) == (False, ("ops",), "256, 2", "ops::scale<TODO>")
    assert [(p.name, p.kind, p.dtype, p.const_data) for p in scale.params] == [
        ("x", "tensor", None, True), ("y", "tensor", None, False), ("n", "scalar", "i64", False),
        ("m", "scalar", "u32", False), ("k", "scalar", "i64", False), ("alpha", "scalar", "f32", False),
        ("z", "tensor", "f64", True), ("w", "tensor", "f32", False),
    ]  # fmt: skip
    assert [p.template_type for p in scale.params[:2]] == [True, True]
    assert [(p.name, p.kind, p.dtype) for p in ks["plain"].params] == [
        ("n", "scalar", "i32"), ("isv", "isv", "f32"), ("flag", "scalar", "u8"), ("u", "scalar", "u64"),
    ]  # fmt: skip
    assert ks["plain"].extern_c and ks["clustered"].extern_c
    assert ks["clustered"].launch_bounds == "kThreads"
    assert [(p.name, p.kind) for p in ks["clustered"].params] == [("a", "tensor"), ("isv", "isv"), ("arg2", "scalar")]


def test_scaffold_text() -> None:
    text = scaffold_contracts(parse_kernels(SOURCE), "kernels/ops.cu", ["n"])
    assert 'cpp_name = "ops::scale<TODO>"  # TODO: the instantiation the host launches' in text
    assert "block = [256, 1, 1]  # from __launch_bounds__(256, 2)" in text
    assert '  { name = "x", dtype = "f32", shape = ["TODO"], role = "in" },  # TODO: dtype of template parameter T' in text
    assert '  { name = "n", kind = "scalar", dtype = "i64", value = "n" },' in text  # a declared dim
    assert '  { name = "m", kind = "scalar", dtype = "u32", value = "TODO" },' in text
    assert '  { name = "isv", kind = "isv" },' in text
    assert 'entry = "plain"' in text and 'block = ["TODO", 1, 1]  # __launch_bounds__(kThreads)' in text


def test_scaffolded_contract_fails_the_check_until_filled_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "mini"
    shutil.copytree(DATA / "mini", root, ignore=shutil.ignore_patterns(".wireup-cache", "reports"))
    (root / "kernels" / "scale2_kernel.cu").write_text(
        'extern "C" __global__ void __launch_bounds__(64)\n'
        "scale2(const float* __restrict__ x, float* __restrict__ y, int B, int N, float alpha) {}\n"
    )
    rc = main(["init", "--root", str(root), str(root / "kernels" / "scale2_kernel.cu"), "-o", str(root / "contracts" / "scale2.toml")])
    assert rc == 0
    assert "1 kernel(s): scale2" in capsys.readouterr().err
    text = (root / "contracts" / "scale2.toml").read_text()
    assert 'source = "kernels/scale2_kernel.cu"' in text
    assert '{ name = "B", kind = "scalar", dtype = "i32", value = "B" }' in text

    result = check(root, select=["UNKNOWN_DIM"])
    todo = [f for f in result.findings if f.subject == "scale2"]
    assert todo and all('"TODO"' in f.message for f in todo) and result.exit_code == 1

    filled = text.replace('shape = ["TODO"]', 'shape = ["B", "N"]').replace('grid = ["TODO", 1, 1]', 'grid = ["B", 1, 1]')
    filled = filled.replace('name = "alpha", kind = "scalar", dtype = "f32", value = "TODO"', 'name = "alpha", kind = "scalar", dtype = "f32", value = 2.0')
    (root / "contracts" / "scale2.toml").write_text(filled)
    assert [f for f in check(root, select=["UNKNOWN_DIM"]).findings if f.subject == "scale2"] == []


def test_init_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "host.cu"
    empty.write_text("__device__ float twice(float x) { return 2 * x; }\n")
    assert main(["init", "--root", str(tmp_path), str(empty)]) == 1
    assert "declares no __global__ function" in capsys.readouterr().err
    assert main(["init", "--root", str(tmp_path), str(tmp_path / "missing.cu")]) == 2
    assert "cannot be read" in capsys.readouterr().err
    cu = tmp_path / "k.cu"
    cu.write_text('extern "C" __global__ void k(float* y) {}\n')
    out = tmp_path / "k.toml"
    out.write_text("keep me\n")
    assert main(["init", "--root", str(tmp_path), str(cu), "-o", str(out)]) == 2
    assert "pass --force" in capsys.readouterr().err and out.read_text() == "keep me\n"
    assert main(["init", "--root", str(tmp_path), str(cu), "-o", str(out), "--force"]) == 0
    assert 'name = "k"' in out.read_text()
