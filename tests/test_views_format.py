"""Partial writes, views at an offset and declared aliasing (issue 17 item 4): the contract side.

The flat-weights chain of the fixture pairs (``tests/data/rules/VIEW_OVERLAP/good``: W and b are views of one
``params`` buffer, dW and db of one ``grads`` buffer, an in-place ``relu_backward`` and a ``write_range`` on
the forward's output) loads into the model, round-trips through the serializer, keeps the hashes of contracts
that do not use the keys, and refuses malformed keys with one sentence naming file, line and key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.errors import ContractError
from audit.hashing import contract_hash
from audit.load import load_contracts
from audit.serialize import dump_contracts

RULES = Path(__file__).parent / "data" / "rules"
FLAT = RULES / "VIEW_OVERLAP" / "good"
PLAIN = RULES / "LAUNCH_GEOMETRY" / "good"


def texts_of(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in (root / "contracts").glob("*.toml")}


def load_with(old: str, new: str, rel: str = "contracts/kernels.toml", root: Path = FLAT):
    texts = texts_of(root)
    assert texts[rel].count(old) == 1, old
    texts[rel] = texts[rel].replace(old, new)
    return load_contracts(root / "contracts", root, texts=texts)


def test_the_three_keys_load_into_the_model() -> None:
    cs = load_contracts(FLAT / "contracts", FLAT)
    h_out = cs.kernel("forward").param("h_out")
    assert (h_out.write_range.axis, h_out.write_range.start.text, h_out.write_range.stop.text) == (1, "0", "H")
    assert h_out.write_range.loc.line == 30
    relu = cs.kernel("relu_backward")
    assert [a.names for a in relu.aliases] == [("dh_in", "dh_out")]
    assert relu.alias_of("dh_out") == "dh_in" and relu.alias_of("h") is None
    step = cs.schedule_map["backward"].steps[2]
    db = step.binding("db")
    assert (db.buffer, db.offset.text, [e.text for e in db.view]) == ("grads", "H * D", ["H"])
    assert db.loc.line == 36


def test_they_round_trip_through_the_serializer() -> None:
    cs = load_contracts(FLAT / "contracts", FLAT)
    again = load_contracts(FLAT / "contracts", FLAT, texts={f"contracts/{k}": v for k, v in dump_contracts(cs).items()})
    assert again.kernels == cs.kernels
    assert again.schedules == cs.schedules


def test_absent_keys_leave_hashes_unchanged_and_present_ones_change_them() -> None:
    plain = load_contracts(PLAIN / "contracts", PLAIN)
    rel_param = '{ name = "h_out", dtype = "f32", shape = ["B", "H"], role = "out", saved = true }'
    ranged = load_with(rel_param, rel_param[:-2] + ', write_range = { axis = 1, stop = "H" } }', root=PLAIN)
    assert contract_hash(plain.kernel("loss")) == contract_hash(ranged.kernel("loss"))
    assert contract_hash(plain.kernel("forward")) != contract_hash(ranged.kernel("forward"))
    old = 'launch = "forward"\nbind = { x = "x", W = "W", b = "b", h_out = "h" }'
    viewed = load_with(old, old.replace('b = "b"', 'b = { buffer = "b", offset = 0, view = ["H"] }'), "contracts/schedules.toml", PLAIN)
    assert contract_hash(plain.schedule_map["backward"]) == contract_hash(viewed.schedule_map["backward"])
    assert contract_hash(plain.schedule_map["forward"]) != contract_hash(viewed.schedule_map["forward"])


@pytest.mark.parametrize(
    ("rel", "old", "new", "line", "message"),
    [
        (
            "contracts/kernels.toml", 'write_range = { axis = 1, start = 0, stop = "H" }', 'write_range = { axis = 2, start = 0, stop = "H" }', 30,
            "kernel[1].params[3].write_range.axis: expected an axis of the shape [B, H], 0..1, found 2.",
        ),
        (
            "contracts/kernels.toml", '{ name = "x", dtype = "f32", shape = ["B", "D"], role = "in" },\n  { name = "W"',
            '{ name = "x", dtype = "f32", shape = ["B", "D"], role = "in", write_range = { stop = "D" } },\n  { name = "W"', 27,
            'kernel[1].params[0].write_range: expected a write range only on an "out", "inout" or "accumulate" parameter, found it on an input (role "in").',
        ),
        (
            "contracts/kernels.toml", 'write_range = { axis = 1, start = 0, stop = "H" }', 'write_range = { axis = 1, stop = "H", end = "H" }', 30,
            'kernel[1].params[3].write_range.end: unknown key "end" in a write range',
        ),
        (
            "contracts/kernels.toml", 'aliases = [["dh_in", "dh_out"]]', 'aliases = [["dh_in", "dh_outt"]]', 62,
            'kernel[3].aliases[0]: "dh_outt" is not a tensor parameter of kernel "relu_backward"; its tensor parameters are "dh_in", "h", "dh_out".',
        ),
        (
            "contracts/kernels.toml", 'aliases = [["dh_in", "dh_out"]]', 'aliases = [["dh_in", "dh_in"]]', 62,
            'kernel[3].aliases[0]: expected two different parameters, found "dh_in" twice.',
        ),
        (
            "contracts/kernels.toml", 'aliases = [["dh_in", "dh_out"]]', 'aliases = [["dh_in", "dh_out"], ["h", "dh_in"]]', 62,
            'kernel[3].aliases[1]: parameter "dh_in" is already aliased with "dh_out"; expected each parameter in one pair at most.',
        ),
        (
            "contracts/kernels.toml", 'aliases = [["dh_in", "dh_out"]]', 'aliases = ["dh_in", "dh_out"]', 62,
            'kernel[3].aliases: expected a list of parameter pairs such as [["dinp", "dout"]], found the string "dh_in" in it.',
        ),
        (
            "contracts/schedules.toml", 'db = { buffer = "grads", offset = "H * D", view = ["H"] } }\n\n[[schedule.step]]\nlaunch = "reduce"',
            'db = { buffer = "grads", offset = "H * D" } }\n\n[[schedule.step]]\nlaunch = "reduce"', 36,
            'schedule[1].step[2].bind.db.offset: expected a "view" (the shape of the slice) next to "offset", found none.',
        ),
        (
            "contracts/schedules.toml", 'db = { buffer = "grads", offset = "H * D", view = ["H"] } }\n\n[[schedule.step]]\nlaunch = "reduce"',
            'db = { buffer = "grads", offset = "H * Q +", view = ["H"] } }\n\n[[schedule.step]]\nlaunch = "reduce"', 36,
            'schedule[1].step[2].bind.db.offset: "H * Q +" is not a valid dim expression.',
        ),
    ],
)
def test_malformed_keys_are_load_errors(rel: str, old: str, new: str, line: int, message: str) -> None:
    with pytest.raises(ContractError) as exc:
        load_with(old, new, rel)
    (problem,) = exc.value.problems
    assert (problem.path, problem.line) == (rel, line)
    assert message in f"{problem.key}: {problem.message}"


def test_a_load_error_is_one_sentence_and_exit_2(tmp_path: Path, capsys) -> None:
    import shutil

    from audit.cli import main

    root = tmp_path / "p"
    shutil.copytree(FLAT, root)
    f = root / "contracts" / "kernels.toml"
    f.write_text(f.read_text().replace('aliases = [["dh_in", "dh_out"]]', 'aliases = [["dh_in", "dh_in"]]'))
    assert main(["check", "--root", str(root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[:1] == ['error: contracts/kernels.toml:62: kernel[3].aliases[0]: expected two different parameters, found "dh_in" twice.']


def test_views_overlap_only_where_both_are_written() -> None:
    """Reading W through two overlapping views is no clobbering; writing dW through [H * D] in one schedule and
    [H, D] in another at the same offset is one tensor, not an overlap (the good set does both)."""
    from audit.api import check

    old = 'b = { buffer = "params", offset = "H * D", view = ["H"] }'
    cs = load_with(old, 'b = { buffer = "params", offset = "H * D - 1", view = ["H"] }', "contracts/schedules.toml")
    assert [f for f in check(FLAT, select=["VIEW_OVERLAP"], contracts=cs).findings] == []


def test_an_offset_view_may_be_smaller_than_its_buffer() -> None:
    from audit.api import check

    cs = load_contracts(FLAT / "contracts", FLAT)
    assert check(FLAT, select=["VIEW_SIZE_MISMATCH", "VIEW_OUT_OF_BOUNDS"], contracts=cs).findings == []


def test_aliasing_through_overlapping_views_is_undeclared_aliasing() -> None:
    """Two views of one buffer that overlap, bound to a read and a written parameter of one launch, are the
    same memory twice: ALIAS_UNDECLARED reports them; disjoint views are not."""
    from audit.api import check

    old = 'launch = "relu_backward"\nbind = { dh_in = "dh", h = "h", dh_out = "dh" }'
    new = 'launch = "relu_backward"\nbind = { dh_in = "dh", h = { buffer = "dh", offset = "B * H - 1", view = ["B", "H"] }, dh_out = "dh" }'
    texts = texts_of(FLAT)
    texts["contracts/schedules.toml"] = texts["contracts/schedules.toml"].replace(old, new, 1)
    cs = load_contracts(FLAT / "contracts", FLAT, texts=texts)
    msgs = [f.message for f in check(FLAT, select=["ALIAS_UNDECLARED"], contracts=cs).findings]
    assert msgs == [
        'Step 2 of schedule "backward" binds buffer "dh" to both "h" and "dh_out" of kernel "relu_backward", which writes "dh_out", '
        'but the kernel declares no aliasing between them (aliases = [["h", "dh_out"]] if it works in place).'
    ]
