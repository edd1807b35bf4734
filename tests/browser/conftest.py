"""Browser tests: the real ``tensorboard`` CLI in a subprocess, driven by Python playwright on Debian's Chromium.

Never runs ``playwright install``: Chromium comes from ``apt-get install -y chromium`` (/usr/bin/chromium).
Set ``PTP_CHROMIUM`` to use another binary. Without a browser these tests fail (make test installs one).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FRONTEND = REPO / "frontend"
STATIC = REPO / "tb_plugin" / "static"
REAL_TRACES = REPO / "tests" / "data"  # real traces copied into the repository: see tests/data/README.md
SAMPLES = REPO / "samples"
CHROMIUM = os.environ.get("PTP_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    # the pages of one site share a renderer process (see browser_context)
    "--process-per-site",
]
PLUGIN = "pytorch_profiler"
PLUGIN_IFRAME = 'iframe[src*="plugin_entry.html"]'

# The known trace used for exact checks: torchvision ResNet-18 on an H200, two spans of one worker.
RESNET_DIR = REAL_TRACES / "h200" / "resnet18_workers0"
RESNET_SPAN_FILES = sorted(RESNET_DIR.glob("*.pt.trace.json.gz")) if RESNET_DIR.is_dir() else []
CORRUPT_FILE = "bad_worker.1234.pt.trace.json.gz"


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "browser: drives TensorBoard + the plugin frontend in headless Chromium")


def _tensorboard_bin() -> str:
    candidate = Path(sys.executable).with_name("tensorboard")
    return str(candidate) if candidate.exists() else (shutil.which("tensorboard") or "tensorboard")


# --------------------------------------------------------------------------------------------- prerequisites


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get update && apt-get install -y chromium (make test does this)")
    return CHROMIUM


@pytest.fixture(scope="session")
def frontend_built() -> Path:
    """The bundle must exist (``npm ci && npm run build`` in frontend/); build it here if npm is available. Under
    pytest-xdist every worker asks: a lock file lets one build while the others wait for it."""
    import fcntl

    index = STATIC / "index.js"
    with open(FRONTEND / ".build-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not index.exists():
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail("tb_plugin/static/index.js is missing and npm is not installed: build the frontend first")
            if not (FRONTEND / "node_modules").exists():
                subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=FRONTEND, check=True)
            subprocess.run([npm, "run", "build"], cwd=FRONTEND, check=True)
    assert index.exists()
    return STATIC


@pytest.fixture(scope="session")
def resnet_files() -> list[Path]:
    if len(RESNET_SPAN_FILES) < 2:
        pytest.fail(f"the real traces are missing from tests/data ({RESNET_DIR})")
    return RESNET_SPAN_FILES


def trace_facts(path: Path) -> dict[str, Any]:
    """Independent facts about a trace file, read straight from its JSON (not through the plugin)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    events = data.get("traceEvents", [])
    cats: dict[str, int] = {}
    for ev in events:
        cat = ev.get("cat")
        if cat:
            cats[cat] = cats.get(cat, 0) + 1
    return {
        "events": len(events),
        "categories": cats,
        "devices": [d.get("name") for d in data.get("deviceProperties", [])],
    }


# --------------------------------------------------------------------------------------------- logdirs


def link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        dst.symlink_to(src)
    except OSError:
        shutil.copyfile(src, dst)


@pytest.fixture(scope="session")
def main_logdir(tmp_path_factory: pytest.TempPathFactory, resnet_files: list[Path]) -> Path:
    """Run ``resnet18`` (worker vm_562, spans 1 and 2) and run ``broken`` (one corrupt file)."""
    root = tmp_path_factory.mktemp("logdir_main")
    for f in resnet_files:
        link_or_copy(f, root / "resnet18" / f.name)
    broken = root / "broken"
    broken.mkdir()
    # A gzip stream whose JSON stops in the middle of the first event.
    (broken / CORRUPT_FILE).write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "aten::'))
    return root


@pytest.fixture(scope="session")
def empty_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logdir_empty")


