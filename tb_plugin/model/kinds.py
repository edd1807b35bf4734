"""Event kinds: one small integer per role an event plays, shared by every trace format and device family.

The raw category strings differ between PyTorch 1.8 (``Operator``, ``Runtime``, ``Kernel``) and 2.x (``cpu_op``,
``cuda_runtime``, ``kernel``), and between device families; analyses switch on these kinds and never on category
spellings, so device work is recognised by what it is, not by CUDA's names for it.

What each family's Kineto writes (libkineto ``ActivityType.cpp`` and its ROCm, XPU and MTIA activity sources):

- CUDA: ``cuda_runtime``/``cuda_driver`` launches; ``kernel``, ``gpu_memcpy``, ``gpu_memset`` on the device.
- ROCm/HIP: the HIP API is written as ``cuda_runtime`` (Kineto reuses the CUDA activity type); kernels and copies
  as CUDA's. ``hip_runtime`` (other tools) is a ``*_runtime`` like any other.
- XPU: ``xpu_runtime``/``xpu_driver`` launches; ``kernel``, ``gpu_memcpy``, ``gpu_memset`` on the device.
- MTIA: ``mtia_runtime`` launches; ``mtia_ccp_events`` is the device work (newer Kineto aliases it to the kernel
  type, and its ``hccl::`` events are collectives). ``mtia_insight`` holds device diagnostics whose timing
  semantics are not documented, so they stay ``OTHER`` rather than risk counting device time twice.
- HPU: ``hpu_op`` is the host-side runtime call (newer Kineto aliases it to the runtime type).
- Newer Kineto may write the accelerator-agnostic ``runtime`` and ``driver``.
"""

from __future__ import annotations

from enum import IntEnum


class Kind(IntEnum):
    OTHER = 0
    CPU_OP = 1  # cpu_op, old Operator
    USER_ANNOTATION = 2  # user_annotation (host record_function, ProfilerStep#N in 2.x)
    GPU_USER_ANNOTATION = 3  # gpu_user_annotation: GPU-side copies of annotations
    PYTHON_FUNCTION = 4  # python_function, old python
    RUNTIME = 5  # cuda_runtime and other *_runtime, old Runtime
    DRIVER = 6  # cuda_driver (cuLaunchKernel from Triton) and other *_driver
    KERNEL = 7
    MEMCPY = 8
    MEMSET = 9
    MEMORY = 10  # the [memory] instant events
    INSTANT = 11  # other instant events
    TRACE = 12  # the "PyTorch Profiler (0)" window event
    OVERHEAD = 13  # overhead, cuda_sync, cuda_event and friends
    COMMUNICATION = 14  # collective_comm and similar host-side comm categories
    COUNTER_RANGE = 15  # cuda_profiler_range: a CUPTI range-profiler range (one kernel), counters in its args


_BY_CATEGORY = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "gpu_user_annotation": Kind.GPU_USER_ANNOTATION,
    "python_function": Kind.PYTHON_FUNCTION,
    "python": Kind.PYTHON_FUNCTION,
    "kernel": Kind.KERNEL,
    "mtia_ccp_events": Kind.KERNEL,  # MTIA on-device (CCP) events: the device work of an MTIA trace
    "memcpy": Kind.MEMCPY,
    "gpu_memcpy": Kind.MEMCPY,
    "memset": Kind.MEMSET,
    "gpu_memset": Kind.MEMSET,
    "trace": Kind.TRACE,
    "overhead": Kind.OVERHEAD,
    "cuda_sync": Kind.OVERHEAD,
    "cuda_event": Kind.OVERHEAD,
    "collective_comm": Kind.COMMUNICATION,
    "cuda_profiler_range": Kind.COUNTER_RANGE,
    "hpu_op": Kind.RUNTIME,
    "driver": Kind.DRIVER,
}

DEVICE_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
HOST_OP_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)


def kind_of(category: str, phase: str, name: str) -> Kind:
    """Classify one (category, phase, name) triple; called once per distinct triple, not per event."""
    if phase == "i" or phase == "I":
        return Kind.MEMORY if name == "[memory]" else Kind.INSTANT
    cat = category.lower()
    kind = _BY_CATEGORY.get(cat)
    if kind is not None:
        return kind
    if cat.endswith("_runtime") or cat == "runtime":
        return Kind.RUNTIME
    if cat.endswith("_driver"):
        return Kind.DRIVER
    return Kind.OTHER
