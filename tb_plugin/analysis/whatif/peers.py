"""The other ranks of a job, as one rank's replay sees them: when each would arrive at the collectives this rank
shares with them (``Peers``), from the job's rank summaries (``analysis.rank_summary``: every rank's collective
instances, matched by process group and sequence, as the Distributed view matches them).

A collective ends no earlier than its last rank arrives. A peer's arrival at an instance is its own work after its
previous collective ended: ``gap = A_p(j) − E_p(prev)``, measured on the peer. When that previous collective is one
this rank shares too (it ends at the same moment on every rank), the peer arrives ``gap`` after this rank's
*replayed* end of it, so a change that lets this rank finish a collective earlier lets its peers start their next
work earlier too; otherwise the peer arrives when it did (its clock mapped onto this rank's by the median offset of
the instances both ended). On this rank, a collective's measured time splits into the wait for the last arrival and
the transfer after it; the replay holds the transfer until the peers' replayed arrival.

Used only for a change this rank alone makes (``Change.own_rank``: the straggler evens out its own extra work): a
change every rank would make (TF32, no syncs) moves the peers alike, and the replay keeps each collective's
measured wait. ``FasterPeer`` (a change of a peer, seen from a rank that waits for it) shortens that peer's gaps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model.tables import TraceModel
from ..communication import collectives
from ..rank_summary import RankSummary
from .apply import device_index
from .graph import graph

MAX_PEERS = 16  # beyond this many ranks a job is replayed without its peers (each rank's collectives as measured)
SAME_END_US = 50.0  # the ends of one collective on two ranks (clocks aligned) differ by at most this much


@dataclass(frozen=True)
class Peers:
    """This rank's collective instances that wait for peers, and each peer's arrival at them."""

    op: np.ndarray  # per instance: its device event (graph order)
    wait: np.ndarray  # per instance: measured time it waited for the last peer to arrive
    pair: np.ndarray  # per (instance, peer) pair: the instance (index into op)
    prev: np.ndarray  # per pair: this rank's device event the peer's previous collective was (-1: not shared)
    base: np.ndarray  # per pair: the arrival after ``prev``'s replayed end, or (prev -1) the absolute arrival
    peer: np.ndarray  # per pair: the peer's position in ``workers``
    workers: list[str]
    step_of_pair: np.ndarray  # per pair: the peer's step its arrival falls in (-1 none)

    @property
    def size(self) -> int:
        return len(self.op)


Pair = tuple[int, int, int, float, int, float, float]  # instance, peer, prev op, base, step, end, prev's end


def _consistent(model: TraceModel, op: np.ndarray, rows: list[Pair]) -> list[Pair]:
    """The pairs that synchronised: a collective ends at the same moment on every rank, so a pair whose ends
    disagree (or that was matched across windows that started at different instances) is left out; a peer whose
    previous collective's ends disagree arrives at its measured time instead; and no peer arrives after this
    rank's instance ended (the replay without a change is then the measured run)."""
    end = graph(model).device.end
    out = []
    for k, p, prev, base, step, peer_end, prev_end in rows:
        if abs(peer_end - float(end[op[k]])) > SAME_END_US:
            continue
        if prev >= 0 and abs(prev_end - float(end[prev])) > SAME_END_US:
            prev, base = -1, prev_end + base
        arrival = float(end[prev]) + base if prev >= 0 else base
        if arrival <= float(end[op[k]]) + 1e-6:
            out.append((k, p, prev, base, step, peer_end, prev_end))
    return out


def _keys(col: dict[str, np.ndarray]) -> dict[tuple[str, int], int]:
    return {(str(g), int(s)): i for i, (g, s) in enumerate(zip(col["group"].tolist(), col["seq"].tolist()))}


