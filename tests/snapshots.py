"""Synthetic PyTorch allocator snapshots in the exact format ``torch.cuda.memory._dump_snapshot`` writes.

CPU torch cannot record CUDA memory history, so the tests build snapshots here: a small model of the caching
allocator (``c10/cuda/CUDACachingAllocator.cpp``: requests rounded to 512 bytes, blocks of at most 1 MiB from
2 MiB segments of the small pool, larger ones from 20 MiB segments or their own rounded to 2 MiB, best fit, a
block split when what is left can serve another request, free neighbours merged, wholly free segments given back
before an ``oom``) records the same trace entries torch does and dumps the same dict:

- ``segments``: ``device``, ``address``, ``total_size``, ``allocated_size``, ``active_size``, ``requested_size``,
  ``stream``, ``segment_type``, ``segment_pool_id`` (a tuple), ``is_expandable``, ``frames``, ``blocks``
  (``address``, ``size``, ``requested_size``, ``state``, ``frames``) — ``torch/csrc/cuda/Module.cpp``;
- ``device_traces``: ``action``, ``addr`` (``device_free`` on an ``oom``), ``size`` (the request; an oom's is the
  rounded request), ``stream``, ``time_us``, ``frames`` — entries as ``DeviceCachingAllocator::record_trace``
  writes them: alloc then, on a free, free_requested and free_completed, segment_alloc before the alloc that needed
  it, a ``snapshot`` entry (size: active bytes) each time ``_snapshot()`` is taken;
- ``allocator_settings`` (torch >= 2.6) and ``external_annotations`` (>= 2.6).

``version`` picks the spelling of older releases: ``"2.0"`` (blocks keep ``history[0]`` with ``frames`` and
``real_size``, no block address, no ``time_us``), ``"2.1"`` (times, block addresses and frames, no settings),
``"2.11"`` (everything). Frames are shared objects, as torch's symbolizer shares them, so the pickle memoises them.
"""

from __future__ import annotations

import gzip
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
LARGE_BUFFER = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20
BASE_ADDRESS = 0x7F0000000000
T0_US = 1_795_000_000_000_000


class OutOfMemory(Exception):
    pass


def frame(filename: str, line: int, name: str) -> dict[str, Any]:
    return {"filename": filename, "line": line, "name": name}


