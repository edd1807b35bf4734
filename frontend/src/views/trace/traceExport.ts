/**
 * Handing the trace to other tools: "Open in Perfetto" (the postMessage protocol of ui.perfetto.dev:
 * open it, PING until it answers PONG, then post the file's bytes) and "Download trace". Where the
 * page may not open windows (VS Code's sandboxed webview: window.open returns null or throws) the
 * caller is told so, with the file's direct link as the fallback.
 */

export const PERFETTO_ORIGIN = "https://ui.perfetto.dev";
export const PERFETTO_URL = `${PERFETTO_ORIGIN}/#!/?hideSidebar=false`;
const PING_MS = 250;
const GIVE_UP_MS = 20_000;

export type ExportStatus =
  | { state: "blocked"; detail: string }
  | { state: "waiting" }
  | { state: "sending" }
  | { state: "sent"; bytes: number }
  | { state: "failed"; detail: string };

export interface PerfettoRequest {
  /** relative URL of ./trace/file for the span */
  fileUrl: string;
  fileName: string;
  title: string;
  onStatus(status: ExportStatus): void;
  signal?: AbortSignal;
}

/** Perfetto's window, opened now (inside the click); null, with the "blocked" status said, when it was not. */
function openPerfettoWindow(req: PerfettoRequest): Window | null {
  let win: Window | null = null;
  let error = "";
  try {
    win = window.open(PERFETTO_URL);
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  if (!win) req.onStatus({ state: "blocked", detail: error || "The browser did not open a new window (pop-ups are blocked here)." });
  return win;
}

/** The trace file's bytes, fetched while Perfetto opens (an early failure is kept for when Perfetto answers). */
function fetchTrace(url: string, signal: AbortSignal): Promise<ArrayBuffer> {
  const buffer = fetch(url, { signal, credentials: "same-origin" }).then(async (resp) => {
    if (!resp.ok) throw new Error(`The server answered ${resp.status} for the trace file.`);
    return resp.arrayBuffer();
  });
  buffer.catch(() => undefined); // handled once Perfetto answers; not "unhandled" before
  return buffer;
}

/**
 * Must run inside the click handler (browsers allow window.open only from a user gesture).
 * Returns a function that stops waiting.
 */
export function openInPerfetto(req: PerfettoRequest): () => void {
  const target = openPerfettoWindow(req);
  if (!target) return () => undefined;
  let finished = false;
  let ponged = false;
  const started = Date.now();
  const controller = new AbortController();
  const buffer = fetchTrace(req.fileUrl, controller.signal);

  const stop = (): void => {
    finished = true;
    window.clearInterval(timer);
    window.removeEventListener("message", onMessage);
    req.signal?.removeEventListener("abort", onAbort);
  };
  const onAbort = (): void => {
    stop();
    controller.abort();
  };
  const onMessage = (event: MessageEvent): void => {
    if (event.origin !== PERFETTO_ORIGIN || event.source !== target) return;
    if (event.data !== "PONG" || ponged || finished) return;
    ponged = true;
    window.clearInterval(timer);
    req.onStatus({ state: "sending" });
    buffer
      .then((buf) => {
        if (finished) return;
        const bytes = buf.byteLength;
        target.postMessage({ perfetto: { buffer: buf, title: req.title, fileName: req.fileName } }, PERFETTO_ORIGIN, [buf]);
        stop();
        req.onStatus({ state: "sent", bytes });
      })
      .catch((err: unknown) => {
        if (finished) return;
        stop();
        req.onStatus({ state: "failed", detail: err instanceof Error ? err.message : String(err) });
      });
  };
  window.addEventListener("message", onMessage);
  req.signal?.addEventListener("abort", onAbort, { once: true });
  req.onStatus({ state: "waiting" });
  const timer = window.setInterval(() => {
    if (finished || ponged) return;
    if (target.closed) {
      stop();
      controller.abort();
      req.onStatus({ state: "failed", detail: "The Perfetto window was closed before it was ready." });
      return;
    }
    if (Date.now() - started > GIVE_UP_MS) {
      stop();
      controller.abort();
      req.onStatus({ state: "failed", detail: `Perfetto did not answer within ${GIVE_UP_MS / 1000} s (is ui.perfetto.dev reachable from this browser?).` });
      return;
    }
    try {
      // "*": until the new window has navigated to Perfetto it is about:blank, and a PING carries
      // nothing; the trace itself is only posted to PERFETTO_ORIGIN.
      target.postMessage("PING", "*");
    } catch {
      // the window is navigating; try again on the next tick
    }
  }, PING_MS);
  return onAbort;
}

/** The absolute URL of a relative one (for copying a link out of the page). */
export function absoluteUrl(relative: string): string {
  try {
    return new URL(relative, document.baseURI).href;
  } catch {
    return relative;
  }
}
