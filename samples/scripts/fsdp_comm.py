"""Two-rank FSDP (fully_shard) training whose all-gathers and reduce-scatters dominate the step.

Run `fsdp_comm` (planted cause: communication-bound): torch.multiprocessing.spawn starts one process
per rank (2 by default, one GPU each); each builds a stack of 4 wide Linear(8192, 8192)+ReLU blocks
(67 M parameters, 268 MB fp32 each), applies `torch.distributed.fsdp.fully_shard` to every block and
to the root (FSDP2, NCCL), and trains on a tiny batch (16 rows) with plain SGD. Compute per block is
a few microseconds while every block's parameters are all-gathered in forward and again in backward
(reshard_after_forward=True) and its gradients reduce-scattered: NCCL AllGather / ReduceScatter kernels
fill the step. Worker names `rank0` / `rank1`. Schedule wait=1, warmup=1, active=2, repeat=1.
Few blocks and SGD (not AdamW) on purpose: FSDP2's DTensor code is Python-heavy, and with_stack records
every Python call (a 2-step trace of 4 tiny blocks is already ~0.4 MB gz; with AdamW ~0.6 MB).
Use `--backend gloo --device cpu --tiny` for a CPU-only dry run.
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
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

try:
    from torch.distributed.fsdp import fully_shard  # torch >= 2.6
except ImportError:  # pragma: no cover - older torch
    from torch.distributed._composable.fsdp import fully_shard


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
        torch.set_num_threads(1)
        dist.init_process_group(args.backend, rank=rank, world_size=args.world_size)
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh(device.type, (args.world_size,))

    torch.manual_seed(args.seed)  # same initial weights on every rank
    width, blocks, batch = (64, 4, 4) if args.tiny else (args.width, args.blocks, args.batch_size)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(blocks)], nn.Linear(width, 10)).to(device)
    for blk in model[:-1]:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    seed_all(args.seed + rank)
    gen = torch.Generator().manual_seed(args.seed + rank)
    x = torch.randn(batch, width, generator=gen).to(device)
    y = torch.randint(0, 10, (batch,), generator=gen).to(device)

    def train_step():
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(args.warmup_steps):
        train_step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier()

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    prof_steps = 1 + 1 + args.active
    t0 = time.perf_counter()
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(args.logdir, worker_name=f"rank{rank}", use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for _ in range(prof_steps):
            train_step()
            prof.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    if rank == 0:
        print(f"fsdp_comm: profiled {prof_steps} steps in {time.perf_counter() - t0:.2f}s")
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/fsdp_comm")
    p.add_argument("--device", default="cuda")
    p.add_argument("--backend", default="nccl")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--width", type=int, default=8192)
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--tiny", action="store_true", help="tiny sizes for a CPU dry run")
    p.add_argument("--warmup-steps", type=int, default=3, help="untraced steps before profiling")
    p.add_argument("--active", type=int, default=2)
    p.add_argument("--port", type=int, default=29541)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.device == "cuda" and torch.cuda.device_count() < args.world_size:
        raise SystemExit(f"need {args.world_size} GPUs, found {torch.cuda.device_count()}")
    mp.spawn(worker, args=(args,), nprocs=args.world_size, join=True)
    print(f"fsdp_comm: wrote {sorted(os.listdir(args.logdir))}")


if __name__ == "__main__":
    main()
