"""``_tomlpos.locate_lines``: the line of every TOML key path, checked against ``tomllib`` on generated documents.

The generator writes random data in every TOML style the contracts use or could use (tables, arrays of
tables, sub-tables of their elements, dotted keys, inline tables, multi-line arrays, the four string forms,
quoted keys with escapes, comments) and records on which line it wrote each key; the scanner must find
exactly ``tomllib``'s key paths, each on that line.
"""

from __future__ import annotations

import signal
import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit._tomlpos import line_of, locate_lines

FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None)


def tomllib_paths(value: object, prefix: tuple = ()) -> set[tuple]:
    out: set[tuple] = set()
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, x in items:
        out.add(prefix + (k,))
        out |= tomllib_paths(x, prefix + (k,))
    return out


# --- a TOML writer that remembers where it put each key ---------------------------------------------------

_key_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_bare_key = st.from_regex(r"[A-Za-z0-9_-]{1,6}", fullmatch=True)
_keys = st.one_of(_bare_key, _bare_key, _key_text)
_scalars = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
)


def _values(depth: int) -> st.SearchStrategy:
    if depth == 0:
        return _scalars
    sub = _values(depth - 1)
    return st.one_of(
        _scalars,
        st.lists(sub, max_size=3),
        st.dictionaries(_keys, sub, max_size=3),
        st.lists(st.dictionaries(_keys, sub, min_size=1, max_size=3), min_size=1, max_size=3),
    )


documents = st.dictionaries(_keys, _values(3), max_size=5)


