"""Allocator snapshots for the Memory view's snapshot mode (issue 32): a training run's, and a real out-of-memory's.

Two runs into DEST (default samples/memory_snapshot), both recorded with this project's own helper,
`tb_plugin.record_memory_history` (history of every allocation with Python and C++ stacks):

(a) `DEST/train/`: a small TransformerEncoder (2 layers, d_model 256, batch 8 x 128 tokens, AdamW) trained
    `--steps` steps (default 4) with history on from before the model is built; `torch.cuda.reset_peak_memory_stats()`
    right after recording starts, so torch's peak counters cover exactly the recorded history. During the last
    step, right after the forward pass, `torch.cuda.memory._snapshot()` is taken (it leaves a `snapshot` entry in
    the history); at the end the whole snapshot is written as `train.pickle.gz`. Beside it `train.torch.json`:
    torch's own figures to compare with the plugin's — `memory_stats()` (requested/allocated/active/reserved
    bytes, current and peak) and, from the mid-run `_snapshot()`, the requested and block bytes of its active
    blocks, its reserved bytes, and which `snapshot` entry of the history it left.
(b) `DEST/oom/`: the same model with `torch.cuda.set_per_process_memory_fraction` capping the process at
    `--limit-gib` (default 1.5 GiB, so a shared 80 GB card is never at risk), one step at batch 8 that fits, then
    a batch `--oom-batch` (default 256) that does not: a real `torch.OutOfMemoryError`, whose snapshot the helper's
    out-of-memory observer writes (`memory_snapshot_oom_<host>_<pid>.<ns>.pickle.gz`). Beside it `oom.torch.json`:
    what torch's observer was told, `memory_stats()` taken inside a second observer at the same moment (before the
    exception unwinds anything), and the exception's message.

Each run is a process of its own (a fresh allocator: its own history, peak counters and limit); one that fails is
reported and does not stop the other. At the end every snapshot written is read back with
`tb_plugin.open_snapshot` (when numpy and pandas are there) and its numbers printed beside torch's.
`--device cpu` is the dry run for a machine without a GPU: the same models, steps and file layout, the helper
warning that CUDA is not available (no snapshot; the JSON files say so).

    python3 samples/scripts/memory_snapshot.py --dest DEST          # on the GPU machine, < 60 s on one H100
    python3 samples/scripts/memory_snapshot.py --device cpu --dest /tmp/snap   # dry run
"""
import argparse
import json
import os
import sys
import subprocess
import time

import torch
import torch.nn as nn

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
import tb_plugin  # noqa: E402  (the repository's own package: the capture helper imports torch only)

STAT_KEYS = ("requested_bytes", "allocated_bytes", "active_bytes", "reserved_bytes")


class Classifier(nn.Module):
    def __init__(self, vocab=8000, d_model=256, nhead=4, layers=2, classes=10):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def stats(device):
    if device.type != "cuda":
        return None
    s = torch.cuda.memory_stats(device)
    return {f"{k}.all.{w}": int(s.get(f"{k}.all.{w}", 0)) for k in STAT_KEYS for w in ("current", "peak")} | \
        {"num_ooms": int(s.get("num_ooms", 0))}


def blocks_of(snapshot):
    """Straight from a `_snapshot()` dict: requested and block bytes of its active blocks, and its reserved bytes."""
    active = [b for s in snapshot["segments"] for b in s["blocks"]
              if b["state"] in ("active_allocated", "active_awaiting_free", "active_pending_free")]
    return {"active_requested_bytes": sum(b["requested_size"] for b in active),
            "active_block_bytes": sum(b["size"] for b in active),
            "reserved_bytes": sum(s["total_size"] for s in snapshot["segments"]),
            # torch records a snapshot's own `snapshot` entry just after it took the history: this one is the
            # (count so far + 1)-th `snapshot` entry of the final history, and its size is active_block_bytes
            "snapshot_entry_number": 1 + sum(1 for trace in snapshot["device_traces"] for e in trace
                                             if e["action"] == "snapshot")}


def step(model, opt, tokens, labels, after_forward=None):
    loss = nn.functional.cross_entropy(model(tokens), labels)
    if after_forward is not None:
        after_forward()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach().cpu())


def batch(device, size, seq=128, vocab=8000):
    g = torch.Generator().manual_seed(size)
    tokens = torch.randint(0, vocab, (size, seq), generator=g).to(device)
    labels = torch.randint(0, 10, (size,), generator=g).to(device)
    return tokens, labels


