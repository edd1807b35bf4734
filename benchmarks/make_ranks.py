"""Make a synthetic N-rank distributed run from a real multi-rank one (for scale tests of the Distributed view).

Each new rank is a byte copy of one of the source ranks with its ``distributedInfo`` replaced (``rank``,
``world_size``, and the process groups' ``pg_size``/``ranks`` set to the whole world), written as
``rank<N>.<stamp>.pt.trace.json.gz``. Event contents are not changed, so collective counts and sequences stay
consistent across ranks and matching by (process group, sequence) pairs every instance.

A straggler is planted: rank ``--straggler`` (default ``N // 3``) is a copy of the source rank the others wait for
(the one with the least time in collectives: in ``samples/ddp_resnet`` rank 1, which sleeps 5 ms per step), and
every other rank copies the other sources round robin, so every other rank waits for that one rank.

Fast enough for 1,024 ranks: each source is read and inflated once; a new rank is the source's bytes with the
``distributedInfo`` object spliced in (no JSON encoding of the events), deflated at level 1 (ISA-L when ``isal`` is
installed, else zlib) in a pool of processes (``--jobs``, default every core).

    python benchmarks/make_ranks.py samples/ddp_resnet --ranks 1024 --out .bench/runs/ddp_x1024
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

try:  # ISA-L deflate: several times faster than zlib at level 1
    from isal import igzip as _gz
except ImportError:  # pragma: no cover - zlib fallback where isal is not installed
    _gz = gzip  # type: ignore[no-redef]

INFO_KEY = b'"distributedInfo"'


@dataclass(frozen=True)
class Source:
    """One real rank: its inflated bytes cut around the value of ``distributedInfo``."""

    stamp: str  # the number in the file name after the worker (kept in the copies' names)
    head: bytes  # everything before the distributedInfo object
    tail: bytes  # everything after it
    info: dict[str, Any]
    collective_us: float  # time in collectives (NCCL kernels, else gloo host spans): the straggler waits least


def read_source(path: Path) -> Source:
    """Inflate one trace once and find its ``distributedInfo`` object (an error where it has none)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        raw: bytes = fh.read()
    at = raw.find(INFO_KEY)
    if at < 0:
        raise ValueError(f"{path} has no distributedInfo: not a rank of a distributed run")
    start = raw.index(b"{", at + len(INFO_KEY))
    window = raw[start:start + 1_000_000].decode("utf-8", errors="replace")
    info, length = json.JSONDecoder().raw_decode(window)
    end = start + len(window[:length].encode("utf-8"))
    stamp = re.search(r"\.(\d+)\.pt\.trace", path.name)
    return Source(stamp=stamp.group(1) if stamp else "1", head=raw[:start], tail=raw[end:], info=info,
                  collective_us=_collective_us(json.loads(raw)))


def _collective_us(doc: dict[str, Any]) -> float:
    """Total duration of the trace's NCCL kernels, or (a CPU job) of its gloo host spans."""
    events = [e for e in doc.get("traceEvents", []) if isinstance(e, dict)]
    for prefix in (("ncclDevKernel", "ncclKernel"), ("gloo:",)):
        total = sum(float(e.get("dur") or 0) for e in events if str(e.get("name", "")).startswith(prefix))
        if total:
            return total
    return 0.0


def new_info(info: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    """``info`` of a source rank rewritten for rank ``rank`` of ``world``: every process group spans the world."""
    out = {**info, "rank": rank, "world_size": world}
    if isinstance(info.get("pg_config"), list):
        out["pg_config"] = [{**pg, "pg_size": world, "ranks": list(range(world))} for pg in info["pg_config"]]
    return out


def assign(sources: list[Source], world: int, straggler: int | None) -> list[int]:
    """The source index of every new rank: the straggler copies the source that waits least, the others the
    remaining sources round robin (every source round robin where there is one source or no straggler)."""
    if straggler is None or len(sources) < 2 or not 0 <= straggler < world:
        return [rank % len(sources) for rank in range(world)]
    slow = min(range(len(sources)), key=lambda i: sources[i].collective_us)
    others = [i for i in range(len(sources)) if i != slow]
    out, k = [], 0
    for rank in range(world):
        if rank == straggler:
            out.append(slow)
        else:
            out.append(others[k % len(others)])
            k += 1
    return out


_SOURCES: list[Source] = []  # set in the parent before the pool forks (inherited by its processes)


def _write(job: tuple[Path, int, int, int]) -> int:
    """Write rank ``rank`` of ``world`` as a copy of source ``src`` into ``out``; returns the bytes written."""
    out, rank, world, src = job
    source = _SOURCES[src]
    body = b"".join((source.head, json.dumps(new_info(source.info, rank, world)).encode(), source.tail))
    data = _gz.compress(body, compresslevel=1)
    (out / f"rank{rank}.{source.stamp}.pt.trace.json.gz").write_bytes(data)
    return len(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("source", type=Path, help="a run directory with rank traces (rank0.*, rank1.*)")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--out", type=Path, required=True, help="output run directory (created)")
    parser.add_argument("--straggler", type=int, default=None,
                        help="the rank that copies the source the others wait for (default ranks // 3; -1: none)")
    parser.add_argument("--only", default=None, metavar="RANKS",
                        help="write only these ranks of the world (comma-separated), e.g. to check a few")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="writer processes (default: cores)")
    args = parser.parse_args(argv)
    paths = sorted(args.source.glob("*.pt.trace.json*"))
    if not paths:
        print(f"no traces in {args.source}", file=sys.stderr)
        return 1
    started = time.perf_counter()
    _SOURCES[:] = [read_source(p) for p in paths]
    world = args.ranks
    straggler = world // 3 if args.straggler is None else args.straggler
    plan = assign(_SOURCES, world, straggler if straggler >= 0 else None)
    args.out.mkdir(parents=True, exist_ok=True)
    only = {int(r) for r in args.only.split(",")} if args.only else None
    jobs = [(args.out, rank, world, src) for rank, src in enumerate(plan) if only is None or rank in only]
    if args.jobs > 1 and world > 1:
        with ProcessPoolExecutor(min(args.jobs, world), mp_context=get_context("fork")) as pool:
            written = sum(pool.map(_write, jobs, chunksize=max(1, world // (4 * args.jobs))))
    else:
        written = sum(map(_write, jobs))
    print(f"wrote {len(jobs)} of {world} ranks ({written / 1e6:.1f} MB) to {args.out} in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
