"""TOML contracts -> :class:`~audit.model.ContractSet`.

Every ``*.toml`` under the contracts folder is read (sorted by path). A file may hold any of the
top-level tables ``[dims]``, ``[[buffer]]``, ``[[kernel]]``, ``[isv]``, ``[[schedule]]`` and
``[[invariant]]``. Loading checks syntax and types only: a value of the wrong type, an unknown key (a
typo), an unknown dtype / role / stage, or an expression that does not parse is a
:class:`~audit.errors.ContractError` (exit 2) naming file, key path and line. Whether names resolve,
shapes agree and schedules compose is the rules' business (findings, exit 1).

>>> cs = load_contracts(Path("contracts"))        # doctest: +SKIP
>>> [k.name for k in cs.kernels][:2]              # doctest: +SKIP
['aux_heads_loss_ema_update', 'aux_label_scale_ema_update']
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import math
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .dims import Expr, ExprError, parse_expr
from .errors import ContractError, ContractProblem
from .model import (
    Alias,
    BUFFER_KINDS,
    DTYPES,
    INVARIANT_KINDS,
    NULL,
    RECAPTURE_MODES,
    REQUIREMENT_OPS,
    ROLES,
    SLOT_ROLES,
    STAGES,
    Acknowledgement,
    Binding,
    Buffer,
    ContractSet,
    Dim,
    HostRead,
    Invariant,
    IsvLayout,
    IsvParam,
    IsvRead,
    Kernel,
    Loc,
    Mask,
    Param,
    Property,
    Requirement,
    ScalarParam,
    Schedule,
    Slot,
    SourceFile,
    Step,
    Suppression,
    TensorParam,
    Tolerance,
    Values,
    WriteRange,
    VerifySpec,
)

try:  # an optional compiled TOML parser (installed with the "fast" extra); tomllib stays the reference
    import rtoml as _rtoml

    if tuple(int(x) for x in _rtoml.VERSION.split(".")[:2]) < (0, 14):  # older ones crash on deep nesting
        _rtoml = None
except (ImportError, AttributeError, ValueError):
    _rtoml = None

# The default parser: tomli compiled with mypyc (about twice as fast as tomllib, which is the same parser in
# pure Python). tomli < 2.3 reads TOML 1.0 like tomllib; a newer tomli reads TOML 1.1 and is then used only
# for texts that pass the same screens as rtoml. tomli limits the nesting of inline arrays and tables to
# the recursion limit at its import, deeper than tomllib gets before its RecursionError: it is imported
# with the limit lowered to _TOMLI_NESTING, so every text it reads is one tomllib reads too.
_TOMLI_NESTING = 200


def _import_tomli() -> tuple[Any, bool] | None:
    """(tomli, whether it reads TOML 1.1), or None where it is missing or its nesting limit is unknown."""
    import sys

    old = sys.getrecursionlimit()
    try:
        if "tomli._parser" not in sys.modules:
            sys.setrecursionlimit(_TOMLI_NESTING)
        import tomli
        import tomli._parser
    except (ImportError, RecursionError):
        return None
    finally:
        sys.setrecursionlimit(old)
    if getattr(tomli._parser, "MAX_INLINE_NESTING", None) != _TOMLI_NESTING:
        return None  # imported before us, with another limit, or a tomli without one
    try:
        version = tuple(int(x) for x in getattr(tomli, "__version__", "0").split(".")[:2])
    except ValueError:
        return None
    return tomli, version >= (2, 3)


_tomli = _import_tomli()

_MISSING = object()
#: Largest integer magnitude a contract may give; dim expressions refuse larger values the same way.
MAX_INT = 2**62
#: Known [[kernel.property]] kinds and the keys each takes.
PROPERTY_KINDS = {"unit_scale": ("input", "slot", "output", "magnitudes", "bound")}
_DTYPE_NAMES = tuple(DTYPES)
_TOP_KEYS = ("dims", "buffer", "kernel", "isv", "schedule", "invariant", "suppress")
_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean (true or false)",
    list: "an array",
    dict: "a table",
}


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f'the string "{value}"'
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def _choices(options: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f'"{o}"' for o in options)


class _Loader:
    def __init__(self, root: Path, cache: Any = None):
        self.root = root
        self.problems: list[ContractProblem] = []
        self.cache = cache  # a ParsedCache, or None: every file is parsed

    # -- problem reporting ------------------------------------------------------------------------
    def problem(self, loc: Loc, message: str) -> None:
        self.problems.append(ContractProblem(loc.file, loc.line, loc.key_text, message))

    # -- typed access -------------------------------------------------------------------------------
    def table(self, value: Any, loc: Loc, what: str) -> dict | None:
        if not isinstance(value, dict):
            self.problem(loc, f"expected {what} (a table), found {_describe(value)}.")
            return None
        return value

    def keys(self, table: dict, loc: Loc, allowed: tuple[str, ...], what: str) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                self.problem(loc.child(key), f'unknown key "{key}" in {what}{hint}; valid keys are {_choices(allowed)}.')

    def get(self, table: dict, loc: Loc, key: str, kind: type, default: Any = _MISSING) -> Any:
        value = table.get(key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                self.problem(loc, f'missing required key "{key}" ({_TYPE_NAMES[kind]}).')
                return None
            return default
        if type(value) is kind and kind is not float and (kind is not int or -MAX_INT <= value <= MAX_INT):
            return value  # the common case (a bool is no int here, an int no float)
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_INT:
            value, ok = float(value), True
        if not ok:
            self.problem(loc.child(key), f"expected {_TYPE_NAMES[kind]}, found {_describe(value)}.")
            return None if default is _MISSING else default
        if kind is int and not -MAX_INT <= value <= MAX_INT:
            self.problem(loc.child(key), f"expected an integer of at most 2^62 in magnitude, found one of {len(str(abs(value)))} digits.")
            return None if default is _MISSING else default
        if kind is float and not math.isfinite(value):
            self.problem(loc.child(key), f"expected a finite number, found {value}.")
            return None if default is _MISSING else default
        return value

    def enum(self, table: dict, loc: Loc, key: str, options: tuple[str, ...], default: Any = _MISSING) -> Any:
        value = table.get(key)
        if type(value) is str and value in options:  # the common case; defaults are valid options
            return value
        value = self.get(table, loc, key, str, default)
        if value is None or value is default and default is not _MISSING:
            return value
        if value not in options:
            self.problem(loc.child(key), f'expected one of {_choices(options)}, found "{value}".')
            return None
        return value

    def strings(self, table: dict, loc: Loc, key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problem(loc.child(key), f"expected an array of strings, found {_describe(value)}.")
            return ()
        return tuple(value)

    def expr(self, value: Any, loc: Loc, slots: bool = False, at: tuple = ()) -> Expr | None:
        """A dim expression; ``slot(NAME)`` only where ``slots`` (scalar values and launch arguments).

        A problem is reported at ``loc.child(*at)``; that location is only built when there is one.
        """
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            self.problem(loc.child(*at) if at else loc, f"expected an integer or a dim expression string, found {_describe(value)}.")
            return None
        try:
            e = parse_expr(value)
        except ExprError as exc:
            self.problem(loc.child(*at) if at else loc, f"{exc}.")
            return None
        if e.slots and not slots:
            self.problem(loc.child(*at) if at else loc, f'"{e.text}" uses slot(), which only scalar values and launch arguments may use; expected a dim expression.')
            return None
        return e

    def shape(self, value: Any, loc: Loc, at: tuple = ()) -> tuple[Expr, ...] | None:
        """A shape at ``loc.child(*at)`` (built only for a problem)."""
        if not isinstance(value, list):
            self.problem(loc.child(*at) if at else loc, f'expected a shape (an array of dims, e.g. ["B", "SH2"]), found {_describe(value)}.')
            return None
        out = []
        for i, v in enumerate(value):
            e = self.expr(v, loc, at=(*at, i))
            if e is None:
                return None
            out.append(e)
        return tuple(out)

    def triple(self, table: dict, loc: Loc, key: str, default: tuple[int, int, int] | None) -> tuple[Expr, Expr, Expr] | None:
        if key not in table:
            if default is None:
                self.problem(loc, f'missing required key "{key}" (three dim expressions, e.g. ["ceil_div(B, 256)", 1, 1]).')
                return None
            return tuple(parse_expr(v) for v in default)  # type: ignore[return-value]
        value = table[key]
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            value = [value, 1, 1]
        if not isinstance(value, list) or not 1 <= len(value) <= 3:
            self.problem(loc.child(key), f"expected an array of one to three dim expressions, found {_describe(value)}.")
            return None
        value = list(value) + [1] * (3 - len(value))
        out = [self.expr(v, loc, at=(key, i)) for i, v in enumerate(value)]
        if any(e is None for e in out):
            return None
        return tuple(out)  # type: ignore[return-value]

    def values(self, t: dict, loc: Loc, what: str) -> Values | None:
        if "values" not in t:
            return None
        vl = loc.child("values")
        v = self.table(t["values"], vl, "a value domain")
        if v is None:
            return None
        self.keys(v, vl, ("choices", "weights", "min", "max", "scale", "include", "stress", "stress_reason"), f"the value domain of {what}")
        nums = []
        for key in ("choices", "weights", "include"):
            raw = v.get(key, [])
            if not isinstance(raw, list) or not all(_finite_number(x) for x in raw):
                self.problem(vl.child(key), f"expected an array of finite numbers, found {_describe(raw)}.")
                raw = []
            nums.append(tuple(float(x) for x in raw))
        choices, weights, include = nums
        if weights and len(weights) != len(choices):
            self.problem(vl.child("weights"), f"expected {len(choices)} weights (one per choice), found {len(weights)}.")
        bounds = []
        for key in ("min", "max"):
            raw = v.get(key)
            if raw is None:
                bounds.append(None)
            elif isinstance(raw, float):
                if not math.isfinite(raw):
                    self.problem(vl.child(key), f"expected a finite number or a dim expression, found {raw}.")
                bounds.append(raw if math.isfinite(raw) else None)
            else:
                bounds.append(self.expr(raw, vl.child(key)))
        scale = self.get(v, vl, "scale", float, None)
        stress = self.get(v, vl, "stress", bool, True)
        reason = self.get(v, vl, "stress_reason", str, "")
        if stress is False and not (reason or "").strip():
            self.problem(vl.child("stress"), f'expected a "stress_reason" (a string saying why {what} is not stressed) next to stress = false, found none.')
        elif stress is not False and reason:
            self.problem(vl.child("stress_reason"), 'expected "stress_reason" only next to stress = false, found it with stress on.')
        return Values(choices, weights, bounds[0], bounds[1], scale, include, vl, stress is not False, (reason or "").strip())

    def verify_spec(self, t: dict, loc: Loc, kernel: str, params: list[Param] = ()) -> VerifySpec:
        if "verify" not in t:
            return VerifySpec()
        vl = loc.child("verify")
        v = self.table(t["verify"], vl, "a [kernel.verify] table")
        if v is None:
            return VerifySpec()
        self.keys(v, vl, ("rowwise", "dims", "rtol", "atol", "max_batch", "cases", "variant_cases", "binding_cases", "bindings", "sample_axes", "neighbours"), f'[kernel.verify] of "{kernel}"')
        dims: list[tuple[str, tuple[int, ...]]] = []
        for name, vals in (self.table(v.get("dims", {}), vl.child("dims"), "dim values (name = [values])") or {}).items():
            if not isinstance(vals, list) or not vals or not all(isinstance(x, int) and not isinstance(x, bool) and abs(x) <= MAX_INT for x in vals):
                self.problem(vl.child("dims", name), f"expected a non-empty array of integers, found {_describe(vals)}.")
                continue
            dims.append((name, tuple(vals)))
        return VerifySpec(
            rowwise=self.get(v, vl, "rowwise", bool, False),
            dims=tuple(dims),
            rtol=self.get(v, vl, "rtol", float, None),
            atol=self.get(v, vl, "atol", float, None),
            max_batch=self.get(v, vl, "max_batch", int, None),
            loc=vl,
            cases=self.cases(v, vl, "cases"),
            variant_cases=self.variant_cases(v, vl),
            binding_cases=self.binding_cases(v, vl),
            neighbours=self.get(v, vl, "neighbours", bool, True),
            bindings=self.bindings(v, vl, t.get("dims")),
            sample_axes=self.sample_axes(v, vl, kernel, params),
        )

    def sample_axes(self, v: dict, vl: Loc, kernel: str, params: list[Param]) -> tuple[tuple[str, int], ...]:
        """``sample_axes = { colsum = 0 }``: outputs the reference can compute a sample of, and along which axis
        (an output of the kernel, an axis of its shape; not next to ``rowwise``, not on a ``write_range`` output)."""
        if "sample_axes" not in v:
            return ()
        sl = vl.child("sample_axes")
        table = self.table(v["sample_axes"], sl, "outputs and axes (output = axis)")
        if table is None:
            return ()
        if v.get("rowwise") is True:
            self.problem(sl, 'expected "sample_axes" or rowwise = true, found both; a rowwise kernel is compared on sampled rows already.')
            return ()
        written = {p.name: p for p in params if isinstance(p, TensorParam) and p.role != "in"}
        out = []
        for name, axis in table.items():
            al = sl.child(name)
            p = written.get(name)
            if p is None:
                self.problem(al, f'"{name}" is not an output of kernel "{kernel}"; its outputs are {_choices(list(written))}.')
                continue
            if not p.shape:
                self.problem(al, f'output "{name}" is a scalar; expected "sample_axes" only on outputs with an axis to sample.')
                continue
            if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < len(p.shape):
                self.problem(al, f'expected an axis of output "{name}" (an integer from 0 to {len(p.shape) - 1}), found {_describe(axis)}.')
                continue
            if p.write_range is not None:
                self.problem(al, f'output "{name}" has a write_range; expected "sample_axes" only on outputs written whole.')
                continue
            out.append((name, axis))
        return tuple(out)

    def bindings(self, v: dict, vl: Loc, local: Any) -> tuple[tuple[tuple[str, int], ...], ...]:
        """Extra local-dim bindings: each a value for every local dim of the kernel (its ``dims``)."""
        if "bindings" not in v:
            return ()
        names = [d for d in local if isinstance(d, str)] if isinstance(local, list) else []
        if not names:
            self.problem(vl.child("bindings"), 'expected "bindings" only in a kernel with local dims (dims = ["M", "N"]), found a kernel without them.')
            return ()
        out = []
        for i, pairs in enumerate(self.cases(v, vl, "bindings")):
            il = vl.child("bindings", i)
            text = ",".join(f"{n}={x}" for n, x in pairs)
            got = [n for n, _ in pairs]
            bad = next((n for n in got if n not in names), None)
            if bad is not None:
                listed = ", ".join('"' + n + '"' for n in names)
                self.problem(il, f'binding "{text}": "{bad}" is not a local dim of the kernel; its local dims are {listed}.')
                continue
            missing = [n for n in names if n not in got]
            if missing or len(set(got)) != len(got):
                what = "does not bind " + ", ".join(f'"{n}"' for n in missing) if missing else "binds a dim twice"
                self.problem(il, f'binding "{text}" {what}; a binding gives every local dim one value.')
                continue
            small = next(((n, x) for n, x in pairs if not 1 <= x <= MAX_INT), None)
            if small is not None:
                self.problem(il, f'binding "{text}": {small[0]} = {small[1]} is not a positive size.')
                continue
            out.append(tuple(sorted(pairs, key=lambda nx: names.index(nx[0]))))
        return tuple(out)

    def variant_cases(self, v: dict, vl: Loc) -> int | None:
        n = self.get(v, vl, "variant_cases", int, None)
        if n is not None and n < 1:
            self.problem(vl.child("variant_cases"), f"expected a positive number of cases, found {n}.")
            return None
        if n is not None and not v.get("dims") and not v.get("bindings"):
            self.problem(vl.child("variant_cases"), 'expected "variant_cases" only next to "dims" or "bindings" (it caps the cases of the dims variants after the first and of the extra bindings), found neither.')
            return None
        return n

    def binding_cases(self, v: dict, vl: Loc) -> int | None:
        n = self.get(v, vl, "binding_cases", int, None)
        if n is not None and n < 1:
            self.problem(vl.child("binding_cases"), f"expected a positive number of cases, found {n}.")
            return None
        if n is not None and not v.get("bindings"):
            self.problem(vl.child("binding_cases"), 'expected "binding_cases" only next to "bindings" (it caps the cases of the extra bindings), found none.')
            return None
        return n

    def cases(self, t: dict, loc: Loc, key: str) -> tuple[tuple[tuple[str, int], ...], ...]:
        """Extra verify cases: strings ``"B=4,T=17"`` or tables ``{ B = 4, T = 17 }`` (checked against the
        runtime dims once every file is loaded, by :func:`_check_cases`)."""
        raw = t.get(key, [])
        if not isinstance(raw, list):
            self.problem(loc.child(key), f'expected an array of cases such as ["B=4,T=17"] or [{{ B = 4, T = 17 }}], found {_describe(raw)}.')
            return ()
        out = []
        for i, item in enumerate(raw):
            il = loc.child(key, i)
            pairs: list[tuple[str, int]] = []
            if isinstance(item, str):
                for part in (p.strip() for p in item.split(",")):
                    name, sep, value = (x.strip() for x in part.partition("="))
                    try:
                        pairs.append((name, int(value)))
                    except ValueError:
                        sep = ""
                    if not sep or not name:
                        self.problem(il, f'case "{item}": "{part}" is not an assignment NAME=VALUE with an integer value.')
                        pairs = []
                        break
            elif isinstance(item, dict) and all(isinstance(x, int) and not isinstance(x, bool) for x in item.values()):
                pairs = [(str(k), int(x)) for k, x in item.items()]
            else:
                self.problem(il, f'expected a case such as "B=4,T=17" or {{ B = 4, T = 17 }}, found {_describe(item)}.')
            if pairs:
                out.append(tuple(pairs))
        return tuple(out)

    # -- sections -----------------------------------------------------------------------------------
    def test_values(self, spec: dict, dl: Loc, name: str, lo: int | None, hi: int | None) -> tuple[int, ...]:
        """A runtime dim's ``test = [1, 17, 64]``: integers inside its range."""
        if "test" not in spec:
            return ()
        raw = spec["test"]
        tl = dl.child("test")
        if not isinstance(raw, list) or not raw or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
            self.problem(tl, f'dim "{name}": expected "test" to be a non-empty array of integers, found {_describe(raw)}.')
            return ()
        for x in raw:
            if lo is not None and hi is not None and not lo <= x <= hi:
                self.problem(tl, f'dim "{name}": test value {x} is outside its range {lo}..{hi}.')
                return ()
        return tuple(dict.fromkeys(int(x) for x in raw))

    def dims(self, table: Any, loc: Loc) -> list[Dim]:
        table = self.table(table, loc, "the [dims] table")
        if table is None:
            return []
        out = []
        for name, spec in table.items():
            dl = loc.child(name)
            if isinstance(spec, bool):
                self.problem(dl, f"expected an integer, a dim expression or a table, found {_describe(spec)}.")
            elif isinstance(spec, int):
                if abs(spec) > MAX_INT:
                    self.problem(dl, f"expected an integer of at most 2^62 in magnitude, found one of {len(str(abs(spec)))} digits.")
                else:
                    out.append(Dim(name, "fixed", value=spec, loc=dl))
            elif isinstance(spec, str):
                e = self.expr(spec, dl)
                if e is not None:
                    out.append(Dim(name, "derived", expr=e, loc=dl))
            elif isinstance(spec, dict):
                self.keys(spec, dl, ("value", "min", "max", "expr", "doc", "test"), f'dim "{name}"')
                doc = self.get(spec, dl, "doc", str, "")
                if "value" in spec:
                    v = self.get(spec, dl, "value", int)
                    if v is not None:
                        out.append(Dim(name, "fixed", value=v, doc=doc, loc=dl.child("value")))
                elif "expr" in spec:
                    e = self.expr(spec["expr"], dl.child("expr"))
                    if e is not None:
                        out.append(Dim(name, "derived", expr=e, doc=doc, loc=dl.child("expr")))
                elif "min" in spec or "max" in spec:
                    lo = self.get(spec, dl, "min", int)
                    hi = self.get(spec, dl, "max", int)
                    test = self.test_values(spec, dl, name, lo, hi)
                    if lo is not None and hi is not None:
                        out.append(Dim(name, "runtime", min=lo, max=hi, doc=doc, loc=dl, test=test))
                else:
                    self.problem(dl, f'dim "{name}" needs "value" (fixed), "min" and "max" (runtime) or "expr" (derived).')
            else:
                self.problem(dl, f"expected an integer, a dim expression or a table, found {_describe(spec)}.")
        return out

    def buffer(self, t: dict, loc: Loc) -> Buffer | None:
        fast = _plain_buffer(t, loc)
        if fast is not None:
            return fast
        self.keys(t, loc, ("name", "dtype", "shape", "kind", "external", "grad_of", "values", "doc"), "a [[buffer]]")
        name = self.get(t, loc, "name", str)
        dtype = self.enum(t, loc, "dtype", _DTYPE_NAMES)
        shape = self.shape(t["shape"], loc, ("shape",)) if "shape" in t else self.get(t, loc, "shape", list)
        kind = self.enum(t, loc, "kind", BUFFER_KINDS, "activation")
        external = self.get(t, loc, "external", bool, False)
        grad_of = self.get(t, loc, "grad_of", str, None)
        values = self.values(t, loc, f'buffer "{name}"')
        doc = self.get(t, loc, "doc", str, "")
        if None in (name, dtype, shape, kind):
            return None
        return Buffer(name, dtype, shape, kind, external, grad_of, values, doc, loc)

    def param(self, t: Any, loc: Loc, kernel: str) -> Param | None:
        if type(t) is dict:
            fast = _plain_tensor_param(t, loc) if t.get("kind", "tensor") == "tensor" else _plain_scalar_param(t, loc)
            if fast is not None:
                return fast
        t = self.table(t, loc, "a parameter")
        if t is None:
            return None
        kind = self.enum(t, loc, "kind", ("tensor", "scalar", "isv"), "tensor")
        name = self.get(t, loc, "name", str)
        doc = self.get(t, loc, "doc", str, "")
        if kind == "isv":
            self.keys(t, loc, ("name", "kind", "doc"), f'ISV parameter of kernel "{kernel}"')
            return IsvParam(name, doc, loc) if name else None
        if kind == "scalar":
            self.keys(t, loc, ("name", "kind", "dtype", "value", "doc"), f'scalar parameter of kernel "{kernel}"')
            dtype = self.enum(t, loc, "dtype", _DTYPE_NAMES)
            value = self.scalar_value(t.get("value"), loc.child("value"), dtype) if "value" in t else None
            if name is None or dtype is None:
                return None
            return ScalarParam(name, dtype, value, doc, loc)
        if kind != "tensor":
            return None
        self.keys(
            t,
            loc,
            ("name", "kind", "dtype", "shape", "role", "mask", "saved", "partial_of", "optional", "values", "doc", "write_range", "align"),
            f'tensor parameter of kernel "{kernel}"',
        )
        dtype = self.enum(t, loc, "dtype", _DTYPE_NAMES)
        shape = self.shape(t["shape"], loc, ("shape",)) if "shape" in t else self.get(t, loc, "shape", list)
        role = self.enum(t, loc, "role", ROLES)
        mask = None
        if "mask" in t:
            ml = loc.child("mask")
            m = self.table(t["mask"], ml, "mask semantics")
            if m is not None:
                self.keys(m, ml, ("skip_value", "zeroes"), "a mask")
                skip = self.get(m, ml, "skip_value", int)
                if skip is not None:
                    mask = Mask(skip, self.strings(m, ml, "zeroes"), ml)
        saved = self.get(t, loc, "saved", bool, False)
        partial_of = self.get(t, loc, "partial_of", str, None)
        optional = self.get(t, loc, "optional", bool, False)
        values = self.values(t, loc, f'parameter "{name}"')
        write_range = self.write_range(t, loc, role, shape)
        align = self.align(t, loc, dtype)
        if None in (name, dtype, shape, role):
            return None
        return TensorParam(name, dtype, shape, role, mask, saved, partial_of, optional, values, doc, loc, write_range, align)

    def align(self, t: dict, loc: Loc, dtype: str | None) -> int:
        """``align = 16``: a power of two from the element size up to 256 bytes (0: not given)."""
        n = self.get(t, loc, "align", int, None)
        if n is None:
            return 0
        item = DTYPES[dtype][0] if dtype in DTYPES else 1
        if n < item or n > 256 or n & (n - 1):
            self.problem(loc.child("align"), f"expected a power of two from the element size ({item} bytes) to 256 bytes, found {n}.")
            return 0
        return n

    def scalar_value(self, value: Any, loc: Loc, dtype: str | None) -> Expr | float | HostRead | None:
        if isinstance(value, str) and value.strip().startswith("isv("):
            return self.host_read(value, loc)
        if dtype and DTYPES[dtype][3] == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(float(value)):
                self.problem(loc, f"expected a finite number, found {value}.")
                return None
            return float(value)
        if isinstance(value, float):
            self.problem(loc, f"expected an integer or a dim expression for an integer scalar, found {_describe(value)}.")
            return None
        return self.expr(value, loc, slots=True)

    def host_read(self, value: str, loc: Loc) -> HostRead | None:
        """``isv(SLOT_NAME)``: the slot read on the host at launch time (the slot's existence is UNKNOWN_SLOT's)."""
        m = _HOST_READ.fullmatch(value.strip())
        if m is None:
            self.problem(loc, f'expected "isv(SLOT_NAME)" (a host-side read of one ISV slot), found "{value}".')
            return None
        return HostRead(m.group(1), loc)

    def kernel(self, t: dict, loc: Loc) -> Kernel | None:
        fast = _plain_kernel(self, t, loc)
        if fast is not None:
            return fast
        allowed = (
            "name", "source", "entry", "cpp_name", "stage", "phase", "reference", "gradcheck", "grid",
            "block", "shared_bytes", "dims", "isv_reads", "isv_writes", "nondeterministic", "params",
            "param", "property", "verify", "doc", "requires", "aliases",
        )  # fmt: skip
        self.keys(t, loc, allowed, "a [[kernel]]")
        name = self.get(t, loc, "name", str)
        label = name or "?"
        source = self.get(t, loc, "source", str)
        entry = self.get(t, loc, "entry", str, None)
        cpp_name = self.get(t, loc, "cpp_name", str, None)
        if entry and cpp_name:
            self.problem(loc.child("cpp_name"), f'kernel "{label}" gives both "entry" and "cpp_name"; give one.')
        stage = self.enum(t, loc, "stage", STAGES)
        phase = self.get(t, loc, "phase", str, "")
        reference = self.get(t, loc, "reference", str, None)
        gradcheck = self.get(t, loc, "gradcheck", str, None)
        for key, val in (("reference", reference), ("gradcheck", gradcheck)):
            if val is not None and (val.count(":") != 1 or not all(val.split(":"))):
                self.problem(loc.child(key), f'expected "module:function", found "{val}".')
        grid = self.triple(t, loc, "grid", None)
        block = self.triple(t, loc, "block", None)
        shared = self.expr(t["shared_bytes"], loc, at=("shared_bytes",)) if "shared_bytes" in t else None
        local = self.strings(t, loc, "dims")
        reads = []
        raw_reads = t.get("isv_reads", [])
        if not isinstance(raw_reads, list):
            self.problem(loc.child("isv_reads"), f"expected an array of slot names, found {_describe(raw_reads)}.")
            raw_reads = []
        for i, r in enumerate(raw_reads):
            rl = loc.child("isv_reads", i)
            if isinstance(r, str):
                reads.append(IsvRead(r, False, rl))
            elif isinstance(r, dict):
                self.keys(r, rl, ("slot", "previous_step"), "an ISV read")
                slot = self.get(r, rl, "slot", str)
                if slot:
                    reads.append(IsvRead(slot, self.get(r, rl, "previous_step", bool, False), rl))
            else:
                self.problem(rl, f'expected a slot name or {{ slot = "...", previous_step = true }}, found {_describe(r)}.')
        writes = self.strings(t, loc, "isv_writes")
        tol = None
        if "nondeterministic" in t:
            nl = loc.child("nondeterministic")
            nt = self.table(t["nondeterministic"], nl, "a tolerance table")
            if nt is not None:
                self.keys(nt, nl, ("rtol", "atol", "reason"), "nondeterministic")
                rtol = self.get(nt, nl, "rtol", float)
                atol = self.get(nt, nl, "atol", float, 0.0)
                if rtol is not None:
                    tol = Tolerance(rtol, atol, self.get(nt, nl, "reason", str, ""), nl)
        params: list[Param] = []
        key = "params" if "params" in t else "param"
        raw = t.get(key)
        if raw is None:
            self.problem(loc, f'kernel "{label}" has no "params" (the ordered list of its arguments).')
            raw = []
        if not isinstance(raw, list):
            self.problem(loc.child(key), f"expected an array of parameters, found {_describe(raw)}.")
            raw = []
        for i, p in enumerate(raw):
            param = self.param(p, loc.child(key, i), label)
            if param is not None:
                params.append(param)
        props = []
        raw_props = t.get("property", [])
        if not isinstance(raw_props, list):
            raw_props = [raw_props]
        for i, p in enumerate(raw_props):
            pl = loc.child("property", i)
            pt = self.table(p, pl, "a [[kernel.property]]")
            if pt is None:
                continue
            kind = self.enum(pt, pl, "kind", tuple(PROPERTY_KINDS))
            if kind is None:
                continue
            self.keys(pt, pl, ("kind", *PROPERTY_KINDS[kind]), f'a "{kind}" property of kernel "{label}"')
            for k in ("input", "slot", "output"):
                self.get(pt, pl, k, str, None)
            mags = pt.get("magnitudes", [1.0])
            if not isinstance(mags, list) or not mags or not all(_finite_number(m) and m > 0 for m in mags):
                self.problem(pl.child("magnitudes"), f"expected a non-empty array of positive finite numbers, found {_describe(mags)}.")
            bound = self.get(pt, pl, "bound", float, None)
            if bound is not None and bound <= 0:
                self.problem(pl.child("bound"), f"expected a positive number, found {bound}.")
            props.append(Property(kind, tuple((k, _freeze(v)) for k, v in pt.items() if k != "kind"), pl))
        verify = self.verify_spec(t, loc, label, params)
        doc = self.get(t, loc, "doc", str, "")
        if None in (name, source, stage, grid, block):
            return None
        requires = self.requirements(t, loc)
        aliases = self.aliases(t, loc, label, params)
        return Kernel(
            name=name, source=source, stage=stage, phase=phase, params=tuple(params), grid=grid, block=block,
            entry=entry if entry or cpp_name else name, cpp_name=cpp_name, shared_bytes=shared,
            reference=reference, gradcheck=gradcheck, dims=local, isv_reads=tuple(reads), isv_writes=writes,
            nondeterministic=tol, properties=tuple(props), verify=verify, doc=doc, loc=loc, requires=requires,
            aliases=aliases,
        )  # fmt: skip

    def aliases(self, t: dict, loc: Loc, kernel: str, params: list[Param]) -> tuple[Alias, ...]:
        """``aliases = [["dinp", "dout"]]``: pairs of two different tensor parameters of this kernel, each
        parameter in one pair at most (whether their shapes and dtypes agree is ALIAS_MISMATCH's)."""
        if "aliases" not in t:
            return ()
        raw = t["aliases"]
        al = loc.child("aliases")
        def pair(x: Any) -> bool:
            return isinstance(x, list) and len(x) == 2 and all(isinstance(n, str) for n in x)

        if not isinstance(raw, list) or not all(pair(x) for x in raw):
            found = _describe(raw) if not isinstance(raw, list) else f"{_describe(next(x for x in raw if not pair(x)))} in it"
            self.problem(al, f'expected a list of parameter pairs such as [["dinp", "dout"]], found {found}.')
            return ()
        tensors = [p.name for p in params if isinstance(p, TensorParam)]
        partner: dict[str, str] = {}
        out = []
        for i, (a, b) in enumerate(raw):
            il = al.child(i)
            unknown = [n for n in (a, b) if n not in tensors]
            if unknown:
                self.problem(il, f'"{unknown[0]}" is not a tensor parameter of kernel "{kernel}"; its tensor parameters are {_choices(tensors)}.')
                continue
            if a == b:
                self.problem(il, f'expected two different parameters, found "{a}" twice.')
                continue
            again = next((n for n in (a, b) if n in partner), None)
            if again is not None:
                self.problem(il, f'parameter "{again}" is already aliased with "{partner[again]}"; expected each parameter in one pair at most.')
                continue
            partner[a], partner[b] = b, a
            out.append(Alias(a, b, il))
        return tuple(out)

    def write_range(self, t: dict, loc: Loc, role: str | None, shape: tuple[Expr, ...] | None) -> WriteRange | None:
        """``write_range = { axis = 1, start = 0, stop = "V" }`` on a written parameter (start defaults to 0)."""
        if "write_range" not in t:
            return None
        wl = loc.child("write_range")
        w = self.table(t["write_range"], wl, "a write range")
        if w is None:
            return None
        self.keys(w, wl, ("axis", "start", "stop"), "a write range")
        if role == "in":
            self.problem(wl, 'expected a write range only on an "out", "inout" or "accumulate" parameter, found it on an input (role "in").')
            return None
        axis = self.get(w, wl, "axis", int)
        start = self.expr(w.get("start", 0), wl, at=("start",))
        stop = self.expr(w["stop"], wl, at=("stop",)) if "stop" in w else self.get(w, wl, "stop", str)
        if axis is None or start is None or stop is None or shape is None:
            return None
        if not 0 <= axis < len(shape):
            shown = "[" + ", ".join(e.text for e in shape) + "]"
            self.problem(wl.child("axis"), f"expected an axis of the shape {shown}, 0..{len(shape) - 1}, found {axis}.")
            return None
        return WriteRange(axis, start, stop, wl)

    def requirements(self, t: dict, loc: Loc) -> tuple[Requirement, ...]:
        """``requires = ["OC % 32 == 0", "V <= P"]``: each a comparison of two dim expressions."""
        if "requires" not in t:
            return ()
        raw = t["requires"]
        rl = loc.child("requires")
        if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
            self.problem(rl, f'expected a list of conditions such as ["OC % 32 == 0", "V <= P"], found {_describe(raw)}.')
            return ()
        out = []
        for i, text in enumerate(raw):
            il = rl.child(i)
            found = [(text.find(op), op) for op in REQUIREMENT_OPS if text.find(op) > 0]
            if not found:
                self.problem(il, f'"{text}" is no condition; expected two dim expressions joined by one of {_choices(REQUIREMENT_OPS)}.')
                continue
            at, op = min(found, key=lambda f: (f[0], -len(f[1])))
            left, right = self.expr(text[:at].strip(), il), self.expr(text[at + len(op) :].strip(), il)
            if left is not None and right is not None:
                out.append(Requirement(text, left, op, right, il))
        return tuple(out)

    def isv(self, t: Any, loc: Loc) -> IsvLayout | None:
        t = self.table(t, loc, "the [isv] table")
        if t is None:
            return None
        self.keys(
            t, loc, ("buffer", "dtype", "total_dim", "reset_events", "fingerprint", "slot", "acknowledge"), "[isv]"
        )
        buffer = self.get(t, loc, "buffer", str, "isv")
        dtype = self.enum(t, loc, "dtype", _DTYPE_NAMES, "f32")
        total = self.get(t, loc, "total_dim", int)
        events = self.strings(t, loc, "reset_events")
        fp = self.get(t, loc, "fingerprint", str, None)
        if fp is not None and not _is_fingerprint(fp):
            self.problem(loc.child("fingerprint"), f'expected "0x" and 16 lowercase hex digits, found "{fp}".')
        slots = []
        raw = t.get("slot", [])
        if not isinstance(raw, list):
            self.problem(loc.child("slot"), "expected [[isv.slot]] tables.")
            raw = []
        for i, s in enumerate(raw):
            sl = loc.child("slot", i)
            st = self.table(s, sl, "an [[isv.slot]]")
            if st is None:
                continue
            self.keys(st, sl, ("index", "name", "role", "dtype", "count", "reset", "shared_writers", "doc"), "an [[isv.slot]]")
            index = self.get(st, sl, "index", int)
            name = self.get(st, sl, "name", str)
            role = self.enum(st, sl, "role", SLOT_ROLES)
            sdtype = self.enum(st, sl, "dtype", _DTYPE_NAMES, dtype or "f32")
            count = self.get(st, sl, "count", int, 1)
            reset: list[tuple[str, float | str]] = []
            if "reset" in st:
                rl = sl.child("reset")
                rt = self.table(st["reset"], rl, "a reset policy (event = value)")
                for ev, v in (rt or {}).items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v)):
                        reset.append((ev, float(v)))
                    elif v == "keep":
                        reset.append((ev, "keep"))
                    else:
                        self.problem(rl.child(ev), f'expected a finite number or "keep", found {_describe(v)}.')
            writers = self.strings(st, sl, "shared_writers")
            doc = self.get(st, sl, "doc", str, "")
            if None in (index, name, role, sdtype, count):
                continue
            slots.append(Slot(index, name, role, sdtype, count, tuple(reset), writers, doc, sl))
        acks = []
        raw_acks = t.get("acknowledge", [])
        for i, a in enumerate(raw_acks if isinstance(raw_acks, list) else [raw_acks]):
            al = loc.child("acknowledge", i)
            at = self.table(a, al, "an [[isv.acknowledge]]")
            if at is None:
                continue
            self.keys(at, al, ("from", "to", "reason", "migrator"), "an [[isv.acknowledge]]")
            frm = self.get(at, al, "from", str)
            to = self.get(at, al, "to", str)
            reason = self.get(at, al, "reason", str)
            for k, v in (("from", frm), ("to", to)):
                if v is not None and not _is_fingerprint(v):
                    self.problem(al.child(k), f'expected "0x" and 16 lowercase hex digits, found "{v}".')
            if reason is not None and not reason.strip():
                self.problem(al.child("reason"), "an acknowledgement needs a reason.")
            mig: list[tuple[int, int]] = []
            raw_mig = at.get("migrator", {})
            mt = self.table(raw_mig, al.child("migrator"), "a migrator (old index = new index)") or {}
            for k, v in mt.items():
                if not k.isdigit() or not isinstance(v, int) or isinstance(v, bool):
                    self.problem(al.child("migrator", k), f'expected "old index" = new index, found "{k}" = {v!r}.')
                else:
                    mig.append((int(k), v))
            if None not in (frm, to, reason):
                acks.append(Acknowledgement(frm, to, reason, tuple(mig), al))
        if total is None or dtype is None:
            return None
        return IsvLayout(buffer, dtype, total, events, tuple(slots), fp, tuple(acks), loc)

    def schedule(self, t: dict, loc: Loc) -> Schedule | None:
        self.keys(t, loc, ("name", "stream", "graph_capture", "recapture", "after", "equivalent_to", "step", "doc", "tolerance", "verify_cases"), "a [[schedule]]")
        name = self.get(t, loc, "name", str)
        stream = self.get(t, loc, "stream", str, "default")
        capture = self.get(t, loc, "graph_capture", bool, False)
        recapture = self.enum(t, loc, "recapture", RECAPTURE_MODES, None) if "recapture" in t else None
        after = self.strings(t, loc, "after")
        equiv = self.get(t, loc, "equivalent_to", str, None)
        doc = self.get(t, loc, "doc", str, "")
        steps = []
        raw = t.get("step", [])
        if not isinstance(raw, list):
            self.problem(loc.child("step"), "expected [[schedule.step]] tables.")
            raw = []
        for i, s in enumerate(raw):
            step = self.step(s, loc.child("step", i), i)
            if step is not None:
                steps.append(step)
        tolerance = None
        if "tolerance" in t:
            tl = loc.child("tolerance")
            tt = self.table(t["tolerance"], tl, "a tolerance table")
            if tt is not None:
                self.keys(tt, tl, ("rtol", "atol", "reason"), "tolerance")
                rtol, atol = self.get(tt, tl, "rtol", float), self.get(tt, tl, "atol", float)
                reason = self.get(tt, tl, "reason", str, "")
                if rtol is not None and atol is not None:
                    if not (0 < rtol < 1 and 0 <= atol < 1):
                        self.problem(tl, f"rtol must lie in (0, 1) and atol in [0, 1), found rtol = {rtol}, atol = {atol}.")
                    elif not reason:
                        self.problem(tl, 'a schedule tolerance needs a "reason" (what in the chain makes float32 differ more, e.g. fast-math tanh).')
                    else:
                        tolerance = Tolerance(rtol, atol, reason, tl)
        if name is None:
            return None
        return Schedule(name, tuple(steps), stream, capture, after, equiv, doc, loc, tolerance, verify_cases=self.cases(t, loc, "verify_cases"), recapture=recapture)

    def step(self, s: Any, sl: Loc, index: int) -> Step | None:
        if type(s) is dict:
            fast = _plain_step(s, sl, index)
            if fast is not None:
                return fast
        st = self.table(s, sl, "a [[schedule.step]]")
        if st is None:
            return None
        self.keys(st, sl, ("launch", "zero", "bind", "dims", "args"), "a [[schedule.step]]")
        launch = self.get(st, sl, "launch", str, None)
        zero = self.get(st, sl, "zero", str, None)
        if (launch is None) == (zero is None):
            self.problem(sl, 'a step needs exactly one of "launch" (a kernel) or "zero" (a buffer to clear).')
            return None
        binds: list[tuple[str, Binding]] = []
        bt = self.table(st.get("bind", {}), sl.child("bind"), "bindings (parameter = buffer)") or {}
        for pname, target in bt.items():
            bl = sl.child("bind", pname)
            if isinstance(target, str):
                binds.append((pname, Binding(None if target == NULL else target, None, bl)))
            elif isinstance(target, dict):
                self.keys(target, bl, ("buffer", "view", "offset"), "a binding")
                buf = self.get(target, bl, "buffer", str)
                view = self.shape(target["view"], bl, ("view",)) if "view" in target else None
                offset = None
                if "offset" in target:
                    offset = self.expr(target["offset"], bl, at=("offset",))
                    if "view" not in target:
                        self.problem(bl.child("offset"), 'expected a "view" (the shape of the slice) next to "offset", found none.')
                        offset = None
                if buf is not None:
                    binds.append((pname, Binding(None if buf == NULL else buf, view, bl, offset)))
            else:
                self.problem(bl, f'expected a buffer name, "NULL" or {{ buffer = "...", view = [...], offset = "..." }}, found {_describe(target)}.')
        dims: list[tuple[str, Expr]] = []
        for dname, dv in (self.table(st.get("dims", {}), sl.child("dims"), "dim bindings") or {}).items():
            e = self.expr(dv, sl, at=("dims", dname))
            if e is not None:
                dims.append((dname, e))
        args: list[tuple[str, Expr | float]] = []
        for aname, av in (self.table(st.get("args", {}), sl.child("args"), "scalar arguments") or {}).items():
            if isinstance(av, float):
                args.append((aname, av))
            elif isinstance(av, str) and av.strip().startswith("isv("):
                hr = self.host_read(av, sl.child("args", aname))
                if hr is not None:
                    args.append((aname, hr))
            else:
                e = self.expr(av, sl, slots=True, at=("args", aname))
                if e is not None:
                    args.append((aname, e))
        return Step(index, launch, zero, tuple(binds), tuple(dims), tuple(args), sl)

    def invariant(self, t: dict, loc: Loc) -> Invariant | None:
        self.keys(t, loc, ("name", "kind", "from", "to", "reason"), "an [[invariant]]")
        name = self.get(t, loc, "name", str)
        kind = self.enum(t, loc, "kind", INVARIANT_KINDS)
        sources = self.strings(t, loc, "from")
        targets = self.strings(t, loc, "to")
        if not sources:
            self.problem(loc, 'an invariant needs "from" (kernels, buffers or slots).')
        if not targets:
            self.problem(loc, 'an invariant needs "to" (kernels, buffers or slots).')
        reason = self.get(t, loc, "reason", str, "")
        if None in (name, kind) or not sources or not targets:
            return None
        return Invariant(name, kind, sources, targets, reason, loc)

    def suppress(self, t: dict, loc: Loc) -> Suppression | None:
        """``[[suppress]] rule = "...", kernel = "..." (or schedule, buffer, subject), matching = "...", reason = "..."``."""
        self.keys(t, loc, ("rule", "kernel", "schedule", "buffer", "slot", "subject", "matching", "reason"), "a [[suppress]]")
        rule_id = self.get(t, loc, "rule", str)
        named = [k for k in ("kernel", "schedule", "buffer", "slot", "subject") if k in t]
        if len(named) > 1:
            self.problem(loc, f"a suppression names one subject; found {_choices(tuple(named))}.")
            return None
        subject = self.get(t, loc, named[0], str) if named else None
        reason = self.get(t, loc, "reason", str, "")
        matching = self.get(t, loc, "matching", str) if "matching" in t else None
        if "matching" in t and matching is None:
            return None  # its type was wrong (reported): a suppression broader than written is no fallback
        if matching is not None and not matching.strip():
            self.problem(loc.child("matching"), 'a suppression\'s "matching" is a text every finding it suppresses contains; found an empty one.')
            return None
        if not (reason or "").strip():
            self.problem(loc.child("reason") if "reason" in t else loc, 'a suppression needs a "reason": why this finding does not apply here.')
            return None
        if rule_id is None:
            return None
        return Suppression(rule_id, subject, reason, loc, matching)

    # -- files --------------------------------------------------------------------------------------
    def load_file(self, src: SourceFile, acc: dict[str, list], parsed: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Parse ``src`` (``parsed``: its value where the caller parsed it already) and load what it
        declares into ``acc``; the parsed value, or None where the text is no valid TOML."""
        parse = _parse_toml if parsed is None else (lambda _text: parsed)
        try:
            data = self.cache.parse(src.text, parse) if self.cache is not None else parse(src.text)
        except RecursionError:
            self.problems.append(ContractProblem(src.path, None, "", "not valid TOML: arrays or tables are nested too deeply."))
            return None
        except ValueError as exc:
            if isinstance(exc, tomllib.TOMLDecodeError):
                self._toml_error(src, exc)
                return None
            # tomllib converts integer literals with int(): more than 4300 digits raise ValueError
            m = _LONG_INTEGER.search(src.text)
            line = src.text.count("\n", 0, m.start()) + 1 if m else None
            digits = len(m.group(0).replace("_", "")) if m else "thousands of"
            self.problems.append(ContractProblem(src.path, line, "", f"not valid TOML: an integer of {digits} digits; contract integers are at most 2^62 in magnitude."))
            return None
        self._load_data(src, data, acc)
        return data

    def _toml_error(self, src: SourceFile, exc: tomllib.TOMLDecodeError) -> None:
        msg = str(exc)
        line = None
        if "(at line " in msg:
            try:
                line = int(msg.rsplit("(at line ", 1)[1].split(",")[0])
            except ValueError:
                line = None
            msg = msg.rsplit(" (at line ", 1)[0]
        lines = src.text.splitlines()
        if msg == "Cannot overwrite a value" and line is not None and line <= len(lines) and "=" in lines[line - 1]:
            # tomllib names no key: take it from the line ("name = ..." given twice in one table)
            key = lines[line - 1].split("=", 1)[0].strip()
            quoted = key if key[:1] in "\"'" and key else f'"{key}"'
            msg = f"{quoted} is given twice in one table; a TOML key can be set once"
        self.problems.append(ContractProblem(src.path, line, "", f"not valid TOML: {msg}."))

    def _load_data(self, src: SourceFile, data: dict[str, Any], acc: dict[str, list]) -> None:
        root = Loc(src, ())
        for key, value in data.items():
            loc = root.child(key)
            if key not in _TOP_KEYS:
                close = difflib.get_close_matches(key, _TOP_KEYS, n=1)
                hint = f' (did you mean "{close[0]}"?)' if close else ""
                self.problem(loc, f'unknown top-level key "{key}"{hint}; contract files hold {_choices(_TOP_KEYS)}.')
            elif key == "dims":
                acc["dims"].extend(self.dims(value, loc))
            elif key == "isv":
                layout = self.isv(value, loc)
                if layout is not None:
                    acc["isv"].append(layout)
            else:
                items = value if isinstance(value, list) else [value]
                build = getattr(self, key)
                for i, item in enumerate(items):
                    il = loc.child(i) if isinstance(value, list) else loc
                    t = self.table(item, il, f"a [[{key}]] table")
                    if t is not None:
                        obj = build(t, il)
                        if obj is not None:
                            acc[key].append(obj)


_TENSOR_KEYS = frozenset(("name", "kind", "dtype", "shape", "role", "mask", "saved", "partial_of", "optional", "values", "doc"))
_PLAIN_KEYS = _TENSOR_KEYS - {"mask", "values"}


def _plain_tensor_param(t: dict, loc: Loc) -> TensorParam | None:
    """The common tensor parameter (no mask, no value domain; every key known, every value of its type)
    built without the per-value checks of :meth:`_Loader.param`, or None: then that path runs and reports
    whatever is wrong. The result is the object that path builds (most of 58,000 parameters at 10,000
    kernels take this way)."""
    if not t.keys() <= _PLAIN_KEYS or t.get("kind", "tensor") != "tensor":
        return None
    name, dtype, shape, role = t.get("name"), t.get("dtype"), t.get("shape"), t.get("role")
    if type(name) is not str or type(dtype) is not str or dtype not in DTYPES or type(role) is not str or role not in ROLES:
        return None
    saved, optional, partial_of, doc = t.get("saved", False), t.get("optional", False), t.get("partial_of"), t.get("doc", "")
    if type(saved) is not bool or type(optional) is not bool or type(doc) is not str:
        return None
    if partial_of is not None and type(partial_of) is not str:
        return None
    if type(shape) is not list:
        return None
    dims = []
    for v in shape:
        if type(v) is not int and type(v) is not str:
            return None
        try:
            e = parse_expr(v)
        except ExprError:
            return None
        if e.slots:
            return None
        dims.append(e)
    return TensorParam(name, dtype, tuple(dims), role, None, saved, partial_of, optional, None, doc, loc)


def _plain_shape(shape: Any) -> tuple[Expr, ...] | None:
    """The shape :meth:`_Loader.shape` builds from ``shape`` where it is an array of integers and dim
    expressions without slot(), else None."""
    if type(shape) is not list:
        return None
    dims = []
    for v in shape:
        if type(v) is not int and type(v) is not str:
            return None
        try:
            e = parse_expr(v)
        except ExprError:
            return None
        if e.slots:
            return None
        dims.append(e)
    return tuple(dims)


_SCALAR_KEYS = frozenset(("name", "kind", "dtype", "value", "doc"))


def _plain_scalar_param(t: dict, loc: Loc) -> ScalarParam | None:
    """The common scalar parameter (``{ name = "B", kind = "scalar", dtype = "i32", value = "B" }``: a dim
    expression, or no value) built without the per-value checks of :meth:`_Loader.param`, or None: then
    that path runs. The result is the object that path builds."""
    if t.get("kind") != "scalar" or not t.keys() <= _SCALAR_KEYS:
        return None
    name, dtype, doc = t.get("name"), t.get("dtype"), t.get("doc", "")
    if type(name) is not str or type(dtype) is not str or dtype not in DTYPES or type(doc) is not str:
        return None
    value = t.get("value", _MISSING)
    if value is _MISSING:
        return ScalarParam(name, dtype, None, doc, loc)
    if type(value) is str:
        if value.strip().startswith("isv("):
            return None
    elif type(value) is not int or DTYPES[dtype][3] == "float" or not -MAX_INT <= value <= MAX_INT:
        return None
    try:
        e = parse_expr(value)
    except ExprError:
        return None
    return ScalarParam(name, dtype, e, doc, loc)


_BUFFER_KEYS = frozenset(("name", "dtype", "shape", "kind", "external", "grad_of", "doc"))


def _plain_buffer(t: dict, loc: Loc) -> Buffer | None:
    """A buffer without a value domain, every key known and every value of its type, built without the
    per-value checks of :meth:`_Loader.buffer`, or None: then that path runs. The result is the object
    that path builds."""
    if not t.keys() <= _BUFFER_KEYS:
        return None
    name, dtype, kind = t.get("name"), t.get("dtype"), t.get("kind", "activation")
    if type(name) is not str or type(dtype) is not str or dtype not in DTYPES or type(kind) is not str or kind not in BUFFER_KINDS:
        return None
    external, grad_of, doc = t.get("external", False), t.get("grad_of"), t.get("doc", "")
    if type(external) is not bool or type(doc) is not str or (grad_of is not None and type(grad_of) is not str):
        return None
    shape = _plain_shape(t.get("shape"))
    if shape is None:
        return None
    return Buffer(name, dtype, shape, kind, external, grad_of, None, doc, loc)


def _plain_triple(value: Any) -> tuple[Expr, Expr, Expr] | None:
    """What :meth:`_Loader.triple` builds from a present ``value`` of one to three integers and dim
    expressions without slot() (or one such value), else None."""
    if type(value) is int or type(value) is str:
        value = [value]
    elif type(value) is not list or not 1 <= len(value) <= 3:
        return None
    out = _plain_shape(value + [1] * (3 - len(value)))
    return out  # type: ignore[return-value]


def _plain_strings(value: Any) -> tuple[str, ...] | None:
    """What :meth:`_Loader.strings` gives for a present string or array of strings, else None."""
    if type(value) is str:
        return (value,)
    if type(value) is not list or not all(type(v) is str for v in value):
        return None
    return tuple(value)


_KERNEL_KEYS = frozenset(("name", "source", "entry", "stage", "phase", "grid", "block", "shared_bytes", "dims", "isv_reads", "isv_writes", "params", "doc"))


def _plain_kernel(loader: _Loader, t: dict, loc: Loc) -> Kernel | None:
    """A kernel of the common keys only (no cpp_name, reference, property, verify, tolerance, requires or
    aliases; ISV reads by slot name), every one of its type, built without the per-value checks of
    :meth:`_Loader.kernel`, or None: then that path runs and reports whatever is wrong. Its parameters go
    through :meth:`_Loader.param` (their own fast paths, or the checked one with its problems), exactly
    as that path takes them. The result is the object that path builds."""
    if not t.keys() <= _KERNEL_KEYS:
        return None
    name, source, entry, stage = t.get("name"), t.get("source"), t.get("entry"), t.get("stage")
    phase, doc, raw = t.get("phase", ""), t.get("doc", ""), t.get("params")
    if type(name) is not str or type(source) is not str or type(stage) is not str or stage not in STAGES:
        return None
    if type(phase) is not str or type(doc) is not str or type(raw) is not list or (entry is not None and type(entry) is not str):
        return None
    grid, block = _plain_triple(t.get("grid")), _plain_triple(t.get("block"))
    if grid is None or block is None:
        return None
    shared = None
    if "shared_bytes" in t:
        shared = _plain_shape([t["shared_bytes"]])
        if shared is None:
            return None
        shared = shared[0]
    local = _plain_strings(t.get("dims", []))
    reads = _plain_strings(t.get("isv_reads", []))
    writes = _plain_strings(t.get("isv_writes", []))
    if local is None or reads is None or writes is None or type(t.get("isv_reads", [])) is not list:
        return None
    params: list[Param] = []
    for i, p in enumerate(raw):
        param = loader.param(p, loc.child("params", i), name or "?")
        if param is not None:
            params.append(param)
    return Kernel(
        name=name, source=source, stage=stage, phase=phase, params=tuple(params), grid=grid, block=block,
        entry=entry if entry else name, cpp_name=None, shared_bytes=shared, dims=local,
        isv_reads=tuple(IsvRead(r, False, loc.child("isv_reads", i)) for i, r in enumerate(reads)),
        isv_writes=writes, doc=doc, loc=loc,
    )  # fmt: skip


_STEP_KEYS = frozenset(("launch", "bind"))


def _plain_step(st: dict, sl: Loc, index: int) -> Step | None:
    """A launch step binding buffers by name only (``launch = "k"``, ``bind = { x = "buf" }``), built
    without the per-value checks of :meth:`_Loader.step`, or None: then that path runs. The result is
    the object that path builds."""
    if not st.keys() <= _STEP_KEYS:
        return None
    launch = st.get("launch")
    bind = st.get("bind", {})
    if type(launch) is not str or type(bind) is not dict:
        return None
    binds = []
    for pname, target in bind.items():
        if type(target) is not str:
            return None
        binds.append((pname, Binding(None if target == NULL else target, None, sl.child("bind", pname))))
    return Step(index, launch, None, tuple(binds), (), (), sl)


# rtoml 0.14 reads TOML 1.1, tomllib TOML 1.0. Both give identical values for every text in the subset
# below, so rtoml parses only texts that pass these lexical screens (a false alarm only costs speed), and
# tomllib parses everything else and everything rtoml rejects, so that errors keep tomllib's messages:
# control characters and CR (rtoml keeps CRLF inside multi-line strings), \x and \e escapes, times
# (seconds are optional in 1.1; offsets come back as another tzinfo class), a trailing comma or a line
# break inside an inline table (1.1 only). rtoml refuses nesting deeper than tomllib does.
_HOST_READ = re.compile(r"isv\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)")  # a scalar read on the host from one ISV slot
_FAST_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_FAST_ESCAPE = re.compile(r"\\[xXeE]")
_FAST_TIME = re.compile(r":\d")
_FAST_TRAILING_COMMA = re.compile(r",[ \t\n]*+(?:#[^\n]*+[ \t\n]*+)*+\}")
_STRINGS_AND_COMMENTS = re.compile(
    r'"""(?:[^"\\]++|\\[\s\S]|"(?!""))*+"{3,5}'
    r"|'''(?:[^']++|'(?!''))*+'{3,5}"
    r'|"(?:[^"\\\n]++|\\.)*+"'
    r"|'[^'\n]*+'"
    r"|#[^\n]*+"
)
_ONE_LINE_TABLE = re.compile(r"\{[^{}\n]*+\}")


def _rtoml_agrees(text: str) -> bool:
    """Whether ``text`` is in the subset of TOML where rtoml and tomllib give the same result."""
    if _FAST_CONTROL.search(text) or _FAST_ESCAPE.search(text) or _FAST_TRAILING_COMMA.search(text):
        return False
    for m in _FAST_TIME.finditer(text):
        if m.start() and text[m.start() - 1].isdigit():
            return False
    if "{" not in text and "}" not in text:
        return True
    # every inline table on one line: strip strings and comments (in a text rtoml accepts they are
    # well formed, so this tokenizes it exactly), drop innermost one-line tables until none is left
    bare = _STRINGS_AND_COMMENTS.sub("", text)
    while True:
        bare, n = _ONE_LINE_TABLE.subn("", bare)
        if not n:
            break
    return "{" not in bare and "}" not in bare


def _parse_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, by rtoml where it is installed and agrees, else by the compiled tomli;
    tomllib's values and errors in every case (whatever a fast parser refuses, tomllib decides)."""
    agrees: bool | None = None
    if _rtoml is not None:
        agrees = _rtoml_agrees(text)
        if agrees:
            try:
                return _rtoml.loads(text)
            except Exception:  # noqa: BLE001 - anything rtoml refuses, tomllib decides (with its message)
                pass
    if _tomli is not None:
        tomli, reads_1_1 = _tomli
        if not reads_1_1 or (agrees if agrees is not None else _rtoml_agrees(text)):
            try:
                return tomli.loads(text)
            except Exception:  # noqa: BLE001 - errors are tomllib's (same messages, its exception class)
                pass
    return tomllib.loads(text)


_LONG_INTEGER = re.compile(r"(?<![\w.])[+-]?(?:0[xob])?[0-9a-fA-F_]{4000,}")


def _finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and (math.isfinite(x) if isinstance(x, float) else abs(x) <= MAX_INT)


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple((k, _freeze(x)) for k, x in v.items())
    return v


def _is_fingerprint(s: str) -> bool:
    return len(s) == 18 and s.startswith("0x") and all(c in "0123456789abcdef" for c in s[2:])


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a large object graph is built, back on (if it was) after.

    Loading 10,000 kernels allocates about a million long-lived objects; every full collection on the way
    walks all of them again, which made loading grow faster than linearly (2.8 of 8.2 s). Nothing built
    here is cyclic garbage, and reference counting still frees whatever is dropped. On the way out the
    survivors are moved to the oldest generation (``freeze`` then ``unfreeze``, two list splices) rather
    than left in the youngest, where the next young collection would walk all of them once more; that is
    skipped when the process uses ``gc.freeze`` itself.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def contract_files(folder: Path) -> list[Path]:
    """Every ``*.toml`` under ``folder``, sorted by relative path (the load order).

    Links to folders are not followed and folders nested deeper than
    :data:`~audit.untrusted.MAX_DEPTH` are not entered (:func:`find_contract_files` says which).
    """
    return find_contract_files(folder)[0]


def find_contract_files(folder: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """``(files, skipped)``: the sorted ``*.toml`` files under ``folder`` and ``(path, why)`` of what was
    not read (a folder too deep or unreadable)."""
    from .untrusted import walk_files

    found, skipped = walk_files(folder, ".toml")
    files = found  # links and special files too: the reader refuses them, naming why
    return sorted(files, key=lambda p: p.relative_to(folder).as_posix()), skipped


def load_contracts(
    folder: Path,
    root: Path | None = None,
    texts: dict[str, str] | None = None,
    cache: Path | None = None,
    read: ContractTexts | None = None,
) -> ContractSet:
    """Load every contract file under ``folder`` (paths in messages are relative to ``root``).

    ``texts`` (relative path -> text) loads from memory instead, e.g. contracts read from a git revision.
    ``cache`` is a folder of parsed files (:mod:`audit.toml_cache`): a file whose text is there is not
    parsed again. ``read`` is what :func:`read_contract_files` returned for ``folder``, where the caller
    has read the files already. Raises :class:`ContractError` listing every problem found.
    """
    with gc_paused():
        return _load_contracts(folder, root, texts, cache, read)


class ContractTexts:
    """The contract files of a folder as read from disk: texts by relative path, and the problems of
    reading them (a file refused, not UTF-8, a folder too deep), in the order they were found.

    A load from these texts fills ``values`` (relative path -> the parsed TOML value; a value put there
    before the load is used instead of parsing that file's text again) and ``sources`` (relative path ->
    the :class:`SourceFile` its model's locations point into): what the check cache keys and validates a
    result by (:mod:`audit.check_cache`)."""

    __slots__ = ("texts", "problems", "values", "sources")

    def __init__(self, texts: dict[str, str], problems: list[ContractProblem]) -> None:
        self.texts = texts
        self.problems = problems
        self.values: dict[str, dict[str, Any]] = {}
        self.sources: dict[str, SourceFile] = {}


def read_contract_files(folder: Path, root: Path) -> ContractTexts:
    """Read every ``*.toml`` under ``folder`` (``root`` resolved); :class:`ContractError` where the folder
    itself is unusable (a loop of links, missing, a file, no contract file in it)."""
    from .untrusted import CONTRACT_LIMIT, UnreadableFile, read_bytes, resolve

    problems: list[ContractProblem] = []
    if resolve(folder) is None:
        raise ContractError([ContractProblem(_rel(folder, root), None, "", "the contracts folder is a symbolic link loop; expected a folder of *.toml contract files.")])
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise ContractError([ContractProblem(_rel(folder, root), None, "", f"the contracts folder {what}; expected a folder of *.toml contract files.")])
    paths, skipped = find_contract_files(folder)
    for path, why in skipped:
        problems.append(ContractProblem(_rel(path, root), None, "", f"this folder {why}; its contract files were not read."))
    if not paths and not skipped:
        raise ContractError([ContractProblem(_rel(folder, root), None, "", "the contracts folder holds no *.toml contract files; expected at least one.")])
    texts = {}
    real = resolve(folder)
    try:  # where the folder lies inside the root, so does every plain file the walk found in it
        base = real.relative_to(root).as_posix() if real is not None else None
    except ValueError:
        base = None
    prefix = str(folder) + os.sep
    for path in paths:
        plain = _read_plain(path, CONTRACT_LIMIT) if base is not None and str(path).startswith(prefix) else None
        if plain is not None:
            sub = str(path)[len(prefix) :].replace(os.sep, "/")
            rel, raw = (sub if base == "." else f"{base}/{sub}"), plain
        else:
            rel = _rel(path, root)
        try:
            raw = plain if plain is not None else read_bytes(path, root, CONTRACT_LIMIT)
        except OSError as exc:
            why = str(exc) if isinstance(exc, UnreadableFile) else f"cannot be read ({exc.strerror or exc})"
            problems.append(ContractProblem(rel, None, "", f"this file {why}; contract files are regular files inside the project root."))
            continue
        try:
            texts[rel] = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            bad = raw[exc.start : exc.start + 1].hex()
            problems.append(
                ContractProblem(rel, line, "", f"expected UTF-8 text, found the byte 0x{bad}, which is not UTF-8; save the file as UTF-8.")
            )
    return ContractTexts(texts, problems)


def _read_plain(path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` where it is a regular file (not a link) of at most ``limit`` bytes; None
    for anything else, which :func:`~audit.untrusted.read_bytes` then judges and names.

    The walk of the contracts folder enters no linked folder, so such a file lies where its path says:
    the fast way through most contract files, without resolving each path."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def parser_name() -> str:
    """Which TOML parser :func:`_parse_toml` tries first (the values are tomllib's whichever it is)."""
    if _rtoml is not None:
        return f"rtoml-{_rtoml.VERSION}"
    if _tomli is not None:
        return f"tomli-{getattr(_tomli[0], '__version__', '?')}"
    return "tomllib"


def _load_contracts(folder: Path, root: Path | None, texts: dict[str, str] | None, cache: Path | None, read: ContractTexts | None) -> ContractSet:
    root = (root or folder.parent).resolve()
    parsed = None
    if cache is not None:
        from .toml_cache import ParsedCache

        parsed = ParsedCache(cache, parser_name(), str(folder.absolute()))
    loader = _Loader(root, parsed)
    acc: dict[str, list] = {k: [] for k in _TOP_KEYS}
    files: list[str] = []
    from_disk = texts is None
    if texts is None:
        read = read or read_contract_files(folder, root)
        loader.problems.extend(read.problems)
        texts = read.texts
    for rel in sorted(texts):
        files.append(rel)
        src = SourceFile(rel, texts[rel].removeprefix("\ufeff"))  # a BOM is no TOML
        if not from_disk or read is None:
            loader.load_file(src, acc)
            continue
        value = loader.load_file(src, acc, read.values.get(rel))
        read.sources[rel] = src
        if value is not None:
            read.values[rel] = value
    if parsed is not None:
        parsed.save()
    if len(acc["isv"]) > 1:
        second = acc["isv"][1]
        loader.problem(second.loc, f'a second [isv] table; the layout is already declared in "{acc["isv"][0].loc.file}".')
    _check_cases(loader, acc)
    if from_disk and not loader.problems and not any(acc.values()):
        where = _rel(folder, root)
        loader.problems.append(ContractProblem(where, None, "", f"the {len(files)} contract file{'s' if len(files) != 1 else ''} under the contracts folder declare nothing; expected at least one [[kernel]], [dims], [[buffer]], [isv] or [[schedule]]."))
    if loader.problems:
        raise ContractError(loader.problems)
    return ContractSet(
        root=root,
        dims=tuple(acc["dims"]),
        buffers=tuple(acc["buffer"]),
        kernels=tuple(acc["kernel"]),
        schedules=tuple(acc["schedule"]),
        invariants=tuple(acc["invariant"]),
        isv=acc["isv"][0] if acc["isv"] else None,
        files=tuple(files),
        suppressions=tuple(acc["suppress"]),
    )


def _check_cases(loader: _Loader, acc: dict[str, list]) -> None:
    """Every extra verify case gives each runtime dim (and nothing else) a value inside its range."""
    runtime = {d.name: d for d in acc["dims"] if d.kind == "runtime"}
    owners = [(k.verify.cases, k.verify.loc.child("cases")) for k in acc["kernel"] if k.verify.cases]
    owners += [(s.verify_cases, s.loc.child("verify_cases")) for s in acc["schedule"] if s.verify_cases]
    for cases, loc in owners:
        for i, case in enumerate(cases):
            text = ",".join(f"{n}={v}" for n, v in case)
            il = loc.child(i)
            names = [n for n, _ in case]
            bad = next((n for n in names if n not in runtime), None)
            if bad is not None:
                valid = ", ".join(f'"{n}"' for n in runtime) or "none"
                loader.problem(il, f'case "{text}": "{bad}" is not a runtime dim; the runtime dims are {valid}.')
                continue
            missing = [n for n in runtime if n not in names]
            if missing or len(set(names)) != len(names):
                what = "does not bind " + ", ".join(f'"{n}"' for n in missing) if missing else "binds a dim twice"
                loader.problem(il, f'case "{text}" {what}; a case gives every runtime dim one value.')
                continue
            for n, v in case:
                d = runtime[n]
                if (d.min is not None and v < d.min) or (d.max is not None and v > d.max):
                    loader.problem(il, f'case "{text}": {n} = {v} is outside its range {d.min}..{d.max}.')
                    break


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except (ValueError, RuntimeError, OSError):  # outside the root, or a loop of links
        try:
            return path.absolute().relative_to(root).as_posix()
        except ValueError:
            return path.as_posix()
