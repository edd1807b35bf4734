"""TensorBoard's CLI starts the loader's fork server before the plugin imports its own modules
(``ProfilerLoader.fix_flags`` → ``jobs.forkserver.start_early``): the entry point's import is light, and the fork
server that ``fix_flags`` starts preloads what the loader processes run, the stored views' module included."""

from __future__ import annotations

import json
import subprocess
import sys

from tb_plugin.api import warm
from tb_plugin.jobs.forkserver import WORKER
from tb_plugin.plugin import STORED_MODULE


def _run(code: str) -> object:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_entry_point_imports_none_of_the_plugins_own_modules() -> None:
    new = _run("import json, sys, tensorboard.main; before = set(sys.modules); import tb_plugin.plugin; "
               "print(json.dumps(sorted(set(sys.modules) - before)))")
    ours = {m for m in new if m.startswith("tb_plugin")}  # type: ignore[union-attr]
    assert ours == {"tb_plugin", "tb_plugin.plugin", "tb_plugin.jobs", "tb_plugin.jobs.forkserver"}, ours


def test_fix_flags_starts_the_fork_server_with_what_the_loaders_run() -> None:
    probe = ("import argparse, json, sys; from multiprocessing import forkserver as f; "
             "from tb_plugin.plugin import ProfilerLoader; "
             "ProfilerLoader().fix_flags(argparse.Namespace({flags})); "
             "print(json.dumps([f._forkserver._forkserver_pid is not None, f._forkserver._preload_modules, "
             "'tb_plugin.api.warm' in sys.modules]))")
    started, preload, imported = _run(probe.format(flags="logdir='/nonexistent'"))  # type: ignore[misc]
    assert started and preload == [WORKER, STORED_MODULE] and not imported
    assert warm.WarmViews.__module__ == STORED_MODULE  # the module the loader processes store with
    started, _, _ = _run(probe.format(flags="logdir=''"))  # type: ignore[misc]
    assert not started  # no logdir: nothing to load, no fork server
