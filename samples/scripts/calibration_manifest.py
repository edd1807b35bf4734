"""Write DEST/MANIFEST.json for the calibration pairs recorded by run_calibration.sh (issue 25).

Usage: python3 samples/scripts/calibration_manifest.py DEST [--elapsed SECONDS]
Reads DEST/logs/timings.*.tsv (pair, variant, queue, status, seconds, command: written by
run_calibration.sh) and each run's log, DEST/logs/<pair>.<variant>.log, for the `CALIBRATION_RESULT`
lines the recording scripts print (one per rank: untraced and profiled step times, allocator and compile
counters). Per pair: its root-cause kind, what is planted and what the fix changes (calibration_pairs.py),
the GPU it ran on, and per variant the run folder, command, status, seconds, trace files and sizes.
"""
import argparse
import datetime
import glob
import json
import os
import platform

from calibration_pairs import PAIRS, variants

GPU = {"0": "0", "1": "1", "both": "0,1"}


def read_timings(dest):
    out = {}
    for path in sorted(glob.glob(os.path.join(dest, "logs", "timings.*.tsv"))):
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 6:
                    pair, variant, queue, status, seconds, command = parts
                    out[(pair, variant)] = {"queue": queue, "status": status, "seconds": float(seconds),
                                            "command": command}
    return out


def read_results(log):
    """The CALIBRATION_RESULT payloads of a run's log (one per rank), in order."""
    results = []
    if not os.path.exists(log):
        return results
    with open(log, errors="replace") as f:
        for line in f:
            if line.startswith("CALIBRATION_RESULT "):
                try:
                    payload = json.loads(line[len("CALIBRATION_RESULT "):])
                except ValueError:
                    continue
                payload.pop("trace_files", None)  # listed once per variant, from the folder itself
                results.append(payload)
    return sorted(results, key=lambda r: r.get("rank", 0))


def environment(dest):
    env = {"python": platform.python_version(), "host_cpus": os.cpu_count()}
    try:
        import torch

        env["torch"] = torch.__version__
        env["cuda"] = torch.version.cuda
        env["cudnn"] = torch.backends.cudnn.version()
        if torch.cuda.is_available():
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
            env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as e:  # noqa: BLE001 - the manifest must still be written
        env["torch_error"] = repr(e)
    smi = os.path.join(dest, "logs", "nvidia-smi.txt")
    if os.path.exists(smi):
        with open(smi) as f:
            env["nvidia_smi"] = [line.strip() for line in f if line.strip()]
    return env


def variant_entry(dest, pair, variant, timings):
    run = f"{pair}/{variant}"
    entry = {"run": run}
    entry.update(timings.get((pair, variant), {"status": "not run"}))
    entry.pop("queue", None)
    run_dir = os.path.join(dest, pair, variant)
    if os.path.isdir(run_dir):
        files = sorted(f for f in os.listdir(run_dir) if ".pt.trace.json" in f)
        entry["trace_files"] = {f: os.path.getsize(os.path.join(run_dir, f)) for f in files}
    entry["results"] = read_results(os.path.join(dest, "logs", f"{pair}.{variant}.log"))
    return entry


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dest")
    p.add_argument("--elapsed", type=float, default=None, help="seconds the whole call took so far")
    args = p.parse_args()
    timings = read_timings(args.dest)
    pairs = []
    for pair, spec in PAIRS.items():
        entry = {"pair": pair, "root_cause": spec["root_cause"], "planted": spec["planted"], "fix": spec["fix"],
                 "script": f"samples/scripts/{spec['script']}", "gpu": GPU[str(spec["queue"])]}
        if "straggler_rank" in spec:
            entry["straggler_rank"] = spec["straggler_rank"]
        entry["variants"] = {v: variant_entry(args.dest, pair, v, timings) for v in variants(pair)}
        pairs.append(entry)
    manifest = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "recorded_by": "samples/scripts/run_calibration.sh",
        "elapsed_s": args.elapsed,
        "environment": environment(args.dest),
        "pairs": pairs,
    }
    path = os.path.join(args.dest, "MANIFEST.json")
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    bad = [f"{e['pair']}/{v}" for e in pairs for v, ve in e["variants"].items() if ve.get("status") != "ok"]
    print(f"wrote {path}: {len(pairs)} pairs" + (f"; not ok: {' '.join(bad)}" if bad else ", all runs ok"))


if __name__ == "__main__":
    main()
