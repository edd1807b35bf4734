"""Rank summaries: the job-level Distributed answer from summaries read back from Parquet equals the answer from full
models on real multi-rank runs, and the vectorised cross-rank matching and per-group stragglers on hand-checked
synthetic summaries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.analysis.distributed import distributed, job_distributed
from tb_plugin.analysis.rank_summary import RankSummary, rank_summary
from tb_plugin.analysis.views import available_views, merge_views
from tb_plugin.loader import load_trace
from tb_plugin.scaleout.summaries import read_summary, write_summary
from tests.conftest import SAMPLES


def _ranks(run: str) -> list[tuple[str, object]]:
    files = sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))
    return [(f.name.split(".")[0], load_trace(str(f))) for f in files]


@pytest.mark.parametrize("run", ["ddp_resnet", "pp_two_groups", "gloo_8proc_cpu"])
def test_job_from_stored_summaries_equals_job_from_models(run: str, tmp_path: Path) -> None:
    traces = _ranks(run)
    from_models = distributed(traces)  # type: ignore[arg-type]
    stored = []
    for worker, model in traces:
        write_summary(rank_summary(model, worker), tmp_path / worker)  # type: ignore[arg-type]
        stored.append(read_summary(tmp_path / worker))
    from_summaries = job_distributed(stored)
    # the views a trace offers travel with its summary (the server lists a preprocessed run's views from them)
    assert [s.views for s in stored] == [available_views([m]) for _, m in traces]  # type: ignore[list-item]
    assert all("Distributed" in s.views and "Overview" in s.views for s in stored)
    # JSON equality: NaN-free payloads compare value for value, floats bit for bit
    assert json.dumps(from_summaries, sort_keys=True) == json.dumps(from_models, sort_keys=True)
    assert len(from_models["ranks"]) == len(traces)


def test_real_runs_name_their_stragglers_per_group() -> None:
    ddp = distributed(_ranks("ddp_resnet"))  # type: ignore[arg-type]
    assert ddp["straggler"]["rank"] == 1
    (group,) = ddp["groups"]
    # rank 1 sleeps a step: it is the slowest and the one rank 0 waits for in the gradient all-reduces
    assert group["group"] == "0" and group["ranks"] == 2 and group["matched"] == 10
    assert group["slowest"]["rank"] == 1 and group["most_waited_for"]["rank"] == 1
    assert group["most_waited_for"]["others_wait_us"] > 10_000 > group["most_waited_for"]["own_wait_us"]
    pp = distributed(_ranks("pp_two_groups"))  # type: ignore[arg-type]
    assert [g["group"] for g in pp["groups"]] == ["0", "1"]
    assert [g["matched"] for g in pp["groups"]] == [16, 2]
    gloo = distributed(_ranks("gloo_8proc_cpu"))  # type: ignore[arg-type]
    (default,) = gloo["groups"]
    assert default["ranks"] == 8 and default["matched"] == 20
    assert all(r["overlap_us"] is None for r in gloo["ranks"])  # CPU-only: overlap n/a, kept through summaries


def _summary(worker: str, rank: int | None, collectives: list[tuple[str, str, int, float, float]],
             step: tuple[float, float] = (0.0, 1000.0)) -> RankSummary:
    """A hand-made rank: one step window, no computation, the given (name, group, seq, start, end) instances."""
    names, groups, seqs, starts, ends = (list(c) for c in zip(*collectives)) if collectives else ([], [], [], [], [])
    comm = float(sum(e - s for *_, s, e in collectives))
    return RankSummary(
        worker=worker, rank=rank, world_size=None, backend="nccl", process=1, host_wait_us=0.0, host_idle_us=0.0,
        overlap_note=None, step_names=["1"],
        steps={"start": np.array([step[0]]), "end": np.array([step[1]]), "step_us": np.array([step[1] - step[0]]),
               "computation_us": np.zeros(1), "communication_us": np.array([comm]), "overlap_us": np.zeros(1),
               "busy_us": np.array([comm])},
        collectives={"name": np.array(names, dtype=object), "group": np.array(groups, dtype=object),
                     "seq": np.array(seqs, dtype=np.int64), "start": np.array(starts, dtype=np.float64),
                     "end": np.array(ends, dtype=np.float64), "nbytes": np.full(len(names), 1000, dtype=np.int64)},
        devices=[])


def test_matching_by_group_and_sequence_hand_checked() -> None:
    # group "a": instance 0 lasts 100/40/70 µs on ranks 0/1/2, so 40 µs is transfer everywhere; instance 1 exists
    # on ranks 0 and 1 only (unmatched: all transfer). Group "b" (ranks 0 and 2): 10 and 30 µs.
    r0 = _summary("w0", 0, [("allreduce", "a", 0, 100.0, 200.0), ("allreduce", "a", 1, 300.0, 320.0),
                            ("broadcast", "b", 0, 500.0, 510.0)])
    r1 = _summary("w1", 1, [("allreduce", "a", 0, 160.0, 200.0), ("allreduce", "a", 1, 300.0, 310.0)])
    r2 = _summary("w2", 2, [("allreduce", "a", 0, 130.0, 200.0), ("broadcast", "b", 0, 480.0, 510.0)])
    job = job_distributed([r2, r0, r1])  # any order in, rank order out
    rows = job["ranks"]
    assert [r["rank"] for r in rows] == [0, 1, 2]
    # rank 0: a/0 transfer 40 of 100 (sync 60), a/1 unmatched (20 transfer), b/0 not on rank 1: unmatched (10)
    assert rows[0]["transfer_us"] == pytest.approx(40 + 20 + 10) and rows[0]["sync_us"] == pytest.approx(60)
    assert rows[1]["transfer_us"] == pytest.approx(40 + 10) and rows[1]["sync_us"] == pytest.approx(0)
    assert rows[2]["transfer_us"] == pytest.approx(40 + 30) and rows[2]["sync_us"] == pytest.approx(30)
    notes = " ".join(job["notes"])
    assert "Process group a has different numbers of collectives per rank (rank 0: 2, rank 1: 2, rank 2: 1)" in notes
    assert "Process group b" in notes
    a, b = job["groups"]
    # in "a" only instance 0 is matched: waits 60/0/30 µs, so rank 1 (last to arrive) is waited for; with equal
    # steps it has the most time of its own (1000 − 0 µs against 940 and 970), so it is the slowest too: the two
    # never disagree (it used to be rank 0, the first of three equal 1000 µs steps)
    assert a == {"group": "a", "ranks": 3, "matched": 1,
                 "slowest": {"rank": 1, "worker": "w1", "step_us": 1000.0, "own_us": 1000.0},
                 "most_waited_for": {"rank": 1, "worker": "w1", "own_wait_us": 0.0, "others_wait_us": 45.0}}
    # "b" has no instance every rank has: nothing matched, no waits
    assert b["matched"] == 0 and b["ranks"] == 2 and b["most_waited_for"]["others_wait_us"] == 0.0
    allreduce = next(c for c in rows[0]["collectives"] if c["name"] == "allreduce")
    assert allreduce["calls"] == 2 and allreduce["total_us"] == 120.0 and allreduce["transfer_us"] == 60.0


def test_merged_views_follow_the_view_order() -> None:
    assert merge_views([["Trace", "Overview"], ["Distributed", "Overview"], []]) == ["Overview", "Trace", "Distributed"]
    assert merge_views([]) == []


def test_ranks_without_numbers_take_their_place_by_worker_name() -> None:
    job = job_distributed([_summary("host_b", None, []), _summary("host_a", None, [])])
    assert [(r["rank"], r["worker"]) for r in job["ranks"]] == [(0, "host_a"), (1, "host_b")]
    assert job["groups"] == [] and job["world_size"] == 2 and job["straggler"] is None
