"""Typed msgspec schema for Kineto trace events.

Every field is optional and typed ``Any`` where real traces disagree on the type (numbers written as strings,
``"N/A"``, ``"inf"``), so one odd value never fails the file: the column builders coerce per field. Fields the
views never read are simply not declared, and msgspec skips them without allocating anything.
Shapes and type lists (``Input Dims``, ``Input type``) stay ``msgspec.Raw``: a zero-copy slice of the input that
is interned as text, instead of thousands of nested Python lists.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Raw, field

# msgspec cannot put Raw in a union with None: an empty Raw marks "absent".
_NO_RAW = Raw()


class Args(msgspec.Struct, gc=False, omit_defaults=True):
    """The ``args`` of one event: only the keys the views use."""

    external_id: Any = field(name="External id", default=None)
    external_id_lower: Any = field(name="external id", default=None)
    correlation: Any = None
    # device events
    device: Any = None
    stream: Any = None
    grid: Any = None
    block: Any = None
    registers: Any = field(name="registers per thread", default=None)
    shared_memory: Any = field(name="shared memory", default=None)
    blocks_per_sm: Any = field(name="blocks per SM", default=None)
    warps_per_sm: Any = field(name="warps per SM", default=None)
    occupancy: Any = field(name="est. achieved occupancy %", default=None)
    nbytes: Any = field(name="bytes", default=None)
    bandwidth: Any = field(name="memory bandwidth (GB/s)", default=None)
    # host operators
    input_dims: Raw = field(name="Input Dims", default=_NO_RAW)
    input_dims_lower: Raw = field(name="Input dims", default=_NO_RAW)
    input_type: Raw = field(name="Input type", default=_NO_RAW)
    concrete_inputs: Raw = field(name="Concrete Inputs", default=_NO_RAW)
    call_stack: Any = field(name="Call stack", default=None)
    seq: Any = field(name="Sequence number", default=None)
    fwd_tid: Any = field(name="Fwd thread id", default=None)
    kernel_name: Any = None
    # work estimates the trace carries: with_flops=True writes "flops" on some operators; Inductor (benchmark_kernel)
    # and torch._inductor.analysis.profile_analysis write "kernel_flop" / "kernel_num_gb" on launches and kernels
    flops: Any = None
    kernel_flop: Any = None
    kernel_num_gb: Any = None
    # python_function
    python_id: Any = field(name="Python id", default=None)
    python_parent_id: Any = field(name="Python parent id", default=None)
    python_module_id: Any = field(name="Python module id", default=None)
    # [memory]
    device_type: Any = field(name="Device Type", default=None)
    device_id: Any = field(name="Device Id", default=None)
    addr: Any = field(name="Addr", default=None)
    mem_bytes: Any = field(name="Bytes", default=None)
    total_allocated: Any = field(name="Total Allocated", default=None)
    total_reserved: Any = field(name="Total Reserved", default=None)
    # collectives (record_param_comms and NCCL kernels)
    collective_name: Any = field(name="Collective name", default=None)
    in_nelems: Any = field(name="In msg nelems", default=None)
    out_nelems: Any = field(name="Out msg nelems", default=None)
    dtype: Any = None
    group_size: Any = field(name="Group size", default=None)
    pg_name: Any = field(name="Process Group Name", default=None)
    pg_desc: Any = field(name="Process Group Description", default=None)
    pg_ranks: Any = field(name="Process Group Ranks", default=None)
    rank: Any = field(name="Rank", default=None)
    # metadata events (ph "M")
    name: Any = None
    labels: Any = None
    sort_index: Any = None


class Event(msgspec.Struct, gc=False):
    """One entry of ``traceEvents``."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    bp: Any = None
    s: Any = None
    args: Args | None = None


class TraceDocument(msgspec.Struct, gc=False):
    """The top-level object of a Kineto trace (PyTorch >= 1.8).

    ``traceEvents`` is decoded as raw slices first: events are then decoded a chunk at a time, so only one chunk
    of event objects is ever alive (a 2 GB trace has tens of millions of events).
    """

    traceEvents: list[Raw] | None = None
    schemaVersion: Any = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    displayTimeUnit: Any = None
    traceName: Any = None
    trace_id: Any = None
    Framework: Any = None
    cupti_version: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    hip_runtime_version: Any = None
    record_shapes: Any = None
    profile_memory: Any = None
    with_stack: Any = None
    with_flops: Any = None
    with_modules: Any = None
    pytorch_version: Any = field(name="PyTorch Version", default=None)
    pytorch_version_alt: Any = field(name="pytorch_version", default=None)

