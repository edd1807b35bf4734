"""Single-process training runs, each with ONE planted bottleneck (labelled corpus, issue 11).

`--case NAME` picks the run; everything else in that run is kept clean on purpose (batches already on
the device or copied from pinned memory with non_blocking=True, no `.item()`, no CPU-made tensors)
unless it IS the planted cause:

  input_workers_heavy  DataLoader(num_workers=4, persistent_workers=True, pin_memory=True) whose
                       per-sample numpy transform is so heavy that even 4 workers cannot keep up: each
                       step waits in `_MultiProcessingDataLoaderIter.__next__`, the GPU mostly idle.
  cpu_tensor_creation  every step makes a big noise tensor on the CPU (`torch.randn(x.shape)`:
                       `aten::normal_` on the host) and copies it to the GPU; that dominates the step
                       (the fix: `torch.randn(..., device=x.device)`). The tensor is made in pinned
                       memory and copied non_blocking, so the copy is not a second (pageable) cause.
  tiny_kernels         a deep, narrow residual MLP (Linear 64x64, hand-written SiLU), batch 16, SGD with
                       foreach=False: ~1000 tiny kernels a step, each a few microseconds, so the step is
                       bound by the host's launch rate (GPU mostly idle between kernels).
  item_sync            an MLP (8 blocks of Linear 8192 + LayerNorm + GELU, batch 256, TF32 matmuls,
                       AdamW) whose loop logs `loss.item()` and keeps a per-sample loss history with
                       `v.item()` for each sample of the batch (`--sync-samples`, default the whole batch):
                       257 host-device syncs a step; at each the host waits for the GPU to drain, then
                       the GPU waits for the host's next launch.
  pageable_h2d         a large batch (64 x 3 x 384 x 384 float32, 113 MB) in ordinary pageable host
                       memory is copied with `.to(device, non_blocking=False)` every step for a cheap
                       model: `Memcpy HtoD (Pageable -> Device)` dominates.
  cuda_graph           the whole training step (forward, backward, SGD) is captured once in a
                       `torch.cuda.CUDAGraph` and replayed (`cudaGraphLaunch`) each step; the remaining,
                       planted cost is outside the graph: each step's input is made on the CPU
                       (`aten::normal_`) and copied host-to-device into the graph's static input
                       (pinned, non_blocking: the copy itself is cheap).

Profiler: CPU (+ CUDA) activities, record_shapes, profile_memory, with_stack, schedule wait=1,
warmup=1, active=--active (per-case default, 2 or 3; 4 for input_workers_heavy so that the window
spans one round of the 4 workers), repeat=1: one trace file. Worker name `<short host>_<pid>`.
`--device cpu --tiny` is a dry run without a GPU (cuda_graph then runs the step eagerly).
"""
import argparse
import os
import random
import socket
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

