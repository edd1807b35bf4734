"""tb_plugin.record_memory_history: the torch calls it makes, the snapshot its out-of-memory observer writes into
the logdir (which the catalog then lists and the reader reads), and nothing imported before it is called.

torch here is a stand-in module with the functions the helper calls (CPU torch cannot record CUDA history); its
``_snapshot`` answers a synthetic snapshot in torch's format."""

from __future__ import annotations

import math
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import tb_plugin
from tb_plugin.catalog.catalog import Catalog, Root
from tb_plugin.catalog.storage import Storage
from tests.conftest import REPO
from tests.unit.test_snapshot import fragmenting


class FakeTorch:
    """The parts of torch the helper touches, recording how it was called."""

    def __init__(self, cuda: bool = True, legacy: bool = False) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.observers: list[Any] = []
        self.snapshot = fragmenting().dump()
        module = types.ModuleType("torch")
        module.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
            is_available=lambda: cuda, get_device_properties=lambda d: types.SimpleNamespace(total_memory=80 << 30),
            memory=types.SimpleNamespace(_record_memory_history=self._record, _snapshot=lambda: self.snapshot))
        module._C = types.SimpleNamespace(_cuda_attach_out_of_memory_observer=self.observers.append)  # type: ignore[attr-defined]
        self.module = module
        self.legacy = legacy

    def _record(self, *args: Any, **kwargs: Any) -> None:
        if self.legacy and kwargs.get("enabled") == "all":
            raise TypeError("_record_memory_history() got an unexpected keyword argument 'context'")
        self.calls.append((args, kwargs))


@pytest.fixture
def torch(monkeypatch: pytest.MonkeyPatch) -> FakeTorch:
    fake = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", fake.module)
    return fake


def test_an_out_of_memory_leaves_a_snapshot_the_logdir_lists(torch: FakeTorch, tmp_path: Path) -> None:
    run = tmp_path / "logdir" / "my_run"
    memory = tb_plugin.record_memory_history(str(run), max_entries=5000)
    assert torch.calls == [((), {"enabled": "all", "context": "all", "stacks": "all", "max_entries": 5000})]
    (observer,) = torch.observers
    # what the allocator calls before raising OutOfMemoryError: the segment it wanted, the process's limit
    # (set_per_process_memory_fraction: 100 MiB of the 80 GiB device), what cudaMemGetInfo said was free
    observer(0, 12 << 20, 100 << 20, 70 << 30)
    (written,) = memory.oom_dumps
    assert Path(written).parent == run and Path(written).name.startswith("memory_snapshot_oom_")
    assert written.endswith(".pickle") and not list(run.glob("*.partial"))
    catalog = Catalog([Root(None, Storage(str(tmp_path / "logdir")))])
    catalog.scan(now=math.inf)
    assert [(s.folder, s.filename) for s in catalog.snapshots] == [("my_run", Path(written).name)]
    summary = tb_plugin.open_snapshot(written).summary()
    oom = summary["oom"]
    assert oom is not None and oom["requested_bytes"] == 12 << 20 and oom["reason"] == "fragmentation"
    assert oom["limit_bytes"] == 100 << 20
    assert "the process may use 100.0 MiB (set_per_process_memory_fraction), 0 B more than it held" in \
        summary["findings"][0]["headline"]
    for _ in range(5):
        observer(0, 12 << 20, 80 << 30, 1 << 20)
    assert len(memory.oom_dumps) == 3  # max_oom_dumps: a loop that catches OOMs does not fill the disk
    now = memory.dump()
    assert now is not None and tb_plugin.open_snapshot(now).summary()["oom"] is not None
    memory.stop()
    assert torch.calls[-1] == ((), {"enabled": None})
    observer(0, 1, 1, 1)
    assert len(memory.oom_dumps) == 3  # disarmed


def test_compressed_snapshots_and_torch_2_0s_signature(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeTorch(legacy=True)
    monkeypatch.setitem(sys.modules, "torch", fake.module)
    with tb_plugin.record_memory_history(str(tmp_path), compress=True, stacks="python") as memory:
        path = memory.dump()
    assert fake.calls == [((True,), {"trace_alloc_max_entries": 100_000, "trace_alloc_record_context": True,
                                     "record_context_cpp": False}), ((False,), {})]
    assert path is not None and path.endswith(".pickle.gz")
    assert Path(path).read_bytes()[:2] == b"\x1f\x8b"
    assert tb_plugin.open_snapshot(path).summary()["reserved_bytes"] == 100 << 20


def test_without_cuda_it_warns_and_records_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeTorch(cuda=False)
    monkeypatch.setitem(sys.modules, "torch", fake.module)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        memory = tb_plugin.record_memory_history(str(tmp_path))
    assert not memory.active and memory.dump() is None and fake.calls == [] and fake.observers == []


def test_importing_the_package_imports_neither_torch_nor_pandas() -> None:
    code = ("import sys, tb_plugin; f = tb_plugin.record_memory_history; "
            "print('torch' in sys.modules, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
