#!/usr/bin/env bash
# Record the planted-bottleneck corpus (issue 11) plus the runs issues 18 and 19 need, each into
# DEST/<run>, then write DEST/MANIFEST.json (run -> planted cause -> description, timings, files).
# Needs 2 GPUs (fsdp_comm, pp_two_groups); single-GPU runs use GPU 0. One failing or hanging run
# (killed after RUN_TIMEOUT seconds, default 180) does not stop the others. A run whose folder
# already holds traces is skipped (delete it to record again). Whole call: a few minutes.
# Usage: bash samples/scripts/run_corpus.sh DEST
#        SMOKE=1 bash samples/scripts/run_corpus.sh DEST   # CPU dry run: --device cpu, tiny sizes, gloo
#        ONLY="item_sync" bash samples/scripts/run_corpus.sh DEST   # record only these runs (space-separated)
set -u
DEST=${1:?usage: run_corpus.sh DEST}
HERE=$(cd "$(dirname "$0")" && pwd)
# NVLink multicast off (shared machines).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
mkdir -p "$DEST"
TIMINGS="$DEST/.corpus_timings.tsv"
: > "$TIMINGS"

if [ "${SMOKE:-0}" = 1 ]; then
  ONE=(--device cpu --tiny)                       # bottleneck.py cases
  TWO=(--backend gloo --device cpu --tiny)        # fsdp_comm, pp_two_groups
  TRF=(--device cpu --d-model 128 --layers 2 --seq-len 32)
  GPU0=()
else
  ONE=(); TWO=(); TRF=()
  GPU0=(env CUDA_VISIBLE_DEVICES=0)
  $PY -c 'import torch;print(torch.__version__, torch.version.cuda, torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])'
fi

run() {  # run NAME CMD...
  local name=$1; shift
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
    return
  fi
  if ls "$DEST/$name"/*.pt.trace.json* >/dev/null 2>&1; then
    echo "=== $name: SKIPPED, $DEST/$name already holds traces"
    printf '%s\tskipped (exists)\t0\t%s\n' "$name" "$*" >> "$TIMINGS"
    return
  fi
  echo "=== $name ($(date -u +%T)): $*"
  local t0=$(date +%s%N) status=ok rc
  timeout -k 10 "$RUN_TIMEOUT" "$@"
  rc=$?
  [ $rc -eq 0 ] || status="failed (rc $rc$( [ $rc -eq 124 ] && echo ', timed out'))"
  local tenths=$(( ($(date +%s%N) - t0) / 100000000 ))
  local secs="$((tenths / 10)).$((tenths % 10))"
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$secs" "$*" >> "$TIMINGS"
  echo "=== $name: $status, took ${secs}s"
}

SECONDS=0
for c in input_workers_heavy cpu_tensor_creation tiny_kernels item_sync pageable_h2d cuda_graph; do
  run "$c" "${GPU0[@]}" $PY "$HERE/bottleneck.py" --case "$c" --logdir "$DEST/$c" "${ONE[@]}"
done
run fsdp_comm $PY "$HERE/fsdp_comm.py" --logdir "$DEST/fsdp_comm" "${TWO[@]}"
run pp_two_groups $PY "$HERE/pp_two_groups.py" --logdir "$DEST/pp_two_groups" "${TWO[@]}"
run gloo_8proc_cpu $PY "$HERE/gloo_8proc_cpu.py" --logdir "$DEST/gloo_8proc_cpu"
run transformer_bf16_exports "${GPU0[@]}" $PY "$HERE/transformer_bf16.py" --logdir "$DEST/transformer_bf16_exports" \
  --active 2 --export-extras "$DEST/exports/transformer_bf16_exports" "${TRF[@]}"

$PY "$HERE/corpus_manifest.py" "$DEST"
echo "=== per-run seconds:"
awk -F'\t' '{printf "  %-26s %8ss  %s\n", $1, $3, $2}' "$TIMINGS"
echo "=== all runs took ${SECONDS}s"
