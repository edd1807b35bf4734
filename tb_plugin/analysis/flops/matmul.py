"""The matmul family: 2 FLOPs per multiply-add, 2·batch·M·N·K; ``addmm``/``baddbmm`` count their GEMM only (as
``torch.utils.flop_counter``); bytes: the tensor inputs and the output."""

from __future__ import annotations

from collections.abc import Callable

from .call import Call, Work, fmt, numel


def _gemm(c: Call, batch: int, m: int, n: int, k: int, extra_bytes: float, what: str) -> Work | None:
    """2·batch·M·N·K; bytes: the tensor inputs + the output (batch·M·N of the first input's dtype)."""
    dtype = c.dtype(c.tensors()[0]) if c.tensors() else None
    if dtype is None or min(batch, m, n, k) < 0:
        return None
    size = c.itemsize(c.tensors()[0])
    flops = 2.0 * batch * m * n * k
    dims = f"B={fmt(batch)} " if batch != 1 else ""
    return Work(flops, c.input_bytes() + batch * m * n * size + extra_bytes, dtype, "matmul",
                f"{what} {dims}M={fmt(m)} N={fmt(n)} K={fmt(k)}")


def mm(c: Call, a: int = 0, b: int = 1) -> Work | None:
    x, y = c.shape(a), c.shape(b)
    if x is None or y is None or len(x) != 2 or len(y) != 2 or x[1] != y[0]:
        return None
    return _gemm(c, 1, x[0], y[1], x[1], 0.0, "2·M·N·K,")


def bmm(c: Call, a: int = 0, b: int = 1) -> Work | None:
    x, y = c.shape(a), c.shape(b)
    if x is None or y is None or len(x) != 3 or len(y) != 3 or x[2] != y[1] or x[0] != y[0]:
        return None
    return _gemm(c, x[0], x[1], y[2], x[2], 0.0, "2·B·M·N·K,")


def addbmm(c: Call) -> Work | None:
    x, y = c.shape(1), c.shape(2)
    if x is None or y is None or len(x) != 3 or len(y) != 3 or x[2] != y[1] or x[0] != y[0]:
        return None
    return _gemm(c, x[0], x[1], y[2], x[2], -(x[0] - 1) * x[1] * y[2] * c.itemsize(1), "2·B·M·N·K (summed over B),")


def matmul(c: Call) -> Work | None:
    """torch.matmul: 1-D operands are a row or a column; leading dims broadcast into a batch."""
    x, y = c.shape(0), c.shape(1)
    if x is None or y is None or not x or not y:
        return None
    xs, ys = (x if len(x) > 1 else [1, x[0]]), (y if len(y) > 1 else [y[0], 1])
    if xs[-1] != ys[-2]:
        return None
    lead_x, lead_y = xs[:-2], ys[:-2]
    width = max(len(lead_x), len(lead_y))
    lead_x, lead_y = [1] * (width - len(lead_x)) + lead_x, [1] * (width - len(lead_y)) + lead_y
    if any(p != q and 1 not in (p, q) for p, q in zip(lead_x, lead_y)):
        return None
    batch = numel([max(p, q) for p, q in zip(lead_x, lead_y)])
    return _gemm(c, batch, xs[-2], ys[-1], xs[-1], 0.0, "2·batch·M·N·K,")


def linear(c: Call) -> Work | None:
    x, w = c.shape(0), c.shape(1)
    if x is None or w is None or not x or len(w) != 2 or x[-1] != w[1]:
        return None
    return _gemm(c, 1, numel(x[:-1]), w[0], w[1], 0.0, "2·M·N·K (M = the input's rows),")


def mv(c: Call, a: int = 0, v: int = 1) -> Work | None:
    x, y = c.shape(a), c.shape(v)
    if x is None or y is None or len(x) != 2 or len(y) != 1 or x[1] != y[0]:
        return None
    return _gemm(c, 1, x[0], 1, x[1], 0.0, "2·M·K (matrix·vector),")


def dot(c: Call) -> Work | None:
    x = c.shape(0)
    if x is None or len(x) != 1:
        return None
    return _gemm(c, 1, 1, 1, x[0], 0.0, "2·K (dot product),")


def grouped_mm(c: Call) -> Work | None:
    """``_grouped_mm``: 3-D × 3-D is a batch of GEMMs; 2-D tokens × 3-D experts sends each token to one group."""
    x, y = c.shape(0), c.shape(1)
    if x is None or y is None:
        return None
    if len(x) == 3 and len(y) == 3 and x[2] == y[1]:
        return _gemm(c, x[0], x[1], y[2], x[2], 0.0, "2·G·M·N·K,")
    if len(x) == 2 and len(y) == 3 and x[1] == y[1]:
        return _gemm(c, 1, x[0], y[2], x[1], 0.0, "2·T·N·K (each token in one group),")
    if len(x) == 2 and len(y) == 2 and x[1] == y[0]:
        return _gemm(c, 1, x[0], y[1], x[1], 0.0, "2·M·N·K (groups along K),")
    return None


MATMUL: dict[str, Callable[[Call], Work | None]] = {
    "mm": mm, "addmm": lambda c: mm(c, 1, 2), "_addmm_activation": lambda c: mm(c, 1, 2),
    "bmm": bmm, "baddbmm": lambda c: bmm(c, 1, 2), "addbmm": addbmm, "matmul": matmul, "linear": linear,
    "mv": mv, "addmv": lambda c: mv(c, 1, 2), "dot": dot, "vdot": dot, "_scaled_mm": mm,
    "_grouped_mm": grouped_mm, "_scaled_grouped_mm": grouped_mm, "_int_mm": mm,
}
