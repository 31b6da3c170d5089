#!/usr/bin/env bash
# The first GPU window (2026-11-26): one command, <= ~9 min. Every stage has its own timeout; all output in $OUT.
set -u
start=$(date +%s); BUDGET=${BUDGET_S:-540}; DEV=${DEV:-cuda}
left() { echo $(( BUDGET - ($(date +%s) - start) )); }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; log=$OUT/gpu.txt
stage() { echo "== t=$(( $(date +%s) - start )) s: $*" | tee -a "$log"; }
if [ "$DEV" = cuda ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
stage "machine"
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; nproc; free -g | head -2; df -h /tmp | tail -1
  python3 -c "import torch, gymnasium, ale_py, dqn_course; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.is_available() and torch.cuda.get_device_name(), 'gymnasium', gymnasium.__version__, 'ale_py', ale_py.__version__)"
  python3 -c "import tensordict; print('tensordict', tensordict.__version__)"; } >> "$log" 2>&1
stage "CUDA tests (graph == eager, allocation plan, stopping)"
timeout 100 python3 -m pytest -q -p no:cacheprovider -rs tests/test_learner.py tests/test_allocation.py tests/test_stopping.py tests/test_input_validation.py -k cuda >> "$log" 2>&1; echo "rc=$?" >> "$log"
stage "smoke: quick preset, plain loop"
timeout 70 python3 -m dqn_course.train --preset quick --device $DEV --out-dir /tmp/smoke-plain --progress false >> "$log" 2>&1; echo "rc=$?" >> "$log"
stage "smoke: quick preset, fast path (8 C++ envs, replay on the device)"
timeout 70 python3 -m dqn_course.train --preset quick --device $DEV --num-envs 8 --env-backend ale --replay-on-device true --out-dir /tmp/smoke-fast --progress false >> "$log" 2>&1; echo "rc=$?" >> "$log"
stage "throughput: plain vs fast (8, 16 envs), same run"
timeout 170 python3 benchmarks/throughput.py --device $DEV --num-envs 8,16 ${BENCH_ARGS:---window 30000} --save "$OUT/throughput.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
stage "update capture: eager, own graph, CudaGraphModule, compile+CudaGraphModule"
timeout 110 python3 benchmarks/update_capture.py --device $DEV ${CAPTURE_ARGS:-} --save "$OUT/update-capture.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
burst=$(( $(left) - 10 ))
if [ "$burst" -gt 100 ]; then
  minutes=$(python3 -c "print(round(($burst - 75) / 60, 2))")
  stage "burst: breakout-fast, --time-limit $minutes min (then evaluate, save, stop); hard stop at $burst s"
  timeout --signal=TERM --kill-after=15 "$burst" python3 -m dqn_course.train --preset breakout-fast --device $DEV \
    --out-dir /tmp/run --progress false --checkpoint-every 100000000 --time-limit "$minutes" ${TRAIN_ARGS:-} > "$OUT/stdout.txt" 2>&1
  echo "burst rc=$?" >> "$log"
  for f in log.csv eval.csv checkpoint.pt; do [ -f "/tmp/run/$f" ] && cp "/tmp/run/$f" "$OUT/"; done
  ls -la /tmp/run >> "$log" 2>&1; tail -5 "$OUT/stdout.txt" | tee -a "$log"
fi
stage "end"; ls -la "$OUT" | tee -a "$log"
