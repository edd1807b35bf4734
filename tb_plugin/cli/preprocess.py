"""``pytorch-tb-profiler preprocess LOGDIR``: parse every trace into a cache that TensorBoard reads
(``--profiler_cache_dir``), on a Dask cluster (``--dask ADDRESS``), a Dask ``LocalCluster`` (``--dask-local N``) or,
without Dask, a local pool. Exit codes: 0 every file is in the cache, 1 some failed (listed with reasons; a rerun
does only what is missing), 2 the logdir does not exist or holds no trace, or an argument is wrong, 6 a store (the
logdir's or the cache's) or the Dask scheduler cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: building the command line parser stays light (numpy, pyarrow, pandas)
    from ..scaleout.executors import Executor

EXIT_FAILED_FILES, EXIT_UNUSABLE, EXIT_UNREACHABLE = 1, 2, 6


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = commands.add_parser("preprocess", help="parse every trace of a logdir into a (shared) cache, on a Dask "
                            "cluster or locally, so TensorBoard shows it without parsing")
    p.add_argument("logdir", metavar="LOGDIR", help="a logdir, local or a URL (s3://, az://, gs://, ...)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--dask", metavar="ADDRESS", help="a running Dask scheduler, e.g. tcp://scheduler:8786")
    where.add_argument("--dask-local", metavar="N", type=int, help="start a Dask LocalCluster of N processes")
    p.add_argument("--workers", type=int, help="processes of the local pool without Dask (default: the cores but one)")
    p.add_argument("--cache", metavar="URL", help="the cache: a shared path or a URL TensorBoard's "
                   "--profiler_cache_dir names too (default: ~/.cache/pytorch-tb-profiler)")
    p.add_argument("--any-json", action="store_true", help="also *.json[.gz] traces not named *.pt.trace.json")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def run_preprocess(args: argparse.Namespace) -> int:
    from ..jobs.cache import default_cache_dir
    from ..jobs.shared import SharedCache
    from ..scaleout.executors import LocalPool, MissingDask
    from ..scaleout.preprocess import PreprocessError, plan, run

    if (args.dask_local is not None and args.dask_local < 1) or (args.workers is not None and args.workers < 1):
        print("pytorch-tb-profiler: error: --dask-local and --workers need at least 1", file=sys.stderr)
        return EXIT_UNUSABLE
    try:
        cache = SharedCache(args.cache or str(default_cache_dir()))
        todo = plan(args.logdir, cache, args.any_json)
    except PreprocessError as err:
        print(f"pytorch-tb-profiler: error: {err}", file=sys.stderr)
        return EXIT_UNREACHABLE if err.unreachable else EXIT_UNUSABLE
    except Exception as err:  # noqa: BLE001 - a cache URL of no known form, a missing backend package
        print(f"pytorch-tb-profiler: error: cannot use the cache {args.cache}: {err}", file=sys.stderr)
        return EXIT_UNUSABLE
    print(f"{len(todo.todo)} traces to preprocess, {len(todo.done)} already in {cache.url}", file=sys.stderr)
    if not todo.todo:  # nothing to do: no cluster to start or reach
        report = run(todo, cache, LocalPool(1))
        _print(report.as_dict(), args.json)
        return EXIT_FAILED_FILES if report.failed else 0
    try:
        executor = _executor(args, len(todo.todo))
    except MissingDask as err:
        print(f"pytorch-tb-profiler: error: {err}", file=sys.stderr)
        return EXIT_UNUSABLE
    except OSError as err:  # a scheduler that cannot be reached
        print(f"pytorch-tb-profiler: error: cannot reach the Dask scheduler {args.dask}: {err}", file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        print(f"on {executor.description}", file=sys.stderr)
        report = run(todo, cache, executor)
    finally:
        executor.close()
    _print(report.as_dict(), args.json)
    return EXIT_FAILED_FILES if report.failed else 0


def _executor(args: argparse.Namespace, files: int) -> Executor:
    from ..jobs.budget import loader_slots
    from ..scaleout.executors import DaskExecutor, LocalPool

    if args.dask:
        return DaskExecutor(address=args.dask)
    if args.dask_local:
        return DaskExecutor(local_workers=args.dask_local)
    return LocalPool(min(args.workers or loader_slots(), max(1, files)))


def _print(report: dict[str, object], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['parsed']} parsed, {report['skipped']} already done, {report['failed']} failed "
          f"({report['bytes']} bytes in {report['seconds']} s, {report['mb_per_s']} MB/s)")
    peaks = report.get("worker_peak_rss_mb") or []
    if peaks:  # one figure per worker process that parsed something, smallest first
        print(f"peak memory per worker: {', '.join(f'{mb:,.1f} MB' for mb in peaks)}")  # type: ignore[attr-defined]
    for failure in report["failures"]:  # type: ignore[attr-defined]
        print(f"  failed: {failure['file']}: {failure['reason']}")
