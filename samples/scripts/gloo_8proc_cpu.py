"""Eight CPU processes over gloo with tensor-parallel and data-parallel groups; rank 5 straggles.

Run `gloo_8proc_cpu` (issue 18; planted cause: straggler, rank 5): torch.multiprocessing.spawn starts
8 processes (CPU only, gloo, 1 intra-op thread each) arranged as TP=4 x DP=2:
  - 2 "tensor-parallel" groups of 4, [0,1,2,3] and [4,5,6,7] (`dist.new_group`, descriptions
    `tp_group_0/1`): a Megatron-style MLP whose first Linear is split by columns and second by rows;
    the partial activations are all-reduced in the TP group in forward (and the input gradient in
    backward);
  - 4 "data-parallel" groups of 2, [0,4], [1,5], [2,6], [3,7] (`dp_group_0..3`): after the backward,
    each rank all-reduces its flattened gradients (one bucket) with its DP peer.
Every rank also takes part in the default group (a barrier before profiling). Rank 5 sleeps
--straggler-ms (100 ms) every step, so its TP group (4..7) waits in the forward all-reduce, rank 1
in the DP all-reduce, and through them ranks 0..3 too: every rank but 5 spends most of its step in
`all_reduce` (on the 2-core development machine: ~320-360 ms over 2 steps, against ~125 ms on rank 5). activities=[CPU] only; worker names `rank0` ... `rank7`.
Schedule wait=1, warmup=1, active=2, repeat=1: one file per rank.
"""
import argparse
import os
import random
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class CopyToTP(torch.autograd.Function):
    """Identity in forward, all-reduce of the gradient in the TP group in backward (Megatron's f)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromTP(torch.autograd.Function):
    """All-reduce in the TP group in forward, identity in backward (Megatron's g)."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class TPMLP(nn.Module):
    def __init__(self, d, hidden, tp, group):
        super().__init__()
        self.group = group
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, hidden // tp)               # column-parallel shard
        self.fc2 = nn.Linear(hidden // tp, d, bias=False)   # row-parallel shard

    def forward(self, x):
        h = CopyToTP.apply(self.norm(x), self.group)
        return x + ReduceFromTP.apply(self.fc2(F.gelu(self.fc1(h))), self.group)


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    torch.set_num_threads(1)
    world, tp = args.world_size, args.tp
    dp = world // tp
    dist.init_process_group("gloo", rank=rank, world_size=world)
    # Every rank creates every group, in the same order.
    tp_groups = [dist.new_group(list(range(g * tp, (g + 1) * tp)), group_desc=f"tp_group_{g}") for g in range(dp)]
    dp_groups = [dist.new_group([j + g * tp for g in range(dp)], group_desc=f"dp_group_{j}") for j in range(tp)]
    tp_group, dp_group = tp_groups[rank // tp], dp_groups[rank % tp]

    tp_rank, dp_rank = rank % tp, rank // tp
    torch.manual_seed(args.seed + tp_rank)  # same shard on both DP replicas
    d, vocab = args.d_model, 256
    embed = nn.Embedding(vocab, d)
    layers = nn.ModuleList(TPMLP(d, args.hidden, tp, tp_group) for _ in range(args.layers))
    head = nn.Linear(d, vocab)
    params = list(embed.parameters()) + list(layers.parameters()) + list(head.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    seed_all(args.seed + 100 * dp_rank)  # TP peers see the same batch, DP replicas different ones
    gen = torch.Generator().manual_seed(args.seed + dp_rank)
    tokens = torch.randint(0, vocab, (args.batch_size, args.seq_len + 1), generator=gen)

    def train_step():
        if rank == args.straggler and args.straggler_ms > 0:
            time.sleep(args.straggler_ms / 1000.0)  # PLANTED: the straggler
        with record_function("forward"):
            x = embed(tokens[:, :-1])
            for layer in layers:
                x = layer(x)
            loss = F.cross_entropy(head(x).reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        with record_function("backward"):
            loss.backward()
        with record_function("dp_grad_allreduce"):
            grads = [p.grad for p in params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, group=dp_group)
            flat /= dp
            offset = 0
            for g in grads:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup_steps):
        train_step()
    dist.barrier()

    prof_steps = 1 + 1 + args.active
    t0 = time.perf_counter()
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(args.logdir, worker_name=f"rank{rank}", use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for _ in range(prof_steps):
            train_step()
            prof.step()
    if rank == 0:
        print(f"gloo_8proc_cpu: profiled {prof_steps} steps in {time.perf_counter() - t0:.2f}s")
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/gloo_8proc_cpu")
    p.add_argument("--device", default="cpu", choices=["cpu"], help="CPU only (accepted for a uniform command line)")
    p.add_argument("--world-size", type=int, default=8)
    p.add_argument("--tp", type=int, default=4, help="tensor-parallel group size (world_size / tp DP replicas)")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=16)
    p.add_argument("--straggler", type=int, default=5)
    p.add_argument("--straggler-ms", type=float, default=100.0)
    p.add_argument("--warmup-steps", type=int, default=3, help="untraced steps before profiling")
    p.add_argument("--active", type=int, default=2)
    p.add_argument("--port", type=int, default=29561)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.world_size % args.tp:
        raise SystemExit("--world-size must be a multiple of --tp")
    mp.spawn(worker, args=(args,), nprocs=args.world_size, join=True)
    print(f"gloo_8proc_cpu: wrote {sorted(os.listdir(args.logdir))}")


if __name__ == "__main__":
    main()
