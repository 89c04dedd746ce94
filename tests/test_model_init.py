"""The model's frozen dataclasses get a faster ``__init__`` (audit/model.py, ``fast_init``): it takes the
parameters the dataclass ``__init__`` takes, with the same defaults, and builds the same frozen object."""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

from audit import graph, model

CLASSES = [c for c in vars(model).values() if inspect.isclass(c) and dataclasses.is_dataclass(c) and c.__module__ == model.__name__]
FAST = [c for c in CLASSES if c.__init__.__code__.co_names and all(re.fullmatch(r"_s\d+_\d+", n) for n in c.__init__.__code__.co_names)]


def test_every_frozen_slotted_model_class_has_the_fast_init():
    slotted = {c.__name__ for c in CLASSES if getattr(c, "__slots__", None)}
    assert {c.__name__ for c in FAST} == slotted and len(slotted) >= 20


@pytest.mark.parametrize("cls", [*FAST, graph.Access], ids=lambda c: c.__name__)
def test_the_fast_init_takes_the_dataclass_parameters_and_stores_each_field(cls):
    fields = dataclasses.fields(cls)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields):
        want = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert p.default is want and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    values = [object() for _ in fields]
    by_position = cls(*values)
    by_name = cls(**{f.name: v for f, v in zip(fields, values)})
    for obj in (by_position, by_name):
        assert [getattr(obj, f.name) for f in fields] == values
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, fields[0].name, 1)
    required = [object() for f in fields if f.default is dataclasses.MISSING]
    obj = cls(*required)
    assert [getattr(obj, f.name) for f in fields if f.default is not dataclasses.MISSING] == [
        f.default for f in fields if f.default is not dataclasses.MISSING
    ]
    assert dataclasses.replace(obj) == obj


def test_loc_child_is_the_loc_the_constructor_builds():
    src = model.SourceFile("contracts/a.toml", "[[kernel]]\nname = 'k'\n")
    loc = model.Loc(src, ("kernel", 0))
    child = loc.child("name")
    assert type(child) is model.Loc and child == model.Loc(src, ("kernel", 0, "name"))
    assert child.source is src and child.key == ("kernel", 0, "name") and child.line == 2
    assert model.NOWHERE.child().key == () and model.NOWHERE.child(1, "x").key == (1, "x")
