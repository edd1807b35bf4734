"""``python -m tb_plugin.capture --logdir FOLDER train.py ARGS`` (or ``-m package.module ARGS``): run an unmodified
training script with capture enabled, as ``python -m cProfile`` runs one under the profiler.

Under torchrun, each rank runs the runner: ``torchrun --nproc-per-node 8 -m tb_plugin.capture --logdir FOLDER
train.py ARGS``, or ``torchrun --no-python python -m tb_plugin.capture --logdir FOLDER train.py ARGS``. A script
that starts its own ranks (``torch.multiprocessing.spawn``) calls ``tb_plugin.capture.enable`` in the function
each rank runs instead: the ranks it spawns do not run through the runner.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Sequence

from . import enable


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m tb_plugin.capture",
        description="Run a training script with capture enabled: the page's Capture dialog or `pytorch-tb-profiler "
                    "capture FOLDER` then records its next steps on every rank, without a restart.",
        usage="%(prog)s --logdir FOLDER [options] (script.py | -m module) [args ...]")
    # no option of the runner is a prefix of one of torchrun's (--run would be taken as an ambiguous --run-path)
    ap.add_argument("--logdir", required=True, metavar="FOLDER",
                    help="the run folder: where traces go and requests are read, a local folder or a URL (s3://, "
                         "az://, gs://, ...)")
    ap.add_argument("--poll", type=float, metavar="SECONDS", help="how often the folder is read (default 1 s, 5 s "
                    "on an object store)")
    ap.add_argument("--heartbeat", type=float, metavar="SECONDS", help="how often each rank says it is alive and "
                    "at which step (default 10 s, 30 s on an object store)")
    ap.add_argument("-m", dest="module", metavar="MODULE", help="run a module, as python -m does")
    return ap


_VALUED = ("--logdir", "--poll", "--heartbeat", "-m")


def split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The runner's own options, and what follows them: the script and its arguments, or (after ``-m MODULE``)
    the module's arguments, which may look like the runner's options and are never read as them."""
    own: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in _VALUED:
            own += argv[i:i + 2]
            i += 2
            if token == "-m":
                break
            continue
        if token.split("=", 1)[0] in _VALUED[:-1] or token in ("-h", "--help"):
            own.append(token)
            i += 1
            continue
        break
    return own, list(argv[i:])


def main(argv: Sequence[str] | None = None) -> None:
    ap = parser()
    own, rest = split(sys.argv[1:] if argv is None else argv)
    ns = ap.parse_args(own)
    if ns.module is None and not rest:
        ap.error("give the script to run (or -m MODULE)")
    enable(ns.logdir, poll_seconds=ns.poll, heartbeat_seconds=ns.heartbeat)
    if ns.module is not None:
        sys.argv = [ns.module, *rest]
        runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
        return
    script, *script_args = rest
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
