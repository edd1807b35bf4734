"""Calibration pairs (issue 25), single process: one planted cause, recorded as planted or with its fix.

`--case NAME --variant planted|fixed --logdir DIR` records one run into DIR (the runner uses
DEST/<case>/<variant>); `healthy` takes `--variant run1|run2` (the same run twice: the noise floor).
`calibration_pairs.py` says what each case plants and what its fixed twin changes; in short:

  recompile            torch.compile(dynamic=False) fed a new sequence length every step -> dynamic=True
  empty_cache          torch.cuda.empty_cache() every step                -> not called
  tf32_off             fp32 GEMMs with TF32 off                           -> allow_tf32 = True
  launch_bound_graph   ~450 tiny kernels launched one by one              -> the step replayed as a CUDA graph
  unfused_optimizer    AdamW(foreach=False) over 130 parameter tensors    -> AdamW(fused=True)
  item_sync            loss.item() + one .item() per sample every step    -> kept on device, read every 50 steps
  tolist_print         .cpu()/.tolist()/print of metrics every step       -> accumulated on device, every 50 steps
  cpu_tensor_creation  torch.randn(shape) on the host, then copied        -> torch.randn(shape, device=...)
  host_augment         batch augmentation with torch CPU ops (main thread) -> the same ops on the GPU
  dataloader_workers   DataLoader(num_workers=0) with a numpy transform   -> num_workers=8, pinned, persistent
  pageable_copy        113 MB pageable .to(device) every step             -> pinned, non_blocking, prefetched
  checkpointing        torch.utils.checkpoint on a model that fits        -> no checkpointing
  cudnn_autotune_shapes  cudnn.benchmark = True, a new image size every step -> benchmark = False
  healthy              GPU-bound bf16 TransformerEncoder, no planted cause (run1, run2)

Everything in a run but its planted cause is kept clean: TF32 on for fp32 matmuls and convolutions (only
tf32_off turns it off), data resident on the device or copied from pinned memory with non_blocking=True,
no host reads, no CPU-made tensors. Models are built directly on the device (a cheap process start).

Every run: a few untraced warm-up steps, a few timed untraced steps (their mean is printed), then
torch.profiler with CPU + CUDA activities, record_shapes, profile_memory and with_stack (except
`recompile`: see calibration_pairs.py), schedule(wait=1, warmup=1, active=4, repeat=1) and
tensorboard_trace_handler(DIR, worker_name=<short host>_<pid>, use_gzip=True): one trace file with
ProfilerStep#2..#5. The last line printed is `CALIBRATION_RESULT {json}` (timings, allocator and
compile counters) for the manifest. `--device cpu --tiny` is a dry run without a GPU (CUDA graphs and
the side stream then degrade to eager code on the CPU).
"""
import argparse
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bottleneck as bn  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from calibration_pairs import PAIRS, variants  # noqa: E402
from pp_two_groups import Block  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler  # noqa: E402

ACTIVE = 4  # >= 4 active steps, so that a steady-state step cadence can be measured
CASES = tuple(p for p, spec in PAIRS.items() if spec["script"] == "calibration.py")


@dataclass
class Case:
    """What a case builder returns: the step, and how to record it."""

    step: Callable[[], object]
    warmup: int = 3  # untraced steps before anything is timed
    timed: int = 3  # untraced steps timed between two syncs (the printed untraced step time)
    with_stack: bool = True
    close: Callable[[], None] | None = None
    notes: dict = field(default_factory=dict)


def on_device(device, build):
    """Build a module directly on the device (no host-side init and copy: cheap process start)."""
    with device:
        return build()


def labelled_batch(device, gen, batch, dim, classes=10):
    x = torch.randn(batch, dim, generator=gen).to(device)
    y = torch.randint(0, classes, (batch,), generator=gen).to(device)
    return x, y


def train_step(model, opt, x, y):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


# --------------------------------------------------------------------------- allocator churn

def case_empty_cache(args, device, fixed):
    width, blocks, batch = (64, 6, 16) if args.tiny else (2048, 6, 1024)
    gen = torch.Generator().manual_seed(args.seed)
    x, y = labelled_batch(device, gen, batch, width)
    model = on_device(device, lambda: bn.ResidualMLP(width, blocks))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        train_step(model, opt, x, y)
        if not fixed:
            torch.cuda.empty_cache()  # PLANTED: every cached block goes back to the driver (cudaFree)

    return Case(step)


