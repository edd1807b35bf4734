"""The Memory events table paged on the server (``events_page``, ``GET /memory/events?limit=…``): on the real traces,
every page put together is the whole answer sorted as the table sorted it in the browser (missing values last,
ties in allocation order), the filters keep what the table's search and "Min size" kept, and the route checks
its parameters."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.memory import (
    EVENT_SORTS,
    EventQuery,
    _name_ranks,
    events_page,
    live_at,
    memory_events,
    memory_pairs,
)
from tb_plugin.model.tables import TraceModel
from tests.conftest import API, parsed_trace, sample_trace_files, wait_until_settled

Row = dict[str, Any]


def natural(name: str) -> list[Any]:
    """The name column's key as the browser's ``localeCompare(numeric, base)`` ordered ASCII operator names."""
    return [int(p) if i % 2 else p for i, p in enumerate(re.split(r"([0-9]+)", name.lower()))]


VALUES: dict[str, Callable[[Row], Any]] = {
    "name": lambda r: natural(r["name"]),
    "size": lambda r: r["size_bytes"],
    "alloc": lambda r: r["alloc_us"],
    "free": lambda r: r["free_us"],
    "lifetime": lambda r: r["lifetime_us"],
    "in_range": lambda r: r["in_range"],
}


def table_sorted(rows: list[Row], sort: str, order: str) -> list[Row]:
    """What the browser's DataTable showed: the rows with a value sorted (Python's sort keeps ties in their order in
    either direction, as the table's index tie-break did), then the rows without one, in their order."""
    value = VALUES[sort]
    present = [r for r in rows if value(r) is not None]
    missing = [r for r in rows if value(r) is None]
    return sorted(present, key=value, reverse=order == "desc") + missing


def every_page(model: TraceModel, limit: int, query: dict[str, Any] | None = None, **where: Any
               ) -> tuple[list[Row], list[dict[str, Any]]]:
    """The rows of every page of ``query`` (``EventQuery``'s fields) on ``where`` (range, device, instant), put
    together, and the answers."""
    query = query or {}
    rows: list[Row] = []
    answers = []
    offset = 0
    while True:
        page = events_page(model, EventQuery(offset=offset, limit=limit, **query), **where)
        answers.append(page)
        rows += page["rows"]
        offset += limit
        if offset >= page["total"]:
            return rows, answers


@pytest.fixture(scope="module")
def transformer() -> TraceModel:
    """The bf16 transformer sample: 1,353 pairs on two devices, many of one size (ties)."""
    path = next(p for p in sample_trace_files() if "transformer_bf16/" in str(p))
    return parsed_trace(path)


@pytest.fixture(scope="module")
def h200(real_traces: Path) -> TraceModel:
    return parsed_trace(sorted((real_traces / "h200" / "resnet18_workers0").glob("*.gz"))[0])


@pytest.mark.parametrize("sort", EVENT_SORTS)
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_every_page_together_is_the_whole_answer_sorted_as_the_table_sorted_it(
        transformer: TraceModel, sort: str, order: str) -> None:
    full = memory_events(transformer)
    assert len(full) == 1353
    rows, answers = every_page(transformer, 97, query={"sort": sort, "order": order})
    assert rows == table_sorted(full, sort, order)
    assert [a["offset"] for a in answers] == list(range(0, 1353, 97)) and len(answers) == 14
    assert {(a["total"], a["unfiltered"], a["sort"], a["order"], a["limit"]) for a in answers} == {
        (1353, 1353, sort, order, 97)}
    assert [len(a["rows"]) for a in answers] == [97] * 13 + [1353 - 13 * 97]


def test_ties_keep_allocation_order_in_both_orders(transformer: TraceModel) -> None:
    gpu = memory_events(transformer, device="GPU0")
    sizes = [r["size_bytes"] for r in gpu]
    tied = {s for s in sizes if sizes.count(s) > 1}
    assert len(tied) > 10  # the test means something: many sizes repeat
    for order in ("asc", "desc"):
        rows, _ = every_page(transformer, 50, device="GPU0", query={"sort": "size", "order": order})
        for size in tied:
            assert [r["alloc_us"] for r in rows if r["size_bytes"] == size] == \
                [r["alloc_us"] for r in gpu if r["size_bytes"] == size]
        assert len({(r["addr"], r["alloc_us"], r["free_us"]) for r in rows}) == len(gpu)  # no row twice


