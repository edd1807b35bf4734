"""The workspace's listing of its logdirs: the catalog over every logdir that could be opened, a logdir that could
not be opened tried again at the next scan (an HDFS namenode that was down) unless a package is missing (that
needs a restart), and each one's reason said where the user looks, with no secret in it."""

from __future__ import annotations

from ..catalog import remote
from ..catalog.catalog import Catalog, Root, TraceFile
from ..catalog.storage import Storage


class LogdirScanner:
    """Lists the logdirs ``roots`` ((name or None, path or URL) each); one scan at a time (the scan thread)."""

    def __init__(self, roots: list[tuple[str | None, str]], any_json: bool) -> None:
        self.roots = roots
        self._any_json = any_json
        self.catalog: Catalog | None = None
        self._root_errors: list[str] = []
        self._unopened: list[tuple[str | None, str]] = []  # logdirs whose storage could not be opened yet
        self._lasting_errors: list[str] = []  # logdirs that cannot open until a restart (a package is missing)

    def scan(self) -> tuple[Catalog, list[TraceFile]]:
        """The catalog (made, or its unopened logdirs tried again) and the trace files it lists now."""
        if self.catalog is None:
            self.catalog = Catalog([], any_json=self._any_json)
            self._unopened, self._lasting_errors = list(self.roots), []
            self._open_roots(self.catalog)
        elif self._unopened:
            self._open_roots(self.catalog)
        return self.catalog, self.catalog.scan()

    @property
    def pending(self) -> bool:
        """Whether the catalog has files still settling (the next scan comes sooner)."""
        return bool(self.catalog and self.catalog.pending)

    def errors(self) -> list[str]:
        """The logdirs that could not be opened, and the catalog's own errors, each with its reason."""
        catalog_errors = list(self.catalog.errors.values()) if self.catalog else []
        return self._root_errors + catalog_errors

    def _open_roots(self, catalog: Catalog) -> None:
        """Open the logdirs not open yet; one that fails says why in ``errors()`` and is tried again next scan
        (an HDFS namenode that was down), except when a package is missing, which needs a restart anyway."""
        errors: list[str] = []
        still: list[tuple[str | None, str]] = []
        for name, path in self._unopened:
            shown = remote.scrub_url(path)
            try:
                catalog.roots.append(Root(name, Storage(path)))
            except remote.MissingBackend as err:
                self._lasting_errors.append(f"cannot open logdir {shown}: {err}")
            except remote.RemoteError as err:  # a URL of no known form, a store that cannot be reached: what to do
                errors.append(remote.scrub(f"cannot open logdir {shown}: {err}"))
                still.append((name, path))
            except Exception as err:  # noqa: BLE001 - anything else: tell the user, keep the other logdirs going
                errors.append(f"cannot open logdir {shown}: {remote.explain(err, None, 'open')}")
                still.append((name, path))
        self._unopened = still
        self._root_errors = self._lasting_errors + errors
