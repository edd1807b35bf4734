"""``summary PATH``: the verdict, the step breakdown and the top operators and kernels, as terminal tables
(pandas formats them) or as JSON."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from ..sdk import Mfu, Overview, Trace, WhatIf

NAME_WIDTH = 70  # kernel names run to hundreds of characters: cut for a terminal, whole in --json


def verdict_text(verdict: dict[str, Any] | None) -> str | None:
    """The Overview's verdict (``{kind, text, saving_us}``) as one line; None when the run has no steps."""
    return str(verdict["text"]) if verdict else None


def finding_texts(findings: pd.DataFrame) -> list[str]:
    """Each finding (ranked recommendation) as one line: its title, if it has one, then its text, where in the step
    its cause lives (the user's frame, the API it calls, the region) where the trace shows it, then its replayed
    saving (the what-if replay of its fix alone) where it has one."""
    lines = []
    for row in findings.to_dict("records"):
        title, text = row.get("title"), row.get("text")
        parts = [str(p) for p in (title, text) if isinstance(p, str) and p]
        line = ": ".join(parts) or str(row.get("id", ""))
        where = row.get("where")
        if isinstance(where, dict) and where.get("text"):
            line += f" [where: {where['text']}]"
        replayed = row.get("what_if")
        if isinstance(replayed, dict):
            line += (f" [replayed: {replayed['label']}: −{replayed['saving_us'] / 1000.0:.2f} ms/step → "
                     f"{replayed['predicted_step_us'] / 1000.0:.2f} ms]")
        lines.append(line)
    return lines


def all_fixes_text(w: WhatIf) -> str:
    """The prediction with every finding's fix replayed together (one replay, not the sum of the savings)."""
    return (f"All {len(w.ids)} fixes together ({', '.join(w.ids)}): step {w.baseline_step_us / 1000.0:.2f} ms → "
            f"{w.predicted_step_us / 1000.0:.2f} ms predicted (−{w.saving_us / 1000.0:.2f} ms/step, one replay)")


def flops_text(value: float | None, unit: str = "FLOP/s") -> str:
    """``17.6 TFLOP/s``: SI prefixes up to peta."""
    if value is None:
        return "n/a"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def mfu_text(m: Mfu) -> str:
    """One line: the ratio, achieved against the peak used, the device and the model FLOPs per step."""
    device = m.raw["device"]
    per_step = flops_text(m.model_flops_per_step, "FLOP") + " per step" + (", estimated from shapes"
                                                                            if m.estimated else "")
    if m.model_flops_per_step <= 0:
        return f"MFU: n/a ({m.raw.get('note') or 'no operator work could be estimated'})"
    if m.ratio is None:
        return (f"MFU: n/a ({device.get('note') or 'no peak'}); achieved {flops_text(m.achieved_flops_per_s)}, "
                f"{per_step}")
    return (f"MFU: {m.ratio:.1%} ({flops_text(m.achieved_flops_per_s)} of the {flops_text(m.peak_flops_per_s)} "
            f"{(m.dtype or '').upper()} peak of the {device.get('table_entry')}; {per_step})")


def job_mfu_text(m: Mfu) -> str | None:
    if not m.job or m.job.get("ratio") is None:
        return None
    return (f"Job MFU: {m.job['ratio']:.1%} over {len(m.ranks)} ranks ({flops_text(m.job['achieved_flops_per_s'])} "
            f"of {flops_text(m.job['peak_flops_per_s'])}, at the slowest rank's step)")


def top_operators(trace: Trace, n: int) -> pd.DataFrame:
    """The operators that cost most: by device self time when the trace has device work, else host self."""
    ops = trace.operators()
    if ops.empty:
        return ops
    key = "device_self_us" if ops["device_self_us"].sum() > 0 else "host_self_us"
    columns = ["name", "calls", "host_self_us", "host_total_us", "device_self_us", "device_total_us"]
    top: pd.DataFrame = ops.sort_values(key, ascending=False).head(n)[columns].reset_index(drop=True)
    return top


def top_kernels(trace: Trace, n: int) -> pd.DataFrame:
    kernels = trace.kernels()
    if kernels.empty:
        return kernels
    columns = ["name", "calls", "total_us", "mean_us", "achieved_occupancy", "tensor_cores"]
    top: pd.DataFrame = kernels.sort_values("total_us", ascending=False).head(n)[columns].reset_index(drop=True)
    return top


