"""Host launch sites (audit.cuda.launches): read in four styles, turned into contract geometry by
``wireup init``, counted as launches by the launcher scan, and compared with the contracts (GEOMETRY_DRIFT).

The fixture (tests/data/launches) is three kernels launched the same way by host code in CUDA C++
(``<<<...>>>``, in kernels.cu itself), Rust with cudarc, Python with CuPy and the driver API.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from audit.cli import main
from audit.cuda.launches import file_constants, find_launches, language_of, to_dim_expr
from audit.launchers import included_constants

DATA = Path(__file__).parent / "data" / "launches"
HOSTS = ["kernels.cu", "cudarc.rs", "cupy_host.py", "driver.cpp"]


def sites_of(name: str):
    return [s for s in find_launches((DATA / name).read_text(), language_of(name), name) if s.kernel != "unlisted"]


@pytest.mark.parametrize("host", HOSTS)
def test_every_style_gives_the_same_three_launches(host: str) -> None:
    sites = sites_of(host)
    assert [s.kernel for s in sites] == ["scale_rows", "row_softmax", "tile_sum"]
    scale, softmax, tile = sites
    assert scale.block == ("128", "1", "1") and softmax.block == ("256", "1", "1") and tile.block == ("16", "16", "1")
    assert [s.args is not None and len(s.args) for s in sites] == [4, 4, 4]
    # the grids say the same in four languages
    renames = {"N": "rows", "n": "rows", "C": "cols", "c": "cols"}
    assert to_dim_expr(scale.grid[0], renames)[0] == "ceil_div(rows, 128)"
    assert to_dim_expr(softmax.grid[0], renames)[0] == "rows"
    assert [to_dim_expr(g, renames)[0] for g in tile.grid] == ["ceil_div(cols, 16)", "ceil_div(rows, 16)", "1"]
    assert to_dim_expr(softmax.shared, renames)[0] == "cols * 4"


def test_cuda_chevrons_resolve_local_constants_and_dim3() -> None:
    sites = find_launches((DATA / "kernels.cu").read_text(), "c", "kernels.cu")
    by = {s.kernel: s for s in sites}
    assert by["scale_rows"].grid == ("CEIL_DIV(N, 128)", "1", "1")  # block_size substituted, N kept (an argument)
    assert by["tile_sum"].grid == ("(C + 15) / 16", "(N + 15) / 16", "1")  # from dim3 grid(...)
    assert by["row_softmax"].shared == "(C * sizeof(float))"
    assert by["unlisted"].line == 34


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("CEIL_DIV(n, 256)", "ceil_div(N, 256)"),
        ("(n + 255) / 256", "ceil_div(N, 256)"),
        ("(n + 256 - 1) / 256", "ceil_div(N, 256)"),
        ("(n as u32 + 63) / 64", "ceil_div(N, 64)"),
        ("std::min((n + 63) / 64, 256)", "min(ceil_div(N, 64), 256)"),
        ("static_cast<int>(n) * 2", "N * 2"),
        ("32 * sizeof(float)", "32 * 4"),
        ("n / 4 % 8", "(N // 4) % 8"),
    ],
)
def test_host_expressions_translate_to_dim_expressions(host: str, expected: str) -> None:
    assert to_dim_expr(host, {"n": "N"}) == (expected, "")


@pytest.mark.parametrize(
    ("host", "why"),
    [("n >> 2", "an operator dim expressions do not have"), ("foo(n)", "calls foo()"), ("n.len()", "calls n.len()"), ("x[0]", "form dim expressions")],
)
def test_untranslatable_host_expressions_say_why(host: str, why: str) -> None:
    text, reason = to_dim_expr(host, {})
    assert text is None and why in reason


def _init(tmp_path: Path, capsys, *argv: str) -> str:
    for f in DATA.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "wireup.toml").write_text("")
    assert main(["init", "--root", str(tmp_path), *argv]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("host", HOSTS)
def test_init_takes_grid_block_and_shared_memory_from_the_launch(host: str, tmp_path: Path, capsys) -> None:
    src = "kernels.cu" if host == "kernels.cu" else "kernels_only.cu"
    argv = [str(tmp_path / src)] + ([] if host == "kernels.cu" else ["--host", str(tmp_path / host)])
    text = _init(tmp_path, capsys, *argv)
    tables = {t.split('name = "', 1)[1].split('"', 1)[0]: t for t in text.split("[[kernel]]")[1:]}
    geometry = {name: [line.split("  #")[0] for line in t.splitlines() if line.startswith(("grid", "block", "shared_bytes"))] for name, t in tables.items()}
    assert geometry["scale_rows"] == ['grid = ["ceil_div(n, 128)", 1, 1]', "block = [128, 1, 1]"]
    assert geometry["row_softmax"] == ['grid = ["rows", 1, 1]', "block = [256, 1, 1]", 'shared_bytes = "cols * 4"']
    assert geometry["tile_sum"] == ['grid = ["ceil_div(k, 16)", "ceil_div(m, 16)", 1]', "block = [16, 16, 1]"]
    for name in ("scale_rows", "row_softmax", "tile_sum"):
        assert not any("TODO" in line for line in geometry[name]), name
    assert '{ name = "n", kind = "scalar", dtype = "i32", value = "n" }' in tables["scale_rows"]
    # the integer arguments the geometry uses become dims whose ranges are left to review
    assert "[dims]\nn = { min = 1, max = 65536 }  # TODO: the range of n" in text


def test_init_quotes_what_it_cannot_translate(tmp_path: Path, capsys) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k(float* y, int n) {}\nvoid h(float* d, int n, int bs) { k<<<n >> 2, bs>>>(d, n); }\n")
    (tmp_path / "wireup.toml").write_text("")
    assert main(["init", "--root", str(tmp_path), str(cu)]) == 0
    out = capsys.readouterr().out
    assert 'grid = ["TODO", 1, 1]  # "n >> 2": it uses an operator dim expressions do not have (the launch at k.cu:2)' in out
    assert 'block = ["TODO", 1, 1]  # "bs" at k.cu:2 uses "bs", which no integer kernel argument or declared dim names' in out


def test_init_without_a_configuration_refuses_to_guess_the_root(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()
    cu = tmp_path / "sub" / "k.cu"
    cu.write_text("__global__ void k(float* y) {}\n")
    monkeypatch.chdir(tmp_path / "sub")
    assert main(["init", str(cu)]) == 2
    err = capsys.readouterr().err
    assert f'wireup init would take "{tmp_path}"' in err and "pass --root DIR, or create DIR/wireup.toml first" in err


def _project(tmp_path: Path, contracts: str) -> Path:
    shutil.copy(DATA / "kernels.cu", tmp_path / "kernels.cu")
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text(contracts)
    (tmp_path / "wireup.toml").write_text("")
    return tmp_path


def test_launches_in_the_kernels_own_file_are_launches_and_uncovered_ones_unaudited(tmp_path: Path, capsys) -> None:
    """No false dead code for a .cu whose host functions launch its kernels; the launched kernel no contract
    covers is unaudited; no launcher globs are needed."""
    _init(tmp_path, capsys, str(tmp_path / "kernels.cu"), "-o", str(tmp_path / "scaffold.toml"))
    text = (tmp_path / "scaffold.toml").read_text().replace('shape = ["TODO"]', 'shape = ["rows"]')
    text = text.split("# Scaffolded by `wireup init` from kernels.cu:23")[0]  # drop "unlisted"
    (tmp_path / "p").mkdir()
    root = _project(tmp_path / "p", text)
    assert main(["check", "--root", str(root), "--select", "launchers"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:-1] == [
        'kernels.cu:34: UNAUDITED_KERNEL Host code launches kernel "unlisted" with <<<...>>>, but no contract declares a kernel '
        "with that name; add a [[kernel]] contract for it (wireup init scaffolds one) or remove the launch."
    ]


def test_arguments_that_are_expressions_or_fields_map_to_their_parameters() -> None:
    # softmax<<<CEIL_DIV(B * NH * T * 32, bs), bs>>>(.., B * NH, T): the rows argument is an expression
    assert to_dim_expr("CEIL_DIV(B * NH * T * 32, 256)", {"B * NH": "N", "T": "T"}) == ("ceil_div((N * T) * 32, 256)", "")
    # adamw<<<CEIL_DIV(model->num_parameters, 512), 512>>>(.., model->num_parameters, ..)
    assert to_dim_expr("CEIL_DIV(model->num_parameters, 512)", {"model->num_parameters": "P"}) == ("ceil_div(P, 512)", "")
    # only whole subexpressions are replaced: B * NH + 1 has no subexpression NH + 1
    assert to_dim_expr("B * NH + 1", {"NH + 1": "X"}) == ("(B * NH) + 1", "")


def test_local_constants_of_other_functions_are_not_seen() -> None:
    text = "void a() { int bs = 64; }\nvoid b(float* x, int n) { k<<<n, bs>>>(x, n); }\n"
    (site,) = find_launches(text, "c")
    assert site.block == ("bs", "1", "1")


def test_file_scope_constants_are_seen_and_variables_are_not() -> None:
    text = "const int BS = 128;\nint bs2 = 64;\nvoid h(float* x, int n) {\n  k<<<n, BS>>>(x, n);\n  k<<<n, bs2>>>(x, n);\n}\n"
    assert [s.block for s in find_launches(text, "c")] == [("128", "1", "1"), ("bs2", "1", "1")]
    # a header's constants (the launcher scan reads them) are seen, and lose to the file's own
    (site,) = find_launches("void h(float* x, int n) { k<<<NT, TILE>>>(x, n); }", "c", included={"NT": "256", "TILE": "8"})
    assert (site.grid[0], site.block[0]) == ("256", "8")
    (site,) = find_launches("const int NT = 64;\nvoid h(float* x, int n) { k<<<NT, 1>>>(x, n); }", "c", included={"NT": "256"})
    assert site.grid[0] == "64"
    assert file_constants("namespace a { constexpr unsigned BM = 64u; struct S { static const int Q = 3; }; }") == {"BM": "64u"}
    assert file_constants('#define MAX(a, b) \\\n  ((a) > (b) ? (a) : (b))\n#include "x.h"\nconst int N = 256;\n') == {"N": "256"}


def test_template_arguments_are_read_with_local_constants_substituted() -> None:
    text = "void h(float* x, int n) {\n  const int BM = 128;\n  gemm<BM, Tile<8, 2>><<<n, BM>>>(x, n);\n  plain<<<n, 1>>>(x, n);\n}\n"
    assert [s.template_args for s in find_launches(text, "c")] == [("128", "Tile<8, 2>"), None]


# GEOMETRY_DRIFT on small projects: a kernel source, a host file and the contracts

_DRIFT_KERNEL = """[[kernel]]
name = "{name}"
source = "k.cu"
cpp_name = "{cpp}"
stage = "forward"
grid = [{grid}]
block = [{block}]
params = [
  {{ name = "y", dtype = "f32", shape = ["n"], role = "out" }},
  {{ name = "n", kind = "scalar", dtype = "i32", value = "n" }},
]
[[schedule]]
name = "s_{name}"
[[schedule.step]]
launch = "{name}"
bind = {{ y = "y_{name}" }}
[[buffer]]
name = "y_{name}"
dtype = "f32"
shape = ["n"]
"""


def _drift(tmp_path: Path, capsys, files: dict[str, str], *kernels: dict[str, str]) -> list[str]:
    """The GEOMETRY_DRIFT findings of a project with ``files`` and one contract per ``kernels`` entry."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "contracts").mkdir()
    tables = "".join(_DRIFT_KERNEL.format(**k) for k in kernels)
    (tmp_path / "contracts" / "k.toml").write_text('[dims]\nn = { min = 1, max = 4096 }\n' + tables)
    (tmp_path / "wireup.toml").write_text('launchers = ["host.cu"]\n')
    main(["check", "--root", str(tmp_path), "--select", "GEOMETRY_DRIFT"])
    return capsys.readouterr().out.splitlines()[:-1]


