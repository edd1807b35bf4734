"""Name conventions of PyTorch events that decide what an event means (steps, data loading, collectives)."""

from __future__ import annotations

import re

import numpy as np

from .arrays import isin_ints
from .tables import TraceModel

STEP_PREFIX = "ProfilerStep#"
_STEP = re.compile(r"^ProfilerStep#(\d+)$")

# Host-side collective operators of any PyTorch version: c10d ops, the nccl:/gloo: annotations of 1.x, the
# record_param_comms wrapper of 2.x, and the ProcessGroup* entry points.
_COLLECTIVE_HOST = re.compile(
    r"^(?:nccl:|gloo:|c10d::|c10d_functional::|_c10d_functional::|record_param_comms$|ProcessGroup\w*::)"
)
# Device-side collectives: NCCL and RCCL kernels (RCCL keeps NCCL's names), MTIA's ``hccl::`` device events.
_COLLECTIVE_KERNEL = re.compile(r"^(?:nccl|ncclDevKernel|ncclKernel|ncclDev|hccl::)")


# Calls that block the host until the GPU catches up (cudaStreamWaitEvent does not: it makes a stream wait), and
# ``aten::_local_scalar_dense``, what ``.item()``, ``.tolist()`` and printing a GPU tensor run.
_HOST_SYNC = re.compile(r"^(?:cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|hipDeviceSynchronize"
                        r"|hipStreamSynchronize|hipEventSynchronize|aten::_local_scalar_dense)$")


def is_host_sync(name: str) -> bool:
    return _HOST_SYNC.match(name) is not None


def step_number(name: str) -> int | None:
    m = _STEP.match(name)
    return int(m.group(1)) if m else None


def is_dataloader(name: str) -> bool:
    return (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or name.startswith(
        "enumerate(DataPipe)#")


def is_collective_host(name: str) -> bool:
    return _COLLECTIVE_HOST.match(name) is not None


def is_collective_kernel(name: str) -> bool:
    return _COLLECTIVE_KERNEL.match(name) is not None


def name_mask(model: TraceModel, names: np.ndarray, predicate: object) -> np.ndarray:
    """Boolean mask over a name-code column: which codes' strings satisfy ``predicate`` (checked once per code)."""
    codes = model.codes_where(predicate)
    return isin_ints(names, codes)


def step_mask(model: TraceModel, names: np.ndarray) -> np.ndarray:
    """Boolean mask over a name-code column: the profiler's steps (``ProfilerStep#N``), which span whole steps and so
    are no operator, annotated region or host work of their own."""
    return name_mask(model, names, lambda s: s.startswith(STEP_PREFIX))
