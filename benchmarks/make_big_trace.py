#!/usr/bin/env python3
"""Make a large, realistic torch.profiler (Kineto) trace by replicating a real one.

The source trace's ``traceEvents`` are written N times. Copy k is shifted in time by
``k * (span + gap)`` where ``span`` is the source's extent (first ``ts`` to last ``ts + dur``), so
each copy starts just after the previous one ends. Every id is renumbered per copy so that the
links inside a copy stay consistent and nothing collides across copies:

  namespace      fields                                                     stride
  ------------   --------------------------------------------------------   ------------------
  external       args["External id"]                                        max - min + 1
  correlation    args["correlation"], flow ``id`` of ``ac2g`` / ``async``   max - min + 1
  python         args["Python id"], args["Python parent id"]                max - min + 1
  sequence       args["Sequence number"] (fwd/bwd pairing)                  max - min + 1
  ev_idx         args["Ev Idx"]                                             max - min + 1
  flow:<cat>     flow ``id`` of other flows (``fwdbwd``, ...)               max - min + 1
  step           N in ``ProfilerStep#N`` (host and ``gpu_user_annotation``) max - min + 1

so copy k's ids of a namespace are ``id + k * stride`` (contiguous and increasing, as a long run would
have). ``0``/``null`` ids (meaning "none") are left alone; ``Python module id`` is kept, since it names
the same nn.Module in every step. ``[memory]`` events keep their args (Addr, Bytes, totals).
Metadata (``ph: "M"``) events, the ``PyTorch Profiler (0)`` span (``cat: "Trace"``, its ``dur`` widened
to cover all copies), ``Iteration Start:`` and ``Record Window End`` (moved to the last copy's end)
are written once, after the copies, where Kineto puts them. Top-level keys are kept, in order.

Timestamps are shifted in integer nanoseconds and written with 3 decimals (µs), as Kineto does, so a
shifted copy's text differs from the source only by the offset (no float drift); integer-µs traces
(2021 format) stay integers. The output is written in Kineto's layout (one event over a few lines),
so its size per event matches real traces.

Memory stays bounded by the *source* size: the source is parsed once and compiled into literal text
pieces plus "slots" (the numbers that change per copy); each copy is rendered to one string, handed
to a writer thread (gzip runs there; zlib releases the GIL) and dropped. A 2 GB output needs about as
much memory as a 2-copy one.

Examples::

    # ~164 MB (uncompressed JSON, MB = 10**6 bytes) from the bf16 transformer trace
    .venv/bin/python benchmarks/make_big_trace.py \
        tests/data/h200/transformer_bf16/vm_562.1795654446295758078.pt.trace.json.gz --target-mb 164

    # exactly 5 copies, plain JSON, into a chosen run dir
    .venv/bin/python benchmarks/make_big_trace.py SRC --copies 5 --no-gzip --out-dir /tmp/run1

The output path is printed on the last line of stdout (``OUTPUT <path>``).
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import queue
import re
import sys
import threading
import time
from pathlib import Path

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is optional
    orjson = None

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BENCH_DIR = REPO / ".bench"

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
FILE_RE = re.compile(r"^(?P<worker>.+?)\.(?P<stamp>\d+)\.pt\.trace\.json(?:\.gz)?$")

# args key -> id namespace
ARG_NAMESPACES = {
    "External id": "external",
    "correlation": "correlation",
    "Python id": "python",
    "Python parent id": "python",
    "Sequence number": "sequence",
    "Ev Idx": "ev_idx",
}
LAUNCH_FLOW_CATS = ("ac2g", "async")  # flow id == correlation of the launch
FLOW_PHASES = ("s", "t", "f")


def _dumps(v) -> str:
    # Kineto's spacing inside values ("[[], [8192, 32000]]"), so sizes per event match real traces.
    # Only used while compiling the source (once), so speed does not matter here.
    return json.dumps(v, ensure_ascii=False)


def _dumps_indented(v) -> str:
    if orjson is not None:
        return orjson.dumps(v, option=orjson.OPT_INDENT_2).decode()
    return json.dumps(v, ensure_ascii=False, indent=2)


def load_json(path: str | os.PathLike) -> dict:
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return orjson.loads(data) if orjson is not None else json.loads(data)


def _is_once(e: dict) -> bool:
    """Events written once (not replicated)."""
    if e.get("ph") == "M":
        return True
    if e.get("cat") == "Trace":
        return True
    name = e.get("name")
    return (isinstance(name, str) and e.get("ph") == "i"
            and (name == "Record Window End" or name.startswith("Iteration Start:")))


def _valid_id(v) -> bool:
    return type(v) is int and v > 0


class Template:
    """Source events compiled to literal text + per-copy slots."""

    def __init__(self, events: list[dict], gap_us: float):
        body = [e for e in events if not _is_once(e)]
        self.once = [e for e in events if _is_once(e)]
        self.n_body = len(body)

        # ---- time: int mode (2021 traces, integer µs) or ns mode (3-decimal µs floats)
        ts_vals = [e["ts"] for e in body if "ts" in e]
        self.int_mode = all(type(t) is int for t in ts_vals) and all(
            type(e.get("dur", 0)) is int for e in body)
        lo = min(ts_vals)
        hi = max(e["ts"] + (e.get("dur") or 0) for e in body if "ts" in e)
        if self.int_mode:
            self.stride_time = math.ceil(hi - lo + gap_us)  # µs
        else:
            # whole µs stride, in ns
            self.stride_time = math.ceil(hi - lo + gap_us) * 1000
        self.src_start, self.src_end = lo, hi

        # ---- id namespaces: min/max per namespace -> stride
        rng: dict[str, list[int]] = {}

        def see(ns: str, v):
            if _valid_id(v):
                r = rng.get(ns)
                if r is None:
                    rng[ns] = [v, v]
                else:
                    r[0] = min(r[0], v)
                    r[1] = max(r[1], v)

        for e in body:
            args = e.get("args")
            if args:
                for k, ns in ARG_NAMESPACES.items():
                    if k in args:
                        see(ns, args[k])
            if e.get("ph") in FLOW_PHASES and "id" in e:
                see(self._flow_ns(e), e["id"])
            name = e.get("name")
            if isinstance(name, str) and name.startswith("ProfilerStep#"):
                m = STEP_RE.match(name)
                if m:
                    see("step", int(m.group(1)))
        self.ranges = {ns: (a, b) for ns, (a, b) in rng.items()}
        self.strides = {ns: b - a + 1 for ns, (a, b) in rng.items()}

        # ---- compile
        # literals[i] is followed by slot i (kind, base); len(literals) == len(slots) + 1
        self.literals: list[str] = []
        slot_kind: list[str] = []   # "t" (time) or a namespace name or "stepname"
        slot_base: list[int] = []
        cur: list[str] = []

        def lit(s: str):
            cur.append(s)

        def slot(kind: str, base: int):
            self.literals.append("".join(cur))
            cur.clear()
            slot_kind.append(kind)
            slot_base.append(base)

        for i, e in enumerate(body):
            lit("  {\n    " if i == 0 else ",\n  {\n    ")
            first = True
            for k, v in e.items():
                if k == "args":
                    continue
                # Kineto breaks the line before "ts"
                sep = "" if first else (",\n    " if k == "ts" else ", ")
                lit(sep + (('"' + k + '": ') if _plain_key(k) else _dumps(k) + ": "))
                first = False
                if k == "ts" and type(v) in (int, float):
                    slot("t", v if self.int_mode else round(v * 1000))
                elif k == "id" and e.get("ph") in FLOW_PHASES and _valid_id(v):
                    slot(self._flow_ns(e), v)
                elif k == "name" and isinstance(v, str) and STEP_RE.match(v):
                    slot("stepname", int(STEP_RE.match(v).group(1)))
                else:
                    lit(_dumps(v))
            args = e.get("args")
            if args is not None:
                lit(',\n    "args": {\n      ' if not first else '"args": {\n      ')
                afirst = True
                for k, v in args.items():
                    lit(("" if afirst else ", ") + _dumps(k) + ": ")
                    afirst = False
                    ns = ARG_NAMESPACES.get(k)
                    if ns is not None and _valid_id(v):
                        slot(ns, v)
                    else:
                        lit(_dumps(v))
                lit("\n    }")
            lit("\n  }")
        self.literals.append("".join(cur))
        self.slot_kind = slot_kind
        self.slot_base = slot_base
        self._prepare_groups()

    @staticmethod
    def _flow_ns(e: dict) -> str:
        cat = e.get("cat")
        return "correlation" if cat in LAUNCH_FLOW_CATS else f"flow:{cat}"

    def _prepare_groups(self):
        # slot indices grouped by kind, so a copy can be rendered kind by kind
        groups: dict[str, tuple[list[int], list[int]]] = {}
        for i, (k, b) in enumerate(zip(self.slot_kind, self.slot_base)):
            g = groups.setdefault(k, ([], []))
            g[0].append(i)
            g[1].append(b)
        self.groups = groups
        self.n_slots = len(self.slot_kind)

    # ---- rendering
    def fmt_time(self, v: int) -> str:
        if self.int_mode:
            return str(v)
        if v < 0:
            q, r = divmod(-v, 1000)
            return f"-{q}.{r:03d}"
        q, r = divmod(v, 1000)
        return f"{q}.{r:03d}"

    def render_copy(self, k: int) -> str:
        vals: list = [None] * self.n_slots
        for kind, (idx, base) in self.groups.items():
            if kind == "t":
                off = k * self.stride_time
                if self.int_mode:
                    strs = [str(b + off) for b in base]
                else:
                    if min(base) + off < 0:  # negative ts (rare): exact slow path
                        strs = [self.fmt_time(b + off) for b in base]
                    else:
                        strs = []
                        ap = strs.append
                        for b in base:
                            q, r = divmod(b + off, 1000)
                            ap(f"{q}.{r:03d}")
            elif kind == "stepname":
                off = k * self.strides["step"]
                strs = [f'"ProfilerStep#{b + off}"' for b in base]
            else:
                off = k * self.strides[kind]
                strs = [str(b + off) for b in base]
            for i, s in zip(idx, strs):
                vals[i] = s
        parts: list = [None] * (2 * self.n_slots + 1)
        parts[0::2] = self.literals
        parts[1::2] = vals
        text = "".join(parts)
        return text if k == 0 else ",\n" + text

    def render_once(self, copies: int) -> str:
        """Metadata and whole-trace events, adjusted to cover all copies."""
        if not self.once:
            return ""
        shift_us = (copies - 1) * (self.stride_time if self.int_mode else self.stride_time / 1000)
        out = []
        for e in self.once:
            e = dict(e)
            if e.get("cat") == "Trace" and "dur" in e:
                e["dur"] = _shift(e["dur"], shift_us, self.int_mode)
            elif e.get("name") == "Record Window End" and "ts" in e:
                e["ts"] = _shift(e["ts"], shift_us, self.int_mode)
            out.append(_format_event(e))
        return ",\n" + ",\n".join(out)


def _shift(v, shift_us, int_mode):
    if int_mode and type(v) is int:
        return v + int(shift_us)
    return round(v + shift_us, 3)


_PLAIN_KEY = re.compile(r'^[A-Za-z0-9_ ]+$')


def _plain_key(k: str) -> bool:
    return bool(_PLAIN_KEY.match(k))


def _format_event(e: dict) -> str:
    head = ", ".join(f"{_dumps(k)}: {_dumps(v)}" for k, v in e.items() if k != "args")
    s = "  {\n    " + head
    if "args" in e:
        a = ", ".join(f"{_dumps(k)}: {_dumps(v)}" for k, v in e["args"].items())
        s += ',\n    "args": {\n      ' + a + "\n    }"
    return s + "\n  }"


class _Writer(threading.Thread):
    """Writes (and compresses) chunks off the main thread; bounded queue keeps memory flat."""

    def __init__(self, fobj):
        super().__init__(daemon=True)
        self.f = fobj
        self.q: queue.Queue = queue.Queue(maxsize=2)
        self.error: BaseException | None = None
        self.nbytes = 0

    def run(self):
        try:
            while True:
                b = self.q.get()
                if b is None:
                    return
                self.f.write(b)
                self.nbytes += len(b)
        except BaseException as ex:  # noqa: BLE001 - re-raised in the producer thread
            self.error = ex
            while self.q.get() is not None:  # drain so the producer never blocks
                pass

    def put(self, b: bytes):
        if self.error:
            raise self.error
        self.q.put(b)

    def close(self):
        self.q.put(None)
        self.join()
        if self.error:
            raise self.error


def parse_source_name(path: Path) -> tuple[str, str]:
    m = FILE_RE.match(path.name)
    if m:
        return m.group("worker"), m.group("stamp")
    stem = path.name.split(".")[0] or "worker0"
    return stem, str(time.time_ns())


def make_big_trace(src: str | os.PathLike, out_dir: str | os.PathLike | None = None, *,
                   copies: int | None = None, target_mb: float | None = None,
                   gap_us: float = 1000.0, use_gzip: bool = True, gzip_level: int = 6,
                   worker: str | None = None, stamp: str | None = None,
                   quiet: bool = False) -> dict:
    """Write the big trace; return a dict of facts about it (path, copies, events, bytes, ...)."""
    t0 = time.perf_counter()
    src = Path(src)
    trace = load_json(src)
    events = trace["traceEvents"]
    tpl = Template(events, gap_us)
    first = tpl.render_copy(0).encode()
    once = tpl.render_once(1).encode()  # size estimate only; rendered again below

    head_parts, tail_parts = _top_level(trace)
    fixed = len(head_parts.encode()) + len(tail_parts.encode()) + len(once) + 4
    per_copy = len(first) + 2
    if copies is None:
        if target_mb is None:
            raise ValueError("give copies or target_mb")
        copies = max(1, round((target_mb * 1e6 - fixed) / per_copy))
    copies = int(copies)

    src_worker, src_stamp = parse_source_name(src)
    worker = worker or src_worker
    stamp = stamp or src_stamp
    if out_dir is None:
        out_dir = DEFAULT_BENCH_DIR / "runs" / f"{src.parent.name}_x{copies}"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"{worker}.{stamp}.pt.trace.json" + (".gz" if use_gzip else "")
    out_path = out_dir / name
    tmp_path = out_dir / (name + ".part")

    raw = open(tmp_path, "wb")  # noqa: SIM115 - closed in the finally below
    fobj = gzip.GzipFile(filename="", mode="wb", compresslevel=gzip_level, fileobj=raw, mtime=0) \
        if use_gzip else raw
    w = _Writer(fobj)
    w.start()
    try:
        w.put(head_parts.encode())
        for k in range(copies):
            chunk = first if k == 0 else tpl.render_copy(k).encode()
            w.put(chunk)
            if not quiet and (k % max(1, copies // 10) == 0 or k == copies - 1):
                print(f"  copy {k + 1}/{copies}  {w.nbytes / 1e6:8.1f} MB written  "
                      f"{time.perf_counter() - t0:6.1f} s", file=sys.stderr, flush=True)
        w.put(tpl.render_once(copies).encode())
        w.put(tail_parts.encode())
    finally:
        w.close()
        if fobj is not raw:
            fobj.close()
        raw.close()
    os.replace(tmp_path, out_path)

    n_events = tpl.n_body * copies + len(tpl.once)
    info = {
        "path": str(out_path),
        "source": str(src),
        "copies": copies,
        "events": n_events,
        "events_per_copy": tpl.n_body,
        "once_events": len(tpl.once),
        "json_bytes": w.nbytes,
        "file_bytes": out_path.stat().st_size,
        "time_stride_us": tpl.stride_time if tpl.int_mode else tpl.stride_time / 1000,
        "id_strides": tpl.strides,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    return info


def _top_level(trace: dict) -> tuple[str, str]:
    """Text before and after the traceEvents array, keeping key order (Kineto puts traceEvents
    near the end, with traceName after it)."""
    keys = list(trace.keys())
    i = keys.index("traceEvents")
    head = "{\n"
    for k in keys[:i]:
        head += f'  {_dumps(k)}: {_indent(_dumps_indented(trace[k]))},\n'
    head += '  "traceEvents": [\n'
    tail = "\n  ]"
    for k in keys[i + 1:]:
        tail += f',\n  {_dumps(k)}: {_indent(_dumps_indented(trace[k]))}'
    tail += "\n}\n"
    return head, tail


def _indent(s: str) -> str:
    return s.replace("\n", "\n  ")


def verify(path: str | os.PathLike, info: dict | None = None) -> list[str]:
    """Re-read the output and check the invariants; returns a list of problems (empty = OK).
    Loads the whole output, so use it on moderate sizes."""
    import collections
    d = load_json(path)
    ev = d["traceEvents"]
    problems: list[str] = []
    if info and len(ev) != info["events"]:
        problems.append(f"event count {len(ev)} != {info['events']}")
    if sum(1 for e in ev if e.get("cat") == "Trace") > 1:
        problems.append("more than one Trace span event")
    # unique per-copy ids
    for key, cats in (("Python id", None), ("correlation", ("cuda_runtime", "cuda_driver", "Runtime"))):
        vals = [e["args"][key] for e in ev if key in e.get("args", {}) and (cats is None or e.get("cat") in cats)]
        dup = len(vals) - len(set(vals))
        if dup:
            problems.append(f"{dup} duplicate {key!r} values")
    pyids = {e["args"]["Python id"] for e in ev if "Python id" in e.get("args", {})}
    bad_parent = sum(1 for e in ev if e.get("args", {}).get("Python parent id") not in (None, 0)
                     and e["args"]["Python parent id"] not in pyids)
    if bad_parent:
        problems.append(f"{bad_parent} Python parent ids without a Python id")
    # flows: every f has at most one s with the same (cat, id); launch flows point at a correlation
    fl = collections.Counter((e.get("cat"), e["id"], e["ph"]) for e in ev if e.get("ph") in FLOW_PHASES)
    dups = [k for k, n in fl.items() if n > 1]
    if dups:
        problems.append(f"{len(dups)} duplicated flow (cat, id, ph) e.g. {dups[:3]}")
    corr = {e["args"]["correlation"] for e in ev if "correlation" in e.get("args", {})}
    orphan = sum(1 for (c, i, p) in fl if c in LAUNCH_FLOW_CATS and i not in corr)
    if orphan:
        problems.append(f"{orphan} launch flows whose id is no correlation")
    # steps: unique per category and increasing with ts
    by_cat = collections.defaultdict(list)
    for e in ev:
        n = e.get("name")
        if isinstance(n, str) and STEP_RE.match(n):
            by_cat[e.get("cat")].append((e["ts"], int(STEP_RE.match(n).group(1))))
    for cat, lst in by_cat.items():
        nums = [n for _, n in lst]
        if len(nums) != len(set(nums)):
            problems.append(f"duplicate step numbers in {cat}")
        if cat in ("user_annotation", "cpu_op", "Operator"):
            srt = [n for _, n in sorted(lst)]
            if srt != sorted(srt):
                problems.append(f"steps not increasing with ts in {cat}")
    # times: Trace span covers every event
    tr = [e for e in ev if e.get("cat") == "Trace"]
    if tr:
        t = tr[0]
        hi = max(e["ts"] + (e.get("dur") or 0) for e in ev if e.get("ph") == "X" and e.get("cat") != "Trace")
        lo = min(e["ts"] for e in ev if e.get("ph") == "X")
        if info and info["copies"] > 1 and not (t["ts"] + t["dur"] > lo + (hi - lo) * (1 - 1.0 / info["copies"])):
            problems.append("Trace span does not reach the last copy")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="real trace (.json or .json.gz)")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--target-mb", type=float, help="target size of the uncompressed JSON, MB = 10**6 bytes")
    g.add_argument("--copies", type=int, help="number of copies of the source's events")
    ap.add_argument("--out-dir", help="run directory to write into "
                    "(default: .bench/runs/<source dir name>_x<copies>)")
    ap.add_argument("--gap-us", type=float, default=1000.0, help="gap between copies, µs (default 1000)")
    ap.add_argument("--no-gzip", action="store_true", help="write plain .pt.trace.json")
    ap.add_argument("--gzip-level", type=int, default=6)
    ap.add_argument("--worker", help="worker name in the file name (default: the source's)")
    ap.add_argument("--stamp", help="stamp in the file name (default: the source's)")
    ap.add_argument("--verify", action="store_true",
                    help="re-read the output and check ids/steps/flows (loads the whole output)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)

    info = make_big_trace(a.source, a.out_dir, copies=a.copies, target_mb=a.target_mb, gap_us=a.gap_us,
                          use_gzip=not a.no_gzip, gzip_level=a.gzip_level, worker=a.worker, stamp=a.stamp,
                          quiet=a.quiet)
    print(json.dumps(info, indent=2))
    if a.verify:
        probs = verify(info["path"], info)
        print("verify:", "OK" if not probs else "; ".join(probs))
        if probs:
            return 1
    print("OUTPUT", info["path"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
