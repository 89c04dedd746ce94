"""Every static command survives every hostile project tree of the generated corpus.

For each tree of :mod:`hostile_corpus` and each static command (``check``, ``graph``, ``layout
fingerprint``, ``layout diff --against HEAD``, ``report``) the command must exit 0, 1 or 2, print no
traceback, finish within the time limit, and leave everything outside the project root as it was (no
file written or changed there, no marker from a project program or template). Markup planted in names,
docs and evidence records must not reach the rendered Markdown report, Mermaid or DOT raw.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from hostile_corpus import BASE_TOML, CASES, STATIC_COMMANDS, make_base, make_tree, remove_tree, run_static, run_static_many, snapshot

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = make_base(tmp_path_factory.mktemp("hostile-base"))
    # warm the build cache once (where nvcc is installed): every tree starts from a copy of it, so only
    # the trees that change a kernel compile
    run_static(root, ["check"], 300)
    return root


def _commands(name: str) -> list[list[str]]:
    # graph alternates between its formats so both printers meet every class of tree
    graph = ["graph", "--format", "dot"] if sorted(CASES).index(name) % 2 else ["graph"]
    return [graph if argv == ["graph"] else argv for argv in STATIC_COMMANDS]


@pytest.mark.parametrize("name", sorted(CASES), ids=lambda n: f"{CASES[n][0]}:{n}")
def test_static_commands_survive_the_hostile_tree(name: str, base: Path, tmp_path: Path) -> None:
    try:
        _survive(name, base, tmp_path)
    finally:
        remove_tree(tmp_path / "case")  # pytest's own clean-up recurses, and one tree is 1,100 folders deep


def _survive(name: str, base: Path, tmp_path: Path) -> None:
    root, outside = make_tree(tmp_path / "case", name, base)
    before = snapshot(tmp_path, root)
    for argv, out in zip(_commands(name), run_static_many(root, _commands(name), TIMEOUT_S)):
        what = f"wireup {' '.join(argv)} on {name}"
        assert out.code is not None, f"{what} ran past {TIMEOUT_S} s"
        assert "Traceback" not in out.stdout + out.stderr, f"{what}:\n{out.stderr[-3000:]}"
        assert out.code in (0, 1, 2), f"{what} exited {out.code}:\n{out.stderr[-2000:]}"
        if out.code == 2:
            assert out.stderr.strip(), f"{what} exited 2 without saying why"
        if argv[0] == "graph":
            _assert_no_raw_markup(out.stdout, what, ("<img", "<svg", '"]-->X["') if "dot" not in argv else ('"]-->X["',))
    after = snapshot(tmp_path, root)
    changed = sorted(set(after) ^ set(before) | {p for p in after if p in before and after[p] != before[p]})
    assert not changed, f"{name}: written outside the project root: {changed[:5]}"
    assert not (outside / "RAN").exists(), f"{name}: a program or template of the project ran"
    report = root / "reports" / "dqn-wire-up-audit.md"
    if report.is_file() and not report.is_symlink():
        _assert_no_raw_markup(report.read_text(errors="replace"), f"the report of {name}")


MARKDOWN_RAW = ("<img", "<svg", "](javascript:")


def _assert_no_raw_markup(text: str, what: str, raw_forms: tuple[str, ...] = MARKDOWN_RAW) -> None:
    """No markup outside code spans (inside one, "<img" is text to every Markdown renderer) or, in a
    graph, outside the one-line comments that name each schedule."""
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(("// schedule ", "%% schedule ")))
    if raw_forms is MARKDOWN_RAW:
        text = re.sub(r"^(`{3,})[^\n]*\n.*?^\1`*[ \t]*$", "", text, flags=re.S | re.M)  # fenced blocks
        text = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)  # code spans
    for raw in raw_forms:
        assert raw not in text, f"{what} holds the raw markup {raw!r}"


def test_the_corpus_covers_every_class() -> None:
    classes = {cls for cls, _ in CASES.values()}
    assert classes >= {
        "huge numbers", "deep nesting", "huge sets", "special files", "launchers", "project programs",
        "project templates", "markup", "wrong types", "git options",
    }  # fmt: skip
    assert len(CASES) >= 60


def test_the_runner_sees_a_hang_a_traceback_and_an_outside_write(tmp_path: Path, monkeypatch) -> None:
    """The controls: without them the corpus test could not fail."""
    import time

    import audit.cli

    root = make_base(tmp_path)
    monkeypatch.setattr(audit.cli, "main", lambda argv: time.sleep(60))
    assert run_static(root, ["check"], 0.5).code is None
    monkeypatch.setattr(audit.cli, "main", lambda argv: 1 / 0)
    out = run_static(root, ["check"], 10)
    assert out.code == 1 and "Traceback" in out.stderr and "ZeroDivisionError" in out.stderr
    before = snapshot(tmp_path, root)
    monkeypatch.setattr(audit.cli, "main", lambda argv: (tmp_path / "leak").write_text("x") and 0)
    assert run_static(root, ["check"], 10).code == 0
    assert set(snapshot(tmp_path, root)) - set(before) == {str(tmp_path / "leak")}


# --- the fixes, one sentence each naming file and line ------------------------------------------------------


def _err(root: Path, argv: list[str]) -> str:
    out = run_static(root, argv, TIMEOUT_S)
    assert out.code == 2, out.stdout + out.stderr
    return out.stderr


def test_nvcc_host_compiler_from_the_project_is_refused(base: Path, tmp_path: Path) -> None:
    root, _ = make_tree(tmp_path / "c", "nvcc_host_compiler_from_config", base)
    assert _err(root, ["check"]) == (
        'error: wireup.toml:1: key "nvcc_flags" holds "-ccbin", which chooses the host compiler, a program nvcc runs; '
        "a project may not set nvcc options that run programs or read or write files (set them in NVCC_PREPEND_FLAGS instead).\n"
    )


@pytest.mark.parametrize(
    ("flags", "flag", "why"),
    [
        ('["--keep-dir", "/tmp"]', "--keep-dir", "names a folder for intermediate files"),
        ('["-odir=/tmp"]', "-odir=/tmp", "names an output folder"),
        ('["-o", "x"]', "-o", "names an output file"),
        ('["-O3", "--options-file=x"]', "--options-file=x", "reads further options from a file"),
        ('["-Xcompiler", "-fplugin=x.so"]', "-Xcompiler", "passes options to the host compiler"),
        ('["-I/etc"]', "-I/etc", 'adds an include folder (use the "include" key, which stays inside the root)'),
        ('["-Xptxas", "-v,--output-file=x"]', "-Xptxas", "names a file for ptxas to read or write"),
    ],
)
def test_nvcc_options_that_run_programs_or_write_files_are_refused(tmp_path: Path, flags: str, flag: str, why: str) -> None:
    from audit.config import load_config
    from audit.errors import UsageError

    (tmp_path / "wireup.toml").write_text(f"select = []\nnvcc_flags = {flags}\n")
    with pytest.raises(UsageError, match=re.escape(f'wireup.toml:2: key "nvcc_flags" holds "{flag}", which {why};')):
        load_config(tmp_path)


def test_safe_nvcc_options_and_a_user_cache_elsewhere_are_accepted(tmp_path: Path, monkeypatch) -> None:
    from audit.config import load_config

    (tmp_path / "wireup.toml").write_text('nvcc_flags = ["-O3", "-lineinfo", "-Xptxas", "-v,-dlcm=cg", "-DX=1", "--use_fast_math", "-maxrregcount=64"]\n')
    monkeypatch.setenv("WIREUP_CACHE", str(tmp_path.parent / "shared-cache"))
    assert load_config(tmp_path).cache == str(tmp_path.parent / "shared-cache")


def test_a_cache_outside_the_root_is_refused_from_the_project(base: Path, tmp_path: Path) -> None:
    root, outside = make_tree(tmp_path / "c", "cache_folder_outside_the_root", base)
    assert _err(root, ["check"]) == f'error: wireup.toml: key "cache" ("{outside / "cache"}") is an absolute path; paths must stay inside the project root.\n'


def test_a_5000_digit_integer_names_its_line(base: Path, tmp_path: Path) -> None:
    root, _ = make_tree(tmp_path / "c", "toml_int_5000_digits", base)
    assert _err(root, ["check"]).splitlines()[0] == (
        "error: contracts/chain.toml:4: not valid TOML: an integer of 5000 digits; contract integers are at most 2^62 in magnitude."
    )
    root, _ = make_tree(tmp_path / "d", "hex_5000_digits_in_expression", base)
    assert _err(root, ["check"]).splitlines()[0].startswith('error: contracts/chain.toml:4: dims.N: "0xffff')
    assert "uses an integer of 20000 bits; dim expression values are at most 2^62 in magnitude." in _err(root, ["check"])


def test_squaring_dims_stop_at_2_62(base: Path, tmp_path: Path) -> None:
    root, _ = make_tree(tmp_path / "c", "squaring_derived_dims", base)
    out = run_static(root, ["check", "--select", "UNKNOWN_DIM,DIM_RANGE,SHAPE_MISMATCH"], TIMEOUT_S)
    assert out.code is not None and out.seconds < TIMEOUT_S and "Traceback" not in out.stderr


def test_special_and_escaping_contract_files_are_named(base: Path, tmp_path: Path) -> None:
    root, _ = make_tree(tmp_path / "c", "contract_file_is_a_fifo", base)
    assert "error: contracts/pipe.toml: this file is not a regular file (a FIFO); contract files are regular files inside the project root.\n" in _err(root, ["check"])
    root, _ = make_tree(tmp_path / "d", "contract_file_is_a_symlink_out_of_the_root", base)
    assert "error: contracts/secret.toml: this file leads outside the project root" in _err(root, ["check"])
    root, _ = make_tree(tmp_path / "e", "contract_folders_1100_deep", base)
    try:
        assert "is nested more than 32 folders deep; its contract files were not read." in _err(root, ["check"])
    finally:
        remove_tree(tmp_path / "e")
    root, _ = make_tree(tmp_path / "f", "contracts_folder_is_a_symlink_loop", base)
    assert _err(root, ["check"]) == 'error: defaults: key "contracts" ("contracts") is a symbolic link loop; paths must stay inside the project root.\n'
    root, _ = make_tree(tmp_path / "g", "contract_files_all_empty", base)
    assert "declare nothing; expected at least one [[kernel]], [dims], [[buffer]], [isv] or [[schedule]]." in _err(root, ["check"])


def test_nan_inf_and_unknown_properties_are_refused(base: Path, tmp_path: Path) -> None:
    root, _ = make_tree(tmp_path / "c", "nan_and_inf_floats", base)
    err = _err(root, ["check"])
    assert "nondeterministic.rtol: expected a finite number, found inf." in err
    assert "isv.slot[0].reset.FoldReset: expected a finite number or \"keep\", found the number nan." in err
    root, _ = make_tree(tmp_path / "d", "unknown_property_kinds_and_keys", base)
    err = _err(root, ["check"])
    assert 'kernel[0].property[0].kind: expected one of "unit_scale", found "always_passes".' in err
    assert 'kernel[0].property[1].nope: unknown key "nope" in a "unit_scale" property of kernel "scale"' in err


def test_an_unsafe_include_is_neither_compiled_nor_analysed(base: Path, tmp_path: Path) -> None:
    root, _ = make_tree(tmp_path / "c", "kernel_includes_a_fifo", base)
    out = run_static(root, ["check", "--select", "SOURCE_UNSAFE"], TIMEOUT_S)
    assert out.code == 1
    assert 'SOURCE_UNSAFE Kernel "scale" source "kernels/scale.cu" includes "pipe.cuh", which is not a regular file (a FIFO); it is neither compiled nor analysed.' in out.stdout


def test_template_code_is_sandboxed_and_its_errors_name_the_line(base: Path, tmp_path: Path) -> None:
    root, outside = make_tree(tmp_path / "c", "template_runs_code", base)
    err = _err(root, ["report"])
    assert f"error: {root / 'tpl' / 'report.md.j2'}:1: the template failed while rendering (SecurityError: access to attribute '__class__'" in err
    assert not (outside / "RAN").exists()
    root, _ = make_tree(tmp_path / "d", "template_runtime_error", base)
    assert _err(root, ["report"]) == f"error: {root / 'tpl' / 'report.md.j2'}:1: the template failed while rendering (ZeroDivisionError: division by zero).\n"


def test_a_template_that_runs_too_long_is_stopped(base: Path, tmp_path: Path, monkeypatch) -> None:
    import audit.report.render as render

    root, _ = make_tree(tmp_path / "c", "template_runtime_error", base)
    (root / "tpl" / "report.md.j2").write_text("{% for i in range(99999) %}{% for j in range(99999) %}{{ i }}{% endfor %}{% endfor %}")
    monkeypatch.setattr(render, "RENDER_SECONDS", 1)
    err = _err(root, ["report"])
    assert err == f"error: {root / 'tpl' / 'report.md.j2'}:1: the template failed while rendering (RenderTimeout: it ran longer than 1 s).\n"


def test_markup_is_escaped_in_report_mermaid_and_dot(base: Path, tmp_path: Path) -> None:
    root, _ = make_tree(tmp_path / "c", "markup_in_names_and_docs", base)
    report = run_static(root, ["report", "--no-history", "-o", "-"], TIMEOUT_S)
    assert report.code == 0, report.stderr
    _assert_no_raw_markup(report.stdout, "the report")
    assert "&lt;img src=x onerror=alert(1)>" in report.stdout
    dot = run_static(root, ["graph", "--format", "dot"], TIMEOUT_S).stdout
    _assert_no_raw_markup(dot, "the DOT graph", ('"]-->X["',))
    assert 'digraph "main <img src=x onerror=alert(1)> <svg onload=alert(2)> [click](javascript:alert(3)) \\"]-->X[\\" \\\\\\" ; } | `" {' in dot
    root, _ = make_tree(tmp_path / "d", "markup_in_kernel_name_and_source_path", base)
    mermaid = run_static(root, ["graph"], TIMEOUT_S).stdout
    _assert_no_raw_markup(mermaid, "the Mermaid graph", ("<img", "<svg", '"]-->X["'))
    assert 'k1["kimg src=x onerror=alert(1)|]<br/><small>forward</small>"]:::forward' in mermaid


def test_evidence_records_of_the_wrong_type_are_skipped(base: Path, tmp_path: Path) -> None:
    from audit.evidence import EvidenceRecord, load_records

    root, _ = make_tree(tmp_path / "c", "evidence_fields_of_the_wrong_type", base)
    records = load_records(root / "reports" / "evidence")
    files = list((root / "reports" / "evidence").glob("*/*.json"))
    assert 0 < len(records) < len(files) / 3  # only records whose every field has its type load
    for r in records:
        assert EvidenceRecord.from_dict(json.loads(r.to_json())) == r
    with pytest.raises(TypeError, match='field "seed" has the wrong type'):
        EvidenceRecord.from_dict({"subject": "k", "kind": "kernel", "backend": "b", "verdict": "pass", "source_hash": "", "contract_hash": "", "seed": "7"})


def test_launcher_globs_may_not_leave_the_root(base: Path, tmp_path: Path) -> None:
    root, _ = make_tree(tmp_path / "c", "launcher_glob_leaves_the_root", base)
    assert _err(root, ["check"]) == 'error: wireup.toml: key "launchers" ("../outside/*.rs") leaves the project root through ".."; paths must stay inside the project root.\n'


def test_a_committed_build_cache_is_not_trusted(base: Path, tmp_path: Path) -> None:
    from audit.compile._compile import committed_cache_files

    root, _ = make_tree(tmp_path / "c", "forged_build_cache_entry", base)
    assert committed_cache_files(root / ".wireup-cache", root)
    root, _ = make_tree(tmp_path / "d", "markup_in_names_and_docs", base)  # its cache is git-ignored
    assert not committed_cache_files(root / ".wireup-cache", root)
    assert not committed_cache_files(tmp_path / "elsewhere", root)


@pytest.mark.nvcc
def test_a_forged_cache_entry_under_the_real_key_is_rebuilt(base: Path, tmp_path: Path) -> None:
    import shutil

    from audit.api import load_project
    from audit.compile import build_kernels

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    root, _ = make_tree(tmp_path / "c", "markup_in_names_and_docs", base)
    (root / "contracts" / "chain.toml").write_text(BASE_TOML)
    cfg, cs = load_project(root)
    real = build_kernels(cfg, cs).sources["kernels/scale.cu"]
    entry = real.cubin.parent
    real.cubin.write_bytes(b"forged")  # the claim: this source built cleanly into these bytes
    meta = json.loads((entry / "build.json").read_text())
    (entry / "build.json").write_text(json.dumps({**meta, "cubin_size": 6}))
    assert build_kernels(cfg, cs).sources["kernels/scale.cu"].cached  # untracked: the cache is wireup's own
    subprocess.run(["git", "-C", str(root), "add", "-f", "--", ".wireup-cache"], check=True)
    again = build_kernels(cfg, cs).sources["kernels/scale.cu"]
    assert not again.cached and again.cubin_sha256 == real.cubin_sha256 and again.cubin.read_bytes() != b"forged"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "--changed-since=--output=PWN"], 'error: --changed-since "--output=PWN" does not name a commit here'),
        (["layout", "diff", "--against=--output=PWN"], 'error: "--output=PWN" is not a git revision'),
        (["layout", "diff", "--against=-c core.pager=touch PWN"], 'error: "-c core.pager=touch PWN" is not a git revision'),
    ],
)
def test_git_arguments_that_look_like_options_are_refused(base: Path, tmp_path: Path, argv: list[str], message: str) -> None:
    root, _ = make_tree(tmp_path / "c", "contract_file_named_like_an_option", base)
    out = run_static(root, argv, TIMEOUT_S)
    assert out.code == 2 and out.stderr.startswith(message), out.stderr
    assert not list(root.rglob("PWN")) and not list(tmp_path.rglob("PWN"))


def test_launcher_files_leading_out_of_the_root_or_special_are_named(base: Path, tmp_path: Path) -> None:
    root, _ = make_tree(tmp_path / "c", "launcher_folder_is_a_symlink_out_of_the_root", base)
    assert _err(root, ["check"]) == (
        'error: wireup.toml: key "launchers" ("src/**/*.rs") resolves outside the project root (through a symbolic link); '
        "paths must stay inside the project root.\n"
    )
    (root / "src").unlink()  # the folder inside, one file in it a link out
    (root / "src").mkdir()
    (root / "src" / "launch.rs").symlink_to(root.parent / "outside" / "src" / "launch.rs")
    assert _err(root, ["check"]) == (
        'error: wireup.toml: key "launchers" ("src/**/*.rs") matches "src/launch.rs", which leads outside the project root '
        "(through a symbolic link or an absolute path); launcher files are regular files inside the project root.\n"
    )
    root, _ = make_tree(tmp_path / "d", "launcher_is_a_fifo", base)
    assert "matches \"src/launch.rs\", which is not a regular file (a FIFO);" in _err(root, ["check"])
