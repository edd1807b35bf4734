"""Loader CPU per small file: a process per file against small files sharing one (``jobs.local.groups``).

Runs the real loader code (``jobs.worker.run_jobs``, the stored views included) in processes from the fork
server, as the scheduler does, on every trace of a folder: ``each`` starts a process per file, one after another;
``shared`` one process for them all. It prints the wall time, the CPU the loader processes used (the fork server's
children, as reaped) per file::

    python benchmarks/make_ranks.py samples/gloo_8proc_cpu --ranks 48 --out /tmp/ranks48
    python benchmarks/bench_shared_loaders.py /tmp/ranks48 --repeat 2
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from tb_plugin.api.warm import WarmViews
from tb_plugin.catalog.catalog import TraceFile
from tb_plugin.jobs.forkserver import main_module_hidden, process_context
from tb_plugin.jobs.worker import run_jobs


def _file(path: Path) -> TraceFile:
    st = path.stat()
    return TraceFile(run="job", worker=path.name.split(".")[0], span="1", url=str(path), size=st.st_size,
                     mtime=st.st_mtime)


def _children_cpu() -> float:
    """CPU seconds of the reaped children of this process's children (the fork server's loader processes)."""
    return sum(c.cpu_times().children_user + c.cpu_times().children_system for c in psutil.Process().children())


def run(ctx: Any, files: list[Path], shared: bool) -> tuple[float, float]:
    """(wall seconds, loader CPU seconds) to load ``files`` one process each, or all in one."""
    cache = Path(tempfile.mkdtemp(prefix="bench_shared_"))
    stored = WarmViews()
    items, conns = [], []
    for i, f in enumerate(files):
        recv, send = ctx.Pipe(duplex=False)
        items.append((_file(f), str(cache / f"e{i}"), ctx.Value("d", 0.0, lock=False), send))
        conns.append(recv)
    cpu0, t0 = _children_cpu(), time.monotonic()
    for group in ([items] if shared else [[item] for item in items]):
        with main_module_hidden():
            process = ctx.Process(target=run_jobs, args=(group, 1, stored), daemon=True)
            process.start()
        for item in group:
            item[3].close()
        process.join()
    wall = time.monotonic() - t0
    answers = [c.recv()[0] for c in conns]
    assert answers.count("ok") == len(files), answers
    time.sleep(0.2)  # the fork server reaps its children
    return wall, _children_cpu() - cpu0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    files = sorted(args.folder.glob("*.pt.trace.json*"))
    ctx = process_context(["tb_plugin.api.warm"])
    run(ctx, files[:1], shared=True)  # the fork server started and warm
    for mode in ("each", "shared") * args.repeat:
        wall, cpu = run(ctx, files, mode == "shared")
        print(f"{mode:6s} {len(files)} files: wall {wall:.2f} s, loader CPU {cpu:.2f} s = "
              f"{cpu / len(files) * 1e3:.1f} ms a file")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
