"""Element-wise operators, reductions, normalisations, copies and embeddings: FLOPs per element × elements, bytes
from the tensors read and written. Their FLOPs are a convention (docs/guide/roofline.md): one per arithmetic step,
a transcendental (exp, log, tanh, erf) counting one; they matter for the roofline's bytes far more than for the
model's FLOPs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from .call import Call, Work, fmt, numel

# FLOPs per output element. In-place variants (``add_``) share their operator's entry.
ELEMENTWISE: dict[str, float] = {
    **dict.fromkeys((
        "add", "sub", "rsub", "mul", "div", "neg", "abs", "relu", "relu6", "sign", "sgn", "floor", "ceil", "round",
        "trunc", "frac", "reciprocal", "sqrt", "rsqrt", "square", "exp", "exp2", "expm1", "log", "log2", "log10",
        "log1p", "sin", "cos", "tan", "tanh", "erf", "erfc", "erfinv", "pow", "clamp", "clamp_min", "clamp_max",
        "clip", "hardtanh", "leaky_relu", "threshold", "threshold_backward", "where", "masked_fill", "maximum",
        "minimum", "fmax", "fmin", "remainder", "fmod", "eq", "ne", "lt", "le", "gt", "ge", "logical_not",
        "logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "isnan", "isinf",
        "nan_to_num", "hardsigmoid", "hardswish", "relu_backward", "scalar_tensor"), 1.0),
    **dict.fromkeys(("addcmul", "addcdiv", "lerp", "hardtanh_backward", "leaky_relu_backward"), 3.0),
    **dict.fromkeys(("sigmoid", "silu", "gelu", "elu", "selu", "celu", "softplus", "mish", "logsigmoid"), 4.0),
    **dict.fromkeys(("sigmoid_backward", "tanh_backward", "silu_backward", "gelu_backward", "elu_backward",
                     "softplus_backward", "mish_backward", "hardswish_backward", "hardsigmoid_backward"), 5.0),
    **dict.fromkeys(("native_dropout", "dropout", "native_dropout_backward", "bernoulli", "uniform", "normal"), 2.0),
}
# FLOPs per *input* element; the output is smaller (``dim``: concrete argument 1, or all dims).
REDUCTIONS: dict[str, float] = {
    **dict.fromkeys(("sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "any", "all",
                     "nansum", "count_nonzero", "cumsum", "cumprod"), 1.0),
    **dict.fromkeys(("norm", "linalg_vector_norm", "logsumexp"), 2.0),
    **dict.fromkeys(("var", "std", "var_mean", "std_mean"), 3.0),
}
# Softmax, normalisations and losses over their first input: FLOPs per element, output = input shape.
ROWWISE: dict[str, float] = {
    "_softmax": 5.0, "_log_softmax": 5.0, "_softmax_backward_data": 4.0, "_log_softmax_backward_data": 4.0,
    "native_layer_norm": 8.0, "native_layer_norm_backward": 12.0, "native_batch_norm": 8.0,
    "_native_batch_norm_legit": 8.0, "_native_batch_norm_legit_no_training": 4.0, "cudnn_batch_norm": 8.0,
    "native_batch_norm_backward": 12.0, "cudnn_batch_norm_backward": 12.0, "miopen_batch_norm": 8.0,
    "native_group_norm": 8.0, "native_group_norm_backward": 12.0, "_fused_rms_norm": 4.0, "rms_norm": 4.0,
    "_fused_rms_norm_backward": 8.0, "nll_loss_forward": 1.0, "nll_loss2d_forward": 1.0, "mse_loss": 3.0,
    "mse_loss_backward": 3.0, "binary_cross_entropy": 4.0, "binary_cross_entropy_with_logits": 6.0,
    "smooth_l1_loss": 4.0, "l1_loss": 2.0,
}
COPIES = ("copy_", "_to_copy", "clone", "contiguous", "fill_", "zero_", "zeros_like", "ones_like", "masked_select",
          "_copy_from", "_copy_from_and_resize", "repeat", "flip", "roll", "tril", "triu", "constant_pad_nd")


def _broadcast(shapes: list[list[int]]) -> list[int] | None:
    width = max((len(s) for s in shapes), default=0)
    out = [1] * width
    for s in shapes:
        for i, d in enumerate([1] * (width - len(s)) + s):
            if d != 1 and out[i] not in (1, d):
                return None
            out[i] = max(out[i], d) if d != 1 else out[i]
    return out


def elementwise(c: Call, per: float) -> Work | None:
    shapes = [c.shape(i) for i in c.tensors()]
    out = _broadcast([s for s in shapes if s is not None])
    if out is None or not c.tensors():
        return None
    first = c.tensors()[0]
    n = numel(out)
    written = n * c.itemsize(first)
    return Work(per * n, c.input_bytes() + written, c.dtype(first) or "?", "elementwise",
                f"{fmt(per)} FLOP{'s' if per != 1 else ''} per element × {fmt(n)} elements")


def reduction(c: Call, per: float) -> Work | None:
    x = c.shape(0)
    if x is None or c.dtype(0) is None:
        return None
    dims = c.value(1)
    dims = [dims] if isinstance(dims, int) and not isinstance(dims, bool) else dims
    keep = ([d for i, d in enumerate(x) if i not in {k % max(len(x), 1) for k in dims}]
            if isinstance(dims, list) and dims else [])
    n = numel(x)
    return Work(per * n, c.input_bytes() + numel(keep) * c.itemsize(0), c.dtype(0) or "?", "reduction",
                f"{fmt(per)} FLOP{'s' if per != 1 else ''} per input element × {fmt(n)} elements")


def rowwise(c: Call, per: float) -> Work | None:
    x = c.shape(0)
    if x is None or c.dtype(0) is None:
        return None
    n = numel(x)
    return Work(per * n, c.input_bytes() + n * c.itemsize(0), c.dtype(0) or "?", "normalization",
                f"{fmt(per)} FLOPs per element × {fmt(n)} elements")


def copy(c: Call) -> Work | None:
    """A copy or a cast: no FLOPs; bytes: the source read and the destination written (``copy_(dst, src)`` names
    both; a cast's output has the element size of its ``dtype`` argument)."""
    tensors = c.tensors()
    if not tensors:
        return None
    first = tensors[0]
    n = numel(c.shape(first) or [])
    if c.name == "copy_" and len(tensors) >= 2:
        moved = c.nbytes(tensors[0]) + c.nbytes(tensors[1])
    elif c.name in ("fill_", "zero_"):
        moved = c.nbytes(first)
    elif c.name == "_to_copy":
        from .call import SCALAR_TYPE_BYTES
        code = c.value(1)
        moved = n * (c.itemsize(first) + SCALAR_TYPE_BYTES.get(code, c.itemsize(first)) if isinstance(code, int)
                     else 2 * c.itemsize(first))
    else:
        moved = 2 * c.nbytes(first)
    return Work(0.0, float(moved), c.dtype(first) or "?", "copy", f"no FLOPs; {fmt(n)} elements read and written")


def gather(c: Call) -> Work | None:
    """``gather(self, dim, index)`` / ``index_select(self, dim, index)``: the elements picked are read and written
    once (the output has the index's shape, or the input's with ``dim`` cut to the index's length)."""
    x, idx, dim = c.shape(0), c.shape(2), c.value(1)
    if x is None or idx is None or not isinstance(dim, int) or not x:
        return None
    if c.name == "index_select":
        out = list(x)
        out[dim % len(x)] = numel(idx)
        n = numel(out)
    else:
        n = numel(idx)
    return Work(0.0, c.nbytes(2) + 2 * n * c.itemsize(0), c.dtype(0) or "?", "copy",
                f"no FLOPs; {fmt(n)} elements picked, read and written")


def embedding(c: Call) -> Work | None:
    """``embedding(weight, indices)``: one row of the table read per index, written to the output."""
    w, idx = c.shape(0), c.shape(1)
    if w is None or idx is None or len(w) != 2:
        return None
    rows = numel(idx)
    return Work(0.0, c.nbytes(1) + 2 * rows * w[1] * c.itemsize(0), c.dtype(0) or "?", "copy",
                f"no FLOPs; {fmt(rows)} rows of {w[1]} gathered")


def embedding_backward(c: Call) -> Work | None:
    """``embedding_dense_backward(grad, indices, num_weights, ...)``: each gradient row added into the table."""
    g, vocab = c.shape(0), c.value(2)
    if g is None or not g or not isinstance(vocab, int):
        return None
    return Work(float(numel(g)), c.input_bytes() + vocab * g[-1] * c.itemsize(0), c.dtype(0) or "?", "reduction",
                f"1 FLOP per gradient element × {fmt(numel(g))} (rows summed into a {vocab}×{g[-1]} table)")


def _apply(fn: Callable[[Call, float], Work | None], per: float, c: Call) -> Work | None:
    return fn(c, per)


def _family(table: dict[str, float], fn: Callable[[Call, float], Work | None],
            inplace: bool) -> dict[str, Callable[[Call], Work | None]]:
    out: dict[str, Callable[[Call], Work | None]] = {}
    for name, per in table.items():
        out[name] = partial(_apply, fn, per)
        if inplace:
            out[name + "_"] = out[name]
    return out


POINTWISE: dict[str, Callable[[Call], Work | None]] = {
    **_family(ELEMENTWISE, elementwise, True), **_family(REDUCTIONS, reduction, False),
    **_family(ROWWISE, rowwise, False), **dict.fromkeys(COPIES, copy),
    "embedding": embedding, "embedding_dense_backward": embedding_backward, "gather": gather, "index_select": gather,
}
