"""Two-rank DistributedDataParallel ResNet-18 over NCCL, rank 1 the straggler.

Run `ddp_resnet`: torch.multiprocessing.spawn starts one process per rank (2 by default, one GPU
each), each wraps torchvision resnet18 (weights=None) in DistributedDataParallel and trains on
synthetic GPU-resident data with SGD. Rank 1 sleeps --straggler-ms (5 ms) in every step, so the
other rank waits for it in the gradient all-reduce. Each rank writes its own trace, worker names
`rank0` / `rank1`. Schedule wait=1, warmup=1, active=2, repeat=1: one span per rank.
Use `--backend gloo --device cpu` for a CPU-only dry run.
"""
import argparse
import os
import random
import time

# NVLink multicast stays off on shared machines (inherited by the spawned ranks).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
from torchvision.models import resnet18


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    if args.device == "cuda":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        dist.init_process_group(args.backend, rank=rank, world_size=args.world_size, device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group(args.backend, rank=rank, world_size=args.world_size)
    seed_all(args.seed + rank)

    torch.manual_seed(args.seed)  # same initial weights on every rank (DDP broadcasts anyway)
    model = resnet18(weights=None, num_classes=100).to(device)
    ddp = DDP(model, device_ids=[rank] if device.type == "cuda" else None)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    gen = torch.Generator().manual_seed(args.seed + rank)
    prof_steps = 1 + 1 + args.active
    n = args.warmup_steps + prof_steps
    images = torch.randn(n, args.batch_size, 3, args.image_size, args.image_size, generator=gen).to(device)
    labels = torch.randint(0, 100, (n, args.batch_size), generator=gen).to(device)

    def train_step(i):
        if rank == 1 and args.straggler_ms > 0:
            time.sleep(args.straggler_ms / 1000.0)  # the straggler
        out = ddp(images[i])
        loss = criterion(out, labels[i])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for i in range(args.warmup_steps):
        train_step(i)
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(args.logdir, worker_name=f"rank{rank}", use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for step in range(prof_steps):
            train_step(args.warmup_steps + step)
            prof.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/ddp_resnet")
    p.add_argument("--device", default="cuda")
    p.add_argument("--backend", default="nccl")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--straggler-ms", type=float, default=5.0)
    p.add_argument("--warmup-steps", type=int, default=3, help="untraced steps before profiling")
    p.add_argument("--active", type=int, default=2)
    p.add_argument("--port", type=int, default=29531)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.device == "cuda" and torch.cuda.device_count() < args.world_size:
        raise SystemExit(f"need {args.world_size} GPUs, found {torch.cuda.device_count()}")
    mp.spawn(worker, args=(args,), nprocs=args.world_size, join=True)
    print(f"ddp_resnet: wrote {sorted(os.listdir(args.logdir))}")


if __name__ == "__main__":
    main()
