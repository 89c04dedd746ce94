"""Scale-out of verify and mutate (issue 19): ``--workers auto|N`` pins workers to GPUs, ``--cluster ray``
runs the units on Ray hosts, and either way the results are those of a serial run: the same JSON and
evidence (less the clock), with a worker or host killed mid-run (emulated backend; stand-in kernels
registered in the workers by the plugin hooks of this module and tests/data/mutate/plugins.py)."""

from __future__ import annotations

import json
import re
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from audit.cli import main
from audit.errors import UsageError
from audit.runtime import Variant, verify, verify_many
from audit.runtime._cluster import land, parse_cluster, ship
from audit.runtime._placement import gpus_from_listing, parse_workers, plan_workers, usable_cores, visible_gpus
from audit.sameness import differences, stable_view

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PLUGINS = str(HERE / "data" / "mutate")
KILL = "WIREUP_TEST_KILL"  # a folder: the first launch of "strided_gather" writes its pids there and waits to be killed


# -- plugin hooks (run in the workers) ----------------------------------------------------------------------


def register_nothing(backend):
    pass


def register_pinned(backend):
    """Records the GPU each worker was pinned to, once per launch of "strided_gather"."""

    def kernel(launch):
        with open(os.environ["WIREUP_TEST_PINS"], "a") as fh:
            fh.write(os.environ.get("CUDA_VISIBLE_DEVICES", "-") + "\n")
        launch.default()

    backend.register("strided_gather", kernel)