CASES = ("input_workers_heavy", "cpu_tensor_creation", "tiny_kernels", "item_sync", "pageable_h2d", "cuda_graph")


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class SmallCNN(nn.Module):
    """Three strided convolutions and a classifier: cheap on a GPU."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.head(self.features(x))


def mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


# --------------------------------------------------------------------------- input_workers_heavy

class HeavyTransformImages(torch.utils.data.Dataset):
    """Deterministic synthetic uint8 'photos' with a deliberately heavy numpy transform per sample:
    bilinear resize, `blur_rounds` 3x3 box blurs done with shifted slices, normalization."""

    def __init__(self, length, raw_size, out_size, blur_rounds, seed):
        self.length, self.raw_size, self.out_size, self.blur_rounds, self.seed = length, raw_size, out_size, blur_rounds, seed

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        rng = np.random.default_rng(self.seed + idx)
        img = rng.integers(0, 256, size=(self.raw_size, self.raw_size, 3), dtype=np.uint8).astype(np.float32) / 255.0
        ys = np.linspace(0, self.raw_size - 1, self.out_size).astype(np.int64)
        img = img[ys][:, ys]  # nearest resize
        for _ in range(self.blur_rounds):  # 3x3 box blur, the heavy part
            p = np.pad(img, ((1, 1), (1, 1), (0, 0)), mode="edge")
            acc = np.zeros_like(img)
            for dy in range(3):
                for dx in range(3):
                    acc += p[dy:dy + self.out_size, dx:dx + self.out_size]
            img = acc / 9.0
        img = (img - 0.45) / 0.225
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), int(rng.integers(0, 10))


def case_input_workers_heavy(args, device):
    batch, raw, size, rounds = (8, 64, 32, 2) if args.tiny else (32, 256, 128, 4)
    n_steps = args.warmup_steps + 2 + args.active
    dataset = HeavyTransformImages((n_steps + 16) * batch, raw, size, rounds, args.seed)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch, shuffle=False, num_workers=args.workers, persistent_workers=True,
        pin_memory=device.type == "cuda", prefetch_factor=2,
    )
    model = SmallCNN().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    it = iter(loader)

    def step():
        x, y = next(it)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, loader


# --------------------------------------------------------------------------- cpu_tensor_creation

def case_cpu_tensor_creation(args, device, fixed=False):
    """`fixed` (calibration twin, issue 25): the noise is made on the device, `torch.randn(..., device=)`."""
    batch, dim = (64, 256) if args.tiny else (2048, 4096)
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(batch, dim, generator=gen).to(device)  # the clean data lives on the device
    y = torch.randint(0, 10, (batch,), generator=gen).to(device)
    model = mlp([dim, 1024 if not args.tiny else 64, 1024 if not args.tiny else 64, 10]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        with record_function("make_noise"):
            if fixed:
                noise = torch.randn(x.shape, device=device) * 0.01
            else:
                # PLANTED: created on the CPU every step (pinned and copied non_blocking, so that the copy
                # itself is not a second cause: the host-side aten::normal_ is the cost).
                noise = torch.randn(x.shape, pin_memory=device.type == "cuda")
                noise = noise.to(device, non_blocking=True) * 0.01
        loss = F.cross_entropy(model(x + noise), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, None


# --------------------------------------------------------------------------- tiny_kernels

class NarrowBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        h = self.fc(x)
        return x + h * torch.sigmoid(h)  # hand-written SiLU: 3 separate elementwise kernels


def case_tiny_kernels(args, device, fixed=False):
    """`fixed` (calibration twin, issue 25): the same step captured once in a CUDA graph and replayed."""
    blocks = args.blocks  # width 64, batch 16: cheap on a CPU dry run too
    width, batch = 64, 16
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(batch, width, generator=gen).to(device)
    y = torch.randint(0, 10, (batch,), generator=gen).to(device)
    model = nn.Sequential(*[NarrowBlock(width) for _ in range(blocks)], nn.Linear(width, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=False)  # one kernel per op per param

    if fixed:
        def body():
            F.cross_entropy(model(x), y).backward()
            opt.step()

        return graphed_step(body, opt, device), None

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, None


# --------------------------------------------------------------------------- item_sync

class ResidualMLP(nn.Module):
    def __init__(self, width, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()) for _ in range(blocks))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for blk in self.blocks:
            x = x + blk(x)
        return self.head(x)


def case_item_sync(args, device, fixed=False):
    """`fixed` (calibration twin, issue 25): the per-sample losses stay on the device and the loss is read
    back once every `args.log_every` steps (none inside a short profiled window)."""
    # A clean step that keeps the GPU busy (a 537M-parameter MLP: TF32 matmuls of 256x8192x8192, ~0.2 ms each, and
    # a multi-tensor (foreach) AdamW over 2 GB of parameters take longer than the host needs to launch them), then
    # the planted cost: the loop reads the loss and every sample's loss back to the host one scalar at a time
    # (a per-sample loss history, e.g. for hard-example mining), each read a DtoH copy + cudaStreamSynchronize.
    width, blocks, batch = (64, 8, 256) if args.tiny else (8192, 8, 256)
    n_sync = batch if args.sync_samples is None else min(args.sync_samples, batch)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(batch, width, generator=gen).to(device)
    y = torch.randint(0, 10, (batch,), generator=gen).to(device)
    with device:  # initialised on the device: 537M parameters would take seconds on the host
        model = ResidualMLP(width, blocks)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    history = []
    count = [0]

    def step():
        per_sample = F.cross_entropy(model(x), y, reduction="none")
        loss = per_sample.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        count[0] += 1
        if fixed:
            history.append(per_sample.detach()[:n_sync])  # kept on the device, read back later in bulk
            return loss.item() if count[0] % getattr(args, "log_every", 50) == 0 else None
        logged = loss.item()  # PLANTED: a sync for the loss ...
        for v in per_sample.detach()[:n_sync]:
            history.append(v.item())  # PLANTED: ... and one per sample
        return logged

    return step, None


# --------------------------------------------------------------------------- pageable_h2d

class PooledCNN(SmallCNN):
    def forward(self, x):
        return super().forward(F.avg_pool2d(x, 4))


def case_pageable_h2d(args, device, fixed=False):
    """`fixed` (calibration twin, issue 25): the same batches from pinned memory, copied non_blocking on a
    side stream one step ahead (the next batch's copy overlaps this step's compute)."""
    batch, size = (8, 64) if args.tiny else (64, 384)
    gen = torch.Generator().manual_seed(args.seed)
    # Two big batches in ordinary (pageable) host memory, used in turn.
    host = [torch.rand(batch, 3, size, size, generator=gen) for _ in range(2)]
    labels = [torch.randint(0, 10, (batch,), generator=gen) for _ in range(2)]
    model = PooledCNN().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    counter = [0]
    if fixed:
        return prefetching_step(host, labels, model, opt, device), None

    def step():
        i = counter[0] % 2
        counter[0] += 1
        x = host[i].to(device, non_blocking=False)  # PLANTED: pageable, synchronous, 113 MB a step
        y = labels[i].to(device, non_blocking=False)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, None


def prefetching_step(host, labels, model, opt, device):
    """The usual fix of a pageable copy: pinned host batches, each copied non_blocking on a side stream
    while the previous one trains (`record_stream` keeps the allocator from reusing it too early)."""
    cuda = device.type == "cuda"
    host = [h.pin_memory() for h in host] if cuda else host
    labels = [t.pin_memory() for t in labels] if cuda else labels
    copy_stream = torch.cuda.Stream() if cuda else None
    state = {"i": 0}

    def load():
        i = state["i"] % len(host)
        state["i"] += 1
        if not cuda:
            return host[i], labels[i]
        with torch.cuda.stream(copy_stream):
            return host[i].to(device, non_blocking=True), labels[i].to(device, non_blocking=True)

    state["next"] = load()

    def step():
        if cuda:
            torch.cuda.current_stream().wait_stream(copy_stream)
        x, y = state["next"]
        if cuda:
            x.record_stream(torch.cuda.current_stream())
            y.record_stream(torch.cuda.current_stream())
        state["next"] = load()  # the next batch's copy overlaps this step's compute
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


# --------------------------------------------------------------------------- cuda_graph

def graphed_step(body, opt, device, warm=3):
    """Capture `body()` (forward, backward, optimizer step) once in a CUDA graph and return its replay.

    Warm-up runs on a side stream first (lazy state such as momentum buffers), as the CUDA-graph docs ask.
    On a CPU dry run there are no graphs: the step runs eagerly."""
    if device.type != "cuda":
        def eager():
            opt.zero_grad(set_to_none=True)
            body()
        return eager
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            opt.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        body()
    torch.cuda.synchronize()
    return graph.replay


def case_cuda_graph(args, device):
    batch, dim, hidden = (64, 256, 64) if args.tiny else (1024, 4096, 2048)
    gen = torch.Generator().manual_seed(args.seed)
    model = mlp([dim, hidden, hidden, 10]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    static_x = torch.randn(batch, dim, generator=gen).to(device)
    static_y = torch.randint(0, 10, (batch,), generator=gen).to(device)

    def body():
        loss = F.cross_entropy(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    run_graph = graphed_step(body, opt, device)  # the whole step as one graph (eager on a CPU dry run)

    def step():
        with record_function("make_input"):
            # PLANTED: each step's input made on the CPU (aten::normal_) and copied host-to-device outside
            # the graph (from pinned memory, non_blocking, so that the copy is not a second cause).
            x = torch.randn(batch, dim, pin_memory=device.type == "cuda")
            static_x.copy_(x, non_blocking=True)
        run_graph()

    return step, None


# --------------------------------------------------------------------------- main

DEFAULT_ACTIVE = {"input_workers_heavy": 4, "tiny_kernels": 2}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--logdir", default=None, help="default samples/<case>")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="tiny sizes for a CPU dry run")
    p.add_argument("--workers", type=int, default=4, help="input_workers_heavy: DataLoader workers")
    p.add_argument("--blocks", type=int, default=40, help="tiny_kernels: number of narrow blocks")
    p.add_argument("--sync-samples", type=int, default=None,
                   help="item_sync: samples whose loss is read with .item() each step (default: the whole batch)")
    p.add_argument("--warmup-steps", type=int, default=5, help="untraced steps before profiling")
    p.add_argument("--active", type=int, default=None, help="active profiler steps (per-case default)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.active is None:
        args.active = DEFAULT_ACTIVE.get(args.case, 3)
    logdir = args.logdir or os.path.join("samples", args.case)

    seed_all(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    step, loader = globals()[f"case_{args.case}"](args, device)

    t0 = time.perf_counter()
    for _ in range(args.warmup_steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t1 = time.perf_counter()

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    worker = f"{socket.gethostname().split('.')[0]}_{os.getpid()}"
    prof_steps = 1 + 1 + args.active
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(logdir, worker_name=worker, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for _ in range(prof_steps):
            step()
            prof.step()
    t2 = time.perf_counter()
    if loader is not None:
        del loader  # stop the persistent workers
    print(f"{args.case}: warm-up {args.warmup_steps} steps {t1 - t0:.2f}s, profiled {prof_steps} steps {t2 - t1:.2f}s; "
          f"wrote {sorted(os.listdir(logdir))}")


if __name__ == "__main__":
    main()
