#!/usr/bin/env bash
# Where one kernel's verification spends its seconds on the GPU host, and what sharing the GPU costs it:
#   1. `wireup verify --kernel $KERNEL` alone (backend $BACKEND, default pycuda, as `wireup mutate` picks it
#      where PyCUDA is installed) under cProfile: the top functions by cumulative and own time
#   2. $N copies of the same command side by side (as `wireup mutate --workers $N` runs verifications on
#      one GPU): each copy's wall seconds and peak host memory
# GPU memory and utilisation are sampled every 0.5 s throughout (gpu.csv).
#   KERNEL=aux_trade_outcome_backward N=4 timeout 300 bash tests/gpu/profile_verify.sh      (carry [".whl"])
# Into $OUT: summary.txt, alone.prof / alone_prof.txt, alone.json, copyI.log / copyI.json, gpu.csv.
set -u
. "$(dirname "$0")/device_prelude.sh"
K=${KERNEL:?KERNEL names the kernel}
N=${N:-4}
BE=${BACKEND:-pycuda}
note "env: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); N=$N backend=$BE kernel=$K"
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -lms 500 >"$OUT/gpu.csv" 2>/dev/null &
SMI=$!
# wall seconds and the child's peak resident memory (kB) of one command
measure() {
    python3 - "$@" <<'EOF'
import resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[1:]).returncode
wall = time.perf_counter() - t
print(f"rc={rc} wall={wall:.1f}s maxrss={resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20:.2f}GiB", file=sys.stderr)
EOF
}
VERIFY=(-m audit verify --kernel "$K" --backend "$BE" --no-evidence --format json)
measure python3 -m cProfile -o "$OUT/alone.prof" "${VERIFY[@]}" --output "$OUT/alone.json" >"$OUT/alone.log" 2>&1
note "alone: $(tail -n 1 "$OUT/alone.log")"
python3 - "$OUT/alone.prof" >"$OUT/alone_prof.txt" 2>&1 <<'EOF'
import pstats, sys
p = pstats.Stats(sys.argv[1])
p.sort_stats("cumulative").print_stats(45)
p.sort_stats("tottime").print_stats(30)
EOF
PIDS=()
for i in $(seq 1 "$N"); do
    measure python3 "${VERIFY[@]}" --output "$OUT/copy$i.json" >"$OUT/copy$i.log" 2>&1 &
    PIDS+=($!)
done
wait "${PIDS[@]}"
for i in $(seq 1 "$N"); do note "copy $i of $N: $(tail -n 1 "$OUT/copy$i.log")"; done
kill "$SMI" 2>/dev/null
note "peak GPU memory used: $(cut -d, -f2 "$OUT/gpu.csv" | sort -n | tail -n 1)"
