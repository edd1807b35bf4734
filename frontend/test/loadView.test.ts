/** loadView: the loading line, the fetches in parallel, and an error card in the page's place when one fails. */
import { container, testids } from "./dom";
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ApiError } from "../src/api";
import { loadView } from "../src/views/common/loadView";

/** A promise the test settles by hand, to look at the page while a fetch is in flight. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe("loadView", () => {
  it("shows the loading line, starts every fetch at once, and returns the answers by name", async () => {
    const el = container();
    const ctx = { signal: new AbortController().signal };
    const kernels = deferred<{ rows: number[] }>();
    const started: string[] = [];
    const pending = loadView(ctx, el, {
      kernels: () => (started.push("kernels"), kernels.promise),
      total: () => (started.push("total"), Promise.resolve(42)),
    }, { what: "the kernels" });
    assert.equal(el.textContent, "Loading the kernels…");
    assert.deepEqual(testids(el), ["view-loading"]);
    assert.deepEqual(started, ["kernels", "total"]);
    kernels.resolve({ rows: [1, 2] });
    const data = await pending;
    assert.deepEqual(data, { kernels: { rows: [1, 2] }, total: 42 });
    assert.equal(el.textContent, "Loading the kernels…"); // the page renders itself from here
  });

  it("a custom loading line", async () => {
    const el = container();
    const pending = loadView({ signal: new AbortController().signal }, el, { a: () => Promise.resolve(1) },
      { what: "the GPU insights", loading: "Loading GPU insights…" });
    assert.equal(el.textContent, "Loading GPU insights…");
    assert.deepEqual(await pending, { a: 1 });
  });

  it("a failed fetch puts an error card with the server's sentence in the page's place", async () => {
    const el = container();
    const data = await loadView({ signal: new AbortController().signal }, el, {
      ok: () => Promise.resolve(1),
      bad: () => Promise.reject(new ApiError("worker 'w' of run 'r' has no span '9'", "http", 404, "kernels")),
    }, { what: "the kernels" });
    assert.equal(data, null);
    assert.deepEqual(testids(el), ["error-card"]);
    assert.equal(el.querySelector("h3")?.textContent, "Could not load the kernels");
    assert.equal(el.querySelector("p")?.textContent, "worker 'w' of run 'r' has no span '9'");
  });

  it("a trace still loading (409) gets the 'Still loading' card", async () => {
    const el = container();
    const data = await loadView({ signal: new AbortController().signal }, el, {
      a: () => Promise.reject(new ApiError("w.pt.trace.json is still loading", "http", 409, "kernels")),
    }, { what: "the kernels" });
    assert.equal(data, null);
    assert.deepEqual(testids(el), ["still-loading"]);
    assert.match(el.textContent, /Still loading.*w\.pt\.trace\.json is still loading/);
  });

  it("after the user left, nothing is returned and the page is not touched", async () => {
    for (const fail of [false, true]) {
      const el = container();
      const leave = new AbortController();
      const answer = deferred<number>();
      const pending = loadView({ signal: leave.signal }, el, { a: () => answer.promise }, { what: "the kernels" });
      leave.abort();
      if (fail) answer.reject(new ApiError("The request was cancelled.", "aborted", 0, "kernels"));
      else answer.resolve(1);
      assert.equal(await pending, null);
      assert.deepEqual(testids(el), ["view-loading"], `fail=${String(fail)}`);
    }
  });
});
