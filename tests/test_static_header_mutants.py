"""The static source checks a mutant goes through read the headers its kernel includes, found beside the
kernel's copy first: a header mutant (compiled from a copy of the kernel source next to the mutated
header) whose loop overruns a local array of the header is caught by LOCAL_ARRAY_BOUNDS, as the same bug
in a kernel source is. The H200 run of 4 December had four such survivors in aux_head_forward.cuh. Its two
kernels are now the benchmarks' SIMT baselines: the subject is the chain before the CUTLASS kernels
(``tests/simt_chain.py``, fixture ``simt_repo``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.api import load_project
from audit.cuda.static import kernel_code_findings
from audit.graph import Wiring

LINE = "        for (int c = 0; c < kTN; ++c) bias[c] = j0 + c < H ? __ldg(b1 + j0 + c) : 0.0f;"


@pytest.fixture(scope="module")
def project(simt_repo: Path):
    cfg, cs = load_project(simt_repo)
    return cs, Wiring(cs), cs.kernel_map["aux_next_bar_forward"], simt_repo


def _copy(root: Path, tmp_path: Path, mutate: bool) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(root / "kernels", tree)
    header = tree / "aux_head_forward.cuh"
    text = header.read_text()
    assert LINE in text  # the shipped header still has the loop this test mutates
    if mutate:
        header.write_text(text.replace(LINE, LINE.replace("c < kTN", "c <= kTN")))
    return tree / "aux_next_bar_forward_kernel.cu"


def test_an_overrun_in_an_included_header_is_caught(project, tmp_path):
    cs, wiring, k, root = project
    hits = kernel_code_findings(cs, wiring, k, _copy(root, tmp_path, True), [root / "kernels"], None)
    assert hits == [("LOCAL_ARRAY_BOUNDS", 'kernels/aux_head_forward.cuh:61: "bias[c]" indexes the local array "bias" of 4 elements '
                     "(declared at line 59) with c = 0 .. 4 (the loop at line 61): index 4 is out of bounds, undefined behaviour the compiler may hide.")]  # fmt: skip


def test_the_unmutated_copy_is_clean(project, tmp_path):
    cs, wiring, k, root = project
    assert kernel_code_findings(cs, wiring, k, _copy(root, tmp_path, False), [root / "kernels"], None) == []


def _barrier_items(tmp_path):
    """A copy of the barrier fixture (its racy ``loss`` kernel among clean ones), built, and one static-check
    item per kernel: its source and PTX as a mutant's."""
    from audit.compile import build_kernels
    from audit.mutate._build import MutantBuild

    root = tmp_path / "p"
    shutil.copytree(Path(__file__).parent / "data" / "rules" / "SHARED_BARRIER_MISSING" / "bad", root)
    cfg, cs = load_project(root)
    built = build_kernels(cfg, cs, jobs=2)
    items = []
    for k in cs.kernels:
        sb, entry = built.kernel(k)
        if entry is not None:
            items.append((f"{k.name}/m", k.name, MutantBuild("compiled", root / k.source, ptx=sb.ptx)))
    return root, cfg, cs, items


@pytest.mark.nvcc
def test_static_catches_in_forked_workers_give_what_one_process_gives(tmp_path):
    """The static checks of many mutants run in ``jobs`` forked processes (the PTX analyses are pure
    Python); the findings, per key and in order, are those of one process: here the barrier fixture's
    racy ``loss`` kernel among its clean ones."""
    from audit.mutate._static import static_catches

    root, cfg, cs, items = _barrier_items(tmp_path)
    one = static_catches(cfg, cs, items, jobs=1, cache=False)
    assert [r for r, _ in one["loss/m"]] == ["SHARED_BARRIER_MISSING"]
    assert static_catches(cfg, cs, items, jobs=2, cache=False) == one


