#!/usr/bin/env python3
"""Time how long it takes to load one torch.profiler trace, and how much memory it needs.

Measured on one trace file, each in a fresh subprocess (so peak RSS is that of the measurement alone):

  floor   gunzip (stdlib ``gzip`` and, if installed, ``isal.igzip``) + ``msgspec.json.decode`` into typed
          events (Struct with ph, cat, name, pid, tid, ts, dur, id, args: dict). The *decode floor* is
          the faster gunzip + the typed decode: what any Python loader has to pay just to get the events.
  ours    ``tb_plugin.loader.load_trace(path)`` (this project). Skipped, with a message, while the
          loader does not exist yet.
  old     torch-tb-profiler 0.4.3 from its own venv: ``RunProfileData.parse`` (read, gunzip, json.loads,
          events, ``process()``, ``analyze()``) + ``RunGenerator(...).generate_run_profile()``, i.e. the
          point where its views are computed. The pickling of the result that 0.4.3 then does to ship
          it to TensorBoard's process is timed separately (not in the headline number).
  tb      (``--tensorboard``) the real ``tensorboard --load_fast=false`` with our plugin on a logdir
          holding only this file: time until ``/data/plugin/pytorch_profiler/runs`` says the span is
          ready, and peak RSS summed over the TensorBoard process tree (psutil, every 50 ms).
          ``--tensorboard-old`` does the same with 0.4.3's TensorBoard from the old venv.

Run it with the project venv, e.g.::

    .venv/bin/python benchmarks/bench_load.py .bench/runs/transformer_bf16_x22/*.pt.trace.json.gz

The old venv is made on first use (``--old-venv``, default ``.bench/oldvenv``;
``python -m venv`` + ``pip install torch-tb-profiler==0.4.3 psutil``).
"""
import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
BENCH_DIR = REPO / ".bench"
PROJECT_PY = REPO / ".venv" / "bin" / "python"
RESULT_TAG = "BENCH_RESULT "

# ----------------------------------------------------------------------------------------------
# child modes (run in a fresh interpreter; stdlib-only imports at module level, since the old
# plugin's venv runs this same file)
# ----------------------------------------------------------------------------------------------


def _maxrss_mb() -> dict:
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ch_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"maxrss_self_mb": self_kb / 1024, "maxrss_children_mb": ch_kb / 1024}


def _emit(d: dict):
    d.update(_maxrss_mb())
    sys.stdout.write(RESULT_TAG + json.dumps(d) + "\n")
    sys.stdout.flush()


def child_floor(path: str, stage: str):
    """stage: 'gunzip' (read + both gunzips, no decode), 'decode' (read + fastest gunzip + typed
    decode, args as dict: the floor) or 'lean' (the same with args left undecoded as msgspec.Raw:
    informational, shows what decoding every args dict costs). Split so that each peak RSS means one
    thing."""
    import gzip

    import msgspec

    class Event(msgspec.Struct, gc=False):
        ph: str = ""
        cat: str = ""
        name: str = ""
        pid: int | str = 0
        tid: int | str = 0
        ts: float = 0.0
        dur: float = 0.0
        id: int | str | None = None
        args: dict = msgspec.field(default_factory=dict)

    class LeanEvent(Event, gc=False):  # the same fields, args left undecoded
        args: msgspec.Raw = msgspec.Raw(b"{}")

    class Trace(msgspec.Struct):
        traceEvents: list[Event]

    class LeanTrace(msgspec.Struct):
        traceEvents: list[LeanEvent]

    try:
        from isal import igzip
    except ImportError:
        igzip = None
    res: dict = {"isal": igzip is not None}
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        data = f.read()
    res["read_s"] = time.perf_counter() - t0
    res["file_bytes"] = len(data)
    is_gz = data[:2] == b"\x1f\x8b"
    if stage == "gunzip":
        if is_gz:
            t0 = time.perf_counter()
            raw = gzip.decompress(data)
            res["gunzip_stdlib_s"] = time.perf_counter() - t0
            del raw
            if igzip is not None:
                t0 = time.perf_counter()
                raw = igzip.decompress(data)
                res["gunzip_isal_s"] = time.perf_counter() - t0
                del raw
        _emit(res)
        return
    t0 = time.perf_counter()
    raw = (igzip.decompress(data) if igzip is not None else gzip.decompress(data)) if is_gz else data
    res["gunzip_s"] = time.perf_counter() - t0
    res["json_bytes"] = len(raw)
    del data
    dec = msgspec.json.Decoder(LeanTrace if stage == "lean" else Trace)
    t0 = time.perf_counter()
    tr = dec.decode(raw)
    res["decode_s"] = time.perf_counter() - t0
    res["events"] = len(tr.traceEvents)
    _emit(res)


