"""wireup check answers its graph questions without importing networkx: SCHEDULE_CYCLE decides
acyclicity itself (networkx names the cycle when there is one), and INVARIANT_VIOLATED's shortest paths
come from audit.graph.shortest_path (networkx's bidirectional search step for step, so the same path is
named where several are shortest), cached beside the build cache, keyed by the graph, the query and that
function's code."""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import pytest

from audit.api import check, run_check
from audit.graph import Wiring
from audit.load import load_contracts

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "tests" / "data" / "rules"


def _graph(ops) -> nx.DiGraph:
    g = nx.DiGraph()
    for op in ops:
        g.add_node(op[1]) if op[0] == "node" else g.add_edge(op[1], op[2], why=op[3])
    return g


def test_acyclicity_without_networkx_agrees_with_networkx_on_random_schedule_graphs():
    rng = random.Random(14)
    for _ in range(400):
        n = rng.randint(1, 8)
        ops = [("node", f"s{i}") for i in range(n)]
        for _ in range(rng.randint(0, 12)):
            ops.append(("edge", f"s{rng.randrange(n + 1)}", f"s{rng.randrange(n + 1)}", "after"))  # s{n}: undeclared
        rng.shuffle(ops)
        want = nx.is_directed_acyclic_graph(_graph(ops))
        assert Wiring.schedules_acyclic(SimpleNamespace(_schedule_ops=ops)) is want, ops


@pytest.mark.parametrize("root", [REPO, RULES / "SCHEDULE_CYCLE" / "good", RULES / "SCHEDULE_CYCLE" / "bad"],
                         ids=["shipped", "cycle-good", "cycle-bad"])
def test_the_recorded_schedule_graph_is_the_one_networkx_builds(root: Path):
    w = Wiring.of(load_contracts(root / "contracts", root))
    assert w.schedules_acyclic() is nx.is_directed_acyclic_graph(w.schedule_graph)
    assert list(w.schedule_graph.nodes) == list(dict.fromkeys(n for op in w._schedule_ops for n in op[1:3]))


def test_schedule_cycle_on_an_acyclic_project_needs_no_networkx(monkeypatch):
    monkeypatch.setitem(sys.modules, "networkx", None)  # importing it would fail
    result = check(REPO, select=["SCHEDULE_CYCLE"])
    assert result.findings == [] and not result.not_run


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".wireup-cache"))
    return dst


def _messages(root: Path) -> list[str]:
    # run_check: every selected rule runs (check() would answer a repeated run from the check cache)
    return [f"{f.file}:{f.line}: {f.message}" for f in run_check(root, select=["INVARIANT_VIOLATED"]).result.findings]


def test_invariant_paths_are_answered_from_the_cache_on_the_second_run(tmp_path, monkeypatch):
    root = _copy(RULES / "INVARIANT_VIOLATED" / "bad", tmp_path / "bad")
    first = _messages(root)
    assert first == ['contracts/schedules.toml:59: Invariant "encoder_protected" is violated: "backward" reaches '
                     '"x_grad" through backward -> x_grad.']
    assert list((root / ".wireup-cache" / "analysis" / "paths").glob("*.json"))

    def no_graph(self, src, dst):
        raise AssertionError("the path was computed again")

    monkeypatch.setattr(Wiring, "path", no_graph)
    assert _messages(root) == first


def test_a_check_of_the_shipped_repository_does_not_import_networkx_cold_or_warm(tmp_path):
    import subprocess

    root = _copy(REPO / "contracts", tmp_path / "repo" / "contracts").parent
    shutil.copytree(REPO / "kernels", root / "kernels")
    (root / "wireup.toml").write_text('contracts = "contracts"\nkernels = "kernels"\n')
    code = ("import sys; from pathlib import Path; from audit.api import check; "
            "r = check(Path(sys.argv[1]), select=['schema', 'wiring', 'isv', 'invariants']); "
            "print(len(r.findings), 'networkx' in sys.modules)")
    runs = [subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, cwd=REPO, check=True)
            for _ in range(2)]
    assert [r.stdout.split() for r in runs] == [["0", "False"], ["0", "False"]]


