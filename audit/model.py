"""The contract model: immutable dataclasses built by :mod:`audit.load` from the TOML contracts.

Nothing downstream reads TOML. Every object carries a :class:`Loc` (file and key path) so that any
finding can point at a file and line; the line itself is computed only when a message needs it.
Locations are excluded from equality, so a model loaded from re-serialised contracts compares equal.

>>> from audit.load import load_contracts
>>> cs = load_contracts(Path("."))            # doctest: +SKIP
>>> cs.kernel("aux_trunk_forward").stage
'forward'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from ._tomlpos import line_of, locate_lines
from .dims import Expr

DTYPES = {
    # name: (bytes, numpy name, C type, kind)
    "f32": (4, "float32", "float", "float"),
    "f64": (8, "float64", "double", "float"),
    "f16": (2, "float16", "__half", "float"),
    "bf16": (2, "uint16", "__nv_bfloat16", "float"),
    "i8": (1, "int8", "signed char", "int"),
    "u8": (1, "uint8", "unsigned char", "int"),
    "i16": (2, "int16", "short", "int"),
    "i32": (4, "int32", "int", "int"),
    "u32": (4, "uint32", "unsigned int", "int"),
    "i64": (8, "int64", "long long", "int"),
    "u64": (8, "uint64", "unsigned long long", "int"),
}
ROLES = ("in", "out", "inout", "accumulate")
RECAPTURE_MODES = ("every_step",)
STAGES = ("producer", "forward", "loss", "backward", "reduce", "optimizer", "other")
BUFFER_KINDS = (
    "input", "parameter", "activation", "label", "loss", "partial", "gradient",
    "accumulator", "optimizer_state", "scratch",
)  # fmt: skip
SLOT_ROLES = ("ema", "scale", "divisor", "sum", "counter", "fingerprint", "padding", "flag", "value")
MULTIPLICATIVE_ROLES = ("scale", "divisor")
ADDITIVE_ROLES = ("sum", "counter")
INVARIANT_KINDS = ("path", "no_path")
NULL = "NULL"


class SourceFile:
    """One contract file's text; key-path line numbers are computed once, on first use.

    ``asked`` records every line asked (key path -> line): the only way a check's result depends on a
    contract file's text beyond its parsed values, which the check cache asks again before it reuses a
    result for another text of the same values (:mod:`audit.check_cache`)."""

    __slots__ = ("path", "text", "_lines", "asked")

    def __init__(self, path: str, text: str):
        self.path = path
        self.text = text
        self._lines: dict | None = None
        self.asked: dict[tuple, int | None] = {}

    def line(self, key_path: tuple) -> int | None:
        if self._lines is None:
            self._lines = locate_lines(self.text)
        line = self.asked[key_path] = line_of(self._lines, key_path)
        return line


@dataclass(frozen=True, slots=True)
class Loc:
    """Where a value came from: a contract file (relative to the root) and a TOML key path."""

    source: SourceFile | None
    key: tuple = ()

    @property
    def file(self) -> str:
        return self.source.path if self.source else ""

    @property
    def line(self) -> int | None:
        return self.source.line(self.key) if self.source else None

    def child(self, *key: object) -> Loc:
        loc = _new(Loc)  # what Loc(self.source, self.key + key) builds, without the frozen __init__
        _set_source(loc, self.source)
        _set_key(loc, self.key + key)
        return loc

    @property
    def key_text(self) -> str:
        """``kernel[2].params[4].dtype`` (indices as the TOML arrays number them)."""
        out = ""
        for part in self.key:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out

    def __str__(self) -> str:
        line = self.line
        return f"{self.file}:{line}" if line else self.file


_new = object.__new__
_set_source = Loc.source.__set__  # type: ignore[attr-defined]  # the slots' own setters
_set_key = Loc.key.__set__  # type: ignore[attr-defined]
NOWHERE = Loc(None)


def _loc() -> Loc:
    return field(default=NOWHERE, compare=False, repr=False)


# ---------------------------------------------------------------------------------------------------
# dims and ISV


@dataclass(frozen=True, slots=True)
class Dim:
    """A named dim: fixed (``value``), runtime (``min``..``max``) or derived (``expr``)."""

    name: str
    kind: str  # "fixed" | "runtime" | "derived"
    value: int | None = None
    min: int | None = None
    max: int | None = None
    expr: Expr | None = None
    doc: str = ""
    loc: Loc = _loc()
    # values a verify case should give this runtime dim (``test = [1, 17, 64]``); not part of the contract's
    # meaning (hash), the cases that ran are recorded in the evidence
    test: tuple[int, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class Slot:
    """One ISV slot (or a contiguous group of ``count`` slots starting at ``index``)."""

    index: int
    name: str
    role: str
    dtype: str = "f32"
    count: int = 1
    reset: tuple[tuple[str, float | str], ...] = ()  # (event, value or "keep"), in file order
    shared_writers: tuple[str, ...] = ()
    doc: str = ""
    loc: Loc = _loc()

    @property
    def indices(self) -> range:
        return range(self.index, self.index + self.count)

    def reset_value(self, event: str) -> float | str | None:
        for ev, v in self.reset:
            if ev == event:
                return v
        return None


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """An explicit acceptance of an ISV layout change (``from`` -> ``to`` fingerprint) with its reason."""

    from_fingerprint: str
    to_fingerprint: str
    reason: str
    migrator: tuple[tuple[int, int], ...] = ()  # old index -> new index, where a migrator exists
    loc: Loc = _loc()


@dataclass(frozen=True, slots=True)
class IsvLayout:
    """The ISV layout: slots, total dimension, reset events and the pinned fingerprint."""

    buffer: str
    dtype: str
    total_dim: int
    reset_events: tuple[str, ...]
    slots: tuple[Slot, ...]
    fingerprint: str | None = None
    acknowledgements: tuple[Acknowledgement, ...] = ()
    loc: Loc = _loc()

    def slot(self, name: str) -> Slot | None:
        for s in self.slots:
            if s.name == name:
                return s
        return None


# ---------------------------------------------------------------------------------------------------
# kernels


@dataclass(frozen=True, slots=True)
class Mask:
    """Row mask semantics of an integer tensor: rows whose value is ``skip_value`` are skipped."""

    skip_value: int
    zeroes: tuple[str, ...] = ()  # outputs whose skipped rows must be exactly zero
    loc: Loc = _loc()


@dataclass(frozen=True, slots=True)
class Values:
    """The domain the runner draws a tensor's test data from.

    ``choices`` (with optional ``weights``) for flags and labels, or ``min``/``max`` (dim expressions
    for integers, numbers for floats), or ``scale`` (standard deviation of normal float data).
    ``include`` lists edge values (thresholds, exact zeros) mixed into the data at a small rate, so a
    ``<`` that should be ``<=`` is caught at the boundary that random data never hits. ``stress = false``
    (with ``stress_reason``) keeps the tensor out of the numeric stress cases.
    """

    choices: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    min: Expr | float | None = None
    max: Expr | float | None = None
    scale: float | None = None
    include: tuple[float, ...] = ()
    loc: Loc = _loc()
    # numeric stress cases (audit/search/values.py): ``stress = false`` opts the tensor out, with its reason;
    # absent (the default) they leave the contract hash as it was
    stress: bool = field(default=True, metadata={"hash_omit_default": True})
    stress_reason: str = field(default="", metadata={"hash_omit_default": True})


@dataclass(frozen=True, slots=True)
class VerifySpec:
    """How the GPU runner verifies a kernel beyond the defaults (see docs/verification.md)."""

    rowwise: bool = False  # output row b depends only on input row b (+ non-batch inputs): large B is checked on sampled rows
    dims: tuple[tuple[str, tuple[int, ...]], ...] = ()  # verify at each of these values of fixed dims, e.g. K = [2, 3]
    rtol: float | None = None  # relative-norm tolerance override
    atol: float | None = None  # elementwise absolute tolerance override (relative to max |ref|)
    max_batch: int | None = None  # largest batch the float64 reference is run at in full
    loc: Loc = _loc()
    # extra verify cases, each a value for every runtime dim (``cases = ["B=4,T=17"]``); kept out of the
    # contract hash like ``Dim.test``: the evidence records the cases that ran
    cases: tuple[tuple[tuple[str, int], ...], ...] = field(default=(), compare=False)
    # dims variants after the first run at the sweep's N smallest cases (None: every case), so values of
    # a fixed dim that only open a code path (H = 129: the scalar tail of a float4 loop) stay cheap
    variant_cases: int | None = field(default=None, compare=False)
    # the extra bindings below run at the sweep's N cases (None: as variant_cases caps them), so a kernel can
    # cap its dims variants and still run its bindings at sizes the cap would leave out
    binding_cases: int | None = field(default=None, compare=False)
    # the verify search adds each listed value's neighbours inside the listed range (audit/cases.py
    # dims_neighbours); ``neighbours = false`` keeps to the listed values; outside the hash like the cases
    neighbours: bool = field(default=True, compare=False)
    # extra values of the kernel's local dims (``bindings = [{ M = 8, N = 129 }]``), verified besides the
    # ones the schedules' launches bind: a shape-generic kernel's code for other shapes; outside the hash
    bindings: tuple[tuple[tuple[str, int], ...], ...] = field(default=(), compare=False)
    # outputs whose float64 reference can compute a sample of their elements along one axis
    # (``sample_axes = { colsum = 0 }``): beyond the reference budget a kernel that is not rowwise is compared
    # on a sample of that axis, the reference called with ``select = {output: indices}``
    sample_axes: tuple[tuple[str, int], ...] = field(default=(), metadata={"hash_omit_default": True})


@dataclass(frozen=True, slots=True)
class WriteRange:
    """The part of an output a kernel writes: indices ``start <= i < stop`` of ``axis`` (every index of the
    other axes); the rest of the buffer is left as it was (``write_range = { axis = 1, stop = "V" }``:
    columns ``[0, V)`` of a row padded to ``P``).

    >>> from audit.dims import parse_expr
    >>> WriteRange(1, parse_expr(0), parse_expr("V")).text
    'axis 1 [0, V)'
    """

    axis: int
    start: Expr
    stop: Expr
    loc: Loc = _loc()

    @property
    def text(self) -> str:
        return f"axis {self.axis} [{self.start.text}, {self.stop.text})"


@dataclass(frozen=True, slots=True)
class TensorParam:
    """A pointer argument: dtype, symbolic shape, role and the contract facts about it."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]
    role: str
    mask: Mask | None = None
    saved: bool = False
    partial_of: str | None = None
    optional: bool = False
    values: Values | None = None
    doc: str = ""
    loc: Loc = _loc()
    #: written only in part (``out``: the rest keeps what was there; see :class:`WriteRange`); None: all of it
    write_range: WriteRange | None = field(default=None, metadata={"hash_omit_default": True})
    #: the byte alignment the kernel requires of the pointer (``align = 16``: float4 loads without a check);
    #: 0: only its element's. verify also runs each kernel once with every pointer off a 16-byte boundary
    #: (at this alignment where given), where an unchecked vector access faults or reads the wrong words
    align: int = field(default=0, metadata={"hash_omit_default": True})

    kind = "tensor"

    @property
    def writes(self) -> bool:
        return self.role != "in"

    @property
    def reads(self) -> bool:
        return self.role != "out"


