/** Progressive answers in the browser: a 409 "computing" is asked again (backing off) and its progress is told,
 * never shown as an error; loadView's line says how far the server is. */
import { container } from "./dom";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ApiError, createApi } from "../src/api";
import { announceComputing, computingLine, computingOf, computingStatus, onComputing, retryDelayMs, type Computing } from "../src/computing";
import { loadView } from "../src/views/common/loadView";

(globalThis as unknown as { window: typeof globalThis }).window = globalThis;

const json = (body: unknown, status = 200): Response =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

const computing = (progress: number | null, retry = 1): Response =>
  json({ error: "computing operators", state: "computing", analysis: "operators", progress, retry_after_ms: retry }, 409);

/** A fetch answering from a list, in order (the last answer repeats), recording the URLs. */
function scripted(answers: (() => Response)[]): { fetch: typeof fetch; urls: string[] } {
  const urls: string[] = [];
  const fetchImpl = (input: string | URL | Request): Promise<Response> => {
    urls.push(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
    const next = answers[Math.min(urls.length - 1, answers.length - 1)];
    return Promise.resolve((next ?? (() => json(null)))());
  };
  return { fetch: fetchImpl, urls };
}

describe("computingOf / retryDelayMs / computingLine", () => {
  it("reads the server's computing body and nothing else", () => {
    assert.deepEqual(computingOf({ error: "x", state: "computing", analysis: "diff/node", progress: 0.42, retry_after_ms: 700 }),
      { analysis: "diff/node", progress: 0.42, retryAfterMs: 700 });
    assert.deepEqual(computingOf({ error: "x", state: "computing", analysis: "the timeline index", progress: null, retry_after_ms: 300 }),
      { analysis: "the timeline index", progress: null, retryAfterMs: 300 });
    assert.equal(computingOf({ error: "w.pt.trace.json is still loading" }), null); // a span still loading
    assert.equal(computingOf(null), null);
  });

  it("backs off from the server's hint by a quarter each time, within 0.2 and 2 s", () => {
    assert.deepEqual([0, 1, 2, 3].map((n) => retryDelayMs(n, 400)), [400, 500, 625, 781]);
    assert.equal(retryDelayMs(0, 50), 200);
    assert.equal(retryDelayMs(20, 1000), 2000);
  });

  it("says what is computing and how far, in whole percent", () => {
    assert.equal(computingLine({ analysis: "operators", progress: 0.426, retryAfterMs: 1 }), "Computing operators… 42 %");
    assert.equal(computingLine({ analysis: "the timeline index", progress: null, retryAfterMs: 1 }), "Computing the timeline index…");
  });
});

const SPAN = { run: "r", worker: "w", span: "1" };

describe("api: 409 computing", () => {
  it("asks again until the answer comes, telling the listeners each progress", async () => {
    const { fetch, urls } = scripted([() => computing(0.1), () => computing(0.6), () => json({ rows: [1] })]);
    const seen: [string, Computing | null][] = [];
    const stop = onComputing((route, c) => seen.push([route, c]));
    try {
      assert.deepEqual(await createApi(fetch).get("operators", { run: "r", worker: "w", span: "1" }), { rows: [1] });
    } finally {
      stop();
    }
    assert.deepEqual(urls, Array<string>(3).fill("./operators?run=r&worker=w&span=1"));
    // each progress, then "over" once the answer came
    assert.deepEqual(seen.map(([route, c]) => [route, c?.progress]), [["operators", 0.1], ["operators", 0.6], ["operators", undefined]]);
  });

  it("a 409 still loading stays an error; leaving the page stops the asking", async () => {
    const loading = scripted([() => json({ error: "w.pt.trace.json is still loading" }, 409)]);
    await assert.rejects(createApi(loading.fetch).get("operators", SPAN), (err: unknown) =>
      err instanceof ApiError && err.status === 409 && err.message === "w.pt.trace.json is still loading");
    const leave = new AbortController();
    const forever = scripted([() => computing(0.5, 60_000)]);
    const pending = createApi(forever.fetch).get("operators", SPAN, { signal: leave.signal });
    await new Promise((r) => setTimeout(r, 10));
    leave.abort();
    await assert.rejects(pending, (err: unknown) => err instanceof ApiError && err.kind === "aborted");
    assert.equal(forever.urls.length, 1);
  });

  it("loadView's line shows the progress, then the page gets its answer", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    let asked = 0;
    const fetchImpl = async (): Promise<Response> => {
      asked++;
      if (asked === 1) return computing(0.42);
      await gate;
      return json({ rows: [2] });
    };
    const el = container();
    const api = createApi(fetchImpl);
    const pending = loadView({ signal: new AbortController().signal }, el,
      { ops: () => api.get("operators", SPAN) }, { what: "the operators" });
    while (asked < 2) await new Promise((r) => setTimeout(r, 1));
    assert.equal(el.textContent, "Computing operators… 42 %");
    release();
    assert.deepEqual(await pending, { ops: { rows: [2] } });
  });
});

describe("computingStatus (the shell's line)", () => {
  it("lists what is computing per route, leaves the Trace view's windows out, and hides when all are over", () => {
    const el = computingStatus();
    assert.equal(el.hidden, true);
    announceComputing("operators", { analysis: "operators", progress: 0.25, retryAfterMs: 500 });
    announceComputing("modules", { analysis: "modules", progress: null, retryAfterMs: 500 });
    announceComputing("trace/window", { analysis: "the timeline index", progress: 0.5, retryAfterMs: 500 });
    assert.equal(el.hidden, false);
    assert.deepEqual([...el.children].map((c) => c.textContent), ["Computing operators… 25 %", "Computing modules…"]);
    announceComputing("operators", { analysis: "operators", progress: 0.75, retryAfterMs: 500 });
    announceComputing("modules", null);
    assert.deepEqual([...el.children].map((c) => c.textContent), ["Computing operators… 75 %"]);
    announceComputing("operators", null);
    assert.equal(el.hidden, true);
  });
});
