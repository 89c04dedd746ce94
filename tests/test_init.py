"""``wireup init``: the CUDA signature parser and the contracts it scaffolds."""

from __future__ import annotations

import shutil
import sys
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


def test_cuda_vector_types_are_their_lane_dtype_with_a_trailing_axis() -> None:
    """3D Gaussian splatting passes float2/float3/float4/uint2 arrays: each is the lane's dtype with a
    trailing axis of the lanes, and ``align`` where the vector's alignment exceeds the lane's (float3's does
    not); a vector passed by value has no contract dtype (a TODO)."""
    source = ('__global__ void pack(int n, const float2* xy, const float3* m, const uint2* r, float4* out, '
              "double2* d, __half2* h, float2 by_value) {}")
    text = scaffold_contracts(parse_kernels(source), "src/k.cu")
    assert '  { name = "xy", dtype = "f32", shape = ["TODO", 2], role = "in", align = 8 },  # float2: 2 x f32 per element' in text
    assert '  { name = "m", dtype = "f32", shape = ["TODO", 3], role = "in" },  # float3: 3 x f32 per element' in text
    assert '  { name = "r", dtype = "u32", shape = ["TODO", 2], role = "in", align = 8 },  # uint2: 2 x u32 per element' in text
    assert '  { name = "out", dtype = "f32", shape = ["TODO", 4], role = "out", align = 16 },  # TODO: out, inout or accumulate?' in text
    assert '  { name = "d", dtype = "f64", shape = ["TODO", 2], role = "out", align = 16 },' in text
    assert '  { name = "h", dtype = "f16", shape = ["TODO", 2], role = "out", align = 4 },' in text
    assert '  { name = "by_value", kind = "scalar", dtype = "TODO", value = "TODO" },  # TODO: C type "float2" has no contract dtype' in text


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


def _init_text(tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str], *argv: str, rc: int = 0) -> str:
    """Run ``wireup init`` in a fresh project holding ``files``; its stdout (the scaffold when no -o), its
    stderr left in ``capsys``."""
    (tmp_path / "wireup.toml").write_text("")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert main(["init", "--root", str(tmp_path), *argv]) == rc
    out, err = capsys.readouterr()
    sys.stderr.write(err)
    return out


def test_a_dim3_grid_keeps_every_component_that_translates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # grid.x is a host value no kernel argument names; grid.y and grid.z are arguments: only grid.x is "TODO"
    text = _init_text(tmp_path, capsys, {"k.cu": (
        "__global__ void k(float* y, int nh, int n, int d) {}\n"
        "void launch(float* y, int batch, int nh, int n, int d) {\n"
        "    const int B = batch * 2;\n"
        "    dim3 grid_dim(B, nh, d);\n"
        "    dim3 block_dim(n, batch);\n"
        "    k<<<grid_dim, block_dim>>>(y, nh, n, d);\n"
        "}\n")}, str(tmp_path / "k.cu"))  # fmt: skip
    assert 'grid = ["TODO", "nh", "d"]  # "(batch * 2)" at k.cu:6 uses "batch", which no integer kernel argument or declared dim names\n' in text
    # a component other than x that does not translate is named
    assert 'block = ["n", "TODO", 1]  # block.y: "batch" at k.cu:6 uses "batch", which no integer kernel argument or declared dim names\n' in text


