"""Attention (``scaled_dot_product_attention`` and its flash, memory-efficient and cuDNN kernels, forward and
backward): Q·Kᵀ and P·V are 2·B·H·(query-key pairs)·D and 2·B·H·(pairs)·Dv FLOPs; the pairs are Sq·Sk, or under a
causal mask those with key ≤ query: query i sees i + 1 keys aligned at the top left (``is_causal`` of SDPA), or
Sk − Sq more aligned at the bottom right (FlashAttention's own ``_flash_attention_*``, xformers' mask type 2).
Backward: 2 × forward (dQ, dK from dS; dV, dP from dO), as ``torch.utils.flop_counter``; the softmax is not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from .call import Call, Work, fmt, numel


@dataclass(frozen=True)
class AttentionArgs:
    q: int  # positions of query, key, value in the schema
    causal: int  # position of ``is_causal`` (or xformers' ``custom_mask_type``)
    backward: bool = False
    seq_first: bool = False  # [B, S, H, D] (flash / xformers entry points) instead of SDPA's [B, H, S, D]
    mask_type: bool = False  # ``custom_mask_type``: 0 none, 1 causal from the top left, 2 from the bottom right
    bottom_right: bool = False  # ``is_causal`` means bottom-right alignment


SCHEMAS: dict[str, AttentionArgs] = {
    "scaled_dot_product_attention": AttentionArgs(0, 5),
    "_scaled_dot_product_attention_math": AttentionArgs(0, 5),
    "_scaled_dot_product_flash_attention": AttentionArgs(0, 4),
    "_scaled_dot_product_flash_attention_for_cpu": AttentionArgs(0, 4),
    "_scaled_dot_product_efficient_attention": AttentionArgs(0, 6),
    "_scaled_dot_product_cudnn_attention": AttentionArgs(0, 6),
    "_scaled_dot_product_fused_attention_overrideable": AttentionArgs(0, 5),
    "_cudnn_attention_forward": AttentionArgs(0, 10),
    "_flash_attention_forward": AttentionArgs(0, 8, seq_first=True, bottom_right=True),
    "_efficient_attention_forward": AttentionArgs(0, 9, seq_first=True, mask_type=True),
    "_scaled_dot_product_flash_attention_backward": AttentionArgs(1, 11, backward=True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": AttentionArgs(1, 7, backward=True),
    "_scaled_dot_product_efficient_attention_backward": AttentionArgs(1, 11, backward=True),
    "_scaled_dot_product_cudnn_attention_backward": AttentionArgs(1, 14, backward=True),
    "_cudnn_attention_backward": AttentionArgs(1, 14, backward=True),
    "_flash_attention_backward": AttentionArgs(1, 11, backward=True, seq_first=True, bottom_right=True),
    "_efficient_attention_backward": AttentionArgs(1, 14, backward=True, seq_first=True, mask_type=True),
}


def _clipped_sum(first: int, count: int, top: int) -> int:
    """Σ clip(first + i, 0, top) for i in [0, count)."""
    total = 0
    lo, hi = first, first + count - 1  # values first .. hi
    # values ≤ 0 add nothing; values in [1, top] add themselves; values > top add top
    a, b = max(lo, 1), min(hi, top)
    if a <= b:
        total += (a + b) * (b - a + 1) // 2
    above = hi - max(lo, top + 1) + 1
    if above > 0:
        total += above * top
    return total


def pairs(sq: int, sk: int, causal: str) -> int:
    """Query-key pairs attended: all (``none``), or key j ≤ query i from the ``top_left`` or the ``bottom_right``."""
    if causal == "none":
        return sq * sk
    offset = 0 if causal == "top_left" else sk - sq
    return _clipped_sum(1 + offset, sq, sk)


def _mask(c: Call, args: AttentionArgs) -> str | None:
    v = c.value(args.causal)
    if args.mask_type:
        return {0: "none", 1: "top_left", 2: "bottom_right"}.get(v) if isinstance(v, int) else "none"
    if v is None:
        return "none"
    if not isinstance(v, bool):
        return None
    return ("bottom_right" if args.bottom_right else "top_left") if v else "none"


def attention(c: Call, args: AttentionArgs) -> Work | None:
    q, k, v = c.shape(args.q), c.shape(args.q + 1), c.shape(args.q + 2)
    if q is None or k is None or v is None or len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None  # variable-length (packed 3-D) batches: the sequence lengths are not recorded
    if args.seq_first:
        (b, sq, h, d), (_, sk, _, _), (_, _, _, dv) = q, k, v
    else:
        (b, h, sq, d), (_, _, sk, _), (_, _, _, dv) = q, k, v
    causal = _mask(c, args)
    if causal is None:
        return None
    n = pairs(sq, sk, causal)
    forward = 2.0 * b * h * n * (d + dv)
    flops = 2 * forward if args.backward else forward
    size = c.itemsize(args.q)
    written = (numel(q) + numel(k) + numel(v)) if args.backward else b * h * sq * dv
    mask_text = {"none": "no mask", "top_left": "causal (top left)", "bottom_right": "causal (bottom right)"}[causal]
    return Work(flops, c.input_bytes() + written * size, c.dtype(args.q) or "?", "attention",
                f"{'2 × ' if args.backward else ''}2·B·H·pairs·(D+Dv): B={b} H={h} Sq={fmt(sq)} Sk={fmt(sk)} "
                f"D={d} Dv={dv}, {mask_text}: {fmt(n)} pairs")


def _with_args(args: AttentionArgs, c: Call) -> Work | None:
    return attention(c, args)


ATTENTION: dict[str, Callable[[Call], Work | None]] = {
    name: partial(_with_args, args) for name, args in SCHEMAS.items()}
