"""Pages of the Distributed answer (``analysis.distributed_page`` and the ``/distributed`` route's parameters), on
128 synthetic ranks made by ``benchmarks/make_ranks.py`` from the real 2-rank DDP run (rank 42 the planted
straggler: a copy of DDP rank 1, which sleeps 5 ms per step; the 127 others copies of DDP rank 0)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import make_ranks
from tb_plugin.analysis import distributed_page
from tb_plugin.analysis.distributed import job_distributed, job_distributed_lazy
from tb_plugin.analysis.distributed_page import page_of
from tb_plugin.analysis.rank_summary import RankSummary, rank_summary
from tb_plugin.loader import load_trace
from tb_plugin.model.memo import Memo
from tb_plugin.model.tables import TraceModel
from tests.conftest import API, SAMPLES, wait_until_settled

RANKS, STRAGGLER = 128, 42


def _rank_summaries(sources: list[make_ranks.Source], models: list[TraceModel]) -> list[RankSummary]:
    """The summary of every rank ``make_ranks`` would write. A copy differs from its source only in
    ``distributedInfo`` (the rank, the world), so each source is summarised once, as a rank of this world, and each
    rank takes its source's summary with its own rank and worker. Loading and summarising 128 written copies costs
    ~20 s of CPU for the same rows; :func:`test_the_ranks_are_what_make_ranks_writes` checks they agree."""
    plan = make_ranks.assign(sources, RANKS, STRAGGLER)
    base = {}
    for src in sorted(set(plan)):
        info = make_ranks.new_info(sources[src].info, plan.index(src), RANKS)
        model = dataclasses.replace(models[src], meta={**models[src].meta, "distributedInfo": info}, memo=Memo(),
                                    computing={})
        base[src] = rank_summary(model, "rank")
    return [dataclasses.replace(base[src], rank=n, worker=f"rank{n}") for n, src in enumerate(plan)]


@pytest.fixture(scope="module")
def sources() -> tuple[list[make_ranks.Source], list[TraceModel]]:
    paths = sorted((SAMPLES / "ddp_resnet").glob("*.pt.trace.json.gz"))
    return [make_ranks.read_source(p) for p in paths], [load_trace(str(p)) for p in paths]


@pytest.fixture(scope="module")
def summaries(sources: tuple[list[make_ranks.Source], list[TraceModel]]) -> list[RankSummary]:
    return _rank_summaries(*sources)


def test_the_ranks_are_what_make_ranks_writes(sources: tuple[list[make_ranks.Source], list[TraceModel]],
                                              summaries: list[RankSummary], tmp_path: Path) -> None:
    """Ranks 0 and 42 written by ``make_ranks`` and loaded from their files summarise as the fixture's do."""
    out = tmp_path / "job"
    assert make_ranks.main([str(SAMPLES / "ddp_resnet"), "--ranks", str(RANKS), "--straggler", str(STRAGGLER),
                            "--jobs", "1", "--out", str(out), "--only", f"0,{STRAGGLER}"]) == 0
    files = sorted(out.glob("*.pt.trace.json.gz"), key=lambda f: int(f.name.split(".")[0][4:]))
    assert [f.name.split(".")[0] for f in files] == ["rank0", f"rank{STRAGGLER}"]
    for f in files:
        n = int(f.name.split(".")[0][4:])
        written = rank_summary(load_trace(str(f)), f"rank{n}")
        assert written.scalars() == summaries[n].scalars() and written.rank == n
        assert all(np.array_equal(written.steps[k], summaries[n].steps[k], equal_nan=True) for k in written.steps)
        assert all(np.array_equal(written.collectives[k], summaries[n].collectives[k])
                   for k in written.collectives)


@pytest.fixture(scope="module")
def job(summaries: list[RankSummary]) -> dict[str, Any]:
    return job_distributed(summaries)