def peers_of(model: TraceModel, summaries: list[RankSummary], worker: str) -> Peers | None:
    """The peers of ``worker`` (this model's rank) in a job of ``summaries``; None where there are none to model
    (a single rank, more than ``MAX_PEERS``, no shared device collective)."""
    mine = next((s for s in summaries if s.worker == worker), None)
    others = [s for s in summaries if s.worker != worker]
    if mine is None or not others or len(summaries) > MAX_PEERS:
        return None
    col = collectives(model)
    op = device_index(model)[np.asarray(col.row, dtype=np.int64)]
    usable = (op >= 0) & ~np.asarray(col.on_host, dtype=bool) & ~np.asarray(col.prelaunched, dtype=bool)
    own_keys = _keys(mine.collectives)
    rows: list[Pair] = []
    for p, s in enumerate(others):
        rows += _pairs(s, p, own_keys, op, usable, mine)
    rows = _consistent(model, op, rows)
    if not rows:
        return None
    rows.sort(key=lambda r: r[0])  # pairs grouped by instance (the replay reads them by searchsorted)
    pair = np.asarray([r[0] for r in rows], dtype=np.int64)
    inst, where = np.unique(pair, return_inverse=True)
    prev = np.asarray([r[2] for r in rows], dtype=np.int64)
    base = np.asarray([r[3] for r in rows], dtype=np.float64)
    arrival = np.where(prev >= 0, graph(model).device.end[np.maximum(prev, 0)] + base, base)
    last = np.full(len(inst), -np.inf)
    np.maximum.at(last, where.reshape(-1), arrival)
    start = graph(model).device.start[op[inst]]
    return Peers(op=op[inst], wait=np.maximum(last - start, 0.0), pair=where.reshape(-1), prev=prev, base=base,
                 peer=np.asarray([r[1] for r in rows], dtype=np.int64), workers=[s.worker for s in others],
                 step_of_pair=np.asarray([r[4] for r in rows], dtype=np.int64))


def _pairs(peer: RankSummary, p: int, own_keys: dict[tuple[str, int], int], op: np.ndarray, usable: np.ndarray,
           mine: RankSummary) -> list[Pair]:
    """(instance, peer, prev op, base, peer step, the peer's end and its previous collective's end in this rank's
    clock) for every instance this rank shares with ``peer``."""
    col = peer.collectives
    start, end = col["start"], col["end"]
    offset = _offset(peer, own_keys, mine)
    order = np.argsort(start, kind="stable")  # the peer's instances as it issued them
    steps = peer.steps["start"]
    out = []
    prev_of = np.full(len(start), -1, dtype=np.int64)
    prev_of[order[1:]] = order[:-1]
    for j, (g, s) in enumerate(zip(col["group"].tolist(), col["seq"].tolist())):
        k = own_keys.get((str(g), int(s)))
        if k is None or not usable[k]:
            continue
        before = int(prev_of[j])
        shared = own_keys.get((str(col["group"][before]), int(col["seq"][before]))) if before >= 0 else None
        step = int(np.searchsorted(steps, start[j], side="right") - 1) if len(steps) else -1
        if shared is not None and usable[shared]:
            out.append((k, p, int(op[shared]), float(start[j] - end[before]), step, float(end[j] - offset),
                        float(end[before] - offset)))
        else:
            out.append((k, p, -1, float(start[j] - offset), step, float(end[j] - offset), float("nan")))
    return out


def _offset(peer: RankSummary, own_keys: dict[tuple[str, int], int], mine: RankSummary) -> float:
    """The peer's clock minus this rank's: the median difference of the ends of the instances both have."""
    diffs = [float(e) - float(mine.collectives["end"][own_keys[(str(g), int(s))]])
             for g, s, e in zip(peer.collectives["group"].tolist(), peer.collectives["seq"].tolist(),
                                peer.collectives["end"].tolist()) if (str(g), int(s)) in own_keys]
    return float(np.median(diffs)) if diffs else 0.0


def relieved(peers: Peers, worker: str, us_per_step: float) -> np.ndarray:
    """The pairs' bases with ``worker``'s largest gap of each of its steps shortened by ``us_per_step`` (a faster
    peer: its own fix, seen from here)."""
    base: np.ndarray = np.array(peers.base, dtype=np.float64)
    if worker not in peers.workers or us_per_step <= 0:
        return base
    p = peers.workers.index(worker)
    gapped = np.flatnonzero((peers.peer == p) & (peers.prev >= 0) & (peers.step_of_pair >= 0))
    for step in np.unique(peers.step_of_pair[gapped]).tolist():
        here = gapped[peers.step_of_pair[gapped] == step]
        k = here[int(np.argmax(base[here]))]
        base[k] = max(base[k] - us_per_step, 0.0)
    return base
