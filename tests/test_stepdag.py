"""The step dependency graph (audit/stepdag.py): which steps of a chain may run concurrently.

The property that matters: every order the graph allows computes what the serial order computes. It is
checked by simulation: each step reads versions of the resources it reads and writes new versions; any
topological order of the dependencies (and any interleaving the stream plan allows) must give every step
the same versions to read and leave the same final versions as the serial order."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.graph import Wiring
from audit.load import load_contracts
from audit.stepdag import StepNode, chain_steps, step_dependencies, stream_plan

REPO = Path(__file__).resolve().parents[1]


def node(i: int, reads=(), writes=()) -> StepNode:
    return StepNode("s", i, f"k{i}", frozenset(reads), frozenset(writes))


def serial_versions(steps):
    """(what each step reads: resource -> version) and the final versions, in serial order."""
    return run_order(steps, range(len(steps)))


def run_order(steps, order):
    version: dict[str, int] = {}
    seen = {}
    for j in order:
        n = steps[j]
        seen[j] = {r: version.get(r, -1) for r in sorted(n.reads | n.writes)}  # a write may read-modify-write
        for w in n.writes:
            version[w] = j
    return seen, version


def random_topological(deps, rng):
    n = len(deps)
    children = {i: [] for i in range(n)}
    indeg = [0] * n
    for j, d in enumerate(deps):
        for i in d:
            children[i].append(j)
            indeg[j] += 1
    ready = [j for j in range(n) if indeg[j] == 0]
    order = []
    while ready:
        j = ready.pop(rng.randrange(len(ready)))
        order.append(j)
        for c in children[j]:
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    assert len(order) == n, "the dependencies have a cycle"
    return order


def closure(edges, n):
    anc = [set() for _ in range(n)]
    for j in range(n):
        for i in edges[j]:
            anc[j] |= {i} | anc[i]
    return anc


def plan_edges(plan, n):
    """The order the stream plan enforces: the previous op on the same stream, and the waits."""
    last: dict[int, int] = {}
    edges = []
    for j in range(n):
        e = set(plan.waits[j])
        if plan.stream[j] in last:
            e.add(last[plan.stream[j]])
        last[plan.stream[j]] = j
        edges.append(e)
    return edges


RESOURCES = ["buffer:a", "buffer:b", "buffer:c", "slot:X", "slot:Y"]
step_strategy = st.tuples(st.sets(st.sampled_from(RESOURCES), max_size=3), st.sets(st.sampled_from(RESOURCES), max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.lists(step_strategy, min_size=1, max_size=14), st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_every_allowed_order_computes_what_the_serial_order_computes(raw, seed, max_streams):
    steps = [node(i, r, w) for i, (r, w) in enumerate(raw)]
    deps = step_dependencies(steps)
    want = serial_versions(steps)
    rng = random.Random(seed)
    for _ in range(5):
        assert run_order(steps, random_topological(deps, rng)) == want
    plan = stream_plan(deps, max_streams=max_streams)
    enforced = plan_edges(plan, len(steps))
    assert max(plan.stream) < max_streams
    assert run_order(steps, random_topological(enforced, rng)) == want
    # the plan keeps every dependency
    anc = closure(enforced, len(steps))
    for j, d in enumerate(deps):
        assert set(d) <= anc[j]


@settings(max_examples=200, deadline=None)
@given(st.lists(step_strategy, min_size=1, max_size=14))
def test_with_enough_streams_the_plan_adds_no_order_of_its_own(raw):
    steps = [node(i, r, w) for i, (r, w) in enumerate(raw)]
    deps = step_dependencies(steps)
    plan = stream_plan(deps, max_streams=len(steps))
    assert closure(plan_edges(plan, len(steps)), len(steps)) == closure([set(d) for d in deps], len(steps))


def test_dependencies_are_transitively_reduced_and_name_each_hazard():
    steps = [
        node(0, writes={"buffer:x"}),                       # writes x
        node(1, reads={"buffer:x"}, writes={"buffer:y"}),   # read after write of x
        node(2, reads={"buffer:x"}, writes={"buffer:z"}),   # independent of 1
        node(3, writes={"buffer:x"}),                       # write after read (1, 2) and write after write (0)
        node(4, reads={"buffer:y", "buffer:x"}),            # after 1 and 3, and 3 already waits for 1
        node(5, reads={"slot:S"}),
        node(6, writes={"slot:S"}),                         # write after read of slot S
    ]
    assert step_dependencies(steps) == [(), (0,), (0,), (1, 2), (3,), (), (5,)]


def test_a_read_modify_write_orders_after_the_last_writer_and_before_the_next_reader():
    steps = [node(0, writes={"buffer:acc"}), node(1, reads={"buffer:acc"}, writes={"buffer:acc"}),
             node(2, reads={"buffer:acc"}, writes={"buffer:acc"}), node(3, reads={"buffer:acc"})]
    assert step_dependencies(steps) == [(), (0,), (1,), (2,)]


def test_stream_plan_continues_a_chain_and_forks_independent_steps():
    deps = [(), (0,), (0,), (1, 2), ()]
    plan = stream_plan(deps)
    assert plan.stream == (0, 0, 1, 0, 2)
    assert plan.waits == ((), (), (0,), (2,), ())
    assert plan.streams == 3
    capped = stream_plan(deps, max_streams=1)
    assert capped.stream == (0, 0, 0, 0, 0) and all(w == () for w in capped.waits)
    with pytest.raises(ValueError):
        stream_plan(deps, max_streams=0)


def test_the_shipped_fused_chain_runs_its_heads_and_reductions_concurrently():
    cs = load_contracts(REPO / "contracts", REPO)
    steps = chain_steps(Wiring(cs), ["aux_heads_forward", "aux_heads_backward_fused"])
    labels = [f"{n.schedule}:{n.step}:{n.label}" for n in steps]
    assert len(steps) == len(cs.schedule_map["aux_heads_forward"].steps) + len(cs.schedule_map["aux_heads_backward_fused"].steps)
    deps = step_dependencies(steps)
    index = {n.label: j for j, n in reversed(list(enumerate(steps)))}  # first step of each label
    anc = closure([set(d) for d in deps], len(steps))
    to_fwd, nb_fwd = index["aux_trade_outcome_forward"], index["aux_next_bar_forward"]
    trunk = index["aux_trunk_forward"]
    # both heads read the trunk's output and nothing the other writes: concurrent
    assert trunk in anc[to_fwd] and trunk in anc[nb_fwd], labels
    assert to_fwd not in anc[nb_fwd] and nb_fwd not in anc[to_fwd], labels
    # the next-bar backward writes dh_s2_aux_accum first (no memset), the trade-outcome backward adds to it:
    # ordered as the schedule orders them
    to_bwd, nb_bwd = index["aux_trade_outcome_backward"], index["aux_next_bar_backward_store"]
    assert nb_bwd in anc[to_bwd] and to_bwd not in anc[nb_bwd]
    # the five weight-gradient reductions (the trunk's and the next-bar head's first Linear on the tensor cores,
    # the trade-outcome head's two over its labelled rows, the next-bar head's one-row one on the skinny path):
    # none waits for another
    kinds = ("aux_weight_grad_partial", "aux_weight_grad_partial_masked", "aux_weight_grad_partial_skinny")
    partials = [j for j, n in enumerate(steps) if n.label in kinds]
    assert [steps[j].label for j in partials] == [kinds[0], kinds[1], kinds[1], kinds[0], kinds[2]]
    for a in partials:
        for b in partials:
            assert a == b or a not in anc[b], (labels[a], labels[b])
    plan = stream_plan(deps)
    assert plan.streams > 1
    assert chain_steps(Wiring(cs), ["aux_heads_forward"])[0].reads  # the gather reads its input


def test_isv_slots_are_resources_of_the_steps_that_declare_them():
    cs = load_contracts(REPO / "contracts", REPO)
    steps = chain_steps(Wiring(cs), ["aux_heads_forward"])
    by_label = {n.label: n for n in steps}
    ema = by_label["aux_label_scale_ema_update"]
    assert "slot:AUX_LABEL_SCALE_EMA" in ema.writes
    with pytest.raises(KeyError):
        chain_steps(Wiring(cs), ["no_such_schedule"])


def test_wireup_graph_steps_draws_the_chain_and_needs_its_schedules(capsys):
    from audit.cli import main

    argv = ["graph", "--root", str(REPO), "--steps", "--schedule", "aux_heads_forward", "--schedule", "aux_heads_backward_fused"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("flowchart") == 1 and out.startswith("%% steps of aux_heads_forward then aux_heads_backward_fused")
    labels = dict(line.strip().split("[", 1) for line in out.splitlines() if line.strip().startswith("s") and "[" in line)
    trunk = next(k for k, v in labels.items() if ": aux_trunk_forward " in v)
    heads = [k for k, v in labels.items() if ": aux_trade_outcome_forward " in v or ": aux_next_bar_forward " in v]
    assert len(heads) == 2 and all(f"  {trunk} --> {h}" in out.splitlines() for h in heads)
    assert f"  {heads[0]} --> {heads[1]}" not in out.splitlines() and f"  {heads[1]} --> {heads[0]}" not in out.splitlines()
    assert main([*argv, "--format", "dot"]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith('digraph "steps of aux_heads_forward then aux_heads_backward_fused" {') and dot.rstrip().endswith("}")
    assert dot.count(" -> ") == out.count(" --> ")
    assert main(["graph", "--root", str(REPO), "--steps"]) == 2
    err = capsys.readouterr().err
    assert "--steps needs the schedules that run one after another, in order, as --schedule NAME" in err
