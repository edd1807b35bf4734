"""Packaging for pytorch-tb-profiler.

The frontend bundle (tb_plugin/static/) is build output, not source: ``build_py`` runs ``npm ci && npm run build``
in frontend/ when the bundle is missing, so ``pip install .`` and wheels always contain it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLE = ROOT / "tb_plugin" / "static" / "index.js"


def build_frontend() -> None:
    frontend = ROOT / "frontend"
    if BUNDLE.exists() or not (frontend / "package.json").exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(
            "pytorch-tb-profiler: the frontend bundle tb_plugin/static/index.js is missing and Node.js/npm is not "
            "installed, so it cannot be built. Install Node.js 18+ (https://nodejs.org) and retry, or install a "
            "released wheel, which contains the built frontend."
        )
    if not (frontend / "node_modules").exists():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=frontend, check=True)
    subprocess.run([npm, "run", "build"], cwd=frontend, check=True)


class BuildPyWithFrontend(build_py):
    def run(self) -> None:
        if not os.environ.get("TB_PLUGIN_SKIP_FRONTEND"):
            build_frontend()
        super().run()


def version() -> str:
    for line in (ROOT / "tb_plugin" / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip('"')
    raise RuntimeError("no __version__")


setup(
    name="pytorch-tb-profiler",
    version=version(),
    description="TensorBoard plugin for torch.profiler traces: overview, operators, kernels, timeline, memory, "
                "modules, distributed and diff views",
    long_description=(ROOT / "README.md").read_text() if (ROOT / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    license="BSD-3-Clause",
    python_requires=">=3.10",
    packages=find_packages(include=["tb_plugin", "tb_plugin.*"]),
    package_data={"tb_plugin": ["static/*", "static/**/*"]},
    include_package_data=False,
    install_requires=[
        "tensorboard>=2.14",
        "werkzeug>=2.2",
        "msgspec>=0.18",
        "numpy>=1.24",
        "pyarrow>=14",
        "fsspec>=2023.1",
        # the Python API's tables and the CLI's terminal tables (tb_plugin.sdk, tb_plugin.cli), imported lazily:
        # TensorBoard loading the plugin never imports them
        "pandas>=2.1",
        # the offline HTML report's charts (pytorch-tb-profiler report), plotly.js embedded in the file
        "plotly>=5.18",
        "isal>=1.5; platform_machine=='x86_64' or platform_machine=='AMD64' or platform_machine=='aarch64'",
    ],
    # Remote logdirs (see docs/guide/remote-azure.md, remote-s3.md): one extra per store, [all] for every one.
    extras_require={
        "azure": ["adlfs>=2024.2", "azure-storage-blob>=12.19"],
        "s3": ["s3fs>=2024.2"],
        "gcs": ["gcsfs>=2024.2"],
        "hdfs": ["pyarrow>=14"],
        "all": ["adlfs>=2024.2", "azure-storage-blob>=12.19", "s3fs>=2024.2", "gcsfs>=2024.2", "pyarrow>=14"],
        # Scale-out (docs/guide/scale-out.md): `pytorch-tb-profiler preprocess --dask/--dask-local` and
        # `--profiler_dask_scheduler` run parses on a Dask cluster (a LocalCluster, Kubernetes, SLURM/PBS through
        # dask-jobqueue). Never needed on one machine: the local pool does the same without it.
        "dask": ["dask[distributed]>=2024.1"],
        # Parallel inflate of one big gzip trace (loader/read._parallel_gunzip) on machines of 8+ cores, for text
        # spilled to the scratch file only: there it saved 0.8 s of 3.5 s on the 2 GB trace on the lent 16-core
        # host, while into memory ISA-L on one core was faster at every thread count (benchmarks/README.md).
        "fast-gzip": ["rapidgzip>=0.14"],
    },
    entry_points={
        "tensorboard_plugins": ["pytorch_profiler = tb_plugin.plugin:ProfilerLoader"],
        "console_scripts": ["pytorch-tb-profiler = tb_plugin.cli:console"],
    },
    cmdclass={"build_py": BuildPyWithFrontend},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Environment :: Web Environment",
    ],
)
