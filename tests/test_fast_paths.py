"""Shortcuts taken for the check's latency give what the long way gives.

* Evidence records: the type test's fast path for strings and numbers accepts and refuses what the full
  test does.
* Contract files: read without resolving each path where the walk proves them plain; every other file
  (a link, a FIFO, a file too large) still goes the long way, with its message.
* The command line builds the parser of the command it runs only, and ``wireup check`` run as a process
  ends with ``os._exit`` after flushing: its output and exit code are those of the in-process run.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from audit import evidence, load
from audit.cli import COMMANDS, build_parser, main
from audit.errors import ContractError

REPO = Path(__file__).resolve().parents[1]


def _typed_reference(d: dict, types) -> dict:
    """The type test as it was before the fast path (kept here as the specification)."""
    for key, value in d.items():
        want = types.get(key)
        if want is None:
            raise TypeError(f'unknown field "{key}"')
        if not isinstance(value, want) or isinstance(value, bool):
            raise TypeError(f'field "{key}" has the wrong type')
        if isinstance(value, float) and value != value:
            raise ValueError(f'field "{key}" is NaN')
        if isinstance(value, int) and abs(value) > 2**63:
            raise ValueError(f'field "{key}" is out of range')
        if isinstance(value, list) and key not in evidence._LISTS_OF_OBJECTS and not all(isinstance(x, str) for x in value):
            raise TypeError(f'field "{key}" is a list of strings')
        if isinstance(value, list) and key in ("cases", "tails") and not all(isinstance(x, dict) for x in value):
            raise TypeError(f'field "{key}" is a list of objects')
        if isinstance(value, dict) and key != "device" and not all(isinstance(x, str) for x in value.values()):
            raise TypeError(f'field "{key}" maps strings to strings')
        if key == "device" and not all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in value.values()):
            raise TypeError('field "device" maps strings to strings or numbers')
    return d


VALUES = ["x", "", 0, 7, -(2**64), 2**63, 1.5, -0.0, math.inf, -math.inf, math.nan, None, True, False, [], ["a"], [1], [{}], {}, {"a": "b"}, {"a": 1}, {"a": True}]


def _outcome(fn, d, types):
    try:
        fn(dict(d), types)
        return "ok"
    except (TypeError, ValueError) as exc:
        return type(exc).__name__


@pytest.mark.parametrize("types", ["check", "record"])
def test_the_evidence_type_test_accepts_and_refuses_what_the_full_test_does(types: str):
    table = evidence._CHECK_TYPES if types == "check" else evidence._RECORD_TYPES
    rng = random.Random(14)
    keys = [*table, "unknown"]
    cases = [{k: v} for k in keys for v in VALUES]
    cases += [{k: rng.choice(VALUES) for k in rng.sample(keys, 3)} for _ in range(500)]
    for d in cases:
        assert _outcome(evidence._typed, d, table) == _outcome(_typed_reference, d, table), d


def _loaded(folder: Path, root: Path):
    try:
        cs = load.load_contracts(folder, root)
    except ContractError as exc:
        return [p.render() for p in exc.problems]
    return repr((cs.files, cs.kernels, cs.buffers)), [(k.loc.file, k.loc.line) for k in cs.kernels]


def test_plain_contract_files_read_the_fast_way_load_as_the_long_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fast = _loaded(REPO / "contracts", REPO)
    monkeypatch.setattr(load, "_read_plain", lambda path, limit: None)
    assert _loaded(REPO / "contracts", REPO) == fast


@pytest.mark.parametrize("odd", ["a link out of the root", "a link inside", "a FIFO", "too large", "a linked folder"])
def test_odd_contract_files_go_the_long_way_with_their_message(odd: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "p"
    (root / "contracts" / "sub").mkdir(parents=True)
    (root / "contracts" / "a.toml").write_text('[dims]\nB = { min = 1, max = 8 }\n')
    outside = tmp_path / "outside.toml"
    outside.write_text('[dims]\nC = 4\n')
    odd_path = root / "contracts" / "sub" / "b.toml"
    if odd == "a link out of the root":
        odd_path.symlink_to(outside)
    elif odd == "a link inside":
        (root / "c.toml").write_text('[dims]\nC = 4\n')
        odd_path.symlink_to(root / "c.toml")
    elif odd == "a FIFO":
        os.mkfifo(odd_path)
    elif odd == "too large":
        odd_path.write_text('[dims]\nC = 4\n')
        monkeypatch.setattr("audit.untrusted.CONTRACT_LIMIT", 8)
    else:
        (tmp_path / "linked").mkdir()
        (tmp_path / "linked" / "b.toml").write_text('[dims]\nC = 4\n')
        (root / "contracts" / "sub").rmdir()
        (root / "contracts" / "sub").symlink_to(tmp_path / "linked")
    fast = _loaded(root / "contracts", root)
    monkeypatch.setattr(load, "_read_plain", lambda path, limit: None)
    assert _loaded(root / "contracts", root) == fast


def _help(parser, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    return capsys.readouterr().out


def test_the_parser_of_one_command_parses_it_as_the_full_parser_does(capsys: pytest.CaptureFixture[str]):
    argv = ["check", "--root", "x", "--select", "schema", "--format", "json"]
    assert vars(build_parser("check").parse_args(argv)) == vars(build_parser().parse_args(argv))
    for name in COMMANDS:
        assert _help(build_parser(name), [name, "--help"], capsys) == _help(build_parser(), [name, "--help"], capsys)


def test_an_unknown_command_lists_every_command(capsys: pytest.CaptureFixture[str]):
    assert main(["bogus"]) == 2
    err = capsys.readouterr().err
    assert all(f"'{name}'" in err for name in COMMANDS)


def test_check_as_a_process_prints_and_exits_as_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    root = tmp_path / "p"
    sys.path.insert(0, str(REPO / "benchmarks"))
    from synth_contracts import write_project

    write_project(20, root)
    f = root / "contracts" / "modules" / "m00000.toml"
    f.write_text(f.read_text().replace('dtype = "f32"', 'dtype = "f16"', 1))  # findings: exit 1
    args = ["check", "--root", str(root), "--format", "sarif", "--select", "schema,wiring"]
    rc = main(args)
    expected = capsys.readouterr().out
    env = {k: v for k, v in os.environ.items() if k != "WIREUP_DEBUG"}
    for command in ([sys.executable, "-m", "audit"], [str(Path(sys.executable).parent / "wireup")]):
        if not Path(command[0]).exists():
            continue
        out = subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=300)
        assert (out.returncode, out.stdout) == (rc, expected) and rc == 1
        written = tmp_path / "out.sarif"
        out = subprocess.run([*command, *args, "--output", str(written)], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 1 and written.read_text() == expected


def test_check_under_a_profiler_exits_the_usual_way(tmp_path: Path):
    """cProfile (and coverage) write their results at exit: the fast exit is not taken under them."""
    prof = tmp_path / "check.prof"
    out = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "audit", "check", "--select", "schema"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert prof.stat().st_size > 0


def test_a_check_walks_each_include_closure_once(monkeypatch: pytest.MonkeyPatch):
    from audit import hashing
    from audit.api import run_check

    walks = []
    real = hashing._include_closure
    monkeypatch.setattr(hashing, "_include_closure", lambda source, dirs: walks.append((source, tuple(dirs))) or real(source, dirs))
    first = run_check(REPO).result
    assert walks and len(walks) == len(set(walks))
    monkeypatch.undo()
    assert run_check(REPO).result == first


def test_include_closures_are_memoized_inside_the_block_only(tmp_path: Path):
    from audit.hashing import closures_memoized, include_closure

    (tmp_path / "a.cu").write_text('#include "b.cuh"\n')
    (tmp_path / "b.cuh").write_text("\n")
    (tmp_path / "c.cuh").write_text("\n")
    names = lambda: [p.name for p in include_closure(tmp_path / "a.cu", [tmp_path])]  # noqa: E731
    with closures_memoized():
        assert names() == ["a.cu", "b.cuh"]
        (tmp_path / "b.cuh").write_text('#include "c.cuh"\n')
        assert names() == ["a.cu", "b.cuh"]  # the check reads the project as of its start
        include_closure(tmp_path / "a.cu", [tmp_path]).append(tmp_path / "changed by a caller")
        assert names() == ["a.cu", "b.cuh"]
    assert names() == ["a.cu", "b.cuh", "c.cuh"]
