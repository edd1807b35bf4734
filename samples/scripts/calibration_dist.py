"""Calibration pairs (issue 25), 2 ranks (or `--ranks N`): one planted cause, recorded as planted or with its fix.

`--case NAME --variant planted|fixed --logdir DIR`: torch.multiprocessing.spawn starts 2 ranks, one GPU
each over NCCL (`--device cpu --tiny`: gloo on the CPU, a dry run), and each writes its own trace into
DIR with worker name `rank0` / `rank1` / .... `--ranks 4` (straggler_host, grad_accum_allreduce; the pipeline is
two stages) records the same cause on 4 GPUs. What each case plants and fixes is in calibration_pairs.py:

  straggler_host   DDP; rank 1 alone calls slow_metric_logging() (~30 ms of pure Python) every step
                   -> nobody calls it
  pipeline_bubble  2-stage GPipe over isend/irecv, the global batch in 2 micro-batches
                   -> the same global batch in 8 micro-batches
  grad_accum_allreduce  DDP, 4 accumulated micro-batches, each backward all-reduces
                   -> ddp.no_sync() for all but the last micro-batch

Recording as calibration.py's: a few untraced warm-up and timed steps, a barrier, then profiler
schedule(wait=1, warmup=1, active=4, repeat=1) with record_shapes, profile_memory and with_stack; each
rank prints a `CALIBRATION_RESULT {json}` line.
"""
import argparse
import contextlib
import json
import os
import sys
import time

# NVLink multicast stays off on shared machines (inherited by the spawned ranks).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bottleneck as bn  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from calibration import Case, clean_defaults, on_device, record, trace_files, train_step  # noqa: E402
from calibration_pairs import PAIRS  # noqa: E402
from pp_two_groups import Stage0, Stage1  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.profiler import record_function  # noqa: E402

CASES = tuple(p for p, spec in PAIRS.items() if spec["script"] == "calibration_dist.py")


# --------------------------------------------------------------------------- straggler_host

def slow_metric_logging(iterations):
    """Pure-Python bookkeeping that only rank 1 does every step (think: a metrics logger walking its
    history). One Python frame with no calls inside its loop, so the stack tracer records one event."""
    acc = 0.0
    for i in range(iterations):
        acc += (i % 7) * 0.5
    return acc


def iterations_for(ms):
    """How many loop iterations of slow_metric_logging take `ms` milliseconds on this host."""
    n = 200_000
    best = min(_timed(slow_metric_logging, n) for _ in range(3))
    return max(1, int(n * ms / (best * 1e3)))


def _timed(fn, *a):
    t = time.perf_counter()
    fn(*a)
    return time.perf_counter() - t


def case_straggler_host(args, rank, device, fixed):
    width, blocks, batch = (64, 2, 16) if args.tiny else (7168, 2, 1024)
    torch.manual_seed(args.seed)  # the same initial weights on both ranks (DDP broadcasts anyway)
    model = on_device(device, lambda: bn.ResidualMLP(width, blocks))
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(args.seed + rank)
    x = torch.randn(batch, width, generator=gen).to(device)
    y = torch.randint(0, 10, (batch,), generator=gen).to(device)
    slow = rank == 1 and not fixed
    n = iterations_for(args.straggler_ms) if slow else 0

    def step():
        if slow:
            slow_metric_logging(n)  # PLANTED: ~30 ms of host work that only rank 1 does
        train_step(ddp, opt, x, y)

    return Case(step, notes={"straggler_iterations": n})


# --------------------------------------------------------------------------- pipeline_bubble

