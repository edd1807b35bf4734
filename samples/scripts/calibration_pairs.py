"""The calibration pairs of issue 25: one table for the recording scripts, the runner and the manifest.

Each pair is one planted cause recorded twice in the same call on the same GPU, once as planted and once
with the fix applied (`healthy` is recorded twice unchanged: the noise floor). `root_cause` is a short,
stable kind id that the tests of the root-cause rules compare against; `planted` says what the code does
and where, `fix` which API the fixed twin changes. `queue` is where run_calibration.sh records the pair:
0 or 1 (one GPU, the two parallel single-process queues) or "both" (a 2-rank pair, after the queues).

No torch import here: `python3 calibration_pairs.py queue 0` prints the queue's pairs for the shell runner.
"""
import sys

VARIANTS = ("planted", "fixed")

PAIRS = {
    # ---------------------------------------------------------------- queue 0 (GPU 0)
    "recompile": {
        "script": "calibration.py", "queue": 0, "root_cause": "recompilation",
        "planted": "A small token MLP under torch.compile(dynamic=False) is fed a new sequence length every step "
                   "(recompile_limit raised to 64), so Dynamo and Inductor recompile inside every profiled step "
                   "(with_stack=False for this pair: the Python tracer would record every Dynamo/Inductor call, "
                   "about 23 MB gzipped per recompile).",
        "fix": "torch.compile(model, dynamic=True): one graph with a symbolic sequence length, compiled during "
               "warm-up; the same lengths run without recompiling.",
    },
    "empty_cache": {
        "script": "calibration.py", "queue": 0, "root_cause": "allocator_churn",
        "planted": "A TF32 residual MLP (6 x Linear 2048 + LayerNorm + GELU, batch 1024, AdamW) calls "
                   "torch.cuda.empty_cache() at the end of every training step, so the caching allocator "
                   "returns its blocks (cudaFree) and the next step cudaMallocs them again.",
        "fix": "The torch.cuda.empty_cache() call is removed from the loop.",
    },
    "tf32_off": {
        "script": "calibration.py", "queue": 0, "root_cause": "tf32_disabled",
        "planted": "A GEMM-heavy fp32 MLP (4 x Linear 4096x4096 + ReLU, batch 2048, AdamW) with "
                   "torch.backends.cuda.matmul.allow_tf32 = False and torch.backends.cudnn.allow_tf32 = False: "
                   "full-precision fp32 GEMMs without tensor cores.",
        "fix": "torch.backends.cuda.matmul.allow_tf32 = True and torch.backends.cudnn.allow_tf32 = True.",
    },
    "launch_bound_graph": {
        "script": "calibration.py", "queue": 0, "root_cause": "launch_bound",
        "planted": "A deep narrow residual MLP (24 blocks of Linear 64x64 + hand-written SiLU, batch 16, SGD "
                   "foreach=False) run eagerly: ~450 kernels of a few microseconds per step, each launched by "
                   "the host one by one (bottleneck.py's tiny_kernels case, fewer blocks).",
        "fix": "The same step (forward, backward, SGD) captured once in a torch.cuda.CUDAGraph and replayed: "
               "one cudaGraphLaunch per step launches all its kernels.",
    },
    "unfused_optimizer": {
        "script": "calibration.py", "queue": 0, "root_cause": "unfused_optimizer",
        "planted": "torch.optim.AdamW(params, foreach=False) over an MLP of 50 Linear 512x512 layers "
                   "(102 parameter tensors, batch 64): the single-tensor AdamW launches ~9 small kernels per "
                   "parameter, one parameter at a time, so Optimizer.step dominates the step.",
        "fix": "torch.optim.AdamW(params, fused=True): one multi-tensor fused kernel per parameter group chunk.",
    },
    "item_sync": {
        "script": "calibration.py", "queue": 0, "root_cause": "host_device_sync",
        "planted": "After each step of a GPU-bound TF32 MLP (8 x Linear 8192, batch 256, AdamW) the loop logs "
                   "loss.item() and appends every sample's loss to a history with v.item(): 257 host-device "
                   "syncs per step (bottleneck.py's item_sync case).",
        "fix": "The per-sample losses stay on the device (history.append(per_sample.detach())) and loss.item() "
               "is read once every 50 steps (never inside the profiled window).",
    },
    "tolist_print": {
        "script": "calibration.py", "queue": 0, "root_cause": "host_device_sync",
        "planted": "Every step prints the loss, the accuracy and each sample's prediction and confidence: "
                   "loss.cpu().item(), preds.tolist(), conf.tolist() and a print() of 2048 numbers after the "
                   "optimizer step of a TF32 MLP (6 x Linear 4096, batch 1024).",
        "fix": "The metrics are accumulated on the device (a running tensor) and printed once every 50 steps "
               "(never inside the profiled window).",
    },
    # ---------------------------------------------------------------- queue 1 (GPU 1)
    "healthy": {
        "script": "calibration.py", "queue": 1, "root_cause": "none", "variants": ("run1", "run2"),
        "planted": "No planted cause: a GPU-bound bf16 TransformerEncoder (2 layers, d_model 1024, 8 heads, batch "
                   "64 x 512 tokens, AdamW, tokens resident on the device, no host reads; record_function forward/"
                   "backward/optimizer) recorded twice (the noise floor).",
        "fix": "Nothing to fix: run2 repeats run1 unchanged.",
    },
    "cpu_tensor_creation": {
        "script": "calibration.py", "queue": 1, "root_cause": "cpu_tensor_creation",
        "planted": "Every step makes a 2048x4096 noise tensor on the CPU, torch.randn(x.shape) (aten::normal_ "
                   "on the host, under record_function 'make_noise'), and copies it to the GPU (pinned, "
                   "non_blocking) for a small MLP (bottleneck.py's cpu_tensor_creation case).",
        "fix": "torch.randn(x.shape, device=x.device): the noise is made on the GPU.",
    },
    "host_augment": {
        "script": "calibration.py", "queue": 1, "root_cause": "host_augmentation",
        "planted": "The main thread augments each uint8 batch (128 x 3 x 256 x 256) with torch CPU ops before "
                   "the copy: random crop, bilinear resize to 112, per-sample flip, brightness/contrast jitter, "
                   "normalise (function augment(), under record_function 'augment'); a small CNN "
                   "(conv-BN-ReLU, widths 16-32-64-128, ~14 ms of GPU work a step) trains on it.",
        "fix": "The uint8 batch is copied to the GPU first (pinned, non_blocking) and the same augment() runs "
               "there on the device.",
    },
    "dataloader_workers": {
        "script": "calibration.py", "queue": 1, "root_cause": "dataloader_wait",
        "planted": "DataLoader(num_workers=0, pin_memory=False) whose Dataset does a per-sample numpy transform "
                   "(nearest resize 128->96, a 3x3 box blur, normalise; ~1 ms a sample) on the main thread for "
                   "a conv net (conv-BN-ReLU, widths 128-256-512-1024, batch 32).",
        "fix": "DataLoader(num_workers=8, pin_memory=True, persistent_workers=True), the same Dataset and "
               "transform.",
    },
    "pageable_copy": {
        "script": "calibration.py", "queue": 1, "root_cause": "copy_bound",
        "planted": "A 64x3x384x384 float32 batch (113 MB) in pageable host memory is copied with "
                   ".to(device, non_blocking=False) every step for a cheap pooled CNN: the copy is most of the "
                   "step (bottleneck.py's pageable_h2d case).",
        "fix": "The batches are pinned (pin_memory()) and copied with non_blocking=True on a side stream one step "
               "ahead (prefetch), overlapping the previous step's compute.",
    },
    "checkpointing": {
        "script": "calibration.py", "queue": 1, "root_cause": "activation_checkpointing",
        "planted": "Each of the 3 MLP blocks (LayerNorm, Linear 2048->8192, GELU, Linear 8192->2048; bf16 "
                   "autocast, 8 x 1024 tokens, AdamW) runs under torch.utils.checkpoint.checkpoint("
                   "use_reentrant=False) although the model fits without it: the forward is recomputed in "
                   "the backward.",
        "fix": "No checkpointing: the blocks are called directly and keep their activations.",
    },
    "cudnn_autotune_shapes": {
        "script": "calibration.py", "queue": 1, "root_cause": "cudnn_autotune_churn",
        "planted": "A conv net (conv-BN-ReLU, widths 32-64-128-256, batch 32, SGD) with "
                   "torch.backends.cudnn.benchmark = True is fed a new image size every step (96, 98, 100, ... "
                   "px: variable-resolution batches), so cuDNN autotunes every convolution again inside each step.",
        "fix": "torch.backends.cudnn.benchmark = False: the same sizes run with cuDNN's heuristic algorithm "
               "choice, no autotuning.",
    },
    # ---------------------------------------------------------------- 2 ranks (both GPUs)
    "straggler_host": {
        "script": "calibration_dist.py", "queue": "both", "root_cause": "straggler_host", "straggler_rank": 1,
        "planted": "2-rank DistributedDataParallel (TF32 residual MLP, 2 x Linear 7168, batch 1024, AdamW, NCCL); "
                   "rank 1 alone calls "
                   "slow_metric_logging() at the start of every step, ~30 ms of pure-Python work, so rank 0 "
                   "waits for it in the gradient all-reduce.",
        "fix": "No rank calls slow_metric_logging().",
    },
    "pipeline_bubble": {
        "script": "calibration_dist.py", "queue": "both", "root_cause": "pipeline_bubble",
        "planted": "A 2-stage GPipe schedule over NCCL P2P (dist.isend/irecv of activations and their "
                   "gradients; d_model 4096, TF32; stage 0: embedding + 2 MLP blocks, stage 1: 2 MLP blocks + "
                   "output projection + loss; re-recorded with this size on 2026-11-27: at d_model 1536 the "
                   "fixed twin was host-bound) "
                   "with the global batch of 32 x 256 tokens in 2 micro-batches: each stage idles for a third "
                   "of the step (record_function forward_mb<i> / backward_mb<i>).",
        "fix": "The same global batch in 8 micro-batches of 4 sequences: the bubble shrinks to a ninth.",
    },
    "grad_accum_allreduce": {
        "script": "calibration_dist.py", "queue": "both", "root_cause": "grad_accum_allreduce",
        "planted": "2-rank DistributedDataParallel with gradient accumulation over 4 micro-batches (TF32 "
                   "residual MLP, 12 x Linear 8192, micro-batch 256, AdamW, NCCL; record_function "
                   "micro_batch<i>): every micro-batch's backward all-reduces the full gradients (805M "
                   "parameters, 3.2 GB).",
        "fix": "The first 3 micro-batches run under ddp.no_sync(): one gradient all-reduce per step, in the "
               "last micro-batch's backward.",
    },
}


def variants(pair):
    """The two recorded variants of a pair, in recording order."""
    return PAIRS[pair].get("variants", VARIANTS)


def main(argv):
    if len(argv) == 2 and argv[0] == "queue":
        want = argv[1]
        for pair, spec in PAIRS.items():
            if str(spec["queue"]) == want:
                print(pair, spec["script"], *variants(pair))
        return 0
    print("usage: calibration_pairs.py queue 0|1|both", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
