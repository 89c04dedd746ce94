#!/usr/bin/env bash
# Mutation testing (and, first, the GPU verification that writes evidence) on the device machine, in one
# call that fits its 10-minute limit. Run from the repository root with .whl/ (the PyCUDA wheels of
# ../shared/device) and .wireup-cache/ (cubins built on the CPU machine) carried along.
#
#   tests/gpu/run_mutate.sh [--verify] [--test] GROUP[+--OPTION=VALUE...] [GROUP ...]
#
# --verify : first `wireup verify` of every kernel and schedule with PyCUDA and CuPy (writes the evidence
#            records; JSON with the timing breakdown into $OUT/verify.json)
# --test   : then the GPU pytest of mutation testing (tests/gpu/test_mutate_gpu.py)
# GROUP    : comma-separated kernel names mutated by one `wireup mutate` invocation ("all" for --all);
#            each invocation writes reports/mutation/<kernel>.json for its kernels when it ends, so a
#            group cut off by its cap records nothing, but its finished verifications are in its journal
#            (.wireup-cache/mutate-journal, returned as $OUT/journal.tgz: unpack it into the checkout and
#            carry .wireup-cache, and the next call resumes the group); options after "+" are that group's own
#            (aux_weight_grad_reduce+--sanitizers=memcheck)
#
# Settings: VERIFY_ARGS (e.g. --kernel K --schedule S: verify only those), MUTATE_ARGS (default: --max-mutants 30 --jobs $(nproc) --workers 4 --timeout 5), BUDGET (the
# seconds the whole script may take, default 570), GROUP_CAP (the most one group may take, default the
# rest of the budget), PARALLEL=1 (verify and every group start at once, each under its cap, instead of one
# after another; each group pinned with taskset to its share of the cores, so its default worker and
# sanitizer counts follow that share). .carry/cache.txz, where carried, is unpacked first: the build cache with every mutant
# compiled on the CPU machine (`wireup mutate --all --max-mutants 30 --build-only`, then
# `tar -cJf .carry/cache.txz .wireup-cache`), so the GPU machine only verifies. Into $OUT (default ./device-out): summary.txt, verify.json, logs.tgz (every log),
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
if [ -f .carry/cache.txz ]; then
    tar -xJf .carry/cache.txz || note "unpacking .carry/cache.txz failed"
fi
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

run_verify() {
    # shellcheck disable=SC2086  # VERIFY_ARGS is a list of options (--kernel K --schedule S to verify some)
    timeout -k 10 220 python3 -m audit verify --backend pycuda --backend cupy ${VERIFY_ARGS:-} --format json --output "$OUT/verify.json" >"$LOGS/verify.log" 2>&1
    note "verify rc=$? at $(elapsed) s"
    tail -n 30 "$LOGS/verify.log" >>"$SUMMARY"
}
PARALLEL=${PARALLEL:-0}
if [ $VERIFY -eq 1 ]; then
    if [ "$PARALLEL" = 1 ]; then run_verify & else run_verify; fi
fi

NCPU=$(nproc)
NGROUPS=${#GROUPS_[@]}
run_group() {  # index, group, cap
    local i=$1 g=$2 cap=$3 names extra s pin=()
    if [ "$PARALLEL" = 1 ] && [ "$NGROUPS" -gt 1 ] && command -v taskset >/dev/null; then
        local share=$(( NCPU / NGROUPS )) first
        [ "$share" -lt 1 ] && share=1
        first=$(( ((i - 1) * share) % NCPU ))
        pin=(taskset -c "$first-$(( first + share - 1 ))")
    fi
    IFS=+ read -r -a extra <<<"$g"
    g=${extra[0]}
    extra=("${extra[@]:1}")
    if [ "$g" = all ]; then names=(--all); else IFS=, read -r -a names <<<"$g"; fi
    s=$(date +%s)
    # shellcheck disable=SC2086  # ARGS is a list of options
    timeout -k 10 "$cap" "${pin[@]}" python3 -m audit mutate "${names[@]}" $ARGS "${extra[@]}" >"$LOGS/mutate-$i.log" 2>&1
    local rc=$?
    {
        echo "group $i ($2): mutate rc=$rc in $(( $(date +%s) - s )) s (cap $cap s; 0 all caught or equivalent, 1 survivors, 2 environment, 124 cut off)"
        grep -v '^ *[0-9.]*s  \(verify\|memcheck\|racecheck\)  ' "$LOGS/mutate-$i.log" | tail -n 40
    } >"$LOGS/group-$i.txt"
    [ "$PARALLEL" = 1 ] || cat "$LOGS/group-$i.txt" | tee -a "$SUMMARY"
}

# the journals as they grow, into $OUT every 30 s: a call stopped by the device's own limit (not this script's
# budget) still returns what its groups had finished (on 5 Dec a call ended at 391 s with nothing back)
# (5 Dec evening: a call ended by its outer timeout came back with the journals but no log, so why its two
# groups had verified nothing in ~470 s was never known: the logs go along now)
snapshot() {
    tar czf "$OUT/logs.tgz.part" -C "$LOGS" . 2>/dev/null && mv -f "$OUT/logs.tgz.part" "$OUT/logs.tgz"
    [ -d .wireup-cache/mutate-journal ] || return 0
    tar czf "$OUT/journal.tgz.part" .wireup-cache/mutate-journal 2>/dev/null && mv -f "$OUT/journal.tgz.part" "$OUT/journal.tgz"
}
( while sleep 30; do snapshot; done ) &
SNAPSHOTS=$!

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
    if [ "$PARALLEL" = 1 ]; then run_group "$i" "$g" "$cap" & else run_group "$i" "$g" "$cap"; fi
done
wait
if [ "$PARALLEL" = 1 ]; then
    for f in "$LOGS"/group-*.txt; do [ -f "$f" ] && cat "$f" >>"$SUMMARY"; done
fi

if [ $TEST -eq 1 ]; then
    left=$(( BUDGET - $(elapsed) - 15 ))
    timeout -k 10 "$left" python3 -m pytest -q -rs -p no:cacheprovider tests/gpu/test_mutate_gpu.py >"$LOGS/pytest-mutate.log" 2>&1
    note "pytest tests/gpu/test_mutate_gpu.py rc=$? at $(elapsed) s"
    tail -n 30 "$LOGS/pytest-mutate.log" >>"$SUMMARY"
fi

tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
[ -d reports/mutation ] && tar czf "$OUT/mutation.tgz" reports/mutation 2>/dev/null
[ -d reports/evidence ] && tar czf "$OUT/evidence.tgz" reports/evidence 2>/dev/null
# the journal of a group cut off by its cap: carry it back in .wireup-cache and the next call resumes it
kill "$SNAPSHOTS" 2>/dev/null
snapshot
note "done at $(elapsed) s"