def case_pipeline_bubble(args, rank, device, fixed):
    # Stage 0: embedding + 2 blocks; stage 1: 2 blocks + LayerNorm + output projection and the loss (a
    # quarter of a block more at d_model 4096): the two stages take about as long, so the idle time is the
    # bubble. d_model 4096 makes every micro-batch GPU work (~5 ms a stage at 8 micro-batches) well above
    # the host's ~4 ms of Python per micro-batch under the profiler's stack tracer: at d_model 1536 the
    # 8-micro-batch twin was host-bound and slower than the planted run (recorded 2026-11-27).
    vocab, d, seqs, seq = (512, 32, 32, 16) if args.tiny else (8192, 4096, 32, 256)
    n_mb = 8 if fixed else 2  # PLANTED: 2 micro-batches (bubble 1/3). FIX: 8 (bubble 1/9)
    mb = seqs // n_mb
    torch.manual_seed(args.seed + rank)
    model = on_device(device, lambda: Stage0(vocab, d, 2) if rank == 0 else Stage1(vocab, d, 2))
    if rank == 1:
        with torch.no_grad():
            nn.init.normal_(model.out_weight, std=0.02)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, vocab, (seqs, seq), generator=gen).to(device)  # both ranks hold the batch
    micro = list(tokens.split(mb))

    def stage0():
        outs = []
        for i, t in enumerate(micro):
            with record_function(f"forward_mb{i}"):
                out = model(t)
                dist.isend(out.detach(), dst=1).wait()
            outs.append(out)
        for i, out in enumerate(outs):
            with record_function(f"backward_mb{i}"):
                grad = torch.empty_like(out)
                dist.irecv(grad, src=1).wait()
                out.backward(grad)

    def stage1():
        inps, losses = [], []
        for i, t in enumerate(micro):
            with record_function(f"forward_mb{i}"):
                inp = torch.empty(t.shape[0], seq, d, device=device)
                dist.irecv(inp, src=0).wait()
                inp.requires_grad_()
                logits = model(inp)
                loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), t[:, 1:].reshape(-1)) / n_mb
            inps.append(inp)
            losses.append(loss)
        for i, (inp, loss) in enumerate(zip(inps, losses)):
            with record_function(f"backward_mb{i}"):
                loss.backward()
                dist.isend(inp.grad, dst=0).wait()

    def step():
        (stage0 if rank == 0 else stage1)()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return Case(step, notes={"micro_batches": n_mb, "micro_batch": mb})


# --------------------------------------------------------------------------- grad_accum_allreduce

def case_grad_accum_allreduce(args, rank, device, fixed):
    # 805M parameters (3.2 GB of fp32 gradients): each all-reduce (~9 ms over NVLink) outlasts the micro-batch's
    # compute and DDP's host work, so the extra all-reduces are on the step's path. With 103M parameters (the
    # previous recording) they overlapped the host-bound backward and no_sync() measured no faster.
    width, blocks, micro, n_micro = (64, 2, 8, 4) if args.tiny else (8192, 12, 256, 4)
    torch.manual_seed(args.seed)
    model = on_device(device, lambda: bn.ResidualMLP(width, blocks))
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(args.seed + rank)
    xs = torch.randn(n_micro, micro, width, generator=gen).to(device)
    ys = torch.randint(0, 10, (n_micro, micro), generator=gen).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        for i in range(n_micro):
            # PLANTED: DDP all-reduces the gradients after every micro-batch's backward.
            # FIX: no_sync() for all but the last micro-batch (the gradients accumulate locally).
            sync_now = not fixed or i == n_micro - 1
            with record_function(f"micro_batch{i}"), (contextlib.nullcontext() if sync_now else ddp.no_sync()):
                loss = F.cross_entropy(ddp(xs[i]), ys[i]) / n_micro
                loss.backward()
        opt.step()

    return Case(step, notes={"micro_batches": n_micro})


# --------------------------------------------------------------------------- recording

def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    if args.device == "cuda":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        dist.init_process_group("nccl", rank=rank, world_size=args.ranks, device_id=device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    clean_defaults(device)
    bn.seed_all(args.seed + rank)
    fixed = args.variant == "fixed"
    case = globals()[f"case_{args.case}"](args, rank, device, fixed)
    info = record(case, device, args.logdir, f"rank{rank}", barrier=dist.barrier)
    result = {
        "pair": args.case, "variant": args.variant, "rank": rank,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, **info, **case.notes,
    }
    print("CALIBRATION_RESULT " + json.dumps(result), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--variant", required=True, choices=("planted", "fixed"))
    p.add_argument("--logdir", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="tiny sizes for a CPU dry run (gloo)")
    p.add_argument("--ranks", type=int, default=2, help="processes (GPUs); pipeline_bubble takes 2 only")
    p.add_argument("--straggler-ms", type=float, default=30.0, help="straggler_host: rank 1's host work per step")
    p.add_argument("--port", type=int, default=None, help="default: one per case and variant")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.port is None:
        args.port = 29610 + 10 * CASES.index(args.case) + (args.variant == "fixed")
    if args.case == "pipeline_bubble" and args.ranks != 2:
        raise SystemExit("pipeline_bubble has two stages: --ranks 2")
    if args.device == "cuda" and torch.cuda.device_count() < args.ranks:
        raise SystemExit(f"need {args.ranks} GPUs, found {torch.cuda.device_count()}")
    start = time.perf_counter()
    mp.spawn(worker, args=(args,), nprocs=args.ranks, join=True)
    print("CALIBRATION_FILES " + json.dumps({"trace_files": trace_files(args.logdir),
                                             "process_s": round(time.perf_counter() - start, 3)}), flush=True)


if __name__ == "__main__":
    main()
