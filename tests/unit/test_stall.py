"""What waiting for a straggler costs a rank: the Distributed view's ``stalled_us`` on a hand-checked 2-rank trace,
and the Overview's straggler findings that rank by it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tb_plugin.analysis.distributed import distributed
from tb_plugin.analysis.overview import overview
from tb_plugin.loader import load_trace
from tests.conftest import write_trace
from tests.unit.test_views_synthetic import PROPS, kernel, launch, op, step


def _rank(tmp_path: Path, rank: int, host: list[dict[str, Any]], comm_at: float) -> Any:
    """One 1000 µs step: aten::mm (0–100) launching a gemm (10–300); the all-reduce issued at ``comm_at`` (its
    NCCL kernel from ``comm_at`` + 20 to 900, the end both ranks share); aten::add 900–1000."""
    events = [step(1, 0, 1_000), op("aten::mm", 0, 100), launch(5, 5, corr=1), kernel("gemm", 10, 290, corr=1),
              op("record_param_comms", comm_at, 10) | {"args": {
                  "Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "Float",
                  "Group size": 2, "Process Group Name": "0"}},
              launch(comm_at + 2, 5, corr=2),
              kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", comm_at + 20, 880 - comm_at, corr=2, stream=9),
              op("aten::add", 900, 100), *host]
    info = {"backend": "nccl", "rank": rank, "world_size": 2}
    return load_trace(str(write_trace(tmp_path / f"rank{rank}.1.pt.trace.json", events, distributedInfo=info,
                                      deviceProperties=PROPS)))


def test_stall_is_the_wait_nobody_works_through(tmp_path: Path) -> None:
    """Rank 0 issues at 300 and then blocks in cudaStreamSynchronize (320–900); rank 1 works on the host until 300
    (aten::relu 100–300), sleeps until 800 and issues then: the all-reduce moves data 820–900 (rank 1's 80 µs).
    Rank 0 makes no progress from 310 (its last host work) to 820: stalled 510 µs, against a collective wait of
    500 µs (320–820) plus 580 µs of host sync. Rank 1 is stalled by its own sleep, 300–800 and 810–820."""
    r0 = _rank(tmp_path, 0, [launch(320, 580, corr=-1, name="cudaStreamSynchronize")], comm_at=300)
    r1 = _rank(tmp_path, 1, [op("aten::relu", 100, 200)], comm_at=800)
    job = distributed([("rank0", r0), ("rank1", r1)])
    rank0, rank1 = job["ranks"]
    assert (rank0["transfer_us"], rank0["sync_us"]) == pytest.approx((80, 500))
    assert rank0["stalled_us"] == pytest.approx(510) and rank0["exposed_transfer_us"] == pytest.approx(80)
    assert rank1["stalled_us"] == pytest.approx(500 + 10)
    assert job["straggler"]["rank"] == 1 and job["straggler"]["others_stalled_us"] == pytest.approx(510)
    o = overview(r0, job, "rank0")
    f = next(r for r in o["recommendations"] if r["kind"] == "straggler_wait")
    assert f["saving_us"] == pytest.approx(510)
    # the collective's wait (320–820) and the host's sync (320–900) are one stall: their union, 580 µs
    assert "waits 580 µs of 1.0 ms per step (58 %) for rank 1" in f["text"]
    assert "it stalls this rank 510 µs per step (51 %)" in f["text"]
    assert o["verdict"]["kind"] == "straggler_wait" and o["recommendations"][0]["kind"] == "straggler_wait"