class Writer:
    """Renders a document, drawing style choices from hypothesis and recording each path's line."""

    def __init__(self, draw):
        self.draw = draw
        self.lines: list[str] = []
        self.expect: dict[tuple, int] = {}

    @property
    def line(self) -> int:  # the number the next line written gets
        return len(self.lines) + 1

    def note(self, path: tuple, line: int, overwrite: bool = True) -> None:
        for end in range(1, len(path)):
            self.expect.setdefault(path[:end], line)
        if overwrite:
            self.expect[path] = line
        else:
            self.expect.setdefault(path, line)

    def comment(self) -> str:
        return self.draw(st.sampled_from(["", "", " # note", "  #x = 1 [a] \"q"]))

    def key(self, k: str) -> str:
        if all(c.isascii() and (c.isalnum() or c in "_-") for c in k) and k and self.draw(st.booleans()):
            return k
        if "'" not in k and "\n" not in k and all(c >= " " and c != "\x7f" or c == "\t" for c in k) and self.draw(st.booleans()):
            return f"'{k}'"
        return self.basic(k, unicode_escapes=True)

    def basic(self, s: str, unicode_escapes: bool = False, raw_newlines: bool = False) -> str:
        out = []
        for i, c in enumerate(s):
            if c in '"\\':
                out.append("\\" + c)
            elif c == "\n":
                out.append("\n" if raw_newlines and i > 0 else "\\n")
            elif c < " " or c == "\x7f" or (unicode_escapes and not c.isascii() and self.draw(st.booleans())):
                out.append(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
            else:
                out.append(c)
        return '"' + "".join(out) + '"'

    def string(self, s: str, nested: bool) -> str:
        # a multi-line string only as a whole value: inside an inline table or array it would shift the
        # lines of the keys after it on the same logical line, which this writer does not track
        styles = ["basic", "literal"] if nested else ["basic", "literal", "ml_basic", "ml_literal"]
        style = self.draw(st.sampled_from(styles))
        plain = all(c >= " " and c != "\x7f" or c == "\t" for c in s)
        if style == "literal" and plain and "'" not in s:
            return f"'{s}'"
        if style == "ml_literal" and all(c >= " " and c != "\x7f" or c in "\t\n" for c in s) and "'''" not in s and not s.endswith("'") and "\r" not in s:
            trimmed = s.startswith("\n") or self.draw(st.booleans())  # a newline right after the quotes is dropped
            return "'''" + ("\n" if trimmed else "") + s + "'''"
        if style == "ml_basic":
            # real newlines, except a first one (TOML drops a newline right after the quotes)
            return '"""' + self.basic(s, raw_newlines=True)[1:-1] + '"""'
        return self.basic(s)

    def scalar(self, v: object, nested: bool) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return repr(v)
        return self.string(v, nested)

    def inline(self, v: object, path: tuple, nested: bool = False) -> str:
        """``v`` as an inline value starting on the current line; records the paths inside it."""
        if isinstance(v, dict):
            parts = []
            for k, x in v.items():
                self.note(path + (k,), self.line)
                parts.append(f"{self.key(k)} = {self.inline(x, path + (k,), True)}")
            return "{ " + ", ".join(parts) + " }" if parts else "{}"
        if isinstance(v, list):
            if v and not nested and self.draw(st.booleans()):  # one element per line
                self.lines.append("")  # placeholder for the opening line, filled by the caller
                opener = len(self.lines) - 1
                for i, x in enumerate(v):
                    self.note(path + (i,), self.line)
                    self.lines.append("  " + self.inline(x, path + (i,), True) + "," + self.comment())
                return ("\x00MULTI", opener)  # type: ignore[return-value]
            parts = []
            for i, x in enumerate(v):
                self.note(path + (i,), self.line)
                parts.append(self.inline(x, path + (i,), True))
            return "[" + ", ".join(parts) + "]"
        return self.scalar(v, nested)

    def assign(self, key_text: str, v: object, path: tuple) -> None:
        line = self.line
        self.note(path, line)
        value = self.inline(v, path)
        if isinstance(value, tuple):  # a multi-line array: its opener is the placeholder line
            _, opener = value
            self.lines[opener] = f"{key_text} = ["
            self.lines.append("]" + self.comment())
        else:
            text = f"{key_text} = {value}{self.comment()}"
            self.lines.extend(text.split("\n"))  # a multi-line string spans lines

    def body(self, table: dict, path: tuple, header: str) -> None:
        """Plain keys of ``table`` (some dicts as dotted keys), then its sub-tables as sections."""
        sections = []
        for k, v in table.items():
            is_aot = isinstance(v, list) and v and all(isinstance(x, dict) for x in v)
            if (isinstance(v, dict) or is_aot) and self.draw(st.booleans()):
                sections.append((k, v))
            elif isinstance(v, dict) and v and all(not isinstance(x, (dict, list)) for x in v.values()) and self.draw(st.booleans()):
                for k2, x in v.items():  # dotted keys
                    self.assign(f"{self.key(k)}.{self.key(k2)}", x, path + (k, k2))
            else:
                self.assign(self.key(k), v, path + (k,))
        for k, v in sections:
            name = f"{header}.{self.key(k)}" if header else self.key(k)
            if isinstance(v, dict):
                if self.draw(st.booleans()):
                    self.lines.append("")
                self.note(path + (k,), self.line, overwrite=False)
                self.lines.append(f"[{name}]" + self.comment())
                self.body(v, path + (k,), name)
            else:
                for i, element in enumerate(v):
                    self.note(path + (k,), self.line, overwrite=False)
                    self.note(path + (k, i), self.line)
                    self.lines.append(f"[[{name}]]" + self.comment())
                    self.body(element, path + (k, i), name)

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@st.composite
def rendered(draw) -> tuple[str, dict, dict]:
    doc = draw(documents)
    w = Writer(draw)
    w.body(doc, (), "")
    return w.text, doc, w.expect


@FUZZ
@given(rendered())
def test_locate_lines_agrees_with_tomllib(case: tuple[str, dict, dict]) -> None:
    text, doc, expect = case
    parsed = tomllib.loads(text)
    assert parsed == doc or doc != doc  # the writer is faithful (floats such as -0.0 compare equal)
    lines = locate_lines(text)
    assert set(lines) == tomllib_paths(parsed)
    assert lines == expect


# --- unit cases --------------------------------------------------------------------------------------------


def test_doc_example_and_nearest_ancestor() -> None:
    lines = locate_lines('[a]\nb = [1,\n  {c = 2}]\n')
    assert lines[("a", "b", 1, "c")] == 3
    assert line_of(lines, ("a", "b", 1, "c", "missing", 4)) == 3
    assert line_of(lines, ("nope",)) is None


def test_escaped_quoted_keys_are_decoded() -> None:
    text = '"a\\"b" = 1\n"\\u00e9t\\u00e9" = 2\n\'lit\\eral\' = 3\n[t."x.y"]\nz = 4\n'
    assert set(tomllib.loads(text)) == {'a"b', "été", "lit\\eral", "t"}
    lines = locate_lines(text)
    assert (lines[('a"b',)], lines[("été",)], lines[("lit\\eral",)], lines[("t", "x.y", "z")]) == (1, 2, 3, 5)


def test_arrays_of_tables_and_their_sub_tables() -> None:
    text = "[[k]]\nn = 1\n[k.v]\nr = 1\n\n[[k]]\nn = 2\n[[k.p]]\nx = 1\n[[k.p]]\nx = 2\n"
    lines = locate_lines(text)
    assert lines[("k", 0, "v", "r")] == 4
    assert lines[("k", 1, "n")] == 7
    assert (lines[("k", 1, "p", 0, "x")], lines[("k", 1, "p", 1, "x")]) == (9, 11)
    assert set(lines) == tomllib_paths(tomllib.loads(text))


def test_multi_line_strings_move_the_line_count() -> None:
    text = 'a = """one\ntwo \\""" three\n"""\nb = \'\'\'x\ny\'\'\'\nc = 1 # d = 2\n'
    lines = locate_lines(text)
    assert (lines[("a",)], lines[("b",)], lines[("c",)]) == (1, 4, 6)
    assert ("d",) not in lines


def test_a_byte_order_mark_moves_nothing() -> None:
    assert locate_lines("\ufeff[dims]\nB = 1\n") == {("dims",): 1, ("dims", "B"): 2}


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM to bound the run")
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text(st.sampled_from("[]{}=,.\"'#\n\\ ab1\ufeff"), max_size=30))
def test_scanning_any_text_terminates(text: str) -> None:
    # the scanner only runs on text tomllib accepted, but it must never spin on anything else
    def stuck(*_):
        raise AssertionError(f"locate_lines does not terminate on {text!r}")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        locate_lines(text)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
