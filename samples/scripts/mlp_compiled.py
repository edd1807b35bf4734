"""A small bf16 MLP trained under torch.compile (Inductor / Triton kernels).

Run `mlp_compiled`: a 4-block MLP (Linear, LayerNorm, GELU, residual) in bfloat16, compiled with
torch.compile (default Inductor backend: fused Triton kernels `triton_poi_*` / `triton_red_*` /
`triton_per_*`, matmuls through cuBLAS), AdamW. The model is compiled and warmed up before the
profiler starts, so the trace holds steady-state steps, not compilation. Schedule wait=1,
warmup=1, active=3, repeat=1: one trace file.
"""
import argparse
import os
import random
import socket

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Block(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class MLP(nn.Module):
    def __init__(self, in_dim, dim, hidden, blocks, num_classes):
        super().__init__()
        self.inp = nn.Linear(in_dim, dim)
        self.blocks = nn.Sequential(*[Block(dim, hidden) for _ in range(blocks)])
        self.out = nn.Linear(dim, num_classes)

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/mlp_compiled")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--blocks", type=int, default=4)
    p.add_argument("--compile-backend", default="inductor")
    p.add_argument("--warmup-steps", type=int, default=3, help="untraced (compiling) steps before profiling")
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    seed_all(args.seed)
    device = torch.device(args.device)
    in_dim, num_classes = 512, 100
    model = MLP(in_dim, args.dim, 4 * args.dim, args.blocks, num_classes).to(device=device, dtype=torch.bfloat16)
    cmodel = torch.compile(model, backend=args.compile_backend)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    gen = torch.Generator().manual_seed(args.seed)
    prof_steps = 1 + 1 + args.active
    n = args.warmup_steps + prof_steps
    xs = torch.randn(n, args.batch_size, in_dim, generator=gen).to(device=device, dtype=torch.bfloat16)
    ys = torch.randint(0, num_classes, (n, args.batch_size), generator=gen).to(device)

    def train_step(i):
        loss = F.cross_entropy(cmodel(xs[i]).float(), ys[i])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for i in range(args.warmup_steps):
        train_step(i)
    if device.type == "cuda":
        torch.cuda.synchronize()

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    worker = f"{socket.gethostname().split('.')[0]}_{os.getpid()}"
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(args.logdir, worker_name=worker, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for step in range(prof_steps):
            train_step(args.warmup_steps + step)
            prof.step()
    print(f"mlp_compiled: wrote {sorted(os.listdir(args.logdir))}")


if __name__ == "__main__":
    main()
