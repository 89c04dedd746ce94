"""Line numbers for TOML key paths.

``tomllib`` gives values but no positions. This scanner walks the same text once and records the line
on which every key (and every array element) starts, keyed by its path, e.g.
``("kernel", 2, "params", 4, "dtype") -> 57``. It only runs when a message needs a line (loading is
lazy about it), so clean runs never pay for it.

It understands the TOML that ``tomllib`` already accepted: tables, arrays of tables, dotted keys,
inline tables, nested arrays, all four string forms and comments.

>>> locate_lines('[a]\\nb = [1,\\n  {c = 2}]\\n')[("a", "b", 1, "c")]
3
"""

from __future__ import annotations

import re

Path = tuple[object, ...]

# The scanner's inner loops as regular expressions over the same characters (one C call per run of
# characters instead of one Python step per character); the hot methods keep the text, its length and
# the position in locals.
_WS = re.compile(r"(?:[ \t\r]+|#[^\n]*)*")
_WS_NL = re.compile(r"(?:[ \t\r\n]+|#[^\n]*)*")
_WS_START = frozenset(" \t\r#")
_WS_NL_START = frozenset(" \t\r\n#")
_BARE_RUN = re.compile(r"[A-Za-z0-9_-]*")
_SCALAR = re.compile(r"[^,\]}\n#]*")
_BASIC_BODY = re.compile(r'(?:[^"\\]+|\\[\s\S])*')