@dataclass(frozen=True, slots=True)
class HostRead:
    """A scalar read on the host from an ISV slot at launch time (``value = "isv(LABEL_SCALE)"``).

    An eager launch passes the slot's value as the device holds it just before the launch; a launch
    captured into a CUDA graph passes the value as of capture, frozen for every replay.

    >>> str(HostRead("LABEL_SCALE"))
    'isv(LABEL_SCALE)'
    """

    slot: str
    loc: Loc = _loc()

    @property
    def text(self) -> str:
        return f"isv({self.slot})"

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class ScalarParam:
    """A by-value argument: dtype and its value (a dim expression for integers, a number for floats, or
    ``isv(SLOT)``, a host-side read of an ISV slot at launch time)."""

    name: str
    dtype: str
    value: Expr | float | HostRead | None = None
    doc: str = ""
    loc: Loc = _loc()

    kind = "scalar"


@dataclass(frozen=True, slots=True)
class IsvParam:
    """The ISV device pointer argument."""

    name: str
    doc: str = ""
    loc: Loc = _loc()

    kind = "isv"
    dtype = "f32"


Param = Union[TensorParam, ScalarParam, IsvParam]


@dataclass(frozen=True, slots=True)
class IsvRead:
    """An ISV slot a kernel reads; ``previous_step`` marks a deliberate read of last step's value."""

    slot: str
    previous_step: bool = False
    loc: Loc = _loc()


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How far two runs of a nondeterministic kernel may differ (atomics), and why."""

    rtol: float
    atol: float
    reason: str = ""
    loc: Loc = _loc()


@dataclass(frozen=True, slots=True)
class Requirement:
    """A precondition of a kernel on its dims, ``left op right`` (``"OC % 32 == 0"``, ``"V <= P"``).

    Written over runtime dims alone it is an assumption the host guarantees (verify picks only cases that
    meet it); over any other dim it is checked at every launch (REQUIRES_VIOLATED)."""

    text: str
    left: Expr
    op: str
    right: Expr
    loc: Loc = _loc()

    def holds(self, env: dict[str, int], slots: dict[str, int] | None = None) -> bool | None:
        """Whether it holds in ``env`` (None where a dim is missing or a division by zero)."""
        import operator

        try:
            a, b = self.left.evaluate(env, slots), self.right.evaluate(env, slots)
        except (KeyError, ZeroDivisionError):
            return None
        ops = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
        return ops[self.op](a, b)


REQUIREMENT_OPS = ("==", "!=", "<=", ">=", "<", ">")


def assumptions(requires: tuple[Requirement, ...], runtime: set[str] | frozenset[str]) -> list[Requirement]:
    """The requirements among ``requires`` written over the ``runtime`` dims alone: assumptions the host
    guarantees, which select the sizes a kernel is checked and verified at."""
    return [r for r in requires if (r.left.names | r.right.names) <= runtime]


def assumed(requires: tuple[Requirement, ...], runtime: set[str] | frozenset[str], env: dict[str, int],
            slots: dict[str, int] | None = None) -> bool:  # fmt: skip
    """Whether ``env`` meets every assumption of ``requires`` (one that does not evaluate is not held against it)."""
    return all(r.holds(env, slots) is not False for r in assumptions(requires, runtime))


@dataclass(frozen=True, slots=True)
class Alias:
    """Two tensor parameters the host passes the same pointer for (``aliases = [["dinp", "dout"]]``: the
    kernel works in place). Verify passes them one allocation, the reference gets one array under both
    names, and a launch must bind them to one buffer."""

    first: str
    second: str
    loc: Loc = _loc()

    @property
    def names(self) -> tuple[str, str]:
        return (self.first, self.second)


@dataclass(frozen=True, slots=True)
class Property:
    """A declared contract property the runner checks (e.g. ``unit_scale``)."""

    kind: str
    options: tuple[tuple[str, object], ...] = ()
    loc: Loc = _loc()

    def get(self, key: str, default: object = None) -> object:
        for k, v in self.options:
            if k == key:
                return v
        return default


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel: where it lives, what it computes (reference) and its ordered parameters."""

    name: str
    source: str
    stage: str
    phase: str
    params: tuple[Param, ...]
    grid: tuple[Expr, Expr, Expr]
    block: tuple[Expr, Expr, Expr]
    entry: str | None = None  # extern "C" symbol
    cpp_name: str | None = None  # C++ function, e.g. "ns::scale<float>"; the build resolves its mangled name
    shared_bytes: Expr | None = None
    reference: str | None = None
    gradcheck: str | None = None
    dims: tuple[str, ...] = ()  # kernel-local dims, bound per launch
    isv_reads: tuple[IsvRead, ...] = ()
    isv_writes: tuple[str, ...] = ()
    nondeterministic: Tolerance | None = None
    properties: tuple[Property, ...] = ()
    verify: VerifySpec = VerifySpec()
    doc: str = ""
    loc: Loc = _loc()
    requires: tuple[Requirement, ...] = field(default=(), metadata={"hash_omit_default": True})
    aliases: tuple[Alias, ...] = field(default=(), metadata={"hash_omit_default": True})

    def alias_of(self, param: str) -> str | None:
        """The parameter declared aliased with ``param`` (None when it has none)."""
        for a in self.aliases:
            if param in a.names:
                return a.second if a.first == param else a.first
        return None

    @property
    def symbol(self) -> str:
        """The name the contract gives for the entry point (extern "C" name or C++ name)."""
        return self.entry or self.cpp_name or self.name

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    @property
    def tensors(self) -> tuple[TensorParam, ...]:
        return tuple(p for p in self.params if isinstance(p, TensorParam))


