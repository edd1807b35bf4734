"""The ``pytorch-tb-profiler`` command: ``summary``, ``report`` and ``diff`` (a CI regression gate) on any trace,
outside TensorBoard, ``preprocess`` (a logdir into a shared cache, on a Dask cluster: ``cli/preprocess.py``) and
``capture`` (a trace of the next steps of a running job, every rank: ``cli/capture.py``, whose exit codes are 0, 2
and 4-6).
A thin shell over the Python API (:mod:`tb_plugin.sdk`): it parses arguments, shows progress
on stderr and turns errors into messages and exit codes.

Exit codes (docs/guide/ci-gate.md and docs/guide/limits.md list them too): every failure is one line on stderr,
``pytorch-tb-profiler: error: <what and why>``, never a traceback.

====  =================================================================================================
0     success (``diff``: not slower beyond the threshold)
1     ``diff --fail-if-slower``: NEW is slower beyond the threshold; ``preprocess``: some files failed
2     bad arguments; a path that does not exist or holds no trace; a URL of no known form
3     a trace that cannot be loaded (not a trace, cut short, too large, ...)
4     ``diff``: nothing to compare (a side without events or ProfilerStep#N steps, or the metric is zero or
      undefined on both sides)
5     the output cannot be written (``report -o`` into a missing folder or a read-only place)
6     a store a URL names cannot be reached or read (network, credentials, missing bucket or container; the
      Dask scheduler of ``preprocess``)
70    an internal error (a bug: the line says what, please report it)
130   interrupted (Ctrl-C)
====  =================================================================================================
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from .. import __version__

PROG = "pytorch-tb-profiler"
EXIT_CANNOT_WRITE = 5
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130


class StderrProgress:
    """Loading progress on stderr, only for loads that take a while (a cached parse shows nothing): a line
    rewritten in place on a terminal, a line at start and end otherwise (CI logs)."""

    def __init__(self, stream: TextIO | None = None, after: float = 1.0) -> None:
        self.stream = stream or sys.stderr
        self.after = after
        self._started: dict[str, float] = {}
        self._shown: dict[str, float] = {}

    def __call__(self, name: str, fraction: float) -> None:
        now = time.monotonic()
        start = self._started.setdefault(name, now)
        if now - start < self.after:
            return
        tty = self.stream.isatty()
        last = self._shown.get(name)
        if fraction >= 1.0:
            prefix = "\r" if tty else ""
            self._write(f"{prefix}loaded {name} in {now - start:.1f} s\n")
            self._started.pop(name, None)
            self._shown.pop(name, None)
        elif last is None or (tty and now - last >= 0.2):
            self._write(f"\rloading {name}: {fraction:.0%}" if tty else f"loading {name}...\n")
            self._shown[name] = now

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def _selection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", help="the run in a logdir (default: the first)")
    parser.add_argument("--worker", help="the worker (rank) in the run (default: the first)")
    parser.add_argument("--span", help="the span of the worker (default: the first)")
    parser.add_argument("--cache-dir", help="where parsed traces are cached (default: ~/.cache/pytorch-tb-profiler)")


def _peaks_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--peaks", metavar="SPEC", help="device peaks for MFU and the roofline instead of the "
                        "built-in table's: a table entry (device=H100-SXM) and/or figures in TFLOP/s and GB/s, "
                        "e.g. bf16=700,fp32=55,bw=3000 (classes fp64, fp64_tensor, fp32, tf32, bf16, fp16, fp8)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROG, description="Summaries, offline HTML reports and a regression gate "
                                  "for torch.profiler (Kineto) traces. PATH is a trace file (*.pt.trace.json[.gz] or "
                                  "any Chrome/Kineto *.json[.gz]), a run directory or a logdir, local or a URL.")
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = commands.add_parser("summary", help="verdict, step breakdown, top operators and kernels")
    s.add_argument("path", metavar="PATH")
    _selection_args(s)
    s.add_argument("--top", type=int, default=10, help="operators and kernels shown (default 10)")
    s.add_argument("--json", action="store_true", help="print JSON instead of tables")
    _peaks_arg(s)

    r = commands.add_parser("report", help="a self-contained, offline HTML report with plotly charts")
    r.add_argument("path", metavar="PATH")
    _selection_args(r)
    r.add_argument("-o", "--output", default="report.html", help="the HTML file to write (default report.html)")
    _peaks_arg(r)

    d = commands.add_parser("diff", help="compare two runs; with --fail-if-slower, a CI regression gate")
    d.add_argument("base", metavar="BASE")
    d.add_argument("new", metavar="NEW")
    d.add_argument("--cache-dir", help="where parsed traces are cached")
    d.add_argument("--fail-if-slower", metavar="PCT", help="exit 1 when the metric grew by more than this, "
                   "e.g. 5%% (a bare number is percent too)")
    d.add_argument("--metric", default="step_time", help="what is compared, per step: step_time (default), "
                   "kernel_time, memcpy_time, memset_time, communication_time, runtime_time, dataloader_time, "
                   "cpu_exec_time, other_time")
    d.add_argument("--top", type=int, default=5, help="operators and kernels listed as slower (default 5)")
    d.add_argument("--span", help="the span compared on both sides (default: each worker's first)")
    d.add_argument("--base-span", help="the span of BASE (default: --span)")
    d.add_argument("--new-span", help="the span of NEW (default: --span)")
    d.add_argument("--json", action="store_true", help="print JSON instead of text")

    from .capture import add_parser as add_capture
    from .preprocess import add_parser as add_preprocess

    add_preprocess(commands)
    add_capture(commands)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit code (the console script exits with it)."""
    args = parser().parse_args(argv)
    if args.command == "capture":  # a few files in a folder: none of the analysis stack (pandas, pyarrow) is loaded
        from .capture import run_capture

        return run_capture(args)
    from ..sdk.locate import EXIT_NO_TRACE, ProfilerError

    progress = StderrProgress()
    try:
        return _run(args, progress)
    except ProfilerError as err:
        return _error(str(err), err.exit_code)
    except ValueError as err:  # a bad option value (metric, threshold, peaks)
        return _error(str(err), EXIT_NO_TRACE)
    except BrokenPipeError:  # `... | head`: the reader left, nothing more to say
        return 0
    except KeyboardInterrupt:
        return _error("interrupted", EXIT_INTERRUPTED)
    except Exception as err:  # noqa: BLE001 - a bug: one line saying what, never a traceback in a CI log
        return _error(f"internal error ({type(err).__name__}: {err}); please report it", EXIT_INTERNAL)


def _error(message: str, code: int) -> int:
    """Say ``message`` on stderr as one line (a multi-line reason is joined) and give ``code`` back."""
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return code


def console() -> None:
    """The ``pytorch-tb-profiler`` console script."""
    sys.exit(main())


def _run(args: argparse.Namespace, progress: Any) -> int:
    from ..sdk import open as open_trace

    if args.command == "diff":
        from .gate import run_diff

        return run_diff(args, progress)
    if args.command == "preprocess":
        from .preprocess import run_preprocess

        return run_preprocess(args)
    if args.command == "report":  # before loading anything: a report that cannot be written fails at once
        from .report import check_output

        check_output(args.output)
    trace = open_trace(args.path, run=args.run, worker=args.worker, span=args.span, cache_dir=args.cache_dir,
                       progress=progress, peaks=args.peaks)
    if args.command == "summary":
        from .summary import print_summary

        print_summary(trace, args.top, args.json)
        return 0
    from .report import write_report

    write_report(trace, args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
