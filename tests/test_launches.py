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


def test_drift_names_a_size_the_contract_admits(tmp_path: Path, capsys) -> None:
    """A contract that assumes ``n % 256 == 0`` is compared at sizes it admits: the witness was n = 16777473
    in How_to_optimize_in_GPU's trial (its host launches a fixed grid)."""
    host = '#include "k.cu"\nvoid run(float* y, int n) {\n  fill<<<(32 * 1024 * 1024) / 256, 256>>>(y, n);\n}\n'
    kernel = "__global__ void fill(float* y, int n) { y[blockIdx.x * 256 + threadIdx.x] = 0.f; }\n"
    (tmp_path / "host.cu").write_text(host)
    (tmp_path / "k.cu").write_text(kernel)
    (tmp_path / "contracts").mkdir()
    table = _DRIFT_KERNEL.format(name="fill", cpp="fill", grid='"n // 256"', block="256")
    (tmp_path / "contracts" / "k.toml").write_text('[dims]\nn = { min = 1, max = 4096 }\n' + table.replace("block = [256]", 'block = [256]\nrequires = ["n % 256 == 0"]'))
    (tmp_path / "wireup.toml").write_text('launchers = ["host.cu"]\n')
    main(["check", "--root", str(tmp_path), "--select", "GEOMETRY_DRIFT"])
    found = capsys.readouterr().out.splitlines()[:-1]
    assert len(found) == 1 and "at n = " in found[0]
    n = int(found[0].split("at n = ")[1].split(":")[0])
    assert n % 256 == 0, found


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


def _wiring(tmp_path: Path, capsys, host: str) -> list[str]:
    """NO_LAUNCHER and UNAUDITED_KERNEL of ``host`` launching tile<128> and tile<64>, one contract each."""
    kernel = "template <int TILE>\n__global__ void tile(float* y, int n) { y[blockIdx.x * TILE + threadIdx.x] = 0.f; }\n"
    for name, text in {"host.cu": host, "k.cu": kernel}.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "contracts").mkdir()
    tables = "".join(
        _DRIFT_KERNEL.format(**k)
        for k in ({"name": "tile_128", "cpp": "tile<128>", "grid": '"ceil_div(n, 128)"', "block": "128"},
                  {"name": "tile_64", "cpp": "tile< 64 >", "grid": '"ceil_div(n, 64)"', "block": "64"})
    )  # fmt: skip
    (tmp_path / "contracts" / "k.toml").write_text('[dims]\nn = { min = 1, max = 4096 }\n' + tables)
    (tmp_path / "wireup.toml").write_text('launchers = ["host.cu"]\n')
    main(["check", "--root", str(tmp_path), "--select", "NO_LAUNCHER,UNAUDITED_KERNEL"])
    return [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()[:-1]]


def test_a_template_launch_wires_only_the_instantiation_it_names(tmp_path: Path, capsys) -> None:
    """tile<BM> with BM = 128 launches tile_128 only: tile_64 is dead code although host code launches
    tile; tile<16> is an instantiation no contract names, tile<2 * 8> the same one spelled otherwise."""
    host = (
        '#include "k.cu"\n'
        "void run(float* y, int n) {\n"
        "  const int BM = 128;\n  tile<BM><<<(n + BM - 1) / BM, BM>>>(y, n);\n"
        "  tile<16><<<(n + 15) / 16, 16>>>(y, n);\n"
        "  tile<2 * 8><<<(n + 15) / 16, 16>>>(y, n);\n"
        "}\n"
    )
    assert _wiring(tmp_path, capsys, host) == [
        'NO_LAUNCHER (warning) Kernel "tile_64" is dead code — no launcher: no host source (host.cu) names its entry "tile< 64 >"; its source is only compiled (host.cu:1).',
        'UNAUDITED_KERNEL Host code launches kernel "tile<16>" with <<<...>>>, but no contract\'s cpp_name names that '
        'instantiation; add a [[kernel]] contract with cpp_name = "tile<16>" or remove the launch.',
        'UNAUDITED_KERNEL Host code launches kernel "tile<16>" with <<<...>>>, but no contract\'s cpp_name names that '
        'instantiation; add a [[kernel]] contract with cpp_name = "tile<16>" or remove the launch.',  # tile<2 * 8>, by its value
    ]


def test_a_template_launch_with_an_unknown_argument_may_run_any_instantiation(tmp_path: Path, capsys) -> None:
    """tile<T> inside a template: which instantiation runs depends on its callers; both contracts count
    as launched and nothing is called unaudited (the scan does not follow template callers)."""
    host = '#include "k.cu"\ntemplate <int T> void any(float* y, int n) { tile<T><<<n, T>>>(y, n); }\n'
    assert _wiring(tmp_path, capsys, host) == []


