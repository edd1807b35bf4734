"""Where the files of a trace's call stacks live: the user's own code, a library, or generated code.

Why: a stack of ``with_stack=True`` is mostly library frames (``torch/nn/modules/module.py`` five deep) with the
user's ``train.py(107): train_step`` somewhere below them; the views put the user's frame first and dim the rest,
which needs each file classified. PyTorch writes a file relative to the ``sys.path`` entry it came from
(``torch/nn/modules/conv.py``, ``typing.py``, the script's own ``train.py``), older versions absolute paths, so:

- an absolute path is a library file when it lies under ``site-packages``/``dist-packages`` or the standard
  library (``…/lib/pythonX.Y/``), generated code when it is TorchInductor's or Triton's cache, else the user's;
- a relative path is a library file when its first component is a standard-library module
  (:data:`sys.stdlib_module_names`), a well-known library, or a package the same trace shows under
  ``site-packages`` (absolute frames), else the user's.

A relative library file cannot be opened by an editor; it gets an absolute path when the trace shows where its
package lives (an absolute frame of the same package or of the standard library), else none, and the views say it
is a library file. Only distinct strings are looked at (a few hundred files), never events one by one.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np

from ..model.derived import memoized
from ..model.tables import TraceModel
from .operators import call_stacks

FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
# Libraries whose relative paths are recognised without an absolute frame in the trace: PyTorch's ecosystem and
# what training scripts commonly run through.
KNOWN_LIBRARIES = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "torchdata", "functorch", "triton", "numpy", "scipy",
    "pandas", "PIL", "lightning", "pytorch_lightning", "lightning_fabric", "transformers", "accelerate",
    "deepspeed", "apex", "timm", "tqdm", "sklearn", "einops", "fairscale", "datasets", "tokenizers",
    "safetensors", "huggingface_hub", "megatron", "torchrec", "fbgemm_gpu", "xformers", "flash_attn", "peft",
})
_PACKAGE_ROOT = re.compile(r"^(.*/(?:site|dist)-packages)/([^/]+)")
_STDLIB_ROOT = re.compile(r"^(.*/lib/python\d+(?:\.\d+)?)/([^/]+)")
_GENERATED = re.compile(r"/torchinductor_[^/]*/|/triton/cache/|^<")


def frame_path(frame: str) -> str | None:
    """The file of a ``file(line): function`` frame, None for a frame without one (``nn.Module: Linear_0``)."""
    m = FRAME.match(frame.strip())
    return m.group(1) if m else None


def _top(path: str) -> str:
    """First component of a relative path without its ``.py`` (``torch/nn/x.py`` → torch, ``typing.py`` → typing)."""
    head = path.split("/", 1)[0]
    return head[:-3] if head.endswith(".py") else head


def library_roots(paths: list[str]) -> dict[str, str]:
    """Top-level package or standard-library module → the folder it lives in, from the trace's absolute paths
    (``/x/site-packages/torch/nn/f.py`` → ``torch: /x/site-packages``); ``""`` is the standard library's folder."""
    roots: dict[str, str] = {}
    for path in paths:
        m = _PACKAGE_ROOT.match(path)
        if m:
            roots.setdefault(_top(m.group(2)), m.group(1))
            continue
        m = _STDLIB_ROOT.match(path)
        if m:
            roots.setdefault("", m.group(1))
    return roots


def classify(path: str, roots: dict[str, str]) -> str:
    """``user``, ``library`` or ``generated`` (see the module docstring)."""
    if path.startswith("<frozen "):
        return "library"  # a frozen standard-library module (``<frozen os>``)
    if _GENERATED.search(path):
        return "generated"
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
        normal = path.replace("\\", "/")
        return "library" if _PACKAGE_ROOT.match(normal) or _STDLIB_ROOT.match(normal) else "user"
    top = _top(path)
    if top in sys.stdlib_module_names or top in KNOWN_LIBRARIES or top in roots:
        return "library"
    return "user"


def resolve(path: str, kind: str, roots: dict[str, str]) -> str | None:
    """An absolute path for ``path`` where the trace allows: itself when absolute, else its package's folder (or
    the standard library's) joined with it; None when the trace does not say where it lives."""
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
        return path
    if kind != "library":
        return None
    top = _top(path)
    root = roots.get(top) or (roots.get("") if top in sys.stdlib_module_names else None)
    return f"{root}/{path}" if root else None


def _stack_strings(model: TraceModel) -> list[str]:
    """Every distinct call-stack string and Python frame name of the trace."""
    texts = list(call_stacks(model).texts)  # the distinct stacks, already
    py_names = np.unique(model["events"]["name"][model["python"]["row"]])
    texts.extend(model.strings[int(c)] for c in py_names.tolist() if c >= 0)
    return texts


@memoized
def source_files(model: TraceModel) -> dict[str, Any]:
    """The trace's source files: path, kind (user / library / generated) and the absolute path where known."""
    paths: set[str] = set()
    for text in _stack_strings(model):
        for frame in text.split(";"):
            path = frame_path(frame)
            if path:
                paths.add(path)
    ordered = sorted(paths)
    roots = library_roots(ordered)
    files = []
    for path in ordered:
        kind = classify(path, roots)
        files.append({"path": path, "kind": kind, "absolute": resolve(path, kind, roots)})
    return {"files": files, "library_roots": dict(sorted(roots.items()))}
