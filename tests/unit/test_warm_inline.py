"""A small trace's stored views are computed in the loader process itself, one part after the other, not in a
forked process per part (``api/warm.py``, ``INLINE_EVENTS``): four forks cost more than the parts of a trace of a
few thousand events, and a logdir of 300 such ranks loaded 3-4 times slower. The stored files are the same
byte for byte whichever way they were computed, and a larger trace still gets a process per part."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from tb_plugin.api import warm
from tests.conftest import REPO, SAMPLES

# a rank of the 8-process gloo job: 3,038 events, a rank of a distributed job (its parts store a rank summary)
SMALL = sorted((SAMPLES / "gloo_8proc_cpu").glob("rank0.*.pt.trace.json.gz"))[0]

# Run in a process of its own: forking is only tried with one thread running (``warm._can_fork``), and a pytest-xdist
# worker runs others. Prints the forks made and the parts the marker lists.
SCRIPT = """
import json, os, sys
from pathlib import Path
from tb_plugin.api import warm
from tb_plugin.catalog.catalog import TraceFile
from tb_plugin.loader import load_trace
from tb_plugin.model.tables import save

source, entry, inline = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
warm.INLINE_EVENTS = inline
save(load_trace(str(source)), entry)
forks = [0]
real_fork = os.fork

def counted() -> int:
    pid = real_fork()
    if pid:
        forks[0] += 1
    return pid

os.fork = counted
file = TraceFile(run="r", worker="rank0", span="1", url=str(source), size=source.stat().st_size,
                 mtime=source.stat().st_mtime)
# every part before ready in both ways (the default rule leaves the Module page's for after ready where it forks)
later = warm.WarmViews(rule=warm.ReadyRule(after=())).save(str(entry), file, processes=2, parse_seconds=0.05)
marker = json.loads((entry / warm.MARKER).read_text())
print(json.dumps({"forks": forks[0], "parts": marker["parts"], "later": later is not None}))
"""


def _save_views(entry: Path, inline: int) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(SMALL), str(entry), str(inline)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _stored(entry: Path) -> dict[str, object]:
    """What the entry stores beside the parse, comparable across runs: every part's description, each answer's body
    and its gzip inflated (a gzip member carries the time it was made) and the memos' bytes; every other file (the
    parse, the Trace view's index, the marker) whole."""
    out: dict[str, object] = {}
    for f in sorted(entry.iterdir()):
        if f.name.startswith("warm.") and f.suffix == ".json" and f.name != warm.MARKER:
            doc = json.loads(f.read_text())
            blob = f.with_suffix(".bin").read_bytes()
            answers = {name: (blob[at:at + size], gzip.decompress(blob[gz:gz + gz_size]) if gz is not None else None)
                       for name, (at, size, gz, gz_size) in doc["answers"].items()}
            out[f.name] = (doc, answers, blob[doc["memos_at"]:])
        elif not f.name.startswith("warm.") or f.name == warm.MARKER:
            out[f.name] = f.read_bytes()
    return out


def test_a_small_traces_parts_are_computed_without_a_fork_and_stored_the_same(tmp_path: Path) -> None:
    assert warm.INLINE_EVENTS >= 3_038  # the sample rank is small
    inline = _save_views(tmp_path / "inline", warm.INLINE_EVENTS)
    assert inline == {"forks": 0, "parts": list(warm.PARTS), "later": False}
    forked = _save_views(tmp_path / "forked", 0)  # as a trace above the bound: a process per part
    assert forked == {"forks": len(warm.PARTS), "parts": list(warm.PARTS), "later": False}
    stored, expected = _stored(tmp_path / "inline"), _stored(tmp_path / "forked")
    assert {f"warm.{part}.json" for part in warm.PARTS} <= set(expected)
    assert stored == expected
