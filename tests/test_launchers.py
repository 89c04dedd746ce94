"""The launcher scan and its rules on a Rust crate (build.rs + cudarc) and a Python (CuPy) package."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.api import check, load_project
from audit.launchers import getter_arguments, lex, scan_launchers

DATA = Path(__file__).parent / "data" / "launchers"


def project(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(DATA / name, dst, ignore=shutil.ignore_patterns(".wireup-cache"))
    return dst


def findings(root: Path) -> list[tuple[str, int | None, str, str]]:
    result = check(root, select=["launchers"])
    return [(f.file, f.line, f.rule, f.subject) for f in result.findings]


def test_rust_crate_findings(tmp_path: Path) -> None:
    assert findings(project(tmp_path, "rust_crate")) == [
        ("build.rs", 7, "UNAUDITED_KERNEL", "kernels/rogue_kernel.cu"),
        ("contracts/chain.toml", 38, "NO_LAUNCHER", "dead_scale"),
        ("src/gpu_aux_heads.rs", 18, "UNAUDITED_KERNEL", "rogue_scale"),
        ("src/gpu_aux_heads.rs", 31, "UNAUDITED_KERNEL", "rogue_scale"),
    ]


def test_rust_crate_messages(tmp_path: Path) -> None:
    result = check(project(tmp_path, "rust_crate"), select=["launchers"])
    messages = {f.rule: f.message for f in result.findings}
    assert messages["NO_LAUNCHER"] == (
        'Kernel "dead_scale" is dead code — no launcher: no host source (src/**/*.rs, build.rs) names its entry '
        '"dead_scale"; its source is only compiled (build.rs:6).'
    )
    assert any(
        f.message.startswith('Host code fetches kernel "rogue_scale" through get_func, but no contract declares')
        for f in result.findings
    )
    assert result.errors and result.exit_code == 1


def test_rust_crate_references(tmp_path: Path) -> None:
    cfg, cs = load_project(project(tmp_path, "rust_crate"))
    scan = scan_launchers(cfg, cs)
    # the globs' files and the kernels' own sources (which launch nothing here)
    assert scan.files == ["build.rs", "kernels/dead_kernel.cu", "kernels/scale_rows_kernel.cu", "src/gpu_aux_heads.rs"]
    refs = sorted((r.file, r.line, r.kind, r.call) for r in scan.references["scale_rows"])
    assert refs == [
        ("build.rs", 5, "build", ""),
        ("src/gpu_aux_heads.rs", 9, "load", ""),
        ("src/gpu_aux_heads.rs", 18, "launch", "load_ptx"),
        ("src/gpu_aux_heads.rs", 23, "launch", "get_func"),
        ("src/gpu_aux_heads.rs", 25, "launch", "launch"),  # f.launch(cfg, ...): the f bound in this function
    ]
    assert scan.launched("scale_rows") and not scan.launched("dead_scale")
    # "dead_scale" appears only in a comment of the launcher file
    assert [r.file for r in scan.references["dead_scale"]] == ["build.rs"]


def test_python_launcher_findings(tmp_path: Path) -> None:
    assert findings(project(tmp_path, "python_pkg")) == [
        ("aux_gpu/launch.py", 11, "UNAUDITED_KERNEL", "rogue_py_kernel"),
        ("contracts/chain.toml", 38, "NO_LAUNCHER", "dead_scale"),
    ]


def test_rules_do_not_run_without_globs(tmp_path: Path) -> None:
    root = project(tmp_path, "python_pkg")
    (root / "wireup.toml").write_text("")
    result = check(root, select=["launchers"])
    assert result.findings == []
    assert [(n.rule, "no launcher scan is configured" in n.reason) for n in result.not_run] == [
        ("NO_LAUNCHER", True),
        ("UNAUDITED_KERNEL", True),
        ("GEOMETRY_DRIFT", True),
        ("LAUNCH_ARG_ORDER", True),
    ]
    (root / "wireup.toml").write_text('launchers = ["crates/**/*.rs"]\n')
    result = check(root, select=["launchers"])
    assert result.findings == [] and "match no file" in result.not_run[0].reason


def test_wiring_the_dead_kernel_clears_no_launcher(tmp_path: Path) -> None:
    root = project(tmp_path, "rust_crate")
    src = root / "src" / "gpu_aux_heads.rs"
    src.write_text(src.read_text().replace('"rogue_scale").unwrap()', '"dead_scale").unwrap()'))
    assert ("contracts/chain.toml", 38, "NO_LAUNCHER", "dead_scale") not in findings(root)


def test_report_marks_dead_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.api import run_check
    from audit.report import ReportOptions, collect_report

    monkeypatch.setattr("audit.compile.build_kernels", _no_build, raising=False)
    monkeypatch.setattr("audit.compile.facts.build_kernels", _no_build, raising=False)
    cfg, cs = load_project(project(tmp_path, "rust_crate"))
    report = collect_report(run_check(cfg.root, config=cfg, contracts=cs), ReportOptions(history=False))
    by_name = {k.name: k for k in report.kernels}
    assert by_name["dead_scale"].wired.text == "dead code — no launcher (no host code launches it)"
    assert by_name["scale_rows"].wired.state == "ok"
    assert [(h.file, h.kind) for h in report.unaudited] == [
        ("build.rs", "build"), ("src/gpu_aux_heads.rs", "launch"), ("src/gpu_aux_heads.rs", "launch"),
    ]  # fmt: skip


def _no_build(*args, **kwargs):
    from audit.errors import EnvironmentProblem

    raise EnvironmentProblem("nvcc is not on PATH (switched off by the test)")


@pytest.mark.parametrize(
    "language, source, literals",
    [
        ("rust", 'let c = \'"\'; f("a") /* "b" /* "c" */ "d" */ g(r#"e"f"#)', ["a", 'e"f']),
        ("rust", "fn f<'a>(x: &'a str) -> &'a str { \"s\" }", ["s"]),
        ("python", 'f("a")  # "b"\ng(\'c\', """d\n"e" """, r"f\\"")', ["a", "c", 'd\n"e" ', 'f\\"']),
        ("c", 'auto s = R"x(a "raw" )x"; char q = \'"\'; f("b"); // "c"', ['a "raw" ', "b"]),
    ],
)
def test_lexer(language: str, source: str, literals: list[str]) -> None:
    lits, code = lex(source, language)
    assert [lit.value for lit in lits] == literals
    assert len(code) == len(source)


def test_getter_arguments() -> None:
    src = 'm.get_func("mod", "f1"); load_ptx(p, "mod", &["f2", "f3"]); get_function(name); RawKernel(code, "f4")'
    lits, code = lex(src, "rust")
    assert [(c, lit.value) for c, lit in getter_arguments(code, lits)] == [
        ("get_func", "f1"), ("load_ptx", "f2"), ("load_ptx", "f3"), ("RawKernel", "f4"),
    ]  # fmt: skip


def test_a_cpp_name_with_its_parameter_list_is_launched_by_its_function_name() -> None:
    """A contract that names one overload by its signature (``scale(float*, int)``) is launched as ``scale``
    and, for a template, still names its instantiation (the DeepSpeed trial: NO_LAUNCHER and
    UNAUDITED_KERNEL for every such contract before)."""
    from types import SimpleNamespace

    from audit.launchers import contract_instantiation, launch_name

    assert launch_name(SimpleNamespace(cpp_name="fused_add2_kernel(int, float*, float const*, float const*)", entry=None, name="k")) == "fused_add2_kernel"
    assert launch_name(SimpleNamespace(cpp_name="ns::attn_softmax<32, 1, 128>(float*, float const*, int)", entry=None, name="k")) == "attn_softmax"
    assert contract_instantiation(SimpleNamespace(cpp_name="attn_softmax<32, 1, 128>(float*, int)")) == ("32", "1", "128")
    assert contract_instantiation(SimpleNamespace(cpp_name="scale(float*, int)")) is None
