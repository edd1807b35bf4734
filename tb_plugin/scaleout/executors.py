"""Where preprocessing tasks run: a Dask cluster (an address, or a ``LocalCluster`` of processes started here) or,
without Dask, a local pool of processes. Each yields (item, outcome) as tasks finish, and turns a task that could
not run (its worker died every time it was tried, the cluster went away) into an error outcome with the reason.

Dask brings what a home-made pool would not: a task whose worker dies is run again on another worker
(``distributed.scheduler.allowed-failures``), workers can be added while it runs, and the same code drives a laptop,
a Kubernetes cluster (the Dask operator) or a SLURM/PBS allocation (``dask-jobqueue``).
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol, TypeVar

from ..catalog.catalog import TraceFile

T = TypeVar("T")
Outcome = dict[str, Any]
Task = Callable[..., Outcome]

DASK_MISSING = ('Dask is not installed, and --dask/--dask-local (--profiler_dask_scheduler) need it: '
                'pip install "pytorch-tb-profiler[dask]"')


# How long a client waits for a scheduler to answer before giving up (Dask retries the connection until then, as
# a scheduler may still be starting): the CLI's --dask-timeout and TensorBoard's --profiler_dask_timeout.
CONNECT_TIMEOUT_CLI = 30.0
CONNECT_TIMEOUT_SERVER = 10.0  # TensorBoard waits this long at start before parsing locally instead


class MissingDask(RuntimeError):
    pass


def dask_distributed() -> Any:
    """The ``distributed`` module (untyped: held as ``Any``), or :class:`MissingDask` with how to install it."""
    import importlib

    try:
        return importlib.import_module("distributed")
    except ImportError:
        raise MissingDask(DASK_MISSING) from None


class Executor(Protocol):
    workers: int
    description: str

    def run(self, task: Task, items: Iterable[T], *args: Any) -> Iterator[tuple[T, Outcome]]: ...

    def close(self) -> None: ...


def _failed(reason: str) -> Outcome:
    return {"status": "error", "reason": reason}


class LocalPool:
    """Processes on this machine (no Dask). A process that dies (killed, out of memory) breaks the pool and every
    file it still had: those are tried again one at a time, each in a fresh process, so a file that kills its
    process fails alone (with the reason) and the others finish."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self.description = f"a local pool of {self.workers} processes"
        method = "forkserver" if sys.platform.startswith("linux") else "spawn"
        self._context = multiprocessing.get_context(method)
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context)

    def run(self, task: Task, items: Iterable[T], *args: Any) -> Iterator[tuple[T, Outcome]]:
        futures = {self._pool.submit(task, item, *args): item for item in items}
        broken: list[T] = []
        for future in as_completed(futures):
            try:
                yield futures[future], future.result()
            except BrokenProcessPool:
                broken.append(futures[future])
        if not broken:
            return
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context)
        for item in broken:  # one at a time, each in a fresh process: a file that kills its process fails alone
            with ProcessPoolExecutor(max_workers=1, mp_context=self._context) as solo:
                try:
                    yield item, solo.submit(task, item, *args).result()
                except BrokenProcessPool:
                    yield item, _failed("its pool process died while loading it (killed, or out of memory)")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor:
    """Tasks on a Dask cluster: ``address`` of a running scheduler, else a ``LocalCluster`` of ``local_workers``
    single-threaded processes (the parse holds the GIL: processes, not threads, use the cores). ``connect_timeout``:
    seconds to wait for the scheduler at ``address``."""

    def __init__(self, address: str | None = None, local_workers: int | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT_CLI) -> None:
        dd = dask_distributed()
        self._cluster: Any = None
        if address:
            self.client: Any = dd.Client(address, timeout=f"{connect_timeout:g}s")
            self.description = f"the Dask cluster at {address}"
        else:
            self._cluster = dd.LocalCluster(n_workers=max(1, local_workers or 1), threads_per_worker=1,
                                         processes=True, dashboard_address=None)
            self.client = dd.Client(self._cluster)
            self.description = f"a Dask LocalCluster of {max(1, local_workers or 1)} processes"
        self.workers = max(1, len(self.client.scheduler_info().get("workers", {})))

    def run(self, task: Task, items: Iterable[T], *args: Any) -> Iterator[tuple[T, Outcome]]:
        dask_completed = dask_distributed().as_completed
        futures = {}
        for item in items:
            future = self.client.submit(task, item, *args, pure=False)
            futures[future.key] = (future, item)
        for future in dask_completed([f for f, _ in futures.values()]):
            item = futures[future.key][1]
            try:
                outcome = future.result()
            except Exception as err:  # noqa: BLE001 - KilledWorker, a lost scheduler: a reason per file
                outcome = _failed(_dask_reason(err))
            future.release()
            yield item, outcome

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


def _dask_reason(err: BaseException) -> str:
    name = type(err).__name__
    if name == "KilledWorker":
        return ("every Dask worker that tried this file died (killed, or out of memory: give the workers more "
                "memory); run preprocess again to retry it")
    return f"the Dask task did not finish ({name}: {err})"


class DaskRunner:
    """TensorBoard's parses on a Dask cluster (``--profiler_dask_scheduler``): each file is preprocessed by a worker
    into the shared cache (``cache_url``, which the workers and the server both reach), then the server finds it
    there as it finds any preprocessed file (``jobs.scheduler.Runner``). ``connect_timeout``: seconds to wait for
    the scheduler before the server parses locally instead."""

    def __init__(self, address: str, cache_url: str, connect_timeout: float = CONNECT_TIMEOUT_SERVER) -> None:
        self.client: Any = dask_distributed().Client(address, timeout=f"{connect_timeout:g}s")
        self.cache_url = cache_url
        self.description = f"the Dask cluster at {address}"
        self._futures: set[Any] = set()  # held until done: Dask forgets a task nobody refers to

    def submit(self, file: TraceFile, done: Callable[[bool, str | None], None]) -> None:
        from .task import FileSpec, preprocess_file

        future: Any = self.client.submit(preprocess_file, FileSpec.of(file), self.cache_url, pure=False)
        self._futures.add(future)

        def finished(f: Any) -> None:
            self._futures.discard(f)
            try:
                outcome = f.result()
            except Exception as err:  # noqa: BLE001 - KilledWorker, a lost scheduler
                done(False, _dask_reason(err))
                return
            done(outcome.get("status") == "ok", outcome.get("reason"))

        future.add_done_callback(finished)

    def close(self) -> None:
        self.client.close()