# --------------------------------------------------------------------------------------------- tensorboard


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class TensorBoard:
    url: str
    logdir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    extra: dict[str, Any] = field(default_factory=dict)

    def plugin_url(self, route: str) -> str:
        return f"{self.url}/data/plugin/{PLUGIN}/{route.lstrip('/')}"

    def get_json(self, route: str) -> Any:
        with urllib.request.urlopen(self.plugin_url(route), timeout=10) as resp:
            return json.loads(resp.read())

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def wait_settled(self, timeout: float = 90.0) -> dict[str, Any]:
        """Poll ./runs until the scan finished and no span is queued or loading."""
        deadline = time.monotonic() + timeout
        body: dict[str, Any] = {}
        while time.monotonic() < deadline:
            body = self.get_json("runs")
            states = [s["state"] for r in body["runs"] for w in r["workers"] for s in w["spans"]]
            if not body.get("scanning") and states and all(s in ("ready", "failed") for s in states):
                return body
            time.sleep(0.1)
        raise AssertionError(f"spans did not settle in {timeout}s: {json.dumps(body)[:2000]}")


def start_tensorboard(logdir: Path, workdir: Path, *extra_args: str, path_prefix: str = "") -> TensorBoard:
    """A TensorBoard on a free port. Under pytest-xdist another worker may take the port between ``free_port``
    and TensorBoard's bind: a start that fails to bind is tried again on another port."""
    for attempt in range(3):
        try:
            return _start_tensorboard(logdir, workdir, *extra_args, path_prefix=path_prefix)
        except PortTaken:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class PortTaken(RuntimeError):
    pass


