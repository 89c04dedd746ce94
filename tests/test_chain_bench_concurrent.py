"""benchmarks/gpu_chain_vs_torch.py off the GPU: its concurrent capture of the fused chain (the streams
and waits come from the contracts' declared accesses, and the capture enforces every one of them) and the
issue-18 target verdict it prints."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_chain_vs_torch

    return gpu_chain_vs_torch


class FakeStream:
    """Records what a capture enqueues: ('op', j), ('record', event), ('wait', event)."""

    def __init__(self, log, name):
        self.log, self.name, self.ptr = log, name, 0

    def wait_event(self, ev):
        self.log.append((self.name, "wait", ev))

    def begin_capture(self):
        self.log.append((self.name, "begin", None))

    def end_capture(self):
        self.log.append((self.name, "end", None))
        return types.SimpleNamespace(upload=lambda stream: None)


class FakeEvent:
    def __init__(self, log):
        self.log = log

    def record(self, stream):
        self.log.append((stream.name, "record", self))


def happens_before(log):
    """Op j -> every op that must have finished before it starts, from the recorded stream program."""
    done_before: dict[str, set[int]] = {}  # per stream: ops ordered before its next op
    event_ops: dict[int, set[int]] = {}
    hb: dict[int, set[int]] = {}
    for stream, what, x in log:
        cur = done_before.setdefault(stream, set())
        if what == "op":
            hb[x] = set(cur)
            cur.add(x)
        elif what == "record":
            event_ops[id(x)] = set(cur)
        elif what == "wait":
            cur |= event_ops[id(x)]
    return hb, done_before


def test_the_concurrent_capture_enforces_every_dependency_and_joins_every_stream(bench):
    from audit.graph import Wiring
    from audit.load import load_contracts
    from audit.stepdag import chain_steps, step_dependencies

    cs = load_contracts(REPO / "contracts", REPO)
    csB = bench.contracts_at(cs, 256)
    wiring = Wiring(csB)
    ops = bench.build_plan(csB, wiring, (bench.FORWARD, bench.FUSED), n_valid=8)
    plan, dag = bench.concurrent_plan(wiring, ops)
    assert plan.streams > 1

    log: list = []
    chain = object.__new__(bench.CupyChain)
    chain.cp = types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=lambda non_blocking: FakeStream(log, f"s{len(chain.side_streams) + 1}"),
                                                                Event=lambda disable_timing: FakeEvent(log)))
    chain.stream = FakeStream(log, "s0")
    chain.side_streams = []
    chain.enqueue = lambda op, s, stream: log.append((stream.name, "op", ops.index(op)))
    chain.capture_concurrent(ops, plan)

    assert log[0] == ("s0", "begin", None) and log[-1] == ("s0", "end", None)
    hb, final = happens_before(log)
    deps = step_dependencies(chain_steps(wiring, [bench.FORWARD, bench.FUSED]))
    assert dag == deps
    for j, d in enumerate(deps):
        assert set(d) <= hb[j], (ops[j].label, d, hb[j])
    assert final["s0"] >= set(range(len(ops))), "every stream's work joins the capturing stream before the capture ends"
    assert len({s for s, what, _ in log if what == "op"}) == plan.streams


def test_the_plan_must_be_the_schedules_steps_in_order(bench):
    from audit.graph import Wiring
    from audit.load import load_contracts

    cs = load_contracts(REPO / "contracts", REPO)
    csB = bench.contracts_at(cs, 256)
    wiring = Wiring(csB)
    ops = bench.build_plan(csB, wiring, (bench.FORWARD, bench.FUSED), n_valid=8)
    with pytest.raises(RuntimeError, match="not the schedules' steps in order"):
        bench.concurrent_plan(wiring, ops[:3] + ops[4:])


def _results(bench, ours, conc, torch_graph, err_ours, err_torch, sizes=("256", "4096", "65536")):
    res = {"sizes": {}}
    for B in sizes:
        v = {bench.BASELINE: {"median_us": torch_graph[B]}}
        if ours.get(B):
            v["ours_fused (one CUDA graph)"] = {"median_us": ours[B]}
        if conc.get(B):
            v[bench.CONCURRENT] = {"median_us": conc[B]}
        checks = {"torch_f32 vs torch_f64": {"max": err_torch}, "ours_fused graph vs torch_f64": {"max": err_ours},
                  "ours_fused_concurrent graph vs torch_f64": {"max": err_ours}}
        res["sizes"][B] = {"variants": v, "checks": checks, "errors": {}}
    return res


def test_target_verdict(bench):
    t = {"256": 120.0, "4096": 220.0, "65536": 1400.0}
    good = _results(bench, {"256": 130.0, "4096": 200.0, "65536": 1500.0}, {"256": 110.0, "4096": 170.0, "65536": 1100.0}, t, 1e-7, 2e-7)
    serial, concurrent = bench.target_verdict(good)
    assert serial.startswith("target (issue 18) for ours_fused (one CUDA graph): NOT MET")
    assert concurrent.startswith(f"target (issue 18) for {bench.CONCURRENT}: MET")
    assert "B=4096: x1.29 (need x1.25)" in concurrent
    worse = _results(bench, {}, {"256": 110.0, "4096": 170.0, "65536": 1100.0}, t, 3e-7, 2e-7)
    assert ": NOT MET" in bench.target_verdict(worse)[1] and "3.0e-07 vs torch f32 2.0e-07" in bench.target_verdict(worse)[1]
    missing = _results(bench, {}, {"256": 110.0, "4096": 170.0}, t, 1e-7, 2e-7, sizes=("256", "4096"))
    assert ": NOT RUN" in bench.target_verdict(missing)[1]


def test_target_verdict_checks_accuracy_at_every_size_and_names_the_outputs_above_torch(bench):
    t = {"256": 120.0, "4096": 220.0, "65536": 1400.0}
    res = _results(bench, {}, {"256": 110.0, "4096": 170.0, "65536": 1100.0}, t, 1e-7, 2e-7)
    assert ": MET" in bench.target_verdict(res)[1]
    res["sizes"]["256"]["checks"]["ours_fused_concurrent graph vs torch_f64"] = {
        "max": 4e-7, "errors": {"nb_dW2": 4e-7, "nb_dW1": 3e-7, "to_db1": 1e-7}}
    line = bench.target_verdict(res)[1]
    assert ": NOT MET" in line
    assert "B=256: 4.0e-07 vs torch f32 2.0e-07 (above it: nb_dW2 4.0e-07, nb_dW1 3.0e-07)" in line
    assert "B=4096: 1.0e-07 vs torch f32 2.0e-07," in line


def test_verdict_mode_reads_stored_results_without_a_gpu(bench, tmp_path, capsys):
    t = {"256": 120.0, "4096": 220.0, "65536": 1400.0}
    good = tmp_path / "good.json"
    res = _results(bench, {}, {"256": 110.0, "4096": 170.0, "65536": 1100.0}, t, 1e-7, 2e-7)
    res["candidates"] = ["aux_next_bar_forward=benchmarks/kernels_baseline/aux_next_bar_forward_kernel.cu:aux_next_bar_forward;grid=ceil_div(B, 32),1,1;block=128,1,1"]
    good.write_text(json.dumps(res))
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert bench.main(["--verdict", str(good)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{good}: candidates: aux_next_bar_forward (aux_next_bar_forward_kernel.cu)\n")
    assert f"  target (issue 18) for {bench.CONCURRENT}: MET" in out
    assert bench.main(["--verdict", str(bad), str(good)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f'{bad}: not a gpu_chain_vs_torch result: expected a JSON object with a "sizes" table\n')
    assert bench.main(["--verdict", str(tmp_path / "absent.json")]) == 2
    assert capsys.readouterr().out.startswith(f"{tmp_path / 'absent.json'}: unreadable (FileNotFoundError")
    assert f"{good}: candidates" in out


def test_critical_path_is_the_longest_chain_of_waits(bench):
    deps = [(), (0,), (0,), (1, 2), ()]
    assert bench.critical_path(deps, [1.0, 5.0, 2.0, 1.0, 6.5]) == (7.0, [0, 1, 3])
    assert bench.critical_path(deps, [1.0, 1.0, 2.0, 1.0, 6.5]) == (6.5, [4])
    assert bench.critical_path(deps, [None, 1.0, 2.0, 1.0, None]) == (3.0, [0, 2, 3])
    assert bench.critical_path([], []) == (0.0, [])
