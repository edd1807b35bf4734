"""Query-parameter validation: every route reads its parameters through these helpers."""

from __future__ import annotations

import re
from typing import overload

from werkzeug.wrappers import Request

from ..analysis.device_peaks import PeakOverride
from ..analysis.device_peaks import parse_override as parse_override  # plugin.py checks --profiler_peaks with it
from ..analysis.distributed_page import MAX_LIMIT, ORDERS, SORT_KEYS
from ..analysis.memory import EVENT_ORDERS, EVENT_SORTS, EVENTS_DEFAULT_LIMIT, EVENTS_MAX_LIMIT, EventQuery
from .http import ApiError

MAX_PARAM_LENGTH = 4096
_DIGITS = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit() also takes "²", which int() refuses


def text(request: Request, name: str, *, required: bool = True, default: str | None = None,
         choices: tuple[str, ...] | None = None) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        if required and default is None:
            raise ApiError(400, f"missing query parameter '{name}'")
        return default or ""
    if len(value) > MAX_PARAM_LENGTH or "\x00" in value:
        raise ApiError(400, f"query parameter '{name}' is too long or contains a NUL character")
    if choices is not None and value not in choices:
        raise ApiError(400, f"query parameter '{name}' must be one of {', '.join(choices)}; got {value!r}")
    return value


