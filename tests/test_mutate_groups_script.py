"""tests/gpu/mutate_groups.sh on the CPU machine: stand-ins for nvidia-smi and python3 on PATH record what the
script runs, so its group splitting, budget and packing are checked without a GPU (a broken device script costs
device time)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "gpu" / "mutate_groups.sh"

FAKE_PY = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
if [ "$1 $2 $3" = "-m audit mutate" ]; then
    shift 3
    while [ "${1#--}" != "$1" ]; do shift 2; done  # the options before the group: MARGS (each with a value)
    set -- -m audit mutate "$@"
    mkdir -p .wireup-cache/mutate-journal reports/mutation
    echo '{"unit": "x"}' >> ".wireup-cache/mutate-journal/$4.jsonl"
    echo "{}" > "reports/mutation/$4.json"
    echo "mutated $*"
    exit 1
fi
exit 0
"""


def _run(tmp_path: Path, groups: str, end: int, gpu: str = "NVIDIA H100 80GB HBM3", ship: bool = False, shipon: str | None = None,
         builds: dict[str, str] | None = None, journals: dict[str, dict[str, str]] | None = None) -> tuple[subprocess.CompletedProcess, Path, list[str]]:  # fmt: skip
    tmp_path.mkdir(exist_ok=True)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text(f"#!/usr/bin/env bash\necho '{gpu}'\n")
    (bin_ / "python3").write_text(FAKE_PY)
    # timeout, standing in: it notes its limit, then runs the command
    (bin_ / "timeout").write_text('#!/usr/bin/env bash\necho "timeout $1" >> "$CALLS"\nshift\nexec "$@"\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    work = tmp_path / "work"
    (work / "tests" / "gpu").mkdir(parents=True)
    (work / ".whl").mkdir()
    # issue 18's timing script, standing in: it says which steps it was asked for
    (work / "tests" / "gpu" / "issue18_ship.sh").write_text('mkdir -p "$OUT" && echo "steps $STEPS" > "$OUT/summary.txt"\n')
    (work / ".carry").mkdir()
    # a journal of an earlier call, as the script's own journal.tgz returns it
    (work / ".wireup-cache" / "mutate-journal").mkdir(parents=True)
    (work / ".wireup-cache" / "mutate-journal" / "old.jsonl").write_text('{"unit": "old"}\n')
    subprocess.run(["tar", "czf", ".carry/j_old.tgz", ".wireup-cache/mutate-journal"], cwd=work, check=True)
    subprocess.run(["rm", "-rf", ".wireup-cache"], cwd=work, check=True)
    for name, files in (journals or {}).items():  # more journals: name -> {path: text}
        src = tmp_path / f"journal-{name}"
        for path, text in files.items():
            (src / path).parent.mkdir(parents=True, exist_ok=True)
            (src / path).write_text(text)
        subprocess.run(["tar", "czf", str(work / ".carry" / f"j_{name}.tgz"), *files], cwd=src, check=True)
    if builds:  # an archive of `wireup mutate --build-only --archive`: names relative to the cache folder
        src = tmp_path / "cache-src"
        for name, text in builds.items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(text)
        subprocess.run(["tar", "cJf", str(work / ".carry" / "builds.txz"), *builds], cwd=src, check=True)
    out = tmp_path / "out"
    calls = tmp_path / "calls.txt"
    env = dict(os.environ, PATH=f"{bin_}:{os.environ['PATH']}", OUT=str(out), MGROUPS=groups, END=str(end), CALLS=str(calls))
    env.pop("SHIP", None)
    if ship:
        env["SHIP"] = "1"
    env.pop("SHIPON", None)
    if shipon is not None:
        env["SHIPON"] = shipon
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    return proc, out, calls.read_text().splitlines() if calls.exists() else []


def test_groups_run_in_turn_with_the_default_options_and_come_back_packed(tmp_path):
    proc, out, calls = _run(tmp_path, "a;b c", 545)
    assert proc.returncode == 0, proc.stderr
    runs = [c for c in calls if c.startswith("-m audit mutate")]
    assert runs == ["-m audit mutate --jobs 8 --workers 4 --timeout 5 a", "-m audit mutate --jobs 8 --workers 4 --timeout 5 b c"]
    env = (out / "env.txt").read_text()
    assert "gpu: NVIDIA H100 80GB HBM3" in env and "group 1 (a): mutate rc=1" in env and "group 2 (b c): mutate rc=1" in env
    assert "ship" not in env  # no H200, no SHIP
    with tarfile.open(out / "journal.tgz") as t:
        names = set(t.getnames())
    # the carried journal resumed, the groups' journals, their records and logs, all in one file
    assert {".wireup-cache/mutate-journal/old.jsonl", ".wireup-cache/mutate-journal/a.jsonl", ".wireup-cache/mutate-journal/b.jsonl",
            "reports/mutation/a.json", "mut1.log", "mut2.log"} <= names  # fmt: skip


def test_a_budget_too_short_for_a_group_starts_none_and_still_packs_the_journals(tmp_path):
    proc, out, calls = _run(tmp_path, "a;b", 10)  # under 20 s left: no group is started
    assert proc.returncode == 0, proc.stderr
    assert not [c for c in calls if c.startswith("-m audit mutate")]
    assert "group" not in (out / "env.txt").read_text()
    with tarfile.open(out / "journal.tgz") as t:
        assert ".wireup-cache/mutate-journal/old.jsonl" in t.getnames()


def test_the_timing_runs_first_on_an_h200_with_ship_and_nowhere_else(tmp_path):
    for n, (gpu, ship) in enumerate([("NVIDIA H200", True), ("NVIDIA H100 80GB HBM3", True), ("NVIDIA H200", False)]):
        proc, out, _ = _run(tmp_path / str(n), "a", 545, gpu=gpu, ship=ship)
        assert proc.returncode == 0, proc.stderr
        env = (out / "env.txt").read_text()
        if gpu == "NVIDIA H200" and ship:
            assert env.index("ship rc=0") < env.index("group 1 (a)")
            with tarfile.open(out / "ship.tgz") as t:
                assert t.extractfile("ship/summary.txt").read().decode() == "steps DR\n"
        else:
            assert "ship" not in env and not (out / "ship.tgz").exists()


def test_shipon_widens_the_timing_to_the_gpus_it_names(tmp_path):
    for n, (gpu, shipon, runs) in enumerate([("NVIDIA H100 80GB HBM3", "H100|H200", True), ("NVIDIA H200", "H100|H200", True),
                                             ("NVIDIA H100 80GB HBM3", "H200", False)]):  # fmt: skip
        proc, out, _ = _run(tmp_path / str(n), "a", 545, gpu=gpu, ship=True, shipon=shipon)
        assert proc.returncode == 0, proc.stderr
        assert ("ship rc=0" in (out / "env.txt").read_text()) is runs, (gpu, shipon)


def test_a_builds_archive_is_unpacked_into_the_build_cache(tmp_path):
    proc, _out, calls = _run(tmp_path, "a", 545, builds={"build/sm_90/k1/m.cubin": "cubin", "build/sm_90/k1/build.json": "{}"})
    assert proc.returncode == 0, proc.stderr
    cache = tmp_path / "work" / ".wireup-cache" / "build" / "sm_90" / "k1"
    assert (cache / "m.cubin").read_text() == "cubin" and (cache / "build.json").read_text() == "{}"
    assert [c for c in calls if c.startswith("-m audit mutate")] == ["-m audit mutate --jobs 8 --workers 4 --timeout 5 a"]


def test_a_group_starting_at_n_runs_at_most_n_seconds_and_leaves_the_rest_to_the_next(tmp_path):
    proc, out, calls = _run(tmp_path, "@100 a --sanitizers memcheck;b", 545)
    assert proc.returncode == 0, proc.stderr
    limits = [int(c.split()[1]) for c in calls if c.startswith("timeout ")]
    runs = [c for c in calls if c.startswith("-m audit mutate")]
    assert runs == ["-m audit mutate --jobs 8 --workers 4 --timeout 5 a --sanitizers memcheck", "-m audit mutate --jobs 8 --workers 4 --timeout 5 b"]
    assert limits[0] == 100 and 500 < limits[1] <= 545, limits
    assert "group 1 (a --sanitizers memcheck): mutate rc=1" in (out / "env.txt").read_text()


def test_carried_journals_are_merged_line_by_line(tmp_path):
    """Two calls that resumed from one journal each add their own lines (7 December: the header group's
    verifications of one call were lost when only the other call's journal was carried); carrying both gives
    every line once, in order. A record (not a journal) is the last journal's."""
    j = ".wireup-cache/mutate-journal/h.jsonl"
    proc, out, _ = _run(tmp_path, "a", 545, journals={
        "1": {j: '{"unit": "m1"}\n{"unit": "m2"}\n', "reports/mutation/h.json": "first"},
        "2": {j: '{"unit": "m1"}\n{"unit": "m3"}\n', "reports/mutation/h.json": "second"}})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    work = tmp_path / "work"
    assert (work / j).read_text().splitlines() == ['{"unit": "m1"}', '{"unit": "m2"}', '{"unit": "m3"}']
    assert (work / "reports" / "mutation" / "h.json").read_text() == "second"
    assert (work / ".wireup-cache" / "mutate-journal" / "old.jsonl").read_text() == '{"unit": "old"}\n'  # the third journal
    with tarfile.open(out / "journal.tgz") as t:
        assert t.extractfile(j).read().decode().splitlines() == ['{"unit": "m1"}', '{"unit": "m2"}', '{"unit": "m3"}']