def test_another_graph_is_another_entry(tmp_path):
    good = _copy(RULES / "INVARIANT_VIOLATED" / "good", tmp_path / "good")
    bad = _copy(RULES / "INVARIANT_VIOLATED" / "bad", tmp_path / "bad")
    wg = Wiring.of(load_contracts(good / "contracts", good))
    wb = Wiring.of(load_contracts(bad / "contracts", bad))
    assert wg.graph_digest() != wb.graph_digest()
    assert wb.graph_digest() == Wiring.of(load_contracts(bad / "contracts", bad)).graph_digest()
    assert _messages(good) == []


@pytest.mark.parametrize("value", ["x", [1, 2], {"a": 1}, ["kernel:a", None]])
def test_a_forged_or_damaged_path_entry_is_recomputed(tmp_path, value):
    root = _copy(RULES / "INVARIANT_VIOLATED" / "bad", tmp_path / "bad")
    first = _messages(root)
    for entry in (root / ".wireup-cache" / "analysis" / "paths").glob("*.json"):
        data = json.loads(entry.read_text())
        entry.write_text(json.dumps({**data, "value": value}))
    assert _messages(root) == first
    for entry in (root / ".wireup-cache" / "analysis" / "paths").glob("*.json"):
        assert json.loads(entry.read_text())["value"] != value  # rewritten


def test_without_networkx_source_the_paths_are_not_cached(tmp_path, monkeypatch):
    from audit.rules import invariants

    monkeypatch.setattr(invariants, "_shortest_path_code", lambda: None)
    root = _copy(RULES / "INVARIANT_VIOLATED" / "bad", tmp_path / "bad")
    assert len(_messages(root)) == 1
    assert not list((root / ".wireup-cache").glob("analysis/paths/*.json"))


def test_shortest_path_names_the_path_networkx_names_on_random_graphs():
    from audit.graph import shortest_path

    rng = random.Random(18)
    for _ in range(600):
        n = rng.randint(1, 12)
        nodes = [f"n{i}" for i in rng.sample(range(40), n)]
        edges = [(rng.choice(nodes + ["x1", "x2"]), rng.choice(nodes + ["x1", "x2"])) for _ in range(rng.randint(0, 3 * n))]
        g = nx.DiGraph()
        g.add_nodes_from(nodes)
        g.add_edges_from(edges)
        succ = {u: dict.fromkeys(g.succ[u]) for u in g}
        pred = {u: dict.fromkeys(g.pred[u]) for u in g}
        for _ in range(6):
            a, b = rng.choice(list(g)), rng.choice(list(g))
            try:
                want = nx.shortest_path(g, a, b)
            except nx.NetworkXNoPath:
                want = None
            assert shortest_path(succ, pred, a, b) == want, (edges, a, b)


@pytest.mark.parametrize("root", [REPO, *sorted(p for p in (RULES / "INVARIANT_VIOLATED").iterdir() if p.is_dir())], ids=str)
def test_wiring_paths_are_networkx_paths_over_the_built_graph(root: Path):
    w = Wiring.of(load_contracts(root / "contracts", root))
    g = w.graph
    assert {u: list(w._adjacency[0][u]) for u in g} == {u: list(g.succ[u]) for u in g}
    assert {u: list(w._adjacency[1][u]) for u in g} == {u: list(g.pred[u]) for u in g}
    nodes = sorted(g)
    for a in nodes[:: max(1, len(nodes) // 12)]:
        for b in nodes[:: max(1, len(nodes) // 12)]:
            try:
                want = nx.shortest_path(g, a, b)
            except nx.NetworkXNoPath:
                want = None
            assert w.path(a, b) == want
    assert w.path("kernel:no_such", nodes[0]) is None
