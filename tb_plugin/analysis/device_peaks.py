"""Peak dense FLOP/s per dtype and memory bandwidth of the GPUs users profile on, each from its vendor's datasheet,
and the match of a trace's device (``deviceProperties``: name, SM count, memory) to one of them.

All figures are dense (NVIDIA datasheets since Ampere print tensor-core figures *with 2:4 sparsity*: those are
halved here and say so), at the boost clock the datasheet states: a device held at a lower clock or power cap has a
lower peak, which ``PeakOverride`` (``--profiler_peaks``, ``--peaks``, ``tb_plugin.open(..., peaks=...)``) sets.
Classes: ``fp64`` (FP64 on CUDA cores / vector units), ``fp64_tensor``, ``fp32`` (CUDA cores / vector units:
what a kernel without tensor cores gets), ``tf32``, ``bf16``, ``fp16``, ``fp8`` (tensor / matrix cores, dense).
``None``: not in the datasheet (or not supported). docs/guide/roofline.md prints this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

T = 1e12  # TFLOP/s
G = 1e9  # GB/s
CLASSES = ("fp64", "fp64_tensor", "fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True)
class Device:
    """One table entry: peak FLOP/s per class (None: not in the datasheet), bandwidth in bytes/s, the source."""

    key: str
    name: str
    peaks: dict[str, float | None]
    bandwidth: float
    memory_gb: float
    source: str
    note: str = ""

    def peak(self, cls: str) -> float | None:
        return self.peaks.get(cls)


def _nv(key: str, name: str, fp64: float | None, fp64_tc: float | None, fp32: float, tf32: float | None,
        bf16: float | None, fp16: float | None, fp8: float | None, bw_gbs: float, mem: float, source: str,
        sparse: bool = True, note: str = "") -> Device:
    """An NVIDIA entry from its datasheet figures (TFLOP/s; tensor figures as printed, ``sparse``: with 2:4
    sparsity, so halved)."""
    half = 0.5 if sparse else 1.0

    def tc(x: float | None) -> float | None:
        return None if x is None else x * half * T

    peaks = {"fp64": None if fp64 is None else fp64 * T, "fp64_tensor": None if fp64_tc is None else fp64_tc * T,
             "fp32": fp32 * T, "tf32": tc(tf32), "bf16": tc(bf16), "fp16": tc(fp16), "fp8": tc(fp8)}
    return Device(key, name, peaks, bw_gbs * G, mem, source, note)


_V100 = "NVIDIA V100 Tensor Core GPU datasheet (Jan 2020)"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4, Jun 2021)"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (2023)"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (Nov 2024)"
_SPARSE = "tensor figures printed with 2:4 sparsity, halved"

DEVICES: tuple[Device, ...] = (
    _nv("V100-SXM2", "NVIDIA V100 SXM2", 7.8, None, 15.7, None, None, 125, None, 900, 32, _V100, sparse=False,
        note="tensor figure is FP16 mixed precision; no BF16/TF32"),
    _nv("V100-PCIe", "NVIDIA V100 PCIe", 7.0, None, 14.0, None, None, 112, None, 900, 32, _V100, sparse=False,
        note="tensor figure is FP16 mixed precision; no BF16/TF32"),
    _nv("V100S-PCIe", "NVIDIA V100S PCIe", 8.2, None, 16.4, None, None, 130, None, 1134, 32, _V100, sparse=False,
        note="tensor figure is FP16 mixed precision; no BF16/TF32"),
    _nv("A100-40GB-PCIe", "NVIDIA A100 40GB PCIe", 9.7, 19.5, 19.5, 312, 624, 624, None, 1555, 40, _A100,
        note=_SPARSE),
    _nv("A100-80GB-PCIe", "NVIDIA A100 80GB PCIe", 9.7, 19.5, 19.5, 312, 624, 624, None, 1935, 80, _A100,
        note=_SPARSE),
    _nv("A100-40GB-SXM", "NVIDIA A100 40GB SXM", 9.7, 19.5, 19.5, 312, 624, 624, None, 1555, 40, _A100,
        note=_SPARSE),
    _nv("A100-80GB-SXM", "NVIDIA A100 80GB SXM", 9.7, 19.5, 19.5, 312, 624, 624, None, 2039, 80, _A100,
        note=_SPARSE),
    _nv("H100-SXM", "NVIDIA H100 SXM", 34, 67, 67, 989, 1979, 1979, 3958, 3350, 80, _H100, note=_SPARSE),
    _nv("H100-PCIe", "NVIDIA H100 PCIe", 26, 51, 51, 756, 1513, 1513, 3026, 2000, 80, _H100, note=_SPARSE),
    _nv("H100-NVL", "NVIDIA H100 NVL", 30, 60, 60, 835, 1671, 1671, 3341, 3900, 94, _H100, note=_SPARSE),
    _nv("H200-SXM", "NVIDIA H200 SXM", 34, 67, 67, 989, 1979, 1979, 3958, 4800, 141, _H200, note=_SPARSE),
    _nv("H200-NVL", "NVIDIA H200 NVL", 30, 60, 60, 835, 1671, 1671, 3341, 4800, 141, _H200, note=_SPARSE),
    _nv("B200", "NVIDIA B200", 37, 37, 75, 2200, 4500, 4500, 9000, 7700, 180,
        "NVIDIA GB200 NVL72 / HGX B200 specifications, individual GPU, HGX B200 column (nvidia.com, 2025)",
        note=_SPARSE),
    _nv("L4", "NVIDIA L4", None, None, 30.3, 120, 242, 242, 485, 300, 24, "NVIDIA L4 Tensor Core GPU datasheet (2023)",
        note=_SPARSE + "; FP64 not in the datasheet"),
    _nv("L40S", "NVIDIA L40S", None, None, 91.6, 183, 362.05, 362.05, 733, 864, 48, "NVIDIA L40S GPU datasheet (2023)",
        sparse=False, note="dense tensor figures as printed (beside the sparsity ones); FP64 not in the datasheet"),
    Device("MI250X-GCD", "AMD Instinct MI250X (one GCD)",
           {"fp64": 23.95 * T, "fp64_tensor": 47.85 * T, "fp32": 23.95 * T, "tf32": None, "bf16": 191.5 * T,
            "fp16": 191.5 * T, "fp8": None}, 1638.4 * G, 64, "AMD Instinct MI250X accelerator datasheet (2021)",
           "the datasheet's MI250X figures ÷ 2: PyTorch sees each of its two GCDs as one device; no TF32/FP8"),
    Device("MI250X", "AMD Instinct MI250X",
           {"fp64": 47.9 * T, "fp64_tensor": 95.7 * T, "fp32": 47.9 * T, "tf32": None, "bf16": 383 * T,
            "fp16": 383 * T, "fp8": None}, 3276.8 * G, 128, "AMD Instinct MI250X accelerator datasheet (2021)",
           "both GCDs; no TF32/FP8"),
    Device("MI300X", "AMD Instinct MI300X",
           {"fp64": 81.7 * T, "fp64_tensor": 163.4 * T, "fp32": 163.4 * T, "tf32": 653.7 * T, "bf16": 1307.4 * T,
            "fp16": 1307.4 * T, "fp8": 2614.9 * T}, 5300 * G, 192, "AMD Instinct MI300X accelerator data sheet (2023)",
           "dense figures as printed (the sheet gives sparsity separately)"),
)
BY_KEY = {d.key.lower(): d for d in DEVICES}


def match(name: str | None, num_sms: Any = None, memory_bytes: Any = None) -> Device | None:
    """The table entry of a ``deviceProperties`` device: by name, then form factor (SXM, PCIe, NVL) from the name
    and SM count, and the A100 / MI250X variant from its memory. None: not a device of the table."""
    text = (name or "").lower()
    mem = float(memory_bytes) / 2**30 if isinstance(memory_bytes, (int, float)) and memory_bytes > 0 else None
    sms = int(num_sms) if isinstance(num_sms, (int, float)) else None
    key = _key(text, sms, mem)
    return BY_KEY.get(key.lower()) if key else None


def _key(text: str, sms: int | None, mem: float | None) -> str | None:
    pcie, nvl = "pcie" in text, "nvl" in text
    if "mi300x" in text:
        return "MI300X"
    if "mi250x" in text or "mi250" in text:
        return "MI250X" if mem is not None and mem > 96 else "MI250X-GCD"
    if "b200" in text:
        return "B200"
    if "h200" in text:
        return "H200-NVL" if nvl else "H200-SXM"
    if "h100" in text:
        return "H100-NVL" if nvl else ("H100-PCIe" if pcie or sms == 114 else "H100-SXM")
    if "a100" in text:
        size = "80GB" if (mem is not None and mem > 48) or "80gb" in text else "40GB"
        return f"A100-{size}-{'PCIe' if pcie else 'SXM'}"
    if "v100s" in text:
        return "V100S-PCIe"
    if "v100" in text:
        return "V100-PCIe" if pcie else "V100-SXM2"
    if "l40s" in text:
        return "L40S"
    if re.search(r"\bl4\b", text):
        return "L4"
    return None


@dataclass(frozen=True)
class PeakOverride:
    """Peaks given by the user: a table entry to use (``device``), and/or figures replacing its own (FLOP/s per
    class, bandwidth in bytes/s). Hashable: analyses memoise on it."""

    device: str | None = None
    peaks: tuple[tuple[str, float], ...] = ()
    bandwidth: float | None = None
    text: str = field(default="", compare=False)

    def __bool__(self) -> bool:
        return self.device is not None or bool(self.peaks) or self.bandwidth is not None


NO_OVERRIDE = PeakOverride()
_ALIASES = {"bw": "bandwidth", "mem_bw": "bandwidth", "fp64_tc": "fp64_tensor", "fp64tensor": "fp64_tensor"}


def parse_override(text: str | None) -> PeakOverride:
    """``"device=H100-SXM"``, ``"bf16=700,fp32=60,bw=3000"`` (TFLOP/s, GB/s), or both: one comma-separated list.
    Raises ValueError with the reason (an unknown key or device, a value that is not a positive number)."""
    if not text or not text.strip():
        return NO_OVERRIDE
    device, peaks, bandwidth = None, {}, None
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = _ALIASES.get(key.strip().lower(), key.strip().lower())
        if not sep:
            raise ValueError(f"peaks: {part!r} is not key=value (keys: device, {', '.join(CLASSES)}, bw)")
        if key == "device":
            if value.strip().lower() not in BY_KEY:
                raise ValueError(f"peaks: unknown device {value.strip()!r}; known: {', '.join(d.key for d in DEVICES)}")
            device = BY_KEY[value.strip().lower()].key
            continue
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"peaks: {key}={value!r} is not a number") from None
        if not number > 0:
            raise ValueError(f"peaks: {key} must be a positive number (TFLOP/s, or GB/s for bw)")
        if key == "bandwidth":
            bandwidth = number * G
        elif key in CLASSES:
            peaks[key] = number * T
        else:
            raise ValueError(f"peaks: unknown key {key!r} (keys: device, {', '.join(CLASSES)}, bw)")
    return PeakOverride(device, tuple(sorted(peaks.items())), bandwidth, text.strip())


def resolve(found: Device | None, override: PeakOverride = NO_OVERRIDE) -> Device | None:
    """The peaks to use: the matched entry (or the override's ``device``) with the override's figures on top; an
    override without a device and without a match makes a custom entry of its figures alone."""
    base = BY_KEY[override.device.lower()] if override.device else found
    if not override.peaks and override.bandwidth is None:
        return base
    peaks = dict(base.peaks) if base else dict.fromkeys(CLASSES)
    peaks.update(dict(override.peaks))
    bandwidth = override.bandwidth if override.bandwidth is not None else (base.bandwidth if base else 0.0)
    what = f"--peaks {override.text}" if override.text else "the peaks given"
    source = f"{base.source}, with {what}" if base else f"given by the user ({what})"
    return replace(base, peaks=peaks, bandwidth=bandwidth, source=source) if base else Device(
        "custom", "custom peaks", peaks, bandwidth, 0.0, source)
