"""A check that has to compile says so on stderr, once, before nvcc starts (a cold build takes seconds per
source); a check whose build is cached prints nothing there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.cli import main
from audit.compile import facts

DATA = Path(__file__).resolve().parent / "data" / "build" / "project"


class _Ctx:
    def __init__(self) -> None:
        from audit.config import Config

        self.config, self.cs, self.options = Config(root=Path(".")), None, {}


@pytest.mark.parametrize("count, line", [
    (1, "wireup: compiling 1 kernel source with nvcc (not in the build cache yet); this takes a few seconds each.\n"),
    (11, "wireup: compiling 11 kernel sources with nvcc (not in the build cache yet); this takes a few seconds each.\n"),
])  # fmt: skip
def test_a_cold_build_is_announced_once_on_stderr(monkeypatch, capsys, count, line):
    def fake_build(cfg, cs, source_overrides=None, on_compile=None):
        on_compile(count)
        return "built"

    monkeypatch.setattr(facts, "build_kernels", fake_build)
    assert facts.build_facts(_Ctx()) == "built"
    out, err = capsys.readouterr()
    assert (out, err) == ("", line)


def test_a_cached_build_prints_nothing(monkeypatch, capsys):
    monkeypatch.setattr(facts, "build_kernels", lambda cfg, cs, source_overrides=None, on_compile=None: "cached")
    assert facts.build_facts(_Ctx()) == "cached"
    assert capsys.readouterr() == ("", "")


@pytest.mark.nvcc
def test_wireup_check_announces_a_cold_build_and_not_a_warm_one(tmp_path, capsys, monkeypatch):
    project = tmp_path / "project"
    shutil.copytree(DATA, project, ignore=shutil.ignore_patterns(".wireup-cache", "__pycache__"))
    for cu in (project / "kernels").glob("*.cu"):
        if cu.name != "quads_ok.cu":
            cu.unlink()  # one small source to compile; the others' kernels are reported missing
    monkeypatch.setenv("WIREUP_CACHE", str(tmp_path / "cache"))  # a cache outside the root: the user's choice
    args = ["check", "--root", str(project), "--select", "COMPILE_ERROR", "--format", "json"]
    main(args)
    cold = capsys.readouterr()
    assert cold.err.count("wireup: compiling") == 1
    assert "wireup: compiling 1 kernel source with nvcc" in cold.err
    assert cold.out.lstrip().startswith("{")  # stdout keeps the JSON alone
    main(args)
    assert "wireup: compiling" not in capsys.readouterr().err
