"""The calibration table of the what-if replay (issue 25): for every pair of the calibration corpus (a planted cause
and its fixed twin, recorded in the same call on the same GPU by samples/scripts/run_calibration.sh), the step time
the replay predicts for the planted run with its cause's fix, against the fixed twin's measured step time (both the
cadence of ``whatif.replay``: the mean interval between step completions). The healthy pair (recorded twice) says
how much the diagnosis promises where there is nothing to fix.

    .venv/bin/python benchmarks/calibration_table.py [CORPUS] [--write]

CORPUS defaults to tests/data/calibration (its MANIFEST.json lists the pairs); ``--write`` puts the table between
the ``calibration:start``/``calibration:end`` markers of docs/guide/overview.md, otherwise it is printed.
tests/unit/test_calibration.py checks each pair with the same functions.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tb_plugin.analysis.distributed import distributed  # noqa: E402
from tb_plugin.analysis.overview import overview  # noqa: E402
from tb_plugin.analysis.rank_summary import rank_summary  # noqa: E402
from tb_plugin.analysis.whatif.replay import measured_step_us  # noqa: E402
from tb_plugin.analysis.whatif.what_if import what_if  # noqa: E402
from tb_plugin.loader import load_trace  # noqa: E402
from tb_plugin.model.tables import TraceModel  # noqa: E402

CORPUS = REPO / "tests" / "data" / "calibration"
GUIDE = REPO / "docs" / "guide" / "overview.md"
TOLERANCE = 0.25  # the prediction after the fix within 25 % of the fixed twin's measured step
HEALTHY_SHARE = 0.10  # the healthy run is promised no saving above 10 % of its step

# The findings whose fixes each planted root cause's fix is (samples/scripts/calibration_pairs.py's root_cause).
FINDINGS = {
    "recompilation": ("recompilation",), "allocator_churn": ("allocator_churn",),
    "tf32_disabled": ("low_tensor_cores",),
    "launch_bound": ("launch_bound",), "unfused_optimizer": ("unfused_optimizer",),
    "host_device_sync": ("sync_bound",), "cpu_tensor_creation": ("cpu_tensor_creation",),
    "host_augmentation": ("host_compute",), "dataloader_wait": ("input_bound",),
    "copy_bound": ("pageable_copies", "copy_bound"), "activation_checkpointing": ("checkpoint_recompute",),
    "cudnn_benchmark_off": ("cudnn_benchmark", "cudnn_autotune"), "cudnn_autotune_churn": ("cudnn_autotune",),
    "grad_accum_allreduce": ("grad_accum_allreduce",), "straggler_host": ("straggler",),
    "pipeline_bubble": ("pipeline_bubble",),
}  # a root cause none of whose findings has a fix to replay falls back to the verdict's finding


@dataclass(frozen=True)
class Row:
    pair: str
    root_cause: str
    verdict: str  # the planted run's verdict kind
    replayed: list[str]  # the findings whose fixes were replayed together
    planted_us: float  # measured step of the planted run
    predicted_us: float  # replayed with the fix
    measured_us: float  # measured step of the fixed twin
    healthy: bool

    @property
    def error(self) -> float:
        """(predicted − measured) / measured; for the healthy pair, the largest saving promised, as a share."""
        if self.healthy:
            return (self.planted_us - self.predicted_us) / self.planted_us if self.planted_us > 0 else 0.0
        return (self.predicted_us - self.measured_us) / self.measured_us if self.measured_us > 0 else float("inf")

    @property
    def ok(self) -> bool:
        return self.error <= HEALTHY_SHARE if self.healthy else abs(self.error) <= TOLERANCE


def _models(folder: Path) -> list[tuple[str, TraceModel]]:
    files = sorted(folder.glob("*.pt.trace.json*"))
    if not files:
        raise FileNotFoundError(f"{folder}: no trace files")
    return [(f.name.split(".")[0], load_trace(str(f))) for f in files]


def _rank(models: list[tuple[str, TraceModel]], rank: int | None) -> int:
    """The position of the worker of ``rank`` (its name ends in the rank), else the first."""
    if rank is None:
        return 0
    return next((i for i, (w, _) in enumerate(models) if re.search(rf"(?<!\d){rank}$", w)), 0)


def _diagnosed(models: list[tuple[str, TraceModel]], at: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Overview of worker ``at`` (with its job on a multi-rank run) and the what-if arguments for it."""
    worker, model = models[at]
    if len(models) < 2:
        return overview(model), {}
    job = distributed(models)
    summaries = [rank_summary(m, w) for w, m in models]
    return overview(model, job, worker, len(models), ranks=tuple(summaries)), {"job": job, "worker": worker,
                                                                   "summaries": summaries}


