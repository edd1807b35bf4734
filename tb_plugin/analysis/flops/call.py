"""One recorded operator call (``Call``: what ``record_shapes=True`` writes of it, input shapes ``Input Dims``, dtypes
``Input type`` and the values of scalar arguments ``Concrete Inputs``: stride, padding, groups, ``is_causal``...)
and what it does (``Work``: FLOPs, bytes, dtype, family, how). The formulas live beside it, one module per family;
``analysis/work.py`` applies them to a trace without double counting.

Conventions (docs/guide/roofline.md lists every formula), the same as ``torch.utils.flop_counter`` where it has one:
- a multiply-add is 2 FLOPs: a GEMM (M×K)·(K×N) is 2·M·N·K; ``addmm``/``baddbmm`` count their GEMM only;
- a convolution is 2 · N · (output positions) · (weight elements), the output size from the input, stride, padding
  and dilation (transposed: the input positions); its backward 2 × that per gradient asked for (``output_mask``);
- attention is 2·B·H·(query-key pairs)·(D + Dv) forward (Q·Kᵀ and P·V), the pairs halved by a causal mask (exactly:
  query i sees i + 1 keys from the top left, or Sk − Sq more from the bottom right); backward is 2 × forward
  (FlashAttention's recomputation of Q·Kᵀ is not model work and not counted);
- element-wise and reduction operators: FLOPs per element (``ELEMENTWISE``) × the elements of the output (input for
  reductions); copies and casts move bytes and do no FLOPs.
Bytes are the tensor inputs read plus the outputs written, once each (caches and re-reads not modelled): a lower
bound on the traffic, as the roofline needs it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

# ``Input type`` → (dtype class, bytes per element); lowercased. Classes name the device peaks (``device_peaks``).
DTYPES: dict[str, tuple[str, float]] = {
    "float": ("fp32", 4), "double": ("fp64", 8), "c10::half": ("fp16", 2), "c10::bfloat16": ("bf16", 2),
    "c10::float8_e4m3fn": ("fp8", 1), "c10::float8_e5m2": ("fp8", 1), "c10::float8_e4m3fnuz": ("fp8", 1),
    "c10::float8_e5m2fnuz": ("fp8", 1), "c10::float8_e8m0fnu": ("fp8", 1), "c10::float4_e2m1fn_x2": ("fp4", 1),
    "long int": ("int64", 8), "long": ("int64", 8), "int": ("int32", 4), "short int": ("int16", 2),
    "short": ("int16", 2), "signed char": ("int8", 1), "unsigned char": ("uint8", 1), "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8), "c10::complex<double>": ("complex128", 16),
    "c10::complex<c10::half>": ("complex32", 4),
}
# torch.ScalarType numbers (a ``dtype`` argument's concrete value) → element size
SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1}
HEAVY_FAMILIES = ("matmul", "convolution", "attention")


@dataclass(frozen=True)
class Work:
    """What one call does: FLOPs, bytes (inputs read + outputs written), the dtype class of its inputs, its family
    (``matmul``, ``convolution``, ``attention`` are *heavy*: they count over light work nested inside them), and how
    the figures were derived (one line, with the numbers)."""

    flops: float
    bytes: float
    dtype: str
    family: str
    how: str

    @property
    def heavy(self) -> bool:
        return self.family in HEAVY_FAMILIES


class Call:
    """One recorded call: its parsed ``Input Dims``, ``Input type`` and ``Concrete Inputs`` (all optional)."""

    def __init__(self, name: str, dims: Any, types: Any, concrete: Any) -> None:
        self.name = name
        self.dims: list[Any] = dims if isinstance(dims, list) else []
        self.types: list[Any] = types if isinstance(types, list) else []
        self.concrete: list[Any] = concrete if isinstance(concrete, list) else []

    @classmethod
    def parse(cls, name: str, dims: str | None, types: str | None, concrete: str | None) -> Call:
        return cls(name, _json(dims), _json(types), _json(concrete))

    def shape(self, i: int) -> list[int] | None:
        """The shape of tensor input ``i`` (a scalar tensor is ``[]``), None where input ``i`` is not a tensor."""
        if i >= len(self.dims) or not isinstance(self.dims[i], list) or self.dtype(i) is None:
            return None
        shape = self.dims[i]
        return shape if all(isinstance(d, int) and d >= 0 for d in shape) else None

    def dtype(self, i: int) -> str | None:
        info = DTYPES.get(str(self.types[i]).lower()) if i < len(self.types) else None
        return info[0] if info else None

    def itemsize(self, i: int) -> float:
        info = DTYPES.get(str(self.types[i]).lower()) if i < len(self.types) else None
        return info[1] if info else 0.0

    def nbytes(self, i: int) -> float:
        shape = self.shape(i)
        return 0.0 if shape is None else numel(shape) * self.itemsize(i)

    def tensors(self) -> list[int]:
        return [i for i in range(len(self.dims)) if self.shape(i) is not None]

    def input_bytes(self) -> float:
        return sum(self.nbytes(i) for i in self.tensors())

    def value(self, i: int) -> Any:
        """The concrete value of argument ``i``: an int, float, bool, a list of ints, a string, or None."""
        if i >= len(self.concrete):
            return None
        return _scalar(str(self.concrete[i]).strip())

    def ints(self, i: int, n: int, default: int) -> list[int] | None:
        """An int-list argument of ``n`` spatial dims (a single value repeats); ``default`` where not recorded,
        None where recorded but not ints."""
        v = self.value(i)
        if v is None:
            return [default] * n
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            return [v] * n
        if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
            return v * n if len(v) == 1 else (v if len(v) == n else None)
        return None

    def flag(self, i: int) -> bool | None:
        v = self.value(i)
        return v if isinstance(v, bool) else None


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None


def _scalar(text: str) -> Any:
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    if text.startswith("["):
        inner = [t.strip() for t in text[1:-1].split(",") if t.strip()]
        values = [_scalar(t) for t in inner]
        return values if all(isinstance(v, (int, bool)) for v in values) else None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text.strip("'\"")


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def fmt(n: float) -> str:
    return f"{int(n):,}" if float(n).is_integer() else f"{n:,.3g}"