def test_a_template_s_defaults_complete_launches_and_cpp_names(tmp_path: Path, capsys) -> None:
    """``template <int TILE, int OFFSET = 0>``: the compiled entry is ``tile<128, 0>``, so a contract spells the
    default, and the host's ``tile<128>`` runs it (it was UNAUDITED_KERNEL, and the contract NO_LAUNCHER);
    ``tile<64, 4>`` is another instantiation, and ``tile<64>`` (= ``tile<64, 0>``, the name the message gives) one
    no contract names."""
    kernel = "template <int TILE, int OFFSET = 0>\n__global__ void tile(float* y, int n) { y[blockIdx.x * TILE + threadIdx.x + OFFSET] = 0.f; }\n"
    host = (
        '#include "k.cu"\n'
        "void run(float* y, int n) {\n"
        "  tile<128><<<(n + 127) / 128, 64>>>(y, n);\n"
        "  tile<64, 4><<<(n + 63) / 64, 64>>>(y, n);\n"
        "  tile<64><<<(n + 63) / 64, 64>>>(y, n);\n"
        "}\n"
    )
    for name, text in {"host.cu": host, "k.cu": kernel}.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "contracts").mkdir()
    tables = "".join(
        _DRIFT_KERNEL.format(**k)
        for k in ({"name": "tile_128", "cpp": "tile<128, 0>", "grid": '"ceil_div(n, 128)"', "block": "128"},
                  {"name": "tile_64_4", "cpp": "tile<64, 4>", "grid": '"ceil_div(n, 64)"', "block": "64"})
    )  # fmt: skip
    (tmp_path / "contracts" / "k.toml").write_text("[dims]\nn = { min = 1, max = 4096 }\n" + tables)
    (tmp_path / "wireup.toml").write_text('launchers = ["host.cu"]\n')
    main(["check", "--root", str(tmp_path), "--select", "NO_LAUNCHER,UNAUDITED_KERNEL,GEOMETRY_DRIFT"])
    found = [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()[:-1]]
    assert found == [
        'GEOMETRY_DRIFT Kernel "tile_128" is launched here with block.x = "64" but its contract declares "128": '
        "the launch gives 64 and the contract 128; update the contract or the launch.",
        'UNAUDITED_KERNEL Host code launches kernel "tile<64, 0>" with <<<...>>>, but no contract\'s cpp_name names that '
        'instantiation; add a [[kernel]] contract with cpp_name = "tile<64, 0>" or remove the launch.',
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


def test_a_counter_bumped_before_the_launch_or_reset_in_its_loop_is_no_one_value(tmp_path: Path, capsys) -> None:
    """apex's multi_tensor_apply: ``int loc_block_info = 0;``, then per chunk ``loc_block_info++`` and,
    once a batch is full, ``<<<loc_block_info, block_size>>>`` followed by ``loc_block_info = 0;`` in the
    same loop. init wrote ``grid = [0, 1, 1]`` from the declaration; a name bumped (``++``, ``+=``) before
    the launch or assigned anywhere in a loop around it has no one value there."""
    cu = tmp_path / "k.cu"
    cu.write_text(
        "__global__ void k(float* y, int n) {}\n"
        "void h(float* d, int n, int chunks) {\n  int blocks = 0;\n  int total = 8;\n  total += n;\n  int bs = 128;\n"
        "  for (int c = 0; c < chunks; c++) {\n    blocks++;\n    if (blocks == 320 || c == chunks - 1) {\n"
        "      k<<<blocks, bs>>>(d, n);\n      k<<<total, bs>>>(d, n);\n      blocks = 0;\n    }\n  }\n}\n"
    )
    (tmp_path / "wireup.toml").write_text("")
    assert main(["init", "--root", str(tmp_path), str(cu)]) == 0
    out = capsys.readouterr().out
    assert 'grid = ["TODO", 1, 1]  # "blocks" at k.cu:10 uses "blocks", which no integer kernel argument or declared dim names' in out
    assert "block = [128, 1, 1]  # from k.cu:10" in out
    # before: grid = [0, 1, 1], and the second launch's "total" (8, then total += n) noted as grid = [8, 1, 1]
    assert "grid = [0, 1, 1]" not in out and "grid = [8, 1, 1]" not in out


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


# Rust launches through the code base's own wrappers of cudarc (the shape of huggingface/candle's backend:
# a getter wrapping load_function, a builder() method wrapping launch_builder, an argument macro, and
# kernel names built at run time by a function returning format!(...))

_RUST_WRAPPERS = """\
impl Func {
    pub fn builder(&self) -> LaunchArgs<'_> {
        self.stream.launch_builder(&self.func)
    }
}
impl Dev {
    pub fn load(&self, fn_name: &str, module: &Module) -> Result<Func> {
        let func = self.module(module).load_function(fn_name)?;
        Ok(Func { func, stream: self.stream.clone() })
    }
}
#[macro_export]
macro_rules! push_args {
    ($b:ident, $($arg:expr),*) => { $( let __arg = $arg; $b.arg(&__arg); )* };
}
pub fn kname<T: WithDType>(root: &str) -> String {
    let dtype = T::DTYPE.as_str();
    format!("{root}_{dtype}")
}
"""

_RUST_OPS = """\
use crate::{push_args as pa};
fn scale<T>(dev: &Dev, y: &CudaSlice<T>, n: usize, strides: &Strides) -> Result<()> {
    let cfg = LaunchConfig::for_num_elems(n as u32);
    let func =
        dev.load(&kname::<T>("scale"), &MODULE)?;
    let mut b = func.builder();
    pa!(b, n);
    strides.push_arg(&mut b);
    b.arg(y);
    unsafe { b.launch(cfg) }?;
    Ok(())
}
fn copy(dev: &Dev, y: &CudaSlice<f32>, n: usize, half: bool) -> Result<()> {
    let name = match half {
        true => "copy_f16",
        false => "copy_f32",
    };
    let func = dev.load(name, &MODULE)?;
    let cfg = LaunchConfig { grid_dim: (n as u32, 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
    let mut b = func.builder();
    b.arg(y).arg(&n);
    unsafe { b.launch(cfg) }?;
    Ok(())
}
fn op<T, U: Op>(dev: &Dev, y: &CudaSlice<T>, n: usize) -> Result<()> {
    let func = dev.load(&kname::<T>(U::KERNEL), &MODULE)?;
    let cfg = LaunchConfig::for_num_elems(n as u32);
    let mut b = func.builder();
    b.arg(y);
    unsafe { b.launch(cfg) }?;
    Ok(())
}
"""


def test_rust_launches_through_wrappers_with_names_built_at_run_time() -> None:
    """The getter, builder method and argument macro are read from the wrappers' file and seen in the
    other: kname::<T>("scale") is the pattern scale_*, a match of literals gives each name, the argument
    pushed by a helper is one unknown argument, and U::KERNEL is said to be unresolved."""
    from audit.cuda.launches import rust_helpers

    helpers = rust_helpers([_RUST_WRAPPERS, _RUST_OPS])
    assert helpers.getters == {"load": 0} and helpers.builders == {"builder"} and helpers.arg_macros == {"push_args"}
    sites = find_launches(_RUST_OPS, "rust", "ops.rs", None, helpers)
    got = [(s.line, s.kernel, s.name_kind, s.args, s.grid, s.block) for s in sites]
    assert got == [
        (6, "scale_*", "pattern", ("n", "?", "y"), ("(n as u32 + 1023) / 1024", "1", "1"), ("1024", "1", "1")),
        (20, "copy_f16", "exact", ("y", "n"), ("n as u32", "1", "1"), ("64", "1", "1")),
        (20, "copy_f32", "exact", ("y", "n"), ("n as u32", "1", "1"), ("64", "1", "1")),
        (28, "&kname::<T>(U::KERNEL)", "unresolved", ("y",), ("(n as u32 + 1023) / 1024", "1", "1"), ("1024", "1", "1")),
    ]
    assert sites[0].names_kernel("scale_f32") and not sites[0].names_kernel("rescale_f32")
    assert 'pushes an argument the reader does not see' in sites[0].notes[0]
    assert "not one the reader resolves" in sites[-1].notes[0]
    # without the wrappers' file nothing of this is a launch
    assert find_launches(_RUST_OPS, "rust", "ops.rs") == []


def test_rust_launch_uses_the_function_it_fetched_in_its_own_function() -> None:
    """Two functions bind ``f`` to different kernels: each launch is the kernel its own function fetched."""
    host = (
        'fn a(m: &M) { let f = m.load_function("first")?; unsafe { f.launch(LaunchConfig::for_num_elems(8), (x, 8)) }?; }\n'
        'fn b(m: &M) { let f = m.load_function("second")?; unsafe { f.launch(LaunchConfig::for_num_elems(4), (x, 4)) }?; }\n'
    )
    assert [(s.line, s.kernel) for s in find_launches(host, "rust", "h.rs")] == [(1, "first"), (2, "second")]


def _rust_project(tmp_path: Path, kernel: str, contract: str) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "device.rs").write_text(_RUST_WRAPPERS)
    (tmp_path / "src" / "ops.rs").write_text(_RUST_OPS)
    (tmp_path / "k.cu").write_text(kernel)
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text(contract)
    (tmp_path / "wireup.toml").write_text('launchers = ["src/*.rs"]\n')
    return tmp_path


