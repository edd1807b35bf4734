"""A tiny LightningModule (MLP) trained by a Lightning Trainer with its PyTorchProfiler.

Run `lightning_mlp`: Trainer(profiler=PyTorchProfiler(...)) with the torch.profiler options
passed through (schedule wait=1, warmup=1, active=3; record_shapes, profile_memory, with_stack)
and on_trace_ready=tensorboard_trace_handler(run_dir, worker_name=..., use_gzip=True), so the
trace lands as `<worker>.<stamp>.pt.trace.json.gz`. Lightning steps the profiler at the end of
every training_step and adds its own `[pl][profile]...` and `[pl][module]...` record_function
regions. Synthetic data, no validation, no logger, no checkpoints.
"""
import argparse
import os
import socket
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, schedule, tensorboard_trace_handler

try:  # the unified package first, the standalone one otherwise
    import lightning.pytorch as pl
    from lightning.pytorch.profilers import PyTorchProfiler
except ImportError:
    import pytorch_lightning as pl
    from pytorch_lightning.profilers import PyTorchProfiler


class TinyMLP(pl.LightningModule):
    def __init__(self, in_dim=64, hidden=256, num_classes=10, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)
        )

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default="samples/lightning_mlp")
    p.add_argument("--device", default="cuda", help="cuda or cpu")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    pl.seed_everything(args.seed, workers=True)
    steps = 1 + 1 + args.active + 2  # a couple of extra batches after the active window
    gen = torch.Generator().manual_seed(args.seed)
    xs = torch.randn(steps * args.batch_size, 64, generator=gen)
    ys = torch.randint(0, 10, (steps * args.batch_size,), generator=gen)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys), batch_size=args.batch_size)

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    worker = f"{socket.gethostname().split('.')[0]}_{os.getpid()}"
    profiler = PyTorchProfiler(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=args.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(args.logdir, worker_name=worker, use_gzip=True),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    )
    with tempfile.TemporaryDirectory() as root:  # Lightning's own files stay out of the run dir
        trainer = pl.Trainer(
            accelerator="gpu" if args.device == "cuda" else "cpu",
            devices=1,
            max_epochs=1,
            profiler=profiler,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            default_root_dir=root,
        )
        trainer.fit(TinyMLP(), train_dataloaders=loader)
    print(f"lightning_mlp: wrote {sorted(os.listdir(args.logdir))}")


if __name__ == "__main__":
    main()
