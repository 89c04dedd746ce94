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

Path = tuple[object, ...]

_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class _Scanner:
    def __init__(self, text: str):
        self.s = text.removeprefix("\ufeff")  # a byte order mark is not TOML (and moves no line)
        self.i = 0
        self.line = 1
        self.lines: dict[Path, int] = {}
        self.aot_count: dict[Path, int] = {}  # array-of-tables path -> number of elements so far

    # -- low level -------------------------------------------------------------------------------
    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def advance(self, n: int = 1) -> None:
        chunk = self.s[self.i : self.i + n]
        self.line += chunk.count("\n")
        self.i += n

    def skip_ws(self, newlines: bool) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.advance()
            elif c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            else:
                return

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
        j = self.i + 1
        while j < len(s) and s[j] != q:
            j += 2 if (q == '"' and s[j] == "\\") else 1
        value = s[self.i + 1 : j]
        self.advance(j + 1 - self.i)
        return value

    def read_key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self.skip_ws(False)
            c = self.peek()
            if c == '"':
                parts.append(_unescape(self.read_string()))
            elif c == "'":
                parts.append(self.read_string())
            else:
                j = self.i
                while j < len(self.s) and self.s[j] in _BARE:
                    j += 1
                parts.append(self.s[self.i : j])
                self.i = j
            self.skip_ws(False)
            if self.peek() == ".":
                self.advance()
                continue
            return parts

    # -- values ------------------------------------------------------------------------------------
    def read_value(self, path: Path) -> None:
        self.lines.setdefault(path, self.line)
        c = self.peek()
        if c == "{":
            self.advance()
            while True:
                self.skip_ws(True)
                if self.peek() == "}":
                    self.advance()
                    return
                if self.peek() == ",":
                    self.advance()
                    continue
                if not self.peek():
                    return
                start = self.i
                key_line = self.line
                key = self.read_key()
                self.skip_ws(False)
                if self.peek() == "=":
                    self.advance()
                self.skip_ws(False)
                sub = path + tuple(key)
                self._parents(sub, key_line)
                self.lines[sub] = key_line
                self.read_value(sub)
                if self.i == start:  # not TOML: make progress
                    self.advance()
        elif c == "[":
            self.advance()
            index = 0
            while True:
                self.skip_ws(True)
                if self.peek() == "]":
                    self.advance()
                    return
                if self.peek() == ",":
                    self.advance()
                    continue
                if not self.peek():
                    return
                start = self.i
                self.lines[path + (index,)] = self.line
                self.read_value(path + (index,))
                index += 1
                if self.i == start:  # not TOML: make progress
                    self.advance()
        elif c and c in "\"'":
            self.read_string()
        else:
            while self.i < len(self.s) and self.s[self.i] not in ",]}\n#":
                self.i += 1

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
