"""FLOPs and bytes per operator call and per kernel, from what the trace holds (docs/guide/roofline.md).

Per operator call (host-tree node): the trace's own figures where it wrote them (``flops``, with
``with_flops=True``; ``kernel_flop`` / ``kernel_num_gb``, where Inductor or torch's ``profile_analysis`` wrote them),
else the formulas of :mod:`.flops` over the recorded shapes, dtypes and scalar arguments. Operators nest
(``aten::linear`` → ``aten::addmm``; ``MmBackward0`` → two ``aten::mm``), so each FLOP is counted once:

- a matmul, convolution or attention call (*heavy*) counts unless a heavy call inside it has an estimate: the inner
  one sees the dtypes autocast chose and is the one that launched the work;
- any other call counts unless a call inside it has an estimate, or a counted heavy call holds it (a heavy formula
  covers the softmax of an attention, the bias of a convolution).

A kernel gets the work of the counted call at or above its launching operator, split among that call's kernels by
duration: its bytes among all of them, a matmul's, convolution's or attention's FLOPs among its compute kernels
(tensor-core kernels, or GEMM/convolution kernels by name: ``COMPUTE_KERNEL``) where it has any, so a layout
transform cuDNN runs beside a convolution (``nchwToNhwcKernel``) takes bytes and no FLOPs. A kernel's own
``kernel_flop`` / ``kernel_num_gb`` args replace its share. Each kernel also gets the
*roof* it is held to: a tensor-core class (``tf32``, ``bf16``, ``fp16``, ``fp8``, ``fp64_tensor``) where it runs on
tensor cores, else the CUDA-core ``fp32`` (``fp64`` for doubles).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..model.arrays import group_rows, take, unique_ints
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.lookups import side_row
from ..model.optree import HostTree, host_tree
from ..model.tables import TraceModel
from . import flops as formulas
from .tensor_cores import kernel_says_cuda_cores, op_is_tensor_core_eligible, tensor_core_mask

SOURCES = ("shapes", "trace flops", "trace kernel_flop", "kernel args")
SOURCE_TEXT = {
    "shapes": "estimated from the recorded input shapes",
    "trace flops": "FLOPs from the trace's flops arg (with_flops=True)",
    "trace kernel_flop": "from the trace's kernel_flop / kernel_num_gb args",
    "kernel args": "from the kernel's own kernel_flop / kernel_num_gb args",
}
DTYPES = ("?", "fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int64", "int32", "int16", "int8", "uint8",
          "bool", "complex64", "complex128", "complex32")
ROOFS = ("fp64", "fp64_tensor", "fp32", "tf32", "bf16", "fp16", "fp8")
_TENSOR_ROOF = {"fp32": "tf32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp4": "fp8",
                "fp64": "fp64_tensor", "int8": "fp8", "uint8": "fp8"}
_LOW_PRECISION = ("bf16", "fp16", "fp8", "fp4", "int8", "uint8")
# Kernels that do a matmul's, convolution's or attention's arithmetic (lowercased names), not its layout transforms
COMPUTE_KERNEL = re.compile(r"gemm|conv|fprop|dgrad|wgrad|xmma|cutlass|nvjet|flash|fmha|attention|attn|sdpa|winograd"
                            r"|implicit|splitk|cublas|cudnn_generated|triton_tem|matmul")
LAYOUT_KERNEL = re.compile(r"nchwtonhwc|nhwctonchw|transpose|convert|copy|cast|fill|memset|permute|reorder")


def is_compute_kernel(name: str) -> bool:
    lowered = name.lower()
    return COMPUTE_KERNEL.search(lowered) is not None and LAYOUT_KERNEL.search(lowered) is None


@dataclass(frozen=True)
class OpWork:
    """Per estimated operator call (``node``: host-tree nodes, ascending): its figures and whether they count."""

    node: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray  # NaN: unknown
    dtype: np.ndarray  # codes into DTYPES
    heavy: np.ndarray
    how: np.ndarray  # codes into ``texts``
    source: np.ndarray  # codes into SOURCES
    counted: np.ndarray
    texts: list[str]

    def index_of(self, nodes: np.ndarray) -> np.ndarray:
        """Position in these arrays of each host-tree node (-1: not estimated)."""
        pos = np.minimum(np.searchsorted(self.node, nodes), max(len(self.node) - 1, 0))
        found = (nodes >= 0) & (len(self.node) > 0) & (take(self.node, pos, -1) == nodes)
        return np.where(found, pos, -1)


def matching(model: TraceModel, codes: np.ndarray, predicate: Callable[[str], bool]) -> np.ndarray:
    """Per entry of a string-code column: does its text satisfy ``predicate`` (asked once per distinct code, not of
    every string of the trace: a 2 GB trace's string table holds millions of shapes and stacks)."""
    distinct = unique_ints(codes)
    hits = np.fromiter((c >= 0 and predicate(model.strings[c]) for c in distinct.tolist()), dtype=bool,
                       count=len(distinct))
    found: np.ndarray = np.isin(codes, distinct[hits])
    return found


def _operator_nodes(tree: HostTree) -> np.ndarray:
    return np.flatnonzero((tree.kind == Kind.CPU_OP) & ~tree.merged & (tree.parent >= -1))


@dataclass
class _Columns:
    """Per estimated call being built: the figures as arrays (``texts``: the distinct ``how`` lines)."""

    flops: np.ndarray
    bytes: np.ndarray
    dtype: np.ndarray
    heavy: np.ndarray
    how: np.ndarray
    source: np.ndarray
    texts: list[str]


def _estimates(model: TraceModel, nodes: np.ndarray) -> tuple[np.ndarray, _Columns]:
    """Per node: its call's distinct (name, shapes, types, scalars) group, and each group's figures (NaN FLOPs: no
    formula). Only groups of an operator some formula knows are parsed: one estimate per distinct call."""
    rows = host_tree(model).rows[nodes]
    ops = model["ops"]
    ops_row = side_row(model, "ops")[rows]
    names = model["events"]["name"][rows].astype(np.int64)
    known = matching(model, names, formulas.known)
    at = np.flatnonzero(known)
    cols = []
    for c in ("input_dims", "input_type", "concrete_inputs"):
        col = np.full(len(rows), -1, dtype=np.int64)
        col[at] = take(ops[c], ops_row[at], -1)
        cols.append(col)
    first, group = _groups(known, at, [names, *cols])  # the unknown calls all in one group
    n = len(first)
    out = _Columns(np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, np.int8), np.zeros(n, bool),
                   np.zeros(n, np.int32), np.zeros(n, np.int8), [])
    texts: dict[str, int] = {}
    codes = {d: i for i, d in enumerate(DTYPES)}
    for g in np.flatnonzero(known[first]).tolist():
        i = int(first[g])
        w = formulas.estimate(model.strings[int(names[i])], *(model.text(int(c[i])) for c in cols))
        if w is not None:
            out.flops[g], out.bytes[g], out.dtype[g], out.heavy[g] = w.flops, w.bytes, codes.get(w.dtype, 0), w.heavy
            out.how[g] = texts.setdefault(w.how, len(texts))
    out.texts = list(texts)
    return group, out