def test_drift_leaves_a_host_variable_that_no_argument_or_dim_names_uncompared(tmp_path: Path, capsys) -> None:
    """``rows`` is a parameter of the host function only: no value of it follows from the contract, so
    grid.x is not compared (a probe value for it would be made up); block.x is, and drifts."""
    host = '#include "k.cu"\nvoid run(float* y, int rows, int n) {\n  const int R = rows;\n  dim3 grid(R);\n  fill<<<grid, 128>>>(y, n);\n}\n'
    kernel = "__global__ void fill(float* y, int n) { y[blockIdx.x * n + threadIdx.x] = 0.f; }\n"
    found = _drift(tmp_path, capsys, {"host.cu": host, "k.cu": kernel}, {"name": "fill", "cpp": "fill", "grid": '"n"', "block": "256"})
    assert found == [
        'host.cu:5: GEOMETRY_DRIFT Kernel "fill" is launched here with block.x = "128" but its contract declares "256": '
        "the launch gives 128 and the contract 256; update the contract or the launch."
    ]


def test_drift_resolves_file_scope_constants_of_included_headers(tmp_path: Path, capsys) -> None:
    """host.cu includes k.cu, which includes k.cuh: its ``constexpr int NT = 256`` is the launch's block."""
    files = {
        "k.cuh": "#pragma once\nconstexpr int NT = 256;  // threads per block\n",
        "k.cu": '#include "k.cuh"\n__global__ void __launch_bounds__(NT) fill(float* y, int n) { y[blockIdx.x * NT + threadIdx.x] = 0.f; }\n',
        "host.cu": '#include "k.cu"\nvoid run(float* y, int n) {\n  dim3 block(NT);\n  fill<<<(n + NT - 1) / NT, block>>>(y, n);\n}\n',
    }
    found = _drift(tmp_path, capsys, files, {"name": "fill", "cpp": "fill", "grid": '"ceil_div(n, 256)"', "block": "128"})
    assert found == [
        'host.cu:4: GEOMETRY_DRIFT Kernel "fill" is launched here with block.x = "256" but its contract declares "128": '
        "the launch gives 256 and the contract 128; update the contract or the launch."
    ]