_SCALE_F32 = """[dims]
n = { min = 1, max = 4096 }
[[kernel]]
name = "scale_f32"
source = "k.cu"
stage = "forward"
grid = ["ceil_div(n, 256)"]
block = [256]
params = [
  { name = "numel", kind = "scalar", dtype = "u64", value = "n" },
  { name = "info", dtype = "u64", shape = [2], role = "in", optional = true },
  { name = "y", dtype = "f32", shape = ["n"], role = "out" },
]
"""


def test_drift_and_launchers_see_a_rust_launch_through_wrappers(tmp_path: Path, capsys) -> None:
    """scale_f32 is launched by kname::<T>("scale") with 1024-thread blocks (for_num_elems); its contract
    says 256: the drift is found, the kernel counts as launched, and copy_f16 / copy_f32 (fetched by a
    name a match chooses) are unaudited."""
    kernel = 'extern "C" __global__ void scale_f32(size_t numel, const size_t* info, float* y) { size_t i = blockIdx.x * blockDim.x + threadIdx.x; if (i < numel) y[i] = 2.f * y[i]; }\n'
    root = _rust_project(tmp_path, kernel, _SCALE_F32)
    main(["check", "--root", str(root), "--select", "launchers"])
    out = capsys.readouterr().out.splitlines()[:-1]
    assert out == [
        'src/ops.rs:6: GEOMETRY_DRIFT Kernel "scale_f32" is launched here with block.x = "1024" but its contract declares "256": '
        "the launch gives 1024 and the contract 256; update the contract or the launch.",
        'src/ops.rs:6: GEOMETRY_DRIFT Kernel "scale_f32" is launched here with grid.x = "(n as u32 + 1023) / 1024" but its '
        'contract declares "ceil_div(n, 256)" at n = 4096: the launch gives 4 and the contract 16; update the contract or the launch.',
        'src/ops.rs:20: UNAUDITED_KERNEL Host code fetches kernel "copy_f16", but no contract declares a kernel with that entry; '
        "add a [[kernel]] contract for it (wireup init scaffolds one) or remove the reference.",
        'src/ops.rs:20: UNAUDITED_KERNEL Host code fetches kernel "copy_f32", but no contract declares a kernel with that entry; '
        "add a [[kernel]] contract for it (wireup init scaffolds one) or remove the reference.",
    ]


def test_no_launcher_names_the_launches_whose_kernel_name_is_not_resolved(tmp_path: Path) -> None:
    """A contracted kernel no launch names, in a code base with a launch of kname::<T>(U::KERNEL): the
    finding says that launch may run it instead of calling it dead without a word."""
    from audit.api import check

    kernel = 'extern "C" __global__ void neg_f32(float* y) { y[threadIdx.x] = -y[threadIdx.x]; }\n'
    contract = '[[kernel]]\nname = "neg_f32"\nsource = "k.cu"\nstage = "forward"\ngrid = [1]\nblock = [32]\nparams = [{ name = "y", dtype = "f32", shape = [32], role = "out" }]\n'
    result = check(_rust_project(tmp_path, kernel, contract), select=["NO_LAUNCHER"])
    assert [f.message for f in result.findings] == [
        'Kernel "neg_f32" is dead code — no launcher: no host source (src/*.rs) names its entry "neg_f32"; unless one of '
        "the launches whose kernel name the scan cannot resolve runs it: src/ops.rs:28 (&kname::<T>(U::KERNEL))."
    ]


def test_launch_arg_order_reads_rust_arguments_through_casts_and_the_argument_macro(tmp_path: Path) -> None:
    """builder_arg!-style arguments ``block as i32, cols as i32`` in the place of (cols, block): swapped;
    the same launch with the contract's order is clean."""
    from audit.api import check

    kernel = 'extern "C" __global__ void norm_f32(float* y, const int cols, const int block) { y[threadIdx.x] = cols + block; }\n'
    contract = ('[[kernel]]\nname = "norm_f32"\nsource = "k.cu"\nstage = "forward"\ngrid = [1]\nblock = [32]\nparams = [\n'
                '  { name = "y", dtype = "f32", shape = [32], role = "out" },\n'
                '  { name = "cols", kind = "scalar", dtype = "i32", value = 32 },\n'
                '  { name = "block", kind = "scalar", dtype = "i32", value = 32 },\n]\n')  # fmt: skip
    root = _rust_project(tmp_path, kernel, contract)
    launch = ("fn norm(dev: &Dev, y: &CudaSlice<f32>, cols: usize, block: usize) -> Result<()> {\n"
              '    let func = dev.load("norm_f32", &MODULE)?;\n'
              "    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };\n"
              "    let mut b = func.builder();\n    b.arg(y);\n    pa!(b, block as i32, cols as i32);\n"
              "    unsafe { b.launch(cfg) }?;\n    Ok(())\n}\n")  # fmt: skip
    (root / "src" / "ops.rs").write_text("use crate::{push_args as pa};\n" + launch)
    result = check(root, select=["LAUNCH_ARG_ORDER"])
    assert [(f.file, f.line, f.message) for f in result.findings] == [
        ("src/ops.rs", 5, 'Kernel "norm_f32" is launched here with "block as i32" as parameter 2 ("cols") and "cols as i32" as '
         'parameter 3 ("block"): each is named after another parameter of its contract, so the arguments look swapped; pass '
         "them in the contract's order or rename the host variables."),
    ]  # fmt: skip
    (root / "src" / "ops.rs").write_text("use crate::{push_args as pa};\n" + launch.replace("block as i32, cols as i32", "cols as i32, block as i32"))
    assert check(root, select=["LAUNCH_ARG_ORDER"]).findings == []


