"""The server freezes the objects alive once the plugin is built, so full collections skip them (api/gc_pauses.py)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter (the test process may have frozen already): build the plugin twice, as TensorBoard builds it.
_SCRIPT = """
import gc, json, tempfile
from pathlib import Path
from benchmarks.compare_answers import app, close
from tb_plugin.api.gc_pauses import freeze_startup_objects
work = Path(tempfile.mkdtemp()); (work / "logdir").mkdir()
before = gc.get_freeze_count()
first = app(work / "logdir", work / "cache")
frozen = gc.get_freeze_count()
second = app(work / "logdir", work / "cache2")
out = {"before": before, "frozen": frozen, "again": freeze_startup_objects(), "walked": len(gc.get_objects())}
close(first); close(second)
print(json.dumps(out))
"""


class _Node:
    """A container that can sit in a reference cycle (freed by the collector only)."""

    def __init__(self) -> None:
        self.other: Any = None


def test_building_the_plugin_freezes_the_startup_objects_once() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["before"] == 0 and out["frozen"] > 10_000  # TensorBoard's and the plugin's modules and types
    assert out["again"] is False  # once per process: the second plugin froze nothing more
    assert out["walked"] < out["frozen"] / 4  # a full collection walks a fraction of the objects it did


def test_objects_made_after_the_freeze_are_still_collected(tensorboard_app: Any, tmp_path: Path) -> None:
    (tmp_path / "logdir").mkdir()
    tensorboard_app(tmp_path / "logdir")
    assert gc.get_freeze_count() > 0
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a cycle, as a model and its memoised results may make
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None
