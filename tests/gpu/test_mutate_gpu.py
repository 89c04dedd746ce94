"""Mutation testing on the GPU: every mutant of strided_gather and aux_trade_outcome_backward that is not
recorded as equivalent (audit/mutate/equivalent.toml) must be caught by ``wireup verify``'s checks.

A failure lists each surviving mutant with its diff: either a check is missing, or the mutant is
equivalent and its proof belongs in the equivalence file (see docs/mutation.md). The reports are
written to $OUT/mutation (or a temporary folder) for inspection.

    python3 -m pytest -q -rs tests/gpu/test_mutate_gpu.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from audit.errors import EnvironmentProblem
from audit.mutate import render_table, run_mutation, write_kernel_json
from audit.mutate._static import STATIC_RULES

REPO = Path(__file__).resolve().parents[2]
KERNELS = ("strided_gather", "aux_trade_outcome_backward")


@pytest.fixture(scope="module")
def mutation_run(tmp_path_factory):
    try:
        run = run_mutation(REPO, KERNELS, jobs=os.cpu_count(), workers=4)
    except EnvironmentProblem as exc:
        pytest.skip(str(exc))
    out = Path(os.environ["OUT"]) / "mutation" if os.environ.get("OUT") else tmp_path_factory.mktemp("mutation")
    for k in run.kernels:
        write_kernel_json(k, run, out)
    (out / "test_mutate_gpu.txt").write_text(render_table(run))
    return run


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_non_equivalent_mutant_is_caught(mutation_run, kernel):
    k = next(k for k in mutation_run.kernels if k.kernel == kernel)
    assert k.mutants > 0, f"no mutant of {kernel} compiled: {[o.detail for o in k.outcomes][:3]}"
    assert not k.errors, "wireup failed while verifying: " + "; ".join(f"{o.mutant.id}: {o.detail}" for o in k.errors)
    survivors = "\n".join(f"{o.mutant.id}  {o.mutant.summary}\n{o.mutant.diff}" for o in k.unclassified)
    assert not k.unclassified, f"{len(k.unclassified)} mutant(s) of {kernel} survive verification:\n{survivors}"
    assert not k.stale, "\n".join(k.stale)


@pytest.mark.gpu
def test_recorded_equivalents_do_survive(mutation_run):
    """A mutant recorded as equivalent but caught means the record's proof is wrong (or a check is flaky)."""
    from audit.mutate._equivalent import DEFAULT_FILE, load_records, match_records

    records = load_records(DEFAULT_FILE)
    wrong = []
    for k in mutation_run.kernels:
        matched, _ = match_records(k.kernel, [o.mutant for o in k.outcomes], records)
        # a static check judges the code for every launch, not only the admitted ones the proof is about
        # (a grid-stride step that became `b = stride` races only where the loop runs twice): not a contradiction
        wrong += [f"{k.kernel} {o.mutant.id}: caught by {', '.join(o.checks)} ({o.detail})" for o in k.outcomes
                  if o.mutant.id in matched and o.status == "caught" and not set(o.checks) <= set(STATIC_RULES)]  # fmt: skip
    assert not wrong, "recorded as equivalent, yet caught:\n" + "\n".join(wrong)