def test_a_constant_passed_by_name_is_a_fixed_dim_and_other_launches_are_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _init_text(tmp_path, capsys, {"k.cu": (
        "__global__ void k(const float* x, float* y, int n, int Bc, int layer) {}\n"
        "void launch(const float* x, float* y, int n) {\n"
        "    const int Bc = 32;\n"
        "    const int bs = 64;\n"
        "    for (int i = 0; i < 4; i++) {\n"
        "        k<<<(n + Bc - 1) / Bc, Bc>>>(x, y, n, Bc, i);\n"
        "    }\n"
        "    k<<<(n + bs - 1) / bs, bs>>>(x, y, n, bs, 0);\n"
        "    k<<<(n + Bc - 1) / Bc, Bc>>>(x, y, n, Bc, 1);\n"
        "}\n")}, str(tmp_path / "k.cu"))  # fmt: skip
    assert 'Bc = 32  # fixed: the launch at k.cu:6 passes the constant "Bc"; make it a range if it varies at run time\n' in text
    assert 'grid = ["ceil_div(n, Bc)", 1, 1]  # from k.cu:6' in text and 'block = ["Bc", 1, 1]  # from k.cu:6' in text
    assert '{ name = "Bc", kind = "scalar", dtype = "i32", value = "Bc" },' in text
    # the loop index is no constant (its "= 0" is only its first value): a dim with a range
    assert '{ name = "layer", kind = "scalar", dtype = "i32", value = "layer" },' in text
    assert "layer = { min = 1, max = 65536 }  # TODO: the range of layer" in text
    # the launch with other geometry is said; the last one differs in "layer" only
    assert ('# TODO: k.cu:8 launches "k" too, with other geometry or arguments (Bc = 64; layer = 0); this contract describes the launch at k.cu:6.\n'
            '# TODO: k.cu:9 launches "k" too, with other geometry or arguments (layer = 1); this contract describes the launch at k.cu:6.\n') in text  # fmt: skip
    cs = load_contracts(tmp_path / "contracts", tmp_path, texts={"scaffold.toml": text})
    assert (cs.dim_map["Bc"].kind, cs.dim_map["Bc"].value) == ("fixed", 32)


def test_a_dim_passed_a_constant_by_one_launch_and_a_variable_by_another_is_a_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _init_text(tmp_path, capsys, {"k.cu": (
        "__global__ void a(float* y, int bs) {}\n__global__ void b(float* y, int bs) {}\n"
        "void h(float* y, int m) { constexpr int bs = 128; a<<<1, bs>>>(y, bs); b<<<1, m>>>(y, m); }\n")}, str(tmp_path / "k.cu"))  # fmt: skip
    assert "bs = { min = 1, max = 65536 }  # TODO: the range of bs (kernel arguments passed 128 at k.cu:3, a variable at k.cu:3)\n" in text


def test_several_sources_make_one_file_with_one_dims_table_that_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = {
        "a.cuh": "__global__ void a(float* y, int n);\n",  # the declaration a.cu defines
        "a.cu": '#include "a.cuh"\n__global__ void a(float* y, int n) {}\nvoid la(float* y, int n) { a<<<(n + 255) / 256, 256>>>(y, n); }\n',
        "b.cu": "__global__ void b(float* y, int n) {}\nvoid lb(float* y, int n) { b<<<(n + 127) / 128, 128>>>(y, n); }\n",
    }
    (tmp_path / "contracts").mkdir()
    out = tmp_path / "contracts" / "scaffold.toml"
    _init_text(tmp_path, capsys, files, *(str(tmp_path / f) for f in ("a.cuh", "a.cu", "b.cu")), "--host", str(tmp_path / "a.cu"), "-o", str(out))
    assert 'wireup init: kernel "a" at a.cuh:1 is scaffolded from a.cu:2; skipped here.' in capsys.readouterr().err
    text = out.read_text()
    assert text.count("[dims]") == 1 and text.count('\nname = "a"') == 1 and text.count('\nname = "b"') == 1
    # the --host file is named as the sources are, relative to the root
    assert "n = { min = 1, max = 65536 }  # TODO: the range of n (a kernel argument of the launches at a.cu:3, b.cu:2)\n" in text
    cs = load_contracts(tmp_path / "contracts", tmp_path)  # "Cannot declare ('dims',) twice" before
    assert sorted(k.name for k in cs.kernels) == ["a", "b"] and cs.kernel("a").source == "a.cu"


