"""Shortcuts taken by static rules for the check's latency give what the long way gives.

* NAME_NOT_IDENTIFIER first asks whether every name that must be an identifier is one, without building
  the names' locations; only where one is not does it take the long way (which reports it). A bad name
  at every position the rule reads is found the same with and without that first pass; a bad name
  where no identifier is needed stays silent both ways.
* NAME_NOT_NORMALIZED is skipped where every contract file is ASCII without an escape that can spell a
  character beyond it (``\\u``, ``\\U``, ``\\x``); it looks for a backslash first.
* ``cases.launch_env`` keeps a launch's binding plan: the environments it gives are those of
  ``bind_local_dims`` for the same launch, at every probe environment and after the plan is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from audit.cases import bind_local_dims, launch_env, launch_pairs
from audit.errors import ContractError
from audit.graph import Wiring
from audit.load import load_contracts
from audit.rules import schema
from audit.rules._base import REGISTRY

REPO = Path(__file__).resolve().parents[1]
BAD = "bad\nname"


@pytest.fixture(scope="module")
def shipped():
    return load_contracts(REPO / "contracts", REPO)


def _first_kernel(cs, change: Callable) -> object:
    k = cs.kernels[0]
    return dataclasses.replace(cs, kernels=(change(k), *cs.kernels[1:]))


def _isv(cs, **kw) -> object:
    return dataclasses.replace(cs, isv=dataclasses.replace(cs.isv, **kw))


# position -> (change, whether the rule must report it)
VARIANTS: dict[str, tuple[Callable, bool]] = {
    "dim": (lambda cs: dataclasses.replace(cs, dims=(dataclasses.replace(cs.dims[0], name=BAD), *cs.dims[1:])), True),
    "entry point": (lambda cs: _first_kernel(cs, lambda k: dataclasses.replace(k, entry=BAD)), True),
    "kernel name without entry": (lambda cs: _first_kernel(cs, lambda k: dataclasses.replace(k, name=BAD, entry=None, cpp_name=None)), True),
    "kernel name with entry": (lambda cs: _first_kernel(cs, lambda k: dataclasses.replace(k, name=BAD, entry="ok_entry")), False),
    "kernel name with cpp_name": (lambda cs: _first_kernel(cs, lambda k: dataclasses.replace(k, name=BAD, entry=None, cpp_name="ns::f")), False),
    "local dim": (lambda cs: _first_kernel(cs, lambda k: dataclasses.replace(k, dims=(*k.dims, BAD))), True),
    "parameter": (lambda cs: _first_kernel(cs, lambda k: dataclasses.replace(k, params=(dataclasses.replace(k.params[-1], name=BAD), *k.params[:-1]))), True),
    "ISV slot": (lambda cs: _isv(cs, slots=(*cs.isv.slots[:-1], dataclasses.replace(cs.isv.slots[-1], name=BAD))), True),
    "ISV reset event": (lambda cs: _isv(cs, reset_events=(*cs.isv.reset_events, BAD)), True),
    "buffer": (lambda cs: dataclasses.replace(cs, buffers=(dataclasses.replace(cs.buffers[0], name=BAD), *cs.buffers[1:])), False),
    "schedule": (lambda cs: dataclasses.replace(cs, schedules=(dataclasses.replace(cs.schedules[0], name=BAD), *cs.schedules[1:])), False),
    "invariant": (lambda cs: dataclasses.replace(cs, invariants=(dataclasses.replace(cs.invariants[0], name=BAD), *cs.invariants[1:])), False),
}


def _hits(cs) -> list[tuple[str, str, object]]:
    return [(h.message, h.subject, h.loc) for h in REGISTRY["NAME_NOT_IDENTIFIER"].check(SimpleNamespace(cs=cs))]


@pytest.mark.parametrize("where", sorted(VARIANTS))
def test_identifier_shortcut_finds_what_the_long_way_finds(where: str, shipped, monkeypatch: pytest.MonkeyPatch):
    change, reported = VARIANTS[where]
    cs = change(shipped)
    fast = _hits(cs)
    assert schema._needed_names_are_identifiers(cs) is not reported
    monkeypatch.setattr(schema, "_needed_names_are_identifiers", lambda cs: False)
    assert fast == _hits(cs)
    assert bool(fast) is reported
    if reported:
        assert any('"bad\\nname" is not an identifier' in m for m, _, _ in fast)


def test_identifier_shortcut_on_the_shipped_contracts(shipped):
    assert schema._needed_names_are_identifiers(shipped) and _hits(shipped) == []


def test_launch_env_equals_bind_local_dims(shipped, tmp_path: Path):
    """Every launch of the shipped contracts, of every rule fixture and of a synthetic project (local dims,
    views, two launches of one kernel, explicit launch dims, conflicting bindings), at every probe
    environment, twice (the second time from the kept plan)."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from synth_contracts import write_project
    finally:
        sys.path.pop(0)
    write_project(100, tmp_path / "p")
    sets = [shipped, load_contracts(tmp_path / "p" / "contracts", tmp_path / "p")]
    for folder in sorted((REPO / "tests" / "data" / "rules").glob("*/*/contracts")):
        try:
            sets.append(load_contracts(folder, folder.parent))
        except ContractError:
            continue  # a fixture of a load error
    local_launches = 0
    for cs in sets:
        w = Wiring(cs)
        for launches in w.launches.values():
            for ln in launches:
                k = ln.kernel
                if k is None:
                    continue
                local_launches += bool(k.dims or ln.step.dims)
                for _ in range(2):
                    for env in w.envs:
                        want, _ = bind_local_dims(k.dims, launch_pairs(cs, ln), dict(ln.step.dims), [dict(env)])
                        assert launch_env(cs, k, ln, env) == want[0]
    assert local_launches >= 20