def test_drift_compares_a_template_launch_with_the_contract_of_its_instantiation(tmp_path: Path, capsys) -> None:
    """tile<128> and tile<64> have one contract each; tile<2 * 32> is tile<64> (and drifts in its block);
    tile<16> has no contract, and tile<T> no known instantiation: neither is compared."""
    kernel = "template <int TILE>\n__global__ void tile(float* y, int n) { y[blockIdx.x * TILE + threadIdx.x] = 0.f; }\n"
    host = (
        '#include "k.cu"\n'
        "void run(float* y, int n) {\n"
        "  if (n >= 4096) {\n    const int BM = 128;\n    tile<BM><<<(n + BM - 1) / BM, BM>>>(y, n);\n"
        "  } else {\n    const int BM = 64;\n    tile<BM><<<(n + BM - 1) / BM, BM>>>(y, n);\n  }\n"
        "  tile<2 * 32><<<(n + 63) / 64, 32>>>(y, n);\n"
        "  tile<16><<<(n + 15) / 16, 16>>>(y, n);\n"
        "}\n"
        "template <int T> void any(float* y, int n) { tile<T><<<n, T>>>(y, n); }\n"
    )
    found = _drift(
        tmp_path, capsys, {"host.cu": host, "k.cu": kernel},
        {"name": "tile_128", "cpp": "tile<128>", "grid": '"ceil_div(n, 128)"', "block": "128"},
        {"name": "tile_64", "cpp": "tile< 64 >", "grid": '"ceil_div(n, 64)"', "block": "64"},
    )  # fmt: skip
    assert found == [
        'host.cu:10: GEOMETRY_DRIFT Kernel "tile_64" is launched here with block.x = "32" but its contract declares "64": '
        "the launch gives 32 and the contract 64; update the contract or the launch."
    ]


def test_drift_leaves_a_conditionally_reassigned_host_value_uncompared(tmp_path: Path, capsys) -> None:
    """``if (bs <= 64) bs = 128;`` (llm.c's global_norm4, layernorm_backward10): at the launch ``bs`` is 128
    only when it was at most 64, so the block is not one value the reader can compare (it reported "the
    launch gives 128"); an unconditional value before the launch still is, and drifts."""
    kernel = "__global__ void fill(float* y, int n) { y[blockIdx.x * blockDim.x + threadIdx.x] = 0.f; }\n"
    host = (
        '#include "k.cu"\n'
        "void braces(float* y, int n, int bs) {\n  if (bs <= 64) {\n    bs = 128;\n  }\n  fill<<<n, bs>>>(y, n);\n}\n"
        "void bare(float* y, int n, int bs) {\n  if (bs == 1024) bs = 512;\n  fill<<<n, bs>>>(y, n);\n}\n"
        "void loop(float* y, int n) {\n  for (int bs = 32; bs <= 1024; bs *= 2) {}\n  fill<<<n, bs>>>(y, n);\n}\n"
        "void plain(float* y, int n) {\n  int bs = 64;\n  bs = 2 * bs;\n  fill<<<n, bs>>>(y, n);\n}\n"
    )
    found = _drift(tmp_path, capsys, {"host.cu": host, "k.cu": kernel}, {"name": "fill", "cpp": "fill", "grid": '"n"', "block": "256"})
    assert found == [
        'host.cu:19: GEOMETRY_DRIFT Kernel "fill" is launched here with block.x = "(2 * (64))" but its contract declares "256": '
        "the launch gives 128 and the contract 256; update the contract or the launch."
    ]


