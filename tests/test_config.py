"""Configuration: [tool.wireup] in pyproject.toml or wireup.toml; bad values are one-sentence errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.cli import main
from audit.config import load_config
from audit.errors import UsageError


def test_defaults_describe_this_repository(repo: Path) -> None:
    cfg = load_config(repo)
    assert cfg.source == "pyproject.toml [tool.wireup]"
    assert cfg.contracts_dir == repo / "contracts"
    assert cfg.include_dirs == ("kernels",)


def test_wireup_toml_top_level_keys(tmp_path: Path) -> None:
    (tmp_path / "wireup.toml").write_text('contracts = "gpu/contracts"\nlaunchers = ["crates/**/*.rs"]\n')
    cfg = load_config(tmp_path)
    assert cfg.contracts == "gpu/contracts"
    assert cfg.launchers == ("crates/**/*.rs",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("contract = 'x'\n", 'wireup.toml: unknown key "contract"; valid keys are "contracts"'),
        ("select = 'wiring'\n", 'wireup.toml: key "select" must be a list, found str'),
        ("tool = 5\n", 'wireup.toml: unknown key "tool"'),
        ("[tool]\nwireup = 5\n", "wireup.toml [tool.wireup]: [tool.wireup] must be a table of settings, found int 5."),
        ("contracts = [\n", "wireup.toml: not valid TOML"),
    ],
)
def test_bad_configuration_is_one_sentence(tmp_path: Path, capsys, text: str, message: str) -> None:
    (tmp_path / "wireup.toml").write_text(text)
    with pytest.raises(UsageError, match=None) as info:
        load_config(tmp_path)
    assert message in str(info.value)
    assert main(["check", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
