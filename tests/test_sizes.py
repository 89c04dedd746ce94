"""Cases as dim assignments, the tail-hunting size sweep and tail coverage (issue 15), on the CPU.

* the case syntax of ``--sizes`` and of contracts, and its errors (one sentence, exit 2);
* the sweep: every tail side first, then every value, then pairs (a pairwise covering array where the
  budget allows one); deterministic per seed; within its case and memory budgets;
* tail coverage: which sides ran, and why a side was missed (a fixed dim, or no case);
* the tail fixture (tests/data/tail_rows) on the emulated backend with a Python copy of its kernel's bug:
  the default sweep fails it; with T fixed at 64 it passes with VERIFY_TAIL_UNCOVERED naming T, which
  ``--strict`` turns into an error and ``wireup check`` predicts (TAIL_UNREACHABLE).
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from audit.api import load_project
from audit.cases import CaseError, DimCase, make_env, parse_case_text, representative_env
from audit.cli import main
from audit.errors import ContractError
from audit.graph import Wiring
from audit.load import load_contracts
from audit.runtime import verify
from audit.search.coverage import kernel_sites, tail_verdicts
from audit.search.sizes import candidate_values, choose_cases, plan_kernel, plan_schedule, source_tiles, tiling_constants

REPO = Path(__file__).resolve().parents[1]
TAIL = REPO / "tests" / "data" / "tail_rows"
RANGES = {"B": (1, 4096), "T": (1, 1024)}
T_RUNTIME = 'T = { min = 1, max = 1024, doc = "positions per sequence; the rows are the B * T positions" }'


@pytest.fixture
def tail(tmp_path: Path) -> Path:
    dst = tmp_path / "tail_rows"
    shutil.copytree(TAIL, dst, ignore=shutil.ignore_patterns(".wireup-cache", "evidence", "__pycache__"))
    return dst


def fix_t(root: Path, value: int = 64) -> None:
    path = root / "contracts" / "tail.toml"
    text = path.read_text()
    assert text.count(T_RUNTIME) == 1
    path.write_text(text.replace(T_RUNTIME, f"T = {value}"))


def buggy_tail_rows(launch) -> None:
    """The fixture kernel's bug in Python: a block whose eight rows are not all there writes nothing."""
    x = launch.tensor("x")
    out = launch.tensor("partial")
    rows = int(launch.scalar("rows"))
    for g in range(out.shape[0]):
        if 8 * g + 8 <= rows:
            out[g] = np.float32(x[8 * g : 8 * g + 8].astype(np.float64).sum())


# -- the case syntax -------------------------------------------------------------------------------------


def test_sizes_take_scalars_and_dim_assignments() -> None:
    assert parse_case_text("1,37", RANGES, "--sizes") == [1, 37]
    cases = parse_case_text("B=4,T=17;B=1,T=1", RANGES, "--sizes")
    assert [c.label for c in cases] == ["B=4,T=17", "B=1,T=1"]
    assert cases[0].as_dict() == {"B": 4, "T": 17} and cases[0].size == 17
    # mixed: scalars and a case, and a case written with its dims in another order
    mixed = parse_case_text("37; T=2, B=3", RANGES, "--sizes")
    assert mixed[0] == 37 and mixed[1].label == "B=3,T=2"


@pytest.mark.parametrize(("text", "message"), [
    ("B=4,X=1", '--sizes case "B=4,X=1": "X" is not a runtime dim; the runtime dims are "B", "T".'),
    ("B=4,D=1", '--sizes case "B=4,D=1": "D" is a fixed dim (32); only runtime dims take case values ("B", "T").'),
    ("B=0,T=1", '--sizes case "B=0,T=1": B = 0 is outside its range 1..4096.'),
    ("B=4", '--sizes case "B=4" does not bind the runtime dim(s) "T"; a case gives every runtime dim a value.'),
    ("B=4,T=x", '--sizes case "B=4,T=x": T takes an integer, found "x".'),
    ("B=4,T", '--sizes case "B=4,T": "T" is not an assignment NAME=VALUE.'),
    ("B=4,T=1,B=2", '--sizes case "B=4,T=1,B=2": "B" is given twice.'),
    ("4,x", '--sizes takes batch sizes or dim assignments such as "B=4,T=17;B=1,T=1", found "x".'),
])  # fmt: skip
def test_bad_cases_say_what_is_wrong_in_one_sentence(text: str, message: str) -> None:
    with pytest.raises(CaseError) as exc:
        parse_case_text(text, RANGES, "--sizes", {"D": 32})
    assert str(exc.value) == message