def test_init_takes_the_geometry_of_a_rust_launch_through_wrappers(tmp_path: Path, capsys) -> None:
    """``wireup init k.cu --host src/device.rs --host src/ops.rs``: scale_f32's grid and block come from the
    launch of kname::<T>("scale") in ops.rs, through the wrappers device.rs defines."""
    kernel = 'extern "C" __global__ void scale_f32(size_t numel, const size_t* info, float* y) { y[0] = numel; }\n'
    root = _rust_project(tmp_path, kernel, _SCALE_F32)
    (root / "contracts" / "k.toml").unlink()
    main(["init", str(root / "k.cu"), "--host", str(root / "src" / "device.rs"), "--host", str(root / "src" / "ops.rs"), "--root", str(root)])
    out = capsys.readouterr().out
    assert 'grid = ["ceil_div(numel, 1024)", 1, 1]  # from src/ops.rs:6' in out and "block = [1024, 1, 1]  # from src/ops.rs:6" in out


def test_launches_in_blocks_the_build_compiles_out_are_not_read(tmp_path: Path, capsys) -> None:
    """llm.c's ``#define ENABLE_BF16`` ... ``#ifndef ENABLE_BF16`` around a launch of a kernel the bf16
    build does not have: that launch is compiled out, not unaudited. So is one under ``#if 0`` and one
    under ``#ifndef FAST`` with ``-DFAST`` in the flags; a launch under a test the reader cannot decide
    (``#ifdef MAYBE``) is still read."""
    kernel = "__global__ void fill(float* y, int n) { y[blockIdx.x * 128 + threadIdx.x] = 0.f; }\n"
    host = (
        '#include "k.cu"\n#define ENABLE_BF16\n'
        "void run(float* y, int n) {\n"
        "#ifndef ENABLE_BF16\n  old5<<<n, 128>>>(y, n);\n#else\n  fill<<<n, 128>>>(y, n);\n#endif\n"
        "#if 0\n  dead<<<n, 128>>>(y, n);\n#endif\n"
        "#ifndef FAST\n  slow<<<n, 128>>>(y, n);\n#endif\n"
        "#ifdef MAYBE\n  maybe<<<n, 128>>>(y, n);\n#endif\n"
        "}\n"
    )
    (tmp_path / "host.cu").write_text(host)
    (tmp_path / "k.cu").write_text(kernel)
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text('[dims]\nn = { min = 1, max = 4096 }\n' + _DRIFT_KERNEL.format(name="fill", cpp="fill", grid='"n"', block="128"))
    (tmp_path / "wireup.toml").write_text('launchers = ["host.cu"]\nnvcc_flags = ["-O3", "-lineinfo", "-DFAST"]\n')
    main(["check", "--root", str(tmp_path), "--select", "UNAUDITED_KERNEL,NO_LAUNCHER"])
    out = capsys.readouterr().out.splitlines()[:-1]
    assert [(line.split(":")[0:2], line.split('"')[1]) for line in out] == [(["host.cu", "16"], "maybe")]
    assert "UNAUDITED_KERNEL" in out[0]


# LeetCUDA (xlite-dev/LeetCUDA, the eighth trial in docs/adopting.md) launches its kernels from PyTorch
# bindings that macros generate: `add_##t##_kernel<<<grid, block>>>(...)` in a #define, with template
# arguments in parentheses (`red_##t##_kernel<(NT)>`) and continued lines between the name and `<<<`.
_MACRO_KERNELS = (
    "__global__ void add_f32_kernel(float* y, int n) { if (blockIdx.x * 256 + threadIdx.x < n) y[blockIdx.x * 256 + threadIdx.x] = 0.f; }\n"
    "__global__ void add_f16_kernel(float* y, int n) { if (blockIdx.x * 256 + threadIdx.x < n) y[blockIdx.x * 256 + threadIdx.x] = 0.f; }\n"
    "__global__ void scale_f32_kernel(float* y, int n) { if (blockIdx.x * 256 + threadIdx.x < n) y[blockIdx.x * 256 + threadIdx.x] = 1.f; }\n"
    "template <int NT>\n__global__ void red_f32_kernel(float* y, int n) { if (blockIdx.x * NT + threadIdx.x < n) y[blockIdx.x * NT + threadIdx.x] = 2.f; }\n"
)
_MACRO_HOST = (
    '#include "k.cu"\n'
    "#define BIND_ADD(t, n_pack)                                        \\\n"
    "  void add_##t(float* y, int n) {                                  \\\n"
    "    dim3 block(256 / (n_pack));                                    \\\n"
    "    add_##t##_kernel<<<(n + 255) / 256, block>>>(                  \\\n"
    "        y, n);                                                     \\\n"
    "  }\n"
    "#define LAUNCH_RED(NT, t)                                          \\\n"
    "  red_##t##_kernel<(NT)>                                           \\\n"
    "      <<<(n + NT - 1) / NT, NT>>>(y, n);\n"
    "#define BIND_SCALE(t) void scale_##t(float* y, int n) { scale_##t##_kernel<<<(n + 255) / 256, 256>>>(y, n); }\n"
    "BIND_ADD(f32, 1)\n"
    "BIND_ADD(f16, 2)\n"
    "void red(float* y, int n) { LAUNCH_RED(256, f32) }\n"
    "BIND_SCALE(f32)\n"
)


def test_a_launch_in_a_macro_reads_the_name_it_pastes_as_a_pattern() -> None:
    """Before: the pasted launches were kernel "_kernel" (the piece after the last ##), the arguments kept the
    line continuation ("\\ y"), and red_##t##_kernel<(NT)> was no launch at all (parentheses in template
    arguments, a continued line before <<<)."""
    sites = find_launches(_MACRO_HOST, "c", "host.cu")
    assert [(s.line, s.kernel, s.name_kind, s.pasted, s.template_args, s.args) for s in sites] == [
        (5, "add_*_kernel", "pattern", True, None, ("y", "n")),
        (9, "red_*_kernel", "pattern", True, ("(NT)",), ("y", "n")),
        (11, "scale_*_kernel", "pattern", True, None, ("y", "n")),
    ]
    add = sites[0]
    assert add.names_kernel("add_f32_kernel") and add.names_kernel("add_f16_kernel") and not add.names_kernel("scale_f32_kernel")
    assert sites[1].names_kernel("red_f32_kernel<256>")  # some instantiation of each kernel the pattern matches
    # outside a macro, ## is no paste and a name stays exact
    (plain,) = find_launches("void f(float* y, int n) { add_f32_kernel<<<1, 256>>>(y, n); }\n", "c", "host.cu")
    assert (plain.kernel, plain.name_kind, plain.pasted) == ("add_f32_kernel", "exact", False)


