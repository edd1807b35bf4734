"""Two more recordings with PyTorch's memory timeline exports, to check the memory-by-category inference (issue 19)
on other optimizers and inputs than samples/transformer_bf16_exports (a bf16 Transformer with AdamW).

Runs, each profiled with record_shapes / profile_memory / with_stack, schedule(wait=1, warmup=1, active=2) and
tensorboard_trace_handler into DEST/<run>, and torch's `export_memory_timeline` of the same span (both forms,
gzipped) into DEST/exports/<run>/ (beside the runs, as samples/exports/ holds them):

- `cnn_sgd_memcat`: a 4-conv CNN, SGD with momentum 0.9 (one momentum buffer per parameter, created in the first
  optimizer step before profiling), batch 32 of 3x96x96 copied each step from pageable host memory
  (`.to(device)`: the Input category), zero_grad(set_to_none=True) after the step.
- `mlp_adam_memcat`: an fp32 MLP 1024 -> 4096 -> 4096 -> 1024 -> 10, Adam, batch 512 resident on the device,
  zero_grad(set_to_none=True) at the *start* of each step, so gradients live across the step boundary and are freed
  in the next step's zero_grad.

Record (GPU machine, repository root):

    python3 samples/scripts/memory_categories_runs.py --dest DEST          # then copy DEST/* into samples/

Compare the inference with torch's export of every run in a logdir laid out like that (any machine, no torch needed;
prints the per-category table at torch's peak that docs/guide/memory.md shows for the Transformer):

    PYTHONPATH=. python3 samples/scripts/memory_categories_runs.py --compare DEST

CPU dry run: `--device cpu --tiny` (export_memory_timeline then exports the CPU).
"""
import argparse
import json
import os
import socket
import sys

RUNS = ("cnn_sgd_memcat", "mlp_adam_memcat")


def record(run, dest, device, tiny):
    import torch
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.manual_seed(0)
    if run == "cnn_sgd_memcat":
        width, side, batch = (8, 32, 4) if tiny else (64, 96, 32)
        model = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(2 * width, 10)).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        host = [(torch.randn(batch, 3, side, side), torch.randint(0, 10, (batch,))) for _ in range(8)]
    else:
        hidden, batch = (64, 8) if tiny else (4096, 512)
        model = nn.Sequential(nn.Linear(hidden // 4, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                              nn.Linear(hidden, hidden // 4), nn.GELU(), nn.Linear(hidden // 4, 10)).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        host = [(torch.randn(batch, hidden // 4, device=device), torch.randint(0, 10, (batch,), device=device))
                for _ in range(8)]
    criterion = nn.CrossEntropyLoss()

    def step(x, y):
        if run == "mlp_adam_memcat":
            optimizer.zero_grad(set_to_none=True)  # the previous step's gradients are freed here
        loss = criterion(model(x.to(device)), y.to(device))  # pageable copies for the CNN; no-ops for the MLP
        loss.backward()
        optimizer.step()
        if run == "cnn_sgd_memcat":
            optimizer.zero_grad(set_to_none=True)
        return loss

    for x, y in host[:3]:  # warm-up, untraced: optimizer state and allocator blocks exist before profiling
        step(x, y)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    logdir = os.path.join(dest, run)
    worker = f"{socket.gethostname().split('.')[0]}_{os.getpid()}"
    with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(logdir, worker_name=worker, use_gzip=True),
                 record_shapes=True, profile_memory=True, with_stack=True) as prof:
        for x, y in host[3:7]:
            step(x, y)
            prof.step()
    export_dir = os.path.join(dest, "exports", run)
    os.makedirs(export_dir, exist_ok=True)
    dev = f"cuda:{torch.cuda.current_device()}" if device.type == "cuda" else "cpu"
    meta = {"torch": torch.__version__, "device": dev, "trace_files": sorted(os.listdir(logdir)), "errors": {}}
    for name in ("memory_timeline.json.gz", "memory_timeline.raw.json.gz"):
        try:
            prof.export_memory_timeline(os.path.join(export_dir, name), device=dev)
        except Exception as err:  # one failing export must not lose the trace
            meta["errors"][name] = repr(err)
    with open(os.path.join(export_dir, "exports_meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{run}: {meta['trace_files']}, exports in {export_dir}, errors: {meta['errors'] or 'none'}")


def compare(dest):
    """Print, per run of DEST with an export, torch's bytes per category at its peak beside the inference's."""
    from tb_plugin.catalog.catalog import Catalog, Root
    from tb_plugin.catalog.storage import Storage
    from tb_plugin.loader import load_trace
    from tb_plugin.loader.memory_export import load_export
    from tb_plugin.analysis.memory_category_view import category_view, export_device, export_overlap

    catalog = Catalog([Root(None, Storage(dest))])
    traces = catalog.scan(now=float("inf"))
    for trace in traces:
        model = load_trace(trace.url)
        exports = [load_export(e.url, e.kind) for e in catalog.exports if e.kind == "timeline"]
        mine = [e for e in exports if export_overlap(model, e) > 0]
        if not mine:
            continue
        view = category_view(model, export_device(model, mine[0]), mine[0])
        torch_b, ours = view["peak"]["by_category"], view["inferred_at_peak"]
        print(f"\n{trace.run} ({trace.filename}), peak {view['peak']['total_bytes']:,} B at "
              f"{view['peak']['time_us'] - view['start_us']:.0f} us, dominant {view['peak']['dominant']}")
        print("| category | torch export | inferred | difference |\n| --- | ---: | ---: | ---: |")
        for name, value in torch_b.items():
            diff = f"{(ours[name] - value) / value:+.1%}" if value else "—"
            print(f"| {name} | {value:,} | {ours[name]:,} | {diff} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dest", default="samples")
    p.add_argument("--runs", nargs="*", default=list(RUNS), choices=RUNS)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="small sizes for a CPU dry run")
    p.add_argument("--compare", metavar="LOGDIR", help="compare instead of recording")
    args = p.parse_args()
    if args.compare:
        compare(args.compare)
        return
    import torch

    device = torch.device(args.device if args.device != "cuda" or torch.cuda.is_available() else "cpu")
    for run in args.runs:
        record(run, args.dest, device, args.tiny)


if __name__ == "__main__":
    sys.exit(main())
