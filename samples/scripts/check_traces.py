"""Sanity-check sample traces: gzip JSON, traceEvents, ProfilerStep#N annotations, kernels.

Usage: python samples/scripts/check_traces.py [ROOT]   (ROOT defaults to samples/)
Prints, for every `*.pt.trace.json.gz` under ROOT, its size and the event count per `cat`.
Exit status 1 if a trace lacks traceEvents or ProfilerStep#N annotations, or if a trace that
has GPU activity (deviceProperties) has no kernels.
"""
import collections
import gzip
import json
import os
import re
import sys


def check(path):
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    events = data.get("traceEvents") or []
    cats = collections.Counter(e.get("cat", "<none>") for e in events)
    steps = sorted(
        {int(m.group(1)) for e in events if e.get("cat") in ("user_annotation", "cpu_op")
         for m in [re.match(r"ProfilerStep#(\d+)$", e.get("name", ""))] if m}
    )
    problems = []
    if not events:
        problems.append("no traceEvents")
    if not steps:
        problems.append("no ProfilerStep#N annotations")
    if data.get("deviceProperties") and not cats.get("kernel"):
        problems.append("GPU trace without kernels")
    return data, cats, steps, problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    bad = 0
    total = 0
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if not name.endswith(".pt.trace.json.gz"):
                continue
            path = os.path.join(dirpath, name)
            size = os.path.getsize(path)
            total += size
            data, cats, steps, problems = check(path)
            rel = os.path.relpath(path, root)
            dist = data.get("distributedInfo")
            print(f"{rel}  {size / 1e6:.2f} MB gz  steps={steps}"
                  + (f"  distributed rank={dist.get('rank')}/{dist.get('world_size')}" if dist else "")
                  + (f"  PROBLEMS: {problems}" if problems else ""))
            print("    " + ", ".join(f"{k}={v}" for k, v in sorted(cats.items())))
            bad += bool(problems)
    print(f"total {total / 1e6:.2f} MB gz")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
