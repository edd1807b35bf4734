"""Convolutions: 2 · N · (output positions) · (weight elements), the output positions from the input size, stride,
padding and dilation (``Concrete Inputs``); transposed, 2 · N · (input positions) · (weight elements). The weight
shape already holds ``Cin / groups`` (or ``Cout / groups`` transposed), so groups need no term of their own. The
backward costs the forward once per gradient asked for (input, weight: ``output_mask``), its output positions read
from the gradient's shape (no stride needed), plus one FLOP per gradient element for the bias.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from .call import Call, Work, fmt, numel


@dataclass(frozen=True)
class ConvArgs:
    """Positions of the arguments in each convolution operator's schema (-1: not an argument of it)."""

    stride: int
    padding: int
    dilation: int
    groups: int
    transposed: int = -1  # position of a ``transposed`` flag; -1 with ``always_transposed`` deciding
    output_padding: int = -1
    always_transposed: bool = False
    kernel_size: int = -1  # ``_slow_conv2d_forward``: no dilation, kernel size given


SCHEMAS: dict[str, ConvArgs] = {
    "convolution": ConvArgs(3, 4, 5, 8, transposed=6, output_padding=7),
    "_convolution": ConvArgs(3, 4, 5, 8, transposed=6, output_padding=7),
    "convolution_overrideable": ConvArgs(3, 4, 5, 8, transposed=6, output_padding=7),
    "conv1d": ConvArgs(3, 4, 5, 6), "conv2d": ConvArgs(3, 4, 5, 6), "conv3d": ConvArgs(3, 4, 5, 6),
    "_convolution_mode": ConvArgs(3, 4, 5, 6),
    "conv_transpose1d": ConvArgs(3, 4, 7, 6, output_padding=5, always_transposed=True),
    "conv_transpose2d": ConvArgs(3, 4, 7, 6, output_padding=5, always_transposed=True),
    "conv_transpose3d": ConvArgs(3, 4, 7, 6, output_padding=5, always_transposed=True),
    "cudnn_convolution": ConvArgs(3, 2, 4, 5),
    "cudnn_convolution_transpose": ConvArgs(4, 2, 5, 6, output_padding=3, always_transposed=True),
    "mkldnn_convolution": ConvArgs(4, 3, 5, 6),
    "miopen_convolution": ConvArgs(4, 3, 5, 6),
    "miopen_depthwise_convolution": ConvArgs(4, 3, 5, 6),
    "miopen_convolution_transpose": ConvArgs(5, 3, 6, 7, output_padding=4, always_transposed=True),
    "_slow_conv2d_forward": ConvArgs(4, 5, -1, -1, kernel_size=2),
    "thnn_conv2d": ConvArgs(4, 5, -1, -1, kernel_size=2),
    "slow_conv_transpose2d": ConvArgs(4, 5, 7, -1, output_padding=6, always_transposed=True, kernel_size=2),
}


def output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def transposed_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int, extra: int) -> int:
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + extra + 1


def _is_transposed(c: Call, args: ConvArgs) -> bool | None:
    if args.always_transposed:
        return True
    if args.transposed < 0:
        return False
    flag = c.flag(args.transposed)
    return False if flag is None and c.value(args.transposed) is None else flag


