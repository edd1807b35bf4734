"""ResNet-18 training whose DataLoader does a slow CPU transform in the main process.

Run `resnet_slow_dataloader`: torchvision resnet18 (weights=None), SGD, synthetic images that a
Dataset resizes and normalizes with plain numpy (deliberately slow), DataLoader(num_workers=0,
pin_memory=False), batches moved with `.to(device, non_blocking=False)` from pageable memory.
So the DataLoader is a large share of each step, and the host-to-device copies are
`Memcpy HtoD (Pageable -> Device)`. Profiler schedule wait=1, warmup=1, active=3, repeat=2:
two spans, so two trace files in the run directory.
"""
import argparse
import os
import random
import socket

import numpy as np
import torch
import torch.nn as nn
from torchvision.models import resnet18
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


def seed_all(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def bilinear_resize(img, out_h, out_w):
    """Bilinear resize of an HxWxC float32 array with numpy only (slow on purpose)."""
    in_h, in_w = img.shape[:2]
    ys = np.linspace(0, in_h - 1, out_h, dtype=np.float32)
    xs = np.linspace(0, in_w - 1, out_w, dtype=np.float32)
    y0 = np.floor(ys).astype(np.int64)
    x0 = np.floor(xs).astype(np.int64)
    y1 = np.minimum(y0 + 1, in_h - 1)
    x1 = np.minimum(x0 + 1, in_w - 1)
    wy = (ys - y0).astype(np.float32)[:, None, None]
    wx = (xs - x0).astype(np.float32)[None, :, None]
    top = img[y0][:, x0] * (1 - wx) + img[y0][:, x1] * wx
    bottom = img[y1][:, x0] * (1 - wx) + img[y1][:, x1] * wx
    return top * (1 - wy) + bottom * wy


class SlowSyntheticImages(torch.utils.data.Dataset):
    """Deterministic synthetic 'photos' (uint8, larger than the network input) with a slow CPU transform."""

    MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
    STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

    def __init__(self, length, raw_size, out_size, num_classes, seed):
        self.length = length
        self.raw_size = raw_size
        self.out_size = out_size
        self.num_classes = num_classes
        self.seed = seed

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        rng = np.random.default_rng(self.seed + idx)
        raw = rng.integers(0, 256, size=(self.raw_size, self.raw_size, 3), dtype=np.uint8)
        img = raw.astype(np.float32) / 255.0
        img = bilinear_resize(img, self.out_size, self.out_size)
        img = (img - self.MEAN) / self.STD
        img = np.ascontiguousarray(img.transpose(2, 0, 1), dtype=np.float32)
        label = int(rng.integers(0, self.num_classes))
        return torch.from_numpy(img), label


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/resnet_slow_dataloader")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--raw-size", type=int, default=320)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--warmup-steps", type=int, default=3, help="untraced steps before profiling")
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    seed_all(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True

    prof_steps = (1 + 1 + args.active) * args.repeat
    total_steps = args.warmup_steps + prof_steps
    dataset = SlowSyntheticImages(total_steps * args.batch_size, args.raw_size, args.image_size, 1000, args.seed)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=0,
        pin_memory=False,
        generator=torch.Generator().manual_seed(args.seed),
    )

    model = resnet18(weights=None).to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()

    def train_step(images, target):
        images = images.to(device, non_blocking=False)
        target = target.to(device, non_blocking=False)
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    worker = f"{socket.gethostname().split('.')[0]}_{os.getpid()}"

    it = iter(loader)
    for _ in range(args.warmup_steps):
        train_step(*next(it))
    if device.type == "cuda":
        torch.cuda.synchronize()

    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=args.active, repeat=args.repeat),
        on_trace_ready=tensorboard_trace_handler(args.logdir, worker_name=worker, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for step in range(prof_steps):
            images, target = next(it)
            train_step(images, target)
            prof.step()
    print(f"resnet_slow_dataloader: wrote {sorted(os.listdir(args.logdir))}")


if __name__ == "__main__":
    main()