class _Scanner:
    def __init__(self, text: str):
        self.s = text.removeprefix("\ufeff")  # a byte order mark is not TOML (and moves no line)
        self.n = len(self.s)
        self.i = 0
        self.line = 1
        self.lines: dict[Path, int] = {}
        self.aot_count: dict[Path, int] = {}  # array-of-tables path -> number of elements so far

    # -- low level -------------------------------------------------------------------------------
    def peek(self) -> str:
        return self.s[self.i] if self.i < self.n else ""

    def advance(self, n: int = 1) -> None:
        if n == 1:
            if self.i < self.n and self.s[self.i] == "\n":
                self.line += 1
        else:
            self.line += self.s.count("\n", self.i, self.i + n)
        self.i += n

    def skip_ws(self, newlines: bool) -> None:
        i = self.i
        if i >= self.n:
            return
        s = self.s
        if newlines:
            if s[i] not in _WS_NL_START:
                return
            end = _WS_NL.match(s, i).end()
            self.line += s.count("\n", i, end)
        else:
            if s[i] not in _WS_START:
                return
            end = _WS.match(s, i).end()
        self.i = end

    def read_string(self) -> str:
        s = self.s
        if s.startswith('"""', self.i) or s.startswith("'''", self.i):
            q = s[self.i : self.i + 3]
            end = s.find(q, self.i + 3)
            while end != -1 and q == '"""' and _escaped(s, end):
                end = s.find(q, end + 1)
            end = len(s) - 3 if end == -1 else end
            # a closing run may be up to five quotes long
            while end + 3 < len(s) and s[end + 3] == q[0]:
                end += 1
            value = s[self.i + 3 : end]
            self.advance(end + 3 - self.i)
            return value
        q = s[self.i]
        if q == '"':
            j = _BASIC_BODY.match(s, self.i + 1).end()
            if j < len(s) and s[j] == "\\":  # a lone backslash ends the text: stepped over like an escape
                j += 2
        else:
            j = s.find(q, self.i + 1)
            if j == -1:
                j = len(s)
        value = s[self.i + 1 : j]
        self.advance(j + 1 - self.i)
        return value

    def read_key(self) -> list[str]:
        parts: list[str] = []
        s, n = self.s, self.n
        while True:
            self.skip_ws(False)
            c = s[self.i] if self.i < n else ""
            if c == '"':
                parts.append(_unescape(self.read_string()))
            elif c == "'":
                parts.append(self.read_string())
            else:
                j = _BARE_RUN.match(s, self.i).end() if self.i < n else self.i
                parts.append(s[self.i : j])
                self.i = j
            self.skip_ws(False)
            if self.i < n and s[self.i] == ".":
                self.i += 1
                continue
            return parts

    # -- values ------------------------------------------------------------------------------------
    def read_value(self, path: Path) -> None:
        lines = self.lines
        lines.setdefault(path, self.line)
        s, n = self.s, self.n
        c = s[self.i] if self.i < n else ""
        if c == "{":
            self.i += 1
            while True:
                self.skip_ws(True)
                c = s[self.i] if self.i < n else ""
                if c == "}":
                    self.i += 1
                    return
                if c == ",":
                    self.i += 1
                    continue
                if not c:
                    return
                start = self.i
                key_line = self.line
                key = self.read_key()
                self.skip_ws(False)
                if self.i < n and s[self.i] == "=":
                    self.i += 1
                self.skip_ws(False)
                sub = path + tuple(key)
                self._parents(sub, key_line)
                lines[sub] = key_line
                self.read_value(sub)
                if self.i == start:  # not TOML: make progress
                    self.advance()
        elif c == "[":
            self.i += 1
            index = 0
            while True:
                self.skip_ws(True)
                c = s[self.i] if self.i < n else ""
                if c == "]":
                    self.i += 1
                    return
                if c == ",":
                    self.i += 1
                    continue
                if not c:
                    return
                start = self.i
                sub = path + (index,)
                lines[sub] = self.line
                self.read_value(sub)
                index += 1
                if self.i == start:  # not TOML: make progress
                    self.advance()
        elif c == '"' or c == "'":
            self.read_string()
        elif c:
            self.i = _SCALAR.match(s, self.i).end()

    def _parents(self, path: Path, line: int) -> None:
        """Tables created implicitly by a dotted key or header (``[a.b]`` makes ``a``) start where first named."""
        for end in range(1, len(path)):
            self.lines.setdefault(path[:end], line)

    # -- document ----------------------------------------------------------------------------------
    def resolve(self, parts: list[str]) -> Path:
        """A header's dotted name, with the latest element of each array of tables on the way."""
        out: list[object] = []
        for part in parts:
            out.append(part)
            count = self.aot_count.get(tuple(out))
            if count:
                out.append(count - 1)
        return tuple(out)

    def run(self) -> dict[Path, int]:
        prefix: Path = ()
        while True:
            self.skip_ws(True)
            if self.i >= len(self.s):
                return self.lines
            start = self.i
            if self.s.startswith("[[", self.i):
                line = self.line
                self.advance(2)
                parts = self.read_key()
                self.advance(2)  # ]]
                parent = self.resolve(parts[:-1])
                base = parent + (parts[-1],)
                n = self.aot_count.get(base, 0)
                self.aot_count[base] = n + 1
                prefix = base + (n,)
                self._parents(base, line)
                self.lines.setdefault(base, line)
                self.lines[prefix] = line
            elif self.peek() == "[":
                line = self.line
                self.advance()
                parts = self.read_key()
                self.advance()  # ]
                prefix = self.resolve(parts)
                self._parents(prefix, line)
                self.lines.setdefault(prefix, line)
            else:
                line = self.line
                key = self.read_key()
                self.skip_ws(False)
                if self.peek() == "=":
                    self.advance()
                self.skip_ws(False)
                path = prefix + tuple(key)
                self._parents(path, line)
                self.lines[path] = line
                self.read_value(path)
            if self.i == start:  # text tomllib would reject: step over it rather than loop forever
                self.advance()


_SIMPLE_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


def _unescape(raw: str) -> str:
    """The value of a basic string's body (as a quoted key is matched against tomllib's keys)."""
    if "\\" not in raw:
        return raw
    out, i = [], 0
    while i < len(raw):
        c = raw[i]
        if c != "\\" or i + 1 >= len(raw):
            out.append(c)
            i += 1
            continue
        e = raw[i + 1]
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            i += 2
        elif e in "uU":
            n = 4 if e == "u" else 8
            try:
                out.append(chr(int(raw[i + 2 : i + 2 + n], 16)))
            except ValueError:
                out.append(raw[i : i + 2 + n])
            i += 2 + n
        else:
            out.append(raw[i : i + 2])
            i += 2
    return "".join(out)


def _escaped(s: str, pos: int) -> bool:
    n = 0
    while pos - 1 - n >= 0 and s[pos - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def locate_lines(text: str) -> dict[Path, int]:
    """Map every key path of a TOML document to the line (1-based) where it starts."""
    return _Scanner(text).run()


def line_of(lines: dict[Path, int], path: Path) -> int | None:
    """The line of ``path``, or of its nearest ancestor that has one."""
    path = tuple(path)
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None