def _start_tensorboard(logdir: Path, workdir: Path, *extra_args: str, path_prefix: str = "") -> TensorBoard:
    port = free_port()
    log_path = workdir / f"tensorboard-{port}.log"
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(workdir / "cache")  # a fresh parse cache: every test run really loads
    env.pop("TB_PLUGIN_SKIP_FRONTEND", None)
    # this checkout's plugin, not whichever one the venv's (editable) install points at: a second worktree sharing
    # the venv would otherwise serve the other tree's backend and bundle
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    cmd = [
        _tensorboard_bin(),
        "--logdir", str(logdir),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--load_fast=false",
        *extra_args,
    ]
    if path_prefix:
        cmd += ["--path_prefix", path_prefix]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}{path_prefix}"
    tb = TensorBoard(url=url, logdir=logdir, process=proc, log_path=log_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if "could not bind" in tb.log() or "already in use" in tb.log():
                raise PortTaken(tb.log())
            raise RuntimeError(f"tensorboard exited with {proc.returncode}:\n{tb.log()}")
        try:
            with urllib.request.urlopen(f"{url}/data/plugins_listing", timeout=2) as resp:
                listing = json.loads(resp.read())
            if PLUGIN in listing:
                return tb
            raise RuntimeError(f"plugin {PLUGIN!r} is not in TensorBoard's plugin listing: {sorted(listing)}")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    stop_tensorboard(tb)
    raise RuntimeError(f"tensorboard did not answer within 60 s:\n{tb.log()}")


# The pages the ``page`` fixture opened and has not closed yet: a TensorBoard is stopped only once none shows it.
_LIVE_PAGES: list[Any] = []
_SHARED: list[SharedContext] = []  # the worker's shared context (browser_context), while it is open


def leave_pages_of(tb: TensorBoard) -> None:
    """Move every open page that shows ``tb`` to about:blank, so that no request of theirs (a view's chunk loaded
    late, a poll) is cut off by the server going away: the browser would log it as a console error of the test
    (net::ERR_CONTENT_LENGTH_MISMATCH), long after the test's own assertions passed."""
    shells = [shared.shell for shared in _SHARED if shared.shell is not None]
    for pg in [*_LIVE_PAGES, *(p for p in shells if p not in _LIVE_PAGES)]:
        if not pg.is_closed() and any(f.url == tb.url or f.url.startswith(f"{tb.url}/") for f in pg.frames):
            pg.goto("about:blank")


def stop_tensorboard(tb: TensorBoard) -> None:
    leave_pages_of(tb)
    if tb.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(tb.process.pid, signal.SIGTERM)
        try:
            tb.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(tb.process.pid, signal.SIGKILL)
            tb.process.wait(timeout=10)


@pytest.fixture(scope="session")
def tb_factory(tmp_path_factory: pytest.TempPathFactory, frontend_built: Path) -> Iterator[Callable[..., TensorBoard]]:
    started: list[TensorBoard] = []
    workdir = tmp_path_factory.mktemp("tensorboard")

    def make(logdir: Path, *extra_args: str, path_prefix: str = "") -> TensorBoard:
        tb = start_tensorboard(logdir, workdir, *extra_args, path_prefix=path_prefix)
        started.append(tb)
        return tb

    yield make
    for tb in started:
        stop_tensorboard(tb)


@pytest.fixture(scope="session")
def tb_main(tb_factory: Callable[..., TensorBoard], main_logdir: Path) -> TensorBoard:
    return tb_factory(main_logdir)


# --------------------------------------------------------------------------------------------- browser


@pytest.fixture(scope="session")
def browser(chromium_path: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@dataclass
class ConsoleLog:
    errors: list[str] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(a in e for a in self.allowed)]


@pytest.fixture
def console() -> ConsoleLog:
    return ConsoleLog()


VIEWPORT = {"width": 1400, "height": 900}
KEEPER_URL = "http://127.0.0.1/ptp-test-keeper"


@dataclass
class SharedContext:
    context: Any
    keeper: Any  # an idle page of http://127.0.0.1 that keeps the site's renderer process alive between tests
    shell: Any = None  # the page handed from test to test (see ``page``), once one asked for it


@pytest.fixture(scope="session")
def browser_context(browser: Any) -> Iterator[SharedContext]:
    """One browser context per worker. Under ``--process-per-site`` its pages of http://127.0.0.1 (every
    TensorBoard, whatever its port) share one renderer process, kept alive between tests by an idle keeper page:
    TensorBoard's scripts, the plugin's and plotly are parsed and compiled once per worker, not once per test
    (about 2 s of the 4 a page takes to open on the 2-core machine). Every page is still new, and all else a
    context keeps between pages (storage, cookies, permissions, routes) is reset after every test by ``page``, so
    each test starts from what a fresh context shows; tests that need other context options (offline, another
    origin) make their own."""
    context = browser.new_context(viewport=VIEWPORT)
    keeper = context.new_page()
    keeper.route(KEEPER_URL, lambda route: route.fulfill(status=200, content_type="text/html", body="<p>keeper</p>"))
    keeper.goto(KEEPER_URL)
    keeper.unroute_all()
    shared = SharedContext(context, keeper)
    _SHARED.append(shared)
    yield shared
    _SHARED.remove(shared)
    context.close()


def origin_of(url: str) -> str | None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else None


def reset_context(shared: SharedContext, origins: set[str]) -> None:
    """Leave the shared context as a fresh one would be, but for its HTTP cache and renderer: close the pages the
    test opened, drop the routes, cookies and permissions it added, and clear every storage (local, session,
    IndexedDB, service workers, cache storage) of the origins its pages visited."""
    context = shared.context
    for pg in list(context.pages):
        if pg is not shared.keeper:
            origins |= {o for f in pg.frames if (o := origin_of(f.url)) is not None}
            if pg is not shared.shell:
                pg.close()
    cdp = context.new_cdp_session(shared.keeper)
    for origin in sorted(origins):
        cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
    cdp.detach()
    context.unroute_all(behavior="ignoreErrors")
    context.clear_cookies()
    context.clear_permissions()


# Chromium keeps at most 50 session-history entries a page (the oldest go): the shell page is replaced before a test
# could reach that, so a test that counts the entries it adds (test_history) finds room for them
HISTORY_KEPT = 50
HISTORY_ROOM = 20


def shell_page(shared: SharedContext) -> Any:
    """The worker's page handed from test to test (opened on first use, again if a test closed it or when its
    history has less than ``HISTORY_ROOM`` entries left)."""
    shell = shared.shell
    full = HISTORY_KEPT - HISTORY_ROOM
    if shell is not None and not shell.is_closed() and shell.evaluate("() => history.length") > full:
        shell.close()
    if shared.shell is None or shared.shell.is_closed():
        shared.shell = shared.context.new_page()
    return shared.shell


@pytest.fixture
def page(request: pytest.FixtureRequest, browser_context: SharedContext, console: ConsoleLog) -> Iterator[Any]:
    """A page that records console errors and uncaught exceptions of every frame; the test fails if any appeared
    that the test did not expect (``console.allowed``). Its context is shared (``browser_context``) and reset after
    the test.

    The page itself is the worker's *shell page*, handed from test to test: a test that opens the plugin on the
    TensorBoard it already shows gets the plugin's frame reloaded with the test's URL state (``open_plugin``), not
    TensorBoard's own app started again (about two thirds of the CPU a page load takes on the 2-core machine). The
    plugin then starts as on a new page: a new document, its state read from the URL (the entry replaced: no
    history state, no new entry; Back from a test's first entry would reach the previous test's, and no test goes
    back further than it went), storage cleared. Its routes, listeners and viewport are undone after each test.
    What a page keeps beyond that (an emulated colour scheme, an init script) is for a test marked ``fresh_page``,
    which gets a new page."""
    fresh = request.node.get_closest_marker("fresh_page") is not None
    pg = browser_context.context.new_page() if fresh else shell_page(browser_context)
    pg.set_default_timeout(30_000)
    origins: set[str] = set()

    def on_console(msg: Any) -> None:
        if msg.type == "error":
            console.errors.append(f"console.error: {msg.text} @ {msg.location.get('url', '')}")

    def on_error(err: Any) -> None:
        console.errors.append(f"pageerror: {err}")

    def on_navigated(frame: Any) -> None:
        origin = origin_of(frame.url)
        if origin is not None:
            origins.add(origin)

    listeners = (("console", on_console), ("pageerror", on_error), ("framenavigated", on_navigated))
    for event, listener in listeners:
        pg.on(event, listener)
    _LIVE_PAGES.append(pg)
    try:
        yield pg
    finally:
        _LIVE_PAGES.remove(pg)
        for event, listener in listeners:
            pg.remove_listener(event, listener)
    if not fresh and not pg.is_closed():
        if request.node.stash.get(FAILED, False):  # a page a test failed on is not handed on: the next gets a new one
            pg.close()
        else:
            park(pg)
            pg.unroute_all(behavior="ignoreErrors")
            pg.set_viewport_size(VIEWPORT)
    reset_context(browser_context, origins)
    assert not console.unexpected(), "console errors:\n" + "\n".join(console.unexpected())


FAILED = pytest.StashKey[bool]()  # the test's call failed (set by pytest_runtest_makereport)

# Whether a page and its plugin frame still paint: each answers once its next animation frame runs, or says it
# stalled after a second (Playwright's clicks wait for two animation frames, and wait_for_function polls on them).
FRAMES_TICKING = """() => new Promise(done => {
    const state = `${document.visibilityState}, focus ${document.hasFocus()}`;
    requestAnimationFrame(() => done(`ticking (${state})`));
    setTimeout(() => done(`stalled: no animation frame in 1 s (${state})`), 1000);
})"""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A browser test that failed: its page is replaced before the next test (``page``), and the report says whether
    the page and its plugin frame were still painting, so a timeout can be told from a browser that stopped
    rendering."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    item.stash[FAILED] = True
    pg = getattr(item, "funcargs", {}).get("page")
    if pg is not None and not pg.is_closed():
        report.sections.append(("animation frames", _frames_ticking(pg)))


def _frames_ticking(pg: Any) -> str:
    lines = []
    for name, target in (("page", pg), ("plugin frame", _plugin_frame(pg))):
        if target is None:
            continue
        try:
            lines.append(f"{name}: {target.evaluate(FRAMES_TICKING)}")
        except Exception as err:  # noqa: BLE001 - a page in any state: the report says what happened
            lines.append(f"{name}: not asked ({type(err).__name__}: {err})")
    return "\n".join(lines)


def _plugin_frame(pg: Any) -> Any:
    try:
        handle = pg.query_selector(PLUGIN_IFRAME)
        return handle.content_frame() if handle is not None else None
    except Exception:  # noqa: BLE001 - no frame to ask
        return None


def open_plugin(page: Any, tb: TensorBoard, hash_state: str = "") -> Any:
    """Open TensorBoard on the plugin's tab and return the plugin iframe's Frame once the shell rendered. The plugin
    always starts anew, its state read from this URL: on the shell page that shows ``tb`` already its frame is
    reloaded (``_reopen``), on any other page TensorBoard is loaded (never a same-document change of the hash)."""
    url = f"{tb.url}/#{PLUGIN}{hash_state}"
    frame = _reopen(page, tb, url)
    if frame is None:
        if page.url.startswith(f"{tb.url}/"):
            page.goto("about:blank")
        page.goto(url)
        handle = page.wait_for_selector(PLUGIN_IFRAME, state="attached")
        frame = handle.content_frame()
        assert frame is not None
    frame.wait_for_selector(".ptp-app")
    return frame


def _reopen(page: Any, tb: TensorBoard, url: str) -> Any:
    """On a shell page that shows ``tb`` on the plugin's tab: the top URL replaced by ``url`` (no history entry, no
    history state) and the plugin's frame loaded again from its own URL (``park`` emptied it after the last test), as
    a new page would start it; the frame once its new document rendered the shell. None where the page shows something else (it is then loaded anew)."""
    if not any(page is shared.shell for shared in _SHARED) or not page.url.startswith(f"{tb.url}/#{PLUGIN}"):
        return None
    handle = page.query_selector(PLUGIN_IFRAME)
    if handle is None or not handle.is_visible() or not handle.get_attribute("src"):
        return None
    frame = handle.content_frame()
    if frame is None:
        return None
    # a second open in one test: the plugin shown is emptied first, so nothing it still had to write (a URL state
    # debounced after a pan) lands on the URL given here, and its shell is not taken for the new one's (a test's
    # first open finds it emptied already, by ``park`` after the test before)
    if handle.evaluate("f => f.contentDocument?.URL") != "about:blank":
        park(page)
        if not page.url.startswith(f"{tb.url}/#{PLUGIN}"):  # parking failed and left TensorBoard: load it anew
            return None
    page.evaluate("u => history.replaceState(null, '', u)", url)
    handle.evaluate("f => f.contentWindow.location.replace(f.src)")
    page.wait_for_function("""sel => {
        const f = document.querySelector(sel);
        return !!f && !!f.contentDocument && f.contentDocument.URL !== 'about:blank'
            && !!f.contentDocument.querySelector('.ptp-app');
    }""", arg=PLUGIN_IFRAME)
    return frame


def park(page: Any) -> None:
    """After a test on the shell page: its plugin frame emptied (about:blank, in place of its entry: no history
    entry), so that nothing the plugin had scheduled (a poll, a window asked after the viewport is reset) reaches
    the next test's request listeners; ``_reopen`` loads the frame's own URL again."""
    try:
        handle = page.query_selector(PLUGIN_IFRAME)
        if handle is not None:
            handle.evaluate("f => { if (f.contentWindow) f.contentWindow.location.replace('about:blank'); }")
            page.wait_for_function("sel => document.querySelector(sel)?.contentDocument?.URL === 'about:blank'",
                                   arg=PLUGIN_IFRAME, timeout=10_000)
    except Exception:  # noqa: BLE001 - a page in a state of its own: the next test loads TensorBoard anew
        page.goto("about:blank")


def top_hash(page: Any) -> dict[str, str]:
    """TensorBoard's URL hash as a dict (the bare part is ``__tab__``), decoded the way TensorBoard does."""
    from urllib.parse import unquote

    raw = page.evaluate("() => window.location.hash").lstrip("#")
    out: dict[str, str] = {}
    for part in raw.split("&"):
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            out[unquote(k)] = unquote(v)
        else:
            out["__tab__"] = unquote(part)
    return out


# --------------------------------------------------------------------------------------------- view pages

SAMPLE_RUNS = ("transformer_bf16", "resnet_slow_dataloader", "cpu_only")


@pytest.fixture(scope="session")
def samples_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs from ``samples/`` (linked): a bf16 transformer, a DataLoader-bound ResNet (2 spans) and a CPU-only MLP."""
    root = tmp_path_factory.mktemp("logdir_samples")
    for run in SAMPLE_RUNS:
        files = sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))
        if not files:
            pytest.fail(f"samples/{run} has no trace files")
        for f in files:
            link_or_copy(f, root / run / f.name)
    return root


@pytest.fixture(scope="session")
def tb_samples(tb_factory: Callable[..., TensorBoard], samples_logdir: Path) -> TensorBoard:
    tb = tb_factory(samples_logdir)
    tb.wait_settled(timeout=180)
    return tb


# --------------------------------------------------------------------------------------------- Memory and Module pages

V100_RESNET_DIR = REAL_TRACES / "kineto_v100" / "resnet50_num_workers_0"


@pytest.fixture(scope="session")
def memory_module_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``transformer_bf16`` and ``lightning_mlp`` from samples/, and ``v100_resnet50``: the first span of an
    old-format (PyTorch 1.9) V100 trace whose memory records have no addresses (statistics but no curve)."""
    root = tmp_path_factory.mktemp("logdir_memory_module")
    for run in ("transformer_bf16", "lightning_mlp"):
        files = sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))
        if not files:
            pytest.fail(f"samples/{run} has no trace files")
        for f in files:
            link_or_copy(f, root / run / f.name)
    old = sorted(V100_RESNET_DIR.glob("*.pt.trace.json.gz")) if V100_RESNET_DIR.is_dir() else []
    if not old:
        pytest.fail(f"the real traces are missing from tests/data ({V100_RESNET_DIR})")
    link_or_copy(old[0], root / "v100_resnet50" / old[0].name)
    return root


