"""Small TransformerEncoder trained under bf16 autocast with AdamW.

Run `transformer_bf16`: nn.TransformerEncoder (4 layers, d_model 512, 8 heads, batch-first)
with a token embedding and a classifier head, torch.autocast('cuda', dtype=torch.bfloat16),
AdamW. Each step is split into record_function regions "forward", "backward" and "optimizer",
and calls `loss.item()` (a host-device synchronization). Profiled with with_modules=True and
with_flops=True on top of record_shapes / profile_memory / with_stack. Schedule wait=1,
warmup=1, active=3, repeat=1: one trace file.
"""
import argparse
import os
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
    ) as prof:
        for step in range(prof_steps):
            loss = train_step(*batches[args.warmup_steps + step])
            prof.step()
    print(f"transformer_bf16: last loss {loss:.4f}; wrote {sorted(os.listdir(args.logdir))}")


if __name__ == "__main__":
    main()