def test_a_bad_sizes_argument_exits_2_with_one_sentence(tail: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["verify", "--root", str(tail), "--emulated", "--sizes", "B=4,X=1", "--no-evidence"])
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.strip().endswith('--sizes case "B=4,X=1": "X" is not a runtime dim; the runtime dims are "B", "T".')
    assert "Traceback" not in err


def test_a_case_sets_each_runtime_dim_and_a_scalar_sets_all(tail: Path) -> None:
    _, cs = load_project(tail)
    assert make_env(cs, DimCase.of({"B": 4, "T": 17})) == {"D": 32, "B": 4, "T": 17}
    assert make_env(cs, 5) == {"D": 32, "B": 5, "T": 5}
    # a one-dim case seeds its data as the scalar size did: same data, same evidence
    assert DimCase.of({"B": 37}).key == 37 and DimCase.of({"B": 4, "T": 17}).key == "B=4,T=17"
    env, shown = representative_env(cs, {})
    assert (env["B"], env["T"], shown) == (4096, 1024, "B = 4096, T = 1024")


def test_contracts_give_test_values_and_extra_cases(tail: Path) -> None:
    path = tail / "contracts" / "tail.toml"
    text = path.read_text().replace(T_RUNTIME, 'T = { min = 1, max = 1024, test = [17, 64] }')
    text = text.replace('doc = "partial[g] = sum', 'verify = { cases = ["B=2,T=3", { B = 5, T = 6 }] }\ndoc = "partial[g] = sum')
    path.write_text(text)
    cfg, cs = load_project(tail)
    assert cs.dim_map["T"].test == (17, 64)
    k = cs.kernel_map["tail_rows_partial"]
    assert k.verify.cases == ((("B", 2), ("T", 3)), (("B", 5), ("T", 6)))
    plan = plan_kernel(cs, k, Wiring(cs), root=cfg.root)
    labels = [c.label for c in plan.cases]
    assert {"B=2,T=3", "B=5,T=6"} <= set(labels)
    assert plan.values["T"][:2] == [17, 64]  # test values come first among T's candidates
    assert len(labels) == 12 + 2  # the extra cases come on top of the sweep's budget


@pytest.mark.parametrize(("old", "new", "message"), [
    (T_RUNTIME, "T = { min = 1, max = 1024, test = [0, 17] }", 'contracts/tail.toml:5: dim "T": test value 0 is outside its range 1..1024.'),
    (T_RUNTIME, 'T = { min = 1, max = 1024, test = "17" }', 'contracts/tail.toml:5: dim "T": expected "test" to be a non-empty array of integers, found the string "17".'),
    ('doc = "partial[g] = sum', 'verify = { cases = ["B=2,Q=3"] }\ndoc = "partial[g] = sum', 'contracts/tail.toml:29: case "B=2,Q=3": "Q" is not a runtime dim; the runtime dims are "B", "T".'),
    ('doc = "partial[g] = sum', 'verify = { cases = ["B=2"] }\ndoc = "partial[g] = sum', 'contracts/tail.toml:29: case "B=2" does not bind "T"; a case gives every runtime dim one value.'),
    ('doc = "partial[g] = sum', 'verify = { cases = ["B=2,T=5000"] }\ndoc = "partial[g] = sum', 'contracts/tail.toml:29: case "B=2,T=5000": T = 5000 is outside its range 1..1024.'),
    ('doc = "partial[g] = sum', 'verify = { cases = ["B=two,T=1"] }\ndoc = "partial[g] = sum', 'contracts/tail.toml:29: case "B=two,T=1": "B=two" is not an assignment NAME=VALUE with an integer value.'),
])  # fmt: skip
def test_bad_contract_cases_name_file_and_line(tail: Path, old: str, new: str, message: str) -> None:
    rel = "contracts/tail.toml"
    texts = {rel: (tail / rel).read_text().replace(old, new, 1)}
    with pytest.raises(ContractError) as exc:
        load_contracts(tail / "contracts", tail, texts=texts)
    assert [f"{p.path}:{p.line}: {p.message}" for p in exc.value.problems] == [message]