@pytest.mark.parametrize(
    ("text", "ascii_only"),
    [
        ('a = "b"\n', True),
        ('a = "b\\n\\t\\\\"\n', True),  # escapes that spell ASCII only
        ('a = "\\u212C"\n', False),
        ('a = "\\U0001D4D1"\n', False),
        ('a = "\\x41"\n', False),
        ('a = "ℬ"\n', False),
    ],
)
def test_all_ascii_shortcut(text: str, ascii_only: bool):
    src = SimpleNamespace(loc=SimpleNamespace(source=SimpleNamespace(text=text)))
    cs = SimpleNamespace(dims=(src,), buffers=(), kernels=(), schedules=(), invariants=(), isv=None)
    assert schema._all_ascii(cs) is ascii_only


# -- UNKNOWN_DIM: one pass first, the long way only where a name is unknown --------------------------


def _unknown(cs, where: str):
    from audit.dims import parse_expr
    from audit.model import ScalarParam, TensorParam

    bad = parse_expr("NOT_A_DIM * 2")
    r = dataclasses.replace
    if where == "buffer shape":
        return r(cs, buffers=(r(cs.buffers[0], shape=(*cs.buffers[0].shape, bad)), *cs.buffers[1:]))
    kernel_changes = {
        "grid": lambda k: r(k, grid=(bad, *k.grid[1:])),
        "block": lambda k: r(k, block=(*k.block[:2], bad)),
        "shared_bytes": lambda k: r(k, shared_bytes=bad),
        "tensor shape": lambda k: r(k, params=tuple(r(p, shape=(bad,)) if isinstance(p, TensorParam) else p for p in k.params)),
        "scalar value": lambda k: r(k, params=(*k.params, ScalarParam("extra", "i32", bad))),
    }
    if where in kernel_changes:
        return _first_kernel(cs, kernel_changes[where])
    if where == "a local dim is known":
        return _first_kernel(cs, lambda k: r(k, dims=(*k.dims, "NOT_A_DIM"), grid=(bad, *k.grid[1:])))
    s = cs.schedules[0]
    i, step = next((i, st) for i, st in enumerate(s.steps) if st.launch and st.bind)
    step_changes = {
        "view": lambda st: r(st, bind=((st.bind[0][0], r(st.bind[0][1], view=(bad,))), *st.bind[1:])),
        "launch dims": lambda st: r(st, dims=(*st.dims, ("X", bad))),
        "launch argument": lambda st: r(st, args=(*st.args, ("extra", bad))),
    }
    step = step_changes[where](step)
    return r(cs, schedules=(r(s, steps=(*s.steps[:i], step, *s.steps[i + 1 :])), *cs.schedules[1:]))


UNKNOWN_AT = ["buffer shape", "grid", "block", "shared_bytes", "tensor shape", "scalar value", "view", "launch dims", "launch argument", "a local dim is known"]


@pytest.mark.parametrize("where", UNKNOWN_AT)
def test_unknown_dim_shortcut_finds_what_the_long_way_finds(where: str, shipped, monkeypatch: pytest.MonkeyPatch):
    cs = _unknown(shipped, where)
    rule = REGISTRY["UNKNOWN_DIM"].check
    fast = [(h.message, h.subject, h.loc) for h in rule(SimpleNamespace(cs=cs))]
    reported = where != "a local dim is known"
    assert schema._all_dims_known(shipped) is True
    assert schema._all_dims_known(cs) is not reported
    monkeypatch.setattr(schema, "_all_dims_known", lambda cs: False)
    assert fast == [(h.message, h.subject, h.loc) for h in rule(SimpleNamespace(cs=cs))]
    assert bool(fast) is reported
