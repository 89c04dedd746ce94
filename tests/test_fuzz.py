"""Property-based fuzzing of the static checker: wireup never crashes, and valid contracts round-trip.

Inputs are (a) random contract sets built from the contract vocabulary, with and without junk values of
the wrong type, and (b) random mutations of the shipped contracts' TOML text (lines deleted, duplicated or
swapped, values swapped or given another type). Whatever the input, loading plus the static rules either
give a :class:`~audit.findings.CheckResult` or raise a :class:`~audit.errors.UserError`; any other exception
is a bug. A set that loads is written back by :func:`audit.serialize.dump_contracts` and must load to an
equal model, and dump to the same text again.

The runs are deterministic (``derandomize``, no example database) and sized to finish in well under
30 seconds on two cores.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit import model
from audit.api import check
from audit.config import Config
from audit.errors import UserError
from audit.findings import CheckResult
from audit.load import load_contracts
from audit.model import BUFFER_KINDS, DTYPES, ROLES, SLOT_ROLES, STAGES, ContractSet
from audit.printers import FORMATS, render
from audit.serialize import dump_contracts, toml_key, toml_value

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "tests" / "data" / "rules" / "SHAPE_MISMATCH" / "good"  # holds kernels/chain.cu
CONFIG = Config(root=ROOT.resolve())
STATIC = ("schema", "wiring", "isv", "invariants")
FUZZ = settings(
    deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def load_texts(files: dict[str, str], root: Path = ROOT) -> ContractSet:
    return load_contracts(root / "contracts", root, texts={f"contracts/{name}": text for name, text in files.items()})


def check_never_crashes(files: dict[str, str], root: Path = ROOT) -> ContractSet | None:
    """Load and check ``files``; None when they do not load (a UserError is the allowed outcome)."""
    try:
        cs = load_texts(files, root)
    except UserError as exc:
        assert str(exc)
        return None
    result = check(root, select=STATIC, config=Config(root=root.resolve()), contracts=cs)
    assert isinstance(result, CheckResult)
    assert result.exit_code in (0, 1)
    for f in result.findings:
        assert f.message.endswith((".", ".)")), f.message
    for fmt in FORMATS:
        render(result, fmt)
    return cs


def assert_round_trip(cs: ContractSet) -> None:
    dumped = dump_contracts(cs)
    again = load_texts(dumped, cs.root)
    assert again == cs
    assert dump_contracts(again) == dumped


# --- (a) random contract sets ------------------------------------------------------------------------------

NAMES = ("B", "N", "M", "x", "y", "k", "main", "S0", "S1", "a b", "é", "NULL", "isv")
FEW_NAMES = ("B", "N", "x", "y", "k", "S0")  # valid sets: names that often resolve, so the wiring rules run
EXPRS = ("B", "N", "B * N", "ceil_div(B, 256)", "min(B, 4)", "max(N, 2) - 1", "N + 6", "N // 2", "B % 3", "-N", "(N)", "M")
BAD_EXPRS = ("slot(S0)", "B +* 2", "foo(B)", "", "N // 0", "ceil_div(N, 0)", "2 ** 3", "B / 2", "1099511627776")
junk_value = st.one_of(
    st.booleans(), st.floats(allow_nan=False), st.text(max_size=4), st.lists(st.integers(-2, 2), max_size=2),
    st.dictionaries(st.sampled_from(["a", "name"]), st.integers(0, 3), max_size=1),
)  # fmt: skip


def vocabulary(junk: bool):
    """Strategies for every contract section; ``junk`` mixes in values of the wrong type and bad enums."""

    def j(strategy: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(strategy, strategy, strategy, junk_value) if junk else strategy

    def enum(options) -> st.SearchStrategy:
        return st.sampled_from([*options, "bogus"]) if junk else st.sampled_from(options)

    name = st.sampled_from(NAMES if junk else FEW_NAMES)
    expr = st.one_of(st.integers(-3, 300), st.sampled_from(EXPRS + BAD_EXPRS if junk else EXPRS))

    shape = j(st.lists(expr, max_size=3))
    triple = j(st.lists(expr, min_size=1, max_size=3))
    dtype = enum(tuple(DTYPES)[:3] + ("i32",))
    values = st.fixed_dictionaries(
        {}, optional={"choices": st.lists(st.integers(-1, 2), max_size=3), "min": expr, "max": st.one_of(expr, st.floats(-2, 2)), "scale": st.floats(0, 3)}
    )
    dims = st.dictionaries(
        name,
        j(st.one_of(
            st.integers(-5, 2**40), expr,
            st.fixed_dictionaries({"value": st.integers(-1, 300)}, optional={"doc": st.text(max_size=3)}),
            st.fixed_dictionaries({"min": st.integers(-1, 9), "max": st.integers(-1, 2**33)}),
            st.fixed_dictionaries({"expr": expr}),
        )),
        max_size=4,
    )  # fmt: skip
    buffer = st.fixed_dictionaries(
        {"name": j(name), "dtype": dtype, "shape": shape},
        optional={"kind": enum(BUFFER_KINDS), "external": j(st.booleans()), "grad_of": name, "values": values, "doc": st.text(max_size=4)},
    )
    tensor = st.fixed_dictionaries(
        {"name": j(name), "dtype": dtype, "shape": shape, "role": enum(ROLES)},
        optional={
            "saved": st.booleans(), "partial_of": name, "optional": st.booleans(),
            "mask": st.fixed_dictionaries({"skip_value": j(st.integers(-1, 1))}, optional={"zeroes": st.lists(name, max_size=2)}),
        },
    )  # fmt: skip
    scalar = st.fixed_dictionaries(
        {"name": j(name), "kind": st.just("scalar"), "dtype": dtype}, optional={"value": j(st.one_of(expr, st.floats(-1, 1)))}
    )
    isv_param = st.fixed_dictionaries({"name": name, "kind": enum(("isv",))})
    kernel = st.fixed_dictionaries(
        {
            "name": j(name),
            "source": st.sampled_from(["kernels/chain.cu", "kernels/missing.cu", "../chain.cu", "/abs/chain.cu"]),
            "stage": enum(STAGES),
            "grid": triple,
            "block": triple,
            "params": j(st.lists(st.one_of(tensor, tensor, scalar, isv_param), max_size=5)),
        },
        optional={
            "dims": st.lists(name, max_size=2),
            "isv_reads": j(st.lists(st.one_of(name, st.fixed_dictionaries({"slot": name, "previous_step": st.booleans()})), max_size=2)),
            "isv_writes": j(st.lists(name, max_size=2)),
            "shared_bytes": expr,
            "nondeterministic": st.fixed_dictionaries({"rtol": j(st.floats(0, 1))}, optional={"reason": st.text(max_size=3)}),
            "verify": st.fixed_dictionaries({}, optional={"rowwise": st.booleans(), "dims": st.dictionaries(name, st.lists(st.integers(1, 4), min_size=1, max_size=2), max_size=1)}),
            "property": st.lists(st.fixed_dictionaries({"kind": st.just("unit_scale")}, optional={"input": name, "magnitudes": st.lists(st.floats(0, 9), max_size=2)}), max_size=1),
            "entry": name,
            "phase": st.text(max_size=2),
        },
    )  # fmt: skip
    isv = st.fixed_dictionaries(
        {"total_dim": j(st.integers(-1, 2**40)), "reset_events": st.lists(st.sampled_from(["Cold", "Fold"]), max_size=2)},
        optional={
            "slot": st.lists(
                st.fixed_dictionaries(
                    {"index": j(st.integers(-1, 8)), "name": name, "role": enum(SLOT_ROLES)},
                    optional={
                        "count": st.integers(-1, 2**40),
                        "reset": st.dictionaries(st.sampled_from(["Cold", "Fold", "Warm"]), st.one_of(st.floats(-1, 2), st.just("keep"), st.integers(0, 1))),
                        "shared_writers": st.lists(name, max_size=2),
                    },
                ),
                max_size=4,
            ),
        },
    )  # fmt: skip
    binding = st.one_of(name, st.just("NULL"), st.fixed_dictionaries({"buffer": name, "view": shape}))
    step = st.one_of(
        st.fixed_dictionaries(
            {"launch": name, "bind": st.dictionaries(name, j(binding), max_size=4)},
            optional={"dims": st.dictionaries(name, expr, max_size=1), "args": st.dictionaries(name, st.one_of(expr, st.floats(-1, 1)), max_size=1)},
        ),
        st.fixed_dictionaries({"zero": name}),
    )  # fmt: skip
    schedule = st.fixed_dictionaries(
        {"name": j(name), "step": st.lists(step, max_size=4)},
        optional={"after": st.lists(name, max_size=2), "equivalent_to": name, "stream": st.sampled_from(["a", "b"]), "graph_capture": st.booleans()},
    )
    invariant = st.fixed_dictionaries(
        {
            "name": name,
            "kind": enum(("path", "no_path")),
            "from": st.lists(st.one_of(name, st.sampled_from(["kernel:k", "buffer:x", "slot:S0", "k:x"])), min_size=1, max_size=2),
            "to": st.lists(name, min_size=1, max_size=2),
        }
    )
    sections = {
        "dims": dims, "buffer": st.lists(buffer, max_size=4), "kernel": st.lists(kernel, max_size=3), "isv": isv,
        "schedule": st.lists(schedule, max_size=2), "invariant": st.lists(invariant, max_size=2),
    }  # fmt: skip
    if junk:
        sections["bogus"] = st.integers()
    return st.fixed_dictionaries({}, optional=sections)


def no_second_isv(docs: list[dict]) -> list[dict]:
    return [d if i == 0 else {k: v for k, v in d.items() if k != "isv"} for i, d in enumerate(docs)]


def render_toml(doc: dict) -> str:
    """A contract document as TOML: [tables] and [[arrays of tables]] as sections, everything else inline."""
    out: list[str] = []

    def is_aot(k: str, v: object) -> bool:
        return k != "params" and isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)

    def body(table: dict, header: str) -> None:
        out.extend(f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items() if not is_aot(k, v))
        for k, v in table.items():
            if is_aot(k, v):
                full = f"{header}.{toml_key(k)}" if header else toml_key(k)
                for element in v:
                    out.append(f"\n[[{full}]]")
                    body(element, full)

    body({k: v for k, v in doc.items() if not isinstance(v, dict)}, "")
    for k, v in doc.items():
        if isinstance(v, dict):
            out.append(f"\n[{toml_key(k)}]")
            body(v, toml_key(k))
    return "\n".join(out) + "\n"


@st.composite
def contract_files(draw, junk: bool) -> dict[str, str]:
    docs = draw(st.lists(vocabulary(junk), min_size=1, max_size=2))
    if not junk:
        docs = no_second_isv(docs)
    return {f"part{i}.toml": render_toml(doc) for i, doc in enumerate(docs)}


@settings(FUZZ, max_examples=120)
@given(contract_files(junk=True))
def test_random_contract_sets_never_crash(files: dict[str, str]) -> None:
    check_never_crashes(files)


@settings(FUZZ, max_examples=120)
@given(contract_files(junk=False))
def test_random_valid_contract_sets_round_trip(files: dict[str, str]) -> None:
    cs = check_never_crashes(files)
    if cs is not None:
        assert_round_trip(cs)


# --- (b) mutations of the shipped contracts ----------------------------------------------------------------

SHIPPED = {p.relative_to(REPO / "contracts").as_posix(): p.read_text(encoding="utf-8") for p in sorted((REPO / "contracts").rglob("*.toml"))}
RHS_KINDS = ('"', "1", "1.5", "true", "[]", "{}", '"B +* 2"', '["B"]', "-7", "2199023255552", '"slot(NOPE)"', '{ x = 1 }')


@st.composite
def mutated_shipped(draw) -> dict[str, str]:
    files = dict(SHIPPED)
    for _ in range(draw(st.integers(1, 3))):
        fname = draw(st.sampled_from(sorted(files)))
        lines = files[fname].split("\n")
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap_lines", "swap_values", "retype", "chars", "encoding"]))
        if op == "encoding":  # a byte order mark or Windows line endings change no meaning
            files[fname] = draw(st.sampled_from(["\ufeff" + files[fname], files[fname].replace("\n", "\r\n")]))
            continue
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap_lines":
            k = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[k] = lines[k], lines[i]
        elif op in ("swap_values", "retype"):
            assigned = [n for n, line in enumerate(lines) if " = " in line and not line.lstrip().startswith("#")]
            if not assigned:
                continue
            a = draw(st.sampled_from(assigned))
            key, _, value = lines[a].partition(" = ")
            if op == "swap_values":
                b = draw(st.sampled_from(assigned))
                key_b, _, value_b = lines[b].partition(" = ")
                lines[a], lines[b] = f"{key} = {value_b}", f"{key_b} = {value}"
            else:
                lines[a] = f"{key} = {draw(st.sampled_from(RHS_KINDS))}"
        else:
            line = lines[i]
            j = draw(st.integers(0, len(line)))
            lines[i] = line[:j] + draw(st.text(st.sampled_from('[]{}",=.#0123456789-abcBN \\\''), max_size=3)) + line[j + 1 :]
        files[fname] = "\n".join(lines)
    return files


def test_shipped_contracts_round_trip() -> None:
    cs = load_texts(SHIPPED, REPO)
    assert cs.kernels and cs.schedules and cs.isv is not None
    assert_round_trip(cs)


@settings(FUZZ, max_examples=80)
@given(mutated_shipped())
def test_mutated_shipped_contracts_never_crash(files: dict[str, str]) -> None:
    cs = check_never_crashes(files, REPO)
    if cs is not None:
        assert_round_trip(cs)


# --- the serializer covers the model ---------------------------------------------------------------------

# every field of every contract dataclass, as of this test; a new field must be written by
# audit/serialize.py (and added here), or the round trip above would silently drop it
MODEL_FIELDS = {
    "Dim": "name kind value min max expr doc test",
    "Slot": "index name role dtype count reset shared_writers doc",
    "Acknowledgement": "from_fingerprint to_fingerprint reason migrator",
    "IsvLayout": "buffer dtype total_dim reset_events slots fingerprint acknowledgements",
    "Mask": "skip_value zeroes",
    "Values": "choices weights min max scale include stress stress_reason",
    "VerifySpec": "rowwise dims rtol atol max_batch cases variant_cases binding_cases bindings sample_axes neighbours",
    "TensorParam": "name dtype shape role mask saved partial_of optional values doc write_range align",
    "WriteRange": "axis start stop",
    "Alias": "first second",
    "ScalarParam": "name dtype value doc",
    "IsvParam": "name doc",
    "IsvRead": "slot previous_step",
    "Tolerance": "rtol atol reason",
    "Property": "kind options",
    "Kernel": "name source stage phase params grid block entry cpp_name shared_bytes reference gradcheck dims "
    "isv_reads isv_writes nondeterministic properties verify doc requires aliases",
    "Requirement": "text left op right",
    "Buffer": "name dtype shape kind external grad_of values doc",
    "Binding": "buffer view offset",
    "Step": "index launch zero bind dims args",
    "Schedule": "name steps stream graph_capture after equivalent_to doc tolerance verify_cases recapture",
    "HostRead": "slot",
    "Invariant": "name kind sources targets reason",
    "ContractSet": "root dims buffers kernels schedules invariants isv files suppressions",
    "Suppression": "rule subject reason matching",
}


@pytest.mark.parametrize("cls", sorted(MODEL_FIELDS))
def test_serializer_knows_every_model_field(cls: str) -> None:
    fields = {f.name for f in dataclasses.fields(getattr(model, cls))} - {"loc"}
    assert fields == set(MODEL_FIELDS[cls].split()), f"update audit/serialize.py for model.{cls}"


def test_every_contract_dataclass_is_listed() -> None:
    listed = {
        name for name, obj in vars(model).items()
        if dataclasses.is_dataclass(obj) and isinstance(obj, type) and obj.__module__ == model.__name__ and name != "Loc"
    }  # fmt: skip
    assert listed == set(MODEL_FIELDS)
