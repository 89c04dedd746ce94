"""Dim expressions (:mod:`audit.dims`) and shape comparison (:mod:`audit.shapes`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.dims import MAX_DEPTH, Expr, ExprError, format_shape, parse_expr, probe_points
from audit.load import load_contracts
from audit.shapes import bind_local_dims, probe_envs, resolve_fixed_dims, shape_key

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# random expressions as (text, python source evaluating the same thing)
_leaf = st.one_of(
    st.integers(0, 10**6).map(lambda n: (str(n), str(n))),
    st.sampled_from(["B", "N", "SH2"]).map(lambda n: (n, f"env[{n!r}]")),
)


def _grow(children: st.SearchStrategy) -> st.SearchStrategy:
    binop = st.tuples(children, st.sampled_from(["+", "-", "*", "//", "%"]), children).map(
        lambda t: (f"({t[0][0]} {t[1]} {t[2][0]})", f"({t[0][1]} {t[1]} {t[2][1]})")
    )
    call = st.tuples(st.sampled_from(["ceil_div", "min", "max"]), children, children).map(
        lambda t: (f"{t[0]}({t[1][0]}, {t[2][0]})", f"{t[0]}({t[1][1]}, {t[2][1]})")
    )
    neg = children.map(lambda c: (f"-{c[0]}", f"(-{c[1]})"))
    return st.one_of(binop, call, neg)


expressions = st.recursive(_leaf, _grow, max_leaves=12)
envs = st.fixed_dictionaries({"B": st.integers(1, 65536), "N": st.integers(-5, 300), "SH2": st.integers(0, 512)})


@FUZZ
@given(expressions, envs)
def test_evaluation_matches_python(expr: tuple[str, str], env: dict[str, int]) -> None:
    text, source = expr
    e = parse_expr(text)
    assert e.names <= {"B", "N", "SH2"} and e.text == text
    try:
        want = eval(source, {"ceil_div": ceil_div, "min": min, "max": max, "env": env})  # noqa: S307
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError):
            e.evaluate(env)
        return
    assert e.evaluate(env) == want


@FUZZ
@given(st.text(max_size=40))
def test_any_text_parses_or_gives_an_expr_error(text: str) -> None:
    try:
        e = parse_expr(text)
    except ExprError as exc:
        message = str(exc)
        assert message and "\n" not in message and "\x00" not in message
        return
    assert isinstance(e, Expr)


@pytest.mark.parametrize(
    ("text", "names", "slots", "value"),
    [
        ("ceil_div(B, 256) * 2", {"B"}, set(), 4),
        ("min(ceil_div(B, 64), 256)", {"B"}, set(), 5),
        ("slot(X) + B", {"B"}, {"X"}, 307),
        ("  -B + 1  ", {"B"}, set(), -299),
        ("+B", {"B"}, set(), 300),
        (7, set(), set(), 7),
        (-3, set(), set(), -3),
    ],
)
def test_parse_and_evaluate(text: str | int, names: set, slots: set, value: int) -> None:
    e = parse_expr(text)
    assert (set(e.names), set(e.slots)) == (names, slots)
    assert e.evaluate({"B": 300}, {"X": 7}) == value


def test_integer_and_string_literals_are_one_expression_but_negation_is_not() -> None:
    assert parse_expr(256) == parse_expr("256") == parse_expr(" 256 ")
    assert parse_expr(-3) != parse_expr("-3")  # ("int", -3) versus ("neg", ("int", 3)); the serializer keeps -3 an int
    assert parse_expr(5).constant == 5 and parse_expr("B").constant is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("B +* 2", '"B +* 2" is not a valid dim expression'),
        ("foo(B)", '"foo(B)" calls "foo"; the functions are "ceil_div", "min", "max" and "slot"'),
        ("min(B)", '"min(B)" calls "min" with 1 argument(s)'),
        ("slot(1)", '"slot(1)": slot() takes the name of an ISV slot'),
        ("B.x", '"B.x" is not a dim expression (integers, dim names, + - * // %, ceil_div, min, max)'),
        ("True", '"True" uses True; dim expressions take integers only'),
        ("", "expected a dim expression, found an empty string"),
        ("B\n+ 1", '"B\\x0a+ 1" is not a valid dim expression'),
        ("-" * (MAX_DEPTH + 2) + "B", f'"{"-" * (MAX_DEPTH + 2)}B" is nested more than {MAX_DEPTH} levels deep; dim expressions are short'),
        ("-" * 100 + "B", f'"{"-" * 77}..." is nested more than {MAX_DEPTH} levels deep; dim expressions are short'),
        ("+".join(["1"] * 5000), f'"{"1+" * 38}1..." is too long or too deeply nested to be a dim expression'),
    ],
)
def test_rejected_expressions(text: str, message: str) -> None:
    with pytest.raises(ExprError) as info:
        parse_expr(text)
    assert str(info.value) == message


def test_division_by_zero_is_a_zero_division_error() -> None:
    for text in ("B // 0", "B % 0", "ceil_div(B, N)"):
        with pytest.raises(ZeroDivisionError):
            parse_expr(text).evaluate({"B": 4, "N": 0})


@FUZZ
@given(st.dictionaries(st.sampled_from("BNKT"), st.tuples(st.integers(-4, 10**6), st.integers(0, 10**6)), max_size=4))
def test_probe_points_stay_in_range_and_hit_both_ends(ranges: dict[str, tuple[int, int]]) -> None:
    ranges = {n: (lo, max(lo, hi)) for n, (lo, hi) in ranges.items()}
    points = probe_points(ranges)
    assert points and all(set(p) == set(ranges) for p in points)
    for n, (lo, hi) in ranges.items():
        values = {p[n] for p in points}
        assert all(lo <= v <= hi for v in values) and {lo, hi} <= values


def test_probe_points_tell_swapped_dims_apart() -> None:
    points = probe_points({"M": (1, 100), "N": (1, 100)})
    assert any(p["M"] != p["N"] for p in points)


def load(text: str):
    return load_contracts(Path("contracts"), Path("."), texts={"contracts/c.toml": text})


def test_derived_dims_resolve_in_dependency_order_and_report_problems() -> None:
    cs = load('[dims]\nB = { min = 1, max = 8 }\nA = "C * 2"\nC = "E + 1"\nE = 4\nR = "B * E"\nX = "Y"\nY = "X"\nU = "Q + 1"\nZ = "E // (E - 4)"\n')
    env, problems = resolve_fixed_dims(cs)
    assert (env["A"], env["C"], env["E"]) == (10, 5, 4)
    assert "R" not in env  # depends on the runtime dim B
    assert dict(problems) == {
        "X": 'Derived dim "X" depends on itself: X -> Y -> X.',
        "U": 'Derived dim "U" = "Q + 1" uses "Q", which is not a declared dim.',
        "Z": 'Derived dim "Z" = "E // (E - 4)" cannot be evaluated: division by zero in a dim expression.',
    }
    assert all(e["R"] == e["B"] * 4 for e in probe_envs(cs))


def test_shapes_compare_by_value_at_every_probe() -> None:
    cs = load('[dims]\nB = { min = 1, max = 4096 }\nSH2 = 256\nW = "SH2 + 6"\n')
    envs = probe_envs(cs)
    same = [parse_expr("B"), parse_expr("W")]
    assert shape_key(same, envs) == shape_key([parse_expr("B"), parse_expr(262)], envs)
    assert shape_key(same, envs) != shape_key([parse_expr("B"), parse_expr("SH2")], envs)
    assert shape_key([parse_expr("B"), parse_expr("Q")], envs) is None
    assert format_shape(tuple(same)) == "[B, W]"


def test_local_dims_bind_from_parameters_and_conflicts_are_sentences() -> None:
    envs = [{"B": 2, "H": 3, "D": 5}]
    n = parse_expr("N")
    pairs = [("partial", (parse_expr("B"), n), (parse_expr("B"), parse_expr("H * D"))), ("grad", (n,), (parse_expr("H"),))]
    out, problems = bind_local_dims(["N"], pairs, {}, envs)
    assert out[0]["N"] == 15  # the first binding wins, and the second is a conflict
    assert problems == ['dim "N" is bound to 15 by parameter "partial" (dim 1, "H * D") but to 3 by parameter "grad" (dim 0, "H")']
    out, problems = bind_local_dims(["N"], pairs[:1], {"N": parse_expr("H")}, envs)
    assert out[0]["N"] == 3
    assert problems == ['dim "N" is bound to 3 by the launch\'s dims (N = "H") but to 15 by parameter "partial" (dim 1, "H * D")']
