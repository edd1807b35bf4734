"""Two-stage pipeline (P2P send/recv) plus a second process group over the same ranks; rank 1 straggles.

Run `pp_two_groups` (issue 18; planted cause: straggler, rank 1): torch.multiprocessing.spawn starts
2 processes, one GPU each (NCCL). Rank 0 holds stage 0 (token embedding + 2 MLP blocks), rank 1
stage 1 (2 MLP blocks + LayerNorm + an output projection tied to the embedding, Megatron style).
Each step runs a GPipe schedule over 4 micro-batches: rank 0 sends every micro-batch's activations
to rank 1 with `dist.isend`/`dist.irecv` on the default group, rank 1 runs all forwards, then all
backwards and sends the activation gradients back the same way. After the backward, the tied
embedding's gradient is all-reduced between the two stages on a SECOND process group,
`dist.new_group([0, 1])` (the "embedding group"), so the trace has two process groups over the
same ranks. Rank 1 sleeps --straggler-ms (10 ms) at the start of each step, so rank 0 waits for it
in its first receive. Worker names `rank0` / `rank1`. Schedule wait=1, warmup=1, active=2, repeat=1.
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
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Stage0(nn.Module):
    def __init__(self, vocab, d, blocks):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(blocks)])

    def tied_weight(self):
        return self.embed.weight

    def forward(self, tokens):
        return self.blocks(self.embed(tokens))


class Stage1(nn.Module):
    def __init__(self, vocab, d, blocks):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d) for _ in range(blocks)])
        self.norm = nn.LayerNorm(d)
        self.out_weight = nn.Parameter(torch.empty(vocab, d))  # copy of stage 0's embedding (tied)

    def tied_weight(self):
        return self.out_weight

    def forward(self, x):
        return F.linear(self.norm(self.blocks(x)), self.out_weight)


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    if args.device == "cuda":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        dist.init_process_group(args.backend, rank=rank, world_size=2, device_id=device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)
        dist.init_process_group(args.backend, rank=rank, world_size=2)
    # The second process group over the same two ranks: first and last stage share the embedding.
    embed_group = dist.new_group([0, 1], group_desc="embedding_group")

    vocab, d, blocks, seq, mb, n_mb = (512, 32, 2, 16, 2, 4) if args.tiny else (8192, args.d_model, args.blocks, args.seq_len, args.micro_batch, args.micro_batches)
    torch.manual_seed(args.seed)  # same embedding on both stages
    embed_init = torch.randn(vocab, d) * 0.02
    torch.manual_seed(args.seed + 1 + rank)
    model = (Stage0 if rank == 0 else Stage1)(vocab, d, blocks)
    with torch.no_grad():
        model.tied_weight().copy_(embed_init)
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seed_all(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, vocab, (n_mb, mb, seq), generator=gen).to(device)  # both ranks make the same data

    def train_step():
        if rank == 1 and args.straggler_ms > 0:
            time.sleep(args.straggler_ms / 1000.0)  # PLANTED: the straggler
        if rank == 0:
            outs = []
            with record_function("pp_forward"):
                for i in range(n_mb):
                    out = model(tokens[i])
                    dist.isend(out.detach(), dst=1).wait()
                    outs.append(out)
            with record_function("pp_backward"):
                for i in range(n_mb):
                    grad = torch.empty_like(outs[i])
                    dist.irecv(grad, src=1).wait()
                    outs[i].backward(grad)
        else:
            inps, losses = [], []
            with record_function("pp_forward"):
                for i in range(n_mb):
                    inp = torch.empty(mb, seq, d, device=device)
                    dist.irecv(inp, src=0).wait()
                    inp.requires_grad_()
                    logits = model(inp)
                    # next-token prediction on the same tokens (both ranks hold them)
                    loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), tokens[i][:, 1:].reshape(-1)) / n_mb
                    inps.append(inp)
                    losses.append(loss)
            with record_function("pp_backward"):
                for i in range(n_mb):
                    losses[i].backward()
                    dist.isend(inps[i].grad, dst=0).wait()
        with record_function("embedding_grad_allreduce"):
            dist.all_reduce(model.tied_weight().grad, group=embed_group)
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
        print(f"pp_two_groups: profiled {prof_steps} steps in {time.perf_counter() - t0:.2f}s")
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/pp_two_groups")
    p.add_argument("--device", default="cuda")
    p.add_argument("--backend", default="nccl")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--blocks", type=int, default=2, help="MLP blocks per stage")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--micro-batches", type=int, default=4)
    p.add_argument("--straggler-ms", type=float, default=10.0)
    p.add_argument("--tiny", action="store_true", help="tiny sizes for a CPU dry run")
    p.add_argument("--warmup-steps", type=int, default=3, help="untraced steps before profiling")
    p.add_argument("--active", type=int, default=2)
    p.add_argument("--port", type=int, default=29551)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.device == "cuda" and torch.cuda.device_count() < 2:
        raise SystemExit(f"need 2 GPUs, found {torch.cuda.device_count()}")
    mp.spawn(worker, args=(args,), nprocs=2, join=True)
    print(f"pp_two_groups: wrote {sorted(os.listdir(args.logdir))}")


if __name__ == "__main__":
    main()
