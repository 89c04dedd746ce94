"""A hanging or crashing kernel cannot take wireup verify down: the worker is killed or dies, the kernel
gets a finding, and a fresh worker verifies the rest (emulated kernels registered in the worker through a
plugin hook defined in this module)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from audit.runtime import verify

HERE = Path(__file__).resolve().parent


def _hang(launch):
    time.sleep(3600)


def _segfault(launch):
    os.kill(os.getpid(), signal.SIGSEGV)


def register_hang(backend):
    backend.register("strided_gather", _hang)


def register_crash(backend):
    backend.register("strided_gather", _segfault)


def _run(root, plugin, timeout=4.0):
    return verify(
        root, kernels=["strided_gather", "trade_outcome_label"], emulated={}, plugins=[f"test_runtime_supervisor:{plugin}"],
        python_paths=[str(HERE)], sizes=(1, 37), evidence=False, timeout=timeout,
    )  # fmt: skip


def test_a_hanging_kernel_times_out_and_the_rest_is_verified(request):
    t0 = time.monotonic()
    out = _run(request.config.rootpath, "register_hang")
    assert time.monotonic() - t0 < 60
    verdicts = {r.subject: r.verdict for r in out.run.results}
    assert verdicts == {"strided_gather": "fail", "trade_outcome_label": "pass"}
    (f,) = [f for f in out.result.findings if f.subject == "strided_gather" and f.severity.value == "error"]
    assert f.rule == "VERIFY_TIMEOUT"
    assert f.message.startswith('Kernel "strided_gather" fails VERIFY_TIMEOUT: no progress for 4 s during strided_gather B=1 (S=32) (run A) grid=(1, 1, 1) block=(256, 1, 1)')


def test_a_crashing_worker_is_a_launch_error_and_is_replaced(request):
    out = _run(request.config.rootpath, "register_crash")
    verdicts = {r.subject: r.verdict for r in out.run.results}
    assert verdicts == {"strided_gather": "fail", "trade_outcome_label": "pass"}
    (f,) = [f for f in out.result.findings if f.subject == "strided_gather" and f.severity.value == "error"]
    assert f.rule == "VERIFY_LAUNCH_ERROR"
    assert "the worker died (signal 11) during strided_gather B=1 (S=32) (run A)" in f.message


def test_the_worker_reports_environment_and_timing(request):
    out = verify(request.config.rootpath, kernels=["trade_outcome_label"], emulated={}, plugins=["test_runtime_supervisor:register_nothing"],
                 python_paths=[str(HERE)], sizes=(37,), evidence=False)  # fmt: skip
    assert out.result.exit_code == 0
    assert out.run.environments["emulated"].device["name"] == "emulated (numpy)"
    assert out.run.timing["kernel"] >= 0 and out.run.timing["wall"] > 0


def register_nothing(backend):
    pass


@pytest.mark.parametrize("bad", ["nosuchmodule:register", "test_runtime_supervisor:nosuchfunction"])
def test_a_worker_that_cannot_start_is_an_environment_error(request, bad):
    from audit.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem, match="worker failed before verifying anything"):
        verify(request.config.rootpath, kernels=["trade_outcome_label"], emulated={}, plugins=[bad], python_paths=[str(HERE)], sizes=(1,), evidence=False)


# -- one supervisor and worker protocol for verify and verify_many ------------------------------------------

PLUGINS = HERE / "data" / "mutate"


def register_past_the_end_then_pids(backend):
    """strided_gather writes past the end of "dst"; trade_outcome_label records which worker ran it."""
    import plugins

    plugins.past_the_end(backend)

    def label(launch):
        plugins._record_pid()
        launch.default()

    backend.register("trade_outcome_label", label)


def _run_plugin(root, plugin, events=None):
    return verify(
        root, kernels=["strided_gather", "trade_outcome_label"], emulated={}, plugins=[plugin], python_paths=[str(HERE), str(PLUGINS)],
        sizes=(1, 37), evidence=False, timeout=60, progress=(events.append if events is not None else None),
    )  # fmt: skip


def test_verify_retires_a_worker_after_a_write_past_the_buffers(request, tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("WIREUP_TEST_PIDS", str(pids))
    out = _run_plugin(request.config.rootpath, "test_runtime_supervisor:register_past_the_end_then_pids")
    assert {r.subject: r.verdict for r in out.run.results} == {"strided_gather": "fail", "trade_outcome_label": "pass"}
    assert [f.rule for f in out.result.errors] == ["VERIFY_OUT_OF_BOUNDS"]
    ran = list(dict.fromkeys(pids.read_text().split()))
    assert len(ran) == 2  # strided_gather's worker was retired: trade_outcome_label ran on a fresh one


def test_verify_reruns_a_subject_whose_context_was_lost_outside_its_launches(request):
    # the plugin, registered again for the second subject's backend, breaks it in wireup's own hash (as
    # a wild write of the first subject into wireup's memory would): it runs again on a fresh worker
    events: list[dict] = []
    out = _run_plugin(request.config.rootpath, "plugins:corrupts_helpers", events)
    assert out.result.exit_code == 0 and {r.verdict for r in out.run.results} == {"pass"}
    assert [e["unit"] for e in events if e["event"] == "retry"] == ["kernel:trade_outcome_label"]


def test_verify_blames_a_context_lost_twice_outside_the_launches_on_the_subject(request):
    out = _run_plugin(request.config.rootpath, "plugins:faults_in_helpers")
    assert {f.subject: f.rule for f in out.result.errors} == {"strided_gather": "VERIFY_LAUNCH_ERROR", "trade_outcome_label": "VERIFY_LAUNCH_ERROR"}
    assert out.result.errors[0].message == (
        'Kernel "strided_gather" fails VERIFY_LAUNCH_ERROR: the CUDA context was lost after its launches, in wireup\'s own '
        "device work (the hash helper kernel: an illegal memory access was encountered), on a fresh worker too."
    )


def test_verify_and_verify_many_start_their_workers_in_one_place(request, monkeypatch):
    from audit.runtime import Variant, _supervisor, verify_many

    started = []
    real = _supervisor.spawn_worker

    def spawn(job_file, err_file, cwd, prefix=(), pin=None):
        started.append(job_file)
        return real(job_file, err_file, cwd, prefix, pin)

    monkeypatch.setattr(_supervisor, "spawn_worker", spawn)
    verify(request.config.rootpath, kernels=["trade_outcome_label"], emulated={}, plugins=["test_runtime_supervisor:register_nothing"],
           python_paths=[str(HERE)], sizes=(1,), evidence=False)  # fmt: skip
    verify_many(request.config.rootpath, [Variant("v", ("strided_gather",), plugins=("plugins:equivalent",))], backends=["emulated"], sizes=[1],
                python_paths=[str(PLUGINS)])  # fmt: skip
    assert len(started) == 2


def test_there_is_one_worker_program_and_one_place_that_starts_it():
    import ast

    runtime = HERE.parent / "audit" / "runtime"
    mains, popens = [], []
    for path in sorted(runtime.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "__name__":
                mains.append(path.name)
            if isinstance(node, ast.FunctionDef):
                for inner in ast.walk(node):  # a process started: subprocess.Popen(...) called
                    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "Popen":
                        popens.append(f"{path.name}:{node.name}")
    assert mains == ["_worker.py"]
    assert sorted(set(popens)) == ["_supervisor.py:spawn_worker"]


# a stand-in for compute-sanitizer: runs the worker as its child (stdin inherited) and writes its log
# only when the child has left, as compute-sanitizer does
_WRAP = "import subprocess, sys; code = subprocess.call(sys.argv[2:]); open(sys.argv[1], 'w').write(f'child exited {code}'); sys.exit(86 if code else 0)"


def test_a_wrapped_worker_takes_its_units_through_the_wrapper_and_leaves_by_itself(request, tmp_path):
    import sys

    from audit.api import load_project
    from audit.runtime._session import JobSpec
    from audit.runtime._supervisor import supervise

    cfg, cs = load_project(request.config.rootpath)
    modules = {k.name: {"symbol": k.symbol, "names": [k.symbol, k.name]} for k in cs.kernels}
    base = JobSpec(root=str(cfg.root), backends=["emulated"], subjects=[], sizes=[1, 37], chain_sizes=[], modules=modules,
                   plugins=["test_runtime_supervisor:register_past_the_end_then_pids"], python_paths=[str(HERE), str(PLUGINS)])  # fmt: skip
    units = [{"id": f"kernel:{k}", "subjects": [["kernel", k]]} for k in ("strided_gather", "trade_outcome_label")]

    def wrapper(n):
        log = tmp_path / f"wrapped-{n}.log"
        return [sys.executable, "-c", _WRAP, str(log)], log

    out = supervise({"base": base.to_dict(), "units": units}, timeout=60, wrapper=wrapper)
    assert [sorted({c.rule for r in out.outcomes[i].results for c in r.failed}) for i in range(2)] == [["VERIFY_OUT_OF_BOUNDS"], []]
    # two workers (the write past the buffers retired the first); each left by itself, so each log is
    # complete when supervise returns: exit 3 after giving up its context, exit 0 when stdin closed
    assert [p.name for p in out.sanitizer_logs] == ["wrapped-1.log", "wrapped-2.log"]
    assert [p.read_text() for p in out.sanitizer_logs] == ["child exited 3", "child exited 0"]


def test_a_worker_runs_one_blas_thread_unless_the_user_says_otherwise(tmp_path, monkeypatch):
    """Several workers (or sanitizer runs), each with a BLAS pool of every core, oversubscribe the machine: a
    worker gets one BLAS/OpenMP thread where the environment does not set the count, and the user's count
    where it does."""
    from audit.runtime import _supervisor

    envs = []

    class FakePopen:
        def __init__(self, args, **kw):
            envs.append(kw["env"])

    monkeypatch.setattr(_supervisor.subprocess, "Popen", FakePopen)
    monkeypatch.setattr(_supervisor, "track", lambda p: p)
    from audit.config import BLAS_THREADS

    for var in BLAS_THREADS:
        monkeypatch.delenv(var, raising=False)
    _supervisor.spawn_worker(tmp_path / "job.json", tmp_path / "err.txt", str(tmp_path))
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    _supervisor.spawn_worker(tmp_path / "job.json", tmp_path / "err.txt", str(tmp_path))
    assert [{v: e[v] for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")} for e in envs] == [
        {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        {"OPENBLAS_NUM_THREADS": "4", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    ]


def test_the_console_script_runs_one_blas_thread_unless_the_user_says_otherwise(tmp_path):
    """``wireup`` sets the BLAS and OpenMP thread counts before numpy loads, as every worker has them, so a
    verify in wireup's own process sums as its workers do; a count the user set stays."""
    import subprocess
    import sys

    code = "import os, sys; from audit import cli; sys.argv = ['wireup', '--version']\ntry:\n    cli.console()\nexcept SystemExit:\n    pass\nprint([os.environ.get(v) for v in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS')], 'numpy' in sys.modules)"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout.splitlines()[-1]
    assert out == "['1', '1', '1'] False"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, "OMP_NUM_THREADS": "3"}, check=True).stdout.splitlines()[-1]
    assert out == "['1', '3', '1'] False"