def killed_once(backend):
    """"strided_gather" computes its reference; its very first launch (of any worker) first records the
    worker's pid and its parent's, then waits to be killed from outside."""

    def kernel(launch):
        folder = Path(os.environ[KILL])
        try:
            fd = os.open(folder / "claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return launch.default()
        os.close(fd)
        (folder / "pids.tmp").write_text(f"{os.getpid()} {os.getppid()}")
        os.replace(folder / "pids.tmp", folder / "pids")
        time.sleep(120)  # killed long before
        return launch.default()

    backend.register("strided_gather", kernel)


# -- placement -------------------------------------------------------------------------------------------------

LISTING = """GPU 0: NVIDIA H200 (UUID: GPU-aaaa)
GPU 1: NVIDIA H200 (UUID: GPU-bbbb)
  MIG 3g.71gb     Device  0: (UUID: MIG-b0)
  MIG 3g.71gb     Device  1: (UUID: MIG-b1)
GPU 2: NVIDIA H200 (UUID: GPU-cccc)
"""


def test_gpus_are_found_without_cuda_by_uuid_or_mig_instance():
    assert gpus_from_listing(LISTING) == ["GPU-aaaa", "MIG-b0", "MIG-b1", "GPU-cccc"]
    assert visible_gpus({}, run=lambda argv: LISTING if argv == ["nvidia-smi", "-L"] else None) == ["GPU-aaaa", "MIG-b0", "MIG-b1", "GPU-cccc"]
    assert visible_gpus({}, run=lambda argv: None) == []  # no nvidia-smi: nothing known
    # CUDA_VISIBLE_DEVICES wins, and hides what follows an invalid entry as CUDA does
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2, 0"}, run=lambda argv: LISTING) == ["2", "0"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "1,-1,3"}) == ["1"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_workers_are_spread_over_the_gpus_and_share_one():
    two = ["GPU-a", "GPU-b"]
    assert plan_workers("auto", emulated=False, gpus=two).devices == ["GPU-a", "GPU-b"]
    assert plan_workers(5, emulated=False, gpus=two).devices == ["GPU-a", "GPU-b", "GPU-a", "GPU-b", "GPU-a"]
    assert plan_workers(4, emulated=False, gpus=["GPU-a"]).devices == [None] * 4  # N workers sharing one GPU, as before
    assert plan_workers("auto", emulated=False, gpus=[]).devices == [None]  # the GPU nvidia-smi could not list
    assert plan_workers(None, emulated=False, gpus=two, default=3).devices == ["GPU-a", "GPU-b", "GPU-a"]
    assert plan_workers("auto", emulated=True).devices == [None] * usable_cores()
    assert plan_workers("auto", emulated=True, gpus=two).gpus == []  # the emulated backend pins nothing


@pytest.mark.parametrize("bad", ["0", "-2", "many", "1.5", ""])
def test_a_bad_worker_count_is_a_usage_error(bad):
    with pytest.raises(UsageError, match=rf'^--workers takes "auto" or a positive number of workers, found "{bad}"\.$'):
        parse_workers(bad)
    assert parse_workers("AUTO") == "auto" and parse_workers("3") == 3 and parse_workers(None) is None


@pytest.mark.parametrize("bad", ["spark", "ray:", "ray://", "RAY"])
def test_a_bad_cluster_is_a_usage_error(bad):
    with pytest.raises(UsageError, match=rf'^--cluster takes "ray" or "ray://HOST:PORT", found "{bad}"\.$'):
        parse_cluster(bad)
    assert parse_cluster("ray") == "ray" and parse_cluster("ray://head:10001") == "ray://head:10001"


@pytest.mark.parametrize("command", [["verify", "--emulated"], ["mutate", "strided_gather", "--stand-in", "x:y"]])
def test_cluster_ray_without_ray_exits_2_with_one_sentence(request, monkeypatch, capsys, command):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert main([*command, "--cluster", "ray", "--root", str(request.config.rootpath)]) == 2
    assert capsys.readouterr().err == "error: --cluster ray needs Ray, which is not installed; install it with: pip install 'wireup-audit[cluster]'.\n"


def test_a_bad_workers_flag_exits_2(request, capsys):
    assert main(["verify", "--emulated", "--workers", "0", "--root", str(request.config.rootpath)]) == 2
    assert capsys.readouterr().err == 'error: --workers takes "auto" or a positive number of workers, found "0".\n'
    assert main(["mutate", "strided_gather", "--workers", "lots", "--root", str(request.config.rootpath)]) == 2
    assert capsys.readouterr().err == 'error: --workers takes "auto" or a positive number of workers, found "lots".\n'


def test_each_worker_sees_only_its_gpu(request, tmp_path, monkeypatch):
    pins = tmp_path / "pins"
    monkeypatch.setenv("WIREUP_TEST_PINS", str(pins))
    events = []
    variants = [Variant(f"v{i}", ("strided_gather",), plugins=("test_scaleout:register_pinned",)) for i in range(4)]
    outs = verify_many(REPO, variants, backends=["emulated"], sizes=[1], devices=["GPU-a", "GPU-b"], python_paths=[str(HERE)],
                       progress=events.append)  # fmt: skip
    assert [o.failed_rules for o in outs] == [[]] * 4
    seen = pins.read_text().split()
    assert set(seen) == {"GPU-a", "GPU-b"}  # two slots, each pinned to its GPU; nothing unpinned
    (ev,) = [e for e in events if e["event"] == "workers"]
    assert ev["devices"] == ["GPU-a", "GPU-b"] and ev["count"] == 2


# -- cubins are built once and shipped -------------------------------------------------------------------------


def test_cubins_ship_by_content_and_land_once(tmp_path):
    a, b = tmp_path / "a.cubin", tmp_path / "b.cubin"
    a.write_bytes(b"cubin A")
    b.write_bytes(b"cubin B")
    job = {"base": {"modules": {"k1": {"cubin": str(a), "symbol": "k1"}, "k2": {"error": "failed"}}, "helper_cubin": str(b)},
           "units": [{"id": "m", "modules": {"k1": {"cubin": str(b), "symbol": "k1"}}}, {"id": "n"}]}  # fmt: skip
    shipped, blobs = ship(job)
    assert sorted(blobs.values()) == [b"cubin A", b"cubin B"]  # two files, each read once
    assert job["base"]["modules"]["k1"] == {"cubin": str(a), "symbol": "k1"}  # the caller's job is left alone
    folder = tmp_path / "node" / "shipped"
    landed = land(shipped, blobs, folder)
    paths = [landed["base"]["modules"]["k1"]["cubin"], landed["base"]["helper_cubin"], landed["units"][0]["modules"]["k1"]["cubin"]]
    assert [Path(p).read_bytes() for p in paths] == [b"cubin A", b"cubin B", b"cubin B"]
    assert all(Path(p).parent == folder and Path(p).stem in blobs for p in paths) and paths[1] == paths[2]
    assert "cubin_sha256" not in json.dumps(landed) and landed["base"]["modules"]["k2"] == {"error": "failed"}
    damaged = {sha: data + b"!" for sha, data in blobs.items()}
    from audit.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem, match="does not match its hash"):
        land(shipped, damaged, tmp_path / "other")
    assert land(shipped, damaged, folder) == landed  # already there: kept, not written again


# -- the same results whatever the sharding --------------------------------------------------------------------

