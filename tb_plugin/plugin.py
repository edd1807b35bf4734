"""TensorBoard wiring only: flags, the plugin object, and the route table. No computation lives here.

Import-light: TensorBoard imports this module (the entry point) and calls ``fix_flags`` before it builds the
plugin; the loader's fork server starts there (``jobs.forkserver.start_early``), and the plugin's own modules
(the workspace, the API and, through them, the analyses) are imported only when the plugin is built, while the
fork server imports its share beside them.
"""

from __future__ import annotations

import argparse
import logging
import sys
from importlib import metadata
from typing import TYPE_CHECKING, Any

from tensorboard.plugins import base_plugin

from .jobs import DEFAULT_LOAD_TIMEOUT
from .jobs.forkserver import start_early

if TYPE_CHECKING:
    from .workspace import Workspace

log = logging.getLogger(__name__)

PLUGIN_NAME = "pytorch_profiler"
OLD_PLUGIN_CONFLICT = (
    "torch-tb-profiler (the old PyTorch profiler plugin) is installed too and registers the same plugin name "
    f"'{PLUGIN_NAME}'; TensorBoard cannot serve both, so pytorch-tb-profiler stays disabled. "
    "Fix: pip uninstall torch-tb-profiler"
)


def old_plugin_installed() -> bool:
    try:
        metadata.distribution("torch-tb-profiler")
    except metadata.PackageNotFoundError:
        return False
    return True


# the module of what the loader processes store beside the parse (``warm.WarmViews``): the fork server preloads it
STORED_MODULE = "tb_plugin.api.warm"


def roots_from_flags(flags: Any) -> list[tuple[str | None, str]]:
    """``--logdir`` (one path or URL) or ``--logdir_spec`` (``name:path,...``) as (name, path) pairs."""
    from .catalog.catalog import parse_logdir_spec

    logdir = getattr(flags, "logdir", None) or ""
    if logdir:
        return [(None, logdir)]
    return parse_logdir_spec(getattr(flags, "logdir_spec", None) or "")


class ProfilerPlugin(base_plugin.TBPlugin):  # type: ignore[misc]
    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext) -> None:
        from .api import warm
        from .api.gc_pauses import freeze_startup_objects
        from .api.params import parse_override
        from .api.routes import Api
        from .workspace import Workspace

        flags = context.flags or argparse.Namespace()
        peaks = parse_override(getattr(flags, "profiler_peaks", None))
        self.workspace: Workspace = Workspace(
            roots_from_flags(flags) or ([(None, context.logdir)] if context.logdir else []),
            cache_dir=getattr(flags, "profiler_cache_dir", None),
            workers=getattr(flags, "profiler_workers", None),
            rescan_seconds=float(getattr(flags, "profiler_rescan_interval", 10.0)),
            cache_max_bytes=int(getattr(flags, "profiler_cache_max_mb", 4096)) << 20,
            on_ready=warm.precompute,
            load_timeout=float(getattr(flags, "profiler_load_timeout", DEFAULT_LOAD_TIMEOUT)),
            any_json=bool(getattr(flags, "profiler_any_json", False)),
            dask_scheduler=getattr(flags, "profiler_dask_scheduler", None) or None,
            dask_timeout=float(getattr(flags, "profiler_dask_timeout", 10.0)),
            stored=warm.WarmViews(peaks),
        ).start()
        self._api = Api(self.workspace, PLUGIN_NAME, peaks, capture=bool(getattr(flags, "profiler_capture", False)))
        freeze_startup_objects()  # the modules just imported leave the collector's full scans (api/gc_pauses.py)

    def get_plugin_apps(self) -> dict[str, Any]:
        return self._api.apps()

    def is_active(self) -> bool:
        # O(1), never waits for a scan. Active whenever a logdir is set, even before traces appear there: the
        # tab then shows how to record a trace, instead of hiding under TensorBoard's INACTIVE menu.
        return self.workspace.has_roots() or self.workspace.has_runs()

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="PyTorch Profiler",
                                            disable_reload=True)


