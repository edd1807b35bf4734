"""FLOPs and bytes of one operator call from its recorded shapes, dtypes and scalar arguments (``record_shapes``).

``estimate(name, dims, types, concrete)`` takes the raw ``Input Dims`` / ``Input type`` / ``Concrete Inputs`` texts
of one call and answers its :class:`Work`, or None where no formula applies (an unknown operator, a shape the
formula cannot read, a convolution whose stride PyTorch < 2.0 did not record). One module per family:
``matmul``, ``conv``, ``attention``, ``pointwise`` (element-wise, reductions, normalisations, copies); Triton
kernels launched by Inductor (``triton_*`` operators) are read here. ``analysis/work.py`` applies this to a trace.
"""

from __future__ import annotations

from collections.abc import Callable

from .attention import ATTENTION
from .call import HEAVY_FAMILIES, Call, Work, fmt, numel
from .conv import CONVOLUTION
from .matmul import MATMUL
from .pointwise import POINTWISE

__all__ = ["HEAVY_FAMILIES", "Call", "Work", "estimate", "known", "triton"]

FORMULAS: dict[str, Callable[[Call], Work | None]] = {**POINTWISE, **MATMUL, **CONVOLUTION, **ATTENTION}


def _bare(name: str) -> str:
    return name[6:] if name.startswith("aten::") else name


def known(name: str) -> bool:
    """Whether ``estimate`` has a formula for operators of this name (to skip the others before parsing)."""
    return _bare(name) in FORMULAS or name.startswith("triton_")


def estimate(name: str, dims: str | None, types: str | None, concrete: str | None) -> Work | None:
    if name.startswith("triton_"):
        return triton(Call.parse(name, dims, types, concrete))
    formula = FORMULAS.get(_bare(name))
    if formula is None:
        return None
    try:
        return formula(Call.parse(_bare(name), dims, types, concrete))
    except (ArithmeticError, TypeError, ValueError, IndexError):  # a shape a formula cannot read is no estimate
        return None


def triton(c: Call) -> Work | None:
    """An Inductor-generated Triton kernel (its launching ``triton_*`` operator lists the kernel's tensor arguments):
    bytes, each tensor argument read or written once; FLOPs of a matmul template (``triton_tem_*mm*``: 2·M·N·K of its
    first two arguments), else one per element of the largest argument (a lower bound: the fused body is not in
    the trace). ``kernel_flop`` / ``kernel_num_gb`` args, where Inductor wrote them, replace both (``work.py``)."""
    tensors = c.tensors()
    if not tensors:
        return None
    moved = c.input_bytes()
    first = tensors[0]
    if c.name.startswith("triton_tem_") and "mm" in c.name and len(tensors) >= 2:
        a, b = c.shape(tensors[0]), c.shape(tensors[1])
        if a is not None and b is not None and len(a) == len(b) >= 2 and a[-1] == b[-2]:
            batch = numel(a[:-2])
            flops = 2.0 * batch * a[-2] * b[-1] * a[-1]
            return Work(flops, moved, c.dtype(first) or "?", "matmul",
                        f"Triton matmul template: 2·M·N·K, M={fmt(a[-2])} N={fmt(b[-1])} K={fmt(a[-1])}"
                        + (f" ×{fmt(batch)}" if batch != 1 else "") + "; bytes: its tensor arguments")
    largest = max(numel(c.shape(i) or []) for i in tensors)
    big = max(tensors, key=lambda i: numel(c.shape(i) or []))
    return Work(float(largest), moved, c.dtype(big) or "?", "fused",
                f"Triton kernel: bytes of its {len(tensors)} tensor arguments; FLOPs ≥ 1 per element of the "
                f"largest ({fmt(largest)})")
