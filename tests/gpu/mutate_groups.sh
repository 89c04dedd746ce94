#!/usr/bin/env bash
# Mutation groups one after another on the device machine, each resumed from the journals of earlier calls, in one
# call (the form the issue-18 sets of 5 December ran in; tests/gpu/run_mutate.sh is the older, fuller driver).
#
#   MGROUPS="k1;k2 k3" END=545 timeout 590 bash tests/gpu/mutate_groups.sh        (carry [".whl", ".carry"])
#
# MGROUPS : groups separated by ";", each one `wireup mutate` invocation of its kernel names (one journal per group)
#           and options; a group starting "@N " runs at most N seconds (the rest go to the groups after it)
# END     : the second (from the start) by which the last group must stop; keep it 30 s or more under the
#           outer `timeout`, so the journals are packed before the call ends
# MARGS   : the options of every group (default --jobs 8 --workers 4 --timeout 5), before the group's own
# SHIP=1  : on an H200 only (SHIPON, an extended regular expression of GPU names, widens it), first `STEPS=$SHIPSTEPS tests/gpu/issue18_ship.sh` (issue 18's timing; SHIPSTEPS
#           default DR, capped at SHIPCAP seconds, default 240), into $OUT/ship.tgz
# Carried: .whl/ (the PyCUDA wheels of ../shared/device), .carry/cache*.txz (build-cache folders of mutant cubins
# made with `wireup mutate --build-only`), .carry/builds*.txz (`--build-only --archive`: only the selection's entries and
# static findings), .carry/j_*.tgz (journals of earlier calls, as returned in journal.tgz: their lines are merged).
# Into $OUT: env.txt (device, versions, each group's exit code), mutN.log, journal.tgz (the journals, the
# records in reports/mutation and the logs, also every 20 s while the groups run).
set -u
O=${OUT:-$PWD/device-out}
mkdir -p "$O"
SECONDS=0
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "gpu: $GPU" >"$O/env.txt"
# the carried builds first: the shipped chain's verification (SHIP) takes its cubins from them too
for c in .carry/cache*.txz; do [ -f "$c" ] && tar -xJf "$c"; done
# archives of `wireup mutate --build-only --archive`: named relative to the build cache folder
for b in .carry/builds*.txz; do [ -f "$b" ] && mkdir -p .wireup-cache && tar -xJf "$b" -C .wireup-cache; done
if echo "$GPU" | grep -Eq "${SHIPON:-H200}" && [ -n "${SHIP:-}" ]; then
    OUT=$O/ship STEPS=${SHIPSTEPS:-DR} timeout "${SHIPCAP:-240}" bash tests/gpu/issue18_ship.sh >"$O/ship.log" 2>&1
    echo "ship rc=$? at $SECONDS s" >>"$O/env.txt"
    tar czf "$O/ship.tgz" -C "$O" ship && rm -rf "$O/ship"
fi
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
# journals of earlier calls: a journal file (*.jsonl, append-only) is the union of its lines over every
# carried journal, in order, each line once (two calls that resumed from one journal each add their own
# lines: the later file alone would lose the other's); any other file (a record) is the last journal's
for j in .carry/j_*.tgz; do
    [ -f "$j" ] || continue
    t=$(mktemp -d)
    tar xzf "$j" -C "$t"
    while IFS= read -r f; do
        mkdir -p "$(dirname "$f")"
        if [[ $f == *.jsonl && -f $f ]]; then
            cat "$f" "$t/$f" | awk '!seen[$0]++' >"$f.union" && mv -f "$f.union" "$f"
        else
            cp -f "$t/$f" "$f"
        fi
    done < <(cd "$t" && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
    rm -rf "$t"
done
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c 'import cupy, pycuda; print("cupy", cupy.__version__, "pycuda", pycuda.VERSION_TEXT)'
    echo "setup $SECONDS s"
    wc -l .wireup-cache/mutate-journal/* 2>/dev/null
} >>"$O/env.txt" 2>&1
pack() {
    tar czf "$O/j.part" .wireup-cache/mutate-journal reports/mutation -C "$O" $(cd "$O" && ls mut*.log 2>/dev/null) 2>/dev/null
    mv -f "$O/j.part" "$O/journal.tgz"
}
# the snapshot loop ends with its sleep (a sleep left behind would hold the call's output open for 20 s)
( trap 'kill $! 2>/dev/null; exit 0' TERM; while :; do sleep 20 & wait $!; pack; done ) &
SNAP=$!
i=0
IFS=';' read -r -a GS <<<"${MGROUPS:?MGROUPS names the groups}"
for g in "${GS[@]}"; do
    i=$((i + 1))
    left=$((${END:-545} - SECONDS))
    [ "$left" -lt 20 ] && break
    if [[ $g =~ ^[[:space:]]*@([0-9]+)[[:space:]]+(.*)$ ]]; then
        g=${BASH_REMATCH[2]}
        [ "${BASH_REMATCH[1]}" -lt "$left" ] && left=${BASH_REMATCH[1]}
    fi
    # shellcheck disable=SC2086  # a group and MARGS are lists of words
    # MARGS first: a group's own options come after, so where both give one (--sanitizer-workers) the group's wins
    timeout "$left" python3 -m audit mutate ${MARGS:---jobs 8 --workers 4 --timeout 5} $g >"$O/mut$i.log" 2>&1
    echo "group $i ($g): mutate rc=$? at $SECONDS s" >>"$O/env.txt"
done
kill "$SNAP" 2>/dev/null
pack