# -- the sweep ----------------------------------------------------------------------------------------


def test_the_sweep_covers_every_pair_when_the_budget_allows() -> None:
    values = {"A": [1, 2, 3], "B": [1, 2, 3], "C": [1, 2], "D": [5, 6]}
    chosen, (pairs, total), _ = choose_cases(values, max_cases=50)
    want = {(x, vx, y, vy) for x, y in itertools.combinations(values, 2) for vx in values[x] for vy in values[y]}
    got = {(x, c[x], y, c[y]) for c in chosen for x, y in itertools.combinations(values, 2)}
    assert got == want and pairs == total == len(want)
    assert len(chosen) < 3 * 3 * 2 * 2  # a covering array, not the full product


def test_the_sweep_is_deterministic_per_seed() -> None:
    values = {"A": list(range(1, 9)), "B": list(range(1, 8)), "C": [1, 2, 3]}
    first = choose_cases(values, seed=3, max_cases=10)
    assert choose_cases(values, seed=3, max_cases=10) == first
    assert any(choose_cases(values, seed=s, max_cases=10)[0] != first[0] for s in range(4, 9))


def test_the_sweep_keeps_to_its_case_and_memory_budgets() -> None:
    values = {"A": list(range(1, 30)), "B": list(range(1, 30))}
    chosen, _, _ = choose_cases(values, max_cases=7, cost=lambda c: c["A"] * c["B"], max_cost=100)
    assert len(chosen) == 7
    assert all(c["A"] * c["B"] <= 100 for c in chosen)
    assert [c["A"] * c["B"] for c in chosen] == sorted(c["A"] * c["B"] for c in chosen)  # smallest first


def test_tail_sides_come_before_values_and_pairs() -> None:
    # one case only: it must be the one reaching the tail side no other value reaches
    sides = lambda c: {("s", "tail" if c["A"] % 8 else "exact")}  # noqa: E731
    chosen, _, (covered, total) = choose_cases({"A": [8, 16, 24, 32, 5]}, max_cases=2, sides=sides)
    assert (covered, total) == (2, 2) and sorted(c["A"] for c in chosen) == [5, 8]


def test_candidates_straddle_each_tiling_constant() -> None:
    vals = candidate_values(1, 4096, [17], (1, 37, 4096, 65536), [8, 256])
    assert vals[:4] == [17, 1, 37, 4096]  # test values, then the base values in range
    assert {7, 8, 9, 255, 256, 257} <= set(vals) and 65536 not in vals


