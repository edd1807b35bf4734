"""The first views, computed by the loader processes and stored beside the parse (api/warm.py).

Through the real TensorBoard app: every sample and test trace loads with its stored views, and every route answers
byte for byte what a server that computes them itself answers (a second server on the same parses with the stored
views taken out of each entry: an older cache); the pages' first requests are answered from the stored set, not
computed; a damaged part is computed again; a rank of a multi-rank run stores its rank summary, which the
job-level answers read."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tb_plugin.analysis.memory import memory_owners, memory_records
from tb_plugin.analysis.operators import call_stacks, operator_nodes
from tb_plugin.analysis.rank_summary import _summary
from tb_plugin.api import answers, warm
from tb_plugin.api.encoding import encode
from tb_plugin.model.derived import _key
from tb_plugin.model.optree import host_tree
from tests.conftest import (
    API,
    REPO,
    SAMPLES,
    SPAN_ROUTES,
    distinct_trace_files,
    real_trace_files,
    sample_trace_files,
    wait_until_settled,
)

# What the pages ask first, as the frontend asks it (api/warm.py stores these).
FIRST = ("overview", "operators?group_by=name", "operators?group_by=name_stack", "kernels?group_by=name", "sources",
         "summary", "idle", "launch_stats", "queue_length", "memory_bandwidth", "kernel_sequences", "cupti_counters",
         "roofline", "modules", "modules/timeline")
MULTI_RANK = ("ddp_resnet", "fsdp_comm", "pp_two_groups", "gloo_8proc_cpu")


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def single_runs(root: Path, files: list[Path]) -> Path:
    """A logdir with each trace in a run of its own (so every Overview is a single worker's: the one stored)."""
    for i, f in enumerate(files):
        _link(f, root / f"{i:03d}_{f.parent.name}" / f.name)
    return root


def _link_or_copy(src: str, dst: str) -> None:
    """A published entry's file linked (nothing ever writes into one: ``jobs.entries``), its lock file copied (each
    cache locks its own)."""
    if os.path.basename(src).startswith("."):
        shutil.copy2(src, dst)
    else:
        _link(Path(src), Path(dst))


def without_stored_views(cache: Path, copy: Path) -> Path:
    """A copy of a parse cache as an older version left it: no stored views in any entry (its files linked, not
    copied: the 230 MB of the test traces' entries took a second to copy)."""
    shutil.copytree(cache, copy, copy_function=_link_or_copy)
    for f in copy.glob("*/warm.*"):
        f.unlink()
    for part in copy.glob("*/part-*"):  # the parts added after ready (api/warm.py Later)
        shutil.rmtree(part)
    return copy


def spans(body: dict[str, Any]) -> list[str]:
    return [f"run={r['name']}&worker={w['name']}&span={s['span']}" for r in body["runs"] for w in r["workers"]
            for s in w["spans"]]


# Each route once: FIRST and SPAN_ROUTES share seven. The grouping by input shape reads the host tree and the
# operator nodes that the tables part stores beside its answers (api/warm.py MEMOS), as the server computed them.
ROUTES = tuple(dict.fromkeys((*FIRST, *SPAN_ROUTES, "operators?group_by=name_shape")))


def fetch(client: Any, body: dict[str, Any], zipped_too: bool) -> dict[str, tuple[int, bytes]]:
    """Every per-span route's answer (and a few Trace view windows, the job-level views) of every span;
    ``zipped_too``: each answer's gzip form is asked for too and must hold the same bytes (the stored answers keep
    their own gzip; a computed answer's is made per request, as test_answers checks)."""
    out: dict[str, tuple[int, bytes]] = {}
    for q in spans(body):
        for route in ROUTES:
            url = f"{API}/{route}{'&' if '?' in route else '?'}{q}"
            r = client.get(url)
            out[url] = (r.status_code, r.data)
            if zipped_too:
                zipped = client.get(url, headers={"Accept-Encoding": "gzip"})
                gz = zipped.headers.get("Content-Encoding") == "gzip"
                assert (gzip.decompress(zipped.data) if gz else zipped.data) == r.data, url
        for width in (400, 2000):
            url = f"{API}/trace/window?{q}&width_px={width}"
            r = client.get(url)
            out[url] = (r.status_code, r.data)
    for run in body["runs"]:
        for route in (f"distributed?run={run['name']}&span=1", f"views?run={run['name']}"):
            r = client.get(f"{API}/{route}")
            out[route] = (r.status_code, r.data)
    return out


def _plugin(client: Any) -> Any:
    return next(p for p in client.application._plugins if getattr(p, "plugin_name", "") == "pytorch_profiler")


def _models(client: Any, body: dict[str, Any]) -> list[Any]:
    ws = _plugin(client).workspace
    return [ws.trace(r["name"], w["name"], s["span"]).model for r in body["runs"] for w in r["workers"]
            for s in w["spans"]]


def assert_same_answers(tensorboard_app: Any, logdir: Path, cache: Path, tmp_path: Path, expect: int) -> None:
    warm_client = tensorboard_app(logdir, profiler_cache_dir=str(cache))
    body = wait_until_settled(warm_client, timeout=900, expect_spans=expect)
    assert all(s["state"] == "ready" for r in body["runs"] for w in r["workers"] for s in w["spans"]), body
    assert all(warm._stored(m) for m in _models(warm_client, body)), "every entry holds its stored views"
    got = fetch(warm_client, body, zipped_too=True)
    cold_client = tensorboard_app(logdir, profiler_cache_dir=str(without_stored_views(cache, tmp_path / "older")))
    cold = wait_until_settled(cold_client, timeout=900, expect_spans=expect)
    assert not any(warm._stored(m) for m in _models(cold_client, cold)), "the older entries hold no stored views"
    want = fetch(cold_client, cold, zipped_too=False)
    assert got.keys() == want.keys()
    differ = [url for url in want if got[url] != want[url]]
    assert not differ, f"{len(differ)} answers differ, e.g. {differ[:5]}"
    assert sum(status == 200 for status, _ in want.values()) > len(want) // 2


@pytest.mark.slow  # 40-110 s on 2 cores: make test runs it, make test-fast leaves it out
@pytest.mark.parametrize("which", ["samples", "tests/data"])
def test_stored_views_answer_what_the_server_computes(tensorboard_app: Any, tmp_path: Path, which: str) -> None:
    files = sample_trace_files() if which == "samples" else distinct_trace_files()
    assert len(files) > 10
    logdir = single_runs(tmp_path / "logdir", files)
    assert_same_answers(tensorboard_app, logdir, tmp_path / "cache", tmp_path, len(files))


def test_multi_rank_runs_store_their_rank_summaries(tensorboard_app: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranks of a job store their summaries (what every rank's Overview and the Distributed view read); the
    job-level answers from them equal the server's own. Their parts are computed each in a forked process, as a
    big trace's are (the samples' are small enough to be computed in the loader process: ``warm.INLINE_EVENTS``)."""
    monkeypatch.setattr(warm, "INLINE_EVENTS", 0)  # read when the server makes its WarmViews
    logdir = tmp_path / "logdir"
    files = [f for run in MULTI_RANK for f in sorted((SAMPLES / run).glob("*.pt.trace.json*"))]
    for f in files:
        _link(f, logdir / f.parent.name / f.name)
    client = tensorboard_app(logdir, profiler_cache_dir=str(tmp_path / "cache"))
    body = wait_until_settled(client, timeout=600, expect_spans=len(files))
    workers = [w["name"] for run in body["runs"] for w in run["workers"]]
    for worker, model in zip(workers, _models(client, body)):
        assert _key(_summary, (worker,)) in model.memo, worker
    assert_same_answers(tensorboard_app, logdir, tmp_path / "cache", tmp_path, len(files))


def test_the_pages_first_requests_read_the_stored_answers(tensorboard_app: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    files = [next(f for f in real_trace_files() if "transformer_bf16" in str(f))]
    client = tensorboard_app(single_runs(tmp_path / "logdir", files))
    body = wait_until_settled(client, expect_spans=1)
    read: list[str] = []
    real = answers.stored_answer
    monkeypatch.setattr(answers, "stored_answer", lambda model, name: read.append(name) or real(model, name))
    computed: list[str] = []
    monkeypatch.setattr(answers, "encode", lambda payload: computed.append("x") or warm.encode(payload))
    (q,) = spans(body)
    for route in FIRST:
        assert client.get(f"{API}/{route}{'&' if '?' in route else '?'}{q}").status_code == 200, route
    assert len(read) == len(FIRST) and not computed
    (model,) = _models(client, body)  # a small trace's parts store no more than its answers need (below)
    assert not any(_key(fn, ()) in model.memo for fn in SERVER_MEMOS)
    assert client.get(f"{API}/operators?{q}&group_by=name_shape").status_code == 200
    assert len(read) == len(FIRST) and computed == ["x"]  # another grouping: computed as before


SERVER_MEMOS = (host_tree, operator_nodes, call_stacks, memory_records, memory_owners)


def test_a_big_traces_parts_store_what_the_servers_other_views_read(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """From ``warm.SERVER_MEMOS_EVENTS`` on, the tables part stores the host tree, operator nodes, call stacks and
    the Operator and Kernel tables by name, the Overview part the memory records and the steps' breakdown, the Module
    page's part the memory records' owners; the server's model gets them as read-only views of the entry's files and its other views
    (another grouping, the memory curve, statistics and events, modules, the diff of two runs and its drill-down)
    answer what a model computing them itself does, the diff computing none of what it reads."""
    from tb_plugin.analysis import diff, kernels, memory, modules, operators
    from tb_plugin.analysis.steps import breakdown
    from tb_plugin.loader import load_trace
    from tb_plugin.model.tables import load, save

    monkeypatch.setattr(warm, "SERVER_MEMOS_EVENTS", 0)  # this small trace as a big one
    trace = next(f for f in real_trace_files() if "transformer_bf16" in str(f))
    entry = tmp_path / "entry"
    entry.mkdir()
    save(load_trace(str(trace)), entry)
    assert warm.WarmViews().save(str(entry), None, 1, parse_seconds=None) is None  # every part now, in this process
    model = load(str(entry))
    warm.WarmViews().attach(model, entry)  # type: ignore[arg-type]  # a folder, as a loader gives it
    stored = {fn: model.memo[_key(fn, ())] for fn in SERVER_MEMOS}
    arrays = [stored[host_tree].rows, stored[operator_nodes].node, stored[call_stacks].codes,
              stored[memory_records].ts, stored[memory_owners]]
    assert not any(a.flags.writeable for a in arrays), "views of the entry's files, not computed here"
    fresh = load(str(entry))
    tables = {(fn, ("name",)): model.memo[_key(fn, ("name",))] for fn in (operators.operator_table, kernels.kernel_table)}
    stored_breakdown = model.memo[_key(breakdown, ())]
    assert not stored_breakdown.per_step["Kernel"].flags.writeable, "the breakdown read from the entry's files"
    other = load(str(entry))  # a second run to compare with, as the diff view is asked (its own stored results)
    warm.WarmViews().attach(other, entry)  # type: ignore[arg-type]
    for view in (lambda m: operators.operator_view(m, "name_shape", ""), memory.memory_curve, modules.module_view,
                 lambda m: memory.memory_statistics(m), lambda m: memory.memory_events(m, None, None, None),
                 lambda m: diff.diff_summary(m, other if m is model else fresh),
                 lambda m: diff.diff_node(m, other if m is model else fresh, "0")):
        assert view(model) == view(fresh)
    assert all(model.memo[_key(fn, ())] is v for fn, v in stored.items()), "read, not computed again"
    assert all(model.memo[_key(fn, args)] is v for (fn, args), v in tables.items()), "read, not computed again"
    assert not [k for k in model.memo if k[1] in ("operator_table", "kernel_table") and k[2] == ()], "one key by name"
    assert model.memo[_key(breakdown, ())] is stored_breakdown, "read, not computed again"


# Run in a process of its own (forking is only tried with one thread running, ``warm._can_fork``; a pytest-xdist
# worker runs others): the parts of a saved entry, one process at a time, building a host tree failing once the
# Overview's process ended; prints the parts written and whether the loader's host tree is a view of the files.
AFTER_THE_OVERVIEW = """
import json, sys
from pathlib import Path
import pytest
from tb_plugin.api import warm
from tb_plugin.model import optree
from tb_plugin.model.derived import _key
from tb_plugin.model.tables import load

warm.SERVER_MEMOS_EVENTS = 0  # this small trace as a big one
entry = sys.argv[1]
model = load(entry)

def landed(part, ok):
    if part == "overview":  # the next part forks after this (one process at a time)
        optree.build_host_tree = lambda m: pytest.fail("the host tree built again")

ctx = warm.context(None, warm.NO_OVERRIDE)
done = warm.compute_parts(model, ctx, Path(entry), 1, ("overview", "tables", "gpu"), landed, inline_events=0)
warm._write_marker(Path(entry), done, ctx)
print(json.dumps({"done": done, "views": not model.memo[_key(optree.host_tree, ())].rows.flags.writeable,
                  "left": sorted(p.name for p in Path(entry).glob("*handoff*"))}))
"""


def test_the_parts_after_the_overview_read_its_host_tree(tmp_path: Path) -> None:
    """A big trace's parts run in processes one after the other: the Operator tables and the GPU insights, forked
    after the Overview's process ended, are given the host tree and operator nodes it handed off rather than
    building them again (here building one fails once the Overview landed: they are still written), the files
    handed off are gone, and the answers are those of a server computing them."""
    from tb_plugin.loader import load_trace
    from tb_plugin.model.tables import load, save

    trace = next(f for f in real_trace_files() if "transformer_bf16" in str(f))
    entry = tmp_path / "entry"
    entry.mkdir()
    save(load_trace(str(trace)), entry)
    run = subprocess.run([sys.executable, "-c", AFTER_THE_OVERVIEW, str(entry)], cwd=REPO, capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"done": ["overview", "tables", "gpu"], "views": True,
                                                               "left": []}
    served = load(str(entry))
    warm.WarmViews().attach(served, entry)  # type: ignore[arg-type]
    fresh = load(str(entry))
    for name, compute in warm.answers(warm.context(None, warm.NO_OVERRIDE))["tables"]:
        assert warm.stored_answer(served, name).body == encode(compute(fresh)).body, name


def test_a_handoff_cut_short_is_not_read_and_is_removed(tmp_path: Path) -> None:
    """A part killed while writing its handoff leaves a description without its arrays and a temporary: the loader
    gives its model nothing from them, and removes them (hidden files would otherwise go into the entry)."""
    from tb_plugin.model.tables import TraceModel

    (tmp_path / ".handoff.overview.json").write_text("{}")
    (tmp_path / "..handoff.overview.bin.tmp").write_bytes(b"\0" * 64)
    (tmp_path / "warm.overview.json").write_text("{}")
    model = TraceModel(tables={}, strings=[], meta={})
    warm._take_handoff(model, tmp_path, "overview", True)
    assert not list(model.memo.keys())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["warm.overview.json"]


def test_a_damaged_part_is_computed_again(tensorboard_app: Any, tmp_path: Path) -> None:
    files = [next(f for f in real_trace_files() if "transformer_bf16" in str(f))]
    logdir = single_runs(tmp_path / "logdir", files)
    cache = tmp_path / "cache"
    body = wait_until_settled(tensorboard_app(logdir, profiler_cache_dir=str(cache)), expect_spans=1)
    (entry,) = [p.parent for p in cache.glob("*/warm.json")]
    tables = entry / "warm.tables.bin"
    tables.write_bytes(tables.read_bytes()[:100])
    client = tensorboard_app(logdir, profiler_cache_dir=str(cache))
    body = wait_until_settled(client, expect_spans=1)
    (model,) = _models(client, body)
    ctx = warm.context(_plugin(client).workspace.trace(*spans_key(body)).file, warm.NO_OVERRIDE)
    assert all(warm.has_answer(model, k) for k, _ in warm.answers(ctx)["overview"])
    assert not any(warm.has_answer(model, k) for k, _ in warm.answers(ctx)["tables"])
    (q,) = spans(body)
    r = client.get(f"{API}/operators?{q}&group_by=name")
    assert r.status_code == 200 and r.get_json()["rows"]


def spans_key(body: dict[str, Any]) -> tuple[str, str, str]:
    run = body["runs"][0]
    return run["name"], run["workers"][0]["name"], run["workers"][0]["spans"][0]["span"]


def _started(events: int, cores: int, queued: tuple[str, ...]) -> list[str]:
    """The parts that run at once when ``queued`` waits (``warm._Forks``'s rule, the loader's memory bound)."""
    from tb_plugin.jobs import budget

    forks = warm._Forks(SimpleNamespace(n_events=events), warm.context(None, warm.NO_OVERRIDE), cores,
                        budget.views_memory(events))
    for part in queued:
        if not forks.fits(part):
            break
        forks.running[len(forks.running)] = (part, Path("."))
    return [part for part, _ in forks.running.values()]


def test_the_parts_start_in_order_as_their_memory_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    from tb_plugin.jobs import budget

    # what a user opens first starts first; the Module page's part last
    assert warm.PARTS == ("overview", "tables", "gpu", "timeline", "modules")
    monkeypatch.setattr(budget, "available_memory", lambda: 64 << 30)
    every = ("timeline", "overview", "tables", "gpu", "modules")  # the index before ready, the others after it
    assert _started(430_000, 15, every) == list(every)  # the 164 MB trace: every part at once
    # the 2 GB trace: the index, then the Overview (300 bytes an event together; each part takes 80-210)
    assert _started(5_300_000, 15, every) == ["timeline"]
    assert _started(5_300_000, 15, ("overview", "tables", "gpu", "modules")) == ["overview"]
    # after it the tables beside the GPU insights; the Module page's part once the GPU insights leave it room
    assert _started(5_300_000, 15, ("tables", "gpu", "modules")) == ["tables", "gpu"]
    assert _started(5_300_000, 15, ("modules",)) == ["modules"]
    assert _started(1_000_000, 15, ("tables", "gpu")) == ["tables", "gpu"]  # two that fit together
    assert _started(430_000, 2, every) == ["timeline", "overview"]  # never more than the loader's share of the cores
    monkeypatch.setattr(budget, "available_memory", lambda: 150 << 20)
    assert _started(430_000, 15, every) == ["timeline"]  # little memory left: one at a time


def _alone(events: int, cores: int, queued: tuple[str, ...], then: str | None = None) -> dict[str, bool]:
    """Whether each of ``queued`` runs alone (``warm._Forks.alone``) as the loader starts them in order, each the
    next when the ones running end (as :func:`_started` does, the memory bound the loader's)."""
    from tb_plugin.jobs import budget

    forks = warm._Forks(SimpleNamespace(n_events=events), warm.context(None, warm.NO_OVERRIDE), cores,
                        budget.views_memory(events))
    for part in queued:
        forks.add(part, lambda: Path("."))
    out: dict[str, bool] = {}
    while forks.queue:
        if not forks.fits(forks.queue[0][0]):
            forks.running.clear()  # the running ones end
            continue
        part, _ = forks.queue.pop(0)
        out[part] = forks.alone(part, then)
        forks.running[len(forks.running)] = (part, Path("."))
    return out


def test_a_part_runs_alone_where_nothing_fits_beside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from tb_plugin.jobs import budget

    monkeypatch.setattr(budget, "available_memory", lambda: 64 << 30)
    # the 2 GB trace: its index before the others are queued (then: the Overview), the Overview; not the tables
    # and the GPU insights, side by side
    assert _alone(5_300_000, 15, ("timeline",), then="overview") == {"timeline": True}
    assert _alone(5_300_000, 15, ("overview", "tables", "gpu")) == {"overview": True, "tables": False, "gpu": False}
    # the 164 MB trace: all four at once, none alone; one process: each alone
    assert not any(_alone(430_000, 15, ("timeline", "overview", "tables", "gpu")).values())
    assert all(_alone(430_000, 1, ("timeline", "overview", "tables", "gpu")).values())
    assert _alone(430_000, 15, ("gpu",)) == {"gpu": True}  # the last one, with nothing after it
    # so the 2 GB trace's index and Overview do not trim, its tables and GPU insights do; every 10 GB part does
    after = ("overview", "tables", "gpu")
    assert [warm.trim_period([p], 5_300_000, a) for p, a in _alone(5_300_000, 15, after).items()] == [None, 0.05, 0.05]
    assert warm.trim_period(["timeline"], 5_300_000, _alone(5_300_000, 15, ("timeline",), "overview")["timeline"]) is None
    assert all(warm.trim_period([p], 33_000_000, a) == 0.05 for p, a in _alone(33_000_000, 15, warm.PARTS).items())


class _Forked(Exception):
    pass


def test_a_small_traces_parts_are_computed_in_the_loader_process(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to ``warm.INLINE_EVENTS`` events the parts are computed one after the other in the loader process (a
    process per part cost twice the CPU there); beyond it, each in a forked process."""
    from tb_plugin.model.tables import save
    from tests.conftest import parsed_trace

    def fork(*args: Any) -> int:
        raise _Forked

    monkeypatch.setattr(warm, "_can_fork", lambda: True)  # as in a loader process (no threads)
    monkeypatch.setattr(warm, "_fork_parts", fork)
    model = parsed_trace(next(f for f in real_trace_files() if "transformer_bf16" in str(f)))
    assert 0 < model.n_events <= warm.INLINE_EVENTS
    for name in ("inline", "forked"):
        save(model, tmp_path / name)
    assert warm.WarmViews().save(str(tmp_path / "inline"), None, 2) is None
    assert (tmp_path / "inline" / "warm.json").is_file()
    assert all((tmp_path / "inline" / f"warm.{part}.bin").is_file() for part in warm.PARTS)
    with pytest.raises(_Forked):
        warm.WarmViews(inline_events=model.n_events - 1).save(str(tmp_path / "forked"), None, 2)
    ctx = warm.context(None, warm.NO_OVERRIDE)
    assert warm.compute_parts(model, ctx, tmp_path / "inline", 2) == list(warm.PARTS)
    with pytest.raises(_Forked):
        warm.compute_parts(model, ctx, tmp_path / "forked", 2, inline_events=model.n_events - 1)