def number(request: Request, name: str, *, required: bool = True, default: float | None = None,
           minimum: float | None = None, maximum: float | None = None) -> float:
    raw = request.args.get(name)
    if raw is None or raw == "":
        if required and default is None:
            raise ApiError(400, f"missing query parameter '{name}'")
        return float(default) if default is not None else 0.0
    try:
        value = float(raw)
    except ValueError:
        raise ApiError(400, f"query parameter '{name}' must be a number; got {raw[:64]!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ApiError(400, f"query parameter '{name}' must be a finite number")
    if minimum is not None and value < minimum:
        raise ApiError(400, f"query parameter '{name}' must be at least {minimum:g}")
    if maximum is not None and value > maximum:
        raise ApiError(400, f"query parameter '{name}' must be at most {maximum:g}")
    return value


def integer(request: Request, name: str, *, required: bool = True, default: int | None = None,
            minimum: int | None = None, maximum: int | None = None) -> int:
    """A count or an index (``limit``, ``max_points``, ``id``): :func:`number`'s rules, then cut to a whole number
    (``2.7`` reads as 2)."""
    return int(number(request, name, required=required, default=default, minimum=minimum, maximum=maximum))


_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


def id_list(request: Request, name: str) -> list[str]:
    """A comma-separated list of ids (finding ids: letters, digits, ``_ . -``), none when absent or empty; at most
    ``MAX_PARAM_LENGTH`` characters in all (``text``)."""
    raw = text(request, name, required=False)
    ids = [part.strip() for part in raw.split(",") if part.strip()] if raw else []
    bad = [i for i in ids if not _ID.match(i)]
    if bad:
        raise ApiError(400, f"query parameter '{name}' must be ids separated by commas; got {bad[0][:64]!r}")
    return ids


def span_key(request: Request) -> tuple[str, str, str]:
    """The (run, worker, span) every per-trace route takes."""
    return text(request, "run"), text(request, "worker"), text(request, "span")


def int_list(request: Request, name: str, *, limit: int = 32768) -> list[int]:
    """A comma-separated list of non-negative integers (empty when absent)."""
    raw = text(request, name, required=False)
    if not raw:
        return []
    parts = raw.split(",")
    if len(parts) > limit or not all(_DIGITS.fullmatch(p.strip()) for p in parts):
        raise ApiError(400, f"query parameter '{name}' must be a comma-separated list of non-negative integers")
    return [int(p) for p in parts]


def int_pairs(request: Request, name: str, *, limit: int = 32768) -> dict[int, int]:
    """A comma-separated list of ``key:value`` pairs of non-negative integers (``3:5,7:1``; empty when absent);
    a key given twice keeps its last value."""
    raw = text(request, name, required=False)
    if not raw:
        return {}
    parts = [p.split(":") for p in raw.split(",")]
    if len(parts) > limit or not all(len(p) == 2 and all(_DIGITS.fullmatch(x.strip()) for x in p) for p in parts):
        raise ApiError(400, f"query parameter '{name}' must be a comma-separated list of id:count pairs of "
                            "non-negative integers (3:5,7:1)")
    return {int(k): int(v) for k, v in parts}


EMPTY_RANGE_US = 0.001  # an empty range is read as 1 ns wide, so every window and filter has a width


def time_range(request: Request, default_start: float | None = None,
               default_end: float | None = None, *, required: bool = False) -> tuple[float | None, float | None]:
    """``start_us``/``end_us`` (absolute µs): a range given backwards is read forwards and an empty one is 1 ns
    wide, so every pair of finite numbers is a valid range; either bound may be absent (None) unless required."""
    start = _optional_number(request, "start_us", required, default_start)
    end = _optional_number(request, "end_us", required, default_end)
    if start is not None and end is not None:
        start, end = min(start, end), max(start, end)
        end = max(end, start + EMPTY_RANGE_US)
    return start, end


def _optional_number(request: Request, name: str, required: bool, default: float | None) -> float | None:
    if not required and request.args.get(name, "") == "":
        return default
    return number(request, name)


def distributed_page(request: Request) -> tuple[int | None, int | None, str, str, str]:
    """``offset``, ``limit`` (None where absent: the default page rule of ``analysis.distributed_page``), ``sort``,
    ``order`` and ``q`` (the rank table's search: worker, host or rank) of the Distributed view's rank rows."""
    offset = _whole(request, "offset", 0, 10**9, None)
    limit = _whole(request, "limit", 1, MAX_LIMIT, None)
    sort = text(request, "sort", required=False, default="rank", choices=SORT_KEYS)
    order = text(request, "order", required=False, default="asc", choices=ORDERS)
    return offset, limit, sort, order, text(request, "q", required=False)


EVENTS_PAGE_PARAMS = ("limit", "offset", "sort", "order", "q", "min_bytes")


def events_page(request: Request) -> EventQuery | None:
    """The Memory events table's page (``limit``, ``offset``, ``sort``, ``order``, ``q``, ``min_bytes``), None when
    the request names none of them: then the route answers every row, as before paging existed."""
    if not any(request.args.get(name, "") != "" for name in EVENTS_PAGE_PARAMS):
        return None
    offset = _whole(request, "offset", 0, 10**9, 0)
    limit = _whole(request, "limit", 1, EVENTS_MAX_LIMIT, EVENTS_DEFAULT_LIMIT)
    sort = text(request, "sort", required=False, choices=EVENT_SORTS) or None
    order = text(request, "order", required=False, choices=EVENT_ORDERS) or None
    query = text(request, "q", required=False)
    min_bytes = number(request, "min_bytes", required=False, default=0, minimum=0)
    return EventQuery(offset=offset, limit=limit, sort=sort, order=order, q=query, min_bytes=min_bytes)


@overload
def _whole(request: Request, name: str, low: int, high: int, default: int) -> int: ...


@overload
def _whole(request: Request, name: str, low: int, high: int, default: None) -> int | None: ...


def _whole(request: Request, name: str, low: int, high: int, default: int | None) -> int | None:
    """A whole number from ``low`` to ``high`` written in digits (``2.7`` and ``1e3`` refused: an offset that is
    not a row's place is a mistake, not a row), ``default`` where absent."""
    raw = request.args.get(name, "").strip()
    if raw == "":
        return default
    if not _DIGITS.fullmatch(raw) or not low <= int(raw) <= high:
        raise ApiError(400, f"query parameter '{name}' must be an integer from {low} to {high}; got {raw[:64]!r}")
    return int(raw)


def peaks(request: Request, default: PeakOverride) -> PeakOverride:
    """``peaks``: device peaks overriding the table's (``device=H100-SXM,bf16=700,bw=3000``, TFLOP/s and GB/s),
    else the server's ``--profiler_peaks``."""
    value = text(request, "peaks", required=False)
    if not value:
        return default
    try:
        return parse_override(value)
    except ValueError as err:
        raise ApiError(400, f"query parameter 'peaks': {err}") from None
