"""Real storage emulators on 127.0.0.1 for the remote-logdir tests: Azurite (Azure Blob) and moto's S3 server.

Each starts once per session on a free port, is polled until it accepts connections (giving up after 10 s), is
seeded with sample runs from ``samples/`` (those of ``REMOTE_RUNS``), and is stopped at the end. Azurite comes from
``tests/remote/node_modules`` (``make install-dev`` runs ``npm ci`` here); moto from requirements-dev.txt. A missing
emulator fails the tests, never skips them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SAMPLES = REPO / "samples"
AZURITE = HERE / "node_modules" / ".bin" / "azurite-blob"
START_TIMEOUT = 10.0
T = TypeVar("T")

# Azurite's well-known development account (a public constant from Microsoft's documentation, not a secret).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
WRONG_KEY = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXlXcm9uZ0tleQ=="

# Every variable that could point a test at a real cloud or change how it authenticates.
_CLOUD_ENV_PREFIXES = ("AZURE_", "AWS_", "S3_", "GOOGLE_", "GCSFS_", "STORAGE_EMULATOR_HOST", "CLOUDSDK_")


# The sample runs seeded into the emulators (and read from a local folder too, where a test compares the answers):
# one of each shape a remote logdir must list, load and serve, not all 19 sample runs (31 files), whose parses
# would only run the same loader over other bytes (an answer does not depend on where the bytes came from).
#   cpu_only                one worker, one span, CPU only; also the trace at a container's top, the public
#                           container's run and the run deeper in a container
#   ddp_resnet              two workers (rank0, rank1) of a GPU job: kernels, NCCL; the Trace view and the
#                           original's download
#   resnet_slow_dataloader  one worker, two spans (two time stamps in the file names)
REMOTE_RUNS = ("cpu_only", "ddp_resnet", "resnet_slow_dataloader")


def sample_runs() -> dict[str, list[Path]]:
    """run name -> its trace files, from samples/ (each folder is a run): the runs of :data:`REMOTE_RUNS`."""
    runs: dict[str, list[Path]] = {}
    for path in sorted(SAMPLES.glob("*/*.pt.trace.json*")):
        if path.parent.name in REMOTE_RUNS:
            runs.setdefault(path.parent.name, []).append(path)
    assert sorted(runs) == sorted(REMOTE_RUNS), f"sample runs missing under {SAMPLES}: {sorted(runs)}"
    return runs


def sample_span_count() -> int:
    return sum(len(files) for files in sample_runs().values())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def closed_port() -> int:
    """A port nothing listens on (bound and released: connecting is refused at once)."""
    return free_port()


class Exited(RuntimeError):
    """An emulator that exited while starting (under pytest-xdist, most likely: another worker took its port)."""


def on_a_free_port(start: Callable[[int], T]) -> T:
    """``start(port)`` on a free port, tried again on another port if the process exits while starting: another
    pytest-xdist worker may bind the port between ``free_port`` and the emulator's own bind."""
    for attempt in range(3):
        try:
            return start(free_port())
        except Exited:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Exited(f"{what} exited with {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    stop_process(process)
    raise RuntimeError(f"{what} did not accept connections on 127.0.0.1:{port} within {START_TIMEOUT:.0f} s:\n"
                       f"{log.read_text(errors='replace')[-3000:]}")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No cloud credentials or endpoints from the machine leak into a test; it sets what it needs."""
    for key in list(os.environ):
        if key.startswith(_CLOUD_ENV_PREFIXES):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # botocore must never probe an instance endpoint
    monkeypatch.setenv("AWS_CONFIG_FILE", str(REPO / "tests" / "remote" / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(REPO / "tests" / "remote" / "no-aws-credentials"))
    return monkeypatch


@pytest.fixture(scope="session")
def local_samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeded runs in a local folder, as samples/ has them (settled: older than the catalog's settle time):
    what a remote run's answers are compared with."""
    root = tmp_path_factory.mktemp("samples")
    old = time.time() - 60
    for run, files in sample_runs().items():
        (root / run).mkdir()
        for path in files:
            shutil.copyfile(path, root / run / path.name)
            os.utime(root / run / path.name, (old, old))
    return root


# --------------------------------------------------------------------------------------------- Azurite


@dataclass
class Azurite:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    def connection_string(self, key: str | None = ACCOUNT_KEY, sas: str | None = None) -> str:
        parts = ["DefaultEndpointsProtocol=http", f"AccountName={ACCOUNT}"]
        if key:
            parts.append(f"AccountKey={key}")
        if sas:
            parts.append(f"SharedAccessSignature={sas}")
        parts.append(f"BlobEndpoint={self.endpoint};")
        return ";".join(parts)

    def service(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string())

    def upload(self, container: str, name: str, data: bytes) -> None:
        self.service().get_container_client(container).upload_blob(name, data, overwrite=True)

    def delete(self, container: str, name: str) -> None:
        self.service().get_container_client(container).delete_blob(name)


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """Azurite's blob service with containers: ``profiles`` (private: the samples under ``shared/``, one more run
    deeper under ``team/a/b/``), ``toplevel`` (private: one trace at the container's top) and ``public``
    (anonymous read access: the cpu_only sample under ``demo/``)."""
    if not AZURITE.exists():
        pytest.fail(f"{AZURITE} is missing: run `make install-dev` (npm ci in tests/remote)")
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed; Azurite needs Node.js 18+")
    workdir = tmp_path_factory.mktemp("azurite")

    def start(port: int) -> Azurite:
        log = workdir / f"azurite-{port}.log"
        cmd = [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence", "--silent",
               "--disableTelemetry", "--skipApiVersionCheck", "--loose"]
        with open(log, "wb") as out:
            process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True)
        wait_for_port(port, process, log, "Azurite")
        return Azurite(port, process)

    emulator = on_a_free_port(start)
    process = emulator.process
    try:
        service = emulator.service()
        service.create_container("profiles")
        service.create_container("toplevel")
        service.create_container("public", public_access="container")
        for run, files in sample_runs().items():
            for path in files:
                emulator.upload("profiles", f"shared/{run}/{path.name}", path.read_bytes())
        cpu = sample_runs()["cpu_only"][0]
        emulator.upload("profiles", f"team/a/b/deep_run/{cpu.name}", cpu.read_bytes())
        emulator.upload("toplevel", cpu.name, cpu.read_bytes())
        emulator.upload("public", f"demo/cpu_only/{cpu.name}", cpu.read_bytes())
        time.sleep(2.1)  # older than the catalog's settle time, as finished uploads are
        yield emulator
    finally:
        stop_process(process)