def test_missing_times_sort_last_either_way(h200: TraceModel) -> None:
    full = memory_events(h200)
    never_freed = sum(r["free_us"] is None for r in full)
    before = sum(r["alloc_us"] is None for r in full)
    assert never_freed > 0 and before > 0
    for order in ("asc", "desc"):
        rows, _ = every_page(h200, 1000, query={"sort": "free", "order": order})
        assert all(r["free_us"] is None for r in rows[-never_freed:])
        assert all(r["free_us"] is not None for r in rows[:-never_freed])
        frees = [r["free_us"] for r in rows[:-never_freed]]
        assert frees == sorted(frees, reverse=order == "desc")
        rows, _ = every_page(h200, 1000, query={"sort": "alloc", "order": order})
        assert all(r["alloc_us"] is None for r in rows[-before:])


def test_the_default_sorts_are_the_tables(transformer: TraceModel) -> None:
    full = memory_events(transformer, device="GPU0")
    first = events_page(transformer, EventQuery(limit=20), device="GPU0")
    assert (first["sort"], first["order"]) == ("alloc", "asc")
    assert first["rows"] == table_sorted(full, "alloc", "asc")[:20]
    assert first["devices"] == ["CPU", "GPU0"] and first["unfiltered"] == len(full)
    assert first["unfiltered_bytes"] == sum(r["size_bytes"] for r in full)
    assert "allocated_bytes" not in first


def test_the_search_and_min_size_keep_what_the_table_kept(transformer: TraceModel) -> None:
    gpu = memory_events(transformer, device="GPU0")
    cases: list[tuple[str, float, Callable[[Row], bool]]] = [
        ("RESIZE_", 0, lambda r: "resize_" in r["name"].lower()),
        ("  Aten::Empty  ", 0, lambda r: "aten::empty" in r["name"].lower()),
        ("", 1024 * 1024, lambda r: r["size_bytes"] >= 1024 * 1024),
        ("mm", 4096.5, lambda r: "mm" in r["name"].lower() and r["size_bytes"] >= 4096.5),
        ("no such operator", 0, lambda r: False),
    ]
    for q, min_bytes, keep in cases:
        expected = [r for r in gpu if keep(r)]
        rows, answers = every_page(transformer, 40, device="GPU0", query={"q": q, "min_bytes": min_bytes})
        assert rows == expected, q
        assert answers[0]["total"] == len(expected) and answers[0]["unfiltered"] == len(gpu)
    assert 0 < len([r for r in gpu if "resize_" in r["name"].lower()]) < len(gpu)
    # quoted: the whole name only, not the longer names that hold it ("aten::mm" is not "aten::mm (aten::empty)")
    names = sorted({r["name"] for r in gpu})
    name = next(n for n in names if any(n != m and n.lower() in m.lower() for m in names))
    quoted, _ = every_page(transformer, 500, device="GPU0", query={"q": f'"{name.upper()}"'})
    assert quoted == [r for r in gpu if r["name"].lower() == name.lower()] and quoted
    assert len(quoted) < len([r for r in gpu if name.lower() in r["name"].lower()])


def test_a_range_and_the_in_range_column(transformer: TraceModel) -> None:
    pairs = memory_pairs(transformer)
    lo, hi = (float(np.quantile(pairs.alloc[np.isfinite(pairs.alloc)], q)) for q in (0.3, 0.6))
    full = memory_events(transformer, lo, hi, "GPU0")
    states = {r["in_range"] for r in full}
    assert states == {"allocated", "live"}
    for order in ("asc", "desc"):
        rows, answers = every_page(transformer, 64, start=lo, end=hi, device="GPU0",
                                   query={"sort": "in_range", "order": order})
        assert rows == table_sorted(full, "in_range", order)
        assert rows[0]["in_range"] == ("allocated" if order == "asc" else "live")
        assert answers[0]["total"] == len(full)


