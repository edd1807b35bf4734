/** api.ts: relative URLs, typed GETs of the contract's routes, and every failure as an ApiError saying which. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ApiError, buildUrl, createApi, WRITE_HEADER } from "../src/api";

// api.ts keeps its timers on `window`, as in the browser
(globalThis as unknown as { window: typeof globalThis }).window = globalThis;

/** A fetch that records the URLs asked for and answers with `reply`. */
function fakeFetch(reply: (url: string, init?: RequestInit) => Promise<Response>): { fetch: typeof fetch; urls: string[] } {
  const urls: string[] = [];
  const fetchImpl = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    urls.push(url);
    return reply(url, init);
  };
  return { fetch: fetchImpl, urls };
}

const json = (body: unknown, status = 200): Promise<Response> =>
  Promise.resolve(new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } }));

const SPAN = { run: "resnet 50", worker: "vm_1", span: "1" };

async function rejection(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ApiError, String(err));
    return err;
  }
  assert.fail("expected an ApiError");
}

describe("buildUrl", () => {
  it("is relative to the plugin root, skips absent parameters and escapes the rest", () => {
    assert.equal(buildUrl("runs"), "./runs");
    assert.equal(buildUrl("/trace/window"), "./trace/window");
    assert.equal(buildUrl("./views", { run: "a&b", span: null, worker: undefined, width_px: 800, flag: true }),
      "./views?run=a%26b&width_px=800&flag=true");
  });
});

describe("get (typed by the OpenAPI file)", () => {
  it("asks the route with its query and returns the answer as the contract types it", async () => {
    const { fetch, urls } = fakeFetch(() => json({ group_by: "name", total_us: 12.5, tensor_core_ratio: null, rows: [] }));
    const api = createApi(fetch);
    const kernels = await api.get("kernels", { ...SPAN, group_by: "name" });
    const total: number = kernels.total_us; // typed: a misspelt field does not compile
    assert.equal(total, 12.5);
    assert.deepEqual(urls, ["./kernels?run=resnet+50&worker=vm_1&span=1&group_by=name"]);
    // @ts-expect-error the contract requires worker and span
    await api.get("kernels", { run: "r" });
    // @ts-expect-error group_by is one of the contract's groupings
    await api.get("kernels", { ...SPAN, group_by: "stack" });
  });
});

describe("getJSON failures", () => {
  it("an HTTP error carries the server's sentence and status", async () => {
    const api = createApi(fakeFetch(() => json({ error: "unknown run 'x'" }, 404)).fetch);
    const err = await rejection(api.getJSON("summary", SPAN));
    assert.deepEqual([err.kind, err.status, err.message, err.route, err.unreachable], ["http", 404, "unknown run 'x'", "summary", false]);
  });

  it("an HTTP error without a sentence says the status", async () => {
    const api = createApi(fakeFetch(() => Promise.resolve(new Response("<html>", { status: 502, statusText: "Bad Gateway" }))).fetch);
    const err = await rejection(api.getJSON("summary"));
    assert.equal(err.message, "The server answered 502 Bad Gateway for summary.");
  });

  it("a 200 that is not JSON is a parse error", async () => {
    const api = createApi(fakeFetch(() => Promise.resolve(new Response("<html>proxy login</html>"))).fetch);
    const err = await rejection(api.getJSON("runs"));
    assert.deepEqual([err.kind, err.status], ["parse", 200]);
  });

  it("no answer at all is a network error; a cancelled request says so", async () => {
    const api = createApi(fakeFetch(() => Promise.reject(new TypeError("fetch failed"))).fetch);
    const err = await rejection(api.getJSON("runs"));
    assert.deepEqual([err.kind, err.unreachable, err.message], ["network", true, "The TensorBoard server cannot be reached."]);
    const leave = new AbortController();
    const hanging = createApi(fakeFetch((_, init) => new Promise((_resolve, reject) => {
      init?.signal?.addEventListener("abort", () => { reject(new DOMException("aborted", "AbortError")); });
    })).fetch);
    const pending = rejection(hanging.getJSON("runs", {}, { signal: leave.signal }));
    leave.abort();
    assert.deepEqual([(await pending).kind], ["aborted"]);
  });

  it("a server that does not answer in time is a network error naming the limit", async () => {
    const hanging = createApi(fakeFetch((_, init) => new Promise((_resolve, reject) => {
      init?.signal?.addEventListener("abort", () => { reject(new DOMException("aborted", "AbortError")); });
    })).fetch);
    const err = await rejection(hanging.getJSON("runs", {}, { timeoutMs: 20 }));
    assert.equal(err.kind, "network");
    assert.match(err.message, /^The TensorBoard server did not answer within \d+ s\.$/);
  });
});

describe("postJSON (the capture route)", () => {
  it("POSTs the body as JSON with the plugin's header and returns the answer", async () => {
    const seen: RequestInit[] = [];
    const { fetch, urls } = fakeFetch((_, init) => {
      if (init) seen.push(init);
      return json({ id: "0123456789abcdef", state: "pending" }, 202);
    });
    const answer = await createApi(fetch).postJSON<{ id: string }>("capture", { run: "my run" }, { steps: 3 });
    assert.equal(answer.id, "0123456789abcdef");
    assert.deepEqual(urls, ["./capture?run=my+run"]);
    const init = seen[0];
    assert.ok(init);
    assert.equal(init.method, "POST");
    assert.equal(init.body, JSON.stringify({ steps: 3 }));
    assert.deepEqual(init.headers, { Accept: "application/json", "Content-Type": "application/json", [WRITE_HEADER]: "1" });
    assert.equal(WRITE_HEADER, "X-PTP-Capture");
  });

  it("a refusal carries the server's sentence", async () => {
    const api = createApi(fakeFetch(() => json({ error: "Capture is off on this TensorBoard" }, 403)).fetch);
    const err = await rejection(api.postJSON("capture", { run: "job" }, {}));
    assert.deepEqual([err.kind, err.status, err.message], ["http", 403, "Capture is off on this TensorBoard"]);
  });
});