TORCH = "/usr/lib/python3/dist-packages/torch"
USER = "/home/me/train.py"
F = {
    "alloc_cpp": frame("??", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(...)"),
    "empty_cpp": frame("??", 0, "at::native::empty_cuda(...)"),
    "to_copy_cpp": frame("??", 0, "at::native::_to_copy(...)"),
    "linear_fwd": frame(f"{TORCH}/nn/modules/linear.py", 125, "forward"),
    "call_impl": frame(f"{TORCH}/nn/modules/module.py", 1762, "_call_impl"),
    "wrapped_call": frame(f"{TORCH}/nn/modules/module.py", 1751, "_wrapped_call_impl"),
    "apply": frame(f"{TORCH}/nn/modules/module.py", 942, "_apply"),
    "module_to": frame(f"{TORCH}/nn/modules/module.py", 1355, "to"),
    "engine_cpp": frame("??", 0, "torch::autograd::Engine::evaluate_function(...)"),
    "mm_backward_cpp": frame("??", 0, "torch::autograd::generated::MmBackward0::apply(...)"),
    "tensor_backward": frame(f"{TORCH}/_tensor.py", 648, "backward"),
    "adam_step": frame(f"{TORCH}/optim/adam.py", 247, "step"),
    "adam_multi": frame(f"{TORCH}/optim/adam.py", 601, "_multi_tensor_adam"),
    "opt_wrapper": frame(f"{TORCH}/optim/optimizer.py", 493, "wrapper"),
    "user_model_init": frame(USER, 20, "build_model"),
    "user_forward": frame(USER, 31, "forward"),
    "user_block": frame(USER, 44, "forward"),
    "user_train": frame(USER, 60, "train_step"),
    "user_loss": frame(USER, 62, "train_step"),
    "user_backward": frame(USER, 63, "train_step"),
    "user_step": frame(USER, 64, "train_step"),
    "user_batch": frame(USER, 58, "train_step"),
    "user_main": frame(USER, 80, "<module>"),
    "zero_grad": frame(f"{TORCH}/optim/optimizer.py", 1011, "zero_grad"),
    "user_zero": frame(USER, 57, "train_step"),
}


def stack(*names: str) -> list[dict[str, Any]]:
    """A stack, innermost frame first, of shared frame dicts."""
    return [F[n] for n in names]


S = {
    "param": stack("alloc_cpp", "empty_cpp", "apply", "module_to", "user_model_init", "user_main"),
    "input": stack("alloc_cpp", "empty_cpp", "to_copy_cpp", "user_batch", "user_main"),
    "act_fc1": stack("alloc_cpp", "empty_cpp", "linear_fwd", "call_impl", "wrapped_call", "user_forward",
                     "call_impl", "wrapped_call", "user_train", "user_main"),
    "act_block": stack("alloc_cpp", "empty_cpp", "linear_fwd", "call_impl", "wrapped_call", "user_block",
                       "call_impl", "wrapped_call", "user_train", "user_main"),
    "loss": stack("alloc_cpp", "empty_cpp", "user_loss", "user_main"),
    "seed": stack("alloc_cpp", "empty_cpp", "tensor_backward", "user_backward", "user_main"),
    "grad": stack("alloc_cpp", "empty_cpp", "mm_backward_cpp", "engine_cpp"),
    "opt_state": stack("alloc_cpp", "empty_cpp", "adam_multi", "adam_step", "opt_wrapper", "user_step", "user_main"),
    "zero_grad": stack("zero_grad", "user_zero", "user_main"),
    "step_end": stack("user_main"),
    "opt_tmp": stack("alloc_cpp", "empty_cpp", "adam_multi", "adam_step", "opt_wrapper", "user_step", "user_main"),
}


def round_size(size: int) -> int:
    return MIN_BLOCK if size < MIN_BLOCK else MIN_BLOCK * ((size + MIN_BLOCK - 1) // MIN_BLOCK)


def segment_size(size: int) -> int:
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * ((size + ROUND_LARGE - 1) // ROUND_LARGE)


@dataclass
class Block:
    address: int
    size: int
    requested: int = 0
    allocated: bool = False
    frames: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Segment:
    address: int
    size: int
    small: bool
    blocks: list[Block]


class Allocator:
    """One device's caching allocator, as far as a snapshot shows it."""

    def __init__(self, limit: int = 1 << 40, version: str = "2.11", device: int = 0, track: bool = True) -> None:
        self.limit = limit
        self.version = version
        self.device = device
        self.segments: list[Segment] = []
        self.trace: list[dict[str, Any]] = []
        self.next_address = BASE_ADDRESS
        self.clock = T0_US
        self.recording = True
        # the allocator's own truth, entry by entry (independent of any analysis): the allocated blocks'
        # requested bytes and addresses after each recorded entry, and the segments as _snapshot() would list
        # them at the highest of those moments
        self.track = track
        self.truth_live: list[int] = []
        self.truth_addresses: list[frozenset[int]] = []
        self.peak_segments: list[dict[str, Any]] = []
        self.peak_entry = -1

    # ---- what torch records
    def _record(self, action: str, addr: int, size: int, frames: list[dict[str, Any]] | None = None,
                **more: Any) -> None:
        self.clock += 3
        if not self.recording:
            return
        entry: dict[str, Any] = {"action": action}
        if action == "oom":
            entry["device_free"] = addr
        else:
            entry["addr"] = addr
        entry.update(size=size, stream=0)
        if frames:
            entry["frames"] = frames
        if self.version != "2.0":
            entry["time_us"] = self.clock
        entry.update(more)
        self.trace.append(entry)
        if self.track:
            live = [b for seg in self.segments for b in seg.blocks if b.allocated]
            total = sum(b.requested for b in live)
            if not self.truth_live or total > max(self.truth_live):
                self.peak_segments, self.peak_entry = self.segments_dump(), len(self.trace) - 1
            self.truth_live.append(total)
            self.truth_addresses.append(frozenset(b.address for b in live))

    @property
    def reserved(self) -> int:
        return sum(s.size for s in self.segments)

    def _find(self, size: int, small: bool) -> tuple[Segment, int] | None:
        best: tuple[Segment, int] | None = None
        for seg in self.segments:
            if seg.small != small:
                continue
            for i, b in enumerate(seg.blocks):
                if not b.allocated and b.size >= size and (best is None or b.size < best[0].blocks[best[1]].size):
                    best = (seg, i)
        return best

    def _new_segment(self, size: int, small: bool, frames: list[dict[str, Any]]) -> tuple[Segment, int] | None:
        total = segment_size(size)
        if self.reserved + total > self.limit:
            self._release_cached(frames)
            if self.reserved + total > self.limit:
                return None
        seg = Segment(self.next_address, total, small, [Block(self.next_address, total)])
        self.next_address += total + (64 << 20)
        self.segments.append(seg)
        self._record("segment_alloc", seg.address, total, frames)
        return seg, 0

    def _release_cached(self, frames: list[dict[str, Any]]) -> None:
        for seg in [s for s in self.segments if all(not b.allocated for b in s.blocks)]:
            self.segments.remove(seg)
            self._record("segment_free", seg.address, seg.size, frames)

    def malloc(self, requested: int, frames: list[dict[str, Any]]) -> int:
        size = round_size(requested)
        small = size <= SMALL_SIZE
        found = self._find(size, small) or self._new_segment(size, small, frames)
        if found is None:
            self._record("oom", max(0, self.limit - self.reserved), size, frames)
            raise OutOfMemory(size)
        seg, i = found
        block = seg.blocks[i]
        rest = block.size - size
        if rest >= (MIN_BLOCK if small else SMALL_SIZE + 1):
            seg.blocks.insert(i + 1, Block(block.address + size, rest))
            block.size = size
        block.allocated, block.requested, block.frames = True, requested, frames
        self._record("alloc", block.address, requested, frames)
        return block.address

    def free(self, address: int, frames: list[dict[str, Any]] | None = None) -> None:
        for seg in self.segments:
            for i, b in enumerate(seg.blocks):
                if b.address == address and b.allocated:
                    self._record("free_requested", address, b.requested, frames or b.frames)
                    b.allocated = False
                    self._record("free_completed", address, b.requested, frames or b.frames)
                    self._merge(seg, i)
                    return
        raise KeyError(hex(address))

    @staticmethod
    def _merge(seg: Segment, i: int) -> None:
        if i + 1 < len(seg.blocks) and not seg.blocks[i + 1].allocated:
            seg.blocks[i].size += seg.blocks.pop(i + 1).size
        if i > 0 and not seg.blocks[i - 1].allocated:
            seg.blocks[i - 1].size += seg.blocks.pop(i).size

    # ---- what _snapshot() returns
    def segments_dump(self) -> list[dict[str, Any]]:
        out = []
        for seg in sorted(self.segments, key=lambda s: s.address):
            blocks = [self._block_dump(b) for b in seg.blocks]
            allocated = sum(b.size for b in seg.blocks if b.allocated)
            d: dict[str, Any] = {
                "device": self.device, "address": seg.address, "total_size": seg.size,
                "allocated_size": allocated, "active_size": allocated,
                "requested_size": sum(b.requested for b in seg.blocks if b.allocated), "stream": 0,
                "segment_type": "small" if seg.small else "large", "segment_pool_id": (0, 0),
            }
            if self.version != "2.0":
                d["is_expandable"] = False
                d["frames"] = []
            d["blocks"] = blocks
            out.append(d)
        return out

    def _block_dump(self, b: Block) -> dict[str, Any]:
        state = "active_allocated" if b.allocated else "inactive"
        if self.version == "2.0":
            d: dict[str, Any] = {"size": b.size, "state": state}
            if b.allocated:
                d["history"] = [{"addr": b.address, "real_size": b.requested, "frames": b.frames}]
            return d
        return {"address": b.address, "size": b.size, "requested_size": b.requested if b.allocated else 0,
                "state": state, "frames": b.frames if b.allocated else []}

    def live_block_bytes(self) -> tuple[int, int]:
        """(requested, block) bytes of the allocated blocks: what the snapshot's segments say is live."""
        live = [b for s in self.segments for b in s.blocks if b.allocated]
        return sum(b.requested for b in live), sum(b.size for b in live)

    def take_snapshot(self) -> None:
        """What ``_snapshot()`` leaves in the history: a ``snapshot`` entry whose size is the active bytes."""
        self._record("snapshot", 0, self.live_block_bytes()[1])

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = {"segments": self.segments_dump(), "device_traces": [list(self.trace)]}
        if self.version == "2.11":
            out["allocator_settings"] = {
                "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": False, "pinned_num_register_threads": 1,
                "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
                "roundup_power2_divisions": {"1": 0, "2": 0},
            }
            out["external_annotations"] = []
        return out


def training(version: str = "2.11", steps: int = 2, limit: int = 1 << 40, batch: int = 1) -> Allocator:
    """A two-layer model trained ``steps`` steps with Adam: parameters, a batch, activations, a loss, gradients
    (kept across the step, as ``zero_grad(set_to_none=True)`` frees them before the next backward), optimizer
    state (made by the first step) and optimizer temporaries. ``batch`` scales the activations."""
    a = Allocator(limit=limit, version=version)
    params = [a.malloc(n, S["param"]) for n in (4 << 20, 4096, 4 << 20, 4096)]
    grads: list[int] = []
    state: list[int] = []
    for _ in range(steps):
        for g in grads:  # zero_grad(set_to_none=True)
            a.free(g, S["zero_grad"])
        x = a.malloc(3 << 20, S["input"])
        h1 = a.malloc(batch * (6 << 20), S["act_fc1"])
        h2 = a.malloc(batch * (6 << 20), S["act_block"])
        loss = a.malloc(4, S["loss"])
        seed = a.malloc(4, S["seed"])
        grads = [a.malloc(n, S["grad"]) for n in (4 << 20, 4096, 4 << 20, 4096)]
        for t in (seed, h2, h1, x):
            a.free(t, S["grad"])
        if not state:
            state = [a.malloc(n, S["opt_state"]) for n in (4 << 20, 4096, 4 << 20, 4096) for _ in range(2)]
        tmp = a.malloc(4 << 20, S["opt_tmp"])
        a.free(tmp, S["opt_tmp"])
        a.free(loss, S["step_end"])
    del params
    return a


def write(snapshot: dict[str, Any], path: Path, protocol: int = pickle.DEFAULT_PROTOCOL) -> Path:
    """Pickle as ``_dump_snapshot`` does (``pickle.dump(s, f)``); gzip when the name ends in ``.gz``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = pickle.dumps(snapshot, protocol=protocol)
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


def _deep_stacks(count: int, depth: int, rng: Any) -> list[list[dict[str, Any]]]:
    """``count`` distinct stacks of about ``depth`` frames: C++ allocator frames, a library forward, module calls
    and the user's layers (shared frame objects, as torch's symbolizer makes them)."""
    cpp = [frame("??", 0, f"at::native::op_{i}(...)") for i in range(40)] + [F["alloc_cpp"], F["empty_cpp"]]
    layers = [frame(USER, 100 + i, "forward") for i in range(count)]
    out = []
    for i in range(count):
        lib = [frame(f"{TORCH}/nn/modules/m{i % 7}.py", 10 + i % 13, "forward"), F["call_impl"], F["wrapped_call"]]
        tail = [layers[i], F["call_impl"], F["wrapped_call"], F["user_train"], F["user_main"]]
        head = [F["alloc_cpp"], F["empty_cpp"]] + [cpp[int(j)] for j in rng.integers(0, 40, max(0, depth - 10))]
        out.append(head + lib + tail)
    return out


def big_history(entries: int = 100_000, seed: int = 0, stacks: int = 300, depth: int = 30) -> dict[str, Any]:
    """A snapshot of about ``entries`` history entries (``max_entries``' default is far more): allocations of
    realistic sizes in one large segment, most freed soon, some kept, addresses reused per size, a stack from
    ``stacks`` distinct ones of ``depth`` frames, each entry with a list of its own (torch gathers a traceback per
    entry and shares only the frames), the free's list shared by its two entries. For the benchmark and scale
    tests."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pool = _deep_stacks(stacks, depth, rng)
    seg_size = 8 << 30
    trace: list[dict[str, Any]] = [{"action": "segment_alloc", "addr": BASE_ADDRESS, "size": seg_size, "stream": 0,
                                    "time_us": T0_US, "frames": pool[0]}]
    free_by_size: dict[int, list[int]] = {}
    live: list[tuple[int, int, list[dict[str, Any]]]] = []
    bump = BASE_ADDRESS
    t = T0_US
    sizes = (rng.lognormal(12, 2.5, entries) // 512 * 512 + 512).astype(int).clip(512, 256 << 20)
    k = 0
    while len(trace) < entries:
        t += int(rng.integers(1, 5))
        if live and (rng.random() < 0.48 or len(live) > 4000):
            j = int(rng.integers(max(0, len(live) - 64), len(live))) if rng.random() < 0.9 else \
                int(rng.integers(0, len(live)))
            addr, size, fr = live.pop(j)
            free_frames = list(pool[int(rng.integers(0, len(pool)))])  # context="all": the free's own stack
            trace.append({"action": "free_requested", "addr": addr, "size": size, "stream": 0, "time_us": t,
                          "frames": free_frames})
            trace.append({"action": "free_completed", "addr": addr, "size": size, "stream": 0, "time_us": t,
                          "frames": free_frames})
            free_by_size.setdefault(size, []).append(addr)
            continue
        size = int(sizes[k % len(sizes)])
        k += 1
        reuse = free_by_size.get(size)
        if reuse:
            addr = reuse.pop()
        else:
            addr, bump = bump, bump + size
        fr = pool[int(rng.integers(0, len(pool)))]
        live.append((addr, size, fr))
        trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": list(fr)})
    blocks = [{"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": fr}
              for a, s, fr in sorted(live)]
    segment = {"device": 0, "address": BASE_ADDRESS, "total_size": seg_size, "allocated_size": 0,
               "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
               "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": _with_gaps(blocks, seg_size)}
    return {"segments": [segment], "device_traces": [trace], "allocator_settings": {"expandable_segments": False},
            "external_annotations": []}


def _with_gaps(blocks: list[dict[str, Any]], seg_size: int) -> list[dict[str, Any]]:
    """The live blocks with inactive blocks filling the space between them, as a segment lists them."""
    out: list[dict[str, Any]] = []
    at = BASE_ADDRESS
    for b in blocks:
        if b["address"] > at:
            out.append({"address": at, "size": b["address"] - at, "requested_size": 0, "state": "inactive",
                        "frames": []})
        out.append(b)
        at = b["address"] + b["size"]
    if at < BASE_ADDRESS + seg_size:
        out.append({"address": at, "size": BASE_ADDRESS + seg_size - at, "requested_size": 0, "state": "inactive",
                    "frames": []})
    return out