SUBJECTS = {"kernels": ["strided_gather", "trade_outcome_label", "aux_trunk_forward", "aux_next_bar_forward"], "schedules": ["aux_heads_forward"]}


def _verify_docs(root, tmp, **kw):
    from audit.printers import render
    from audit.runtime.report import verify_json

    out = verify(root, **SUBJECTS, emulated={}, plugins=["test_scaleout:register_nothing"], python_paths=[str(HERE)], sizes=(1, 37),
                 chain_sizes=(37,), evidence_dir=tmp, timeout=120, **kw)  # fmt: skip
    doc = json.loads(verify_json(render(out.result, "json", tool="wireup verify"), out))
    doc["verify"]["evidence"] = [Path(p).relative_to(tmp).as_posix() for p in doc["verify"]["evidence"]]
    evidence = {p.relative_to(tmp).as_posix(): json.loads(p.read_text()) for p in sorted(Path(tmp).rglob("*.json"))}
    return doc, evidence


def test_verify_gives_the_same_json_and_evidence_whatever_the_worker_count(request, tmp_path):
    serial, serial_ev = _verify_docs(request.config.rootpath, tmp_path / "one", workers=1)
    events = []
    spread, spread_ev = _verify_docs(request.config.rootpath, tmp_path / "three", workers=3, progress=events.append)
    assert {e["worker"] for e in events if e["event"] == "unit_done"} == {0, 1, 2}  # it was sharded
    assert differences(serial, spread) == []
    assert sorted(serial_ev) == sorted(spread_ev) and len(serial_ev) == 5
    assert [differences(serial_ev[n], spread_ev[n]) for n in serial_ev] == [[]] * 5
    # what differs is only the clock: the views are not empty, and a changed verdict would show
    assert stable_view(serial_ev[next(n for n in serial_ev if "strided_gather" in n)])["verdict"] == "pass"
    assert differences({"checks": [{"verdict": "pass", "duration_s": 1}]}, {"checks": [{"verdict": "fail", "duration_s": 2}]}) == ["checks[0].verdict: 'pass' != 'fail'"]


MIX = ["wrong", "equivalent", "illegal_address", "pid", "past_the_end", "segfault", "equivalent", "wrong"]


def _variants(plugin_of=lambda n: f"plugins:{n}"):
    return [Variant(f"{n}-{i}", ("strided_gather",), plugins=(plugin_of(n),)) for i, n in enumerate(MIX)]


def _view(outs):
    """What a mutation run takes from each variant, less the clock: its verdict, findings and records."""
    return [{"id": o.id, "error": o.error, "failed": o.failed_rules, "findings": [f.message for f in o.outcome.result.findings],
             "results": [stable_view(r.to_dict()) for r in o.outcome.run.results]} for o in outs]  # fmt: skip


@pytest.fixture(scope="module")
def serial_mix(tmp_path_factory):
    return _view(verify_many(REPO, _variants(), backends=["emulated"], sizes=[1, 37], first_failure=True, workers=1, timeout=60,
                             python_paths=[PLUGINS]))  # fmt: skip


def test_verify_many_gives_the_same_outcomes_whatever_the_worker_count(serial_mix):
    assert [v["failed"] for v in serial_mix] == [
        ["VERIFY_REFERENCE"], [], ["VERIFY_LAUNCH_ERROR"], [], ["VERIFY_OUT_OF_BOUNDS"], ["VERIFY_LAUNCH_ERROR"], [], ["VERIFY_REFERENCE"],
    ]  # fmt: skip
    events = []
    spread = verify_many(REPO, _variants(), backends=["emulated"], sizes=[1, 37], first_failure=True, workers=3, timeout=60,
                         python_paths=[PLUGINS], progress=events.append)  # fmt: skip
    assert differences(serial_mix, _view(spread)) == []
    done = [e["variant"] for e in events if e["event"] == "variant_done"]
    assert sorted(done) == sorted(v["id"] for v in serial_mix)  # each reported once