@pytest.mark.nvcc
def test_static_findings_are_kept_by_what_they_depend_on_and_reused(tmp_path, monkeypatch):
    """A resumed mutation run does not analyse its mutants again: the findings of each item are kept in
    <cache>/mutate-journal/static.jsonl under the sha256 of wireup's code, the contracts, the kernel, its source
    closure and its PTX, and read back equal; an edited PTX or contract is analysed afresh."""
    from audit.mutate import _static
    from audit.mutate._build import MutantBuild
    from audit.mutate._static import static_catches

    root, cfg, cs, items = _barrier_items(tmp_path)
    fresh = static_catches(cfg, cs, items, jobs=1, cache=False)
    assert [r for r, _ in fresh["loss/m"]] == ["SHARED_BARRIER_MISSING"]
    analysed = []
    real = _static._check_item
    monkeypatch.setattr(_static, "_check_item", lambda i: analysed.append(i) or real(i))
    assert static_catches(cfg, cs, items, jobs=1) == fresh and len(analysed) == len(items)
    store = root / ".wireup-cache" / "mutate-journal" / "static.jsonl"
    assert len(store.read_text().splitlines()) == len(items)
    analysed.clear()
    assert static_catches(cfg, cs, items, jobs=1) == fresh and analysed == []  # every item from the file
    # an edited PTX (another build of the same kernel) is a new key: only that item is analysed again
    loss = next(i for i, it in enumerate(items) if it[0] == "loss/m")
    ptx = tmp_path / "loss.ptx"
    ptx.write_text(items[loss][2].ptx.read_text() + "\n// edited\n")
    edited = [*items[:loss], ("loss/m", "loss", MutantBuild("compiled", root / cs.kernel("loss").source, ptx=ptx)), *items[loss + 1:]]
    assert static_catches(cfg, cs, edited, jobs=1) == fresh and analysed == [loss]
    # a contract edit changes every key
    analysed.clear()
    contract = sorted((root / "contracts").rglob("*.toml"))[0]
    contract.write_text(contract.read_text() + "\n# edited\n")
    assert static_catches(cfg, cs, items, jobs=1) == fresh and len(analysed) == len(items)
    # lines that do not parse, or hold anything but [rule, message] pairs, are ignored
    store.write_text('{"key": "x", "hits": [[1, 2]]}\nnot json\n')
    analysed.clear()
    assert static_catches(cfg, cs, items, jobs=1) == fresh and len(analysed) == len(items)
    # another interpreter (the GPU machine's Python) reads the same keys: findings made here serve it
    import sys

    analysed.clear()
    monkeypatch.setattr(sys, "version", "3.12.99 (another interpreter)")
    assert static_catches(cfg, cs, items, jobs=1) == fresh and analysed == []


@pytest.mark.nvcc
def test_a_static_phase_cut_short_keeps_what_it_finished(tmp_path, monkeypatch):
    """Each item's findings reach the store as they come: a run interrupted after two items (a device
    call's limit) leaves those two, and the next run analyses only the rest."""
    from audit.mutate import _static
    from audit.mutate._static import static_catches

    root, cfg, cs, items = _barrier_items(tmp_path)
    assert len(items) > 2
    real = _static._check_item
    analysed = []

    def interrupted(i):
        if len(analysed) == 2:
            raise KeyboardInterrupt
        analysed.append(i)
        return real(i)

    monkeypatch.setattr(_static, "_check_item", interrupted)
    with pytest.raises(KeyboardInterrupt):
        static_catches(cfg, cs, items, jobs=1)
    store = root / ".wireup-cache" / "mutate-journal" / "static.jsonl"
    assert len(store.read_text().splitlines()) == 2
    analysed.clear()
    monkeypatch.setattr(_static, "_check_item", lambda i: analysed.append(i) or real(i))
    events = []
    got = static_catches(cfg, cs, items, jobs=1, progress=events.append)
    assert analysed == list(range(2, len(items)))
    assert got == static_catches(cfg, cs, items, jobs=1, cache=False)
    # progress: the store read first (2 of them kept), then each batch, to the end
    assert events[0] == {"event": "static_checked", "done": 2, "total": len(items), "stored": 2}
    assert events[-1] == {"event": "static_checked", "done": len(items), "total": len(items), "stored": 2}


def test_the_static_phase_prints_its_counts():
    """`wireup mutate` printed nothing for the ~290 s an H100 spent checking 279 mutants statically: the
    printer now says where the phase starts (with what the store held), every 50 items, and at its end."""
    import io

    from audit.commands.mutate import MutateProgress

    out = io.StringIO()
    p = MutateProgress(out)
    for done in (20, 52, 84, 99, 116, 120):
        p({"event": "static_checked", "done": done, "total": 120, "stored": 20})
    lines = [line.split("s  ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines == ["static   20/120  checked, 20 from the store", "static   52/120  checked, 20 from the store",
                     "static   116/120  checked, 20 from the store", "static   120/120  checked, 20 from the store"]
    out = io.StringIO()
    p = MutateProgress(out)
    p({"event": "static_checked", "done": 0, "total": 3, "stored": 0})
    p({"event": "static_checked", "done": 3, "total": 3, "stored": 0})
    assert [line.split("s  ", 1)[1] for line in out.getvalue().splitlines()] == ["static   0/3  checked", "static   3/3  checked"]


@pytest.mark.nvcc
def test_static_analysis_reads_each_ptx_once(tmp_path, monkeypatch):
    """The store reads each item's PTX to key it; the analysis then takes those bytes, not the file again,
    and finds what an analysis reading the files finds."""
    import pathlib

    from audit.mutate._static import static_catches

    root, cfg, cs, items = _barrier_items(tmp_path)
    fresh = static_catches(cfg, cs, items, jobs=1, cache=False)
    reads = []
    real_text, real_bytes = pathlib.Path.read_text, pathlib.Path.read_bytes
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self, *a, **k: (self.suffix == ".ptx" and reads.append(self)) or real_text(self, *a, **k))
    monkeypatch.setattr(pathlib.Path, "read_bytes", lambda self: (self.suffix == ".ptx" and reads.append(self)) or real_bytes(self))
    assert static_catches(cfg, cs, items, jobs=1) == fresh
    ptxs = {it[2].ptx for it in items if it[2].ptx is not None}
    assert ptxs and sorted(map(str, reads)) == sorted(map(str, ptxs))