class ProfilerLoader(base_plugin.TBLoader):  # type: ignore[misc]
    """The ``tensorboard_plugins`` entry point: adds the plugin's flags, then builds the plugin."""

    def define_flags(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("pytorch_profiler")
        group.add_argument("--profiler_rescan_interval", type=float, default=10.0, metavar="SECONDS",
                           help="How often the PyTorch Profiler plugin rescans the logdir for new or removed "
                                "traces (0: scan once). Default 10.")
        group.add_argument("--profiler_workers", type=int, default=None, metavar="N",
                           help="Processes that parse traces in parallel (default: the cores but one, as many "
                                "as memory allows).")
        group.add_argument("--profiler_cache_dir", default=None, metavar="DIR_OR_URL",
                           help="Where parsed traces are cached (default: ~/.cache/pytorch-tb-profiler). A shared "
                                "folder or a URL (s3://, az://, gs://) that `pytorch-tb-profiler preprocess --cache` "
                                "filled: preprocessed traces are shown without parsing, and only the ranks opened "
                                "are loaded.")
        group.add_argument("--profiler_dask_scheduler", default=None, metavar="ADDRESS",
                           help="Parse traces on this Dask cluster (e.g. tcp://scheduler:8786) instead of in local "
                                "processes; its workers write into --profiler_cache_dir, which they must reach too. "
                                'Needs pip install "pytorch-tb-profiler[dask]".')
        group.add_argument("--profiler_dask_timeout", type=float, default=10.0, metavar="SECONDS",
                           help="How long to wait at start for --profiler_dask_scheduler to answer before parsing "
                                "locally instead. Default 10.")
        group.add_argument("--profiler_cache_max_mb", type=int, default=4096, metavar="MB",
                           help="Size bound of the parse cache; least recently used parses go first.")
        group.add_argument("--profiler_load_timeout", type=float, default=DEFAULT_LOAD_TIMEOUT, metavar="SECONDS",
                           help="A trace still loading after this long is stopped and shown as failed, which frees "
                                f"its loader process for the others (0: no limit). Default {DEFAULT_LOAD_TIMEOUT:g}.")
        group.add_argument("--profiler_peaks", default=None, metavar="SPEC",
                           help="Device peaks for MFU and the roofline, replacing the built-in table's (clocks or "
                                "power caps below the datasheet's, or a GPU not in the table): a table entry "
                                "(device=H100-SXM) and/or figures in TFLOP/s and GB/s, e.g. "
                                "'bf16=700,fp32=55,bw=3000' (classes fp64, fp64_tensor, fp32, tf32, bf16, fp16, fp8).")
        group.add_argument("--profiler_capture", action="store_true", default=False,
                           help="Let the page's Capture dialog ask jobs running with tb_plugin.capture enabled for "
                                "a trace of their next steps: TensorBoard then writes request files into run "
                                "folders' .capture/ (nothing else, ever). Off by default: anyone who can open the "
                                "page could make the jobs profile themselves.")
        group.add_argument("--profiler_any_json", action="store_true", default=False,
                           help="Also show *.json and *.json.gz files not named *.pt.trace.json (export_chrome_trace "
                                "output, HTA's rank-0.json.gz) whose content is a Chrome/Kineto trace; other JSON "
                                "files are left out.")

    def fix_flags(self, flags: argparse.Namespace) -> None:
        if getattr(flags, "logdir", None) or getattr(flags, "logdir_spec", None):
            start_early([STORED_MODULE])  # before the checks below import the analyses
        from .api.params import parse_override

        try:
            parse_override(getattr(flags, "profiler_peaks", None))
        except ValueError as err:
            raise base_plugin.FlagsError(f"--profiler_peaks: {err}") from None
        if getattr(flags, "profiler_workers", None) is not None and flags.profiler_workers < 1:
            raise base_plugin.FlagsError("--profiler_workers must be at least 1")
        if getattr(flags, "profiler_rescan_interval", 0) < 0:
            raise base_plugin.FlagsError("--profiler_rescan_interval must not be negative")
        if getattr(flags, "profiler_load_timeout", 0) < 0:
            raise base_plugin.FlagsError("--profiler_load_timeout must not be negative")
        if getattr(flags, "profiler_dask_timeout", 10.0) <= 0:
            raise base_plugin.FlagsError("--profiler_dask_timeout must be a positive number of seconds")
        if getattr(flags, "profiler_dask_scheduler", None) and not getattr(flags, "profiler_cache_dir", None):
            raise base_plugin.FlagsError("--profiler_dask_scheduler needs --profiler_cache_dir: a cache the cluster's "
                                         "workers and this server both reach (a shared folder or a URL)")

    def load(self, context: base_plugin.TBContext) -> ProfilerPlugin | None:
        if old_plugin_installed():
            log.error(OLD_PLUGIN_CONFLICT)
            print(f"ERROR: {OLD_PLUGIN_CONFLICT}", file=sys.stderr)
            return None
        return ProfilerPlugin(context)