def _kill_when_claimed(folder: Path, which: int, got: list[int]) -> threading.Thread:
    """A thread that SIGKILLs the first pid (0: the worker; 1: its parent, a Ray host) the plugin records."""

    def watch():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (folder / "pids").is_file():
                pid = int((folder / "pids").read_text().split()[which])
                got.append(pid)
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_a_worker_killed_mid_run_costs_nothing(serial_mix, tmp_path, monkeypatch):
    monkeypatch.setenv(KILL, str(tmp_path))
    killed: list[int] = []
    watcher = _kill_when_claimed(tmp_path, 0, killed)
    events = []
    # every "equivalent" and "pid" variant's first launch may be the one that waits to be killed
    plugin_of = lambda n: "test_scaleout:killed_once" if n == "equivalent" else f"plugins:{n}"  # noqa: E731
    outs = verify_many(REPO, _variants(plugin_of), backends=["emulated"], sizes=[1, 37], first_failure=True, workers=2, timeout=60,
                       python_paths=[PLUGINS, str(HERE)], progress=events.append)  # fmt: skip
    watcher.join(5)
    assert killed, "no worker reached the launch that waits to be killed"
    assert differences(serial_mix, _view(outs)) == []
    lost = [e for e in events if e["event"] == "lost"]
    assert len(lost) == 1 and lost[0]["what"].startswith("signal 9 during strided_gather B=1")
    done = [e["variant"] for e in events if e["event"] == "variant_done"]
    assert sorted(done) == sorted(v["id"] for v in serial_mix)  # the killed one once, after its re-run


# -- on Ray (a local Ray instance of two CPUs: the emulated backend takes one CPU per host) ------------------------


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    import ray

    folder = tmp_path_factory.mktemp("ray-kill")
    # the hosts' processes inherit the environment Ray starts with: the kill folder must be set before
    saved = {k: os.environ.get(k) for k in (KILL, "RAY_USAGE_STATS_ENABLED")}
    os.environ[KILL], os.environ["RAY_USAGE_STATS_ENABLED"] = str(folder), "0"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield folder
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_verify_many_on_ray_gives_the_serial_outcomes(local_ray, serial_mix):
    events = []
    outs = verify_many(REPO, _variants(), backends=["emulated"], sizes=[1, 37], first_failure=True, workers="auto", timeout=60,
                       python_paths=[PLUGINS], cluster="ray", progress=events.append)  # fmt: skip
    assert differences(serial_mix, _view(outs)) == []
    assert {e["worker"] for e in events if e["event"] == "variant_done"} == {0, 1}  # two hosts, one per CPU
    assert sorted(e["variant"] for e in events if e["event"] == "variant_done") == sorted(v["id"] for v in serial_mix)
    assert any(e["event"] == "subject_done" for e in events)  # the hosts' own progress reaches the driver


def test_a_ray_host_killed_mid_run_costs_nothing(local_ray, serial_mix):
    for f in local_ray.iterdir():
        f.unlink()
    killed: list[int] = []
    watcher = _kill_when_claimed(local_ray, 1, killed)  # the worker's parent: the Ray host's process
    events = []
    plugin_of = lambda n: "test_scaleout:killed_once" if n == "equivalent" else f"plugins:{n}"  # noqa: E731
    outs = verify_many(REPO, _variants(plugin_of), backends=["emulated"], sizes=[1, 37], first_failure=True, workers=2, timeout=60,
                       python_paths=[PLUGINS, str(HERE)], cluster="ray", progress=events.append)  # fmt: skip
    watcher.join(5)
    assert killed, "no host reached the launch that waits to be killed"
    assert differences(serial_mix, _view(outs)) == []
    lost = [e for e in events if e["event"] == "lost"]
    assert len(lost) == 1 and lost[0]["what"].startswith("its Ray host was lost (")
    assert sorted(e["variant"] for e in events if e["event"] == "variant_done") == sorted(v["id"] for v in serial_mix)


def test_verify_on_the_command_line_with_cluster_ray_prints_what_a_serial_run_prints(local_ray, request, tmp_path, capsys):
    args = ["verify", "--emulated", "--root", str(request.config.rootpath), "--kernel", "strided_gather", "--kernel", "trade_outcome_label",
            "--schedule", "aux_heads_forward", "--sizes", "1,37", "--chain-sizes", "37", "--format", "json"]  # fmt: skip
    assert main([*args, "--output", str(tmp_path / "serial.json")]) == 0
    assert main([*args, "--output", str(tmp_path / "ray.json"), "--cluster", "ray", "--workers", "2"]) == 0
    serial, spread = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("serial", "ray"))
    assert differences(serial, spread) == [] and len(serial["verify"]["subjects"]) == 3


def test_the_comparison_script_sees_the_work_and_not_the_clock(tmp_path, capsys):
    sys.path.insert(0, str(HERE / "gpu"))
    try:
        from compare_runs import main as compare_main
    finally:
        sys.path.remove(str(HERE / "gpu"))
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, date, status in ((a, "2026-12-04T10:00:00+00:00", "caught"), (b, "2026-12-04T11:00:00+00:00", "caught")):
        folder.mkdir()
        (folder / "k.json").write_text(json.dumps({"date": date, "results": [{"id": "aor:1", "status": status}], "timing": {"wall": 1.0}}))
    assert compare_main([str(a), str(b)]) == 0
    assert capsys.readouterr().out == "identical: 1 file(s), the clock aside\n"
    (b / "k.json").write_text(json.dumps({"date": "x", "results": [{"id": "aor:1", "status": "survived"}]}))
    (b / "extra.json").write_text("{}")
    assert compare_main([str(a), str(b)]) == 1
    assert capsys.readouterr().out == f"extra.json: only in {b}\nk.json: results[0].status: 'caught' != 'survived'\n"
    assert compare_main([str(a / "k.json"), str(b / "k.json")]) == 1
    assert compare_main([str(a), str(tmp_path / "missing")]) == 2


def register_device_of_pin(backend):
    """The emulated device is named after the GPU the worker was pinned to: two pins, two models."""
    info = backend.device_info()
    pin = os.environ.get("CUDA_VISIBLE_DEVICES", "-")
    backend.device_info = lambda: {**info, "name": f"emulated on {pin}"}


def test_workers_on_gpus_of_different_models_are_refused(request):
    from audit.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem) as err:
        verify(request.config.rootpath, kernels=["strided_gather", "trade_outcome_label"], emulated={}, plugins=["test_scaleout:register_device_of_pin"],
               python_paths=[str(HERE)], sizes=(1,), evidence=False, devices=["GPU-a", "GPU-b"])  # fmt: skip
    assert re.fullmatch(
        r"wireup's workers run on GPUs of different models \(\"emulated on GPU-[ab]\", compute capability 0.0, and \"emulated on GPU-[ab]\", 0.0\): "
        r"an evidence record names one device, so a run uses GPUs of one model \(choose them with CUDA_VISIBLE_DEVICES\)\.", str(err.value)
    ), str(err.value)


# -- wireup mutate: the same result files whatever the sharding ----------------------------------------------------

DATE = re.compile(r'"date": "[^"]*"')


def _mutate_files(request, folder, *flags, stand_in="stand_in:by_operator_in_workers"):
    data = str(HERE / "data" / "mutate")
    sys.path.insert(0, data)
    try:
        code = main(["mutate", "--root", str(request.config.rootpath), "strided_gather", "trade_outcome_label", "--stand-in", stand_in,
                     "--sizes", "1,37", "--output-dir", str(folder), *flags])  # fmt: skip
    finally:
        sys.path.remove(data)
    assert code == 1  # a survivor without an equivalence record
    return {p.name: DATE.sub('"date": ""', p.read_text()) for p in sorted(folder.glob("*.json"))}


def test_mutate_writes_the_same_results_whatever_the_workers(request, tmp_path, capsys):
    serial = _mutate_files(request, tmp_path / "serial", "--workers", "1")
    in_process = _mutate_files(request, tmp_path / "in-process", stand_in="stand_in:by_operator")
    three = _mutate_files(request, tmp_path / "three", "--workers", "3")
    err = capsys.readouterr().err
    assert sorted(serial) == ["strided_gather.json", "trade_outcome_label.json"]
    assert serial == in_process == three  # byte for byte, the date aside
    assert re.search(r"verify   \[\d+/\d+\] \S+  caught by VERIFY_REFERENCE  \(\d+\.\d s\) on worker [012]\n", err)
    assert re.search(r"\) on worker 2\n", err)  # the third slot took a unit (each slot takes one when it starts)


def test_mutate_on_ray_writes_the_serial_results(local_ray, request, tmp_path, capsys):
    serial = _mutate_files(request, tmp_path / "serial", "--workers", "1")
    capsys.readouterr()
    assert _mutate_files(request, tmp_path / "ray", "--cluster", "ray", "--workers", "2") == serial
    err = capsys.readouterr().err
    assert "workers  2 Ray host(s), one CPU each\n" in err  # the emulated backend: one CPU per host
    # the first two units go to the two hosts at once; which host takes which later unit depends on timing
    assert re.search(r"\) on worker 0 \(ray:0\)\n", err) and re.search(r"\) on worker 1 \(ray:1\)\n", err)
    assert re.search(r"verify   \[\d+/\d+\] \S+  caught by VERIFY_REFERENCE  \(\d+\.\d s\) on worker [01] \(ray:[01]\)\n", err)


