"""The changes a what-if replay can make to a trace's dependency graph: one dataclass per change model.

A finding names what the user would change in their code; its *change* says what that does to the events the trace
recorded, in terms the replay (``replay.py``) executes: host time that vanishes, device work that gets faster, fewer
or gone, launches that collapse into one, dependencies that go. Each change carries a stable ``id`` (the finding's,
e.g. ``"sync"``, ``"allocator_churn"``, ``"tf32"``, ``"recompile"``, ``"fuse_optimizer"``), which ``what_if``
and the ``/what_if`` route select changes by, and a ``label`` in the user's terms ("drop the .item() syncs").

Rows are event rows of ``model["events"]`` (what every analysis and the Trace view use as an event's id). A change
holds them as numpy arrays, so it is compared and hashed by identity (``eq=False``), never by value: the replay is
memoised by the changes' ids, not by their arrays.

- ``DropHost(rows, keep_us, spans)``: the host intervals of ``rows`` (runtime calls such as
  ``cudaMalloc``/``cudaFree``/``cudaStreamSynchronize``, compile events, a Python call, a DataLoader wait, an
  operator; nested rows count once) and the explicit ``spans`` (``(start, end)`` arrays of host time with no event: a
  ``sleep``) vanish from the host timeline, less ``keep_us`` per row (a cheaper replacement left in place, at the
  row's start). Later host work moves earlier; a blocking call in a dropped interval no longer waits; device work
  moves only as far as its launch and its stream allow
- ``ScaleDevice(rows, factor)``: these device events take ``dur / factor`` (one factor, or one per row)
- ``ReplaceDevice(rows, cost_us, launch_us)``: these N device events become one of ``cost_us`` (at the first one's
  place in its stream; the others take no time); their launch calls vanish from the host but for the first, which
  costs ``launch_us`` (a fused kernel: one launch)
- ``CaptureGraph(rows, launch_us, region_rows, whole)``: these device events keep their durations but are replayed
  from a CUDA graph: the host work that launched them (the outermost operators around their launches, or
  ``region_rows``; ``whole``: per step, everything from the first of them to the last, Python included) collapses
  into one ``cudaGraphLaunch`` of ``launch_us``, and every event is released at that launch; host syncs and the
  DataLoader's spans are never captured
- ``DropDevice(rows)``: these device events vanish (recompute of checkpointing, a copy made unnecessary) with their
  launch calls
- ``OverlapComm(rows)``: these collectives stop holding back work on other streams (a stream that waited for one
  starts when its own work and launch allow); what remains of them is what is not hidden: their own stream and the
  step's end still wait for them
- ``SideStream(rows)``: these device events (copies) move to a side stream of their own on their device, in the same
  order: they still run one after another and take their time, but the work queued after them on their old stream no
  longer waits for them (a copy overlapped with compute: ``non_blocking=True`` on a side stream, prefetching)
- ``FasterPeer(worker, us_per_step)``: another rank of the job (``worker``) does ``us_per_step`` less work of its
  own per step (its own fix, seen from a rank that waits for it): its largest gap between two collectives in each
  of its steps shrinks by that much (``peers.py``); replayed only with the job's peers
- ``Combined(parts)``: all ``parts`` at once, as one change with one id (a finding whose fix does several
  things)

The constants the findings put into ``factor``, ``cost_us`` and ``launch_us`` (peak-throughput ratios per GPU
generation, a graph replay's launch cost, a fused kernel's cost from the bytes it moves) live in ``constants.py``,
with their sources.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .constants import GRAPH_LAUNCH_PER_NODE_US, GRAPH_LAUNCH_US, KERNEL_LAUNCH_US


def _rows(values: object) -> np.ndarray:
    out: np.ndarray = np.asarray(values, dtype=np.int64).reshape(-1)
    return out


@dataclass(frozen=True, eq=False)
class Change:
    """What every change has: a stable id (the finding's) and a label in the user's terms."""

    id: str
    label: str
    # True: only this rank makes the change (the straggler's own cause): on a multi-rank run it is replayed against
    # the other ranks' measured pace (their collectives wait for nobody new), not assuming they change too
    own_rank: bool = False

    def leaves(self) -> tuple[Change, ...]:
        """The elementary changes this one is made of (itself, or a Combined's parts, flattened)."""
        return (self,)


@dataclass(frozen=True, eq=False)
class DropHost(Change):
    """Host intervals that vanish: ``rows`` (event rows of host events) and ``spans`` (explicit host time)."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    keep_us: float | np.ndarray = 0.0  # per row (or one for all): the replacement's cost, left at the row's start
    spans: tuple[np.ndarray, np.ndarray] | None = None  # (start, end) µs of host time with no event to name it

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", _rows(self.rows))


@dataclass(frozen=True, eq=False)
class ScaleDevice(Change):
    """Device events that run ``factor`` times faster (``dur / factor``)."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    factor: float | np.ndarray = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", _rows(self.rows))


@dataclass(frozen=True, eq=False)
class ReplaceDevice(Change):
    """N device events that become one of ``cost_us``; one launch of ``launch_us`` instead of N."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cost_us: float = 0.0
    launch_us: float = KERNEL_LAUNCH_US

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", _rows(self.rows))


@dataclass(frozen=True, eq=False)
class CaptureGraph(Change):
    """Device events replayed from a CUDA graph: their launching host work becomes one graph launch."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    launch_us: float | None = None  # None: GRAPH_LAUNCH_US + GRAPH_LAUNCH_PER_NODE_US per captured event (constants.py)
    region_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # host spans captured whole
    # True: per step, the whole span from the first captured operator to the last one goes (the Python between
    # them included: a graph replay runs none of it); False: only the operators' own spans
    whole: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", _rows(self.rows))
        object.__setattr__(self, "region_rows", _rows(self.region_rows))

    def cost_of(self, nodes: int) -> float:
        """The launch cost of a graph of ``nodes`` events."""
        return float(self.launch_us) if self.launch_us is not None else \
            GRAPH_LAUNCH_US + GRAPH_LAUNCH_PER_NODE_US * max(nodes, 1)

    def costs_of(self, nodes: np.ndarray) -> np.ndarray:
        """``cost_of`` for many graphs at once."""
        if self.launch_us is not None:
            return np.full(len(nodes), float(self.launch_us))
        size = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
        out: np.ndarray = GRAPH_LAUNCH_US + GRAPH_LAUNCH_PER_NODE_US * size
        return out


@dataclass(frozen=True, eq=False)
class DropDevice(Change):
    """Device events that vanish, with their launch calls."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", _rows(self.rows))


@dataclass(frozen=True, eq=False)
class OverlapComm(Change):
    """Collectives (their device rows) that stop holding back the work of other streams."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", _rows(self.rows))


@dataclass(frozen=True, eq=False)
class SideStream(Change):
    """Device events (copies) that move to a side stream of their device: overlapped with the compute."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", _rows(self.rows))


@dataclass(frozen=True, eq=False)
class FasterPeer(Change):
    """Another rank that does less work of its own per step (the straggler's fix, seen from a rank waiting for it)."""

    worker: str = ""
    us_per_step: float = 0.0


@dataclass(frozen=True, eq=False)
class Combined(Change):
    """Several changes made by one fix, replayed together under one id."""

    parts: tuple[Change, ...] = ()

    def leaves(self) -> tuple[Change, ...]:
        return tuple(leaf for part in self.parts for leaf in part.leaves())


def flatten(changes: tuple[Change, ...] | list[Change]) -> tuple[Change, ...]:
    """Every elementary change of ``changes`` (Combined ones opened), in order."""
    return tuple(leaf for change in changes for leaf in change.leaves())
