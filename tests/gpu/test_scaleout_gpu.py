"""Scale-out on the GPU (issue 19): `wireup mutate` and `wireup verify` with several workers (one per
GPU with `--workers auto`, several sharing one GPU with `--workers 3`) give the serial run's results, the
clock aside (tests/gpu/compare_runs.py). On one H200 it takes about 3 minutes; the outputs go to $OUT
where it is set (device runs), so they come back for a look.

    python -m pytest -q tests/gpu/test_scaleout_gpu.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from audit.runtime import visible_gpus

from compare_runs import compare  # tests/gpu is on sys.path (pytest prepends it)

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]
KERNEL = "aux_next_bar_loss_reduce"  # 20 mutants at --max-mutants 20, a light kernel: the three runs fit in ~3 minutes


def _out(tmp_path: Path, name: str) -> Path:
    base = Path(os.environ["OUT"]) / "scaleout" if os.environ.get("OUT") else tmp_path
    folder = base / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _wireup(*args: str, log: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-m", "audit", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=540)
    log.write_text(f"$ wireup {' '.join(args)}\nexit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    return done


def test_mutate_with_workers_gives_the_serial_results(tmp_path):
    runs = {}
    for name, workers in (("serial", "1"), ("auto", "auto"), ("three", "3")):
        folder = _out(tmp_path, f"mutate-{name}")
        done = _wireup("mutate", KERNEL, "--max-mutants", "20", "--workers", workers, "--output-dir", str(folder), log=folder.parent / f"mutate-{name}.log")
        assert done.returncode in (0, 1), done.stderr[-2000:]
        runs[name] = folder
        if workers == "3":
            assert re.search(r"verify   \[\d+/20\] .* on worker [12]", done.stderr), "three workers, yet every mutant ran on worker 0"
    for name in ("auto", "three"):
        n, diffs = compare(runs["serial"], runs[name])
        assert n == 1 and diffs == [], f"{name}: " + "\n".join(diffs)


def test_verify_with_workers_gives_the_serial_json(tmp_path):
    args = ["verify", "--kernel", "strided_gather", "--kernel", "aux_trunk_forward", "--kernel", KERNEL, "--schedule", "aux_heads_forward",
            "--no-evidence", "--format", "json"]  # fmt: skip
    folder = _out(tmp_path, "verify")
    for name, workers in (("serial", "1"), ("three", "3")):
        done = _wireup(*args, "--workers", workers, "--output", str(folder / f"{name}.json"), log=folder / f"{name}.log")
        assert done.returncode == 0, done.stderr[-2000:]
    n, diffs = compare(folder / "serial.json", folder / "three.json")
    assert diffs == [], "\n".join(diffs)


def test_auto_puts_one_worker_on_each_gpu(tmp_path):
    gpus = visible_gpus()
    if len(gpus) < 2:
        pytest.skip(f"one worker per GPU needs several GPUs; {len(gpus)} visible here")
    folder = _out(tmp_path, "verify-auto")
    done = _wireup("verify", "--workers", "auto", "--no-evidence", log=folder / "auto.log")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"workers  {len(gpus)} worker(s), 1 on each of {len(gpus)} GPUs" in done.stderr