def test_a_ray_host_that_cannot_start_is_an_environment_error(local_ray, tmp_path):
    from audit.errors import EnvironmentProblem
    from audit.runtime._cluster import supervise_on_ray

    (tmp_path / "k.cubin").write_bytes(b"cubin")
    # "k2" names a cubin by a hash whose bytes were never shipped: the host cannot land it and never starts
    modules = {"k": {"cubin": str(tmp_path / "k.cubin")}, "k2": {"cubin_sha256": "0" * 64}}
    job = {"base": {"backends": ["emulated"], "root": str(REPO), "modules": modules}, "units": [{"id": "u", "subjects": []}]}
    with pytest.raises(EnvironmentProblem, match=r"^a Ray host could not start \(.*KeyError.*\)\.$"):
        supervise_on_ray(job, "ray", workers=1, timeout=30)


def test_sanitizer_runs_stay_on_this_machine(request, capsys):
    assert main(["verify", "--emulated", "--sanitizer", "memcheck", "--cluster", "ray", "--root", str(request.config.rootpath)]) == 2
    assert capsys.readouterr().err == "error: --sanitizer runs compute-sanitizer on this machine only; leave out --cluster.\n"


def test_the_report_is_the_same_whatever_the_workers(request, tmp_path, monkeypatch):
    """The report is a view over the evidence and the mutation results: rendered from a serial run's and
    from a sharded run's, it is the same text, byte for byte but the dates of the records."""
    import shutil

    import audit.compile
    import audit.compile.facts
    from audit.api import load_project, run_check
    from audit.errors import EnvironmentProblem
    from audit.report import ReportOptions, collect_report, render_report

    def missing(*args, **kwargs):
        raise EnvironmentProblem("nvcc is not on PATH (switched off by the test)")

    monkeypatch.setattr(audit.compile, "build_kernels", missing)
    monkeypatch.setattr(audit.compile.facts, "build_kernels", missing)
    texts = []
    for name, workers in (("serial", 1), ("sharded", 3)):
        root = tmp_path / name
        for part in ("contracts", "kernels"):
            shutil.copytree(REPO / part, root / part)
        shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
        cfg, _ = load_project(root)
        verify(root, **SUBJECTS, emulated={}, plugins=["test_scaleout:register_nothing"], python_paths=[str(HERE)], sizes=(1, 37),
               chain_sizes=(37,), evidence_dir=cfg.path(cfg.evidence), timeout=120, workers=workers)  # fmt: skip
        _mutate_files(request, cfg.path(cfg.reports) / "mutation", "--workers", str(workers))
        cfg, cs = load_project(root)
        report = collect_report(run_check(cfg.root, config=cfg, contracts=cs), ReportOptions(history=False))
        texts.append(render_report(report, "md"))
    assert "strided_gather" in texts[0] and "mutants caught" in texts[0]
    dates = re.compile(r"\d{4}-\d\d-\d\d(T\d\d:\d\d:\d\d\+00:00| \d\d:\d\d( UTC)?)?")
    assert dates.sub("DATE", texts[0]) == dates.sub("DATE", texts[1])


def test_a_journal_of_ray_hosts_and_of_worker_processes_resumes_alike(local_ray, serial_mix, tmp_path):
    """Every path that runs units (Ray hosts, local worker processes) journals each finished variant; a
    second run takes all of them and gives the serial outcomes."""
    for cluster, workers, name in (("ray", "auto", "ray.jsonl"), (None, 2, "procs.jsonl")):
        journal = tmp_path / name
        first = verify_many(REPO, _variants(), backends=["emulated"], sizes=[1, 37], first_failure=True, workers=workers, timeout=60,
                            python_paths=[PLUGINS], cluster=cluster, journal=journal)  # fmt: skip
        assert differences(serial_mix, _view(first)) == []
        assert len(journal.read_text().splitlines()) == len(serial_mix)
        notes = []
        again = verify_many(REPO, _variants(), backends=["emulated"], sizes=[1, 37], first_failure=True, workers=workers, timeout=60,
                            python_paths=[PLUGINS], cluster=cluster, journal=journal,
                            progress=lambda ev: notes.append(ev.get("text")) if ev.get("event") == "note" else None)  # fmt: skip
        assert notes == [f"resumed {len(serial_mix)} of {len(serial_mix)} variant(s) from the journal {journal}"]
        assert differences(serial_mix, _view(again)) == []
