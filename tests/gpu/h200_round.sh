#!/usr/bin/env bash
# One device call of a round: the full verification of the shipped chain on both backends (evidence
# written, JSON and wall time into $OUT), its wall time at several worker counts (benchmarks/scaleout.py),
# then the GPU tests named as arguments. Run from the repository root with .whl/ and .wireup-cache/ carried.
#
#   tests/gpu/h200_round.sh [PYTEST_FILE ...]      # WORKERS (default 4): the evidence run's workers
#                                                  # SCALEOUT (default 1,2,4; empty: none): worker counts timed
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >"$OUT/pip.log" 2>&1
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c 'import platform, numpy, cupy, pycuda; print("python", platform.python_version(), "numpy", numpy.__version__, "cupy", cupy.__version__, "pycuda", pycuda.VERSION_TEXT)'
    echo "$(nproc) cores"
} >"$OUT/env.txt" 2>&1
t0=$(date +%s%N)
timeout 200 python3 -m audit verify --backend pycuda --backend cupy --workers "${WORKERS:-4}" --format json --output "$OUT/verify.json" >"$OUT/verify.log" 2>&1
echo "verify rc=$? workers=${WORKERS:-4} wall_ms=$(ms "$t0")" | tee "$OUT/summary.txt"
tar -czf "$OUT/evidence.tgz" reports/evidence
if [ "${SCALEOUT-1,2,4}" != "" ]; then
    timeout 240 python3 benchmarks/scaleout.py --workers "${SCALEOUT-1,2,4}" -- --backend pycuda --backend cupy >"$OUT/scaleout.log" 2>&1
    echo "scaleout rc=$?" | tee -a "$OUT/summary.txt"
fi
for f in "$@"; do
    t0=$(date +%s%N)
    timeout 300 python3 -m pytest -q -rs -p no:cacheprovider "$f" >"$OUT/$(basename "$f" .py).log" 2>&1
    echo "$f rc=$? wall_ms=$(ms "$t0")" | tee -a "$OUT/summary.txt"
done