def child_old(path: str):
    import logging
    import pickle
    t0 = time.perf_counter()
    from torch_tb_profiler.profiler.data import (
        DistributedRunProfileData,
        RunProfileData,
    )
    from torch_tb_profiler.profiler.run_generator import RunGenerator
    res: dict = {"import_s": time.perf_counter() - t0}
    logging.getLogger().setLevel(logging.ERROR)
    cache_dir = tempfile.mkdtemp(prefix="oldtbp_")
    try:
        t0 = time.perf_counter()
        # == RunProfileData.parse(worker, span, path, cache_dir), split in its two halves
        trace_path, trace_json = RunProfileData._preprocess_file(path, cache_dir)
        t1 = time.perf_counter()
        data = RunProfileData.from_json("worker0", 1, trace_json)  # events, process(), analyze()
        data.trace_file_path = trace_path
        del trace_json
        t2 = time.perf_counter()
        profile = RunGenerator("worker0", 1, data).generate_run_profile()
        dist = DistributedRunProfileData(data)
        t3 = time.perf_counter()
        res.update(read_decode_s=t1 - t0, process_analyze_s=t2 - t1, generate_s=t3 - t2, total_s=t3 - t0,
                   events=len(data.events), steps=len(data.steps_names or []),
                   views=[v.name for v in profile.views])
        # what 0.4.3 does next in its worker process: pickle (profile, dist) onto an mp.Queue
        t0 = time.perf_counter()
        blob = pickle.dumps((profile, dist), protocol=pickle.HIGHEST_PROTOCOL)
        res["pickle_s"] = time.perf_counter() - t0
        res["pickle_mb"] = len(blob) / 1e6
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    _emit(res)


def child_ours(path: str):
    t0 = time.perf_counter()
    from tb_plugin.loader import default_parts, load_trace
    res: dict = {"import_s": time.perf_counter() - t0}
    # As the plugin's worker process does: a single-threaded process may build a large file in parallel parts.
    res["parts"] = default_parts()
    t0 = time.perf_counter()
    m = load_trace(path, parts=res["parts"])
    res["load_s"] = time.perf_counter() - t0
    res["model_type"] = type(m).__name__
    for attr in ("n_events", "num_events", "events"):
        v = getattr(m, attr, None)
        if isinstance(v, int):
            res["events"] = v
            break
        try:
            if v is not None:
                res["events"] = len(v)
                break
        except TypeError:
            pass
    _emit(res)


# ----------------------------------------------------------------------------------------------
# parent side
# ----------------------------------------------------------------------------------------------


def machine_info() -> dict:
    cpu = "?"
    extra = {}
    try:
        with open("/proc/cpuinfo") as f:
            cpuinfo = f.read().splitlines()
        for line in cpuinfo:
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k == "model name" and cpu == "?":
                cpu = v
            elif k in ("cpu family", "model", "cpu MHz") and k not in extra:
                extra[k] = v
            elif not k and cpu != "?":
                break
        if extra:
            cpu += " (" + ", ".join(f"{k} {v}" for k, v in extra.items()) + ")"
    except OSError:
        pass
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            meminfo = f.read().splitlines()
        for line in meminfo:
            if line.startswith("MemTotal:"):
                mem_gb = int(line.split()[1]) / 1024 / 1024
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": usable,
            "ram_gb": round(mem_gb, 1) if mem_gb else None,
            "python": platform.python_version(), "platform": platform.platform(),
            "loadavg_start": os.getloadavg()}


def _tree_pids(pid: int) -> list[int]:
    """The pid and its descendants (psutil where present; the pid alone once it is gone)."""
    try:
        import psutil

        proc = psutil.Process(pid)
        return [pid, *(c.pid for c in proc.children(recursive=True))]
    except Exception:  # noqa: BLE001 - the process is gone or psutil is missing
        return [pid]


