"""``benchmarks/make_ranks.py``: its synthetic ranks are valid Kineto traces that the loader reads as distinct ranks
of one job, with the planted straggler found by the Distributed analysis (real DDP traces, samples/ddp_resnet)."""

from __future__ import annotations

import gzip
from pathlib import Path

from benchmarks import make_ranks
from tb_plugin.analysis.distributed import distributed
from tb_plugin.loader import load_trace
from tests.conftest import SAMPLES

DDP = SAMPLES / "ddp_resnet"


def test_five_ranks_with_a_planted_straggler(tmp_path: Path) -> None:
    out = tmp_path / "job5"
    assert make_ranks.main([str(DDP), "--ranks", "5", "--straggler", "2", "--jobs", "2", "--out", str(out)]) == 0
    files = sorted(out.glob("*.pt.trace.json.gz"))
    assert [f.name.split(".")[0] for f in files] == ["rank0", "rank1", "rank2", "rank3", "rank4"]
    # rank 2 copies the source the others wait for (DDP rank 1 sleeps 5 ms per step), the others copy rank 0
    stamps = {f.name.split(".")[0]: f.name.split(".")[1] for f in files}
    rank1_stamp = next(DDP.glob("rank1.*")).name.split(".")[1]
    assert [k for k, v in stamps.items() if v == rank1_stamp] == ["rank2"]
    job = distributed([(f.name.split(".")[0], load_trace(str(f))) for f in files])
    assert job["world_size"] == 5 and [r["rank"] for r in job["ranks"]] == [0, 1, 2, 3, 4]
    assert not [n for n in job["notes"] if "same rank" in n or "different numbers" in n]
    assert job["straggler"] and job["straggler"]["rank"] == 2 and job["straggler"]["worker"] == "rank2"
    group = next(g for g in job["groups"] if g["group"] == "0")  # the default process group, on every rank
    assert (group["ranks"], group["matched"], group["most_waited_for"]["rank"]) == (5, 10, 2)
    # the copies of one source are the same trace: equal rows; the straggler waits least
    rows = [r for r in job["ranks"] if r["rank"] != 2]
    assert len({(r["communication_us"], r["sync_us"]) for r in rows}) == 1
    assert job["ranks"][2]["sync_us"] < rows[0]["sync_us"] - 1000


def test_a_copy_is_its_source_with_distributed_info_rewritten(tmp_path: Path) -> None:
    out = tmp_path / "job3"
    assert make_ranks.main([str(DDP), "--ranks", "3", "--straggler", "-1", "--jobs", "1", "--out", str(out)]) == 0
    copy = gzip.decompress(next(out.glob("rank2.*")).read_bytes())
    source = gzip.decompress(next(DDP.glob("rank0.*")).read_bytes())
    old = (b'"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2, "pg_count": 1, "pg_config": '
           b'[{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2, "ranks": [0, 1]}]'
           b', "nccl_version": "2.28.9"}')
    new = (b'"distributedInfo": {"backend": "nccl", "rank": 2, "world_size": 3, "pg_count": 1, "pg_config": '
           b'[{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 3, '
           b'"ranks": [0, 1, 2]}], "nccl_version": "2.28.9"}')
    assert source.count(old) == 1 and copy == source.replace(old, new)
