#!/usr/bin/env python3
"""How far computing the Overview in parallel could go: its memoised results as a graph (issue 29).

    python benchmarks/critical_path.py MODEL_OR_TRACE [--top 15]

Computes the Overview of one trace (a saved model folder, as ``tb_plugin.model.tables.save`` writes, or a trace
file) in this process, one thread, recording each memoised result's own time (its time less that of the results it
computed on the way) and every result it read (computed or found), then prints the critical path: the longest chain
of own times from the Overview down. That chain is the floor of the Overview's time however many processes compute
its independent results; the total against it says what parallelism could gain (benchmarks/README.md, "session 44").
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tb_plugin.analysis.device_peaks import NO_OVERRIDE
from tb_plugin.loader import load_trace
from tb_plugin.model import derived
from tb_plugin.model.tables import TraceModel, load

ROOT = "<overview>"


class Recorder:
    """Own time and reads per memoised result, recorded through ``derived.compute_once``."""

    def __init__(self) -> None:
        self.own: dict[str, float] = collections.defaultdict(float)
        self.reads: dict[str, set[str]] = collections.defaultdict(set)
        self.stack = [ROOT]
        self.children = 0.0

    def wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def compute_once(memo: Any, computing: Any, key: Any, compute: Callable[[], Any]) -> Any:
            name = _name(key)
            self.reads[self.stack[-1]].add(name)

            def timed() -> Any:
                started, outer = time.perf_counter(), self.children
                self.stack.append(name)
                self.children = 0.0
                try:
                    return compute()
                finally:
                    total = time.perf_counter() - started
                    self.own[name] += total - self.children
                    self.stack.pop()
                    self.children = outer + total

            return original(memo, computing, key, timed)

        return compute_once

    def longest(self) -> dict[str, tuple[float, list[str]]]:
        """Per result: the longest chain of own times from it down its reads, and the chain."""
        out: dict[str, tuple[float, list[str]]] = {}

        def walk(name: str) -> tuple[float, list[str]]:
            if name not in out:
                below = max((walk(r) for r in self.reads.get(name, ())), key=lambda x: x[0], default=(0.0, []))
                out[name] = (self.own.get(name, 0.0) + below[0], [name, *below[1]])
            return out[name]

        walk(ROOT)
        return out


def _name(key: Any) -> str:
    if isinstance(key, tuple) and len(key) == 3:
        return f"{key[0].rsplit('.', 1)[-1]}.{key[1]}{key[2] if key[2] else ''}"
    return str(key)[:60]


def _model(path: Path) -> TraceModel:
    return load(path) if path.is_dir() else load_trace(str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path, help="a saved model folder or a trace file")
    parser.add_argument("--top", type=int, default=15, help="how many of the Overview's direct reads to list")
    args = parser.parse_args()
    model = _model(args.trace)
    recorder = Recorder()
    derived.compute_once = recorder.wrap(derived.compute_once)  # type: ignore[assignment]
    from tb_plugin.analysis.overview import overview

    started = time.perf_counter()
    overview(model, None, "w", 1, NO_OVERRIDE, ())
    total = time.perf_counter() - started
    recorder.own[ROOT] = total - sum(v for k, v in recorder.own.items() if k != ROOT)
    chains = recorder.longest()
    length, path = chains[ROOT]
    print(f"{model.n_events:,} events: the Overview {total:.2f} s, its memoised results' own time "
          f"{total - recorder.own[ROOT]:.2f} s, its own code {recorder.own[ROOT]:.2f} s")
    print(f"critical path {length:.2f} s:")
    for name in path:
        print(f"  {recorder.own.get(name, 0.0):7.3f}  {name}")
    print("the results the Overview reads directly, by the chain below each:")
    for name in sorted(recorder.reads[ROOT], key=lambda r: -chains[r][0])[:args.top]:
        print(f"  {chains[name][0]:7.3f}  {name} (own {recorder.own.get(name, 0.0):.3f})")


if __name__ == "__main__":
    main()
