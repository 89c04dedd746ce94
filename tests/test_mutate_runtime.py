"""``audit.runtime.verify_many`` on the emulated backend: many variants in one process or in a few
supervised workers, first-failure stopping, hangs, crashes and lost contexts (the stand-in kernels of
tests/data/mutate/plugins.py), and the order and shape of the outcomes."""

from __future__ import annotations

from pathlib import Path

from audit.runtime import Variant, verify_many

REPO = Path(__file__).resolve().parents[1]
PLUGINS = str(REPO / "tests" / "data" / "mutate")


def _wrong(launch):
    out = launch.run_reference()
    launch.write_outputs({k: v * 1.5 for k, v in out.items()})


def test_in_process_variants_share_one_backend_kind_and_keep_their_order():
    variants = [
        Variant("ok", ("strided_gather",)),
        Variant("bad", ("strided_gather",), emulated={"strided_gather": _wrong}),
        Variant("two", ("strided_gather", "trade_outcome_label"), emulated={"trade_outcome_label": _wrong}),
    ]
    events = []
    outs = verify_many(REPO, variants, backends=["emulated"], sizes=[1, 37], progress=events.append)
    assert [o.id for o in outs] == ["ok", "bad", "two"]
    assert [o.failed_rules for o in outs] == [[], ["VERIFY_REFERENCE"], ["VERIFY_REFERENCE"]]
    assert [f.subject for f in outs[2].outcome.result.errors] == ["trade_outcome_label"]
    assert outs[0].outcome.run.environments["emulated"].device["name"] == "emulated (numpy)"
    done = [e for e in events if e["event"] == "variant_done"]
    assert [(e["variant"], e["failed"]) for e in done] == [("ok", []), ("bad", ["VERIFY_REFERENCE"]), ("two", ["VERIFY_REFERENCE"])]


def test_first_failure_stops_after_the_first_failing_case():
    # the wrong gradient also changes the accumulate buffer's contribution: VERIFY_INOUT_DELTA fails with it
    v = [Variant("bad", ("aux_trade_outcome_backward",), emulated={"aux_trade_outcome_backward": _wrong})]
    every = verify_many(REPO, v, backends=["emulated"], sizes=[1, 37], first_failure=False)[0]
    first = verify_many(REPO, v, backends=["emulated"], sizes=[1, 37], first_failure=True)[0]
    assert "VERIFY_GRADCHECK" in every.failed_rules and first.failed_rules == ["VERIFY_ACCUMULATE", "VERIFY_INOUT_DELTA", "VERIFY_REFERENCE"]
    checks = first.outcome.run.results[0].checks
    assert {c.case.split(",")[0] for c in checks} == {"B=1 (K=3"}  # nothing after the case that failed (K=3, H=128, SH2=256)
    assert len(checks) < len(every.outcome.run.results[0].checks) / 4


def test_first_failure_ends_a_variant_of_several_kernels_at_the_first_kernel_that_fails():
    """A header mutant is caught when any kernel including the header catches it: under first_failure the
    kernels after the first that fails are not verified (they could only repeat the verdict); without it,
    and for a variant whose first kernel passes, every kernel runs."""
    caught = Variant("caught", ("strided_gather", "trade_outcome_label"), emulated={"strided_gather": _wrong})
    later = Variant("later", ("strided_gather", "trade_outcome_label"), emulated={"trade_outcome_label": _wrong})
    first = verify_many(REPO, [caught, later], backends=["emulated"], sizes=[1, 37], first_failure=True)
    every = verify_many(REPO, [caught], backends=["emulated"], sizes=[1, 37], first_failure=False)[0]
    subjects = lambda o: sorted({r.subject for r in o.outcome.run.results})  # noqa: E731
    assert subjects(first[0]) == ["strided_gather"] and first[0].failed_rules == ["VERIFY_REFERENCE"]
    assert subjects(every) == ["strided_gather", "trade_outcome_label"]
    assert subjects(first[1]) == ["strided_gather", "trade_outcome_label"] and first[1].failed_rules == ["VERIFY_REFERENCE"]


def test_workers_survive_hangs_crashes_and_lost_contexts():
    names = ["wrong", "equivalent", "hang", "equivalent", "illegal_address", "equivalent", "segfault", "wrong"]
    variants = [Variant(f"{n}-{i}", ("strided_gather",), plugins=(f"plugins:{n}",)) for i, n in enumerate(names)]
    events = []
    outs = verify_many(REPO, variants, backends=["emulated"], sizes=[1, 37], first_failure=True, workers=2, launch_timeout=1.5,
                       timeout=60, python_paths=[PLUGINS], progress=events.append)  # fmt: skip
    assert [o.failed_rules for o in outs] == [
        ["VERIFY_REFERENCE"], [], ["VERIFY_TIMEOUT"], [], ["VERIFY_LAUNCH_ERROR"], [], ["VERIFY_LAUNCH_ERROR"], ["VERIFY_REFERENCE"],
    ]  # fmt: skip
    assert all(o.error is None for o in outs)
    hang = outs[2].outcome.result.errors[0].message
    assert hang.startswith('Kernel "strided_gather" fails VERIFY_TIMEOUT: no progress for 1.5 s during strided_gather B=1 (S=32) (run A) grid=(1, 1, 1)')
    assert hang.endswith("; the worker was killed and restarted.")
    died = outs[6].outcome.result.errors[0].message
    assert died.startswith('Kernel "strided_gather" fails VERIFY_LAUNCH_ERROR: the worker died (signal 11) during strided_gather B=1 (S=32) (run A)')
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in outs[4].outcome.result.errors[0].message
    assert sorted(e["variant"] for e in events if e["event"] == "variant_done") == sorted(v.id for v in variants)


