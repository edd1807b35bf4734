"""Write DEST/MANIFEST.json for the planted-bottleneck corpus recorded by run_corpus.sh.

Usage: python3 samples/scripts/corpus_manifest.py DEST
Reads DEST/.corpus_timings.tsv (run, status, seconds, command: written by run_corpus.sh) and maps
every run to its planted cause, a short description, the signals its trace should show, the
command that made it, how long it took, its trace files and their sizes. Runs not in the table
below are listed with cause "unknown".
"""
import datetime
import json
import os
import platform
import sys

# run -> (planted cause, short description, expected signals in the trace)
RUNS = {
    "input_workers_heavy": (
        "dataloader_wait",
        "DataLoader(num_workers=4, persistent_workers=True, pin_memory=True) with a heavy numpy transform "
        "(nearest resize 256->128 + four 3x3 box blurs per sample, batch 32); 4 workers still cannot keep up with a small CNN.",
        "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__ takes most of the step; GPU mostly idle; "
        "pinned, non_blocking HtoD copies (no pageable copies).",
    ),
    "cpu_tensor_creation": (
        "cpu_tensor_creation",
        "Every step makes a 2048x4096 noise tensor on the CPU (torch.randn(x.shape): aten::normal_ on the host) "
        "and copies it to the GPU for a small MLP; the fix is torch.randn(..., device=x.device). The tensor is "
        "pinned and copied non_blocking, so the copy is not a second cause.",
        "CPU aten::normal_ / aten::randn under record_function 'make_noise' dominates the step; one pinned "
        "HtoD copy of 33.5 MB per step (no pageable copy); GPU mostly idle.",
    ),
    "tiny_kernels": (
        "kernel_launch_bound",
        "Deep narrow residual MLP (40 blocks of Linear 64x64 + hand-written SiLU), batch 16, SGD foreach=False: "
        "~1000 tiny kernels per step.",
        "Thousands of kernels of a few microseconds; cudaLaunchKernel time ~ step time; large gaps between "
        "kernels, low GPU utilization, no memcpy or sync.",
    ),
    "item_sync": (
        "host_device_sync",
        "MLP (8 blocks of Linear 8192 + LayerNorm + GELU, batch 256, TF32 matmuls, AdamW) whose loop logs "
        "loss.item() and appends every sample's loss to a history with v.item(): 257 host-device syncs per step.",
        "257 aten::item / aten::_local_scalar_dense per step, each with a 4-byte DtoH memcpy and a "
        "cudaStreamSynchronize; the first waits for the step's queued kernels, the rest for their own copy; "
        "the GPU idles through the per-sample loop while the host reads one scalar at a time; the training "
        "kernels themselves use tensor cores and are longer than their launches.",
    ),
    "pageable_h2d": (
        "pageable_h2d_copy",
        "A 64x3x384x384 float32 batch (113 MB) in pageable host memory copied with .to(device, "
        "non_blocking=False) every step for a cheap pooled CNN.",
        "Memcpy HtoD (Pageable -> Device) of ~113 MB per step dominates GPU time; host blocked in the copy.",
    ),
    "cuda_graph": (
        "cpu_tensor_creation",
        "The whole training step (MLP 4096-2048-2048-10, batch 1024, forward + backward + SGD) captured once in "
        "a torch.cuda.CUDAGraph and replayed; each step's input is still made on the CPU (torch.randn, "
        "aten::normal_) and copied host-to-device into the graph's static input outside the graph.",
        "cudaGraphLaunch once per step with the graph's kernels; CPU aten::normal_ under record_function "
        "'make_input' dominates the step (its HtoD copy is pinned, non_blocking, 16.8 MB).",
    ),
    "fsdp_comm": (
        "communication_bound",
        "2-rank FSDP2 (fully_shard per block, NCCL): 4 blocks of Linear(8192, 8192) (268 MB each), batch 16, "
        "SGD; every block all-gathered in forward and backward and its gradients reduce-scattered.",
        "ncclDevKernel_AllGather / ReduceScatter kernels fill most of the step on both ranks; compute kernels "
        "tiny; FSDP::all_gather / FSDP::post_backward_reduce annotations; workers rank0 / rank1.",
    ),
    "pp_two_groups": (
        "straggler",
        "PP=2 (GPipe, 4 micro-batches) over NCCL P2P isend/irecv on the default group plus a second group "
        "dist.new_group([0, 1]) ('embedding_group') all-reducing the tied embedding's gradient; rank 1 sleeps "
        "10 ms every step.",
        "Two process groups over ranks [0, 1] in distributedInfo.pg_config; send/recv and allreduce "
        "record_param_comms; rank 0 waits in its first recv of each step (straggler: rank 1).",
    ),
    "gloo_8proc_cpu": (
        "straggler",
        "8 CPU processes over gloo, TP=4 x DP=2: tp_group_0/1 ([0-3], [4-7]) all-reduce activations, "
        "dp_group_0..3 ([0,4] [1,5] [2,6] [3,7]) all-reduce gradients; rank 5 sleeps 100 ms every step; "
        "activities=[CPU] only.",
        "distributedInfo pg_count 7, each rank's pg_config listing the default group and its own TP and DP groups; "
        "every rank but 5 spends most of its step in all_reduce (straggler: rank 5).",
    ),
    "transformer_bf16_exports": (
        "none",
        "transformer_bf16 (4 layers, d_model 512, bf16 autocast, AdamW), active=2, with "
        "experimental_config verbose=True; PyTorch's own memory timeline (json and raw) and export_stacks "
        "(self cpu / cuda time) in exports/transformer_bf16_exports/ for comparison with the plugin (issue 19).",
        "Reference run: record_function forward/backward/optimizer; cpu_op events carry 'Call stack'.",
    ),
}
STRAGGLER = {"pp_two_groups": 1, "gloo_8proc_cpu": 5}
EXPORTS = {"transformer_bf16_exports": "exports/transformer_bf16_exports"}


def environment():
    env = {"python": platform.python_version(), "host_cpus": os.cpu_count()}
    try:
        import torch
        env["torch"] = torch.__version__
        env["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as e:  # the manifest must still be written
        env["torch_error"] = repr(e)
    return env


def main():
    dest = sys.argv[1]
    timings = {}
    path = os.path.join(dest, ".corpus_timings.tsv")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 4:
                    run, status, seconds, command = parts
                    timings[run] = {"status": status, "seconds": float(seconds), "command": command}
    runs = {}
    for run in list(RUNS) + [r for r in timings if r not in RUNS]:
        cause, description, signals = RUNS.get(run, ("unknown", "", ""))
        entry = {"planted_cause": cause, "description": description, "expected_signals": signals}
        if run in STRAGGLER:
            entry["straggler_rank"] = STRAGGLER[run]
        if run in EXPORTS:
            entry["exports"] = EXPORTS[run]
        entry.update(timings.get(run, {"status": "not run"}))
        run_dir = os.path.join(dest, run)
        if os.path.isdir(run_dir):
            files = sorted(f for f in os.listdir(run_dir) if ".pt.trace.json" in f)
            entry["trace_files"] = {f: os.path.getsize(os.path.join(run_dir, f)) for f in files}
        runs[run] = entry
    manifest = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "recorded_by": "samples/scripts/run_corpus.sh",
        "environment": environment(),
        "runs": runs,
    }
    with open(os.path.join(dest, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.join(dest, 'MANIFEST.json')}")


if __name__ == "__main__":
    main()
