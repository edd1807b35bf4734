"""A small MLP trained on the CPU only (no GPU activity in the trace).

Run `cpu_only`: 3-layer MLP, SGD with momentum, synthetic tensors fed through a DataLoader
(num_workers=0), profiled with activities=[ProfilerActivity.CPU] only, record_shapes,
profile_memory, with_stack. Schedule wait=1, warmup=1, active=3, repeat=1: one trace file.
"""
import argparse
import os
import random
import socket

import numpy as np
import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/cpu_only")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (1 keeps steps steady on a small shared machine)")
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    seed_all(args.seed)
    torch.set_num_threads(args.threads)
    in_dim, num_classes = 256, 10
    prof_steps = 1 + 1 + args.active
    warmup_steps = 2
    n = (warmup_steps + prof_steps) * args.batch_size
    gen = torch.Generator().manual_seed(args.seed)
    data = torch.utils.data.TensorDataset(torch.randn(n, in_dim, generator=gen), torch.randint(0, num_classes, (n,), generator=gen))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=0,
                                         generator=torch.Generator().manual_seed(args.seed))

    model = nn.Sequential(
        nn.Linear(in_dim, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, num_classes),
    )
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(x, y):
        loss = criterion(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    it = iter(loader)
    for _ in range(warmup_steps):
        train_step(*next(it))

    worker = f"{socket.gethostname().split('.')[0]}_{os.getpid()}"
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(args.logdir, worker_name=worker, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for _ in range(prof_steps):
            train_step(*next(it))
            prof.step()
    print(f"cpu_only: wrote {sorted(os.listdir(args.logdir))}")


if __name__ == "__main__":
    main()
