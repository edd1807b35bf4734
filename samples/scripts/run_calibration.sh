#!/usr/bin/env bash
# Record the calibration pairs of issue 25 into DEST/<pair>/<variant>/ (planted, fixed; healthy: run1, run2),
# then write DEST/MANIFEST.json (calibration_manifest.py). The pairs and what they plant and fix are in
# calibration_pairs.py. Needs 2 GPUs: the single-process pairs run as two parallel queues, one per GPU
# (CUDA_VISIBLE_DEVICES=0 / 1, each pinned to half of the CPU cores with taskset), the two twins of a pair
# back to back on the same GPU; then the 2-rank pairs on both GPUs. Each run's output goes to
# DEST/logs/<pair>.<variant>.log. A failing run does not stop the others; a run is killed after RUN_TIMEOUT
# seconds (default 150) and no run starts after DEADLINE seconds from the start (default 420), so the whole
# call stays under 8 minutes. A run whose folder already holds a trace is skipped (delete it to redo it).
# Usage: bash samples/scripts/run_calibration.sh DEST
#        SMOKE=1 PYTHON=/path/to/python bash samples/scripts/run_calibration.sh DEST  # CPU dry run (--tiny, gloo)
#        ONLY="recompile healthy" bash samples/scripts/run_calibration.sh DEST   # just these pairs
#        ONLY=host_augment GPU1=0 bash samples/scripts/run_calibration.sh DEST  # queue 1's pairs on a 1-GPU host
set -u
DEST=${1:?usage: run_calibration.sh DEST}
HERE=$(cd "$(dirname "$0")" && pwd)
HERE=$(realpath --relative-to="$PWD" "$HERE" 2>/dev/null || echo "$HERE")  # commands as run from here
# NVLink multicast off (shared machines).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
RUN_TIMEOUT=${RUN_TIMEOUT:-150}
DEADLINE=${DEADLINE:-420}
mkdir -p "$DEST/logs"
SECONDS=0

if [ "${SMOKE:-0}" = 1 ]; then
  DRY=(--device cpu --tiny)
  Q0=(); Q1=(); BOTH=()
else
  DRY=()
  NCPU=$(nproc)
  HALF=$((NCPU / 2))
  if command -v taskset >/dev/null && [ "$NCPU" -ge 4 ]; then
    PIN0=(taskset -c "0-$((HALF - 1))"); PIN1=(taskset -c "$HALF-$((NCPU - 1))")
  else
    PIN0=(); PIN1=()
  fi
  Q0=(env CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=$HALF "${PIN0[@]}")
  Q1=(env CUDA_VISIBLE_DEVICES="${GPU1:-1}" OMP_NUM_THREADS=$HALF "${PIN1[@]}")
  BOTH=(env CUDA_VISIBLE_DEVICES=0,1)
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1 | tee "$DEST/logs/nvidia-smi.txt"
fi

run() {  # run QUEUE PAIR VARIANT CMD...: one recording, its log, its line in DEST/logs/timings.QUEUE.tsv
  local queue=$1 pair=$2 variant=$3; shift 3
  local out="$DEST/$pair/$variant" log="$DEST/logs/$pair.$variant.log" tsv="$DEST/logs/timings.$queue.tsv"
  if ls "$out"/*.pt.trace.json* >/dev/null 2>&1; then
    echo "[$queue] $pair/$variant: SKIPPED, $out already holds a trace"
    printf '%s\t%s\t%s\tskipped (exists)\t0\t%s\n' "$pair" "$variant" "$queue" "$*" >> "$tsv"
    return
  fi
  local left=$((DEADLINE - SECONDS))
  if [ "$left" -lt 15 ]; then
    echo "[$queue] $pair/$variant: NOT RUN, past the ${DEADLINE}s deadline"
    printf '%s\t%s\t%s\tnot run (deadline)\t0\t%s\n' "$pair" "$variant" "$queue" "$*" >> "$tsv"
    return
  fi
  local limit=$(( left < RUN_TIMEOUT ? left : RUN_TIMEOUT ))
  mkdir -p "$out"
  local t0 rc status=ok
  t0=$(date +%s%N)
  timeout -k 10 "$limit" "$@" --logdir "$out" > "$log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status="failed (rc $rc$( [ $rc -eq 124 ] && echo ", timed out after ${limit}s"))"
  local tenths=$(( ($(date +%s%N) - t0) / 100000000 ))
  local secs="$((tenths / 10)).$((tenths % 10))"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$pair" "$variant" "$queue" "$status" "$secs" "$* --logdir $out" >> "$tsv"
  echo "[$queue] $pair/$variant: $status, ${secs}s (at ${SECONDS}s)"
  if [ "$status" != ok ]; then
    tail -n 15 "$log" | sed "s/^/[$queue]   | /"
  fi
}

queue() {  # queue NAME ENV...: every pair of calibration_pairs.py's queue NAME, twins back to back
  local name=$1; shift
  local pair script v1 v2
  while read -r pair script v1 v2; do
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $pair "* ]]; then
      continue
    fi
    for v in "$v1" "$v2"; do
      run "$name" "$pair" "$v" "$@" "$PY" "$HERE/$script" --case "$pair" --variant "$v" "${DRY[@]}"
    done
  done < <("$PY" "$HERE/calibration_pairs.py" queue "$name")
}

: > "$DEST/logs/timings.0.tsv"; : > "$DEST/logs/timings.1.tsv"; : > "$DEST/logs/timings.both.tsv"
echo "=== single-process pairs: two queues in parallel (GPU 0, GPU 1)"
queue 0 "${Q0[@]}" &
queue 1 "${Q1[@]}" &
wait
echo "=== 2-rank pairs on both GPUs (at ${SECONDS}s)"
queue both "${BOTH[@]}"

"$PY" "$HERE/calibration_manifest.py" "$DEST" --elapsed "$SECONDS"
echo "=== per-run seconds:"
cat "$DEST"/logs/timings.*.tsv | awk -F'\t' '{printf "  %-22s %-8s gpu %-5s %7ss  %s\n", $1, $2, $3, $5, $4}'
echo "=== trace files:"
find "$DEST" -name '*.pt.trace.json*' -printf '%s\t%P\n' | sort -k2 | awk -F'\t' '{t += $1; printf "  %8.3f MB  %s\n", $1 / 1e6, $2} END {printf "  %8.3f MB  total\n", t / 1e6}'
echo "=== all runs took ${SECONDS}s"