def _output(c: Call, args: ConvArgs, x: list[int], w: list[int], transposed: bool) -> list[int] | None:
    """The output's spatial size, or None when the trace lacks the stride (PyTorch < 2.0 wrote no scalars)."""
    n = len(x) - 2
    if args.kernel_size < 0 and n > 0 and c.value(args.stride) is None and len(c.concrete) <= args.stride:
        return None
    stride = c.ints(args.stride, n, 1)
    dilation = c.ints(args.dilation, n, 1) if args.dilation >= 0 else [1] * n
    extra = c.ints(args.output_padding, n, 0) if args.output_padding >= 0 else [0] * n
    pad_value = c.value(args.padding)
    if isinstance(pad_value, str):  # conv2d(padding="same" | "valid")
        if pad_value == "same":
            return [-(-size // s) for size, s in zip(x[2:], stride or [1] * n)]
        padding: list[int] | None = [0] * n
    else:
        padding = c.ints(args.padding, n, 0)
    if stride is None or padding is None or dilation is None or extra is None:
        return None
    kernel = w[2:]
    if transposed:
        return [transposed_output_size(*t) for t in zip(x[2:], kernel, stride, padding, dilation, extra)]
    return [output_size(*t) for t in zip(x[2:], kernel, stride, padding, dilation)]


def convolution(c: Call, args: ConvArgs) -> Work | None:
    x, w = c.shape(0), c.shape(1)
    if x is None or w is None or len(x) < 3 or len(w) != len(x):
        return None
    transposed = _is_transposed(c, args)
    if transposed is None:
        return None
    out = _output(c, args, x, w, transposed)
    if out is None or min(out, default=1) <= 0:
        return None
    positions = numel(x[2:]) if transposed else numel(out)
    flops = 2.0 * x[0] * positions * numel(w)
    channels = w[1] * _groups(c, args, x, w) if transposed else w[0]
    out_shape = [x[0], channels, *out]
    size = c.itemsize(0)
    what = "input" if transposed else "output"
    spatial = "×".join(map(str, x[2:] if transposed else out))
    return Work(flops, c.input_bytes() + numel(out_shape) * size, c.dtype(0) or "?", "convolution",
                f"2·N·({what} positions)·(weight elements): N={x[0]}, {what} {spatial}, "
                f"weight {'×'.join(map(str, w))} → output {'×'.join(map(str, out_shape))}")


def _groups(c: Call, args: ConvArgs, x: list[int], w: list[int]) -> int:
    g = c.value(args.groups) if args.groups >= 0 else None
    return g if isinstance(g, int) and not isinstance(g, bool) and g > 0 else 1


def convolution_backward(c: Call) -> Work | None:
    """``convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask)``: no stride needed, the output positions are the gradient's."""
    return _backward(c, grad=0, inp=1, weight=2, transposed=c.flag(7) or False, mask=c.value(10))


def cudnn_convolution_backward(c: Call) -> Work | None:
    """PyTorch 1.x ``cudnn_convolution_backward(input, grad_output, weight, padding, stride, dilation, groups, ...,
    output_mask)``; the mask was not recorded there: both gradients are assumed (the usual training case)."""
    return _backward(c, grad=1, inp=0, weight=2, transposed=False, mask=c.value(10))


def _backward(c: Call, grad: int, inp: int, weight: int, transposed: bool, mask: object) -> Work | None:
    g, x, w = c.shape(grad), c.shape(inp), c.shape(weight)
    if g is None or x is None or w is None or len(g) < 3 or len(x) != len(g) or len(w) != len(g):
        return None
    flags = mask if isinstance(mask, list) and len(mask) == 3 else [True, True, False]
    passes = int(bool(flags[0])) + int(bool(flags[1]))
    positions = numel(x[2:]) if transposed else numel(g[2:])
    flops = passes * 2.0 * g[0] * positions * numel(w) + (numel(g) if flags[2] else 0)
    size = c.itemsize(grad)
    written = (numel(x) if flags[0] else 0) + (numel(w) if flags[1] else 0) + (g[1] if flags[2] else 0)
    asked = ", ".join(n for n, f in zip(("input", "weight", "bias"), flags) if f)
    return Work(flops, c.input_bytes() + written * size, c.dtype(grad) or "?", "convolution",
                f"{passes} × 2·N·(output positions)·(weight elements) for the {asked} gradient(s): N={g[0]}, output "
                f"{'×'.join(map(str, g[2:]))}, weight {'×'.join(map(str, w))}"
                + (f" + {fmt(numel(g))} for the bias" if flags[2] else ""))


def _with_args(args: ConvArgs, c: Call) -> Work | None:
    return convolution(c, args)


CONVOLUTION: dict[str, Callable[[Call], Work | None]] = {
    **{name: partial(_with_args, args) for name, args in SCHEMAS.items()},
    "convolution_backward": convolution_backward,
    "cudnn_convolution_backward": cudnn_convolution_backward,
}
