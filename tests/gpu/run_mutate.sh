#!/usr/bin/env bash
# Mutation testing (and, first, the GPU verification that writes evidence) on the device machine, in one
# call that fits its 10-minute limit. Run from the repository root with .whl/ (the PyCUDA wheels of
# ../shared/device) and .wireup-cache/ (cubins built on the CPU machine) carried along.
#
#   tests/gpu/run_mutate.sh [--verify] [--test] GROUP [GROUP ...]
#
# --verify : first `wireup verify` of every kernel and schedule with PyCUDA and CuPy (writes the evidence
#            records; JSON with the timing breakdown into $OUT/verify.json)
# --test   : then the GPU pytest of mutation testing (tests/gpu/test_mutate_gpu.py)
# GROUP    : comma-separated kernel names mutated by one `wireup mutate` invocation ("all" for --all);
#            each invocation writes reports/mutation/<kernel>.json for its kernels when it ends, so a
#            group cut off by its cap loses only that group
#
# Settings: VERIFY_ARGS (e.g. --kernel K --schedule S: verify only those), MUTATE_ARGS (default: --max-mutants 30 --jobs $(nproc) --workers 4 --timeout 5), BUDGET (the
# seconds the whole script may take, default 570), GROUP_CAP (the most one group may take, default the
# rest of the budget). Into $OUT (default ./device-out): summary.txt, verify.json, logs.tgz (every log),
# mutation.tgz (reports/mutation), evidence.tgz (reports/evidence).
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
LOGS=$(mktemp -d)
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
BUDGET=${BUDGET:-570}
ARGS=${MUTATE_ARGS:---max-mutants 30 --jobs $(nproc) --workers 4 --timeout 5}

if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >"$LOGS/pip.log" 2>&1 \
        || note "pip install of .whl/ failed: $(tail -n 3 "$LOGS/pip.log")"
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvcc --version | tail -n 1
    command -v compute-sanitizer
    python3 -c 'import platform, numpy, cupy, pycuda; print("python", platform.python_version(), "numpy", numpy.__version__, "cupy", cupy.__version__, "pycuda", pycuda.VERSION_TEXT)'
    echo "$(nproc) cores"
} >"$LOGS/env.log" 2>&1
note "env: $(tr '\n' ';' <"$LOGS/env.log")"

VERIFY=0 TEST=0
GROUPS_=()
for a in "$@"; do
    case $a in
        --verify) VERIFY=1 ;;
        --test) TEST=1 ;;
        *) GROUPS_+=("$a") ;;
    esac
done

if [ $VERIFY -eq 1 ]; then
    # shellcheck disable=SC2086  # VERIFY_ARGS is a list of options (--kernel K --schedule S to verify some)
    timeout -k 10 220 python3 -m audit verify --backend pycuda --backend cupy ${VERIFY_ARGS:-} --format json --output "$OUT/verify.json" >"$LOGS/verify.log" 2>&1
    note "verify rc=$? at $(elapsed) s"
    tail -n 30 "$LOGS/verify.log" >>"$SUMMARY"
fi

i=0
for g in "${GROUPS_[@]}"; do
    i=$((i + 1))
    left=$(( BUDGET - $(elapsed) - 15 ))
    cap=${GROUP_CAP:-$left}
    [ "$cap" -gt "$left" ] && cap=$left
    if [ "$cap" -lt 30 ]; then
        note "group $i ($g) not run: $left s left"
        continue
    fi
    if [ "$g" = all ]; then names=(--all); else IFS=, read -r -a names <<<"$g"; fi
    s=$(date +%s)
    # shellcheck disable=SC2086  # ARGS is a list of options
    timeout -k 10 "$cap" python3 -m audit mutate "${names[@]}" $ARGS >"$LOGS/mutate-$i.log" 2>&1
    note "group $i ($g): mutate rc=$? in $(( $(date +%s) - s )) s (cap $cap s; 0 all caught or equivalent, 1 survivors, 2 environment, 124 cut off)"
    grep -v '^ *[0-9.]*s  \(verify\|memcheck\|racecheck\)  ' "$LOGS/mutate-$i.log" | tail -n 40 >>"$SUMMARY"
done

if [ $TEST -eq 1 ]; then
    left=$(( BUDGET - $(elapsed) - 15 ))
    timeout -k 10 "$left" python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_mutate_gpu.py >"$LOGS/pytest-mutate.log" 2>&1
    note "pytest tests/gpu/test_mutate_gpu.py rc=$? at $(elapsed) s"
    tail -n 30 "$LOGS/pytest-mutate.log" >>"$SUMMARY"
fi

tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
[ -d reports/mutation ] && tar czf "$OUT/mutation.tgz" reports/mutation 2>/dev/null
[ -d reports/evidence ] && tar czf "$OUT/evidence.tgz" reports/evidence 2>/dev/null
note "done at $(elapsed) s"
