"""Results derived from a model, written to bytes and read back exactly: numpy arrays, numbers, text, lists, tuples,
dicts and registered dataclasses, nested.

Why: the loader process computes what the first page views need (``api/warm.py``) and stores it beside the parse;
the server gives it back to the model (``model.derived.seed``), so the first answer reads instead of computing.
Pickle would do it in one line, but a parse cache may be shared between users (``jobs.shared``) and unpickling runs
code; this format holds data only. A dataclass is rebuilt only if its class was registered here (by the module
that defines it), never by a name read from the file.

Layout: one JSON description (the tree, every array as ``{"a": [dtype, shape, offset]}``) and one byte blob of the
arrays' buffers, 64-byte aligned. Reading gives the arrays as read-only views of the blob (zero-copy from a memory
map). Exact: arrays keep dtype and bytes, a float its repr (NaN and infinities as Python's ``json`` writes them),
a numpy scalar its dtype, a tuple stays a tuple; dict keys of any of these types.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import numpy as np

_ALIGN = 64
_CLASSES: dict[str, type] = {}
_FORMAT = 1


def register(cls: type) -> type:
    """Allow instances of the dataclass ``cls`` in stored trees (a class decorator)."""
    assert dataclasses.is_dataclass(cls), cls
    _CLASSES[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


class Unstashable(TypeError):
    """A value of a type this format does not hold (the caller leaves that result out)."""


class _Writer:
    def __init__(self) -> None:
        self.chunks: list[bytes | memoryview] = []
        self.size = 0

    def array(self, a: np.ndarray) -> dict[str, Any]:
        if a.dtype == object:
            items = a.ravel().tolist()
            if not all(isinstance(x, str) for x in items):
                raise Unstashable(f"an object array holding {type(next(x for x in items if not isinstance(x, str)))}")
            return {"s": [list(a.shape), items]}
        if a.dtype.hasobject or a.dtype.kind not in "biufcmM?":
            raise Unstashable(f"an array of dtype {a.dtype}")
        pad = -self.size % _ALIGN
        if pad:
            self.chunks.append(b"\0" * pad)
            self.size += pad
        at = self.size
        data = np.ascontiguousarray(a)
        self.chunks.append(data.view(np.uint8).reshape(-1).data if data.nbytes else b"")
        self.size += data.nbytes
        return {"a": [data.dtype.str, list(a.shape), at]}

    def value(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v if type(v) is int else {"n": ["int", int(v)]}
        if isinstance(v, float):
            return v if type(v) is float else {"n": ["float", float(v)]}
        if isinstance(v, np.ndarray):
            return self.array(v)
        if isinstance(v, np.generic):
            return {"n": [v.dtype.str, v.item()]}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, tuple):
            return {"t": [self.value(x) for x in v]}
        if isinstance(v, dict):
            return {"d": [[self.value(k), self.value(x)] for k, x in v.items()]}
        if isinstance(v, range):
            return {"r": [v.start, v.stop, v.step]}
        name = f"{type(v).__module__}.{type(v).__qualname__}"
        if dataclasses.is_dataclass(v) and _CLASSES.get(name) is type(v):
            return {"c": [name, {f.name: self.value(getattr(v, f.name)) for f in dataclasses.fields(v)}]}
        raise Unstashable(f"a value of type {name}")


def dumps(values: dict[str, Any]) -> tuple[bytes, list[bytes | memoryview]]:
    """``values`` (by name) as (JSON description, the arrays' bytes in pieces to write one after the other).
    :class:`Unstashable` names the first value of a type this format does not hold."""
    w = _Writer()
    tree = {name: w.value(v) for name, v in values.items()}
    return json.dumps({"format": _FORMAT, "values": tree}).encode(), w.chunks


def loads(description: bytes | str | memoryview, blob: Any) -> dict[str, Any]:
    """The values :func:`dumps` wrote, arrays as read-only views of ``blob`` (bytes, a memory map, a pyarrow
    buffer). ValueError when the description is of another format or does not fit the blob."""
    raw = bytes(description) if isinstance(description, memoryview) else description
    doc = json.loads(raw)
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise ValueError("stored results of another format")
    buffer = memoryview(blob).cast("B") if not isinstance(blob, memoryview) else blob.cast("B")
    read = _Reader(buffer)
    return {name: read.value(v) for name, v in doc["values"].items()}


class _Reader:
    def __init__(self, buffer: memoryview) -> None:
        self.buffer = buffer
        self.tags: dict[str, Callable[[Any], Any]] = {
            "a": self.array, "s": _strings, "n": _scalar, "t": lambda xs: tuple(self.value(x) for x in xs),
            "d": lambda kv: {self.value(k): self.value(x) for k, x in kv}, "r": lambda r: range(*r), "c": self.instance}

    def value(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            (tag, body), = v.items()
            return self.tags[tag](body)
        return v

    def array(self, spec: list[Any]) -> np.ndarray:
        dtype, shape, at = np.dtype(spec[0]), tuple(spec[1]), int(spec[2])
        count = int(np.prod(shape)) if shape else 1
        if at < 0 or at + count * dtype.itemsize > len(self.buffer):
            raise ValueError("a stored array lies outside its file")
        a = np.frombuffer(self.buffer, dtype=dtype, count=count, offset=at) if count else np.empty(0, dtype)
        a = a.reshape(shape)
        a.flags.writeable = False
        return a

    def instance(self, spec: list[Any]) -> Any:
        cls = _CLASSES.get(spec[0])
        if cls is None:
            raise ValueError(f"stored results hold an unknown class {spec[0]}")
        return cls(**{k: self.value(x) for k, x in spec[1].items()})


def _strings(spec: list[Any]) -> np.ndarray:
    out = np.empty(len(spec[1]), dtype=object)
    out[:] = spec[1]
    shaped: np.ndarray = out.reshape(spec[0])
    return shaped


def _scalar(spec: list[Any]) -> Any:
    kind, value = spec
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    return np.dtype(kind).type(value)
