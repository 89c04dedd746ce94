"""``wireup verify`` on the command line: exit codes, the environment sentence, output formats, and
static commands that never import the GPU runtime."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from audit.cli import main
from audit.runtime import _probe

NO_GPU = "error: wireup verify needs an NVIDIA GPU and PyCUDA or CuPy; none was found (no CUDA driver).\n"


def test_no_driver_exits_2_with_one_sentence(request, monkeypatch, capsys):
    monkeypatch.setattr(_probe, "LIBCUDA_NAMES", ["libcuda-that-does-not-exist.so.9"])
    assert main(["verify", "--root", str(request.config.rootpath)]) == 2
    err = capsys.readouterr().err
    assert err == NO_GPU


def test_driver_but_no_package_exits_2(request, monkeypatch, capsys):
    monkeypatch.setattr(_probe, "device_arch", lambda: ("sm_90", ""))
    monkeypatch.setattr(_probe, "installed", lambda name: False)
    assert main(["verify", "--root", str(request.config.rootpath)]) == 2
    assert capsys.readouterr().err == (
        "error: wireup verify needs an NVIDIA GPU and PyCUDA or CuPy; none was found (neither PyCUDA nor CuPy is installed).\n"
    )


def test_asking_for_a_missing_backend_exits_2(request, monkeypatch, capsys):
    monkeypatch.setattr(_probe, "device_arch", lambda: ("sm_90", ""))
    monkeypatch.setattr(_probe, "installed", lambda name: name == "pycuda")
    assert main(["verify", "--backend", "cupy", "--root", str(request.config.rootpath)]) == 2
    assert capsys.readouterr().err == "error: wireup verify --backend cupy needs CuPy; it is not installed (installed: PyCUDA).\n"


def test_missing_sanitizer_exits_2(request, monkeypatch, capsys):
    monkeypatch.setattr(_probe, "device_arch", lambda: ("sm_90", ""))
    monkeypatch.setattr(_probe, "installed", lambda name: True)
    monkeypatch.setattr(_probe, "find_sanitizer", lambda: None)
    assert main(["verify", "--sanitizer", "memcheck", "--root", str(request.config.rootpath)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: wireup verify --sanitizer memcheck needs compute-sanitizer;") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kernel", "nope"], 'error: --kernel "nope" is not a kernel of the contracts; the kernels are "aux_label_scale_ema_update",'),
        (["--schedule", "nope"], 'error: --schedule "nope" is not a schedule of the contracts; the schedules are "aux_heads_forward",'),
        (["--sizes", "1,x"], 'error: --sizes takes batch sizes or dim assignments such as "B=4,T=17;B=1,T=1", found "x".'),
        (["--sizes", "0"], "error: --sizes takes positive batch sizes, found 0."),
        (["--replace-source", "strided_gather"], 'error: --replace-source takes KERNEL=FILE, found "strided_gather".'),
    ],
)
def test_usage_errors_exit_2(request, capsys, args, message):
    assert main(["verify", "--emulated", "--root", str(request.config.rootpath), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_text_output_has_progress_findings_summary_and_table(request, capsys):
    code = main(["verify", "--emulated", "--root", str(request.config.rootpath), "--kernel", "strided_gather",
                 "--schedule", "aux_heads_forward", "--sizes", "1,37", "--chain-sizes", "37,256", "--no-evidence"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0
    assert "verify   kernel   strided_gather [emulated] ok:" in err
    # 1 and 37 are multiples of no block size: the kernel's exact side never ran (one warning, its 16 S variants
    # times 2 sizes); the schedule's 256 is a multiple of every divisor of its geometry
    first, summary = out.splitlines()[:2]
    assert first == ('contracts/kernels/label_producers.toml:3: VERIFY_TAIL_UNCOVERED (warning) Kernel "strided_gather" grid '
                     '"ceil_div(B, 256)": B is not a multiple of 256 in any of the 32 cases that ran; add a case where it is, such as B=256.')  # fmt: skip
    assert summary == "wireup verify: 0 error(s), 1 warning(s); 26 rule(s) ran."
    header = next(line for line in out.splitlines() if line.startswith("subject"))
    assert header.split() == ["subject", "backend", "passed", "failed", "not", "run", "max", "rel", "err", "time"]
    assert any(line.startswith("schedule:aux_heads_forward") for line in out.splitlines())
    assert "\ntime: " in out


def test_json_output_carries_subjects_and_timing(request, capsys, tmp_path):
    target = tmp_path / "verify.json"
    code = main(["verify", "--emulated", "--root", str(request.config.rootpath), "--kernel", "trade_outcome_label",
                 "--sizes", "37", "--format", "json", "--output", str(target)])  # fmt: skip
    assert code == 0
    doc = json.loads(target.read_text())
    assert doc["tool"] == "wireup verify" and doc["summary"]["exit_code"] == 0
    (subj,) = doc["verify"]["subjects"]
    assert subj["subject"] == "trade_outcome_label" and subj["verdict"] == "pass" and subj["failed"] == 0
    assert {"kernel", "reference", "input_generation", "wall"} <= set(doc["verify"]["timing"])


@pytest.mark.parametrize("fmt", ["github", "junit", "sarif"])
def test_other_printers_render_verify_findings(request, capsys, fmt, monkeypatch):
    from audit.runtime._emulated import EmulatedBackend

    def broken(launch):
        launch.default()
        launch.tensor("dst")[...] = 0.0

    real = EmulatedBackend.__init__

    def patched(self, kernels=None, **kw):
        real(self, kernels={"strided_gather": broken}, **kw)

    monkeypatch.setattr(EmulatedBackend, "__init__", patched)
    code = main(["verify", "--emulated", "--root", str(request.config.rootpath), "--kernel", "strided_gather", "--sizes", "37", "--format", fmt])
    out = capsys.readouterr().out
    assert code == 1
    assert "VERIFY_REFERENCE" in out


def test_static_commands_never_import_the_runtime_or_gpu_packages(request, tmp_path):
    code = (
        "import sys\n"
        "from audit.cli import main\n"
        f"main(['check', '--root', {str(request.config.rootpath)!r}, '--format', 'json', '--output', {str(tmp_path / 'out.json')!r}])\n"
        "bad = [m for m in sys.modules if m.startswith(('audit.runtime', 'pycuda', 'cupy', 'audit.references'))]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=request.config.rootpath, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


def test_importing_the_runtime_imports_no_gpu_package(request):
    code = "import sys, audit.runtime, audit.runtime._pycuda, audit.runtime._cupy\nprint([m for m in sys.modules if m.startswith(('pycuda', 'cupy'))])\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=request.config.rootpath, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr
