"""Make a synthetic N-rank distributed run from a real 2-rank one (for scale tests of the Distributed view).

Each new rank is a copy of one of the source ranks (round robin) with ``distributedInfo.rank``/``world_size`` and
the process groups' rank lists rewritten, written as ``rank<N>.<stamp>.pt.trace.json.gz``. Event contents are not
changed, so collective counts stay consistent across ranks.

    python benchmarks/make_ranks.py tests/data/h200/ddp_resnet50 --ranks 64 --out .bench/runs/ddp_x64
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a run directory with rank traces (rank0.*, rank1.*)")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--out", type=Path, required=True, help="output run directory (created)")
    args = parser.parse_args(argv)
    sources = sorted(args.source.glob("*.pt.trace.json*"))
    if not sources:
        print(f"no traces in {args.source}", file=sys.stderr)
        return 1
    docs = [load(p) for p in sources]
    args.out.mkdir(parents=True, exist_ok=True)
    world = args.ranks
    for rank in range(world):
        doc = dict(docs[rank % len(docs)])
        info = dict(doc.get("distributedInfo") or {})
        info.update(rank=rank, world_size=world)
        if isinstance(info.get("pg_config"), list):
            info["pg_config"] = [{**pg, "pg_size": world, "ranks": list(range(world))} for pg in info["pg_config"]]
        doc["distributedInfo"] = info
        stamp = re.search(r"\.(\d+)\.pt\.trace", sources[rank % len(sources)].name)
        name = f"rank{rank}.{stamp.group(1) if stamp else 1}.pt.trace.json.gz"
        with gzip.open(args.out / name, "wt", compresslevel=6) as fh:
            json.dump(doc, fh)
    print(f"wrote {world} ranks to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