def _macro_project(tmp_path: Path) -> None:
    """host.cu and k.cu of the macro launches, contracts for add_f32_kernel (block 64) and red_f32_kernel<256>."""
    for name, text in {"host.cu": _MACRO_HOST, "k.cu": _MACRO_KERNELS}.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "contracts").mkdir()
    tables = "".join(
        _DRIFT_KERNEL.format(**k)
        for k in ({"name": "add_f32_kernel", "cpp": "add_f32_kernel", "grid": '"ceil_div(n, 256)"', "block": "64"},
                  {"name": "red_f32", "cpp": "red_f32_kernel<256>", "grid": '"ceil_div(n, 256)"', "block": "256"})
    )  # fmt: skip
    (tmp_path / "contracts" / "k.toml").write_text("[dims]\nn = { min = 1, max = 4096 }\n" + tables)
    (tmp_path / "wireup.toml").write_text('launchers = ["host.cu"]\n')


def test_macro_launches_without_nvcc_wire_the_kernels_they_paste_and_are_compared_with_no_geometry(tmp_path: Path, capsys, monkeypatch) -> None:
    """Without nvcc's preprocessor: add_##t##_kernel launches add_f32_kernel (contracted, with block 64: the
    macro's block depends on its argument, so no GEOMETRY_DRIFT); red_##t##_kernel<(NT)> launches
    red_f32_kernel<256> (no NO_LAUNCHER); scale_##t##_kernel matches no contract and is unaudited, named as the
    pattern. Before: "_kernel" three times unaudited, red_f32_kernel dead code."""
    import audit.compile

    monkeypatch.setattr(audit.compile, "find_nvcc", lambda: None)
    _macro_project(tmp_path)
    main(["check", "--root", str(tmp_path), "--select", "NO_LAUNCHER,UNAUDITED_KERNEL,GEOMETRY_DRIFT"])
    assert capsys.readouterr().out.splitlines()[:-1] == [
        'host.cu:11: UNAUDITED_KERNEL Host code launches, in a macro, the kernels whose names it pastes together, '
        '"scale_*_kernel" ("*" for the macro\'s parameters), but no contract declares a kernel whose entry matches it; '
        "add a [[kernel]] contract for the instantiations its uses run (wireup init scaffolds them) or remove the launch."
    ]


@pytest.mark.nvcc
def test_macro_launches_are_expanded_per_use_and_compared_with_their_contracts(tmp_path: Path, capsys) -> None:
    """With nvcc, each use of a macro is its own launch at the line of the call (nvcc -E): BIND_ADD(f32, 1)
    launches add_f32_kernel with block 256 / (1), which drifts from its contract's 64; BIND_ADD(f16, 2) and
    BIND_SCALE(f32) launch kernels no contract declares, now named; LAUNCH_RED(256, f32) runs
    red_f32_kernel<256> as contracted. The second check reads the preprocessed text from the cache."""
    _macro_project(tmp_path)
    expected = [
        'host.cu:12: GEOMETRY_DRIFT Kernel "add_f32_kernel" is launched here with block.x = "256 / (1)" but its contract declares "64": '
        "the launch gives 256 and the contract 64; update the contract or the launch.",
        'host.cu:13: UNAUDITED_KERNEL Host code launches kernel "add_f16_kernel" with <<<...>>>, but no contract declares a kernel with '
        "that name; add a [[kernel]] contract for it (wireup init scaffolds one) or remove the launch.",
        'host.cu:15: UNAUDITED_KERNEL Host code launches kernel "scale_f32_kernel" with <<<...>>>, but no contract declares a kernel with '
        "that name; add a [[kernel]] contract for it (wireup init scaffolds one) or remove the launch.",
    ]  # fmt: skip
    for _ in range(2):
        main(["check", "--root", str(tmp_path), "--select", "NO_LAUNCHER,UNAUDITED_KERNEL,GEOMETRY_DRIFT"])
        assert capsys.readouterr().out.splitlines()[:-1] == expected
    assert len(list((tmp_path / ".wireup-cache" / "macro-launches").glob("*.cu"))) == 1


@pytest.mark.nvcc
def test_a_macro_call_s_identical_launches_drift_once(tmp_path: Path, capsys) -> None:
    """LeetCUDA's bindings launch the same kernel with the same geometry in two branches of one macro: both
    expand onto the line of the macro call, and the drift is said once there."""
    host = (
        '#include "k.cu"\n'
        "#define BIND_ADD(t, n_pack)                                        \\\n"
        "  void add_##t(float* y, int n, bool wide) {                       \\\n"
        "    if (wide) { add_##t##_kernel<<<(n + 255) / 256, 256 / (n_pack)>>>(y, n); } \\\n"
        "    else { add_##t##_kernel<<<(n + 255) / 256, 256 / (n_pack)>>>(y, n); } \\\n"
        "  }\n"
        "BIND_ADD(f32, 2)\n"
    )
    for name, text in {"host.cu": host, "k.cu": _MACRO_KERNELS}.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "contracts").mkdir()
    table = _DRIFT_KERNEL.format(name="add_f32_kernel", cpp="add_f32_kernel", grid='"ceil_div(n, 256)"', block="64")
    (tmp_path / "contracts" / "k.toml").write_text("[dims]\nn = { min = 1, max = 4096 }\n" + table)
    (tmp_path / "wireup.toml").write_text('launchers = ["host.cu"]\n')
    main(["check", "--root", str(tmp_path), "--select", "GEOMETRY_DRIFT"])
    assert capsys.readouterr().out.splitlines()[:-1] == [
        'host.cu:7: GEOMETRY_DRIFT Kernel "add_f32_kernel" is launched here with block.x = "256 / (2)" but its contract declares "64": '
        "the launch gives 128 and the contract 64; update the contract or the launch."
    ]


