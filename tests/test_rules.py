"""Fixture pairs per rule: ``tests/data/rules/<RULE_ID>/{good,bad}/`` (see the README there).

Each rule of the static categories runs through the CLI (``wireup check --root ... --select RULE``) on
its good set (exit 0, no finding of that rule) and its bad set (exit 1 for error rules, 0 for warning
rules; the findings printed are exactly the lines of ``bad/expected.txt``: message text is part of the
contract).
"""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest

from audit.graph import Wiring
from audit.api import check
from audit.cli import main
from audit.config import Config
from audit.load import load_contracts
from audit.rules import iter_rules

RULES = Path(__file__).resolve().parent / "data" / "rules"
CATEGORIES = ("schema", "wiring", "isv", "invariants")
#: categories whose rules read facts beyond the contracts (the build, generated files, host sources): their
#: fixtures are whole projects (kernels with real signatures, a wireup.toml) and run on a copy, so that the
#: build cache never lands in tests/data
FACT_CATEGORIES = ("build", "layout", "launchers")
STATIC = {r.id: r for r in iter_rules() if r.category in CATEGORIES + FACT_CATEGORIES and r.replaced_by is None}
EVIDENCE = {r.id for r in iter_rules() if r.category == "evidence"}  # their pairs: tests/test_evidence_rules.py
FIXTURES = sorted(p.name for p in RULES.iterdir() if p.is_dir() and p.name not in EVIDENCE)
NEEDS_NVCC = pytest.mark.skipif(shutil.which("nvcc") is None, reason="the build rules' fixtures need nvcc on PATH")


def fixture_root(rule_id: str, half: str, tmp_path: Path) -> Path:
    """The fixture folder itself, or a copy of it for the rules that build or write caches."""
    src = RULES / rule_id / half
    if STATIC[rule_id].category not in FACT_CATEGORIES:
        return src
    if STATIC[rule_id].category == "build" and shutil.which("nvcc") is None:
        pytest.skip("the build rules' fixtures need nvcc on PATH")
    dst = tmp_path / half
    shutil.copytree(src, dst)
    return dst


def run_check(capsys: pytest.CaptureFixture[str], root: Path, *select: str) -> tuple[int, list[str]]:
    """Exit code and the finding lines (summary dropped) of ``wireup check`` on ``root``."""
    rc = main(["check", "--root", str(root), "--select", ",".join(select)])
    out, err = capsys.readouterr()
    # the one progress line a cold build prints (the fixtures build in a fresh folder) is not output
    assert [line for line in err.splitlines() if not line.startswith("wireup: compiling ")] == []
    lines = out.splitlines()
    assert lines and lines[-1].startswith("wireup check: "), out
    return rc, lines[:-1]