def test_init_creates_the_contracts_folder_but_no_other_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # docs/adopting.md step 1: `echo > wireup.toml; wireup init F.cu -o contracts/scaffold.toml` in a bare folder
    files = {"k.cu": "__global__ void k(float* y) {}\n"}
    _init_text(tmp_path, capsys, files, str(tmp_path / "k.cu"), "-o", str(tmp_path / "contracts" / "kernels" / "k.toml"))
    assert 'name = "k"' in (tmp_path / "contracts" / "kernels" / "k.toml").read_text()
    for elsewhere in (tmp_path / "other" / "k.toml", tmp_path.parent / f"{tmp_path.name}-missing" / "k.toml"):
        _init_text(tmp_path, capsys, files, str(tmp_path / "k.cu"), "-o", str(elsewhere), rc=2)
        assert capsys.readouterr().err.endswith(f'error: --output "{elsewhere}" cannot be written: the folder "{elsewhere.parent}" does not exist.\n')
        assert not elsewhere.parent.exists()


def test_file_scope_constants_of_included_headers_give_the_geometry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # SGEMM_CUDA's runner: blockDim(K9_NUM_THREADS), the constant at file scope in the kernel's header
    files = {
        "k.cuh": "#pragma once\nconst int NUM_THREADS = 256;\n__global__ void k(float* y, int n) {}\n",
        "host.cu": '#include "k.cuh"\nvoid run(float* y, int n) {\n    k<<<(n + NUM_THREADS - 1) / NUM_THREADS, NUM_THREADS>>>(y, n);\n}\n',
    }
    text = _init_text(tmp_path, capsys, files, str(tmp_path / "k.cuh"), "--host", str(tmp_path / "host.cu"))
    assert 'grid = ["ceil_div(n, 256)", 1, 1]  # from host.cu:3' in text and "block = [256, 1, 1]  # from host.cu:3" in text


def test_a_define_with_a_comment_is_its_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """cuda_hgemm writes ``#define ROW_WARPS 2  // COLS / 64``: the comment was read as part of the value, and
    ``//`` as a floor division, so ``init`` divided by zero (exit 3) or wrote block = [64] for 256."""
    text = _init_text(tmp_path, capsys, {"k.cu": (
        "#define COLS 128\n#define ROW_WARPS 2          // COLS / 64\n#define WARPS 8   /* ROW_WARPS * 4 */\n"
        "#define THREADS 256          // 32 * WARPS\n"
        "__global__ void k(float* x) { x[threadIdx.x] = 0.f; }\n"
        "void run(float* x) { k<<<ROW_WARPS, THREADS>>>(x); k<<<WARPS, THREADS>>>(x); }\n")}, str(tmp_path / "k.cu"))  # fmt: skip
    assert "grid = [2, 1, 1]  # from k.cu:6" in text and "block = [256, 1, 1]  # from k.cu:6" in text


def test_a_launch_that_divides_by_zero_is_a_todo_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _init_text(tmp_path, capsys, {"k.cu": (
        "#define W 2\n#define T (256 / (W - 2))\n__global__ void k(float* x) { x[threadIdx.x] = 0.f; }\n"
        "void run(float* x) { k<<<1, T>>>(x); }\n")}, str(tmp_path / "k.cu"))  # fmt: skip
    assert 'block = ["TODO", 1, 1]  # "((256 / (2 - 2)))" at k.cu:4 divides by zero where its names are constants' in text


def test_launch_arguments_with_their_constants_substituted() -> None:
    from audit.cuda.launches import find_launches

    text = (
        "#define TILE 16\n"
        "void h(float* x, int n) {\n"
        "    constexpr int T = TILE * 2;\n"
        "    int w = 3;\n"
        "    for (int i = 0; i < n; i++) {\n"
        "        k<<<n, T>>>(x, n, i, w, T, TILE);\n"
        "    }\n"
        "}\n"
    )
    (site,) = find_launches(text, "c", "k.cu")
    assert site.args == ("x", "n", "i", "w", "T", "TILE")  # as written: the geometry names them
    assert site.arg_values == ("x", "n", "i", "w", "(16 * 2)", "16")  # a loop index and a variable are no constants