def test_init_names_a_macro_launch_and_takes_no_geometry_from_it_without_nvcc(tmp_path: Path, capsys, monkeypatch) -> None:
    """The macro's block is 256 / (n_pack): which kernel gets which block, its uses decide, and without nvcc's
    preprocessor init cannot expand them; it says where the launch is instead of leaving the geometry TODO
    unexplained."""
    import audit.compile

    monkeypatch.setattr(audit.compile, "find_nvcc", lambda: None)
    (tmp_path / "k.cu").write_text(_MACRO_KERNELS + _MACRO_HOST.replace('#include "k.cu"\n', ""))
    text = _init(tmp_path, capsys, str(tmp_path / "k.cu"), "-o", str(tmp_path / "scaffold.toml"))
    table = (tmp_path / "scaffold.toml").read_text().split('\nname = "add_f16_kernel"')[1].split("params = [")[0]
    assert (
        '# TODO: k.cu:9 launches "add_*_kernel" in a macro that pastes the name together, which may be this kernel; '
        "the macro's arguments decide the geometry, which is not read from there.\n"
        'grid = ["TODO", 1, 1]\nblock = ["TODO", 1, 1]\n'
    ) in table, text


@pytest.mark.nvcc
def test_init_reads_the_geometry_of_macro_launches_from_the_preprocessor(tmp_path: Path, capsys) -> None:
    """Each use of the macro expands to its own launch, read from nvcc -E at the line of the macro call:
    BIND_ADD(f32, 1) launches add_f32_kernel with block 256, BIND_ADD(f16, 2) add_f16_kernel with block 128,
    LAUNCH_RED(256, f32) red_f32_kernel<256> (its contract's cpp_name filled in)."""
    (tmp_path / "k.cu").write_text(_MACRO_KERNELS + _MACRO_HOST.replace('#include "k.cu"\n', ""))
    for f in DATA.iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "wireup.toml").write_text("")
    assert main(["init", "--root", str(tmp_path), str(tmp_path / "k.cu"), "-o", str(tmp_path / "scaffold.toml")]) == 0
    assert "k.cu: 4 launch(es) made by macros, read from nvcc -E (each at the line of its macro call)." in capsys.readouterr().err
    text = (tmp_path / "scaffold.toml").read_text()
    tables = {t.split('"', 1)[0]: t for t in text.split('\nname = "')[1:]}
    assert 'grid = ["ceil_div(n, 256)", 1, 1]  # from k.cu:16\nblock = [256, 1, 1]  # from k.cu:16\n' in tables["add_f32_kernel"]
    assert 'grid = ["ceil_div(n, 256)", 1, 1]  # from k.cu:17\nblock = [128, 1, 1]  # from k.cu:17\n' in tables["add_f16_kernel"]
    assert 'cpp_name = "red_f32_kernel<256>"  # the instantiation launched at k.cu:18' in tables["red_f32_kernel"]
    assert 'block = [256, 1, 1]  # from k.cu:19' in tables["scale_f32_kernel"]
    assert "in a macro that pastes the name together" not in text


def test_no_launcher_says_which_sources_it_read_when_no_globs_are_set(tmp_path: Path, capsys) -> None:
    """Without launcher globs the scan reads the kernels' own files; the message said "no host source ()"
    (seen on LeetCUDA, whose kernels' files hold their launches)."""
    (tmp_path / "k.cu").write_text(
        "__global__ void fill(float* y, int n) { y[threadIdx.x] = 0.f; }\n"
        "__global__ void other(float* y, int n) { y[threadIdx.x] = 1.f; }\n"
        "void run(float* y) { other<<<1, 32>>>(y, 32); }\n"
    )  # the kernels' file launches one of them, so the scan runs over it
    (tmp_path / "contracts").mkdir()
    kernel = _DRIFT_KERNEL.format(name="fill", cpp="fill", grid="1", block="32")
    (tmp_path / "contracts" / "k.toml").write_text("[dims]\nn = { min = 1, max = 32 }\n" + kernel)
    (tmp_path / "wireup.toml").write_text("")
    main(["check", "--root", str(tmp_path), "--select", "NO_LAUNCHER"])
    assert capsys.readouterr().out.splitlines()[:-1] == [
        'contracts/k.toml:3: NO_LAUNCHER (warning) Kernel "fill" is dead code — no launcher: no host source (the kernels\' '
        'own sources: no launcher globs are set) names its entry "fill".'
    ]


_POINTER_HOST = """\
template <typename Ktraits> void run_traits(Params& params, cudaStream_t stream) {
  auto kernel = &scan_fwd<Ktraits>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 4096);
  kernel<<<params.batch, Ktraits::kNThreads, 4096, stream>>>(params);
}
void run_even(float* y, int n, bool even) {
  auto kernel = even ? &tile<64, true> : &tile<64, false>;
  kernel<<<n / 64, 64>>>(y, n);
}
void run_either(float* y, int n, bool fast) {
  void (*kern)(float*, int) = plain;
  if (fast) {
    kern = other;
  }
  kern<<<n, 32>>>(y, n);
}
void run_plain(float* y, int n) {
  void (*kern)(float*, int) = &plain;
  kern<<<n, 32>>>(y, n);
}
void run_call(float* y, int n) {
  auto kernel = pick_kernel(n);
  kernel<<<n, 32>>>(y, n);
}
void run_named(float* y, int n) { kernel<<<n, 32>>>(y, n); }
"""


def test_a_launch_through_a_variable_holding_the_kernel_runs_the_function_it_holds() -> None:
    """mamba's and flash-attention's ``auto kernel = &k<Ktraits>; kernel<<<...>>>(params)`` launched a kernel
    "kernel" (a false UNAUDITED_KERNEL, and the kernel itself NO_LAUNCHER): the variable's assignments in the
    enclosing function say what it runs. Several instantiations of one function: no one known instantiation;
    several functions, or a call's result: unresolved, with why."""
    sites = find_launches(_POINTER_HOST, "c", "host.cu")
    got = [(s.line, s.kernel, s.template_args, s.name_kind, s.notes) for s in sites]
    assert got == [
        (4, "scan_fwd", ("Ktraits",), "exact", ('launched through "kernel", which holds scan_fwd<Ktraits>',)),
        (8, "tile", ("?",), "exact", ('launched through "kernel", which holds tile<...>',)),
        (15, "kern", None, "unresolved", ('"kern" holds plain, other: which kernel runs is chosen at run time',)),
        (19, "plain", None, "exact", ('launched through "kern", which holds plain',)),
        (23, "kernel", None, "unresolved", ('"kernel" holds a function pointer the reader cannot follow: which kernel runs is chosen at run time',)),
        (25, "kernel", None, "exact", ()),  # a kernel named "kernel": nothing assigns it
    ]


