"""A sanitizer run judged only by its tool's reports launches each case's inputs once (verify's
``repeats=False``, what ``wireup mutate``'s survivor passes run): runs B and C, the same inputs and pointers
again with other initial contents of the outputs, are left out; the NULL-optional run D and the misaligned run
E take other paths and stay."""

from __future__ import annotations

from collections import Counter

import pytest

from audit.runtime import _kernel, verify

KERNEL = "aux_next_bar_backward"  # an accumulate output (run C) and optional outputs (run D)
NOTE = ("each case's inputs launched once under racecheck: runs B and C (the same inputs and pointers again, other initial contents "
        "of the outputs) were left out, so determinism, unwritten outputs and accumulation were not judged in this run")  # fmt: skip


@pytest.fixture(scope="module")
def repo_root(request):
    return request.config.rootpath


def _runs(monkeypatch, repo_root, **kw):
    runs: list[str] = []
    launch = _kernel.KernelVerifier.launch

    def spy(self, backend, case, ptrs, run):
        runs.append(run.split(",")[0])
        return launch(self, backend, case, ptrs, run)

    monkeypatch.setattr(_kernel.KernelVerifier, "launch", spy)
    out = verify(repo_root, kernels=[KERNEL], emulated={}, evidence=False, sanitizer="racecheck", sizes=(37,), **kw)
    return Counter(runs), out.run.results[0]


def test_repeats_false_leaves_out_runs_b_and_c_and_keeps_every_other_launch(monkeypatch, repo_root):
    full, r_full = _runs(monkeypatch, repo_root)
    once, r_once = _runs(monkeypatch, repo_root, repeats=False)
    assert {"A", "B", "C", "D", "E", "gradcheck"} <= set(full), full
    assert once == Counter({k: v for k, v in full.items() if k not in ("B", "C")}), (full, once)
    assert r_full.verdict == r_once.verdict == "pass"
    checks = lambda r: {c.check for c in r.checks}  # noqa: E731
    assert {"determinism", "written", "accumulate"} <= checks(r_full)
    assert not {"determinism", "written", "accumulate"} & checks(r_once)
    assert NOTE in r_once.notes and NOTE not in r_full.notes, r_once.notes


def test_repeats_false_is_for_sanitizer_runs_only(repo_root):
    with pytest.raises(ValueError, match="only a sanitizer run"):
        verify(repo_root, kernels=[KERNEL], emulated={}, evidence=False, sizes=(37,), repeats=False)


def test_the_default_leaves_a_jobs_dict_and_so_its_journal_identity_as_before():
    """A job's dict is part of the verification journal's unit identity: the key added for sanitizer runs
    must not move the identity of every job that ran before it (the next-bar pair's 402 journaled
    verifications would run again)."""
    from audit.runtime._journal import unit_identity
    from audit.runtime._session import JobSpec

    job = JobSpec(root="/r", backends=["pycuda"], subjects=[["kernel", "k"]])
    assert "repeats" not in job.to_dict() and JobSpec.from_dict(job.to_dict()).repeats is True
    once = JobSpec(root="/r", backends=["pycuda"], subjects=[["kernel", "k"]], repeats=False)
    assert once.to_dict()["repeats"] is False and JobSpec.from_dict(once.to_dict()).repeats is False
    unit = {"id": "u", "subjects": [["kernel", "k"]]}
    assert unit_identity(once.to_dict(), unit, {}) != unit_identity(job.to_dict(), unit, {})


def test_mutates_progress_line_gives_a_sanitizer_runs_seconds():
    import io

    from audit.commands.mutate import MutateProgress

    out = io.StringIO()
    p = MutateProgress(out)
    p({"event": "sanitizer", "tool": "racecheck", "variant": "k/aor:1:2:0", "verdict": "survived", "seconds": 187.4})
    p({"event": "sanitizer", "tool": "racecheck", "variant": "k/aor:1:3:0", "verdict": "survived (from the journal)"})
    first, second = out.getvalue().splitlines()
    assert first.endswith("racecheck k/aor:1:2:0  survived under compute-sanitizer racecheck (187 s)"), first
    assert second.endswith("racecheck k/aor:1:3:0  survived (from the journal) under compute-sanitizer racecheck"), second