# ---------------------------------------------------------------------------------------------------
# buffers, schedules, invariants


@dataclass(frozen=True, slots=True)
class Buffer:
    """A device buffer the schedules bind to tensor parameters."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]
    kind: str
    external: bool = False
    grad_of: str | None = None
    values: Values | None = None
    doc: str = ""
    loc: Loc = _loc()

    @property
    def is_external(self) -> bool:
        """Provided from outside the schedules (host inputs, parameters, other subsystems)."""
        return self.external or self.kind in ("input", "parameter")


@dataclass(frozen=True, slots=True)
class Binding:
    """What a launch binds to one tensor parameter: a buffer (optionally viewed as another shape) or NULL.

    With an ``offset`` (in elements) the view is a slice of the flat buffer: elements ``offset`` up to
    ``offset + numel(view)`` (one allocation holding every weight, say); without one it reshapes the whole
    buffer."""

    buffer: str | None  # None means NULL
    view: tuple[Expr, ...] | None = None
    loc: Loc = _loc()
    offset: Expr | None = field(default=None, metadata={"hash_omit_default": True})

    @property
    def is_null(self) -> bool:
        return self.buffer is None


@dataclass(frozen=True, slots=True)
class Step:
    """One schedule step: a kernel launch, or a memset of a buffer to zero."""

    index: int
    launch: str | None = None
    zero: str | None = None
    bind: tuple[tuple[str, Binding], ...] = ()
    dims: tuple[tuple[str, Expr], ...] = ()
    args: tuple[tuple[str, Expr | float | HostRead], ...] = ()
    loc: Loc = _loc()

    def binding(self, param: str) -> Binding | None:
        for k, b in self.bind:
            if k == param:
                return b
        return None

    def arg(self, param: str) -> Expr | float | HostRead | None:
        for k, v in self.args:
            if k == param:
                return v
        return None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A named, ordered list of launches on one stream, possibly captured into a CUDA graph."""

    name: str
    steps: tuple[Step, ...]
    stream: str = "default"
    graph_capture: bool = False
    after: tuple[str, ...] = ()
    equivalent_to: str | None = None
    doc: str = ""
    loc: Loc = _loc()
    #: how far the chain's buffers may differ from the float64 reference chain (default: the runner's)
    tolerance: Tolerance | None = field(default=None, metadata={"hash_omit_default": True})
    verify_cases: tuple[tuple[tuple[str, int], ...], ...] = field(default=(), compare=False)  # as VerifySpec.cases
    #: ``"every_step"``: the graph is captured anew each training step, so host reads (``isv(...)``
    #: scalars) are fresh on every replay; None: captured once and replayed
    recapture: str | None = field(default=None, metadata={"hash_omit_default": True})

    @property
    def launches(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.launch)