def test_a_kernel_launched_through_a_pointer_is_launched_and_nothing_unaudited(tmp_path: Path, capsys) -> None:
    kernel = "template <int TILE>\n__global__ void tile(float* y, int n) { y[blockIdx.x * TILE + threadIdx.x] = 0.f; }\n"
    host = '#include "k.cu"\nvoid run(float* y, int n) {\n  auto kernel = &tile<128>;\n  kernel<<<(n + 127) / 128, 128>>>(y, n);\n}\n'
    found = _wiring(tmp_path, capsys, host)
    assert found == [
        'NO_LAUNCHER (warning) Kernel "tile_64" is dead code — no launcher: no host source (host.cu) names its entry "tile< 64 >"; its source is only compiled (host.cu:1).'
    ]


_FORWARDER_HEADER = """\
#pragma once
struct launch_params { dim3 grid; dim3 block; size_t smem; cudaStream_t stream; };
template <typename Kernel, typename... Args>
static void launch(Kernel kernel, const launch_params & p, Args&&... args) {
#if defined(USE_PDL)
    cudaLaunchKernelEx(&p.cfg, kernel, args...);
    return;
#endif
    kernel<<<p.grid, p.block, p.smem, p.stream>>>(args...);
}
"""
_FORWARDER_KERNELS = """\
#include "launch.cuh"
__global__ void fill(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 0.f; }
template <typename T> __global__ void scale(T* y, int n) { if (threadIdx.x < n) y[threadIdx.x] *= 2; }
__global__ void other(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 1.f; }
__global__ void dead(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 3.f; }
template <typename K> void run_with(K kern, float* y, int n) { launch(kern, launch_params{}, y, n); }
void run(float* y, int n, cudaStream_t s) {
    const launch_params p = {dim3(1), dim3(32), 0, s};
    launch(fill, p, y, n);
    launch(scale<float>, p, y, n);
    run_with(other, y, n);
    void* a[] = {&y, &n};
    cudaLaunchCooperativeKernel((void*)fill, dim3(1), dim3(64), a, 0, s);
}
"""


def test_a_launcher_function_s_parameter_is_launched_where_its_callers_pass_a_kernel() -> None:
    """ggml's ggml_cuda_kernel_launch(Kernel kernel, params, args...) launches its parameter; the reader marks
    such a launch forwarded (the function and the parameter's index) instead of launching a kernel "kernel"."""
    sites = find_launches(_FORWARDER_HEADER, "c", "launch.cuh")
    assert [(s.line, s.kernel, s.name_kind, s.forwarded, s.style) for s in sites] == [
        (6, "kernel", "forwarded", ("launch", 0), "runtime"),
        (9, "kernel", "forwarded", ("launch", 0), "cuda"),
    ]
    assert sites[1].notes == ('"kernel" is parameter 1 of launch(): what runs is the kernel its callers pass',)
    (coop,) = [s for s in find_launches(_FORWARDER_KERNELS, "c", "k.cu") if s.style == "runtime"]
    assert (coop.line, coop.kernel, coop.via, coop.grid, coop.block, coop.shared) == (13, "fill", "cudaLaunchCooperativeKernel", ("1", "1", "1"), ("64", "1", "1"), "0")


def test_kernels_passed_to_a_launcher_function_are_launched_at_the_calls(tmp_path: Path, capsys) -> None:
    """Before: UNAUDITED_KERNEL for a kernel "kernel" at the launcher's <<<...>>>, and NO_LAUNCHER for every kernel
    launched through it (ggml: 28 of its kernels). Now each call of the launcher launches what it passes:
    fill and scale<float> directly, other through run_with(), which passes its own parameter on; dead is
    launched by no one, and other has no contract."""
    (tmp_path / "launch.cuh").write_text(_FORWARDER_HEADER)
    (tmp_path / "k.cu").write_text(_FORWARDER_KERNELS)
    (tmp_path / "contracts").mkdir()
    tables = "".join(
        _DRIFT_KERNEL.format(**k)
        for k in ({"name": "fill", "cpp": "fill", "grid": "1", "block": "64"},
                  {"name": "scale_f32", "cpp": "scale<float>", "grid": "1", "block": "32"},
                  {"name": "dead", "cpp": "dead", "grid": "1", "block": "32"})
    )  # fmt: skip
    (tmp_path / "contracts" / "k.toml").write_text("[dims]\nn = { min = 1, max = 32 }\n" + tables)
    (tmp_path / "wireup.toml").write_text('launchers = ["*.cu", "*.cuh"]\n')
    main(["check", "--root", str(tmp_path), "--select", "NO_LAUNCHER,UNAUDITED_KERNEL,GEOMETRY_DRIFT"])
    assert [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()[:-1]] == [
        'NO_LAUNCHER (warning) Kernel "dead" is dead code — no launcher: no host source (*.cu, *.cuh) names its entry "dead".',
        'UNAUDITED_KERNEL Host code launches kernel "other" through run_with(), but no contract declares a kernel with that name; '
        "add a [[kernel]] contract for it (wireup init scaffolds one) or remove the launch.",
    ]


def test_a_launch_naming_a_macro_parameter_is_unresolved_without_the_preprocessor(tmp_path: Path, capsys, monkeypatch) -> None:
    """ggml's #define LIGHTNING_INDEXER_CASE(lightning_indexer_kernel, ...) lightning_indexer_kernel<...><<<...>>>:
    the launched name is the macro's parameter. Before: UNAUDITED_KERNEL "lightning_indexer_kernel" and NO_LAUNCHER
    for the kernels its uses pass. Without nvcc -E (or where it fails: ggml's headers need cuBLAS) the launch is
    one the scan cannot name, which NO_LAUNCHER then names; with it, each use is read (tests above)."""
    import audit.compile

    monkeypatch.setattr(audit.compile, "find_nvcc", lambda: None)
    host = (
        "#define CASE(kern, nt) case nt: kern<nt><<<n / nt, nt>>>(y, n); break;\n"
        "void run(float* y, int n, int nt) { switch (nt) { CASE(tile, 64) } }\n"
    )
    (site,) = find_launches(host, "c", "host.cu")
    assert (site.kernel, site.name_kind, site.pasted) == ("kern", "unresolved", True)
    assert site.notes == ('"kern" is a parameter of the macro around the launch: each use of the macro names the kernel',)
    (tmp_path / "host.cu").write_text(host)
    (tmp_path / "k.cu").write_text("template <int NT> __global__ void tile(float* y, int n) { y[threadIdx.x] = 0.f; }\n")
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "k.toml").write_text(
        "[dims]\nn = { min = 1, max = 4096 }\n" + _DRIFT_KERNEL.format(name="tile_64", cpp="tile<64>", grid='"ceil_div(n, 64)"', block="64")
    )
    (tmp_path / "wireup.toml").write_text('launchers = ["host.cu"]\n')
    main(["check", "--root", str(tmp_path), "--select", "NO_LAUNCHER,UNAUDITED_KERNEL"])
    assert [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()[:-1]] == [
        'NO_LAUNCHER (warning) Kernel "tile_64" is dead code — no launcher: no host source (host.cu) names its entry "tile<64>"; '
        "unless one of the launches whose kernel name the scan cannot resolve runs it: host.cu:1 (kern)."
    ]