def _tree_generations(pid: int) -> list[tuple[int, int]]:
    """(pid, generation) of the pid (0) and its descendants (their depth below it)."""
    try:
        import psutil

        out, level = [(pid, 0)], [psutil.Process(pid)]
        for generation in range(1, 8):
            level = [c for p in level for c in p.children()]
            out += [(c.pid, generation) for c in level]
        return out
    except Exception:  # noqa: BLE001 - the process is gone or psutil is missing
        return [(p, 0) for p in _tree_pids(pid)]


def _rss(pid: int) -> int:
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def _rollup(pid: int) -> tuple[int, int]:
    """(PSS, RSS) bytes of one process from smaps_rollup (one kernel walk, cheap even for a 10 GB process)."""
    pss = rss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return pss, rss


class TreeSampler(threading.Thread):
    """Peak memory of a process and all its descendants, polled every ``interval`` seconds: ``peak``, the RSS
    summed over the tree (psutil), and with ``pss=True`` also ``peak_pss`` (``/proc/PID/smaps_rollup``, pages
    shared by forked processes counted once; the RSS then comes from the same read)."""

    def __init__(self, pid: int, interval: float = 0.05, pss: bool = False):
        super().__init__(daemon=True)
        self.pid, self.interval, self.pss = pid, interval, pss
        self.peak = self.peak_pss = 0
        self.last: list[tuple[int, int]] = []
        self.at_peak: list[tuple[int, int]] = []  # (generation below the root, PSS bytes) of each process then
        self.stop_ev = threading.Event()

    def sample(self) -> tuple[int, int]:
        """(RSS, PSS) summed over the tree now; PSS is 0 unless ``pss``."""
        rss = pss = 0
        self.last = []
        for pid, generation in _tree_generations(self.pid):
            p, r = _rollup(pid) if self.pss else (0, _rss(pid))
            pss, rss = pss + p, rss + r
            self.last.append((generation, p))
        return rss, pss

    def run(self):
        while not self.stop_ev.is_set():
            rss, pss = self.sample()
            if pss > self.peak_pss:
                self.at_peak = sorted(self.last, key=lambda x: (x[0], -x[1]))
            self.peak, self.peak_pss = max(self.peak, rss), max(self.peak_pss, pss)
            self.stop_ev.wait(self.interval)

    def reset(self) -> None:
        self.peak = self.peak_pss = 0
        self.at_peak = []

    def peak_by_generation(self) -> dict[str, list[float]]:
        """Where the peak PSS was: each process's MB at that moment, by generation (0: the root; 1: its children,
        e.g. the loader; 2: theirs, e.g. a part's process), the largest first."""
        out: dict[str, list[float]] = {}
        for generation, pss in self.at_peak:
            out.setdefault(str(generation), []).append(round(pss / 1e6, 1))
        return out

    def stop(self):
        self.stop_ev.set()
        self.join()


def _busy_cpu_s() -> float:
    """CPU-seconds used by everything on the machine so far (user+nice+system+irq+softirq; guest time
    is already inside user; steal is time the hypervisor gave to someone else, see _steal_s)."""
    import psutil
    t = psutil.cpu_times()
    return sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq"))


def _steal_s() -> float:
    import psutil
    return getattr(psutil.cpu_times(), "steal", 0.0)