def test_pages_sorted_by_step_time_cover_every_rank_once(job: dict[str, Any]) -> None:
    pages = [page_of(job, offset, 50, "step_us", "desc") for offset in (0, 50, 100)]
    assert [len(p["ranks"]) for p in pages] == [50, 50, 28]
    rows = [r for p in pages for r in p["ranks"]]
    assert sorted(r["rank"] for r in rows) == list(range(RANKS))
    steps = [r["step_us"] for r in rows]
    assert steps == sorted(steps, reverse=True)
    # the straggler's step is the longest (its host sleeps); the 127 copies of DDP rank 0 tie, kept in rank order
    assert rows[0]["rank"] == STRAGGLER and rows[0]["step_us"] > rows[1]["step_us"]
    assert [r["rank"] for r in rows[1:6]] == [0, 1, 2, 3, 4]
    for p in pages:
        assert p["page"]["total"] == RANKS and p["page"]["sort"] == "step_us" and p["page"]["order"] == "desc"
        assert [job["ranks"][i]["rank"] for i in p["page"]["positions"]] == [r["rank"] for r in p["ranks"]]
        assert p["communication_by_step"] == [r["per_step"]["communication_us"] for r in p["ranks"]]
    assert page_of(job, 200, 50)["ranks"] == []


def test_every_page_names_the_stragglers_and_totals_of_all_ranks(job: dict[str, Any]) -> None:
    last = page_of(job, 120, 8, "sync_us", "desc")
    assert last["ranks"][-1]["rank"] == STRAGGLER  # it waits least: last when sorted by wait, descending
    for p in (page_of(job, 0, 10), last):
        assert p["straggler"]["rank"] == STRAGGLER
        group = next(g for g in p["groups"] if g["group"] == "0")
        assert (group["ranks"], group["most_waited_for"]["rank"], group["slowest"]["rank"]) == (
            RANKS, STRAGGLER, STRAGGLER)
        totals = p["totals"]
        sync = np.array([r["sync_us"] for r in job["ranks"]])
        assert totals["ranks"] == RANKS and totals["mean"]["sync_us"] == pytest.approx(sync.mean())
        assert totals["min"]["sync_us"] == job["ranks"][STRAGGLER]["sync_us"] < 1000 < 12_000 < totals["max"]["sync_us"]
        assert totals["max"]["step_us"] == job["ranks"][STRAGGLER]["step_us"]


