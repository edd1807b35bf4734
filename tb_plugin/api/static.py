"""Serves the built frontend (``tb_plugin/static/``) with a traversal guard and explicit content types."""

from __future__ import annotations

import mimetypes
import posixpath
import re
from pathlib import Path

from werkzeug.wrappers import Request, Response

from .http import ApiError, secure

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".map": "application/json",
    ".json": "application/json",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".woff2": "font/woff2",
}

# Served when the bundle was never built, so the tab explains itself instead of staying blank.
_MISSING_BUNDLE = b"""export function render() {
  const p = document.createElement('p');
  p.style.cssText = 'font: 14px sans-serif; padding: 24px';
  p.textContent = 'The pytorch-tb-profiler frontend is not built. Run "make build" in the source tree '
    + '(needs Node.js 18+), or install a released wheel, then reload.';
  document.body.appendChild(p);
}
"""


def relative_path(request: Request, plugin_name: str) -> str:
    """The request path below ``/data/plugin/<name>/``, whatever ``--path_prefix`` is in front."""
    marker = f"/data/plugin/{plugin_name}/"
    path = request.path
    idx = path.find(marker)
    return path[idx + len(marker):] if idx >= 0 else path.lstrip("/")


# esbuild names each shared chunk by a hash of its content (frontend/build.mjs: "chunk-[hash]"): a name never
# serves other bytes, so the browser keeps it without asking again, and keeps its compiled code (V8's code cache
# lives in the HTTP cache: a chunk fetched anew each time, plotly.js's 4.8 MB among them, was compiled anew each
# time). The entry point (70 KB) and the source maps keep their names across builds: fetched again each time (a 304
# would carry no Content-Type, which TensorBoard's response checks log a warning for on every page load).
_HASHED = re.compile(r"chunk-[A-Z0-9]{8}\.js(\.map)?")
IMMUTABLE = "public, max-age=31536000, immutable"

# No file of the bundle has a longer path; a longer one is not looked up (the system would refuse it: a 500).
MAX_PATH_CHARS = 255


def _not_found(rel: str) -> ApiError:
    shown = rel if len(rel) <= 120 else f"{rel[:120]}… ({len(rel):,} characters)"
    return ApiError(404, f"no such file: {shown}")


def serve(request: Request, rel: str, static_dir: Path = STATIC_DIR) -> Response:
    clean = posixpath.normpath(rel.lstrip("/"))
    if clean.startswith("static/"):
        clean = clean[len("static/"):]
    if (clean in ("", ".") or clean.startswith("..") or "\\" in clean or "\x00" in clean
            or len(clean) > MAX_PATH_CHARS):
        raise _not_found(rel)
    try:
        target = (static_dir / clean).resolve()
        found = static_dir.resolve() in target.parents and target.is_file()
    except (OSError, ValueError):  # a name the system refuses (too long a part, a loop of links)
        found = False
    if not found:
        if clean == "index.js":
            response = Response(_MISSING_BUNDLE, content_type=_TYPES[".js"])
            return secure(response)
        raise _not_found(rel)
    suffix = target.suffix.lower()
    content_type = _TYPES.get(suffix) or mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    response = Response(target.read_bytes(), content_type=content_type)
    response.headers["Cache-Control"] = IMMUTABLE if _HASHED.fullmatch(target.name) else "no-cache"
    return secure(response)