def test_source_loop_steps_and_tile_constants_are_tiling_constants(tmp_path: Path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("constexpr int ROWS_PER_BLOCK = 24;\n#define TILE_K 48\nconstexpr int SLOT = 5;\n"
                   "for (int i = threadIdx.x; i < n; i += 96) {}\n")
    assert source_tiles(src) == {24, 48, 96}  # SLOT is no tile


def test_the_tail_fixture_sweep_reaches_both_sides_and_prints_its_cases(tail: Path) -> None:
    cfg, cs = load_project(tail)
    k = cs.kernel_map["tail_rows_partial"]
    assert tiling_constants(cs, [k], cfg.root) == [8, 256]  # rows per block (the divisor), block size
    plan = plan_kernel(cs, k, Wiring(cs), root=cfg.root)
    assert plan.dims == ["B", "T"] and plan.tails == (2, 2)
    assert len(plan.cases) == 12 and plan.cases[0].label == "B=1,T=1"
    rows = [c.as_dict()["B"] * c.as_dict()["T"] for c in plan.cases]
    assert any(r % 8 for r in rows) and any(r % 8 == 0 for r in rows)
    assert plan_kernel(cs, k, Wiring(cs), root=cfg.root).cases == plan.cases  # deterministic
    chain = plan_schedule(cs, cs.schedule_map["tail_step"], Wiring(cs), root=cfg.root)
    assert len(chain.cases) == 6 + 1 and chain.tails == (2, 2)  # the pairwise covering, then one large case
    assert chain.cases[-1] == chain.large and chain.large.label == "B=1,T=1024"  # B is at its range end already


def test_each_shipped_schedule_gets_exactly_one_large_case_within_its_budgets(repo: Path) -> None:
    from audit.cases import make_env
    from audit.search.sizes import MAX_CHAIN_ELEMENTS, MAX_LARGE_HOST_ELEMENTS, chain_buffers, chain_elements

    cfg, cs = load_project(repo)
    w = Wiring(cs)
    for s in cs.schedules:
        plan = plan_schedule(cs, s, w, root=cfg.root)
        big = [c for c in plan.cases if c.as_dict()["B"] > 4096]
        assert big == [plan.large] == [plan.cases[-1]], (s.name, [c.label for c in plan.cases])
        assert len(plan.cases) == 6 + 1 and plan.tails[0] == plan.tails[1]
        bufs = chain_buffers(cs, s)
        device, host = chain_elements(bufs, make_env(cs, plan.large))
        assert device <= MAX_CHAIN_ELEMENTS and host <= MAX_LARGE_HOST_ELEMENTS
        # the largest such value: one more row is over a budget
        device, host = chain_elements(bufs, make_env(cs, DimCase.of({"B": plan.large.as_dict()["B"] + 1})))
        assert device > MAX_CHAIN_ELEMENTS or host > MAX_LARGE_HOST_ELEMENTS
        assert plan.to_dict()["large"] == plan.large.as_dict()
        assert plan_schedule(cs, s, w, root=cfg.root).cases == plan.cases  # deterministic
    # the fused backward runs its equivalent twin (the per-sample-partials backward) at its cases: its
    # budget counts the twin's buffers, so both run their large case at the same B
    fused = plan_schedule(cs, cs.schedule_map["aux_heads_backward_fused"], w, root=cfg.root)
    assert {b.name for b in chain_buffers(cs, cs.schedule_map["aux_heads_backward"])} <= {b.name for b in chain_buffers(cs, cs.schedule_map["aux_heads_backward_fused"])}
    assert fused.large == plan_schedule(cs, cs.schedule_map["aux_heads_backward"], w, root=cfg.root).large


def test_no_large_case_where_the_budget_leaves_no_room(repo: Path) -> None:
    cfg, cs = load_project(repo)
    plan = plan_schedule(cs, cs.schedule_map["aux_heads_backward"], Wiring(cs), root=cfg.root, max_device=1 << 20)
    assert plan.large is None and all(c.as_dict()["B"] <= 4096 for c in plan.cases) and len(plan.cases) == 6
    assert any(n.startswith("no large case:") for n in plan.notes)


def test_the_shipped_sweep_keeps_the_base_sizes_and_adds_tails(repo: Path) -> None:
    cfg, cs = load_project(repo)
    w = Wiring(cs)
    for k in cs.kernels:
        plan = plan_kernel(cs, k, w, root=cfg.root)
        labels = [c.label for c in plan.cases]
        if k.name == "aux_weight_grad_finish":  # no parameter has B: one case, its bindings give the shapes
            assert labels == ["B=1"], labels
            continue
        assert len(labels) == 12, (k.name, labels)
        assert {"B=1", "B=37", "B=300", "B=4096", "B=4103", "B=65536"} <= set(labels), k.name
        assert plan.tails[0] == plan.tails[1], k.name  # every tail side of every launch covered


# -- tail coverage --------------------------------------------------------------------------------------


def test_coverage_says_which_side_ran_and_what_case_would_reach_the_other(tail: Path) -> None:
    _, cs = load_project(tail)
    k = cs.kernel_map["tail_rows_partial"]
    w = Wiring(cs)
    sites = kernel_sites(cs, k, w)
    assert [s.text for s in sites] == ["ceil_div(B * T, 8)"]
    envs = [make_env(cs, DimCase.of({"B": b, "T": 8})) for b in (1, 3)]
    [v] = tail_verdicts(cs, k, w, sites, envs)
    assert (v.exact, v.tail, v.covered) == (2, 0, False)
    assert v.message == "B * T is a multiple of 8 in all 2 cases that ran; add a case where it is not, such as B=1,T=9."
    envs.append(make_env(cs, DimCase.of({"B": 3, "T": 3})))
    [v] = tail_verdicts(cs, k, w, sites, envs)
    assert (v.exact, v.tail, v.covered) == (2, 1, True)


def test_coverage_names_the_fixed_dim_that_hides_a_tail(tail: Path) -> None:
    fix_t(tail)
    _, cs = load_project(tail)
    k = cs.kernel_map["tail_rows_partial"]
    w = Wiring(cs)
    [v] = tail_verdicts(cs, k, w, kernel_sites(cs, k, w), [make_env(cs, DimCase.of({"B": b})) for b in (1, 37, 300)])
    assert v.culprits == ("T",)
    assert v.message == "B * T is a multiple of 8 in every case because T = 64 is fixed; make T a runtime dim or give it test values."


def test_a_side_no_dims_can_reach_is_no_tail(tail: Path) -> None:
    rel = "contracts/tail.toml"
    text = (tail / rel).read_text().replace('grid = ["ceil_div(B * T, 8)"]', 'grid = ["ceil_div(B * T * 8, 8)"]')
    cs = load_contracts(tail / "contracts", tail, texts={rel: text})
    k = cs.kernel_map["tail_rows_partial"]
    w = Wiring(cs)
    assert tail_verdicts(cs, k, w, kernel_sites(cs, k, w), [make_env(cs, DimCase.of({"B": 3, "T": 5}))]) == []


def test_sites_skip_divisions_that_do_not_depend_on_runtime_dims(repo: Path) -> None:
    _, cs = load_project(repo)
    w = Wiring(cs)
    texts = {s.text for k in cs.kernels for s in kernel_sites(cs, k, w)}
    assert "ceil_div(B, 64)" in texts and "ceil_div(SH2, 64)" not in texts  # SH2 is fixed: one side, always


# -- the fixture through verify and check -------------------------------------------------------------


def test_the_default_sweep_catches_the_tail_bug(tail: Path) -> None:
    out = verify(tail, emulated={"tail_rows_partial": buggy_tail_rows}, kernels=["tail_rows_partial"])
    rules = {f.rule for f in out.result.findings}
    assert "VERIFY_UNWRITTEN_OUTPUT" in rules and "VERIFY_TAIL_UNCOVERED" not in rules
    assert out.result.exit_code == 1
    [r] = out.run.results
    assert len(r.cases) == 12 and r.cases[0] == {"B": 1, "T": 1}
    assert [t["covered"] for t in r.tails] == [True]


def test_a_fixed_dim_hides_the_bug_and_verify_says_so(tail: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fix_t(tail)
    out = verify(tail, emulated={"tail_rows_partial": buggy_tail_rows}, kernels=["tail_rows_partial"])
    assert [(f.rule, f.severity.value, f.message) for f in out.result.findings] == [(
        "VERIFY_TAIL_UNCOVERED", "warning",
        'Kernel "tail_rows_partial" grid "ceil_div(B * T, 8)": B * T is a multiple of 8 in every case because '
        "T = 64 is fixed; make T a runtime dim or give it test values.",
    )]
    assert out.result.exit_code == 0
    strict = verify(tail, emulated={"tail_rows_partial": buggy_tail_rows}, kernels=["tail_rows_partial"], strict=True)
    assert [(f.rule, f.severity.value) for f in strict.result.findings] == [("VERIFY_TAIL_UNCOVERED", "error")]
    assert strict.result.exit_code == 1
    # the static prediction, from the contracts alone
    rc = main(["check", "--root", str(tail), "--select", "TAIL_UNREACHABLE"])
    out_text = capsys.readouterr().out
    assert rc == 0
    assert ('contracts/tail.toml:27: TAIL_UNREACHABLE (warning) Kernel "tail_rows_partial" grid "ceil_div(B * T, 8)": '
            "B * T is a multiple of 8 in every case because T = 64 is fixed; make T a runtime dim or give it test values.") in out_text


def test_the_config_key_makes_verify_strict(tail: Path) -> None:
    fix_t(tail)
    (tail / "wireup.toml").write_text((tail / "wireup.toml").read_text() + "verify_strict = true\n")
    out = verify(tail, emulated={"tail_rows_partial": buggy_tail_rows}, kernels=["tail_rows_partial"], sizes=[37])
    assert [(f.rule, f.severity.value) for f in out.result.findings] == [("VERIFY_TAIL_UNCOVERED", "error")]


def test_verify_prints_cases_and_tails_and_records_them(tail: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = tail / "evidence"
    rc = main(["verify", "--root", str(tail), "--emulated", "--sizes", "B=1,T=8;B=3,T=3", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    [subject] = [s for s in doc["verify"]["subjects"] if s["kind"] == "kernel"]
    assert subject["cases"] == [{"B": 1, "T": 8}, {"B": 3, "T": 3}]
    assert subject["tails"][0]["expr"] == "ceil_div(B * T, 8)" and subject["tails"][0]["covered"]
    assert subject["matrix"] == {"dims": ["B", "T"], "values": [[1, 3], [8, 3]], "reference": ["full", "full"]}
    rc = main(["verify", "--root", str(tail), "--emulated", "--kernel", "tail_rows_partial", "--sizes", "B=2,T=4"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "cases: tail_rows_partial: 1 (B=2,T=4)\n  B          2\n  T          4\n  reference  full\n" in text
    assert "tails: tail_rows_partial: tail_rows_partial grid ceil_div(B * T, 8): 1 exact, 0 with a tail, NOT COVERED" in text
    out = verify(tail, emulated={}, kernels=["tail_rows_partial"], sizes=["B=2,T=4"], evidence_dir=ev)
    record = json.loads((ev / "kernels" / "tail_rows_partial.emulated.json").read_text())
    assert record["cases"] == [{"B": 2, "T": 4}]
    assert record["tails"][0]["covered"] is False
    assert record["references"] == ["full"]
    assert out.result.findings[0].rule == "VERIFY_TAIL_UNCOVERED"


def test_old_evidence_without_cases_stays_readable() -> None:
    from audit.evidence import EvidenceRecord

    rec = EvidenceRecord.from_dict({"subject": "k", "kind": "kernel", "backend": "pycuda", "verdict": "pass",
                                    "source_hash": "s", "contract_hash": "c", "sizes": ["B=37"], "checks": []})  # fmt: skip
    assert rec.cases == [] and rec.tails == [] and rec.sizes == ["B=37"] and rec.references == []
    with pytest.raises(TypeError):  # a record is a file a pull request can edit: a wrong type is refused
        EvidenceRecord.from_dict({"subject": "k", "kind": "kernel", "backend": "pycuda", "verdict": "pass",
                                  "source_hash": "s", "contract_hash": "c", "references": [1]})  # fmt: skip


def test_a_subject_never_compared_is_not_verified(tail: Path) -> None:
    rel = tail / "contracts" / "tail.toml"
    rel.write_text(rel.read_text().replace('reference = "tail_refs:tail_rows_partial"\n', ""))
    out = verify(tail, emulated={"tail_rows_partial": buggy_tail_rows}, kernels=["tail_rows_partial"], sizes=["B=8,T=1"])
    msgs = [(f.rule, f.severity.value) for f in out.result.findings]
    assert ("VERIFY_NOT_VERIFIED", "warning") in msgs
    from audit.runtime.report import summary_table

    assert "not verified: kernel tail_rows_partial on emulated: no case compared it with its reference" in summary_table(out)
    strict = verify(tail, emulated={"tail_rows_partial": buggy_tail_rows}, kernels=["tail_rows_partial"], sizes=["B=8,T=1"], strict=True)
    assert ("VERIFY_NOT_VERIFIED", "error") in [(f.rule, f.severity.value) for f in strict.result.findings]
    assert strict.result.exit_code == 1


def test_the_report_shows_the_cases_and_tail_coverage_of_a_record(tail: Path, capsys: pytest.CaptureFixture[str]) -> None:
    verify(tail, emulated={}, kernels=["tail_rows_partial"], sizes=["B=2,T=4;B=3,T=3"], evidence_dir=tail / "evidence")
    # an emulated run names no compiled code; give its record the code identity a GPU run records, so that
    # it counts (without nvcc here the code itself is not compared)
    import json
    import shutil

    from audit.api import load_project
    from audit.compile import CODE_HASH_VERSION, build_kernels, effective_flags

    cfg, cs = load_project(tail)
    hashes = build_kernels(cfg, cs).code_hashes if shutil.which("nvcc") else {"kernels/tail_rows.cu": "c0de"}
    for f in (tail / "evidence").rglob("*.json"):
        doc = json.loads(f.read_text())
        doc.update(code_hashes=hashes, code_hash_version=CODE_HASH_VERSION, build_flags=effective_flags(cfg), arch=cfg.arch)
        f.write_text(json.dumps(doc))
    assert main(["report", "--root", str(tail), "--output", str(tail / "r.md")]) == 0
    capsys.readouterr()
    text = (tail / "r.md").read_text()
    assert "(emulated backend; sizes B=2,T=4, B=3,T=3)" in text
    assert "**Tail coverage:** tail_rows_partial grid ceil_div(B \\* T, 8): 1 case(s) without a remainder, 1 with one" in text
    # the case matrix: dims x cases, and how each case was compared with the reference
    assert "| check | B=2,T=4 | B=3,T=3 |" in text  # a case of two dims is one column of the check matrix
    assert "| dim | 1 | 2 |\n| --- | --- | --- |\n| B | 2 | 3 |\n| T | 4 | 3 |\n| reference | full | full |\n" in text
    assert main(["report", "--root", str(tail), "--format", "html", "--output", str(tail / "r.html")]) == 0
    html = (tail / "r.html").read_text()
    assert "<tr><td>T</td><td>4</td><td>3</td></tr>\n<tr><td>reference</td><td>full</td><td>full</td></tr>" in html
    # a record from before cases were dim assignments (no "cases" key) says so instead
    for f in (tail / "evidence").rglob("*.json"):
        doc = json.loads(f.read_text())
        for key in ("cases", "tails", "references"):
            doc.pop(key)
        f.write_text(json.dumps(doc))
    assert main(["report", "--root", str(tail), "--output", str(tail / "r.md")]) == 0
    old = (tail / "r.md").read_text()
    assert "**Cases and tail coverage:** not recorded (the record predates cases as dim assignments)." in old
    assert "| dim |" not in old and "(emulated backend; sizes B=2,T=4, B=3,T=3)" in old


def test_a_given_case_over_the_memory_budget_exits_2(tail: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["verify", "--root", str(tail), "--emulated", "--kernel", "tail_rows_partial", "--sizes", "B=4096,T=1024", "--no-evidence"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip().endswith('--sizes case "B=4096,T=1024" gives kernel "tail_rows_partial" 1.34e+08 input elements, over the budget of 6.71e+07; choose smaller values.')


def test_verify_prints_the_chosen_cases_before_it_runs(tail: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["verify", "--root", str(tail), "--emulated", "--kernel", "tail_rows_partial", "--max-cases", "3", "--no-evidence"])
    err = capsys.readouterr().err
    assert rc == 0  # the emulated kernel is the reference itself: no bug, and three cases reach both sides
    first = err.splitlines()[0]
    assert first.startswith("cases    kernel   tail_rows_partial: 3 (B=1,T=1 ") and first.endswith("; tail sides 2 of 2")