def pair_row(root: Path, entry: dict[str, Any]) -> Row:
    """One pair of the manifest, diagnosed, replayed and compared (module doc)."""
    pair, cause = str(entry["pair"]), str(entry["root_cause"])
    first, second = list(entry["variants"])[:2]
    planted, fixed = _models(root / pair / first), _models(root / pair / second)
    at = _rank(planted, entry.get("straggler_rank"))
    o, args = _diagnosed(planted, at)
    model = planted[at][1]
    replayable = [r for r in o["recommendations"] if r.get("what_if")]
    if cause == "none":
        best = max(replayable, key=lambda r: r["saving_us"], default=None)
        ids = [best["id"]] if best else []
    else:
        ids = [r["id"] for r in replayable if r["kind"] in FINDINGS.get(cause, (cause,))]
        if not ids and o["verdict"]["id"] in {r["id"] for r in replayable}:
            ids = [o["verdict"]["id"]]
    answer = what_if(model, ids, **args)
    return Row(pair=pair, root_cause=cause, verdict=str(o["verdict"]["kind"]), replayed=ids,
               planted_us=measured_step_us(model), predicted_us=float(answer["predicted_step_us"]),
               measured_us=measured_step_us(fixed[_rank(fixed, entry.get("straggler_rank"))][1]),
               healthy=cause == "none")


def table(root: Path = CORPUS) -> list[Row]:
    manifest = json.loads((root / "MANIFEST.json").read_text())
    return [pair_row(root, entry) for entry in manifest["pairs"]]


def markdown(rows: list[Row], manifest: dict[str, Any] | None = None) -> str:
    """The table as the guide shows it."""
    gpus = ", ".join(sorted(set((manifest or {}).get("environment", {}).get("gpus", []))))
    head = (f"Recorded on {gpus}. " if gpus else "") + ("Step times are cadences (ms); *predicted* is the planted "
                                                        "run replayed with the fixes of the findings named.\n\n")
    lines = [head, "| pair | root cause | verdict | fixes replayed | planted | predicted | fixed twin | error |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        error = (f"promises {100 * r.error:.1f} %" if r.healthy else f"{100 * r.error:+.1f} %") + ("" if r.ok else " ✗")
        steps = f"{r.planted_us / 1000:.2f} | {r.predicted_us / 1000:.2f} | {r.measured_us / 1000:.2f}"
        fixes = ", ".join(r.replayed) or "—"
        lines.append(f"| {r.pair} | {r.root_cause} | {r.verdict} | {fixes} | {steps} | {error} |")
    return "\n".join(lines) + "\n"


def write_guide(text: str, guide: Path = GUIDE) -> None:
    """Put ``text`` between the calibration markers of the guide."""
    doc = guide.read_text()
    start, end = "<!-- calibration:start -->\n", "<!-- calibration:end -->"
    if start not in doc or end not in doc:
        raise SystemExit(f"{guide}: the calibration markers are missing")
    before, rest = doc.split(start, 1)
    guide.write_text(before + start + text + end + rest.split(end, 1)[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("corpus", nargs="?", default=str(CORPUS))
    p.add_argument("--write", action="store_true", help="write the table into docs/guide/overview.md")
    args = p.parse_args(argv)
    root = Path(args.corpus)
    if not (root / "MANIFEST.json").is_file():
        print(f"{root}: no MANIFEST.json (record the corpus with samples/scripts/run_calibration.sh)", file=sys.stderr)
        return 2
    rows = table(root)
    text = markdown(rows, json.loads((root / "MANIFEST.json").read_text()))
    if args.write:
        write_guide(text)
    print(text)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
