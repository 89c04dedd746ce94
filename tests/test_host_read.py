"""Host-side reads of ISV slots (``value = "isv(SLOT)"``) and the state-changing graph replay (issue 16 item 3).

The fixture ``tests/data/host_read`` is one small chain in two variants: ``pointer`` reads the label scale
through the ISV pointer and slot index, ``host`` reads it on the host and passes it by value into a schedule
captured into a CUDA graph. Statically HOST_READ_IN_GRAPH reports the host variant; at run time (emulated
backend: the capture records each launch with its argument values as of capture, a replay re-runs them
with those frozen values) the replay at fresh states fails it while the pointer variant passes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.errors import ContractError
from audit.load import load_contracts
from audit.model import HostRead
from audit.runtime import verify
from audit.runtime._chain import REPLAY_STATES
from audit.serialize import dump_contracts

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "data" / "host_read"
REPLAY_MSG = (
    'Schedule "step" fails VERIFY_GRAPH_REPLAY at B=37: after changing inputs and ISV in place, the replayed graph '
    'and an eager run on the same inputs differ bitwise in buffer "z".'
)


def copy(variant: str, tmp_path: Path) -> Path:
    dst = tmp_path / variant
    shutil.copytree(FIXTURE / variant, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def run(root: Path):
    return verify(root, emulated={}, sizes=(37,), chain_sizes=(37,), evidence=False)


def checks(out, subject: str, check: str):
    return [c for r in out.run.results if r.subject == subject for c in r.checks if c.check == check]


def errors(out) -> list[str]:
    return [f"{f.rule} {f.message}" for f in out.result.findings if f.rule != "VERIFY_TAIL_UNCOVERED"]


# -- the model ---------------------------------------------------------------------------------------


def test_isv_scalar_loads_as_a_host_read_and_round_trips(tmp_path: Path) -> None:
    root = copy("host", tmp_path)
    cs = load_contracts(root / "contracts", root)
    p = cs.kernel_map["normalize"].param("scale")
    assert isinstance(p.value, HostRead) and p.value.slot == "LABEL_SCALE" and p.value.text == "isv(LABEL_SCALE)"
    assert p.value.loc.line == 67
    text = dump_contracts(cs)
    again = load_contracts(root / "contracts", root, texts={f"contracts/{k}": v for k, v in text.items()})
    assert again.kernel_map["normalize"].param("scale").value.slot == "LABEL_SCALE"


def test_recapture_loads_and_round_trips(tmp_path: Path) -> None:
    root = copy("host", tmp_path)
    toml = root / "contracts" / "chain.toml"
    toml.write_text(toml.read_text().replace('graph_capture = true\n', 'graph_capture = true\nrecapture = "every_step"\n'))
    cs = load_contracts(root / "contracts", root)
    assert cs.schedule_map["step"].recapture == "every_step"
    again = load_contracts(root / "contracts", root, texts={f"contracts/{k}": v for k, v in dump_contracts(cs).items()})
    assert again.schedule_map["step"].recapture == "every_step"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"isv(1)"', 'expected "isv(SLOT_NAME)" (a host-side read of one ISV slot), found "isv(1)".'),
        ('"isv(A, B)"', 'expected "isv(SLOT_NAME)" (a host-side read of one ISV slot), found "isv(A, B)".'),
    ],
)
def test_a_malformed_host_read_is_a_load_error_naming_file_line_and_key(value: str, message: str) -> None:
    text = (
        '[[kernel]]\nname = "k"\nsource = "k.cu"\nstage = "forward"\ngrid = [1]\nblock = [32]\n'
        f'params = [\n  {{ name = "s", kind = "scalar", dtype = "f32", value = {value} }},\n]\n'
    )
    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/x.toml": text})
    (problem,) = info.value.problems
    assert (problem.path, problem.line, problem.key, problem.message) == ("contracts/x.toml", 8, "kernel[0].params[0].value", message)


def test_an_unknown_recapture_mode_is_a_load_error() -> None:
    text = '[[schedule]]\nname = "s"\ngraph_capture = true\nrecapture = "sometimes"\n'
    with pytest.raises(ContractError) as info:
        load_contracts(Path("contracts"), Path("."), texts={"contracts/x.toml": text})
    (problem,) = info.value.problems
    assert (problem.line, problem.key, problem.message) == (4, "schedule[0].recapture", 'expected one of "every_step", found "sometimes".')


def test_a_host_read_of_an_unknown_slot_is_an_unknown_slot_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from audit.cli import main

    root = copy("host", tmp_path)
    toml = root / "contracts" / "chain.toml"
    toml.write_text(toml.read_text().replace('value = "isv(LABEL_SCALE)"', 'value = "isv(LABEL_SCALES)"'))
    rc = main(["check", "--root", str(root), "--select", "UNKNOWN_SLOT"])
    out = capsys.readouterr().out
    assert rc == 1
    assert (
        'contracts/chain.toml:67: UNKNOWN_SLOT Kernel "normalize" parameter "scale" reads slot "LABEL_SCALES" on the host, '
        'which is not in the layout (did you mean "LABEL_SCALE"?).'
    ) in out.splitlines()


# -- the static rule ----------------------------------------------------------------------------------


def test_the_rule_reports_the_host_variant_and_not_the_pointer_variant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from audit.cli import main

    assert main(["check", "--root", str(copy("pointer", tmp_path)), "--select", "HOST_READ_IN_GRAPH"]) == 0
    capsys.readouterr()
    assert main(["check", "--root", str(copy("host", tmp_path)), "--select", "HOST_READ_IN_GRAPH"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        'contracts/chain.toml:67: HOST_READ_IN_GRAPH Schedule "step" is captured into a CUDA graph, but step 2 passes scalar '
        '"scale" of kernel "normalize" as isv(LABEL_SCALE), read on the host at capture and frozen for every replay; pass the '
        'ISV pointer and the slot index instead, or declare recapture = "every_step".'
    )


def test_the_rule_points_at_a_launch_argument_that_reads_on_the_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from audit.cli import main

    root = copy("host", tmp_path)
    toml = root / "contracts" / "chain.toml"
    text = toml.read_text().replace('value = "isv(LABEL_SCALE)"', "value = 1.0")
    toml.write_text(text.replace('bind = { y = "y", z = "z" }', 'bind = { y = "y", z = "z" }\nargs = { scale = "isv(LABEL_SCALE)" }'))
    assert main(["check", "--root", str(root), "--select", "HOST_READ_IN_GRAPH"]) == 1
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith('contracts/chain.toml:84: HOST_READ_IN_GRAPH Schedule "step" is captured into a CUDA graph, but step 2')
    # every other static rule reads such an argument without tripping over it
    assert main(["check", "--root", str(root), "--select", "schema,wiring,isv,invariants"]) == 1
    assert [x.split(" ")[1] for x in capsys.readouterr().out.splitlines() if x.startswith("contracts/")] == ["HOST_READ_IN_GRAPH"]
    toml.write_text(toml.read_text().replace('args = { scale = "isv(LABEL_SCALE)" }', 'args = { scale = "isv(LABEL_SCAL)" }'))
    assert main(["check", "--root", str(root), "--select", "UNKNOWN_SLOT"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        'contracts/chain.toml:84: UNKNOWN_SLOT Schedule "step" step 2 argument "scale" reads slot "LABEL_SCAL" on the host, '
        'which is not in the layout (did you mean "LABEL_SCALE"?).'
    )


# -- the runtime --------------------------------------------------------------------------------------


def test_pointer_variant_passes_the_replay_at_every_fresh_state(tmp_path: Path) -> None:
    out = run(copy("pointer", tmp_path))
    assert errors(out) == [] and out.result.exit_code == 0
    (replay,) = checks(out, "step", "graph_replay")
    assert replay.verdict == "pass"
    assert replay.message == f"graph replay equals eager bit for bit at {REPLAY_STATES} fresh states (inputs and ISV changed between replays)"


def test_host_variant_fails_the_replay_and_passes_the_chain(tmp_path: Path) -> None:
    out = run(copy("host", tmp_path))
    assert errors(out) == [f"VERIFY_GRAPH_REPLAY {REPLAY_MSG}"] and out.result.exit_code == 1
    # the eager run reads the scale at launch, after the producer updated it: the float64 chain agrees
    (chain,) = checks(out, "step", "chain")
    assert chain.verdict == "pass"
    (k,) = [r for r in out.run.results if r.subject == "normalize"]
    assert k.verdict == "pass"  # verified alone, the kernel is right: only the graph freezes its argument


def test_an_eager_host_read_taken_before_the_producer_fails_the_chain(tmp_path: Path) -> None:
    """The eager run reads the slot just before its launch; reading it before the chain would be stale."""
    from audit.runtime import _chain

    root = copy("host", tmp_path)
    real_read, real_eager = _chain.ScheduleVerifier.read_isv, _chain.ScheduleVerifier.eager

    def eager_reading_once(self, be, arena, bufs, steps, label, check_guards):  # the ISV before the chain's first launch
        self.snapshot = real_read(self, be, bufs)
        return real_eager(self, be, arena, bufs, steps, label, check_guards)

    _chain.ScheduleVerifier.eager = eager_reading_once
    _chain.ScheduleVerifier.read_isv = lambda self, be, bufs: self.snapshot
    try:
        out = run(root)
    finally:
        _chain.ScheduleVerifier.read_isv, _chain.ScheduleVerifier.eager = real_read, real_eager
    assert any(f.rule == "VERIFY_CHAIN" and '"z"' in f.message for f in out.result.findings), errors(out)


def test_every_replay_sees_a_new_state(tmp_path: Path) -> None:
    """A kernel whose replays break only from the second one on is caught: each state gets its own replay."""
    calls = {"replays": 0}

    def breaks_on_second_replay(launch):
        launch.default()
        if launch.replay:
            calls["replays"] += 1
            if calls["replays"] >= 2:
                launch.tensor("z")[0] += 1.0

    out = verify(copy("pointer", tmp_path), emulated={"normalize": breaks_on_second_replay}, sizes=(37,), chain_sizes=(37,), evidence=False)
    assert calls["replays"] == 2
    msg = [f.message for f in out.result.findings if f.rule == "VERIFY_GRAPH_REPLAY"]
    assert msg == [
        f'Schedule "step" fails VERIFY_GRAPH_REPLAY at B=37, replay 2 of {REPLAY_STATES}: after changing inputs and ISV in place, '
        'the replayed graph and an eager run on the same inputs differ bitwise in buffer "z".'
    ]


def test_recapture_every_step_makes_a_host_read_fresh(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without the producer in the graph, a schedule re-captured at every step passes its host read fresh."""
    from audit.cli import main

    root = copy("host", tmp_path)
    toml = root / "contracts" / "chain.toml"
    text = toml.read_text().replace('[[schedule.step]]\nlaunch = "label_scale_update"\nbind = { y = "y" }\n\n', "")
    toml.write_text(text)
    assert errors(run(root)) == [REPLAY_MSG.replace("Schedule", "VERIFY_GRAPH_REPLAY Schedule", 1)]
    toml.write_text(text.replace("graph_capture = true\n", 'graph_capture = true\nrecapture = "every_step"\n'))
    out = run(root)
    assert errors(out) == []
    (replay,) = checks(out, "step", "graph_replay")
    assert replay.verdict == "pass"
    assert main(["check", "--root", str(root), "--select", "HOST_READ_IN_GRAPH"]) == 0