def run_child(cmd: list[str], *, cwd=None, env=None, timeout=None) -> dict:
    """Run a child mode; return its BENCH_RESULT plus wall time, polled peak tree RSS and how much
    other work the machine did meanwhile (other_cores = CPU-seconds not ours / wall seconds)."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0, steal0 = _busy_cpu_s(), _steal_s()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(p.pid)
    sampler.start()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        sampler.stop()
        return {"ok": False, "error": f"timeout after {timeout} s", "stderr": err[-2000:]}
    wall = time.perf_counter() - t0
    sampler.stop()
    busy1, steal1 = _busy_cpu_s(), _steal_s()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    other = max(0.0, (busy1 - busy0) - ours_cpu)
    res: dict = {}
    for line in out.splitlines():
        if line.startswith(RESULT_TAG):
            res = json.loads(line[len(RESULT_TAG):])
    res.update(ok=p.returncode == 0 and bool(res), returncode=p.returncode, wall_s=wall,
               cpu_s=ours_cpu, other_cores=other / wall if wall > 0 else 0.0,
               steal_cores=(steal1 - steal0) / wall if wall > 0 else 0.0,
               polled_peak_mb=sampler.peak / 2**20)
    res["peak_mb"] = max(res["polled_peak_mb"], res.get("maxrss_self_mb", 0.0))
    if not res["ok"]:
        res["stderr"] = err[-3000:]
    else:
        res["stderr_lines"] = len(err.splitlines())
    return res


def best_of(n: int, cmd, key: str, **kw) -> dict:
    """Run n times; keep the run with the lowest ``key``; record all values, the worst peak RSS,
    and the highest 'other_cores' seen."""
    runs = []
    for _ in range(n):
        r = run_child(cmd, **kw)
        if not r.get("ok"):
            return r
        runs.append(r)
    best = dict(min(runs, key=lambda r: r[key]))
    best["runs"] = n
    best["all_" + key] = [round(r[key], 3) for r in runs]
    best["peak_mb"] = max(r["peak_mb"] for r in runs)
    best["other_cores"] = max(r["other_cores"] for r in runs)
    best["steal_cores"] = max(r["steal_cores"] for r in runs)
    return best


def ensure_old_venv(venv: Path) -> Path | None:
    py = venv / "bin" / "python"
    if py.exists():
        probe = subprocess.run([str(py), "-c", "import torch_tb_profiler, psutil"], capture_output=True, check=False)
        if probe.returncode == 0:
            return py
    print(f"[old] creating {venv} with torch-tb-profiler==0.4.3 ...", file=sys.stderr)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "torch-tb-profiler==0.4.3", "psutil"], check=True)
    except subprocess.CalledProcessError as ex:
        print(f"[old] could not make the venv: {ex}", file=sys.stderr)
        return None
    return py


def ours_available(py: str) -> tuple[bool, str]:
    code = ("import tb_plugin.loader as L, sys; f = getattr(L, 'load_trace', None); "
            "sys.exit(0 if callable(f) else 3)")
    r = subprocess.run([py, "-c", code], cwd=str(REPO), capture_output=True, text=True, check=False)
    if r.returncode == 0:
        return True, ""
    if r.returncode == 3:
        return False, "tb_plugin.loader has no load_trace yet"
    return False, "cannot import tb_plugin.loader: " + (r.stderr.strip().splitlines() or ["?"])[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _runs_state(doc) -> str | None:
    """'ready' / 'failed' / None (still loading) from a /runs answer. Understands our plugin's
    per-span ``state`` fields (searched anywhere in the answer) and 0.4.3's {"runs": [...], "loading"}."""
    states: list[str] = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("state", "status") and isinstance(v, str):
                    states.append(v.lower())
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    if states:
        if any(s in ("failed", "error") for s in states):
            return "failed"
        if all(s == "ready" for s in states):
            return "ready"
        return None
    if isinstance(doc, dict) and isinstance(doc.get("runs"), list) and doc["runs"] and not doc.get("loading", False):
        return "ready"
    return None


