#!/usr/bin/env bash
# GPU verification on the device machine: run from the repository root with .whl/ (the PyCUDA wheels of
# ../shared/device, copied by its prepare.sh) carried along.
#
#   tests/gpu/run_on_device.sh [smoke|verify|tests|tails|all]      (default: all)
#
# smoke  : two kernels and one schedule with each backend (catches API problems in seconds)
# verify : every shipped kernel and schedule with PyCUDA and CuPy together (one run, shared inputs and
#          references, both verdicts) as JSON with the timing breakdown and evidence, `check
#          --require-evidence --select evidence` on the records it wrote, then PyCUDA alone as text (the
#          table and the time line)
# tests  : the GPU pytest tests (tests/gpu/test_verify_gpu.py): both backends, broken fixtures, generality,
#          memcheck, the one-minute budget
# tails  : the tail fixture and the size sweep on the GPU (tests/gpu/test_tails_gpu.py: the fixture fails
#          with the default sweep, with T fixed it passes with VERIFY_TAIL_UNCOVERED; the shipped set covers
#          every tail within the minute), then the both-backend verify as JSON (its timing: docs/benchmarks.md)
# all    : smoke, the both-backend verify and the tests (about 6-8 minutes; split it where one call has
#          less than 10 minutes)
#
# Logs, JSON and evidence are bundled into $OUT (default ./device-out): summary.txt, verify.json, logs.tgz,
# evidence.tgz. Every step runs under `timeout`, so a hang cannot eat the machine.
set -u
OUT=${OUT:-$PWD/device-out}
MODE=${1:-all}
LOGS=$(mktemp -d)
mkdir -p "$OUT"
: >"$OUT/summary.txt"

note() { echo "$*" | tee -a "$OUT/summary.txt"; }

step() {  # step NAME SECONDS CMD...
    local name=$1 secs=$2
    shift 2
    local t0 rc
    t0=$SECONDS
    timeout --kill-after=20 "$secs" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.err"
    rc=$?
    note "$(printf '%-22s rc=%-3s %5d s' "$name" "$rc" "$((SECONDS - t0))")"
    tail -n 40 "$LOGS/$name.out" | sed 's/^/    | /' >>"$OUT/summary.txt"
    tail -n 15 "$LOGS/$name.err" | sed 's/^/    ! /' >>"$OUT/summary.txt"
    return $rc
}

if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >"$LOGS/pip.log" 2>&1 || note "pip install of .whl/ failed (see logs.tgz: pip.log)"
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
else
    note "no .whl/ folder: PyCUDA must already be installed"
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

{
    nvidia-smi -L
    nvcc --version | tail -n 2
    command -v compute-sanitizer
    python3 - <<'PY'
import importlib, platform
print("python", platform.python_version())
for m in ("numpy", "pycuda", "cupy", "networkx", "jinja2", "pytest"):
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", getattr(mod, "VERSION_TEXT", "?")))
    except Exception as exc:  # noqa: BLE001
        print(m, "MISSING", exc)
PY
} >"$LOGS/env.log" 2>&1
note "$(tr '\n' ';' <"$LOGS/env.log")"

case $MODE in smoke | all)
    step smoke-pycuda 240 python3 -m audit verify --backend pycuda --kernel strided_gather --kernel aux_param_grad_reduce --schedule aux_heads_forward --sizes 1,37,4096 --chain-sizes 37 --no-evidence
    step smoke-cupy 240 python3 -m audit verify --backend cupy --kernel strided_gather --kernel aux_param_grad_reduce --schedule aux_heads_forward --sizes 1,37,4096 --chain-sizes 37 --no-evidence
    ;;
esac
case $MODE in verify | all)
    step verify-both 400 python3 -m audit verify --backend pycuda --backend cupy --format json --output "$OUT/verify.json"
    # the records just written must cover this checkout's build (code hashes included); the same
    # command on a CPU machine with the same nvcc must then agree
    step evidence-check 120 python3 -m audit check --require-evidence --select evidence
    ;;
esac
case $MODE in verify)
    step verify-text 300 python3 -m audit verify --backend pycuda --no-evidence
    ;;
esac
case $MODE in tails)
    step pytest-tails 400 python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_tails_gpu.py
    step verify-both 400 python3 -m audit verify --backend pycuda --backend cupy --format json --output "$OUT/verify.json" --no-evidence
    ;;
esac
case $MODE in tests | all)
    step pytest-gpu 560 python3 -m pytest -q -rs -x -p no:cacheprovider tests/gpu/test_verify_gpu.py
    ;;
esac

tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
[ -d reports/evidence ] && tar czf "$OUT/evidence.tgz" reports/evidence 2>/dev/null
note "done: $MODE"