def test_a_dim3_returned_by_a_function_is_not_read_as_a_scalar(tmp_path: Path, capsys) -> None:
    """DeepSpeed's ``dim3 grid_dim = get_attn_softmax_grid(...);`` returns {x, batch}: it was read as the scalar
    (value, 1, 1), a false GEOMETRY_DRIFT on grid.y. A function of the file returning dim3 leaves the three
    components unknown (not compared); block.x is still compared, and an int-returning call stays a scalar."""
    kernel = "__global__ void fill(float* y, int n) { y[blockIdx.x * blockDim.x + threadIdx.x] = 0.f; }\n"
    host = (
        '#include "k.cu"\n'
        "dim3 grid_of(int n, int b) { return dim3(n / 64, b); }\n"
        "int blocks_of(int n) { return n / 64; }\n"
        "void run(float* y, int n) {\n  dim3 g = grid_of(n, 4);\n  fill<<<g, 128>>>(y, n);\n}\n"
        "void other(float* y, int n) {\n  dim3 g = blocks_of(n);\n  fill<<<g, 64>>>(y, n);\n}\n"
    )
    found = _drift(tmp_path, capsys, {"host.cu": host, "k.cu": kernel}, {"name": "fill", "cpp": "fill", "grid": '"n", 4', "block": "64"})
    assert found == [
        'host.cu:6: GEOMETRY_DRIFT Kernel "fill" is launched here with block.x = "128" but its contract declares "64": '
        "the launch gives 128 and the contract 64; update the contract or the launch.",
        # blocks_of(n), a one-return function, is read as n / 64 since the tiny-cuda-nn trial: not the contract's n
        'host.cu:10: GEOMETRY_DRIFT Kernel "fill" is launched here with grid.x = "n / 64" but its contract declares "n" '
        "at n = 1: the launch gives 0 and the contract 1; update the contract or the launch.",
        'host.cu:10: GEOMETRY_DRIFT Kernel "fill" is launched here with grid.y = "1" but its contract declares "4": '
        "the launch gives 1 and the contract 4; update the contract or the launch.",
    ]


def test_constants_of_a_header_in_an_include_folder_reach_the_launch(tmp_path: Path, capsys) -> None:
    """DeepSpeed's launches use ``THREADS``, ``#define``d in ``csrc/includes/*.h`` and included as
    ``"custom_cuda_layers.h"`` through nvcc's ``-I``: the header was looked up next to the including file only,
    so the launch's block stayed unknown and was never compared. The configuration's include folders are
    searched too."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "layers.h").write_text("#pragma once\n#define THREADS 128\n")
    host = '#include "layers.h"\n#include "k.cu"\nvoid run(float* y, int n) {\n  fill<<<(n + THREADS - 1) / THREADS, THREADS>>>(y, n);\n}\n'
    kernel = "__global__ void fill(float* y, int n) { y[blockIdx.x * blockDim.x + threadIdx.x] = 0.f; }\n"
    found = _drift(tmp_path, capsys, {"host.cu": host, "k.cu": kernel}, {"name": "fill", "cpp": "fill", "grid": '"ceil_div(n, 128)"', "block": "256"})
    assert found == []  # inc/ is not an include folder yet: THREADS unknown, nothing compared
    (tmp_path / "wireup.toml").write_text('launchers = ["host.cu"]\ninclude = ["inc"]\n')
    main(["check", "--root", str(tmp_path), "--select", "GEOMETRY_DRIFT"])
    assert capsys.readouterr().out.splitlines()[:-1] == [
        'host.cu:4: GEOMETRY_DRIFT Kernel "fill" is launched here with block.x = "128" but its contract declares "256": '
        "the launch gives 128 and the contract 256; update the contract or the launch."
    ]


def test_a_launch_with_spaced_chevrons_is_read(tmp_path: Path, capsys) -> None:
    """diff-gaussian-rasterization writes every launch ``k << <grid, block >> > (args)`` (Visual Studio's
    formatter; nvcc accepts it): the launch scan saw none, so GEOMETRY_DRIFT, UNAUDITED_KERNEL and the other
    launch rules were not run, and ``init`` left every geometry TODO. Read as ``<<<...>>>`` now, lines kept."""
    from audit.cuda.launches import find_launches

    host = ('#include "k.cu"\nvoid run(float* y, int n) {\n'
            "  fill << <(n + 255) / 256, 256 >> > (y, n);\n"
            "  fill<<<(n + 127) / 128, 128>>>(y, n);\n}\n")  # fmt: skip
    sites = find_launches(host, "c", "host.cu")
    assert [(s.line, s.kernel, s.grid[0], s.block[0], s.args) for s in sites] == [
        (3, "fill", "(n + 255) / 256", "256", ("y", "n")), (4, "fill", "(n + 127) / 128", "128", ("y", "n"))]
    kernel = "__global__ void fill(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0.f; }\n"
    found = _drift(tmp_path, capsys, {"host.cu": host, "k.cu": kernel},
                   {"name": "fill", "cpp": "fill", "grid": '"ceil_div(n, 128)"', "block": "128"})  # fmt: skip
    assert found == [
        'host.cu:3: GEOMETRY_DRIFT Kernel "fill" is launched here with block.x = "256" but its contract declares "128": '
        "the launch gives 256 and the contract 128; update the contract or the launch.",
        'host.cu:3: GEOMETRY_DRIFT Kernel "fill" is launched here with grid.x = "(n + 255) / 256" but its contract declares '
        '"ceil_div(n, 128)" at n = 4096: the launch gives 16 and the contract 32; update the contract or the launch.',
    ]