def write_json(path, payload):
    with open(path, "w") as fh:
        json.dump(payload, fh, indent=1, sort_keys=True)
    print("wrote", path)


def train_run(dest, device, steps):
    run = os.path.join(dest, "train")
    os.makedirs(run, exist_ok=True)
    memory = tb_plugin.record_memory_history(run, max_entries=100_000, stacks="all")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    torch.manual_seed(0)
    model = Classifier().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    mid = {}

    def take_mid_snapshot():
        if device.type == "cuda":
            mid.update(blocks_of(torch.cuda.memory._snapshot()))
            mid["memory_stats"] = stats(device)

    for i in range(steps):
        step(model, opt, *batch(device, 8), after_forward=take_mid_snapshot if i == steps - 1 else None)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    end_stats = stats(device)
    path = memory.dump(os.path.join(run, "train.pickle.gz"))
    memory.stop()
    write_json(os.path.join(run, "train.torch.json"), {
        "torch": torch.__version__, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "snapshot": os.path.basename(path) if path else None, "memory_stats_at_end": end_stats,
        "mid_step_snapshot": mid or None, "steps": steps,
        "note": "memory_stats peaks were reset right after recording started" if path else "no CUDA: nothing recorded"})
    return path


def oom_run(dest, device, limit_gib, oom_batch):
    run = os.path.join(dest, "oom")
    os.makedirs(run, exist_ok=True)
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit_gib * 2**30 / total), device)
    memory = tb_plugin.record_memory_history(run, max_entries=100_000, stacks="all", compress=True)
    seen = {}
    if device.type == "cuda":
        def observer(dev, alloc, device_allocated, device_free):
            seen.update(device=dev, segment_bytes=alloc, limit_bytes=device_allocated, device_free_bytes=device_free,
                        memory_stats=stats(device))
        torch._C._cuda_attach_out_of_memory_observer(observer)
    torch.manual_seed(0)
    model = Classifier().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step(model, opt, *batch(device, 8))
    message = None
    try:
        # on the CPU dry run a small batch: the same code path, no OOM
        step(model, opt, *batch(device, oom_batch if device.type == "cuda" else 16))
    except getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError) as err:
        message = str(err)
    memory.stop()
    write_json(os.path.join(run, "oom.torch.json"), {
        "torch": torch.__version__, "limit_gib": limit_gib, "batch": oom_batch, "observer": seen or None,
        "exception": message, "snapshots": [os.path.basename(p) for p in memory.oom_dumps]})
    if device.type == "cuda" and message is None:
        raise RuntimeError(f"batch {oom_batch} did not run out of memory under {limit_gib} GiB: raise --oom-batch")
    return memory.oom_dumps[0] if memory.oom_dumps else None


def check(paths):
    """Read back what was written with the plugin's own reader and print its numbers beside torch's."""
    try:
        from tb_plugin.sdk import open_snapshot  # the plugin's dependencies (numpy, pandas, msgspec, pyarrow)
    except ImportError as err:
        print(f"the plugin's dependencies are not installed here ({err}): the snapshots were not read back")
        return
    for path in paths:
        s = open_snapshot(path)
        summary = s.summary()
        print(path, {k: summary[k] for k in ("live_bytes", "reserved_bytes", "peak_live_bytes", "positions")})
        if summary["oom"]:
            print("  oom:", summary["oom"])
        for f in summary["findings"]:
            print("  finding:", f["text"])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dest", default=os.path.join(REPO, "samples", "memory_snapshot"))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--limit-gib", type=float, default=1.5)
    p.add_argument("--oom-batch", type=int, default=1024)
    p.add_argument("--only", choices=("train", "oom"), help="one run, in this process (the default runs both, each "
                                                            "in a process of its own)")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: use --device cpu for the dry run")
    device = torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    if args.only == "train":
        print("SNAPSHOT", train_run(args.dest, device, args.steps))
        return
    if args.only == "oom":
        print("SNAPSHOT", oom_run(args.dest, device, args.limit_gib, args.oom_batch))
        return
    written, failed = [], []
    for name in ("train", "oom"):
        start = time.time()
        out = subprocess.run([sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--only", name],
                             stdout=subprocess.PIPE, text=True)
        print(out.stdout, end="")
        paths = [line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("SNAPSHOT ")]
        written += [p for p in paths if p != "None"]
        print(f"=== {name}: {time.time() - start:.1f} s" + ("" if out.returncode == 0 else " FAILED"))
        if out.returncode != 0:
            failed.append(name)
    check(written)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
