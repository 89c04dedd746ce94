#!/usr/bin/env bash
# Mutation testing on the device machine: run from the repository root (with .whl/, the PyCUDA wheels of
# ../shared/device, carried along where PyCUDA is not installed; CuPy is used otherwise).
#
#   tests/gpu/run_mutate.sh [mutate|test|both]      (default: mutate)
#
# mutate : `wireup mutate --all` with the quick settings below (every kernel, at most 40 mutants each,
#          every operator represented), under a global timeout
# test   : the GPU pytest (tests/gpu/test_mutate_gpu.py: every mutant of strided_gather and
#          aux_trade_outcome_backward, all non-equivalent ones must be caught)
#
# Into $OUT (default ./device-out): mutation/*.json (reports/mutation), mutate.log (progress and table),
# summary.txt. Override the settings with MUTATE_ARGS, the budget with MUTATE_TIMEOUT (seconds).
set -u
OUT=${OUT:-$PWD/device-out}
export OUT
MODE=${1:-mutate}
BUDGET=${MUTATE_TIMEOUT:-400}
ARGS=${MUTATE_ARGS:---max-mutants 40 --jobs $(nproc) --workers 4 --timeout 5}
mkdir -p "$OUT/mutation"
: >"$OUT/summary.txt"
note() { echo "$*" | tee -a "$OUT/summary.txt"; }

if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >"$OUT/pip.log" 2>&1 || note "pip install of .whl/ failed (pip.log)"
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
note "$(nvidia-smi -L 2>&1 | head -n 1); $(nvcc --version 2>&1 | tail -n 1); $(nproc) cores"

rc=0
case $MODE in mutate | both)
    t0=$(date +%s)
    # shellcheck disable=SC2086  # ARGS is a list of options
    timeout --kill-after=20 "$BUDGET" python3 -m audit mutate --all $ARGS >"$OUT/mutate.log" 2>&1
    rc=$?
    note "mutate --all $ARGS: rc=$rc in $(($(date +%s) - t0)) s (0 all caught or equivalent, 1 survivors, 2 environment, 124 timeout)"
    cp reports/mutation/*.json "$OUT/mutation/" 2>/dev/null || note "no reports/mutation/*.json written"
    grep -v '^ *[0-9.]*s  verify ' "$OUT/mutate.log" | tail -n 60 >>"$OUT/summary.txt"
    ;;
esac
case $MODE in test | both)
    t0=$(date +%s)
    timeout --kill-after=20 "$BUDGET" python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_mutate_gpu.py >"$OUT/pytest-mutate.log" 2>&1
    trc=$?
    note "pytest tests/gpu/test_mutate_gpu.py: rc=$trc in $(($(date +%s) - t0)) s"
    tail -n 40 "$OUT/pytest-mutate.log" >>"$OUT/summary.txt"
    [ $rc -eq 0 ] && rc=$trc
    ;;
esac
exit $rc