def test_live_at_pages_are_the_live_answer(transformer: TraceModel) -> None:
    pairs = memory_pairs(transformer)
    at = float(np.quantile(pairs.alloc[np.isfinite(pairs.alloc)], 0.6))
    live = live_at(transformer, at, "GPU0")
    assert len(live["rows"]) > 30
    rows, answers = every_page(transformer, 30, at=at, device="GPU0")
    assert rows == live["rows"]  # largest first, ties in allocation order
    assert (answers[0]["sort"], answers[0]["order"]) == ("size", "desc")
    assert answers[0]["allocated_bytes"] == live["allocated_bytes"] is not None
    assert answers[0]["unfiltered_bytes"] == sum(r["size_bytes"] for r in live["rows"])
    rows, _ = every_page(transformer, 30, at=at, device="GPU0", query={"sort": "lifetime", "order": "asc"})
    assert rows == table_sorted(live["rows"], "lifetime", "asc")


def test_an_offset_past_the_end_is_an_empty_page(transformer: TraceModel) -> None:
    page = events_page(transformer, EventQuery(offset=5000, limit=10), device="GPU0")
    assert page["rows"] == [] and page["offset"] == 5000 and page["total"] == len(memory_events(transformer,
                                                                                                  device="GPU0"))
    assert events_page(transformer, EventQuery(limit=10), device="TPU7")["total"] == 0


def test_names_sort_case_insensitively_with_numbers_by_value() -> None:
    names = ["b", "Layer10", "layer2", "A", "a", "layer2"]
    ranks = _name_ranks(names)
    assert [names[i] for i in np.argsort(ranks, kind="stable")] == ["A", "a", "b", "layer2", "layer2", "Layer10"]
    assert ranks[3] == ranks[4] and ranks[2] == ranks[5]  # equal ignoring case: a tie, left to allocation order


# ---- the route ---------------------------------------------------------------------------------------------------

def test_the_route_pages_validates_and_keeps_the_unpaged_answer(tensorboard_app: Any, tmp_path: Path) -> None:
    import shutil

    path = next(p for p in sample_trace_files() if "transformer_bf16/" in str(p))
    (tmp_path / "ld" / "tf").mkdir(parents=True)
    shutil.copy(path, tmp_path / "ld" / "tf" / path.name)
    client = tensorboard_app(tmp_path / "ld")
    wait_until_settled(client, expect_spans=1)
    worker = path.name.split(".")[0]
    q = f"run=tf&worker={worker}&span=1"
    model = parsed_trace(path)

    whole = client.get(f"{API}/memory/events?{q}")
    assert json.loads(whole.data) == {"rows": memory_events(model)}  # no paging parameter: every row, as before
    page = client.get(f"{API}/memory/events?{q}&device=GPU0&limit=25&offset=50&sort=size&order=desc&q=MM"
                      "&min_bytes=512").get_json()
    gpu = [r for r in memory_events(model, device="GPU0") if "mm" in r["name"].lower() and r["size_bytes"] >= 512]
    assert page["rows"] == table_sorted(gpu, "size", "desc")[50:75] and page["total"] == len(gpu) > 75
    assert len(client.get(f"{API}/memory/events?{q}&q=mm").get_json()["rows"]) == 100  # the default page size

    for bad, says in [("limit=0", "'limit' must be an integer from 1 to 10000"), ("limit=10001", "from 1 to 10000"),
                      ("limit=2.5", "'limit' must be an integer"), ("offset=-1", "'offset' must be an integer"),
                      ("offset=abc", "'offset'"), ("sort=addr", "'sort' must be one of name, size"),
                      ("order=up", "'order' must be one of asc, desc"), ("min_bytes=-1", "at least 0"),
                      ("min_bytes=nan", "finite"), ("min_bytes=lots", "must be a number"),
                      ("q=" + "x" * 5000, "too long")]:
        r = client.get(f"{API}/memory/events?{q}&{bad}")
        assert r.status_code == 400 and says in r.get_json()["error"], (bad, r.data[:200])