@dataclass(frozen=True, slots=True)
class Invariant:
    """A structural query over the data-flow graph: ``path`` or ``no_path`` between node sets."""

    name: str
    kind: str
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    reason: str = ""
    loc: Loc = _loc()


@dataclass(frozen=True, slots=True)
class Suppression:
    """``[[suppress]]``: findings of ``rule`` about ``subject`` (a kernel, schedule, buffer... or every
    subject where None) whose message contains ``matching`` (where given) are reported as suppressed,
    with the reason, instead of as findings."""

    rule: str
    subject: str | None
    reason: str
    loc: Loc = _loc()
    matching: str | None = None

    def matches(self, rule: str, subject: str, message: str = "") -> bool:
        return (self.rule == rule and (self.subject is None or self.subject == subject)
                and (self.matching is None or self.matching in message))


@dataclass(frozen=True)
class ContractSet:
    """Everything the contracts under one root declare."""

    root: Path
    dims: tuple[Dim, ...] = ()
    buffers: tuple[Buffer, ...] = ()
    kernels: tuple[Kernel, ...] = ()
    schedules: tuple[Schedule, ...] = ()
    invariants: tuple[Invariant, ...] = ()
    isv: IsvLayout | None = None
    files: tuple[str, ...] = field(default=(), compare=False)
    suppressions: tuple[Suppression, ...] = ()

    # lookups (first definition wins; duplicates are reported by a rule)
    @functools.cached_property
    def dim_map(self) -> dict[str, Dim]:
        out: dict[str, Dim] = {}
        for d in self.dims:
            out.setdefault(d.name, d)
        return out

    @functools.cached_property
    def buffer_map(self) -> dict[str, Buffer]:
        out: dict[str, Buffer] = {}
        for b in self.buffers:
            out.setdefault(b.name, b)
        return out

    @functools.cached_property
    def kernel_map(self) -> dict[str, Kernel]:
        out: dict[str, Kernel] = {}
        for k in self.kernels:
            out.setdefault(k.name, k)
        return out

    @functools.cached_property
    def schedule_map(self) -> dict[str, Schedule]:
        out: dict[str, Schedule] = {}
        for s in self.schedules:
            out.setdefault(s.name, s)
        return out

    @functools.cached_property
    def slot_map(self) -> dict[str, Slot]:
        out: dict[str, Slot] = {}
        if self.isv:
            for s in self.isv.slots:
                out.setdefault(s.name, s)
        return out

    def kernel(self, name: str) -> Kernel:
        return self.kernel_map[name]

    @functools.cached_property
    def fixed_env(self) -> dict[str, int]:
        """Values of fixed and derived dims (derived ones that evaluate); runtime dims are absent."""
        from .dims import resolve_fixed

        return resolve_fixed(self.dim_map)[0]

    @functools.cached_property
    def runtime_ranges(self) -> dict[str, tuple[int, int]]:
        return {
            d.name: (d.min, d.max)
            for d in self.dim_map.values()
            if d.kind == "runtime" and d.min is not None and d.max is not None
        }

    @functools.cached_property
    def slot_indices(self) -> dict[str, int]:
        return {name: s.index for name, s in self.slot_map.items()}



