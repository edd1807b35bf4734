"""A real training job for the capture tests: N CPU ranks (``torch.multiprocessing``, ``gloo``), a small MLP
under DistributedDataParallel, SGD, and ``tb_plugin.capture.enable(FOLDER)`` on every rank. It trains until the
stop file appears (or ``--seconds`` pass), then each rank prints ``rank <r> steps <n>``.

``python tests/capture_job.py FOLDER --ranks 4 --stop-file F`` (a test runs it in a subprocess, with a fast poll
so that a request is picked up in a fraction of a second). ``--enable-ranks 0,1`` enables capture on those ranks
only (the others never answer). ``--launched``: the ranks were started by torchrun (``RANK``, ``WORLD_SIZE`` and
``MASTER_*`` set) through ``python -m tb_plugin.capture``, which enabled capture: the script is left unmodified.

The ranks are forked from the parent, which has imported torch (spawned, each imported it again: 1.5 s of CPU a
rank on the 2-core machine, 7 ranks in the capture tests). Once a rank (or the parent) has done its work, it skips
the interpreter's own teardown: every ``atexit`` handler still runs (capture's ``disable()`` among them: a capture in
flight is written, the heartbeat says "ended"; a forked rank runs them itself, as a spawned one's interpreter would),
and then, last, :func:`_exit_at_once` ends the process without torch's C++ teardown (about 1 s a process on 2 busy
cores, which no test looks at). A process that failed exits the usual way, with its error. Under torchrun the
runner's handlers are registered before the script runs, so a launched rank exits the usual way too.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import time
from pathlib import Path

_FINISHED = False  # set once this process's work is done: _exit_at_once may end it


def _exit_at_once() -> None:
    """The last ``atexit`` handler (registered before any other): the others have run; end the process now."""
    if _FINISHED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def train(rank: int, args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    if not args.launched and (args.enable_ranks is None or rank in args.enable_ranks):
        import tb_plugin.capture

        tb_plugin.capture.enable(args.folder, poll_seconds=args.poll, heartbeat_seconds=args.heartbeat)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                                        torch.nn.Linear(64, 8)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    stop, end, steps = Path(args.stop_file), time.monotonic() + args.seconds, 0
    x, y = torch.randn(16, 32), torch.randn(16, 8)
    while True:
        # every rank leaves at the same step: rank 0 decides, the others learn it in the all-reduce
        flag = torch.tensor([float(stop.exists() or time.monotonic() > end)])
        dist.all_reduce(flag)
        if flag.item() > 0:
            break
        with torch.profiler.record_function("forward_backward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
        optimizer.step()
        steps += 1
        time.sleep(args.step_sleep)
    print(f"rank {rank} steps {steps}", flush=True)
    dist.destroy_process_group()
    global _FINISHED
    _FINISHED = True
    if not args.launched:  # a forked process ends without running the handlers: they run here, _exit_at_once last
        atexit._run_exitfuncs()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--heartbeat", type=float, default=2.0)
    # 100 ms a step: 4 ranks at 20 ms took 0.56 of a core between captures on the 2-core machine, at 50 ms 0.29,
    # at 100 ms 0.17
    parser.add_argument("--step-sleep", type=float, default=0.1)
    parser.add_argument("--enable-ranks", type=lambda text: {int(r) for r in text.split(",")}, default=None)
    parser.add_argument("--launched", action="store_true")
    args = parser.parse_args()
    if args.launched:
        args.ranks = int(os.environ["WORLD_SIZE"])
        train(int(os.environ["RANK"]), args)
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 2000))
    atexit.register(_exit_at_once)  # before torch registers its handlers: it runs after them
    import torch.multiprocessing as mp

    mp.start_processes(train, args=(args,), nprocs=args.ranks, join=True, start_method="fork")
    global _FINISHED
    _FINISHED = True


if __name__ == "__main__":
    main()
