"""Small TransformerEncoder trained under bf16 autocast with AdamW.

Run `transformer_bf16`: nn.TransformerEncoder (4 layers, d_model 512, 8 heads, batch-first)
with a token embedding and a classifier head, torch.autocast('cuda', dtype=torch.bfloat16),
AdamW. Each step is split into record_function regions "forward", "backward" and "optimizer",
and calls `loss.item()` (a host-device synchronization). Profiled with with_modules=True and
with_flops=True on top of record_shapes / profile_memory / with_stack. Schedule wait=1,
warmup=1, active=3, repeat=1: one trace file.

`--export-extras DIR` (issue 19) also writes, from the same profiled span, PyTorch's own exports into
DIR (keep it outside the run folder, e.g. DEST/exports/transformer_bf16): `prof.export_memory_timeline`
as `memory_timeline.json.gz` ([times, sizes by category]) and `memory_timeline.raw.json.gz`
((time, action, bytes, category) tuples) for the training device, `prof.export_stacks` for
`self_cpu_time_total` and `self_cuda_time_total` (gzipped as `stacks.<metric>.txt.gz`), and
`exports_meta.json` (torch version, device, trace file, category/action index names, errors).
export_stacks writes an empty file unless the profiler runs with
`experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True)`, so this flag turns that on,
which also gives every `cpu_op` in the trace a "Call stack" arg (a larger trace: use `--active 2`).
The memory timeline needs record_shapes, profile_memory and with_stack (all on here). Each export is
guarded: one that fails is reported in exports_meta.json and does not lose the trace.
"""
import argparse
import gzip
import json
import os
import shutil
import random
import socket

import numpy as np
import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class TinyEncoderClassifier(nn.Module):
    def __init__(self, vocab, d_model, nhead, layers, num_classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=4 * d_model, dropout=0.1, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        x = self.encoder(self.embed(tokens))
        return self.head(self.norm(x).mean(dim=1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/transformer_bf16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=3, help="untraced steps before profiling")
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--export-extras", metavar="DIR", default=None,
                   help="also write memory timeline and stacks exports into DIR (not the run folder)")
    args = p.parse_args()

    seed_all(args.seed)
    device = torch.device(args.device)
    vocab, num_classes = 8192, 10
    model = TinyEncoderClassifier(vocab, args.d_model, 8, args.layers, num_classes).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    criterion = nn.CrossEntropyLoss()
    model.train()

    gen = torch.Generator().manual_seed(args.seed)
    prof_steps = 1 + 1 + args.active
    batches = [
        (
            torch.randint(0, vocab, (args.batch_size, args.seq_len), generator=gen),
            torch.randint(0, num_classes, (args.batch_size,), generator=gen),
        )
        for _ in range(args.warmup_steps + prof_steps)
    ]

    def train_step(tokens, target):
        tokens = tokens.to(device)
        target = target.to(device)
        with record_function("forward"):
            with torch.autocast(device.type, dtype=torch.bfloat16):
                logits = model(tokens)
                loss = criterion(logits.float(), target)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss.item()  # host-device sync on purpose

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    worker = f"{socket.gethostname().split('.')[0]}_{os.getpid()}"
    extra = {}
    if args.export_extras:
        # export_stacks writes nothing unless the events carry their stacks, which needs verbose=True
        # (it also adds a "Call stack" arg to every cpu_op in the trace).
        extra["experimental_config"] = torch._C._profiler._ExperimentalConfig(verbose=True)

    for i in range(args.warmup_steps):
        train_step(*batches[i])

    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(args.logdir, worker_name=worker, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        with_modules=True,
        with_flops=True,
        **extra,
    ) as prof:
        for step in range(prof_steps):
            loss = train_step(*batches[args.warmup_steps + step])
            prof.step()
    print(f"transformer_bf16: last loss {loss:.4f}; wrote {sorted(os.listdir(args.logdir))}")
    if args.export_extras:
        export_extras(prof, args.export_extras, device, sorted(os.listdir(args.logdir)))


def export_extras(prof, out_dir, device, trace_files):
    """PyTorch's own memory timeline and stacks exports of the last profiled span, each guarded."""
    import traceback
    import time

    os.makedirs(out_dir, exist_ok=True)
    dev = f"cuda:{torch.cuda.current_device()}" if device.type == "cuda" else "cpu"
    meta = {"torch": torch.__version__, "device": dev, "trace_files": trace_files, "files": {}, "errors": {}}
    try:
        from torch.profiler import _memory_profiler as mp
        # Column j+1 of each sizes row is category j (column 0 is unused); raw tuples carry the index j.
        meta["categories"] = [getattr(c, "name", None) or "UNKNOWN" for c in mp._CATEGORY_TO_INDEX]
        meta["actions"] = {a.name: i for a, i in mp._ACTION_TO_INDEX.items()}
    except Exception as e:  # private module: layout may change
        meta["errors"]["categories"] = repr(e)

    def guarded(name, fn):
        t0 = time.perf_counter()
        try:
            fn()
            meta["files"][name] = {"bytes": os.path.getsize(os.path.join(out_dir, name)), "seconds": round(time.perf_counter() - t0, 2)}
        except Exception as e:
            meta["errors"][name] = "".join(traceback.format_exception_only(type(e), e)).strip()
            traceback.print_exc()

    guarded("memory_timeline.json.gz", lambda: prof.export_memory_timeline(os.path.join(out_dir, "memory_timeline.json.gz"), device=dev))
    guarded("memory_timeline.raw.json.gz", lambda: prof.export_memory_timeline(os.path.join(out_dir, "memory_timeline.raw.json.gz"), device=dev))

    def stacks(metric):
        plain = os.path.join(out_dir, f"stacks.{metric}.txt")
        prof.export_stacks(plain, metric=metric)
        with open(plain, "rb") as fin, gzip.open(plain + ".gz", "wb") as fout:
            shutil.copyfileobj(fin, fout)
        os.remove(plain)

    for metric in ("self_cpu_time_total", "self_cuda_time_total"):
        guarded(f"stacks.{metric}.txt.gz", lambda metric=metric: stacks(metric))
    with open(os.path.join(out_dir, "exports_meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"transformer_bf16: exports in {out_dir}: {sorted(meta['files'])}; errors: {sorted(meta['errors']) or 'none'}")


if __name__ == "__main__":
    main()
