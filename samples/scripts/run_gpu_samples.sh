#!/usr/bin/env bash
# Produce the GPU sample runs (everything except cpu_only) into DEST (default: samples/).
# Needs 2 GPUs for ddp_resnet. One failing script does not stop the others.
# Usage: bash samples/scripts/run_gpu_samples.sh [DEST]
set -u
DEST=${1:-samples}
HERE=$(cd "$(dirname "$0")" && pwd)
# NVLink multicast off (shared machines).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
mkdir -p "$DEST"
$PY -c 'import torch,torchvision;print(torch.__version__, torchvision.__version__, torch.cuda.get_device_name(), torch.version.cuda, torch.cuda.device_count())'
for name in resnet_slow_dataloader transformer_bf16 ddp_resnet mlp_compiled lightning_mlp; do
  echo "=== $name ($(date -u +%T))"
  SECONDS=0
  $PY "$HERE/$name.py" --logdir "$DEST/$name" || echo "FAILED $name"
  echo "=== $name took ${SECONDS}s"
done
