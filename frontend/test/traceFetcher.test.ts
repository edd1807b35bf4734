/** traceFetcher.ts: which window the Trace view asks for, when the one in hand still serves, and the stale-answer guard. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Answer } from "../src/types";
import type { WindowData } from "../src/views/trace/traceData";
import { covers, MAX_WIDTH_PX, WindowFetcher, windowQuery, type WindowQuery } from "../src/views/trace/traceFetcher";

const BASE = { bounds: [0, 100_000] as const, plotW: 1000, levelsKey: "", skipKey: "", first: false, hostLevels: 4, category: null };

describe("windowQuery", () => {
  it("asks for the view with half a span more on each side, a column a pixel", () => {
    assert.deepEqual(windowQuery({ ...BASE, view: { start: 10_000, end: 12_000 } }),
      { start_us: 9000, end_us: 13_000, width_px: 2000 });
  });

  it("keeps the margin within the trace, and the first window asks for the host's first levels", () => {
    assert.deepEqual(windowQuery({ ...BASE, view: { start: 0, end: 2000 }, first: true, levelsKey: "3:1", skipKey: "4:2", category: "Kernel" }),
      { start_us: 0, end_us: 3000, width_px: 1500, levels: "3:1", skip: "4:2", host_levels: 4, category: "Kernel" });
  });

  it("caps the columns at MAX_WIDTH_PX, shrinking the margin", () => {
    const q = windowQuery({ ...BASE, bounds: null, plotW: 6000, view: { start: 0, end: 6000 } });
    assert.equal(q.width_px, MAX_WIDTH_PX);
    assert.equal((q.end_us ?? 0) - (q.start_us ?? 0), MAX_WIDTH_PX); // 1 µs a pixel, as the view
  });

  it("without a view asks for the whole trace at the plot's width", () => {
    assert.deepEqual(windowQuery({ ...BASE, view: null }), { width_px: 1000 });
  });
});

describe("covers", () => {
  const data = { levelsKey: "|", category: null, bounds: [0, 100_000], t0: 9000, t1: 13_000, pxUs: 2 } as unknown as WindowData;
  const axis = { width: 1100, labelW: 100 };

  it("serves a view inside it at about its resolution", () => {
    assert.equal(covers(data, { start: 10_000, end: 12_000 }, axis, "|", null), true);
    assert.equal(covers(data, { start: 9500, end: 11_500 }, axis, "|", null), true);
  });

  it("not a view beyond it, zoomed far, or with other lanes or another category", () => {
    assert.equal(covers(data, { start: 12_000, end: 14_000 }, axis, "|", null), false);
    assert.equal(covers(data, { start: 10_000, end: 11_000 }, axis, "|", null), false); // 1 µs a pixel: too coarse
    assert.equal(covers(data, { start: 10_000, end: 12_000 }, axis, "3:1|", null), false);
    assert.equal(covers(data, { start: 10_000, end: 12_000 }, axis, "|", "Kernel"), false);
  });
});

type WindowAnswer = Answer<"trace/window">;

/** A fetcher whose requests resolve when the test says, recording what reached the page. */
function harness() {
  const pending: { query: WindowQuery; resolve: (a: WindowAnswer) => void; reject: (e: unknown) => void; signal: AbortSignal }[] = [];
  const answers: WindowQuery[] = [];
  const failures: unknown[] = [];
  const loading: (string | null | undefined)[] = [];
  const leave = new AbortController();
  const fetcher = new WindowFetcher({
    get: (query, signal) => new Promise<WindowAnswer>((resolve, reject) => { pending.push({ query, resolve, reject, signal }); }),
    leave: leave.signal,
    loading: (text) => { loading.push(text); },
    answer: (_resp, query) => { answers.push(query); },
    failed: (err) => { failures.push(err); },
  });
  return { fetcher, pending, answers, failures, loading, leave };
}

function req(h: ReturnType<typeof harness>, i: number): ReturnType<typeof harness>["pending"][number] {
  const r = h.pending[i];
  assert.ok(r, `request ${i} was made`);
  return r;
}

const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 0));
const ANSWER = {} as WindowAnswer;

describe("WindowFetcher", () => {
  it("drops an answer that comes after a newer request, and aborts the older request", async () => {
    const h = harness();
    h.fetcher.fetch({ width_px: 1 });
    h.fetcher.fetch({ width_px: 2 });
    assert.equal(req(h, 0).signal.aborted, true);
    req(h, 1).resolve(ANSWER);
    req(h, 0).resolve(ANSWER); // the stale one, last
    await settle();
    assert.deepEqual(h.answers, [{ width_px: 2 }]);
    assert.equal(h.fetcher.busy, false);
    assert.deepEqual(h.loading, [null]); // hidden once, by the newest
  });

  it("says a failure of the newest request only, and nothing once the page is left", async () => {
    const h = harness();
    h.fetcher.fetch({ width_px: 1 });
    h.fetcher.fetch({ width_px: 2 });
    req(h, 0).reject(new Error("old"));
    req(h, 1).reject(new Error("new"));
    await settle();
    assert.deepEqual(h.failures.map((e) => (e as Error).message), ["new"]);
    h.fetcher.fetch({ width_px: 3 });
    h.leave.abort();
    assert.equal(req(h, 2).signal.aborted, true);
    req(h, 2).reject(new Error("left"));
    await settle();
    assert.equal(h.failures.length, 1);
  });

  it("debounces: many asks in a burst run once", async () => {
    const h = harness();
    let asked = 0;
    assert.equal(h.fetcher.scheduled, false);
    for (let i = 0; i < 5; i++) h.fetcher.schedule(() => { asked++; });
    assert.equal(h.fetcher.scheduled, true); // asked for, waiting for the debounce (what the debug hook says)
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(asked, 1);
    assert.equal(h.fetcher.scheduled, false);
    h.fetcher.schedule(() => { asked++; });
    h.fetcher.stop();
    assert.equal(h.fetcher.scheduled, false);
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(asked, 1); // stopped: the scheduled ask never runs
  });
});