def expected_lines(rule_id: str) -> list[str]:
    text = (RULES / rule_id / "bad" / "expected.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_every_static_rule_has_a_fixture_pair() -> None:
    assert set(FIXTURES) == set(STATIC), "add or remove tests/data/rules/<RULE_ID> to match the registry"
    for rule_id in FIXTURES:
        for half in ("good", "bad"):
            assert list((RULES / rule_id / half / "contracts").glob("*.toml")), f"{rule_id}/{half} has no contracts"
        assert expected_lines(rule_id), f"{rule_id}/bad/expected.txt lists no finding"


@pytest.mark.parametrize("rule_id", FIXTURES)
def test_good_fixture_is_clean(rule_id: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = fixture_root(rule_id, "good", tmp_path)
    rc, lines = run_check(capsys, root, rule_id)
    assert rc == 0
    assert lines == []
    # the good set is clean under every static rule of the contract categories (and of its own), not just
    # the one it pairs with
    own = (STATIC[rule_id].category,) if STATIC[rule_id].category in FACT_CATEGORIES else ()
    rc, lines = run_check(capsys, root, *CATEGORIES, *own)
    # a note that another rule did not analyse a kernel to its end (the block run gives up on the cp.async
    # of CP_ASYNC_WAIT's pair) is no finding: it says what was not checked
    assert (rc, [line for line in lines if " (note) " not in line]) == (0, [])


@pytest.mark.parametrize("rule_id", FIXTURES)
def test_bad_fixture_gives_the_expected_findings(rule_id: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, lines = run_check(capsys, fixture_root(rule_id, "bad", tmp_path), rule_id)
    assert lines == expected_lines(rule_id)
    assert rc == (1 if STATIC[rule_id].severity.value == "error" else 0)
    tag = rule_id if rc else f"{rule_id} (warning)"
    assert all(f": {tag} " in line for line in lines)


@pytest.mark.parametrize("rule_id", FIXTURES)
def test_bad_fixture_is_one_small_change(rule_id: str) -> None:
    good, bad = RULES / rule_id / "good", RULES / rule_id / "bad"
    def listing(root: Path) -> set[str]:  # a build cache left by a manual "wireup check" is not fixture data
        return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".wireup-cache" not in p.parts}

    files = listing(good)
    assert listing(bad) == files | {"expected.txt"}
    changed = 0
    for rel in sorted(files):
        a = (good / rel).read_text(encoding="utf-8").splitlines()
        b = (bad / rel).read_text(encoding="utf-8").splitlines()
        changed += sum(1 for d in difflib.ndiff(a, b) if d[:1] in "+-")
    assert 1 <= changed <= 14, f"{rule_id}: bad differs from good in {changed} lines"


def test_shipped_contracts_pass_every_static_rule(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines = run_check(capsys, repo, *CATEGORIES)
    assert (rc, lines) == (0, [])


# --- message variants the fixture pairs do not reach: one edit of a good set, checked in memory -----------


def check_variant(rule_id: str, rel: str, old: str, new: str) -> list[str]:
    """Text lines of ``rule_id``'s findings on its good set with ``old`` replaced by ``new`` in ``rel``."""
    root = RULES / rule_id / "good"
    texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in (root / "contracts").glob("*.toml")}
    assert texts[rel].count(old) == 1
    texts[rel] = texts[rel].replace(old, new)
    cs = load_contracts(root / "contracts", root, texts=texts)
    result = check(root, select=[rule_id], config=Config(root=root.resolve()), contracts=cs)
    return [f"{f.location}: {f.message}" for f in result.findings]


def test_slot_gap_of_one_index_is_singular() -> None:
    lines = check_variant("SLOT_GAP", "contracts/isv.toml", "total_dim = 6", "total_dim = 7")
    assert lines == ["contracts/isv.toml:5: ISV index 6 belongs to no slot; declare it as padding."]


def test_slot_rules_handle_huge_spans_without_enumerating_them() -> None:
    # a count of 2**40 used to be walked index by index (minutes, gigabytes)
    lines = check_variant("SLOT_INDEX", "contracts/isv.toml", "count = 2\n", f"count = {2**40}\n")
    assert lines == [f'contracts/isv.toml:33: ISV slot "FINGERPRINT" has indices 4..{2**40 + 3}, outside the total dimension 6.']
    lines = check_variant("SLOT_INDEX", "contracts/isv.toml", "index = 0\n", "index = 0\ncount = 1099511627776\n")
    assert lines[0] == 'contracts/isv.toml:9: ISV slot "LOSS_EMA" has indices 0..1099511627775, outside the total dimension 6.'
    assert lines[1:] == [
        f'contracts/isv.toml:{line}: ISV slot "{name}" has index {index}, already taken by slot "LOSS_EMA".'
        for line, name, index in ((16, "LABEL_SCALE", 1), (22, "STEP_COUNT", 2), (28, "RESERVED", 3), (34, "FINGERPRINT", 4))
    ]
    lines = check_variant("SLOT_GAP", "contracts/isv.toml", "total_dim = 6", f"total_dim = {2**40}")
    assert lines == [f"contracts/isv.toml:5: ISV indices 6..{2**40 - 1} belong to no slot; declare them as padding."]


def test_launch_arguments_use_declared_dims_and_slots() -> None:
    old = 'launch = "reduce"\n'
    new = 'launch = "reduce"\nargs = { N = "H * Q", B = "slot(NOPE) + B" }\n'
    assert check_variant("UNKNOWN_DIM", "contracts/schedules.toml", old, new) == [
        'contracts/schedules.toml:39: Schedule "backward" step 4 argument "N" uses "Q", which is not a declared dim.'
    ]
    assert check_variant("UNKNOWN_SLOT", "contracts/schedules.toml", old, new) == [
        'contracts/schedules.toml:39: Schedule "backward" step 4 argument "B" passes slot "NOPE", which is not in the layout.'
    ]


def test_launch_geometry_points_at_the_grid_when_the_grid_is_wrong() -> None:
    lines = check_variant("LAUNCH_GEOMETRY", "contracts/kernels.toml", 'grid = ["B", 1, 1]', 'grid = ["B", 70000, 1]')
    assert lines == [
        f'contracts/kernels.toml:60: Kernel "backward" in schedule "{s}" at B = 1: grid [1, 70000, 1] exceeds the limits (2^31-1, 65535, 65535).'
        for s in ("backward", "backward_fused")
    ]


def test_derived_dims_of_runtime_dims_stay_in_range_at_every_probe() -> None:
    old = 'H = { value = 32, doc = "hidden width" }\n'
    lines = check_variant("DIM_RANGE", "contracts/buffers.toml", old, old + 'R = "B - 10"\nOK = "B + H"\n')
    assert lines == ['contracts/buffers.toml:6: Derived dim "R" = "B - 10" evaluates to -9 at B = 1; a dim must be between 1 and 2147483647.']


def test_scalar_range_checks_launch_arguments_where_they_are_given() -> None:
    old = 'launch = "reduce"\n'
    lines = check_variant("SCALAR_RANGE", "contracts/schedules.toml", old, old + 'args = { N = "H * D * 2000000" }\n')
    assert lines == ['contracts/schedules.toml:39: Kernel "reduce" scalar "N" = "H * D * 2000000" is 4096000000 in schedule "backward", outside the range of i32.']
    lines = check_variant("SCALAR_RANGE", "contracts/schedules.toml", old, old + "args = { N = 2.5 }\n")
    assert lines == ['contracts/schedules.toml:39: Schedule "backward" step 4 passes the number 2.5 to scalar "N" of kernel "reduce", which is an integer (i32).']


def test_scalar_range_reaches_the_corner_where_every_runtime_dim_is_largest() -> None:
    """Probe points move several runtime dims together (B at its largest meets T in its middle), so a
    product of two of them never reaches its largest value there; SCALAR_RANGE also evaluates the corner
    where every runtime dim is at its max (INDEX_OVERFLOW's witness)."""
    root = RULES / "SCALAR_RANGE" / "good"
    texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in (root / "contracts").glob("*.toml")}
    dims = 'B = { min = 1, max = 4096, doc = "batch rows" }\n'
    texts["contracts/buffers.toml"] = texts["contracts/buffers.toml"].replace(dims, dims + 'T = { min = 1, max = 65536, doc = "sequence" }\n')
    old = 'launch = "reduce"\n'
    texts["contracts/schedules.toml"] = texts["contracts/schedules.toml"].replace(old, old + 'args = { N = "B * T * 16" }\n', 1)
    cs = load_contracts(root / "contracts", root, texts=texts)
    assert all(env["B"] * env["T"] * 16 < 2**31 for env in Wiring(cs).envs)  # no probe point reaches it
    result = check(root, select=["SCALAR_RANGE"], config=Config(root=root.resolve()), contracts=cs)
    assert [f"{f.location}: {f.message}" for f in result.findings] == [
        'contracts/schedules.toml:39: Kernel "reduce" scalar "N" = "B * T * 16" is 4294967296 in schedule "backward", outside the range of i32.']


def test_scalar_range_checks_a_kernel_no_schedule_launches_yet() -> None:
    old = '[[kernel]]\nname = "reduce"\n'
    unused = ('[[kernel]]\nname = "reduce_wide"\nsource = "kernels/chain.cu"\nentry = "reduce"\nstage = "reduce"\n'
              'grid = ["ceil_div(B, 256)", 1, 1]\nblock = [256, 1, 1]\nparams = [\n'
              '  { name = "partial", dtype = "f32", shape = ["B", 1000000], role = "in" },\n'
              '  { name = "grad", dtype = "f32", shape = [1000000], role = "accumulate" },\n'
              '  { name = "B", kind = "scalar", dtype = "i32", value = "B" },\n'
              '  { name = "N", kind = "scalar", dtype = "i32", value = "B * 1000000" },\n]\n\n')
    lines = check_variant("SCALAR_RANGE", "contracts/kernels.toml", old, unused + old)
    assert lines == ['contracts/kernels.toml:83: Kernel "reduce_wide" scalar "N" = "B * 1000000" is 4096000000 within the dims\' ranges, outside the range of i32.']


@NEEDS_NVCC
def test_shared_bytes_that_reach_zero_at_a_probe_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "p"
    shutil.copytree(RULES / "SHARED_BYTES_MISSING" / "good", root)
    contract = root / "contracts" / "kernels.toml"
    contract.write_text(contract.read_text().replace("shared_bytes = 1024", 'shared_bytes = "4 * (ceil_div(B, 4096) - 1)"'))
    rc, lines = run_check(capsys, root, "SHARED_BYTES_MISSING")
    assert rc == 1
    assert lines == [
        'contracts/kernels.toml:79: SHARED_BYTES_MISSING Kernel "reduce" uses dynamic shared memory (extern __shared__ "col") '
        'but its shared_bytes "4 * (ceil_div(B, 4096) - 1)" is 0 at B = 1.'
    ]