_MACRO_SOURCE = {
    "ops.cuh": (
        "#pragma once\n"
        "#define UNARY(T, NAME) extern \"C\" __global__ void NAME(const size_t n, const T* x, T* y) { \\\n"
        "  size_t i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = -x[i]; }\n"
    ),
    "k.cu": (
        '#include "ops.cuh"\n'
        "#define AFFINE_OP(TYPENAME, FN_NAME) \\\n"
        'extern "C" __global__ void FN_NAME(const size_t numel, const TYPENAME *inp, TYPENAME *out, const TYPENAME mul) { \\\n'
        "  for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) out[i] = inp[i] * mul; \\\n"
        "}\n"
        "__global__ void plain(float* y, int n) { y[0] = n; }\n"
        "AFFINE_OP(float, affine_f32)\n"
        "AFFINE_OP(double, affine_f64)\n"
        "UNARY(float, neg_f32)\n"
    ),
}


@pytest.mark.nvcc
def test_init_reads_kernels_declared_through_macros_from_the_preprocessor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """candle's layout: every kernel a macro call (one defined in the file, one in a local header); each is
    scaffolded at the line of its call, with the parameter types of its expansion, in file order."""
    text = _init_text(tmp_path, capsys, _MACRO_SOURCE, str(tmp_path / "k.cu"))
    assert "k.cu: 3 kernel(s) declared through macros, read from nvcc -E (each at the line of its macro call)." in capsys.readouterr().err
    import re

    found = re.findall(r"from k\.cu:(\d+)\. .*\n\[\[kernel\]\]\nname = \"(\w+)\"", text)
    assert found == [("6", "plain"), ("7", "affine_f32"), ("8", "affine_f64"), ("9", "neg_f32")]
    assert '{ name = "inp", dtype = "f64", shape = ["TODO"], role = "in" }' in text
    assert '{ name = "numel", kind = "scalar", dtype = "u64", value = "TODO" }' in text


