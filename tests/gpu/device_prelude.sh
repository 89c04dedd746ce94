# Sourced by the device scripts (device_session.sh, issue18_candidates.sh): $OUT and its summary.txt,
# note / elapsed, and the carried wheels of .whl/ (PyCUDA, nvidia-cutlass) installed into /tmp/site.
# Sets OUT, LOGS (a scratch folder), SUMMARY, t0, PYTHONPATH, PYTHONUNBUFFERED.
OUT=${OUT:-$PWD/device-out}
LOGS=$(mktemp -d)
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >"$LOGS/pip.log" 2>&1 \
    || note "pip install of .whl/ failed: $(tail -n 3 "$LOGS/pip.log")"
export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