# --------------------------------------------------------------------------- recompilation

class TokenMLP(nn.Module):
    """Per-token MLP blocks and a classifier over a (batch, seq, d) input: a small graph to compile."""

    def __init__(self, d, blocks, classes):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d) for _ in range(blocks)])
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.blocks(x))


def case_recompile(args, device, fixed):
    import torch._dynamo

    d, blocks, batch, classes, base, stride = (32, 2, 2, 10, 8, 8) if args.tiny else (256, 2, 16, 128, 64, 16)
    # A fresh compile cache per run: both twins compile from scratch, whatever ran on the machine before.
    cache = tempfile.mkdtemp(prefix="calib_inductor_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    for name in ("recompile_limit", "cache_size_limit"):  # keep recompiling (the default stops at 8)
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    model = on_device(device, lambda: TokenMLP(d, blocks, classes))
    # PLANTED: dynamic=False specializes on every sequence length. FIX: one graph, symbolic length.
    # A CPU dry run compiles with aot_eager: Inductor's C++ builds take minutes on a small host.
    backend = "aot_eager" if device.type == "cpu" else "inductor"
    compiled = torch.compile(model, dynamic=bool(fixed), backend=backend)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    calls = [0]

    def step():
        seq = base + stride * calls[0]  # a new length every step (variable-length batches, no bucketing)
        calls[0] += 1
        x = torch.randn(batch, seq, d, device=device)
        y = torch.randint(0, classes, (batch, seq), device=device)
        loss = F.cross_entropy(compiled(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def close():
        shutil.rmtree(cache, ignore_errors=True)

    # Python tracing of Dynamo/Inductor would make the planted trace ~23 MB (gz) per recompile; the
    # compile phases are still in the trace as dynamo_timed annotations. Same setting for both twins.
    return Case(step, warmup=1 if not fixed else 2, timed=0 if not fixed else 3, with_stack=False, close=close)


# --------------------------------------------------------------------------- TF32

def case_tf32_off(args, device, fixed):
    width, layers, batch = (64, 4, 32) if args.tiny else (4096, 4, 2048)
    torch.backends.cuda.matmul.allow_tf32 = bool(fixed)  # PLANTED: False (full fp32 GEMMs). FIX: True
    torch.backends.cudnn.allow_tf32 = bool(fixed)
    gen = torch.Generator().manual_seed(args.seed)
    x, y = labelled_batch(device, gen, batch, width)
    model = on_device(device, lambda: bn.mlp([width] * (layers + 1) + [10]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return Case(lambda: train_step(model, opt, x, y))


# --------------------------------------------------------------------------- launch-bound / CUDA graph

def case_launch_bound_graph(args, device, fixed):
    args.blocks = 24  # fewer blocks than tiny_kernels' 40: four active steps stay a small file
    step, _ = bn.case_tiny_kernels(args, device, fixed=fixed)  # fixed: the step as a CUDA graph replay
    return Case(step, warmup=5)


# --------------------------------------------------------------------------- unfused optimizer

def case_unfused_optimizer(args, device, fixed):
    width, layers, batch = (32, 50, 16) if args.tiny else (512, 50, 64)
    gen = torch.Generator().manual_seed(args.seed)
    x, y = labelled_batch(device, gen, batch, width)
    model = on_device(device, lambda: bn.mlp([width] * (layers + 1) + [10]))
    if fixed:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)  # PLANTED: one param at a time
    return Case(lambda: train_step(model, opt, x, y), notes={"param_tensors": len(list(model.parameters()))})


# --------------------------------------------------------------------------- host-device syncs

def case_item_sync(args, device, fixed):
    args.log_every = 50
    step, _ = bn.case_item_sync(args, device, fixed=fixed)
    return Case(step)


def case_tolist_print(args, device, fixed):
    width, blocks, batch = (64, 6, 1024) if args.tiny else (4096, 6, 1024)
    gen = torch.Generator().manual_seed(args.seed)
    x, y = labelled_batch(device, gen, batch, width)
    model = on_device(device, lambda: bn.ResidualMLP(width, blocks))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    running = torch.zeros(2, device=device)
    count = [0]

    def step():
        nonlocal running
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        count[0] += 1
        with torch.no_grad():
            conf, preds = logits.softmax(-1).max(-1)
            acc = (preds == y).float().mean()
        if fixed:  # FIX: accumulate on the device, print now and then
            running += torch.stack([loss.detach(), acc])
            if count[0] % 50 == 0:
                print(f"step {count[0]}: mean loss/acc {(running / 50).tolist()}")
                running.zero_()
            return
        # PLANTED: every step reads the metrics back and prints them.
        print(f"step {count[0]}: loss {loss.cpu().item():.4f} acc {acc.cpu().item():.3f} "
              f"preds {preds.tolist()} conf {conf.tolist()}")

    return Case(step)


def case_cpu_tensor_creation(args, device, fixed):
    step, _ = bn.case_cpu_tensor_creation(args, device, fixed=fixed)
    return Case(step)


# --------------------------------------------------------------------------- input pipeline

class ConvNet(nn.Module):
    """conv-BN-ReLU x 2 per stage, a stride-2 conv opening every stage but the first: GPU-bound per image."""

    def __init__(self, widths, kernel=3, num_classes=10):
        super().__init__()
        layers, c = [], 3
        for i, w in enumerate(widths):
            for j in range(2):
                stride = 2 if i > 0 and j == 0 else 1
                conv = nn.Conv2d(c, w, kernel, stride, kernel // 2, bias=False)
                layers += [conv, nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
                c = w
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(c, num_classes)

    def forward(self, x):
        return self.head(self.features(x))


MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def augment(raw, out_size, rng, norm, out=None):
    """Batched augmentation of a uint8 (B, 3, H, W) batch wherever it lives: random crop (one box per batch),
    bilinear resize, per-sample horizontal flip and brightness/contrast jitter, normalisation by `norm`
    (mean and std tensors on the batch's device, made once)."""
    b, _, h, w = raw.shape
    ch, cw = rng.randint(int(0.8 * h), h), rng.randint(int(0.8 * w), w)
    top, left = rng.randint(0, h - ch), rng.randint(0, w - cw)
    x = raw[:, :, top:top + ch, left:left + cw].float().div_(255)
    x = F.interpolate(x, size=(out_size, out_size), mode="bilinear", align_corners=False)
    flip = torch.rand(b, 1, 1, 1, device=raw.device) < 0.5
    x = torch.where(flip, x.flip(-1), x)
    x = x * (0.8 + 0.4 * torch.rand(b, 1, 1, 1, device=raw.device))  # brightness
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * (0.8 + 0.4 * torch.rand(b, 1, 1, 1, device=raw.device)) + mean  # contrast
    m, s = norm
    x = torch.sub(x, m, out=out) if out is not None else x - m
    return x.div_(s)


def case_host_augment(args, device, fixed):
    # Raw 256 x 256 images cropped and resized to 112 on a light CNN (widths 16-128, ~14 ms of GPU work a step):
    # the host's augmentation is the step's bottleneck. From 128 x 128 raw images it took ~9 ms under the profiler
    # and the GPU's work hid it (two earlier recordings: widths 32-256, then 16-128).
    batch, raw_size, size, widths = (8, 40, 32, (8, 16, 32, 64)) if args.tiny else (128, 256, 112, (16, 32, 64, 128))
    cuda = device.type == "cuda"
    gen = torch.Generator().manual_seed(args.seed)
    # Two uint8 batches as a loader would hand them over (pinned: the copy is not the cause here).
    raws = [torch.randint(0, 256, (batch, 3, raw_size, raw_size), dtype=torch.uint8, generator=gen) for _ in range(2)]
    raws = [r.pin_memory() for r in raws] if cuda else raws
    labels = [torch.randint(0, 10, (batch,), generator=gen).to(device) for _ in range(2)]
    model = on_device(device, lambda: ConvNet(widths))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = random.Random(args.seed)
    where = device if fixed else torch.device("cpu")
    norm = tuple(torch.tensor(v).view(1, 3, 1, 1).to(where) for v in (MEAN, STD))
    # PLANTED twin: augment() writes into one of two pinned buffers, copied non_blocking; an event per
    # buffer says when its copy is done (two steps back: the host never waits in practice).
    bufs = [torch.empty(batch, 3, size, size, pin_memory=cuda) for _ in range(2)]
    done = [torch.cuda.Event() if cuda else None for _ in range(2)]
    calls = [0]

    def step():
        i = calls[0] % 2
        calls[0] += 1
        if fixed:  # FIX: copy the uint8 batch, augment on the GPU
            raw = raws[i].to(device, non_blocking=True)
            with record_function("augment"):
                x = augment(raw, size, rng, norm)
        else:
            if cuda:
                done[i].synchronize()
            with record_function("augment"):
                x = augment(raws[i], size, rng, norm, out=bufs[i])  # PLANTED: torch CPU ops on the main thread
            x = x.to(device, non_blocking=True)
            if cuda:
                done[i].record()
        train_step(model, opt, x, labels[i])

    return Case(step)


class LoaderSteps:
    """Steps that each train on the next batch of a DataLoader (the iterator restarts if it runs out)."""

    def __init__(self, loader, model, opt, device):
        self.loader, self.model, self.opt, self.device = loader, model, opt, device
        self.it = iter(loader)

    def __call__(self):
        try:
            x, y = next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            x, y = next(self.it)
        train_step(self.model, self.opt, x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True))

    def close(self):
        self.it = None  # stops persistent workers
        self.loader = None


def case_dataloader_workers(args, device, fixed):
    tiny, full = (32, 32, 24, (8, 16, 32, 64), 2), (32, 128, 96, (128, 256, 512, 1024), 8)
    batch, raw, size, widths, workers = tiny if args.tiny else full
    n_batches = 24
    dataset = bn.HeavyTransformImages(n_batches * batch, raw, size, 1, args.seed)
    if fixed:  # FIX: worker processes, pinned batches, workers kept across epochs
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=workers, pin_memory=True,
                                             persistent_workers=True, prefetch_factor=2)
    else:  # PLANTED: every sample is transformed on the main thread
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=0, pin_memory=False)
    model = on_device(device, lambda: ConvNet(widths))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps = LoaderSteps(loader, model, opt, device)
    return Case(steps, warmup=4, close=steps.close, notes={"num_workers": loader.num_workers})


def case_pageable_copy(args, device, fixed):
    step, _ = bn.case_pageable_h2d(args, device, fixed=fixed)  # fixed: pinned + non_blocking + prefetch
    return Case(step)


# --------------------------------------------------------------------------- compute choices

class BlockStack(nn.Module):
    def __init__(self, d, blocks, classes, checkpointed):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(blocks))
        self.head = nn.Linear(d, classes)
        self.checkpointed = checkpointed

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        for blk in self.blocks:
            # PLANTED: recompute every block's forward in the backward although the activations fit.
            x = checkpoint(blk, x, use_reentrant=False) if self.checkpointed else blk(x)
        return self.head(x)


def case_checkpointing(args, device, fixed):
    d, blocks, batch, seq = (32, 3, 2, 16) if args.tiny else (2048, 3, 8, 1024)
    model = on_device(device, lambda: BlockStack(d, blocks, 10, checkpointed=not fixed))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(batch, seq, d, generator=gen).to(device)
    y = torch.randint(0, 10, (batch, seq), generator=gen).to(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32  # CPU dry run: bf16 matmuls are slow there

    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=device.type == "cuda"):
            loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return Case(step)


def case_cudnn_autotune_shapes(args, device, fixed):
    batch, widths, base = (2, (8, 16, 32, 64), 16) if args.tiny else (32, (32, 64, 128, 256), 96)
    torch.backends.cudnn.benchmark = not fixed  # PLANTED: True with changing shapes. FIX: False
    model = on_device(device, lambda: ConvNet(widths))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    calls = [0]

    def step():
        size = base + 2 * calls[0]  # a new image size every step: every convolution is a new cuDNN problem
        calls[0] += 1
        x = torch.randn(batch, 3, size, size, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        train_step(model, opt, x, y)

    return Case(step, warmup=2)


def case_healthy(args, device, fixed):
    from transformer_bf16 import TinyEncoderClassifier

    batch, seq, d, layers = (2, 16, 32, 2) if args.tiny else (64, 512, 1024, 2)
    model = on_device(device, lambda: TinyEncoderClassifier(8192, d, 8, layers, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    gen = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, 8192, (batch, seq), generator=gen).to(device)
    target = torch.randint(0, 10, (batch,), generator=gen).to(device)

    def step():
        with record_function("forward"), torch.autocast(device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(tokens).float(), target)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    return Case(step)


# --------------------------------------------------------------------------- recording

def clean_defaults(device):
    """Keep everything but the planted cause clean: TF32 tensor cores on for fp32 matmuls and convolutions
    (PyTorch leaves them off for matmuls; only tf32_off turns them off again: that is its planted cause)."""
    if device.type == "cuda":
        torch.cuda.set_device(device.index or 0)
        torch.cuda.init()
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def counters(device):
    """Allocator and compiler counters whose change over the profiled steps the result line reports."""
    out = {}
    if device.type == "cuda":
        stats = torch.cuda.memory_stats(device)
        for key in ("num_device_alloc", "num_device_free", "num_alloc_retries"):
            if key in stats:
                out[key] = stats[key]
    if "torch._dynamo" in sys.modules:
        from torch._dynamo.utils import counters as dynamo_counters

        out["unique_graphs"] = dynamo_counters["stats"]["unique_graphs"]
    return out


def record(case, device, logdir, worker, active=ACTIVE, barrier=None):
    """Warm up, time a few untraced steps, then profile wait=1 + warmup=1 + `active` steps into one trace.

    `barrier` (several ranks) lines the ranks up before the profiled steps."""
    t0 = time.perf_counter()
    for _ in range(case.warmup):
        case.step()
    sync(device)
    t1 = time.perf_counter()
    for _ in range(case.timed):
        case.step()
    sync(device)
    if barrier is not None:
        barrier()
    t2 = time.perf_counter()
    before = counters(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    host_ms = []
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(logdir, worker_name=worker, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=case.with_stack,
    ) as prof:
        for i in range(2 + active):
            s = time.perf_counter()
            case.step()
            host_ms.append(round((time.perf_counter() - s) * 1e3, 3))
            if i == 1 + active:
                sync(device)
                t3 = time.perf_counter()
            prof.step()  # the last one stops the profiler and writes the trace
    t4 = time.perf_counter()
    after = counters(device)
    return {
        "warmup_steps": case.warmup,
        "warmup_s": round(t1 - t0, 3),
        "untraced_step_ms": round((t2 - t1) / case.timed * 1e3, 3) if case.timed else None,
        "profiled_host_step_ms": host_ms,
        "profiled_s": round(t3 - t2, 3),
        "trace_write_s": round(t4 - t3, 3),
        "with_stack": case.with_stack,
        "counters_during_profile": {k: after[k] - before.get(k, 0) for k in after},
    }


def trace_files(logdir):
    return {f: os.path.getsize(os.path.join(logdir, f)) for f in sorted(os.listdir(logdir)) if ".pt.trace.json" in f}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--variant", required=True, choices=("planted", "fixed", "run1", "run2"))
    p.add_argument("--logdir", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="tiny sizes for a CPU dry run")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.variant not in variants(args.case):
        p.error(f"--case {args.case} takes --variant {' or '.join(variants(args.case))}")
    # Attributes that bottleneck.py's case builders read.
    args.blocks, args.sync_samples, args.log_every = 40, None, 50
    return args


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    bn.seed_all(args.seed)
    device = torch.device(args.device)
    clean_defaults(device)
    fixed = args.variant == "fixed"
    t0 = time.perf_counter()
    case = globals()[f"case_{args.case}"](args, device, fixed)
    t_build = time.perf_counter() - t0
    worker = f"{socket.gethostname().split('.')[0]}_{os.getpid()}"
    try:
        info = record(case, device, args.logdir, worker)
    finally:
        if case.close is not None:
            case.close()
    result = {
        "pair": args.case, "variant": args.variant,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "build_s": round(t_build, 3), **info, **case.notes,
        "trace_files": trace_files(args.logdir),
        "process_s": round(time.perf_counter() - start, 3),
    }
    print("CALIBRATION_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