def summary_data(trace: Trace, top: int) -> dict[str, Any]:
    """Everything ``summary`` shows, as plain data (what ``--json`` prints)."""
    o = trace.overview()
    return {
        "file": trace.file.filename, "run": trace.run, "worker": trace.worker, "span": trace.span,
        "verdict": o.verdict,
        "findings": records(o.findings),
        "what_if_all": trace.what_if().raw,
        "steps": len(o.steps),
        "step_time_us": o.step_time_us,
        "mfu": {k: v for k, v in o.mfu.raw.items() if k != "steps"},
        "breakdown": {c: {"time_us": r["time_us"], "share": r["share"]} for c, r in o.breakdown.iterrows()},
        "device_type": o.environment.get("device_type"),
        "gpus": records(o.gpus),
        "operators": records(top_operators(trace, top)),
        "kernels": records(top_kernels(trace, top)),
        "notes": o.notes,
        "ranks": records(rank_table(trace)) if len(trace.workers) > 1 else None,
    }


def rank_table(trace: Trace) -> pd.DataFrame:
    """Per rank of a distributed run: step time and what it is made of (the Distributed view)."""
    columns = ["worker", "rank", "step_us", "computation_us", "communication_us", "overlap_us", "other_us"]
    table: pd.DataFrame = trace.distributed()[columns]
    return table


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-safe dicts, NaN as null, every float whole (``to_json`` would round to 10 digits)."""
    rows: list[dict[str, Any]] = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return rows


def _ms(frame: pd.DataFrame) -> pd.DataFrame:
    """``*_us`` columns as ``*_ms`` (what people read), names cut to the terminal."""
    out: pd.DataFrame = frame.copy()
    for col in [c for c in out.columns if c.endswith("_us")]:
        out[col.removesuffix("_us") + "_ms"] = out.pop(col) / 1000.0
    if "name" in out:
        out["name"] = out["name"].map(lambda s: s if len(s) <= NAME_WIDTH else s[:NAME_WIDTH - 1] + "…")
    return out


def gpu_lines(o: Overview) -> list[str]:
    """Per GPU, its utilization: the headline (all kernels) and, where communication kernels make a difference,
    the same without them, named apart (a rank waiting in NCCL looks busy by the first)."""
    lines = []
    for g in records(o.gpus):
        if g.get("utilization") is None:
            continue
        name = f"GPU {g['id'] if g.get('id') is not None else '(unknown device)'}"
        line = f"{name}: utilization {g['utilization']:.1%} (all kernels: the headline"
        compute = g.get("compute_utilization")
        if compute is not None and abs(compute - g["utilization"]) >= 5e-4:
            line += f"; {compute:.1%} without communication kernels"
        lines.append(line + ")")
    return lines


def breakdown_table(o: Overview) -> pd.DataFrame:
    table = pd.DataFrame({"ms/step": o.breakdown["time_us"] / 1000.0, "share": o.breakdown["share"]})
    shown: pd.DataFrame = table[table["ms/step"] > 0]
    return shown


def print_summary(trace: Trace, top: int, as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary_data(trace, top), indent=2))
        return
    o = trace.overview()
    print(f"{trace.file.filename}: run {trace.run}, worker {trace.worker}, span {trace.span} "
          f"({trace.model.n_events:,} events, {o.environment.get('device_type')})")
    verdict = verdict_text(o.verdict)
    if verdict:
        print(f"\nVerdict: {verdict}")
    print(f"\nStep time: {o.step_time_us / 1000.0:.2f} ms on average over {len(o.steps)} step(s)")
    print(mfu_text(o.mfu))
    job = job_mfu_text(o.mfu)
    if job:
        print(job)
    print(breakdown_table(o).to_string(formatters={"ms/step": "{:.2f}".format, "share": "{:.1%}".format}))
    for note in o.notes:
        print(f"note: {note}")
    lines = gpu_lines(o)
    if lines:
        print("\n" + "\n".join(lines))
    findings = finding_texts(o.findings)
    if findings:
        print("\nFindings:")
        for i, text in enumerate(findings, 1):
            print(f"{i:>2}. {text}")
        together = trace.what_if()
        if together.ids:
            print(all_fixes_text(together))
    if len(trace.workers) > 1:
        ranks = trace.distributed()
        print(f"\nRanks ({len(ranks)} workers of span {trace.span}; this summary is of {trace.worker}):")
        print(_ms(rank_table(trace)).to_string(index=False, float_format="{:.2f}".format))
        straggler = ranks.attrs.get("straggler")
        if straggler:
            print(straggler.get("text"))
    ops = top_operators(trace, top)
    if not ops.empty:
        print(f"\nTop {len(ops)} operators:")
        print(_ms(ops).to_string(index=False, float_format="{:.3f}".format))
    kernels = top_kernels(trace, top)
    if not kernels.empty:
        print(f"\nTop {len(kernels)} kernels:")
        print(_ms(kernels).to_string(index=False, float_format="{:.3f}".format))
