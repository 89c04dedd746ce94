"""Static commands are safe on untrusted changes: they never import or execute the checked repository's code.

A pre-merge job runs `wireup check`, `wireup layout ...`, `wireup graph` and `wireup report --check` on pull
requests from anyone. The project below names a reference module whose import writes a marker file; none
of those commands may create it, while `wireup verify` (which must import references) does — the
control that shows the marker works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit.cli import main
from test_docs_example import example_toml

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "data" / "docs_example"

SIDE_EFFECT = """
from pathlib import Path as _P
_P(__file__).with_name("IMPORTED").write_text("the reference module was imported")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root)
    (root / "contracts").mkdir()
    (root / "contracts" / "example.toml").write_text(example_toml())
    (root / "refs.py").write_text((root / "refs.py").read_text() + SIDE_EFFECT)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"], cwd=root, check=True)
    return root


def _wireup(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "audit", *args, "--root", str(root)] if args[0] != "layout" else
                          [sys.executable, "-m", "audit", args[0], "--root", str(root), *args[1:]],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ("check",),
        ("check", "--format", "sarif"),
        ("graph",),
        ("graph", "--format", "dot"),
        ("layout", "fingerprint"),
        ("layout", "diff", "--against", "HEAD"),
        ("report", "--check"),
    ],
    ids=lambda a: " ".join(a),
)
def test_static_commands_never_import_the_projects_references(project: Path, args: tuple[str, ...]) -> None:
    out = _wireup(project, *args)
    assert "Traceback" not in out.stderr, out.stderr
    assert not (project / "IMPORTED").exists(), f"wireup {' '.join(args)} imported the project's reference module"


def test_verify_does_import_them_which_shows_the_marker_works(project: Path) -> None:
    out = _wireup(project, "verify", "--emulated", "--kernel", "scale_rows", "--sizes", "37", "--no-evidence")
    assert (project / "IMPORTED").exists(), out.stdout + out.stderr


@pytest.mark.parametrize(
    ("setting", "why"),
    [
        ('contracts = "/etc"', "is an absolute path"),
        ('contracts = "../outside"', 'leaves the project root through ".."'),
        ('templates = "../../templates"', 'leaves the project root through ".."'),
    ],
)
def test_config_paths_must_stay_inside_the_root(tmp_path: Path, capsys, setting: str, why: str) -> None:
    (tmp_path / "wireup.toml").write_text(setting + "\n")
    assert main(["check", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    key = setting.split(" ")[0]
    assert f'wireup.toml: key "{key}"' in err and why in err and "Traceback" not in err


def test_a_symlink_that_escapes_the_root_is_refused(tmp_path: Path, capsys) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "proj"
    root.mkdir()
    (root / "contracts").symlink_to(outside)
    (root / "wireup.toml").write_text('contracts = "contracts"\n')
    assert main(["check", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert 'wireup.toml: key "contracts" ("contracts") resolves outside the project root (through a symbolic link)' in err