def run_tensorboard(trace: Path, tb_bin: str, *, timeout: float, label: str, keep_logdir: bool = False) -> dict:
    """Start TensorBoard on a logdir holding only this trace (in a run dir); wait for ready."""
    logdir = Path(tempfile.mkdtemp(prefix=f"tb_{label}_", dir=str(BENCH_DIR)))
    run_dir = logdir / (trace.parent.name or "run")
    run_dir.mkdir()
    link = run_dir / trace.name
    try:
        os.link(trace, link)
    except OSError:
        os.symlink(trace.resolve(), link)
    port = free_port()
    cmd = [tb_bin, "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port), "--load_fast=false"]
    url = f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler/runs"
    log = open(logdir / "tensorboard.log", "w")  # noqa: SIM115 - closed in the finally below
    busy0 = _busy_cpu_s()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=str(logdir))
    sampler = TreeSampler(p.pid)
    sampler.start()
    res: dict = {"cmd": " ".join(cmd), "logdir": str(logdir)}
    first_http = None
    state = None
    last_doc = None
    try:
        while time.perf_counter() - t0 < timeout:
            if p.poll() is not None:
                res["error"] = f"tensorboard exited with {p.returncode}"
                break
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    body = r.read()
                if first_http is None:
                    first_http = time.perf_counter() - t0
                last_doc = json.loads(body)
                state = _runs_state(last_doc)
                if state:
                    break
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            time.sleep(0.1)
        ready = time.perf_counter() - t0
        # a little longer: memory can still grow right after "ready" (e.g. results being unpickled)
        time.sleep(1.0)
    finally:
        sampler.stop()
        busy1 = _busy_cpu_s()
        _stop_tree(p)
        log.close()
    res.update(state=state or "timeout", time_to_ready_s=ready if state else None,
               time_to_first_http_s=first_http, peak_tree_mb=sampler.peak / 2**20,
               last_runs=last_doc if len(json.dumps(last_doc)) < 2000 else "(long)")
    wall = ready + 1.0
    res["machine_busy_cores"] = (busy1 - busy0) / wall  # all CPU use incl. TensorBoard's own
    with contextlib.suppress(OSError):
        res["log_tail"] = (logdir / "tensorboard.log").read_text()[-1500:]
    if not keep_logdir:
        shutil.rmtree(logdir, ignore_errors=True)
    return res


def _stop_tree(p: subprocess.Popen):
    """Stop the TensorBoard we started and its descendants (by pid; nothing else)."""
    import psutil
    try:
        kids = psutil.Process(p.pid).children(recursive=True)
    except psutil.Error:
        kids = []
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    for k in kids:
        with contextlib.suppress(psutil.Error):
            k.kill()