@pytest.fixture(scope="session")
def tb_memory_module(tb_factory: Callable[..., TensorBoard], memory_module_logdir: Path) -> TensorBoard:
    tb = tb_factory(memory_module_logdir)
    tb.wait_settled(timeout=180)
    return tb


# --------------------------------------------------------------------------------------------- Distributed / Diff pages

DDP_DIR = REAL_TRACES / "h200" / "ddp_resnet50"
KINETO_DIR = REAL_TRACES / "kineto_v100"


def _first_trace(folder: Path) -> Path:
    files = sorted(folder.glob("*.pt.trace.json.gz"))
    if not files:
        pytest.fail(f"the real traces are missing from tests/data ({folder})")
    return files[0]


@pytest.fixture(scope="session")
def dist_diff_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run ``ddp`` (the 2-rank DDP ResNet-50, rank 1 the straggler) and the old-format pair ``resnet50_num_workers_0``
    / ``resnet50_num_workers_4`` (span 1 of each, worker ``worker0``) for the Diff view."""
    root = tmp_path_factory.mktemp("logdir_dist_diff")
    for f in sorted(DDP_DIR.glob("rank*.pt.trace.json.gz")):
        link_or_copy(f, root / "ddp" / f.name)
    for run in ("resnet50_num_workers_0", "resnet50_num_workers_4"):
        f = _first_trace(KINETO_DIR / run)
        link_or_copy(f, root / run / f.name)
    if len(list((root / "ddp").iterdir())) != 2:
        pytest.fail(f"{DDP_DIR} should hold rank0 and rank1 traces")
    return root


@pytest.fixture(scope="session")
def tb_dist_diff(tb_factory: Callable[..., TensorBoard], dist_diff_logdir: Path) -> TensorBoard:
    tb = tb_factory(dist_diff_logdir)
    tb.wait_settled(timeout=300)
    return tb


# --------------------------------------------------------------------------------------------- shared page helpers

ARTIFACTS = REPO / "test-artifacts"
DOCS_IMAGES = REPO / "docs" / "images"


def table_rows(frame: Any, testid: str) -> list[dict[str, str]]:
    """The shown rows of a data table: {column key: cell text} (+ '_value:<key>' for numeric data-value)."""
    rows: list[dict[str, str]] = frame.evaluate(
        """id => [...document.querySelectorAll(`[data-testid=${id}] tbody tr[data-testid=row]`)].map(tr => {
            const out = {};
            for (const td of tr.querySelectorAll('td[data-col]')) {
                out[td.dataset.col] = td.innerText.trim();
                if (td.dataset.value !== undefined) out['_value:' + td.dataset.col] = td.dataset.value;
            }
            return out;
        })""",
        testid,
    )
    return rows


def read_csv(text: str) -> list[dict[str, str]]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


def save_screenshot(page: Any, name: str, full_height: bool = False, max_height: int = 2400) -> None:
    """docs/images/<name> (1400 wide; 900 high, or the whole page with ``full_height``, up to ``max_height``), for
    ``make screenshots``. The page is measured at 900 high: measured in a taller window (the last shot's), a short
    page would fill that window's height with empty space."""
    page.set_viewport_size({"width": 1400, "height": 900})
    if full_height:
        page.wait_for_timeout(500)  # the frame lays out at the new size
        frame = page.wait_for_selector('iframe[src*="plugin_entry.html"]').content_frame()
        height = frame.evaluate("() => document.documentElement.scrollHeight")
        page.set_viewport_size({"width": 1400, "height": max(900, min(int(height) + 170, max_height))})
    page.wait_for_timeout(800)  # plotly resizes on the next frame
    target = DOCS_IMAGES / name
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target))
    print(f"wrote {target.relative_to(REPO)}")
