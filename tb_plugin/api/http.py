"""Responses: JSON encoding, errors as ``{"error": sentence}``, gzip, and the headers TensorBoard checks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request, Response

from ..model.derived import Computing
from ..workspace import LookupFailed
from .encoding import GZIP_MIN_BYTES, Encoded, encode, encode_json, gzip_body

__all__ = ["ApiError", "Encoded", "encode", "encoded_response", "gzip_body", "json_response", "json_route"]

log = logging.getLogger(__name__)

_GZIP_MIN_BYTES = GZIP_MIN_BYTES


class ApiError(Exception):
    """A request the API refuses: ``status`` (4xx) and a sentence for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def secure(response: Response) -> Response:
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def json_response(request: Request, payload: Any, status: int = 200) -> Response:
    body = encode_json(payload)
    packed = None
    if len(body) >= _GZIP_MIN_BYTES and _accepts_gzip(request):
        packed = gzip_body(body)
    return encoded_response(request, Encoded(body, packed), status)


def encoded_response(request: Request, encoded: Encoded, status: int = 200) -> Response:
    response = Response(status=status, content_type="application/json")
    if encoded.gzipped is not None and _accepts_gzip(request):
        response.set_data(encoded.gzipped)
        response.headers["Content-Encoding"] = "gzip"
        response.headers["Vary"] = "Accept-Encoding"
    else:
        response.set_data(encoded.body)
    response.headers["Cache-Control"] = "no-store"
    return secure(response)


def text_response(request: Request, text: str) -> Response:
    """A plain-text answer (folded stacks): shown as text by a browser, read as is by ``flamegraph.pl``."""
    body = text.encode("utf-8")
    packed = gzip_body(body) if len(body) >= _GZIP_MIN_BYTES and _accepts_gzip(request) else None
    response = encoded_response(request, Encoded(body, packed))
    response.content_type = "text/plain; charset=utf-8"
    return response


def _accepts_gzip(request: Request) -> bool:
    return "gzip" in request.headers.get("Accept-Encoding", "")


def error_response(request: Request, status: int, message: str) -> Response:
    return json_response(request, {"error": message}, status)


def computing_response(request: Request, busy: Computing) -> Response:
    """409 while an analysis of a big trace is computed in the background: its estimated progress, and when to ask
    again (``retry_after_ms``, and ``Retry-After`` in whole seconds as HTTP has it)."""
    response = json_response(request, {"error": str(busy), "state": "computing", "analysis": busy.analysis,
                                       "progress": busy.progress, "retry_after_ms": busy.retry_after_ms}, 409)
    response.headers["Retry-After"] = str(max(1, -(-busy.retry_after_ms // 1000)))
    return response


Handler = Callable[[Request], Response]


def json_route(handler: Handler) -> Callable[[Any, Any], Any]:
    """Wrap a handler as a WSGI app: API errors and the workspace's refusals (unknown, still loading, failed)
    become 4xx JSON, an analysis still computing a 409 with its progress, anything unexpected a logged 500 JSON."""

    @Request.application  # type: ignore[arg-type]
    def app(request: Request) -> Response:
        try:
            return handler(request)
        except ApiError as err:
            return error_response(request, err.status, err.message)
        except LookupFailed as err:
            return error_response(request, err.status, str(err))
        except Computing as busy:
            return computing_response(request, busy)
        except HTTPException as err:
            return error_response(request, err.code or 500, err.description or err.name)
        except Exception as err:
            log.exception("internal error in %s", request.path)
            return error_response(request, 500, f"internal error: {type(err).__name__}; see the TensorBoard log")

    return app  # type: ignore[no-any-return]