def fast_init(*classes: type) -> None:
    """Give each frozen, slotted dataclass of ``classes`` an ``__init__`` that stores each field through its
    slot's own setter instead of ``object.__setattr__`` (what the frozen ``__init__`` dataclasses write
    calls): the same parameters, defaults and resulting object, built about 40 % faster. Loading 10,000
    kernels builds ~400,000 of these objects. A class with a ``__post_init__``, a default factory, a
    keyword-only or non-init field keeps the dataclass ``__init__``. The functions are compiled together,
    once (about 1 ms for the model's 25 classes; one compilation each cost ~0.5 ms).

    >>> @dataclass(frozen=True, slots=True)
    ... class Point:
    ...     x: int
    ...     y: int = 0
    >>> fast_init(Point)
    >>> Point(1), Point(x=1, y=2) == Point(1, 2)
    (Point(x=1, y=0), True)
    """
    import dataclasses

    env: dict[str, object] = {}
    src: list[str] = []
    done: list[tuple[int, type]] = []
    for j, cls in enumerate(classes):
        fields = dataclasses.fields(cls)
        if hasattr(cls, "__post_init__") or not getattr(cls, "__slots__", None):
            continue
        if any(not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING or not f.name.isidentifier() for f in fields):
            continue
        params, body = [], []
        for i, f in enumerate(fields):
            env[f"_s{j}_{i}"] = cls.__dict__[f.name].__set__
            if f.default is dataclasses.MISSING:
                params.append(f.name)
            else:
                env[f"_d{j}_{i}"] = f.default
                params.append(f"{f.name}=_d{j}_{i}")
            body.append(f"    _s{j}_{i}(self, {f.name})")
        src.append(f"def __init__{j}(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"]) + "\n")
        done.append((j, cls))
    exec("\n".join(src), env)  # noqa: S102 - code built from the dataclasses' own field names (identifiers)
    for j, cls in done:
        init = env[f"__init__{j}"]
        init.__name__ = "__init__"  # type: ignore[attr-defined]
        init.__qualname__ = f"{cls.__qualname__}.__init__"  # type: ignore[attr-defined]
        init.__module__ = cls.__module__
        cls.__init__ = init  # type: ignore[misc]


fast_init(
    Loc, Dim, Slot, Acknowledgement, IsvLayout, Mask, Values, VerifySpec, WriteRange, TensorParam, HostRead,
    ScalarParam, IsvParam, IsvRead, Tolerance, Requirement, Alias, Property, Kernel, Buffer, Binding, Step,
    Schedule, Invariant, Suppression,
)  # fmt: skip