def fmt(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("trace", nargs="?", help="trace file (.pt.trace.json or .json.gz)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the fast measurements, best kept (3)")
    ap.add_argument("--old-repeat", type=int, default=1, help="runs of the old plugin (1; it is slow)")
    ap.add_argument("--old-venv", default=str(BENCH_DIR / "oldvenv"))
    ap.add_argument("--skip-old", action="store_true")
    ap.add_argument("--skip-ours", action="store_true")
    ap.add_argument("--skip-floor", action="store_true")
    ap.add_argument("--tensorboard", action="store_true", help="also time the real TensorBoard (ours)")
    ap.add_argument("--tensorboard-old", action="store_true", help="also time 0.4.3's TensorBoard")
    ap.add_argument("--tb-timeout", type=float, default=1800.0)
    ap.add_argument("--python", default=str(PROJECT_PY) if PROJECT_PY.exists() else sys.executable,
                    help="interpreter for the floor and ours (default: .venv/bin/python)")
    ap.add_argument("--json-out", help="write all results as JSON here")
    ap.add_argument("--no-lean", action="store_true", help="skip the informational args-as-Raw decode")
    ap.add_argument("--child", choices=["floor-gunzip", "floor-decode", "floor-lean", "old", "ours"],
                    help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        {"floor-gunzip": lambda p: child_floor(p, "gunzip"), "floor-decode": lambda p: child_floor(p, "decode"),
         "floor-lean": lambda p: child_floor(p, "lean"), "old": child_old, "ours": child_ours}[a.child](a.trace)
        return 0
    if not a.trace:
        ap.error("trace is required")

    trace = Path(a.trace).resolve()
    me = str(HERE)
    info = machine_info()
    out: dict = {"trace": str(trace), "trace_file_mb": trace.stat().st_size / 1e6, "machine": info}
    print(f"trace   {trace}  ({trace.stat().st_size / 1e6:.1f} MB on disk)")
    print(f"machine {info['cpu']}; {info['cores']} cores ({info['usable_cores']} usable); "
          f"{info['ram_gb']} GB RAM; Python {info['python']} (bench) ; load avg at start "
          + " ".join(f"{x:.2f}" for x in info["loadavg_start"]))
    pyver = subprocess.run([a.python, "-c", "import platform; print(platform.python_version())"],
                           capture_output=True, text=True, check=False).stdout.strip()
    print(f"python for floor/ours: {a.python} ({pyver})")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    # ---- a. decode floor
    if not a.skip_floor:
        print(f"[floor] {a.repeat} runs ...", file=sys.stderr, flush=True)
        gz = best_of(a.repeat, [a.python, me, "--child", "floor-gunzip", str(trace)], "wall_s", env=env)
        dec = best_of(a.repeat, [a.python, me, "--child", "floor-decode", str(trace)], "decode_s", env=env)
        if not gz.get("ok") or not dec.get("ok"):
            print("[floor] FAILED:", gz.get("stderr") or dec.get("stderr"), file=sys.stderr)
        out["floor_gunzip"], out["floor_decode"] = gz, dec
        if not a.no_lean:
            out["floor_lean"] = best_of(a.repeat, [a.python, me, "--child", "floor-lean", str(trace)], "decode_s",
                                        env=env)
    # ---- b. old plugin
    if not a.skip_old:
        py_old = ensure_old_venv(Path(a.old_venv))
        if py_old:
            print(f"[old] torch-tb-profiler 0.4.3, {a.old_repeat} run(s) ...", file=sys.stderr, flush=True)
            out["old"] = best_of(a.old_repeat, [str(py_old), me, "--child", "old", str(trace)], "total_s",
                                 cwd=tempfile.gettempdir())
            if not out["old"].get("ok"):
                print("[old] FAILED:\n" + out["old"].get("stderr", out["old"].get("error", "")), file=sys.stderr)
    # ---- c. ours
    if not a.skip_ours:
        ok, why = ours_available(a.python)
        if ok:
            print(f"[ours] tb_plugin.loader.load_trace, {a.repeat} runs ...", file=sys.stderr, flush=True)
            out["ours"] = best_of(a.repeat, [a.python, me, "--child", "ours", str(trace)], "load_s",
                                  cwd=str(REPO), env=env)
            if not out["ours"].get("ok"):
                print("[ours] FAILED:\n" + out["ours"].get("stderr", ""), file=sys.stderr)
        else:
            out["ours"] = {"ok": False, "skipped": why}
            print(f"[ours] SKIPPED: {why}", file=sys.stderr)
    # ---- d. TensorBoard
    if a.tensorboard:
        tb = str(Path(a.python).parent / "tensorboard")
        print(f"[tb] {tb} ...", file=sys.stderr, flush=True)
        out["tb"] = run_tensorboard(trace, tb, timeout=a.tb_timeout, label="ours")
    if a.tensorboard_old:
        py_old = ensure_old_venv(Path(a.old_venv))
        if py_old:
            print("[tb-old] 0.4.3's tensorboard ...", file=sys.stderr, flush=True)
            out["tb_old"] = run_tensorboard(trace, str(py_old.parent / "tensorboard"), timeout=a.tb_timeout,
                                            label="old")
    info["loadavg_end"] = os.getloadavg()
    report(out)
    if a.json_out:
        Path(a.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json_out).write_text(json.dumps(out, indent=2, default=str))
        print(f"results written to {a.json_out}")
    return 0


def report(out: dict):
    rows = []  # (what, seconds, runs, peak MB, note)
    gz, dec, old, ours = (out.get(k) or {} for k in ("floor_gunzip", "floor_decode", "old", "ours"))
    floor = None
    if dec.get("ok"):
        rows.append(("read file (page cache)", dec.get("read_s"), dec["runs"], None, ""))
        if gz.get("ok") and "gunzip_stdlib_s" in gz:
            rows.append(("gunzip, stdlib gzip", gz["gunzip_stdlib_s"], gz["runs"], None, ""))
            if "gunzip_isal_s" in gz:
                rows.append(("gunzip, isal.igzip", gz["gunzip_isal_s"], gz["runs"], None, ""))
        gunzip = min(v for v in (gz.get("gunzip_stdlib_s"), gz.get("gunzip_isal_s"), dec.get("gunzip_s"))
                     if v is not None) if dec.get("json_bytes") != dec.get("file_bytes") else 0.0
        rows.append(("typed decode, msgspec", dec["decode_s"], dec["runs"], None,
                     f"{dec.get('events', 0):,} events, {dec.get('json_bytes', 0) / 1e6:.1f} MB JSON"))
        floor = gunzip + dec["decode_s"]
        rows.append(("DECODE FLOOR (fastest gunzip + decode)", floor, dec["runs"], dec["peak_mb"],
                     "peak RSS = read+gunzip+decode process"))
        lean = out.get("floor_lean") or {}
        if lean.get("ok"):
            rows.append(("  info: decode with args as msgspec.Raw", lean["decode_s"], lean["runs"], lean["peak_mb"],
                         f"args not decoded; + gunzip = {gunzip + lean['decode_s']:.3f} s"))
    if ours.get("ok"):
        rows.append(("OURS load_trace()", ours["load_s"], ours["runs"], ours["peak_mb"],
                     f"+{ours['import_s']:.2f} s import; subprocess wall {ours['wall_s']:.2f} s"))
    elif ours:
        why = ours.get("skipped") or ours.get("stderr", "failed")[-200:]
        rows.append(("OURS load_trace()", None, 0, None, "skipped: " + why))
    if old.get("ok"):
        rows.append(("OLD 0.4.3 parse+views", old["total_s"], old["runs"], old["peak_mb"],
                     (f"read+json {old['read_decode_s']:.1f} / process+analyze {old['process_analyze_s']:.1f} / "
                      f"generate {old['generate_s']:.1f} s; +{old['import_s']:.2f} s import")))
        rows.append(("  old: + pickling result for TB", old["pickle_s"], old["runs"], None,
                     f"{old['pickle_mb']:.0f} MB pickle (not in the line above)"))
    elif old:
        why = old.get("stderr", old.get("error", ""))[-200:]
        rows.append(("OLD 0.4.3 parse+views", None, 0, None, "failed: " + why))
    for key, label in (("tb", "TENSORBOARD (ours) to ready"), ("tb_old", "TENSORBOARD (0.4.3) to ready")):
        tb = out.get(key)
        if tb:
            rows.append((label, tb.get("time_to_ready_s"), 1, tb.get("peak_tree_mb"),
                         (f"state {tb.get('state')}; first HTTP at {fmt(tb.get('time_to_first_http_s'))} s; "
                          f"RSS summed over the process tree; all CPU use {fmt(tb.get('machine_busy_cores'))} cores")))
    w = max(len(r[0]) for r in rows) if rows else 10
    print()
    print(f"{'measurement'.ljust(w)}  {'best s':>8}  {'runs':>4}  {'peak RSS MB':>11}  note")
    print("-" * (w + 40))
    for what, s, n, mb, note in rows:
        print(f"{what.ljust(w)}  {fmt(s, 3):>8}  {n:>4}  {fmt(mb, 0):>11}  {note}")
    print()
    ratios = {}
    if floor and ours.get("ok"):
        ratios["ours_over_floor"] = ours["load_s"] / floor
        print(f"ours / floor      = {ratios['ours_over_floor']:.2f}   (target <= 2.0)  "
              f"{'OK' if ratios['ours_over_floor'] <= 2.0 else 'MISSED'}")
    if old.get("ok") and ours.get("ok"):
        ratios["old_over_ours"] = old["total_s"] / ours["load_s"]
        print(f"old / ours        = {ratios['old_over_ours']:.1f}x  (target >= 8)    "
              f"{'OK' if ratios['old_over_ours'] >= 8 else 'MISSED'}")
    if floor and old.get("ok"):
        ratios["old_over_floor"] = old["total_s"] / floor
        print(f"old / floor       = {ratios['old_over_floor']:.1f}x")
    tb = out.get("tb")
    if tb and tb.get("peak_tree_mb"):
        print(f"TensorBoard tree peak RSS = {tb['peak_tree_mb']:.0f} MB (target <= 800)  "
              f"{'OK' if tb['peak_tree_mb'] <= 800 else 'MISSED'}")
    out["ratios"] = ratios
    busy = {k: round(v.get("other_cores", 0), 2) for k, v in
            (("floor", dec), ("old", old), ("ours", ours)) if v.get("ok")}
    m = out["machine"]
    steal = {k: round(v.get("steal_cores", 0), 2) for k, v in
             (("floor", dec), ("old", old), ("ours", ours)) if v.get("ok")}
    print(f"machine busy: other processes used on average {busy} cores during the runs (max over runs; "
          f"hypervisor steal {steal} cores); load avg start {m['loadavg_start'][0]:.2f}, "
          f"end {m.get('loadavg_end', [0])[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