def _groups(known: np.ndarray, at: np.ndarray, columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``group_rows`` of the columns with every unknown row (``~known``) keyed -1 in all, grouping only the known
    rows (``at``): the unknown rows' key, the least, is group 0 when there is one, first at the first unknown row."""
    first, group = group_rows([c[at] for c in columns])
    if len(at) == len(known):
        return first, group
    out = np.zeros(len(known), dtype=np.int64)
    out[at] = group + 1
    return np.concatenate([[int(np.argmin(known))], at[first]]).astype(np.int64), out


def _per_node(model: TraceModel, nodes: np.ndarray, group: np.ndarray, g: _Columns) -> _Columns:
    """The groups' figures per node, with the figures the trace wrote on a call replacing the formula's: its
    ``kernel_flop`` / ``kernel_num_gb`` (Inductor), else its ``flops`` (``with_flops=True``)."""
    c = _Columns(g.flops[group], g.bytes[group], g.dtype[group], g.heavy[group], g.how[group], g.source[group],
                 g.texts)
    work = model["work"]
    if not len(work["row"]):
        return c
    w = side_row(model, "work")[host_tree(model).rows[nodes]]
    at = np.flatnonzero(w >= 0)
    fl, kflop, gb = (work[col][w[at]] for col in ("flops", "kernel_flop", "kernel_num_gb"))
    by_kernel_args = np.isfinite(kflop) | np.isfinite(gb)
    by_flops = ~by_kernel_args & np.isfinite(fl)
    formula = np.isfinite(c.flops[at])
    new_flops = np.where(np.isfinite(kflop), kflop, np.where(by_flops, fl, np.where(formula, c.flops[at], 0.0)))
    new_bytes = np.where(np.isfinite(gb), gb * 1e9, c.bytes[at])
    traced = by_kernel_args | by_flops
    names = model["events"]["name"][host_tree(model).rows[nodes[at]]]
    eligible = matching(model, names, op_is_tensor_core_eligible)
    c.heavy[at] = np.where(traced & ~formula, eligible, c.heavy[at])
    if (traced & ~formula).any():
        c.texts = [*c.texts, "the trace's own figures (no formula for this operator)"]
        c.how[at[traced & ~formula]] = len(c.texts) - 1
    c.flops[at] = np.where(traced, new_flops, c.flops[at])
    c.bytes[at] = np.where(traced, new_bytes, c.bytes[at])
    c.source[at] = np.where(by_kernel_args, 2, np.where(by_flops, 1, c.source[at]))
    return c


def _counted(tree: HostTree, levels: list[np.ndarray], est: np.ndarray, heavy: np.ndarray) -> np.ndarray:
    """Per host-tree node: do its figures count (the module docstring's two rules)."""
    below_any = np.zeros(tree.size, dtype=bool)
    below_heavy = np.zeros(tree.size, dtype=bool)
    for level in reversed(levels):  # an OR into the parents: setting True where a child has it is the same
        parents = tree.parent[level]
        below_any[parents[est[level] | below_any[level]]] = True
        below_heavy[parents[(est[level] & heavy[level]) | below_heavy[level]]] = True
    counted_heavy = est & heavy & ~below_heavy
    under_heavy = np.zeros(tree.size, dtype=bool)
    for level in levels:
        parents = tree.parent[level]
        under_heavy[level] = under_heavy[parents] | counted_heavy[parents]
    counted: np.ndarray = counted_heavy | (est & ~heavy & ~below_any & ~under_heavy)
    return counted


@memoized
def op_work(model: TraceModel) -> OpWork:
    """The estimated operator calls of the trace (see the module docstring); kept on the model."""
    from .operators import tree_levels

    tree = host_tree(model)
    nodes = _operator_nodes(tree)
    group, by_group = _estimates(model, nodes)
    c = _per_node(model, nodes, group, by_group)
    keep = np.isfinite(c.flops)
    est = np.zeros(tree.size, dtype=bool)
    heavy = np.zeros(tree.size, dtype=bool)
    est[nodes[keep]] = True
    heavy[nodes[keep]] = c.heavy[keep]
    counted = _counted(tree, tree_levels(model), est, heavy)
    nodes = nodes[keep]
    return OpWork(node=nodes, flops=c.flops[keep], bytes=c.bytes[keep], dtype=c.dtype[keep], heavy=c.heavy[keep],
                  how=c.how[keep], source=c.source[keep], counted=counted[nodes], texts=c.texts)


def _roof_table() -> np.ndarray:
    """Roof code by [dtype code, heavy, tensor-core kernel, CUDA-core name]: a tensor-core class where the kernel
    runs on tensor cores (by its name; or, for a 16/8-bit matmul, convolution or attention whose kernel name says
    neither, assumed: e.g. AMD's rocBLAS names), else the CUDA-core ``fp32`` (``fp64`` for doubles); -1: none."""
    table = np.full((len(DTYPES), 2, 2, 2), -1, dtype=np.int8)
    for d, dtype in enumerate(DTYPES):
        for heavy in (0, 1):
            for tc in (0, 1):
                for cuda in (0, 1):
                    on_tc = bool(tc) or (bool(heavy) and dtype in _LOW_PRECISION and not cuda)
                    if on_tc:
                        roof = _TENSOR_ROOF.get(dtype)
                    else:
                        roof = "fp64" if dtype in ("fp64", "complex128") else "fp32"
                    table[d, heavy, tc, cuda] = ROOFS.index(roof) if roof else -1
    return table


ROOF_TABLE = _roof_table()


@dataclass(frozen=True)
class KernelWork:
    """Per kernel (``kernel``: positions in ``device_events``): the work it got and the roof it is held to."""

    kernel: np.ndarray
    owner: np.ndarray  # position in ``op_work`` of the counted call whose work it got, -1: none
    flops: np.ndarray  # NaN: not estimated
    bytes: np.ndarray  # NaN: unknown
    roof: np.ndarray  # codes into ROOFS, -1: none
    source: np.ndarray  # codes into SOURCES, -1: not estimated
    shared: np.ndarray  # how many kernels the owner's work was split among (by duration)
    tensor_cores: np.ndarray


def counted_owner(model: TraceModel) -> np.ndarray:
    """Per host-tree node: the counted estimated call at or above it (a node number), -1 where none."""
    from .operators import tree_levels

    tree = host_tree(model)
    ops = op_work(model)
    counted = np.zeros(tree.size, dtype=bool)
    counted[ops.node[ops.counted]] = True
    owner = np.where(counted, np.arange(tree.size), -1)
    for level in tree_levels(model):
        owner[level] = np.where(counted[level], level, owner[tree.parent[level]])
    return owner


@memoized
def kernel_work(model: TraceModel) -> KernelWork:
    ev, dev = model["events"], model["device_events"]
    k = np.flatnonzero(ev["kind"][dev["row"]] == Kind.KERNEL)
    rows = dev["row"][k]
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    ops = op_work(model)
    launcher = host_tree(model).device_op[k]
    owner = ops.index_of(take(counted_owner(model), launcher, -1))
    has = owner >= 0
    n_ops = len(ops.node)
    names = ev["name"][rows]
    tc = tensor_core_mask(model, names)
    share = _shares(owner, dur, n_ops)
    compute = tc | matching(model, names, is_compute_kernel)
    heavy = np.where(has, take(ops.heavy, owner, False), False)
    computing = _shares(owner, dur * compute, n_ops)
    by_compute = heavy & (take(np.bincount(owner[has], weights=compute[has], minlength=n_ops), owner, 0) > 0)
    flops = np.where(has, take(ops.flops, owner, np.nan) * np.where(by_compute, computing, share), np.nan)
    nbytes = np.where(has, take(ops.bytes, owner, np.nan) * share, np.nan)
    source = np.where(has, take(ops.source, owner, -1), -1).astype(np.int8)
    _own_args(model, rows, flops, nbytes, source)
    cuda = matching(model, names, kernel_says_cuda_cores)
    dtype = np.where(has, take(ops.dtype, owner, 0), 0).astype(np.int64)
    roof = ROOF_TABLE[dtype, heavy.astype(int), tc.astype(int), cuda.astype(int)]
    count = np.bincount(owner[has], minlength=n_ops)
    return KernelWork(kernel=k, owner=owner, flops=flops, bytes=nbytes, roof=roof, source=source,
                      shared=np.where(has, take(count, owner, 0), 0), tensor_cores=tc)


def _shares(owner: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
    """Each kernel's share of its owner's total ``weight`` (equal shares where the total is 0); 0 without owner."""
    has = owner >= 0
    total = np.bincount(owner[has], weights=weight[has], minlength=n)
    count = np.bincount(owner[has], minlength=n)
    out = np.zeros(len(owner))
    t = take(total, owner, 0.0)
    equal = 1.0 / np.maximum(count[owner[has]], 1)
    out[has] = np.where(t[has] > 0, weight[has] / np.where(t[has] > 0, t[has], 1.0), equal)
    return out


def _own_args(model: TraceModel, rows: np.ndarray, flops: np.ndarray, nbytes: np.ndarray, source: np.ndarray) -> None:
    """A kernel's own ``kernel_flop`` / ``kernel_num_gb`` args replace its share of its call's work (in place)."""
    work = model["work"]
    if not len(work["row"]):
        return
    w = side_row(model, "work")[rows]
    mine = np.flatnonzero(w >= 0)
    kflop, gb = work["kernel_flop"][w[mine]], work["kernel_num_gb"][w[mine]]
    flops[mine] = np.where(np.isfinite(kflop), kflop, flops[mine])
    nbytes[mine] = np.where(np.isfinite(gb), gb * 1e9, nbytes[mine])
    source[mine[np.isfinite(kflop) | np.isfinite(gb)]] = SOURCES.index("kernel args")


@dataclass(frozen=True)
class StepWork:
    """Model FLOPs per step: the counted calls that started inside each step's host span (in a trace with GPU
    work, those whose subtree ran some: a CPU-side transform in a DataLoader is not model work), by roof."""

    flops: np.ndarray  # per step
    by_roof: np.ndarray  # steps × ROOFS
    by_source: np.ndarray  # SOURCES: FLOPs over all steps
    calls: int  # counted calls in the steps


def op_roofs(model: TraceModel) -> np.ndarray:
    """Per estimated call (``op_work`` order): the roof its kernels are held to, by the kernel time on tensor cores
    (more than half) and CUDA-core names; a call without kernels by its dtype and family alone."""
    ops = op_work(model)
    kw = kernel_work(model)
    ev = model["events"]
    dur = np.nan_to_num(ev["dur"][model["device_events"]["row"][kw.kernel]], nan=0.0).clip(min=0.0)
    has = kw.owner >= 0
    n = len(ops.node)
    total = np.bincount(kw.owner[has], weights=dur[has], minlength=n)
    on_tc = np.bincount(kw.owner[has], weights=dur[has] * kw.tensor_cores[has], minlength=n)
    launched = np.bincount(kw.owner[has], minlength=n) > 0
    cuda_kernel = matching(model, ev["name"][model["device_events"]["row"][kw.kernel]], kernel_says_cuda_cores)
    cuda = np.bincount(kw.owner[has], weights=cuda_kernel[has], minlength=n) > 0
    tc = launched & (on_tc > 0.5 * np.where(total > 0, total, np.inf))
    table: np.ndarray = ROOF_TABLE[ops.dtype.astype(np.int64), ops.heavy.astype(int), tc.astype(int),
                                   cuda.astype(int)]
    return table


@memoized
def step_work(model: TraceModel) -> StepWork:
    from .operators import subtree_device_time
    from .steps import find_steps

    steps = find_steps(model)
    ops = op_work(model)
    tree = host_tree(model)
    use = ops.counted.copy()
    if len(kernel_work(model).kernel):
        use &= subtree_device_time(model)[ops.node] > 0
    start = tree.start[ops.node]
    step = np.searchsorted(steps.host_start, start, side="right") - 1
    inside = use & (step >= 0)
    inside[inside] &= start[inside] <= steps.host_end[step[inside]]
    n = steps.count
    roofs = op_roofs(model)
    flops = np.bincount(step[inside], weights=ops.flops[inside], minlength=n)
    by_roof = np.zeros((n, len(ROOFS)))
    ok = inside & (roofs >= 0)
    np.add.at(by_roof, (step[ok], roofs[ok].astype(np.int64)), ops.flops[ok])
    by_source = np.bincount(ops.source[inside].astype(np.int64), weights=ops.flops[inside], minlength=len(SOURCES))
    return StepWork(flops=flops[:n], by_roof=by_roof, by_source=by_source, calls=int(inside.sum()))


def dominant_roof(by_roof: np.ndarray) -> str | None:
    """The class carrying the most FLOPs (a steps × ROOFS table summed over steps), None without FLOPs."""
    totals = by_roof.sum(axis=0) if by_roof.ndim == 2 else by_roof
    return ROOFS[int(np.argmax(totals))] if len(totals) and totals.max() > 0 else None
