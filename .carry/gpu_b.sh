#!/usr/bin/env bash
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
echo "== wgrad split $(date -u)"
timeout 150 python3 benchmarks/gpu_wgrad_split.py --splits 16,32,64,128 --sizes 37,256,4096,4103,65536 > $OUT/wgrad_split.log 2>&1; echo "rc=$? at $(( $(date +%s) - t0 )) s"
tail -12 $OUT/wgrad_split.log
echo "== gpu tests"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_verify_gpu.py -k "memcheck" 2>&1 | tail -5; echo "at $(( $(date +%s) - t0 )) s"
echo "== chain vs torch $(date -u)"
timeout 330 python3 benchmarks/gpu_chain_vs_torch.py --no-autotune --replays 50 > $OUT/chain.log 2>&1; echo "rc=$? at $(( $(date +%s) - t0 )) s"
tail -45 $OUT/chain.log
