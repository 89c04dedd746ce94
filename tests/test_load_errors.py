"""The bad-input corpus: ``tests/data/bad_input/<case>/`` holds a project root whose contracts are broken in
one way, and ``expected.txt`` the exact lines wireup prints for it.

A contract that cannot be turned into a model (syntax, types, unknown keys or enum values, expressions that
do not parse) is a :class:`~audit.errors.ContractError`: exit 2, one ``error:`` sentence per problem on
stderr naming file, line and key path where there is one, then a summary line. A model that loads but does
not compose (unknown names, duplicates, cycles, absurd dims) gives findings: exit 1, one line each on
stdout. Never a traceback. Most cases run in-process through :func:`audit.cli.main`; a few run
``python3 -m audit`` in a subprocess to prove it end to end.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit.cli import main
from audit.errors import ContractError
from audit.load import load_contracts

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "data" / "bad_input"
SELECT = "schema,wiring,isv,invariants"

# case -> (exit code, what the message must name: "line" and/or "key" where the input has them)
CASES: dict[str, tuple[int, tuple[str, ...]]] = {
    # load errors: exit 2
    "malformed_toml": (2, ("line",)),
    "duplicate_toml_key": (2, ("line",)),
    "string_for_int": (2, ("line", "key")),
    "int_for_list": (2, ("line", "key")),
    "string_for_bool": (2, ("line", "key")),
    "table_for_array": (2, ("line", "key")),
    "unknown_key_typo": (2, ("line", "key")),
    "unknown_dtype": (2, ("line", "key")),
    "unknown_role": (2, ("line", "key")),
    "unknown_stage": (2, ("line", "key")),
    "unknown_buffer_kind": (2, ("line", "key")),
    "unknown_slot_role": (2, ("line", "key")),
    "unknown_top_level_table": (2, ("line", "key")),
    "bad_expression_syntax": (2, ("line", "key")),
    "bad_expression_call": (2, ("line", "key")),
    "bad_expression_float": (2, ("line", "key")),
    "expression_too_long": (2, ("line", "key")),
    "slot_in_shape": (2, ("line", "key")),
    "second_isv_table": (2, ("line", "key")),
    "nested_too_deep": (2, ()),
    "non_utf8": (2, ("line",)),
    "empty_contracts": (2, ()),
    "missing_contracts": (2, ()),
    # findings: exit 1
    "unknown_dim": (1, ("line",)),
    "unknown_buffer": (1, ("line",)),
    "unknown_slot": (1, ("line",)),
    "unknown_kernel": (1, ("line",)),
    "unknown_schedule": (1, ("line",)),
    "unknown_invariant_node": (1, ("line",)),
    "duplicate_names": (1, ("line",)),
    "schedule_cycle": (1, ("line",)),
    "absurd_dims": (1, ("line",)),
    "absurd_isv": (1, ("line",)),
    "missing_source": (1, ("line",)),
}
SUBPROCESS = ("malformed_toml", "non_utf8", "missing_contracts", "unknown_key_typo", "unknown_dim")

# error: <file>[:<line>]:[ <key path>:] <one sentence ending in a period>
ERROR_LINE = re.compile(r"^error: (?P<file>contracts(?:/[\w./-]+\.toml)?)(?::(?P<line>\d+))?:(?: (?P<key>[\w\[\].]+):)? (?P<msg>\S.*\.)$")
FINDING_LINE = re.compile(r"^(?P<file>contracts/[\w./-]+\.toml):(?P<line>\d+): (?P<rule>[A-Z_]+) (?P<msg>\S.*\.)$")
SUMMARY = re.compile(r"^wireup: \d+ contract problems?; nothing was checked\.$")


def expected(case: str) -> list[str]:
    return (CORPUS / case / "expected.txt").read_text(encoding="utf-8").splitlines()


def assert_output(case: str, rc: int, out: str, err: str) -> None:
    code, names = CASES[case]
    assert "Traceback" not in out + err
    assert rc == code, out + err
    if code == 2:
        assert out == ""
        lines = err.splitlines()
        assert lines == expected(case)
        assert SUMMARY.match(lines[-1])
        for line in lines[:-1]:
            m = ERROR_LINE.match(line)
            assert m, line
            assert ("line" not in names) or m["line"], f"{case}: no line in {line!r}"
            assert ("key" not in names) or m["key"], f"{case}: no key path in {line!r}"
            assert not re.search(r"\.\s+[A-Z]", m["msg"]), f"{case}: more than one sentence in {line!r}"
    else:
        assert err == ""
        lines = out.splitlines()
        assert lines[-1].startswith("wireup check: ") and "error(s)" in lines[-1]
        assert lines[:-1] == expected(case)
        for line in lines[:-1]:
            assert FINDING_LINE.match(line), line


def test_every_case_is_listed() -> None:
    assert {p.name for p in CORPUS.iterdir() if p.is_dir()} == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_in_process(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    start = time.perf_counter()
    rc = main(["check", "--root", str(CORPUS / case), "--select", SELECT])
    out, err = capsys.readouterr()
    assert_output(case, rc, out, err)
    assert time.perf_counter() - start < 10, "absurd sizes must not be enumerated"


@pytest.mark.parametrize("case", SUBPROCESS)
def test_bad_input_end_to_end(case: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "audit", "check", "--root", str(CORPUS / case), "--select", SELECT],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert_output(case, proc.returncode, proc.stdout, proc.stderr)


def test_contract_error_lists_every_problem_with_its_location() -> None:
    with pytest.raises(ContractError) as info:
        load_contracts(CORPUS / "unknown_key_typo" / "contracts", CORPUS / "unknown_key_typo")
    problems = [(p.path, p.line, p.key) for p in info.value.problems]
    assert problems == [
        ("contracts/chain.toml", 26, "kernel[0].params[1].rol"),
        ("contracts/chain.toml", 26, "kernel[0].params[1]"),
    ]
    assert '(did you mean "role"?)' in info.value.problems[0].message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"B +* 2"', '"B +* 2" is not a valid dim expression.'),
        ('"foo(B)"', '"foo(B)" calls "foo"; the functions are "ceil_div", "min", "max" and "slot".'),
        ('"B ** 2"', '"B ** 2" is not a dim expression (integers, dim names, + - * // %, ceil_div, min, max).'),
        ('"B\\u0000"', '"B\\x00" contains a NUL character; it is not a valid dim expression.'),
        ('"2.5"', '"2.5" uses 2.5; dim expressions take integers only.'),
        ('""', "expected a dim expression, found an empty string."),
        ("true", "expected an integer or a dim expression string, found the boolean true."),
        ("2.5", "expected an integer or a dim expression string, found the number 2.5."),
        ('"slot(X)"', '"slot(X)" uses slot(), which only scalar values and launch arguments may use; expected a dim expression.'),
        ('"ceil_div(B)"', '"ceil_div(B)" calls "ceil_div" with 1 argument(s).'),
    ],
)
def test_bad_shape_expressions(value: str, message: str) -> None:
    text = f'[dims]\nB = {{ min = 1, max = 8 }}\n\n[[buffer]]\nname = "x"\ndtype = "f32"\nshape = ["B", {value}]\n'
    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/x.toml": text})
    (problem,) = info.value.problems
    assert (problem.path, problem.line, problem.key, problem.message) == ("contracts/x.toml", 7, "buffer[0].shape[1]", message)


def test_a_byte_order_mark_is_ignored_and_lines_stay_right() -> None:
    text = '\ufeff[dims]\nB = { min = 1, max = 8 }\n\n[[buffer]]\nname = "x"\ndtype = "f31"\nshape = ["B"]\n'
    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/x.toml": text})
    (problem,) = info.value.problems
    assert (problem.line, problem.key) == (6, "buffer[0].dtype")
    cs = load_contracts(Path("contracts"), Path("."), texts={"contracts/x.toml": text.replace("f31", "f32")})
    assert [b.name for b in cs.buffers] == ["x"] and cs.buffers[0].loc.line == 4