def test_an_internal_error_is_no_verdict():
    outs = verify_many(REPO, [Variant("x", ("strided_gather",), plugins=("no_such_module:f",)), Variant("y", ("strided_gather",), plugins=("plugins:wrong",))],
                       backends=["emulated"], sizes=[1], python_paths=[PLUGINS])  # fmt: skip
    assert outs[0].error.startswith("ReferenceProblem: ") and "no_such_module" in outs[0].error
    assert outs[0].failed_rules == [] and outs[0].outcome.run.notes[0].startswith("internal error: ")
    assert outs[1].failed_rules == ["VERIFY_REFERENCE"]  # a fresh worker took over


def _supervised(names, **kw):
    variants = [Variant(f"{n}-{i}", ("strided_gather",), plugins=(f"plugins:{n}",)) for i, n in enumerate(names)]
    events = []
    outs = verify_many(REPO, variants, backends=["emulated"], sizes=[1, 37], first_failure=True, workers=1, timeout=60,
                       python_paths=[PLUGINS], progress=events.append, **kw)  # fmt: skip
    return outs, events


def test_a_variant_that_wrote_past_its_buffers_retires_its_worker(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("WIREUP_TEST_PIDS", str(pids))
    outs, _ = _supervised(["pid", "pid", "past_the_end", "pid", "pid"])
    assert [o.failed_rules for o in outs] == [[], [], ["VERIFY_OUT_OF_BOUNDS"], [], []]
    ran = list(dict.fromkeys(pids.read_text().split()))  # each variant records its worker once per launch
    # one worker for the first three variants; the one that wrote past the end of "dst" ends it
    assert len(ran) == 2


def test_a_context_lost_outside_the_launches_is_not_blamed_on_the_next_variant():
    # "corrupts_helpers" passes, but breaks every later backend of its worker, as a wild write into
    # wireup's own device memory would: the variant after it runs again, on a fresh worker, and passes
    outs, events = _supervised(["corrupts_helpers", "pid", "wrong"])
    assert [o.failed_rules for o in outs] == [[], [], ["VERIFY_REFERENCE"]]
    assert all(o.error is None for o in outs)
    assert [e["variant"] for e in events if e["event"] == "retry"] == ["pid-1"]


def test_a_context_lost_outside_the_launches_twice_is_the_variants_launch_error():
    outs, events = _supervised(["faults_in_helpers", "wrong"])
    assert [o.failed_rules for o in outs] == [["VERIFY_LAUNCH_ERROR"], ["VERIFY_REFERENCE"]]
    assert [e["variant"] for e in events if e["event"] == "retry"] == ["faults_in_helpers-0"]
    (err,) = {f.message for f in outs[0].outcome.result.errors}
    assert err == (
        'Kernel "strided_gather" fails VERIFY_LAUNCH_ERROR: the CUDA context was lost after its launches, in wireup\'s own '
        "device work (the hash helper kernel: an illegal memory access was encountered), on a fresh worker too."
    )


def test_without_sizes_a_variant_runs_the_cases_wireup_verify_plans():
    """A mutant is judged by the verification its kernel gets: verify_many without ``sizes`` runs the cases
    ``wireup verify`` plans for the kernel (its sweep, with the tail sizes of its geometry), not every dims variant
    at the six scalar sizes (the trade-outcome backward's baseline took 146 s that way on the H200 against
    4.4 s in `wireup verify`); given sizes still run as given."""
    from audit.runtime import verify

    planned = verify(REPO, kernels=["strided_gather"], emulated={}, evidence=False).run.results[0].cases
    (out,) = verify_many(REPO, [Variant("base", ("strided_gather",))], backends=["emulated"])
    assert out.outcome.run.results[0].cases == planned
    assert {c["B"] for c in planned} - {1, 37, 300, 4096, 4103, 65536}  # the sweep's tail sizes, which the scalar sizes never ran
    (given,) = verify_many(REPO, [Variant("base", ("strided_gather",))], backends=["emulated"], sizes=[1, 37])
    assert given.outcome.run.results[0].cases == [{"B": 1}, {"B": 37}]
