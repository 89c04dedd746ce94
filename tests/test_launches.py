"""Host launch sites (audit.cuda.launches): read in four styles, turned into contract geometry by
``wireup init``, counted as launches by the launcher scan, and compared with the contracts (GEOMETRY_DRIFT).

The fixture (tests/data/launches) is three kernels launched the same way by host code in CUDA C++
(``<<<...>>>``, in kernels.cu itself), Rust with cudarc, Python with CuPy and the driver API.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.cli import main
from audit.cuda.launches import find_launches, language_of, to_dim_expr

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
