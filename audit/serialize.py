"""A :class:`~audit.model.ContractSet` back to TOML: canonical contract files that load to an equal model.

:func:`dump_contracts` writes one file per section (``dims.toml``, ``buffers.toml``, ``isv.toml``,
``kernels.toml``, ``schedules.toml``, ``invariants.toml``), every field of the model that differs from the
loader's default, in a fixed key order. Loading the files again gives a model equal to the first
(locations are not part of equality), and dumping that model gives the same text: the form is canonical,
so two contract sets can be compared as text, and a tool that edits the model can write it back.

>>> from audit.load import load_contracts
>>> cs = load_contracts(Path("contracts"))                          # doctest: +SKIP
>>> files = dump_contracts(cs)                                      # doctest: +SKIP
>>> texts = {f"contracts/{name}": text for name, text in files.items()}   # doctest: +SKIP
>>> load_contracts(Path("contracts"), cs.root, texts=texts) == cs   # doctest: +SKIP
True
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable
from typing import Any

from .dims import Expr
from .model import (
    DTYPES,
    Acknowledgement,
    Binding,
    Buffer,
    ContractSet,
    Dim,
    Invariant,
    IsvLayout,
    IsvParam,
    IsvRead,
    Kernel,
    Mask,
    Property,
    HostRead,
    ScalarParam,
    Schedule,
    Slot,
    Step,
    TensorParam,
    Tolerance,
    Values,
    VerifySpec,
)

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def dump_contracts(cs: ContractSet) -> dict[str, str]:
    """File name -> canonical TOML text for every section ``cs`` declares (empty sections are left out).

    Dims live in one TOML table, where a name can appear once; a contract set that declares a dim twice
    (a DUPLICATE_NAME finding, not a load error) gets one extra ``dims~NNNN.toml`` per repetition, named
    so that the load order keeps the declaration order.
    """
    files: dict[str, str] = {}
    chunks: list[list[Dim]] = []
    for d in cs.dims:
        if not chunks or any(x.name == d.name for x in chunks[-1]):
            chunks.append([])
        chunks[-1].append(d)
    for i, chunk in enumerate(chunks):
        name = "dims.toml" if i == 0 else f"dims~{i:04d}.toml"
        files[name] = "[dims]\n" + "".join(f"{_key(d.name)} = {_inline(_dim(d))}\n" for d in chunk)
    sections = (
        ("buffers.toml", "buffer", cs.buffers, _buffer),
        ("kernels.toml", "kernel", cs.kernels, _kernel),
        ("schedules.toml", "schedule", cs.schedules, _schedule),
        ("invariants.toml", "invariant", cs.invariants, _invariant),
        ("suppress.toml", "suppress", cs.suppressions, _suppression),
    )
    for name, header, items, fn in sections:
        if items:
            files[name] = "\n".join(fn(item) for item in items)
    if cs.isv is not None:
        files["isv.toml"] = _isv(cs.isv)
    return dict(sorted(files.items()))


# ---------------------------------------------------------------------------------------------------
# sections


def _dim(d: Dim) -> dict[str, Any]:
    out: dict[str, Any]
    if d.kind == "fixed":
        out = {"value": d.value}
    elif d.kind == "derived":
        out = {"expr": d.expr}
    else:
        out = {"min": d.min, "max": d.max}
        if d.test:
            out["test"] = d.test
    return _with_doc(out, d.doc)


def _buffer(b: Buffer) -> str:
    t: dict[str, Any] = {"name": b.name, "dtype": b.dtype, "shape": b.shape, "kind": b.kind}
    if b.external:
        t["external"] = True
    if b.grad_of is not None:
        t["grad_of"] = b.grad_of
    if b.values is not None:
        t["values"] = _values(b.values)
    return _table("[[buffer]]", _with_doc(t, b.doc))


def _values(v: Values) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v.choices:
        out["choices"] = v.choices
    if v.weights:
        out["weights"] = v.weights
    if v.min is not None:
        out["min"] = v.min
    if v.max is not None:
        out["max"] = v.max
    if v.scale is not None:
        out["scale"] = v.scale
    if v.include:
        out["include"] = v.include
    if not v.stress:
        out["stress"] = False
        out["stress_reason"] = v.stress_reason
    return out


def _kernel(k: Kernel) -> str:
    t: dict[str, Any] = {"name": k.name, "source": k.source}
    if k.entry is not None and not (k.entry == k.name and k.cpp_name is None):
        t["entry"] = k.entry
    if k.cpp_name is not None:
        t["cpp_name"] = k.cpp_name
    t["stage"] = k.stage
    if k.phase:
        t["phase"] = k.phase
    for key in ("reference", "gradcheck"):
        if getattr(k, key) is not None:
            t[key] = getattr(k, key)
    t["grid"] = k.grid
    t["block"] = k.block
    if k.shared_bytes is not None:
        t["shared_bytes"] = k.shared_bytes
    if k.dims:
        t["dims"] = k.dims
    if k.isv_reads:
        t["isv_reads"] = [_isv_read(r) for r in k.isv_reads]
    if k.isv_writes:
        t["isv_writes"] = k.isv_writes
    if k.nondeterministic is not None:
        t["nondeterministic"] = _tolerance(k.nondeterministic)
    if k.verify != VerifySpec() or k.verify.cases or k.verify.variant_cases is not None or k.verify.binding_cases is not None or k.verify.bindings or not k.verify.neighbours:  # outside equality (and the hash)
        t["verify"] = _verify(k.verify)
    if k.requires:
        t["requires"] = [r.text for r in k.requires]
    if k.aliases:
        t["aliases"] = [list(a.names) for a in k.aliases]
    _with_doc(t, k.doc)
    lines = [_table("[[kernel]]", t).rstrip("\n")]
    lines.append("params = [")
    lines.extend(f"  {_inline(_param(p))}," for p in k.params)
    lines.append("]")
    text = "\n".join(lines) + "\n"
    for prop in k.properties:
        text += "\n" + _table("[[kernel.property]]", _property(prop))
    return text


def _isv_read(r: IsvRead) -> Any:
    return {"slot": r.slot, "previous_step": True} if r.previous_step else r.slot


def _tolerance(t: Tolerance) -> dict[str, Any]:
    out: dict[str, Any] = {"rtol": t.rtol, "atol": t.atol}
    if t.reason:
        out["reason"] = t.reason
    return out


def _verify(v: VerifySpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v.rowwise:
        out["rowwise"] = True
    if v.dims:
        out["dims"] = dict(v.dims)
    for key in ("rtol", "atol", "max_batch"):
        if getattr(v, key) is not None:
            out[key] = getattr(v, key)
    if v.cases:
        out["cases"] = [_case_text(c) for c in v.cases]
    if v.variant_cases is not None:
        out["variant_cases"] = v.variant_cases
    if v.binding_cases is not None:
        out["binding_cases"] = v.binding_cases
    if v.bindings:
        out["bindings"] = [dict(b) for b in v.bindings]
    if not v.neighbours:
        out["neighbours"] = False
    if v.sample_axes:
        out["sample_axes"] = dict(v.sample_axes)
    return out


def _case_text(case: tuple[tuple[str, int], ...]) -> str:
    """``"B=4,T=17"``: a verify case as the contracts write it."""
    return ",".join(f"{n}={v}" for n, v in case)


def _param(p: TensorParam | ScalarParam | IsvParam) -> dict[str, Any]:
    if isinstance(p, IsvParam):
        return _with_doc({"name": p.name, "kind": "isv"}, p.doc)
    if isinstance(p, ScalarParam):
        t: dict[str, Any] = {"name": p.name, "kind": "scalar", "dtype": p.dtype}
        if isinstance(p.value, HostRead):
            t["value"] = p.value.text
        elif isinstance(p.value, Expr) and DTYPES.get(p.dtype, "????")[3] == "float":
            t["value"] = p.value.text  # a float scalar reads an integer as a number: keep the expression a string
        elif p.value is not None:
            t["value"] = p.value
        return _with_doc(t, p.doc)
    t = {"name": p.name, "dtype": p.dtype, "shape": p.shape, "role": p.role}
    if p.mask is not None:
        t["mask"] = _mask(p.mask)
    if p.saved:
        t["saved"] = True
    if p.partial_of is not None:
        t["partial_of"] = p.partial_of
    if p.optional:
        t["optional"] = True
    if p.values is not None:
        t["values"] = _values(p.values)
    if p.align:
        t["align"] = p.align
    if p.write_range is not None:
        w = p.write_range
        t["write_range"] = {"axis": w.axis, "start": w.start, "stop": w.stop}
    return _with_doc(t, p.doc)


def _mask(m: Mask) -> dict[str, Any]:
    out: dict[str, Any] = {"skip_value": m.skip_value}
    if m.zeroes:
        out["zeroes"] = m.zeroes
    return out


def _property(p: Property) -> dict[str, Any]:
    return {"kind": p.kind, **dict(p.options)}


def _isv(layout: IsvLayout) -> str:
    t: dict[str, Any] = {
        "buffer": layout.buffer,
        "dtype": layout.dtype,
        "total_dim": layout.total_dim,
        "reset_events": layout.reset_events,
    }
    if layout.fingerprint is not None:
        t["fingerprint"] = layout.fingerprint
    parts = [_table("[isv]", t)]
    parts.extend(_table("[[isv.slot]]", _slot(s, layout.dtype)) for s in layout.slots)
    parts.extend(_table("[[isv.acknowledge]]", _acknowledgement(a)) for a in layout.acknowledgements)
    return "\n".join(parts)


def _slot(s: Slot, layout_dtype: str) -> dict[str, Any]:
    t: dict[str, Any] = {"index": s.index, "name": s.name, "role": s.role}
    if s.dtype != layout_dtype:
        t["dtype"] = s.dtype
    if s.count != 1:
        t["count"] = s.count
    if s.reset:
        t["reset"] = dict(s.reset)
    if s.shared_writers:
        t["shared_writers"] = s.shared_writers
    return _with_doc(t, s.doc)


def _acknowledgement(a: Acknowledgement) -> dict[str, Any]:
    t: dict[str, Any] = {"from": a.from_fingerprint, "to": a.to_fingerprint, "reason": a.reason}
    if a.migrator:
        t["migrator"] = {str(old): new for old, new in a.migrator}
    return t


def _schedule(s: Schedule) -> str:
    t: dict[str, Any] = {"name": s.name}
    if s.stream != "default":
        t["stream"] = s.stream
    if s.graph_capture:
        t["graph_capture"] = True
    if s.recapture is not None:
        t["recapture"] = s.recapture
    if s.after:
        t["after"] = s.after
    if s.equivalent_to is not None:
        t["equivalent_to"] = s.equivalent_to
    if s.tolerance is not None:
        t["tolerance"] = _tolerance(s.tolerance)
    if s.verify_cases:
        t["verify_cases"] = [_case_text(c) for c in s.verify_cases]
    parts = [_table("[[schedule]]", _with_doc(t, s.doc))]
    parts.extend(_table("[[schedule.step]]", _step(step)) for step in s.steps)
    return "\n".join(parts)


def _suppression(x: Any) -> str:
    t: dict[str, Any] = {"rule": x.rule}
    if x.subject is not None:
        t["subject"] = x.subject
    if x.matching is not None:
        t["matching"] = x.matching
    t["reason"] = x.reason
    return _table("[[suppress]]", t)


def _step(step: Step) -> dict[str, Any]:
    t: dict[str, Any] = {"launch": step.launch} if step.launch is not None else {"zero": step.zero}
    if step.bind:
        t["bind"] = {name: _binding(b) for name, b in step.bind}
    if step.dims:
        t["dims"] = dict(step.dims)
    if step.args:
        t["args"] = {k: (v.text if isinstance(v, HostRead) else v) for k, v in step.args}
    return t


def _binding(b: Binding) -> Any:
    buffer = "NULL" if b.buffer is None else b.buffer
    if b.view is None:
        return buffer
    out: dict[str, Any] = {"buffer": buffer, "view": b.view}
    if b.offset is not None:
        out["offset"] = b.offset
    return out


def _invariant(inv: Invariant) -> str:
    t: dict[str, Any] = {"name": inv.name, "kind": inv.kind, "from": inv.sources, "to": inv.targets}
    return _table("[[invariant]]", _with_doc(t, inv.reason, key="reason"))


def _with_doc(t: dict[str, Any], doc: str, key: str = "doc") -> dict[str, Any]:
    if doc:
        t[key] = doc
    return t


# ---------------------------------------------------------------------------------------------------
# TOML values


def toml_value(value: Any) -> str:
    """``value`` (a scalar, list, tuple, dict or :class:`~audit.dims.Expr`) as an inline TOML value.

    >>> print(toml_value({"min": 1, "max": 8, "doc": 'rows "b"'}))
    { min = 1, max = 8, doc = "rows \\"b\\"" }
    """
    return _inline(value)


def toml_key(key: str) -> str:
    """``key`` bare where TOML allows it, else as a quoted string: ``toml_key("a b") == '"a b"'``."""
    return _key(key)


def _table(header: str, t: dict[str, Any]) -> str:
    return header + "\n" + "".join(f"{_key(k)} = {_inline(v)}\n" for k, v in t.items())


def _key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else _string(k)


def _string(s: str) -> str:
    out = []
    for c in s:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _expr(e: Expr) -> str:
    # The loader reads an integer n as Expr(str(n), ("int", n)) (and the string "-n" as a negation, a
    # different tree), so an integer literal is written as an integer and everything else as its text.
    tree = e.tree
    if isinstance(tree, tuple) and len(tree) == 2 and tree[0] == "int" and e.text == str(tree[1]):
        return str(tree[1])
    return _string(e.text)


def _float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def _inline(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, Expr):
        return _expr(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_inline(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, Iterable):
        return "[" + ", ".join(_inline(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")