def test_heatmap_has_a_row_per_rank_or_bins_of_ranks(job: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    heat = page_of(job, 0, 1)["heatmap"]
    assert not heat["binned"] and heat["first"] == heat["last"] == list(range(RANKS))
    assert heat["mean"] == heat["max"] == job["communication_by_step"]
    assert heat["worker"][STRAGGLER] == f"rank{STRAGGLER}"
    monkeypatch.setattr(distributed_page, "HEATMAP_MAX_ROWS", 32)
    heat = page_of(job, 0, 1)["heatmap"]
    assert heat["binned"] and len(heat["mean"]) == 32 and heat["first"][10:12] == [40, 44]
    assert (heat["rank_first"][10], heat["rank_last"][10], heat["worker"][10]) == (40, 43, None)
    by_step = np.array(job["communication_by_step"])
    assert heat["mean"][10] == pytest.approx(by_step[40:44].mean(axis=0).tolist())
    assert heat["max"][10] == by_step[40:44].max(axis=0).tolist()
    # the straggler waits least: its bin's mean is below the others' by a quarter of the difference
    assert heat["mean"][10][0] < heat["mean"][9][0] - (by_step[41, 0] - by_step[STRAGGLER, 0]) / 4 + 1


def test_default_page_whole_up_to_256_ranks_then_100_rows(job: dict[str, Any],
                                                          summaries: list[RankSummary]) -> None:
    whole = page_of(job)
    assert [r["rank"] for r in whole["ranks"]] == list(range(RANKS)) and whole["page"]["limit"] == RANKS
    assert [r["rank"] for r in page_of(job, 10)["ranks"]] == list(range(10, RANKS))  # no limit: the same rule
    big = job_distributed([dataclasses.replace(summaries[i % RANKS], rank=i, worker=f"rank{i}") for i in range(300)])
    first = page_of(big)
    assert [r["rank"] for r in first["ranks"]] == list(range(100))
    assert first["page"] == {"offset": 0, "limit": 100, "total": 300, "sort": "rank", "order": "asc",
                             "positions": list(range(100))}
    assert len(first["heatmap"]["mean"]) == 300
    with pytest.raises(ValueError):
        page_of(job, sort="name")


def test_route_pages_and_refuses_bad_parameters(tensorboard_app: Any, tmp_path: Path) -> None:
    run = tmp_path / "logdir" / "ddp"
    run.mkdir(parents=True)
    for f in (SAMPLES / "ddp_resnet").glob("*.pt.trace.json.gz"):
        (run / f.name).symlink_to(f)
    client = tensorboard_app(run.parent)
    wait_until_settled(client, expect_spans=2)
    url = f"{API}/distributed?run=ddp&span=1"
    whole = client.get(url).get_json()
    assert [r["rank"] for r in whole["ranks"]] == [0, 1] and whole["page"]["total"] == 2
    second = client.get(f"{url}&offset=1&limit=1").get_json()
    assert [r["rank"] for r in second["ranks"]] == [1] and second["straggler"]["rank"] == 1
    by_wait = client.get(f"{url}&sort=sync_us&order=desc&limit=1").get_json()
    assert [r["rank"] for r in by_wait["ranks"]] == [0]  # rank 0 waits for the straggler
    worker = whole["ranks"][1]["worker"]
    found = client.get(f"{url}&q={worker[-6:].upper()}").get_json()  # the search: case-insensitive, any part
    assert [r["worker"] for r in found["ranks"]] == [worker] and found["page"]["total"] == 1
    assert found["totals"]["ranks"] == 2 and found["straggler"]["rank"] == 1  # the job's figures: every rank
    for bad, says in (("offset=-1", "offset"), ("limit=0", "limit"), ("limit=1025", "limit"),
                      ("limit=2.5", "limit"), ("sort=name", "sort"), ("order=up", "order")):
        r = client.get(f"{url}&{bad}")
        assert r.status_code == 400 and says in r.get_json()["error"], bad


def test_the_search_keeps_the_matching_rows_in_the_pages_sort(job: dict[str, Any]) -> None:
    """``q``: the rows whose "worker host rank" holds it (case-insensitive; quoted: equal to it), in the page's
    sort, paged among themselves; the totals and heat-map of every rank."""
    found = page_of(job, 0, 5, "step_us", "desc", q="RANK1")  # rank1, rank10..19, rank100..127
    ranks = [r["rank"] for r in found["ranks"]]
    expected = [r["rank"] for r in page_of(job, 0, RANKS, "step_us", "desc")["ranks"] if "rank1" in r["worker"]]
    assert ranks == expected[:5] and found["page"]["total"] == len(expected) == 1 + 10 + 28
    assert page_of(job, 35, 5, "step_us", "desc", q="rank1")["ranks"] == page_of(
        job, 0, RANKS, "step_us", "desc", q="rank1")["ranks"][35:]
    assert found["totals"] == page_of(job)["totals"] and found["heatmap"] == page_of(job)["heatmap"]
    host = job["ranks"][STRAGGLER].get("host") or ""
    exact = page_of(job, q=f'"rank{STRAGGLER} {host} {STRAGGLER}"')
    assert [r["rank"] for r in exact["ranks"]] == [STRAGGLER]
    assert page_of(job, q="no such rank")["ranks"] == [] and page_of(job, q="   ")["page"]["total"] == RANKS


def test_notes_name_a_few_ranks_and_count_the_rest(job: dict[str, Any]) -> None:
    """The 127 copies of DDP rank 0 each have 2 all-reduce kernels launched before the window: one note, not 127."""
    (note,) = [n for n in job["notes"] if "launched before it" in n]
    assert note.startswith("127 ranks (0, 1, 2, 3, 4, 5, 6, 7, … 119 more) each have 2 collective kernels (allreduce) ")
    assert len(" ".join(page_of(job, 0, 10)["notes"])) < 1000


def test_a_lazy_job_gives_the_same_pages(job: dict[str, Any], summaries: list[RankSummary]) -> None:
    """The route computes the per-collective tables of a page's rows only: the pages are the same as from the
    whole job, and the lazy job holds no table."""
    lazy, tables = job_distributed_lazy(summaries)
    assert all(r["collectives"] is None for r in lazy["ranks"])
    pages: list[tuple[int | None, int | None, str, str]] = [(0, 50, "rank", "asc"), (100, 50, "sync_us", "desc"),
                                                            (None, None, "rank", "asc")]
    for offset, limit, sort, order in pages:
        assert page_of(lazy, offset, limit, sort, order, tables) == page_of(job, offset, limit, sort, order)
    assert tables(STRAGGLER) == job["ranks"][STRAGGLER]["collectives"] != job["ranks"][0]["collectives"]
