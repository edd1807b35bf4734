"""Capture a running 2-rank NCCL DDP job from outside, as the page's Capture dialog does: the `capture_nccl` sample.

The job (started here in a subprocess: torch.multiprocessing.spawn, one GPU per rank, DistributedDataParallel over
NCCL) trains a small CNN on synthetic GPU-resident data with `tb_plugin.capture.enable(LOGDIR)` on every rank and
no profiler code at all. Once both ranks listen, this script asks for a trace of the next `--steps` optimizer steps
through the CLI (`python -m tb_plugin.cli capture LOGDIR --steps 3 --record-shapes --profile-memory --with-stack
--json`), waits for it, checks that both ranks recorded the same steps (the step agreed through rank 0's plan, and
the `ProfilerStep#N` numbers in both files), stops the job, and leaves in LOGDIR the two traces
`rank0.<stamp>.pt.trace.json.gz` and `rank1.<stamp>.pt.trace.json.gz` (one span). The request files (`.capture/`)
are removed unless `--keep-requests`. Exit code 0 when all of that holds, 1 otherwise; the last line of stdout is
the result as JSON.

    python3 samples/scripts/capture_nccl.py --logdir samples/capture_nccl           # 2 GPUs
    python3 samples/scripts/capture_nccl.py --logdir /tmp/capture_dry --cpu         # dry run: gloo on the CPU

Run from the repository root (the script puts it on sys.path for the job and the CLI).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# NVLink multicast stays off on shared machines (inherited by the spawned ranks).
for _name, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                      ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_name, _value)


def rank_main(rank: int, args: argparse.Namespace) -> None:
    """One rank of the job: DDP over NCCL (gloo with --cpu), capture enabled, no profiler code."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel

    sys.path.insert(0, str(REPO))
    import tb_plugin.capture

    tb_plugin.capture.enable(args.logdir, poll_seconds=0.5)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(args.port)
    if args.cpu:
        device = torch.device("cpu")
        torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    else:
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        dist.init_process_group("nccl", rank=rank, world_size=args.ranks, device_id=device)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(256, 100)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[rank] if not args.cpu else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    size = 16 if args.cpu else 64
    gen = torch.Generator().manual_seed(rank)
    images = torch.randn(8, args.batch, 3, size, size, generator=gen).to(device)
    labels = torch.randint(0, 100, (8, args.batch), generator=gen).to(device)
    stop, steps = Path(args.stop_file), 0
    while True:
        flag = torch.tensor([float(stop.exists())], device=device)
        dist.all_reduce(flag)  # every rank leaves at the same step
        if flag.item() > 0:
            break
        loss = nn.functional.cross_entropy(ddp(images[steps % 8]), labels[steps % 8])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        steps += 1
    print(f"rank {rank}: {steps} steps", flush=True)
    dist.destroy_process_group()


def job_main(args: argparse.Namespace) -> None:
    import torch.multiprocessing as mp

    mp.spawn(rank_main, args=(args,), nprocs=args.ranks, join=True)


def profiler_steps(path: Path) -> tuple[list[int], dict[str, object]]:
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    steps = sorted({int(str(e["name"]).split("#")[1]) for e in data["traceEvents"]
                    if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")})
    return steps, data.get("distributedInfo", {})


def wait_listening(logdir: Path, ranks: int, job: subprocess.Popen[bytes], timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if job.poll() is not None:
            raise SystemExit(f"the job exited with {job.returncode} before listening")
        listeners = list((logdir / ".capture").glob("listener-rank*.json"))
        if len(listeners) >= ranks and all(json.loads(f.read_text()).get("step", 0) > 20 for f in listeners):
            return
        time.sleep(0.5)
    raise SystemExit(f"the job did not listen within {timeout:g} s")


def request(args: argparse.Namespace, env: dict[str, str]) -> tuple[int, dict[str, object]]:
    """The capture through the CLI, as a user would type it; its exit code and JSON answer."""
    command = [sys.executable, "-m", "tb_plugin.cli", "capture", args.logdir, "--steps", str(args.steps),
               "--record-shapes", "--profile-memory", "--with-stack", "--json",
               "--activities", "cpu" if args.cpu else "cpu,cuda"]
    print("$ " + " ".join(command[1:]), file=sys.stderr)
    out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    sys.stderr.write(out.stderr)
    try:
        return out.returncode, json.loads(out.stdout)
    except json.JSONDecodeError:
        return out.returncode, {"stdout": out.stdout}


def check(logdir: Path, answer: dict[str, object], code: int, steps: int) -> dict[str, object]:
    """What the sample shows: every rank wrote, the plan's start step, and the same ProfilerStep numbers."""
    files = [logdir / str(f) for f in answer.get("files", [])]  # type: ignore[attr-defined]
    per_rank = {f.name: profiler_steps(f) for f in files if f.exists()}
    recorded = {name: s for name, (s, _) in per_rank.items()}
    start = answer.get("start_step")
    expected = list(range(int(start) + 1, int(start) + 1 + steps)) if isinstance(start, int) else None
    ok = (code == 0 and answer.get("state") == "written" and len(per_rank) == answer.get("world_size") == 2
          and all(s == expected for s in recorded.values()))
    return {"ok": ok, "cli_exit_code": code, "state": answer.get("state"), "summary": answer.get("summary"),
            "message": answer.get("message"), "start_step": start, "span": answer.get("span"),
            "ranks": {name: {"profiler_steps": s, "rank": info.get("rank"), "backend": info.get("backend")}
                      for name, (s, info) in per_rank.items()},
            "sizes": {f.name: f.stat().st_size for f in files if f.exists()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logdir", default=str(REPO / "samples" / "capture_nccl"))
    ap.add_argument("--cpu", action="store_true", help="dry run: gloo on the CPU")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--port", type=int, default=29533)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--keep-requests", action="store_true", help="keep LOGDIR/.capture/ (requests, plan, statuses)")
    ap.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--stop-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.job:
        job_main(args)
        return 0
    logdir = Path(args.logdir).resolve()
    logdir.mkdir(parents=True, exist_ok=True)
    stop = logdir.parent / f".{logdir.name}.stop"
    stop.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    job_cmd = [sys.executable, __file__, "--job", "--logdir", str(logdir), "--stop-file", str(stop),
               "--ranks", str(args.ranks), "--batch", str(args.batch), "--port", str(args.port)] + (
               ["--cpu"] if args.cpu else [])
    job = subprocess.Popen(job_cmd, env=env, cwd=REPO)
    try:
        wait_listening(logdir, args.ranks, job, args.timeout)
        code, answer = request(argparse.Namespace(**{**vars(args), "logdir": str(logdir)}), env)
    finally:
        stop.touch()
        job.wait(120)
        stop.unlink(missing_ok=True)
    result = check(logdir, answer, code, args.steps)
    if not args.keep_requests:
        shutil.rmtree(logdir / ".capture", ignore_errors=True)
    print(json.dumps(result))
    return 0 if result["ok"] and job.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