@pytest.fixture
def azure_env(clean_env: pytest.MonkeyPatch, azurite: Azurite) -> pytest.MonkeyPatch:
    """The environment of a user whose connection string points at the emulator."""
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string())
    return clean_env


# --------------------------------------------------------------------------------------------- moto (S3)


@dataclass
class Moto:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id="testing",
                            aws_secret_access_key="testing", region_name="us-east-1")


def start_moto(workdir: Path, **env_overrides: str) -> Moto:
    server = Path(sys.executable).with_name("moto_server")
    if not server.exists():
        pytest.fail(f"{server} is missing: pip install -r requirements-dev.txt (moto[server])")
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CLOUD_ENV_PREFIXES)}
    env.update(env_overrides)

    def start(port: int) -> Moto:
        log = workdir / f"moto-{port}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=out,
                                       stderr=subprocess.STDOUT, cwd=workdir, env=env, start_new_session=True)
        wait_for_port(port, process, log, "moto_server")
        return Moto(port, process)

    return on_a_free_port(start)


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """moto's S3 server with bucket ``profiles`` (the samples under ``shared/``, one trace at the top)."""
    emulator = start_moto(tmp_path_factory.mktemp("moto"))
    process = emulator.process
    try:
        s3 = emulator.client()
        s3.create_bucket(Bucket="profiles")
        for run, files in sample_runs().items():
            for path in files:
                s3.put_object(Bucket="profiles", Key=f"shared/{run}/{path.name}", Body=path.read_bytes())
        cpu = sample_runs()["cpu_only"][0]
        s3.put_object(Bucket="profiles", Key=cpu.name, Body=cpu.read_bytes())
        time.sleep(2.1)
        yield emulator
    finally:
        stop_process(process)


@pytest.fixture
def moto_with_auth(tmp_path: Path) -> Iterator[Moto]:
    """A moto S3 server that checks credentials (it knows none, so every key is refused)."""
    emulator = start_moto(tmp_path, INITIAL_NO_AUTH_ACTION_COUNT="0")
    try:
        yield emulator
    finally:
        stop_process(emulator.process)


@pytest.fixture
def s3_env(clean_env: pytest.MonkeyPatch, moto: Moto) -> pytest.MonkeyPatch:
    clean_env.setenv("AWS_ACCESS_KEY_ID", "testing")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret-value")
    clean_env.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clean_env.setenv("AWS_ENDPOINT_URL", moto.endpoint)
    return clean_env