def test_init_says_when_macro_kernels_need_nvcc(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import audit.compile

    monkeypatch.setattr(audit.compile, "find_nvcc", lambda: None)
    text = _init_text(tmp_path, capsys, _MACRO_SOURCE, str(tmp_path / "k.cu"))
    assert 'name = "plain"' in text and "affine_f32" not in text
    assert f'"{tmp_path / "k.cu"}" declares kernels through a macro; nvcc (not found) expands them, so they are not scaffolded.' in capsys.readouterr().err



TEMPLATE_SOURCE = """\
#define NT 128
template <typename T, int BLOCK = 256>
__global__ void scale(const T* __restrict__ x, T* y, int n, T alpha) {}
template <int BLOCK>
__global__ void once(float* y, int n) {}
void host(float* x, float* y, double* xd, double* yd, int n) {
  scale<float, 256><<<(n + 255) / 256, 256>>>(x, y, n, 2.0f);
  scale<double, NT><<<(n + NT - 1) / NT, NT>>>(xd, yd, n, 2.0);
  scale<float, 2 * NT><<<(n + 255) / 256, 256>>>(x, y, n, 2.0f);
  once<64><<<n / 64, 64>>>(y, n);
}
template <typename T> void generic(T* x, T* y, int n) { scale<T, 256><<<n / 256, 256>>>(x, y, n, T(1)); }
"""


def test_template_launches_scaffold_one_contract_per_instantiation() -> None:
    from audit.cuda.launches import find_launches

    text = scaffold_contracts(parse_kernels(TEMPLATE_SOURCE), "kernels/t.cu", (), find_launches(TEMPLATE_SOURCE, "c", "kernels/t.cu"))
    # scale<float, 256> and scale<float, 2 * NT> are one instantiation; scale<double, NT> another; scale<T, 256> none known
    assert text.count("[[kernel]]") == 3
    assert 'name = "scale_f32_256"\nsource = "kernels/t.cu"\ncpp_name = "scale<float, 256>"  # the instantiation launched at kernels/t.cu:7' in text
    assert 'name = "scale_f64_128"\nsource = "kernels/t.cu"\ncpp_name = "scale<double, 128>"  # the instantiation launched at kernels/t.cu:8' in text
    assert 'name = "once"\nsource = "kernels/t.cu"\ncpp_name = "once<64>"  # the instantiation launched at kernels/t.cu:10' in text  # one instantiation: its own name
    assert text.count('TODO: kernels/t.cu:12 launches "scale" with template arguments <T, 256> that are not values here; '
                      "add a contract for each instantiation it runs.") == 1  # fmt: skip
    f64 = text[text.index('name = "scale_f64_128"') :]
    # the template type bound to double types its parameters, and the float literal passed becomes the scalar's value
    assert '  { name = "x", dtype = "f64", shape = ["TODO"], role = "in" },\n' in f64
    assert '  { name = "alpha", kind = "scalar", dtype = "f64", value = 2.0 },' in f64
    assert 'grid = ["ceil_div(n, 128)", 1, 1]  # from kernels/t.cu:8' in f64 and "block = [128, 1, 1]  # from kernels/t.cu:8" in f64
    assert "TODO: dtype of template parameter" not in text and "<TODO>" not in text


def test_template_without_known_instantiation_keeps_its_todo() -> None:
    from audit.cuda.launches import find_launches

    src = "template <typename T> __global__ void k(T* y, int n) {}\ntemplate <typename T> void h(T* y, int n) { k<T><<<1, 32>>>(y, n); }\n"
    text = scaffold_contracts(parse_kernels(src), "k.cu", (), find_launches(src, "c", "k.cu"))
    assert text.count("[[kernel]]") == 1
    assert 'cpp_name = "k<TODO>"  # TODO: the instantiation the host launches' in text
    assert '  { name = "y", dtype = "f32", shape = ["TODO"], role = "out" },  # TODO: dtype of template parameter T' in text


def test_scaffolded_instantiations_are_told_apart_by_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each scaffolded instantiation is matched with its own launches: a block changed in one contract is drift
    at that instantiation's launch only."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "contracts").mkdir()
    (tmp_path / "kernels" / "t.cu").write_text(TEMPLATE_SOURCE)
    assert main(["init", "--root", str(tmp_path), str(tmp_path / "kernels" / "t.cu"), "-o", str(tmp_path / "scaffold.toml")]) == 0
    text = (tmp_path / "scaffold.toml").read_text()
    text = text.replace('shape = ["TODO"]', 'shape = ["n"]').replace("# TODO", "#").replace('"TODO"', '"n"')
    text = text.replace('block = [128, 1, 1]  # from kernels/t.cu:8', "block = [256, 1, 1]")
    (tmp_path / "contracts" / "t.toml").write_text(text)
    capsys.readouterr()
    main(["check", "--root", str(tmp_path), "--select", "GEOMETRY_DRIFT"])
    out = capsys.readouterr().out
    assert 'kernels/t.cu:8: GEOMETRY_DRIFT Kernel "scale_f64_128" is launched here with block.x = "128" but its contract declares "256"' in out
    assert out.count("GEOMETRY_DRIFT") == 1, out


def test_template_defaults_complete_the_instantiation() -> None:
    """The compiled entry names every template argument: those a launch leaves out are the template's defaults
    (an earlier parameter's name in a default is its argument); a launch with none is the all-defaults one."""
    from audit.cuda.launches import find_launches

    src = """\
template <int BM = 128, int BN = BM / 2, int OFFSET = 0>
__global__ void g(float* c, int n) {}
template <typename T, int NT = 64>
__global__ void d(T* y, int n) {}
void h(float* c, int n) {
  g<128, 64><<<n / 128, 128>>>(c, n);
  g<256><<<n / 256, 256>>>(c, n);
  g<<<n / 128, 128>>>(c, n);
  d<float><<<1, 64>>>(c, n);
  d<<<1, 64>>>(c, n);
}
"""
    text = scaffold_contracts(parse_kernels(src), "g.cu", (), find_launches(src, "c", "g.cu"))
    assert text.count("[[kernel]]") == 3, text  # g<128, 64, 0> (lines 6 and 8), g<256, 128, 0>, d<float, 64>
    assert 'name = "g_128_64_0"\nsource = "g.cu"\ncpp_name = "g<128, 64, 0>"  # the instantiation launched at g.cu:6' in text
    assert 'name = "g_256_128_0"\nsource = "g.cu"\ncpp_name = "g<256, 128, 0>"  # the instantiation launched at g.cu:7' in text
    assert 'name = "d"\nsource = "g.cu"\ncpp_name = "d<float, 64>"  # the instantiation launched at g.cu:9' in text
    assert ('# TODO: g.cu:10 launches "d" with template arguments the compiler deduces from the call; '
            "add a contract for each instantiation it runs.") in text  # fmt: skip


def test_explicit_instantiations_are_no_kernels_and_name_the_instantiations() -> None:
    """bitsandbytes lists its kernels' instantiations: ``template __global__ void kfunc<float, FILL>(...);``. The
    parser took the last name before the parameter list, a template argument, as the kernel (kernels "float",
    "FILL", "half", ...: 11 false contracts in bitsandbytes' kernels.cu). Now such a declaration is an
    instantiation of the template it names: one contract each where no launch names one and its arguments
    are values, a note for those that are not (an enumerator)."""
    src = (
        "template <typename T, int OP> __global__ void kfunc(T* a, int n) {}\n"
        "template __global__ void kfunc<float, FILL>(float* a, int n);\n"
        "template <typename T, int B, int S = 0> __global__ void q(T* a, int n) {}\n"
        "template __global__ void q<half, 1024>(half* a, int n);\n"
        "template __global__ void q<float, 512, 1>(float* a, int n);\n"
    )
    ks = parse_kernels(src)
    assert [(k.name, k.defined, k.instantiations) for k in ks] == [
        ("kfunc", True, [(("float", "FILL"), 2)]),
        ("q", True, [(("half", "1024"), 4), (("float", "512", "1"), 5)]),
    ]
    text = scaffold_contracts(ks, "k.cu")
    assert text.count("[[kernel]]") == 3
    assert 'name = "q_f16_1024_0"\nsource = "k.cu"\ncpp_name = "q<half, 1024, 0>"  # the explicit instantiation at k.cu:4' in text
    assert 'name = "q_f32_512_1"\nsource = "k.cu"\ncpp_name = "q<float, 512, 1>"  # the explicit instantiation at k.cu:5' in text
    assert '  { name = "a", dtype = "f16", shape = ["TODO"], role = "out" },' in text
    assert ('# TODO: k.cu:2 explicitly instantiates kfunc<float, FILL>, whose arguments are not values here; '
            "add a contract for each instantiation.") in text  # fmt: skip


def test_a_bool_argument_is_a_flag_not_a_dim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSpeed's layer norm takes ``bool preLayerNorm, bool training``: init made each a dim of 1..65536 and
    passed it as value = "preLayerNorm". A bool is a u8 scalar whose value is left to fill in, never a dim."""
    from audit.cli import main

    (tmp_path / "wireup.toml").write_text("")
    (tmp_path / "k.cu").write_text(
        "__global__ void norm(float* y, const float* x, int rows, bool pre) { int i = threadIdx.x; if (i < rows) y[i] = pre ? x[i] : 0.f; }\n"
        "void launch(float* y, const float* x, int rows, bool pre) { norm<<<(rows + 127) / 128, 128>>>(y, x, rows, pre); }\n"
        "__global__ void flag(float* y, bool on) { if (on) y[threadIdx.x] = 1.f; }\n"
    )
    assert main(["init", "--root", str(tmp_path), str(tmp_path / "k.cu"), "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert "pre = {" not in out and "rows = { min = 1, max = 65536 }" in out
    assert '{ name = "pre", kind = "scalar", dtype = "u8", value = "TODO" },  # TODO: the launch at k.cu:2 passes "pre"' in out
    assert '{ name = "on", kind = "scalar", dtype = "u8", value = 1 },  # TODO: a bool flag (0 or 1); the value passed' in out


def test_each_overload_of_a_kernel_name_gets_its_own_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSpeed defines ``dropout_kernel`` 8 times (float, __half, with and without bias...): init made one
    contract of the first and dropped the others with no word. Each overload now gets its own, named by the
    dtypes that tell it apart, with the function's plain cpp_name (the build picks the overload by the
    contract's dtypes); a prototype before its definition and a template's instantiations stay one."""
    from audit.cli import main
    from audit.scaffold import parse_kernels

    (tmp_path / "wireup.toml").write_text("")
    text = (
        "#include <cuda_fp16.h>\n"
        "__global__ void scale(float* x, int n);\n"
        "__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.0f; }\n"
        "__global__ void scale(__half* x, int n) { int i = threadIdx.x; if (i < n) x[i] = __float2half(2.0f); }\n"
        "__global__ void scale(float* x, const float* b, int n) { int i = threadIdx.x; if (i < n) x[i] += b[i]; }\n"
        "template <typename T> __global__ void t(T* x) { x[0] = T(0); }\n"
        "template __global__ void t<float>(float* x);\n"
    )
    kernels = parse_kernels(text)
    assert [(k.name, k.contract_name, k.line) for k in kernels] == [
        ("scale", None, 3), ("t", None, 6), ("scale", "scale_f16", 4), ("scale", "scale_f32_3_args", 5)
    ]
    (tmp_path / "k.cu").write_text(text)
    assert main(["init", "--root", str(tmp_path), str(tmp_path / "k.cu"), "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert "4 kernel(s): scale, scale_f16, scale_f32_3_args, t." in err  # in line order
    assert out.count('cpp_name = "scale"') == 3 and 'name = "scale_f16"' in out


def test_an_overload_defined_in_another_source_gets_its_own_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The float ``scale`` in one file, the ``__half`` one in another: init made one contract of the first
    and skipped the second as the same kernel ("scaffolded from a.cu; skipped here"). It gets its own now;
    a prototype in a header and the definition in a source stay one."""
    from audit.cli import main

    (tmp_path / "wireup.toml").write_text("")
    (tmp_path / "k.cuh").write_text("__global__ void scale(float* x, int n);\n")
    (tmp_path / "a.cu").write_text('#include "k.cuh"\n__global__ void scale(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0f; }\n')
    (tmp_path / "b.cu").write_text("#include <cuda_fp16.h>\n"
                                   "__global__ void scale(__half* x, int n) { if (threadIdx.x < n) x[threadIdx.x] = __float2half(2.0f); }\n")
    files = [str(tmp_path / f) for f in ("k.cuh", "a.cu", "b.cu")]
    assert main(["init", "--root", str(tmp_path), *files, "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.count("[[kernel]]") == 2 and 'name = "scale"' in out and 'name = "scale_f16"' in out
    assert 'source = "a.cu"' in out and 'source = "b.cu"' in out
    assert 'kernel "scale" at k.cuh:1 is scaffolded from a.cu:2; skipped here.' in err
    assert "b.cu: 1 kernel(s): scale_f16." in err


def test_explicit_specialisations_are_instances_of_their_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSpeed specialises ``transform_0213`` for float and __half (``template <> __global__ void
    transform_0213<__half>(__half* ...) {...}``): init typed one contract f32 with ``cpp_name = "t<TODO>"`` and
    dropped the second with no word. Each specialisation is an instance now, typed by its arguments."""
    from audit.cli import main
    from audit.scaffold import parse_kernels

    text = (
        "#include <cuda_fp16.h>\n"
        "template <typename T> __global__ void t0213(T* out, const T* in, int n);\n"
        "template <> __global__ void t0213<float>(float* out, const float* in, int n) { out[0] = in[0]; }\n"
        "template <> __global__ void t0213<__half>(__half* out, const __half* in, int n) { out[0] = in[0]; }\n"
    )
    (k,) = parse_kernels(text)
    assert (k.name, k.template, k.instantiations) == ("t0213", "< typename T >", [(("float",), 3), (("__half",), 4)])
    (tmp_path / "wireup.toml").write_text("")
    (tmp_path / "k.cu").write_text(text)
    assert main(["init", "--root", str(tmp_path), str(tmp_path / "k.cu"), "-o", "-"]) == 0
    out = capsys.readouterr().out
    assert 'cpp_name = "t0213<float>"' in out and 'cpp_name = "t0213<__half>"' in out and "t0213<TODO>" not in out
    assert out.count('dtype = "f16"') == 2 and out.count('dtype = "f32"') == 2


def test_init_expands_an_expression_macro_and_sizes_a_standard_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vllm's MoE launches size their shared memory with ``CEILDIV(...)`` (a function-like macro of an included
    header) and ``sizeof(int32_t)``: both stayed TODO, the second with a note naming "sizeof" as an unknown
    name (the cast pattern took its parentheses for a cast). A statement macro is not expanded."""
    text = _init_text(tmp_path, capsys, {
        "common.h": "#pragma once\n#define CEILDIV(x, y) (((x) + (y) - 1) / (y))\n#define CHECK(e) do { if (e) {} } while (0)\n",
        "k.cu": (
            '#include "common.h"\n'
            "__global__ void k(int* c, int e, int w) { extern __shared__ int s[]; s[threadIdx.x] = e; c[0] = s[0]; }\n"
            "void launch(int* c, int e, int w) {\n"
            "  size_t warps = CEILDIV(e,\n      w);\n"
            "  k<<<1, 1024, warps * w * sizeof(int32_t) + sizeof(unsigned long long)>>>(c, e, w);\n"
            "  CHECK(e);\n"
            "}\n"
        ),
    }, str(tmp_path / "k.cu"))  # fmt: skip
    assert 'shared_bytes = "ceil_div(e, w) * w * 4 + 8"  # from k.cu:6' in text


def test_init_reads_tiny_cuda_nns_launch_helpers_defaults_and_literals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three launches of tiny-cuda-nn, each scaffolded wrong or TODO before: a grid from a one-return helper
    function (``n_blocks_linear(n)``, through ``div_round_up``, with a default argument); a launching function
    with a default parameter (``n_sums = 1``), which hid its local ``threads = 1024``; a literal argument
    ``1u``, which made every 1 of the geometry the parameter it was passed to."""
    text = _init_text(tmp_path, capsys, {"k.cu": (
        "template <typename T> __host__ __device__ T div_round_up(T val, T divisor) { return (val + divisor - 1) / divisor; }\n"
        "constexpr unsigned N_THREADS_LINEAR = 128;\n"
        "template <typename T> constexpr __host__ __device__ unsigned n_blocks_linear(T n_elements, unsigned n_threads = N_THREADS_LINEAR) {\n"
        "    return (unsigned)div_round_up(n_elements, (T)n_threads);\n}\n"
        "__global__ void sgd(const unsigned n_elements, const float lr, float* w, const float* g) {}\n"
        "__global__ void red(const unsigned n, const float* in, float* out, const unsigned n_blocks) {}\n"
        "__global__ void upd(const unsigned n_elements, const float beta2, const float* g, float* m) {}\n"
        "void step(float* w, const float* g, unsigned n_weights, float lr) {\n"
        "    sgd<<<n_blocks_linear(n_weights), N_THREADS_LINEAR>>>(n_weights, lr, w, g);\n}\n"
        "void reduce_sum(const float* p, float* out, unsigned n, unsigned n_sums = 1) {\n"
        "    const unsigned threads = 1024;\n"
        "    unsigned blocks = (n + threads - 1) / threads;\n"
        "    red<<<blocks, threads>>>(n, p, out, blocks);\n}\n"
        "void novo(const float* g, float* m) { upd<<<(1u + 127) / 128, 128>>>(1u, 0.999f, g, m); }\n"
    )}, str(tmp_path / "k.cu"))  # fmt: skip
    sgd, red, upd = text.split("[[kernel]]")[1:]
    assert 'grid = ["ceil_div(n_elements, 128)", 1, 1]  # from k.cu:10' in sgd and "block = [128, 1, 1]" in sgd
    assert "block = [1024, 1, 1]  # from k.cu:15" in red
    assert "grid = [1, 1, 1]  # from k.cu:17" in upd and "block = [128, 1, 1]" in upd
    assert '{ name = "n_elements", kind = "scalar", dtype = "u32", value = 1 }' in upd