def test_drift_reads_dim3_variables_initialised_with_braces_or_assignment(tmp_path: Path, capsys) -> None:
    """``dim3 block_dim = {4, 8, 16};`` (llm.c's matmul_backward_bias8) is a dim3 like ``dim3 block_dim(4, 8,
    16)``: it was read as one component, and block.y and block.z as 1 (two false drifts per launch); a
    component of one (``block_dim.y``) is that component."""
    kernel = "__global__ void fill(float* y, int n) { y[blockIdx.x * blockDim.x + threadIdx.x] = 0.f; }\n"
    host = (
        '#include "k.cu"\n'
        "void run(float* y, int n) {\n  dim3 block_dim = {4, 8, 16};\n  fill<<<n, block_dim>>>(y, n);\n}\n"
        "void other(float* y, int n) {\n  dim3 block_dim = dim3(4, 8);\n  const int w = block_dim.y * 2;\n"
        "  fill<<<n, dim3(4, w, 16)>>>(y, n);\n}\n"
    )
    found = _drift(tmp_path, capsys, {"host.cu": host, "k.cu": kernel}, {"name": "fill", "cpp": "fill", "grid": '"n"', "block": "4, 8, 8"})
    assert found == [
        'host.cu:4: GEOMETRY_DRIFT Kernel "fill" is launched here with block.z = "16" but its contract declares "8": '
        "the launch gives 16 and the contract 8; update the contract or the launch.",
        'host.cu:9: GEOMETRY_DRIFT Kernel "fill" is launched here with block.y = "(8 * 2)" but its contract declares "8": '
        "the launch gives 16 and the contract 8; update the contract or the launch.",
        'host.cu:9: GEOMETRY_DRIFT Kernel "fill" is launched here with block.z = "16" but its contract declares "8": '
        "the launch gives 16 and the contract 8; update the contract or the launch.",
    ]


def test_init_substitutes_a_self_referencing_assignment_once(tmp_path: Path, capsys) -> None:
    """``bs = largest_pow2(bs);`` on a parameter: the inner ``bs`` is the parameter, substituted no further
    (the note quoted largest_pow2 nested eight deep)."""
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k(float* y, int n) {}\nvoid h(float* d, int n, int bs) {\n  bs = largest_pow2(bs);\n  k<<<n, bs>>>(d, n);\n}\n")
    (tmp_path / "wireup.toml").write_text("")
    assert main(["init", "--root", str(tmp_path), str(cu)]) == 0
    out = capsys.readouterr().out
    assert 'block = ["TODO", 1, 1]  # "(largest_pow2(bs))": it calls largest_pow2(), which dim expressions do not have (the launch at k.cu:4)' in out


def test_included_constants_follow_only_regular_headers_inside_the_root(tmp_path: Path) -> None:
    """A header outside the root, a FIFO (never opened to block), a missing one and an include cycle give
    nothing and stop; the nested local header's constants are seen, and a later include wins."""
    root = tmp_path / "p"
    (root / "inc").mkdir(parents=True)
    (tmp_path / "outside.cuh").write_text("const int SECRET = 1;\n")
    os.mkfifo(root / "pipe.cuh")
    (root / "inc" / "a.cuh").write_text('#include "a.cuh"\n#include "b.cuh"\nconst int A = 2;\nconst int B = 3;\n')
    (root / "inc" / "b.cuh").write_text('#include "a.cuh"\n#define B 4\n#define C 5\n')
    text = '#include "../outside.cuh"\n#include "pipe.cuh"\n#include "missing.cuh"\n#include "inc/a.cuh"\n'
    assert included_constants(text, root / "host.cu", root) == {"B": "3", "C": "5", "A": "2"}
